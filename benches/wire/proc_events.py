#!/usr/bin/env python3
"""Generates proc_events rows (the demo's stream, queries/00_streams.sql) as CSV with a header:
a seeded mix of process starts, file reads and writes, network sends and connects, and logins
on `--hosts` hosts, `--rate` events per second of event time, in time order, so that every
query in queries/ that reads proc_events does real work (its filters pass some rows, its
windows close, its patterns start partial matches).

    python3 benches/wire/proc_events.py --events 2000000 --out benches/.scratch/proc-2000000.csv
"""
import argparse
import datetime
import random

OPS = [  # (weight, op, obj_type)
    (20, "read", "file"),
    (20, "write", "file"),
    (15, "write", "ip"),
    (10, "connect", "ip"),
    (10, "start", "proc"),
    (5, "login", "user"),
    (5, "login_failed", "user"),
    (15, "open", "file"),
]
EXES = ["/usr/bin/python3", "/usr/sbin/apache2", "/usr/sbin/nginx", "/bin/bash", "/bin/sh",
        "C:\\Windows\\System32\\cmd.exe", "C:\\MSSQL\\sqlservr.exe", "/usr/bin/curl",
        "/usr/sbin/sshd", "/usr/bin/scp"]
CHILDREN = ["/bin/sh", "/bin/bash", "/usr/bin/id", "/usr/bin/curl", "/usr/bin/wget"]
FILES = ["/etc/passwd", "/var/log/syslog", "/srv/www/index.php", "/home/u/.ssh/id_rsa",
         "C:\\Windows\\Temp\\setup.log"]
# What the attack patterns look for (cmd.exe starting osql.exe, a .dmp written by sqlservr.exe,
# a web server starting a shell)
# is as rare as in the demo: one event in RARE.
RARE = 20000
WEB_SERVERS = {"/usr/sbin/apache2", "/usr/sbin/nginx"}
SHELLS = {"/bin/sh", "/bin/bash"}
RARE_CHILD = "C:\\Tools\\osql.exe"
RARE_FILE = "C:\\dump\\db.dmp"
USERS = ["root", "www-data", "alice", "bob", "svc", "admin"]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--events", type=int, default=2_000_000)
    ap.add_argument("--hosts", type=int, default=200)
    ap.add_argument("--rate", type=int, default=2000, help="events per second of event time")
    ap.add_argument("--seed", type=int, default=7)
    ap.add_argument("--out", required=True)
    a = ap.parse_args()
    rng = random.Random(a.seed)
    weights = [w for w, _, _ in OPS]
    start = datetime.datetime(2026, 12, 1, 0, 0, 0)
    hosts = [f"host-{i:03d}" for i in range(a.hosts)]
    ips = [f"10.0.{i // 250}.{i % 250}" for i in range(500)] + ["203.0.113.66", "203.0.113.23"]
    with open(a.out, "w") as f:
        f.write("ts,host,pid,ppid,user_name,exe,op,obj_type,obj_name,dst_ip,amount\n")
        for i in range(a.events):
            ts = start + datetime.timedelta(microseconds=i * 1_000_000 // a.rate)
            _, op, obj_type = rng.choices(OPS, weights)[0]
            host = rng.choice(hosts)
            pid = rng.randrange(100, 5000)
            exe = rng.choice(EXES)
            rare = rng.randrange(RARE) == 0
            if obj_type == "file":
                obj = RARE_FILE if rare else rng.choice(FILES)
            elif obj_type == "ip":
                obj = rng.choice(ips)
            elif obj_type == "proc":
                obj = RARE_CHILD if rare else rng.choice(CHILDREN)
                if exe in WEB_SERVERS and obj in SHELLS and not rare:
                    obj = "/usr/sbin/php-fpm"  # a web server starting a shell is rare too
            else:
                obj = rng.choice(USERS)
            dst = obj if obj_type == "ip" else (rng.choice(ips) if op.startswith("login") else "")
            amount = rng.randrange(1, 400_000) if op == "write" else 0
            f.write(f"{ts:%Y-%m-%d %H:%M:%S.%f},{host},{pid},{rng.randrange(1, 100)},"
                    f"{rng.choice(USERS)},{exe},{op},{obj_type},{obj},{dst},{amount}\n")


if __name__ == "__main__":
    main()
