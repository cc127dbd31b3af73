-- Fixture for tests/cli.rs: login events and a 10-second TUMBLE count of failures.
CREATE STREAM logins (
  ts TIMESTAMP NOT NULL, host TEXT, user_name TEXT, ok BOOLEAN,
  WATERMARK FOR ts AS ts - INTERVAL '1' SECOND
);
CREATE CONTINUOUS QUERY failures AS
SELECT host, window_end, COUNT(*) AS failures, MIN(user_name) AS first_user
FROM TUMBLE(logins, ts, INTERVAL '10' SECOND)
WHERE NOT ok
GROUP BY host, window_start, window_end;
