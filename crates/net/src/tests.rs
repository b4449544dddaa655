//! Tests of the engine as a whole: packets built by hand or by a second smoltcp interface
//! acting as the sandbox, wired to the edge in memory. `answered`: the responder `ok`, with
//! real TLS clients.

mod answered;

use super::*;
use crate::http::RESPONSE_503;
use crate::tls::tests::client_hello_record;
use glassbox_model::{Bytes, FlowProtocol, SockAddr};
use hickory_proto::op::{Message, MessageType, OpCode, Query, ResponseCode};
use hickory_proto::rr::{Name, RData, RecordType};
use smoltcp::iface::{Config, Interface, SocketHandle, SocketSet};
use smoltcp::phy::{ChecksumCapabilities, Device, DeviceCapabilities, Medium};
use smoltcp::socket::tcp;
use smoltcp::time::Instant;
use smoltcp::wire::{
    HardwareAddress, IpAddress, IpCidr, IpProtocol, IpRepr, TcpControl, TcpPacket, TcpRepr,
    TcpSeqNumber,
};
use std::net::IpAddr;

const MS: u64 = 1_000_000;
/// How long the edge lets a silent connection stay open.
const IDLE_CLOSE: u64 = 10_000 * MS;

fn v4(a: u8, b: u8, c: u8, d: u8) -> IpAddr {
    IpAddr::V4(Ipv4Addr::new(a, b, c, d))
}

fn at(ip: IpAddr, port: u16) -> SocketAddr {
    SocketAddr::new(ip, port)
}

fn sandbox(port: u16) -> SocketAddr {
    at(IpAddr::V4(SANDBOX_V4), port)
}

fn sandbox6(port: u16) -> SocketAddr {
    at(IpAddr::V6(SANDBOX_V6), port)
}

fn capture() -> Edge {
    Edge::new(NetworkMode::Capture, 100, Limits::default())
}

fn outputs(edge: &mut Edge) -> Vec<Vec<u8>> {
    std::iter::from_fn(|| edge.output()).collect()
}

/// Every packet is counted once: as malformed, housekeeping, beyond the limit, or in a flow.
fn assert_all_counted(flows: &[Flow], c: &EdgeCounters) {
    let in_flows: u64 = flows.iter().map(|f| f.packets_out).sum();
    assert_eq!(
        c.packets,
        c.malformed + c.housekeeping + c.over_limit + in_flows,
        "{c:?}"
    );
}

fn udp(src: SocketAddr, dst: SocketAddr, payload: &[u8]) -> Vec<u8> {
    packet::udp_packet(src, dst, payload).unwrap()
}

/// An IP packet of `protocol` carrying `payload` (no transport checksum).
fn ip_packet(src: IpAddr, dst: IpAddr, protocol: IpProtocol, payload: &[u8]) -> Vec<u8> {
    let ip = IpRepr::new(src.into(), dst.into(), protocol, payload.len(), 64);
    let mut buf = vec![0; ip.buffer_len()];
    ip.emit(&mut buf[..], &ChecksumCapabilities::default());
    let header = ip.header_len();
    buf[header..].copy_from_slice(payload);
    buf
}

fn tcp_segment(src: SocketAddr, dst: SocketAddr, control: TcpControl, seq: i32) -> Vec<u8> {
    let repr = TcpRepr {
        src_port: src.port(),
        dst_port: dst.port(),
        control,
        seq_number: TcpSeqNumber(seq),
        ack_number: None,
        window_len: 64_000,
        window_scale: None,
        max_seg_size: Some(1460),
        sack_permitted: false,
        sack_ranges: [None; 3],
        timestamp: None,
        payload: &[],
    };
    let (s, d): (IpAddress, IpAddress) = (src.ip().into(), dst.ip().into());
    let ip = IpRepr::new(s, d, IpProtocol::Tcp, repr.buffer_len(), 64);
    let caps = ChecksumCapabilities::default();
    let mut buf = vec![0; ip.buffer_len()];
    ip.emit(&mut buf[..], &caps);
    let header = ip.header_len();
    repr.emit(
        &mut TcpPacket::new_unchecked(&mut buf[header..]),
        &s,
        &d,
        &caps,
    );
    buf
}

fn syn(src: SocketAddr, dst: SocketAddr) -> Vec<u8> {
    tcp_segment(src, dst, TcpControl::Syn, 1000)
}

fn dns_query(id: u16, name: &str, qtype: RecordType) -> Vec<u8> {
    let mut m = Message::new(id, MessageType::Query, OpCode::Query);
    m.metadata.recursion_desired = true;
    m.add_query(Query::query(Name::from_ascii(name).unwrap(), qtype));
    m.to_vec().unwrap()
}

/// The ends and the DNS message of a UDP answer.
fn dns_reply(packet: &[u8]) -> (SocketAddr, SocketAddr, Message) {
    let p = packet::parse(packet).unwrap();
    let Transport::Udp {
        src_port,
        dst_port,
        payload,
    } = p.transport
    else {
        panic!("not UDP: {p:?}");
    };
    (
        at(p.src, src_port),
        at(p.dst, dst_port),
        Message::from_vec(payload).unwrap(),
    )
}

/// Asks `name` and returns the one address answered.
fn resolve(edge: &mut Edge, id: u16, name: &str, qtype: RecordType) -> IpAddr {
    edge.input(
        &udp(
            sandbox(40_000 + id),
            at(IpAddr::V4(RESOLVER_V4), 53),
            &dns_query(id, name, qtype),
        ),
        u64::from(id) * MS,
    );
    let out = outputs(edge);
    assert_eq!(out.len(), 1);
    let (from, to, m) = dns_reply(&out[0]);
    assert_eq!(from, at(IpAddr::V4(RESOLVER_V4), 53));
    assert_eq!(to, sandbox(40_000 + id));
    assert_eq!(m.metadata.id, id);
    assert_eq!(m.answers.len(), 1);
    match &m.answers[0].data {
        RData::A(a) => IpAddr::V4(a.0),
        RData::AAAA(a) => IpAddr::V6(a.0),
        other => panic!("{other:?}"),
    }
}

fn flow_to<'a>(flows: &'a [Flow], dst: &SockAddr) -> &'a Flow {
    flows
        .iter()
        .find(|f| &f.dst == dst)
        .unwrap_or_else(|| panic!("no flow to {dst}: {flows:#?}"))
}

fn sock(a: SocketAddr) -> SockAddr {
    flows::sock_addr(a)
}

#[test]
fn dns_answers_are_synthetic_stable_and_map_back() {
    let mut edge = capture();
    let a = resolve(&mut edge, 1, "api.example.", RecordType::A);
    assert_eq!(a, IpAddr::V4(SYNTHETIC_V4_FIRST));
    assert_eq!(resolve(&mut edge, 2, "API.Example.", RecordType::A), a);
    let b = resolve(&mut edge, 3, "other.example.", RecordType::A);
    assert_eq!(b, v4(198, 18, 1, 1));
    let a6 = resolve(&mut edge, 4, "api.example.", RecordType::AAAA);
    assert_eq!(a6, "64:ff9b:1:ffff::c612:100".parse::<IpAddr>().unwrap());

    // Another type: NOERROR, no answer.
    edge.input(
        &udp(
            sandbox(41_000),
            at(IpAddr::V4(RESOLVER_V4), 53),
            &dns_query(5, "api.example.", RecordType::TXT),
        ),
        5 * MS,
    );
    let (_, _, m) = dns_reply(&outputs(&mut edge)[0]);
    assert_eq!(m.metadata.response_code, ResponseCode::NoError);
    assert!(m.answers.is_empty());

    edge.input(&syn(sandbox(50_000), at(a, 443)), 10 * MS);
    edge.input(&syn(sandbox6(50_001), at(a6, 443)), 11 * MS);
    edge.input(&syn(sandbox(50_002), at(v4(192, 0, 2, 1), 443)), 12 * MS);
    let (flows, counters) = edge.finish(20 * MS);
    assert_all_counted(&flows, &counters);

    let ids: Vec<u64> = flows.iter().map(|f| f.id).collect();
    assert_eq!(ids, (100..100 + flows.len() as u64).collect::<Vec<_>>());
    let dns: Vec<&Flow> = flows
        .iter()
        .filter(|f| f.protocol == FlowProtocol::Dns)
        .collect();
    assert_eq!(dns.len(), 5);
    let q = dns[0].dns.as_ref().unwrap();
    assert_eq!(q.name, Bytes::from("api.example"));
    assert_eq!(q.qtype, "A");
    assert_eq!(q.answers, vec!["198.18.1.0".to_string()]);
    assert_eq!(dns[3].dns.as_ref().unwrap().qtype, "AAAA");
    assert_eq!(dns[4].dns.as_ref().unwrap().qtype, "TXT");
    assert!(dns[0].bytes_in > 0 && dns[0].sample.0 == dns_query(1, "api.example.", RecordType::A));

    let to_a = flow_to(&flows, &sock(at(a, 443)));
    assert_eq!(to_a.protocol, FlowProtocol::Tcp);
    assert_eq!(to_a.dns_name, Some(Bytes::from("api.example")));
    assert_eq!(to_a.src, Some(sock(sandbox(50_000))));
    let to_a6 = flow_to(&flows, &sock(at(a6, 443)));
    assert_eq!(to_a6.dns_name, Some(Bytes::from("api.example")));
    assert_eq!(
        to_a6.dst,
        SockAddr::Inet6 {
            ip: "64:ff9b:1:ffff::c612:100".into(),
            port: 443
        }
    );
    assert_eq!(
        flow_to(&flows, &sock(at(v4(192, 0, 2, 1), 443))).dns_name,
        None
    );
}

#[test]
fn dns_to_any_address_is_answered_from_that_address() {
    let mut edge = capture();
    let server = at(v4(192, 0, 2, 53), 53);
    edge.input(
        &udp(
            sandbox(33_333),
            server,
            &dns_query(7, "x.test.", RecordType::A),
        ),
        MS,
    );
    let out = outputs(&mut edge);
    assert_eq!(out.len(), 1);
    let (from, to, m) = dns_reply(&out[0]);
    assert_eq!((from, to), (server, sandbox(33_333)));
    assert_eq!(m.answers.len(), 1);

    // Over IPv6 too.
    let server6 = at("2001:db8::53".parse().unwrap(), 53);
    edge.input(
        &udp(
            sandbox6(33_334),
            server6,
            &dns_query(8, "x.test.", RecordType::AAAA),
        ),
        2 * MS,
    );
    let (from, to, m) = dns_reply(&outputs(&mut edge)[0]);
    assert_eq!((from, to), (server6, sandbox6(33_334)));
    assert_eq!(m.answers.len(), 1);
    let (flows, c) = edge.finish(3 * MS);
    assert_eq!(c.packets_in, 2);
    assert_eq!(flows.len(), 2);
    assert_eq!(flows[0].dst, sock(server));
}

#[test]
fn bad_dns_messages_are_noted_and_never_crash() {
    let mut edge = capture();
    let resolver = at(IpAddr::V4(RESOLVER_V4), 53);
    // A name made of a compression pointer to itself, and a label then a pointer back.
    let mut looped = vec![0x12, 0x34, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0];
    looped.extend_from_slice(&[0xc0, 0x0c, 0, 1, 0, 1]);
    let mut looped2 = vec![0x12, 0x35, 0x01, 0x00, 0, 1, 0, 0, 0, 0, 0, 0];
    looped2.extend_from_slice(&[1, b'a', 0xc0, 0x0c, 0, 1, 0, 1]);
    // 65,535 questions announced in a 12-byte message.
    let many = [0x12, 0x36, 0x01, 0x00, 0xff, 0xff, 0, 0, 0, 0, 0, 0];
    for (i, msg) in [
        &looped[..],
        &looped2[..],
        &many[..],
        &[1, 2, 3][..],
        &[][..],
    ]
    .iter()
    .enumerate()
    {
        edge.input(&udp(sandbox(20_000 + i as u16), resolver, msg), MS);
    }
    let out = outputs(&mut edge);
    // FORMERR for the three whose header parsed; nothing for the others.
    assert_eq!(out.len(), 3);
    for p in &out {
        let (_, _, m) = dns_reply(p);
        assert_eq!(m.metadata.response_code, ResponseCode::FormErr);
    }
    let (flows, c) = edge.finish(2 * MS);
    assert_all_counted(&flows, &c);
    assert_eq!(flows.len(), 5);
    for f in &flows {
        assert_eq!(f.protocol, FlowProtocol::Dns);
        assert!(f.dns.is_none());
        assert!(f.note.is_some(), "{f:?}");
    }
}

/// A pretend sandbox: a smoltcp interface with the sandbox's addresses, wired to the edge.
struct Client {
    iface: Interface,
    sockets: SocketSet<'static>,
    wire: Pipe,
    now_ns: u64,
}

#[derive(Default)]
struct Pipe {
    rx: std::collections::VecDeque<Vec<u8>>,
    tx: std::collections::VecDeque<Vec<u8>>,
}

struct PipeRx(Vec<u8>);
struct PipeTx<'a>(&'a mut std::collections::VecDeque<Vec<u8>>);

impl smoltcp::phy::RxToken for PipeRx {
    fn consume<R, F: FnOnce(&[u8]) -> R>(self, f: F) -> R {
        f(&self.0)
    }
}

impl smoltcp::phy::TxToken for PipeTx<'_> {
    fn consume<R, F: FnOnce(&mut [u8]) -> R>(self, len: usize, f: F) -> R {
        let mut p = vec![0; len];
        let r = f(&mut p);
        self.0.push_back(p);
        r
    }
}

impl Device for Pipe {
    type RxToken<'a> = PipeRx;
    type TxToken<'a> = PipeTx<'a>;

    fn receive(&mut self, _: Instant) -> Option<(PipeRx, PipeTx<'_>)> {
        let p = self.rx.pop_front()?;
        Some((PipeRx(p), PipeTx(&mut self.tx)))
    }

    fn transmit(&mut self, _: Instant) -> Option<PipeTx<'_>> {
        Some(PipeTx(&mut self.tx))
    }

    fn capabilities(&self) -> DeviceCapabilities {
        let mut caps = DeviceCapabilities::default();
        caps.medium = Medium::Ip;
        caps.max_transmission_unit = 1500;
        caps
    }
}

impl Client {
    fn new() -> Client {
        let mut wire = Pipe::default();
        let mut iface = Interface::new(
            Config::new(HardwareAddress::Ip),
            &mut wire,
            Instant::from_millis(0),
        );
        iface.update_ip_addrs(|a| {
            a.push(IpCidr::new(IpAddress::Ipv4(SANDBOX_V4), 15))
                .unwrap();
            a.push(IpCidr::new(IpAddress::Ipv6(SANDBOX_V6), 128))
                .unwrap();
        });
        iface
            .routes_mut()
            .add_default_ipv4_route(RESOLVER_V4)
            .unwrap();
        iface
            .routes_mut()
            .add_default_ipv6_route(Ipv6Addr::new(0x64, 0xff9b, 1, 0, 0, 0, 0, 2))
            .unwrap();
        Client {
            iface,
            sockets: SocketSet::new(Vec::new()),
            wire,
            now_ns: 0,
        }
    }

    fn connect(&mut self, to: SocketAddr, local_port: u16) -> SocketHandle {
        let sock = tcp::Socket::new(
            tcp::SocketBuffer::new(vec![0; 65_536]),
            tcp::SocketBuffer::new(vec![0; 65_536]),
        );
        let h = self.sockets.add(sock);
        let cx = self.iface.context();
        self.sockets
            .get_mut::<tcp::Socket>(h)
            .connect(cx, to, local_port)
            .unwrap();
        h
    }

    fn sock(&mut self, h: SocketHandle) -> &mut tcp::Socket<'static> {
        self.sockets.get_mut::<tcp::Socket>(h)
    }

    /// Moves packets both ways, 1 ms per round, until `done` holds (at most `rounds`).
    fn pump(&mut self, edge: &mut Edge, rounds: usize, done: impl Fn(&mut Client) -> bool) {
        for _ in 0..rounds {
            let now = Instant::from_micros((self.now_ns / 1000) as i64);
            self.iface.poll(now, &mut self.wire, &mut self.sockets);
            while let Some(p) = self.wire.tx.pop_front() {
                edge.input(&p, self.now_ns);
            }
            edge.poll(self.now_ns);
            self.wire.rx.extend(outputs(edge));
            self.iface.poll(now, &mut self.wire, &mut self.sockets);
            if done(self) {
                return;
            }
            self.now_ns += MS;
        }
    }

    fn received(&mut self, h: SocketHandle) -> Vec<u8> {
        let mut out = Vec::new();
        let sock = self.sock(h);
        while sock.can_recv() {
            sock.recv(|d| {
                out.extend_from_slice(d);
                (d.len(), ())
            })
            .unwrap();
        }
        out
    }
}

#[test]
fn an_http_request_gets_503_once_its_body_arrived() {
    let mut edge = capture();
    let mut client = Client::new();
    let server = at(v4(192, 0, 2, 80), 80);
    let h = client.connect(server, 49_152);
    client.pump(&mut edge, 100, |c| c.sock(h).may_send());
    assert_eq!(client.sock(h).state(), tcp::State::Established);

    let head = b"POST /upload HTTP/1.1\r\nHost: api.example\r\nContent-Length: 11\r\n\r\n";
    client.sock(h).send_slice(head).unwrap();
    client.pump(&mut edge, 50, |_| false);
    // The body has not come: no answer yet.
    assert!(client.received(h).is_empty());
    assert_eq!(client.sock(h).state(), tcp::State::Established);

    client.sock(h).send_slice(b"hello world").unwrap();
    client.pump(&mut edge, 100, |c| !c.sock(h).may_recv());
    let answer = client.received(h);
    assert_eq!(answer, RESPONSE_503);
    assert!(answer.starts_with(b"HTTP/1.1 503 Service Unavailable\r\n"));
    assert_eq!(client.sock(h).state(), tcp::State::CloseWait);
    client.sock(h).close();
    client.pump(&mut edge, 100, |_| false);
    assert_eq!(edge.tcp_sockets(), 0, "{edge:?}");

    let (flows, c) = edge.finish(client.now_ns);
    assert_all_counted(&flows, &c);
    assert_eq!(flows.len(), 1);
    let f = &flows[0];
    assert_eq!(f.protocol, FlowProtocol::Tcp);
    assert_eq!(f.src, Some(sock(sandbox(49_152))));
    assert_eq!(f.dst, sock(server));
    let http = f.http.as_ref().unwrap();
    assert_eq!(http.method, "POST");
    assert_eq!(http.target, Bytes::from("/upload"));
    assert_eq!(http.host, Some(Bytes::from("api.example")));
    let mut sent = head.to_vec();
    sent.extend_from_slice(b"hello world");
    assert_eq!(f.sample.0, sent);
    assert_eq!(f.bytes_out, sent.len() as u64);
    assert_eq!(f.bytes_in, RESPONSE_503.len() as u64);
    assert!(f.packets_out >= 4);
    assert!(f.note.is_none(), "{f:?}");
}

#[test]
fn tcp_over_ipv6_is_accepted_too() {
    let mut edge = capture();
    let mut client = Client::new();
    let server = at("2001:db8::80".parse().unwrap(), 8080);
    let h = client.connect(server, 49_200);
    client.pump(&mut edge, 100, |c| c.sock(h).may_send());
    client
        .sock(h)
        .send_slice(b"GET /x HTTP/1.1\r\nHost: v6.test:8080\r\n\r\n")
        .unwrap();
    client.pump(&mut edge, 100, |c| !c.sock(h).may_recv());
    assert_eq!(client.received(h), RESPONSE_503);
    let (flows, _) = edge.finish(client.now_ns);
    assert_eq!(flows[0].src, Some(sock(sandbox6(49_200))));
    assert_eq!(flows[0].dst, sock(server));
    let http = flows[0].http.as_ref().unwrap();
    assert_eq!(http.host, Some(Bytes::from("v6.test:8080")));
}

#[test]
fn a_client_hello_is_recorded_and_the_connection_closed() {
    let mut edge = capture();
    let mut client = Client::new();
    let server = at(v4(192, 0, 2, 44), 443);
    let h = client.connect(server, 49_153);
    client.pump(&mut edge, 100, |c| c.sock(h).may_send());
    // The ClientHello in two segments.
    let hello = client_hello_record("dns.google");
    client.sock(h).send_slice(&hello[..20]).unwrap();
    client.pump(&mut edge, 5, |_| false);
    assert_eq!(client.sock(h).state(), tcp::State::Established);
    client.sock(h).send_slice(&hello[20..]).unwrap();
    client.pump(&mut edge, 100, |c| !c.sock(h).may_recv());
    assert_eq!(client.sock(h).state(), tcp::State::CloseWait);
    assert!(client.received(h).is_empty());

    let (flows, _) = edge.finish(client.now_ns);
    assert_eq!(flows[0].sni, Some(Bytes::from("dns.google")));
    assert_eq!(flows[0].sample.0, hello);
}

#[test]
fn a_truncated_tls_record_is_noted() {
    let mut edge = capture();
    let mut client = Client::new();
    let h = client.connect(at(v4(192, 0, 2, 45), 443), 49_154);
    client.pump(&mut edge, 100, |c| c.sock(h).may_send());
    let hello = client_hello_record("cut.example");
    client.sock(h).send_slice(&hello[..40]).unwrap();
    client.sock(h).close();
    client.pump(&mut edge, 200, |c| {
        c.sock(h).state() == tcp::State::TimeWait
    });
    let (flows, _) = edge.finish(client.now_ns);
    assert!(flows[0].sni.is_none());
    let note = flows[0].note.as_deref().unwrap_or_default();
    assert!(note.contains("truncated TLS record"), "{note}");
}

#[test]
fn other_streams_are_read_until_idle_then_closed() {
    let mut edge = capture();
    let mut client = Client::new();
    let h = client.connect(at(v4(203, 0, 113, 22), 22), 49_155);
    client.pump(&mut edge, 100, |c| c.sock(h).may_send());
    client.sock(h).send_slice(b"SSH-2.0-client\r\n").unwrap();
    client.pump(&mut edge, 20, |_| false);
    assert_eq!(client.sock(h).state(), tcp::State::Established);
    assert_eq!(edge.tcp_sockets(), 1);
    // The edge wakes for its idle timer.
    let delay = edge.poll_delay_ns(client.now_ns).unwrap();
    assert!(delay <= IDLE_CLOSE);
    client.now_ns += IDLE_CLOSE;
    client.pump(&mut edge, 100, |c| !c.sock(h).may_recv());
    assert_eq!(client.sock(h).state(), tcp::State::CloseWait);
    let (flows, _) = edge.finish(client.now_ns);
    assert_eq!(flows[0].sample, Bytes::from("SSH-2.0-client\r\n"));
    assert!(flows[0].http.is_none() && flows[0].sni.is_none());
}

#[test]
fn dns_over_tcp_is_a_tcp_flow_with_its_question() {
    let mut edge = capture();
    let mut client = Client::new();
    let h = client.connect(at(v4(192, 0, 2, 53), 53), 49_156);
    client.pump(&mut edge, 100, |c| c.sock(h).may_send());
    let q = dns_query(9, "tcp.example.", RecordType::A);
    let mut framed = (q.len() as u16).to_be_bytes().to_vec();
    framed.extend_from_slice(&q);
    client.sock(h).send_slice(&framed).unwrap();
    client.pump(&mut edge, 20, |_| false);
    let (flows, _) = edge.finish(client.now_ns);
    assert_eq!(flows[0].protocol, FlowProtocol::Tcp);
    let dns = flows[0].dns.as_ref().unwrap();
    assert_eq!(dns.name, Bytes::from("tcp.example"));
    assert!(dns.answers.is_empty());
}

#[test]
fn udp_is_logged_and_icmp_counted_without_answers() {
    let mut edge = capture();
    let dst = at(v4(203, 0, 113, 9), 5000);
    edge.input(&udp(sandbox(6000), dst, b"ping"), MS);
    edge.input(&udp(sandbox(6000), dst, b"pong"), 2 * MS);
    let echo = [8, 0, 0, 0, 0, 1, 0, 1, b'x'];
    edge.input(
        &ip_packet(
            IpAddr::V4(SANDBOX_V4),
            v4(198, 51, 100, 7),
            IpProtocol::Icmp,
            &echo,
        ),
        3 * MS,
    );
    edge.input(
        &ip_packet(
            IpAddr::V4(SANDBOX_V4),
            v4(198, 51, 100, 7),
            IpProtocol::Icmp,
            &echo,
        ),
        4 * MS,
    );
    let echo6 = [128, 0, 0, 0, 0, 1, 0, 1];
    edge.input(
        &ip_packet(
            IpAddr::V6(SANDBOX_V6),
            "2001:db8::7".parse().unwrap(),
            IpProtocol::Icmpv6,
            &echo6,
        ),
        5 * MS,
    );
    edge.poll(6 * MS);
    assert!(edge.output().is_none());
    let (flows, c) = edge.finish(7 * MS);
    assert_all_counted(&flows, &c);
    assert_eq!(flows.len(), 3);
    let u = &flows[0];
    assert_eq!(
        (u.protocol, u.packets_out, u.bytes_out),
        (FlowProtocol::Udp, 2, 8)
    );
    assert_eq!(u.sample, Bytes::from("pingpong"));
    assert_eq!((u.t_ns, u.end_ns), (MS, 2 * MS));
    let i = &flows[1];
    assert_eq!((i.protocol, i.packets_out), (FlowProtocol::Icmp, 2));
    assert_eq!(
        i.dst,
        SockAddr::Inet {
            ip: "198.51.100.7".into(),
            port: 0
        }
    );
    assert_eq!(flows[2].protocol, FlowProtocol::Icmp);
    assert_eq!(c.packets_in, 0);
}

#[test]
fn denied_mode_answers_nothing_and_counts_everything() {
    let mut edge = Edge::new(NetworkMode::Denied, 1, Limits::default());
    let resolver = at(IpAddr::V4(RESOLVER_V4), 53);
    let web = at(v4(192, 0, 2, 10), 443);
    edge.input(
        &udp(
            sandbox(40_000),
            resolver,
            &dns_query(1, "api.example.", RecordType::A),
        ),
        MS,
    );
    edge.input(&syn(sandbox(50_000), web), 2 * MS);
    edge.input(&syn(sandbox(50_000), web), 3 * MS); // retransmitted
    edge.input(
        &syn(sandbox6(50_001), at("2001:db8::10".parse().unwrap(), 443)),
        4 * MS,
    );
    edge.input(
        &udp(sandbox(6000), at(v4(203, 0, 113, 9), 5000), b"x"),
        5 * MS,
    );
    edge.input(
        &ip_packet(
            IpAddr::V4(SANDBOX_V4),
            v4(198, 51, 100, 7),
            IpProtocol::Icmp,
            &[8, 0, 0, 0],
        ),
        6 * MS,
    );
    edge.input(
        &ip_packet(
            IpAddr::V4(SANDBOX_V4),
            v4(198, 51, 100, 8),
            IpProtocol::Unknown(47),
            b"gre",
        ),
        7 * MS,
    );
    edge.poll(8 * MS);
    assert!(edge.output().is_none());
    assert_eq!(edge.poll_delay_ns(8 * MS), None);
    assert_eq!(edge.tcp_sockets(), 0);

    let (flows, c) = edge.finish(9 * MS);
    assert_all_counted(&flows, &c);
    assert_eq!(c.packets, 7);
    assert_eq!(c.packets_in, 0);
    let kinds: Vec<(FlowProtocol, u64)> =
        flows.iter().map(|f| (f.protocol, f.packets_out)).collect();
    assert_eq!(
        kinds,
        vec![
            (FlowProtocol::Dns, 1),
            (FlowProtocol::Tcp, 2),
            (FlowProtocol::Tcp, 1),
            (FlowProtocol::Udp, 1),
            (FlowProtocol::Icmp, 1),
            (FlowProtocol::Other, 1),
        ]
    );
    assert!(flows.iter().all(|f| f.mode == NetworkMode::Denied));
    let q = flows[0].dns.as_ref().unwrap();
    assert_eq!(
        (q.name.as_str(), q.qtype.as_str()),
        (Some("api.example"), "A")
    );
    assert!(q.answers.is_empty());
    assert_eq!(flows[0].dst, sock(resolver));
    assert_eq!(flows[1].dst, sock(web));
    assert_eq!(flows[5].note.as_deref(), Some("IP protocol 47"));
    assert_eq!(
        flows.iter().map(|f| f.id).collect::<Vec<_>>(),
        vec![1, 2, 3, 4, 5, 6]
    );
}

#[test]
fn kernel_housekeeping_is_counted_apart() {
    let mut edge = capture();
    let all_nodes: IpAddr = "ff02::1:ff00:1".parse().unwrap();
    // Neighbour solicitation.
    edge.input(
        &ip_packet(
            IpAddr::V6(SANDBOX_V6),
            all_nodes,
            IpProtocol::Icmpv6,
            &[135, 0, 0, 0, 0, 0, 0, 0],
        ),
        MS,
    );
    // MLDv2 report behind a hop-by-hop header, from the unspecified address.
    let mut hbh = vec![58, 0, 5, 2, 0, 0, 1, 0];
    hbh.extend_from_slice(&[143, 0, 0, 0, 0, 0, 0, 0]);
    edge.input(
        &ip_packet(
            "::".parse().unwrap(),
            "ff02::16".parse().unwrap(),
            IpProtocol::HopByHop,
            &hbh,
        ),
        2 * MS,
    );
    // MLD from the sandbox's own address, still behind hop-by-hop.
    edge.input(
        &ip_packet(
            IpAddr::V6(SANDBOX_V6),
            "ff02::16".parse().unwrap(),
            IpProtocol::HopByHop,
            &hbh,
        ),
        3 * MS,
    );
    // DHCP-like, from 0.0.0.0.
    edge.input(
        &udp(
            at(v4(0, 0, 0, 0), 68),
            at(v4(255, 255, 255, 255), 67),
            b"discover",
        ),
        4 * MS,
    );
    assert!(edge.output().is_none());
    let (flows, c) = edge.finish(5 * MS);
    assert!(flows.is_empty(), "{flows:?}");
    assert_eq!((c.packets, c.housekeeping), (4, 4));
}

/// A deterministic byte generator for the fuzz-style tests.
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u8 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1);
        (self.0 >> 33) as u8
    }

    fn bytes(&mut self, n: usize) -> Vec<u8> {
        (0..n).map(|_| self.next()).collect()
    }
}

#[test]
fn malformed_packets_are_counted_and_never_crash() {
    for mode in [NetworkMode::Capture, NetworkMode::Denied] {
        let mut edge = Edge::new(mode, 0, Limits::default());
        let mut fed = 0u64;
        let mut feed = |edge: &mut Edge, p: &[u8]| {
            edge.input(p, fed * MS);
            fed += 1;
        };
        let good = udp(sandbox(1), at(v4(192, 0, 2, 1), 2), b"payload");
        let tcp_good = syn(sandbox(3), at(v4(192, 0, 2, 1), 4));
        // Not IP at all, and truncated or lying IP headers.
        feed(&mut edge, &[]);
        feed(&mut edge, &[0x45]);
        feed(&mut edge, &good[..19]);
        feed(&mut edge, &good[..good.len() - 1]); // total length says more
        let mut short_ihl = good.clone();
        short_ihl[0] = 0x44;
        feed(&mut edge, &short_ihl);
        let mut v5 = good.clone();
        v5[0] = 0x55;
        feed(&mut edge, &v5);
        let mut v6 = udp(sandbox6(1), at("2001:db8::1".parse().unwrap(), 2), b"x");
        v6[5] = 0xff; // payload length beyond the packet
        feed(&mut edge, &v6);
        feed(&mut edge, &v6[..30]);
        // Whole IP headers with broken transport headers.
        let mut udp_len = good.clone();
        udp_len[24..26].copy_from_slice(&4u16.to_be_bytes()); // UDP length < 8
        feed(&mut edge, &udp_len);
        let mut udp_long = good.clone();
        udp_long[24..26].copy_from_slice(&1000u16.to_be_bytes());
        feed(&mut edge, &udp_long);
        let mut tcp_off = tcp_good.clone();
        tcp_off[32] = 0xf0; // data offset 60 bytes
        feed(&mut edge, &tcp_off);
        feed(
            &mut edge,
            &ip_packet(
                IpAddr::V4(SANDBOX_V4),
                v4(192, 0, 2, 1),
                IpProtocol::Tcp,
                &[1, 2, 3],
            ),
        );
        let mut bad_sum = tcp_good.clone();
        bad_sum[36] ^= 0xff;
        feed(&mut edge, &bad_sum);
        // Well-formed SYNs between odd addresses and ports.
        for (src, dst) in [
            (sandbox(5), at(v4(255, 255, 255, 255), 80)),
            (sandbox(5), at(v4(0, 0, 0, 0), 80)),
            (sandbox(5), at(v4(224, 0, 0, 1), 80)),
            (sandbox(5), at(v4(198, 18, 255, 255), 80)),
            (sandbox(5), at(v4(127, 0, 0, 1), 80)),
            (sandbox(5), at(v4(192, 0, 2, 1), 0)),
            (at(v4(224, 0, 0, 9), 5), at(v4(192, 0, 2, 1), 80)),
            (sandbox6(5), at("ff02::1".parse().unwrap(), 80)),
            (sandbox6(5), at("::".parse().unwrap(), 80)),
            (sandbox6(5), at("::1".parse().unwrap(), 80)),
            (
                at("fe80::1".parse().unwrap(), 5),
                at("fe80::2".parse().unwrap(), 80),
            ),
        ] {
            feed(&mut edge, &syn(src, dst));
            feed(&mut edge, &tcp_segment(src, dst, TcpControl::Rst, 5));
            feed(&mut edge, &tcp_segment(src, dst, TcpControl::Fin, 5));
        }
        // Random bytes, some dressed as IPv4 or IPv6.
        let mut rng = Lcg(7);
        for i in 0..3000 {
            let n = usize::from(rng.next()) * 2;
            let mut p = rng.bytes(n);
            if let Some(first) = p.first_mut() {
                *first = match i % 3 {
                    0 => 0x45,
                    1 => 0x60,
                    _ => *first,
                };
            }
            feed(&mut edge, &p);
        }
        edge.poll(fed * MS);
        while edge.output().is_some() {}
        let (flows, c) = edge.finish(fed * MS);
        assert_eq!(c.packets, fed);
        assert_all_counted(&flows, &c);
        assert!(c.malformed >= 8, "{c:?}");
        assert!(flows.iter().any(|f| f
            .note
            .as_deref()
            .is_some_and(|n| n.contains("transport header did not parse"))));
    }
}

#[test]
fn random_tcp_segments_never_crash_the_stack() {
    let limits = Limits {
        max_tcp: 8,
        ..Limits::default()
    };
    let mut edge = Edge::new(NetworkMode::Capture, 0, limits);
    let mut rng = Lcg(11);
    let dst = at(v4(192, 0, 2, 7), 80);
    let (s, d): (IpAddress, IpAddress) = (IpAddr::V4(SANDBOX_V4).into(), dst.ip().into());
    let mut now = 0;
    for i in 0..20_000u32 {
        // A few ports, so that segments land on live connections.
        let mut tcp = vec![0; 20];
        tcp[..2].copy_from_slice(&(40_000 + u16::from(rng.next() % 4)).to_be_bytes());
        tcp[2..4].copy_from_slice(&dst.port().to_be_bytes());
        tcp[4..12].copy_from_slice(&rng.bytes(8));
        tcp[12] = 0x50;
        tcp[13] = rng.next() & 0x1f;
        tcp[14..16].copy_from_slice(&[0xff, 0xff]);
        let len = usize::from(rng.next() % 64);
        tcp.extend_from_slice(&rng.bytes(len));
        let mut p = ip_packet(IpAddr::V4(SANDBOX_V4), dst.ip(), IpProtocol::Tcp, &tcp);
        TcpPacket::new_unchecked(&mut p[20..]).fill_checksum(&s, &d);
        edge.input(&p, now);
        if i % 16 == 0 {
            now += 500 * MS;
            edge.poll(now);
        }
        while edge.output().is_some() {}
        assert!(edge.tcp_sockets() <= 8);
    }
    let (flows, c) = edge.finish(now);
    assert_eq!(c.packets, 20_000);
    assert_all_counted(&flows, &c);
    assert_eq!(flows.len(), 4);
}

#[test]
fn a_64k_datagram_is_counted_and_sampled_within_bounds() {
    let limits = Limits {
        sample_per_flow: 1024,
        ..Limits::default()
    };
    let mut edge = Edge::new(NetworkMode::Capture, 0, limits);
    let payload = vec![0xab; 65_535 - 28];
    let big = udp(sandbox(7000), at(v4(203, 0, 113, 5), 9999), &payload);
    assert_eq!(big.len(), 65_535);
    edge.input(&big, MS);
    // The same to port 53: read as DNS, noted, not trusted.
    let dns = udp(sandbox(7001), at(v4(203, 0, 113, 5), 53), &payload);
    edge.input(&dns, 2 * MS);
    let (flows, c) = edge.finish(3 * MS);
    assert_all_counted(&flows, &c);
    assert_eq!(c.bytes, 2 * 65_535);
    assert_eq!(flows[0].bytes_out, payload.len() as u64);
    assert_eq!(flows[0].sample.0.len(), 1024);
    assert!(flows[0].sample_truncated);
    assert!(flows[1].note.is_some());
}

#[test]
fn fragments_count_with_their_datagram() {
    let mut edge = Edge::new(NetworkMode::Denied, 0, Limits::default());
    let whole = udp(sandbox(7000), at(v4(203, 0, 113, 5), 9999), &[1; 64]);
    let header = 20;
    // First fragment: IP header + 8 bytes UDP header + 24 payload bytes, more fragments.
    let mut first = whole[..header + 32].to_vec();
    first[2..4].copy_from_slice(&((header + 32) as u16).to_be_bytes());
    first[4..6].copy_from_slice(&77u16.to_be_bytes());
    first[6] = 0x20;
    let mut later = whole[..header].to_vec();
    later.extend_from_slice(&whole[header + 32..]);
    let later_len = later.len() as u16;
    later[2..4].copy_from_slice(&later_len.to_be_bytes());
    later[4..6].copy_from_slice(&77u16.to_be_bytes());
    later[6..8].copy_from_slice(&(32u16 / 8).to_be_bytes());
    edge.input(&first, MS);
    edge.input(&later, 2 * MS);
    let (flows, c) = edge.finish(3 * MS);
    assert_all_counted(&flows, &c);
    assert_eq!(flows.len(), 1);
    assert_eq!(flows[0].protocol, FlowProtocol::Udp);
    assert_eq!(flows[0].bytes_out, 64);
}

#[test]
fn a_syn_flood_stays_within_every_limit() {
    let limits = Limits {
        max_flows: 1000,
        max_tcp: 64,
        max_queued: 256,
        ..Limits::default()
    };
    let mut edge = Edge::new(NetworkMode::Capture, 0, limits);
    let target = at(v4(192, 0, 2, 1), 443);
    for i in 0..10_000u16 {
        edge.input(&syn(sandbox(10_000 + i), target), u64::from(i) * 1000);
        assert!(edge.tcp_sockets() <= 64);
        assert!(edge.queued() <= 256);
    }
    assert_eq!(edge.counters().packets, 10_000);
    assert_eq!(edge.counters().refused, 10_000 - 64);
    assert_eq!(edge.counters().over_limit, 9000);
    assert!(edge.counters().dropped_in > 0);
    // Nobody completes the handshakes: the half-open sockets go.
    let mut now = 10_000 * 1000;
    for _ in 0..40 {
        now += 1_000 * MS;
        edge.poll(now);
        while edge.output().is_some() {}
    }
    assert_eq!(edge.tcp_sockets(), 0);
    let (flows, c) = edge.finish(now);
    assert_eq!(flows.len(), 1000);
    assert_all_counted(&flows, &c);
}

#[test]
fn samples_are_bounded_per_flow_and_per_run() {
    let limits = Limits {
        sample_per_flow: 6,
        sample_total: 10,
        ..Limits::default()
    };
    let mut edge = Edge::new(NetworkMode::Denied, 0, limits);
    for port in [1, 2, 3] {
        edge.input(
            &udp(sandbox(port), at(v4(192, 0, 2, 9), 9), b"abcdefgh"),
            MS,
        );
    }
    let (flows, _) = edge.finish(2 * MS);
    let kept: Vec<usize> = flows.iter().map(|f| f.sample.0.len()).collect();
    assert_eq!(kept, vec![6, 4, 0]);
    assert!(flows.iter().all(|f| f.sample_truncated && f.bytes_out == 8));
}

#[test]
fn the_edge_can_move_to_a_serving_thread() {
    fn send<T: Send>() {}
    send::<Edge>();
}

/// A pair of connected SOCK_SEQPACKET sockets: a stand-in for a TUN descriptor (each
/// write is one packet).
fn packet_pair() -> (std::os::fd::OwnedFd, std::os::fd::OwnedFd) {
    use std::os::fd::FromRawFd;
    let mut fds = [0; 2];
    // SAFETY: `fds` is a valid array of two ints for socketpair to fill.
    let r = unsafe { libc::socketpair(libc::AF_UNIX, libc::SOCK_SEQPACKET, 0, fds.as_mut_ptr()) };
    assert_eq!(r, 0);
    // SAFETY: socketpair succeeded: both descriptors are open and owned by nobody else.
    unsafe {
        (
            std::os::fd::OwnedFd::from_raw_fd(fds[0]),
            std::os::fd::OwnedFd::from_raw_fd(fds[1]),
        )
    }
}

#[test]
fn serve_answers_over_a_descriptor_until_stopped_or_hung_up() {
    use std::io::{Read, Write};
    use std::os::fd::AsFd;
    use std::sync::atomic::AtomicBool;
    use std::sync::atomic::Ordering;

    let (ours, theirs) = packet_pair();
    let mut ours = std::fs::File::from(ours);
    let start = std::time::Instant::now();
    let clock = move || start.elapsed().as_nanos() as u64;
    let stop = AtomicBool::new(false);
    let mut edge = capture();
    std::thread::scope(|s| {
        let served = s.spawn(|| serve(theirs.as_fd(), &mut edge, &clock, &stop));
        let query = udp(
            sandbox(5353),
            at(IpAddr::V4(RESOLVER_V4), 53),
            &dns_query(3, "served.example.", RecordType::A),
        );
        ours.write_all(&query).unwrap();
        let mut buf = vec![0; 65_536];
        let n = ours.read(&mut buf).unwrap();
        let (_, _, m) = dns_reply(&buf[..n]);
        assert_eq!(m.answers.len(), 1);
        stop.store(true, Ordering::Relaxed);
        served.join().unwrap().unwrap();
    });
    assert_eq!(edge.counters().packets, 1);
    assert_eq!(edge.counters().packets_in, 1);

    // The other end goes away: serve returns by itself.
    let (ours, theirs) = packet_pair();
    let stop = AtomicBool::new(false);
    std::thread::scope(|s| {
        let served = s.spawn(|| serve(theirs.as_fd(), &mut edge, &clock, &stop));
        drop(ours);
        served.join().unwrap().unwrap();
    });
}

#[test]
fn serve_framed_answers_a_microvm_card_in_ethernet_frames() {
    use std::io::{Read, Write};
    use std::os::fd::AsFd;
    use std::sync::atomic::{AtomicBool, Ordering};

    let (ours, theirs) = packet_pair();
    let mut ours = std::fs::File::from(ours);
    let start = std::time::Instant::now();
    let clock = move || start.elapsed().as_nanos() as u64;
    let stop = AtomicBool::new(false);
    let mut edge = capture();
    let guest: [u8; 6] = [0x52, 0x54, 0x00, 0x12, 0x34, 0x56];
    let frame = |ethertype: [u8; 2], payload: &[u8]| {
        let mut f = vec![0x52, 0x54, 0x00, 0x67, 0x62, 0x01];
        f.extend_from_slice(&guest);
        f.extend_from_slice(&ethertype);
        f.extend_from_slice(payload);
        f
    };
    std::thread::scope(|s| {
        let served = s.spawn(|| {
            crate::serve_framed(
                theirs.as_fd(),
                crate::Framing::Ethernet,
                &mut edge,
                &clock,
                &stop,
            )
        });
        // An ARP request first: no IP packet, counted, not answered.
        ours.write_all(&frame([0x08, 0x06], &[0u8; 28])).unwrap();
        let query = udp(
            sandbox(5353),
            at(IpAddr::V4(RESOLVER_V4), 53),
            &dns_query(4, "framed.example.", RecordType::A),
        );
        ours.write_all(&frame([0x08, 0x00], &query)).unwrap();
        let mut buf = vec![0; 65_536];
        let n = ours.read(&mut buf).unwrap();
        assert_eq!(&buf[..6], &guest, "answers go to the guest's address");
        assert_eq!(&buf[6..12], &crate::wire::EDGE_MAC);
        assert_eq!(&buf[12..14], &[0x08, 0x00]);
        let (_, _, m) = dns_reply(&buf[14..n]);
        assert_eq!(m.answers.len(), 1);
        stop.store(true, Ordering::Relaxed);
        served.join().unwrap().unwrap();
    });
    let c = edge.counters();
    assert_eq!((c.packets, c.malformed, c.packets_in), (2, 1, 1));
    let (flows, _) = edge.finish(0);
    assert!(flows.iter().any(|f| f
        .dns
        .as_ref()
        .is_some_and(|d| d.name == glassbox_model::Bytes::from("framed.example"))));
}
