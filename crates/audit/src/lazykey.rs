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
use glassbox_trace::OpenGate;
use std::fs::File;
use std::os::unix::fs::FileExt;
use std::path::Path;
use std::sync::{Arc, Mutex};

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
        OpenGate::available()
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

/// Holds the first open of the placeholder at `host_path` until the key is written
/// ([`glassbox_trace::OpenGate`]: the fanotify permission mark, beside the honeytoken watch).
pub(crate) struct KeyGate {
    /// Held for its `Drop`, which lets any open still held go on.
    _gate: OpenGate,
}

impl KeyGate {
    /// Marks `host_path` (the placeholder seen through `/proc/PID/root`) and serves its opens.
    pub(crate) fn start(host_path: &Path, key: LazyKey) -> Result<KeyGate, String> {
        OpenGate::start(host_path, move |file| {
            if let Ok(pem) = key.make() {
                write_key(file, pem.as_bytes());
            }
        })
        .map(|gate| KeyGate { _gate: gate })
        .map_err(|e| e.to_string())
    }
}

/// Writes the key over the placeholder through the event's descriptor, unless it is there
/// (a later open of the same run).
fn write_key(file: &File, pem: &[u8]) {
    let mut head = vec![0u8; pem.len()];
    if file.read_exact_at(&mut head, 0).is_ok() && head == pem {
        return;
    }
    if file.write_all_at(pem, 0).is_ok() {
        let _ = file.set_len(pem.len() as u64);
    }
}
