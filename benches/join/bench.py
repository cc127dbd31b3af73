#!/usr/bin/env python3
"""The join benchmark, run by run.sh: `saql run`, DuckDB (the same join as one batch query
over the same files) and Flink (PyFlink's mini-cluster, flink_join.py) on the same inputs,
each join at each size, --runs times each; checks that the three produced the same rows (an
order-free digest of the normalised rows: their count and the sum of a 64-bit hash of each);
prints a table of medians.

Joins: `interval` (join.saql.sql: N process starts x N connections, gen.py) and `lookup`
(lookup.saql.sql: N events enriched from a table of --table-rows assets, gen_lookup.py).
saql and DuckDB are pinned to one core (taskset -c CPU, --cpu, 0 unless told; DuckDB with
threads = 1) and timed as whole processes (reading, joining, writing the CSV result); Flink
runs at parallelism 1, timed by JobExecutionResult.getNetRuntime() (net job time, as
benches/flink does) and as a whole process, in a loopback-only network namespace when run as
root (see benches/flink/bench.py, whose process-tree measuring this reuses). Peak RSS is the
process tree's high-water mark.
"""

import argparse
import csv
import hashlib
import importlib.util
import os
import shutil
import statistics
import subprocess
import sys
from pathlib import Path

HERE = Path(__file__).resolve().parent
_spec = importlib.util.spec_from_file_location("flink_bench", HERE.parent / "flink" / "bench.py")
fb = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(fb)


def digest(paths, header):
    """(rows, sum of 64-bit hashes mod 2^64) of the normalised rows of CSV files."""
    count, total = 0, 0
    for path in paths:
        with open(path, newline="") as f:
            reader = csv.reader(f)
            if header:
                next(reader, None)
            for row in reader:
                if not row:
                    continue
                text = "\x1f".join(fb.normalise(x) for x in row).encode()
                total += int.from_bytes(hashlib.blake2b(text, digest_size=8).digest(), "little")
                count += 1
    return count, total % (1 << 64)


def files_under(d):
    return sorted(p for p in Path(d).rglob("*") if p.is_file() and not p.name.startswith("."))


def headerless(path):
    out = path.with_suffix(".noheader.csv")
    if not out.exists() or out.stat().st_mtime < path.stat().st_mtime:
        with open(path, "rb") as src, open(out, "wb") as dst:
            src.readline()
            shutil.copyfileobj(src, dst, 1 << 20)
    return out


def inputs_for(join, n, table_rows, scratch):
    if join == "interval":
        a, b = scratch / f"join-proc-{n}.csv", scratch / f"join-net-{n}.csv"
        if not (a.exists() and b.exists()):
            subprocess.run([sys.executable, str(HERE / "gen.py"), "--events", str(n),
                            "--proc", str(a), "--net", str(b)], check=True)
        return a, b, ["proc_events", "net_events"], "start_then_connect"
    a = scratch / f"lookup-events-{n}.csv"
    b = scratch / f"lookup-assets-{table_rows}-{n}.csv"
    if not (a.exists() and b.exists()):
        subprocess.run([sys.executable, str(HERE / "gen_lookup.py"), "--events", str(n),
                        "--table-rows", str(table_rows), "--events-out", str(a),
                        "--table-out", str(b)], check=True)
    return a, b, ["events", "assets"], "enriched"


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--joins", default="interval,lookup")
    parser.add_argument("--sizes", default="1000000,5000000,20000000")
    parser.add_argument("--table-rows", type=int, default=1_000_000)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--systems", default="saql,duckdb,flink")
    parser.add_argument("--saql", required=True)
    parser.add_argument("--duckdb-python", required=True)
    parser.add_argument("--flink-python")
    parser.add_argument("--scratch", required=True)
    parser.add_argument("--cpu", default="0", help="the core saql and DuckDB are pinned to")
    args = parser.parse_args()
    scratch = Path(args.scratch)
    scratch.mkdir(parents=True, exist_ok=True)
    systems = args.systems.split(",")
    isolate = fb.loopback_namespace_prefix() if "flink" in systems else []
    pin = ["taskset", "-c", args.cpu]
    table = []
    problems = 0
    for join in args.joins.split(","):
        for n in (int(s) for s in args.sizes.split(",")):
            a, b, names, query = inputs_for(join, n, args.table_rows, scratch)
            sql = HERE / ("join.saql.sql" if join == "interval" else "lookup.saql.sql")
            expected = None
            for system in systems:
                runs = []
                for run in range(1, args.runs + 1):
                    out = scratch / f"out-{join}-{system}"
                    shutil.rmtree(out, ignore_errors=True)
                    out.mkdir(parents=True)
                    env = os.environ.copy()
                    if system == "saql":
                        cmd = pin + [args.saql, "run", str(sql), "--input", f"{names[0]}={a}",
                                     "--input", f"{names[1]}={b}", "--output", str(out)]
                    elif system == "duckdb":
                        cmd = pin + [args.duckdb_python, str(HERE / "duckdb_join.py"), join,
                                     str(a), str(b), str(out / "result.csv"), "1"]
                    else:
                        env["_python_worker_execution_mode"] = "process"
                        cmd = isolate + [args.flink_python, str(HERE / "flink_join.py"),
                                         "--query", join, "--inputs", str(headerless(a)),
                                         str(headerless(b)), "--output", str(out),
                                         "--parallelism", "1"]
                    r = fb.run_measured(cmd, env, watch_listeners=system == "flink")
                    if r.get("exposed"):
                        print("NOT LOOPBACK: " + ", ".join(sorted(r["exposed"])), file=sys.stderr)
                        return 1
                    if r["status"] != 0:
                        print(f"{system} {join} {n} failed (status {r['status']}):\n"
                              f"{r['stderr'][-4000:]}", file=sys.stderr)
                        return 2
                    if system == "flink":
                        job = fb.parse_job_line(r["stdout"])
                        r["net"] = job["net_runtime_ms"] / 1000.0 if job else float("nan")
                    got = digest(files_under(out), header=system != "flink")
                    if expected is None:
                        expected = got
                    elif got != expected:
                        print(f"MISMATCH {system} {join} {n} run {run}: {got[0]} rows, "
                              f"expected {expected[0]} (digests {got[1]:x} vs {expected[1]:x})")
                        problems += 1
                    runs.append(r)
                    net = f", {r['net']:.2f} s net" if "net" in r else ""
                    print(f"{system:6} {join:8} {n:>9} run {run}: {r['wall']:7.2f} s wall{net}, "
                          f"{r['cpu']:7.2f} s CPU, {r['peak_rss_mib']:6.0f} MiB, {got[0]} rows",
                          flush=True)
                med = lambda k: statistics.median(x[k] for x in runs)
                table.append((join, n, system, med("wall"),
                              med("net") if system == "flink" else None, med("cpu"),
                              max(x["peak_rss_mib"] for x in runs), expected[0]))
    print()
    print(f"{'join':8} {'events':>9} {'system':7} {'wall_s':>8} {'net_s':>8} {'cpu_s':>8} "
          f"{'ev/s':>10} {'peak_MiB':>9} {'rows':>9} {'saql_x':>7}")
    saql_wall = {(j, n): w for j, n, s, w, *_ in table if s == "saql"}
    for join, n, system, wall, net, cpu, rss, rows in table:
        events = 2 * n if join == "interval" else n
        timed = net if net is not None else wall
        base = saql_wall.get((join, n))
        ratio = f"{timed / base:7.2f}" if base and system != "saql" else "       "
        print(f"{join:8} {n:>9} {system:7} {wall:8.2f} "
              f"{(f'{net:8.2f}' if net is not None else '       -')} {cpu:8.2f} "
              f"{events / timed:10.0f} {rss:9.0f} {rows:>9} {ratio}")
    print("saql_x: the system's time (Flink: net job time; DuckDB: whole process) / saql's "
          "whole process; above 1, saql is faster. ev/s counts both streams' rows (interval).")
    if problems:
        print(f"MISMATCH in {problems} run(s)")
        return 1
    print("All outputs equal (row digests).")
    return 0


if __name__ == "__main__":
    sys.exit(main())
