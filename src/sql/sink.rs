//! `CREATE SINK`: where a continuous query's results go besides its subscribers, an HTTP
//! webhook, a Kafka topic or a PostgreSQL table. The statement names the query and the
//! connector; the options are checked later, by `sinks::spec`, against the query.

use std::fmt;

use datafusion::sql::sqlparser::ast::Ident;
use datafusion::sql::sqlparser::keywords::Keyword;
use datafusion::sql::sqlparser::parser::Parser;

use super::parser::{error_at, parse_options, parse_word};
use crate::error::Result;

/// `CREATE SINK [IF NOT EXISTS] name FROM query INTO WEBHOOK | KAFKA | POSTGRES (options)`.
#[derive(Debug, Clone, PartialEq)]
pub struct CreateSink {
    /// Sink name.
    pub name: Ident,
    /// The continuous query whose results it delivers.
    pub query: Ident,
    /// Where they go.
    pub connector: SinkConnector,
    /// `(key = 'value', ...)` options, keys lowercased.
    pub options: Vec<(String, String)>,
    /// `IF NOT EXISTS`.
    pub if_not_exists: bool,
}

/// Where a sink delivers.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SinkConnector {
    /// `INTO WEBHOOK (url = 'http://...')`: HTTP POST of JSON batches.
    Webhook,
    /// `INTO KAFKA (brokers = '...', topic = '...')`: one record per row.
    Kafka,
    /// `INTO POSTGRES (url = '...', table = '...')`: rows inserted into a table.
    Postgres,
}

impl SinkConnector {
    /// The keyword, as written after `INTO`.
    pub fn keyword(self) -> &'static str {
        match self {
            SinkConnector::Webhook => "WEBHOOK",
            SinkConnector::Kafka => "KAFKA",
            SinkConnector::Postgres => "POSTGRES",
        }
    }
}

/// Words in an option or query-parameter name that mark its value as a secret.
const SECRET_WORDS: [&str; 8] = [
    "password", "passwd", "pwd", "secret", "token", "key", "sig", "auth",
];

/// What stands for a secret wherever the statement is shown back.
pub const MASK: &str = "********";

impl CreateSink {
    /// The secrets in the options: passwords in URLs (`scheme://user:password@host`) and in
    /// connection strings (`password=...`), values of query parameters and options whose
    /// name says secret (`?token=...`). They are masked wherever the sink is shown.
    pub fn secrets(&self) -> Vec<String> {
        let mut out = Vec::new();
        for (key, value) in &self.options {
            if is_secret_name(key) && !key.eq_ignore_ascii_case("key") {
                out.push(value.clone());
                continue;
            }
            url_secrets(value, &mut out);
        }
        out.retain(|s| !s.is_empty());
        // Longest first, so that a secret inside another is not masked half-way.
        out.sort_by_key(|s| std::cmp::Reverse(s.len()));
        out
    }

    /// The statement as SQL with its secrets masked: for SHOW SINKS, logs and errors.
    pub fn redacted(&self) -> String {
        mask(&self.to_string(), &self.secrets())
    }
}

/// `text` with every occurrence of each secret replaced by [`MASK`].
pub fn mask(text: &str, secrets: &[String]) -> String {
    let mut out = text.to_string();
    for s in secrets {
        out = out.replace(s.as_str(), MASK);
        // As the statement writes it back, quotes doubled.
        if s.contains('\'') {
            out = out.replace(&s.replace('\'', "''"), MASK);
        }
    }
    out
}

fn is_secret_name(name: &str) -> bool {
    let name = name.to_ascii_lowercase();
    SECRET_WORDS.iter().any(|w| name.contains(w))
}

/// Collects the secrets of one option value: a URL's password and secret query parameters,
/// or a `key=value` connection string's password.
fn url_secrets(value: &str, out: &mut Vec<String>) {
    if let Some((_, rest)) = value.split_once("://") {
        let authority = rest.split(['/', '?', '#']).next().unwrap_or("");
        if let Some((userinfo, _)) = authority.rsplit_once('@') {
            if let Some((_, password)) = userinfo.split_once(':') {
                out.push(password.to_string());
            }
        }
        if let Some((_, query)) = rest.split_once('?') {
            let query = query.split('#').next().unwrap_or("");
            for pair in query.split('&') {
                if let Some((k, v)) = pair.split_once('=') {
                    if is_secret_name(k) {
                        out.push(v.to_string());
                    }
                }
            }
        }
        return;
    }
    // libpq's `host=... password=...`: a value may be quoted.
    let mut rest = value;
    while let Some(at) = rest.to_ascii_lowercase().find("password") {
        let after = rest[at + "password".len()..].trim_start();
        let Some(after) = after.strip_prefix('=') else {
            rest = &rest[at + "password".len()..];
            continue;
        };
        let after = after.trim_start();
        let secret = match after.strip_prefix('\'') {
            Some(quoted) => quoted.split('\'').next().unwrap_or(""),
            None => after.split_whitespace().next().unwrap_or(""),
        };
        out.push(secret.to_string());
        rest = after;
    }
}

impl fmt::Display for CreateSink {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let ine = if self.if_not_exists {
            "IF NOT EXISTS "
        } else {
            ""
        };
        write!(
            f,
            "CREATE SINK {ine}{} FROM {} INTO {}",
            self.name,
            self.query,
            self.connector.keyword()
        )?;
        if !self.options.is_empty() {
            let opts: Vec<String> = self
                .options
                .iter()
                .map(|(k, v)| format!("{k} = '{}'", v.replace('\'', "''")))
                .collect();
            write!(f, " ({})", opts.join(", "))?;
        }
        Ok(())
    }
}

/// After `CREATE SINK`: `[IF NOT EXISTS] name FROM query INTO connector [(options)]`.
pub(super) fn parse_create_sink(parser: &mut Parser) -> Result<CreateSink> {
    let if_not_exists = parser.parse_keywords(&[Keyword::IF, Keyword::NOT, Keyword::EXISTS]);
    let name = parser.parse_identifier()?;
    parser.expect_keyword_is(Keyword::FROM)?;
    let query = parser.parse_identifier()?;
    parser.expect_keyword_is(Keyword::INTO)?;
    let tok = parser.peek_token();
    let connector = [
        SinkConnector::Webhook,
        SinkConnector::Kafka,
        SinkConnector::Postgres,
    ]
    .into_iter()
    .find(|c| parse_word(parser, c.keyword()))
    .ok_or_else(|| {
        error_at(
            &tok,
            format!(
                "expected WEBHOOK, KAFKA or POSTGRES, found \"{}\"",
                tok.token
            ),
        )
    })?;
    let options =
        if parser.peek_token().token == datafusion::sql::sqlparser::tokenizer::Token::LParen {
            parse_options(parser)?
        } else {
            Vec::new()
        };
    Ok(CreateSink {
        name,
        query,
        connector,
        options,
        if_not_exists,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::parser::tests::verified;
    use crate::sql::{parse_one, Statement};

    #[test]
    fn sink_statements_round_trip() {
        let Statement::CreateSink(s) = verified(
            "CREATE SINK hook FROM exfil INTO WEBHOOK (url = 'http://127.0.0.1:9/a?b=''c''')",
        ) else {
            panic!("not a sink")
        };
        assert_eq!(s.connector, SinkConnector::Webhook);
        assert_eq!(s.query.value, "exfil");
        assert_eq!(s.options[0].1, "http://127.0.0.1:9/a?b='c'");
        verified(
            "CREATE SINK IF NOT EXISTS k FROM q INTO KAFKA (brokers = '127.0.0.1:9092', \
             topic = 'alerts', key = 'host')",
        );
        verified("CREATE SINK p FROM q INTO postgres (url = 'host=x', table = 'alerts')");
        verified("DROP SINK IF EXISTS k");
        verified("DROP SINK k");
        assert_eq!(parse_one("show sinks").unwrap(), Statement::ShowSinks);
        let e = parse_one("CREATE SINK s FROM q INTO SMTP (to = 'x')").unwrap_err();
        assert!(
            e.to_string()
                .contains("expected WEBHOOK, KAFKA or POSTGRES"),
            "{e}"
        );
        assert_eq!(e.sqlstate(), "42601");
        let e = parse_one("CREATE SINK s FROM q (url = 'x')").unwrap_err();
        assert_eq!(e.sqlstate(), "42601");
    }
}

#[cfg(test)]
mod secret_tests {
    use super::*;

    fn sink(options: &[(&str, &str)]) -> CreateSink {
        CreateSink {
            name: Ident::new("s"),
            query: Ident::new("q"),
            connector: SinkConnector::Postgres,
            options: options
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect(),
            if_not_exists: false,
        }
    }

    #[test]
    fn passwords_and_tokens_are_masked() {
        for (options, secret) in [
            (
                vec![("url", "postgres://alice:s3cr'et@db:5432/x")],
                "s3cr'et",
            ),
            (
                vec![("url", "host=db user=alice password='p w' dbname=x")],
                "p w",
            ),
            (vec![("url", "host=db password=hunter2")], "hunter2"),
            (
                vec![("url", "https://hooks.example/x?channel=a&token=abc123")],
                "abc123",
            ),
            (vec![("api_secret", "zzz"), ("table", "t")], "zzz"),
        ] {
            let s = sink(&options);
            let shown = s.redacted();
            assert!(!shown.contains(secret), "{shown}");
            assert!(!shown.contains(&secret.replace('\'', "''")), "{shown}");
            assert!(shown.contains(MASK), "{shown}");
            let error = format!("connecting with {secret} failed");
            assert!(!mask(&error, &s.secrets()).contains(secret));
        }
        // Nothing secret: shown as written.
        let s = sink(&[("url", "http://127.0.0.1:9/x?channel=a"), ("key", "host")]);
        assert_eq!(s.redacted(), s.to_string());
    }
}
