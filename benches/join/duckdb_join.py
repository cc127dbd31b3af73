"""The benchmark's joins as DuckDB batch queries over the same CSV files, results written
to a CSV file as `saql run` writes its own; prints the query's wall time in seconds
(reading and writing included). The caller times the whole process and checks the rows.

    python duckdb_join.py interval PROC NET OUT THREADS
    python duckdb_join.py lookup EVENTS ASSETS OUT THREADS
"""
import sys
import time

import duckdb

QUERIES = {
    # The join of join.saql.sql.
    "interval": """
SELECT p.ts AS started, p.host, p.pid AS parent, n.pid, n.exe, n.dst_ip, n.ts AS connected
FROM (SELECT ts, host, pid, exe, obj_name FROM read_csv('{a}', header = true) WHERE op = 'start') p
JOIN (SELECT * FROM read_csv('{b}', header = true)
      WHERE dst_ip NOT LIKE '10.%' AND dst_ip <> '127.0.0.1') n
  ON n.host = p.host AND n.ppid = p.pid AND n.exe = p.obj_name
 AND n.ts BETWEEN p.ts AND p.ts + INTERVAL '10' SECOND
""",
    # The join of lookup.saql.sql.
    "lookup": """
SELECT e.ts, e.key, e.amount, a.owner, a.crit
FROM read_csv('{a}', header = true) e JOIN read_csv('{b}', header = true) a ON e.key = a.id
""",
}

query, a, b, out, threads = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
con = duckdb.connect()
con.execute(f"SET threads = {threads}")
start = time.perf_counter()
con.execute(f"COPY ({QUERIES[query].format(a=a, b=b)}) TO '{out}' (HEADER, DELIMITER ',')")
print(round(time.perf_counter() - start, 3))
