//! `unix-socket`: connections to Unix sockets the server does not own.
//!
//! A Unix socket is a door out of the sandbox's network namespace: the Docker daemon's socket
//! is root on the host, an ssh-agent signs with the user's keys, a D-Bus or X11 socket drives
//! the desktop. glassbox plants canary sockets at the usual places (a fake
//! `/var/run/docker.sock` and `/run/docker.sock`, a fake `$SSH_AUTH_SOCK`;
//! `manifest.network.canary_sockets`) and records what is sent to them (flows of protocol
//! Unix).
//!
//! A connect event to a Unix address (a path, or a name in the abstract namespace) counts,
//! except when:
//!
//! - some process of the sandbox bound that path or name earlier in the same run (the server
//!   talking to its own helper, or to itself);
//! - it is a socket the C library itself connects to ([`LIBC_SOCKETS`]: the name service
//!   cache, syslog and the journal), not the server's choice.
//!
//! A canary socket always counts, bound or not. A canary flow adds what was sent (printable,
//! cut) to the finding of its path, and is a finding by itself should its connect event be
//! missing. Paths are compared lexically normalized (a relative one against the sandbox's
//! working directory, `/var/run` as the `/run` it links to). One finding per socket.
//!
//! A connect during a call whose input named that socket's path ([`crate::named`]: the plan
//! gives a socket parameter the canary Docker socket) is the tool doing what it was asked: a
//! note here (version 3), with what the canary recorded of it, and `input-exposure` lists it
//! as what the tool can be made to reach. The same socket connected in another phase still
//! counts.
//!
//! Version 4 judges as version 3 did: its source `named.rs` reads the hosts URLs name now,
//! for `crate::explain`.
//!
//! Version 6 judges as version 5 did, but says `not-observed`, never `pass`, where the run lost
//! calls the recorder should have seen (`manifest.recorder.lost`: the rule is
//! `outcome.rs`'s, which its lock now covers).
//!
//! Version 7: what the input named includes the values glassbox gave a resource template's
//! variables and a prompt's arguments, under the read's or get's phase (`named.rs`), as it
//! includes a call's arguments.
//!
//! Version 8: what the input named includes a host given without a URL (`named.rs`): a host
//! parameter's `m1x2.example.test`, an address with its port, a keyword connection string's
//! `host=` (issue 34: a host glassbox itself gave a tool was called unexplained egress).
//!
//! Version 9 judges as version 8 did; its source `named.rs` now explains a `.test` name an
//! earlier call's input gave at any time after that call (for `unexplained-egress`).

use crate::net::{self, Keyed, PhaseOf};
use crate::paths::NormPath;
use crate::text;
use crate::{Channel, CheckInfo, Evaluation, Evaluator};
use glassbox_model::{Event, EventKind, FlowProtocol, NetworkRun, Phase, Severity, SockAddr};
use std::collections::HashSet;

pub(crate) const INFO: CheckInfo = CheckInfo {
    id: "unix-socket",
    version: 9,
    claim: "connects to no Unix socket it does not own",
    severity: Severity::High,
    channels: &[Channel::Syscalls],
    also_reads: &[],
    file_calls: false,
    accuses: "",
    sources: &[
        "unix_socket.rs",
        "links.rs",
        "named.rs",
        "net.rs",
        "paths.rs",
        "text.rs",
        "outcome.rs",
    ],
};

/// Sockets the C library connects to on its own, and why (not flagged).
pub(crate) const LIBC_SOCKETS: &[(&str, &str)] = &[
    (
        "/var/run/nscd/socket",
        "glibc asks nscd before resolving names and users",
    ),
    (
        "/run/nscd/socket",
        "glibc asks nscd before resolving names and users",
    ),
    ("/dev/log", "syslog(3)"),
    (
        "/run/systemd/journal/socket",
        "sd_journal_print(3) and libsystemd logging",
    ),
    (
        "/run/systemd/journal/dev-log",
        "syslog(3) where /dev/log points to journald",
    ),
];

/// The most of what was sent to a canary shown, in characters.
const SAMPLE_CHARS: usize = 160;

/// A socket: abstract or not, and its normalized path (or name).
type Key = (bool, Vec<u8>);

#[derive(Debug, Default)]
struct Use {
    /// The path (or name) as first given.
    shown: Option<String>,
    connects: u64,
    canary: bool,
    sent: Vec<String>,
    flows: Vec<u64>,
    ids: Vec<u64>,
    phases: Vec<Phase>,
    /// The argument of the call that named it, when every connect was during such a call.
    named: Option<String>,
    /// Connects during a call that did not name it.
    unnamed: u64,
}

/// The check's state over one run.
pub(crate) struct State {
    runs: Vec<NetworkRun>,
    cwd: Vec<u8>,
    canaries: Vec<Vec<u8>>,
    libc: Vec<Vec<u8>>,
    /// Sockets bound, with the run they were bound in.
    bound: HashSet<(Option<usize>, Key)>,
    groups: Keyed<Key, Use>,
    phases: PhaseOf,
    named: crate::named::Named,
    /// The audit's input marker (`manifest.session.input_marker`).
    marker: Option<String>,
    /// Connect events during a call whose input named their socket.
    named_ids: HashSet<u64>,
}

/// A socket path lexically normalized, `/var/run/...` as `/run/...` (`/var/run` is a symlink
/// to `/run`).
fn norm(path: &[u8], cwd: &[u8]) -> Vec<u8> {
    let p = NormPath::resolve(path, cwd).to_bytes().0;
    match p.strip_prefix(b"/var/run/".as_slice()) {
        Some(rest) => [b"/run/".as_slice(), rest].concat(),
        None => p,
    }
}

/// A Unix socket's path or abstract name as shown (without `unix:` or `@`).
fn shown(addr: &SockAddr) -> String {
    match addr {
        SockAddr::Unix { path, .. } => net::show(&path.to_lossy()),
        other => net::addr(other),
    }
}

pub(crate) fn start(c: &crate::Context<'_>) -> Box<dyn Evaluator> {
    let cwd = c.manifest.sandbox.cwd.as_bytes().to_vec();
    let mut s = State {
        runs: c.manifest.network.runs.clone(),
        canaries: c
            .manifest
            .network
            .canary_sockets
            .iter()
            .map(|p| norm(p.as_bytes(), &cwd))
            .collect(),
        libc: LIBC_SOCKETS
            .iter()
            .map(|(p, _)| norm(p.as_bytes(), b"/"))
            .collect(),
        cwd,
        bound: HashSet::new(),
        groups: Keyed::new(),
        phases: PhaseOf::default(),
        named: crate::named::Named::of(c.manifest),
        marker: c
            .manifest
            .session
            .input_marker
            .clone()
            .filter(|m| m.len() >= 4),
        named_ids: HashSet::new(),
    };
    for f in c.flows.iter().filter(|f| f.protocol == FlowProtocol::Unix) {
        s.phases.want(&f.events);
    }
    Box::new(s)
}

impl State {
    fn key(&self, addr: &SockAddr) -> Option<Key> {
        match addr {
            SockAddr::Unix { path, is_abstract } if *is_abstract => {
                Some((true, path.as_slice().to_vec()))
            }
            SockAddr::Unix { path, .. } if !path.as_slice().is_empty() => {
                Some((false, norm(path.as_slice(), &self.cwd)))
            }
            _ => None,
        }
    }

    fn run_of(&self, id: u64) -> Option<usize> {
        self.runs
            .iter()
            .position(|r| r.first_event <= id && id < r.end_event)
    }

    fn is_canary(&self, key: &Key) -> bool {
        !key.0 && self.canaries.contains(&key.1)
    }
}

impl Evaluator for State {
    fn event(&mut self, e: &Event) {
        self.phases.see(e);
        let (addr, bind) = match &e.kind {
            EventKind::Connect { addr, .. } => (addr, false),
            EventKind::Bind { addr, .. } => (addr, true),
            _ => return,
        };
        let Some(key) = self.key(addr) else {
            return;
        };
        let run = self.run_of(e.id);
        if bind {
            self.bound.insert((run, key));
            return;
        }
        let canary = self.is_canary(&key);
        if !canary
            && (self.bound.contains(&(run, key.clone())) || (!key.0 && self.libc.contains(&key.1)))
        {
            return;
        }
        let named = match addr {
            SockAddr::Unix { path, is_abstract } if !*is_abstract => {
                let norm = NormPath::resolve(path.as_slice(), &self.cwd);
                let marked = || {
                    self.marker.as_deref().is_some_and(|m| {
                        path.as_slice()
                            .windows(m.len())
                            .any(|w| w.eq_ignore_ascii_case(m.as_bytes()))
                    })
                };
                self.named
                    .named(&e.phase, e.t_ns, norm.components())
                    .map(crate::named::argument)
                    // A name without a folder (`glassbox-probe-<marker>.txt`) is no path to
                    // `named`; the marker in it says the input named it.
                    .or_else(|| marked().then(|| "the probe string of its input".to_string()))
            }
            _ => None,
        };
        if named.is_some() {
            self.named_ids.insert(e.id);
        }
        let Some(u) = self.groups.get(key) else {
            return;
        };
        if u.shown.is_none() {
            u.shown = Some(shown(addr));
        }
        match named {
            Some(arg) => {
                u.named.get_or_insert(arg);
            }
            None => u.unnamed += 1,
        }
        u.connects += 1;
        u.canary = canary;
        net::add_ids(&mut u.ids, &[e.id]);
        if !u.phases.contains(&e.phase) {
            u.phases.push(e.phase.clone());
        }
    }

    fn finish_with(self: Box<Self>, ctx: &crate::Context<'_>) -> Evaluation {
        let mut s = *self;
        for f in ctx
            .flows
            .iter()
            .filter(|f| f.protocol == FlowProtocol::Unix)
        {
            let Some(key) = s.key(&f.dst) else {
                continue;
            };
            let ps = s.phases.of(&f.events);
            let Some(u) = s.groups.get(key) else {
                continue;
            };
            // Flows of protocol Unix are what glassbox's canaries recorded.
            u.canary = true;
            if u.shown.is_none() {
                u.shown = Some(shown(&f.dst));
            }
            net::add_ids(&mut u.flows, &[f.id]);
            net::add_ids(&mut u.ids, &f.events);
            for p in ps {
                if !u.phases.contains(&p) {
                    u.phases.push(p);
                }
            }
            if !f.sample.as_slice().is_empty() && u.sent.len() < 3 {
                u.sent
                    .push(format!("\"{}\"", net::sample(&f.sample, SAMPLE_CHARS)));
            }
        }
        let mut findings = Vec::new();
        let mut notes = Vec::new();
        for ((is_abstract, path), u) in s.groups.items {
            let shown = u
                .shown
                .unwrap_or_else(|| net::show(&String::from_utf8_lossy(&path)));
            let mut summary = if is_abstract {
                format!("connected to abstract Unix socket @{shown}")
            } else {
                format!("connected to Unix socket {shown}")
            };
            summary += if u.canary {
                " (a glassbox canary)"
            } else {
                " (not bound in the sandbox)"
            };
            if u.connects > 1 {
                summary += &format!(", {} times", u.connects);
            }
            if u.connects == 0 {
                summary += ", no connect recorded";
            }
            if !u.phases.is_empty() {
                summary += &format!(" during {}", text::phases(&u.phases));
            }
            if !u.sent.is_empty() {
                summary += &format!("; sent {}", u.sent.join(", "));
            }
            // Every connect during a call whose input named the socket, and every flow the
            // canary recorded of one of those connects: what the tool was asked to do.
            let asked = u.unnamed == 0 && u.connects > 0;
            // A canary flow linked to its connects must be linked to named ones only; one the
            // audit could not link (a microVM's flows carry no event ids) needs a named connect
            // of its own to account for it, one not linked to another flow, so that a connect
            // the recorder missed still shows as a flow too many.
            let mine: Vec<&glassbox_model::Flow> = ctx
                .flows
                .iter()
                .filter(|f| u.flows.contains(&f.id))
                .collect();
            let linked = mine.iter().filter(|f| !f.events.is_empty()).count() as u64;
            let unlinked = mine.len() as u64 - linked;
            let flows_named = mine
                .iter()
                .filter(|f| !f.events.is_empty())
                .all(|f| f.events.iter().all(|id| s.named_ids.contains(id)))
                && unlinked <= u.connects.saturating_sub(linked);
            if let (true, true, Some(arg)) = (asked, flows_named, &u.named) {
                summary += &format!(
                    ", because that call's input named it ({arg}): what the tool can be made to \
                     reach, listed by input-exposure when outside the workspace"
                );
                let mut f = INFO.finding(summary, u.ids, u.phases.first().cloned());
                f.flows = u.flows;
                notes.push(f);
                continue;
            }
            let mut f = INFO.finding(summary, u.ids, u.phases.first().cloned());
            f.flows = u.flows;
            findings.push(f);
        }
        if s.groups.overflow > 0 {
            findings.push(INFO.finding(
                format!(
                    "{} more connects to further Unix sockets (not listed)",
                    s.groups.overflow
                ),
                Vec::new(),
                None,
            ));
        }
        Evaluation { findings, notes }
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
    use glassbox_model::NetworkMode;

    fn summaries(ev: &glassbox_model::Evidence) -> Vec<String> {
        crate::testutil::summaries(evaluate(ev))
    }

    #[test]
    fn a_servers_own_socket_passes_docker_sock_flags() {
        let ev = Ev::new()
            .bind(3, "unix:/tmp/helper.sock", Phase::Startup)
            .connect("unix:/tmp/helper.sock", Phase::Startup)
            .connect("unix:/var/run/docker.sock", Phase::Call("ps".into()))
            .build();
        let eval = evaluate(&ev);
        assert_eq!(eval.findings.len(), 1);
        assert_eq!(
            eval.findings[0].summary,
            "connected to Unix socket /var/run/docker.sock (not bound in the sandbox) during call:ps"
        );
        assert_eq!(eval.findings[0].evidence, vec![3]);
    }

    #[test]
    fn a_socket_the_calls_input_named_is_a_note_and_elsewhere_still_counts() {
        let asked = Phase::call("status", 2);
        let ev = Ev::new()
            .canary_sockets(&["/var/run/docker.sock"])
            .call(
                "status",
                1,
                serde_json::json!({"socketPath": "glassbox-probe.txt"}),
            )
            .call(
                "status",
                2,
                serde_json::json!({"socketPath": "/var/run/docker.sock"}),
            )
            .connect("unix:/var/run/docker.sock", asked.clone())
            .flow(
                F::unix("/var/run/docker.sock")
                    .sample(&b"GET /containers/json HTTP/1.1\r\n"[..])
                    .events(&[1]),
            )
            .build();
        let eval = evaluate(&ev);
        assert!(eval.findings.is_empty(), "{eval:#?}");
        assert_eq!(eval.notes.len(), 1, "{eval:#?}");
        assert!(
            eval.notes[0].summary.starts_with(
                "connected to Unix socket /var/run/docker.sock (a glassbox canary) during \
                 call:status#2; sent \"GET /containers/json"
            ) && eval.notes[0]
                .summary
                .ends_with("because that call's input named it (argument `socketPath`): what the tool can be made to reach, listed by input-exposure when outside the workspace"),
            "{eval:#?}"
        );
        // A name without a folder, with the marker: named by the input too.
        let ev = Ev::new()
            .marker("gbm0a1b2c3")
            .call(
                "status",
                1,
                serde_json::json!({"socketPath": "glassbox-probe-gbm0a1b2c3.txt"}),
            )
            .connect(
                "unix:glassbox-probe-gbm0a1b2c3.txt",
                Phase::call("status", 1),
            )
            .build();
        let eval = evaluate(&ev);
        assert!(eval.findings.is_empty(), "{eval:#?}");
        assert!(
            eval.notes[0]
                .summary
                .contains("(the probe string of its input)"),
            "{eval:#?}"
        );
        // A canary flow the audit could not link (a microVM's), one per named connect: the
        // same note. One flow more than the connects: a connect the recorder missed.
        let unlinked = |flows: usize| {
            let mut ev = Ev::new()
                .canary_sockets(&["/var/run/docker.sock"])
                .call(
                    "status",
                    2,
                    serde_json::json!({"socketPath": "/var/run/docker.sock"}),
                )
                .connect("unix:/var/run/docker.sock", Phase::call("status", 2));
            for _ in 0..flows {
                ev = ev.flow(F::unix("/var/run/docker.sock").sample(&b"GET /version"[..]));
            }
            evaluate(&ev.build())
        };
        let e = unlinked(1);
        assert!(e.findings.is_empty() && e.notes.len() == 1, "{e:#?}");
        assert_eq!(unlinked(2).findings.len(), 1);
        // The same socket also connected in a call that did not name it: a finding.
        let ev = Ev::new()
            .canary_sockets(&["/var/run/docker.sock"])
            .call(
                "status",
                2,
                serde_json::json!({"socketPath": "/var/run/docker.sock"}),
            )
            .connect("unix:/var/run/docker.sock", asked)
            .connect("unix:/var/run/docker.sock", Phase::Startup)
            .build();
        let s = summaries(&ev);
        assert_eq!(s.len(), 1, "{s:?}");
        assert!(s[0].contains("2 times"), "{s:?}");
    }

    #[test]
    fn bound_later_or_in_another_run_does_not_count() {
        let ev = Ev::new()
            .run(NetworkMode::Capture, 1, 2)
            .run(NetworkMode::Denied, 2, 10)
            .bind(3, "unix:/tmp/a.sock", Phase::Startup)
            .connect("unix:/tmp/a.sock", Phase::Startup)
            .connect("unix:/tmp/b.sock", Phase::Startup)
            .bind(3, "unix:/tmp/b.sock", Phase::Startup)
            .build();
        let s = summaries(&ev);
        assert_eq!(s.len(), 2, "{s:?}");
        assert!(s[0].contains("/tmp/a.sock"));
        assert!(s[1].contains("/tmp/b.sock"));
    }

    #[test]
    fn abstract_sockets() {
        let ev = Ev::new()
            .bind(3, "unix:@mine", Phase::Startup)
            .connect("unix:@mine", Phase::Startup)
            .connect("unix:@/tmp/.X11-unix/X0", Phase::Startup)
            // A path of the same name is another socket.
            .connect("unix:mine", Phase::Startup)
            .build();
        let s = summaries(&ev);
        assert_eq!(s.len(), 2, "{s:?}");
        assert!(
            s[0].starts_with("connected to abstract Unix socket @/tmp/.X11-unix/X0"),
            "{s:?}"
        );
        assert!(s[1].starts_with("connected to Unix socket mine"), "{s:?}");
    }

    #[test]
    fn c_library_sockets_pass() {
        let ev = Ev::new()
            .connect("unix:/var/run/nscd/socket", Phase::Startup)
            .connect("unix:/run/nscd/socket", Phase::Startup)
            .connect("unix:/dev/log", Phase::Startup)
            .connect("unix:/run/systemd/journal/socket", Phase::Startup)
            .connect("unix:/dev/./log", Phase::Startup)
            .build();
        assert_eq!(evaluate(&ev), Evaluation::default());
    }

    #[test]
    fn canaries_flag_with_what_was_sent() {
        let ev = Ev::new()
            .canary_sockets(&["/var/run/docker.sock", "/home/user/.ssh/agent.sock"])
            // Bound or not, a canary counts.
            .bind(2, "unix:/var/run/docker.sock", Phase::Startup)
            .connect("unix:/var/run/docker.sock", Phase::Startup)
            .connect("unix:/var/run/docker.sock", Phase::Startup)
            .flow(
                F::unix("/var/run/docker.sock")
                    .sample(&b"GET /containers/json HTTP/1.1\r\nHost: docker\r\n\r\n"[..])
                    .events(&[2]),
            )
            // A canary flow whose connect is missing.
            .flow(F::unix("/home/user/.ssh/agent.sock").sample(&b"\x00\x00\x00\x01\x0b"[..]))
            .build();
        let eval = evaluate(&ev);
        let s: Vec<&str> = eval.findings.iter().map(|f| f.summary.as_str()).collect();
        assert_eq!(
            s,
            vec![
                "connected to Unix socket /var/run/docker.sock (a glassbox canary), 2 times \
                 during startup; sent \"GET /containers/json HTTP/1.1\\r\\nHost: \
                 docker\\r\\n\\r\\n\"",
                "connected to Unix socket /home/user/.ssh/agent.sock (a glassbox canary), no \
                 connect recorded; sent \"\\u{0}\\u{0}\\u{0}\\u{1}\\u{b}\"",
            ]
        );
        assert_eq!(eval.findings[0].evidence, vec![2, 3]);
        assert_eq!(eval.findings[0].flows, vec![1]);
        assert_eq!(eval.findings[1].flows, vec![2]);
    }

    #[test]
    fn var_run_is_run() {
        let ev = Ev::new()
            .bind(3, "unix:/run/app/ctl.sock", Phase::Startup)
            .connect("unix:/var/run/app/ctl.sock", Phase::Startup)
            .build();
        assert_eq!(evaluate(&ev), Evaluation::default());
    }
}
