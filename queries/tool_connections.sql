-- The network sensor sees a download tool (curl, wget, PowerShell, certutil, bitsadmin) or a
-- program run from a world-writable place (/tmp, /dev/shm, C:\Users\Public, a user's Temp)
-- connect outside the network. A single-event rule over net_events; alerts.sql feeds it into
-- the incident roll-up.
--
-- test: tools and programs from writable places fire when they leave the network
-- input net_events:
--   ts,host,pid,exe,dst_ip,dst_port
--   2024-01-01 00:00:00,web-01,7001,/usr/bin/curl,203.0.113.45,443
--   2024-01-01 00:00:01,win-01,5120,C:\Users\Public\sbblv.exe,203.0.113.66,443
--   2024-01-01 00:00:02,web-02,7002,/usr/bin/wget,10.0.2.10,8080
--   2024-01-01 00:00:03,web-01,900,/usr/sbin/nginx,198.51.100.53,443
--   2024-01-01 00:00:04,app-01,7003,/tmp/.x/agent,192.0.2.200,8443
--   2024-01-01 00:00:05,win-02,4100,C:\Windows\explorer.exe,192.0.2.80,443
-- (wget stays inside; nginx and explorer are no tools; `_` in the patterns matches the \)
-- expect:
--   ts,host,exe,dst_ip,dst_port
--   2024-01-01 00:00:00,web-01,/usr/bin/curl,203.0.113.45,443
--   2024-01-01 00:00:01,win-01,C:\Users\Public\sbblv.exe,203.0.113.66,443
--   2024-01-01 00:00:04,app-01,/tmp/.x/agent,192.0.2.200,8443
CREATE CONTINUOUS QUERY tool_connections AS
SELECT ts, host, pid, exe, dst_ip, dst_port
FROM net_events
WHERE dst_ip NOT LIKE '10.%' AND dst_ip <> '127.0.0.1'
  AND (exe LIKE '%/curl' OR exe LIKE '%/wget' OR exe ILIKE '%powershell.exe'
       OR exe ILIKE '%certutil.exe' OR exe ILIKE '%bitsadmin.exe'
       OR exe LIKE '/tmp/%' OR exe LIKE '/dev/shm/%'
       OR exe ILIKE '%_users_public_%' OR exe ILIKE '%_appdata_local_temp_%');
