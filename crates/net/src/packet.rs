//! Reading the IP packets the sandbox sends (addresses, transport ports, payload), and
//! building the UDP packets the edge answers with.
//!
//! Parsing never trusts a length field: every slice is bounded by what arrived.

use smoltcp::phy::ChecksumCapabilities;
use smoltcp::wire::{
    IpProtocol, Ipv4Packet, Ipv4Repr, Ipv6Packet, Ipv6Repr, TcpPacket, UdpPacket, UdpRepr,
};
use std::net::{IpAddr, SocketAddr};

/// IP protocol numbers the edge tells apart.
pub(crate) const PROTO_ICMP: u8 = 1;
/// IGMP: the IPv4 kernel's multicast membership reports.
pub(crate) const PROTO_IGMP: u8 = 2;
/// TCP.
pub(crate) const PROTO_TCP: u8 = 6;
/// UDP.
pub(crate) const PROTO_UDP: u8 = 17;
/// ICMPv6.
pub(crate) const PROTO_ICMPV6: u8 = 58;

/// IPv6 extension headers walked over to find the transport header.
const EXT_HOP_BY_HOP: u8 = 0;
const EXT_ROUTING: u8 = 43;
const EXT_FRAGMENT: u8 = 44;
const EXT_DEST_OPTS: u8 = 60;
/// At most this many IPv6 extension headers are walked.
const MAX_EXT_HEADERS: usize = 8;

/// One IP packet from the sandbox, its headers read.
#[derive(Debug)]
pub(crate) struct Packet<'a> {
    /// Source address.
    pub src: IpAddr,
    /// Destination address.
    pub dst: IpAddr,
    /// The transport protocol number (after any IPv6 extension headers).
    pub protocol: u8,
    /// Whether this is a piece of a fragmented datagram.
    pub fragment: Fragment,
    /// The transport header, as far as it was read.
    pub transport: Transport<'a>,
}

/// Where a packet sits in a fragmented datagram.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Fragment {
    /// A whole datagram.
    Whole,
    /// The first fragment: it holds the transport header, not the whole payload.
    First(FragmentId),
    /// A later fragment: no transport header.
    Later(FragmentId),
}

/// What the fragments of one datagram share.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub(crate) struct FragmentId {
    src: IpAddr,
    dst: IpAddr,
    protocol: u8,
    ident: u32,
}

/// The transport layer of a packet.
#[derive(Debug)]
pub(crate) enum Transport<'a> {
    /// A TCP segment.
    Tcp {
        src_port: u16,
        dst_port: u16,
        /// SYN without ACK: a connection attempt.
        syn: bool,
        ack: bool,
        payload: &'a [u8],
    },
    /// A UDP datagram (for a first fragment, the part of the payload it holds).
    Udp {
        src_port: u16,
        dst_port: u16,
        payload: &'a [u8],
    },
    /// An ICMP or ICMPv6 message.
    Icmp {
        /// The message type.
        kind: u8,
        /// The whole message.
        message: &'a [u8],
    },
    /// Another protocol, a later fragment, or a transport header that did not parse.
    Other {
        payload: &'a [u8],
        /// Set when the transport header was there but did not parse.
        malformed: bool,
    },
}

impl Packet<'_> {
    /// Kernel housekeeping of the interface rather than traffic of a program: IPv6
    /// neighbour discovery and MLD, IGMP, and anything from the unspecified address.
    pub fn is_housekeeping(&self) -> bool {
        if self.src.is_unspecified() {
            return true;
        }
        match self.transport {
            Transport::Icmp { kind, .. } if self.protocol == PROTO_ICMPV6 => {
                matches!(kind, 130..=137 | 143)
            }
            _ => self.protocol == PROTO_IGMP,
        }
    }

    /// The transport payload (the whole message for ICMP and other protocols).
    pub fn payload(&self) -> &[u8] {
        match self.transport {
            Transport::Tcp { payload, .. }
            | Transport::Udp { payload, .. }
            | Transport::Other { payload, .. } => payload,
            Transport::Icmp { message, .. } => message,
        }
    }
}

/// Reads an IPv4 or IPv6 packet; `None` when the IP header does not parse.
pub(crate) fn parse(buf: &[u8]) -> Option<Packet<'_>> {
    match buf.first()? >> 4 {
        4 => parse_v4(buf),
        6 => parse_v6(buf),
        _ => None,
    }
}

fn parse_v4(buf: &[u8]) -> Option<Packet<'_>> {
    let ip = Ipv4Packet::new_checked(buf).ok()?;
    let src = IpAddr::V4(ip.src_addr());
    let dst = IpAddr::V4(ip.dst_addr());
    let protocol = u8::from(ip.next_header());
    let id = FragmentId {
        src,
        dst,
        protocol,
        ident: u32::from(ip.ident()),
    };
    let fragment = if ip.frag_offset() != 0 {
        Fragment::Later(id)
    } else if ip.more_frags() {
        Fragment::First(id)
    } else {
        Fragment::Whole
    };
    Some(Packet {
        src,
        dst,
        protocol,
        fragment,
        transport: transport(protocol, fragment, ip.payload()),
    })
}

fn parse_v6(buf: &[u8]) -> Option<Packet<'_>> {
    let ip = Ipv6Packet::new_checked(buf).ok()?;
    let src = IpAddr::V6(ip.src_addr());
    let dst = IpAddr::V6(ip.dst_addr());
    let mut protocol = u8::from(ip.next_header());
    let mut rest = ip.payload();
    let mut fragment = Fragment::Whole;
    let mut bad_ext = false;
    for _ in 0..MAX_EXT_HEADERS {
        match protocol {
            EXT_HOP_BY_HOP | EXT_ROUTING | EXT_DEST_OPTS => {
                let len = rest.get(1).map(|&l| (usize::from(l) + 1) * 8);
                match (rest.first(), len) {
                    (Some(&next), Some(len)) if rest.len() >= len => {
                        protocol = next;
                        rest = &rest[len..];
                    }
                    _ => {
                        bad_ext = true;
                        break;
                    }
                }
            }
            EXT_FRAGMENT => {
                let Some(h) = rest.get(..8) else {
                    bad_ext = true;
                    break;
                };
                let offset = u16::from_be_bytes([h[2], h[3]]) >> 3;
                let more = h[3] & 1 == 1;
                let id = FragmentId {
                    src,
                    dst,
                    protocol: h[0],
                    ident: u32::from_be_bytes([h[4], h[5], h[6], h[7]]),
                };
                fragment = if offset != 0 {
                    Fragment::Later(id)
                } else if more {
                    Fragment::First(id)
                } else {
                    Fragment::Whole
                };
                protocol = h[0];
                rest = &rest[8..];
            }
            _ => break,
        }
    }
    let transport = if bad_ext {
        Transport::Other {
            payload: rest,
            malformed: true,
        }
    } else {
        transport(protocol, fragment, rest)
    };
    Some(Packet {
        src,
        dst,
        protocol,
        fragment,
        transport,
    })
}

/// Reads the transport header of `payload`.
fn transport(protocol: u8, fragment: Fragment, payload: &[u8]) -> Transport<'_> {
    let malformed = Transport::Other {
        payload,
        malformed: true,
    };
    if let Fragment::Later(_) = fragment {
        return Transport::Other {
            payload,
            malformed: false,
        };
    }
    match protocol {
        PROTO_TCP => match TcpPacket::new_checked(payload) {
            Ok(tcp) => Transport::Tcp {
                src_port: tcp.src_port(),
                dst_port: tcp.dst_port(),
                syn: tcp.syn(),
                ack: tcp.ack(),
                payload: tcp.payload(),
            },
            Err(_) => malformed,
        },
        // The first fragment holds the UDP header but not the length it announces.
        PROTO_UDP if fragment != Fragment::Whole => match payload.get(..8) {
            Some(h) => Transport::Udp {
                src_port: u16::from_be_bytes([h[0], h[1]]),
                dst_port: u16::from_be_bytes([h[2], h[3]]),
                payload: &payload[8..],
            },
            None => malformed,
        },
        PROTO_UDP => match UdpPacket::new_checked(payload) {
            Ok(udp) => Transport::Udp {
                src_port: udp.src_port(),
                dst_port: udp.dst_port(),
                payload: udp.payload(),
            },
            Err(_) => malformed,
        },
        PROTO_ICMP | PROTO_ICMPV6 => match payload.first() {
            Some(&kind) => Transport::Icmp {
                kind,
                message: payload,
            },
            None => malformed,
        },
        _ => Transport::Other {
            payload,
            malformed: false,
        },
    }
}

/// An IPv4 or IPv6 packet carrying one UDP datagram from `src` to `dst` (both of the same
/// family), checksums filled in; `None` when the families differ or it would not fit.
pub(crate) fn udp_packet(src: SocketAddr, dst: SocketAddr, payload: &[u8]) -> Option<Vec<u8>> {
    let udp_len = 8 + payload.len();
    let caps = ChecksumCapabilities::default();
    let udp = UdpRepr {
        src_port: src.port(),
        dst_port: dst.port(),
    };
    let (mut buf, header_len) = match (src.ip(), dst.ip()) {
        (IpAddr::V4(s), IpAddr::V4(d)) => {
            let ip = Ipv4Repr {
                src_addr: s,
                dst_addr: d,
                next_header: IpProtocol::Udp,
                payload_len: udp_len,
                hop_limit: 64,
            };
            let len = ip.buffer_len() + udp_len;
            if len > usize::from(u16::MAX) {
                return None;
            }
            let mut buf = vec![0; len];
            ip.emit(&mut Ipv4Packet::new_unchecked(&mut buf[..]), &caps);
            (buf, ip.buffer_len())
        }
        (IpAddr::V6(s), IpAddr::V6(d)) => {
            let ip = Ipv6Repr {
                src_addr: s,
                dst_addr: d,
                next_header: IpProtocol::Udp,
                payload_len: udp_len,
                hop_limit: 64,
            };
            if udp_len > usize::from(u16::MAX) {
                return None;
            }
            let mut buf = vec![0; ip.buffer_len() + udp_len];
            ip.emit(&mut Ipv6Packet::new_unchecked(&mut buf[..]));
            (buf, ip.buffer_len())
        }
        _ => return None,
    };
    udp.emit(
        &mut UdpPacket::new_unchecked(&mut buf[header_len..]),
        &src.ip().into(),
        &dst.ip().into(),
        payload.len(),
        |p| p.copy_from_slice(payload),
        &caps,
    );
    Some(buf)
}
