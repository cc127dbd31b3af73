-- A process that sends more than 1,000,000 bytes to one IP within 10 seconds
-- (the threshold part of SAQL's outlier example).
--
-- test: two writes to one IP add up past the threshold
-- input proc_events:
--   ts,host,exe,op,obj_type,dst_ip,amount
--   2024-01-01 00:00:01,db-01,/usr/bin/curl,write,ip,203.0.113.9,600000
--   2024-01-01 00:00:02,db-01,/usr/bin/curl,write,ip,198.51.100.7,300000
--   2024-01-01 00:00:03,db-01,/usr/bin/curl,write,file,,2000000
--   2024-01-01 00:00:04,db-01,/usr/bin/curl,write,ip,203.0.113.9,500000
--   2024-01-01 00:00:05,db-01,/usr/bin/rsync,write,ip,203.0.113.9,900000
--   2024-01-01 00:00:06,db-01,/usr/bin/curl,read,ip,203.0.113.9,5000000
-- (curl to 203.0.113.9 in [00:00:00, 00:00:10): 600000 + 500000 = 1100000 > 1000000;
-- the other IP, the file write, rsync (900000) and the read do not count towards it)
-- expect:
--   host,exe,dst_ip,window_end,sent
--   db-01,/usr/bin/curl,203.0.113.9,2024-01-01 00:00:10,1100000
--
-- test: exactly the threshold, or split across windows, stays silent
-- input proc_events:
--   ts,host,exe,op,obj_type,dst_ip,amount
--   2024-01-01 00:00:01,db-01,/usr/bin/curl,write,ip,203.0.113.9,400000
--   2024-01-01 00:00:02,db-01,/usr/bin/curl,write,ip,203.0.113.9,600000
--   2024-01-01 00:00:18,db-02,/usr/bin/scp,write,ip,192.0.2.1,600000
--   2024-01-01 00:00:21,db-02,/usr/bin/scp,write,ip,192.0.2.1,600000
-- (db-01: 400000 + 600000 = 1000000, not more than 1000000; db-02: 600000 in
-- [00:00:10, 00:00:20) and 600000 in [00:00:20, 00:00:30))
-- expect: nothing
CREATE CONTINUOUS QUERY big_senders AS
SELECT host, exe, dst_ip, window_end, SUM(amount) AS sent
FROM TUMBLE(proc_events, ts, INTERVAL '10' SECOND)
WHERE op = 'write' AND obj_type = 'ip'
GROUP BY host, exe, dst_ip, window_start, window_end
HAVING SUM(amount) > 1000000;
