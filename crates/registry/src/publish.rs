//! What may be published of a stored audit, and its SARIF view.

use crate::Error;
use glassbox_model::{AuditReport, Evidence};
use glassbox_report::Publication;
use glassbox_store::{AuditRow, FindingStatus, Store};

/// A stored audit: its row, its stored report, its evidence.
#[derive(Debug)]
pub struct Stored {
    /// The store's row (its findings with their review status).
    pub row: AuditRow,
    /// The report as the audit made it.
    pub report: AuditReport,
    /// Its evidence bundle.
    pub evidence: Evidence,
}

/// Audit `id` of `store`, with its report and evidence.
pub fn load(store: &Store, id: i64) -> Result<Stored, Error> {
    let row = store.audit(id)?.ok_or_else(|| Error::NoAudit {
        id,
        store: store.location().display().to_string(),
    })?;
    with_report(store, row)
}

/// The audit of `row` (a row of `store`), with its report and evidence.
pub fn with_report(store: &Store, row: AuditRow) -> Result<Stored, Error> {
    let id = row.id;
    let report = store.report(id)?.ok_or(Error::NoReport(id))?;
    let evidence =
        glassbox_model::bundle::load(&row.evidence_dir).map_err(|source| Error::Evidence {
            id,
            dir: row.evidence_dir.clone(),
            source,
        })?;
    Ok(Stored {
        row,
        report,
        evidence,
    })
}

/// What may be published of a stored audit: the claims of retracted check versions withdrawn
/// (marked retracted), findings awaiting review withheld, rejected ones dropped.
pub fn published(row: &AuditRow, mut stored: AuditReport, ev: &Evidence) -> AuditReport {
    glassbox_checks::apply_retractions(&mut stored.checks, &ev.manifest, &ev.flows);
    let status = |check: &str, summary: &str| {
        // A finding the store does not know (the stored report and its rows disagree) is
        // withheld: nothing is published that no one could review.
        status(row, check, summary).and_then(|s| match s {
            FindingStatus::Published => Some(true),
            FindingStatus::Rejected => Some(false),
            FindingStatus::Withheld => None,
        })
    };
    glassbox_audit::recheck::published(&stored, &ev.manifest, &status)
}

/// The SARIF view of a stored audit: like [`published`], except that each finding awaiting
/// review stays a result of its own, which the renderer writes as withheld with nothing of it
/// (in full, marked withheld, with `include_withheld`); rejected findings are dropped. A
/// finding the store does not know is shown only if it is no accusation.
pub fn sarif(
    row: &AuditRow,
    mut stored: AuditReport,
    ev: &Evidence,
    include_withheld: bool,
) -> String {
    glassbox_checks::apply_retractions(&mut stored.checks, &ev.manifest, &ev.flows);
    let status = |check: &str, summary: &str| status(row, check, summary);
    let report = glassbox_audit::recheck::published(&stored, &ev.manifest, &|check, summary| {
        Some(status(check, summary) != Some(FindingStatus::Rejected))
    });
    let publication = |f: &glassbox_model::Finding| match status(&f.check, &f.summary) {
        Some(FindingStatus::Published) => Publication::Published,
        None if !f.accusation => Publication::Published,
        _ if include_withheld => Publication::WithheldShown,
        _ => Publication::Withheld,
    };
    glassbox_report::sarif(ev, &report, &publication)
}

/// The review status the store holds for the finding of `check` that says `summary`.
fn status(row: &AuditRow, check: &str, summary: &str) -> Option<FindingStatus> {
    row.findings
        .iter()
        .find(|f| f.check_id == check && f.summary == summary)
        .map(|f| f.status)
}
