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
//! | `description-exfil-pattern` | no exfiltration, override or tool-steering instructions in the server's descriptions and instructions | high | tool, resource and prompt descriptions and the server's instructions (MCP transcript) |
//! | `unexplained-egress` | no unexplained network egress | high | flows of both runs (DNS questions, TCP, UDP, ICMP) and connect/send events with no flow, against `--allow-host` |
//! | `denied-network-attempts` | tries nothing when the network is denied | medium | connect/send events and flows of the denied run |
//! | `doh` | no hidden DNS (DNS over HTTPS or TLS) | medium | flows named for, or sent to the address of, a public DoH/DoT resolver; DoH requests the edge read (to any host), named with what they asked; unread flows make it not observed |
//! | `unix-socket` | connects to no Unix socket it does not own | high | connects to Unix sockets not bound in the sandbox (canary sockets always), what was sent to canaries |
//! | `canary-exfiltration` | no planted secret leaves the sandbox | high | planted secrets (raw, hex, base64, URL-encoded, any 12-byte piece of their random part, pieces across flows together; inside zlib, gzip and deflate streams and text encoded twice, unwrapped) in every flow's payload, decrypted payload, HTTP exchanges (targets, headers, bodies), DNS names, SNI, sent anywhere but their own service; unread flows make it not observed |
//! | `sandbox-evasion` | nothing escaped the recorder | high | calls the static filter refused (`refused` events; `clone3`, a routine fallback, noted), execs of a memfd or a deleted file, flows at the edge that no recorded connect or send caused |
//! | `input-exposure` | keeps tool input inside the sandbox and its workspace | medium | the audit's marker (in every generated probe string) in any flow of a server run (inside TLS too), or in the name of a file written outside the working directory and scratch folders; what the input made a tool do (a file, program, internal address or socket it named; an execution canary's path opened, naming the interpreter it reached); unread flows make it not observed |
//! | `tool-definition-drift` | tool definitions and server instructions stay the same throughout the audit | high | each tool's description, inputSchema and annotations (canonical JSON) and the server's instructions: first vs last `tools/list` of each run, capture run vs denied run (MCP transcripts of both runs) |
//! | `runtime-instructions` | no instructions aimed at the model in what the server answers at run time (tool results, resource contents, prompt messages, sampling requests) | high | tool results (text, embedded resources, structured content), resources read (text, textual blobs), prompts got, the server's sampling and elicitation requests and a result's input requests (MCP transcript), with `description-exfil-pattern`'s matcher; text the server carries (results, contents) by windows that must address the model |
//! | `credential-phishing` | asks the user for no secret (no elicitation of a password, token or key; no elicitation that sends the user to a page nothing explains) | high | elicitation requests and a result's input requests (MCP transcript): fields, messages, URL-mode hosts against what explains egress |
//! | `resource-abuse` | stays within the sandbox's bounds and leaves nothing running | medium | the sandbox's cgroup read as each phase starts (forks refused, the process limit, processes killed out of memory, a writable mount full; the run's end-of-run reading where phases were not read) and processes still running once the server exited (manifest) |
//! | `left-behind` | writes only in its own places and leaves no stash of secrets or input | medium | opens with write intent outside home, scratch folders, the working directory and given folders (or inside another project's folder), but `persistence`'s; and the files each run left in the sandbox's writable places (manifest: a planted secret copied, a call's input in a hidden file in the scratch places, more entries than the walk visits) |
//!
//! Each check's module is named after its id (`credential_probe` for `credential-probe`); its
//! doc ends with its controls, `fixtures/controls/<id>.md`, generated from the headers of the
//! fixtures that pin it, which are the only place a control's expectations are written.
//!
//! A check returns an [`Evaluation`]: findings (each one flags the check) and notes (listed,
//! never flagged, e.g. every spawned process). A finding names the check id and version that
//! produced it, says in one line what happened (paths and argv escaped for a terminal), points
//! at the ids of the events behind it (and, for network findings, of the flows), and gives the
//! phase of the first of them.
//!
//! # Outcomes
//!
//! [`Run::finish`] (and [`evaluate_stream`] for a whole bundle) turns an evaluation into a
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
//! (`outcome.rs`, which every check's lock covers.)
//!
//! 5. but a `pass` becomes [`Outcome::Unverified`] when the check is not proven in this build
//!    ([`Proofs`]: every positive control of the check fired in `glassbox selftest` for this
//!    build); a check whose controls did not fire makes no claim.
//!
//! # Streaming
//!
//! Checks see the events one at a time ([`Evaluator`]), with everything else of the bundle at
//! hand ([`Context`]); memory grows with what they find, not with the trace. [`Run`] drives
//! every check over a stream; [`evaluate_all`] over an [`Evidence`] in memory.
//!
//! # Accusations
//!
//! A finding that accuses the server of something (reading a planted secret, instructions aimed
//! at the model in its descriptions or in its answers at run time) has `accusation` set; such a
//! server is
//! [`Verdict::Withheld`] until a person has reviewed the finding.
//!
//! # Verdict
//!
//! [`verdict`] (`verdict.rs`, locked in `checks.lock` as `verdict`) turns the manifest and the
//! check results into the verdict on the server: a recorder that stopped, or a package's
//! server that never ran, makes it [`Verdict::Inconclusive`]; else an accusation makes it
//! [`Verdict::Withheld`], any other flag [`Verdict::Flagged`]; otherwise an incomplete
//! session, or any check that could not make its claim (inconclusive, not observed,
//! unverified), makes it [`Verdict::Inconclusive`] with the reason; otherwise
//! [`Verdict::Clean`].
//!
//! # Links
//!
//! Which system calls made which flows is derived here ([`links`]), every time checks run:
//! [`evaluate_stream`] makes a pre-pass over the calls with a destination, then runs every
//! check over the stream. The bundle stores calls and flows raw.
//!
//! # Paths
//!
//! Paths are matched by [`paths`]: lexically normalized, compared as bytes, component by
//! component (never as substrings), relative to the sandbox home where the rule says `~/`.
//! Open flags are decoded from their numeric value by [`flags`].
#![deny(missing_docs)]
#![forbid(unsafe_code)]

#[cfg(doc)]
use glassbox_model::Verdict;
use glassbox_model::{
    CheckResult, CheckVersion, Event, EventKind, Evidence, Finding, Flow, Manifest, Outcome, Phase,
    Severity, TranscriptEntry,
};
use std::fmt;

#[doc = include_str!("../../../fixtures/controls/canary-exfiltration.md")]
mod canary_exfiltration;
#[doc = include_str!("../../../fixtures/controls/credential-phishing.md")]
mod credential_phishing;
#[doc = include_str!("../../../fixtures/controls/credential-probe.md")]
mod credential_probe;
#[doc = include_str!("../../../fixtures/controls/denied-network-attempts.md")]
mod denied_network_attempts;
#[doc = include_str!("../../../fixtures/controls/description-exfil-pattern.md")]
mod description_exfil_pattern;
#[doc = include_str!("../../../fixtures/controls/doh.md")]
mod doh;
mod dual;
mod exfil;
pub mod explain;
pub mod flags;
#[doc = include_str!("../../../fixtures/controls/input-exposure.md")]
mod input_exposure;
mod json;
mod layers;
#[doc = include_str!("../../../fixtures/controls/left-behind.md")]
mod left_behind;
pub mod links;
mod lock;
mod named;
mod net;
mod outcome;
pub mod paths;
#[doc = include_str!("../../../fixtures/controls/persistence.md")]
mod persistence;
#[doc = include_str!("../../../fixtures/controls/process-spawn.md")]
mod process_spawn;
#[doc = include_str!("../../../fixtures/controls/resource-abuse.md")]
mod resource_abuse;
#[doc = include_str!("../../../fixtures/controls/runtime-instructions.md")]
mod runtime_instructions;
#[doc = include_str!("../../../fixtures/controls/sandbox-evasion.md")]
mod sandbox_evasion;
mod text;
#[doc = include_str!("../../../fixtures/controls/tool-definition-drift.md")]
pub mod tool_definition_drift;
#[doc = include_str!("../../../fixtures/controls/trigger-only.md")]
pub mod trigger_only;
#[doc = include_str!("../../../fixtures/controls/unexplained-egress.md")]
mod unexplained_egress;
#[doc = include_str!("../../../fixtures/controls/unix-socket.md")]
mod unix_socket;
mod verdict;

pub use canary_exfiltration::{carries_planted_secret, hello_only};
pub use lock::{retraction, retractions, Condition, Retraction, LOCK};
pub use verdict::{verdict, VERSION as VERDICT_VERSION};

#[cfg(test)]
mod testutil;

/// For benchmarks only (`examples/canary_speed.rs`): not part of the crate's interface.
#[doc(hidden)]
pub mod bench {
    use glassbox_model::Honeytoken;

    /// How many needles of `tokens` the secret search finds in `fields`, reading each in every
    /// form it unwraps (`unwrap`: compressed streams, text encoded twice) or only as is and
    /// percent-decoded; `None` when `tokens` give no needle.
    pub fn secret_search(tokens: &[Honeytoken], fields: &[&[u8]], unwrap: bool) -> Option<usize> {
        crate::canary_exfiltration::needles_found(tokens, fields, unwrap)
    }
}

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
    /// A second run of the server with every packet dropped (`network-denied-run`).
    DeniedRun,
    /// A run of the server with its world changed: clock moved, a CI runner's environment
    /// (`trigger-run`).
    TriggerRun,
}

impl Channel {
    /// The channel's name in `manifest.recorder.channels`.
    pub fn name(self) -> &'static str {
        match self {
            Channel::Syscalls => "syscalls",
            Channel::McpTranscript => "mcp-transcript",
            Channel::PacketEdge => "packet-edge",
            Channel::HoneytokenGroundTruth => "honeytoken-ground-truth",
            Channel::DeniedRun => "network-denied-run",
            Channel::TriggerRun => "trigger-run",
        }
    }

    /// Whether the run whose evidence this is observed the channel.
    pub fn observed_in(self, manifest: &Manifest) -> bool {
        manifest.recorder.channels.iter().any(|c| c == self.name())
    }
}

impl fmt::Display for Channel {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.name())
    }
}

/// What a check is: identity, claim, severity and the channels it needs.
/// Everything a check needs to know about one check: its identity and promise.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct CheckInfo {
    /// Stable id (`credential-probe`).
    pub id: &'static str,
    /// Version of the logic: bumped whenever what the check decides changes (`checks.lock`
    /// makes the tests fail otherwise).
    pub version: u32,
    /// The claim it makes when it passes.
    pub claim: &'static str,
    /// Severity of its findings.
    pub severity: Severity,
    /// The channels it needs.
    pub channels: &'static [Channel],
    /// Channels it reads when the run has them, without needing them (it claims what the
    /// others show where one is missing), whose losses it must still say: what a channel
    /// it reads lost makes it `not-observed`, never `pass`.
    pub also_reads: &'static [Channel],
    /// Whether it reads the open and stat families (`open` and `stat` events: what the eBPF
    /// channel records, asynchronously, and can lose). Records of those lost blind it; a check
    /// that reads other calls only (execs, connects) is blinded by other losses alone.
    pub file_calls: bool,
    /// Which of its findings accuse the server (empty: none); such findings are withheld
    /// until reviewed.
    pub accuses: &'static str,
    /// The source files its logic lives in (hashed into `checks.lock`).
    pub sources: &'static [&'static str],
}

impl CheckInfo {
    /// A finding of this check.
    pub fn finding(&self, summary: String, evidence: Vec<u64>, phase: Option<Phase>) -> Finding {
        Finding {
            check: self.id.to_string(),
            version: self.version,
            summary,
            evidence,
            phase,
            accusation: false,
            flows: Vec::new(),
        }
    }

    /// The check's id and version.
    pub fn check_version(&self) -> CheckVersion {
        CheckVersion {
            id: self.id.to_string(),
            version: self.version,
        }
    }
}

/// What a check produced over one run.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Evaluation {
    /// Findings: each one flags the check.
    pub findings: Vec<Finding>,
    /// Listed, never flagged.
    pub notes: Vec<Finding>,
}

/// The bundle except its event stream: what a check may consult at any time.
#[derive(Clone, Copy, Debug)]
pub struct Context<'a> {
    /// The manifest.
    pub manifest: &'a Manifest,
    /// The MCP transcript.
    pub transcript: &'a [TranscriptEntry],
    /// The MCP transcript of the denied run (`transcript-denied.jsonl`), when it followed the
    /// capture run; empty otherwise.
    pub denied_transcript: &'a [TranscriptEntry],
    /// The MCP transcript of the trigger run (`transcript-trigger.jsonl`), when one was made;
    /// empty otherwise.
    pub trigger_transcript: &'a [TranscriptEntry],
    /// The flows at the network edge and the canary sockets (`network.jsonl`).
    pub flows: &'a [Flow],
}

/// One check over one run: events in, an evaluation out.
pub trait Evaluator {
    /// The next event, in order.
    fn event(&mut self, e: &Event);
    /// No more events.
    fn finish(self: Box<Self>) -> Evaluation {
        Evaluation::default()
    }
    /// No more events; the rest of the bundle at hand (checks that weigh events against
    /// flows, or the manifest, at the end). Calls [`Evaluator::finish`] unless overridden.
    fn finish_with(self: Box<Self>, ctx: &Context<'_>) -> Evaluation {
        let _ = ctx;
        self.finish()
    }
    /// What the check needed to read on a channel it has but could not read (a TLS flow whose
    /// client refused glassbox's certificate, QUIC), each named: without a finding, the check
    /// then says `not-observed` with these, never `pass`. Asked before [`Evaluator::finish`].
    fn unread(&self) -> Vec<String> {
        Vec::new()
    }
}

/// A check: its identity and how to start evaluating a run.
#[derive(Clone, Copy, Debug)]
pub struct Check {
    /// Identity and promise.
    pub info: CheckInfo,
    /// Starts an evaluation.
    pub start: fn(&Context<'_>) -> Box<dyn Evaluator>,
}

/// Whether each check is proven in this build: its positive controls all fired in
/// `glassbox selftest`.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Proofs {
    /// Per check id and version: `Ok` when proven, else why not.
    pub by_check: Vec<(CheckVersion, Result<(), String>)>,
    /// Why there is no proof at all (no selftest recorded for this build).
    pub missing: Option<String>,
}

impl Proofs {
    /// Every check proven (for tests and for evidence evaluated outside any build record).
    pub fn all_proven() -> Proofs {
        Proofs {
            by_check: REGISTRY
                .iter()
                .map(|c| (c.info.check_version(), Ok(())))
                .collect(),
            missing: None,
        }
    }

    /// Nothing proven, with the reason.
    pub fn none(reason: impl Into<String>) -> Proofs {
        Proofs {
            by_check: Vec::new(),
            missing: Some(reason.into()),
        }
    }

    fn of(&self, info: &CheckInfo) -> Result<(), String> {
        let found = self
            .by_check
            .iter()
            .find(|(cv, _)| cv.id == info.id && cv.version == info.version);
        match found {
            Some((_, r)) => r.clone(),
            None => Err(self.missing.clone().unwrap_or_else(|| {
                format!(
                    "{} v{} was not in this build's selftest",
                    info.id, info.version
                )
            })),
        }
    }
}

/// Every check of the registry over one run's event stream.
pub struct Run<'a> {
    ctx: Context<'a>,
    evaluators: Vec<(&'static Check, Box<dyn Evaluator>)>,
    /// Overflows of the kernel's report of planted-secret accesses seen in the stream.
    overflows: u64,
}

impl std::fmt::Debug for Run<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "Run({} checks)", self.evaluators.len())
    }
}

impl<'a> Run<'a> {
    /// Starts every check of the registry.
    pub fn new(ctx: Context<'a>) -> Run<'a> {
        Run {
            evaluators: REGISTRY.iter().map(|c| (c, (c.start)(&ctx))).collect(),
            ctx,
            overflows: 0,
        }
    }

    /// The next event.
    pub fn event(&mut self, e: &Event) {
        if matches!(&e.kind, EventKind::Honeytoken { access, .. } if access == "overflow") {
            self.overflows += 1;
        }
        for (_, ev) in &mut self.evaluators {
            ev.event(e);
        }
    }

    /// The results, with outcomes decided under `proofs`.
    pub fn finish(self, proofs: &Proofs) -> Vec<CheckResult> {
        let (ctx, overflows) = (self.ctx, self.overflows);
        self.evaluators
            .into_iter()
            .map(|(check, ev)| {
                let unread = ev.unread();
                outcome::result(
                    &check.info,
                    ev.finish_with(&ctx),
                    &unread,
                    &ctx,
                    overflows,
                    proofs,
                )
            })
            .collect()
    }
}

static REGISTRY: [Check; 17] = [
    Check {
        info: credential_probe::INFO,
        start: credential_probe::start,
    },
    Check {
        info: process_spawn::INFO,
        start: process_spawn::start,
    },
    Check {
        info: persistence::INFO,
        start: persistence::start,
    },
    Check {
        info: description_exfil_pattern::INFO,
        start: description_exfil_pattern::start,
    },
    Check {
        info: unexplained_egress::INFO,
        start: unexplained_egress::start,
    },
    Check {
        info: denied_network_attempts::INFO,
        start: denied_network_attempts::start,
    },
    Check {
        info: doh::INFO,
        start: doh::start,
    },
    Check {
        info: unix_socket::INFO,
        start: unix_socket::start,
    },
    Check {
        info: canary_exfiltration::INFO,
        start: canary_exfiltration::start,
    },
    Check {
        info: sandbox_evasion::INFO,
        start: sandbox_evasion::start,
    },
    Check {
        info: input_exposure::INFO,
        start: input_exposure::start,
    },
    Check {
        info: tool_definition_drift::INFO,
        start: tool_definition_drift::start,
    },
    Check {
        info: runtime_instructions::INFO,
        start: runtime_instructions::start,
    },
    Check {
        info: credential_phishing::INFO,
        start: credential_phishing::start,
    },
    Check {
        info: resource_abuse::INFO,
        start: resource_abuse::start,
    },
    Check {
        info: left_behind::INFO,
        start: left_behind::start,
    },
    Check {
        info: trigger_only::INFO,
        start: trigger_only::start,
    },
];

/// Every check, in a stable order.
pub fn registry() -> &'static [Check] {
    &REGISTRY
}

/// The check with id `id`.
pub fn find(id: &str) -> Option<&'static Check> {
    REGISTRY.iter().find(|c| c.info.id == id)
}

/// Ids and versions of every check (for `manifest.checks`).
pub fn versions() -> Vec<CheckVersion> {
    REGISTRY.iter().map(|c| c.info.check_version()).collect()
}

/// Every check over evidence in memory (without the denied run's transcript: see
/// [`evaluate_all_runs`]).
pub fn evaluate_all(ev: &Evidence, proofs: &Proofs) -> Vec<CheckResult> {
    evaluate_all_runs(ev, &[], proofs)
}

/// Every check over evidence in memory, with the MCP transcript of the denied run
/// (`denied_transcript`, see [`Context::denied_transcript`]).
pub fn evaluate_all_runs(
    ev: &Evidence,
    denied_transcript: &[TranscriptEntry],
    proofs: &Proofs,
) -> Vec<CheckResult> {
    let bundle = Bundle {
        manifest: &ev.manifest,
        transcript: &ev.transcript,
        denied_transcript,
        trigger_transcript: &[],
    };
    let each = |f: &mut dyn FnMut(&Event)| {
        ev.events.iter().for_each(&mut *f);
        Ok::<(), std::convert::Infallible>(())
    };
    match evaluate_stream(bundle, ev.flows.clone(), each, proofs) {
        Ok(e) => e.checks,
        Err(never) => match never {},
    }
}

/// A bundle except its events and flows: what [`evaluate_stream`] is given beside them.
#[derive(Clone, Copy, Debug)]
pub struct Bundle<'a> {
    /// The manifest.
    pub manifest: &'a Manifest,
    /// The MCP transcript.
    pub transcript: &'a [TranscriptEntry],
    /// The denied run's transcript (see [`Context::denied_transcript`]).
    pub denied_transcript: &'a [TranscriptEntry],
    /// The trigger run's transcript (see [`Context::trigger_transcript`]).
    pub trigger_transcript: &'a [TranscriptEntry],
}

/// What [`evaluate_stream`] derived from a bundle.
#[derive(Clone, Debug)]
pub struct Evaluated {
    /// Every check's result.
    pub checks: Vec<CheckResult>,
    /// The calls no flow took, per run ([`links`]).
    pub links: links::Links,
    /// The flows, each with the calls that made it ([`glassbox_model::Flow::events`]).
    pub flows: Vec<Flow>,
}

/// Every check of the registry over one bundle whose events are a stream: `events` hands each
/// event, in order, to the function it is given, and is called twice: once for the pre-pass
/// that pairs the flows with the calls that made them ([`links::Calls`], what the network
/// checks read as [`Flow::events`]), then for the checks. The one route from evidence to
/// check results: a live audit and `recheck` both take it (an error of `events` ends it).
pub fn evaluate_stream<E>(
    bundle: Bundle<'_>,
    mut flows: Vec<Flow>,
    mut events: impl FnMut(&mut dyn FnMut(&Event)) -> Result<(), E>,
    proofs: &Proofs,
) -> Result<Evaluated, E> {
    let mut calls = links::Calls::default();
    events(&mut |e| calls.event(e))?;
    let links = calls.link(&mut flows, &bundle.manifest.network.runs);
    let checks = {
        let mut run = Run::new(Context {
            manifest: bundle.manifest,
            transcript: bundle.transcript,
            denied_transcript: bundle.denied_transcript,
            trigger_transcript: bundle.trigger_transcript,
            flows: &flows,
        });
        events(&mut |e| run.event(e))?;
        run.finish(proofs)
    };
    Ok(Evaluated {
        checks,
        links,
        flows,
    })
}

/// One check's evaluation over evidence in memory (for its unit tests).
#[cfg(test)]
pub(crate) fn evaluate_one(
    start: fn(&Context<'_>) -> Box<dyn Evaluator>,
    ev: &Evidence,
) -> Evaluation {
    let ctx = Context {
        manifest: &ev.manifest,
        transcript: &ev.transcript,
        denied_transcript: &[],
        trigger_transcript: &[],
        flows: &ev.flows,
    };
    let mut e = start(&ctx);
    for event in &ev.events {
        e.event(event);
    }
    e.finish_with(&ctx)
}

/// Withdraws every result made by a retracted check version (of the outcome it names, in a
/// run of the kind it names: see [`Retraction`]): outcome `retracted`, findings and notes
/// dropped, the retraction's reason and date given. `manifest` and `flows` are the run's
/// (what a retraction's condition looks at). Returns how many were withdrawn.
pub fn apply_retractions(
    results: &mut [CheckResult],
    manifest: &Manifest,
    flows: &[Flow],
) -> usize {
    apply_retractions_from(results, manifest, flows, &retractions())
}

/// [`apply_retractions`] with a given list of retractions.
pub fn apply_retractions_from(
    results: &mut [CheckResult],
    manifest: &Manifest,
    flows: &[Flow],
    list: &[Retraction],
) -> usize {
    let mut n = 0;
    for r in results.iter_mut() {
        let applies = |x: &&Retraction| {
            x.id == r.id
                && x.version == r.version
                && x.outcome.is_none_or(|o| o == r.outcome)
                && x.only_with.is_none_or(|c| c.holds(manifest, flows))
        };
        if let Some(x) = list.iter().find(applies) {
            r.outcome = Outcome::Retracted;
            r.reason = Some(format!(
                "{} v{} retracted on {}: {}",
                r.id, r.version, x.date, x.reason
            ));
            r.findings.clear();
            r.notes.clear();
            n += 1;
        }
    }
    n
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::*;
    use glassbox_model::Verdict;

    /// The results less `trigger-only`'s, which (the evidence having no trigger run) says it
    /// was not asked for and weighs on nothing ([`outcome::not_asked`]).
    fn asked(results: Vec<CheckResult>) -> Vec<CheckResult> {
        let (trigger, rest): (Vec<_>, Vec<_>) =
            results.into_iter().partition(|r| r.id == "trigger-only");
        assert_eq!(trigger[0].outcome, Outcome::NotObserved);
        assert!(trigger[0]
            .reason
            .as_deref()
            .is_some_and(|r| r.contains(trigger_only::NOT_ASKED)));
        rest
    }

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
        assert_eq!(versions().len(), registry().len());
    }

    #[test]
    fn a_quiet_completed_run_passes_and_is_clean() {
        let ev = Ev::new().build();
        let all = evaluate_all(&ev, &Proofs::all_proven());
        assert_eq!(verdict(&ev.manifest, &all), (Verdict::Clean, None));
        let results = asked(all);
        assert!(
            results.iter().all(|r| r.outcome == Outcome::Pass),
            "{results:?}"
        );
        assert_eq!(
            verdict::from_results(&results, true, None),
            (Verdict::Clean, None)
        );
    }

    #[test]
    fn an_incomplete_run_is_inconclusive_not_pass() {
        let ev = Ev::new().incomplete("timeout after 30s").build();
        let results = asked(evaluate_all(&ev, &Proofs::all_proven()));
        for r in &results {
            assert_eq!(r.outcome, Outcome::Inconclusive);
            assert_eq!(
                r.reason.as_deref(),
                Some("the session did not complete: timeout after 30s")
            );
        }
        let (v, reason) = verdict::from_results(&results, false, Some("timeout after 30s"));
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
        let results = evaluate_all(&ev, &Proofs::all_proven());
        let probe = results.iter().find(|r| r.id == "credential-probe").unwrap();
        assert_eq!(probe.outcome, Outcome::Flag);
        assert_eq!(
            verdict::from_results(&results, false, Some("server crashed")).0,
            Verdict::Flagged
        );
    }

    #[test]
    fn a_missing_channel_is_not_observed_and_never_clean() {
        let ev = Ev::new().channels(&["mcp-transcript"]).build();
        let results = evaluate_all(&ev, &Proofs::all_proven());
        for r in &results {
            // Every check that needs another channel; those of the transcript alone were
            // observed.
            let channels = find(&r.id).unwrap().info.channels;
            if channels.iter().all(|c| *c == Channel::McpTranscript) {
                assert_eq!(r.outcome, Outcome::Pass, "{}", r.id);
                continue;
            }
            assert_eq!(r.outcome, Outcome::NotObserved);
            let reason = r.reason.as_deref().unwrap();
            for c in find(&r.id).unwrap().info.channels {
                if *c != Channel::McpTranscript {
                    assert!(reason.contains(c.name()), "{}: {reason}", r.id);
                }
            }
        }
        let (v, reason) = verdict::from_results(&results, true, None);
        assert_eq!(v, Verdict::Inconclusive);
        let reason = reason.unwrap();
        assert!(
            reason
                .contains("credential-probe, process-spawn, persistence, unix-socket, resource-abuse, left-behind, trigger-only not observed"),
            "{reason}"
        );
    }

    #[test]
    fn without_a_denied_run_only_its_check_is_not_observed() {
        let ev = Ev::new()
            .channels(&["syscalls", "mcp-transcript", "packet-edge", "left-files"])
            .build();
        let results = evaluate_all(&ev, &Proofs::all_proven());
        for r in &results {
            if r.id == "denied-network-attempts" {
                assert_eq!(r.outcome, Outcome::NotObserved);
                assert!(r.reason.as_deref().unwrap().contains("network-denied-run"));
            } else if r.id == "trigger-only" {
                // No trigger run was asked for either: said, and weighed on nothing.
                assert!(r
                    .reason
                    .as_deref()
                    .unwrap()
                    .contains(trigger_only::NOT_ASKED));
            } else {
                assert_eq!(r.outcome, Outcome::Pass, "{}", r.id);
            }
        }
    }

    #[test]
    fn planted_secret_in_a_flow_is_an_accusation_and_withholds_the_verdict() {
        let ev = Ev::new()
            .honeytoken_secrets(
                "/home/user/.aws/credentials",
                "aws-credentials",
                &["wJalrXUtnFEMIxK7MDENGxbPxRfiCYzEXAMPLEKEY"],
            )
            .flow(
                crate::testutil::F::tcp("192.0.2.1:80")
                    .sample(&b"key=wJalrXUtnFEMIxK7MDENGxbPxRfiCYzEXAMPLEKEY"[..]),
            )
            .build();
        let results = evaluate_all(&ev, &Proofs::all_proven());
        let r = results
            .iter()
            .find(|r| r.id == "canary-exfiltration")
            .unwrap();
        assert_eq!(r.outcome, Outcome::Flag);
        assert!(r.findings[0].accusation);
        assert_eq!(
            verdict::from_results(&results, true, None).0,
            Verdict::Withheld
        );
    }

    #[test]
    fn no_checks_is_not_clean() {
        assert_eq!(
            verdict::from_results(&[], true, None).0,
            Verdict::Inconclusive
        );
    }

    #[test]
    fn findings_carry_check_id_version_and_phase() {
        let ev = Ev::new()
            .open("/home/user/.aws/credentials", 0, Phase::Call("x".into()))
            .build();
        let results = evaluate_all(&ev, &Proofs::all_proven());
        let r = results.iter().find(|r| r.id == "credential-probe").unwrap();
        let f = &r.findings[0];
        assert_eq!(f.check, "credential-probe");
        assert_eq!(f.version, credential_probe::INFO.version);
        assert_eq!(f.evidence, vec![1]);
        assert_eq!(f.phase, Some(Phase::Call("x".into())));
        // A well-known path that is not planted: a probe, not an accusation.
        assert!(!f.accusation);
    }

    #[test]
    fn reading_a_planted_secret_is_an_accusation_and_withholds_the_verdict() {
        // Read, then a flow the edge could not read: where the key went is unknown.
        let ev = Ev::new()
            .honeytoken("/home/user/.ssh/id_rsa")
            .open("/home/user/.ssh/id_rsa", 0, Phase::Startup)
            .flow(
                crate::testutil::F::tcp("198.18.1.3:443")
                    .sni("t.example")
                    .unread("pinned"),
            )
            .build();
        let results = evaluate_all(&ev, &Proofs::all_proven());
        assert!(results
            .iter()
            .any(|r| r.findings.iter().any(|f| f.accusation)));
        assert_eq!(
            verdict::from_results(&results, true, None).0,
            Verdict::Withheld
        );
        // Read, and nothing the edge read or the client was given carried it: flagged.
        let ev = Ev::new()
            .honeytoken("/home/user/.ssh/id_rsa")
            .open("/home/user/.ssh/id_rsa", 0, Phase::Startup)
            .build();
        let results = evaluate_all(&ev, &Proofs::all_proven());
        assert_eq!(
            verdict::from_results(&results, true, None).0,
            Verdict::Flagged
        );
    }

    #[test]
    fn claims_of_a_retracted_version_are_withdrawn_not_kept() {
        let ev = Ev::new()
            .open("/home/user/.bashrc", crate::flags::O_WRONLY, Phase::Startup)
            .build();
        let mut results = evaluate_all(&ev, &Proofs::all_proven());
        assert_eq!(
            verdict::from_results(&results, true, None).0,
            Verdict::Flagged
        );
        let list = [Retraction {
            id: "persistence".into(),
            version: persistence::INFO.version,
            reason: "flagged reads as writes".into(),
            date: "2026-11-30".into(),
            outcome: None,
            only_with: None,
        }];
        assert_eq!(
            apply_retractions_from(&mut results, &ev.manifest, &ev.flows, &list),
            1
        );
        let p = results.iter().find(|r| r.id == "persistence").unwrap();
        assert_eq!(p.outcome, Outcome::Retracted);
        assert!(p.findings.is_empty());
        assert!(p
            .reason
            .as_deref()
            .unwrap()
            .contains("retracted on 2026-11-30"));
        // The server is no longer flagged on the strength of the withdrawn claim, nor clean.
        let (v, why) = verdict::from_results(&results, true, None);
        assert_eq!(v, Verdict::Inconclusive);
        assert!(why.unwrap().contains("persistence retracted"));
    }

    #[test]
    fn a_retraction_of_a_pass_over_tls_flows_withdraws_only_that() {
        let list = [Retraction {
            id: "canary-exfiltration".into(),
            version: canary_exfiltration::INFO.version,
            reason: "said pass over TLS it had not read".into(),
            date: "2026-12-01".into(),
            outcome: Some(Outcome::Pass),
            only_with: Some(Condition::TlsFlows),
        }];
        // A stored report of that version: `results` of `ev`, the run's flows `flows`.
        let retract = |ev: &Evidence, flows: &[Flow]| {
            let mut results = evaluate_all(ev, &Proofs::all_proven());
            let n = apply_retractions_from(&mut results, &ev.manifest, flows, &list);
            let c = results
                .iter()
                .find(|r| r.id == "canary-exfiltration")
                .unwrap()
                .outcome;
            (n, c)
        };
        // A run without TLS: the claim stands.
        let plain = Ev::new()
            .flow(F::tcp("198.51.100.7:80").sample(&b"GET / HTTP/1.1\r\n\r\n"[..]))
            .build();
        assert_eq!(retract(&plain, &plain.flows), (0, Outcome::Pass));
        // A run with a TLS flow (its SNI, as the old edge recorded it): withdrawn.
        let tls = Ev::new()
            .flow(F::tcp("198.18.1.0:8443").sni("api.example.test"))
            .build();
        assert_eq!(retract(&plain, &tls.flows), (1, Outcome::Retracted));
        // Or a TCP flow to port 443 without SNI.
        let ip = Ev::new().flow(F::tcp("198.51.100.7:443")).build();
        assert_eq!(retract(&plain, &ip.flows), (1, Outcome::Retracted));
        // A flag of that version is not withdrawn: what it found was there.
        let mut flagged = plain.clone();
        flagged.manifest.sandbox.honeytokens = vec![glassbox_model::Honeytoken {
            path: "env:TOKEN".into(),
            kind: "declared-secret".into(),
            secrets: vec!["gbx_0123456789abcdefghij".into()],
            ..Default::default()
        }];
        flagged.flows[0].sample = (&b"token=gbx_0123456789abcdefghij"[..]).into();
        assert_eq!(retract(&flagged, &tls.flows), (0, Outcome::Flag));
    }

    #[test]
    fn the_retractions_of_issue_31_withdraw_passes_over_what_was_not_unwrapped_or_read() {
        let empty = Manifest::default();
        let withdrawn = |id: &str, version: u32, outcome: Outcome, flows: &[Flow]| {
            withdrawn_in(id, version, outcome, &empty, flows)
        };
        let none: Vec<Flow> = Vec::new();
        let payload = Ev::new()
            .flow(F::tcp("198.51.100.7:80").sample(&b"POST / HTTP/1.1\r\n\r\neJx"[..]))
            .build()
            .flows;
        let mut unread = Ev::new().flow(F::tcp("198.18.1.0:443")).build().flows;
        unread[0].unread = Some("the client refused glassbox's certificate".into());
        assert!(withdrawn("canary-exfiltration", 7, Outcome::Pass, &payload));
        assert!(!withdrawn("canary-exfiltration", 7, Outcome::Pass, &none));
        assert!(!withdrawn(
            "canary-exfiltration",
            7,
            Outcome::Flag,
            &payload
        ));
        assert!(withdrawn("doh", 5, Outcome::Pass, &unread));
        assert!(!withdrawn("doh", 5, Outcome::Pass, &payload));
        assert!(!withdrawn("doh", 6, Outcome::Pass, &unread));
    }

    /// Whether a stored result of `id` at `version` with `outcome` is withdrawn in a run of
    /// `manifest` and `flows`.
    fn withdrawn_in(
        id: &str,
        version: u32,
        outcome: Outcome,
        manifest: &Manifest,
        flows: &[Flow],
    ) -> bool {
        let mut r = vec![CheckResult {
            id: id.into(),
            version,
            claim: String::new(),
            severity: Severity::Medium,
            outcome,
            reason: None,
            findings: Vec::new(),
            notes: Vec::new(),
        }];
        apply_retractions(&mut r, manifest, flows) == 1
    }

    /// Issue 31, point 5: a pass of a version that explained destinations by the package's
    /// name, or by a declared secret's vendor word under any suffix, is withdrawn where the
    /// run shows either; elsewhere it stands.
    #[test]
    fn passes_explained_by_what_explains_nothing_now_are_withdrawn() {
        let mut named = Manifest::default();
        named.network.explained = vec![glassbox_model::ExplainedHost {
            host: "context7".into(),
            by: "package-name".into(),
            ..Default::default()
        }];
        let mut declared = Manifest::default();
        declared.sandbox.honeytokens = vec![glassbox_model::Honeytoken {
            path: "env:BRAVE_API_KEY".into(),
            kind: "declared-secret".into(),
            ..Default::default()
        }];
        let plain = Manifest::default();
        for (id, v) in [
            ("unexplained-egress", 5),
            ("denied-network-attempts", 4),
            ("input-exposure", 7),
        ] {
            assert!(withdrawn_in(id, v, Outcome::Pass, &named, &[]), "{id} v{v}");
            assert!(
                withdrawn_in(id, v, Outcome::Pass, &declared, &[]),
                "{id} v{v}"
            );
            assert!(
                !withdrawn_in(id, v, Outcome::Pass, &plain, &[]),
                "{id} v{v}"
            );
            assert!(
                !withdrawn_in(id, v, Outcome::Flag, &named, &[]),
                "{id} v{v}"
            );
        }
        assert!(!withdrawn_in(
            "unexplained-egress",
            7,
            Outcome::Pass,
            &named,
            &[]
        ));
    }

    /// Issue 31: a run that lost what a check reads never lets it say `pass`; a finding
    /// still flags.
    #[test]
    fn what_the_recorder_lost_is_not_observed_never_pass() {
        let outcome = |ev: &Evidence, id: &str| {
            let r = evaluate_all(ev, &Proofs::all_proven());
            let r = r.into_iter().find(|r| r.id == id).unwrap();
            (r.outcome, r.reason.unwrap_or_default())
        };
        let mut ev = Ev::new().build();
        ev.manifest.recorder.lost = 3;
        ev.manifest.recorder.lost_why =
            vec!["calls whose arguments could not be read while their caller waited: 3".into()];
        for id in [
            "process-spawn",
            "persistence",
            "credential-probe",
            "unix-socket",
        ] {
            let (o, why) = outcome(&ev, id);
            assert_eq!(o, Outcome::NotObserved, "{id}");
            assert!(
                why.contains(
                    "3 system call(s) the recorder lost (calls whose arguments could not be read while their caller waited: 3)"
                ),
                "{why}"
            );
        }
        // What reads only the transcript lost nothing.
        assert_eq!(outcome(&ev, "description-exfil-pattern").0, Outcome::Pass);
        // Records of the open and stat families lost (the eBPF channel's) blind what reads
        // those families, not what reads execs or connects alone.
        let mut files = Ev::new().build();
        files.manifest.recorder.lost = 5;
        files.manifest.recorder.lost_file_calls = 5;
        files.manifest.recorder.lost_why =
            vec!["records the kernel could not queue (its ring buffer was full): 5".into()];
        for id in ["persistence", "credential-probe", "sandbox-evasion"] {
            let (o, why) = outcome(&files, id);
            assert_eq!(o, Outcome::NotObserved, "{id}");
            assert!(
                why.contains(
                    "5 system call(s) the recorder lost (records the kernel could not queue"
                ),
                "{why}"
            );
        }
        for id in ["process-spawn", "unix-socket"] {
            assert_eq!(outcome(&files, id).0, Outcome::Pass, "{id}");
        }
        // Both kinds lost: the others blind those too, said as such.
        files.manifest.recorder.lost = 7;
        let (o, why) = outcome(&files, "process-spawn");
        assert_eq!(o, Outcome::NotObserved);
        assert!(
            why.contains("2 system call(s) the recorder lost besides the open and stat family's"),
            "{why}"
        );
        // A finding flags whatever was lost besides.
        let mut flagged = Ev::new()
            .open("/home/user/.bashrc", crate::flags::O_WRONLY, Phase::Startup)
            .build();
        flagged.manifest.recorder.lost = 3;
        assert_eq!(outcome(&flagged, "persistence").0, Outcome::Flag);
        // The kernel's report of planted-secret accesses overflowed: the recorder counts it
        // as lost too; only what reads that report is blinded by it.
        let mut over = Ev::new()
            .event(
                1,
                Phase::Startup,
                EventKind::Honeytoken {
                    path: "/home/user/.ssh".into(),
                    access: "overflow".into(),
                    dir: true,
                },
            )
            .build();
        over.manifest.recorder.lost = 1;
        let (o, why) = outcome(&over, "credential-probe");
        assert_eq!(o, Outcome::NotObserved);
        assert!(why.contains("overflowed 1 time(s)"), "{why}");
        assert_eq!(outcome(&over, "process-spawn").0, Outcome::Pass);
    }

    #[test]
    fn an_unread_flow_is_not_observed_never_pass() {
        let mut ev = Ev::new().flow(F::tcp("198.18.1.0:443")).build();
        ev.flows[0].id = 1;
        ev.flows[0].unread =
            Some("TLS to api.example.test:443: the client refused glassbox's certificate".into());
        let results = evaluate_all(&ev, &Proofs::all_proven());
        // `doh` too: DNS over HTTPS to a resolver in no list may be inside (issue 31).
        for id in ["canary-exfiltration", "input-exposure", "doh"] {
            let r = results.iter().find(|r| r.id == id).unwrap();
            assert_eq!(r.outcome, Outcome::NotObserved, "{id}: {r:?}");
            let why = r.reason.as_deref().unwrap();
            assert!(
                why.starts_with("could not read: flow 1 (TCP to 198.18.1.0:443")
                    && why.contains("refused glassbox's certificate"),
                "{why}"
            );
        }
        // The others claim what they saw.
        let egress = results.iter().find(|r| r.id == "credential-probe").unwrap();
        assert_eq!(egress.outcome, Outcome::Pass);
        // A bundle of an edge that did not terminate TLS: its ClientHello flows were not read.
        let old = Ev::new()
            .flow(F::tcp("198.18.1.0:443").sni("api.example.test"))
            .build();
        let results = evaluate_all(&old, &Proofs::all_proven());
        let c = results
            .iter()
            .find(|r| r.id == "canary-exfiltration")
            .unwrap();
        assert_eq!(c.outcome, Outcome::NotObserved, "{c:?}");
    }

    #[test]
    fn an_unproven_check_is_unverified_never_pass() {
        let ev = Ev::new().build();
        let proofs = Proofs::none("no selftest recorded for this build");
        let results = asked(evaluate_all(&ev, &proofs));
        assert!(results.iter().all(|r| r.outcome == Outcome::Unverified));
        let (v, why) = verdict::from_results(&results, true, None);
        assert_eq!(v, Verdict::Inconclusive);
        assert!(why.unwrap().contains("no selftest recorded"));
        // A finding still flags: what was recorded happened.
        let ev = Ev::new()
            .open("/home/user/.bashrc", crate::flags::O_WRONLY, Phase::Startup)
            .build();
        let results = evaluate_all(&ev, &proofs);
        let p = results.iter().find(|r| r.id == "persistence").unwrap();
        assert_eq!(p.outcome, Outcome::Flag);
    }
}
