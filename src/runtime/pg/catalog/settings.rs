//! `pg_settings`, the run-time settings as `SHOW` and `current_setting` give them (pgJDBC reads
//! `max_index_keys` before `getImportedKeys`, DBeaver `search_path`, psql's `\dconfig` the
//! changed ones), and `pg_stat_user_tables`, whose live-row estimate Metabase's sync reads:
//! the rows a stream or query holds now.

use datafusion::prelude::SessionContext;

use super::table::Table;
use super::{relation_oid, Relation, SCHEMA};
use crate::error::Result;
use crate::runtime::pg::functions::{SessionInfo, SETTINGS};

/// Registers `pg_settings` (with `session`'s own values) and `pg_stat_user_tables` for
/// `relations`.
pub(super) fn register(
    ctx: &SessionContext,
    relations: &[Relation],
    session: &SessionInfo,
) -> Result<()> {
    let n = SETTINGS.len();
    let values: Vec<String> = SETTINGS.iter().map(|s| session.setting(s)).collect();
    Table::new("pg_settings")
        .text("name", SETTINGS)
        .text("setting", &values)
        .null_text("unit", n)
        .text("category", vec!["Client Connection Defaults"; n])
        .text("short_desc", vec![""; n])
        .null_text("extra_desc", n)
        .text("context", vec!["user"; n])
        .text("vartype", vec!["string"; n])
        .text("source", vec!["default"; n])
        .null_text("min_val", n)
        .null_text("max_val", n)
        .null_text("enumvals", n)
        .text("boot_val", &values)
        .text("reset_val", &values)
        .null_text("sourcefile", n)
        .null_text("sourceline", n)
        .boolean("pending_restart", vec![false; n])
        .register(ctx, SCHEMA)?;
    let n = relations.len();
    let zero = || vec![0i64; n];
    Table::new("pg_stat_user_tables")
        .int("relid", relations.iter().map(|r| relation_oid(r.name)))
        .text("schemaname", vec!["public"; n])
        .text("relname", relations.iter().map(|r| r.name))
        .int("seq_scan", zero())
        .int("seq_tup_read", zero())
        .int("idx_scan", zero())
        .int("idx_tup_fetch", zero())
        .int("n_tup_ins", relations.iter().map(|r| r.rows as i64))
        .int("n_tup_upd", zero())
        .int("n_tup_del", zero())
        .int("n_tup_hot_upd", zero())
        .int("n_live_tup", relations.iter().map(|r| r.rows as i64))
        .int("n_dead_tup", zero())
        .int("n_mod_since_analyze", zero())
        .null_text("last_vacuum", n)
        .null_text("last_autovacuum", n)
        .null_text("last_analyze", n)
        .null_text("last_autoanalyze", n)
        .int("vacuum_count", zero())
        .int("autovacuum_count", zero())
        .int("analyze_count", zero())
        .int("autoanalyze_count", zero())
        .register(ctx, SCHEMA)
}
