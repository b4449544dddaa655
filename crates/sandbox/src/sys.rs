//! Thin checked wrappers over the raw system calls the sandbox makes.
//!
//! The sandbox needs `unshare`, `pivot_root`, `mount`, seccomp with a listener and pidfd
//! calls; `libc` exposes them raw, and the crates that wrap them (nix, rustix) are much larger
//! than the dozen calls used here, so they are wrapped by hand, each `unsafe` block with its
//! reason.

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::{FromRawFd, OwnedFd, RawFd};

/// Turns a `-1` return into the current `errno`.
pub(crate) fn check(ret: libc::c_long) -> io::Result<libc::c_long> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

pub(crate) fn cstr(s: &str) -> CString {
    CString::new(s).unwrap_or_else(|_| CString::new(s.replace('\0', "")).unwrap_or_default())
}

pub(crate) fn mount(
    src: Option<&CStr>,
    target: &CStr,
    fstype: Option<&CStr>,
    flags: libc::c_ulong,
    data: Option<&CStr>,
) -> io::Result<()> {
    let p = |c: Option<&CStr>| c.map_or(std::ptr::null(), |c| c.as_ptr());
    // SAFETY: every pointer is either null or a NUL-terminated string that outlives the call.
    let ret = unsafe {
        libc::mount(
            p(src),
            target.as_ptr(),
            p(fstype),
            flags,
            p(data).cast::<libc::c_void>(),
        )
    };
    check(ret.into()).map(drop)
}

pub(crate) fn umount_detach(target: &CStr) -> io::Result<()> {
    // SAFETY: target is a valid NUL-terminated string.
    check(unsafe { libc::umount2(target.as_ptr(), libc::MNT_DETACH) }.into()).map(drop)
}

pub(crate) fn pivot_root(new_root: &CStr, put_old: &CStr) -> io::Result<()> {
    // SAFETY: both are valid NUL-terminated strings; pivot_root has no libc wrapper.
    check(unsafe { libc::syscall(libc::SYS_pivot_root, new_root.as_ptr(), put_old.as_ptr()) })
        .map(drop)
}

pub(crate) fn pidfd_open(pid: i32) -> io::Result<OwnedFd> {
    // SAFETY: plain integer arguments.
    let fd = check(unsafe { libc::syscall(libc::SYS_pidfd_open, pid, 0) })?;
    // SAFETY: the kernel returned a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

pub(crate) fn pidfd_getfd(pidfd: RawFd, target_fd: RawFd) -> io::Result<OwnedFd> {
    // SAFETY: plain integer arguments.
    let fd = check(unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd, target_fd, 0) })?;
    // SAFETY: the kernel returned a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

pub(crate) fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: fds has room for the two descriptors pipe2 writes.
    check(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }.into())?;
    // SAFETY: both descriptors are new and owned by nothing else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

pub(crate) fn socketpair_seqpacket() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: fds has room for the two descriptors socketpair writes.
    let ret = unsafe {
        libc::socketpair(
            libc::AF_UNIX,
            libc::SOCK_SEQPACKET | libc::SOCK_CLOEXEC,
            0,
            fds.as_mut_ptr(),
        )
    };
    check(ret.into())?;
    // SAFETY: both descriptors are new and owned by nothing else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

/// `write` the whole buffer, retrying on EINTR.
pub(crate) fn write_all(fd: RawFd, mut buf: &[u8]) -> io::Result<()> {
    while !buf.is_empty() {
        // SAFETY: buf is a valid readable slice of the given length.
        let n = unsafe { libc::write(fd, buf.as_ptr().cast(), buf.len()) };
        if n < 0 {
            let e = io::Error::last_os_error();
            if e.kind() == io::ErrorKind::Interrupted {
                continue;
            }
            return Err(e);
        }
        buf = &buf[n as usize..];
    }
    Ok(())
}

/// One `read`, retrying on EINTR.
pub(crate) fn read(fd: RawFd, buf: &mut [u8]) -> io::Result<usize> {
    loop {
        // SAFETY: buf is a valid writable slice of the given length.
        let n = unsafe { libc::read(fd, buf.as_mut_ptr().cast(), buf.len()) };
        if n >= 0 {
            return Ok(n as usize);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// Waits until `fd` is readable or `timeout_ms` passes; returns whether it is readable.
pub(crate) fn poll_readable(fd: RawFd, timeout_ms: i32) -> io::Result<bool> {
    let mut p = libc::pollfd {
        fd,
        events: libc::POLLIN,
        revents: 0,
    };
    loop {
        // SAFETY: p is a valid pollfd for the duration of the call.
        let n = unsafe { libc::poll(&mut p, 1, timeout_ms) };
        if n >= 0 {
            return Ok(n > 0);
        }
        let e = io::Error::last_os_error();
        if e.kind() != io::ErrorKind::Interrupted {
            return Err(e);
        }
    }
}

/// A control buffer with room for one `SCM_CREDENTIALS` message.
fn cred_control() -> Vec<u8> {
    // SAFETY: CMSG_SPACE is a pure computation.
    let space = unsafe { libc::CMSG_SPACE(std::mem::size_of::<libc::ucred>() as u32) } as usize;
    vec![0u8; space]
}

/// A one-byte message over `iov` with `control` as its control buffer.
fn one_byte_msg(iov: &mut libc::iovec, control: &mut [u8]) -> libc::msghdr {
    // SAFETY: msghdr is plain old data; zero is a valid initial value.
    let mut msg: libc::msghdr = unsafe { std::mem::zeroed() };
    msg.msg_iov = iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control.as_mut_ptr().cast();
    msg.msg_controllen = control.len();
    msg
}

/// Sends one byte with the sender's credentials attached, so the receiver learns the
/// sender's pid in its own pid namespace.
pub(crate) fn send_hello(fd: RawFd) -> io::Result<()> {
    let byte = [1u8];
    let mut iov = libc::iovec {
        iov_base: byte.as_ptr() as *mut libc::c_void,
        iov_len: 1,
    };
    let mut control = cred_control();
    let msg = one_byte_msg(&mut iov, &mut control);
    // SAFETY: msg points at a control buffer of CMSG_SPACE bytes, so the first header fits.
    unsafe {
        let c = libc::CMSG_FIRSTHDR(&msg);
        (*c).cmsg_level = libc::SOL_SOCKET;
        (*c).cmsg_type = libc::SCM_CREDENTIALS;
        (*c).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<libc::ucred>() as u32) as usize;
        let cred = libc::ucred {
            pid: libc::getpid(),
            uid: libc::getuid(),
            gid: libc::getgid(),
        };
        std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<libc::ucred>(), cred);
    }
    // SAFETY: msg and everything it points to are valid for the call.
    check(unsafe { libc::sendmsg(fd, &msg, 0) } as libc::c_long).map(drop)
}

/// Receives the hello of [`send_hello`]: the sender's pid as seen from here.
pub(crate) fn recv_hello(fd: RawFd) -> io::Result<Option<i32>> {
    let one: libc::c_int = 1;
    // SAFETY: `one` is a valid c_int option value of the given size.
    let ret = unsafe {
        libc::setsockopt(
            fd,
            libc::SOL_SOCKET,
            libc::SO_PASSCRED,
            (&one as *const libc::c_int).cast(),
            std::mem::size_of::<libc::c_int>() as u32,
        )
    };
    check(ret.into())?;
    let mut byte = [0u8; 1];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    };
    let mut control = cred_control();
    let mut msg = one_byte_msg(&mut iov, &mut control);
    // SAFETY: msg and its buffers are valid for the call.
    let n = check(unsafe { libc::recvmsg(fd, &mut msg, 0) } as libc::c_long)?;
    if n == 0 {
        return Ok(None);
    }
    // SAFETY: the kernel filled msg_control; we only read headers it reports.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_CREDENTIALS {
                let cred: libc::ucred = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                return Ok(Some(cred.pid));
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    Err(io::Error::new(
        io::ErrorKind::InvalidData,
        "hello without credentials",
    ))
}

/// Sends one byte with descriptor `passed` attached (`SCM_RIGHTS`).
pub(crate) fn send_fd(fd: RawFd, passed: RawFd) -> io::Result<()> {
    let byte = [2u8];
    let mut iov = libc::iovec {
        iov_base: byte.as_ptr() as *mut libc::c_void,
        iov_len: 1,
    };
    let mut control = fd_control();
    let msg = one_byte_msg(&mut iov, &mut control);
    // SAFETY: msg points at a control buffer of CMSG_SPACE(sizeof(int)) bytes, so the first
    // header and one descriptor fit.
    unsafe {
        let c = libc::CMSG_FIRSTHDR(&msg);
        (*c).cmsg_level = libc::SOL_SOCKET;
        (*c).cmsg_type = libc::SCM_RIGHTS;
        (*c).cmsg_len = libc::CMSG_LEN(std::mem::size_of::<libc::c_int>() as u32) as usize;
        std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<libc::c_int>(), passed);
    }
    // SAFETY: msg and everything it points to are valid for the call.
    check(unsafe { libc::sendmsg(fd, &msg, 0) } as libc::c_long).map(drop)
}

/// Receives the descriptor of [`send_fd`] (close-on-exec).
pub(crate) fn recv_fd(fd: RawFd) -> io::Result<OwnedFd> {
    let mut byte = [0u8; 1];
    let mut iov = libc::iovec {
        iov_base: byte.as_mut_ptr().cast(),
        iov_len: 1,
    };
    let mut control = fd_control();
    let mut msg = one_byte_msg(&mut iov, &mut control);
    // SAFETY: msg and its buffers are valid for the call.
    let n = check(unsafe { libc::recvmsg(fd, &mut msg, libc::MSG_CMSG_CLOEXEC) } as libc::c_long)?;
    if n == 0 {
        return Err(io::Error::new(
            io::ErrorKind::UnexpectedEof,
            "the sandbox closed its control socket",
        ));
    }
    // SAFETY: the kernel filled msg_control; we only read headers it reports, and a passed
    // descriptor is new in this process and owned by nobody else.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(&msg);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_SOCKET && (*c).cmsg_type == libc::SCM_RIGHTS {
                let passed: libc::c_int = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast());
                return Ok(OwnedFd::from_raw_fd(passed));
            }
            c = libc::CMSG_NXTHDR(&msg, c);
        }
    }
    Err(io::Error::new(
        io::ErrorKind::InvalidData,
        "message without a descriptor",
    ))
}

fn fd_control() -> Vec<u8> {
    // SAFETY: CMSG_SPACE is a pure computation.
    let space = unsafe { libc::CMSG_SPACE(std::mem::size_of::<libc::c_int>() as u32) } as usize;
    vec![0u8; space]
}

/// Opens `path` with `O_PATH` (a handle on a place, not its contents).
pub(crate) fn open_path(path: &str) -> io::Result<OwnedFd> {
    let c = CString::new(path).map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: c is a valid string; the descriptor returned is new and ours.
    let fd = check(unsafe { libc::open(c.as_ptr(), libc::O_PATH | libc::O_CLOEXEC) }.into())?;
    // SAFETY: fd is a fresh descriptor nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd as RawFd) })
}

/// The size and the available bytes of the file system `fd` is on.
pub(crate) fn fstatvfs_space(fd: RawFd) -> Option<(u64, u64)> {
    // SAFETY: statvfs is plain old data; zero is valid.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: fd is an open descriptor and st a valid out-pointer.
    if unsafe { libc::fstatvfs(fd, &mut st) } != 0 {
        return None;
    }
    let block = st.f_frsize as u64;
    Some((st.f_blocks as u64 * block, st.f_bavail as u64 * block))
}
