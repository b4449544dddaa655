//! Resource limits of a sandbox: memory, processes, CPU and disk.
//!
//! # Detected, never assumed
//!
//! Each limit is enforced by the first of these that works on this host, and the manifest
//! records which (`sandbox.limits`):
//!
//! 1. **cgroup v2**, where glassbox's own cgroup can hand the controller to a child: the
//!    controller is listed in its `cgroup.controllers`, and is either enabled in its
//!    `cgroup.subtree_control` already or glassbox's cgroup is the hierarchy's root (anywhere
//!    else the "no internal processes" rule forbids enabling it while glassbox is in it);
//! 2. **cgroup v1**, where a hierarchy with the controller is mounted and glassbox may make a
//!    cgroup in it (as root);
//! 3. **rlimits** as the last resort: `RLIMIT_DATA` for memory (per process), `RLIMIT_NPROC`
//!    for processes (counted per user namespace since Linux 5.14, so per sandbox). No rlimit
//!    limits a CPU *rate*: without a cpu controller the CPU limit is recorded as not enforced.
//!
//! `RLIMIT_NPROC` is set with a pids cgroup too, to the same value: the kernel checks it
//! before a fork copies the parent's memory map, the cgroup only after. A fork bomb's
//! refused forks then take no lock the whole host shares (each file mapping's lock, libc's
//! among them, which every exec needs): measured here, 512 Python processes forking through
//! the cgroup alone stalled the host's own process starts for up to 15 s; with the rlimit
//! first, not at all. A CPU-limited sandbox is unthrottled before it is killed, for the same
//! reason: its dying processes unmap their libraries. (Before Linux 5.14 `RLIMIT_NPROC`
//! counted per host user: the sandboxes of a glassbox running as root, which share one host
//! uid, would then share it too.)
//!
//! A cgroup that cannot be set up (a directory that cannot be made, a limit file that cannot
//! be written) is not used, and its limits fall back to the next mechanism, with the reason
//! in the record.
//!
//! Disk: the only writable places of a sandbox are its tmpfs mounts (`/tmp`, `/run`, `/var`,
//! `/dev/shm`, home) and the host folders bound read-write on purpose (a package's install
//! folder). Each tmpfs is mounted with `size=` the disk limit, and `RLIMIT_FSIZE` bounds any
//! one file, in the read-write binds too. tmpfs pages are memory, charged to the memory
//! limit: a disk limit at or above the memory limit would never be the one reached.
//! `RLIMIT_CORE` is always 0.
//!
//! # The cgroup's life
//!
//! `<glassbox's own cgroup>/glassbox/gb-<pid>-<n>` in each hierarchy used, plus the v1
//! freezer's when there is one (for the clean-up). The sandbox's outer process joins it
//! before it unshares: pid 1 and everything after it are born in it, and the sandbox's
//! cgroup namespace is rooted there (`/proc/self/cgroup` says `/` inside). Once the
//! sandbox is finished and its processes are gone, what it reached is read
//! ([`Cgroup::reached`]) and the cgroup removed; a process still in it is killed first
//! (frozen with the v1 freezer, killed, thawed; or `cgroup.kill` in v2). Cgroups left by a
//! glassbox that died are removed by the next one that makes a sandbox.

use std::collections::BTreeMap;
use std::io::ErrorKind;
use std::os::fd::OwnedFd;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{Duration, Instant};

/// One mebibyte.
pub const MIB: u64 = 1 << 20;
/// One gibibyte.
pub const GIB: u64 = 1 << 30;

/// The CFS period glassbox sets with a CPU limit, in microseconds: 10 ms, not the kernel's
/// 100 ms. A throttled process that holds a lock the host shares (a library's mapping lock,
/// taken by every exec) makes the host wait until its next period.
const CFS_PERIOD_US: u64 = 10_000;

/// What a sandbox may use.
#[derive(Clone, Debug, PartialEq)]
pub struct Limits {
    /// Memory of the whole sandbox (every process, and the tmpfs pages it wrote), in bytes;
    /// `None`: not limited.
    pub memory: Option<u64>,
    /// Processes and threads of the whole sandbox, pid 1 included; `None`: not limited.
    pub pids: Option<u64>,
    /// CPUs' worth of time per period; `None`: not limited.
    pub cpus: Option<f64>,
    /// The size of each tmpfs mount, and the largest file, in bytes.
    pub disk: u64,
}

impl Default for Limits {
    /// 1 GiB of memory, 512 processes, 1 CPU, 512 MiB per tmpfs: room for any MCP server and
    /// its installer, not for a bomb.
    fn default() -> Self {
        Limits {
            memory: Some(GIB),
            pids: Some(512),
            cpus: Some(1.0),
            disk: 512 * MIB,
        }
    }
}

impl Limits {
    /// Refuses limits no server could run under: memory below 16 MiB, fewer than 8
    /// processes, less than 1% of a CPU, a tmpfs below 1 MiB.
    pub fn validate(&self) -> Result<(), String> {
        if let Some(m) = self.memory {
            if m < 16 * MIB {
                return Err(format!(
                    "a memory limit of {} is too small (at least 16 MiB)",
                    format_size(m)
                ));
            }
        }
        if let Some(p) = self.pids {
            if p < 8 {
                return Err(format!(
                    "a limit of {p} processes is too small (at least 8)"
                ));
            }
        }
        if let Some(c) = self.cpus {
            if !c.is_finite() || c < 0.01 {
                return Err(format!("a CPU limit of {c} is too small (at least 0.01)"));
            }
        }
        if self.disk < MIB {
            return Err(format!(
                "a disk limit of {} is too small (at least 1 MiB)",
                format_size(self.disk)
            ));
        }
        Ok(())
    }
}

/// Parses a size: a number with an optional binary unit, `K`, `M`, `G` or `T` (also `KiB`,
/// `MB`..., all powers of 1024), any case: `512M`, `1.5GiB`, `1048576`.
pub fn parse_size(s: &str) -> Result<u64, String> {
    let t = s.trim();
    let split = t
        .find(|c: char| !(c.is_ascii_digit() || c == '.'))
        .unwrap_or(t.len());
    let (num, unit) = t.split_at(split);
    let unit = unit.trim().to_ascii_lowercase();
    let scale: u64 = match unit.as_str() {
        "" | "b" => 1,
        "k" | "kb" | "kib" => 1 << 10,
        "m" | "mb" | "mib" => 1 << 20,
        "g" | "gb" | "gib" => 1 << 30,
        "t" | "tb" | "tib" => 1 << 40,
        _ => return Err(format!("{s:?} is not a size (like 512M or 1G)")),
    };
    let value: f64 = num
        .parse()
        .map_err(|_| format!("{s:?} is not a size (like 512M or 1G)"))?;
    let bytes = value * scale as f64;
    if !bytes.is_finite() || bytes < 1.0 || bytes > u64::MAX as f64 / 2.0 {
        return Err(format!("{s:?} is out of range"));
    }
    Ok(bytes as u64)
}

/// A size for people: `1 GiB`, `512 MiB`, `1.5 GiB`, `4096 bytes`.
pub fn format_size(bytes: u64) -> String {
    for (unit, scale) in [
        ("TiB", 1u64 << 40),
        ("GiB", GIB),
        ("MiB", MIB),
        ("KiB", 1 << 10),
    ] {
        if bytes >= scale {
            let whole = bytes / scale;
            return if whole * scale == bytes {
                format!("{whole} {unit}")
            } else {
                format!("{:.1} {unit}", bytes as f64 / scale as f64)
            };
        }
    }
    format!("{bytes} bytes")
}

/// CPUs for people: `1 CPU`, `0.5 CPU`, `2 CPUs`.
pub fn format_cpus(cpus: f64) -> String {
    let n = if cpus.fract() == 0.0 {
        format!("{cpus:.0}")
    } else {
        format!("{cpus}")
    };
    format!("{n} CPU{}", if cpus > 1.0 { "s" } else { "" })
}

/// The controllers glassbox limits with.
const LIMITED: [&str; 3] = ["memory", "pids", "cpu"];

/// A cgroup hierarchy in which glassbox can make a cgroup below its own.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Hierarchy {
    /// 1 or 2.
    pub version: u8,
    /// The controllers it offers to a child of glassbox's cgroup (`memory`, `pids`, `cpu`,
    /// `freezer`).
    pub controllers: Vec<String>,
    /// glassbox's own cgroup in it (a directory).
    pub own: PathBuf,
    /// Whether `own` is the hierarchy's root.
    pub root: bool,
}

/// What this host offers for limiting a sandbox.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Host {
    /// Usable hierarchies.
    pub hierarchies: Vec<Hierarchy>,
    /// What was seen but is not usable, with why.
    pub notes: Vec<String>,
}

impl Host {
    /// Reads this process's mounts and cgroups.
    pub fn detect() -> Host {
        let mountinfo = std::fs::read_to_string("/proc/self/mountinfo").unwrap_or_default();
        let cgroup = std::fs::read_to_string("/proc/self/cgroup").unwrap_or_default();
        Host::parse(&mountinfo, &cgroup, &|p| std::fs::read_to_string(p).ok())
    }

    /// [`Host::detect`] from the texts of `/proc/self/mountinfo` and `/proc/self/cgroup`, with
    /// `read` for the files of a cgroup v2 directory.
    pub fn parse(mountinfo: &str, cgroup: &str, read: &dyn Fn(&Path) -> Option<String>) -> Host {
        let mut host = Host::default();
        // Where this process is, per v1 controller and in v2.
        let mut v1_paths: Vec<(Vec<String>, String)> = Vec::new();
        let mut v2_path = None;
        for line in cgroup.lines() {
            let mut parts = line.splitn(3, ':');
            let (Some(id), Some(ctl), Some(path)) = (parts.next(), parts.next(), parts.next())
            else {
                continue;
            };
            if id == "0" && ctl.is_empty() {
                v2_path = Some(path.to_string());
            } else if !ctl.is_empty() {
                v1_paths.push((ctl.split(',').map(str::to_string).collect(), path.into()));
            }
        }
        let mut seen_v2 = false;
        let mut seen_v1: Vec<String> = Vec::new();
        for line in mountinfo.lines() {
            let Some((pre, post)) = line.split_once(" - ") else {
                continue;
            };
            let pre: Vec<&str> = pre.split(' ').collect();
            let post: Vec<&str> = post.split(' ').collect();
            if pre.len() < 5 || post.len() < 3 {
                continue;
            }
            let (mount_root, mountpoint) = (unescape(pre[3]), PathBuf::from(unescape(pre[4])));
            match post[0] {
                "cgroup2" if !seen_v2 => {
                    seen_v2 = true;
                    let Some(path) = &v2_path else {
                        host.notes.push(
                            "cgroup v2 is mounted but this process is in none of its cgroups"
                                .into(),
                        );
                        continue;
                    };
                    let Some(own) = own_dir(&mountpoint, &mount_root, path) else {
                        host.notes.push(format!(
                            "cgroup v2: this process's cgroup {path} is outside the mount at {}",
                            mountpoint.display()
                        ));
                        continue;
                    };
                    let root = path.trim_end_matches('/') == mount_root.trim_end_matches('/');
                    let words = |f: &str| -> Vec<String> {
                        read(&own.join(f))
                            .unwrap_or_default()
                            .split_whitespace()
                            .map(str::to_string)
                            .collect()
                    };
                    let offered = words("cgroup.controllers");
                    let delegated = words("cgroup.subtree_control");
                    let usable: Vec<String> = LIMITED
                        .iter()
                        .filter(|c| offered.iter().any(|o| o == *c))
                        .filter(|c| root || delegated.iter().any(|d| d == *c))
                        .map(|c| c.to_string())
                        .collect();
                    let missing: Vec<&str> = LIMITED
                        .iter()
                        .filter(|c| !usable.iter().any(|u| u == *c))
                        .copied()
                        .collect();
                    if !missing.is_empty() {
                        host.notes.push(format!(
                            "cgroup v2 at {} offers {} to a child of this process's cgroup, not {}",
                            mountpoint.display(),
                            if usable.is_empty() {
                                "no controller glassbox uses".to_string()
                            } else {
                                usable.join(", ")
                            },
                            missing.join(", ")
                        ));
                    }
                    if !usable.is_empty() {
                        host.hierarchies.push(Hierarchy {
                            version: 2,
                            controllers: usable,
                            own,
                            root,
                        });
                    }
                }
                "cgroup" => {
                    let controllers: Vec<String> = post[2]
                        .split(',')
                        .filter(|o| LIMITED.contains(o) || *o == "freezer")
                        .filter(|o| !seen_v1.iter().any(|s| s == o))
                        .map(str::to_string)
                        .collect();
                    if controllers.is_empty() {
                        continue;
                    }
                    let Some((_, path)) = v1_paths
                        .iter()
                        .find(|(ctls, _)| ctls.iter().any(|c| c == &controllers[0]))
                    else {
                        continue;
                    };
                    let Some(own) = own_dir(&mountpoint, &mount_root, path) else {
                        host.notes.push(format!(
                            "cgroup v1 {}: this process's cgroup {path} is outside the mount at {}",
                            controllers.join(","),
                            mountpoint.display()
                        ));
                        continue;
                    };
                    seen_v1.extend(controllers.iter().cloned());
                    host.hierarchies.push(Hierarchy {
                        version: 1,
                        root: path.trim_end_matches('/') == mount_root.trim_end_matches('/'),
                        controllers,
                        own,
                    });
                }
                _ => {}
            }
        }
        host
    }

    /// The hierarchy that enforces `controller`: cgroup v2 when it offers it, else v1.
    pub fn hierarchy(&self, controller: &str) -> Option<&Hierarchy> {
        let offers = |h: &&Hierarchy| h.controllers.iter().any(|c| c == controller);
        self.hierarchies
            .iter()
            .filter(|h| h.version == 2)
            .find(offers)
            .or_else(|| {
                self.hierarchies
                    .iter()
                    .filter(|h| h.version == 1)
                    .find(offers)
            })
    }

    /// How each limit would be enforced here, before anything is tried: `memory`, `pids`,
    /// `cpu` to `cgroup v2`, `cgroup v1` or the fallback.
    pub fn plan(&self) -> BTreeMap<String, String> {
        let fallback = |c: &str| match c {
            "memory" => "RLIMIT_DATA",
            "pids" => "RLIMIT_NPROC",
            _ => "not enforced",
        };
        LIMITED
            .iter()
            .map(|c| {
                let how = match self.hierarchy(c) {
                    Some(h) => format!("cgroup v{}", h.version),
                    None => fallback(c).to_string(),
                };
                (c.to_string(), how)
            })
            .collect()
    }
}

/// mountinfo escapes space, tab, newline and backslash as `\ooo`.
fn unescape(s: &str) -> String {
    let b = s.as_bytes();
    let mut out = Vec::with_capacity(b.len());
    let mut i = 0;
    while i < b.len() {
        if b[i] == b'\\'
            && i + 4 <= b.len()
            && b[i + 1..i + 4].iter().all(|d| (b'0'..=b'7').contains(d))
        {
            out.push((b[i + 1] - b'0') * 64 + (b[i + 2] - b'0') * 8 + (b[i + 3] - b'0'));
            i += 4;
        } else {
            out.push(b[i]);
            i += 1;
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

/// The directory of cgroup `path` in a hierarchy mounted at `mountpoint` whose mount shows
/// the cgroup `mount_root` (not `/` in a container with its own cgroup namespace).
fn own_dir(mountpoint: &Path, mount_root: &str, path: &str) -> Option<PathBuf> {
    let rel = Path::new(path).strip_prefix(mount_root).ok()?;
    Some(mountpoint.join(rel))
}

/// An rlimit set in the server process before it executes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Rlimit {
    /// `RLIMIT_DATA`.
    Data,
    /// `RLIMIT_NPROC`.
    Nproc,
    /// `RLIMIT_FSIZE`.
    Fsize,
    /// `RLIMIT_CORE`.
    Core,
}

/// What [`apply`] set up.
#[derive(Debug)]
pub(crate) struct Applied {
    /// The sandbox's cgroup, when any hierarchy was usable.
    pub cgroup: Option<Cgroup>,
    /// The rlimits the server process sets on itself.
    pub rlimits: Vec<(Rlimit, u64)>,
    /// What was applied and how, by resource, for the manifest.
    pub record: BTreeMap<String, String>,
}

/// One directory of the sandbox's cgroup.
#[derive(Clone, Debug)]
struct Dir {
    version: u8,
    /// The controllers it serves (limits set in it).
    controllers: Vec<String>,
    path: PathBuf,
}

/// The sandbox's cgroup: one directory per hierarchy used. Removed on drop.
#[derive(Debug)]
pub(crate) struct Cgroup {
    dirs: Vec<Dir>,
    limits: Limits,
    removed: bool,
}

static NEXT: AtomicU64 = AtomicU64::new(1);

fn write(path: &Path, value: &str) -> Result<(), String> {
    std::fs::write(path, value).map_err(|e| format!("write {value:?} to {}: {e}", path.display()))
}

/// The number after `key` in a flat keyed file (`max 3`, `oom_kill 1`).
fn keyed(text: &str, key: &str) -> Option<u64> {
    text.lines().find_map(|l| {
        let (k, v) = l.split_once(' ')?;
        (k == key).then(|| v.trim().parse().ok()).flatten()
    })
}

/// Makes the sandbox's cgroup and decides every limit's mechanism (see the module doc).
pub(crate) fn apply(limits: &Limits) -> Result<Applied, String> {
    limits.validate()?;
    let host = Host::detect();
    let name = format!(
        "gb-{}-{}",
        std::process::id(),
        NEXT.fetch_add(1, Ordering::Relaxed)
    );
    let wanted = |c: &str| match c {
        "memory" => limits.memory.is_some(),
        "pids" => limits.pids.is_some(),
        "cpu" => limits.cpus.is_some(),
        _ => false,
    };
    let mut cgroup = Cgroup {
        dirs: Vec::new(),
        limits: limits.clone(),
        removed: false,
    };
    // Per controller: Ok(version) when its cgroup is set, Err(why) when it is not.
    let mut via: BTreeMap<&str, Result<u8, String>> = BTreeMap::new();
    for c in LIMITED {
        if !wanted(c) {
            continue;
        }
        if via.contains_key(c) {
            continue;
        }
        let Some(h) = host.hierarchy(c) else {
            via.insert(c, Err(format!("no {c} cgroup available")));
            continue;
        };
        // Every controller this hierarchy serves first, in one directory.
        let served: Vec<&str> = LIMITED
            .iter()
            .copied()
            .filter(|k| wanted(k) && !via.contains_key(k))
            .filter(|k| host.hierarchy(k).map(|x| x.own == h.own).unwrap_or(false))
            .collect();
        let set = make_dir(h, &name, &served).and_then(|path| {
            let dir = Dir {
                version: h.version,
                controllers: served.iter().map(|s| s.to_string()).collect(),
                path,
            };
            match set_limits(&dir, limits) {
                Ok(()) => {
                    cgroup.dirs.push(dir);
                    Ok(())
                }
                Err(e) => {
                    // Not used: its limits fall back. Still empty, it goes at once.
                    let _ = std::fs::remove_dir(&dir.path);
                    Err(e)
                }
            }
        });
        for k in &served {
            let r = match &set {
                Ok(()) => Ok(h.version),
                Err(e) => Err(format!("cgroup v{} {k}: {e}", h.version)),
            };
            via.insert(k, r);
        }
    }
    // The v1 freezer, for the clean-up, when other v1 cgroups are in use.
    if cgroup.dirs.iter().any(|d| d.version == 1) {
        if let Some(h) = host
            .hierarchies
            .iter()
            .find(|h| h.version == 1 && h.controllers.iter().any(|c| c == "freezer"))
        {
            match cgroup.dirs.iter_mut().find(|d| d.path.starts_with(&h.own)) {
                // A hierarchy shared with a limited controller: that directory freezes too.
                Some(d) => d.controllers.push("freezer".into()),
                None => {
                    if let Ok(path) = make_dir(h, &name, &[]) {
                        cgroup.dirs.push(Dir {
                            version: 1,
                            controllers: vec!["freezer".into()],
                            path,
                        });
                    }
                }
            }
        }
    }

    let mut rlimits = vec![(Rlimit::Core, 0), (Rlimit::Fsize, limits.disk)];
    let mut record = BTreeMap::new();
    let because = |r: &Result<u8, String>| match r {
        Err(why) => format!(" ({why})"),
        Ok(_) => String::new(),
    };
    match (limits.memory, via.get("memory")) {
        (None, _) => {
            record.insert("memory".into(), "not limited".into());
        }
        (Some(m), Some(Ok(v))) => {
            record.insert(
                "memory".into(),
                format!("{} via cgroup v{v} memory", format_size(m)),
            );
        }
        (Some(m), r) => {
            rlimits.push((Rlimit::Data, m));
            record.insert(
                "memory".into(),
                format!(
                    "{} per process via RLIMIT_DATA{}",
                    format_size(m),
                    r.map(because).unwrap_or_default()
                ),
            );
        }
    }
    match (limits.pids, via.get("pids")) {
        (None, _) => {
            record.insert("pids".into(), "not limited".into());
        }
        (Some(p), Some(Ok(v))) => {
            // RLIMIT_NPROC as well: the kernel checks it before a fork copies the parent's
            // memory map, the pids cgroup only after. A fork bomb's refused forks then take no
            // lock the host shares (a library's mapping lock), and the host stays usable.
            rlimits.push((Rlimit::Nproc, p));
            record.insert(
                "pids".into(),
                format!("{p} via cgroup v{v} pids, and RLIMIT_NPROC"),
            );
        }
        (Some(p), r) => {
            rlimits.push((Rlimit::Nproc, p));
            record.insert(
                "pids".into(),
                format!("{p} via RLIMIT_NPROC{}", r.map(because).unwrap_or_default()),
            );
        }
    }
    match (limits.cpus, via.get("cpu")) {
        (None, _) => {
            record.insert("cpu".into(), "not limited".into());
        }
        (Some(c), Some(Ok(v))) => {
            record.insert(
                "cpu".into(),
                format!("{} via cgroup v{v} cpu", format_cpus(c)),
            );
        }
        (Some(c), r) => {
            record.insert(
                "cpu".into(),
                format!(
                    "{} not enforced{}; no rlimit limits a rate",
                    format_cpus(c),
                    r.map(because).unwrap_or_default()
                ),
            );
        }
    }
    record.insert(
        "disk".into(),
        format!(
            "{} per tmpfs mount (/tmp, /run, /var, /dev/shm, home) via size=, and per file via RLIMIT_FSIZE",
            format_size(limits.disk)
        ),
    );
    record.insert("core".into(), "0 via RLIMIT_CORE".into());
    Ok(Applied {
        cgroup: (!cgroup.dirs.is_empty()).then_some(cgroup),
        rlimits,
        record,
    })
}

/// Makes `<own>/glassbox/<name>` in `h`, with `controllers` handed down to it (v2).
fn make_dir(h: &Hierarchy, name: &str, controllers: &[&str]) -> Result<PathBuf, String> {
    let parent = h.own.join("glassbox");
    let path = parent.join(name);
    sweep(&parent);
    // The parent may be removed by another sandbox's clean-up between the two mkdirs: again.
    let mut last = String::new();
    for _ in 0..5 {
        match std::fs::create_dir(&parent) {
            Ok(()) => {}
            Err(e) if e.kind() == ErrorKind::AlreadyExists => {}
            Err(e) => return Err(format!("mkdir {}: {e}", parent.display())),
        }
        if h.version == 2 && !controllers.is_empty() {
            let plus: Vec<String> = controllers.iter().map(|c| format!("+{c}")).collect();
            if h.root {
                // The root has no internal-process rule; a delegated parent has them on.
                write(&h.own.join("cgroup.subtree_control"), &plus.join(" "))?;
            }
            match write(&parent.join("cgroup.subtree_control"), &plus.join(" ")) {
                Ok(()) => {}
                Err(_) if !parent.exists() => continue,
                Err(e) => return Err(e),
            }
        }
        match std::fs::create_dir(&path) {
            Ok(()) => return Ok(path),
            Err(e) if e.kind() == ErrorKind::NotFound => last = e.to_string(),
            Err(e) => return Err(format!("mkdir {}: {e}", path.display())),
        }
    }
    Err(format!("mkdir {}: {last}", path.display()))
}

/// Removes the cgroups of glassbox processes that are gone (killed before they could clean
/// up). Only empty ones go: rmdir refuses a cgroup with processes.
fn sweep(parent: &Path) {
    let Ok(entries) = std::fs::read_dir(parent) else {
        return;
    };
    for e in entries.flatten() {
        let name = e.file_name();
        let Some(pid) = name
            .to_str()
            .and_then(|n| n.strip_prefix("gb-"))
            .and_then(|n| n.split('-').next())
            .and_then(|p| p.parse::<u32>().ok())
        else {
            continue;
        };
        if pid != std::process::id() && !Path::new(&format!("/proc/{pid}")).exists() {
            let _ = std::fs::remove_dir(e.path());
        }
    }
}

fn set_limits(dir: &Dir, limits: &Limits) -> Result<(), String> {
    let f = |name: &str| dir.path.join(name);
    for c in &dir.controllers {
        match (dir.version, c.as_str()) {
            (1, "memory") => {
                if let Some(m) = limits.memory {
                    write(&f("memory.limit_in_bytes"), &m.to_string())?;
                    // Memory and swap together: no swapping past the limit.
                    if f("memory.memsw.limit_in_bytes").exists() {
                        write(&f("memory.memsw.limit_in_bytes"), &m.to_string())?;
                    }
                }
            }
            (2, "memory") => {
                if let Some(m) = limits.memory {
                    write(&f("memory.max"), &m.to_string())?;
                    if f("memory.swap.max").exists() {
                        write(&f("memory.swap.max"), "0")?;
                    }
                }
            }
            (_, "pids") => {
                if let Some(p) = limits.pids {
                    write(&f("pids.max"), &p.to_string())?;
                }
            }
            (1, "cpu") => {
                if let Some(c) = limits.cpus {
                    let quota = ((c * CFS_PERIOD_US as f64) as u64).max(1_000);
                    write(&f("cpu.cfs_period_us"), &CFS_PERIOD_US.to_string())?;
                    write(&f("cpu.cfs_quota_us"), &quota.to_string())?;
                }
            }
            (2, "cpu") => {
                if let Some(c) = limits.cpus {
                    let quota = ((c * CFS_PERIOD_US as f64) as u64).max(1_000);
                    write(&f("cpu.max"), &format!("{quota} {CFS_PERIOD_US}"))?;
                }
            }
            _ => {}
        }
    }
    Ok(())
}

/// What the sandbox's cgroup has counted so far, read while it runs ([`Meter::read`]): the
/// counters only grow (but `processes`), so what a span of the run did is the difference of
/// two readings ([`Usage::since`]).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct Usage {
    /// Processes in it now.
    pub processes: u64,
    /// The most processes it has held at once (`pids.peak`; 0 where the kernel has none).
    pub peak: u64,
    /// Forks the cgroup refused at its limit.
    pub forks_refused: u64,
    /// Processes killed out of memory.
    pub oom_kills: u64,
    /// Times its memory reached the limit (memory then reclaimed).
    pub memory_max: u64,
    /// Time its processes were throttled at the CPU limit, in ns.
    pub throttled_ns: u64,
    /// Writable tmpfs mounts that are full now.
    pub full: u64,
}

impl Usage {
    /// What happened between `earlier` and this reading: the counters' growth, this
    /// reading's processes, peak and full mounts.
    pub fn since(&self, earlier: &Usage) -> Usage {
        Usage {
            processes: self.processes,
            peak: self.peak,
            forks_refused: self.forks_refused.saturating_sub(earlier.forks_refused),
            oom_kills: self.oom_kills.saturating_sub(earlier.oom_kills),
            memory_max: self.memory_max.saturating_sub(earlier.memory_max),
            throttled_ns: self.throttled_ns.saturating_sub(earlier.throttled_ns),
            full: self.full,
        }
    }
}

/// Reads a running sandbox's [`Usage`] (from any thread, as often as wanted): its cgroup's
/// counters and its writable tmpfs mounts' space. Made by [`crate::Sandbox::meter`].
#[derive(Debug)]
pub struct Meter {
    dirs: Vec<Dir>,
    limits: Limits,
    tmpfs: Vec<OwnedFd>,
}

impl Meter {
    /// Reads the usage now.
    pub fn read(&self) -> Usage {
        let mut u = counters(&self.dirs);
        u.full = self
            .tmpfs
            .iter()
            .filter_map(|fd| crate::sys::fstatvfs_space(std::os::fd::AsRawFd::as_raw_fd(fd)))
            .filter(|(size, avail)| is_full(*size, *avail))
            .count() as u64;
        u
    }

    /// The limits the sandbox runs under.
    pub fn limits(&self) -> &Limits {
        &self.limits
    }
}

/// Whether a file system of `size` bytes with `avail` left is full: less than 1% or 1 MiB
/// left, whichever is less.
pub(crate) fn is_full(size: u64, avail: u64) -> bool {
    size > 0 && avail < (size / 100).min(MIB)
}

/// The directory of `dirs` that serves `controller`.
fn dir_of<'a>(dirs: &'a [Dir], controller: &str) -> Option<&'a Dir> {
    dirs.iter()
        .find(|d| d.controllers.iter().any(|c| c == controller))
}

/// What the cgroup of `dirs` has counted (all of [`Usage`] but the full mounts), read now:
/// what [`Meter::read`] reads as a run goes, and [`Cgroup::reached`] once it is over.
fn counters(dirs: &[Dir]) -> Usage {
    let read = |d: &Dir, f: &str| std::fs::read_to_string(d.path.join(f)).unwrap_or_default();
    let mut u = Usage::default();
    if let Some(d) = dir_of(dirs, "pids") {
        u.processes = read(d, "pids.current").trim().parse().unwrap_or(0);
        u.peak = read(d, "pids.peak").trim().parse().unwrap_or(0);
        u.forks_refused = keyed(&read(d, "pids.events"), "max").unwrap_or(0);
    }
    if let Some(d) = dir_of(dirs, "memory") {
        if d.version == 1 {
            u.oom_kills = keyed(&read(d, "memory.oom_control"), "oom_kill").unwrap_or(0);
            u.memory_max = read(d, "memory.failcnt").trim().parse().unwrap_or(0);
        } else {
            let events = read(d, "memory.events");
            u.oom_kills = keyed(&events, "oom_kill").unwrap_or(0);
            u.memory_max = keyed(&events, "max").unwrap_or(0);
        }
    }
    if let Some(d) = dir_of(dirs, "cpu") {
        let stat = read(d, "cpu.stat");
        u.throttled_ns = if d.version == 1 {
            keyed(&stat, "throttled_time").unwrap_or(0)
        } else {
            keyed(&stat, "throttled_usec").unwrap_or(0) * 1_000
        };
    }
    u
}

impl Cgroup {
    /// A [`Meter`] of it, with the writable tmpfs mounts `tmpfs` (descriptors of them).
    pub(crate) fn meter(&self, tmpfs: Vec<OwnedFd>) -> Meter {
        Meter {
            dirs: self.dirs.clone(),
            limits: self.limits.clone(),
            tmpfs,
        }
    }

    /// The `cgroup.procs` files the sandbox's outer process writes itself into.
    pub(crate) fn procs_files(&self) -> Vec<PathBuf> {
        self.dirs
            .iter()
            .map(|d| d.path.join("cgroup.procs"))
            .collect()
    }

    /// The processes in it now (host pids).
    pub(crate) fn procs(&self) -> Vec<i32> {
        let mut out: Vec<i32> = Vec::new();
        for d in &self.dirs {
            if let Ok(t) = std::fs::read_to_string(d.path.join("cgroup.procs")) {
                out.extend(t.lines().filter_map(|l| l.trim().parse::<i32>().ok()));
            }
        }
        out.sort_unstable();
        out.dedup();
        out
    }

    fn dir(&self, controller: &str) -> Option<&Dir> {
        dir_of(&self.dirs, controller)
    }

    /// The limits it reached, one sentence each (read once its processes are gone, before it
    /// is removed).
    pub(crate) fn reached(&self) -> Vec<String> {
        let read = |d: &Dir, f: &str| std::fs::read_to_string(d.path.join(f)).unwrap_or_default();
        let u = counters(&self.dirs);
        let mut out = Vec::new();
        if let (Some(_), Some(p)) = (self.dir("pids"), self.limits.pids) {
            // RLIMIT_NPROC refuses first (see `apply`): the peak says the limit was reached,
            // the cgroup's count of refusals says how often, when it was the one refusing.
            let (refused, peak) = (u.forks_refused, u.peak);
            if refused > 0 {
                out.push(format!("pids limit ({p}) reached: {refused} forks refused"));
            } else if peak >= p {
                out.push(format!(
                    "pids limit ({p}) reached: {peak} processes at once"
                ));
            }
        }
        if let (Some(d), Some(m)) = (self.dir("memory"), self.limits.memory) {
            // Version 1: reached when the peak usage is at the limit.
            let killed = u.oom_kills;
            let hit = if d.version == 1 {
                let peak: u64 = read(d, "memory.max_usage_in_bytes")
                    .trim()
                    .parse()
                    .unwrap_or(0);
                peak >= m
            } else {
                u.memory_max > 0
            };
            if killed > 0 {
                out.push(format!(
                    "memory limit ({}) reached: {killed} process{} killed out of memory",
                    format_size(m),
                    if killed == 1 { "" } else { "es" }
                ));
            } else if hit {
                out.push(format!(
                    "memory limit ({}) reached: memory reclaimed, nothing killed",
                    format_size(m)
                ));
            }
        }
        if let (Some(_), Some(c)) = (self.dir("cpu"), self.limits.cpus) {
            let throttled_ns = u.throttled_ns;
            if throttled_ns >= 100_000_000 {
                out.push(format!(
                    "cpu limit ({}) reached: throttled for {:.1} s",
                    format_cpus(c),
                    throttled_ns as f64 / 1e9
                ));
            }
        }
        out
    }

    /// Lifts its CPU limit (its processes are about to be killed).
    pub(crate) fn unthrottle(&self) {
        if let Some(d) = self.dir("cpu") {
            let _ = match d.version {
                1 => std::fs::write(d.path.join("cpu.cfs_quota_us"), "-1"),
                _ => std::fs::write(d.path.join("cpu.max"), "max"),
            };
        }
    }

    /// Kills every process in it: `cgroup.kill` (v2); or freeze (v1 freezer), SIGKILL each,
    /// thaw; or SIGKILL each.
    fn kill_all(&self) {
        for d in self.dirs.iter().filter(|d| d.version == 2) {
            let _ = std::fs::write(d.path.join("cgroup.kill"), "1");
        }
        let freezer = self
            .dirs
            .iter()
            .find(|d| d.version == 1 && d.controllers.iter().any(|c| c == "freezer"));
        if let Some(f) = freezer {
            let state = f.path.join("freezer.state");
            if std::fs::write(&state, "FROZEN").is_ok() {
                let until = Instant::now() + Duration::from_millis(500);
                while Instant::now() < until
                    && std::fs::read_to_string(&state)
                        .map(|s| s.trim() != "FROZEN")
                        .unwrap_or(false)
                {
                    std::thread::sleep(Duration::from_millis(5));
                }
            }
        }
        for pid in self.procs() {
            // SAFETY: kill(2) of a process in the sandbox's own cgroup; frozen, it cannot exit
            // and leave its pid to another process meanwhile.
            unsafe { libc::kill(pid, libc::SIGKILL) };
        }
        if let Some(f) = freezer {
            let _ = std::fs::write(f.path.join("freezer.state"), "THAWED");
        }
    }

    /// Kills what is left in it and removes it (within 5 s).
    pub(crate) fn remove(&mut self) -> Result<(), String> {
        if self.removed {
            return Ok(());
        }
        self.removed = true;
        let deadline = Instant::now() + Duration::from_secs(5);
        loop {
            if !self.procs().is_empty() {
                self.kill_all();
            }
            let mut left = Vec::new();
            for d in &self.dirs {
                match std::fs::remove_dir(&d.path) {
                    Ok(()) => {}
                    Err(e) if e.kind() == ErrorKind::NotFound => {}
                    Err(e) => left.push(format!("{}: {e}", d.path.display())),
                }
            }
            if left.is_empty() {
                break;
            }
            if Instant::now() >= deadline {
                return Err(left.join("; "));
            }
            std::thread::sleep(Duration::from_millis(10));
        }
        // The shared parent goes once no other sandbox uses it (rmdir refuses otherwise).
        for d in &self.dirs {
            if let Some(parent) = d.path.parent() {
                let _ = std::fs::remove_dir(parent);
            }
        }
        Ok(())
    }
}

impl Drop for Cgroup {
    fn drop(&mut self) {
        let _ = self.remove();
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// This project's machine: v1 hierarchies for every controller, a cgroup2 mount that offers
    /// only hugetlb, and glassbox in a memory cgroup of its own.
    const HYBRID_MOUNTINFO: &str = "\
25 30 0:23 / /sys/fs/cgroup rw,relatime - tmpfs tmpfs rw,mode=755
26 25 0:24 / /sys/fs/cgroup/cpu rw,relatime - cgroup cgroup rw,cpu
27 25 0:25 / /sys/fs/cgroup/cpuacct rw,relatime - cgroup cgroup rw,cpuacct
28 25 0:26 / /sys/fs/cgroup/memory rw,relatime - cgroup cgroup rw,memory
29 25 0:27 / /sys/fs/cgroup/freezer rw,relatime - cgroup cgroup rw,freezer
30 25 0:28 / /sys/fs/cgroup/pids rw,relatime - cgroup cgroup rw,pids
31 25 0:29 / /sys/fs/cgroup/systemd rw,relatime - cgroup cgroup rw,name=systemd
32 25 0:30 / /sys/fs/cgroup/unified rw,relatime - cgroup2 cgroup2 rw
";
    const HYBRID_CGROUP: &str = "\
9:name=systemd:/
8:pids:/
6:freezer:/
4:memory:/process_api/abc
2:cpuacct:/
1:cpu:/
0::/
";

    fn files(map: &'static [(&'static str, &'static str)]) -> impl Fn(&Path) -> Option<String> {
        move |p| {
            map.iter()
                .find(|(k, _)| Path::new(k) == p)
                .map(|(_, v)| v.to_string())
        }
    }

    #[test]
    fn a_hybrid_host_limits_with_v1_and_says_why_not_v2() {
        let read = files(&[
            ("/sys/fs/cgroup/unified/cgroup.controllers", "hugetlb\n"),
            ("/sys/fs/cgroup/unified/cgroup.subtree_control", "\n"),
        ]);
        let host = Host::parse(HYBRID_MOUNTINFO, HYBRID_CGROUP, &read);
        let mem = host.hierarchy("memory").unwrap();
        assert_eq!(mem.version, 1);
        assert_eq!(mem.own, Path::new("/sys/fs/cgroup/memory/process_api/abc"));
        assert!(!mem.root);
        assert_eq!(
            host.hierarchy("pids").unwrap().own,
            Path::new("/sys/fs/cgroup/pids")
        );
        assert_eq!(host.hierarchy("cpu").unwrap().version, 1);
        assert!(host
            .hierarchies
            .iter()
            .any(|h| h.controllers == ["freezer"]));
        assert!(host.hierarchies.iter().all(|h| h.version == 1));
        assert!(
            host.notes
                .iter()
                .any(|n| n.contains("no controller glassbox uses")
                    && n.contains("memory, pids, cpu")),
            "{:?}",
            host.notes
        );
        let plan = host.plan();
        assert_eq!(plan["memory"], "cgroup v1");
        assert_eq!(plan["cpu"], "cgroup v1");
    }

    #[test]
    fn a_v2_root_with_controllers_is_preferred() {
        let mountinfo = "30 25 0:30 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw,nsdelegate\n";
        let read = files(&[
            (
                "/sys/fs/cgroup/cgroup.controllers",
                "cpuset cpu io memory pids\n",
            ),
            ("/sys/fs/cgroup/cgroup.subtree_control", ""),
        ]);
        let host = Host::parse(mountinfo, "0::/\n", &read);
        let h = host.hierarchy("memory").unwrap();
        assert_eq!((h.version, h.root), (2, true));
        assert_eq!(h.controllers, ["memory", "pids", "cpu"]);
        assert!(host.notes.is_empty(), "{:?}", host.notes);
    }

    #[test]
    fn a_v2_leaf_without_delegation_falls_back_to_rlimits() {
        // A user session: glassbox sits in a leaf with processes; nothing is delegated below.
        let mountinfo = "30 25 0:30 / /sys/fs/cgroup rw - cgroup2 cgroup2 rw\n";
        let read = files(&[
            (
                "/sys/fs/cgroup/user.slice/user-1000.slice/session-2.scope/cgroup.controllers",
                "memory pids\n",
            ),
            (
                "/sys/fs/cgroup/user.slice/user-1000.slice/session-2.scope/cgroup.subtree_control",
                "",
            ),
        ]);
        let host = Host::parse(
            mountinfo,
            "0::/user.slice/user-1000.slice/session-2.scope\n",
            &read,
        );
        assert!(host.hierarchies.is_empty());
        let plan = host.plan();
        assert_eq!(plan["memory"], "RLIMIT_DATA");
        assert_eq!(plan["pids"], "RLIMIT_NPROC");
        assert_eq!(plan["cpu"], "not enforced");
        assert_eq!(host.notes.len(), 1, "{:?}", host.notes);
    }

    #[test]
    fn a_container_mount_of_a_sub_cgroup_maps_paths() {
        // The hierarchy is mounted from /docker/x; this process is in /docker/x/app.
        let mountinfo = "40 30 0:26 /docker/x /sys/fs/cgroup/memory rw - cgroup cgroup rw,memory\n\
                         41 30 0:28 /docker/y /sys/fs/cgroup/pids rw - cgroup cgroup rw,pids\n";
        let cgroup = "4:memory:/docker/x/app\n8:pids:/elsewhere\n";
        let host = Host::parse(mountinfo, cgroup, &|_| None);
        assert_eq!(
            host.hierarchy("memory").unwrap().own,
            Path::new("/sys/fs/cgroup/memory/app")
        );
        assert!(host.hierarchy("pids").is_none());
        assert!(
            host.notes[0].contains("outside the mount"),
            "{:?}",
            host.notes
        );
    }

    #[test]
    fn sizes_parse_and_print() {
        assert_eq!(parse_size("512M").unwrap(), 512 * MIB);
        assert_eq!(parse_size("1g").unwrap(), GIB);
        assert_eq!(parse_size("1.5GiB").unwrap(), GIB + GIB / 2);
        assert_eq!(parse_size(" 4096 ").unwrap(), 4096);
        assert_eq!(parse_size("64 KiB").unwrap(), 64 << 10);
        for bad in ["", "M", "12X", "-1G", "0", "1e9", "NaN"] {
            assert!(parse_size(bad).is_err(), "{bad}");
        }
        assert_eq!(format_size(GIB), "1 GiB");
        assert_eq!(format_size(512 * MIB), "512 MiB");
        assert_eq!(format_size(GIB + GIB / 2), "1.5 GiB");
        assert_eq!(format_size(100), "100 bytes");
        assert_eq!(format_cpus(1.0), "1 CPU");
        assert_eq!(format_cpus(0.5), "0.5 CPU");
        assert_eq!(format_cpus(2.0), "2 CPUs");
    }

    #[test]
    fn limits_too_small_are_refused() {
        assert!(Limits::default().validate().is_ok());
        for l in [
            Limits {
                memory: Some(MIB),
                ..Limits::default()
            },
            Limits {
                pids: Some(2),
                ..Limits::default()
            },
            Limits {
                cpus: Some(0.0),
                ..Limits::default()
            },
            Limits {
                cpus: Some(f64::NAN),
                ..Limits::default()
            },
            Limits {
                disk: 1000,
                ..Limits::default()
            },
        ] {
            assert!(l.validate().is_err(), "{l:?}");
        }
        let unlimited = Limits {
            memory: None,
            pids: None,
            cpus: None,
            ..Limits::default()
        };
        assert!(unlimited.validate().is_ok());
    }

    /// The real cgroups of this host (root only; skipped, and said so, elsewhere).
    fn real_cgroup() -> Option<Cgroup> {
        let applied = apply(&Limits::default()).unwrap();
        if applied.cgroup.is_none() {
            eprintln!("skipped: no cgroup can be made here ({:?})", applied.record);
        }
        applied.cgroup
    }

    #[test]
    fn a_process_left_in_the_cgroup_is_killed_and_the_cgroup_removed() {
        use std::os::unix::process::ExitStatusExt;
        let Some(mut cg) = real_cgroup() else { return };
        let mut child = std::process::Command::new("sleep")
            .arg("60")
            .spawn()
            .unwrap();
        for f in cg.procs_files() {
            std::fs::write(&f, child.id().to_string()).unwrap();
        }
        assert_eq!(cg.procs(), vec![child.id() as i32]);
        let dirs: Vec<PathBuf> = cg.dirs.iter().map(|d| d.path.clone()).collect();
        assert!(dirs.iter().all(|d| d.exists()));
        cg.remove().unwrap();
        // Killed, not waited for (its minute's sleep would end it with a status).
        assert_eq!(child.wait().unwrap().signal(), Some(libc::SIGKILL));
        for d in dirs {
            assert!(!d.exists(), "{}", d.display());
        }
    }

    #[test]
    fn cgroups_of_a_dead_glassbox_are_swept() {
        let Some(cg) = real_cgroup() else { return };
        let parent = cg.dirs[0].path.parent().unwrap().to_path_buf();
        // A pid that is gone: a child that ran and was reaped.
        let mut gone = std::process::Command::new("true").spawn().unwrap();
        let pid = gone.id();
        gone.wait().unwrap();
        let stale = parent.join(format!("gb-{pid}-1"));
        std::fs::create_dir(&stale).unwrap();
        let again = real_cgroup().unwrap();
        assert!(!stale.exists(), "{} left", stale.display());
        drop((cg, again));
    }

    #[test]
    fn keyed_files_are_read() {
        assert_eq!(keyed("max 3\n", "max"), Some(3));
        assert_eq!(
            keyed("oom_kill_disable 0\nunder_oom 0\noom_kill 2\n", "oom_kill"),
            Some(2)
        );
        assert_eq!(
            keyed("low 0\nhigh 0\nmax 5\noom 1\noom_kill 1\n", "max"),
            Some(5)
        );
        assert_eq!(keyed("", "max"), None);
    }
}
