//! Authentication, roles and TLS (issue #11) against the real `saql serve` process on
//! 127.0.0.1: users written by `saql user add`, SCRAM-SHA-256 logins, role checks by
//! statement kind over the simple and extended protocols and COPY, TLS with a certificate
//! made in the test, `--require-tls`, and the refusal to serve a non-loopback address
//! without a users file.

#![allow(
    clippy::disallowed_methods,
    reason = "a test starts its own threads and tasks"
)]

use crate::pg_errors;

use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use futures::SinkExt;
use pg_errors::{code, message};
use pgwire::tokio::tokio_rustls::rustls;
use tokio_postgres::{Client, NoTls};

const BIN: &str = env!("CARGO_BIN_EXE_saql");

/// A `saql serve` child process with its own data directory.
struct Server {
    child: Child,
    addr: SocketAddr,
    _dir: tempfile::TempDir,
}

impl Server {
    fn start(flags: &[&str]) -> Server {
        let dir = tempfile::tempdir().unwrap();
        let addr = {
            let l = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
            l.local_addr().unwrap()
        };
        let child = Command::new(BIN)
            .args(["serve", "--listen", &addr.to_string(), "--workers", "1"])
            .arg("--data-dir")
            .arg(dir.path())
            .args(["--checkpoint-interval", "0"])
            .args(flags)
            .env("RUST_LOG", "error")
            .env_remove("SAQL_USERS")
            .stdout(Stdio::null())
            .stderr(Stdio::inherit())
            .spawn()
            .expect("saql starts");
        let server = Server {
            child,
            addr,
            _dir: dir,
        };
        server.wait_listening();
        server
    }

    /// Waits until the port accepts TCP connections (without speaking the protocol).
    fn wait_listening(&self) {
        let start = Instant::now();
        while std::net::TcpStream::connect(self.addr).is_err() {
            assert!(
                start.elapsed() < Duration::from_secs(30),
                "the server did not come up on {}",
                self.addr
            );
            std::thread::sleep(Duration::from_millis(50));
        }
    }

    fn conn_str(&self, user: &str, password: &str) -> String {
        format!(
            "host=127.0.0.1 port={} user={user} password={password} dbname=saql \
             connect_timeout=10",
            self.addr.port()
        )
    }

    async fn connect(&self, user: &str, password: &str) -> Result<Client, tokio_postgres::Error> {
        let (client, connection) =
            tokio_postgres::connect(&self.conn_str(user, password), NoTls).await?;
        tokio::spawn(async move {
            let _ = connection.await;
        });
        Ok(client)
    }

    async fn connect_tls(
        &self,
        user: &str,
        password: &str,
        root: &rcgen::Certificate,
    ) -> Result<Client, tokio_postgres::Error> {
        let mut roots = rustls::RootCertStore::empty();
        roots.add(root.der().clone()).unwrap();
        let config = rustls::ClientConfig::builder()
            .with_root_certificates(roots)
            .with_no_client_auth();
        let tls = tokio_postgres_rustls::MakeRustlsConnect::new(config);
        let conn = format!("{} sslmode=require", self.conn_str(user, password));
        let (client, connection) = tokio_postgres::connect(&conn, tls).await?;
        tokio::spawn(async move {
            let _ = connection.await;
        });
        Ok(client)
    }
}

impl Drop for Server {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// `saql user add NAME --role ROLE --users FILE` with the password on stdin.
fn user_add(users: &Path, name: &str, role: &str, password: &str) {
    let mut child = Command::new(BIN)
        .args(["user", "add", name, "--role", role, "--users"])
        .arg(users)
        .env_remove("SAQL_PASSWORD")
        .stdin(Stdio::piped())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    writeln!(child.stdin.take().unwrap(), "{password}").unwrap();
    let out = child.wait_with_output().unwrap();
    assert!(
        out.status.success(),
        "saql user add failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// A users file with alice (admin), wendy (writer) and rita (reader), written by
/// `saql user add`.
fn users_file(dir: &Path) -> PathBuf {
    let path = dir.join("users");
    user_add(&path, "alice", "admin", "alice-pw");
    user_add(&path, "wendy", "writer", "wendy-pw");
    user_add(&path, "rita", "reader", "rita-pw");
    path
}

/// `sql` fails with 42501 naming `role` and `kind`, over the simple and the extended
/// protocol.
async fn assert_denied(client: &Client, sql: &str, role: &str, kind: &str) {
    let e = client.simple_query(sql).await.unwrap_err();
    assert_eq!(code(&e), "42501", "{sql}: {e}");
    let m = message(&e);
    assert!(
        m.starts_with("permission denied") && m.contains(role) && m.contains(kind),
        "{sql}: {m}"
    );
    let e = client.execute(sql, &[]).await.unwrap_err();
    assert_eq!(code(&e), "42501", "{sql} (extended): {e}");
}

const EVENTS: &str = "CREATE STREAM events (ts TIMESTAMP NOT NULL, host TEXT, amount BIGINT, \
                      WATERMARK FOR ts AS ts - INTERVAL '1' SECOND)";
const INSERT: &str = "INSERT INTO events VALUES ('2024-01-01 00:00:01', 'a', 5)";

#[tokio::test]
async fn passwords_are_checked() {
    let dir = tempfile::tempdir().unwrap();
    let users = users_file(dir.path());
    let server = Server::start(&["--users", users.to_str().unwrap()]);

    let e = server.connect("alice", "wrong").await.unwrap_err();
    assert_eq!(code(&e), "28P01", "{e}");
    assert_eq!(
        message(&e),
        "password authentication failed for user \"alice\""
    );
    let e = server.connect("mallory", "alice-pw").await.unwrap_err();
    assert_eq!(code(&e), "28P01", "{e}");
    // A user from the file, but another user's password.
    let e = server.connect("rita", "alice-pw").await.unwrap_err();
    assert_eq!(code(&e), "28P01", "{e}");

    let alice = server.connect("alice", "alice-pw").await.unwrap();
    let rows = alice.query("SELECT 1 + 1", &[]).await.unwrap();
    assert_eq!(rows[0].get::<_, i64>(0), 2);

    // Re-adding a user replaces the password: the old one stops working.
    user_add(&users, "rita", "reader", "new-pw");
    let server = Server::start(&["--users", users.to_str().unwrap()]);
    let e = server.connect("rita", "rita-pw").await.unwrap_err();
    assert_eq!(code(&e), "28P01", "{e}");
    server.connect("rita", "new-pw").await.unwrap();
}

/// SIGHUP reads the users file again: a user added since can log in, a password changed
/// since is the one checked; a users file that no longer parses keeps the users before it.
#[tokio::test]
async fn users_file_reloads_on_sighup() {
    let dir = tempfile::tempdir().unwrap();
    let users = users_file(dir.path());
    let server = Server::start(&["--users", users.to_str().unwrap()]);
    let hangup = |server: &Server| {
        let status = Command::new("kill")
            .args(["-HUP", &server.child.id().to_string()])
            .status()
            .unwrap();
        assert!(status.success());
    };
    // Polls until a login succeeds (the reload is asynchronous), at most 10 s.
    async fn eventually(server: &Server, user: &str, password: &str) -> bool {
        let start = Instant::now();
        while start.elapsed() < Duration::from_secs(10) {
            if server.connect(user, password).await.is_ok() {
                return true;
            }
            tokio::time::sleep(Duration::from_millis(50)).await;
        }
        false
    }

    let e = server.connect("nora", "nora-pw").await.unwrap_err();
    assert_eq!(code(&e), "28P01", "{e}");
    user_add(&users, "nora", "reader", "nora-pw");
    user_add(&users, "rita", "reader", "changed-pw");
    // Not before the signal: the file is read at start and on SIGHUP only.
    let e = server.connect("nora", "nora-pw").await.unwrap_err();
    assert_eq!(code(&e), "28P01", "{e}");
    hangup(&server);
    assert!(
        eventually(&server, "nora", "nora-pw").await,
        "nora after SIGHUP"
    );
    let e = server.connect("rita", "rita-pw").await.unwrap_err();
    assert_eq!(code(&e), "28P01", "{e}");
    server.connect("rita", "changed-pw").await.unwrap();

    // A broken file is reported and the users stay.
    std::fs::write(&users, "this is not a users file\n").unwrap();
    hangup(&server);
    tokio::time::sleep(Duration::from_millis(300)).await;
    server.connect("nora", "nora-pw").await.unwrap();
    let mut server = server;
    assert!(
        server.child.try_wait().unwrap().is_none(),
        "the server is still up"
    );
}

#[tokio::test]
async fn password_from_the_environment() {
    let dir = tempfile::tempdir().unwrap();
    let users = dir.path().join("users");
    let out = Command::new(BIN)
        .args(["user", "add", "eve", "--role", "reader", "--users"])
        .arg(&users)
        .env("SAQL_PASSWORD", "from-env")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(
        out.status.success(),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    let text = std::fs::read_to_string(&users).unwrap();
    assert!(text.starts_with("eve reader SCRAM-SHA-256$4096:"), "{text}");
    assert!(
        !text.contains("from-env"),
        "the file holds the password: {text}"
    );
    let server = Server::start(&["--users", users.to_str().unwrap()]);
    server.connect("eve", "from-env").await.unwrap();

    // A bad role is refused, naming the roles.
    let out = Command::new(BIN)
        .args(["user", "add", "eve", "--role", "boss", "--users"])
        .arg(&users)
        .env("SAQL_PASSWORD", "x")
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("admin, writer or reader"), "{err}");
}

#[tokio::test]
async fn roles_limit_statements() {
    let dir = tempfile::tempdir().unwrap();
    let users = users_file(dir.path());
    let server = Server::start(&["--users", users.to_str().unwrap()]);
    let alice = server.connect("alice", "alice-pw").await.unwrap();
    let wendy = server.connect("wendy", "wendy-pw").await.unwrap();
    let rita = server.connect("rita", "rita-pw").await.unwrap();

    // Admin: DDL.
    alice.batch_execute(EVENTS).await.unwrap();
    alice
        .batch_execute("CREATE CONTINUOUS QUERY big AS SELECT host, amount FROM events")
        .await
        .unwrap();
    alice.batch_execute("CHECKPOINT").await.unwrap();

    // Reader: no DDL, no writes.
    assert_denied(&rita, "CREATE STREAM t (x INT)", "reader", "CREATE STREAM").await;
    assert_denied(&rita, "DROP STREAM events", "reader", "DROP STREAM").await;
    assert_denied(&rita, "DROP QUERY big", "reader", "DROP QUERY").await;
    assert_denied(&rita, INSERT, "reader", "INSERT").await;
    assert_denied(&rita, "CHECKPOINT", "reader", "CHECKPOINT").await;
    // On a connection of its own: after a refused COPY, tokio-postgres finds the next reply
    // unexpected (so it does after any failed COPY: a pgwire/saql COPY error-path issue, not
    // an auth one).
    let rita_copy = server.connect("rita", "rita-pw").await.unwrap();
    match rita_copy
        .copy_in::<_, bytes::Bytes>("COPY events FROM STDIN WITH (FORMAT csv)")
        .await
    {
        Ok(_) => panic!("a reader started a COPY"),
        Err(e) => assert_eq!(code(&e), "42501", "{e}"),
    }
    // Checked statement by statement in a multi-statement query.
    let e = rita
        .simple_query("SELECT 1; CREATE STREAM t (x INT)")
        .await
        .unwrap_err();
    assert_eq!(code(&e), "42501", "{e}");

    // Reader: reads, shows, subscribes.
    rita.simple_query("SHOW STREAMS").await.unwrap();
    rita.simple_query("SHOW QUERIES").await.unwrap();
    rita.query("SELECT * FROM events", &[]).await.unwrap();
    rita.simple_query("SET statement_timeout = 0")
        .await
        .unwrap();
    rita.batch_execute("BEGIN; DECLARE sub NO SCROLL CURSOR FOR SUBSCRIBE big")
        .await
        .unwrap();

    // Writer: INSERT and COPY, no DDL.
    assert_denied(&wendy, "DROP STREAM events", "writer", "DROP STREAM").await;
    assert_denied(&wendy, "CREATE STREAM t (x INT)", "writer", "CREATE STREAM").await;
    assert_denied(
        &wendy,
        "CREATE CONTINUOUS QUERY q2 AS SELECT host FROM events",
        "writer",
        "CREATE CONTINUOUS QUERY",
    )
    .await;
    wendy.execute(INSERT, &[]).await.unwrap();
    let sink = wendy
        .copy_in("COPY events FROM STDIN WITH (FORMAT csv)")
        .await
        .unwrap();
    futures::pin_mut!(sink);
    sink.send(bytes::Bytes::from("2024-01-01 00:00:02,b,7\n"))
        .await
        .unwrap();
    assert_eq!(sink.finish().await.unwrap(), 1);
    wendy.query("SELECT * FROM events", &[]).await.unwrap();

    // The reader's subscription sees what the writer wrote.
    let fetched = rita
        .simple_query("FETCH ALL FROM sub WITH (timeout = '5s')")
        .await
        .unwrap();
    assert!(
        fetched
            .iter()
            .any(|m| matches!(m, tokio_postgres::SimpleQueryMessage::Row(_))),
        "no rows fetched"
    );
    let rows = alice.query("SELECT host FROM events", &[]).await.unwrap();
    assert_eq!(rows.len(), 2);

    // Admin: drops.
    alice.batch_execute("DROP QUERY big").await.unwrap();
    alice.batch_execute("DROP STREAM events").await.unwrap();
}

#[tokio::test]
async fn without_users_loopback_clients_are_admin() {
    let server = Server::start(&[]);
    let client = server.connect("anyone", "").await.unwrap();
    client.batch_execute(EVENTS).await.unwrap();
    client.batch_execute("DROP STREAM events").await.unwrap();
}

#[test]
fn non_loopback_without_users_refuses_to_start() {
    let dir = tempfile::tempdir().unwrap();
    for listen in ["0.0.0.0:0", "[::]:0"] {
        let out = Command::new(BIN)
            .args(["serve", "--listen", listen, "--data-dir"])
            .arg(dir.path().join("data"))
            .env_remove("SAQL_USERS")
            .stdin(Stdio::null())
            .output()
            .unwrap();
        assert!(!out.status.success(), "{listen}: it started");
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains("without authentication")
                && err.contains("--users")
                && err.contains("saql user add"),
            "{listen}: {err}"
        );
    }
    // Refused before anything was created.
    assert!(!dir.path().join("data").exists());
}

#[test]
fn non_loopback_with_users_passes_the_check() {
    // Checked by the same rule the server applies, without serving on 0.0.0.0.
    let users = saql::server::auth::Users::default();
    let any: SocketAddr = "0.0.0.0:5433".parse().unwrap();
    assert!(saql::server::auth::check_listen(&any, Some(&users)).is_ok());
}

/// A self-signed certificate for 127.0.0.1 and localhost, written as PEM files.
fn certificate(dir: &Path) -> (rcgen::Certificate, PathBuf, PathBuf) {
    let certified =
        rcgen::generate_simple_self_signed(vec!["127.0.0.1".into(), "localhost".into()]).unwrap();
    let cert = dir.join("server.crt");
    let key = dir.join("server.key");
    std::fs::write(&cert, certified.cert.pem()).unwrap();
    std::fs::write(&key, certified.signing_key.serialize_pem()).unwrap();
    (certified.cert, cert, key)
}

#[tokio::test]
async fn tls_with_a_test_certificate() {
    let dir = tempfile::tempdir().unwrap();
    let users = users_file(dir.path());
    let (root, cert, key) = certificate(dir.path());
    let server = Server::start(&[
        "--users",
        users.to_str().unwrap(),
        "--tls-cert",
        cert.to_str().unwrap(),
        "--tls-key",
        key.to_str().unwrap(),
    ]);
    let alice = server
        .connect_tls("alice", "alice-pw", &root)
        .await
        .unwrap();
    let rows = alice.query("SELECT 40 + 2", &[]).await.unwrap();
    assert_eq!(rows[0].get::<_, i64>(0), 42);
    let e = server
        .connect_tls("alice", "wrong", &root)
        .await
        .unwrap_err();
    assert_eq!(code(&e), "28P01", "{e}");
    // Without --require-tls, plaintext clients are still served.
    server.connect("alice", "alice-pw").await.unwrap();
}

#[tokio::test]
async fn require_tls_refuses_plaintext() {
    let dir = tempfile::tempdir().unwrap();
    let users = users_file(dir.path());
    let (root, cert, key) = certificate(dir.path());
    let server = Server::start(&[
        "--users",
        users.to_str().unwrap(),
        "--tls-cert",
        cert.to_str().unwrap(),
        "--tls-key",
        key.to_str().unwrap(),
        "--require-tls",
    ]);
    let e = server.connect("alice", "alice-pw").await.unwrap_err();
    assert_eq!(code(&e), "28000", "{e}");
    assert!(message(&e).contains("requires TLS"), "{e}");
    let alice = server
        .connect_tls("alice", "alice-pw", &root)
        .await
        .unwrap();
    alice.simple_query("SELECT 1").await.unwrap();
}

#[test]
fn require_tls_needs_a_certificate() {
    let out = Command::new(BIN)
        .args(["serve", "--require-tls"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    assert!(!out.status.success());
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("--tls-cert"), "{err}");
}

/// Clients that never log in cannot lock anyone out: 300 TCP connections that send nothing
/// do not count against --max-connections (and are dropped after --authentication-timeout),
/// and readers holding every ordinary slot leave the reserved ones to the admin.
#[tokio::test]
async fn silent_connections_and_idle_readers_do_not_lock_the_admin_out() {
    let dir = tempfile::tempdir().unwrap();
    let users = users_file(dir.path());
    let server = Server::start(&[
        "--users",
        users.to_str().unwrap(),
        "--max-connections",
        "5",
        "--reserved-connections",
        "2",
        "--authentication-timeout",
        "2",
    ]);
    let mut silent: Vec<std::net::TcpStream> = (0..300)
        .map(|_| std::net::TcpStream::connect(server.addr).expect("a TCP connection"))
        .collect();
    let mut readers = Vec::new();
    for _ in 0..3 {
        readers.push(
            server
                .connect("rita", "rita-pw")
                .await
                .expect("a reader logs in"),
        );
    }
    // The ordinary slots are taken: another reader is refused, the admin is not.
    let e = server.connect("rita", "rita-pw").await.unwrap_err();
    assert_eq!(code(&e), "53300", "{e}");
    assert!(message(&e).contains("reserved for admins"), "{e}");
    let alice = server
        .connect("alice", "alice-pw")
        .await
        .expect("the admin logs in");
    let rows = alice.query("SELECT 1 + 1", &[]).await.unwrap();
    assert_eq!(rows[0].get::<_, i64>(0), 2);
    for r in &readers {
        r.simple_query("SELECT 1")
            .await
            .expect("readers are served");
    }
    // The silent connections are closed once the authentication timeout passes.
    let silent = tokio::task::spawn_blocking(move || {
        let s = &mut silent[0];
        s.set_read_timeout(Some(Duration::from_secs(20))).unwrap();
        let mut buf = [0u8; 16];
        std::io::Read::read(s, &mut buf)
    })
    .await
    .unwrap();
    assert!(
        matches!(silent, Ok(0)) || silent.is_err(),
        "a silent connection was not closed: {silent:?}"
    );
}

/// A sink's credentials are never shown back: SHOW SINKS masks the password in its URL (and
/// in what the target answered), and only an admin sees where it delivers and its errors.
#[tokio::test]
async fn sink_credentials_are_masked_and_targets_are_for_admins() {
    let dir = tempfile::tempdir().unwrap();
    let users = users_file(dir.path());
    let server = Server::start(&["--users", users.to_str().unwrap()]);
    let alice = server.connect("alice", "alice-pw").await.unwrap();
    alice
        .batch_execute(&format!(
            "{EVENTS}; CREATE CONTINUOUS QUERY big AS SELECT ts, host FROM events WHERE amount > 1;
             CREATE SINK out FROM big INTO POSTGRES
               (url = 'postgres://bob:Sup3rS3cret@127.0.0.1:1/alerts?sslpassword=Other5ecret',
                table = 'alerts', retry_initial_ms = '10')"
        ))
        .await
        .unwrap();
    alice.batch_execute(INSERT).await.unwrap();
    // Wait for the first failed delivery, so that last_error holds what the target said.
    let mut shown = show_sink(&alice).await;
    for _ in 0..100 {
        if shown.1.as_deref().is_some_and(|e| !e.is_empty()) {
            break;
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
        shown = show_sink(&alice).await;
    }
    let (definition, error) = shown;
    let definition = definition.expect("an admin sees the definition");
    assert!(definition.contains("127.0.0.1:1"), "{definition}");
    for secret in ["Sup3rS3cret", "Other5ecret"] {
        assert!(!definition.contains(secret), "{definition}");
        assert!(
            !error.clone().unwrap_or_default().contains(secret),
            "{error:?}"
        );
    }
    assert!(definition.contains("********"), "{definition}");
    let rita = server.connect("rita", "rita-pw").await.unwrap();
    assert_eq!(
        show_sink(&rita).await,
        (None, None),
        "a reader sees neither"
    );
    // The data directory is the server user's alone.
    use std::os::unix::fs::PermissionsExt;
    let mode = std::fs::metadata(server._dir.path())
        .unwrap()
        .permissions()
        .mode();
    assert_eq!(mode & 0o077, 0, "{mode:o}");
}

/// The definition and last error SHOW SINKS gives the (only) sink.
async fn show_sink(client: &Client) -> (Option<String>, Option<String>) {
    let rows = client.simple_query("SHOW SINKS").await.unwrap();
    rows.into_iter()
        .find_map(|m| match m {
            tokio_postgres::SimpleQueryMessage::Row(r) => Some((
                r.get("definition").map(str::to_string),
                r.get("last_error").map(str::to_string),
            )),
            _ => None,
        })
        .expect("the sink's row")
}

/// A session cannot take another user's role: `SET ROLE admin` once answered SET and changed
/// nothing; now it is refused with 42501 and the reader stays a reader.
#[tokio::test]
async fn set_role_cannot_change_a_sessions_role() {
    let dir = tempfile::tempdir().unwrap();
    let users = users_file(dir.path());
    let server = Server::start(&["--users", users.to_str().unwrap()]);
    let rita = server.connect("rita", "rita-pw").await.unwrap();
    for sql in [
        "SET ROLE alice",
        "SET ROLE admin",
        "SET SESSION AUTHORIZATION alice",
    ] {
        let e = rita.simple_query(sql).await.unwrap_err();
        assert_eq!(code(&e), "42501", "{sql}: {e}");
        assert!(message(&e).contains("permission denied to set role"), "{e}");
    }
    for sql in [
        "SET ROLE rita",
        "SET ROLE NONE",
        "SET SESSION AUTHORIZATION DEFAULT",
    ] {
        rita.simple_query(sql).await.expect(sql);
    }
    assert_denied(&rita, EVENTS, "reader", "CREATE").await;
}

/// SCRAM channel binding over TLS: psql with `channel_binding=require` logs in (it needs
/// SCRAM-SHA-256-PLUS, bound to the server's certificate); plaintext clients are offered
/// plain SCRAM-SHA-256 and still log in. Skipped without psql.
#[tokio::test]
async fn scram_channel_binding_over_tls() {
    if std::process::Command::new("psql")
        .arg("--version")
        .output()
        .is_err()
    {
        println!("skip: no psql");
        return;
    }
    let dir = tempfile::tempdir().unwrap();
    let users = users_file(dir.path());
    let (_root, cert, key) = certificate(dir.path());
    let server = Server::start(&[
        "--users",
        users.to_str().unwrap(),
        "--tls-cert",
        cert.to_str().unwrap(),
        "--tls-key",
        key.to_str().unwrap(),
    ]);
    let psql = |conn: String| {
        std::process::Command::new("psql")
            .arg(conn)
            .args(["-tAc", "SELECT 6 * 7"])
            .env("PGPASSWORD", "alice-pw")
            .env("PGCONNECT_TIMEOUT", "10")
            .output()
            .unwrap()
    };
    let base = format!(
        "host=127.0.0.1 port={} user=alice dbname=saql",
        server.addr.port()
    );
    for conn in [
        format!("{base} sslmode=require channel_binding=require"),
        format!("{base} sslmode=disable channel_binding=disable"),
        format!("{base} sslmode=require channel_binding=prefer"),
    ] {
        let out = psql(conn.clone());
        assert!(
            out.status.success() && String::from_utf8_lossy(&out.stdout).trim() == "42",
            "{conn}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
    }
    // Binding cannot be had without TLS: psql refuses before sending the password.
    let out = psql(format!("{base} sslmode=disable channel_binding=require"));
    assert!(!out.status.success());
}
