//! The Kafka connector: each row becomes one record of one partition of the topic (one
//! partition keeps the rows in seq order), its value the row's JSON object, its key the
//! row's seq or the value of a chosen column, with a `seq` header. A batch is one produce
//! request, acknowledged by the partition leader.

use std::collections::BTreeMap;
use std::time::Duration;

use rskafka::client::partition::{Compression, PartitionClient, UnknownTopicHandling};
use rskafka::client::ClientBuilder;
use rskafka::record::Record;
use rskafka::BackoffConfig;

use super::Delivery;
use crate::error::{Error, Result};

/// A connected Kafka sink.
pub struct KafkaWriter {
    partition: PartitionClient,
    key: Option<String>,
}

fn kafka_error(what: &str, e: impl std::fmt::Display) -> Error {
    Error::Execution(format!("kafka: {what}: {e}"))
}

impl KafkaWriter {
    /// Connects to `brokers` and to `partition` of `topic` (which must exist).
    pub async fn connect(
        brokers: &[String],
        topic: &str,
        partition: i32,
        key: Option<String>,
    ) -> Result<KafkaWriter> {
        let client = ClientBuilder::new(brokers.to_vec())
            .client_id("saql-sink")
            .backoff_config(BackoffConfig {
                init_backoff: Duration::from_millis(50),
                max_backoff: Duration::from_secs(1),
                base: 2.0,
                deadline: Some(Duration::from_secs(5)),
            })
            .build()
            .await
            .map_err(|e| kafka_error(&format!("connecting to {}", brokers.join(",")), e))?;
        let partition = client
            .partition_client(topic, partition, UnknownTopicHandling::Error)
            .await
            .map_err(|e| kafka_error(&format!("partition {partition} of \"{topic}\""), e))?;
        Ok(KafkaWriter { partition, key })
    }

    /// Produces one record per row of `batch`.
    pub async fn write(&self, batch: &Delivery) -> Result<()> {
        let now = chrono::Utc::now();
        let mut records = Vec::with_capacity(batch.rows.len());
        for (i, row) in batch.rows.iter().enumerate() {
            let seq = (batch.first + i as u64).to_string();
            let key = match &self.key {
                None => seq.clone(),
                Some(column) => {
                    let value: serde_json::Value = serde_json::from_str(row)
                        .map_err(|e| Error::Internal(format!("a sink row's JSON: {e}")))?;
                    match value.get(column) {
                        Some(serde_json::Value::String(s)) => s.clone(),
                        Some(serde_json::Value::Null) | None => String::new(),
                        Some(other) => other.to_string(),
                    }
                }
            };
            records.push(Record {
                key: Some(key.into_bytes()),
                value: Some(row.as_bytes().to_vec()),
                headers: BTreeMap::from([("seq".to_string(), seq.into_bytes())]),
                timestamp: now,
            });
        }
        self.partition
            .produce(records, Compression::NoCompression)
            .await
            .map_err(|e| kafka_error("producing", e))?;
        Ok(())
    }
}

#[async_trait::async_trait]
impl super::Sink for KafkaWriter {
    async fn send(&self, batch: &Delivery, _timeout: Duration) -> Result<()> {
        self.write(batch).await
    }
}
