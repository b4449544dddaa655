//! `--isolation microvm`: each run of the server boots a fresh QEMU microVM (crates/vm) in
//! which this very executable runs the server in the namespace sandbox under the recorder (the
//! same [`run::start`] as the namespace backend, under the guest's kernel). It is the one
//! microVM path: an audit's runs and `glassbox trace` (a run without MCP, which ends when its
//! command exits: [`RunEnd::Exit`]) both start here through `Isolation::start`, and
//! the events port has one reader, `start`'s.
//!
//! The host keeps what must be trusted: the MCP client, the planted secrets (made by the host
//! and sent to the guest, so that the checks know their values), the event sink, the checks,
//! the bundle and the report. Across the boundary (virtio-serial ports; the messages are
//! `glassbox_vm::wire`'s, beside the VM they cross):
//! - stdin port: one JSON line, the [`GuestRequest`]; then the server's standard input;
//! - stdout and stderr ports: the server's;
//! - events port: the recorded events as JSON lines, framed by a [`Record::Started`] line
//!   (the sandbox's settings, once the server runs) and a [`Record::Finished`] line (how the
//!   server ended, the recorder's counters, the network edge's flows and counters);
//! - tcp port, for a server that speaks MCP over HTTP (`--http`, `--sse`): the TCP relay of
//!   `glassbox_vm::mux`, through which the host's MCP client connects to the server's port on
//!   the loopback of the guest's sandbox (the guest's glassbox dials it from the sandbox's
//!   network namespace, as the namespace backend does on the host).
//!
//! Events are stamped on arrival with the host's run clock and current MCP phase: the guest's
//! clock is not the host's (it lags under TCG), and the phase is only known to the host.
//!
//! A fresh guest per run gives the capture and denied runs the same clean state; it costs a
//! boot (about 3 s under TCG) per run.

use crate::recording::Launch;
use crate::recording::{
    self, EdgeRecord, EdgeServer, EventSink, RecorderChoice, Recording, RunPlan,
};
use crate::run;
use crate::secrets::Secrets;
use crate::{target, Error};
use glassbox_model::{Event, Flow, SandboxSettings, ServerExit, VmRecord};
use glassbox_trace::{Clock, RecorderStats};
use glassbox_vm::clock::{Bound, GuestClock, TICK, WALL_FACTOR};
use glassbox_vm::mux::{Mux, MuxStream};
use glassbox_vm::wire::{
    GuestRequest, Record, RunEnd, WireCertificate, WireLimits, WireSecrets, WireTarget,
    RECORD_PREFIX,
};
use glassbox_vm::{agent, Accel, GuestCommand, Vm, VmConfig};
use std::io::{BufRead, BufReader, Read, Write};
use std::os::unix::net::UnixStream;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::mpsc::{Receiver, RecvTimeoutError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

/// The guest's network card, wired to the host's edge.
const GUEST_CARD: &str = "eth0";

/// The hidden subcommand the guest's glassbox runs: [`guest_main`].
pub const GUEST_SUBCOMMAND: &str = "audit-guest";

/// The bound on the boot, up to the agent's ready (TCG boots take about 5 s; a debug build
/// more). This and every bound on a guest below are counted in guest time
/// ([`glassbox_vm::clock`]): the time its QEMU was not kept waiting for a CPU, so a loaded
/// host makes a guest slow, never lost.
const BOOT_TIMEOUT: Duration = Duration::from_secs(120);

/// The bound from the agent's ready to the guest's sandbox running the server.
const START_TIMEOUT: Duration = Duration::from_secs(120);

/// What the guest may take, beyond the audit's own exit grace and linger, to report the end
/// of the run (finishing the recorder and the edge under TCG), counted from the last line it
/// sent: a guest still sending the events of a busy server (20,000 opens take a while to cross
/// under TCG) is slow, not hung.
const END_SLACK: Duration = Duration::from_secs(30);

/// The most a guest that keeps sending may take to report the end of the run, beyond the
/// audit's own exit grace and linger: a server that never stops producing events must not hold
/// the audit forever.
const END_CAP: Duration = Duration::from_secs(600);

/// Environment variable that makes the guest's glassbox hang once the server has ended,
/// before its end-of-run report: how the tests prove that a hung guest is killed and the audit
/// is inconclusive with the reason. Passed on to the guest when set. Never set it otherwise.
pub const FAULT_GUEST_HANG: &str = "GLASSBOX_FAULT_GUEST_HANG";

/// Environment variable that bounds the guest's boot to this many milliseconds instead of
/// [`BOOT_TIMEOUT`]: how the tests prove that a guest that does not come up is killed and the
/// audit is inconclusive with the reason. Never set it otherwise.
pub const FAULT_BOOT_TIMEOUT_MS: &str = "GLASSBOX_FAULT_VM_BOOT_TIMEOUT_MS";

/// What the guest needs beyond the sandbox's memory limit: its kernel, the agent, the guest
/// glassbox (the recorder, the edge) and the in-memory root with the guest glassbox's
/// executable. Measured (debug build, TCG, a 512 MiB guest, `glassbox trace --isolation
/// microvm -- cat /proc/meminfo`: the guest glassbox's sandbox and recorder up): MemTotal 458
/// MiB (the kernel keeps 54), MemAvailable 361 MiB, so about 150 MiB of the 512 in use before
/// the server's own; 256 MiB leaves room for the edge's buffers and the page cache.
pub const VM_MEMORY_HEADROOM_MIB: u64 = 256;

/// The guest's memory when the sandbox's memory is not limited.
const VM_MEMORY_UNLIMITED_MIB: u64 = 2048;

/// The VM's memory (MiB) and virtual CPUs for the sandbox limits `limits`: the memory limit
/// plus [`VM_MEMORY_HEADROOM_MIB`]; the host's CPUs, up to [`MAX_VCPUS`] (or the CPU limit
/// rounded up, if more), never more than the host has. The CPU limit itself is the quota of
/// the guest sandbox's cgroup, as in the namespace backend, where a sandbox limited to one
/// CPU's worth of time still runs its threads on every CPU of the host: a race between two
/// threads (a control flips a pointer while the kernel reads it) needs two CPUs to happen at
/// all, and a one-vCPU guest would hide it.
pub fn vm_size(limits: &glassbox_sandbox::Limits) -> (u32, u32) {
    vm_size_on(
        limits,
        std::thread::available_parallelism().map_or(1, |n| n.get() as u64),
    )
}

/// The most vCPUs a guest gets.
const MAX_VCPUS: u64 = 4;

fn vm_size_on(limits: &glassbox_sandbox::Limits, host_cpus: u64) -> (u32, u32) {
    let memory = match limits.memory {
        Some(bytes) => bytes.div_ceil(1 << 20) + VM_MEMORY_HEADROOM_MIB,
        None => VM_MEMORY_UNLIMITED_MIB,
    };
    let wanted = match limits.cpus {
        Some(c) if c.is_finite() && c > 0.0 => c.ceil() as u64,
        _ => 1,
    };
    let cpus = host_cpus.min(MAX_VCPUS.max(wanted));
    (
        u32::try_from(memory).unwrap_or(u32::MAX),
        u32::try_from(cpus.max(1)).unwrap_or(u32::MAX),
    )
}

/// Puts the guest's events on the host's run clock: the guest stamps them on its own clock.
/// Every line that crosses gives a bound on the offset between the clocks (it arrived after it
/// happened: host arrival minus guest time is at least the offset), and the smallest bound
/// seen so far is the offset used: its error is the quickest crossing, a few milliseconds,
/// so events land a little late, never early; the guest's [`Record::Started`] (its clock when
/// the server runs) gives the first bound. An event is never stamped later than it arrived,
/// and its phase is the host's at that time: a server's first opens belong to `startup` even
/// when they cross the port after the host has sent `initialize`, and a call stays within
/// the matching window of its packet at the host's edge (`glassbox_checks::links`).
#[derive(Default)]
struct Stamper {
    /// Host run clock minus guest run clock, once known.
    offset: Option<u64>,
    /// Events read before the offset was known, with their arrival time.
    pending: Vec<(Event, u64)>,
}

impl Stamper {
    fn place(e: &mut Event, offset: u64, arrived: u64, clock: &Clock) {
        e.t_ns = e.t_ns.saturating_add(offset).min(arrived);
        e.phase = clock.phase_at(e.t_ns);
    }

    /// Event `e`, stamped; `None` while the guest's clock is not known yet (it is kept).
    fn stamp(&mut self, mut e: Event, clock: &Clock) -> Option<Event> {
        let arrived = clock.now_ns();
        match &mut self.offset {
            Some(offset) => {
                *offset = (*offset).min(arrived.saturating_sub(e.t_ns));
                Stamper::place(&mut e, *offset, arrived, clock);
                Some(e)
            }
            None => {
                self.pending.push((e, arrived));
                None
            }
        }
    }

    /// The guest's clock read `guest_now_ns` now: the events kept so far, stamped.
    fn started(&mut self, guest_now_ns: u64, clock: &Clock) -> Vec<Event> {
        let offset = self
            .pending
            .iter()
            .map(|(e, arrived)| arrived.saturating_sub(e.t_ns))
            .fold(clock.now_ns().saturating_sub(guest_now_ns), u64::min);
        self.offset = Some(offset);
        self.pending
            .drain(..)
            .map(|(mut e, arrived)| {
                Stamper::place(&mut e, offset, arrived, clock);
                e
            })
            .collect()
    }

    /// The guest's own flows (its canary sockets', in the end-of-run report), put on the host's
    /// run clock as its events are: a flow keeps its place beside the `connect` that made it
    /// (how `glassbox_checks::links` pairs them), never later than the report arrived. A guest
    /// that never told its clock: stamped on arrival.
    fn place_flows(&self, flows: &mut [Flow], clock: &Clock) {
        let arrived = clock.now_ns();
        for f in flows {
            match self.offset {
                Some(offset) => {
                    f.t_ns = f.t_ns.saturating_add(offset).min(arrived);
                    f.end_ns = f
                        .end_ns
                        .saturating_add(offset)
                        .clamp(f.t_ns, arrived.max(f.t_ns));
                }
                None => {
                    f.t_ns = arrived;
                    f.end_ns = arrived;
                }
            }
        }
    }

    /// The end of the stream: events still kept (the guest never told its clock) are stamped
    /// on arrival.
    fn rest(&mut self, clock: &Clock) -> Vec<Event> {
        self.pending
            .drain(..)
            .map(|(mut e, arrived)| {
                e.t_ns = arrived;
                e.phase = clock.phase_at(arrived);
                e
            })
            .collect()
    }
}

fn choice_name(c: RecorderChoice) -> &'static str {
    match c {
        RecorderChoice::Auto => "auto",
        RecorderChoice::Notify => "notify",
        RecorderChoice::Ebpf => "ebpf",
    }
}

/// The host directories the guest needs: the working directory and the read-only paths (a
/// file's directory: 9p shares directories). The host's root is never shared whole (its
/// `/proc` would be readable through the share).
pub(crate) fn shares(cwd: &Path, read_only: &[PathBuf]) -> Result<Vec<PathBuf>, Error> {
    let mut v = Vec::new();
    if cwd != Path::new("/") {
        v.push(cwd.to_path_buf());
    }
    for p in read_only {
        let dir = if p.is_dir() {
            p.as_path()
        } else {
            p.parent().unwrap_or(Path::new("/"))
        };
        if !v.iter().any(|d: &PathBuf| dir.starts_with(d)) {
            v.push(dir.to_path_buf());
        }
    }
    for d in &v {
        shareable(d)?;
    }
    Ok(v)
}

/// Refuses a host directory whose share would cover the guest's own: its writable /tmp (where
/// the guest glassbox plants its secrets), the agent's directory, the kernel's file systems.
fn shareable(d: &Path) -> Result<(), Error> {
    let own = ["/tmp", "/var/tmp", "/dev/shm", agent::SELF_IN_GUEST]
        .iter()
        .any(|k| Path::new(k).starts_with(d))
        || ["/proc", "/sys", "/dev"].iter().any(|k| d.starts_with(k));
    if own {
        return Err(Error::Usage(format!(
            "{} with --isolation microvm: sharing this host directory into the guest is not supported yet (it would cover the guest's own; run from a subdirectory)",
            d.display()
        )));
    }
    Ok(())
}

/// The server as it crosses to the guest ([`WireTarget`]): resolved on the host (the guest sees
/// the host's system folders and every shared folder at their host paths, so the resolution
/// holds there).
fn wire_target(t: &target::Resolved) -> WireTarget {
    WireTarget {
        program: t.program.clone(),
        argv: t
            .argv
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect(),
        extra_ro: t.extra_ro.clone(),
        extra_rw: t.extra_rw.clone(),
        path_prefix: t.path_prefix.clone(),
        env: t.env.clone(),
    }
}

/// The server the host resolved, in the guest.
fn resolved(t: WireTarget) -> target::Resolved {
    target::Resolved {
        program: t.program,
        argv: t.argv.into_iter().map(Into::into).collect(),
        extra_ro: t.extra_ro,
        extra_rw: t.extra_rw,
        path_prefix: t.path_prefix,
        env: t.env,
    }
}

/// The guest's end of a run, as the host sees it.
pub(crate) struct VmRun {
    vm: Vm,
    /// The run's network edge, served on the host.
    edge: Option<EdgeServer>,
    pub settings: SandboxSettings,
    pub mechanism: String,
    pub ground_truth: Option<String>,
    pub isolation: Vec<String>,
    pub canary_sockets: Vec<String>,
    pub stdin: Option<glassbox_vm::StdinPort>,
    pub stdout: Option<UnixStream>,
    pub stderr: Option<UnixStream>,
    /// The host's end of the guest's TCP relay, for an HTTP server.
    relay: Option<Mux>,
    /// Set once the guest reported the end of the run, or its events port ended.
    reported_end: Arc<AtomicBool>,
    /// The boot, for the manifest.
    pub record: VmRecord,
    finished_rx: Receiver<Record>,
    finished: Option<Record>,
    reader: Option<JoinHandle<ReaderResult>>,
    /// Added to every wait for the server's end: the guest's own grace and linger come first.
    slack: Duration,
    /// When the guest last sent a line on the events port.
    progress: Progress,
    /// Why the guest failed, once it did.
    hung: Option<String>,
}

/// How many lines a guest channel carried: shared by its reader and the waiter, which
/// reads a change as the guest's progress.
#[derive(Clone)]
struct Progress(Arc<std::sync::atomic::AtomicU64>);

impl Progress {
    fn new() -> Self {
        Progress(Arc::new(std::sync::atomic::AtomicU64::new(0)))
    }

    fn touch(&self) {
        self.0.fetch_add(1, Ordering::Relaxed);
    }

    fn lines(&self) -> u64 {
        self.0.load(Ordering::Relaxed)
    }
}

/// What the events reader hands back: the kept events, the sink's write error, and how many
/// lines of the events port were not events (a broken channel: a guest killed mid-line, or a
/// guest that writes garbage), with the first one's error.
type ReaderResult = (Vec<Event>, Option<std::io::Error>, (u64, Option<String>));

/// Boots a guest for the run `vp` and starts the server in it; returns once the server runs
/// there.
pub(crate) fn start(
    vp: &Launch<'_>,
    mut sink: Box<dyn EventSink>,
    plan: RunPlan,
) -> Result<VmRun, Error> {
    let keep = vp.keep;
    let secrets = plan.secrets;
    if secrets.lazy_rsa.is_some() {
        return Err(Error::Internal(
            "a microVM run needs its secrets made up front".into(),
        ));
    }
    let request = GuestRequest {
        target: wire_target(vp.target),
        cwd: vp.cwd.to_path_buf(),
        end: vp.end,
        secrets: WireSecrets {
            user: secrets.user,
            hostname: secrets.hostname,
            home: secrets.home,
            files: secrets
                .files
                .into_iter()
                .map(|f| (f.path, f.contents, f.mode))
                .collect(),
            tokens: secrets.tokens,
            ssh_agent: secrets.ssh_agent,
        },
        network: plan.network,
        recorder: choice_name(vp.recorder).into(),
        first_event_id: plan.first_event_id,
        exit_grace_ms: vp.exit_grace.as_millis() as u64,
        linger_ms: vp.linger.as_millis() as u64,
        limits: WireLimits::from(&plan.limits),
        http_port: vp.http_port,
        trust: plan.trust.as_ref().map(|c| WireCertificate {
            pem: c.pem.clone(),
            der: c.der.clone(),
        }),
        ring: plan.ring.map(|b| b as u64),
        marker: plan.marker.clone(),
        clock_shift_days: plan.clock_shift.map(|c| (c.seconds() / 86_400) as u32),
    };
    let exe = std::env::current_exe().map_err(Error::io("find glassbox's own executable"))?;
    let mut config = VmConfig::new(&exe, &["vm-agent"]);
    config.sandbox = true;
    config.boot_timeout = std::env::var(FAULT_BOOT_TIMEOUT_MS)
        .ok()
        .and_then(|v| v.parse().ok())
        .map_or(BOOT_TIMEOUT, Duration::from_millis);
    // A writable folder (an install's) is shared read-write and not again read-only.
    let rw = &vp.target.extra_rw;
    for d in rw {
        shareable(d)?;
    }
    config.shares = shares(vp.cwd, &vp.target.extra_ro)?
        .into_iter()
        .filter(|d| !rw.contains(d))
        .collect();
    config.shares_rw = rw.clone();
    config.network = plan.network.is_some();
    (config.memory_mib, config.cpus) = vm_size(&plan.limits);
    let mut cmd = GuestCommand::new([agent::SELF_IN_GUEST, GUEST_SUBCOMMAND]);
    cmd.cwd = vp.cwd.to_path_buf();
    // The guest glassbox plants the secrets under TMPDIR, never in a shared read-only /tmp.
    cmd.env.push(("TMPDIR".into(), agent::TMP_IN_GUEST.into()));
    if let Some(v) = std::env::var_os(FAULT_GUEST_HANG) {
        cmd.env.push((FAULT_GUEST_HANG.into(), v));
    }
    // A guest that does not come up is lost: it is booted once, never again (its boot is
    // bounded in guest time, so a loaded host does not lose it).
    let mut vm = match Vm::start(&config, &cmd) {
        Ok(vm) => vm,
        Err(e) => {
            let why = format!("the microVM did not start: {e}");
            return Err(match e {
                // The guest itself failed: the audit is inconclusive, with the reason.
                glassbox_vm::Error::BootTimeout { .. }
                | glassbox_vm::Error::Hung { .. }
                | glassbox_vm::Error::Died { .. } => Error::GuestLost(why),
                // glassbox or the host cannot run a VM: an error, as for a broken sandbox.
                _ => Error::VmStart(e),
            });
        }
    };
    // The edge, on the host: every frame of the guest's only network card comes here. It
    // serves from the boot on, before the server can send anything.
    let edge = match (plan.network, vm.net.take()) {
        (Some(mode), Some(card)) => Some(EdgeServer::serve(
            std::os::fd::OwnedFd::from(card),
            glassbox_net::Framing::Ethernet,
            mode,
            plan.relay.clone(),
            plan.answer.clone(),
            plan.clock.clone(),
        )?),
        (Some(_), None) => {
            return Err(Error::Internal("the VM has no network card".into()));
        }
        _ => None,
    };
    let relay = match (vp.http_port, vm.tcp.take()) {
        (Some(_), Some(port)) => {
            let reader = port
                .try_clone()
                .map_err(Error::io("use the VM's tcp port"))?;
            Some(
                Mux::start(reader, port)
                    .map_err(|e| Error::io("start the TCP relay with the guest")(e))?,
            )
        }
        (Some(_), None) => return Err(Error::Internal("the VM has no tcp port".into())),
        (None, _) => None,
    };
    let reported_end = Arc::new(AtomicBool::new(false));
    let ended = reported_end.clone();
    let record = VmRecord {
        backend: "microvm".into(),
        kernel_release: vm.info.kernel.release.clone(),
        kernel_sha256: vm.info.kernel.hash.clone(),
        accelerator: match vm.info.accel.accel {
            Accel::Kvm => "kvm",
            Accel::Tcg => "tcg",
        }
        .into(),
        accelerator_reason: vm.info.accel.reason.clone(),
        boot_ms: vec![vm.info.ready.as_millis() as u64],
        boot_retries: Vec::new(),
        memory_mib: config.memory_mib,
        cpus: config.cpus,
        lost: Vec::new(),
    };
    let mut stdin = vm
        .stdin
        .take()
        .ok_or_else(|| Error::Internal("the VM has no stdin port".into()))?;
    let line = serde_json::to_vec(&request)
        .map_err(|e| Error::Internal(format!("cannot encode the guest request: {e}")))?;
    stdin
        .write_all(&line)
        .and_then(|()| stdin.write_all(b"\n"))
        .map_err(Error::io("send the request to the guest"))?;
    let events = vm
        .events
        .take()
        .ok_or_else(|| Error::Internal("the VM has no events port".into()))?;
    let (started_tx, started_rx) = std::sync::mpsc::channel::<Record>();
    let (finished_tx, finished_rx) = std::sync::mpsc::channel::<Record>();
    let clock: Arc<Clock> = plan.clock.clone();
    let progress = Progress::new();
    let seen = progress.clone();
    let reader = std::thread::Builder::new()
        .name("guest-events".into())
        .spawn(move || {
            let mut kept = Vec::new();
            let mut error: Option<std::io::Error> = None;
            let mut reader = BufReader::new(events);
            let mut stamper = Stamper::default();
            let mut broken: (u64, Option<String>) = (0, None);
            let mut deliver =
                |e: Event, sink: &mut Box<dyn EventSink>, error: &mut Option<std::io::Error>| {
                    if error.is_none() {
                        *error = sink.event(&e).err();
                    }
                    if keep {
                        kept.push(e);
                    }
                };
            let mut line = String::new();
            loop {
                line.clear();
                match reader.read_line(&mut line) {
                    Ok(0) | Err(_) => break,
                    Ok(_) => seen.touch(),
                }
                let text = line.trim();
                if text.is_empty() {
                    continue;
                }
                if text.starts_with(RECORD_PREFIX) {
                    match serde_json::from_str::<Record>(text) {
                        Ok(mut r @ Record::Finished { .. }) => {
                            if let Record::Finished { flows, .. } = &mut r {
                                stamper.place_flows(flows, &clock);
                            }
                            ended.store(true, Ordering::SeqCst);
                            let _ = finished_tx.send(r);
                        }
                        Ok(r) => {
                            if let Record::Started { guest_now_ns, .. } = &r {
                                for e in stamper.started(*guest_now_ns, &clock) {
                                    deliver(e, &mut sink, &mut error);
                                }
                            }
                            let _ = started_tx.send(r);
                        }
                        Err(e) => {
                            let _ = started_tx.send(Record::Failed {
                                reason: format!("unreadable record from the guest: {e}"),
                            });
                        }
                    }
                    continue;
                }
                // An event that does not parse is counted as lost by the guest's side only if
                // it failed there; here it is a broken channel: say so and stop trusting it.
                let e: Event = match serde_json::from_str(text) {
                    Ok(e) => e,
                    Err(e) => {
                        broken.0 += 1;
                        broken
                            .1
                            .get_or_insert(format!("a malformed event from the guest: {e}"));
                        continue;
                    }
                };
                if let Some(e) = stamper.stamp(e, &clock) {
                    deliver(e, &mut sink, &mut error);
                }
                if reader.buffer().is_empty() && error.is_none() {
                    error = sink.flush().err();
                }
            }
            // The guest is gone (or ended its stream): nothing more will run there.
            ended.store(true, Ordering::SeqCst);
            for e in stamper.rest(&clock) {
                deliver(e, &mut sink, &mut error);
            }
            if error.is_none() {
                error = sink.flush().err();
            }
            (kept, error, broken)
        })
        .map_err(Error::io("start the guest events reader"))?;
    // `lost`: the guest hung or ended before it said anything (not a refusal it reported).
    // Counted in guest time: a guest kept waiting for a CPU is slow, not lost.
    let mut bound = Bound::new(vm.qemu_pid(), START_TIMEOUT);
    let (started, lost) = loop {
        let Some(wait) = bound.next_wait() else {
            break (
                Record::Failed {
                    reason: format!(
                        "the guest did not start the server within {} s{}; the VM was killed",
                        START_TIMEOUT.as_secs(),
                        bound.starved_note()
                    ),
                },
                true,
            );
        };
        match started_rx.recv_timeout(wait) {
            Ok(r) => break (r, false),
            Err(RecvTimeoutError::Timeout) => {}
            Err(RecvTimeoutError::Disconnected) => {
                break (
                    Record::Failed {
                        reason: "the guest ended before it started the server".into(),
                    },
                    true,
                )
            }
        }
    };
    let Record::Started {
        guest_now_ns: _,
        settings,
        mechanism,
        ground_truth,
        isolation,
        canary_sockets,
    } = started
    else {
        let reason = match started {
            Record::Failed { reason } => reason,
            _ => "unexpected record from the guest".into(),
        };
        let exit = vm.wait(Duration::from_secs(2));
        let console = vm.console_tail();
        vm.kill();
        let _ = reader.join();
        let detail = match exit {
            Err(e) => format!(" ({e})"),
            Ok(_) if console.trim().is_empty() => String::new(),
            Ok(_) => format!("; last console lines:\n{console}"),
        };
        let why = format!("the microVM could not run the server: {reason}{detail}");
        return Err(if lost {
            Error::GuestLost(why)
        } else {
            Error::Vm(why)
        });
    };
    let (network, isolation) = match &edge {
        Some(_) => (
            format!(
                "{}; in the guest, forwarded to its only network card ({GUEST_CARD}: no address, no ARP, no IPv6), whose frames glassbox's edge on the host serves",
                settings.network
            ),
            isolation
                .into_iter()
                .chain([format!(
                    "ok: the guest's only network card ({GUEST_CARD}, virtio-net) is a socket pair whose other end is glassbox's edge on the host; QEMU has no other network back-end"
                )])
                .collect(),
        ),
        None => (settings.network.clone(), isolation),
    };
    Ok(VmRun {
        edge,
        relay,
        reported_end,
        stdout: vm.stdout.take(),
        stderr: vm.stderr.take(),
        vm,
        settings: SandboxSettings {
            backend: format!("microvm: {}", settings.backend),
            network,
            ..settings
        },
        mechanism,
        ground_truth,
        isolation,
        canary_sockets,
        stdin: Some(stdin),
        record,
        finished_rx,
        finished: None,
        reader: Some(reader),
        slack: vp.exit_grace + vp.linger + END_SLACK,
        progress,
        hung: None,
    })
}

impl VmRun {
    /// Waits up to `timeout` (plus the guest's own grace and linger) for the guest's report of
    /// the server's end.
    pub(crate) fn wait_timeout(&mut self, timeout: Duration) -> Option<ServerExit> {
        if self.finished.is_none() && self.hung.is_none() {
            // Counted in guest time: a guest kept waiting for a CPU is slow, not hung.
            let mut clock = GuestClock::start(self.vm.qemu_pid());
            let bound = timeout + self.slack;
            let cap = bound + END_CAP;
            let mut lines = self.progress.lines();
            let mut last_line = Duration::ZERO;
            loop {
                let now = clock.counted();
                let seen = self.progress.lines();
                if seen != lines {
                    lines = seen;
                    last_line = now;
                }
                // The bound moves with the guest's last line, up to the cap.
                let until = bound.max(last_line + END_SLACK).min(cap);
                if now >= until || clock.wall() >= cap * WALL_FACTOR {
                    let console = self.vm.console_tail();
                    let console = match console.trim().is_empty() {
                        true => String::new(),
                        false => format!("; last console lines:\n{console}"),
                    };
                    let starved = glassbox_vm::clock::starved_note(&clock);
                    self.hung = Some(if until == cap {
                        format!(
                            "the guest did not end the run within {} s of the server's stdin closing, though it kept sending{starved}; the VM was killed{console}",
                            now.as_secs()
                        )
                    } else {
                        format!(
                            "the guest hung: no end of the run within {} s of the server's stdin closing, nothing sent for {} s{starved}; the VM was killed{console}",
                            now.as_secs(),
                            (now - last_line).as_secs()
                        )
                    });
                    break;
                }
                match self.finished_rx.recv_timeout((until - now).min(TICK)) {
                    Ok(r) => {
                        self.finished = Some(r);
                        break;
                    }
                    Err(RecvTimeoutError::Timeout) => {}
                    Err(RecvTimeoutError::Disconnected) => {
                        self.hung =
                            Some("the guest ended without reporting the end of the run".into());
                        break;
                    }
                }
            }
        }
        match &self.finished {
            Some(Record::Finished { exit, .. }) => Some(exit.clone()),
            _ => None,
        }
    }

    /// Waits for the guest's report of the server's end, however long the server runs (a
    /// trace's command: the guest reports when it exits). `None`: the guest ended without
    /// reporting it.
    pub(crate) fn wait(&mut self) -> Option<ServerExit> {
        if self.finished.is_none() && self.hung.is_none() {
            match self.finished_rx.recv() {
                Ok(r) => self.finished = Some(r),
                Err(_) => {
                    self.hung = Some("the guest ended without reporting the end of the run".into())
                }
            }
        }
        match &self.finished {
            Some(Record::Finished { exit, .. }) => Some(exit.clone()),
            _ => None,
        }
    }

    /// What outlived the server in the guest (known once the run finished).
    pub(crate) fn outlived(&self) -> Vec<String> {
        match &self.finished {
            Some(Record::Finished { outlived, .. }) => outlived.clone(),
            _ => Vec::new(),
        }
    }

    /// The limits the guest's sandbox reached.
    pub(crate) fn limits_reached(&self) -> &[String] {
        match &self.finished {
            Some(Record::Finished { limits_reached, .. }) => limits_reached,
            _ => &[],
        }
    }

    /// The host's end of the TCP relay to the loopback of the guest's sandbox (a run started
    /// with [`Launch::http_port`]).
    pub(crate) fn relay(&self) -> Option<Mux> {
        self.relay.clone()
    }

    /// Whether the guest has reported the end of the run (or its events port ended: the
    /// guest is gone). This is the guest's word, and it lags: the guest reports once the
    /// server exited and what it left behind was recorded a little longer (its linger), so
    /// until then the server, or what it left, may still come to listen.
    pub(crate) fn reported_end(&self) -> bool {
        self.reported_end.load(Ordering::SeqCst)
    }

    /// Ends the guest (it powers off by itself after its report; one that does not is killed)
    /// and collects the recording. A guest that never reported is a recorder failure: the
    /// run then claims nothing.
    pub(crate) fn finish(&mut self) -> (ServerExit, Recording) {
        let _ = self.wait_timeout(Duration::ZERO);
        drop(self.stdin.take());
        let ended = match &self.hung {
            Some(_) => {
                self.vm.kill();
                None
            }
            None => Some(self.vm.wait(Duration::from_secs(30))),
        };
        self.vm.shutdown(Duration::from_secs(10));
        if let Some(Err(e)) = ended {
            self.hung.get_or_insert(format!("the guest failed: {e}"));
        }
        if let Some(why) = &self.hung {
            if !self.record.lost.contains(why) {
                self.record.lost.push(why.clone());
            }
        }
        let (events, write_error, broken) = self
            .reader
            .take()
            .and_then(|h| h.join().ok())
            .unwrap_or_default();
        let mut recording = Recording {
            events,
            stats: RecorderStats::default(),
            write_error,
            edge: EdgeRecord::default(),
        };
        let mut exit = ServerExit::Running;
        if let Some(Record::Finished {
            exit: e,
            stats,
            flows,
            counters,
            edge_error,
            write_error,
            ..
        }) = self.finished.clone()
        {
            exit = e;
            recording.stats = RecorderStats {
                failure: stats.failure.clone().or_else(|| {
                    write_error.map(|w| format!("the guest could not send its events: {w}"))
                }),
                ..stats
            };
            recording.edge = EdgeRecord {
                flows,
                counters,
                error: edge_error,
            };
        }
        // Lines that were not events: lost, and the channel is not trusted whole.
        if let (n, Some(why)) = broken {
            recording.stats.lose(
                "lines of the guest's events channel that were not events",
                n,
            );
            recording
                .stats
                .failure
                .get_or_insert(format!("the guest's events channel broke: {why}"));
        }
        // The guest is gone: nothing more can reach the edge.
        if let Some(edge) = self.edge.as_mut() {
            let (flows, counters, error) = edge.finish();
            // The guest's own flows are its canary sockets' (Unix sockets in its sandbox).
            let canaries = std::mem::replace(&mut recording.edge.flows, flows);
            recording.edge.flows.extend(canaries);
            recording.edge.counters = counters;
            recording.edge.error = error.or(recording.edge.error.take());
        }
        if let Some(why) = &self.hung {
            recording.stats.failure = Some(why.clone());
            recording.edge.error.get_or_insert_with(|| {
                format!(
                    "the guest's part of the network record (its canary sockets) was lost: {why}"
                )
            });
        }
        (exit, recording)
    }
}

/// How long the guest's relay waits for a connection to the server to be made.
const RELAY_DIAL_TIMEOUT: Duration = Duration::from_secs(30);

/// In the guest: serves the TCP relay's port, each connection made to `port` on 127.0.0.1
/// from the sandbox's network namespace, on a thread of its own until the host closes the
/// port or the guest powers off. The host names ports only, and any other than the server's
/// is refused.
fn serve_relay(sandbox: &glassbox_sandbox::Sandbox, port: u16) -> Result<(), Error> {
    let path = format!("/dev/virtio-ports/{}", agent::ports::TCP);
    // Read and written without trusting the port's wake-ups: see `agent::Port`.
    let writer = agent::Port::open_rw(std::path::Path::new(&path))
        .map_err(Error::io(format!("open {path}")))?;
    let reader = writer
        .try_clone()
        .map_err(Error::io(format!("use {path}")))?;
    let dialer = sandbox.dialer()?;
    let dial = move |asked: u16| {
        if asked != port {
            return Err(std::io::Error::new(
                std::io::ErrorKind::ConnectionRefused,
                format!("the guest relays to port {port} only, not {asked}"),
            ));
        }
        dialer.connect(
            std::net::SocketAddr::from(([127, 0, 0, 1], port)),
            RELAY_DIAL_TIMEOUT,
        )
    };
    std::thread::Builder::new()
        .name("glassbox-relay".into())
        .spawn(move || {
            // Not reported here: the guest's stderr is the server's (the host's stderr log).
            // The host sees its connections fail with the reason its end knows.
            let _ = glassbox_vm::mux::serve(reader, writer, dial);
        })
        .map_err(Error::io("start the TCP relay"))?;
    Ok(())
}

/// A connection through the guest's TCP relay, as the MCP client's HTTP transport uses it
/// (the vm crate does not know the MCP crate's trait).
#[derive(Debug)]
pub(crate) struct RelayConnection(pub(crate) MuxStream);

impl Read for RelayConnection {
    fn read(&mut self, buf: &mut [u8]) -> std::io::Result<usize> {
        self.0.read(buf)
    }
}

impl Write for RelayConnection {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        self.0.write(buf)
    }

    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

impl glassbox_mcp::Connection for RelayConnection {
    fn set_timeouts(&self, timeout: Option<Duration>) -> std::io::Result<()> {
        self.0.set_read_timeout(timeout)?;
        self.0.set_write_timeout(timeout)
    }
}

/// The guest's side: `glassbox audit-guest`, run by the agent in a fresh guest. Reads the
/// request from stdin, runs the server in the namespace sandbox under the recorder, relays
/// its standard streams, and writes events and records to the events port. The exit status
/// is 0 once the end record is written.
pub fn guest_main() -> Result<i32, Error> {
    let port = format!("/dev/virtio-ports/{}", agent::ports::EVENTS);
    // Never a plain blocking write: see `agent::Port` (a two-vCPU guest's write to a port
    // could wait forever).
    let out =
        agent::Port::open_write(Path::new(&port)).map_err(Error::io(format!("open {port}")))?;
    let sink = recording::SharedSink::new(glassbox_model::bundle::Lines(out));
    let record = |r: &Record| -> Result<(), Error> {
        sink.record(r).map_err(|e| Error::Evidence {
            path: port.clone().into(),
            source: e,
        })
    };
    match guest_run(&sink) {
        Ok(_) if std::env::var_os(FAULT_GUEST_HANG).is_some() => loop {
            std::thread::sleep(Duration::from_secs(3600));
        },
        Ok(finished) => record(&finished)?,
        Err(e) => {
            record(&Record::Failed {
                reason: e.to_string(),
            })?;
            return Err(e);
        }
    }
    Ok(0)
}

/// Says on the guest's console how far the guest glassbox got (the kernel's log, at a level a
/// quiet console prints): a guest that never reports the server started is killed, and the
/// console's last lines are in the reason, so they name the step it stopped in.
fn guest_step(what: &str) {
    step_to(what, true);
}

/// [`guest_step`] for a step that lasts as long as the server's session: not watched.
fn guest_step_unwatched(what: &str) {
    step_to(what, false);
}

fn step_to(what: &str, watched: bool) {
    if let Ok(mut s) = GUEST_STEP.lock() {
        *s = Some((what.to_string(), std::time::Instant::now(), !watched));
    }
    guest_console(what);
}

fn guest_console(what: &str) {
    agent::say_on_console("guest", what);
}

/// The guest's current step ([`guest_step`]): what, since when, and whether
/// [`watch_steps`] has said where it waits.
static GUEST_STEP: std::sync::Mutex<Option<(String, std::time::Instant, bool)>> =
    std::sync::Mutex::new(None);

/// How long one step of the guest may last before [`watch_steps`] says where its threads wait.
const STEP_STALL: Duration = Duration::from_secs(10);

/// Watches the guest's steps: once one has lasted [`STEP_STALL`], says on the console where
/// each of glassbox's threads waits (its name, the kernel's wait channel, the system call it is
/// in, the top of its kernel stack), once per step. A guest that hangs is killed by the host,
/// and these lines, in its console's last ones, name the call that hung (a guest lost as its
/// run ended, about once in a hundred guests, is the case this was written for).
fn watch_steps() {
    std::thread::Builder::new()
        .name("step-watch".into())
        .spawn(|| loop {
            std::thread::sleep(Duration::from_secs(1));
            let stalled = match GUEST_STEP.lock() {
                Ok(mut s) => match s.as_mut() {
                    Some((what, since, said)) if !*said && since.elapsed() >= STEP_STALL => {
                        *said = true;
                        Some(what.clone())
                    }
                    _ => None,
                },
                Err(_) => return,
            };
            if let Some(what) = stalled {
                guest_console(&format!(
                    "{} s in \"{what}\"; where each thread waits:",
                    STEP_STALL.as_secs()
                ));
                for line in thread_waits() {
                    guest_console(&line);
                }
            }
        })
        .ok();
}

/// A line per thread of this process: name, wait channel, system call, top of the kernel stack.
fn thread_waits() -> Vec<String> {
    let read = |p: &Path| {
        std::fs::read_to_string(p)
            .map(|s| s.trim().to_string())
            .unwrap_or_default()
    };
    let Ok(tasks) = std::fs::read_dir("/proc/self/task") else {
        return Vec::new();
    };
    let mut out: Vec<String> = tasks
        .flatten()
        .map(|t| {
            let dir = t.path();
            let stack: Vec<String> = read(&dir.join("stack"))
                .lines()
                .take(4)
                .map(|l| {
                    l.split_whitespace()
                        .last()
                        .unwrap_or_default()
                        .split('+')
                        .next()
                        .unwrap_or_default()
                        .to_string()
                })
                .collect();
            let syscall = read(&dir.join("syscall"));
            format!(
                "  {} ({}): wchan {}, syscall {}, stack {}",
                read(&dir.join("comm")),
                t.file_name().to_string_lossy(),
                read(&dir.join("wchan")),
                syscall.split_whitespace().next().unwrap_or("?"),
                stack.join(" < ")
            )
        })
        .collect();
    out.sort();
    out
}

/// Sets the guest's wall clock `seconds` ahead (the guest is the run's alone: nothing else
/// reads it).
fn set_wall_clock_forward(seconds: i64) -> Result<(), Error> {
    // SAFETY: timespec is plain old data; zero is valid.
    let mut now: libc::timespec = unsafe { std::mem::zeroed() };
    // SAFETY: `now` is a valid out-pointer.
    if unsafe { libc::clock_gettime(libc::CLOCK_REALTIME, &mut now) } != 0 {
        return Err(Error::Internal(format!(
            "cannot read the guest's clock: {}",
            std::io::Error::last_os_error()
        )));
    }
    now.tv_sec += seconds as libc::time_t;
    // SAFETY: `now` is a valid timespec; the guest agent runs as the guest's root.
    if unsafe { libc::clock_settime(libc::CLOCK_REALTIME, &now) } != 0 {
        return Err(Error::Internal(format!(
            "cannot set the guest's clock forward: {}",
            std::io::Error::last_os_error()
        )));
    }
    Ok(())
}

fn guest_run(sink: &recording::SharedSink) -> Result<Record, Error> {
    watch_steps();
    guest_step("reading the request");
    // The request: the first line of stdin. What the reader buffered past it is the server's.
    let mut input = BufReader::new(std::io::stdin());
    let mut line = String::new();
    input
        .read_line(&mut line)
        .map_err(Error::io("read the request"))?;
    let req: GuestRequest = serde_json::from_str(&line)
        .map_err(|e| Error::Internal(format!("unreadable request from the host: {e}")))?;
    guest_step("request read; starting the sandbox and the server");
    let target = resolved(req.target);
    let choice = match req.recorder.as_str() {
        "notify" => RecorderChoice::Notify,
        "ebpf" => RecorderChoice::Ebpf,
        _ => RecorderChoice::Auto,
    };
    let s = req.secrets;
    let secrets = Secrets {
        user: s.user,
        hostname: s.hostname,
        home: s.home,
        files: s
            .files
            .into_iter()
            .map(|(path, contents, mode)| glassbox_sandbox::PlantedFile {
                path,
                contents,
                mode,
            })
            .collect(),
        tokens: s.tokens,
        ssh_agent: s.ssh_agent,
        lazy_rsa: None,
    };
    // A trigger run's wall clock: the guest's own, set forward before the server starts, so
    // that every program sees the moved date (a statically linked one too); the sandbox's time
    // namespace moves the monotonic clocks.
    let shift = match req.clock_shift_days {
        Some(days) => {
            let shift = glassbox_sandbox::clock::ClockShift::days(days);
            set_wall_clock_forward(shift.seconds())?;
            Some(shift.wall_set())
        }
        None => None,
    };
    let clock = Arc::new(Clock::new());
    let mut running = run::start(
        &target,
        &req.cwd,
        Box::new(sink.clone()),
        false,
        choice,
        RunPlan {
            secrets,
            clock: clock.clone(),
            first_event_id: req.first_event_id,
            network: req.network,
            relay: None,
            // The edge is the host's: the guest's sandbox sends its packets to the guest's
            // card, which the host serves.
            wire: req.network.map(|_| GUEST_CARD.to_string()),
            limits: req.limits.into(),
            answer: None,
            trust: req.trust.map(|c| recording::CaCertificate {
                pem: c.pem,
                der: c.der,
            }),
            ring: req.ring.map(|b| b as usize),
            marker: req.marker.clone(),
            clock_shift: shift,
        },
    )?;
    let (isolation, canary_sockets) = running
        .edge
        .as_ref()
        .map(|e| (e.isolation.clone(), e.canary_sockets.clone()))
        .unwrap_or_default();
    guest_step_unwatched("the server started");
    sink.record(&Record::Started {
        guest_now_ns: clock.now_ns(),
        settings: running.settings.clone(),
        mechanism: running.mechanism.clone(),
        ground_truth: running.ground_truth.clone(),
        isolation,
        canary_sockets,
    })
    .map_err(Error::io("write a record"))?;
    if let Some(port) = req.http_port {
        serve_relay(&running.sandbox, port)?;
    }

    let pump = |from: Option<std::fs::File>, mut to: Box<dyn Write + Send>| {
        std::thread::spawn(move || {
            if let Some(mut f) = from {
                let _ = std::io::copy(&mut f, &mut to);
                let _ = to.flush();
            }
        })
    };
    let out = pump(running.sandbox.stdout.take(), Box::new(std::io::stdout()));
    let err = pump(running.sandbox.stderr.take(), Box::new(std::io::stderr()));
    // The rest of stdin is the server's; its end (the host closed the session) is told.
    let (eof_tx, eof_rx) = std::sync::mpsc::channel::<()>();
    let server_in = running.sandbox.stdin.take();
    std::thread::spawn(move || {
        if let Some(mut w) = server_in {
            let mut buf = [0u8; 8192];
            let pending = input.buffer().to_vec();
            if w.write_all(&pending).is_ok() {
                input.consume(pending.len());
                while let Ok(n) = input.read(&mut buf) {
                    if n == 0 || w.write_all(&buf[..n]).is_err() {
                        break;
                    }
                }
            }
        }
        let _ = eof_tx.send(());
    });
    let grace = Duration::from_millis(req.exit_grace_ms);
    let linger = Duration::from_millis(req.linger_ms);
    // As on the host: a session's server runs until its stdin is closed (or it exits); then
    // it has `grace` to exit, and what it left behind is recorded `linger` longer. A bounded
    // run (an install) ignores its stdin and ends at its bound; a trace's command runs until
    // it exits.
    let until = match req.end {
        RunEnd::ExitOrAfter { ms } => Some(std::time::Instant::now() + Duration::from_millis(ms)),
        RunEnd::StdinClosed | RunEnd::Exit => None,
    };
    let exited = loop {
        if let Some(e) = running.sandbox.wait_timeout(Duration::from_millis(100)) {
            break Some(e);
        }
        match (req.end, until) {
            (_, Some(t)) if std::time::Instant::now() >= t => break None,
            (RunEnd::StdinClosed, _) if eof_rx.try_recv().is_ok() => {
                break running.sandbox.wait_timeout(grace)
            }
            _ => {}
        }
    };
    guest_step("the server ended; recording what outlived it");
    let mut outlived = Vec::new();
    if exited.is_some() {
        let until = std::time::Instant::now() + linger;
        while running.sandbox.others_alive() && std::time::Instant::now() < until {
            std::thread::sleep(Duration::from_millis(50));
        }
        outlived = crate::usage::outlived(&running.sandbox);
    }
    guest_step("walking what the run left");
    let left = running.left();
    let (exit, recording) =
        running.finish_saying(&|what| guest_step(&format!("finishing: {what}")));
    let limits_reached = running.sandbox.limits_reached().to_vec();
    guest_step("waiting for the server's output to end");
    let _ = out.join();
    let _ = err.join();
    guest_step("sending the end of the run");
    let st = recording.stats;
    Ok(Record::Finished {
        exit,
        stats: st,
        flows: recording.edge.flows,
        counters: recording.edge.counters,
        edge_error: recording.edge.error,
        limits_reached,
        outlived,
        left: Some(left),
        write_error: recording.write_error.map(|e| e.to_string()),
    })
}

impl crate::backend::Backend for VmRun {
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
        (self.isolation.clone(), self.canary_sockets.clone())
    }

    fn take_stdio(&mut self) -> crate::backend::Stdio {
        (
            self.stdin
                .take()
                .map(|w| Box::new(w) as Box<dyn Write + Send>),
            self.stdout
                .take()
                .map(|f| Box::new(f) as Box<dyn Read + Send>),
            self.stderr
                .take()
                .map(|f| Box::new(f) as Box<dyn Read + Send>),
        )
    }

    fn wait_timeout(&mut self, timeout: Duration) -> Option<ServerExit> {
        VmRun::wait_timeout(self, timeout)
    }

    fn wait(&mut self) -> Option<ServerExit> {
        VmRun::wait(self)
    }

    /// The guest lingers by itself.
    fn others_alive(&self) -> bool {
        false
    }

    /// Until the guest reports the end of the run (its word, which comes after the server's
    /// exit and the guest's linger: a server that dies at once is waited for that much longer,
    /// never less).
    fn may_still_listen(&self) -> bool {
        !self.reported_end()
    }

    /// Through the guest's TCP relay, whose guest end connects from the sandbox's network
    /// namespace in the guest.
    fn loopback_dialer(&self) -> Result<crate::backend::LoopbackDialer, Error> {
        let relay = self
            .relay()
            .ok_or_else(|| Error::Internal("the guest was started without its TCP relay".into()))?;
        Ok(Arc::new(move |port, timeout| {
            relay
                .connect(port, timeout)
                .map(|s| Box::new(RelayConnection(s)) as Box<dyn glassbox_mcp::Connection>)
        }))
    }

    fn outlived(&self) -> Vec<String> {
        VmRun::outlived(self)
    }

    fn left(&self) -> Option<crate::left::Left> {
        match self.finished.as_ref() {
            Some(Record::Finished { left, .. }) => left.clone(),
            _ => None,
        }
    }

    fn limits_reached(&self) -> &[String] {
        VmRun::limits_reached(self)
    }

    fn finish(&mut self) -> (ServerExit, Recording) {
        VmRun::finish(self)
    }

    fn vm_record(&self) -> Option<glassbox_model::VmRecord> {
        Some(self.record.clone())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_vm_gets_the_memory_limit_plus_headroom_and_the_hosts_cpus() {
        let mib = 1u64 << 20;
        let l = |memory: Option<u64>, cpus: Option<f64>| glassbox_sandbox::Limits {
            memory,
            pids: Some(64),
            cpus,
            disk: 64 * mib,
        };
        // The host's CPUs up to 4, or the CPU limit rounded up if more, never past the host's.
        assert_eq!(vm_size_on(&l(Some(256 * mib), Some(1.0)), 2), (512, 2));
        assert_eq!(vm_size_on(&l(Some(256 * mib), Some(1.0)), 1), (512, 1));
        assert_eq!(vm_size_on(&l(Some(1 << 30), Some(1.5)), 2), (1280, 2));
        assert_eq!(vm_size_on(&l(Some(1 << 30), Some(6.0)), 64), (1280, 6));
        assert_eq!(vm_size_on(&l(Some(1 << 30), Some(6.0)), 3), (1280, 3));
        assert_eq!(vm_size_on(&l(Some(1 << 30), None), 64), (1280, 4));
        // Part of a MiB counts as a MiB; a fraction of a CPU is a quota, not fewer vCPUs.
        assert_eq!(vm_size_on(&l(Some(100 * mib + 1), Some(0.25)), 2), (357, 2));
        assert_eq!(vm_size(&l(None, Some(2.0))).0, 2048);
        assert!(vm_size(&l(None, None)).1 >= 1);
        // The limits cross to the guest unchanged.
        let limits = l(Some(300 * mib), Some(0.5));
        let wire = serde_json::to_string(&WireLimits::from(&limits)).unwrap();
        let back: glassbox_sandbox::Limits =
            serde_json::from_str::<WireLimits>(&wire).unwrap().into();
        assert_eq!(
            (back.memory, back.pids, back.cpus, back.disk),
            (limits.memory, limits.pids, limits.cpus, limits.disk)
        );
    }

    #[test]
    fn guest_events_land_on_the_hosts_clock_in_the_phase_they_happened() {
        use glassbox_model::{EventKind, Phase};
        let event = |t_ns: u64| Event {
            id: 1,
            t_ns,
            pid: 2,
            ppid: 1,
            phase: Phase::Shutdown,
            kind: EventKind::Open {
                syscall: "openat".into(),
                path: "/etc/hostname".into(),
                flags: 0,
                flags_text: "O_RDONLY".into(),
                result: Some(3),
            },
        };
        let ms = |n: u64| n * 1_000_000;
        let clock = Clock::new();
        let mut st = Stamper::default();
        std::thread::sleep(Duration::from_millis(300));
        clock.set_phase(Phase::Initialize);
        std::thread::sleep(Duration::from_millis(300));
        // Read after the host sent `initialize`, but made at the guest's start: kept until the
        // guest's clock is known, then placed back in `startup`.
        assert!(st.stamp(event(0), &clock).is_none());
        let placed = st.started(ms(500), &clock);
        assert_eq!(placed.len(), 1);
        assert_eq!(placed[0].phase, Phase::Startup, "{:?}", placed[0]);
        assert!(
            placed[0].t_ns >= ms(100) && placed[0].t_ns < ms(300),
            "{}",
            placed[0].t_ns
        );
        // A line that crossed faster than the first ones tightens the offset (about 100 ms so
        // far; this one says at most about 50).
        let now = clock.now_ns();
        let quick = st.stamp(event(now - ms(50)), &clock).unwrap();
        let offset = st.offset.unwrap();
        assert!(offset >= ms(50) && offset < ms(90), "{offset}");
        assert!(quick.t_ns >= now && quick.t_ns <= clock.now_ns());
        // Later events follow the offset, never later than their arrival.
        let now = clock.now_ns();
        let e = st.stamp(event(ms(10_000)), &clock).unwrap();
        assert!(e.t_ns >= now && e.t_ns <= clock.now_ns());
        assert_eq!(e.phase, Phase::Initialize);
        // The guest's own flows (its canary sockets') follow the same offset as its events, so
        // a flow stays beside the connect that made it; never later than the report arrived.
        let offset = st.offset.unwrap();
        let mut flows = [glassbox_model::Flow {
            t_ns: ms(100),
            end_ns: ms(120),
            ..Default::default()
        }];
        let before = clock.now_ns();
        st.place_flows(&mut flows, &clock);
        assert_eq!(flows[0].t_ns, ms(100) + offset);
        assert_eq!(flows[0].end_ns, ms(120) + offset);
        let mut late = [glassbox_model::Flow {
            t_ns: ms(1_000_000),
            end_ns: ms(1_000_001),
            ..Default::default()
        }];
        st.place_flows(&mut late, &clock);
        assert!(late[0].t_ns >= before && late[0].t_ns <= clock.now_ns());
        assert_eq!(late[0].end_ns, late[0].t_ns);
        // A stream that never told its clock: stamped on arrival.
        let mut st = Stamper::default();
        assert!(st.stamp(event(0), &clock).is_none());
        let mut flows = [glassbox_model::Flow::default()];
        st.place_flows(&mut flows, &clock);
        assert!(flows[0].t_ns >= ms(600));
        let rest = st.rest(&clock);
        assert!(rest[0].t_ns >= ms(600));
        assert_eq!(rest[0].phase, Phase::Initialize);
    }

    #[test]
    fn shares_are_the_working_directory_and_the_read_only_paths_never_the_guests_own() {
        let ro = [PathBuf::from("/work/sub"), PathBuf::from("/srv/data/f.txt")];
        assert_eq!(
            shares(Path::new("/work"), &ro).unwrap(),
            [PathBuf::from("/work"), PathBuf::from("/srv/data")]
        );
        // A file's directory is shared (9p shares directories), once.
        assert_eq!(
            shares(
                Path::new("/work"),
                &[PathBuf::from("/usr"), PathBuf::from("/usr/lib")]
            )
            .unwrap(),
            [PathBuf::from("/work"), PathBuf::from("/usr")]
        );
        // Never the host's root: not as a working directory (the guest's own is used),
        // refused as a read-only path.
        assert!(shares(Path::new("/"), &[]).unwrap().is_empty());
        let e = shares(Path::new("/"), &[PathBuf::from("/")])
            .unwrap_err()
            .to_string();
        assert!(e.contains("not supported"), "{e}");
        // Nor what would cover the guest's own: its /tmp, the agent's /run, the kernel's.
        assert!(shares(Path::new("/tmp"), &[]).is_err());
        assert!(shares(Path::new("/run"), &[]).is_err());
        assert!(shares(Path::new("/work"), &[PathBuf::from("/proc/1")]).is_err());
        assert_eq!(
            shares(Path::new("/tmp/project"), &[]).unwrap(),
            [PathBuf::from("/tmp/project")]
        );
    }
}
