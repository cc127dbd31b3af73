//! A source's checked definition: what `CREATE SOURCE` asked for, validated against the
//! target stream (options known, values valid, every `PATH` naming a column), and the
//! progress a source records with each batch it ingests, so that a restart resumes exactly
//! after the last rows the engine holds.

use crate::error::sqlstate;
use std::collections::BTreeMap;
use std::path::PathBuf;

use serde::{Deserialize, Serialize};

use crate::error::{Error, Result};
use crate::options::{bad_value, Options};
use crate::plan::catalog::normalize;
use crate::sql::{CreateSource, SourceConnector};
use datafusion::arrow::datatypes::SchemaRef;

/// How records are written.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum RecordFormat {
    /// One JSON object per line.
    Json,
    /// One CSV record per line (PostgreSQL's COPY csv rules), fields in column order.
    Csv,
}

/// What a bad record does.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum OnError {
    /// Count it and go on.
    Skip,
    /// Stop the source; the error shows in SHOW SOURCES.
    Fail,
}

/// Where a source reads.
#[derive(Debug, Clone, PartialEq)]
pub enum Connector {
    /// A file, tailed line by line.
    File {
        /// Its path.
        path: PathBuf,
        /// Keep reading as it grows and across rotation (`follow = true`), or stop at its end.
        follow: bool,
        /// Start at the end of the file rather than the beginning (first start only).
        start_at_end: bool,
    },
    /// A Kafka topic with explicitly assigned partitions.
    Kafka {
        /// Bootstrap brokers, `host:port` separated by commas.
        brokers: Vec<String>,
        /// The topic.
        topic: String,
        /// The partitions to read; `None`: all of the topic's.
        partitions: Option<Vec<i32>>,
        /// Start at the latest offset rather than the earliest (first start only).
        start_at_end: bool,
    },
}

/// A checked `CREATE SOURCE`.
#[derive(Debug, Clone)]
pub struct SourceSpec {
    /// Normalised source name.
    pub name: String,
    /// Normalised target stream (or table) name.
    pub stream: String,
    /// Whether the target is a table, whose rows each record upserts by key.
    pub into_table: bool,
    /// Where it reads.
    pub connector: Connector,
    /// Record format.
    pub format: RecordFormat,
    /// What a bad record does.
    pub on_error: OnError,
    /// CSV: the first line of each file is a header to skip.
    pub header: bool,
    /// JSON: for each stream column, the path of keys (and array indexes) to its value.
    pub paths: Vec<Vec<String>>,
    /// How long to wait between polls when there is nothing new.
    pub poll_interval: std::time::Duration,
    /// The statement as written.
    pub ddl: CreateSource,
}

impl SourceSpec {
    /// Checks `ddl` against its target, the stream or table `target` whose rows have
    /// `schema`. Unknown options and bad values are 42601/22023, a `PATH` for a missing
    /// column 42703.
    pub fn try_new(ddl: &CreateSource, target: &str, schema: &SchemaRef) -> Result<SourceSpec> {
        let name = normalize(&ddl.name);
        let kafka = matches!(ddl.connector, SourceConnector::Kafka);
        let (allowed, what): (&[&str], _) = if kafka {
            (
                &[
                    "brokers",
                    "topic",
                    "partitions",
                    "format",
                    "on_error",
                    "start",
                    "poll_interval_ms",
                ],
                "Kafka source",
            )
        } else {
            (
                &[
                    "format",
                    "follow",
                    "start",
                    "on_error",
                    "header",
                    "poll_interval_ms",
                ],
                "file source",
            )
        };
        let opts = Options::new(&ddl.options, allowed, what)?;
        let format = match opts.choice("format", &["json", "csv"], "json")? {
            "csv" => RecordFormat::Csv,
            _ => RecordFormat::Json,
        };
        let on_error = match opts.choice("on_error", &["skip", "fail"], "skip")? {
            "fail" => OnError::Fail,
            _ => OnError::Skip,
        };
        let start_at_end = opts.choice("start", &["beginning", "end"], "beginning")? == "end";
        let header = opts.boolean("header", false)?;
        let poll_ms = opts.number("poll_interval_ms", 1..=60_000, 100)?;
        let connector = match &ddl.connector {
            SourceConnector::File(path) => {
                if path.is_empty() {
                    return Err(Error::invalid_input(
                        sqlstate::INVALID_PARAMETER_VALUE,
                        "a file source needs a path",
                    ));
                }
                Connector::File {
                    path: PathBuf::from(path),
                    follow: opts.boolean("follow", true)?,
                    start_at_end,
                }
            }
            SourceConnector::Kafka => {
                let partitions = match opts.text("partitions") {
                    None => None,
                    Some(v) => Some(
                        v.split(',')
                            .map(|p| p.trim().parse::<i32>().ok().filter(|p| *p >= 0))
                            .collect::<Option<Vec<_>>>()
                            .filter(|p| !p.is_empty())
                            .ok_or_else(|| bad_value("partitions", v, "numbers such as '0,1'"))?,
                    ),
                };
                Connector::Kafka {
                    brokers: opts.required_list("brokers")?,
                    topic: opts.required("topic")?.to_string(),
                    partitions,
                    start_at_end,
                }
            }
        };
        if format == RecordFormat::Csv && !ddl.paths.is_empty() {
            return Err(Error::plan(
                sqlstate::SYNTAX_ERROR,
                "PATH applies to JSON records only; CSV fields fill the stream's columns in order",
            ));
        }
        let mut paths: Vec<Vec<String>> = schema
            .fields()
            .iter()
            .map(|f| vec![f.name().clone()])
            .collect();
        let mut seen = vec![false; paths.len()];
        for (column, path) in &ddl.paths {
            let c = normalize(column);
            let i = schema.index_of(&c).map_err(|_| {
                Error::plan(
                    sqlstate::UNDEFINED_COLUMN,
                    format!("column \"{c}\" of \"{target}\" does not exist"),
                )
            })?;
            if std::mem::replace(&mut seen[i], true) {
                return Err(Error::plan(
                    sqlstate::DUPLICATE_COLUMN,
                    format!("column \"{c}\" has more than one PATH"),
                ));
            }
            paths[i] = parse_path(path)?;
        }
        Ok(SourceSpec {
            name,
            stream: target.to_string(),
            into_table: ddl.table,
            connector,
            format,
            on_error,
            header,
            paths,
            poll_interval: std::time::Duration::from_millis(poll_ms),
            ddl: ddl.clone(),
        })
    }

    /// `file` or `kafka`.
    pub fn kind(&self) -> &'static str {
        match self.connector {
            Connector::File { .. } => "file",
            Connector::Kafka { .. } => "kafka",
        }
    }
}

/// `a.b.0.c` or `$.a.b[0].c` into its keys; array indexes are numeric keys.
pub fn parse_path(path: &str) -> Result<Vec<String>> {
    let trimmed = path.strip_prefix("$.").unwrap_or(path);
    let normalised = trimmed.replace('[', ".").replace(']', "");
    let keys: Vec<String> = normalised.split('.').map(str::to_string).collect();
    if trimmed.is_empty() || keys.iter().any(String::is_empty) || keys.len() > MAX_PATH_DEPTH {
        return Err(Error::invalid_input(
            sqlstate::INVALID_PARAMETER_VALUE,
            format!(
                "invalid PATH '{path}': use keys separated by dots, such as 'process.pid' or \
                 'args.0' (at most {MAX_PATH_DEPTH} keys)"
            ),
        ));
    }
    Ok(keys)
}

/// Most keys in one `PATH`.
pub const MAX_PATH_DEPTH: usize = 32;

/// Where a source is in its input. Recorded with every batch it ingests (in the same log
/// frame) and in checkpoints, so that after a restart it reads on from exactly there.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub enum SourcePosition {
    /// A file: which file (device and inode, so a rotation is noticed) and how far.
    File {
        /// Device of the file being read.
        dev: u64,
        /// Inode of the file being read.
        inode: u64,
        /// Byte offset of the first line not yet ingested.
        offset: u64,
        /// Lines of this file ingested (or skipped) so far.
        line: u64,
    },
    /// Kafka: the next offset to read, per partition.
    Kafka {
        /// Partition to next offset.
        offsets: BTreeMap<i32, i64>,
    },
}

impl std::fmt::Display for SourcePosition {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            SourcePosition::File {
                inode,
                offset,
                line,
                ..
            } => write!(f, "inode {inode} offset {offset} line {line}"),
            SourcePosition::Kafka { offsets } => {
                let parts: Vec<String> = offsets.iter().map(|(p, o)| format!("{p}:{o}")).collect();
                f.write_str(&parts.join(","))
            }
        }
    }
}

/// A source's position and counters, as of its last ingested batch.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SourceProgress {
    /// Where it is; `None` before it first read anything.
    pub position: Option<SourcePosition>,
    /// Rows ingested.
    pub rows: u64,
    /// Input bytes consumed (records good and bad).
    pub bytes: u64,
    /// Bad records counted.
    pub bad: u64,
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::plan::StreamDef;
    use crate::sql::{parse_one, Statement};

    fn spec(stream: &str, source: &str) -> Result<SourceSpec> {
        let Statement::CreateStream(cs) = parse_one(stream).unwrap() else {
            panic!()
        };
        let def = StreamDef::try_new(&cs).unwrap();
        let Statement::CreateSource(src) = parse_one(source).unwrap() else {
            panic!()
        };
        SourceSpec::try_new(&src, &def.name, &def.schema)
    }

    #[test]
    fn checks_options_and_paths() {
        let s = "CREATE STREAM s (ts TIMESTAMP, pid BIGINT, exe TEXT)";
        let ok = spec(
            s,
            "CREATE SOURCE f FROM FILE '/x' (format = 'json', start = 'end') INTO STREAM s \
             (pid PATH '$.proc.pid', exe PATH 'proc.args[0]')",
        )
        .unwrap();
        assert_eq!(ok.paths[0], vec!["ts"]);
        assert_eq!(ok.paths[1], vec!["proc", "pid"]);
        assert_eq!(ok.paths[2], vec!["proc", "args", "0"]);
        assert!(matches!(
            ok.connector,
            Connector::File {
                follow: true,
                start_at_end: true,
                ..
            }
        ));
        let code = |src: &str| spec(s, src).unwrap_err().sqlstate();
        assert_eq!(
            code("CREATE SOURCE f FROM FILE '/x' (colour = 'red') INTO STREAM s"),
            "42601"
        );
        assert_eq!(
            code("CREATE SOURCE f FROM FILE '/x' (format = 'xml') INTO STREAM s"),
            "22023"
        );
        assert_eq!(
            code("CREATE SOURCE f FROM FILE '/x' INTO STREAM s (nope PATH 'a')"),
            "42703"
        );
        assert_eq!(
            code("CREATE SOURCE f FROM FILE '/x' INTO STREAM s (pid PATH 'a..b')"),
            "22023"
        );
        assert_eq!(
            code("CREATE SOURCE k FROM KAFKA (topic = 't') INTO STREAM s"),
            "42601"
        );
        assert_eq!(
            code("CREATE SOURCE k FROM KAFKA (brokers = 'b:1', topic = 't', partitions = 'x') INTO STREAM s"),
            "22023"
        );
    }
}
