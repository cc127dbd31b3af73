#!/usr/bin/env bash
# The server on one core and on two: `saql serve --workers W`, pinned to W cores (taskset),
# with the demo's queries
# registered (queries/*.sql: the script counts those over proc_events), one COPY of EVENTS proc_events rows
# (benches/wire/proc_events.py) timed from psql's start to its end; then two streams fed at
# once (proc_events and a copy of it, proc_events_b, with the same 13 queries renamed), both
# COPYs timed together. Every case runs against a fresh server and data directory, the cases
# in turn, RUNS times; the table gives medians, rows/s, the ratio of 2 workers to 1 and the
# server's peak resident set (VmHWM).
# The case w1-no-queries (or w2-...) declares the streams only: the cost of the COPY itself
# (decoding, the ingest log, history).
# THREADS=1 prints the CPU seconds of the server's threads by name after each case.
# HISTORY (default: the server's default, 7 days) is passed as --history: `HISTORY=off`
# measures the same without retained history. CHECKPOINT=1 times a CHECKPOINT after each
# COPY with it (history's segments are written then), e.g. the cost of history on ingest:
#   CHECKPOINT=1 CASES=w1-no-queries benches/wire/cores.sh; HISTORY=off CHECKPOINT=1 ...
#
#   benches/wire/cores.sh                                # 2,000,000 events, 3 runs
#   EVENTS=200000 RUNS=1 benches/wire/cores.sh           # quick check
#   SAQL_BIN=/path/to/release/saql benches/wire/cores.sh # a given binary
#
# Starts and stops `saql serve` itself on 127.0.0.1 (a free port, temp data dir) and checks
# with ss that it listens on loopback only.
set -euo pipefail
trap 'echo "cores.sh: failed at line $LINENO: $BASH_COMMAND" >&2' ERR

here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
events=${EVENTS:-2000000}
runs=${RUNS:-3}
cases=${CASES:-w1 w2 w1-two-streams w2-two-streams}
scratch=${SCRATCH:-$repo/benches/.scratch}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/root/.cache/saql-target}
command -v psql >/dev/null || { echo "cores.sh: psql not found" >&2; exit 2; }
if [[ -z "${SAQL_BIN:-}" ]]; then
  echo "building the release saql binary ..."
  (cd "$repo" && cargo build --release --bin saql --quiet)
fi
saql=$(mktemp /tmp/saql-cores-bin.XXXXXX)
cp "${SAQL_BIN:-$CARGO_TARGET_DIR/release/saql}" "$saql"
chmod 755 "$saql"
echo "saql binary: ${SAQL_BIN:-built from $repo at $(cd "$repo" && git rev-parse --short HEAD)}"

mkdir -p "$scratch"
csv=$scratch/proc-$events.csv
[[ -f "$csv" ]] || python3 "$here/proc_events.py" --events "$events" --out "$csv"

tmp=$(mktemp -d /tmp/saql-cores.XXXXXX)
saql_pid=""
cleanup() {
  if [[ -n "$saql_pid" ]]; then kill "$saql_pid" 2>/dev/null || true; wait "$saql_pid" 2>/dev/null || true; fi
  rm -rf "$tmp" "$saql"
}
trap cleanup EXIT
free_port() {
  python3 -c 'import socket; s = socket.socket(); s.bind(("127.0.0.1", 0)); print(s.getsockname()[1])'
}

# The demo's DDL, and the same for a second stream proc_events_b with its queries renamed.
ddl_b=$tmp/ddl_b.sql
{
sed -n '/^CREATE STREAM proc_events/,/;/p' "$repo/queries/00_streams.sql" | sed 's/proc_events/proc_events_b/'
for f in "$repo"/queries/*.sql; do
  [[ $(basename "$f") == 0* ]] && continue
  grep -q 'proc_events' "$f" || continue
  sed -E 's/\bproc_events\b/proc_events_b/g; s/CREATE CONTINUOUS QUERY ([a-z_]+)/CREATE CONTINUOUS QUERY \1_b/' "$f"
done
} >"$ddl_b"
queries_a=$(grep -c 'CREATE CONTINUOUS QUERY' "$ddl_b")

start_saql() { # workers
  port=$(free_port)
  # The server on as many cores as it has workers: cores 0 .. workers-1.
  RUST_LOG=warn taskset -c "0-$(($1 - 1))" "$saql" serve --listen "127.0.0.1:$port" --data-dir "$tmp/data" --workers "$1" \
    ${HISTORY:+--history "$HISTORY"} &
  saql_pid=$!
  psql_saql=(psql -X -q -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$port" -U saql -d saql)
  for _ in $(seq 300); do
    "${psql_saql[@]}" -c "SHOW STREAMS" >/dev/null 2>&1 && break
    sleep 0.1
  done
  local listeners
  listeners=$(ss -ltnpH | { grep -E "pid=$saql_pid," || true; } | awk '{print $4}')
  [[ -n "$listeners" ]] || { echo "cores.sh: saql did not start" >&2; exit 2; }
  if echo "$listeners" | grep -vqE '^(127\.[0-9.]+):[0-9]+$'; then
    echo "NOT LOOPBACK: $listeners" >&2; exit 1
  fi
}
stop_saql() {
  kill "$saql_pid"; wait "$saql_pid" || true; saql_pid=""; rm -rf "$tmp/data"
}
# CPU seconds the server's threads used so far, summed by thread name (THREADS=1).
thread_cpu() { # pid
  local tick
  tick=$(getconf CLK_TCK)
  for t in /proc/"$1"/task/*; do
    # utime and stime are fields 14 and 15; the name (field 2) may hold spaces.
    echo "$(cat "$t/comm") $(sed 's/.*) //' "$t/stat" | awk '{ print $12 + $13 }')"
  done | awk -v tick="$tick" '{ n = $NF; $NF = ""; cpu[$0] += n } END {
    for (k in cpu) if (cpu[k] > 0) printf "    %-24s %7.2f CPU-s\n", k, cpu[k] / tick }' | sort -k2 -rn
  # The process's total counts threads that already ended (a COPY's helpers) too.
  sed 's/.*) //' "/proc/$1/stat" | awk -v tick="$tick" '{ printf "    %-24s %7.2f CPU-s\n", "(all threads)", ($12 + $13) / tick }'
}
# Runs each file of DDL; one that fails (a query over a query declared in a later file) is
# run again after the others, until every file ran.
register() { # files
  local left=("$@") next f
  while ((${#left[@]})); do
    next=()
    for f in "${left[@]}"; do
      "${psql_saql[@]}" -f "$f" >/dev/null 2>&1 || next+=("$f")
    done
    if ((${#next[@]} == ${#left[@]})); then
      echo "cores.sh: cannot register ${next[*]}" >&2; exit 2
    fi
    left=("${next[@]}")
  done
}
copy() { # stream
  local tag
  tag=$(psql -X -v ON_ERROR_STOP=1 -h 127.0.0.1 -p "$port" -U saql -d saql -c "\\copy $1 FROM '$csv' WITH (FORMAT csv, HEADER true)")
  [[ "$tag" == "COPY $events" ]] || { echo "MISMATCH: $1 answered \"$tag\"" >&2; exit 1; }
}

results=$tmp/results
: >"$results"
echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'), nproc: $(nproc), load: $(cut -d' ' -f1-3 /proc/loadavg)"
echo "$events rows from $csv, $queries_a queries on proc_events, history ${HISTORY:-default}, $runs runs"
for run in $(seq "$runs"); do
  for case in $cases; do
    workers=${case%%-*}; workers=${workers#w}
    start_saql "$workers"
    if [[ "$case" == *-no-queries ]]; then
      "${psql_saql[@]}" -f "$repo/queries/00_streams.sql" >/dev/null
    else
      register "$repo"/queries/*.sql
    fi
    rows=$events
    if [[ "$case" == *two-streams ]]; then
      "${psql_saql[@]}" -f "$ddl_b" >/dev/null
      rows=$((2 * events))
      start=$(date +%s.%N)
      copy proc_events & a=$!
      copy proc_events_b & b=$!
      wait $a; wait $b
    else
      start=$(date +%s.%N)
      copy proc_events
    fi
    # CHECKPOINT=1: the checkpoint that writes what the COPY brought (the ingest log's
    # compaction, history's Parquet segments) is timed with it, so the cost of history shows
    # in rows/s even when the server writes it after the COPY answered.
    [[ -n "${CHECKPOINT:-}" ]] && "${psql_saql[@]}" -c CHECKPOINT >/dev/null
    end=$(date +%s.%N)
    peak=$(awk '$1 == "VmHWM:" { print $2 }' "/proc/$saql_pid/status")
    [[ -n "${THREADS:-}" ]] && thread_cpu "$saql_pid"
    echo "$case $run $start $end $rows $peak" | tee -a "$results" | awk \
      '{ printf "%-18s run %s: %6.2f s, %10.0f rows/s, server peak RSS %d MiB\n", $1, $2, $4 - $3, $5 / ($4 - $3), $6 / 1024 }'
    stop_saql
  done
done
echo "load at the end: $(cut -d' ' -f1-3 /proc/loadavg)"
python3 - "$results" <<'PY'
import statistics, sys
runs = {}
for line in open(sys.argv[1]):
    case, _, start, end, rows, peak = line.split()
    runs.setdefault(case, []).append((float(end) - float(start), int(rows), int(peak) / 1024))
med = {c: statistics.median(s for s, _, _ in v) for c, v in runs.items()}
print("\n| case | rows | median s | rows/s | vs 1 worker | peak RSS (MiB) | all runs (s) |\n|---|---:|---:|---:|---:|---:|---|")
for c, v in runs.items():
    base = c.replace("w2", "w1", 1)
    ratio = f"{med[base] / med[c]:.2f}x" if base in med else ""
    peak = max(p for _, _, p in v)
    print(f"| {c} | {v[0][1]:,} | {med[c]:.2f} | {v[0][1] / med[c]:,.0f} | {ratio} | {peak:.0f} | "
          + ", ".join(f"{s:.2f}" for s, _, _ in v) + " |")
PY
