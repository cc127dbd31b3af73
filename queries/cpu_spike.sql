-- Metric spikes against each host's own history (SAQL's time-series model on raw samples):
-- a host's cpu more than 5 standard deviations and 25 points above the mean of its previous
-- ten samples. The history is per host, so a busy host and an idle one each have their own
-- baseline; the first ten samples of a host have no history (NULL) and never alert.
--
-- test: a jump from about 50 to 98 fires on its first second only
-- input host_metrics:
--   ts,host,cpu
--   2024-01-01 00:00:00,db-1,50
--   2024-01-01 00:00:01,db-1,51
--   2024-01-01 00:00:02,db-1,49
--   2024-01-01 00:00:03,db-1,50
--   2024-01-01 00:00:04,db-1,52
--   2024-01-01 00:00:05,db-1,48
--   2024-01-01 00:00:06,db-1,50
--   2024-01-01 00:00:07,db-1,51
--   2024-01-01 00:00:08,db-1,49
--   2024-01-01 00:00:09,db-1,50
--   2024-01-01 00:00:10,db-1,98
--   2024-01-01 00:00:11,db-1,99
-- (the mean of the ten before 00:00:10 is 50, their standard deviation 1.1: 98 is far out;
-- at 00:00:11 the window holds the 98, its deviation is 14.5, and 99 is within 5 of them)
-- expect:
--   ts,host,cpu,baseline
--   2024-01-01 00:00:10,db-1,98,50
--
-- test: a move of 10 points, or a spike before there is history, stays silent
-- input host_metrics:
--   ts,host,cpu
--   2024-01-01 00:00:00,web-1,50
--   2024-01-01 00:00:01,web-1,51
--   2024-01-01 00:00:02,web-1,49
--   2024-01-01 00:00:03,web-1,50
--   2024-01-01 00:00:04,web-1,52
--   2024-01-01 00:00:05,web-1,48
--   2024-01-01 00:00:06,web-1,50
--   2024-01-01 00:00:07,web-1,51
--   2024-01-01 00:00:08,web-1,49
--   2024-01-01 00:00:09,web-1,50
--   2024-01-01 00:00:10,web-1,60
--   2024-01-01 00:00:11,web-1,55
--   2024-01-01 00:00:00,db-2,50
--   2024-01-01 00:00:01,db-2,50
--   2024-01-01 00:00:02,db-2,50
--   2024-01-01 00:00:03,db-2,50
--   2024-01-01 00:00:04,db-2,95
-- expect: nothing
CREATE CONTINUOUS QUERY cpu_spike AS
SELECT ts, host, cpu, baseline FROM (
  SELECT ts, host, cpu,
         AVG(cpu) OVER w10 AS baseline,
         STDDEV_POP(cpu) OVER w10 AS spread,
         COUNT(cpu) OVER w10 AS samples
  FROM host_metrics
  WINDOW w10 AS (PARTITION BY host ORDER BY ts ROWS BETWEEN 10 PRECEDING AND 1 PRECEDING)
) AS t
WHERE samples = 10 AND cpu > baseline + 5 * spread AND cpu > baseline + 25;
