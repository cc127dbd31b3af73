-- A sample far from its own recent history: more than 4 standard deviations from the mean of
-- the series' 288 samples before it (a day of 5-minute samples, the rate of 20 of NAB's 24
-- real series), once that much history exists. One parameter set for every series.
CREATE CONTINUOUS QUERY metric_spike AS
SELECT series, timestamp, value, mean, sd
FROM (
  SELECT series, timestamp, value,
    COUNT(value) OVER last_day AS n,
    AVG(value) OVER last_day AS mean,
    STDDEV_POP(value) OVER last_day AS sd
  FROM nab_metric
  WINDOW last_day AS (
    PARTITION BY series ORDER BY timestamp ROWS BETWEEN 288 PRECEDING AND 1 PRECEDING)
) AS t
WHERE n = 288 AND ABS(value - mean) > 4 * sd;
