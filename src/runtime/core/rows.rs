//! A finite result produced batch by batch: an ad hoc `SELECT` (or `COPY (SELECT ...) TO
//! STDOUT`) hands the server DataFusion's stream, not a collected result, so rows reach the
//! client as they are produced and memory holds a batch, never the whole result. Dropping the
//! stream stops the query.

use std::pin::Pin;
use std::task::{Context, Poll};

use datafusion::arrow::datatypes::SchemaRef;
use datafusion::arrow::record_batch::RecordBatch;
use futures::stream::{BoxStream, Stream, StreamExt};

use crate::error::{sqlstate, Error, Result};

/// Rows of a known schema, as they are produced. An error ends the stream: rows before it
/// are valid, as PostgreSQL sends the rows it produced before an error.
pub struct RowStream {
    schema: SchemaRef,
    batches: BoxStream<'static, Result<RecordBatch>>,
}

impl RowStream {
    /// Rows of `schema` from `batches` (each batch must have that schema).
    pub fn new(
        schema: SchemaRef,
        batches: impl Stream<Item = Result<RecordBatch>> + Send + 'static,
    ) -> Self {
        RowStream {
            schema,
            batches: batches.boxed(),
        }
    }

    /// Rows already at hand.
    pub fn from_batches(schema: SchemaRef, batches: Vec<RecordBatch>) -> Self {
        RowStream::new(schema, futures::stream::iter(batches.into_iter().map(Ok)))
    }

    /// The schema of its rows.
    pub fn schema(&self) -> &SchemaRef {
        &self.schema
    }

    /// Reads every remaining row (for embedding and tests: the whole result in memory).
    pub async fn collect(mut self) -> Result<Vec<RecordBatch>> {
        let mut out = Vec::new();
        while let Some(batch) = self.batches.next().await {
            out.push(batch?);
        }
        Ok(out)
    }

    /// The same rows, ended with 54000 once more than `max_rows` rows or `max_bytes` bytes
    /// (Arrow memory) have gone by; 0 is no bound. The bounds are the session's
    /// `saql.max_result_rows` and `saql.max_result_bytes`.
    pub fn limited(self, max_rows: u64, max_bytes: u64) -> RowStream {
        if max_rows == 0 && max_bytes == 0 {
            return self;
        }
        let bound = |n: u64| if n == 0 { u64::MAX } else { n };
        let (rows_bound, bytes_bound) = (bound(max_rows), bound(max_bytes));
        // (rows, bytes) so far; None once the bound was passed and the error given.
        let seen = Some((0u64, 0u64));
        let batches = self.batches.scan(seen, move |seen, batch| {
            let Some((rows, bytes)) = seen.as_mut() else {
                return futures::future::ready(None);
            };
            if let Ok(b) = &batch {
                *rows += b.num_rows() as u64;
                *bytes += b.get_array_memory_size() as u64;
                if *rows > rows_bound || *bytes > bytes_bound {
                    *seen = None;
                    return futures::future::ready(Some(Err(too_large(max_rows, max_bytes))));
                }
            }
            futures::future::ready(Some(batch))
        });
        RowStream::new(self.schema, batches)
    }
}

/// 54000 for a result past the session's bounds.
fn too_large(max_rows: u64, max_bytes: u64) -> Error {
    let what = match (max_rows, max_bytes) {
        (0, b) => format!("more than {b} bytes"),
        (r, 0) => format!("more than {r} rows"),
        (r, b) => format!("more than {r} rows or {b} bytes"),
    };
    Error::limit(
        sqlstate::PROGRAM_LIMIT_EXCEEDED,
        format!(
            "result too large: {what} (saql.max_result_rows, saql.max_result_bytes); \
             add a LIMIT or aggregate, or SET them to 0"
        ),
    )
}

impl crate::runtime::engine::StatementResult {
    /// This result with a streamed result read whole: [`StatementResult::Streaming`] becomes
    /// `Rows`, or `CopyOut` for `COPY (SELECT ...) TO STDOUT`.
    pub async fn collect(self) -> Result<Self> {
        use crate::runtime::engine::StatementResult as R;
        Ok(match self {
            R::Streaming { rows, copy } => {
                let schema = rows.schema().clone();
                let batches = rows.collect().await?;
                match copy {
                    Some(format) => R::CopyOut {
                        format,
                        schema,
                        batches,
                    },
                    None => R::Rows { schema, batches },
                }
            }
            other => other,
        })
    }
}

impl Stream for RowStream {
    type Item = Result<RecordBatch>;

    fn poll_next(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Option<Self::Item>> {
        self.batches.poll_next_unpin(cx)
    }
}

impl std::fmt::Debug for RowStream {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RowStream")
            .field("schema", &self.schema)
            .finish_non_exhaustive()
    }
}

#[cfg(test)]
mod tests {
    use std::sync::Arc;

    use datafusion::arrow::array::Int64Array;
    use datafusion::arrow::datatypes::{DataType, Field, Schema};
    use futures::executor::block_on;

    use super::*;

    fn numbers(batches: usize, rows: i64) -> RowStream {
        let schema = Arc::new(Schema::new(vec![Field::new("n", DataType::Int64, false)]));
        let batch = RecordBatch::try_new(
            schema.clone(),
            vec![Arc::new(Int64Array::from_iter_values(0..rows))],
        )
        .unwrap();
        RowStream::from_batches(schema, vec![batch; batches])
    }

    #[test]
    fn a_row_bound_ends_the_stream_with_54000_after_the_rows_within_it() {
        let mut rows = numbers(5, 10).limited(25, 0);
        let mut seen = 0;
        let error = block_on(async {
            while let Some(batch) = rows.next().await {
                match batch {
                    Ok(b) => seen += b.num_rows(),
                    Err(e) => return Some(e),
                }
            }
            None
        });
        assert_eq!(seen, 20);
        let error = error.expect("the bound was passed");
        assert_eq!(error.sqlstate(), "54000");
        assert!(error.to_string().contains("more than 25 rows"), "{error}");
        assert!(block_on(rows.next()).is_none(), "nothing after the error");
    }

    #[test]
    fn no_bound_passes_every_row() {
        let rows = block_on(numbers(5, 10).limited(0, 0).collect()).unwrap();
        assert_eq!(rows.iter().map(RecordBatch::num_rows).sum::<usize>(), 50);
    }
}
