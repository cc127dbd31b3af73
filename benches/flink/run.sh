#!/usr/bin/env bash
# saql against Apache Flink (PyFlink's local mini-cluster) on the same events and query.
#
#   benches/flink/run.sh                         # 2,000,000 events, 3 runs, Flink at p=1 and p=2
#   EVENTS=200000 RUNS=1 benches/flink/run.sh    # quick check
#   SAQL_BENCH_MATCH=1 benches/flink/run.sh      # also the MATCH_RECOGNIZE query (hook)
#
#   SAQL_BIN=/tmp/saql benches/flink/run.sh      # a given saql binary instead of building one
#
# Sets up what it needs: the venv with apache-flink that tests/flink/setup.sh installs
# (~/.cache/saql-flink-venv; Java 17 must be on PATH), the release saql binary (cargo build
# --release, CARGO_TARGET_DIR defaults to the shared /root/.cache/saql-target), the events CSV
# under benches/.scratch/ (gitignored).
# Everything binds to 127.0.0.1; bench.py checks the Flink jobs' listeners with ss while they run.
set -euo pipefail
trap 'echo "run.sh: failed at line $LINENO: $BASH_COMMAND" >&2' ERR

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
events=${EVENTS:-2000000}
runs=${RUNS:-3}
parallelism=${PARALLELISM:-1,2}
flink_version=${FLINK_VERSION:-2.3.0}
scratch=${SCRATCH:-$repo/benches/.scratch}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/root/.cache/saql-target}

java_major=$(java -version 2>&1 | sed -n 's/.*version "\([0-9]*\).*/\1/p' | head -1)
if [[ -z "$java_major" || "$java_major" -lt 17 ]]; then
  echo "run.sh: Flink $flink_version needs Java 17 or newer on PATH (found: ${java_major:-none})" >&2
  exit 2
fi

flink_python=$(FLINK_VERSION=$flink_version "$repo/tests/flink/setup.sh")

if [[ -z "${SAQL_BIN:-}" ]]; then
  echo "building the release saql binary ..."
  (cd "$repo" && cargo build --release --bin saql --quiet)
  SAQL_BIN=$CARGO_TARGET_DIR/release/saql
fi

match=()
if [[ -n "${SAQL_BENCH_MATCH:-}" ]]; then
  match=(--match)
fi

echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'), nproc: $(nproc), load: $(cut -d' ' -f1-3 /proc/loadavg)"
exec python3 "$here/bench.py" \
  --events "$events" --runs "$runs" --parallelism "$parallelism" "${match[@]}" \
  --saql "$SAQL_BIN" --flink-python "$flink_python" \
  --scratch "$scratch"
