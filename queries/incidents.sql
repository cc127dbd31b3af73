-- The incident roll-up: alerts.sql's alerts grouped per host in one-minute windows; a host on
-- which two or more different detectors fired within the same minute is one incident, with
-- how many detectors and alerts, when the first and the last came, and which detectors.
-- A query over a query over queries: the detectors feed alerts, which feeds this.
--
-- test: a login from outside without MFA, then a download on the same host is one incident
-- input proc_events:
--   ts,host,pid,user_name,exe,op,obj_name,dst_ip
--   2024-01-01 00:00:10,web-01,812,deploy,/usr/sbin/sshd,login,deploy,198.51.100.99
--   2024-01-01 00:00:30,db-01,640,ops,/usr/sbin/sshd,login,ops,198.51.100.7
-- input net_events:
--   ts,host,pid,exe,dst_ip,dst_port
--   2024-01-01 00:00:12,web-01,7001,/usr/bin/curl,203.0.113.45,443
--   2024-01-01 00:00:13,web-01,7002,/usr/bin/wget,203.0.113.46,443
--   2024-01-01 00:00:31,db-01,640,/usr/sbin/sshd,10.0.0.9,443
--   2024-01-01 00:01:05,db-01,7003,/usr/bin/curl,203.0.113.45,443
-- (web-01: three detectors, four alerts, in [00:00:00, 00:01:00): the login from outside,
-- its missing MFA call, two downloads; db-01's login made its MFA call, and its login and
-- download fall in different minutes, one detector in each)
-- expect:
--   host,window_end,detectors,alerts,first_alert,last_alert
--   web-01,2024-01-01 00:01:00,3,4,2024-01-01 00:00:10,2024-01-01 00:00:13
--
-- test: a brute force that gets in is one incident in the minute after its failures
-- input proc_events:
--   ts,host,pid,user_name,exe,op,obj_name,dst_ip
--   2024-01-01 00:00:40,web-02,812,root,/usr/sbin/sshd,login_failed,root,203.0.113.23
--   2024-01-01 00:00:41,web-02,812,root,/usr/sbin/sshd,login_failed,root,203.0.113.23
--   2024-01-01 00:00:42,web-02,812,root,/usr/sbin/sshd,login_failed,root,203.0.113.23
--   2024-01-01 00:00:43,web-02,812,root,/usr/sbin/sshd,login_failed,root,203.0.113.23
--   2024-01-01 00:00:44,web-02,812,root,/usr/sbin/sshd,login_failed,root,203.0.113.23
--   2024-01-01 00:00:45,web-02,812,root,/usr/sbin/sshd,login_failed,root,203.0.113.23
--   2024-01-01 00:00:46,web-02,812,root,/usr/sbin/sshd,login_failed,root,203.0.113.23
--   2024-01-01 00:00:47,web-02,812,root,/usr/sbin/sshd,login_failed,root,203.0.113.23
--   2024-01-01 00:00:48,web-02,812,root,/usr/sbin/sshd,login_failed,root,203.0.113.23
--   2024-01-01 00:00:49,web-02,812,root,/usr/sbin/sshd,login_failed,root,203.0.113.23
--   2024-01-01 00:01:10,web-02,812,root,/usr/sbin/sshd,login,root,203.0.113.23
-- (failed_logins fires for [00:00:00, 00:01:00), timed 00:01:00; the login at 00:01:10 is
-- from outside, from a listed address, and makes no MFA call: four detectors in
-- [00:01:00, 00:02:00))
-- expect:
--   host,window_end,detectors,alerts,first_alert,last_alert
--   web-02,2024-01-01 00:02:00,4,4,2024-01-01 00:01:00,2024-01-01 00:01:10
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
