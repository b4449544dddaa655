//! What `audit` and `trace` share: a sandbox with planted secrets, its recorder, and the
//! event stream written as it happens.

use crate::canary::{self, Canaries};
use crate::lazykey::{KeyGate, LazyKey};
use crate::Error;
use glassbox_model::bundle::Lines;
use glassbox_model::{EdgeCounters, Event, Flow, Honeytoken, NetworkMode, SandboxSettings};
use glassbox_plan::target::Resolved;
use glassbox_sandbox::{honeytokens, Config, NetworkSetup, Sandbox};
use glassbox_trace::{rules, Clock, FileChannel, Recorder, RecorderStats};
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

/// Where recorded events go, as they happen.
pub trait EventSink: Send {
    /// One event.
    fn event(&mut self, e: &Event) -> std::io::Result<()>;
    /// Called whenever the recorder has nothing more queued: make what was written durable.
    fn flush(&mut self) -> std::io::Result<()>;
}

/// A sink that keeps nothing: the events of a run made only for what it sends (dual
/// execution).
pub(crate) struct Discard;

impl EventSink for Discard {
    fn event(&mut self, _: &Event) -> std::io::Result<()> {
        Ok(())
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Ok(())
    }
}

/// JSON lines to a writer: `events.jsonl` as the bundle's codec writes it.
impl<W: Write + Send> EventSink for Lines<W> {
    fn event(&mut self, e: &Event) -> std::io::Result<()> {
        self.push(e)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Lines::flush(self)
    }
}

/// One event sink shared by the runs of an audit (`events.jsonl` holds them all); each run's
/// recorder writes through it in turn.
#[derive(Clone)]
pub(crate) struct SharedSink(Arc<std::sync::Mutex<Lines<Box<dyn Write + Send>>>>);

impl SharedSink {
    pub(crate) fn new(lines: Lines<impl Write + Send + 'static>) -> SharedSink {
        SharedSink(Arc::new(std::sync::Mutex::new(Lines(Box::new(lines.0)))))
    }

    /// One record that is not an event (a microVM guest's `Record`), as its own line, then
    /// flushed.
    pub(crate) fn record(&self, r: &impl Serialize) -> std::io::Result<()> {
        let mut s = self.sink();
        s.push(r)?;
        s.flush()
    }

    fn sink(&self) -> std::sync::MutexGuard<'_, Lines<Box<dyn Write + Send>>> {
        self.0.lock().unwrap_or_else(|e| e.into_inner())
    }
}

impl EventSink for SharedSink {
    fn event(&mut self, e: &Event) -> std::io::Result<()> {
        self.sink().event(e)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        Lines::flush(&mut self.sink())
    }
}

/// Which mechanism records the open and stat families.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum RecorderChoice {
    /// eBPF where this host allows it (root), seccomp user notification otherwise.
    #[default]
    Auto,
    /// seccomp user notification for every recorded call.
    Notify,
    /// eBPF for the open and stat families; an error where it is not available.
    Ebpf,
}

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

/// What the edge thread hands back: the flows, the counters, why serving stopped early.
pub(crate) type EdgeResult = (Vec<Flow>, EdgeCounters, Option<String>);

/// What a run's edge saw.
#[derive(Debug, Default)]
pub(crate) struct EdgeRecord {
    pub flows: Vec<Flow>,
    pub counters: EdgeCounters,
    /// Why serving the TUN descriptor stopped early, if it did.
    pub error: Option<String>,
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

/// The thread that serves a run's network edge (or, in a microVM guest, forwards the
/// sandbox's packets to the card wired to the host's edge).
pub(crate) struct EdgeServer {
    stop: Arc<AtomicBool>,
    thread: Option<JoinHandle<EdgeResult>>,
}

impl EdgeServer {
    fn spawn(
        work: impl FnOnce(&AtomicBool) -> EdgeResult + Send + 'static,
    ) -> Result<EdgeServer, Error> {
        let stop = Arc::new(AtomicBool::new(false));
        let stop2 = stop.clone();
        let thread = std::thread::Builder::new()
            .name("network-edge".into())
            .spawn(move || work(&stop2))
            .map_err(|e| Error::Internal(format!("cannot start the edge thread: {e}")))?;
        Ok(EdgeServer {
            stop,
            thread: Some(thread),
        })
    }

    /// Serves an edge in `mode` over `fd` (packets framed as `framing`), relaying `relay`'s
    /// destinations, on the audit's clock.
    pub(crate) fn serve(
        fd: OwnedFd,
        framing: glassbox_net::Framing,
        mode: NetworkMode,
        relay: Option<glassbox_net::Relay>,
        answer: Option<glassbox_net::Authority>,
        clock: Arc<Clock>,
    ) -> Result<EdgeServer, Error> {
        EdgeServer::spawn(move |stop| {
            use std::os::fd::AsFd;
            let mut edge = glassbox_net::Edge::new(mode, 0, glassbox_net::Limits::default());
            if let Some(r) = relay {
                edge = edge.with_relay(r);
            }
            if let Some(a) = answer {
                edge = edge.with_responder(glassbox_net::Responder::Answer(a));
            }
            let error = glassbox_net::serve_framed(
                fd.as_fd(),
                framing,
                &mut edge,
                &|| clock.now_ns(),
                stop,
            )
            .err()
            .map(|e| format!("serving the edge failed: {e}"));
            let (flows, counters) = edge.finish(clock.now_ns());
            (flows, counters, error)
        })
    }

    /// Forwards the packets of TUN descriptor `tun` to network card `card` (and back).
    fn forward(tun: OwnedFd, card: String) -> Result<EdgeServer, Error> {
        EdgeServer::spawn(move |stop| {
            use std::os::fd::AsFd;
            let error = glassbox_net::wire::forward(tun.as_fd(), &card, stop)
                .err()
                .map(|e| format!("forwarding the sandbox's packets to {card} failed: {e}"));
            (Vec::new(), EdgeCounters::default(), error)
        })
    }

    /// Stops serving; what the edge saw.
    pub(crate) fn finish(&mut self) -> EdgeResult {
        self.stop.store(true, Ordering::Relaxed);
        self.thread
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_else(|| {
                (
                    Vec::new(),
                    EdgeCounters::default(),
                    Some("the edge thread panicked".into()),
                )
            })
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

/// What the recorder thread hands back: its counters, the kept events, a write error.
type RecorderResult = (RecorderStats, Vec<Event>, Option<std::io::Error>);

/// The events and counters of a finished recording.
pub(crate) struct Recording {
    pub events: Vec<Event>,
    pub stats: RecorderStats,
    pub write_error: Option<std::io::Error>,
    /// What the network edge saw (empty without an edge).
    pub edge: EdgeRecord,
}

/// The sandbox user and the planted secrets: made once per audit, the same in every run (a
/// secret found outbound in any run is then one of the manifest's). The planted files hold the
/// sample workspace too ([`glassbox_sandbox::workspace`]), which is no secret.
#[derive(Clone)]
pub(crate) struct Secrets {
    pub user: String,
    pub hostname: String,
    pub home: String,
    pub files: Vec<glassbox_sandbox::PlantedFile>,
    pub tokens: Vec<Honeytoken>,
    pub ssh_agent: String,
    /// The RSA key, made when first opened (where glassbox can hold that open).
    pub lazy_rsa: Option<LazyKey>,
}

/// Where the RSA key is planted, under home.
const RSA_KEY: &str = ".ssh/id_rsa";

impl Secrets {
    pub(crate) fn fresh() -> Result<Secrets, Error> {
        Secrets::make(LazyKey::available())
    }

    /// The planted kubeconfig names the audit's CA as its cluster's (`certificate-authority-
    /// data`), so that a client that uses it, as Kubernetes clients do, trusts the edge that
    /// answers for that cluster (its `.test` address) and what it sends there is read.
    pub(crate) fn trust_in_kubeconfig(&mut self, ca_pem: &str) {
        use base64::Engine as _;
        let data = base64::engine::general_purpose::STANDARD.encode(ca_pem);
        for f in self
            .files
            .iter_mut()
            .filter(|f| f.path.ends_with("/.kube/config"))
        {
            let text = String::from_utf8_lossy(&f.contents);
            let patched: Vec<String> = text
                .lines()
                .map(|l| match l.split_once("certificate-authority-data:") {
                    Some((indent, _)) => format!("{indent}certificate-authority-data: {data}"),
                    None => l.to_string(),
                })
                .collect();
            f.contents = (patched.join("\n") + "\n").into_bytes();
        }
    }

    /// Fresh secrets with every file made now (the RSA key too): for a sandbox that runs
    /// elsewhere (a microVM), where glassbox cannot hold the key's first open.
    pub(crate) fn fresh_eager() -> Result<Secrets, Error> {
        Secrets::make(false)
    }

    fn make(lazy: bool) -> Result<Secrets, Error> {
        let user = honeytokens::user_name().map_err(Error::Honeytokens)?;
        let hostname = "devbox".to_string();
        let home = format!("/home/{user}");
        let lazy_rsa = lazy.then(|| LazyKey {
            user: user.clone(),
            hostname: hostname.clone(),
            made: Default::default(),
        });
        let (mut files, tokens) = match lazy_rsa {
            Some(_) => honeytokens::generate_with(&home, &user, &hostname, None),
            None => honeytokens::generate(&home, &user, &hostname),
        }
        .map_err(Error::Honeytokens)?;
        files.extend(planted_not_secret(&home));
        Ok(Secrets {
            user,
            hostname,
            home,
            files,
            tokens,
            ssh_agent: canary::ssh_agent_path(),
            lazy_rsa,
        })
    }

    /// The same user, home and host with new values in every planted file (the RSA key made
    /// now), the kubeconfig trusting `ca_pem` as before; the values that are not files (a
    /// declared secret's canary, the bait variables, an elicitation's canary) kept: they are
    /// the server's environment and answers, not planted files. For dual execution.
    pub(crate) fn refreshed(&self, ca_pem: Option<&str>) -> Result<Secrets, Error> {
        let (mut files, tokens) = honeytokens::generate(&self.home, &self.user, &self.hostname)
            .map_err(Error::Honeytokens)?;
        files.extend(planted_not_secret(&self.home));
        let mut fresh = Secrets {
            user: self.user.clone(),
            hostname: self.hostname.clone(),
            home: self.home.clone(),
            files,
            tokens,
            ssh_agent: self.ssh_agent.clone(),
            lazy_rsa: None,
        };
        fresh.tokens.extend(
            self.tokens
                .iter()
                .filter(|t| !t.path.starts_with('/'))
                .cloned(),
        );
        if let Some(pem) = ca_pem {
            fresh.trust_in_kubeconfig(pem);
        }
        Ok(fresh)
    }

    /// The RSA key's path inside the sandbox.
    pub(crate) fn rsa_path(&self) -> String {
        format!("{}/{RSA_KEY}", self.home)
    }

    /// Once the lazily made key exists: the file planted with it and its secret listed, so
    /// that a later run plants it as is and checks look for it.
    pub(crate) fn settle_rsa(&mut self) {
        let Some(pem) = self.lazy_rsa.as_ref().and_then(LazyKey::key) else {
            return;
        };
        let path = self.rsa_path();
        for f in self.files.iter_mut().filter(|f| f.path == path) {
            f.contents = pem.clone().into_bytes();
        }
        for t in self.tokens.iter_mut().filter(|t| t.path == path) {
            t.secrets = vec![honeytokens::key_secret(&pem)];
            t.random = honeytokens::key_random(&pem);
        }
        self.lazy_rsa = None;
    }
}

/// What is planted besides the secrets: the sample workspace and, where the host has a
/// Chromium, the launcher browser drivers are pointed at ([`glassbox_sandbox::browser`]).
fn planted_not_secret(home: &str) -> Vec<glassbox_sandbox::PlantedFile> {
    let mut files = glassbox_sandbox::workspace::files(home);
    files.extend(glassbox_sandbox::browser::files());
    files
}

/// A fresh canary for a declared secret (an API key in a configuration's `env`): random,
/// shaped like a token, unique to this audit.
pub(crate) fn env_canary() -> Result<String, Error> {
    let bytes = honeytokens::random_bytes(20).map_err(Error::Honeytokens)?;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    Ok(format!("gbx_{hex}"))
}

/// Environment variables planted as bait in every run (the install's too): names that no SDK
/// or library reads on its own (unlike `AWS_SECRET_ACCESS_KEY` or `GITHUB_TOKEN`, which a
/// client library would legitimately send to its own service), values fresh per audit, so
/// only code that harvests the whole environment sends them anywhere, and
/// `canary-exfiltration` catches them wherever they go (`env:NAME`, kind `bait-env`).
pub(crate) const BAIT_ENV: &[(&str, usize)] = &[("DEPLOY_TOKEN", 40), ("PROD_DB_PASSWORD", 24)];

/// A fresh value for a bait variable: `len` characters of `[A-Za-z0-9]`.
pub(crate) fn bait_value(len: usize) -> Result<String, Error> {
    const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";
    let bytes = honeytokens::random_bytes(len).map_err(Error::Honeytokens)?;
    Ok(bytes
        .iter()
        .map(|b| ALPHABET[*b as usize % ALPHABET.len()] as char)
        .collect())
}

/// A bait variable `name`: a fresh value (`prefix` and `len` random characters) and the
/// planted secret it is (`env:NAME`, kind `bait-env`, followed like the planted files).
pub(crate) fn bait_env(
    name: &str,
    prefix: &str,
    len: usize,
) -> Result<(String, glassbox_model::Honeytoken), Error> {
    let random = bait_value(len)?;
    let value = format!("{prefix}{random}");
    let token = glassbox_model::Honeytoken {
        path: format!("env:{name}"),
        kind: "bait-env".into(),
        secrets: vec![value.clone()],
        random: vec![random],
        ..Default::default()
    };
    Ok((value, token))
}

/// A fresh marker for the generated tool arguments: `gbm` and 10 hex digits (fits a host
/// name, a path, a URL and an e-mail address as is).
pub(crate) fn input_marker() -> Result<String, Error> {
    let bytes = honeytokens::random_bytes(5).map_err(Error::Honeytokens)?;
    let hex: String = bytes.iter().map(|b| format!("{b:02x}")).collect();
    Ok(format!("gbm{hex}"))
}

/// How to start one run.
pub(crate) struct RunPlan {
    /// The secrets to plant; `None`: fresh ones.
    pub secrets: Option<Secrets>,
    /// The audit's clock, shared by every run.
    pub clock: Arc<Clock>,
    /// The first event id of this run.
    pub first_event_id: u64,
    /// The network edge's mode; `None`: loopback only.
    pub network: Option<NetworkMode>,
    /// Destinations relayed to the real network (the install phase's registry).
    pub relay: Option<glassbox_net::Relay>,
    /// Where the sandbox's packets go: `None`, to an edge served here; `Some(card)`, to that
    /// network card, wired to an edge elsewhere (in a microVM guest: the host's).
    pub wire: Option<String>,
    /// The sandbox's resource limits.
    pub limits: glassbox_sandbox::Limits,
    /// The audit's certificate authority, when the edge answers (`--responder ok`): the edge
    /// served here terminates TLS with it (its key stays in this process).
    pub answer: Option<glassbox_net::Authority>,
    /// The certificate the sandbox trusts (the authority's, without its key: what a microVM
    /// guest gets), when the edge answers.
    pub trust: Option<CaCertificate>,
    /// The eBPF recorder's ring buffer in bytes ([`AuditOptions::recorder_ring`]; `None`: its
    /// default).
    ///
    /// [`AuditOptions::recorder_ring`]: crate::AuditOptions::recorder_ring
    pub ring: Option<usize>,
    /// The audit's input marker, looked for in the files the run leaves ([`crate::left`]).
    pub marker: Option<String>,
    /// The server's clocks moved forward (the trigger run); `None`: the host's.
    pub clock_shift: Option<glassbox_sandbox::clock::ClockShift>,
}

/// The audit's CA certificate, as a sandbox trusts it.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub(crate) struct CaCertificate {
    /// PEM.
    pub pem: String,
    /// DER.
    pub der: Vec<u8>,
}

impl CaCertificate {
    pub(crate) fn of(a: &glassbox_net::Authority) -> CaCertificate {
        CaCertificate {
            pem: a.certificate_pem(),
            der: a.certificate_der(),
        }
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
    let secrets = match plan.secrets {
        Some(s) => s,
        None => Secrets::fresh()?,
    };
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
        .map_err(|e| Error::Internal(format!("cannot start the recorder thread: {e}")))?;
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
        let exit = self.sandbox.finish();
        // Every process is gone: the listener hangs up and the recorder ends by itself; the
        // flag is a backstop.
        self.stop.store(true, Ordering::Relaxed);
        let (stats, events, write_error) = self
            .recorder
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default();
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
