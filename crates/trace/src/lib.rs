//! The syscall recorder of glassbox.
//!
//! # Mechanism
//!
//! Two channels, one thread:
//!
//! - **seccomp user notification** for exec (`execve`, `execveat`), `connect`, `sendto` (with a
//!   destination: the filter skips NULL), `sendmsg`, `sendmmsg`, `bind` and `socket`. The
//!   server runs under a seccomp filter (built by `glassbox-sandbox`) that routes these calls to
//!   a listener held by glassbox. For each notification the recorder reads the arguments from
//!   the caller's memory (`process_vm_readv`), resolves relative paths (`/proc/PID/cwd`,
//!   `/proc/PID/fd/N`), checks that the notification is still valid, and lets the call continue.
//!   The caller waits meanwhile, so an exec is seen before the new program runs.
//! - **eBPF** for the open family (`open`, `openat`, `openat2`, `creat`) and the stat family
//!   (`stat`, `lstat`, `newfstatat`, `statx`, `access`, `faccessat`, `faccessat2`, `readlink`,
//!   `readlinkat`; recorded under home): a program on the `sys_exit` raw tracepoint, filtered to
//!   the sandbox's pid namespace, copies each call's arguments, path and **result** into a ring
//!   buffer that the recorder drains every few milliseconds ([`ebpf`]). The caller never waits.
//!   It needs `CAP_BPF` and `CAP_PERFMON` (root); elsewhere these calls go through user
//!   notification too (without results), and the manifest says which mechanism ran.
//!
//! ## Why
//!
//! Measured side by side on benchmark (a) (python3 opening and closing a file 200,000 times;
//! CPU time of recorder and traced tree together, untraced = 1.0x; `bench/mechanism/mech.c`
//! for the first four rows, `bench/trace_overhead.py` for the rest, on this project's
//! 2-core virtual machine):
//!
//! | mechanism | CPU |
//! |---|---|
//! | seccomp `RET_TRACE` + ptrace, entry and exit stops (to read results) | 8.1x |
//! | seccomp `RET_TRACE` + ptrace, entry stop only | 5.4x |
//! | seccomp user notification | 5.4x |
//! | seccomp user notification, synchronous wake-up | 3.9x |
//! | `strace -f --seccomp-bpf` on the same calls | 10x |
//! | `strace -f` | 19x |
//! | glassbox: user notification + eBPF for files (whole run, fresh secrets included) | 1.9x |
//!
//! User notification beats ptrace (one round trip per call instead of two stops, no
//! stop bookkeeping per thread and fork, nothing the server can detect or detach), but any
//! mechanism that stops the caller costs two context switches per call, which on a virtual
//! machine is most of the price: the open family, by far the most frequent, had to move to a
//! channel that does not stop the caller. A program on `sys_exit` rather than `sys_enter`
//! because `bpf_probe_read_user_str` cannot fault a page in: at the exit the kernel has read the
//! path, so its page is present (on `sys_enter` paths in untouched pages came back empty), and
//! the result is there.
//!
//! ## Limits
//!
//! Pointer arguments are read from the caller's memory, and another thread of the caller can
//! rewrite them around the kernel's own read (TOCTOU); claims that matter are to be
//! cross-checked on kernel-reported channels (DESIGN.md, Tracer). eBPF records are processed a
//! few milliseconds after the call: a relative path of a process that has exited by then is
//! resolved against its working directory at its exec, and shown with a `?` base when that is
//! unknown too. A call still blocked when the server is killed is not reported by eBPF.
#![deny(missing_docs)]

mod decode;
pub mod ebpf;
mod fanotify;
mod notify;
mod procinfo;

pub use decode::rules;
pub use fanotify::{Access, AccessKind, HoneytokenError, HoneytokenWatch, OpenGate, PidNamespace};
pub use notify::{FileChannel, Recorder, RecorderStats, Sink};

use glassbox_model::Phase;
use std::sync::Mutex;

/// `CLOCK_MONOTONIC` in nanoseconds: the clock eBPF's `bpf_ktime_get_ns` reads.
pub(crate) fn monotonic_ns() -> u64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: ts is a valid out-pointer.
    unsafe { libc::clock_gettime(libc::CLOCK_MONOTONIC, &mut ts) };
    ts.tv_sec as u64 * 1_000_000_000 + ts.tv_nsec as u64
}

/// The run's clock and MCP phases, shared by the recorder and the MCP client.
#[derive(Debug)]
pub struct Clock {
    start: u64,
    /// Every phase with the run time it began at, in order.
    phases: Mutex<Vec<(u64, Phase)>>,
}

impl Clock {
    /// A clock starting now, in phase `startup`.
    pub fn new() -> Clock {
        Clock {
            start: monotonic_ns(),
            phases: Mutex::new(vec![(0, Phase::Startup)]),
        }
    }

    /// Nanoseconds since the start of the run.
    pub fn now_ns(&self) -> u64 {
        monotonic_ns().saturating_sub(self.start)
    }

    /// Run time of a kernel timestamp (`CLOCK_MONOTONIC` ns).
    pub(crate) fn since_start(&self, ktime: u64) -> u64 {
        ktime.saturating_sub(self.start)
    }

    /// The current phase.
    pub fn phase(&self) -> Phase {
        self.phases
            .lock()
            .ok()
            .and_then(|p| p.last().map(|(_, ph)| ph.clone()))
            .unwrap_or(Phase::Startup)
    }

    /// The phase at run time `t_ns` (for events reported after the fact).
    pub fn phase_at(&self, t_ns: u64) -> Phase {
        let Ok(p) = self.phases.lock() else {
            return Phase::Startup;
        };
        let i = p.partition_point(|(start, _)| *start <= t_ns);
        p[i.saturating_sub(1)].1.clone()
    }

    /// Enters a new phase.
    pub fn set_phase(&self, phase: Phase) {
        let now = self.now_ns();
        if let Ok(mut p) = self.phases.lock() {
            p.push((now, phase));
        }
    }
}

impl Default for Clock {
    fn default() -> Self {
        Clock::new()
    }
}

/// Whether the eBPF file channel can be used here (needs `CAP_BPF` and `CAP_PERFMON`).
pub fn file_channel_available() -> std::io::Result<()> {
    ebpf::probe()
}
