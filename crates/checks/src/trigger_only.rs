//! `trigger-only`: what the server did only when its world changed.
//!
//! The trigger run (`manifest.network.runs`, mode `trigger`; `docs/triggers.md`) makes the
//! capture run's session again with the server's clocks moved forward and an environment
//! that looks like a CI runner or a developer's machine. Behaviour that waits for a date, for
//! days of uptime or for such a machine shows there and not in the capture run. This check
//! compares the two runs:
//!
//! - **A planted secret touched** (the kernel's report of an open, read or listing of a
//!   planted file or folder, or a recorded open of one) in the trigger run and not in the
//!   capture run is a finding.
//! - **A program executed** (by its path) only in the trigger run is a finding.
//! - **A destination contacted** only in the trigger run (by its names: DNS question, SNI,
//!   HTTP `Host`; by address and port where it has none; a canary socket by its path) is a
//!   finding.
//! - **Files opened** only in the trigger run are a note, never a finding: what a server
//!   names by date (a log file per day) differs with the clock, and a path differs from run
//!   to run by its digits alone is not counted at all (digits are compared as one).
//!
//! Each finding says what brought it out ([`glassbox_model::TriggerRun::describe`]). The same
//! behaviour in both runs is not this check's: the other checks judge every run's events,
//! the trigger run's included. glassbox's own files in the sandbox (`/run/glassbox`: the
//! wall-clock shim every program of the trigger run loads) are not the server's.
//!
//! A capture run whose session did not complete is no baseline: nothing is compared, and the
//! check is inconclusive with the run. A trigger run whose session did not complete is
//! compared for what it did (a finding stands), but without one the check says
//! `not-observed`, never `pass`: what it did not reach was not looked at.
//!
//! A server that tells the moved clock from the real one (two clocks that disagree, a clock
//! earlier than a file's modification time) is not a finding by itself; what the moved
//! clock could not reach (a statically linked program's wall clock) is a note.

use crate::net;
use crate::paths::NormPath;
use crate::{Channel, CheckInfo, Evaluation, Evaluator};
use glassbox_model::{Event, EventKind, Flow, NetworkMode, Phase, Severity};
use std::collections::{BTreeMap, BTreeSet};

pub(crate) const INFO: CheckInfo = CheckInfo {
    id: "trigger-only",
    version: 1,
    claim: "does nothing with its clock moved forward or on a CI runner that it does not do \
            without",
    severity: Severity::High,
    channels: &[Channel::Syscalls],
    also_reads: &[
        Channel::TriggerRun,
        Channel::PacketEdge,
        Channel::HoneytokenGroundTruth,
    ],
    file_calls: true,
    accuses: "",
    sources: &["trigger_only.rs", "net.rs", "paths.rs", "outcome.rs"],
};

/// Findings listed per kind before the rest are counted.
const LISTED: usize = 10;
/// Files listed in the note.
const FILES_LISTED: usize = 10;

/// glassbox's own folder in the sandbox.
const OWN: &[u8] = b"/run/glassbox/";

/// What one run did, by kind: each key with the ids of the events behind it (the first few)
/// and the phase of the first.
#[derive(Default)]
struct Seen {
    secrets: BTreeMap<Vec<u8>, (Vec<u64>, Option<Phase>)>,
    programs: BTreeMap<Vec<u8>, (Vec<u64>, Option<Phase>)>,
    /// By shape (digits as one `#`): the first path of that shape.
    files: BTreeMap<Vec<u8>, Vec<u8>>,
}

fn note(map: &mut BTreeMap<Vec<u8>, (Vec<u64>, Option<Phase>)>, key: Vec<u8>, e: &Event) {
    let entry = map
        .entry(key)
        .or_insert_with(|| (Vec::new(), Some(e.phase.clone())));
    if entry.0.len() < 4 {
        entry.0.push(e.id);
    }
}

/// A path with each run of digits made one `#`: a name by date or counter has one shape.
fn shape(path: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(path.len());
    for &b in path {
        if b.is_ascii_digit() {
            if out.last() != Some(&b'#') {
                out.push(b'#');
            }
        } else {
            out.push(b);
        }
    }
    out
}

struct State {
    /// Event ids of the capture run and of the trigger run (`first..end`).
    capture: Option<(u64, u64)>,
    trigger: Option<(u64, u64)>,
    /// What brought the trigger run's behaviour out.
    why: String,
    /// What the moved clock could not reach.
    limits: Vec<String>,
    /// Whether the audit was asked to make a trigger run ([`not_asked`]).
    asked: bool,
    /// Why the trigger run's session did not complete, when it did not.
    cut_short: Option<String>,
    /// The planted files and folders.
    planted: BTreeSet<Vec<u8>>,
    runs: [Seen; 2],
}

pub(crate) fn start(c: &crate::Context<'_>) -> Box<dyn Evaluator> {
    let runs = &c.manifest.network.runs;
    let range = |mode: NetworkMode| {
        runs.iter()
            .find(|r| r.mode == mode)
            .map(|r| (r.first_event, r.end_event))
    };
    let trigger = runs.iter().find(|r| r.mode == NetworkMode::Trigger);
    let planted = c
        .manifest
        .sandbox
        .honeytokens
        .iter()
        .filter(|h| h.path.starts_with('/'))
        .map(|h| NormPath::new(h.path.as_bytes()).to_bytes().0)
        .collect();
    Box::new(State {
        capture: range(NetworkMode::Capture),
        trigger: range(NetworkMode::Trigger),
        why: trigger
            .and_then(|r| r.trigger.as_ref())
            .map_or_else(|| "the world changed".to_string(), |t| t.describe()),
        limits: trigger
            .and_then(|r| r.trigger.as_ref())
            .map(|t| t.limits.clone())
            .unwrap_or_default(),
        asked: !not_asked(c.manifest),
        cut_short: trigger
            .and_then(|r| r.session.as_ref())
            .filter(|s| !s.completed)
            .map(|s| {
                format!(
                    "the trigger run's session did not complete ({}): what it did not reach \
                     was not compared",
                    s.failure.as_deref().unwrap_or("no reason recorded")
                )
            }),
        planted,
        runs: [Seen::default(), Seen::default()],
    })
}

/// What the check says when the audit made no trigger run and was not asked to.
pub(crate) const NOT_ASKED: &str =
    "the trigger run: not asked for (--triggers none), nothing that waits was looked for";

/// Whether the audit was not asked to make a trigger run: no channel of one
/// (`manifest.recorder.channels`) and no run of mode trigger. The check then says
/// `not-observed` ([`NOT_ASKED`]) and weighs on nothing in the verdict (`verdict.rs`): the
/// report says what was not looked for. A trigger run asked for and not made (the channel
/// without the run) is not this: the check is then `not-observed` and weighs as any.
pub(crate) fn not_asked(m: &glassbox_model::Manifest) -> bool {
    !Channel::TriggerRun.observed_in(m)
        && !m
            .network
            .runs
            .iter()
            .any(|r| r.mode == NetworkMode::Trigger)
}

impl State {
    fn run_of(&self, id: u64) -> Option<usize> {
        let within = |r: Option<(u64, u64)>| r.is_some_and(|(a, b)| id >= a && id < b);
        if within(self.capture) {
            Some(0)
        } else if within(self.trigger) {
            Some(1)
        } else {
            None
        }
    }
}

impl Evaluator for State {
    fn unread(&self) -> Vec<String> {
        match (self.trigger, self.asked) {
            // A trigger run cut short did not do all the capture run's session did: what it
            // did not reach is not known to be quiet.
            (Some(_), _) => self.cut_short.iter().cloned().collect(),
            (None, false) => vec![NOT_ASKED.into()],
            // The channel says a trigger run was made: without its run in the manifest,
            // nothing of it can be compared.
            (None, true) => {
                vec!["the trigger run (the manifest has no run of mode trigger)".into()]
            }
        }
    }

    fn event(&mut self, e: &Event) {
        let Some(run) = self.run_of(e.id) else {
            return;
        };
        match &e.kind {
            EventKind::Honeytoken { path, access, .. } if access != "overflow" => {
                let p = NormPath::new(path.as_slice()).to_bytes().0;
                note(&mut self.runs[run].secrets, p, e);
            }
            EventKind::Open { path, .. } => {
                let p = NormPath::new(path.as_slice()).to_bytes().0;
                if p.starts_with(OWN) {
                    return;
                }
                if self.planted.contains(&p) {
                    note(&mut self.runs[run].secrets, p, e);
                } else {
                    self.runs[run].files.entry(shape(&p)).or_insert(p);
                }
            }
            EventKind::Exec { path, .. } => {
                let p = NormPath::new(path.as_slice()).to_bytes().0;
                note(&mut self.runs[run].programs, p, e);
            }
            _ => {}
        }
    }

    fn finish_with(self: Box<Self>, c: &crate::Context<'_>) -> Evaluation {
        let mut eval = Evaluation::default();
        if self.trigger.is_none() {
            return eval;
        }
        // A capture run cut short is no baseline: what the trigger run did after that point
        // would all seem new. Nothing is compared (the check is then inconclusive, as the run).
        if !c.manifest.session.completed {
            eval.notes.push(
                INFO.finding(
                    "the capture run's session did not complete: the trigger run was not compared \
                 with it"
                        .into(),
                    Vec::new(),
                    None,
                ),
            );
            return eval;
        }
        let [before, after] = &self.runs;
        let only = |what: &str,
                    a: &BTreeMap<Vec<u8>, (Vec<u64>, Option<Phase>)>,
                    b: &BTreeMap<Vec<u8>, (Vec<u64>, Option<Phase>)>,
                    eval: &mut Evaluation| {
            let new: Vec<_> = b.iter().filter(|(k, _)| !a.contains_key(*k)).collect();
            for (k, (ids, phase)) in new.iter().take(LISTED) {
                eval.findings.push(INFO.finding(
                    format!(
                        "only with {}: {what} {}",
                        self.why,
                        glassbox_model::Bytes::from(k.as_slice())
                    ),
                    ids.clone(),
                    phase.clone(),
                ));
            }
            if new.len() > LISTED {
                eval.findings.push(INFO.finding(
                    format!("only with {}: {} more {what}", self.why, new.len() - LISTED),
                    Vec::new(),
                    None,
                ));
            }
        };
        only(
            "touched the planted secret",
            &before.secrets,
            &after.secrets,
            &mut eval,
        );
        only("executed", &before.programs, &after.programs, &mut eval);
        destinations(c.flows, &self.why, &mut eval);
        let files: Vec<&Vec<u8>> = after
            .files
            .iter()
            .filter(|(k, _)| !before.files.contains_key(*k))
            .map(|(_, p)| p)
            .collect();
        if !files.is_empty() {
            let mut list: Vec<String> = files
                .iter()
                .take(FILES_LISTED)
                .map(|p| glassbox_model::Bytes::from(p.as_slice()).to_string())
                .collect();
            if files.len() > FILES_LISTED {
                list.push(format!("{} more", files.len() - FILES_LISTED));
            }
            eval.notes.push(INFO.finding(
                format!(
                    "files opened only with {} (a name by date changes with the clock): {}",
                    self.why,
                    list.join(", ")
                ),
                Vec::new(),
                None,
            ));
        }
        if !self.limits.is_empty() {
            eval.notes.push(INFO.finding(
                format!(
                    "what the trigger run could not change: {}",
                    self.limits.join("; ")
                ),
                Vec::new(),
                None,
            ));
        }
        eval
    }
}

/// What a flow is a contact with: its names, else its address (a canary socket's path).
fn destination(f: &Flow) -> Vec<String> {
    let names: Vec<String> = net::names(f).into_iter().map(|(_, n)| n).collect();
    if names.is_empty() {
        vec![net::addr(&f.dst)]
    } else {
        names
    }
}

/// The trigger run's flows to a destination the capture run never contacted.
fn destinations(flows: &[Flow], why: &str, eval: &mut Evaluation) {
    let before: BTreeSet<String> = flows
        .iter()
        .filter(|f| f.mode == NetworkMode::Capture)
        .flat_map(destination)
        .collect();
    let mut new: BTreeMap<String, Vec<u64>> = BTreeMap::new();
    for f in flows.iter().filter(|f| f.mode == NetworkMode::Trigger) {
        let d = destination(f);
        if d.iter().all(|n| before.contains(n)) {
            continue;
        }
        let key = format!("{} {}", net::protocol(f.protocol), d.join(" / "));
        let ids = new.entry(key).or_default();
        if ids.len() < 4 {
            ids.push(f.id);
        }
    }
    let n = new.len();
    for (key, flows) in new.into_iter().take(LISTED) {
        let mut finding = INFO.finding(
            format!("only with {why}: contacted {}", net::show(&key)),
            Vec::new(),
            None,
        );
        finding.flows = flows;
        eval.findings.push(finding);
    }
    if n > LISTED {
        eval.findings.push(INFO.finding(
            format!("only with {why}: {} more destinations", n - LISTED),
            Vec::new(),
            None,
        ));
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{Ev, F};
    use glassbox_model::{Evidence, FlowProtocol};

    const KEY: &str = "/home/u/.aws/credentials";

    /// A capture run of events 1..=2 (the planted secret read, `node` executed) and a trigger
    /// run of events 3.. (`more` of them after the same two), each with a flow to
    /// `api.example`, and the trigger run `flows` more.
    fn runs(more: impl FnOnce(Ev) -> Ev, flows: &[F]) -> Evidence {
        let ev = Ev::new()
            .channels(&["syscalls", "mcp-transcript", "packet-edge", "trigger-run"])
            .home("/home/u")
            .honeytoken(KEY)
            .open(KEY, 0, Phase::Startup)
            .exec(2, "/usr/bin/node", &["node"], Phase::Startup)
            .open(KEY, 0, Phase::Startup)
            .exec(2, "/usr/bin/node", &["node"], Phase::Startup);
        let mut ev = more(ev).run(NetworkMode::Capture, 1, 3).build();
        let end = ev.events.len() as u64 + 1;
        ev.manifest.network.runs.push(glassbox_model::NetworkRun {
            mode: NetworkMode::Trigger,
            first_event: 3,
            end_event: end,
            trigger: Some(glassbox_model::TriggerRun {
                clock_offset_days: Some(400),
                environment: Some("ci".into()),
                ..Default::default()
            }),
            ..Default::default()
        });
        let mut all = vec![F::dns("api.example", "A").0];
        let mut t = F::dns("api.example", "A").0;
        t.mode = NetworkMode::Trigger;
        all.push(t);
        for f in flows {
            let mut f = f.0.clone();
            f.mode = NetworkMode::Trigger;
            all.push(f);
        }
        for (i, f) in all.iter_mut().enumerate() {
            f.id = i as u64 + 1;
        }
        ev.flows = all;
        ev
    }

    fn evaluate(ev: &Evidence) -> Evaluation {
        crate::evaluate_one(start, ev)
    }

    #[test]
    fn the_same_behaviour_in_both_runs_is_not_this_checks() {
        let e = evaluate(&runs(|ev| ev, &[]));
        assert!(e.findings.is_empty(), "{:?}", e.findings);
    }

    #[test]
    fn a_secret_a_program_and_a_destination_only_with_the_world_changed_are_findings() {
        let ev = runs(
            |ev| {
                ev.open("/home/u/.ssh/id_rsa", 0, Phase::Startup)
                    .honeytoken("/home/u/.ssh/id_rsa")
                    .exec(3, "/usr/bin/curl", &["curl"], Phase::Startup)
                    .open("/tmp/report-2028-01-10.log", 0o1101, Phase::Startup)
            },
            &[F::new(FlowProtocol::Tcp, "198.51.100.7:443").name("drop.example")],
        );
        let e = evaluate(&ev);
        let said: Vec<&str> = e.findings.iter().map(|f| f.summary.as_str()).collect();
        assert_eq!(said.len(), 3, "{said:?}");
        assert!(said[0].contains("touched the planted secret /home/u/.ssh/id_rsa"));
        assert!(said[0].starts_with("only with the clock moved +400 days, a CI runner's"));
        assert!(said[1].contains("executed /usr/bin/curl"), "{said:?}");
        assert!(said[2].contains("contacted TCP drop.example"), "{said:?}");
        assert_eq!(e.findings[2].flows, vec![3]);
        // A file opened only then is a note; the same file by another date would not be.
        assert!(e.notes[0].summary.contains("/tmp/report-2028-01-10.log"));
    }

    #[test]
    fn a_file_named_by_another_date_is_the_same_file() {
        let ev = Ev::new()
            .channels(&["syscalls", "trigger-run"])
            .open("/tmp/report-2026-12-06.log", 0o1101, Phase::Startup)
            .open("/tmp/report-2028-01-10.log", 0o1101, Phase::Startup)
            .run(NetworkMode::Capture, 1, 2)
            .run(NetworkMode::Trigger, 2, 3)
            .build();
        let e = evaluate(&ev);
        assert!(e.findings.is_empty() && e.notes.is_empty(), "{e:?}");
    }

    #[test]
    fn a_capture_run_cut_short_is_no_baseline() {
        let ev = runs(
            |ev| {
                ev.incomplete("crashed")
                    .exec(3, "/usr/bin/curl", &["curl"], Phase::Startup)
            },
            &[],
        );
        let e = evaluate(&ev);
        assert!(e.findings.is_empty(), "{:?}", e.findings);
        assert!(e.notes[0].summary.contains("did not complete"));
    }

    #[test]
    fn a_trigger_run_cut_short_is_not_a_pass() {
        let mut ev = runs(|ev| ev, &[]);
        let run = ev.manifest.network.runs.last_mut().unwrap();
        run.session = Some(glassbox_model::SessionSummary {
            completed: false,
            failure: Some("server exited".into()),
            ..Default::default()
        });
        let ctx = crate::Context {
            manifest: &ev.manifest,
            transcript: &[],
            denied_transcript: &[],
            trigger_transcript: &[],
            flows: &ev.flows,
        };
        let unread = start(&ctx).unread();
        assert_eq!(unread.len(), 1, "{unread:?}");
        assert!(unread[0].contains("server exited"), "{unread:?}");
    }

    #[test]
    fn without_a_trigger_run_asked_for_it_says_so() {
        let ev = Ev::new().build();
        assert!(not_asked(&ev.manifest));
        let e = start(&crate::Context {
            manifest: &ev.manifest,
            transcript: &[],
            denied_transcript: &[],
            trigger_transcript: &[],
            flows: &[],
        });
        assert_eq!(e.unread(), vec![NOT_ASKED.to_string()]);
    }

    #[test]
    fn a_name_by_date_or_counter_has_one_shape() {
        assert_eq!(
            shape(b"/tmp/report-2026-12-06.log"),
            shape(b"/tmp/report-2028-01-10.log")
        );
        assert_ne!(
            shape(b"/home/a/.aws/credentials"),
            shape(b"/home/a/.ssh/id_rsa")
        );
    }
}
