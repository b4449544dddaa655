//! What each phase of a run did to the sandbox's bounds: the sandbox's cgroup read as each
//! phase starts and once the run is over ([`glassbox_sandbox::Meter`]), the differences kept
//! for the phases that reached a bound (forks refused, the process limit reached, processes
//! killed out of memory, memory at its limit, a writable mount full, throttling at the CPU
//! limit) or left more processes running at their end than at their start
//! (`manifest.sandbox.usage`). Judging them is `resource-abuse`'s (`glassbox_checks`).

use glassbox_model::{NetworkMode, Phase, PhaseUsage};
use glassbox_sandbox::{Meter, Usage};
use std::sync::Mutex;

/// The channel a run with a reading of its usage observes (`manifest.recorder.channels`).
pub(crate) const CHANNEL: &str = "resource-usage";

/// Throttling shorter than this in a phase is not kept (a burst of start-up work).
const THROTTLED_KEPT_MS: u64 = 1_000;

/// The readings of one run, one as each phase starts.
pub(crate) struct Log {
    meter: Meter,
    samples: Mutex<Vec<(Phase, Usage)>>,
}

impl Log {
    /// Starts the log at `first`, the run's first phase, from nothing: the sandbox's cgroup
    /// is the run's own, made for it, so what it counted by now is that phase's (a fork bomb
    /// from the server's first instruction included).
    pub(crate) fn new(meter: Meter, first: &Phase) -> Log {
        Log {
            meter,
            samples: Mutex::new(vec![(first.clone(), Usage::default())]),
        }
    }

    /// A reading as `phase` starts (the end of the phase before it).
    pub(crate) fn phase(&self, phase: &Phase) {
        let now = self.meter.read();
        if let Ok(mut s) = self.samples.lock() {
            s.push((phase.clone(), now));
        }
    }

    /// The last reading (the run is over) and what each phase did, kept where it did
    /// something ([`phases`]).
    pub(crate) fn finish(self) -> Vec<PhaseUsage> {
        let end = self.meter.read();
        let samples = self.samples.into_inner().unwrap_or_default();
        phases(&samples, end, self.meter.limits().pids)
    }
}

/// What each phase did between its reading and the next one's (`end` after the last), given
/// the process limit `pids`: the phases that reached a bound or left processes running.
pub(crate) fn phases(samples: &[(Phase, Usage)], end: Usage, pids: Option<u64>) -> Vec<PhaseUsage> {
    let mut out = Vec::new();
    for (i, (phase, start)) in samples.iter().enumerate() {
        let stop = samples.get(i + 1).map_or(end, |(_, u)| *u);
        let d = stop.since(start);
        let peak_reached = pids.is_some_and(|p| stop.peak >= p && start.peak < p);
        let throttled_ms = d.throttled_ns / 1_000_000;
        let u = PhaseUsage {
            phase: phase.clone(),
            mode: NetworkMode::Capture,
            forks_refused: d.forks_refused,
            peak_processes: if peak_reached { stop.peak } else { 0 },
            oom_kills: d.oom_kills,
            memory_max: d.memory_max,
            throttled_ms: if throttled_ms >= THROTTLED_KEPT_MS {
                throttled_ms
            } else {
                0
            },
            full_mounts: stop.full.saturating_sub(start.full),
            processes_left: stop.processes.saturating_sub(start.processes),
        };
        let any = u.forks_refused
            + u.peak_processes
            + u.oom_kills
            + u.memory_max
            + u.throttled_ms
            + u.full_mounts
            + u.processes_left;
        if any > 0 {
            out.push(u);
        }
    }
    out
}

/// The processes still running in `sandbox` but its own, once the server has exited and
/// what it left was recorded a while longer: they outlived it.
pub(crate) fn outlived(sandbox: &glassbox_sandbox::Sandbox) -> Vec<String> {
    match sandbox.others_alive() {
        true => sandbox.remaining(),
        false => Vec::new(),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Each phase gets the difference of its reading and the next; only phases that did
    /// something are kept; the process limit counts where it was first reached.
    #[test]
    fn each_phase_gets_what_happened_between_its_reading_and_the_next() {
        let u = |processes, peak, forks_refused, oom_kills| Usage {
            processes,
            peak,
            forks_refused,
            oom_kills,
            ..Usage::default()
        };
        let samples = [
            (Phase::Startup, u(0, 0, 0, 0)),
            (Phase::call("quiet", 1), u(2, 2, 0, 0)),
            (Phase::call("bomb", 1), u(2, 2, 0, 0)),
            (Phase::call("after", 1), u(3, 512, 40, 1)),
            (Phase::Shutdown, u(3, 512, 40, 1)),
        ];
        let got = phases(&samples, u(0, 512, 40, 1), Some(512));
        let names: Vec<String> = got.iter().map(|p| p.phase.to_string()).collect();
        assert_eq!(names, ["startup", "call:bomb"], "{got:?}");
        assert_eq!(got[0].processes_left, 2);
        let bomb = &got[1];
        assert_eq!(
            (
                bomb.forks_refused,
                bomb.peak_processes,
                bomb.oom_kills,
                bomb.processes_left
            ),
            (40, 512, 1, 1)
        );
    }
}
