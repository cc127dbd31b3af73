-- SAQL's outlier model: a process that sends far more data to one IP within 10 seconds than
-- its peers do. DBSCAN (eps 100000 bytes, 5 points) over the per-(host, process, IP) totals
-- of each window; a total that is noise and above 1 MB is an alert.
--
-- test: one sender far above its six peers
-- input proc_events:
--   ts,host,exe,op,obj_type,dst_ip,amount
--   2024-01-01 00:00:01,web-01,nginx,write,ip,10.0.0.1,50000
--   2024-01-01 00:00:01,web-02,nginx,write,ip,10.0.0.1,60000
--   2024-01-01 00:00:02,web-03,nginx,write,ip,10.0.0.1,70000
--   2024-01-01 00:00:02,app-01,java,write,ip,10.0.0.2,80000
--   2024-01-01 00:00:03,app-02,java,write,ip,10.0.0.2,90000
--   2024-01-01 00:00:03,db-01,postgres,write,ip,10.0.0.3,100000
--   2024-01-01 00:00:04,db-02,sqlservr.exe,write,ip,203.0.113.9,3000000
--   2024-01-01 00:00:05,db-02,sqlservr.exe,write,ip,203.0.113.9,2000000
-- (the six totals 50000..100000 are within 100000 of each other: a cluster; db-02 sends
-- 3000000 + 2000000 = 5000000, 4900000 from the nearest core point, 100000)
-- expect:
--   host,exe,dst_ip,window_end,sent,outlier_score
--   db-02,sqlservr.exe,203.0.113.9,2024-01-01 00:00:10,5000000,4900000
--
-- test: a large sender with peers of its size is no outlier
-- input proc_events:
--   ts,host,exe,op,obj_type,dst_ip,amount
--   2024-01-01 00:00:01,bk-01,rsync,write,ip,10.0.9.1,1100000
--   2024-01-01 00:00:01,bk-02,rsync,write,ip,10.0.9.1,1120000
--   2024-01-01 00:00:02,bk-03,rsync,write,ip,10.0.9.1,1140000
--   2024-01-01 00:00:02,bk-04,rsync,write,ip,10.0.9.1,1160000
--   2024-01-01 00:00:03,bk-05,rsync,write,ip,10.0.9.1,1180000
-- (all five within 100000 of each other: every one is a core point)
-- expect: nothing
CREATE CONTINUOUS QUERY exfil_outlier AS
SELECT host, exe, dst_ip, window_end, SUM(amount) AS sent
FROM TUMBLE(proc_events, ts, INTERVAL '10' SECOND)
WHERE op = 'write' AND obj_type = 'ip'
GROUP BY host, exe, dst_ip, window_start, window_end
OUTLIER DBSCAN(eps => 100000, min_points => 5) ON (sent)
HAVING is_outlier AND sent > 1000000;
