-- MATCH_RECOGNIZE hook of the Flink comparison, run only with SAQL_BENCH_MATCH=1. The same
-- query as MATCH_INSERT in flink_job.py (keep them equal): per host, a 'start' followed within
-- 1 minute by a 'write' of more than 9990 bytes, with no other start or big write in between.
CREATE STREAM events (
  ts TIMESTAMP NOT NULL, key BIGINT, host TEXT, op TEXT, amount BIGINT,
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND
);

CREATE CONTINUOUS QUERY match AS
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
  ) AS m;
