//! The network edge against a fuzzed sandbox: raw packets (the IP, TCP, UDP and ICMP
//! parsers), valid UDP datagrams (DNS questions to port 53), and whole TCP streams, with a
//! real handshake, whose bytes reach the ClientHello, HTTP request and DNS-over-TCP readers.

use crate::Cursor;
use glassbox_model::{EdgeCounters, Flow, NetworkMode};
use glassbox_net::{
    Edge, Limits, RESOLVER_V4, SANDBOX_V4, SANDBOX_V6, SYNTHETIC_V4_FIRST, SYNTHETIC_V6_PREFIX,
};
use smoltcp::phy::ChecksumCapabilities;
use smoltcp::wire::{
    IpAddress, IpProtocol, IpRepr, Ipv4Packet, Ipv6Packet, TcpControl, TcpPacket, TcpRepr,
    TcpSeqNumber, UdpPacket, UdpRepr,
};
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr, SocketAddr};

/// Operations run from one input.
const MAX_OPS: usize = 48;
/// Data segments sent on one connection at most (larger segments when the payload needs).
const MAX_SEGMENTS: usize = 64;
/// The sandbox's first sequence number on every connection.
const ISN: i32 = 1000;
const MS: u64 = 1_000_000;

/// The edge, its clock and what was done to it.
struct Harness {
    edge: Edge,
    limits: Limits,
    now: u64,
    inputs: u64,
    /// Every packet the edge wrote towards the sandbox.
    written: u64,
}

impl Harness {
    fn input(&mut self, packet: &[u8]) {
        self.now += MS;
        self.inputs += 1;
        self.edge.input(packet, self.now);
        self.bounded();
    }

    fn bounded(&self) {
        assert!(
            self.edge.tcp_sockets() <= self.limits.max_tcp,
            "TCP sockets"
        );
        assert!(
            self.edge.queued() <= self.limits.max_queued,
            "queued packets"
        );
    }

    /// Takes every packet the edge has for the sandbox; each must be well-formed, checksums
    /// included.
    fn drain(&mut self) -> Vec<Vec<u8>> {
        let out: Vec<Vec<u8>> = std::iter::from_fn(|| self.edge.output()).collect();
        for p in &out {
            check_written(p);
        }
        self.written += out.len() as u64;
        out
    }

    /// Opens a TCP connection from `src` to `dst`, sends `payload` in segments of `mss`
    /// bytes, then closes it as `end` says (0: nothing, 1: FIN, 2: RST).
    fn stream(&mut self, src: SocketAddr, dst: SocketAddr, payload: &[u8], mss: usize, end: u8) {
        self.drain();
        self.input(&tcp(src, dst, TcpControl::Syn, ISN, None, &[]));
        let Some(theirs) = self.drain().iter().find_map(|p| syn_ack(p, src, dst)) else {
            return;
        };
        let ack = Some(theirs + 1);
        self.input(&tcp(src, dst, TcpControl::None, ISN + 1, ack, &[]));
        let mut seq = ISN + 1;
        // Small segments, but not so many that one input takes long.
        let mss = mss.max(payload.len().div_ceil(MAX_SEGMENTS)).max(1);
        for chunk in payload.chunks(mss) {
            self.input(&tcp(src, dst, TcpControl::Psh, seq, ack, chunk));
            seq += chunk.len() as i32;
            self.drain();
        }
        match end {
            1 => self.input(&tcp(src, dst, TcpControl::Fin, seq, ack, &[])),
            2 => self.input(&tcp(src, dst, TcpControl::Rst, seq, ack, &[])),
            _ => {}
        }
        self.drain();
    }
}

/// A TCP segment with its IP header, checksums filled in.
fn tcp(
    src: SocketAddr,
    dst: SocketAddr,
    control: TcpControl,
    seq: i32,
    ack: Option<TcpSeqNumber>,
    payload: &[u8],
) -> Vec<u8> {
    let repr = TcpRepr {
        src_port: src.port(),
        dst_port: dst.port(),
        control,
        seq_number: TcpSeqNumber(seq),
        ack_number: ack,
        window_len: 64_000,
        window_scale: None,
        max_seg_size: (control == TcpControl::Syn).then_some(1460),
        sack_permitted: false,
        sack_ranges: [None; 3],
        timestamp: None,
        payload,
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

/// A UDP datagram with its IP header, checksums filled in.
fn udp(src: SocketAddr, dst: SocketAddr, payload: &[u8]) -> Vec<u8> {
    let (s, d): (IpAddress, IpAddress) = (src.ip().into(), dst.ip().into());
    let ip = IpRepr::new(s, d, IpProtocol::Udp, 8 + payload.len(), 64);
    let caps = ChecksumCapabilities::default();
    let mut buf = vec![0; ip.buffer_len()];
    ip.emit(&mut buf[..], &caps);
    let header = ip.header_len();
    UdpRepr {
        src_port: src.port(),
        dst_port: dst.port(),
    }
    .emit(
        &mut UdpPacket::new_unchecked(&mut buf[header..]),
        &s,
        &d,
        payload.len(),
        |p| p.copy_from_slice(payload),
        &caps,
    );
    buf
}

/// The IP header of a packet: (source, destination, protocol, payload).
fn ip_of(p: &[u8]) -> Option<(IpAddress, IpAddress, IpProtocol, &[u8])> {
    match p.first()? >> 4 {
        4 => {
            let ip = Ipv4Packet::new_checked(p).ok()?;
            assert!(
                ip.verify_checksum(),
                "IPv4 header checksum of a written packet"
            );
            let (s, d, proto) = (ip.src_addr(), ip.dst_addr(), ip.next_header());
            let range = ip.header_len() as usize..ip.total_len() as usize;
            Some((s.into(), d.into(), proto, &p[range]))
        }
        6 => {
            let ip = Ipv6Packet::new_checked(p).ok()?;
            let (s, d, proto) = (ip.src_addr(), ip.dst_addr(), ip.next_header());
            let len = ip.payload_len() as usize;
            Some((s.into(), d.into(), proto, &p[40..40 + len]))
        }
        _ => None,
    }
}

/// A packet the edge wrote into the sandbox must be one the sandbox's kernel takes.
fn check_written(p: &[u8]) {
    let (s, d, proto, payload) = ip_of(p).expect("a written packet that is not IP");
    match proto {
        IpProtocol::Tcp => {
            let t = TcpPacket::new_checked(payload).expect("a written TCP segment");
            assert!(
                t.verify_checksum(&s, &d),
                "TCP checksum of a written segment"
            );
        }
        IpProtocol::Udp => {
            let u = UdpPacket::new_checked(payload).expect("a written UDP datagram");
            assert!(
                u.verify_checksum(&s, &d),
                "UDP checksum of a written datagram"
            );
        }
        _ => {}
    }
}

/// The edge's initial sequence number, when `p` is the SYN-ACK to `src`'s SYN to `dst`.
fn syn_ack(p: &[u8], src: SocketAddr, dst: SocketAddr) -> Option<TcpSeqNumber> {
    let (s, d, proto, payload) = ip_of(p)?;
    let t = TcpPacket::new_checked(payload).ok()?;
    let matches = proto == IpProtocol::Tcp
        && s == dst.ip().into()
        && d == src.ip().into()
        && t.src_port() == dst.port()
        && t.dst_port() == src.port()
        && t.syn()
        && t.ack();
    matches.then(|| t.seq_number())
}

/// The two ends of a datagram or connection: one selector byte (bit 0: IPv6; bits 1-2: the
/// resolver, a synthetic address, an address from the input, a public one), then the ports
/// and, when from the input, the address.
fn ends(c: &mut Cursor<'_>) -> (SocketAddr, SocketAddr) {
    let sel = c.u8();
    let v6 = sel & 1 != 0;
    let src_port = c.u16();
    let dst_port = c.u16();
    let v4 = match (sel >> 1) & 3 {
        0 => RESOLVER_V4,
        1 => Ipv4Addr::from(u32::from(SYNTHETIC_V4_FIRST) + u32::from(c.u8())),
        2 => Ipv4Addr::from(c.u32()),
        _ => Ipv4Addr::new(93, 184, 215, 14),
    };
    let (src, dst) = if v6 {
        let o = v4.octets();
        let mut six = SYNTHETIC_V6_PREFIX.octets();
        six[12..].copy_from_slice(&o);
        let dst = if (sel >> 1) & 3 == 2 {
            let mut any = [0u8; 16];
            any[..4].copy_from_slice(&o);
            any[4..8].copy_from_slice(&c.u32().to_be_bytes());
            any[12..].copy_from_slice(&o);
            Ipv6Addr::from(any)
        } else {
            Ipv6Addr::from(six)
        };
        (IpAddr::V6(SANDBOX_V6), IpAddr::V6(dst))
    } else {
        (IpAddr::V4(SANDBOX_V4), IpAddr::V4(v4))
    };
    (
        SocketAddr::new(src, src_port),
        SocketAddr::new(dst, dst_port),
    )
}

/// What holds for a finished run.
fn check_finished(limits: &Limits, inputs: u64, written: u64, flows: &[Flow], c: &EdgeCounters) {
    assert_eq!(c.packets, inputs, "packets counted");
    let in_flows: u64 = flows.iter().map(|f| f.packets_out).sum();
    assert_eq!(
        c.packets,
        c.malformed + c.housekeeping + c.over_limit + in_flows,
        "every packet counted once: {c:?}"
    );
    assert_eq!(c.packets_in, written, "packets written");
    assert!(flows.len() <= limits.max_flows, "{} flows", flows.len());
    let mut total = 0;
    for (i, f) in flows.iter().enumerate() {
        assert_eq!(f.id, i as u64 + 1, "flow ids in order");
        assert!(f.t_ns <= f.end_ns, "{f:?}");
        assert!(
            f.sample.0.len() <= limits.sample_per_flow,
            "sample of {f:?}"
        );
        total += f.sample.0.len();
        serde_json::to_string(f).expect("a flow serializes");
    }
    assert!(total <= limits.sample_total, "{total} sample bytes");
    serde_json::to_string(c).expect("the counters serialize");
}

/// `net_edge`: `data[0]` is flags (bit 0: small limits; bit 1: denied mode instead of
/// capture); then operations, each a byte then its arguments: 0 a raw packet (length, bytes),
/// 1 a UDP datagram ([`ends`], length, payload), 2 a TCP stream ([`ends`], length, payload,
/// segment size, how it ends), 3 time passes (ms) and the timers run, 4 the edge's packets
/// are taken.
pub fn run(data: &[u8]) {
    let mut c = Cursor::new(data);
    let flags = c.u8();
    let limits = if flags & 1 != 0 {
        Limits {
            max_flows: 8,
            max_tcp: 3,
            sample_per_flow: 300,
            sample_total: 1200,
            max_queued: 16,
        }
    } else {
        Limits::default()
    };
    let mode = if flags & 2 != 0 {
        NetworkMode::Denied
    } else {
        NetworkMode::Capture
    };
    let mut h = Harness {
        edge: Edge::new(mode, 1, limits),
        limits,
        now: 0,
        inputs: 0,
        written: 0,
    };
    for _ in 0..MAX_OPS {
        if c.is_empty() {
            break;
        }
        match c.u8() % 5 {
            0 => {
                let n = usize::from(c.u16() % 4096);
                let packet = c.bytes(n);
                h.input(packet);
            }
            1 => {
                let (src, dst) = ends(&mut c);
                let n = usize::from(c.u16() % 2048);
                let payload = c.bytes(n);
                h.input(&udp(src, dst, payload));
            }
            2 => {
                let (src, dst) = ends(&mut c);
                let n = usize::from(c.u16());
                let payload = c.bytes(n);
                let mss = (usize::from(c.u8()) * 8).min(1459) + 1;
                let end = c.u8() % 3;
                h.stream(src, dst, payload, mss, end);
            }
            3 => {
                h.now += u64::from(c.u16()) * MS * 4;
                h.edge.poll(h.now);
                h.bounded();
            }
            _ => {
                h.drain();
            }
        }
    }
    h.drain();
    if mode == NetworkMode::Denied {
        assert_eq!(h.written, 0, "denied mode answered");
    }
    let (inputs, written) = (h.inputs, h.written);
    let (flows, counters) = h.edge.finish(h.now);
    check_finished(&limits, inputs, written, &flows, &counters);
}
