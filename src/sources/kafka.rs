//! Reading a Kafka topic with explicitly assigned partitions (no consumer group): the next
//! offset of each partition is saql's own state, logged with every batch and checkpointed,
//! so a restart fetches from exactly where the engine's rows end.
//!
//! The client is `rskafka`, pure Rust (no librdkafka to build with the C toolchain), built
//! with gzip and snappy decompression only (lz4 and zstd would build C code).

use std::collections::{BTreeMap, VecDeque};
use std::time::Duration;

use rskafka::client::error::{Error as KafkaError, ProtocolError};
use rskafka::client::partition::{OffsetAt, PartitionClient, UnknownTopicHandling};
use rskafka::client::ClientBuilder;
use rskafka::BackoffConfig;

use super::spec::SourcePosition;
use super::{Place, Read, Records, Skipped, Source};
use crate::error::{Error, Result};

/// Most bytes fetched from one partition per poll.
const FETCH_BYTES: i32 = 1 << 20;

/// Records fetched from one partition.
pub struct Fetched {
    /// The partition.
    pub partition: i32,
    /// (offset, value) in offset order; a record without a value is an empty one.
    pub records: Vec<(i64, Vec<u8>)>,
    /// The partition's next offset after these records.
    pub next: i64,
}

/// A topic's assigned partitions, each with its next offset.
pub struct KafkaReader {
    partitions: Vec<PartitionClient>,
    offsets: BTreeMap<i32, i64>,
}

fn kafka_error(what: &str, e: impl std::fmt::Display) -> Error {
    Error::Execution(format!("kafka: {what}: {e}"))
}

impl KafkaReader {
    /// Connects to `brokers` and assigns `partitions` of `topic` (all of them if `None`).
    /// A partition in `saved` resumes at its offset; the others start at the earliest
    /// offset, or the latest with `start_at_end`.
    pub async fn connect(
        brokers: &[String],
        topic: &str,
        partitions: Option<&[i32]>,
        saved: &BTreeMap<i32, i64>,
        start_at_end: bool,
    ) -> Result<KafkaReader> {
        let client = ClientBuilder::new(brokers.to_vec())
            .client_id("saql")
            .backoff_config(BackoffConfig {
                init_backoff: Duration::from_millis(50),
                max_backoff: Duration::from_secs(2),
                base: 2.0,
                deadline: Some(Duration::from_secs(10)),
            })
            .build()
            .await
            .map_err(|e| kafka_error(&format!("connecting to {}", brokers.join(",")), e))?;
        let assigned: Vec<i32> = match partitions {
            Some(p) => p.to_vec(),
            None => {
                let topics = client
                    .list_topics()
                    .await
                    .map_err(|e| kafka_error("listing topics", e))?;
                let found = topics
                    .into_iter()
                    .find(|t| t.name == topic)
                    .ok_or_else(|| {
                        Error::Execution(format!("kafka: topic \"{topic}\" does not exist"))
                    })?;
                found.partitions.into_iter().collect()
            }
        };
        let mut clients = Vec::new();
        let mut offsets = BTreeMap::new();
        for p in assigned {
            let pc = client
                .partition_client(topic, p, UnknownTopicHandling::Error)
                .await
                .map_err(|e| kafka_error(&format!("partition {p} of \"{topic}\""), e))?;
            let offset = match saved.get(&p) {
                Some(o) => *o,
                None => {
                    let at = if start_at_end {
                        OffsetAt::Latest
                    } else {
                        OffsetAt::Earliest
                    };
                    pc.get_offset(at)
                        .await
                        .map_err(|e| kafka_error(&format!("offsets of partition {p}"), e))?
                }
            };
            offsets.insert(p, offset);
            clients.push(pc);
        }
        Ok(KafkaReader {
            partitions: clients,
            offsets,
        })
    }

    /// The next offset of each assigned partition.
    pub fn offsets(&self) -> &BTreeMap<i32, i64> {
        &self.offsets
    }

    /// Marks records up to (not including) `next` of `partition` as handed on.
    pub fn commit(&mut self, partition: i32, next: i64) {
        self.offsets.insert(partition, next);
    }

    /// Fetches what is new in every partition, waiting up to `wait` for something. An
    /// offset that fell behind the partition's earliest (retention) moves to the earliest;
    /// the records skipped are returned as `lost`.
    pub async fn poll(&mut self, wait: Duration) -> Result<(Vec<Fetched>, u64)> {
        let wait_ms = i32::try_from(wait.as_millis()).unwrap_or(i32::MAX);
        let fetches = self.partitions.iter().map(|pc| {
            let offset = self.offsets.get(&pc.partition()).copied().unwrap_or(0);
            async move {
                (
                    pc.partition(),
                    offset,
                    pc.fetch_records(offset, 1..FETCH_BYTES, wait_ms).await,
                )
            }
        });
        let results = futures::future::join_all(fetches).await;
        let mut out = Vec::new();
        let mut lost = 0;
        for (partition, offset, result) in results {
            match result {
                Ok((records, _high_watermark)) => {
                    let records: Vec<(i64, Vec<u8>)> = records
                        .into_iter()
                        .filter(|r| r.offset >= offset)
                        .map(|r| (r.offset, r.record.value.unwrap_or_default()))
                        .collect();
                    if let Some(&(last, _)) = records.last() {
                        out.push(Fetched {
                            partition,
                            records,
                            next: last + 1,
                        });
                    }
                }
                Err(KafkaError::ServerError {
                    protocol_error: ProtocolError::OffsetOutOfRange,
                    ..
                }) => {
                    let pc = self
                        .partitions
                        .iter()
                        .find(|pc| pc.partition() == partition)
                        .ok_or_else(|| Error::Internal("kafka partition vanished".into()))?;
                    let earliest = pc
                        .get_offset(OffsetAt::Earliest)
                        .await
                        .map_err(|e| kafka_error("earliest offset", e))?;
                    // Behind the earliest offset: those records expired. Otherwise the
                    // offset is past the end: the topic was recreated; read it from its start.
                    if earliest > offset {
                        lost += (earliest - offset) as u64;
                    }
                    self.offsets.insert(partition, earliest);
                }
                Err(e) => {
                    return Err(kafka_error(&format!("fetching partition {partition}"), e));
                }
            }
        }
        Ok((out, lost))
    }
}

/// A Kafka source's connector: fetches every assigned partition at once and hands out each
/// partition's records as one batch, with the next offset of every partition as its
/// position.
pub struct KafkaSource {
    reader: KafkaReader,
    poll_interval: Duration,
    /// Partitions fetched and not handed out yet.
    fetched: VecDeque<Fetched>,
    /// Records that expired before they were read, not reported yet.
    lost: u64,
    /// The partition of the batch last handed out, and its records' offsets.
    last: (i32, Vec<i64>),
}

impl KafkaSource {
    /// Reads with `reader`, waiting up to `poll_interval` at the broker for new records.
    pub fn new(reader: KafkaReader, poll_interval: Duration) -> KafkaSource {
        KafkaSource {
            reader,
            poll_interval,
            fetched: VecDeque::new(),
            lost: 0,
            last: (0, Vec::new()),
        }
    }

    /// Hands out `f`'s records (values without a trailing line end) and moves past them.
    fn hand_out(&mut self, f: Fetched) -> Records {
        let mut data = Vec::with_capacity(f.records.iter().map(|(_, v)| v.len()).sum());
        let mut spans = Vec::with_capacity(f.records.len());
        let mut offsets = Vec::with_capacity(f.records.len());
        for (offset, v) in &f.records {
            let v = v.strip_suffix(b"\n").unwrap_or(v);
            let v = v.strip_suffix(b"\r").unwrap_or(v);
            spans.push(data.len()..data.len() + v.len());
            data.extend_from_slice(v);
            offsets.push(*offset);
        }
        let bytes = data.len() as u64;
        self.reader.commit(f.partition, f.next);
        self.last = (f.partition, offsets);
        Records::new(data, spans, bytes)
    }

    fn take_lost(&mut self) -> Option<Read> {
        let lost = std::mem::take(&mut self.lost);
        (lost > 0).then(|| {
            Read::Skipped(Skipped {
                records: lost,
                note: format!(
                    "{lost} records expired from the topic before they were read (retention)"
                ),
                fails: None,
            })
        })
    }
}

#[async_trait::async_trait]
impl Source for KafkaSource {
    async fn read(&mut self) -> Result<Read> {
        if let Some(f) = self.fetched.pop_front() {
            return Ok(Read::Records(self.hand_out(f)));
        }
        let (fetched, lost) = match self.reader.poll(self.poll_interval).await {
            Ok(f) => f,
            Err(e) => return Ok(Read::Unavailable(e)),
        };
        self.fetched = fetched.into();
        self.lost += lost;
        if let Some(skipped) = self.take_lost() {
            return Ok(skipped);
        }
        match self.fetched.pop_front() {
            Some(f) => Ok(Read::Records(self.hand_out(f))),
            None => {
                // The broker answers an empty fetch at once when it cannot wait.
                tokio::time::sleep(self.poll_interval.min(Duration::from_millis(50))).await;
                Ok(Read::Idle)
            }
        }
    }

    fn position(&self) -> Option<SourcePosition> {
        Some(SourcePosition::Kafka {
            offsets: self.reader.offsets().clone(),
        })
    }

    fn place(&self, records: &Records, i: usize) -> Place {
        let (partition, offsets) = &self.last;
        let offset = offsets.get(i).copied().unwrap_or_default();
        let mut resume = self.reader.offsets().clone();
        resume.insert(*partition, offset);
        Place {
            resume: SourcePosition::Kafka { offsets: resume },
            bytes_before: (0..i).map(|j| records.span(j).len() as u64).sum(),
            name: format!("partition {partition} offset {offset}"),
        }
    }
}
