//! The MCP client of glassbox: drives one audit session against a server, over stdio or HTTP,
//! and records every message raw.
//!
//! The audit pipeline starts the server (in the sandbox, under the recorder), hands its stdin
//! and stdout to [`run_session`] (or a [`Transport`] to [`run`]: stdio, or an HTTP endpoint
//! reached through a caller-supplied [`Connector`]), and gets back a [`SessionSummary`]. Along
//! the way the client tells the pipeline, through [`SessionHooks`], which [`Phase`] the session
//! is in (so syscall events can be stamped with it) and every line it sends or receives (the
//! transcript).
//!
//! # Session
//!
//! | phase | what the client does |
//! |---|---|
//! | `initialize` | version negotiation (below); then `notifications/initialized` after a successful `initialize` |
//! | `list` | `tools/list` over every page (`nextCursor`); `resources/list` and `prompts/list` when the server declares those capabilities |
//! | `call:<tool>` | one `tools/call` per listed tool, with arguments from [`args::generate_arguments`] |
//! | `list` | a final `tools/list`, compared with the first one ([`ToolRecord::relisted_unchanged`]) |
//! | `shutdown` | stdio: stdin is closed; stdout is still recorded for [`SessionConfig::shutdown_grace`] or until the server closes it. Streamable HTTP: a `DELETE` ends the server's session if it assigned one; responses still running are recorded for the grace |
//!
//! [`SessionHooks::set_phase`] is called before the first message of a phase is written. Every
//! request has a timeout ([`SessionConfig::request_timeout`]) and the whole session has a bound
//! ([`SessionConfig::session_timeout`]). A tool call that times out is followed by
//! `notifications/cancelled` (except on streamable HTTP with 2026-07-28, where the closed
//! response stream is the cancellation) and the session goes on with the next tool. A server
//! whose stdout closes, that stops answering anything else, that stops reading its stdin, or
//! that cannot be connected to ends the session.
//!
//! Server notifications (logging, progress, `list_changed`) are recorded and otherwise ignored.
//! Requests from the server get a safe answer: `ping` an empty result, everything else
//! (`sampling/createMessage`, `elicitation/create`, `roots/list`...) the JSON-RPC error -32601
//! "glassbox does not provide this"; the session continues. glassbox declares no client
//! capabilities, so a server should not ask.
//!
//! # Protocol versions
//!
//! glassbox speaks the five revisions in [`SUPPORTED_PROTOCOL_VERSIONS`] and offers the newest,
//! [`DEFAULT_PROTOCOL_VERSION`] (`2026-07-28`). What changed between them, as far as this
//! client is concerned (from the specification's changelogs):
//!
//! - `2024-11-05`: `initialize` / `notifications/initialized`; stdio and the HTTP+SSE
//!   transport (a GET event stream whose `endpoint` event names where to POST).
//! - `2025-03-26`: streamable HTTP replaces HTTP+SSE (one endpoint; a POST answered with JSON or
//!   an event stream; `Mcp-Session-Id`; an optional GET stream; DELETE ends the session);
//!   JSON-RPC batches allowed.
//! - `2025-06-18`: batches removed; the `MCP-Protocol-Version` header on every HTTP request
//!   after `initialize`; structured tool output; elicitation.
//! - `2025-11-25`: a server may close an event stream before the answer, after an event with
//!   an `id` (and a `retry`), and the client resumes it with a GET carrying `Last-Event-ID`;
//!   tasks, URL elicitation, icons.
//! - `2026-07-28` (stateless): no `initialize`, no session, no GET stream, no resumption.
//!   Every request carries `_meta` with `io.modelcontextprotocol/protocolVersion`,
//!   `io.modelcontextprotocol/clientCapabilities` (`{}` here) and
//!   `io.modelcontextprotocol/clientInfo`; over HTTP also `MCP-Protocol-Version`, `Mcp-Method`,
//!   `Mcp-Name` (Base64 sentinel `=?base64?...?=` for values that are not plain ASCII) and
//!   `Mcp-Param-{Name}` for input properties marked `x-mcp-header`. `server/discover` returns
//!   `supportedVersions`, `capabilities` and `_meta.io.modelcontextprotocol/serverInfo`.
//!   Servers no longer send requests: a result with `resultType: "input_required"` asks for
//!   input (multi round-trip requests); glassbox retries such a `tools/call` up to
//!   [`MRTR_ROUNDS`] times with safe answers (elicitations declined, no roots, sampling left
//!   out) and the `requestState` echoed, then counts it as [`CallResult::RpcError`].
//!
//! Negotiation, as the 2026-07-28 versioning page describes a dual-era client: when
//! [`SessionConfig::protocol_version`] is `2026-07-28`, the session first sends
//! `server/discover`. A result whose `supportedVersions` holds it makes the session modern.
//! Anything else is a legacy server, and `initialize` follows, offering
//! [`LATEST_LEGACY_PROTOCOL_VERSION`] (or the latest legacy version the server named, in
//! `supportedVersions` or in the data of an `UnsupportedProtocolVersion` error, -32022): a
//! JSON-RPC error of any code, an HTTP `4xx` without one, a result that is not a
//! `DiscoverResult`. On stdio a probe unanswered after [`DISCOVER_PROBE`] (or the request
//! timeout if shorter) also sends `initialize`, and the first decisive answer to either wins (a
//! slow server may still answer the probe). A server that names only versions glassbox does
//! not speak fails the session (`server supports only protocol versions ...`). Offering a
//! legacy version skips the probe; `initialize` accepts any legacy version the server answers
//! with. The legacy SSE transport always starts with `initialize`. The negotiated version is
//! [`SessionSummary::protocol_version`].
//!
//! # Summary
//!
//! [`SessionSummary::completed`] is true only when every planned request got an answer (a tool
//! call may also time out). Otherwise [`SessionSummary::failure`] holds the first reason, short
//! and naming the step, for example:
//!
//! - `no answer to initialize within 20s`, `no answer to server/discover within 20s` (HTTP)
//! - `server closed stdout after initialize`, `server closed stdout during call:read_file`
//! - `session timeout (300s) reached during call:slow`
//! - `server answered unsupported protocol version "1999-01-01"`
//! - `server supports only protocol versions "2099-01-01"`
//! - `initialize failed: JSON-RPC error -32600: ...`
//! - `invalid JSON-RPC: initialize result is not an object`
//! - `tools/list repeated cursor "abc"`, `tools/list did not end after 100 pages`,
//!   `tools/list listed more than 1000 tools: only the first 1000 are called`
//! - `could not write to the server during tools/list: Broken pipe (os error 32)`
//! - `could not connect to the server during initialize: Connection refused (os error 111)`
//! - `bad HTTP response to tools/list: HTTP 500 Internal Server Error`,
//!   `bad HTTP response to initialize: malformed HTTP response: invalid HTTP version`,
//!   `bad HTTP response to tools/list: response body larger than 1024 bytes`,
//!   `bad HTTP response to tools/list: HTTP 200 OK with content-type "text/plain" (expected
//!   application/json or text/event-stream)`,
//!   `bad HTTP response to tools/list: the SSE stream ended without the answer to request 3`
//! - `server closed the SSE stream during tools/list`, `no endpoint event on the SSE stream
//!   within 20s` (legacy SSE)
//!
//! Some problems do not stop the session but still make it incomplete: a listing that does not
//! end, more tools than [`SessionConfig::max_tools`], an invalid listing result, a JSON-RPC or
//! HTTP error to `tools/list` from a server that declared tools. A JSON-RPC error to
//! `resources/list` or `prompts/list` is only recorded. A `tools/call` answered with an error
//! response, a bad HTTP response, or a result that is not an object counts as
//! [`CallResult::RpcError`]. A tool whose call was sent but never answered because the session
//! ended has `called: true` and [`CallResult::NotCalled`]. Tools that appear only in the final
//! listing are appended (up to twice [`SessionConfig::max_tools`] records in all) with
//! `called: false` and `relisted_unchanged: Some(false)`. Listed
//! items without a string `name` are skipped; a repeated name keeps its first definition.
//! [`SessionSummary::server_closed_stdout`] is only ever set on stdio.
//!
//! # Transcript
//!
//! Every line in both directions goes to [`SessionHooks::transcript`] as it is sent or handled,
//! raw (the server's bytes as written, without the newline), with the current phase. `seq`
//! counts from 1 within the session. A line from the server carries the phase current when the
//! session handled it (a banner printed at startup is in `initialize`: the session starts
//! reading when it sends its first request). `json` is true when the line is valid JSON
//! (whether it is a well-formed JSON-RPC message is a separate question: malformed messages are
//! recorded and skipped). Lines that are not JSON (logs printed on stdout, garbage) are
//! recorded with `json: false`, skipped, and counted in [`SessionSummary::non_json_lines`].
//! Lines longer than [`SessionConfig::max_line_bytes`] are cut, recorded with `truncated: true`
//! and otherwise treated as non-JSON; the rest of such a line is read and discarded. A JSON-RPC
//! batch (an array) is handled message by message.
//!
//! Over HTTP the messages are the same entries (each request body; each response's JSON body;
//! the data of each SSE event, which may hold several messages one after the other), and the
//! exchanges around them are recorded too, with `json: false` but not counted as non-JSON
//! lines: each request head glassbox sends (request line and header fields, CRLF-separated,
//! without the blank line; the GETs of the event streams included), each response head as
//! received, a response body that carries no message (a `202`'s text, an error page that is
//! not JSON, the legacy transport's POST answers), and events of other types than `message`
//! (`event: endpoint\n/messages?...`). SSE events with empty data (priming events that only
//! carry an `id`) are not recorded; their `id` and `retry` are used.
//!
//! # HTTP
//!
//! [`HttpTarget`] names the `Host` header, the endpoint's path, the [`HttpKind`] and extra
//! headers; its [`Connector`] opens each connection (the audit connects to a port inside the
//! sandbox's network namespace; TLS, if any, is the connector's). The client is HTTP/1.1 with
//! `Connection: close`, one exchange per connection, bodies framed by `Content-Length`,
//! chunked transfer coding, or the end of the connection. Redirects are not followed.
//!
//! - Streamable HTTP: every message is a POST to the endpoint with `Accept: application/json,
//!   text/event-stream`. A request's response is a JSON body or an event stream carrying
//!   notifications, server requests (answered by POSTing the reply while the stream stays
//!   open) and finally the answer, after which the stream is left. `Mcp-Session-Id` from the
//!   `initialize` response is sent on every later request; `MCP-Protocol-Version` from
//!   2025-06-18 on. After `initialize` the optional GET stream is opened
//!   ([`HttpTarget::listen`]; a `405` is fine) and read to the end of the session. A stream
//!   that ends before the answer is resumed with GET and `Last-Event-ID` when it carried an
//!   event id, after `retry` (at most 10 s, default 1 s), up to 16 times (not with 2026-07-28).
//!   A `404` to a request that carried a session id is reported as the end of the server's
//!   session (glassbox does not start another).
//! - Legacy HTTP+SSE (2024-11-05): a GET opens the event stream; its first `endpoint` event
//!   (a path, or a URL of the same origin) names where POSTs go; every server message comes
//!   on the stream; its end ends the session.
//!
//! Exchanges run on threads of their own (at most four at once), each bounded by its
//! request's deadline; a response that never ends, or a server that never answers, runs into
//! the session's timeouts, never a hang.
//!
//! # Bounds
//!
//! A hostile server can write without end. Memory stays bounded:
//!
//! - the reader keeps at most one line ([`SessionConfig::max_line_bytes`]) and a few batches
//!   in flight; over HTTP one response head (64 KiB, 64 fields), one body or SSE event's data
//!   ([`SessionConfig::max_line_bytes`]: a longer JSON body, or a longer event on a request's
//!   stream, fails the request with a reason) per exchange, and at most
//!   [`SessionConfig::max_stream_events`] events per response;
//! - *unsolicited* lines (non-JSON lines, notifications, server requests and glassbox's replies
//!   to them, responses nobody waits for, the exchanges of replies and notifications, the GET
//!   stream) are stored only up to [`SessionConfig::max_noise_lines`] entries or
//!   [`SessionConfig::max_noise_bytes`] bytes. After that they are still read, counted and
//!   answered, but not passed to [`SessionHooks::transcript`]; instead one entry is recorded,
//!   with `dir: server_to_client`, `json: false` and raw text starting with
//!   `glassbox: transcript storage capped`. Answers to glassbox's own requests (and the heads
//!   of their exchanges) are always stored;
//! - the writer queue is bounded: replies to a server that does not read its stdin (or does not
//!   finish its HTTP responses) are dropped, and a request that cannot be queued ends the
//!   session;
//! - at most [`SessionConfig::max_tools`] tools are kept and called;
//! - argument generation caps depth, sizes and total work (see [`args`]).
//!
//! Time is bounded by the two timeouts; a flood does not extend them.
//!
//! # Threads
//!
//! Over stdio, [`run_session`] starts two detached threads: one reads the server's stdout, one
//! writes its stdin. The session itself never blocks on a pipe or a socket. When
//! [`run_session`] returns, the writer closes stdin once its queue is written and the reader
//! stops at its next line; if the server neither reads nor writes anymore, they end when the
//! caller kills the server (which it must do after the session anyway). Writing to a dead
//! server is a reported failure, not a panic (Rust ignores `SIGPIPE`; a caller that restores it
//! must not). Over HTTP, the exchange threads stop within 200 ms of the end of the session
//! (with connections that honour [`Connection::set_timeouts`]; others when the server closes).
//!
//! # Why not `rmcp`
//!
//! The official Rust SDK (`rmcp`) was considered and is not used. Its client is async on
//! `tokio`, and its HTTP transports pull in `reqwest` (with `hyper`, `http`, `tower`,
//! `sse-stream`...): a large tree for a 2-core CI budget, where this crate needs only
//! `httparse` (already in the workspace) and ~1,000 lines. More to the point, glassbox must
//! keep the server's bytes exactly as written (the transcript is evidence), record the HTTP
//! heads, and bound every read; `rmcp` parses messages into its own types and hides the wire.
//! The audit's plumbing is synchronous (pipes and a socket opened inside the sandbox's network
//! namespace), which a connector closure serves directly. The tests interoperate with the
//! official Python SDK's servers instead (`tests/sdk.rs`).
#![deny(missing_docs)]
#![forbid(unsafe_code)]

pub mod args;
mod http;
mod message;
mod outcome;
mod session;
mod sse;
pub mod surface;
mod transport;

pub use args::generate_arguments;
pub use glassbox_model::{
    CallRecord, CallResult, Direction, ElicitedSecret, Phase, SessionSummary, SurfaceKind,
    SurfaceRead, SurfaceRecord, ToolRecord, TranscriptEntry,
};
pub use http::{tcp_connector, Connection, Connector, HttpKind, HttpTarget, HttpTargetError};
pub use session::{DISCOVER_PROBE, MRTR_ROUNDS};

use std::io::{Read, Write};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Fuzzing entry point (`fuzz/fuzz_targets/mcp_sse.rs`), not part of the API: feeds `chunks`
/// one after the other to the SSE parser of the HTTP transports, keeping at most `max_data`
/// bytes of one event's data. Returns every dispatched event as (type, data, truncated), and
/// the last event id and `retry` the stream carried.
#[doc(hidden)]
#[allow(clippy::type_complexity)]
pub fn fuzz_sse(
    chunks: &[&[u8]],
    max_data: usize,
) -> (Vec<(String, Vec<u8>, bool)>, Option<String>, Option<u64>) {
    let mut parser = sse::Parser::new(max_data);
    let mut events = Vec::new();
    for chunk in chunks {
        parser.feed(chunk, &mut events);
    }
    let events = events
        .into_iter()
        .map(|e| (e.kind, e.data, e.truncated))
        .collect();
    (events, parser.last_id, parser.retry_ms)
}

/// Protocol versions that negotiate with `initialize`, oldest first.
pub const LEGACY_PROTOCOL_VERSIONS: &[&str] =
    &["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];

/// Stateless protocol versions: every request says its version; `server/discover`.
pub const MODERN_PROTOCOL_VERSIONS: &[&str] = &["2026-07-28"];

/// Every protocol version glassbox speaks, oldest first.
pub const SUPPORTED_PROTOCOL_VERSIONS: &[&str] = &[
    "2024-11-05",
    "2025-03-26",
    "2025-06-18",
    "2025-11-25",
    "2026-07-28",
];

/// The protocol version glassbox offers by default: the newest.
pub const DEFAULT_PROTOCOL_VERSION: &str = "2026-07-28";

/// The version `initialize` offers when the server is not a 2026-07-28 one.
pub const LATEST_LEGACY_PROTOCOL_VERSION: &str = "2025-11-25";

/// How a session runs.
#[derive(Clone, Debug)]
pub struct SessionConfig {
    /// How long to wait for the answer to one request (default 20 s).
    pub request_timeout: Duration,
    /// Bound on the whole session, from [`run_session`] to the end of the last request
    /// (default 300 s).
    pub session_timeout: Duration,
    /// Longest line kept from the server (default 16 MiB); longer lines are cut and recorded
    /// with `truncated: true`. Over HTTP, the longest body or SSE event data.
    pub max_line_bytes: usize,
    /// The protocol version offered first (default `2026-07-28`); see the crate doc's
    /// negotiation.
    pub protocol_version: String,
    /// Most pages followed in one listing (default 100).
    pub max_pages: usize,
    /// Most tools called (default 1,000); a longer listing makes the session incomplete.
    pub max_tools: usize,
    /// Most unsolicited lines stored in the transcript (default 10,000); see the crate doc.
    pub max_noise_lines: usize,
    /// Most bytes of unsolicited lines stored in the transcript (default 64 MiB).
    pub max_noise_bytes: usize,
    /// How long stdout is still recorded after stdin is closed (default 2 s); over HTTP, how
    /// long running responses are still recorded.
    pub shutdown_grace: Duration,
    /// Most SSE events read from one HTTP response (default 100,000).
    pub max_stream_events: usize,
    /// Put into every probe string of the generated arguments (see
    /// [`args::generate_arguments_marked`]) and recorded in the summary; `None`: unmarked.
    pub input_marker: Option<String>,
    /// How many calls each tool gets (default [`Explore::quick`]).
    pub explore: Explore,
    /// What the plans' values chosen by role name (files outside the workspace, the canary
    /// socket, the metadata address); default none: paths get a `../` traversal to
    /// `/etc/hostname` only, URLs no call of their own.
    pub probes: args::Probes,
    /// The client's roots, absolute paths inside the sandbox (`roots/list` answers them as
    /// `file://` URIs): the workspace. Default none.
    pub roots: Vec<String>,
    /// Whether resources are read, templates expanded and prompts got (default true); `false`
    /// exercises tools only (what the benchmark compares against).
    pub surface: bool,
}

/// How many calls each tool gets: the first argument sets of its plan
/// ([`args::plan_calls`]), within a bound per tool, per session and in time.
///
/// Every tool's first call (the full argument set, the one call made before plans) comes
/// first, for every tool; the rest of each plan comes after, tool by tool, while the budgets
/// last. A call whose arguments were rejected is tried once more with the plan's next set,
/// even when that goes one over `per_tool`. A tool whose first call timed out is not called
/// again.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Explore {
    /// Most calls of one tool from its plan.
    pub per_tool: usize,
    /// Most calls in the session, over every tool (first calls always made).
    pub per_session: usize,
    /// How long the calls after the first ones may take together, and each of them a fifth
    /// of it (at least 1 s), so that one slow tool leaves time for the others; a call still
    /// running then is cut (its outcome `timeout`, its error saying why).
    pub time: Duration,
}

impl std::fmt::Display for Explore {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.per_tool <= 1 {
            return f.write_str("1 call per tool");
        }
        write!(
            f,
            "{} calls per tool, {} per session, {} after the first ones",
            self.per_tool,
            self.per_session,
            session::fmt_duration(self.time)
        )
    }
}

impl Explore {
    /// How long one call after the first ones may take: a fifth of [`Explore::time`], at
    /// least 1 s.
    pub fn per_call(&self) -> Duration {
        (self.time / 5).max(Duration::from_secs(1))
    }

    /// One call per tool, the full argument set.
    pub fn single() -> Explore {
        Explore {
            per_tool: 1,
            per_session: usize::MAX,
            time: Duration::ZERO,
        }
    }

    /// The default: 4 calls per tool (all properties, required only, and the first
    /// alternative at the first two places of choice the schema leaves), at most 10 s more
    /// than [`Explore::single`].
    pub fn quick() -> Explore {
        Explore {
            per_tool: 4,
            per_session: 4_000,
            time: Duration::from_secs(10),
        }
    }

    /// 16 calls per tool, at most 120 s more than [`Explore::single`].
    pub fn thorough() -> Explore {
        Explore {
            per_tool: 16,
            per_session: 16_000,
            time: Duration::from_secs(120),
        }
    }

    /// The preset named `single`, `quick` or `thorough`.
    pub fn named(name: &str) -> Option<Explore> {
        match name {
            "single" => Some(Explore::single()),
            "quick" => Some(Explore::quick()),
            "thorough" => Some(Explore::thorough()),
            _ => None,
        }
    }
}

impl Default for SessionConfig {
    fn default() -> Self {
        SessionConfig {
            request_timeout: Duration::from_secs(20),
            session_timeout: Duration::from_secs(300),
            max_line_bytes: 16 << 20,
            protocol_version: DEFAULT_PROTOCOL_VERSION.to_string(),
            max_pages: 100,
            max_tools: 1000,
            max_noise_lines: 10_000,
            max_noise_bytes: 64 << 20,
            shutdown_grace: Duration::from_secs(2),
            max_stream_events: 100_000,
            input_marker: None,
            explore: Explore::quick(),
            probes: args::Probes::default(),
            roots: Vec::new(),
            surface: true,
        }
    }
}

/// What the session tells the audit pipeline while it runs.
///
/// Every method is called from the thread that called [`run_session`].
pub trait SessionHooks {
    /// The session enters `phase`; called before the message that starts it is written.
    fn set_phase(&self, phase: Phase);
    /// One line sent or received, raw, as it happens.
    fn transcript(&self, entry: TranscriptEntry);
    /// Nanoseconds since the start of the run, for `t_ns`.
    fn now_ns(&self) -> u64;
}

/// How the session reaches the server.
pub enum Transport {
    /// The server's standard input and output.
    Stdio {
        /// The server's stdin.
        stdin: Box<dyn Write + Send>,
        /// The server's stdout.
        stdout: Box<dyn Read + Send>,
    },
    /// An HTTP endpoint.
    Http(HttpTarget),
}

impl std::fmt::Debug for Transport {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Transport::Stdio { .. } => f.write_str("Stdio"),
            Transport::Http(target) => f.debug_tuple("Http").field(target).finish(),
        }
    }
}

/// Runs a whole audit session against an already started server over its stdio and returns
/// what it achieved.
///
/// `stdin` is the server's standard input, `stdout` its standard output. Never panics on
/// anything the server does; every problem ends up in [`SessionSummary::failure`].
pub fn run_session<W, R>(
    stdin: W,
    stdout: R,
    cfg: &SessionConfig,
    hooks: &dyn SessionHooks,
) -> SessionSummary
where
    W: Write + Send + 'static,
    R: Read + Send + 'static,
{
    run(
        Transport::Stdio {
            stdin: Box::new(stdin),
            stdout: Box::new(stdout),
        },
        cfg,
        hooks,
    )
}

/// Runs a whole audit session over `transport` and returns what it achieved. Never panics on
/// anything the server does; every problem ends up in [`SessionSummary::failure`].
pub fn run(transport: Transport, cfg: &SessionConfig, hooks: &dyn SessionHooks) -> SessionSummary {
    let start = Instant::now();
    let mut summary = SessionSummary {
        input_marker: cfg.input_marker.clone(),
        metadata_probe: cfg.probes.metadata.clone(),
        ..SessionSummary::default()
    };
    let (events_tx, events_rx) = mpsc::sync_channel(transport::EVENT_QUEUE);
    let link = match transport {
        Transport::Stdio { stdin, stdout } => {
            if let Err(e) = transport::spawn_reader(stdout, cfg.max_line_bytes, events_tx.clone()) {
                summary.failure = Some(format!("could not start the reader thread: {e}"));
                return summary;
            }
            match transport::spawn_writer(stdin, events_tx) {
                Ok(writer) => session::Link::Stdio(Some(writer)),
                Err(e) => {
                    summary.failure = Some(format!("could not start the writer thread: {e}"));
                    return summary;
                }
            }
        }
        Transport::Http(target) => {
            if let Err(e) = target.validate() {
                summary.failure = Some(format!("invalid HTTP target: {e}"));
                return summary;
            }
            let limits = http::Limits {
                max_body: cfg.max_line_bytes.max(1),
                max_events: cfg.max_stream_events.max(1),
            };
            let until = start + cfg.session_timeout + cfg.shutdown_grace;
            match http::Client::start(target, limits, events_tx, until) {
                Ok(client) => session::Link::Http(client),
                Err(e) => {
                    summary.failure = Some(format!("could not start the HTTP threads: {e}"));
                    return summary;
                }
            }
        }
    };
    session::Session::new(cfg, hooks, events_rx, link, start).run(&mut summary);
    summary
}
