-- SAQL's multi-step APT data theft, as one pattern per host within ten minutes:
-- cmd.exe starts osql.exe (c), the SQL server writes a dump file (w), a different process reads
-- that same file (r), and that reader sends data to an IP (s). The attribute relations tie the
-- steps together: the reader reads the file the server wrote, and the sender is the reader.
-- Any other events of the host may come between the steps (x, reluctant).
--
-- test: the whole chain fires once, with the reader and the bytes sent
-- input proc_events:
--   ts,host,pid,exe,op,obj_type,obj_name,amount
--   2024-01-01 00:00:00,db-1,700,C:\Windows\System32\cmd.exe,start,proc,C:\Program Files\SQL\osql.exe,
--   2024-01-01 00:00:01,db-1,900,C:\Windows\explorer.exe,read,file,C:\Users\a\notes.txt,100
--   2024-01-01 00:00:03,db-1,500,C:\Program Files\SQL\sqlservr.exe,write,file,C:\Temp\db.dmp,48213504
--   2024-01-01 00:00:05,db-1,500,C:\Program Files\SQL\sqlservr.exe,read,file,C:\Temp\db.dmp,4096
--   2024-01-01 00:00:07,db-1,812,C:\Temp\dropper.exe,read,file,C:\Temp\db.dmp,48213504
--   2024-01-01 00:00:09,db-1,900,C:\Windows\explorer.exe,write,ip,10.0.0.5,300
--   2024-01-01 00:00:11,db-1,812,C:\Temp\dropper.exe,write,ip,203.0.113.9,50000000
-- (the server re-reading its own dump is not the theft step: r needs another pid; explorer's
-- upload is not the reader's)
-- expect:
--   host,started,dump,reader,reader_exe,dst,sent,stolen_at
--   db-1,2024-01-01 00:00:00,C:\Temp\db.dmp,812,C:\Temp\dropper.exe,203.0.113.9,50000000,2024-01-01 00:00:11
--
-- test: the steps out of order, on different hosts, or too far apart stay silent
-- input proc_events:
--   ts,host,pid,exe,op,obj_type,obj_name,amount
--   2024-01-01 00:00:00,db-1,500,C:\Program Files\SQL\sqlservr.exe,write,file,C:\Temp\db.dmp,1000
--   2024-01-01 00:00:02,db-1,700,C:\Windows\System32\cmd.exe,start,proc,C:\Program Files\SQL\osql.exe,
--   2024-01-01 00:00:04,db-1,812,C:\Temp\dropper.exe,read,file,C:\Temp\db.dmp,1000
--   2024-01-01 00:00:06,db-1,812,C:\Temp\dropper.exe,write,ip,203.0.113.9,1000
--   2024-01-01 00:01:00,db-2,700,C:\Windows\System32\cmd.exe,start,proc,C:\Program Files\SQL\osql.exe,
--   2024-01-01 00:01:01,db-2,500,C:\Program Files\SQL\sqlservr.exe,write,file,C:\Temp\x.dmp,1000
--   2024-01-01 00:01:02,db-3,812,C:\Temp\dropper.exe,read,file,C:\Temp\x.dmp,1000
--   2024-01-01 00:01:03,db-3,812,C:\Temp\dropper.exe,write,ip,203.0.113.9,1000
--   2024-01-01 00:02:00,db-4,700,C:\Windows\System32\cmd.exe,start,proc,C:\Program Files\SQL\osql.exe,
--   2024-01-01 00:02:01,db-4,500,C:\Program Files\SQL\sqlservr.exe,write,file,C:\Temp\y.dmp,1000
--   2024-01-01 00:02:02,db-4,812,C:\Temp\dropper.exe,read,file,C:\Temp\y.dmp,1000
--   2024-01-01 00:13:00,db-4,812,C:\Temp\dropper.exe,write,ip,203.0.113.9,1000
-- (db-1: the dump was written before osql started, so w cannot follow c; db-2/db-3: the read
-- and the upload are on another host; db-4: the upload comes 13 minutes after the start)
-- expect: nothing
CREATE CONTINUOUS QUERY apt_chain AS
SELECT * FROM proc_events MATCH_RECOGNIZE (
  PARTITION BY host
  ORDER BY ts
  MEASURES c.ts AS started, w.obj_name AS dump, r.pid AS reader, r.exe AS reader_exe,
           s.obj_name AS dst, s.amount AS sent, s.ts AS stolen_at
  ONE ROW PER MATCH
  AFTER MATCH SKIP PAST LAST ROW
  PATTERN (c x*? w x*? r x*? s)
  WITHIN INTERVAL '10' MINUTE
  DEFINE
    c AS op = 'start' AND exe ILIKE '%cmd.exe' AND obj_name ILIKE '%osql.exe',
    w AS op = 'write' AND exe ILIKE '%sqlservr.exe' AND obj_type = 'file'
         AND obj_name ILIKE '%.dmp',
    r AS op = 'read' AND obj_name = w.obj_name AND pid <> w.pid,
    s AS op = 'write' AND obj_type = 'ip' AND pid = r.pid
) AS m;
