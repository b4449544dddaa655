//! The SARIF 2.1.0 renderer: the audit as a static-analysis log, for GitHub code scanning and
//! SARIF viewers.
//!
//! # Mapping
//!
//! One run per audit ([`crate::sarif_many`]: one log for a configuration's servers, a run each,
//! each with `automationDetails.id` `glassbox/NAME/` so that code scanning keeps them apart).
//! `tool.driver` is glassbox at the report's version (no `informationUri`). Every
//! check of the report is a rule, in the report's order, so a result's `ruleIndex` is its
//! check's index in `checks`: `id` is the check id, `name` the id in PascalCase,
//! `shortDescription` the check's claim, `properties.tags` include `security`, and
//! `properties.security-severity` is the numeric string code scanning ranks by (high `8.0`,
//! medium `5.0`, info `2.0`). The rule's properties also carry the check's version, severity,
//! outcome and reason in this run, so a check that makes no claim is never silently dropped;
//! such checks (`unverified`, `not-observed`, `inconclusive`, `retracted`) are also listed as
//! `invocations[0].toolExecutionNotifications`, with the rule they concern.
//!
//! Each finding is a result: `level` from the check's severity (high `error`, medium
//! `warning`, info `note`), `message.text` its summary with the ids of the events and flows
//! behind it, and `properties` with the check version, the accusation flag, the publication
//! status (`published` or `withheld`), the event ids, the flow ids and the phase. A check's
//! notes (what it lists without flagging) are not results; their number is in the rule's
//! properties.
//!
//! The run's `properties` say what was audited and how it ended (run id, verdict, target,
//! withheld findings, the reason of an inconclusive verdict) and, under `surface`, what of the
//! server's surface the session exercised, counted as the report's "Surface exercised" section
//! counts it ([`surface`]).
//!
//! # Locations
//!
//! Code scanning needs every result to have a location with a file and a `startLine`. The
//! evidence is the audit's bundle, declared as the `uriBaseId` [`EVIDENCE_BASE`] in
//! `originalUriBaseIds` (with the bundle's `file:` URI when its path is absolute): a result's
//! location is the line of `events.jsonl` holding the first event behind the finding, its other
//! events and its flows (`network.jsonl`) are `relatedLocations` (at most [`RELATED_CAP`]).
//! The bundle writes one event per line, in the order of `Evidence::events`, and one flow per
//! line in the order of `Evidence::flows`; the line of an event is its position there (from
//! 1), found by id. An id the evidence does not hold has no known line: the location then says
//! so in its message (and in the result's), and the primary location stands on line 1 only
//! because code scanning needs a line. A finding that names no event and no flow (a tool
//! description, an overflow count) points at the bundle's `report.json`, saying so.
//!
//! # Withheld findings
//!
//! A finding that accuses the server is not published before a person has reviewed it. The
//! caller says, per finding, what may be shown ([`Publication`]). A withheld finding is
//! written as a result saying it is withheld pending review, at the bundle's `report.json`,
//! with nothing of it: no summary, no event or flow id, no line, no phase; its fingerprint is
//! not derived from its summary either (a hash of a guessable summary would confirm a guess).
//!
//! # Fingerprints
//!
//! `partialFingerprints` holds [`FINGERPRINT_KEY`]: a SHA-256 of the check id and the finding's
//! summary with every token holding a digit replaced by `0` (pids, counts, ports, addresses,
//! sizes and hex encodings of freshly planted secrets differ between runs of the same
//! behavior; event ids are not used at all), then `:N`, the occurrence of that hash in the run,
//! as code scanning's own fingerprints do. A withheld finding's hash covers only its check id.
//!
//! # Hostile strings
//!
//! Strings from the server reach the document as JSON strings (serde_json escapes them). In
//! message text they are also made printable ([`crate::escape`]: control, bidirectional and
//! zero-width characters escaped), and every `[` and `]` (and a `\` before one) is
//! backslash-escaped, so no text can form a SARIF embedded link.

use crate::{escape, tables};
use glassbox_model::{AuditReport, CheckResult, Event, Evidence, Finding, Flow, Outcome, Severity};
use serde_json::{json, Value};
use sha2::{Digest, Sha256};
use std::cell::OnceCell;
use std::collections::HashMap;

/// The `uriBaseId` of the evidence bundle's files.
pub const EVIDENCE_BASE: &str = "EVIDENCE";

/// The `partialFingerprints` key of a result's stable identity.
pub const FINGERPRINT_KEY: &str = "glassboxFindingHash/v1";

/// Related locations per result, at most (code scanning keeps only the first hundred).
pub const RELATED_CAP: usize = 100;

/// What the log's `$schema` names.
const SCHEMA_URI: &str = "https://json.schemastore.org/sarif-2.1.0.json";

/// What may be shown of a finding.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Publication {
    /// Shown in full: not an accusation, or an accusation a reviewer accepted.
    Published,
    /// An accusation awaiting review: written as withheld, with nothing of it.
    Withheld,
    /// An accusation awaiting review, shown in full for the reviewer (`report
    /// --include-withheld`): marked withheld, not for publishing.
    WithheldShown,
}

impl Publication {
    /// For a report as an audit made it, before any review: accusations are withheld, other
    /// findings published.
    pub fn unreviewed(f: &Finding) -> Publication {
        if f.accusation {
            Publication::Withheld
        } else {
            Publication::Published
        }
    }

    fn word(self) -> &'static str {
        match self {
            Publication::Published => "published",
            Publication::Withheld | Publication::WithheldShown => "withheld",
        }
    }
}

pub(crate) fn render(
    ev: &Evidence,
    report: &AuditReport,
    publication: &dyn Fn(&Finding) -> Publication,
) -> String {
    log(vec![run(ev, report, publication, None)])
}

/// One log holding `runs`.
fn log(runs: Vec<Value>) -> String {
    let log = json!({
        "$schema": SCHEMA_URI,
        "version": "2.1.0",
        "runs": runs,
    });
    // A `Value` has only string keys and no non-finite numbers: it always serializes.
    let mut out = serde_json::to_string_pretty(&log).expect("a JSON value always serializes");
    out.push('\n');
    out
}

/// One audit of several (a configuration's servers), for [`render_many`].
#[derive(Clone, Copy)]
pub struct Run<'a> {
    /// The evidence the report was made from.
    pub evidence: &'a Evidence,
    /// The report.
    pub report: &'a AuditReport,
    /// What may be shown of each finding.
    pub publication: &'a dyn Fn(&Finding) -> Publication,
    /// The server's name in its configuration: the run's `automationDetails.id` is
    /// `glassbox/NAME/` (code scanning's category, distinct per run).
    pub name: &'a str,
}

impl std::fmt::Debug for Run<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Run")
            .field("name", &self.name)
            .field("run_id", &self.report.run_id)
            .finish_non_exhaustive()
    }
}

pub(crate) fn render_many(runs: &[Run<'_>]) -> String {
    log(runs
        .iter()
        .map(|r| run(r.evidence, r.report, r.publication, Some(r.name)))
        .collect())
}

/// One audit as a SARIF run (`name`: its server's name in a configuration of several).
fn run(
    ev: &Evidence,
    report: &AuditReport,
    publication: &dyn Fn(&Finding) -> Publication,
    name: Option<&str>,
) -> Value {
    let lines = Lines::new(ev);
    let mut seen: HashMap<String, usize> = HashMap::new();
    let mut results = Vec::new();
    let mut withheld = 0usize;
    for (index, c) in report.checks.iter().enumerate() {
        for f in &c.findings {
            let p = publication(f);
            if p != Publication::Published {
                withheld += 1;
            }
            let mut r = match p {
                Publication::Withheld => withheld_result(c, index, f),
                Publication::Published | Publication::WithheldShown => {
                    shown_result(c, index, f, p, &lines)
                }
            };
            let hash = match p {
                Publication::Withheld => fingerprint(&c.id, None),
                _ => fingerprint(&c.id, Some(&f.summary)),
            };
            let n = seen.entry(hash.clone()).or_insert(0);
            *n += 1;
            r["partialFingerprints"] = json!({ FINGERPRINT_KEY: format!("{hash}:{n}") });
            results.push(r);
        }
    }
    let mut base = json!({
        "description": {
            "text": format!(
                "the evidence bundle of run {}",
                links(&escape::text(&report.run_id))
            )
        }
    });
    if let Some(uri) = file_uri(&report.evidence_dir) {
        base["uri"] = json!(uri);
    }
    let mut properties = json!({
        "runId": escape::text(&report.run_id),
        "verdict": report.verdict,
        "target": tables::command(ev),
        "withheld": withheld,
    });
    if let Some(why) = &report.inconclusive_reason {
        properties["inconclusiveReason"] = json!(escape::text(why));
    }
    if !report.surface.is_empty() {
        properties["surface"] = surface(&report.surface);
    }
    let mut run = json!({
            "tool": {
                "driver": {
                    "name": "glassbox",
                    "version": escape::text(&report.glassbox_version),
                    "rules": report
                        .checks
                        .iter()
                        .enumerate()
                        .map(|(i, c)| rule(c, i))
                        .collect::<Vec<_>>(),
                }
            },
            "originalUriBaseIds": { EVIDENCE_BASE: base },
            "invocations": [{
                "executionSuccessful": true,
                "toolExecutionNotifications": notifications(report, withheld),
            }],
            "results": results,
            "properties": properties,
    });
    if let Some(name) = name {
        // Code scanning takes one run per category: the server's name makes it distinct.
        let id: String = escape::text(name)
            .chars()
            .map(|c| if c == '/' { '_' } else { c })
            .collect();
        run["automationDetails"] = json!({ "id": format!("glassbox/{id}/") });
        run["properties"]["server"] = json!(escape::text(name));
    }
    run
}

/// The surface the session exercised, for the run's properties: the counts of tools, resources,
/// templates and prompts listed and exercised, the reads and gets by outcome, the server's
/// requests by method (the methods printable), the canaries given to its elicitations, and
/// what the exercise left out (printable).
fn surface(s: &glassbox_model::SurfaceSummary) -> Value {
    let requests: serde_json::Map<String, Value> = s
        .server_requests
        .iter()
        .map(|(method, n)| (escape::text(method), json!(n)))
        .collect();
    let outcomes: serde_json::Map<String, Value> = s
        .read_outcomes
        .iter()
        .map(|(r, n)| {
            let key = serde_json::to_value(r)
                .ok()
                .and_then(|v| v.as_str().map(String::from))
                .unwrap_or_default();
            (key, json!(n))
        })
        .collect();
    json!({
        "toolsListed": s.tools_listed,
        "toolsCalled": s.tools_called,
        "calls": s.calls,
        "resourcesListed": s.resources_listed,
        "resourcesRead": s.resources_read,
        "templatesListed": s.templates_listed,
        "templatesExpanded": s.templates_expanded,
        "templateReads": s.template_reads,
        "promptsListed": s.prompts_listed,
        "promptsGot": s.prompts_got,
        "completions": s.completions,
        "serverRequests": requests,
        "secretsElicited": s.secrets_elicited,
        "readOutcomes": outcomes,
        "cut": s.cut.iter().map(|c| escape::text(c)).collect::<Vec<_>>(),
    })
}

/// The lines of events and flows in the bundle's files.
struct Lines<'a> {
    events: &'a [Event],
    flows: &'a [Flow],
    event_index: OnceCell<HashMap<u64, usize>>,
    flow_index: OnceCell<HashMap<u64, usize>>,
}

impl<'a> Lines<'a> {
    fn new(ev: &'a Evidence) -> Lines<'a> {
        Lines {
            events: &ev.events,
            flows: &ev.flows,
            event_index: OnceCell::new(),
            flow_index: OnceCell::new(),
        }
    }

    /// The line of `events.jsonl` holding event `id`, if the evidence holds it.
    fn event(&self, id: u64) -> Option<u64> {
        line_of(self.events, &self.event_index, id, |e| e.id)
    }

    /// The line of `network.jsonl` holding flow `id`, if the evidence holds it.
    fn flow(&self, id: u64) -> Option<u64> {
        line_of(self.flows, &self.flow_index, id, |f| f.id)
    }
}

/// The position (from 1) of the item with `id`: at once when ids count from 1 in file order
/// (as glassbox numbers them), else through an index built on first need.
fn line_of<T>(
    items: &[T],
    index: &OnceCell<HashMap<u64, usize>>,
    id: u64,
    id_of: impl Fn(&T) -> u64,
) -> Option<u64> {
    let direct = id
        .checked_sub(1)
        .and_then(|i| usize::try_from(i).ok())
        .and_then(|i| items.get(i));
    if direct.map(&id_of) == Some(id) {
        return Some(id);
    }
    let map = index.get_or_init(|| {
        let mut m = HashMap::new();
        for (i, t) in items.iter().enumerate() {
            m.entry(id_of(t)).or_insert(i);
        }
        m
    });
    map.get(&id).map(|&i| i as u64 + 1)
}

/// An event or a flow behind a finding.
struct Ref {
    file: &'static str,
    word: &'static str,
    id: u64,
    line: Option<u64>,
}

impl Ref {
    fn what(&self) -> String {
        format!("{} {}", self.word, self.id)
    }

    fn unknown(&self) -> String {
        format!(
            "{}: this evidence bundle holds no such {}, its line in {} is not known",
            self.what(),
            self.word,
            self.file
        )
    }
}

/// A location in the bundle; `line: None` leaves the region out.
fn location(file: &str, line: Option<u64>, message: String) -> Value {
    let mut physical = json!({
        "artifactLocation": { "uri": file, "uriBaseId": EVIDENCE_BASE },
    });
    if let Some(l) = line {
        physical["region"] = json!({ "startLine": l });
    }
    json!({ "physicalLocation": physical, "message": { "text": message } })
}

/// Line 1 stands in where code scanning needs a line and none is known.
const STANDS_IN: &str = "line 1 stands in, as code scanning needs a line";

fn shown_result(
    c: &CheckResult,
    index: usize,
    f: &Finding,
    p: Publication,
    lines: &Lines<'_>,
) -> Value {
    let refs: Vec<Ref> = f
        .evidence
        .iter()
        .map(|&id| Ref {
            file: "events.jsonl",
            word: "event",
            id,
            line: lines.event(id),
        })
        .chain(f.flows.iter().map(|&id| Ref {
            file: "network.jsonl",
            word: "flow",
            id,
            line: lines.flow(id),
        }))
        .collect();

    let mut text = String::new();
    match p {
        Publication::WithheldShown => {
            text.push_str("withheld until reviewed (shown for the reviewer, not for publishing): ")
        }
        _ if f.accusation => text.push_str("accusation accepted on review: "),
        _ => {}
    }
    text.push_str(&escape::text(&f.summary));
    let mut ids: Vec<String> = [
        tables::id_list("event", &f.evidence),
        tables::id_list("flow", &f.flows),
    ]
    .into_iter()
    .filter(|s| !s.is_empty())
    .collect();
    if let Some(phase) = &f.phase {
        ids.push(format!("phase {}", escape::text(&phase.to_string())));
    }
    if !ids.is_empty() {
        text.push_str(" — ");
        text.push_str(&ids.join("; "));
    }

    let primary = match refs.first() {
        Some(r) => match r.line {
            Some(l) => location(r.file, Some(l), r.what()),
            None => {
                text.push_str(&format!(" ({})", r.unknown()));
                location(r.file, Some(1), format!("{} ({STANDS_IN})", r.unknown()))
            }
        },
        None => {
            text.push_str(" (it names no event and no flow: see report.json)");
            location(
                "report.json",
                Some(1),
                format!(
                    "the finding names no event and no flow; it is recorded in report.json \
                     ({STANDS_IN})"
                ),
            )
        }
    };
    let related: Vec<Value> = refs
        .iter()
        .skip(1)
        .take(RELATED_CAP)
        .enumerate()
        .map(|(i, r)| {
            let mut l = match r.line {
                Some(line) => location(r.file, Some(line), r.what()),
                None => location(r.file, None, r.unknown()),
            };
            l["id"] = json!(i + 1);
            l
        })
        .collect();
    let left = refs.len().saturating_sub(1 + RELATED_CAP);
    if left > 0 {
        text.push_str(&format!(
            " ({left} more events and flows not listed as locations: see the result's \
             properties)"
        ));
    }

    let mut properties = json!({
        "checkVersion": f.version,
        "accusation": f.accusation,
        "publication": p.word(),
        "eventIds": f.evidence,
        "flowIds": f.flows,
    });
    if let Some(phase) = &f.phase {
        properties["phase"] = json!(escape::text(&phase.to_string()));
    }
    if p == Publication::WithheldShown {
        properties["shownForReview"] = json!(true);
    }
    let mut r = json!({
        "ruleId": escape::text(&c.id),
        "ruleIndex": index,
        "level": level(c.severity),
        "message": { "text": links(&text) },
        "locations": [primary],
        "properties": properties,
    });
    if !related.is_empty() {
        r["relatedLocations"] = Value::Array(related);
    }
    r
}

fn withheld_result(c: &CheckResult, index: usize, f: &Finding) -> Value {
    json!({
        "ruleId": escape::text(&c.id),
        "ruleIndex": index,
        "level": level(c.severity),
        "message": {
            "text": links(&format!(
                "withheld until a person has reviewed it: a finding of {} that accuses the \
                 server; nothing of it is published before the review (glassbox review list)",
                escape::text(&c.id)
            ))
        },
        "locations": [location(
            "report.json",
            Some(1),
            format!(
                "withheld: the events and flows behind this finding are not shown until it is \
                 reviewed ({STANDS_IN})"
            ),
        )],
        "properties": {
            "checkVersion": f.version,
            "accusation": f.accusation,
            "publication": Publication::Withheld.word(),
        },
    })
}

fn rule(c: &CheckResult, index: usize) -> Value {
    let id = escape::text(&c.id);
    let claim = escape::text(&c.claim);
    let severity = tables::severity(c.severity);
    let mut properties = json!({
        "tags": ["security", "mcp", "glassbox"],
        "precision": precision(c.outcome),
        "security-severity": security_severity(c.severity),
        "version": c.version,
        "severity": severity,
        "outcome": tables::outcome(c.outcome),
        "claimStatus": tables::claim_status(c.outcome),
        "findings": c.findings.len(),
        "notes": c.notes.len(),
    });
    if let Some(why) = &c.reason {
        properties["reason"] = json!(escape::text(why));
    }
    json!({
        "id": id,
        "name": pascal(&c.id, index),
        "shortDescription": { "text": claim },
        "fullDescription": {
            "text": format!(
                "glassbox check {id} v{}: when it passes, the claim \"{claim}\" holds for the \
                 run. glassbox runs the MCP server in a sandbox under a system call recorder \
                 and a network edge that every packet ends at; the check flags what it saw \
                 there. Severity: {severity}.",
                c.version
            )
        },
        "help": {
            "text": format!(
                "{id} passes when the claim \"{claim}\" holds; it flags what breaks it, each \
                 finding naming the events (events.jsonl) and network flows (network.jsonl) of \
                 the evidence bundle behind it. An outcome of not-observed, unverified or \
                 inconclusive makes no claim (the reason says why); retracted means the check \
                 version was withdrawn as defective. Findings that accuse the server \
                 (credential theft, exfiltration, poisoned descriptions) are withheld until a \
                 person reviews them: glassbox review list, review accept, review reject."
            )
        },
        "defaultConfiguration": { "level": level(c.severity) },
        "properties": properties,
    })
}

fn notifications(report: &AuditReport, withheld: usize) -> Vec<Value> {
    let mut out = Vec::new();
    if let Some(why) = &report.inconclusive_reason {
        out.push(json!({
            "level": "warning",
            "message": {
                "text": links(&format!("the audit is inconclusive: {}", escape::text(why)))
            },
        }));
    }
    if withheld > 0 {
        out.push(json!({
            "level": "note",
            "message": {
                "text": format!(
                    "{withheld} finding(s) withheld until a person has reviewed them"
                )
            },
        }));
    }
    for (index, c) in report.checks.iter().enumerate() {
        let (level, what) = match c.outcome {
            Outcome::Pass | Outcome::Flag => continue,
            Outcome::Retracted => ("note", "its claim and findings are withdrawn"),
            Outcome::Unverified | Outcome::NotObserved | Outcome::Inconclusive => {
                ("warning", "no claim is made")
            }
        };
        let mut text = format!(
            "{} v{} {}: {what}",
            escape::text(&c.id),
            c.version,
            tables::outcome(c.outcome)
        );
        if let Some(why) = &c.reason {
            text.push_str(&format!(" ({})", escape::text(why)));
        }
        out.push(json!({
            "level": level,
            "message": { "text": links(&text) },
            "associatedRule": { "id": escape::text(&c.id), "index": index },
            "properties": { "outcome": tables::outcome(c.outcome) },
        }));
    }
    out
}

fn level(s: Severity) -> &'static str {
    match s {
        Severity::High => "error",
        Severity::Medium => "warning",
        Severity::Info => "note",
    }
}

/// Code scanning's scale: 9.0 and over critical, 7.0 high, 4.0 medium, under 4.0 low.
fn security_severity(s: Severity) -> &'static str {
    match s {
        Severity::High => "8.0",
        Severity::Medium => "5.0",
        Severity::Info => "2.0",
    }
}

/// Every check is backed by controls that must make it fire (and benign ones that must not);
/// one this build has not proven is `unverified`, and its findings are less certain.
fn precision(o: Outcome) -> &'static str {
    match o {
        Outcome::Unverified => "medium",
        _ => "high",
    }
}

/// `credential-probe` → `CredentialProbe`; an id with no ASCII letter or digit → `Check{index}`.
fn pascal(id: &str, index: usize) -> String {
    let name: String = id
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .map(|w| {
            let mut cs = w.chars();
            let first = cs.next().map(|c| c.to_ascii_uppercase());
            first.into_iter().chain(cs).collect::<String>()
        })
        .collect();
    if name.is_empty() {
        format!("Check{index}")
    } else {
        name
    }
}

/// Message text made inert for SARIF's embedded links (`[text](target)`): each `[` and `]` is
/// backslash-escaped, and so is a `\` before one (so the escape cannot be undone).
fn links(s: &str) -> String {
    let mut out = String::with_capacity(s.len());
    let mut cs = s.chars().peekable();
    while let Some(c) = cs.next() {
        match c {
            '[' | ']' => {
                out.push('\\');
                out.push(c);
            }
            '\\' if matches!(cs.peek(), Some('[' | ']')) => out.push_str("\\\\"),
            _ => out.push(c),
        }
    }
    out
}

/// The summary as it would read in another run of the same behavior: every token (a run of
/// letters and digits) holding a digit becomes `0`, and whitespace runs one space.
fn normalize(summary: &str) -> String {
    fn token(t: &mut String, out: &mut String) {
        if t.chars().any(|c| c.is_ascii_digit()) {
            out.push('0');
        } else {
            out.push_str(t);
        }
        t.clear();
    }
    let mut out = String::with_capacity(summary.len());
    let mut t = String::new();
    for (i, word) in summary.split_whitespace().enumerate() {
        if i > 0 {
            out.push(' ');
        }
        for c in word.chars() {
            if c.is_alphanumeric() {
                t.push(c);
            } else {
                token(&mut t, &mut out);
                out.push(c);
            }
        }
        token(&mut t, &mut out);
    }
    out
}

/// The hex SHA-256 (first 16 bytes) of the check id and the normalized summary, or of the
/// check id alone for a withheld finding.
fn fingerprint(check: &str, summary: Option<&str>) -> String {
    let mut h = Sha256::new();
    match summary {
        Some(s) => {
            h.update(b"finding\0");
            h.update(check.as_bytes());
            h.update(b"\0");
            h.update(normalize(s).as_bytes());
        }
        None => {
            h.update(b"withheld\0");
            h.update(check.as_bytes());
        }
    }
    h.finalize()[..16]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect()
}

/// `file:` URI of an absolute directory, ending in `/`, every byte but unreserved ones and
/// `/` percent-encoded; `None` for a relative path.
fn file_uri(dir: &str) -> Option<String> {
    if !dir.starts_with('/') {
        return None;
    }
    let mut uri = String::from("file://");
    for &b in dir.trim_end_matches('/').as_bytes() {
        if b.is_ascii_alphanumeric() || matches!(b, b'-' | b'.' | b'_' | b'~' | b'/') {
            uri.push(b as char);
        } else {
            uri.push_str(&format!("%{b:02X}"));
        }
    }
    uri.push('/');
    Some(uri)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixture::{self, HOSTILE};

    fn log(ev: &Evidence, report: &AuditReport, p: &dyn Fn(&Finding) -> Publication) -> Value {
        serde_json::from_str(&render(ev, report, p)).expect("the renderer writes JSON")
    }

    fn run(v: &Value) -> &Value {
        &v["runs"][0]
    }

    fn results(v: &Value) -> &Vec<Value> {
        run(v)["results"].as_array().unwrap()
    }

    fn start_line(loc: &Value) -> Option<u64> {
        loc["physicalLocation"]["region"]["startLine"].as_u64()
    }

    fn uri(loc: &Value) -> &str {
        loc["physicalLocation"]["artifactLocation"]["uri"]
            .as_str()
            .unwrap()
    }

    /// Every string in the document, keys and values.
    fn strings(v: &Value, out: &mut Vec<String>) {
        match v {
            Value::String(s) => out.push(s.clone()),
            Value::Array(a) => a.iter().for_each(|x| strings(x, out)),
            Value::Object(o) => o.iter().for_each(|(k, x)| {
                out.push(k.clone());
                strings(x, out)
            }),
            _ => {}
        }
    }

    #[test]
    fn every_check_is_a_rule_and_every_finding_a_result() {
        let (ev, report) = fixture::normal();
        let v = log(&ev, &report, &|_| Publication::Published);
        assert_eq!(v["version"], "2.1.0");
        let driver = &run(&v)["tool"]["driver"];
        assert_eq!(driver["name"], "glassbox");
        assert_eq!(driver["version"], "0.1.0");
        assert!(driver.get("informationUri").is_none());
        let rules = driver["rules"].as_array().unwrap();
        assert_eq!(rules.len(), report.checks.len());
        for (rule, c) in rules.iter().zip(&report.checks) {
            assert_eq!(rule["id"], c.id.as_str());
            assert_eq!(rule["shortDescription"]["text"], c.claim.as_str());
            assert_eq!(rule["properties"]["security-severity"], "8.0");
            assert_eq!(rule["properties"]["outcome"], tables::outcome(c.outcome));
            assert!(rule["properties"]["tags"]
                .as_array()
                .unwrap()
                .contains(&json!("security")));
            assert!(rule["fullDescription"]["text"].as_str().unwrap().len() > 40);
            assert!(rule["help"]["text"].as_str().unwrap().len() > 40);
        }
        assert_eq!(rules[0]["name"], "CredentialProbe");
        assert_eq!(rules[3]["properties"]["precision"], "medium"); // image-swap: unverified
        assert_eq!(rules[0]["properties"]["precision"], "high");
        let rs = results(&v);
        assert_eq!(rs.len(), 2);
        assert_eq!(rs[0]["ruleId"], "credential-probe");
        assert_eq!(rs[0]["ruleIndex"], 0);
        assert_eq!(rs[0]["level"], "error");
        assert_eq!(rs[1]["ruleId"], "canary-exfiltration");
        assert_eq!(rs[1]["ruleIndex"], 1);
        assert_eq!(
            rs[0]["message"]["text"],
            "read + stat of ~/.ssh/id_rsa (planted secret) during call:get_weather — \
             events 3, 4, 5; phase call:get_weather"
        );
        assert_eq!(rs[0]["properties"]["eventIds"], json!([3, 4, 5]));
        assert_eq!(rs[0]["properties"]["publication"], "published");
        assert_eq!(rs[0]["properties"]["checkVersion"], 1);
        assert_eq!(rs[0]["properties"]["accusation"], false);
        // Published after review: said so, in full.
        assert!(rs[1]["message"]["text"]
            .as_str()
            .unwrap()
            .starts_with("accusation accepted on review: sent ~/.ssh/id_rsa"));
        assert_eq!(rs[1]["properties"]["flowIds"], json!([1, 2]));
    }

    #[test]
    fn locations_are_the_lines_of_the_events_and_flows() {
        let (ev, report) = fixture::normal();
        let v = log(&ev, &report, &|_| Publication::Published);
        let base = &run(&v)["originalUriBaseIds"][EVIDENCE_BASE];
        assert_eq!(base["uri"], "file:///var/lib/glassbox/run-42/");
        let r = &results(&v)[0];
        let primary = &r["locations"][0];
        assert_eq!(uri(primary), "events.jsonl");
        assert_eq!(
            primary["physicalLocation"]["artifactLocation"]["uriBaseId"],
            EVIDENCE_BASE
        );
        assert_eq!(start_line(primary), Some(3));
        let related: Vec<(String, Option<u64>)> = r["relatedLocations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| (uri(l).to_string(), start_line(l)))
            .collect();
        assert_eq!(
            related,
            [
                ("events.jsonl".to_string(), Some(4)),
                ("events.jsonl".to_string(), Some(5))
            ]
        );
        // Event 9 and flows 1, 2.
        let r = &results(&v)[1];
        assert_eq!(start_line(&r["locations"][0]), Some(9));
        let related: Vec<(&str, Option<u64>)> = r["relatedLocations"]
            .as_array()
            .unwrap()
            .iter()
            .map(|l| (uri(l), start_line(l)))
            .collect();
        assert_eq!(
            related,
            [("network.jsonl", Some(1)), ("network.jsonl", Some(2))]
        );
    }

    #[test]
    fn lines_follow_the_order_of_the_bundle_not_the_ids() {
        let (mut ev, mut report) = fixture::normal();
        // Ids that do not count from 1 (a bundle's events in another numbering): the line is
        // the position, found by id.
        for e in &mut ev.events {
            e.id += 100;
        }
        report.checks[0].findings[0].evidence = vec![105, 103, 999];
        let v = log(&ev, &report, &|_| Publication::Published);
        let r = &results(&v)[0];
        assert_eq!(start_line(&r["locations"][0]), Some(5));
        let related = r["relatedLocations"].as_array().unwrap();
        assert_eq!(start_line(&related[0]), Some(3));
        // An event the evidence does not hold: no line, and said so.
        assert_eq!(start_line(&related[1]), None);
        assert!(related[1]["message"]["text"]
            .as_str()
            .unwrap()
            .contains("event 999: this evidence bundle holds no such event"));

        // When even the first event is unknown, line 1 stands in and the message says so.
        report.checks[0].findings[0].evidence = vec![7777];
        let v = log(&ev, &report, &|_| Publication::Published);
        let r = &results(&v)[0];
        assert_eq!(start_line(&r["locations"][0]), Some(1));
        let text = r["message"]["text"].as_str().unwrap();
        assert!(
            text.contains("its line in events.jsonl is not known"),
            "{text}"
        );
        assert!(r["locations"][0]["message"]["text"]
            .as_str()
            .unwrap()
            .contains("line 1 stands in"));
    }

    #[test]
    fn a_finding_without_events_points_at_the_report() {
        let (ev, mut report) = fixture::normal();
        report.checks[0].findings[0].evidence.clear();
        let v = log(&ev, &report, &|_| Publication::Published);
        let r = &results(&v)[0];
        assert_eq!(uri(&r["locations"][0]), "report.json");
        assert_eq!(start_line(&r["locations"][0]), Some(1));
        assert!(r.get("relatedLocations").is_none());
        assert!(r["message"]["text"]
            .as_str()
            .unwrap()
            .contains("it names no event and no flow"));
    }

    #[test]
    fn related_locations_are_capped() {
        let (ev, mut report) = fixture::normal();
        report.checks[0].findings[0].evidence = (1..=300).collect();
        let v = log(&ev, &report, &|_| Publication::Published);
        let r = &results(&v)[0];
        assert_eq!(r["relatedLocations"].as_array().unwrap().len(), RELATED_CAP);
        assert!(r["message"]["text"]
            .as_str()
            .unwrap()
            .contains("(199 more events and flows not listed as locations"));
        assert_eq!(r["properties"]["eventIds"].as_array().unwrap().len(), 300);
    }

    #[test]
    fn withheld_findings_show_nothing_of_themselves() {
        let (ev, report) = fixture::normal();
        let v = log(&ev, &report, &Publication::unreviewed);
        let rs = results(&v);
        assert_eq!(rs.len(), 2);
        let w = &rs[1];
        assert_eq!(w["ruleId"], "canary-exfiltration");
        assert_eq!(w["properties"]["publication"], "withheld");
        assert_eq!(w["properties"]["accusation"], true);
        assert!(w["properties"].get("eventIds").is_none());
        assert!(w["properties"].get("flowIds").is_none());
        assert!(w["properties"].get("phase").is_none());
        assert!(w.get("relatedLocations").is_none());
        assert_eq!(uri(&w["locations"][0]), "report.json");
        assert_eq!(start_line(&w["locations"][0]), Some(1));
        assert!(w["message"]["text"]
            .as_str()
            .unwrap()
            .starts_with("withheld until a person has reviewed it"));
        let mut all = Vec::new();
        strings(w, &mut all);
        for s in &all {
            assert!(!s.contains("id_rsa"), "{s}");
            assert!(!s.contains("api.example.com"), "{s}");
            assert!(!s.contains("get_weather"), "{s}");
        }
        // Its fingerprint is not made from its summary.
        let fp = w["partialFingerprints"][FINGERPRINT_KEY].as_str().unwrap();
        assert_eq!(
            fp,
            format!("{}:1", fingerprint("canary-exfiltration", None))
        );
        assert_ne!(
            fp,
            format!(
                "{}:1",
                fingerprint(
                    "canary-exfiltration",
                    Some(&report.checks[1].findings[0].summary)
                )
            )
        );
        // The run says how many are withheld.
        assert_eq!(run(&v)["properties"]["withheld"], 1);
        let notes = run(&v)["invocations"][0]["toolExecutionNotifications"]
            .as_array()
            .unwrap();
        assert!(notes
            .iter()
            .any(|n| n["message"]["text"]
                == "1 finding(s) withheld until a person has reviewed them"));
    }

    #[test]
    fn withheld_shown_to_the_reviewer_is_marked() {
        let (ev, report) = fixture::normal();
        let v = log(&ev, &report, &|f| {
            if f.accusation {
                Publication::WithheldShown
            } else {
                Publication::Published
            }
        });
        let w = &results(&v)[1];
        assert_eq!(w["properties"]["publication"], "withheld");
        assert_eq!(w["properties"]["shownForReview"], true);
        assert!(w["message"]["text"].as_str().unwrap().starts_with(
            "withheld until reviewed (shown for the reviewer, not for publishing): sent"
        ));
        assert_eq!(start_line(&w["locations"][0]), Some(9));
    }

    #[test]
    fn checks_that_make_no_claim_are_notified() {
        let (ev, report) = fixture::normal();
        let v = log(&ev, &report, &|_| Publication::Published);
        let notes = run(&v)["invocations"][0]["toolExecutionNotifications"]
            .as_array()
            .unwrap();
        let about: Vec<(&str, u64, &str)> = notes
            .iter()
            .filter_map(|n| {
                Some((
                    n["associatedRule"]["id"].as_str()?,
                    n["associatedRule"]["index"].as_u64()?,
                    n["message"]["text"].as_str()?,
                ))
            })
            .collect();
        assert_eq!(
            about,
            [
                (
                    "image-swap",
                    3,
                    "image-swap v1 unverified: no claim is made (no positive control passed \
                     in this build)"
                ),
                (
                    "honeytoken-ground-truth",
                    4,
                    "honeytoken-ground-truth v1 not-observed: no claim is made (fanotify is \
                     not available)"
                ),
            ]
        );
        assert_eq!(run(&v)["invocations"][0]["executionSuccessful"], true);
    }

    #[test]
    fn fingerprints_are_stable_across_runs_of_the_same_finding() {
        let (ev, report) = fixture::normal();
        let fp = |report: &AuditReport| -> Vec<String> {
            results(&log(&ev, report, &|_| Publication::Published))
                .iter()
                .map(|r| {
                    r["partialFingerprints"][FINGERPRINT_KEY]
                        .as_str()
                        .unwrap()
                        .to_string()
                })
                .collect()
        };
        let first = fp(&report);
        // Another run: other event ids, other pids and counts and addresses in the summary.
        let mut again = report.clone();
        again.run_id = "run-43".into();
        again.checks[0].findings[0].evidence = vec![17, 18];
        let mut other = report.clone();
        other.checks[0].findings[0].summary =
            "read + stat of ~/.aws/credentials (planted secret) during call:get_weather".into();
        assert_eq!(fp(&again), first);
        assert_ne!(fp(&other)[0], first[0]);
        assert_eq!(
            normalize("pid 4123 sent 517 bytes to 198.18.0.7:443  (capture run)"),
            normalize("pid 99 sent 12 bytes to 198.18.3.1:80 (capture run)")
        );
        assert_eq!(normalize("a  b\tc"), "a b c");
        assert!(first[0].ends_with(":1"), "{}", first[0]);
        // Two findings alike count apart.
        let mut twice = report.clone();
        let f = twice.checks[0].findings[0].clone();
        twice.checks[0].findings.push(f);
        let t = fp(&twice);
        assert_eq!(t[0], first[0]);
        assert_eq!(t[1], first[0].replace(":1", ":2"));
    }

    #[test]
    fn hostile_strings_cannot_escape_or_link() {
        let (ev, report) = fixture::hostile();
        let text = render(&ev, &report, &|_| Publication::Published);
        let v: Value = serde_json::from_str(&text).expect("valid JSON whatever the strings");
        // The raw document has no control character and no bidi override: serde_json escapes
        // the controls, and printable() the format characters.
        assert!(
            !text
                .chars()
                .any(|c| (c.is_control() && c != '\n') || c == '\u{202e}'),
            "raw control or bidi character in the document"
        );
        let rs = results(&v);
        assert_eq!(rs.len(), 1 + HOSTILE.len());
        // The hostile check id is the rule id (a JSON string), its name a safe identifier.
        let rules = run(&v)["tool"]["driver"]["rules"].as_array().unwrap();
        assert_eq!(rules[1]["id"], escape::text(&fixture::evil()));
        assert_eq!(rs[0]["ruleId"], rules[0]["id"]);
        assert!(rules[1]["name"]
            .as_str()
            .unwrap()
            .chars()
            .all(|c| c.is_ascii_alphanumeric()));
        let mut all = Vec::new();
        strings(&v, &mut all);
        for s in &all {
            assert!(!s.contains('\u{1b}') && !s.contains('\u{202e}'), "{s:?}");
        }
        // Every message: no raw line break, and no bracket that is not escaped.
        let mut messages: Vec<&str> = rs
            .iter()
            .map(|r| r["message"]["text"].as_str().unwrap())
            .collect();
        for n in run(&v)["invocations"][0]["toolExecutionNotifications"]
            .as_array()
            .unwrap()
        {
            messages.push(n["message"]["text"].as_str().unwrap());
        }
        for m in &messages {
            assert!(!m.contains('\n') && !m.contains('\r'), "{m:?}");
            let cs: Vec<char> = m.chars().collect();
            for (i, c) in cs.iter().enumerate() {
                if matches!(c, '[' | ']') {
                    assert!(i > 0 && cs[i - 1] == '\\', "unescaped bracket in {m:?}");
                }
            }
        }
        // The hostile phase and summary are there, made printable.
        let first = messages[0];
        assert!(first.contains("\\u{1b}\\[2J"), "{first}");
        assert!(first.contains("\\u{202e}gpj.exe"), "{first}");
        assert!(first.contains("<script>alert(1)</script>"), "{first}");
        assert!(first.contains("\\[x\\](javascript:alert(1))"), "{first}");
        // The hostile evidence directory is percent-encoded in the base URI.
        let base = run(&v)["originalUriBaseIds"][EVIDENCE_BASE]["uri"]
            .as_str()
            .unwrap();
        assert!(
            base.starts_with("file:///var/lib/glassbox/%3Cscript%3E"),
            "{base}"
        );
        assert!(base
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || b"-._~/:%".contains(&b)));
        // The hostile run id and reason are printable in the run's properties.
        assert!(!run(&v)["properties"]["runId"]
            .as_str()
            .unwrap()
            .contains('\n'));
    }

    #[test]
    fn the_run_counts_the_surface_exercised() {
        let (ev, report) = fixture::normal();
        let v = log(&ev, &report, &|_| Publication::Published);
        assert_eq!(
            run(&v)["properties"]["surface"],
            json!({
                "toolsListed": 2,
                "toolsCalled": 1,
                "calls": 1,
                "resourcesListed": 1,
                "resourcesRead": 1,
                "templatesListed": 1,
                "templatesExpanded": 1,
                "templateReads": 2,
                "promptsListed": 1,
                "promptsGot": 0,
                "completions": 1,
                "serverRequests": {"elicitation/create": 1, "sampling/createMessage": 2},
                "secretsElicited": 1,
                "readOutcomes": {"ok": 2, "rpc_error": 1},
                "cut": ["the calls' budget ran out: 1 prompt got fewer gets than its plan"],
            })
        );
        // A report made before the surface was recorded says nothing of it.
        let old = AuditReport {
            surface: Default::default(),
            ..report
        };
        let v = log(&ev, &old, &|_| Publication::Published);
        assert!(run(&v)["properties"].get("surface").is_none());
        // The server's methods and the cut's words are printable.
        let (ev, report) = fixture::hostile();
        let v = log(&ev, &report, &|_| Publication::Published);
        let s = &run(&v)["properties"]["surface"];
        let evil = escape::text(&fixture::evil());
        assert_eq!(s["serverRequests"][evil.as_str()], 3);
        assert_eq!(s["cut"][0], evil.as_str());
    }

    #[test]
    fn links_and_uris() {
        assert_eq!(links("[x](1)"), "\\[x\\](1)");
        assert_eq!(links("a\\[b"), "a\\\\\\[b");
        assert_eq!(links("a\\b"), "a\\b");
        assert_eq!(file_uri("relative/dir"), None);
        assert_eq!(file_uri("/a b/ü/"), Some("file:///a%20b/%C3%BC/".into()));
        assert_eq!(pascal("credential-probe", 0), "CredentialProbe");
        assert_eq!(pascal("<>", 4), "Check4");
    }
}
