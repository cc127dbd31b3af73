//! The PostgreSQL connector: each batch is one `INSERT ... SELECT * FROM
//! json_populate_recordset(NULL::table, $1) ON CONFLICT (seq) DO NOTHING`, so a batch sent
//! again after a lost acknowledgement inserts nothing twice. The table is created at
//! connect if missing, with `seq BIGINT PRIMARY KEY` and a column per result column; an
//! existing table needs a unique `seq` column, and gets only the columns it has.

use std::time::Duration;

use datafusion::arrow::datatypes::{DataType, SchemaRef};
use tokio_postgres::{Client, NoTls};

use super::Delivery;
use crate::error::{Error, Result};
use crate::runtime::SEQ_COLUMN;

/// A connected PostgreSQL sink.
pub struct PostgresWriter {
    client: Client,
    insert: tokio_postgres::Statement,
}

fn pg_error(what: &str, e: tokio_postgres::Error) -> Error {
    let detail = match e.as_db_error() {
        Some(db) => format!("{} ({})", db.message(), db.code().code()),
        None => e.to_string(),
    };
    Error::Execution(format!("postgres: {what}: {detail}"))
}

/// `"a"."b"` from `a.b` (the spec allows plain identifiers only).
fn quote_table(table: &str) -> String {
    table
        .split('.')
        .map(|p| format!("\"{}\"", p.replace('"', "\"\"")))
        .collect::<Vec<_>>()
        .join(".")
}

/// The PostgreSQL type a result column is stored as.
fn pg_type(t: &DataType) -> &'static str {
    match t {
        DataType::Boolean => "BOOLEAN",
        DataType::Int8 | DataType::Int16 | DataType::Int32 | DataType::Int64 => "BIGINT",
        DataType::UInt8 | DataType::UInt16 | DataType::UInt32 => "BIGINT",
        DataType::UInt64 | DataType::Decimal128(..) | DataType::Decimal256(..) => "NUMERIC",
        DataType::Float16 | DataType::Float32 | DataType::Float64 => "DOUBLE PRECISION",
        DataType::Timestamp(_, None) => "TIMESTAMP",
        DataType::Timestamp(_, Some(_)) => "TIMESTAMPTZ",
        DataType::Date32 | DataType::Date64 => "DATE",
        _ => "TEXT",
    }
}

impl PostgresWriter {
    /// Connects, creates the table if it is missing, and prepares the insert.
    pub async fn connect(url: &str, table: &str, schema: &SchemaRef) -> Result<PostgresWriter> {
        let (client, connection) = tokio_postgres::connect(url, NoTls)
            .await
            .map_err(|e| pg_error("connecting", e))?;
        crate::spawn::task(async move {
            if let Err(e) = connection.await {
                tracing::debug!("postgres sink connection ended: {e}");
            }
        });
        let quoted = quote_table(table);
        let mut columns = vec![format!("\"{SEQ_COLUMN}\" BIGINT PRIMARY KEY")];
        for f in schema.fields() {
            columns.push(format!(
                "\"{}\" {}",
                f.name().replace('"', "\"\""),
                pg_type(f.data_type())
            ));
        }
        let create = format!(
            "CREATE TABLE IF NOT EXISTS {quoted} ({})",
            columns.join(", ")
        );
        client
            .batch_execute(&create)
            .await
            .map_err(|e| pg_error(&format!("creating table {table}"), e))?;
        let insert = format!(
            "INSERT INTO {quoted} SELECT * FROM json_populate_recordset(NULL::{quoted}, \
             $1::text::json) ON CONFLICT (\"{SEQ_COLUMN}\") DO NOTHING"
        );
        let insert = client
            .prepare(&insert)
            .await
            .map_err(|e| pg_error(&format!("preparing the insert into {table}"), e))?;
        Ok(PostgresWriter { client, insert })
    }

    /// Inserts the rows of `batch` (those already there are skipped).
    pub async fn write(&self, batch: &Delivery) -> Result<()> {
        let body = batch.json_array();
        self.client
            .execute(&self.insert, &[&body])
            .await
            .map_err(|e| pg_error("inserting", e))?;
        Ok(())
    }

    /// Whether the connection is gone (the runtime reconnects).
    pub fn is_closed(&self) -> bool {
        self.client.is_closed()
    }
}

#[async_trait::async_trait]
impl super::Sink for PostgresWriter {
    async fn send(&self, batch: &Delivery, _timeout: Duration) -> Result<()> {
        self.write(batch).await
    }
}
