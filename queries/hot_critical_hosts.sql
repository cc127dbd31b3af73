-- A host of criticality 4 or more (table assets, 01_tables.sql) whose CPU passes 95 percent,
-- with its owner, so the alert says whom to call: enrichment by a lookup join.
--
-- test: only critical hosts alert, with their owner
-- input host_metrics:
--   ts,host,cpu
--   2024-01-01 00:00:01,web-01,97
--   2024-01-01 00:00:02,web-02,99
--   2024-01-01 00:00:03,db-01,80
--   2024-01-01 00:00:04,db-01,96.5
--   2024-01-01 00:00:05,lab-07,99
-- (web-02 has criticality 3; lab-07 is not in the inventory)
-- expect:
--   ts,host,cpu,owner,criticality
--   2024-01-01 00:00:01,web-01,97,web-team,5
--   2024-01-01 00:00:04,db-01,96.5,dba,5
CREATE CONTINUOUS QUERY hot_critical_hosts AS
SELECT m.ts, m.host, m.cpu, a.owner, a.criticality
FROM host_metrics m JOIN assets a ON m.host = a.host
WHERE m.cpu > 95 AND a.criticality >= 4;
