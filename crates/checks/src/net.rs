//! What the network checks share: the sandbox's addresses, destinations of flows and events,
//! the user's allow list, and the phases of the events behind a flow.
//!
//! # Addresses
//!
//! The sandbox's network (see `glassbox-net`): its own interface is [`SANDBOX_V4`] and
//! [`SANDBOX_V6`], its resolver [`RESOLVER_V4`] port 53, and the edge's DNS answers every name
//! with a *synthetic* address in [`SYNTHETIC_V4`] (AAAA: the same address under
//! [`SYNTHETIC_V6_PREFIX`]). Loopback, the unspecified address and the sandbox's own address
//! are not egress ([`is_egress`]): nothing sent there leaves the sandbox.
//!
//! # Names
//!
//! Host names come from the server (DNS questions, SNI, `Host` headers) and may be hostile:
//! they are compared lower-cased without a trailing dot ([`norm_host`]) and shown escaped and
//! cut ([`show`]).

use crate::text::{MAX_GROUPS, MAX_IDS};
use glassbox_model::{Bytes, Event, Flow, FlowProtocol, Phase, SockAddr};
use std::collections::HashMap;
use std::hash::Hash;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

/// The sandbox's own IPv4 address.
pub(crate) const SANDBOX_V4: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
/// The sandbox's own IPv6 address.
pub(crate) const SANDBOX_V6: Ipv6Addr = Ipv6Addr::new(0x64, 0xff9b, 1, 0, 0, 0, 0, 1);
/// The resolver in the sandbox's `resolv.conf` (port 53).
pub(crate) const RESOLVER_V4: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
/// Where the edge's DNS answers come from: 198.18.0.0/15 (network and prefix length).
pub(crate) const SYNTHETIC_V4: (Ipv4Addr, u32) = (Ipv4Addr::new(198, 18, 0, 0), 15);
/// AAAA answers: a synthetic IPv4 address in the low 32 bits of this /96.
pub(crate) const SYNTHETIC_V6_PREFIX: Ipv6Addr = Ipv6Addr::new(0x64, 0xff9b, 1, 0xffff, 0, 0, 0, 0);

/// Longest host name shown, in characters (a DNS name has at most 253).
const NAME_CHARS: usize = 260;

/// The IP address and port of a socket address (`None` for Unix and other families, or an
/// address that does not parse).
pub(crate) fn ip_port(addr: &SockAddr) -> Option<(IpAddr, u16)> {
    match addr {
        SockAddr::Inet { ip, port } | SockAddr::Inet6 { ip, port } => {
            let ip: IpAddr = ip.parse().ok()?;
            Some((unmap(ip), *port))
        }
        _ => None,
    }
}

/// An IPv4-mapped IPv6 address (`::ffff:a.b.c.d`) as the IPv4 address it carries.
fn unmap(ip: IpAddr) -> IpAddr {
    match ip {
        IpAddr::V6(v6) => v6.to_ipv4_mapped().map_or(ip, IpAddr::V4),
        v4 => v4,
    }
}

/// Whether traffic to `ip` would leave the sandbox: not loopback, not the unspecified address,
/// not the sandbox's own address.
pub(crate) fn is_egress(ip: IpAddr) -> bool {
    let ip = unmap(ip);
    !(ip.is_loopback() || ip.is_unspecified() || ip == SANDBOX_V4 || ip == SANDBOX_V6)
}

/// Whether `ip` is one the edge's DNS hands out (or the sandbox's own network).
pub(crate) fn is_synthetic(ip: IpAddr) -> bool {
    let (net, len) = SYNTHETIC_V4;
    let in_v4 = |v4: Ipv4Addr| (u32::from(v4) >> (32 - len)) == (u32::from(net) >> (32 - len));
    match unmap(ip) {
        IpAddr::V4(v4) => in_v4(v4),
        IpAddr::V6(v6) => {
            let (seg, prefix) = (v6.segments(), SYNTHETIC_V6_PREFIX.segments());
            seg[..6] == prefix[..6]
                && in_v4(Ipv4Addr::from(
                    (u32::from(seg[6]) << 16) | u32::from(seg[7]),
                ))
        }
    }
}

/// The synthetic IPv4 address a synthetic IPv6 address carries (AAAA answers are the A answer
/// under [`SYNTHETIC_V6_PREFIX`]); any other address as is.
pub(crate) fn synthetic_v4(ip: IpAddr) -> IpAddr {
    match unmap(ip) {
        IpAddr::V6(v6) if is_synthetic(IpAddr::V6(v6)) => {
            let seg = v6.segments();
            IpAddr::V4(Ipv4Addr::from(
                (u32::from(seg[6]) << 16) | u32::from(seg[7]),
            ))
        }
        other => other,
    }
}

/// Whether `(ip, port)` is the sandbox's resolver.
pub(crate) fn is_resolver(ip: IpAddr, port: u16) -> bool {
    unmap(ip) == RESOLVER_V4 && port == 53
}

/// `TCP`, `UDP`, `DNS`, `ICMP`, `Unix`, `IP`.
pub(crate) fn protocol(p: FlowProtocol) -> &'static str {
    match p {
        FlowProtocol::Tcp => "TCP",
        FlowProtocol::Udp => "UDP",
        FlowProtocol::Dns => "DNS",
        FlowProtocol::Icmp => "ICMP",
        FlowProtocol::Unix => "Unix",
        FlowProtocol::Other => "IP",
    }
}

/// A socket address as shown: `ip:port`, `[ip6]:port`, the bare address when the port is 0
/// (ICMP and other protocols have none), `unix:path`.
pub(crate) fn addr(a: &SockAddr) -> String {
    match a {
        SockAddr::Inet { ip, port: 0 } | SockAddr::Inet6 { ip, port: 0 } => {
            glassbox_model::printable(ip)
        }
        SockAddr::Inet { ip, port } => format!("{}:{port}", glassbox_model::printable(ip)),
        SockAddr::Inet6 { ip, port } => format!("[{}]:{port}", glassbox_model::printable(ip)),
        other => glassbox_model::printable(&other.to_string()),
    }
}

/// An IP address and port as shown (the port left out when 0).
pub(crate) fn ip_addr(ip: IpAddr, port: u16) -> String {
    match (ip, port) {
        (ip, 0) => ip.to_string(),
        (IpAddr::V4(v4), port) => format!("{v4}:{port}"),
        (IpAddr::V6(v6), port) => format!("[{v6}]:{port}"),
    }
}

/// A host name for comparing: lower-cased, without a trailing dot (lossy UTF-8).
/// Whether the host name `name` is `domain` or a name under it (`api.vendor.example` under
/// `vendor.example`; not `evilvendor.example`), both normalized.
pub(crate) fn is_under(name: &str, domain: &str) -> bool {
    name == domain
        || name
            .strip_suffix(domain)
            .is_some_and(|rest| rest.ends_with('.'))
}

pub(crate) fn norm_host(b: &[u8]) -> String {
    let s = String::from_utf8_lossy(b).to_ascii_lowercase();
    s.trim_end_matches('.').to_string()
}

/// A host name (or any text from the server) as shown: escaped and cut.
pub(crate) fn show(s: &str) -> String {
    glassbox_model::truncate(&glassbox_model::printable(s), NAME_CHARS)
}

/// A `Host` header without its port (`example.com:8080` → `example.com`, `[::1]:80` → `::1`).
pub(crate) fn strip_port(host: &str) -> &str {
    if let Some(rest) = host.strip_prefix('[') {
        return rest.split_once(']').map_or(rest, |(h, _)| h);
    }
    match host.rsplit_once(':') {
        Some((h, p)) if !h.contains(':') && p.bytes().all(|b| b.is_ascii_digit()) => h,
        _ => host,
    }
}

/// The names a flow carries, normalized: the DNS question, the name its synthetic destination
/// was handed out for, the TLS SNI, the HTTP `Host` (without port), in that order, each with
/// what it is.
pub(crate) fn names(f: &Flow) -> Vec<(&'static str, String)> {
    let mut out = Vec::new();
    if let Some(q) = &f.dns {
        out.push(("DNS query", norm_host(q.name.as_slice())));
    }
    if let Some(n) = &f.dns_name {
        out.push(("DNS name", norm_host(n.as_slice())));
    }
    if let Some(s) = &f.sni {
        out.push(("SNI", norm_host(s.as_slice())));
    }
    if let Some(h) = f.http.as_ref().and_then(|h| h.host.as_ref()) {
        let h = norm_host(h.as_slice());
        out.push(("Host", strip_port(&h).to_string()));
    }
    out.retain(|(_, n)| !n.is_empty());
    out
}

/// Names of synthetic addresses, from the edge's DNS answers and the flows' `dns_name`, by
/// run and their IPv4 form ([`synthetic_v4`]).
pub(crate) fn synthetic_names(
    flows: &[Flow],
) -> HashMap<(glassbox_model::NetworkMode, IpAddr), String> {
    // Per run: each run's edge hands its synthetic addresses out afresh, so the install's
    // registry and the capture run's API may share one.
    let mut m = HashMap::new();
    for f in flows {
        if let Some(q) = &f.dns {
            for a in &q.answers {
                if let Ok(ip) = a.parse::<IpAddr>() {
                    m.entry((f.mode, synthetic_v4(ip)))
                        .or_insert_with(|| norm_host(q.name.as_slice()));
                }
            }
        }
        if let (Some(n), Some((ip, _))) = (&f.dns_name, ip_port(&f.dst)) {
            m.entry((f.mode, synthetic_v4(ip)))
                .or_insert_with(|| norm_host(n.as_slice()));
        }
    }
    m
}

/// The runs an attempt was seen in, for a summary: `capture run`, `install and capture
/// runs`, `capture and denied runs`.
pub(crate) fn runs(modes: &[glassbox_model::NetworkMode]) -> String {
    use glassbox_model::NetworkMode;
    match modes {
        [m] => format!("{} run", m.name()),
        _ => {
            // In the order the runs are made.
            let mut modes = modes.to_vec();
            modes.sort_by_key(|m| match m {
                NetworkMode::Install => 0,
                NetworkMode::Capture => 1,
                NetworkMode::Denied => 2,
                NetworkMode::Trigger => 3,
            });
            let names: Vec<&str> = modes.iter().map(|m| m.name()).collect();
            match names.split_last() {
                Some((last, rest)) if !rest.is_empty() => {
                    format!("{} and {last} runs", rest.join(", "))
                }
                _ => "no run".into(),
            }
        }
    }
}

/// The user's allow list (`--allow-host HOST[:PORT]`).
#[derive(Debug, Default)]
pub(crate) struct Allow(Vec<(String, Option<u16>)>);

impl Allow {
    /// Parses `HOST`, `HOST:PORT`, `[IPV6]:PORT` and bare IPv6 entries.
    pub(crate) fn new(list: &[String]) -> Allow {
        Allow(list.iter().map(|s| Self::entry(s.trim())).collect())
    }

    fn entry(s: &str) -> (String, Option<u16>) {
        if let Some(rest) = s.strip_prefix('[') {
            if let Some((h, tail)) = rest.split_once(']') {
                let port = tail.strip_prefix(':').and_then(|p| p.parse().ok());
                return (norm_host(h.as_bytes()), port);
            }
        }
        match s.rsplit_once(':') {
            Some((h, p)) if !h.contains(':') => match p.parse::<u16>() {
                Ok(port) => (norm_host(h.as_bytes()), Some(port)),
                Err(_) => (norm_host(s.as_bytes()), None),
            },
            _ => (norm_host(s.as_bytes()), None),
        }
    }

    /// Whether `host` (normalized) is allowed on `port`; `None` means on any port (a DNS
    /// question is explained by an entry for the host whatever its port).
    pub(crate) fn allows(&self, host: &str, port: Option<u16>) -> bool {
        if host.is_empty() {
            return false;
        }
        let ip = host.parse::<IpAddr>().ok().map(unmap);
        self.0.iter().any(|(h, p)| {
            let same =
                h == host || ip.is_some_and(|ip| h.parse::<IpAddr>().ok().map(unmap) == Some(ip));
            same && (port.is_none() || p.is_none() || *p == port)
        })
    }

    /// Whether the destination IP literal is allowed on `port`.
    pub(crate) fn allows_ip(&self, ip: IpAddr, port: u16) -> bool {
        self.allows(&unmap(ip).to_string(), Some(port))
    }
}

/// Hashes event ids for [`PhaseOf`], which every check that weighs flows consults for every
/// event of a trace: one multiplication by a key drawn once per process (keyed, so that ids in
/// a hostile bundle cannot be chosen to collide), instead of SipHash.
#[derive(Clone, Copy, Debug, Default)]
pub(crate) struct IdHasher {
    key: u64,
    h: u64,
}

impl std::hash::Hasher for IdHasher {
    fn write(&mut self, bytes: &[u8]) {
        for &b in bytes {
            self.write_u64(u64::from(b));
        }
    }

    fn write_u64(&mut self, id: u64) {
        self.h = (self.h.rotate_left(23) ^ id ^ self.key).wrapping_mul(0x9e37_79b9_7f4a_7c15);
    }

    fn finish(&self) -> u64 {
        // The high bits are the well mixed ones; the table indexes by the low ones.
        self.h ^ (self.h >> 32)
    }
}

/// Builds [`IdHasher`]s with this process's key.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Ids(u64);

impl Default for Ids {
    fn default() -> Self {
        use std::hash::BuildHasher;
        static KEY: std::sync::OnceLock<u64> = std::sync::OnceLock::new();
        Ids(*KEY.get_or_init(|| {
            std::collections::hash_map::RandomState::new().hash_one(0x676c_6173_7362_6f78u64)
        }))
    }
}

impl std::hash::BuildHasher for Ids {
    type Hasher = IdHasher;
    fn build_hasher(&self) -> IdHasher {
        IdHasher { key: self.0, h: 0 }
    }
}

/// The phases of chosen events (those behind flagged flows), learnt as the events stream by.
#[derive(Debug, Default)]
pub(crate) struct PhaseOf(HashMap<u64, Option<Phase>, Ids>);

impl PhaseOf {
    /// Remembers the phase of these events when they come (the first [`MAX_IDS`]).
    pub(crate) fn want(&mut self, ids: &[u64]) {
        for id in ids.iter().take(MAX_IDS) {
            self.0.entry(*id).or_insert(None);
        }
    }

    /// An event of the stream.
    pub(crate) fn see(&mut self, e: &Event) {
        if let Some(p) = self.0.get_mut(&e.id) {
            *p = Some(e.phase.clone());
        }
    }

    /// The distinct phases of `ids`, in the order of the events.
    pub(crate) fn of(&self, ids: &[u64]) -> Vec<Phase> {
        let mut sorted: Vec<u64> = ids.to_vec();
        sorted.sort_unstable();
        let mut out: Vec<Phase> = Vec::new();
        for id in sorted {
            if let Some(Some(p)) = self.0.get(&id) {
                if !out.contains(p) {
                    out.push(p.clone());
                }
            }
        }
        out
    }
}

/// Adds `ids` to `to`, keeping at most [`MAX_IDS`], each once.
pub(crate) fn add_ids(to: &mut Vec<u64>, ids: &[u64]) {
    for id in ids {
        if to.len() >= MAX_IDS {
            return;
        }
        if !to.contains(id) {
            to.push(*id);
        }
    }
}

/// Groups by key in order of first appearance, at most [`MAX_GROUPS`] (further keys counted in
/// `overflow`); unlike [`crate::text::Groups`] a group need not start with an event (a flow
/// may have none).
#[derive(Debug)]
pub(crate) struct Keyed<K, V> {
    index: HashMap<K, usize>,
    /// The groups, in order of first appearance.
    pub(crate) items: Vec<(K, V)>,
    /// Additions to keys past the cap.
    pub(crate) overflow: u64,
}

impl<K: Hash + Eq + Clone, V: Default> Keyed<K, V> {
    pub(crate) fn new() -> Self {
        Keyed {
            index: HashMap::new(),
            items: Vec::new(),
            overflow: 0,
        }
    }

    /// The group of `key`, created if there is room; `None` (counted) past the cap.
    pub(crate) fn get(&mut self, key: K) -> Option<&mut V> {
        let n = match self.index.get(&key) {
            Some(&n) => n,
            None if self.items.len() >= MAX_GROUPS => {
                self.overflow += 1;
                return None;
            }
            None => {
                self.items.push((key.clone(), V::default()));
                self.index.insert(key, self.items.len() - 1);
                self.items.len() - 1
            }
        };
        Some(&mut self.items[n].1)
    }
}

/// `1 thing`, `2 things`.
pub(crate) fn count(n: u64, one: &str, many: &str) -> String {
    if n == 1 {
        format!("1 {one}")
    } else {
        format!("{n} {many}")
    }
}

/// Outbound bytes as shown (`517 bytes out`).
pub(crate) fn bytes_out(n: u64) -> String {
    count(n, "byte out", "bytes out")
}

/// What was sent, as shown: printable, at most `max` characters.
pub(crate) fn sample(b: &Bytes, max: usize) -> String {
    // Cut before escaping too: a sample may hold 64 KiB.
    let head = Bytes(b.as_slice()[..b.as_slice().len().min(max * 4)].to_vec());
    glassbox_model::truncate(&head.to_string(), max)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn ip(s: &str) -> IpAddr {
        s.parse().unwrap()
    }

    #[test]
    fn egress_and_synthetic_addresses() {
        for a in [
            "127.0.0.1",
            "127.9.9.9",
            "::1",
            "0.0.0.0",
            "::",
            "198.18.0.1",
        ] {
            assert!(!is_egress(ip(a)), "{a}");
        }
        assert!(!is_egress(ip("64:ff9b:1::1")));
        assert!(!is_egress(ip("::ffff:127.0.0.1")));
        for a in ["192.0.2.10", "198.18.1.3", "198.18.0.2", "2001:db8::1"] {
            assert!(is_egress(ip(a)), "{a}");
        }
        assert!(is_synthetic(ip("198.18.1.3")));
        assert!(is_synthetic(ip("198.19.255.1")));
        assert!(is_synthetic(ip("64:ff9b:1:ffff::c612:103")));
        assert_eq!(
            synthetic_v4(ip("64:ff9b:1:ffff::c612:103")),
            ip("198.18.1.3")
        );
        assert_eq!(
            synthetic_v4(ip("2001:db8::c612:103")),
            ip("2001:db8::c612:103")
        );
        assert!(!is_synthetic(ip("198.20.0.1")));
        assert!(!is_synthetic(ip("192.0.2.10")));
        assert!(!is_synthetic(ip("2001:db8::c612:103")));
        assert!(is_resolver(ip("198.18.0.2"), 53));
        assert!(!is_resolver(ip("198.18.0.2"), 80));
    }

    #[test]
    fn allow_entries() {
        let a = Allow::new(&[
            "API.Example.".into(),
            "db.example:5432".into(),
            "[2001:db8::1]:443".into(),
            "2001:db8::2".into(),
            "192.0.2.7".into(),
        ]);
        assert!(a.allows("api.example", Some(443)));
        assert!(a.allows("api.example", None));
        assert!(a.allows("db.example", Some(5432)));
        assert!(!a.allows("db.example", Some(80)));
        assert!(a.allows("db.example", None));
        assert!(!a.allows("x.api.example", Some(443)));
        assert!(a.allows_ip(ip("2001:db8::1"), 443));
        assert!(!a.allows_ip(ip("2001:db8::1"), 80));
        assert!(a.allows_ip(ip("2001:db8:0::2"), 1));
        assert!(a.allows_ip(ip("192.0.2.7"), 22));
        assert!(!a.allows("", None));
    }

    #[test]
    fn hosts_and_ports() {
        assert_eq!(strip_port("example.com:8080"), "example.com");
        assert_eq!(strip_port("[::1]:80"), "::1");
        assert_eq!(strip_port("example.com"), "example.com");
        assert_eq!(norm_host(b"Exfil.Example."), "exfil.example");
        assert_eq!(ip_addr(ip("2001:db8::1"), 443), "[2001:db8::1]:443");
        assert_eq!(ip_addr(ip("192.0.2.1"), 0), "192.0.2.1");
    }
}
