//! The built-in generator behind `saql serve --demo`: seeded, deterministic background activity
//! of a small fleet of Linux and Windows hosts (long-running services that read and write their
//! own files, start a small stable set of children and talk to a few peers, plus the odd ssh
//! login, whose second factor sshd checks with the MFA service), one `host_metrics` row per
//! host per second, the connections a network sensor sees (`net_events`), and attacks that can
//! be injected so the demo queries have something to find.
//!
//! Every second of every host is drawn from its own seed, and metrics are smooth functions of
//! time, so output depends only on the seed, the fleet, the rate and the asked range:
//! `generate(a, c)` yields the same rows as `generate(a, b)` followed by `generate(b, c)`.

mod attacks;
mod fleet;
mod metrics;
mod net;

use crate::error::sqlstate;
use std::collections::HashMap;
use std::f64::consts::TAU;
use std::sync::{Arc, LazyLock};

use datafusion::arrow::array::{
    ArrayRef, Float64Array, Int64Array, StringArray, TimestampNanosecondArray,
};
use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use datafusion::arrow::record_batch::RecordBatch;
use rand::rngs::StdRng;
use rand::Rng;

use crate::error::{Error, Result};
use crate::time::EventTime;
pub use attacks::Attack;
use attacks::Staged;
use fleet::{Event, Host, Traffic, ROLES};
use net::Flow;

/// Name of the stream of process, file, network and login events.
pub const PROC_EVENTS: &str = "proc_events";
/// Name of the stream of per-host, per-second resource metrics.
pub const HOST_METRICS: &str = "host_metrics";
/// Name of the stream of outbound connections, as a network sensor reports them.
pub const NET_EVENTS: &str = "net_events";

const STREAMS_DDL: &str = "CREATE STREAM proc_events (
  ts TIMESTAMP NOT NULL, host TEXT, pid BIGINT, ppid BIGINT, user_name TEXT, exe TEXT,
  op TEXT, obj_type TEXT, obj_name TEXT, dst_ip TEXT, amount BIGINT,
  WATERMARK FOR ts AS ts - INTERVAL '2' SECOND
) WITH (idle_timeout = '5s');
CREATE STREAM host_metrics (
  ts TIMESTAMP NOT NULL, host TEXT, cpu DOUBLE PRECISION, mem DOUBLE PRECISION,
  net_out BIGINT, disk_io BIGINT,
  WATERMARK FOR ts AS ts - INTERVAL '2' SECOND
) WITH (idle_timeout = '5s');
CREATE STREAM net_events (
  ts TIMESTAMP NOT NULL, host TEXT, pid BIGINT, ppid BIGINT, exe TEXT, src_ip TEXT,
  dst_ip TEXT, dst_port BIGINT, bytes_out BIGINT,
  WATERMARK FOR ts AS ts - INTERVAL '2' SECOND
) WITH (idle_timeout = '5s');";

const NANOS: i64 = 1_000_000_000;
const MS: i64 = 1_000_000;
/// Longest range one `generate` call accepts.
const MAX_RANGE: i64 = 86_400 * NANOS;
/// Ranges must stay this far inside the `i64` nanosecond range (roughly years 1824 to 2116).
const TIME_LIMIT: i64 = i64::MAX / 2;
const FAILED_LOGINS_PER_HOUR: f64 = 3.0;
const LOGINS_PER_HOUR: f64 = 4.0;
const DEFAULT_RATE: f64 = 20.0;
const MAX_RATE: f64 = 1_000_000.0;

// Seed domains, so that the draws for different purposes never share a stream.
const TAG_FLEET: u64 = 1;
const TAG_EVENTS: u64 = 2;
const TAG_ATTACK: u64 = 3;
const TAG_CPU_SLOW: u64 = 4;
const TAG_CPU_SLOWER: u64 = 5;
const TAG_CPU_NOISE: u64 = 6;
const TAG_MEM_SLOW: u64 = 7;
const TAG_MEM_SLOWER: u64 = 8;
const TAG_NET: u64 = 9;
const TAG_DISK: u64 = 10;
const TAG_FLOW: u64 = 11;
const TAG_MFA: u64 = 12;

/// Generates the demo fleet's `proc_events`, `host_metrics` and `net_events`; see the module
/// docs.
pub struct DemoGenerator {
    seed: u64,
    rate: f64,
    hosts: Vec<Host>,
    staged: Vec<Staged>,
    injected: usize,
}

impl DemoGenerator {
    /// A fleet of `hosts` hosts (at least one) named `web-01`, `win-01`, `db-01`, `app-01`,
    /// `web-02`, ...: any two or more mix Linux and Windows. Same seed, same fleet, same events.
    pub fn new(seed: u64, hosts: usize) -> Self {
        let mut numbers: HashMap<&str, usize> = HashMap::new();
        let hosts = (0..hosts.max(1))
            .map(|i| {
                let role = &ROLES[i % ROLES.len()];
                let number = numbers.entry(role.0).or_default();
                *number += 1;
                Host::new(seed, i, role, format!("{}-{:02}", role.0, number))
            })
            .collect();
        DemoGenerator {
            seed,
            rate: DEFAULT_RATE,
            hosts,
            staged: Vec::new(),
            injected: 0,
        }
    }

    /// The `CREATE STREAM` statements for the streams this generator feeds, separated by `;`
    /// and a newline.
    pub fn streams_ddl() -> &'static str {
        STREAMS_DDL
    }

    /// The Arrow schema of `proc_events`, in DDL column order.
    pub fn proc_events_schema() -> SchemaRef {
        static SCHEMA: LazyLock<SchemaRef> = LazyLock::new(|| {
            let text = |name| Field::new(name, DataType::Utf8, true);
            let bigint = |name| Field::new(name, DataType::Int64, true);
            Arc::new(Schema::new(vec![
                Field::new("ts", DataType::Timestamp(TimeUnit::Nanosecond, None), false),
                text("host"),
                bigint("pid"),
                bigint("ppid"),
                text("user_name"),
                text("exe"),
                text("op"),
                text("obj_type"),
                text("obj_name"),
                text("dst_ip"),
                bigint("amount"),
            ]))
        });
        SCHEMA.clone()
    }

    /// The Arrow schema of `host_metrics`, in DDL column order.
    pub fn host_metrics_schema() -> SchemaRef {
        static SCHEMA: LazyLock<SchemaRef> = LazyLock::new(|| {
            Arc::new(Schema::new(vec![
                Field::new("ts", DataType::Timestamp(TimeUnit::Nanosecond, None), false),
                Field::new("host", DataType::Utf8, true),
                Field::new("cpu", DataType::Float64, true),
                Field::new("mem", DataType::Float64, true),
                Field::new("net_out", DataType::Int64, true),
                Field::new("disk_io", DataType::Int64, true),
            ]))
        });
        SCHEMA.clone()
    }

    /// The Arrow schema of `net_events`, in DDL column order.
    pub fn net_events_schema() -> SchemaRef {
        static SCHEMA: LazyLock<SchemaRef> = LazyLock::new(|| {
            let text = |name| Field::new(name, DataType::Utf8, true);
            let bigint = |name| Field::new(name, DataType::Int64, true);
            Arc::new(Schema::new(vec![
                Field::new("ts", DataType::Timestamp(TimeUnit::Nanosecond, None), false),
                text("host"),
                bigint("pid"),
                bigint("ppid"),
                text("exe"),
                text("src_ip"),
                text("dst_ip"),
                bigint("dst_port"),
                bigint("bytes_out"),
            ]))
        });
        SCHEMA.clone()
    }

    /// Sets the background rate in `proc_events` rows per second per host (default 20).
    /// Negative or NaN rates mean no background events; rates are capped at 1,000,000.
    pub fn with_rate(mut self, events_per_second_per_host: f64) -> Self {
        let rate = events_per_second_per_host;
        self.rate = if rate > 0.0 { rate.min(MAX_RATE) } else { 0.0 };
        self
    }

    /// The fleet's host names, in the order they were created.
    pub fn hosts(&self) -> impl Iterator<Item = &str> {
        self.hosts.iter().map(|h| h.name.as_str())
    }

    /// All events with event time in [from, to), in nondecreasing ts order within each batch,
    /// as (stream name, batch) pairs (`proc_events`, `host_metrics`, `net_events`, in that
    /// order); roughly `rate` proc events per second per host (rate set
    /// by `with_rate`, default 20). Streams with no rows in the range are left out. A range
    /// longer than a day, or outside the years 1824 to 2116, is rejected (22023).
    pub fn generate(
        &mut self,
        from: EventTime,
        to: EventTime,
    ) -> Result<Vec<(&'static str, RecordBatch)>> {
        let (from, to) = (from.nanos(), to.nanos());
        if from >= to {
            return Ok(Vec::new());
        }
        if from < -TIME_LIMIT || to > TIME_LIMIT || to - from > MAX_RANGE {
            return Err(Error::invalid_input(
                sqlstate::INVALID_PARAMETER_VALUE,
                format!(
                    "demo range [{}, {}) is too long or out of bounds; generate at most one day \
                     at a time, between the years 1824 and 2116",
                    EventTime(from),
                    EventTime(to)
                ),
            ));
        }
        let in_range = |ts: i64| ts >= from && ts < to;
        let staged = || self.staged.iter().flat_map(|s| &s.events);
        let (first, last) = (from.div_euclid(NANOS), (to - 1).div_euclid(NANOS));
        let mut events: Vec<Event> = Vec::new();
        let mut flows: Vec<Flow> = Vec::new();
        let mut metrics = Vec::with_capacity((last - first + 1) as usize * self.hosts.len());
        let mut previous = vec![Traffic::default(); self.hosts.len()];
        let mut second_events = Vec::new();
        // One second early: children started then may exit inside the range, and the first
        // metrics row reports the traffic of the second before it.
        for second in first - 1..=last {
            let ts = second * NANOS;
            for (h, previous) in previous.iter_mut().enumerate() {
                second_events.clear();
                self.background_second(h, second, &mut second_events);
                if in_range(ts) {
                    let mut traffic = *previous;
                    let before = |e: &&Event| e.actor.host == h && (ts - NANOS..ts).contains(&e.ts);
                    staged().filter(before).for_each(|e| traffic.add(e));
                    let spiking = |(sh, start, end)| sh == h && (start..end).contains(&ts);
                    let spike = self.staged.iter().filter_map(|s| s.cpu_spike).any(spiking);
                    metrics.push(self.metrics_row(h, second, traffic, spike));
                }
                *previous = Traffic::default();
                second_events.iter().for_each(|e| previous.add(e));
                events.extend(second_events.iter().filter(|e| in_range(e.ts)));
                let seen = second_events.iter().filter_map(|e| self.flow(e));
                flows.extend(seen.filter(|f| in_range(f.ts)));
            }
        }
        events.extend(staged().filter(|e| in_range(e.ts)));
        events.sort_by_key(|e| e.ts);
        let seen = staged().filter_map(|e| self.flow(e));
        flows.extend(seen.filter(|f| in_range(f.ts)));
        flows.sort_by_key(|f| f.ts);
        self.staged
            .retain(|s| s.end.saturating_add(2 * NANOS) >= to);

        let mut out = Vec::with_capacity(3);
        if !events.is_empty() {
            out.push((PROC_EVENTS, self.proc_batch(&events)?));
        }
        if !metrics.is_empty() {
            out.push((HOST_METRICS, self.metrics_batch(&metrics)?));
        }
        if !flows.is_empty() {
            out.push((NET_EVENTS, self.net_batch(&flows)?));
        }
        Ok(out)
    }

    fn proc_batch(&self, events: &[Event]) -> Result<RecordBatch> {
        let text = |f: fn(&Event) -> &'static str| -> ArrayRef {
            Arc::new(StringArray::from_iter_values(events.iter().map(f)))
        };
        let int = |f: fn(&Event) -> i64| -> ArrayRef {
            Arc::new(Int64Array::from_iter_values(events.iter().map(f)))
        };
        let hosts = events
            .iter()
            .map(|e| self.hosts[e.actor.host].name.as_str());
        let columns = vec![
            Arc::new(TimestampNanosecondArray::from_iter_values(
                events.iter().map(|e| e.ts),
            )) as ArrayRef,
            Arc::new(StringArray::from_iter_values(hosts)),
            int(|e| e.actor.pid),
            int(|e| e.actor.ppid),
            text(|e| e.actor.user),
            text(|e| e.actor.exe),
            text(|e| e.op.as_str()),
            text(|e| e.obj.parts().0),
            text(|e| e.obj.parts().1),
            Arc::new(events.iter().map(|e| e.dst_ip).collect::<StringArray>()),
            Arc::new(events.iter().map(|e| e.amount).collect::<Int64Array>()),
        ];
        Ok(RecordBatch::try_new(Self::proc_events_schema(), columns)?)
    }
}

/// Folds values into one well-mixed seed (SplitMix64 finalizer over each step).
fn mix(values: &[u64]) -> u64 {
    values.iter().fold(0x9E37_79B9_7F4A_7C15, |acc, &v| {
        let mut z = (acc ^ v).wrapping_add(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xBF58_476D_1CE4_E5B9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94D0_49BB_1331_11EB);
        z ^ (z >> 31)
    })
}

/// A uniform value in [0, 1) fixed by `key` and `i`.
fn unit(key: u64, i: i64) -> f64 {
    (mix(&[key, i as u64]) >> 11) as f64 / (1u64 << 53) as f64
}

/// A gap between Poisson arrivals at `lambda` per second, in seconds.
fn exponential(rng: &mut StdRng, lambda: f64) -> f64 {
    -(1.0 - rng.gen::<f64>()).ln() / lambda
}

/// A whole number between `lo` and `hi`, uniform in its logarithm: mostly small, some large.
fn log_uniform(rng: &mut StdRng, lo: i64, hi: i64) -> i64 {
    (lo as f64 * (hi as f64 / lo as f64).powf(rng.gen::<f64>())) as i64
}

fn pick<T: Copy>(rng: &mut StdRng, items: &[T]) -> T {
    items[rng.gen_range(0..items.len())]
}

#[cfg(test)]
mod tests;
