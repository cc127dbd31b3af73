#!/usr/bin/env bash
# The server's CPU seconds for one COPY: `saql serve --workers W` (pinned to W cores) on a fresh
# data directory, the demo's queries registered (NOQ=1: the streams only), one `\copy` of
# benches/.scratch/proc-2000000.csv (made by benches/wire/cores.sh), then the COPY's wall time
# and the server's CPU-s from /proc/<pid>/stat. PERF=1 records the server with perf (dwarf call
# graphs) into $TMPDIR/copy_cpu.perf.data.
#
#   benches/wire/copy_cpu.sh BIN W        e.g. for b in A B; do benches/wire/copy_cpu.sh $b 1; done
#
# Starts and stops the server itself on 127.0.0.1.
set -euo pipefail
bin=$1; workers=${2:-1}
repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd)
csv=$repo/benches/.scratch/proc-2000000.csv
[[ -f "$csv" ]] || { echo "copy_cpu.sh: $csv missing (run benches/wire/cores.sh once)" >&2; exit 2; }
data=$(mktemp -d /tmp/saql-copy-cpu.XXXXXX)
port=$(python3 -c 'import socket; s=socket.socket(); s.bind(("127.0.0.1",0)); print(s.getsockname()[1])')
RUST_LOG=${RUST_LOG:-warn} taskset -c "0-$((workers - 1))" "$bin" serve --listen "127.0.0.1:$port" \
  --data-dir "$data" --workers "$workers" &
pid=$!
trap 'kill $pid 2>/dev/null || true; wait $pid 2>/dev/null || true; rm -rf "$data"' EXIT
psql_saql=(psql -X -q -h 127.0.0.1 -p "$port" -U saql -d saql)
for _ in $(seq 300); do "${psql_saql[@]}" -c "SHOW STREAMS" >/dev/null 2>&1 && break; sleep 0.1; done
files=("$repo"/queries/*.sql)
[[ -n "${NOQ:-}" ]] && files=("$repo/queries/00_streams.sql")
# Files that read a query declared in a later file succeed on a later pass.
for _ in 1 2 3; do for f in "${files[@]}"; do "${psql_saql[@]}" -f "$f" >/dev/null 2>&1 || true; done; done
if [[ -n "${PERF:-}" ]]; then
  perf record -F 199 --call-graph dwarf,16384 -p "$pid" -o "${TMPDIR:-/tmp}/copy_cpu.perf.data" 2>/dev/null &
  perf_pid=$!
  sleep 0.5
fi
start=$(date +%s.%N)
"${psql_saql[@]}" -c "\\copy proc_events FROM '$csv' WITH (FORMAT csv, HEADER true)"
end=$(date +%s.%N)
[[ -n "${PERF:-}" ]] && { kill -INT "$perf_pid"; wait "$perf_pid" || true; }
tick=$(getconf CLK_TCK)
cpu=$(sed 's/.*) //' "/proc/$pid/stat" | awk -v t="$tick" '{ printf "%.2f", ($12 + $13) / t }')
echo "workers $workers: COPY $(echo "$end - $start" | bc) s, server $cpu CPU-s"
