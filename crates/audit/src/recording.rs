//! What a run records and how it is asked for, whatever the backend: the sinks its events go
//! to, the recorder of the open and stat families, the network edge's thread and what it
//! saw, a run's plan and its [`Recording`]. The namespace sandbox (`run.rs`) and the microVM
//! (`microvm.rs`) both make runs of these; [`crate::backend`] names them in its trait.

use crate::secrets::Secrets;
use crate::{AuditOptions, Error};
use glassbox_model::bundle::Lines;
use glassbox_model::{EdgeCounters, Event, Flow, NetworkMode};
use glassbox_plan::target;
use glassbox_trace::{Clock, RecorderStats};
use glassbox_vm::wire::RunEnd;
use serde::{Deserialize, Serialize};
use std::io::Write;
use std::os::fd::OwnedFd;
use std::path::Path;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

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
            .map_err(Error::io("start the edge thread"))?;
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
    pub(crate) fn forward(tun: OwnedFd, card: String) -> Result<EdgeServer, Error> {
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

/// What the recorder thread hands back: its counters, the kept events, a write error.
pub(crate) type RecorderResult = (RecorderStats, Vec<Event>, Option<std::io::Error>);

/// The events and counters of a finished recording.
pub(crate) struct Recording {
    pub events: Vec<Event>,
    pub stats: RecorderStats,
    pub write_error: Option<std::io::Error>,
    /// What the network edge saw (empty without an edge).
    pub edge: EdgeRecord,
}

/// How to start one run.
pub(crate) struct RunPlan {
    /// The secrets to plant ([`crate::Isolation::secrets`] makes fresh ones).
    pub secrets: Secrets,
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

/// One run to start on a backend ([`Isolation::start`](crate::Isolation::start)): what runs and where, how it is
/// recorded, and when it ends.
pub(crate) struct Launch<'a> {
    /// The command, resolved on this host.
    pub target: &'a target::Resolved,
    /// Its working folder.
    pub cwd: &'a Path,
    /// How the open and stat families are recorded.
    pub recorder: RecorderChoice,
    /// Whether the events are also kept in memory for the checks (an audit's runs); a trace
    /// only writes them to its sink.
    pub keep: bool,
    /// When the run ends. A microVM's guest ends it by itself and must be told; on this
    /// kernel the caller ends it ([`Backend::finish`]).
    pub end: RunEnd,
    /// How long the server has to exit once its stdin is closed.
    pub exit_grace: Duration,
    /// How long what the server left running is still recorded once it exited.
    pub linger: Duration,
    /// The port an HTTP server listens on in its sandbox (in a microVM the host reaches it
    /// through the guest's TCP relay).
    pub http_port: Option<u16>,
}

impl<'a> Launch<'a> {
    /// A run of the audit `opts`: an MCP session with the server (`bound` `None`: it ends
    /// when its stdin is closed), or an install (`Some(bound)`: it ends when the installer
    /// exits or at the bound; its stdin is closed from the start, and it is not the server:
    /// nothing to reach over HTTP).
    pub(crate) fn audit(
        opts: &AuditOptions,
        target: &'a target::Resolved,
        cwd: &'a Path,
        bound: Option<Duration>,
    ) -> Launch<'a> {
        Launch {
            target,
            cwd,
            recorder: opts.recorder,
            keep: true,
            end: match bound {
                None => RunEnd::StdinClosed,
                Some(b) => RunEnd::ExitOrAfter {
                    ms: b.as_millis() as u64,
                },
            },
            exit_grace: opts.exit_grace,
            linger: opts.linger,
            http_port: opts
                .http
                .as_ref()
                .filter(|_| bound.is_none())
                .map(|h| h.port),
        }
    }
}
