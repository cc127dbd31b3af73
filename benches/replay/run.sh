#!/usr/bin/env bash
# `saql run` against DuckDB on the same events file and queries (see bench.py).
#
#   benches/replay/run.sh                          # 5,000,000 events, 3 runs, 1 and 2 cores
#   EVENTS=200000 RUNS=1 benches/replay/run.sh     # quick check
#   SAQL_BASELINE=/path/to/older/saql benches/replay/run.sh   # also time an older binary
#
# Sets up what it needs: a venv with duckdb (~/.cache/replay-venv), the release saql binary
# (cargo build --release, CARGO_TARGET_DIR defaults to the shared /root/.cache/saql-target),
# the events CSV under benches/.scratch/ (gitignored). Runs niced; pins each system with taskset.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
events=${EVENTS:-5000000}
runs=${RUNS:-3}
scratch=${SCRATCH:-$repo/benches/.scratch}
venv=${DUCKDB_VENV:-$HOME/.cache/replay-venv}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/root/.cache/saql-target}

if ! "$venv/bin/python" -c "import duckdb" 2>/dev/null; then
  python3 -m venv "$venv"
  "$venv/bin/pip" install --quiet duckdb
fi
if [[ -z "${SAQL_BIN:-}" ]]; then
  (cd "$repo" && cargo build --release --bin saql --quiet)
  SAQL_BIN=$CARGO_TARGET_DIR/release/saql
fi
mkdir -p "$scratch"
data=$scratch/events-$events.csv
[[ -f "$data" ]] || python3 "$repo/benches/flink/events.py" --events "$events" --out "$data"

saql=(--saql "saql=$SAQL_BIN")
[[ -n "${SAQL_BASELINE:-}" ]] && saql+=(--saql "baseline=$SAQL_BASELINE")
echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'), nproc: $(nproc), load: $(cut -d' ' -f1-3 /proc/loadavg)"
exec nice python3 "$here/bench.py" --data "$data" --runs "$runs" --cores "${CORES:-1,2}" \
  --queries "${QUERIES:-tumble,filter}" "${saql[@]}" --duckdb-python "$venv/bin/python" \
  --scratch "$scratch"
