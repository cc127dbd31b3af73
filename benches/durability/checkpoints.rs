//! (b) Checkpoints: state of growing size (TUMBLE groups open, MATCH_RECOGNIZE partitions
//! with a match in flight), how long `Engine::checkpoint` takes and how many bytes it writes,
//! and the longest `insert_batch` a thread inserting into the same stream sees while it runs,
//! against the same thread's inserts before it. Each run then restarts from the checkpoint and
//! compares the query's results with an in-memory run over the same rows.

#![allow(
    clippy::disallowed_methods,
    reason = "a bench starts its own threads and tasks"
)]

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::{Duration, Instant};

use datafusion::arrow::array::RecordBatch;
use datafusion::arrow::datatypes::SchemaRef;
use saql::runtime::FsyncPolicy;
use saql::Engine;

use crate::common::{median, thousands};
use crate::support::{
    collect, compare_engines, describe_difference, engine_at, int_rows, max, split, stream_ddl,
    subscribe, temp_dir, to_batch, tumble_query, Event, BULK_BATCH, MAX_AMOUNT, NANOS_PER_MS, OPS,
    START,
};
use crate::{BenchResult, Options, Report};

/// A window no row of the case leaves, so every group stays open until the end.
const TUMBLE_HOUR: &str = "INTERVAL '1' HOUR";
/// How long the other thread (the probe) inserts before the checkpoint (its latencies then
/// are the "without" figures), and after it.
const BEFORE_CHECKPOINT: Duration = Duration::from_millis(1500);
const AFTER_CHECKPOINT: Duration = Duration::from_millis(300);
/// The probe's batches, and its pause between them.
const PROBE_BATCH: usize = 100;
const PROBE_PAUSE: Duration = Duration::from_millis(1);
/// The probe's first inserts (seconds) are not counted.
const WARM_UP: f64 = 0.1;

/// The state a checkpoint case builds before it checkpoints.
#[derive(Clone, Copy)]
enum State {
    /// A TUMBLE aggregate with this many groups open.
    Tumble(usize),
    /// MATCH_RECOGNIZE with this many partitions holding a match in flight, four rows each.
    Pattern(usize),
}

/// Rows each pattern partition holds in flight: one `a`, then `x` rows.
const PATTERN_ROWS: usize = 4;

impl State {
    fn label(&self) -> String {
        match self {
            State::Tumble(g) => format!("TUMBLE, {} open groups", thousands(*g as u64)),
            State::Pattern(p) => format!(
                "MATCH_RECOGNIZE, {} partitions in flight ({} rows)",
                thousands(*p as u64),
                thousands((p * PATTERN_ROWS) as u64)
            ),
        }
    }

    fn query(&self) -> String {
        match self {
            State::Tumble(_) => tumble_query("q", "events", TUMBLE_HOUR),
            State::Pattern(_) => "CREATE CONTINUOUS QUERY q AS SELECT * FROM events \
                 MATCH_RECOGNIZE (PARTITION BY key ORDER BY ts \
                 MEASURES a.ts AS started, b.ts AS ended, a.amount AS written, b.amount AS read \
                 AFTER MATCH SKIP PAST LAST ROW PATTERN (a x*? b) WITHIN INTERVAL '24' HOUR \
                 DEFINE a AS op = 'write' AND amount > 9000, b AS op = 'read' AND b.amount > a.amount)"
                .to_string(),
        }
    }

    /// Event `i` of the case: the setup's rows first, then the probe's, then the finale's.
    fn step(&self) -> i64 {
        match self {
            // A million rows span a second: all in the first hour's window.
            State::Tumble(_) => 1_000,
            // Past the 5 s watermark delay, so that the matcher takes the rows in.
            State::Pattern(_) => NANOS_PER_MS,
        }
    }

    fn setup(&self) -> Vec<Event> {
        match *self {
            State::Tumble(groups) => (0..groups)
                .map(|i| Event {
                    ts: START + i as i64 * self.step(),
                    key: i as i64,
                    op: OPS[i % OPS.len()],
                    amount: (i as i64 * 7919) % MAX_AMOUNT,
                })
                .collect(),
            State::Pattern(partitions) => (0..partitions * PATTERN_ROWS)
                .map(|i| {
                    let start = i < partitions;
                    Event {
                        ts: START + i as i64 * self.step(),
                        key: (i % partitions) as i64,
                        op: if start { "write" } else { "open" },
                        amount: if start { 9500 } else { 1 },
                    }
                })
                .collect(),
        }
    }

    fn keys(&self) -> usize {
        match *self {
            State::Tumble(n) | State::Pattern(n) => n,
        }
    }

    /// The probe's batch `j`: rows for keys already in the state.
    fn probe(&self, j: usize) -> Vec<Event> {
        let first = self.setup_len() + j * PROBE_BATCH;
        (first..first + PROBE_BATCH)
            .map(|i| Event {
                ts: START + i as i64 * self.step(),
                key: (i % self.keys()) as i64,
                op: "open",
                amount: (i as i64 * 31) % MAX_AMOUNT,
            })
            .collect()
    }

    /// After the probe's `probes` batches: for the pattern, a `b` row in every partition, so
    /// that each match in flight completes.
    fn finale(&self, probes: usize) -> Vec<Event> {
        let first = self.setup_len() + probes * PROBE_BATCH;
        match *self {
            State::Tumble(_) => Vec::new(),
            State::Pattern(partitions) => (0..partitions)
                .map(|k| Event {
                    ts: START + (first + k) as i64 * self.step(),
                    key: k as i64,
                    op: "read",
                    amount: 9999,
                })
                .collect(),
        }
    }

    fn setup_len(&self) -> usize {
        match *self {
            State::Tumble(g) => g,
            State::Pattern(p) => p * PATTERN_ROWS,
        }
    }
}

/// One checkpoint run.
struct Checkpointed {
    seconds: f64,
    bytes: u64,
    /// The probe's `insert_batch` latencies (s) overlapping the checkpoint, and before it.
    during: Vec<f64>,
    before: Vec<f64>,
    restart_seconds: f64,
}

/// Runs the checkpoint cases; returns their table.
pub fn run(opts: &Options, schema: &SchemaRef, report: &mut Report) -> BenchResult<String> {
    println!(
        "\n(b) checkpoints, {}: state built with {BULK_BATCH}-row batches; another \
         thread inserts {PROBE_BATCH}-row batches into the same stream, {} ms apart, for {:.1} s \
         before the checkpoint and {:.1} s after it",
        crate::ingest::label(Some(opts.checkpoint_fsync)),
        PROBE_PAUSE.as_millis(),
        BEFORE_CHECKPOINT.as_secs_f64(),
        AFTER_CHECKPOINT.as_secs_f64()
    );
    let mut table = String::from(
        "| state | checkpoint bytes | checkpoint median ms | MB/s | longest insert during \
         checkpoint ms | longest insert without ms | median insert without ms | restart s \
         | all runs: checkpoint ms / longest insert during |\n\
         |---|---:|---:|---:|---:|---:|---:|---:|---|\n",
    );
    let states = opts
        .groups
        .iter()
        .map(|&g| State::Tumble(g))
        .chain(opts.partitions.iter().map(|&p| State::Pattern(p)));
    for state in states {
        let name = state.label();
        let mut outs = Vec::new();
        for run in 1..=opts.runs {
            let (out, problems) = checkpoint_once(state, schema, opts)?;
            println!(
                "  {name:<55} run {run}: checkpoint {:8.1} ms, {:>13} bytes; longest insert \
                 {:6.1} ms during it, {:6.1} ms before it ({} and {} inserts); restart {:.3} s",
                out.seconds * 1e3,
                thousands(out.bytes),
                max(&out.during) * 1e3,
                max(&out.before) * 1e3,
                out.during.len(),
                out.before.len(),
                out.restart_seconds
            );
            report.check(&name, run, problems);
            outs.push(out);
        }
        let ms = median(outs.iter().map(|o| o.seconds)) * 1e3;
        let bytes = median(outs.iter().map(|o| o.bytes as f64));
        let all: Vec<String> = outs
            .iter()
            .map(|o| format!("{:.1} / {:.1}", o.seconds * 1e3, max(&o.during) * 1e3))
            .collect();
        table.push_str(&format!(
            "| {name} | {} | {ms:.1} | {:.0} | {:.1} | {:.1} | {:.2} | {:.3} | {} |\n",
            thousands(bytes as u64),
            bytes / ms / 1e3,
            median(outs.iter().map(|o| max(&o.during))) * 1e3,
            median(outs.iter().map(|o| max(&o.before))) * 1e3,
            median(outs.iter().flat_map(|o| o.before.iter().copied())) * 1e3,
            median(outs.iter().map(|o| o.restart_seconds)),
            all.join(", ")
        ));
    }
    Ok(table)
}

fn checkpoint_once(
    state: State,
    schema: &SchemaRef,
    opts: &Options,
) -> BenchResult<(Checkpointed, Vec<String>)> {
    let dir = temp_dir(&opts.root)?;
    let engine = engine_at(Some(dir.path()), opts.checkpoint_fsync)?;
    let setup = split(schema, &state.setup(), BULK_BATCH)?;
    engine.execute_blocking(&stream_ddl("events", 5))?;
    engine.execute_blocking(&state.query())?;
    for b in &setup {
        engine.insert_batch("events", b.clone())?;
    }

    let stop = AtomicBool::new(false);
    let t0 = Instant::now();
    let (written, window, latencies) = std::thread::scope(|scope| -> BenchResult<_> {
        let probe = scope.spawn(|| -> Result<Vec<(f64, f64)>, String> {
            let mut seen = Vec::new();
            while !stop.load(Ordering::Relaxed) {
                let batch =
                    to_batch(schema, &state.probe(seen.len())).map_err(|e| e.to_string())?;
                let at = t0.elapsed().as_secs_f64();
                engine
                    .insert_batch("events", batch)
                    .map_err(|e| e.to_string())?;
                seen.push((at, t0.elapsed().as_secs_f64() - at));
                std::thread::sleep(PROBE_PAUSE);
            }
            Ok(seen)
        });
        std::thread::sleep(BEFORE_CHECKPOINT);
        let from = t0.elapsed().as_secs_f64();
        let written = engine.checkpoint();
        let to = t0.elapsed().as_secs_f64();
        std::thread::sleep(AFTER_CHECKPOINT);
        stop.store(true, Ordering::Relaxed);
        let seen = probe.join().map_err(|_| "the probe thread panicked")??;
        Ok((written?, (from, to), seen))
    })?;
    let (from, to) = window;
    let during: Vec<f64> = latencies
        .iter()
        .filter(|(at, took)| *at < to && at + took > from)
        .map(|&(_, took)| took)
        .collect();
    let before: Vec<f64> = latencies
        .iter()
        .filter(|(at, took)| *at > WARM_UP && at + took < from)
        .map(|&(_, took)| took)
        .collect();
    let probes = latencies.len();
    drop(engine);

    // Restart from the checkpoint (plus the probe's rows logged after it), complete the input
    // and compare with the same rows run in memory.
    let restart = Instant::now();
    let engine = engine_at(Some(dir.path()), FsyncPolicy::Off)?;
    let restart_seconds = restart.elapsed().as_secs_f64();
    let recovered = finish_with(&engine, schema, &state.finale(probes))?;
    let reference = engine_at(None, FsyncPolicy::Off)?;
    reference.execute_blocking(&stream_ddl("events", 5))?;
    reference.execute_blocking(&state.query())?;
    let mut expected_sub = subscribe(&reference, "q")?;
    for b in &setup {
        reference.insert_batch("events", b.clone())?;
    }
    for j in 0..probes {
        reference.insert_batch("events", to_batch(schema, &state.probe(j))?)?;
    }
    let mut early = Vec::new();
    collect(&mut expected_sub, &mut early)?;
    let expected = finish_with(&reference, schema, &state.finale(probes))?;
    let mut problems = compare_engines(&engine, &reference, "events", "q")?;
    if !early.is_empty() {
        problems.push("the query emitted rows before the end of its input".into());
    }
    let (got, want) = (int_rows(&recovered)?, int_rows(&expected)?);
    if got != want {
        problems.push(describe_difference(&got, &want));
    }
    if want.len() != state.keys() {
        problems.push(format!(
            "{} result rows at the end, expected one per key ({})",
            want.len(),
            state.keys()
        ));
    }
    Ok((
        Checkpointed {
            seconds: to - from,
            bytes: written.bytes,
            during,
            before,
            restart_seconds,
        },
        problems,
    ))
}

/// Subscribes to `q`, inserts `rows`, ends the input; returns what the subscriber got.
pub fn finish_with(
    engine: &Engine,
    schema: &SchemaRef,
    rows: &[Event],
) -> BenchResult<Vec<RecordBatch>> {
    let mut sub = subscribe(engine, "q")?;
    for b in split(schema, rows, BULK_BATCH)? {
        engine.insert_batch("events", b)?;
    }
    engine.finish();
    let mut out = Vec::new();
    collect(&mut sub, &mut out)?;
    Ok(out)
}
