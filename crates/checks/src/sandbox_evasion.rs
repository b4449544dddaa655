//! `sandbox-evasion`: attempts to get around the sandbox or the recorder, and what got past
//! the recorder.
//!
//! Three kinds of finding:
//!
//! - **Refused calls.** The sandbox's static filter refuses the calls that would let a program
//!   act unseen (io_uring, a foreign syscall ABI, `ptrace`, `process_vm_*`, `bpf`, a second
//!   seccomp listener, new namespaces, the mount family, raw sockets...); each refusal is a
//!   `refused` event, and each is flagged, grouped by call. One is not: `clone3`, which every
//!   C library tries first when it starts a thread or a process and which is refused only so
//!   that `clone`'s flags can be inspected; its refusals are listed as a note. Nor is a
//!   runtime's probe (version 7): `io_uring_setup` refused, after which every process that
//!   tried it carried on with ordinary recorded calls (libuv tries it when Node starts, and
//!   does without); one that tried it and did nothing more is flagged.
//! - **Programs run from memory.** An exec whose image is a memfd (`/memfd:…`) or a deleted
//!   file (`… (deleted)`) runs code that is on no file system: nothing of it can be looked at
//!   afterwards. Seen in the exec's path, or in the image the kernel reports once the exec is
//!   through (`image` events, `/proc/PID/exe`).
//! - **Another program than the one the recorder was shown.** The kernel's image differs from
//!   what the recorded exec's path resolved to (symlinks followed, a script's interpreter):
//!   the path was rewritten after the recorder read it.
//! - **Planted secrets the recorder was not shown.** The kernel reports every open and read
//!   of a planted file (or opendir of its folder) with the process that did it (`honeytoken`
//!   events, fanotify); a process the kernel saw open one, with no recorded `open` or `exec`
//!   naming that path, passed the recorder another path than the one the kernel opened (an
//!   argument rewritten by a racing thread) or went around it. The kernel merges repeated
//!   accesses: this is decided per process and path, not per call.
//! - **Traffic the recorder did not see**, below.
//!
//! Every packet the server sends reaches the edge, whichever way it was sent; the recorder
//! sees the calls that send with a destination (`connect`, `sendto`, `sendmsg`, `sendmmsg`),
//! and the audit matches them with the flows they caused (`Flow::events`). A flow of either run
//! with no matched event is traffic the recorder did not see: sent by a way around it (io_uring,
//! a raw socket written without a destination, a process outside the recorder's reach), or
//! by a gap in it. Either way the syscall record is not the whole story, and the checks that
//! rely on it may have missed something. Every such flow is a finding (Unix canary sockets
//! aside: no IP packet is involved).
//!
//! Version 8 judges as version 7 did: its source `net.rs` names synthetic addresses per run
//! now, for `unexplained-egress`.
//!
//! Version 10 judges as version 9 did, but says `not-observed`, never `pass`, where the run lost
//! calls the recorder should have seen or overflows of the kernel's report of planted-secret accesses (`manifest.recorder.lost`: the rule is
//! `outcome.rs`'s, which its lock now covers).
//!
//! Version 11 judges as version 10 did; it reads the open family, so records of it the eBPF
//! channel lost blind it as before (`outcome.rs` now tells those from other losses).
//!
//! Version 12 lists a refused netlink socket of the kernel's device events (a udev monitor,
//! which a browser opens) as a note, apart from the other refused sockets, which it flags as
//! before.

use crate::net;
use crate::text::{self, Groups};
use crate::{Channel, CheckInfo, Evaluation, Evaluator};
use glassbox_model::{Event, EventKind, FlowProtocol, NetworkMode, Severity};

pub(crate) const INFO: CheckInfo = CheckInfo {
    id: "sandbox-evasion",
    version: 12,
    claim: "nothing escaped the recorder",
    severity: Severity::High,
    channels: &[Channel::Syscalls, Channel::PacketEdge],
    also_reads: &[Channel::HoneytokenGroundTruth],
    file_calls: true,
    accuses: "",
    sources: &[
        "sandbox_evasion.rs",
        "links.rs",
        "net.rs",
        "text.rs",
        "outcome.rs",
    ],
};

/// Flows listed one by one; the rest are counted in one line.
const LISTED: usize = 1000;

/// The check's state over one run: the flows' findings, then refusals and execs by event.
pub(crate) struct State {
    eval: Evaluation,
    /// Refused calls by name.
    refused: Groups<String, Refusal>,
    /// Execs of an image that is on no file system.
    hidden: Groups<Vec<u8>, ()>,
    /// (pid, path) of every recorded open and exec of a path the kernel reports on.
    named: std::collections::HashSet<(i32, Vec<u8>)>,
    /// Paths any recorded open or exec named (for accesses whose process was gone).
    named_any: std::collections::HashSet<Vec<u8>>,
    /// Set when `named` ran out of room: nothing is then called unattributed.
    named_full: bool,
    /// Last components of the planted files and their folders: an open whose path ends
    /// otherwise cannot name one (the rest are not normalized, nor kept).
    planted_names: Vec<Vec<u8>>,
    /// Kernel-reported accesses by (pid, path): event ids, phase.
    seen: Groups<(i32, Vec<u8>), ()>,
    /// Images the kernel reports that differ from what the exec named: (image, shown).
    swapped: Groups<(Vec<u8>, Vec<u8>), ()>,
    /// Per call of [`PROBED`] and process refused it: the time of its first refusal, and how
    /// many ordinary recorded calls the process made after it (up to [`CARRIED_ON`]).
    probed: std::collections::HashMap<(String, i32), (u64, u32)>,
}

/// What is kept of a group of refusals.
#[derive(Default)]
pub(crate) struct Refusal {
    errno: i32,
    reason: String,
}

/// The C library's routine attempt, refused so that `clone`'s flags can be read, and a udev
/// monitor's socket of device events (libudev opens one for any program that watches devices:
/// a browser, a USB library), refused because only netlink-route is let through: not
/// evasion (version 12).
const ROUTINE: &[&str] = &["clone3", UEVENT_KEY];

/// The group of the refused sockets of device events ([`glassbox_model::UEVENT_REFUSAL`]).
const UEVENT_KEY: &str = "socket (netlink device events)";

/// Calls runtimes try once to learn whether the kernel has them, and do without when it is
/// refused: libuv (Node) and others probe `io_uring_setup` when they start. A refusal of one
/// is a note when every process refused it then carried on with ordinary recorded calls
/// (version 7): nothing got past, and the program did its work the ordinary way. A process
/// that stopped there (tried it, and did next to nothing else the recorder saw) is flagged as
/// before.
const PROBED: &[&str] = &["io_uring_setup"];

/// Ordinary recorded calls, stamped after the refusal, by which a process carried on: more
/// than a program's exit path makes (a helper that tried and gave up prints and exits), and
/// counted by time stamp, not by order of arrival (recorders deliver on several channels).
const CARRIED_ON: u32 = 8;

/// The last components of every planted file and of the folders holding it.
fn planted_names(m: &glassbox_model::Manifest) -> Vec<Vec<u8>> {
    let mut out: Vec<Vec<u8>> = Vec::new();
    for t in &m.sandbox.honeytokens {
        let mut p = std::path::Path::new(&t.path);
        while let Some(name) = p.file_name() {
            let name = name.as_encoded_bytes().to_vec();
            if !out.contains(&name) {
                out.push(name);
            }
            p = match p.parent() {
                Some(parent) => parent,
                None => break,
            };
        }
    }
    out
}

/// Whether a recorded path can name a planted file or folder: it ends with one of their
/// names, or with `.`/`..` (normalizing may lead anywhere).
fn may_name(path: &[u8], names: &[Vec<u8>]) -> bool {
    let path = path.strip_suffix(b"/").unwrap_or(path);
    let last = path.rsplit(|&b| b == b'/').next().unwrap_or(path);
    last == b"." || last == b".." || names.iter().any(|n| n.as_slice() == last)
}

/// A path compared lexically normalized (`a/../b`, `//`, `.`), as bytes.
fn normal(path: &[u8]) -> Vec<u8> {
    crate::paths::NormPath::new(path).to_bytes().0
}

/// Whether an exec's image is on no file system.
fn from_memory(path: &[u8]) -> bool {
    path.starts_with(b"/memfd:") || path.ends_with(b" (deleted)")
}

pub(crate) fn start(c: &crate::Context<'_>) -> Box<dyn Evaluator> {
    let mut eval = Evaluation::default();
    let mut more = 0u64;
    // Without the edge there are no flows to weigh; the refusals are still seen.
    for f in c.flows {
        if f.protocol == FlowProtocol::Unix || !f.events.is_empty() {
            continue;
        }
        if eval.findings.len() >= LISTED {
            more += 1;
            continue;
        }
        let from = f
            .src
            .as_ref()
            .map_or_else(String::new, |s| format!("{} ", net::addr(s)));
        let mut summary = format!(
            "traffic the recorder did not see: {} {from}→ {}",
            net::protocol(f.protocol),
            net::addr(&f.dst)
        );
        let names: Vec<String> = net::names(f)
            .into_iter()
            .map(|(what, n)| format!("{what} {}", net::show(&n)))
            .collect();
        if !names.is_empty() {
            summary += &format!(" ({})", names.join(", "));
        }
        summary += ", no connect or send recorded";
        if f.mode == NetworkMode::Denied {
            summary += " (denied run)";
        }
        let mut finding = INFO.finding(summary, Vec::new(), None);
        finding.flows = vec![f.id];
        eval.findings.push(finding);
    }
    if more > 0 {
        eval.findings.push(INFO.finding(
            format!("{more} more flows with no connect or send recorded (not listed)"),
            Vec::new(),
            None,
        ));
    }
    Box::new(State {
        eval,
        refused: Groups::new(),
        hidden: Groups::new(),
        named: Default::default(),
        named_any: Default::default(),
        named_full: false,
        planted_names: planted_names(c.manifest),
        seen: Groups::new(),
        swapped: Groups::new(),
        probed: Default::default(),
    })
}

impl Evaluator for State {
    fn event(&mut self, e: &Event) {
        if !matches!(
            e.kind,
            EventKind::Refused { .. } | EventKind::Honeytoken { .. }
        ) {
            for ((_, pid), (at, after)) in self.probed.iter_mut() {
                if *pid == e.pid && e.t_ns > *at && *after < CARRIED_ON {
                    *after += 1;
                }
            }
        }
        match &e.kind {
            EventKind::Refused {
                syscall,
                errno,
                reason,
            } => {
                if PROBED.contains(&syscall.as_str()) {
                    self.probed
                        .entry((syscall.clone(), e.pid))
                        .or_insert((e.t_ns, 0));
                }
                // A udev monitor's socket is grouped, and judged, apart from the other
                // refused sockets.
                let key = if reason == glassbox_model::UEVENT_REFUSAL {
                    UEVENT_KEY.to_string()
                } else {
                    syscall.clone()
                };
                if let Some(g) = self.refused.add(key, e.id, &e.phase) {
                    if g.reason.is_empty() {
                        g.errno = *errno;
                        g.reason = reason.clone();
                    }
                }
            }
            EventKind::Exec { path, .. } if from_memory(path.as_slice()) => {
                self.hidden.add(path.as_slice().to_vec(), e.id, &e.phase);
            }
            EventKind::Image { path, .. } if from_memory(path.as_slice()) => {
                self.hidden.add(path.as_slice().to_vec(), e.id, &e.phase);
            }
            EventKind::Image { path, shown } if path != shown => {
                let key = (path.as_slice().to_vec(), shown.as_slice().to_vec());
                self.swapped.add(key, e.id, &e.phase);
            }
            EventKind::Honeytoken { path, access, .. }
                if access == "open" || access == "read" || access == "open-exec" =>
            {
                let p = normal(path.as_slice());
                self.seen.add((e.pid, p), e.id, &e.phase);
            }
            _ => {}
        }
        if let EventKind::Open { path, .. } | EventKind::Exec { path, .. } = &e.kind {
            if !may_name(path.as_slice(), &self.planted_names) {
                return;
            }
            // Bounded like the groups: past the cap nothing is called unattributed (no
            // finding is made up from running out of room).
            if self.named.len() >= text::MAX_GROUPS * 10 {
                self.named_full = true;
                return;
            }
            let p = normal(path.as_slice());
            self.named.insert((e.pid, p.clone()));
            self.named_any.insert(p);
        }
    }

    fn finish(self: Box<Self>) -> Evaluation {
        let State {
            mut eval,
            refused,
            hidden,
            named,
            named_any,
            named_full,
            planted_names: _,
            seen,
            swapped,
            probed,
        } = *self;
        for g in swapped.items {
            let (image, shown) = &g.key;
            eval.findings.push(INFO.finding(
                format!(
                    "the kernel runs {} where the exec the recorder saw named {}: the path \
                     changed after it was read, during {}",
                    text::escape(&String::from_utf8_lossy(image)),
                    text::escape(&String::from_utf8_lossy(shown)),
                    text::phases(&g.phases)
                ),
                g.ids,
                g.phases.first().cloned(),
            ));
        }
        for g in seen.items {
            let (pid, path) = &g.key;
            let attributed = named_full
                || if *pid == 0 {
                    named_any.contains(path)
                } else {
                    named.contains(&(*pid, path.clone()))
                };
            if attributed {
                continue;
            }
            let who = if *pid == 0 {
                "a process gone before it could be named".to_string()
            } else {
                format!("pid {pid}")
            };
            eval.findings.push(INFO.finding(
                format!(
                    "the kernel saw {who} open or read {}, and no recorded open or exec by it \
                     names that path: the recorder was shown another path, or went around, \
                     during {}",
                    text::escape(&String::from_utf8_lossy(path)),
                    text::phases(&g.phases)
                ),
                g.ids,
                g.phases.first().cloned(),
            ));
        }
        for g in refused.items {
            // A runtime's probe: every process refused it carried on.
            let probe = PROBED.contains(&g.key.as_str()) && {
                let mut of_it = probed.iter().filter(|((c, _), _)| *c == g.key).peekable();
                of_it.peek().is_some() && of_it.all(|(_, (_, after))| *after >= CARRIED_ON)
            };
            let routine = ROUTINE.contains(&g.key.as_str()) || probe;
            let summary = format!(
                "{}refused {} {} (errno {}): {}{}",
                if routine {
                    ""
                } else {
                    "tried a call the sandbox refuses: "
                },
                text::escape(&g.key),
                net::count(g.count, "time", "times"),
                g.data.errno,
                g.data.reason,
                if probe {
                    "; each process refused it carried on with ordinary calls (a runtime \
                     probing for it, as libuv does at start)"
                } else {
                    ""
                }
            );
            let summary = format!("{summary} during {}", text::phases(&g.phases));
            let f = INFO.finding(summary, g.ids, g.phases.first().cloned());
            if routine {
                eval.notes.push(f);
            } else {
                eval.findings.push(f);
            }
        }
        if refused.overflow > 0 {
            eval.findings.push(INFO.finding(
                format!("{} more refused calls (not listed)", refused.overflow),
                Vec::new(),
                None,
            ));
        }
        for g in hidden.items {
            eval.findings.push(INFO.finding(
                format!(
                    "ran a program that is on no file system (a memfd or a deleted file): {} \
                     during {}",
                    text::escape(&String::from_utf8_lossy(&g.key)),
                    text::phases(&g.phases)
                ),
                g.ids,
                g.phases.first().cloned(),
            ));
        }
        if hidden.overflow > 0 {
            eval.findings.push(INFO.finding(
                format!(
                    "{} more programs run from memory (not listed)",
                    hidden.overflow
                ),
                Vec::new(),
                None,
            ));
        }
        eval
    }
}

#[cfg(test)]
pub(crate) fn evaluate(ev: &glassbox_model::Evidence) -> Evaluation {
    crate::evaluate_one(start, ev)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{Ev, F};
    use glassbox_model::Phase;

    fn refused(ev: Ev, syscall: &str, errno: i32) -> Ev {
        ev.event(
            2,
            Phase::Call("t".into()),
            EventKind::Refused {
                syscall: syscall.into(),
                errno,
                reason: "why".into(),
            },
        )
    }

    #[test]
    fn refusals_flag_grouped_by_call_and_clone3_is_a_note() {
        let mut ev = Ev::new();
        for _ in 0..3 {
            ev = refused(ev, "io_uring_setup", 38);
        }
        ev = refused(ev, "i386:5", 38);
        ev = refused(ev, "clone3", 38);
        let eval = evaluate(&ev.build());
        let s: Vec<&str> = eval.findings.iter().map(|f| f.summary.as_str()).collect();
        assert_eq!(
            s,
            vec![
                "tried a call the sandbox refuses: refused io_uring_setup 3 times (errno 38): why \
                 during call:t",
                "tried a call the sandbox refuses: refused i386:5 1 time (errno 38): why during \
                 call:t",
            ]
        );
        assert_eq!(eval.findings[0].evidence, vec![1, 2, 3]);
        assert_eq!(eval.notes.len(), 1);
        assert!(eval.notes[0].summary.starts_with("refused clone3"));
    }

    #[test]
    fn a_udev_monitors_socket_is_a_note_and_a_packet_socket_is_flagged() {
        let sock = |ev: Ev, reason: &str| {
            ev.event(
                2,
                Phase::Call("t".into()),
                EventKind::Refused {
                    syscall: "socket".into(),
                    errno: 97,
                    reason: reason.into(),
                },
            )
        };
        let ev = sock(Ev::new(), glassbox_model::UEVENT_REFUSAL);
        let eval = evaluate(&sock(ev, "raw packets").build());
        assert_eq!(eval.findings.len(), 1, "{:?}", eval.findings);
        assert!(eval.findings[0]
            .summary
            .contains("refused socket 1 time (errno 97): raw packets"));
        assert_eq!(eval.notes.len(), 1);
        assert!(eval.notes[0]
            .summary
            .starts_with("refused socket (netlink device events) 1 time"));
    }

    #[test]
    fn a_runtimes_probe_that_carries_on_is_a_note() {
        // libuv at Node's start: io_uring_setup refused, then the ordinary way.
        let mut ev = refused(Ev::new(), "io_uring_setup", 38);
        for i in 0..CARRIED_ON {
            ev = ev.open(format!("/srv/app/m{i}.js"), 0, Phase::Call("t".into()));
        }
        let ev = ev.build();
        let eval = evaluate(&ev);
        assert!(eval.findings.is_empty(), "{eval:#?}");
        assert!(eval.notes[0].summary.starts_with(
            "refused io_uring_setup 1 time (errno 38): why; each process refused it carried on"
        ));
        // Another process that tried it and stopped there: flagged, for both.
        let ev = refused(Ev::new(), "io_uring_setup", 38)
            .open("/srv/app/index.js", 0, Phase::Call("t".into()))
            .event(
                9,
                Phase::Call("t".into()),
                EventKind::Refused {
                    syscall: "io_uring_setup".into(),
                    errno: 38,
                    reason: "why".into(),
                },
            )
            .build();
        let eval = evaluate(&ev);
        assert_eq!(eval.findings.len(), 1, "{eval:#?}");
        assert!(eval.findings[0]
            .summary
            .starts_with("tried a call the sandbox refuses: refused io_uring_setup 2 times"));
    }

    fn kernel_saw(ev: Ev, pid: i32, path: &str) -> Ev {
        ev.event(
            pid,
            Phase::Call("t".into()),
            EventKind::Honeytoken {
                path: path.into(),
                access: "read".into(),
                dir: false,
            },
        )
    }

    #[test]
    fn a_kernel_reported_access_no_recorded_open_names_flags() {
        // pid 2 opened the key under its own name; pid 3 was recorded opening another path.
        let ev = Ev::new()
            .honeytoken("/home/user/.ssh/id_rsa")
            .open("/home/user/.ssh/id_rsa", 0, Phase::Call("t".into()))
            .event(
                3,
                Phase::Call("t".into()),
                EventKind::Open {
                    syscall: "openat".into(),
                    path: "/tmp/harmless".into(),
                    flags: 0,
                    flags_text: String::new(),
                    result: Some(3),
                },
            );
        let ev = kernel_saw(ev, 2, "/home/user/.ssh/id_rsa");
        let ev = kernel_saw(ev, 3, "/home/user/.ssh/id_rsa").build();
        let eval = evaluate(&ev);
        assert_eq!(eval.findings.len(), 1, "{:?}", eval.findings);
        assert!(
            eval.findings[0]
                .summary
                .starts_with("the kernel saw pid 3 open or read /home/user/.ssh/id_rsa"),
            "{}",
            eval.findings[0].summary
        );
        assert_eq!(eval.findings[0].evidence, vec![4]);
        assert!(may_name(
            b"/home/user/.ssh/../.ssh/id_rsa",
            &planted_names(&ev.manifest)
        ));
        assert!(!may_name(
            b"/usr/lib/libc.so.6",
            &planted_names(&ev.manifest)
        ));
    }

    fn image(ev: Ev, pid: i32, path: &str, shown: &str) -> Ev {
        ev.event(
            pid,
            Phase::Call("t".into()),
            EventKind::Image {
                path: path.into(),
                shown: shown.into(),
            },
        )
    }

    #[test]
    fn the_kernels_image_is_weighed_against_the_exec() {
        let ev = image(Ev::new(), 3, "/usr/bin/python3.11", "/usr/bin/python3.11");
        let ev = image(ev, 4, "/usr/bin/nc.openbsd", "/usr/bin/true");
        let ev = image(ev, 5, "/memfd:payload (deleted)", "/proc/5/fd/3").build();
        let eval = evaluate(&ev);
        let s: Vec<&str> = eval.findings.iter().map(|f| f.summary.as_str()).collect();
        assert_eq!(s.len(), 2, "{s:?}");
        assert!(s.iter().any(|f| f.starts_with(
            "the kernel runs /usr/bin/nc.openbsd where the exec the recorder saw named /usr/bin/true"
        )));
        assert!(s.iter().any(|f| f.contains("/memfd:payload (deleted)")));
    }

    #[test]
    fn a_program_run_from_memory_flags_an_ordinary_one_does_not() {
        let ev = Ev::new()
            .server_start()
            .exec(3, "/memfd:x (deleted)", &["x"], Phase::Call("t".into()))
            .exec(4, "/tmp/tool (deleted)", &["tool"], Phase::Call("t".into()))
            .exec(5, "/usr/bin/true", &["true"], Phase::Call("t".into()))
            .build();
        let eval = evaluate(&ev);
        assert_eq!(eval.findings.len(), 2, "{:?}", eval.findings);
        assert!(eval.findings[0].summary.contains("/memfd:x (deleted)"));
        assert_eq!(eval.findings[1].evidence, vec![3]);
    }

    #[test]
    fn a_flow_no_call_explains_flags() {
        let ev = Ev::new()
            .flow(F::tcp("192.0.2.1:80").src("198.18.0.1:40000"))
            .flow(F::dns("exfil.example", "A").denied())
            .build();
        let eval = evaluate(&ev);
        let s: Vec<&str> = eval.findings.iter().map(|f| f.summary.as_str()).collect();
        assert_eq!(
            s,
            vec![
                "traffic the recorder did not see: TCP 198.18.0.1:40000 → 192.0.2.1:80, no \
                 connect or send recorded",
                "traffic the recorder did not see: DNS → 198.18.0.2:53 (DNS query \
                 exfil.example), no connect or send recorded (denied run)",
            ]
        );
        assert_eq!(eval.findings[0].flows, vec![1]);
        assert!(eval.findings[0].evidence.is_empty());
    }

    #[test]
    fn a_matched_flow_passes() {
        let ev = Ev::new()
            .connect("192.0.2.1:80", Phase::Startup)
            .flow(F::tcp("192.0.2.1:80").events(&[1]))
            // A canary socket's flow is no IP traffic.
            .flow(F::unix("/var/run/docker.sock"))
            .build();
        assert_eq!(evaluate(&ev), Evaluation::default());
    }
}
