#!/usr/bin/env bash
# Interval join of two streams (process starts x their outbound connections, the join of
# queries/start_then_connect.sql): `saql run` at N events per stream, its events/s (both
# streams' rows over wall time) and peak RSS, to show the join's state stays flat as the
# streams grow; and DuckDB's same join as a batch query over the same files, with the ratio.
#
#   benches/join/run.sh                        # N = 1M, 5M and 20M per stream, 1 core each
#   SIZES="20000 100000" benches/join/run.sh   # quick check
#   SAQL_BIN=target/debug/saql SIZES=20000 benches/join/run.sh   # without a release build
#
# Builds the release binary unless SAQL_BIN is given; the files go to benches/.scratch/
# (gitignored). Each system is pinned to one core with taskset and runs niced.
set -euo pipefail
here=$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)
repo=$(cd "$here/../.." && pwd)
sizes=${SIZES:-1000000 5000000 20000000}
scratch=${SCRATCH:-$repo/benches/.scratch}
python=${DUCKDB_PYTHON:-/root/.cache/saql-bench-venv/bin/python}
export CARGO_TARGET_DIR=${CARGO_TARGET_DIR:-/root/.cache/saql-target}
if [[ -z "${SAQL_BIN:-}" ]]; then
  (cd "$repo" && cargo build --release --bin saql --quiet)
  SAQL_BIN=$CARGO_TARGET_DIR/release/saql
fi
mkdir -p "$scratch"
echo "date: $(date -u '+%Y-%m-%d %H:%M UTC'), nproc: $(nproc), load: $(cut -d' ' -f1-3 /proc/loadavg), saql: $SAQL_BIN"
printf '%-10s %10s %12s %12s %10s %12s %10s\n' events/stream joined saql_s saql_ev/s rss_MiB duckdb_s ratio
for n in $sizes; do
  proc=$scratch/join-proc-$n.csv
  net=$scratch/join-net-$n.csv
  [[ -f "$proc" && -f "$net" ]] || python3 "$here/gen.py" --events "$n" --proc "$proc" --net "$net"
  out=$scratch/join-out-$n
  rm -rf "$out"
  log=$scratch/join-time-$n.txt
  start=$(date +%s.%N)
  nice taskset -c 0 /usr/bin/time -v "$SAQL_BIN" run "$here/join.saql.sql" \
    --input proc_events="$proc" --input net_events="$net" --output "$out" 2>"$log" >/dev/null
  end=$(date +%s.%N)
  saql_s=$(echo "$end - $start" | bc -l)
  rss_kib=$(awk -F': ' '/Maximum resident set size/ {print $2}' "$log")
  joined=$(($(wc -l <"$out/start_then_connect.csv") - 1))
  read -r duck_rows duck_s < <(nice taskset -c 0 "$python" "$here/duckdb_join.py" "$proc" "$net" 1)
  [[ "$duck_rows" == "$joined" ]] || echo "warning: DuckDB joined $duck_rows rows, saql $joined" >&2
  printf '%-10s %10s %12.2f %12.0f %10.1f %12.2f %10.2f\n' "$n" "$joined" "$saql_s" \
    "$(echo "2 * $n / $saql_s" | bc -l)" "$(echo "$rss_kib / 1024" | bc -l)" "$duck_s" \
    "$(echo "$duck_s / $saql_s" | bc -l)"
done
echo "ratio = DuckDB's time / saql's (above 1: saql faster); RSS is saql's peak."
