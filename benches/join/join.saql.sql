-- The interval join of queries/start_then_connect.sql over the benchmark's two files (the streams
-- as queries/00_streams.sql declares them).
CREATE STREAM proc_events (
  ts TIMESTAMP NOT NULL, host TEXT, pid BIGINT, ppid BIGINT, user_name TEXT, exe TEXT,
  op TEXT, obj_type TEXT, obj_name TEXT, dst_ip TEXT, amount BIGINT,
  WATERMARK FOR ts AS ts - INTERVAL '2' SECOND
);
CREATE STREAM net_events (
  ts TIMESTAMP NOT NULL, host TEXT, pid BIGINT, ppid BIGINT, exe TEXT, src_ip TEXT,
  dst_ip TEXT, dst_port BIGINT, bytes_out BIGINT,
  WATERMARK FOR ts AS ts - INTERVAL '2' SECOND
);
CREATE CONTINUOUS QUERY start_then_connect AS
SELECT p.ts AS started, p.host, p.pid AS parent, n.pid, n.exe, n.dst_ip, n.ts AS connected
FROM (SELECT ts, host, pid, exe, obj_name FROM proc_events WHERE op = 'start') p
JOIN (SELECT * FROM net_events WHERE dst_ip NOT LIKE '10.%' AND dst_ip <> '127.0.0.1') n
  ON n.host = p.host AND n.ppid = p.pid AND n.exe = p.obj_name
 AND n.ts BETWEEN p.ts AND p.ts + INTERVAL '10' SECOND;
