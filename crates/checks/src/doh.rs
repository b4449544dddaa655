//! `doh`: DNS hidden inside encrypted traffic (DNS over HTTPS, TLS or QUIC).
//!
//! A server that resolves names through a public DoH/DoT resolver instead of the system's
//! resolver hides which names it looks up, and so where it really connects: the edge sees one
//! TLS connection to the resolver and none of the questions. A flow counts when:
//!
//! - one of its names (the DNS question, the name its synthetic address was handed out for,
//!   the TLS SNI, the HTTP `Host`) is a known resolver name of [`RESOLVER_NAMES`] or a
//!   subdomain of one (`mozilla.cloudflare-dns.com`); looking such a name up is the first
//!   step of using it;
//! - or it goes to a known resolver address of [`RESOLVER_ADDRESSES`] on port 443 (HTTPS,
//!   HTTP/3) or 853 (DNS over TLS or QUIC), whatever its names: a hard-coded resolver address
//!   needs no lookup.
//!
//! Flows are grouped by resolver and port; Unix canary sockets are not looked at.

use crate::net::{self, Keyed, PhaseOf};
use crate::text;
use crate::{Channel, CheckInfo, Evaluation, Evaluator};
use glassbox_model::{Event, Flow, FlowProtocol, NetworkMode, Severity};
use std::net::IpAddr;

pub(crate) const INFO: CheckInfo = CheckInfo {
    id: "doh",
    version: 2,
    claim: "no hidden DNS (DNS over HTTPS or TLS)",
    severity: Severity::Medium,
    channels: &[Channel::PacketEdge],
    accuses: "",
    sources: &["doh.rs", "net.rs", "text.rs"],
};

/// Host names of public DNS-over-HTTPS/TLS resolvers; each also covers its subdomains.
/// Data, kept by hand from the providers' own documentation: Google, Cloudflare (incl. the
/// per-client `*.cloudflare-dns.com` names), Quad9, OpenDNS/Cisco, AdGuard, CleanBrowsing,
/// NextDNS (per-profile subdomains), Mullvad, Alibaba, DNSPod (`doh.pub`), DNS.SB.
pub(crate) const RESOLVER_NAMES: &[&str] = &[
    "dns.google",
    "dns.google.com",
    "cloudflare-dns.com",
    "one.one.one.one",
    "1dot1dot1dot1.cloudflare-dns.com",
    "dns.quad9.net",
    "dns9.quad9.net",
    "dns10.quad9.net",
    "dns11.quad9.net",
    "doh.opendns.com",
    "dns.adguard.com",
    "dns.adguard-dns.com",
    "doh.cleanbrowsing.org",
    "dns.nextdns.io",
    "doh.mullvad.net",
    "dns.alidns.com",
    "doh.pub",
    "dns.sb",
];

/// Addresses of the same resolvers (counted on ports [`RESOLVER_PORTS`] only).
pub(crate) const RESOLVER_ADDRESSES: &[&str] = &[
    "8.8.8.8",
    "8.8.4.4",
    "2001:4860:4860::8888",
    "2001:4860:4860::8844",
    "1.1.1.1",
    "1.0.0.1",
    "2606:4700:4700::1111",
    "2606:4700:4700::1001",
    "9.9.9.9",
    "149.112.112.112",
    "2620:fe::fe",
    "208.67.222.222",
    "208.67.220.220",
    "94.140.14.14",
    "94.140.15.15",
];

/// HTTPS (DoH over TCP, or HTTP/3 over UDP) and DNS over TLS / QUIC.
pub(crate) const RESOLVER_PORTS: &[u16] = &[443, 853];

/// The known resolver name `name` is, or is under.
pub(crate) fn resolver_name(name: &str) -> Option<&'static str> {
    RESOLVER_NAMES
        .iter()
        .copied()
        .find(|r| name == *r || name.strip_suffix(r).is_some_and(|head| head.ends_with('.')))
}

/// Whether `ip` is a known resolver address.
pub(crate) fn resolver_address(ip: IpAddr) -> bool {
    RESOLVER_ADDRESSES
        .iter()
        .any(|a| a.parse::<IpAddr>().ok() == Some(ip))
}

/// Why a flow counts: the resolver (its name or address) and how it was seen.
fn classify(f: &Flow) -> Option<(String, String)> {
    if let Some((what, n)) = net::names(f)
        .into_iter()
        .find(|(_, n)| resolver_name(n).is_some())
    {
        return Some((n, what.to_string()));
    }
    let (ip, port) = net::ip_port(&f.dst)?;
    (resolver_address(ip) && RESOLVER_PORTS.contains(&port))
        .then(|| (ip.to_string(), "address".to_string()))
}

#[derive(Debug, Default)]
struct Uses {
    /// How each flow was recognized (`SNI`, `address`...).
    how: Vec<String>,
    protocols: Vec<FlowProtocol>,
    destinations: Vec<String>,
    flows: Vec<u64>,
    flow_count: u64,
    bytes: u64,
    modes: Vec<NetworkMode>,
    ids: Vec<u64>,
}

/// The check's state over one run.
pub(crate) struct State {
    groups: Keyed<(String, u16, bool), Uses>,
    phases: PhaseOf,
}

pub(crate) fn start(c: &crate::Context<'_>) -> Box<dyn Evaluator> {
    let mut s = State {
        groups: Keyed::new(),
        phases: PhaseOf::default(),
    };
    for f in c.flows {
        if f.protocol == FlowProtocol::Unix {
            continue;
        }
        let Some((resolver, how)) = classify(f) else {
            continue;
        };
        let port = net::ip_port(&f.dst).map_or(0, |(_, p)| p);
        let lookup = f.protocol == FlowProtocol::Dns;
        s.phases.want(&f.events);
        let Some(u) = s.groups.get((resolver, port, lookup)) else {
            continue;
        };
        if !u.how.contains(&how) {
            u.how.push(how);
        }
        if !u.protocols.contains(&f.protocol) {
            u.protocols.push(f.protocol);
        }
        let d = net::addr(&f.dst);
        if u.destinations.len() < 3 && !u.destinations.contains(&d) {
            u.destinations.push(d);
        }
        if !u.modes.contains(&f.mode) {
            u.modes.push(f.mode);
        }
        net::add_ids(&mut u.flows, &[f.id]);
        u.flow_count += 1;
        u.bytes += f.bytes_out;
        net::add_ids(&mut u.ids, &f.events);
    }
    Box::new(s)
}

impl Evaluator for State {
    fn event(&mut self, e: &Event) {
        self.phases.see(e);
    }

    fn finish(self: Box<Self>) -> Evaluation {
        let State { groups, phases } = *self;
        let mut findings = Vec::new();
        for ((resolver, port, lookup), u) in groups.items {
            let kind = if lookup {
                "looked up the DNS-over-HTTPS/TLS resolver".to_string()
            } else {
                let over = match (port, u.protocols.as_slice()) {
                    (853, [FlowProtocol::Udp]) => "DNS over QUIC",
                    (853, _) => "DNS over TLS",
                    (_, [FlowProtocol::Udp]) => "DNS over HTTP/3",
                    _ => "DNS over HTTPS",
                };
                format!("{over} via")
            };
            let ps = phases.of(&u.ids);
            let mut summary = format!(
                "destination hidden: {kind} {} (by {}; {}",
                net::show(&resolver),
                u.how.join(", "),
                u.destinations.join(", "),
            );
            summary += &format!(
                ", {}, {}) ({})",
                net::count(u.flow_count, "flow", "flows"),
                net::bytes_out(u.bytes),
                net::runs(&u.modes)
            );
            if !ps.is_empty() {
                summary += &format!(" during {}", text::phases(&ps));
            }
            let mut f = INFO.finding(summary, u.ids, ps.first().cloned());
            f.flows = u.flows;
            findings.push(f);
        }
        if groups.overflow > 0 {
            findings.push(INFO.finding(
                format!(
                    "{} more flows to further DNS-over-HTTPS/TLS resolvers (not listed)",
                    groups.overflow
                ),
                Vec::new(),
                None,
            ));
        }
        Evaluation {
            findings,
            notes: Vec::new(),
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

    fn summaries(ev: &glassbox_model::Evidence) -> Vec<String> {
        crate::testutil::summaries(evaluate(ev))
    }

    #[test]
    fn by_sni() {
        let ev = Ev::new()
            .connect("198.18.1.5:443", Phase::Call("search".into()))
            .flow(
                F::tcp("198.18.1.5:443")
                    .name("mozilla.cloudflare-dns.com")
                    .sni("Mozilla.Cloudflare-DNS.com")
                    .sample(&b"hello"[..])
                    .events(&[1]),
            )
            .build();
        let eval = evaluate(&ev);
        assert_eq!(eval.findings.len(), 1);
        assert_eq!(
            eval.findings[0].summary,
            "destination hidden: DNS over HTTPS via mozilla.cloudflare-dns.com (by DNS name; \
             198.18.1.5:443, 1 flow, 5 bytes out) (capture run) during call:search"
        );
        assert_eq!(eval.findings[0].flows, vec![1]);
        assert_eq!(eval.findings[0].evidence, vec![1]);
    }

    #[test]
    fn by_address() {
        let ev = Ev::new()
            .flow(F::tcp("1.1.1.1:853"))
            .flow(F::tcp("[2001:4860:4860::8888]:443").sni("example.org"))
            .flow(F::udp("9.9.9.9:853").denied())
            .build();
        let s = summaries(&ev);
        assert_eq!(s.len(), 3, "{s:?}");
        assert!(
            s[0].starts_with("destination hidden: DNS over TLS via 1.1.1.1 (by address;"),
            "{s:?}"
        );
        assert!(
            s[1].starts_with("destination hidden: DNS over HTTPS via 2001:4860:4860::8888"),
            "{s:?}"
        );
        assert!(
            s[2].starts_with("destination hidden: DNS over QUIC via 9.9.9.9"),
            "{s:?}"
        );
    }

    #[test]
    fn by_lookup_and_http_host() {
        let ev = Ev::new()
            .flow(F::dns("dns.google", "A"))
            .flow(F::tcp("192.0.2.1:80").http("GET", "/dns-query", Some("doh.pub:80")))
            .build();
        let s = summaries(&ev);
        assert_eq!(s.len(), 2, "{s:?}");
        assert!(
            s[0].starts_with(
                "destination hidden: looked up the DNS-over-HTTPS/TLS resolver dns.google (by DNS query"
            ),
            "{s:?}"
        );
        assert!(s[1].contains("via doh.pub (by Host"), "{s:?}");
    }

    #[test]
    fn other_traffic_passes() {
        let ev = Ev::new()
            // A resolver's address on another port, plain DNS to it.
            .flow(F::tcp("1.1.1.1:80"))
            .flow(F::dns("example.org", "A").to("8.8.8.8:53"))
            // Names that merely look alike.
            .flow(F::tcp("198.18.1.9:443").name("notcloudflare-dns.com"))
            .flow(F::tcp("198.18.1.10:443").sni("dns.google.evil.example"))
            .flow(F::tcp("198.18.1.11:443").sni("api.example"))
            .build();
        assert_eq!(evaluate(&ev), Evaluation::default());
    }

    #[test]
    fn resolver_names_cover_subdomains() {
        assert_eq!(resolver_name("dns.nextdns.io"), Some("dns.nextdns.io"));
        assert_eq!(
            resolver_name("abc123.dns.nextdns.io"),
            Some("dns.nextdns.io")
        );
        assert_eq!(resolver_name("xdns.nextdns.io"), None);
        assert_eq!(resolver_name("dns11.quad9.net"), Some("dns11.quad9.net"));
        assert!(resolver_address("2620:fe::fe".parse().unwrap()));
        assert!(!resolver_address("192.0.2.1".parse().unwrap()));
    }
}
