-- SAQL rule on a single event: cmd.exe starts osql.exe (the first step of the APT
-- data-theft chain in the SAQL paper).
CREATE CONTINUOUS QUERY cmd_starts_osql AS
SELECT ts, host, pid, exe, obj_name
FROM proc_events
WHERE op = 'start' AND exe ILIKE '%cmd.exe' AND obj_name ILIKE '%osql.exe';
