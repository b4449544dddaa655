//! The time a bound on a guest counts: the wall time in which its QEMU was not kept waiting
//! for a CPU.
//!
//! Under TCG a guest is QEMU's threads emulating it. On a loaded host those threads wait in
//! the kernel's run queue and the guest runs slower by as much: a guest whose boot takes 5 s
//! alone takes 30 s beside a compilation. A bound in wall time then "loses" a guest that was
//! only starved, and whether a run is lost depends on what else the machine did. A bound in
//! [`GuestClock`] time does not: each interval counts its wall time less the longest time any
//! of QEMU's threads spent runnable but waiting for a CPU in it (the kernel's
//! `/proc/PID/task/TID/schedstat`, second field, nanoseconds). A guest that hangs still
//! spends its bound: an idle guest's threads sleep (they do not wait for a CPU), a spinning
//! one gets its share of the CPUs. A host that keeps the guest waiting without end is bounded
//! too: [`Bound`] gives up after [`WALL_FACTOR`] times its bound in wall time.
//!
//! Written here because no crate reads a process's run-queue delay (`procfs` parses
//! `/proc/PID/schedstat` but not per thread, and would be the only user of a large crate).
//! Where schedstat cannot be read (a kernel without `CONFIG_SCHED_INFO`), every interval
//! counts whole: the bound is wall time, as before.

use std::collections::HashMap;
use std::time::{Duration, Instant};

/// A bound in guest time gives up anyway after this many times itself in wall time.
pub const WALL_FACTOR: u32 = 10;

/// How long a waiter blocks between two readings of the clock.
pub const TICK: Duration = Duration::from_millis(500);

/// The time counted for a guest since [`GuestClock::start`]: wall time less what its QEMU
/// waited for a CPU (module docs).
#[derive(Debug)]
pub struct GuestClock {
    pid: Option<u32>,
    started: Instant,
    at: Instant,
    /// Each thread's time on a CPU and run-queue delay at the last reading (ns).
    delays: HashMap<u32, Stat>,
    counted: Duration,
    /// QEMU's threads' time on a CPU since the start, all together.
    ran: Duration,
    /// Whether schedstat could be read at the last reading.
    readable: bool,
}

impl GuestClock {
    /// A clock for QEMU's process `pid`, at zero now (`None`: wall time).
    pub fn start(pid: Option<u32>) -> GuestClock {
        let (delays, readable) = match pid {
            Some(p) => match schedstats(p) {
                Some(d) => (d, true),
                None => (HashMap::new(), false),
            },
            None => (HashMap::new(), false),
        };
        let now = Instant::now();
        GuestClock {
            pid,
            started: now,
            at: now,
            delays,
            counted: Duration::ZERO,
            ran: Duration::ZERO,
            readable,
        }
    }

    /// Reads the clock: the time counted since it started.
    pub fn counted(&mut self) -> Duration {
        let now = Instant::now();
        let wall = now - self.at;
        let waited = match self.pid.filter(|_| self.readable).and_then(schedstats) {
            Some(delays) => {
                let waited = longest_wait(&self.delays, &delays);
                self.ran += time_on_cpu(&self.delays, &delays);
                self.delays = delays;
                waited
            }
            // Gone (QEMU ended) or unreadable: the interval counts whole.
            None => Duration::ZERO,
        };
        self.counted += wall.saturating_sub(waited);
        self.at = now;
        self.counted
    }

    /// The wall time since the clock started.
    pub fn wall(&self) -> Duration {
        self.started.elapsed()
    }

    /// The wall time not counted (QEMU waited for a CPU), as of the last reading.
    pub fn starved(&self) -> Duration {
        (self.at - self.started).saturating_sub(self.counted)
    }

    /// The time QEMU's threads ran on a CPU since the clock started, all together, as of the
    /// last reading: about the guest's vCPUs at work (a guest that spins runs about a CPU per
    /// vCPU; one that waits for an interrupt runs almost nothing).
    pub fn ran(&self) -> Duration {
        self.ran
    }

    /// Whether the clock reads QEMU's waits (false: it is wall time).
    pub fn reads_waits(&self) -> bool {
        self.readable
    }
}

/// A thread's schedstat: its time on a CPU and its run-queue delay (ns).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
struct Stat {
    on_cpu: u64,
    delay: u64,
}

/// Each thread's schedstat counters grown between two readings; a thread new in `now` grew
/// by all it says (a counter that went back, a reused thread id, grew by nothing).
fn grown<'a>(
    before: &'a HashMap<u32, Stat>,
    now: &'a HashMap<u32, Stat>,
) -> impl Iterator<Item = Stat> + 'a {
    now.iter().map(|(tid, s)| {
        let b = before.get(tid).copied().unwrap_or_default();
        Stat {
            on_cpu: s.on_cpu.saturating_sub(b.on_cpu),
            delay: s.delay.saturating_sub(b.delay),
        }
    })
}

/// The longest run-queue wait of any thread between two readings.
fn longest_wait(before: &HashMap<u32, Stat>, now: &HashMap<u32, Stat>) -> Duration {
    Duration::from_nanos(grown(before, now).map(|g| g.delay).max().unwrap_or(0))
}

/// The time all threads ran on a CPU between two readings.
fn time_on_cpu(before: &HashMap<u32, Stat>, now: &HashMap<u32, Stat>) -> Duration {
    Duration::from_nanos(grown(before, now).map(|g| g.on_cpu).sum())
}

/// Each thread of `pid` with its schedstat; `None` when the process or its schedstat cannot be
/// read.
fn schedstats(pid: u32) -> Option<HashMap<u32, Stat>> {
    let mut out = HashMap::new();
    for entry in std::fs::read_dir(format!("/proc/{pid}/task")).ok()? {
        let Ok(entry) = entry else { continue };
        let Some(tid) = entry.file_name().to_str().and_then(|s| s.parse().ok()) else {
            continue;
        };
        // A thread that ended between the listing and the read is skipped.
        if let Some(d) = std::fs::read_to_string(entry.path().join("schedstat"))
            .ok()
            .and_then(|s| parse_schedstat(&s))
        {
            out.insert(tid, d);
        }
    }
    (!out.is_empty()).then_some(out)
}

/// A schedstat line: `on-cpu-ns run-delay-ns timeslices`.
fn parse_schedstat(line: &str) -> Option<Stat> {
    let mut f = line.split_whitespace();
    Some(Stat {
        on_cpu: f.next()?.parse().ok()?,
        delay: f.next()?.parse().ok()?,
    })
}

/// A bound counted on a [`GuestClock`].
#[derive(Debug)]
pub struct Bound {
    clock: GuestClock,
    limit: Duration,
}

impl Bound {
    /// A bound of `limit` of guest time for QEMU's process `pid`, starting now.
    pub fn new(pid: Option<u32>, limit: Duration) -> Bound {
        Bound {
            clock: GuestClock::start(pid),
            limit,
        }
    }

    /// How long to block before reading again (at most [`TICK`]); `None` once the bound is
    /// spent, in guest time or in [`WALL_FACTOR`] times it of wall time.
    pub fn next_wait(&mut self) -> Option<Duration> {
        let counted = self.clock.counted();
        if counted >= self.limit || self.clock.wall() >= self.limit * WALL_FACTOR {
            return None;
        }
        Some((self.limit - counted).min(TICK))
    }

    /// How the time was spent, for a message ([`starved_note`]).
    pub fn starved_note(&self) -> String {
        starved_note(&self.clock)
    }
}

/// The words of [`Bound::starved_note`] for any clock: how QEMU spent the time, read from the
/// kernel (empty when it could not be read): ` (its QEMU ran N s on a CPU in that time)`, and
/// when it was kept waiting, `; it took N s more of wall time, in which it waited for a CPU`.
/// A guest that hung spinning ran about a CPU per vCPU; one that waits for an interrupt that
/// never comes ran almost nothing.
pub fn starved_note(clock: &GuestClock) -> String {
    if !clock.reads_waits() {
        return String::new();
    }
    let mut note = format!(
        " (its QEMU ran {:.1} s on a CPU in that time",
        clock.ran().as_secs_f64()
    );
    let s = clock.starved();
    if s >= Duration::from_secs(1) {
        note.push_str(&format!(
            "; it took {} s more of wall time, in which it waited for a CPU",
            s.as_secs()
        ));
    }
    note.push(')');
    note
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn schedstat_is_read_as_the_kernel_writes_it() {
        assert_eq!(
            parse_schedstat("22822363426 13892538141 17337\n"),
            Some(Stat {
                on_cpu: 22822363426,
                delay: 13892538141
            })
        );
        assert_eq!(parse_schedstat("garbage"), None);
        assert_eq!(parse_schedstat(""), None);
    }

    #[test]
    fn the_longest_wait_of_a_thread_counts_and_a_new_thread_waited_all_it_says() {
        let st = |on_cpu, delay| Stat { on_cpu, delay };
        let before = HashMap::from([(1, st(10, 100)), (2, st(20, 1_000))]);
        let now = HashMap::from([(1, st(15, 600)), (2, st(30, 1_200)), (3, st(7, 300))]);
        assert_eq!(longest_wait(&before, &now), Duration::from_nanos(500));
        // Time on a CPU adds up over threads, a new one's whole.
        assert_eq!(time_on_cpu(&before, &now), Duration::from_nanos(5 + 10 + 7));
        // A counter that went back (a reused thread id) counts nothing, not a wrap.
        let now = HashMap::from([(1, st(0, 50))]);
        assert_eq!(longest_wait(&before, &now), Duration::ZERO);
        assert_eq!(time_on_cpu(&before, &now), Duration::ZERO);
    }

    /// A process kept waiting for a CPU (more runnable threads than CPUs, all spinning) is
    /// counted less than wall time; one that sleeps is counted its wall time. The host's own
    /// processes, not timings: the assertion is only that the clock reads the kernel's waits
    /// where they exist.
    #[test]
    fn a_sleeping_process_counts_its_wall_time() {
        let mut child = std::process::Command::new("sleep")
            .arg("5")
            .spawn()
            .unwrap();
        // Past its exec: from here on it only sleeps.
        std::thread::sleep(Duration::from_millis(200));
        let mut clock = GuestClock::start(Some(child.id()));
        std::thread::sleep(Duration::from_millis(300));
        let counted = clock.counted();
        let wall = clock.wall();
        let _ = child.kill();
        let _ = child.wait();
        assert!(clock.reads_waits(), "schedstat is readable on this kernel");
        // A sleeping process never waits for a CPU: all the time between the two readings
        // counts.
        assert!(
            counted >= Duration::from_millis(300),
            "{counted:?} of {wall:?}"
        );
        assert_eq!(clock.starved(), Duration::ZERO);
        // It ran (almost) nothing, and the note says so.
        assert!(
            starved_note(&clock).starts_with(" (its QEMU ran 0.0 s on a CPU"),
            "{}",
            starved_note(&clock)
        );
    }

    /// The positive control: more spinning threads than CPUs wait for one, and the clock
    /// counts less than wall time by as much (the test process is the "QEMU").
    #[test]
    fn a_process_kept_waiting_for_a_cpu_counts_less_than_its_wall_time() {
        let cpus = std::thread::available_parallelism().map_or(2, |n| n.get());
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let mut clock = GuestClock::start(Some(std::process::id()));
        let spinners: Vec<_> = (0..3 * cpus)
            .map(|_| {
                let stop = stop.clone();
                std::thread::spawn(move || {
                    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
                        std::hint::spin_loop();
                    }
                })
            })
            .collect();
        std::thread::sleep(Duration::from_secs(3));
        let counted = clock.counted();
        stop.store(true, std::sync::atomic::Ordering::Relaxed);
        for s in spinners {
            let _ = s.join();
        }
        // Three runnable threads per CPU: each waits about two thirds of the time.
        assert!(clock.starved() > Duration::from_secs(1), "{counted:?}");
        assert!(counted < clock.wall(), "{counted:?}");
        // Every CPU was busy with the spinners for the 3 s.
        assert!(clock.ran() > Duration::from_secs(2), "{:?}", clock.ran());
        assert!(starved_note(&clock).contains("waited for a CPU"));
    }

    #[test]
    fn a_bound_without_a_process_is_wall_time_and_ends() {
        let mut b = Bound::new(None, Duration::from_millis(50));
        let mut waits = 0;
        while let Some(w) = b.next_wait() {
            assert!(w <= TICK);
            std::thread::sleep(w);
            waits += 1;
        }
        assert!(waits >= 1);
        assert!(b.clock.counted() >= Duration::from_millis(50));
        assert_eq!(b.starved_note(), "");
    }
}
