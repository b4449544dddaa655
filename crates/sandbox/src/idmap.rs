//! Idmapped mounts: how a private folder stays usable by the sandbox's unprivileged uid.
//!
//! # The problem
//!
//! The working directory (and every other read-only path given to the sandbox) is bound at its
//! host path, and the server reaches it as the sandbox user's *host* uid. When glassbox runs as
//! root, that uid is [`crate::HOST_UID_WHEN_ROOT`], which owns nothing: it uses a folder through
//! its "other" permission bits. A folder made by `mktemp -d` (mode 0700, owner root) then
//! cannot be entered, and the audit ends in `chdir DIR: Permission denied`. (A user's own 0700
//! folder has no such problem when glassbox runs as that user: the sandbox user maps to the
//! user's own uid, the folder's owner.)
//!
//! # The choice
//!
//! Such a source is bound through an *idmapped mount* (Linux 5.12): a detached copy of the
//! host's mount of the source (`open_tree(OPEN_TREE_CLONE)`) whose ownership is seen through a
//! user namespace made for it alone, whose maps send the source's owner uid and gid to the
//! unprivileged host uid (`mount_setattr(MOUNT_ATTR_IDMAP)`). Seen through it, the folder and
//! every file its owner owns belong to the sandbox user, who may use them as the owner could;
//! files of any other owner are unmapped (`nobody`), reached through their "other" bits, as
//! without the idmap. The copy is read-only, `nosuid` and `nodev` from the start
//! (`MOUNT_ATTR_RDONLY`...), so the server still cannot write there, and it is private (no
//! propagation to or from the host's mount). The copy is made by glassbox while it is still the
//! host's root (only a process with `CAP_SYS_ADMIN` over the filesystem's own user namespace may
//! idmap its mounts), and is attached in the sandbox's mount namespace at the source's host path
//! with `move_mount` ([`attach`]): nothing is mounted outside that namespace, nothing on the host
//! changes (no `chmod`, no `chown`, no copy).
//!
//! Why not the alternatives: changing the folder's mode or owner changes the user's machine;
//! copying the folder costs time and space and audits a copy, not what the user runs; mapping the
//! host's root into the sandbox's user namespace would make the server's files root's on the
//! host; a supplementary group does not help a folder whose group bits are 0.
//!
//! The idmap is used only where it is needed ([`private_for`]): a source whose bits already let
//! the unprivileged uid in (the common case) is bound as before, so what the server may read there
//! does not change. A kernel or filesystem that refuses idmapped mounts (`EINVAL`, `EPERM`,
//! `ENOSYS`, `EOPNOTSUPP`: a filesystem without support, glassbox being root of a container
//! only) ends the set-up with an error that names the path and what to do ([`Error`]), never a
//! bare "Permission denied" from inside.
//!
//! Nothing here depends on the rest of the sandbox, so that the microVM backend (QEMU, dropped
//! to the same unprivileged uid, serving shares from a mount namespace of its own) can use it as
//! it is: [`attach`] is a single raw system call, safe between `fork` and `exec`.

use std::ffi::CString;
use std::fmt;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::MetadataExt;
use std::path::{Path, PathBuf};

/// A path that a given uid cannot use through its permission bits (a folder it may not enter and
/// list, a file it may not read), with its owner: what an idmapped mount maps.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Private {
    /// The host path.
    pub path: PathBuf,
    /// Whether it is a directory (else a file, bound as one).
    pub is_dir: bool,
    /// Its permission bits.
    pub mode: u32,
    /// Its owner's uid.
    pub uid: u32,
    /// Its group's gid.
    pub gid: u32,
}

impl Private {
    /// The idmap in words, for the sandbox settings' mount record.
    pub fn describe(&self) -> String {
        format!(
            "idmapped: owner uid {} gid {} → sandbox user",
            self.uid, self.gid
        )
    }
}

/// Whether `path` (followed if a symlink) is private to `uid`/`gid`: a directory they may not
/// both enter and list, or a file they may not read, through the bits that apply to them, and
/// whose owner is not `uid`. `None` when they may use it (or when it cannot be examined: the
/// plain bind then reports what is wrong).
pub fn private_for(path: &Path, uid: u32, gid: u32) -> Option<Private> {
    let m = std::fs::metadata(path).ok()?;
    if m.uid() == uid {
        return None;
    }
    let bits = if m.gid() == gid {
        (m.mode() >> 3) & 0o7
    } else {
        m.mode() & 0o7
    };
    let needed = if m.is_dir() { 0o5 } else { 0o4 };
    if bits & needed == needed {
        return None;
    }
    Some(Private {
        path: path.to_path_buf(),
        is_dir: m.is_dir(),
        mode: m.mode() & 0o7777,
        uid: m.uid(),
        gid: m.gid(),
    })
}

/// What a private path is to the sandbox, for the error message and its advice.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Role {
    /// The folder the server runs in (the folder glassbox was started in).
    WorkingFolder,
    /// Another path made visible read-only (`--ro`, a path named on the command line).
    ReadOnly,
}

/// An idmapped mount could not be made.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The kernel or the filesystem refuses idmapped mounts here.
    #[error("{} {} is private ({}) and this kernel cannot idmap mounts on its filesystem ({step}: {source}): {}", what(.role, .private), .private.path.display(), mode_owner(.private), advice(.role, .private))]
    Unsupported {
        /// The path.
        private: Private,
        /// What it is to the sandbox.
        role: Role,
        /// The step that was refused.
        step: &'static str,
        /// The kernel's answer.
        source: io::Error,
    },
    /// Another failure while making the mount.
    #[error("{} {} is private ({}) and glassbox could not make an idmapped mount of it ({step}: {source}): {}", what(.role, .private), .private.path.display(), mode_owner(.private), advice(.role, .private))]
    Failed {
        /// The path.
        private: Private,
        /// What it is to the sandbox.
        role: Role,
        /// The step that failed.
        step: &'static str,
        /// The error.
        source: io::Error,
    },
}

fn what(role: &Role, p: &Private) -> &'static str {
    match (role, p.is_dir) {
        (Role::WorkingFolder, _) => "the working folder",
        (Role::ReadOnly, true) => "the read-only folder",
        (Role::ReadOnly, false) => "the read-only file",
    }
}

fn advice(role: &Role, p: &Private) -> String {
    match (role, p.is_dir) {
        (Role::WorkingFolder, _) => {
            "run glassbox from a folder others may read, or chmod o+rx it".into()
        }
        (Role::ReadOnly, true) => format!(
            "chmod o+rx {}, or copy it to a folder others may read",
            p.path.display()
        ),
        (Role::ReadOnly, false) => format!(
            "chmod o+r {}, or copy it where others may read it",
            p.path.display()
        ),
    }
}

fn mode_owner(p: &Private) -> String {
    format!("mode {:04o}, owner {}", p.mode, OwnerName(p.uid))
}

/// A uid as `/etc/passwd` names it (`root`), else `uid N`.
struct OwnerName(u32);

impl fmt::Display for OwnerName {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
        let name = passwd.lines().find_map(|l| {
            let mut fields = l.split(':');
            let name = fields.next()?;
            (fields.nth(1)?.parse::<u32>().ok()? == self.0).then_some(name)
        });
        match name {
            Some(n) => write!(f, "{n}"),
            None => write!(f, "uid {}", self.0),
        }
    }
}

/// Whether an errno means "no idmapped mounts here" rather than a failure of glassbox's own.
fn unsupported(e: &io::Error) -> bool {
    matches!(
        e.raw_os_error(),
        Some(libc::EINVAL | libc::EPERM | libc::ENOSYS | libc::EOPNOTSUPP)
    )
}

fn check(ret: libc::c_long) -> io::Result<libc::c_long> {
    if ret < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(ret)
    }
}

/// Makes a detached, read-only, `nosuid`, `nodev`, private copy of the host's mounts at
/// `private.path` (and below it), idmapped so that its owner uid and gid are seen as `to_uid`
/// and `to_gid`. Attach it with [`attach`]; the descriptor is close-on-exec.
///
/// Must run as the host's root (before any namespace of the sandbox exists).
pub fn idmapped_tree(
    private: &Private,
    role: Role,
    to_uid: u32,
    to_gid: u32,
) -> Result<OwnedFd, Error> {
    let fail = |step: &'static str| {
        let private = private.clone();
        move |source: io::Error| {
            if unsupported(&source) {
                Error::Unsupported {
                    private,
                    role,
                    step,
                    source,
                }
            } else {
                Error::Failed {
                    private,
                    role,
                    step,
                    source,
                }
            }
        }
    };
    let path = CString::new(private.path.as_os_str().as_bytes())
        .map_err(|_| fail("open_tree")(io::Error::from_raw_os_error(libc::EINVAL)))?;
    let userns = user_namespace(private.uid, private.gid, to_uid, to_gid)
        .map_err(fail("a user namespace for the idmap"))?;
    // SAFETY: path is a NUL-terminated string that outlives the call; the flags are constants.
    let fd = check(unsafe {
        libc::syscall(
            libc::SYS_open_tree,
            libc::AT_FDCWD,
            path.as_ptr(),
            libc::OPEN_TREE_CLONE | libc::OPEN_TREE_CLOEXEC | libc::AT_RECURSIVE as libc::c_uint,
        )
    })
    .map_err(fail("open_tree"))?;
    // SAFETY: the kernel returned a new descriptor that nothing else owns.
    let tree = unsafe { OwnedFd::from_raw_fd(fd as RawFd) };
    let attr = libc::mount_attr {
        attr_set: libc::MOUNT_ATTR_IDMAP
            | libc::MOUNT_ATTR_RDONLY
            | libc::MOUNT_ATTR_NOSUID
            | libc::MOUNT_ATTR_NODEV,
        attr_clr: 0,
        propagation: libc::MS_PRIVATE,
        userns_fd: userns.as_raw_fd() as u64,
    };
    // SAFETY: the tree and the user namespace are open descriptors; attr is a valid mount_attr
    // of the size passed, read by the kernel during the call only; "" with AT_EMPTY_PATH names
    // the tree itself.
    check(unsafe {
        libc::syscall(
            libc::SYS_mount_setattr,
            tree.as_raw_fd(),
            c"".as_ptr(),
            (libc::AT_EMPTY_PATH | libc::AT_RECURSIVE) as libc::c_uint,
            &attr as *const libc::mount_attr,
            std::mem::size_of::<libc::mount_attr>(),
        )
    })
    .map_err(fail("mount_setattr(MOUNT_ATTR_IDMAP)"))?;
    // The mount holds its own reference to the namespace: the descriptor may go.
    drop(userns);
    Ok(tree)
}

/// Attaches a tree of [`idmapped_tree`] at `at` (an existing directory, or file for a file's
/// tree) in the caller's mount namespace. Only a raw system call: safe between `fork` and
/// `exec`.
pub fn attach(tree: RawFd, at: &std::ffi::CStr) -> io::Result<()> {
    // SAFETY: tree is an open descriptor, at and "" NUL-terminated strings that outlive the call.
    check(unsafe {
        libc::syscall(
            libc::SYS_move_mount,
            tree,
            c"".as_ptr(),
            libc::AT_FDCWD,
            at.as_ptr(),
            libc::MOVE_MOUNT_F_EMPTY_PATH,
        )
    })
    .map(drop)
}

/// A new user namespace whose maps send `uid` to `to_uid` and `gid` to `to_gid` (one id each):
/// a helper process is forked, unshares its user namespace and waits while its maps are written
/// and the namespace opened, then exits and is reaped.
fn user_namespace(uid: u32, gid: u32, to_uid: u32, to_gid: u32) -> io::Result<OwnedFd> {
    let (ready_r, ready_w) = pipe()?;
    let (go_r, go_w) = pipe()?;
    // SAFETY: fork in a possibly multi-threaded process; the child makes only raw system calls
    // (unshare, write, read, _exit) on integers and descriptors it inherited, takes no lock and
    // never returns.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(io::Error::last_os_error());
    }
    if pid == 0 {
        // SAFETY: raw system calls on inherited descriptors and stack buffers; the child ends
        // in _exit without running any destructor of the parent's.
        unsafe {
            // The unshare's errno (0: it worked).
            let errno = if libc::unshare(libc::CLONE_NEWUSER) == 0 {
                0
            } else {
                *libc::__errno_location()
            };
            let b = errno.to_ne_bytes();
            libc::write(ready_w.as_raw_fd(), b.as_ptr().cast(), b.len());
            let mut g = [0u8; 1];
            libc::read(go_r.as_raw_fd(), g.as_mut_ptr().cast(), 1);
            libc::_exit(0);
        }
    }
    drop((ready_w, go_r));
    let result = (|| {
        let mut b = [0u8; 4];
        let n = loop {
            // SAFETY: b is a valid buffer of its length.
            let ret = unsafe { libc::read(ready_r.as_raw_fd(), b.as_mut_ptr().cast(), b.len()) };
            match check(ret as libc::c_long) {
                Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                other => break other?,
            }
        };
        if n != 4 {
            return Err(io::Error::other("the helper process died"));
        }
        let errno = i32::from_ne_bytes(b);
        if errno != 0 {
            return Err(io::Error::from_raw_os_error(errno));
        }
        std::fs::write(
            format!("/proc/{pid}/uid_map"),
            format!("{uid} {to_uid} 1\n"),
        )?;
        std::fs::write(
            format!("/proc/{pid}/gid_map"),
            format!("{gid} {to_gid} 1\n"),
        )?;
        let ns = std::fs::File::open(format!("/proc/{pid}/ns/user"))?;
        Ok(OwnedFd::from(ns))
    })();
    // SAFETY: go_w is our pipe end; a one-byte write, then reaping our own child (killed first
    // if the write failed, so that waitpid cannot wait forever).
    unsafe {
        if libc::write(go_w.as_raw_fd(), b"g".as_ptr().cast(), 1) != 1 {
            libc::kill(pid, libc::SIGKILL);
        }
        let mut status = 0;
        libc::waitpid(pid, &mut status, 0);
    }
    result
}

fn pipe() -> io::Result<(OwnedFd, OwnedFd)> {
    let mut fds = [0 as RawFd; 2];
    // SAFETY: fds has room for the two descriptors pipe2 writes.
    check(unsafe { libc::pipe2(fds.as_mut_ptr(), libc::O_CLOEXEC) }.into())?;
    // SAFETY: both descriptors are new and owned by nothing else.
    Ok(unsafe { (OwnedFd::from_raw_fd(fds[0]), OwnedFd::from_raw_fd(fds[1])) })
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::os::unix::fs::PermissionsExt;

    fn dir(mode: u32) -> PathBuf {
        let d = std::env::temp_dir().join(format!(
            "glassbox-idmap-unit-{}-{mode:o}",
            std::process::id()
        ));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        std::fs::set_permissions(&d, std::fs::Permissions::from_mode(mode)).unwrap();
        d
    }

    #[test]
    fn only_what_the_bits_refuse_is_private() {
        // SAFETY: geteuid cannot fail.
        let me = unsafe { libc::geteuid() };
        let other = me.wrapping_add(12345);
        let open = dir(0o755);
        let shut = dir(0o700);
        let enter_only = dir(0o711);
        assert_eq!(private_for(&open, other, other), None);
        let p = private_for(&shut, other, other).expect("0700 is private to others");
        assert!(p.is_dir);
        assert_eq!((p.mode, p.uid), (0o700, me));
        assert!(private_for(&enter_only, other, other).is_some());
        // Its owner is never refused; nor a missing path (the bind says what is wrong).
        assert_eq!(private_for(&shut, me, other), None);
        assert_eq!(private_for(&shut.join("missing"), other, other), None);
        let file = shut.join("f");
        std::fs::write(&file, "x").unwrap();
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o600)).unwrap();
        assert!(!private_for(&file, other, other).unwrap().is_dir);
        std::fs::set_permissions(&file, std::fs::Permissions::from_mode(0o644)).unwrap();
        assert_eq!(private_for(&file, other, other), None);
        for d in [open, shut, enter_only] {
            std::fs::remove_dir_all(d).unwrap();
        }
    }

    #[test]
    fn the_error_names_the_folder_its_mode_and_what_to_do() {
        let e = Error::Unsupported {
            private: Private {
                path: "/tmp/tmp.X".into(),
                is_dir: true,
                mode: 0o700,
                uid: 0,
                gid: 0,
            },
            role: Role::WorkingFolder,
            step: "mount_setattr(MOUNT_ATTR_IDMAP)",
            source: io::Error::from_raw_os_error(libc::EINVAL),
        };
        let s = e.to_string();
        assert!(
            s.starts_with("the working folder /tmp/tmp.X is private (mode 0700, owner root) and this kernel cannot idmap mounts on its filesystem"),
            "{s}"
        );
        assert!(
            s.ends_with("run glassbox from a folder others may read, or chmod o+rx it"),
            "{s}"
        );
    }
}
