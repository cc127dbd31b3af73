-- A connection to, or a successful login from, an address on the threat-intel watch-list
-- (table threat_intel, 01_tables.sql), with the list's tag and severity: a lookup join by
-- the table's key, against the list as it is when each event is processed. (Failed logins
-- are left to failed_logins, which counts them.)
--
-- test: only listed addresses match, each event once, with its tag
-- input proc_events:
--   ts,host,exe,op,obj_type,dst_ip,amount
--   2024-01-01 00:00:01,db-01,/tmp/.x/dropper,connect,ip,203.0.113.66,517
--   2024-01-01 00:00:02,db-01,/tmp/.x/dropper,write,ip,203.0.113.66,50000000
--   2024-01-01 00:00:03,db-01,/usr/bin/curl,connect,ip,198.51.100.7,517
--   2024-01-01 00:00:04,web-01,/usr/sbin/sshd,login_failed,,203.0.113.23,
--   2024-01-01 00:00:05,web-01,/usr/sbin/sshd,login,,203.0.113.23,
--   2024-01-01 00:00:06,web-01,/usr/bin/cat,read,file,,100
-- (198.51.100.7 is not listed; the write and the failed login are not connections or
-- logins; the read has no address)
-- expect:
--   ts,host,exe,op,dst_ip,tag,severity
--   2024-01-01 00:00:01,db-01,/tmp/.x/dropper,connect,203.0.113.66,exfil-drop,9
--   2024-01-01 00:00:05,web-01,/usr/sbin/sshd,login,203.0.113.23,ssh-bruteforce,7
CREATE CONTINUOUS QUERY threat_intel_hits AS
SELECT p.ts, p.host, p.exe, p.op, p.dst_ip, t.tag, t.severity
FROM proc_events p JOIN threat_intel t ON p.dst_ip = t.ip
WHERE p.op IN ('connect', 'login');
