//! What the recorder reads about a caller: its memory, its links in /proc, its pids.

use std::collections::HashMap;
use std::io;
use std::os::unix::ffi::OsStrExt;
use std::os::unix::ffi::OsStringExt;

/// Reads `buf.len()` bytes at `addr` of process `pid`; returns how many were read.
pub(crate) fn read_mem(pid: u32, addr: u64, buf: &mut [u8]) -> io::Result<usize> {
    if addr == 0 {
        return Err(io::Error::from_raw_os_error(libc::EFAULT));
    }
    let local = libc::iovec {
        iov_base: buf.as_mut_ptr().cast(),
        iov_len: buf.len(),
    };
    let remote = libc::iovec {
        iov_base: addr as *mut libc::c_void,
        iov_len: buf.len(),
    };
    // SAFETY: `local` describes our own writable buffer; the remote range is only read by the
    // kernel, which checks it.
    let n = unsafe { libc::process_vm_readv(pid as i32, &local, 1, &remote, 1, 0) };
    if n < 0 {
        Err(io::Error::last_os_error())
    } else {
        Ok(n as usize)
    }
}

const PAGE: u64 = 4096;

/// Reads a NUL-terminated string of at most `max` bytes, page by page so that a string ending
/// just before an unmapped page is still read.
pub(crate) fn read_cstr(pid: u32, addr: u64, max: usize) -> io::Result<Vec<u8>> {
    let mut out = Vec::new();
    let mut at = addr;
    let mut chunk = [0u8; PAGE as usize];
    while out.len() < max {
        let to_page_end = (PAGE - (at % PAGE)) as usize;
        let want = to_page_end.min(max - out.len());
        let n = read_mem(pid, at, &mut chunk[..want])?;
        if n == 0 {
            break;
        }
        if let Some(end) = chunk[..n].iter().position(|&b| b == 0) {
            out.extend_from_slice(&chunk[..end]);
            return Ok(out);
        }
        out.extend_from_slice(&chunk[..n]);
        at += n as u64;
    }
    Ok(out)
}

/// Reads a native-endian u64 at `addr`.
pub(crate) fn read_u64(pid: u32, addr: u64) -> io::Result<u64> {
    let mut b = [0u8; 8];
    if read_mem(pid, addr, &mut b)? != 8 {
        return Err(io::Error::from_raw_os_error(libc::EFAULT));
    }
    Ok(u64::from_ne_bytes(b))
}

/// The target of a /proc link of task `tid` (`cwd`, `fd/3`, `exe`), as bytes.
///
/// The kernel prints it relative to the sandbox's root: the sandbox's root is not reachable
/// from glassbox's, so the path walk stops there.
pub(crate) fn proc_link(tid: u32, what: &str) -> Option<Vec<u8>> {
    std::fs::read_link(format!("/proc/{tid}/{what}"))
        .ok()
        .map(|p| p.as_os_str().as_bytes().to_vec())
}

/// Resolves `path` as the kernel would start to: absolute as is, relative against `dirfd`
/// (`AT_FDCWD` for the working directory).
pub(crate) fn absolute(tid: u32, dirfd: Option<i64>, path: &[u8]) -> Vec<u8> {
    absolute_or(tid, dirfd, path, None)
}

/// As [`absolute`], with a working directory to fall back on when the task is gone.
pub(crate) fn absolute_or(
    tid: u32,
    dirfd: Option<i64>,
    path: &[u8],
    cwd_fallback: Option<&[u8]>,
) -> Vec<u8> {
    if path.first() == Some(&b'/') {
        return path.to_vec();
    }
    let at_cwd = match dirfd {
        None => true,
        Some(fd) => fd as i32 == libc::AT_FDCWD,
    };
    let base = if at_cwd {
        proc_link(tid, "cwd").or_else(|| cwd_fallback.map(<[u8]>::to_vec))
    } else {
        proc_link(tid, &format!("fd/{}", dirfd.unwrap_or(0) as i32))
    };
    // An unknown base stays visible as such rather than being guessed.
    let mut out = base.unwrap_or_else(|| b"?".to_vec());
    if path.is_empty() {
        return out;
    }
    if out.last() != Some(&b'/') {
        out.push(b'/');
    }
    out.extend_from_slice(path);
    out
}

/// Host thread id → (pid, parent pid) inside the sandbox's pid namespace.
#[derive(Debug, Default)]
pub(crate) struct Pids {
    by_tid: HashMap<u32, (i32, i32)>,
    ns_of_host: HashMap<i32, i32>,
    /// Parent of each sandbox pid, as last seen: for processes gone before an asynchronous
    /// record of theirs is processed.
    parent_of: HashMap<i32, i32>,
    /// Working directory of each sandbox pid at its exec (same use).
    cwd_at_exec: HashMap<i32, Vec<u8>>,
}

fn status_fields(pid: i32) -> Option<(Vec<i32>, i32)> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    let mut nstgid = Vec::new();
    let mut ppid = 0;
    for line in text.lines() {
        if let Some(v) = line.strip_prefix("NStgid:") {
            nstgid = v
                .split_whitespace()
                .filter_map(|x| x.parse().ok())
                .collect();
        } else if let Some(v) = line.strip_prefix("PPid:") {
            ppid = v.trim().parse().unwrap_or(0);
        }
    }
    Some((nstgid, ppid))
}

impl Pids {
    /// The pid and parent pid inside the sandbox of host task `tid` (cached per task).
    pub(crate) fn lookup(&mut self, tid: u32) -> (i32, i32) {
        if let Some(&v) = self.by_tid.get(&tid) {
            return v;
        }
        let v = match status_fields(tid as i32) {
            Some((nstgid, host_ppid)) => {
                let pid = nstgid.last().copied().unwrap_or(0);
                (pid, self.ns_pid(host_ppid))
            }
            None => (0, 0),
        };
        if v.0 != 0 {
            self.parent_of.insert(v.0, v.1);
        }
        self.by_tid.insert(tid, v);
        v
    }

    /// As [`Pids::lookup`] for a task whose sandbox pid the kernel already reported, which may
    /// have exited since.
    pub(crate) fn lookup_known(&mut self, tid: u32, ns_pid: i32) -> (i32, i32) {
        let v = self.lookup(tid);
        if v.0 == ns_pid {
            return v;
        }
        // Gone (or its host id reused): what was last seen of it.
        self.by_tid.remove(&tid);
        (ns_pid, self.parent_of.get(&ns_pid).copied().unwrap_or(0))
    }

    /// Remembers the working directory of sandbox pid `pid` at its exec.
    pub(crate) fn note_exec_cwd(&mut self, pid: i32, cwd: Vec<u8>) {
        self.cwd_at_exec.insert(pid, cwd);
    }

    /// The working directory of sandbox pid `pid` at its last exec.
    pub(crate) fn exec_cwd(&self, pid: i32) -> Option<&[u8]> {
        self.cwd_at_exec.get(&pid).map(Vec::as_slice)
    }

    /// Forgets a task (after an exec its thread id may change, and its parent may have).
    pub(crate) fn forget(&mut self, tid: u32) {
        self.by_tid.remove(&tid);
    }

    fn ns_pid(&mut self, host_pid: i32) -> i32 {
        if host_pid <= 0 {
            return 0;
        }
        if let Some(&v) = self.ns_of_host.get(&host_pid) {
            return v;
        }
        // A parent outside the sandbox's namespace (one NStgid entry) is 0.
        let v = match status_fields(host_pid) {
            Some((nstgid, _)) if nstgid.len() > 1 => nstgid.last().copied().unwrap_or(0),
            _ => 0,
        };
        self.ns_of_host.insert(host_pid, v);
        v
    }
}

/// The thread-group id of task `tid` (`Tgid:` in its status): an exec from any thread leaves
/// the process under this id.
pub(crate) fn tgid(tid: u32) -> Option<u32> {
    let status = std::fs::read_to_string(format!("/proc/{tid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("Tgid:"))
        .and_then(|v| v.trim().parse().ok())
}

/// What an exec of `path` by task `tid` should run, resolved in the task's own root: symlinks
/// followed, and for a script (`#!`), its interpreter. `path` itself when it cannot be
/// resolved (it does not exist: the exec will fail).
pub(crate) fn exec_target(tid: u32, path: &[u8]) -> Vec<u8> {
    use std::io::Read;
    let root = format!("/proc/{tid}/root");
    let inside = |p: &[u8]| {
        let mut full = root.clone().into_bytes();
        full.extend_from_slice(p);
        std::path::PathBuf::from(std::ffi::OsString::from_vec(full))
    };
    let canonical = |p: &[u8]| -> Option<Vec<u8>> {
        let c = std::fs::canonicalize(inside(p)).ok()?;
        let c = c.as_os_str().as_bytes();
        // Through /proc/PID/root, canonicalize keeps the prefix; strip it back off.
        Some(c.strip_prefix(root.as_bytes()).unwrap_or(c).to_vec())
    };
    // The task's own /proc links (a runtime re-executing itself through /proc/self/exe, a
    // descriptor through /dev/fd): "self" would mean glassbox here, so read the task's.
    for prefix in [&b"/proc/self/"[..], b"/proc/thread-self/", b"/dev/fd/"] {
        if let Some(rest) = path.strip_prefix(prefix) {
            let rest = String::from_utf8_lossy(rest);
            let link = if prefix == b"/dev/fd/" {
                format!("fd/{rest}")
            } else {
                rest.into_owned()
            };
            if let Some(target) = proc_link(tid, &link) {
                return target;
            }
        }
    }
    let mut head = [0u8; 256];
    let n = std::fs::File::open(inside(path))
        .and_then(|mut f| f.read(&mut head))
        .unwrap_or(0);
    let head = &head[..n];
    let target = match head.strip_prefix(b"#!") {
        Some(rest) => {
            let line = rest.split(|&b| b == b'\n').next().unwrap_or(&[]);
            let interpreter: Vec<u8> = line
                .iter()
                .copied()
                .skip_while(|b| *b == b' ' || *b == b'\t')
                .take_while(|b| *b != b' ' && *b != b'\t')
                .collect();
            if interpreter.is_empty() {
                path.to_vec()
            } else {
                interpreter
            }
        }
        None => path.to_vec(),
    };
    canonical(&target).unwrap_or(target)
}
