//! `glassbox recheck`: stored evidence re-evaluated with the current checks, nothing run.
//!
//! The event stream is read line by line and fed to every check as it is parsed
//! ([`glassbox_checks::Run`]): memory follows what the checks find, not the size of the trace.

use crate::Error;
use glassbox_checks::{Context, Proofs, Run};
use glassbox_model::{AuditReport, Event, Flow, Manifest, TranscriptEntry};
use std::io::{BufRead, BufReader};
use std::path::{Path, PathBuf};

/// A re-evaluated bundle.
#[derive(Debug)]
pub struct Recheck {
    /// The bundle.
    pub dir: PathBuf,
    /// Its evidence judged by the current checks.
    pub report: AuditReport,
    /// Its stored report, with the claims of retracted check versions withdrawn.
    pub stored: Option<AuditReport>,
    /// How many stored check results were withdrawn.
    pub withdrawn: usize,
    /// Events read.
    pub events: u64,
}

fn read(path: &Path) -> Result<Vec<u8>, Error> {
    std::fs::read(path).map_err(|source| Error::Evidence {
        path: path.to_path_buf(),
        source,
    })
}

fn bad(path: &Path, line: usize, e: impl std::fmt::Display) -> Error {
    Error::Usage(format!("{}:{line}: {e}", path.display()))
}

/// Reads a JSON-lines file, handing each parsed line to `f`. A line that is not valid is an
/// error naming the file and line (a truncated last line, from a killed glassbox, is
/// skipped: it is what such a bundle ends with).
pub fn read_lines<T: serde::de::DeserializeOwned>(
    path: &Path,
    mut f: impl FnMut(T),
) -> Result<u64, Error> {
    let file = std::fs::File::open(path).map_err(|source| Error::Evidence {
        path: path.to_path_buf(),
        source,
    })?;
    let mut r = BufReader::with_capacity(1 << 20, file);
    let mut buf = Vec::with_capacity(4096);
    let mut n = 0u64;
    let mut line_no = 0usize;
    loop {
        buf.clear();
        let got = r
            .read_until(b'\n', &mut buf)
            .map_err(|source| Error::Evidence {
                path: path.to_path_buf(),
                source,
            })?;
        if got == 0 {
            break;
        }
        line_no += 1;
        let complete = buf.last() == Some(&b'\n');
        let len = buf.trim_ascii_end().len();
        if len == 0 {
            continue;
        }
        // (simd-json measured no faster here: the cost is in building the events.)
        match serde_json::from_slice::<T>(&buf[..len]) {
            Ok(v) => {
                f(v);
                n += 1;
            }
            Err(_) if !complete => break,
            Err(e) => return Err(bad(path, line_no, e)),
        }
    }
    Ok(n)
}

/// Re-evaluates the bundle in `dir` with the current checks under `proofs`.
pub fn recheck(dir: &Path, proofs: &Proofs) -> Result<Recheck, Error> {
    let manifest_path = dir.join("manifest.json");
    let manifest: Manifest =
        serde_json::from_slice(&read(&manifest_path)?).map_err(|e| bad(&manifest_path, 1, e))?;
    let mut transcript: Vec<TranscriptEntry> = Vec::new();
    let tpath = dir.join("transcript.jsonl");
    if tpath.exists() {
        read_lines(&tpath, |t| transcript.push(t))?;
    }
    let mut flows: Vec<Flow> = Vec::new();
    let npath = dir.join("network.jsonl");
    if npath.exists() {
        read_lines(&npath, |f| flows.push(f))?;
    }
    let mut run = Run::new(Context {
        manifest: &manifest,
        transcript: &transcript,
        flows: &flows,
    });
    let events = read_lines(&dir.join("events.jsonl"), |e: Event| run.event(&e))?;
    let report = crate::report(&manifest, run.finish(proofs), dir);
    let session = &manifest.session;
    let rpath = dir.join("report.json");
    let (stored, withdrawn) = if rpath.exists() {
        let mut r: AuditReport =
            serde_json::from_slice(&read(&rpath)?).map_err(|e| bad(&rpath, 1, e))?;
        let n = glassbox_checks::apply_retractions(&mut r.checks);
        if n > 0 {
            let (v, why) =
                glassbox_checks::verdict(&r.checks, session.completed, session.failure.as_deref());
            r.verdict = v;
            r.inconclusive_reason = why;
        }
        (Some(r), n)
    } else {
        (None, 0)
    };
    Ok(Recheck {
        dir: dir.to_path_buf(),
        report,
        stored,
        withdrawn,
        events,
    })
}

/// The whole bundle in `dir`, in memory (for a report): manifest, events, transcript, flows.
pub fn load(dir: &Path) -> Result<glassbox_model::Evidence, Error> {
    let manifest_path = dir.join("manifest.json");
    let manifest: Manifest =
        serde_json::from_slice(&read(&manifest_path)?).map_err(|e| bad(&manifest_path, 1, e))?;
    let mut ev = glassbox_model::Evidence {
        manifest,
        ..Default::default()
    };
    read_lines(&dir.join("events.jsonl"), |e| ev.events.push(e))?;
    let t = dir.join("transcript.jsonl");
    if t.exists() {
        read_lines(&t, |e| ev.transcript.push(e))?;
    }
    let n = dir.join("network.jsonl");
    if n.exists() {
        read_lines(&n, |f| ev.flows.push(f))?;
    }
    Ok(ev)
}

/// What may be published of `report`: findings awaiting review are replaced by one line
/// saying so (nothing of them is shown), rejected ones are dropped, and each check's outcome
/// and the verdict follow from what is left. `status(check, summary)` says whether a finding
/// is `Some(true)` published, `Some(false)` rejected, or `None` withheld.
pub fn published(
    report: &AuditReport,
    session_completed: bool,
    failure: Option<&str>,
    status: &dyn Fn(&str, &str) -> Option<bool>,
) -> AuditReport {
    let mut out = report.clone();
    for c in &mut out.checks {
        let mut withheld = 0usize;
        c.findings.retain(|f| match status(&f.check, &f.summary) {
            Some(true) => true,
            Some(false) => false,
            None => {
                withheld += 1;
                false
            }
        });
        if withheld > 0 {
            c.findings.push(glassbox_model::Finding {
                check: c.id.clone(),
                version: c.version,
                summary: format!("{withheld} finding(s) withheld until a person has reviewed them"),
                evidence: Vec::new(),
                phase: None,
                accusation: true,
                flows: Vec::new(),
            });
        }
        if c.outcome == glassbox_model::Outcome::Flag && c.findings.is_empty() {
            // Every finding was rejected on review: the check's claim holds for this run.
            c.outcome = glassbox_model::Outcome::Pass;
            c.reason = Some("every finding was rejected on review".into());
        }
    }
    let (verdict, why) = glassbox_checks::verdict(&out.checks, session_completed, failure);
    out.verdict = verdict;
    out.inconclusive_reason = why;
    out
}
