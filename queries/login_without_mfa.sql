-- Absence: an ssh login whose second factor was never checked. With MFA on, sshd calls the
-- MFA service (10.0.0.9, port 443) within seconds of accepting the first factor; the network
-- sensor sees that call. A login (proc_events) with no such connection from the same host
-- and sshd pid in the 30 seconds after it (net_events) is a login that skipped MFA: a stolen
-- key, or a host whose PAM setup was changed. An anti join (NOT EXISTS): each login (only
-- logins are kept) waits until the watermark is 30 s past it.
--
-- test: a login without the MFA call fires, one with it stays silent
-- input proc_events:
--   ts,host,pid,user_name,exe,op,obj_type,obj_name,dst_ip
--   2024-01-01 00:00:00,web-01,812,deploy,/usr/sbin/sshd,login,user,deploy,198.51.100.99
--   2024-01-01 00:00:10,web-02,812,alice,/usr/sbin/sshd,login,user,alice,10.0.0.5
--   2024-01-01 00:00:20,db-01,640,ops,/usr/sbin/sshd,login_failed,user,ops,10.0.0.5
-- input net_events:
--   ts,host,pid,ppid,exe,dst_ip,dst_port
--   2024-01-01 00:00:10.500,web-02,812,1,/usr/sbin/sshd,10.0.0.9,443
--   2024-01-01 00:00:45,web-01,812,1,/usr/sbin/sshd,10.0.0.9,443
-- (alice's check on web-02 comes half a second after her login; web-01's check is 45 s
-- after deploy's login, too late for it; a failed login is no login)
-- expect:
--   ts,host,user_name,client
--   2024-01-01 00:00:00,web-01,deploy,198.51.100.99
--
-- test: a call by another process, host or service does not stand for the check
-- input proc_events:
--   ts,host,pid,user_name,op,dst_ip
--   2024-01-01 00:00:00,web-01,812,deploy,login,198.51.100.99
--   2024-01-01 00:00:00,db-01,640,ops,login,10.0.0.5
-- input net_events:
--   ts,host,pid,dst_ip,dst_port
--   2024-01-01 00:00:01,web-01,900,10.0.0.9,443
--   2024-01-01 00:00:02,web-01,812,10.0.0.5,389
--   2024-01-01 00:00:03,app-01,640,10.0.0.9,443
--   2024-01-01 00:00:04,db-01,640,10.0.0.9,443
-- (web-01: pid 900 is not its sshd, and 10.0.0.5 is the directory, not the MFA service;
-- db-01's sshd made the call)
-- expect:
--   ts,host,user_name,client
--   2024-01-01 00:00:00,web-01,deploy,198.51.100.99
CREATE CONTINUOUS QUERY login_without_mfa AS
SELECT l.ts, l.host, l.user_name, l.dst_ip AS client
FROM (SELECT ts, host, pid, user_name, dst_ip FROM proc_events WHERE op = 'login') l
WHERE NOT EXISTS (
  SELECT 1 FROM net_events m
  WHERE m.host = l.host AND m.pid = l.pid AND m.dst_ip = '10.0.0.9' AND m.dst_port = 443
    AND m.ts BETWEEN l.ts AND l.ts + INTERVAL '30' SECOND);
