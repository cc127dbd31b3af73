"""Two event files for the interval-join benchmark: process starts (proc_events) and the
outbound connections of the started processes (net_events), N rows each, in time order.

Every start at time t on host h by parent p of image x has one connection of pid p+1, parent p,
image x, 0.5 to 12 s later (about 1 in 6 falls outside the 10 s bound), so the join emits
about 5/6 N rows and every row leaves the join's state within 10 s of event time: state should
stay flat however large N is. 100 starts per second of event time, over 1,000 hosts.
"""
import argparse
import random

ap = argparse.ArgumentParser()
ap.add_argument("--events", type=int, required=True)
ap.add_argument("--proc", required=True)
ap.add_argument("--net", required=True)
a = ap.parse_args()

rng = random.Random(7)
T0 = 1_700_000_000.0
per_second = 100
images = ["/usr/bin/curl", "/usr/bin/wget", "/bin/sh", "/usr/bin/python3"]


def stamp(t):
    whole = int(t)
    ms = int(round((t - whole) * 1000))
    if ms == 1000:
        whole, ms = whole + 1, 0
    import time
    return time.strftime("%Y-%m-%d %H:%M:%S", time.gmtime(whole)) + ".%03d" % ms


conns = []
with open(a.proc, "w") as proc:
    proc.write("ts,host,pid,ppid,user_name,exe,op,obj_type,obj_name,dst_ip,amount\n")
    for i in range(a.events):
        t = T0 + i / per_second
        host = "h%04d" % rng.randrange(1000)
        parent = 1000 + 2 * i
        image = images[i % len(images)]
        proc.write(f"{stamp(t)},{host},{parent},1,app,/bin/bash,start,proc,{image},,\n")
        conns.append((t + rng.uniform(0.5, 12.0), host, parent, image))
conns.sort()
with open(a.net, "w") as net:
    net.write("ts,host,pid,ppid,exe,src_ip,dst_ip,dst_port,bytes_out\n")
    for t, host, parent, image in conns:
        net.write(f"{stamp(t)},{host},{parent + 1},{parent},{image},10.0.3.10,203.0.113.45,443,{rng.randrange(40, 1500)}\n")
