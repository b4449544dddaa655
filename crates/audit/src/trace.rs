//! `glassbox trace`: a command run in the sandbox under the recorder, without MCP, with the
//! network captured at the edge, on either isolation: the run starts through the same
//! [`Isolation::start`] as an audit's, so under `--isolation microvm` it is the guest's
//! `audit-guest` run, its records and the one reader of the events port (`microvm.rs`). The
//! command's standard streams are glassbox's own; it ends when the command exits.

use crate::recording::Launch;
use crate::{recording, Error, EventSink, Isolation, RecorderChoice, ResponderChoice};
use glassbox_model::{NetworkMode, ServerExit};
use glassbox_plan::target;
use std::ffi::OsString;
use std::io::Read;
use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

/// What [`trace`] runs, and how.
#[derive(Clone, Debug)]
pub struct TraceOptions {
    /// The command and its arguments.
    pub command: Vec<OsString>,
    /// Its working folder (in a microVM: shared with the guest).
    pub cwd: PathBuf,
    /// More host paths it sees, read-only (absolute).
    pub extra_ro: Vec<PathBuf>,
    /// Environment variables set for it.
    pub env: Vec<(String, String)>,
    /// How the open and stat families are recorded.
    pub recorder: RecorderChoice,
    /// What the network edge answers.
    pub responder: ResponderChoice,
    /// Where it runs.
    pub isolation: Isolation,
}

impl TraceOptions {
    /// `command` run in `cwd`, with the defaults of `glassbox trace` (the recorder chosen for
    /// this host, an edge that answers, the namespace sandbox on this kernel).
    pub fn new(command: Vec<OsString>, cwd: PathBuf) -> TraceOptions {
        TraceOptions {
            command,
            cwd,
            extra_ro: Vec::new(),
            env: Vec::new(),
            recorder: RecorderChoice::Auto,
            responder: ResponderChoice::Ok,
            isolation: Isolation::Namespace,
        }
    }
}

/// What [`trace`] saw besides the events it wrote.
#[derive(Debug)]
pub struct Traced {
    /// How the command ended.
    pub exit: ServerExit,
    /// Events recorded.
    pub events: u64,
    /// What the recorder saw and lost (a trace that lost calls says so, as an audit does).
    pub stats: glassbox_trace::RecorderStats,
    /// The flows at the network edge (capture mode) and the canary sockets.
    pub flows: Vec<glassbox_model::Flow>,
}

/// Runs `opts.command` under the recorder on `opts.isolation`, without MCP, with the network
/// captured at the edge, its events written to `sink` as they come. `started` is called once
/// the command runs, with the microVM's record on that backend (its accelerator, its kernel).
/// The command's standard streams are glassbox's own; the run ends when the command exits.
/// A microVM guest that ends without saying how the command ended is [`Error::GuestLost`].
pub fn trace(
    opts: &TraceOptions,
    sink: Box<dyn EventSink>,
    started: &mut dyn FnMut(Option<&glassbox_model::VmRecord>),
) -> Result<Traced, Error> {
    target::check_working_folder(&opts.cwd)?;
    let answer = match opts.responder {
        ResponderChoice::Ok => Some(
            glassbox_net::Authority::fresh()
                .map_err(|e| Error::Internal(format!("cannot make the trace's CA: {e}")))?,
        ),
        ResponderChoice::Refuse => None,
    };
    let trust = answer.as_ref().map(recording::CaCertificate::of);
    let mut target = target::resolve(&opts.command, &opts.cwd)?;
    target.extra_ro.extend(opts.extra_ro.iter().cloned());
    target.env.extend(opts.env.iter().cloned());
    let launch = Launch {
        target: &target,
        cwd: &opts.cwd,
        recorder: opts.recorder,
        // Written to the sink only: a command may run for hours.
        keep: false,
        end: glassbox_vm::wire::RunEnd::Exit,
        exit_grace: Duration::ZERO,
        linger: Duration::ZERO,
        http_port: None,
    };
    let mut running = opts.isolation.start(
        &launch,
        sink,
        recording::RunPlan {
            secrets: opts.isolation.secrets()?,
            clock: Arc::new(glassbox_trace::Clock::new()),
            first_event_id: 1,
            network: Some(NetworkMode::Capture),
            relay: None,
            wire: None,
            limits: glassbox_sandbox::Limits::default(),
            answer,
            trust,
            ring: None,
            marker: None,
            clock_shift: None,
        },
    )?;
    started(running.vm_record().as_ref());
    let (stdin, stdout, stderr) = running.take_stdio();
    let pump = |from: Option<Box<dyn Read + Send>>, mut to: Box<dyn std::io::Write + Send>| {
        std::thread::spawn(move || {
            if let Some(mut f) = from {
                let _ = std::io::copy(&mut f, &mut to);
                let _ = to.flush();
            }
        })
    };
    let out = pump(stdout, Box::new(std::io::stdout()));
    let err = pump(stderr, Box::new(std::io::stderr()));
    // stdin is forwarded on a detached thread: a blocked read of our stdin must not keep the
    // trace alive after the command ended.
    std::thread::spawn(move || {
        if let Some(mut w) = stdin {
            let mut buf = [0u8; 8192];
            let mut input = std::io::stdin();
            while let Ok(n) = input.read(&mut buf) {
                if n == 0 || w.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
        }
    });
    let exited = running.wait();
    let (_, recording) = running.finish();
    let _ = out.join();
    let _ = err.join();
    if let Some(e) = recording.write_error {
        return Err(Error::Evidence {
            path: "trace output".into(),
            source: e,
        });
    }
    // Only a microVM's guest can be lost: it then said nothing of how the command ended.
    let Some(exit) = exited else {
        let why = recording.stats.failure.unwrap_or_default();
        return Err(Error::GuestLost(format!("the microVM trace failed: {why}")));
    };
    Ok(Traced {
        exit,
        events: recording.stats.events,
        stats: recording.stats,
        flows: recording.edge.flows,
    })
}
