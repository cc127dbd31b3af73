#!/usr/bin/env python3
"""One DuckDB run of the replay bench: reads the CSV, runs a query, writes the result as CSV.

    duckdb_job.py --query tumble|filter --threads N --data events.csv --out result.csv

Prints one JSON line: {"query_seconds": ...} (connect to the end of COPY ... TO, without the
interpreter's start-up and the import of duckdb, which bench.py times as the whole process).
"""

import argparse
import json
import time

import duckdb

SOURCE = ("read_csv('{data}', header = true, columns = {{'ts': 'TIMESTAMP', 'key': 'BIGINT', "
          "'host': 'VARCHAR', 'op': 'VARCHAR', 'amount': 'BIGINT'}})")

QUERIES = {
    # benches/flink/tumble.saql.sql: 1-minute tumbling windows per key.
    "tumble": ("SELECT key, time_bucket(INTERVAL 1 MINUTE, ts) + INTERVAL 1 MINUTE AS window_end, "
               "count(*) AS n, sum(amount) AS total, max(amount) AS top "
               "FROM {source} GROUP BY key, window_end"),
    # benches/replay/filter.saql.sql.
    "filter": "SELECT ts, host, amount FROM {source} WHERE op = 'write' AND amount > 5000",
}


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--query", choices=sorted(QUERIES), required=True)
    parser.add_argument("--threads", type=int, required=True)
    parser.add_argument("--data", required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    started = time.perf_counter()
    con = duckdb.connect()
    con.execute(f"SET threads = {args.threads}")
    query = QUERIES[args.query].format(source=SOURCE.format(data=args.data))
    con.execute(f"COPY ({query}) TO '{args.out}' (HEADER, DELIMITER ',')")
    con.close()
    print(json.dumps({"query_seconds": time.perf_counter() - started}))


if __name__ == "__main__":
    main()
