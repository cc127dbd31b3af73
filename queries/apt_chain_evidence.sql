-- The APT data-theft chain of apt_chain.sql with its evidence: ALL ROWS PER MATCH returns the
-- four events that make the alert (the rows an analyst opens first), one row each, with the
-- step each row played (CLASSIFIER()), the alert's number per host, and FINAL measures that
-- every row of the alert shares (who stole what, and when). The other events of the host that
-- came between the steps are part of the match but excluded from what it returns ({- x -}).
--
-- test: the chain returns its four events, and not the noise between them
-- input proc_events:
--   ts,host,pid,exe,op,obj_type,obj_name,amount
--   2024-01-01 00:00:00,db-1,700,C:\Windows\System32\cmd.exe,start,proc,C:\Program Files\SQL\osql.exe,
--   2024-01-01 00:00:01,db-1,900,C:\Windows\explorer.exe,read,file,C:\Users\a\notes.txt,100
--   2024-01-01 00:00:03,db-1,500,C:\Program Files\SQL\sqlservr.exe,write,file,C:\Temp\db.dmp,48213504
--   2024-01-01 00:00:05,db-1,500,C:\Program Files\SQL\sqlservr.exe,read,file,C:\Temp\db.dmp,4096
--   2024-01-01 00:00:07,db-1,812,C:\Temp\dropper.exe,read,file,C:\Temp\db.dmp,48213504
--   2024-01-01 00:00:09,db-1,900,C:\Windows\explorer.exe,write,ip,10.0.0.5,300
--   2024-01-01 00:00:11,db-1,812,C:\Temp\dropper.exe,write,ip,203.0.113.9,50000000
-- (explorer's read at 1, the server re-reading its dump at 5 and explorer's upload at 9 are x
-- rows: in the match, not returned)
-- expect:
--   host,ts,alert,step,events,reader,stolen_at,pid,exe,op,obj_name
--   db-1,2024-01-01 00:00:00,1,C,7,812,2024-01-01 00:00:11,700,C:\Windows\System32\cmd.exe,start,C:\Program Files\SQL\osql.exe
--   db-1,2024-01-01 00:00:03,1,W,7,812,2024-01-01 00:00:11,500,C:\Program Files\SQL\sqlservr.exe,write,C:\Temp\db.dmp
--   db-1,2024-01-01 00:00:07,1,R,7,812,2024-01-01 00:00:11,812,C:\Temp\dropper.exe,read,C:\Temp\db.dmp
--   db-1,2024-01-01 00:00:11,1,S,7,812,2024-01-01 00:00:11,812,C:\Temp\dropper.exe,write,203.0.113.9
--
-- test: two chains on two hosts are two alerts of four rows each, numbered per host
-- input proc_events:
--   ts,host,pid,exe,op,obj_type,obj_name,amount
--   2024-01-01 00:00:00,db-1,700,C:\Windows\System32\cmd.exe,start,proc,C:\Program Files\SQL\osql.exe,
--   2024-01-01 00:00:01,db-2,700,C:\Windows\System32\cmd.exe,start,proc,C:\Program Files\SQL\osql.exe,
--   2024-01-01 00:00:02,db-1,500,C:\Program Files\SQL\sqlservr.exe,write,file,C:\Temp\a.dmp,10
--   2024-01-01 00:00:03,db-2,500,C:\Program Files\SQL\sqlservr.exe,write,file,C:\Temp\b.dmp,10
--   2024-01-01 00:00:04,db-1,812,C:\Temp\dropper.exe,read,file,C:\Temp\a.dmp,10
--   2024-01-01 00:00:05,db-2,813,C:\Temp\other.exe,read,file,C:\Temp\b.dmp,10
--   2024-01-01 00:00:06,db-1,812,C:\Temp\dropper.exe,write,ip,203.0.113.9,10
--   2024-01-01 00:00:07,db-2,813,C:\Temp\other.exe,write,ip,198.51.100.7,10
-- expect:
--   host,ts,alert,step,events,reader
--   db-1,2024-01-01 00:00:00,1,C,4,812
--   db-1,2024-01-01 00:00:02,1,W,4,812
--   db-1,2024-01-01 00:00:04,1,R,4,812
--   db-1,2024-01-01 00:00:06,1,S,4,812
--   db-2,2024-01-01 00:00:01,1,C,4,813
--   db-2,2024-01-01 00:00:03,1,W,4,813
--   db-2,2024-01-01 00:00:05,1,R,4,813
--   db-2,2024-01-01 00:00:07,1,S,4,813
--
-- test: an incomplete chain returns no evidence
-- input proc_events:
--   ts,host,pid,exe,op,obj_type,obj_name,amount
--   2024-01-01 00:00:00,db-1,700,C:\Windows\System32\cmd.exe,start,proc,C:\Program Files\SQL\osql.exe,
--   2024-01-01 00:00:03,db-1,500,C:\Program Files\SQL\sqlservr.exe,write,file,C:\Temp\db.dmp,1000
--   2024-01-01 00:00:07,db-1,812,C:\Temp\dropper.exe,read,file,C:\Temp\db.dmp,1000
-- expect: nothing
CREATE CONTINUOUS QUERY apt_chain_evidence AS
SELECT * FROM proc_events MATCH_RECOGNIZE (
  PARTITION BY host
  ORDER BY ts
  MEASURES MATCH_NUMBER() AS alert, CLASSIFIER() AS step, FINAL COUNT(*) AS events,
           FINAL LAST(r.pid) AS reader, FINAL LAST(s.ts) AS stolen_at
  ALL ROWS PER MATCH
  AFTER MATCH SKIP PAST LAST ROW
  PATTERN (c {- x -}*? w {- x -}*? r {- x -}*? s)
  WITHIN INTERVAL '10' MINUTE
  DEFINE
    c AS op = 'start' AND exe ILIKE '%cmd.exe' AND obj_name ILIKE '%osql.exe',
    w AS op = 'write' AND exe ILIKE '%sqlservr.exe' AND obj_type = 'file'
         AND obj_name ILIKE '%.dmp',
    r AS op = 'read' AND obj_name = w.obj_name AND pid <> w.pid,
    s AS op = 'write' AND obj_type = 'ip' AND pid = r.pid
) AS m;
