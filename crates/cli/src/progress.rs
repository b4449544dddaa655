//! What the binary shows while it works: an audit's phases on stderr with the time since it
//! started ([`StderrProgress`]), and a trace's events as readable lines ([`Readable`]).

use glassbox_audit::{EventSink, Progress};
use glassbox_model::{Event, EventKind, Phase};
use std::io::Write;
use std::time::Instant;

pub(crate) struct StderrProgress {
    pub(crate) start: Instant,
}

impl StderrProgress {
    /// A run's line: what the run is, or why it is made again.
    fn run_line(&self, what: &str) {
        eprintln!(
            "glassbox: [{:6.2}s] run: {what}",
            self.start.elapsed().as_secs_f64()
        );
    }
}

impl Progress for StderrProgress {
    fn phase(&self, phase: &Phase) {
        let line = format!(
            "glassbox: [{:6.2}s] {}\n",
            self.start.elapsed().as_secs_f64(),
            glassbox_model::Bytes::from(phase.to_string())
        );
        let _ = std::io::stderr().write_all(line.as_bytes());
    }

    fn network_run(&self, mode: glassbox_model::NetworkMode) {
        let what = match mode {
            glassbox_model::NetworkMode::Capture => "network captured at glassbox's edge",
            glassbox_model::NetworkMode::Denied => "network denied: every packet dropped",
            glassbox_model::NetworkMode::Install => {
                "installing the package: only its registry is reached, the rest captured"
            }
            glassbox_model::NetworkMode::Trigger => {
                "trigger run: the session again with the server's world changed"
            }
        };
        self.run_line(what);
    }

    fn repeat(&self, why: &str) {
        self.run_line(why);
    }
}

/// Events as lines a person can read.
pub(crate) struct Readable<W: Write + Send>(pub(crate) W);

impl<W: Write + Send> EventSink for Readable<W> {
    fn event(&mut self, e: &Event) -> std::io::Result<()> {
        let what = match &e.kind {
            EventKind::Exec { path, argv, .. } => {
                let args: Vec<String> = argv.iter().map(|a| a.to_string()).collect();
                format!("exec {path} [{}]", args.join(" "))
            }
            EventKind::Open {
                syscall,
                path,
                flags_text,
                ..
            } => format!("{syscall} {path} {flags_text}"),
            EventKind::Stat { syscall, path } => format!("{syscall} {path}"),
            EventKind::Connect { syscall, addr, .. } => format!("{syscall} {addr}"),
            EventKind::Bind { addr, .. } => format!("bind {addr}"),
            EventKind::Socket {
                domain,
                sock_type,
                protocol,
            } => format!("socket domain={domain} type={sock_type} protocol={protocol}"),
            EventKind::Image { path, shown } => format!("image {path} (exec named {shown})"),
            EventKind::Honeytoken { path, access, .. } => {
                format!("HONEYTOKEN {access} {path} (kernel-reported)")
            }
            EventKind::Refused { syscall, errno, .. } => {
                format!("REFUSED {syscall} (errno {errno})")
            }
        };
        writeln!(
            self.0,
            "[{:9.4}s] pid {:<5} ppid {:<5} {}",
            e.t_ns as f64 / 1e9,
            e.pid,
            e.ppid,
            what
        )
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}
