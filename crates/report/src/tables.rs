//! What every renderer shows, gathered once: the files touched under home, the processes, the
//! connection attempts and the flows at the network edge, grouped and counted, the calls of
//! the tools, and the words for verdicts, outcomes and call results. Every string here is
//! already printable (control and invisible format characters escaped, see [`escape`]); the
//! sections built from them are [`crate::sections`]'s, and each renderer adds only the
//! escaping its own markup needs.

use crate::escape;
use glassbox_model::{
    AuditReport, Bytes, CallResult, EventKind, Evidence, NetworkMode, Outcome, Phase, ServerExit,
    Severity, SurfaceKind, SurfaceRecord, SurfaceSummary, Verdict,
};
use std::collections::HashMap;
use std::hash::Hash;

/// Rows shown per list before "… and N more".
pub(crate) const FILES_CAP: usize = 25;
pub(crate) const PROCESSES_CAP: usize = 20;
pub(crate) const CONNECTIONS_CAP: usize = 20;
pub(crate) const FLOWS_CAP: usize = 20;
pub(crate) const TOOLS_CAP: usize = 40;
pub(crate) const FINDINGS_CAP: usize = 10;
pub(crate) const NOTES_CAP: usize = 10;
/// Methods of the server's requests named in the surface's line.
pub(crate) const ASKED_CAP: usize = 8;
/// What the surface's exercise left out, shown (one line each).
pub(crate) const CUT_CAP: usize = 10;
/// Phases shown in the timeline.
pub(crate) const TIMINGS_CAP: usize = 60;
/// Event (or flow) ids shown per finding or row.
pub(crate) const IDS_CAP: usize = 8;
/// Phases shown per row.
const PHASES_CAP: usize = 3;
/// Characters of an argv or a path shown per row.
pub(crate) const WIDE: usize = 160;
/// Characters of a tool name shown.
pub(crate) const NAME: usize = 80;
/// Characters of a tool description shown (Markdown and HTML).
pub(crate) const DESCRIPTION: usize = 400;

// x86_64 open flags (the recorder's numeric `flags`).
const O_ACCMODE: u64 = 0o3;
const O_CREAT: u64 = 0o100;
const O_TRUNC: u64 = 0o1000;
const O_APPEND: u64 = 0o2000;
const O_DIRECTORY: u64 = 0o200000;

/// Rows grouped by key in order of first appearance, with counts and distinct phases.
pub(crate) struct Rows<K, V> {
    index: HashMap<K, usize>,
    pub(crate) rows: Vec<Row<V>>,
}

/// One group of [`Rows`].
pub(crate) struct Row<V> {
    /// How many events fell in it.
    pub(crate) count: usize,
    /// Their distinct phases, in order of first appearance.
    pub(crate) phases: Vec<Phase>,
    pub(crate) data: V,
}

impl<K: Hash + Eq, V> Rows<K, V> {
    fn new() -> Self {
        Rows {
            index: HashMap::new(),
            rows: Vec::new(),
        }
    }

    fn add(&mut self, key: K, phase: &Phase, init: impl FnOnce() -> V) -> &mut V {
        let n = match self.index.get(&key) {
            Some(&n) => n,
            None => {
                self.rows.push(Row {
                    count: 0,
                    phases: Vec::new(),
                    data: init(),
                });
                self.index.insert(key, self.rows.len() - 1);
                self.rows.len() - 1
            }
        };
        let row = &mut self.rows[n];
        row.count += 1;
        if !row.phases.contains(phase) {
            row.phases.push(phase.clone());
        }
        &mut row.data
    }
}

/// Up to [`PHASES_CAP`] phases, printable, then "+N phases".
pub(crate) fn phases(ps: &[Phase]) -> String {
    let mut shown: Vec<String> = ps
        .iter()
        .take(PHASES_CAP)
        .map(|p| escape::text(&p.to_string()))
        .collect();
    if ps.len() > PHASES_CAP {
        shown.push(format!("+{} phases", ps.len() - PHASES_CAP));
    }
    shown.join(", ")
}

/// Up to [`IDS_CAP`] ids, then "+N".
pub(crate) fn ids(ids: &[u64]) -> Vec<String> {
    let mut v: Vec<String> = ids.iter().take(IDS_CAP).map(u64::to_string).collect();
    if ids.len() > IDS_CAP {
        v.push(format!("+{}", ids.len() - IDS_CAP));
    }
    v
}

/// "event 3" / "events 3, 4, +2" / "" for event ids; `word` is "event" or "flow".
pub(crate) fn id_list(word: &str, list: &[u64]) -> String {
    let shown = ids(list);
    match shown.len() {
        0 => String::new(),
        1 => format!("{word} {}", shown[0]),
        _ => format!("{word}s {}", shown.join(", ")),
    }
}

/// Lexical normalization of an absolute path: no `.`, `..`, or repeated slashes.
fn normalize(path: &[u8]) -> Vec<Vec<u8>> {
    let mut comps: Vec<Vec<u8>> = Vec::new();
    for c in path.split(|&b| b == b'/') {
        match c {
            b"" | b"." => {}
            b".." => {
                comps.pop();
            }
            _ => comps.push(c.to_vec()),
        }
    }
    comps
}

/// What a program did to one file.
#[derive(Default)]
pub(crate) struct FileUse {
    read: bool,
    write: bool,
    list: bool,
    stat: bool,
}

impl FileUse {
    /// `read+stat`, `write`...
    pub(crate) fn text(&self) -> String {
        let mut v = Vec::new();
        for (on, word) in [
            (self.read, "read"),
            (self.write, "write"),
            (self.list, "list"),
            (self.stat, "stat"),
        ] {
            if on {
                v.push(word);
            }
        }
        v.join("+")
    }
}

/// The files opened or stat'ed under the sandbox home, per normalized path: the path shown as
/// `~/…` (printable, not truncated) and what was done. `None` when the manifest records no home.
pub(crate) fn files(ev: &Evidence) -> Option<Vec<Row<(String, FileUse)>>> {
    let home = normalize(ev.manifest.sandbox.home.as_bytes());
    if home.is_empty() {
        return None;
    }
    let mut rows: Rows<Vec<Vec<u8>>, (String, FileUse)> = Rows::new();
    for e in &ev.events {
        let (path, use_) = match &e.kind {
            EventKind::Open {
                syscall,
                path,
                flags,
                ..
            } => {
                let write = syscall == "creat"
                    || flags & O_ACCMODE != 0
                    || flags & (O_CREAT | O_TRUNC | O_APPEND) != 0;
                let u = if write {
                    "write"
                } else if flags & O_DIRECTORY != 0 {
                    "list"
                } else {
                    "read"
                };
                (path, u)
            }
            EventKind::Stat { path, .. } => (path, "stat"),
            _ => continue,
        };
        let comps = normalize(path.as_slice());
        if !comps.starts_with(&home) {
            continue;
        }
        let rel = &comps[home.len()..];
        let shown = if rel.is_empty() {
            "~".to_string()
        } else {
            format!("~/{}", escape::bytes(&Bytes(rel.join(&b'/'))))
        };
        let (_, u) = rows.add(comps.clone(), &e.phase, || (shown, FileUse::default()));
        match use_ {
            "write" => u.write = true,
            "list" => u.list = true,
            "stat" => u.stat = true,
            _ => u.read = true,
        }
    }
    Some(rows.rows)
}

/// One process: pid, parent pid, and its argv as one printable line (cut at [`WIDE`]).
pub(crate) struct Process {
    pub(crate) pid: i32,
    pub(crate) ppid: i32,
    pub(crate) argv: String,
}

/// The programs executed, per pid and argv.
pub(crate) fn processes(ev: &Evidence) -> Vec<Row<Process>> {
    let mut rows: Rows<(i32, Vec<Bytes>), Process> = Rows::new();
    for e in &ev.events {
        let EventKind::Exec { path, argv, .. } = &e.kind else {
            continue;
        };
        rows.add((e.pid, argv.clone()), &e.phase, || {
            let shown = if argv.is_empty() {
                format!("{} (empty argv)", escape::bytes(path))
            } else {
                escape::argv(argv, WIDE)
            };
            Process {
                pid: e.pid,
                ppid: e.ppid,
                argv: shown,
            }
        });
    }
    rows.rows
}

/// The connect, send-with-destination and bind calls, per destination and call: (destination,
/// call), both printable.
pub(crate) fn connections(ev: &Evidence) -> Vec<Row<(String, String)>> {
    let mut rows: Rows<(String, String), (String, String)> = Rows::new();
    for e in &ev.events {
        let (syscall, addr) = match &e.kind {
            EventKind::Connect { syscall, addr, .. } => (escape::text(syscall), addr),
            EventKind::Bind { addr, .. } => ("bind".to_string(), addr),
            _ => continue,
        };
        let key = (escape::text(&addr.to_string()), syscall);
        rows.add(key.clone(), &e.phase, || key);
    }
    rows.rows
}

/// Flows at the edge with the same run, protocol and destination.
pub(crate) struct FlowGroup {
    pub(crate) mode: NetworkMode,
    /// `tcp`, `udp`, `dns`...
    pub(crate) protocol: String,
    /// Printable: the DNS question, or the address with the names behind it.
    pub(crate) destination: String,
    pub(crate) flows: u64,
    pub(crate) packets: u64,
    pub(crate) bytes: u64,
    /// The flows' ids.
    pub(crate) ids: Vec<u64>,
    /// What the edge read of them, printable: `2 HTTP exchanges read (inside TLS)`, or `not
    /// read: why` (empty: what a flow's payload sample holds, as before the edge answered).
    pub(crate) read: String,
    exchanges: u64,
    tls_read: u64,
    /// Flows whose client sent its ClientHello and nothing else ([`glassbox_checks::hello_only`]).
    hello_only: u64,
    unread: Vec<String>,
}

/// One network run, a row of every format's network table.
pub(crate) struct RunRow {
    pub(crate) mode: &'static str,
    pub(crate) packets: u64,
    pub(crate) flows: usize,
    pub(crate) isolation_verified: bool,
    /// Calls with an IP destination off loopback that no flow at the edge took (the checks'
    /// pairing of calls and flows, redone from the bundle: `glassbox_checks::links`).
    pub(crate) calls_without_flow: usize,
}

/// The network runs, in the manifest's order.
pub(crate) fn runs(ev: &Evidence) -> Vec<RunRow> {
    let runs = &ev.manifest.network.runs;
    let mut flows = ev.flows.clone();
    let links = glassbox_checks::links::link(&ev.events, &mut flows, runs);
    runs.iter()
        .zip(links.without_flow)
        .map(|(r, (_, without))| RunRow {
            mode: r.mode.name(),
            packets: r.counters.packets,
            flows: ev.flows.iter().filter(|f| f.mode == r.mode).count(),
            isolation_verified: r.isolation_verified,
            calls_without_flow: without.len(),
        })
        .collect()
}

/// The flows grouped by run, protocol and destination, in order of first appearance.
pub(crate) fn flows(ev: &Evidence) -> Vec<FlowGroup> {
    let mut index: HashMap<(NetworkMode, String, String), usize> = HashMap::new();
    let mut groups: Vec<FlowGroup> = Vec::new();
    for f in &ev.flows {
        let destination = match &f.dns {
            Some(q) => format!("{} ({})", escape::bytes(&q.name), escape::text(&q.qtype)),
            None => {
                let mut d = escape::text(&f.dst.to_string());
                if let Some(n) = &f.dns_name {
                    d.push_str(&format!(" = {}", escape::bytes(n)));
                }
                if let Some(sni) = &f.sni {
                    d.push_str(&format!(" SNI {}", escape::bytes(sni)));
                }
                if let Some(h) = f.http.as_ref().and_then(|h| h.host.as_ref()) {
                    d.push_str(&format!(" Host {}", escape::bytes(h)));
                }
                d
            }
        };
        let protocol = serde_json::to_value(f.protocol)
            .ok()
            .and_then(|v| v.as_str().map(String::from))
            .unwrap_or_default();
        let key = (f.mode, protocol.clone(), destination.clone());
        let n = *index.entry(key).or_insert_with(|| {
            groups.push(FlowGroup {
                mode: f.mode,
                protocol,
                destination,
                flows: 0,
                packets: 0,
                bytes: 0,
                ids: Vec::new(),
                read: String::new(),
                exchanges: 0,
                tls_read: 0,
                hello_only: 0,
                unread: Vec::new(),
            });
            groups.len() - 1
        });
        let g = &mut groups[n];
        g.flows += 1;
        g.packets += f.packets_out;
        g.bytes += f.bytes_out;
        g.ids.push(f.id);
        g.exchanges += f.exchanges.len() as u64 + f.exchanges_cut;
        if f.tls
            .as_ref()
            .is_some_and(|t| t.outcome == glassbox_model::TlsOutcome::Read)
        {
            g.tls_read += 1;
        }
        if glassbox_checks::hello_only(f) {
            g.hello_only += 1;
        }
        if let Some(why) = f
            .unread
            .as_ref()
            .filter(|_| !glassbox_checks::hello_only(f))
        {
            let why = escape::text(why);
            if !g.unread.contains(&why) {
                g.unread.push(why);
            }
        }
    }
    for g in &mut groups {
        g.read = match (g.unread.first(), g.exchanges) {
            (Some(why), _) if g.unread.len() > 1 => {
                format!("NOT READ: {why} (and {} more reasons)", g.unread.len() - 1)
            }
            (Some(why), _) => format!("NOT READ: {why}"),
            (None, 0) if g.tls_read > 0 => "TLS read in clear".into(),
            (None, 0) if g.hello_only > 0 => {
                "its ClientHello read, nothing sent after it (the handshake did not complete)"
                    .into()
            }
            (None, 0) => String::new(),
            (None, n) => format!(
                "{n} HTTP exchange(s) read{}",
                if g.tls_read > 0 { " inside TLS" } else { "" }
            ),
        };
    }
    groups
}

/// The verdict in words.
pub(crate) fn verdict(v: Verdict) -> &'static str {
    match v {
        Verdict::Clean => "CLEAN",
        Verdict::Flagged => "FLAGGED",
        Verdict::Withheld => "WITHHELD (awaiting review)",
        Verdict::Inconclusive => "INCONCLUSIVE",
    }
}

/// The outcome as `report.json` spells it.
pub(crate) fn outcome(o: Outcome) -> &'static str {
    match o {
        Outcome::Pass => "pass",
        Outcome::Flag => "flag",
        Outcome::Unverified => "unverified",
        Outcome::NotObserved => "not-observed",
        Outcome::Inconclusive => "inconclusive",
        Outcome::Retracted => "retracted",
    }
}

/// Whether the outcome makes a claim about the server, in words.
pub(crate) fn claim_status(o: Outcome) -> &'static str {
    match o {
        Outcome::Pass => "claim holds",
        Outcome::Flag => "claim broken",
        Outcome::Unverified | Outcome::NotObserved | Outcome::Inconclusive => "no claim",
        Outcome::Retracted => "withdrawn",
    }
}

/// A call result in words.
pub(crate) fn call_result(r: CallResult) -> &'static str {
    match r {
        CallResult::Ok => "ok",
        CallResult::ToolError => "tool error",
        CallResult::RejectedArguments => "rejected arguments",
        CallResult::TransportFailure => "transport failure at the edge",
        CallResult::RpcError => "rpc error",
        CallResult::Timeout => "timeout",
        CallResult::NotCalled => "not called",
    }
}

/// Outcomes and their counts in words: `ok` for one call, `3 calls: ok 2, timeout 1`.
pub(crate) fn outcomes(counts: &[(CallResult, usize)]) -> String {
    let total: usize = counts.iter().map(|(_, n)| n).sum();
    match counts {
        [] => call_result(CallResult::NotCalled).into(),
        [(r, 1)] => call_result(*r).into(),
        _ => {
            let each: Vec<String> = counts
                .iter()
                .map(|(r, n)| format!("{} {n}", call_result(*r)))
                .collect();
            format!("{total} calls: {}", each.join(", "))
        }
    }
}

/// The audit's calls counted by outcome, in words; `None` when it made none.
pub(crate) fn call_totals(report: &AuditReport) -> Option<String> {
    // Derived from the tools, as `call_outcomes` is (reports made before it have none).
    let counts: Vec<(CallResult, usize)> = AuditReport::count_calls(&report.tools)
        .into_iter()
        .collect();
    let total: usize = counts.iter().map(|(_, n)| n).sum();
    (total > 0).then(|| {
        let tools = report.tools.iter().filter(|t| t.called).count();
        let each: Vec<String> = counts
            .iter()
            .map(|(r, n)| format!("{} {n}", call_result(*r)))
            .collect();
        let calls = if total == 1 { "call" } else { "calls" };
        let of = if tools == 1 { "tool" } else { "tools" };
        format!("{total} {calls} of {tools} {of}: {}", each.join(", "))
    })
}

/// One call of a tool called more than once, for the report's calls table: its phase (what
/// findings name), what its arguments chose, its outcome, and the retry and error it notes.
pub(crate) struct CallRow {
    pub phase: String,
    pub label: String,
    pub outcome: &'static str,
    pub note: String,
}

/// The calls of every tool called more than once, in the order made per tool, printable.
pub(crate) fn call_rows(report: &AuditReport) -> Vec<CallRow> {
    let mut rows = Vec::new();
    for t in report.tools.iter().filter(|t| t.calls.len() > 1) {
        for c in &t.calls {
            let mut note = Vec::new();
            if let Some(r) = c.retry_of {
                note.push(format!("retry of #{r}"));
            }
            if let Some(e) = &c.error {
                note.push(escape::truncate(&escape::text(e), WIDE));
            }
            rows.push(CallRow {
                phase: escape::truncate(
                    &escape::text(&Phase::call(&t.name, c.k).to_string()),
                    NAME,
                ),
                label: escape::truncate(&escape::text(&c.label), NAME),
                outcome: call_result(c.result),
                note: note.join("; "),
            });
        }
    }
    rows
}

/// `1 call`, `2 calls`.
fn count(n: usize, one: &str, many: &str) -> String {
    format!("{n} {}", if n == 1 { one } else { many })
}

/// The surface an audit exercised in one line, printable: the tools called and their calls,
/// the resources read, the templates expanded and their reads, the prompts got, the
/// completions requested; then what the server asked of glassbox, by method (elicitations
/// first, at most [`ASKED_CAP`] methods named), and the canaries given to its elicitations.
pub(crate) fn surface_line(s: &SurfaceSummary) -> String {
    let mut parts = Vec::new();
    parts.push(if s.tools_listed == 0 {
        "no tools listed".to_string()
    } else {
        format!(
            "{} of {} called ({})",
            s.tools_called,
            count(s.tools_listed, "tool", "tools"),
            count(s.calls, "call", "calls")
        )
    });
    if s.resources_listed > 0 {
        parts.push(format!(
            "{} of {} read",
            s.resources_read,
            count(s.resources_listed, "resource", "resources")
        ));
    }
    if s.templates_listed > 0 {
        parts.push(format!(
            "{} of {} expanded ({})",
            s.templates_expanded,
            count(s.templates_listed, "template", "templates"),
            count(s.template_reads, "read", "reads")
        ));
    }
    if s.prompts_listed > 0 {
        parts.push(format!(
            "{} of {} got",
            s.prompts_got,
            count(s.prompts_listed, "prompt", "prompts")
        ));
    }
    if s.resources_listed + s.templates_listed + s.prompts_listed == 0 {
        parts.push("no resources, templates or prompts listed".into());
    }
    if s.completions > 0 {
        parts.push(format!(
            "{} requested",
            count(s.completions as usize, "completion", "completions")
        ));
    }
    let canaries = count(s.secrets_elicited, "canary", "canaries");
    // Elicitations first: a server cannot push them out of the line with other methods.
    const ELICIT: &str = "elicitation/create";
    let mut asked: Vec<String> = s
        .server_requests
        .get_key_value(ELICIT)
        .into_iter()
        .chain(s.server_requests.iter().filter(|(m, _)| *m != ELICIT))
        .take(ASKED_CAP)
        .map(|(method, n)| {
            let mut a = format!("{n} {}", escape::truncate(&escape::text(method), NAME));
            if method == ELICIT {
                a.push_str(&format!(" ({canaries} given)"));
            }
            a
        })
        .collect();
    if s.server_requests.len() > ASKED_CAP {
        asked.push(format!(
            "+{} more methods",
            s.server_requests.len() - ASKED_CAP
        ));
    }
    let mut line = parts.join(", ");
    if asked.is_empty() {
        line.push_str("; the server asked nothing of glassbox");
    } else {
        line.push_str(&format!("; the server asked: {}", asked.join(", ")));
    }
    if s.secrets_elicited > 0 && !s.server_requests.contains_key(ELICIT) {
        line.push_str(&format!("; {canaries} given to elicitations"));
    }
    line
}

/// How a resource, template or prompt went, in words: `not read`, `ok` for one read, `3 reads:
/// ok 2, timeout 1` (`gets` for a prompt).
pub(crate) fn surface_outcomes(item: &SurfaceRecord) -> String {
    let (one, many) = match item.kind {
        SurfaceKind::Prompt => ("get", "gets"),
        _ => ("read", "reads"),
    };
    match item.outcomes().as_slice() {
        [] if item.kind == SurfaceKind::Prompt => "not got".into(),
        [] => "not read".into(),
        [(r, 1)] => call_result(*r).into(),
        counts => {
            let each: Vec<String> = counts
                .iter()
                .map(|(r, n)| format!("{} {n}", call_result(*r)))
                .collect();
            format!(
                "{}: {}",
                count(item.reads.len(), one, many),
                each.join(", ")
            )
        }
    }
}

/// What the table of the surface notes of an item, printable: the completions requested, the
/// first error.
pub(crate) fn surface_note(item: &SurfaceRecord) -> String {
    let mut note = Vec::new();
    if item.completions > 0 {
        note.push(count(
            item.completions as usize,
            "completion",
            "completions",
        ));
    }
    if let Some(e) = item.reads.iter().find_map(|r| r.error.as_deref()) {
        note.push(format!(
            "first error: {}",
            escape::truncate(&escape::text(e), WIDE)
        ));
    }
    note.join("; ")
}

/// The reads and gets of every resource, template and prompt exercised more than once, in the
/// order made, printable: their phases are what findings name.
pub(crate) fn read_rows(report: &AuditReport) -> Vec<CallRow> {
    let mut rows = Vec::new();
    for item in report.surface.items.iter().filter(|i| i.reads.len() > 1) {
        for r in &item.reads {
            rows.push(CallRow {
                phase: escape::truncate(&escape::text(&r.phase.to_string()), NAME),
                label: escape::truncate(&escape::text(&r.label), NAME),
                outcome: call_result(r.result),
                note: r
                    .error
                    .as_deref()
                    .map(|e| escape::truncate(&escape::text(e), WIDE))
                    .unwrap_or_default(),
            });
        }
    }
    rows
}

/// The target command, printable, cut at [`WIDE`].
pub(crate) fn command(ev: &Evidence) -> String {
    // A package is named as the user named it, with the exact version installed.
    if let Some(p) = &ev.manifest.target.package {
        let spec = match p.registry.as_str() {
            "pypi" => format!("pypi:{}=={}", p.name, p.version),
            r => format!("{r}:{}@{}", p.name, p.version),
        };
        let mut words = vec![Bytes::from(spec)];
        // The server's own arguments (after its executable).
        words.extend(
            ev.manifest
                .target
                .command
                .iter()
                .skip(1)
                .map(|a| Bytes::from(a.as_str())),
        );
        return escape::argv(&words, WIDE);
    }
    let command: Vec<Bytes> = ev
        .manifest
        .target
        .command
        .iter()
        .map(|a| Bytes::from(a.as_str()))
        .collect();
    escape::argv(&command, WIDE)
}

/// How a bare package was configured from its own documentation, in one line: where, its
/// arguments and variables, what was filled in.
pub(crate) fn readme_config(ev: &Evidence) -> Option<String> {
    let r = ev
        .manifest
        .target
        .package
        .as_ref()?
        .readme_config
        .as_ref()?;
    let mut parts = vec![format!(
        "as its own documentation configures it ({})",
        r.source
    )];
    if !r.args.is_empty() {
        parts.push(format!("arguments {}", r.args.join(" ")));
    }
    if !r.env.is_empty() {
        parts.push(format!("environment {}", r.env.join(", ")));
    }
    if !r.filled.is_empty() {
        parts.push(format!("filled in: {}", r.filled.join("; ")));
    }
    Some(escape::text(&parts.join("; ")))
}

/// The starts that stopped for lack of a setting, in one line: what each lacked and what the
/// next was given.
pub(crate) fn starts(ev: &Evidence) -> Option<String> {
    let starts = &ev.manifest.target.starts;
    if starts.is_empty() {
        return None;
    }
    let each: Vec<String> = starts
        .iter()
        .map(|s| format!("it lacked {}: given {}", s.lacked, s.supplied))
        .collect();
    Some(escape::text(&format!(
        "{} more time(s) ({})",
        starts.len(),
        each.join("; ")
    )))
}

/// The install phase of a package target, in one line: how it went and what it installed.
pub(crate) fn install(ev: &Evidence) -> Option<String> {
    let i = ev.manifest.install.as_ref()?;
    let how = if i.cached {
        format!(
            "reused the install of audit {}",
            escape::text(&i.installed_by)
        )
    } else {
        match &i.failure {
            // The verdict's reason says why, with the installer's last lines.
            Some(_) if ev.manifest.server_never_ran() => "failed (see the verdict's reason)".into(),
            Some(f) => format!("failed: {}", escape::text(f)),
            None => "installed in the sandbox (phase install)".into(),
        }
    };
    let registry = if i.registry.is_empty() {
        String::new()
    } else {
        format!("; registry {}", escape::text(&i.registry.join(", ")))
    };
    let mut s = format!("{how}; {} package(s){registry}", i.packages.len());
    let unreached: Vec<&str> = i
        .destinations
        .iter()
        .filter_map(|d| d.strip_suffix(" (captured, not reached)"))
        .collect();
    if !unreached.is_empty() {
        s.push_str(&format!(
            "; tried to reach, captured: {}",
            escape::text(&unreached.join(", "))
        ));
    }
    if !i.env.is_empty() {
        s.push_str(&format!(
            "; installer environment {}",
            escape::text(&i.env.join(" "))
        ));
    }
    Some(s)
}

/// What the network edge answered, and how much of the traffic it read: the report says the
/// network was simulated (`None` for an audit without an edge, or one recorded before the edge
/// answered).
pub(crate) fn network(ev: &Evidence) -> Option<String> {
    let n = &ev.manifest.network;
    let exchanges: usize = ev.flows.iter().map(|f| f.exchanges.len()).sum();
    let tls_read = ev
        .flows
        .iter()
        .filter(|f| {
            f.tls
                .as_ref()
                .is_some_and(|t| t.outcome == glassbox_model::TlsOutcome::Read)
        })
        .count();
    let unread = ev
        .flows
        .iter()
        .filter(|f| f.unread.is_some() && !glassbox_checks::hello_only(f))
        .count();
    let unread = match unread {
        0 => String::new(),
        n => format!("; {n} flow(s) not read (listed under Network)"),
    };
    match n.responder.as_str() {
        "ok" => {
            let ca = n
                .tls_authority
                .as_ref()
                .map(|a| {
                    format!(
                        ", TLS terminated with the audit's CA (SHA-256 {})",
                        escape::text(a.sha256.get(..16).unwrap_or(&a.sha256))
                    )
                })
                .unwrap_or_default();
            Some(format!(
                "simulated by glassbox's edge: every HTTP request answered 200 by glassbox \
                 itself{ca}; {exchanges} HTTP exchange(s) read, {tls_read} TLS session(s) read \
                 in clear{unread}"
            ))
        }
        "refuse" => Some(format!(
            "refused by glassbox's edge: TLS closed after its ClientHello, HTTP answered 503{unread}"
        )),
        _ => None,
    }
}

/// How the session went, printable.
pub(crate) fn session(ev: &Evidence) -> String {
    let s = &ev.manifest.session;
    match (&s.completed, &s.failure) {
        (true, _) => "completed".to_string(),
        (false, Some(_)) if ev.manifest.server_never_ran() => {
            "none: the server never ran (see the verdict's reason)".to_string()
        }
        (false, Some(f)) => format!("did not complete: {}", escape::text(f)),
        (false, None) => "did not complete".to_string(),
    }
}

/// How the server ended, when recorded.
pub(crate) fn server_exit(ev: &Evidence) -> Option<String> {
    Some(match ev.manifest.server_exit.as_ref()? {
        ServerExit::Exited { code } => format!("exited with status {code}"),
        ServerExit::Signaled {
            signal,
            by_glassbox: true,
        } => format!("stopped by glassbox (signal {signal})"),
        ServerExit::Signaled { signal, .. } => format!("killed by signal {signal}"),
        ServerExit::Running => "still running when recording stopped".to_string(),
    })
}

/// "N events" and lost notifications.
pub(crate) fn recorded(ev: &Evidence) -> String {
    let mut s = format!("{} events", ev.events.len());
    if ev.manifest.recorder.lost > 0 {
        s.push_str(&format!(
            ", {} notifications lost",
            ev.manifest.recorder.lost
        ));
    }
    s
}

/// The description the server gave the named tool, printable, cut at [`DESCRIPTION`].
pub(crate) fn description(ev: &Evidence, name: &str) -> Option<String> {
    ev.manifest
        .session
        .tools
        .iter()
        .find(|t| t.name == name)
        .and_then(|t| t.description.as_deref())
        .map(|d| escape::truncate(&escape::text(d), DESCRIPTION))
}

/// Nanoseconds as milliseconds with one decimal.
pub(crate) fn ms(ns: u64) -> String {
    format!("{}.{}", ns / 1_000_000, (ns / 100_000) % 10)
}

/// The severity in lower case.
pub(crate) fn severity(s: Severity) -> &'static str {
    match s {
        Severity::Info => "info",
        Severity::Medium => "medium",
        Severity::High => "high",
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_and_ms() {
        assert_eq!(id_list("event", &[]), "");
        assert_eq!(id_list("flow", &[4]), "flow 4");
        assert_eq!(
            id_list("event", &(1..=10).collect::<Vec<_>>()),
            "events 1, 2, 3, 4, 5, 6, 7, 8, +2"
        );
        assert_eq!(ms(0), "0.0");
        assert_eq!(ms(12_345_678), "12.3");
    }
}
