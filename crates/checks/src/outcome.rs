//! Where a check's evaluation becomes its outcome: `flag`, `not-observed`, `inconclusive`,
//! `unverified` or `pass` (the order is the crate doc's, "Outcomes"). Every check's lock
//! covers this file: a change here changes what every check claims.

use crate::{verdict, Channel, CheckInfo, Context, Evaluation, Proofs};
use glassbox_model::{CheckResult, Outcome};

/// Unread parts named in a reason, at most.
const UNREAD_SHOWN: usize = 5;

pub(crate) fn result(
    info: &CheckInfo,
    eval: Evaluation,
    unread: &[String],
    ctx: &Context<'_>,
    overflows: u64,
    proofs: &Proofs,
) -> CheckResult {
    let mut unread = unread.to_vec();
    unread.extend(lost(info, ctx, overflows));
    let (outcome, reason) = outcome(info, &eval, &unread, ctx, proofs);
    CheckResult {
        id: info.id.to_string(),
        version: info.version,
        claim: info.claim.to_string(),
        severity: info.severity,
        outcome,
        reason,
        findings: eval.findings,
        notes: eval.notes,
    }
}

/// What the run lost on the channels `info` needs, each said: calls the recorder could not
/// record (`manifest.recorder.lost`, less the overflows of the kernel's channel it counts too;
/// records of the open and stat families only for a check that reads them, `file_calls`),
/// and, for a check that reads the kernel's report of planted-secret accesses, that report's
/// overflows (`overflow` honeytoken events, `overflows` of them): accesses then went unseen.
fn lost(info: &CheckInfo, ctx: &Context<'_>, overflows: u64) -> Vec<String> {
    let mut out = Vec::new();
    let reads = |c: Channel| info.channels.contains(&c) || info.also_reads.contains(&c);
    let recorder = &ctx.manifest.recorder;
    let calls = recorder.lost.saturating_sub(overflows);
    let files = recorder.lost_file_calls.min(calls);
    let blinding = match info.file_calls {
        true => calls,
        false => calls - files,
    };
    if blinding > 0 && reads(Channel::Syscalls) {
        // By why, where the run says (the overflows are the next line's).
        let why: Vec<&str> = recorder
            .lost_why
            .iter()
            .map(String::as_str)
            .filter(|w| !w.starts_with("overflows of"))
            .collect();
        out.push(match (info.file_calls || files == 0, why.is_empty()) {
            (true, true) => format!("{calls} system call(s) the recorder lost"),
            (true, false) => format!(
                "{calls} system call(s) the recorder lost ({})",
                why.join("; ")
            ),
            // The open and stat records lost do not blind it: the others are said as such.
            (false, _) => format!(
                "{blinding} system call(s) the recorder lost besides the open and stat family's"
            ),
        });
    }
    if overflows > 0 && reads(Channel::HoneytokenGroundTruth) {
        out.push(format!(
            "the kernel's report of planted-secret accesses overflowed {overflows} time(s): accesses in between went unseen"
        ));
    }
    out
}

fn outcome(
    info: &CheckInfo,
    eval: &Evaluation,
    unread: &[String],
    ctx: &Context<'_>,
    proofs: &Proofs,
) -> (Outcome, Option<String>) {
    if !eval.findings.is_empty() {
        return (Outcome::Flag, None);
    }
    let missing: Vec<&str> = info
        .channels
        .iter()
        .filter(|c| !c.observed_in(ctx.manifest))
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
    if !unread.is_empty() {
        let mut shown: Vec<&str> = unread
            .iter()
            .take(UNREAD_SHOWN)
            .map(String::as_str)
            .collect();
        let more = unread.len().saturating_sub(UNREAD_SHOWN);
        let more = format!("and {more} more");
        if unread.len() > UNREAD_SHOWN {
            shown.push(&more);
        }
        return (
            Outcome::NotObserved,
            Some(format!("could not read: {}", shown.join("; "))),
        );
    }
    let session = &ctx.manifest.session;
    if !session.completed {
        return (
            Outcome::Inconclusive,
            Some(verdict::incomplete_reason(session.failure.as_deref())),
        );
    }
    if let Err(why) = proofs.of(info) {
        return (Outcome::Unverified, Some(why));
    }
    (Outcome::Pass, None)
}
