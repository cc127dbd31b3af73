"""Two files for the lookup-join benchmark: N events (ts, key, amount) in time order, 1 ms
apart from 2024-01-01, and a reference table of M assets (id, owner, crit).

Keys are uniform over 1.25 M values and the table holds ids 0..M-1, so about 4 in 5 events
find their asset. Seeded: the same sizes always give the same bytes. Standard library only.

    python3 gen_lookup.py --events 5000000 --table-rows 1000000 --events-out e.csv --table-out t.csv
"""
import argparse
import os
import random
import time

ap = argparse.ArgumentParser()
ap.add_argument("--events", type=int, required=True)
ap.add_argument("--table-rows", type=int, required=True)
ap.add_argument("--events-out", required=True)
ap.add_argument("--table-out", required=True)
a = ap.parse_args()

rng = random.Random(11)
START_MS = 1_704_067_200_000
keys = a.table_rows * 5 // 4

tmp = a.table_out + ".tmp"
with open(tmp, "w") as t:
    t.write("id,owner,crit\n")
    lines = []
    for i in range(a.table_rows):
        lines.append(f"{i},owner-{i % 5000},{i % 10}\n")
        if len(lines) == 65536:
            t.writelines(lines)
            lines.clear()
    t.writelines(lines)
os.replace(tmp, a.table_out)

tmp = a.events_out + ".tmp"
with open(tmp, "w") as e:
    e.write("ts,key,amount\n")
    lines = []
    seconds = {}
    for i in range(a.events):
        sec, frac = divmod(START_MS + i, 1000)
        text = seconds.get(sec)
        if text is None:
            seconds.clear()
            text = time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(sec))
            seconds[sec] = text
        lines.append(f"{text}.{frac:03d},{rng.randrange(keys)},{rng.randrange(10000)}\n")
        if len(lines) == 65536:
            e.writelines(lines)
            lines.clear()
    e.writelines(lines)
os.replace(tmp, a.events_out)
