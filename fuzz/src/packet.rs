//! The edge's IP packet reader on its own: raw bytes as the sandbox's kernel would write them
//! to the TUN device (`net_edge` rarely builds the IPv6 extension headers and fragments that
//! this reaches at once).

use glassbox_net::fuzz::packet;
use std::net::{IpAddr, Ipv4Addr, Ipv6Addr};

const TCP: u8 = 6;
const UDP: u8 = 17;

fn be16(b: &[u8], at: usize) -> usize {
    usize::from(u16::from_be_bytes([b[at], b[at + 1]]))
}

/// `packet`: the input is one packet. What the edge reads must agree with the header bytes
/// (read here independently): the addresses, the protocol, the fragment, the ports, and a
/// payload inside the IP payload (never in bytes past the IP length, never in the headers);
/// a packet whose IP header is sound is always read.
pub fn run(buf: &[u8]) {
    let read = packet(buf);
    match buf.first().map(|b| b >> 4) {
        Some(4) => {
            let ihl = usize::from(buf[0] & 15) * 4;
            let sound = buf.len() >= 20 && ihl >= 20 && {
                let total = be16(buf, 2);
                total >= ihl && total <= buf.len()
            };
            let Some(p) = read else {
                assert!(!sound, "a sound IPv4 header not read");
                return;
            };
            assert!(sound, "an IPv4 header read that is not sound: {p:?}");
            let total = be16(buf, 2);
            let src = Ipv4Addr::new(buf[12], buf[13], buf[14], buf[15]);
            let dst = Ipv4Addr::new(buf[16], buf[17], buf[18], buf[19]);
            assert_eq!((p.src, p.dst), (IpAddr::V4(src), IpAddr::V4(dst)));
            assert_eq!(p.protocol, buf[9]);
            let offset = be16(buf, 6) & 0x1fff;
            let more = buf[6] & 0x20 != 0;
            let fragment = if offset != 0 { 2 } else { u8::from(more) };
            assert_eq!(p.fragment, fragment, "{p:?}");
            assert!(
                p.payload.start >= ihl && p.payload.end <= total,
                "payload {:?} outside the IP payload {ihl}..{total}",
                p.payload
            );
            check_transport(&p, &buf[..total], ihl);
        }
        Some(6) => {
            let sound = buf.len() >= 40 && 40 + be16(buf, 4) <= buf.len();
            let Some(p) = read else {
                assert!(!sound, "a sound IPv6 header not read");
                return;
            };
            assert!(sound, "an IPv6 header read that is not sound: {p:?}");
            let end = 40 + be16(buf, 4);
            let addr = |at: usize| {
                let mut a = [0u8; 16];
                a.copy_from_slice(&buf[at..at + 16]);
                IpAddr::V6(Ipv6Addr::from(a))
            };
            assert_eq!((p.src, p.dst), (addr(8), addr(24)));
            assert!(
                p.payload.start >= 40 && p.payload.end <= end,
                "payload {:?} outside the IP payload 40..{end}",
                p.payload
            );
            // Without extension headers, the transport header follows at once.
            if p.protocol == buf[6] {
                check_transport(&p, &buf[..end], 40);
            }
        }
        _ => assert!(read.is_none(), "not IP, yet read: {read:?}"),
    }
    if let Some(p) = packet(buf) {
        if p.src.is_unspecified() {
            assert!(p.housekeeping, "{p:?}");
        }
    }
}

/// The TCP or UDP header at `at` of `ip` (cut at the IP length), when the edge read one.
fn check_transport(p: &glassbox_net::fuzz::Packet, ip: &[u8], at: usize) {
    let Some(ports) = p.ports else {
        return;
    };
    assert!(
        matches!(p.protocol, TCP | UDP) && p.fragment != 2,
        "ports read from {p:?}"
    );
    assert!(ip.len() >= at + 8, "ports read past the IP payload: {p:?}");
    assert_eq!(ports, (be16(ip, at) as u16, be16(ip, at + 2) as u16));
    if p.protocol == TCP {
        let data_offset = usize::from(ip[at + 12] >> 4) * 4;
        assert_eq!(p.payload, at + data_offset..ip.len(), "TCP payload");
    } else if p.fragment == 0 {
        let len = be16(ip, at + 4);
        assert_eq!(p.payload, at + 8..at + len, "UDP payload");
    }
}
