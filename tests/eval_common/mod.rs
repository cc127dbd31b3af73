//! What the evaluations on real data share: where the data is (`../shared/data` beside the
//! crate, read-only and never copied into the repository), the skip line printed when it is
//! absent, a replay of recorded rows through every query in `eval/<set>/` with the public
//! [`Engine`], and typed access to the columns of the result batches.

// Each evaluation uses only part of this module.
#![allow(
    dead_code,
    reason = "each crate that includes this module uses part of it"
)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use datafusion::arrow::array::{Array, AsArray, RecordBatch};
use datafusion::arrow::compute::cast;
use datafusion::arrow::datatypes::{DataType, Float64Type, Int64Type, SchemaRef};
use saql::runtime::SubscriptionEvent;
use saql::sql::Statement;
use saql::{Engine, EngineConfig, StatementResult, Subscription};

/// `../shared/data/<set>` beside the crate, or `None` after printing a skip line when it is
/// not there (the data is not part of the repository).
pub fn data_dir(set: &str) -> Option<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../shared/data")
        .join(set);
    if dir.is_dir() {
        Some(dir)
    } else {
        println!(
            "skip: {} not found; this evaluation reads real data from ../shared/data",
            dir.display()
        );
        None
    }
}

/// The `.sql` files of `eval/<set>/`, in name order (so `00_streams.sql` comes first).
pub fn query_files(set: &str) -> Vec<PathBuf> {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("eval").join(set);
    let mut files: Vec<PathBuf> = std::fs::read_dir(&dir)
        .unwrap_or_else(|e| panic!("reading {}: {e}", dir.display()))
        .map(|e| e.unwrap().path())
        .filter(|p| p.extension().is_some_and(|e| e == "sql"))
        .collect();
    files.sort();
    files
}

/// An engine holding the streams and queries of `eval/<set>/`, subscribed to every query.
/// Insert rows in event-time order, then [`Replay::finish`] for each query's results.
pub struct Replay {
    engine: Engine,
    subscriptions: Vec<(String, Subscription)>,
    results: BTreeMap<String, Vec<RecordBatch>>,
}

impl Replay {
    pub fn new(set: &str) -> Replay {
        Replay::of_files(&query_files(set))
    }

    /// An engine holding the streams and queries of these files, subscribed to every query.
    pub fn of_files(files: &[PathBuf]) -> Replay {
        let engine = Engine::open(EngineConfig::default()).unwrap();
        let mut names = Vec::new();
        for file in files {
            let text = std::fs::read_to_string(file).unwrap();
            engine
                .execute_blocking(&text)
                .unwrap_or_else(|e| panic!("{}: {e}", file.display()));
            names.extend(
                saql::parse(&text)
                    .unwrap()
                    .into_iter()
                    .filter_map(|s| match s {
                        Statement::CreateQuery(cq) => Some(cq.name.value.to_lowercase()),
                        _ => None,
                    }),
            );
        }
        let subscriptions = names
            .iter()
            .map(|name| {
                match engine
                    .execute_blocking(&format!("SUBSCRIBE {name}"))
                    .unwrap()
                    .remove(0)
                {
                    StatementResult::Subscribe(s) => (name.clone(), s),
                    _ => panic!("SUBSCRIBE {name} gave no subscription"),
                }
            })
            .collect();
        Replay {
            engine,
            subscriptions,
            results: names.into_iter().map(|n| (n, Vec::new())).collect(),
        }
    }

    /// The schema of one of the streams, to build batches with.
    pub fn schema(&self, stream: &str) -> SchemaRef {
        self.engine.stream_schema(stream).unwrap()
    }

    /// Inserts a batch and collects what the queries emitted.
    pub fn insert(&mut self, stream: &str, batch: RecordBatch) {
        self.engine.insert_batch(stream, batch).unwrap();
        self.drain();
    }

    /// Ends the input (every window closes) and returns each query's result batches.
    pub fn finish(mut self) -> BTreeMap<String, Vec<RecordBatch>> {
        self.engine.finish();
        self.drain();
        self.results
    }

    fn drain(&mut self) {
        for (name, sub) in &mut self.subscriptions {
            while let Ok(event) = sub.events.try_recv() {
                match event {
                    SubscriptionEvent::Rows(b) => {
                        self.results.get_mut(name.as_str()).unwrap().push(b)
                    }
                    SubscriptionEvent::Failed(e) => panic!("query {name} failed: {e}"),
                }
            }
        }
    }
}

fn column<'a>(batch: &'a RecordBatch, name: &str) -> &'a dyn Array {
    batch
        .column_by_name(name)
        .unwrap_or_else(|| panic!("no column {name} in {:?}", batch.schema()))
        .as_ref()
}

/// A timestamp column as nanoseconds since the epoch (NULL as `i64::MIN`).
pub fn nanos(batch: &RecordBatch, name: &str) -> Vec<i64> {
    let a = cast(column(batch, name), &DataType::Int64).unwrap();
    let a = a.as_primitive::<Int64Type>();
    (0..a.len())
        .map(|i| if a.is_null(i) { i64::MIN } else { a.value(i) })
        .collect()
}

/// A column of any type as text (NULL as the empty string).
pub fn texts(batch: &RecordBatch, name: &str) -> Vec<String> {
    let a = cast(column(batch, name), &DataType::Utf8).unwrap();
    let a = a.as_string::<i32>();
    (0..a.len())
        .map(|i| {
            if a.is_null(i) {
                String::new()
            } else {
                a.value(i).to_string()
            }
        })
        .collect()
}

/// A numeric column as `f64` (NULL as NaN).
pub fn floats(batch: &RecordBatch, name: &str) -> Vec<f64> {
    let a = cast(column(batch, name), &DataType::Float64).unwrap();
    let a = a.as_primitive::<Float64Type>();
    (0..a.len())
        .map(|i| if a.is_null(i) { f64::NAN } else { a.value(i) })
        .collect()
}
