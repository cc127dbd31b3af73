//! The PostgreSQL functions that drivers and tools call when they connect or introspect:
//! `version()`, `current_database()`, `current_schema()`, `current_user`, `session_user`,
//! `current_setting(name)` and `pg_backend_pid()`, answered for the session that asks. Also the
//! one version string saql gives everywhere (`version()`, the `server_version` startup
//! parameter, `SHOW server_version[_num]`): PostgreSQL's form, naming saql, so that clients
//! that parse it (SQLAlchemy, asyncpg, pgJDBC) take saql for the PostgreSQL it imitates.

use std::sync::Arc;

use datafusion::arrow::datatypes::DataType;
use datafusion::logical_expr::{create_udf, ColumnarValue, Volatility};
use datafusion::prelude::SessionContext;
use datafusion::scalar::ScalarValue;

/// The PostgreSQL version whose protocol and behaviour saql follows.
pub const PG_VERSION: &str = "16.0";
/// [`PG_VERSION`] as `SHOW server_version_num` and libpq's `PQserverVersion` give it.
pub const PG_VERSION_NUM: &str = "160000";

/// The `server_version` parameter and `SHOW server_version`: `16.0 (saql 0.1.0)`, as a
/// distribution's build says `16.0 (Debian 16.0-1)`.
pub fn server_version() -> String {
    format!("{PG_VERSION} (saql {})", env!("CARGO_PKG_VERSION"))
}

/// What `version()` returns: `PostgreSQL 16.0 (saql 0.1.0) on x86_64-linux, ...`.
pub fn version_text() -> String {
    format!(
        "PostgreSQL {} on {}-{}, saql streaming SQL engine over Apache DataFusion, {}-bit",
        server_version(),
        std::env::consts::ARCH,
        std::env::consts::OS,
        usize::BITS
    )
}

/// Who is asking: the session the functions answer for.
#[derive(Debug, Clone)]
pub struct SessionInfo {
    /// The user named at connection (`current_user`, `session_user`).
    pub user: String,
    /// The database named at connection (`current_database()`).
    pub database: String,
    /// The process id the client was given (`pg_backend_pid()`).
    pub pid: i32,
    /// Whether the session's role is admin (it sees where sinks deliver and their errors).
    pub admin: bool,
    /// `saql.max_result_rows` as the session set it (None: the server's default); 0 is no
    /// bound.
    pub max_result_rows: Option<u64>,
    /// `saql.max_result_bytes` as the session set it (None: the server's default); 0 is no
    /// bound.
    pub max_result_bytes: Option<u64>,
}

impl SessionInfo {
    /// This session with the bounds it did not set taken from the server's defaults.
    pub fn with_defaults(&self, max_result_rows: u64, max_result_bytes: u64) -> SessionInfo {
        SessionInfo {
            max_result_rows: Some(self.max_result_rows.unwrap_or(max_result_rows)),
            max_result_bytes: Some(self.max_result_bytes.unwrap_or(max_result_bytes)),
            ..self.clone()
        }
    }

    /// The value of a run-time setting for this session, as `SHOW name`, `pg_settings` and
    /// `current_setting('name')` give it (see [`setting`]).
    pub fn setting(&self, name: &str) -> String {
        let bound = |b: Option<u64>| b.unwrap_or(0).to_string();
        match name.to_lowercase().replace(' ', ".").as_str() {
            MAX_RESULT_ROWS => bound(self.max_result_rows),
            MAX_RESULT_BYTES => bound(self.max_result_bytes),
            _ => setting(name),
        }
    }
}

/// The session setting bounding the rows of an ad hoc SELECT (54000 past it; 0: no bound).
pub const MAX_RESULT_ROWS: &str = "saql.max_result_rows";
/// The session setting bounding the bytes of an ad hoc SELECT (54000 past it; 0: no bound).
pub const MAX_RESULT_BYTES: &str = "saql.max_result_bytes";

impl Default for SessionInfo {
    fn default() -> Self {
        SessionInfo {
            user: "saql".into(),
            database: "saql".into(),
            pid: 0,
            admin: true,
            max_result_rows: None,
            max_result_bytes: None,
        }
    }
}

/// The run-time settings saql has, as `pg_settings` lists them.
pub const SETTINGS: [&str; 17] = [
    "client_encoding",
    "DateStyle",
    "default_transaction_isolation",
    "integer_datetimes",
    "IntervalStyle",
    "is_superuser",
    "max_identifier_length",
    "max_index_keys",
    "search_path",
    "server_encoding",
    "server_version",
    "server_version_num",
    "standard_conforming_strings",
    "TimeZone",
    "transaction_isolation",
    MAX_RESULT_ROWS,
    MAX_RESULT_BYTES,
];

/// The value of a run-time setting as `SHOW name` and `current_setting('name')` give it;
/// empty for a setting saql does not have.
pub fn setting(name: &str) -> String {
    match name.to_lowercase().as_str() {
        "server_version" => server_version(),
        "server_version_num" => PG_VERSION_NUM.into(),
        "server_encoding" | "client_encoding" => "UTF8".into(),
        "datestyle" => "ISO, MDY".into(),
        "timezone" | "time zone" | "time_zone" => "UTC".into(),
        "standard_conforming_strings" => "on".into(),
        "transaction isolation level" | "transaction_isolation" => "read committed".into(),
        "default_transaction_isolation" => "read committed".into(),
        "integer_datetimes" => "on".into(),
        "search_path" => "\"$user\", public".into(),
        "max_identifier_length" => "63".into(),
        "max_index_keys" => "32".into(),
        "intervalstyle" => "postgres".into(),
        "is_superuser" => "on".into(),
        _ => String::new(),
    }
}

fn constant(ctx: &SessionContext, name: &str, value: ScalarValue) {
    let data_type = value.data_type();
    ctx.register_udf(create_udf(
        name,
        vec![],
        data_type,
        Volatility::Stable,
        Arc::new(move |_| Ok(ColumnarValue::Scalar(value.clone()))),
    ));
}

/// Registers the session functions in `ctx`, answering for `session`.
pub fn register(ctx: &SessionContext, session: &SessionInfo) {
    constant(ctx, "version", ScalarValue::from(version_text()));
    constant(
        ctx,
        "current_database",
        ScalarValue::from(session.database.as_str()),
    );
    constant(
        ctx,
        "current_catalog",
        ScalarValue::from(session.database.as_str()),
    );
    constant(ctx, "current_schema", ScalarValue::from("public"));
    for name in ["current_user", "session_user", "user", "current_role"] {
        constant(ctx, name, ScalarValue::from(session.user.as_str()));
    }
    constant(ctx, "pg_backend_pid", ScalarValue::Int32(Some(session.pid)));
    let session = session.clone();
    ctx.register_udf(create_udf(
        "current_setting",
        vec![DataType::Utf8],
        DataType::Utf8,
        Volatility::Stable,
        Arc::new(move |args| {
            let setting = |name: &str| session.setting(name);
            Ok(match &args[0] {
                ColumnarValue::Scalar(ScalarValue::Utf8(name)) => ColumnarValue::Scalar(
                    ScalarValue::from(setting(name.as_deref().unwrap_or_default())),
                ),
                ColumnarValue::Array(names) => {
                    let names = datafusion::arrow::array::AsArray::as_string::<i32>(names);
                    let values: datafusion::arrow::array::StringArray =
                        names.iter().map(|n| n.map(setting)).collect();
                    ColumnarValue::Array(Arc::new(values))
                }
                _ => ColumnarValue::Scalar(ScalarValue::Utf8(None)),
            })
        }),
    ));
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_version_everywhere() {
        assert!(server_version().starts_with(PG_VERSION));
        assert!(version_text().starts_with(&format!("PostgreSQL {}", server_version())));
        assert_eq!(setting("server_version"), server_version());
        assert_eq!(setting("SERVER_VERSION_NUM"), PG_VERSION_NUM);
    }
}
