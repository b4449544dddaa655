//! Renderers of glassbox audit reports.
//!
//! This crate turns an [`AuditReport`] (and, for the terminal, the [`Evidence`] it was made
//! from) into text. It knows nothing of how the evidence was collected or how checks decide:
//! it prints what is recorded.
//!
//! # Renderers
//!
//! - [`terminal()`]: a compact summary for a person at a terminal: the target and verdict, the
//!   files touched under the sandbox home, the processes started, the connection attempts, the
//!   tools, the surface exercised (resources, templates, prompts, the server's own requests),
//!   and every check with its findings and the ids of the events behind them. Long lists
//!   are capped with "… and N more (see events.jsonl)".
//! - [`markdown()`]: the same audit as a Markdown document (tables of checks, files,
//!   processes, flows, tools, the surface exercised and the phase timeline), for pasting into
//!   an issue or a review.
//! - [`html()`]: the same audit as one self-contained HTML page (no script, no external
//!   resource, a strict Content-Security-Policy).
//! - [`json()`]: the report as pretty JSON, in the wire format documented by `glassbox-model`.
//! - [`sarif()`]: the audit as a SARIF 2.1.0 log for GitHub code scanning: every check a rule,
//!   every finding a result located at the lines of `events.jsonl` and `network.jsonl` behind
//!   it, withheld accusations written as withheld with nothing of them.
//! - [`allowlist`]: the TCP destinations a server reached, as a ToolHive permission profile
//!   and Docker MCP Gateway `allowHosts`.
//! - [`site`]: every published audit of a store as a static site: an index with statistics
//!   across servers, one [`html()`] page per audit, the coverage ledger and the recorder's
//!   blind spots.
//!
//! # Sections
//!
//! Every section the reports show (checks, findings, files, processes, connection attempts,
//! network, tools, surface exercised, timeline) is built once, as format-neutral data, by the
//! `sections` module; the HTML, Markdown and terminal renderers only render it, each with one
//! function per kind of body. The site's audit pages are the [`html()`] page.
//!
//! # Hostile strings
//!
//! Paths, argv, tool names, phases and failure messages come from the audited server, which may
//! be hostile. Every such string is printed with control characters escaped (via
//! [`glassbox_model::Bytes`]'s `Display`: `ESC` becomes `\u{1b}`, a newline `\n`) and with
//! bidirectional-override and zero-width characters escaped too, so a tool name cannot move the
//! cursor, recolor the terminal, set its title, or disguise a line. ANSI color is written only
//! when asked for, and only by this crate. The Markdown renderer then backslash-escapes
//! Markdown's and HTML's punctuation in them; the HTML renderer passes each through one
//! function escaping `& < > " '`.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

use glassbox_model::{AuditReport, Evidence, Finding};

pub use sarif::{Publication, Run as SarifRun, EVIDENCE_BASE, FINGERPRINT_KEY, RELATED_CAP};

pub mod allowlist;
mod escape;
#[cfg(test)]
mod fixture;
mod html;
mod markdown;
mod sarif;
mod sections;
pub mod site;
mod tables;
mod terminal;

/// A summary of one audit for a terminal; ANSI color only when `color` is true.
///
/// `ev` is the evidence the report was made from (for the files, processes and connections
/// sections); `report` gives the verdict, the checks and the tools.
pub fn terminal(ev: &Evidence, report: &AuditReport, color: bool) -> String {
    terminal::render(ev, report, color)
}

/// The verdict and each check's outcome and findings, without the event tables.
pub fn checks(report: &AuditReport, color: bool) -> String {
    terminal::render_checks(report, color)
}

/// The audit as a GitHub-flavored Markdown document: the target and verdict, a table of the
/// checks, the findings of each check (accusations marked "withheld until reviewed"), then
/// tables of the files touched under home, the processes, the connection attempts, the network
/// runs and flows, the tools, the surface exercised (resources, templates and prompts with
/// their reads, the server's requests, what was left out), and the phase timeline. Long lists
/// are capped like the terminal's. Every string from the server is printable and
/// backslash-escaped: it cannot form a link, an image, HTML, a code span or emphasis, nor
/// split a table cell.
pub fn markdown(ev: &Evidence, report: &AuditReport) -> String {
    markdown::render(ev, report)
}

/// The audit as one self-contained HTML5 page: inline CSS, no script, no external resource,
/// and a Content-Security-Policy `default-src 'none'; style-src 'unsafe-inline'`. It holds a
/// verdict banner, each check with its outcome and whether it makes a claim (`unverified`,
/// `not-observed` and `inconclusive` make none, with the reason), the findings with their
/// event and flow ids, and tables of files, processes, connection attempts, network flows,
/// tools (with their descriptions), the surface exercised and the phase timeline. Every string
/// from the server is printable and HTML-escaped (`& < > " '`); none is ever written into a URL
/// or a `href`, `src`, `style` or event attribute, and the page has no link at all.
pub fn html(ev: &Evidence, report: &AuditReport) -> String {
    html::render(ev, report)
}

/// The audit as a SARIF 2.1.0 log (pretty JSON, ending in a newline), for GitHub code scanning
/// and SARIF viewers: one run, every check a rule (`security-severity` from its severity, its
/// outcome in the rule's properties, and a notification when it makes no claim), every finding
/// a result at the line of `events.jsonl` (or `network.jsonl`) holding the first event (or
/// flow) behind it, with the others as related locations and a fingerprint stable across runs.
/// `publication` says what may be shown of each finding: a [`Publication::Withheld`] one is
/// written as withheld pending review, with nothing of it. [`Publication::unreviewed`] fits a
/// report as an audit made it. `ev` must be the evidence the report was made from (for the
/// lines); an event or flow it does not hold is said to have no known line.
pub fn sarif(
    ev: &Evidence,
    report: &AuditReport,
    publication: &dyn Fn(&Finding) -> Publication,
) -> String {
    sarif::render(ev, report, publication)
}

/// Several audits (the servers of one configuration) as one SARIF 2.1.0 log, a run each, in
/// order, each as [`sarif`] writes it, with `automationDetails.id` `glassbox/NAME/` and the
/// server's name in its properties.
pub fn sarif_many(runs: &[SarifRun<'_>]) -> String {
    sarif::render_many(runs)
}

/// The report as pretty-printed JSON (`report.json`).
pub fn json(report: &AuditReport) -> String {
    // An `AuditReport` has only string map keys and no non-finite floats: it always serializes.
    serde_json::to_string_pretty(report).expect("an AuditReport always serializes to JSON")
}

#[cfg(test)]
mod tests {
    use super::*;
    use glassbox_model::{CallResult, ToolSummary, Verdict};

    #[test]
    fn json_round_trips() {
        let report = AuditReport {
            glassbox_version: "0.1.0".into(),
            run_id: "r".into(),
            evidence_dir: "/tmp/r".into(),
            verdict: Verdict::Inconclusive,
            inconclusive_reason: Some("timeout".into()),
            checks: vec![],
            tools: vec![ToolSummary {
                name: "t\x1b".into(),
                called: true,
                result: CallResult::Timeout,
                calls: vec![glassbox_model::CallRecord {
                    k: 2,
                    label: "dryRun=true".into(),
                    arguments: serde_json::json!({"dryRun": true}),
                    result: CallResult::TransportFailure,
                    retry_of: None,
                    error: Some("fetch failed".into()),
                }],
            }],
            call_outcomes: [(CallResult::TransportFailure, 1)].into(),
            surface: Default::default(),
        };
        let s = json(&report);
        assert!(s.contains("\n  \"verdict\": \"inconclusive\""), "{s}");
        assert!(
            s.contains("\\u001b"),
            "JSON escapes control characters: {s}"
        );
        assert!(s.contains("\"transport_failure_at_edge\": 1"), "{s}");
        assert_eq!(serde_json::from_str::<AuditReport>(&s).unwrap(), report);
    }

    /// A schema of `schemas/`, with the others it refers to resolved in memory.
    fn validator(name: &str) -> jsonschema::Validator {
        let dir = std::path::Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../../schemas"));
        let load = |name: &str| -> serde_json::Value {
            serde_json::from_slice(&std::fs::read(dir.join(name)).unwrap())
                .unwrap_or_else(|e| panic!("{name} is JSON: {e}"))
        };
        let mut options = jsonschema::options();
        for other in [
            "events.schema.json",
            "network.schema.json",
            "manifest.schema.json",
        ] {
            options = options.with_resource(
                format!("https://glassbox.example/schemas/{other}"),
                jsonschema::Resource::from_contents(load(other)).unwrap(),
            );
        }
        options
            .build(&load(name))
            .unwrap_or_else(|e| panic!("{name} is a valid JSON Schema: {e}"))
    }

    fn errors(v: &jsonschema::Validator, instance: &serde_json::Value) -> Vec<String> {
        v.iter_errors(instance)
            .map(|e| format!("{e} at {}", e.instance_path))
            .collect()
    }

    /// The reports with a surface, and the manifests they were made from, are what the
    /// published schemas describe; the schemas refuse a surface that is not one.
    #[test]
    fn surfaces_match_the_published_schemas() {
        let report_v = validator("report.schema.json");
        let manifest_v = validator("manifest.schema.json");
        for (ev, rep) in [crate::fixture::normal(), crate::fixture::long()] {
            assert!(!rep.surface.is_empty());
            let written: serde_json::Value = serde_json::from_str(&json(&rep)).unwrap();
            assert_eq!(errors(&report_v, &written), Vec::<String>::new());
            let mut manifest = serde_json::to_value(&ev.manifest).unwrap();
            manifest["format"] = 1.into();
            assert_eq!(errors(&manifest_v, &manifest), Vec::<String>::new());
        }
        let (ev, rep) = crate::fixture::normal();
        let written: serde_json::Value = serde_json::from_str(&json(&rep)).unwrap();
        let session = serde_json::to_value(&ev.manifest.session).unwrap();
        assert_eq!(
            session["surface"][1]["reads"][0]["phase"],
            "read:file:///README.md"
        );
        assert_eq!(session["elicited"][0]["field"], "token");
        // The controls: an unknown kind, a phase that is none, a count that is not one.
        for (path, bad) in [
            ("/surface/items/0/kind", serde_json::json!("tool")),
            ("/surface/items/1/reads/0/phase", serde_json::json!("get:x")),
            ("/surface/resources_read", serde_json::json!(-1)),
            ("/surface/read_outcomes", serde_json::json!({"fine": 1})),
        ] {
            let mut broken = written.clone();
            *broken.pointer_mut(path).unwrap() = bad;
            assert!(!errors(&report_v, &broken).is_empty(), "{path}");
        }
        let mut manifest = serde_json::to_value(&ev.manifest).unwrap();
        manifest["format"] = 1.into();
        manifest["session"]["elicited"][0]["phase"] = "elicit".into();
        assert!(!errors(&manifest_v, &manifest).is_empty());
    }
}
