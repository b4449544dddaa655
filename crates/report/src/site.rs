//! The static site: every published audit of a store, and what they say together.
//!
//! [`Site::add`] renders one audit's page (the [`html()`](crate::html()) page, with a line of
//! navigation on top) and keeps a small summary of it, so a caller can write the pages one by
//! one without holding every audit's evidence at once; [`Site::finish`] then renders
//! `index.html` and `coverage.html`:
//!
//! - `index.html`: every audit (target, version when known, publisher, date, verdict, why an
//!   inconclusive one is inconclusive, a link to its page, most recent first), the statistics across servers, and the claims of
//!   retracted check versions, shown as retracted;
//! - `coverage.html`: the coverage ledger (the labelled examples behind each check) and the
//!   recorder's blind spots, from `docs/recorder.md`.
//!
//! # Statistics
//!
//! A *server* is a target at a version (a local command line: in the folder it ran in); when
//! it was audited more than once, its most recent audit stands for it. A server *made no external connection* when its audit recorded a
//! network run (capture or denied) and no flow at all reached glassbox's edge in those runs (a
//! server with no recorded run is counted apart, as not observed: no run, no claim). Flows of
//! an install phase (the package registry) are not the server's. The *hosts contacted* are
//! the names behind the flows (the DNS question, else the name the edge's DNS handed the
//! address out for, else the TLS SNI, else the HTTP Host, else the address), ranked by how
//! many *publishers* reached them ([`publisher`]): two servers of one vendor calling their own
//! backend count once. Local command lines name no vendor: each folder they ran in counts as
//! a publisher of its own.
//!
//! # The same rules as the audit page
//!
//! Every page is self-contained: an inline style sheet, no script, no image, no external
//! resource, and the same Content-Security-Policy. Every string from a server or the store is
//! made printable and HTML-escaped; the only links are relative links to the site's own pages
//! (`index.html`, `coverage.html`, `audit-ID.html`, where ID is the store's integer id).

use crate::escape;
use crate::html::{end_table, esc, table, CSP};
use crate::tables::{self, NAME, WIDE};
pub use glassbox_model::CoverageRow;
use glassbox_model::{AuditReport, Evidence, FlowProtocol, NetworkMode, Outcome, SockAddr};
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

/// The recorder's documentation, whose blind-spot section the coverage page shows.
const RECORDER_DOC: &str = include_str!("../../../docs/recorder.md");

/// The publisher of a command line that runs no registry package.
const LOCAL: &str = "local";

/// Characters of an inconclusive audit's reason shown on the index (its page has it whole).
const REASON: usize = 300;

/// Hosts listed on the index, at most.
const HOSTS_CAP: usize = 50;

/// One audit to publish.
#[derive(Debug)]
pub struct Audit<'a> {
    /// Its id in the store: its page is `audit-ID.html`.
    pub id: i64,
    /// The target as recorded: a command line, or a package spec (`npm:…`, `pypi:…`).
    pub target: &'a str,
    /// The package version, when known.
    pub version: Option<&'a str>,
    /// When it started (RFC 3339).
    pub started_at: &'a str,
    /// Its evidence bundle.
    pub evidence: &'a Evidence,
    /// Its report as published: withheld findings withheld, rejected ones dropped, claims of
    /// retracted check versions withdrawn.
    pub report: &'a AuditReport,
}

/// One file of the site.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Page {
    /// Its file name (no directory part).
    pub name: String,
    /// The HTML document.
    pub html: String,
}

/// What the index keeps of an audit.
#[derive(Clone, Debug)]
struct Summary {
    id: i64,
    target: String,
    version: Option<String>,
    started_at: String,
    verdict: glassbox_model::Verdict,
    /// Why it is inconclusive, when it is.
    inconclusive: Option<String>,
    publisher: String,
    /// The folder it ran in, for a local command line (which names no package).
    cwd: Option<String>,
    /// Whether a capture or denied run was recorded.
    observed: bool,
    /// The hosts its flows went to.
    hosts: BTreeSet<String>,
    /// Retracted checks: id, version, reason.
    retracted: Vec<(String, u32, String)>,
}

/// The site being built.
#[derive(Debug, Default)]
pub struct Site {
    audits: Vec<Summary>,
}

impl Site {
    /// An empty site.
    pub fn new() -> Site {
        Site::default()
    }

    /// The page of one audit (`audit-ID.html`); the audit is listed on the index. Add audits
    /// most recent first: the first audit of a target and version stands for that server.
    pub fn add(&mut self, a: &Audit<'_>) -> Page {
        let (observed, hosts) = hosts(a.evidence);
        let retracted = a
            .report
            .checks
            .iter()
            .filter(|c| c.outcome == Outcome::Retracted)
            .map(|c| {
                (
                    c.id.clone(),
                    c.version,
                    c.reason.clone().unwrap_or_default(),
                )
            })
            .collect();
        let publisher = publisher(a.target);
        self.audits.push(Summary {
            id: a.id,
            target: a.target.to_string(),
            version: a.version.map(str::to_string),
            started_at: a.started_at.to_string(),
            verdict: a.report.verdict,
            inconclusive: (a.report.verdict == glassbox_model::Verdict::Inconclusive)
                .then(|| a.report.inconclusive_reason.clone().unwrap_or_default()),
            cwd: (publisher == LOCAL).then(|| a.evidence.manifest.target.cwd.clone()),
            publisher,
            observed,
            hosts,
            retracted,
        });
        let page = crate::html(a.evidence, a.report);
        // The audit page as `glassbox report --format html` prints it, with the site's
        // navigation as the body's first element.
        let html = match page.find("<body>\n") {
            Some(at) => {
                let at = at + "<body>\n".len();
                format!("{}{}{}", &page[..at], nav(), &page[at..])
            }
            None => page,
        };
        Page {
            name: audit_page(a.id),
            html,
        }
    }

    /// `index.html` and `coverage.html`.
    pub fn finish(self, coverage: &[CoverageRow]) -> Vec<Page> {
        vec![
            Page {
                name: "index.html".into(),
                html: index(&self.audits),
            },
            Page {
                name: "coverage.html".into(),
                html: coverage_page(coverage),
            },
        ]
    }
}

/// Who publishes the server `target` names, to count a vendor once however many of its
/// servers were audited: an npm scope (`npm:@scope/name@1.0` → `@scope`), else the npm
/// package (`npm:name`), a PyPI project (`pypi:Name==1.0` → `pypi:name`, normalized; the
/// manifest records no author), a repository owner (`github:owner/repo`,
/// `https://host/owner/repo` → `host/owner`). A command line is `local`, unless it runs a
/// registry package: `npx [-y] SPEC` (or `-p SPEC`) as npm, `uvx SPEC` (or `--from SPEC`) as
/// PyPI.
pub fn publisher(target: &str) -> String {
    let target = target.trim();
    if let Some(spec) = target.strip_prefix("npm:") {
        return npm(spec);
    }
    if let Some(spec) = target.strip_prefix("pypi:") {
        return pypi(spec);
    }
    if let Some(owner) = repository_owner(target) {
        return owner;
    }
    let mut words = target.split_whitespace();
    let program = words.next().unwrap_or("");
    let (package, via): (&[&str], fn(&str) -> String) =
        match program.rsplit('/').next().unwrap_or(program) {
            "npx" => (&["-p", "--package"], npm),
            "uvx" => (&["--from"], pypi),
            _ => return LOCAL.into(),
        };
    while let Some(w) = words.next() {
        if let Some((flag, value)) = w.split_once('=') {
            if package.contains(&flag) {
                return via(value);
            }
        } else if package.contains(&w) {
            return words.next().map_or_else(|| LOCAL.into(), via);
        } else if !w.starts_with('-') {
            return via(w);
        }
    }
    LOCAL.into()
}

/// The publisher of an npm package spec.
fn npm(spec: &str) -> String {
    if let Some(owner) = repository_owner(spec) {
        return owner;
    }
    let spec = spec.to_ascii_lowercase();
    match spec.strip_prefix('@') {
        Some(scoped) => format!("@{}", scoped.split('/').next().unwrap_or("")),
        None => format!("npm:{}", spec.split('@').next().unwrap_or("")),
    }
}

/// The publisher of a PyPI requirement: its project, normalized as PEP 503 does.
fn pypi(spec: &str) -> String {
    let name = spec
        .split(|c: char| "=<>!~[;@ ".contains(c))
        .next()
        .unwrap_or("");
    let mut out = String::from("pypi:");
    for part in name.split(['-', '_', '.']).filter(|part| !part.is_empty()) {
        if out.len() > "pypi:".len() {
            out.push('-');
        }
        out.push_str(&part.to_ascii_lowercase());
    }
    out
}

/// `host/owner` of a repository URL (`https://`, `git+https://`, `git@host:`, `github:`).
fn repository_owner(spec: &str) -> Option<String> {
    let spec = spec.strip_prefix("git+").unwrap_or(spec);
    let (host, path) = if let Some(p) = spec.strip_prefix("github:") {
        ("github.com", p)
    } else if let Some(p) = spec.strip_prefix("gitlab:") {
        ("gitlab.com", p)
    } else if let Some(rest) = ["https://", "http://", "ssh://git@", "git://"]
        .iter()
        .find_map(|s| spec.strip_prefix(s))
    {
        rest.split_once('/')?
    } else if let Some(rest) = spec.strip_prefix("git@") {
        rest.split_once(':')?
    } else {
        return None;
    };
    let owner = path.split('/').next().filter(|o| !o.is_empty())?;
    Some(format!("{host}/{owner}").to_ascii_lowercase())
}

/// Whether a capture, denied or trigger run was recorded, and the hosts the flows of those runs went
/// to (Unix canary sockets are not hosts).
fn hosts(ev: &Evidence) -> (bool, BTreeSet<String>) {
    let server_run = |m: NetworkMode| {
        matches!(
            m,
            NetworkMode::Capture | NetworkMode::Denied | NetworkMode::Trigger
        )
    };
    let observed = ev.manifest.network.runs.iter().any(|r| server_run(r.mode));
    let mut out = BTreeSet::new();
    for f in ev.flows.iter().filter(|f| server_run(f.mode)) {
        if f.protocol == FlowProtocol::Unix {
            continue;
        }
        let name = f
            .dns
            .as_ref()
            .map(|q| &q.name)
            .or(f.dns_name.as_ref())
            .or(f.sni.as_ref())
            .or(f.http.as_ref().and_then(|h| h.host.as_ref()))
            .map(|b| {
                let n = b.to_lossy().to_ascii_lowercase();
                let n = n.trim_end_matches('.');
                // An HTTP Host may carry a port.
                match n.rsplit_once(':') {
                    Some((h, p)) if !h.contains(':') && p.bytes().all(|b| b.is_ascii_digit()) => {
                        h.to_string()
                    }
                    _ => n.to_string(),
                }
            })
            .filter(|n| !n.is_empty());
        let host = name.unwrap_or_else(|| match &f.dst {
            SockAddr::Inet { ip, .. } | SockAddr::Inet6 { ip, .. } => ip.clone(),
            other => other.to_string(),
        });
        out.insert(host);
    }
    (observed, out)
}

/// One host on the index.
#[derive(Debug, PartialEq, Eq)]
struct HostRow {
    host: String,
    publishers: BTreeSet<String>,
    servers: usize,
}

/// The statistics across servers.
#[derive(Debug, PartialEq, Eq)]
struct Stats {
    /// Distinct servers (target and version).
    servers: usize,
    /// Of those, the ones whose network was observed.
    observed: usize,
    /// Of those, the ones that made no external connection.
    no_connection: usize,
    /// Hosts, most publishers first.
    hosts: Vec<HostRow>,
}

/// The statistics over `audits` (most recent first).
fn stats(audits: &[Summary]) -> Stats {
    let mut seen = BTreeSet::new();
    let latest: Vec<&Summary> = audits
        .iter()
        .filter(|a| seen.insert((&a.target, &a.version, &a.cwd)))
        .collect();
    let observed: Vec<&&Summary> = latest.iter().filter(|a| a.observed).collect();
    let mut by_host: BTreeMap<&str, HostRow> = BTreeMap::new();
    for a in &observed {
        let vendor = match &a.cwd {
            Some(cwd) => format!("{LOCAL} ({cwd})"),
            None => a.publisher.clone(),
        };
        for h in &a.hosts {
            let row = by_host.entry(h).or_insert_with(|| HostRow {
                host: h.clone(),
                publishers: BTreeSet::new(),
                servers: 0,
            });
            row.publishers.insert(vendor.clone());
            row.servers += 1;
        }
    }
    let mut hosts: Vec<HostRow> = by_host.into_values().collect();
    hosts.sort_by(|a, b| {
        b.publishers
            .len()
            .cmp(&a.publishers.len())
            .then(b.servers.cmp(&a.servers))
            .then_with(|| a.host.cmp(&b.host))
    });
    Stats {
        servers: latest.len(),
        observed: observed.len(),
        no_connection: observed.iter().filter(|a| a.hosts.is_empty()).count(),
        hosts,
    }
}

/// The blind-spot section of `doc`: the items under its "cannot see" heading, each joined
/// into one line, and the text before them.
fn blind_spots(doc: &str) -> Option<(Vec<String>, Vec<String>)> {
    let start = doc
        .lines()
        .position(|l| l.starts_with("## ") && l.contains("cannot see"))?;
    let (mut intro, mut items): (Vec<String>, Vec<String>) = (Vec::new(), Vec::new());
    for line in doc.lines().skip(start + 1) {
        if line.starts_with("#") {
            break;
        }
        if let Some(item) = line.strip_prefix("- ") {
            items.push(item.trim().to_string());
        } else if line.trim().is_empty() {
            if items.is_empty() {
                intro.push(String::new());
            }
        } else if let Some(last) = items.last_mut() {
            last.push(' ');
            last.push_str(line.trim());
        } else {
            match intro.last_mut() {
                Some(p) if !p.is_empty() => {
                    p.push(' ');
                    p.push_str(line.trim());
                }
                _ => intro.push(line.trim().to_string()),
            }
        }
    }
    intro.retain(|p| !p.is_empty());
    (!items.is_empty()).then_some((intro, items))
}

const STYLE: &str = r#"
:root { color-scheme: light dark; --fg: #1b1f24; --bg: #fff; --muted: #59636e; --line: #d1d9e0;
  --red: #b3261e; --green: #1a7f37; --amber: #9a6700; --panel: #f6f8fa; --link: #0969da; }
@media (prefers-color-scheme: dark) {
  :root { --fg: #e6edf3; --bg: #0d1117; --muted: #9198a1; --line: #3d444d; --red: #f85149;
    --green: #3fb950; --amber: #d29922; --panel: #151b23; --link: #4493f8; } }
body { font: 15px/1.5 system-ui, -apple-system, "Segoe UI", sans-serif; color: var(--fg);
  background: var(--bg); margin: 0 auto; max-width: 72rem; padding: 1.5rem; }
h1 { font-size: 1.4rem; margin: 0 0 .5rem; }
h2 { font-size: 1.15rem; margin: 2rem 0 .5rem; border-bottom: 1px solid var(--line); }
a { color: var(--link); }
code, .mono { font-family: ui-monospace, SFMono-Regular, Menlo, Consolas, monospace;
  font-size: .9em; overflow-wrap: anywhere; }
table { border-collapse: collapse; width: 100%; margin: .5rem 0; }
th, td { text-align: left; vertical-align: top; padding: .25rem .5rem;
  border-bottom: 1px solid var(--line); overflow-wrap: anywhere; }
th { background: var(--panel); overflow-wrap: normal; }
td.num { text-align: right; white-space: nowrap; }
.clean { color: var(--green); }
.flagged, .o-flag { color: var(--red); font-weight: 700; }
.withheld, .inconclusive, .fragile { color: var(--amber); }
.muted, footer { color: var(--muted); }
nav { margin: 0 0 1rem; padding-bottom: .5rem; border-bottom: 1px solid var(--line); }
"#;

/// The navigation line at the top of every page of the site.
fn nav() -> String {
    "<nav><a href=\"index.html\">All audits</a> · \
     <a href=\"coverage.html\">Coverage and blind spots</a></nav>\n"
        .into()
}

fn audit_page(id: i64) -> String {
    format!("audit-{id}.html")
}

/// A page of the site around `body` (already HTML).
fn page(title: &str, body: &str) -> String {
    format!(
        "<!DOCTYPE html>\n<html lang=\"en\">\n<head>\n<meta charset=\"utf-8\">\n\
         <meta http-equiv=\"Content-Security-Policy\" content=\"{CSP}\">\n\
         <meta name=\"referrer\" content=\"no-referrer\">\n\
         <meta name=\"viewport\" content=\"width=device-width, initial-scale=1\">\n\
         <title>{title}</title>\n<style>{STYLE}</style>\n</head>\n<body>\n{nav}\
         <h1>{title}</h1>\n<main>\n{body}</main>\n\
         <footer>glassbox {version}</footer>\n</body>\n</html>\n",
        title = esc(title),
        nav = nav(),
        version = esc(env!("CARGO_PKG_VERSION")),
    )
}

/// A server string made printable, cut, and escaped.
fn text(s: &str, max: usize) -> String {
    esc(&escape::truncate(&escape::text(s), max))
}

/// `2026-11-30T14:52:52.951Z` as `2026-11-30 14:52 UTC`; anything else as recorded.
fn date(s: &str) -> String {
    let b = s.as_bytes();
    let shaped = b.len() >= 17
        && b[4] == b'-'
        && b[7] == b'-'
        && b[10] == b'T'
        && b[13] == b':'
        && s.ends_with('Z');
    if shaped {
        format!("{} {} UTC", &s[..10], &s[11..16])
    } else {
        escape::text(s)
    }
}

fn verdict_class(v: glassbox_model::Verdict) -> &'static str {
    match v {
        glassbox_model::Verdict::Clean => "clean",
        glassbox_model::Verdict::Flagged => "flagged",
        glassbox_model::Verdict::Withheld => "withheld",
        glassbox_model::Verdict::Inconclusive => "inconclusive",
    }
}

fn percent(part: usize, whole: usize) -> String {
    if whole == 0 {
        "no server".into()
    } else {
        format!("{:.0}%", part as f64 * 100.0 / whole as f64)
    }
}

fn index(audits: &[Summary]) -> String {
    let mut out = String::new();
    let s = stats(audits);
    let _ = writeln!(
        out,
        "<p>{} audits of {} servers. Findings awaiting a person's review are withheld; \
         rejected ones are not shown.</p>",
        audits.len(),
        s.servers
    );
    out.push_str("<section>\n<h2>Servers</h2>\n");
    if audits.is_empty() {
        out.push_str("<p class=\"muted\">No audit is recorded in the store.</p>\n");
    } else {
        table(
            &mut out,
            [
                "server",
                "version",
                "publisher",
                "audited",
                "verdict",
                "why inconclusive",
            ],
        );
        for a in audits {
            let cwd = a.cwd.as_deref().map_or_else(String::new, |d| {
                format!(" <span class=\"muted\">in {}</span>", text(d, WIDE))
            });
            let _ = writeln!(
                out,
                "<tr><td><a href=\"{}\"><code>{}</code></a>{}</td><td>{}</td><td>{}</td>\
                 <td>{}</td><td class=\"{}\">{}</td><td>{}</td></tr>",
                audit_page(a.id),
                text(&a.target, WIDE),
                cwd,
                a.version
                    .as_deref()
                    .map_or_else(|| "unknown".into(), |v| text(v, NAME)),
                text(&a.publisher, NAME),
                esc(&date(&a.started_at)),
                verdict_class(a.verdict),
                esc(tables::verdict(a.verdict)),
                a.inconclusive
                    .as_deref()
                    .map_or_else(String::new, |r| text(r, REASON)),
            );
        }
        end_table(&mut out);
    }
    out.push_str("</section>\n<section>\n<h2>Network across servers</h2>\n");
    let _ = writeln!(
        out,
        "<p>Made no external connection: {} of {} servers whose network was observed ({}). \
         Not observed (no network run recorded): {}.</p>",
        s.no_connection,
        s.observed,
        percent(s.no_connection, s.observed),
        s.servers - s.observed,
    );
    if s.hosts.is_empty() {
        out.push_str("<p class=\"muted\">No server contacted any host.</p>\n");
    } else {
        out.push_str(
            "<p>Hosts contacted, by how many publishers' servers reached them (the servers \
             of one publisher count once):</p>\n",
        );
        table(
            &mut out,
            ["host", "publishers", "servers", "publisher names"],
        );
        for h in s.hosts.iter().take(HOSTS_CAP) {
            let names: Vec<String> = h.publishers.iter().map(|p| text(p, NAME)).collect();
            let _ = writeln!(
                out,
                "<tr><td class=\"mono\">{}</td><td class=\"num\">{}</td>\
                 <td class=\"num\">{}</td><td>{}</td></tr>",
                text(&h.host, WIDE),
                h.publishers.len(),
                h.servers,
                names.join(", "),
            );
        }
        end_table(&mut out);
        if s.hosts.len() > HOSTS_CAP {
            let _ = writeln!(
                out,
                "<p class=\"muted\">… and {} more hosts.</p>",
                s.hosts.len() - HOSTS_CAP
            );
        }
    }
    out.push_str("</section>\n<section>\n<h2>Retracted claims</h2>\n");
    out.push_str(
        "<p>Claims made by a check version later found defective are withdrawn, not kept: \
         the check's outcome is shown as retracted and its findings are dropped.</p>\n",
    );
    let retracted: Vec<(&Summary, &(String, u32, String))> = audits
        .iter()
        .flat_map(|a| a.retracted.iter().map(move |r| (a, r)))
        .collect();
    if retracted.is_empty() {
        out.push_str(
            "<p class=\"muted\">No published claim was made by a retracted check version.</p>\n",
        );
    } else {
        table(&mut out, ["audit", "check", "outcome", "why"]);
        for (a, (id, version, why)) in retracted {
            let _ = writeln!(
                out,
                "<tr><td><a href=\"{}\"><code>{}</code></a></td><td class=\"mono\">{} v{}</td>\
                 <td class=\"withheld\">retracted</td><td>{}</td></tr>",
                audit_page(a.id),
                text(&a.target, WIDE),
                text(id, NAME),
                version,
                text(why, usize::MAX),
            );
        }
        end_table(&mut out);
    }
    out.push_str("</section>\n");
    page("glassbox: audited MCP servers", &out)
}

/// Markdown text with its `code spans` as `<code>` elements, every part escaped.
fn code_spans(s: &str) -> String {
    if s.matches('`').count() % 2 == 1 {
        // An unpaired backtick: no span at all.
        return esc(s);
    }
    let parts: Vec<&str> = s.split('`').collect();
    let mut out = String::new();
    for (i, part) in parts.iter().enumerate() {
        if i % 2 == 1 {
            let _ = write!(out, "<code>{}</code>", esc(part));
        } else {
            out.push_str(&esc(part));
        }
    }
    out
}

fn coverage_page(rows: &[CoverageRow]) -> String {
    let mut out = String::new();
    out.push_str("<section>\n<h2>Coverage ledger</h2>\n");
    out.push_str(
        "<p>The labelled examples behind each check: controls that must flag (positive), \
         controls that must pass (negative), regression cases, and known gaps. A check with \
         fewer than three examples of a kind is fragile.</p>\n",
    );
    if rows.is_empty() {
        out.push_str("<p class=\"muted\">No check is registered.</p>\n");
    } else {
        table(
            &mut out,
            [
                "check",
                "version",
                "positive",
                "negative",
                "regression",
                "known gaps",
                "status",
            ],
        );
        for r in rows {
            let status = if r.fragile {
                "<td class=\"fragile\">fragile</td>"
            } else {
                "<td>ok</td>"
            };
            let _ = writeln!(
                out,
                "<tr><td class=\"mono\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>\
                 <td class=\"num\">{}</td><td class=\"num\">{}</td><td class=\"num\">{}</td>{}</tr>",
                text(&r.id, NAME),
                r.version,
                r.positive_controls,
                r.negative_controls,
                r.regression_cases,
                r.known_gaps,
                status,
            );
        }
        end_table(&mut out);
    }
    out.push_str("</section>\n<section>\n<h2>What the recorder cannot see</h2>\n");
    match blind_spots(RECORDER_DOC) {
        Some((intro, items)) => {
            for p in intro {
                let _ = writeln!(out, "<p>{}</p>", esc(&p));
            }
            out.push_str("<ul>\n");
            for i in items {
                let _ = writeln!(out, "<li>{}</li>", code_spans(&i));
            }
            out.push_str("</ul>\n");
        }
        None => out.push_str("<p class=\"muted\">See docs/recorder.md.</p>\n"),
    }
    out.push_str("</section>\n");
    page("glassbox: coverage and blind spots", &out)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixture;
    use glassbox_model::{Bytes, CheckResult, DnsQuery, Flow};

    #[test]
    fn publishers_group_servers_by_vendor() {
        for (target, want) in [
            ("npm:@acme/mcp-weather", "@acme"),
            ("npm:@Acme/mcp-maps@2.1.0", "@acme"),
            ("npm:mcp-server-fetch@1.0.0", "npm:mcp-server-fetch"),
            ("pypi:Acme_Tools==1.2", "pypi:acme-tools"),
            ("pypi:acme.tools[cli]>=1", "pypi:acme-tools"),
            ("https://github.com/Acme/weather-mcp", "github.com/acme"),
            ("git+https://github.com/acme/maps.git", "github.com/acme"),
            ("git@gitlab.com:acme/x.git", "gitlab.com/acme"),
            ("npx -y @acme/mcp-weather@latest", "@acme"),
            ("/usr/bin/npx --yes -p @acme/maps mcp-maps", "@acme"),
            (
                "npx --package=mcp-server-fetch fetch",
                "npm:mcp-server-fetch",
            ),
            ("npx github:acme/tool", "github.com/acme"),
            ("uvx --from acme-tools==1.0 acme", "pypi:acme-tools"),
            ("uvx Acme_Tools", "pypi:acme-tools"),
            ("python3 server.py", "local"),
            ("node /opt/@acme/server.js", "local"),
            ("npx", "local"),
            ("npx -p", "local"),
            ("", "local"),
        ] {
            assert_eq!(publisher(target), want, "{target:?}");
        }
    }

    /// A flow of `mode` to `host` (a TCP connection to a synthetic address named `host`).
    fn tcp(id: u64, mode: NetworkMode, host: &str) -> Flow {
        let (ev, _) = fixture::normal();
        Flow {
            id,
            mode,
            dns_name: Some(Bytes::from(host)),
            sni: None,
            ..ev.flows[0].clone()
        }
    }

    fn evidence(flows: Vec<Flow>, observed: bool) -> Evidence {
        let (mut ev, _) = fixture::normal();
        ev.flows = flows;
        if !observed {
            ev.manifest.network.runs.clear();
        }
        ev
    }

    fn in_folder(cwd: &str, host: &str) -> Evidence {
        let mut ev = evidence(vec![tcp(1, NetworkMode::Capture, host)], true);
        ev.manifest.target.cwd = cwd.into();
        ev
    }

    fn summary(id: i64, target: &str, ev: &Evidence) -> Summary {
        let (_, report) = fixture::normal();
        let mut site = Site::new();
        site.add(&Audit {
            id,
            target,
            version: None,
            started_at: "2026-11-30T14:52:52.951Z",
            evidence: ev,
            report: &report,
        });
        site.audits.pop().unwrap()
    }

    #[test]
    fn hosts_are_named_and_exclude_install_and_unix_flows() {
        let mut dns = tcp(1, NetworkMode::Denied, "");
        dns.protocol = FlowProtocol::Dns;
        dns.dns_name = None;
        dns.dns = Some(DnsQuery {
            name: Bytes::from("Telemetry.Example."),
            qtype: "A".into(),
            answers: vec![],
        });
        let mut direct = tcp(2, NetworkMode::Capture, "");
        direct.dns_name = None;
        direct.dst = SockAddr::Inet {
            ip: "192.0.2.7".into(),
            port: 443,
        };
        let mut http = direct.clone();
        http.http = Some(glassbox_model::HttpRequest {
            method: "GET".into(),
            target: Bytes::from("/"),
            host: Some(Bytes::from("api.example:8080")),
        });
        let mut unix = tcp(3, NetworkMode::Capture, "docker.sock");
        unix.protocol = FlowProtocol::Unix;
        let install = tcp(4, NetworkMode::Install, "registry.npmjs.org");
        let ev = evidence(vec![dns, direct, http, unix, install], true);
        let (observed, hosts) = hosts(&ev);
        assert!(observed);
        assert_eq!(
            hosts.into_iter().collect::<Vec<_>>(),
            ["192.0.2.7", "api.example", "telemetry.example"]
        );
        let (observed, hosts) = hosts_of_unobserved();
        assert!(!observed);
        assert!(hosts.is_empty());
    }

    fn hosts_of_unobserved() -> (bool, BTreeSet<String>) {
        hosts(&evidence(vec![], false))
    }

    #[test]
    fn statistics_count_servers_once_and_vendors_once_per_host() {
        let cap = NetworkMode::Capture;
        let audits = vec![
            // Most recent first: the first audit of a target stands for it.
            summary(
                9,
                "npx -y @acme/weather",
                &evidence(
                    vec![tcp(1, cap, "api.acme.example"), tcp(2, cap, "cdn.example")],
                    true,
                ),
            ),
            summary(
                8,
                "npm:@acme/maps",
                &evidence(vec![tcp(1, cap, "api.acme.example")], true),
            ),
            summary(
                7,
                "pypi:other-tools",
                &evidence(vec![tcp(1, cap, "cdn.example")], true),
            ),
            summary(6, "python3 quiet.py", &evidence(vec![], true)),
            summary(5, "python3 unobserved.py", &evidence(vec![], false)),
            // One command line in two folders: two servers, two publishers.
            summary(3, "python3 server.py", &in_folder("/srv/a", "cdn.example")),
            summary(2, "python3 server.py", &in_folder("/srv/b", "cdn.example")),
            summary(1, "python3 server.py", &in_folder("/srv/a", "old.example")),
            // An older audit of the first server: not counted.
            summary(
                4,
                "npx -y @acme/weather",
                &evidence(vec![tcp(1, cap, "old.example")], true),
            ),
        ];
        let s = stats(&audits);
        assert_eq!(s.servers, 7);
        assert_eq!(s.observed, 6);
        assert_eq!(s.no_connection, 1);
        let set = |v: &[&str]| v.iter().map(|s| s.to_string()).collect::<BTreeSet<_>>();
        assert_eq!(
            s.hosts,
            vec![
                HostRow {
                    host: "cdn.example".into(),
                    publishers: set(&[
                        "@acme",
                        "local (/srv/a)",
                        "local (/srv/b)",
                        "pypi:other-tools",
                    ]),
                    servers: 4,
                },
                // Two servers of one vendor hitting its own backend: one publisher.
                HostRow {
                    host: "api.acme.example".into(),
                    publishers: set(&["@acme"]),
                    servers: 2,
                },
            ]
        );
        let index = index(&audits);
        assert!(index.contains(
            "Made no external connection: 1 of 6 servers whose network was observed (17%). \
             Not observed (no network run recorded): 1."
        ));
        assert!(index.contains(
            "<tr><td class=\"mono\">cdn.example</td><td class=\"num\">4</td>\
             <td class=\"num\">4</td><td>@acme, local (/srv/a), local (/srv/b), \
             pypi:other-tools</td></tr>"
        ));
        assert!(!index.contains("old.example"));
        assert!(
            index.contains("<a href=\"audit-4.html\">"),
            "every audit is listed"
        );
        assert!(index.contains(
            "<a href=\"audit-2.html\"><code>python3 server.py</code></a> \
             <span class=\"muted\">in /srv/b</span></td><td>unknown</td><td>local</td>"
        ));
        let empty = stats(&[]);
        assert_eq!((empty.servers, empty.observed), (0, 0));
        assert!(super::index(&[]).contains("(no server)"));
    }

    #[test]
    fn the_index_says_why_each_inconclusive_audit_is_inconclusive() {
        let (ev, mut report) = fixture::normal();
        report.verdict = glassbox_model::Verdict::Inconclusive;
        report.inconclusive_reason = Some(format!(
            "the server exited <b>early</b>: {}",
            "x".repeat(400)
        ));
        let (_, flagged) = fixture::normal();
        let mut site = Site::new();
        for (id, r) in [(1, &report), (2, &flagged)] {
            site.add(&Audit {
                id,
                target: "npm:x",
                version: None,
                started_at: "2026-11-30T14:52:52.951Z",
                evidence: &ev,
                report: r,
            });
        }
        let index = &site.finish(&[])[0].html;
        assert!(index.contains("<th>why inconclusive</th>"), "{index}");
        let row = index
            .lines()
            .find(|l| l.contains("audit-1.html"))
            .expect("the inconclusive audit's row");
        // Escaped, and cut: its page has the reason whole.
        assert!(
            row.contains("<td>the server exited &lt;b&gt;early&lt;/b&gt;: xxx"),
            "{row}"
        );
        assert!(
            row.contains('…') && !row.contains(&"x".repeat(400)),
            "{row}"
        );
        let row = index.lines().find(|l| l.contains("audit-2.html")).unwrap();
        assert!(row.ends_with("<td></td></tr>"), "{row}");
    }

    #[test]
    fn retracted_claims_are_shown_as_retracted() {
        let (ev, mut report) = fixture::normal();
        report.checks.push(CheckResult {
            reason: Some("persistence v1 retracted on 2026-11-30: missed .bashrc".into()),
            ..fixture::check("persistence", Outcome::Retracted, vec![])
        });
        let mut site = Site::new();
        let audit = site.add(&Audit {
            id: 3,
            target: "npm:@acme/x",
            version: Some("1.0.0"),
            started_at: "2026-11-30T14:52:52.951Z",
            evidence: &ev,
            report: &report,
        });
        assert_eq!(audit.name, "audit-3.html");
        assert!(audit.html.contains("<td class=\"o-none\">retracted</td>"));
        assert!(audit.html.contains("<body>\n<nav><a href=\"index.html\">"));
        let pages = site.finish(&[]);
        let index = &pages[0].html;
        assert!(
            index.contains(
                "<tr><td><a href=\"audit-3.html\"><code>npm:@acme/x</code></a></td>\
             <td>1.0.0</td><td>@acme</td><td>2026-11-30 14:52 UTC</td>\
             <td class=\"flagged\">FLAGGED</td><td></td></tr>"
            ),
            "{index}"
        );
        assert!(index.contains(
            "<td class=\"mono\">persistence v1</td><td class=\"withheld\">retracted</td>\
             <td>persistence v1 retracted on 2026-11-30: missed .bashrc</td>"
        ));
    }

    #[test]
    fn the_coverage_page_has_the_ledger_and_the_blind_spots() {
        let rows = [CoverageRow {
            id: "doh".into(),
            version: 1,
            positive_controls: 3,
            negative_controls: 57,
            regression_cases: 0,
            known_gaps: 1,
            fragile: false,
        }];
        let html = coverage_page(&rows);
        assert!(html.contains(
            "<tr><td class=\"mono\">doh</td><td class=\"num\">1</td><td class=\"num\">3</td>\
             <td class=\"num\">57</td><td class=\"num\">0</td><td class=\"num\">1</td>\
             <td>ok</td></tr>"
        ));
        let (_, items) = blind_spots(RECORDER_DOC).expect("docs/recorder.md has its section");
        assert!(items.len() >= 3, "{items:?}");
        for item in &items {
            assert!(
                html.contains(&format!("<li>{}</li>", code_spans(item))),
                "{item}"
            );
        }
        assert!(
            html.contains("<code>connect</code> and <code>bind</code>"),
            "{html}"
        );
        assert_eq!(
            code_spans("a `<b>` c `d"),
            "a `&lt;b&gt;` c `d",
            "unpaired: no span"
        );
        assert_eq!(
            code_spans("`<i>` & `x`"),
            "<code>&lt;i&gt;</code> &amp; <code>x</code>"
        );
        assert!(items.iter().any(|i| i.contains("loopback")), "{items:?}");
        // Markup in the document stays text.
        let (intro, items) = blind_spots(
            "# t\n## What it cannot see\nSome <b>text</b>\ngoes on.\n\n- one\n  more\n- <script>\n## next\n- no",
        )
        .unwrap();
        assert_eq!(intro, ["Some <b>text</b> goes on."]);
        assert_eq!(items, ["one more", "<script>"]);
        assert_eq!(blind_spots("# nothing here"), None);
    }

    #[test]
    fn hostile_strings_in_the_index_stay_text() {
        let (ev, report) = fixture::hostile();
        let evil = fixture::evil();
        let mut site = Site::new();
        site.add(&Audit {
            id: 1,
            target: &format!("npm:@{evil}/x"),
            version: Some(&evil),
            started_at: &evil,
            evidence: &ev,
            report: &report,
        });
        let pages = site.finish(&[CoverageRow {
            id: evil.clone(),
            version: 1,
            positive_controls: 0,
            negative_controls: 0,
            regression_cases: 0,
            known_gaps: 0,
            fragile: true,
        }]);
        const TAGS: &[&str] = &[
            "!doctype", "html", "head", "meta", "title", "style", "body", "nav", "a", "main",
            "footer", "section", "h1", "h2", "h3", "header", "p", "div", "span", "code", "dl",
            "dt", "dd", "table", "thead", "tbody", "tr", "th", "td", "ul", "li",
        ];
        for p in &pages {
            // Every `<` opens one of our tags, and no tag carries a handler.
            for (i, _) in p.html.match_indices('<') {
                let tag = &p.html[i + 1..];
                let tag = &tag[..tag.find('>').unwrap()];
                let name = tag.trim_start_matches('/').split(' ').next().unwrap();
                assert!(
                    TAGS.contains(&name.to_ascii_lowercase().as_str()),
                    "<{tag}>"
                );
                assert!(!tag.contains(" on"), "<{tag}>");
            }
            // The only links are the site's own pages.
            for (i, _) in p.html.match_indices("href=") {
                let link = &p.html[i + 6..];
                let link = &link[..link.find('"').unwrap()];
                assert!(
                    ["index.html", "coverage.html", "audit-1.html"].contains(&link),
                    "{link}"
                );
            }
        }
        assert!(pages[0]
            .html
            .contains("&lt;script&gt;alert(1)&lt;/script&gt;"));
        assert!(pages[0].html.contains("\\u{1b}[2J"));
    }
}
