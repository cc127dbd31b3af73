//! Window functions (`OVER`) for Flink. Flink's OVER frames end at `CURRENT ROW`, order by a
//! time attribute, and all of one SELECT's must share one window. saql's history functions end
//! at `1 PRECEDING` (the rows before this one); they are rewritten without approximation:
//! a first stage adds `LAG(arg, 1)` (the previous row's value, NULL on a partition's first row),
//! and `f(arg) OVER (ROWS BETWEEN n PRECEDING AND 1 PRECEDING)` becomes
//! `f(lagged) OVER (ROWS BETWEEN n-1 PRECEDING AND CURRENT ROW)`: the frame of `lagged` over
//! the n rows ending at this one holds exactly the values of `arg` on the n rows before it,
//! and the partition's first row adds only a NULL, which aggregates skip (so `COUNT` is 0 and
//! `AVG` NULL on an empty history, as in saql).
//!
//! Ordering by `window_end` over a windowed subquery orders by its `window_time` instead
//! (`window_end` minus 1 ms, the time attribute Flink keeps after a window aggregation).

use crate::error::sqlstate;
use std::ops::ControlFlow;

use datafusion::sql::sqlparser::ast::{
    self as sq, Expr, FunctionArg, FunctionArgExpr, FunctionArguments, Ident, NamedWindowExpr,
    Value, VisitMut, VisitorMut, WindowFrameBound, WindowFrameUnits, WindowType,
};

use super::expr::name_ident;
use crate::error::{Error, Result};
use crate::plan::catalog::{normalize, normalize_object};

/// The window functions of one SELECT, rewritten.
#[derive(Debug, Default)]
pub struct OverRewrite {
    /// `LAG(arg, 1) OVER (...) AS name` columns a first stage must add, with that stage's
    /// window (`PARTITION BY ... ORDER BY ...`).
    pub lags: Vec<(String, Expr)>,
    /// The first stage's window, when there are lags.
    pub lag_window: Option<sq::WindowSpec>,
    /// Whether a window orders by `window_end` (the input must expose `window_time`).
    pub needs_window_time: bool,
    /// How many window functions the SELECT has.
    pub functions: usize,
}

/// How a window's ORDER BY is allowed to read.
pub struct OrderRule<'a> {
    /// The event-time column of the stream the SELECT reads (directly or through subqueries).
    pub event_time: Option<&'a str>,
    /// Whether the FROM is a windowed aggregate subquery (which can expose `window_time`).
    pub windowed_input: bool,
}

/// Rewrites every window function in `projection` (named windows inlined from `named`), and
/// returns what the SELECT needs around it.
pub fn rewrite(
    projection: &mut [sq::SelectItem],
    named: &[sq::NamedWindowDefinition],
    rule: &OrderRule,
) -> Result<OverRewrite> {
    let mut v = OverVisitor {
        named,
        rule,
        out: OverRewrite::default(),
        specs: Vec::new(),
    };
    for item in projection.iter_mut() {
        if let ControlFlow::Break(e) = item.visit(&mut v) {
            return Err(e);
        }
    }
    v.specs.sort();
    v.specs.dedup();
    if v.specs.len() > 1 {
        return Err(Error::NotSupported(format!(
            "Flink computes all window functions of one SELECT over one window; this SELECT \
             uses {}: {}",
            v.specs.len(),
            v.specs.join("; ")
        )));
    }
    Ok(v.out)
}

struct OverVisitor<'a> {
    named: &'a [sq::NamedWindowDefinition],
    rule: &'a OrderRule<'a>,
    out: OverRewrite,
    specs: Vec<String>,
}

impl VisitorMut for OverVisitor<'_> {
    type Break = Error;

    fn post_visit_expr(&mut self, expr: &mut Expr) -> ControlFlow<Error> {
        if let Expr::Function(f) = expr {
            if f.over.is_some() {
                if let Err(e) = self.function(f) {
                    return ControlFlow::Break(e);
                }
            }
        }
        ControlFlow::Continue(())
    }
}

fn frame_offset(bound: &Option<Box<Expr>>) -> Result<Option<u64>> {
    match bound.as_deref() {
        None => Ok(None),
        Some(Expr::Value(v)) => match &v.value {
            Value::Number(n, _) => n
                .parse::<u64>()
                .map(Some)
                .map_err(|_| Error::NotSupported(format!("frame offset {n}"))),
            other => Err(Error::NotSupported(format!("frame offset {other}"))),
        },
        Some(other) => Err(Error::NotSupported(format!("frame offset {other}"))),
    }
}

impl OverVisitor<'_> {
    fn resolve(&self, over: &WindowType) -> Result<sq::WindowSpec> {
        match over {
            WindowType::WindowSpec(s) if s.window_name.is_none() => Ok(s.clone()),
            WindowType::WindowSpec(s) => Err(Error::NotSupported(format!(
                "a window that extends another ({s}) has no Flink translation"
            ))),
            WindowType::NamedWindow(name) => {
                let key = normalize(name);
                let def = self
                    .named
                    .iter()
                    .find(|d| normalize(&d.0) == key)
                    .ok_or_else(|| {
                        Error::plan(
                            sqlstate::WINDOWING_ERROR,
                            format!("window \"{key}\" does not exist"),
                        )
                    })?;
                match &def.1 {
                    NamedWindowExpr::WindowSpec(s) => Ok(s.clone()),
                    NamedWindowExpr::NamedWindow(other) => {
                        self.resolve(&WindowType::NamedWindow(other.clone()))
                    }
                }
            }
        }
    }

    /// The ORDER BY of a window, as Flink needs it.
    fn order(&mut self, spec: &mut sq::WindowSpec) -> Result<()> {
        let [o] = spec.order_by.as_mut_slice() else {
            return Err(Error::NotSupported(
                "Flink orders a window by one time attribute; this window has another ORDER BY"
                    .into(),
            ));
        };
        let name = match &o.expr {
            Expr::Identifier(i) => normalize(i),
            Expr::CompoundIdentifier(parts) => parts.last().map(normalize).unwrap_or_default(),
            _ => String::new(),
        };
        if o.options.asc == Some(false) {
            return Err(Error::NotSupported(
                "Flink orders windows by ascending time only".into(),
            ));
        }
        if name == "window_end" && self.rule.windowed_input {
            self.out.needs_window_time = true;
            o.expr = Expr::Identifier(Ident::new("window_time"));
            return Ok(());
        }
        if Some(name.as_str()) == self.rule.event_time {
            return Ok(());
        }
        Err(Error::NotSupported(format!(
            "Flink orders a window by a time attribute: the stream's event time, or window_end \
             of a windowed subquery; not by \"{name}\""
        )))
    }

    fn function(&mut self, f: &mut sq::Function) -> Result<()> {
        let Some(over) = &f.over else { return Ok(()) };
        let mut spec = self.resolve(over)?;
        self.order(&mut spec)?;
        if normalize_object(&f.name) == "lag" {
            // LAG reads an offset from the current row; a frame does not change it.
            spec.window_frame = None;
        } else if let Some(frame) = spec.window_frame.clone() {
            self.reframe(f, &mut spec, &frame)?;
        }
        self.out.functions += 1;
        self.specs.push(spec.to_string());
        f.over = Some(WindowType::WindowSpec(spec));
        Ok(())
    }

    /// Keeps a frame that ends at the current row; rewrites one that ends at `1 PRECEDING`
    /// over the previous row's values; refuses any other.
    fn reframe(
        &mut self,
        f: &mut sq::Function,
        spec: &mut sq::WindowSpec,
        frame: &sq::WindowFrame,
    ) -> Result<()> {
        let refused = |why: &str| {
            Error::NotSupported(format!("the window ({spec}) has no Flink translation{why}"))
        };
        if frame.units != WindowFrameUnits::Rows {
            return Err(refused("; use ROWS"));
        }
        let shifted =
            match frame
                .end_bound
                .as_ref()
                .unwrap_or(&WindowFrameBound::CurrentRow)
            {
                WindowFrameBound::CurrentRow => false,
                WindowFrameBound::Preceding(n) if frame_offset(n)? == Some(1) => true,
                _ => return Err(refused(
                    ": Flink's frames end at CURRENT ROW, and saql's history frames at 1 PRECEDING",
                )),
            };
        let WindowFrameBound::Preceding(start) = &frame.start_bound else {
            return Err(refused(""));
        };
        if shifted {
            let new_start = match frame_offset(start)? {
                None => "UNBOUNDED PRECEDING".to_string(),
                Some(0) => {
                    return Err(Error::plan(
                        sqlstate::WINDOWING_ERROR,
                        "frame starts after it ends",
                    ))
                }
                Some(1) => "CURRENT ROW".to_string(),
                Some(n) => format!("{} PRECEDING", n - 1),
            };
            self.shift_argument(f, spec)?;
            spec.window_frame = Some(parse_frame(&new_start)?);
        }
        Ok(())
    }

    /// Replaces the argument of `f` with a column holding the previous row's argument.
    fn shift_argument(&mut self, f: &mut sq::Function, spec: &sq::WindowSpec) -> Result<()> {
        let FunctionArguments::List(list) = &mut f.args else {
            return Err(Error::NotSupported(format!("{} without arguments", f.name)));
        };
        let [arg] = list.args.as_mut_slice() else {
            return Err(Error::NotSupported(format!(
                "{} with a history frame and several arguments has no Flink translation",
                f.name
            )));
        };
        let value = match arg {
            FunctionArg::Unnamed(FunctionArgExpr::Expr(e)) => e.clone(),
            // COUNT(*): count the previous rows, each a non-NULL 1.
            FunctionArg::Unnamed(FunctionArgExpr::Wildcard) => {
                Expr::value(Value::Number("1".into(), false))
            }
            other => return Err(Error::NotSupported(format!("the argument {other}"))),
        };
        let lag_window = sq::WindowSpec {
            window_name: None,
            partition_by: spec.partition_by.clone(),
            order_by: spec.order_by.clone(),
            window_frame: None,
        };
        match &self.out.lag_window {
            Some(w) if w != &lag_window => {
                return Err(Error::NotSupported(
                    "history frames over different partitions or orders in one SELECT have no \
                     Flink translation"
                        .into(),
                ))
            }
            _ => self.out.lag_window = Some(lag_window),
        }
        let key = value.to_string();
        let index = match self.out.lags.iter().position(|(_, e)| e.to_string() == key) {
            Some(i) => i,
            None => {
                self.out
                    .lags
                    .push((format!("__saql_prev_{}", self.out.lags.len()), value));
                self.out.lags.len() - 1
            }
        };
        *arg = FunctionArg::Unnamed(FunctionArgExpr::Expr(Expr::Identifier(name_ident(
            &self.out.lags[index].0,
        ))));
        Ok(())
    }
}

/// `ROWS BETWEEN <start> AND CURRENT ROW` as sqlparser's node.
fn parse_frame(start: &str) -> Result<sq::WindowFrame> {
    use datafusion::sql::sqlparser::dialect::GenericDialect;
    use datafusion::sql::sqlparser::parser::Parser;
    let text = format!("COUNT(*) OVER (ROWS BETWEEN {start} AND CURRENT ROW)");
    let e = Parser::new(&GenericDialect {})
        .try_with_sql(&text)
        .and_then(|mut p| p.parse_expr())
        .map_err(|e| Error::NotSupported(e.to_string()))?;
    match e {
        Expr::Function(sq::Function {
            over: Some(WindowType::WindowSpec(s)),
            ..
        }) => s
            .window_frame
            .ok_or_else(|| Error::NotSupported("frame".into())),
        _ => Err(Error::NotSupported("frame".into())),
    }
}
