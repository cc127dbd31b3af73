-- SAQL rule on a single event: cmd.exe starts osql.exe (the first step of the APT
-- data-theft chain in the SAQL paper).
--
-- test: cmd.exe starting osql.exe fires, whatever the case of the names
-- input proc_events:
--   ts,host,pid,exe,op,obj_name
--   2024-01-01 00:00:01,win-7,4100,C:\Windows\System32\cmd.exe,start,C:\Windows\notepad.exe
--   2024-01-01 00:00:05,win-7,4242,C:\Windows\System32\CMD.EXE,start,C:\Program Files\SQL\osql.exe
--   2024-01-01 00:00:09,win-7,4242,C:\Windows\System32\cmd.exe,read,C:\Program Files\SQL\osql.exe
-- input proc_events:
--   ts,host,pid,exe,op,obj_name
--   2024-01-01 00:00:03,win-9,77,C:\Windows\System32\cmd.exe,start,D:\tools\OSQL.EXE
-- (two inputs of one stream are merged by event time; both starts of osql.exe match)
-- expect:
--   ts,host,pid,exe,obj_name
--   2024-01-01 00:00:03,win-9,77,C:\Windows\System32\cmd.exe,D:\tools\OSQL.EXE
--   2024-01-01 00:00:05,win-7,4242,C:\Windows\System32\CMD.EXE,C:\Program Files\SQL\osql.exe
--
-- test: osql.exe started by another program, or cmd.exe doing something else, is silent
-- input proc_events:
--   ts,host,pid,exe,op,obj_name
--   2024-01-01 00:00:01,win-7,4100,C:\Windows\System32\WindowsPowerShell\powershell.exe,start,C:\Program Files\SQL\osql.exe
--   2024-01-01 00:00:02,win-7,4101,C:\Windows\System32\cmd.exe,start,C:\Windows\System32\ping.exe
--   2024-01-01 00:00:03,win-7,4101,C:\Windows\System32\cmd.exe,write,C:\Temp\osql.exe
--   2024-01-01 00:00:04,win-7,4102,C:\Windows\System32\cmd.exe.bak,start,C:\Program Files\SQL\osql.exe
-- expect: nothing
CREATE CONTINUOUS QUERY cmd_starts_osql AS
SELECT ts, host, pid, exe, obj_name
FROM proc_events
WHERE op = 'start' AND exe ILIKE '%cmd.exe' AND obj_name ILIKE '%osql.exe';
