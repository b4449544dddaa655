//! The namespace sandbox glassbox runs a server in.
//!
//! # Isolation steps, in order
//!
//! 1. glassbox makes the sandbox's cgroup and decides how each resource limit is enforced
//!    ([`limits`]: cgroup v2, cgroup v1, rlimits), then forks the *outer* process, which joins
//!    that cgroup, enters new user, mount, pid, net, ipc, uts and cgroup namespaces
//!    (`unshare`) and waits.
//! 2. glassbox writes the outer process's uid and gid maps: the sandbox user (uid 1000) maps to
//!    the caller's own uid, or, when glassbox runs as root, to an unprivileged host uid
//!    ([`HOST_UID_WHEN_ROOT`]) so that nothing in the sandbox acts as the host's root.
//! 3. The outer process forks pid 1 of the new pid namespace, which builds a private root (the
//!    sequence bubblewrap uses: a tmpfs, `pivot_root`, binds from the old root, a second
//!    `pivot_root`): the host's system directories bound read-only, a new `/proc`, a minimal
//!    `/dev`, tmpfs `/tmp`, `/run`, `/var` and home (each `size=` the disk limit), the
//!    working directory and the program's own
//!    install prefix bound read-only at their host paths, the planted files, and, when the
//!    config names a certificate authority to trust, that CA wherever the usual runtimes look
//!    for trust ([`trust`]: a bundle of the host's roots plus the CA bound over the system
//!    bundles and `certifi`'s, the hashed directory, the CA alone); then brings up
//!    loopback (the only network there is) and sets the hostname. When glassbox runs as root,
//!    a read-only source the unprivileged host uid could not use (a `mktemp -d` folder: mode
//!    0700, owner root) is bound through an idmapped mount that glassbox made before step 1
//!    and pid 1 attaches ([`idmap`]: the owner is seen as the sandbox user; still read-only).
//! 4. pid 1 forks the server process, which sets its rlimits (`RLIMIT_CORE` 0,
//!    `RLIMIT_FSIZE`, and the fallbacks of [`limits`]) and `no_new_privs`, tells glassbox its pid,
//!    installs the seccomp filter ([`seccomp`]) with a user-notification listener, hands the
//!    listener to glassbox (which takes it with `pidfd_getfd`), closes its own copy, and
//!    executes the command. The listener never stays in the sandbox.
//!
//! # Lifetime
//!
//! Every process of the sandbox is in its pid namespace. When the server exits, pid 1 reports
//! its status and exits, and the kernel kills everything left in the namespace, daemons
//! included. pid 1 and the outer process die with their parents (`PR_SET_PDEATHSIG`), so a
//! glassbox that is killed takes the whole tree with it. [`Sandbox::kill`] and `Drop` kill
//! pid 1. Nothing is mounted outside the sandbox's own mount namespace, and no file is left on
//! the host. Once every process is gone, the sandbox's cgroup is read (which limits were
//! reached: [`Sandbox::limits_reached`]) and removed.
#![deny(missing_docs)]

#[cfg(not(target_os = "linux"))]
compile_error!(
    "glassbox runs servers in Linux namespaces under seccomp and eBPF: it builds and runs on Linux only"
);

mod child;
pub mod honeytokens;
pub mod idmap;
pub mod limits;
mod netdev;

pub use netdev::verify_isolation;
pub mod browser;
pub mod clock;
pub mod seccomp;
mod sys;
pub mod trust;
pub mod workspace;

use glassbox_model::{MountRecord, SandboxSettings, ServerExit};
use std::ffi::OsString;
use std::fs::File;
use std::io;
use std::os::fd::{AsRawFd, OwnedFd};
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

pub use honeytokens::PlantedFile;
pub use limits::{Limits, Meter, Usage};
pub use trust::{certifi_bundles, subject_hash, Trust};

/// The host uid (and gid) the sandbox user maps to when glassbox runs as root: an id no
/// account uses, so the server owns nothing on the host.
pub const HOST_UID_WHEN_ROOT: u32 = 2_100_000_000;

/// The sandbox user's uid and gid inside.
pub const SANDBOX_UID: u32 = 1000;

/// Host directories bound read-only into the private root (when present).
pub use glassbox_model::SYSTEM_DIRS;

/// What went wrong setting up or running the sandbox.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Not Linux.
    #[error("glassbox's sandbox needs Linux namespaces; this system is not Linux")]
    NotLinux,
    /// User namespaces are unavailable.
    #[error("cannot create a user namespace ({0}); enable unprivileged user namespaces (sysctl kernel.unprivileged_userns_clone=1, user.max_user_namespaces > 0) or run as root")]
    NoUserNamespaces(String),
    /// A step of the set-up failed.
    #[error("sandbox set-up failed: {0}")]
    Setup(String),
    /// A read-only source is private to the sandbox user and could not be idmapped for it.
    #[error(transparent)]
    Private(#[from] idmap::Error),
    /// The certificate authority to trust cannot be used as given.
    #[error("the sandbox cannot trust the audit's CA: {0}")]
    Trust(#[from] trust::Error),
    /// A system call failed in glassbox itself.
    #[error("{what}: {source}")]
    Io {
        /// The operation.
        what: String,
        /// The error.
        source: io::Error,
    },
}

fn io_err(what: impl Into<String>) -> impl FnOnce(io::Error) -> Error {
    let what = what.into();
    move |source| Error::Io { what, source }
}

/// What to run and how to set up its sandbox.
#[derive(Clone, Debug)]
pub struct Config {
    /// Absolute host path of the program to execute (it must be visible inside: under a system
    /// directory, the working directory, or `extra_ro`).
    pub program: PathBuf,
    /// The arguments, `argv[0]` first.
    pub argv: Vec<OsString>,
    /// The host directory the server runs in; bound read-only at the same path.
    pub cwd: PathBuf,
    /// More host paths bound read-only at the same path (an interpreter's install prefix, a
    /// script named on the command line).
    pub extra_ro: Vec<PathBuf>,
    /// Host directories bound read-write at the same path (a package's install folder during
    /// the install phase). They must be writable by the sandbox user's host uid.
    pub extra_rw: Vec<PathBuf>,
    /// The sandbox user's name (home is `/home/<user>`).
    pub user: String,
    /// The hostname inside.
    pub hostname: String,
    /// Directories put in front of the default `PATH`.
    pub path_prefix: Vec<String>,
    /// More environment variables for the server.
    pub env: Vec<(String, String)>,
    /// Files created before the server starts (honeytokens).
    pub files: Vec<PlantedFile>,
    /// The seccomp rules routing recorded calls to the listener.
    pub rules: Vec<seccomp::Rule>,
    /// The network edge; `None`: loopback only, no route out at all.
    pub network: Option<NetworkSetup>,
    /// Whether the static filter's refusals go through the recorder (which records each one
    /// and answers with its errno) or stay in the kernel, unseen.
    pub refusals: seccomp::Refusals,
    /// Memory, processes, CPU and disk of the whole sandbox ([`limits`]).
    pub limits: Limits,
    /// A certificate authority the server trusts, besides the host's roots: the audit's own,
    /// whose certificates the network edge presents ([`trust`]). `None`: the sandbox's trust
    /// is the host's, untouched.
    pub trust: Option<Trust>,
    /// The server's clocks moved forward (a trigger run, [`clock`]); `None`: the host's.
    pub clock: Option<clock::ClockShift>,
}

/// The network edge's interface inside the sandbox: a TUN device that every route leads
/// into, whose descriptor glassbox reads ([`Sandbox::tun`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct NetworkSetup {
    /// The interface's name.
    pub interface: String,
    /// Its IPv4 address.
    pub v4: std::net::Ipv4Addr,
    /// The IPv4 prefix length.
    pub v4_prefix: u8,
    /// Its IPv6 address (/128).
    pub v6: std::net::Ipv6Addr,
    /// The sandbox's `/etc/resolv.conf`.
    pub resolv_conf: String,
    /// `net.ipv4.tcp_syn_retries` in the namespace (the kernel's 6 keep an unanswered connect
    /// waiting about two minutes).
    pub tcp_syn_retries: Option<u8>,
}

impl NetworkSetup {
    /// The set-up in words, for the manifest.
    pub fn describe(&self) -> String {
        format!(
            "TUN {} with {}/{} and {}/128; default routes (IPv4 and IPv6) via {}; read by glassbox",
            self.interface, self.v4, self.v4_prefix, self.v6, self.interface
        )
    }
}

impl Config {
    /// The home directory inside the sandbox.
    pub fn home(&self) -> String {
        format!("/home/{}", self.user)
    }

    /// The environment the server gets: the defaults (`HOME`, `PATH`...), with a CA to trust
    /// the variables that point runtimes at it ([`trust`]: `SSL_CERT_FILE`, `SSL_CERT_DIR`,
    /// `NODE_EXTRA_CA_CERTS`, `REQUESTS_CA_BUNDLE`, `CURL_CA_BUNDLE`, `GIT_SSL_CAINFO`), then
    /// [`Config::env`], whose value wins over any default of the same name.
    pub fn environment(&self) -> Vec<(String, String)> {
        let home = self.home();
        let mut path = self.path_prefix.clone();
        path.extend(
            [
                "/usr/local/bin",
                "/usr/bin",
                "/bin",
                "/usr/local/sbin",
                "/usr/sbin",
                "/sbin",
            ]
            .map(String::from),
        );
        let mut env = vec![
            ("HOME".to_string(), home),
            ("USER".to_string(), self.user.clone()),
            ("LOGNAME".to_string(), self.user.clone()),
            ("PATH".to_string(), path.join(":")),
            ("LANG".to_string(), "C.UTF-8".to_string()),
            ("SHELL".to_string(), "/bin/bash".to_string()),
            ("PWD".to_string(), self.cwd.to_string_lossy().into_owned()),
            ("TMPDIR".to_string(), "/tmp".to_string()),
        ];
        if self.trust.is_some() {
            let plan = self.mount_plan(None);
            env.extend(trust::environment(&trust::View::new(&plan)));
        }
        for (k, v) in &self.env {
            env.retain(|(ek, _)| ek != k);
            env.push((k.clone(), v.clone()));
        }
        if self.clock.is_some_and(|c| c.by_shim()) {
            let i = env.iter().position(|(k, _)| k == "LD_PRELOAD");
            let preload = clock::ClockShift::preload(i.map(|i| env[i].1.as_str()));
            match i {
                Some(i) => env[i].1 = preload,
                None => env.push(("LD_PRELOAD".into(), preload)),
            }
        }
        env
    }

    /// The files planted before the server starts: [`Config::files`], and the moved clock's
    /// shim when there is one.
    pub(crate) fn planted(&self) -> Vec<PlantedFile> {
        let mut files = self.files.clone();
        if let Some(c) = self.clock {
            files.extend(c.files());
        }
        files
    }

    /// The writable tmpfs mounts inside (each `size=` the disk limit).
    pub(crate) fn tmpfs_mounts(&self) -> Vec<String> {
        ["/tmp", "/run", "/var", "/dev/shm", &self.home()]
            .map(String::from)
            .to_vec()
    }

    /// The mounts of the private root, in the order they are made. With `idmap_to` (the
    /// sandbox user's host uid and gid, when glassbox runs as root and may idmap), a read-only
    /// source of the caller's (the working directory, `extra_ro`) that those ids could not use
    /// is marked to be bound through an idmapped mount ([`idmap`]); the system directories never
    /// are (`/etc` holds root's secrets, and is readable where it must be).
    pub(crate) fn mount_plan(&self, idmap_to: Option<(u32, u32)>) -> Vec<MountPlan> {
        let mut plan = Vec::new();
        for d in SYSTEM_DIRS {
            let host = Path::new("/").join(d);
            match std::fs::symlink_metadata(&host) {
                Ok(m) if m.file_type().is_symlink() => {
                    if let Ok(t) = std::fs::read_link(&host) {
                        plan.push(MountPlan::Symlink {
                            link: host,
                            target: t,
                        });
                    }
                }
                Ok(m) if m.is_dir() => plan.push(MountPlan::Bind {
                    src: host.clone(),
                    dst: host,
                    writable: false,
                    idmap: None,
                }),
                _ => {}
            }
        }
        let mut binds: Vec<(PathBuf, idmap::Role)> =
            vec![(self.cwd.clone(), idmap::Role::WorkingFolder)];
        binds.extend(
            self.extra_ro
                .iter()
                .map(|p| (p.clone(), idmap::Role::ReadOnly)),
        );
        // A folder before the folders inside it: bound after them, it would hide their binds
        // (an idmapped one among them), and name them again.
        binds.sort_by_key(|(b, _)| b.components().count());
        for (b, role) in binds {
            let covered = SYSTEM_DIRS
                .iter()
                .any(|d| b.starts_with(Path::new("/").join(d)));
            if b == Path::new("/") || !b.exists() {
                continue;
            }
            let idmap = idmap_to
                .and_then(|(uid, gid)| idmap::private_for(&b, uid, gid))
                .map(|p| (p, role));
            // A path under a system directory is visible already, unless it is private (then
            // its idmapped mount goes on top of the system directory's bind).
            if !covered || idmap.is_some() {
                plan.push(MountPlan::Bind {
                    src: b.clone(),
                    dst: b,
                    writable: false,
                    idmap,
                });
            }
        }
        // Read-write binds last: one inside a read-only bind (a cache under the working
        // directory) goes on top of it.
        for b in &self.extra_rw {
            if b != Path::new("/") && b.is_dir() {
                plan.push(MountPlan::Bind {
                    src: b.clone(),
                    dst: b.clone(),
                    writable: true,
                    idmap: None,
                });
            }
        }
        plan
    }

    fn settings(
        &self,
        host_uid: u32,
        plan: &[MountPlan],
        overlay: Option<&trust::Overlay>,
    ) -> SandboxSettings {
        let mut mounts = vec![
            MountRecord {
                target: "/".into(),
                source: "tmpfs".into(),
                read_only: true,
            },
            MountRecord {
                target: "/proc".into(),
                source: "proc (new, this pid namespace)".into(),
                read_only: false,
            },
            MountRecord {
                target: "/dev".into(),
                source: "tmpfs with null, zero, full, random, urandom, tty".into(),
                read_only: false,
            },
        ];
        for t in ["/tmp", "/run", "/var", &self.home()] {
            mounts.push(MountRecord {
                target: t.to_string(),
                source: "tmpfs".into(),
                read_only: false,
            });
        }
        for p in plan {
            match p {
                MountPlan::Bind {
                    src,
                    dst,
                    writable,
                    idmap,
                } => mounts.push(MountRecord {
                    target: dst.to_string_lossy().into_owned(),
                    source: match idmap {
                        Some((p, _)) => format!("bind:{} ({})", src.display(), p.describe()),
                        None => format!("bind:{}", src.display()),
                    },
                    read_only: !writable,
                }),
                MountPlan::Symlink { link, target } => mounts.push(MountRecord {
                    target: link.to_string_lossy().into_owned(),
                    source: format!("symlink:{}", target.display()),
                    read_only: true,
                }),
            }
        }
        if let Some(o) = overlay {
            mounts.extend(o.records());
        }
        SandboxSettings {
            backend: "namespaces".into(),
            namespaces: ["user", "mount", "pid", "net", "ipc", "uts", "cgroup"]
                .map(String::from)
                .to_vec(),
            uid: SANDBOX_UID,
            host_uid,
            home: self.home(),
            cwd: self.cwd.to_string_lossy().into_owned(),
            hostname: self.hostname.clone(),
            network: match &self.network {
                Some(n) => n.describe(),
                None => "loopback-only".into(),
            },
            no_new_privs: true,
            mounts,
            env: self
                .environment()
                .into_iter()
                .map(|(k, v)| format!("{k}={v}"))
                .collect(),
            honeytokens: Vec::new(),
            workspace: String::new(),
            limits: Default::default(),
            limits_reached: Vec::new(),
            usage: Vec::new(),
            outlived: Vec::new(),
            left: Vec::new(),
            left_cut: Vec::new(),
        }
    }
}

/// One step of the private root beyond the fixed ones.
#[derive(Clone, Debug)]
pub(crate) enum MountPlan {
    /// Bind a host path (read-only unless `writable`); through an idmapped mount when it is
    /// private to the sandbox user ([`idmap`]).
    Bind {
        src: PathBuf,
        dst: PathBuf,
        writable: bool,
        idmap: Option<(idmap::Private, idmap::Role)>,
    },
    /// Recreate a host symlink (`/bin -> usr/bin`).
    Symlink { link: PathBuf, target: PathBuf },
}

/// Makes TCP connections from inside a sandbox's network namespace ([`Sandbox::dialer`]).
///
/// Each connection is made by a short-lived thread that enters the namespace with
/// `setns(2)`: a socket belongs to the namespace it was made in, whichever thread then uses
/// it. Entering a network namespace takes `CAP_SYS_ADMIN` over it and in glassbox's own user
/// namespace: glassbox must run as root for this.
#[derive(Debug)]
pub struct Dialer {
    netns: OwnedFd,
}

impl Dialer {
    /// Connects to `addr` (as seen inside the sandbox), waiting at most `timeout`.
    pub fn connect(
        &self,
        addr: std::net::SocketAddr,
        timeout: Duration,
    ) -> std::io::Result<std::net::TcpStream> {
        let fd = self.netns.as_raw_fd();
        std::thread::scope(|scope| {
            scope
                .spawn(move || {
                    // SAFETY: setns on a namespace descriptor we hold open; it changes only
                    // this thread, which ends right after making the one socket.
                    if unsafe { libc::setns(fd, libc::CLONE_NEWNET) } != 0 {
                        let e = std::io::Error::last_os_error();
                        return Err(std::io::Error::new(
                            e.kind(),
                            format!("cannot enter the sandbox's network namespace (glassbox must run as root): {e}"),
                        ));
                    }
                    std::net::TcpStream::connect_timeout(&addr, timeout)
                })
                .join()
                .unwrap_or_else(|_| {
                    Err(std::io::Error::other("the connecting thread panicked"))
                })
        })
    }
}

/// A running sandbox.
#[derive(Debug)]
pub struct Sandbox {
    /// The server's standard input.
    pub stdin: Option<File>,
    /// The server's standard output.
    pub stdout: Option<File>,
    /// The server's standard error.
    pub stderr: Option<File>,
    /// The seccomp user-notification listener of the server's filter.
    pub listener: Option<OwnedFd>,
    /// The network edge's TUN descriptor (non-blocking), when the config asked for an edge.
    pub tun: Option<OwnedFd>,
    outer_pid: i32,
    init_pid: i32,
    /// pid 1's pidfd: readable once pid 1 is gone, which is after every process of its
    /// namespace has been killed and reaped.
    init_pidfd: Option<OwnedFd>,
    server_pid: i32,
    status_r: OwnedFd,
    exit: Option<ServerExit>,
    killed: bool,
    settings: SandboxSettings,
    /// The sandbox's cgroup, removed once its processes are gone.
    cgroup: Option<limits::Cgroup>,
    /// The writable tmpfs mounts inside, by path, each held open (`O_PATH`) so that it can
    /// be checked for being full when the sandbox finishes, even once its processes are gone.
    tmpfs: Vec<(String, OwnedFd)>,
    /// The limits it reached (known once finished).
    reached: Vec<String>,
}

impl Sandbox {
    /// Builds the sandbox and starts the server in it, stopped at its first recorded system
    /// call (its `execve`) until the listener is served.
    pub fn spawn(cfg: &Config) -> Result<Sandbox, Error> {
        Sandbox::spawn_with(cfg, &mut |_| Ok(()))
    }

    /// As [`Sandbox::spawn`], calling `before_exec` with the server's host pid once its
    /// namespaces exist and before it executes (to attach observers to them). An error there
    /// stops the set-up.
    pub fn spawn_with(
        cfg: &Config,
        before_exec: &mut dyn FnMut(i32) -> Result<(), String>,
    ) -> Result<Sandbox, Error> {
        if !cfg!(target_os = "linux") {
            return Err(Error::NotLinux);
        }
        // SAFETY: geteuid cannot fail.
        let euid = unsafe { libc::geteuid() };
        // SAFETY: getegid cannot fail.
        let egid = unsafe { libc::getegid() };
        let (host_uid, host_gid) = if euid == 0 {
            (HOST_UID_WHEN_ROOT, HOST_UID_WHEN_ROOT)
        } else {
            (euid, egid)
        };
        // Only root may idmap (and only root's sandbox user is a uid that owns nothing); the
        // idmapped trees are made now, while glassbox is still the host's root and before
        // anything else of the sandbox exists, so that a refusal leaves nothing behind.
        let plan = cfg.mount_plan((euid == 0).then_some((host_uid, host_gid)));
        // Where the CA goes is decided here, on the host, from the plan: the child only
        // writes, links and binds what this says.
        let overlay = match &cfg.trust {
            Some(t) => Some(trust::Overlay::plan(t, &trust::View::new(&plan))?),
            None => None,
        };
        let trees = plan
            .iter()
            .map(|step| match step {
                MountPlan::Bind {
                    idmap: Some((p, role)),
                    ..
                } => idmap::idmapped_tree(p, *role, host_uid, host_gid).map(Some),
                _ => Ok(None),
            })
            .collect::<Result<Vec<_>, _>>()?;
        // The limits are in place before anything of the sandbox runs; a failed set-up
        // removes the cgroup again (on drop).
        let applied = limits::apply(&cfg.limits).map_err(Error::Setup)?;
        let join = applied
            .cgroup
            .as_ref()
            .map(limits::Cgroup::procs_files)
            .unwrap_or_default();
        let parts = child::spawn(
            cfg,
            &plan,
            overlay.as_ref(),
            trees,
            host_uid,
            host_gid,
            &join,
            &applied.rlimits,
            before_exec,
        )?;
        let mut settings = cfg.settings(host_uid, &plan, overlay.as_ref());
        settings.limits = applied.record;
        Ok(Sandbox {
            stdin: Some(parts.stdin),
            stdout: Some(parts.stdout),
            stderr: Some(parts.stderr),
            listener: Some(parts.listener),
            tun: parts.tun,
            outer_pid: parts.outer_pid,
            init_pid: parts.init_pid,
            init_pidfd: sys::pidfd_open(parts.init_pid).ok(),
            server_pid: parts.server_pid,
            status_r: parts.status_r,
            exit: None,
            killed: false,
            settings,
            cgroup: applied.cgroup,
            tmpfs: cfg
                .tmpfs_mounts()
                .into_iter()
                .filter_map(|m| {
                    let path = format!("/proc/{}/root{m}", parts.init_pid);
                    sys::open_path(&path).ok().map(|fd| (m, fd))
                })
                .collect(),
            reached: Vec::new(),
        })
    }

    /// The limits the sandbox reached while it ran, one sentence each (`"pids limit (512)
    /// reached: 1022 forks refused"`, `"/tmp is full (512 MiB tmpfs)"`), and any failure to
    /// remove its cgroup. Known once [`Sandbox::finish`] returned; empty before.
    pub fn limits_reached(&self) -> &[String] {
        &self.reached
    }

    /// A [`Meter`] of the running sandbox (its cgroup's counters, its writable tmpfs mounts),
    /// when it has a cgroup.
    pub fn meter(&self) -> Option<Meter> {
        let cg = self.cgroup.as_ref()?;
        let fds = self
            .tmpfs
            .iter()
            .filter_map(|(_, fd)| fd.try_clone().ok())
            .collect();
        Some(cg.meter(fds))
    }

    /// The writable tmpfs mounts, each as its path inside and a path this process can read
    /// it by (`/proc/self/fd/N` of the descriptor held on it: the tmpfs itself, not what a
    /// working directory bound on top of it shows). Empty once [`Sandbox::finish`] let go of
    /// them.
    pub fn writable(&self) -> Vec<(String, std::path::PathBuf)> {
        self.tmpfs
            .iter()
            .map(|(m, fd)| {
                (
                    m.clone(),
                    std::path::PathBuf::from(format!("/proc/self/fd/{}", fd.as_raw_fd())),
                )
            })
            .collect()
    }

    /// The processes in the sandbox now but its own (init, outer), each as its command line
    /// (at most 160 characters, control characters shown as `?`): once the server has exited,
    /// what outlived it.
    pub fn remaining(&self) -> Vec<String> {
        let Some(cg) = &self.cgroup else {
            return Vec::new();
        };
        cg.procs()
            .into_iter()
            .filter(|p| *p != self.init_pid && *p != self.outer_pid)
            .filter_map(|p| std::fs::read(format!("/proc/{p}/cmdline")).ok())
            .map(|c| {
                String::from_utf8_lossy(&c)
                    .trim_end_matches('\0')
                    .chars()
                    .map(|ch| match ch {
                        '\0' => ' ',
                        c if c.is_control() => '?',
                        c => c,
                    })
                    .take(160)
                    .collect::<String>()
            })
            .filter(|l| !l.is_empty())
            .collect()
    }

    /// Notes every writable tmpfs that is full, and lets go of them.
    fn note_full_tmpfs(&mut self) {
        for (m, fd) in std::mem::take(&mut self.tmpfs) {
            let Some((size, avail)) = sys::fstatvfs_space(fd.as_raw_fd()) else {
                continue;
            };
            if limits::is_full(size, avail) {
                let full = format!("{m} is full ({} tmpfs)", limits::format_size(size));
                if !self.reached.contains(&full) {
                    self.reached.push(full);
                }
            }
        }
    }

    /// Lifts the CPU limit before the kill: hundreds of dying processes (a fork bomb) that
    /// are throttled while they hold locks the whole host needs (a shared library's mapping
    /// lock, taken to unmap it) stall every other process until they are done.
    fn unthrottle(&self) {
        if let Some(cg) = &self.cgroup {
            cg.unthrottle();
        }
    }

    /// Once every process is gone: what the cgroup counted, then the cgroup removed.
    fn release_cgroup(&mut self) {
        if let Some(mut cg) = self.cgroup.take() {
            self.reached.extend(cg.reached());
            if let Err(e) = cg.remove() {
                self.reached
                    .push(format!("the sandbox's cgroup could not be removed: {e}"));
            }
        }
    }

    /// How the sandbox was set up.
    pub fn settings(&self) -> &SandboxSettings {
        &self.settings
    }

    /// The server's pid as seen from glassbox.
    pub fn server_pid(&self) -> i32 {
        self.server_pid
    }

    /// A handle that kills the whole sandbox from any thread (the recorder's, when it fails).
    pub fn killer(&self) -> Killer {
        Killer(
            self.init_pidfd
                .as_ref()
                .and_then(|fd| fd.try_clone().ok())
                .map(std::sync::Arc::new),
        )
    }

    /// Opens TCP connections from inside the sandbox's network namespace: how glassbox speaks
    /// to a server that listens on the sandbox's own loopback (MCP over HTTP).
    pub fn dialer(&self) -> Result<Dialer, Error> {
        let path = format!("/proc/{}/ns/net", self.init_pid);
        let netns =
            std::fs::File::open(&path).map_err(io_err("open the sandbox's network namespace"))?;
        Ok(Dialer {
            netns: OwnedFd::from(netns),
        })
    }

    /// Whether processes other than pid 1 are left in the sandbox (daemons, after the server
    /// exited): pid 1's children, which orphans are re-parented to.
    pub fn others_alive(&self) -> bool {
        std::fs::read_to_string(format!("/proc/{0}/task/{0}/children", self.init_pid))
            .map(|c| !c.trim().is_empty())
            .unwrap_or(false)
    }

    /// Kills every process of the sandbox (pid 1 of its namespace, and so all the rest).
    pub fn kill(&mut self) {
        if !self.killed {
            self.killed = true;
            self.unthrottle();
            // SAFETY: plain kill(2) of processes we created and have not reaped yet.
            unsafe {
                libc::kill(self.init_pid, libc::SIGKILL);
                libc::kill(self.outer_pid, libc::SIGKILL);
            }
        }
    }

    /// Waits up to `timeout` for the server to exit; returns how it ended, if it did.
    pub fn wait_timeout(&mut self, timeout: Duration) -> Option<ServerExit> {
        if self.exit.is_some() {
            return self.exit.clone();
        }
        let deadline = Instant::now() + timeout;
        loop {
            let left = deadline.saturating_duration_since(Instant::now());
            // At most i32::MAX ms a poll (a longer timeout is polled again).
            let ms = left.as_millis().min(i32::MAX as u128) as i32;
            match sys::poll_readable(self.status_r.as_raw_fd(), ms) {
                Ok(true) => {
                    let mut buf = [0u8; 4];
                    let n = sys::read(self.status_r.as_raw_fd(), &mut buf).unwrap_or(0);
                    self.exit = Some(if n == 4 {
                        decode_status(i32::from_ne_bytes(buf), self.killed)
                    } else if self.killed {
                        ServerExit::Signaled {
                            signal: libc::SIGKILL,
                            by_glassbox: true,
                        }
                    } else {
                        // pid 1 died without reporting: the namespace is gone.
                        ServerExit::Signaled {
                            signal: libc::SIGKILL,
                            by_glassbox: false,
                        }
                    });
                    return self.exit.clone();
                }
                Ok(false) if left.is_zero() => return None,
                Ok(false) => {}
                Err(_) => return None,
            }
        }
    }

    /// Kills the sandbox if it still runs and reaps its processes; returns how the server
    /// ended. pid 1 outlives the server (daemons stay recorded until the audit is done with
    /// them): it is killed here, and every process left with it.
    pub fn finish(&mut self) -> ServerExit {
        self.note_full_tmpfs();
        if let Some(e) = self.wait_timeout(Duration::ZERO) {
            if !self.killed {
                self.killed = true;
                self.unthrottle();
                // SAFETY: kill(2) of pid 1 of our sandbox; the outer process goes with it.
                unsafe { libc::kill(self.init_pid, libc::SIGKILL) };
            }
            self.reap();
            return e;
        }
        self.kill();
        let e = self
            .wait_timeout(Duration::from_secs(10))
            .unwrap_or(ServerExit::Running);
        self.reap();

        match e {
            ServerExit::Signaled { signal, .. } if signal == libc::SIGKILL => ServerExit::Running,
            other => other,
        }
    }

    /// Waits until pid 1, and with it every process of the namespace, is gone; then reaps the
    /// outer process.
    fn reap(&mut self) {
        if let Some(fd) = &self.init_pidfd {
            if !sys::poll_readable(fd.as_raw_fd(), 10_000).unwrap_or(false) {
                // SAFETY: kill(2) of pid 1 of our sandbox, which has not exited.
                unsafe { libc::kill(self.init_pid, libc::SIGKILL) };
                let _ = sys::poll_readable(fd.as_raw_fd(), 10_000);
            }
        }
        let mut status = 0;
        // SAFETY: waitpid on our own child; pid 1 is gone, so the outer process is exiting.
        unsafe {
            if libc::waitpid(self.outer_pid, &mut status, libc::WNOHANG) == 0 {
                libc::kill(self.outer_pid, libc::SIGKILL);
                libc::waitpid(self.outer_pid, &mut status, 0);
            }
        }
        self.outer_pid = -1;
        // The tmpfs mounts held open keep their pages (charged to the cgroup) until now.
        self.tmpfs.clear();
        self.release_cgroup();
    }
}

impl Drop for Sandbox {
    fn drop(&mut self) {
        if self.outer_pid > 0 {
            self.kill();
            self.reap();
        }
    }
}

/// Kills a sandbox from any thread: SIGKILL to its pid 1 through a pidfd (never a recycled
/// pid), and with it every process of its namespace.
#[derive(Clone, Debug)]
pub struct Killer(Option<std::sync::Arc<OwnedFd>>);

impl Killer {
    /// Kills the sandbox (nothing if it is gone already).
    pub fn kill(&self) {
        if let Some(fd) = &self.0 {
            // SAFETY: pidfd_send_signal on a pidfd we own, with no siginfo.
            unsafe {
                libc::syscall(
                    libc::SYS_pidfd_send_signal,
                    fd.as_raw_fd(),
                    libc::SIGKILL,
                    std::ptr::null::<libc::siginfo_t>(),
                    0,
                )
            };
        }
    }
}

fn decode_status(status: i32, killed: bool) -> ServerExit {
    if libc::WIFEXITED(status) {
        ServerExit::Exited {
            code: libc::WEXITSTATUS(status),
        }
    } else {
        ServerExit::Signaled {
            signal: libc::WTERMSIG(status),
            by_glassbox: killed,
        }
    }
}
