//! Whatever a client sends, saql answers with a result or an error, never a panic: random
//! statements built from SQL fragments and random bytes go through the parser, the planner and
//! the engine, random COPY data through the decoder, and random protocol frames through a real
//! server's wire front end. (The fuzz targets in `fuzz/` run the same for longer.)

#![allow(
    clippy::disallowed_methods,
    reason = "a test starts its own threads and tasks"
)]

use proptest::prelude::*;
use saql::sources::csv::{CopyDecoder, CopyOptions};
use saql::{Engine, EngineConfig};

const FRAGMENTS: &[&str] = &[
    "SELECT",
    "FROM",
    "WHERE",
    "GROUP BY",
    "HAVING",
    "TUMBLE(",
    "HOP(",
    "SESSION(",
    "s",
    "ts",
    "host",
    "amount",
    ",",
    "(",
    ")",
    "INTERVAL '1' MINUTE",
    "'x'",
    "1",
    "-",
    "*",
    "COUNT(*)",
    "SUM(amount)",
    "window_start",
    "window_end",
    "OUTLIER",
    "ZSCORE(2)",
    "ON",
    "INVARIANT",
    "SET",
    "TRAINING",
    "2 WINDOWS",
    "CREATE",
    "CONTINUOUS",
    "QUERY",
    "q",
    "AS",
    "STREAM",
    "WATERMARK",
    "FOR",
    "INSERT INTO s VALUES",
    "('2024-01-01', 'h', 1)",
    "SUBSCRIBE",
    "EXPLAIN",
    "OVER",
    "PARTITION BY",
    "ORDER BY",
    "LAG(amount)",
    "ROWS BETWEEN",
    "PRECEDING",
    "AND",
    "CURRENT ROW",
    ";",
    "NULL",
    "::BIGINT",
    "DROP",
    "SHOW",
    "STREAMS",
    "QUERIES",
    "'",
    "\"",
    "$1",
    "DECLARE",
    "CURSOR",
    "FETCH",
    "COPY",
    "STDIN",
    "9999999999999999999999",
    // Non-ASCII identifiers, literals and comments: text is sliced by byte offsets in places.
    "café",
    "\"naïve\"",
    "'日本語'",
    "'€'",
    "/* ünï */",
    "-- é\n",
    "FINAL(",
    "RUNNING(",
    "MATCH_RECOGNIZE (ORDER BY ts MEASURES",
    "PATTERN (a)",
    "DEFINE a AS",
];

fn statement() -> impl Strategy<Value = String> {
    prop_oneof![
        proptest::collection::vec(proptest::sample::select(FRAGMENTS), 1..20)
            .prop_map(|parts| parts.join(" ")),
        ".{0,80}",
    ]
}

proptest! {
    #![proptest_config(ProptestConfig::with_cases(300))]

    #[test]
    fn statements_never_panic(sql in statement()) {
        let engine = Engine::open(EngineConfig::default()).unwrap();
        engine
            .execute_blocking(
                "CREATE STREAM s (ts TIMESTAMP NOT NULL, host TEXT, amount BIGINT, \
                 WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)",
            )
            .unwrap();
        // Errors are fine; panics are not.
        let _ = saql::parse(&sql);
        let _ = engine.execute_blocking(&sql);
        let _ = engine.execute_blocking("INSERT INTO s VALUES ('2024-01-01 00:00:05', 'h', 5)");
        engine.finish();
    }

    #[test]
    fn copy_data_never_panics(data in proptest::collection::vec(any::<u8>(), 0..200), csv in any::<bool>(), split in 0usize..200) {
        let engine = Engine::open(EngineConfig::default()).unwrap();
        engine
            .execute_blocking("CREATE STREAM s (ts TIMESTAMP NOT NULL, host TEXT, amount BIGINT, ok BOOLEAN)")
            .unwrap();
        let schema = engine.stream_schema("s").unwrap();
        let options = if csv { CopyOptions::csv() } else { CopyOptions::text() };
        let Ok(mut decoder) = CopyDecoder::new(schema, vec![0, 1, 2, 3], options) else {
            return Ok(());
        };
        let cut = split.min(data.len());
        if decoder.feed(&data[..cut]).is_ok() && decoder.feed(&data[cut..]).is_ok() {
            if let Ok(batch) = decoder.finish() {
                engine.insert_batch("s", batch).unwrap();
            }
        }
    }
}

/// The wire front end: a server on 127.0.0.1, shared by the cases, fed random frames after a
/// valid startup message; afterwards it still answers `SELECT 1` on a new connection, and no
/// thread of it panicked.
#[cfg(feature = "server")]
mod wire {
    use std::io::{Read, Write};
    use std::net::{Shutdown, SocketAddr, TcpStream};
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::OnceLock;
    use std::time::Duration;

    use proptest::prelude::*;
    use saql::{Engine, EngineConfig};

    static PANICKED: AtomicBool = AtomicBool::new(false);

    fn server() -> SocketAddr {
        static ADDR: OnceLock<SocketAddr> = OnceLock::new();
        *ADDR.get_or_init(|| {
            let previous = std::panic::take_hook();
            std::panic::set_hook(Box::new(move |info| {
                // pgwire's decoders panic on some malformed messages; the server contains
                // that to the connection (08P01, see tests/adversary.rs). Any other panic
                // is ours.
                let trace = std::backtrace::Backtrace::force_capture().to_string();
                let in_pgwire = trace.contains("pgwire::messages");
                if !in_pgwire {
                    PANICKED.store(true, Ordering::SeqCst);
                    previous(info);
                }
            }));
            let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            let addr = listener.local_addr().unwrap();
            listener.set_nonblocking(true).unwrap();
            std::thread::spawn(move || {
                let runtime = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .thread_stack_size(saql::limits::THREAD_STACK_BYTES)
                    .enable_all()
                    .build()
                    .unwrap();
                runtime.block_on(async move {
                    let engine = Engine::open(EngineConfig::default()).unwrap();
                    engine
                        .execute_blocking(
                            "CREATE STREAM s (ts TIMESTAMP NOT NULL, host TEXT, amount BIGINT)",
                        )
                        .unwrap();
                    let config = saql::server::ServerConfig {
                        statement_timeout: Some(Duration::from_secs(1)),
                        ..saql::server::ServerConfig::default()
                    };
                    let listener = tokio::net::TcpListener::from_std(listener).unwrap();
                    saql::server::run_with(listener, engine, config, std::future::pending())
                        .await
                        .unwrap();
                });
            });
            addr
        })
    }

    /// A message: its type byte, then its length (right or wrong) and body.
    fn frame() -> impl Strategy<Value = Vec<u8>> {
        let kind = proptest::sample::select(b"QPBEDSHCdcfXFp\0".to_vec());
        let body = prop_oneof![
            proptest::collection::vec(any::<u8>(), 0..40),
            proptest::sample::select(vec![
                "SELECT 1\0",
                "COPY s FROM STDIN\0",
                "\0SELECT $1\0\0\0",
                "\0\0\0\0\0\0\0",
                "SUBSCRIBE nope\0",
                "S\0",
                "P\0",
            ])
            .prop_map(|s| s.as_bytes().to_vec()),
        ];
        (kind, body, any::<bool>(), any::<u32>()).prop_map(|(kind, body, right, len)| {
            let len = if right { body.len() as u32 + 4 } else { len };
            let mut out = vec![kind];
            out.extend_from_slice(&len.to_be_bytes());
            out.extend(body);
            out
        })
    }

    fn startup() -> Vec<u8> {
        let mut body = 196_608u32.to_be_bytes().to_vec();
        for s in ["user", "saql", "database", "saql", ""] {
            body.extend_from_slice(s.as_bytes());
            body.push(0);
        }
        let mut out = ((body.len() + 4) as u32).to_be_bytes().to_vec();
        out.extend(body);
        out
    }

    /// The server answers `SELECT 1` on a new connection, by the simple query protocol.
    fn answers(addr: SocketAddr) -> bool {
        let Ok(mut s) = TcpStream::connect(addr) else {
            return false;
        };
        let _ = s.set_read_timeout(Some(Duration::from_secs(10)));
        let mut out = startup();
        out.extend_from_slice(b"Q\0\0\0\x0dSELECT 1\0");
        if s.write_all(&out).is_err() {
            return false;
        }
        // Read until the DataRow holding "1" and the ReadyForQuery after it.
        let mut seen = Vec::new();
        let mut buf = [0u8; 4096];
        while let Ok(n) = s.read(&mut buf) {
            if n == 0 {
                break;
            }
            seen.extend_from_slice(&buf[..n]);
            let row = seen
                .windows(11)
                .position(|w| w == b"D\0\0\0\x0b\0\x01\0\0\0\x01");
            if let Some(at) = row {
                if seen[at..].contains(&b'Z') {
                    return true;
                }
            }
        }
        false
    }

    proptest! {
        #![proptest_config(ProptestConfig::with_cases(64))]

        #[test]
        fn wire_frames_never_panic(frames in proptest::collection::vec(frame(), 1..6)) {
            let addr = server();
            let mut s = TcpStream::connect(addr).unwrap();
            s.set_read_timeout(Some(Duration::from_secs(2))).unwrap();
            let mut out = startup();
            out.extend(frames.concat());
            let _ = s.write_all(&out);
            let _ = s.shutdown(Shutdown::Write);
            let mut sink = [0u8; 4096];
            while let Ok(n) = s.read(&mut sink) {
                if n == 0 {
                    break;
                }
            }
            prop_assert!(!PANICKED.load(Ordering::SeqCst), "a server thread panicked");
            prop_assert!(answers(addr), "the server no longer answers SELECT 1");
        }
    }
}
