//! Canary Unix sockets: a fake Docker daemon at `/run/docker.sock` (also reached as
//! `/var/run/docker.sock`) and a fake SSH agent at `$SSH_AUTH_SOCK`. glassbox binds them
//! inside the sandbox's own `/run` and `/tmp` (through `/proc/PID/root`, before the server
//! starts) and records every connection and what it sent, as a [`Flow`] of protocol `unix`.

use glassbox_model::{Bytes, Flow, FlowProtocol, NetworkMode, SockAddr, FLOW_SAMPLE_LIMIT};
use glassbox_trace::Clock;
use std::io::{Read, Write};
use std::os::unix::fs::PermissionsExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

/// Connections kept per run; more are answered, counted in the last flow's note.
const MAX_CONNECTIONS: usize = 256;

/// The Docker socket's path inside the sandbox.
pub(crate) const DOCKER: &str = "/run/docker.sock";
/// The same socket through the `/var/run` symlink, as most clients name it.
pub(crate) const DOCKER_VAR: &str = "/var/run/docker.sock";

/// What the fake service answers, so that a client sends its real request.
#[derive(Clone, Copy, Debug)]
enum Service {
    /// HTTP over the socket: a `503` once the request's headers are in.
    Docker,
    /// The SSH agent protocol: `SSH_AGENT_FAILURE` to every request.
    SshAgent,
}

/// The planted sockets of one run and the thread serving them.
pub(crate) struct Canaries {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<()>>,
    flows: Arc<Mutex<Vec<Flow>>>,
}

/// A fresh `$SSH_AUTH_SOCK` path, in the form `ssh-agent` makes them
/// (`/tmp/ssh-XXXXXXXXXX/agent.PID`).
pub(crate) fn ssh_agent_path() -> String {
    const ALNUM: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let rnd = glassbox_sandbox::honeytokens::random_bytes(12).unwrap_or_else(|_| vec![7; 12]);
    let dir: String = rnd[..10]
        .iter()
        .map(|b| ALNUM[usize::from(*b) % ALNUM.len()] as char)
        .collect();
    let pid = 1000 + u16::from_ne_bytes([rnd[10], rnd[11]]) % 30000;
    format!("/tmp/ssh-{dir}/agent.{pid}")
}

impl Canaries {
    /// Binds the canaries inside the sandbox of process `pid` (its root is
    /// `/proc/PID/root`), owned by the sandbox user's host uid, and starts serving them.
    pub(crate) fn plant(
        pid: i32,
        host_uid: u32,
        ssh_agent: &str,
        mode: NetworkMode,
        clock: Arc<Clock>,
    ) -> Result<Canaries, String> {
        let root = format!("/proc/{pid}/root");
        let paths = [
            (DOCKER.to_string(), Service::Docker),
            (ssh_agent.to_string(), Service::SshAgent),
        ];
        // The sandbox's tmpfs mounts belong to its user namespace, where only the sandbox
        // user's host uid is mapped: files made there must be that uid's. A thread of its own
        // takes it as file-system uid (per thread in Linux), so nothing else in glassbox does.
        let listeners = std::thread::spawn(move || -> Result<Vec<_>, String> {
            // SAFETY: setfsuid/setfsgid change this thread's file-system ids only.
            unsafe {
                libc::setfsgid(host_uid);
                libc::setfsuid(host_uid);
            }
            let mut listeners = Vec::new();
            for (path, service) in paths {
                let host = format!("{root}{path}");
                let parent = std::path::Path::new(&host)
                    .parent()
                    .ok_or("canary socket without a folder")?
                    .to_path_buf();
                if !parent.exists() {
                    std::fs::create_dir_all(&parent)
                        .map_err(|e| format!("canary folder {}: {e}", parent.display()))?;
                    std::fs::set_permissions(&parent, std::fs::Permissions::from_mode(0o700))
                        .map_err(|e| format!("canary folder: {e}"))?;
                }
                let l =
                    UnixListener::bind(&host).map_err(|e| format!("canary socket {path}: {e}"))?;
                l.set_nonblocking(true)
                    .map_err(|e| format!("canary socket {path}: {e}"))?;
                // The Docker socket as a docker group member sees it; the agent's as its
                // owner does.
                let bits = match service {
                    Service::Docker => 0o666,
                    Service::SshAgent => 0o600,
                };
                std::fs::set_permissions(&host, std::fs::Permissions::from_mode(bits))
                    .map_err(|e| format!("canary socket {path}: {e}"))?;
                listeners.push((path, service, l));
            }
            Ok(listeners)
        })
        .join()
        .map_err(|_| "the canary set-up thread panicked".to_string())??;
        let stop = Arc::new(AtomicBool::new(false));
        let flows = Arc::new(Mutex::new(Vec::new()));
        let (stop2, flows2) = (stop.clone(), flows.clone());
        let thread = std::thread::Builder::new()
            .name("canary-sockets".into())
            .spawn(move || serve(listeners, mode, &clock, &stop2, &flows2))
            .map_err(|e| format!("canary thread: {e}"))?;
        Ok(Canaries {
            stop,
            thread: Some(thread),
            flows,
        })
    }

    /// Stops serving; returns the recorded connections.
    pub(crate) fn finish(mut self) -> Vec<Flow> {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(t) = self.thread.take() {
            let _ = t.join();
        }
        std::mem::take(&mut *self.flows.lock().unwrap_or_else(|e| e.into_inner()))
    }
}

/// Accepts and serves connections, one at a time (a client gets at most 2 s), until `stop`.
fn serve(
    listeners: Vec<(String, Service, UnixListener)>,
    mode: NetworkMode,
    clock: &Clock,
    stop: &AtomicBool,
    flows: &Mutex<Vec<Flow>>,
) {
    while !stop.load(Ordering::Relaxed) {
        let mut idle = true;
        for (path, service, l) in &listeners {
            if let Ok((stream, _)) = l.accept() {
                idle = false;
                let t_ns = clock.now_ns();
                let (sample, total, replied) = converse(stream, *service, stop);
                let mut f = flows.lock().unwrap_or_else(|e| e.into_inner());
                if f.len() >= MAX_CONNECTIONS {
                    continue;
                }
                let id = f.len() as u64;
                let truncated = total > sample.len() as u64;
                f.push(Flow {
                    id,
                    mode,
                    t_ns,
                    end_ns: clock.now_ns(),
                    protocol: FlowProtocol::Unix,
                    src: None,
                    dst: SockAddr::Unix {
                        path: Bytes::from(path.as_str()),
                        is_abstract: false,
                    },
                    dns_name: None,
                    dns: None,
                    sni: None,
                    http: None,
                    packets_out: u64::from(total > 0),
                    bytes_out: total,
                    bytes_in: replied,
                    sample: Bytes::from(sample),
                    sample_truncated: truncated,
                    events: Vec::new(),
                    note: Some(match service {
                        Service::Docker => "canary socket: a fake Docker daemon".into(),
                        Service::SshAgent => "canary socket: a fake SSH agent".into(),
                    }),
                    ..Default::default()
                });
            }
        }
        if idle {
            std::thread::sleep(Duration::from_millis(10));
        }
    }
}

/// Reads what the client sends (until it closes, 2 s pass, or 500 ms of silence), answering
/// like the service would refuse. Returns the first bytes, the total, and the bytes answered.
fn converse(mut s: UnixStream, service: Service, stop: &AtomicBool) -> (Vec<u8>, u64, u64) {
    let _ = s.set_read_timeout(Some(Duration::from_millis(500)));
    let start = Instant::now();
    let mut sample = Vec::new();
    let mut total = 0u64;
    let mut replied = 0u64;
    let mut buf = [0u8; 8192];
    while start.elapsed() < Duration::from_secs(2) && !stop.load(Ordering::Relaxed) {
        let n = match s.read(&mut buf) {
            Ok(0) | Err(_) => break,
            Ok(n) => n,
        };
        total += n as u64;
        let room = FLOW_SAMPLE_LIMIT.saturating_sub(sample.len());
        sample.extend_from_slice(&buf[..n.min(room)]);
        let reply: &[u8] = match service {
            Service::Docker if sample.windows(4).any(|w| w == b"\r\n\r\n") && replied == 0 => {
                b"HTTP/1.1 503 Service Unavailable\r\nContent-Length: 0\r\nConnection: close\r\n\r\n"
            }
            Service::SshAgent if total >= 5 => &[0, 0, 0, 1, 5],
            _ => &[],
        };
        if !reply.is_empty() && s.write_all(reply).is_ok() {
            replied += reply.len() as u64;
        }
    }
    (sample, total, replied)
}
