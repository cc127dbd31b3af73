-- The streams of the built-in demo (saql serve --demo) and of the queries in this folder:
-- system events (process, file, network, login) from a process sensor, per-host metrics, one
-- row per second, and the outbound connections a network sensor sees.
CREATE STREAM proc_events (
  ts TIMESTAMP NOT NULL, host TEXT, pid BIGINT, ppid BIGINT, user_name TEXT, exe TEXT,
  op TEXT, obj_type TEXT, obj_name TEXT, dst_ip TEXT, amount BIGINT,
  WATERMARK FOR ts AS ts - INTERVAL '2' SECOND
) WITH (idle_timeout = '5s');
CREATE STREAM host_metrics (
  ts TIMESTAMP NOT NULL, host TEXT, cpu DOUBLE PRECISION, mem DOUBLE PRECISION,
  net_out BIGINT, disk_io BIGINT,
  WATERMARK FOR ts AS ts - INTERVAL '2' SECOND
) WITH (idle_timeout = '5s');
CREATE STREAM net_events (
  ts TIMESTAMP NOT NULL, host TEXT, pid BIGINT, ppid BIGINT, exe TEXT, src_ip TEXT,
  dst_ip TEXT, dst_port BIGINT, bytes_out BIGINT,
  WATERMARK FOR ts AS ts - INTERVAL '2' SECOND
) WITH (idle_timeout = '5s');
