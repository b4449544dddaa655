//! The framing on the control port, shared by the host and the guest agent.
//!
//! A frame is one tag byte, a little-endian `u32` length, and that many bytes. The host sends
//! one request, a sequence of frames ending with [`END`]; the guest answers with status frames
//! ([`READY`], [`STARTED`], [`EXITED`], [`FAILED`]). Strings are raw bytes (paths and
//! arguments need not be UTF-8).
//!
//! The stdin port uses the same frames: [`STDIN_DATA`] frames, then [`STDIN_END`]
//! ([`crate::StdinPort`] writes them, the agent reads them).

use std::io::{self, Read, Write};

/// Host → guest: mount the 9p share with this tag at this guest path (`tag\0path`).
pub const MOUNT: u8 = b'M';
/// Host → guest: mount the 9p share with this tag at this guest path, writable (`tag\0path`).
pub const MOUNT_RW: u8 = b'W';
/// Host → guest: make a symlink (`path\0target`).
pub const SYMLINK: u8 = b'L';
/// Host → guest: one argument, `argv[0]` first.
pub const ARG: u8 = b'A';
/// Host → guest: one environment variable, `NAME=VALUE`.
pub const ENV: u8 = b'E';
/// Host → guest: the working directory.
pub const CWD: u8 = b'C';
/// Host → guest: the hostname.
pub const HOSTNAME: u8 = b'H';
/// Host → guest: end of the request.
pub const END: u8 = b'.';

/// Guest → host: the agent runs and its ports are open; payload: `uptime=MS init=MS
/// modules=MS`, the guest's uptime now, when the agent started, and when its modules were
/// loaded.
pub const READY: u8 = b'R';
/// Guest → host: the command runs; payload: its pid in the guest.
pub const STARTED: u8 = b'S';
/// Guest → host: the command ended; payload `code N` or `signal N`.
pub const EXITED: u8 = b'X';
/// Guest → host: the agent could not do what was asked; payload: why.
pub const FAILED: u8 = b'F';

/// Host → guest on the stdin port: bytes of the command's standard input.
pub const STDIN_DATA: u8 = b'I';
/// Host → guest on the stdin port: the command's standard input ends here.
pub const STDIN_END: u8 = b'Z';

/// Frames longer than this are a protocol error (a request is a few kilobytes).
pub const MAX_FRAME: usize = 1 << 20;

/// Writes one frame.
pub fn write_frame(w: &mut impl Write, tag: u8, payload: &[u8]) -> io::Result<()> {
    let len = u32::try_from(payload.len())
        .ok()
        .filter(|&l| l as usize <= MAX_FRAME)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidInput, "frame too long"))?;
    let mut buf = Vec::with_capacity(5 + payload.len());
    buf.push(tag);
    buf.extend_from_slice(&len.to_le_bytes());
    buf.extend_from_slice(payload);
    w.write_all(&buf)?;
    w.flush()
}

/// Reads one frame; `Ok(None)` at a clean end of stream before a frame starts.
pub fn read_frame(r: &mut impl Read) -> io::Result<Option<(u8, Vec<u8>)>> {
    let mut head = [0u8; 5];
    let mut got = 0;
    while got < head.len() {
        match r.read(&mut head[got..]) {
            Ok(0) if got == 0 => return Ok(None),
            Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
            Ok(n) => got += n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(e) => return Err(e),
        }
    }
    let len = payload_len(&head)?;
    let mut payload = vec![0u8; len];
    r.read_exact(&mut payload)?;
    Ok(Some((head[0], payload)))
}

/// The payload's length a frame's 5-byte head says (a tag, then a little-endian `u32`); longer
/// than [`MAX_FRAME`] is a protocol error.
fn payload_len(head: &[u8]) -> io::Result<usize> {
    let len = u32::from_le_bytes([head[1], head[2], head[3], head[4]]) as usize;
    if len > MAX_FRAME {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("frame of {len} bytes"),
        ));
    }
    Ok(len)
}

/// Takes one whole frame off the front of `buf` (bytes read so far); `Ok(None)` while the
/// frame is not whole yet. What a reader that may time out between reads uses: a frame read
/// in parts is never lost.
pub fn take_frame(buf: &mut Vec<u8>) -> io::Result<Option<(u8, Vec<u8>)>> {
    if buf.len() < 5 {
        return Ok(None);
    }
    let len = payload_len(&buf[..5])?;
    if buf.len() < 5 + len {
        return Ok(None);
    }
    let tag = buf[0];
    let payload = buf[5..5 + len].to_vec();
    buf.drain(..5 + len);
    Ok(Some((tag, payload)))
}

/// What the guest runs, as decoded by the agent.
#[derive(Debug, Default, Clone, PartialEq, Eq)]
pub struct Request {
    /// 9p shares: (tag, guest path).
    pub mounts: Vec<(Vec<u8>, Vec<u8>)>,
    /// Writable 9p shares: (tag, guest path), mounted after the read-only ones.
    pub mounts_rw: Vec<(Vec<u8>, Vec<u8>)>,
    /// Symlinks: (path, target).
    pub symlinks: Vec<(Vec<u8>, Vec<u8>)>,
    /// The command, `argv[0]` first.
    pub argv: Vec<Vec<u8>>,
    /// `NAME=VALUE` entries.
    pub env: Vec<Vec<u8>>,
    /// The working directory.
    pub cwd: Vec<u8>,
    /// The hostname.
    pub hostname: Vec<u8>,
}

fn pair(a: &[u8], b: &[u8]) -> Vec<u8> {
    let mut v = a.to_vec();
    v.push(0);
    v.extend_from_slice(b);
    v
}

fn split_pair(p: &[u8]) -> io::Result<(Vec<u8>, Vec<u8>)> {
    let i = p
        .iter()
        .position(|&b| b == 0)
        .ok_or_else(|| io::Error::new(io::ErrorKind::InvalidData, "pair without NUL"))?;
    Ok((p[..i].to_vec(), p[i + 1..].to_vec()))
}

impl Request {
    /// Writes the request as frames.
    pub fn write(&self, w: &mut impl Write) -> io::Result<()> {
        let mut buf = Vec::new();
        for (tag, path) in &self.mounts {
            write_frame(&mut buf, MOUNT, &pair(tag, path))?;
        }
        for (tag, path) in &self.mounts_rw {
            write_frame(&mut buf, MOUNT_RW, &pair(tag, path))?;
        }
        for (path, target) in &self.symlinks {
            write_frame(&mut buf, SYMLINK, &pair(path, target))?;
        }
        for a in &self.argv {
            write_frame(&mut buf, ARG, a)?;
        }
        for e in &self.env {
            write_frame(&mut buf, ENV, e)?;
        }
        write_frame(&mut buf, CWD, &self.cwd)?;
        write_frame(&mut buf, HOSTNAME, &self.hostname)?;
        write_frame(&mut buf, END, b"")?;
        w.write_all(&buf)?;
        w.flush()
    }

    /// Reads a request up to its [`END`] frame.
    pub fn read(r: &mut impl Read) -> io::Result<Request> {
        let mut req = Request::default();
        loop {
            let Some((tag, p)) = read_frame(r)? else {
                return Err(io::ErrorKind::UnexpectedEof.into());
            };
            match tag {
                MOUNT => req.mounts.push(split_pair(&p)?),
                MOUNT_RW => req.mounts_rw.push(split_pair(&p)?),
                SYMLINK => req.symlinks.push(split_pair(&p)?),
                ARG => req.argv.push(p),
                ENV => req.env.push(p),
                CWD => req.cwd = p,
                HOSTNAME => req.hostname = p,
                END => return Ok(req),
                other => {
                    return Err(io::Error::new(
                        io::ErrorKind::InvalidData,
                        format!("unknown request frame {:?}", other as char),
                    ))
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_frame_read_in_parts_is_taken_whole_and_only_once() {
        let mut wire = Vec::new();
        write_frame(&mut wire, b'R', b"uptime=12").unwrap();
        write_frame(&mut wire, b'S', b"42").unwrap();
        let mut buf = Vec::new();
        let mut got = Vec::new();
        // One byte at a time: no frame before it is whole, none lost.
        for b in wire {
            buf.push(b);
            while let Some(f) = take_frame(&mut buf).unwrap() {
                got.push(f);
            }
        }
        assert_eq!(got, [(b'R', b"uptime=12".to_vec()), (b'S', b"42".to_vec())]);
        assert!(buf.is_empty());
        let mut huge = vec![b'X'];
        huge.extend_from_slice(&u32::MAX.to_le_bytes());
        assert!(take_frame(&mut huge).is_err());
    }

    #[test]
    fn request_round_trips() {
        let req = Request {
            mounts: vec![(b"gb0".to_vec(), b"/usr".to_vec())],
            mounts_rw: vec![(b"gb1".to_vec(), b"/srv/out".to_vec())],
            symlinks: vec![(b"/bin".to_vec(), b"usr/bin".to_vec())],
            argv: vec![b"/bin/echo".to_vec(), b"h\0i \xff".to_vec()],
            env: vec![b"A=B".to_vec()],
            cwd: b"/".to_vec(),
            hostname: b"vm".to_vec(),
        };
        let mut buf = Vec::new();
        req.write(&mut buf).unwrap();
        write_frame(&mut buf, READY, b"12").unwrap();
        let mut r = &buf[..];
        assert_eq!(Request::read(&mut r).unwrap(), req);
        assert_eq!(read_frame(&mut r).unwrap(), Some((READY, b"12".to_vec())));
        assert_eq!(read_frame(&mut r).unwrap(), None);
    }

    #[test]
    fn truncated_and_oversized_frames_are_errors() {
        let mut r: &[u8] = &[READY, 5, 0, 0, 0, b'a'];
        assert!(read_frame(&mut r).is_err());
        let mut r: &[u8] = &[READY, 0xff, 0xff, 0xff, 0x7f];
        assert!(read_frame(&mut r).is_err());
    }
}
