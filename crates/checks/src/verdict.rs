//! The verdict on a server: from its check results, and from what the manifest says of its
//! runs (a recorder that stopped, a server that never ran). Decided here, every time checks
//! run: a live audit, `recheck` and what the store publishes take the same rule, and
//! `checks.lock` versions it as `verdict` ([`VERSION`]).

use glassbox_model::{CheckResult, Manifest, Outcome, Verdict};

/// The version of the rule: bumped whenever what [`verdict`] decides changes (`checks.lock`
/// makes the tests fail otherwise).
pub const VERSION: u32 = 2;

/// The verdict on the server from its check results and what the manifest says of the runs:
/// inconclusive when the recorder stopped (fail closed: what was recorded is not the whole
/// run) or when a package's server never ran (its install failed, its program was not there:
/// the findings of the install stand, nothing is known of the server); else as the results
/// decide ([`from_results`]), less those of a run the audit was not asked to make (version 2:
/// the trigger run, `--triggers none`, whose check says `not-observed` and why).
pub fn verdict(manifest: &Manifest, results: &[CheckResult]) -> (Verdict, Option<String>) {
    let session = &manifest.session;
    match &manifest.recorder.failure {
        Some(f) => (
            Verdict::Inconclusive,
            Some(format!(
                "the recorder stopped while the server ran ({f}); the sandbox was killed and \
                 nothing is claimed"
            )),
        ),
        None if manifest.server_never_ran() => (
            Verdict::Inconclusive,
            Some(
                session
                    .failure
                    .clone()
                    .unwrap_or_else(|| "the server never ran".into()),
            ),
        ),
        None => {
            // A check of a run the audit was not asked to make (the trigger run) says so in
            // the report, and weighs on nothing here.
            let weighed: Vec<CheckResult> = results
                .iter()
                .filter(|r| {
                    r.id != crate::trigger_only::INFO.id
                        || !crate::trigger_only::not_asked(manifest)
                })
                .cloned()
                .collect();
            from_results(&weighed, session.completed, session.failure.as_deref())
        }
    }
}

/// The verdict on a server from its check results: an accusation → withheld; any other
/// finding → flagged; a run that did not complete, or a check that could not claim its
/// result (not observed, unverified, inconclusive) → inconclusive, with the reasons; else
/// clean.
pub(crate) fn from_results(
    results: &[CheckResult],
    session_completed: bool,
    failure: Option<&str>,
) -> (Verdict, Option<String>) {
    if results
        .iter()
        .any(|r| r.outcome == Outcome::Flag && r.findings.iter().any(|f| f.accusation))
    {
        return (Verdict::Withheld, None);
    }
    if results.iter().any(|r| r.outcome == Outcome::Flag) {
        return (Verdict::Flagged, None);
    }
    if !session_completed {
        return (Verdict::Inconclusive, Some(incomplete_reason(failure)));
    }
    // Checks that could not claim their result, grouped by why (one line per distinct reason).
    let mut unclaimed: Vec<(String, Vec<&str>)> = Vec::new();
    for r in results {
        let what = match r.outcome {
            Outcome::NotObserved => "not observed",
            Outcome::Unverified => "unverified",
            Outcome::Retracted => "retracted",
            Outcome::Inconclusive => "inconclusive",
            Outcome::Pass | Outcome::Flag => continue,
        };
        let why = match &r.reason {
            Some(reason) => format!("{what} ({reason})"),
            None => what.to_string(),
        };
        match unclaimed.iter_mut().find(|(w, _)| *w == why) {
            Some((_, ids)) => ids.push(&r.id),
            None => unclaimed.push((why, vec![&r.id])),
        }
    }
    let unclaimed: Vec<String> = unclaimed
        .into_iter()
        .map(|(why, ids)| format!("{} {why}", ids.join(", ")))
        .collect();
    if !unclaimed.is_empty() {
        return (Verdict::Inconclusive, Some(unclaimed.join("; ")));
    }
    if results.is_empty() {
        return (
            Verdict::Inconclusive,
            Some("no check was evaluated".to_string()),
        );
    }
    (Verdict::Clean, None)
}

/// Why a session that did not complete is inconclusive.
pub(crate) fn incomplete_reason(failure: Option<&str>) -> String {
    match failure {
        Some(f) => format!("the session did not complete: {f}"),
        None => "the session did not complete".to_string(),
    }
}
