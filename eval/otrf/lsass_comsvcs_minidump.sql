-- Credential theft (ATT&CK T1003.001): rundll32 calling MiniDump, an export of comsvcs.dll
-- that writes a process's memory to a file; pointed at lsass.exe it dumps the credentials
-- held there. The export can also be called by its ordinal, #24. (Paths are matched with
-- `[\\/]name` rather than `\\name`: DataFusion 55 rewrites a regex that is a plain literal
-- into LIKE without escaping its backslashes, so `'\\rundll32\.exe$'` would also match
-- "notrundll32.exe".)
--
-- test: the atomic test's command line, and the ordinal form, fire
-- input win_events:
--   ts,host,pid,exe,op,obj_type,obj_name,obj_pid,cmdline
--   2020-10-18 23:50:05.910,ws5,6100,C:\Windows\System32\WindowsPowerShell\v1.0\powershell.exe,start,proc,C:\Windows\System32\rundll32.exe,4824,"""C:\Windows\System32\rundll32.exe"" C:\windows\System32\comsvcs.dll MiniDump 756 C:\Temp\lsass-comsvcs.dmp full"
--   2020-10-18 23:51:00,ws5,6100,C:\Windows\System32\cmd.exe,start,proc,C:\Windows\System32\RUNDLL32.EXE,4900,"rundll32 C:\Windows\System32\comsvcs.dll, #24 756 C:\Temp\x.bin full"
-- expect:
--   ts,parent,pid
--   2020-10-18 23:50:05.910,C:\Windows\System32\WindowsPowerShell\v1.0\powershell.exe,4824
--   2020-10-18 23:51:00,C:\Windows\System32\cmd.exe,4900
--
-- test: other rundll32 calls, and comsvcs named by something else, stay silent
-- input win_events:
--   ts,host,pid,exe,op,obj_type,obj_name,obj_pid,cmdline
--   2020-10-18 23:50:05,ws5,1,C:\Windows\System32\svchost.exe,start,proc,C:\Windows\System32\rundll32.exe,2,"rundll32.exe shell32.dll,Control_RunDLL"
--   2020-10-18 23:50:06,ws5,1,C:\Windows\explorer.exe,start,proc,C:\Windows\notepad.exe,3,notepad comsvcs.dll MiniDump.txt
--   2020-10-18 23:50:07,ws5,1,C:\Windows\System32\rundll32.exe,load,module,C:\Windows\System32\comsvcs.dll,,
-- expect: nothing
CREATE CONTINUOUS QUERY lsass_comsvcs_minidump AS
SELECT ts, host, exe AS parent, obj_pid AS pid, cmdline
FROM win_events
WHERE op = 'start' AND obj_name ~* '[\\/]rundll32\.exe$'
  AND cmdline ILIKE '%comsvcs%' AND (cmdline ILIKE '%minidump%' OR cmdline LIKE '%#24%');
