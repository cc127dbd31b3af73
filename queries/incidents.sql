-- The incident roll-up: alerts.sql's alerts grouped per host in one-minute windows; a host on
-- which two or more different detectors fired within the same minute is one incident, with
-- how many detectors and alerts, when the first and the last came, and which detectors.
-- A query over a query over queries: cmd_starts_osql, external_logins and tool_connections
-- feed alerts, which feeds this.
--
-- test: a login from outside then a download on the same host is one incident
-- input proc_events:
--   ts,host,pid,user_name,exe,op,obj_name,dst_ip
--   2024-01-01 00:00:10,web-01,812,deploy,/usr/sbin/sshd,login,deploy,198.51.100.99
--   2024-01-01 00:00:30,db-01,640,ops,/usr/sbin/sshd,login,ops,198.51.100.7
-- input net_events:
--   ts,host,pid,exe,dst_ip,dst_port
--   2024-01-01 00:00:12,web-01,7001,/usr/bin/curl,203.0.113.45,443
--   2024-01-01 00:00:13,web-01,7002,/usr/bin/wget,203.0.113.46,443
--   2024-01-01 00:01:05,db-01,7003,/usr/bin/curl,203.0.113.45,443
-- (web-01: two detectors, three alerts, in [00:00:00, 00:01:00); db-01's login and download
-- fall in different minutes, one detector in each)
-- expect:
--   host,window_end,detectors,alerts,first_alert,last_alert
--   web-01,2024-01-01 00:01:00,2,3,2024-01-01 00:00:10,2024-01-01 00:00:13
--
-- test: one detector firing many times is no incident
-- input net_events:
--   ts,host,pid,exe,dst_ip,dst_port
--   2024-01-01 00:00:01,web-01,7001,/usr/bin/curl,203.0.113.45,443
--   2024-01-01 00:00:02,web-01,7002,/usr/bin/curl,203.0.113.46,443
--   2024-01-01 00:00:03,web-01,7003,/usr/bin/curl,203.0.113.47,443
-- expect: nothing
CREATE CONTINUOUS QUERY incidents AS
SELECT host, window_end, COUNT(DISTINCT detector) AS detectors, COUNT(*) AS alerts,
       MIN(ts) AS first_alert, MAX(ts) AS last_alert
FROM TUMBLE(alerts, ts, INTERVAL '1' MINUTE)
GROUP BY host, window_start, window_end
HAVING COUNT(DISTINCT detector) >= 2;
