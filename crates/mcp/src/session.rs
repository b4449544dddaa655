//! The session: the order of requests, matching answers, recording every line.

use crate::transport::{Incoming, Line};
use crate::{args, SessionConfig, SessionHooks, SUPPORTED_PROTOCOL_VERSIONS};
use glassbox_model::{
    Bytes, CallResult, Direction, Phase, SessionSummary, ToolRecord, TranscriptEntry,
    GLASSBOX_VERSION,
};
use serde_json::{json, Map, Value};
use std::collections::{HashMap, HashSet, VecDeque};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::time::{Duration, Instant};

/// How long to wait for the server's stdout to close after a failed write, so that the reason
/// names the crash ("server closed stdout") rather than its symptom (a broken pipe).
const WRITE_FAILURE_GRACE: Duration = Duration::from_secs(1);

/// The text of the note recorded once when unsolicited lines stop being stored.
pub(crate) const CAPPED_NOTE_PREFIX: &str = "glassbox: transcript storage capped";

/// Why a request did not produce a usable result.
#[derive(Debug, thiserror::Error)]
pub(crate) enum Fail {
    /// No answer within the per-request timeout.
    #[error("no answer to {step} within {timeout}{note}")]
    Timeout {
        step: String,
        timeout: String,
        note: String,
    },
    /// The bound on the whole session was reached.
    #[error("session timeout ({timeout}) reached during {step}")]
    SessionTimeout { step: String, timeout: String },
    /// The server's stdout reached its end.
    #[error("server closed stdout {when}")]
    Closed { when: String },
    /// Reading the server's stdout failed.
    #[error("could not read the server's stdout during {step}: {error}")]
    ReadFailed { step: String, error: String },
    /// Writing to the server's stdin failed.
    #[error("could not write to the server during {step}: {error}")]
    WriteFailed { step: String, error: String },
    /// A JSON-RPC error response.
    #[error("{step} failed: {error}")]
    Rpc { step: String, error: String },
    /// An answer that is not valid JSON-RPC or not what MCP specifies.
    #[error("invalid JSON-RPC: {0}")]
    Invalid(String),
    /// The server negotiated a protocol version glassbox does not speak.
    #[error("server answered unsupported protocol version {0:?}")]
    UnsupportedVersion(String),
}

impl Fail {
    /// Whether the server is gone or not answering anymore: the session cannot go on.
    fn is_fatal(&self) -> bool {
        !matches!(self, Fail::Rpc { .. } | Fail::Invalid(_))
    }
}

/// How a wait for the next line ended.
enum Wait {
    Line(Line),
    TimedOut,
    Closed,
    WriteFailed,
}

/// The reader thread's end of the stream.
enum Closed {
    Eof,
    ReadFailed(String),
}

/// A listed tool as first seen, for comparing with the final listing.
struct Listed {
    description: Value,
    input_schema: Value,
}

/// Items of a paginated listing and, when it did not end cleanly, why.
struct Listing {
    items: Vec<Value>,
    problem: Option<String>,
}

pub(crate) struct Session<'a> {
    cfg: &'a SessionConfig,
    hooks: &'a dyn SessionHooks,
    events: Receiver<Incoming>,
    queued: VecDeque<Line>,
    writer: Option<SyncSender<Vec<u8>>>,
    phase: Phase,
    seq: u64,
    next_id: u64,
    deadline: Instant,
    closed: Option<Closed>,
    write_error: Option<String>,
    /// Set once `initialize` succeeded; cleared by the first answer after it.
    just_initialized: bool,
    non_json: u64,
    noise_lines: usize,
    noise_bytes: usize,
    capped: bool,
}

impl<'a> Session<'a> {
    pub(crate) fn new(
        cfg: &'a SessionConfig,
        hooks: &'a dyn SessionHooks,
        events: Receiver<Incoming>,
        writer: SyncSender<Vec<u8>>,
        start: Instant,
    ) -> Self {
        Session {
            cfg,
            hooks,
            events,
            queued: VecDeque::new(),
            writer: Some(writer),
            phase: Phase::Startup,
            seq: 0,
            next_id: 1,
            deadline: start + cfg.session_timeout,
            closed: None,
            write_error: None,
            just_initialized: false,
            non_json: 0,
            noise_lines: 0,
            noise_bytes: 0,
            capped: false,
        }
    }

    /// Runs every step, then shuts down; fills `summary`.
    pub(crate) fn run(mut self, summary: &mut SessionSummary) {
        if let Err(fail) = self.steps(summary) {
            summary.failure = Some(fail.to_string());
        }
        summary.server_closed_stdout = self.closed.is_some();
        self.set_phase(Phase::Shutdown);
        // Closing the queue makes the writer close the server's stdin after the queued lines.
        self.writer = None;
        self.drain(self.cfg.shutdown_grace);
        summary.non_json_lines = self.non_json;
        summary.completed = summary.failure.is_none();
    }

    fn steps(&mut self, summary: &mut SessionSummary) -> Result<(), Fail> {
        // initialize
        self.set_phase(Phase::Initialize);
        let params = json!({
            "protocolVersion": self.cfg.protocol_version,
            "capabilities": {},
            "clientInfo": {"name": "glassbox", "version": GLASSBOX_VERSION},
        });
        let result = self.request("initialize", params, "initialize")?;
        let Value::Object(mut init) = result else {
            return Err(Fail::Invalid("initialize result is not an object".into()));
        };
        match init.get("protocolVersion") {
            Some(Value::String(v)) => {
                summary.protocol_version = Some(v.clone());
                if !SUPPORTED_PROTOCOL_VERSIONS.contains(&v.as_str()) {
                    return Err(Fail::UnsupportedVersion(sanitize(v, 64)));
                }
            }
            _ => {
                return Err(Fail::Invalid(
                    "initialize result has no protocolVersion string".into(),
                ))
            }
        }
        summary.server_info = init.remove("serverInfo");
        let capabilities = init.remove("capabilities").unwrap_or(Value::Null);
        self.notify("notifications/initialized", None);
        self.just_initialized = true;

        // first listing
        self.set_phase(Phase::List);
        let declares = |name: &str| {
            capabilities
                .get(name)
                .is_some_and(|c| !c.is_null() && *c != Value::Bool(false))
        };
        let mut first: HashMap<String, Listed> = HashMap::new();
        match self.list_all("tools/list", "tools") {
            Ok(listing) => {
                soft_fail(summary, listing.problem);
                let max = self.cfg.max_tools;
                for (record, listed) in parse_tools(listing.items) {
                    if first.contains_key(&record.name) {
                        continue;
                    }
                    if summary.tools.len() >= max {
                        soft_fail(
                            summary,
                            Some(format!(
                                "tools/list listed more than {max} tools: only the first {max} \
                                 are called"
                            )),
                        );
                        break;
                    }
                    first.insert(record.name.clone(), listed);
                    summary.tools.push(record);
                }
            }
            Err(fail) if fail.is_fatal() => return Err(fail),
            // A server without tools may answer tools/list with an error; one that declared
            // tools may not.
            Err(Fail::Rpc { .. }) if !declares("tools") => {}
            Err(fail) => soft_fail(summary, Some(fail.to_string())),
        }
        for (capability, method, key, target) in [
            (
                "resources",
                "resources/list",
                "resources",
                &mut summary.resources,
            ),
            ("prompts", "prompts/list", "prompts", &mut summary.prompts),
        ] {
            if !declares(capability) {
                continue;
            }
            match self.list_all(method, key) {
                Ok(listing) => {
                    if let Some(problem) = listing.problem {
                        if summary.failure.is_none() {
                            summary.failure = Some(problem);
                        }
                    }
                    target.extend(listing.items.iter().filter_map(item_name));
                }
                Err(fail) if fail.is_fatal() => return Err(fail),
                // Recorded in the transcript; not what the audit is about.
                Err(Fail::Rpc { .. }) => {}
                Err(fail) => {
                    if summary.failure.is_none() {
                        summary.failure = Some(fail.to_string());
                    }
                }
            }
        }

        // calls
        for i in 0..summary.tools.len() {
            let name = summary.tools[i].name.clone();
            self.set_phase(Phase::Call(name.clone()));
            let arguments = args::generate_arguments(&summary.tools[i].input_schema);
            let step = format!("call:{}", sanitize(&name, 80));
            let tool = &mut summary.tools[i];
            tool.arguments = Some(arguments.clone());
            tool.called = true;
            let params = json!({"name": name, "arguments": arguments});
            tool.result = match self.request("tools/call", params, &step) {
                Ok(Value::Object(result)) => {
                    if result.get("isError") == Some(&Value::Bool(true)) {
                        CallResult::ToolError
                    } else {
                        CallResult::Ok
                    }
                }
                // A result that is not an object is a protocol error of the server's: the
                // model has no separate kind for it.
                Ok(_) | Err(Fail::Rpc { .. }) | Err(Fail::Invalid(_)) => CallResult::RpcError,
                Err(Fail::Timeout { .. }) => {
                    // Tell the server to stop working on it; then go on with the next tool.
                    let id = self.next_id - 1;
                    let cancel = json!({"requestId": id, "reason": "glassbox: request timed out"});
                    self.notify("notifications/cancelled", Some(cancel));
                    CallResult::Timeout
                }
                Err(fatal) => {
                    tool.result = CallResult::NotCalled;
                    return Err(fatal);
                }
            };
        }

        // final listing
        self.set_phase(Phase::List);
        let listing = match self.list_all("tools/list", "tools") {
            Ok(listing) => listing,
            Err(fail) if fail.is_fatal() => return Err(fail),
            Err(Fail::Rpc { .. }) if !declares("tools") && summary.tools.is_empty() => {
                return Ok(())
            }
            Err(fail) => {
                soft_fail(summary, Some(fail.to_string()));
                return Ok(());
            }
        };
        soft_fail(summary, listing.problem);
        let mut last: HashMap<String, Listed> = HashMap::new();
        for (record, listed) in parse_tools(listing.items) {
            if last.contains_key(&record.name) {
                continue;
            }
            if !first.contains_key(&record.name) && summary.tools.len() < 2 * self.cfg.max_tools {
                // A tool that appeared only now: drift by definition.
                summary.tools.push(ToolRecord {
                    relisted_unchanged: Some(false),
                    ..record.clone()
                });
            }
            last.insert(record.name, listed);
        }
        for tool in &mut summary.tools {
            if tool.relisted_unchanged.is_some() {
                continue;
            }
            let unchanged = match (first.get(&tool.name), last.get(&tool.name)) {
                (Some(a), Some(b)) => {
                    a.description == b.description && a.input_schema == b.input_schema
                }
                _ => false,
            };
            tool.relisted_unchanged = Some(unchanged);
        }
        Ok(())
    }

    /// Sends a request and waits for its answer; returns the `result`.
    fn request(&mut self, method: &str, params: Value, step: &str) -> Result<Value, Fail> {
        let id = self.next_id;
        self.next_id += 1;
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let now = Instant::now();
        let mut deadline = (now + self.cfg.request_timeout).min(self.deadline);
        let send_error = self.send(&msg, false).err();
        if send_error.is_some() {
            deadline = deadline.min(now + WRITE_FAILURE_GRACE);
        }
        let mut note = String::new();
        loop {
            match self.next(deadline) {
                Wait::Line(line) => {
                    if let Some(answer) = self.handle_line(line, Some(id), &mut note) {
                        self.just_initialized = false;
                        return answer.map_err(|error| match error {
                            AnswerError::Rpc(error) => Fail::Rpc {
                                step: step.to_string(),
                                error,
                            },
                            AnswerError::Invalid(what) => Fail::Invalid(format!("{step} {what}")),
                        });
                    }
                }
                Wait::WriteFailed => {
                    deadline = deadline.min(Instant::now() + WRITE_FAILURE_GRACE);
                }
                Wait::Closed => return Err(self.closed_failure(step)),
                Wait::TimedOut => {
                    if let Some(error) = send_error.or_else(|| self.write_error.clone()) {
                        return Err(Fail::WriteFailed {
                            step: step.to_string(),
                            error,
                        });
                    }
                    if Instant::now() >= self.deadline {
                        return Err(Fail::SessionTimeout {
                            step: step.to_string(),
                            timeout: fmt_duration(self.cfg.session_timeout),
                        });
                    }
                    return Err(Fail::Timeout {
                        step: step.to_string(),
                        timeout: fmt_duration(self.cfg.request_timeout),
                        note,
                    });
                }
            }
        }
    }

    fn closed_failure(&self, step: &str) -> Fail {
        match &self.closed {
            Some(Closed::ReadFailed(error)) => Fail::ReadFailed {
                step: step.to_string(),
                error: error.clone(),
            },
            _ if self.just_initialized => Fail::Closed {
                when: "after initialize".into(),
            },
            _ => Fail::Closed {
                when: format!("during {step}"),
            },
        }
    }

    /// Sends a notification (no answer expected).
    fn notify(&mut self, method: &str, params: Option<Value>) {
        let mut msg = json!({"jsonrpc": "2.0", "method": method});
        if let Some(params) = params {
            msg["params"] = params;
        }
        // A failed write shows again, with a better reason, at the next request.
        let _ = self.send(&msg, false);
    }

    /// Follows `nextCursor` over every page of a listing.
    fn list_all(&mut self, method: &str, key: &str) -> Result<Listing, Fail> {
        let mut items = Vec::new();
        let mut cursor: Option<String> = None;
        let mut seen = HashSet::new();
        for _ in 0..self.cfg.max_pages {
            let params = match &cursor {
                Some(c) => json!({ "cursor": c }),
                None => json!({}),
            };
            let Value::Object(mut page) = self.request(method, params, method)? else {
                return Err(Fail::Invalid(format!("{method} result is not an object")));
            };
            match page.remove(key) {
                Some(Value::Array(list)) => items.extend(list),
                None | Some(Value::Null) => {}
                Some(_) => {
                    return Err(Fail::Invalid(format!(
                        "{method} result: {key} is not an array"
                    )))
                }
            }
            let problem = match page.remove("nextCursor") {
                None | Some(Value::Null) => {
                    return Ok(Listing {
                        items,
                        problem: None,
                    })
                }
                Some(Value::String(c)) if c.is_empty() => {
                    return Ok(Listing {
                        items,
                        problem: None,
                    })
                }
                Some(Value::String(c)) => {
                    if seen.insert(c.clone()) {
                        cursor = Some(c);
                        continue;
                    }
                    format!("{method} repeated cursor {:?}", sanitize(&c, 64))
                }
                Some(_) => format!("invalid JSON-RPC: {method} nextCursor is not a string"),
            };
            return Ok(Listing {
                items,
                problem: Some(problem),
            });
        }
        Ok(Listing {
            items,
            problem: Some(format!(
                "{method} did not end after {} pages",
                self.cfg.max_pages
            )),
        })
    }

    /// Waits for the next line until `deadline`.
    fn next(&mut self, deadline: Instant) -> Wait {
        loop {
            // The deadline comes first: a server flooding stdout must not keep a request alive.
            let now = Instant::now();
            if now >= deadline {
                return Wait::TimedOut;
            }
            if let Some(line) = self.queued.pop_front() {
                return Wait::Line(line);
            }
            if self.closed.is_some() {
                return Wait::Closed;
            }
            match self.events.recv_timeout(deadline - now) {
                Ok(Incoming::Lines(lines)) => self.queued.extend(lines),
                Ok(Incoming::Eof) | Err(RecvTimeoutError::Disconnected) => {
                    self.closed = Some(Closed::Eof)
                }
                Ok(Incoming::ReadFailed(e)) => self.closed = Some(Closed::ReadFailed(e)),
                Ok(Incoming::WriteFailed(e)) => {
                    self.write_error = Some(e);
                    self.writer = None;
                    return Wait::WriteFailed;
                }
                Err(RecvTimeoutError::Timeout) => return Wait::TimedOut,
            }
        }
    }

    /// Records and answers what the server wrote until `grace` passes or stdout closes.
    fn drain(&mut self, grace: Duration) {
        let deadline = Instant::now() + grace;
        let mut note = String::new();
        loop {
            match self.next(deadline) {
                Wait::Line(line) => {
                    self.handle_line(line, None, &mut note);
                }
                Wait::WriteFailed => {}
                Wait::Closed | Wait::TimedOut => return,
            }
        }
    }

    /// Records one line from the server and acts on it: answers server requests, skips
    /// notifications and malformed messages. Returns the answer to `pending` if this is it.
    fn handle_line(
        &mut self,
        line: Line,
        pending: Option<u64>,
        note: &mut String,
    ) -> Option<Result<Value, AnswerError>> {
        let parsed: Option<Value> = if line.truncated {
            None
        } else {
            serde_json::from_slice(&line.bytes).ok()
        };
        let json = parsed.is_some();
        if !json {
            self.non_json += 1;
        }
        let messages: &[Value] = match &parsed {
            Some(Value::Array(batch)) => batch,
            Some(one) => std::slice::from_ref(one),
            None => &[],
        };
        let answer_at =
            pending.and_then(|id| messages.iter().position(|m| response_id(m) == Some(id)));
        self.record(
            Direction::ServerToClient,
            line.bytes,
            json,
            line.truncated,
            answer_at.is_none(),
        );
        for (i, msg) in messages.iter().enumerate() {
            if Some(i) == answer_at {
                continue;
            }
            match classify(msg) {
                Kind::Request { id, method } => self.answer_server_request(id, method),
                Kind::Response { id } => {
                    if let Some(expected) = pending {
                        *note = format!(
                            " (ignored a response with id {} while waiting for id {expected})",
                            sanitize(&id.to_string(), 40)
                        );
                    }
                }
                Kind::Notification | Kind::Malformed => {}
            }
        }
        let at = answer_at?;
        let msg = match parsed {
            Some(Value::Array(mut batch)) => batch.swap_remove(at),
            Some(one) => one,
            None => return None,
        };
        Some(parse_answer(msg))
    }

    /// Answers a request the server sent to glassbox.
    fn answer_server_request(&mut self, id: Value, method: String) {
        let reply = if method == "ping" {
            json!({"jsonrpc": "2.0", "id": id, "result": {}})
        } else {
            json!({"jsonrpc": "2.0", "id": id, "error": {
                "code": -32601,
                "message": "glassbox does not provide this",
            }})
        };
        // If the server stopped reading stdin, the reply is dropped; the pending request
        // notices.
        let _ = self.send(&reply, true);
    }

    /// Queues a message for the writer and records it.
    fn send(&mut self, msg: &Value, noise: bool) -> Result<(), String> {
        let line = serde_json::to_vec(msg).map_err(|e| e.to_string())?;
        let mut wire = Vec::with_capacity(line.len() + 1);
        wire.extend_from_slice(&line);
        wire.push(b'\n');
        let Some(writer) = &self.writer else {
            return Err(self
                .write_error
                .clone()
                .unwrap_or_else(|| "stdin is closed".into()));
        };
        match writer.try_send(wire) {
            Ok(()) => {}
            Err(TrySendError::Full(_)) => return Err("the server is not reading its stdin".into()),
            Err(TrySendError::Disconnected(_)) => {
                return Err(self
                    .write_error
                    .clone()
                    .unwrap_or_else(|| "stdin is closed".into()))
            }
        }
        self.record(Direction::ClientToServer, line, true, false, noise);
        Ok(())
    }

    /// Hands one line to the hooks, unless it is unsolicited and the storage cap is reached.
    fn record(&mut self, dir: Direction, raw: Vec<u8>, json: bool, truncated: bool, noise: bool) {
        if noise {
            if self.capped {
                return;
            }
            if self.noise_lines >= self.cfg.max_noise_lines
                || self.noise_bytes.saturating_add(raw.len()) > self.cfg.max_noise_bytes
            {
                self.capped = true;
                let note = format!(
                    "{CAPPED_NOTE_PREFIX} after {} unsolicited lines ({} bytes): further \
                     non-JSON lines, notifications, server requests and stray responses are \
                     counted and handled but not stored",
                    self.noise_lines, self.noise_bytes
                );
                self.emit(Direction::ServerToClient, note.into_bytes(), false, false);
                return;
            }
            self.noise_lines += 1;
            self.noise_bytes += raw.len();
        }
        self.emit(dir, raw, json, truncated);
    }

    fn emit(&mut self, dir: Direction, raw: Vec<u8>, json: bool, truncated: bool) {
        self.seq += 1;
        self.hooks.transcript(TranscriptEntry {
            seq: self.seq,
            t_ns: self.hooks.now_ns(),
            dir,
            phase: self.phase.clone(),
            json,
            raw: Bytes(raw),
            truncated,
        });
    }

    fn set_phase(&mut self, phase: Phase) {
        self.phase = phase.clone();
        self.hooks.set_phase(phase);
    }
}

/// Why an answer to our request is not a result.
enum AnswerError {
    Rpc(String),
    Invalid(&'static str),
}

/// What a message from the server is.
enum Kind {
    Request { id: Value, method: String },
    Notification,
    Response { id: Value },
    Malformed,
}

fn classify(msg: &Value) -> Kind {
    let Some(obj) = msg.as_object() else {
        return Kind::Malformed;
    };
    match (obj.get("method"), obj.get("id")) {
        (Some(Value::String(method)), Some(id @ (Value::String(_) | Value::Number(_)))) => {
            Kind::Request {
                id: id.clone(),
                method: method.clone(),
            }
        }
        (Some(Value::String(_)), None) => Kind::Notification,
        (None, Some(id)) if obj.contains_key("result") || obj.contains_key("error") => {
            Kind::Response { id: id.clone() }
        }
        _ => Kind::Malformed,
    }
}

/// The id of a response, when it is one and its id is an integer like the ones glassbox sends.
fn response_id(msg: &Value) -> Option<u64> {
    match classify(msg) {
        Kind::Response { id } => id.as_u64(),
        _ => None,
    }
}

fn parse_answer(msg: Value) -> Result<Value, AnswerError> {
    let Value::Object(mut obj) = msg else {
        return Err(AnswerError::Invalid("answer is not an object"));
    };
    match (obj.remove("result"), obj.remove("error")) {
        (Some(_), Some(_)) => Err(AnswerError::Invalid("answer has both result and error")),
        (Some(result), None) => Ok(result),
        (None, Some(error)) => Err(AnswerError::Rpc(describe_error(&error))),
        (None, None) => Err(AnswerError::Invalid("answer has neither result nor error")),
    }
}

fn describe_error(error: &Value) -> String {
    let code = error.get("code").and_then(Value::as_i64);
    let message = error.get("message").and_then(Value::as_str);
    match (code, message) {
        (Some(code), Some(message)) => {
            format!("JSON-RPC error {code}: {}", sanitize(message, 200))
        }
        (Some(code), None) => format!("JSON-RPC error {code}"),
        _ => format!("JSON-RPC error {}", sanitize(&error.to_string(), 200)),
    }
}

/// Tool records from listed items; items without a string `name` cannot be called and are
/// skipped (they stay in the transcript).
fn parse_tools(items: Vec<Value>) -> Vec<(ToolRecord, Listed)> {
    items
        .into_iter()
        .filter_map(|item| {
            let Value::Object(mut tool) = item else {
                return None;
            };
            let Some(Value::String(name)) = tool.remove("name") else {
                return None;
            };
            let description = tool.remove("description").unwrap_or(Value::Null);
            let input_schema = tool.remove("inputSchema").unwrap_or(Value::Null);
            let record = ToolRecord {
                name,
                description: description.as_str().map(str::to_string),
                input_schema: input_schema.clone(),
                called: false,
                arguments: None,
                result: CallResult::NotCalled,
                relisted_unchanged: None,
            };
            Some((
                record,
                Listed {
                    description,
                    input_schema,
                },
            ))
        })
        .collect()
}

/// The name of a listed resource or prompt (a resource without a name by its URI).
fn item_name(item: &Value) -> Option<String> {
    let obj: &Map<String, Value> = item.as_object()?;
    obj.get("name")
        .and_then(Value::as_str)
        .or_else(|| obj.get("uri").and_then(Value::as_str))
        .map(str::to_string)
}

fn soft_fail(summary: &mut SessionSummary, problem: Option<String>) {
    if summary.failure.is_none() {
        summary.failure = problem;
    }
}

/// A server-chosen string made fit for a one-line reason: control characters escaped, cut
/// at `max` characters.
pub(crate) fn sanitize(s: &str, max: usize) -> String {
    let mut out = String::new();
    for (i, c) in s.chars().enumerate() {
        if i == max {
            out.push('…');
            break;
        }
        if c.is_control() {
            out.extend(c.escape_default());
        } else {
            out.push(c);
        }
    }
    out
}

/// `20s`, `1500ms`.
pub(crate) fn fmt_duration(d: Duration) -> String {
    if d.subsec_nanos() == 0 {
        format!("{}s", d.as_secs())
    } else {
        format!("{}ms", d.as_millis())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn classifies_messages() {
        assert!(matches!(
            classify(&json!({"jsonrpc":"2.0","id":"a","method":"ping"})),
            Kind::Request { .. }
        ));
        assert!(matches!(
            classify(&json!({"jsonrpc":"2.0","method":"notifications/message"})),
            Kind::Notification
        ));
        assert!(matches!(
            classify(&json!({"jsonrpc":"2.0","id":null,"method":"ping"})),
            Kind::Malformed
        ));
        assert!(matches!(classify(&json!({"id":1})), Kind::Malformed));
        assert!(matches!(classify(&json!([1])), Kind::Malformed));
        assert_eq!(response_id(&json!({"id":3,"result":{}})), Some(3));
        assert_eq!(response_id(&json!({"id":"3","result":{}})), None);
        assert_eq!(response_id(&json!({"id":-3,"error":{}})), None);
    }

    #[test]
    fn describes_errors_and_sanitizes() {
        assert_eq!(
            describe_error(&json!({"code": -32601, "message": "no\nway"})),
            "JSON-RPC error -32601: no\\nway"
        );
        assert_eq!(describe_error(&json!("boom")), "JSON-RPC error \"boom\"");
        assert_eq!(sanitize("abcdef", 3), "abc…");
        assert_eq!(fmt_duration(Duration::from_secs(20)), "20s");
        assert_eq!(fmt_duration(Duration::from_millis(1500)), "1500ms");
    }
}
