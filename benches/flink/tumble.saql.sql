-- The Flink comparison's aggregate (benches/flink/flink_job.py has the same in Flink SQL):
-- per key per 1-minute tumbling window, COUNT/SUM/MAX.
CREATE STREAM events (
  ts TIMESTAMP NOT NULL, key BIGINT, host TEXT, op TEXT, amount BIGINT,
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND
);

CREATE CONTINUOUS QUERY tumble AS
  SELECT key, window_end, COUNT(*) AS n, SUM(amount) AS total, MAX(amount) AS top
  FROM TUMBLE(events, ts, INTERVAL '1' MINUTE)
  GROUP BY key, window_start, window_end;
