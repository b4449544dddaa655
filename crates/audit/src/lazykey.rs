//! The planted RSA key, made when it is first opened.
//!
//! A fresh RSA-2048 key costs 0.2 to 1.2 s of CPU (`ssh-keygen`), more than the rest of a run's
//! set-up, and most servers never open `~/.ssh/id_rsa`. So where glassbox may (as root), the
//! file is planted with a placeholder of the same form and size, and a fanotify permission mark
//! (`FAN_OPEN_PERM`) holds the first open of it until the real key is written through the
//! event's own descriptor (which raises no event of its own); then the open goes on and reads
//! the real key. The key is made once per audit and planted as is in a later run. No process
//! of the sandbox can read the placeholder: only `stat` sees its size, within a few bytes of
//! the key's.

use glassbox_sandbox::honeytokens;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;

/// The key of one audit: made at most once, by whichever run opens it first.
#[derive(Clone, Debug)]
pub(crate) struct LazyKey {
    pub user: String,
    pub hostname: String,
    /// The key once made; or why making it failed.
    pub made: Arc<Mutex<Option<Result<String, String>>>>,
}

impl LazyKey {
    /// Whether this host lets glassbox hold an open until the key is written (a permission
    /// mark needs `CAP_SYS_ADMIN`).
    pub(crate) fn available() -> bool {
        open_group().is_ok()
    }

    /// The key, if it was made.
    pub(crate) fn key(&self) -> Option<String> {
        self.made
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .as_ref()
            .and_then(|r| r.as_ref().ok().cloned())
    }

    fn make(&self) -> Result<String, String> {
        let mut made = self.made.lock().unwrap_or_else(|e| e.into_inner());
        if made.is_none() {
            *made =
                Some(honeytokens::rsa_key(&self.user, &self.hostname).map_err(|e| e.to_string()));
        }
        made.clone().unwrap_or_else(|| Err("no key".into()))
    }
}

fn open_group() -> Result<OwnedFd, String> {
    // SAFETY: fanotify_init with flag arguments only.
    let fd = unsafe {
        libc::fanotify_init(
            libc::FAN_CLASS_CONTENT | libc::FAN_CLOEXEC | libc::FAN_NONBLOCK,
            (libc::O_RDWR | libc::O_LARGEFILE) as libc::c_uint,
        )
    };
    if fd < 0 {
        return Err(format!(
            "fanotify permission events: {}",
            std::io::Error::last_os_error()
        ));
    }
    // SAFETY: the descriptor is new and ours.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

/// Holds the first open of the placeholder at `host_path` until the key is written.
pub(crate) struct KeyGate {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
}

impl KeyGate {
    /// Marks `host_path` (the placeholder seen through `/proc/PID/root`) and serves its opens.
    pub(crate) fn start(host_path: &Path, key: LazyKey) -> Result<KeyGate, String> {
        let group = open_group()?;
        let path = std::ffi::CString::new(host_path.as_os_str().as_encoded_bytes())
            .map_err(|e| e.to_string())?;
        // SAFETY: a valid group descriptor and a NUL-terminated path.
        let r = unsafe {
            libc::fanotify_mark(
                group.as_raw_fd(),
                libc::FAN_MARK_ADD,
                libc::FAN_OPEN_PERM,
                libc::AT_FDCWD,
                path.as_ptr(),
            )
        };
        if r != 0 {
            return Err(format!(
                "cannot mark {}: {}",
                host_path.display(),
                std::io::Error::last_os_error()
            ));
        }
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let thread = std::thread::Builder::new()
            .name("key-gate".into())
            .spawn(move || serve(group, key, &stop2))
            .map_err(|e| e.to_string())?;
        Ok(KeyGate {
            stop,
            thread: Some(thread),
        })
    }
}

impl Drop for KeyGate {
    fn drop(&mut self) {
        // Closing the group lets any open still held go on (the kernel allows it).
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
    }
}

fn serve(group: OwnedFd, key: LazyKey, stop: &AtomicBool) {
    #[repr(C, align(8))]
    struct Buf([u8; 4096]);
    let mut buf = Buf([0; 4096]);
    let size = std::mem::size_of::<libc::fanotify_event_metadata>();
    while !stop.load(Ordering::Relaxed) {
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
        let got = &buf.0[..n as usize];
        let mut off = 0;
        while off + size <= got.len() {
            // SAFETY: `size` bytes from `off` are in the buffer; the struct is plain old data.
            let m: libc::fanotify_event_metadata =
                unsafe { std::ptr::read_unaligned(got.as_ptr().add(off).cast()) };
            let len = m.event_len as usize;
            if len < size || off + len > got.len() {
                break;
            }
            off += len;
            if m.fd < 0 {
                continue;
            }
            // SAFETY: the kernel installed this descriptor for us alone.
            let fd = unsafe { OwnedFd::from_raw_fd(m.fd) };
            if m.mask & libc::FAN_OPEN_PERM != 0 {
                if let Ok(pem) = key.make() {
                    write_key(&fd, pem.as_bytes());
                }
                let resp = libc::fanotify_response {
                    fd: m.fd,
                    response: libc::FAN_ALLOW,
                };
                // SAFETY: a response for an event of this group, of its exact size.
                unsafe {
                    libc::write(
                        group.as_raw_fd(),
                        (&resp as *const libc::fanotify_response).cast(),
                        std::mem::size_of::<libc::fanotify_response>(),
                    )
                };
            }
            drop(fd);
        }
    }
}

/// Writes the key over the placeholder through the event's descriptor, unless it is there.
fn write_key(fd: &OwnedFd, pem: &[u8]) {
    let mut head = vec![0u8; pem.len()];
    // SAFETY: head is writable for its length; pread leaves the file offset alone.
    let n = unsafe { libc::pread(fd.as_raw_fd(), head.as_mut_ptr().cast(), head.len(), 0) };
    if n as usize == pem.len() && head == pem {
        return;
    }
    // SAFETY: pem is readable for its length; pwrite at offset 0, then the size set to it.
    unsafe {
        libc::pwrite(fd.as_raw_fd(), pem.as_ptr().cast(), pem.len(), 0);
        libc::ftruncate(fd.as_raw_fd(), pem.len() as libc::off_t);
    }
}
