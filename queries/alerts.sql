-- One feed of the detectors' alerts, read from their queries as streams and merged by UNION
-- ALL on one clock (the smallest of their watermarks): which detector fired, on which host,
-- when, and a line of detail. Single-event detectors (cmd_starts_osql, external_logins,
-- tool_connections), a window's results (failed_logins, timed by its window's end), a lookup
-- join (threat_intel_hits) and two joins of streams (start_then_connect, timed by the start,
-- so the union waits up to 10 s for it; login_without_mfa, timed by the login, 30 s).
-- incidents.sql rolls it up per host.
--
-- test: each detector's alert, labelled, in one stream
-- input proc_events:
--   ts,host,pid,user_name,exe,op,obj_type,obj_name,dst_ip
--   2024-01-01 00:00:00,web-01,812,deploy,/usr/sbin/sshd,login,user,deploy,198.51.100.99
--   2024-01-01 00:00:05,win-01,700,CORP\svc,C:\Windows\System32\cmd.exe,start,proc,C:\Tools\osql.exe,
--   2024-01-01 00:00:06,web-01,813,alice,/usr/sbin/sshd,login,user,alice,10.0.0.5
--   2024-01-01 00:00:10,db-01,640,root,/usr/sbin/sshd,login_failed,user,root,
--   2024-01-01 00:00:11,db-01,640,root,/usr/sbin/sshd,login_failed,user,root,
--   2024-01-01 00:00:12,db-01,640,root,/usr/sbin/sshd,login_failed,user,root,
--   2024-01-01 00:00:13,db-01,640,root,/usr/sbin/sshd,login_failed,user,root,
--   2024-01-01 00:00:14,db-01,640,root,/usr/sbin/sshd,login_failed,user,root,
--   2024-01-01 00:00:15,db-01,640,root,/usr/sbin/sshd,login_failed,user,root,
--   2024-01-01 00:00:16,db-01,640,root,/usr/sbin/sshd,login_failed,user,root,
--   2024-01-01 00:00:17,db-01,640,root,/usr/sbin/sshd,login_failed,user,root,
--   2024-01-01 00:00:18,db-01,640,root,/usr/sbin/sshd,login_failed,user,root,
--   2024-01-01 00:00:19,db-01,640,root,/usr/sbin/sshd,login_failed,user,root,
--   2024-01-01 00:00:20,db-01,901,,/tmp/.x/dropper,connect,ip,203.0.113.66,203.0.113.66
--   2024-01-01 00:00:30,app-01,600,,/bin/bash,start,proc,/usr/bin/curl,
-- input net_events:
--   ts,host,pid,ppid,exe,dst_ip,dst_port
--   2024-01-01 00:00:02,web-01,7001,1,/usr/bin/curl,203.0.113.45,443
--   2024-01-01 00:00:03,web-01,900,1,/usr/sbin/nginx,198.51.100.53,443
--   2024-01-01 00:00:07,web-01,813,1,/usr/sbin/sshd,10.0.0.9,443
--   2024-01-01 00:00:32,app-01,7003,600,/usr/bin/curl,203.0.113.45,443
-- (alice's login from inside made its MFA call; deploy's, from outside, did not; root failed
-- ten times on db-01 in the minute that ends at 00:01:00; the dropper connected to a listed
-- address; bash on app-01 started curl, which connected out 2 s later)
-- expect:
--   ts,host,detector,detail
--   2024-01-01 00:00:00,web-01,external_logins,deploy from 198.51.100.99
--   2024-01-01 00:00:00,web-01,login_without_mfa,deploy from 198.51.100.99
--   2024-01-01 00:00:02,web-01,tool_connections,/usr/bin/curl to 203.0.113.45
--   2024-01-01 00:00:05,win-01,cmd_starts_osql,C:\Tools\osql.exe
--   2024-01-01 00:00:20,db-01,threat_intel_hits,/tmp/.x/dropper connect 203.0.113.66 (exfil-drop)
--   2024-01-01 00:00:30,app-01,start_then_connect,/bin/bash started /usr/bin/curl to 203.0.113.45
--   2024-01-01 00:00:32,app-01,tool_connections,/usr/bin/curl to 203.0.113.45
--   2024-01-01 00:01:00,db-01,failed_logins,root failed 10 times
CREATE CONTINUOUS QUERY alerts AS
SELECT ts, host, 'cmd_starts_osql' AS detector, obj_name AS detail FROM cmd_starts_osql
UNION ALL
SELECT ts, host, 'external_logins', user_name || ' from ' || client FROM external_logins
UNION ALL
SELECT ts, host, 'tool_connections', exe || ' to ' || dst_ip FROM tool_connections
UNION ALL
SELECT window_end, host, 'failed_logins', user_name || ' failed ' || failures || ' times'
FROM failed_logins
UNION ALL
SELECT ts, host, 'threat_intel_hits', exe || ' ' || op || ' ' || dst_ip || ' (' || tag || ')'
FROM threat_intel_hits
UNION ALL
SELECT started, host, 'start_then_connect', parent_exe || ' started ' || exe || ' to ' || dst_ip
FROM start_then_connect
UNION ALL
SELECT ts, host, 'login_without_mfa', user_name || ' from ' || client FROM login_without_mfa;
