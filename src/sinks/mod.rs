//! Where a continuous query's results go besides its subscribers: an HTTP webhook, a Kafka
//! topic, a PostgreSQL table. Each sink reads its query's rows with their sequence numbers,
//! encodes a batch of them as JSON ([`Delivery`]) and hands it to its connector; the
//! runtime (`runtime::sinks`) advances the sink's delivered seq only after the connector
//! acknowledged the batch, so delivery is at least once, in order, and the seq of each row
//! lets the receiver drop duplicates.

#[cfg(all(feature = "server", feature = "kafka"))]
pub mod kafka;
#[cfg(feature = "server")]
pub mod postgres;
pub mod spec;
#[cfg(feature = "server")]
pub mod webhook;

use datafusion::arrow::array::{Array, AsArray};
use datafusion::arrow::datatypes::Int64Type;
use datafusion::arrow::json::writer::{LineDelimited, WriterBuilder};
use datafusion::arrow::record_batch::RecordBatch;

use crate::error::{Error, Result};

/// A connected destination: what every sink connector is to the runtime's delivery loop
/// (`runtime::connectors::sink_loop`), which batches the rows, retries, and records what
/// was acknowledged. A connector must acknowledge a delivery only once its destination
/// holds it; a delivery that fails is sent again (after connecting again), so it must be
/// safe to receive twice (each row carries its seq).
#[cfg(feature = "server")]
#[async_trait::async_trait]
pub trait Sink: Send + Sync {
    /// Delivers `batch`, within `timeout`.
    async fn send(&self, batch: &Delivery, timeout: std::time::Duration) -> Result<()>;
}

/// Connects sink `name` to `target`, for rows of `schema` (a seq column, then the query's).
#[cfg(feature = "server")]
pub async fn connect(
    name: &str,
    target: &spec::SinkTarget,
    schema: &datafusion::arrow::datatypes::SchemaRef,
) -> Result<Box<dyn Sink>> {
    use spec::SinkTarget;
    Ok(match target {
        SinkTarget::Webhook {
            authority,
            host,
            port,
            path,
        } => Box::new(webhook::Webhook {
            sink: name.to_string(),
            authority: authority.clone(),
            host: host.clone(),
            port: *port,
            path: path.clone(),
        }),
        #[cfg(feature = "kafka")]
        SinkTarget::Kafka {
            brokers,
            topic,
            partition,
            key,
        } => Box::new(kafka::KafkaWriter::connect(brokers, topic, *partition, key.clone()).await?),
        #[cfg(not(feature = "kafka"))]
        SinkTarget::Kafka { .. } => {
            return Err(Error::NotSupported(
                "Kafka sinks need saql built with the \"kafka\" feature".into(),
            ))
        }
        SinkTarget::Postgres { url, table } => {
            Box::new(postgres::PostgresWriter::connect(url, table, schema).await?)
        }
    })
}

/// One batch of result rows on its way out: their seqs and each row as a JSON object.
#[derive(Debug, Clone)]
pub struct Delivery {
    /// Seq of the first row.
    pub first: u64,
    /// Seq of the last row.
    pub last: u64,
    /// Each row as a JSON object (`"seq"` first, then the query's columns, nulls written).
    pub rows: Vec<String>,
}

impl Delivery {
    /// Encodes rows whose first column is `seq` (as a subscription `WITH SEQ` gives them).
    pub fn encode(batch: &RecordBatch) -> Result<Delivery> {
        let seqs = batch
            .column(0)
            .as_primitive_opt::<Int64Type>()
            .filter(|s| s.null_count() == 0 && !s.is_empty())
            .ok_or_else(|| Error::Internal("a sink batch without its seq column".into()))?;
        let (first, last) = (seqs.value(0) as u64, seqs.value(seqs.len() - 1) as u64);
        let mut buf = Vec::new();
        {
            let mut writer = WriterBuilder::new()
                .with_explicit_nulls(true)
                .build::<_, LineDelimited>(&mut buf);
            writer.write(batch)?;
            writer.finish()?;
        }
        let text = String::from_utf8(buf)
            .map_err(|e| Error::Internal(format!("JSON of a sink batch: {e}")))?;
        let rows: Vec<String> = text.lines().map(str::to_string).collect();
        if rows.len() != batch.num_rows() {
            return Err(Error::Internal(format!(
                "a sink batch of {} rows encoded as {} JSON lines",
                batch.num_rows(),
                rows.len()
            )));
        }
        Ok(Delivery { first, last, rows })
    }

    /// The rows as one JSON array.
    pub fn json_array(&self) -> String {
        let mut out =
            String::with_capacity(self.rows.iter().map(|r| r.len() + 1).sum::<usize>() + 2);
        out.push('[');
        for (i, r) in self.rows.iter().enumerate() {
            if i > 0 {
                out.push(',');
            }
            out.push_str(r);
        }
        out.push(']');
        out
    }

    /// `first-last`: the `Idempotency-Key` of the batch.
    pub fn key(&self) -> String {
        format!("{}-{}", self.first, self.last)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use datafusion::arrow::array::{Int64Array, StringArray};
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    use std::sync::Arc;

    #[test]
    fn encodes_rows_with_seq_and_nulls() {
        let schema = Arc::new(Schema::new(vec![
            Field::new("seq", DataType::Int64, false),
            Field::new("host", DataType::Utf8, true),
        ]));
        let batch = RecordBatch::try_new(
            schema,
            vec![
                Arc::new(Int64Array::from(vec![7, 8])),
                Arc::new(StringArray::from(vec![Some("a\"b"), None])),
            ],
        )
        .unwrap();
        let d = Delivery::encode(&batch).unwrap();
        assert_eq!((d.first, d.last, d.key().as_str()), (7, 8, "7-8"));
        let parsed: serde_json::Value = serde_json::from_str(&d.json_array()).unwrap();
        assert_eq!(
            parsed,
            serde_json::json!([{"seq": 7, "host": "a\"b"}, {"seq": 8, "host": null}])
        );
    }
}
