-- A suspicious process tree, as one pattern per host within a minute: a web server starts a
-- shell (w), that shell starts a program (s), and that program talks to an IP (c). The
-- attribute relations follow the tree: s is an event of the shell w started (its parent is
-- the server, its image the shell), and c an event of the program s started.
--
-- test: apache -> bash -> wget fetching a kit fires once
-- input proc_events:
--   ts,host,pid,ppid,exe,op,obj_type,obj_name,amount
--   2024-01-01 00:00:00,web-1,800,1,/usr/sbin/apache2,start,proc,/bin/bash,
--   2024-01-01 00:00:01,web-1,900,1,/usr/sbin/cron,start,proc,/bin/bash,
--   2024-01-01 00:00:02,web-1,4242,800,/bin/bash,start,proc,/usr/bin/wget,
--   2024-01-01 00:00:03,web-1,4300,900,/usr/bin/curl,connect,ip,198.51.100.1,300
--   2024-01-01 00:00:04,web-1,4243,4242,/usr/bin/wget,connect,ip,203.0.113.7,320
-- (cron's shell is not the server's, and curl is not the child of the server's shell)
-- expect:
--   host,server,shell,program,dst,at
--   web-1,/usr/sbin/apache2,/bin/bash,/usr/bin/wget,203.0.113.7,2024-01-01 00:00:04
--
-- test: a shell that runs nothing networked, or a tree spread over two hosts, stays silent
-- input proc_events:
--   ts,host,pid,ppid,exe,op,obj_type,obj_name,amount
--   2024-01-01 00:00:00,web-1,800,1,/usr/sbin/apache2,start,proc,/bin/sh,
--   2024-01-01 00:00:01,web-1,4242,800,/bin/sh,start,proc,/usr/bin/id,
--   2024-01-01 00:00:02,web-1,4243,4242,/usr/bin/id,read,file,/etc/passwd,100
--   2024-01-01 00:00:03,web-2,800,1,/usr/sbin/httpd,start,proc,/bin/bash,
--   2024-01-01 00:00:04,web-3,4242,800,/bin/bash,start,proc,/usr/bin/wget,
--   2024-01-01 00:00:05,web-3,4243,4242,/usr/bin/wget,connect,ip,203.0.113.7,320
-- expect: nothing
CREATE CONTINUOUS QUERY web_shell_tree AS
SELECT host, server, shell, program, dst, at FROM proc_events MATCH_RECOGNIZE (
  PARTITION BY host
  ORDER BY ts
  MEASURES w.exe AS server, w.obj_name AS shell, s.obj_name AS program, c.obj_name AS dst,
           c.ts AS at
  PATTERN (w x*? s x*? c)
  WITHIN INTERVAL '1' MINUTE
  DEFINE
    w AS op = 'start'
         AND (exe LIKE '%/apache2' OR exe LIKE '%/httpd' OR exe LIKE '%/nginx')
         AND (obj_name LIKE '%/sh' OR obj_name LIKE '%/bash' OR obj_name LIKE '%/dash'),
    s AS op = 'start' AND ppid = w.pid AND exe = w.obj_name,
    c AS obj_type = 'ip' AND op IN ('connect', 'write') AND ppid = s.pid AND exe = s.obj_name
) AS m;
