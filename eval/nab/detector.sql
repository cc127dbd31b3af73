-- nab_anomaly: a score in [0, 1] for every sample, for NAB's scorer (tests/eval_nab.rs).
-- A sample is suspicious when it leaves the range the series kept over its last 2000 samples
-- (about a week at 5 minutes), by more the further out it goes; only the first such excursion
-- in 50 samples scores high (one alert per episode: NAB counts only the first detection in a
-- window and charges every other one outside it). One parameter set for every series.
CREATE CONTINUOUS QUERY nab_anomaly AS
SELECT timestamp, series,
  CASE
    WHEN n < 100 OR value IS NULL THEN 0.0
    WHEN excess > 0 AND NOT recent THEN 0.5 + 0.5 * excess / (excess + 0.25)
    WHEN excess > 0 THEN 0.25 + 0.25 * excess / (excess + 0.25)
    ELSE 0.25 * GREATEST(0.0, 1.0 + excess)
  END AS score
FROM (
  SELECT timestamp, series, value, n,
    -- How far past the range, in widths of the range (0 when the range is flat).
    CASE
      WHEN hi > lo THEN GREATEST(value - hi, lo - value) / (hi - lo)
      WHEN value <> hi THEN 1000.0
      ELSE -1.0
    END AS excess,
    -- The range was already left in the last 50 samples.
    (recent_hi > older_hi OR recent_lo < older_lo) AS recent
  FROM (
    SELECT timestamp, series, value,
      COUNT(value) OVER past AS n,
      MAX(value) OVER past AS hi,
      MIN(value) OVER past AS lo,
      MAX(value) OVER last50 AS recent_hi,
      MIN(value) OVER last50 AS recent_lo,
      MAX(value) OVER older AS older_hi,
      MIN(value) OVER older AS older_lo
    FROM nab_metric
    WINDOW
      past AS (PARTITION BY series ORDER BY timestamp ROWS BETWEEN 2000 PRECEDING AND 1 PRECEDING),
      last50 AS (PARTITION BY series ORDER BY timestamp ROWS BETWEEN 50 PRECEDING AND 1 PRECEDING),
      older AS (PARTITION BY series ORDER BY timestamp ROWS BETWEEN 2000 PRECEDING AND 51 PRECEDING)
  ) AS h
) AS t;
