//! A tool that embeds saql's planner: validates a continuous query against stream
//! declarations and prints its plan, without a server.
//!
//! ```sh
//! cargo run --example embed                       # the built-in example
//! cargo run --example embed -- streams.sql 'SELECT ...' [--json]
//! ```

use std::process::ExitCode;

const STREAMS: &str = "CREATE STREAM proc_events (
    ts TIMESTAMP NOT NULL, host TEXT, pid BIGINT, exe TEXT, op TEXT, obj_type TEXT,
    obj_name TEXT, dst_ip TEXT, amount BIGINT,
    WATERMARK FOR ts AS ts - INTERVAL '5' SECOND)";

const QUERY: &str = "SELECT host, window_end, SUM(amount) AS sent
    FROM TUMBLE(proc_events, ts, INTERVAL '10' MINUTE)
    WHERE op = 'write' AND obj_type = 'ip'
    GROUP BY host, window_start, window_end
    HAVING SUM(amount) > 1000000";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let json = args.iter().any(|a| a == "--json");
    let positional: Vec<&String> = args.iter().filter(|a| !a.starts_with("--")).collect();
    let (streams, query) = match positional.as_slice() {
        [] => (STREAMS.to_string(), QUERY.to_string()),
        [file, query] => match std::fs::read_to_string(file) {
            Ok(text) => (text, query.to_string()),
            Err(e) => {
                eprintln!("{file}: {e}");
                return ExitCode::FAILURE;
            }
        },
        _ => {
            eprintln!("usage: embed [STREAMS.sql QUERY] [--json]");
            return ExitCode::FAILURE;
        }
    };
    let catalog = match saql::Catalog::from_sql(&streams) {
        Ok(c) => c,
        Err(e) => {
            eprintln!(
                "streams: {}",
                saql::error::WithSource {
                    error: &e,
                    source: &streams
                }
            );
            return ExitCode::FAILURE;
        }
    };
    match saql::plan(&query, &catalog) {
        Ok(plan) => {
            println!("{}", saql::explain(&plan, json));
            ExitCode::SUCCESS
        }
        Err(e) => {
            eprintln!(
                "query: [{}] {}",
                e.sqlstate(),
                saql::error::WithSource {
                    error: &e,
                    source: &query
                }
            );
            ExitCode::FAILURE
        }
    }
}
