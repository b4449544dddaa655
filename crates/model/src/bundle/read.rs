//! Reading a bundle's JSON-lines files: line by line, a megabyte at a time, never the whole
//! file in memory.

use super::scan::EventReader;
use super::words::find_byte;
use super::Error;
use crate::Event;
use std::io::Read;
use std::path::Path;

/// Reads a JSON-lines file, handing each parsed line to `f`. A line that is not valid is an
/// error naming the file and line (a truncated last line, from a killed glassbox, is
/// skipped: it is what such a bundle ends with).
pub fn read_lines<T: serde::de::DeserializeOwned>(
    path: &Path,
    mut f: impl FnMut(T),
) -> Result<u64, Error> {
    each_line(
        path,
        |line, line_no, complete| match serde_json::from_slice::<T>(line) {
            Ok(v) => {
                f(v);
                Ok(Step::Counted)
            }
            Err(_) if !complete => Ok(Step::Stop),
            Err(e) => Err(Error::format(path, line_no, e)),
        },
    )
}

/// Reads `events.jsonl` as [`read_lines`] does, handing each event to `f` by reference:
/// the events are parsed by an [`EventReader`], which reuses one event per kind instead of
/// allocating every path, argv and string anew (what `glassbox recheck` reads, and its
/// benchmark measures).
pub fn read_events(path: &Path, mut f: impl FnMut(&Event)) -> Result<u64, Error> {
    let mut chunks = Chunks::open(path)?;
    let mut reader = EventReader::default();
    let mut n = 0u64;
    let mut line_no = 0usize;
    loop {
        // Most lines: one the scanner reads whole, its newline right behind it (the line
        // then has no trailing whitespace to trim), read where it lies.
        if let Some((k, len)) = reader.scan(chunks.pending()) {
            if chunks.pending().get(len) == Some(&b'\n') {
                line_no += 1;
                n += 1;
                reader.fast += 1;
                f(&reader.slots[k]);
                chunks.consume(len + 1);
                continue;
            }
        }
        let Some((line, complete)) = chunks.next_line()? else {
            break;
        };
        line_no += 1;
        let text = chunks.buf[line].trim_ascii_end();
        if text.is_empty() {
            continue;
        }
        match reader.parse(text) {
            Ok(e) => {
                f(e);
                n += 1;
            }
            Err(_) if !complete => break,
            Err(e) => return Err(Error::format(path, line_no, e)),
        }
    }
    Ok(n)
}

/// The pre-pass over `events.jsonl` (the checks' pairing of calls and flows keeps only the calls
/// with a destination): a line is parsed only when it is a `connect` event (sendto and the
/// others are that kind too), found by a byte search, so the pass costs about a read of the
/// file. A line that does not parse is left to the full pass, which reports it.
pub fn read_calls(path: &Path, f: &mut dyn FnMut(&Event)) -> Result<(), Error> {
    let kind = memchr::memmem::Finder::new(b"\"kind\":\"connect\"");
    let mut chunks = Chunks::open(path)?;
    let mut reader = EventReader::default();
    while let Some((line, _)) = chunks.next_line()? {
        let text = &chunks.buf[line];
        if kind.find(text).is_some() {
            if let Ok(e) = reader.parse(text.trim_ascii_end()) {
                f(e);
            }
        }
    }
    Ok(())
}

/// What a line's handler says.
enum Step {
    /// The line was a record.
    Counted,
    /// The stream ends here (a truncated last line).
    Stop,
}

/// Bytes read from a file at a time (a line longer than this grows the buffer).
pub(super) const CHUNK: usize = 1 << 20;

/// A file read a large chunk at a time into one buffer, lines cut out of it where they lie
/// (never copied).
struct Chunks<'p> {
    path: &'p Path,
    file: std::fs::File,
    buf: Vec<u8>,
    /// `buf[start..end]` is read and not yet handed out.
    start: usize,
    end: usize,
    eof: bool,
}

impl<'p> Chunks<'p> {
    fn open(path: &'p Path) -> Result<Self, Error> {
        Ok(Chunks {
            path,
            file: std::fs::File::open(path).map_err(|e| Chunks::error(path, e))?,
            buf: vec![0u8; CHUNK],
            start: 0,
            end: 0,
            eof: false,
        })
    }

    fn error(path: &Path, source: std::io::Error) -> Error {
        Error::Read {
            path: path.to_path_buf(),
            source,
        }
    }

    /// What is read and not handed out yet.
    fn pending(&self) -> &[u8] {
        &self.buf[self.start..self.end]
    }

    /// Hands out the next `n` pending bytes.
    fn consume(&mut self, n: usize) {
        self.start = (self.start + n).min(self.end);
    }

    /// Where the next line is in `buf` (without its newline), and whether a newline ended it
    /// (the last line of a file may have none); `None` at the end of the file.
    fn next_line(&mut self) -> Result<Option<(std::ops::Range<usize>, bool)>, Error> {
        loop {
            if let Some(at) = find_byte(self.pending(), b'\n') {
                let line = self.start..self.start + at;
                self.start += at + 1;
                return Ok(Some((line, true)));
            }
            if self.eof {
                if self.start == self.end {
                    return Ok(None);
                }
                let line = self.start..self.end;
                self.start = self.end;
                return Ok(Some((line, false)));
            }
            // The rest of a line to the front, then more of the file behind it.
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
            if self.end == self.buf.len() {
                self.buf.resize(self.buf.len() * 2, 0);
            }
            match self.file.read(&mut self.buf[self.end..]) {
                Ok(0) => self.eof = true,
                Ok(got) => self.end += got,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Chunks::error(self.path, e)),
            }
        }
    }
}

/// Hands every line of `path` that is not blank to `f`, without its newline and trailing
/// ASCII whitespace, with its line number (from 1) and whether a newline ended it; returns
/// how many `f` counted.
fn each_line(
    path: &Path,
    mut f: impl FnMut(&[u8], usize, bool) -> Result<Step, Error>,
) -> Result<u64, Error> {
    let mut chunks = Chunks::open(path)?;
    let mut n = 0u64;
    let mut line_no = 0usize;
    while let Some((line, complete)) = chunks.next_line()? {
        line_no += 1;
        let text = chunks.buf[line].trim_ascii_end();
        if text.is_empty() {
            continue;
        }
        match f(text, line_no, complete)? {
            Step::Counted => n += 1,
            Step::Stop => break,
        }
    }
    Ok(n)
}
