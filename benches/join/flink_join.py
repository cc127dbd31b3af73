#!/usr/bin/env python3
"""Runs one of the benchmark's joins in PyFlink's local mini-cluster and prints one JSON line
of timings, as benches/flink/flink_job.py does for its queries (same loopback settings; the
caller sets _python_worker_execution_mode=process).

    python flink_join.py --query interval --inputs PROC NET --output DIR --parallelism 1
    python flink_join.py --query lookup --inputs EVENTS ASSETS --output DIR --parallelism 1

Inputs are the benchmark's CSV files without their header line (Flink's CSV format cannot
skip one). The interval join is Flink's interval join; the lookup join is an event-time
temporal join against the asset table as a versioned table whose rows are valid from 1970
(what `saql compile --target flink` writes for a lookup join: equal to saql's lookup join for
a table that does not change during the run).
"""

import argparse
import json
import os
import sys
import time

STARTED = time.monotonic()

LOOPBACK = {
    "rest.bind-address": "127.0.0.1",
    "rest.address": "127.0.0.1",
    "jobmanager.bind-host": "127.0.0.1",
    "jobmanager.rpc.address": "127.0.0.1",
    "taskmanager.bind-host": "127.0.0.1",
    "taskmanager.host": "127.0.0.1",
}

CSV = "'connector' = 'filesystem', 'path' = '{path}', 'format' = 'csv'"

INTERVAL = [
    # Columns the query does not read are STRING: Flink's CSV reads an empty BIGINT as an error.
    f"""CREATE TABLE proc_events (
  ts TIMESTAMP(3), host STRING, pid BIGINT, ppid BIGINT, user_name STRING, exe STRING,
  op STRING, obj_type STRING, obj_name STRING, dst_ip STRING, amount STRING,
  WATERMARK FOR ts AS ts - INTERVAL '2' SECOND
) WITH ({CSV.format(path='{0}')})""",
    f"""CREATE TABLE net_events (
  ts TIMESTAMP(3), host STRING, pid BIGINT, ppid BIGINT, exe STRING, src_ip STRING,
  dst_ip STRING, dst_port BIGINT, bytes_out BIGINT,
  WATERMARK FOR ts AS ts - INTERVAL '2' SECOND
) WITH ({CSV.format(path='{1}')})""",
    f"""CREATE TABLE results (
  started TIMESTAMP(3), host STRING, parent BIGINT, pid BIGINT, exe STRING, dst_ip STRING,
  connected TIMESTAMP(3)
) WITH ({CSV.format(path='{2}')})""",
    # Two time attributes cannot both go to a sink: both leave as plain TIMESTAMPs.
    """INSERT INTO results
SELECT CAST(p.ts AS TIMESTAMP(3)) AS started, p.host, p.pid AS parent, n.pid, n.exe, n.dst_ip,
  CAST(n.ts AS TIMESTAMP(3)) AS connected
FROM (SELECT ts, host, pid, exe, obj_name FROM proc_events WHERE op = 'start') p
JOIN (SELECT * FROM net_events WHERE dst_ip NOT LIKE '10.%' AND dst_ip <> '127.0.0.1') n
  ON n.host = p.host AND n.ppid = p.pid AND n.exe = p.obj_name
 AND n.ts BETWEEN p.ts AND p.ts + INTERVAL '10' SECOND""",
]

LOOKUP = [
    f"""CREATE TABLE events (
  ts TIMESTAMP(3), `key` BIGINT, amount BIGINT,
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND
) WITH ({CSV.format(path='{0}')})""",
    f"""CREATE TABLE assets (
  id BIGINT NOT NULL, owner STRING NOT NULL, crit INT NOT NULL,
  valid_from AS CAST(TIMESTAMP '1970-01-01 00:00:00' AS TIMESTAMP(3)),
  WATERMARK FOR valid_from AS valid_from,
  PRIMARY KEY (id) NOT ENFORCED
) WITH ({CSV.format(path='{1}')})""",
    f"""CREATE TABLE results (
  ts TIMESTAMP(3), `key` BIGINT, amount BIGINT, owner STRING, crit INT
) WITH ({CSV.format(path='{2}')})""",
    """INSERT INTO results
SELECT e.ts, e.`key`, e.amount, a.owner, a.crit
FROM events e JOIN assets FOR SYSTEM_TIME AS OF e.ts AS a ON e.`key` = a.id""",
]

QUERIES = {"interval": INTERVAL, "lookup": LOOKUP}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--query", choices=sorted(QUERIES), required=True)
    parser.add_argument("--inputs", nargs=2, required=True, help="two CSV files without header")
    parser.add_argument("--output", required=True, help="directory for the result files")
    parser.add_argument("--parallelism", type=int, default=1)
    args = parser.parse_args()
    if os.environ.get("_python_worker_execution_mode") != "process":
        print("flink_join.py: set _python_worker_execution_mode=process", file=sys.stderr)
        return 2

    from pyflink.common import Configuration
    from pyflink.table import EnvironmentSettings, TableEnvironment

    config = Configuration()
    for key, value in LOOPBACK.items():
        config.set_string(key, value)
    config.set_string("parallelism.default", str(args.parallelism))
    settings = (
        EnvironmentSettings.new_instance().in_streaming_mode().with_configuration(config).build()
    )
    env = TableEnvironment.create(settings)
    paths = [os.path.abspath(p) for p in args.inputs] + [os.path.abspath(args.output)]
    *ddl, insert = QUERIES[args.query]
    for statement in ddl:
        env.execute_sql(statement.format(*paths))
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
