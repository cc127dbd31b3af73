//! Flink tables for saql's streams and query results: a filesystem CSV source per stream (its
//! columns, and its `WATERMARK` clause as Flink states it) and a filesystem CSV sink per query
//! (the columns of saql's result schema). Paths are placeholders the generated program fills
//! in at run time (`{path}`).

use datafusion::arrow::datatypes::{DataType, Schema, TimeUnit};

use super::expr::{interval_sql, name_sql};
use crate::error::{Error, Result};
use crate::plan::StreamDef;

/// The `WITH` options of every table: CSV files, an empty field is NULL (as in saql's CSV).
pub const CSV_OPTIONS: &str =
    "'connector' = 'filesystem', 'path' = '{path}', 'format' = 'csv', 'csv.null-literal' = ''";

/// Flink's name for an Arrow type saql uses. Timestamps are milliseconds in Flink (the event
/// time of a Flink table must be `TIMESTAMP(3)`).
pub fn flink_type(t: &DataType) -> Result<&'static str> {
    Ok(match t {
        DataType::Boolean => "BOOLEAN",
        DataType::Int16 => "SMALLINT",
        DataType::Int32 => "INT",
        DataType::Int64 => "BIGINT",
        DataType::UInt64 => "DECIMAL(20, 0)",
        DataType::Float32 => "FLOAT",
        DataType::Float64 => "DOUBLE",
        DataType::Utf8 | DataType::LargeUtf8 | DataType::Utf8View => "STRING",
        DataType::Timestamp(TimeUnit::Nanosecond, None) => "TIMESTAMP(3)",
        DataType::Timestamp(TimeUnit::Nanosecond, Some(_)) => "TIMESTAMP_LTZ(3)",
        other => {
            return Err(Error::NotSupported(format!(
                "the type {other} has no Flink counterpart here"
            )))
        }
    })
}

fn columns(schema: &Schema) -> Result<Vec<String>> {
    schema
        .fields()
        .iter()
        .map(|f| {
            Ok(format!(
                "{} {}",
                name_sql(f.name()),
                flink_type(f.data_type())?
            ))
        })
        .collect()
}

/// `CREATE TABLE stream (cols, WATERMARK ...) WITH (...)` for a stream; `{path}` is left for
/// the program to fill in.
pub fn source_table(stream: &StreamDef) -> Result<String> {
    let mut cols = columns(&stream.schema)?;
    if let Some(et) = &stream.event_time {
        let column = name_sql(stream.schema.field(et.column).name());
        let watermark = if et.delay.is_zero() {
            format!("WATERMARK FOR {column} AS {column}")
        } else {
            format!(
                "WATERMARK FOR {column} AS {column} - {}",
                interval_sql(et.delay)?
            )
        };
        cols.push(watermark);
    }
    Ok(format!(
        "CREATE TABLE {} (\n  {}\n) WITH ({CSV_OPTIONS})",
        name_sql(&stream.name),
        cols.join(",\n  ")
    ))
}

/// The sink table name of query `query`.
pub fn sink_name(query: &str) -> String {
    name_sql(&format!("{query}__sink"))
}

/// `CREATE TABLE <query>__sink (cols) WITH (...)` for a query's results.
pub fn sink_table(query: &str, schema: &Schema) -> Result<String> {
    Ok(format!(
        "CREATE TABLE {} (\n  {}\n) WITH ({CSV_OPTIONS})",
        sink_name(query),
        columns(schema)?.join(",\n  ")
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::Catalog;

    #[test]
    fn a_stream_becomes_a_csv_table_with_its_watermark() {
        let catalog = Catalog::from_sql(
            "CREATE STREAM ev (ts TIMESTAMP NOT NULL, host TEXT, \"user\" TEXT, n BIGINT, \
             cpu DOUBLE PRECISION, WATERMARK FOR ts AS ts - INTERVAL '2' SECOND)",
        )
        .unwrap();
        let ddl = source_table(catalog.stream("ev").unwrap()).unwrap();
        assert_eq!(
            ddl,
            "CREATE TABLE ev (\n  ts TIMESTAMP(3),\n  host STRING,\n  `user` STRING,\n  \
             n BIGINT,\n  cpu DOUBLE,\n  WATERMARK FOR ts AS ts - INTERVAL '2' SECOND\n) \
             WITH ('connector' = 'filesystem', 'path' = '{path}', 'format' = 'csv', \
             'csv.null-literal' = '')"
        );
    }
}
