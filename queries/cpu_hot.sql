-- A host whose average CPU over 10 seconds is above 90 percent.
CREATE CONTINUOUS QUERY cpu_hot AS
SELECT host, window_end, AVG(cpu) AS avg_cpu, MAX(cpu) AS max_cpu
FROM TUMBLE(host_metrics, ts, INTERVAL '10' SECOND)
GROUP BY host, window_start, window_end
HAVING AVG(cpu) > 90;
