//! The microVM isolation backend of glassbox: a command run inside a QEMU `microvm` guest.
//!
//! # The guest
//!
//! - **Machine**: `qemu-system-x86_64 -M microvm` (no PCI, no firmware tables beyond ACPI,
//!   virtio over MMIO), KVM when `/dev/kvm` can really run the guest, TCG otherwise
//!   ([`accel`]: detected at run time, the reason reported).
//! - **Kernel**: Debian's (`linux-image-amd64`), the ELF extracted from `/boot/vmlinuz-*` once
//!   and cached ([`kernel`]), booted through PVH (`-kernel vmlinux`): no decompression in the
//!   guest, which costs about 14 s under TCG.
//! - **Initramfs**: Debian builds virtio-mmio, virtio-serial and 9p as modules, so the guest
//!   needs them before it can reach anything; a small initramfs made at run time
//!   ([`initramfs`]) holds them, the agent as `/init`, and the agent's shared libraries.
//! - **Files**: the host's system directories (`/usr`, `/etc`, `/opt`, ..., the same list as
//!   the namespace sandbox) and the caller's extra directories, each shared read-only over
//!   9p (`-fsdev local,readonly=on`) at its host path, on a tmpfs root: everything else in the
//!   guest is writable and in memory. The host's root is *not* shared whole: a guest root
//!   that unmounted its own `/proc` would read the host's `/proc` (other processes'
//!   command lines and environments), `/run` and `/dev` through the share. Folders in
//!   [`VmConfig::shares_rw`] (an install's) are shared writable.
//! - **Channels**: virtio-serial ports ([`agent::ports`]) on socket pairs whose other ends
//!   glassbox holds (QEMU gets them as inherited descriptors: no socket file, no temporary
//!   directory): control, the command's stdin, stdout and stderr, an events port for the
//!   guest's recorder, and a TCP relay ([`mux`]) through which the host reaches a server
//!   listening on the guest sandbox's loopback.
//! - **Network**: none by default (the guest has only its loopback). With
//!   [`VmConfig::network`], one virtio-net card whose Ethernet frames glassbox reads and writes
//!   as datagrams ([`Vm::net`], `-netdev dgram` on a socket pair), served by glassbox's
//!   network edge on the host (`glassbox_net::wire`). The agent brings it up as a bare wire:
//!   no address, no ARP, IPv6 off, so the guest's kernel sends nothing of its own on it.
//! - **Privileges**: when glassbox runs as root, QEMU drops to an unprivileged uid
//!   ([`QEMU_UID_WHEN_ROOT`]) before it starts, so the 9p server reads only what any user may
//!   read, whatever the guest's root asks for. The caller's shares are bound first, in a mount
//!   namespace of QEMU's own, where that uid can reach them (a folder under `/root`); a
//!   read-only share that uid could not use even so (a `mktemp -d` folder: mode 0700, owner
//!   root) is attached there through an idmapped mount whose owner is seen as that uid
//!   (`glassbox_sandbox::idmap`, the namespace sandbox's own), so the guest sees it as its
//!   sandbox user's (the same uid), read-only.
//! - **Agent** ([`agent`]): pid 1 of the guest; runs one command and powers off.
//!
//! # Lifetime
//!
//! One VM per [`Vm`]. QEMU gets `PR_SET_PDEATHSIG` (SIGKILL), so it dies with the thread that
//! started it; [`Vm::wait`] kills a guest that outlives its deadline and says so
//! ([`Error::Hung`]); `Drop` kills and reaps QEMU. Nothing is written on the host but the
//! cache under the state directory.
#![deny(missing_docs)]

#[cfg(not(all(target_os = "linux", target_arch = "x86_64")))]
compile_error!("glassbox's microVM backend runs x86-64 guests under QEMU on Linux x86-64");

pub mod accel;
pub mod agent;
pub mod clock;
pub mod initramfs;
pub mod kernel;
pub mod mux;
pub mod proto;
pub mod wire;

pub use accel::{Accel, AccelChoice};
pub use kernel::Kernel;

use std::ffi::{CString, OsString};
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::net::UnixStream;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::{Arc, Mutex};
use std::time::{Duration, Instant};

/// What went wrong.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// QEMU, the guest kernel or its modules are not installed.
    #[error("{0}")]
    Missing(String),
    /// The guest kernel cannot be used.
    #[error("guest kernel: {0}")]
    Kernel(String),
    /// Preparing the VM failed.
    #[error("microVM set-up failed: {0}")]
    Setup(String),
    /// A system call or file operation failed on the host.
    #[error("{what}: {source}")]
    Io {
        /// The operation.
        what: String,
        /// The error.
        source: io::Error,
    },
    /// The guest agent did not report ready in time.
    #[error("the guest did not come up within {} s{starved}; the VM was killed{}", after.as_secs(), tail_note(console))]
    BootTimeout {
        /// The bound, in guest time ([`clock`]).
        after: Duration,
        /// The wall time it took beyond the bound, in words (empty if none).
        starved: String,
        /// The end of the guest's console and QEMU's messages.
        console: String,
    },
    /// The command did not end in time: the guest hung (or the command did).
    #[error("the guest hung: the command had not exited after {} s{starved}; the VM was killed{}", after.as_secs(), tail_note(console))]
    Hung {
        /// The bound, in guest time ([`clock`]).
        after: Duration,
        /// The wall time it took beyond the bound, in words (empty if none).
        starved: String,
        /// The end of the guest's console and QEMU's messages.
        console: String,
    },
    /// QEMU ended before the agent reported the command's end.
    #[error("the VM ended before the command did ({status}){}", tail_note(console))]
    Died {
        /// QEMU's exit status.
        status: String,
        /// The end of the guest's console and QEMU's messages.
        console: String,
    },
    /// The agent reported a failure (mount, exec ...).
    #[error("the guest agent failed: {0}")]
    Agent(String),
    /// The TCP relay's other end broke its protocol ([`mux`]).
    #[error("TCP relay: {0}")]
    Relay(String),
}

fn tail_note(console: &str) -> String {
    if console.trim().is_empty() {
        String::new()
    } else {
        format!("; last console lines:\n{}", console.trim_end())
    }
}

impl Error {
    fn io(what: impl Into<String>) -> impl FnOnce(io::Error) -> Error {
        let what = what.into();
        move |source| Error::Io { what, source }
    }
}

/// The result type of this crate.
pub type Result<T, E = Error> = std::result::Result<T, E>;

/// The hint every "not installed" error carries.
pub const SETUP_HINT: &str =
    "run scripts/setup --microvm (it installs qemu-system-x86, linux-image-amd64 and xz-utils)";

/// The host directories shared read-only at their own paths by default (the namespace
/// sandbox's list); a top-level symlink (`/bin -> usr/bin`) is recreated as a symlink.
pub use glassbox_sandbox::SYSTEM_DIRS;

/// How to boot the VM.
#[derive(Debug, Clone)]
pub struct VmConfig {
    /// The QEMU binary.
    pub qemu: PathBuf,
    /// The cache directory's parent (`$GLASSBOX_STATE_DIR`, or `~/.local/state/glassbox`); the
    /// cache is its `vm/`.
    pub state_dir: PathBuf,
    /// The guest agent's host executable (`glassbox` itself, or `glassbox-vm-agent`).
    pub agent: PathBuf,
    /// Its arguments in the guest (`["vm-agent"]` for `glassbox`).
    pub agent_args: Vec<String>,
    /// Guest memory in MiB.
    pub memory_mib: u32,
    /// Guest CPUs.
    pub cpus: u32,
    /// Host directories shared read-only at their own paths, besides [`SYSTEM_DIRS`].
    pub shares: Vec<PathBuf>,
    /// Host directories shared **read-write** at the same path (a package's install folder
    /// during its install). QEMU writes in them as its own uid (the sandbox's unprivileged
    /// one when glassbox runs as root), so they must be writable by it.
    pub shares_rw: Vec<PathBuf>,
    /// Bound on the boot, up to the agent's "ready", in guest time ([`clock`]).
    pub boot_timeout: Duration,
    /// Forced accelerator; `None`: detect ([`accel::detect`]).
    pub accel: Option<Accel>,
    /// The guest's hostname.
    pub hostname: String,
    /// More kernel parameters (default: `$GLASSBOX_VM_APPEND`, split on spaces; for
    /// diagnosis, e.g. `initcall_debug ignore_loglevel`).
    pub extra_append: Vec<String>,
    /// Where to copy the guest's whole console and QEMU's messages (default:
    /// `$GLASSBOX_VM_CONSOLE`); only their tail is kept otherwise, for error messages.
    pub console_log: Option<PathBuf>,
    /// More QEMU arguments, appended last (for experiments: `-accel tcg,tb-size=...`).
    pub extra_qemu_args: Vec<String>,
    /// Give the guest a network card (virtio-net, `eth0`, brought up, no address yet) whose
    /// Ethernet frames glassbox reads and writes, one datagram each, on [`Vm::net`]
    /// (`-netdev dgram` on a socket pair). Default: no card at all.
    pub network: bool,
    /// The guest runs glassbox's namespace sandbox (`glassbox trace` in the guest): load the
    /// modules it needs ([`kernel::SANDBOX_MODULES`]: TUN). Default: no.
    pub sandbox: bool,
}

impl VmConfig {
    /// Defaults for `agent` (run with `agent_args` in the guest): QEMU from `$GLASSBOX_QEMU` or
    /// `PATH`, 512 MiB, 1 CPU, a 60 s boot bound.
    pub fn new(agent: impl Into<PathBuf>, agent_args: &[&str]) -> VmConfig {
        VmConfig {
            qemu: std::env::var_os("GLASSBOX_QEMU")
                .map(PathBuf::from)
                .unwrap_or_else(|| PathBuf::from("qemu-system-x86_64")),
            state_dir: default_state_dir(),
            agent: agent.into(),
            agent_args: agent_args.iter().map(|s| s.to_string()).collect(),
            memory_mib: 512,
            cpus: 1,
            shares: Vec::new(),
            shares_rw: Vec::new(),
            boot_timeout: Duration::from_secs(60),
            accel: None,
            hostname: "glassbox-vm".into(),
            extra_append: std::env::var("GLASSBOX_VM_APPEND")
                .map(|s| s.split_whitespace().map(str::to_string).collect())
                .unwrap_or_default(),
            console_log: std::env::var_os("GLASSBOX_VM_CONSOLE").map(PathBuf::from),
            extra_qemu_args: Vec::new(),
            network: false,
            sandbox: false,
        }
    }
}

/// `$GLASSBOX_STATE_DIR`, else `$XDG_STATE_HOME/glassbox`, else `~/.local/state/glassbox`.
pub fn default_state_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("GLASSBOX_STATE_DIR") {
        return PathBuf::from(d);
    }
    if let Some(d) = std::env::var_os("XDG_STATE_HOME").filter(|d| !d.is_empty()) {
        return PathBuf::from(d).join("glassbox");
    }
    let home = std::env::var_os("HOME").map_or_else(|| PathBuf::from("/tmp"), PathBuf::from);
    home.join(".local/state/glassbox")
}

/// The command to run in the guest.
#[derive(Debug, Clone, Default)]
pub struct GuestCommand {
    /// The command, `argv[0]` first (a path as the guest sees it, or a name found in `PATH`).
    pub argv: Vec<OsString>,
    /// Its environment (nothing else is passed).
    pub env: Vec<(OsString, OsString)>,
    /// Its working directory in the guest.
    pub cwd: PathBuf,
}

impl GuestCommand {
    /// `argv` with a minimal environment (`PATH`, `HOME=/root`, `LANG=C.UTF-8`) in `/`.
    pub fn new<S: Into<OsString>>(argv: impl IntoIterator<Item = S>) -> GuestCommand {
        GuestCommand {
            argv: argv.into_iter().map(Into::into).collect(),
            env: [
                (
                    "PATH",
                    "/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin",
                ),
                ("HOME", "/root"),
                ("LANG", "C.UTF-8"),
            ]
            .iter()
            .map(|(k, v)| (k.into(), v.into()))
            .collect(),
            cwd: PathBuf::from("/"),
        }
    }
}

/// How the command ended in the guest.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum GuestExit {
    /// It exited with this code.
    Code(i32),
    /// A signal killed it.
    Signal(i32),
}

/// What was prepared and measured for one VM (for the manifest and the benchmark).
#[derive(Debug, Clone)]
pub struct BootInfo {
    /// The accelerator and why.
    pub accel: AccelChoice,
    /// The guest kernel.
    pub kernel: Kernel,
    /// The initramfs booted.
    pub initramfs: PathBuf,
    /// QEMU's full command line (descriptors 3 to 9 are the socket pairs: the console, then
    /// the ports of [`agent::ports::ALL`]; 10 the kernel, 11 the initramfs, 12 the network
    /// card's).
    pub command_line: Vec<OsString>,
    /// From [`Vm::start`] to QEMU's start.
    pub prepared: Duration,
    /// From [`Vm::start`] to the agent's "ready".
    pub ready: Duration,
    /// The guest's uptime at "ready", as it reported it.
    pub guest_uptime_at_ready: Duration,
    /// The agent's own timings, in guest uptime ms: `uptime=... init=... modules=...`.
    pub guest_timings: String,
    /// From [`Vm::start`] to the command's start in the guest.
    pub started: Duration,
    /// The command's pid in the guest.
    pub guest_pid: u32,
}

/// The last bytes of a stream, for error messages.
#[derive(Debug, Default)]
struct Tail(Vec<u8>);

const TAIL_BYTES: usize = 4096;

impl Tail {
    fn push(&mut self, b: &[u8]) {
        self.0.extend_from_slice(b);
        if self.0.len() > TAIL_BYTES {
            let cut = self.0.len() - TAIL_BYTES;
            self.0.drain(..cut);
        }
    }
}

/// The host's end of the guest command's standard input: what is written goes to the guest
/// as [`proto::STDIN_DATA`] frames; dropping it (or [`StdinPort::close`]) sends
/// [`proto::STDIN_END`], so the guest learns of the end in-band, not from the port's close
/// alone (a control message whose wake-up a guest can lose), and then closes the socket.
#[derive(Debug)]
pub struct StdinPort {
    stream: UnixStream,
    ended: bool,
}

/// How long closing the stdin port waits to send its end (a guest that stopped reading
/// must not hold the host's close back).
const STDIN_END_TIMEOUT: Duration = Duration::from_secs(2);

impl StdinPort {
    /// Frames `stream`, the host's side of the stdin port.
    pub fn new(stream: UnixStream) -> StdinPort {
        StdinPort {
            stream,
            ended: false,
        }
    }

    /// Sends the end of the input and closes the port.
    pub fn close(&mut self) -> io::Result<()> {
        if std::mem::replace(&mut self.ended, true) {
            return Ok(());
        }
        let _ = self.stream.set_write_timeout(Some(STDIN_END_TIMEOUT));
        let sent = proto::write_frame(&mut self.stream, proto::STDIN_END, b"");
        let _ = self.stream.shutdown(std::net::Shutdown::Write);
        sent
    }
}

impl Write for StdinPort {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.ended {
            return Err(io::ErrorKind::BrokenPipe.into());
        }
        let n = buf.len().min(proto::MAX_FRAME);
        // A frame is written whole or the port is done: half a frame would misframe the rest.
        if let Err(e) = proto::write_frame(&mut self.stream, proto::STDIN_DATA, &buf[..n]) {
            self.ended = true;
            let _ = self.stream.shutdown(std::net::Shutdown::Write);
            return Err(e);
        }
        Ok(n)
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Drop for StdinPort {
    fn drop(&mut self) {
        let _ = self.close();
    }
}

/// How many of the console's last lines an error keeps: enough for the guest agent's and the
/// guest glassbox's steps and, for a guest that stalled, where each of its threads waits.
const CONSOLE_TAIL_LINES: usize = 30;

/// A running microVM with one command in it.
#[derive(Debug)]
pub struct Vm {
    child: Option<Child>,
    ctl: UnixStream,
    /// Bytes of the control stream read but not yet a whole frame.
    ctl_buf: Vec<u8>,
    /// The command's standard input (dropping it closes the guest command's stdin).
    pub stdin: Option<StdinPort>,
    /// The command's standard output.
    pub stdout: Option<UnixStream>,
    /// The command's standard error.
    pub stderr: Option<UnixStream>,
    /// What the guest writes to `/dev/virtio-ports/glassbox.events`.
    pub events: Option<UnixStream>,
    /// `/dev/virtio-ports/glassbox.tcp` in the guest, both ways: free for a TCP relay
    /// ([`mux`]).
    pub tcp: Option<UnixStream>,
    /// The guest's network card: one Ethernet frame per datagram, both ways
    /// ([`VmConfig::network`]).
    pub net: Option<std::os::unix::net::UnixDatagram>,
    console: Arc<Mutex<Tail>>,
    readers: Vec<std::thread::JoinHandle<()>>,
    start: Instant,
    /// What was prepared and measured.
    pub info: BootInfo,
}

/// Finds `name` in `PATH` (or takes it as a path).
fn which(name: &Path) -> Option<PathBuf> {
    if name.components().count() > 1 {
        return name.is_file().then(|| name.to_path_buf());
    }
    std::env::var_os("PATH")
        .map(|p| {
            std::env::split_paths(&p)
                .map(|d| d.join(name))
                .collect::<Vec<_>>()
        })
        .unwrap_or_default()
        .into_iter()
        .find(|p| p.is_file())
}

/// What a boot needs, found or made by [`prepare`].
#[derive(Debug, Clone)]
pub struct Prepared {
    /// The QEMU binary.
    pub qemu: PathBuf,
    /// The guest kernel.
    pub kernel: Kernel,
    /// The accelerator and why.
    pub accel: AccelChoice,
    /// The initramfs.
    pub initramfs: PathBuf,
}

/// Prepares what a boot needs (kernel, accelerator, initramfs) without booting: for a
/// caller that wants to report it or check the set-up, and for the first run to pay the
/// kernel's extraction.
pub fn prepare(config: &VmConfig) -> Result<Prepared> {
    let qemu = which(&config.qemu).ok_or_else(|| {
        Error::Missing(format!("{} not found: {SETUP_HINT}", config.qemu.display()))
    })?;
    let kernel = kernel::find(&config.state_dir).map_err(|e| match e {
        Error::Missing(m) => Error::Missing(format!("{m} ({SETUP_HINT})")),
        e => e,
    })?;
    let accel = match config.accel {
        Some(a) => AccelChoice {
            accel: a,
            reason: "chosen by the caller".into(),
        },
        None => accel::detect(&qemu, &kernel, &config.state_dir),
    };
    let mut wanted = kernel::GUEST_MODULES.to_vec();
    if config.network {
        wanted.extend_from_slice(kernel::NET_MODULES);
    }
    if config.sandbox {
        wanted.extend_from_slice(kernel::SANDBOX_MODULES);
    }
    let modules = kernel::module_files(&kernel, &wanted)?;
    let initramfs = initramfs::build(&kernel, &config.agent, &modules, &config.state_dir)?;
    Ok(Prepared {
        qemu,
        kernel,
        accel,
        initramfs,
    })
}

/// Where QEMU, in a mount namespace of its own, finds the caller's shares when it runs
/// without root (a tmpfs there, one bind mount per share; nothing of it is seen outside).
const SHARES_DIR: &str = "/run/glassbox/vm-shares";

/// In QEMU's child, before it drops root: a mount namespace of its own, a tmpfs on `dir`, and
/// each `(source, target, tree)` of `binds` bound there (the idmapped `tree` attached instead
/// when there is one). Only raw system calls: this runs between fork and exec.
fn bind_shares(dir: &CString, binds: &[(CString, CString, Option<RawFd>)]) -> io::Result<()> {
    let check = |r: libc::c_int| {
        if r < 0 {
            Err(io::Error::last_os_error())
        } else {
            Ok(())
        }
    };
    // SAFETY: every pointer is a NUL-terminated string that outlives the call, or null where
    // the call takes null.
    unsafe {
        check(libc::unshare(libc::CLONE_NEWNS))?;
        check(libc::mount(
            std::ptr::null(),
            c"/".as_ptr(),
            std::ptr::null(),
            libc::MS_REC | libc::MS_PRIVATE,
            std::ptr::null(),
        ))?;
        check(libc::mount(
            c"tmpfs".as_ptr(),
            dir.as_ptr(),
            c"tmpfs".as_ptr(),
            libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
            c"mode=0755,size=64k".as_ptr().cast(),
        ))?;
        for (source, target, tree) in binds {
            check(libc::mkdir(target.as_ptr(), 0o755))?;
            if let Some(tree) = tree {
                glassbox_sandbox::idmap::attach(*tree, target)?;
                continue;
            }
            check(libc::mount(
                source.as_ptr(),
                target.as_ptr(),
                std::ptr::null(),
                libc::MS_BIND | libc::MS_REC,
                std::ptr::null(),
            ))?;
        }
    }
    Ok(())
}

/// The guest network card's MAC address (locally administered).
pub const GUEST_MAC: &str = "52:54:00:67:62:02";

/// The host uid (and gid) QEMU runs as when glassbox runs as root: the namespace sandbox's
/// unprivileged id (`glassbox_sandbox::HOST_UID_WHEN_ROOT`), so that the 9p server reads only
/// what any user may (not `/etc/shadow`, not host keys), whatever the guest's root does.
pub const QEMU_UID_WHEN_ROOT: u32 = 2_100_000_000;

/// `Some((uid, supplementary groups))` when QEMU must drop root: the group of `/dev/kvm` is
/// kept under KVM.
fn unprivileged(accel: Accel) -> Option<(u32, Vec<libc::gid_t>)> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return None;
    }
    let mut groups = Vec::new();
    if accel == Accel::Kvm {
        if let Ok(m) = std::fs::metadata("/dev/kvm") {
            groups.push(std::os::unix::fs::MetadataExt::gid(&m));
        }
    }
    Some((QEMU_UID_WHEN_ROOT, groups))
}

/// Moves `fd` to a number of at least 64, close-on-exec, so that the `dup2` onto 3.. in the
/// child never overwrites another of the descriptors it still has to move.
fn high_fd(fd: OwnedFd) -> Result<OwnedFd> {
    // SAFETY: plain integer arguments; the result is a new descriptor owned right below.
    let n = unsafe { libc::fcntl(fd.as_raw_fd(), libc::F_DUPFD_CLOEXEC, 64) };
    if n < 0 {
        return Err(Error::io("fcntl(F_DUPFD_CLOEXEC)")(
            io::Error::last_os_error(),
        ));
    }
    // SAFETY: n is a new descriptor nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(n) })
}

impl Vm {
    /// Boots a VM and starts `cmd` in it; returns once the command runs (or fails to start).
    pub fn start(config: &VmConfig, cmd: &GuestCommand) -> Result<Vm> {
        let start = Instant::now();
        if cmd.argv.is_empty() {
            return Err(Error::Setup("empty command".into()));
        }
        let Prepared {
            qemu,
            kernel,
            accel,
            initramfs,
        } = prepare(config)?;

        // Socket pairs: ours, and QEMU's (as descriptors 3.. in QEMU): the console and the
        // ports.
        let mut ours = Vec::new();
        let mut theirs = Vec::new();
        for _ in 0..1 + agent::ports::ALL.len() {
            let (a, b) = UnixStream::pair().map_err(Error::io("socketpair"))?;
            ours.push(a);
            theirs.push(high_fd(OwnedFd::from(b))?);
        }
        // 3: console; 4..: the ports in agent::ports::ALL order.
        let mut args: Vec<OsString> = Vec::new();
        let mut arg = |s: &str| args.push(s.into());
        let (accel_name, cpu) = match accel.accel {
            // No nested virtualisation in the guest: its kernel has KVM as a module, readable
            // on the shared /usr, and nothing in the guest should run a VM of its own.
            Accel::Kvm => ("kvm", "host,vmx=off,svm=off"),
            // One host thread emulates every vCPU in turn (QEMU's multi-threaded TCG, a
            // thread per vCPU, is its default). With a thread per vCPU, about one control in
            // thirty lost a guest that froze as its run ended (its sandbox's and its edge's
            // teardown: the guest's own watchdog could not print either), a kind of the lost
            // wake-ups the virtio ports had before (docs/microvm.md); with one thread, none in
            // 507 controls (two whole suites side by side among them), and the controls'
            // subset took as long (339 s, against 345 s). The guest still has its vCPUs: the
            // race controls, which need two CPUs, still catch theirs.
            Accel::Tcg => ("tcg,thread=single", "max,vmx=off,svm=off"),
        };
        for a in [
            "-M",
            "microvm",
            "-accel",
            accel_name,
            "-cpu",
            cpu,
            "-nodefaults",
            "-no-user-config",
            "-display",
            "none",
            "-no-reboot",
            "-global",
            "virtio-mmio.force-legacy=false",
            // The guest's notifications handled in the vCPU's own thread, not through an
            // eventfd: with two vCPUs, a guest's write to a virtio-serial port sometimes
            // waited for room forever (a lost wakeup in wait_port_writable, also seen by
            // others: github.com/lmb/vimto/issues/29; with kernels from 6.1 on, turning
            // ioeventfd off avoids it). Here the events port of a control that records
            // 20,000 opens stalled that way in about one run of two.
            "-global",
            "virtio-mmio.ioeventfd=off",
        ] {
            arg(a);
        }
        arg("-m");
        arg(&config.memory_mib.to_string());
        arg("-smp");
        arg(&config.cpus.to_string());
        arg("-chardev");
        arg("socket,id=con,fd=3");
        arg("-serial");
        arg("chardev:con");
        arg("-device");
        arg("virtio-serial-device,max_ports=8");
        for (i, name) in agent::ports::ALL.iter().enumerate() {
            arg("-chardev");
            arg(&format!("socket,id=p{i},fd={}", 4 + i));
            arg("-device");
            arg(&format!("virtserialport,chardev=p{i},name={name}"));
        }
        let mut append = vec![
            "console=ttyS0".to_string(),
            "quiet".into(),
            "panic=-1".into(),
            "random.trust_cpu=on".into(),
            "cryptomgr.notests".into(),
            // No page of a guest process moved behind its back: the recorder's eBPF program
            // reads a call's path at its return and cannot fault a page in, so a page that
            // khugepaged is collapsing or compaction is migrating at that moment (its entry
            // briefly not present) loses the call. Debian's kernel collapses transparent huge
            // pages always; a run of the microVM control suite lost a Python server's
            // successful openat that way, its buffer already reused when read again.
            "transparent_hugepage=never".into(),
            "sysctl.vm.compaction_proactiveness=0".into(),
        ];
        if accel.accel == Accel::Tcg {
            append.push(format!("tsc_early_khz={}", accel::host_tsc_khz()));
            append.push("tsc=reliable".into());
        }
        append.extend(config.extra_append.iter().cloned());
        if !config.agent_args.is_empty() {
            append.push("--".into());
            append.extend(config.agent_args.iter().cloned());
        }
        // The kernel and the initramfs go in as descriptors too (10 and 11, after the socket
        // pairs): the cache is under the caller's home, which QEMU, dropped to another uid,
        // may not traverse.
        let kernel_fd = 3 + theirs.len();
        let initramfs_fd = kernel_fd + 1;
        for f in [&kernel.vmlinux, &initramfs] {
            let file = std::fs::File::open(f)
                .map_err(Error::io(format!("cannot open {}", f.display())))?;
            theirs.push(high_fd(OwnedFd::from(file))?);
        }
        // 12: the network card's frames.
        let net_fd = 3 + theirs.len();
        let mut net = None;
        if config.network {
            let (a, b) =
                std::os::unix::net::UnixDatagram::pair().map_err(Error::io("socketpair"))?;
            net = Some(a);
            theirs.push(high_fd(OwnedFd::from(b))?);
            args.push("-netdev".into());
            args.push(format!("dgram,id=net0,local.type=fd,local.str={net_fd}").into());
            args.push("-device".into());
            args.push(format!("virtio-net-device,netdev=net0,mac={GUEST_MAC}").into());
        }
        args.push("-kernel".into());
        args.push(format!("/proc/self/fd/{kernel_fd}").into());
        args.push("-initrd".into());
        args.push(format!("/proc/self/fd/{initramfs_fd}").into());
        args.push("-append".into());
        args.push(append.join(" ").into());

        // The guest's tree: symlinks and 9p shares.
        let mut request = proto::Request {
            hostname: config.hostname.as_bytes().to_vec(),
            cwd: cmd.cwd.as_os_str().as_bytes().to_vec(),
            ..Default::default()
        };
        let mut shares: Vec<PathBuf> = Vec::new();
        for d in SYSTEM_DIRS {
            let host = Path::new("/").join(d);
            match std::fs::symlink_metadata(&host) {
                Ok(m) if m.file_type().is_symlink() => {
                    if let Ok(target) = std::fs::read_link(&host) {
                        request.symlinks.push((
                            host.as_os_str().as_bytes().to_vec(),
                            target.as_os_str().as_bytes().to_vec(),
                        ));
                    }
                }
                Ok(m) if m.is_dir() => shares.push(host),
                _ => {}
            }
        }
        let share_dir = |s: &PathBuf| -> Result<PathBuf> {
            let s =
                std::fs::canonicalize(s).map_err(Error::io(format!("share {}", s.display())))?;
            if !s.is_dir() {
                return Err(Error::Setup(format!(
                    "share {} is not a directory",
                    s.display()
                )));
            }
            Ok(s)
        };
        for s in &config.shares {
            let s = share_dir(s)?;
            if !shares.iter().any(|d| s.starts_with(d)) {
                shares.push(s);
            }
        }
        let mut writable = vec![false; shares.len()];
        for s in &config.shares_rw {
            shares.push(share_dir(s)?);
            writable.push(true);
        }
        let drop_to = unprivileged(accel.accel);
        // QEMU without root reads the shares as the unprivileged uid, which cannot pass a
        // private parent (a project under /root, glassbox's state under ~/.local): each of the
        // caller's shares is bound, in a mount namespace of QEMU's own, under a tmpfs at
        // SHARES_DIR, and QEMU serves it from there. The system folders need no bind.
        // A read-only share the uid could not use (mode 0700, another owner) gets an idmapped
        // tree, made now while glassbox is still root; it stays open until QEMU started.
        let mut trees: Vec<OwnedFd> = Vec::new();
        let mut binds: Vec<(CString, CString, Option<RawFd>)> = Vec::new();
        for (i, host) in shares.iter().enumerate() {
            let served = if let Some((uid, _)) = drop_to
                .as_ref()
                .filter(|_| !SYSTEM_DIRS.iter().any(|d| host == &Path::new("/").join(d)))
            {
                let at = PathBuf::from(format!("{SHARES_DIR}/{i}"));
                let private = if writable[i] {
                    None
                } else {
                    glassbox_sandbox::idmap::private_for(host, *uid, *uid)
                };
                let tree = match private {
                    Some(p) => {
                        let role = if host == &cmd.cwd {
                            glassbox_sandbox::idmap::Role::WorkingFolder
                        } else {
                            glassbox_sandbox::idmap::Role::ReadOnly
                        };
                        let t = glassbox_sandbox::idmap::idmapped_tree(&p, role, *uid, *uid)
                            .map_err(|e| Error::Setup(e.to_string()))?;
                        // Above the numbers the child's dup2 onto 3.. overwrites.
                        let t = high_fd(t)?;
                        let raw = t.as_raw_fd();
                        trees.push(t);
                        Some(raw)
                    }
                    None => None,
                };
                binds.push((
                    CString::new(host.as_os_str().as_bytes())
                        .map_err(|_| Error::Setup(format!("cannot share {}", host.display())))?,
                    CString::new(at.as_os_str().as_bytes()).expect("no NUL"),
                    tree,
                ));
                at
            } else {
                host.clone()
            };
            let path = served
                .to_str()
                .filter(|p| !p.contains(','))
                .ok_or_else(|| {
                    Error::Setup(format!(
                        "cannot share {} (QEMU options cannot hold it)",
                        host.display()
                    ))
                })?;
            let readonly = if writable[i] { "" } else { ",readonly=on" };
            args.push("-fsdev".into());
            args.push(format!("local,id=fs{i},path={path},security_model=none{readonly}").into());
            args.push("-device".into());
            args.push(format!("virtio-9p-device,fsdev=fs{i},mount_tag=gb{i}").into());
            let mount = (
                format!("gb{i}").into_bytes(),
                host.as_os_str().as_bytes().to_vec(),
            );
            if writable[i] {
                request.mounts_rw.push(mount);
            } else {
                request.mounts.push(mount);
            }
        }
        args.extend(config.extra_qemu_args.iter().map(OsString::from));
        request.argv = cmd.argv.iter().map(|a| a.as_bytes().to_vec()).collect();
        request.env = cmd
            .env
            .iter()
            .map(|(k, v)| {
                let mut e = k.as_bytes().to_vec();
                e.push(b'=');
                e.extend_from_slice(v.as_bytes());
                e
            })
            .collect();

        let raw: Vec<RawFd> = theirs.iter().map(|f| f.as_raw_fd()).collect();
        if !binds.is_empty() {
            std::fs::create_dir_all(SHARES_DIR)
                .map_err(Error::io(format!("cannot create {SHARES_DIR}")))?;
        }
        let shares_dir = CString::new(SHARES_DIR).expect("no NUL");
        let mut command = Command::new(&qemu);
        command
            .args(&args)
            .stdin(Stdio::null())
            .stdout(Stdio::null())
            .stderr(Stdio::piped());
        // SAFETY: the closure runs in the child between fork and exec and only makes
        // async-signal-safe calls (dup2, unshare, mount, mkdir, move_mount, raw set*id system
        // calls, prctl) on integers and on `groups`, `shares_dir` and `binds` (whose trees stay
        // open in this process until QEMU started), which live in the closure. The raw system
        // calls change the credentials of the calling thread only, which is the whole child
        // after fork.
        unsafe {
            command.pre_exec(move || {
                for (i, &fd) in raw.iter().enumerate() {
                    if libc::dup2(fd, 3 + i as RawFd) < 0 {
                        return Err(io::Error::last_os_error());
                    }
                }
                if !binds.is_empty() {
                    bind_shares(&shares_dir, &binds)?;
                }
                if let Some((id, groups)) = &drop_to {
                    let (id, n) = (*id as libc::c_long, groups.len() as libc::c_long);
                    if libc::syscall(libc::SYS_setgroups, n, groups.as_ptr()) != 0
                        || libc::syscall(libc::SYS_setresgid, id, id, id) != 0
                        || libc::syscall(libc::SYS_setresuid, id, id, id) != 0
                    {
                        return Err(io::Error::last_os_error());
                    }
                }
                // After the credentials change, which clears it.
                if libc::prctl(libc::PR_SET_PDEATHSIG, libc::SIGKILL) != 0 {
                    return Err(io::Error::last_os_error());
                }
                Ok(())
            });
        }
        let prepared = start.elapsed();
        let mut child = command
            .spawn()
            .map_err(Error::io(format!("cannot start {}", qemu.display())))?;
        drop((theirs, trees));
        let mut command_line = vec![qemu.into_os_string()];
        command_line.extend(args);

        let console = Arc::new(Mutex::new(Tail::default()));
        let log = match &config.console_log {
            Some(p) => Some(Arc::new(Mutex::new(
                std::fs::File::create(p)
                    .map_err(Error::io(format!("cannot create {}", p.display())))?,
            ))),
            None => None,
        };
        let mut readers = Vec::new();
        let con = ours.remove(0);
        let qemu_err = child.stderr.take();
        for src in [
            Some(Box::new(con) as Box<dyn Read + Send>),
            qemu_err.map(|e| Box::new(e) as Box<dyn Read + Send>),
        ]
        .into_iter()
        .flatten()
        {
            let tail = console.clone();
            let log = log.clone();
            readers.push(std::thread::spawn(move || {
                let mut src = src;
                let mut buf = [0u8; 4096];
                while let Ok(n) = src.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    if let Ok(mut t) = tail.lock() {
                        t.push(&buf[..n]);
                    }
                    if let Some(mut f) = log.as_ref().and_then(|l| l.lock().ok()) {
                        let _ = f.write_all(&buf[..n]);
                    }
                }
            }));
        }
        let mut it = ours.into_iter();
        // In agent::ports::ALL order.
        let (ctl, stdin, stdout, stderr, events, tcp) = (
            it.next().expect("a pair per port"),
            it.next(),
            it.next(),
            it.next(),
            it.next(),
            it.next(),
        );
        let mut vm = Vm {
            child: Some(child),
            ctl,
            ctl_buf: Vec::new(),
            stdin: stdin.map(StdinPort::new),
            stdout,
            stderr,
            events,
            tcp,
            net,
            console,
            readers,
            start,
            info: BootInfo {
                accel,
                kernel,
                initramfs,
                command_line,
                prepared,
                ready: Duration::ZERO,
                guest_uptime_at_ready: Duration::ZERO,
                guest_timings: String::new(),
                started: Duration::ZERO,
                guest_pid: 0,
            },
        };
        // The request waits in the socket until the agent opens its port.
        request
            .write(&mut vm.ctl)
            .map_err(Error::io("cannot send the request to the guest"))?;
        // The boot's bound is counted in guest time: a guest kept waiting for a CPU by a
        // loaded host is slow, not lost (see [`clock`]).
        let mut bound = clock::Bound::new(vm.qemu_pid(), config.boot_timeout);
        loop {
            let Some(wait) = bound.next_wait() else {
                vm.kill();
                return Err(Error::BootTimeout {
                    after: config.boot_timeout,
                    starved: bound.starved_note(),
                    console: vm.console_tail(),
                });
            };
            match vm.next_frame(wait) {
                Ok((proto::READY, p)) => {
                    vm.info.ready = start.elapsed();
                    let text = String::from_utf8_lossy(&p).into_owned();
                    let ms = text
                        .split_whitespace()
                        .find_map(|kv| kv.strip_prefix("uptime="))
                        .and_then(|v| v.parse().ok())
                        .unwrap_or(0);
                    vm.info.guest_uptime_at_ready = Duration::from_millis(ms);
                    vm.info.guest_timings = text;
                }
                Ok((proto::STARTED, p)) => {
                    vm.info.started = start.elapsed();
                    vm.info.guest_pid = String::from_utf8_lossy(&p).parse().unwrap_or(0);
                    return Ok(vm);
                }
                Ok((proto::FAILED, p)) => {
                    vm.kill();
                    return Err(Error::Agent(String::from_utf8_lossy(&p).into_owned()));
                }
                Ok((tag, _)) => {
                    vm.kill();
                    return Err(Error::Setup(format!(
                        "unexpected frame {:?} from the guest",
                        tag as char
                    )));
                }
                Err(FrameError::Timeout) => {}
                Err(FrameError::Ended(e)) => return Err(vm.died(e)),
            }
        }
    }

    /// The next frame of the control stream, waiting up to `wait` for more bytes. The bytes
    /// of a frame not yet whole are kept for the next call: a wait may end in a frame's
    /// middle.
    fn next_frame(&mut self, wait: Duration) -> Result<(u8, Vec<u8>), FrameError> {
        let mut chunk = [0u8; 4096];
        loop {
            match proto::take_frame(&mut self.ctl_buf) {
                Ok(Some(f)) => return Ok(f),
                Ok(None) => {}
                Err(e) => return Err(FrameError::Ended(Some(e))),
            }
            let _ = self
                .ctl
                .set_read_timeout(Some(wait.max(Duration::from_millis(1))));
            match self.ctl.read(&mut chunk) {
                Ok(0) if self.ctl_buf.is_empty() => return Err(FrameError::Ended(None)),
                Ok(0) => return Err(FrameError::Ended(Some(io::ErrorKind::UnexpectedEof.into()))),
                Ok(n) => self.ctl_buf.extend_from_slice(&chunk[..n]),
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                Err(e)
                    if matches!(
                        e.kind(),
                        io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
                    ) =>
                {
                    return Err(FrameError::Timeout)
                }
                Err(e) => return Err(FrameError::Ended(Some(e))),
            }
        }
    }

    /// QEMU went away (or the control stream broke): reap it and say what the console said.
    fn died(&mut self, e: Option<io::Error>) -> Error {
        let status = match self.child.as_mut() {
            Some(c) => {
                // The control stream ends when QEMU exits; give it a moment to be reaped.
                let until = Instant::now() + Duration::from_secs(2);
                loop {
                    match c.try_wait() {
                        Ok(Some(s)) => break s.to_string(),
                        Ok(None) if Instant::now() < until => {
                            std::thread::sleep(Duration::from_millis(20))
                        }
                        _ => break "still running; killed".to_string(),
                    }
                }
            }
            None => "already reaped".into(),
        };
        self.kill();
        let status = match e {
            Some(e) => format!("{status}; control stream: {e}"),
            None => status,
        };
        Error::Died {
            status,
            console: self.console_tail(),
        }
    }

    /// The last lines of the guest's console and QEMU's messages.
    pub fn console_tail(&self) -> String {
        // Let the readers catch up with what QEMU wrote just before it ended.
        std::thread::sleep(Duration::from_millis(50));
        let t = self.console.lock().map(|t| t.0.clone()).unwrap_or_default();
        let text = String::from_utf8_lossy(&t).replace('\r', "");
        let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
        lines[lines.len().saturating_sub(CONSOLE_TAIL_LINES)..].join("\n")
    }

    /// Waits for the command to end, at most `timeout` of guest time ([`clock`]) from now; a
    /// guest that does not report by then is killed and [`Error::Hung`] returned.
    pub fn wait(&mut self, timeout: Duration) -> Result<GuestExit> {
        // Counted in guest time, as the boot is.
        let mut bound = clock::Bound::new(self.qemu_pid(), timeout);
        loop {
            let Some(wait) = bound.next_wait() else {
                self.kill();
                return Err(Error::Hung {
                    after: timeout,
                    starved: bound.starved_note(),
                    console: self.console_tail(),
                });
            };
            match self.next_frame(wait) {
                Ok((proto::EXITED, p)) => {
                    let p = String::from_utf8_lossy(&p).into_owned();
                    let n = |s: &str| s.trim().parse::<i32>().unwrap_or(-1);
                    return match p.split_once(' ') {
                        Some(("code", c)) => Ok(GuestExit::Code(n(c))),
                        Some(("signal", s)) => Ok(GuestExit::Signal(n(s))),
                        _ => Err(Error::Setup(format!("unreadable exit report {p:?}"))),
                    };
                }
                Ok((proto::FAILED, p)) => {
                    self.kill();
                    return Err(Error::Agent(String::from_utf8_lossy(&p).into_owned()));
                }
                Ok(_) => {}
                Err(FrameError::Timeout) => {}
                Err(FrameError::Ended(e)) => return Err(self.died(e)),
            }
        }
    }

    /// Waits up to `timeout` for QEMU to end by itself (the agent powers off after reporting),
    /// then kills it. Whether it ended by itself.
    pub fn shutdown(&mut self, timeout: Duration) -> bool {
        let until = Instant::now() + timeout;
        let mut clean = false;
        if let Some(c) = self.child.as_mut() {
            loop {
                match c.try_wait() {
                    Ok(Some(_)) => {
                        clean = true;
                        break;
                    }
                    Ok(None) if Instant::now() < until => {
                        std::thread::sleep(Duration::from_millis(10))
                    }
                    _ => break,
                }
            }
        }
        self.kill();
        clean
    }

    /// Kills QEMU (and with it the guest) and reaps it.
    pub fn kill(&mut self) {
        if let Some(mut c) = self.child.take() {
            let _ = c.kill();
            let _ = c.wait();
        }
        for r in self.readers.drain(..) {
            let _ = r.join();
        }
    }

    /// QEMU's pid on the host, while it runs.
    pub fn qemu_pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Time since [`Vm::start`] was called.
    pub fn elapsed(&self) -> Duration {
        self.start.elapsed()
    }
}

impl Drop for Vm {
    fn drop(&mut self) {
        self.kill();
    }
}

enum FrameError {
    Timeout,
    Ended(Option<io::Error>),
}

/// What [`run`] collected.
#[derive(Debug)]
pub struct Output {
    /// How the command ended.
    pub exit: GuestExit,
    /// Its standard output.
    pub stdout: Vec<u8>,
    /// Its standard error.
    pub stderr: Vec<u8>,
    /// What it wrote to the events port.
    pub events: Vec<u8>,
    /// Boot facts and timings.
    pub info: BootInfo,
    /// From [`Vm::start`] to the first byte of standard output, if any came.
    pub first_output: Option<Duration>,
    /// From [`Vm::start`] to the exit report.
    pub exited: Duration,
    /// Whether QEMU ended by itself after the report (the guest powered off).
    pub powered_off: bool,
}

/// Boots a VM, runs `cmd` with `stdin` as its input, collects its output, and waits at most
/// `timeout` (after boot) for it to end.
pub fn run(
    config: &VmConfig,
    cmd: &GuestCommand,
    stdin: &[u8],
    timeout: Duration,
) -> Result<Output> {
    let mut vm = Vm::start(config, cmd)?;
    let start = vm.start;
    let collect = |s: Option<UnixStream>, first: bool| {
        std::thread::spawn(move || {
            let mut out = Vec::new();
            let mut first_at = None;
            if let Some(mut s) = s {
                let mut buf = [0u8; 16384];
                while let Ok(n) = s.read(&mut buf) {
                    if n == 0 {
                        break;
                    }
                    if first && first_at.is_none() {
                        first_at = Some(start.elapsed());
                    }
                    out.extend_from_slice(&buf[..n]);
                }
            }
            (out, first_at)
        })
    };
    let out = collect(vm.stdout.take(), true);
    let err = collect(vm.stderr.take(), false);
    let events = collect(vm.events.take(), false);
    if let Some(mut s) = vm.stdin.take() {
        let data = stdin.to_vec();
        std::thread::spawn(move || {
            let _ = s.write_all(&data);
            let _ = s.close();
        });
    }
    let exit = vm.wait(timeout);
    let exited = start.elapsed();
    let powered_off = exit.is_ok() && vm.shutdown(Duration::from_secs(10));
    vm.kill();
    // QEMU is gone: every stream has ended.
    let (stdout, first_output) = out.join().unwrap_or_default();
    let (stderr, _) = err.join().unwrap_or_default();
    let (events, _) = events.join().unwrap_or_default();
    Ok(Output {
        exit: exit?,
        stdout,
        stderr,
        events,
        info: vm.info.clone(),
        first_output,
        exited,
        powered_off,
    })
}
