-- A brute force that got in: an account on a host with five or more failed logins and then a
-- successful one within the same minute. The alert carries its evidence: EVIDENCE returns the
-- window's login events of that account (the first 10 by time, with the count of all), so the
-- analyst sees the failures, where they came from and the success without a second query.
--
-- test: five failures then a success alert with their six events
-- input proc_events:
--   ts,host,user_name,op,dst_ip
--   2024-01-01 00:00:05,web-1,root,login_failed,203.0.113.9
--   2024-01-01 00:00:10,web-1,root,login_failed,203.0.113.9
--   2024-01-01 00:00:15,web-1,root,login_failed,203.0.113.9
--   2024-01-01 00:00:20,web-1,root,login_failed,203.0.113.9
--   2024-01-01 00:00:25,web-1,root,login_failed,203.0.113.9
--   2024-01-01 00:00:30,web-1,root,login,203.0.113.9
--   2024-01-01 00:00:31,web-1,alice,login,198.51.100.7
--   2024-01-01 00:00:40,web-1,root,start,
-- (root on web-1: five failures and the success in [00:00:00, 00:01:00); alice's login and
-- root's process start are not login events of root)
-- expect:
--   host,user_name,window_end,failures,evidence
--   web-1,root,2024-01-01 00:01:00,5,"{""count"":6,""rows"":[{""ts"":""2024-01-01 00:00:05"",""op"":""login_failed"",""dst_ip"":""203.0.113.9""},{""ts"":""2024-01-01 00:00:10"",""op"":""login_failed"",""dst_ip"":""203.0.113.9""},{""ts"":""2024-01-01 00:00:15"",""op"":""login_failed"",""dst_ip"":""203.0.113.9""},{""ts"":""2024-01-01 00:00:20"",""op"":""login_failed"",""dst_ip"":""203.0.113.9""},{""ts"":""2024-01-01 00:00:25"",""op"":""login_failed"",""dst_ip"":""203.0.113.9""},{""ts"":""2024-01-01 00:00:30"",""op"":""login"",""dst_ip"":""203.0.113.9""}]}"
--
-- test: failures without a success stay silent
-- input proc_events:
--   ts,host,user_name,op,dst_ip
--   2024-01-01 00:00:05,web-1,root,login_failed,203.0.113.9
--   2024-01-01 00:00:10,web-1,root,login_failed,203.0.113.9
--   2024-01-01 00:00:15,web-1,root,login_failed,203.0.113.9
--   2024-01-01 00:00:20,web-1,root,login_failed,203.0.113.9
--   2024-01-01 00:00:25,web-1,root,login_failed,203.0.113.9
--   2024-01-01 00:00:30,web-1,root,login_failed,203.0.113.9
--   2024-01-01 00:00:35,web-1,root,login_failed,203.0.113.9
-- expect: nothing
--
-- test: a long attack shows its first ten events and counts them all
-- input proc_events:
--   ts,host,user_name,op,dst_ip
--   2024-01-01 00:00:04,db-1,admin,login_failed,192.0.2.1
--   2024-01-01 00:00:08,db-1,admin,login_failed,192.0.2.2
--   2024-01-01 00:00:12,db-1,admin,login_failed,192.0.2.3
--   2024-01-01 00:00:16,db-1,admin,login_failed,192.0.2.4
--   2024-01-01 00:00:20,db-1,admin,login_failed,192.0.2.5
--   2024-01-01 00:00:24,db-1,admin,login_failed,192.0.2.6
--   2024-01-01 00:00:28,db-1,admin,login_failed,192.0.2.7
--   2024-01-01 00:00:32,db-1,admin,login_failed,192.0.2.8
--   2024-01-01 00:00:36,db-1,admin,login_failed,192.0.2.9
--   2024-01-01 00:00:40,db-1,admin,login_failed,192.0.2.10
--   2024-01-01 00:00:44,db-1,admin,login_failed,192.0.2.11
--   2024-01-01 00:00:48,db-1,admin,login_failed,192.0.2.12
--   2024-01-01 00:00:55,db-1,admin,login,192.0.2.12
-- (twelve failures from twelve addresses, then the success at 00:00:55: 13 events, the ten
-- earliest shown)
-- expect:
--   host,user_name,failures,evidence
--   db-1,admin,12,"{""count"":13,""rows"":[{""ts"":""2024-01-01 00:00:04"",""op"":""login_failed"",""dst_ip"":""192.0.2.1""},{""ts"":""2024-01-01 00:00:08"",""op"":""login_failed"",""dst_ip"":""192.0.2.2""},{""ts"":""2024-01-01 00:00:12"",""op"":""login_failed"",""dst_ip"":""192.0.2.3""},{""ts"":""2024-01-01 00:00:16"",""op"":""login_failed"",""dst_ip"":""192.0.2.4""},{""ts"":""2024-01-01 00:00:20"",""op"":""login_failed"",""dst_ip"":""192.0.2.5""},{""ts"":""2024-01-01 00:00:24"",""op"":""login_failed"",""dst_ip"":""192.0.2.6""},{""ts"":""2024-01-01 00:00:28"",""op"":""login_failed"",""dst_ip"":""192.0.2.7""},{""ts"":""2024-01-01 00:00:32"",""op"":""login_failed"",""dst_ip"":""192.0.2.8""},{""ts"":""2024-01-01 00:00:36"",""op"":""login_failed"",""dst_ip"":""192.0.2.9""},{""ts"":""2024-01-01 00:00:40"",""op"":""login_failed"",""dst_ip"":""192.0.2.10""}]}"
CREATE CONTINUOUS QUERY brute_force_evidence AS
SELECT host, user_name, window_end,
       COUNT(*) FILTER (WHERE op = 'login_failed') AS failures,
       EVIDENCE(ts, op, dst_ip, 10) AS evidence
FROM TUMBLE(proc_events, ts, INTERVAL '1' MINUTE)
WHERE op IN ('login_failed', 'login')
GROUP BY host, user_name, window_start, window_end
HAVING COUNT(*) FILTER (WHERE op = 'login_failed') >= 5
   AND COUNT(*) FILTER (WHERE op = 'login') >= 1;
