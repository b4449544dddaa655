//! The guest agent: `/init` of the microVM (pid 1 of the guest kernel).
//!
//! 1. Mounts devtmpfs, proc and sysfs, loads the modules of the initramfs (`finit_module`, in
//!    file-name order: dependencies first), and waits for its virtio-serial ports.
//! 2. Says [`READY`](crate::proto::READY) on the control port and reads the request.
//! 3. Builds the guest's root: a tmpfs with the host's directories mounted read-only over 9p
//!    at their host paths (`/usr`, `/etc`, ...), the host's top-level symlinks (`/bin ->
//!    usr/bin`), fresh `/dev`, `/proc`, `/sys`, and everything else writable in memory; then
//!    switches to it (`MS_MOVE` onto `/`, `chroot`), the way `switch_root` does.
//!    It sets the hostname and brings up the loopback (and `eth0`, when the host gave the
//!    guest a network card).
//! 4. Runs the command with its standard streams relayed to and from the stdio ports, reaps
//!    every process (it is pid 1), reports the exit status, and powers the guest off.
//!
//! Anything that fails is reported on the control port ([`FAILED`](crate::proto::FAILED)) and
//! on the console, and the guest powers off: the host never waits on a guest that gave up.

use crate::proto::{self, Request};
use std::ffi::{CString, OsStr};
use std::fs::{self, File};
use std::io::{self, Read, Write};
use std::os::fd::{AsRawFd, FromRawFd};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::OpenOptionsExt;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// The virtio-serial port names (the host's `virtserialport,name=`).
pub mod ports {
    /// Requests in, status out.
    pub const CONTROL: &str = "glassbox.ctl";
    /// The command's standard input (host → guest).
    pub const STDIN: &str = "glassbox.stdin";
    /// The command's standard output (guest → host).
    pub const STDOUT: &str = "glassbox.stdout";
    /// The command's standard error (guest → host).
    pub const STDERR: &str = "glassbox.stderr";
    /// Free for the guest's recorder: `/dev/virtio-ports/glassbox.events` in the guest.
    pub const EVENTS: &str = "glassbox.events";
    /// Free for a TCP relay ([`crate::mux`]): `/dev/virtio-ports/glassbox.tcp` in the guest,
    /// served by the guest's glassbox when the host must reach a server on its loopback.
    pub const TCP: &str = "glassbox.tcp";
    /// All of them, in the order the host adds them.
    pub const ALL: [&str; 6] = [CONTROL, STDIN, STDOUT, STDERR, EVENTS, TCP];
}

/// Where the agent's own executable (the initramfs's `/init`) is in the guest's root, read-only:
/// a guest command can run the same build again (`glassbox trace` inside the guest).
pub const SELF_IN_GUEST: &str = "/run/glassbox/glassbox";

/// A writable directory (mode 1777) in the guest's memory that no share can cover: `TMPDIR`
/// for a guest command whose working directory is shared over the guest's `/tmp`.
pub const TMP_IN_GUEST: &str = "/run/glassbox/tmp";

/// How long the agent waits for its ports to appear after loading the modules.
const PORT_WAIT: Duration = Duration::from_secs(20);

/// How long the output relays may still run after the command exits (a daemon that keeps the
/// pipes open does not hold the exit report back longer).
const DRAIN: Duration = Duration::from_secs(2);

/// The agent's entry point; never returns inside a guest (it powers off).
pub fn main() -> i32 {
    // SAFETY: getpid has no preconditions.
    if unsafe { libc::getpid() } != 1 {
        eprintln!("glassbox vm-agent: this is the init of glassbox's microVM; it refuses to run as anything but pid 1 of a guest");
        return 2;
    }
    let mut ctl = None;
    if let Err(e) = run(&mut ctl) {
        let msg = format!("glassbox vm-agent: {e}");
        console(&msg);
        if let Some(c) = ctl.as_mut() {
            let _ = proto::write_frame(c, proto::FAILED, msg.as_bytes());
        }
    }
    power_off()
}

/// The guest's uptime in ms (`/proc/uptime`; the guest's clock, which under TCG runs behind
/// the host's wall clock).
fn uptime_ms() -> u64 {
    let uptime = fs::read_to_string("/proc/uptime").unwrap_or_default();
    uptime
        .split_whitespace()
        .next()
        .and_then(|s| s.parse::<f64>().ok())
        .map_or(0, |s| (s * 1000.0) as u64)
}

fn console(msg: &str) {
    // The kernel gave init /dev/console as its standard streams (the initramfs has the node).
    let _ = writeln!(io::stderr(), "{msg}");
}

/// Says on the guest's console how far the agent got: a guest lost before it reports is
/// killed with its console's last lines in the reason, so they name the step it stopped in.
fn step(what: &str) {
    say_on_console("agent", what);
}

/// Writes `glassbox WHO: WHAT` to the guest's console, in the kernel's log at a level a quiet
/// console prints, with the kernel's time: how the agent and the guest glassbox say their
/// steps.
pub fn say_on_console(who: &str, what: &str) {
    if let Ok(mut k) = fs::OpenOptions::new().write(true).open("/dev/kmsg") {
        let _ = k.write_all(format!("<3>glassbox {who}: {what}\n").as_bytes());
    }
}

fn power_off() -> ! {
    // SAFETY: sync and reboot take no pointers; pid 1 may power the machine off.
    unsafe {
        libc::sync();
        libc::reboot(libc::RB_POWER_OFF);
    }
    // reboot(2) returns only if it failed; pid 1 must not exit (the kernel would panic, which
    // ends the VM too with `panic=-1 -no-reboot`).
    loop {
        std::thread::sleep(Duration::from_secs(3600));
    }
}

fn err(what: impl Into<String>) -> impl FnOnce(io::Error) -> io::Error {
    let what = what.into();
    move |e| io::Error::new(e.kind(), format!("{what}: {e}"))
}

fn cstring(b: &[u8]) -> io::Result<CString> {
    CString::new(b).map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "NUL in a path"))
}

fn mount(
    src: &str,
    target: &[u8],
    fstype: &str,
    flags: libc::c_ulong,
    data: &str,
) -> io::Result<()> {
    let (s, t, f, d) = (
        cstring(src.as_bytes())?,
        cstring(target)?,
        cstring(fstype.as_bytes())?,
        cstring(data.as_bytes())?,
    );
    // SAFETY: all four are NUL-terminated strings that outlive the call.
    let ret = unsafe { libc::mount(s.as_ptr(), t.as_ptr(), f.as_ptr(), flags, d.as_ptr().cast()) };
    if ret != 0 {
        let e = io::Error::last_os_error();
        return Err(io::Error::new(
            e.kind(),
            format!(
                "mount {fstype} {src} on {}: {e}",
                String::from_utf8_lossy(target)
            ),
        ));
    }
    Ok(())
}

fn move_mount(from: &str, to: &str) -> io::Result<()> {
    let (f, t) = (cstring(from.as_bytes())?, cstring(to.as_bytes())?);
    // SAFETY: both are NUL-terminated strings; MS_MOVE ignores the type and data.
    let ret = unsafe {
        libc::mount(
            f.as_ptr(),
            t.as_ptr(),
            std::ptr::null(),
            libc::MS_MOVE,
            std::ptr::null(),
        )
    };
    if ret != 0 {
        return Err(err(format!("move mount {from} to {to}"))(
            io::Error::last_os_error(),
        ));
    }
    Ok(())
}

fn run(ctl_out: &mut Option<Port>) -> io::Result<()> {
    fs::create_dir_all("/dev")?;
    mount(
        "devtmpfs",
        b"/dev",
        "devtmpfs",
        libc::MS_NOSUID,
        "mode=0755",
    )?;
    mount(
        "proc",
        b"/proc",
        "proc",
        libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
        "",
    )?;
    mount(
        "sysfs",
        b"/sys",
        "sysfs",
        libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
        "",
    )?;
    let at_init = uptime_ms();
    step("loading the modules");
    load_modules(Path::new(crate::initramfs::MODULE_DIR))?;
    let at_modules = uptime_ms();
    step("waiting for the ports");
    let found = wait_for_ports()?;
    let port = |name: &str| -> io::Result<PathBuf> {
        found
            .iter()
            .find(|(n, _)| n == name)
            .map(|(_, dev)| dev.clone())
            .ok_or_else(|| io::Error::new(io::ErrorKind::NotFound, format!("no port {name}")))
    };
    let mut ctl = Port::open_rw(&port(ports::CONTROL)?).map_err(err("open the control port"))?;
    *ctl_out = Some(ctl.try_clone()?);
    let ready = format!("uptime={} init={at_init} modules={at_modules}", uptime_ms());
    proto::write_frame(&mut ctl, proto::READY, ready.as_bytes())?;
    step("ready; reading the request");
    let req = Request::read(&mut ctl).map_err(err("read the request"))?;
    step("mounting the shares");
    switch_root(&req)?;
    // The port devices moved with /dev; make the names udev would have made.
    let _ = fs::create_dir_all("/dev/virtio-ports");
    for (name, dev) in &found {
        let _ = std::os::unix::fs::symlink(dev, Path::new("/dev/virtio-ports").join(name));
    }
    if !req.hostname.is_empty() {
        // SAFETY: the pointer and length describe req.hostname, alive for the call.
        unsafe { libc::sethostname(req.hostname.as_ptr().cast(), req.hostname.len()) };
    }
    let _ = link_up("lo", 0);
    // The network card, when the host gave one: a bare wire to the host's network edge. No
    // address, no ARP, IPv6 off: the guest's kernel sends nothing of its own on it, so every
    // frame the host sees was forwarded from the sandbox (`glassbox_net::wire`).
    if Path::new("/sys/class/net/eth0").exists() {
        fs::write("/proc/sys/net/ipv6/conf/eth0/disable_ipv6", "1")
            .map_err(err("turn IPv6 off on eth0"))?;
        link_up("eth0", libc::IFF_NOARP).map_err(err("bring eth0 up"))?;
    }

    step("opening the command's ports");
    let stdin_port = Port::open_read(&port(ports::STDIN)?).map_err(err("open the stdin port"))?;
    let stdout_port =
        Port::open_write(&port(ports::STDOUT)?).map_err(err("open the stdout port"))?;
    let stderr_port =
        Port::open_write(&port(ports::STDERR)?).map_err(err("open the stderr port"))?;

    let Some(program) = req.argv.first() else {
        return Err(io::Error::new(io::ErrorKind::InvalidInput, "empty command"));
    };
    let mut cmd = Command::new(OsStr::from_bytes(program));
    cmd.arg0(OsStr::from_bytes(program))
        .args(req.argv[1..].iter().map(|a| OsStr::from_bytes(a)))
        .env_clear()
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    for e in &req.env {
        if let Some(i) = e.iter().position(|&b| b == b'=') {
            cmd.env(OsStr::from_bytes(&e[..i]), OsStr::from_bytes(&e[i + 1..]));
        }
    }
    if !req.cwd.is_empty() {
        cmd.current_dir(OsStr::from_bytes(&req.cwd));
    }
    let mut child = cmd.spawn().map_err(err(format!(
        "cannot run {}",
        String::from_utf8_lossy(program)
    )))?;
    let pid = child.id() as libc::pid_t;
    step(&format!("started the command (pid {pid})"));
    proto::write_frame(&mut ctl, proto::STARTED, pid.to_string().as_bytes())?;

    let child_stdin = child.stdin.take();
    std::thread::spawn(move || relay_in(stdin_port, child_stdin));
    let (done_tx, done_rx) = mpsc::channel();
    for (from, to) in [
        (
            child
                .stdout
                .take()
                .map(|s| Box::new(s) as Box<dyn Read + Send>),
            stdout_port,
        ),
        (
            child
                .stderr
                .take()
                .map(|s| Box::new(s) as Box<dyn Read + Send>),
            stderr_port,
        ),
    ] {
        let tx = done_tx.clone();
        std::thread::spawn(move || {
            if let Some(mut from) = from {
                copy(&mut from, &mut { to });
            }
            let _ = tx.send(());
        });
    }
    drop(child);
    let status = reap_until(pid);
    let deadline = Instant::now() + DRAIN;
    for _ in 0..2 {
        let left = deadline.saturating_duration_since(Instant::now());
        if done_rx.recv_timeout(left).is_err() {
            break;
        }
    }
    let report = if libc::WIFEXITED(status) {
        format!("code {}", libc::WEXITSTATUS(status))
    } else {
        format!("signal {}", libc::WTERMSIG(status))
    };
    proto::write_frame(&mut ctl, proto::EXITED, report.as_bytes())?;
    Ok(())
}

/// Reaps every child (pid 1 inherits orphans) until `pid` ends; its wait status.
fn reap_until(pid: libc::pid_t) -> libc::c_int {
    loop {
        let mut status = 0;
        // SAFETY: status is a valid out-pointer.
        let got = unsafe { libc::waitpid(-1, &mut status, 0) };
        if got == pid {
            return status;
        }
        if got < 0 && io::Error::last_os_error().raw_os_error() != Some(libc::EINTR) {
            // No children at all: the command is gone without a status we could read.
            return 127 << 8;
        }
    }
}

/// A guest's end of a virtio-serial port, read and written without relying on the port's
/// wake-ups. With two vCPUs, a blocking write to a port sometimes waits forever for room the
/// host has long made (a lost wake-up in the guest kernel's `wait_port_writable`; seen here on
/// the events port, and at github.com/lmb/vimto/issues/29, where older kernels lose reads'
/// wake-ups too). The descriptor is non-blocking; while the port is full (or empty) it is
/// polled with a timeout, and each poll, read or write looks at the buffers the host consumed
/// (or filled) whether or not the interrupt that says so arrived.
#[derive(Debug)]
pub struct Port(File);

/// How long a full (or empty) port is waited for before it is looked at again.
const PORT_RECHECK_MS: libc::c_int = 100;

impl Port {
    /// Opens the port `path` for writing.
    pub fn open_write(path: &Path) -> io::Result<Port> {
        Port::open(path, fs::OpenOptions::new().write(true))
    }

    /// Opens the port `path` for reading.
    pub fn open_read(path: &Path) -> io::Result<Port> {
        Port::open(path, fs::OpenOptions::new().read(true))
    }

    /// Opens the port `path` both ways (a virtio-serial port can be open only once).
    pub fn open_rw(path: &Path) -> io::Result<Port> {
        Port::open(path, fs::OpenOptions::new().read(true).write(true))
    }

    fn open(path: &Path, how: &mut fs::OpenOptions) -> io::Result<Port> {
        Ok(Port(how.custom_flags(libc::O_NONBLOCK).open(path)?))
    }

    /// Another handle on the same port (one thread reads while another writes).
    pub fn try_clone(&self) -> io::Result<Port> {
        Ok(Port(self.0.try_clone()?))
    }

    /// Runs `op` until it does not find the port full (or empty), polling for `events`
    /// between tries.
    fn retry<T>(
        &self,
        events: libc::c_short,
        mut op: impl FnMut(&File) -> io::Result<T>,
    ) -> io::Result<T> {
        loop {
            match op(&self.0) {
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    let mut pfd = libc::pollfd {
                        fd: self.0.as_raw_fd(),
                        events,
                        revents: 0,
                    };
                    // SAFETY: pfd is one valid pollfd for the duration of the call. Its
                    // count does not matter: the operation is tried again either way.
                    unsafe { libc::poll(&mut pfd, 1, PORT_RECHECK_MS) };
                    // The host closed its end: a write would find no room for good (and poll
                    // says so at once, so trying again would spin).
                    if pfd.revents & (libc::POLLHUP | libc::POLLERR) != 0
                        && pfd.revents & events == 0
                    {
                        return Err(io::Error::new(
                            io::ErrorKind::BrokenPipe,
                            "the host closed the port",
                        ));
                    }
                }
                Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
                r => return r,
            }
        }
    }
}

impl Read for Port {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        match self.retry(libc::POLLIN, |mut f| f.read(buf)) {
            // Nothing left and the host is gone: the end.
            Err(e) if e.kind() == io::ErrorKind::BrokenPipe => Ok(0),
            r => r,
        }
    }
}

impl Write for Port {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        self.retry(libc::POLLOUT, |mut f| f.write(buf))
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

fn copy(from: &mut dyn Read, to: &mut dyn Write) {
    let mut buf = vec![0u8; 64 * 1024];
    loop {
        match from.read(&mut buf) {
            Ok(0) => return,
            Ok(n) => {
                if to.write_all(&buf[..n]).is_err() {
                    return;
                }
            }
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return,
        }
    }
}

/// Host → command: until the host closes the port (read returns 0), then the command's stdin
/// closes too.
fn relay_in(mut port: Port, to: Option<std::process::ChildStdin>) {
    unframe_stdin(&mut port, to);
}

/// Host → command: the stdin port carries [`proto::STDIN_DATA`] frames and ends with
/// [`proto::STDIN_END`] (in-band: a port's close travels on the control queue, whose wake-up
/// a guest can lose as well). The command's stdin is closed at the end, at a port that
/// closes without it, or at a broken frame; once the command stops reading, the rest is
/// read and dropped, so the host is never held back.
fn unframe_stdin(port: &mut impl Read, to: Option<impl Write>) {
    let mut to = to;
    loop {
        match proto::read_frame(port) {
            Ok(Some((proto::STDIN_DATA, data))) => {
                if to.as_mut().is_some_and(|w| w.write_all(&data).is_err()) {
                    to = None;
                }
            }
            // The end, the port's close, or a frame we do not know: nothing more is stdin.
            _ => return,
        }
    }
}

fn load_modules(dir: &Path) -> io::Result<()> {
    let mut files: Vec<PathBuf> = match fs::read_dir(dir) {
        Ok(rd) => rd.flatten().map(|e| e.path()).collect(),
        Err(_) => return Ok(()), // built-in drivers: nothing to load
    };
    files.sort();
    for f in files {
        let file = File::open(&f).map_err(err(format!("open {}", f.display())))?;
        let params = c"";
        // SAFETY: file is an open descriptor and params a NUL-terminated string, both alive
        // for the call.
        let ret =
            unsafe { libc::syscall(libc::SYS_finit_module, file.as_raw_fd(), params.as_ptr(), 0) };
        if ret != 0 {
            let e = io::Error::last_os_error();
            if e.raw_os_error() != Some(libc::EEXIST) {
                return Err(err(format!("load module {}", f.display()))(e));
            }
        }
    }
    Ok(())
}

/// The virtio-serial ports by name, with their device nodes: the host announces them after
/// the driver binds, so they appear shortly after the module loads.
fn wait_for_ports() -> io::Result<Vec<(String, PathBuf)>> {
    let deadline = Instant::now() + PORT_WAIT;
    loop {
        let mut found = Vec::new();
        if let Ok(rd) = fs::read_dir("/sys/class/virtio-ports") {
            for e in rd.flatten() {
                let name = fs::read_to_string(e.path().join("name")).unwrap_or_default();
                let dev = Path::new("/dev").join(e.file_name());
                if !name.trim().is_empty() && dev.exists() {
                    found.push((name.trim().to_string(), dev));
                }
            }
        }
        if ports::ALL.iter().all(|p| found.iter().any(|(n, _)| n == p)) {
            return Ok(found);
        }
        if Instant::now() > deadline {
            return Err(io::Error::new(
                io::ErrorKind::TimedOut,
                format!(
                    "virtio-serial ports missing after {} s (found {found:?})",
                    PORT_WAIT.as_secs()
                ),
            ));
        }
        std::thread::sleep(Duration::from_millis(5));
    }
}

/// Mount options of the 9p shares: the tree is read-only, so the guest may cache freely.
const NINEP_OPTIONS: &str = "trans=virtio,version=9p2000.L,cache=loose,msize=262144";

fn switch_root(req: &Request) -> io::Result<()> {
    const NEW: &str = "/newroot";
    mount("tmpfs", NEW.as_bytes(), "tmpfs", 0, "mode=0755")?;
    let inside = |p: &[u8]| -> Vec<u8> {
        let mut v = NEW.as_bytes().to_vec();
        if !p.starts_with(b"/") {
            v.push(b'/');
        }
        v.extend_from_slice(p);
        v
    };
    for (path, target) in &req.symlinks {
        let at = inside(path);
        if let Some(parent) = Path::new(OsStr::from_bytes(&at)).parent() {
            fs::create_dir_all(parent)?;
        }
        std::os::unix::fs::symlink(OsStr::from_bytes(target), OsStr::from_bytes(&at))
            .map_err(err(format!("symlink {}", String::from_utf8_lossy(path))))?;
    }
    let ro = req.mounts.iter().map(|m| (m, libc::MS_RDONLY));
    for ((tag, path), flags) in ro.chain(req.mounts_rw.iter().map(|m| (m, 0))) {
        let at = inside(path);
        // A writable share inside a read-only one mounts on the folder the host has there.
        if !Path::new(OsStr::from_bytes(&at)).is_dir() {
            fs::create_dir_all(OsStr::from_bytes(&at))
                .map_err(err(format!("mkdir {}", String::from_utf8_lossy(path))))?;
        }
        let tag = String::from_utf8_lossy(tag);
        mount(&tag, &at, "9p", flags | libc::MS_NODEV, NINEP_OPTIONS)?;
    }
    for d in [
        "dev", "proc", "sys", "tmp", "run", "root", "var/tmp", "home",
    ] {
        let _ = fs::create_dir_all(Path::new(NEW).join(d));
    }
    for d in ["tmp", "var/tmp"] {
        let _ = fs::set_permissions(
            Path::new(NEW).join(d),
            std::os::unix::fs::PermissionsExt::from_mode(0o1777),
        );
    }
    // The agent itself, bound read-only into the new root before the switch (the initramfs
    // is unreachable afterwards).
    let me = inside(SELF_IN_GUEST.as_bytes());
    let me_path = Path::new(OsStr::from_bytes(&me));
    if let Some(parent) = me_path.parent() {
        fs::create_dir_all(parent)?;
    }
    File::create(me_path).map_err(err(format!("create {SELF_IN_GUEST}")))?;
    bind_read_only("/init", &me)?;
    let tmp = inside(TMP_IN_GUEST.as_bytes());
    fs::create_dir_all(OsStr::from_bytes(&tmp))?;
    fs::set_permissions(
        OsStr::from_bytes(&tmp),
        std::os::unix::fs::PermissionsExt::from_mode(0o1777),
    )?;
    move_mount("/dev", "/newroot/dev")?;
    move_mount("/proc", "/newroot/proc")?;
    move_mount("/sys", "/newroot/sys")?;
    std::env::set_current_dir(NEW)?;
    move_mount(".", "/")?;
    let dot = c".";
    // SAFETY: dot is a NUL-terminated string.
    if unsafe { libc::chroot(dot.as_ptr()) } != 0 {
        return Err(err("chroot")(io::Error::last_os_error()));
    }
    std::env::set_current_dir("/")?;
    let _ = fs::create_dir_all("/dev/shm");
    let _ = mount(
        "tmpfs",
        b"/dev/shm",
        "tmpfs",
        libc::MS_NOSUID | libc::MS_NODEV,
        "mode=1777",
    );
    // cgroup v2, for a sandbox in the guest that limits its processes.
    let _ = mount(
        "cgroup2",
        b"/sys/fs/cgroup",
        "cgroup2",
        libc::MS_NOSUID | libc::MS_NODEV | libc::MS_NOEXEC,
        "",
    );
    let _ = fs::create_dir_all("/dev/pts");
    let _ = mount(
        "devpts",
        b"/dev/pts",
        "devpts",
        libc::MS_NOSUID | libc::MS_NOEXEC,
        "ptmxmode=0666",
    );
    Ok(())
}

/// `mount --bind -o ro FROM TO`.
fn bind_read_only(from: &str, to: &[u8]) -> io::Result<()> {
    mount(from, to, "none", libc::MS_BIND, "")?;
    mount(
        "none",
        to,
        "none",
        libc::MS_BIND | libc::MS_REMOUNT | libc::MS_RDONLY,
        "",
    )
}

/// Brings interface `name` up, with `flags` besides.
fn link_up(name: &str, flags: libc::c_int) -> io::Result<()> {
    // SAFETY: plain integer arguments; the descriptor is owned right below.
    let fd = unsafe { libc::socket(libc::AF_INET, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: fd is a new descriptor nothing else owns.
    let sock = unsafe { File::from_raw_fd(fd) };
    // SAFETY: ifreq is plain data; all-zero is a valid value.
    let mut ifr: libc::ifreq = unsafe { std::mem::zeroed() };
    if name.len() >= ifr.ifr_name.len() {
        return Err(io::ErrorKind::InvalidInput.into());
    }
    for (d, s) in ifr.ifr_name.iter_mut().zip(name.bytes()) {
        *d = s as libc::c_char;
    }
    // SAFETY: ifr is a valid ifreq for SIOCGIFFLAGS/SIOCSIFFLAGS on an open socket.
    unsafe {
        if libc::ioctl(sock.as_raw_fd(), libc::SIOCGIFFLAGS, &mut ifr) < 0 {
            return Err(io::Error::last_os_error());
        }
        ifr.ifr_ifru.ifru_flags |= (libc::IFF_UP | flags) as libc::c_short;
        if libc::ioctl(sock.as_raw_fd(), libc::SIOCSIFFLAGS, &ifr) < 0 {
            return Err(io::Error::last_os_error());
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A FIFO in a fresh folder: a stand-in for a port (64 KiB of room, reads that find it
    /// empty get EAGAIN while a writer holds it open).
    fn fifo(name: &str) -> (PathBuf, PathBuf) {
        let dir = std::env::temp_dir().join(format!("glassbox-{name}-{}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        let fifo = dir.join("port");
        let c = CString::new(fifo.as_os_str().as_bytes()).unwrap();
        // SAFETY: c is a valid NUL-terminated path.
        assert_eq!(unsafe { libc::mkfifo(c.as_ptr(), 0o600) }, 0);
        (dir, fifo)
    }

    /// A full port makes the write wait and try again, not fail and not block for good:
    /// every byte arrives, in order, once the other end reads.
    #[test]
    fn a_port_waits_for_room_and_loses_nothing() {
        let (dir, fifo) = fifo("portwrite");
        let mut reader = fs::OpenOptions::new()
            .read(true)
            .custom_flags(libc::O_NONBLOCK)
            .open(&fifo)
            .unwrap();
        let mut w = Port::open_write(&fifo).unwrap();
        let data: Vec<u8> = (0..1_000_000u32).map(|i| (i % 251) as u8).collect();
        let sent = data.clone();
        let writer = std::thread::spawn(move || w.write_all(&sent));
        let mut got = Vec::new();
        let mut buf = [0u8; 8192];
        let deadline = Instant::now() + Duration::from_secs(30);
        while got.len() < data.len() && Instant::now() < deadline {
            match reader.read(&mut buf) {
                Ok(n) => got.extend_from_slice(&buf[..n]),
                Err(e) if e.kind() == io::ErrorKind::WouldBlock => {
                    std::thread::sleep(Duration::from_millis(2))
                }
                Err(e) => panic!("{e}"),
            }
        }
        writer.join().unwrap().unwrap();
        assert!(
            got == data,
            "{} of {} bytes, in order",
            got.len(),
            data.len()
        );
        let _ = fs::remove_dir_all(&dir);
    }

    /// An empty port makes the read wait and try again (not fail with EAGAIN): it returns
    /// what comes later, then the end once the other side closes.
    #[test]
    fn a_port_waits_for_data_then_sees_the_end() {
        let (dir, fifo) = fifo("portread");
        // Read-write: opening does not wait for a reader, and the FIFO has a writer at once.
        let mut w = fs::OpenOptions::new()
            .read(true)
            .write(true)
            .open(&fifo)
            .unwrap();
        let mut r = Port::open_read(&fifo).unwrap();
        let writer = std::thread::spawn(move || {
            std::thread::sleep(Duration::from_millis(300));
            w.write_all(b"late").unwrap();
            std::thread::sleep(Duration::from_millis(300));
        });
        let mut got = Vec::new();
        r.read_to_end(&mut got).unwrap();
        writer.join().unwrap();
        assert_eq!(got, b"late");
        let _ = fs::remove_dir_all(&dir);
    }

    /// The host's stdin writer and the agent's reader: what is written arrives whole, and
    /// the end arrives as a frame of its own.
    #[test]
    fn stdin_frames_carry_the_data_and_its_end() {
        let (host, mut guest) = std::os::unix::net::UnixStream::pair().unwrap();
        let mut port = crate::StdinPort::new(host);
        let big: Vec<u8> = (0..3 * proto::MAX_FRAME as u32 / 2)
            .map(|i| (i % 253) as u8)
            .collect();
        let sent = big.clone();
        let host = std::thread::spawn(move || {
            port.write_all(b"{\"request\":1}\n").unwrap();
            port.write_all(&sent).unwrap();
            drop(port);
        });
        let mut got = Vec::new();
        unframe_stdin(&mut guest, Some(&mut got));
        host.join().unwrap();
        let mut want = b"{\"request\":1}\n".to_vec();
        want.extend_from_slice(&big);
        assert!(got == want, "{} of {} bytes", got.len(), want.len());
    }

    /// The end is in-band: the command's stdin closes at the end frame even while the port
    /// stays open (its close is a control message a guest may never see), and what follows
    /// is not stdin. A command that stops reading does not stop the port being drained.
    #[test]
    fn stdin_ends_at_its_end_frame_not_at_the_ports_close() {
        let mut wire = Vec::new();
        proto::write_frame(&mut wire, proto::STDIN_DATA, b"one").unwrap();
        proto::write_frame(&mut wire, proto::STDIN_END, b"").unwrap();
        proto::write_frame(&mut wire, proto::STDIN_DATA, b"never").unwrap();
        let mut r = io::Cursor::new(wire.clone());
        let mut got = Vec::new();
        unframe_stdin(&mut r, Some(&mut got));
        assert_eq!(got, b"one");
        assert_eq!(r.position() as usize, wire.len() - 5 - b"never".len());

        /// A command that took one byte and closed its stdin.
        struct Closed(bool);
        impl Write for Closed {
            fn write(&mut self, _: &[u8]) -> io::Result<usize> {
                if std::mem::replace(&mut self.0, true) {
                    return Err(io::ErrorKind::BrokenPipe.into());
                }
                Ok(1)
            }
            fn flush(&mut self) -> io::Result<()> {
                Ok(())
            }
        }
        let mut wire = Vec::new();
        for _ in 0..3 {
            proto::write_frame(&mut wire, proto::STDIN_DATA, b"ab").unwrap();
        }
        proto::write_frame(&mut wire, proto::STDIN_END, b"").unwrap();
        let mut r = io::Cursor::new(wire.clone());
        unframe_stdin(&mut r, Some(Closed(false)));
        assert_eq!(r.position() as usize, wire.len(), "read to the end");
    }
}
