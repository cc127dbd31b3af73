-- A shift in level rather than a single spike: an hour whose mean is more than 4 standard
-- deviations from the means of the series' 24 hours before it (SAQL's time-series model:
-- each window's aggregate against the same aggregate of the windows before it).
CREATE CONTINUOUS QUERY level_shift AS
SELECT series, window_start, window_end, hour_mean, mean, sd
FROM (
  SELECT series, window_start, window_end, AVG(value) AS hour_mean,
    COUNT(AVG(value)) OVER last_day AS n,
    AVG(AVG(value)) OVER last_day AS mean,
    STDDEV_POP(AVG(value)) OVER last_day AS sd
  FROM TUMBLE(nab_metric, timestamp, INTERVAL '1' HOUR)
  GROUP BY series, window_start, window_end
  WINDOW last_day AS (
    PARTITION BY series ORDER BY window_end ROWS BETWEEN 24 PRECEDING AND 1 PRECEDING)
) AS t
WHERE n = 24 AND ABS(hour_mean - mean) > 4 * sd;
