//! A person's decision on a finding withheld for review: accepted, it is published; rejected,
//! the audit is published without it, and once every finding its check made in that run is
//! rejected the run becomes a regression case on which the check must pass
//! (`glassbox_audit::coverage::Expected`, replayed by `glassbox recheck` and the tests).

use crate::Error;
use glassbox_audit::coverage::Expected;
use glassbox_store::{Decision, FindingRow, FindingStatus, Store, StoreLocation};
use std::path::{Path, PathBuf};

/// Finding `id` of `store`.
pub fn finding(store: &Store, id: i64) -> Result<FindingRow, Error> {
    store.finding(id)?.ok_or(Error::NoFinding(id))
}

/// Accepts finding `id`: it is published.
pub fn accept(store: &mut Store, id: i64, reviewer: &str, note: &str) -> Result<(), Error> {
    store.review(id, Decision::Accept, reviewer, note)?;
    Ok(())
}

/// What rejecting a finding made of its run.
#[derive(Debug, PartialEq, Eq)]
pub enum Case {
    /// The run is a regression case in this folder.
    Made(PathBuf),
    /// None: the check has a published finding in this run (it rightly flagged there).
    CheckPublishedThere,
    /// Not yet: another finding of the check in this run awaits review (its id).
    Pending(i64),
}

/// Rejects finding `id` with `reason`: the audit is published without it. Its run may then
/// become a regression case ([`regression_case`]).
pub fn reject(store: &mut Store, id: i64, reviewer: &str, reason: &str) -> Result<(), Error> {
    finding(store, id)?;
    store.review(id, Decision::Reject, reviewer, reason)?;
    Ok(())
}

/// The regression case the rejection of finding `id` (for `reason`) makes of its run, once
/// every finding its check made in that run is rejected: the run's bundle copied into
/// `regressions` (default: the store's own regressions folder, never the build's source tree)
/// as `rejected-CHECK-RUN`, with an `expected.json` saying the check must pass there.
pub fn regression_case(
    store: &Store,
    location: &StoreLocation,
    id: i64,
    reason: &str,
    regressions: Option<PathBuf>,
) -> Result<Case, Error> {
    let f = finding(store, id)?;
    let a = store
        .audit(f.audit_id)?
        .ok_or(Error::FindingWithoutAudit(id))?;
    let same: Vec<_> = a
        .findings
        .iter()
        .filter(|g| g.check_id == f.check_id)
        .collect();
    if same.iter().any(|g| g.status == FindingStatus::Published) {
        return Ok(Case::CheckPublishedThere);
    }
    if let Some(w) = same.iter().find(|g| g.status == FindingStatus::Withheld) {
        return Ok(Case::Pending(w.id));
    }
    let dir = match regressions {
        Some(d) => d,
        None => location.regressions_dir()?,
    };
    let case = dir.join(format!("rejected-{}-{}", f.check_id, a.run_id));
    copy_bundle(&a.evidence_dir, &case)?;
    let expected = Expected {
        why: format!(
            "Rejected on review: {reason} ({} v{} had said: {})",
            f.check_id, f.check_version, f.summary
        ),
        checks: [(f.check_id.clone(), "pass".to_string())].into(),
    };
    let file = case.join("expected.json");
    let text = serde_json::to_string_pretty(&expected).expect("an Expected always serializes");
    std::fs::write(&file, text + "\n").map_err(Error::io("write", &file))?;
    Ok(Case::Made(case))
}

/// Copies an evidence bundle (a flat folder of files) to `to`, which must not exist.
fn copy_bundle(from: &Path, to: &Path) -> Result<(), Error> {
    if to.exists() {
        return Err(Error::Exists(to.to_path_buf()));
    }
    std::fs::create_dir_all(to).map_err(Error::io("create", to))?;
    for entry in std::fs::read_dir(from).map_err(Error::io("read", from))? {
        let entry = entry.map_err(Error::io("read", from))?;
        let is_file = entry
            .file_type()
            .map_err(Error::io("read", &entry.path()))?
            .is_file();
        if is_file {
            std::fs::copy(entry.path(), to.join(entry.file_name()))
                .map_err(Error::io("copy", &entry.path()))?;
        }
    }
    Ok(())
}
