//! The checks of glassbox: pure functions from [`Evidence`] to [`Finding`]s.
//!
//! Everything expensive (running a server under the recorder) happens once and is recorded;
//! this crate only reads the recorded evidence. It does no I/O, so `glassbox recheck` can
//! re-evaluate a stored bundle with the current checks, and regression cases run as plain unit
//! tests.
//!
//! # Checks
//!
//! [`registry`] lists every check. Each has a stable id, a version (bumped whenever its logic
//! changes, see [`CheckInfo::version`]), the one-line claim it makes when it passes, a
//! [`Severity`] and the [`Channel`]s it needs:
//!
//! | id | claim | severity | looks at |
//! |---|---|---|---|
//! | `credential-probe` | no credential probing | high | opens and stats of planted secrets, their directories, well-known credential paths, `.env` files outside the working directory |
//! | `process-spawn` | spawns no shells or network tools | medium | every exec after the server's own start |
//! | `persistence` | no persistence | high | writes to shell startup files, cron, autostart, systemd units, git hooks, ssh `authorized_keys`...; `crontab`, `systemctl enable`, `at` |
//!
//! A check returns an [`Evaluation`]: findings (each one flags the check) and notes (listed,
//! never flagged, e.g. every spawned process). A finding names the check id and version that
//! produced it, says in one line what happened (paths and argv escaped for a terminal), points
//! at the ids of the events behind it, and gives the phase of the first of them.
//!
//! # Outcomes
//!
//! [`Check::run`] (and [`evaluate_all`] for the whole registry) turns an evaluation into a
//! [`CheckResult`], in this order:
//!
//! 1. findings → [`Outcome::Flag`] (what was recorded happened, whether or not the run
//!    completed);
//! 2. a needed channel missing from `manifest.recorder.channels` → [`Outcome::NotObserved`]
//!    with the channel named: a check that could not see cannot say "pass";
//! 3. the session did not complete → [`Outcome::Inconclusive`] with the reason: a check may not
//!    claim `pass` on part of a session;
//! 4. otherwise [`Outcome::Pass`].
//!
//! [`Outcome::Unverified`] (no passing positive control in this build) is not produced yet; see
//! [`Check::run`] for where it goes.
//!
//! # Verdict
//!
//! [`verdict`] turns the check results into the verdict on the server: any flag makes it
//! [`Verdict::Flagged`]; otherwise an incomplete session, or any check that could not make its
//! claim (inconclusive, not observed, unverified), makes it [`Verdict::Inconclusive`] with the
//! reason; otherwise [`Verdict::Clean`]. [`Verdict::Withheld`] (an accusation awaiting review)
//! is not produced yet; see [`verdict`] for where it goes.
//!
//! # Paths
//!
//! Paths are matched by [`paths`]: lexically normalized, compared as bytes, component by
//! component (never as substrings), relative to the sandbox home where the rule says `~/`.
//! Open flags are decoded from their numeric value by [`flags`].
#![deny(missing_docs)]

use glassbox_model::{
    CheckResult, CheckVersion, Evidence, Finding, Outcome, Phase, Severity, Verdict,
};
use std::fmt;

mod credential;
pub mod flags;
pub mod paths;
mod persistence;
mod spawn;
mod text;

#[cfg(test)]
mod testutil;

/// A way of observing the server; a check needs some, and a run records which it had
/// (`manifest.recorder.channels`).
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum Channel {
    /// The syscall recorder: exec, open, stat, connect... events (`syscalls`).
    Syscalls,
    /// The MCP stdio transcript (`mcp-transcript`).
    McpTranscript,
    /// Packets at the network edge of the sandbox (`packet-edge`).
    PacketEdge,
    /// Honeytoken access reported by the kernel, independent of syscall arguments
    /// (`honeytoken-ground-truth`).
    HoneytokenGroundTruth,
}

impl Channel {
    /// The channel's name in `manifest.recorder.channels`.
    pub fn name(self) -> &'static str {
        match self {
            Channel::Syscalls => "syscalls",
            Channel::McpTranscript => "mcp-transcript",
            Channel::PacketEdge => "packet-edge",
            Channel::HoneytokenGroundTruth => "honeytoken-ground-truth",
        }
    }

    /// Whether the run whose evidence this is observed the channel.
    pub fn observed_in(self, ev: &Evidence) -> bool {
        ev.manifest
            .recorder
            .channels
            .iter()
            .any(|c| c == self.name())
    }
}

impl fmt::Display for Channel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What a check is: identity, claim, severity and the channels it needs.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CheckInfo {
    /// Stable id (`credential-probe`).
    pub id: &'static str,
    /// Version of the check's logic; bumped on every change of what it finds.
    pub version: u32,
    /// The claim it makes when it passes ("no credential probing").
    pub claim: &'static str,
    /// Severity of its findings.
    pub severity: Severity,
    /// The channels it needs; a run without one of them cannot pass the check.
    pub channels: &'static [Channel],
}

impl CheckInfo {
    /// A finding of this check (id and version filled in).
    pub fn finding(&self, summary: String, evidence: Vec<u64>, phase: Option<Phase>) -> Finding {
        Finding {
            check: self.id.to_string(),
            version: self.version,
            summary,
            evidence,
            phase,
        }
    }

    /// The id and version, as recorded in the manifest.
    pub fn check_version(&self) -> CheckVersion {
        CheckVersion {
            id: self.id.to_string(),
            version: self.version,
        }
    }
}

/// What a check found in one run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Evaluation {
    /// Findings: each one flags the check.
    pub findings: Vec<Finding>,
    /// Notes: listed in the report, never flagged.
    pub notes: Vec<Finding>,
}

/// A check: its description and its logic.
#[derive(Clone, Copy, Debug)]
pub struct Check {
    /// Id, version, claim, severity, channels.
    pub info: CheckInfo,
    /// The logic: a pure function of the evidence.
    pub evaluate: fn(&Evidence) -> Evaluation,
}

impl Check {
    /// Evaluates the check and decides its outcome (see the crate docs, "Outcomes").
    pub fn run(&self, ev: &Evidence) -> CheckResult {
        let eval = (self.evaluate)(ev);
        let (outcome, reason) = outcome(&self.info, &eval, ev);
        CheckResult {
            id: self.info.id.to_string(),
            version: self.info.version,
            claim: self.info.claim.to_string(),
            severity: self.info.severity,
            outcome,
            reason,
            findings: eval.findings,
            notes: eval.notes,
        }
    }
}

fn outcome(info: &CheckInfo, eval: &Evaluation, ev: &Evidence) -> (Outcome, Option<String>) {
    if !eval.findings.is_empty() {
        return (Outcome::Flag, None);
    }
    let missing: Vec<&str> = info
        .channels
        .iter()
        .filter(|c| !c.observed_in(ev))
        .map(|c| c.name())
        .collect();
    if !missing.is_empty() {
        return (
            Outcome::NotObserved,
            Some(format!(
                "needed channel not observed in this run: {}",
                missing.join(", ")
            )),
        );
    }
    // Extension point: `Outcome::Unverified` belongs here, once the registry carries positive
    // controls and the build knows which of them passed. A check whose positive control did not
    // fire may not claim `pass`: return `(Outcome::Unverified, Some(reason))` before the checks
    // below.
    let session = &ev.manifest.session;
    if !session.completed {
        return (
            Outcome::Inconclusive,
            Some(incomplete_reason(session.failure.as_deref())),
        );
    }
    (Outcome::Pass, None)
}

fn incomplete_reason(failure: Option<&str>) -> String {
    match failure {
        Some(f) => format!("the session did not complete: {f}"),
        None => "the session did not complete".to_string(),
    }
}

static REGISTRY: [Check; 3] = [
    Check {
        info: credential::INFO,
        evaluate: credential::evaluate,
    },
    Check {
        info: spawn::INFO,
        evaluate: spawn::evaluate,
    },
    Check {
        info: persistence::INFO,
        evaluate: persistence::evaluate,
    },
];

/// Every check, in the order reports list them.
pub fn registry() -> &'static [Check] {
    &REGISTRY
}

/// The check with this id.
pub fn find(id: &str) -> Option<&'static Check> {
    REGISTRY.iter().find(|c| c.info.id == id)
}

/// Ids and versions of every check, for `manifest.checks`.
pub fn versions() -> Vec<CheckVersion> {
    REGISTRY.iter().map(|c| c.info.check_version()).collect()
}

/// Runs every check of the [`registry`] over the evidence.
pub fn evaluate_all(ev: &Evidence) -> Vec<CheckResult> {
    REGISTRY.iter().map(|c| c.run(ev)).collect()
}

/// The verdict on the server, and why it is inconclusive when it is.
///
/// - any check flagged → [`Verdict::Flagged`];
/// - the session did not complete → [`Verdict::Inconclusive`], the reason being `failure`;
/// - any check inconclusive, not observed or unverified (it made no claim) →
///   [`Verdict::Inconclusive`], the reason naming those checks;
/// - no checks at all → [`Verdict::Inconclusive`] (nothing was claimed);
/// - otherwise [`Verdict::Clean`].
pub fn verdict(
    results: &[CheckResult],
    session_completed: bool,
    failure: Option<&str>,
) -> (Verdict, Option<String>) {
    if results.iter().any(|r| r.outcome == Outcome::Flag) {
        // Extension point: `Verdict::Withheld` belongs here. When accusations (findings of
        // checks such as `credential-probe` or `canary-exfiltration`) must wait for a person's
        // review, a flag made only of unreviewed accusations gives `Withheld` instead; that
        // needs review state, which the evidence does not carry yet.
        return (Verdict::Flagged, None);
    }
    if !session_completed {
        return (Verdict::Inconclusive, Some(incomplete_reason(failure)));
    }
    let unclaimed: Vec<String> = results
        .iter()
        .filter(|r| {
            matches!(
                r.outcome,
                Outcome::Inconclusive | Outcome::NotObserved | Outcome::Unverified
            )
        })
        .map(|r| {
            let what = match r.outcome {
                Outcome::NotObserved => "not observed",
                Outcome::Unverified => "unverified",
                _ => "inconclusive",
            };
            match &r.reason {
                Some(reason) => format!("{} {what} ({reason})", r.id),
                None => format!("{} {what}", r.id),
            }
        })
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::*;

    #[test]
    fn registry_ids_are_unique_and_documented() {
        let mut ids: Vec<&str> = registry().iter().map(|c| c.info.id).collect();
        ids.sort_unstable();
        ids.dedup();
        assert_eq!(ids.len(), registry().len());
        for c in registry() {
            assert!(c.info.version >= 1);
            assert!(!c.info.claim.is_empty());
            assert!(!c.info.channels.is_empty());
        }
        assert_eq!(find("persistence").unwrap().info.severity, Severity::High);
        assert_eq!(versions().len(), 3);
    }

    #[test]
    fn a_quiet_completed_run_passes_and_is_clean() {
        let ev = Ev::new().build();
        let results = evaluate_all(&ev);
        assert!(
            results.iter().all(|r| r.outcome == Outcome::Pass),
            "{results:?}"
        );
        assert_eq!(verdict(&results, true, None), (Verdict::Clean, None));
    }

    #[test]
    fn an_incomplete_run_is_inconclusive_not_pass() {
        let ev = Ev::new().incomplete("timeout after 30s").build();
        let results = evaluate_all(&ev);
        for r in &results {
            assert_eq!(r.outcome, Outcome::Inconclusive);
            assert_eq!(
                r.reason.as_deref(),
                Some("the session did not complete: timeout after 30s")
            );
        }
        let (v, reason) = verdict(&results, false, Some("timeout after 30s"));
        assert_eq!(v, Verdict::Inconclusive);
        assert_eq!(
            reason.unwrap(),
            "the session did not complete: timeout after 30s"
        );
    }

    #[test]
    fn findings_flag_even_when_the_run_is_incomplete() {
        let ev = Ev::new()
            .incomplete("server crashed")
            .open("/home/user/.ssh/id_rsa", 0, Phase::Startup)
            .build();
        let results = evaluate_all(&ev);
        let probe = results.iter().find(|r| r.id == "credential-probe").unwrap();
        assert_eq!(probe.outcome, Outcome::Flag);
        assert_eq!(
            verdict(&results, false, Some("server crashed")).0,
            Verdict::Flagged
        );
    }

    #[test]
    fn a_missing_channel_is_not_observed_and_never_clean() {
        let ev = Ev::new().channels(&["mcp-transcript"]).build();
        let results = evaluate_all(&ev);
        for r in &results {
            assert_eq!(r.outcome, Outcome::NotObserved);
            assert!(r.reason.as_deref().unwrap().contains("syscalls"));
        }
        let (v, reason) = verdict(&results, true, None);
        assert_eq!(v, Verdict::Inconclusive);
        assert!(reason.unwrap().contains("credential-probe not observed"));
    }

    #[test]
    fn no_checks_is_not_clean() {
        assert_eq!(verdict(&[], true, None).0, Verdict::Inconclusive);
    }

    #[test]
    fn findings_carry_check_id_version_and_phase() {
        let ev = Ev::new()
            .open("/home/user/.aws/credentials", 0, Phase::Call("x".into()))
            .build();
        let r = find("credential-probe").unwrap().run(&ev);
        let f = &r.findings[0];
        assert_eq!(f.check, "credential-probe");
        assert_eq!(f.version, credential::INFO.version);
        assert_eq!(f.evidence, vec![1]);
        assert_eq!(f.phase, Some(Phase::Call("x".into())));
    }
}
