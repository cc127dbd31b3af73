#!/usr/bin/env bash
# Bulk load over the Postgres wire protocol: the same CSV sent with psql's \copy
# (COPY ... FROM STDIN) into PostgreSQL (an UNLOGGED table, then a normal, logged one) and into
# saql at each --fsync policy (always, interval = the default, off; a fresh `saql serve` per
# policy), each time into a stream, then the same stream with the Flink comparison's
# tumbling-window query registered; rows/s of each.
#
#   benches/wire/run.sh                         # 2,000,000 events, 3 runs each
#   EVENTS=200000 RUNS=1 benches/wire/run.sh    # quick check
#   SAQL_BIN=/tmp/saql-old POLICIES=interval benches/wire/run.sh   # a given binary, one policy
#
# For saql it also reports the server's peak resident set (VmHWM) after each load, less its
# resident set once started: what a COPY of EVENTS rows costs the server in memory.
#
# Starts and stops everything itself, on 127.0.0.1 only: a throwaway PostgreSQL cluster
# (initdb in a temp dir, as the postgres user when run as root, on a free port; PostgreSQL is
# installed from Debian's packages if absent) and `saql serve` (release build, temp data dir,
# one server at a time). Checks with ss that every server listens on loopback only. The events CSV is benches/flink/events.py's,
# kept in benches/.scratch/ (gitignored). Alert latency is measured by benches/latency.rs.
set -euo pipefail
trap 'echo "run.sh: failed at line $LINENO: $BASH_COMMAND" >&2' ERR

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
events=${EVENTS:-2000000}
runs=${RUNS:-3}
scratch=${SCRATCH:-$repo/benches/.scratch}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/root/.cache/saql-target}
saql=$CARGO_TARGET_DIR/release/saql

pg_bin() { ls -d /usr/lib/postgresql/*/bin 2>/dev/null | sort -V | tail -1; }
if [[ -z "$(pg_bin)" || ! -x "$(pg_bin)/initdb" ]]; then
  echo "installing PostgreSQL from Debian's packages ..."
  apt-get update -qq
  DEBIAN_FRONTEND=noninteractive apt-get install -y -qq postgresql >/dev/null
fi
pg=$(pg_bin)
command -v psql >/dev/null || { echo "run.sh: psql not found" >&2; exit 2; }

if [[ -z "${SAQL_BIN:-}" ]]; then
  echo "building the release saql binary ..."
  (cd "$repo" && cargo build --release --bin saql --quiet)
fi
# Run a copy, taken at once: other checkouts that share CARGO_TARGET_DIR build to the same
# release/saql path (cargo links this checkout's binary there on every build, even when fresh).
saql_copy=$(mktemp /tmp/saql-wire-bin.XXXXXX)
trap 'rm -f "$saql_copy"' EXIT
cp "${SAQL_BIN:-$saql}" "$saql_copy"
chmod 755 "$saql_copy"
saql=$saql_copy
if [[ -n "${SAQL_BIN:-}" ]]; then
  echo "saql binary: $SAQL_BIN"
else
  echo "saql binary: built from $repo at $(cd "$repo" && git rev-parse --short HEAD)$(cd "$repo" && git diff --quiet HEAD -- src Cargo.toml || echo ' plus uncommitted changes')"
fi

mkdir -p "$scratch"
csv=$scratch/events-$events.csv
if [[ ! -f "$csv" ]]; then
  echo "generating $csv ..."
  python3 "$repo/benches/flink/events.py" --events "$events" --out "$csv"
fi

free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

tmp=$(mktemp -d /tmp/saql-wire.XXXXXX)
pg_pid=""
saql_pid=""
as_pg=()
if [[ $(id -u) -eq 0 ]]; then
  # initdb and postgres refuse to run as root.
  chown postgres: "$tmp"
  as_pg=(runuser -u postgres --)
fi
cleanup() {
  if [[ -n "$saql_pid" ]]; then kill "$saql_pid" 2>/dev/null || true; wait "$saql_pid" 2>/dev/null || true; fi
  if [[ -n "$pg_pid" ]]; then "${as_pg[@]}" "$pg/pg_ctl" -D "$tmp/pg" -m fast stop >/dev/null 2>&1 || true; fi
  rm -rf "$tmp" "$saql_copy"
}
trap cleanup EXIT

# --- PostgreSQL: a throwaway cluster on 127.0.0.1 -------------------------------------------
pg_port=$(free_port)
"${as_pg[@]}" "$pg/initdb" -D "$tmp/pg" -U bench --auth=trust --no-sync >"$tmp/initdb.log"
"${as_pg[@]}" "$pg/pg_ctl" -D "$tmp/pg" -l "$tmp/pg/server.log" -w start \
  -o "-c listen_addresses=127.0.0.1 -c port=$pg_port -c unix_socket_directories=$tmp" >/dev/null
pg_pid=$(head -1 "$tmp/pg/postmaster.pid")
pg_psql=(psql -X -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$pg_port" -U bench -d postgres)
columns="ts TIMESTAMP NOT NULL, key BIGINT, host TEXT, op TEXT, amount BIGINT"
"${pg_psql[@]}" -c "CREATE UNLOGGED TABLE events ($columns)" >/dev/null
"${pg_psql[@]}" -c "CREATE TABLE events_logged ($columns)" >/dev/null
"${pg_psql[@]}" -c "SELECT relname, relpersistence FROM pg_class WHERE relname LIKE 'events%' ORDER BY 1"
"${pg_psql[@]}" -At -c "SELECT 'PostgreSQL ' || current_setting('server_version') || ': fsync=' ||
  current_setting('fsync') || ', synchronous_commit=' || current_setting('synchronous_commit') ||
  ', wal_level=' || current_setting('wal_level') || ', full_page_writes=' ||
  current_setting('full_page_writes') || ', max_wal_size=' || current_setting('max_wal_size')"

# --- saql serve on 127.0.0.1, one server per fsync policy ----------------------------------------
saql_psql=()
start_saql() { # fsync policy
  saql_port=$(free_port)
  RUST_LOG=warn "$saql" serve --listen "127.0.0.1:$saql_port" --data-dir "$tmp/saql-$1" --fsync "$1" &
  saql_pid=$!
  saql_psql=(psql -X -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$saql_port" -U saql -d saql)
  local up=""
  for _ in $(seq 300); do
    if "${saql_psql[@]}" -c "SHOW STREAMS" >/dev/null 2>&1; then up=1; break; fi
    sleep 0.1
  done
  [[ -n "$up" ]] || { echo "run.sh: saql serve did not answer on 127.0.0.1:$saql_port within 30 s" >&2; exit 2; }
  check_listeners
  saql_rss_start=$(rss_kib VmRSS)
}
# The saql server's resident set (VmRSS) or its peak so far (VmHWM), in KiB.
rss_kib() { awk -v k="$1:" '$1 == k { print $2 }' "/proc/$saql_pid/status"; }
stop_saql() {
  kill "$saql_pid"
  wait "$saql_pid" || true
  saql_pid=""
}
stream_ddl="CREATE STREAM events (
  ts TIMESTAMP NOT NULL, key BIGINT, host TEXT, op TEXT, amount BIGINT,
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND)"
query_ddl=$(sed -n '/^CREATE CONTINUOUS QUERY/,/;/p' "$repo/benches/flink/tumble.saql.sql")

# --- nothing listens beyond loopback -----------------------------------------------------------
check_listeners() {
  local listeners
  listeners=$(ss -ltnpH | { grep -E "pid=($pg_pid|$saql_pid)," || true; } | awk '{print $4}' | sort -u)
  echo "listening: $(echo $listeners)"
  if [[ $(echo "$listeners" | grep -c .) -lt 2 ]]; then
    echo "run.sh: expected PostgreSQL and saql to listen, found: ${listeners:-nothing}" >&2
    exit 2
  fi
  if echo "$listeners" | grep -vqE '^(127\.[0-9.]+|\[::1\]|\[::ffff:127\.[0-9.]+\]):[0-9]+$'; then
    echo "NOT LOOPBACK: a server listens beyond 127.0.0.1; stopping" >&2
    exit 1
  fi
}

# --- the loads -----------------------------------------------------------------------------
results=$tmp/results
memory=$tmp/memory
: >"$results"
: >"$memory"
load() { # name, table, setup SQL, psql command...
  local name=$1 table=$2 setup=$3
  shift 3
  local copy="\\copy $table FROM '$csv' WITH (FORMAT csv, HEADER true)"
  for run in $(seq "$runs"); do
    "$@" -c "$setup" >/dev/null
    local start end tag
    start=$(date +%s.%N)
    tag=$("$@" -c "$copy")
    end=$(date +%s.%N)
    if [[ "$tag" != "COPY $events" ]]; then
      echo "MISMATCH $name run $run: the server answered \"$tag\", expected \"COPY $events\"" >&2
      exit 1
    fi
    echo "$name $run $start $end" | tee -a "$results" | awk -v n="$events" \
      '{ printf "%-42s run %s: %6.2f s, %12.0f rows/s\n", $1, $2, $4 - $3, n / ($4 - $3) }'
  done
  if [[ "$name" == saql* ]]; then
    local peak
    peak=$(rss_kib VmHWM)
    echo "$name $peak $saql_rss_start" >>"$memory"
    echo "$name: server peak RSS $((peak / 1024)) MiB, $(((peak - saql_rss_start) / 1024)) MiB above its start"
  fi
}
echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'), nproc: $(nproc), load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "file system of $tmp: $(df -T "$tmp" | awk 'NR == 2 { print $2 " on " $1 }')"
echo "$events rows from $csv, $runs runs each, with psql's \\copy"
load "PostgreSQL(UNLOGGED)" events "TRUNCATE events" "${pg_psql[@]}"
load "PostgreSQL(LOGGED)" events_logged "TRUNCATE events_logged" "${pg_psql[@]}"
"${pg_psql[@]}" -At -c "SELECT 'rows: ' || (SELECT count(*) FROM events) || ' unlogged, ' ||
  (SELECT count(*) FROM events_logged) || ' logged'"

for policy in ${POLICIES:-always interval off}; do
  start_saql "$policy"
  load "saql(fsync=$policy,stream)" events "DROP STREAM IF EXISTS events; $stream_ddl" "${saql_psql[@]}"
  load "saql(fsync=$policy,stream+tumble-query)" events \
    "DROP QUERY IF EXISTS tumble; DROP STREAM IF EXISTS events; $stream_ddl; $query_ddl" "${saql_psql[@]}"
  # The stream's counters: every row arrived, none late.
  "${saql_psql[@]}" -c "SHOW STREAMS" | cut -c1-120
  "${saql_psql[@]}" -c "SHOW QUERIES" | cut -c1-120
  echo "saql data directory after --fsync $policy: $(du -sh "$tmp/saql-$policy" | cut -f1)"
  stop_saql
  rm -rf "$tmp/saql-$policy"
done
echo "load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"

python3 - "$results" "$events" "$memory" <<'EOF'
import statistics, sys
peak = {}
for line in open(sys.argv[3]):
    name, hwm, start = line.split()
    peak[name] = (int(hwm) / 1024, (int(hwm) - int(start)) / 1024)
runs = {}
for line in open(sys.argv[1]):
    name, _, start, end = line.split()
    runs.setdefault(name, []).append(float(end) - float(start))
events = int(sys.argv[2])
unlogged = statistics.median(runs["PostgreSQL(UNLOGGED)"])
logged = statistics.median(runs["PostgreSQL(LOGGED)"])
print("\n| target | rows | median s | rows/s | speed vs PostgreSQL UNLOGGED "
      "| speed vs PostgreSQL LOGGED | server peak RSS, above start (MiB) | all runs (s) |")
print("|---|---:|---:|---:|---:|---:|---:|---|")
for name, secs in runs.items():
    m = statistics.median(secs)
    mem = f"{peak[name][0]:.0f}, {peak[name][1]:.0f}" if name in peak else ""
    print(f"| {name} | {events:,} | {m:.2f} | {events / m:,.0f} | {unlogged / m:.2f}x "
          f"| {logged / m:.2f}x | {mem} | {', '.join(f'{s:.2f}' for s in secs)} |")
EOF
