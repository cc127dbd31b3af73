-- The replay bench's filter (benches/replay/bench.py has the same in DuckDB SQL): 10% of the
-- rows, three columns, a timestamp among them.
CREATE STREAM events (
  ts TIMESTAMP NOT NULL, key BIGINT, host TEXT, op TEXT, amount BIGINT,
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND
);

CREATE CONTINUOUS QUERY filter AS
  SELECT ts, host, amount FROM events WHERE op = 'write' AND amount > 5000;
