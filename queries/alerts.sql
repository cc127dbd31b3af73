-- One feed of the single-event detectors' alerts, read from their queries (cmd_starts_osql,
-- external_logins, tool_connections) as streams and merged by UNION ALL on one clock (the
-- smallest of their watermarks): which detector fired, on which host, when, and a line of
-- detail. incidents.sql rolls it up per host.
--
-- test: each detector's alert, labelled, in one stream
-- input proc_events:
--   ts,host,pid,user_name,exe,op,obj_name,dst_ip
--   2024-01-01 00:00:00,web-01,812,deploy,/usr/sbin/sshd,login,deploy,198.51.100.99
--   2024-01-01 00:00:05,win-01,700,CORP\svc,C:\Windows\System32\cmd.exe,start,C:\Tools\osql.exe,
--   2024-01-01 00:00:06,web-01,812,alice,/usr/sbin/sshd,login,alice,10.0.0.5
-- input net_events:
--   ts,host,pid,exe,dst_ip,dst_port
--   2024-01-01 00:00:02,web-01,7001,/usr/bin/curl,203.0.113.45,443
--   2024-01-01 00:00:03,web-01,900,/usr/sbin/nginx,198.51.100.53,443
-- expect:
--   ts,host,detector,detail
--   2024-01-01 00:00:00,web-01,external_logins,deploy from 198.51.100.99
--   2024-01-01 00:00:02,web-01,tool_connections,/usr/bin/curl to 203.0.113.45
--   2024-01-01 00:00:05,win-01,cmd_starts_osql,C:\Tools\osql.exe
CREATE CONTINUOUS QUERY alerts AS
SELECT ts, host, 'cmd_starts_osql' AS detector, obj_name AS detail FROM cmd_starts_osql
UNION ALL
SELECT ts, host, 'external_logins', user_name || ' from ' || client FROM external_logins
UNION ALL
SELECT ts, host, 'tool_connections', exe || ' to ' || dst_ip FROM tool_connections;
