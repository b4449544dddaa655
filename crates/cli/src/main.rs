//! `glassbox`: audit MCP servers by running them.
//!
//! Exit codes of `audit`: 0 clean, 1 flagged or withheld, 2 usage or internal error,
//! 3 inconclusive.

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use glassbox_audit::{AuditOptions, EventSink, JsonLines, Progress, RecorderChoice};
use glassbox_model::{Event, EventKind, Phase, ServerExit};
use std::ffi::OsString;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};

#[derive(Parser, Debug)]
#[command(
    name = "glassbox",
    version,
    about = "Audit MCP servers by running them: in a sandbox, under a syscall recorder, with planted fake secrets.",
    after_help = "Exit codes of audit: 0 clean, 1 flagged or withheld, 2 usage or internal error, 3 inconclusive."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run an MCP stdio server in the sandbox, speak MCP to it, call every tool, and report
    /// what it did.
    Audit {
        /// Also write the JSON report to FILE ("-" for standard output).
        #[arg(long, value_name = "FILE")]
        json: Option<PathBuf>,
        /// Where to write the evidence bundle (default ./glassbox-evidence/<run-id>/).
        #[arg(long, value_name = "DIR")]
        evidence: Option<PathBuf>,
        /// Make another host path visible to the server, read-only (repeatable).
        #[arg(long = "ro", value_name = "PATH")]
        read_only: Vec<PathBuf>,
        /// Seconds to wait for each answer.
        #[arg(long, value_name = "SECS", default_value_t = 20)]
        request_timeout: u64,
        /// Bound on the whole MCP session, in seconds.
        #[arg(long, value_name = "SECS", default_value_t = 300)]
        session_timeout: u64,
        /// No progress lines on stderr.
        #[arg(long, short)]
        quiet: bool,
        /// How to record the open and stat families.
        #[arg(long, value_enum, default_value_t = Recorder::Auto)]
        recorder: Recorder,
        /// The server command and its arguments.
        #[arg(last = true, required = true, value_name = "COMMAND")]
        cmd: Vec<OsString>,
    },
    /// Run any command in the same sandbox under the same recorder, without MCP.
    Trace {
        /// Write events as JSON lines to FILE (default: readable lines on stderr).
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
        /// Make another host path visible, read-only (repeatable).
        #[arg(long = "ro", value_name = "PATH")]
        read_only: Vec<PathBuf>,
        /// How to record the open and stat families.
        #[arg(long, value_enum, default_value_t = Recorder::Auto)]
        recorder: Recorder,
        /// The command and its arguments.
        #[arg(last = true, required = true, value_name = "COMMAND")]
        cmd: Vec<OsString>,
    },
}

/// `--recorder`.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum Recorder {
    /// eBPF where allowed (root), seccomp user notification otherwise.
    Auto,
    /// seccomp user notification for every recorded call.
    Notify,
    /// eBPF for the open and stat families (fails where not allowed).
    Ebpf,
}

impl From<Recorder> for RecorderChoice {
    fn from(r: Recorder) -> Self {
        match r {
            Recorder::Auto => RecorderChoice::Auto,
            Recorder::Notify => RecorderChoice::Notify,
            Recorder::Ebpf => RecorderChoice::Ebpf,
        }
    }
}

struct StderrProgress {
    start: Instant,
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
}

/// Events as lines a person can read.
struct Readable<W: Write + Send>(W);

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

fn main() {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            std::process::exit(if e.use_stderr() { 2 } else { 0 });
        }
    };
    match run(cli) {
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("glassbox: error: {e:#}");
            std::process::exit(2);
        }
    }
}

fn run(cli: Cli) -> Result<i32> {
    let cwd = std::env::current_dir().context("cannot read the current directory")?;
    match cli.command {
        Command::Audit {
            json,
            evidence,
            read_only,
            request_timeout,
            session_timeout,
            quiet,
            recorder,
            cmd,
        } => {
            let mut opts = AuditOptions::new(cmd, cwd);
            opts.recorder = recorder.into();
            opts.evidence_dir = evidence;
            opts.extra_ro = absolute(read_only)?;
            opts.session.request_timeout = Duration::from_secs(request_timeout.max(1));
            opts.session.session_timeout = Duration::from_secs(session_timeout.max(1));
            let progress = StderrProgress {
                start: Instant::now(),
            };
            let audit = if quiet {
                glassbox_audit::audit(&opts, &glassbox_audit::Quiet)
            } else {
                glassbox_audit::audit(&opts, &progress)
            }?;
            let color = std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none();
            let text = glassbox_report::terminal(&audit.evidence, &audit.report, color);
            let json_text = glassbox_report::json(&audit.report);
            match json.as_deref() {
                Some(p) if p.as_os_str() == "-" => println!("{json_text}"),
                Some(p) => {
                    std::fs::write(p, format!("{json_text}\n"))
                        .with_context(|| format!("cannot write {}", p.display()))?;
                    print!("{text}");
                }
                None => print!("{text}"),
            }
            Ok(audit.report.verdict.exit_code())
        }
        Command::Trace {
            out,
            read_only,
            recorder,
            cmd,
        } => {
            let sink: Box<dyn EventSink> = match &out {
                Some(p) => Box::new(JsonLines(std::io::BufWriter::new(
                    std::fs::File::create(p)
                        .with_context(|| format!("cannot create {}", p.display()))?,
                ))),
                None => Box::new(Readable(std::io::stderr())),
            };
            let (exit, events) =
                glassbox_audit::trace(&cmd, &cwd, &absolute(read_only)?, sink, recorder.into())?;
            if let Some(p) = &out {
                eprintln!("glassbox: {events} events written to {}", p.display());
            }
            Ok(match exit {
                ServerExit::Exited { code } => code,
                ServerExit::Signaled { signal, .. } => 128 + signal,
                ServerExit::Running => 2,
            })
        }
    }
}

fn absolute(paths: Vec<PathBuf>) -> Result<Vec<PathBuf>> {
    paths
        .into_iter()
        .map(|p| {
            std::fs::canonicalize(&p).with_context(|| format!("--ro {}: no such path", p.display()))
        })
        .collect()
}
