-- A process that sends more than 1,000,000 bytes to one IP within 10 seconds
-- (the threshold part of SAQL's outlier example).
CREATE CONTINUOUS QUERY big_senders AS
SELECT host, exe, dst_ip, window_end, SUM(amount) AS sent
FROM TUMBLE(proc_events, ts, INTERVAL '10' SECOND)
WHERE op = 'write' AND obj_type = 'ip'
GROUP BY host, exe, dst_ip, window_start, window_end
HAVING SUM(amount) > 1000000;
