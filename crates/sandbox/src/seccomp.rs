//! The seccomp filter installed in the server before it executes, as data.
//!
//! Each rule says why it is there. The program is built by hand: the filter is a short list of
//! comparisons, and the crate made for seccomp policies (`seccompiler`) has no user-notification
//! action, which the recorder needs.

use std::io;

// Classic BPF opcodes (linux/filter.h, linux/bpf_common.h).
/// BPF_LD | BPF_W | BPF_ABS (0x00 | 0x00 | 0x20).
const BPF_LD_W_ABS: u16 = 0x20;
const BPF_JEQ_K: u16 = 0x05 | 0x10;
const BPF_JSET_K: u16 = 0x05 | 0x40;
const BPF_RET_K: u16 = 0x06;

const SECCOMP_RET_KILL_PROCESS: u32 = 0x8000_0000;
const SECCOMP_RET_ERRNO: u32 = 0x0005_0000;
const SECCOMP_RET_USER_NOTIF: u32 = 0x7fc0_0000;
const SECCOMP_RET_ALLOW: u32 = 0x7fff_0000;
const AUDIT_ARCH_X86_64: u32 = 0xc000_003e;
const X32_SYSCALL_BIT: u32 = 0x4000_0000;

// Offsets in struct seccomp_data.
const OFF_NR: u32 = 0;
const OFF_ARCH: u32 = 4;
const fn off_arg_lo(i: u32) -> u32 {
    16 + 8 * i
}
const fn off_arg_hi(i: u32) -> u32 {
    16 + 8 * i + 4
}

/// One instruction of a classic BPF program (`struct sock_filter`).
#[repr(C)]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Insn {
    code: u16,
    jt: u8,
    jf: u8,
    k: u32,
}

const fn stmt(code: u16, k: u32) -> Insn {
    Insn {
        code,
        jt: 0,
        jf: 0,
        k,
    }
}

const fn jump(code: u16, k: u32, jt: u8, jf: u8) -> Insn {
    Insn { code, jt, jf, k }
}

/// How the filter treats one system call.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Route {
    /// Hand the call to the recorder (user notification) every time.
    Notify,
    /// Hand the call to the recorder only when argument `arg` (a pointer) is not NULL: used for
    /// `sendto`, whose destination argument is NULL on connected sockets.
    NotifyIfArgNonNull(u32),
    /// Fail the call with this errno.
    Deny(u32),
    /// `socket`: fail with `EAFNOSUPPORT` unless the family is unix, inet or inet6, or netlink
    /// with the route protocol; otherwise go on to the next rule.
    SocketFamilies,
    /// Fail the call with `errno` when the low 32 bits of argument `arg` have any bit of `mask`.
    DenyIfArgBits {
        /// The argument.
        arg: u32,
        /// The bits.
        mask: u32,
        /// The errno.
        errno: u32,
    },
}

const NAMESPACE_FLAGS: u32 = (libc::CLONE_NEWNS
    | libc::CLONE_NEWCGROUP
    | libc::CLONE_NEWUTS
    | libc::CLONE_NEWIPC
    | libc::CLONE_NEWUSER
    | libc::CLONE_NEWPID
    | libc::CLONE_NEWNET
    | 0x80) as u32; // CLONE_NEWTIME

/// A call refused with `errno`, with the reason.
const fn deny(nr: i64, errno: i32, reason: &'static str) -> Rule {
    Rule {
        nr: nr as u32,
        route: Route::Deny(errno as u32),
        reason,
    }
}

const OBSERVE: &str =
    "reads or changes other processes' memory or the kernel's view: outside what the \
                       recorder can attribute";
const MOUNT: &str = "the mount family: no changing the sandbox's file system view";

/// The rules every sandbox has, whatever records it. They come before the recorder's rules:
/// the first rule naming a call decides (except `SocketFamilies`, which lets allowed families
/// go on to the recorder's `socket` rule).
pub fn static_rules() -> Vec<Rule> {
    table().to_vec()
}

/// The static rules, built once: [`refusal`] consults them on every notification.
fn table() -> &'static [Rule] {
    static TABLE: std::sync::OnceLock<Vec<Rule>> = std::sync::OnceLock::new();
    TABLE.get_or_init(build_table)
}

fn build_table() -> Vec<Rule> {
    use libc::{ENOSYS, EPERM};
    vec![
        deny(
            libc::SYS_io_uring_setup,
            ENOSYS,
            "io_uring runs file and network operations without \
             system calls the recorder sees; ENOSYS makes runtimes fall back to ordinary calls",
        ),
        deny(
            libc::SYS_io_uring_enter,
            ENOSYS,
            "io_uring (see io_uring_setup)",
        ),
        deny(
            libc::SYS_io_uring_register,
            ENOSYS,
            "io_uring (see io_uring_setup)",
        ),
        deny(libc::SYS_ptrace, EPERM, OBSERVE),
        deny(libc::SYS_process_vm_readv, EPERM, OBSERVE),
        deny(libc::SYS_process_vm_writev, EPERM, OBSERVE),
        deny(libc::SYS_bpf, EPERM, OBSERVE),
        deny(libc::SYS_perf_event_open, EPERM, OBSERVE),
        deny(
            libc::SYS_userfaultfd,
            EPERM,
            "userfaultfd stretches race windows against the recorder",
        ),
        deny(libc::SYS_mount, EPERM, MOUNT),
        deny(libc::SYS_umount2, EPERM, MOUNT),
        deny(libc::SYS_pivot_root, EPERM, MOUNT),
        deny(libc::SYS_open_tree, EPERM, MOUNT),
        deny(libc::SYS_move_mount, EPERM, MOUNT),
        deny(libc::SYS_fsopen, EPERM, MOUNT),
        deny(libc::SYS_fsconfig, EPERM, MOUNT),
        deny(libc::SYS_fsmount, EPERM, MOUNT),
        deny(libc::SYS_fspick, EPERM, MOUNT),
        deny(libc::SYS_mount_setattr, EPERM, MOUNT),
        deny(libc::SYS_add_key, EPERM, "the kernel keyring"),
        deny(libc::SYS_request_key, EPERM, "the kernel keyring"),
        deny(libc::SYS_keyctl, EPERM, "the kernel keyring"),
        deny(libc::SYS_init_module, EPERM, "module loading"),
        deny(libc::SYS_finit_module, EPERM, "module loading"),
        deny(libc::SYS_delete_module, EPERM, "module loading"),
        Rule {
            nr: libc::SYS_seccomp as u32,
            route: Route::DenyIfArgBits {
                arg: 1,
                mask: 1 << 3, // SECCOMP_FILTER_FLAG_NEW_LISTENER
                errno: EPERM as u32,
            },
            reason: "a second seccomp listener would let the server answer its own calls",
        },
        Rule {
            nr: libc::SYS_socket as u32,
            route: Route::SocketFamilies,
            reason: "socket families other than unix, inet, inet6 and netlink-route (raw packets, \
                     other netlink protocols) reach around the recorder and the network edge",
        },
        Rule {
            nr: libc::SYS_clone3 as u32,
            route: Route::Deny(libc::ENOSYS as u32),
            reason: "clone3 passes its flags in memory, which a filter cannot read; ENOSYS makes \
                     runtimes fall back to clone, whose flags it can",
        },
        Rule {
            nr: libc::SYS_clone as u32,
            route: Route::DenyIfArgBits {
                arg: 0,
                mask: NAMESPACE_FLAGS,
                errno: libc::EPERM as u32,
            },
            reason: "no new namespaces: a nested pid namespace would leave the recorder's view",
        },
        Rule {
            nr: libc::SYS_unshare as u32,
            route: Route::DenyIfArgBits {
                arg: 0,
                mask: NAMESPACE_FLAGS,
                errno: libc::EPERM as u32,
            },
            reason: "no new namespaces",
        },
        Rule {
            nr: libc::SYS_setns as u32,
            route: Route::Deny(libc::EPERM as u32),
            reason: "no entering other namespaces",
        },
    ]
}

/// A rule of the filter, with the reason it exists.
#[derive(Clone, Copy, Debug)]
pub struct Rule {
    /// The system call number (x86_64).
    pub nr: u32,
    /// What to do with it.
    pub route: Route,
    /// Why.
    pub reason: &'static str,
}

/// How the filter carries out a refusal.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Refusals {
    /// In the kernel: the call fails with its errno, a foreign ABI kills the process; nobody
    /// hears of it.
    Kernel,
    /// Through the recorder: the call is handed to the listener, which records it as a
    /// `refused` event and answers with the errno ([`refusal`] says which). A call nobody
    /// answers waits; a listener that is gone makes it fail with `ENOSYS`: refused either way.
    Recorded,
}

/// A call the static rules refuse, as the recorder reports it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Refusal {
    /// The call's name (`ptrace`), or `<abi>:<number>` for a foreign ABI.
    pub syscall: String,
    /// The errno it fails with.
    pub errno: i32,
    /// Why it is refused.
    pub reason: &'static str,
}

const FOREIGN_ABI: &str = "a foreign system call ABI (i386 `int 0x80`, x32): its numbers would \
                           pass a filter written for x86_64 numbers unseen";

/// Whether the static rules refuse the call `nr` with `args` made under `arch`, and how: the
/// same decision the filter's program makes, from the same rules.
pub fn refusal(arch: u32, nr: i32, args: &[u64; 6]) -> Option<Refusal> {
    if arch != AUDIT_ARCH_X86_64 || (nr as u32) & X32_SYSCALL_BIT != 0 {
        let abi = match arch {
            0x4000_0003 => "i386".to_string(),
            AUDIT_ARCH_X86_64 => "x32".to_string(),
            other => format!("arch-{other:#x}"),
        };
        return Some(Refusal {
            syscall: format!("{abi}:{}", (nr as u32) & !X32_SYSCALL_BIT),
            errno: libc::ENOSYS,
            reason: FOREIGN_ABI,
        });
    }
    let rule = table().iter().find(|r| r.nr == nr as u32)?;
    let errno = match rule.route {
        Route::Deny(errno) => errno,
        Route::DenyIfArgBits { arg, mask, errno } => {
            if (args[arg as usize] as u32) & mask == 0 {
                return None;
            }
            errno
        }
        Route::SocketFamilies => {
            let family = args[0] as u32 as i32;
            let allowed = matches!(family, libc::AF_UNIX | libc::AF_INET | libc::AF_INET6)
                || (family == libc::AF_NETLINK && args[2] as u32 == 0);
            if allowed {
                return None;
            }
            if family == libc::AF_NETLINK && args[2] as u32 as i32 == libc::NETLINK_KOBJECT_UEVENT {
                return Some(Refusal {
                    syscall: syscall_name(nr as i64).to_string(),
                    errno: libc::EAFNOSUPPORT,
                    reason: glassbox_model::UEVENT_REFUSAL,
                });
            }
            libc::EAFNOSUPPORT as u32
        }
        Route::Notify | Route::NotifyIfArgNonNull(_) => return None,
    };
    Some(Refusal {
        syscall: syscall_name(nr as i64).to_string(),
        errno: errno as i32,
        reason: rule.reason,
    })
}

/// The names of the calls the static rules name.
fn syscall_name(nr: i64) -> &'static str {
    match nr {
        libc::SYS_io_uring_setup => "io_uring_setup",
        libc::SYS_io_uring_enter => "io_uring_enter",
        libc::SYS_io_uring_register => "io_uring_register",
        libc::SYS_ptrace => "ptrace",
        libc::SYS_process_vm_readv => "process_vm_readv",
        libc::SYS_process_vm_writev => "process_vm_writev",
        libc::SYS_bpf => "bpf",
        libc::SYS_perf_event_open => "perf_event_open",
        libc::SYS_userfaultfd => "userfaultfd",
        libc::SYS_mount => "mount",
        libc::SYS_umount2 => "umount2",
        libc::SYS_pivot_root => "pivot_root",
        libc::SYS_open_tree => "open_tree",
        libc::SYS_move_mount => "move_mount",
        libc::SYS_fsopen => "fsopen",
        libc::SYS_fsconfig => "fsconfig",
        libc::SYS_fsmount => "fsmount",
        libc::SYS_fspick => "fspick",
        libc::SYS_mount_setattr => "mount_setattr",
        libc::SYS_add_key => "add_key",
        libc::SYS_request_key => "request_key",
        libc::SYS_keyctl => "keyctl",
        libc::SYS_init_module => "init_module",
        libc::SYS_finit_module => "finit_module",
        libc::SYS_delete_module => "delete_module",
        libc::SYS_seccomp => "seccomp",
        libc::SYS_socket => "socket",
        libc::SYS_clone3 => "clone3",
        libc::SYS_clone => "clone",
        libc::SYS_unshare => "unshare",
        libc::SYS_setns => "setns",
        _ => "unknown",
    }
}

/// Builds the program with refusals carried out in the kernel (see [`build_with`]).
pub fn build(rules: &[Rule]) -> Vec<Insn> {
    build_with(rules, Refusals::Kernel)
}

/// Builds the program: refuse foreign ABIs, route the recorded calls to the listener, allow the
/// rest; `refusals` says whether refusals are the kernel's alone or recorded.
pub fn build_with(rules: &[Rule], refusals: Refusals) -> Vec<Insn> {
    let (kill, errno) = match refusals {
        Refusals::Kernel => (SECCOMP_RET_KILL_PROCESS, None),
        Refusals::Recorded => (SECCOMP_RET_USER_NOTIF, Some(SECCOMP_RET_USER_NOTIF)),
    };
    // A refusal with `e`: the errno in the kernel, or the listener, which answers with it.
    let refuse = |e: u32| stmt(BPF_RET_K, errno.unwrap_or(SECCOMP_RET_ERRNO | (e & 0xffff)));
    let mut p = vec![
        // Only the native ABI: an i386 `int 0x80` call has other numbers and would pass a
        // filter written for x86_64 numbers unseen.
        stmt(BPF_LD_W_ABS, OFF_ARCH),
        jump(BPF_JEQ_K, AUDIT_ARCH_X86_64, 1, 0),
        stmt(BPF_RET_K, kill),
        stmt(BPF_LD_W_ABS, OFF_NR),
        // The x32 ABI shares the x86_64 arch value but sets this bit in the number.
        jump(BPF_JSET_K, X32_SYSCALL_BIT, 0, 1),
        stmt(BPF_RET_K, kill),
    ];
    // Each rule: `if nr == rule.nr { body } ` where the body returns.
    for rule in rules {
        let body: Vec<Insn> = match rule.route {
            Route::Notify => vec![stmt(BPF_RET_K, SECCOMP_RET_USER_NOTIF)],
            Route::NotifyIfArgNonNull(arg) => vec![
                stmt(BPF_LD_W_ABS, off_arg_lo(arg)),
                jump(BPF_JEQ_K, 0, 0, 2),
                stmt(BPF_LD_W_ABS, off_arg_hi(arg)),
                jump(BPF_JEQ_K, 0, 1, 0),
                stmt(BPF_RET_K, SECCOMP_RET_USER_NOTIF),
                stmt(BPF_RET_K, SECCOMP_RET_ALLOW),
            ],
            Route::Deny(errno) => vec![refuse(errno)],
            Route::SocketFamilies => {
                let refuse = refuse(libc::EAFNOSUPPORT as u32);
                // Allowed families jump past the body (to the next rule); netlink is allowed
                // with protocol 0 (NETLINK_ROUTE) only. The number is reloaded at the end so
                // that the next rule compares it again.
                vec![
                    stmt(BPF_LD_W_ABS, off_arg_lo(0)),
                    jump(BPF_JEQ_K, libc::AF_UNIX as u32, 7, 0),
                    jump(BPF_JEQ_K, libc::AF_INET as u32, 6, 0),
                    jump(BPF_JEQ_K, libc::AF_INET6 as u32, 5, 0),
                    jump(BPF_JEQ_K, libc::AF_NETLINK as u32, 1, 0),
                    refuse,
                    stmt(BPF_LD_W_ABS, off_arg_lo(2)),
                    jump(BPF_JEQ_K, 0, 1, 0),
                    refuse,
                    stmt(BPF_LD_W_ABS, OFF_NR),
                ]
            }
            Route::DenyIfArgBits { arg, mask, errno } => vec![
                stmt(BPF_LD_W_ABS, off_arg_lo(arg)),
                jump(BPF_JSET_K, mask, 0, 1),
                refuse(errno),
                stmt(BPF_RET_K, SECCOMP_RET_ALLOW),
            ],
        };
        p.push(jump(BPF_JEQ_K, rule.nr, 0, body.len() as u8));
        p.extend(body);
        // Every body but `SocketFamilies` returns; that one falls through with the number
        // loaded again.
    }
    p.push(stmt(BPF_RET_K, SECCOMP_RET_ALLOW));
    p
}

/// Installs `prog` in the calling thread with a new listener; returns the listener fd.
///
/// Must be called after `PR_SET_NO_NEW_PRIVS`. Async-signal-safe (no allocation).
pub(crate) fn install_with_listener(prog: &[Insn]) -> io::Result<i32> {
    #[repr(C)]
    struct SockFprog {
        len: u16,
        filter: *const Insn,
    }
    let fprog = SockFprog {
        len: prog.len() as u16,
        filter: prog.as_ptr(),
    };
    const SECCOMP_SET_MODE_FILTER: libc::c_ulong = 1;
    const SECCOMP_FILTER_FLAG_NEW_LISTENER: libc::c_ulong = 1 << 3;
    // SAFETY: fprog points at `prog`, which outlives the call; the kernel copies the program.
    let fd = unsafe {
        libc::syscall(
            libc::SYS_seccomp,
            SECCOMP_SET_MODE_FILTER,
            SECCOMP_FILTER_FLAG_NEW_LISTENER,
            &fprog as *const SockFprog,
        )
    };
    crate::sys::check(fd).map(|fd| fd as i32)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refusal_decides_as_the_filter_does() {
        let none = [0u64; 6];
        let r = refusal(AUDIT_ARCH_X86_64, libc::SYS_ptrace as i32, &none).unwrap();
        assert_eq!((r.syscall.as_str(), r.errno), ("ptrace", libc::EPERM));
        let r = refusal(0x4000_0003, 5, &none).unwrap();
        assert_eq!((r.syscall.as_str(), r.errno), ("i386:5", libc::ENOSYS));
        let r = refusal(AUDIT_ARCH_X86_64, (X32_SYSCALL_BIT | 2) as i32, &none).unwrap();
        assert_eq!(r.syscall, "x32:2");
        // clone without namespace flags goes on; with CLONE_NEWUSER it is refused.
        let clone = libc::SYS_clone as i32;
        assert_eq!(
            refusal(AUDIT_ARCH_X86_64, clone, &[0x11, 0, 0, 0, 0, 0]),
            None
        );
        let flags = libc::CLONE_NEWUSER as u64;
        assert_eq!(
            refusal(AUDIT_ARCH_X86_64, clone, &[flags, 0, 0, 0, 0, 0]).map(|r| r.errno),
            Some(libc::EPERM)
        );
        // socket: inet and netlink-route go on to the recorder; packet sockets are refused.
        let socket = libc::SYS_socket as i32;
        let inet = [libc::AF_INET as u64, 1, 0, 0, 0, 0];
        assert_eq!(refusal(AUDIT_ARCH_X86_64, socket, &inet), None);
        let route = [libc::AF_NETLINK as u64, 3, 0, 0, 0, 0];
        assert_eq!(refusal(AUDIT_ARCH_X86_64, socket, &route), None);
        let audit = [libc::AF_NETLINK as u64, 3, 9, 0, 0, 0];
        assert!(refusal(AUDIT_ARCH_X86_64, socket, &audit).is_some());
        // A udev monitor's socket is refused with a reason of its own.
        let uevent = [libc::AF_NETLINK as u64, 3, 15, 0, 0, 0];
        let r = refusal(AUDIT_ARCH_X86_64, socket, &uevent).unwrap();
        assert_eq!(
            (r.errno, r.reason),
            (libc::EAFNOSUPPORT, glassbox_model::UEVENT_REFUSAL)
        );
        assert_ne!(
            refusal(AUDIT_ARCH_X86_64, socket, &audit).unwrap().reason,
            glassbox_model::UEVENT_REFUSAL
        );
        let packet = [libc::AF_PACKET as u64, 3, 0, 0, 0, 0];
        assert_eq!(
            refusal(AUDIT_ARCH_X86_64, socket, &packet).map(|r| r.errno),
            Some(libc::EAFNOSUPPORT)
        );
        // A call no static rule names.
        assert_eq!(
            refusal(AUDIT_ARCH_X86_64, libc::SYS_read as i32, &none),
            None
        );
        // Every static rule has its name.
        for r in static_rules() {
            assert_ne!(syscall_name(r.nr as i64), "unknown", "{}", r.nr);
        }
    }

    #[test]
    fn recorded_refusals_go_to_the_listener() {
        let p = build_with(&[], Refusals::Recorded);
        assert_eq!(p[2], stmt(BPF_RET_K, SECCOMP_RET_USER_NOTIF));
        assert!(!p
            .iter()
            .any(|i| i.code == BPF_RET_K && i.k & 0xffff_0000 == SECCOMP_RET_ERRNO));
        let k = build_with(&[], Refusals::Kernel);
        assert_eq!(k[2], stmt(BPF_RET_K, SECCOMP_RET_KILL_PROCESS));
    }

    #[test]
    fn jumps_skip_exactly_the_rule_body() {
        let p = build(&[
            Rule {
                nr: 2,
                route: Route::Notify,
                reason: "open",
            },
            Rule {
                nr: 44,
                route: Route::NotifyIfArgNonNull(4),
                reason: "sendto",
            },
        ]);
        // Header (6), rule 1 (2), rule 2 (7), final allow (1).
        assert_eq!(p.len(), 16);
        assert_eq!(p[6], jump(BPF_JEQ_K, 2, 0, 1));
        assert_eq!(p[8], jump(BPF_JEQ_K, 44, 0, 6));
        assert_eq!(p[15], stmt(BPF_RET_K, SECCOMP_RET_ALLOW));
    }
}
