//! Compiling saql's streams and continuous queries to Apache Flink: one runnable PyFlink
//! program (Python holding Flink SQL) that reads each stream from a CSV file, runs every query
//! in one statement set on a local mini-cluster, and writes each query's results as CSV, the
//! way `saql run --output` does.
//!
//! The translation works from the parsed statements (saql's AST and sqlparser's), after saql's
//! own planner has accepted the query (which also gives the result schema for the sink):
//! streams and their watermarks, and reference tables as versioned tables holding their rows
//! ([`ddl`]), expressions ([`expr`]), SELECT with window TVFs, `UNION ALL`, views and queries
//! read as views ([`select`]), interval, window, lookup and temporal joins ([`join`]),
//! window functions ([`over`]), `MATCH_RECOGNIZE` ([`pattern`]), and `OUTLIER` and
//! `INVARIANT` as keyed process functions in Python ([`model`]). A construct without a
//! faithful Flink translation is an error (`0A000`) naming it and the query.
//!
//! ```
//! use saql::compile::flink;
//! use saql::plan::Catalog;
//!
//! let catalog = Catalog::from_sql(
//!     "CREATE STREAM ev (ts TIMESTAMP, host TEXT, n BIGINT, \
//!      WATERMARK FOR ts AS ts - INTERVAL '2' SECOND)",
//! )
//! .unwrap();
//! let q = match saql::sql::parse_one(
//!     "CREATE CONTINUOUS QUERY busy AS SELECT host, window_end, COUNT(*) AS n \
//!      FROM TUMBLE(ev, ts, INTERVAL '1' MINUTE) GROUP BY host, window_start, window_end",
//! )
//! .unwrap()
//! {
//!     saql::sql::Statement::CreateQuery(q) => q,
//!     _ => unreachable!(),
//! };
//! let compiled = flink::compile_query(&q, &catalog).unwrap();
//! assert!(compiled.insert.contains("TABLE(TUMBLE(TABLE ev, DESCRIPTOR(ts), INTERVAL '1' MINUTE))"));
//! ```

pub mod ddl;
pub mod expr;
mod join;
pub mod model;
pub mod over;
pub mod pattern;
mod python;
pub mod select;

use std::cell::RefCell;

use datafusion::arrow::datatypes::DataType;

use crate::error::{Error, Result};
use crate::plan::catalog::normalize;
use crate::plan::{plan_continuous, Catalog};
use crate::sql::CreateQuery;

/// The PyFlink release the generated programs are written and tested against.
pub const FLINK_VERSION: &str = "2.3.0";

/// One query compiled for Flink.
#[derive(Debug, Clone, PartialEq)]
pub struct FlinkQuery {
    /// The query's name (normalised).
    pub name: String,
    /// The streams it reads (through views too).
    pub streams: Vec<String>,
    /// The reference tables it reads, and how.
    pub tables: Vec<select::TableUse>,
    /// The views it reads (saql's views and queries), each after those it reads.
    pub views: Vec<FlinkView>,
    /// Its result columns, in order (the header of its CSV).
    pub columns: Vec<String>,
    /// Those of them that are floating point (written as saql writes them: `93`, not `93.0`).
    pub floats: Vec<String>,
    /// `CREATE TABLE <name>__sink (...)`, its path left as `{path}`.
    pub sink: String,
    /// `INSERT INTO <name>__sink SELECT ...` (from `<name>__model` when there is a model).
    pub insert: String,
    /// OUTLIER or INVARIANT: the model's parameters and the SELECT it reads (see [`model`]).
    pub model: Option<serde_json::Value>,
}

/// A stream as a Flink source table.
#[derive(Debug, Clone, PartialEq)]
pub struct FlinkStream {
    /// The stream's name.
    pub name: String,
    /// Its columns, in order.
    pub columns: Vec<String>,
    /// Those of them that are timestamps.
    pub timestamps: Vec<String>,
    /// `CREATE TABLE <name> (..., WATERMARK ...)`, its path left as `{path}`.
    pub ddl: String,
}

/// A reference table as a Flink table holding its rows.
#[derive(Debug, Clone, PartialEq)]
pub struct FlinkTable {
    /// The Flink table's name (see [`select::TableUse::flink_name`]).
    pub name: String,
    /// `CREATE TABLE <name> (..., PRIMARY KEY ... NOT ENFORCED)`, its path left as `{path}`.
    pub ddl: String,
    /// Its rows as CSV lines in its column order (no header): the table's contents when the
    /// program was compiled.
    pub rows: String,
}

/// A saql view, or a query read by another, as a Flink view.
#[derive(Debug, Clone, PartialEq)]
pub struct FlinkView {
    /// Its name.
    pub name: String,
    /// `CREATE TEMPORARY VIEW <name> AS SELECT ...`.
    pub ddl: String,
}

/// Streams and queries compiled for Flink; [`FlinkProgram::to_python`] writes the program.
#[derive(Debug, Clone, PartialEq)]
pub struct FlinkProgram {
    /// The streams the queries read.
    pub streams: Vec<FlinkStream>,
    /// The reference tables they read.
    pub tables: Vec<FlinkTable>,
    /// The views they read, each after those it reads.
    pub views: Vec<FlinkView>,
    /// The queries, in order.
    pub queries: Vec<FlinkQuery>,
}

/// Names the query in an error.
fn in_query(name: &str, e: Error) -> Error {
    match e {
        Error::NotSupported(m) => {
            Error::NotSupported(format!("query \"{name}\" cannot run on Flink: {m}"))
        }
        other => other,
    }
}

/// Compiles one continuous query (its streams must be in `catalog`).
pub fn compile_query(create: &CreateQuery, catalog: &Catalog) -> Result<FlinkQuery> {
    let name = normalize(&create.name);
    let clauses = &create.clauses;
    if clauses.suppress.is_some() {
        return Err(in_query(
            &name,
            Error::NotSupported(
                "SUPPRESS has no Flink translation (Flink SQL has no per-key alert suppression)"
                    .into(),
            ),
        ));
    }
    if create.start.is_some() {
        return Err(in_query(
            &name,
            Error::NotSupported(
                "WITH (start = ...) has no Flink translation (Flink replays history from its \
                 source, e.g. a Kafka offset or a savepoint, not from the query)"
                    .into(),
            ),
        ));
    }
    let plan = plan_continuous(&create.query, clauses, catalog)?;
    let reads = RefCell::new(select::Reads::default());
    let ctx = select::Ctx {
        catalog,
        clauses,
        reads: &reads,
    };
    let model = model::model_query(create, &plan, &ctx, &name).map_err(|e| in_query(&name, e))?;
    let insert = match &model {
        Some(m) => m.insert.clone(),
        None => {
            let translated =
                select::query_sql(&create.query, &ctx, false).map_err(|e| in_query(&name, e))?;
            let times: Vec<&str> = plan
                .schema
                .fields()
                .iter()
                .filter(|f| matches!(f.data_type(), DataType::Timestamp(..)))
                .map(|f| f.name().as_str())
                .collect();
            if times.len() > 1 && reads.borrow().streams.len() > 1 {
                // Each joined stream's time column is a time attribute, and a Flink sink
                // takes at most one: the others are cast to plain timestamps.
                let columns: Vec<String> = plan
                    .schema
                    .fields()
                    .iter()
                    .map(|f| {
                        let column = expr::name_sql(f.name());
                        match ddl::flink_type(f.data_type()) {
                            Ok(t) if times.contains(&f.name().as_str()) => {
                                format!("CAST({column} AS {t}) AS {column}")
                            }
                            _ => column,
                        }
                    })
                    .collect();
                format!(
                    "INSERT INTO {} SELECT {} FROM ({}) AS __saql_rows",
                    ddl::sink_name(&name),
                    columns.join(", "),
                    translated.sql
                )
            } else {
                format!("INSERT INTO {} {}", ddl::sink_name(&name), translated.sql)
            }
        }
    };
    let sink = ddl::sink_table(&name, &plan.schema).map_err(|e| in_query(&name, e))?;
    let reads = reads.into_inner();
    Ok(FlinkQuery {
        insert,
        model: model.map(|m| m.spec),
        streams: reads.streams,
        tables: reads.tables,
        views: reads.views,
        columns: plan
            .schema
            .fields()
            .iter()
            .map(|f| f.name().clone())
            .collect(),
        floats: plan
            .schema
            .fields()
            .iter()
            .filter(|f| f.data_type().is_floating())
            .map(|f| f.name().clone())
            .collect(),
        sink,
        name,
    })
}

impl FlinkProgram {
    /// The program for `queries`, with a source table for each stream they read, a table
    /// holding the rows each reference table they read has in `catalog` now, and their views.
    pub fn new(catalog: &Catalog, queries: Vec<FlinkQuery>) -> Result<FlinkProgram> {
        let mut streams: Vec<FlinkStream> = Vec::new();
        let mut tables: Vec<FlinkTable> = Vec::new();
        let mut views: Vec<FlinkView> = Vec::new();
        for q in &queries {
            for stream in &q.streams {
                if streams.iter().any(|s| s.name == *stream) {
                    continue;
                }
                let def = catalog.require_stream(stream)?;
                let fields = def.schema.fields();
                streams.push(FlinkStream {
                    name: def.name.clone(),
                    columns: fields.iter().map(|f| f.name().clone()).collect(),
                    timestamps: fields
                        .iter()
                        .filter(|f| matches!(f.data_type(), DataType::Timestamp(..)))
                        .map(|f| f.name().clone())
                        .collect(),
                    ddl: ddl::source_table(def)?,
                });
            }
            for used in &q.tables {
                let name = used.flink_name();
                if tables.iter().any(|t| t.name == name) {
                    continue;
                }
                let def = catalog
                    .table(&used.table)
                    .ok_or_else(|| Error::undefined("table", &used.table))?;
                tables.push(FlinkTable {
                    ddl: ddl::reference_table(def, used.versioned)?,
                    rows: ddl::table_rows(def)?,
                    name,
                });
            }
            for view in &q.views {
                if !views.iter().any(|v| v.name == view.name) {
                    views.push(view.clone());
                }
            }
        }
        Ok(FlinkProgram {
            streams,
            tables,
            views,
            queries,
        })
    }

    /// The runnable PyFlink program; `origin` (the source files) goes into its docstring.
    pub fn to_python(&self, origin: &str) -> String {
        python::program(self, origin)
    }
}

#[cfg(test)]
mod tests;
