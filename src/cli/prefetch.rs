//! Inputs decoded ahead of the engine, on threads of their own: while the engine runs one
//! batch, the next few are read and decoded (decoding is most of the work of `saql run`).
//! A CSV file on a machine with more than one core is cut into chunks of whole records
//! ([`CsvChunks`]) that several threads decode at once ([`ChunkDecoder`]); other inputs are
//! decoded by one thread. Either way the batches come out in input order, exactly as
//! [`Input::next_batch`] would give them, with the same bad-line reports.

use std::collections::VecDeque;
use std::sync::mpsc::{sync_channel, Receiver, SyncSender};
use std::thread::JoinHandle;

use datafusion::arrow::record_batch::RecordBatch;

use super::input::{BadRows, ChunkDecoder, CsvChunk, DecodedChunk, Input, InputError, CHUNK_BYTES};

/// Batches decoded ahead of the engine by a single decoding thread.
const AHEAD: usize = 4;

/// Most threads decoding the chunks of one input.
const MAX_CHUNK_THREADS: usize = 4;

/// An input being decoded on threads of its own.
pub struct Prefetched {
    /// The stream the input feeds.
    pub stream: String,
    path: String,
    decoding: Decoding,
    threads: Vec<JoinHandle<()>>,
}

/// How an input is decoded.
enum Decoding {
    /// By one thread: batches in order, then `Ok(None)` at the end (or an error, which ends
    /// it too); the thread returns the bad lines it skipped.
    Whole {
        batches: Option<Receiver<Result<Option<RecordBatch>, InputError>>>,
        decoder: Option<JoinHandle<BadRows>>,
    },
    /// In chunks, by several threads.
    Chunks(ChunkResults),
}

/// What a chunk-decoding thread is given: a chunk, a failure to read the next one, or the end.
enum Job {
    Chunk(CsvChunk),
    Failed(InputError),
    End,
}

/// What a chunk-decoding thread hands on, for each [`Job`].
enum Decoded {
    Chunk(DecodedChunk),
    Failed(InputError),
    End,
}

/// The decoded chunks of an input, taken from the decoding threads in input order.
struct ChunkResults {
    /// Per decoding thread; chunk `i` comes from thread `i % len`.
    from: Vec<Receiver<Decoded>>,
    next: usize,
    ready: VecDeque<RecordBatch>,
    /// What ends the input after `ready`.
    end: Option<Result<(), InputError>>,
    bad: BadRows,
}

impl Prefetched {
    /// Starts decoding `input` in batches of up to `max_rows` rows; bad lines are skipped
    /// (and counted) if `skip_bad_rows`, else the first one ends the input with its error.
    pub fn start(
        input: Input,
        max_rows: usize,
        skip_bad_rows: bool,
    ) -> Result<Prefetched, InputError> {
        let cores = std::thread::available_parallelism().map_or(1, |n| n.get());
        if cores > 1 && input.chunkable() {
            let threads = cores.min(MAX_CHUNK_THREADS);
            return Prefetched::start_chunks(input, max_rows, skip_bad_rows, threads);
        }
        Prefetched::start_whole(input, max_rows, skip_bad_rows)
    }

    fn start_whole(
        mut input: Input,
        max_rows: usize,
        skip_bad_rows: bool,
    ) -> Result<Prefetched, InputError> {
        let stream = input.stream.clone();
        let path = input.path.clone();
        let (tx, rx) = sync_channel(AHEAD);
        let decoder = spawn(&path, format!("decode {stream}"), move || {
            let mut bad = BadRows::new(skip_bad_rows);
            loop {
                let next = input.next_batch(max_rows, &mut bad);
                let last = !matches!(next, Ok(Some(_)));
                // A failed send: the replay stopped reading, it ended early.
                if tx.send(next).is_err() || last {
                    break;
                }
            }
            bad
        })?;
        Ok(Prefetched {
            stream,
            path,
            decoding: Decoding::Whole {
                batches: Some(rx),
                decoder: Some(decoder),
            },
            threads: Vec::new(),
        })
    }

    /// One thread reads the input and cuts it into chunks, which `threads` threads decode,
    /// chunk `i` by thread `i % threads`.
    fn start_chunks(
        input: Input,
        max_rows: usize,
        skip_bad_rows: bool,
        threads: usize,
    ) -> Result<Prefetched, InputError> {
        let stream = input.stream.clone();
        let path = input.path.clone();
        let mut handles = Vec::new();
        let mut jobs: Vec<SyncSender<Job>> = Vec::new();
        let mut from = Vec::new();
        let (mut chunks, decoder) = input.into_chunks(max_rows, skip_bad_rows, CHUNK_BYTES)?;
        for t in 0..threads {
            let (job_tx, job_rx) = sync_channel::<Job>(1);
            let (out_tx, out_rx) = sync_channel::<Decoded>(1);
            let decoder: ChunkDecoder = decoder.clone();
            handles.push(spawn(&path, format!("decode {stream} {t}"), move || {
                for job in job_rx {
                    let out = match job {
                        Job::Chunk(chunk) => Decoded::Chunk(decoder.decode(chunk)),
                        Job::Failed(e) => Decoded::Failed(e),
                        Job::End => Decoded::End,
                    };
                    // A failed send: the replay stopped reading.
                    if out_tx.send(out).is_err() {
                        break;
                    }
                }
            })?);
            jobs.push(job_tx);
            from.push(out_rx);
        }
        handles.push(spawn(&path, format!("read {stream}"), move || {
            for to in (0..jobs.len()).cycle() {
                let job = match chunks.next_chunk() {
                    Ok(Some(chunk)) => Job::Chunk(chunk),
                    Ok(None) => Job::End,
                    Err(e) => Job::Failed(e),
                };
                let last = !matches!(job, Job::Chunk(_));
                if jobs[to].send(job).is_err() || last {
                    break;
                }
            }
        })?);
        Ok(Prefetched {
            stream,
            path,
            decoding: Decoding::Chunks(ChunkResults {
                from,
                next: 0,
                ready: VecDeque::new(),
                end: None,
                bad: BadRows::new(skip_bad_rows),
            }),
            threads: handles,
        })
    }

    /// The next batch, `None` at the end of the input.
    pub fn next_batch(&mut self) -> Result<Option<RecordBatch>, InputError> {
        let stopped = || InputError {
            path: self.path.clone(),
            line: None,
            message: "decoding stopped unexpectedly (see the log)".into(),
        };
        match &mut self.decoding {
            Decoding::Whole { batches, .. } => {
                let Some(rx) = batches else {
                    return Ok(None);
                };
                match rx.recv() {
                    Ok(Ok(None)) => {
                        *batches = None;
                        Ok(None)
                    }
                    Ok(next) => next,
                    // Gone without saying it ended: the decoder panicked.
                    Err(_) => Err(stopped()),
                }
            }
            Decoding::Chunks(results) => {
                results.next_batch().map_err(|e| e.unwrap_or_else(stopped))
            }
        }
    }

    /// Stops decoding (if it has not finished) and adds the lines it skipped to `bad`.
    pub fn finish(&mut self, bad: &mut BadRows) {
        // Dropping the receivers ends decoders blocked on a full queue.
        match &mut self.decoding {
            Decoding::Whole { batches, decoder } => {
                *batches = None;
                if let Some(decoder) = decoder.take() {
                    match decoder.join() {
                        Ok(skipped) => bad.merge(skipped),
                        Err(_) => self.panicked(),
                    }
                }
            }
            Decoding::Chunks(results) => {
                results.from.clear();
                bad.merge(std::mem::replace(&mut results.bad, BadRows::new(true)));
            }
        }
        for thread in std::mem::take(&mut self.threads) {
            if thread.join().is_err() {
                self.panicked();
            }
        }
    }

    fn panicked(&self) {
        tracing::error!("a decoder of stream \"{}\" panicked", self.stream);
    }
}

impl ChunkResults {
    /// The next batch in input order; `Err(None)` if a decoding thread is gone unexpectedly.
    fn next_batch(&mut self) -> Result<Option<RecordBatch>, Option<InputError>> {
        loop {
            if let Some(batch) = self.ready.pop_front() {
                return Ok(Some(batch));
            }
            if let Some(end) = &self.end {
                return match end {
                    Ok(()) => Ok(None),
                    Err(e) => {
                        let e = e.clone();
                        self.end = Some(Ok(()));
                        Err(Some(e))
                    }
                };
            }
            let Some(from) = self.from.get(self.next % self.from.len().max(1)) else {
                return Ok(None);
            };
            match from.recv() {
                Ok(Decoded::Chunk(chunk)) => {
                    self.next += 1;
                    for e in chunk.skipped {
                        if let Err(e) = self.bad.record(e) {
                            self.end = Some(Err(e));
                            break;
                        }
                    }
                    self.ready.extend(chunk.batches);
                    if let Some(e) = chunk.failed {
                        self.end = Some(Err(e));
                    } else if chunk.ended {
                        self.end = Some(Ok(()));
                    }
                }
                Ok(Decoded::Failed(e)) => self.end = Some(Err(e)),
                Ok(Decoded::End) => self.end = Some(Ok(())),
                Err(_) => return Err(None),
            }
        }
    }
}

/// Starts a named thread.
fn spawn<T: Send + 'static>(
    path: &str,
    name: String,
    work: impl FnOnce() -> T + Send + 'static,
) -> Result<JoinHandle<T>, InputError> {
    saql::spawn::thread(name, work).map_err(|e| InputError {
        path: path.to_string(),
        line: None,
        message: format!("cannot start a decoding thread: {e}"),
    })
}

impl Drop for Prefetched {
    fn drop(&mut self) {
        let mut ignored = BadRows::new(true);
        self.finish(&mut ignored);
    }
}
