//! Reference tables: `CREATE TABLE`, `DROP TABLE`, `SHOW TABLES`, and the statements that
//! change their rows (`INSERT [ON CONFLICT]`, `UPDATE`, `DELETE`, `TRUNCATE`, `COPY`).
//!
//! A change is one statement's effect ([`TableChange`]). It is checked against the rows
//! (keys unique and not NULL, the table's row and byte limits) with the table's writer
//! right held, appended to the ingest log as one frame, applied once durable, and only then
//! acknowledged; so a crash keeps a statement's change whole or not at all, and changes are
//! applied in log order. The queries that join the table read it as it is when each of
//! their rows is processed (a temporal join: as it was at the row's event time, see
//! [`crate::operators::temporal_join`]); a change never re-emits results already sent.

use ahash::{AHashMap, AHashSet};
use std::sync::Arc;

use datafusion::arrow::array::{Array, ArrayRef, RecordBatch, UInt32Array};
use datafusion::arrow::compute::{cast_with_options, take, CastOptions};
use datafusion::arrow::datatypes::DataType;
use datafusion::arrow::util::display::array_value_to_string;
use datafusion::sql::sqlparser::ast::{self as sq, Ident};

use crate::error::{sqlstate, Error, Result};
use crate::operators::lookup::store::{RowId, TableRows};
use crate::operators::lookup::TableChange;
use crate::plan::catalog::{normalize, normalize_object};
use crate::plan::TableDef;
use crate::runtime::core::door::Change;
use crate::runtime::core::hub::StreamHub;
use crate::runtime::durability::wal::Record;
use crate::runtime::engine::{Engine, Shared, StatementResult};
use crate::runtime::statements::ddl::{derived_readers, quoted, writers};
use crate::runtime::statements::show::{int_column, rows_result, text_column};
use crate::sources::insert;
use crate::sources::param::Param;
use crate::sql::Statement;

/// The hubs of the streams whose queries join table `table` `FOR SYSTEM_TIME AS OF`, in the
/// order of their streams' names (the order hubs are held in together).
pub(in crate::runtime) fn versioning_hubs(shared: &Shared, table: &str) -> Vec<Arc<StreamHub>> {
    let mut names: Vec<&String> = shared.hubs.keys().collect();
    names.sort();
    names
        .into_iter()
        .map(|n| &shared.hubs[n])
        .filter(|hub| {
            hub.lock()
                .queries
                .values()
                .any(|q| q.plan.versions_table(table))
        })
        .cloned()
        .collect()
}

impl Engine {
    /// `CREATE TABLE`: a keyed table with no rows.
    pub(in crate::runtime) fn create_table(
        &self,
        shared: &mut Shared,
        ct: sq::CreateTable,
        log: bool,
    ) -> Result<Option<u64>> {
        let name = normalize_object(&ct.name);
        if shared.catalog.table(&name).is_some() && ct.if_not_exists {
            return Ok(None);
        }
        let def = TableDef::try_new(&ct)?;
        if shared.catalog.name_taken(&name) {
            return Err(Error::duplicate("relation", &name));
        }
        let seq = self.log_catalog(Statement::CreateTable(Box::new(ct)).to_string(), log)?;
        shared.catalog.add_table(def)?;
        Ok(seq)
    }

    /// `DROP TABLE`: refused (2BP01) while queries read it, unless `CASCADE` drops them.
    pub(in crate::runtime) fn drop_table(
        &self,
        shared: &mut Shared,
        name: &Ident,
        if_exists: bool,
        cascade: bool,
        log: bool,
    ) -> Result<Option<u64>> {
        let name = normalize(name);
        if shared.catalog.table(&name).is_none() {
            if if_exists {
                return Ok(None);
            }
            return Err(Error::undefined("table", &name));
        }
        let readers = table_readers(shared, &name);
        if !readers.is_empty() && !cascade {
            let list: Vec<String> = readers.iter().map(|q| format!("\"{q}\"")).collect();
            return Err(Error::Catalog {
                sqlstate: sqlstate::DEPENDENT_OBJECTS_STILL_EXIST,
                message: format!(
                    "cannot drop table \"{name}\" because queries {} read it; drop them first, \
                     or use DROP TABLE {name} CASCADE",
                    list.join(", ")
                ),
                location: None,
            });
        }
        let sources = writers(shared, &name);
        if !sources.is_empty() && !cascade {
            let list: Vec<String> = sources.iter().map(|s| format!("\"{s}\"")).collect();
            return Err(Error::Catalog {
                sqlstate: sqlstate::DEPENDENT_OBJECTS_STILL_EXIST,
                message: format!(
                    "cannot drop table \"{name}\" because sources {} write into it; drop them \
                     first, or use DROP TABLE {name} CASCADE",
                    list.join(", ")
                ),
                location: None,
            });
        }
        for reader in readers.iter().rev() {
            // Readers of a dropped query went with it.
            self.drop_derived(shared, reader, log)?;
        }
        for source in sources {
            let drop = Statement::DropSource {
                name: Ident::with_quote('"', source),
                if_exists: false,
            };
            self.ddl(shared, drop, log)?;
        }
        let seq = self.log_catalog(format!("DROP TABLE {}", quoted(&name)), log)?;
        shared.catalog.remove_table(&name);
        Ok(seq)
    }

    /// Checks, logs and applies one statement's change to a table: `make` builds it from the
    /// rows as they are, with the table's writer right held until it is applied. Returns
    /// what `make` counted (the rows the statement affected).
    ///
    /// The streams whose queries join the table `FOR SYSTEM_TIME AS OF` take the change too,
    /// at its place in their log order: it waits among their changes until durable, as their
    /// rows do (their hubs are held while it is logged, so it is queued in sequence order).
    pub(in crate::runtime) fn change_table(
        &self,
        def: &TableDef,
        make: impl FnOnce(&TableRows) -> Result<(TableChange, usize)>,
    ) -> Result<usize> {
        // The catalog before the writer right (as DDL takes them): a query created later
        // starts from the rows as this change leaves them.
        let shared = self.read();
        let _writer = def.store.writer();
        let readers = versioning_hubs(&shared, &def.name);
        drop(shared);
        let (change, count) = {
            let rows = def.store.read();
            let (change, count) = make(&rows)?;
            check_limits(def, &rows, &change)?;
            (change, count)
        };
        if change.is_empty() {
            return Ok(count);
        }
        let record = Record::Table {
            table: def.name.clone(),
            change,
        };
        let seq = {
            let mut held: Vec<_> = readers.iter().map(|h| h.lock()).collect();
            let seq = self.log(&record)?;
            let Record::Table { change, .. } = &record else {
                unreachable!("built above")
            };
            let change = Arc::new(change.clone());
            for hub in &mut held {
                let table = Change::Table {
                    table: def.name.clone(),
                    change: change.clone(),
                };
                match seq {
                    Some(seq) => hub.pending.push(seq, table),
                    None => {
                        hub.apply_change(table);
                    }
                }
            }
            seq
        };
        let durable = self.durable(seq);
        let through = self.durable_through();
        for hub in &readers {
            let mut hub = hub.lock();
            match &durable {
                Ok(()) => hub.apply_durable(through),
                Err(_) => hub.discard_undurable(through),
            }
        }
        durable?;
        let Record::Table { change, .. } = record else {
            unreachable!("built above")
        };
        def.store.apply(&change, seq.unwrap_or(0))?;
        Ok(count)
    }

    /// `INSERT INTO table`, with `ON CONFLICT (key) DO NOTHING | DO UPDATE SET c =
    /// EXCLUDED.c, ...`; without it a key that exists (or repeats) is 23505.
    pub(in crate::runtime) fn insert_into_table(
        &self,
        def: &TableDef,
        ins: &sq::Insert,
        params: &[Param],
    ) -> Result<StatementResult> {
        if ins.returning.is_some() {
            return Err(Error::NotSupported(
                "INSERT ... RETURNING is not supported".into(),
            ));
        }
        let conflict = on_conflict(ins, def)?;
        let batch = insert::insert_batch(ins, def.store.schema(), params)?;
        let count = self.change_table(def, |rows| upsert(def, rows, &batch, &conflict))?;
        Ok(StatementResult::Command(format!("INSERT 0 {count}")))
    }

    /// Rows decoded by a COPY into a table: each key must be new (23505 otherwise), as an
    /// INSERT without ON CONFLICT.
    pub(in crate::runtime) fn copy_into_table(
        &self,
        def: &TableDef,
        batches: &[RecordBatch],
    ) -> Result<u64> {
        let batch = datafusion::arrow::compute::concat_batches(def.store.schema(), batches)?;
        let count = self.change_table(def, |rows| upsert(def, rows, &batch, &Conflict::Error))?;
        Ok(count as u64)
    }

    /// `DELETE FROM table [WHERE ...]`: the keys of the rows the condition selects (found by
    /// an ad hoc SELECT over the table) are deleted in one change.
    pub(in crate::runtime) async fn delete_from_table(
        &self,
        def: Arc<TableDef>,
        del: &sq::Delete,
        params: &[Param],
        session: &crate::runtime::pg::functions::SessionInfo,
    ) -> Result<StatementResult> {
        if del.returning.is_some() || del.using.is_some() || del.limit.is_some() {
            return Err(Error::NotSupported(
                "DELETE with RETURNING, USING or LIMIT is not supported".into(),
            ));
        }
        let key_cols = key_columns(&def);
        let select = select_sql(&def, &key_cols.join(", "), del.selection.as_ref());
        let keys = self.select_for_change(&select, params, session).await?;
        let keys = conform(keys, def.store.key_schema())?;
        let count = self.change_table(&def, |rows| {
            let encoded = rows.encode_keys(keys.columns())?;
            let mut seen = AHashSet::new();
            let n = encoded
                .iter()
                .filter(|k| rows.contains(k.as_ref()) && seen.insert(k.data()))
                .count();
            Ok((
                TableChange {
                    deletes: vec![keys.clone()],
                    ..Default::default()
                },
                n,
            ))
        })?;
        Ok(StatementResult::Command(format!("DELETE {count}")))
    }

    /// `UPDATE table SET c = expr, ... [WHERE ...]`: the selected rows, recomputed by an ad
    /// hoc SELECT, replace their old versions in one change (a changed key moves the row).
    pub(in crate::runtime) async fn update_table(
        &self,
        def: Arc<TableDef>,
        upd: &sq::Update,
        params: &[Param],
        session: &crate::runtime::pg::functions::SessionInfo,
    ) -> Result<StatementResult> {
        if upd.returning.is_some() || upd.from.is_some() || !upd.table.joins.is_empty() {
            return Err(Error::NotSupported(
                "UPDATE with RETURNING, FROM or joins is not supported".into(),
            ));
        }
        let schema = def.store.schema().clone();
        let mut values: Vec<String> = schema.fields().iter().map(|f| quoted(f.name())).collect();
        for a in &upd.assignments {
            let sq::AssignmentTarget::ColumnName(target) = &a.target else {
                return Err(Error::NotSupported(
                    "UPDATE ... SET (a, b) = ... is not supported; assign columns one by one"
                        .into(),
                ));
            };
            let col = normalize_object(target);
            let Some(i) = schema.fields().iter().position(|f| f.name() == &col) else {
                return Err(Error::plan(
                    sqlstate::UNDEFINED_COLUMN,
                    format!(
                        "column \"{col}\" of relation \"{}\" does not exist",
                        def.name
                    ),
                ));
            };
            values[i] = format!("({})", a.value);
        }
        let keys = key_columns(&def);
        let list = keys.iter().chain(&values).cloned().collect::<Vec<_>>();
        let select = select_sql(&def, &list.join(", "), upd.selection.as_ref());
        let found = self.select_for_change(&select, params, session).await?;
        let k = keys.len();
        let old_keys = RecordBatch::try_new(
            def.store.key_schema().clone(),
            found.columns()[..k].to_vec(),
        )
        .map_err(|e| Error::Internal(format!("UPDATE's old keys: {e}")))?;
        let new_rows = conform(
            RecordBatch::try_new(
                Arc::new(datafusion::arrow::datatypes::Schema::new(
                    found.schema().fields()[k..].to_vec(),
                )),
                found.columns()[k..].to_vec(),
            )?,
            &schema,
        )?;
        let count = self.change_table(&def, |rows| {
            let old = rows.encode_keys(old_keys.columns())?;
            let old: AHashSet<&[u8]> = old.iter().map(|k| k.data()).collect();
            let new = rows.encode_keys(def.store.keys_of(&new_rows)?.columns())?;
            let mut seen = AHashSet::new();
            for (i, k) in new.iter().enumerate() {
                let k = k.data();
                let taken = rows.contains(k) && !old.contains(k);
                if taken || !seen.insert(k) {
                    return Err(duplicate_key(def.as_ref(), &new_rows, i));
                }
            }
            Ok((
                TableChange {
                    deletes: vec![old_keys.clone()],
                    upserts: vec![new_rows.clone()],
                    ..Default::default()
                },
                new_rows.num_rows(),
            ))
        })?;
        Ok(StatementResult::Command(format!("UPDATE {count}")))
    }

    /// `TRUNCATE table`.
    pub(in crate::runtime) fn truncate_table(&self, def: &TableDef) -> Result<StatementResult> {
        self.change_table(def, |rows| {
            Ok((
                TableChange {
                    truncate: true,
                    ..Default::default()
                },
                rows.len(),
            ))
        })?;
        Ok(StatementResult::Command("TRUNCATE TABLE".into()))
    }

    /// Rows loaded into table `name` as upserts by key (the last row of a key in the batch
    /// wins), in one change, durable before it returns: how `saql run --input TABLE=PATH`
    /// fills a reference table. The batch must have the table's columns.
    pub fn upsert_table(&self, name: &str, batch: &RecordBatch) -> Result<usize> {
        let def = self
            .read()
            .catalog
            .table(name)
            .cloned()
            .ok_or_else(|| Error::undefined("table", name))?;
        self.upsert_from_source(&def, batch, None)
    }

    /// Rows a source read into a table, with the source's progress after them (if from a
    /// source): each row replaces the row of its key (the last of a key in the batch wins),
    /// in one change.
    pub(in crate::runtime) fn upsert_from_source(
        &self,
        def: &TableDef,
        batch: &RecordBatch,
        source: Option<(String, String)>,
    ) -> Result<usize> {
        self.change_table(def, |rows| {
            let keys = rows.encode_keys(def.store.keys_of(batch)?.columns())?;
            let mut last = AHashMap::with_capacity(keys.num_rows());
            for (i, k) in keys.iter().enumerate() {
                last.insert(k.data(), i as u32);
            }
            let mut idx: Vec<u32> = last.into_values().collect();
            idx.sort_unstable();
            let upserts = if idx.len() == batch.num_rows() {
                vec![batch.clone()]
            } else {
                vec![take_rows(batch, &idx)?]
            };
            let n = idx.len();
            Ok((
                TableChange {
                    upserts,
                    source,
                    ..Default::default()
                },
                n,
            ))
        })
    }

    /// Runs the SELECT that finds the rows a DELETE or UPDATE changes, as one batch.
    async fn select_for_change(
        &self,
        select: &str,
        params: &[Param],
        session: &crate::runtime::pg::functions::SessionInfo,
    ) -> Result<RecordBatch> {
        let stmt = crate::sql::parse_one(select)?;
        let Statement::Sql(stmt) = stmt else {
            return Err(Error::Internal(format!("not a SELECT: {select}")));
        };
        let ctx = crate::runtime::statements::adhoc::context(&self.read(), session)?;
        let rows = crate::runtime::statements::adhoc::select(ctx, *stmt, params, session).await?;
        let schema = rows.schema().clone();
        let batches = rows.collect().await?;
        Ok(datafusion::arrow::compute::concat_batches(
            &schema, &batches,
        )?)
    }
}

/// What an INSERT does with a key that exists.
enum Conflict {
    /// 23505.
    Error,
    /// `ON CONFLICT DO NOTHING`: the row is skipped.
    Nothing,
    /// `ON CONFLICT DO UPDATE SET c = EXCLUDED.c`: these columns take the new row's values.
    Update(Vec<usize>),
}

fn on_conflict(ins: &sq::Insert, def: &TableDef) -> Result<Conflict> {
    let Some(on) = &ins.on else {
        return Ok(Conflict::Error);
    };
    let sq::OnInsert::OnConflict(oc) = on else {
        return Err(Error::NotSupported(format!(
            "{on} is not supported; use ON CONFLICT (key) DO UPDATE"
        )));
    };
    if let Some(sq::ConflictTarget::Columns(cols)) = &oc.conflict_target {
        let key: Vec<String> = key_names(def);
        let named: Vec<String> = cols.iter().map(normalize).collect();
        if named.len() != key.len() || !named.iter().all(|c| key.contains(c)) {
            return Err(Error::plan(
                sqlstate::INVALID_COLUMN_REFERENCE,
                format!(
                    "there is no unique constraint matching the ON CONFLICT specification: \
                     the primary key of \"{}\" is ({})",
                    def.name,
                    key.join(", ")
                ),
            ));
        }
    }
    match &oc.action {
        sq::OnConflictAction::DoNothing => Ok(Conflict::Nothing),
        sq::OnConflictAction::DoUpdate(du) => {
            if du.selection.is_some() {
                return Err(Error::NotSupported(
                    "ON CONFLICT DO UPDATE ... WHERE is not supported".into(),
                ));
            }
            let schema = def.store.schema();
            let mut cols = Vec::new();
            for a in &du.assignments {
                let target = match &a.target {
                    sq::AssignmentTarget::ColumnName(n) => normalize_object(n),
                    other => {
                        return Err(Error::NotSupported(format!(
                            "ON CONFLICT DO UPDATE SET {other} is not supported"
                        )))
                    }
                };
                let source = match &a.value {
                    sq::Expr::CompoundIdentifier(parts)
                        if parts.len() == 2 && normalize(&parts[0]) == "excluded" =>
                    {
                        normalize(&parts[1])
                    }
                    other => {
                        return Err(Error::NotSupported(format!(
                            "ON CONFLICT DO UPDATE SET {target} = {other} is not supported; \
                             use SET {target} = EXCLUDED.{target}"
                        )))
                    }
                };
                if source != target {
                    return Err(Error::NotSupported(format!(
                        "ON CONFLICT DO UPDATE SET {target} = EXCLUDED.{source} is not \
                         supported; use SET {target} = EXCLUDED.{target}"
                    )));
                }
                let i = schema.index_of(&target).map_err(|_| {
                    Error::plan(
                        sqlstate::UNDEFINED_COLUMN,
                        format!(
                            "column \"{target}\" of relation \"{}\" does not exist",
                            def.name
                        ),
                    )
                })?;
                cols.push(i);
            }
            Ok(Conflict::Update(cols))
        }
    }
}

/// The change an INSERT (or COPY) of `batch` makes, and the rows it inserts or updates.
fn upsert(
    def: &TableDef,
    rows: &TableRows,
    batch: &RecordBatch,
    conflict: &Conflict,
) -> Result<(TableChange, usize)> {
    let keys = rows.encode_keys(def.store.keys_of(batch)?.columns())?;
    let mut seen = AHashSet::new();
    let mut fresh = Vec::new();
    let mut updated: Vec<(u32, RowId)> = Vec::new();
    for (i, k) in keys.iter().enumerate() {
        let k = k.data();
        let repeated = !seen.insert(k);
        let existing = rows.get(k);
        match conflict {
            Conflict::Error if repeated || existing.is_some() => {
                return Err(duplicate_key(def, batch, i));
            }
            Conflict::Nothing if repeated || existing.is_some() => {}
            Conflict::Update(_) if repeated => {
                return Err(Error::invalid_input(
                    sqlstate::CARDINALITY_VIOLATION,
                    "ON CONFLICT DO UPDATE command cannot affect row a second time: the \
                     statement gives the same key twice",
                ));
            }
            Conflict::Update(_) if existing.is_some() => {
                updated.push((i as u32, existing.expect("checked")));
            }
            _ => fresh.push(i as u32),
        }
    }
    let mut upserts = Vec::new();
    if fresh.len() == batch.num_rows() {
        upserts.push(batch.clone());
    } else if !fresh.is_empty() {
        upserts.push(take_rows(batch, &fresh)?);
    }
    if let (Conflict::Update(assigned), false) = (conflict, updated.is_empty()) {
        let old = rows.columns(updated.iter().map(|(_, r)| *r))?;
        let idx: Vec<u32> = updated.iter().map(|(i, _)| *i).collect();
        let new = take_rows(batch, &idx)?;
        let columns: Vec<ArrayRef> = (0..batch.num_columns())
            .map(|c| {
                if assigned.contains(&c) {
                    new.column(c).clone()
                } else {
                    old[c].clone()
                }
            })
            .collect();
        upserts.push(RecordBatch::try_new(batch.schema(), columns)?);
    }
    let count = fresh.len() + updated.len();
    Ok((
        TableChange {
            upserts,
            ..Default::default()
        },
        count,
    ))
}

fn take_rows(batch: &RecordBatch, idx: &[u32]) -> Result<RecordBatch> {
    let idx = UInt32Array::from(idx.to_vec());
    let columns = batch
        .columns()
        .iter()
        .map(|c| take(c.as_ref(), &idx, None))
        .collect::<std::result::Result<Vec<_>, _>>()?;
    Ok(RecordBatch::try_new(batch.schema(), columns)?)
}

/// 23505 naming the key of row `i` of `batch`, as PostgreSQL words it.
fn duplicate_key(def: &TableDef, batch: &RecordBatch, i: usize) -> Error {
    let values: Vec<String> = def
        .store
        .key()
        .iter()
        .map(|&c| array_value_to_string(batch.column(c), i).unwrap_or_default())
        .collect();
    Error::invalid_input(
        sqlstate::UNIQUE_VIOLATION,
        format!(
            "duplicate key value violates unique constraint \"{}_pkey\": Key ({})=({}) \
             already exists; use INSERT ... ON CONFLICT ({}) DO UPDATE to replace rows",
            def.name,
            key_names(def).join(", "),
            values.join(", "),
            key_names(def).join(", ")
        ),
    )
}

/// 53400 when the change would take the table past its row or byte limit.
fn check_limits(def: &TableDef, rows: &TableRows, change: &TableChange) -> Result<()> {
    let base = if change.truncate { 0 } else { rows.len() };
    let added_bytes: usize = change
        .upserts
        .iter()
        .map(|b| b.get_array_memory_size())
        .sum();
    let bytes = if change.truncate { 0 } else { rows.bytes() } + added_bytes;
    let upserted: usize = change.upserts.iter().map(|b| b.num_rows()).sum();
    if base + upserted <= def.max_rows && bytes <= def.max_bytes {
        // Within both limits even if every upserted row is new: no key needs looking at.
        return Ok(());
    }
    let deleted = change
        .deletes
        .iter()
        .map(|keys| rows.encode_keys(keys.columns()))
        .collect::<Result<Vec<_>>>()?;
    let upserted = change
        .upserts
        .iter()
        .map(|batch| rows.encode_keys(def.store.keys_of(batch)?.columns()))
        .collect::<Result<Vec<_>>>()?;
    let mut gone: AHashSet<&[u8]> = AHashSet::new();
    let exists = |k: &[u8], gone: &AHashSet<&[u8]>| {
        !change.truncate && rows.contains(k) && !gone.contains(k)
    };
    for keys in &deleted {
        for k in keys.iter() {
            if exists(k.as_ref(), &gone) {
                gone.insert(k.data());
            }
        }
    }
    let mut added: AHashSet<&[u8]> = AHashSet::new();
    for keys in &upserted {
        for k in keys.iter() {
            if !exists(k.as_ref(), &gone) {
                added.insert(k.data());
            }
        }
    }
    let after = base - gone.len() + added.len();
    if after > def.max_rows || (after > rows.len() && bytes > def.max_bytes) {
        return Err(Error::limit(
            sqlstate::CONFIGURATION_LIMIT_EXCEEDED,
            format!(
                "table \"{}\" would hold {after} rows (about {bytes} bytes); its limit is {} \
                 rows and {} bytes: raise it with CREATE TABLE ... WITH (max_rows = n, \
                 max_bytes = n), or delete rows",
                def.name, def.max_rows, def.max_bytes
            ),
        ));
    }
    Ok(())
}

/// `batch`'s columns cast to `schema`'s types (an UPDATE's expressions, a DELETE's keys):
/// a value that does not fit is an error, a NULL in a NOT NULL column 23502.
fn conform(
    batch: RecordBatch,
    schema: &datafusion::arrow::datatypes::SchemaRef,
) -> Result<RecordBatch> {
    let options = CastOptions {
        safe: false,
        ..Default::default()
    };
    let mut columns = Vec::with_capacity(schema.fields().len());
    for (c, f) in batch.columns().iter().zip(schema.fields()) {
        let c = if c.data_type() == f.data_type() || *c.data_type() == DataType::Null {
            if *c.data_type() == DataType::Null {
                datafusion::arrow::array::new_null_array(f.data_type(), c.len())
            } else {
                c.clone()
            }
        } else {
            cast_with_options(c, f.data_type(), &options)?
        };
        if !f.is_nullable() && c.null_count() > 0 {
            return Err(Error::invalid_input(
                sqlstate::NOT_NULL_VIOLATION,
                format!(
                    "null value in column \"{}\" violates not-null constraint",
                    f.name()
                ),
            ));
        }
        columns.push(c);
    }
    Ok(RecordBatch::try_new(schema.clone(), columns)?)
}

/// `SELECT list FROM table [WHERE condition]`.
fn select_sql(def: &TableDef, list: &str, selection: Option<&sq::Expr>) -> String {
    let mut sql = format!("SELECT {list} FROM {}", quoted(&def.name));
    if let Some(w) = selection {
        sql.push_str(&format!(" WHERE {w}"));
    }
    sql
}

fn key_names(def: &TableDef) -> Vec<String> {
    let schema = def.store.schema();
    def.store
        .key()
        .iter()
        .map(|&i| schema.field(i).name().clone())
        .collect()
}

fn key_columns(def: &TableDef) -> Vec<String> {
    key_names(def).iter().map(|n| quoted(n)).collect()
}

/// The queries and views that read table `name`, in name order.
pub(in crate::runtime) fn table_readers(shared: &Shared, name: &str) -> Vec<String> {
    let mut out = derived_readers(shared, |p| p.tables.iter().any(|t| t == name));
    out.sort();
    out
}

/// `SHOW TABLES`: each table's key, rows, bytes and limits, by name.
pub(in crate::runtime) fn show_tables(shared: &Shared) -> StatementResult {
    let mut names = Vec::new();
    let mut keys = Vec::new();
    let mut counts = Vec::new();
    let mut bytes = Vec::new();
    let mut max_rows = Vec::new();
    let mut readers = Vec::new();
    let mut ddl = Vec::new();
    for t in shared.catalog.tables() {
        let rows = t.store.read();
        names.push(t.name.clone());
        keys.push(key_names(t).join(", "));
        counts.push(rows.len() as u64);
        bytes.push(rows.bytes() as u64);
        max_rows.push(t.max_rows as u64);
        readers.push(table_readers(shared, &t.name).join(", "));
        ddl.push(t.ddl.to_string());
    }
    rows_result(
        vec![
            ("name", DataType::Utf8),
            ("primary_key", DataType::Utf8),
            ("rows", DataType::Int64),
            ("bytes", DataType::Int64),
            ("max_rows", DataType::Int64),
            ("read_by", DataType::Utf8),
            ("definition", DataType::Utf8),
        ],
        vec![
            text_column(names),
            text_column(keys),
            int_column(counts),
            int_column(bytes),
            int_column(max_rows),
            text_column(readers),
            text_column(ddl),
        ],
    )
}
