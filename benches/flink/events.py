#!/usr/bin/env python3
"""Writes N generated events as one CSV file, the input of the Flink and wire benchmarks.

Columns (with a header line): ts,key,host,op,amount -- the stream

    CREATE STREAM events (ts TIMESTAMP NOT NULL, key BIGINT, host TEXT, op TEXT, amount BIGINT,
                          WATERMARK FOR ts AS ts - INTERVAL '5' SECOND)

Event time advances 1 ms per event from 2024-01-01 00:00:00 and each event is up to 2 s early
(bounded disorder inside the 5 s watermark delay, so no row is late); key is uniform over
10,000 values, host over 100, op over six verbs (including 'start' and 'write' for the
MATCH_RECOGNIZE query), amount over 0..9999. Seeded: the same N always gives the same bytes.
Standard library only, so it runs without the Flink venv.

    python3 events.py --events 2000000 --out events.csv
"""

import argparse
import os
import random
import sys
import time

SEED = 0x5A71BE4C
KEYS = 10_000
HOSTS = 100
OPS = ("read", "write", "open", "close", "connect", "start")
MAX_AMOUNT = 10_000
MAX_DISORDER_MS = 2_000
# 2024-01-01 00:00:00 UTC, in milliseconds.
START_MS = 1_704_067_200_000


def write_events(events: int, out) -> None:
    rng = random.Random(SEED)
    hosts = [f"host-{h:02d}" for h in range(HOSTS)]
    seconds = {}
    out.write("ts,key,host,op,amount\n")
    lines = []
    for i in range(events):
        ms = START_MS + i - rng.randrange(MAX_DISORDER_MS)
        sec, frac = divmod(ms, 1000)
        text = seconds.get(sec)
        if text is None:
            if len(seconds) > 16:
                seconds.clear()
            text = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(sec))
            seconds[sec] = text
        lines.append(
            f"{text}.{frac:03d},{rng.randrange(KEYS)},{hosts[rng.randrange(HOSTS)]},"
            f"{OPS[rng.randrange(len(OPS))]},{rng.randrange(MAX_AMOUNT)}\n"
        )
        if len(lines) == 65536:
            out.writelines(lines)
            lines.clear()
    out.writelines(lines)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--events", type=int, required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    if args.events <= 0:
        print("events.py: --events must be positive", file=sys.stderr)
        return 2
    tmp = args.out + ".tmp"
    with open(tmp, "w", newline="") as f:
        write_events(args.events, f)
    os.replace(tmp, args.out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
