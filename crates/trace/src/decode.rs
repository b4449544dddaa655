//! Which system calls are recorded, and how each is turned into an event.

use crate::procinfo::{absolute, proc_link, read_cstr, read_mem, read_u64, tgid};
use glassbox_model::{Bytes, EventKind, SockAddr};
use glassbox_sandbox::seccomp::{Route, Rule};

const PATH_MAX: usize = 4096;
const MAX_ARGS: usize = 256;
const MAX_ARGV_BYTES: usize = 64 * 1024;
const MAX_MMSG: u64 = 64;

/// How a recorded call is decoded.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    /// Path in argument `path`, `dirfd` in argument `dirfd` when an `*at` call.
    Open {
        dirfd: Option<usize>,
        path: usize,
    },
    Stat {
        dirfd: Option<usize>,
        path: usize,
    },
    Exec {
        at: bool,
    },
    Connect,
    SendTo,
    SendMsg,
    SendMmsg,
    Bind,
    Socket,
    /// A process's end, routed only with the eBPF channel: the recorder reads that channel's
    /// pending records before the process is gone ([`crate::notify`]). Records nothing.
    Exit,
}

struct Spec {
    nr: i64,
    name: &'static str,
    kind: Kind,
    route: Route,
    reason: &'static str,
}

const fn spec(nr: i64, name: &'static str, kind: Kind, reason: &'static str) -> Spec {
    Spec {
        nr,
        name,
        kind,
        route: Route::Notify,
        reason,
    }
}

const OPEN_REASON: &str = "files opened: credential probing, persistence";
const STAT_REASON: &str = "stat-only probes of credential paths (recorded under home)";

static SPECS: &[Spec] = &[
    spec(
        libc::SYS_execve,
        "execve",
        Kind::Exec { at: false },
        "processes spawned",
    ),
    spec(
        libc::SYS_execveat,
        "execveat",
        Kind::Exec { at: true },
        "processes spawned, fd and memfd execs",
    ),
    spec(
        libc::SYS_open,
        "open",
        Kind::Open {
            dirfd: None,
            path: 0,
        },
        OPEN_REASON,
    ),
    spec(
        libc::SYS_openat,
        "openat",
        Kind::Open {
            dirfd: Some(0),
            path: 1,
        },
        OPEN_REASON,
    ),
    spec(
        libc::SYS_openat2,
        "openat2",
        Kind::Open {
            dirfd: Some(0),
            path: 1,
        },
        OPEN_REASON,
    ),
    spec(
        libc::SYS_creat,
        "creat",
        Kind::Open {
            dirfd: None,
            path: 0,
        },
        OPEN_REASON,
    ),
    spec(
        libc::SYS_stat,
        "stat",
        Kind::Stat {
            dirfd: None,
            path: 0,
        },
        STAT_REASON,
    ),
    spec(
        libc::SYS_lstat,
        "lstat",
        Kind::Stat {
            dirfd: None,
            path: 0,
        },
        STAT_REASON,
    ),
    spec(
        libc::SYS_newfstatat,
        "newfstatat",
        Kind::Stat {
            dirfd: Some(0),
            path: 1,
        },
        STAT_REASON,
    ),
    spec(
        libc::SYS_statx,
        "statx",
        Kind::Stat {
            dirfd: Some(0),
            path: 1,
        },
        STAT_REASON,
    ),
    spec(
        libc::SYS_access,
        "access",
        Kind::Stat {
            dirfd: None,
            path: 0,
        },
        STAT_REASON,
    ),
    spec(
        libc::SYS_faccessat,
        "faccessat",
        Kind::Stat {
            dirfd: Some(0),
            path: 1,
        },
        STAT_REASON,
    ),
    spec(
        libc::SYS_faccessat2,
        "faccessat2",
        Kind::Stat {
            dirfd: Some(0),
            path: 1,
        },
        STAT_REASON,
    ),
    spec(
        libc::SYS_readlink,
        "readlink",
        Kind::Stat {
            dirfd: None,
            path: 0,
        },
        STAT_REASON,
    ),
    spec(
        libc::SYS_readlinkat,
        "readlinkat",
        Kind::Stat {
            dirfd: Some(0),
            path: 1,
        },
        STAT_REASON,
    ),
    spec(
        libc::SYS_connect,
        "connect",
        Kind::Connect,
        "outbound connections (inet, inet6, unix)",
    ),
    Spec {
        nr: libc::SYS_sendto,
        name: "sendto",
        kind: Kind::SendTo,
        // NULL destination: a connected socket, already recorded at connect.
        route: Route::NotifyIfArgNonNull(4),
        reason: "datagrams and TCP Fast Open with a destination",
    },
    spec(
        libc::SYS_sendmsg,
        "sendmsg",
        Kind::SendMsg,
        "datagrams with a destination",
    ),
    spec(
        libc::SYS_sendmmsg,
        "sendmmsg",
        Kind::SendMmsg,
        "datagrams with a destination",
    ),
    spec(libc::SYS_bind, "bind", Kind::Bind, "listening sockets"),
    spec(
        libc::SYS_socket,
        "socket",
        Kind::Socket,
        "socket families in use",
    ),
    spec(
        libc::SYS_exit_group,
        "exit_group",
        Kind::Exit,
        "a process's end: the eBPF channel's records of it are read before it is gone",
    ),
];

/// The seccomp rules that route the recorded calls to the recorder. With `files_by_ebpf`,
/// the open and stat families are left to the eBPF channel and not routed.
pub fn rules(files_by_ebpf: bool) -> Vec<Rule> {
    SPECS
        .iter()
        .filter(|s| !(files_by_ebpf && matches!(s.kind, Kind::Open { .. } | Kind::Stat { .. })))
        .filter(|s| files_by_ebpf || !matches!(s.kind, Kind::Exit))
        .map(|s| Rule {
            nr: s.nr as u32,
            route: s.route,
            reason: s.reason,
        })
        .collect()
}

/// The name of system call `nr`, when it is one glassbox records.
pub(crate) fn syscall_name(nr: i64) -> Option<&'static str> {
    SPECS.iter().find(|s| s.nr == nr).map(|s| s.name)
}

/// Names of the recorded system calls.
pub(crate) fn syscall_names() -> Vec<String> {
    SPECS
        .iter()
        .filter(|s| !matches!(s.kind, Kind::Exit))
        .map(|s| s.name.to_string())
        .collect()
}

/// A decoded call, before pids and phase are attached.
pub(crate) enum Decoded {
    /// Record this.
    Event(EventKind),
    /// Record these (a `sendmmsg` to several destinations: one event each).
    Events(Vec<EventKind>),
    /// Nothing to record (a stat outside home, a send without destination).
    Skip,
    /// The caller's memory could not be read.
    Lost,
}

/// Decodes the call `nr` with `args` made by task `tid`. Runs while the caller waits.
pub(crate) fn decode(tid: u32, nr: i32, args: &[u64; 6], home: &[u8]) -> Decoded {
    let Some(spec) = SPECS.iter().find(|s| s.nr == nr as i64) else {
        return Decoded::Skip;
    };
    let syscall = spec.name.to_string();
    match spec.kind {
        Kind::Open { path, .. } | Kind::Stat { path, .. } => {
            let Ok(raw) = read_cstr(tid, args[path], PATH_MAX) else {
                return Decoded::Lost;
            };
            let openat2_flags = if nr as i64 == libc::SYS_openat2 {
                read_u64(tid, args[2]).unwrap_or(0)
            } else {
                0
            };
            file_event(
                nr as i64,
                args,
                &raw,
                openat2_flags,
                None,
                home,
                |dirfd, raw| absolute(tid, dirfd, raw),
            )
        }
        Kind::Exec { at } => {
            let (dirfd, path_arg, argv_arg) = if at {
                (Some(args[0] as i64), 1, 2)
            } else {
                (None, 0, 1)
            };
            let Ok(raw) = read_cstr(tid, args[path_arg], PATH_MAX) else {
                return Decoded::Lost;
            };
            let path = if at && raw.is_empty() {
                // execveat(fd, "", AT_EMPTY_PATH): the file behind the descriptor (a memfd shows
                // as "/memfd:name (deleted)").
                proc_link(tid, &format!("fd/{}", args[0] as i32)).unwrap_or_default()
            } else {
                absolute(tid, dirfd, &raw)
            };
            Decoded::Event(EventKind::Exec {
                syscall,
                path: Bytes(path),
                argv: read_argv(tid, args[argv_arg]),
            })
        }
        Kind::Connect => match read_sockaddr(tid, args[1], args[2]) {
            Some(addr) => Decoded::Event(EventKind::Connect {
                syscall,
                fd: args[0] as i32,
                sock_type: match addr {
                    SockAddr::Inet { .. } | SockAddr::Inet6 { .. } => {
                        socket_type(tid, args[0] as i32)
                    }
                    _ => None,
                },
                addr,
            }),
            None => Decoded::Lost,
        },
        Kind::Bind => match read_sockaddr(tid, args[1], args[2]) {
            Some(addr) => Decoded::Event(EventKind::Bind {
                fd: args[0] as i32,
                addr,
            }),
            None => Decoded::Lost,
        },
        Kind::SendTo => {
            if args[4] == 0 {
                return Decoded::Skip;
            }
            match read_sockaddr(tid, args[4], args[5]) {
                Some(addr) => Decoded::Event(EventKind::Connect {
                    syscall,
                    fd: args[0] as i32,
                    addr,
                    sock_type: None,
                }),
                None => Decoded::Lost,
            }
        }
        Kind::SendMsg => match msg_name(tid, args[1]) {
            Some(Some(addr)) => Decoded::Event(EventKind::Connect {
                syscall,
                fd: args[0] as i32,
                addr,
                sock_type: None,
            }),
            Some(None) => Decoded::Skip,
            None => Decoded::Lost,
        },
        Kind::SendMmsg => {
            // Each struct mmsghdr is a msghdr (56 bytes) and a length, padded to 64.
            // Every distinct destination of the batch is an event: the edge matches each
            // datagram with a call naming its destination.
            let n = args[2].min(MAX_MMSG);
            let mut addrs: Vec<SockAddr> = Vec::new();
            for i in 0..n {
                match msg_name(tid, args[1] + i * 64) {
                    Some(Some(addr)) => {
                        if !addrs.contains(&addr) {
                            addrs.push(addr);
                        }
                    }
                    Some(None) => {}
                    None => return Decoded::Lost,
                }
            }
            let mut kinds: Vec<EventKind> = addrs
                .into_iter()
                .map(|addr| EventKind::Connect {
                    syscall: syscall.clone(),
                    fd: args[0] as i32,
                    addr,
                    sock_type: None,
                })
                .collect();
            match kinds.len() {
                0 => Decoded::Skip,
                1 => Decoded::Event(kinds.remove(0)),
                _ => Decoded::Events(kinds),
            }
        }
        Kind::Socket => Decoded::Event(EventKind::Socket {
            domain: args[0] as i32,
            sock_type: args[1] as i32,
            protocol: args[2] as i32,
        }),
        Kind::Exit => Decoded::Skip,
    }
}

/// The event of an open- or stat-family call whose path string is `raw`, whichever channel saw
/// it. `resolve` makes a relative path absolute (given the call's `dirfd`, if it has one).
pub(crate) fn file_event(
    nr: i64,
    args: &[u64; 6],
    raw: &[u8],
    openat2_flags: u64,
    result: Option<i64>,
    home: &[u8],
    resolve: impl FnOnce(Option<i64>, &[u8]) -> Vec<u8>,
) -> Decoded {
    let Some(spec) = SPECS.iter().find(|s| s.nr == nr) else {
        return Decoded::Skip;
    };
    let syscall = spec.name.to_string();
    match spec.kind {
        Kind::Open { dirfd, .. } => {
            let flags = match nr {
                libc::SYS_creat => (libc::O_CREAT | libc::O_WRONLY | libc::O_TRUNC) as u64,
                libc::SYS_openat2 => openat2_flags,
                libc::SYS_open => args[1],
                _ => args[2],
            };
            let path = resolve(dirfd.map(|i| args[i] as i64), raw);
            Decoded::Event(EventKind::Open {
                syscall,
                path: Bytes(path),
                flags,
                flags_text: open_flags_text(flags),
                result,
            })
        }
        Kind::Stat { dirfd, .. } => {
            // fstat (an empty path with AT_EMPTY_PATH) is about an open descriptor, whose
            // open was recorded.
            if raw.is_empty() {
                return Decoded::Skip;
            }
            let path = resolve(dirfd.map(|i| args[i] as i64), raw);
            if !under(&path, home) {
                return Decoded::Skip;
            }
            Decoded::Event(EventKind::Stat {
                syscall,
                path: Bytes(path),
            })
        }
        _ => Decoded::Skip,
    }
}

fn under(path: &[u8], home: &[u8]) -> bool {
    path.starts_with(home) || path == &home[..home.len().saturating_sub(1)]
}

fn read_argv(tid: u32, addr: u64) -> Vec<Bytes> {
    let mut argv = Vec::new();
    let mut total = 0;
    for i in 0..MAX_ARGS as u64 {
        let Ok(ptr) = read_u64(tid, addr + i * 8) else {
            break;
        };
        if ptr == 0 {
            break;
        }
        let Ok(arg) = read_cstr(tid, ptr, PATH_MAX) else {
            break;
        };
        total += arg.len();
        argv.push(Bytes(arg));
        if total > MAX_ARGV_BYTES {
            break;
        }
    }
    argv
}

/// The destination of a `struct msghdr`: Some(None) when it has none, None when unreadable.
fn msg_name(tid: u32, msghdr: u64) -> Option<Option<SockAddr>> {
    let mut h = [0u8; 16];
    if read_mem(tid, msghdr, &mut h).ok()? != 16 {
        return None;
    }
    let name = u64::from_ne_bytes(h[0..8].try_into().ok()?);
    let len = u32::from_ne_bytes(h[8..12].try_into().ok()?) as u64;
    if name == 0 || len == 0 {
        return Some(None);
    }
    read_sockaddr(tid, name, len).map(Some)
}

/// The type of the socket `fd` of thread `tid` (`SOCK_STREAM`, `SOCK_DGRAM`...), read from a
/// copy of the descriptor (`pidfd_getfd`, which the recorder may take of a process in the
/// sandbox it started); `None` where it cannot be taken (the process gone, the descriptor
/// closed by another thread). Asked of an IP `connect` alone: a datagram socket connected
/// sends nothing by connecting (a route or source-address probe), which the checks tell from
/// a stream socket's connect, which sends.
fn socket_type(tid: u32, fd: i32) -> Option<i32> {
    use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
    let pid = tgid(tid)?;
    // SAFETY: pidfd_open takes a pid and flags and returns a new descriptor or -1.
    let pidfd = unsafe { libc::syscall(libc::SYS_pidfd_open, pid as libc::pid_t, 0) };
    if pidfd < 0 {
        return None;
    }
    // SAFETY: pidfd_open returned a descriptor of ours, owned from here on.
    let pidfd = unsafe { OwnedFd::from_raw_fd(pidfd as i32) };
    // SAFETY: pidfd_getfd takes a pidfd, a descriptor number of that process and flags, and
    // returns a new descriptor of ours or -1.
    let copy = unsafe { libc::syscall(libc::SYS_pidfd_getfd, pidfd.as_raw_fd(), fd, 0) };
    if copy < 0 {
        return None;
    }
    // SAFETY: pidfd_getfd returned a descriptor of ours, owned from here on.
    let copy = unsafe { OwnedFd::from_raw_fd(copy as i32) };
    let mut value: libc::c_int = 0;
    let mut len = std::mem::size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: SO_TYPE writes one c_int into `value`, whose size `len` gives.
    let r = unsafe {
        libc::getsockopt(
            copy.as_raw_fd(),
            libc::SOL_SOCKET,
            libc::SO_TYPE,
            (&mut value as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    (r == 0).then_some(value)
}

fn read_sockaddr(tid: u32, addr: u64, len: u64) -> Option<SockAddr> {
    let len = (len as usize).min(128);
    if addr == 0 || len < 2 {
        return Some(SockAddr::Other { family_id: 0 });
    }
    let mut b = [0u8; 128];
    let n = read_mem(tid, addr, &mut b[..len]).ok()?;
    Some(parse_sockaddr(&b[..n]))
}

/// Parses a `struct sockaddr_*` as the program passed it.
pub(crate) fn parse_sockaddr(b: &[u8]) -> SockAddr {
    if b.len() < 2 {
        return SockAddr::Other { family_id: 0 };
    }
    let family = u16::from_ne_bytes([b[0], b[1]]);
    match family as i32 {
        libc::AF_INET if b.len() >= 8 => SockAddr::Inet {
            ip: std::net::Ipv4Addr::new(b[4], b[5], b[6], b[7]).to_string(),
            port: u16::from_be_bytes([b[2], b[3]]),
        },
        libc::AF_INET6 if b.len() >= 24 => {
            let mut a = [0u8; 16];
            a.copy_from_slice(&b[8..24]);
            SockAddr::Inet6 {
                ip: std::net::Ipv6Addr::from(a).to_string(),
                port: u16::from_be_bytes([b[2], b[3]]),
            }
        }
        libc::AF_UNIX => {
            let p = &b[2..];
            if p.first() == Some(&0) && p.len() > 1 {
                SockAddr::Unix {
                    path: Bytes(p[1..].to_vec()),
                    is_abstract: true,
                }
            } else {
                let end = p.iter().position(|&c| c == 0).unwrap_or(p.len());
                SockAddr::Unix {
                    path: Bytes(p[..end].to_vec()),
                    is_abstract: false,
                }
            }
        }
        _ => SockAddr::Other { family_id: family },
    }
}

/// `O_*` flags in words.
pub(crate) fn open_flags_text(flags: u64) -> String {
    let f = flags as i32;
    let mut parts = vec![match f & libc::O_ACCMODE {
        libc::O_WRONLY => "O_WRONLY",
        libc::O_RDWR => "O_RDWR",
        _ => "O_RDONLY",
    }];
    for (bit, name) in [
        (libc::O_CREAT, "O_CREAT"),
        (libc::O_EXCL, "O_EXCL"),
        (libc::O_TRUNC, "O_TRUNC"),
        (libc::O_APPEND, "O_APPEND"),
        (libc::O_NONBLOCK, "O_NONBLOCK"),
        (libc::O_DIRECTORY, "O_DIRECTORY"),
        (libc::O_NOFOLLOW, "O_NOFOLLOW"),
        (libc::O_CLOEXEC, "O_CLOEXEC"),
        (libc::O_PATH, "O_PATH"),
        (libc::O_TMPFILE & !libc::O_DIRECTORY, "O_TMPFILE"),
    ] {
        if f & bit == bit {
            parts.push(name);
        }
    }
    parts.join("|")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn sockaddrs_parse() {
        let mut v4 = vec![0u8; 16];
        v4[..2].copy_from_slice(&(libc::AF_INET as u16).to_ne_bytes());
        v4[2..4].copy_from_slice(&443u16.to_be_bytes());
        v4[4..8].copy_from_slice(&[192, 0, 2, 7]);
        assert_eq!(
            parse_sockaddr(&v4),
            SockAddr::Inet {
                ip: "192.0.2.7".into(),
                port: 443
            }
        );
        let mut un = (libc::AF_UNIX as u16).to_ne_bytes().to_vec();
        un.extend_from_slice(b"\0agent\0");
        assert_eq!(
            parse_sockaddr(&un),
            SockAddr::Unix {
                path: Bytes(b"agent\0".to_vec()),
                is_abstract: true
            }
        );
    }

    #[test]
    fn flags_read_as_words() {
        let f = (libc::O_WRONLY | libc::O_CREAT | libc::O_APPEND | libc::O_CLOEXEC) as u64;
        assert_eq!(open_flags_text(f), "O_WRONLY|O_CREAT|O_APPEND|O_CLOEXEC");
        assert_eq!(open_flags_text(0), "O_RDONLY");
    }
}
