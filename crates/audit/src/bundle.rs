//! The evidence bundle on disk, written as the run goes.

use crate::Error;
use glassbox_model::{AuditReport, Flow, Manifest, TranscriptEntry};
use std::fs::File;
use std::io::{BufWriter, Read, Write};
use std::path::{Path, PathBuf};

/// Bytes of the server's stderr kept in `stderr.log`; the rest is counted.
const STDERR_LIMIT: u64 = 64 * 1024 * 1024;

pub(crate) struct Bundle {
    dir: PathBuf,
}

fn err(path: &Path) -> impl FnOnce(std::io::Error) -> Error + '_ {
    move |source| Error::Evidence {
        path: path.to_path_buf(),
        source,
    }
}

impl Bundle {
    pub(crate) fn create(dir: &Path) -> Result<Bundle, Error> {
        std::fs::create_dir_all(dir).map_err(err(dir))?;
        Ok(Bundle {
            dir: dir.to_path_buf(),
        })
    }

    /// The bundle's folder.
    pub(crate) fn dir(&self) -> &Path {
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
        let mut text = serde_json::to_vec_pretty(value)
            .map_err(|e| Error::Internal(format!("cannot serialize {name}: {e}")))?;
        text.push(b'\n');
        std::fs::write(&tmp, text).map_err(err(&tmp))?;
        std::fs::rename(&tmp, &p).map_err(err(&p))
    }

    pub(crate) fn write_manifest(&self, m: &Manifest) -> Result<(), Error> {
        self.write_json("manifest.json", m)
    }

    pub(crate) fn write_report(&self, r: &AuditReport) -> Result<(), Error> {
        self.write_json("report.json", r)
    }

    pub(crate) fn events_writer(&self) -> Result<BufWriter<File>, Error> {
        Ok(BufWriter::new(self.file("events.jsonl")?))
    }

    /// `stderr{suffix}.log`.
    pub(crate) fn stderr_writer(&self, suffix: &str) -> Result<File, Error> {
        self.file(&format!("stderr{suffix}.log"))
    }

    /// `stdout{suffix}.log` (the installer's output; a server's stdout is its transcript).
    pub(crate) fn stdout_writer(&self, suffix: &str) -> Result<File, Error> {
        self.file(&format!("stdout{suffix}.log"))
    }

    /// `transcript{suffix}.jsonl`.
    pub(crate) fn transcript(&self, suffix: &str) -> Result<Transcript, Error> {
        Ok(Transcript {
            out: BufWriter::new(self.file(&format!("transcript{suffix}.jsonl"))?),
            kept: Vec::new(),
        })
    }

    /// `network.jsonl`: every flow, one per line.
    pub(crate) fn write_flows(&self, flows: &[Flow]) -> Result<(), Error> {
        let p = self.dir.join("network.jsonl");
        let mut out = BufWriter::new(File::create(&p).map_err(err(&p))?);
        for f in flows {
            serde_json::to_writer(&mut out, f)
                .map_err(|e| Error::Internal(format!("cannot serialize a flow: {e}")))?;
            out.write_all(b"\n").map_err(err(&p))?;
        }
        out.flush().map_err(err(&p))
    }
}

/// `transcript.jsonl`, one line per entry, flushed per entry.
pub(crate) struct Transcript {
    out: BufWriter<File>,
    kept: Vec<TranscriptEntry>,
}

impl Transcript {
    pub(crate) fn push(&mut self, e: TranscriptEntry) {
        if serde_json::to_writer(&mut self.out, &e).is_ok() {
            let _ = self.out.write_all(b"\n");
            let _ = self.out.flush();
        }
        self.kept.push(e);
    }

    pub(crate) fn finish(mut self) -> Vec<TranscriptEntry> {
        let _ = self.out.flush();
        self.kept
    }
}

/// Copies the server's stderr into `to`, at most [`STDERR_LIMIT`] bytes (then drains and
/// notes how much was cut). Returns the last few KiB, for error messages.
pub(crate) fn copy_bounded(from: Option<impl Read>, mut to: File) -> String {
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
        if written < STDERR_LIMIT {
            let take = (n as u64).min(STDERR_LIMIT - written) as usize;
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
