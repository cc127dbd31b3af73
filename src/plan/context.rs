//! A DataFusion `ContextProvider` over a session state and a fixed set of tables, so that
//! sqlparser ASTs can be planned synchronously without registering anything globally.

use std::collections::HashMap;
use std::sync::Arc;

use datafusion::arrow::datatypes::{DataType, SchemaRef};
use datafusion::catalog::TableProvider;
use datafusion::common::config::ConfigOptions;
use datafusion::common::not_impl_err;
use datafusion::common::TableReference;
use datafusion::datasource::{provider_as_source, MemTable};
use datafusion::error::{DataFusionError, Result as DfResult};
use datafusion::execution::context::SessionState;
use datafusion::logical_expr::planner::{ContextProvider, ExprPlanner};
use datafusion::logical_expr::{
    AggregateUDF, Expr, HigherOrderUDF, ScalarUDF, TableSource, WindowUDF,
};
use datafusion::prelude::{SessionConfig, SessionContext};

/// Tables visible to one planning call, over the default session's functions.
pub(crate) struct PlanContext {
    state: SessionState,
    tables: HashMap<String, Arc<dyn TableSource>>,
}

impl PlanContext {
    /// A context with DataFusion's built-in functions and no tables.
    pub(crate) fn new() -> Self {
        let mut config = SessionConfig::new();
        // Columns keep their token spans, so that an unknown one is reported where it is
        // written.
        config.options_mut().sql_parser.collect_spans = true;
        let ctx = SessionContext::new_with_config(config);
        // The frame functions of history (MAD, QUANTILE, EWMA, ...), for planning OVER (...).
        for f in crate::operators::robust::udafs() {
            ctx.register_udaf(f);
        }
        // EVIDENCE(...), in the internal form the planner rewrites it to.
        ctx.register_udaf(crate::operators::evidence::udaf());
        PlanContext {
            state: ctx.state(),
            tables: HashMap::new(),
        }
    }

    /// Makes an empty table with `schema` visible under `name`.
    pub(crate) fn add_table(&mut self, name: &str, schema: SchemaRef) -> DfResult<()> {
        let table: Arc<dyn TableProvider> = Arc::new(MemTable::try_new(schema, vec![vec![]])?);
        self.tables
            .insert(name.to_string(), provider_as_source(table));
        Ok(())
    }

    /// The session state (function registry, analyzer, execution props).
    pub(crate) fn state(&self) -> &SessionState {
        &self.state
    }
}

impl ContextProvider for PlanContext {
    fn get_table_source(&self, name: TableReference) -> DfResult<Arc<dyn TableSource>> {
        self.tables.get(name.table()).cloned().ok_or_else(|| {
            DataFusionError::External(Box::new(crate::Error::undefined("stream", name.table())))
        })
    }

    /// A window table function (`TUMBLE(s, ts, ...)`) is read where saql plans a FROM (of a
    /// continuous query, or of a join's input); one DataFusion meets, in a subquery of WHERE
    /// or of the select list, reaches here.
    fn get_table_function_source(
        &self,
        name: &str,
        _args: Vec<Expr>,
    ) -> DfResult<Arc<dyn TableSource>> {
        let name = name.to_ascii_uppercase();
        if ["TUMBLE", "HOP", "CUMULATE", "SESSION"].contains(&name.as_str()) {
            not_impl_err!(
                "{name} reads a stream in the FROM of a continuous query or of a join's input: \
                 a window in a subquery (IN, EXISTS, or one giving a value) is not supported"
            )
        } else {
            not_impl_err!("table function {name}(...) is not supported in a continuous query")
        }
    }

    fn get_expr_planners(&self) -> &[Arc<dyn ExprPlanner>] {
        self.state.expr_planners()
    }

    fn get_function_meta(&self, name: &str) -> Option<Arc<ScalarUDF>> {
        self.state.scalar_functions().get(name).cloned()
    }

    fn get_higher_order_meta(&self, name: &str) -> Option<Arc<HigherOrderUDF>> {
        self.state.higher_order_functions().get(name).cloned()
    }

    fn get_aggregate_meta(&self, name: &str) -> Option<Arc<AggregateUDF>> {
        self.state.aggregate_functions().get(name).cloned()
    }

    fn get_window_meta(&self, name: &str) -> Option<Arc<WindowUDF>> {
        self.state.window_functions().get(name).cloned()
    }

    fn get_variable_type(&self, _variable_names: &[String]) -> Option<DataType> {
        None
    }

    fn options(&self) -> &ConfigOptions {
        self.state.config_options()
    }

    fn udf_names(&self) -> Vec<String> {
        self.state.scalar_functions().keys().cloned().collect()
    }

    fn higher_order_function_names(&self) -> Vec<String> {
        self.state
            .higher_order_functions()
            .keys()
            .cloned()
            .collect()
    }

    fn udaf_names(&self) -> Vec<String> {
        self.state.aggregate_functions().keys().cloned().collect()
    }

    fn udwf_names(&self) -> Vec<String> {
        self.state.window_functions().keys().cloned().collect()
    }
}
