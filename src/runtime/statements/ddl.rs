//! Catalog changes (CREATE/DROP of streams and queries): each is checked, appended to the
//! ingest log and made durable (fsynced, as the log's policy promises), and only then applied,
//! so that memory never holds a change the log lacks (a failed write or fsync answers an
//! error and leaves the catalog as it was) and replay applies the same changes in the same
//! order.

use crate::error::sqlstate;
use crate::runtime::engine::{BackfillSlot, Engine, Shared};
use crate::runtime::statements::backfill::Backfill;
use std::sync::Arc;

use crate::error::{Error, Result};
use crate::plan::catalog::{normalize, normalize_object};
use crate::plan::retention::HistorySetting;
use crate::plan::spec::OperatorSpec;
use crate::plan::{plan_continuous, QueryPlan, StreamDef};
use crate::runtime::connectors::sinks::SinkRuntime;
use crate::runtime::connectors::sources::SourceRuntime;
use crate::runtime::core::hub::StreamHub;
use crate::runtime::core::union::union_hub;
use crate::runtime::durability::history::{history_dir_name, History};
use crate::runtime::durability::wal::Record;
use crate::runtime::statements::backfill_union::UnionBackfill;
use crate::sinks::spec::{SinkSpec, SinkTarget};
use crate::sources::spec::{Connector, SourceSpec};
use crate::sql::{CreateQuery, Statement};

impl Engine {
    /// The history a new stream keeps, under the data directory: as its `history` option
    /// says, else as the server's default. An explicit history without a data directory is
    /// refused (55000).
    fn open_history(&self, def: &StreamDef) -> Result<Option<History>> {
        let Some(retention) = def.history.resolve(self.config.history) else {
            return Ok(None);
        };
        let Some(dir) = &self.config.data_dir else {
            if def.history == HistorySetting::ServerDefault {
                return Ok(None);
            }
            return Err(Error::plan(
                sqlstate::OBJECT_NOT_IN_PREREQUISITE_STATE,
                format!(
                    "stream \"{}\" keeps history, which needs a data directory (--data-dir)",
                    def.name
                ),
            ));
        };
        let dir = dir.join("history").join(history_dir_name(&def.name));
        let time = def.event_time.as_ref().map(|e| e.column);
        History::open(dir, def.schema.clone(), time, retention).map(Some)
    }

    /// Applies a catalog change: checks it, appends it to the log and waits until it is
    /// durable (`log`, unless it is being replayed from there), then changes memory. Returns
    /// the log sequence number.
    pub(in crate::runtime) fn ddl(
        &self,
        shared: &mut Shared,
        stmt: Statement,
        log: bool,
    ) -> Result<Option<u64>> {
        let logged = |engine: &Engine, sql: String| engine.log_catalog(sql, log);
        match stmt {
            Statement::CreateTable(ct) => self.create_table(shared, *ct, log),
            Statement::CreateView(cv) => {
                let name = normalize_object(&cv.name);
                if cv.if_not_exists && shared.catalog.view(&name).is_some() {
                    return Ok(None);
                }
                if cv.or_replace || cv.materialized || !cv.columns.is_empty() || cv.or_alter {
                    return Err(Error::NotSupported(
                        "CREATE VIEW name AS SELECT ... is supported; OR REPLACE, MATERIALIZED \
                         (use CREATE CONTINUOUS QUERY) and column lists are not"
                            .into(),
                    ));
                }
                if shared.catalog.name_taken(&name) {
                    return Err(Error::duplicate("relation", &name));
                }
                // A view is a continuous query's body: it must plan as one.
                let plan = plan_continuous(&cv.query, &Default::default(), &shared.catalog)?;
                if log {
                    plan.check_result_columns()?;
                }
                let seq = logged(self, Statement::CreateView(cv.clone()).to_string())?;
                shared.catalog.add_view(name, *cv)?;
                Ok(seq)
            }
            Statement::DropView {
                name,
                if_exists,
                cascade,
            } => {
                let name = normalize(&name);
                if shared.catalog.view(&name).is_none() {
                    if if_exists {
                        return Ok(None);
                    }
                    return Err(Error::undefined("view", &name));
                }
                self.drop_readers(shared, "view", &name, cascade, log)?;
                let seq = logged(self, format!("DROP VIEW {}", quoted(&name)))?;
                shared.catalog.remove_view(&name);
                Ok(seq)
            }
            Statement::DropTable {
                name,
                if_exists,
                cascade,
            } => self.drop_table(shared, &name, if_exists, cascade, log),
            Statement::CreateStream(cs) => {
                let name = normalize(&cs.name);
                if shared.catalog.stream(&name).is_some() && cs.if_not_exists {
                    return Ok(None);
                }
                let def = StreamDef::try_new(&cs)?;
                if shared.catalog.name_taken(&name) {
                    return Err(Error::duplicate("relation", &name));
                }
                let history = self.open_history(&def)?;
                let seq = logged(self, Statement::CreateStream(cs).to_string())?;
                let def = shared.catalog.add_stream(def)?;
                let hub = StreamHub::new(
                    def.clone(),
                    self.config.retain_rows,
                    self.config.max_query_state_bytes,
                    history,
                    self.config.workers,
                );
                shared.hubs.insert(def.name.clone(), hub);
                Ok(seq)
            }
            Statement::CreateQuery(cq) => {
                let name = normalize(&cq.name);
                if cq.if_not_exists && shared.query_streams.contains_key(&name) {
                    return Ok(None);
                }
                let backfilled_elsewhere =
                    shared.backfilling.contains_key(&name) && !shared.backfills.contains_key(&name);
                if shared.catalog.name_taken(&name) || backfilled_elsewhere {
                    return Err(Error::duplicate("relation", &name));
                }
                let plan = self.plan_query(shared, &cq)?;
                if log {
                    plan.check_result_columns()?;
                }
                if plan.union.is_some() {
                    return self.create_union_query(shared, name, cq, plan, log);
                }
                let stream = plan.stream.name.clone();
                let hub = shared
                    .hubs
                    .get(&stream)
                    .cloned()
                    .ok_or_else(|| Error::undefined("stream", &stream))?;
                // A temporal join starts from its tables' rows: their writers wait meanwhile,
                // so that every later change reaches it (see `change_table`).
                let versioned = plan.versioned_tables();
                if !versioned.is_empty() && cq.start.is_some() {
                    return Err(Error::NotSupported(format!(
                        "a query with a temporal join (FOR SYSTEM_TIME AS OF) cannot start in \
                         the past: the past versions of \"{}\" are not kept; create it without \
                         WITH (start = ...)",
                        versioned[0]
                    )));
                }
                let stores: Vec<_> = versioned
                    .iter()
                    .filter_map(|t| shared.catalog.table(t).map(|d| d.store.clone()))
                    .collect();
                let _writers: Vec<_> = stores.iter().map(|s| s.writer()).collect();
                // Attach first (it can be undone), log, then make it visible in the catalog.
                let mut hub = hub.lock();
                match cq.start {
                    Some(_) if !shared.restoring => {
                        let run = match shared.backfills.remove(&name) {
                            Some(BackfillSlot::Prepared(run)) => {
                                run.into_inner().unwrap_or_else(|p| p.into_inner())
                            }
                            _ => {
                                let output = hub.new_output(&name, &plan);
                                let (mut run, scan) =
                                    Backfill::begin(&hub, &name, &cq, &plan, output)?;
                                run.feed(&scan)?;
                                run
                            }
                        };
                        let notice = run.finish(&mut hub, &name, cq.clone(), plan)?;
                        shared
                            .backfills
                            .insert(name.clone(), BackfillSlot::Done(notice));
                    }
                    _ => hub.attach(&name, cq.clone(), plan)?,
                }
                let seq = match logged(self, Statement::CreateQuery(cq.clone()).to_string()) {
                    Ok(seq) => seq,
                    Err(e) => {
                        hub.detach(&name);
                        return Err(e);
                    }
                };
                drop(hub);
                shared.catalog.add_query(name.clone(), cq)?;
                shared.query_streams.insert(name, stream);
                Ok(seq)
            }
            Statement::AlterQuery(cq) => self.alter_query(shared, cq, log),
            Statement::AlterStream { name, options } => {
                self.alter_stream(shared, &name, options, log)
            }
            Statement::DropStream {
                name,
                if_exists,
                cascade,
            } => {
                let name = normalize(&name);
                if shared.catalog.stream(&name).is_none() {
                    if if_exists {
                        return Ok(None);
                    }
                    return Err(Error::undefined("stream", &name));
                }
                if cascade {
                    // Each sink and query is dropped (and logged) on its own, so replay needs
                    // no CASCADE.
                    let readers = derived_readers(shared, |p| reads_stream(p, &name));
                    for reader in readers.iter().rev() {
                        // Readers of a dropped query went with it.
                        self.drop_derived(shared, reader, log)?;
                    }
                    for source in writers(shared, &name) {
                        let drop = Statement::DropSource {
                            name: datafusion::sql::sqlparser::ast::Ident::with_quote('"', source),
                            if_exists: false,
                        };
                        self.ddl(shared, drop, log)?;
                    }
                }
                check_unused(shared, &name)?;
                let seq = logged(self, format!("DROP STREAM {}", quoted(&name)))?;
                shared.catalog.remove_stream(&name);
                if let Some(hub) = shared.hubs.remove(&name) {
                    let mut hub = hub.lock();
                    hub.dropped = true;
                    if let Some(history) = hub.history.take() {
                        let dir = history.dir();
                        if let Err(e) = std::fs::remove_dir_all(dir) {
                            tracing::warn!("removing the history {}: {e}", dir.display());
                        }
                    }
                }
                Ok(seq)
            }
            Statement::CreateSource(cs) => {
                let name = normalize(&cs.name);
                if shared.catalog.source(&name).is_some() {
                    if cs.if_not_exists {
                        return Ok(None);
                    }
                    return Err(Error::duplicate("source", &name));
                }
                let target = normalize(&cs.stream);
                let schema = if cs.table {
                    shared
                        .catalog
                        .table(&target)
                        .ok_or_else(|| Error::undefined("table", &target))?
                        .store
                        .schema()
                        .clone()
                } else {
                    shared.catalog.require_stream(&target)?.schema.clone()
                };
                let spec = SourceSpec::try_new(&cs, &target, &schema)?;
                if matches!(spec.connector, Connector::Kafka { .. }) && !cfg!(feature = "kafka") {
                    return Err(Error::NotSupported(
                        "Kafka sources need saql built with the \"kafka\" feature".into(),
                    ));
                }
                let seq = logged(self, Statement::CreateSource(cs.clone()).to_string())?;
                shared.catalog.add_source(name.clone(), cs)?;
                shared
                    .sources
                    .insert(name, Arc::new(SourceRuntime::new(spec)));
                Ok(seq)
            }
            Statement::DropSource { name, if_exists } => {
                let name = normalize(&name);
                let Some(def) = shared.catalog.source(&name).cloned() else {
                    if if_exists {
                        return Ok(None);
                    }
                    return Err(Error::undefined("source", &name));
                };
                let seq = logged(self, format!("DROP SOURCE {}", quoted(&name)))?;
                shared.catalog.remove_source(&name);
                if let Some(rt) = shared.sources.remove(&name) {
                    rt.stop();
                }
                let target = normalize(&def.stream);
                if def.table {
                    if let Some(t) = shared.catalog.table(&target) {
                        t.store.forget_source(&name);
                    }
                } else if let Some(hub) = shared.hubs.get(&target) {
                    hub.lock().sources.remove(&name);
                }
                Ok(seq)
            }
            Statement::CreateSink(cs) => {
                let name = normalize(&cs.name);
                if shared.catalog.sink(&name).is_some() {
                    if cs.if_not_exists {
                        return Ok(None);
                    }
                    return Err(Error::duplicate("sink", &name));
                }
                let query = normalize(&cs.query);
                let schema = {
                    let hub = shared
                        .hub_of_query(&query)
                        .ok_or_else(|| Error::undefined("query", &query))?
                        .lock();
                    let q = hub
                        .queries
                        .get(&query)
                        .ok_or_else(|| Error::undefined("query", &query))?;
                    q.plan.schema.clone()
                };
                let spec = SinkSpec::try_new(&cs, &schema)?;
                if !cfg!(feature = "server")
                    || (matches!(spec.target, SinkTarget::Kafka { .. }) && !cfg!(feature = "kafka"))
                {
                    return Err(Error::NotSupported(format!(
                        "{} sinks need saql built with the \"server\"{} feature",
                        spec.kind(),
                        if spec.kind() == "kafka" {
                            " and \"kafka\""
                        } else {
                            ""
                        }
                    )));
                }
                let seq = logged(self, Statement::CreateSink(cs.clone()).to_string())?;
                shared.catalog.add_sink(name.clone(), cs)?;
                let rt = Arc::new(SinkRuntime::new(spec, self.sink_dir()));
                if log {
                    rt.forget_stale();
                }
                shared.sinks.insert(name, rt);
                Ok(seq)
            }
            Statement::DropSink { name, if_exists } => {
                let name = normalize(&name);
                if shared.catalog.sink(&name).is_none() {
                    if if_exists {
                        return Ok(None);
                    }
                    return Err(Error::undefined("sink", &name));
                }
                let seq = logged(self, format!("DROP SINK {}", quoted(&name)))?;
                shared.catalog.remove_sink(&name);
                if let Some(rt) = shared.sinks.remove(&name) {
                    // Replay must not remove the file of a sink created again later.
                    rt.stop(log);
                }
                Ok(seq)
            }
            Statement::DropQuery {
                name,
                if_exists,
                cascade,
            } => {
                let name = normalize(&name);
                let Some(stream) = shared.query_streams.get(&name).cloned() else {
                    if if_exists {
                        return Ok(None);
                    }
                    return Err(Error::undefined("query", &name));
                };
                self.drop_readers(shared, "query", &name, cascade, log)?;
                let sinks: Vec<String> = sinks_of(shared, &name)
                    .iter()
                    .map(|s| format!("\"{s}\""))
                    .collect();
                if !sinks.is_empty() {
                    return Err(Error::Catalog {
                        sqlstate: sqlstate::DEPENDENT_OBJECTS_STILL_EXIST,
                        message: format!(
                            "cannot drop query \"{name}\" because sinks {} deliver its results; \
                             drop them first",
                            sinks.join(", ")
                        ),
                        location: None,
                    });
                }
                let seq = logged(self, format!("DROP QUERY {}", quoted(&name)))?;
                shared.query_streams.remove(&name);
                if let Some(union) = shared.unions.remove(&name) {
                    remove_taps(shared, &union, &name);
                } else if let Some(hub) = shared.hubs.get(&stream) {
                    hub.lock().detach(&name);
                }
                shared.catalog.remove_query(&name);
                Ok(seq)
            }
            other => Err(Error::Internal(format!("not a catalog change: {other}"))),
        }
    }

    /// Appends a catalog change to the log and waits until it is durable (`log`, unless it
    /// is being replayed from there).
    pub(in crate::runtime) fn log_catalog(&self, sql: String, log: bool) -> Result<Option<u64>> {
        if !log {
            return Ok(None);
        }
        let seq = self.log(&Record::Catalog { sql })?;
        self.durable(seq)?;
        Ok(seq)
    }

    /// Before dropping query or view `name`: refuses (2BP01) while queries or views read it,
    /// or with `cascade` drops them first (the latest created first).
    fn drop_readers(
        &self,
        shared: &mut Shared,
        kind: &str,
        name: &str,
        cascade: bool,
        log: bool,
    ) -> Result<()> {
        let readers = derived_readers(shared, |p| p.queries.iter().any(|q| q == name));
        if readers.is_empty() {
            return Ok(());
        }
        if !cascade {
            let list: Vec<String> = readers.iter().map(|q| format!("\"{q}\"")).collect();
            return Err(Error::Catalog {
                sqlstate: sqlstate::DEPENDENT_OBJECTS_STILL_EXIST,
                message: format!(
                    "cannot drop {kind} \"{name}\" because queries or views {} read it; drop \
                     them first, or use DROP {} {name} CASCADE",
                    list.join(", "),
                    kind.to_uppercase()
                ),
                location: None,
            });
        }
        for reader in readers.iter().rev() {
            self.drop_derived(shared, reader, log)?;
        }
        Ok(())
    }

    /// Drops a query (with its sinks) or a view, and whatever reads it, if it still exists.
    pub(in crate::runtime) fn drop_derived(
        &self,
        shared: &mut Shared,
        name: &str,
        log: bool,
    ) -> Result<()> {
        let ident = datafusion::sql::sqlparser::ast::Ident::with_quote('"', name);
        if shared.catalog.view(name).is_some() {
            let drop = Statement::DropView {
                name: ident,
                if_exists: false,
                cascade: true,
            };
            self.ddl(shared, drop, log)?;
        } else if shared.query_streams.contains_key(name) {
            self.drop_query_and_sinks(shared, name, log)?;
        }
        Ok(())
    }

    /// Drops a query and the sinks that deliver its results, each logged on its own (for
    /// CASCADE).
    pub(in crate::runtime) fn drop_query_and_sinks(
        &self,
        shared: &mut Shared,
        query: &str,
        log: bool,
    ) -> Result<()> {
        for sink in sinks_of(shared, query) {
            let drop = Statement::DropSink {
                name: datafusion::sql::sqlparser::ast::Ident::with_quote('"', sink),
                if_exists: false,
            };
            self.ddl(shared, drop, log)?;
        }
        let drop = Statement::DropQuery {
            name: datafusion::sql::sqlparser::ast::Ident::with_quote('"', query),
            if_exists: false,
            cascade: true,
        };
        self.ddl(shared, drop, log)?;
        Ok(())
    }

    /// `ALTER STREAM s SET (history = ...)`: history kept from now on, for a different span,
    /// or no longer (its segments deleted). Other options cannot change (0A000).
    fn alter_stream(
        &self,
        shared: &mut Shared,
        name: &datafusion::sql::sqlparser::ast::Ident,
        options: Vec<(String, String)>,
        log: bool,
    ) -> Result<Option<u64>> {
        let stream = normalize(name);
        let old = shared
            .catalog
            .stream(&stream)
            .ok_or_else(|| Error::undefined("stream", &stream))?;
        if let Some((key, _)) = options.iter().find(|(k, _)| k != "history") {
            return Err(Error::NotSupported(format!(
                "ALTER STREAM changes history only, not {key}; drop and create the stream to \
                 change it"
            )));
        }
        let mut ddl = old.ddl.clone();
        for (key, value) in &options {
            ddl.options.retain(|(k, _)| k != key);
            ddl.options.push((key.clone(), value.clone()));
        }
        let def = StreamDef::try_new(&ddl)?;
        let hub = shared
            .hubs
            .get(&stream)
            .cloned()
            .ok_or_else(|| Error::undefined("stream", &stream))?;
        let mut hub = hub.lock();
        let retention = def.history.resolve(self.config.history);
        let opened = match (&hub.history, retention) {
            (None, Some(_)) => self.open_history(&def)?,
            _ => None,
        };
        let alter = Statement::AlterStream {
            name: name.clone(),
            options,
        };
        let seq = self.log_catalog(alter.to_string(), log)?;
        match (retention, &mut hub.history) {
            (None, history) => {
                if let Some(h) = history.take() {
                    if let Err(e) = std::fs::remove_dir_all(h.dir()) {
                        tracing::warn!("removing the history {}: {e}", h.dir().display());
                    }
                }
            }
            (Some(r), Some(h)) => h.retention = r,
            (Some(_), history) => {
                if let Some(mut h) = opened {
                    // Its rows begin after this statement.
                    h.settle(seq.unwrap_or(0))?;
                    *history = Some(h);
                }
            }
        }
        drop(hub);
        shared.catalog.replace_stream(def);
        Ok(seq)
    }

    /// Creates a query over a `UNION ALL`: a hub of its own, fed by a tap on each stream of
    /// the union. The taps go in last, each under its stream's lock, so no row reaches a
    /// half-built union; each tells the union where its stream's watermark already is.
    fn create_union_query(
        &self,
        shared: &mut Shared,
        name: String,
        cq: CreateQuery,
        plan: QueryPlan,
        log: bool,
    ) -> Result<Option<u64>> {
        let stream = plan.stream.name.clone();
        if cq.start.is_some() && !shared.restoring {
            let run = match shared.backfills.remove(&name) {
                Some(BackfillSlot::PreparedUnion(run)) => {
                    run.into_inner().unwrap_or_else(|p| p.into_inner())
                }
                _ => {
                    // No backfill read ahead (a replay of the log): all of it now.
                    let (mut run, scans) = UnionBackfill::begin(
                        shared,
                        &name,
                        &cq,
                        plan,
                        self.config.retain_rows,
                        self.config.max_query_state_bytes,
                    )?;
                    run.feed(&scans)?;
                    run
                }
            };
            let sql = Statement::CreateQuery(cq.clone()).to_string();
            let (hub, seq, notice) = run.finish(shared, || self.log_catalog(sql, log))?;
            shared.catalog.add_query(name.clone(), cq)?;
            shared.query_streams.insert(name.clone(), stream);
            shared.unions.insert(name.clone(), hub);
            shared.backfills.insert(name, BackfillSlot::Done(notice));
            return Ok(seq);
        }
        let union = plan.union.clone().expect("a union's plan");
        let built = union_hub(
            &name,
            &union,
            plan.stream.clone(),
            self.config.retain_rows,
            self.config.max_query_state_bytes,
        )?;
        let inputs = built
            .taps
            .iter()
            .map(|(s, _)| {
                shared
                    .hubs
                    .get(s)
                    .cloned()
                    .ok_or_else(|| Error::undefined("stream", s))
            })
            .collect::<Result<Vec<_>>>()?;
        let hub = built.hub;
        hub.lock().attach(&name, cq.clone(), plan)?;
        let seq = self.log_catalog(Statement::CreateQuery(cq.clone()).to_string(), log)?;
        for (input, (_, mut tap)) in inputs.iter().zip(built.taps) {
            let mut input = input.lock();
            tap.advance(input.stream.watermark);
            input.taps.push(tap);
        }
        shared.catalog.add_query(name.clone(), cq)?;
        shared.query_streams.insert(name.clone(), stream);
        shared.unions.insert(name, hub);
        Ok(seq)
    }

    pub(in crate::runtime) fn plan_query(
        &self,
        shared: &Shared,
        cq: &CreateQuery,
    ) -> Result<QueryPlan> {
        let mut plan = plan_continuous(&cq.query, &cq.clauses, &shared.catalog)?;
        if self.config.workers > 1 {
            shard(&mut plan, self.config.workers)?;
        }
        Ok(plan)
    }
}

/// The queries and views whose plans `reads` (directly or through others), in the order
/// they were created.
pub(in crate::runtime) fn derived_readers(
    shared: &Shared,
    reads: impl Fn(&QueryPlan) -> bool,
) -> Vec<String> {
    let mut out = Vec::new();
    for (q, _) in shared.catalog.queries() {
        if let Some(hub) = shared.hub_of_query(q) {
            if let Some(rt) = hub.lock().queries.get(q) {
                if reads(&rt.plan) {
                    out.push(q.clone());
                }
            }
        }
    }
    for (v, def) in shared.catalog.views() {
        // A view has no running plan: planned again (it planned when it was created, and
        // what it reads cannot be dropped under it).
        if let Ok(plan) = plan_continuous(&def.query, &Default::default(), &shared.catalog) {
            if reads(&plan) {
                out.push(v.clone());
            }
        }
    }
    let order = shared.catalog.query_order();
    out.sort_by_key(|q| order.iter().position(|o| o == q));
    out
}

/// Whether a plan reads stream `name`, directly or through a union.
fn reads_stream(plan: &QueryPlan, name: &str) -> bool {
    plan.stream.name == name || plan.union.as_ref().is_some_and(|u| u.reads(name))
}

/// Removes the taps of union query `query` from the streams it reads.
fn remove_taps(shared: &Shared, union: &StreamHub, query: &str) {
    let streams = union
        .lock()
        .union
        .as_ref()
        .map(|u| u.streams.clone())
        .unwrap_or_default();
    for s in streams {
        if let Some(hub) = shared.hubs.get(&s) {
            hub.lock().taps.retain(|t| t.query != query);
        }
    }
}

/// The sinks that deliver the results of query `name`.
fn sinks_of(shared: &Shared, name: &str) -> Vec<String> {
    shared
        .sinks
        .iter()
        .filter(|(_, s)| s.spec.query == name)
        .map(|(n, _)| n.clone())
        .collect()
}

/// The sources that write into stream or table `name`.
pub(in crate::runtime) fn writers(shared: &Shared, name: &str) -> Vec<String> {
    shared
        .sources
        .iter()
        .filter(|(_, s)| s.spec.stream == name)
        .map(|(n, _)| n.clone())
        .collect()
}

/// Fails unless no query reads `name` and no source writes into it.
fn check_unused(shared: &Shared, name: &str) -> Result<()> {
    let sources: Vec<String> = writers(shared, name)
        .iter()
        .map(|s| format!("\"{s}\""))
        .collect();
    if !sources.is_empty() {
        return Err(Error::Catalog {
            sqlstate: sqlstate::DEPENDENT_OBJECTS_STILL_EXIST,
            message: format!(
                "cannot drop stream \"{name}\" because sources {} write into it; drop them \
                 first, or use DROP STREAM {name} CASCADE",
                sources.join(", ")
            ),
            location: None,
        });
    }
    let users: Vec<String> = derived_readers(shared, |p| reads_stream(p, name))
        .iter()
        .map(|q| format!("\"{q}\""))
        .collect();
    if !users.is_empty() {
        return Err(Error::Catalog {
            sqlstate: sqlstate::DEPENDENT_OBJECTS_STILL_EXIST,
            message: format!(
                "cannot drop stream \"{name}\" because queries or views {} read it; drop them \
                 first, or use DROP STREAM {name} CASCADE",
                users.join(", ")
            ),
            location: None,
        });
    }
    Ok(())
}

/// A name as a quoted SQL identifier.
pub(in crate::runtime) fn quoted(name: &str) -> String {
    format!("\"{}\"", name.replace('"', "\"\""))
}

/// Spreads the plan's keyed operators over `workers` replicas each, where only stateless
/// operators follow (an OUTLIER, INVARIANT or history over the results needs them whole, in
/// order). The replicas are built from the operator's spec.
fn shard(plan: &mut QueryPlan, workers: usize) -> Result<()> {
    for i in 0..plan.specs.len() {
        if !plan.specs[i + 1..].iter().all(OperatorSpec::is_stateless) {
            continue;
        }
        if plan.specs[i].build()?.shard_keys().is_none() {
            continue;
        }
        let spec = plan.specs[i].clone();
        plan.specs[i] = spec.sharded(workers);
    }
    Ok(())
}
