//! `tool-definition-drift`: tools and server instructions that change during an audit.
//!
//! A client shows the model what the server lists at connection; a server that lists one thing
//! first and another later (a "rug pull": a harmless description, then a poisoned one once it
//! was approved), or one thing when it can reach the network and another when it cannot, is
//! telling the model different stories. This check compares what the server said, as recorded
//! in the MCP transcripts (`transcript.jsonl`, and `transcript-denied.jsonl` of the denied
//! run), never a fixture's or a tool's name or text:
//!
//! - every tool's definition, by name: its `description`, `inputSchema` and `annotations`,
//!   as canonical JSON ([`canonical_json`]), across all pages of a `tools/list` (followed by
//!   `nextCursor`);
//! - the server's `instructions`, from its answer to `initialize` (or, with protocol
//!   2026-07-28, `server/discover`).
//!
//! Compared: the first and the last complete `tools/list` of each run (glassbox lists the tools
//! again at the end of a session), the first and the last handshake answer of each run, and the
//! first complete listing and handshake of the capture run with those of the denied run. A
//! finding names the tool and what changed (`description`, `inputSchema`, `annotations`, a tool
//! added or removed); a tool listed twice under one name compares as the whole list of its
//! definitions. Reformatting is not a change: keys in another order, other whitespace, other
//! escapes of the same string, `1.0` for `1` canonicalize alike. A listing with a page that
//! was not answered (an error, a timeout, a line cut at the reader's limit) is not compared
//! (a note says so): a missing page is not a removed tool.
//!
//! Not an accusation (a server may have reasons to change its tools); severity high: what the
//! model was told is not what it is told now.
//!
//! For comparisons across audits, [`hashes`] gives each tool's definition hash and the
//! instructions' hash for one run's transcript (see [`Hashes`]).

use crate::{Channel, CheckInfo, Evaluation, Evaluator};
use glassbox_model::{
    printable, truncate, Direction, Event, NetworkMode, Phase, Severity, TranscriptEntry,
};
use serde_json::Value;
use sha2::{Digest, Sha256};
use std::collections::{BTreeMap, HashMap};

pub(crate) const INFO: CheckInfo = CheckInfo {
    id: "tool-definition-drift",
    version: 1,
    claim: "tool definitions and server instructions stay the same throughout the audit",
    severity: Severity::High,
    channels: &[Channel::McpTranscript],
    accuses: "",
    sources: &["drift.rs"],
};

/// The parts of a tool's definition that are compared, in the order a change lists them.
const FIELDS: [&str; 3] = ["description", "inputSchema", "annotations"];

/// Findings listed at most; past that, one line counts the rest.
const MAX_FINDINGS: usize = 100;

/// Characters of a tool name shown in a summary.
const NAME_CHARS: usize = 80;

// ---------------------------------------------------------------------------------------------
// Canonical JSON

/// `v` as canonical JSON: object keys sorted (by their UTF-8 bytes, i.e. by code point), no
/// whitespace, strings escaped only where JSON requires it (`"`, `\`, control characters: the
/// short forms `\b \t \n \f \r`, else `\u00xx`; everything else as UTF-8), integers as
/// integers, and a number with a fraction of zero that is exactly an integer written as that
/// integer (`1.0` → `1`). Two texts that parse to the same JSON value give the same canonical
/// JSON, whatever their key order, whitespace or escapes.
///
/// Written here rather than taken from a JCS crate (RFC 8785: `serde_jcs`, `json-canon`): the
/// hashes are kept for comparisons across audits, so their input must not move with a
/// dependency's version, and this is forty lines; the rules are JCS's except that keys sort by
/// code point rather than by UTF-16 unit (the same order outside the astral planes) and
/// non-integer numbers use Rust's shortest round-trip form without exponent.
pub fn canonical_json(v: &Value) -> String {
    let mut out = String::new();
    write_canonical(v, &mut out);
    out
}

fn write_canonical(v: &Value, out: &mut String) {
    match v {
        Value::Null => out.push_str("null"),
        Value::Bool(b) => out.push_str(if *b { "true" } else { "false" }),
        Value::Number(n) => write_number(n, out),
        Value::String(s) => write_string(s, out),
        Value::Array(items) => {
            out.push('[');
            for (i, item) in items.iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_canonical(item, out);
            }
            out.push(']');
        }
        Value::Object(map) => {
            let mut entries: Vec<(&String, &Value)> = map.iter().collect();
            entries.sort_unstable_by(|a, b| a.0.as_bytes().cmp(b.0.as_bytes()));
            out.push('{');
            for (i, (k, item)) in entries.into_iter().enumerate() {
                if i > 0 {
                    out.push(',');
                }
                write_string(k, out);
                out.push(':');
                write_canonical(item, out);
            }
            out.push('}');
        }
    }
}

fn write_number(n: &serde_json::Number, out: &mut String) {
    use std::fmt::Write;
    if let Some(u) = n.as_u64() {
        let _ = write!(out, "{u}");
    } else if let Some(i) = n.as_i64() {
        let _ = write!(out, "{i}");
    } else if let Some(f) = n.as_f64() {
        // Integers are exact in an f64 up to 2^53: within that, `1.0` is the integer 1.
        const EXACT: f64 = 9_007_199_254_740_992.0;
        if f.fract() == 0.0 && f.abs() <= EXACT {
            let _ = write!(out, "{}", f as i64);
        } else {
            let _ = write!(out, "{f}");
        }
    }
}

fn write_string(s: &str, out: &mut String) {
    use std::fmt::Write;
    out.push('"');
    for c in s.chars() {
        match c {
            '"' => out.push_str("\\\""),
            '\\' => out.push_str("\\\\"),
            '\u{8}' => out.push_str("\\b"),
            '\t' => out.push_str("\\t"),
            '\n' => out.push_str("\\n"),
            '\u{c}' => out.push_str("\\f"),
            '\r' => out.push_str("\\r"),
            c if (c as u32) < 0x20 => {
                let _ = write!(out, "\\u{:04x}", c as u32);
            }
            c => out.push(c),
        }
    }
    out.push('"');
}

fn sha256_hex(bytes: &[u8]) -> String {
    Sha256::digest(bytes)
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

// ---------------------------------------------------------------------------------------------
// What a run's transcript says

/// One definition of a tool: the canonical JSON of each compared field ([`FIELDS`], `None`
/// when the tool has no such key).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Definition {
    fields: [Option<String>; 3],
}

impl Definition {
    fn of(tool: &serde_json::Map<String, Value>) -> Definition {
        Definition {
            fields: FIELDS.map(|k| tool.get(k).map(canonical_json)),
        }
    }

    /// The canonical JSON of the definition: the object of the name and the fields present
    /// (each field is canonical already; the keys in canonical order: `annotations`,
    /// `description`, `inputSchema`, `name`).
    fn canonical(&self, name: &str) -> String {
        let [description, input_schema, annotations] = &self.fields;
        let mut out = String::from("{");
        for (key, value) in [
            ("annotations", annotations),
            ("description", description),
            ("inputSchema", input_schema),
        ] {
            if let Some(value) = value {
                write_string(key, &mut out);
                out.push(':');
                out.push_str(value);
                out.push(',');
            }
        }
        write_string("name", &mut out);
        out.push(':');
        write_string(name, &mut out);
        out.push('}');
        out
    }
}

/// The tools of one listing (every page), by name, each with its definitions in the order
/// listed (more than one when the server listed the name twice).
#[derive(Clone, Debug, Default)]
struct Listing {
    tools: BTreeMap<String, Vec<Definition>>,
    /// Pages asked for and not (successfully) answered.
    unanswered: usize,
}

/// One answer to `initialize` or `server/discover`: the canonical JSON of its `instructions`
/// (`None`: it had none).
#[derive(Clone, Debug, PartialEq, Eq)]
struct Handshake {
    instructions: Option<String>,
}

/// What one run's transcript says the server presented.
#[derive(Debug, Default)]
struct Presented {
    listings: Vec<Listing>,
    handshakes: Vec<Handshake>,
}

/// What a request of the client was.
enum Asked {
    /// A page of the listing at this index.
    ToolsPage(usize),
    Handshake,
}

/// The JSON-RPC messages of a transcript line: one message, or each of a batch.
fn messages(v: Value) -> Vec<serde_json::Map<String, Value>> {
    match v {
        Value::Object(m) => vec![m],
        Value::Array(items) => items
            .into_iter()
            .filter_map(|m| match m {
                Value::Object(m) => Some(m),
                _ => None,
            })
            .collect(),
        _ => Vec::new(),
    }
}

impl Presented {
    /// Reads the client's requests and the server's answers (matched by id) of one run, over
    /// stdio (one message per line) or HTTP (request and response bodies are the lines marked
    /// `json`; the request heads are not).
    fn of(transcript: &[TranscriptEntry]) -> Presented {
        let mut p = Presented::default();
        let mut asked: HashMap<String, Asked> = HashMap::new();
        for e in transcript {
            if !e.json || e.truncated {
                continue;
            }
            let Ok(v) = serde_json::from_slice::<Value>(e.raw.as_slice()) else {
                continue;
            };
            for msg in messages(v) {
                let Some(id) = msg.get("id").filter(|id| !id.is_null()) else {
                    continue; // a notification
                };
                let id = canonical_json(id);
                let method = msg.get("method").and_then(Value::as_str);
                match (e.dir, method) {
                    (Direction::ClientToServer, Some("tools/list")) => {
                        let cursor = msg
                            .get("params")
                            .and_then(|params| params.get("cursor"))
                            .is_some_and(|c| !c.is_null());
                        if !cursor || p.listings.is_empty() {
                            p.listings.push(Listing::default());
                        }
                        let at = p.listings.len() - 1;
                        p.listings[at].unanswered += 1;
                        asked.insert(id, Asked::ToolsPage(at));
                    }
                    (Direction::ClientToServer, Some("initialize" | "server/discover")) => {
                        asked.insert(id, Asked::Handshake);
                    }
                    // A response from the server (a request of its own has a method).
                    (Direction::ServerToClient, None) => {
                        let Some(what) = asked.remove(&id) else {
                            continue;
                        };
                        let Some(Value::Object(result)) = msg.get("result") else {
                            continue; // an error: the page stays unanswered
                        };
                        match what {
                            Asked::ToolsPage(at) => p.page(at, result),
                            Asked::Handshake => p.handshakes.push(Handshake {
                                instructions: result.get("instructions").map(canonical_json),
                            }),
                        }
                    }
                    _ => {}
                }
            }
        }
        p
    }

    fn page(&mut self, at: usize, result: &serde_json::Map<String, Value>) {
        let listing = &mut self.listings[at];
        let items = match result.get("tools") {
            Some(Value::Array(items)) => items.as_slice(),
            None | Some(Value::Null) => &[],
            // Not a list of tools: the page did not say what was listed.
            Some(_) => return,
        };
        listing.unanswered -= 1;
        for item in items {
            // A tool without a name cannot be called: it is not a definition a client uses.
            let Value::Object(tool) = item else { continue };
            let Some(Value::String(name)) = tool.get("name") else {
                continue;
            };
            listing
                .tools
                .entry(name.clone())
                .or_default()
                .push(Definition::of(tool));
        }
    }

    /// The complete listings (every page answered), in order.
    fn complete(&self) -> Vec<&Listing> {
        self.listings.iter().filter(|l| l.unanswered == 0).collect()
    }
}

// ---------------------------------------------------------------------------------------------
// Hashes for comparisons across audits

/// What a server presented in one run, hashed: for comparing audits of the same server.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Hashes {
    /// Tool name → SHA-256 (lowercase hex) of the tool's canonical definition: the canonical
    /// JSON ([`canonical_json`]) of the object of its `name` and, when present, its
    /// `description`, `inputSchema` and `annotations`. A name listed more than once hashes
    /// the canonical definitions in the order listed, one per line. From the first complete
    /// `tools/list` of the run (what a client sees when it connects).
    pub tools: BTreeMap<String, String>,
    /// SHA-256 (lowercase hex) of the canonical JSON of `instructions` in the first answer to
    /// `initialize` or `server/discover`; `None` when there was no such answer or it had none.
    pub instructions: Option<String>,
}

/// The [`Hashes`] of what the server presented in one run's transcript.
pub fn hashes(transcript: &[TranscriptEntry]) -> Hashes {
    let p = Presented::of(transcript);
    let tools = p
        .complete()
        .first()
        .map(|l| {
            l.tools
                .iter()
                .map(|(name, defs)| (name.clone(), definitions_hash(name, defs)))
                .collect()
        })
        .unwrap_or_default();
    let instructions = p
        .handshakes
        .first()
        .and_then(|h| h.instructions.as_deref())
        .map(|i| sha256_hex(i.as_bytes()));
    Hashes {
        tools,
        instructions,
    }
}

fn definitions_hash(name: &str, defs: &[Definition]) -> String {
    let text: Vec<String> = defs.iter().map(|d| d.canonical(name)).collect();
    sha256_hex(text.join("\n").as_bytes())
}

// ---------------------------------------------------------------------------------------------
// Comparing

/// How one tool differs between two listings.
#[derive(Debug, PartialEq, Eq)]
enum Change {
    /// Only in the later (or second) listing.
    Added,
    /// Only in the earlier (or first) listing.
    Removed,
    /// In both, with these fields different.
    Fields(Vec<&'static str>),
}

/// Every tool that differs between `a` and `b`, by name.
fn compare(a: &Listing, b: &Listing) -> Vec<(String, Change)> {
    let mut out = Vec::new();
    for (name, da) in &a.tools {
        match b.tools.get(name) {
            None => out.push((name.clone(), Change::Removed)),
            Some(db) if da == db => {}
            Some(db) => {
                let fields = match (da.as_slice(), db.as_slice()) {
                    ([x], [y]) => FIELDS
                        .iter()
                        .zip(x.fields.iter().zip(&y.fields))
                        .filter(|(_, (fx, fy))| fx != fy)
                        .map(|(k, _)| *k)
                        .collect(),
                    // Listed more than once in either: the definitions as a whole.
                    _ => vec!["definition (the name is listed more than once)"],
                };
                out.push((name.clone(), Change::Fields(fields)));
            }
        }
    }
    for name in b.tools.keys() {
        if !a.tools.contains_key(name) {
            out.push((name.clone(), Change::Added));
        }
    }
    out
}

fn tool_name(name: &str) -> String {
    format!("\"{}\"", printable(&truncate(name, NAME_CHARS)))
}

/// Whether a change of instructions says what they were and became.
fn instructions_change(a: &Handshake, b: &Handshake) -> Option<&'static str> {
    match (&a.instructions, &b.instructions) {
        (x, y) if x == y => None,
        (Some(_), None) => Some("dropped"),
        (None, Some(_)) => Some("added"),
        _ => Some("changed"),
    }
}

/// The check's findings and notes over the transcripts of the capture run (`first`, named
/// `first_name`) and the denied run (`second`, `None` when there was none).
fn evaluate(first_name: &str, first: &[TranscriptEntry], second: Option<&[TranscriptEntry]>) -> Evaluation {
    let mut summaries: Vec<String> = Vec::new();
    let mut notes: Vec<String> = Vec::new();
    let runs: Vec<(&str, Presented)> = std::iter::once((first_name, Presented::of(first)))
        .chain(second.map(|t| ("denied", Presented::of(t))))
        .collect();
    for (run, p) in &runs {
        let complete = p.complete();
        let incomplete = p.listings.len() - complete.len();
        if incomplete > 0 {
            notes.push(format!(
                "{incomplete} tools/list of the {run} run not compared: a page was not answered"
            ));
        }
        if let [first, .., last] = complete.as_slice() {
            for (name, change) in compare(first, last) {
                let name = tool_name(&name);
                summaries.push(match change {
                    Change::Added => format!(
                        "tool {name} appeared in the last tools/list of the {run} run (not in \
                         the first)"
                    ),
                    Change::Removed => format!(
                        "tool {name} disappeared from the last tools/list of the {run} run (it \
                         was in the first)"
                    ),
                    Change::Fields(f) => format!(
                        "tool {name}: {} changed between the first and the last tools/list of \
                         the {run} run",
                        f.join(", ")
                    ),
                });
            }
        }
        if let (Some(a), Some(b)) = (p.handshakes.first(), p.handshakes.last()) {
            if let Some(how) = instructions_change(a, b) {
                summaries.push(format!(
                    "server instructions {how} between the first and the last answer to \
                     initialize or server/discover of the {run} run"
                ));
            }
        }
    }
    match runs.as_slice() {
        [(a_run, a), (b_run, b)] => {
            match (a.complete().first(), b.complete().first()) {
                (Some(la), Some(lb)) => {
                    for (name, change) in compare(la, lb) {
                        let name = tool_name(&name);
                        summaries.push(match change {
                            Change::Added => format!(
                                "tool {name} listed in the {b_run} run only (first tools/list \
                                 of each run)"
                            ),
                            Change::Removed => format!(
                                "tool {name} listed in the {a_run} run only (first tools/list \
                                 of each run)"
                            ),
                            Change::Fields(f) => format!(
                                "tool {name}: {} differs between the {a_run} run and the \
                                 {b_run} run (first tools/list of each)",
                                f.join(", ")
                            ),
                        });
                    }
                }
                _ => notes.push(format!(
                    "the {a_run} run and the {b_run} run not compared: one of them has no \
                     complete tools/list"
                )),
            }
            if let (Some(ha), Some(hb)) = (a.handshakes.first(), b.handshakes.first()) {
                if let Some(how) = instructions_change(ha, hb) {
                    let how = match how {
                        "dropped" => format!("given in the {a_run} run only"),
                        "added" => format!("given in the {b_run} run only"),
                        _ => format!("differ between the {a_run} run and the {b_run} run"),
                    };
                    summaries.push(format!("server instructions {how}"));
                }
            }
        }
        _ => notes.push(
            "no denied run: only the listings of one run compared (no comparison between runs)"
                .to_string(),
        ),
    }
    let more = summaries.len().saturating_sub(MAX_FINDINGS);
    summaries.truncate(MAX_FINDINGS);
    if more > 0 {
        summaries.push(format!("{more} more changes of tool definitions (not listed)"));
    }
    let finding = |s: String| INFO.finding(s, Vec::new(), Some(Phase::List));
    Evaluation {
        findings: summaries.into_iter().map(finding).collect(),
        notes: notes.into_iter().map(finding).collect(),
    }
}

/// Everything is decided from the transcripts; events are not needed.
pub(crate) struct State(Evaluation);

pub(crate) fn start(c: &crate::Context<'_>) -> Box<dyn Evaluator> {
    // The server's runs (an install phase is a run of the installer, without a session).
    let runs: Vec<_> = c
        .manifest
        .network
        .runs
        .iter()
        .filter(|r| r.mode != NetworkMode::Install)
        .collect();
    let first_name = runs.first().map_or("capture", |r| r.mode.name());
    // The denied run's transcript, when the denied run followed the first one.
    let second = (runs.len() > 1).then_some(c.denied_transcript);
    Box::new(State(evaluate(first_name, c.transcript, second)))
}

impl Evaluator for State {
    fn event(&mut self, _: &Event) {}

    fn finish(self: Box<Self>) -> Evaluation {
        self.0
    }
}
