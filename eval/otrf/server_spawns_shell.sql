-- Exploitation of a server application (ATT&CK T1190; e.g. Log4Shell, CVE-2021-44228): a Java
-- application server or web server starting a shell or script interpreter. A server's
-- children are its own workers, not cmd or powershell: the exploit's payload is.
--
-- test: Tomcat starting powershell fires
-- input win_events:
--   ts,host,pid,exe,op,obj_type,obj_name,obj_pid,cmdline
--   2022-05-13 08:54:08.420,ws5,3936,C:\ProgramData\chocolatey\lib\Tomcat\tools\apache-tomcat-9.0.62\bin\tomcat9.exe,start,proc,C:\Windows\System32\WindowsPowerShell\v1.0\powershell.exe,2084,powershell.exe -NonI -W Hidden -NoP -Exec Bypass -Enc SQBmACgA
--   2022-05-13 08:54:09,ws5,77,C:\Program Files\Java\bin\java.exe,start,proc,C:\Windows\System32\cmd.exe,78,cmd /c whoami
-- expect:
--   ts,pid,child
--   2022-05-13 08:54:08.420,3936,C:\Windows\System32\WindowsPowerShell\v1.0\powershell.exe
--   2022-05-13 08:54:09,77,C:\Windows\System32\cmd.exe
--
-- test: a shell started by explorer, or a server starting its own workers, stays silent
-- input win_events:
--   ts,host,pid,exe,op,obj_type,obj_name,obj_pid
--   2022-05-13 08:54:08,ws5,10,C:\Windows\explorer.exe,start,proc,C:\Windows\System32\cmd.exe,11
--   2022-05-13 08:54:09,ws5,12,C:\Apache24\bin\httpd.exe,start,proc,C:\Apache24\bin\httpd.exe,13
--   2022-05-13 08:54:10,ws5,14,C:\Program Files\Java\bin\java.exe,open,proc,C:\Windows\System32\cmd.exe,11
-- expect: nothing
CREATE CONTINUOUS QUERY server_spawns_shell AS
SELECT ts, host, pid, exe AS parent, obj_name AS child, cmdline
FROM win_events
WHERE op = 'start'
  AND exe ~* '[\\/](java|javaw|tomcat[0-9]*|w3wp|httpd|nginx|php-cgi|sqlservr)\.exe$'
  AND obj_name ~* '[\\/](cmd|powershell|pwsh|wscript|cscript|mshta|rundll32|regsvr32|bash|wsl)\.exe$';
