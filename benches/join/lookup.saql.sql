-- Enrichment of every event with its asset (a lookup join: the table as it is when each
-- event is processed), the benchmark's second join.
CREATE STREAM events (
  ts TIMESTAMP NOT NULL, key BIGINT, amount BIGINT,
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND
);
CREATE TABLE assets (id BIGINT PRIMARY KEY, owner TEXT NOT NULL, crit INT NOT NULL)
  WITH (max_rows = 100000000, max_bytes = 100000000000);
CREATE CONTINUOUS QUERY enriched AS
SELECT e.ts, e.key, e.amount, a.owner, a.crit
FROM events e JOIN assets a ON e.key = a.id;
