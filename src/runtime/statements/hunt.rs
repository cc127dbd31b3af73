//! Hunting over history: in an ad hoc `SELECT`, a stream that keeps history reads all of it,
//! its Parquet segments (through DataFusion's listing table, whose row groups a time predicate
//! skips by their min/max statistics: `EXPLAIN` shows the `pruning_predicate`) followed by
//! the rows not yet written, with no row twice and none missing.

use std::sync::Arc;

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::catalog::TableProvider;
use datafusion::datasource::file_format::parquet::ParquetFormat;
use datafusion::datasource::listing::{
    ListingOptions, ListingTable, ListingTableConfig, ListingTableUrl,
};
use datafusion::datasource::{provider_as_source, MemTable, ViewTable};
use datafusion::logical_expr::LogicalPlanBuilder;

use crate::error::{Error, Result};
use crate::runtime::durability::history::HistoryScan;

/// A table of a stream's whole history as `scan` saw it.
pub(in crate::runtime) fn history_table(
    schema: &SchemaRef,
    scan: HistoryScan,
) -> Result<Arc<dyn TableProvider>> {
    let unwritten = Arc::new(MemTable::try_new(schema.clone(), vec![scan.batches])?);
    if scan.segments.is_empty() {
        return Ok(unwritten);
    }
    let urls = scan
        .segments
        .iter()
        .map(|s| {
            let path = s.path.to_str().ok_or_else(|| {
                Error::Internal(format!("history file {} is not UTF-8", s.path.display()))
            })?;
            Ok(ListingTableUrl::parse(path)?)
        })
        .collect::<Result<Vec<_>>>()?;
    let options =
        ListingOptions::new(Arc::new(ParquetFormat::default())).with_file_extension(".parquet");
    let config = ListingTableConfig::new_with_multi_paths(urls)
        .with_listing_options(options)
        .with_schema(schema.clone());
    let segments = Arc::new(ListingTable::try_new(config)?);
    let plan = LogicalPlanBuilder::scan("history", provider_as_source(segments), None)?
        .union(
            LogicalPlanBuilder::scan("unwritten", provider_as_source(unwritten), None)?.build()?,
        )?
        .build()?;
    Ok(Arc::new(ViewTable::new(plan, None)))
}
