//! The `saql` command line: `saql serve` runs the Postgres-protocol server.

use std::path::{Path, PathBuf};
use std::time::Duration;

use clap::{Parser, Subcommand};
use saql::sources::demo::{Attack, DemoGenerator};
use saql::time::EventTime;
use saql::{Engine, EngineConfig};

#[derive(Parser)]
#[command(
    name = "saql",
    version,
    about = "Streaming SQL for real-time anomaly detection"
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand)]
enum Command {
    /// Serve the Postgres wire protocol.
    Serve {
        /// Address to listen on.
        #[arg(long, env = "SAQL_LISTEN", default_value = "127.0.0.1:5433")]
        listen: String,
        /// Where the catalog is kept.
        #[arg(long, env = "SAQL_DATA_DIR", default_value = "saql-data")]
        data_dir: PathBuf,
        /// Recent rows kept per stream and per query for ad hoc SELECT.
        #[arg(long, default_value_t = 10_000)]
        retain_rows: usize,
        /// Feed built-in demo streams and register the queries in --queries.
        #[arg(long)]
        demo: bool,
        /// Directory of .sql files registered with --demo.
        #[arg(long, default_value = "queries")]
        queries: PathBuf,
    },
}

fn main() {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env().unwrap_or_else(|_| "info".into()),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    let result = match cli.command {
        Command::Serve {
            listen,
            data_dir,
            retain_rows,
            demo,
            queries,
        } => serve(listen, data_dir, retain_rows, demo.then_some(queries)),
    };
    if let Err(e) = result {
        eprintln!("saql: {e}");
        std::process::exit(1);
    }
}

fn serve(
    listen: String,
    data_dir: PathBuf,
    retain_rows: usize,
    demo_queries: Option<PathBuf>,
) -> Result<(), Box<dyn std::error::Error>> {
    let runtime = tokio::runtime::Runtime::new()?;
    runtime.block_on(async move {
        let engine = Engine::open(EngineConfig {
            data_dir: Some(data_dir.clone()),
            retain_rows,
        })?;
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
        let text = text.replacen(
            "CREATE CONTINUOUS QUERY",
            "CREATE CONTINUOUS QUERY IF NOT EXISTS",
            1,
        );
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
            if ticks % 40 == 0 {
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
