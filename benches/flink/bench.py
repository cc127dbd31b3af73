#!/usr/bin/env python3
"""saql against Apache Flink on the same events and the same query; run by run.sh.

For each query (the tumbling-window aggregate; the MATCH_RECOGNIZE query too with --match) it
runs `saql run` and PyFlink's local mini-cluster (flink_job.py) at each parallelism, --runs
times each, on one generated CSV file; checks after every run that both produced the same rows
(sorted, timestamps normalised); and prints a table of medians: events/s by whole-process wall
time for both, by JobExecutionResult.getNetRuntime() for Flink, CPU seconds and events per
CPU second, and saql's ratio to each.

Network: every Flink address is configured to 127.0.0.1 (flink_job.py), and, when this runs as
root, each Flink job runs in a network namespace of its own that has only a loopback interface
(`unshare --net`): PyFlink's gateway start-up reserves a port with a wildcard server socket
(NetUtils.getAvailablePort() in PythonEnvUtils.startGatewayServer, for the py4j callback),
which no configuration option moves, and inside that namespace even a wildcard socket is
reachable from this machine's loopback only. While each job runs, `ss -ltnpH` (inside the job's
namespace) is polled every 100 ms; a listener on a non-loopback address fails the bench unless
the namespace has no interface but `lo`, and every listener seen is printed at the end.
Exit status: 0 all good, 1 a result mismatch or an exposed listener, 2 a failed run.
"""

import argparse
import csv
import json
import os
import re
import shutil
import statistics
import subprocess
import sys
import threading
import time
from pathlib import Path

HERE = Path(__file__).resolve().parent
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
TIMESTAMP = re.compile(r"^(\d{4}-\d\d-\d\d[ T]\d\d:\d\d:\d\d)(?:\.(\d+))?$")
LOOPBACK = re.compile(r"^(127\.\d+\.\d+\.\d+|\[::1\]|\[::ffff:127\.\d+\.\d+\.\d+\]|localhost)$")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, required=True)
    parser.add_argument("--runs", type=int, default=3)
    parser.add_argument("--parallelism", default="1,2")
    parser.add_argument("--match", action="store_true", help="also run the MATCH_RECOGNIZE hook")
    parser.add_argument("--saql", required=True, help="the release saql binary")
    parser.add_argument("--flink-python", required=True, help="python of the venv with PyFlink")
    parser.add_argument("--scratch", required=True, help="directory for data and outputs")
    args = parser.parse_args()
    scratch = Path(args.scratch)
    scratch.mkdir(parents=True, exist_ok=True)
    parallelisms = [int(p) for p in args.parallelism.split(",")]

    data = scratch / f"events-{args.events}.csv"
    if not data.exists():
        print(f"generating {data} ...", flush=True)
        subprocess.run(
            [sys.executable, str(HERE / "events.py"), "--events", str(args.events),
             "--out", str(data)],
            check=True,
        )
    headerless = scratch / f"events-{args.events}.noheader.csv"
    if not headerless.exists() or headerless.stat().st_mtime < data.stat().st_mtime:
        with open(data, "rb") as src, open(headerless, "wb") as dst:
            src.readline()
            shutil.copyfileobj(src, dst, 1 << 20)

    queries = ["tumble"] + (["match"] if args.match else [])
    problems = 0
    listeners = set()
    isolate = loopback_namespace_prefix()
    print("Flink jobs run in a loopback-only network namespace (unshare --net)" if isolate else
          "Flink jobs run in this network namespace (not root, or unshare failed)", flush=True)
    rows = []
    for query in queries:
        expected = None
        saql_runs = []
        for run in range(1, args.runs + 1):
            out_dir = scratch / f"out-saql-{query}"
            shutil.rmtree(out_dir, ignore_errors=True)
            cmd = [args.saql, "run", str(HERE / f"{query}.saql.sql"),
                   "--input", f"events={data}", "--output", str(out_dir)]
            r = run_measured(cmd, os.environ.copy(), watch_listeners=False)
            if r["status"] != 0:
                print(f"saql run failed (status {r['status']}):\n{r['stderr']}", file=sys.stderr)
                return 2
            got = read_rows(out_dir, header=True)
            if expected is None:
                expected = got
            elif got != expected:
                problems += report_mismatch(f"saql {query} run {run}", got, expected)
            saql_runs.append(r)
            print(f"saql  {query:6} run {run}: {r['wall']:7.2f} s wall, "
                  f"{r['cpu']:7.2f} s CPU, {r['peak_rss_mib']:6.0f} MiB peak RSS, "
                  f"{len(got)} rows", flush=True)
        rows.append(summary("saql run", query, 1, args.events, saql_runs, len(expected)))

        for p in parallelisms:
            flink_runs = []
            for run in range(1, args.runs + 1):
                out_dir = scratch / f"out-flink-{query}-p{p}"
                shutil.rmtree(out_dir, ignore_errors=True)
                env = os.environ.copy()
                env["_python_worker_execution_mode"] = "process"
                cmd = [args.flink_python, str(HERE / "flink_job.py"), "--query", query,
                       "--input", str(headerless), "--output", str(out_dir),
                       "--parallelism", str(p)]
                r = run_measured(isolate + cmd, env, watch_listeners=True)
                listeners |= r["listeners"]
                if r["exposed"]:
                    print("NOT LOOPBACK: the Flink job listened on "
                          + ", ".join(sorted(r["exposed"])) + "; stopped it", file=sys.stderr)
                    return 1
                job = parse_job_line(r["stdout"])
                if r["status"] != 0 or job is None:
                    print(f"flink job failed (status {r['status']}):\n{r['stderr'][-4000:]}",
                          file=sys.stderr)
                    return 2
                r["net"] = job["net_runtime_ms"] / 1000.0
                got = read_rows(out_dir, header=False)
                if got != expected:
                    problems += report_mismatch(f"flink {query} p={p} run {run}", got, expected)
                flink_runs.append(r)
                print(f"flink {query:6} p={p} run {run}: {r['wall']:7.2f} s wall, "
                      f"{r['net']:7.2f} s net, {r['cpu']:7.2f} s CPU, "
                      f"{r['peak_rss_mib']:5.0f} MiB peak RSS, {len(got)} rows, "
                      + ("same rows as saql" if got == expected else "MISMATCH"), flush=True)
            rows.append(summary("Flink", query, p, args.events, flink_runs, len(expected)))

    print_table(rows)
    kinds = {}
    for entry in listeners:
        name, addr = entry.split()
        host = addr.rsplit(":", 1)[0]
        kinds[(name, host)] = kinds.get((name, host), 0) + 1
    print("\nListening sockets of the Flink jobs, all runs: "
          + (", ".join(f"{n} of {name} on {host}" for (name, host), n in sorted(kinds.items()))
             or "none seen"))
    wildcard = sorted(x for x in listeners if not LOOPBACK.match(x.split()[1].rsplit(":", 1)[0]))
    if wildcard:
        print("Wildcard listeners, contained by the loopback-only namespace: " + ", ".join(wildcard))
    print("Reachable beyond loopback: nothing")
    if problems:
        print(f"\nMISMATCH: {problems} run(s) produced different rows (see above)")
        return 1
    print("All outputs equal (sorted rows, timestamps normalised).")
    return 0


def run_measured(cmd, env, watch_listeners):
    """Runs cmd to the end; returns its wall and CPU seconds and its peak RSS (the whole process
    tree, sampled from /proc every 100 ms, which covers the JVM that PyFlink starts and does
    not wait for), and the listening sockets of the tree."""
    start = time.monotonic()
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    cpu_ticks = {}
    peak_rss = {}
    seen = set()
    exposed = set()
    contained = False  # whether the job's network namespace has only lo (once true, stays)
    # Drain the pipes in threads so that a chatty child cannot block on a full pipe.
    out_chunks, err_chunks = [], []
    readers = [threading.Thread(target=lambda s=s, c=c: c.append(s.read()), daemon=True)
               for s, c in ((proc.stdout, out_chunks), (proc.stderr, err_chunks))]
    for t in readers:
        t.start()
    # os.wait4 rather than proc.poll(): it also returns the child's own resource usage.
    while True:
        pid, status, usage = os.wait4(proc.pid, os.WNOHANG)
        if pid != 0:
            break
        tree = process_tree(proc.pid)
        for pid in tree:
            ticks, hwm = usage_of(pid)
            if ticks is not None:
                cpu_ticks[pid] = max(cpu_ticks.get(pid, 0), ticks)
                peak_rss[pid] = max(peak_rss.get(pid, 0), hwm)
        if watch_listeners:
            if not contained:
                contained = only_loopback_interfaces(proc.pid)
            for addr, name in listening(proc.pid, tree):
                seen.add(f"{name} {addr}")
                if not LOOPBACK.match(addr.rsplit(":", 1)[0]) and not contained:
                    exposed.add(f"{name} {addr}")
            if exposed:
                kill_tree(tree)
                _, status, usage = os.wait4(proc.pid, 0)
                break
        time.sleep(0.1)
    wall = time.monotonic() - start
    proc.returncode = os.waitstatus_to_exitcode(status)
    for t in readers:
        t.join()
    return {
        "status": proc.returncode,
        "wall": wall,
        "cpu": max(usage.ru_utime + usage.ru_stime, sum(cpu_ticks.values()) / CLOCK_TICKS),
        "peak_rss_mib": sum(peak_rss.values()) / 1024.0,
        "stdout": b"".join(out_chunks).decode(errors="replace"),
        "stderr": b"".join(err_chunks).decode(errors="replace"),
        "listeners": seen,
        "exposed": exposed,
    }


def loopback_namespace_prefix():
    """A command prefix that runs a command in a new network namespace with only `lo` (up),
    or [] where that is not possible (not root, no unshare)."""
    if os.geteuid() != 0 or not shutil.which("unshare") or not shutil.which("ip"):
        return []
    prefix = ["unshare", "--net", "--", "sh", "-c", 'ip link set lo up && exec "$0" "$@"']
    ok = subprocess.run(prefix + ["true"], capture_output=True).returncode == 0
    return prefix if ok else []


def in_netns_of(pid, cmd):
    """cmd run in the network namespace of pid (plain cmd if that is ours)."""
    try:
        if os.readlink(f"/proc/{pid}/ns/net") == os.readlink("/proc/self/ns/net"):
            return cmd
    except OSError:
        return cmd
    return ["nsenter", f"--net=/proc/{pid}/ns/net"] + cmd


def only_loopback_interfaces(pid):
    """Whether the network namespace of pid has no interface but lo."""
    out = subprocess.run(in_netns_of(pid, ["ip", "-o", "link"]), capture_output=True, text=True)
    names = [line.split(":")[1].strip() for line in out.stdout.splitlines() if ":" in line]
    return out.returncode == 0 and names == ["lo"]


def process_tree(root):
    """root and all its descendants, from /proc."""
    children = {}
    for entry in os.listdir("/proc"):
        if not entry.isdigit():
            continue
        try:
            with open(f"/proc/{entry}/stat") as f:
                fields = f.read().rsplit(")", 1)[1].split()
        except OSError:
            continue
        children.setdefault(int(fields[1]), []).append(int(entry))
    tree, todo = [], [root]
    while todo:
        pid = todo.pop()
        tree.append(pid)
        todo.extend(children.get(pid, []))
    return tree


def usage_of(pid):
    """(utime + stime in clock ticks, peak RSS in KiB) of a process, or (None, 0) if gone."""
    try:
        with open(f"/proc/{pid}/stat") as f:
            fields = f.read().rsplit(")", 1)[1].split()
        with open(f"/proc/{pid}/status") as f:
            hwm = next((int(line.split()[1]) for line in f if line.startswith("VmHWM:")), 0)
    except (OSError, ValueError):
        return None, 0
    return int(fields[11]) + int(fields[12]), hwm


def listening(root, pids):
    """(local address, process name) of each listening TCP socket owned by one of pids, as
    `ss` sees them in root's network namespace."""
    wanted = set(pids)
    out = subprocess.run(in_netns_of(root, ["ss", "-ltnpH"]), capture_output=True,
                         text=True).stdout
    found = []
    for line in out.splitlines():
        parts = line.split()
        if len(parts) < 6:
            continue
        for name, pid in re.findall(r'\("([^"]+)",pid=(\d+)', line):
            if int(pid) in wanted:
                found.append((parts[3], name))
    return found


def kill_tree(pids):
    for pid in reversed(pids):
        try:
            os.kill(pid, 9)
        except OSError:
            pass


def parse_job_line(stdout):
    for line in stdout.splitlines():
        if line.startswith("{"):
            try:
                return json.loads(line)
            except ValueError:
                pass
    return None


def normalise(field):
    m = TIMESTAMP.match(field)
    if not m:
        return field
    frac = (m.group(2) or "").rstrip("0")
    return m.group(1).replace("T", " ") + ("." + frac if frac else "")


def read_rows(out_dir, header):
    """Every row of every file under out_dir (Flink writes part files, saql one file per
    query), normalised and sorted."""
    rows = []
    for path in sorted(p for p in Path(out_dir).rglob("*") if p.is_file()):
        if path.name.startswith("."):
            continue
        with open(path, newline="") as f:
            reader = csv.reader(f)
            if header:
                next(reader, None)
            rows.extend(tuple(normalise(x) for x in r) for r in reader if r)
    rows.sort()
    return rows


def report_mismatch(what, got, expected):
    extra = sorted(set(got) - set(expected))
    missing = sorted(set(expected) - set(got))
    print(f"MISMATCH {what}: {len(got)} rows, expected {len(expected)}; "
          f"{len(missing)} missing (first {missing[:3]}), {len(extra)} extra (first {extra[:3]})")
    return 1


def summary(system, query, parallelism, events, runs, out_rows):
    net = [r["net"] for r in runs if "net" in r]
    return {
        "system": system,
        "query": query,
        "p": parallelism,
        "events": events,
        "wall": statistics.median(r["wall"] for r in runs),
        "walls": [r["wall"] for r in runs],
        "net": statistics.median(net) if net else None,
        "nets": net,
        "cpu": statistics.median(r["cpu"] for r in runs),
        "rss": statistics.median(r["peak_rss_mib"] for r in runs),
        "rows": out_rows,
    }


def print_table(rows):
    """Medians as a Markdown table. saql runs on one thread, so its per-core rate is its rate;
    Flink's per-core rate is its net rate over the parallelism. "saql faster" divides the
    Flink time (wall, or net) by saql's wall time."""
    print("\n| system | query | parallelism | events | output rows | wall s | events/s (wall) "
          "| net s | events/s (net) | events/s per core | CPU s | events per CPU s "
          "| peak RSS MiB | saql faster (wall) | saql faster (net) | runs: wall s (net s) |")
    print("|---|---|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---:|---|")
    saql = {r["query"]: r for r in rows if r["system"] == "saql run"}
    for r in rows:
        base, net, n = saql[r["query"]], r["net"], r["events"]
        per_core = n / net / r["p"] if net else n / r["wall"]
        runs = ", ".join(f"{w:.2f}" + (f" ({x:.2f})" if net else "")
                         for w, x in zip(r["walls"], r["nets"] or r["walls"]))
        cells = [
            r["system"], r["query"], r["p"], f"{n:,}", f"{r['rows']:,}",
            f"{r['wall']:.2f}", f"{n / r['wall']:,.0f}",
            f"{net:.2f}" if net else "-", f"{n / net:,.0f}" if net else "-",
            f"{per_core:,.0f}", f"{r['cpu']:.2f}", f"{n / r['cpu']:,.0f}", f"{r['rss']:,.0f}",
            f"{r['wall'] / base['wall']:.1f}x", f"{net / base['wall']:.1f}x" if net else "-",
            runs,
        ]
        print("| " + " | ".join(str(c) for c in cells) + " |")


if __name__ == "__main__":
    sys.exit(main())
