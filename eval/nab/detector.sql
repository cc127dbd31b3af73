-- nab_anomaly: a score in [0, 1] for every sample, for NAB's scorer (tests/eval_nab.rs), and
-- an alert wherever the score is at least 0.52 (tests/synthetic_detect.rs). One parameter set
-- for every series; every frame ends at the current row.
--
-- A sample is suspicious when it leaves the range its series kept before it (the last 2000
-- samples, about a week at 5 minutes), by more the further out it goes, less half the series'
-- typical step (the median step of its last 288 samples: noise that only grazes the edge is not
-- a departure); so is the series' level (the median of its last 12 samples) when it leaves the
-- range the level kept over 4000: that finds shifts that stay inside the range of old spikes;
-- and so is a series that goes perfectly flat for 96 samples after moving before
-- (VARIANCE_RATIO at its floor: a stuck sensor, a dead feed). Where the series has a strong
-- cycle (SEASONAL_ZSCORE over 1500 samples finds a period of up to 350 samples with an
-- autocorrelation of 0.7 or more), a lasting departure from the same phase of the cycles before
-- is suspicious too, and a sample where its cycle says it should be does not alert for leaving
-- the range.
--
-- Warm-up adapts to the history seen: with little of it, a departure must clear the range by up
-- to 10% more of its width, a margin that shrinks to nothing as 1000 samples of history fill.
-- Debouncing is spent only by an alert: DEBOUNCE lets a score of 0.52 or more alert only when
-- none of the series' 200 samples before it alerted; a departure it mutes, or one too small to
-- alert, scores between 0.25 and 0.5 and mutes nothing.
CREATE CONTINUOUS QUERY nab_anomaly AS
SELECT timestamp, series,
  CASE
    WHEN alert = 1 THEN raw
    WHEN raw >= 0.5 THEN 0.25 + 0.5 * (raw - 0.5)
    ELSE raw
  END AS score
FROM (
  SELECT timestamp, series, raw,
    DEBOUNCE(raw, 0.52) OVER (PARTITION BY series ORDER BY timestamp
      ROWS BETWEEN 200 PRECEDING AND CURRENT ROW) AS alert
  FROM (
    SELECT timestamp, series,
      GREATEST(
        -- 0.5 to 1 past the range (higher the further out, in widths of the range), below
        -- 0.25 inside it (higher nearer its edges); 0 until 50 samples of history exist.
        -- Both held below 0.5 while the sample is where its cycle says (a seasonal z-score
        -- within 3): the cycle's own peaks do not alert.
        LEAST(on_cycle, CASE
          WHEN v_excess IS NULL THEN 0.0
          WHEN v_excess > 0 THEN 0.5 + 0.5 * v_excess / (v_excess + 0.25)
          ELSE 0.25 * GREATEST(0.0, 1.0 + v_excess)
        END),
        LEAST(on_cycle, CASE
          WHEN l_excess IS NULL THEN 0.0
          WHEN l_excess > 0 THEN 0.5 + 0.5 * l_excess / (l_excess + 0.25)
          ELSE 0.25 * GREATEST(0.0, 1.0 + l_excess)
        END),
        -- 0.5 to 1 when the median seasonal z-score of the last 24 samples is past 3: a
        -- departure from the cycle that lasts (demand at the wrong hour, a flipped or faster
        -- cycle), not one odd sample.
        CASE
          WHEN season_n = 24 AND ABS(season_run) > 3 THEN
            0.5 + 0.5 * (ABS(season_run) / 3.0 - 1.0) / (ABS(season_run) / 3.0 - 0.75)
          ELSE 0.0
        END,
        -- 96 equal samples after steps before them: VARIANCE_RATIO is ln(1e-9), -20.7.
        CASE
          WHEN calm < -15 THEN 0.5 + 0.5 * (calm / -15.0 - 1.0) / (calm / -15.0 - 0.75)
          ELSE 0.0
        END
      ) AS raw
    FROM (
      SELECT timestamp, series, calm, season_run, season_n,
        CASE WHEN ABS(season) < 3 THEN 0.45 ELSE 1.0 END AS on_cycle,
        -- How far past the range, less half a typical step, in widths of the range (1000
        -- when the range is flat), less the warm-up margin.
        CASE
          WHEN v_older_hi IS NULL OR value IS NULL THEN NULL
          WHEN v_hi > v_lo AND value > v_hi THEN
            GREATEST(value - v_hi - 0.5 * noise, 1e-12) / (v_hi - v_lo) - warm
          WHEN v_hi > v_lo AND value < v_lo THEN
            GREATEST(v_lo - value - 0.5 * noise, 1e-12) / (v_hi - v_lo) - warm
          WHEN v_hi > v_lo THEN GREATEST(value - v_hi, v_lo - value) / (v_hi - v_lo) - warm
          WHEN value <> v_hi THEN 1000.0 - warm
          ELSE -1.0 - warm
        END AS v_excess,
        CASE
          WHEN l_older_hi IS NULL OR level IS NULL THEN NULL
          WHEN l_hi > l_lo THEN GREATEST(level - l_hi, l_lo - level) / (l_hi - l_lo) - warm
          WHEN level <> l_hi THEN 1000.0 - warm
          ELSE -1.0 - warm
        END AS l_excess
      FROM (
        SELECT *,
          GREATEST(v_recent_hi, v_older_hi) AS v_hi, LEAST(v_recent_lo, v_older_lo) AS v_lo,
          GREATEST(l_recent_hi, l_older_hi) AS l_hi, LEAST(l_recent_lo, l_older_lo) AS l_lo,
          0.1 * (1.0 - LEAST(GREATEST(seen, 1) / 1000.0, 1.0)) AS warm
        FROM (
          SELECT timestamp, series, value, level, calm, season,
            MEDIAN(season) OVER last24 AS season_run,
            COUNT(season) OVER last24 AS season_n,
            MEDIAN(step) OVER (PARTITION BY series ORDER BY timestamp
              ROWS BETWEEN 287 PRECEDING AND CURRENT ROW) AS noise,
            COUNT(value) OVER older AS seen,
            MAX(value) OVER last50 AS v_recent_hi,
            MIN(value) OVER last50 AS v_recent_lo,
            MAX(value) OVER older AS v_older_hi,
            MIN(value) OVER older AS v_older_lo,
            MAX(level) OVER last50 AS l_recent_hi,
            MIN(level) OVER last50 AS l_recent_lo,
            MAX(level) OVER (PARTITION BY series ORDER BY timestamp
              ROWS BETWEEN 4000 PRECEDING AND 51 PRECEDING) AS l_older_hi,
            MIN(level) OVER (PARTITION BY series ORDER BY timestamp
              ROWS BETWEEN 4000 PRECEDING AND 51 PRECEDING) AS l_older_lo
          FROM (
            SELECT timestamp, series, value,
              MEDIAN(value) OVER (PARTITION BY series ORDER BY timestamp
                ROWS BETWEEN 11 PRECEDING AND CURRENT ROW) AS level,
              ABS(value - LAG(value, 1) OVER (PARTITION BY series ORDER BY timestamp)) AS step,
              VARIANCE_RATIO(value, 96) OVER (PARTITION BY series ORDER BY timestamp
                ROWS BETWEEN 288 PRECEDING AND CURRENT ROW) AS calm,
              SEASONAL_ZSCORE(value, 350, 0.7) OVER (PARTITION BY series ORDER BY timestamp
                ROWS BETWEEN 1500 PRECEDING AND CURRENT ROW) AS season
            FROM nab_metric
          ) AS m
          WINDOW last50 AS (PARTITION BY series ORDER BY timestamp
              ROWS BETWEEN 50 PRECEDING AND 1 PRECEDING),
            last24 AS (PARTITION BY series ORDER BY timestamp
              ROWS BETWEEN 23 PRECEDING AND CURRENT ROW),
            older AS (PARTITION BY series ORDER BY timestamp
              ROWS BETWEEN 2000 PRECEDING AND 51 PRECEDING)
        ) AS h
      ) AS r
    ) AS e
  ) AS s
) AS d;
