//! Plans `MATCH_RECOGNIZE` over a stream into the spec of a
//! [`PatternMatcher`](crate::operators::PatternMatcher): resolves the pattern's variables,
//! splits each `DEFINE` into conjuncts over the current row and conjuncts that read earlier
//! rows of the match, and turns `MEASURES` into expressions over per-match references.
//!
//! Inside `DEFINE v AS ...`, a bare column or `v.col` is the current row; `x.col` for another
//! variable is the last row mapped to `x` so far (NULL if none); `FIRST(x.col)`,
//! `LAST(x.col)`, `COUNT(x.*)`, `SUM/AVG/MIN/MAX(x.col)` range over the rows mapped to `x`
//! (for `v` itself, including the current row), and `PREV(col [, n])` is the row `n` before the
//! current one in the partition. Inside `MEASURES`, a bare column is the match's last row and
//! `MATCH_NUMBER()` counts the partition's matches from 1.

use crate::error::sqlstate;
use std::ops::ControlFlow;
use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, Field, Schema, SchemaRef};
use datafusion::common::DFSchema;
use datafusion::logical_expr::simplify::SimplifyContext;
use datafusion::optimizer::simplify_expressions::ExprSimplifier;
use datafusion::physical_plan::PhysicalExpr;
use datafusion::sql::planner::{PlannerContext, SqlToRel};
use datafusion::sql::sqlparser::ast::{
    self as sq, AfterMatchSkip, BinaryOperator, EmptyMatchesMode, Expr, FunctionArg,
    FunctionArgExpr, FunctionArguments, Ident, MatchRecognizePattern, MatchRecognizeSymbol,
    ObjectName, ObjectNamePart, RepetitionQuantifier, RowsPerMatch, TableFactor, Value, VisitMut,
    VisitorMut,
};

use super::catalog::{normalize, normalize_object, Catalog, StreamDef};
use super::context::PlanContext;
use super::spec::MatchRecognizeSpec;
use crate::error::{Error, Result};
use crate::operators::pattern::{
    AfterMatch, CompareOp, Comparison, CrossCondition, EmptyMatches, Measures, OutputColumn,
    Pattern, PatternSpec, Ref, RefKind, RowsPerMatch as PatternRows, Variable,
};
use crate::sql::interval::interval_duration;
use crate::sql::Clauses;

/// A planned `MATCH_RECOGNIZE`: its stream, operator spec and output schema.
pub(crate) struct PlannedPattern {
    pub stream: Arc<StreamDef>,
    pub spec: MatchRecognizeSpec,
    pub schema: SchemaRef,
}

/// Plans the `MATCH_RECOGNIZE` in `relation` and rewrites `relation` into a reference to its
/// stream (keeping the alias), whose planning schema is then the match rows' schema.
pub(crate) fn plan_match_recognize(
    relation: &mut TableFactor,
    clauses: &Clauses,
    catalog: &Catalog,
) -> Result<PlannedPattern> {
    let within = clauses.within.as_ref();
    let subsets = &clauses.subsets;
    let TableFactor::MatchRecognize {
        table,
        partition_by,
        order_by,
        measures,
        rows_per_match,
        after_match_skip,
        pattern,
        symbols,
        alias,
    } = relation
    else {
        return Err(Error::Internal("not a MATCH_RECOGNIZE".into()));
    };
    let TableFactor::Table {
        name, args: None, ..
    } = table.as_ref()
    else {
        return Err(Error::NotSupported(
            "MATCH_RECOGNIZE reads a stream by name; windows and subqueries are not supported \
             inside it"
                .into(),
        ));
    };
    let stream = catalog.require_stream(&normalize_object(name))?.clone();
    let input = stream.schema.clone();
    let Some(et) = stream.event_time.as_ref() else {
        return Err(Error::plan(
            sqlstate::INVALID_OBJECT_DEFINITION,
            format!(
                "stream \"{}\" has no event time; declare WATERMARK FOR <column> to use \
                 MATCH_RECOGNIZE",
                stream.name
            ),
        ));
    };
    let time_name = input.field(et.column).name().clone();

    let rows = match rows_per_match {
        None | Some(RowsPerMatch::OneRow) => PatternRows::One,
        Some(RowsPerMatch::AllRows(None | Some(EmptyMatchesMode::Show))) => {
            PatternRows::All(EmptyMatches::Show)
        }
        Some(RowsPerMatch::AllRows(Some(EmptyMatchesMode::Omit))) => {
            PatternRows::All(EmptyMatches::Omit)
        }
        Some(RowsPerMatch::AllRows(Some(EmptyMatchesMode::WithUnmatched))) => {
            PatternRows::All(EmptyMatches::WithUnmatched)
        }
    };
    let all_rows = rows != PatternRows::One;
    let column = |id: &Ident| -> Result<usize> {
        let name = normalize(id);
        input.index_of(&name).map_err(|_| {
            Error::plan(
                sqlstate::UNDEFINED_COLUMN,
                format!(
                    "column \"{name}\" does not exist in stream \"{}\"",
                    stream.name
                ),
            )
        })
    };
    let mut partition_cols = Vec::new();
    for e in partition_by.iter() {
        match e {
            Expr::Identifier(id) => partition_cols.push(column(id)?),
            other => {
                return Err(Error::NotSupported(format!(
                    "PARTITION BY takes columns of the stream, not {other}"
                )))
            }
        }
    }
    match order_by.as_slice() {
        [o] if matches!(&o.expr, Expr::Identifier(id) if normalize(id) == time_name)
            && o.options.asc != Some(false) => {}
        _ => {
            return Err(Error::NotSupported(format!(
                "MATCH_RECOGNIZE must be ORDER BY the stream's event-time column \"{time_name}\""
            )))
        }
    }

    // Variables: in order of first appearance in PATTERN.
    let mut names = Vec::new();
    let pattern = convert_pattern(pattern, &mut names, 0)?;
    if rows == PatternRows::All(EmptyMatches::WithUnmatched)
        && pattern.any(&|p| matches!(p, Pattern::Exclude(_)))
    {
        return Err(Error::plan(
            sqlstate::SYNTAX_ERROR,
            "ALL ROWS PER MATCH WITH UNMATCHED ROWS cannot be used with a pattern exclusion \
             {- ... -}: an excluded row would be neither returned nor unmatched",
        ));
    }
    let var_index = |id: &Ident| names.iter().position(|n| *n == normalize(id));
    // SUBSET: union variables, numbered after the pattern's variables.
    let mut subset_names: Vec<String> = Vec::new();
    let mut subset_vars: Vec<Vec<u16>> = Vec::new();
    for s in subsets {
        let name = normalize(&s.name);
        if var_index(&s.name).is_some() || subset_names.contains(&name) {
            return Err(Error::plan(
                sqlstate::SYNTAX_ERROR,
                format!("SUBSET {name} is already a pattern variable or subset; pick another name"),
            ));
        }
        let mut vars = Vec::new();
        for v in &s.vars {
            let i = var_index(v).ok_or_else(|| {
                Error::plan(
                    sqlstate::SYNTAX_ERROR,
                    format!(
                        "SUBSET {name} names \"{}\", which does not appear in PATTERN",
                        normalize(v)
                    ),
                )
            })?;
            vars.push(i as u16);
        }
        subset_names.push(name);
        subset_vars.push(vars);
    }
    let set_index = |id: &Ident| {
        var_index(id).or_else(|| {
            let name = normalize(id);
            (subset_names.iter().position(|n| *n == name)).map(|i| names.len() + i)
        })
    };
    let mut defines: Vec<Option<Expr>> = vec![None; names.len()];
    for s in symbols.iter() {
        let Some(v) = var_index(&s.symbol) else {
            return Err(Error::plan(
                sqlstate::SYNTAX_ERROR,
                format!(
                    "DEFINE names \"{}\", which does not appear in PATTERN",
                    normalize(&s.symbol)
                ),
            ));
        };
        if defines[v].replace(s.definition.clone()).is_some() {
            return Err(Error::plan(
                sqlstate::SYNTAX_ERROR,
                format!("variable \"{}\" is defined twice", names[v]),
            ));
        }
    }
    let after_match = match after_match_skip {
        None | Some(AfterMatchSkip::PastLastRow) => AfterMatch::PastLastRow,
        Some(AfterMatchSkip::ToNextRow) => AfterMatch::ToNextRow,
        Some(AfterMatchSkip::ToFirst(id)) | Some(AfterMatchSkip::ToLast(id)) => {
            let v = set_index(id).ok_or_else(|| {
                Error::plan(
                    sqlstate::SYNTAX_ERROR,
                    format!(
                        "AFTER MATCH SKIP names \"{}\", which is not a variable of PATTERN or a \
                         SUBSET",
                        normalize(id)
                    ),
                )
            })? as u16;
            if matches!(after_match_skip, Some(AfterMatchSkip::ToFirst(_))) {
                AfterMatch::ToFirst(v)
            } else {
                AfterMatch::ToLast(v)
            }
        }
    };
    let within_duration = within.map(interval_duration).transpose()?;

    let ctx = PlanContext::new();
    let mut variables = Vec::new();
    for (v, def) in defines.iter().enumerate() {
        let Some(def) = def else {
            variables.push(Variable {
                name: names[v].clone(),
                local: None,
                cross: None,
            });
            continue;
        };
        let mut local = Vec::new();
        let mut cross = Vec::new();
        let mut rw = Rewriter::new(&names, Some(v as u16), &input, &stream.name);
        rw.subset_names = subset_names.clone();
        for conjunct in conjuncts(def) {
            let mut e = conjunct.clone();
            rw.touched = false;
            rw.rewrite(&mut e)?;
            if rw.touched {
                cross.push(e);
            } else {
                local.push(e);
            }
        }
        let local = match and_all(local) {
            None => None,
            Some(e) => Some(boolean(&ctx, e, &input, &names[v])?),
        };
        let cross = if cross.is_empty() {
            None
        } else {
            let mut fields: Vec<Field> =
                input.fields().iter().map(|f| f.as_ref().clone()).collect();
            fields.extend(rw.fields());
            let schema = Arc::new(Schema::new(fields));
            let (comparisons, rest): (Vec<_>, Vec<_>) = cross
                .into_iter()
                .map(|e| (comparison(&e, &schema, input.fields().len()), e))
                .partition(|(c, _)| c.is_some());
            let predicate = match and_all(rest.into_iter().map(|(_, e)| e).collect()) {
                None => None,
                Some(e) => Some(boolean(&ctx, e, &schema, &names[v])?),
            };
            Some(CrossCondition {
                comparisons: comparisons.into_iter().filter_map(|(c, _)| c).collect(),
                predicate,
                refs: rw.refs.clone(),
                schema,
            })
        };
        variables.push(Variable {
            name: names[v].clone(),
            local,
            cross,
        });
    }

    // Output, one row per match: the partition columns, then the measures. All rows per
    // match: the partition columns, the event-time column, the measures, then the other
    // input columns.
    let mut rw = Rewriter::new(&names, None, &input, &stream.name);
    rw.subset_names = subset_names.clone();
    let mut outputs: Vec<(String, Option<Expr>, Option<usize>)> = Vec::new();
    let mut leading = partition_cols.clone();
    if all_rows && !leading.contains(&et.column) {
        leading.push(et.column);
    }
    for &c in &leading {
        outputs.push((input.field(c).name().clone(), None, Some(c)));
    }
    for m in measures.iter() {
        let name = normalize(&m.alias);
        let mut e = m.expr.clone();
        rw.rewrite(&mut e)?;
        outputs.push((name, Some(e), None));
    }
    if all_rows {
        for (c, f) in input.fields().iter().enumerate() {
            if !leading.contains(&c) {
                outputs.push((f.name().clone(), None, Some(c)));
            }
        }
    }
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
    let refs_schema = Arc::new(Schema::new(rw.fields()));
    let df = DFSchema::try_from(refs_schema.as_ref().clone())?;
    let mut exprs = Vec::new();
    let mut fields = Vec::new();
    let mut columns = Vec::new();
    for (name, e, input_column) in outputs {
        match (e, input_column) {
            (Some(e), _) => {
                let p = physical(&ctx, e, &df)?;
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
    if clauses.emit_timeout {
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
    let schema = Arc::new(Schema::new(fields));

    let matcher = PatternSpec {
        variables,
        pattern,
        partition_by: partition_cols,
        time_column: et.column,
        within: within_duration,
        emit_timeout: clauses.emit_timeout,
        after_match,
        rows_per_match: rows,
        subsets: subset_names.into_iter().zip(subset_vars.clone()).collect(),
        measures: Measures {
            refs: rw.refs,
            schema: refs_schema,
            exprs,
            columns,
        },
        input_schema: input,
        schema: schema.clone(),
    };
    let spec = MatchRecognizeSpec {
        matcher,
        defines,
        measures: measures.clone(),
        within: within.cloned(),
    };

    *relation = TableFactor::Table {
        name: ObjectName(vec![ObjectNamePart::Identifier(Ident::with_quote(
            '"',
            stream.name.clone(),
        ))]),
        alias: alias.take(),
        args: None,
        with_hints: vec![],
        version: None,
        partitions: vec![],
        with_ordinality: false,
        json_path: None,
        sample: None,
        index_hints: vec![],
    };
    Ok(PlannedPattern {
        stream,
        spec,
        schema,
    })
}

fn convert_pattern(
    p: &MatchRecognizePattern,
    names: &mut Vec<String>,
    depth: usize,
) -> Result<Pattern> {
    use MatchRecognizePattern as P;
    if depth > crate::limits::MAX_NESTING {
        return Err(Error::too_complex(format!(
            "statement too complex: PATTERN nested more than {} deep",
            crate::limits::MAX_NESTING
        )));
    }
    let depth = depth + 1;
    Ok(match p {
        P::Symbol(MatchRecognizeSymbol::Named(id)) => {
            let name = normalize(id);
            let v = match names.iter().position(|n| *n == name) {
                Some(v) => v,
                None => {
                    names.push(name);
                    names.len() - 1
                }
            };
            Pattern::Var(v)
        }
        P::Symbol(MatchRecognizeSymbol::Start) => Pattern::Start,
        P::Symbol(MatchRecognizeSymbol::End) => Pattern::End,
        P::Exclude(s) => Pattern::Exclude(Box::new(convert_pattern(
            &P::Symbol(s.clone()),
            names,
            depth,
        )?)),
        P::Permute(symbols) => {
            if symbols.len() > MAX_PERMUTE {
                return Err(Error::too_complex(format!(
                    "PERMUTE of {} variables has too many orders; at most {MAX_PERMUTE} \
                     variables may be permuted",
                    symbols.len()
                )));
            }
            let items = symbols
                .iter()
                .map(|s| convert_pattern(&P::Symbol(s.clone()), names, depth))
                .collect::<Result<Vec<_>>>()?;
            Pattern::Alt(permutations(&items))
        }
        P::Concat(ps) => Pattern::Concat(
            ps.iter()
                .map(|p| convert_pattern(p, names, depth))
                .collect::<Result<_>>()?,
        ),
        P::Alternation(ps) => Pattern::Alt(
            ps.iter()
                .map(|p| convert_pattern(p, names, depth))
                .collect::<Result<_>>()?,
        ),
        P::Group(p) => convert_pattern(p, names, depth)?,
        // `x*?`: sqlparser reads the reluctant `?` as a second quantifier.
        P::Repetition(inner, RepetitionQuantifier::AtMostOne)
            if matches!(inner.as_ref(), P::Repetition(..)) =>
        {
            let P::Repetition(x, q) = inner.as_ref() else {
                unreachable!("matched above")
            };
            repeat(convert_pattern(x, names, depth)?, q, false)?
        }
        P::Repetition(x, q) => repeat(convert_pattern(x, names, depth)?, q, true)?,
    })
}

/// A navigation offset: a whole number from `min` to 1000.
fn offset_arg(a: &FunctionArg, name: &str, min: u32) -> Result<u32> {
    let n = match a {
        FunctionArg::Unnamed(FunctionArgExpr::Expr(Expr::Value(v))) => match &v.value {
            Value::Number(n, _) => n.parse::<u32>().ok(),
            _ => None,
        },
        _ => None,
    };
    n.filter(|n| (min..=1000).contains(n)).ok_or_else(|| {
        Error::plan(
            sqlstate::INVALID_PARAMETER_VALUE,
            format!("{name}'s offset must be a whole number from {min} to 1000"),
        )
    })
}

/// Most variables in one `PERMUTE` (6! = 720 alternatives).
const MAX_PERMUTE: usize = 6;

/// Every order of `items`, as SQL:2016 prefers them: lexicographic in the order written
/// (`PERMUTE (a, b, c)` prefers `a b c`, then `a c b`, `b a c`, ...).
fn permutations(items: &[Pattern]) -> Vec<Pattern> {
    if items.len() <= 1 {
        return vec![Pattern::Concat(items.to_vec())];
    }
    let mut out = Vec::new();
    for i in 0..items.len() {
        let mut rest = items.to_vec();
        let head = rest.remove(i);
        for tail in permutations(&rest) {
            let Pattern::Concat(mut tail) = tail else {
                continue;
            };
            tail.insert(0, head.clone());
            out.push(Pattern::Concat(tail));
        }
    }
    out
}

fn repeat(inner: Pattern, q: &RepetitionQuantifier, greedy: bool) -> Result<Pattern> {
    use RepetitionQuantifier as Q;
    let (min, max) = match *q {
        Q::ZeroOrMore => (0, None),
        Q::OneOrMore => (1, None),
        Q::AtMostOne => (0, Some(1)),
        Q::Exactly(n) => (n, Some(n)),
        Q::AtLeast(n) => (n, None),
        Q::AtMost(n) => (0, Some(n)),
        Q::Range(n, m) => (n, Some(m)),
    };
    if max.is_some_and(|m| m < min) || max == Some(0) {
        return Err(Error::plan(
            sqlstate::SYNTAX_ERROR,
            format!("quantifier {q} matches nothing: its upper bound must be at least 1 and its lower bound"),
        ));
    }
    Ok(Pattern::Repeat {
        inner: Box::new(inner),
        min,
        max,
        greedy,
    })
}

/// The top-level conjuncts of a condition.
fn conjuncts(e: &Expr) -> Vec<&Expr> {
    match e {
        Expr::BinaryOp {
            left,
            op: BinaryOperator::And,
            right,
        } => {
            let mut out = conjuncts(left);
            out.extend(conjuncts(right));
            out
        }
        Expr::Nested(inner) => conjuncts(inner),
        other => vec![other],
    }
}

/// `column <op> __refN` (or reversed) on identical types, as a direct comparison.
fn comparison(e: &Expr, schema: &Schema, width: usize) -> Option<Comparison> {
    let Expr::BinaryOp { left, op, right } = e else {
        return None;
    };
    let op = match op {
        BinaryOperator::Eq => CompareOp::Eq,
        BinaryOperator::NotEq => CompareOp::NotEq,
        BinaryOperator::Lt => CompareOp::Lt,
        BinaryOperator::LtEq => CompareOp::LtEq,
        BinaryOperator::Gt => CompareOp::Gt,
        BinaryOperator::GtEq => CompareOp::GtEq,
        _ => return None,
    };
    let index = |e: &Expr| match e {
        Expr::Identifier(id) => schema.index_of(&normalize(id)).ok(),
        _ => None,
    };
    let (l, r) = (index(left)?, index(right)?);
    let (column, reference, op) = match (l < width, r < width) {
        (true, false) => (l, r, op),
        (false, true) => (
            r,
            l,
            match op {
                CompareOp::Lt => CompareOp::Gt,
                CompareOp::LtEq => CompareOp::GtEq,
                CompareOp::Gt => CompareOp::Lt,
                CompareOp::GtEq => CompareOp::LtEq,
                same => same,
            },
        ),
        _ => return None,
    };
    (schema.field(column).data_type() == schema.field(reference).data_type()).then_some(
        Comparison {
            column,
            op,
            reference: reference - width,
        },
    )
}

fn and_all(es: Vec<Expr>) -> Option<Expr> {
    es.into_iter().reduce(|a, b| Expr::BinaryOp {
        left: Box::new(a),
        op: BinaryOperator::And,
        right: Box::new(b),
    })
}

/// Plans a DEFINE condition and checks that it is boolean.
fn boolean(
    ctx: &PlanContext,
    e: Expr,
    schema: &SchemaRef,
    var: &str,
) -> Result<Arc<dyn PhysicalExpr>> {
    let df = DFSchema::try_from(schema.as_ref().clone())?;
    let p = physical(ctx, e, &df)?;
    let t = p.data_type(schema)?;
    if t != DataType::Boolean && t != DataType::Null {
        return Err(Error::plan(
            sqlstate::DATATYPE_MISMATCH,
            format!("DEFINE {var} must be a boolean condition, not {t}"),
        ));
    }
    Ok(p)
}

fn physical(ctx: &PlanContext, e: Expr, schema: &DFSchema) -> Result<Arc<dyn PhysicalExpr>> {
    let planner = SqlToRel::new(ctx);
    let logical = planner.sql_to_expr(e, schema, &mut PlannerContext::new())?;
    let info = SimplifyContext::builder()
        .with_schema(Arc::new(schema.clone()))
        .build();
    let coerced = ExprSimplifier::new(info).coerce(logical, schema)?;
    let logical = super::query::simplify(&coerced, schema)?;
    Ok(ctx.state().create_physical_expr(logical, schema)?)
}

/// Replaces references to pattern variables by columns `__ref<i>` of a reference batch.
struct Rewriter<'a> {
    names: &'a [String],
    /// The variable being defined (None inside MEASURES).
    current: Option<u16>,
    /// Names of the SUBSET variables.
    subset_names: Vec<String>,
    /// Inside `FINAL ...`.
    in_final: bool,
    input: &'a Schema,
    stream: &'a str,
    refs: Vec<Ref>,
    /// Whether the last rewrite produced a reference.
    touched: bool,
}

impl<'a> Rewriter<'a> {
    fn new(names: &'a [String], current: Option<u16>, input: &'a Schema, stream: &'a str) -> Self {
        Rewriter {
            names,
            current,
            subset_names: Vec::new(),
            input,
            stream,
            refs: Vec::new(),
            in_final: false,
            touched: false,
        }
    }

    fn rewrite(&mut self, e: &mut Expr) -> Result<()> {
        match e.visit(self) {
            ControlFlow::Break(err) => Err(err),
            ControlFlow::Continue(()) => Ok(()),
        }
    }

    /// One nullable field per reference.
    fn fields(&self) -> Vec<Field> {
        self.refs
            .iter()
            .enumerate()
            .map(|(i, r)| {
                let column = r.column.map(|c| self.input.field(c).data_type());
                Field::new(format!("__ref{i}"), r.data_type(column), true)
            })
            .collect()
    }

    fn reference(&mut self, mut r: Ref) -> Expr {
        self.touched = true;
        r.is_final = self.in_final;
        let i = match self.refs.iter().position(|x| *x == r) {
            Some(i) => i,
            None => {
                self.refs.push(r);
                self.refs.len() - 1
            }
        };
        Expr::Identifier(Ident::new(format!("__ref{i}")))
    }

    fn var(&self, id: &Ident) -> Result<u16> {
        let name = normalize(id);
        self.names
            .iter()
            .position(|n| *n == name)
            .or_else(|| {
                (self.subset_names.iter().position(|n| *n == name)).map(|i| self.names.len() + i)
            })
            .map(|v| v as u16)
            .ok_or_else(|| {
                Error::plan(
                    sqlstate::UNDEFINED_TABLE,
                    format!(
                        "\"{name}\" is not a pattern variable; the variables are {}",
                        self.names.join(", ")
                    ),
                )
            })
    }

    fn column(&self, id: &Ident) -> Result<usize> {
        let name = normalize(id);
        self.input.index_of(&name).map_err(|_| {
            Error::plan(
                sqlstate::UNDEFINED_COLUMN,
                format!(
                    "column \"{name}\" does not exist in stream \"{}\"",
                    self.stream
                ),
            )
        })
    }

    /// `x.col` or `col` as (variable, column): variable None for a bare column.
    fn operand(&self, e: &Expr) -> Result<(Option<u16>, usize)> {
        match e {
            Expr::Identifier(id) => Ok((None, self.column(id)?)),
            Expr::CompoundIdentifier(parts) if parts.len() == 2 => {
                Ok((Some(self.var(&parts[0])?), self.column(&parts[1])?))
            }
            other => Err(Error::NotSupported(format!(
                "expected a column or variable.column, found {other}"
            ))),
        }
    }

    /// Rewrites `e` if it reads pattern variables; Ok(None) leaves it to the visitor.
    fn replace(&mut self, e: &Expr) -> Result<Option<Expr>> {
        let define = self.current.is_some();
        match e {
            Expr::Identifier(id) if !define => {
                let c = self.column(id)?;
                Ok(Some(self.reference(Ref {
                    var: None,
                    column: Some(c),
                    kind: RefKind::Last,
                    is_final: false,
                    offset: 0,
                    shift: 0,
                })))
            }
            Expr::CompoundIdentifier(parts) if parts.len() == 2 => {
                let (var, c) = self.operand(e)?;
                if var.is_some() && var == self.current {
                    return Ok(Some(Expr::Identifier(parts[1].clone())));
                }
                Ok(Some(self.reference(Ref {
                    var,
                    column: Some(c),
                    kind: RefKind::Last,
                    is_final: false,
                    offset: 0,
                    shift: 0,
                })))
            }
            Expr::CompoundIdentifier(parts) => Err(Error::NotSupported(format!(
                "{} is not a pattern variable's column; write variable.column",
                parts
                    .iter()
                    .map(|p| p.to_string())
                    .collect::<Vec<_>>()
                    .join(".")
            ))),
            Expr::Function(f) => self.function(f),
            _ => Ok(None),
        }
    }

    fn function(&mut self, f: &sq::Function) -> Result<Option<Expr>> {
        let name = normalize_object(&f.name).to_ascii_uppercase();
        let kind = match name.as_str() {
            "FIRST" => RefKind::First,
            "LAST" => RefKind::Last,
            "PREV" | "NEXT" if self.current.is_none() => {
                let r = self.physical_nav(f, name == "NEXT")?;
                return Ok(Some(self.reference(r)));
            }
            "PREV" => RefKind::Prev(1),
            "COUNT" => RefKind::Count,
            "SUM" => RefKind::Sum,
            "AVG" => RefKind::Avg,
            "MIN" => RefKind::Min,
            "MAX" => RefKind::Max,
            "MATCH_NUMBER" => RefKind::MatchNumber,
            "CLASSIFIER" => RefKind::Classifier,
            "RUNNING" | "FINAL" => return self.semantics(f, name == "FINAL").map(Some),
            "NEXT" => {
                return Err(Error::NotSupported(
                    "NEXT in DEFINE would read a row that has not arrived yet; use PREV, or \
                     NEXT in MEASURES"
                        .into(),
                ))
            }
            _ => return Ok(None),
        };
        if f.filter.is_some() || f.over.is_some() || !f.within_group.is_empty() {
            return Err(Error::NotSupported(format!(
                "{name} in MATCH_RECOGNIZE takes no FILTER, OVER or WITHIN GROUP"
            )));
        }
        let args: Vec<&FunctionArg> = match &f.args {
            FunctionArguments::None => vec![],
            FunctionArguments::List(l) => {
                if l.duplicate_treatment.is_some() || !l.clauses.is_empty() {
                    return Err(Error::NotSupported(format!(
                        "{name}(DISTINCT ...) is not supported in MATCH_RECOGNIZE"
                    )));
                }
                l.args.iter().collect()
            }
            FunctionArguments::Subquery(_) => {
                return Err(Error::NotSupported(format!(
                    "{name} takes a column, not a subquery"
                )))
            }
        };
        let arg = |i: usize| match args.get(i) {
            Some(FunctionArg::Unnamed(a)) => Ok(a),
            _ => Err(Error::plan(
                sqlstate::UNDEFINED_FUNCTION,
                format!("{name} takes a column argument"),
            )),
        };
        let r = match kind {
            RefKind::Classifier => {
                if !args.is_empty() {
                    return Err(Error::NotSupported(
                        "CLASSIFIER takes no argument; compare it with a variable's name".into(),
                    ));
                }
                // In DEFINE, the row being decided is mapped to the variable being defined.
                if let Some(v) = self.current {
                    return Ok(Some(Expr::Value(
                        Value::SingleQuotedString(self.names[v as usize].clone()).into(),
                    )));
                }
                Ref {
                    var: None,
                    column: None,
                    kind,
                    is_final: false,
                    offset: 0,
                    shift: 0,
                }
            }
            RefKind::MatchNumber => {
                if self.current.is_some() || !args.is_empty() {
                    return Err(Error::NotSupported(
                        "MATCH_NUMBER() without arguments, in MEASURES only".into(),
                    ));
                }
                Ref {
                    var: None,
                    column: None,
                    kind,
                    is_final: false,
                    offset: 0,
                    shift: 0,
                }
            }
            RefKind::Prev(_) => {
                if self.current.is_none() {
                    return Err(Error::NotSupported(
                        "PREV is supported in DEFINE only".into(),
                    ));
                }
                let FunctionArgExpr::Expr(e) = arg(0)? else {
                    return Err(Error::plan(
                        sqlstate::UNDEFINED_FUNCTION,
                        "PREV takes a column",
                    ));
                };
                let (var, c) = self.operand(e)?;
                if var.is_some() && var != self.current {
                    return Err(Error::NotSupported(
                        "PREV reads the current variable's column; write PREV(col)".into(),
                    ));
                }
                let n = match args.get(1) {
                    None => 1,
                    Some(FunctionArg::Unnamed(FunctionArgExpr::Expr(Expr::Value(v)))) => {
                        match &v.value {
                            Value::Number(n, _) => {
                                n.parse::<u32>().ok().filter(|n| (1..=1000).contains(n))
                            }
                            _ => None,
                        }
                        .ok_or_else(|| {
                            Error::plan(
                                sqlstate::INVALID_PARAMETER_VALUE,
                                "PREV's offset must be a number from 1 to 1000",
                            )
                        })?
                    }
                    Some(_) => {
                        return Err(Error::plan(
                            sqlstate::INVALID_PARAMETER_VALUE,
                            "PREV's offset must be a number from 1 to 1000",
                        ))
                    }
                };
                if args.len() > 2 {
                    return Err(Error::plan(
                        sqlstate::UNDEFINED_FUNCTION,
                        "PREV takes a column and an offset",
                    ));
                }
                Ref {
                    var: None,
                    column: Some(c),
                    kind: RefKind::Prev(n),
                    is_final: false,
                    offset: 0,
                    shift: 0,
                }
            }
            _ => {
                let logical = matches!(kind, RefKind::First | RefKind::Last);
                if args.len() != 1 && !(logical && args.len() == 2) {
                    return Err(Error::plan(
                        sqlstate::UNDEFINED_FUNCTION,
                        if logical {
                            format!("{name} takes a column and an optional offset")
                        } else {
                            format!("{name} takes one argument in MATCH_RECOGNIZE")
                        },
                    ));
                }
                let offset = match args.get(1) {
                    Some(a) => offset_arg(a, &name, 0)?,
                    None => 0,
                };
                let (var, column) = match arg(0)? {
                    FunctionArgExpr::Wildcard if kind == RefKind::Count => (None, None),
                    FunctionArgExpr::QualifiedWildcard(v) if kind == RefKind::Count => {
                        let [ObjectNamePart::Identifier(id)] = v.0.as_slice() else {
                            return Err(Error::plan(
                                sqlstate::SYNTAX_ERROR,
                                format!("{v}.* is not a variable"),
                            ));
                        };
                        (Some(self.var(id)?), None)
                    }
                    FunctionArgExpr::Expr(e) => {
                        let (var, c) = self.operand(e)?;
                        (var, Some(c))
                    }
                    other => {
                        return Err(Error::plan(
                            sqlstate::UNDEFINED_FUNCTION,
                            format!("{name}({other}) is not supported"),
                        ))
                    }
                };
                // In DEFINE, LAST of the current variable (or of the whole match) is the
                // current row.
                if kind == RefKind::Last
                    && offset == 0
                    && self.current.is_some()
                    && (var.is_none() || var == self.current)
                {
                    let c = column.expect("LAST takes a column");
                    return Ok(Some(Expr::Identifier(Ident::with_quote(
                        '"',
                        self.input.field(c).name().clone(),
                    ))));
                }
                Ref {
                    var,
                    column,
                    kind,
                    is_final: false,
                    offset,
                    shift: 0,
                }
            }
        };
        Ok(Some(self.reference(r)))
    }

    /// `PREV(x, n)` / `NEXT(x, n)` in MEASURES, `x` a column, `v.col` or `FIRST`/`LAST(v.col
    /// [, m])`: the row `n` rows of the match before (after) the row `x` reads.
    fn physical_nav(&mut self, f: &sq::Function, next: bool) -> Result<Ref> {
        let word = if next { "NEXT" } else { "PREV" };
        let args: Vec<&FunctionArg> = match &f.args {
            FunctionArguments::List(l) if l.duplicate_treatment.is_none() => {
                l.args.iter().collect()
            }
            _ => vec![],
        };
        let (Some(FunctionArg::Unnamed(FunctionArgExpr::Expr(inner))), 1..=2) =
            (args.first(), args.len())
        else {
            return Err(Error::plan(
                sqlstate::UNDEFINED_FUNCTION,
                format!("{word} takes a column (or FIRST/LAST of one) and an optional offset"),
            ));
        };
        let n = match args.get(1) {
            Some(a) => offset_arg(a, word, 0)?,
            None => 1,
        };
        let mut base = match inner {
            Expr::Function(g)
                if matches!(
                    normalize_object(&g.name).to_ascii_uppercase().as_str(),
                    "FIRST" | "LAST"
                ) =>
            {
                let Some(Expr::Identifier(id)) = self.function(g)? else {
                    return Err(Error::plan(
                        sqlstate::UNDEFINED_FUNCTION,
                        format!("{word} of {g} is not supported"),
                    ));
                };
                // The nested reference was just added: take it back out as a base.
                let i: usize = id.value.trim_start_matches("__ref").parse().map_err(|_| {
                    Error::plan(
                        sqlstate::UNDEFINED_FUNCTION,
                        format!("{word} of {g} is not supported"),
                    )
                })?;
                self.refs[i].clone()
            }
            e => {
                let (var, c) = self.operand(e)?;
                Ref {
                    var,
                    column: Some(c),
                    kind: RefKind::Last,
                    is_final: false,
                    offset: 0,
                    shift: 0,
                }
            }
        };
        base.shift = if next { n as i32 } else { -(n as i32) };
        Ok(base)
    }

    /// `RUNNING f(...)` or `FINAL f(...)` (the front end writes them `RUNNING(f(...))`):
    /// the reference `f` with that semantics. FINAL is for MEASURES only.
    fn semantics(&mut self, f: &sq::Function, is_final: bool) -> Result<Expr> {
        let word = if is_final { "FINAL" } else { "RUNNING" };
        let inner = match &f.args {
            FunctionArguments::List(l) if l.args.len() == 1 => match &l.args[0] {
                FunctionArg::Unnamed(FunctionArgExpr::Expr(Expr::Function(g))) => Some(g),
                _ => None,
            },
            _ => None,
        };
        let Some(inner) = inner else {
            return Err(Error::plan(
                sqlstate::SYNTAX_ERROR,
                format!(
                    "{word} goes before a navigation or aggregate function, as in \
                     {word} LAST(a.x)"
                ),
            ));
        };
        if is_final && self.current.is_some() {
            return Err(Error::plan(
                sqlstate::SYNTAX_ERROR,
                "FINAL is not allowed in DEFINE: a row is decided before its match ends; \
                 use it in MEASURES",
            ));
        }
        let outer = std::mem::replace(&mut self.in_final, is_final);
        let out = self.function(inner);
        self.in_final = outer;
        match out? {
            Some(e) => Ok(e),
            None => Err(Error::plan(
                sqlstate::SYNTAX_ERROR,
                format!(
                    "{word} applies to FIRST, LAST, COUNT, SUM, AVG, MIN, MAX, CLASSIFIER or \
                     MATCH_NUMBER, not {}",
                    inner.name
                ),
            )),
        }
    }
}

impl VisitorMut for Rewriter<'_> {
    type Break = Error;

    fn pre_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<Error> {
        match self.replace(expr) {
            Ok(Some(e)) => {
                *expr = e;
                ControlFlow::Continue(())
            }
            Ok(None) => ControlFlow::Continue(()),
            Err(err) => ControlFlow::Break(err),
        }
    }
}
