//! Packets in and out of a non-blocking descriptor (a TUN device, a packet socket), one
//! read(2) or write(2) each, with what a vanished descriptor looks like: what both the edge's
//! server ([`serve`](crate::serve)) and the guest's wire ([`wire`](crate::wire)) move packets with.

use std::io;
use std::os::fd::RawFd;

/// Whether the descriptor is still there.
#[derive(PartialEq, Eq)]
pub(crate) enum Link {
    Up,
    /// Hung up, or failing with EIO or EBADFD (a TUN device that was deleted): the
    /// namespace is gone.
    Gone,
}

/// What one read gave.
pub(crate) enum Read {
    /// A packet of this many bytes.
    Packet(usize),
    /// Nothing waiting.
    Empty,
    /// The descriptor is gone ([`Link::Gone`]).
    Gone,
}

/// Reads one packet from non-blocking `fd` into `buf`.
pub(crate) fn read_one(fd: RawFd, buf: &mut [u8]) -> io::Result<Read> {
    loop {
        // SAFETY: `buf` is valid for writes of `buf.len()` bytes for the duration of the
        // call.
        let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        match usize::try_from(n) {
            Ok(0) => return Ok(Read::Gone),
            Ok(n) => return Ok(Read::Packet(n.min(buf.len()))),
            Err(_) => {
                let e = io::Error::last_os_error();
                match e.raw_os_error() {
                    Some(libc::EINTR) => {}
                    Some(libc::EAGAIN) => return Ok(Read::Empty),
                    Some(libc::EIO | libc::EBADFD) => return Ok(Read::Gone),
                    _ => return Err(e),
                }
            }
        }
    }
}

/// Writes one packet to `fd`; `Ok(None)` when the descriptor did not take it (would block,
/// no buffer space, or a packet the kernel refused).
pub(crate) fn try_write_one(fd: RawFd, packet: &[u8]) -> io::Result<Option<Link>> {
    loop {
        // SAFETY: `packet` is valid for reads of `packet.len()` bytes for the duration of the
        // call.
        let n = unsafe { libc::write(fd, packet.as_ptr().cast(), packet.len()) };
        if n >= 0 {
            return Ok(Some(Link::Up));
        }
        let e = io::Error::last_os_error();
        match e.raw_os_error() {
            Some(libc::EINTR) => continue,
            Some(libc::EIO | libc::EBADFD) => return Ok(Some(Link::Gone)),
            _ => return Ok(None),
        }
    }
}

/// Writes one packet to `fd`; one the descriptor does not take is dropped.
pub(crate) fn write_one(fd: RawFd, packet: &[u8]) -> io::Result<Link> {
    Ok(try_write_one(fd, packet)?.unwrap_or(Link::Up))
}

/// Sets O_NONBLOCK on `fd`.
pub(crate) fn set_nonblocking(fd: RawFd) -> io::Result<()> {
    // SAFETY: F_GETFL takes no argument and reads nothing from memory; `fd` is borrowed
    // by the caller for the whole call.
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
