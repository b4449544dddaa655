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
//! The baseline is every run with the world unchanged: the capture run, and the denied run
//! for what is not a destination's (a program run or a secret touched there is no trigger's
//! doing). Each finding says what brought it out ([`glassbox_model::TriggerRun::describe`]).
//! When the trigger run brought something out, the audit makes it again ([`unrepeated`]):
//! with each trigger alone when there are two, then with all of them, so a finding names the
//! trigger ("only with the clock moved +400 days"; "... together" when neither alone did it)
//! and what the server did once and not again (a crash, a random choice) is a note, not a
//! finding. The same behaviour in both runs is not this check's: the other checks judge
//! every run's events, the trigger runs' included. glassbox's own files in the sandbox
//! (`/run/glassbox`: the wall-clock shim every program of the trigger run loads) are not the
//! server's.
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
    version: 2,
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
    secrets: Keyed,
    programs: Keyed,
    /// By shape (digits as one `#`): the first path of that shape.
    files: BTreeMap<Vec<u8>, Vec<u8>>,
}

fn note(map: &mut Keyed, key: Vec<u8>, e: &Event) {
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

/// One trigger run: the ids of its events (`first..end`), when it started (its flows are
/// those of mode trigger from then on), what it changed, and what it did.
struct TriggerSeen {
    events: (u64, u64),
    start_ns: u64,
    record: glassbox_model::TriggerRun,
    seen: Seen,
}

struct State {
    /// Event ids of the runs with the world unchanged (capture, denied): the baseline.
    baseline: Vec<(u64, u64)>,
    base: Seen,
    /// The trigger runs in the manifest's order: the first is the trigger run, the others
    /// its repeats (each trigger alone, then all of them again), made by the audit when the
    /// first brought something out.
    triggers: Vec<TriggerSeen>,
    /// What the moved clock could not reach.
    limits: Vec<String>,
    /// Whether the audit was asked to make a trigger run ([`not_asked`]).
    asked: bool,
    /// Why the trigger run's session did not complete, when it did not.
    cut_short: Option<String>,
    /// Whether the capture run's session completed.
    capture_completed: bool,
    /// The planted files and folders.
    planted: BTreeSet<Vec<u8>>,
}

impl State {
    fn new(m: &glassbox_model::Manifest) -> State {
        let runs = &m.network.runs;
        let first = runs.iter().find(|r| r.mode == NetworkMode::Trigger);
        let planted = m
            .sandbox
            .honeytokens
            .iter()
            .filter(|h| h.path.starts_with('/'))
            .map(|h| NormPath::new(h.path.as_bytes()).to_bytes().0)
            .collect();
        State {
            baseline: runs
                .iter()
                .filter(|r| matches!(r.mode, NetworkMode::Capture | NetworkMode::Denied))
                .map(|r| (r.first_event, r.end_event))
                .collect(),
            base: Seen::default(),
            triggers: runs
                .iter()
                .filter(|r| r.mode == NetworkMode::Trigger)
                .map(|r| TriggerSeen {
                    events: (r.first_event, r.end_event),
                    start_ns: r.start_ns,
                    record: r.trigger.clone().unwrap_or_default(),
                    seen: Seen::default(),
                })
                .collect(),
            limits: first
                .and_then(|r| r.trigger.as_ref())
                .map(|t| t.limits.clone())
                .unwrap_or_default(),
            asked: !not_asked(m),
            cut_short: first
                .and_then(|r| r.session.as_ref())
                .filter(|s| !s.completed)
                .map(|s| {
                    format!(
                        "the trigger run's session did not complete ({}): what it did not \
                         reach was not compared",
                        s.failure.as_deref().unwrap_or("no reason recorded")
                    )
                }),
            capture_completed: m.session.completed,
            planted,
        }
    }

    /// What the event's run saw: the baseline's, or a trigger run's.
    fn seen_of(&mut self, id: u64) -> Option<&mut Seen> {
        let within = |(a, b): (u64, u64)| id >= a && id < b;
        if self.baseline.iter().any(|&r| within(r)) {
            return Some(&mut self.base);
        }
        self.triggers
            .iter_mut()
            .find(|t| within(t.events))
            .map(|t| &mut t.seen)
    }

    /// The trigger run a flow of mode trigger belongs to: the last one started by its time.
    fn trigger_of(&self, f: &Flow) -> usize {
        self.triggers
            .iter()
            .rposition(|t| t.start_ns <= f.t_ns)
            .unwrap_or(0)
    }

    /// What the first trigger run did and no run with the world unchanged did, each with the
    /// repeats that did it again.
    fn compare(&self, flows: &[Flow]) -> Vec<Item> {
        let Some(first) = self.triggers.first() else {
            return Vec::new();
        };
        let mut items = Vec::new();
        let kinds = [
            (
                "touched the planted secret",
                &self.base.secrets,
                (|s: &Seen| &s.secrets) as fn(&Seen) -> &Keyed,
            ),
            ("executed", &self.base.programs, |s: &Seen| &s.programs),
        ];
        for (what, before, of) in kinds {
            for (k, (ids, phase)) in of(&first.seen) {
                if before.contains_key(k) {
                    continue;
                }
                let again: Vec<usize> = (1..self.triggers.len())
                    .filter(|&i| of(&self.triggers[i].seen).contains_key(k))
                    .collect();
                let mut ids = ids.clone();
                for &i in again.iter().take(2) {
                    ids.extend(of(&self.triggers[i].seen)[k].0.iter().take(2));
                }
                items.push(Item {
                    what: format!("{what} {}", glassbox_model::Bytes::from(k.as_slice())),
                    ids,
                    phase: phase.clone(),
                    flows: Vec::new(),
                    again,
                });
            }
        }
        // Destinations: by the flows' modes (capture and denied runs are the baseline), each
        // trigger run's by its time.
        let before: BTreeSet<String> = flows
            .iter()
            .filter(|f| matches!(f.mode, NetworkMode::Capture | NetworkMode::Denied))
            .flat_map(destination)
            .collect();
        let mut new: BTreeMap<String, (Vec<u64>, BTreeSet<usize>)> = BTreeMap::new();
        for f in flows.iter().filter(|f| f.mode == NetworkMode::Trigger) {
            let d = destination(f);
            if d.iter().all(|n| before.contains(n)) {
                continue;
            }
            let key = format!("{} {}", net::protocol(f.protocol), d.join(" / "));
            let (ids, runs) = new.entry(key).or_default();
            if ids.len() < 4 {
                ids.push(f.id);
            }
            runs.insert(self.trigger_of(f));
        }
        for (key, (flows, runs)) in new {
            if !runs.contains(&0) {
                continue;
            }
            items.push(Item {
                what: format!("contacted {}", net::show(&key)),
                ids: Vec::new(),
                phase: None,
                flows,
                again: runs.into_iter().filter(|&i| i > 0).collect(),
            });
        }
        items
    }

    /// What brought an item out, from the repeats that did it again: `None` when repeats
    /// were made and none did (seen once, not counted).
    fn why(&self, item: &Item) -> Option<String> {
        let first = &self.triggers[0].record;
        if self.triggers.len() == 1 {
            return Some(first.describe());
        }
        let alone: Vec<String> = item
            .again
            .iter()
            .map(|&i| &self.triggers[i].record)
            .filter(|r| !r.same_triggers(first))
            .map(|r| r.describe())
            .collect();
        let both = first.clock_offset_days.is_some() && first.environment.is_some();
        match (alone.len(), item.again.is_empty()) {
            (0, true) => None,
            (0, false) if both => Some(format!("{} together", first.describe())),
            (0, false) => Some(first.describe()),
            (1, _) => Some(alone[0].clone()),
            _ => Some(format!("{} (each alone)", alone.join(" or "))),
        }
    }
}

/// Keys of one kind, each with the ids of the events behind it and the phase of the first.
type Keyed = BTreeMap<Vec<u8>, (Vec<u64>, Option<Phase>)>;

/// Something the first trigger run did that no run with the world unchanged did.
struct Item {
    /// "touched the planted secret /home/…", "executed /usr/bin/curl", "contacted …".
    what: String,
    ids: Vec<u64>,
    phase: Option<Phase>,
    flows: Vec<u64>,
    /// The repeats (indexes into `State::triggers`) that did it again.
    again: Vec<usize>,
}

pub(crate) fn start(c: &crate::Context<'_>) -> Box<dyn Evaluator> {
    Box::new(State::new(c.manifest))
}

/// How many things the first trigger run did that no run with the world unchanged did and no
/// repeat of it has done again: the audit repeats the trigger run while this is not zero
/// (each trigger alone, then all of them again), so that a finding says which trigger brought
/// it out and a behaviour seen once (a crash, a random choice of the server) is told from one
/// that follows from the change.
pub fn unrepeated(manifest: &glassbox_model::Manifest, events: &[Event], flows: &[Flow]) -> usize {
    let mut s = State::new(manifest);
    for e in events {
        s.event(e);
    }
    s.compare(flows)
        .iter()
        .filter(|i| i.again.is_empty())
        .count()
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

impl Evaluator for State {
    fn unread(&self) -> Vec<String> {
        match (self.triggers.is_empty(), self.asked) {
            // A trigger run cut short did not do all the capture run's session did: what it
            // did not reach is not known to be quiet.
            (false, _) => self.cut_short.iter().cloned().collect(),
            (true, false) => vec![NOT_ASKED.into()],
            // The channel says a trigger run was made: without its run in the manifest,
            // nothing of it can be compared.
            (true, true) => {
                vec!["the trigger run (the manifest has no run of mode trigger)".into()]
            }
        }
    }

    fn event(&mut self, e: &Event) {
        enum Kind {
            Secret,
            Program,
            File,
        }
        let norm = |p: &glassbox_model::Bytes| NormPath::new(p.as_slice()).to_bytes().0;
        let (kind, p) = match &e.kind {
            EventKind::Honeytoken { path, access, .. } if access != "overflow" => {
                (Kind::Secret, norm(path))
            }
            EventKind::Open { path, .. } => {
                let p = norm(path);
                if p.starts_with(OWN) {
                    return;
                }
                match self.planted.contains(&p) {
                    true => (Kind::Secret, p),
                    false => (Kind::File, p),
                }
            }
            EventKind::Exec { path, .. } => (Kind::Program, norm(path)),
            _ => return,
        };
        let Some(seen) = self.seen_of(e.id) else {
            return;
        };
        match kind {
            Kind::Secret => note(&mut seen.secrets, p, e),
            Kind::Program => note(&mut seen.programs, p, e),
            Kind::File => {
                seen.files.entry(shape(&p)).or_insert(p);
            }
        }
    }

    fn finish_with(self: Box<Self>, c: &crate::Context<'_>) -> Evaluation {
        let mut eval = Evaluation::default();
        let Some(first) = self.triggers.first() else {
            return eval;
        };
        // A capture run cut short is no baseline: what the trigger run did after that point
        // would all seem new. Nothing is compared (the check is then inconclusive, as the run).
        if !self.capture_completed {
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
        let mut listed = 0;
        let mut once = Vec::new();
        for item in self.compare(c.flows) {
            let Some(why) = self.why(&item) else {
                once.push(item.what);
                continue;
            };
            listed += 1;
            if listed > LISTED {
                continue;
            }
            let mut f = INFO.finding(
                format!("only with {why}: {}", item.what),
                item.ids,
                item.phase,
            );
            f.flows = item.flows;
            eval.findings.push(f);
        }
        if listed > LISTED {
            eval.findings.push(INFO.finding(
                format!(
                    "only with {}: {} more",
                    first.record.describe(),
                    listed - LISTED
                ),
                Vec::new(),
                None,
            ));
        }
        if !once.is_empty() {
            let shown: Vec<&str> = once.iter().take(LISTED).map(String::as_str).collect();
            eval.notes.push(INFO.finding(
                format!(
                    "seen once: with {} the server {}{}, and not when the trigger run was made \
                     again ({}): not counted (a crash, a random choice)",
                    first.record.describe(),
                    shown.join("; "),
                    match once.len() > LISTED {
                        true => format!("; {} more", once.len() - LISTED),
                        false => String::new(),
                    },
                    self.triggers[1..]
                        .iter()
                        .map(|t| t.record.describe())
                        .collect::<Vec<_>>()
                        .join("; ")
                ),
                Vec::new(),
                None,
            ));
        }
        let files: Vec<&Vec<u8>> = first
            .seen
            .files
            .iter()
            .filter(|(k, _)| !self.base.files.contains_key(*k))
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
                    first.record.describe(),
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
        assert!(said[0].starts_with("only with the clock moved +400 days and a CI runner's"));
        assert!(said[1].contains("executed /usr/bin/curl"), "{said:?}");
        assert!(said[2].contains("contacted TCP drop.example"), "{said:?}");
        assert_eq!(e.findings[2].flows, vec![3]);
        // A file opened only then is a note; the same file by another date would not be.
        assert!(e.notes[0].summary.contains("/tmp/report-2028-01-10.log"));
    }

    const CURL: &str = "/usr/bin/curl";

    /// A capture run (the planted secret read, `node` executed), a trigger run with both
    /// triggers that also executes curl, and a repeat per `repeats` entry (what it changed,
    /// and whether it executed curl again).
    fn repeated(repeats: &[(Option<u32>, Option<&str>, bool)]) -> Evidence {
        let mut ev = Ev::new()
            .channels(&["syscalls", "mcp-transcript", "trigger-run"])
            .home("/home/u")
            .honeytoken(KEY)
            .open(KEY, 0, Phase::Startup)
            .exec(2, "/usr/bin/node", &["node"], Phase::Startup)
            .exec(3, CURL, &["curl"], Phase::Startup);
        for &(_, _, again) in repeats {
            ev = match again {
                true => ev.exec(3, CURL, &["curl"], Phase::Startup),
                false => ev.exec(2, "/usr/bin/node", &["node"], Phase::Startup),
            };
        }
        let mut ev = ev.run(NetworkMode::Capture, 1, 3).build();
        let record = |days: Option<u32>, env: Option<&str>| glassbox_model::TriggerRun {
            clock_offset_days: days,
            environment: env.map(str::to_string),
            ..Default::default()
        };
        let both = std::iter::once((Some(400), Some("ci")));
        for (i, (days, env)) in both
            .chain(repeats.iter().map(|&(d, e, _)| (d, e)))
            .enumerate()
        {
            let first = 3 + i as u64;
            ev.manifest.network.runs.push(glassbox_model::NetworkRun {
                mode: NetworkMode::Trigger,
                first_event: first,
                end_event: first + 1,
                trigger: Some(record(days, env)),
                ..Default::default()
            });
        }
        ev
    }

    fn said(e: &Evaluation) -> Vec<&str> {
        e.findings.iter().map(|f| f.summary.as_str()).collect()
    }

    #[test]
    fn a_finding_names_the_trigger_that_brought_it_out_alone() {
        let ev = repeated(&[(Some(400), None, true), (None, Some("ci"), false)]);
        assert_eq!(unrepeated(&ev.manifest, &ev.events, &ev.flows), 0);
        let e = evaluate(&ev);
        assert_eq!(
            said(&e),
            vec!["only with the clock moved +400 days: executed /usr/bin/curl"]
        );
        // The first run's event, and the repeat's.
        assert_eq!(e.findings[0].evidence, vec![3, 4]);
        let ev = repeated(&[(Some(400), None, true), (None, Some("ci"), true)]);
        let e = evaluate(&ev);
        assert_eq!(
            said(&e),
            vec![
                "only with the clock moved +400 days or a CI runner's environment (each alone): \
                 executed /usr/bin/curl"
            ]
        );
    }

    #[test]
    fn what_neither_trigger_alone_brought_out_is_both_together() {
        let ev = repeated(&[
            (Some(400), None, false),
            (None, Some("ci"), false),
            (Some(400), Some("ci"), true),
        ]);
        let e = evaluate(&ev);
        assert_eq!(
            said(&e),
            vec![
                "only with the clock moved +400 days and a CI runner's environment together: \
                 executed /usr/bin/curl"
            ]
        );
    }

    #[test]
    fn what_no_repeat_did_again_is_a_note_not_a_finding() {
        let singles = [(Some(400), None, false), (None, Some("ci"), false)];
        let ev = repeated(&singles);
        // After each trigger alone, the audit makes the trigger run once more.
        assert_eq!(unrepeated(&ev.manifest, &ev.events, &ev.flows), 1);
        let ev = repeated(&[singles[0], singles[1], (Some(400), Some("ci"), false)]);
        assert_eq!(unrepeated(&ev.manifest, &ev.events, &ev.flows), 1);
        let e = evaluate(&ev);
        assert!(e.findings.is_empty(), "{:?}", e.findings);
        let note = &e.notes[0].summary;
        assert!(
            note.starts_with("seen once: with the clock moved +400 days and a CI runner's")
                && note.contains("executed /usr/bin/curl"),
            "{note}"
        );
    }

    #[test]
    fn what_the_denied_run_did_too_is_no_triggers() {
        let mut ev = repeated(&[]);
        assert_eq!(unrepeated(&ev.manifest, &ev.events, &ev.flows), 1);
        // The trigger run's curl, as if it were the denied run's.
        ev.manifest.network.runs[1].mode = NetworkMode::Denied;
        ev.manifest.network.runs.push(glassbox_model::NetworkRun {
            mode: NetworkMode::Trigger,
            first_event: 4,
            end_event: 4,
            ..Default::default()
        });
        assert_eq!(unrepeated(&ev.manifest, &ev.events, &ev.flows), 0);
        assert!(evaluate(&ev).findings.is_empty());
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
