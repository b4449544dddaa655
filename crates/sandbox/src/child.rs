//! The forked side of the sandbox: the outer process, pid 1 and the server process.
//!
//! Code here runs in children of a possibly multi-threaded glassbox. It allocates (glibc's
//! malloc is reset for the child by `fork`) but takes no Rust lock (no printing, no env), and a
//! child never returns into glassbox's code: it ends with `_exit`, panics included.

use crate::limits::Rlimit;
use crate::{
    idmap, io_err, netdev, seccomp, sys, trust, Config, Error, MountPlan, PlantedFile, SANDBOX_UID,
};
use std::ffi::{CString, OsStr};
use std::fs::File;
use std::io::{self, Write};
use std::os::fd::{AsRawFd, FromRawFd, IntoRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::{symlink, DirBuilderExt, OpenOptionsExt, PermissionsExt};
use std::path::{Path, PathBuf};

pub(crate) struct Parts {
    pub stdin: File,
    pub stdout: File,
    pub stderr: File,
    pub listener: OwnedFd,
    pub outer_pid: i32,
    pub init_pid: i32,
    pub server_pid: i32,
    pub status_r: OwnedFd,
    pub tun: Option<OwnedFd>,
}

/// Everything the children need, prepared before `fork`.
struct Prepared<'a> {
    cfg: &'a Config,
    plan: Vec<MountPlan>,
    /// The CA to trust, where it goes ([`trust::Overlay`]).
    trust: Option<trust::Overlay>,
    /// The files to plant ([`Config::planted`]).
    files: Vec<PlantedFile>,
    program: CString,
    argv: Vec<CString>,
    env: Vec<CString>,
    cwd: PathBuf,
    prog: Vec<seccomp::Insn>,
    /// The `cgroup.procs` files the outer process joins before it unshares.
    join: Vec<CString>,
    /// The rlimits the server process sets on itself.
    rlimits: Vec<(Rlimit, u64)>,
    /// `mode=...,size=...` data of a tmpfs, without the mode.
    tmpfs_size: String,
}

fn to_cstring(s: &OsStr) -> CString {
    CString::new(s.as_bytes()).unwrap_or_else(|_| {
        CString::new(
            s.as_bytes()
                .iter()
                .copied()
                .filter(|&b| b != 0)
                .collect::<Vec<_>>(),
        )
        .unwrap_or_default()
    })
}

/// `trees` holds, for each step of `plan`, the idmapped tree to attach in its place (made by
/// the caller, [`idmap::idmapped_tree`]), or `None` for a plain bind.
#[allow(clippy::too_many_arguments)]
pub(crate) fn spawn(
    cfg: &Config,
    plan: &[MountPlan],
    trust: Option<&trust::Overlay>,
    trees: Vec<Option<OwnedFd>>,
    host_uid: u32,
    host_gid: u32,
    join: &[PathBuf],
    rlimits: &[(Rlimit, u64)],
    before_exec: &mut dyn FnMut(i32) -> Result<(), String>,
) -> Result<Parts, Error> {
    let prep = Prepared {
        cfg,
        plan: plan.to_vec(),
        trust: trust.cloned(),
        files: cfg.planted(),
        program: to_cstring(cfg.program.as_os_str()),
        argv: cfg.argv.iter().map(|a| to_cstring(a)).collect(),
        env: cfg
            .environment()
            .iter()
            .map(|(k, v)| sys::cstr(&format!("{k}={v}")))
            .collect(),
        cwd: cfg.cwd.clone(),
        prog: seccomp::build_with(
            &[seccomp::static_rules(), cfg.rules.clone()].concat(),
            cfg.refusals,
        ),
        join: join.iter().map(|p| c(p)).collect(),
        rlimits: rlimits.to_vec(),
        tmpfs_size: format!("size={}", cfg.limits.disk),
    };
    let (stdin_r, stdin_w) = sys::pipe().map_err(io_err("pipe"))?;
    let (stdout_r, stdout_w) = sys::pipe().map_err(io_err("pipe"))?;
    let (stderr_r, stderr_w) = sys::pipe().map_err(io_err("pipe"))?;
    let (err_r, err_w) = sys::pipe().map_err(io_err("pipe"))?;
    let (go_r, go_w) = sys::pipe().map_err(io_err("pipe"))?;
    let (ready_r, ready_w) = sys::pipe().map_err(io_err("pipe"))?;
    let (status_r, status_w) = sys::pipe().map_err(io_err("pipe"))?;
    let (ctl_parent, ctl_child) = sys::socketpair_seqpacket().map_err(io_err("socketpair"))?;
    // SAFETY: getpid cannot fail.
    let parent_pid = unsafe { libc::getpid() };

    // SAFETY: fork in a possibly multi-threaded process; the child only runs `outer`, which
    // follows the rules in this module's doc and ends in `_exit`.
    let outer_pid = unsafe { libc::fork() };
    if outer_pid < 0 {
        return Err(io_err("fork")(io::Error::last_os_error()));
    }
    if outer_pid == 0 {
        drop((
            stdin_w, stdout_r, stderr_r, err_r, go_w, ready_r, status_r, ctl_parent,
        ));
        let err_fd = err_w.as_raw_fd();
        let code = run_child(err_fd, move || {
            outer(
                &prep,
                parent_pid,
                Fds {
                    stdin: stdin_r,
                    stdout: stdout_w,
                    stderr: stderr_w,
                    err: err_fd,
                    go: go_r,
                    ready: ready_w,
                    status: status_w,
                    ctl: ctl_child,
                    trees,
                },
            )
        });
        // SAFETY: leaving the child without running the parent's destructors.
        unsafe { libc::_exit(code) };
    }
    drop((
        stdin_r, stdout_w, stderr_w, err_w, go_r, ready_w, status_w, ctl_child, trees,
    ));

    let fail = |fallback: String| -> Error {
        // A failing child writes why, then exits (its other pipe ends may close first): read
        // until every holder of the error pipe is gone, or 2 s, then kill what is left.
        let mut msg = Vec::new();
        let mut buf = [0u8; 4096];
        while sys::poll_readable(err_r.as_raw_fd(), 2_000).unwrap_or(false) {
            match sys::read(err_r.as_raw_fd(), &mut buf) {
                Ok(n) if n > 0 => msg.extend_from_slice(&buf[..n]),
                _ => break,
            }
        }
        let mut status = 0;
        // SAFETY: killing and reaping our own child; its pid 1 then dies (PDEATHSIG).
        unsafe {
            libc::kill(outer_pid, libc::SIGKILL);
            libc::waitpid(outer_pid, &mut status, 0);
        }
        let msg = String::from_utf8_lossy(&msg).trim().to_string();
        if msg.starts_with("unshare:") {
            Error::NoUserNamespaces(msg)
        } else if msg.is_empty() {
            Error::Setup(fallback)
        } else {
            Error::Setup(msg)
        }
    };

    // 1. The outer process has unshared: write its maps.
    let mut byte = [0u8; 1];
    if !sys::poll_readable(ready_r.as_raw_fd(), 30_000).unwrap_or(false)
        || sys::read(ready_r.as_raw_fd(), &mut byte).unwrap_or(0) != 1
    {
        return Err(fail("the sandbox process did not start".into()));
    }
    if let Err(e) = write_maps(outer_pid, host_uid, host_gid) {
        let _ = sys::write_all(go_w.as_raw_fd(), b"x");
        return Err(fail(format!("cannot write the user namespace maps: {e}")));
    }
    if sys::write_all(go_w.as_raw_fd(), b"g").is_err() {
        return Err(fail("the sandbox process died".into()));
    }
    // 2. pid 1 reports its host pid; the server says hello with its credentials.
    let mut pidbuf = [0u8; 4];
    if !sys::poll_readable(ready_r.as_raw_fd(), 30_000).unwrap_or(false)
        || sys::read(ready_r.as_raw_fd(), &mut pidbuf).unwrap_or(0) != 4
    {
        return Err(fail("pid 1 of the sandbox did not start".into()));
    }
    let init_pid = i32::from_ne_bytes(pidbuf);
    let ctl = ctl_parent.as_raw_fd();
    // With a network edge, pid 1 sends the edge's descriptor before the server says hello.
    let mut tun = None;
    if cfg.network.is_some() {
        if !sys::poll_readable(ctl, 30_000).unwrap_or(false) {
            return Err(fail("the network edge set-up timed out".into()));
        }
        match sys::recv_fd(ctl) {
            Ok(fd) => tun = Some(fd),
            Err(e) => return Err(fail(format!("no network edge from the sandbox: {e}"))),
        }
    }
    if !sys::poll_readable(ctl, 30_000).unwrap_or(false) {
        return Err(fail("the sandbox set-up timed out".into()));
    }
    let server_pid = match sys::recv_hello(ctl) {
        Ok(Some(pid)) => pid,
        Ok(None) => return Err(fail("the sandbox set-up failed".into())),
        Err(e) => return Err(fail(format!("no hello from the server process: {e}"))),
    };
    // 3. The listener's fd number; take it with pidfd_getfd, then let the server go on.
    if !sys::poll_readable(ctl, 30_000).unwrap_or(false)
        || sys::read(ctl, &mut pidbuf).unwrap_or(0) != 4
    {
        return Err(fail("the server process did not install its filter".into()));
    }
    let remote_fd = i32::from_ne_bytes(pidbuf);
    let listener = sys::pidfd_open(server_pid)
        .and_then(|pidfd| sys::pidfd_getfd(pidfd.as_raw_fd(), remote_fd));
    let listener = match listener {
        Ok(l) => l,
        Err(e) => return Err(fail(format!("cannot take the seccomp listener: {e}"))),
    };
    if let Err(e) = before_exec(server_pid) {
        return Err(fail(e));
    }
    if sys::write_all(ctl, b"k").is_err() {
        return Err(fail("the server process died before executing".into()));
    }
    drop(ctl_parent);
    // SAFETY: these pipe ends are ours alone; File takes ownership.
    let (stdin, stdout, stderr) = unsafe {
        (
            File::from_raw_fd(stdin_w.into_raw_fd()),
            File::from_raw_fd(stdout_r.into_raw_fd()),
            File::from_raw_fd(stderr_r.into_raw_fd()),
        )
    };
    Ok(Parts {
        stdin,
        stdout,
        stderr,
        listener,
        outer_pid,
        init_pid,
        server_pid,
        status_r,
        tun,
    })
}

fn write_maps(pid: i32, uid: u32, gid: u32) -> io::Result<()> {
    std::fs::write(format!("/proc/{pid}/setgroups"), "deny")?;
    std::fs::write(
        format!("/proc/{pid}/uid_map"),
        format!("{SANDBOX_UID} {uid} 1\n"),
    )?;
    std::fs::write(
        format!("/proc/{pid}/gid_map"),
        format!("{SANDBOX_UID} {gid} 1\n"),
    )
}

struct Fds {
    stdin: OwnedFd,
    stdout: OwnedFd,
    stderr: OwnedFd,
    /// Owned by the caller of `run_child`, which writes errors to it after the body returns.
    err: RawFd,
    go: OwnedFd,
    ready: OwnedFd,
    status: OwnedFd,
    ctl: OwnedFd,
    /// The idmapped trees pid 1 attaches, by step of the plan.
    trees: Vec<Option<OwnedFd>>,
}

/// Runs a child's body; on error writes the message to `err_fd`. Returns the exit code.
fn run_child(err_fd: RawFd, body: impl FnOnce() -> Result<(), String>) -> i32 {
    match std::panic::catch_unwind(std::panic::AssertUnwindSafe(body)) {
        Ok(Ok(())) => 0,
        Ok(Err(msg)) => {
            let _ = sys::write_all(err_fd, msg.as_bytes());
            1
        }
        Err(_) => {
            let _ = sys::write_all(err_fd, b"sandbox child panicked");
            1
        }
    }
}

fn ctx<T>(what: &str, r: io::Result<T>) -> Result<T, String> {
    r.map_err(|e| format!("{what}: {e}"))
}

fn set_pdeathsig(expected_parent: i32) -> Result<(), String> {
    // SAFETY: prctl with integer arguments.
    let ret = unsafe { libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL, 0, 0, 0) };
    ctx("prctl(PR_SET_PDEATHSIG)", sys::check(ret.into()))?;
    // The parent may have died before the prctl: then nobody would kill us.
    // SAFETY: getppid cannot fail.
    if unsafe { libc::getppid() } != expected_parent {
        return Err("parent died during start-up".into());
    }
    Ok(())
}

/// The outer process: unshare, wait for the maps, become the sandbox user, fork pid 1.
fn outer(p: &Prepared<'_>, parent_pid: i32, fds: Fds) -> Result<(), String> {
    set_pdeathsig(parent_pid)?;
    // Into the sandbox's cgroup first ("0": the writer itself): pid 1 and everything after
    // are born in it, and the cgroup namespace made next is rooted there.
    for procs in &p.join {
        let joined = std::fs::OpenOptions::new()
            .write(true)
            .open(OsStr::from_bytes(procs.as_bytes()))
            .and_then(|mut f| f.write_all(b"0"));
        ctx(
            &format!("join the cgroup {}", procs.to_string_lossy()),
            joined,
        )?;
    }
    let flags = libc::CLONE_NEWUSER
        | libc::CLONE_NEWNS
        | libc::CLONE_NEWPID
        | libc::CLONE_NEWNET
        | libc::CLONE_NEWIPC
        | libc::CLONE_NEWUTS
        | libc::CLONE_NEWCGROUP
        | if p.cfg.clock.is_some() {
            libc::CLONE_NEWTIME
        } else {
            0
        };
    // SAFETY: unshare with flag bits only.
    let ret = unsafe { libc::unshare(flags) };
    ctx("unshare", sys::check(ret.into()))?;
    ctx(
        "signal glassbox",
        sys::write_all(fds.ready.as_raw_fd(), b"r"),
    )?;
    let mut b = [0u8; 1];
    if ctx("wait for glassbox", sys::read(fds.go.as_raw_fd(), &mut b))? != 1 || b[0] != b'g' {
        return Err("glassbox stopped the set-up".into());
    }
    // The moved clock's offsets, given to the time namespace before anything is in it (pid 1,
    // forked below, is its first process), while this process holds CAP_SYS_TIME over it.
    if let Some(c) = p.cfg.clock {
        let written = std::fs::OpenOptions::new()
            .write(true)
            .open("/proc/self/timens_offsets")
            .and_then(|mut f| f.write_all(c.offsets().as_bytes()));
        ctx("move the clocks of the time namespace", written)?;
    }
    // The bind sources, opened while this process still has glassbox's own host ids (the
    // sandbox user may have no right to walk to a source such as a prefix under `/root`) and
    // already in the new mount namespace (a bind must come from a mount of this namespace).
    let sources = open_sources(&p.plan);
    // /dev/net/tun likewise (it is often root's alone); configured later by pid 1, which holds
    // CAP_NET_ADMIN over the new network namespace.
    let tun_dev = match &p.cfg.network {
        Some(_) => Some(netdev::open_tun_device()?),
        None => None,
    };
    // SAFETY: set*id with plain ids; inside the new namespace we hold CAP_SETUID/CAP_SETGID.
    // The ids were not root in this namespace, so the capabilities are kept.
    unsafe {
        ctx(
            "setresgid",
            sys::check(libc::setresgid(SANDBOX_UID, SANDBOX_UID, SANDBOX_UID).into()),
        )?;
        ctx(
            "setresuid",
            sys::check(libc::setresuid(SANDBOX_UID, SANDBOX_UID, SANDBOX_UID).into()),
        )?;
    }
    // SAFETY: this process is single-threaded (a fork child); the child runs `init`.
    let pid = unsafe { libc::fork() };
    if pid < 0 {
        return Err(format!("fork pid 1: {}", io::Error::last_os_error()));
    }
    if pid == 0 {
        let err = fds.err;
        let code = run_child(err, || init(p, fds, sources, tun_dev));
        // SAFETY: leaving the child.
        unsafe { libc::_exit(code) };
    }
    ctx(
        "report pid 1",
        sys::write_all(fds.ready.as_raw_fd(), &pid.to_ne_bytes()),
    )?;
    drop(fds);
    let mut status = 0;
    // SAFETY: waiting for our only child.
    unsafe { libc::waitpid(pid, &mut status, 0) };
    Ok(())
}

fn c(p: &Path) -> CString {
    to_cstring(p.as_os_str())
}

fn mkdirs(path: &Path, mode: u32) -> Result<(), String> {
    ctx(
        &format!("mkdir {}", path.display()),
        std::fs::DirBuilder::new()
            .recursive(true)
            .mode(mode)
            .create(path),
    )
}

/// The flags of the mount a path is on, to keep the ones a user namespace may not clear.
fn locked_flags(path: &Path) -> libc::c_ulong {
    // SAFETY: statvfs is plain old data; zero is valid.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    let cp = c(path);
    // SAFETY: cp is a valid string and st a valid out-pointer.
    if unsafe { libc::statvfs(cp.as_ptr(), &mut st) } != 0 {
        return 0;
    }
    let mut f = 0;
    for (st_flag, ms_flag) in [
        (libc::ST_NOSUID, libc::MS_NOSUID),
        (libc::ST_NODEV, libc::MS_NODEV),
        (libc::ST_NOEXEC, libc::MS_NOEXEC),
        (libc::ST_NOATIME, libc::MS_NOATIME),
        (libc::ST_NODIRATIME, libc::MS_NODIRATIME),
        (libc::ST_RELATIME, libc::MS_RELATIME),
    ] {
        if st.f_flag & st_flag != 0 {
            f |= ms_flag;
        }
    }
    f
}

/// The mount points of the mount just made at `dst` and of the mounts below it, from this
/// process's mountinfo.
///
/// It is read through the host's `/proc`, still at `/oldroot/proc` while the binds are made
/// ("self" there is this process, its mount points relative to its root, the tmpfs): the root
/// has no `/proc` of its own yet. (Read at `/proc/self/mountinfo`, which is not there, it said
/// nothing, and no bind was ever remounted read-only: a server run by a user could write in
/// that user's working folder.) The mounts are followed by their parent ids from the newest at
/// `dst`: one made there earlier, or below `dst` before it (a folder named on the command line,
/// inside a folder bound after it), is hidden by it, and its path now names a plain directory
/// of the new mount (remounting it was EINVAL). A mountinfo that cannot be read, or without
/// `dst`, is an error.
fn mounts_under(dst: &Path) -> Result<Vec<PathBuf>, String> {
    let info = ctx(
        "read /oldroot/proc/self/mountinfo",
        std::fs::read("/oldroot/proc/self/mountinfo"),
    )?;
    mounts_below(&info, dst)
        .ok_or_else(|| format!("{} is not in the mountinfo after its bind", dst.display()))
}

/// [`mounts_under`] over the text of a mountinfo: `None` when no mount is at `dst`.
fn mounts_below(info: &[u8], dst: &Path) -> Option<Vec<PathBuf>> {
    let mut entries = Vec::new();
    for line in info.split(|&b| b == b'\n') {
        let mut f = line.split(|&b| b == b' ');
        let (Some(id), Some(parent), Some(mp)) = (f.next(), f.next(), f.nth(2)) else {
            continue;
        };
        let p = PathBuf::from(OsStr::from_bytes(&unescape_mountinfo(mp)));
        entries.push((id.to_vec(), parent.to_vec(), p));
    }
    // mountinfo lists mounts in the order they were made: the last one at `dst` is on top.
    let top = entries.iter().rposition(|(_, _, p)| p == dst)?;
    let mut ids = vec![entries[top].0.clone()];
    let mut out = vec![entries[top].2.clone()];
    for (id, parent, p) in &entries[top + 1..] {
        if ids.contains(parent) {
            ids.push(id.clone());
            out.push(p.clone());
        }
    }
    Some(out)
}

/// mountinfo escapes space, tab, newline and backslash as `\ooo`.
fn unescape_mountinfo(s: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(s.len());
    let mut i = 0;
    while i < s.len() {
        if s[i] == b'\\' && i + 4 <= s.len() {
            let oct = &s[i + 1..i + 4];
            if oct.iter().all(|d| (b'0'..=b'7').contains(d)) {
                out.push((oct[0] - b'0') * 64 + (oct[1] - b'0') * 8 + (oct[2] - b'0'));
                i += 4;
                continue;
            }
        }
        out.push(s[i]);
        i += 1;
    }
    out
}

/// The mount point of a bind: a directory, or an empty file for a file's bind.
fn make_target(dst: &Path, is_dir: bool) -> Result<(), String> {
    if is_dir {
        mkdirs(dst, 0o755)?;
    } else {
        if let Some(parent) = dst.parent() {
            mkdirs(parent, 0o755)?;
        }
        if !dst.exists() {
            ctx(&format!("create {}", dst.display()), File::create(dst))?;
        }
    }
    Ok(())
}

fn bind(src: &Path, dst: &Path, read_only: bool) -> Result<(), String> {
    let is_dir = std::fs::metadata(src).map(|m| m.is_dir()).unwrap_or(true);
    make_target(dst, is_dir)?;
    ctx(
        &format!("bind {} to {}", src.display(), dst.display()),
        sys::mount(
            Some(&c(src)),
            &c(dst),
            None,
            libc::MS_BIND | libc::MS_REC,
            None,
        ),
    )?;
    let ro = if read_only { libc::MS_RDONLY } else { 0 };
    for mp in mounts_under(dst)? {
        let flags = libc::MS_BIND | libc::MS_REMOUNT | ro | libc::MS_NOSUID | locked_flags(&mp);
        ctx(
            &format!(
                "remount {} {}",
                mp.display(),
                if read_only { "read-only" } else { "nosuid" }
            ),
            sys::mount(None, &c(&mp), None, flags, None),
        )?;
    }
    Ok(())
}

fn tmpfs(dst: &Path, mode: &str, size: &str) -> Result<(), String> {
    mkdirs(dst, 0o755)?;
    let data = sys::cstr(&format!("mode={mode},{size}"));
    ctx(
        &format!("mount tmpfs on {}", dst.display()),
        sys::mount(
            Some(c"tmpfs"),
            &c(dst),
            Some(c"tmpfs"),
            libc::MS_NOSUID | libc::MS_NODEV,
            Some(&data),
        ),
    )
}

fn loopback_up() -> Result<(), String> {
    // SAFETY: socket with constant arguments.
    let fd = ctx(
        "socket",
        sys::check(
            unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) }.into(),
        ),
    )? as RawFd;
    // SAFETY: the descriptor is new and ours.
    let sock = unsafe { OwnedFd::from_raw_fd(fd) };
    // SAFETY: ifreq is plain old data.
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    for (i, b) in b"lo".iter().enumerate() {
        ifr.ifr_name[i] = *b as libc::c_char;
    }
    // SAFETY: ifr is a valid ifreq for these ioctls.
    unsafe {
        ctx(
            "SIOCGIFFLAGS lo",
            sys::check(libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFFLAGS, &mut ifr).into()),
        )?;
        ifr.ifr_ifru.ifru_flags |= libc::IFF_UP as libc::c_short;
        ctx(
            "SIOCSIFFLAGS lo",
            sys::check(libc::ioctl(sock.as_raw_fd(), libc::SIOCSIFFLAGS, &ifr).into()),
        )?;
    }
    Ok(())
}

/// pid 1: build the private root, fork the server, reap, report the server's status.
fn init(
    p: &Prepared<'_>,
    fds: Fds,
    sources: Vec<Option<OwnedFd>>,
    tun_dev: Option<OwnedFd>,
) -> Result<(), String> {
    // The outer process is outside this pid namespace: getppid() says 0 while it lives.
    set_pdeathsig(0)?;
    let Fds {
        stdin,
        stdout,
        stderr,
        err,
        go,
        ready,
        status,
        ctl,
        trees,
    } = fds;
    let tun = build_root(p, sources, trees, tun_dev)?;
    drop((go, ready));
    if let Some(tun) = tun {
        ctx(
            "hand over the network edge",
            sys::send_fd(ctl.as_raw_fd(), tun.as_raw_fd()),
        )?;
        // glassbox holds its own copy now; none stays in the sandbox.
        drop(tun);
    }
    // SAFETY: single-threaded child; the server child runs `server` and ends in exec or _exit.
    let server = unsafe { libc::fork() };
    if server < 0 {
        return Err(format!("fork server: {}", io::Error::last_os_error()));
    }
    if server == 0 {
        drop(status);
        let code = run_child(err, || server_exec(p, stdin, stdout, stderr, ctl));
        // SAFETY: leaving the child.
        unsafe { libc::_exit(code) };
    }
    drop((stdin, stdout, stderr, ctl));
    // SAFETY: pid 1 no longer reports set-up errors; close its copy so glassbox sees EOF.
    unsafe { libc::close(err) };
    loop {
        let mut st = 0;
        // SAFETY: reaping any child of pid 1 (orphans are re-parented to it).
        let pid = unsafe { libc::waitpid(-1, &mut st, libc::__WALL) };
        if pid == server {
            // Reported, then pid 1 stays: daemons the server left keep running (and being
            // recorded) until glassbox kills pid 1, and the namespace with it.
            let _ = sys::write_all(status.as_raw_fd(), &st.to_ne_bytes());
            continue;
        }
        if pid < 0 && io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            return Ok(());
        }
    }
}

fn open_sources(plan: &[MountPlan]) -> Vec<Option<OwnedFd>> {
    plan.iter()
        .map(|step| match step {
            // Attached from its idmapped tree instead.
            MountPlan::Bind { idmap: Some(_), .. } => None,
            MountPlan::Bind { src, .. } => std::fs::OpenOptions::new()
                .read(true)
                .custom_flags(libc::O_PATH | libc::O_CLOEXEC)
                .open(src)
                .ok()
                .map(OwnedFd::from),
            MountPlan::Symlink { .. } => None,
        })
        .collect()
}

/// Builds the private root; returns the network edge's descriptor when there is one.
fn build_root(
    p: &Prepared<'_>,
    sources: Vec<Option<OwnedFd>>,
    trees: Vec<Option<OwnedFd>>,
    tun_dev: Option<OwnedFd>,
) -> Result<Option<OwnedFd>, String> {
    let cfg = p.cfg;
    ctx(
        "make / private",
        sys::mount(None, c"/", None, libc::MS_REC | libc::MS_PRIVATE, None),
    )?;
    let size = p.tmpfs_size.as_str();
    tmpfs(Path::new("/tmp"), "0755", size)?;
    ctx("chdir /tmp", std::env::set_current_dir("/tmp"))?;
    mkdirs(Path::new("/tmp/newroot"), 0o755)?;
    ctx(
        "bind newroot",
        sys::mount(
            Some(c"/tmp/newroot"),
            c"/tmp/newroot",
            None,
            libc::MS_BIND | libc::MS_REC,
            None,
        ),
    )?;
    mkdirs(Path::new("/tmp/oldroot"), 0o755)?;
    ctx("pivot_root", sys::pivot_root(c"/tmp", c"/tmp/oldroot"))?;
    ctx("chdir /", std::env::set_current_dir("/"))?;

    let new = Path::new("/newroot");
    let old = Path::new("/oldroot");
    let rel = |p: &Path| {
        p.strip_prefix("/")
            .map(Path::to_path_buf)
            .unwrap_or_default()
    };
    // /proc of the new pid namespace, mounted while the host's /proc is still visible (the
    // kernel refuses a new proc mount in a user namespace otherwise).
    mkdirs(&new.join("proc"), 0o555)?;
    ctx(
        "mount /proc",
        sys::mount(
            Some(c"proc"),
            &c(&new.join("proc")),
            Some(c"proc"),
            libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            None,
        ),
    )?;
    let dev = new.join("dev");
    tmpfs(&dev, "0755", size)?;
    for node in ["null", "zero", "full", "random", "urandom", "tty"] {
        let src = old.join("dev").join(node);
        if src.exists() {
            bind_dev(&src, &dev.join(node))?;
        }
    }
    for (name, target) in [
        ("fd", "/proc/self/fd"),
        ("stdin", "/proc/self/fd/0"),
        ("stdout", "/proc/self/fd/1"),
        ("stderr", "/proc/self/fd/2"),
    ] {
        ctx("symlink in /dev", symlink(target, dev.join(name)))?;
    }
    tmpfs(&dev.join("shm"), "1777", size)?;
    tmpfs(&new.join("tmp"), "1777", size)?;
    tmpfs(&new.join("run"), "0755", size)?;
    tmpfs(&new.join("var"), "0755", size)?;
    mkdirs(&new.join("var/tmp"), 0o755)?;
    set_mode(&new.join("var/tmp"), 0o1777)?;
    ctx("symlink /var/run", symlink("/run", new.join("var/run")))?;
    let home = new.join(rel(Path::new(&cfg.home())));
    tmpfs(&home, "0755", size)?;
    for f in &p.files {
        let path = new.join(rel(Path::new(&f.path)));
        if let Some(parent) = path.parent() {
            let mode = if parent.ends_with(".ssh") {
                0o700
            } else {
                0o755
            };
            mkdirs(parent, mode)?;
        }
        let mut file = ctx(&format!("create {}", f.path), File::create(&path))?;
        ctx(&format!("write {}", f.path), file.write_all(&f.contents))?;
        set_mode(&path, f.mode)?;
    }
    // The binds last: a working directory under /tmp, /run, /var or home goes on top of the
    // tmpfs mounted there, not under it.
    for ((step, fd), tree) in p.plan.iter().zip(sources).zip(trees) {
        match step {
            MountPlan::Symlink { link, target } => {
                ctx(
                    &format!("symlink {}", link.display()),
                    symlink(target, new.join(rel(link))),
                )?;
            }
            MountPlan::Bind {
                src,
                dst,
                idmap: Some((private, _)),
                ..
            } => {
                let Some(tree) = tree else {
                    return Err(format!("no idmapped mount of {} was made", src.display()));
                };
                let at = new.join(rel(dst));
                make_target(&at, private.is_dir)?;
                // Read-only, nosuid and nodev already, recursively ([`idmap::idmapped_tree`]).
                ctx(
                    &format!(
                        "attach the idmapped mount of {} at {}",
                        src.display(),
                        dst.display()
                    ),
                    idmap::attach(tree.as_raw_fd(), &c(&at)),
                )?;
                // The mount is attached; no descriptor of it stays in the sandbox.
                drop(tree);
            }
            MountPlan::Bind {
                src, dst, writable, ..
            } => {
                // The host's /proc is still at /oldroot/proc; "self" there is this process.
                let from = match &fd {
                    Some(fd) => PathBuf::from(format!("/oldroot/proc/self/fd/{}", fd.as_raw_fd())),
                    None => old.join(rel(src)),
                };
                bind(&from, &new.join(rel(dst)), !*writable).map_err(|e| {
                    e.replace(&from.display().to_string(), &src.display().to_string())
                })?;
                // Bound; the source's descriptor goes (none stays for the server to inherit).
                drop(fd);
            }
        }
    }
    // The host's /etc/hosts does not know the sandbox's hostname; a machine's own does (a
    // lookup of one's own name is not egress).
    overlay_etc(
        new,
        "hosts",
        &format!(
            "127.0.0.1\tlocalhost\n127.0.1.1\t{0}\n::1\tlocalhost ip6-localhost ip6-loopback {0}\n",
            cfg.hostname
        ),
    )?;
    // After every bind: a bundle to overlay may be inside one (certifi in a prefix).
    if let Some(t) = &p.trust {
        trust_overlay(new, t)?;
    }
    let hostname = cfg.hostname.as_bytes();
    // SAFETY: hostname is a valid buffer of the given length; we own this uts namespace.
    let ret = unsafe { libc::sethostname(hostname.as_ptr().cast(), hostname.len()) };
    ctx("sethostname", sys::check(ret.into()))?;
    loopback_up()?;
    let tun = match (&cfg.network, tun_dev) {
        (Some(net), Some(tun)) => {
            let tun = netdev::edge_up(net, tun)?;
            if let Some(n) = net.tcp_syn_retries {
                netdev::set_syn_retries("/newroot/proc", n)?;
            }
            overlay_etc(new, "resolv.conf", &net.resolv_conf)?;
            Some(tun)
        }
        _ => None,
    };

    // Detach the host's root, then make /newroot the root.
    ctx(
        "make oldroot private",
        sys::mount(
            None,
            c"/oldroot",
            None,
            libc::MS_REC | libc::MS_PRIVATE,
            None,
        ),
    )?;
    ctx("unmount oldroot", sys::umount_detach(c"/oldroot"))?;
    ctx("chdir /newroot", std::env::set_current_dir("/newroot"))?;
    ctx("pivot_root .", sys::pivot_root(c".", c"."))?;
    ctx("unmount old /", sys::umount_detach(c"."))?;
    ctx("chdir /", std::env::set_current_dir("/"))?;
    ctx(
        "remount / read-only",
        sys::mount(
            None,
            c"/",
            None,
            libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY | libc::MS_NOSUID | libc::MS_NODEV,
            None,
        ),
    )?;
    Ok(tun)
}

/// Gives the sandbox its own `/etc/<name>` (`resolv.conf` naming the edge's resolver,
/// `hosts` knowing the sandbox's hostname): the file is written on the `/run` tmpfs and bound
/// over the host's, or written where the host's symlink leads when that is on one of the
/// sandbox's own tmpfs mounts.
fn overlay_etc(new: &Path, name: &str, contents: &str) -> Result<(), String> {
    let etc = new.join("etc").join(name);
    let target = match std::fs::read_link(&etc) {
        Ok(t) if t.is_absolute() => new.join(t.strip_prefix("/").unwrap_or(&t)),
        Ok(t) => new.join("etc").join(t),
        Err(_) => etc.clone(),
    };
    let on_tmpfs = ["run", "tmp", "var"]
        .iter()
        .any(|d| target.starts_with(new.join(d)));
    if target != etc && on_tmpfs {
        if let Some(parent) = target.parent() {
            mkdirs(parent, 0o755)?;
        }
        return ctx(&format!("write {name}"), std::fs::write(&target, contents));
    }
    let file = new.join("run/glassbox").join(name);
    mkdirs(&new.join("run/glassbox"), 0o755)?;
    ctx(&format!("write {name}"), std::fs::write(&file, contents))?;
    if std::fs::symlink_metadata(&etc).is_err() {
        // Not on the host: the read-only /etc bind has no place for one.
        return Err(format!("the host has no /etc/{name} to overlay"));
    }
    bind(&file, &target, true)
}

/// Makes the sandbox trust the audit's CA ([`trust`]): the CA, the combined bundle and the
/// hashed directory written on the `/run` tmpfs, that folder made read-only, the directory
/// bound over the host's, the bundle over each other file [`trust::Overlay::bundle_over`]
/// lists.
fn trust_overlay(new: &Path, t: &trust::Overlay) -> Result<(), String> {
    let rel = |p: &Path| new.join(p.strip_prefix("/").unwrap_or(p));
    let tls = rel(Path::new(trust::TLS_DIR));
    mkdirs(&tls, 0o755)?;
    for (file, contents) in [
        (trust::CA_FILE, t.ca_pem.as_bytes()),
        (trust::BUNDLE_FILE, &t.bundle[..]),
    ] {
        let path = rel(Path::new(file));
        ctx(&format!("write {file}"), std::fs::write(&path, contents))?;
        set_mode(&path, 0o644)?;
    }
    let bundle = rel(Path::new(trust::BUNDLE_FILE));
    let certs = rel(Path::new(trust::HASHED_DIR));
    mkdirs(&certs, 0o755)?;
    if let Some(dir) = &t.cert_dir {
        let host = rel(&dir.at);
        for entry in &dir.entries {
            match entry {
                trust::Entry::Link { name, target } => ctx(
                    &format!(
                        "symlink {} in {}",
                        Path::new(name).display(),
                        trust::HASHED_DIR
                    ),
                    symlink(target, certs.join(name)),
                )?,
                trust::Entry::Bind { name } => bind(&host.join(name), &certs.join(name), true)?,
                trust::Entry::Bundle { name } => bind(&bundle, &certs.join(name), true)?,
            }
        }
    }
    ctx(
        &format!("symlink {} in {}", t.ca_entry, trust::HASHED_DIR),
        symlink(trust::CA_FILE, certs.join(&t.ca_entry)),
    )?;
    bind(&tls, &tls, true)?;
    if let Some(dir) = &t.cert_dir {
        bind(&certs, &rel(&dir.at), true)?;
    }
    for target in &t.bundle_over {
        // One of the hashed directory's own files is bound there already.
        let in_dir = t.cert_dir.as_ref().is_some_and(|d| {
            d.entries.iter().any(|e| match e {
                trust::Entry::Bundle { name } => d.at.join(name) == *target,
                _ => false,
            })
        });
        if !in_dir {
            bind(&bundle, &rel(target), true)?;
        }
    }
    Ok(())
}

fn bind_dev(src: &Path, dst: &Path) -> Result<(), String> {
    ctx(&format!("create {}", dst.display()), File::create(dst))?;
    ctx(
        &format!("bind {}", src.display()),
        sys::mount(Some(&c(src)), &c(dst), None, libc::MS_BIND, None),
    )
}

fn set_mode(path: &Path, mode: u32) -> Result<(), String> {
    ctx(
        &format!("chmod {}", path.display()),
        std::fs::set_permissions(path, std::fs::Permissions::from_mode(mode)),
    )
}

/// The server process: stdio, no_new_privs, filter, hand over the listener, exec.
fn server_exec(
    p: &Prepared<'_>,
    stdin: OwnedFd,
    stdout: OwnedFd,
    stderr: OwnedFd,
    ctl: OwnedFd,
) -> Result<(), String> {
    // SAFETY: dup2 onto the standard descriptors; the sources are open pipe ends.
    unsafe {
        for (fd, target) in [(&stdin, 0), (&stdout, 1), (&stderr, 2)] {
            ctx(
                "dup2",
                sys::check(libc::dup2(fd.as_raw_fd(), target).into()),
            )?;
        }
    }
    drop((stdin, stdout, stderr));
    ctx(
        &format!("chdir {}", p.cwd.display()),
        std::env::set_current_dir(&p.cwd),
    )?;
    for &(which, value) in &p.rlimits {
        set_rlimit(which, value)?;
    }
    // SAFETY: umask and prctl with integer arguments.
    unsafe {
        libc::umask(0o022);
        ctx(
            "prctl(PR_SET_NO_NEW_PRIVS)",
            sys::check(libc::prctl(libc::PR_SET_NO_NEW_PRIVS, 1, 0, 0, 0).into()),
        )?;
    }
    let ctl_fd = ctl.as_raw_fd();
    ctx("hello", sys::send_hello(ctl_fd))?;
    let listener = ctx("seccomp", seccomp::install_with_listener(&p.prog))?;
    // From here on the recorded calls wait for glassbox: only unrecorded ones (write, read,
    // close) until the listener has been taken.
    ctx(
        "send listener",
        sys::write_all(ctl_fd, &listener.to_ne_bytes()),
    )?;
    let mut ack = [0u8; 1];
    if ctx("wait for glassbox", sys::read(ctl_fd, &mut ack))? != 1 {
        return Err("glassbox did not take the listener".into());
    }
    // SAFETY: closing descriptors this process owns; the listener must not stay reachable by
    // the server.
    unsafe { libc::close(listener) };
    drop(ctl);
    let mut argv: Vec<*const libc::c_char> = p.argv.iter().map(|a| a.as_ptr()).collect();
    argv.push(std::ptr::null());
    let mut envp: Vec<*const libc::c_char> = p.env.iter().map(|a| a.as_ptr()).collect();
    envp.push(std::ptr::null());
    // SAFETY: program, argv and envp are NUL-terminated strings in NULL-terminated arrays that
    // live until exec replaces the process.
    unsafe { libc::execve(p.program.as_ptr(), argv.as_ptr(), envp.as_ptr()) };
    let e = io::Error::last_os_error();
    let msg = format!(
        "glassbox: cannot execute {}: {e}\n",
        p.program.to_string_lossy()
    );
    // The server's stderr is where the audit looks for why it exited at once.
    let _ = sys::write_all(2, msg.as_bytes());
    // SAFETY: leaving the child after a failed exec.
    unsafe { libc::_exit(127) }
}

/// Sets one rlimit, soft and hard (the server cannot raise it again).
fn set_rlimit(which: Rlimit, value: u64) -> Result<(), String> {
    let (resource, name) = match which {
        Rlimit::Data => (libc::RLIMIT_DATA, "RLIMIT_DATA"),
        Rlimit::Nproc => (libc::RLIMIT_NPROC, "RLIMIT_NPROC"),
        Rlimit::Fsize => (libc::RLIMIT_FSIZE, "RLIMIT_FSIZE"),
        Rlimit::Core => (libc::RLIMIT_CORE, "RLIMIT_CORE"),
    };
    let lim = libc::rlimit {
        rlim_cur: value,
        rlim_max: value,
    };
    // SAFETY: setrlimit with a valid rlimit value.
    let ret = unsafe { libc::setrlimit(resource, &lim) };
    ctx(
        &format!("setrlimit({name}, {value})"),
        sys::check(ret.into()),
    )?;
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_mounts_below_a_bind_are_the_visible_ones() {
        // A folder bound, then its parent bound over it, then a mount inside the parent's.
        let info = b"20 1 0:30 / / rw - tmpfs tmpfs rw\n\
30 20 8:1 /tmp/p/a/b /newroot/tmp/p/a/b rw - ext4 /dev/sda1 rw\n\
31 20 8:1 /tmp/p/a /newroot/tmp/p/a rw - ext4 /dev/sda1 rw\n\
32 31 0:40 / /newroot/tmp/p/a/c rw - tmpfs tmpfs rw\n\
33 20 0:41 / /newroot/tmp/p/a\\040b rw - tmpfs tmpfs rw\n";
        assert_eq!(
            mounts_below(info, Path::new("/newroot/tmp/p/a")).unwrap(),
            [
                PathBuf::from("/newroot/tmp/p/a"),
                PathBuf::from("/newroot/tmp/p/a/c")
            ]
        );
        assert_eq!(
            mounts_below(info, Path::new("/newroot/tmp/p/a b")).unwrap(),
            [PathBuf::from("/newroot/tmp/p/a b")]
        );
        assert!(mounts_below(info, Path::new("/newroot/tmp/q")).is_none());
    }
}
