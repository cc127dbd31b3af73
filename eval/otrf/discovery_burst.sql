-- Discovery (ATT&CK T1082 system information, T1033 system owner, T1057 processes, T1016
-- network configuration, T1087 accounts): one process starting three or more different
-- discovery tools in one burst of activity (a session: starts less than 2 minutes apart), as
-- a hands-on-keyboard shell does right after getting in.
--
-- test: a shell running systeminfo, whoami twice and tasklist fires once
-- input win_events:
--   ts,host,pid,exe,op,obj_name
--   2023-08-18 15:57:02,prd01,5080,C:\Windows\System32\cmd.exe,start,C:\Windows\System32\systeminfo.exe
--   2023-08-18 15:57:11,prd01,5080,C:\Windows\System32\cmd.exe,start,C:\Windows\System32\whoami.exe
--   2023-08-18 15:57:11.5,prd01,5080,C:\Windows\System32\cmd.exe,start,C:\Windows\System32\WHOAMI.EXE
--   2023-08-18 15:57:32,prd01,5080,C:\Windows\System32\cmd.exe,start,C:\Windows\System32\tasklist.exe
--   2023-08-18 15:57:40,prd01,5080,C:\Windows\System32\cmd.exe,start,C:\Windows\System32\conhost.exe
-- (the session of pid 5080's discovery starts runs from 15:57:02 to 15:57:32 plus the 2
-- minute gap; whoami counts once whatever its case; conhost is not a discovery tool)
-- expect:
--   host,pid,window_start,window_end,tools,starts
--   prd01,5080,2023-08-18 15:57:02,2023-08-18 15:59:32,3,4
--
-- test: tools run by different processes, or too far apart, stay silent
-- input win_events:
--   ts,host,pid,exe,op,obj_name
--   2023-08-18 16:03:20,prd01,1,C:\Windows\System32\cmd.exe,start,C:\Windows\System32\systeminfo.exe
--   2023-08-18 16:03:21,prd01,2,C:\Windows\System32\cmd.exe,start,C:\Windows\System32\whoami.exe
--   2023-08-18 16:03:22,prd01,3,C:\Windows\System32\cmd.exe,start,C:\Windows\System32\tasklist.exe
--   2023-08-18 16:10:00,prd01,4,C:\Windows\System32\cmd.exe,start,C:\Windows\System32\systeminfo.exe
--   2023-08-18 16:13:00,prd01,4,C:\Windows\System32\cmd.exe,start,C:\Windows\System32\whoami.exe
--   2023-08-18 16:16:00,prd01,4,C:\Windows\System32\cmd.exe,start,C:\Windows\System32\tasklist.exe
-- expect: nothing
CREATE CONTINUOUS QUERY discovery_burst AS
SELECT host, pid, exe, window_start, window_end,
  COUNT(DISTINCT lower(obj_name)) AS tools, COUNT(*) AS starts
FROM SESSION(win_events, ts, INTERVAL '2' MINUTE)
WHERE op = 'start'
  AND obj_name ~* '[\\/](systeminfo|whoami|tasklist|hostname|ipconfig|net|net1|netstat|nltest|quser|qprocess|arp|route|nslookup)\.exe$'
GROUP BY host, pid, exe, window_start, window_end
HAVING COUNT(DISTINCT lower(obj_name)) >= 3;
