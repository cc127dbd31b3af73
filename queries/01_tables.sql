-- Reference tables the correlation queries read, with the rows the demo needs: a threat-intel
-- watch-list (the addresses its attacks use) and an asset inventory (owner and criticality of
-- each demo host). Change them while saql runs (INSERT ... ON CONFLICT, UPDATE, DELETE, COPY):
-- every row a query processes afterwards sees the change; results already sent stay as they
-- were.
CREATE TABLE threat_intel (
  ip TEXT PRIMARY KEY, tag TEXT NOT NULL, severity INT NOT NULL
);
CREATE TABLE assets (
  host TEXT PRIMARY KEY, owner TEXT NOT NULL, criticality INT NOT NULL
);
INSERT INTO threat_intel VALUES
  ('203.0.113.66', 'exfil-drop', 9),
  ('203.0.113.23', 'ssh-bruteforce', 7),
  ('203.0.113.9', 'exploit-kit-host', 8)
ON CONFLICT (ip) DO NOTHING;
INSERT INTO assets VALUES
  ('web-01', 'web-team', 5), ('web-02', 'web-team', 3), ('db-01', 'dba', 5),
  ('app-01', 'app-team', 3), ('win-01', 'it-desk', 2), ('win-02', 'it-desk', 2)
ON CONFLICT (host) DO NOTHING;
