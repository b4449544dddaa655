//! `unexplained-egress`: every outbound attempt the user's allow list does not explain.
//!
//! An attempt is a flow at the edge of either run (a DNS question, a TCP connection, UDP
//! datagrams, ICMP, other IP traffic) to an address off the sandbox (see
//! [`crate::net::is_egress`]), or a connect or send event (`connect`, `sendto`, `sendmsg`,
//! `sendmmsg`) to an IP address off the sandbox that no flow matched ("no packet reached the
//! edge": what the recorder saw still counts). A connect to the sandbox's resolver without a
//! flow asked no question and is left out: DNS is judged by the names asked.
//!
//! `manifest.network.allow` (`HOST` or `HOST:PORT`, from `--allow-host`) explains an attempt
//! when HOST is, case-insensitively, one of the flow's names (the DNS question, the name its
//! synthetic address was handed out for, the TLS SNI, the HTTP `Host` without port) or the
//! destination IP literal, and PORT, when given, is the destination port (a DNS question for
//! an allowed host is explained whatever the port). A connect event to a synthetic address
//! carries the name the edge's DNS handed that address out for.
//!
//! What the audited entry names itself explains an attempt too (see [`crate::explain`]): a
//! host in its environment or arguments, its package's homepage, repository or issue
//! tracker domain, its `server.json`, a declared secret's documented hosts, and, during a
//! call, a URL of that call's own input. Every name the flow carries must be explained.
//!
//! One finding per destination nothing explains: a DNS name, a host name and port, or an IP
//! address and port. A flow to an address the edge's DNS did not hand out and with no name is
//! a direct-IP connection, named as such. Each explained destination is a note saying by
//! what ("…; explained: the package's homepage domain, vendor.example (npm `homepage`)").
//! Not an accusation: servers call APIs; the user decides which are expected.
//!
//! Version 6 judges as version 5 did, but says `not-observed`, never `pass`, where the run lost
//! calls the recorder should have seen (`manifest.recorder.lost`: the rule is
//! `outcome.rs`'s, which its lock now covers).
//!
//! Version 7: what the audited entry explains is derived by the check from the names the audit
//! recorded (`manifest.network.names`, see `explain.rs`), never from the package's own name; a
//! vendor's label explains only under a generic suffix, and a tenant's name on a shared hosting
//! domain is never explained by its provider's.
//!
//! Version 8: what the input named includes the values glassbox gave a resource template's
//! variables and a prompt's arguments, under the read's or get's phase (`named.rs`), as it
//! includes a call's arguments.
//!
//! Version 9: what the input named includes a host given without a URL (`named.rs`): a host
//! parameter's `m1x2.example.test`, an address with its port, a keyword connection string's
//! `host=` (issue 34: a host glassbox itself gave a tool was called unexplained egress).
//!
//! Version 10 explains a name under `.test` (reserved; the names glassbox's generated arguments
//! give) that an earlier call's input gave, at any time after that call (`named.rs`): a page a
//! browser tool opened goes on loading, and retrying, through the calls after it, and was
//! called unexplained egress in the denied run.
//!
//! Version 11 does not count a connect of a datagram socket that no packet followed (the
//! recorder now says a connect's socket type): nothing was sent, as with the C library's port-0
//! probe before; a browser checks that IPv6 reaches the Internet so. A stream socket's connect
//! still counts.

use crate::explain::{self, Explains};
use crate::net::{self, Keyed, PhaseOf};
use crate::text;
use crate::{Channel, CheckInfo, Evaluation, Evaluator};
use glassbox_model::{Event, EventKind, Flow, FlowProtocol, NetworkMode, Phase, Severity};
use std::collections::{HashMap, HashSet};
use std::net::IpAddr;

pub(crate) const INFO: CheckInfo = CheckInfo {
    id: "unexplained-egress",
    version: 11,
    claim: "no unexplained network egress",
    severity: Severity::High,
    channels: &[Channel::Syscalls, Channel::PacketEdge],
    also_reads: &[],
    file_calls: false,
    accuses: "",
    sources: &[
        "unexplained_egress.rs",
        "links.rs",
        "explain.rs",
        "named.rs",
        "net.rs",
        "text.rs",
        "outcome.rs",
    ],
};

/// Extra names (SNI, Host) listed per destination.
const NAMES_SHOWN: usize = 3;

/// A destination.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Dest {
    /// A DNS question for a name.
    Dns(String),
    /// A host name (of a synthetic address) and port.
    Host(String, u16),
    /// An IP address and port.
    Ip(IpAddr, u16),
}

/// What was sent to one destination.
#[derive(Debug, Default)]
struct Attempts {
    protocols: Vec<FlowProtocol>,
    flows: Vec<u64>,
    flow_count: u64,
    packets: u64,
    bytes: u64,
    modes: Vec<NetworkMode>,
    /// DNS record types asked.
    qtypes: Vec<String>,
    /// DNS servers asked other than the sandbox's resolver.
    servers: Vec<String>,
    /// Synthetic addresses a host name was reached at.
    addresses: Vec<String>,
    /// SNI and Host names seen (`SNI x`).
    names: Vec<String>,
    /// Connect and send events no flow matched.
    unmatched: u64,
    ids: Vec<u64>,
    /// What explains the destination (its first attempt's reason): a note, not a finding.
    why: Option<String>,
}

impl Attempts {
    fn mode(&mut self, m: NetworkMode) {
        if !self.modes.contains(&m) {
            self.modes.push(m);
        }
    }
}

/// The check's state over one run.
pub(crate) struct State {
    explains: Explains,
    /// Events some flow matched.
    matched: HashSet<u64>,
    /// Names of synthetic addresses, per run.
    names: HashMap<(NetworkMode, IpAddr), String>,
    network: glassbox_model::NetworkSettings,
    groups: Keyed<Dest, Attempts>,
    /// Destinations something explains, each with why: notes.
    explained: Keyed<Dest, Attempts>,
    phases: PhaseOf,
}

pub(crate) fn start(c: &crate::Context<'_>) -> Box<dyn Evaluator> {
    let mut s = State {
        explains: Explains::new(c.manifest),
        matched: c
            .flows
            .iter()
            .flat_map(|f| f.events.iter().copied())
            .collect(),
        names: net::synthetic_names(c.flows),
        network: c.manifest.network.clone(),
        groups: Keyed::new(),
        explained: Keyed::new(),
        phases: PhaseOf::default(),
    };
    for f in c.flows {
        s.flow(f);
    }
    Box::new(s)
}

/// What an allow list entry is, as a note says it.
fn allowed(mode: NetworkMode) -> String {
    match mode {
        NetworkMode::Install => {
            "allowed (`--allow-host`, or the package registry the install relayed)".into()
        }
        _ => "allowed (`--allow-host`)".into(),
    }
}

impl State {
    fn flow(&mut self, f: &Flow) {
        if f.protocol == FlowProtocol::Unix {
            return;
        }
        let Some((ip, port)) = net::ip_port(&f.dst) else {
            return;
        };
        if !net::is_egress(ip) {
            return;
        }
        let names = net::names(f);
        let allow = self.explains.allow(f.mode);
        let (dest, why) = match &f.dns {
            Some(q) => {
                let name = net::norm_host(q.name.as_slice());
                let why = if allow.allows(&name, None) {
                    Some(allowed(f.mode))
                } else {
                    self.explains.why([name.as_str()], f.t_ns)
                };
                (Dest::Dns(name), why)
            }
            None => {
                // The name the edge handed the address out for (from the flow, or from the
                // DNS answers when the flow lacks it).
                let host = f
                    .dns_name
                    .as_ref()
                    .map(|n| net::norm_host(n.as_slice()))
                    .or_else(|| {
                        net::is_synthetic(ip)
                            .then(|| self.names.get(&(f.mode, net::synthetic_v4(ip))).cloned())
                            .flatten()
                    });
                let allowed_here = names.iter().any(|(_, n)| allow.allows(n, Some(port)))
                    || host.as_deref().is_some_and(|h| allow.allows(h, Some(port)))
                    || allow.allows_ip(ip, port);
                // Every name the flow carries, or its address when it carries none.
                let ip_text = ip.to_canonical().to_string();
                let mut all: Vec<&str> = names.iter().map(|(_, n)| n.as_str()).collect();
                all.extend(host.as_deref());
                if all.is_empty() {
                    all.push(&ip_text);
                }
                let why = if allowed_here {
                    Some(allowed(f.mode))
                } else {
                    self.explains.why(all, f.t_ns)
                };
                let dest = match host {
                    Some(h) => Dest::Host(h, port),
                    None => Dest::Ip(ip, port),
                };
                (dest, why)
            }
        };
        let named = matches!(dest, Dest::Host(..));
        self.phases.want(&f.events);
        let groups = match &why {
            Some(_) => &mut self.explained,
            None => &mut self.groups,
        };
        let Some(a) = groups.get(dest) else {
            return;
        };
        if a.why.is_none() {
            a.why = why;
        }
        if !a.protocols.contains(&f.protocol) {
            a.protocols.push(f.protocol);
        }
        net::add_ids(&mut a.flows, &[f.id]);
        a.flow_count += 1;
        a.packets += f.packets_out;
        a.bytes += f.bytes_out;
        a.mode(f.mode);
        net::add_ids(&mut a.ids, &f.events);
        if let Some(q) = &f.dns {
            if !a.qtypes.contains(&q.qtype) {
                a.qtypes.push(q.qtype.clone());
            }
            if !net::is_resolver(ip, port) && a.servers.len() < NAMES_SHOWN {
                let s = net::addr(&f.dst);
                if !a.servers.contains(&s) {
                    a.servers.push(s);
                }
            }
        } else if named && a.addresses.len() < NAMES_SHOWN {
            let s = ip.to_string();
            if !a.addresses.contains(&s) {
                a.addresses.push(s);
            }
        }
        for (what, n) in names {
            if matches!(what, "SNI" | "Host") {
                let s = format!("{what} {}", net::show(&n));
                if a.names.len() < NAMES_SHOWN && !a.names.contains(&s) {
                    a.names.push(s);
                }
            }
        }
    }

    fn unmatched(&mut self, e: &Event, ip: IpAddr, port: u16) {
        let mode = self.network.mode_of_event(e.id);
        let name = net::is_synthetic(ip)
            .then(|| self.names.get(&(mode, net::synthetic_v4(ip))).cloned())
            .flatten();
        let allow = self.explains.allow(mode);
        let why = if allow.allows_ip(ip, port)
            || name.as_deref().is_some_and(|n| allow.allows(n, Some(port)))
        {
            Some(allowed(mode))
        } else {
            let ip_text = ip.to_canonical().to_string();
            self.explains
                .why([name.as_deref().unwrap_or(&ip_text)], e.t_ns)
        };
        let (dest, named) = match name {
            Some(n) => (Dest::Host(n, port), true),
            None => (Dest::Ip(ip, port), false),
        };
        let groups = match &why {
            Some(_) => &mut self.explained,
            None => &mut self.groups,
        };
        let Some(a) = groups.get(dest) else {
            return;
        };
        if a.why.is_none() {
            a.why = why;
        }
        a.unmatched += 1;
        a.mode(mode);
        if named && a.addresses.len() < NAMES_SHOWN {
            let s = ip.to_string();
            if !a.addresses.contains(&s) {
                a.addresses.push(s);
            }
        }
        net::add_ids(&mut a.ids, &[e.id]);
        if a.ids.contains(&e.id) {
            self.phases.want(&[e.id]);
            self.phases.see(e);
        }
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
        if !net::is_egress(ip) || net::is_resolver(ip, port) || self.matched.contains(&e.id) {
            return;
        }
        // A connect to port 0 with no packet is how the C library picks a source address for
        // each answer of a lookup (RFC 6724 sorting): a UDP socket connected, nothing sent.
        // The lookup itself is a DNS flow, judged as such.
        if port == 0 {
            return;
        }
        // Nor does a connect of any other datagram socket send anything (a browser's check
        // that IPv6 reaches the Internet connects one to Google's public DNS address): what
        // it sends later is a flow (version 11). A stream socket's connect still counts.
        if e.kind.is_datagram_connect() {
            return;
        }
        self.unmatched(e, ip, port);
    }

    fn finish(self: Box<Self>) -> Evaluation {
        let State {
            groups,
            explained,
            phases,
            ..
        } = *self;
        let listed = |groups: Keyed<Dest, Attempts>| {
            let mut out = Vec::new();
            for (dest, mut a) in groups.items {
                a.ids.sort_unstable();
                let ps = phases.of(&a.ids);
                let mut s = summary(&dest, &a, &ps);
                if let Some(why) = &a.why {
                    s = explain::note(s, why);
                }
                let mut f = INFO.finding(s, a.ids, ps.first().cloned());
                f.flows = a.flows;
                out.push(f);
            }
            (out, groups.overflow)
        };
        let (mut notes, more) = listed(explained);
        if more > 0 {
            notes.push(INFO.finding(
                format!("{more} more explained attempts to further destinations (not listed)"),
                Vec::new(),
                None,
            ));
        }
        let (mut findings, overflow) = listed(groups);
        if overflow > 0 {
            findings.push(INFO.finding(
                format!(
                    "{overflow} more unexplained attempts to further destinations (not listed)"
                ),
                Vec::new(),
                None,
            ));
        }
        Evaluation { findings, notes }
    }
}

fn protocols(ps: &[FlowProtocol]) -> String {
    ps.iter()
        .map(|p| net::protocol(*p))
        .collect::<Vec<_>>()
        .join("+")
}

fn summary(dest: &Dest, a: &Attempts, ps: &[Phase]) -> String {
    let mut s = match dest {
        Dest::Dns(name) => {
            let mut s = format!("DNS query for {}", net::show(name));
            if !a.qtypes.is_empty() {
                s += &format!(" ({})", net::show(&a.qtypes.join(", ")));
            }
            if !a.servers.is_empty() {
                s += &format!(
                    " sent to {} (not the sandbox's resolver)",
                    a.servers.join(", ")
                );
            }
            s + &format!(": {}", net::count(a.flow_count, "query", "queries"))
        }
        Dest::Host(name, port) => {
            let what = if a.flow_count > 0 {
                protocols(&a.protocols)
            } else {
                "connect".to_string()
            };
            format!("{what} to {}:{port}", net::show(name))
        }
        Dest::Ip(ip, port) => {
            let to = net::ip_addr(*ip, *port);
            let direct = !net::is_synthetic(*ip);
            match (a.flow_count > 0, direct) {
                (true, true) => {
                    let verb = match a.protocols.as_slice() {
                        [FlowProtocol::Tcp] => "connected directly to".to_string(),
                        ps => format!("sent {} directly to", protocols(ps)),
                    };
                    format!("{verb} {to}, no DNS lookup")
                }
                (true, false) => format!("{} to {to}", protocols(&a.protocols)),
                (false, true) => format!("connect directly to {to}, no DNS lookup"),
                (false, false) => format!("connect to {to}"),
            }
        }
    };
    let mut extras = Vec::new();
    if !a.addresses.is_empty() {
        extras.push(format!("at {}", a.addresses.join(", ")));
    }
    extras.extend(a.names.iter().cloned());
    if !extras.is_empty() {
        s += &format!(" ({})", extras.join("; "));
    }
    if a.flow_count > 0 && !matches!(dest, Dest::Dns(_)) {
        s += &format!(
            ": {}, {}, {}",
            net::count(a.flow_count, "flow", "flows"),
            net::count(a.packets, "packet", "packets"),
            net::bytes_out(a.bytes)
        );
    }
    if a.unmatched > 0 {
        let (sep, calls) = if a.flow_count > 0 {
            (
                "; ",
                ("more connect or send call", "more connect or send calls"),
            )
        } else {
            (": ", ("connect or send call", "connect or send calls"))
        };
        s += &format!(
            "{sep}{}, no packet reached the edge",
            net::count(a.unmatched, calls.0, calls.1)
        );
    }
    s += &format!(" ({})", net::runs(&a.modes));
    if !ps.is_empty() {
        s += &format!(" during {}", text::phases(ps));
    }
    s
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

    fn summaries(ev: &glassbox_model::Evidence) -> Vec<String> {
        crate::testutil::summaries(evaluate(ev))
    }

    /// No finding, and a note for each destination, saying what explains it.
    fn assert_explained(ev: &glassbox_model::Evidence) {
        let e = evaluate(ev);
        assert!(e.findings.is_empty(), "{:?}", e.findings);
        assert!(!e.notes.is_empty());
        for n in &e.notes {
            assert!(n.summary.contains("; explained: "), "{}", n.summary);
        }
    }

    /// A DNS question for `name` answered with 198.18.1.3, then a TLS connection to it.
    fn lookup_then_connect(name: &str) -> Ev {
        Ev::new()
            .connect_with("sendto", "198.18.0.2:53", Phase::Startup)
            .connect("198.18.1.3:443", Phase::Call("fetch".into()))
            .flow(
                F::dns(name, "A")
                    .answers(&["198.18.1.3"])
                    .events(&[1])
                    .sample(&b"query"[..]),
            )
            .flow(
                F::tcp("198.18.1.3:443")
                    .src("198.18.0.1:40000")
                    .name(name)
                    .sni(name)
                    .sample(&b"hello"[..])
                    .packets(3)
                    .events(&[2]),
            )
    }

    #[test]
    fn the_registry_explains_the_install_run_and_nothing_else() {
        let registry = |install_end: u64| {
            Ev::new()
                .connect_with("sendto", "198.18.0.2:53", Phase::Install)
                .connect("198.18.1.3:443", Phase::Install)
                .install_run(1, install_end, &["registry.example:443"])
                .run(NetworkMode::Capture, install_end, 10)
                .flow(
                    F::dns("registry.example", "A")
                        .answers(&["198.18.1.3"])
                        .events(&[1])
                        .install(),
                )
                .flow(
                    F::tcp("198.18.1.3:443")
                        .name("registry.example")
                        .sni("registry.example")
                        .events(&[2])
                        .install(),
                )
        };
        assert_explained(&registry(3).build());
        // The same registry reached by the server itself is egress like any other.
        let ev = registry(3)
            .connect("198.18.1.3:443", Phase::Call("fetch".into()))
            .flow(
                F::tcp("198.18.1.3:443")
                    .name("registry.example")
                    .sni("registry.example")
                    .events(&[3]),
            )
            .build();
        assert_eq!(
            summaries(&ev),
            ["TCP to registry.example:443 (at 198.18.1.3; SNI registry.example): 1 flow, 1 packet, 0 bytes out (capture run) during call:fetch"]
        );
        // Another host during the install is egress of the install (a lifecycle script).
        let ev = registry(4)
            .connect("198.18.1.4:443", Phase::Install)
            .flow(
                F::tcp("198.18.1.4:443")
                    .name("collector.example")
                    .events(&[3])
                    .install(),
            )
            .build();
        let s = summaries(&ev);
        assert_eq!(s.len(), 1, "{s:?}");
        assert!(
            s[0].contains("collector.example:443") && s[0].contains("(install run)"),
            "{}",
            s[0]
        );
    }

    #[test]
    fn a_lookup_and_connect_explained_by_allow_host_passes() {
        let ev = lookup_then_connect("api.example")
            .allow(&["api.example"])
            .build();
        assert_explained(&ev);
        // Case-insensitively, a trailing dot aside, and with its port.
        let ev = lookup_then_connect("API.Example.")
            .allow(&["api.example:443"])
            .build();
        assert_explained(&ev);
    }

    #[test]
    fn an_unlisted_lookup_and_connect_flag_per_destination() {
        let ev = lookup_then_connect("exfil.example")
            .allow(&["api.example"])
            .build();
        let eval = evaluate(&ev);
        let s: Vec<&str> = eval.findings.iter().map(|f| f.summary.as_str()).collect();
        assert_eq!(
            s,
            vec![
                "DNS query for exfil.example (A): 1 query (capture run) during startup",
                "TCP to exfil.example:443 (at 198.18.1.3; SNI exfil.example): 1 flow, 3 packets, \
                 5 bytes out (capture run) during call:fetch",
            ]
        );
        assert_eq!(eval.findings[0].evidence, vec![1]);
        assert_eq!(eval.findings[0].flows, vec![1]);
        assert_eq!(eval.findings[1].evidence, vec![2]);
        assert_eq!(eval.findings[1].flows, vec![2]);
        assert_eq!(eval.findings[1].phase, Some(Phase::Call("fetch".into())));
        assert!(eval.findings.iter().all(|f| !f.accusation));
    }

    #[test]
    fn an_allowed_host_on_another_port_explains_its_lookup_only() {
        let ev = lookup_then_connect("api.example")
            .allow(&["api.example:80"])
            .build();
        let s = summaries(&ev);
        assert_eq!(s.len(), 1);
        assert!(s[0].starts_with("TCP to api.example:443"), "{s:?}");
    }

    #[test]
    fn sni_or_host_or_ip_literal_explain_a_flow() {
        for allow in ["cdn.example", "192.0.2.10", "192.0.2.10:443"] {
            let ev = Ev::new()
                .connect("192.0.2.10:443", Phase::Startup)
                .flow(
                    F::tcp("192.0.2.10:443")
                        .sni("CDN.example")
                        .http("GET", "/", Some("cdn.example:443"))
                        .events(&[1]),
                )
                .allow(&[allow])
                .build();
            assert_explained(&ev);
        }
    }

    #[test]
    fn direct_ip_connections_are_named_as_such() {
        let ev = Ev::new()
            .connect("192.0.2.10:443", Phase::Startup)
            .connect_with("sendto", "[2001:db8::5]:9999", Phase::Startup)
            .flow(F::tcp("192.0.2.10:443").events(&[1]))
            .flow(F::udp("[2001:db8::5]:9999").events(&[2]))
            .flow(F::icmp("192.0.2.99"))
            .build();
        let s = summaries(&ev);
        assert_eq!(s.len(), 3);
        assert!(
            s[0].starts_with("connected directly to 192.0.2.10:443, no DNS lookup: 1 flow"),
            "{s:?}"
        );
        assert!(
            s[1].starts_with("sent UDP directly to [2001:db8::5]:9999, no DNS lookup"),
            "{s:?}"
        );
        assert!(
            s[2].starts_with("sent ICMP directly to 192.0.2.99, no DNS lookup"),
            "{s:?}"
        );
    }

    #[test]
    fn loopback_only_traffic_passes() {
        let ev = Ev::new()
            .connect("127.0.0.1:8080", Phase::Startup)
            .connect("[::1]:5432", Phase::Startup)
            .connect("[::ffff:127.0.0.1]:6379", Phase::Startup)
            .connect("0.0.0.0:80", Phase::Startup)
            .connect("198.18.0.1:9000", Phase::Startup)
            .connect("unix:/run/app.sock", Phase::Startup)
            .build();
        assert_eq!(evaluate(&ev), Evaluation::default());
    }

    #[test]
    fn a_call_no_flow_matched_still_counts() {
        let ev = Ev::new()
            .connect("192.0.2.20:8443", Phase::Startup)
            .connect("192.0.2.20:8443", Phase::Startup)
            .build();
        let eval = evaluate(&ev);
        assert_eq!(eval.findings.len(), 1);
        assert_eq!(
            eval.findings[0].summary,
            "connect directly to 192.0.2.20:8443, no DNS lookup: 2 connect or send calls, no \
             packet reached the edge (capture run) during startup"
        );
        assert_eq!(eval.findings[0].evidence, vec![1, 2]);
        // A datagram socket connected, nothing sent: no attempt; a stream socket's is one.
        let ev = Ev::new()
            .connect_typed("[2001:db8::8888]:443", 2, Phase::Startup)
            .build();
        assert_eq!(evaluate(&ev), Evaluation::default());
        let ev = Ev::new()
            .connect_typed("[2001:db8::8888]:443", 1, Phase::Startup)
            .build();
        assert_eq!(evaluate(&ev).findings.len(), 1);
        // Allowed by its address.
        let ev = Ev::new()
            .connect("192.0.2.20:8443", Phase::Startup)
            .allow(&["192.0.2.20"])
            .build();
        assert_explained(&ev);
    }

    #[test]
    fn a_call_to_a_synthetic_address_goes_with_its_name() {
        // glibc's address sorting connects a UDP socket to every answer without sending.
        let ev = lookup_then_connect("exfil.example")
            .connect("[64:ff9b:1:ffff::c612:103]:443", Phase::Startup)
            .build();
        let s = summaries(&ev);
        assert_eq!(s.len(), 2, "{s:?}");
        assert!(
            s[1].contains("; 1 more connect or send call, no packet reached the edge"),
            "{s:?}"
        );
        assert!(s[1].contains("64:ff9b:1:ffff::c612:103"), "{s:?}");
        // And is explained with it.
        let ev = lookup_then_connect("api.example")
            .connect("[64:ff9b:1:ffff::c612:103]:443", Phase::Startup)
            .allow(&["api.example"])
            .build();
        assert_explained(&ev);
    }

    #[test]
    fn a_bare_connect_to_the_resolver_asks_nothing() {
        let ev = Ev::new().connect("198.18.0.2:53", Phase::Startup).build();
        assert_eq!(evaluate(&ev), Evaluation::default());
    }

    #[test]
    fn the_denied_run_counts_too() {
        let ev = Ev::new()
            .flow(F::dns("exfil.example", "TXT").denied())
            .flow(F::dns("exfil.example", "TXT").to("8.8.8.8:53"))
            .build();
        let s = summaries(&ev);
        assert_eq!(
            s,
            vec![
                "DNS query for exfil.example (TXT) sent to 8.8.8.8:53 (not the sandbox's \
                 resolver): 2 queries (capture and denied runs)"
            ]
        );
    }

    #[test]
    fn a_flow_to_a_synthetic_address_without_its_name_gets_it_from_the_answers() {
        let ev = Ev::new()
            .flow(F::dns("api.example", "AAAA").answers(&["64:ff9b:1:ffff::c612:107"]))
            .flow(F::tcp("198.18.1.7:443"))
            .allow(&["api.example"])
            .build();
        assert_explained(&ev);
    }

    #[test]
    fn a_dns_packet_that_did_not_parse_still_counts() {
        let mut f = F::dns("x", "A");
        f.0.dns = None;
        let ev = Ev::new().flow(f).build();
        let s = summaries(&ev);
        assert_eq!(s.len(), 1);
        assert!(s[0].starts_with("DNS to 198.18.0.2:53: 1 flow"), "{s:?}");
    }

    #[test]
    fn hostile_names_are_escaped() {
        let ev = Ev::new().flow(F::dns("a\x1b[2J.example", "A")).build();
        let s = summaries(&ev);
        assert!(!s[0].contains('\x1b'), "{s:?}");
    }

    #[test]
    fn what_the_entry_names_explains_its_destinations_and_says_so() {
        let why = "the package's homepage domain, vendor.example (npm `homepage`)";
        let ev = lookup_then_connect("api.vendor.example")
            .explained(&[("vendor.example", why)])
            .build();
        let e = evaluate(&ev);
        assert!(e.findings.is_empty(), "{:?}", e.findings);
        let notes = crate::testutil::summaries(Evaluation {
            findings: e.notes,
            notes: Vec::new(),
        });
        assert_eq!(
            notes,
            [
                format!("DNS query for api.vendor.example (A): 1 query (capture run) during startup; explained: {why}"),
                format!("TCP to api.vendor.example:443 (at 198.18.1.3; SNI api.vendor.example): 1 flow, 3 packets, 5 bytes out (capture run) during call:fetch; explained: {why}"),
            ]
        );
        // A look-alike name, or another host, is still unexplained.
        for host in ["evilvendor.example", "vendor.example.collector.test"] {
            let ev = lookup_then_connect(host)
                .explained(&[("vendor.example", why)])
                .build();
            assert_eq!(summaries(&ev).len(), 2, "{host}");
        }
    }

    #[test]
    fn an_explained_name_fronting_for_another_is_not_explained() {
        // The lookup was for the vendor; the TLS SNI names a collector.
        let ev = Ev::new()
            .flow(
                F::dns("api.vendor.example", "A")
                    .answers(&["198.18.1.3"])
                    .events(&[1]),
            )
            .flow(
                F::tcp("198.18.1.3:443")
                    .name("api.vendor.example")
                    .sni("collector.example")
                    .events(&[2]),
            )
            .connect("198.18.0.1:53", Phase::Startup)
            .connect("198.18.1.3:443", Phase::Startup)
            .explained(&[(
                "vendor.example",
                "named in the entry's environment (API_URL)",
            )])
            .build();
        let e = evaluate(&ev);
        assert_eq!(e.notes.len(), 1, "{:?}", e.notes);
        assert_eq!(e.findings.len(), 1);
        assert!(e.findings[0].summary.contains("SNI collector.example"));
    }

    #[test]
    fn a_host_a_calls_own_url_named_is_explained_during_that_call() {
        let mut ev = lookup_then_connect("page.example.test").build();
        let m = &mut ev.manifest;
        m.session.tools = crate::testutil::tool_calls(
            "fetch",
            vec![serde_json::json!({"url": "https://page.example.test/gbx"})],
        );
        m.timings = vec![glassbox_model::PhaseTiming {
            phase: Phase::Call("fetch".into()),
            start_ns: 0,
            end_ns: u64::MAX / 2,
        }];
        let e = evaluate(&ev);
        assert!(e.findings.is_empty(), "{:?}", e.findings);
        assert!(e.notes.iter().all(|n| n
            .summary
            .ends_with("explained: its own input named it (argument `url` of call:fetch)")));
        // Outside that call's time, the same lookup is unexplained.
        ev.manifest.timings[0].start_ns = u64::MAX / 2;
        assert_eq!(evaluate(&ev).findings.len(), 2);
    }

    #[test]
    fn a_host_glassbox_gave_a_host_parameter_is_explained_during_that_call() {
        for given in [
            "page.example.test",
            "page.example.test:8443",
            "host=page.example.test",
        ] {
            let mut ev = lookup_then_connect("page.example.test").build();
            let m = &mut ev.manifest;
            m.session.tools = crate::testutil::tool_calls(
                "ping",
                vec![serde_json::json!({"target": {"host": given}})],
            );
            m.timings = vec![glassbox_model::PhaseTiming {
                phase: Phase::Call("ping".into()),
                start_ns: 0,
                end_ns: u64::MAX / 2,
            }];
            let e = evaluate(&ev);
            assert!(e.findings.is_empty(), "{given}: {:?}", e.findings);
            assert!(
                e.notes.iter().all(|n| n.summary.ends_with(
                    "explained: its own input named it (argument `target.host` of call:ping)"
                )),
                "{:?}",
                e.notes
            );
        }
    }
}
