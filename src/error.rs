//! One error type for every phase of saql, each variant carrying what the user needs to fix
//! the problem: a SQLSTATE code, and where it applies a position in the statement or a line of
//! input.

use std::fmt;

use datafusion::sql::sqlparser::tokenizer::Span;

pub mod sqlstate;

/// Result alias used across the crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// Where in a statement an error applies: a 1-based line and column, as sqlparser's token
/// spans count them.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Location {
    /// 1-based line.
    pub line: u64,
    /// 1-based column, counted in characters.
    pub column: u64,
}

impl Location {
    /// Where sqlparser's `span` starts; None for an empty span (a node built, not parsed).
    pub fn of_span(span: Span) -> Option<Location> {
        (span.start.line > 0).then_some(Location {
            line: span.start.line,
            column: span.start.column,
        })
    }

    /// Where DataFusion's `span` (of a column, a relation, a function call) starts.
    fn of_datafusion(span: Option<&datafusion::common::Span>) -> Option<Location> {
        span.filter(|s| s.start.line > 0).map(|s| Location {
            line: s.start.line,
            column: s.start.column,
        })
    }
}

/// An error, by the phase that raised it.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The statement does not parse (SQLSTATE 42601).
    #[error("{message}")]
    Parse {
        /// What is wrong, lowercase, no trailing period.
        message: String,
        /// Where the offending token starts, when known.
        location: Option<Location>,
    },
    /// A stream, query or other named object does not exist (42P01) or already exists (42P07).
    #[error("{message}")]
    Catalog {
        /// SQLSTATE: 42P01 undefined, 42P07 duplicate.
        sqlstate: &'static str,
        /// What is wrong.
        message: String,
        /// Where the statement names the object, when it came from a statement.
        location: Option<Location>,
    },
    /// The statement parses but cannot be planned (unknown column 42703, type mismatch 42804).
    #[error("{message}")]
    Plan {
        /// SQLSTATE.
        sqlstate: &'static str,
        /// What is wrong.
        message: String,
        /// Where the offending name or expression starts in the statement, when known.
        location: Option<Location>,
    },
    /// The statement asks for something saql does not do yet (0A000).
    #[error("{0}")]
    NotSupported(String),
    /// An input value or row was rejected (22P02 bad value, 22007 bad timestamp,
    /// 22003 out of range, 22023 bad parameter, 23502 null in NOT NULL column).
    #[error("{}", render_input(.message, .line, .column))]
    InvalidInput {
        /// SQLSTATE.
        sqlstate: &'static str,
        /// What is wrong with the value.
        message: String,
        /// 1-based line (COPY) or row (INSERT) of the input, when known.
        line: Option<u64>,
        /// The column the value was meant for.
        column: Option<String>,
    },
    /// Evaluation failed while processing accepted data.
    #[error("{0}")]
    Execution(String),
    /// The operation was canceled by the client (57014).
    #[error("canceling statement due to user request")]
    Canceled,
    /// The server is shutting down and ended a statement that would not end by itself, a
    /// SUBSCRIBE or a waiting FETCH (57P01).
    #[error("terminating connection due to administrator command: the server is shutting down")]
    AdminShutdown,
    /// The statement ran longer than the session's `statement_timeout` (57014).
    #[error("canceling statement due to statement timeout ({} ms; SET statement_timeout changes it)", .0.as_millis())]
    StatementTimeout(std::time::Duration),
    /// A configured limit was reached: 53000 class (insufficient resources: 53200 memory,
    /// 53300 connections, 53400 a configured limit) or 54000 class (program limit: 54000,
    /// 54001 statement too complex).
    #[error("{message}")]
    ResourceLimit {
        /// SQLSTATE.
        sqlstate: &'static str,
        /// What limit was reached, its value, and what to do.
        message: String,
    },
    /// A continuous query stopped with an error while running (its SQLSTATE is kept, e.g.
    /// 53200 when its state outgrew a bound).
    #[error("{0}")]
    QueryFailed(crate::runtime::QueryFailure),
    /// Reading or writing the data directory failed (58030).
    #[error("{context}: {source}")]
    Io {
        /// What saql was doing.
        context: String,
        /// The underlying error.
        source: std::io::Error,
    },
    /// An error raised inside DataFusion or Arrow that has no better home.
    #[error("{0}")]
    Internal(String),
}

fn render_input(message: &str, line: &Option<u64>, column: &Option<String>) -> String {
    let mut out = message.to_string();
    if let Some(column) = column {
        out.push_str(&format!(", column \"{column}\""));
    }
    if let Some(line) = line {
        out.push_str(&format!(", line {line}"));
    }
    out
}

impl Error {
    /// The SQLSTATE code that the server reports for this error.
    pub fn sqlstate(&self) -> &'static str {
        match self {
            Error::Parse { .. } => sqlstate::SYNTAX_ERROR,
            Error::Catalog { sqlstate, .. } => sqlstate,
            Error::Plan { sqlstate, .. } => sqlstate,
            Error::NotSupported(_) => sqlstate::FEATURE_NOT_SUPPORTED,
            Error::InvalidInput { sqlstate, .. } => sqlstate,
            Error::Execution(_) => sqlstate::INTERNAL_ERROR,
            Error::Canceled | Error::StatementTimeout(_) => sqlstate::QUERY_CANCELED,
            Error::AdminShutdown => sqlstate::ADMIN_SHUTDOWN,
            Error::ResourceLimit { sqlstate, .. } => sqlstate,
            Error::QueryFailed(f) => f.sqlstate,
            // A full disk is a resource limit the writer can act on.
            Error::Io { source, .. } if source.kind() == std::io::ErrorKind::StorageFull => {
                sqlstate::DISK_FULL
            }
            Error::Io { .. } => sqlstate::IO_ERROR,
            Error::Internal(_) => sqlstate::INTERNAL_ERROR,
        }
    }

    /// A syntax error at a location.
    pub fn parse(message: impl Into<String>, location: Option<Location>) -> Self {
        Error::Parse {
            message: message.into(),
            location,
        }
    }

    /// An unknown stream or query.
    pub fn undefined(kind: &str, name: &str) -> Self {
        Error::Catalog {
            sqlstate: sqlstate::UNDEFINED_TABLE,
            message: format!("{kind} \"{name}\" does not exist"),
            location: None,
        }
    }

    /// A name that is already taken.
    pub fn duplicate(kind: &str, name: &str) -> Self {
        Error::Catalog {
            sqlstate: sqlstate::DUPLICATE_TABLE,
            message: format!("{kind} \"{name}\" already exists"),
            location: None,
        }
    }

    /// A planning error with SQLSTATE 42601-class semantics chosen by the caller.
    pub fn plan(sqlstate: &'static str, message: impl Into<String>) -> Self {
        Error::Plan {
            sqlstate,
            message: message.into(),
            location: None,
        }
    }

    /// A rejected input value.
    pub fn invalid_input(sqlstate: &'static str, message: impl Into<String>) -> Self {
        Error::InvalidInput {
            sqlstate,
            message: message.into(),
            line: None,
            column: None,
        }
    }

    /// Attach a line number to an input error (other errors pass through unchanged).
    pub fn at_line(self, at: u64) -> Self {
        match self {
            Error::InvalidInput {
                sqlstate,
                message,
                line: None,
                column,
            } => Error::InvalidInput {
                sqlstate,
                message,
                line: Some(at),
                column,
            },
            other => other,
        }
    }

    /// Attach a column name to an input error (other errors pass through unchanged).
    pub fn in_column(self, name: &str) -> Self {
        match self {
            Error::InvalidInput {
                sqlstate,
                message,
                line,
                column: None,
            } => Error::InvalidInput {
                sqlstate,
                message,
                line,
                column: Some(name.to_string()),
            },
            other => other,
        }
    }

    /// Name the bound parameter `$n` in an input error (other errors pass through unchanged).
    pub fn for_parameter(self, n: usize) -> Self {
        match self {
            Error::InvalidInput {
                sqlstate,
                message,
                line,
                column,
            } => Error::InvalidInput {
                sqlstate,
                message: format!("{message} (parameter ${n})"),
                line,
                column,
            },
            other => other,
        }
    }

    /// Where in its statement this error applies, when it does: a syntax error's token, the
    /// name of an unknown column, function or stream (from the statement's token spans).
    pub fn location(&self) -> Option<Location> {
        match self {
            Error::Parse { location, .. }
            | Error::Catalog { location, .. }
            | Error::Plan { location, .. } => *location,
            _ => None,
        }
    }

    /// This error placed at `at` in its statement, unless it already has a place (errors
    /// that do not apply to a statement pass through unchanged).
    pub fn at(mut self, at: Option<Location>) -> Self {
        if let Error::Parse { location, .. }
        | Error::Catalog { location, .. }
        | Error::Plan { location, .. } = &mut self
        {
            if location.is_none() {
                *location = at;
            }
        }
        self
    }

    /// This error placed where sqlparser's `span` starts (see [`Error::at`]).
    pub fn at_span(self, span: Span) -> Self {
        self.at(Location::of_span(span))
    }

    /// A resource or program limit was reached (53xxx, 54xxx).
    pub fn limit(sqlstate: &'static str, message: impl Into<String>) -> Self {
        Error::ResourceLimit {
            sqlstate,
            message: message.into(),
        }
    }

    /// A statement deeper or longer than the parser and planner take (54001).
    pub fn too_complex(message: impl Into<String>) -> Self {
        Error::limit(sqlstate::STATEMENT_TOO_COMPLEX, message)
    }

    /// An I/O error with what saql was doing.
    pub fn io(context: impl Into<String>, source: std::io::Error) -> Self {
        Error::Io {
            context: context.into(),
            source,
        }
    }
}

impl From<datafusion::error::DataFusionError> for Error {
    fn from(e: datafusion::error::DataFusionError) -> Self {
        use datafusion::error::DataFusionError as D;
        match e {
            D::SQL(e, _) => Error::parse(e.to_string(), None),
            D::SchemaError(e, _) => Error::from(*e),
            // DataFusion has no typed form of an unknown table or function: its planner
            // says so in a Plan error (inside a Diagnostic that holds the span, see below).
            D::Plan(m) if m.starts_with("table '") && m.ends_with("' not found") => {
                let name = m["table '".len()..m.len() - "' not found".len()]
                    .rsplit('.')
                    .next()
                    .unwrap_or_default()
                    .to_string();
                Error::undefined("stream or query", &name)
            }
            D::Plan(m) if m.starts_with("table function '") && m.ends_with("' not found") => {
                let name = &m["table function '".len()..m.len() - "' not found".len()];
                Error::plan(
                    sqlstate::UNDEFINED_FUNCTION,
                    format!("table function \"{name}\" does not exist"),
                )
            }
            D::Plan(m) if m.starts_with("Invalid function '") => {
                let rest = &m["Invalid function '".len()..];
                let name = rest.split('\'').next().unwrap_or_default();
                let mut message = format!("function \"{name}\" does not exist");
                if let Some(hint) = rest.split("Did you mean '").nth(1) {
                    let hint = hint.trim_end_matches(['\'', '?']);
                    message.push_str(&format!("; did you mean \"{hint}\"", hint = hint.trim()));
                }
                Error::plan(sqlstate::UNDEFINED_FUNCTION, message)
            }
            D::Plan(m) => Error::plan(sqlstate::DATATYPE_MISMATCH, strip_datafusion_prefix(&m)),
            D::NotImplemented(m) => Error::NotSupported(m),
            D::Context(ctx, inner) => match Error::from(*inner) {
                Error::Plan {
                    sqlstate,
                    message,
                    location,
                } => Error::Plan {
                    sqlstate,
                    message: format!("{ctx}: {message}"),
                    location,
                },
                other => other,
            },
            // The span of the column, relation or call the error is about.
            D::Diagnostic(diagnostic, inner) => {
                Error::from(*inner).at(Location::of_datafusion(diagnostic.span.as_ref()))
            }
            // saql's own errors raised inside DataFusion (table functions, the planning
            // context's catalog).
            D::External(e) => match e.downcast::<Error>() {
                Ok(ours) => *ours,
                Err(e) if e.to_string().starts_with("regex parse error") => {
                    data_exception(&e.to_string())
                }
                Err(e) => Error::Execution(e.to_string()),
            },
            D::ArrowError(e, _) => Error::from(*e),
            // The planner gathers several errors of one statement (`SELECT sum(n)` without
            // FROM: every column unknown); the first is the one PostgreSQL would report.
            D::Collection(errors) => match errors.into_iter().next() {
                Some(first) => Error::from(first),
                None => Error::Internal("an empty collection of errors".into()),
            },
            D::Shared(shared) => match std::sync::Arc::try_unwrap(shared) {
                Ok(e) => Error::from(e),
                Err(shared) => Error::Execution(strip_datafusion_prefix(&shared.to_string())),
            },
            // A function refusing its arguments while evaluating (a bad granularity, a
            // negative count, a malformed pattern): the client's values, not saql, are wrong.
            D::Execution(m) => data_exception(&m),
            other => Error::Execution(strip_datafusion_prefix(&other.to_string())),
        }
    }
}

impl From<datafusion::common::SchemaError> for Error {
    fn from(e: datafusion::common::SchemaError) -> Self {
        use datafusion::common::SchemaError as S;
        let (sqlstate, column) = match &e {
            S::FieldNotFound {
                field,
                valid_fields,
            } => {
                let mut names: Vec<&str> = Vec::new();
                for c in valid_fields {
                    if !names.contains(&c.name.as_str()) {
                        names.push(&c.name);
                    }
                }
                let mut message = format!("column \"{}\" does not exist", field.name);
                if !names.is_empty() {
                    message.push_str(&format!("; columns are: {}", names.join(", ")));
                }
                let at = Location::of_datafusion(field.spans().first().as_ref());
                return Error::plan(sqlstate::UNDEFINED_COLUMN, message).at(at);
            }
            S::AmbiguousReference { field } => (sqlstate::AMBIGUOUS_COLUMN, Some(field)),
            S::DuplicateQualifiedField { .. } | S::DuplicateUnqualifiedField { .. } => {
                (sqlstate::DUPLICATE_COLUMN, None)
            }
        };
        let at = column.and_then(|c| Location::of_datafusion(c.spans().first().as_ref()));
        Error::plan(sqlstate, strip_datafusion_prefix(&e.to_string())).at(at)
    }
}

/// Errors of evaluating data get PostgreSQL's data-exception codes (what a client can fix in
/// its values or statement), not XX000.
impl From<datafusion::arrow::error::ArrowError> for Error {
    fn from(e: datafusion::arrow::error::ArrowError) -> Self {
        use datafusion::arrow::error::ArrowError as A;
        match e {
            A::DivideByZero => Error::invalid_input(sqlstate::DIVISION_BY_ZERO, "division by zero"),
            A::ArithmeticOverflow(m) => Error::invalid_input(
                sqlstate::NUMERIC_VALUE_OUT_OF_RANGE,
                format!("value out of range: {m}"),
            ),
            A::CastError(m) | A::ParseError(m) => {
                Error::invalid_input(sqlstate::INVALID_TEXT_REPRESENTATION, m)
            }
            A::InvalidArgumentError(m) | A::ComputeError(m) => data_exception(&m),
            A::ExternalError(e) if e.to_string().starts_with("regex parse error") => {
                data_exception(&e.to_string())
            }
            other => Error::Execution(other.to_string()),
        }
    }
}

/// An error a function raised over its arguments, with the SQLSTATE PostgreSQL gives the
/// same condition (22023 where it has no closer one).
fn data_exception(message: &str) -> Error {
    let message = message
        .trim_start_matches("Execution error: ")
        .trim_start_matches("Compute error: ")
        .trim_start_matches("Execution error: ");
    let sqlstate = if message.starts_with("regex parse error") {
        sqlstate::INVALID_REGULAR_EXPRESSION
    } else if message.contains("square root of a negative number") {
        sqlstate::INVALID_ARGUMENT_FOR_POWER_FUNCTION
    } else {
        sqlstate::INVALID_PARAMETER_VALUE
    };
    Error::invalid_input(sqlstate, message.to_string())
}

fn strip_datafusion_prefix(message: &str) -> String {
    message
        .trim_start_matches("Error during planning: ")
        .trim_start_matches("Schema error: ")
        .to_string()
}

/// Renders an error against the statement text: the message, then the offending line with a
/// caret under the column, as rustc and the regex crate do.
pub struct WithSource<'a> {
    /// The error to render.
    pub error: &'a Error,
    /// The statement text the error's location refers to.
    pub source: &'a str,
}

impl fmt::Display for WithSource<'_> {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}", self.error)?;
        if let Some(loc) = self.error.location() {
            if let Some(text) = self.source.lines().nth(loc.line.saturating_sub(1) as usize) {
                let pad = " ".repeat(loc.column.saturating_sub(1) as usize);
                write!(f, "\n{text}\n{pad}^")?;
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn input_errors_name_line_and_column() {
        let e = Error::invalid_input("22P02", "invalid input syntax for type bigint: \"x\"")
            .in_column("pid")
            .at_line(3);
        assert_eq!(e.sqlstate(), "22P02");
        assert_eq!(
            e.to_string(),
            "invalid input syntax for type bigint: \"x\", column \"pid\", line 3"
        );
    }

    #[test]
    fn caret_points_at_the_column() {
        let e = Error::parse("expected expression", Some(Location { line: 2, column: 8 }));
        let rendered = WithSource {
            error: &e,
            source: "SELECT a\nFROM s WHERE",
        }
        .to_string();
        assert_eq!(rendered, "expected expression\nFROM s WHERE\n       ^");
    }

    #[test]
    fn a_collection_of_planning_errors_takes_the_first_ones_sqlstate() {
        use datafusion::common::{Column, SchemaError};
        use datafusion::error::DataFusionError as D;
        let unknown = |name: &str| {
            D::SchemaError(
                Box::new(SchemaError::FieldNotFound {
                    field: Box::new(Column::from_name(name)),
                    valid_fields: vec![],
                }),
                Box::new(None),
            )
        };
        let e = Error::from(D::Collection(vec![unknown("n"), unknown("mean")]));
        assert_eq!(e.sqlstate(), "42703");
        assert_eq!(e.to_string(), "column \"n\" does not exist");
        let shared = Error::from(D::Shared(std::sync::Arc::new(unknown("x"))));
        assert_eq!(shared.sqlstate(), "42703");
    }
}
