-- One row per sample of a metric. The columns are named as in NAB's CSV files
-- (`timestamp,value`), so `saql run` reads them as they are; `series` names the metric when
-- one stream carries many (tests/eval_nab.rs fills it with the file's name, e.g.
-- realKnownCause/nyc_taxi), and is empty (NULL: one series) otherwise.
CREATE STREAM nab_metric (
  timestamp TIMESTAMP NOT NULL, series TEXT, value DOUBLE PRECISION,
  WATERMARK FOR timestamp AS timestamp
);
