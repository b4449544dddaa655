//! [`serve`]: the edge's only I/O. It moves packets between the TUN descriptor (or a
//! microVM's network card, [`Framing::Ethernet`]) and the [`Edge`], with poll(2), read(2) and
//! write(2) from libc.

use crate::fdio::{read_one, set_nonblocking, try_write_one, Link, Read};
use crate::wire::{self, Framing};
use crate::Edge;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};

/// The longest wait in poll(2), so that `stop` is seen soon.
const MAX_WAIT_MS: u64 = 20;
/// Read buffer: the largest IP packet (or Ethernet frame), and some.
const READ_BUFFER: usize = 65_536 + 64;
/// Packets read before the engine is polled and its answers written.
const READS_PER_ROUND: usize = 256;

/// Serves `edge` over a TUN descriptor (non-blocking or not; it is made non-blocking) until
/// `stop` is set or the descriptor hangs up: reads every packet, feeds it to the edge,
/// writes back what the edge sends (a packet the descriptor does not take is dropped and
/// counted). `now_ns` is the audit's clock.
pub fn serve(
    tun: BorrowedFd<'_>,
    edge: &mut Edge,
    now_ns: &dyn Fn() -> u64,
    stop: &AtomicBool,
) -> io::Result<()> {
    serve_framed(tun, Framing::Ip, edge, now_ns, stop)
}

/// [`serve`] over a descriptor whose packets are framed as `framing` says. With
/// [`Framing::Ethernet`] (a microVM's card, see [`wire`]) a frame that carries no IP packet is
/// counted as malformed.
pub fn serve_framed(
    fd: BorrowedFd<'_>,
    framing: Framing,
    edge: &mut Edge,
    now_ns: &dyn Fn() -> u64,
    stop: &AtomicBool,
) -> io::Result<()> {
    let fd = fd.as_raw_fd();
    set_nonblocking(fd)?;
    let mut io = FramedIo {
        framing,
        buf: vec![0u8; READ_BUFFER],
        frame: Vec::new(),
        // Until the guest has sent a frame, answers (there are none yet) go to everyone.
        peer: [0xff; 6],
    };
    while !stop.load(Ordering::Relaxed) {
        let wait_ms = edge
            .poll_delay_ns(now_ns())
            .map_or(MAX_WAIT_MS, |ns| ns.div_ceil(1_000_000).min(MAX_WAIT_MS));
        let mut pfd = libc::pollfd {
            fd,
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: `pfd` is one valid, writable pollfd for the duration of the call, and
        // nfds is 1; the timeout is at most MAX_WAIT_MS, which fits a c_int.
        let n = unsafe { libc::poll(&mut pfd, 1, wait_ms as libc::c_int) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        if pfd.revents & libc::POLLNVAL != 0 {
            return Err(io::Error::from_raw_os_error(libc::EBADF));
        }
        if pfd.revents & libc::POLLIN != 0 && io.read_packets(fd, edge, now_ns)? == Link::Gone {
            return Ok(());
        }
        edge.poll(now_ns());
        if io.write_packets(fd, edge)? == Link::Gone {
            return Ok(());
        }
        if pfd.revents & (libc::POLLHUP | libc::POLLERR) != 0 && pfd.revents & libc::POLLIN == 0 {
            return Ok(());
        }
    }
    Ok(())
}

/// The buffers and the framing of one served descriptor.
struct FramedIo {
    framing: Framing,
    buf: Vec<u8>,
    /// The frame being written (Ethernet).
    frame: Vec<u8>,
    /// Where Ethernet frames towards the guest go: the address its frames come from.
    peer: [u8; 6],
}

impl FramedIo {
    /// Reads the packets waiting on `fd` (up to a round's worth) into the edge.
    fn read_packets(
        &mut self,
        fd: RawFd,
        edge: &mut Edge,
        now_ns: &dyn Fn() -> u64,
    ) -> io::Result<Link> {
        for _ in 0..READS_PER_ROUND {
            let n = match read_one(fd, &mut self.buf)? {
                Read::Packet(n) => n,
                Read::Empty => break,
                Read::Gone => return Ok(Link::Gone),
            };
            let data = &self.buf[..n];
            match self.framing {
                Framing::Ip => edge.input(data, now_ns()),
                Framing::Ethernet => match wire::unframe(data) {
                    Some((packet, from)) => {
                        self.peer = from;
                        edge.input(packet, now_ns());
                    }
                    None => edge.input_not_ip(data.len()),
                },
            }
        }
        Ok(Link::Up)
    }

    /// Writes every packet the edge has for the sandbox; one the descriptor does not take is
    /// dropped and counted.
    fn write_packets(&mut self, fd: RawFd, edge: &mut Edge) -> io::Result<Link> {
        while let Some(packet) = edge.output() {
            let out = match self.framing {
                Framing::Ip => &packet,
                Framing::Ethernet => {
                    wire::frame_into(&mut self.frame, &packet, self.peer);
                    &self.frame
                }
            };
            match try_write_one(fd, out)? {
                Some(Link::Up) => {}
                Some(Link::Gone) => return Ok(Link::Gone),
                None => edge.output_dropped(),
            }
        }
        Ok(Link::Up)
    }
}
