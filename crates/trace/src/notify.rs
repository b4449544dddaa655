//! The recorder loop: seccomp user notifications, and the eBPF file channel when attached.

use crate::decode::{decode, file_event, syscall_names, Decoded};
use crate::ebpf::{self, Rec};
use crate::fanotify::{AccessKind, HoneytokenWatch, PidNamespace};
use crate::procinfo::{absolute_or, proc_link, Pids};
use crate::Clock;
use glassbox_model::{Event, EventKind};
use glassbox_sandbox::seccomp::refusal;
use std::os::fd::{AsRawFd, OwnedFd};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct SeccompData {
    nr: i32,
    arch: u32,
    ip: u64,
    args: [u64; 6],
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct SeccompNotif {
    id: u64,
    pid: u32,
    flags: u32,
    data: SeccompData,
}

#[repr(C)]
#[derive(Clone, Copy, Default)]
struct SeccompNotifResp {
    id: u64,
    val: i64,
    error: i32,
    flags: u32,
}

// _IOWR('!', 0, struct seccomp_notif) and friends (linux/seccomp.h).
const IOCTL_NOTIF_RECV: libc::c_ulong = 0xc050_2100;
const IOCTL_NOTIF_SEND: libc::c_ulong = 0xc018_2101;
const IOCTL_NOTIF_ID_VALID: libc::c_ulong = 0x4008_2102;
const IOCTL_NOTIF_SET_FLAGS: libc::c_ulong = 0x4008_2104;
const USER_NOTIF_FD_SYNC_WAKE_UP: u64 = 1;
const USER_NOTIF_FLAG_CONTINUE: u32 = 1;

/// Ring buffer records handled before the listener is looked at again.
const RING_BATCH: usize = 4096;

/// How often the ring buffer is drained (the programs do not wake the recorder), in ms.
const RING_PERIOD_MS: i32 = 5;

/// Counters of one recording; a microVM guest sends them to the host as they are
/// (`glassbox_vm::wire::Record::Finished`).
#[derive(Clone, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct RecorderStats {
    /// How calls were observed.
    pub mechanism: String,
    /// Notifications handled.
    pub notifications: u64,
    /// Records read from the eBPF channel.
    pub records: u64,
    /// Events emitted.
    pub events: u64,
    /// Calls that could not be recorded: arguments unreadable while their caller waited,
    /// records the kernel could not queue or whose path it could not read, and overflows of
    /// the planted secrets' kernel channel. (A call whose notification went stale, its
    /// caller dead or interrupted, is not one: it either did nothing or was notified again.)
    pub lost: u64,
    /// `lost` by why, each with its count (see [`RecorderStats::lose`]).
    #[serde(default)]
    pub lost_why: Vec<(String, u64)>,
    /// Of `lost`, records of the open and stat families the eBPF channel lost (its ring was
    /// full, a path it could not read, a record it could not decode): only what reads those
    /// families is blind to them.
    #[serde(default)]
    pub lost_files: u64,
    /// The recorded system calls.
    pub syscalls: Vec<String>,
    /// Why the recorder stopped before every process under the filter was gone, if it did.
    pub failure: Option<String>,
}

impl RecorderStats {
    /// Counts `n` lost for `why`.
    pub fn lose(&mut self, why: &str, n: u64) {
        if n == 0 {
            return;
        }
        self.lost += n;
        if why::of_file_channel(why) {
            self.lost_files += n;
        }
        match self.lost_why.iter_mut().find(|(w, _)| w == why) {
            Some((_, c)) => *c += n,
            None => self.lost_why.push((why.to_string(), n)),
        }
    }
}

/// Why calls were lost, in the words of the report.
pub(crate) mod why {
    pub const OVERFLOW: &str = "overflows of the kernel's report of planted-secret accesses";
    pub const NO_PATH: &str = "open and stat calls whose path the kernel channel could not read";
    pub const UNDECODED: &str = "records of the kernel channel that could not be decoded";
    pub const RING_FULL: &str = "records the kernel could not queue (its ring buffer was full)";
    pub const UNREADABLE: &str =
        "calls whose arguments could not be read while their caller waited";

    /// Whether `why` is a loss of the eBPF channel, which records the open and stat families
    /// only.
    pub fn of_file_channel(why: &str) -> bool {
        [NO_PATH, UNDECODED, RING_FULL]
            .iter()
            .any(|w| why.starts_with(w))
    }
}

/// The asynchronous eBPF channel for the open and stat families (see [`crate::ebpf`]).
#[derive(Debug)]
pub struct FileChannel(ebpf::Channel);

impl FileChannel {
    /// Attaches to the pid namespace of host process `pid` (the sandboxed server, before it
    /// executes).
    pub fn attach(pid: i32) -> std::io::Result<FileChannel> {
        Self::attach_with_ring(pid, ebpf::RING_SIZE)
    }

    /// [`FileChannel::attach`] with a ring buffer of `bytes` (a power of two from a page to
    /// the default, 16 MiB). Smaller loses records a busy server makes between two drains,
    /// and every record larger than it (a long path): what the selftest's control of lost
    /// records needs; no audit wants it.
    pub fn attach_with_ring(pid: i32, bytes: usize) -> std::io::Result<FileChannel> {
        ebpf::attach_to(pid, bytes).map(FileChannel)
    }
}

/// Serves a seccomp listener (and a [`FileChannel`]) and turns what they report into
/// [`Event`]s.
#[derive(Debug)]
pub struct Recorder {
    listener: OwnedFd,
    home: Vec<u8>,
    clock: Arc<Clock>,
    files: Option<FileChannel>,
    honeytokens: Option<(HoneytokenWatch, PidNamespace)>,
}

/// Where the recorder puts events.
pub trait Sink {
    /// One event.
    fn event(&mut self, e: Event);
    /// The recorder has nothing pending: make what was written durable.
    fn idle(&mut self);
}

struct State<'a> {
    home: &'a [u8],
    clock: &'a Clock,
    pids: Pids,
    next_id: u64,
    stats: RecorderStats,
    /// Execs waiting for the kernel to say what now runs.
    images: Vec<PendingImage>,
}

/// An exec the recorder let go, waiting for its image to be confirmed from `/proc/PID/exe`.
struct PendingImage {
    tgid: u32,
    ids: (i32, i32),
    /// The image before the exec (still the same: the exec is not through, or it failed).
    before: Option<Vec<u8>>,
    /// What the exec's path resolved to when the call was made.
    shown: Vec<u8>,
    due_ns: u64,
    tries: u8,
}

/// How often, and how many times, an exec's image is looked at before the exec is taken to
/// have failed (the image never changed).
const IMAGE_RETRY_NS: u64 = 2_000_000;
const IMAGE_TRIES: u8 = 25;

impl State<'_> {
    /// Emits the kernel's view of every exec that is through: the image `/proc/PID/exe` names
    /// once it differs from the one before. An exec whose process is gone, or whose image
    /// never changed (it failed, or re-ran the same program), is dropped.
    fn confirm_images(&mut self, sink: &mut dyn Sink) {
        if self.images.is_empty() {
            return;
        }
        let now = self.clock.now_ns();
        let mut keep = Vec::new();
        for mut p in std::mem::take(&mut self.images) {
            if now < p.due_ns {
                keep.push(p);
                continue;
            }
            let Some(image) = proc_link(p.tgid, "exe") else {
                continue;
            };
            if Some(&image) == p.before.as_ref() {
                if p.tries < IMAGE_TRIES {
                    p.tries += 1;
                    p.due_ns = now + IMAGE_RETRY_NS;
                    keep.push(p);
                }
                continue;
            }
            self.emit(
                sink,
                now,
                true,
                p.ids,
                EventKind::Image {
                    path: glassbox_model::Bytes(image),
                    shown: glassbox_model::Bytes(p.shown),
                },
            );
        }
        self.images = keep;
    }

    /// Records what the honeytoken watch reports: each access with the accessing process's
    /// pid in the sandbox (0 when it was gone before this read), lost events as `overflow`.
    fn ground_truth(&mut self, sink: &mut dyn Sink, h: &mut (HoneytokenWatch, PidNamespace)) {
        let (watch, ns) = h;
        let now = self.clock.now_ns();
        let mut got = Vec::new();
        watch.drain(now, &mut |a| got.push(a));
        for a in got {
            let pid = ns.pid_of(a.host_pid).unwrap_or(0);
            if a.what == AccessKind::Overflow {
                self.stats.lose(why::OVERFLOW, 1);
            }
            self.emit(
                sink,
                a.t_ns,
                true,
                (pid, 0),
                EventKind::Honeytoken {
                    path: glassbox_model::Bytes::from(a.sandbox_path.as_str()),
                    access: a.what.as_str().to_string(),
                    dir: a.dir,
                },
            );
        }
    }

    fn emit(
        &mut self,
        sink: &mut dyn Sink,
        t_ns: u64,
        phase_now: bool,
        pid: (i32, i32),
        kind: EventKind,
    ) {
        let phase = if phase_now {
            self.clock.phase()
        } else {
            self.clock.phase_at(t_ns)
        };
        self.stats.events += 1;
        sink.event(Event {
            id: self.next_id,
            t_ns,
            pid: pid.0,
            ppid: pid.1,
            phase,
            kind,
        });
        self.next_id += 1;
    }

    /// Reads up to `max` records of the eBPF channel; a record that does not decode is lost.
    fn drain(&mut self, sink: &mut dyn Sink, files: &mut FileChannel, max: usize) -> usize {
        files.0.ring.drain(max, &mut |b| match ebpf::decode(b) {
            Some(rec) => self.record(sink, rec),
            None => self.stats.lose(why::UNDECODED, 1),
        })
    }

    /// A completed call reported by the eBPF channel.
    fn record(&mut self, sink: &mut dyn Sink, mut rec: Rec) {
        self.stats.records += 1;
        let path = match rec.path.take() {
            Some(path) => path,
            // A path the program could not read from a call that failed with EFAULT: the
            // kernel could not read it either, and the call did nothing.
            None if rec.result == -i64::from(libc::EFAULT) => return,
            None => match reread_path(&rec) {
                Ok(path) => path,
                Err(reread) => {
                    // The first one named (what call, whose, why it could not be read again):
                    // what a reviewer, and whoever fixes the recorder, need to know.
                    let why = match self
                        .stats
                        .lost_why
                        .iter()
                        .any(|(w, _)| w.starts_with(why::NO_PATH))
                    {
                        true => why::NO_PATH.to_string(),
                        false => lost_path(&rec, &reread),
                    };
                    self.stats.lose(&why, 1);
                    return;
                }
            },
        };
        let is_stat = !matches!(
            rec.nr,
            libc::SYS_open | libc::SYS_openat | libc::SYS_openat2 | libc::SYS_creat
        );
        // Stats are recorded under home only: drop the others before any lookup.
        if is_stat && path.first() == Some(&b'/') && !path.starts_with(self.home) {
            return;
        }
        let ids = self.pids.lookup_known(rec.host_tid, rec.ns_tgid);
        // Borrowed: only a relative path of a process gone by now needs it.
        let fallback = self.pids.exec_cwd(ids.0);
        let decoded = file_event(
            rec.nr,
            &rec.args,
            &path,
            rec.openat2_flags,
            Some(rec.result),
            self.home,
            |dirfd, raw| absolute_or(rec.host_tid, dirfd, raw, fallback),
        );
        if let Decoded::Event(kind) = decoded {
            let t = self.clock.since_start(rec.ktime);
            self.emit(sink, t, false, ids, kind);
        }
    }
}

/// The path of a completed call whose page the eBPF program could not read at the call's
/// return: its program cannot fault a page in, and a page the kernel read during the call can
/// be out of the caller's page tables again by then (measured in the microVM's guest, about
/// once in three runs of its suite: a successful `openat` of a Python server, whose page was
/// reclaimed or moved under memory pressure). Read again from the caller's memory, which
/// faults it in, while the caller lives (its thread, or else its process): a process does not
/// end or replace its image before the channel's records are read (`exit_group` and the execs
/// wait for it, [`Recorder::notification`]). What the caller wrote there after the call is
/// what this reads: the same race as the program's own read at the return (the path is read
/// after the kernel's copy either way), only longer (at most a drain period). A page it made
/// unreadable or an empty string leave the call lost.
fn reread_path(rec: &Rec) -> Result<Vec<u8>, String> {
    let arg = if ebpf::PATH_ARG0.contains(&rec.nr) {
        0
    } else if ebpf::PATH_ARG1.contains(&rec.nr) {
        1
    } else {
        return Err("not a call with a path".into());
    };
    let read = |pid: u32| crate::procinfo::read_cstr(pid, rec.args[arg], libc::PATH_MAX as usize);
    match read(rec.host_tid).or_else(|_| read(rec.host_tgid)) {
        Ok(p) if !p.is_empty() => Ok(p),
        Ok(_) => Err("read again, empty".into()),
        Err(e) => Err(format!("not readable again: {e}")),
    }
}

/// The reason of the first lost path: [`why::NO_PATH`], then the call (its name, result,
/// path argument's address), its caller (command name, pid, whether it is still there) and
/// why it could not be read again.
fn lost_path(rec: &Rec, reread: &str) -> String {
    let name = crate::decode::syscall_name(rec.nr).unwrap_or("?");
    let arg = usize::from(ebpf::PATH_ARG1.contains(&rec.nr));
    let comm = std::fs::read_to_string(format!("/proc/{}/comm", rec.host_tgid));
    let caller = match comm {
        Ok(c) => format!("{} (pid {})", c.trim(), rec.host_tid),
        Err(_) => format!("pid {}, gone", rec.host_tid),
    };
    format!(
        "{}; the first: {name} = {} by {caller}, its path at {:#x} {reread}",
        why::NO_PATH,
        rec.result,
        rec.args[arg]
    )
}

impl Recorder {
    /// A recorder for `listener`; stat-family calls are recorded for paths under `home`.
    pub fn new(listener: OwnedFd, home: &str, clock: Arc<Clock>) -> Recorder {
        let mut home = home.trim_end_matches('/').as_bytes().to_vec();
        home.push(b'/');
        // Synchronous wake-up: the recorder and the caller hand the CPU to each other instead
        // of waking through the scheduler (measured: 5.4x -> 3.9x on benchmark (a)). Kernels
        // before 6.6 refuse it; that only costs speed.
        let flags = USER_NOTIF_FD_SYNC_WAKE_UP;
        // SAFETY: SET_FLAGS takes a u64 by value.
        unsafe { libc::ioctl(listener.as_raw_fd(), IOCTL_NOTIF_SET_FLAGS, flags) };
        Recorder {
            listener,
            home,
            clock,
            files: None,
            honeytokens: None,
        }
    }

    /// Takes the open and stat families from `files` instead of the listener (the seccomp
    /// filter must then not route them: see [`crate::rules`]).
    pub fn with_file_channel(mut self, files: FileChannel) -> Recorder {
        self.files = Some(files);
        self
    }

    /// Adds the honeytoken ground truth: the kernel's reports of accesses to the planted
    /// files, recorded as `honeytoken` events with the accessing process's pid in `ns`.
    pub fn with_honeytokens(mut self, watch: HoneytokenWatch, ns: PidNamespace) -> Recorder {
        self.honeytokens = Some((watch, ns));
        self
    }

    /// How this recorder observes calls.
    pub fn mechanism(&self) -> String {
        match &self.files {
            Some(f) if f.0.ring.size() != ebpf::RING_SIZE => format!(
                "seccomp-user-notify + ebpf (open and stat families; a ring buffer of {} bytes, not {})",
                f.0.ring.size(),
                ebpf::RING_SIZE
            ),
            Some(_) => "seccomp-user-notify + ebpf (open and stat families)".into(),
            None => "seccomp-user-notify".into(),
        }
    }

    /// Serves notifications and records until every process under the filter has exited or
    /// `stop` is set, passing each event to `sink` (ids from `first_id`). Returns the
    /// counters.
    ///
    /// The sink runs on this thread, after the caller was let go: handing events to another
    /// thread costs a wake-up per event, which measured more than the serialization itself.
    pub fn run(mut self, first_id: u64, stop: &AtomicBool, sink: &mut dyn Sink) -> RecorderStats {
        let mechanism = self.mechanism().to_string();
        let fd = self.listener.as_raw_fd();
        let mut files = self.files.take();
        let mut honey = self.honeytokens.take();
        let mut st = State {
            home: &self.home,
            clock: &self.clock,
            pids: Pids::default(),
            next_id: first_id,
            stats: RecorderStats {
                mechanism,
                syscalls: syscall_names(),
                ..Default::default()
            },
            images: Vec::new(),
        };
        let mut idle = true;
        loop {
            let mut fds = [
                libc::pollfd {
                    fd,
                    events: libc::POLLIN,
                    revents: 0,
                },
                libc::pollfd {
                    fd: files.as_ref().map_or(-1, |f| f.0.ring.fd()),
                    events: libc::POLLIN,
                    revents: 0,
                },
                libc::pollfd {
                    fd: honey.as_ref().map_or(-1, |h| h.0.fd().as_raw_fd()),
                    events: libc::POLLIN,
                    revents: 0,
                },
            ];
            // Busy: look without waiting; nothing pending: make the sink durable, then block
            // (with the eBPF channel, only until its next drain).
            let block = if !st.images.is_empty() {
                (IMAGE_RETRY_NS / 1_000_000) as i32
            } else if files.is_some() {
                RING_PERIOD_MS
            } else {
                100
            };
            // SAFETY: fds is a valid array of three pollfds (a negative fd is ignored).
            let mut n = unsafe { libc::poll(fds.as_mut_ptr(), 3, if idle { block } else { 0 }) };
            if n == 0 && !idle {
                sink.idle();
                idle = true;
                // SAFETY: as above.
                n = unsafe { libc::poll(fds.as_mut_ptr(), 3, block) };
            }
            if stop.load(Ordering::Relaxed) {
                break;
            }
            st.confirm_images(sink);
            if n == 0 && files.is_none() {
                continue;
            }
            if n < 0 {
                let e = std::io::Error::last_os_error();
                if e.raw_os_error() == Some(libc::EINTR) {
                    continue;
                }
                st.stats.failure = Some(format!("waiting for notifications failed: {e}"));
                break;
            }
            if let Some(f) = files.as_mut() {
                let drained = st.drain(sink, f, RING_BATCH);
                if n == 0 && drained == 0 {
                    continue;
                }
            }
            if fds[2].revents & libc::POLLIN != 0 {
                if let Some(h) = honey.as_mut() {
                    st.ground_truth(sink, h);
                }
            }
            idle = false;
            if fds[0].revents & libc::POLLIN != 0 {
                self.notification(&mut st, sink, files.as_mut());
            } else if fds[0].revents & (libc::POLLHUP | libc::POLLERR) != 0 {
                // No process is left under the filter.
                break;
            }
        }
        if let Some(f) = files.as_mut() {
            // What is left, through the same drain as the run's (a record that does not
            // decode is counted lost here too).
            while st.drain(sink, f, usize::MAX) > 0 {}
            let drops = f.0.drops();
            st.stats.lose(why::RING_FULL, drops);
        }
        if let Some(h) = honey.as_mut() {
            st.ground_truth(sink, h);
        }
        // Execs still pending when everything is gone: their processes are gone too.
        st.images.clear();
        sink.idle();
        st.stats
    }

    /// Handles one user notification. With the eBPF channel (`files`), a process that is
    /// about to end or to replace its image (`exit_group`, an exec) waits while the channel's
    /// pending records are read: a path its program could not read is read again from the
    /// caller's memory ([`reread_path`]), which is only there until then.
    fn notification(
        &self,
        st: &mut State<'_>,
        sink: &mut dyn Sink,
        files: Option<&mut FileChannel>,
    ) {
        let fd = self.listener.as_raw_fd();
        let mut req = SeccompNotif::default();
        // SAFETY: req is a zeroed seccomp_notif, as RECV requires.
        if unsafe { libc::ioctl(fd, IOCTL_NOTIF_RECV, &mut req) } < 0 {
            // ENOENT: the caller died between poll and recv.
            return;
        }
        st.stats.notifications += 1;
        // A call the static rules refuse reaches the recorder only to be recorded: it fails
        // with the rule's errno and never runs. Decided before anything is decoded (a foreign
        // ABI's numbers mean other calls).
        if let Some(r) = refusal(req.data.arch, req.data.nr, &req.data.args) {
            let ids = st.pids.lookup(req.pid);
            let resp = SeccompNotifResp {
                id: req.id,
                val: 0,
                error: -r.errno,
                flags: 0,
            };
            // SAFETY: resp is a valid seccomp_notif_resp.
            unsafe { libc::ioctl(fd, IOCTL_NOTIF_SEND, &resp) };
            let t = st.clock.now_ns();
            st.emit(
                sink,
                t,
                true,
                ids,
                EventKind::Refused {
                    syscall: r.syscall,
                    errno: r.errno,
                    reason: r.reason.to_string(),
                },
            );
            return;
        }
        let ends_image = matches!(
            i64::from(req.data.nr),
            libc::SYS_exit_group | libc::SYS_execve | libc::SYS_execveat
        );
        if let (true, Some(f)) = (ends_image, files) {
            st.drain(sink, f, usize::MAX);
        }
        let decoded = decode(req.pid, req.data.nr, &req.data.args, &self.home);
        let ids = match &decoded {
            Decoded::Events(_) => Some(st.pids.lookup(req.pid)),
            Decoded::Event(kind) => {
                let ids = st.pids.lookup(req.pid);
                if matches!(kind, EventKind::Exec { .. }) {
                    // For resolving later asynchronous records of a process gone by then.
                    if let Some(cwd) = proc_link(req.pid, "cwd") {
                        st.pids.note_exec_cwd(ids.0, cwd);
                    }
                }
                Some(ids)
            }
            _ => None,
        };
        // An exec: what runs now, and what its path resolves to, read while the caller waits.
        let image = match &decoded {
            Decoded::Event(EventKind::Exec { path, .. }) => {
                let tgid = crate::procinfo::tgid(req.pid).unwrap_or(req.pid);
                Some(PendingImage {
                    tgid,
                    ids: (0, 0),
                    before: proc_link(tgid, "exe"),
                    shown: crate::procinfo::exec_target(req.pid, path.as_slice()),
                    due_ns: 0,
                    tries: 0,
                })
            }
            _ => None,
        };
        // The call's time is now, while its caller waits: once answered it runs (a connect's
        // first packet may reach the edge before this thread runs again), and the audit pairs
        // a flow with the calls made before it.
        let t = st.clock.now_ns();
        // The reads above are only trusted if the caller is still the one that stopped.
        let mut id = req.id;
        // SAFETY: ID_VALID reads a u64.
        let valid = unsafe { libc::ioctl(fd, IOCTL_NOTIF_ID_VALID, &mut id) } == 0;
        let resp = SeccompNotifResp {
            id: req.id,
            val: 0,
            error: 0,
            flags: USER_NOTIF_FLAG_CONTINUE,
        };
        // SAFETY: resp is a valid seccomp_notif_resp.
        unsafe { libc::ioctl(fd, IOCTL_NOTIF_SEND, &resp) };
        match decoded {
            Decoded::Event(kind) if valid => {
                if let Some(mut p) = image {
                    st.pids.forget(req.pid);
                    p.ids = ids.unwrap_or((0, 0));
                    p.due_ns = t + IMAGE_RETRY_NS / 2;
                    // A process that calls exec again had its earlier exec fail (a search of
                    // PATH): only the latest can be what runs.
                    st.images.retain(|q| q.tgid != p.tgid);
                    st.images.push(p);
                }
                st.emit(sink, t, true, ids.unwrap_or((0, 0)), kind);
            }
            Decoded::Events(kinds) if valid => {
                for kind in kinds {
                    st.emit(sink, t, true, ids.unwrap_or((0, 0)), kind);
                }
            }
            Decoded::Skip => {}
            // The caller's memory could not be read while it waited: a call the record
            // lacks.
            Decoded::Lost if valid => st.stats.lose(why::UNREADABLE, 1),
            // The notification went stale while it was read: its caller died, or a signal
            // interrupted the call, which then either failed or, restarted, was notified
            // again. Nothing it did is missing.
            _ => {}
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rec(nr: i64, args: [u64; 6]) -> Rec {
        Rec {
            nr,
            ns_tgid: 1,
            ktime: 0,
            // SAFETY: gettid has no arguments and no memory effects.
            host_tid: unsafe { libc::gettid() } as u32,
            host_tgid: std::process::id(),
            args,
            result: 3,
            openat2_flags: 0,
            path: None,
        }
    }

    #[test]
    fn a_path_the_program_could_not_read_is_read_again_from_the_callers_memory() {
        let path = c"/home/user/.aws/credentials";
        let at = path.as_ptr() as u64;
        // The path's argument by call: first for open, second (after dirfd) for openat.
        let open = reread_path(&rec(libc::SYS_open, [at, 0, 0, 0, 0, 0]));
        assert_eq!(open.as_deref(), Ok(path.to_bytes()));
        let openat = rec(libc::SYS_openat, [libc::AT_FDCWD as u64, at, 0, 0, 0, 0]);
        assert_eq!(reread_path(&openat).as_deref(), Ok(path.to_bytes()));
        // An address that holds nothing, an empty string, a call with no path: still lost,
        // and why.
        let nothing = rec(libc::SYS_open, [8, 0, 0, 0, 0, 0]);
        let why = reread_path(&nothing).unwrap_err();
        assert!(why.starts_with("not readable again: "), "{why}");
        let empty = c"";
        let at = empty.as_ptr() as u64;
        let why = reread_path(&rec(libc::SYS_open, [at, 0, 0, 0, 0, 0])).unwrap_err();
        assert_eq!(why, "read again, empty");
        assert!(reread_path(&rec(libc::SYS_connect, [at, 0, 0, 0, 0, 0])).is_err());
        // The reason of a lost one names the call and its caller.
        let lost = lost_path(&nothing, &reread_path(&nothing).unwrap_err());
        assert!(lost.starts_with(why::NO_PATH), "{lost}");
        assert!(lost.contains("the first: open = 3 by "), "{lost}");
        assert!(
            lost.contains("its path at 0x8 not readable again"),
            "{lost}"
        );
    }
}
