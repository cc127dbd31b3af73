//! Inputs decoded ahead, each on a thread of its own: while the engine runs one batch, the
//! next few are read and decoded, so a replay uses a second core (decoding is most of the
//! work of `saql run`). The batches come out in input order, exactly as
//! [`Input::next_batch`] would give them.

use std::sync::mpsc::{sync_channel, Receiver};
use std::thread::JoinHandle;

use datafusion::arrow::record_batch::RecordBatch;

use super::input::{BadRows, Input, InputError};

/// Batches decoded ahead of the engine, per input.
const AHEAD: usize = 4;

/// An input being decoded on its own thread.
pub struct Prefetched {
    /// The stream the input feeds.
    pub stream: String,
    path: String,
    /// Batches in order, then `Ok(None)` at the end (or an error, which ends it too).
    batches: Option<Receiver<Result<Option<RecordBatch>, InputError>>>,
    decoder: Option<JoinHandle<BadRows>>,
}

impl Prefetched {
    /// Starts decoding `input` in batches of up to `max_rows` rows; bad lines are skipped
    /// (and counted) if `skip_bad_rows`, else the first one ends the input with its error.
    pub fn start(
        mut input: Input,
        max_rows: usize,
        skip_bad_rows: bool,
    ) -> Result<Prefetched, InputError> {
        let stream = input.stream.clone();
        let path = input.path.clone();
        let (tx, rx) = sync_channel(AHEAD);
        let decoder = std::thread::Builder::new()
            .name(format!("decode {stream}"))
            .spawn(move || {
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
            })
            .map_err(|e| InputError {
                path: path.clone(),
                line: None,
                message: format!("cannot start a decoding thread: {e}"),
            })?;
        Ok(Prefetched {
            stream,
            path,
            batches: Some(rx),
            decoder: Some(decoder),
        })
    }

    /// The next batch, `None` at the end of the input.
    pub fn next_batch(&mut self) -> Result<Option<RecordBatch>, InputError> {
        let Some(batches) = &self.batches else {
            return Ok(None);
        };
        match batches.recv() {
            Ok(Ok(None)) => {
                self.batches = None;
                Ok(None)
            }
            Ok(next) => next,
            // Gone without saying it ended: the decoder panicked.
            Err(_) => Err(InputError {
                path: self.path.clone(),
                line: None,
                message: "decoding stopped unexpectedly (see the log)".into(),
            }),
        }
    }

    /// Stops decoding (if it has not finished) and adds the lines it skipped to `bad`.
    pub fn finish(&mut self, bad: &mut BadRows) {
        // Dropping the receiver ends a decoder blocked on a full queue.
        self.batches = None;
        if let Some(decoder) = self.decoder.take() {
            match decoder.join() {
                Ok(skipped) => bad.merge(skipped),
                Err(_) => tracing::error!("the decoder of stream \"{}\" panicked", self.stream),
            }
        }
    }
}

impl Drop for Prefetched {
    fn drop(&mut self) {
        let mut ignored = BadRows::new(true);
        self.finish(&mut ignored);
    }
}
