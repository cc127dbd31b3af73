//! `FOR SYSTEM_TIME AS OF`: a stream joined with the versions of a reference table (Flink's
//! event-time temporal join), `FROM s JOIN t FOR SYSTEM_TIME AS OF s.ts ON s.x = t.k`. It
//! is planned as a lookup join ([`super::lookup`]: the equalities give the table's primary
//! key, the rest is checked on the matched pair) marked temporal, which runs as a
//! [`crate::operators::temporal_join::TemporalJoin`]. Here the AST's version clauses are
//! checked and taken out (DataFusion does not plan them).

use datafusion::sql::sqlparser::ast::{self as sq, Spanned, TableFactor, TableVersion};

use super::catalog::{normalize_object, Catalog, StreamDef};
use super::from::WindowSpec;
use crate::error::{Error, Result};

/// Refuses a version clause (`FOR SYSTEM_TIME AS OF`, `TIMESTAMP AS OF`, ...) anywhere but
/// on a reference table joined after the query's stream.
pub(super) fn check_versions(select: &sq::Select, catalog: &Catalog) -> Result<()> {
    for from in &select.from {
        if let Some((name, _)) = versioned(&from.relation) {
            return Err(Error::NotSupported(format!(
                "FOR SYSTEM_TIME AS OF goes on the table joined after the stream (FROM stream \
                 s JOIN {name} FOR SYSTEM_TIME AS OF s.ts ON ...), not on the first item of \
                 FROM"
            )));
        }
        for join in &from.joins {
            let Some((name, version)) = versioned(&join.relation) else {
                continue;
            };
            if !matches!(version, TableVersion::ForSystemTimeAsOf(_)) {
                return Err(Error::NotSupported(format!(
                    "{version} is not supported: a temporal join reads FOR SYSTEM_TIME AS OF \
                     the stream's event time"
                )));
            }
            if catalog.table(&name).is_none() {
                let what = if catalog.stream(&name).is_some() {
                    "a stream: join two streams with an interval or window join"
                } else if catalog.query(&name).is_some() || catalog.view(&name).is_some() {
                    "a query or view: join it with an interval or window join"
                } else {
                    return Err(Error::undefined("table", &name));
                };
                return Err(Error::NotSupported(format!(
                    "FOR SYSTEM_TIME AS OF reads the versions of a reference table (CREATE \
                     TABLE); \"{name}\" is {what}"
                )));
            }
        }
    }
    Ok(())
}

fn versioned(relation: &TableFactor) -> Option<(String, &TableVersion)> {
    match relation {
        TableFactor::Table {
            name,
            version: Some(v),
            ..
        } => Some((normalize_object(name), v)),
        _ => None,
    }
}

/// Takes the `FOR SYSTEM_TIME AS OF` clauses out of `select`'s joins, checking that each
/// names the stream's event-time column; returns the tables they version.
pub(super) fn take_temporal(
    select: &mut sq::Select,
    stream: &StreamDef,
    window: Option<WindowSpec>,
    reads_merge: bool,
) -> Result<Vec<String>> {
    let mut tables = Vec::new();
    let Some(from) = select.from.first_mut() else {
        return Ok(tables);
    };
    for join in &mut from.joins {
        let TableFactor::Table { name, version, .. } = &mut join.relation else {
            continue;
        };
        let Some(TableVersion::ForSystemTimeAsOf(expr)) = version.take() else {
            continue;
        };
        let table = normalize_object(name);
        if window.is_some() {
            return Err(Error::NotSupported(format!(
                "a temporal join of a window's rows or results with \"{table}\" is not \
                 supported yet: join the stream's rows (FROM stream s JOIN {table} FOR \
                 SYSTEM_TIME AS OF s.ts ...) in a query, and window its results in another"
            )));
        }
        if reads_merge {
            return Err(Error::NotSupported(format!(
                "a temporal join of a UNION ALL or a join of streams with \"{table}\" is not \
                 supported yet: join each stream with the table first"
            )));
        }
        let Some(et) = &stream.event_time else {
            return Err(Error::NotSupported(format!(
                "stream \"{}\" has no event time, so FOR SYSTEM_TIME AS OF has no time to read \
                 \"{table}\" at: declare WATERMARK FOR <column>, or use a lookup join (without \
                 FOR SYSTEM_TIME AS OF)",
                stream.name
            )));
        };
        let et_name = stream.schema.field(et.column).name();
        let named = match &expr {
            sq::Expr::Identifier(i) => Some(super::catalog::normalize(i)),
            sq::Expr::CompoundIdentifier(parts) => parts.last().map(super::catalog::normalize),
            _ => None,
        };
        if named.as_deref() != Some(et_name.as_str()) {
            return Err(Error::NotSupported(format!(
                "FOR SYSTEM_TIME AS OF {expr} is not supported: a temporal join reads the \
                 table as of the stream's event time, FOR SYSTEM_TIME AS OF {}.{et_name}",
                stream.name
            ))
            .at_span(expr.span()));
        }
        tables.push(table);
    }
    Ok(tables)
}
