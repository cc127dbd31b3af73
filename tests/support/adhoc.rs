//! Ad hoc statements through the library: a statement's result rows as text cells, in the
//! order the engine gives them (a whole result or a streamed SELECT alike).

use datafusion::arrow::util::display::array_value_to_string;
use saql::{Engine, StatementResult};

/// The rows of the first result of `sql`, each as its cells' text.
pub async fn rows(engine: &Engine, sql: &str) -> Vec<Vec<String>> {
    let batches = match engine.execute(sql).await.unwrap().remove(0) {
        StatementResult::Rows { batches, .. } => batches,
        StatementResult::Streaming { rows, .. } => rows.collect().await.unwrap(),
        _ => panic!("{sql}: no rows"),
    };
    batches
        .iter()
        .flat_map(|b| {
            (0..b.num_rows()).map(move |r| {
                (0..b.num_columns())
                    .map(|c| array_value_to_string(b.column(c), r).unwrap())
                    .collect()
            })
        })
        .collect()
}
