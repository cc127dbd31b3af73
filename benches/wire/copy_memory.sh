#!/usr/bin/env bash
# What one COPY costs `saql serve` in memory: a fresh server (temp data directory, default
# flags) per case, the stream alone and the stream with the Flink comparison's tumbling query,
# one psql `\copy` of EVENTS rows each; prints the server's resident set after start and its
# peak (VmHWM) after the COPY.
#
#   SAQL_BIN=/tmp/saql EVENTS=5000000 benches/wire/copy_memory.sh
#
# The events CSV is benches/flink/events.py's, in benches/.scratch/ (gitignored). Listens on
# 127.0.0.1 only.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
events=${EVENTS:-5000000}
saql=${SAQL_BIN:?SAQL_BIN names the saql binary to measure}
scratch=${SCRATCH:-$repo/benches/.scratch}
mkdir -p "$scratch"
csv=$scratch/events-$events.csv
[[ -f "$csv" ]] || python3 "$repo/benches/flink/events.py" --events "$events" --out "$csv"

tmp=$(mktemp -d /tmp/saql-copy-memory.XXXXXX)
pid=""
cleanup() {
  if [[ -n "$pid" ]]; then kill "$pid" 2>/dev/null || true; wait "$pid" 2>/dev/null || true; fi
  rm -rf "$tmp"
}
trap cleanup EXIT
kib() { awk -v k="$1:" '$1 == k { print $2 }' "/proc/$pid/status"; }
stream="CREATE STREAM events (ts TIMESTAMP NOT NULL, key BIGINT, host TEXT, op TEXT, amount BIGINT,
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND)"
query=$(sed -n '/^CREATE CONTINUOUS QUERY/,/;/p' "$repo/benches/flink/tumble.saql.sql")

echo "| case | rows | RSS after start (MiB) | peak RSS (MiB) | peak above start (MiB) | COPY s |"
echo "|---|---:|---:|---:|---:|---:|"
for case in stream stream+tumble-query; do
  port=$(python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])')
  rm -rf "$tmp/data"
  RUST_LOG=warn "$saql" serve --listen "127.0.0.1:$port" --data-dir "$tmp/data" &
  pid=$!
  psql=(psql -X -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$port" -U saql -d saql)
  for _ in $(seq 300); do "${psql[@]}" -c "SHOW STREAMS" >/dev/null 2>&1 && break; sleep 0.1; done
  "${psql[@]}" -c "$stream" >/dev/null
  [[ "$case" == stream ]] || "${psql[@]}" -c "$query" >/dev/null
  start=$(kib VmRSS)
  t0=$(date +%s.%N)
  tag=$("${psql[@]}" -c "\\copy events FROM '$csv' WITH (FORMAT csv, HEADER true)" 2>&1 || true)
  t1=$(date +%s.%N)
  [[ "$tag" == "COPY $events" ]] || { echo "MISMATCH: $tag" >&2; exit 1; }
  peak=$(kib VmHWM)
  awk -v c="$case" -v n="$events" -v s="$start" -v p="$peak" -v t="$(echo "$t1 - $t0" | bc)" \
    'BEGIN { printf "| %s | %d | %.0f | %.0f | %.0f | %.2f |\n", c, n, s / 1024, p / 1024, (p - s) / 1024, t }'
  kill "$pid"; wait "$pid" 2>/dev/null || true; pid=""
done
