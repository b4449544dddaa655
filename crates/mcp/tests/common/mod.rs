//! Helpers shared by the integration tests: a recording [`SessionHooks`], the test servers in
//! `tests/servers/`, and transcript checks.
#![allow(dead_code)] // each test binary uses a different part

use glassbox_mcp::{
    run, run_session, tcp_connector, Direction, HttpTarget, Phase, SessionConfig, SessionHooks,
    SessionSummary, TranscriptEntry, Transport,
};
use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::net::SocketAddr;
use std::process::{Child, Command, ExitStatus, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// What the hooks saw, in order.
#[derive(Debug)]
pub enum Seen {
    Phase(Phase),
    Entry(TranscriptEntry),
}

pub struct Recorder {
    start: Instant,
    pub seen: Mutex<Vec<Seen>>,
}

impl Recorder {
    pub fn new() -> Self {
        Recorder {
            start: Instant::now(),
            seen: Mutex::new(Vec::new()),
        }
    }

    pub fn phases(&self) -> Vec<Phase> {
        let seen = self.seen.lock().unwrap();
        seen.iter()
            .filter_map(|s| match s {
                Seen::Phase(p) => Some(p.clone()),
                Seen::Entry(_) => None,
            })
            .collect()
    }

    pub fn entries(&self) -> Vec<TranscriptEntry> {
        let seen = self.seen.lock().unwrap();
        seen.iter()
            .filter_map(|s| match s {
                Seen::Entry(e) => Some(e.clone()),
                Seen::Phase(_) => None,
            })
            .collect()
    }
}

impl SessionHooks for Recorder {
    fn set_phase(&self, phase: Phase) {
        self.seen.lock().unwrap().push(Seen::Phase(phase));
    }
    fn transcript(&self, entry: TranscriptEntry) {
        self.seen.lock().unwrap().push(Seen::Entry(entry));
    }
    fn now_ns(&self) -> u64 {
        self.start.elapsed().as_nanos() as u64
    }
}

pub fn server_path(server: &str) -> String {
    format!("{}/tests/servers/{server}", env!("CARGO_MANIFEST_DIR"))
}

/// Starts a stdio test server with `python3`.
pub fn spawn(server: &str, args: &[&str], env: &[(&str, &str)]) -> Child {
    Command::new("python3")
        .arg(server_path(server))
        .args(args)
        .envs(env.iter().copied())
        .current_dir(env!("CARGO_TARGET_TMPDIR"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::inherit())
        .spawn()
        .expect("python3 runs")
}

pub struct Run {
    pub summary: SessionSummary,
    pub hooks: Recorder,
    /// How the server ended after the session, if it did within the watchdog's 30 s.
    pub exit: Option<ExitStatus>,
}

/// Runs a session over the child's stdio, then waits for it to end (a watchdog kills it after
/// 30 s: a bound far from the milliseconds a server takes to end once its stdin is closed).
pub fn run_child(mut child: Child, cfg: &SessionConfig) -> Run {
    let hooks = Recorder::new();
    let stdin = child.stdin.take().unwrap();
    let stdout = child.stdout.take().unwrap();
    let summary = run_session(stdin, stdout, cfg, &hooks);
    let mut exit = None;
    for _ in 0..300 {
        if let Some(status) = child.try_wait().unwrap() {
            exit = Some(status);
            break;
        }
        std::thread::sleep(Duration::from_millis(100));
    }
    if exit.is_none() {
        let _ = child.kill();
        let _ = child.wait();
    }
    Run {
        summary,
        hooks,
        exit,
    }
}

/// Short timeouts, but long enough for Python to start on a loaded machine; one call per tool
/// (these tests are about the protocol: `tests/explore.rs` is about the plans of calls).
pub fn quick() -> SessionConfig {
    SessionConfig {
        request_timeout: Duration::from_secs(5),
        shutdown_grace: Duration::from_millis(500),
        explore: glassbox_mcp::Explore::single(),
        ..SessionConfig::default()
    }
}

/// An HTTP test server (`tests/servers/http_server.py` or another script that prints
/// `PORT <n>` once it listens on 127.0.0.1), killed when dropped.
pub struct HttpServer {
    child: Child,
    pub addr: SocketAddr,
}

impl HttpServer {
    pub fn start(program: &str, script: &str, args: &[&str]) -> HttpServer {
        HttpServer::spawn(program, script, args, Stdio::inherit())
    }

    /// Like [`HttpServer::start`], with the server's stderr discarded.
    pub fn start_quiet(program: &str, script: &str, args: &[&str]) -> HttpServer {
        HttpServer::spawn(program, script, args, Stdio::null())
    }

    fn spawn(program: &str, script: &str, args: &[&str], stderr: Stdio) -> HttpServer {
        let mut child = Command::new(program)
            .arg(script)
            .args(args)
            .current_dir(env!("CARGO_TARGET_TMPDIR"))
            .stdin(Stdio::null())
            .stdout(Stdio::piped())
            .stderr(stderr)
            .spawn()
            .unwrap_or_else(|e| panic!("{program} runs: {e}"));
        let mut line = String::new();
        let mut stdout = BufReader::new(child.stdout.take().unwrap());
        while !line.starts_with("PORT ") {
            line.clear();
            if stdout.read_line(&mut line).unwrap() == 0 {
                let _ = child.kill();
                panic!("{script} ended before listening");
            }
        }
        let port: u16 = line[5..].trim().parse().unwrap();
        // Keep reading its stdout so that it never blocks on a full pipe.
        std::thread::spawn(move || {
            let mut sink = String::new();
            while stdout.read_line(&mut sink).unwrap_or(0) > 0 {
                sink.clear();
            }
        });
        HttpServer {
            child,
            addr: SocketAddr::from(([127, 0, 0, 1], port)),
        }
    }

    /// `tests/servers/http_server.py` with `args`.
    pub fn python(args: &[&str]) -> HttpServer {
        HttpServer::start("python3", &server_path("http_server.py"), args)
    }

    pub fn target(&self, path: &str) -> HttpTarget {
        HttpTarget::new(
            tcp_connector(self.addr, Duration::from_secs(5)),
            self.addr.to_string(),
            path,
        )
    }
}

impl Drop for HttpServer {
    fn drop(&mut self) {
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

/// Runs a session against an HTTP target.
pub fn run_http(target: HttpTarget, cfg: &SessionConfig) -> Run {
    let hooks = Recorder::new();
    let summary = run(Transport::Http(target), cfg, &hooks);
    Run {
        summary,
        hooks,
        exit: None,
    }
}

pub fn parse(entry: &TranscriptEntry) -> Value {
    serde_json::from_slice(entry.raw.as_slice()).expect("a JSON line")
}

/// The JSON messages of a transcript (HTTP heads and other meta lines left out).
pub fn messages(entries: &[TranscriptEntry]) -> Vec<(Direction, Phase, Value)> {
    entries
        .iter()
        .filter(|e| e.json)
        .map(|e| (e.dir, e.phase.clone(), parse(e)))
        .collect()
}

/// The methods glassbox sent, in order.
pub fn sent_methods(entries: &[TranscriptEntry]) -> Vec<String> {
    entries
        .iter()
        .filter(|e| e.dir == Direction::ClientToServer && e.json)
        .filter_map(|e| parse(e)["method"].as_str().map(str::to_string))
        .collect()
}

/// The non-JSON entries (HTTP heads, meta lines) as text.
pub fn meta_lines(entries: &[TranscriptEntry], dir: Direction) -> Vec<String> {
    entries
        .iter()
        .filter(|e| e.dir == dir && !e.json)
        .map(|e| String::from_utf8_lossy(e.raw.as_slice()).into_owned())
        .collect()
}

/// Every transcript entry carries the phase set last before it, and `seq` counts from 1.
pub fn assert_consistent(hooks: &Recorder) {
    let seen = hooks.seen.lock().unwrap();
    let mut phase = Phase::Startup;
    let mut seq = 0;
    for s in seen.iter() {
        match s {
            Seen::Phase(p) => phase = p.clone(),
            Seen::Entry(e) => {
                seq += 1;
                assert_eq!(e.seq, seq);
                assert_eq!(e.phase, phase, "entry {e:?}");
            }
        }
    }
}
