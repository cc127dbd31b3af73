-- nab_anomaly: a score in [0, 1] for every sample, for NAB's scorer (tests/eval_nab.rs).
-- A sample is suspicious when it leaves the range its series kept before it, by more the
-- further out it goes; so is the series' level (the median of its last 12 samples, an hour at
-- 5 minutes) when it leaves the range the level kept: that finds shifts that stay inside the
-- range of old spikes. The range of the samples is that of the last 2000 (about a week at 5
-- minutes), the range of the level that of the last 4000. Only the first excursion in 50
-- samples scores high: one alert per episode, since NAB counts only the first detection in a
-- window and charges every other one outside it. One parameter set for every series.
CREATE CONTINUOUS QUERY nab_anomaly AS
SELECT timestamp, series, GREATEST(sample_score, level_score) AS score
FROM (
  SELECT timestamp, series,
    -- 0.5 to 1 for the first excursion in 50 samples (higher the further out, in widths of
    -- the range), 0.25 to 0.5 for the next ones, and below 0.25 inside the range (higher
    -- nearer its edges); 0 until 50 samples of history exist.
    CASE
      WHEN v_older_hi IS NULL OR value IS NULL THEN 0.0
      WHEN v_excess > 0 AND NOT v_recent THEN 0.5 + 0.5 * v_excess / (v_excess + 0.25)
      WHEN v_excess > 0 THEN 0.25 + 0.25 * v_excess / (v_excess + 0.25)
      ELSE 0.25 * GREATEST(0.0, 1.0 + v_excess)
    END AS sample_score,
    CASE
      WHEN l_older_hi IS NULL OR level IS NULL THEN 0.0
      WHEN l_excess > 0 AND NOT l_recent THEN 0.5 + 0.5 * l_excess / (l_excess + 0.25)
      WHEN l_excess > 0 THEN 0.25 + 0.25 * l_excess / (l_excess + 0.25)
      ELSE 0.25 * GREATEST(0.0, 1.0 + l_excess)
    END AS level_score
  FROM (
    SELECT timestamp, series, value, level, v_older_hi, l_older_hi,
      -- How far past the range, in widths of the range (1000 when the range is flat).
      CASE
        WHEN v_hi > v_lo THEN GREATEST(value - v_hi, v_lo - value) / (v_hi - v_lo)
        WHEN value <> v_hi THEN 1000.0
        ELSE -1.0
      END AS v_excess,
      CASE
        WHEN l_hi > l_lo THEN GREATEST(level - l_hi, l_lo - level) / (l_hi - l_lo)
        WHEN level <> l_hi THEN 1000.0
        ELSE -1.0
      END AS l_excess,
      -- The range was already left in the last 50 samples.
      (v_recent_hi > v_older_hi OR v_recent_lo < v_older_lo) AS v_recent,
      (l_recent_hi > l_older_hi OR l_recent_lo < l_older_lo) AS l_recent
    FROM (
      SELECT *,
        GREATEST(v_recent_hi, v_older_hi) AS v_hi, LEAST(v_recent_lo, v_older_lo) AS v_lo,
        GREATEST(l_recent_hi, l_older_hi) AS l_hi, LEAST(l_recent_lo, l_older_lo) AS l_lo
      FROM (
        SELECT timestamp, series, value, level,
          MAX(value) OVER last50 AS v_recent_hi,
          MIN(value) OVER last50 AS v_recent_lo,
          MAX(value) OVER (PARTITION BY series ORDER BY timestamp
            ROWS BETWEEN 2000 PRECEDING AND 51 PRECEDING) AS v_older_hi,
          MIN(value) OVER (PARTITION BY series ORDER BY timestamp
            ROWS BETWEEN 2000 PRECEDING AND 51 PRECEDING) AS v_older_lo,
          MAX(level) OVER last50 AS l_recent_hi,
          MIN(level) OVER last50 AS l_recent_lo,
          MAX(level) OVER (PARTITION BY series ORDER BY timestamp
            ROWS BETWEEN 4000 PRECEDING AND 51 PRECEDING) AS l_older_hi,
          MIN(level) OVER (PARTITION BY series ORDER BY timestamp
            ROWS BETWEEN 4000 PRECEDING AND 51 PRECEDING) AS l_older_lo
        FROM (
          SELECT timestamp, series, value,
            MEDIAN(value) OVER (PARTITION BY series ORDER BY timestamp
              ROWS BETWEEN 11 PRECEDING AND CURRENT ROW) AS level
          FROM nab_metric
        ) AS m
        WINDOW last50 AS (PARTITION BY series ORDER BY timestamp
          ROWS BETWEEN 50 PRECEDING AND 1 PRECEDING)
      ) AS h
    ) AS r
  ) AS e
) AS s;
