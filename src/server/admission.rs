//! How long a session lives: a client that does not log in within `--authentication-timeout`
//! (or is pushed out of a full start-up room, see [`super::slots`]) is disconnected, a
//! session idle past `--idle-session-timeout` is closed with 57P05, and sessions end at
//! shutdown (57P01 once idle, after a grace period for statements in flight). They speak just
//! enough of the protocol to send a FATAL ErrorResponse on a socket pgwire does not own.

use crate::error::sqlstate;
use std::io::Write;
use std::panic::AssertUnwindSafe;
use std::sync::Arc;
use std::time::Duration;

use futures::FutureExt;
use tokio::net::TcpStream;

use super::session::Session;

/// A FATAL ErrorResponse message with SQLSTATE `code`.
pub fn fatal(code: &str, message: &str) -> Vec<u8> {
    let mut body = Vec::new();
    for (field, value) in [
        (b'S', "FATAL"),
        (b'V', "FATAL"),
        (b'C', code),
        (b'M', message),
    ] {
        body.push(field);
        body.extend_from_slice(value.as_bytes());
        body.push(0);
    }
    body.push(0);
    let mut out = vec![b'E'];
    out.extend_from_slice(&(body.len() as u32 + 4).to_be_bytes());
    out.extend_from_slice(&body);
    out
}

/// Why a session is being ended by the server.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Ending {
    /// Idle past `--idle-session-timeout` (57P05).
    IdleTimeout(Duration),
    /// The server is shutting down and the session is idle (57P01).
    Shutdown,
    /// The server is shutting down and the session was still busy when the grace period
    /// ran out: its statement is abandoned.
    GraceOver,
    /// The client did not log in in time, or made room for a newer one.
    NoLogin,
}

/// How long a client may take to log in, and what tells it to give up its place earlier.
#[derive(Debug)]
pub struct LoginDeadline {
    /// Time from connecting to logging in.
    pub timeout: Duration,
    /// Completes when the start-up room needs this connection's place.
    pub evicted: tokio::sync::oneshot::Receiver<()>,
}

/// When and how the server ends a session: `closing` turns true when the server shuts down;
/// busy sessions then get `grace` to finish their statement (or COPY).
#[derive(Debug)]
pub struct Lifetime {
    /// Close the session once it is idle this long.
    pub idle_timeout: Option<Duration>,
    /// Turns true when the server starts shutting down.
    pub closing: tokio::sync::watch::Receiver<bool>,
    /// How long a busy session may go on after shutdown starts.
    pub grace: Duration,
    /// Until when the client must have logged in.
    pub login: LoginDeadline,
}

/// The longest wait for pgwire to finish writing a response once the session is told to end.
const DRAIN: Duration = Duration::from_secs(5);

/// Serves one connection with pgwire until the client leaves or the server ends the session:
/// when it has been idle past the idle timeout (57P05), or when the server shuts down (57P01
/// once the session is idle, as PostgreSQL's smart shutdown does; a statement or COPY in
/// flight may finish first, within the grace period). An idle session is ended by closing
/// the socket's read side, so that pgwire finishes what it is writing and stops at the next
/// read; the FATAL message follows.
///
/// pgwire 0.42's message decoders panic on some malformed messages (a Parse or Bind whose
/// counts promise more bytes than the message holds reads past it): such a panic is caught
/// here, for this connection only, and the client gets `08P01 invalid frontend message` and
/// a closed connection, as from PostgreSQL. Other sessions never notice.
pub async fn serve<H>(
    socket: TcpStream,
    tls: Option<super::tls::TlsAcceptor>,
    handlers: H,
    session: Arc<Session>,
    lifetime: Lifetime,
) -> std::io::Result<()>
where
    H: pgwire::api::PgWireServerHandlers,
{
    // A second handle on the socket, to write the goodbye that pgwire cannot.
    let std_socket = socket.into_std()?;
    let mut goodbye = std_socket.try_clone()?;
    let socket = TcpStream::from_std(std_socket)?;
    let served =
        AssertUnwindSafe(pgwire::tokio::process_socket(socket, tls, handlers)).catch_unwind();
    tokio::pin!(served);
    let ending = tokio::select! {
        r = &mut served => match r {
            Ok(r) => return r,
            Err(_) => {
                tracing::warn!("closed a connection whose message the protocol decoder could not read");
                say_goodbye(
                    &mut goodbye,
                    &session,
                    sqlstate::PROTOCOL_VIOLATION,
                    "invalid frontend message: it is shorter than its fields say",
                );
                return Ok(());
            }
        },
        ending = ending(&session, lifetime) => ending,
    };
    let (code, message) = match ending {
        Ending::NoLogin => {
            tracing::debug!("closed a connection that did not log in in time");
            let _ = goodbye.shutdown(std::net::Shutdown::Both);
            return Ok(());
        }
        Ending::GraceOver => {
            // Dropping pgwire's future abandons the statement; whatever it was writing may
            // be cut short, so no message follows.
            tracing::warn!("shutdown: closed a session still busy after the grace period");
            let _ = goodbye.shutdown(std::net::Shutdown::Both);
            return Ok(());
        }
        Ending::Shutdown => (
            sqlstate::ADMIN_SHUTDOWN,
            "terminating connection due to administrator command: the server is shutting down"
                .to_string(),
        ),
        Ending::IdleTimeout(limit) => (
            sqlstate::IDLE_SESSION_TIMEOUT,
            format!(
                "terminating connection due to idle-session timeout ({} s, \
                 --idle-session-timeout)",
                limit.as_secs_f64()
            ),
        ),
    };
    // pgwire finishes the response it may still be writing, then reads end of file and
    // returns; a client that sent nothing more gets the FATAL message after it.
    let _ = goodbye.shutdown(std::net::Shutdown::Read);
    if let Ok(Err(_)) = tokio::time::timeout(DRAIN, &mut served).await {
        tracing::warn!("closed a connection whose message the protocol decoder could not read");
    }
    say_goodbye(&mut goodbye, &session, code, &message);
    Ok(())
}

/// Writes a FATAL message on a socket pgwire has let go of, then closes it. Over TLS the
/// goodbye would have to be encrypted, which only pgwire can do: such a client sees the
/// connection close.
fn say_goodbye(socket: &mut std::net::TcpStream, session: &Session, code: &str, message: &str) {
    if !session.tls() {
        let _ = socket.write_all(&fatal(code, message));
    } else {
        tracing::debug!("{message}");
    }
    let _ = socket.shutdown(std::net::Shutdown::Both);
}

/// Waits until the server should end the session: idle past the idle timeout, or shut down
/// (at once if idle, else when it becomes idle or the grace period is over).
async fn ending(session: &Session, mut lifetime: Lifetime) -> Ending {
    let idle = async {
        let Some(limit) = lifetime.idle_timeout else {
            return std::future::pending::<Ending>().await;
        };
        let check = (limit / 4).clamp(Duration::from_millis(50), Duration::from_secs(1));
        loop {
            tokio::time::sleep(check).await;
            if session.idle_for().is_some_and(|idle| idle >= limit) {
                return Ending::IdleTimeout(limit);
            }
        }
    };
    let shutdown = async {
        if lifetime.closing.wait_for(|closing| *closing).await.is_err() {
            // The server is gone without saying it shuts down: nothing to wait for.
            return std::future::pending::<Ending>().await;
        }
        // A subscription never finishes by itself: it ends now (57P01), and the session
        // is idle after it.
        session.close();
        let until_idle = async {
            while session.idle_for().is_none() {
                tokio::time::sleep(Duration::from_millis(20)).await;
            }
        };
        match tokio::time::timeout(lifetime.grace, until_idle).await {
            Ok(()) => Ending::Shutdown,
            Err(_) => Ending::GraceOver,
        }
    };
    let login = async {
        let evicted = async {
            let _ = lifetime.login.evicted.await;
        };
        tokio::select! {
            () = evicted => {}
            () = tokio::time::sleep(lifetime.login.timeout) => {}
        }
        if session.is_logged_in() {
            return std::future::pending::<Ending>().await;
        }
        Ending::NoLogin
    };
    tokio::select! {
        e = idle => e,
        e = shutdown => e,
        e = login => e,
    }
}
