-- SAQL's time-series model over windows: a host's bytes sent to IPs in a 10-second window
-- against the same host's previous three windows (SAQL: `state[3] ss {sum(amount)} group by
-- host`, alert when ss[0] dwarfs the average of ss[1..3]). Fires when a window sends more than
-- ten times that average and over 5 MB. Windows in which a host sent nothing have no row, so
-- "previous" means the host's previous windows with traffic; a host's first three windows have
-- no full history (NULL) and never alert.
--
-- test: a 50 MB upload after three quiet windows fires once
-- input proc_events:
--   ts,host,op,obj_type,obj_name,amount
--   2024-01-01 00:00:01,db-1,write,ip,10.0.0.5,200000
--   2024-01-01 00:00:11,db-1,write,ip,10.0.0.5,300000
--   2024-01-01 00:00:21,db-1,write,ip,10.0.0.5,250000
--   2024-01-01 00:00:31,db-1,write,ip,203.0.113.9,50000000
--   2024-01-01 00:00:41,db-1,write,ip,10.0.0.5,250000
-- (the average of 200000, 300000 and 250000 is 250000; 50000000 is 200 times that)
-- expect:
--   host,window_end,sent,recent
--   db-1,2024-01-01 00:00:40,50000000,250000
--
-- test: steady heavy traffic, small bursts, and bursts without history stay silent
-- input proc_events:
--   ts,host,op,obj_type,obj_name,amount
--   2024-01-01 00:00:01,db-1,write,ip,10.0.0.5,40000000
--   2024-01-01 00:00:11,db-1,write,ip,10.0.0.5,45000000
--   2024-01-01 00:00:21,db-1,write,ip,10.0.0.5,42000000
--   2024-01-01 00:00:31,db-1,write,ip,10.0.0.5,50000000
--   2024-01-01 00:00:01,web-1,write,ip,10.0.0.7,1000
--   2024-01-01 00:00:11,web-1,write,ip,10.0.0.7,1000
--   2024-01-01 00:00:21,web-1,write,ip,10.0.0.7,1000
--   2024-01-01 00:00:31,web-1,write,ip,10.0.0.7,900000
--   2024-01-01 00:00:01,app-1,write,ip,10.0.0.8,1000
--   2024-01-01 00:00:11,app-1,write,ip,10.0.0.8,90000000
--   2024-01-01 00:00:21,app-1,read,file,/etc/hosts,90000000
-- (db-1: 50 MB is 1.2 times its history; web-1: 900 times its history but under 5 MB;
-- app-1: its burst comes with one window of history, and reads are not sends)
-- expect: nothing
CREATE CONTINUOUS QUERY send_surge AS
SELECT host, window_end, sent, recent FROM (
  SELECT host, window_end, sent,
         AVG(sent) OVER last3 AS recent,
         COUNT(sent) OVER last3 AS windows
  FROM (
    SELECT host, window_end, SUM(amount) AS sent
    FROM TUMBLE(proc_events, ts, INTERVAL '10' SECOND)
    WHERE op = 'write' AND obj_type = 'ip'
    GROUP BY host, window_start, window_end
  ) AS w
  WINDOW last3 AS (PARTITION BY host ORDER BY window_end ROWS BETWEEN 3 PRECEDING AND 1 PRECEDING)
) AS t
WHERE windows = 3 AND sent > 10 * recent AND sent > 5000000;
