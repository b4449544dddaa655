//! One run of the server: started on its backend, spoken to over MCP (stdio, or HTTP to its
//! port) with the session's hooks, ended, and what it left recorded ([`one_run`]).

use crate::recording::Launch;
use crate::{backend, left, recording, usage, AuditOptions, Error, EventSink, Progress};
use glassbox_model::{bundle, Phase, PhaseTiming, ServerExit, SessionSummary, TranscriptEntry};
use glassbox_plan::target;
use std::path::Path;
use std::sync::{Arc, Mutex};
use std::time::Duration;

pub(crate) struct Hooks<'a> {
    pub(crate) clock: Arc<glassbox_trace::Clock>,
    pub(crate) transcript: Mutex<bundle::Transcript>,
    pub(crate) timings: Mutex<Vec<PhaseTiming>>,
    pub(crate) progress: &'a dyn Progress,
    /// The sandbox's usage, read as each phase starts ([`usage::Log`]).
    pub(crate) usage: Option<usage::Log>,
}

impl Hooks<'_> {
    /// Starts the timeline at `phase` without telling the progress display.
    pub(crate) fn set_phase_quietly(&self, phase: Phase) {
        if let Some(u) = &self.usage {
            u.phase(&phase);
        }
        let now = self.clock.now_ns();
        if let Ok(mut t) = self.timings.lock() {
            t.push(PhaseTiming {
                phase: phase.clone(),
                start_ns: now,
                end_ns: now,
            });
        }
        self.clock.set_phase(phase);
    }
}

impl glassbox_mcp::SessionHooks for Hooks<'_> {
    fn set_phase(&self, phase: Phase) {
        if let Some(u) = &self.usage {
            u.phase(&phase);
        }
        let now = self.clock.now_ns();
        if let Ok(mut t) = self.timings.lock() {
            if let Some(last) = t.last_mut() {
                last.end_ns = now;
            }
            t.push(PhaseTiming {
                phase: phase.clone(),
                start_ns: now,
                end_ns: now,
            });
        }
        self.progress.phase(&phase);
        self.clock.set_phase(phase);
    }

    fn transcript(&self, entry: TranscriptEntry) {
        if let Ok(mut t) = self.transcript.lock() {
            t.push(entry);
        }
    }

    fn now_ns(&self) -> u64 {
        self.clock.now_ns()
    }
}

/// What one run of the server produced.
pub(crate) struct RunResult {
    pub(crate) session: SessionSummary,
    pub(crate) transcript: Vec<TranscriptEntry>,
    pub(crate) server_exit: ServerExit,
    pub(crate) recording: recording::Recording,
    pub(crate) timings: Vec<PhaseTiming>,
    pub(crate) settings: glassbox_model::SandboxSettings,
    pub(crate) mechanism: String,
    pub(crate) isolation: Vec<String>,
    pub(crate) canary_sockets: Vec<String>,
    pub(crate) ground_truth: Option<String>,
    pub(crate) start_ns: u64,
    pub(crate) end_ns: u64,
    /// The limits the sandbox reached.
    pub(crate) limits_reached: Vec<String>,
    /// Its phases that reached a bound or left processes running ([`usage`]), and whether
    /// its backend could tell.
    pub(crate) usage: Option<Vec<glassbox_model::PhaseUsage>>,
    /// Processes still running when it ended (after the server exited, and a while more).
    pub(crate) outlived: Vec<String>,
    /// What it left in the sandbox's writable places ([`left`]; `None`: not read).
    pub(crate) left: Option<left::Left>,
    /// The microVM the run was in, if any.
    pub(crate) vm: Option<glassbox_model::VmRecord>,
}

impl RunResult {
    /// A run whose microVM guest hung or died before the server ran: nothing was observed,
    /// which the recorder's failure says (the audit is then inconclusive with the reason).
    pub(crate) fn lost(why: String, start_ns: u64, end_ns: u64) -> RunResult {
        RunResult {
            session: SessionSummary {
                failure: Some(format!("the server never ran: {why}")),
                ..SessionSummary::default()
            },
            transcript: Vec::new(),
            server_exit: ServerExit::Running,
            recording: recording::Recording {
                events: Vec::new(),
                stats: glassbox_trace::RecorderStats {
                    failure: Some(why.clone()),
                    ..Default::default()
                },
                write_error: None,
                edge: recording::EdgeRecord {
                    error: Some(format!("no edge: {why}")),
                    ..Default::default()
                },
            },
            timings: Vec::new(),
            settings: glassbox_model::SandboxSettings {
                backend: "microvm: the guest never ran the server".into(),
                ..Default::default()
            },
            mechanism: String::new(),
            isolation: Vec::new(),
            canary_sockets: Vec::new(),
            ground_truth: Some(why.clone()),
            start_ns,
            end_ns,
            limits_reached: Vec::new(),
            usage: None,
            outlived: Vec::new(),
            left: None,
            vm: Some(glassbox_model::VmRecord {
                backend: "microvm".into(),
                lost: vec![why],
                ..Default::default()
            }),
        }
    }
}

/// Where one run writes: events to the audit's shared sink, the transcript to
/// `transcript{suffix}.jsonl`, stderr to `stderr{suffix}.log`.
pub(crate) struct RunFiles<'a> {
    pub(crate) bundle: &'a bundle::Writer,
    pub(crate) suffix: &'a str,
    pub(crate) events: Box<dyn EventSink>,
}

/// Runs the server once in its sandbox and speaks MCP to it.
pub(crate) fn one_run(
    target: &target::Resolved,
    cwd: &Path,
    opts: &AuditOptions,
    files: RunFiles<'_>,
    plan: recording::RunPlan,
    progress: &dyn Progress,
    started: &mut dyn FnMut(&glassbox_model::SandboxSettings, &str) -> Result<(), Error>,
) -> Result<RunResult, Error> {
    let clock = plan.clock.clone();
    // Every run starts in its own start-up: the clock is the audit's, and still holds the
    // phase the run before ended in (its shutdown), which the server's first calls would get.
    clock.set_phase(Phase::Startup);
    let start_ns = clock.now_ns();
    let RunFiles {
        bundle,
        suffix,
        events,
    } = files;
    let launch = Launch::audit(opts, target, cwd, None);
    let mut running = match opts.isolation.start(&launch, events, plan) {
        Ok(s) => s,
        Err(Error::GuestLost(why)) => {
            return Ok(RunResult::lost(why, start_ns, clock.now_ns()));
        }
        Err(e) => return Err(e),
    };
    started(running.settings(), running.mechanism())?;
    let (isolation, canary_sockets) = running.edge_checks();

    // The server's stderr, copied as it comes (bounded).
    let (stdin, stdout, stderr) = running.take_stdio();
    let stderr_file = bundle.stderr(suffix)?;
    let stderr_copy = std::thread::spawn(move || bundle::copy_bounded(stderr, stderr_file));

    let stdin = stdin.ok_or_else(|| Error::Internal("no stdin".into()))?;
    let stdout = stdout.ok_or_else(|| Error::Internal("no stdout".into()))?;
    let hooks = Hooks {
        clock: clock.clone(),
        transcript: Mutex::new(bundle.transcript(suffix)?),
        timings: Mutex::new(vec![PhaseTiming {
            phase: Phase::Startup,
            start_ns,
            end_ns: start_ns,
        }]),
        progress,
        usage: running.meter().map(|m| usage::Log::new(m, &Phase::Startup)),
    };
    // The session ends in phase `shutdown` with the server's stdin closed.
    let mut session = match &opts.http {
        None => glassbox_mcp::run_session(stdin, stdout, &opts.session, &hooks),
        Some(http) => {
            // The server's stdout is only its log; MCP goes over HTTP on its own loopback.
            let log = bundle.stdout(suffix)?;
            let out = std::thread::spawn(move || bundle::copy_bounded(Some(stdout), log));
            let s = http_session(http, running.as_ref(), opts, &hooks)?;
            drop(stdin);
            drop(out);
            s
        }
    };
    let Hooks {
        transcript,
        timings,
        usage,
        ..
    } = hooks;
    // A well-behaved server exits now; one that closed its stdout during the session has
    // exited, or is about to: how it ended is why the session failed.
    let exited = running.wait_timeout(opts.exit_grace);
    // Daemons the server left are recorded a little longer (a double-forked child that acts
    // once its parent is gone), then die with the sandbox.
    let mut outlived = Vec::new();
    if exited.is_some() {
        let until = std::time::Instant::now() + opts.linger;
        while running.others_alive() && std::time::Instant::now() < until {
            std::thread::sleep(Duration::from_millis(50));
        }
        // What is still there now outlived the server: it is killed with the sandbox.
        outlived = running.outlived();
    }
    let usage = usage.map(usage::Log::finish);
    // What the run left in its writable places: read before the sandbox goes (a microVM's
    // guest says it in its record, known once the run finished).
    let mut left = running.left();
    let exited_early = if session.server_closed_stdout {
        exited.clone()
    } else {
        None
    };
    let (server_exit, recording) = running.finish();
    // A microVM's guest says what outlived the server in its record, known now.
    if outlived.is_empty() {
        outlived = running.outlived();
    }
    if left.is_none() {
        left = running.left();
    }
    let stderr_tail = stderr_copy.join().unwrap_or_default();
    let end_ns = clock.now_ns();
    let mut timings = timings.into_inner().unwrap_or_default();
    if let Some(last) = timings.last_mut() {
        last.end_ns = end_ns;
    }
    let transcript = transcript
        .into_inner()
        .map(|t| t.finish())
        .unwrap_or_default();

    // A server that ended before the session did is why the session failed: say so.
    if !session.completed {
        let how = match exited_early {
            Some(ServerExit::Exited { code }) => Some(format!("server exited with status {code}")),
            Some(ServerExit::Signaled { signal, .. }) => {
                Some(format!("server killed by signal {signal}"))
            }
            _ => None,
        };
        if let (Some(how), Some(f)) = (how, &session.failure) {
            let mut reason = format!("{f} ({how})");
            if let Some(line) = error_line(&stderr_tail) {
                reason.push_str(&format!("; it said: {line}"));
            }
            session.failure = Some(reason);
        }
    }
    // A limit the sandbox reached is part of why the session failed when it can have caused
    // it (the others are resource-abuse's to list).
    let limits_reached = running.limits_reached().to_vec();
    let failed_by = limits_that_failed(&limits_reached, exited_early.as_ref(), &stderr_tail);
    if let (false, Some(f)) = (
        session.completed || failed_by.is_empty(),
        &mut session.failure,
    ) {
        f.push_str(&format!(
            "; the sandbox reached its limits: {}",
            failed_by.join("; ")
        ));
    }
    Ok(RunResult {
        limits_reached,
        usage,
        outlived,
        left,
        session,
        transcript,
        server_exit,
        recording,
        timings,
        settings: running.settings().clone(),
        mechanism: running.mechanism().to_string(),
        isolation,
        canary_sockets,
        ground_truth: running.ground_truth(),
        start_ns,
        end_ns,
        vm: running.vm_record(),
    })
}

/// A server that listens on a port of the sandbox's loopback instead of speaking stdio.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpServer {
    /// Its port (on 127.0.0.1 inside the sandbox).
    pub port: u16,
    /// The MCP endpoint's path (`/mcp`), or the SSE endpoint's for the legacy transport.
    pub path: String,
    /// The legacy HTTP+SSE transport of 2024-11-05 instead of streamable HTTP.
    pub legacy_sse: bool,
}

impl HttpServer {
    /// `http://127.0.0.1:PORT/PATH` (or `localhost`): where the server listens, as seen inside
    /// its sandbox.
    pub fn parse(url: &str, legacy_sse: bool) -> Result<HttpServer, Error> {
        let bad = || {
            Error::Usage(format!(
                "--http takes the URL the server listens on inside the sandbox, \
                 http://127.0.0.1:PORT/PATH, not {url:?}"
            ))
        };
        let rest = url.strip_prefix("http://").ok_or_else(bad)?;
        let cut = rest.find('/').unwrap_or(rest.len());
        let (authority, path) = rest.split_at(cut);
        let (host, port) = authority.rsplit_once(':').ok_or_else(bad)?;
        if !matches!(host, "127.0.0.1" | "localhost") {
            return Err(bad());
        }
        let port: u16 = port.parse().map_err(|_| bad())?;
        Ok(HttpServer {
            port,
            path: if path.is_empty() {
                "/".into()
            } else {
                path.into()
            },
            legacy_sse,
        })
    }
}

/// The MCP session with a server over HTTP inside its sandbox: waits until it listens (up to
/// the request timeout), then speaks MCP through connections made in its network namespace
/// (on the host, or in the guest through its TCP relay).
pub(crate) fn http_session(
    http: &HttpServer,
    server: &dyn backend::Backend,
    opts: &AuditOptions,
    hooks: &Hooks<'_>,
) -> Result<SessionSummary, Error> {
    let dialer = server.loopback_dialer()?;
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], http.port));
    let (port, timeout) = (http.port, opts.session.request_timeout);
    let d = dialer.clone();
    let connector: glassbox_mcp::Connector = Arc::new(move || d(port, timeout));
    let deadline = std::time::Instant::now() + timeout;
    loop {
        match dialer(port, Duration::from_secs(1)) {
            Ok(_) => break,
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                return Err(Error::Usage(e.to_string()))
            }
            Err(_) if std::time::Instant::now() < deadline && server.may_still_listen() => {
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(e) => {
                return Ok(SessionSummary {
                    failure: Some(format!(
                        "the server did not listen on {addr} within {}s ({e})",
                        timeout.as_secs()
                    )),
                    ..SessionSummary::default()
                })
            }
        }
    }
    let mut target = glassbox_mcp::HttpTarget::new(connector, addr.to_string(), http.path.clone());
    if http.legacy_sse {
        target.kind = glassbox_mcp::HttpKind::LegacySse;
    }
    target.validate().map_err(|e| Error::Usage(e.to_string()))?;
    Ok(glassbox_mcp::run(
        glassbox_mcp::Transport::Http(target),
        &opts.session,
        hooks,
    ))
}

/// Adds `s` to `list` unless it is there.
pub(crate) fn say_once(list: &mut Vec<String>, s: String) {
    if !list.contains(&s) {
        list.push(s);
    }
}

/// Sets the environment variable `name` of a command to `value`, in place of any it had.
pub(crate) fn set_env(env: &mut Vec<(String, String)>, name: String, value: String) {
    env.retain(|(k, _)| *k != name);
    env.push((name, value));
}

/// Words of a line that says what went wrong (lower case).
const ERROR_WORDS: &[&str] = &[
    "error",
    "exception",
    "fatal",
    "panic",
    "missing",
    "required",
    "must be",
    "not set",
    "not found",
    "no such",
    "invalid",
    "usage:",
    "expected",
    "cannot",
    "can't",
    "could not",
    "failed",
    "unable",
    "denied",
    "refused",
    "unknown",
    "not specified",
    "please set",
];

/// The line of the server's stderr that says why it stopped, printable and short, for a
/// reason: the last line that says an error (a Python traceback's exception, Node's `Error:
/// ...` above its stack and its `Node.js v20` line, a CLI's "required option ... not
/// specified"), else the last line that is no stack frame; `None` when it wrote nothing.
pub(crate) fn error_line(s: &str) -> Option<String> {
    let frame = |l: &str| {
        let t = l.trim_start();
        t.starts_with("at ")
            || t.starts_with("File \"")
            || t.starts_with("Node.js v")
            || t.starts_with("^")
            || t.starts_with("~~~")
            || t.starts_with("...")
            || t.starts_with("Traceback (most recent call last)")
            || t.starts_with("triggerUncaughtException")
    };
    let lines: Vec<&str> = s
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !frame(l))
        .collect();
    let says_error = |l: &&&str| {
        let lower = l.to_lowercase();
        ERROR_WORDS.iter().any(|w| lower.contains(w))
    };
    let line = lines.iter().rev().find(says_error).or(lines.last())?;
    Some(glassbox_model::truncate(
        &glassbox_model::printable(line),
        300,
    ))
}

/// The limits among `reached` that can have made the server stop: processes killed out of
/// memory when it was killed or said it ran out; forks refused when it said it could not
/// start a process or thread; a full mount when it said so; CPU throttling when it answered
/// nothing in time. Memory reclaimed and throttling alone stop nothing.
pub(crate) fn limits_that_failed(
    reached: &[String],
    exit: Option<&ServerExit>,
    stderr: &str,
) -> Vec<String> {
    let said = stderr.to_lowercase();
    let says = |words: &[&str]| words.iter().any(|w| said.contains(w));
    let killed = matches!(
        exit,
        Some(ServerExit::Signaled {
            by_glassbox: false,
            ..
        })
    );
    reached
        .iter()
        .filter(|l| {
            if l.contains("killed out of memory") {
                killed || says(&["out of memory", "cannot allocate", "enomem", "memoryerror"])
            } else if l.starts_with("pids limit") {
                says(&[
                    "resource temporarily unavailable",
                    "eagain",
                    "can't start new thread",
                    "cannot create thread",
                    "pthread_create",
                    "fork",
                    "spawn",
                ])
            } else if l.contains(" is full (") {
                says(&["no space left", "enospc", "disk full", "disk quota"])
            } else if l.starts_with("cpu limit") {
                exit.is_none()
            } else {
                false
            }
        })
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reason_quotes_the_line_that_says_the_error() {
        let node = "file:///app/dist/index.js:12\n    throw new Error('GITHUB_TOKEN is required');\n    ^\n\nError: GITHUB_TOKEN is required\n    at Object.<anonymous> (/app/dist/index.js:12:11)\n    at Module._compile (node:internal/modules/cjs/loader:1256:14)\n\nNode.js v20.11.0\n";
        assert_eq!(
            error_line(node).as_deref(),
            Some("Error: GITHUB_TOKEN is required")
        );
        let python = "Traceback (most recent call last):\n  File \"/v/bin/srv\", line 8, in <module>\n    sys.exit(main())\nKeyError: 'API_KEY'\n";
        assert_eq!(error_line(python).as_deref(), Some("KeyError: 'API_KEY'"));
        let cli =
            "Usage: srv [options]\nerror: required option '--dev-server-url <url>' not specified\n";
        assert_eq!(
            error_line(cli).as_deref(),
            Some("error: required option '--dev-server-url <url>' not specified")
        );
        assert_eq!(error_line("starting...\nbye\n").as_deref(), Some("bye"));
        assert_eq!(error_line("\n  \n"), None);
    }

    #[test]
    fn a_limit_is_named_only_where_it_can_have_stopped_the_server() {
        let reached = vec![
            "memory limit (1 GiB) reached: memory reclaimed, nothing killed".to_string(),
            "pids limit (512) reached: 3 forks refused".to_string(),
            "/tmp is full (64 MiB tmpfs)".to_string(),
        ];
        let exited = ServerExit::Exited { code: 1 };
        // A missing token: none of them.
        assert!(limits_that_failed(&reached, Some(&exited), "Error: TOKEN is required").is_empty());
        // A fork refused, said by the server: that one.
        assert_eq!(
            limits_that_failed(&reached, Some(&exited), "Error: spawn EAGAIN"),
            vec![reached[1].clone()]
        );
        assert_eq!(
            limits_that_failed(
                &reached,
                Some(&exited),
                "OSError: [Errno 28] No space left on device"
            ),
            vec![reached[2].clone()]
        );
        let oom = vec!["memory limit (1 GiB) reached: 1 process killed out of memory".to_string()];
        let killed = ServerExit::Signaled {
            signal: 9,
            by_glassbox: false,
        };
        assert_eq!(limits_that_failed(&oom, Some(&killed), ""), oom);
    }
}
