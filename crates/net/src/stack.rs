//! The userspace TCP stack of capture mode. smoltcp accepts every connection the sandbox
//! opens, to any address and port, and the first bytes of each stream are read: a TLS
//! ClientHello (its SNI; the connection is then closed, so the client fails fast), an HTTP
//! request (answered `503`, then closed), DNS over TCP (its question). Anything else is read
//! until the client closes or goes idle.
//!
//! A listening socket is made on demand for each SYN that no connection owns, and consumed by
//! it; sockets are freed once closed, and there are never more than `max_tcp` of them (a SYN
//! beyond is reset by smoltcp).

use crate::flows::Flows;
use crate::http::{self, Request, RESPONSE_503};
use crate::outbox::Outbox;
use crate::relay::{Link, Relay};
use crate::tls::{self, Hello};
use crate::{dns, RESOLVER_V4};
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
/// Send buffer of each connection (it only ever holds the 503 answer).
const TX_BUFFER: usize = 4 * 1024;
/// Send buffer of a relayed connection (what the real host answers, on its way in).
const RELAY_TX_BUFFER: usize = 256 * 1024;
/// A relayed connection (a registry's keep-alive) may stay silent this long before the
/// idle timers above start.
const RELAY_IDLE_NS: u64 = 60_000_000_000;
/// How often the loop looks at relayed connections for the host's bytes.
const RELAY_POLL_NS: u64 = 1_000_000;
/// First stream bytes kept for the parsers.
const HEAD_LIMIT: usize = tls::MAX_HELLO + 8 * 1024;
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
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Reading {
    /// Nothing recognised yet.
    Start,
    /// An HTTP request head was read: answer once the stream has `until` bytes.
    HttpBody { until: u64 },
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
    /// Stream bytes received.
    received: u64,
    reading: Reading,
    /// The host side, for a relayed connection.
    relay: Option<Link>,
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

    /// Stream bytes from the sandbox: accounted to the flow, and kept for the parsers.
    fn take(&mut self, data: &[u8], flows: &mut Flows) {
        if let Some(i) = self.flow {
            flows.payload(i, data);
        }
        self.received += data.len() as u64;
        if self.reading == Reading::Start {
            let room = HEAD_LIMIT.saturating_sub(self.head.len());
            self.head.extend_from_slice(&data[..room.min(data.len())]);
        }
    }

    /// Reads what arrived so far, and says what to do.
    fn read(&mut self, flows: &mut Flows) -> Action {
        match self.reading {
            Reading::Done => Action::Nothing,
            Reading::HttpBody { until } if self.received >= until => {
                self.done();
                Action::Answer
            }
            Reading::HttpBody { .. } => Action::Nothing,
            Reading::Start => self.start(flows),
        }
    }

    /// Recognises the start of the stream.
    fn start(&mut self, flows: &mut Flows) -> Action {
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
                    self.done();
                    Action::Nothing
                }
                Hello::Complete { sni } => {
                    self.update(flows, |f| f.sni = sni.map(Into::into));
                    self.done();
                    Action::Close
                }
                Hello::Invalid(why) => {
                    self.note(flows, why);
                    self.done();
                    Action::Nothing
                }
            };
        }
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
                self.reading = Reading::HttpBody {
                    until: head_len as u64 + body_wait,
                };
                self.head = Vec::new();
                self.read(flows)
            }
        }
    }

    /// The client closed its end: notes a ClientHello it cut short.
    fn ended(&mut self, flows: &mut Flows) {
        if self.reading == Reading::Start
            && self.head.first().copied().is_some_and(tls::looks_like_tls)
        {
            self.note(flows, "stream ended inside a truncated TLS record");
        }
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
}

/// The TCP stack of one capture run.
pub(crate) struct Stack {
    iface: Interface,
    sockets: SocketSet<'static>,
    conns: Vec<Conn>,
    max_tcp: usize,
    relay: Option<Relay>,
}

impl std::fmt::Debug for Stack {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Stack")
            .field("conns", &self.conns)
            .field("max_tcp", &self.max_tcp)
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
        }
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
        self.run(Some(packet), now_ns, out, flows);
        refused
    }

    /// Closes idle connections and runs smoltcp's timers.
    pub fn poll(&mut self, now_ns: u64, out: &mut Outbox, flows: &mut Flows) {
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
        self.run(None, now_ns, out, flows);
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

    /// A socket listening for the SYN of `seg` (on its destination address and port).
    fn listen(&mut self, seg: Segment, now_ns: u64) {
        let relayed = seg.relay_to.is_some() && self.relay.is_some();
        let tx = if relayed { RELAY_TX_BUFFER } else { TX_BUFFER };
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
            received: 0,
            reading: Reading::Start,
            relay,
        });
    }

    /// Lets smoltcp take `rx` and send what it has, reads every stream, sends what that
    /// calls for, and frees the sockets that are done.
    fn run(&mut self, rx: Option<&[u8]>, now_ns: u64, out: &mut Outbox, flows: &mut Flows) {
        let now = instant(now_ns);
        let mut wire = Wire { rx, out };
        self.iface.poll(now, &mut wire, &mut self.sockets);
        // Reading may queue an answer or a close; one more poll sends it.
        if self.read_all(flows) {
            self.iface.poll(now, &mut wire, &mut self.sockets);
        }
        self.free(now_ns);
    }

    /// Reads every stream; `true` when a socket has something new to send.
    fn read_all(&mut self, flows: &mut Flows) -> bool {
        let mut changed = false;
        for conn in &mut self.conns {
            let sock = self.sockets.get_mut::<tcp::Socket>(conn.handle);
            while sock.can_recv() {
                let taken = sock.recv(|data| {
                    conn.take(data, flows);
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
                let _ = conn.read(flows);
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
            match conn.read(flows) {
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
                conn.ended(flows);
                sock.close();
                changed = true;
            }
        }
        changed
    }

    /// Frees the sockets that are done: listeners left over (their SYN was not taken, or
    /// the connection was reset back to listening), closed connections, idle ones.
    fn free(&mut self, now_ns: u64) {
        let sockets = &mut self.sockets;
        self.conns.retain(|c| {
            let sock = sockets.get::<tcp::Socket>(c.handle);
            let gone = match sock.state() {
                tcp::State::Listen | tcp::State::TimeWait => true,
                tcp::State::Closed => sock.remote_endpoint().is_none(),
                _ => false,
            } || now_ns.saturating_sub(c.last_ns) >= IDLE_FORGET_NS;
            if gone {
                sockets.remove(c.handle);
            }
            !gone
        });
    }
}

/// smoltcp's clock from the audit's (ns).
fn instant(now_ns: u64) -> Instant {
    Instant::from_micros(i64::try_from(now_ns / 1000).unwrap_or(i64::MAX))
}
