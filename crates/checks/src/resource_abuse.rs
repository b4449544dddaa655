//! `resource-abuse`: a server that reaches the sandbox's bounds, or leaves processes running
//! once it has exited.
//!
//! The sandbox bounds every run (processes, memory, writable space, CPU); a server that
//! reaches a bound was stopped by it, and the audit says where. Read from the manifest:
//!
//! - **By phase** (`manifest.sandbox.usage`, where the backend reads the sandbox's cgroup as
//!   each phase starts: the namespace sandbox, channel `resource-usage`): forks refused at the
//!   process limit, or the limit reached; processes killed out of memory; a writable mount
//!   filled: each a finding naming the bound and the phase (`call:compress`, `startup`). Memory
//!   at its limit and reclaimed with nothing killed is a note (page cache counts against the
//!   limit: a server that reads many files reaches it harmlessly), as is time throttled at the
//!   CPU limit (heavy work is not abuse) and processes a call left running past its end (a
//!   browser or a language server kept for the session does so).
//! - **By run** (`manifest.sandbox.limits_reached`, read once the run is over), where the
//!   phases were not read (a microVM's cgroup is in its guest), or for a run whose phases say
//!   nothing of a bound its end-of-run reading reached: the same findings, naming the run.
//! - **What outlived the server** (`manifest.sandbox.outlived`): processes still running once
//!   the server exited and what it left was recorded a while longer (a daemon, a `sleep`
//!   detached from it), each a finding: they were killed with the sandbox, and would have run
//!   on a user's machine.
//!
//! Version 2: a bound enforced without a cgroup (an rlimit: glassbox without root or a
//! delegated cgroup) is one whose reaching nothing counts, so without a finding the check says
//! `not-observed`, naming it, where version 1 said `pass`.
//!
//! Version 3 judges as version 2 did; the trigger run (`glassbox audit --triggers`) is a server
//! run like the capture and denied runs (its source `net.rs` orders it after them).
//!
//! The package's install is the installer's: what it reached is a note. Its channel is the
//! system-call record's: a server glassbox ran in its sandbox, whose bounds it read (a remote
//! server, run elsewhere, was not seen: `not-observed`).

use crate::text;
use crate::{Channel, CheckInfo, Evaluation, Evaluator};
use glassbox_model::{Event, Manifest, NetworkMode, Phase, PhaseUsage, Severity};

pub(crate) const INFO: CheckInfo = CheckInfo {
    id: "resource-abuse",
    version: 3,
    claim: "stays within the sandbox's bounds and leaves nothing running",
    severity: Severity::Medium,
    channels: &[Channel::Syscalls],
    also_reads: &[],
    file_calls: false,
    accuses: "",
    sources: &["resource_abuse.rs", "text.rs", "net.rs", "outcome.rs"],
};

/// The channel of per-phase readings (`manifest.recorder.channels`).
const BY_PHASE: &str = "resource-usage";

pub(crate) struct State {
    /// The bounds whose reaching the run could not read (version 2).
    unread: Vec<String>,
}

pub(crate) fn start(c: &crate::Context<'_>) -> Box<dyn Evaluator> {
    Box::new(State {
        unread: unread_bounds(c.manifest),
    })
}

impl Evaluator for State {
    fn event(&mut self, _: &Event) {}

    fn finish_with(self: Box<Self>, ctx: &crate::Context<'_>) -> Evaluation {
        judge(ctx.manifest)
    }

    fn unread(&self) -> Vec<String> {
        self.unread.clone()
    }
}

/// The bounds enforced without a cgroup (`manifest.sandbox.limits`: `512 via RLIMIT_NPROC`,
/// `1 GiB per process via RLIMIT_DATA`): a process refused by an rlimit is told so itself and
/// nothing counts it, so whether the server reached them is not known. Version 1 said `pass`
/// over them.
fn unread_bounds(m: &Manifest) -> Vec<String> {
    ["pids", "memory"]
        .into_iter()
        .filter_map(|key| {
            let how = m.sandbox.limits.get(key)?;
            let counted = how.contains(" via cgroup") || how == "not limited";
            (!counted).then(|| {
                format!(
                    "whether the runs reached the {} bound ({}: no cgroup counts what it refuses)",
                    if key == "pids" { "process" } else { "memory" },
                    text::escape(how)
                )
            })
        })
        .collect()
}

/// The bound `key` of `manifest.sandbox.limits` as its value alone (`512`, `1 GiB`), in
/// parentheses; nothing when the manifest does not say.
fn bound(m: &Manifest, key: &str) -> String {
    m.sandbox
        .limits
        .get(key)
        .and_then(|v| v.split(" via ").next())
        .filter(|v| !v.is_empty())
        .map(|v| format!(" ({})", text::escape(v)))
        .unwrap_or_default()
}

fn judge(m: &Manifest) -> Evaluation {
    let mut eval = Evaluation::default();
    let by_phase = m.recorder.channels.iter().any(|c| c == BY_PHASE);
    // Runs whose phases said a bound was reached (their end-of-run sentences add nothing).
    let mut said: Vec<NetworkMode> = Vec::new();
    if by_phase {
        for u in &m.sandbox.usage {
            if phase_findings(m, u, &mut eval) {
                said.push(u.mode);
            }
        }
    }
    for r in &m.sandbox.limits_reached {
        let (run, what) = r.split_once(" run: ").unwrap_or(("", r.as_str()));
        if what.contains("could not be removed") {
            continue;
        }
        let reached_by_phase = said.iter().any(|mode| mode.name() == run);
        let sentence = format!("the {run} run: {}", text::escape(what));
        // Our own sentences (`glassbox_sandbox`): CPU throttling and reclaimed memory are
        // notes, as by phase; the install is the installer's.
        let note =
            run == "install" || what.starts_with("cpu limit") || what.contains("memory reclaimed");
        if note {
            eval.notes.push(INFO.finding(
                format!("{sentence} (not abuse by itself)"),
                vec![],
                None,
            ));
        } else if !reached_by_phase {
            let when = match by_phase {
                true => "in no phase its readings covered",
                false => {
                    "which phase is not known: this backend reads its bounds once the run is over"
                }
            };
            eval.findings
                .push(INFO.finding(format!("{sentence} ({when})"), vec![], None));
        }
    }
    for o in &m.sandbox.outlived {
        let (run, what) = o.split_once(" run: ").unwrap_or(("", o.as_str()));
        eval.findings.push(INFO.finding(
            format!(
                "still running after the server exited in the {run} run: {} (killed with the \
                 sandbox; on a user's machine it would have run on)",
                text::escape(what)
            ),
            vec![],
            None,
        ));
    }
    eval
}

/// The findings and notes of one phase's usage; whether it reached a bound (a finding).
fn phase_findings(m: &Manifest, u: &PhaseUsage, eval: &mut Evaluation) -> bool {
    let during = format!("{} of the {} run", text::phase(&u.phase), u.mode.name());
    let mut findings = Vec::new();
    let mut notes = Vec::new();
    if u.forks_refused > 0 || u.peak_processes > 0 {
        let how = match (u.forks_refused, u.peak_processes) {
            (0, peak) => format!("{peak} processes at once"),
            (n, _) => format!("{n} forks refused"),
        };
        findings.push(format!(
            "reached the process limit{} during {during}: {how}",
            bound(m, "pids")
        ));
    }
    if u.oom_kills > 0 {
        findings.push(format!(
            "reached the memory limit{} during {during}: {} killed out of memory",
            bound(m, "memory"),
            crate::net::count(u.oom_kills, "process", "processes")
        ));
    } else if u.memory_max > 0 {
        notes.push(format!(
            "memory reached its limit{} during {during} and was reclaimed, nothing killed \
             (page cache counts against it)",
            bound(m, "memory")
        ));
    }
    if u.full_mounts > 0 {
        findings.push(format!(
            "filled {} of the sandbox (the disk limit{}) during {during}",
            crate::net::count(u.full_mounts, "writable mount", "writable mounts"),
            bound(m, "disk")
        ));
    }
    if u.throttled_ms > 0 {
        notes.push(format!(
            "ran at the CPU limit{} during {during}: throttled for {:.1} s",
            bound(m, "cpu"),
            u.throttled_ms as f64 / 1000.0
        ));
    }
    if u.processes_left > 0 && u.phase.exercised().is_some() {
        notes.push(format!(
            "{during} left {} running past its end",
            crate::net::count(u.processes_left, "process", "processes")
        ));
    }
    // The install is the installer's.
    let install = u.phase == Phase::Install || u.mode == NetworkMode::Install;
    let reached = !findings.is_empty() && !install;
    for f in findings {
        match install {
            true => eval.notes.push(INFO.finding(
                format!("the installer {f}"),
                vec![],
                Some(u.phase.clone()),
            )),
            false => eval
                .findings
                .push(INFO.finding(f, vec![], Some(u.phase.clone()))),
        }
    }
    for n in notes {
        eval.notes
            .push(INFO.finding(n, vec![], Some(u.phase.clone())));
    }
    reached
}

#[cfg(test)]
pub(crate) fn evaluate(ev: &glassbox_model::Evidence) -> Evaluation {
    crate::evaluate_one(start, ev)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::Ev;

    fn usage(phase: Phase) -> PhaseUsage {
        PhaseUsage {
            phase,
            mode: NetworkMode::Capture,
            forks_refused: 0,
            peak_processes: 0,
            oom_kills: 0,
            memory_max: 0,
            throttled_ms: 0,
            full_mounts: 0,
            processes_left: 0,
        }
    }

    fn summaries(v: &[glassbox_model::Finding]) -> Vec<String> {
        v.iter().map(|f| f.summary.clone()).collect()
    }

    /// Bounds reached by phase are findings naming the bound and the phase; reclaimed memory,
    /// throttling and processes a call kept are notes; what outlived the server is a finding.
    #[test]
    fn a_bound_reached_in_a_phase_is_a_finding_that_names_it() {
        let mut ev = Ev::new().channels(&["syscalls", BY_PHASE]).build();
        let sb = &mut ev.manifest.sandbox;
        sb.limits
            .insert("pids".into(), "512 via cgroup v2 pids".into());
        sb.limits
            .insert("memory".into(), "1 GiB via cgroup v2 memory".into());
        let bomb = PhaseUsage {
            forks_refused: 40,
            peak_processes: 512,
            ..usage(Phase::call("compress", 1))
        };
        let oom = PhaseUsage {
            oom_kills: 1,
            ..usage(Phase::Startup)
        };
        let cache = PhaseUsage {
            memory_max: 3,
            throttled_ms: 2_500,
            processes_left: 1,
            ..usage(Phase::call("index", 1))
        };
        sb.usage = vec![bomb, oom, cache];
        sb.limits_reached = vec!["capture run: pids limit (512) reached: 40 forks refused".into()];
        sb.outlived = vec!["capture run: sleep 3600".into()];
        let eval = evaluate(&ev);
        assert_eq!(
            summaries(&eval.findings),
            [
                "reached the process limit (512) during call:compress of the capture run: 40 forks refused",
                "reached the memory limit (1 GiB) during startup of the capture run: 1 process killed out of memory",
                "still running after the server exited in the capture run: sleep 3600 (killed with the sandbox; on a user's machine it would have run on)",
            ]
        );
        let notes = summaries(&eval.notes).join("\n");
        for n in [
            "memory reached its limit (1 GiB) during call:index",
            "ran at the CPU limit during call:index of the capture run: throttled for 2.5 s",
            "call:index of the capture run left 1 process running past its end",
        ] {
            assert!(notes.contains(n), "{n}: {notes}");
        }
    }

    /// Where phases were not read (a microVM), the run's end-of-run sentences are judged,
    /// naming the run; the install's are notes; a quiet run passes; a remote server was not
    /// seen.
    #[test]
    fn without_phases_the_run_is_named_and_nothing_reached_passes() {
        let mut ev = Ev::new().channels(&["syscalls"]).build();
        ev.manifest.sandbox.limits_reached = vec![
            "install run: memory limit (1 GiB) reached: 1 process killed out of memory".into(),
            "capture run: /tmp is full (512 MiB tmpfs)".into(),
            "capture run: cpu limit (1 CPU) reached: throttled for 3.0 s".into(),
        ];
        let eval = evaluate(&ev);
        assert_eq!(
            summaries(&eval.findings),
            ["the capture run: /tmp is full (512 MiB tmpfs) (which phase is not known: this backend reads its bounds once the run is over)"]
        );
        assert_eq!(eval.notes.len(), 2, "{:?}", summaries(&eval.notes));
        let quiet = Ev::new().channels(&["syscalls", BY_PHASE]).build();
        let r = crate::evaluate_all(&quiet, &crate::Proofs::all_proven());
        let r = r.iter().find(|r| r.id == INFO.id).unwrap();
        assert_eq!(r.outcome, glassbox_model::Outcome::Pass);
        // Bounds an rlimit enforced: whether they were reached is not known.
        let mut rlimits = Ev::new().channels(&["syscalls", BY_PHASE]).build();
        rlimits.manifest.sandbox.limits.insert(
            "pids".into(),
            "512 via RLIMIT_NPROC (no writable cgroup here)".into(),
        );
        let r = crate::evaluate_all(&rlimits, &crate::Proofs::all_proven());
        let r = r.iter().find(|r| r.id == INFO.id).unwrap();
        assert_eq!(r.outcome, glassbox_model::Outcome::NotObserved);
        assert!(
            r.reason
                .as_deref()
                .unwrap()
                .contains("the process bound (512 via RLIMIT_NPROC"),
            "{r:?}"
        );
        let remote = Ev::new().channels(&["mcp-transcript"]).build();
        let r = crate::evaluate_all(&remote, &crate::Proofs::all_proven());
        let r = r.iter().find(|r| r.id == INFO.id).unwrap();
        assert_eq!(r.outcome, glassbox_model::Outcome::NotObserved);
    }
}
