//! Who may connect and what they may run: users and their roles from a users file, checked
//! with SCRAM-SHA-256 at startup, and the role a statement needs, checked where statements
//! are dispatched. Without a users file every client is `admin` (the server then only
//! listens on loopback, see [`check_listen`]).
//!
//! The users file has one user a line, `NAME ROLE VERIFIER`, where the verifier is
//! PostgreSQL's `SCRAM-SHA-256$<iterations>:<salt>$<StoredKey>:<ServerKey>` (base64): the
//! file never holds a password. `#` starts a comment line.

use crate::error::sqlstate;
use crate::server::setup::{LineError, SetupError};
use std::collections::HashMap;
use std::fmt::{self, Debug};
use std::net::SocketAddr;
use std::path::Path;
use std::str::FromStr;
use std::sync::{Arc, RwLock};
use std::time::Instant;

use async_trait::async_trait;
use base64::engine::general_purpose::STANDARD;
use base64::Engine as _;
use datafusion::sql::sqlparser::ast as sq;
use futures::sink::Sink;
use pgwire::api::auth::driver::{AuthDriver, AuthOutcome};
use pgwire::api::auth::mechanism::AuthMechanismFactory;
use pgwire::api::auth::sasl::scram::{gen_salted_password, ScramAuth, ScramSecret};
use pgwire::api::auth::sasl::SaslMechanisms;
use pgwire::api::auth::{
    protocol_negotiation, save_startup_parameters_to_metadata, AuthSource,
    DefaultServerParameterProvider, LoginInfo, Password, StartupHandler,
};
use pgwire::api::{ClientInfo, ConnectionManager};
use pgwire::error::{ErrorInfo, PgWireError, PgWireResult};
use pgwire::messages::{PgWireBackendMessage, PgWireFrontendMessage};

use super::handler::Connection;
use super::session::Session;
use crate::sql::Statement;

/// SCRAM iterations of the verifiers `saql user add` writes (PostgreSQL's default).
pub const SCRAM_ITERATIONS: usize = 4096;

/// What a user may do. Each role can do everything the roles below it can.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum Role {
    /// SELECT, SUBSCRIBE, SHOW, EXPLAIN, DECLARE/FETCH/CLOSE, SET.
    Reader,
    /// What a reader can, plus INSERT and COPY FROM STDIN.
    Writer,
    /// Everything, including CREATE, DROP and CHECKPOINT.
    Admin,
}

impl fmt::Display for Role {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Role::Reader => "reader",
            Role::Writer => "writer",
            Role::Admin => "admin",
        })
    }
}

impl FromStr for Role {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s.to_ascii_lowercase().as_str() {
            "reader" => Ok(Role::Reader),
            "writer" => Ok(Role::Writer),
            "admin" => Ok(Role::Admin),
            _ => Err(format!("unknown role \"{s}\": use admin, writer or reader")),
        }
    }
}

/// A SCRAM-SHA-256 verifier, as PostgreSQL stores it in `pg_authid.rolpassword`.
#[derive(Clone, PartialEq, Eq)]
pub struct Verifier {
    iterations: usize,
    salt: Vec<u8>,
    stored_key: Vec<u8>,
    server_key: Vec<u8>,
}

impl Debug for Verifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Verifier")
            .field("iterations", &self.iterations)
            .finish_non_exhaustive()
    }
}

impl Verifier {
    /// The verifier of `password` with a fresh random salt.
    pub fn new(password: &str) -> Self {
        let salt: [u8; 16] = rand::random();
        Self::with_salt(password, &salt, SCRAM_ITERATIONS)
    }

    fn with_salt(password: &str, salt: &[u8], iterations: usize) -> Self {
        let salted = gen_salted_password(password, salt, iterations);
        match ScramSecret::verifier_from_salted_password(salt.to_vec(), salted, iterations) {
            ScramSecret::Verifier {
                salt,
                iterations,
                stored_key,
                server_key,
            } => Verifier {
                iterations,
                salt,
                stored_key,
                server_key,
            },
            ScramSecret::SaltedPassword { .. } => unreachable!("pgwire returns a verifier"),
        }
    }

    /// A verifier no password matches: unknown users go through the same exchange as
    /// known ones and fail at the end, so a client cannot tell which names exist.
    fn impossible() -> Self {
        Verifier {
            iterations: SCRAM_ITERATIONS,
            salt: rand::random::<[u8; 16]>().to_vec(),
            stored_key: rand::random::<[u8; 32]>().to_vec(),
            server_key: rand::random::<[u8; 32]>().to_vec(),
        }
    }

    fn secret(&self) -> ScramSecret {
        ScramSecret::Verifier {
            salt: self.salt.clone(),
            iterations: self.iterations,
            stored_key: self.stored_key.clone(),
            server_key: self.server_key.clone(),
        }
    }
}

impl fmt::Display for Verifier {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(
            f,
            "SCRAM-SHA-256${}:{}${}:{}",
            self.iterations,
            STANDARD.encode(&self.salt),
            STANDARD.encode(&self.stored_key),
            STANDARD.encode(&self.server_key)
        )
    }
}

impl FromStr for Verifier {
    type Err = String;

    fn from_str(s: &str) -> Result<Self, Self::Err> {
        let bad = || format!("not a SCRAM-SHA-256 verifier: \"{s}\"");
        let rest = s.strip_prefix("SCRAM-SHA-256$").ok_or_else(bad)?;
        let (params, keys) = rest.split_once('$').ok_or_else(bad)?;
        let (iterations, salt) = params.split_once(':').ok_or_else(bad)?;
        let (stored_key, server_key) = keys.split_once(':').ok_or_else(bad)?;
        let b64 = |t: &str| STANDARD.decode(t).map_err(|_| bad());
        let iterations: usize = iterations.parse().map_err(|_| bad())?;
        let v = Verifier {
            iterations,
            salt: b64(salt)?,
            stored_key: b64(stored_key)?,
            server_key: b64(server_key)?,
        };
        if v.iterations == 0 || v.stored_key.len() != 32 || v.server_key.len() != 32 {
            return Err(bad());
        }
        Ok(v)
    }
}

/// One user of the users file.
#[derive(Debug, Clone)]
pub struct User {
    /// What the user may do.
    pub role: Role,
    /// How the user's password is checked.
    pub verifier: Verifier,
}

/// The users of a running server: those of the users file as last read. A reload (SIGHUP)
/// replaces them for connections that start afterwards; sessions already logged in keep the
/// role they had, as PostgreSQL's sessions do over a reload.
#[derive(Debug, Clone)]
pub struct UsersFile {
    current: Arc<RwLock<Arc<Users>>>,
}

impl UsersFile {
    /// The users as first read.
    pub fn new(users: Users) -> Self {
        UsersFile {
            current: Arc::new(RwLock::new(Arc::new(users))),
        }
    }

    /// The users now.
    pub fn current(&self) -> Arc<Users> {
        self.current
            .read()
            .unwrap_or_else(|e| e.into_inner())
            .clone()
    }

    /// Replaces the users, for connections that start from now on.
    pub fn replace(&self, users: Users) {
        *self.current.write().unwrap_or_else(|e| e.into_inner()) = Arc::new(users);
    }
}

/// The users allowed to connect, read from a users file.
#[derive(Debug, Clone, Default)]
pub struct Users {
    users: HashMap<String, User>,
}

impl Users {
    /// Reads a users file.
    pub fn load(path: &Path) -> Result<Self, SetupError> {
        let text = std::fs::read_to_string(path).map_err(|source| SetupError::Read {
            what: "users file",
            path: path.to_path_buf(),
            source,
        })?;
        Self::parse(&text).map_err(|error| SetupError::UsersFile {
            path: path.to_path_buf(),
            error,
        })
    }

    /// Parses the text of a users file.
    pub fn parse(text: &str) -> Result<Self, LineError> {
        let mut users = HashMap::new();
        for (i, line) in text.lines().enumerate() {
            let line = line.trim();
            if line.is_empty() || line.starts_with('#') {
                continue;
            }
            let at = |message: String| LineError {
                line: i + 1,
                message,
            };
            let fields: Vec<&str> = line.split_whitespace().collect();
            let [name, role, verifier] = fields[..] else {
                return Err(at(
                    "expected NAME ROLE SCRAM-SHA-256$... (see saql user add)".into(),
                ));
            };
            let user = User {
                role: role.parse().map_err(at)?,
                verifier: verifier.parse().map_err(at)?,
            };
            if users.insert(name.to_string(), user).is_some() {
                return Err(at(format!("user \"{name}\" appears twice")));
            }
        }
        Ok(Users { users })
    }

    /// The user called `name`.
    pub fn get(&self, name: &str) -> Option<&User> {
        self.users.get(name)
    }

    /// How many users there are.
    pub fn len(&self) -> usize {
        self.users.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.users.is_empty()
    }
}

/// Adds `name` to the users file at `path` (creating it), or replaces its line: role and a
/// verifier of `password` with a fresh salt. Other lines, comments included, are kept.
pub fn add_user(path: &Path, name: &str, role: Role, password: &str) -> Result<(), SetupError> {
    if name.is_empty() || name.chars().any(|c| c.is_whitespace() || c == '#') {
        return Err(SetupError::BadUser(format!(
            "invalid user name \"{name}\": it must be non-empty, without spaces or '#'"
        )));
    }
    if password.is_empty() {
        return Err(SetupError::BadUser(
            "empty password: give one on stdin or in SAQL_PASSWORD".into(),
        ));
    }
    let old = match std::fs::read_to_string(path) {
        Ok(text) => text,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => String::new(),
        Err(source) => {
            return Err(SetupError::Read {
                what: "users file",
                path: path.to_path_buf(),
                source,
            })
        }
    };
    Users::parse(&old).map_err(|error| SetupError::UsersFile {
        path: path.to_path_buf(),
        error,
    })?;
    let entry = format!("{name} {role} {}", Verifier::new(password));
    let mut replaced = false;
    let mut text = String::new();
    for line in old.lines() {
        if line.split_whitespace().next() == Some(name) && !line.trim_start().starts_with('#') {
            text.push_str(&entry);
            replaced = true;
        } else {
            text.push_str(line);
        }
        text.push('\n');
    }
    if !replaced {
        text.push_str(&entry);
        text.push('\n');
    }
    write_private(path, &text).map_err(|source| SetupError::Write {
        path: path.to_path_buf(),
        source,
    })
}

/// Writes `text` to `path` through a temporary file renamed over it, readable by the
/// owner only.
fn write_private(path: &Path, text: &str) -> std::io::Result<()> {
    use std::io::Write;
    let tmp = path.with_extension("tmp");
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    {
        use std::os::unix::fs::OpenOptionsExt;
        options.mode(0o600);
    }
    let mut file = options.open(&tmp)?;
    file.write_all(text.as_bytes())?;
    file.sync_all()?;
    std::fs::rename(&tmp, path)
}

/// Refuses to serve a non-loopback address without a users file: every client would be an
/// admin without a password.
pub fn check_listen(addr: &SocketAddr, users: Option<&Users>) -> Result<(), SetupError> {
    if users.is_none() && !addr.ip().is_loopback() {
        return Err(SetupError::Unauthenticated(*addr));
    }
    Ok(())
}

/// The kind of a statement as named in errors, and the least role that may run it.
pub fn required_role(stmt: &Statement) -> (Role, &'static str) {
    match stmt {
        Statement::CreateStream(_) => (Role::Admin, "CREATE STREAM"),
        Statement::DropStream { .. } => (Role::Admin, "DROP STREAM"),
        Statement::AlterStream { .. } => (Role::Admin, "ALTER STREAM"),
        Statement::AlterQuery(_) => (Role::Admin, "ALTER CONTINUOUS QUERY"),
        Statement::CreateQuery(_) => (Role::Admin, "CREATE CONTINUOUS QUERY"),
        Statement::DropQuery { .. } => (Role::Admin, "DROP QUERY"),
        Statement::Checkpoint => (Role::Admin, "CHECKPOINT"),
        Statement::CopyFrom(_) => (Role::Writer, "COPY FROM"),
        Statement::CopyTo(_) => (Role::Reader, "COPY TO"),
        Statement::CreateSource(_) => (Role::Admin, "CREATE SOURCE"),
        Statement::DropSource { .. } => (Role::Admin, "DROP SOURCE"),
        Statement::CreateSink(_) => (Role::Admin, "CREATE SINK"),
        Statement::DropSink { .. } => (Role::Admin, "DROP SINK"),
        Statement::CreateTable(_) => (Role::Admin, "CREATE TABLE"),
        Statement::DropTable { .. } => (Role::Admin, "DROP TABLE"),
        Statement::CreateView(_) => (Role::Admin, "CREATE VIEW"),
        Statement::DropView { .. } => (Role::Admin, "DROP VIEW"),
        Statement::ShowTables
        | Statement::ShowStreams
        | Statement::ShowQueries
        | Statement::ShowSources
        | Statement::ShowSinks => (Role::Reader, "SHOW"),
        Statement::Subscribe { .. } => (Role::Reader, "SUBSCRIBE"),
        Statement::DeclareCursor { target, .. } => {
            let (role, kind) = required_role(target);
            (role.max(Role::Reader), kind)
        }
        Statement::Fetch { .. } => (Role::Reader, "FETCH"),
        Statement::CloseCursor { .. } => (Role::Reader, "CLOSE"),
        Statement::Explain { .. } => (Role::Reader, "EXPLAIN"),
        Statement::Sql(s) => sql_required_role(s),
    }
}

fn sql_required_role(stmt: &sq::Statement) -> (Role, &'static str) {
    use sq::Statement as S;
    match stmt {
        S::Query(_) => (Role::Reader, "SELECT"),
        S::Explain { .. } | S::ExplainTable { .. } => (Role::Reader, "EXPLAIN"),
        S::ShowVariable { .. }
        | S::ShowVariables { .. }
        | S::ShowTables { .. }
        | S::ShowColumns { .. }
        | S::ShowFunctions { .. }
        | S::ShowStatus { .. } => (Role::Reader, "SHOW"),
        // Session state: any user may change their own.
        S::Set(_)
        | S::StartTransaction { .. }
        | S::Commit { .. }
        | S::Rollback { .. }
        | S::Discard { .. }
        | S::Deallocate { .. }
        | S::Close { .. } => (Role::Reader, "SET"),
        // A prepared statement is checked when prepared; executing it is the session's own.
        S::Prepare { statement, .. } => sql_required_role(statement),
        S::Execute { .. } => (Role::Reader, "EXECUTE"),
        S::Insert(_) => (Role::Writer, "INSERT"),
        S::Copy { .. } => (Role::Writer, "COPY"),
        S::CreateTable(_) | S::CreateView(_) | S::CreateIndex(_) | S::CreateSchema { .. } => {
            (Role::Admin, "CREATE")
        }
        S::Drop { .. } => (Role::Admin, "DROP"),
        // Rows of reference tables: a writer's, like INSERT.
        S::Delete(_) => (Role::Writer, "DELETE"),
        S::Update(_) => (Role::Writer, "UPDATE"),
        S::Truncate(_) => (Role::Writer, "TRUNCATE"),
        // Anything else (ALTER, GRANT, ...) is an administrator's.
        _ => (Role::Admin, "this statement"),
    }
}

/// Ok when `role` may run `stmt`; else `42501 permission denied` naming both.
pub fn authorize(role: Role, stmt: &Statement) -> PgWireResult<()> {
    let (needed, kind) = required_role(stmt);
    if role >= needed {
        return Ok(());
    }
    let message = format!(
        "permission denied for {kind}: role \"{role}\" may not run it (needs \"{needed}\")"
    );
    Err(PgWireError::UserError(Box::new(ErrorInfo::new(
        "ERROR".into(),
        sqlstate::INSUFFICIENT_PRIVILEGE.into(),
        message,
    ))))
}

/// The role of the connection's user: admin without a users file, else the role of the
/// user it authenticated as.
pub fn role_of<C: ClientInfo + ?Sized>(users: Option<&Users>, client: &C) -> Role {
    match users {
        None => Role::Admin,
        Some(users) => client
            .metadata()
            .get(pgwire::api::METADATA_USER)
            .and_then(|name| users.get(name))
            .map_or(Role::Reader, |u| u.role),
    }
}

/// Hands pgwire the verifier of the user a client names.
#[derive(Debug)]
struct UserSource(Arc<Users>);

#[async_trait]
impl AuthSource for UserSource {
    async fn get_password(&self, login: &LoginInfo) -> PgWireResult<Password> {
        // Only SCRAM is offered, which asks for the secret below.
        Err(PgWireError::InvalidPassword(
            login.user().unwrap_or_default().to_owned(),
        ))
    }

    async fn get_scram_secret(&self, login: &LoginInfo) -> PgWireResult<(ScramSecret, Option<()>)> {
        let verifier = login
            .user()
            .and_then(|name| self.0.get(name))
            .map_or_else(Verifier::impossible, |u| u.verifier.clone());
        Ok((verifier.secret(), None))
    }
}

/// The startup handler of a connection: trust (no users file) or SCRAM-SHA-256, and, with
/// `--require-tls`, a refusal of clients that did not ask for TLS.
pub struct Startup {
    method: Method,
    users: Option<Arc<Users>>,
    require_tls: bool,
    session: Arc<Session>,
    slots: Option<Arc<super::slots::Slots>>,
}

enum Method {
    /// No users file: everyone is admin without a password.
    Trust(Connection),
    /// Users from a file, authenticated with SCRAM-SHA-256: pgwire's driver runs the
    /// exchange, and the client is let in (or refused for want of a slot) by us.
    Scram {
        driver: Box<AuthDriver<Arc<DefaultServerParameterProvider>>>,
        mechanisms: SaslMechanisms,
        /// Over TLS, with a certificate: SCRAM-SHA-256-PLUS too (channel binding).
        bound: Option<SaslMechanisms>,
    },
}

impl Startup {
    /// The startup handler for `users` (None: trust); `require_tls` refuses plaintext
    /// clients with 28000. Whether the client uses TLS is recorded in `session`.
    pub fn new(
        connection: &Connection,
        users: Option<Arc<Users>>,
        manager: Arc<ConnectionManager>,
        require_tls: bool,
        session: Arc<Session>,
    ) -> Self {
        let method = match users.clone() {
            None => Method::Trust(connection.clone()),
            Some(users) => {
                let scram = || {
                    let mut scram = ScramAuth::new(Arc::new(UserSource(users.clone())));
                    scram.set_iterations(SCRAM_ITERATIONS);
                    scram
                };
                // Channel binding is offered only where there is a channel to bind: to
                // clients on TLS (RFC 5802 advertises -PLUS only then).
                let bound = connection.cert_pem.as_ref().and_then(|pem| {
                    let mut plus = scram();
                    match plus.configure_certificate(pem) {
                        Ok(()) => Some(SaslMechanisms::new(vec![]).with_mechanism(Arc::new(plus))),
                        Err(e) => {
                            tracing::warn!("no SCRAM channel binding: {e}");
                            None
                        }
                    }
                });
                // The same parameters (server_version naming saql, DateStyle, TimeZone) as
                // without users.
                let driver = AuthDriver::new(Arc::new(super::startup::parameters()))
                    .with_connection_manager(manager);
                Method::Scram {
                    driver: Box::new(driver),
                    mechanisms: SaslMechanisms::new(vec![]).with_mechanism(Arc::new(scram())),
                    bound,
                }
            }
        };
        Startup {
            method,
            users,
            require_tls,
            session,
            slots: connection.slots.clone(),
        }
    }

    /// Takes the connection slot of a client that logged in (FATAL 53300 when none is left
    /// for its role) and takes it out of the start-up room.
    fn take_slot(&self, admin: bool) -> PgWireResult<()> {
        let slot = match &self.slots {
            Some(slots) => Some(slots.take(admin).map_err(|e| {
                PgWireError::UserError(Box::new(ErrorInfo::new(
                    "FATAL".into(),
                    e.sqlstate().into(),
                    e.to_string(),
                )))
            })?),
            None => None,
        };
        self.session.logged_in(slot);
        Ok(())
    }
}

#[async_trait]
impl StartupHandler for Startup {
    async fn on_startup<C>(
        &self,
        client: &mut C,
        message: PgWireFrontendMessage,
    ) -> PgWireResult<()>
    where
        C: ClientInfo + Sink<PgWireBackendMessage> + Unpin + Send + Sync,
        C::Error: Debug,
        PgWireError: From<<C as Sink<PgWireBackendMessage>>::Error>,
    {
        let startup = matches!(message, PgWireFrontendMessage::Startup(_));
        if startup && client.is_secure() {
            self.session.set_tls();
        }
        if self.require_tls && startup && !client.is_secure() {
            return Err(PgWireError::UserError(Box::new(ErrorInfo::new(
                "FATAL".into(),
                sqlstate::INVALID_AUTHORIZATION_SPECIFICATION.into(),
                "this server requires TLS (--require-tls): connect with sslmode=require".into(),
            ))));
        }
        let result = match &self.method {
            Method::Trust(c) => {
                // Everyone is admin and nothing is verified: the slot is taken before the
                // server says the client is in.
                if startup {
                    self.take_slot(true)?;
                }
                c.on_startup(client, message).await
            }
            Method::Scram {
                driver,
                mechanisms,
                bound,
            } => {
                let outcome = match message {
                    PgWireFrontendMessage::Startup(ref startup) => {
                        protocol_negotiation(client, startup).await?;
                        save_startup_parameters_to_metadata(client, startup);
                        let offered = match bound {
                            Some(plus) if client.is_secure() => plus,
                            _ => mechanisms,
                        };
                        driver.begin_authentication(client, offered.create()).await
                    }
                    PgWireFrontendMessage::PasswordMessageFamily(m) => {
                        driver.advance_authentication(client, m).await
                    }
                    _ => Ok(AuthOutcome::InProgress),
                };
                match outcome {
                    Ok(AuthOutcome::Authenticated { final_message, .. }) => {
                        super::auth_delay::failed_logins().succeeded(client.socket_addr().ip());
                        // The password is right: a slot for the user's role, before the
                        // client is told it is in (as PostgreSQL refuses 53300).
                        let role = role_of(self.users.as_deref(), client);
                        self.take_slot(role == Role::Admin)?;
                        driver.complete_authentication(client, final_message).await
                    }
                    Ok(AuthOutcome::InProgress) => Ok(()),
                    Err(e) => Err(e),
                }
            }
        };
        match result {
            // pgwire does not know the user at the end of the SCRAM exchange: name it, as
            // PostgreSQL does.
            Err(PgWireError::InvalidPassword(_)) => {
                let ip = client.socket_addr().ip();
                let delay = super::auth_delay::failed_logins().failed(ip, Instant::now());
                tokio::time::sleep(delay).await;
                let user = client
                    .metadata()
                    .get(pgwire::api::METADATA_USER)
                    .cloned()
                    .unwrap_or_default();
                Err(PgWireError::UserError(Box::new(ErrorInfo::new(
                    "FATAL".into(),
                    sqlstate::INVALID_PASSWORD.into(),
                    format!("password authentication failed for user \"{user}\""),
                ))))
            }
            other => other,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql;

    fn role_for(text: &str) -> Role {
        let stmt = sql::parse(text).unwrap().remove(0);
        required_role(&stmt).0
    }

    #[test]
    fn verifier_round_trips_and_matches_postgres_format() {
        let v = Verifier::new("pencil");
        let text = v.to_string();
        assert!(text.starts_with("SCRAM-SHA-256$4096:"), "{text}");
        assert_eq!(text.parse::<Verifier>().unwrap(), v);
        assert!("SCRAM-SHA-256$4096:abc".parse::<Verifier>().is_err());
        assert!("md5abc".parse::<Verifier>().is_err());
    }

    #[test]
    fn users_file_parses_and_rejects_bad_lines() {
        let v = Verifier::new("x");
        let text = format!("# users\nalice admin {v}\n\nbob reader {v}\n");
        let users = Users::parse(&text).unwrap();
        assert_eq!(users.get("alice").unwrap().role, Role::Admin);
        assert_eq!(users.get("bob").unwrap().role, Role::Reader);
        assert!(users.get("carol").is_none());
        let err = Users::parse(&format!("alice boss {v}")).unwrap_err();
        assert_eq!(err.line, 1);
        assert!(err.to_string().contains("line 1: unknown role"), "{err}");
        let err = Users::parse("alice admin").unwrap_err();
        assert!(err.message.contains("NAME ROLE"), "{err}");
        let err = Users::parse(&format!("a admin {v}\na reader {v}")).unwrap_err();
        assert_eq!(err.line, 2);
        assert!(err.message.contains("twice"), "{err}");
    }

    #[test]
    fn roles_by_statement_kind() {
        assert_eq!(role_for("SELECT 1"), Role::Reader);
        assert_eq!(role_for("SHOW STREAMS"), Role::Reader);
        assert_eq!(role_for("SHOW QUERIES"), Role::Reader);
        assert_eq!(role_for("SUBSCRIBE q"), Role::Reader);
        assert_eq!(role_for("SET statement_timeout = 0"), Role::Reader);
        assert_eq!(role_for("DECLARE c CURSOR FOR SELECT 1"), Role::Reader);
        assert_eq!(role_for("FETCH 1 c"), Role::Reader);
        assert_eq!(role_for("INSERT INTO s VALUES (1)"), Role::Writer);
        assert_eq!(role_for("COPY s FROM STDIN"), Role::Writer);
        assert_eq!(role_for("CREATE STREAM s (a INT)"), Role::Admin);
        assert_eq!(role_for("DROP STREAM s"), Role::Admin);
        assert_eq!(role_for("DROP QUERY q"), Role::Admin);
        assert_eq!(role_for("CHECKPOINT"), Role::Admin);
    }

    #[test]
    fn refusal_names_role_and_kind() {
        let stmt = sql::parse("DROP STREAM s").unwrap().remove(0);
        let PgWireError::UserError(info) = authorize(Role::Writer, &stmt).unwrap_err() else {
            panic!("not a user error");
        };
        assert_eq!(info.code, "42501");
        assert!(info.message.contains("DROP STREAM"), "{}", info.message);
        assert!(info.message.contains("writer"), "{}", info.message);
        assert!(authorize(Role::Admin, &stmt).is_ok());
    }

    #[test]
    fn non_loopback_needs_users() {
        let any: SocketAddr = "0.0.0.0:5433".parse().unwrap();
        let lo: SocketAddr = "127.0.0.1:5433".parse().unwrap();
        assert!(check_listen(&lo, None).is_ok());
        let err = check_listen(&any, None).unwrap_err();
        assert!(
            matches!(err, SetupError::Unauthenticated(a) if a == any),
            "{err}"
        );
        assert!(err.to_string().contains("--users"), "{err}");
        assert!(check_listen(&any, Some(&Users::default())).is_ok());
    }

    #[test]
    fn add_user_writes_and_replaces() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("users");
        add_user(&path, "alice", Role::Reader, "one").unwrap();
        add_user(&path, "bob", Role::Writer, "two").unwrap();
        add_user(&path, "alice", Role::Admin, "three").unwrap();
        let users = Users::load(&path).unwrap();
        assert_eq!(users.len(), 2);
        assert_eq!(users.get("alice").unwrap().role, Role::Admin);
        assert!(add_user(&path, "a b", Role::Admin, "x").is_err());
        assert!(add_user(&path, "c", Role::Admin, "").is_err());
    }
}
