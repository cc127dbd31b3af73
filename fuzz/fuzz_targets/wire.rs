//! The wire front end: a real server on 127.0.0.1 (started once, in this process), and per
//! input a connection that sends a valid startup message, then the input's bytes as they
//! are (frames of any type, lengths and contents), then closes its side. The server must
//! answer or drop the connection; a panic anywhere in it aborts the process (libFuzzer's
//! panic hook), which the fuzzer reports, except the known decoder panics of pgwire that the
//! server contains (see `server`).
#![no_main]

use std::io::{Read, Write};
use std::net::{Shutdown, SocketAddr, TcpStream};
use std::sync::OnceLock;
use std::time::Duration;

use libfuzzer_sys::fuzz_target;
use saql::server::ServerConfig;
use saql::{Engine, EngineConfig};

/// The server's address; it runs on its own runtime for the life of the process.
fn server() -> SocketAddr {
    static ADDR: OnceLock<SocketAddr> = OnceLock::new();
    *ADDR.get_or_init(|| {
        // pgwire 0.42's decoders panic on some malformed messages; the server contains that
        // to the connection (08P01, tests/adversary.rs). Every other panic goes on to
        // libFuzzer's hook, which aborts and reports it.
        let fuzzer_hook = std::panic::take_hook();
        std::panic::set_hook(Box::new(move |info| {
            let trace = std::backtrace::Backtrace::force_capture().to_string();
            if !trace.contains("pgwire::messages") {
                fuzzer_hook(info);
            }
        }));
        let listener = std::net::TcpListener::bind("127.0.0.1:0").expect("a port");
        let addr = listener.local_addr().expect("its address");
        listener.set_nonblocking(true).expect("non-blocking");
        std::thread::spawn(move || {
            let runtime = tokio::runtime::Builder::new_multi_thread()
                .worker_threads(2)
                .thread_stack_size(saql::limits::THREAD_STACK_BYTES)
                .enable_all()
                .build()
                .expect("a runtime");
            runtime.block_on(async move {
                let engine = Engine::open(EngineConfig {
                    max_result_rows: 10_000,
                    max_copy_bytes: 1 << 20,
                    ..EngineConfig::default()
                })
                .expect("an engine");
                engine
                    .execute_blocking(
                        "CREATE STREAM s (ts TIMESTAMP NOT NULL, host TEXT, amount BIGINT, \
                         WATERMARK FOR ts AS ts)",
                    )
                    .expect("the stream");
                let config = ServerConfig {
                    statement_timeout: Some(Duration::from_secs(1)),
                    ..ServerConfig::default()
                };
                let listener = tokio::net::TcpListener::from_std(listener).expect("a listener");
                saql::server::run_with(listener, engine, config, std::future::pending())
                    .await
                    .expect("the server runs");
            });
        });
        addr
    })
}

/// A protocol 3.0 startup message for user and database `saql`.
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

fuzz_target!(|data: &[u8]| {
    let addr = server();
    let mut socket = loop {
        match TcpStream::connect(addr) {
            Ok(s) => break s,
            // The server is still starting.
            Err(_) => std::thread::sleep(Duration::from_millis(10)),
        }
    };
    let _ = socket.set_read_timeout(Some(Duration::from_secs(2)));
    let _ = socket.write_all(&startup());
    let _ = socket.write_all(data);
    let _ = socket.shutdown(Shutdown::Write);
    // Whatever it answers, until it closes (or a statement or COPY still waits: move on).
    let mut sink = [0u8; 8192];
    while let Ok(n) = socket.read(&mut sink) {
        if n == 0 {
            break;
        }
    }
});
