//! saql: a streaming SQL engine for real-time anomaly detection over system monitoring data.
//!
//! Statements flow through the same pipeline whether they arrive over the Postgres wire
//! protocol or through this library: [`sql`] parses extended SQL into an AST, [`plan`] resolves
//! it against the catalog into a chain of incremental [`operators`], and [`runtime`] feeds each
//! stream's Arrow batches through the queries that read it, advancing watermarks and handing
//! result batches to subscribers. [`sources`] decodes INSERT and COPY input and generates demo
//! events; `server` (feature `server`, on by default) serves it all over pgwire. Values bound
//! to `$n` placeholders are [`Param`]s, typed or text of unknown type, over the wire
//! (Bind, `EXECUTE`) as through [`Engine::execute_with_params`].
//!
//! The library needs no network and no async runtime: build it with
//! `saql = { default-features = false }` to embed the parser, planner and [`Engine`].
//!
//! ```
//! use saql::{Catalog, Engine, EngineConfig, StatementResult};
//!
//! // Parse and plan without running anything.
//! let catalog = Catalog::from_sql(
//!     "CREATE STREAM logins (ts TIMESTAMP NOT NULL, host TEXT, ok BOOLEAN,
//!                            WATERMARK FOR ts AS ts - INTERVAL '5' SECOND)",
//! )?;
//! let plan = saql::plan(
//!     "SELECT host, window_end, COUNT(*) AS failures
//!      FROM TUMBLE(logins, ts, INTERVAL '1' MINUTE)
//!      WHERE NOT ok GROUP BY host, window_start, window_end HAVING COUNT(*) >= 3",
//!     &catalog,
//! )?;
//! assert!(saql::explain(&plan, false).contains("WindowAggregate TUMBLE(size 1min)"));
//!
//! // Run it: insert rows, close the windows, read the alerts.
//! let engine = Engine::open(EngineConfig::default())?;
//! engine.execute_blocking(&catalog.to_sql())?;
//! engine.execute_blocking(
//!     "CREATE CONTINUOUS QUERY brute AS SELECT host, COUNT(*) AS failures
//!      FROM TUMBLE(logins, ts, INTERVAL '1' MINUTE)
//!      WHERE NOT ok GROUP BY host, window_start, window_end HAVING COUNT(*) >= 3",
//! )?;
//! let mut alerts = match engine.execute_blocking("SUBSCRIBE brute")?.remove(0) {
//!     StatementResult::Subscribe(s) => s,
//!     _ => unreachable!(),
//! };
//! engine.execute_blocking(
//!     "INSERT INTO logins VALUES ('2024-01-01 10:00:01', 'web-1', false),
//!      ('2024-01-01 10:00:02', 'web-1', false), ('2024-01-01 10:00:03', 'web-1', false),
//!      ('2024-01-01 10:00:04', 'web-2', false)",
//! )?;
//! engine.finish(); // end of input: every window closes
//! let batch = alerts.try_next().expect("one alert");
//! assert_eq!(batch.num_rows(), 1);
//! # Ok::<(), saql::Error>(())
//! ```

pub mod compile;
pub mod error;
pub mod limits;
pub mod operators;
pub mod options;
pub mod plan;
pub mod runtime;
#[cfg(feature = "server")]
pub mod server;
pub mod sinks;
pub mod sources;
pub mod spawn;
pub mod sql;
pub mod text;
pub mod time;

pub use error::{Error, Result};
pub use plan::{Catalog, QueryPlan};
pub use runtime::engine::{Engine, EngineConfig, StatementResult, Subscription};
pub use runtime::RowStream;
pub use sources::param::Param;

/// Parses extended SQL (one or more statements separated by `;`).
///
/// ```
/// let stmts = saql::parse("SHOW STREAMS; SUBSCRIBE alerts")?;
/// assert_eq!(stmts.len(), 2);
/// assert_eq!(stmts[1].to_string(), "SUBSCRIBE alerts");
/// let err = saql::parse("SUBSCRIBE").unwrap_err();
/// assert_eq!(err.sqlstate(), "42601");
/// # Ok::<(), saql::Error>(())
/// ```
pub fn parse(sql: &str) -> Result<Vec<sql::Statement>> {
    sql::parse(sql)
}

/// Plans a continuous query against a catalog: `sql` is a `SELECT`, or a whole
/// `CREATE CONTINUOUS QUERY` statement.
///
/// ```
/// let catalog = saql::Catalog::from_sql("CREATE STREAM s (ts TIMESTAMP, x BIGINT)")?;
/// let plan = saql::plan("SELECT x * 2 AS y FROM s WHERE x > 1", &catalog)?;
/// assert_eq!(plan.schema.field(0).name(), "y");
/// let err = saql::plan("SELECT nope FROM s", &catalog).unwrap_err();
/// assert_eq!(err.sqlstate(), "42703");
/// # Ok::<(), saql::Error>(())
/// ```
pub fn plan(sql: &str, catalog: &Catalog) -> Result<QueryPlan> {
    let Some((query, clauses)) = sql::parse_continuous(sql)? else {
        return Err(Error::plan(
            error::sqlstate::SYNTAX_ERROR,
            format!("expected a continuous query, found {}", sql.trim()),
        ));
    };
    plan::plan_continuous(&query, &clauses, catalog)
}

/// EXPLAIN of a plan: indented text, or JSON (shape documented in [`plan::explain`]).
///
/// ```
/// let catalog = saql::Catalog::from_sql(
///     "CREATE STREAM s (ts TIMESTAMP, host TEXT, WATERMARK FOR ts AS ts)",
/// )?;
/// let plan = saql::plan(
///     "SELECT host, COUNT(*) FROM HOP(s, ts, INTERVAL '1' MINUTE, INTERVAL '5' MINUTE)
///      GROUP BY host, window_start, window_end",
///     &catalog,
/// )?;
/// let json: serde_json::Value = serde_json::from_str(&saql::explain(&plan, true)).unwrap();
/// assert_eq!(json["window"]["kind"], "hop");
/// assert_eq!(json["operators"][0]["operator"], "WindowAggregate");
/// # Ok::<(), saql::Error>(())
/// ```
pub fn explain(plan: &QueryPlan, json: bool) -> String {
    if json {
        serde_json::to_string_pretty(&plan.explain_json()).unwrap_or_default()
    } else {
        plan.explain_text()
    }
}
