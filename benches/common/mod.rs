//! What the benchmarks share: reading sizes from the environment, medians, printing counts,
//! and draining a subscription.

// Each bench uses only part of it.
#![allow(dead_code)]

use datafusion::arrow::record_batch::RecordBatch;
use saql::runtime::SubscriptionEvent;
use tokio::sync::mpsc::error::TryRecvError;
use tokio::sync::mpsc::Receiver;

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

/// `1234567` as `1,234,567`.
pub fn thousands(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::new();
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i) % 3 == 0 {
            out.push(',');
        }
        out.push(c);
    }
    out
}

/// Hands every result batch waiting in the subscription to `take`.
pub fn drain<E: From<String>>(
    events: &mut Receiver<SubscriptionEvent>,
    mut take: impl FnMut(RecordBatch) -> Result<(), E>,
) -> Result<(), E> {
    loop {
        match events.try_recv() {
            Ok(SubscriptionEvent::Rows(batch)) => take(batch)?,
            Ok(SubscriptionEvent::Failed(reason)) => return Err(reason.into()),
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
