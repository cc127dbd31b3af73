//! Tailing a file of records, one per line, across growth, rotation and truncation.
//!
//! A [`FileTail`] hands out runs of complete lines with the position just after them
//! (device, inode, byte offset, line number). A line without its newline is held back until
//! the newline arrives, except at the end of a file that was rotated away (its writer moved
//! on) or, without `follow`, at the end of the file. Rotation (the path now names another
//! file) is noticed once the old file is read to its end; the new file is then read from its
//! start. A file that shrank below the position (copy-truncate) is read again from its start.
//! When resuming from a saved position whose file is no longer at the path, the directory is
//! searched for it (e.g. `x.log.1`) and its rest is read first.

use std::fs::File;
use std::io::{Read as _, Seek, SeekFrom};
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};
use std::time::Duration;

use super::spec::SourcePosition;
use super::{Place, Read, Records, Skipped, Source};
use crate::error::{sqlstate, Error, Result};

/// Most bytes of input read into one batch.
const CHUNK_BYTES: usize = 1 << 20;

/// A file source's connector: a [`FileTail`] polled on the runtime's blocking threads (file
/// reads block), pausing for the poll interval when nothing is new.
pub struct FileSource {
    /// `None` only while a poll is under way.
    tail: Option<FileTail>,
    path: PathBuf,
    follow: bool,
    poll_interval: Duration,
    /// Where the lines last handed out start.
    start: SourcePosition,
}

impl FileSource {
    /// Reads `tail`, pausing `poll_interval` whenever nothing is new.
    pub fn new(tail: FileTail, poll_interval: Duration) -> FileSource {
        FileSource {
            path: tail.path.clone(),
            follow: tail.follow,
            tail: Some(tail),
            poll_interval,
            start: SourcePosition::File {
                dev: 0,
                inode: 0,
                offset: 0,
                line: 0,
            },
        }
    }

    async fn poll(&mut self) -> Result<Poll> {
        let mut tail = self
            .tail
            .take()
            .ok_or_else(|| Error::Internal("a file source polled twice at once".into()))?;
        let (tail, poll) = crate::spawn::blocking(move || {
            let poll = tail.poll(CHUNK_BYTES);
            (tail, poll)
        })
        .await
        .map_err(|e| Error::Internal(format!("reading {}: {e}", self.path.display())))?;
        self.tail = Some(tail);
        poll
    }
}

#[async_trait::async_trait]
impl Source for FileSource {
    async fn read(&mut self) -> Result<Read> {
        match self.poll().await? {
            Poll::Lines(chunk) => {
                // Each line without its newline (nor a carriage return before it).
                let mut spans = Vec::new();
                let mut from = 0;
                for end in memchr::memchr_iter(b'\n', &chunk.data) {
                    let line = &chunk.data[from..end];
                    let len = line.strip_suffix(b"\r").map_or(line.len(), <[u8]>::len);
                    spans.push(from..from + len);
                    from = end + 1;
                }
                self.start = chunk.start;
                Ok(Read::Records(Records::new(chunk.data, spans, chunk.bytes)))
            }
            Poll::Idle => {
                tokio::time::sleep(self.poll_interval).await;
                Ok(Read::Idle)
            }
            Poll::Missing if !self.follow => Err(Error::invalid_input(
                sqlstate::UNDEFINED_FILE,
                format!("file {} does not exist", self.path.display()),
            )),
            Poll::Missing => {
                tokio::time::sleep(self.poll_interval).await;
                Ok(Read::Waiting("waiting for file"))
            }
            Poll::End => Ok(Read::End),
            Poll::TooLong { line, max } => {
                let at = format!(
                    "line {line} of {} is longer than {max} bytes (--max-copy-line-bytes)",
                    self.path.display()
                );
                Ok(Read::Skipped(Skipped {
                    records: 1,
                    note: format!("{at}: skipped"),
                    fails: Some(Error::limit(sqlstate::PROGRAM_LIMIT_EXCEEDED, at)),
                }))
            }
        }
    }

    fn position(&self) -> Option<SourcePosition> {
        self.tail.as_ref().and_then(FileTail::position)
    }

    fn place(&self, records: &Records, i: usize) -> Place {
        let (dev, inode, offset, line) = match self.start {
            SourcePosition::File {
                dev,
                inode,
                offset,
                line,
            } => (dev, inode, offset, line),
            SourcePosition::Kafka { .. } => (0, 0, 0, 0),
        };
        // A line starts where the one before it ended, its newline included.
        let before = records.span(i).start as u64;
        Place {
            resume: SourcePosition::File {
                dev,
                inode,
                offset: offset + before,
                line: line + i as u64,
            },
            bytes_before: before,
            name: format!("line {} of {}", line + i as u64 + 1, self.path.display()),
        }
    }
}

/// What a poll found.
#[derive(Debug)]
pub enum Poll {
    /// Complete lines.
    Lines(Chunk),
    /// Nothing new yet.
    Idle,
    /// The file does not exist (yet).
    Missing,
    /// Without `follow`: the whole file has been handed out.
    End,
    /// A line longer than the bound: it is skipped (the rest of it too, as it arrives), so
    /// that one oversized record cannot stop the source for good.
    TooLong {
        /// Its line number.
        line: u64,
        /// The bound it broke.
        max: usize,
    },
}

/// A run of complete lines and where they end.
#[derive(Debug)]
pub struct Chunk {
    /// The lines, each ending with `\n`.
    pub data: Vec<u8>,
    /// Where the data starts.
    pub start: SourcePosition,
    /// Bytes consumed from the file, including a skipped header line.
    pub bytes: u64,
}

/// A file being read line by line.
pub struct FileTail {
    path: PathBuf,
    follow: bool,
    header: bool,
    max_line_bytes: usize,
    /// Where to resume the first time the file is opened.
    resume: Option<SourcePosition>,
    start_at_end: bool,
    open: Option<OpenFile>,
}

struct OpenFile {
    file: File,
    dev: u64,
    inode: u64,
    /// Offset of the first byte not handed out.
    offset: u64,
    /// Lines handed out (or skipped as a header) so far.
    line: u64,
    /// Bytes read after `offset`: the start of a line without its newline yet.
    pending: Vec<u8>,
    /// The file was rotated away: hand out the rest, then open the path again.
    rotated: bool,
    /// Inside a line that was too long: drop bytes up to its newline.
    discarding: bool,
}

impl FileTail {
    /// A tail of `path`, resuming at `resume` if given, else at the start (or the end, with
    /// `start_at_end`) of the file.
    pub fn new(
        path: PathBuf,
        follow: bool,
        header: bool,
        resume: Option<SourcePosition>,
        start_at_end: bool,
        max_line_bytes: usize,
    ) -> FileTail {
        FileTail {
            path,
            follow,
            header,
            max_line_bytes,
            resume,
            start_at_end,
            open: None,
        }
    }

    /// The position after everything handed out so far.
    pub fn position(&self) -> Option<SourcePosition> {
        self.open
            .as_ref()
            .map(|f| f.position())
            .or(self.resume.clone())
    }

    /// Reads what is new, at most about `max_bytes`.
    pub fn poll(&mut self, max_bytes: usize) -> Result<Poll> {
        if self.open.is_none() {
            match self.open_first()? {
                Some(f) => self.open = Some(f),
                None => return Ok(Poll::Missing),
            }
        }
        let io = |what: &str, path: &Path, e| Error::io(format!("{what} {}", path.display()), e);
        let Some(f) = self.open.as_mut() else {
            return Ok(Poll::Missing);
        };
        let mut buf = vec![0u8; max_bytes.max(4096)];
        let n = f
            .file
            .read(&mut buf)
            .map_err(|e| io("reading", &self.path, e))?;
        if n > 0 {
            f.pending.extend_from_slice(&buf[..n]);
            if f.discarding {
                match f.pending.iter().position(|&b| b == b'\n') {
                    Some(end) => {
                        f.offset += end as u64 + 1;
                        f.line += 1;
                        f.pending.drain(..=end);
                        f.discarding = false;
                    }
                    None => {
                        f.offset += f.pending.len() as u64;
                        f.pending.clear();
                        return Ok(Poll::Idle);
                    }
                }
            }
            if let Some(last) = f.pending.iter().rposition(|&b| b == b'\n') {
                let rest = f.pending.split_off(last + 1);
                let data = std::mem::replace(&mut f.pending, rest);
                return Ok(Poll::Lines(f.take(data, self.header)));
            }
            if f.pending.len() > self.max_line_bytes {
                f.offset += f.pending.len() as u64;
                f.pending.clear();
                f.discarding = true;
                return Ok(Poll::TooLong {
                    line: f.line + 1,
                    max: self.max_line_bytes,
                });
            }
            return Ok(Poll::Idle);
        }
        // At the end of the file: has it been rotated away or truncated?
        if !f.rotated {
            match std::fs::metadata(&self.path) {
                Ok(m) if m.dev() == f.dev && m.ino() == f.inode => {
                    let read_to = f.offset + f.pending.len() as u64;
                    if m.len() < read_to {
                        f.file
                            .seek(SeekFrom::Start(0))
                            .map_err(|e| io("seeking", &self.path, e))?;
                        f.offset = 0;
                        f.line = 0;
                        f.pending.clear();
                        return Ok(Poll::Idle);
                    }
                }
                Ok(_) => f.rotated = true,
                Err(e) if e.kind() == std::io::ErrorKind::NotFound => f.rotated = true,
                Err(e) => return Err(io("reading the metadata of", &self.path, e)),
            }
        }
        if f.rotated || !self.follow {
            if !f.pending.is_empty() {
                // The writer has moved on: the last line is complete without its newline.
                let mut data = std::mem::take(&mut f.pending);
                data.push(b'\n');
                let mut chunk = f.take(data, self.header);
                chunk.bytes -= 1;
                f.offset -= 1;
                return Ok(Poll::Lines(chunk));
            }
            if f.rotated && self.follow {
                self.open = None;
                self.start_at_end = false;
                return Ok(Poll::Idle);
            }
            return Ok(Poll::End);
        }
        Ok(Poll::Idle)
    }

    /// Opens the file to read first: the saved position's file (at the path, or rotated to
    /// a sibling name) at its offset, else the path's file at its start or end.
    fn open_first(&mut self) -> Result<Option<OpenFile>> {
        let io = |what: &str, path: &Path, e| Error::io(format!("{what} {}", path.display()), e);
        let resume = self.resume.take();
        if let Some(SourcePosition::File {
            dev,
            inode,
            offset,
            line,
        }) = resume
        {
            if let Some((path, rotated)) = self.find(dev, inode) {
                let mut file = File::open(&path).map_err(|e| io("opening", &path, e))?;
                file.seek(SeekFrom::Start(offset))
                    .map_err(|e| io("seeking", &path, e))?;
                return Ok(Some(OpenFile {
                    file,
                    dev,
                    inode,
                    offset,
                    line,
                    pending: Vec::new(),
                    discarding: false,
                    rotated,
                }));
            }
            // The file read before is gone: whatever is at the path now is new.
            self.start_at_end = false;
        }
        let mut file = match File::open(&self.path) {
            Ok(f) => f,
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(None),
            Err(e) => return Err(io("opening", &self.path, e)),
        };
        let m = file
            .metadata()
            .map_err(|e| io("reading the metadata of", &self.path, e))?;
        let offset = if self.start_at_end { m.len() } else { 0 };
        file.seek(SeekFrom::Start(offset))
            .map_err(|e| io("seeking", &self.path, e))?;
        self.start_at_end = false;
        Ok(Some(OpenFile {
            file,
            dev: m.dev(),
            inode: m.ino(),
            offset,
            // Starting at the end: the header, if any, is behind us.
            line: u64::from(offset > 0),
            pending: Vec::new(),
            rotated: false,
            discarding: false,
        }))
    }

    /// The file with this identity: at the path (not rotated), or a sibling (rotated).
    fn find(&self, dev: u64, inode: u64) -> Option<(PathBuf, bool)> {
        let same = |p: &Path| {
            std::fs::metadata(p)
                .map(|m| m.dev() == dev && m.ino() == inode)
                .unwrap_or(false)
        };
        if same(&self.path) {
            return Some((self.path.clone(), false));
        }
        let dir = match self.path.parent() {
            Some(d) if !d.as_os_str().is_empty() => d.to_path_buf(),
            _ => PathBuf::from("."),
        };
        let found = std::fs::read_dir(dir)
            .ok()?
            .flatten()
            .map(|e| e.path())
            .find(|p| same(p))?;
        Some((found, true))
    }
}

impl OpenFile {
    fn position(&self) -> SourcePosition {
        SourcePosition::File {
            dev: self.dev,
            inode: self.inode,
            offset: self.offset,
            line: self.line,
        }
    }

    /// Hands out `data` (complete lines), skipping the header line at the file's start.
    fn take(&mut self, mut data: Vec<u8>, header: bool) -> Chunk {
        let bytes = data.len() as u64;
        if header && self.line == 0 {
            let first = data.iter().position(|&b| b == b'\n').map_or(0, |i| i + 1);
            data.drain(..first);
            self.offset += first as u64;
            self.line = 1;
        }
        let start = self.position();
        self.offset += data.len() as u64;
        self.line += data.iter().filter(|&&b| b == b'\n').count() as u64;
        Chunk { data, start, bytes }
    }
}

#[cfg(test)]
mod tests {
    use std::io::Write;

    use super::*;

    fn lines(p: Poll) -> String {
        match p {
            Poll::Lines(c) => String::from_utf8(c.data).unwrap(),
            other => panic!("expected lines, got {other:?}"),
        }
    }

    fn append(path: &Path, text: &str) {
        let mut f = std::fs::OpenOptions::new()
            .create(true)
            .append(true)
            .open(path)
            .unwrap();
        f.write_all(text.as_bytes()).unwrap();
    }

    #[test]
    fn follows_growth_rotation_and_resumes() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.log");
        let mut tail = FileTail::new(path.clone(), true, false, None, false, 1 << 20);
        assert!(matches!(tail.poll(64).unwrap(), Poll::Missing));
        append(&path, "a\nb");
        assert_eq!(lines(tail.poll(64).unwrap()), "a\n");
        assert!(matches!(tail.poll(64).unwrap(), Poll::Idle));
        append(&path, "c\nd\n");
        assert_eq!(lines(tail.poll(64).unwrap()), "bc\nd\n");
        let saved = tail.position().unwrap();
        append(&path, "e\nf");
        std::fs::rename(&path, dir.path().join("x.log.1")).unwrap();
        append(&path, "g\n");
        // A fresh tail resuming from the saved position finds the rotated file first.
        let mut again = FileTail::new(path.clone(), true, false, Some(saved), false, 1 << 20);
        assert_eq!(lines(again.poll(64).unwrap()), "e\n");
        assert_eq!(lines(again.poll(64).unwrap()), "f\n");
        assert!(matches!(again.poll(64).unwrap(), Poll::Idle));
        assert_eq!(lines(again.poll(64).unwrap()), "g\n");
        // The first tail sees the same.
        assert_eq!(lines(tail.poll(64).unwrap()), "e\n");
        assert_eq!(lines(tail.poll(64).unwrap()), "f\n");
        assert!(matches!(tail.poll(64).unwrap(), Poll::Idle));
        assert_eq!(lines(tail.poll(64).unwrap()), "g\n");
        // Truncation: read again from the start.
        std::fs::write(&path, "").unwrap();
        assert!(matches!(tail.poll(64).unwrap(), Poll::Idle));
        append(&path, "h\n");
        assert_eq!(lines(tail.poll(64).unwrap()), "h\n");
    }

    #[test]
    fn start_at_end_header_and_end_without_follow() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.csv");
        append(&path, "h1,h2\n1,2\n");
        let mut tail = FileTail::new(path.clone(), false, true, None, false, 1 << 20);
        assert_eq!(lines(tail.poll(64).unwrap()), "1,2\n");
        assert!(matches!(tail.poll(64).unwrap(), Poll::End));
        let mut end = FileTail::new(path.clone(), true, true, None, true, 1 << 20);
        assert!(matches!(end.poll(64).unwrap(), Poll::Idle));
        append(&path, "3,4\n5");
        assert_eq!(lines(end.poll(64).unwrap()), "3,4\n");
        let mut whole = FileTail::new(path.clone(), false, false, None, false, 1 << 20);
        assert_eq!(lines(whole.poll(1 << 10).unwrap()), "h1,h2\n1,2\n3,4\n");
        assert_eq!(lines(whole.poll(1 << 10).unwrap()), "5\n");
        assert!(matches!(whole.poll(64).unwrap(), Poll::End));
        let mut long = FileTail::new(path.clone(), true, false, None, true, 2);
        assert!(matches!(long.poll(64).unwrap(), Poll::Idle));
        append(&path, "678");
        assert!(matches!(
            long.poll(64).unwrap(),
            Poll::TooLong { max: 2, .. }
        ));
    }

    #[test]
    fn a_line_over_the_bound_is_skipped_and_the_next_ones_are_read() {
        let dir = tempfile::tempdir().unwrap();
        let path = dir.path().join("x.log");
        append(&path, "ok1\n");
        let mut tail = FileTail::new(path.clone(), true, false, None, false, 8);
        assert_eq!(lines(tail.poll(64).unwrap()), "ok1\n");
        // A long line arriving in pieces, then ordinary ones.
        append(&path, &"x".repeat(20));
        assert!(matches!(
            tail.poll(64).unwrap(),
            Poll::TooLong { line: 2, max: 8 }
        ));
        append(&path, &"y".repeat(30));
        assert!(matches!(tail.poll(64).unwrap(), Poll::Idle));
        append(&path, "zz\nok2\nok3\n");
        let chunk = match tail.poll(64).unwrap() {
            Poll::Lines(c) => c,
            other => panic!("{other:?}"),
        };
        assert_eq!(String::from_utf8(chunk.data).unwrap(), "ok2\nok3\n");
        assert!(matches!(
            chunk.start,
            SourcePosition::File {
                line: 2,
                offset: 57,
                ..
            }
        ));
        // Lines keep their numbers, and the position is after everything read.
        assert!(matches!(
            tail.position(),
            Some(SourcePosition::File {
                line: 4,
                offset: 65,
                ..
            })
        ));
    }
}
