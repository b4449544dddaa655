//! `glassbox recheck`: stored evidence re-evaluated with the current checks, nothing run.
//!
//! The event stream is read line by line and fed to every check as it is parsed
//! ([`glassbox_checks::Run`]): memory follows what the checks find, not the size of the trace.

use crate::Error;
use glassbox_checks::Proofs;
use glassbox_model::bundle::{self, EVENTS};
use glassbox_model::{AuditReport, Event, Flow, Manifest};
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

/// Evaluates the bundle in `dir` with the current checks under `proofs`: its report, and how
/// many events were read. The one route from evidence on disk to a report: `recheck`, and a
/// live audit once its bundle is written ([`glassbox_checks::evaluate_stream`]: a pre-pass
/// over the calls with a destination, then the checks over the whole stream).
pub fn evaluate_bundle(dir: &Path, proofs: &Proofs) -> Result<(AuditReport, Manifest), Error> {
    evaluate_bundle_counted(dir, proofs).map(|b| (b.report, b.manifest))
}

/// What [`evaluate_bundle_counted`] read and derived.
struct Evaluated {
    report: AuditReport,
    manifest: Manifest,
    /// The bundle's flows (paired with their calls).
    flows: Vec<Flow>,
    /// Events read.
    events: u64,
}

fn evaluate_bundle_counted(dir: &Path, proofs: &Proofs) -> Result<Evaluated, Error> {
    let manifest = bundle::manifest(dir)?;
    let transcript = bundle::transcript(dir, "")?;
    // The denied run's, when there was one (what `tool-definition-drift` compares across runs).
    let denied_transcript = bundle::transcript(dir, "-denied")?;
    // The trigger run's (what was said only with the world changed).
    let trigger_transcript = bundle::transcript(dir, "-trigger")?;
    let flows = bundle::flows(dir)?;
    let epath = dir.join(EVENTS);
    let mut pass = 0;
    let mut events = 0;
    let evaluated = glassbox_checks::evaluate_stream(
        glassbox_checks::Bundle {
            manifest: &manifest,
            transcript: &transcript,
            denied_transcript: &denied_transcript,
            trigger_transcript: &trigger_transcript,
        },
        flows,
        |f: &mut dyn FnMut(&Event)| {
            pass += 1;
            if pass == 1 {
                bundle::read_calls(&epath, f)
            } else {
                events = bundle::read_events(&epath, f)?;
                Ok(())
            }
        },
        proofs,
    )?;
    let report = crate::report(&manifest, evaluated.checks, dir);
    Ok(Evaluated {
        report,
        manifest,
        flows: evaluated.flows,
        events,
    })
}

/// Re-evaluates the bundle in `dir` with the current checks under `proofs`.
pub fn recheck(dir: &Path, proofs: &Proofs) -> Result<Recheck, Error> {
    let Evaluated {
        report,
        manifest,
        flows,
        events,
    } = evaluate_bundle_counted(dir, proofs)?;
    let (stored, withdrawn) = if let Some(mut r) = bundle::report(dir)? {
        let n = glassbox_checks::apply_retractions(&mut r.checks, &manifest, &flows);
        if n > 0 {
            let (v, why) = glassbox_checks::verdict(&manifest, &r.checks);
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

/// What may be published of `report`: findings awaiting review are replaced by one line
/// saying so (nothing of them is shown), rejected ones are dropped, and each check's outcome
/// and the verdict follow from what is left. `status(check, summary)` says whether a finding
/// is `Some(true)` published, `Some(false)` rejected, or `None` withheld.
pub fn published(
    report: &AuditReport,
    manifest: &glassbox_model::Manifest,
    status: &dyn Fn(&str, &str) -> Option<bool>,
) -> AuditReport {
    let mut out = report.clone();
    for c in &mut out.checks {
        let mut withheld = 0usize;
        c.findings
            .retain_mut(|f| match status(&f.check, &f.summary) {
                Some(true) => {
                    // Published: an accusation a person accepted is no longer awaiting review
                    // (the verdict then says flagged, and no renderer calls it withheld).
                    f.accusation = false;
                    true
                }
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
    let (verdict, why) = glassbox_checks::verdict(manifest, &out.checks);
    out.verdict = verdict;
    out.inconclusive_reason = why;
    out
}
