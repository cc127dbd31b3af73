-- SAQL's invariant model on the process tree: for each program on each host, the set of
-- programs it starts, learned over the first minute of process starts; after that, a program
-- starting one it had not started before is reported, once (ONLINE: it is then learned).
--
-- test: after training, a new child is reported once; known ones and new parents' repeats not
-- input win_events:
--   ts,host,pid,exe,op,obj_name,cmdline
--   2023-08-18 15:56:06,prd01,10,C:\Windows\explorer.exe,start,C:\Program Files\Edge\msedge.exe,msedge
--   2023-08-18 15:56:07,prd01,11,C:\Windows\System32\services.exe,start,C:\Windows\System32\svchost.exe,svchost -k netsvcs
--   2023-08-18 15:57:10,prd01,10,C:\Windows\explorer.exe,start,C:\Program Files\Edge\MSEDGE.EXE,msedge
--   2023-08-18 15:57:20,prd01,12,C:\Windows\System32\services.exe,start,C:\Windows\System32\rundll32.exe,"rundll32.exe qfhaer.dll,a"
--   2023-08-18 15:57:30,prd01,13,C:\Windows\System32\services.exe,start,C:\Windows\System32\rundll32.exe,"rundll32.exe qfhaer.dll,a"
--   2023-08-18 15:57:40,prd01,14,C:\Users\x\payload.exe,start,C:\Windows\System32\cmd.exe,cmd.exe
-- (training is [15:56:06, 15:57:06): explorer learns msedge, services svchost; case does not
-- matter; rundll32 under services is new and reported the first time only; payload.exe had
-- no children in training, so its first one is new)
-- expect:
--   ts,parent,child
--   2023-08-18 15:57:20,c:\windows\system32\services.exe,c:\windows\system32\rundll32.exe
--   2023-08-18 15:57:40,c:\users\x\payload.exe,c:\windows\system32\cmd.exe
CREATE CONTINUOUS QUERY new_child_process AS
SELECT ts, host, pid, lower(exe) AS parent, lower(obj_name) AS child, cmdline
FROM win_events
WHERE op = 'start'
INVARIANT SET (child) PER (host, parent) TRAINING INTERVAL '1' MINUTE ONLINE;
