//! (a) Ingest: rows/s through `insert_batch` into streams with one TUMBLE query each, in
//! memory (the baseline) and logged at each fsync policy; one writer with 1000- and 8192-row
//! batches, and four writers with 100-row batches into four streams and into one.

#![allow(
    clippy::disallowed_methods,
    reason = "a bench starts its own threads and tasks"
)]

use std::error::Error;
use std::path::Path;
use std::time::{Duration, Instant};

use datafusion::arrow::array::{AsArray, RecordBatch};
use datafusion::arrow::datatypes::{Int64Type, SchemaRef};
use saql::runtime::FsyncPolicy;

use crate::common::{drain, median, query_stats, stream_stats, thousands};
use crate::support::{
    dir_bytes, engine_at, int_rows, random_events, runs_text, split, stream_ddl, subscribe,
    temp_dir, tumble_query, NANOS_PER_MS, SEED, TUMBLE_MINUTE,
};
use crate::{BenchResult, Options, Report};

/// Batch sizes of the single-writer cases; the four writers send [`SMALL_BATCH`] rows.
const INGEST_BATCHES: [usize; 2] = [1000, 8192];
const SMALL_BATCH: usize = 100;
const WRITERS: usize = 4;

/// Where the ingest cases keep their rows: in memory only (the baseline), or logged with a
/// policy (`interval` is the default one, group commit every 2 ms).
const TARGETS: [Option<FsyncPolicy>; 4] = [
    None,
    Some(FsyncPolicy::Always),
    Some(FsyncPolicy::Interval(Duration::from_millis(2))),
    Some(FsyncPolicy::Off),
];

/// How the tables name a target.
pub fn label(target: Option<FsyncPolicy>) -> &'static str {
    match target {
        None => "in memory",
        Some(FsyncPolicy::Always) => "fsync always",
        Some(FsyncPolicy::Interval(_)) => "fsync interval",
        Some(FsyncPolicy::Off) => "fsync off",
    }
}

/// What one ingest run produced.
struct Ingested {
    seconds: f64,
    /// Every query's result rows, query by query.
    results: Vec<Vec<Vec<i64>>>,
    log_bytes: u64,
}

/// Runs the ingest cases; returns their table.
pub fn run(opts: &Options, schema: &SchemaRef, report: &mut Report) -> BenchResult<String> {
    println!(
        "(a) ingest: {} rows through insert_batch, one TUMBLE query per stream",
        thousands(opts.rows as u64)
    );
    let events = random_events(opts.rows, NANOS_PER_MS, SEED);
    let mut table = String::from(
        "| case | batch rows | writers -> streams | rows | median s | rows/s | vs in memory \
         | log bytes/row | all runs (s) |\n|---|---:|---|---:|---:|---:|---:|---:|---|\n",
    );
    let mut configs: Vec<(usize, usize, usize, Vec<Vec<RecordBatch>>)> = Vec::new();
    for rows in INGEST_BATCHES {
        configs.push((rows, 1, 1, vec![split(schema, &events, rows)?]));
    }
    let small = random_events(opts.small_rows, NANOS_PER_MS, SEED + 1);
    let small = split(schema, &small, SMALL_BATCH)?;
    let mut dealt: Vec<Vec<RecordBatch>> = vec![Vec::new(); WRITERS];
    for (i, b) in small.into_iter().enumerate() {
        dealt[i % WRITERS].push(b);
    }
    configs.push((SMALL_BATCH, WRITERS, WRITERS, dealt.clone()));
    configs.push((SMALL_BATCH, WRITERS, 1, dealt));

    for (batch_rows, writers, streams, input) in &configs {
        let rows: usize = input.iter().flatten().map(|b| b.num_rows()).sum();
        let mut reference: Option<Vec<Vec<Vec<i64>>>> = None;
        let mut baseline = f64::NAN;
        for target in TARGETS {
            let name = format!(
                "{}, {batch_rows}-row batches, {writers} -> {streams}",
                label(target)
            );
            let mut seconds = Vec::new();
            let mut log_bytes = 0;
            for run in 1..=opts.runs {
                let (out, mut problems) = ingest_once(target, &opts.root, input, *streams)?;
                println!(
                    "  {name:<55} run {run}: {:7.3} s {:>12} rows/s",
                    out.seconds,
                    thousands((rows as f64 / out.seconds) as u64)
                );
                let mut results = out.results;
                if writers > streams {
                    // Writers to one stream interleave differently every run.
                    results.iter_mut().for_each(|r| r.sort());
                }
                match &reference {
                    None => reference = Some(results),
                    Some(r) if *r != results => problems.push(format!(
                        "results differ from the first in-memory run ({} rows here, {} there)",
                        results.iter().map(Vec::len).sum::<usize>(),
                        r.iter().map(Vec::len).sum::<usize>()
                    )),
                    Some(_) => {}
                }
                report.check(&name, run, problems);
                seconds.push(out.seconds);
                log_bytes = out.log_bytes;
            }
            let m = median(seconds.iter().copied());
            if target.is_none() {
                baseline = m;
            }
            table.push_str(&format!(
                "| {} | {batch_rows} | {writers} -> {streams} | {} | {m:.3} | {} | {:.2}x | {} | {} |\n",
                label(target),
                thousands(rows as u64),
                thousands((rows as f64 / m) as u64),
                baseline / m,
                if target.is_some() {
                    format!("{:.1}", log_bytes as f64 / rows as f64)
                } else {
                    "-".into()
                },
                runs_text(&seconds, 3)
            ));
        }
    }
    Ok(table)
}

/// Creates `streams` streams with one TUMBLE query each, has writer `i` insert `input[i]` into
/// stream `i % streams` on its own thread, then ends the input; times all of it.
fn ingest_once(
    target: Option<FsyncPolicy>,
    root: &Path,
    input: &[Vec<RecordBatch>],
    streams: usize,
) -> BenchResult<(Ingested, Vec<String>)> {
    let dir = match target {
        Some(_) => Some(temp_dir(root)?),
        None => None,
    };
    let engine = engine_at(
        dir.as_ref().map(|d| d.path()),
        target.unwrap_or(FsyncPolicy::Off),
    )?;
    // One writer keeps the usual 5 s delay; several writers to one stream race each other,
    // so the delay covers all of the input and no row is late.
    let delay = if input.len() > streams { 3600 } else { 5 };
    let mut subscriptions = Vec::new();
    for s in 0..streams {
        engine.execute_blocking(&stream_ddl(&format!("events{s}"), delay))?;
        engine.execute_blocking(&tumble_query(
            &format!("q{s}"),
            &format!("events{s}"),
            TUMBLE_MINUTE,
        ))?;
        subscriptions.push(subscribe(&engine, &format!("q{s}"))?);
    }
    let mut results = vec![Vec::new(); streams];
    let start = Instant::now();
    std::thread::scope(|scope| -> BenchResult<()> {
        let writers: Vec<_> = input
            .iter()
            .enumerate()
            .map(|(w, batches)| {
                let engine = engine.clone();
                scope.spawn(move || -> Result<(), String> {
                    let stream = format!("events{}", w % streams);
                    for b in batches {
                        engine
                            .insert_batch(&stream, b.clone())
                            .map_err(|e| e.to_string())?;
                    }
                    Ok(())
                })
            })
            .collect();
        for w in writers {
            w.join().map_err(|_| "a writer panicked")??;
        }
        Ok(())
    })?;
    engine.finish();
    for (s, sub) in subscriptions.iter_mut().enumerate() {
        drain(sub, |b| {
            results[s].push(b);
            Ok::<_, Box<dyn Error>>(())
        })?;
    }
    let seconds = start.elapsed().as_secs_f64();

    let mut problems = Vec::new();
    let counters = stream_stats(&engine)?;
    let queries = query_stats(&engine)?;
    let mut rows = Vec::new();
    for (s, batches) in results.iter().enumerate() {
        let sent: Vec<&RecordBatch> = input
            .iter()
            .enumerate()
            .filter(|(w, _)| w % streams == s)
            .flat_map(|(_, b)| b)
            .collect();
        let sent_rows: usize = sent.iter().map(|b| b.num_rows()).sum();
        let sent_amount: i64 = sent
            .iter()
            .map(|b| {
                b.column(4)
                    .as_primitive::<Int64Type>()
                    .values()
                    .iter()
                    .sum::<i64>()
            })
            .sum();
        let stream = format!("events{s}");
        match counters.get(&stream) {
            Some(c) if c.rows_in == sent_rows as i64 && c.late_rows == 0 => {}
            Some(c) => problems.push(format!(
                "{stream}: SHOW STREAMS says {} rows in, {} late; {sent_rows} were sent",
                c.rows_in, c.late_rows
            )),
            None => problems.push(format!("SHOW STREAMS does not list {stream}")),
        }
        let got = int_rows(batches)?;
        match queries.get(&format!("q{s}")) {
            Some(q) => problems.extend(q.problems(got.len() as u64)),
            None => problems.push(format!("SHOW QUERIES does not list q{s}")),
        }
        let (count, amount) = got.iter().fold((0, 0), |(c, a), r| (c + r[2], a + r[3]));
        if count != sent_rows as i64 || amount != sent_amount {
            problems.push(format!(
                "q{s} counted {count} rows with SUM {amount}; {sent_rows} rows with SUM \
                 {sent_amount} were sent"
            ));
        }
        rows.push(got);
    }
    let log_bytes = dir
        .as_ref()
        .map_or(Ok(0), |d| dir_bytes(&d.path().join("wal")))?;
    drop(engine);
    Ok((
        Ingested {
            seconds,
            results: rows,
            log_bytes,
        },
        problems,
    ))
}
