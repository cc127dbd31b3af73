//! The `host_metrics` stream: one row per host per second, smooth functions of time (slow
//! drifts plus noise) with the traffic of the second before, and cpu pinned by a spike.

use std::sync::Arc;

use super::{
    mix, unit, ArrayRef, DemoGenerator, Float64Array, Int64Array, RecordBatch, StringArray,
    TimestampNanosecondArray, Traffic, NANOS, TAG_CPU_NOISE, TAG_CPU_SLOW, TAG_CPU_SLOWER,
    TAG_DISK, TAG_MEM_SLOW, TAG_MEM_SLOWER, TAG_NET, TAU,
};
use crate::error::Result;

impl DemoGenerator {
    /// The `host_metrics` row of host `h` at the start of `second`; `traffic` is what its
    /// processes moved during the second before.
    pub(super) fn metrics_row(
        &self,
        h: usize,
        second: i64,
        traffic: Traffic,
        spike: bool,
    ) -> MetricsRow {
        let host = &self.hosts[h];
        let key = |tag: u64| mix(&[self.seed, tag, h as u64]);
        let t = second as f64;
        let cpu = if spike {
            97.0 + 2.9 * unit(key(TAG_CPU_NOISE), second)
        } else {
            // Busiest around 14:00 UTC.
            let daily = (TAU * (t.rem_euclid(86_400.0) / 86_400.0 - 8.0 / 24.0)).sin();
            host.cpu_base
                + 10.0 * daily
                + 8.0 * smooth_noise(key(TAG_CPU_SLOW), t / 60.0)
                + 4.0 * smooth_noise(key(TAG_CPU_SLOWER), t / 600.0)
                + 2.0 * (2.0 * unit(key(TAG_CPU_NOISE), second) - 1.0)
        };
        let mem = host.mem_base
            + 6.0 * smooth_noise(key(TAG_MEM_SLOW), t / 1_800.0)
            + 2.0 * smooth_noise(key(TAG_MEM_SLOWER), t / 300.0);
        let net_out = traffic.net + 2_000 + (6_000.0 * unit(key(TAG_NET), second)) as i64;
        let disk_io = traffic.disk + 10_000 + (50_000.0 * unit(key(TAG_DISK), second)) as i64;
        let round = |x: f64| (x.clamp(0.0, 100.0) * 100.0).round() / 100.0;
        let (cpu, mem) = (round(cpu), round(mem));
        MetricsRow {
            ts: second * NANOS,
            host: h,
            cpu,
            mem,
            net_out,
            disk_io,
        }
    }

    pub(super) fn metrics_batch(&self, rows: &[MetricsRow]) -> Result<RecordBatch> {
        let float = |f: fn(&MetricsRow) -> f64| -> ArrayRef {
            Arc::new(Float64Array::from_iter_values(rows.iter().map(f)))
        };
        let int = |f: fn(&MetricsRow) -> i64| -> ArrayRef {
            Arc::new(Int64Array::from_iter_values(rows.iter().map(f)))
        };
        let hosts = rows.iter().map(|r| self.hosts[r.host].name.as_str());
        let columns = vec![
            Arc::new(TimestampNanosecondArray::from_iter_values(
                rows.iter().map(|r| r.ts),
            )) as ArrayRef,
            Arc::new(StringArray::from_iter_values(hosts)),
            float(|r| r.cpu),
            float(|r| r.mem),
            int(|r| r.net_out),
            int(|r| r.disk_io),
        ];
        Ok(RecordBatch::try_new(Self::host_metrics_schema(), columns)?)
    }
}

/// One `host_metrics` row.
pub(super) struct MetricsRow {
    pub(super) ts: i64,
    pub(super) host: usize,
    pub(super) cpu: f64,
    pub(super) mem: f64,
    pub(super) net_out: i64,
    pub(super) disk_io: i64,
}

/// Smooth value noise in [-1, 1]: random values at integer `x`, eased in between.
pub(super) fn smooth_noise(key: u64, x: f64) -> f64 {
    let k = x.floor();
    let f = x - k;
    let (a, b) = (unit(key, k as i64), unit(key, k as i64 + 1));
    let eased = f * f * (3.0 - 2.0 * f);
    2.0 * (a + (b - a) * eased) - 1.0
}
