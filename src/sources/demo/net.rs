//! The `net_events` stream: what a network sensor on each host reports, one row per outbound
//! connection a process opens. It sees the same connections as the process sensor behind
//! `proc_events` (same host, pid, parent pid and image), a few milliseconds later and with the
//! addresses and port of the connection, so that a process start on one stream and its
//! connection on the other come from two sensors and must be correlated by host and pid.

use std::sync::Arc;

use super::fleet::{Event, Obj, Op};
use super::{
    mix, ArrayRef, DemoGenerator, Int64Array, RecordBatch, StringArray, TimestampNanosecondArray,
    MS, TAG_FLOW,
};
use crate::error::Result;

/// Address of the service that checks the second factor of ssh logins (sshd calls it after
/// accepting the first).
pub(super) const MFA_IP: &str = "10.0.0.9";
/// The sensor reports a connection at most this long after the process opened it.
const MAX_DELAY: i64 = 40 * MS;

/// One `net_events` row.
pub(super) struct Flow {
    pub(super) ts: i64,
    pub(super) event: Event,
    pub(super) dst_ip: &'static str,
    pub(super) dst_port: i64,
}

/// The port a connection to `dst_ip` goes to: the fleet's internal services by address,
/// anything outside on 443.
fn port(dst_ip: &str) -> i64 {
    match dst_ip {
        "127.0.0.1" => 1433,
        "10.0.0.2" => 53,
        "10.0.0.3" => 445,
        "10.0.0.5" => 389,
        MFA_IP => 443,
        "10.0.1.11" | "10.0.1.21" => 5432,
        "10.0.2.10" => 8080,
        _ => 443,
    }
}

/// The address of host `h` of the fleet.
pub(super) fn host_ip(h: usize) -> String {
    format!("10.0.{}.{}", 3 + h / 250, 10 + h % 250)
}

impl DemoGenerator {
    /// The network sensor's row for `e`, if it opens a connection.
    pub(super) fn flow(&self, e: &Event) -> Option<Flow> {
        let (Op::Connect, Obj::Ip(dst_ip)) = (e.op, e.obj) else {
            return None;
        };
        let key = mix(&[self.seed, TAG_FLOW, e.actor.host as u64, e.ts as u64]);
        Some(Flow {
            ts: e.ts + 1 + (key % MAX_DELAY as u64) as i64,
            event: *e,
            dst_ip,
            dst_port: port(dst_ip),
        })
    }

    pub(super) fn net_batch(&self, flows: &[Flow]) -> Result<RecordBatch> {
        let int = |f: fn(&Flow) -> i64| -> ArrayRef {
            Arc::new(Int64Array::from_iter_values(flows.iter().map(f)))
        };
        let text = |f: fn(&Flow) -> &'static str| -> ArrayRef {
            Arc::new(StringArray::from_iter_values(flows.iter().map(f)))
        };
        let host = |f: &Flow| f.event.actor.host;
        let columns = vec![
            Arc::new(TimestampNanosecondArray::from_iter_values(
                flows.iter().map(|f| f.ts),
            )) as ArrayRef,
            Arc::new(StringArray::from_iter_values(
                flows.iter().map(|f| self.hosts[host(f)].name.as_str()),
            )),
            int(|f| f.event.actor.pid),
            int(|f| f.event.actor.ppid),
            text(|f| f.event.actor.exe),
            Arc::new(StringArray::from_iter_values(
                flows.iter().map(|f| host_ip(host(f))),
            )),
            text(|f| f.dst_ip),
            int(|f| f.dst_port),
            Arc::new(flows.iter().map(|f| f.event.amount).collect::<Int64Array>()),
        ];
        Ok(RecordBatch::try_new(Self::net_events_schema(), columns)?)
    }
}
