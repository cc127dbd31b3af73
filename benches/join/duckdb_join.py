"""The same join as join.saql.sql, as one DuckDB batch query over the same two CSV files;
prints the result's row count and DuckDB's wall time (read included) in seconds."""
import sys
import time

import duckdb

proc, net, threads = sys.argv[1], sys.argv[2], int(sys.argv[3])
con = duckdb.connect()
con.execute(f"SET threads = {threads}")
start = time.perf_counter()
rows = con.execute(f"""
SELECT count(*) FROM
  (SELECT ts, host, pid, exe, obj_name FROM read_csv('{proc}', header = true) WHERE op = 'start') p
JOIN
  (SELECT * FROM read_csv('{net}', header = true)
   WHERE dst_ip NOT LIKE '10.%' AND dst_ip <> '127.0.0.1') n
  ON n.host = p.host AND n.ppid = p.pid AND n.exe = p.obj_name
 AND n.ts BETWEEN p.ts AND p.ts + INTERVAL '10' SECOND
""").fetchone()[0]
print(rows, round(time.perf_counter() - start, 3))
