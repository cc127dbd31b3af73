//! What the benchmarks share: reading sizes from the environment, medians, printing counts,
//! draining a subscription, and checking the streams' and queries' own counters.

// Each bench uses only part of it.
#![allow(
    dead_code,
    reason = "each crate that includes this module uses part of it"
)]

use std::collections::HashMap;
use std::error::Error;

use datafusion::arrow::array::{ArrayRef, AsArray, Int64Array, StringArray};
use datafusion::arrow::datatypes::Int64Type;
use datafusion::arrow::record_batch::RecordBatch;
use futures::executor::block_on;
use saql::runtime::{SubscriptionEvent, SubscriptionEvents};
use saql::{Engine, StatementResult};
use tokio::sync::mpsc::error::TryRecvError;

/// A positive count from the environment, or `default` when unset.
pub fn env_count(name: &str, default: usize) -> Result<usize, String> {
    match std::env::var(name) {
        Ok(v) => match v.trim().replace('_', "").parse::<usize>() {
            Ok(n) if n > 0 => Ok(n),
            _ => Err(format!("{name} must be a positive integer, not {v:?}")),
        },
        Err(std::env::VarError::NotPresent) => Ok(default),
        Err(e) => Err(format!("{name}: {e}")),
    }
}

/// A comma-separated list of positive counts from the environment, or `default` when unset.
pub fn env_list(name: &str, default: &[usize]) -> Result<Vec<usize>, String> {
    match std::env::var(name) {
        Ok(v) => v
            .split(',')
            .map(|s| match s.trim().replace('_', "").parse::<usize>() {
                Ok(n) if n > 0 => Ok(n),
                _ => Err(format!("{name} must be a list like 1,10,100, not {v:?}")),
            })
            .collect(),
        Err(std::env::VarError::NotPresent) => Ok(default.to_vec()),
        Err(e) => Err(format!("{name}: {e}")),
    }
}

/// The median (NaN for none).
pub fn median(values: impl Iterator<Item = f64>) -> f64 {
    let mut v: Vec<f64> = values.collect();
    v.sort_by(f64::total_cmp);
    let mid = v.len() / 2;
    if v.is_empty() {
        f64::NAN
    } else if v.len() % 2 == 1 {
        v[mid]
    } else {
        (v[mid - 1] + v[mid]) / 2.0
    }
}

/// The value at quantile `q` (0 to 1) of `sorted` values, nearest rank (NaN for none).
pub fn percentile(sorted: &[f64], q: f64) -> f64 {
    if sorted.is_empty() {
        return f64::NAN;
    }
    sorted[((sorted.len() - 1) as f64 * q).round() as usize]
}

/// `1234567` as `1,234,567`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Hands every result batch waiting in the subscription to `take`.
pub fn drain<E: From<String>>(
    events: &mut SubscriptionEvents,
    mut take: impl FnMut(RecordBatch) -> Result<(), E>,
) -> Result<(), E> {
    loop {
        match events.try_recv() {
            Ok(SubscriptionEvent::Rows(batch)) => take(batch)?,
            Ok(SubscriptionEvent::Failed(reason)) => return Err(reason.to_string().into()),
            Err(TryRecvError::Empty) => return Ok(()),
            Err(TryRecvError::Disconnected) => {
                return Err(
                    "a subscription was cut off (fell more than 4096 batches behind)"
                        .to_string()
                        .into(),
                )
            }
        }
    }
}

/// A query's own counters, from `SHOW QUERIES`.
pub struct QueryStats {
    pub status: String,
    pub rows_out: i64,
    pub late_rows: i64,
}

impl QueryStats {
    /// Ways in which the counters disagree with a healthy run that delivered `rows`.
    pub fn problems(&self, rows: u64) -> Vec<String> {
        let mut problems = Vec::new();
        if self.status != "running" {
            problems.push(format!("query status is {:?}", self.status));
        }
        if self.rows_out != rows as i64 {
            problems.push(format!(
                "query counted {} rows out but the subscriber received {rows}",
                self.rows_out
            ));
        }
        if self.late_rows != 0 {
            problems.push(format!("{} rows dropped as late", self.late_rows));
        }
        problems
    }
}

/// Every query's counters by name.
pub fn query_stats(engine: &Engine) -> Result<HashMap<String, QueryStats>, Box<dyn Error>> {
    let Some(StatementResult::Rows { batches, .. }) =
        block_on(engine.execute("SHOW QUERIES"))?.pop()
    else {
        return Err("SHOW QUERIES returned no rows".into());
    };
    let mut stats = HashMap::new();
    for batch in &batches {
        let column = |name: &str| -> Result<ArrayRef, Box<dyn Error>> {
            Ok(batch.column(batch.schema().index_of(name)?).clone())
        };
        let (name, status) = (column("name")?, column("status")?);
        let (rows_out, late_rows) = (column("rows_out")?, column("late_rows")?);
        let text = |c: &ArrayRef, what: &str| -> Result<StringArray, Box<dyn Error>> {
            c.as_string_opt::<i32>()
                .cloned()
                .ok_or_else(|| format!("SHOW QUERIES {what} is not text").into())
        };
        let int = |c: &ArrayRef, what: &str| -> Result<Int64Array, Box<dyn Error>> {
            c.as_primitive_opt::<Int64Type>()
                .cloned()
                .ok_or_else(|| format!("SHOW QUERIES {what} is not BIGINT").into())
        };
        let (name, status) = (text(&name, "name")?, text(&status, "status")?);
        let (rows_out, late_rows) = (int(&rows_out, "rows_out")?, int(&late_rows, "late_rows")?);
        for i in 0..batch.num_rows() {
            stats.insert(
                name.value(i).to_string(),
                QueryStats {
                    status: status.value(i).to_string(),
                    rows_out: rows_out.value(i),
                    late_rows: late_rows.value(i),
                },
            );
        }
    }
    Ok(stats)
}

/// A stream's counters, from `SHOW STREAMS`.
pub struct StreamStats {
    pub rows_in: i64,
    pub late_rows: i64,
}

/// Every stream's counters by name.
pub fn stream_stats(engine: &Engine) -> Result<HashMap<String, StreamStats>, Box<dyn Error>> {
    let Some(StatementResult::Rows { batches, .. }) =
        block_on(engine.execute("SHOW STREAMS"))?.pop()
    else {
        return Err("SHOW STREAMS returned no rows".into());
    };
    let mut stats = HashMap::new();
    for batch in &batches {
        let column = |name: &str| -> Result<ArrayRef, Box<dyn Error>> {
            Ok(batch.column(batch.schema().index_of(name)?).clone())
        };
        let name = column("name")?;
        let name = name
            .as_string_opt::<i32>()
            .ok_or("SHOW STREAMS name is not text")?;
        let (rows_in, late_rows) = (column("rows_in")?, column("late_rows")?);
        let int = |c: &ArrayRef| -> Result<Int64Array, Box<dyn Error>> {
            c.as_primitive_opt::<Int64Type>()
                .cloned()
                .ok_or_else(|| "SHOW STREAMS counters are not BIGINT".into())
        };
        let (rows_in, late_rows) = (int(&rows_in)?, int(&late_rows)?);
        for i in 0..batch.num_rows() {
            stats.insert(
                name.value(i).to_string(),
                StreamStats {
                    rows_in: rows_in.value(i),
                    late_rows: late_rows.value(i),
                },
            );
        }
    }
    Ok(stats)
}

/// splitmix64: a cheap, fixed pseudo-random column value for event `i`.
pub fn mix(i: u64) -> u64 {
    let mut z = i.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    z ^ (z >> 31)
}

/// Runs an async bench's `run` on a tokio runtime: exit 0 if it returned true, 1 (after
/// printing `MISMATCH: {mismatch}`) if false, 2 on an error.
pub fn run_on_tokio(
    run: impl std::future::Future<Output = Result<bool, Box<dyn Error + Send + Sync>>>,
    mismatch: &str,
) -> std::process::ExitCode {
    use std::process::ExitCode;
    let runtime = match tokio::runtime::Runtime::new() {
        Ok(r) => r,
        Err(e) => {
            eprintln!("error: {e}");
            return ExitCode::from(2);
        }
    };
    match runtime.block_on(run) {
        Ok(true) => ExitCode::SUCCESS,
        Ok(false) => {
            println!("\nMISMATCH: {mismatch}");
            ExitCode::FAILURE
        }
        Err(e) => {
            eprintln!("error: {e}");
            ExitCode::from(2)
        }
    }
}
