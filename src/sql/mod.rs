//! Extended SQL: the statements saql adds to SQL (streams, continuous queries, subscriptions,
//! COPY of streams) and a thin front-end parser that peeks the first keywords and hands plain
//! SQL to sqlparser, as DataFusion's `DFParser` does.

pub mod ast;
mod complexity;
mod copy_to;
pub mod dialect;
pub mod interval;
pub mod parser;
pub mod pattern;
pub mod sink;
mod window_tvf;

#[cfg(test)]
mod clause_tests;

pub use ast::{
    query_sql, timestamp_literal, BackfillStart, Clauses, ColumnDef, CopyFrom, CopyOut,
    CreateQuery, CreateSource, CreateStream, ExplainTarget, InvariantClause, InvariantKind,
    OutlierClause, OutlierMethod, SourceConnector, Statement, Subscribe, SubsetDef, SuppressClause,
    Training, WatermarkDef,
};
pub use copy_to::CopyTo;
pub use parser::{parse, parse_continuous, parse_one};
pub use pattern::{Quantifier, RowPattern};
pub use sink::{CreateSink, SinkConnector};
