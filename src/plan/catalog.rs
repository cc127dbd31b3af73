//! The catalog: streams (their Arrow schema, event-time column and watermark delay) and
//! continuous queries, keyed by normalised name. It persists as the SQL text of the
//! statements that created it, so the data directory stays readable and diffable.

use crate::error::sqlstate;
use std::collections::BTreeMap;
use std::sync::Arc;
use std::time::Duration;

use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef, TimeUnit};
use datafusion::sql::sqlparser::ast::{self as sq, Ident, ObjectName, TimezoneInfo};

use super::retention::HistorySetting;
use super::table_def::TableDef;
use crate::error::{Error, Result};
use crate::sql::interval::parse_duration;
use crate::sql::{CreateQuery, CreateSink, CreateSource, CreateStream};

/// The name of an identifier as the catalog keys it: unquoted names fold to lower case.
pub fn normalize(ident: &Ident) -> String {
    if ident.quote_style.is_some() {
        ident.value.clone()
    } else {
        ident.value.to_lowercase()
    }
}

/// The catalog key of a possibly qualified object name (its last part).
pub fn normalize_object(name: &ObjectName) -> String {
    name.0
        .last()
        .and_then(|p| p.as_ident())
        .map(normalize)
        .unwrap_or_default()
}

/// The event-time column of a stream and how far its watermark trails the largest time seen.
#[derive(Debug, Clone, PartialEq)]
pub struct EventTimeDef {
    /// Index of the timestamp column.
    pub column: usize,
    /// Watermark = largest event time seen - delay.
    pub delay: Duration,
}

/// What a stream drops when ingest falls behind (load shedding, after Tatbul et al.).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum ShedMode {
    /// Random rows, a fraction adapted to the overload (`shedding = 'random'`).
    Random,
    /// Whole tumbling windows of this many nanoseconds of event time, aligned at the epoch
    /// (`shedding = 'window', shed_window = '1 minute'`): windows of that size (or of a size
    /// dividing it) that remain are exact.
    Window(i64),
}

/// A stream's load-shedding policy.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ShedPolicy {
    /// What is dropped.
    pub mode: ShedMode,
    /// Shedding starts when a batch waited longer than this to enter the stream.
    pub max_lag: Duration,
}

/// The `shedding`, `max_lag` and `shed_window` options of a stream, checked.
fn shed_policy(options: &BTreeMap<&str, &str>, event_time: bool) -> Result<Option<ShedPolicy>> {
    let bad = |m: String| Err(Error::plan(sqlstate::INVALID_PARAMETER_VALUE, m));
    let max_lag = options
        .get("max_lag")
        .map(|v| parse_duration(v))
        .transpose()?
        .unwrap_or(Duration::from_secs(2));
    let mode = match options.get("shedding").copied() {
        None | Some("off") => {
            if options.contains_key("max_lag") || options.contains_key("shed_window") {
                return bad("max_lag and shed_window need shedding = 'random' or 'window'".into());
            }
            return Ok(None);
        }
        Some("random") => ShedMode::Random,
        Some("window") => {
            let Some(window) = options.get("shed_window") else {
                return bad(
                    "shedding = 'window' needs shed_window = '<the tumbling window size of the \
                     stream's queries>'"
                        .into(),
                );
            };
            if !event_time {
                return bad("shedding = 'window' needs a WATERMARK FOR column".into());
            }
            let nanos = i64::try_from(parse_duration(window)?.as_nanos()).unwrap_or(i64::MAX);
            if nanos <= 0 {
                return bad("shed_window must be positive".into());
            }
            ShedMode::Window(nanos)
        }
        Some(other) => {
            return bad(format!(
                "unknown shedding \"{other}\"; use 'random', 'window' or 'off'"
            ))
        }
    };
    if max_lag.is_zero() {
        return bad("max_lag must be positive".into());
    }
    Ok(Some(ShedPolicy { mode, max_lag }))
}

/// A declared stream.
#[derive(Debug, Clone)]
pub struct StreamDef {
    /// Normalised name.
    pub name: String,
    /// Arrow schema of its rows.
    pub schema: SchemaRef,
    /// Event time and watermark, if declared.
    pub event_time: Option<EventTimeDef>,
    /// After this much processing time without input, the watermark advances by itself.
    pub idle_timeout: Option<Duration>,
    /// Whether and how rows are dropped when the engine falls behind (`WITH (shedding = ...)`).
    pub shedding: Option<ShedPolicy>,
    /// How long its rows are kept as history (`WITH (history = ...)`).
    pub history: HistorySetting,
    /// The statement that created it, for persistence.
    pub ddl: CreateStream,
}

/// The Arrow type saql stores for a SQL column type.
pub fn arrow_type(t: &sq::DataType) -> Result<DataType> {
    use sq::DataType as S;
    Ok(match t {
        S::Bool | S::Boolean => DataType::Boolean,
        S::SmallInt(_) | S::Int2(_) => DataType::Int16,
        S::Int(_) | S::Integer(_) | S::Int4(_) | S::Int32 => DataType::Int32,
        S::BigInt(_) | S::Int8(_) | S::Int64 => DataType::Int64,
        S::Real | S::Float4 => DataType::Float32,
        S::Double(_) | S::DoublePrecision | S::Float8 | S::Float64 | S::Float(_) => {
            DataType::Float64
        }
        S::Text | S::Varchar(_) | S::String(_) => DataType::Utf8,
        S::Timestamp(_, TimezoneInfo::None | TimezoneInfo::WithoutTimeZone) => {
            DataType::Timestamp(TimeUnit::Nanosecond, None)
        }
        S::Timestamp(_, TimezoneInfo::WithTimeZone | TimezoneInfo::Tz) => {
            DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into()))
        }
        other => {
            return Err(Error::NotSupported(format!(
                "column type {other} is not supported; use BOOLEAN, SMALLINT, INT, BIGINT, REAL, \
                 DOUBLE PRECISION, TEXT, TIMESTAMP or TIMESTAMPTZ"
            )))
        }
    })
}

impl StreamDef {
    /// A stream that is no declared stream but the input of a query: another query's results,
    /// a union, a join, a subscription's view. Its event time (a column, no delay) if it has
    /// one; no idle timeout, no shedding, no history; never persisted.
    pub fn derived(name: &str, schema: SchemaRef, time_column: Option<usize>) -> StreamDef {
        StreamDef {
            name: name.to_string(),
            schema,
            event_time: time_column.map(|column| EventTimeDef {
                column,
                delay: Duration::ZERO,
            }),
            idle_timeout: None,
            shedding: None,
            history: HistorySetting::Off,
            ddl: CreateStream {
                name: Ident::new(name),
                columns: Vec::new(),
                watermark: None,
                options: Vec::new(),
                if_not_exists: false,
            },
        }
    }

    /// Whether this describes a query's or a view's results (see [`StreamDef::derived`]), not
    /// a stream: a stream always declares its columns.
    pub fn is_derived(&self) -> bool {
        self.ddl.columns.is_empty()
    }

    /// The error for reading this without an event time into `what` (windows, a
    /// `MATCH_RECOGNIZE`), saying how to give it one.
    pub fn no_event_time(&self, what: &str) -> Error {
        let message = if self.is_derived() {
            format!(
                "the results of \"{}\" have no event time, which {what} need: select \
                 window_end, or the event-time column of the stream it reads, as it is; a \
                 join of streams' results have none yet",
                self.name
            )
        } else {
            format!(
                "stream \"{}\" has no event time; declare WATERMARK FOR <column> to use {what}",
                self.name
            )
        };
        Error::plan(sqlstate::INVALID_OBJECT_DEFINITION, message)
    }

    /// Validates a `CREATE STREAM` and builds the stream's definition.
    pub fn try_new(ddl: &CreateStream) -> Result<StreamDef> {
        let name = normalize(&ddl.name);
        if ddl.columns.is_empty() {
            return Err(Error::plan(
                sqlstate::INVALID_TABLE_DEFINITION,
                format!("stream \"{name}\" must have at least one column"),
            ));
        }
        let wm_col = ddl.watermark.as_ref().map(|w| normalize(&w.column));
        let mut fields = Vec::with_capacity(ddl.columns.len());
        for c in &ddl.columns {
            let col = normalize(&c.name);
            if fields.iter().any(|f: &Field| f.name() == &col) {
                return Err(Error::plan(
                    sqlstate::DUPLICATE_COLUMN,
                    format!("column \"{col}\" specified more than once"),
                ));
            }
            if col == "window_start" || col == "window_end" {
                return Err(Error::plan(
                    sqlstate::RESERVED_NAME,
                    format!("column name \"{col}\" is reserved for window bounds"),
                ));
            }
            let is_event_time = wm_col.as_deref() == Some(col.as_str());
            fields.push(Field::new(
                col,
                arrow_type(&c.data_type)?,
                !(c.not_null || is_event_time),
            ));
        }
        let schema = Arc::new(Schema::new(fields));
        let event_time = match &ddl.watermark {
            None => None,
            Some(w) => {
                let col = normalize(&w.column);
                let (idx, field) = schema.column_with_name(&col).ok_or_else(|| {
                    Error::plan(
                        sqlstate::UNDEFINED_COLUMN,
                        format!("watermark column \"{col}\" is not a column of stream \"{name}\""),
                    )
                })?;
                if !matches!(field.data_type(), DataType::Timestamp(_, _)) {
                    return Err(Error::plan(
                        sqlstate::DATATYPE_MISMATCH,
                        format!("watermark column \"{col}\" must be TIMESTAMP or TIMESTAMPTZ"),
                    ));
                }
                Some(EventTimeDef {
                    column: idx,
                    delay: w.delay,
                })
            }
        };
        let mut idle_timeout = None;
        let mut history = HistorySetting::ServerDefault;
        let mut shedding = BTreeMap::new();
        for (k, v) in &ddl.options {
            match k.as_str() {
                "idle_timeout" => idle_timeout = Some(parse_duration(v)?),
                "history" => history = HistorySetting::parse(v)?,
                "shedding" | "max_lag" | "shed_window" => {
                    shedding.insert(k.as_str(), v.as_str());
                }
                other => {
                    return Err(Error::plan(
                        sqlstate::SYNTAX_ERROR,
                        format!(
                            "unknown stream option \"{other}\"; known options: history, \
                             idle_timeout, shedding, max_lag, shed_window"
                        ),
                    ))
                }
            }
        }
        let shedding = shed_policy(&shedding, event_time.is_some())?;
        if idle_timeout.is_some() && event_time.is_none() {
            return Err(Error::plan(
                sqlstate::SYNTAX_ERROR,
                "idle_timeout needs a WATERMARK FOR column",
            ));
        }
        Ok(StreamDef {
            name,
            schema,
            event_time,
            idle_timeout,
            shedding,
            history,
            ddl: ddl.clone(),
        })
    }
}

/// Streams and continuous queries by name.
#[derive(Debug, Default, Clone)]
pub struct Catalog {
    streams: BTreeMap<String, Arc<StreamDef>>,
    tables: BTreeMap<String, Arc<TableDef>>,
    views: BTreeMap<String, sq::CreateView>,
    queries: BTreeMap<String, CreateQuery>,
    /// Query and view names in creation order: a query or view may read one created before
    /// it.
    query_order: Vec<String>,
    sources: BTreeMap<String, CreateSource>,
    sinks: BTreeMap<String, CreateSink>,
}

impl Catalog {
    /// A catalog of the streams declared by `CREATE STREAM` statements in `sql` (other
    /// statements are an error).
    pub fn from_sql(sql: &str) -> Result<Catalog> {
        let mut catalog = Catalog::default();
        for stmt in crate::sql::parse(sql)? {
            match stmt {
                crate::sql::Statement::CreateStream(cs) => {
                    catalog.add_stream(StreamDef::try_new(&cs)?)?;
                }
                other => {
                    return Err(Error::plan(
                        sqlstate::SYNTAX_ERROR,
                        format!("expected CREATE STREAM, found {other}"),
                    ))
                }
            }
        }
        Ok(catalog)
    }

    /// A stream by normalised name.
    pub fn stream(&self, name: &str) -> Option<&Arc<StreamDef>> {
        self.streams.get(name)
    }

    /// A stream by name, or 42P01.
    pub fn require_stream(&self, name: &str) -> Result<&Arc<StreamDef>> {
        self.stream(name)
            .ok_or_else(|| Error::undefined("stream", name))
    }

    /// All streams in name order.
    pub fn streams(&self) -> impl Iterator<Item = &Arc<StreamDef>> {
        self.streams.values()
    }

    /// A table by normalised name.
    pub fn table(&self, name: &str) -> Option<&Arc<TableDef>> {
        self.tables.get(name)
    }

    /// All tables in name order.
    pub fn tables(&self) -> impl Iterator<Item = &Arc<TableDef>> {
        self.tables.values()
    }

    /// Adds a table.
    pub fn add_table(&mut self, def: TableDef) -> Result<Arc<TableDef>> {
        if self.name_taken(&def.name) {
            return Err(Error::duplicate("relation", &def.name));
        }
        let def = Arc::new(def);
        self.tables.insert(def.name.clone(), def.clone());
        Ok(def)
    }

    /// Removes a table.
    pub fn remove_table(&mut self, name: &str) -> Option<Arc<TableDef>> {
        self.tables.remove(name)
    }

    /// A view by normalised name.
    pub fn view(&self, name: &str) -> Option<&sq::CreateView> {
        self.views.get(name)
    }

    /// All views, by name.
    pub fn views(&self) -> impl Iterator<Item = (&String, &sq::CreateView)> {
        self.views.iter()
    }

    /// Adds a view (checked by the caller).
    pub fn add_view(&mut self, name: String, def: sq::CreateView) -> Result<()> {
        if self.name_taken(&name) {
            return Err(Error::duplicate("relation", &name));
        }
        self.query_order.push(name.clone());
        self.views.insert(name, def);
        Ok(())
    }

    /// Removes a view.
    pub fn remove_view(&mut self, name: &str) -> Option<sq::CreateView> {
        self.query_order.retain(|q| q != name);
        self.views.remove(name)
    }

    /// A continuous query's definition.
    pub fn query(&self, name: &str) -> Option<&CreateQuery> {
        self.queries.get(name)
    }

    /// Query names in the order they were created.
    pub fn query_order(&self) -> &[String] {
        &self.query_order
    }

    /// All queries in name order.
    pub fn queries(&self) -> impl Iterator<Item = (&String, &CreateQuery)> {
        self.queries.iter()
    }

    /// Whether a stream, table or query already has this name.
    pub fn name_taken(&self, name: &str) -> bool {
        self.streams.contains_key(name)
            || self.tables.contains_key(name)
            || self.views.contains_key(name)
            || self.queries.contains_key(name)
    }

    /// Adds a stream.
    pub fn add_stream(&mut self, def: StreamDef) -> Result<Arc<StreamDef>> {
        if self.name_taken(&def.name) {
            return Err(Error::duplicate("relation", &def.name));
        }
        let def = Arc::new(def);
        self.streams.insert(def.name.clone(), def.clone());
        Ok(def)
    }

    /// Replaces a stream's definition (its columns unchanged: `ALTER STREAM`).
    pub fn replace_stream(&mut self, def: StreamDef) -> Arc<StreamDef> {
        let def = Arc::new(def);
        self.streams.insert(def.name.clone(), def.clone());
        def
    }

    /// Removes a stream.
    pub fn remove_stream(&mut self, name: &str) -> Option<Arc<StreamDef>> {
        self.streams.remove(name)
    }

    /// Adds a query.
    pub fn add_query(&mut self, name: String, def: CreateQuery) -> Result<()> {
        if self.name_taken(&name) {
            return Err(Error::duplicate("relation", &name));
        }
        self.query_order.push(name.clone());
        self.queries.insert(name, def);
        Ok(())
    }

    /// Replaces a query's definition, keeping its place in the creation order.
    pub fn replace_query(&mut self, name: &str, def: CreateQuery) {
        self.queries.insert(name.to_string(), def);
    }

    /// Removes a query.
    pub fn remove_query(&mut self, name: &str) -> Option<CreateQuery> {
        self.query_order.retain(|q| q != name);
        self.queries.remove(name)
    }

    /// A source by normalised name.
    pub fn source(&self, name: &str) -> Option<&CreateSource> {
        self.sources.get(name)
    }

    /// All sources, by name.
    pub fn sources(&self) -> impl Iterator<Item = (&String, &CreateSource)> {
        self.sources.iter()
    }

    /// Adds a source (its definition checked by the caller); fails if the name is taken.
    pub fn add_source(&mut self, name: String, def: CreateSource) -> Result<()> {
        if self.sources.contains_key(&name) {
            return Err(Error::duplicate("source", &name));
        }
        self.sources.insert(name, def);
        Ok(())
    }

    /// Removes a source.
    pub fn remove_source(&mut self, name: &str) -> Option<CreateSource> {
        self.sources.remove(name)
    }

    /// A sink by normalised name.
    pub fn sink(&self, name: &str) -> Option<&CreateSink> {
        self.sinks.get(name)
    }

    /// Adds a sink (its definition checked by the caller); fails if the name is taken.
    pub fn add_sink(&mut self, name: String, def: CreateSink) -> Result<()> {
        if self.sinks.contains_key(&name) {
            return Err(Error::duplicate("sink", &name));
        }
        self.sinks.insert(name, def);
        Ok(())
    }

    /// Removes a sink.
    pub fn remove_sink(&mut self, name: &str) -> Option<CreateSink> {
        self.sinks.remove(name)
    }

    /// The catalog as SQL statements, streams and tables first, then sources, then queries
    /// (in creation order), then sinks, each ending with `;` and a newline.
    pub fn to_sql(&self) -> String {
        let mut out = String::new();
        for s in self.streams.values() {
            out.push_str(&s.ddl.to_string());
            out.push_str(";\n");
        }
        for t in self.tables.values() {
            out.push_str(&t.ddl.to_string());
            out.push_str(";\n");
        }
        for s in self.sources.values() {
            out.push_str(&s.to_string());
            out.push_str(";\n");
        }
        // In creation order, so that a query comes after the queries it reads.
        for name in &self.query_order {
            let text = match (self.queries.get(name), self.views.get(name)) {
                (Some(q), _) => q.to_string(),
                (None, Some(v)) => v.to_string(),
                (None, None) => continue,
            };
            out.push_str(&text);
            out.push_str(";\n");
        }
        for s in self.sinks.values() {
            out.push_str(&s.to_string());
            out.push_str(";\n");
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::sql::{parse_one, Statement};

    fn stream(sql: &str) -> Result<StreamDef> {
        match parse_one(sql)? {
            Statement::CreateStream(cs) => StreamDef::try_new(&cs),
            _ => panic!("not a stream"),
        }
    }

    #[test]
    fn maps_types_and_event_time() {
        let s = stream(
            "CREATE STREAM Events (ts TIMESTAMP, n INT, big BIGINT, x DOUBLE PRECISION, ok BOOLEAN, \
             t TEXT, tz TIMESTAMPTZ, WATERMARK FOR ts AS ts - INTERVAL '5' SECOND)",
        )
        .unwrap();
        assert_eq!(s.name, "events");
        let types: Vec<_> = s
            .schema
            .fields()
            .iter()
            .map(|f| f.data_type().clone())
            .collect();
        assert_eq!(types[1], DataType::Int32);
        assert_eq!(types[2], DataType::Int64);
        assert_eq!(types[3], DataType::Float64);
        assert_eq!(types[4], DataType::Boolean);
        assert_eq!(types[5], DataType::Utf8);
        assert_eq!(
            types[6],
            DataType::Timestamp(TimeUnit::Nanosecond, Some("UTC".into()))
        );
        assert!(!s.schema.field(0).is_nullable(), "event time is NOT NULL");
        assert_eq!(s.event_time.unwrap().delay, Duration::from_secs(5));
    }

    #[test]
    fn rejects_bad_definitions() {
        let e = stream("CREATE STREAM s (a INT, a INT)").unwrap_err();
        assert_eq!(e.sqlstate(), "42701");
        let e = stream("CREATE STREAM s (a INT, WATERMARK FOR a AS a)").unwrap_err();
        assert_eq!(e.sqlstate(), "42804");
        let e = stream("CREATE STREAM s (a INT, WATERMARK FOR b AS b)").unwrap_err();
        assert_eq!(e.sqlstate(), "42703");
        let e = stream("CREATE STREAM s (a BYTEA)").unwrap_err();
        assert_eq!(e.sqlstate(), "0A000");
        let e = stream("CREATE STREAM s (a INT) WITH (colour = 'red')").unwrap_err();
        assert_eq!(e.sqlstate(), "42601");
    }
}
