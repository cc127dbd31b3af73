#!/usr/bin/env python3
"""`saql run` against DuckDB on one CSV file and the same queries; run by run.sh.

For each query (tumble: benches/flink/tumble.saql.sql; filter: filter.saql.sql) and each core
count, it runs every saql binary given (`saql run`, pinned with `taskset` to that many cores)
and DuckDB (duckdb_job.py, `SET threads` to the core count, pinned the same way), --runs times
each; checks after every run that the output holds the same rows as the first saql run (sorted,
timestamps normalised); and prints a Markdown table of medians: wall seconds of the whole
process, input rows per second, and each saql binary's speed relative to DuckDB. DuckDB's
"query" column is its time from connect to the end of COPY ... TO, without the interpreter's
start-up and the import of duckdb. Exit status: 0 all good, 1 a result mismatch, 2 a failed run.
"""

import argparse
import csv
import json
import re
import shutil
import statistics
import subprocess
import sys
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
QUERIES = {"tumble": HERE.parent / "flink" / "tumble.saql.sql", "filter": HERE / "filter.saql.sql"}
TIMESTAMP = re.compile(r"^(\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d)(?:\.(\d+))?$")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--data", required=True, help="the events CSV (with a header)")
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--cores", default="1,2")
    parser.add_argument("--queries", default="tumble,filter")
    parser.add_argument("--saql", action="append", required=True,
                        help="LABEL=PATH of a release saql binary (repeatable)")
    parser.add_argument("--duckdb-python", required=True, help="python of the venv with duckdb")
    parser.add_argument("--scratch", required=True)
    args = parser.parse_args()
    scratch = Path(args.scratch)
    scratch.mkdir(parents=True, exist_ok=True)
    with open(args.data, "rb") as f:
        events = sum(1 for _ in f) - 1
    binaries = [tuple(s.split("=", 1)) for s in args.saql]
    table = []
    problems = 0
    for query in args.queries.split(","):
        expected = None
        for cores in [int(c) for c in args.cores.split(",")]:
            cpus = ",".join(str(c) for c in range(cores))
            results = {}
            for label, binary in binaries:
                walls = []
                for run in range(1, args.runs + 1):
                    out = scratch / f"out-{label}-{query}"
                    shutil.rmtree(out, ignore_errors=True)
                    cmd = ["taskset", "-c", cpus, binary, "run", str(QUERIES[query]),
                           "--input", f"events={args.data}", "--output", str(out)]
                    wall, proc = timed(cmd)
                    if proc.returncode != 0:
                        print(f"{label} failed: {proc.stderr}", file=sys.stderr)
                        return 2
                    got = read_rows(out / f"{query}.csv")
                    if expected is None:
                        expected = got
                    elif got != expected:
                        problems += 1
                        print(f"MISMATCH: {label} {query} {cores} cores run {run}")
                    walls.append(wall)
                    print(f"{label:10} {query:6} {cores} core(s) run {run}: {wall:6.2f} s, "
                          f"{len(got)} rows", flush=True)
                results[label] = walls
            walls, nets = [], []
            for run in range(1, args.runs + 1):
                out = scratch / f"out-duckdb-{query}.csv"
                cmd = ["taskset", "-c", cpus, args.duckdb_python, str(HERE / "duckdb_job.py"),
                       "--query", query, "--threads", str(cores), "--data", args.data,
                       "--out", str(out)]
                wall, proc = timed(cmd)
                if proc.returncode != 0:
                    print(f"duckdb failed: {proc.stderr}", file=sys.stderr)
                    return 2
                net = json.loads(proc.stdout.strip().splitlines()[-1])["query_seconds"]
                got = read_rows(out)
                if got != expected:
                    problems += 1
                    print(f"MISMATCH: duckdb {query} {cores} threads run {run}")
                walls.append(wall)
                nets.append(net)
                print(f"{'duckdb':10} {query:6} {cores} thread(s) run {run}: {wall:6.2f} s "
                      f"(query {net:.2f} s), {len(got)} rows", flush=True)
            duck = statistics.median(walls)
            duck_net = statistics.median(nets)
            table.append((query, cores, "DuckDB", duck, events / duck,
                          f"query {duck_net:.2f} s = {events / duck_net / 1e6:.2f} M/s", ""))
            for label, saql_walls in results.items():
                wall = statistics.median(saql_walls)
                table.append((query, cores, f"saql run ({label})", wall, events / wall,
                              f"runs {', '.join(f'{w:.2f}' for w in saql_walls)}",
                              f"{duck / wall:.2f}x DuckDB, {duck_net / wall:.2f}x its query"))
    print(f"\n{events} events, medians of {args.runs} runs, load {open('/proc/loadavg').read().split()[:3]}\n")
    print("| query | cores | system | wall s | M rows/s | detail | saql vs DuckDB |")
    print("|---|---|---|---|---|---|---|")
    for q, c, system, wall, rate, detail, ratio in table:
        print(f"| {q} | {c} | {system} | {wall:.2f} | {rate / 1e6:.2f} | {detail} | {ratio} |")
    return 1 if problems else 0


def timed(cmd):
    started = time.perf_counter()
    proc = subprocess.run(cmd, capture_output=True, text=True)
    return time.perf_counter() - started, proc


def read_rows(path):
    """The rows of a result CSV without its header, normalised and sorted."""
    with open(path, newline="") as f:
        reader = csv.reader(f)
        next(reader, None)
        rows = [tuple(normalise(v) for v in row) for row in reader]
    rows.sort()
    return rows


def normalise(value):
    m = TIMESTAMP.match(value)
    if not m:
        return value
    fraction = (m.group(2) or "").rstrip("0")
    return m.group(1).replace("T", " ") + (f".{fraction}" if fraction else "")


if __name__ == "__main__":
    sys.exit(main())
