//! `doh`: DNS hidden inside encrypted traffic (DNS over HTTPS, TLS or QUIC).
//!
//! A server that resolves names through a DoH/DoT resolver instead of the system's resolver
//! hides which names it looks up, and so where it really connects: on the wire there is one
//! TLS connection to the resolver and none of the questions. A flow counts when:
//!
//! - one of its names (the DNS question, the name its synthetic address was handed out for,
//!   the TLS SNI, the HTTP `Host`) is a known resolver name of [`RESOLVER_NAMES`] or a
//!   subdomain of one (`mozilla.cloudflare-dns.com`); looking such a name up is the first
//!   step of using it;
//! - or it goes to a known resolver address of [`RESOLVER_ADDRESSES`] on port 443 (HTTPS,
//!   HTTP/3) or 853 (DNS over TLS or QUIC), whatever its names: a hard-coded resolver address
//!   needs no lookup;
//! - or it carries a DNS-over-HTTPS request, whatever it went to: the edge terminates TLS,
//!   reads the requests inside and decodes those in DoH's forms (RFC 8484's
//!   `application/dns-message` POST and `?dns=` GET, the JSON API), recording their
//!   questions (`HttpExchange::dns`, or `dns_error` for a message it could not read). A
//!   resolver of the server's own (`doh.resolver.example`), in no list, is caught by what it
//!   is asked. Which requests are DoH is the edge's call (`glassbox-net`'s `doh` module),
//!   made on their form, not their host: a hosting API's `/v1/dns-records?name=...` asked
//!   for as JSON is not one.
//!
//! The finding names the hidden destinations, the questions the edge read ("beacon.h-c2.example
//! (A) asked over DNS over HTTPS via dns.google"), when it read them; where it could not
//! (the client refused glassbox's certificate, DNS over TLS or QUIC), it names the resolver
//! only. The names the edge's DNS answered over DoH are also the names of the connections made
//! to their answers (`Flow::dns_name`), which `unexplained-egress` reports.
//!
//! Flows are grouped by resolver and port (a resolver without a known name: its SNI, `Host`
//! or looked-up name, else its address); Unix canary sockets are not looked at.
//!
//! A flow the edge could not read (a client that refused glassbox's certificate, QUIC, a
//! protocol it does not know) may carry DNS to a resolver in no list, whose questions only
//! the edge's reading would show: without a finding, the check then says `not-observed`,
//! naming those flows, never `pass` (version 5 said `pass` over them, and is retracted for
//! runs with such flows). The install's connections relayed to the package registry are the
//! one exception, as in `canary-exfiltration`.
//!
//! Version 4 judges as version 3 did: its source `net.rs` names synthetic addresses per run
//! now, for `unexplained-egress`.
//!
//! Version 7 judges as version 6 did; its shared sources changed (what explains a destination,
//! where a secret went).
//!
//! Version 8 judges as version 7 did: `canary_exfiltration.rs`, one of its sources, changed
//! (what the input named includes the values of reads and gets).
//!
//! Version 9: a TLS flow that carried nothing but its ClientHello is read
//! (`canary-exfiltration`'s v11): it holds no DNS-over-HTTPS request.
//!
//! Version 10 judges as version 9 did; its sources changed for another check (`named.rs`:
//! a `.test` name an earlier call's input gave explains a later flow to it).

use crate::net::{self, Keyed, PhaseOf};
use crate::text;
use crate::{Channel, CheckInfo, Evaluation, Evaluator};
use glassbox_model::{Event, Flow, FlowProtocol, NetworkMode, Severity};
use std::net::IpAddr;

pub(crate) const INFO: CheckInfo = CheckInfo {
    id: "doh",
    version: 10,
    claim: "no hidden DNS (DNS over HTTPS or TLS)",
    severity: Severity::Medium,
    channels: &[Channel::PacketEdge],
    also_reads: &[],
    file_calls: false,
    accuses: "",
    sources: &[
        "doh.rs",
        "links.rs",
        "canary_exfiltration.rs",
        "net.rs",
        "text.rs",
        "outcome.rs",
    ],
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

/// How a flow whose requests were DoH is said to be recognised.
const BY_REQUEST: &str = "DoH request";

/// Questions shown per finding; the others are counted.
const QUESTIONS_SHOWN: usize = 5;

/// Why a flow counts: the resolver (its name or address) and how it was seen.
fn classify(f: &Flow) -> Option<(String, String)> {
    if let Some((what, n)) = net::names(f)
        .into_iter()
        .find(|(_, n)| resolver_name(n).is_some())
    {
        return Some((n, what.to_string()));
    }
    let (ip, port) = net::ip_port(&f.dst)?;
    if resolver_address(ip) && RESOLVER_PORTS.contains(&port) {
        return Some((ip.to_string(), "address".to_string()));
    }
    doh_requests(f).then(|| (via(f, ip), BY_REQUEST.to_string()))
}

/// Whether the edge read a DNS-over-HTTPS request on `f` (its question, or a DNS message
/// it could not read).
fn doh_requests(f: &Flow) -> bool {
    f.exchanges
        .iter()
        .any(|x| x.dns.is_some() || x.dns_error.is_some())
}

/// What a resolver of no known name is called: the SNI, the `Host` its requests were sent
/// to, the name its address was looked up as, else that address.
fn via(f: &Flow, ip: IpAddr) -> String {
    let host =
        |h: &glassbox_model::Bytes| net::strip_port(&net::norm_host(h.as_slice())).to_string();
    [
        f.sni.as_ref().map(|s| net::norm_host(s.as_slice())),
        f.exchanges
            .iter()
            .find(|x| x.dns.is_some() || x.dns_error.is_some())
            .and_then(|x| x.header("host"))
            .map(host),
        f.http.as_ref().and_then(|h| h.host.as_ref()).map(host),
        f.dns_name.as_ref().map(|n| net::norm_host(n.as_slice())),
    ]
    .into_iter()
    .flatten()
    .find(|n| !n.is_empty())
    .unwrap_or_else(|| ip.to_string())
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
    /// The questions read in DoH requests (`name (TYPE)`, the first [`QUESTIONS_SHOWN`]).
    questions: Vec<String>,
    /// Further questions, counted (a repeat of one not shown counts again: what is kept
    /// stays bounded).
    more_questions: u64,
    /// DoH requests whose DNS message the edge could not read.
    unreadable: u64,
    /// Whether a flow of the group was TLS (DoH read in clear is DNS over HTTP).
    tls: bool,
}

impl Uses {
    /// The DoH requests the edge read on `f`.
    fn requests(&mut self, f: &Flow) {
        for x in &f.exchanges {
            if let Some(q) = &x.dns {
                let shown = format!(
                    "{} ({})",
                    net::show(&net::norm_host(q.name.as_slice())),
                    net::show(&q.qtype)
                );
                if self.questions.contains(&shown) {
                    continue;
                }
                if self.questions.len() < QUESTIONS_SHOWN {
                    self.questions.push(shown);
                } else {
                    self.more_questions += 1;
                }
            } else if x.dns_error.is_some() {
                self.unreadable += 1;
            }
        }
    }
}

/// The check's state over one run.
pub(crate) struct State {
    groups: Keyed<(String, u16, bool), Uses>,
    phases: PhaseOf,
    /// The flows the edge could not read: any of them may have carried DNS.
    unread: Vec<String>,
}

pub(crate) fn start(c: &crate::Context<'_>) -> Box<dyn Evaluator> {
    let mut s = State {
        groups: Keyed::new(),
        phases: PhaseOf::default(),
        // The install's connections relayed to the package registry, byte for byte by
        // design, carry the installer's requests to the registry, nothing else.
        unread: crate::canary_exfiltration::unread(c.flows, |f| {
            f.protocol != FlowProtocol::Unix && !crate::canary_exfiltration::relayed(f)
        }),
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
        if doh_requests(f) && !u.how.iter().any(|h| h == BY_REQUEST) {
            u.how.push(BY_REQUEST.to_string());
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
        u.requests(f);
        u.tls |= f.tls.is_some();
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

    fn unread(&self) -> Vec<String> {
        self.unread.clone()
    }

    fn finish(self: Box<Self>) -> Evaluation {
        let State { groups, phases, .. } = *self;
        let mut findings = Vec::new();
        for ((resolver, port, lookup), u) in groups.items {
            let read = !u.questions.is_empty() || u.unreadable > 0;
            let kind = if lookup {
                "looked up the DNS-over-HTTPS/TLS resolver".to_string()
            } else {
                let over = match (port, u.protocols.as_slice()) {
                    (853, [FlowProtocol::Udp]) => "DNS over QUIC",
                    (853, _) => "DNS over TLS",
                    (_, [FlowProtocol::Udp]) => "DNS over HTTP/3",
                    _ if read && !u.tls => "DNS over HTTP",
                    _ => "DNS over HTTPS",
                };
                match asked(&u) {
                    Some(names) => format!("{names} asked over {over} via"),
                    None => format!("{over} via"),
                }
            };
            let ps = phases.of(&u.ids);
            let mut summary = format!(
                "destination hidden: {kind} {} (by {}; {}",
                net::show(&resolver),
                u.how.join(", "),
                u.destinations.join(", "),
            );
            summary += &format!(
                ", {}, {}",
                net::count(u.flow_count, "flow", "flows"),
                net::bytes_out(u.bytes),
            );
            if u.unreadable > 0 {
                summary += &format!(
                    ", {} whose DNS message could not be read",
                    net::count(u.unreadable, "DoH request", "DoH requests")
                );
            }
            summary += &format!(") ({})", net::runs(&u.modes));
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

/// The questions read, as a finding names them: `a.example (A)`, `a.example (A), b.example
/// (AAAA) and 3 more`.
fn asked(u: &Uses) -> Option<String> {
    let (last, rest) = u.questions.split_last()?;
    Some(match (rest, u.more_questions) {
        ([], 0) => last.clone(),
        (rest, 0) => format!("{} and {last}", rest.join(", ")),
        _ => format!("{} and {} more", u.questions.join(", "), u.more_questions),
    })
}

#[cfg(test)]
pub(crate) fn evaluate(ev: &glassbox_model::Evidence) -> Evaluation {
    crate::evaluate_one(start, ev)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{Ev, F};
    use glassbox_model::{DnsQuery, HttpExchange, Phase, TlsOutcome, TlsRecord};

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

    /// A request the edge read as DoH: its question, or (`qtype` empty) a message it could
    /// not read.
    fn doh(host: &str, name: &str, qtype: &str) -> HttpExchange {
        HttpExchange {
            t_ns: 0,
            method: "GET".into(),
            target: "/dns-query?dns=AAABAAABAAAAAAAA".into(),
            headers: vec![("Host".into(), host.into())],
            body: Default::default(),
            body_len: 0,
            body_error: None,
            status: if qtype.is_empty() { 400 } else { 200 },
            dns: (!qtype.is_empty()).then(|| DnsQuery {
                name: name.into(),
                qtype: qtype.into(),
                answers: vec!["198.18.1.7".into()],
            }),
            dns_error: qtype.is_empty().then(|| "malformed DNS query".into()),
        }
    }

    fn with(mut f: F, exchanges: Vec<HttpExchange>, tls: bool) -> F {
        f.0.exchanges = exchanges;
        if tls {
            f.0.tls = Some(TlsRecord {
                alpn_offered: Vec::new(),
                alpn: Some("http/1.1".into()),
                version: Some("TLSv1_3".into()),
                certificate_for: f.0.sni.as_ref().map(|s| s.to_lossy()),
                outcome: TlsOutcome::Read,
            });
        }
        f
    }

    #[test]
    fn a_custom_resolver_is_caught_by_its_requests_and_the_names_asked_are_shown() {
        let ev = Ev::new()
            .connect("198.18.1.3:443", Phase::Call("lookup".into()))
            .flow(with(
                F::tcp("198.18.1.3:443")
                    .name("doh.resolver.example")
                    .sni("doh.resolver.example")
                    .sample(&b"tls bytes"[..])
                    .events(&[1]),
                vec![doh("doh.resolver.example", "Beacon.H-C2.example.", "A")],
                true,
            ))
            .build();
        let eval = evaluate(&ev);
        assert_eq!(eval.findings.len(), 1);
        assert_eq!(
            eval.findings[0].summary,
            "destination hidden: beacon.h-c2.example (A) asked over DNS over HTTPS via \
             doh.resolver.example (by DoH request; 198.18.1.3:443, 1 flow, 9 bytes out) \
             (capture run) during call:lookup"
        );
        assert_eq!(eval.findings[0].flows, vec![1]);
    }

    #[test]
    fn a_known_resolver_read_names_its_questions_too() {
        let many: Vec<HttpExchange> = (0..8)
            .map(|i| doh("dns.google", &format!("n{i}.exfil.example"), "AAAA"))
            .chain([doh("dns.google", "n0.exfil.example", "AAAA")])
            .chain([doh("dns.google", "", "")])
            .collect();
        let ev = Ev::new()
            .flow(with(
                F::tcp("192.0.2.80:443").sni("dns.google"),
                vec![doh("dns.google", "lookup.exfil.example", "A")],
                true,
            ))
            .flow(with(F::tcp("192.0.2.81:443").sni("dns.google"), many, true))
            // Read in clear, to an address, named by nothing but its requests' Host.
            .flow(with(
                F::tcp("192.0.2.53:80"),
                vec![
                    doh("192.0.2.53", "a.exfil.example", "A"),
                    doh("192.0.2.53", "b.exfil.example", "TXT"),
                ],
                false,
            ))
            .build();
        let s = summaries(&ev);
        assert_eq!(s.len(), 2, "{s:?}");
        assert!(
            s[0].starts_with(
                "destination hidden: lookup.exfil.example (A), n0.exfil.example (AAAA), \
                 n1.exfil.example (AAAA), n2.exfil.example (AAAA), n3.exfil.example (AAAA) \
                 and 4 more asked over DNS over HTTPS via dns.google (by SNI, DoH request; \
                 192.0.2.80:443, 192.0.2.81:443, 2 flows, 0 bytes out, 1 DoH request whose \
                 DNS message could not be read)"
            ),
            "{s:?}"
        );
        assert!(
            s[1].starts_with(
                "destination hidden: a.exfil.example (A) and b.exfil.example (TXT) asked over \
                 DNS over HTTP via 192.0.2.53 (by DoH request; 192.0.2.53:80"
            ),
            "{s:?}"
        );
    }

    #[test]
    fn ordinary_https_requests_pass() {
        let mut api = doh("api.hosting.example", "", "A");
        api.dns = None;
        api.target = "/v1/dns-records?name=www.shop.example&type=A".into();
        let ev = Ev::new()
            .flow(with(
                F::tcp("198.18.1.4:443").sni("api.hosting.example"),
                vec![api],
                true,
            ))
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
