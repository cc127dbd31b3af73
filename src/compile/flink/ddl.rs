//! Flink tables for saql's streams, reference tables and query results: a filesystem CSV
//! source per stream (its columns, and its `WATERMARK` clause as Flink states it), a versioned
//! table per reference table (its rows, its primary key, and the time each row is valid from
//! as its time attribute), and a filesystem CSV sink per query (the columns of saql's result
//! schema). Paths are placeholders the generated program fills in at run time (`{path}`).

use datafusion::arrow::array::Array;
use datafusion::arrow::datatypes::{DataType, Schema, TimeUnit};
use datafusion::arrow::util::display::{ArrayFormatter, FormatOptions};

use super::expr::{interval_sql, name_sql};
use crate::error::{Error, Result};
use crate::plan::{StreamDef, TableDef};

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

/// The column of a reference table's Flink table that holds the time its row is valid from.
pub const VALID_FROM: &str = "__saql_valid_from";

/// When a row is valid from if nothing says otherwise: the start (saql's lookup join reads
/// the table as it is, and a temporal join reads a table's first rows from the start).
const THE_START: &str = "CAST(TIMESTAMP '1970-01-01 00:00:00' AS TIMESTAMP(3))";

/// `CREATE TABLE <t> (cols, __saql_valid_from AS ..., WATERMARK ..., PRIMARY KEY (k) NOT
/// ENFORCED) WITH (...)`: a versioned table (Flink's temporal joins read one) holding the
/// rows of table `def`. Each row is valid from the start; with `versioned`, from its
/// `version_time` column's time (the start if NULL), as saql's temporal join starts the
/// versions of the rows a table holds when the query starts. Named as
/// [`super::select::TableUse::flink_name`] names it.
pub fn reference_table(def: &TableDef, versioned: bool) -> Result<String> {
    let schema = def.store.schema();
    let key = def.store.key();
    let mut cols = Vec::new();
    for (i, f) in schema.fields().iter().enumerate() {
        let not_null = if key.contains(&i) || !f.is_nullable() {
            " NOT NULL"
        } else {
            ""
        };
        cols.push(format!(
            "{} {}{not_null}",
            name_sql(f.name()),
            flink_type(f.data_type())?
        ));
    }
    let valid_from = match def.version_time.filter(|_| versioned) {
        Some(c) => {
            let f = schema.field(c);
            if f.data_type() != &DataType::Timestamp(TimeUnit::Nanosecond, None) {
                return Err(Error::NotSupported(format!(
                    "the version_time column \"{}\" of table \"{}\" has type {}: a Flink \
                     versioned table is timed by a TIMESTAMP",
                    f.name(),
                    def.name,
                    f.data_type()
                )));
            }
            format!("COALESCE({}, {THE_START})", name_sql(f.name()))
        }
        None => THE_START.to_string(),
    };
    cols.push(format!("{VALID_FROM} AS {valid_from}"));
    cols.push(format!("WATERMARK FOR {VALID_FROM} AS {VALID_FROM}"));
    let keys: Vec<String> = key
        .iter()
        .map(|&i| name_sql(schema.field(i).name()))
        .collect();
    cols.push(format!("PRIMARY KEY ({}) NOT ENFORCED", keys.join(", ")));
    let name = if versioned && def.version_time.is_some() {
        format!("{}__versions", def.name)
    } else {
        def.name.clone()
    };
    Ok(format!(
        "CREATE TABLE {} (\n  {}\n) WITH ({CSV_OPTIONS})",
        name_sql(&name),
        cols.join(",\n  ")
    ))
}

/// The rows table `def` holds, as CSV lines in its column order (sorted; an empty field is
/// NULL, an empty string is `""`; timestamps to the millisecond).
pub fn table_rows(def: &TableDef) -> Result<String> {
    let batch = def.store.read().batch(def.store.schema())?;
    let options = FormatOptions::default()
        .with_null("")
        .with_timestamp_format(Some("%Y-%m-%d %H:%M:%S%.3f"));
    let formatters: Vec<ArrayFormatter> = batch
        .columns()
        .iter()
        .map(|c| ArrayFormatter::try_new(c.as_ref(), &options))
        .collect::<std::result::Result<_, _>>()?;
    let mut lines: Vec<String> = (0..batch.num_rows())
        .map(|row| {
            let fields: Vec<String> = formatters
                .iter()
                .zip(batch.columns())
                .map(|(f, col)| {
                    let text = f.value(row).to_string();
                    let is_text = matches!(col.data_type(), DataType::Utf8 | DataType::LargeUtf8);
                    if is_text
                        && !col.is_null(row)
                        && (text.is_empty() || text.contains([',', '"', '\n', '\r']))
                    {
                        format!("\"{}\"", text.replace('"', "\"\""))
                    } else {
                        text
                    }
                })
                .collect();
            fields.join(",")
        })
        .collect();
    lines.sort();
    Ok(lines.iter().map(|l| format!("{l}\n")).collect())
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
