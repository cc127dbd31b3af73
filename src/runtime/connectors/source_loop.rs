//! The body of a source, written once for every connector: a task on the server's tokio
//! runtime (or, for a library caller with no runtime, on a small one of its own thread) that
//! opens the connector at the position the engine holds rows up to, then reads, decodes
//! records into batches of the target's schema, and ingests each batch with the connector's
//! position after it through the engine's one door. Decoding and ingesting (which waits for
//! the log's fsync) run on the runtime's blocking threads. A connector that cannot be reached
//! is retried every [`RETRY`] with the error in SHOW SOURCES; a bad record is counted and
//! shown, or stops the source with `on_error = 'fail'` (resuming before it once the source is
//! created again); after each checkpoint the connector is told the position it holds.

use std::sync::{Arc, Mutex};
use std::time::Duration;

use datafusion::arrow::record_batch::RecordBatch;

use crate::error::{Error, Result};
use crate::runtime::connectors::sources::SourceRuntime;
use crate::runtime::engine::{off_async, WeakEngine};
use crate::sources::records::RecordDecoder;
use crate::sources::spec::{OnError, SourceProgress};
use crate::sources::{Read, Records, Skipped, Source};

/// How long to wait before connecting again, or reading again an input that failed.
const RETRY: Duration = Duration::from_millis(500);

/// Starts a source: a task on the caller's runtime (the server's), or, for a library caller
/// with no runtime, a thread with a small one of its own.
pub(in crate::runtime) fn spawn(weak: WeakEngine, rt: Arc<SourceRuntime>) -> Result<()> {
    let name = format!("saql-source-{}", rt.spec.name.replace('\0', ""));
    let source = Arc::clone(&rt);
    let read = async move {
        if let Err(e) = run(weak, &rt).await {
            if !rt.stopped() {
                rt.fail(&e);
            }
        }
    };
    crate::spawn::task_or_thread(name, read, move |e| {
        source.fail(&Error::io("starting a source's runtime", e))
    })
    .map_err(|e| Error::io("starting a source thread", e))
}

/// Runs a source until it is dropped, fails, finishes, or the engine is gone.
async fn run(weak: WeakEngine, rt: &Arc<SourceRuntime>) -> Result<()> {
    let Some((run, max_line_bytes)) = SourceLoop::start(weak, rt)? else {
        return Ok(());
    };
    rt.update(|s| s.state = "connecting".into());
    let source = loop {
        if run.gone() {
            return Ok(());
        }
        let position = run.progress.position.as_ref();
        match crate::sources::connect(&rt.spec, position, max_line_bytes).await {
            Ok(source) => break source,
            // This saql cannot read it, however often it tries.
            Err(e @ Error::NotSupported(_)) => return Err(e),
            Err(e) => {
                rt.update(|s| s.error = Some(e.to_string()));
                tokio::time::sleep(RETRY).await;
            }
        }
    };
    run.run(source).await
}

/// A source being run: what the engine holds of it, and its decoder.
pub(in crate::runtime) struct SourceLoop {
    weak: WeakEngine,
    rt: Arc<SourceRuntime>,
    decoder: Arc<Mutex<RecordDecoder>>,
    /// Position and counters as of the last batch ingested.
    progress: SourceProgress,
    /// The newest checkpoint whose position the connector was told (or that was written
    /// before the source started).
    committed_epoch: u64,
}

impl SourceLoop {
    /// The loop of source `rt` from the progress the engine holds for it (restored and
    /// replayed), with the longest line allowed; `None` when the engine is gone.
    pub(in crate::runtime) fn start(
        weak: WeakEngine,
        rt: &Arc<SourceRuntime>,
    ) -> Result<Option<(SourceLoop, usize)>> {
        let Some(engine) = weak.upgrade() else {
            return Ok(None);
        };
        let (progress, decoder) = engine.source_start(rt)?;
        let max_line_bytes = engine.config.max_copy_line_bytes;
        let committed_epoch = engine.checkpointed_epoch();
        drop(engine);
        rt.update(|s| s.progress = progress.clone());
        let run = SourceLoop {
            weak,
            rt: Arc::clone(rt),
            decoder: Arc::new(Mutex::new(decoder)),
            progress,
            committed_epoch,
        };
        Ok(Some((run, max_line_bytes)))
    }

    /// Whether the source was dropped or the engine is gone.
    fn gone(&self) -> bool {
        self.rt.stopped() || self.weak.upgrade().is_none()
    }

    /// Reads `source` until the source is dropped, fails, finishes, or the engine is gone.
    pub(in crate::runtime) async fn run(mut self, mut source: Box<dyn Source>) -> Result<()> {
        self.remember_start(source.as_mut()).await?;
        self.rt.update(|s| {
            s.state = "running".into();
            s.error = None;
        });
        loop {
            if self.gone() {
                return Ok(());
            }
            self.commit(source.as_mut()).await;
            match source.read().await? {
                Read::Records(records) => {
                    if !self.take_in(source.as_mut(), records).await? {
                        return Ok(());
                    }
                    self.rt.update(|s| s.state = "running".into());
                }
                Read::Idle => {
                    if !self.remember_start(source.as_mut()).await? {
                        return Ok(());
                    }
                    self.rt.update(|s| s.state = "running".into());
                }
                Read::Waiting(state) => self.rt.update(|s| s.state = state.into()),
                Read::Unavailable(e) => {
                    self.rt.update(|s| s.error = Some(e.to_string()));
                    tokio::time::sleep(RETRY).await;
                }
                Read::Skipped(skipped) => {
                    if !self.skip(source.as_mut(), skipped).await? {
                        return Ok(());
                    }
                }
                Read::End => {
                    self.rt.update(|s| s.state = "finished".into());
                    return Ok(());
                }
            }
        }
    }

    /// On a first start, records where reading began as soon as the connector knows
    /// (`start = 'end'`), so that a restart begins there. False when the engine is gone.
    async fn remember_start(&mut self, source: &mut dyn Source) -> Result<bool> {
        match (&self.progress.position, source.position()) {
            (None, Some(position)) => {
                let mut next = self.progress.clone();
                next.position = Some(position);
                self.ingest(None, next).await
            }
            _ => Ok(true),
        }
    }

    /// Decodes `records` and ingests their rows with the position after them (or, stopping
    /// at a bad record, before it). False when the engine is gone.
    async fn take_in(&mut self, source: &mut dyn Source, records: Records) -> Result<bool> {
        let stop_at_bad = self.rt.spec.on_error == OnError::Fail;
        let decoder = Arc::clone(&self.decoder);
        let (records, decoded) = off_async(move || {
            let mut decoder = decoder.lock().unwrap_or_else(|p| p.into_inner());
            let decoded = decoder.decode(&records.lines(), stop_at_bad)?;
            Ok((records, decoded))
        })
        .await?;
        let mut next = self.progress.clone();
        next.rows += decoded.batch.num_rows() as u64;
        next.bad += decoded.bad.len() as u64;
        if decoded.consumed == records.len() {
            next.position = source.position();
            next.bytes += records.bytes;
        } else {
            // Stopping at a bad record: resume there once the source is created again.
            let place = source.place(&records, decoded.consumed);
            next.position = Some(place.resume);
            next.bytes += place.bytes_before;
        }
        let bad = decoded.bad.last().map(|(i, e)| {
            let at = format!(
                "{}: {e} ({})",
                source.place(&records, *i).name,
                e.sqlstate()
            );
            (e.sqlstate(), at)
        });
        // A skipped record's error is shown before the rows after it are counted, so that
        // whoever sees those rows in SHOW SOURCES sees the error too.
        if let (false, Some((_, at))) = (stop_at_bad, &bad) {
            self.rt.update(|s| s.error = Some(at.clone()));
        }
        if !self.ingest(Some(decoded.batch), next).await? {
            return Ok(false);
        }
        match bad {
            Some((sqlstate, at)) if stop_at_bad => Err(Error::invalid_input(sqlstate, at)),
            _ => Ok(true),
        }
    }

    /// Counts records the connector dropped unread as bad, and moves past them (or stops
    /// with `on_error = 'fail'`, if they are bad records). False when the engine is gone.
    async fn skip(&mut self, source: &mut dyn Source, skipped: Skipped) -> Result<bool> {
        if let (OnError::Fail, Some(e)) = (self.rt.spec.on_error, skipped.fails) {
            return Err(e);
        }
        tracing::warn!("source \"{}\": {}", self.rt.spec.name, skipped.note);
        let mut next = self.progress.clone();
        next.bad += skipped.records;
        next.position = source.position().or(next.position);
        if !self.ingest(None, next).await? {
            return Ok(false);
        }
        self.rt.update(|s| s.error = Some(skipped.note));
        Ok(true)
    }

    /// Ingests `batch` (`None`: no rows, the position alone moved) with progress `next`,
    /// off the async workers; false when the engine is gone.
    async fn ingest(&mut self, batch: Option<RecordBatch>, next: SourceProgress) -> Result<bool> {
        let (weak, rt, progress) = (self.weak.clone(), Arc::clone(&self.rt), next.clone());
        let ingested = off_async(move || match weak.upgrade() {
            Some(engine) => engine
                .ingest_from_source(&rt, batch, progress)
                .map(|()| true),
            None => Ok(false),
        })
        .await?;
        if ingested {
            self.progress = next;
        }
        Ok(ingested)
    }

    /// Tells the connector the position a checkpoint written since it was last told holds.
    /// A connector that cannot take it is told again after the next checkpoint.
    async fn commit(&mut self, source: &mut dyn Source) {
        let Some(engine) = self.weak.upgrade() else {
            return;
        };
        let held = engine.source_checkpointed(&self.rt.spec.name);
        drop(engine);
        let Some((epoch, position)) = held.filter(|(epoch, _)| *epoch > self.committed_epoch)
        else {
            return;
        };
        self.committed_epoch = epoch;
        if let Err(e) = source.commit(&position).await {
            let note = format!("committing position {position}: {e}");
            tracing::warn!("source \"{}\": {note}", self.rt.spec.name);
            self.rt.update(|s| s.error = Some(note));
        }
    }
}

#[cfg(test)]
mod tests {
    use std::collections::BTreeMap;

    use tokio::sync::mpsc;

    use super::*;
    use crate::runtime::engine::Engine;
    use crate::sources::spec::{SourcePosition, SourceSpec};
    use crate::sources::Place;
    use crate::sql::{parse_one, Statement};
    use crate::EngineConfig;

    /// Where record `n` of the in-memory input starts.
    fn at(n: i64) -> SourcePosition {
        SourcePosition::Kafka {
            offsets: BTreeMap::from([(0, n)]),
        }
    }

    /// An input in memory: the batches of lines the test sends, record `n` at [`at`]`(n)`;
    /// what it is told to commit goes back to the test.
    struct Memory {
        batches: mpsc::UnboundedReceiver<Vec<&'static str>>,
        committed: mpsc::UnboundedSender<SourcePosition>,
        /// The first record of the batch last read, and the one after it.
        first: i64,
        next: i64,
    }

    #[async_trait::async_trait]
    impl Source for Memory {
        async fn read(&mut self) -> Result<Read> {
            let wait = Duration::from_millis(10);
            let lines = match tokio::time::timeout(wait, self.batches.recv()).await {
                Ok(Some(lines)) => lines,
                Ok(None) => return Ok(Read::End),
                Err(_) => return Ok(Read::Idle),
            };
            let mut data = Vec::new();
            let mut spans = Vec::new();
            for line in &lines {
                spans.push(data.len()..data.len() + line.len());
                data.extend_from_slice(line.as_bytes());
            }
            self.first = self.next;
            self.next += lines.len() as i64;
            let bytes = data.len() as u64;
            Ok(Read::Records(Records::new(data, spans, bytes)))
        }

        fn position(&self) -> Option<SourcePosition> {
            Some(at(self.next))
        }

        fn place(&self, records: &Records, i: usize) -> Place {
            let n = self.first + i as i64;
            Place {
                resume: at(n),
                bytes_before: (0..i).map(|j| records.span(j).len() as u64).sum(),
                name: format!("record {n}"),
            }
        }

        async fn commit(&mut self, position: &SourcePosition) -> Result<()> {
            let _ = self.committed.send(position.clone());
            Ok(())
        }
    }

    struct Running {
        engine: Engine,
        rt: Arc<SourceRuntime>,
        batches: mpsc::UnboundedSender<Vec<&'static str>>,
        committed: mpsc::UnboundedReceiver<SourcePosition>,
        task: tokio::task::JoinHandle<Result<()>>,
        _dir: tempfile::TempDir,
    }

    /// Source `m` of stream `s` (pid, exe) reading an input in memory through the loop.
    async fn start(options: &str) -> Running {
        let dir = tempfile::tempdir().unwrap();
        let engine = Engine::open(EngineConfig {
            data_dir: Some(dir.path().to_path_buf()),
            checkpoint_interval: None,
            ..EngineConfig::default()
        })
        .unwrap();
        engine
            .execute("CREATE STREAM s (pid BIGINT, exe TEXT)")
            .await
            .unwrap();
        let sql = format!("CREATE SOURCE m FROM FILE '/unused' {options} INTO STREAM s");
        let Statement::CreateSource(ddl) = parse_one(&sql).unwrap() else {
            panic!("not a CREATE SOURCE: {sql}")
        };
        let schema = engine.relation_schema("s").unwrap();
        let rt = Arc::new(SourceRuntime::new(
            SourceSpec::try_new(&ddl, "s", &schema).unwrap(),
        ));
        engine.write().sources.insert("m".into(), Arc::clone(&rt));
        let (batches, rx) = mpsc::unbounded_channel();
        let (tx, committed) = mpsc::unbounded_channel();
        let memory = Memory {
            batches: rx,
            committed: tx,
            first: 0,
            next: 0,
        };
        let (run, _) = SourceLoop::start(engine.downgrade(), &rt).unwrap().unwrap();
        let task = crate::spawn::task(run.run(Box::new(memory)));
        Running {
            engine,
            rt,
            batches,
            committed,
            task,
            _dir: dir,
        }
    }

    /// Waits until the source has ingested `rows` rows.
    async fn rows(rt: &SourceRuntime, rows: u64) -> SourceProgress {
        for _ in 0..1000 {
            let progress = rt.status().progress;
            if progress.rows >= rows {
                return progress;
            }
            tokio::time::sleep(Duration::from_millis(10)).await;
        }
        panic!("the source never ingested {rows} rows: {:?}", rt.status());
    }

    async fn next_commit(
        committed: &mut mpsc::UnboundedReceiver<SourcePosition>,
    ) -> SourcePosition {
        tokio::time::timeout(Duration::from_secs(10), committed.recv())
            .await
            .expect("a commit after the checkpoint")
            .expect("the source runs")
    }

    #[tokio::test]
    async fn positions_are_committed_only_after_the_checkpoint_that_holds_their_rows() {
        let mut s = start("").await;
        s.batches
            .send(vec![
                r#"{"pid": 1, "exe": "a"}"#,
                r#"{"pid": 2, "exe": "b"}"#,
            ])
            .unwrap();
        let progress = rows(&s.rt, 2).await;
        assert_eq!(progress.position, Some(at(2)));
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(
            s.committed.try_recv().is_err(),
            "committed before a checkpoint"
        );
        s.engine.checkpoint().unwrap();
        assert_eq!(next_commit(&mut s.committed).await, at(2));

        // A bad record is counted and shown, the position moves past it; nothing more is
        // committed until the next checkpoint holds it.
        s.batches
            .send(vec![
                r#"{"pid": 3, "exe": "c"}"#,
                r#"{"pid": "three"}"#,
                r#"{"pid": 4, "exe": "d"}"#,
            ])
            .unwrap();
        let progress = rows(&s.rt, 4).await;
        assert_eq!((progress.bad, progress.position), (1, Some(at(5))));
        let error = s.rt.status().error.unwrap_or_default();
        assert!(error.starts_with("record 3: "), "{error}");
        tokio::time::sleep(Duration::from_millis(100)).await;
        assert!(
            s.committed.try_recv().is_err(),
            "committed before a checkpoint"
        );
        s.engine.checkpoint().unwrap();
        assert_eq!(next_commit(&mut s.committed).await, at(5));

        drop(s.batches);
        s.task.await.unwrap().unwrap();
        assert_eq!(s.rt.status().state, "finished");
    }

    #[tokio::test]
    async fn a_bad_record_stops_a_source_that_fails_on_errors_before_it() {
        let s = start("(on_error = 'fail')").await;
        s.batches
            .send(vec![
                r#"{"pid": 1, "exe": "a"}"#,
                r#"{"pid": "two"}"#,
                r#"{"pid": 3, "exe": "c"}"#,
            ])
            .unwrap();
        let e = s.task.await.unwrap().unwrap_err();
        assert!(e.to_string().starts_with("record 1: "), "{e}");
        let progress = s.rt.status().progress;
        let first = r#"{"pid": 1, "exe": "a"}"#.len() as u64;
        assert_eq!(
            (
                progress.rows,
                progress.bad,
                progress.bytes,
                progress.position
            ),
            (1, 1, first, Some(at(1)))
        );
    }
}
