//! The microVM's wire: the guest's virtio-net card carries the sandbox's IP packets to the
//! edge on the host, one Ethernet frame each.
//!
//! - In the guest, [`forward`] moves packets between the sandbox's TUN descriptor and the
//!   card (a packet socket bound to it): it parses nothing and keeps nothing. The card has no
//!   address, ARP is off and IPv6 is disabled on it, so the guest's kernel sends nothing of its
//!   own on the wire: every frame is the sandbox's.
//! - On the host, [`serve`](crate::serve) with [`Framing::Ethernet`] reads those frames (QEMU's
//!   `-netdev dgram` on a socket pair: one frame per datagram), gives their IP packets to the
//!   [`Edge`](crate::Edge) and frames what the edge sends back.
//!
//! There is no ARP or neighbour discovery to answer: the guest sends to [`EDGE_MAC`] directly,
//! and the host answers to the address the guest's frames come from.

use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};

/// The edge's MAC address on the wire (locally administered).
pub const EDGE_MAC: [u8; 6] = [0x52, 0x54, 0x00, 0x67, 0x62, 0x01];

/// An Ethernet header's length (no VLAN tag).
pub(crate) const ETH_HEADER: usize = 14;
const ETHERTYPE_IPV4: u16 = 0x0800;
const ETHERTYPE_IPV6: u16 = 0x86dd;

/// How packets are framed on the descriptor the edge serves.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Framing {
    /// One bare IP packet per read or write (a TUN device without packet information).
    Ip,
    /// One Ethernet frame per datagram (a microVM's network card).
    Ethernet,
}

/// The ethertype for IP packet `packet` (by its version), if it is IPv4 or IPv6.
fn ethertype_of(packet: &[u8]) -> Option<u16> {
    match packet.first()? >> 4 {
        4 => Some(ETHERTYPE_IPV4),
        6 => Some(ETHERTYPE_IPV6),
        _ => None,
    }
}

/// The IP packet in Ethernet frame `frame`, and the sender's MAC address; `None` for a frame
/// that carries no IPv4 or IPv6 packet.
pub(crate) fn unframe(frame: &[u8]) -> Option<(&[u8], [u8; 6])> {
    if frame.len() < ETH_HEADER {
        return None;
    }
    let ethertype = u16::from_be_bytes([frame[12], frame[13]]);
    if ethertype != ETHERTYPE_IPV4 && ethertype != ETHERTYPE_IPV6 {
        return None;
    }
    let mut src = [0u8; 6];
    src.copy_from_slice(&frame[6..12]);
    Some((&frame[ETH_HEADER..], src))
}

/// Writes into `frame` the Ethernet frame that carries `packet` from the edge to `to`.
pub(crate) fn frame_into(frame: &mut Vec<u8>, packet: &[u8], to: [u8; 6]) {
    frame.clear();
    frame.extend_from_slice(&to);
    frame.extend_from_slice(&EDGE_MAC);
    // A packet of neither version is framed as IPv4 and left to the receiver to refuse.
    frame.extend_from_slice(&ethertype_of(packet).unwrap_or(ETHERTYPE_IPV4).to_be_bytes());
    frame.extend_from_slice(packet);
}

/// Read buffer: the largest IP packet, and some.
const BUFFER: usize = 65_536 + 64;
/// The longest wait in poll(2), so that `stop` is seen soon.
const MAX_WAIT_MS: libc::c_int = 20;
/// Packets moved each way before the other way gets its turn.
const PER_ROUND: usize = 256;

/// A packet socket bound to interface `ifindex`, non-blocking, that sees only frames the
/// interface receives (not its own outgoing ones).
fn packet_socket(ifindex: libc::c_int) -> io::Result<OwnedFd> {
    let all = (libc::ETH_P_ALL as u16).to_be() as libc::c_int;
    // SAFETY: socket with constant arguments.
    let fd = unsafe {
        libc::socket(
            libc::AF_PACKET,
            libc::SOCK_DGRAM | libc::SOCK_CLOEXEC | libc::SOCK_NONBLOCK,
            all,
        )
    };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: the descriptor is new and ours.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    let one: libc::c_int = 1;
    // SAFETY: `one` is a valid c_int for the call; the length is its size.
    let r = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::SOL_PACKET,
            libc::PACKET_IGNORE_OUTGOING,
            (&one as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    let addr = sockaddr_ll(ifindex, libc::ETH_P_ALL as u16);
    // SAFETY: `addr` is a valid sockaddr_ll for the call; the length is its size.
    let r = unsafe {
        libc::bind(
            sock.as_raw_fd(),
            (&addr as *const libc::sockaddr_ll).cast(),
            std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(sock)
}

fn sockaddr_ll(ifindex: libc::c_int, protocol: u16) -> libc::sockaddr_ll {
    // SAFETY: sockaddr_ll is plain old data; zero is a valid value.
    let mut a: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
    a.sll_family = libc::AF_PACKET as libc::c_ushort;
    a.sll_protocol = protocol.to_be();
    a.sll_ifindex = ifindex;
    a
}

/// Moves IP packets between `tun` (the sandbox's TUN descriptor) and network card `interface`
/// until `stop` is set or the TUN device is gone. Frames to the card go to [`EDGE_MAC`]; of
/// the card's frames, only IPv4 and IPv6 packets reach the sandbox. A packet that one side
/// does not take is dropped (the sandbox's TCP retries, as on any lossy link).
pub fn forward(tun: BorrowedFd<'_>, interface: &str, stop: &AtomicBool) -> io::Result<()> {
    let name = std::ffi::CString::new(interface)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "interface name with NUL"))?;
    // SAFETY: `name` is a valid C string for the call.
    let ifindex = unsafe { libc::if_nametoindex(name.as_ptr()) };
    if ifindex == 0 {
        return Err(io::Error::last_os_error());
    }
    let ifindex = ifindex as libc::c_int;
    let sock = packet_socket(ifindex)?;
    let tun_fd = tun.as_raw_fd();
    crate::fdio::set_nonblocking(tun_fd)?;
    let mut buf = vec![0u8; BUFFER];
    while !stop.load(Ordering::Relaxed) {
        let mut pfds = [
            libc::pollfd {
                fd: tun_fd,
                events: libc::POLLIN,
                revents: 0,
            },
            libc::pollfd {
                fd: sock.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            },
        ];
        // SAFETY: `pfds` is two valid, writable pollfds for the duration of the call.
        let n = unsafe { libc::poll(pfds.as_mut_ptr(), 2, MAX_WAIT_MS) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if pfds[0].revents & libc::POLLIN != 0
            && to_card(tun_fd, sock.as_raw_fd(), ifindex, &mut buf)? == crate::fdio::Link::Gone
        {
            return Ok(());
        }
        if pfds[1].revents & libc::POLLIN != 0
            && to_sandbox(sock.as_raw_fd(), tun_fd, &mut buf)? == crate::fdio::Link::Gone
        {
            return Ok(());
        }
        if pfds[0].revents & (libc::POLLHUP | libc::POLLERR | libc::POLLNVAL) != 0
            && pfds[0].revents & libc::POLLIN == 0
        {
            return Ok(());
        }
    }
    Ok(())
}

/// Packets from the sandbox to the card.
fn to_card(
    tun: RawFd,
    sock: RawFd,
    ifindex: libc::c_int,
    buf: &mut [u8],
) -> io::Result<crate::fdio::Link> {
    for _ in 0..PER_ROUND {
        let n = match crate::fdio::read_one(tun, buf)? {
            crate::fdio::Read::Packet(n) => n,
            crate::fdio::Read::Empty => break,
            crate::fdio::Read::Gone => return Ok(crate::fdio::Link::Gone),
        };
        let packet = &buf[..n];
        let Some(ethertype) = ethertype_of(packet) else {
            continue;
        };
        let mut to = sockaddr_ll(ifindex, ethertype);
        to.sll_halen = 6;
        to.sll_addr[..6].copy_from_slice(&EDGE_MAC);
        // SAFETY: `packet` is valid for reads of its length and `to` is a valid sockaddr_ll,
        // both for the duration of the call.
        let r = unsafe {
            libc::sendto(
                sock,
                packet.as_ptr().cast(),
                packet.len(),
                0,
                (&to as *const libc::sockaddr_ll).cast(),
                std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
            )
        };
        if r < 0 {
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                // The card's queue is full, or the packet is larger than its MTU: dropped.
                Some(libc::EAGAIN | libc::ENOBUFS | libc::EMSGSIZE | libc::EINTR) => {}
                _ => return Err(e),
            }
        }
    }
    Ok(crate::fdio::Link::Up)
}

/// Packets from the card (the edge's answers) to the sandbox.
fn to_sandbox(sock: RawFd, tun: RawFd, buf: &mut [u8]) -> io::Result<crate::fdio::Link> {
    for _ in 0..PER_ROUND {
        // SAFETY: sockaddr_ll is plain old data; zero is a valid value.
        let mut from: libc::sockaddr_ll = unsafe { std::mem::zeroed() };
        let mut len = std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t;
        // SAFETY: `buf` is valid for writes of its length, `from` and `len` for theirs, for
        // the duration of the call.
        let n = unsafe {
            libc::recvfrom(
                sock,
                buf.as_mut_ptr().cast(),
                buf.len(),
                0,
                (&mut from as *mut libc::sockaddr_ll).cast(),
                &mut len,
            )
        };
        let Ok(n) = usize::try_from(n) else {
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EAGAIN) => break,
                Some(libc::EINTR) => continue,
                _ => return Err(e),
            }
        };
        let protocol = u16::from_be(from.sll_protocol);
        if from.sll_pkttype == libc::PACKET_OUTGOING
            || (protocol != ETHERTYPE_IPV4 && protocol != ETHERTYPE_IPV6)
        {
            continue;
        }
        if crate::fdio::write_one(tun, &buf[..n.min(buf.len())])? == crate::fdio::Link::Gone {
            return Ok(crate::fdio::Link::Gone);
        }
    }
    Ok(crate::fdio::Link::Up)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn frames_carry_ip_packets_both_ways_and_nothing_else() {
        let v4 = [0x45u8, 0, 0, 20];
        let mut frame = Vec::new();
        let guest = [0x52, 0x54, 0, 0x67, 0x62, 0x02];
        frame_into(&mut frame, &v4, guest);
        assert_eq!(&frame[..6], &guest);
        assert_eq!(&frame[6..12], &EDGE_MAC);
        assert_eq!(&frame[12..14], &[0x08, 0x00]);
        assert_eq!(unframe(&frame), Some((&v4[..], EDGE_MAC)));
        let v6 = [0x60u8, 0, 0, 0];
        frame_into(&mut frame, &v6, guest);
        assert_eq!(&frame[12..14], &[0x86, 0xdd]);
        assert_eq!(unframe(&frame).map(|(p, _)| p), Some(&v6[..]));
        // ARP, a VLAN tag, a runt: no IP packet.
        let mut arp = frame.clone();
        arp[12..14].copy_from_slice(&[0x08, 0x06]);
        assert_eq!(unframe(&arp), None);
        let mut vlan = frame.clone();
        vlan[12..14].copy_from_slice(&[0x81, 0x00]);
        assert_eq!(unframe(&vlan), None);
        assert_eq!(unframe(&frame[..13]), None);
        assert_eq!(unframe(&frame[..14]), Some((&[][..], EDGE_MAC)));
    }
}
