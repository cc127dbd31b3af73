-- Credential theft (ATT&CK T1003.001) by any tool: a process opening lsass.exe with the right
-- to read its memory (PROCESS_VM_READ, 0x0010, in the access it was granted). The programs
-- that open lsass routinely in these recordings (svchost, VBoxService, tasklist) ask for less
-- (0x1000 or 0x1400: query information only), so no list of trusted programs is needed.
--
-- test: full access and 0x1410 (query information and read memory) fire
-- input win_events:
--   ts,host,pid,exe,op,obj_type,obj_name,obj_pid,access
--   2020-10-18 23:50:05.963,ws5,4824,C:\Windows\System32\rundll32.exe,open,proc,C:\windows\system32\lsass.exe,756,5136
--   2020-10-18 23:50:05.994,ws5,4824,C:\Windows\System32\rundll32.exe,open,proc,C:\windows\system32\lsass.exe,756,2097151
-- (5136 is 0x1410, 2097151 is 0x1fffff)
-- expect:
--   ts,exe,access
--   2020-10-18 23:50:05.963,C:\Windows\System32\rundll32.exe,0x1410
--   2020-10-18 23:50:05.994,C:\Windows\System32\rundll32.exe,0x1fffff
--
-- test: querying lsass, or reading another process, stays silent
-- input win_events:
--   ts,host,pid,exe,op,obj_type,obj_name,obj_pid,access
--   2023-08-18 15:56:10,prd01,1232,C:\Windows\System32\VBoxService.exe,open,proc,C:\Windows\system32\lsass.exe,628,5120
--   2023-08-18 15:56:11,prd01,904,C:\Windows\system32\svchost.exe,open,proc,C:\Windows\system32\lsass.exe,628,4096
--   2023-08-18 15:56:12,prd01,904,C:\Windows\system32\svchost.exe,open,proc,C:\Windows\system32\notlsass.exe,777,2097151
-- (5120 is 0x1400, 4096 is 0x1000: no 0x10 bit)
-- expect: nothing
CREATE CONTINUOUS QUERY lsass_memory_read AS
SELECT ts, host, pid, exe, obj_name AS target, '0x' || to_hex(access) AS access
FROM win_events
WHERE op = 'open' AND obj_name ~* '[\\/]lsass\.exe$' AND (access & 16) <> 0;
