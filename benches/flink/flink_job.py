#!/usr/bin/env python3
"""Runs one benchmark query in PyFlink's local mini-cluster and prints one JSON line of timings.

    python flink_job.py --query tumble --input events.noheader.csv --output DIR --parallelism 1

Streaming mode, Table API / SQL: the filesystem connector reads the CSV (Flink 2.3's CSV format
cannot skip a header line, so the input is the benchmark's CSV without its first line), a
filesystem CSV sink writes the results to DIR. Every address is 127.0.0.1 (see LOOPBACK); the
caller also sets _python_worker_execution_mode=process in the environment, which PyFlink reads
from there (not from the configuration): without it, PyFlink starts a Python worker pool server
on all interfaces ([::]:0) for Python UDFs, which these SQL-only jobs do not need.

Printed: {"query", "parallelism", "net_runtime_ms" (JobExecutionResult.getNetRuntime()),
"job_seconds" (from building the environment to the job's end, in this process)}.
"""

import argparse
import json
import os
import sys
import time

STARTED = time.monotonic()

# Everything the mini-cluster binds or announces: loopback only.
LOOPBACK = {
    "rest.bind-address": "127.0.0.1",
    "rest.address": "127.0.0.1",
    "jobmanager.bind-host": "127.0.0.1",
    "jobmanager.rpc.address": "127.0.0.1",
    "taskmanager.bind-host": "127.0.0.1",
    "taskmanager.host": "127.0.0.1",
}

SOURCE_DDL = """
CREATE TABLE events (
  ts TIMESTAMP(3),
  `key` BIGINT,
  host STRING,
  op STRING,
  amount BIGINT,
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND
) WITH (
  'connector' = 'filesystem',
  'path' = '{path}',
  'format' = 'csv'
)
"""

# The same aggregate as tumble.saql.sql: per key per 1-minute window COUNT/SUM/MAX.
TUMBLE_SINK = """
CREATE TABLE results (
  `key` BIGINT, window_end TIMESTAMP(3), n BIGINT, total BIGINT, top BIGINT
) WITH ('connector' = 'filesystem', 'path' = '{path}', 'format' = 'csv')
"""
TUMBLE_INSERT = """
INSERT INTO results
SELECT `key`, window_end, COUNT(*) AS n, SUM(amount) AS total, MAX(amount) AS top
FROM TABLE(TUMBLE(TABLE events, DESCRIPTOR(ts), INTERVAL '1' MINUTE))
GROUP BY `key`, window_start, window_end
"""

# ---- MATCH_RECOGNIZE hook (run only with SAQL_BENCH_MATCH=1; see match.saql.sql) ----------
# Per host: a 'start' event followed within 1 minute by a 'write' of more than 9990 bytes, with
# no other start or big write between them. X excludes both, so a host has at most one partial
# match at a time: with X undefined (any row), each of the ~100 starts per host and minute keeps
# a partial match holding every row of that minute, and Flink had not finished 300k events
# after 10 minutes. The same text is in match.saql.sql (keep them equal); the two outputs are
# compared like the tumble's.
MATCH_SINK = """
CREATE TABLE results (
  host STRING, start_ts TIMESTAMP(3), write_ts TIMESTAMP(3), amount BIGINT
) WITH ('connector' = 'filesystem', 'path' = '{path}', 'format' = 'csv')
"""
MATCH_INSERT = """
INSERT INTO results
SELECT host, start_ts, write_ts, amount
FROM events
MATCH_RECOGNIZE (
  PARTITION BY host
  ORDER BY ts
  MEASURES
    S.ts AS start_ts,
    W.ts AS write_ts,
    W.amount AS amount
  ONE ROW PER MATCH
  AFTER MATCH SKIP PAST LAST ROW
  PATTERN (S X*? W) WITHIN INTERVAL '1' MINUTE
  DEFINE
    S AS S.op = 'start',
    X AS NOT (X.op = 'start' OR (X.op = 'write' AND X.amount > 9990)),
    W AS W.op = 'write' AND W.amount > 9990
) AS m
"""
# ---- end of the MATCH_RECOGNIZE hook ---------------------------------------------------------

QUERIES = {"tumble": (TUMBLE_SINK, TUMBLE_INSERT), "match": (MATCH_SINK, MATCH_INSERT)}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--query", choices=sorted(QUERIES), required=True)
    parser.add_argument("--input", required=True, help="CSV without a header line")
    parser.add_argument("--output", required=True, help="directory for the result files")
    parser.add_argument("--parallelism", type=int, default=1)
    args = parser.parse_args()
    if os.environ.get("_python_worker_execution_mode") != "process":
        print("flink_job.py: set _python_worker_execution_mode=process", file=sys.stderr)
        return 2

    from pyflink.common import Configuration
    from pyflink.table import EnvironmentSettings, TableEnvironment

    config = Configuration()
    for key, value in LOOPBACK.items():
        config.set_string(key, value)
    config.set_string("parallelism.default", str(args.parallelism))
    settings = (
        EnvironmentSettings.new_instance()
        .in_streaming_mode()
        .with_configuration(config)
        .build()
    )
    env = TableEnvironment.create(settings)
    sink, insert = QUERIES[args.query]
    env.execute_sql(SOURCE_DDL.format(path=os.path.abspath(args.input)))
    env.execute_sql(sink.format(path=os.path.abspath(args.output)))
    result = env.execute_sql(insert)
    job = result.get_job_client().get_job_execution_result().result()
    print(
        json.dumps(
            {
                "query": args.query,
                "parallelism": args.parallelism,
                "net_runtime_ms": job.get_net_runtime(),
                "job_seconds": time.monotonic() - STARTED,
            }
        ),
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
