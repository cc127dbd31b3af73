-- A successful login from outside the corporate network (10.0.0.0/8): the fleet's admins
-- come in through the bastion, so any other source is worth a look. A single-event rule;
-- alerts.sql feeds it into the incident roll-up.
--
-- test: only successful logins from outside fire
-- input proc_events:
--   ts,host,user_name,exe,op,dst_ip
--   2024-01-01 00:00:00,web-01,deploy,/usr/sbin/sshd,login,198.51.100.99
--   2024-01-01 00:00:01,web-01,alice,/usr/sbin/sshd,login,10.0.0.5
--   2024-01-01 00:00:02,db-01,admin,/usr/sbin/sshd,login_failed,203.0.113.23
-- expect:
--   ts,host,user_name,client
--   2024-01-01 00:00:00,web-01,deploy,198.51.100.99
CREATE CONTINUOUS QUERY external_logins AS
SELECT ts, host, user_name, dst_ip AS client
FROM proc_events
WHERE op = 'login' AND dst_ip NOT LIKE '10.%';
