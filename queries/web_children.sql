-- SAQL's invariant model: a web server (Apache, httpd) only ever starts the children it
-- started during the first minute of the query's input; any other child is an alert
-- (e.g. a web shell spawning /bin/bash).
--
-- test: bash started by apache after training
-- input proc_events:
--   ts,host,exe,op,obj_type,obj_name
--   2024-01-01 00:00:00,web-01,/usr/sbin/apache2,start,proc,/usr/sbin/php-fpm8.2
--   2024-01-01 00:00:20,web-01,/usr/sbin/apache2,start,proc,/bin/sh
--   2024-01-01 00:00:40,web-02,/usr/sbin/httpd,start,proc,/usr/sbin/php-fpm
--   2024-01-01 00:01:10,web-01,/usr/sbin/apache2,start,proc,/bin/sh
--   2024-01-01 00:01:20,web-01,/usr/sbin/apache2,start,proc,/bin/bash
--   2024-01-01 00:01:30,web-01,/usr/sbin/cron,start,proc,/bin/bash
-- (training is [00:00:00, 00:01:00): web-01 learns php-fpm8.2 and sh, web-02 php-fpm; after
-- it, sh is known, bash is not, and cron is not a web server)
-- expect:
--   ts,host,child
--   2024-01-01 00:01:20,web-01,/bin/bash
--
-- test: known children after training stay silent
-- input proc_events:
--   ts,host,exe,op,obj_type,obj_name
--   2024-01-01 00:00:00,web-01,/usr/sbin/apache2,start,proc,/bin/sh
--   2024-01-01 00:02:00,web-01,/usr/sbin/apache2,start,proc,/bin/sh
-- expect: nothing
CREATE CONTINUOUS QUERY web_children AS
SELECT ts, host, obj_name AS child
FROM proc_events
WHERE op = 'start' AND (exe LIKE '%/apache2' OR exe LIKE '%/httpd')
INVARIANT SET (child) PER (host) TRAINING INTERVAL '1' MINUTE;
