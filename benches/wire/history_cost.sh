#!/usr/bin/env bash
# What writing history costs: for each saql binary given, RUNS times in turn, a fresh
# `saql serve` on one core (taskset -c 0, 127.0.0.1, temp data dir) takes a COPY of EVENTS
# proc_events rows (benches/wire/proc_events.py), then one CHECKPOINT, which writes those rows
# as history segments; prints the CHECKPOINT's wall seconds, the server's CPU seconds during
# it and the bytes of proc_events' history. HISTORY=off shows the checkpoint without history.
#
#   benches/wire/history_cost.sh /tmp/saql-before /tmp/saql-after     # A/B of two builds
#   EVENTS=200000 RUNS=1 benches/wire/history_cost.sh target/release/saql
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
events=${EVENTS:-2000000}
runs=${RUNS:-3}
scratch=${SCRATCH:-$repo/benches/.scratch}
(($#)) || { echo "usage: $0 SAQL_BINARY..." >&2; exit 2; }
command -v psql >/dev/null || { echo "history_cost.sh: psql not found" >&2; exit 2; }
mkdir -p "$scratch"
csv=$scratch/proc-$events.csv
[[ -f "$csv" ]] || python3 "$here/proc_events.py" --events "$events" --out "$csv"
tick=$(getconf CLK_TCK)
pid=""
dir=""
cleanup() {
  if [[ -n "$pid" ]]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  [[ -n "$dir" ]] && rm -rf "$dir"
  return 0
}
trap cleanup EXIT
cpu() { sed 's/.*) //' "/proc/$1/stat" | awk '{ print $12 + $13 }'; }
echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'), load: $(cut -d' ' -f1-3 /proc/loadavg), $events rows, history ${HISTORY:-default}"
for run in $(seq "$runs"); do
  for bin in "$@"; do
    dir=$(mktemp -d /tmp/saql-history-cost.XXXXXX)
    port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
    RUST_LOG=warn taskset -c 0 "$bin" serve --listen "127.0.0.1:$port" --data-dir "$dir/data" \
      ${HISTORY:+--history "$HISTORY"} >"$dir/log" 2>&1 &
    pid=$!
    psql_saql=(psql -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$port" -U saql -d saql)
    for _ in $(seq 300); do
      "${psql_saql[@]}" -c "SHOW STREAMS" >/dev/null 2>&1 && break
      sleep 0.1
    done
    "${psql_saql[@]}" -f "$repo/queries/00_streams.sql" >/dev/null
    "${psql_saql[@]}" -c "\\copy proc_events FROM '$csv' WITH (FORMAT csv, HEADER true)"
    before=$(cpu "$pid")
    start=$(date +%s.%N)
    "${psql_saql[@]}" -c CHECKPOINT
    end=$(date +%s.%N)
    after=$(cpu "$pid")
    bytes=$(du -sb "$dir/data/history/proc_events" 2>/dev/null | cut -f1 || true)
    awk -v b="$bin" -v r="$run" -v s="$start" -v e="$end" -v c0="$before" -v c1="$after" \
      -v t="$tick" -v n="$events" -v by="${bytes:-0}" 'BEGIN {
      printf "%-28s run %s: checkpoint %.3f s, %.2f CPU-s, history %d bytes (%.1f per row)\n",
        b, r, e - s, (c1 - c0) / t, by, by / n }'
    kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""
    rm -rf "$dir"; dir=""
  done
done
