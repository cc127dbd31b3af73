//! `ALTER CONTINUOUS QUERY q [WITH (start = ...)] AS SELECT ...`: a running query replaced,
//! its results going on to the same subscribers with the same sequence numbers.
//!
//! Without a start, the new query joins the stream's graph as any new query does, sharing the
//! operators whose specs are unchanged, which keep their state (a changed HAVING or select
//! list keeps the windows and patterns); an INVARIANT behind a changed select list that
//! learns the same takes over what the old one learned ([`crate::plan::carry`]); any other
//! operator that keeps state across rows and would start empty is refused (0A000, naming
//! it). With a start, the new query is rebuilt from the stream's history as a backfill is
//! (`statements/backfill.rs`), the old one running on meanwhile; its results during the
//! rebuild are about the past, which the old query already answered, and are not sent; at
//! the hand-over it replaces the old one, with the state of having run all along.

use std::sync::Arc;

use datafusion::arrow::record_batch::RecordBatch;

use crate::error::{sqlstate, Error, Result};
use crate::plan::catalog::normalize;
use crate::plan::spec::OperatorSpec;
use crate::plan::QueryPlan;
use crate::runtime::core::hub::{Hub, StreamHub};
use crate::runtime::core::output::QueryOutput;
use crate::runtime::core::retained::Retained;
use crate::runtime::core::stream::StreamRuntime;
use crate::runtime::engine::{BackfillSlot, Engine, Shared, StatementResult};
use crate::runtime::statements::backfill::Backfill;
use crate::runtime::statements::ddl::derived_readers;
use crate::sql::{CreateQuery, Statement};

impl Engine {
    /// Checks that query `name` can become `cq`: it exists, no other query or view reads it,
    /// and the new query reads the same stream (not a union). Returns the new plan and the
    /// stream's hub.
    fn check_alter(
        &self,
        shared: &Shared,
        name: &str,
        cq: &CreateQuery,
    ) -> Result<(QueryPlan, Arc<StreamHub>)> {
        let Some(stream) = shared.query_streams.get(name).cloned() else {
            return Err(Error::undefined("query", name));
        };
        let readers = derived_readers(shared, |p| p.queries.iter().any(|q| q == name));
        if !readers.is_empty() {
            return Err(Error::Catalog {
                sqlstate: sqlstate::DEPENDENT_OBJECTS_STILL_EXIST,
                message: format!(
                    "cannot alter query \"{name}\" because queries or views {} read it",
                    readers.join(", ")
                ),
                location: None,
            });
        }
        let plan = self.plan_query(shared, cq)?;
        if plan.stream.name != stream || plan.union.is_some() {
            return Err(Error::NotSupported(format!(
                "ALTER keeps a query on its stream: \"{name}\" reads \"{stream}\", the new \
                 query reads \"{}\"; create a new query instead",
                plan.stream.name
            )));
        }
        let hub = shared
            .hubs
            .get(&stream)
            .cloned()
            .ok_or_else(|| Error::undefined("stream", &stream))?;
        Ok((plan, hub))
    }

    /// Applies an ALTER (checked, logged, then in memory; see the module docs). With a
    /// start, the backfill prepared by [`Engine::alter_backfilled`] is taken from
    /// `shared.backfills` (replaying the log, it runs here).
    pub(in crate::runtime) fn alter_query(
        &self,
        shared: &mut Shared,
        cq: CreateQuery,
        log: bool,
    ) -> Result<Option<u64>> {
        let name = normalize(&cq.name);
        let backfilled_elsewhere =
            shared.backfilling.contains_key(&name) && !shared.backfills.contains_key(&name);
        if backfilled_elsewhere {
            return Err(being_altered(&name));
        }
        let (plan, hub) = self.check_alter(shared, &name, &cq)?;
        if log {
            plan.check_result_columns()?;
        }
        let mut hub = hub.lock();
        // A rebuild from history: the operators' state, brought to now.
        let states = match cq.start {
            Some(_) => {
                let mut run = match shared.backfills.remove(&name) {
                    Some(BackfillSlot::Prepared(run)) => {
                        run.into_inner().unwrap_or_else(|p| p.into_inner())
                    }
                    _ => {
                        let output = discarding_output(&name, &plan);
                        let (mut run, scan) = Backfill::begin(&hub, &name, &cq, &plan, output)?;
                        run.feed(&scan)?;
                        run
                    }
                };
                let (states, notice) = run.hand_over(&hub)?;
                shared
                    .backfills
                    .insert(name.clone(), BackfillSlot::Done(notice));
                Some(states)
            }
            None => None,
        };
        let old = hub
            .queries
            .remove(&name)
            .ok_or_else(|| Error::undefined("query", &name))?;
        let same_columns = old.plan.schema.fields() == plan.schema.fields();
        let output = if same_columns {
            old.output.clone()
        } else {
            let output = hub.new_output(&name, &plan);
            let rows_out = QueryOutput::lock(&old.output).rows_out();
            QueryOutput::lock(&output).restore(rows_out, &[]);
            output
        };
        let staging = format!("{name}\u{0}altered");
        let rebuilt = states.is_some();
        let attached = hub.attach_with(&staging, cq.clone(), plan, output, states);
        let fresh = attached.and_then(|()| {
            if rebuilt {
                return Ok(());
            }
            let new_path = hub.queries[&staging].path.clone();
            let carried = carry_state(&mut hub, &old.path, &new_path)?;
            match hub.graph.first_fresh_stateful(&new_path, &carried) {
                Some(op) => Err(Error::NotSupported(format!(
                    "ALTER would start the {op} of query \"{name}\" empty (its definition \
                     changed): keep it as it is, or rebuild it from history with ALTER \
                     CONTINUOUS QUERY {name} WITH (start = ...) AS ..."
                ))),
                None => Ok(()),
            }
        });
        let logged = fresh
            .and_then(|()| self.log_catalog(Statement::AlterQuery(cq.clone()).to_string(), log));
        match logged {
            Ok(seq) => {
                hub.graph.detach(&name, &old.path);
                let mut rt = hub.queries.remove(&staging).expect("just attached");
                hub.graph.rename_sink(&rt.path, &staging, &name);
                rt.def = cq.clone();
                rt.rows_in = old.rows_in;
                hub.queries.insert(name.clone(), rt);
                drop(hub);
                shared.catalog.replace_query(&name, cq);
                Ok(seq)
            }
            Err(e) => {
                hub.detach(&staging);
                hub.queries.insert(name.clone(), old);
                shared.backfills.remove(&name);
                Err(e)
            }
        }
    }

    /// `ALTER CONTINUOUS QUERY q WITH (start = ...) AS ...`: the new query rebuilt from the
    /// stream's history with no lock held, off the async runtime's workers (its progress in
    /// `SHOW QUERIES`), while q runs on; then q is replaced (see the module docs). Dropping
    /// the future stops the rebuild, and q stays as it was.
    pub(in crate::runtime) async fn alter_backfilled(
        &self,
        cq: CreateQuery,
    ) -> Result<StatementResult> {
        let name = normalize(&cq.name);
        let (run, scan, hub) = {
            let mut shared = self.write();
            if shared.backfilling.contains_key(&name) {
                return Err(being_altered(&name));
            }
            let (plan, hub) = self.check_alter(&shared, &name, &cq)?;
            let (run, scan) =
                Backfill::begin_shown(&mut shared, &hub, (&name, &cq, &plan), |_| {
                    discarding_output(&name, &plan)
                })?;
            (run, scan, hub)
        };
        let notice = self
            .backfill_then(name, Statement::AlterQuery(cq), run, scan, hub)
            .await?;
        Ok(StatementResult::CommandWithNotice {
            tag: "ALTER CONTINUOUS QUERY".into(),
            notice: notice.replacen("backfilled", "rebuilt the query over", 1),
        })
    }
}

/// 55006 for a query being rebuilt by another ALTER.
fn being_altered(name: &str) -> Error {
    Error::plan(
        sqlstate::OBJECT_IN_USE,
        format!(
            "query \"{name}\" is being created or altered WITH (start = ...) by another session: \
             wait until it is done (SHOW QUERIES shows how far it is)"
        ),
    )
}

/// Where the results of an altered query's rebuild go: nowhere (they are about the past).
fn discarding_output(name: &str, plan: &QueryPlan) -> crate::runtime::core::output::OutputHandle {
    QueryOutput::handle(name, plan.schema.clone(), Retained::with_max_bytes(0, 0))
}

/// For an altered query whose old path is `old` and new path `new`: gives each new
/// operator whose state means the same as an old one's (an INVARIANT behind a changed select
/// list, see [`crate::plan::carry`]) that state. Returns the nodes that took one.
fn carry_state(hub: &mut Hub, old: &[usize], new: &[usize]) -> Result<Vec<usize>> {
    let shared = old.iter().zip(new).take_while(|(a, b)| a == b).count();
    let input = match shared.checked_sub(1) {
        Some(last) => hub.graph.output_schema(new[last]),
        None => hub.stream.def.schema.clone(),
    };
    let specs = |hub: &Hub, path: &[usize]| -> Vec<OperatorSpec> {
        path.iter().map(|&id| hub.graph.spec(id).clone()).collect()
    };
    let (old_specs, new_specs) = (specs(hub, &old[shared..]), specs(hub, &new[shared..]));
    let carries = crate::plan::carry::carries(
        &input,
        &old_specs.iter().collect::<Vec<_>>(),
        &new_specs.iter().collect::<Vec<_>>(),
    );
    let mut carried = Vec::new();
    for c in carries {
        let (from, to) = (old[shared + c.old], new[shared + c.new]);
        // The stateless operators from the stream to the new one (shared, then new).
        let before = specs(hub, &new[..shared + c.new]);
        let stream = &hub.stream;
        let convert = |held: &[RecordBatch]| -> Result<Vec<RecordBatch>> {
            if held.iter().all(|b| b.num_rows() == 0) {
                return Ok(Vec::new());
            }
            if let Some(map) = &c.rows {
                return held.iter().map(|b| map.apply(b)).collect();
            }
            rows_past_watermark(stream, &before, held)
        };
        hub.graph.carry_state(from, to, &convert).map_err(|e| {
            Error::NotSupported(format!(
                "ALTER cannot keep what the {} of the query learned: {e}; DROP the query and \
                 CREATE it WITH (start = ...) to rebuild it from history",
                new_specs[c.new].name()
            ))
        })?;
        carried.push(to);
    }
    Ok(carried)
}

/// The rows an operator after the stateless operators `before` holds until the watermark
/// passes them, rebuilt in its new columns from the stream's recent rows past the watermark;
/// `held` are the rows it held in its old columns (as many, or the recent rows did not reach
/// back far enough).
fn rows_past_watermark(
    stream: &StreamRuntime,
    before: &[OperatorSpec],
    held: &[RecordBatch],
) -> Result<Vec<RecordBatch>> {
    let unavailable = || {
        Error::NotSupported(
            "the rows it holds until the watermark passes them are not all among the stream's \
             recent rows, and the new query computes columns from some the old one dropped"
                .into(),
        )
    };
    let time = stream
        .def
        .event_time
        .as_ref()
        .ok_or_else(unavailable)?
        .column;
    if before.iter().any(|s| !s.is_stateless()) {
        return Err(unavailable());
    }
    let mut operators = before
        .iter()
        .map(OperatorSpec::build)
        .collect::<Result<Vec<_>>>()?;
    let after =
        datafusion::arrow::array::TimestampNanosecondArray::new_scalar(stream.watermark.0.nanos());
    let mut rows = Vec::new();
    for batch in stream.recent.batches() {
        let past = datafusion::arrow::compute::kernels::cmp::gt(batch.column(time), &after)?;
        let mut batches = vec![datafusion::arrow::compute::filter_record_batch(
            &batch, &past,
        )?];
        for op in &mut operators {
            let mut out = Vec::new();
            for b in batches {
                out.extend(op.process_batch(b)?);
            }
            batches = out;
        }
        rows.extend(batches);
    }
    let count = |b: &[RecordBatch]| b.iter().map(RecordBatch::num_rows).sum::<usize>();
    if count(&rows) != count(held) {
        return Err(unavailable());
    }
    Ok(rows)
}
