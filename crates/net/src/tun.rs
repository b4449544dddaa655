//! [`serve`]: the edge's only I/O. It moves packets between the TUN descriptor and the
//! [`Edge`], with poll(2), read(2) and write(2) from libc.

use crate::Edge;
use std::io;
use std::os::fd::{AsRawFd, BorrowedFd, RawFd};
use std::sync::atomic::{AtomicBool, Ordering};

/// The longest wait in poll(2), so that `stop` is seen soon.
const MAX_WAIT_MS: u64 = 20;
/// Read buffer: the largest IP packet, and some.
const READ_BUFFER: usize = 65_536 + 64;
/// Packets read before the engine is polled and its answers written.
const READS_PER_ROUND: usize = 256;

/// Whether the descriptor is still there.
#[derive(PartialEq, Eq)]
enum Link {
    Up,
    /// Hung up, or failing with EIO or EBADFD (a TUN device that was deleted): the
    /// namespace is gone.
    Gone,
}

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
    let fd = tun.as_raw_fd();
    set_nonblocking(fd)?;
    let mut buf = vec![0u8; READ_BUFFER];
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
        if pfd.revents & libc::POLLIN != 0
            && read_packets(fd, &mut buf, edge, now_ns)? == Link::Gone
        {
            return Ok(());
        }
        edge.poll(now_ns());
        if write_packets(fd, edge)? == Link::Gone {
            return Ok(());
        }
        if pfd.revents & (libc::POLLHUP | libc::POLLERR) != 0 && pfd.revents & libc::POLLIN == 0 {
            return Ok(());
        }
    }
    Ok(())
}

/// Sets O_NONBLOCK on `fd`.
fn set_nonblocking(fd: RawFd) -> io::Result<()> {
    // SAFETY: F_GETFL takes no argument and reads nothing from memory; `fd` is borrowed
    // for the whole of `serve`.
    let flags = unsafe { libc::fcntl(fd, libc::F_GETFL) };
    if flags < 0 {
        return Err(io::Error::last_os_error());
    }
    if flags & libc::O_NONBLOCK == 0 {
        // SAFETY: F_SETFL takes an int of flags and reads nothing from memory.
        if unsafe { libc::fcntl(fd, libc::F_SETFL, flags | libc::O_NONBLOCK) } < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

/// Reads the packets waiting on `fd` (up to a round's worth) into the edge.
fn read_packets(
    fd: RawFd,
    buf: &mut [u8],
    edge: &mut Edge,
    now_ns: &dyn Fn() -> u64,
) -> io::Result<Link> {
    let mut reads = 0;
    while reads < READS_PER_ROUND {
        // SAFETY: `buf` is valid for writes of `buf.len()` bytes for the duration of the
        // call.
        let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        match usize::try_from(n) {
            Ok(0) => return Ok(Link::Gone),
            Ok(n) => {
                edge.input(&buf[..n.min(buf.len())], now_ns());
                reads += 1;
            }
            Err(_) => {
                let e = io::Error::last_os_error();
                match e.raw_os_error() {
                    Some(libc::EINTR) => {}
                    Some(libc::EAGAIN) => break,
                    Some(libc::EIO | libc::EBADFD) => return Ok(Link::Gone),
                    _ => return Err(e),
                }
            }
        }
    }
    Ok(Link::Up)
}

/// Writes every packet the edge has for the sandbox; one the descriptor does not take is
/// dropped and counted.
fn write_packets(fd: RawFd, edge: &mut Edge) -> io::Result<Link> {
    while let Some(packet) = edge.output() {
        loop {
            // SAFETY: `packet` is valid for reads of `packet.len()` bytes for the duration
            // of the call.
            let n = unsafe { libc::write(fd, packet.as_ptr().cast(), packet.len()) };
            if n >= 0 {
                break;
            }
            let e = io::Error::last_os_error();
            match e.raw_os_error() {
                Some(libc::EINTR) => continue,
                Some(libc::EIO | libc::EBADFD) => return Ok(Link::Gone),
                // Would block (EAGAIN), no buffer space, or a packet the kernel refused.
                _ => {
                    edge.output_dropped();
                    break;
                }
            }
        }
    }
    Ok(Link::Up)
}
