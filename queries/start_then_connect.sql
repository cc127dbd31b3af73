-- Two sensors, one story: a process started on a host (proc_events, from the process sensor)
-- that connects outside the network within 10 seconds of its start (net_events, from the
-- network sensor), as a downloader or an implant calling home does. The start row is written
-- by the parent (pid is the parent's, obj_name the new image); the network sensor reports the
-- new process with its parent pid, so the two are tied by host, parent pid and image. An
-- interval join: a start waits at most 10 s for its connection.
--
-- test: a shell starting curl that fetches from outside fires, with both sensors' times
-- input proc_events:
--   ts,host,pid,ppid,exe,op,obj_type,obj_name
--   2024-01-01 00:00:00,web-01,7000,812,/bin/bash,start,proc,/usr/bin/curl
--   2024-01-01 00:00:01,web-01,7000,812,/bin/bash,start,proc,/usr/bin/id
--   2024-01-01 00:00:02,web-01,7001,7000,/usr/bin/curl,connect,ip,203.0.113.45
-- input net_events:
--   ts,host,pid,ppid,exe,src_ip,dst_ip,dst_port,bytes_out
--   2024-01-01 00:00:02.010,web-01,7001,7000,/usr/bin/curl,10.0.3.10,203.0.113.45,443,412
--   2024-01-01 00:00:03,web-01,900,1,/usr/sbin/nginx,10.0.3.10,198.51.100.53,443,800
-- (nginx's connection is not a child of the shell; id never connects)
-- expect:
--   started,host,parent,parent_exe,pid,exe,dst_ip,dst_port,connected
--   2024-01-01 00:00:00,web-01,7000,/bin/bash,7001,/usr/bin/curl,203.0.113.45,443,2024-01-01 00:00:02.01
--
-- test: internal, late, other-host or other-parent connections stay silent
-- input proc_events:
--   ts,host,pid,exe,op,obj_name
--   2024-01-01 00:00:00,web-01,7000,/bin/bash,start,/usr/bin/curl
--   2024-01-01 00:00:00,db-01,7000,/bin/bash,start,/usr/bin/wget
--   2024-01-01 00:00:00,app-01,600,/usr/sbin/cron,start,/usr/bin/curl
-- input net_events:
--   ts,host,pid,ppid,exe,dst_ip,dst_port
--   2024-01-01 00:00:01,web-01,7001,7000,/usr/bin/curl,10.0.2.10,8080
--   2024-01-01 00:00:02,web-01,7001,7000,/usr/bin/curl,127.0.0.1,1433
--   2024-01-01 00:00:11,db-01,7002,7000,/usr/bin/wget,203.0.113.9,443
--   2024-01-01 00:00:03,web-02,7001,7000,/usr/bin/curl,203.0.113.9,443
--   2024-01-01 00:00:03,app-01,7003,7000,/usr/bin/curl,203.0.113.9,443
-- (web-01's curl stays inside; db-01's wget connects 11 s after its start; the web-02
-- connection has no start on web-02; app-01's curl is a child of 7000, not of cron's 600)
-- expect: nothing
CREATE CONTINUOUS QUERY start_then_connect AS
SELECT p.ts AS started, p.host, p.pid AS parent, p.exe AS parent_exe,
       n.pid, n.exe, n.dst_ip, n.dst_port, n.ts AS connected
FROM (SELECT ts, host, pid, exe, obj_name FROM proc_events WHERE op = 'start') p
JOIN (SELECT * FROM net_events WHERE dst_ip NOT LIKE '10.%' AND dst_ip <> '127.0.0.1') n
  ON n.host = p.host AND n.ppid = p.pid AND n.exe = p.obj_name
 AND n.ts BETWEEN p.ts AND p.ts + INTERVAL '10' SECOND;
