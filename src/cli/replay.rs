//! Replays inputs through an engine, offline: the inputs are merged into one sequence in
//! event-time order (ties go to the input given first, and rows of one input keep their
//! order; inputs of a stream without a watermark come first, whole, in the order given),
//! fed to the engine in batches, and every query's results are handed on as they come out.
//! At the end of input every watermark moves to the end, so every window closes.
//!
//! The results are those of inserting the rows one at a time: a batch is cut before a row
//! that the rows before it have put behind the watermark, so batch size never decides
//! whether a row is late.

use datafusion::arrow::array::{Array, AsArray, TimestampNanosecondArray};
use datafusion::arrow::compute::concat_batches;
use datafusion::arrow::datatypes::{SchemaRef, TimestampNanosecondType};
use datafusion::arrow::record_batch::RecordBatch;
use datafusion::sql::sqlparser::ast::Ident;
use saql::plan::{Catalog, EventTimeDef};
use saql::runtime::SubscriptionEvent;
use saql::time::EventTime;
use saql::{Engine, StatementResult, Subscription};

use super::input::{BadRows, Input, InputError};
use super::prefetch::Prefetched;

/// Rows fed to the engine at a time.
pub const BATCH_ROWS: usize = 4096;

/// Why a replay stopped.
#[derive(Debug)]
pub enum ReplayError {
    /// A bad input line (or an unreadable input).
    Input(InputError),
    /// The engine refused something.
    Engine(saql::Error),
    /// A query failed while running.
    QueryFailed(String),
    /// Results could not be written.
    Output(String),
}

impl std::fmt::Display for ReplayError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ReplayError::Input(e) => e.fmt(f),
            ReplayError::Engine(e) => write!(f, "{e} [{}]", e.sqlstate()),
            ReplayError::QueryFailed(m) | ReplayError::Output(m) => f.write_str(m),
        }
    }
}

impl From<InputError> for ReplayError {
    fn from(e: InputError) -> Self {
        ReplayError::Input(e)
    }
}

impl From<saql::Error> for ReplayError {
    fn from(e: saql::Error) -> Self {
        ReplayError::Engine(e)
    }
}

/// Rows on their way into one stream.
struct Feed {
    name: String,
    schema: SchemaRef,
    event_time: Option<EventTimeDef>,
    pending: Vec<RecordBatch>,
    pending_rows: usize,
    /// The rows taken last, not yet cut from their batch: the next run of the same batch
    /// extends them (two inputs interleaved row by row would otherwise cut a slice per row).
    open: Option<Open>,
    /// Largest event time among the rows taken so far (inserted or pending).
    max_time: Option<i64>,
    /// The watermark the rows taken so far imply, as the engine computes it.
    watermark: i64,
    /// The watermark of the rows inserted so far.
    inserted_watermark: i64,
}

impl Feed {
    /// Takes a row with event time `t`; true if the batch must be cut before it because the
    /// pending rows moved the watermark past it.
    fn must_cut_before(&self, t: i64) -> bool {
        self.watermark > self.inserted_watermark && t < self.watermark
    }

    fn observe(&mut self, t: i64) {
        let Some(et) = &self.event_time else { return };
        let max = self.max_time.map_or(t, |m| m.max(t));
        self.max_time = Some(max);
        self.watermark = self.watermark.max(EventTime(max).minus(et.delay).nanos());
    }
}

/// Rows `from..to` of the batch a cursor loaded as its `loaded`-th.
struct Open {
    cursor: usize,
    loaded: u64,
    batch: RecordBatch,
    from: usize,
    to: usize,
}

impl Feed {
    /// Cuts the open rows from their batch into the pending rows.
    fn close(&mut self) {
        if let Some(o) = self.open.take() {
            self.pending.push(o.batch.slice(o.from, o.to - o.from));
        }
    }
}

/// One input with its current batch and position.
struct Cursor {
    /// Its number among the inputs.
    id: usize,
    /// How many batches it has loaded (the current one's number).
    loaded: u64,
    input: Prefetched,
    feed: usize,
    batch: RecordBatch,
    times: Option<TimestampNanosecondArray>,
    pos: usize,
    /// The merge key of the last row taken (rows without an event time reuse it).
    last_key: i64,
}

impl Cursor {
    /// The event time of row `pos`, if the stream has one and the row has a value.
    fn time(&self, pos: usize) -> Option<i64> {
        let times = self.times.as_ref()?;
        times.is_valid(pos).then(|| times.value(pos))
    }

    /// The merge key of row `pos`: its event time, else the key of the row before it.
    fn key(&self, pos: usize) -> i64 {
        self.time(pos).unwrap_or(self.last_key)
    }

    fn load(&mut self, batch: RecordBatch, event_time: Option<&EventTimeDef>) {
        self.times = event_time.and_then(|et| {
            batch
                .column(et.column)
                .as_primitive_opt::<TimestampNanosecondType>()
                .cloned()
        });
        self.batch = batch;
        self.pos = 0;
        self.loaded += 1;
    }
}

/// Replays inputs through an engine whose streams and queries are already created.
pub struct Replay<'a> {
    engine: &'a Engine,
    feeds: Vec<Feed>,
    subscriptions: Vec<Subscription>,
    rows: u64,
}

impl<'a> Replay<'a> {
    /// Subscribes to `queries` (names) of `engine`, whose streams `catalog` declares.
    pub fn new(engine: &'a Engine, catalog: &Catalog, queries: &[String]) -> saql::Result<Self> {
        let mut subscriptions = Vec::new();
        for q in queries {
            let stmt = saql::sql::Statement::Subscribe(saql::sql::Subscribe::to(
                Ident::with_quote('"', q.as_str()),
            ));
            match futures::executor::block_on(engine.execute_statement(stmt, &[]))? {
                StatementResult::Subscribe(s) => subscriptions.push(s),
                _ => return Err(saql::Error::Internal("SUBSCRIBE returned no feed".into())),
            }
        }
        let feeds = catalog
            .streams()
            .map(|s| Feed {
                name: s.name.clone(),
                schema: s.schema.clone(),
                event_time: s.event_time.clone(),
                pending: Vec::new(),
                pending_rows: 0,
                open: None,
                max_time: None,
                watermark: i64::MIN,
                inserted_watermark: i64::MIN,
            })
            .collect();
        Ok(Replay {
            engine,
            feeds,
            subscriptions,
            rows: 0,
        })
    }

    /// The result schema of query `i`.
    pub fn schema(&self, i: usize) -> SchemaRef {
        self.subscriptions[i].schema.clone()
    }

    /// Merges `inputs`, feeds the engine, and hands each result batch to `results` with the
    /// index of its query (in the order given to [`Replay::new`]); `progress` hears the rows
    /// fed so far after every batch.
    pub fn run(
        mut self,
        inputs: Vec<Input>,
        bad: &mut BadRows,
        results: &mut dyn FnMut(usize, &RecordBatch) -> Result<(), ReplayError>,
        progress: &mut dyn FnMut(u64),
    ) -> Result<(), ReplayError> {
        let mut cursors = Vec::new();
        let mut done = Vec::new();
        let result = self
            .start(inputs, bad.skips(), &mut cursors, &mut done)
            .and_then(|()| self.merge(&mut cursors, &mut done, results, progress));
        for mut input in cursors.into_iter().map(|c| c.input).chain(done) {
            input.finish(bad);
        }
        result
    }

    /// Starts decoding each input; those with rows get a cursor at their first batch.
    fn start(
        &self,
        inputs: Vec<Input>,
        skip_bad_rows: bool,
        cursors: &mut Vec<Cursor>,
        done: &mut Vec<Prefetched>,
    ) -> Result<(), ReplayError> {
        for (id, input) in inputs.into_iter().enumerate() {
            let Some(feed) = self.feeds.iter().position(|f| f.name == input.stream) else {
                return Err(saql::Error::undefined("stream", &input.stream).into());
            };
            let mut input = Prefetched::start(input, BATCH_ROWS, skip_bad_rows)?;
            match input.next_batch() {
                Ok(Some(batch)) => {
                    let mut cursor = Cursor {
                        id,
                        loaded: 0,
                        input,
                        feed,
                        batch: RecordBatch::new_empty(self.feeds[feed].schema.clone()),
                        times: None,
                        pos: 0,
                        last_key: i64::MIN,
                    };
                    cursor.load(batch, self.feeds[feed].event_time.as_ref());
                    cursors.push(cursor);
                }
                Ok(None) => done.push(input),
                Err(e) => {
                    done.push(input);
                    return Err(e.into());
                }
            }
        }
        Ok(())
    }

    /// Feeds the inputs' rows in event-time order, then ends the input: every window closes.
    fn merge(
        &mut self,
        cursors: &mut Vec<Cursor>,
        done: &mut Vec<Prefetched>,
        results: &mut dyn FnMut(usize, &RecordBatch) -> Result<(), ReplayError>,
        progress: &mut dyn FnMut(u64),
    ) -> Result<(), ReplayError> {
        while let Some(next) = pick(cursors) {
            let bound = cursors
                .iter()
                .enumerate()
                .filter(|(i, _)| *i != next)
                .map(|(i, c)| (c.key(c.pos), i))
                .min();
            self.take_run(&mut cursors[next], next, bound, results, progress)?;
            let cursor = &mut cursors[next];
            if cursor.pos == cursor.batch.num_rows() {
                match cursor.input.next_batch()? {
                    Some(batch) => {
                        let et = self.feeds[cursor.feed].event_time.clone();
                        cursor.load(batch, et.as_ref());
                    }
                    None => done.push(cursors.remove(next).input),
                }
            }
        }
        for feed in 0..self.feeds.len() {
            self.flush(feed, results, progress)?;
        }
        self.engine.finish();
        self.drain(results)
    }

    /// Takes rows from the cursor while they come before `bound` (the smallest head of the
    /// other inputs), cutting batches where needed.
    fn take_run(
        &mut self,
        cursor: &mut Cursor,
        index: usize,
        bound: Option<(i64, usize)>,
        results: &mut dyn FnMut(usize, &RecordBatch) -> Result<(), ReplayError>,
        progress: &mut dyn FnMut(u64),
    ) -> Result<(), ReplayError> {
        let mut start = cursor.pos;
        let end = cursor.batch.num_rows();
        while cursor.pos < end {
            let key = cursor.key(cursor.pos);
            if bound.is_some_and(|b| (key, index) > b) {
                break;
            }
            if let Some(t) = cursor.time(cursor.pos) {
                if self.feeds[cursor.feed].must_cut_before(t) {
                    self.push(cursor, start);
                    self.flush(cursor.feed, results, progress)?;
                    start = cursor.pos;
                }
                self.feeds[cursor.feed].observe(t);
            }
            cursor.last_key = key;
            cursor.pos += 1;
            let feed = &self.feeds[cursor.feed];
            if feed.pending_rows + (cursor.pos - start) >= BATCH_ROWS {
                self.push(cursor, start);
                self.flush(cursor.feed, results, progress)?;
                start = cursor.pos;
            }
        }
        self.push(cursor, start);
        Ok(())
    }

    /// Adds the cursor's rows `start..pos` to its feed's pending rows.
    fn push(&mut self, cursor: &Cursor, start: usize) {
        let end = cursor.pos;
        if end == start {
            return;
        }
        let feed = &mut self.feeds[cursor.feed];
        feed.pending_rows += end - start;
        if let Some(o) = &mut feed.open {
            if (o.cursor, o.loaded, o.to) == (cursor.id, cursor.loaded, start) {
                o.to = end;
                return;
            }
        }
        feed.close();
        feed.open = Some(Open {
            cursor: cursor.id,
            loaded: cursor.loaded,
            batch: cursor.batch.clone(),
            from: start,
            to: end,
        });
    }

    /// Inserts the pending rows of a stream and passes on what the queries emit.
    fn flush(
        &mut self,
        feed: usize,
        results: &mut dyn FnMut(usize, &RecordBatch) -> Result<(), ReplayError>,
        progress: &mut dyn FnMut(u64),
    ) -> Result<(), ReplayError> {
        let feed = &mut self.feeds[feed];
        feed.close();
        if feed.pending.is_empty() {
            return Ok(());
        }
        let batch = match feed.pending.as_slice() {
            [one] => one.clone(),
            many => concat_batches(&feed.schema, many)
                .map_err(|e| saql::Error::Internal(e.to_string()))?,
        };
        feed.pending.clear();
        feed.pending_rows = 0;
        feed.inserted_watermark = feed.watermark;
        self.rows += self.engine.insert_batch(&feed.name, batch)?;
        progress(self.rows);
        self.drain(results)
    }

    fn drain(
        &mut self,
        results: &mut dyn FnMut(usize, &RecordBatch) -> Result<(), ReplayError>,
    ) -> Result<(), ReplayError> {
        for (i, s) in self.subscriptions.iter_mut().enumerate() {
            while let Ok(event) = s.events.try_recv() {
                match event {
                    SubscriptionEvent::Rows(b) => results(i, &b)?,
                    SubscriptionEvent::Failed(reason) => {
                        return Err(ReplayError::QueryFailed(reason.to_string()))
                    }
                }
            }
        }
        Ok(())
    }
}

/// The input whose next row comes first: smallest key, then the input given first.
fn pick(cursors: &[Cursor]) -> Option<usize> {
    cursors
        .iter()
        .enumerate()
        .min_by_key(|(i, c)| (c.key(c.pos), *i))
        .map(|(i, _)| i)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::cli::csv_text::batch_rows;
    use crate::cli::input::Format;
    use saql::EngineConfig;

    const STREAM: &str = "CREATE STREAM s (ts TIMESTAMP NOT NULL, tag TEXT, \
                          WATERMARK FOR ts AS ts - INTERVAL '0' SECOND)";

    /// Runs `query` over CSV inputs of stream `s`; the result rows as `a|b` text.
    fn replay(query: &str, inputs: &[&str]) -> Vec<String> {
        let catalog = Catalog::from_sql(STREAM).unwrap();
        let engine = Engine::open(EngineConfig::default()).unwrap();
        engine.execute_blocking(STREAM).unwrap();
        engine
            .execute_blocking(&format!("CREATE CONTINUOUS QUERY q AS {query}"))
            .unwrap();
        let replay = Replay::new(&engine, &catalog, &["q".to_string()]).unwrap();
        let schema = catalog.stream("s").unwrap().schema.clone();
        let inputs = inputs
            .iter()
            .map(|text| {
                let text = format!("ts,tag\n{text}");
                Input::from_text("s", "in".into(), schema.clone(), text, Format::Csv, vec![])
            })
            .collect();
        let mut rows = Vec::new();
        let mut collect = |_: usize, b: &RecordBatch| -> Result<(), ReplayError> {
            for row in batch_rows(b).unwrap() {
                let fields: Vec<String> = row.into_iter().map(Option::unwrap_or_default).collect();
                rows.push(fields.join("|"));
            }
            Ok(())
        };
        replay
            .run(inputs, &mut BadRows::new(false), &mut collect, &mut |_| {})
            .unwrap();
        rows
    }

    #[test]
    fn merges_by_event_time_and_ties_by_input_order() {
        let a = "2024-01-01 00:00:01,a1\n2024-01-01 00:00:02,a2\n2024-01-01 00:00:04,a4\n";
        let b = "2024-01-01 00:00:01,b1\n2024-01-01 00:00:03,b3\n";
        let rows = replay("SELECT tag FROM s", &[a, b]);
        assert_eq!(rows, ["a1", "b1", "a2", "b3", "a4"]);
        let rows = replay("SELECT tag FROM s", &[b, a]);
        assert_eq!(rows, ["b1", "a1", "a2", "b3", "a4"]);
    }

    #[test]
    fn a_row_behind_the_watermark_is_late_even_within_a_batch() {
        // 00:00:12 moves the watermark (no delay) past the window [00:00:00, 00:00:10), so
        // 00:00:05 arrives after that window was emitted and is dropped, as it would be if
        // the rows were inserted one at a time.
        let a = "2024-01-01 00:00:01,x\n2024-01-01 00:00:12,x\n2024-01-01 00:00:05,x\n";
        let rows = replay(
            "SELECT window_end, COUNT(*) AS n FROM TUMBLE(s, ts, INTERVAL '10' SECOND) \
             GROUP BY window_start, window_end",
            &[a],
        );
        assert_eq!(rows, ["2024-01-01 00:00:10|1", "2024-01-01 00:00:20|1"]);
    }
}
