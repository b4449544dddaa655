//! The MCP client against a fuzzed server: whole sessions over stdio and over HTTP, and the SSE
//! parser on its own.

use crate::Cursor;
use glassbox_mcp::{
    run, run_session, Connection, Connector, Direction, HttpKind, HttpTarget, Phase, SessionConfig,
    SessionHooks, SessionSummary, TranscriptEntry, Transport, SUPPORTED_PROTOCOL_VERSIONS,
};
use serde_json::Value;
use std::cell::{Cell, RefCell};
use std::io::{self, Read, Write};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::Arc;
use std::time::{Duration, Instant};

/// Separates the HTTP responses of an `mcp_http` input.
pub const SEPARATOR: &[u8] = b"\n\0\0\n";

/// Connections one `mcp_http` session may open; then the connector refuses.
const MAX_CONNECTIONS: usize = 64;

/// How long the threads of a finished session may take to end.
const THREADS_GONE: Duration = Duration::from_secs(10);

/// What the response to a POST without a request id is (a notification, a reply to a server
/// request, the final DELETE).
const ACCEPTED: &[u8] = b"HTTP/1.1 202 Accepted\r\nContent-Length: 0\r\n\r\n";

/// Records the transcript as the session reports it.
#[derive(Debug, Default)]
struct Recorder {
    entries: RefCell<Vec<TranscriptEntry>>,
    clock: Cell<u64>,
}

impl SessionHooks for Recorder {
    fn set_phase(&self, _: Phase) {}

    fn transcript(&self, entry: TranscriptEntry) {
        self.entries.borrow_mut().push(entry);
    }

    fn now_ns(&self) -> u64 {
        self.clock.set(self.clock.get() + 1);
        self.clock.get()
    }
}

/// The session's configuration from the flags byte: bits 0-1 the protocol version offered,
/// bit 2 small limits (lines, pages, tools, events), bit 3 an input marker.
fn config(flags: u8) -> SessionConfig {
    let offered = ["2026-07-28", "2025-11-25", "2025-03-26", "2024-11-05"];
    let mut cfg = SessionConfig {
        protocol_version: offered[usize::from(flags & 3)].to_string(),
        // Every unsolicited line is stored, so that the transcript can be checked whole.
        max_noise_lines: usize::MAX,
        max_noise_bytes: usize::MAX,
        ..SessionConfig::default()
    };
    if flags & 4 != 0 {
        cfg.max_line_bytes = 200;
        cfg.max_pages = 3;
        cfg.max_tools = 3;
        cfg.max_stream_events = 8;
    }
    if flags & 8 != 0 {
        cfg.input_marker = Some("fuzzmark".to_string());
    }
    cfg
}

/// What holds for every session, whatever the server did.
fn check(summary: &SessionSummary, entries: &[TranscriptEntry], cfg: &SessionConfig) {
    for (i, e) in entries.iter().enumerate() {
        assert_eq!(e.seq, i as u64 + 1, "transcript numbering");
        if e.json {
            assert!(!e.truncated, "a cut line marked JSON: {e:?}");
            assert!(
                serde_json::from_slice::<Value>(&e.raw.0).is_ok(),
                "a line marked JSON that is not: {e:?}"
            );
        }
        serde_json::to_string(e).expect("a transcript entry serializes");
    }
    assert_eq!(summary.completed, summary.failure.is_none());
    assert!(summary.tools.len() <= 2 * cfg.max_tools, "tools kept");
    // The version a server answered is recorded even when it is not one glassbox speaks (the
    // session then fails); a session that completed speaks a supported one.
    if summary.completed {
        let v = summary.protocol_version.as_deref().unwrap_or_default();
        assert!(
            SUPPORTED_PROTOCOL_VERSIONS.contains(&v),
            "completed with {v:?}"
        );
    }
    if let Some(failure) = &summary.failure {
        assert!(!failure.is_empty());
    }
    serde_json::to_string(summary).expect("the summary serializes");
}

/// Threads of this process, when they can be counted (Linux).
fn threads() -> Option<usize> {
    std::fs::read_dir("/proc/self/task").ok().map(|d| d.count())
}

/// Waits until the threads a session started are gone. They are detached by design (a server
/// must never block the session), but each ends soon after the session: over stdio the reader
/// and writer once stdout is at its end and stdin closed, as here; over HTTP every exchange
/// and stream thread by the session's bound (`session_timeout` + `shutdown_grace`, 5 s here).
/// One still there after [`THREADS_GONE`] is a finding. Under libFuzzer only: its leak check
/// after an input takes the thread-locals of a thread still exiting for leaks (a false
/// positive: mcp_stdio leak-61273bae, mcp_http leak-afa3369c, std's channel context of the
/// writer and exchange threads); the corpus replay runs inputs on parallel test threads,
/// whose count is no baseline.
fn await_threads(before: Option<usize>) {
    if !cfg!(feature = "libfuzzer") {
        return;
    }
    let start = Instant::now();
    while let (Some(before), Some(now)) = (before, threads()) {
        if now <= before {
            return;
        }
        assert!(
            start.elapsed() < THREADS_GONE,
            "{} threads left by the session",
            now - before
        );
        std::thread::sleep(Duration::from_micros(100));
    }
}

/// The lines the reader must make of `stdout`: split at LF (a CR stays), a last line without
/// its LF kept, each cut at `max` bytes.
fn lines(stdout: &[u8], max: usize) -> Vec<(&[u8], bool)> {
    let max = max.max(1);
    let mut all: Vec<&[u8]> = stdout.split(|&b| b == b'\n').collect();
    if all.last().is_some_and(|l| l.is_empty()) {
        all.pop();
    }
    all.into_iter()
        .map(|l| (&l[..l.len().min(max)], l.len() > max))
        .collect()
}

/// `mcp_stdio`: a whole session against a server whose stdout is `data[1..]` (then closed);
/// `data[0]` is the flags byte of [`config`], plus bit 4: no shutdown grace. Every line must be
/// in the transcript, in order and cut at the line limit, counted as non-JSON when it is not
/// JSON. Without a grace the final drain ends at once, and the reader thread may not have
/// handed over the last lines yet: the transcript is then a prefix of them, with no gap.
pub fn stdio(data: &[u8]) {
    let Some((&flags, stdout)) = data.split_first() else {
        return;
    };
    let no_grace = flags & 16 != 0;
    let cfg = SessionConfig {
        // Nothing waits for time here (stdout is closed at its end), but a loaded machine
        // must not cut the final drain short: how long the reader thread takes to hand over
        // what it read is up to the scheduler.
        shutdown_grace: if no_grace {
            Duration::ZERO
        } else {
            Duration::from_secs(60)
        },
        session_timeout: Duration::from_secs(120),
        ..config(flags)
    };
    let hooks = Recorder::default();
    let before = threads();
    let summary = run_session(io::sink(), io::Cursor::new(stdout.to_vec()), &cfg, &hooks);
    await_threads(before);
    let entries = hooks.entries.into_inner();
    check(&summary, &entries, &cfg);
    let from_server: Vec<&TranscriptEntry> = entries
        .iter()
        .filter(|e| e.dir == Direction::ServerToClient)
        .collect();
    let got: Vec<(&[u8], bool)> = from_server
        .iter()
        .map(|e| (&e.raw.0[..], e.truncated))
        .collect();
    let expected = lines(stdout, cfg.max_line_bytes);
    if no_grace {
        assert!(
            expected.starts_with(&got),
            "stdout lines: {got:?} is not a prefix of {expected:?}"
        );
    } else {
        assert_eq!(got, expected, "stdout lines");
    }
    let non_json = from_server.iter().filter(|e| !e.json).count();
    assert_eq!(summary.non_json_lines, non_json as u64);
    for e in from_server {
        let parses = serde_json::from_slice::<Value>(&e.raw.0).is_ok();
        assert_eq!(e.json, parses && !e.truncated, "{e:?}");
    }
    if summary
        .failure
        .as_deref()
        .is_some_and(|f| f.contains("closed stdout"))
    {
        assert!(summary.server_closed_stdout, "{:?}", summary.failure);
    }
}

/// The responses of one `mcp_http` input and the connections made so far.
#[derive(Debug)]
struct Script {
    responses: Vec<Vec<u8>>,
    opened: AtomicUsize,
}

impl Script {
    /// The response to `request`: a GET (the event streams, resumptions) gets the first
    /// response, the POST of request `id` the response numbered `id`, anything else `202`.
    fn answer(&self, request: &[u8]) -> Vec<u8> {
        let slot = if request.starts_with(b"GET ") {
            Some(0)
        } else if request.starts_with(b"POST ") {
            request_id(request).and_then(|id| usize::try_from(id).ok())
        } else {
            None
        };
        match slot {
            Some(i) => self.responses.get(i).cloned().unwrap_or_default(),
            None => ACCEPTED.to_vec(),
        }
    }
}

/// The id of the JSON-RPC request in the body of `request`.
fn request_id(request: &[u8]) -> Option<u64> {
    let end = request.windows(4).position(|w| w == b"\r\n\r\n")?;
    let msg: Value = serde_json::from_slice(&request[end + 4..]).ok()?;
    msg.get("method")?;
    msg.get("id")?.as_u64()
}

/// One in-memory connection: takes the request, then serves the scripted response and closes.
#[derive(Debug)]
struct MemConn {
    script: Arc<Script>,
    request: Vec<u8>,
    response: Option<io::Cursor<Vec<u8>>>,
}

impl Write for MemConn {
    fn write(&mut self, buf: &[u8]) -> io::Result<usize> {
        if self.request.len() < 1 << 24 {
            self.request.extend_from_slice(buf);
        }
        Ok(buf.len())
    }

    fn flush(&mut self) -> io::Result<()> {
        Ok(())
    }
}

impl Read for MemConn {
    fn read(&mut self, buf: &mut [u8]) -> io::Result<usize> {
        let (script, request) = (&self.script, &self.request);
        self.response
            .get_or_insert_with(|| io::Cursor::new(script.answer(request)))
            .read(buf)
    }
}

impl Connection for MemConn {
    fn set_timeouts(&self, _: Option<Duration>) -> io::Result<()> {
        Ok(())
    }
}

/// `mcp_http`: a whole session over HTTP against scripted responses. `data[0]` is the flags
/// byte of [`config`], plus bit 4: the legacy HTTP+SSE transport instead of streamable HTTP.
/// The rest is responses separated by [`SEPARATOR`], served as [`Script::answer`] says.
pub fn http(data: &[u8]) {
    let Some((&flags, rest)) = data.split_first() else {
        return;
    };
    let cfg = SessionConfig {
        // Only a resumed stream waits (its `retry`): keep that short. Every response is in
        // memory, so nothing else comes near these bounds.
        request_timeout: Duration::from_millis(250),
        session_timeout: Duration::from_secs(5),
        shutdown_grace: Duration::ZERO,
        ..config(flags)
    };
    let script = Arc::new(Script {
        responses: split(rest, SEPARATOR),
        opened: AtomicUsize::new(0),
    });
    let shared = script.clone();
    let connector: Connector = Arc::new(move || {
        if shared.opened.fetch_add(1, Ordering::SeqCst) >= MAX_CONNECTIONS {
            return Err(io::ErrorKind::ConnectionRefused.into());
        }
        Ok(Box::new(MemConn {
            script: shared.clone(),
            request: Vec::new(),
            response: None,
        }) as Box<dyn Connection>)
    });
    let mut target = HttpTarget::new(connector, "127.0.0.1:8931", "/mcp");
    if flags & 16 != 0 {
        target.kind = HttpKind::LegacySse;
        target.path = "/sse".to_string();
    }
    let hooks = Recorder::default();
    let before = threads();
    let summary = run(Transport::Http(target), &cfg, &hooks);
    await_threads(before);
    let entries = hooks.entries.into_inner();
    check(&summary, &entries, &cfg);
    // A body or an event's data is cut at the line limit (an event of another type carries
    // `event: TYPE\n` before it, TYPE at most 4 KiB); a head at 64 KiB plus the last read.
    let bound = cfg.max_line_bytes.max(72 * 1024) + 8 * 1024;
    for e in entries
        .iter()
        .filter(|e| e.dir == Direction::ServerToClient)
    {
        assert!(e.raw.0.len() <= bound, "{} bytes kept", e.raw.0.len());
    }
    assert!(!summary.server_closed_stdout, "only ever set on stdio");
}

/// `data` cut at every `sep`.
fn split(data: &[u8], sep: &[u8]) -> Vec<Vec<u8>> {
    let mut out = Vec::new();
    let mut rest = data;
    while let Some(i) = rest.windows(sep.len()).position(|w| w == sep) {
        out.push(rest[..i].to_vec());
        rest = &rest[i + sep.len()..];
    }
    out.push(rest.to_vec());
    out
}

/// `mcp_sse`: the SSE parser. `data[0]` bounds the data of one event (four times it, in
/// bytes), `data[1..3]` is where the stream is cut in two, the rest is the stream. The events
/// must not depend on how the stream arrives: whole, cut in two, or byte by byte.
pub fn sse(data: &[u8]) {
    let mut c = Cursor::new(data);
    let max_data = usize::from(c.u8()) * 4;
    let cut = usize::from(c.u16());
    let stream = c.rest();
    let whole = glassbox_mcp::fuzz_sse(&[stream], max_data);
    let (a, b) = stream.split_at(cut % (stream.len() + 1));
    assert_eq!(
        glassbox_mcp::fuzz_sse(&[a, b], max_data),
        whole,
        "cut after {} bytes",
        a.len()
    );
    let bytes: Vec<&[u8]> = stream.chunks(1).collect();
    assert_eq!(
        glassbox_mcp::fuzz_sse(&bytes, max_data),
        whole,
        "byte by byte"
    );
    for (kind, data, truncated) in &whole.0 {
        assert!(!kind.is_empty(), "an event without a type");
        assert!(data.len() <= max_data, "{} bytes of data kept", data.len());
        assert!(*truncated || !data.is_empty(), "an empty event dispatched");
    }
}
