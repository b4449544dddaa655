//! What `audit` and `trace` share: a sandbox with planted secrets, its recorder, and the
//! event stream written as it happens.

use crate::canary::{self, Canaries};
use crate::lazykey::KeyGate;
use crate::recording::{
    EdgeRecord, EdgeServer, EventSink, RecorderChoice, RecorderResult, Recording, RunPlan,
};
use crate::secrets::Secrets;
use crate::Error;
use glassbox_model::{Event, SandboxSettings};
use glassbox_plan::target::Resolved;
use glassbox_sandbox::{Config, NetworkSetup, Sandbox};
use glassbox_trace::{rules, FileChannel, Recorder, RecorderStats};
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

/// A started sandbox with its recorder running.
pub(crate) struct Running {
    pub sandbox: Sandbox,
    pub settings: SandboxSettings,
    /// How calls are recorded.
    pub mechanism: String,
    /// Why the honeytoken ground truth is not observed in this run (`None`: it is).
    pub ground_truth: Option<String>,
    stop: Arc<AtomicBool>,
    recorder: Option<JoinHandle<RecorderResult>>,
    /// The network edge of this run, when it has one.
    pub edge: Option<EdgeRun>,
    /// Holds the first open of the RSA key until it is made (dropped with the run).
    _key_gate: Option<KeyGate>,
    /// The planted files, and what to look for in the files the run leaves.
    planted: Vec<crate::left::Planted>,
    needles: crate::left::Needles,
}

/// A run's network edge: the thread serving the TUN descriptor, the canary sockets, and the
/// isolation checks made before the server started.
pub(crate) struct EdgeRun {
    pub isolation: Vec<String>,
    pub canary_sockets: Vec<String>,
    server: EdgeServer,
    canaries: Option<Canaries>,
}

impl EdgeRun {
    fn finish(&mut self) -> EdgeRecord {
        let (mut flows, counters, error) = self.server.finish();
        if let Some(c) = self.canaries.take() {
            flows.extend(c.finish());
        }
        EdgeRecord {
            flows,
            counters,
            error,
        }
    }
}

/// The edge's set-up inside the sandbox.
fn network_setup() -> NetworkSetup {
    NetworkSetup {
        interface: glassbox_net::INTERFACE.into(),
        v4: glassbox_net::SANDBOX_V4,
        v4_prefix: 15,
        v6: glassbox_net::SANDBOX_V6,
        // One second per try: in the denied run nothing answers, and a lookup must not outlast
        // a tool call.
        resolv_conf: format!(
            "nameserver {}\noptions timeout:1 attempts:2\n",
            glassbox_net::RESOLVER_V4
        ),
        // An unanswered connect gives up after about 3 s instead of 2 minutes.
        tcp_syn_retries: Some(1),
    }
}

/// Plants fresh secrets, starts `target` in the sandbox, and records it into `sink`.
/// `keep` says whether the events are also kept in memory (for checks).
pub(crate) fn start(
    target: &Resolved,
    cwd: &Path,
    sink: Box<dyn EventSink>,
    keep: bool,
    choice: RecorderChoice,
    plan: RunPlan,
) -> Result<Running, Error> {
    let files_by_ebpf = match choice {
        RecorderChoice::Notify => false,
        RecorderChoice::Auto => glassbox_trace::file_channel_available().is_ok(),
        RecorderChoice::Ebpf => {
            glassbox_trace::file_channel_available().map_err(|e| {
                Error::Usage(format!(
                    "the eBPF recorder is not available here ({e}); it needs CAP_BPF and CAP_PERFMON (root): use --recorder notify"
                ))
            })?;
            true
        }
    };
    // An audit settles a key made in an earlier run before it hands the secrets over.
    let secrets = plan.secrets;
    let rsa_path = secrets.rsa_path();
    let Secrets {
        user,
        hostname,
        home,
        files,
        tokens,
        ssh_agent,
        lazy_rsa,
    } = secrets;
    let mut key_gate = None;
    // The lazily made RSA key's content is made while the run goes: never listed.
    let planted_files: Vec<crate::left::Planted> = files
        .iter()
        .map(|f| {
            let sha = (lazy_rsa.is_none() || f.path != rsa_path)
                .then(|| crate::left::digest(&f.contents));
            (f.path.clone(), sha)
        })
        .collect();
    let needles = crate::left::Needles::new(&tokens, &home, plan.marker.as_deref());
    let mut env = target.env.clone();
    if plan.network.is_some() {
        env.push(("SSH_AUTH_SOCK".to_string(), ssh_agent.clone()));
    }
    let cfg = Config {
        program: target.program.clone(),
        argv: target.argv.clone(),
        cwd: cwd.to_path_buf(),
        extra_ro: target.extra_ro.clone(),
        extra_rw: target.extra_rw.clone(),
        user,
        hostname,
        path_prefix: target.path_prefix.clone(),
        env,
        files,
        rules: rules(files_by_ebpf),
        network: plan.network.map(|_| network_setup()),
        refusals: glassbox_sandbox::seccomp::Refusals::Recorded,
        limits: plan.limits.clone(),
        // The server trusts the audit's CA wherever its runtime looks, and Python's certifi
        // bundles under what it sees read-only (never under an install's writable folder:
        // the installer may replace them).
        trust: plan.trust.as_ref().map(|ca| {
            let mut roots = target.extra_ro.clone();
            roots.push(cwd.to_path_buf());
            roots.retain(|r| !target.extra_rw.iter().any(|w| r.starts_with(w)));
            glassbox_sandbox::Trust {
                ca_pem: ca.pem.clone(),
                ca_der: ca.der.clone(),
                extra_bundles: glassbox_sandbox::certifi_bundles(&roots),
            }
        }),
        clock: plan.clock_shift,
    };
    let clock = plan.clock.clone();
    let mut files = None;
    let mut isolation = Vec::new();
    let mut canaries = None;
    // The honeytoken ground truth (fanotify): marks on the planted files, made once they
    // exist and before the server runs. Where it is not available, the channel is reported
    // not observed, with the reason.
    // Files only: a declared secret (`env:NAME`) is a value, not a path.
    let planted: Vec<String> = tokens
        .iter()
        .filter(|t| t.path.starts_with('/'))
        .map(|t| t.path.clone())
        .collect();
    let mut watch = glassbox_trace::HoneytokenWatch::new().map_err(|e| e.to_string());
    if let Ok(w) = watch.as_mut() {
        // glassbox's own reads of the planted files (the walk of what the run left,
        // `crate::left`) are not the server's.
        w.ignore(std::process::id() as i32);
    }
    let mut pid_ns = None;
    // SAFETY: geteuid cannot fail.
    let host_uid = match unsafe { libc::geteuid() } {
        0 => glassbox_sandbox::HOST_UID_WHEN_ROOT,
        uid => uid,
    };
    let mut sandbox = Sandbox::spawn_with(&cfg, &mut |server_pid| {
        if let Some(mode) = plan.network {
            // The hard rule: no server runs with a network unless its packets can only end
            // in glassbox. Checked from outside, before it executes.
            let (checks, ok) =
                glassbox_sandbox::verify_isolation(server_pid, glassbox_net::INTERFACE);
            if !ok {
                return Err(format!(
                    "refusing to run the server: its network namespace is not isolated behind glassbox's edge ({})",
                    checks.join("; ")
                ));
            }
            isolation = checks;
            canaries = Some(Canaries::plant(
                server_pid,
                host_uid,
                &ssh_agent,
                mode,
                clock.clone(),
            )?);
        }
        if let Some(key) = &lazy_rsa {
            let host = format!("/proc/{server_pid}/root{rsa_path}");
            key_gate = Some(KeyGate::start(Path::new(&host), key.clone())?);
        }
        if let Ok(w) = watch.as_mut() {
            let root = std::path::PathBuf::from(format!("/proc/{server_pid}/root"));
            let marked = planted
                .iter()
                .try_for_each(|p| w.watch_planted(&root, p, &home))
                .map_err(|e| e.to_string())
                .and_then(|()| {
                    glassbox_trace::PidNamespace::of(server_pid).map_err(|e| e.to_string())
                });
            match marked {
                Ok(ns) => pid_ns = Some(ns),
                Err(e) => watch = Err(format!("cannot watch the planted files: {e}")),
            }
        }
        if files_by_ebpf {
            let channel = match plan.ring {
                Some(bytes) => FileChannel::attach_with_ring(server_pid, bytes),
                None => FileChannel::attach(server_pid),
            };
            files = Some(channel.map_err(|e| format!("cannot attach the eBPF recorder: {e}"))?);
        }
        Ok(())
    })?;
    let mut settings = sandbox.settings().clone();
    settings.honeytokens = tokens;
    settings.workspace = glassbox_sandbox::workspace::dir(&home);
    let listener = sandbox
        .listener
        .take()
        .ok_or_else(|| Error::Internal("no seccomp listener".into()))?;
    let edge = match (plan.network, sandbox.tun.take()) {
        (Some(mode), Some(tun)) => {
            let server = match plan.wire {
                Some(card) => EdgeServer::forward(tun, card)?,
                None => EdgeServer::serve(
                    tun,
                    glassbox_net::Framing::Ip,
                    mode,
                    plan.relay.clone(),
                    plan.answer.clone(),
                    clock.clone(),
                )?,
            };
            Some(EdgeRun {
                isolation,
                canary_sockets: vec![
                    canary::DOCKER_VAR.to_string(),
                    canary::DOCKER.to_string(),
                    ssh_agent.clone(),
                ],
                server,
                canaries,
            })
        }
        (Some(_), None) => {
            return Err(Error::Internal(
                "the sandbox gave no edge descriptor".into(),
            ))
        }
        _ => None,
    };
    let mut recorder = Recorder::new(listener, &home, clock.clone());
    let ground_truth = match (watch, pid_ns) {
        (Ok(w), Some(ns)) => {
            recorder = recorder.with_honeytokens(w, ns);
            None
        }
        (Err(e), _) => Some(e),
        (Ok(_), None) => Some("the sandbox's pid namespace could not be read".into()),
    };
    if let Some(f) = files {
        recorder = recorder.with_file_channel(f);
    }
    let mechanism = recorder.mechanism().to_string();
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    let first_event_id = plan.first_event_id;
    // The server waits in its first execve until the recorder answers: the run's phases start
    // once that exec is recorded, so the server's own start is in phase `startup`.
    let (started_tx, started_rx) = std::sync::mpsc::channel::<()>();
    // Fails closed: a recorder that stops (an error, a panic) while processes still run under
    // the filter kills the whole sandbox; the run then claims nothing.
    let killer = sandbox.killer();
    let fault_after = std::env::var(FAULT_RECORDER_PANIC)
        .ok()
        .and_then(|v| v.parse::<u64>().ok());
    let recorder = std::thread::Builder::new()
        .name("recorder".into())
        .spawn(move || {
            let mut out = Writer {
                sink,
                keep,
                kept: Vec::new(),
                error: None,
                started: Some(started_tx),
                seen: 0,
                fault_after,
            };
            let ran = std::panic::catch_unwind(std::panic::AssertUnwindSafe(|| {
                recorder.run(first_event_id, &stop2, &mut out)
            }));
            let stats = match ran {
                Ok(stats) => stats,
                Err(panic) => {
                    let why = panic
                        .downcast_ref::<&str>()
                        .map(|s| s.to_string())
                        .or_else(|| panic.downcast_ref::<String>().cloned())
                        .unwrap_or_default();
                    RecorderStats {
                        failure: Some(format!("the recorder panicked: {why}")),
                        ..RecorderStats::default()
                    }
                }
            };
            if stats.failure.is_some() {
                killer.kill();
            }
            (stats, out.kept, out.error)
        })
        .map_err(Error::io("start the recorder thread"))?;
    // Bounded: a server whose exec is never seen (killed at once) must not stall the audit.
    let _ = started_rx.recv_timeout(std::time::Duration::from_secs(5));
    Ok(Running {
        sandbox,
        settings,
        mechanism,
        ground_truth,
        stop,
        recorder: Some(recorder),
        edge,
        _key_gate: key_gate,
        planted: planted_files,
        needles,
    })
}

/// The recorder's sink: the event sink (flushed whenever the recorder is idle), plus the
/// events kept in memory for the checks.
struct Writer {
    sink: Box<dyn EventSink>,
    keep: bool,
    kept: Vec<Event>,
    error: Option<std::io::Error>,
    /// Told when the first exec (the server's own start) has been recorded.
    started: Option<std::sync::mpsc::Sender<()>>,
    /// Events seen (for the fault injection below).
    seen: u64,
    /// Fault injection for the fail-closed test: panic at this event.
    fault_after: Option<u64>,
}

/// Environment variable that makes the recorder panic at its Nth event: how the tests prove
/// that an audit whose recorder dies kills the server and claims nothing. Never set it
/// otherwise.
pub const FAULT_RECORDER_PANIC: &str = "GLASSBOX_FAULT_RECORDER_PANIC_AT_EVENT";

impl glassbox_trace::Sink for Writer {
    fn event(&mut self, e: Event) {
        self.seen += 1;
        if self.fault_after == Some(self.seen) {
            panic!("fault injected by {FAULT_RECORDER_PANIC}");
        }
        if matches!(e.kind, glassbox_model::EventKind::Exec { .. }) {
            if let Some(tx) = self.started.take() {
                let _ = tx.send(());
            }
        }
        if self.error.is_none() {
            self.error = self.sink.event(&e).err();
        }
        if self.keep {
            self.kept.push(e);
        }
    }

    fn idle(&mut self) {
        if self.error.is_none() {
            self.error = self.sink.flush().err();
        }
    }
}

impl Running {
    /// What the run left in the sandbox's writable places ([`crate::left`]), read before
    /// [`Running::finish`] lets go of them.
    pub(crate) fn left(&self) -> crate::left::Left {
        crate::left::scan(&self.sandbox.writable(), &self.planted, &self.needles)
    }

    /// Kills what is left of the sandbox and collects the recording.
    pub(crate) fn finish(&mut self) -> (glassbox_model::ServerExit, Recording) {
        self.finish_saying(&|_| {})
    }

    /// [`Running::finish`], saying each step first (a microVM guest writes them to its
    /// console: a guest that hangs there is killed, and its console names the step).
    pub(crate) fn finish_saying(
        &mut self,
        step: &dyn Fn(&str),
    ) -> (glassbox_model::ServerExit, Recording) {
        step("ending the sandbox");
        let exit = self.sandbox.finish();
        // Every process is gone: the listener hangs up and the recorder ends by itself; the
        // flag is a backstop.
        self.stop.store(true, Ordering::Relaxed);
        step("waiting for the recorder");
        let (stats, events, write_error) = self
            .recorder
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default();
        step("waiting for the edge");
        let edge = self.edge.as_mut().map(EdgeRun::finish).unwrap_or_default();
        (
            exit,
            Recording {
                events,
                stats,
                write_error,
                edge,
            },
        )
    }
}

impl crate::backend::Backend for Running {
    fn settings(&self) -> &SandboxSettings {
        &self.settings
    }

    fn mechanism(&self) -> &str {
        &self.mechanism
    }

    fn ground_truth(&self) -> Option<String> {
        self.ground_truth.clone()
    }

    fn edge_checks(&self) -> (Vec<String>, Vec<String>) {
        self.edge
            .as_ref()
            .map(|e| (e.isolation.clone(), e.canary_sockets.clone()))
            .unwrap_or_default()
    }

    fn take_stdio(&mut self) -> crate::backend::Stdio {
        (
            self.sandbox
                .stdin
                .take()
                .map(|w| Box::new(w) as Box<dyn std::io::Write + Send>),
            self.sandbox
                .stdout
                .take()
                .map(|f| Box::new(f) as Box<dyn std::io::Read + Send>),
            self.sandbox
                .stderr
                .take()
                .map(|f| Box::new(f) as Box<dyn std::io::Read + Send>),
        )
    }

    fn wait_timeout(&mut self, timeout: std::time::Duration) -> Option<glassbox_model::ServerExit> {
        self.sandbox.wait_timeout(timeout)
    }

    fn wait(&mut self) -> Option<glassbox_model::ServerExit> {
        loop {
            if let Some(e) = self
                .sandbox
                .wait_timeout(std::time::Duration::from_millis(200))
            {
                return Some(e);
            }
        }
    }

    fn outlived(&self) -> Vec<String> {
        crate::usage::outlived(&self.sandbox)
    }

    fn left(&self) -> Option<crate::left::Left> {
        Some(self.left())
    }

    fn meter(&self) -> Option<glassbox_sandbox::Meter> {
        self.sandbox.meter()
    }

    fn others_alive(&self) -> bool {
        self.sandbox.others_alive()
    }

    /// While any of its processes runs.
    fn may_still_listen(&self) -> bool {
        self.sandbox.others_alive()
    }

    /// From a thread that enters the sandbox's network namespace.
    fn loopback_dialer(&self) -> Result<crate::backend::LoopbackDialer, Error> {
        let dialer = self.sandbox.dialer()?;
        Ok(Arc::new(move |port, timeout| {
            dialer
                .connect(std::net::SocketAddr::from(([127, 0, 0, 1], port)), timeout)
                .map(|s| Box::new(s) as Box<dyn glassbox_mcp::Connection>)
        }))
    }

    fn limits_reached(&self) -> &[String] {
        self.sandbox.limits_reached()
    }

    fn finish(&mut self) -> (glassbox_model::ServerExit, Recording) {
        Running::finish(self)
    }
}
