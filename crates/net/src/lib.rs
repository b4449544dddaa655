//! The network edge of glassbox's sandbox.
//!
//! Each run's network namespace has one interface besides loopback: a TUN device whose file
//! descriptor glassbox holds. Every route of the namespace leads into it, so every packet the
//! server sends ends here, in glassbox's own process; nothing can leave the machine.
//! [`Edge`] is the packet engine behind that descriptor. It does no I/O of its own:
//! [`serve`] moves packets between the descriptor and the engine.
//!
//! # Addresses
//!
//! | what | address |
//! |---|---|
//! | the sandbox's interface | [`SANDBOX_V4`]/15, [`SANDBOX_V6`]/128 |
//! | the resolver in `resolv.conf` | [`RESOLVER_V4`] port 53 |
//! | DNS answers (capture mode) | [`SYNTHETIC_V4_FIRST`] upwards in 198.18.0.0/15; AAAA: the same address under [`SYNTHETIC_V6_PREFIX`] |
//!
//! # Modes
//!
//! - capture: DNS sent to any address on port 53 is answered, every A/AAAA name with its own
//!   synthetic address (a later connect maps back to the name); TCP to any address and port
//!   is accepted by a userspace stack (smoltcp) and read as the [`Responder`] says (below);
//!   UDP is logged (a QUIC Initial to port 443 is named unread); ICMP counted.
//! - install: capture, except that connections to the package registry are relayed to the
//!   real host ([`relay`]), byte for byte: never answered, never terminated.
//! - denied: every packet is dropped and counted with its destination; nothing is answered.
//!
//! # What is read, what is answered, what stays unread
//!
//! With [`Responder::Refuse`] (the default, until the audit turns the other on): a TLS
//! stream's ClientHello (SNI, ALPN), then the connection is closed; an HTTP request's line
//! and Host, answered `503`. Every TLS flow is then `not_terminated` and unread.
//!
//! With [`Responder::Answer`], which holds the audit's [`Authority`] (the CA the sandbox
//! trusts):
//!
//! - **TLS** on any port, recognised by a ClientHello at the start of the stream, is
//!   terminated (rustls; TLS 1.3 and 1.2) with a leaf certificate for its SNI, or for the
//!   destination address without SNI. ALPN `http/1.1` only: a client wanting `h2` only is
//!   refused (HTTP/2 is declined on purpose, see `terminate`). What the client sends inside
//!   is kept (`Flow::cleartext`, as much as a sample) and read as HTTP below.
//! - **HTTP/1.x**, in clear or inside TLS, is read in full: every request of the connection
//!   in turn, its headers and its body (by `Content-Length` or chunked, decoded from gzip,
//!   deflate or br), each kept as an exchange (`Flow::exchanges`).
//! - **Answered**: every request gets glassbox's own synthetic response so that the client
//!   goes on (`200` with `{}` when it asked for JSON, else empty; `HEAD` 200, `OPTIONS` 204;
//!   keep-alive unless the client asked to close), recorded as the exchange's status.
//! - **DNS over HTTPS**, recognised by its form whatever host it goes to (RFC 8484's
//!   `application/dns-message` POST and `?dns=` GET, the JSON API), is answered like a
//!   resolver would, by the same DNS as port 53 (`doh`): the same synthetic address for a
//!   name, so that a later connect to it maps back to the name asked over DoH. The
//!   exchange records the question (`HttpExchange::dns`) or why it could not be read.
//! - **Unread, and said so** (`Flow::unread`): a client that refuses glassbox's certificate
//!   (a pinned client, its own CA bundle; the alert it sent is named), a handshake that never
//!   completes, a ClientHello that does not parse, TLS not terminated (responder `refuse`, a
//!   relayed connection), QUIC (UDP 443, an Initial long header), and what the run's budget
//!   had no room left to keep. Other streams in clear that are not HTTP are kept as their
//!   sample, as before; UDP is never answered.
//!
//! # Bounds
//!
//! Whatever the sandbox sends, the edge's memory and work stay bounded: [`Limits`] (flows,
//! connections, samples, queued packets, and [`Limits::read_total`], what is kept of
//! cleartext and exchanges over a run: 64 MiB by default); per flow, [`glassbox_model::EXCHANGE_LIMIT`] exchanges (the
//! others counted); per exchange, 100 headers and [`glassbox_model::BODY_LIMIT`] decoded
//! body bytes, decoding stopped at 8 MiB (a decompression bomb); per connection, a 64 KiB
//! head and 64 KiB of answers waiting (beyond, the client is not read until it takes them);
//! per authority, [`LEAF_CACHE`] cached certificates.
//!
//! # Modules
//!
//! - `packet`: reads the IP packets the sandbox sends, builds the UDP packets sent back.
//! - `flows`: the flow accounting both modes share (keys, counts, samples, limits).
//! - `dns`: questions read, answers with synthetic addresses, the address → name map.
//! - `doh`: DNS-over-HTTPS requests in HTTP exchanges, unwrapped for `dns` to answer.
//! - `stack`: capture mode's TCP (smoltcp), and what is read from each stream.
//! - `tls`: the ClientHello at the start of a stream (SNI, ALPN), read with tls-parser.
//! - `authority`: [`Authority`], the audit's CA and the leaf certificates it signs.
//! - `terminate`: TLS terminated at the edge (rustls, server side, sans I/O).
//! - `http`: HTTP/1.x requests read in full, and the edge's synthetic responses.
//! - `decode`: request bodies decoded (gzip, deflate, br), bounded.
//! - `outbox`: the bounded queue of packets towards the sandbox.
//! - `tun`: [`serve`], the only I/O: between the TUN descriptor and the engine.
//! - [`wire`]: a microVM's network card as the edge's descriptor: Ethernet framing on the
//!   host, and the guest's forwarder between the sandbox's TUN and the card.
#![deny(missing_docs)]

mod authority;
mod decode;
mod dns;
mod doh;
mod fdio;
mod flows;
mod http;
mod outbox;
mod packet;
pub mod relay;
mod stack;
mod terminate;
mod tls;
mod tun;
pub mod wire;

pub use authority::{Authority, AuthorityError, LEAF_CACHE, VALID_DAYS};
pub use relay::Relay;
pub use tun::{serve, serve_framed};
pub use wire::Framing;

use flows::{FlowKey, Flows};
use glassbox_model::{EdgeCounters, Flow, NetworkMode};
use outbox::Outbox;
use packet::{Fragment, FragmentId, Packet, Transport};
use stack::{Segment, Stack};
use std::collections::VecDeque;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr};

/// The sandbox's own IPv4 address (on the edge interface, prefix /15).
pub const SANDBOX_V4: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 1);
/// The resolver named in the sandbox's `resolv.conf`.
pub const RESOLVER_V4: Ipv4Addr = Ipv4Addr::new(198, 18, 0, 2);
/// The first synthetic address handed out by the edge's DNS.
pub const SYNTHETIC_V4_FIRST: Ipv4Addr = Ipv4Addr::new(198, 18, 1, 0);
/// The sandbox's own IPv6 address (prefix /128; the default route leads into the edge).
pub const SANDBOX_V6: Ipv6Addr = Ipv6Addr::new(0x64, 0xff9b, 1, 0, 0, 0, 0, 1);
/// AAAA answers are the synthetic IPv4 address in the low 32 bits of this /96.
pub const SYNTHETIC_V6_PREFIX: Ipv6Addr = Ipv6Addr::new(0x64, 0xff9b, 1, 0xffff, 0, 0, 0, 0);
/// The edge interface's name inside the sandbox.
pub const INTERFACE: &str = "gb0";
/// The synthetic range, as text (for the manifest).
pub const SYNTHETIC_RANGE: &str = "198.18.0.0/15";

/// Limits that keep the edge's memory bounded whatever the server sends.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Limits {
    /// Flows kept per run; packets of further flows are only counted.
    pub max_flows: usize,
    /// TCP connections open at once; further SYNs are refused (reset) and counted.
    pub max_tcp: usize,
    /// Outbound payload kept per flow (its first bytes).
    pub sample_per_flow: usize,
    /// Outbound payload kept over all flows of a run; and twice as much again of what the
    /// edge reads inside streams (decrypted cleartext, HTTP exchanges' targets, headers and
    /// bodies), beyond which flows say what was not kept (`Flow::unread`).
    pub sample_total: usize,
    /// Packets queued towards the sandbox before further ones are dropped.
    pub max_queued: usize,
}

impl Limits {
    /// What is kept of what the edge reads inside streams over a run (see `sample_total`).
    pub fn read_total(&self) -> usize {
        self.sample_total.saturating_mul(2)
    }
}

impl Default for Limits {
    fn default() -> Limits {
        Limits {
            max_flows: 4096,
            max_tcp: 256,
            sample_per_flow: glassbox_model::FLOW_SAMPLE_LIMIT,
            sample_total: 32 * 1024 * 1024,
            max_queued: 4096,
        }
    }
}

/// What the edge answers on the TCP connections it captures (capture and install modes;
/// relayed connections are never answered).
#[derive(Clone, Debug, Default)]
pub enum Responder {
    /// TLS is not terminated (a ClientHello is read, then the connection closed) and HTTP
    /// requests are answered `503`: nothing inside TLS is read.
    #[default]
    Refuse,
    /// TLS is terminated with certificates of this authority, HTTP/1.x read in full and
    /// every request answered (see the crate docs).
    Answer(Authority),
}

impl Responder {
    /// The manifest's name for it (`NetworkSettings::responder`): `refuse` or `ok`.
    pub fn name(&self) -> &'static str {
        match self {
            Responder::Refuse => "refuse",
            Responder::Answer(_) => "ok",
        }
    }
}

/// Whether `payload`, the first datagram of a UDP flow to port 443, is a QUIC Initial: a
/// long header (the two high bits set) of a version other than 0 (version negotiation).
fn quic_initial(payload: &[u8]) -> bool {
    match payload {
        [first, v0, v1, v2, v3, ..] => {
            first & 0xc0 == 0xc0 && u32::from_be_bytes([*v0, *v1, *v2, *v3]) != 0
        }
        _ => false,
    }
}

/// Fragmented datagrams remembered, so that later fragments count with the first one.
const FRAGMENTS_REMEMBERED: usize = 64;

/// The packet engine of one run.
///
/// Every packet the sandbox sends goes to [`Edge::input`]; what the edge sends back comes
/// out of [`Edge::output`]; [`Edge::poll`] runs the timers (TCP retransmissions, idle
/// connections) when [`Edge::poll_delay_ns`] says. Memory stays bounded by [`Limits`].
pub struct Edge {
    mode: NetworkMode,
    counters: EdgeCounters,
    flows: Flows,
    resolver: dns::Resolver,
    /// The flows of recent fragmented datagrams (by their first fragment).
    fragments: VecDeque<(FragmentId, FlowKey)>,
    out: Outbox,
    /// The TCP stack (capture mode only).
    stack: Option<Stack>,
}

impl std::fmt::Debug for Edge {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Edge")
            .field("mode", &self.mode)
            .field("counters", &self.counters)
            .field("flows", &self.flows.len())
            .field("queued", &self.out.len())
            .field("stack", &self.stack)
            .finish_non_exhaustive()
    }
}

impl Edge {
    /// An edge in `mode`; its flows are numbered from `first_flow_id`.
    pub fn new(mode: NetworkMode, first_flow_id: u64, limits: Limits) -> Edge {
        let mut out = Outbox::new(limits.max_queued);
        let stack = mode
            .answers()
            .then(|| Stack::new(limits.max_tcp, 0, &mut out));
        Edge {
            mode,
            counters: EdgeCounters::default(),
            flows: Flows::new(mode, first_flow_id, &limits),
            resolver: dns::Resolver::new(limits.max_flows),
            fragments: VecDeque::new(),
            out,
            stack,
        }
    }

    /// Relays TCP connections to `relay`'s hosts to the real network (capture mode only; see
    /// [`relay`]). Used for the install phase's package registry.
    pub fn with_relay(mut self, relay: Relay) -> Edge {
        if let Some(stack) = &mut self.stack {
            stack.set_relay(relay);
        }
        self
    }

    /// What the edge answers on the connections it captures (default
    /// [`Responder::Refuse`]); see [`Edge::set_responder`].
    pub fn with_responder(mut self, responder: Responder) -> Edge {
        self.set_responder(responder);
        self
    }

    /// Sets what the edge answers, for connections opened from now on (denied mode: no
    /// effect, nothing is answered). With [`Responder::Answer`], TLS is terminated and HTTP
    /// answered; the flows then carry `tls`, `cleartext`, `exchanges` and `unread`.
    pub fn set_responder(&mut self, responder: Responder) {
        if let Some(stack) = &mut self.stack {
            stack.set_responder(responder);
        }
    }

    /// The mode.
    pub fn mode(&self) -> NetworkMode {
        self.mode
    }

    /// One packet from the sandbox (IPv4 or IPv6, no link header), read at `now_ns` (ns since
    /// the start of the audit).
    pub fn input(&mut self, packet: &[u8], now_ns: u64) {
        self.counters.packets += 1;
        self.counters.bytes += packet.len() as u64;
        match packet::parse(packet) {
            None => self.counters.malformed += 1,
            Some(p) if p.is_housekeeping() => self.counters.housekeeping += 1,
            Some(p) => self.account(packet, &p, now_ns),
        }
        self.counters.dropped_in = self.out.dropped;
    }

    /// A frame of `len` bytes from a microVM's card that carried no IP packet (ARP, a VLAN
    /// tag, a runt): counted as a malformed packet, kept in no flow.
    pub fn input_not_ip(&mut self, len: usize) {
        self.counters.packets += 1;
        self.counters.bytes += len as u64;
        self.counters.malformed += 1;
    }

    /// Accounts packet `p` (`raw` as read) to its flow, and answers it in capture mode.
    fn account(&mut self, raw: &[u8], p: &Packet<'_>, now_ns: u64) {
        let key = match p.fragment {
            Fragment::Later(id) => self
                .fragments
                .iter()
                .find(|(f, _)| *f == id)
                .map_or_else(|| FlowKey::of(p), |&(_, key)| key),
            _ => FlowKey::of(p),
        };
        if let Fragment::First(id) = p.fragment {
            if self.fragments.len() >= FRAGMENTS_REMEMBERED {
                self.fragments.pop_front();
            }
            self.fragments.push_back((id, key));
        }
        let resolver = &self.resolver;
        let flow = self.flows.packet(key, now_ns, |ip| resolver.name_of(ip));
        if flow.is_none() {
            self.counters.over_limit += 1;
        }
        let capture = self.mode.answers();
        match p.transport {
            Transport::Udp {
                src_port,
                dst_port: 53,
                payload,
            } => {
                if let Some(i) = flow {
                    self.flows.payload(i, payload);
                }
                if p.fragment == Fragment::Whole {
                    let reply_to = SocketAddr::new(p.src, src_port);
                    let from = SocketAddr::new(p.dst, 53);
                    self.dns_query(payload, flow, from, reply_to);
                } else if let Some(i) = flow {
                    self.flows.note(i, "fragmented DNS query (not answered)");
                }
            }
            Transport::Tcp {
                src_port,
                dst_port,
                syn,
                ack,
                ..
            } if capture && p.fragment == Fragment::Whole => {
                let opens = syn && !ack;
                let relay_to = match (&self.stack, opens) {
                    (Some(stack), true) => stack.relay().and_then(|r| {
                        let name = self.resolver.name_of(p.dst);
                        r.target(name.as_ref().map(|n| n.as_slice()), dst_port)
                    }),
                    _ => None,
                };
                if let (Some((name, port)), Some(i)) = (&relay_to, flow) {
                    self.flows.note(i, &format!("relayed to {name}:{port}"));
                }
                let seg = Segment {
                    tuple: (
                        SocketAddr::new(p.src, src_port),
                        SocketAddr::new(p.dst, dst_port),
                    ),
                    opens,
                    flow,
                    relay_to,
                };
                if let Some(stack) = &mut self.stack {
                    // The stream's payload is accounted as the stack reads it.
                    if stack.input(
                        raw,
                        seg,
                        now_ns,
                        &mut self.out,
                        &mut self.flows,
                        &mut self.resolver,
                    ) {
                        self.counters.refused += 1;
                    }
                }
            }
            _ => {
                if let (
                    Some(i),
                    Transport::Udp {
                        dst_port: 443,
                        payload,
                        ..
                    },
                ) = (flow, &p.transport)
                {
                    self.quic(i, payload, SocketAddr::new(p.dst, 443));
                }
                if let Some(i) = flow {
                    self.flows.payload(i, p.payload());
                    if let Transport::Other {
                        malformed: true, ..
                    } = p.transport
                    {
                        self.flows.note(i, "transport header did not parse");
                    }
                }
            }
        }
    }

    /// Names flow `i` unread when `payload` is its first datagram and a QUIC Initial: QUIC
    /// is TLS inside UDP, encrypted, and the edge does not terminate it.
    fn quic(&mut self, i: usize, payload: &[u8], dst: SocketAddr) {
        let Some(f) = self.flows.get_mut(i) else {
            return;
        };
        if f.packets_out == 1 && f.bytes_out == 0 && quic_initial(payload) {
            let to = f
                .dns_name
                .as_ref()
                .map_or_else(|| dst.to_string(), |n| format!("{}:443", n.to_lossy()));
            f.unread = Some(format!("QUIC to {to}: encrypted, not read"));
        }
    }

    /// Records a DNS query sent from `reply_to` to `from` and, in capture mode, answers it.
    fn dns_query(
        &mut self,
        msg: &[u8],
        flow: Option<usize>,
        from: SocketAddr,
        reply_to: SocketAddr,
    ) {
        let answer = self.mode.answers();
        let handled = self.resolver.handle(msg, answer);
        if let Some(i) = flow {
            if let Some(note) = &handled.note {
                self.flows.note(i, note);
            }
            if let (Some(q), Some(f)) = (handled.query, self.flows.get_mut(i)) {
                f.dns = Some(q);
            }
        }
        if let Some(reply) = handled
            .reply
            .and_then(|r| packet::udp_packet(from, reply_to, &r))
        {
            self.out.push(reply);
        }
    }

    /// Runs the stack's timers and queues what it has to send.
    pub fn poll(&mut self, now_ns: u64) {
        if let Some(stack) = &mut self.stack {
            stack.poll(now_ns, &mut self.out, &mut self.flows, &mut self.resolver);
        }
        self.counters.dropped_in = self.out.dropped;
    }

    /// The next packet to write into the sandbox (counted as written; see
    /// [`Edge::output_dropped`]).
    pub fn output(&mut self) -> Option<Vec<u8>> {
        let packet = self.out.pop()?;
        self.counters.packets_in += 1;
        if let Some(p) = packet::parse(&packet) {
            let payload = match p.transport {
                Transport::Tcp { payload, .. } | Transport::Udp { payload, .. } => payload.len(),
                _ => 0,
            };
            if let Some(i) = self.flows.find(&FlowKey::answered_by(&p)) {
                self.flows.sent(i, payload);
            }
        }
        Some(packet)
    }

    /// The last packet [`Edge::output`] gave could not be written: counted as dropped
    /// rather than written.
    pub fn output_dropped(&mut self) {
        self.counters.packets_in = self.counters.packets_in.saturating_sub(1);
        self.out.dropped += 1;
        self.counters.dropped_in = self.out.dropped;
    }

    /// Packets waiting in the queue towards the sandbox.
    pub fn queued(&self) -> usize {
        self.out.len()
    }

    /// TCP sockets the stack holds (connections and listeners; capture mode).
    pub fn tcp_sockets(&self) -> usize {
        self.stack.as_ref().map_or(0, Stack::sockets)
    }

    /// How long until [`Edge::poll`] is due again, if a timer is pending.
    pub fn poll_delay_ns(&mut self, now_ns: u64) -> Option<u64> {
        self.stack.as_mut()?.poll_delay_ns(now_ns)
    }

    /// What was counted so far.
    pub fn counters(&self) -> &EdgeCounters {
        &self.counters
    }

    /// Ends the run at `_now_ns`: every flow (in the order they began, which is the order
    /// of their ids) and the counters. A flow ends at its last packet; connections still
    /// open are noted.
    pub fn finish(mut self, _now_ns: u64) -> (Vec<Flow>, EdgeCounters) {
        if let Some(stack) = &mut self.stack {
            stack.finish(&mut self.flows, &mut self.resolver);
            for i in stack.open_flows() {
                self.flows
                    .note(i, "connection still open at the end of the run");
            }
        }
        (self.flows.into_flows(), self.counters)
    }
}

/// Fuzzing entry points (`fuzz/fuzz_targets/dns.rs`, `tls.rs`, `packet.rs`), not part of the
/// API: the edge's DNS, ClientHello and IP packet readers on raw bytes, without the rest of
/// the edge around them (which `net_edge` goes through, at a cost in depth).
#[doc(hidden)]
pub mod fuzz {
    use glassbox_model::{Bytes, DnsQuery};
    use std::net::IpAddr;

    /// The edge's resolver: its questions read, its synthetic answers.
    #[derive(Debug)]
    pub struct Resolver(crate::dns::Resolver);

    impl Resolver {
        /// A resolver handing out at most `max_names` addresses.
        pub fn new(max_names: usize) -> Resolver {
            Resolver(crate::dns::Resolver::new(max_names))
        }

        /// A DNS message from the sandbox, answered when `answer` is set: the question (with
        /// the answers given), a note on anything odd, the reply.
        #[allow(clippy::type_complexity)]
        pub fn handle(
            &mut self,
            msg: &[u8],
            answer: bool,
        ) -> (Option<DnsQuery>, Option<String>, Option<Vec<u8>>) {
            let h = self.0.handle(msg, answer);
            (h.query, h.note, h.reply)
        }

        /// The name a synthetic address was handed out for.
        pub fn name_of(&self, ip: IpAddr) -> Option<Bytes> {
            self.0.name_of(ip)
        }
    }

    /// The question of a DNS message, not answered (DNS over TCP).
    pub fn dns_question(msg: &[u8]) -> Result<DnsQuery, String> {
        crate::dns::question(msg)
    }

    /// The first DNS message of a TCP stream, once it is complete.
    pub fn dns_tcp_message(stream: &[u8]) -> Option<&[u8]> {
        crate::dns::tcp_message(stream)
    }

    /// The ClientHello at the start of `stream`: `None` while incomplete, the server name
    /// it asked for when whole, why not when it cannot be read.
    #[allow(clippy::type_complexity)]
    pub fn client_hello(stream: &[u8]) -> Option<Result<Option<Vec<u8>>, &'static str>> {
        match crate::tls::client_hello(stream) {
            crate::tls::Hello::Incomplete => None,
            crate::tls::Hello::Complete { sni, .. } => Some(Ok(sni)),
            crate::tls::Hello::Invalid(why) => Some(Err(why)),
        }
    }

    /// The longest ClientHello the edge waits for.
    pub const MAX_HELLO: usize = crate::tls::MAX_HELLO;

    /// An IP packet as the edge reads it.
    #[derive(Debug)]
    pub struct Packet {
        /// Source address.
        pub src: IpAddr,
        /// Destination address.
        pub dst: IpAddr,
        /// The transport protocol (after any IPv6 extension headers).
        pub protocol: u8,
        /// 0: a whole datagram, 1: a first fragment, 2: a later one.
        pub fragment: u8,
        /// TCP or UDP ports (source, destination).
        pub ports: Option<(u16, u16)>,
        /// Where the transport payload is in the packet (the whole message for ICMP and
        /// other protocols).
        pub payload: std::ops::Range<usize>,
        /// A transport header that was there but did not parse.
        pub malformed: bool,
        /// Kernel housekeeping rather than a program's traffic.
        pub housekeeping: bool,
    }

    /// Reads an IP packet as the edge does; `None` when its IP header does not parse.
    pub fn packet(buf: &[u8]) -> Option<Packet> {
        use crate::packet::{Fragment, Transport};
        let p = crate::packet::parse(buf)?;
        let payload = p.payload();
        // Every slice the parser returns is cut from `buf`.
        let start = payload.as_ptr() as usize - buf.as_ptr() as usize;
        let (ports, malformed) = match p.transport {
            Transport::Tcp {
                src_port, dst_port, ..
            }
            | Transport::Udp {
                src_port, dst_port, ..
            } => (Some((src_port, dst_port)), false),
            Transport::Icmp { .. } => (None, false),
            Transport::Other { malformed, .. } => (None, malformed),
        };
        Some(Packet {
            src: p.src,
            dst: p.dst,
            protocol: p.protocol,
            fragment: match p.fragment {
                Fragment::Whole => 0,
                Fragment::First(_) => 1,
                Fragment::Later(_) => 2,
            },
            ports,
            payload: start..start + payload.len(),
            malformed,
            housekeeping: p.is_housekeeping(),
        })
    }
}

#[cfg(test)]
mod tests;
