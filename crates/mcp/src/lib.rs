//! The MCP client of glassbox: drives one audit session against a server over stdio and records
//! every line raw.
//!
//! The audit pipeline starts the server (in the sandbox, under the recorder), hands its stdin
//! and stdout to [`run_session`], and gets back a [`SessionSummary`]. Along the way the client
//! tells the pipeline, through [`SessionHooks`], which [`Phase`] the session is in (so syscall
//! events can be stamped with it) and every line it sends or receives (the transcript).
//!
//! # Session
//!
//! | phase | what the client does |
//! |---|---|
//! | `initialize` | `initialize` offering [`SessionConfig::protocol_version`], no client capabilities, `clientInfo` `glassbox`; checks the answered version is one of [`SUPPORTED_PROTOCOL_VERSIONS`]; then `notifications/initialized` |
//! | `list` | `tools/list` over every page (`nextCursor`); `resources/list` and `prompts/list` when the server declares those capabilities |
//! | `call:<tool>` | one `tools/call` per listed tool, with arguments from [`args::generate_arguments`] |
//! | `list` | a final `tools/list`, compared with the first one ([`ToolRecord::relisted_unchanged`]) |
//! | `shutdown` | stdin is closed; stdout is still recorded for [`SessionConfig::shutdown_grace`] or until the server closes it |
//!
//! [`SessionHooks::set_phase`] is called before the first message of a phase is written. Every
//! request has a timeout ([`SessionConfig::request_timeout`]) and the whole session has a bound
//! ([`SessionConfig::session_timeout`]). A tool call that times out is followed by
//! `notifications/cancelled` and the session goes on with the next tool. A server whose stdout
//! closes, that stops answering anything else, or that stops reading its stdin ends the session.
//!
//! Server notifications (logging, progress, `list_changed`) are recorded and otherwise ignored.
//! Requests from the server get a safe answer: `ping` an empty result, everything else
//! (`sampling/createMessage`, `elicitation/create`, `roots/list`...) the JSON-RPC error -32601
//! "glassbox does not provide this"; the session continues.
//!
//! # Summary
//!
//! [`SessionSummary::completed`] is true only when every planned request got an answer (a tool
//! call may also time out). Otherwise [`SessionSummary::failure`] holds the first reason, short
//! and naming the step, for example:
//!
//! - `no answer to initialize within 20s`
//! - `server closed stdout after initialize`, `server closed stdout during call:read_file`
//! - `session timeout (300s) reached during call:slow`
//! - `server answered unsupported protocol version "1999-01-01"`
//! - `initialize failed: JSON-RPC error -32600: ...`
//! - `invalid JSON-RPC: initialize result is not an object`
//! - `tools/list repeated cursor "abc"`, `tools/list did not end after 100 pages`,
//!   `tools/list listed more than 1000 tools: only the first 1000 are called`
//! - `could not write to the server during tools/list: Broken pipe (os error 32)`
//!
//! Some problems do not stop the session but still make it incomplete: a listing that does not
//! end, more tools than [`SessionConfig::max_tools`], an invalid listing result, a JSON-RPC error to `tools/list` from a server that declared
//! tools. A JSON-RPC error to `resources/list` or `prompts/list` is only recorded. A `tools/call`
//! answered with an error response, or with a result that is not an object, counts as
//! [`CallResult::RpcError`]. A tool whose call was sent but never answered because the session
//! ended has `called: true` and [`CallResult::NotCalled`]. Tools that appear only in the final
//! listing are appended (up to twice [`SessionConfig::max_tools`] records in all) with
//! `called: false` and `relisted_unchanged: Some(false)`. Listed
//! items without a string `name` are skipped; a repeated name keeps its first definition.
//!
//! # Transcript
//!
//! Every line in both directions goes to [`SessionHooks::transcript`] as it is sent or handled,
//! raw (the server's bytes as written, without the newline), with the current phase. `seq`
//! counts from 1 within the session. A line from the server carries the phase current when the
//! session handled it (a banner printed at startup is in `initialize`: the session starts
//! reading when it sends `initialize`). `json` is true when the line is valid JSON (whether it is
//! a well-formed JSON-RPC message is a separate question: malformed messages are recorded and
//! skipped). Lines that are not JSON (logs printed on stdout, garbage) are recorded with
//! `json: false`, skipped, and counted in [`SessionSummary::non_json_lines`]. Lines longer than
//! [`SessionConfig::max_line_bytes`] are cut, recorded with `truncated: true` and otherwise
//! treated as non-JSON; the rest of such a line is read and discarded. A JSON-RPC batch (an
//! array) is handled message by message.
//!
//! # Bounds
//!
//! A hostile server can write without end. Memory stays bounded:
//!
//! - the reader keeps at most one line ([`SessionConfig::max_line_bytes`]) and a few batches
//!   in flight;
//! - *unsolicited* lines (non-JSON lines, notifications, server requests and glassbox's replies
//!   to them, responses nobody waits for) are stored only up to
//!   [`SessionConfig::max_noise_lines`] entries or [`SessionConfig::max_noise_bytes`] bytes.
//!   After that they are still read, counted and answered, but not passed to
//!   [`SessionHooks::transcript`]; instead one entry is recorded, with `dir: server_to_client`,
//!   `json: false` and raw text starting with `glassbox: transcript storage capped`. Answers to
//!   glassbox's own requests are always stored;
//! - the writer queue is bounded: replies to a server that does not read its stdin are dropped,
//!   and a request that cannot be queued ends the session;
//! - at most [`SessionConfig::max_tools`] tools are kept and called;
//! - argument generation caps depth, sizes and total work (see [`args`]).
//!
//! Time is bounded by the two timeouts; a flood does not extend them.
//!
//! # Threads
//!
//! [`run_session`] starts two detached threads: one reads the server's stdout, one writes its
//! stdin. The session itself never blocks on a pipe. When [`run_session`] returns, the writer
//! closes stdin once its queue is written and the reader stops at its next line; if the server
//! neither reads nor writes anymore, they end when the caller kills the server (which it must
//! do after the session anyway). Writing to a dead server is a reported failure, not a panic
//! (Rust ignores `SIGPIPE`; a caller that restores it must not).
#![deny(missing_docs)]

pub mod args;
mod session;
mod transport;

pub use args::generate_arguments;
pub use glassbox_model::{
    CallResult, Direction, Phase, SessionSummary, ToolRecord, TranscriptEntry,
};

use std::io::{Read, Write};
use std::sync::mpsc;
use std::time::{Duration, Instant};

/// Protocol versions glassbox accepts in the server's `initialize` answer.
pub const SUPPORTED_PROTOCOL_VERSIONS: &[&str] =
    &["2024-11-05", "2025-03-26", "2025-06-18", "2025-11-25"];

/// The protocol version glassbox offers by default.
pub const DEFAULT_PROTOCOL_VERSION: &str = "2025-06-18";

/// How a session runs.
#[derive(Clone, Debug)]
pub struct SessionConfig {
    /// How long to wait for the answer to one request (default 20 s).
    pub request_timeout: Duration,
    /// Bound on the whole session, from [`run_session`] to the end of the last request
    /// (default 300 s).
    pub session_timeout: Duration,
    /// Longest line kept from the server (default 16 MiB); longer lines are cut and recorded
    /// with `truncated: true`.
    pub max_line_bytes: usize,
    /// The protocol version offered in `initialize` (default `2025-06-18`).
    pub protocol_version: String,
    /// Most pages followed in one listing (default 100).
    pub max_pages: usize,
    /// Most tools called (default 1,000); a longer listing makes the session incomplete.
    pub max_tools: usize,
    /// Most unsolicited lines stored in the transcript (default 10,000); see the crate doc.
    pub max_noise_lines: usize,
    /// Most bytes of unsolicited lines stored in the transcript (default 64 MiB).
    pub max_noise_bytes: usize,
    /// How long stdout is still recorded after stdin is closed (default 2 s).
    pub shutdown_grace: Duration,
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

/// Runs a whole audit session against an already started server and returns what it achieved.
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
    let start = Instant::now();
    let mut summary = SessionSummary::default();
    let (events_tx, events_rx) = mpsc::sync_channel(transport::EVENT_QUEUE);
    if let Err(e) = transport::spawn_reader(stdout, cfg.max_line_bytes, events_tx.clone()) {
        summary.failure = Some(format!("could not start the reader thread: {e}"));
        return summary;
    }
    let writer = match transport::spawn_writer(stdin, events_tx) {
        Ok(writer) => writer,
        Err(e) => {
            summary.failure = Some(format!("could not start the writer thread: {e}"));
            return summary;
        }
    };
    session::Session::new(cfg, hooks, events_rx, writer, start).run(&mut summary);
    summary
}
