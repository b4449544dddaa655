//! The userspace TCP stack of capture mode. smoltcp accepts every connection the sandbox
//! opens, to any address and port, and the first bytes of each stream say what it is: a TLS
//! ClientHello, an HTTP/1 request, DNS over TCP (its question is read), or something else
//! (read until the client closes or goes idle, its first bytes kept as the flow's sample).
//!
//! What follows depends on the edge's [`Responder`]:
//!
//! - `Refuse` (the default): a ClientHello's SNI and ALPN are read, then the connection is
//!   closed so the client fails fast (the flow's TLS is `not_terminated`, named unread); an
//!   HTTP request's line and Host are read and answered `503`, then the connection closed.
//! - `Answer(authority)`: TLS is terminated ([`crate::terminate`]) with a certificate of the
//!   audit's [`Authority`], and the cleartext kept (`Flow::cleartext`); HTTP/1.x, in clear or
//!   inside TLS, is read in full and every request answered ([`crate::http::Reader`]), kept
//!   as the flow's exchanges; a DNS-over-HTTPS request is answered by the edge's DNS
//!   ([`crate::doh`]: this is why the stack is handed the edge's [`Resolver`] on every call,
//!   the run's one address → name map, so that what DoH answers names later connections).
//!   A client that refuses the certificate, a ClientHello that does not parse or never
//!   completes: the flow says why it is unread (`Flow::unread`).
//!
//! A relayed connection ([`crate::relay`], the install phase's registry) is never answered
//! nor terminated, whatever the responder: its bytes go to the real host untouched, and its
//! TLS is named not terminated.
//!
//! A listening socket is made on demand for each SYN that no connection owns, and consumed by
//! it; sockets are freed once closed, and there are never more than `max_tcp` of them (a SYN
//! beyond is reset by smoltcp), which also bounds the TLS sessions in flight. Per connection:
//! a receive buffer, a send buffer (larger for a connection glassbox answers: a TLS flight and
//! responses), a head of at most [`HEAD_LIMIT`] bytes to recognise the stream, and at most
//! [`PENDING_LIMIT`] bytes of answers waiting for room (beyond, the connection is not read
//! further until the client takes them: a client that sends requests without reading the
//! answers is held back, not buffered), and what TLS and the HTTP reader hold (a record, a
//! head, a body's decoder): under 1 MiB per connection at worst (a br body being read),
//! usually a fraction of it.

use crate::authority::Authority;
use crate::dns::{self, Resolver};
use crate::flows::Flows;
use crate::http::{self, Event, Reader, Request, CONTINUE, RESPONSE_503};
use crate::outbox::Outbox;
use crate::relay::{Link, Relay};
use crate::terminate::{Terminated, TlsEvent};
use crate::tls::{self, Hello};
use crate::{doh, Responder, RESOLVER_V4};
use glassbox_model::{Bytes, TlsOutcome, TlsRecord};
use smoltcp::iface::{Config, Interface, SocketHandle, SocketSet};
use smoltcp::phy::{Device, DeviceCapabilities, Medium, RxToken, TxToken};
use smoltcp::socket::tcp;
use smoltcp::time::Instant;
use smoltcp::wire::{HardwareAddress, IpAddress, IpCidr};
use std::hash::{BuildHasher, Hasher};
use std::net::{Ipv6Addr, SocketAddr};

/// The stack's own IPv6 address (the IPv4 one is [`RESOLVER_V4`]); it only serves as the
/// gateway of the default routes, so that replies to any sandbox address can be routed.
const STACK_V6: Ipv6Addr = Ipv6Addr::new(0x64, 0xff9b, 1, 0, 0, 0, 0, 2);
/// The MTU the stack assumes for the edge interface.
const MTU: usize = 1500;
/// Receive buffer of each connection (drained after every packet).
const RX_BUFFER: usize = 32 * 1024;
/// Send buffer of a connection the edge does not answer beyond a 503.
const TX_BUFFER: usize = 4 * 1024;
/// Send buffer of a connection the edge answers (a TLS server flight with its two
/// certificates is about 2 KiB; responses are small).
const ANSWER_TX_BUFFER: usize = 64 * 1024;
/// Answer bytes waiting beyond the send buffer before a connection is not read further.
pub(crate) const PENDING_LIMIT: usize = 64 * 1024;
/// Stream bytes taken at once from an answered connection (so that what one read produces,
/// answers to pipelined requests, stays small).
const READ_CHUNK: usize = 4096;
/// Send buffer of a relayed connection (what the real host answers, on its way in).
const RELAY_TX_BUFFER: usize = 256 * 1024;
/// A relayed connection (a registry's keep-alive) may stay silent this long before the
/// idle timers above start.
const RELAY_IDLE_NS: u64 = 60_000_000_000;
/// How often the loop looks at relayed connections for the host's bytes.
const RELAY_POLL_NS: u64 = 1_000_000;
/// First stream bytes kept to recognise the stream: a whole ClientHello, or a whole HTTP
/// request head.
pub(crate) const HEAD_LIMIT: usize = if tls::MAX_HELLO + 8 * 1024 > http::HEAD_LIMIT {
    tls::MAX_HELLO + 8 * 1024
} else {
    http::HEAD_LIMIT
};
/// A connection silent this long is closed (a half-open one reset)...
const IDLE_CLOSE_NS: u64 = 10_000_000_000;
/// ...reset this long after its last packet...
const IDLE_ABORT_NS: u64 = 15_000_000_000;
/// ...and forgotten this long after, whatever state smoltcp still has it in.
const IDLE_FORGET_NS: u64 = 20_000_000_000;

/// The two ends of a TCP connection: (sandbox end, destination).
pub(crate) type Tuple = (SocketAddr, SocketAddr);

/// A TCP segment from the sandbox, as far as the stack's bookkeeping needs it.
#[derive(Clone, Debug)]
pub(crate) struct Segment {
    pub tuple: Tuple,
    /// SYN without ACK: opens a connection.
    pub opens: bool,
    /// The flow it was accounted to.
    pub flow: Option<usize>,
    /// The real host to relay the connection it opens to (see [`crate::relay`]).
    pub relay_to: Option<(String, u16)>,
}

/// smoltcp's view of the edge: at most one packet to receive, and the outbox.
struct Wire<'a> {
    rx: Option<&'a [u8]>,
    out: &'a mut Outbox,
}

struct Rx<'a>(&'a [u8]);

struct Tx<'a>(&'a mut Outbox);

impl RxToken for Rx<'_> {
    fn consume<R, F: FnOnce(&[u8]) -> R>(self, f: F) -> R {
        f(self.0)
    }
}

impl TxToken for Tx<'_> {
    fn consume<R, F: FnOnce(&mut [u8]) -> R>(self, len: usize, f: F) -> R {
        let mut packet = vec![0; len];
        let r = f(&mut packet);
        self.0.push(packet);
        r
    }
}

impl Device for Wire<'_> {
    type RxToken<'b>
        = Rx<'b>
    where
        Self: 'b;
    type TxToken<'b>
        = Tx<'b>
    where
        Self: 'b;

    fn receive(&mut self, _: Instant) -> Option<(Rx<'_>, Tx<'_>)> {
        let packet = self.rx.take()?;
        Some((Rx(packet), Tx(self.out)))
    }

    fn transmit(&mut self, _: Instant) -> Option<Tx<'_>> {
        if self.out.is_full() {
            None
        } else {
            Some(Tx(self.out))
        }
    }

    fn capabilities(&self) -> DeviceCapabilities {
        let mut caps = DeviceCapabilities::default();
        caps.medium = Medium::Ip;
        caps.max_transmission_unit = MTU;
        caps
    }
}

/// What to do with a connection after reading from it.
enum Action {
    Nothing,
    /// Send the 503 answer, then close.
    Answer,
    /// Close (send FIN).
    Close,
}

/// How far the reading of a stream went.
#[derive(Debug)]
enum Reading {
    /// Nothing recognised yet.
    Start,
    /// An HTTP request head was read: answer 503 once the stream has `until` bytes
    /// (responder `refuse`).
    HttpBody { until: u64 },
    /// HTTP in clear, read in full and answered.
    Clear(Box<Reader>),
    /// TLS terminated here, and the HTTP inside it.
    Tls(Box<Terminated>, Box<Reader>),
    /// Nothing more to look for; read until the client closes.
    Done,
}

/// One connection (or the listener made for its SYN).
#[derive(Debug)]
struct Conn {
    handle: SocketHandle,
    tuple: Tuple,
    flow: Option<usize>,
    /// Last packet from the sandbox.
    last_ns: u64,
    /// The stream's first bytes, for the parsers (emptied once reading is done).
    head: Vec<u8>,
    /// How much of `head` was looked at for a line end (an HTTP head ends with one).
    head_seen: usize,
    /// Stream bytes received.
    received: u64,
    reading: Reading,
    /// The host side, for a relayed connection.
    relay: Option<Link>,
    /// The authority of a connection glassbox answers (responder `ok`, not relayed).
    answer: Option<Authority>,
    /// Answer bytes smoltcp's send buffer had no room for yet.
    pending: Vec<u8>,
    /// Close once `pending` is sent.
    close_after: bool,
    /// The close was handed to smoltcp.
    closed: bool,
}

impl Conn {
    /// The last packet either way (a relayed connection also lives by the host's bytes),
    /// moved back by the relay's longer patience.
    fn idle_since(&self) -> u64 {
        match self.relay {
            Some(_) => self.last_ns.saturating_add(RELAY_IDLE_NS),
            None => self.last_ns,
        }
    }

    /// Stream bytes from the sandbox: accounted to the flow, kept for the parsers, and,
    /// on a connection glassbox answers, read at once.
    fn take(&mut self, data: &[u8], flows: &mut Flows, dns: &mut Resolver) {
        if let Some(i) = self.flow {
            flows.payload(i, data);
        }
        self.received += data.len() as u64;
        if matches!(self.reading, Reading::Start) {
            let room = HEAD_LIMIT.saturating_sub(self.head.len());
            let (now, later) = data.split_at(room.min(data.len()));
            self.head.extend_from_slice(now);
            if self.answer.is_some() {
                let _ = self.start(flows, dns);
                if !later.is_empty() {
                    self.feed(later, flows, dns);
                }
            }
        } else if self.answer.is_some() {
            self.feed(data, flows, dns);
        }
    }

    /// Reads what arrived so far, and says what to do (connections glassbox does not
    /// answer).
    fn read(&mut self, flows: &mut Flows, dns: &mut Resolver) -> Action {
        match self.reading {
            Reading::HttpBody { until } if self.received >= until => {
                self.done();
                Action::Answer
            }
            Reading::Start => self.start(flows, dns),
            _ => Action::Nothing,
        }
    }

    /// Recognises the start of the stream.
    fn start(&mut self, flows: &mut Flows, dns: &mut Resolver) -> Action {
        let Some(&first) = self.head.first() else {
            return Action::Nothing;
        };
        let full = self.head.len() >= HEAD_LIMIT;
        if self.tuple.1.port() == 53 {
            match dns::tcp_message(&self.head).map(dns::question) {
                Some(Ok(q)) => self.update(flows, |f| f.dns = Some(q)),
                Some(Err(why)) => self.note(flows, &why),
                None if full => self.note(flows, "DNS message longer than the edge reads"),
                None => return Action::Nothing,
            }
            self.done();
            return Action::Nothing;
        }
        if tls::looks_like_tls(first) {
            return match tls::client_hello(&self.head) {
                Hello::Incomplete if !full => Action::Nothing,
                Hello::Incomplete => {
                    self.note(flows, "TLS ClientHello longer than the edge reads");
                    self.unread(flows, "a ClientHello longer than the edge reads");
                    self.done();
                    Action::Nothing
                }
                Hello::Complete { sni, alpn } => self.hello(flows, sni, alpn, dns),
                Hello::Invalid(why) => {
                    self.note(flows, why);
                    self.unread(
                        flows,
                        &format!("a ClientHello the edge cannot read ({why})"),
                    );
                    self.done();
                    Action::Nothing
                }
            };
        }
        // A head is whole only once a line end came.
        let fresh = &self.head[self.head_seen.min(self.head.len())..];
        if !full && !fresh.contains(&b'\n') {
            self.head_seen = self.head.len();
            return Action::Nothing;
        }
        self.head_seen = self.head.len();
        match http::request(&self.head) {
            Request::Incomplete if !full => Action::Nothing,
            Request::Incomplete | Request::NotHttp => {
                self.done();
                Action::Nothing
            }
            Request::Head {
                request,
                head_len,
                body_wait,
            } => {
                self.update(flows, |f| f.http = Some(request));
                if self.answer.is_some() {
                    let head = std::mem::take(&mut self.head);
                    self.reading = Reading::Clear(Box::new(Reader::new()));
                    self.feed(&head, flows, dns);
                    return Action::Nothing;
                }
                self.reading = Reading::HttpBody {
                    until: head_len as u64 + body_wait,
                };
                self.head = Vec::new();
                self.read(flows, dns)
            }
        }
    }

    /// A whole ClientHello: terminated (responder `ok`), or recorded and closed.
    fn hello(
        &mut self,
        flows: &mut Flows,
        sni: Option<Vec<u8>>,
        alpn: Vec<Vec<u8>>,
        dns: &mut Resolver,
    ) -> Action {
        self.update(flows, |f| f.sni = sni.map(Into::into));
        let record = |outcome| TlsRecord {
            alpn_offered: alpn.iter().map(|p| Bytes(p.clone())).collect(),
            alpn: None,
            version: None,
            certificate_for: None,
            outcome,
        };
        if let Some(authority) = self.answer.clone() {
            // Until the handshake says otherwise.
            let why = "the TLS handshake did not complete";
            self.update(flows, |f| {
                f.tls = Some(record(TlsOutcome::Refused { why: why.into() }));
            });
            self.unread(flows, why);
            let head = std::mem::take(&mut self.head);
            self.reading = Reading::Tls(
                Box::new(Terminated::new(authority, self.tuple.1)),
                Box::new(Reader::new()),
            );
            self.feed(&head, flows, dns);
            return Action::Nothing;
        }
        let why = match self.relay {
            Some(_) => "relayed byte for byte to the real host, not terminated",
            None => "not terminated (the edge's responder is refuse)",
        };
        self.update(flows, |f| {
            f.tls = Some(record(TlsOutcome::NotTerminated { why: why.into() }));
        });
        self.unread(flows, why);
        self.done();
        Action::Close
    }

    /// Stream bytes after its start, on a connection glassbox answers.
    fn feed(&mut self, data: &[u8], flows: &mut Flows, dns: &mut Resolver) {
        let mut events = Vec::new();
        match &mut self.reading {
            Reading::Clear(reader) => reader.feed(data, &mut events),
            Reading::Tls(tls, reader) => {
                let mut plain = Vec::new();
                let mut happened = Vec::new();
                tls.feed(data, &mut plain, &mut self.pending, &mut happened);
                if !plain.is_empty() {
                    reader.feed(&plain, &mut events);
                }
                self.tls_events(happened, flows);
                if let (false, Some(i)) = (plain.is_empty(), self.flow) {
                    flows.cleartext(i, &plain);
                }
            }
            _ => return,
        }
        self.http_events(events, flows, dns);
    }

    /// Records what the TLS session did.
    fn tls_events(&mut self, events: Vec<TlsEvent>, flows: &mut Flows) {
        for e in events {
            match e {
                TlsEvent::Hello {
                    alpn_offered,
                    certificate_for,
                } => self.update(flows, |f| {
                    if let Some(t) = &mut f.tls {
                        t.alpn_offered = alpn_offered.into_iter().map(Bytes).collect();
                        t.certificate_for = Some(certificate_for);
                    }
                }),
                TlsEvent::Established { version, alpn } => {
                    self.update(flows, |f| {
                        if let Some(t) = &mut f.tls {
                            t.version = Some(version);
                            t.alpn = alpn;
                            t.outcome = TlsOutcome::Read;
                        }
                    });
                    if let Some(i) = self.flow {
                        flows.unread(i, None);
                    }
                }
                TlsEvent::Refused(why) => {
                    self.refused(flows, &why);
                    self.close_after = true;
                }
                TlsEvent::NotTerminated(why) => {
                    self.update(flows, |f| {
                        if let Some(t) = &mut f.tls {
                            t.outcome = TlsOutcome::NotTerminated { why: why.clone() };
                        }
                    });
                    self.unread(flows, &why);
                    self.close_after = true;
                }
                TlsEvent::Closed => self.close_after = true,
                TlsEvent::Failed(why) => {
                    self.note(flows, &why);
                    self.close_after = true;
                }
            }
        }
    }

    /// The handshake ended without the client taking the certificate (`why`).
    fn refused(&self, flows: &mut Flows, why: &str) {
        self.update(flows, |f| {
            if let Some(t) = &mut f.tls {
                t.outcome = TlsOutcome::Refused { why: why.into() };
            }
        });
        self.unread(flows, why);
    }

    /// Records the exchanges read and sends their answers: a DNS-over-HTTPS request's from
    /// the edge's DNS (`dns`), any other's glassbox's synthetic one.
    fn http_events(&mut self, events: Vec<Event>, flows: &mut Flows, dns: &mut Resolver) {
        for e in events {
            let closes = e.closes();
            match e {
                Event::Continue => self.send(CONTINUE),
                Event::Exchange {
                    mut exchange,
                    answer,
                } => {
                    let response = match doh::serve(&mut exchange, answer, dns) {
                        Some(served) => {
                            if let Some(note) = &served.note {
                                self.note(flows, note);
                            }
                            served.response
                        }
                        None => answer.map(http::response).unwrap_or_default(),
                    };
                    if let Some(i) = self.flow {
                        flows.exchange(i, *exchange);
                    }
                    self.send(&response);
                    self.close_after |= closes;
                }
                Event::Stopped(why) => {
                    let what = match self.reading {
                        Reading::Tls(..) => "the cleartext inside TLS",
                        _ => "the stream",
                    };
                    self.note(flows, &format!("{what} stops being read as HTTP: {why}"));
                }
                Event::Encrypted => self.unread(
                    flows,
                    "TLS begun inside the stream after its HTTP (a CONNECT tunnel, STARTTLS)",
                ),
            }
        }
    }

    /// Answer bytes for the client (encrypted when the stream is TLS).
    fn send(&mut self, bytes: &[u8]) {
        if bytes.is_empty() {
            return;
        }
        match &mut self.reading {
            Reading::Tls(tls, _) => tls.send(bytes, &mut self.pending),
            _ => self.pending.extend_from_slice(bytes),
        }
    }

    /// Ends the session (TLS: `close_notify`) before the connection is closed.
    fn end_session(&mut self) {
        if let Reading::Tls(tls, _) = &mut self.reading {
            tls.close(&mut self.pending);
        }
    }

    /// The stream ended (`how`: the client closed it, it was reset, the run ended): what was
    /// under way is recorded as it went.
    fn ended(&mut self, flows: &mut Flows, dns: &mut Resolver, how: &str) {
        let mut events = Vec::new();
        match &mut self.reading {
            Reading::Start if self.head.first().copied().is_some_and(tls::looks_like_tls) => {
                self.note(flows, "stream ended inside a truncated TLS record");
                self.unread(flows, &format!("{how} inside its ClientHello"));
            }
            Reading::Clear(reader) => reader.end(how, &mut events),
            Reading::Tls(tls, reader) => {
                if tls.handshaking() {
                    let why = format!("{how} during the handshake");
                    self.refused(flows, &why);
                } else {
                    reader.end(how, &mut events);
                }
            }
            _ => {}
        }
        self.http_events(events, flows, dns);
        self.end_session();
        self.done();
    }

    fn done(&mut self) {
        self.reading = Reading::Done;
        self.head = Vec::new();
    }

    fn update(&self, flows: &mut Flows, f: impl FnOnce(&mut glassbox_model::Flow)) {
        if let Some(flow) = self.flow.and_then(|i| flows.get_mut(i)) {
            f(flow);
        }
    }

    fn note(&self, flows: &mut Flows, text: &str) {
        if let Some(i) = self.flow {
            flows.note(i, text);
        }
    }

    /// Marks the flow unread: `TLS to NAME:PORT: why: encrypted, not read`.
    fn unread(&self, flows: &mut Flows, why: &str) {
        let Some(i) = self.flow else {
            return;
        };
        let dst = self.tuple.1;
        let name = flows.get_mut(i).and_then(|f| {
            f.sni
                .as_ref()
                .or(f.dns_name.as_ref())
                .map(|n| format!("{}:{}", n.to_lossy(), dst.port()))
        });
        let to = name.unwrap_or_else(|| dst.to_string());
        flows.unread(i, Some(format!("TLS to {to}: {why}: encrypted, not read")));
    }
}

/// The TCP stack of one capture run.
pub(crate) struct Stack {
    iface: Interface,
    sockets: SocketSet<'static>,
    conns: Vec<Conn>,
    max_tcp: usize,
    relay: Option<Relay>,
    responder: Responder,
}

impl std::fmt::Debug for Stack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stack")
            .field("conns", &self.conns)
            .field("max_tcp", &self.max_tcp)
            .field("responder", &self.responder.name())
            .finish_non_exhaustive()
    }
}

impl Stack {
    /// A stack accepting every address, holding at most `max_tcp` sockets.
    pub fn new(max_tcp: usize, now_ns: u64, out: &mut Outbox) -> Stack {
        let mut wire = Wire { rx: None, out };
        let mut config = Config::new(HardwareAddress::Ip);
        config.random_seed = std::collections::hash_map::RandomState::new()
            .build_hasher()
            .finish();
        let mut iface = Interface::new(config, &mut wire, instant(now_ns));
        iface.update_ip_addrs(|addrs| {
            // Room for both: smoltcp keeps a few addresses per interface.
            let _ = addrs.push(IpCidr::new(IpAddress::Ipv4(RESOLVER_V4), 15));
            let _ = addrs.push(IpCidr::new(IpAddress::Ipv6(STACK_V6), 128));
        });
        // With any_ip, smoltcp 0.14 takes packets to every address; the default routes
        // (via its own addresses) let it send back to any address the sandbox used.
        iface.set_any_ip(true);
        let _ = iface.routes_mut().add_default_ipv4_route(RESOLVER_V4);
        let _ = iface.routes_mut().add_default_ipv6_route(STACK_V6);
        Stack {
            iface,
            sockets: SocketSet::new(Vec::new()),
            conns: Vec::new(),
            max_tcp,
            relay: None,
            responder: Responder::Refuse,
        }
    }

    /// What the stack answers, from the next connection on.
    pub fn set_responder(&mut self, responder: Responder) {
        self.responder = responder;
    }

    /// Relays connections to `relay`'s hosts to the real network.
    pub fn set_relay(&mut self, relay: Relay) {
        self.relay = Some(relay);
    }

    /// The relay, if there is one.
    pub fn relay(&self) -> Option<&Relay> {
        self.relay.as_ref()
    }

    /// A TCP packet from the sandbox. Returns `true` when it opened a connection there was
    /// no room for (smoltcp resets it).
    pub fn input(
        &mut self,
        packet: &[u8],
        seg: Segment,
        now_ns: u64,
        out: &mut Outbox,
        flows: &mut Flows,
        dns: &mut Resolver,
    ) -> bool {
        let mut refused = false;
        if let Some(conn) = self.conns.iter_mut().find(|c| c.tuple == seg.tuple) {
            conn.last_ns = now_ns;
        } else if seg.opens {
            if self.conns.len() < self.max_tcp {
                self.listen(seg, now_ns);
            } else {
                refused = true;
            }
        }
        self.run(Some(packet), now_ns, out, flows, dns);
        refused
    }

    /// Closes idle connections and runs smoltcp's timers.
    pub fn poll(&mut self, now_ns: u64, out: &mut Outbox, flows: &mut Flows, dns: &mut Resolver) {
        for conn in &self.conns {
            let idle = now_ns.saturating_sub(conn.idle_since());
            let sock = self.sockets.get_mut::<tcp::Socket>(conn.handle);
            if idle >= IDLE_ABORT_NS {
                sock.abort();
            } else if idle >= IDLE_CLOSE_NS {
                if sock.state() == tcp::State::SynReceived {
                    sock.abort();
                } else {
                    sock.close();
                }
            }
        }
        self.run(None, now_ns, out, flows, dns);
    }

    /// How long until [`Stack::poll`] is due, in ns.
    pub fn poll_delay_ns(&mut self, now_ns: u64) -> Option<u64> {
        let stack = self
            .iface
            .poll_delay(instant(now_ns), &self.sockets)
            .map(|d| d.total_micros().saturating_mul(1000));
        let idle = self
            .conns
            .iter()
            .filter_map(|c| {
                if c.relay.as_ref().is_some_and(Link::active) {
                    return Some(now_ns + RELAY_POLL_NS);
                }
                [IDLE_CLOSE_NS, IDLE_ABORT_NS, IDLE_FORGET_NS]
                    .into_iter()
                    .map(|d| c.idle_since().saturating_add(d))
                    .find(|&t| t > now_ns)
            })
            .min()
            .map(|t| t - now_ns);
        match (stack, idle) {
            (Some(a), Some(b)) => Some(a.min(b)),
            (a, b) => a.or(b),
        }
    }

    /// Sockets held (connections and listeners).
    pub fn sockets(&self) -> usize {
        self.conns.len()
    }

    /// The flows of connections still open.
    pub fn open_flows(&self) -> impl Iterator<Item = usize> + '_ {
        self.conns.iter().filter_map(|c| c.flow)
    }

    /// The run ends: what connections still open had under way is recorded as it went.
    pub fn finish(&mut self, flows: &mut Flows, dns: &mut Resolver) {
        for conn in &mut self.conns {
            conn.ended(flows, dns, "the run ended");
        }
    }

    /// A socket listening for the SYN of `seg` (on its destination address and port).
    fn listen(&mut self, seg: Segment, now_ns: u64) {
        let relayed = seg.relay_to.is_some() && self.relay.is_some();
        let answer = match (&self.responder, relayed) {
            (Responder::Answer(a), false) => Some(a.clone()),
            _ => None,
        };
        let tx = match (relayed, &answer) {
            (true, _) => RELAY_TX_BUFFER,
            (false, Some(_)) => ANSWER_TX_BUFFER,
            (false, None) => TX_BUFFER,
        };
        let mut sock = tcp::Socket::new(
            tcp::SocketBuffer::new(vec![0; RX_BUFFER]),
            tcp::SocketBuffer::new(vec![0; tx]),
        );
        sock.set_nagle_enabled(false);
        sock.set_ack_delay(None);
        // Port 0 cannot be listened on: smoltcp resets that SYN.
        if sock.listen(seg.tuple.1).is_err() {
            return;
        }
        let handle = self.sockets.add(sock);
        let relay = match (&self.relay, seg.relay_to) {
            (Some(r), Some((name, port))) => Some(Link::open(r, name, port)),
            _ => None,
        };
        self.conns.push(Conn {
            handle,
            tuple: seg.tuple,
            flow: seg.flow,
            last_ns: now_ns,
            head: Vec::new(),
            head_seen: 0,
            received: 0,
            reading: Reading::Start,
            relay,
            answer,
            pending: Vec::new(),
            close_after: false,
            closed: false,
        });
    }

    /// Lets smoltcp take `rx` and send what it has, reads every stream, sends what that
    /// calls for, and frees the sockets that are done.
    fn run(
        &mut self,
        rx: Option<&[u8]>,
        now_ns: u64,
        out: &mut Outbox,
        flows: &mut Flows,
        dns: &mut Resolver,
    ) {
        let now = instant(now_ns);
        let mut wire = Wire { rx, out };
        self.iface.poll(now, &mut wire, &mut self.sockets);
        // Reading may queue an answer or a close; one more poll sends it.
        if self.read_all(flows, dns) {
            self.iface.poll(now, &mut wire, &mut self.sockets);
        }
        self.free(now_ns, flows, dns);
    }

    /// Reads every stream; `true` when a socket has something new to send.
    fn read_all(&mut self, flows: &mut Flows, dns: &mut Resolver) -> bool {
        let mut changed = false;
        for conn in &mut self.conns {
            let sock = self.sockets.get_mut::<tcp::Socket>(conn.handle);
            if conn.answer.is_some() {
                changed |= answer(conn, sock, flows, dns);
                continue;
            }
            while sock.can_recv() {
                let taken = sock.recv(|data| {
                    conn.take(data, flows, dns);
                    if let Some(link) = &mut conn.relay {
                        link.send(data);
                    }
                    (data.len(), data.len())
                });
                if !matches!(taken, Ok(n) if n > 0) {
                    break;
                }
            }
            if conn.relay.is_some() {
                // Recognised for the record (SNI, request line) but never answered here:
                // the real host answers.
                let _ = conn.read(flows, dns);
            }
            if let Some(link) = &mut conn.relay {
                let mut handed = 0usize;
                if sock.may_send() {
                    link.deliver(|data| {
                        let n = sock.send_slice(data).unwrap_or(0);
                        handed += n;
                        n
                    });
                }
                if handed > 0 {
                    changed = true;
                }
                if let Some(why) = link.failure.take() {
                    if let Some(i) = conn.flow {
                        flows.note(i, &why);
                    }
                    sock.abort();
                    changed = true;
                } else if link.host_done && !link.active() && sock.may_send() {
                    sock.close();
                    changed = true;
                }
                if sock.state() == tcp::State::CloseWait {
                    link.sandbox_closed();
                }
                continue;
            }
            match conn.read(flows, dns) {
                Action::Nothing => {}
                Action::Answer => {
                    // The send buffer is empty and larger than the answer.
                    let _ = sock.send_slice(RESPONSE_503);
                    sock.close();
                    changed = true;
                }
                Action::Close => {
                    sock.close();
                    changed = true;
                }
            }
            if sock.state() == tcp::State::CloseWait {
                conn.ended(flows, dns, "the client closed the connection");
                sock.close();
                changed = true;
            }
        }
        changed
    }

    /// Frees the sockets that are done: listeners left over (their SYN was not taken, or
    /// the connection was reset back to listening), closed connections, idle ones.
    fn free(&mut self, now_ns: u64, flows: &mut Flows, dns: &mut Resolver) {
        let sockets = &mut self.sockets;
        self.conns.retain_mut(|c| {
            let sock = sockets.get::<tcp::Socket>(c.handle);
            let gone = match sock.state() {
                tcp::State::Listen | tcp::State::TimeWait => true,
                tcp::State::Closed => sock.remote_endpoint().is_none(),
                _ => false,
            } || now_ns.saturating_sub(c.last_ns) >= IDLE_FORGET_NS;
            if gone {
                c.ended(flows, dns, "the connection was reset or went idle");
                sockets.remove(c.handle);
            }
            !gone
        });
    }
}

/// Reads and answers a connection glassbox answers; `true` when it has something new to
/// send.
fn answer(
    conn: &mut Conn,
    sock: &mut tcp::Socket<'_>,
    flows: &mut Flows,
    dns: &mut Resolver,
) -> bool {
    let mut changed = false;
    // While the client takes the answers: one that does not is not read further (smoltcp's
    // receive window closes on it) rather than answered into an ever longer queue.
    while sock.can_recv() && conn.pending.len() < PENDING_LIMIT {
        let taken = sock.recv(|data| {
            let n = data.len().min(READ_CHUNK);
            conn.take(&data[..n], flows, dns);
            (n, n)
        });
        changed |= flush(conn, sock);
        if !matches!(taken, Ok(n) if n > 0) {
            break;
        }
    }
    if sock.state() == tcp::State::CloseWait && !conn.close_after {
        conn.ended(flows, dns, "the client closed the connection");
        conn.close_after = true;
    }
    if conn.close_after && !conn.closed {
        conn.end_session();
    }
    changed |= flush(conn, sock);
    if conn.close_after && !conn.closed && (conn.pending.is_empty() || !sock.may_send()) {
        sock.close();
        conn.closed = true;
        changed = true;
    }
    changed
}

/// Hands `conn`'s waiting answer bytes to its socket, as far as there is room.
fn flush(conn: &mut Conn, sock: &mut tcp::Socket<'_>) -> bool {
    if conn.pending.is_empty() || !sock.may_send() {
        return false;
    }
    let n = sock.send_slice(&conn.pending).unwrap_or(0);
    conn.pending.drain(..n);
    n > 0
}

/// smoltcp's clock from the audit's (ns).
fn instant(now_ns: u64) -> Instant {
    Instant::from_micros(i64::try_from(now_ns / 1000).unwrap_or(i64::MAX))
}
