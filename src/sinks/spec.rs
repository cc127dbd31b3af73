//! A sink's checked definition: what `CREATE SINK` asked for, validated against the query
//! it reads (options known, values in range, a key column that exists, no result column
//! named `seq`, which the sink adds).

use crate::error::sqlstate;
use std::time::Duration;

use datafusion::arrow::datatypes::SchemaRef;

use crate::error::{Error, Result};
use crate::options::{bad_value, Options};
use crate::plan::catalog::normalize;
use crate::runtime::SEQ_COLUMN;
use crate::sql::{CreateSink, SinkConnector};

/// Where a sink delivers.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum SinkTarget {
    /// HTTP POST of a JSON array per batch.
    Webhook {
        /// `host:port` to connect to.
        authority: String,
        /// Host name or address.
        host: String,
        /// TCP port.
        port: u16,
        /// Path and query of the request.
        path: String,
    },
    /// One Kafka record per row.
    Kafka {
        /// Bootstrap brokers.
        brokers: Vec<String>,
        /// The topic.
        topic: String,
        /// The partition written (one, so that the topic keeps the rows in order).
        partition: i32,
        /// The column whose value is the record key; `None`: the row's seq.
        key: Option<String>,
    },
    /// Rows inserted into a PostgreSQL table, `ON CONFLICT (seq) DO NOTHING`.
    Postgres {
        /// libpq-style connection string (`host=... port=... user=... dbname=...`).
        url: String,
        /// The table, possibly `schema.table`, each part a plain identifier.
        table: String,
    },
}

/// A checked `CREATE SINK`.
#[derive(Debug, Clone)]
pub struct SinkSpec {
    /// Normalised sink name.
    pub name: String,
    /// Normalised query name.
    pub query: String,
    /// Where it delivers.
    pub target: SinkTarget,
    /// Most rows sent in one request (webhook, Postgres) or produce call (Kafka).
    pub batch_rows: usize,
    /// First retry delay; it doubles up to `retry_max`, each drawn between half and all of it.
    pub retry_initial: Duration,
    /// Longest delay between retries.
    pub retry_max: Duration,
    /// How long one delivery attempt may take.
    pub timeout: Duration,
    /// First start only: skip the results produced before the sink existed.
    pub start_at_end: bool,
    /// The statement as written.
    pub ddl: CreateSink,
}

/// Most rows in one delivery.
pub const MAX_BATCH_ROWS: usize = 10_000;

impl SinkSpec {
    /// Checks `ddl` against the schema of the query it reads. Unknown or missing options are
    /// 42601, bad values 22023, a key column that does not exist 42703.
    pub fn try_new(ddl: &CreateSink, query_schema: &SchemaRef) -> Result<SinkSpec> {
        let common = [
            "batch_size",
            "retry_initial_ms",
            "retry_max_ms",
            "timeout_ms",
            "start",
        ];
        let own: &[&str] = match ddl.connector {
            SinkConnector::Webhook => &["url"],
            SinkConnector::Kafka => &["brokers", "topic", "partition", "key", "format"],
            SinkConnector::Postgres => &["url", "table"],
        };
        let allowed: Vec<&str> = own.iter().chain(common.iter()).copied().collect();
        let what = format!("{} sink", ddl.connector.keyword().to_ascii_lowercase());
        let opts = Options::new(&ddl.options, &allowed, what)?;
        let query = normalize(&ddl.query);
        if query_schema.index_of(SEQ_COLUMN).is_ok() {
            return Err(Error::plan(
                sqlstate::DUPLICATE_COLUMN,
                format!(
                    "query \"{query}\" has a column named \"{SEQ_COLUMN}\", which a sink adds \
                     (each row's sequence number): rename it with AS"
                ),
            ));
        }
        let kind = ddl.connector;
        let target = match kind {
            SinkConnector::Webhook => webhook_target(opts.required("url")?)?,
            SinkConnector::Kafka => {
                if let Some(f) = opts.text("format") {
                    if !f.eq_ignore_ascii_case("json") {
                        return Err(bad_value("format", f, "json"));
                    }
                }
                let brokers = opts.required_list("brokers")?;
                let key = match opts.text("key") {
                    None => None,
                    Some(k) if k.eq_ignore_ascii_case(SEQ_COLUMN) => None,
                    Some(k) => {
                        let column = k.to_string();
                        query_schema.index_of(&column).map_err(|_| {
                            Error::plan(
                                sqlstate::UNDEFINED_COLUMN,
                                format!(
                                    "column \"{column}\" of query \"{query}\" does not exist \
                                     (option \"key\": use seq or a result column)"
                                ),
                            )
                        })?;
                        Some(column)
                    }
                };
                SinkTarget::Kafka {
                    brokers,
                    topic: opts.required("topic")?.to_string(),
                    partition: opts.number("partition", 0..=i32::MAX as u64, 0)? as i32,
                    key,
                }
            }
            SinkConnector::Postgres => {
                let table = opts.required("table")?;
                let plain = |p: &str| {
                    let mut c = p.chars();
                    c.next()
                        .is_some_and(|f| f.is_ascii_alphabetic() || f == '_')
                        && c.all(|c| c.is_ascii_alphanumeric() || c == '_')
                };
                let parts: Vec<&str> = table.split('.').collect();
                if parts.len() > 2 || !parts.iter().all(|p| plain(p)) {
                    return Err(bad_value(
                        "table",
                        table,
                        "a table name such as 'alerts' or 'public.alerts'",
                    ));
                }
                SinkTarget::Postgres {
                    url: opts.required("url")?.to_string(),
                    table: table.to_string(),
                }
            }
        };
        let start_at_end = opts.choice("start", &["beginning", "end"], "beginning")? == "end";
        let retry_initial = opts.number("retry_initial_ms", 1..=60_000, 100)?;
        let retry_max = opts.number("retry_max_ms", 1..=600_000, 30_000)?;
        if retry_max < retry_initial {
            return Err(bad_value(
                "retry_max_ms",
                &retry_max.to_string(),
                "at least retry_initial_ms",
            ));
        }
        Ok(SinkSpec {
            name: normalize(&ddl.name),
            query,
            target,
            batch_rows: opts.number("batch_size", 1..=MAX_BATCH_ROWS as u64, 500)? as usize,
            retry_initial: Duration::from_millis(retry_initial),
            retry_max: Duration::from_millis(retry_max),
            timeout: Duration::from_millis(opts.number("timeout_ms", 1..=600_000, 10_000)?),
            start_at_end,
            ddl: ddl.clone(),
        })
    }

    /// `webhook`, `kafka` or `postgres`.
    pub fn kind(&self) -> &'static str {
        match self.target {
            SinkTarget::Webhook { .. } => "webhook",
            SinkTarget::Kafka { .. } => "kafka",
            SinkTarget::Postgres { .. } => "postgres",
        }
    }
}

/// `http://host[:port][/path]`; https is not supported (yet).
fn webhook_target(url: &str) -> Result<SinkTarget> {
    let expected = "a URL such as 'http://127.0.0.1:8080/alerts' (http only)";
    let rest = url
        .strip_prefix("http://")
        .ok_or_else(|| bad_value("url", url, expected))?;
    let (authority, path) = match rest.find('/') {
        Some(i) => (&rest[..i], &rest[i..]),
        None => (rest, "/"),
    };
    let (host, port) = match authority.rsplit_once(':') {
        Some((h, p)) if !h.ends_with(']') || h.starts_with('[') => (
            h,
            p.parse::<u16>()
                .ok()
                .filter(|p| *p > 0)
                .ok_or_else(|| bad_value("url", url, expected))?,
        ),
        _ => (authority, 80),
    };
    let host = host.trim_start_matches('[').trim_end_matches(']');
    let printable = |s: &str| s.chars().all(|c| c.is_ascii_graphic());
    if host.is_empty() || authority.contains('@') || !printable(path) || !printable(host) {
        return Err(bad_value("url", url, expected));
    }
    Ok(SinkTarget::Webhook {
        authority: authority.to_string(),
        host: host.to_string(),
        port,
        path: path.to_string(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::{parse_one, Statement};
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    use std::sync::Arc;

    fn spec(sql: &str) -> Result<SinkSpec> {
        let Statement::CreateSink(s) = parse_one(sql).unwrap() else {
            panic!("not a sink")
        };
        let schema = Arc::new(Schema::new(vec![
            Field::new("host", DataType::Utf8, true),
            Field::new("n", DataType::Int64, true),
        ]));
        SinkSpec::try_new(&s, &schema)
    }

    #[test]
    fn checks_options() {
        let ok = spec(
            "CREATE SINK h FROM q INTO WEBHOOK (url = 'http://127.0.0.1:8080/a/b?c=1', \
             batch_size = 10, start = 'end')",
        )
        .unwrap();
        assert_eq!(
            ok.target,
            SinkTarget::Webhook {
                authority: "127.0.0.1:8080".into(),
                host: "127.0.0.1".into(),
                port: 8080,
                path: "/a/b?c=1".into()
            }
        );
        assert_eq!(ok.batch_rows, 10);
        assert!(ok.start_at_end);
        let plain = spec("CREATE SINK h FROM q INTO WEBHOOK (url = 'http://example')").unwrap();
        assert!(
            matches!(plain.target, SinkTarget::Webhook { port: 80, ref path, .. } if path == "/")
        );
        let k = spec(
            "CREATE SINK k FROM q INTO KAFKA (brokers = 'a:1,b:2', topic = 't', key = 'host')",
        )
        .unwrap();
        assert!(
            matches!(k.target, SinkTarget::Kafka { ref brokers, ref key, partition: 0, .. }
                if brokers.len() == 2 && key.as_deref() == Some("host"))
        );
        let code = |sql: &str| spec(sql).unwrap_err().sqlstate();
        assert_eq!(
            code("CREATE SINK h FROM q INTO WEBHOOK (url = 'https://x/')"),
            "22023"
        );
        assert_eq!(
            code("CREATE SINK h FROM q INTO WEBHOOK (url = 'http://x:0/')"),
            "22023"
        );
        assert_eq!(
            code("CREATE SINK h FROM q INTO WEBHOOK (colour = 'red')"),
            "42601"
        );
        assert_eq!(
            code("CREATE SINK h FROM q INTO WEBHOOK (batch_size = 0, url = 'http://x')"),
            "22023"
        );
        assert_eq!(code("CREATE SINK h FROM q INTO WEBHOOK"), "42601");
        assert_eq!(
            code("CREATE SINK k FROM q INTO KAFKA (brokers = 'a:1', topic = 't', key = 'nope')"),
            "42703"
        );
        assert_eq!(
            code("CREATE SINK k FROM q INTO KAFKA (brokers = 'a:1', topic = 't', format = 'csv')"),
            "22023"
        );
        assert_eq!(
            code("CREATE SINK p FROM q INTO POSTGRES (url = 'host=x', table = 'a; drop')"),
            "22023"
        );
        assert_eq!(
            code("CREATE SINK h FROM q INTO WEBHOOK (url = 'http://x', retry_initial_ms = 500, retry_max_ms = 10)"),
            "22023"
        );
    }
}
