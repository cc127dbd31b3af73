-- Windows host activity from Sysmon, in SAQL's shape: a subject process (host, pid, exe) does
-- op to an object (obj_type, obj_name, obj_pid). tests/eval_otrf.rs maps Sysmon's events so:
--
--   EventID  op        subject (pid, exe)                 object (obj_name, obj_pid)
--   1        'start'   the parent: ParentProcessId,       the new process: Image, ProcessId;
--                      ParentImage                        cmdline is its CommandLine
--   7        'load'    ProcessId, Image                   obj_type 'module': ImageLoaded
--   10       'open'    SourceProcessId, SourceImage       obj_type 'proc': TargetImage,
--                                                         TargetProcessId; access is
--                                                         GrantedAccess as a number
--   11       'create'  ProcessId, Image                   obj_type 'file': TargetFilename
--
-- ts is Sysmon's UtcTime; event_id keeps the EventID.
CREATE STREAM win_events (
  ts TIMESTAMP NOT NULL, host TEXT, event_id INT, pid BIGINT, exe TEXT,
  op TEXT, obj_type TEXT, obj_name TEXT, obj_pid BIGINT, cmdline TEXT, access BIGINT,
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND
);
