//! Writing a bundle as the run goes: each JSON-lines file flushed as it grows, the JSON files
//! through a temporary file and a rename, the logs bounded.

use super::{Error, EVENTS, MANIFEST, NETWORK, REPORT};
use crate::{AuditReport, Flow, Manifest, TranscriptEntry};
use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};

/// Bytes of a log (`stderr.log`, the installer's `stdout-install.log`) kept; the rest is
/// counted.
const LOG_LIMIT: u64 = 64 * 1024 * 1024;

/// A bundle being written: its folder, and a way to each of its files.
#[derive(Debug)]
pub struct Writer {
    dir: PathBuf,
}

fn err(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::Write {
        path: path.to_path_buf(),
        source,
    }
}

impl Writer {
    /// Makes the folder `dir` (and its parents) for a new bundle.
    pub fn create(dir: &Path) -> Result<Writer, Error> {
        std::fs::create_dir_all(dir).map_err(err(dir))?;
        Ok(Writer {
            dir: dir.to_path_buf(),
        })
    }

    /// The bundle's folder.
    pub fn dir(&self) -> &Path {
        &self.dir
    }

    fn file(&self, name: &str) -> Result<File, Error> {
        let p = self.dir.join(name);
        File::create(&p).map_err(err(&p))
    }

    /// Writes `value` as pretty JSON through a temporary file and a rename, so a reader never
    /// sees half a file.
    fn write_json<T: serde::Serialize>(&self, name: &str, value: &T) -> Result<(), Error> {
        let p = self.dir.join(name);
        let tmp = self.dir.join(format!(".{name}.tmp"));
        let mut text = serde_json::to_vec_pretty(value).map_err(|e| Error::Write {
            path: p.clone(),
            source: e.into(),
        })?;
        text.push(b'\n');
        std::fs::write(&tmp, text).map_err(err(&tmp))?;
        std::fs::rename(&tmp, &p).map_err(err(&p))
    }

    /// `manifest.json`.
    pub fn write_manifest(&self, m: &Manifest) -> Result<(), Error> {
        self.write_json(MANIFEST, m)
    }

    /// `report.json` (written last).
    pub fn write_report(&self, r: &AuditReport) -> Result<(), Error> {
        self.write_json(REPORT, r)
    }

    /// `events.jsonl`, for the recorder to write [`crate::Event`]s to, one a line
    /// ([`Lines::push`]).
    pub fn events(&self) -> Result<Lines<BufWriter<File>>, Error> {
        Ok(Lines(BufWriter::new(self.file(EVENTS)?)))
    }

    /// `stderr{suffix}.log`.
    pub fn stderr(&self, suffix: &str) -> Result<File, Error> {
        self.file(&format!("stderr{suffix}.log"))
    }

    /// `stdout{suffix}.log` (the installer's output; a server's stdout is its transcript).
    pub fn stdout(&self, suffix: &str) -> Result<File, Error> {
        self.file(&format!("stdout{suffix}.log"))
    }

    /// `transcript{suffix}.jsonl`.
    pub fn transcript(&self, suffix: &str) -> Result<Transcript, Error> {
        Ok(Transcript {
            out: Lines(BufWriter::new(
                self.file(&format!("transcript{suffix}.jsonl"))?,
            )),
            kept: Vec::new(),
        })
    }

    /// `network.jsonl`: every flow, one per line.
    pub fn write_flows(&self, flows: &[Flow]) -> Result<(), Error> {
        let p = self.dir.join(NETWORK);
        let mut out = Lines(BufWriter::new(File::create(&p).map_err(err(&p))?));
        for f in flows {
            out.push(f).map_err(err(&p))?;
        }
        out.flush().map_err(err(&p))
    }
}

/// JSON lines to a writer: the one way a record of a bundle becomes a line (`serde_json`'s
/// compact form of the type's `Serialize`, which [`super::EventReader`]'s scanner follows).
#[derive(Debug)]
pub struct Lines<W: Write>(pub W);

impl<W: Write> Lines<W> {
    /// One record, and its newline.
    pub fn push<T: serde::Serialize + ?Sized>(&mut self, record: &T) -> std::io::Result<()> {
        serde_json::to_writer(&mut self.0, record)?;
        self.0.write_all(b"\n")
    }

    /// Makes what was written durable.
    pub fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

/// `transcript.jsonl`, one line per entry, flushed per entry; the entries are also kept, for
/// the audit's own use.
#[derive(Debug)]
pub struct Transcript {
    out: Lines<BufWriter<File>>,
    kept: Vec<TranscriptEntry>,
}

impl Transcript {
    /// One entry: written and flushed (a line that cannot be written is still kept).
    pub fn push(&mut self, e: TranscriptEntry) {
        if self.out.push(&e).is_ok() {
            let _ = self.out.flush();
        }
        self.kept.push(e);
    }

    /// The entries, in order.
    pub fn finish(mut self) -> Vec<TranscriptEntry> {
        let _ = self.out.flush();
        self.kept
    }
}

/// Copies a process's output `from` into the log `to`, at most [`LOG_LIMIT`] bytes (then
/// drains and notes how much was cut). Returns the last few KiB, for error messages.
pub fn copy_bounded(from: Option<impl Read>, mut to: File) -> String {
    let Some(mut from) = from else {
        return String::new();
    };
    let mut buf = vec![0u8; 64 * 1024];
    let mut written = 0u64;
    let mut dropped = 0u64;
    let mut tail: Vec<u8> = Vec::new();
    while let Ok(n) = from.read(&mut buf) {
        if n == 0 {
            break;
        }
        if written < LOG_LIMIT {
            let take = (n as u64).min(LOG_LIMIT - written) as usize;
            let _ = to.write_all(&buf[..take]);
            written += take as u64;
            dropped += (n - take) as u64;
        } else {
            dropped += n as u64;
        }
        tail.extend_from_slice(&buf[..n]);
        if tail.len() > 8192 {
            tail.drain(..tail.len() - 4096);
        }
    }
    if dropped > 0 {
        let _ = writeln!(to, "\n[glassbox: {dropped} more bytes of stderr not kept]");
    }
    String::from_utf8_lossy(&tail).into_owned()
}
