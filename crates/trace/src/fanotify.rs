//! Honeytoken ground truth: the kernel's own report of accesses to the planted files.
//!
//! A path read from the caller's memory is not proof of what the kernel opened: another thread
//! can rewrite it after the recorder read it. [`HoneytokenWatch`] puts fanotify inode marks on
//! the planted files themselves (and on the directories that hold them under home), so the
//! kernel reports every open, read and exec of those inodes with the opener's pid, whatever
//! path, hard link, `/proc/PID/fd` link, `openat` base or `io_uring` request led there.
//!
//! The same machinery serves one more use of fanotify, [`OpenGate`]: a permission mark that holds
//! the opens of one planted file until glassbox has written it (the RSA key, made only when
//! it is first opened). Both share the group's set-up, marks and event parsing here, the one
//! place glassbox speaks fanotify.
//!
//! # Why fanotify and not FUSE
//!
//! Measured by `cost_per_open_of_a_marked_file_and_an_unmarked_one` in
//! `tests/ground_truth.rs` (`open`+`close` of a file on tmpfs, best of 5 rounds of 50,000,
//! debug build, this project's 2-core virtual machine while builds loaded it; four runs):
//!
//! | | µs per open+close |
//! |---|---|
//! | no watch | 2.9-3.7 |
//! | an unmarked file, watch active | 3.0-3.4 (the same, within noise) |
//! | the marked file, a reader draining every event | 8.4-9.4 |
//! | the marked file, opens merging into a pending event | 4.4-5.9 |
//!
//! The reader spends about 5.7 µs per event (mostly the kernel opening a descriptor for it),
//! on the same two cores. Honeytokens are opened a handful of times per run, so the channel
//! costs the server nothing that matters. FUSE (not measured here) would also see lookups and
//! stats, but it makes every access below its mount point, not only the honeytokens', a round
//! trip to a userspace server (two context switches, what made stopping the caller cost 3.9x
//! to 5.4x in the recorder's benchmark, see the crate docs), and it needs a filesystem
//! implementation serving home. fanotify sees opens and reads of the marked inodes only, at no
//! measurable cost to other files, and needs no filesystem of ours.
//!
//! # What it sees, and what not
//!
//! - Seen: every open of a marked file, whatever the path (`FAN_OPEN`, also `O_WRONLY` ones),
//!   its execution (`FAN_OPEN_EXEC`), `read`-family calls on it (`read`, `pread`, `readv`,
//!   `sendfile`, `splice`, `copy_file_range`, `io_uring` reads: `FAN_ACCESS`), the close of a
//!   descriptor not opened for writing (`FAN_CLOSE_NOWRITE`); on a marked directory, its
//!   `opendir` and its listing (`getdents`).
//! - Not seen: `stat`, `access`, `readlink`, path lookups (no event exists for them), `O_PATH`
//!   opens (not notified), reads of a `mmap`ed file (page faults are not notified; its open
//!   is), opens of files in a marked directory other than the marked ones.
//! - Events of one process on one path that are still queued merge into one (their kinds are
//!   OR-ed): the channel says *that* a process opened or read a file, not how many times.
//! - fanotify has no timestamps: [`Access::t_ns`] is the time of [`HoneytokenWatch::drain`],
//!   an upper bound; poll [`HoneytokenWatch::fd`] to drain soon after an event.
//! - The pid is the thread group id in glassbox's pid namespace (the host's); map it with
//!   [`PidNamespace::pid_of`] while the process lives. Another host process touching the
//!   files (through `/proc/PID/root`) is reported too, with a pid outside the sandbox, but
//!   for the one [`HoneytokenWatch::ignore`] names (glassbox's own: the walk of what a run
//!   left).
//!
//! # Privileges
//!
//! Events carrying a descriptor and the pid of other processes need `CAP_SYS_ADMIN` in the
//! initial user namespace (root). Elsewhere [`HoneytokenWatch::new`] returns
//! [`HoneytokenError::Unavailable`], and the channel is to be reported as not observed.

use std::collections::HashMap;
use std::ffi::CString;
use std::io;
use std::os::fd::{AsFd, AsRawFd, BorrowedFd, FromRawFd, OwnedFd, RawFd};
use std::os::unix::ffi::OsStrExt;
use std::path::Path;

/// Events watched on a planted file.
const FILE_MASK: u64 =
    libc::FAN_OPEN | libc::FAN_ACCESS | libc::FAN_CLOSE_NOWRITE | libc::FAN_OPEN_EXEC;

/// Events watched on a directory holding planted files: `opendir`, listing, close.
const DIR_MASK: u64 = libc::FAN_OPEN | libc::FAN_ACCESS | libc::FAN_CLOSE_NOWRITE | libc::FAN_ONDIR;

/// The event kinds reported, in the order they happen to a descriptor.
const KINDS: [(u64, AccessKind); 4] = [
    (libc::FAN_OPEN, AccessKind::Open),
    (libc::FAN_OPEN_EXEC, AccessKind::OpenExec),
    (libc::FAN_ACCESS, AccessKind::Read),
    (libc::FAN_CLOSE_NOWRITE, AccessKind::CloseNoWrite),
];

/// Read errors in a row after which [`HoneytokenWatch::drain`] gives up until its next call.
const MAX_READ_ERRORS: usize = 64;

/// Why the honeytoken channel cannot be used.
#[derive(Debug, thiserror::Error)]
pub enum HoneytokenError {
    /// fanotify cannot be used here.
    #[error("the honeytoken channel (fanotify) is not available here: {0}")]
    Unavailable(String),
    /// A file or directory could not be marked.
    #[error("cannot watch {path}: {source}")]
    Watch {
        /// The host path.
        path: String,
        /// The error.
        source: io::Error,
    },
}

/// What happened to a watched file or directory.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum AccessKind {
    /// Opened (any mode); on a directory, `opendir`.
    Open,
    /// Read (`read`-family calls, not `mmap`); on a directory, listed.
    Read,
    /// A descriptor not opened for writing was closed.
    CloseNoWrite,
    /// Opened for execution (`execve`, `uselib`).
    OpenExec,
    /// Events were lost: the kernel's queue overflowed, or an event could not be read. The
    /// other fields say nothing then.
    Overflow,
}

impl AccessKind {
    /// A short name: `open`, `read`, `close-nowrite`, `open-exec`, `overflow`.
    pub fn as_str(self) -> &'static str {
        match self {
            AccessKind::Open => "open",
            AccessKind::Read => "read",
            AccessKind::CloseNoWrite => "close-nowrite",
            AccessKind::OpenExec => "open-exec",
            AccessKind::Overflow => "overflow",
        }
    }
}

/// One access to a watched file or directory, as the kernel reported it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Access {
    /// The process (thread group id) in glassbox's pid namespace; 0 for
    /// [`AccessKind::Overflow`].
    pub host_pid: i32,
    /// The watched path, as given to [`HoneytokenWatch::watch`] (empty for
    /// [`AccessKind::Overflow`]).
    pub sandbox_path: String,
    /// Whether the watched object is a directory.
    pub dir: bool,
    /// What happened.
    pub what: AccessKind,
    /// When the event was read (`now_ns` of [`HoneytokenWatch::drain`]).
    pub t_ns: u64,
}

#[derive(Debug)]
struct Mark {
    sandbox_path: String,
    dir: bool,
}

/// A fanotify group with inode marks on the planted files (see the [module](self) docs).
#[derive(Debug)]
pub struct HoneytokenWatch {
    fd: OwnedFd,
    /// Marked objects by (device, inode), as `fstat` of an event's descriptor gives them.
    marks: HashMap<(u64, u64), Mark>,
    /// A process whose accesses are not reported ([`HoneytokenWatch::ignore`]).
    ignored: Option<i32>,
}

impl HoneytokenWatch {
    /// Reports nothing of process `pid` (host pid namespace): glassbox's own reads of the
    /// planted files (the walk of what a run left, through the sandbox's descriptors) are not
    /// the server's.
    pub fn ignore(&mut self, pid: i32) {
        self.ignored = Some(pid);
    }

    /// A new fanotify group (non-blocking, close-on-exec), without marks.
    ///
    /// Needs `CAP_SYS_ADMIN` in the initial user namespace; without it the error says so.
    pub fn new() -> Result<HoneytokenWatch, HoneytokenError> {
        let fd = group(libc::FAN_CLASS_NOTIF, libc::O_RDONLY)?;
        Ok(HoneytokenWatch {
            fd,
            marks: HashMap::new(),
            ignored: None,
        })
    }

    /// Marks the file or directory at `host_path` (for a planted file:
    /// `/proc/<server_pid>/root/home/<user>/.ssh/id_rsa`, before the server executes), and
    /// reports its accesses as `sandbox_path`. A regular file is watched for opens, reads,
    /// closes and execution, a directory for `opendir`, listing and close; anything else (a
    /// symlink as the last component included) is refused. Marking an object already marked
    /// does nothing.
    ///
    /// The object is opened with `O_PATH` (which generates no event) and the mark is put
    /// through that descriptor, so the object marked is the one examined.
    pub fn watch(&mut self, host_path: &Path, sandbox_path: &str) -> Result<(), HoneytokenError> {
        let err = |source: io::Error| HoneytokenError::Watch {
            path: host_path.display().to_string(),
            source,
        };
        let c = CString::new(host_path.as_os_str().as_bytes())
            .map_err(|_| err(io::Error::from_raw_os_error(libc::EINVAL)))?;
        // SAFETY: c is a NUL-terminated path; the result is checked.
        let raw = unsafe {
            libc::open(
                c.as_ptr(),
                libc::O_PATH | libc::O_NOFOLLOW | libc::O_CLOEXEC,
            )
        };
        if raw < 0 {
            return Err(err(io::Error::last_os_error()));
        }
        // SAFETY: open returned a new descriptor that nothing else owns.
        let obj = unsafe { OwnedFd::from_raw_fd(raw) };
        let st = fstat(obj.as_raw_fd()).map_err(err)?;
        let dir = match st.st_mode & libc::S_IFMT {
            libc::S_IFREG => false,
            libc::S_IFDIR => true,
            _ => return Err(err(io::Error::other("not a regular file or a directory"))),
        };
        let key = (st.st_dev, st.st_ino);
        if self.marks.contains_key(&key) {
            return Ok(());
        }
        // fanotify_mark refuses an O_PATH descriptor as its object (EBADF): go through its
        // /proc link, which resolves to the very object opened.
        let link = CString::new(format!("/proc/self/fd/{}", obj.as_raw_fd()))
            .map_err(|_| err(io::Error::from_raw_os_error(libc::EINVAL)))?;
        let mask = if dir { DIR_MASK } else { FILE_MASK };
        mark(&self.fd, libc::FAN_MARK_INODE, mask, &link).map_err(err)?;
        self.marks.insert(
            key,
            Mark {
                sandbox_path: sandbox_path.to_string(),
                dir,
            },
        );
        Ok(())
    }

    /// Marks the planted file `sandbox_path` seen through `root` (`/proc/<server_pid>/root`),
    /// and each directory that holds it strictly below `home` (`~/.ssh`, `~/.aws`,
    /// `~/.config/gcloud` and `~/.config`...): home itself is listed too often to mean
    /// anything.
    pub fn watch_planted(
        &mut self,
        root: &Path,
        sandbox_path: &str,
        home: &str,
    ) -> Result<(), HoneytokenError> {
        let host = |p: &str| root.join(p.trim_start_matches('/'));
        self.watch(&host(sandbox_path), sandbox_path)?;
        let home = home.trim_end_matches('/');
        let mut dir = Path::new(sandbox_path).parent();
        while let Some(d) = dir {
            let Some(ds) = d.to_str() else { break };
            match ds.strip_prefix(home) {
                Some(rest) if rest.starts_with('/') && rest.len() > 1 => {
                    self.watch(&host(ds), ds)?;
                }
                _ => break,
            }
            dir = d.parent();
        }
        Ok(())
    }

    /// The group's descriptor, readable when events are pending (for `poll`).
    pub fn fd(&self) -> BorrowedFd<'_> {
        self.fd.as_fd()
    }

    /// Reads every pending event, calling `f` once per kind of access in it (open first),
    /// stamped `now_ns`; a lost event or an overflowed queue is reported as
    /// [`AccessKind::Overflow`]. Returns the number of events read.
    pub fn drain(&mut self, now_ns: u64, f: &mut dyn FnMut(Access)) -> usize {
        #[repr(C, align(8))]
        struct Buf([u8; 4096]);
        let mut buf = Buf([0; 4096]);
        let mut events = 0;
        let mut errors = 0;
        loop {
            // SAFETY: buf is a writable buffer of the length passed.
            let n =
                unsafe { libc::read(self.fd.as_raw_fd(), buf.0.as_mut_ptr().cast(), buf.0.len()) };
            if n < 0 {
                match io::Error::last_os_error().raw_os_error() {
                    Some(libc::EAGAIN) => break,
                    Some(libc::EINTR) => continue,
                    // The kernel could not open a descriptor for an event (EMFILE, ENFILE...):
                    // that event is gone.
                    _ => {
                        f(overflow(now_ns));
                        errors += 1;
                        if errors >= MAX_READ_ERRORS {
                            break;
                        }
                        continue;
                    }
                }
            }
            if n == 0 {
                break;
            }
            errors = 0;
            events += self.parse(&buf.0[..n as usize], now_ns, f);
        }
        events
    }

    /// Handles the events in `buf` (one `read`), closing their descriptors.
    fn parse(&self, buf: &[u8], now_ns: u64, f: &mut dyn FnMut(Access)) -> usize {
        each_event(buf, |m, fd| {
            if m.vers != libc::FANOTIFY_METADATA_VERSION {
                return;
            }
            if m.mask & libc::FAN_Q_OVERFLOW != 0 {
                f(overflow(now_ns));
                return;
            }
            let Some(fd) = fd else { return };
            if self.ignored == Some(m.pid) {
                return;
            }
            let Ok(st) = fstat(fd.as_raw_fd()) else {
                return;
            };
            drop(fd);
            let Some(mark) = self.marks.get(&(st.st_dev, st.st_ino)) else {
                return;
            };
            for (bit, what) in KINDS {
                if m.mask & bit != 0 {
                    f(Access {
                        host_pid: m.pid,
                        sandbox_path: mark.sandbox_path.clone(),
                        dir: mark.dir,
                        what,
                        t_ns: now_ns,
                    });
                }
            }
        })
    }
}

/// A new fanotify group of `class` (non-blocking, close-on-exec), whose events' descriptors
/// are opened with `open_flags`; an error that says what is missing.
fn group(class: libc::c_uint, open_flags: libc::c_int) -> Result<OwnedFd, HoneytokenError> {
    let flags = class | libc::FAN_CLOEXEC | libc::FAN_NONBLOCK;
    let event_flags = (open_flags | libc::O_LARGEFILE) as libc::c_uint;
    // SAFETY: plain system call with flag arguments; the result is checked.
    let fd = unsafe { libc::fanotify_init(flags, event_flags) };
    if fd < 0 {
        let e = io::Error::last_os_error();
        let why = match e.raw_os_error() {
            Some(libc::EPERM) => format!(
                "it needs CAP_SYS_ADMIN in the initial user namespace (run glassbox as root) ({e})"
            ),
            Some(libc::ENOSYS) => format!("this kernel has no fanotify (CONFIG_FANOTIFY) ({e})"),
            Some(libc::EINVAL) if class == libc::FAN_CLASS_CONTENT => format!(
                "this kernel has no fanotify permission events (CONFIG_FANOTIFY_ACCESS_PERMISSIONS) ({e})"
            ),
            _ => format!("fanotify_init failed: {e}"),
        };
        return Err(HoneytokenError::Unavailable(why));
    }
    // SAFETY: fanotify_init returned a new descriptor that nothing else owns.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Hands each event in `buf` (what one `read` of a group gave) to `f`, with its descriptor
/// (closed when `f` drops it); returns how many there were.
fn each_event(
    buf: &[u8],
    mut f: impl FnMut(&libc::fanotify_event_metadata, Option<OwnedFd>),
) -> usize {
    let size = std::mem::size_of::<libc::fanotify_event_metadata>();
    let mut off = 0;
    let mut events = 0;
    while off + size <= buf.len() {
        // SAFETY: `size` bytes from `off` are in buf; read_unaligned copies them into a
        // plain C struct valid for any bit pattern.
        let m: libc::fanotify_event_metadata =
            unsafe { std::ptr::read_unaligned(buf.as_ptr().add(off).cast()) };
        let len = m.event_len as usize;
        if len < size || off + len > buf.len() {
            break;
        }
        off += len;
        events += 1;
        let fd = (m.fd >= 0).then(|| {
            // SAFETY: the kernel installed this descriptor for us alone; it is closed when
            // dropped.
            unsafe { OwnedFd::from_raw_fd(m.fd) }
        });
        f(&m, fd);
    }
    events
}

/// Puts a fanotify mark of `mask` on the object at `path` (`how`: `FAN_MARK_INODE` or none).
fn mark(group: &OwnedFd, how: libc::c_uint, mask: u64, path: &CString) -> io::Result<()> {
    // SAFETY: group is a fanotify group; path is a NUL-terminated path; the result is
    // checked.
    let r = unsafe {
        libc::fanotify_mark(
            group.as_raw_fd(),
            libc::FAN_MARK_ADD | how,
            mask,
            libc::AT_FDCWD,
            path.as_ptr(),
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

/// Holds every open of one file until a callback has run on it (a fanotify permission mark,
/// `FAN_OPEN_PERM`): what the planted RSA key needs to be made only when it is first opened
/// (`glassbox_audit`'s `lazykey.rs`). The callback gets the file through the event's own
/// descriptor (opened read-write; a write through it raises no event), then the open goes on.
/// Dropping the gate lets any open still held go on (the kernel allows it when the group
/// closes).
#[derive(Debug)]
pub struct OpenGate {
    stop: std::sync::Arc<std::sync::atomic::AtomicBool>,
    thread: Option<std::thread::JoinHandle<()>>,
}

impl OpenGate {
    /// Whether this host lets glassbox hold an open (a permission mark needs
    /// `CAP_SYS_ADMIN` in the initial user namespace, and a kernel with permission events).
    pub fn available() -> bool {
        group(libc::FAN_CLASS_CONTENT, libc::O_RDWR).is_ok()
    }

    /// Marks the file at `host_path` (a planted file seen through `/proc/PID/root`) and serves
    /// its opens on a thread of its own, calling `on_open` for each before letting it go on.
    pub fn start(
        host_path: &Path,
        mut on_open: impl FnMut(&std::fs::File) + Send + 'static,
    ) -> Result<OpenGate, HoneytokenError> {
        let group = group(libc::FAN_CLASS_CONTENT, libc::O_RDWR)?;
        let err = |source: io::Error| HoneytokenError::Watch {
            path: host_path.display().to_string(),
            source,
        };
        let c = CString::new(host_path.as_os_str().as_bytes())
            .map_err(|_| err(io::Error::from_raw_os_error(libc::EINVAL)))?;
        mark(&group, 0, libc::FAN_OPEN_PERM, &c).map_err(err)?;
        let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
        let stop2 = stop.clone();
        let thread = std::thread::Builder::new()
            .name("open-gate".into())
            .spawn(move || serve_gate(&group, &mut on_open, &stop2))
            .map_err(err)?;
        Ok(OpenGate {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for OpenGate {
    fn drop(&mut self) {
        self.stop.store(true, std::sync::atomic::Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

/// The gate's thread: every 50 ms it looks whether it is to stop, else answers each held open
/// once `on_open` ran.
fn serve_gate(
    group: &OwnedFd,
    on_open: &mut dyn FnMut(&std::fs::File),
    stop: &std::sync::atomic::AtomicBool,
) {
    #[repr(C, align(8))]
    struct Buf([u8; 4096]);
    let mut buf = Buf([0; 4096]);
    while !stop.load(std::sync::atomic::Ordering::Relaxed) {
        let mut pfd = libc::pollfd {
            fd: group.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        if unsafe { libc::poll(&mut pfd, 1, 50) } <= 0 {
            continue;
        }
        // SAFETY: buf is writable for its length.
        let n = unsafe { libc::read(group.as_raw_fd(), buf.0.as_mut_ptr().cast(), buf.0.len()) };
        if n <= 0 {
            continue;
        }
        each_event(&buf.0[..n as usize], |m, fd| {
            let Some(fd) = fd else { return };
            if m.mask & libc::FAN_OPEN_PERM == 0 {
                return;
            }
            let raw = fd.as_raw_fd();
            let file = std::fs::File::from(fd);
            on_open(&file);
            let resp = libc::fanotify_response {
                fd: raw,
                response: libc::FAN_ALLOW,
            };
            // SAFETY: a response for an event of this group (its descriptor is still open:
            // `file` is dropped after), of its exact size.
            unsafe {
                libc::write(
                    group.as_raw_fd(),
                    (&resp as *const libc::fanotify_response).cast(),
                    std::mem::size_of::<libc::fanotify_response>(),
                )
            };
            drop(file);
        });
    }
}

fn overflow(t_ns: u64) -> Access {
    Access {
        host_pid: 0,
        sandbox_path: String::new(),
        dir: false,
        what: AccessKind::Overflow,
        t_ns,
    }
}

fn fstat(fd: RawFd) -> io::Result<libc::stat> {
    // SAFETY: an all-zero stat is a valid value of this plain C struct.
    let mut st: libc::stat = unsafe { std::mem::zeroed() };
    // SAFETY: st is a valid out-pointer; fd is a descriptor the caller holds.
    if unsafe { libc::fstat(fd, &mut st) } < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(st)
}

/// A pid namespace (the sandbox's), for mapping the host pids of [`Access`]es.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct PidNamespace {
    dev: u64,
    ino: u64,
}

impl PidNamespace {
    /// The pid namespace of host process `host_pid` (the server's is the sandbox's; take it
    /// before the server exits).
    pub fn of(host_pid: i32) -> io::Result<PidNamespace> {
        let md = std::fs::metadata(format!("/proc/{host_pid}/ns/pid"))?;
        use std::os::unix::fs::MetadataExt;
        Ok(PidNamespace {
            dev: md.dev(),
            ino: md.ino(),
        })
    }

    /// The pid that host process `host_pid` has in this namespace (the last `NSpid` field of
    /// its `/proc/PID/status`); `None` when it is not in this namespace (a host process) or
    /// is gone. Both are read through one `/proc/PID` descriptor, so a recycled pid is not
    /// mistaken for the process.
    pub fn pid_of(&self, host_pid: i32) -> Option<i32> {
        let dir = CString::new(format!("/proc/{host_pid}")).ok()?;
        // SAFETY: dir is a NUL-terminated path; the result is checked.
        let raw = unsafe { libc::open(dir.as_ptr(), libc::O_DIRECTORY | libc::O_CLOEXEC) };
        if raw < 0 {
            return None;
        }
        // SAFETY: open returned a new descriptor that nothing else owns.
        let dir = unsafe { OwnedFd::from_raw_fd(raw) };
        // SAFETY: an all-zero stat is a valid value of this plain C struct.
        let mut st: libc::stat = unsafe { std::mem::zeroed() };
        // SAFETY: dir is an open directory; the name is NUL-terminated; st is a valid
        // out-pointer.
        let r = unsafe { libc::fstatat(dir.as_raw_fd(), c"ns/pid".as_ptr(), &mut st, 0) };
        if r < 0 || (st.st_dev, st.st_ino) != (self.dev, self.ino) {
            return None;
        }
        // SAFETY: as above; the result is checked.
        let raw = unsafe {
            libc::openat(
                dir.as_raw_fd(),
                c"status".as_ptr(),
                libc::O_RDONLY | libc::O_CLOEXEC,
            )
        };
        if raw < 0 {
            return None;
        }
        // SAFETY: openat returned a new descriptor that nothing else owns.
        let status = std::fs::File::from(unsafe { OwnedFd::from_raw_fd(raw) });
        let text = std::io::read_to_string(status).ok()?;
        text.lines()
            .find_map(|l| l.strip_prefix("NSpid:"))?
            .split_whitespace()
            .last()?
            .parse()
            .ok()
    }
}
