//! `saql serve`: the Postgres-protocol server, optionally with the built-in demo.

use std::path::{Path, PathBuf};
use std::time::Duration;

use saql::sources::demo::{Attack, DemoGenerator};
use saql::time::EventTime;
use saql::{Engine, EngineConfig};

/// Runs the server until Ctrl-C.
pub fn serve(
    listen: String,
    config: EngineConfig,
    demo_queries: Option<PathBuf>,
) -> Result<(), Box<dyn std::error::Error>> {
    let runtime = tokio::runtime::Runtime::new()?;
    let data_dir = config.data_dir.clone().unwrap_or_default();
    runtime.block_on(async move {
        let engine = Engine::open(config)?;
        if let Some(dir) = &demo_queries {
            start_demo(&engine, dir).await?;
        }
        let listener = tokio::net::TcpListener::bind(&listen).await?;
        tracing::info!(
            "saql listening on {} (data in {}); connect with: psql -h {} -p {} -U saql saql",
            listener.local_addr()?,
            data_dir.display(),
            listener.local_addr()?.ip(),
            listener.local_addr()?.port()
        );
        let shutdown = async {
            let _ = tokio::signal::ctrl_c().await;
            tracing::info!("shutting down");
        };
        saql::server::run(listener, engine, shutdown).await?;
        Ok(())
    })
}

/// Declares the demo streams, registers the queries found in `dir`, and feeds the streams
/// with generated host activity in real time, injecting an attack every 20 seconds.
async fn start_demo(engine: &Engine, dir: &Path) -> Result<(), Box<dyn std::error::Error>> {
    for ddl in DemoGenerator::streams_ddl().split(';') {
        if ddl.trim().is_empty() {
            continue;
        }
        let ddl = ddl.replacen("CREATE STREAM", "CREATE STREAM IF NOT EXISTS", 1);
        engine.execute(&ddl).await?;
    }
    let mut files: Vec<PathBuf> = std::fs::read_dir(dir)
        .map(|rd| rd.filter_map(|e| e.ok().map(|e| e.path())).collect())
        .unwrap_or_default();
    files.retain(|p| p.extension().is_some_and(|e| e == "sql"));
    files.sort();
    for file in files {
        let text = std::fs::read_to_string(&file)?;
        let text = text
            .replace(
                "CREATE CONTINUOUS QUERY ",
                "CREATE CONTINUOUS QUERY IF NOT EXISTS ",
            )
            .replace("CREATE STREAM ", "CREATE STREAM IF NOT EXISTS ");
        match engine.execute(&text).await {
            Ok(_) => tracing::info!("registered {}", file.display()),
            Err(e) => tracing::warn!("skipping {}: {e}", file.display()),
        }
    }
    let engine = engine.clone();
    tokio::spawn(async move {
        let mut generator = DemoGenerator::new(42, 6);
        let attacks = [
            Attack::BruteForce,
            Attack::CpuSpike,
            Attack::NetworkOutlier,
            Attack::UnusualChild,
            Attack::DataExfiltration,
        ];
        let mut next_attack = 0usize;
        let mut from = EventTime::now();
        let mut ticks = 0u64;
        let mut interval = tokio::time::interval(Duration::from_millis(500));
        loop {
            interval.tick().await;
            ticks += 1;
            let to = EventTime::now();
            if ticks.is_multiple_of(40) {
                generator.inject(
                    attacks[next_attack % attacks.len()],
                    to.plus(Duration::from_millis(100)),
                );
                next_attack += 1;
            }
            let batches = match generator.generate(from, to) {
                Ok(b) => b,
                Err(e) => {
                    tracing::warn!("demo generator: {e}");
                    continue;
                }
            };
            from = to;
            let engine = engine.clone();
            let _ = tokio::task::spawn_blocking(move || {
                for (stream, batch) in batches {
                    if let Err(e) = engine.insert_batch(stream, batch) {
                        tracing::warn!("demo insert into {stream}: {e}");
                    }
                }
            })
            .await;
        }
    });
    Ok(())
}
