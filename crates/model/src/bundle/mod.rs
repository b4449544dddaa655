//! The evidence bundle on disk: the one writer ([`Writer`]) and the one reader of its files.
//!
//! Every file of a bundle is written and read here, and nowhere else: the live audit writes
//! through [`Writer`] as the run goes; `glassbox recheck`, the live audit's own evaluation,
//! reports, the store and the tests read through the functions below. The types are this
//! crate's ([`crate::Manifest`], [`crate::Event`], [`crate::Flow`], [`crate::TranscriptEntry`],
//! [`crate::AuditReport`]); what a line looks like is their `Serialize` (compact JSON, one
//! record a line), described for other tools by the JSON Schemas in `schemas/`
//! (`manifest.schema.json`, `events.schema.json`, `network.schema.json`, beside
//! `report.schema.json`), which `crates/audit/tests/schema.rs` holds a real audit's bundle
//! against, reading every line back to the same JSON.
//!
//! | file | content | written by | read by |
//! |---|---|---|---|
//! | `manifest.json` | one [`crate::Manifest`] | [`Writer::write_manifest`] | [`manifest`] |
//! | `events.jsonl` | one [`crate::Event`] a line | [`Writer::events`] | [`read_events`], [`read_calls`] |
//! | `transcript.jsonl`, `transcript-denied.jsonl` | one [`crate::TranscriptEntry`] a line | [`Writer::transcript`] | [`transcript`] |
//! | `network.jsonl` | one [`crate::Flow`] a line | [`Writer::write_flows`] | [`flows`] |
//! | `stderr.log`, `stdout-install.log`... | a process's output, bounded | [`copy_bounded`] | people |
//! | `report.json` | the [`crate::AuditReport`], written last | [`Writer::write_report`] | [`report`] |
//!
//! # Streaming
//!
//! The JSON-lines files are read a megabyte at a time, each line handed on as it is parsed
//! ([`read_lines`]), so memory follows what the reader keeps, not the size of the file.
//! `events.jsonl`, by far the largest, is parsed by [`EventReader`]: a scanner that follows the
//! layout [`Lines::push`] writes, into one reused event per kind, `serde_json` for any other
//! line (what it accepts it reads exactly as `serde_json` does: the tests compare both).
//!
//! # A bundle cut short
//!
//! A glassbox killed mid-write leaves a last line without its newline: it is skipped, since
//! that is what such a bundle ends with. Any other line that does not parse is an error naming
//! the file and the line ([`Error::Format`]).

mod read;
mod scan;
mod words;
mod write;

#[cfg(test)]
mod tests;

pub use read::{read_calls, read_events, read_lines};
pub use scan::EventReader;
pub use write::{copy_bounded, Lines, Transcript, Writer};

use crate::{AuditReport, Evidence, Flow, Manifest, TranscriptEntry};
use std::path::{Path, PathBuf};

/// `manifest.json`.
pub const MANIFEST: &str = "manifest.json";
/// `events.jsonl`.
pub const EVENTS: &str = "events.jsonl";
/// `network.jsonl`.
pub const NETWORK: &str = "network.jsonl";
/// `report.json`.
pub const REPORT: &str = "report.json";

/// A bundle that could not be read or written.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// A file of the bundle could not be read.
    #[error("cannot read evidence {path}: {source}")]
    Read {
        /// Which file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A file of the bundle could not be written.
    #[error("cannot write evidence to {path}: {source}")]
    Write {
        /// Which file.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// A line of a file is not what the bundle's format says.
    #[error("{}:{line}: {source}", path.display())]
    Format {
        /// Which file.
        path: PathBuf,
        /// Which line, from 1 (1 for a JSON file).
        line: usize,
        /// What `serde_json` said of it.
        source: serde_json::Error,
    },
}

impl Error {
    fn format(path: &Path, line: usize, source: serde_json::Error) -> Error {
        Error::Format {
            path: path.to_path_buf(),
            line,
            source,
        }
    }
}

/// A whole JSON file of the bundle.
fn json<T: serde::de::DeserializeOwned>(path: &Path) -> Result<T, Error> {
    let text = std::fs::read(path).map_err(|source| Error::Read {
        path: path.to_path_buf(),
        source,
    })?;
    serde_json::from_slice(&text).map_err(|e| Error::format(path, 1, e))
}

/// The bundle's `manifest.json`.
pub fn manifest(dir: &Path) -> Result<Manifest, Error> {
    json(&dir.join(MANIFEST))
}

/// The bundle's `report.json`, `None` when it has none (a bundle cut short, or one whose
/// audit was stopped before its report).
pub fn report(dir: &Path) -> Result<Option<AuditReport>, Error> {
    let p = dir.join(REPORT);
    if !p.exists() {
        return Ok(None);
    }
    json(&p).map(Some)
}

/// The bundle's `transcript{suffix}.jsonl` (`""` the capture run's, `"-denied"` the denied
/// run's), empty when there is none.
pub fn transcript(dir: &Path, suffix: &str) -> Result<Vec<TranscriptEntry>, Error> {
    let p = dir.join(format!("transcript{suffix}.jsonl"));
    let mut out = Vec::new();
    if p.exists() {
        read_lines(&p, |t| out.push(t))?;
    }
    Ok(out)
}

/// The bundle's `network.jsonl`, empty when there is none.
pub fn flows(dir: &Path) -> Result<Vec<Flow>, Error> {
    let p = dir.join(NETWORK);
    let mut out = Vec::new();
    if p.exists() {
        read_lines(&p, |f| out.push(f))?;
    }
    Ok(out)
}

/// The whole bundle in `dir`, in memory (for a report): manifest, events, the capture run's
/// transcript, flows.
pub fn load(dir: &Path) -> Result<Evidence, Error> {
    let mut ev = Evidence {
        manifest: manifest(dir)?,
        ..Default::default()
    };
    read_events(&dir.join(EVENTS), |e| ev.events.push(e.clone()))?;
    ev.transcript = transcript(dir, "")?;
    ev.flows = flows(dir)?;
    Ok(ev)
}
