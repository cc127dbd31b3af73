#!/usr/bin/env bash
# Real PostgreSQL clients against the real `saql serve`: Python (psycopg 3, psycopg2, asyncpg,
# SQLAlchemy 2 + pandas, and the statements of Grafana, Metabase and pgcli: test_tools.py),
# pgcli driven in tmux (when tmux is there), psql's \copy (query) TO, node (pg,
# pg-query-stream, pg-copy-streams, knex; installed with npm into ~/.cache/saql-clients-node)
# when node is there, and Java (pgJDBC, its DatabaseMetaData and DBeaver's catalog statements)
# when a JDK and Debian's libpostgresql-jdbc-java are installed. Exits non-zero when any check
# fails.
#
#   tests/clients/run.sh              # builds saql (debug) unless SAQL_BIN names a binary
#
# The Python packages go to a venv outside the repository ($SAQL_CLIENTS_VENV, default
# ~/.cache/saql-clients-venv), installed once. The server listens on a free port of
# 127.0.0.1 with a temporary data directory, and is stopped at the end.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
repo="$(cd "$here/../.." && pwd)"
venv="${SAQL_CLIENTS_VENV:-$HOME/.cache/saql-clients-venv}"
started=$(date +%s)

if [[ ! -x "$venv/bin/python" ]] || ! "$venv/bin/python" -c \
    'import psycopg, psycopg2, asyncpg, sqlalchemy, pandas, pgcli' 2>/dev/null; then
    echo "== installing the Python clients into $venv"
    python3 -m venv "$venv"
    "$venv/bin/pip" install --quiet --disable-pip-version-check \
        'psycopg[binary]>=3.1' psycopg2-binary asyncpg 'sqlalchemy>=2' pandas pgcli
fi

# pgJDBC and tmux are Debian packages: installed here when missing and this is a root shell
# with apt-get (CI), else their checks are skipped.
missing=()
[[ -f /usr/share/java/postgresql.jar ]] || missing+=(libpostgresql-jdbc-java)
command -v tmux >/dev/null || missing+=(tmux)
if (( ${#missing[@]} )) && [[ $EUID == 0 ]] && command -v apt-get >/dev/null; then
    echo "== installing ${missing[*]}"
    apt-get install -y -qq "${missing[@]}" >/dev/null 2>&1 \
        || { apt-get update -qq >/dev/null 2>&1 && apt-get install -y -qq "${missing[@]}" >/dev/null 2>&1; } \
        || echo "   (could not install ${missing[*]}: their checks are skipped)"
fi

if [[ -z "${SAQL_BIN:-}" ]]; then
    # Built as `cargo test` builds it (dev-dependency features unified): after `cargo test`
    # this is a no-op, where `cargo build` would compile the dependencies a second time.
    echo "== building saql"
    (cd "$repo" && cargo test --quiet --no-run --test all)
    SAQL_BIN="${CARGO_TARGET_DIR:-$repo/target}/debug/saql"
fi

data="$(mktemp -d)"
port="$("$venv/bin/python" -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')"
log="$data/server.log"
"$SAQL_BIN" serve --listen "127.0.0.1:$port" --data-dir "$data/db" --workers 2 >"$log" 2>&1 &
server=$!
cleanup() {
    kill "$server" 2>/dev/null || true
    wait "$server" 2>/dev/null || true
    rm -rf "$data"
}
trap cleanup EXIT

for _ in $(seq 1 100); do
    if "$venv/bin/python" -c "import socket; socket.create_connection(('127.0.0.1', $port), 0.2)" 2>/dev/null; then
        break
    fi
    if ! kill -0 "$server" 2>/dev/null; then
        echo "saql serve exited:"; cat "$log"; exit 1
    fi
    sleep 0.1
done
echo "== saql serve on 127.0.0.1:$port ($SAQL_BIN)"

failed=0
echo "== Python"
SAQL_PORT="$port" timeout 300 "$venv/bin/python" "$here/test_python.py" || failed=1
echo "== Grafana, Metabase, pgcli statements; SQLAlchemy writes"
SAQL_PORT="$port" timeout 120 "$venv/bin/python" "$here/test_tools.py" || failed=1

if command -v tmux >/dev/null && command -v psql >/dev/null; then
    echo "== pgcli in tmux"
    timeout 120 "$here/pgcli_tmux.sh" "$venv/bin/pgcli" "$port" || failed=1
else
    echo "== pgcli in tmux: SKIPPED (needs tmux and psql; test_tools.py replays its statements)"
fi

if command -v psql >/dev/null; then
    echo "== psql \\copy (query) TO 'file'"
    out="$data/copy.csv"
    psql -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$port" -U saql -d saql \
        -c "CREATE STREAM copy_events (ts TIMESTAMP NOT NULL, host TEXT, n BIGINT)" \
        -c "INSERT INTO copy_events VALUES ('2026-12-04 10:00:00', 'a', 1), ('2026-12-04 10:00:01', 'b', 2)" \
        -c "\\copy (SELECT host, n FROM copy_events ORDER BY ts) TO '$out' WITH (FORMAT csv, HEADER)" \
        && [[ "$(cat "$out")" == $'host,n\na,1\nb,2' ]] \
        && echo "PASS psql: \\copy (query) TO 'file' wrote the rows" \
        || { echo "FAIL psql: \\copy (query) TO 'file'"; cat "$out" 2>/dev/null; failed=1; }
fi

if command -v node >/dev/null && command -v npm >/dev/null; then
    modules="${SAQL_CLIENTS_NODE:-$HOME/.cache/saql-clients-node}"
    if [[ ! -d "$modules/node_modules/pg-copy-streams" || ! -d "$modules/node_modules/pg-query-stream" \
          || ! -d "$modules/node_modules/knex" ]]; then
        echo "== installing the node clients into $modules"
        mkdir -p "$modules"
        [[ -f "$modules/package.json" ]] || echo '{"name":"saql-clients","private":true}' >"$modules/package.json"
        (cd "$modules" && npm install --silent --no-audit --no-fund pg pg-query-stream pg-copy-streams knex)
    fi
    echo "== node ($(node --version), pg $(node -p "require('$modules/node_modules/pg/package.json').version"))"
    NODE_PATH="$modules/node_modules" SAQL_PORT="$port" timeout 300 node "$here/test_node.js" || failed=1
    echo "== knex $(node -p "require('$modules/node_modules/knex/package.json').version")"
    NODE_PATH="$modules/node_modules" SAQL_PORT="$port" timeout 120 node "$here/test_knex.js" || failed=1
else
    echo "== node: SKIPPED (needs node and npm)"
fi

jar=/usr/share/java/postgresql.jar
if command -v javac >/dev/null && [[ -f "$jar" ]]; then
    echo "== Java (pgJDBC $(unzip -p "$jar" META-INF/MANIFEST.MF 2>/dev/null | sed -n 's/^Implementation-Version: //p' | tr -d '\r'))"
    classes="$data/classes"
    mkdir -p "$classes"
    javac -d "$classes" -cp "$jar" "$here/JdbcTest.java"
    SAQL_PORT="$port" timeout 300 java -cp "$classes:$jar" JdbcTest || failed=1
else
    echo "== Java: SKIPPED (needs javac and $jar: apt-get install default-jdk-headless libpostgresql-jdbc-java)"
fi

if ! kill -0 "$server" 2>/dev/null; then
    echo "saql serve died during the run:"; tail -20 "$log"; failed=1
fi
echo "== done in $(( $(date +%s) - started ))s: $([[ $failed == 0 ]] && echo ALL PASSED || echo FAILURES)"
exit $failed
