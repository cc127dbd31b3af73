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
