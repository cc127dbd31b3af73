-- A host whose average CPU over 10 seconds is above 90 percent.
--
-- test: a host averaging above 90 percent fires once per window
-- input host_metrics:
--   ts,host,cpu
--   2024-01-01 00:00:01,web-1,88
--   2024-01-01 00:00:01,web-2,50
--   2024-01-01 00:00:02,web-1,92
--   2024-01-01 00:00:03,web-1,95
--   2024-01-01 00:00:04,web-1,97
--   2024-01-01 00:00:11,web-1,91
--   2024-01-01 00:00:12,web-1,90
--   2024-01-01 00:00:12,web-2,99
--   2024-01-01 00:00:13,web-2,60
-- (web-1 in [00:00:00, 00:00:10): (88 + 92 + 95 + 97) / 4 = 372 / 4 = 93, max 97;
-- in [00:00:10, 00:00:20): (91 + 90) / 2 = 90.5, max 91.
-- web-2: 50 in the first window, (99 + 60) / 2 = 79.5 in the second)
-- expect:
--   host,window_end,avg_cpu,max_cpu
--   web-1,2024-01-01 00:00:10,93,97
--   web-1,2024-01-01 00:00:20,90.5,91
--
-- test: an average of exactly 90, or one short spike, stays silent
-- input host_metrics:
--   ts,host,cpu
--   2024-01-01 00:00:01,web-1,85
--   2024-01-01 00:00:02,web-1,95
--   2024-01-01 00:00:01,web-2,100
--   2024-01-01 00:00:02,web-2,70
--   2024-01-01 00:00:03,web-2,70
--   2024-01-01 00:00:04,web-2,70
-- (web-1: (85 + 95) / 2 = 90, not above 90; web-2: (100 + 70 + 70 + 70) / 4 = 77.5)
-- expect: nothing
CREATE CONTINUOUS QUERY cpu_hot AS
SELECT host, window_end, AVG(cpu) AS avg_cpu, MAX(cpu) AS max_cpu
FROM TUMBLE(host_metrics, ts, INTERVAL '10' SECOND)
GROUP BY host, window_start, window_end
HAVING AVG(cpu) > 90;
