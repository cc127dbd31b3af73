//! Where rows come from: text values and COPY data decoded into Arrow batches, the
//! built-in demo generator of host events, and the sources saql reads by itself (files,
//! Kafka) with their record decoders. Each of those is a connector behind the one
//! [`Source`] trait; the loop that runs them all is `runtime::connectors::source_loop`.

mod columns;
pub mod copy_binary;
pub mod csv;
pub mod demo;
pub mod file;
pub mod insert;
pub mod json;
#[cfg(feature = "kafka")]
pub mod kafka;
pub mod param;
pub mod records;
pub mod spec;
pub mod value;

use std::ops::Range;

use crate::error::{Error, Result};
use spec::{Connector, SourcePosition, SourceSpec};

/// A source's input, as the loop that runs every source sees it: the connector reads
/// records and says where it is; the loop decodes them, ingests them with the connector's
/// position through the engine's one door, counts bad records, shows progress, retries and
/// stops. Its contract:
///
/// - [`Source::read`] hands out records in input order and moves on past them at once:
///   afterwards [`Source::position`] is the place after every record handed out. The loop
///   ingests them all with that position, or stops the source (a bad record with
///   `on_error = 'fail'`, resumed before it by [`Source::place`]).
/// - When nothing is new, `read` waits up to the source's poll interval before it answers
///   [`Read::Idle`], so that the loop never spins.
/// - A connector keeps no position of its own across restarts: it is opened ([`connect`])
///   at the position the engine holds rows up to (restored from a checkpoint and the log).
/// - [`Source::commit`] is told, after each checkpoint, the position the checkpoint holds the
///   rows up to: nothing before it will be read again.
#[async_trait::async_trait]
pub trait Source: Send {
    /// Reads what is new.
    async fn read(&mut self) -> Result<Read>;

    /// Where the connector is: after every record handed out; `None` before it knows
    /// (a file not opened yet).
    fn position(&self) -> Option<SourcePosition>;

    /// Record `i` of `records`, the batch last read: where reading it again starts, and how
    /// an error names it.
    fn place(&self, records: &Records, i: usize) -> Place;

    /// A checkpoint holds the rows up to `position` (the input may forget what is before it).
    async fn commit(&mut self, position: &SourcePosition) -> Result<()> {
        let _ = position;
        Ok(())
    }
}

/// What a [`Source::read`] found.
pub enum Read {
    /// Records, in input order.
    Records(Records),
    /// Nothing new (after waiting up to the poll interval).
    Idle,
    /// The input is not there yet, with the state SHOW SOURCES shows (`waiting for file`).
    Waiting(&'static str),
    /// The input cannot be read just now (a broker away): shown, and read again after a pause.
    Unavailable(Error),
    /// Records dropped before they could be decoded; the position moved past them.
    Skipped(Skipped),
    /// The input ended (a file without `follow`): the source is finished.
    End,
}

/// Records a connector dropped unread.
pub struct Skipped {
    /// How many.
    pub records: u64,
    /// What happened, as SHOW SOURCES shows it.
    pub note: String,
    /// The error that stops a source with `on_error = 'fail'` (a record over the line bound);
    /// `None` when the input lost them and no setting could have kept them (expired records).
    pub fails: Option<Error>,
}

/// Records read in one go: each one's bytes without its line end.
pub struct Records {
    data: Vec<u8>,
    spans: Vec<Range<usize>>,
    /// Input bytes the records took (line ends, a skipped header included).
    pub bytes: u64,
}

impl Records {
    /// Records that are `spans` of `data`, having taken `bytes` of input.
    pub fn new(data: Vec<u8>, spans: Vec<Range<usize>>, bytes: u64) -> Records {
        Records { data, spans, bytes }
    }

    /// Each record's bytes.
    pub fn lines(&self) -> Vec<&[u8]> {
        self.spans.iter().map(|s| &self.data[s.clone()]).collect()
    }

    /// Where record `i` is in the data.
    pub fn span(&self, i: usize) -> Range<usize> {
        self.spans
            .get(i)
            .cloned()
            .unwrap_or(self.data.len()..self.data.len())
    }

    /// How many records.
    pub fn len(&self) -> usize {
        self.spans.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.spans.is_empty()
    }
}

/// One record of a batch, placed in the input.
pub struct Place {
    /// Where reading it again starts.
    pub resume: SourcePosition,
    /// Input bytes before it in its batch.
    pub bytes_before: u64,
    /// How an error names it: `line 3 of /x`, `partition 0 offset 12`.
    pub name: String,
}

/// Opens source `spec`'s input at `position` (the engine's; `None` on a first start), with
/// lines of at most `max_line_bytes`.
pub async fn connect(
    spec: &SourceSpec,
    position: Option<&SourcePosition>,
    max_line_bytes: usize,
) -> Result<Box<dyn Source>> {
    Ok(match &spec.connector {
        Connector::File {
            path,
            follow,
            start_at_end,
        } => Box::new(file::FileSource::new(
            file::FileTail::new(
                path.clone(),
                *follow,
                spec.header,
                position.cloned(),
                *start_at_end,
                max_line_bytes,
            ),
            spec.poll_interval,
        )),
        #[cfg(feature = "kafka")]
        Connector::Kafka {
            brokers,
            topic,
            partitions,
            start_at_end,
        } => {
            let saved = match position {
                Some(SourcePosition::Kafka { offsets }) => offsets.clone(),
                _ => Default::default(),
            };
            let reader = kafka::KafkaReader::connect(
                brokers,
                topic,
                partitions.as_deref(),
                &saved,
                *start_at_end,
            )
            .await?;
            Box::new(kafka::KafkaSource::new(reader, spec.poll_interval))
        }
        #[cfg(not(feature = "kafka"))]
        Connector::Kafka { .. } => {
            return Err(Error::NotSupported(
                "this saql was built without the \"kafka\" feature".into(),
            ));
        }
    })
}
