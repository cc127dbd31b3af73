-- Golden test of `saql check` (tests/cli.rs): one error in each query below.
CREATE STREAM logins (ts TIMESTAMP NOT NULL, host TEXT, ok BOOLEAN,
  WATERMARK FOR ts AS ts - INTERVAL '5' SECOND);
CREATE CONTINUOUS QUERY parse_error AS SELECT host FROM logins WHERE ok ok;
CREATE CONTINUOUS QUERY unknown_column AS SELECT host, nope FROM logins;
CREATE CONTINUOUS QUERY unknown_stream AS SELECT host FROM nowhere;
CREATE CONTINUOUS QUERY twice AS SELECT host FROM logins WHERE ok;
CREATE CONTINUOUS QUERY twice AS SELECT host FROM logins WHERE NOT ok;
