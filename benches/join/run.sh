#!/usr/bin/env bash
# The join benchmark: `saql run` against DuckDB (the same join as a batch query) and Flink
# (parallelism 1, net job time) on the same files, for an interval join of two streams
# (queries/start_then_connect.sql's join) and a lookup join of a stream against a table of
# 1M rows, at N events per stream; every system's rows are checked equal; peak RSS shows
# whether join state stays flat as N grows. See bench.py for what is timed.
#
#   benches/join/run.sh                                # N = 1M, 5M, 20M; 3 runs each
#   SIZES=20000 RUNS=1 benches/join/run.sh             # quick check
#   SYSTEMS=saql,duckdb JOINS=lookup benches/join/run.sh
#   SAQL_BIN=target/debug/saql SIZES=20000 RUNS=1 benches/join/run.sh   # without a release build
#   CPU=1 benches/join/run.sh                          # pin saql and DuckDB to core 1 (default 0)
#
# Sets up what it needs: the release saql binary (CARGO_TARGET_DIR, default
# /root/.cache/saql-target-release), DuckDB in a venv (~/.cache/saql-bench-venv, as
# benches/replay makes it), PyFlink (tests/flink/setup.sh's venv, ~/.cache/saql-flink-venv;
# Java 17 on PATH). Files go to benches/.scratch/ (gitignored).
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
sizes=${SIZES:-1000000,5000000,20000000}
sizes=${sizes// /,}
scratch=${SCRATCH:-$repo/benches/.scratch}
systems=${SYSTEMS:-saql,duckdb,flink}
venv=${DUCKDB_VENV:-$HOME/.cache/saql-bench-venv}
if [[ ! -x "$venv/bin/python" ]] || ! "$venv/bin/python" -c 'import duckdb' 2>/dev/null; then
  python3 -m venv "$venv" && "$venv/bin/pip" install --quiet duckdb
fi
flink_python=""
if [[ ",$systems," == *,flink,* ]]; then
  flink_python=${FLINK_PYTHON:-$("$repo/tests/flink/setup.sh" | tail -1)}
fi
if [[ -z "${SAQL_BIN:-}" ]]; then
  export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/root/.cache/saql-target-release}
  (cd "$repo" && cargo build --release --bin saql --quiet)
  SAQL_BIN=$CARGO_TARGET_DIR/release/saql
fi
echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'), nproc: $(nproc), load: $(cut -d' ' -f1-3 /proc/loadavg), saql: $SAQL_BIN"
exec python3 "$here/bench.py" --saql "$SAQL_BIN" --duckdb-python "$venv/bin/python" \
  ${flink_python:+--flink-python "$flink_python"} --scratch "$scratch" --sizes "$sizes" \
  --runs "${RUNS:-3}" --systems "$systems" --joins "${JOINS:-interval,lookup}" \
  --table-rows "${TABLE_ROWS:-1000000}" --cpu "${CPU:-0}"
