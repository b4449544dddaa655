//! `denied-network-attempts`: what the server still tried with the network denied.
//!
//! In the denied run the edge drops every packet and answers nothing: a server that merely
//! works with the network fails or goes without it; one that keeps reaching out (retries,
//! beacons, fallbacks to other addresses) shows what it wants when nothing is given. Counted
//! on both channels, so that either one alone suffices:
//!
//! - syscalls: connect and send events (`connect`, `sendto`, `sendmsg`, `sendmmsg`) among the
//!   denied run's event ids (`manifest.network.runs`) to an IP address off the sandbox (see
//!   [`crate::net::is_egress`]);
//! - packet edge: the denied run's flows (Unix canary sockets aside), their packets and
//!   destinations, and the names of their DNS questions.
//!
//! Any non-zero count to destinations nothing explains (see [`crate::explain`]: what the
//! audited entry names itself, `--allow-host`, a URL of the call's own input) flags, as one
//! finding that lists them with both counts; what was tried towards explained destinations is
//! one note, each destination with its reason (an API client retrying its configured API is
//! the network being denied, not the server reaching out). A
//! syscall matched with a flow counts under the flow's destination (a DNS question's sends
//! under its name). Error codes are never looked at: a connect that failed was still tried,
//! and one that "succeeded" proves nothing either.
//!
//! Version 6 judges as version 5 did, but says `not-observed`, never `pass`, where the run lost
//! calls the recorder should have seen (`manifest.recorder.lost`: the rule is
//! `outcome.rs`'s, which its lock now covers).
//!
//! Version 7: what explains a destination as `unexplained-egress` version 7 says.
//!
//! Version 8: what the input named includes the values glassbox gave a resource template's
//! variables and a prompt's arguments, under the read's or get's phase (`named.rs`), as it
//! includes a call's arguments.
//!
//! Version 9: what the input named includes a host given without a URL (`named.rs`): a host
//! parameter's `m1x2.example.test`, an address with its port, a keyword connection string's
//! `host=` (issue 34: a host glassbox itself gave a tool was called unexplained egress).
//!
//! Version 10 judges as version 9 did; what the input named (`named.rs`) now includes a `.test`
//! name an earlier call's input gave, at any time after that call.
//!
//! Version 11 does not count a connect of a datagram socket that no packet followed (the
//! recorder now says a connect's socket type): nothing was sent; a browser checks that IPv6
//! reaches the Internet so. A stream socket's connect still counts.

use crate::explain::Explains;
use crate::net::{self, Keyed, PhaseOf};
use crate::text;
use crate::{Channel, CheckInfo, Evaluation, Evaluator};
use glassbox_model::{Event, EventKind, Flow, FlowProtocol, NetworkMode, Severity};
use std::collections::HashMap;

pub(crate) const INFO: CheckInfo = CheckInfo {
    id: "denied-network-attempts",
    version: 11,
    claim: "tries nothing when the network is denied",
    severity: Severity::Medium,
    channels: &[Channel::Syscalls, Channel::PacketEdge, Channel::DeniedRun],
    also_reads: &[],
    file_calls: false,
    accuses: "",
    sources: &[
        "denied_network_attempts.rs",
        "links.rs",
        "explain.rs",
        "named.rs",
        "net.rs",
        "text.rs",
        "outcome.rs",
    ],
};

/// Destinations listed in the summary; the rest are counted.
const SHOWN: usize = 10;

/// A destination.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Dest {
    /// DNS questions for a name.
    Dns(String),
    /// An address (as shown).
    Addr(String),
}

#[derive(Debug, Default)]
struct Tries {
    syscalls: u64,
    packets: u64,
    queries: u64,
    /// What explains the destination, when something does.
    why: Option<String>,
}

/// What was tried, to destinations nothing explains (the finding) or to explained ones (a
/// note).
struct Side {
    groups: Keyed<Dest, Tries>,
    syscalls: u64,
    packets: u64,
    ids: Vec<u64>,
    flows: Vec<u64>,
}

impl Side {
    fn new() -> Side {
        Side {
            groups: Keyed::new(),
            syscalls: 0,
            packets: 0,
            ids: Vec::new(),
            flows: Vec::new(),
        }
    }

    fn is_empty(&self) -> bool {
        self.syscalls == 0 && self.packets == 0 && self.groups.items.is_empty()
    }

    /// The destinations, as a summary lists them.
    fn parts(&self) -> String {
        let mut parts: Vec<String> = self
            .groups
            .items
            .iter()
            .take(SHOWN)
            .map(|(dest, t)| {
                let s = match dest {
                    Dest::Dns(name) => format!(
                        "{} for {}",
                        net::count(t.queries, "DNS query", "DNS queries"),
                        net::show(name)
                    ),
                    Dest::Addr(a) => format!(
                        "{}, {} to {a}",
                        net::count(t.syscalls, "syscall", "syscalls"),
                        net::count(t.packets, "packet", "packets")
                    ),
                };
                match &t.why {
                    Some(why) => format!("{s} ({why})"),
                    None => s,
                }
            })
            .collect();
        let more = (self.groups.items.len() - parts.len()) as u64 + self.groups.overflow;
        if more > 0 {
            parts.push(net::count(more, "more destination", "more destinations"));
        }
        parts.join("; ")
    }
}

/// The check's state over one run.
pub(crate) struct State {
    explains: Explains,
    /// Event ids of the denied runs: `first..end`.
    denied: Vec<(u64, u64)>,
    /// The destination of the denied flow each event was matched with, and what explains it.
    flow_of: HashMap<u64, (Dest, Option<String>)>,
    unexplained: Side,
    explained: Side,
    phases: PhaseOf,
}

pub(crate) fn start(c: &crate::Context<'_>) -> Box<dyn Evaluator> {
    let mut s = State {
        explains: Explains::new(c.manifest),
        denied: c
            .manifest
            .network
            .runs
            .iter()
            .filter(|r| r.mode == NetworkMode::Denied)
            .map(|r| (r.first_event, r.end_event))
            .collect(),
        flow_of: HashMap::new(),
        unexplained: Side::new(),
        explained: Side::new(),
        phases: PhaseOf::default(),
    };
    for f in c.flows.iter().filter(|f| f.mode == NetworkMode::Denied) {
        s.flow(f);
    }
    Box::new(s)
}

impl State {
    /// What explains a destination of the denied run (the user's allow list too).
    fn why(&self, names: &[String], port: Option<u16>, t_ns: u64) -> Option<String> {
        let allow = self.explains.allow(NetworkMode::Denied);
        if names.iter().any(|n| allow.allows(n, port)) {
            return Some("allowed (`--allow-host`)".into());
        }
        self.explains.why(names.iter().map(String::as_str), t_ns)
    }

    fn flow(&mut self, f: &Flow) {
        if f.protocol == FlowProtocol::Unix {
            return;
        }
        if net::ip_port(&f.dst).is_some_and(|(ip, _)| !net::is_egress(ip)) {
            return;
        }
        let dest = match (&f.dns, net::ip_port(&f.dst)) {
            (Some(q), _) => Dest::Dns(net::norm_host(q.name.as_slice())),
            (None, Some((ip, port))) => Dest::Addr(net::ip_addr(ip, port)),
            (None, None) => Dest::Addr(net::addr(&f.dst)),
        };
        let why = {
            let mut names: Vec<String> = net::names(f).into_iter().map(|(_, n)| n).collect();
            let ip_port = net::ip_port(&f.dst);
            if names.is_empty() {
                names.extend(ip_port.map(|(ip, _)| ip.to_canonical().to_string()));
            }
            let port = ip_port.map(|(_, p)| p).filter(|_| f.dns.is_none());
            self.why(&names, port, f.t_ns)
        };
        for id in &f.events {
            self.flow_of.insert(*id, (dest.clone(), why.clone()));
        }
        self.phases.want(&f.events);
        let side = match why {
            Some(_) => &mut self.explained,
            None => &mut self.unexplained,
        };
        net::add_ids(&mut side.ids, &f.events);
        net::add_ids(&mut side.flows, &[f.id]);
        side.packets += f.packets_out;
        let Some(t) = side.groups.get(dest) else {
            return;
        };
        t.packets += f.packets_out;
        if f.dns.is_some() {
            t.queries += 1;
        }
        if t.why.is_none() {
            t.why = why;
        }
    }

    fn in_denied_run(&self, id: u64) -> bool {
        self.denied.iter().any(|&(a, b)| a <= id && id < b)
    }
}

impl Evaluator for State {
    fn event(&mut self, e: &Event) {
        self.phases.see(e);
        let EventKind::Connect { addr, .. } = &e.kind else {
            return;
        };
        let Some((ip, port)) = net::ip_port(addr) else {
            return;
        };
        if !net::is_egress(ip) || !self.in_denied_run(e.id) {
            return;
        }
        // The C library's source-address probe (a UDP connect to port 0, nothing sent), and
        // any connect of a datagram socket no packet followed: nothing was sent (version 11).
        if (port == 0 || e.kind.is_datagram_connect()) && !self.flow_of.contains_key(&e.id) {
            return;
        }
        let (dest, why) = match self.flow_of.get(&e.id) {
            Some(d) => d.clone(),
            None => (
                Dest::Addr(net::ip_addr(ip, port)),
                self.why(&[ip.to_canonical().to_string()], Some(port), e.t_ns),
            ),
        };
        let side = match why {
            Some(_) => &mut self.explained,
            None => &mut self.unexplained,
        };
        side.syscalls += 1;
        net::add_ids(&mut side.ids, &[e.id]);
        if side.ids.contains(&e.id) {
            self.phases.want(&[e.id]);
            self.phases.see(e);
        }
        if let Some(t) = side.groups.get(dest) {
            t.syscalls += 1;
            if t.why.is_none() {
                t.why = why;
            }
        }
    }

    fn finish(self: Box<Self>) -> Evaluation {
        let s = *self;
        let listed = |side: Side, said: &str| {
            if side.is_empty() {
                return None;
            }
            let mut ids = side.ids.clone();
            ids.sort_unstable();
            let ps = s.phases.of(&ids);
            let mut summary = format!(
                "with the network denied it {said} ({}, {} in all): {}",
                net::count(side.syscalls, "syscall", "syscalls"),
                net::count(side.packets, "packet", "packets"),
                side.parts()
            );
            if !ps.is_empty() {
                summary += &format!(" during {}", text::phases(&ps));
            }
            let mut f = INFO.finding(summary, ids, ps.first().cloned());
            f.flows = side.flows;
            Some(f)
        };
        Evaluation {
            findings: listed(s.unexplained, "still tried").into_iter().collect(),
            notes: listed(s.explained, "tried explained destinations")
                .into_iter()
                .collect(),
        }
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

    /// A capture run over events 1..3, a denied run over 3..100.
    fn two_runs() -> Ev {
        Ev::new()
            .run(NetworkMode::Capture, 1, 3)
            .run(NetworkMode::Denied, 3, 100)
            .connect("192.0.2.10:443", Phase::Startup)
            .connect("127.0.0.1:9000", Phase::Startup)
    }

    #[test]
    fn calls_alone_flag_without_any_flow() {
        let ev = two_runs()
            .connect("192.0.2.10:443", Phase::Startup)
            .connect("192.0.2.10:443", Phase::Startup)
            .connect_with("sendmsg", "[2001:db8::1]:53", Phase::Call("x".into()))
            .build();
        let eval = evaluate(&ev);
        assert_eq!(eval.findings.len(), 1);
        let f = &eval.findings[0];
        assert_eq!(
            f.summary,
            "with the network denied it still tried (3 syscalls, 0 packets in all): 2 syscalls, \
             0 packets to 192.0.2.10:443; 1 syscall, 0 packets to [2001:db8::1]:53 during \
             startup, call:x"
        );
        // The capture run's call is not counted.
        assert_eq!(f.evidence, vec![3, 4, 5]);
        assert_eq!(f.phase, Some(Phase::Startup));
    }

    #[test]
    fn a_datagram_socket_connected_and_never_sent_on_tried_nothing() {
        let ev = two_runs()
            .connect_typed("[2001:db8::8888]:443", 2, Phase::Startup)
            .build();
        assert!(evaluate(&ev).findings.is_empty());
        let ev = two_runs()
            .connect_typed("[2001:db8::8888]:443", 1, Phase::Startup)
            .build();
        assert_eq!(evaluate(&ev).findings.len(), 1);
    }

    #[test]
    fn calls_and_packets_are_counted_per_destination() {
        let ev = two_runs()
            .connect("192.0.2.10:443", Phase::Startup)
            .connect("192.0.2.10:443", Phase::Startup)
            .connect("192.0.2.10:443", Phase::Startup)
            .connect_with("sendto", "198.18.0.2:53", Phase::Startup)
            .flow(
                F::tcp("192.0.2.10:443")
                    .denied()
                    .packets(7)
                    .events(&[3, 4, 5]),
            )
            .flow(F::dns("exfil.example", "A").denied().events(&[6]))
            // The capture run's flow is not counted.
            .flow(F::tcp("192.0.2.10:443").packets(2).events(&[1]))
            .build();
        let eval = evaluate(&ev);
        let f = &eval.findings[0];
        assert_eq!(
            f.summary,
            "with the network denied it still tried (4 syscalls, 8 packets in all): 3 syscalls, \
             7 packets to 192.0.2.10:443; 1 DNS query for exfil.example during startup"
        );
        assert_eq!(f.flows, vec![1, 2]);
    }

    #[test]
    fn packets_alone_flag() {
        let ev = two_runs()
            .flow(F::udp("192.0.2.50:123").denied().packets(2))
            .build();
        let s = &evaluate(&ev).findings[0].summary;
        assert!(s.contains("0 syscalls, 2 packets to 192.0.2.50:123"), "{s}");
    }

    #[test]
    fn a_quiet_denied_run_passes() {
        let ev = two_runs()
            .connect("127.0.0.1:9000", Phase::Startup)
            .connect("unix:/run/app.sock", Phase::Startup)
            .connect("[::1]:80", Phase::Startup)
            .build();
        assert_eq!(evaluate(&ev), Evaluation::default());
        // Without a denied run nothing is counted (and the channel is missing).
        let ev = Ev::new()
            .connect("192.0.2.10:443", Phase::Startup)
            .flow(F::tcp("192.0.2.10:443").events(&[1]))
            .build();
        assert_eq!(evaluate(&ev), Evaluation::default());
    }

    #[test]
    fn what_the_entry_names_is_a_note_and_the_rest_still_flags() {
        let why = "named in the entry's environment (GITLAB_API_URL)";
        let ev = two_runs()
            .connect_with("sendto", "198.18.0.2:53", Phase::Startup)
            .connect_with("sendto", "198.18.0.2:53", Phase::Startup)
            .flow(F::dns("gitlab.com", "A").denied().events(&[3]))
            .flow(
                F::dns("beacon.collector.example", "A")
                    .denied()
                    .events(&[4]),
            )
            .explained(&[("gitlab.com", why)])
            .build();
        let e = evaluate(&ev);
        assert_eq!(
            crate::testutil::summaries(e.clone()),
            ["with the network denied it still tried (1 syscall, 1 packet in all): 1 DNS query for beacon.collector.example during startup"]
        );
        assert_eq!(e.notes.len(), 1);
        assert_eq!(
            e.notes[0].summary,
            format!("with the network denied it tried explained destinations (1 syscall, 1 packet in all): 1 DNS query for gitlab.com ({why}) during startup")
        );
        // Only explained tries: no finding.
        let ev = two_runs()
            .connect_with("sendto", "198.18.0.2:53", Phase::Startup)
            .flow(F::dns("api.gitlab.com", "A").denied().events(&[3]))
            .explained(&[("gitlab.com", why)])
            .build();
        let e = evaluate(&ev);
        assert!(e.findings.is_empty(), "{:?}", e.findings);
        assert_eq!(e.notes.len(), 1);
    }
}
