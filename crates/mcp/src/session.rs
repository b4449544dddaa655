//! The session: negotiation, the order of requests, matching answers, recording every line.

use crate::http::{self, HttpKind, Outgoing};
use crate::message::{classify, response_id, sanitize, Kind};
use crate::surface::{self, Elicit};
use crate::transport::{Incoming, Line, EVENT_QUEUE};
use crate::{
    args, outcome, SessionConfig, SessionHooks, LATEST_LEGACY_PROTOCOL_VERSION,
    LEGACY_PROTOCOL_VERSIONS, MODERN_PROTOCOL_VERSIONS,
};
use base64::Engine as _;
use glassbox_model::{
    Bytes, CallRecord, CallResult, Direction, ElicitedSecret, Phase, SessionSummary, SurfaceKind,
    SurfaceRead, SurfaceRecord, ToolRecord, TranscriptEntry, GLASSBOX_VERSION,
};
use serde_json::{json, Map, Value};
use std::collections::{BTreeMap, HashMap, HashSet, VecDeque};
use std::sync::mpsc::{Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::time::{Duration, Instant};

/// How long to wait for the server's stdout to close after a failed write, so that the reason
/// names the crash ("server closed stdout") rather than its symptom (a broken pipe).
const WRITE_FAILURE_GRACE: Duration = Duration::from_secs(1);

/// How long `server/discover` gets on stdio before `initialize` is sent as well (the answer to
/// either still counts: a slow server may answer the probe late). The official Python SDK waits
/// 10 s.
pub const DISCOVER_PROBE: Duration = Duration::from_secs(10);

/// Most retries of one `tools/call` answered with `resultType: "input_required"`.
pub const MRTR_ROUNDS: usize = 3;

/// The JSON-RPC error of a modern server that does not speak the requested version.
const UNSUPPORTED_PROTOCOL_VERSION: i64 = -32022;

/// The text of the note recorded once when unsolicited lines stop being stored.
pub(crate) const CAPPED_NOTE_PREFIX: &str = "glassbox: transcript storage capped";

/// The `_meta` keys of protocol 2026-07-28 requests.
const META_VERSION: &str = "io.modelcontextprotocol/protocolVersion";
const META_CAPABILITIES: &str = "io.modelcontextprotocol/clientCapabilities";
const META_CLIENT_INFO: &str = "io.modelcontextprotocol/clientInfo";
const META_SERVER_INFO: &str = "io.modelcontextprotocol/serverInfo";

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
    /// The server's stdout (or the legacy SSE stream) reached its end.
    #[error("server closed {channel} {when}")]
    Closed { channel: &'static str, when: String },
    /// Reading the server's stdout (or the legacy SSE stream) failed.
    #[error("could not read {channel} during {step}: {error}")]
    ReadFailed {
        channel: &'static str,
        step: String,
        error: String,
    },
    /// Writing to stdin (or queueing an HTTP request) failed.
    #[error("could not write to the server during {step}: {error}")]
    WriteFailed { step: String, error: String },
    /// No connection to the HTTP server.
    #[error("could not connect to the server during {step}: {error}")]
    Connect { step: String, error: String },
    /// An HTTP response that does not carry the answer.
    #[error("bad HTTP response to {step}: {error}")]
    Http { step: String, error: String },
    /// The legacy SSE stream named no usable endpoint.
    #[error("{0}")]
    Endpoint(String),
    /// A JSON-RPC error response.
    #[error("{step} failed: {error}")]
    Rpc { step: String, error: String },
    /// An answer that is not valid JSON-RPC or not what MCP specifies.
    #[error("invalid JSON-RPC: {0}")]
    Invalid(String),
    /// The server negotiated a protocol version glassbox does not speak.
    #[error("server answered unsupported protocol version {0:?}")]
    UnsupportedVersion(String),
    /// The server speaks only versions glassbox does not.
    #[error("server supports only protocol versions {0}")]
    NoCommonVersion(String),
}

impl Fail {
    /// Whether the server is gone or not answering anymore: the session cannot go on.
    fn is_fatal(&self) -> bool {
        !matches!(
            self,
            Fail::Rpc { .. } | Fail::Invalid(_) | Fail::Http { .. }
        )
    }
}

/// How a wait for the next line ended.
enum Wait {
    Line(Line),
    TimedOut,
    Closed,
    WriteFailed,
    Exchange { id: u64, error: String, fatal: bool },
    Endpoint(Result<String, String>),
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

/// How messages reach the server.
pub(crate) enum Link {
    /// The writer thread's queue to the server's stdin (dropped: stdin is closed).
    Stdio(Option<SyncSender<Vec<u8>>>),
    /// An HTTP transport.
    Http(http::Client),
}

/// The protocol generation the session speaks.
#[derive(Clone, Debug, PartialEq, Eq)]
enum Era {
    /// Before negotiation.
    Unknown,
    /// `initialize` negotiated this version (2025-11-25 and earlier).
    Legacy(String),
    /// Every request carries this version in `_meta` (2026-07-28).
    Modern(String),
}

/// What `server/discover` told about the server.
enum Discovered {
    /// It speaks the modern version offered: the result.
    Modern(Map<String, Value>),
    /// A legacy server (or one that prefers a legacy version): `initialize` offering this.
    Legacy(String),
}

/// The answer to one request: its result, or why there is none.
type Answer = Result<Value, AnswerError>;

pub(crate) struct Session<'a> {
    cfg: &'a SessionConfig,
    hooks: &'a dyn SessionHooks,
    events: Receiver<Incoming>,
    queued: VecDeque<Line>,
    link: Link,
    era: Era,
    phase: Phase,
    seq: u64,
    next_id: u64,
    deadline: Instant,
    closed: Option<Closed>,
    write_error: Option<String>,
    /// The handshake step (`initialize`, `server/discover`) that just succeeded; cleared by the
    /// first answer after it.
    just_initialized: Option<&'static str>,
    non_json: u64,
    noise_lines: usize,
    noise_bytes: usize,
    capped: bool,
    /// A bound on the answer to the request being made, besides the request's and the
    /// session's: the time left for the calls after the first ones.
    cap: Option<Instant>,
    /// How elicitations are answered now.
    elicit: Elicit,
    /// An elicitation was declined since the exercise in progress began.
    declined: bool,
    /// The server's requests, by method.
    asked: BTreeMap<String, u64>,
    /// The server's requests in the current phase (bounded by
    /// [`surface::MAX_REQUESTS_PER_PHASE`]).
    asked_in_phase: u32,
    /// The canaries given to elicitations.
    elicited: Vec<ElicitedSecret>,
    /// Calls, reads and gets made so far (bounded by the explore budget's `per_session`).
    made: usize,
    /// What successful calls returned, for later calls' parameters of the same name.
    returned: args::Returned,
}

impl<'a> Session<'a> {
    pub(crate) fn new(
        cfg: &'a SessionConfig,
        hooks: &'a dyn SessionHooks,
        events: Receiver<Incoming>,
        link: Link,
        start: Instant,
    ) -> Self {
        Session {
            cfg,
            hooks,
            events,
            queued: VecDeque::new(),
            link,
            era: Era::Unknown,
            phase: Phase::Startup,
            seq: 0,
            next_id: 1,
            deadline: start + cfg.session_timeout,
            closed: None,
            write_error: None,
            just_initialized: None,
            non_json: 0,
            noise_lines: 0,
            noise_bytes: 0,
            capped: false,
            cap: None,
            elicit: Elicit::Decline,
            declined: false,
            asked: BTreeMap::new(),
            asked_in_phase: 0,
            elicited: Vec::new(),
            made: 0,
            returned: args::Returned::default(),
        }
    }

    /// Runs every step, then shuts down; fills `summary`.
    pub(crate) fn run(mut self, summary: &mut SessionSummary) {
        if let Err(fail) = self.steps(summary) {
            summary.failure = Some(fail.to_string());
        }
        summary.server_closed_stdout = matches!(self.link, Link::Stdio(_)) && self.closed.is_some();
        self.set_phase(Phase::Shutdown);
        self.shut_down();
        self.drain(self.cfg.shutdown_grace);
        summary.non_json_lines = self.non_json;
        summary.server_requests = std::mem::take(&mut self.asked);
        summary.elicited = std::mem::take(&mut self.elicited);
        summary.completed = summary.failure.is_none();
    }

    /// Stdio: closing the queue makes the writer close the server's stdin after the queued
    /// lines. Streamable HTTP: a DELETE ends the server's session, if it assigned one.
    fn shut_down(&mut self) {
        let deadline = Instant::now() + self.cfg.shutdown_grace;
        let headers = self.http_headers(&self.era.clone(), None, None);
        let head = match &mut self.link {
            Link::Stdio(writer) => {
                *writer = None;
                None
            }
            Link::Http(client) => {
                let head = match (&self.era, client.kind()) {
                    (Era::Legacy(_), HttpKind::Streamable) => client.delete(&headers, deadline),
                    _ => None,
                };
                client.close();
                head
            }
        };
        if let Some(Ok(head)) = head {
            self.record(Direction::ClientToServer, head, false, false, false);
        }
    }

    fn steps(&mut self, summary: &mut SessionSummary) -> Result<(), Fail> {
        self.set_phase(Phase::Initialize);
        if let Link::Http(client) = &self.link {
            if !client.has_endpoint() {
                self.await_endpoint()?;
            }
        }
        let capabilities = self.negotiate(summary)?;

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
        let mut listed: HashMap<&str, Vec<Value>> = HashMap::new();
        for (capability, method, key) in [
            ("resources", "resources/list", "resources"),
            ("resources", "resources/templates/list", "resourceTemplates"),
            ("prompts", "prompts/list", "prompts"),
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
                    listed.insert(key, listing.items);
                }
                Err(fail) if fail.is_fatal() => return Err(fail),
                // Recorded in the transcript; what could not be listed is not exercised, and
                // the report says so.
                // Templates are optional: a server without them may not know the method.
                Err(Fail::Rpc { error, .. })
                    if key == "resourceTemplates" && error.contains("-32601") => {}
                Err(Fail::Rpc { error, .. }) => summary.surface_cut.push(format!(
                    "{method} failed ({}): its {} were not exercised",
                    sanitize(&error, 120),
                    if key == "prompts" {
                        "prompts"
                    } else {
                        "resources"
                    }
                )),
                Err(fail) => {
                    if summary.failure.is_none() {
                        summary.failure = Some(fail.to_string());
                    }
                }
            }
        }
        let items = |k: &str| listed.get(k).map(Vec::as_slice).unwrap_or_default();
        summary
            .resources
            .extend(items("resources").iter().filter_map(item_name));
        summary
            .prompts
            .extend(items("prompts").iter().filter_map(item_name));
        summary.templates.extend(
            items("resourceTemplates")
                .iter()
                .filter_map(|t| t.get("uriTemplate")?.as_str().map(str::to_string)),
        );

        self.call_tools(summary)?;
        if self.cfg.surface {
            self.exercise_surface(summary, &listed, declares("completions"))?;
        } else if !listed.values().all(Vec::is_empty) {
            summary.surface_cut.push(
                "resources and prompts were not exercised (tools only, as asked)".to_string(),
            );
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

    /// Calls the tools by their plans within [`SessionConfig::explore`]: every tool's first
    /// call, then the rest of each plan (see [`crate::Explore`]).
    fn call_tools(&mut self, summary: &mut SessionSummary) -> Result<(), Fail> {
        let explore = self.cfg.explore.clone();
        summary.explore = Some(explore.to_string());
        let marker = self.cfg.input_marker.clone().unwrap_or_default();
        // One more than the budget: the retry of a rejected last call.
        let plans: Vec<Vec<args::PlannedCall>> = summary
            .tools
            .iter()
            .map(|t| {
                let max = explore.per_tool.max(1) + 1;
                let probes = self.cfg.probes.for_tool(&t.name);
                args::plan_calls_with(&t.input_schema, &marker, &probes, max)
            })
            .collect();
        for (i, tool) in summary.tools.iter_mut().enumerate() {
            tool.arguments_note = args::schema_note(&tool.input_schema);
            tool.arguments = Some(plans[i][0].arguments.clone());
        }
        let mut accepted = HashSet::new();
        for (i, plan) in plans.iter().enumerate() {
            self.exercise_call(summary, i, &plan[0], None, &mut accepted)?;
        }
        // Tools given values earlier answers returned, once each.
        let mut reused = HashSet::new();
        if explore.per_tool <= 1 {
            return Ok(());
        }
        let until = (Instant::now() + explore.time).min(self.deadline);
        let mut cut = 0usize;
        for (i, plan) in plans.iter().enumerate() {
            let mut next = 1;
            loop {
                let calls = &summary.tools[i].calls;
                let last = calls.last().expect("every tool had its first call");
                if matches!(last.result, CallResult::Timeout | CallResult::NotCalled) {
                    break;
                }
                let rejected = last.result == CallResult::RejectedArguments;
                let in_budget = calls.len() < explore.per_tool
                    || (rejected && calls.len() == explore.per_tool && last.retry_of.is_none());
                if !in_budget {
                    break;
                }
                let retry_of = rejected.then_some(last.k);
                // A rejection whose message says what was wanted is corrected from it, once,
                // before the plan's next set.
                let corrected = match (rejected, last.retry_of, last.error.as_deref()) {
                    (true, None, Some(error)) => {
                        args::correct(&summary.tools[i].input_schema, &last.arguments, error)
                    }
                    _ => None,
                };
                // A tool none of whose calls did its work, given what earlier answers returned
                // for its parameters (an id a listing returned), once.
                let reuse = match corrected.is_none()
                    && !reused.contains(&i)
                    && calls.iter().all(|c| c.result != CallResult::Ok)
                {
                    true => self
                        .returned
                        .apply(&summary.tools[i].input_schema, &calls[0].arguments),
                    false => None,
                };
                if reuse.is_none() && corrected.is_none() && next >= plan.len() {
                    break;
                }
                if self.made >= explore.per_session || Instant::now() >= until {
                    cut += 1;
                    break;
                }
                if reuse.is_some() {
                    reused.insert(i);
                }
                let extra = corrected.or(reuse);
                // One slow tool does not take the others' time.
                self.cap = Some(until.min(Instant::now() + explore.per_call()));
                let planned = match &extra {
                    Some(p) => p,
                    None => &plan[next],
                };
                let result = self.exercise_call(summary, i, planned, retry_of, &mut accepted);
                self.cap = None;
                result?;
                if extra.is_none() {
                    next += 1;
                }
            }
        }
        if cut > 0 {
            summary.exploration_cut = Some(format!(
                "the calls' budget ({} calls, {} after the first ones) ran out: {cut} tool(s) \
                 got fewer calls than their plan",
                explore.per_session,
                fmt_duration(explore.time)
            ));
        }
        Ok(())
    }

    /// One call of tool `i` ([`Session::call_planned`]), made again accepting when its
    /// elicitation was declined ([`Session::accepting_again`]).
    fn exercise_call(
        &mut self,
        summary: &mut SessionSummary,
        i: usize,
        planned: &args::PlannedCall,
        retry_of: Option<u32>,
        accepted: &mut HashSet<usize>,
    ) -> Result<(), Fail> {
        self.accepting_again(i, planned, accepted, |s, p, first| {
            s.call_planned(summary, i, p, if first { retry_of } else { None })
        })
    }

    /// `exercise` with `planned`'s values (`true`: the first time); when the server's
    /// elicitation was declined during it, once more with the same values, accepting (once per
    /// item: `accepted`). Both count in the calls' budget.
    fn accepting_again(
        &mut self,
        i: usize,
        planned: &args::PlannedCall,
        accepted: &mut HashSet<usize>,
        mut exercise: impl FnMut(&mut Self, &args::PlannedCall, bool) -> Result<(), Fail>,
    ) -> Result<(), Fail> {
        self.declined = false;
        self.made += 1;
        exercise(self, planned, true)?;
        if !self.declined || !accepted.insert(i) {
            return Ok(());
        }
        let again = args::PlannedCall {
            label: if planned.label.is_empty() {
                "elicitation accepted".to_string()
            } else {
                format!("{}, elicitation accepted", planned.label)
            },
            arguments: planned.arguments.clone(),
        };
        self.made += 1;
        self.elicit = Elicit::Accept;
        let result = exercise(self, &again, false);
        self.elicit = Elicit::Decline;
        self.declined = false;
        result
    }

    /// One call of tool `i` with `planned`'s arguments, recorded in its [`ToolRecord::calls`].
    /// A fatal failure (the server gone) is recorded as the call's outcome and returned.
    fn call_planned(
        &mut self,
        summary: &mut SessionSummary,
        i: usize,
        planned: &args::PlannedCall,
        retry_of: Option<u32>,
    ) -> Result<(), Fail> {
        let name = summary.tools[i].name.clone();
        let k = summary.tools[i].calls.len() as u32 + 1;
        let phase = Phase::call(&name, k);
        // The phase as it is written (`call:NAME#K`), made fit for a one-line reason.
        let step = sanitize(&phase.to_string(), 90);
        self.set_phase(phase);
        let headers = match self.era {
            Era::Modern(_) if matches!(self.link, Link::Http(_)) => {
                param_headers(&summary.tools[i].input_schema, &planned.arguments)
            }
            _ => Vec::new(),
        };
        summary.tools[i].called = true;
        let answer = self.call(&name, planned.arguments.clone(), &step, headers);
        if let Ok(result) = &answer {
            if result.get("isError") != Some(&Value::Bool(true)) {
                self.returned.keep(result);
            }
        }
        let (result, error, fatal) = self.settle(answer, outcome::of_result);
        let tool = &mut summary.tools[i];
        tool.calls.push(CallRecord {
            k,
            label: planned.label.clone(),
            arguments: planned.arguments.clone(),
            result,
            retry_of,
            error: error.map(|e| sanitize(&e, 300)),
        });
        if k == 1 {
            tool.result = result;
        }
        match fatal {
            Some(fail) => Err(fail),
            None => Ok(()),
        }
    }

    /// The outcome of an exercise's answer: `ok` judges a result; a JSON-RPC error by its
    /// code and text; a timeout cancels the request (and says when the budget cut it); a
    /// failure that ends the session is returned third, to be recorded first.
    fn settle(
        &mut self,
        answer: Result<Value, Fail>,
        ok: fn(&Value) -> (CallResult, Option<String>),
    ) -> (CallResult, Option<String>, Option<Fail>) {
        match answer {
            Ok(result) => {
                let (r, e) = ok(&result);
                (r, e, None)
            }
            Err(Fail::Rpc { error, .. }) => (outcome::of_rpc_error(&error), Some(error), None),
            // A request that still wanted input after the retries, or an HTTP answer without
            // one, is a protocol error of the server's.
            Err(fail @ (Fail::Invalid(_) | Fail::Http { .. })) => {
                (CallResult::RpcError, Some(fail.to_string()), None)
            }
            Err(fail @ Fail::Timeout { .. }) => {
                // Tell the server to stop working on it (on streamable HTTP of 2026-07-28
                // the closed response stream says it); then go on with the next one.
                if !(matches!(self.era, Era::Modern(_)) && matches!(self.link, Link::Http(_))) {
                    let id = self.next_id - 1;
                    let cancel = json!({"requestId": id, "reason": "glassbox: request timed out"});
                    self.notify("notifications/cancelled", Some(cancel));
                }
                let why = match self.cap {
                    Some(cap) if Instant::now() >= cap => {
                        format!(
                            "cut: past the time a call after the first ones may take ({} \
                             each, {} in all)",
                            fmt_duration(self.cfg.explore.per_call()),
                            fmt_duration(self.cfg.explore.time)
                        )
                    }
                    _ => fail.to_string(),
                };
                (CallResult::Timeout, Some(why), None)
            }
            Err(fail) => {
                let why = fail.to_string();
                (CallResult::NotCalled, Some(why), Some(fail))
            }
        }
    }

    /// Reads every listed resource, expands every resource template with values from the
    /// plans (its variables taken as string parameters: a path-like one gets the workspace
    /// file, then the planted-credential and traversal probes) and reads the URIs, and gets
    /// every prompt with arguments from the plans; `completion/complete` for a prompt's
    /// arguments and a template's variables first, when the server declares completions.
    /// Bounded as tools are ([`crate::Explore`]): each one's first read or get is always
    /// made (at most [`SessionConfig::max_tools`] of each kind), the rest of its plan while
    /// the calls' budget lasts. An exercise whose elicitation was declined is made once more,
    /// accepting.
    fn exercise_surface(
        &mut self,
        summary: &mut SessionSummary,
        listed: &HashMap<&str, Vec<Value>>,
        completions: bool,
    ) -> Result<(), Fail> {
        let explore = self.cfg.explore.clone();
        let marker = self.cfg.input_marker.clone().unwrap_or_default();
        let max = self.cfg.max_tools;
        let per = explore.per_tool.max(1);
        let mut plans: Vec<Vec<args::PlannedCall>> = Vec::new();
        // What each one's `completion/complete` requests name: its reference and arguments.
        let mut completing: Vec<(Value, Vec<String>)> = Vec::new();
        for (key, kind) in [
            ("resources", SurfaceKind::Resource),
            ("resourceTemplates", SurfaceKind::Template),
            ("prompts", SurfaceKind::Prompt),
        ] {
            let items = listed.get(key).map(Vec::as_slice).unwrap_or_default();
            let field = match kind {
                SurfaceKind::Resource => "uri",
                SurfaceKind::Template => "uriTemplate",
                SurfaceKind::Prompt => "name",
            };
            let mut seen = HashSet::new();
            let mut kept = 0;
            for item in items {
                let Some(name) = item.get(field).and_then(Value::as_str) else {
                    continue;
                };
                if !seen.insert(name) {
                    continue;
                }
                if kept == max {
                    summary.surface_cut.push(format!(
                        "more than {max} {}s listed: only the first {max} were exercised",
                        kind.name()
                    ));
                    break;
                }
                kept += 1;
                let (plan, reference, names) = match kind {
                    SurfaceKind::Resource => (
                        vec![args::PlannedCall {
                            label: String::new(),
                            arguments: Value::Null,
                        }],
                        Value::Null,
                        Vec::new(),
                    ),
                    SurfaceKind::Template => {
                        let Some(vars) = surface::template_variables(name) else {
                            summary.surface_cut.push(format!(
                                "resource template {:?} is not a valid URI template: not read",
                                sanitize(name, 120)
                            ));
                            continue;
                        };
                        let params: Vec<_> = vars.iter().map(|v| (v.clone(), None, true)).collect();
                        let schema = surface::string_schema(&params);
                        (
                            args::plan_calls_with(
                                &schema,
                                &marker,
                                &self.cfg.probes.for_tool(name),
                                per,
                            ),
                            json!({"type": "ref/resource", "uri": name}),
                            vars,
                        )
                    }
                    SurfaceKind::Prompt => {
                        let params = surface::prompt_arguments(item);
                        let schema = surface::string_schema(&params);
                        let names = params.iter().map(|p| p.0.clone()).collect();
                        (
                            args::plan_calls_with(
                                &schema,
                                &marker,
                                &self.cfg.probes.for_tool(name),
                                per,
                            ),
                            json!({"type": "ref/prompt", "name": name}),
                            names,
                        )
                    }
                };
                summary.surface.push(SurfaceRecord {
                    kind,
                    name: name.to_string(),
                    completions: 0,
                    reads: Vec::new(),
                });
                plans.push(plan);
                completing.push((reference, if completions { names } else { Vec::new() }));
            }
        }
        let mut accepted = HashSet::new();
        for (i, plan) in plans.iter().enumerate() {
            self.exercise_read(summary, i, &plan[0], Some(&completing[i]), &mut accepted)?;
        }
        if per <= 1 {
            return Ok(());
        }
        let until = (Instant::now() + explore.time).min(self.deadline);
        let mut cut = 0usize;
        for (i, plan) in plans.iter().enumerate() {
            for planned in plan.iter().skip(1) {
                let last = summary.surface[i].reads.last();
                if last.is_some_and(|r| matches!(r.result, CallResult::Timeout)) {
                    break;
                }
                if summary.surface[i].reads.len() >= per {
                    break;
                }
                if self.made >= explore.per_session || Instant::now() >= until {
                    cut += 1;
                    break;
                }
                self.cap = Some(until.min(Instant::now() + explore.per_call()));
                let result = self.exercise_read(summary, i, planned, None, &mut accepted);
                self.cap = None;
                result?;
            }
        }
        if cut > 0 {
            summary.surface_cut.push(format!(
                "the calls' budget ({} in all, {} after the first ones) ran out: {cut} \
                 resource template(s) or prompt(s) got fewer reads than their plan",
                explore.per_session,
                fmt_duration(explore.time)
            ));
        }
        Ok(())
    }

    /// One read or get of surface item `i` with `planned`'s values (first the completions
    /// `completing` names), recorded in its [`SurfaceRecord::reads`]; made again accepting
    /// when its elicitation was declined ([`Session::accepting_again`]).
    fn exercise_read(
        &mut self,
        summary: &mut SessionSummary,
        i: usize,
        planned: &args::PlannedCall,
        completing: Option<&(Value, Vec<String>)>,
        accepted: &mut HashSet<usize>,
    ) -> Result<(), Fail> {
        self.accepting_again(i, planned, accepted, |s, p, first| {
            s.read_planned(summary, i, p, completing.filter(|_| first))
        })
    }

    fn read_planned(
        &mut self,
        summary: &mut SessionSummary,
        i: usize,
        planned: &args::PlannedCall,
        completing: Option<&(Value, Vec<String>)>,
    ) -> Result<(), Fail> {
        let item = &summary.surface[i];
        let (kind, name) = (item.kind, item.name.clone());
        let (method, params, target) = match kind {
            SurfaceKind::Resource => ("resources/read", json!({"uri": name}), name.clone()),
            SurfaceKind::Template => {
                let values = planned.arguments.as_object().cloned().unwrap_or_default();
                let uri = surface::expand_template(&name, &values).unwrap_or_else(|| name.clone());
                ("resources/read", json!({"uri": uri}), uri)
            }
            SurfaceKind::Prompt => (
                "prompts/get",
                json!({"name": name, "arguments": surface::stringified(&planned.arguments)}),
                name.clone(),
            ),
        };
        // Numbered by what is read or got: a template's expansions each have their URI.
        let k = summary
            .surface
            .iter()
            .filter(|s| (s.kind == SurfaceKind::Prompt) == (kind == SurfaceKind::Prompt))
            .flat_map(|s| &s.reads)
            .filter(|r| r.phase.exercised().is_some_and(|(_, n, _)| n == target))
            .count() as u32
            + 1;
        let phase = match kind {
            SurfaceKind::Prompt => Phase::prompt(&target, k),
            _ => Phase::read(&target, k),
        };
        let step = sanitize(&phase.to_string(), 90);
        self.set_phase(phase.clone());
        let mut fatal = None;
        if let Some((reference, names)) = completing {
            for arg in names.iter().take(8) {
                let params = json!({"ref": reference, "argument": {"name": arg, "value": ""}});
                summary.surface[i].completions += 1;
                match self.request("completion/complete", params, &step) {
                    Err(fail) if fail.is_fatal() && !matches!(fail, Fail::Timeout { .. }) => {
                        fatal = Some(fail);
                        break;
                    }
                    _ => {}
                }
            }
        }
        let (result, error, fatal) = match fatal {
            Some(fail) => (CallResult::NotCalled, Some(fail.to_string()), Some(fail)),
            None => {
                let answer = self.request_answering(method, params, &step, Vec::new());
                self.settle(answer, |_| (CallResult::Ok, None))
            }
        };
        summary.surface[i].reads.push(SurfaceRead {
            phase,
            label: planned.label.clone(),
            arguments: planned.arguments.clone(),
            result,
            error: error.map(|e| sanitize(&e, 300)),
        });
        match fatal {
            Some(fail) => Err(fail),
            None => Ok(()),
        }
    }

    /// One `tools/call`. With protocol 2026-07-28, a result that asks for input
    /// (`resultType: "input_required"`) is retried, up to [`MRTR_ROUNDS`] times, with the
    /// answers a request of its own would get ([`Session::input_responses`]) and the
    /// `requestState` echoed.
    fn call(
        &mut self,
        name: &str,
        arguments: Value,
        step: &str,
        headers: Vec<(String, String)>,
    ) -> Result<Value, Fail> {
        let params = json!({"name": name, "arguments": arguments});
        self.request_answering("tools/call", params, step, headers)
    }

    /// A request whose result may ask for input (2026-07-28: `resultType:
    /// "input_required"`): sent again with the answers, up to [`MRTR_ROUNDS`] times.
    fn request_answering(
        &mut self,
        method: &str,
        params: Value,
        step: &str,
        headers: Vec<(String, String)>,
    ) -> Result<Value, Fail> {
        let mut sent = params.clone();
        let mut round = 0;
        loop {
            let result = self.request_with(method, sent, step, headers.clone())?;
            let modern = matches!(self.era, Era::Modern(_));
            match result {
                Value::Object(result)
                    if modern
                        && result.get("resultType").and_then(Value::as_str)
                            == Some("input_required") =>
                {
                    if round == MRTR_ROUNDS {
                        return Err(Fail::Invalid(format!(
                            "{step} still required input after {MRTR_ROUNDS} retries"
                        )));
                    }
                    round += 1;
                    sent = params.clone();
                    if let Some(Value::Object(requests)) = result.get("inputRequests") {
                        sent["inputResponses"] = self.input_responses(requests);
                    }
                    if let Some(state @ Value::String(_)) = result.get("requestState") {
                        sent["requestState"] = state.clone();
                    }
                }
                other => return Ok(other),
            }
        }
    }

    /// The answers to the input a 2026-07-28 server asks for in a result
    /// (`resultType: "input_required"`): each request answered as if it had come on its own
    /// ([`Session::answer_of`]), counted with the others; one glassbox does not provide is left
    /// out (the server asks again or gives up).
    fn input_responses(&mut self, requests: &Map<String, Value>) -> Value {
        let mut out = Map::new();
        for (key, request) in requests.iter().take(64) {
            let Some(method) = request.get("method").and_then(Value::as_str) else {
                continue;
            };
            self.count_request(method);
            if let Some(answer) = self.answer_of(method, request.get("params")) {
                out.insert(key.clone(), answer);
            }
        }
        Value::Object(out)
    }

    /// Agrees on a protocol version; returns the server's capabilities.
    ///
    /// Offering a 2026-07-28 version: `server/discover` first. A result listing the version
    /// makes the session modern. `UnsupportedProtocolVersion` (-32022) naming legacy versions,
    /// a result naming only legacy versions, any other error, an unusable result, or (on
    /// stdio) no answer within [`DISCOVER_PROBE`] fall back to `initialize` offering the
    /// latest mutual legacy version. On stdio the probe's answer still counts while
    /// `initialize` waits: the first decisive answer wins. Offering a legacy version, or on the
    /// legacy SSE transport: `initialize` only.
    fn negotiate(&mut self, summary: &mut SessionSummary) -> Result<Value, Fail> {
        let offered = self.cfg.protocol_version.clone();
        let legacy_sse = matches!(&self.link, Link::Http(c) if c.kind() == HttpKind::LegacySse);
        if !MODERN_PROTOCOL_VERSIONS.contains(&offered.as_str()) || legacy_sse {
            let version = if MODERN_PROTOCOL_VERSIONS.contains(&offered.as_str()) {
                LATEST_LEGACY_PROTOCOL_VERSION.to_string()
            } else {
                offered
            };
            let (id, send_error) = self.send_initialize(&version);
            let deadline = self.request_deadline();
            let (_, answer) = self.wait_for(&[id], deadline, send_error, "initialize")?;
            return self.initialized(answer, summary);
        }
        let stdio = matches!(self.link, Link::Stdio(_));
        let params = json!({});
        let (discover, discover_error) = self.send_request_as(
            &Era::Modern(offered.clone()),
            "server/discover",
            params,
            Vec::new(),
        );
        let probe_deadline = if stdio {
            (Instant::now() + DISCOVER_PROBE.min(self.cfg.request_timeout)).min(self.deadline)
        } else {
            self.request_deadline()
        };
        // Once `initialize` is sent: its id, deadline and send error.
        let mut init: Option<(u64, Instant, Option<String>)> = None;
        let mut discover_open = true;
        loop {
            let result = match &init {
                None => self.wait_for(
                    &[discover],
                    probe_deadline,
                    discover_error.clone(),
                    "server/discover",
                ),
                Some((id, deadline, send_error)) => {
                    let ids = if discover_open {
                        vec![*id, discover]
                    } else {
                        vec![*id]
                    };
                    self.wait_for(&ids, *deadline, send_error.clone(), "initialize")
                }
            };
            match result {
                Ok((id, answer)) if id == discover => {
                    discover_open = false;
                    match self.discovered(answer, &offered)? {
                        Discovered::Modern(result) => {
                            return Ok(self.adopt_modern(result, offered, summary))
                        }
                        Discovered::Legacy(version) => {
                            if init.is_none() {
                                let (id, send_error) = self.send_initialize(&version);
                                init = Some((id, self.request_deadline(), send_error));
                            }
                        }
                    }
                }
                Ok((_, answer)) => return self.initialized(answer, summary),
                Err(Fail::Timeout { .. }) if init.is_none() && stdio => {
                    let (id, send_error) = self.send_initialize(LATEST_LEGACY_PROTOCOL_VERSION);
                    init = Some((id, self.request_deadline(), send_error));
                }
                Err(fail) => return Err(fail),
            }
        }
    }

    /// What the answer to `server/discover` says about the server.
    fn discovered(&self, answer: Answer, offered: &str) -> Result<Discovered, Fail> {
        let latest_mutual = |versions: &[Value]| {
            versions
                .iter()
                .filter_map(Value::as_str)
                .filter(|v| LEGACY_PROTOCOL_VERSIONS.contains(v))
                .max()
                .map(str::to_string)
        };
        let fallback = Discovered::Legacy(LATEST_LEGACY_PROTOCOL_VERSION.to_string());
        let versions = match answer {
            Ok(Value::Object(result)) => {
                let Some(Value::Array(versions)) = result.get("supportedVersions") else {
                    // Not a DiscoverResult: no evidence of a modern server.
                    return Ok(fallback);
                };
                if versions.iter().any(|v| v.as_str() == Some(offered)) {
                    return Ok(Discovered::Modern(result));
                }
                versions.clone()
            }
            Err(AnswerError::Rpc {
                code: Some(UNSUPPORTED_PROTOCOL_VERSION),
                data: Some(data),
                ..
            }) => match data.get("supported") {
                Some(Value::Array(versions)) => versions.clone(),
                _ => return Ok(fallback),
            },
            Err(AnswerError::Connect(error)) => {
                return Err(Fail::Connect {
                    step: "server/discover".into(),
                    error,
                })
            }
            // A legacy server: the fallback is not keyed to one error code.
            Ok(_) | Err(_) => return Ok(fallback),
        };
        match latest_mutual(&versions) {
            Some(version) => Ok(Discovered::Legacy(version)),
            None if versions.is_empty() => Ok(fallback),
            None => {
                let list: Vec<String> = versions
                    .iter()
                    .take(10)
                    .map(|v| sanitize(&v.to_string(), 40))
                    .collect();
                Err(Fail::NoCommonVersion(list.join(", ")))
            }
        }
    }

    fn adopt_modern(
        &mut self,
        mut result: Map<String, Value>,
        version: String,
        summary: &mut SessionSummary,
    ) -> Value {
        summary.protocol_version = Some(version.clone());
        summary.server_info = result
            .get_mut("_meta")
            .and_then(|m| m.get_mut(META_SERVER_INFO))
            .map(Value::take)
            .or_else(|| result.remove("serverInfo"));
        self.era = Era::Modern(version);
        self.just_initialized = Some("server/discover");
        result.remove("capabilities").unwrap_or(Value::Null)
    }

    fn send_initialize(&mut self, version: &str) -> (u64, Option<String>) {
        let params = json!({
            "protocolVersion": version,
            "capabilities": surface::client_capabilities(version),
            "clientInfo": {"name": "glassbox", "version": GLASSBOX_VERSION},
        });
        self.send_request_as(&Era::Unknown, "initialize", params, Vec::new())
    }

    /// Checks the answer to `initialize`, records what it says, sends
    /// `notifications/initialized`, and opens the optional GET stream of streamable HTTP.
    fn initialized(&mut self, answer: Answer, summary: &mut SessionSummary) -> Result<Value, Fail> {
        let result = answer.map_err(|e| e.into_fail("initialize"))?;
        let Value::Object(mut init) = result else {
            return Err(Fail::Invalid("initialize result is not an object".into()));
        };
        let version = match init.get("protocolVersion") {
            Some(Value::String(v)) => {
                summary.protocol_version = Some(v.clone());
                if !LEGACY_PROTOCOL_VERSIONS.contains(&v.as_str()) {
                    return Err(Fail::UnsupportedVersion(sanitize(v, 64)));
                }
                v.clone()
            }
            _ => {
                return Err(Fail::Invalid(
                    "initialize result has no protocolVersion string".into(),
                ))
            }
        };
        summary.server_info = init.remove("serverInfo");
        let capabilities = init.remove("capabilities").unwrap_or(Value::Null);
        self.era = Era::Legacy(version);
        self.notify("notifications/initialized", None);
        self.just_initialized = Some("initialize");
        let listens =
            matches!(&self.link, Link::Http(c) if c.kind() == HttpKind::Streamable && c.listens());
        if listens {
            let headers = self.http_headers(&self.era.clone(), None, None);
            let until = self.deadline + self.cfg.shutdown_grace;
            if let Link::Http(client) = &self.link {
                client.listen(headers, until);
            }
        }
        Ok(capabilities)
    }

    /// Waits for the legacy SSE stream's `endpoint` event.
    fn await_endpoint(&mut self) -> Result<(), Fail> {
        let deadline = self.request_deadline();
        let mut note = String::new();
        loop {
            match self.next(deadline) {
                Wait::Line(line) => {
                    self.handle_line(line, &[], &mut note);
                }
                Wait::Endpoint(Ok(path)) => {
                    if let Link::Http(client) = &mut self.link {
                        client.set_endpoint(path);
                    }
                    return Ok(());
                }
                Wait::Endpoint(Err(e)) => return Err(Fail::Endpoint(e)),
                Wait::Closed => return Err(self.closed_failure("initialize")),
                Wait::TimedOut => {
                    return Err(Fail::Endpoint(format!(
                        "no endpoint event on the SSE stream within {}",
                        fmt_duration(self.cfg.request_timeout)
                    )))
                }
                Wait::WriteFailed | Wait::Exchange { .. } => {}
            }
        }
    }

    fn request_deadline(&self) -> Instant {
        let deadline = (Instant::now() + self.cfg.request_timeout).min(self.deadline);
        self.cap.map_or(deadline, |cap| deadline.min(cap))
    }

    /// Sends a request and waits for its answer; returns the `result`.
    fn request(&mut self, method: &str, params: Value, step: &str) -> Result<Value, Fail> {
        self.request_with(method, params, step, Vec::new())
    }

    fn request_with(
        &mut self,
        method: &str,
        params: Value,
        step: &str,
        headers: Vec<(String, String)>,
    ) -> Result<Value, Fail> {
        let era = self.era.clone();
        let (id, send_error) = self.send_request_as(&era, method, params, headers);
        let deadline = self.request_deadline();
        let (_, answer) = self.wait_for(&[id], deadline, send_error, step)?;
        answer.map_err(|e| e.into_fail(step))
    }

    /// Sends a request as `era` would (with `_meta` for 2026-07-28); returns its id and why it
    /// could not be sent.
    fn send_request_as(
        &mut self,
        era: &Era,
        method: &str,
        mut params: Value,
        mut headers: Vec<(String, String)>,
    ) -> (u64, Option<String>) {
        let id = self.next_id;
        self.next_id += 1;
        if let (Era::Modern(version), Value::Object(p)) = (era, &mut params) {
            let meta = p
                .entry("_meta")
                .or_insert_with(|| Value::Object(Map::new()));
            if let Value::Object(meta) = meta {
                meta.insert(META_VERSION.into(), json!(version));
                meta.insert(
                    META_CAPABILITIES.into(),
                    surface::client_capabilities(version),
                );
                meta.insert(
                    META_CLIENT_INFO.into(),
                    json!({"name": "glassbox", "version": GLASSBOX_VERSION}),
                );
            }
        }
        let name = params
            .get("name")
            .or_else(|| params.get("uri"))
            .and_then(Value::as_str)
            .map(str::to_string);
        let mut all = self.http_headers(era, Some(method), name.as_deref());
        all.append(&mut headers);
        let msg = json!({"jsonrpc": "2.0", "id": id, "method": method, "params": params});
        let send_error = self.send(&msg, false, Some(id), all).err();
        (id, send_error)
    }

    /// Waits for the answer to one of `ids` until `deadline`; returns whose it is.
    fn wait_for(
        &mut self,
        ids: &[u64],
        mut deadline: Instant,
        send_error: Option<String>,
        step: &str,
    ) -> Result<(u64, Answer), Fail> {
        if send_error.is_some() {
            deadline = deadline.min(Instant::now() + WRITE_FAILURE_GRACE);
        }
        let mut note = String::new();
        loop {
            match self.next(deadline) {
                Wait::Line(line) => {
                    if let Some((id, answer)) = self.handle_line(line, ids, &mut note) {
                        self.just_initialized = None;
                        return Ok((id, answer));
                    }
                }
                Wait::Exchange { id, error, fatal } if ids.contains(&id) => {
                    self.just_initialized = None;
                    let error = if fatal {
                        AnswerError::Connect(error)
                    } else {
                        AnswerError::Http(error)
                    };
                    return Ok((id, Err(error)));
                }
                Wait::Exchange { .. } | Wait::Endpoint(_) => {}
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

    /// The name of what carries the server's messages, for reasons.
    fn channel(&self) -> (&'static str, &'static str) {
        match self.link {
            Link::Stdio(_) => ("stdout", "the server's stdout"),
            Link::Http(_) => ("the SSE stream", "the SSE stream"),
        }
    }

    fn closed_failure(&self, step: &str) -> Fail {
        let (channel, reading) = self.channel();
        match (&self.closed, self.just_initialized) {
            (Some(Closed::ReadFailed(error)), _) => Fail::ReadFailed {
                channel: reading,
                step: step.to_string(),
                error: error.clone(),
            },
            (_, Some(handshake)) => Fail::Closed {
                channel,
                when: format!("after {handshake}"),
            },
            _ => Fail::Closed {
                channel,
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
        let headers = self.http_headers(&self.era.clone(), None, None);
        // A failed write shows again, with a better reason, at the next request.
        let _ = self.send(&msg, false, None, headers);
    }

    /// The HTTP headers of a message in `era`: `MCP-Protocol-Version` once a version from
    /// 2025-06-18 on is negotiated; with 2026-07-28 also `Mcp-Method` and `Mcp-Name` on
    /// requests (`method` is given for requests only).
    fn http_headers(
        &self,
        era: &Era,
        method: Option<&str>,
        name: Option<&str>,
    ) -> Vec<(String, String)> {
        if matches!(self.link, Link::Stdio(_)) {
            return Vec::new();
        }
        let mut headers = Vec::new();
        match era {
            Era::Modern(version) => {
                headers.push(("MCP-Protocol-Version".to_string(), version.clone()));
                if let Some(method) = method {
                    headers.push(("Mcp-Method".to_string(), header_value(method)));
                    if let ("tools/call" | "resources/read" | "prompts/get", Some(name)) =
                        (method, name)
                    {
                        headers.push(("Mcp-Name".to_string(), header_value(name)));
                    }
                }
            }
            Era::Legacy(version) if version.as_str() >= "2025-06-18" => {
                headers.push(("MCP-Protocol-Version".to_string(), version.clone()));
            }
            Era::Legacy(_) | Era::Unknown => {}
        }
        headers
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
                    if let Link::Stdio(writer) = &mut self.link {
                        *writer = None;
                    }
                    return Wait::WriteFailed;
                }
                Ok(Incoming::Exchange { id, error, fatal }) => {
                    return Wait::Exchange { id, error, fatal }
                }
                Ok(Incoming::Endpoint(endpoint)) => return Wait::Endpoint(endpoint),
                Err(RecvTimeoutError::Timeout) => return Wait::TimedOut,
            }
        }
    }

    /// Records and answers what the server wrote until `grace` passes or stdout closes (over
    /// HTTP: or no exchange is left).
    fn drain(&mut self, grace: Duration) {
        let deadline = Instant::now() + grace;
        let mut note = String::new();
        loop {
            let wait = match &self.link {
                Link::Stdio(_) => deadline,
                Link::Http(_) => deadline.min(Instant::now() + Duration::from_millis(50)),
            };
            match self.next(wait) {
                Wait::Line(line) => {
                    self.handle_line(line, &[], &mut note);
                }
                Wait::WriteFailed | Wait::Exchange { .. } | Wait::Endpoint(_) => {}
                Wait::Closed => return,
                Wait::TimedOut => {
                    let idle = match &self.link {
                        Link::Http(client) => !client.busy(),
                        Link::Stdio(_) => false,
                    };
                    if idle || Instant::now() >= deadline {
                        self.record_received(&mut note);
                        return;
                    }
                }
            }
        }
    }

    /// Records the lines already received when the final drain ends: [`Session::next`] puts
    /// its deadline first, so without this what the reader had already read (in `queued`, or
    /// in batches waiting in the channel) would be silently missing from the transcript
    /// whenever the grace ran out first: with a short grace, or a loaded machine. Bounded
    /// without waiting: at most the [`EVENT_QUEUE`] batches the channel holds are taken, so a
    /// server still flooding stdout cannot keep the session here (a fuzz finding, mcp_stdio).
    fn record_received(&mut self, note: &mut String) {
        for _ in 0..EVENT_QUEUE {
            match self.events.try_recv() {
                Ok(Incoming::Lines(lines)) => self.queued.extend(lines),
                Ok(_) => {}
                Err(_) => break,
            }
        }
        while let Some(line) = self.queued.pop_front() {
            self.handle_line(line, &[], note);
        }
    }

    /// Records one line from the server and acts on it: answers server requests, skips
    /// notifications and malformed messages. Returns the answer to one of `pending`, and whose.
    fn handle_line(
        &mut self,
        line: Line,
        pending: &[u64],
        note: &mut String,
    ) -> Option<(u64, Answer)> {
        if let Some(meta) = line.meta {
            self.record(meta.dir, line.bytes, false, line.truncated, !meta.solicited);
            return None;
        }
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
        let answer_at = messages
            .iter()
            .position(|m| response_id(m).is_some_and(|id| pending.contains(&id)));
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
                Kind::Request { id, method } => {
                    self.answer_server_request(id, method, msg.get("params"))
                }
                Kind::Response { id } => {
                    if let Some(expected) = pending.first() {
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
        let id = response_id(&msg)?;
        Some((id, parse_answer(msg)))
    }

    /// Answers a request the server sent to glassbox (see [`crate::surface`]): at most
    /// [`surface::MAX_REQUESTS_PER_PHASE`] of one phase get a real answer.
    fn answer_server_request(&mut self, id: Value, method: String, params: Option<&Value>) {
        self.count_request(&method);
        self.asked_in_phase = self.asked_in_phase.saturating_add(1);
        let answer = if self.asked_in_phase > surface::MAX_REQUESTS_PER_PHASE {
            Err((
                -32603,
                format!(
                    "glassbox answers at most {} requests of one call",
                    surface::MAX_REQUESTS_PER_PHASE
                ),
            ))
        } else {
            self.answer_of(&method, params)
                .ok_or((-32601, "glassbox does not provide this".to_string()))
        };
        let reply = match answer {
            Ok(result) => json!({"jsonrpc": "2.0", "id": id, "result": result}),
            Err((code, message)) => json!({"jsonrpc": "2.0", "id": id, "error": {
                "code": code,
                "message": message,
            }}),
        };
        let headers = self.http_headers(&self.era.clone(), None, None);
        // If the server stopped reading stdin, the reply is dropped; the pending request
        // notices.
        let _ = self.send(&reply, true, None, headers);
    }

    /// Counts a request of the server's by its method, in at most 64 methods (a name longer
    /// than 64 bytes counted under one name for all such).
    fn count_request(&mut self, method: &str) {
        let key = if method.len() <= 64 {
            method.to_string()
        } else {
            "(a method name longer than 64 bytes)".to_string()
        };
        if self.asked.len() < 64 || self.asked.contains_key(&key) {
            *self.asked.entry(key).or_default() += 1;
        }
    }

    /// The answer to the server's request `method` ([`surface::answer`]), noting a declined
    /// elicitation (the exercise is then made again, accepting).
    fn answer_of(&mut self, method: &str, params: Option<&Value>) -> Option<Value> {
        let marker = self.cfg.input_marker.clone().unwrap_or_default();
        let answer = surface::answer(
            method,
            params,
            &self.cfg.roots,
            self.elicit,
            &marker,
            &self.phase,
            &mut self.elicited,
        )?;
        if method == "elicitation/create" && answer["action"] == "decline" {
            self.declined = true;
        }
        Some(answer)
    }

    /// Hands a message to the transport and records it (over HTTP, with its request head).
    fn send(
        &mut self,
        msg: &Value,
        noise: bool,
        carries: Option<u64>,
        headers: Vec<(String, String)>,
    ) -> Result<(), String> {
        let line = serde_json::to_vec(msg).map_err(|e| e.to_string())?;
        match &mut self.link {
            Link::Stdio(writer) => {
                let mut wire = Vec::with_capacity(line.len() + 1);
                wire.extend_from_slice(&line);
                wire.push(b'\n');
                let Some(writer) = writer else {
                    return Err(self
                        .write_error
                        .clone()
                        .unwrap_or_else(|| "stdin is closed".into()));
                };
                // A burst (a server that sends many requests at once) can fill the queue
                // faster than the writer empties it into the pipe: wait for it a little, and
                // give up only on a server that does not read its stdin.
                let until = Instant::now() + WRITE_FAILURE_GRACE;
                let sent = loop {
                    match writer.try_send(wire) {
                        Err(TrySendError::Full(back)) if Instant::now() < until => {
                            wire = back;
                            std::thread::sleep(Duration::from_millis(1));
                        }
                        other => break other,
                    }
                };
                match sent {
                    Ok(()) => {}
                    Err(TrySendError::Full(_)) => {
                        return Err("the server is not reading its stdin".into())
                    }
                    Err(TrySendError::Disconnected(_)) => {
                        return Err(self
                            .write_error
                            .clone()
                            .unwrap_or_else(|| "stdin is closed".into()))
                    }
                }
            }
            Link::Http(client) => {
                let deadline = match carries {
                    Some(_) => (Instant::now() + self.cfg.request_timeout).min(self.deadline),
                    None => Instant::now() + self.cfg.request_timeout,
                };
                let head = client.post(Outgoing {
                    body: &line,
                    carries,
                    keep_session_id: msg.get("method") == Some(&json!("initialize")),
                    resumable: !matches!(self.era, Era::Modern(_)),
                    headers,
                    deadline,
                })?;
                self.record(Direction::ClientToServer, head, false, false, noise);
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
        self.asked_in_phase = 0;
        self.phase = phase.clone();
        self.hooks.set_phase(phase);
    }
}

/// A value for `Mcp-Name` or `Mcp-Param-*`: as is when it is plain visible ASCII, otherwise
/// (or when it looks like the sentinel) `=?base64?...?=`.
pub(crate) fn header_value(value: &str) -> String {
    let sentinel = value.starts_with("=?base64?") && value.ends_with("?=");
    if http::is_header_value(value) && !value.is_empty() && !sentinel {
        value.to_string()
    } else {
        format!(
            "=?base64?{}?=",
            base64::engine::general_purpose::STANDARD.encode(value)
        )
    }
}

/// The `Mcp-Param-{Name}` headers of a 2026-07-28 `tools/call`: each property of the input
/// schema, reached through `properties` only, that carries `x-mcp-header`, with the value the
/// arguments have at the same path (strings, integers in JavaScript's safe range, booleans;
/// absent, null or other values send no header). Invalid names and repeated names are skipped.
pub(crate) fn param_headers(schema: &Value, arguments: &Value) -> Vec<(String, String)> {
    const SAFE: i64 = (1 << 53) - 1;
    let mut out = Vec::new();
    let mut seen = HashSet::new();
    let mut stack = vec![(schema, Some(arguments), 0usize)];
    while let Some((schema, value, depth)) = stack.pop() {
        let Some(Value::Object(props)) = schema.get("properties") else {
            continue;
        };
        for (key, sub) in props {
            let value = value.and_then(|v| v.get(key));
            if let Some(Value::String(name)) = sub.get("x-mcp-header") {
                let text = match value {
                    Some(Value::String(s)) => Some(header_value(s)),
                    Some(Value::Bool(b)) => Some(b.to_string()),
                    Some(Value::Number(n)) => n
                        .as_i64()
                        .filter(|i| (-SAFE..=SAFE).contains(i))
                        .map(|i| i.to_string()),
                    _ => None,
                };
                if let Some(text) = text {
                    if http::is_token(name)
                        && seen.insert(name.to_ascii_lowercase())
                        && out.len() < 64
                    {
                        out.push((format!("Mcp-Param-{name}"), text));
                    }
                }
            }
            if depth < 16 {
                stack.push((sub, value, depth + 1));
            }
        }
    }
    out
}

/// Why an answer to our request is not a result.
#[derive(Debug)]
pub(crate) enum AnswerError {
    /// A JSON-RPC error response.
    Rpc {
        text: String,
        code: Option<i64>,
        data: Option<Value>,
    },
    /// Not a valid response.
    Invalid(&'static str),
    /// The HTTP exchange ended without the answer.
    Http(String),
    /// The HTTP server could not be reached.
    Connect(String),
}

impl AnswerError {
    fn into_fail(self, step: &str) -> Fail {
        let step = step.to_string();
        match self {
            AnswerError::Rpc { text, .. } => Fail::Rpc { step, error: text },
            AnswerError::Invalid(what) => Fail::Invalid(format!("{step} {what}")),
            AnswerError::Http(error) => Fail::Http { step, error },
            AnswerError::Connect(error) => Fail::Connect { step, error },
        }
    }
}

fn parse_answer(msg: Value) -> Result<Value, AnswerError> {
    let Value::Object(mut obj) = msg else {
        return Err(AnswerError::Invalid("answer is not an object"));
    };
    match (obj.remove("result"), obj.remove("error")) {
        (Some(_), Some(_)) => Err(AnswerError::Invalid("answer has both result and error")),
        (Some(result), None) => Ok(result),
        (None, Some(error)) => Err(AnswerError::Rpc {
            text: describe_error(&error),
            code: error.get("code").and_then(Value::as_i64),
            data: error.get("data").cloned(),
        }),
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
                arguments_note: None,
                arguments: None,
                result: CallResult::NotCalled,
                calls: Vec::new(),
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

    /// Fuzz finding (mcp_stdio, crash-455dd58c): lines the reader had already read were lost
    /// from the transcript when the final drain's grace ran out before they were taken.
    #[test]
    fn lines_already_read_are_recorded_when_the_grace_runs_out() {
        #[derive(Default)]
        struct Hooks(std::cell::RefCell<Vec<TranscriptEntry>>);
        impl SessionHooks for Hooks {
            fn set_phase(&self, _: Phase) {}
            fn transcript(&self, entry: TranscriptEntry) {
                self.0.borrow_mut().push(entry);
            }
            fn now_ns(&self) -> u64 {
                0
            }
        }
        // One batch (every line ends with LF and fits the reader's buffer): the last two lines
        // are queued when the session ends, after the answer to its last request (id 3).
        let stdout = concat!(
            r#"{"jsonrpc":"2.0","id":1,"result":{"protocolVersion":"2025-11-25","#,
            r#""capabilities":{"tools":{}},"serverInfo":{"name":"s","version":"1"}}}"#,
            "\n",
            r#"{"jsonrpc":"2.0","id":2,"result":{"tools":[]}}"#,
            "\n",
            r#"{"jsonrpc":"2.0","id":3,"result":{"tools":[]}}"#,
            "\n",
            "not json\n",
            r#"{"jsonrpc":"2.0","method":"notifications/message","params":{}}"#,
            "\n",
        );
        let cfg = SessionConfig {
            protocol_version: "2025-11-25".into(),
            shutdown_grace: Duration::ZERO,
            ..SessionConfig::default()
        };
        let hooks = Hooks::default();
        let summary = crate::run_session(
            std::io::sink(),
            std::io::Cursor::new(stdout.as_bytes().to_vec()),
            &cfg,
            &hooks,
        );
        assert!(summary.completed, "{:?}", summary.failure);
        let from_server: Vec<String> = hooks
            .0
            .into_inner()
            .into_iter()
            .filter(|e| e.dir == Direction::ServerToClient)
            .map(|e| String::from_utf8_lossy(&e.raw.0).into_owned())
            .collect();
        let expected: Vec<&str> = stdout.lines().collect();
        assert_eq!(from_server, expected);
        assert_eq!(summary.non_json_lines, 1);
    }

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
    fn header_values_and_mirrored_parameters() {
        assert_eq!(header_value("get_weather"), "get_weather");
        assert_eq!(
            header_value("Hello, 世界"),
            "=?base64?SGVsbG8sIOS4lueVjA==?="
        );
        assert_eq!(header_value(" padded "), "=?base64?IHBhZGRlZCA=?=");
        assert_eq!(header_value("line1\nline2"), "=?base64?bGluZTEKbGluZTI=?=");
        assert_eq!(
            header_value("=?base64?literal?="),
            "=?base64?PT9iYXNlNjQ/bGl0ZXJhbD89?="
        );
        let schema = json!({"type": "object", "properties": {
            "region": {"type": "string", "x-mcp-header": "Region"},
            "n": {"type": "integer", "x-mcp-header": "N"},
            "big": {"type": "integer", "x-mcp-header": "Big"},
            "bad": {"type": "string", "x-mcp-header": "Bad Name"},
            "missing": {"type": "string", "x-mcp-header": "Missing"},
            "null": {"type": "string", "x-mcp-header": "Null"},
            "nested": {"type": "object", "properties": {
                "flag": {"type": "boolean", "x-mcp-header": "Flag"}}},
            "list": {"type": "array", "items": {"type": "object", "properties": {
                "x": {"type": "string", "x-mcp-header": "X"}}}},
        }});
        let args = json!({"region": "us-west1", "n": -7, "big": 9007199254740992u64,
            "bad": "v", "null": null, "nested": {"flag": true}, "list": [{"x": "y"}]});
        let mut got = param_headers(&schema, &args);
        got.sort();
        let want: Vec<(String, String)> = [
            ("Mcp-Param-Flag", "true"),
            ("Mcp-Param-N", "-7"),
            ("Mcp-Param-Region", "us-west1"),
        ]
        .iter()
        .map(|(a, b)| (a.to_string(), b.to_string()))
        .collect();
        assert_eq!(got, want);
        // A name repeated (case-insensitively) is sent once.
        let schema = json!({"properties": {
            "a": {"type": "string", "x-mcp-header": "Same"},
            "b": {"type": "string", "x-mcp-header": "same"}}});
        let got = param_headers(&schema, &json!({"a": "1", "b": "2"}));
        assert_eq!(got.len(), 1, "{got:?}");
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
