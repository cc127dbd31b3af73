//! (c) Recovery: how long `Engine::open` takes to replay a log of N rows after no checkpoint
//! (warm: the log in the page cache; cold: evicted first), and to restore a checkpoint that
//! covers all of it. Every open is compared with an in-memory run over the same rows.

use std::path::Path;
use std::process::Command;
use std::time::Instant;

use datafusion::arrow::datatypes::SchemaRef;
use saql::runtime::FsyncPolicy;

use crate::checkpoints::finish_with;
use crate::common::{median, thousands};
use crate::support::{
    compare_engines, describe_difference, dir_bytes, engine_at, int_rows, random_events, runs_text,
    split, stream_ddl, temp_dir, tumble_query, BULK_BATCH, NANOS_PER_MS, SEED, TUMBLE_MINUTE,
};
use crate::{BenchResult, Options, Report};

/// Runs the recovery cases; returns their table.
pub fn run(opts: &Options, schema: &SchemaRef, report: &mut Report) -> BenchResult<String> {
    println!(
        "\n(c) recovery: a log of N rows ({BULK_BATCH}-row batches, one TUMBLE query, no \
         checkpoint), opened again; warm = the log in the page cache, cold = evicted first"
    );
    let mut table = String::from(
        "| log | rows | log MB | open median s | rows/s recovered | vs in-memory ingest | \
         all runs (s) |\n|---|---:|---:|---:|---:|---:|---|\n",
    );
    for &n in &opts.log_rows {
        let events = random_events(n, NANOS_PER_MS, SEED + 2);
        let batches = split(schema, &events, BULK_BATCH)?;
        drop(events);

        // In memory: the rows' processing alone, and the state recovery must reproduce.
        let reference = engine_at(None, FsyncPolicy::Off)?;
        reference.execute_blocking(&stream_ddl("events", 5))?;
        reference.execute_blocking(&tumble_query("q", "events", TUMBLE_MINUTE))?;
        let start = Instant::now();
        for b in &batches {
            reference.insert_batch("events", b.clone())?;
        }
        let in_memory = start.elapsed().as_secs_f64();

        let dir = temp_dir(&opts.root)?;
        let start = Instant::now();
        {
            let engine = engine_at(Some(dir.path()), FsyncPolicy::Off)?;
            engine.execute_blocking(&stream_ddl("events", 5))?;
            engine.execute_blocking(&tumble_query("q", "events", TUMBLE_MINUTE))?;
            for b in &batches {
                engine.insert_batch("events", b.clone())?;
            }
        }
        let mb = dir_bytes(&dir.path().join("wal"))? as f64 / 1e6;
        println!(
            "  {} rows: in memory {:.3} s ({} rows/s); logged with fsync off in {:.3} s, {mb:.1} MB",
            thousands(n as u64),
            in_memory,
            thousands((n as f64 / in_memory) as u64),
            start.elapsed().as_secs_f64()
        );

        let name = format!("{} rows", thousands(n as u64));
        let mut row = |label: &str, seconds: &[f64]| {
            let m = median(seconds.iter().copied());
            table.push_str(&format!(
                "| {label} | {} | {mb:.1} | {m:.3} | {} | {:.2}x | {} |\n",
                thousands(n as u64),
                thousands((n as f64 / m) as u64),
                in_memory / m,
                runs_text(seconds, 3)
            ));
        };
        for cold in [false, true] {
            let label = format!("replay, {}", if cold { "cold" } else { "warm" });
            let mut seconds = Vec::new();
            for run in 1..=opts.runs {
                if cold {
                    evict(dir.path())?;
                }
                let start = Instant::now();
                let engine = engine_at(Some(dir.path()), FsyncPolicy::Off)?;
                let took = start.elapsed().as_secs_f64();
                println!("  {name}, {label:<16} run {run}: open {took:.3} s");
                seconds.push(took);
                report.check(
                    &format!("{name}, {label}"),
                    run,
                    compare_engines(&engine, &reference, "events", "q")?,
                );
                if cold && run == opts.runs {
                    // Keep this replayed state: the checkpoint below is taken from it.
                    let start = Instant::now();
                    let written = engine.checkpoint()?;
                    println!(
                        "  {name}: checkpoint of the replayed state {:.3} s, {} bytes",
                        start.elapsed().as_secs_f64(),
                        thousands(written.bytes)
                    );
                }
            }
            row(&format!("{name}, {label}"), &seconds);
        }
        let mut seconds = Vec::new();
        for run in 1..=opts.runs {
            let start = Instant::now();
            let engine = engine_at(Some(dir.path()), FsyncPolicy::Off)?;
            let took = start.elapsed().as_secs_f64();
            println!("  {name}, checkpoint covers all run {run}: open {took:.3} s");
            seconds.push(took);
            let mut problems = compare_engines(&engine, &reference, "events", "q")?;
            if run == opts.runs {
                // The open windows, too: end the input in both and compare what closes.
                let got = int_rows(&finish_with(&engine, schema, &[])?)?;
                let want = int_rows(&finish_with(&reference, schema, &[])?)?;
                if got != want || want.is_empty() {
                    problems.push(format!(
                        "at the end of input: {}",
                        describe_difference(&got, &want)
                    ));
                }
            }
            report.check(&format!("{name}, checkpoint"), run, problems);
        }
        row(&format!("{name}, checkpoint covers all (warm)"), &seconds);
    }
    Ok(table)
}

/// Drops the page cache of every file under `dir`: written back first, then dropped with
/// `dd iflag=nocache count=0` (`posix_fadvise(DONTNEED)` on the whole file).
fn evict(dir: &Path) -> BenchResult<()> {
    for entry in std::fs::read_dir(dir)? {
        let path = entry?.path();
        if path.is_dir() {
            evict(&path)?;
        } else {
            std::fs::File::open(&path)?.sync_all()?;
            let status = Command::new("dd")
                .arg(format!("if={}", path.display()))
                .args(["iflag=nocache", "count=0", "status=none"])
                .status()?;
            if !status.success() {
                return Err(format!("dd could not evict {}", path.display()).into());
            }
        }
    }
    Ok(())
}
