//! The report's sections, built once and rendered per format.
//!
//! Every section a report shows (the checks, the findings, the files touched under home, the
//! processes, the connection attempts, the network, the tools, the surface exercised, the
//! timeline) is built here from the evidence and the report as format-neutral data: a
//! [`Section`] with a title and a [`Body`]. A body is a line saying why there is nothing to
//! show, a [`Table`] of typed [`Cell`]s with its cap and where the rest is, a line of
//! glassbox's own words, the checks with their findings, or several of those in order. The renderers (`html.rs`, `markdown.rs`,
//! `terminal.rs`) each have one function rendering a section, and one way of rendering each
//! body and cell kind; they choose which sections they show, and in what order, but no
//! renderer builds a section of its own.
//!
//! # Why here
//!
//! Each format used to gather its sections itself, so a cap, a cut or a column changed in one
//! format and not in the others, and the escaping of hostile strings had to be right in every
//! copy. Here every string from the server is made printable (control and invisible format
//! characters escaped, see [`escape`]) and cut at its cap ([`NAME`], [`WIDE`],
//! [`DESCRIPTION`]) once, and every list is capped once ([`FINDINGS_CAP`], [`TOOLS_CAP`]...):
//! a renderer adds only the escaping its own markup needs (HTML's `& < > " '`, Markdown's
//! punctuation) and its own layout.
//!
//! # Lines without headings
//!
//! The terminal writes a table's rows as lines, without a heading row. Each [`Column`] says
//! how its value reads in such a line ([`Line`]): padded to the widest value, named after its
//! column (`isolation verified`, `pid 9`), followed by its column's name as a unit (`2 flows`),
//! as `×N` after the line (the events a row stands for), or left out (a tool's description,
//! the flow ids). That is data about the column, not about the terminal: any format without
//! headings would read it the same way.

use crate::escape::{self, truncate};
use crate::tables::{
    self, id_list, phases, CONNECTIONS_CAP, CUT_CAP, DESCRIPTION, FILES_CAP, FINDINGS_CAP,
    FLOWS_CAP, NAME, NOTES_CAP, PROCESSES_CAP, TIMINGS_CAP, TOOLS_CAP, WIDE,
};
use glassbox_model::{AuditReport, CheckResult, Evidence, Finding, Outcome, Severity};

/// A cell of a [`Table`], by what it holds: each format shows a kind its own way (HTML a
/// class, Markdown its escaping, the terminal a color). Text is printable and cut already.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Cell {
    /// Text from the evidence (paths, argv, tool names, phases), in a fixed-width face.
    Mono(String),
    /// Text from the evidence, or glassbox's words about it (escaped like the evidence's).
    Text(String),
    /// glassbox's own words (never escaped away in Markdown).
    Own(String),
    /// A number.
    Num(i64),
    /// A time or a duration in nanoseconds, shown in milliseconds with one decimal.
    Ms(u64),
    /// Whether something glassbox relies on holds (`verified`, `NOT verified`): glassbox's own
    /// words, marked good or bad.
    Status {
        /// Whether it holds.
        good: bool,
        /// What to say.
        text: &'static str,
    },
}

/// How a [`Column`]'s value reads in a line without headings (the terminal).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Line {
    /// Padded to the widest value of the rows shown (up to a limit the format sets).
    Pad,
    /// As it is.
    Plain,
    /// After its column's name: `pid 9`, `isolation verified`.
    Named,
    /// Before its column's name, as a unit: `2 flows`, `1034 bytes out`.
    Unit,
    /// `×N` at the end of the line, and nothing for one: how many events a row stands for.
    Times,
    /// Left out: too long for a line (a description), or said elsewhere (the flow ids).
    Omit,
}

/// A column of a [`Table`]: its heading, and how its value reads without one.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Column {
    pub(crate) title: &'static str,
    pub(crate) line: Line,
}

/// A column named `title` read as `line`.
const fn col(title: &'static str, line: Line) -> Column {
    Column { title, line }
}

/// A table: its columns, its first rows (at most its cap), how many rows there are in all,
/// and where the rest are (`events.jsonl`).
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Table {
    pub(crate) columns: &'static [Column],
    pub(crate) rows: Vec<Vec<Cell>>,
    pub(crate) total: usize,
    pub(crate) see: &'static str,
}

impl Table {
    /// The first `cap` of `rows` as a table of `columns`, each row made by `row`.
    fn capped<T>(
        columns: &'static [Column],
        rows: &[T],
        cap: usize,
        see: &'static str,
        row: impl Fn(&T) -> Vec<Cell>,
    ) -> Table {
        Table {
            columns,
            rows: rows.iter().take(cap).map(row).collect(),
            total: rows.len(),
            see,
        }
    }
}

/// A section: a title, then what it holds.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Section {
    pub(crate) title: String,
    pub(crate) body: Body,
}

impl Section {
    fn new(title: impl Into<String>, body: Body) -> Section {
        Section {
            title: title.into(),
            body,
        }
    }
}

/// What a [`Section`] holds.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Body {
    /// Nothing to show, and why (`None.`).
    Note(&'static str),
    /// A table.
    Table(Table),
    /// A line of glassbox's own words under a table (printable, cut): the calls' totals.
    Text(String),
    /// The checks: each with its outcome, claim and reason (a table in HTML and Markdown; the
    /// terminal writes each check's findings under it).
    Checks(Vec<Check>),
    /// The checks that found something, each with its findings and notes.
    Findings(Vec<Check>),
    /// Several bodies, in order (the network runs and flows; the tools and their calls).
    Parts(Vec<Body>),
}

/// One check of the report, printable.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Check {
    /// Its id, cut at [`NAME`].
    pub(crate) id: String,
    pub(crate) version: u32,
    pub(crate) claim: String,
    pub(crate) severity: Severity,
    pub(crate) outcome: Outcome,
    /// Why it makes no claim (or why the claim was withdrawn).
    pub(crate) reason: Option<String>,
    /// Its findings (marked [`Mark::Finding`]), capped at [`FINDINGS_CAP`].
    pub(crate) findings: Items,
    /// Its notes (marked [`Mark::Note`]), capped at [`NOTES_CAP`].
    pub(crate) notes: Items,
}

/// What a list of [`Item`]s is: each format marks an item of it alike.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Mark {
    /// A finding, what the claim is broken by: `✗`.
    Finding,
    /// A note, said without a claim: `·`.
    Note,
}

impl Mark {
    /// The character every format marks the item with.
    pub(crate) fn glyph(self) -> &'static str {
        match self {
            Mark::Finding => "✗",
            Mark::Note => "·",
        }
    }
}

/// The first findings (or notes) of a check, how many there are, and where the rest are.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Items {
    pub(crate) mark: Mark,
    pub(crate) shown: Vec<Item>,
    pub(crate) total: usize,
    pub(crate) see: &'static str,
}

/// One finding or note, printable, with what it refers to.
#[derive(Clone, Debug, PartialEq)]
pub(crate) struct Item {
    /// An accusation: shown as withheld until a person reviewed it.
    pub(crate) withheld: bool,
    pub(crate) summary: String,
    /// `event 3`, `events 3, 4, +2`, or empty.
    pub(crate) events: String,
    /// `flow 1`, `flows 1, 2`, or empty.
    pub(crate) flows: String,
    /// Its phase, cut at [`NAME`].
    pub(crate) phase: Option<String>,
}

impl Item {
    /// What it refers to, each printable: `events 3, 4`, `flow 1`, `phase call:x` (those it
    /// has).
    pub(crate) fn refs(&self) -> Vec<String> {
        let mut refs: Vec<String> = [&self.events, &self.flows]
            .into_iter()
            .filter(|r| !r.is_empty())
            .cloned()
            .collect();
        if let Some(p) = &self.phase {
            refs.push(format!("phase {p}"));
        }
        refs
    }
}

/// A string from the server: printable, cut at `max` characters.
fn plain(s: &str, max: usize) -> String {
    truncate(&escape::text(s), max)
}

/// The first `cap` findings of `list`, marked `mark`.
fn items(mark: Mark, list: &[Finding], cap: usize) -> Items {
    Items {
        mark,
        shown: list
            .iter()
            .take(cap)
            .map(|f| Item {
                withheld: f.accusation,
                summary: escape::text(&f.summary),
                events: id_list("event", &f.evidence),
                flows: id_list("flow", &f.flows),
                phase: f.phase.as_ref().map(|p| plain(&p.to_string(), NAME)),
            })
            .collect(),
        total: list.len(),
        see: "report.json",
    }
}

fn check(c: &CheckResult) -> Check {
    Check {
        id: plain(&c.id, NAME),
        version: c.version,
        claim: escape::text(&c.claim),
        severity: c.severity,
        outcome: c.outcome,
        reason: c.reason.as_deref().map(escape::text),
        findings: items(Mark::Finding, &c.findings, FINDINGS_CAP),
        notes: items(Mark::Note, &c.notes, NOTES_CAP),
    }
}

/// The checks and the findings, in order: every check with its outcome, then the checks that
/// found something (or noted something) with what they found.
pub(crate) fn check_sections(report: &AuditReport) -> [Section; 2] {
    let checks: Vec<Check> = report.checks.iter().map(check).collect();
    let found: Vec<Check> = checks
        .iter()
        .filter(|c| c.findings.total > 0 || c.notes.total > 0)
        .cloned()
        .collect();
    [
        Section::new(
            "Checks",
            if checks.is_empty() {
                Body::Note("None evaluated.")
            } else {
                Body::Checks(checks)
            },
        ),
        Section::new(
            "Findings",
            if found.is_empty() {
                Body::Note("No check found anything.")
            } else {
                Body::Findings(found)
            },
        ),
    ]
}

const FILES: &[Column] = &[
    col("path", Line::Pad),
    col("access", Line::Pad),
    col("phases", Line::Plain),
    col("events", Line::Times),
];
const PROCESSES: &[Column] = &[
    col("pid", Line::Named),
    col("parent", Line::Named),
    col("argv", Line::Plain),
    col("phases", Line::Plain),
    col("events", Line::Times),
];
const CONNECTIONS: &[Column] = &[
    col("destination", Line::Pad),
    col("call", Line::Pad),
    col("phases", Line::Plain),
    col("events", Line::Times),
];

/// The sections of what the events say, in order: files touched under home, processes,
/// connection attempts.
pub(crate) fn event_sections(ev: &Evidence) -> [Section; 3] {
    let files = match tables::files(ev) {
        None => Body::Note("The home directory is not recorded in the manifest."),
        Some(rows) if rows.is_empty() => Body::Note("None."),
        Some(rows) => Body::Table(Table::capped(
            FILES,
            &rows,
            FILES_CAP,
            "events.jsonl",
            |r| {
                let (path, u) = &r.data;
                vec![
                    Cell::Mono(truncate(path, WIDE)),
                    Cell::Own(u.text()),
                    Cell::Text(phases(&r.phases)),
                    Cell::Num(r.count as i64),
                ]
            },
        )),
    };
    let ps = tables::processes(ev);
    let processes = if ps.is_empty() {
        Body::Note("None.")
    } else {
        Body::Table(Table::capped(
            PROCESSES,
            &ps,
            PROCESSES_CAP,
            "events.jsonl",
            |r| {
                let p = &r.data;
                vec![
                    Cell::Num(i64::from(p.pid)),
                    Cell::Num(i64::from(p.ppid)),
                    Cell::Mono(p.argv.clone()),
                    Cell::Text(phases(&r.phases)),
                    Cell::Num(r.count as i64),
                ]
            },
        ))
    };
    let cs = tables::connections(ev);
    let connections = if cs.is_empty() {
        Body::Note("None.")
    } else {
        Body::Table(Table::capped(
            CONNECTIONS,
            &cs,
            CONNECTIONS_CAP,
            "events.jsonl",
            |r| {
                let (dest, syscall) = &r.data;
                vec![
                    Cell::Mono(truncate(dest, WIDE)),
                    Cell::Text(truncate(syscall, NAME)),
                    Cell::Text(phases(&r.phases)),
                    Cell::Num(r.count as i64),
                ]
            },
        ))
    };
    [
        Section::new("Files touched under home", files),
        Section::new("Processes", processes),
        Section::new("Connection attempts", connections),
    ]
}

const RUNS: &[Column] = &[
    col("run", Line::Pad),
    col("packets", Line::Unit),
    col("flows", Line::Unit),
    col("isolation", Line::Named),
    col("calls with no packet", Line::Unit),
];
const FLOWS: &[Column] = &[
    col("run", Line::Pad),
    col("protocol", Line::Pad),
    col("destination", Line::Pad),
    col("flows", Line::Unit),
    col("packets out", Line::Unit),
    col("bytes out", Line::Unit),
    col("read", Line::Plain),
    col("flow ids", Line::Omit),
];

/// The network: each run (its packets, flows, whether its isolation was verified, and the
/// calls that reached no flow), then the flows grouped by run, protocol and destination.
pub(crate) fn network_section(ev: &Evidence) -> Section {
    let body = if ev.manifest.network.runs.is_empty() {
        Body::Note("No network run was recorded.")
    } else {
        let runs = tables::runs(ev);
        let runs = Table::capped(RUNS, &runs, usize::MAX, "manifest.json", |r| {
            vec![
                Cell::Own(r.mode.into()),
                Cell::Num(r.packets as i64),
                Cell::Num(r.flows as i64),
                if r.isolation_verified {
                    Cell::Status {
                        good: true,
                        text: "verified",
                    }
                } else {
                    Cell::Status {
                        good: false,
                        text: "NOT verified",
                    }
                },
                Cell::Num(r.calls_without_flow as i64),
            ]
        });
        let groups = tables::flows(ev);
        let flows = if groups.is_empty() {
            Body::Note("No flows.")
        } else {
            Body::Table(Table::capped(
                FLOWS,
                &groups,
                FLOWS_CAP,
                "network.jsonl",
                |g| {
                    vec![
                        Cell::Own(g.mode.name().into()),
                        Cell::Text(g.protocol.clone()),
                        Cell::Mono(truncate(&g.destination, WIDE)),
                        Cell::Num(g.flows as i64),
                        Cell::Num(g.packets as i64),
                        Cell::Num(g.bytes as i64),
                        Cell::Text(truncate(&g.read, WIDE)),
                        Cell::Own(tables::ids(&g.ids).join(", ")),
                    ]
                },
            ))
        };
        Body::Parts(vec![Body::Table(runs), flows])
    };
    Section::new("Network flows", body)
}

const TOOLS: &[Column] = &[
    col("name", Line::Pad),
    col("called", Line::Omit),
    col("result", Line::Plain),
    col("description", Line::Omit),
];
const CALLS: &[Column] = &[
    col("phase", Line::Pad),
    col("arguments", Line::Pad),
    col("outcome", Line::Plain),
    col("note", Line::Plain),
];

/// The tools the server listed (whether each was called, how its calls went, its
/// description), the calls counted by outcome, and the calls of the tools called more than
/// once (findings name such a call as their phase).
pub(crate) fn tools_section(ev: &Evidence, report: &AuditReport) -> Section {
    let title = format!("Tools ({})", report.tools.len());
    if report.tools.is_empty() {
        return Section::new(title, Body::Note("None listed."));
    }
    let mut parts = vec![Body::Table(Table::capped(
        TOOLS,
        &report.tools,
        TOOLS_CAP,
        "report.json",
        |t| {
            vec![
                Cell::Mono(plain(&t.name, NAME)),
                Cell::Own(if t.called { "yes" } else { "no" }.into()),
                Cell::Text(truncate(&tables::outcomes(&t.outcomes()), WIDE)),
                Cell::Text(
                    tables::description(ev, &t.name)
                        .map(|d| truncate(&d, DESCRIPTION))
                        .unwrap_or_default(),
                ),
            ]
        },
    ))];
    if let Some(totals) = tables::call_totals(report) {
        parts.push(Body::Text(truncate(&totals, WIDE)));
    }
    let rows = tables::call_rows(report);
    if !rows.is_empty() {
        parts.push(Body::Text(
            "Calls of the tools called more than once; findings name the call as their phase."
                .into(),
        ));
        parts.push(Body::Table(Table::capped(
            CALLS,
            &rows,
            TOOLS_CAP,
            "report.json",
            |r| {
                vec![
                    Cell::Mono(truncate(&r.phase, NAME)),
                    Cell::Text(truncate(&r.label, NAME)),
                    Cell::Text(r.outcome.into()),
                    Cell::Text(truncate(&r.note, WIDE)),
                ]
            },
        )));
    }
    Section::new(title, Body::Parts(parts))
}

const SURFACE: &[Column] = &[
    col("kind", Line::Pad),
    col("name", Line::Pad),
    col("result", Line::Plain),
    col("note", Line::Plain),
];

/// What of the server's surface the audit exercised ([`glassbox_model::SurfaceSummary`]): a
/// line counting the tools called, the resources read, the templates expanded, the prompts
/// got and what the server asked of glassbox; each resource, template and prompt with how its
/// reads or gets went; the reads and gets of those exercised more than once (findings name
/// them as their phase); then what the exercise left out, and why.
pub(crate) fn surface_section(report: &AuditReport) -> Section {
    let title = "Surface exercised";
    let s = &report.surface;
    if s.is_empty() {
        return Section::new(
            title,
            Body::Note(if report.tools.is_empty() {
                "Nothing listed."
            } else {
                "Not recorded: the report was made before glassbox read resources and got prompts."
            }),
        );
    }
    let mut parts = vec![Body::Text(truncate(&tables::surface_line(s), DESCRIPTION))];
    if !s.items.is_empty() {
        parts.push(Body::Table(Table::capped(
            SURFACE,
            &s.items,
            TOOLS_CAP,
            "report.json",
            |i| {
                vec![
                    Cell::Own(i.kind.name().into()),
                    Cell::Mono(plain(&i.name, NAME)),
                    Cell::Text(tables::surface_outcomes(i)),
                    Cell::Text(tables::surface_note(i)),
                ]
            },
        )));
    }
    let rows = tables::read_rows(report);
    if !rows.is_empty() {
        parts.push(Body::Text(
            "Reads and gets of those exercised more than once; findings name the read or get as \
             their phase."
                .into(),
        ));
        parts.push(Body::Table(Table::capped(
            CALLS,
            &rows,
            TOOLS_CAP,
            "report.json",
            |r| {
                vec![
                    Cell::Mono(truncate(&r.phase, NAME)),
                    Cell::Text(truncate(&r.label, NAME)),
                    Cell::Text(r.outcome.into()),
                    Cell::Text(truncate(&r.note, WIDE)),
                ]
            },
        )));
    }
    for why in s.cut.iter().take(CUT_CAP) {
        parts.push(Body::Text(format!("Left out: {}", plain(why, DESCRIPTION))));
    }
    if s.cut.len() > CUT_CAP {
        parts.push(Body::Text(format!(
            "… and {} more left out (see report.json).",
            s.cut.len() - CUT_CAP
        )));
    }
    Section::new(title, Body::Parts(parts))
}

const TIMINGS: &[Column] = &[
    col("phase", Line::Pad),
    col("start (ms)", Line::Pad),
    col("end (ms)", Line::Pad),
    col("duration (ms)", Line::Plain),
];

/// The phases and when each started and ended.
pub(crate) fn timeline_section(ev: &Evidence) -> Section {
    let timings = &ev.manifest.timings;
    let body = if timings.is_empty() {
        Body::Note("No phase timings recorded.")
    } else {
        Body::Table(Table::capped(
            TIMINGS,
            timings,
            TIMINGS_CAP,
            "manifest.json",
            |t| {
                vec![
                    Cell::Mono(plain(&t.phase.to_string(), NAME)),
                    Cell::Ms(t.start_ns),
                    Cell::Ms(t.end_ns),
                    Cell::Ms(t.end_ns.saturating_sub(t.start_ns)),
                ]
            },
        ))
    };
    Section::new("Timeline", body)
}

/// Every section of an audit, in the order the HTML and Markdown reports show them.
pub(crate) fn all(ev: &Evidence, report: &AuditReport) -> Vec<Section> {
    let mut out = Vec::from(check_sections(report));
    out.extend(event_sections(ev));
    out.push(network_section(ev));
    out.push(tools_section(ev, report));
    out.push(surface_section(report));
    out.push(timeline_section(ev));
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::fixture;

    #[test]
    fn every_section_is_built_once_in_order() {
        let (ev, rep) = fixture::normal();
        let titles: Vec<String> = all(&ev, &rep).into_iter().map(|s| s.title).collect();
        assert_eq!(
            titles,
            [
                "Checks",
                "Findings",
                "Files touched under home",
                "Processes",
                "Connection attempts",
                "Network flows",
                "Tools (2)",
                "Surface exercised",
                "Timeline"
            ]
        );
    }

    #[test]
    fn the_surface_is_counted_listed_and_its_cut_said() {
        let (_, rep) = fixture::normal();
        let sec = surface_section(&rep);
        assert_eq!(sec.title, "Surface exercised");
        let Body::Parts(parts) = sec.body else {
            panic!("{sec:?}")
        };
        assert_eq!(
            parts[0],
            Body::Text(
                "1 of 2 tools called (1 call), 1 of 1 resource read, 1 of 1 template expanded \
                 (2 reads), 0 of 1 prompt got, 1 completion requested; the server asked: 1 \
                 elicitation/create (1 canary given), 2 sampling/createMessage"
                    .into()
            )
        );
        let Body::Table(items) = &parts[1] else {
            panic!("{parts:?}")
        };
        assert_eq!(
            items.rows[1],
            [
                Cell::Own("resource template".into()),
                Cell::Mono("file:///{path}".into()),
                Cell::Text("2 reads: ok 1, rpc error 1".into()),
                Cell::Text("1 completion; first error: no such file".into()),
            ]
        );
        assert_eq!(items.rows[2][2], Cell::Text("not got".into()));
        // The template was read twice: each read has its row, by the phase findings name.
        let Body::Table(reads) = &parts[3] else {
            panic!("{parts:?}")
        };
        assert_eq!(
            reads.rows[1][0],
            Cell::Mono("read:file:///home/user/.aws/credentials".into())
        );
        assert_eq!(
            parts[4],
            Body::Text(
                "Left out: the calls' budget ran out: 1 prompt got fewer gets than its plan".into()
            )
        );
        assert_eq!(parts.len(), 5);
        // A report made before the surface was recorded, and a server that listed nothing.
        let old = AuditReport {
            surface: Default::default(),
            ..rep.clone()
        };
        assert!(matches!(
            surface_section(&old).body,
            Body::Note(n) if n.starts_with("Not recorded")
        ));
        let nothing = AuditReport {
            tools: vec![],
            ..old
        };
        assert_eq!(
            surface_section(&nothing).body,
            Body::Note("Nothing listed.")
        );
        // A server that listed tools only, and asked nothing.
        let tools_only = glassbox_model::SurfaceSummary {
            tools_listed: 3,
            tools_called: 3,
            calls: 7,
            ..Default::default()
        };
        assert_eq!(
            tables::surface_line(&tools_only),
            "3 of 3 tools called (7 calls), no resources, templates or prompts listed; the \
             server asked nothing of glassbox"
        );
    }

    #[test]
    fn hostile_strings_are_printable_and_cut_once() {
        let (ev, rep) = fixture::hostile();
        let [checks, findings] = check_sections(&rep);
        let Body::Checks(cs) = checks.body else {
            panic!("{checks:?}")
        };
        assert!(cs.iter().all(|c| c.id.chars().count() <= NAME));
        let Body::Findings(fs) = findings.body else {
            panic!("{findings:?}")
        };
        for i in fs.iter().flat_map(|c| c.findings.shown.iter()) {
            assert!(!i.summary.contains(['\x1b', '\n', '\u{202e}']), "{i:?}");
            assert!(i.phase.as_ref().unwrap().chars().count() <= NAME);
        }
        let tools = tools_section(&ev, &rep);
        let Body::Parts(parts) = tools.body else {
            panic!("{tools:?}")
        };
        let Body::Table(t) = &parts[0] else {
            panic!("{parts:?}")
        };
        for row in &t.rows {
            let Cell::Mono(name) = &row[0] else {
                panic!("{row:?}")
            };
            assert!(name.chars().count() <= NAME && !name.contains('\x1b'));
        }
        let surface = surface_section(&rep);
        let Body::Parts(parts) = surface.body else {
            panic!("{surface:?}")
        };
        for p in &parts {
            match p {
                Body::Text(t) => assert!(!t.contains(['\x1b', '\n', '\u{202e}']), "{t:?}"),
                Body::Table(t) => {
                    for cell in t.rows.iter().flatten() {
                        let (Cell::Mono(s) | Cell::Text(s) | Cell::Own(s)) = cell else {
                            continue;
                        };
                        assert!(!s.contains(['\x1b', '\n', '\u{202e}']), "{s:?}");
                        assert!(s.chars().count() <= WIDE + 20, "{s:?}");
                    }
                }
                _ => panic!("{p:?}"),
            }
        }
        // Elicitations come first, whatever the server named its other requests.
        let Body::Text(line) = &parts[0] else {
            panic!("{parts:?}")
        };
        assert!(
            line.contains("the server asked: 1 elicitation/create (0 canaries given), 3 <script>"),
            "{line}"
        );
    }
}
