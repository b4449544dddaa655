//! What `audit` and `trace` share: a sandbox with planted secrets, its recorder, and the
//! event stream written as it happens.

use crate::target::Resolved;
use crate::Error;
use glassbox_model::{Event, Honeytoken, SandboxSettings};
use glassbox_sandbox::{honeytokens, Config, Sandbox};
use glassbox_trace::{rules, Clock, FileChannel, Recorder, RecorderStats};
use std::io::Write;
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

/// JSON lines to a writer.
#[derive(Debug)]
pub struct JsonLines<W: Write + Send>(pub W);

impl<W: Write + Send> EventSink for JsonLines<W> {
    fn event(&mut self, e: &Event) -> std::io::Result<()> {
        serde_json::to_writer(&mut self.0, e)?;
        self.0.write_all(b"\n")
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
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
    pub clock: Arc<Clock>,
    pub settings: SandboxSettings,
    /// How calls are recorded.
    pub mechanism: String,
    stop: Arc<AtomicBool>,
    recorder: Option<JoinHandle<RecorderResult>>,
}

/// What the recorder thread hands back: its counters, the kept events, a write error.
type RecorderResult = (RecorderStats, Vec<Event>, Option<std::io::Error>);

/// The events and counters of a finished recording.
pub(crate) struct Recording {
    pub events: Vec<Event>,
    pub stats: RecorderStats,
    pub write_error: Option<std::io::Error>,
}

/// Plants fresh secrets, starts `target` in the sandbox, and records it into `sink`.
/// `keep` says whether the events are also kept in memory (for checks).
pub(crate) fn start(
    target: &Resolved,
    cwd: &Path,
    sink: Box<dyn EventSink>,
    keep: bool,
    choice: RecorderChoice,
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
    let user = honeytokens::user_name().map_err(Error::Honeytokens)?;
    let hostname = "devbox".to_string();
    let home = format!("/home/{user}");
    let (files, tokens): (_, Vec<Honeytoken>) =
        honeytokens::generate(&home, &user, &hostname).map_err(Error::Honeytokens)?;
    let cfg = Config {
        program: target.program.clone(),
        argv: target.argv.clone(),
        cwd: cwd.to_path_buf(),
        extra_ro: target.extra_ro.clone(),
        user,
        hostname,
        path_prefix: target.path_prefix.clone(),
        env: vec![],
        files,
        rules: rules(files_by_ebpf),
        network: None,
    };
    let clock = Arc::new(Clock::new());
    let mut files = None;
    let mut sandbox = Sandbox::spawn_with(&cfg, &mut |server_pid| {
        if files_by_ebpf {
            files = Some(
                FileChannel::attach(server_pid)
                    .map_err(|e| format!("cannot attach the eBPF recorder: {e}"))?,
            );
        }
        Ok(())
    })?;
    let mut settings = sandbox.settings().clone();
    settings.honeytokens = tokens;
    let listener = sandbox
        .listener
        .take()
        .ok_or_else(|| Error::Internal("no seccomp listener".into()))?;
    let mut recorder = Recorder::new(listener, &home, clock.clone());
    if let Some(f) = files {
        recorder = recorder.with_file_channel(f);
    }
    let mechanism = recorder.mechanism().to_string();
    let stop = Arc::new(AtomicBool::new(false));
    let stop2 = stop.clone();
    // The server waits in its first execve until the recorder answers: the run's phases start
    // once that exec is recorded, so the server's own start is in phase `startup`.
    let (started_tx, started_rx) = std::sync::mpsc::channel::<()>();
    let recorder = std::thread::Builder::new()
        .name("recorder".into())
        .spawn(move || {
            let mut out = Writer {
                sink,
                keep,
                kept: Vec::new(),
                error: None,
                started: Some(started_tx),
            };
            let stats = recorder.run(1, &stop2, &mut out);
            (stats, out.kept, out.error)
        })
        .map_err(|e| Error::Internal(format!("cannot start the recorder thread: {e}")))?;
    // Bounded: a server whose exec is never seen (killed at once) must not stall the audit.
    let _ = started_rx.recv_timeout(std::time::Duration::from_secs(5));
    Ok(Running {
        sandbox,
        clock,
        settings,
        mechanism,
        stop,
        recorder: Some(recorder),
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
}

impl glassbox_trace::Sink for Writer {
    fn event(&mut self, e: Event) {
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
        (
            exit,
            Recording {
                events,
                stats,
                write_error,
            },
        )
    }
}
