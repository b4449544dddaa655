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
//!   tools, and every check with its findings and the ids of the events behind them. Long lists
//!   are capped with "… and N more (see events.jsonl)".
//! - [`json()`]: the report as pretty JSON, in the wire format documented by `glassbox-model`.
//! - [`allowlist`]: the TCP destinations a server reached, as a ToolHive permission profile
//!   and Docker MCP Gateway `allowHosts`.
//!
//! # Hostile strings
//!
//! Paths, argv, tool names, phases and failure messages come from the audited server, which may
//! be hostile. Every such string is printed with control characters escaped (via
//! [`glassbox_model::Bytes`]'s `Display`: `ESC` becomes `\u{1b}`, a newline `\n`) and with
//! bidirectional-override and zero-width characters escaped too, so a tool name cannot move the
//! cursor, recolor the terminal, set its title, or disguise a line. ANSI color is written only
//! when asked for, and only by this crate.
#![deny(missing_docs)]

use glassbox_model::{AuditReport, Evidence};

pub mod allowlist;
mod escape;
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
            }],
        };
        let s = json(&report);
        assert!(s.contains("\n  \"verdict\": \"inconclusive\""), "{s}");
        assert!(
            s.contains("\\u001b"),
            "JSON escapes control characters: {s}"
        );
        assert_eq!(serde_json::from_str::<AuditReport>(&s).unwrap(), report);
    }
}
