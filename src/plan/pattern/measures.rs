//! Plans the rows a `MATCH_RECOGNIZE` emits: one per match (the partition columns, then the
//! MEASURES) or all rows per match (the partition columns, the event-time column, the
//! measures, then the other input columns), plus `timed_out` under EMIT TIMEOUT. MEASURES
//! are expressions over a batch of references filled per match.

use crate::error::sqlstate;
use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::common::DFSchema;
use datafusion::sql::sqlparser::ast::{Expr, Measure};

use super::super::catalog::normalize;
use super::super::context::PlanContext;
use super::define::physical;
use super::rewriter::Rewriter;
use super::variables::Variables;
use crate::error::{Error, Result};
use crate::operators::pattern::{Measures, OutputColumn};

/// What a match emits: its columns first in `leading` (input column numbers), then the
/// measures, then (all rows per match) the other input columns.
pub(super) struct OutputSpec<'a> {
    pub leading: Vec<usize>,
    pub all_rows: bool,
    pub measures: &'a [Measure],
    pub emit_timeout: bool,
}

/// The measures the matcher computes and the schema of the rows it emits.
pub(super) fn plan_measures(
    ctx: &PlanContext,
    vars: &Variables,
    input: &SchemaRef,
    stream: &str,
    out: OutputSpec<'_>,
) -> Result<(Measures, SchemaRef)> {
    let mut rw = Rewriter::new(&vars.names, None, input, stream);
    rw.subset_names = vars.subset_names.clone();
    let mut outputs: Vec<(String, Option<Expr>, Option<usize>)> = Vec::new();
    for &c in &out.leading {
        outputs.push((input.field(c).name().clone(), None, Some(c)));
    }
    for m in out.measures {
        let name = normalize(&m.alias);
        let mut e = m.expr.clone();
        rw.rewrite(&mut e)?;
        outputs.push((name, Some(e), None));
    }
    if out.all_rows {
        for (c, f) in input.fields().iter().enumerate() {
            if !out.leading.contains(&c) {
                outputs.push((f.name().clone(), None, Some(c)));
            }
        }
    }
    check_names(&outputs)?;
    let refs_schema = Arc::new(Schema::new(rw.fields()));
    let df = DFSchema::try_from(refs_schema.as_ref().clone())?;
    let mut exprs = Vec::new();
    let mut fields = Vec::new();
    let mut columns = Vec::new();
    for (name, e, input_column) in outputs {
        match (e, input_column) {
            (Some(e), _) => {
                let p = physical(ctx, e, &df)?;
                fields.push(Field::new(&name, p.data_type(&refs_schema)?, true));
                columns.push(OutputColumn::Measure(exprs.len()));
                exprs.push(p);
            }
            (None, Some(c)) => {
                let f = input.field(c);
                fields.push(Field::new(&name, f.data_type().clone(), f.is_nullable()));
                columns.push(OutputColumn::Input(c));
            }
            (None, None) => return Err(Error::Internal("an output column of nothing".into())),
        }
    }
    if out.emit_timeout {
        if fields.iter().any(|f| f.name() == "timed_out") {
            return Err(Error::plan(
                sqlstate::DUPLICATE_COLUMN,
                "column \"timed_out\" appears twice in the MATCH_RECOGNIZE output: EMIT TIMEOUT \
                 adds it; rename the measure",
            ));
        }
        fields.push(Field::new("timed_out", DataType::Boolean, false));
        columns.push(OutputColumn::TimedOut);
    }
    let measures = Measures {
        refs: rw.refs,
        schema: refs_schema,
        exprs,
        columns,
    };
    Ok((measures, Arc::new(Schema::new(fields))))
}

/// Output names are unique, and there is at least one.
fn check_names(outputs: &[(String, Option<Expr>, Option<usize>)]) -> Result<()> {
    for (i, (name, ..)) in outputs.iter().enumerate() {
        if outputs[..i].iter().any(|(n, ..)| n == name) {
            return Err(Error::plan(
                sqlstate::DUPLICATE_COLUMN,
                format!(
                    "column \"{name}\" appears twice in the MATCH_RECOGNIZE output; rename the \
                     measure"
                ),
            ));
        }
    }
    if outputs.is_empty() {
        return Err(Error::plan(
            sqlstate::SYNTAX_ERROR,
            "MATCH_RECOGNIZE needs MEASURES (or PARTITION BY) to say what a match returns",
        ));
    }
    Ok(())
}
