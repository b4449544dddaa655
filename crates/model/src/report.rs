use crate::{CallResult, Phase};
use serde::{Deserialize, Serialize};

/// The outcome of one check in one run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Outcome {
    /// Observed, nothing found.
    Pass,
    /// Something found: see the findings.
    Flag,
    /// The check has no passing positive control in this build: no claim is made.
    Unverified,
    /// A channel the check needs was not available in this run.
    NotObserved,
    /// The run did not complete (crash, timeout, protocol failure): no claim is made.
    Inconclusive,
    /// Made by a check version since retracted as defective: its claim and findings are
    /// withdrawn (the reason says why).
    Retracted,
}

/// The verdict on a server.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Verdict {
    /// Every check passed on a completed run.
    Clean,
    /// At least one check flagged.
    Flagged,
    /// An accusation awaits a person's review before it is published.
    Withheld,
    /// The run did not complete: see `inconclusive_reason`.
    Inconclusive,
}

impl Verdict {
    /// The exit status of `glassbox audit` for this verdict.
    pub fn exit_code(self) -> i32 {
        match self {
            Verdict::Clean => 0,
            Verdict::Flagged | Verdict::Withheld => 1,
            Verdict::Inconclusive => 3,
        }
    }
}

/// Severity of a check's findings.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Severity {
    /// Worth knowing.
    Info,
    /// Needs a look.
    Medium,
    /// Dangerous.
    High,
}

/// One thing a check found, with the evidence behind it.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Finding {
    /// The check that produced it.
    pub check: String,
    /// The version of that check.
    pub version: u32,
    /// One line saying what was found.
    pub summary: String,
    /// Ids of the events behind it (see [`crate::Event::id`]).
    pub evidence: Vec<u64>,
    /// The phase it happened in (of the first event).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub phase: Option<Phase>,
    /// Whether it accuses the server (credential theft, exfiltration, poisoned
    /// descriptions): withheld until a person has reviewed it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub accusation: bool,
    /// Ids of the flows behind it (see [`crate::Flow::id`]), for findings about network
    /// traffic.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub flows: Vec<u64>,
}

/// The result of one check.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CheckResult {
    /// Stable check id.
    pub id: String,
    /// Version of its logic.
    pub version: u32,
    /// The claim it makes when it passes.
    pub claim: String,
    /// Severity of its findings.
    pub severity: Severity,
    /// The outcome.
    pub outcome: Outcome,
    /// Why the outcome is `not-observed`, `unverified` or `inconclusive`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reason: Option<String>,
    /// What it found (each finding makes the outcome `flag`).
    pub findings: Vec<Finding>,
    /// What it lists without flagging (for example every spawned process).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub notes: Vec<Finding>,
}

/// A tool in the report.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolSummary {
    /// The tool's name.
    pub name: String,
    /// Whether it was called.
    pub called: bool,
    /// What the call returned; with several calls, what the first returned.
    pub result: CallResult,
    /// Every call, with its arguments and outcome (empty in reports made before tools had
    /// plans).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub calls: Vec<crate::CallRecord>,
}

impl ToolSummary {
    /// Each outcome of the tool's calls and how often, in [`CallResult`]'s order; the one
    /// `result` for a report without calls.
    pub fn outcomes(&self) -> Vec<(CallResult, usize)> {
        let mut counts = std::collections::BTreeMap::new();
        if self.calls.is_empty() {
            if self.called {
                counts.insert(self.result, 1);
            }
        } else {
            for c in &self.calls {
                *counts.entry(c.result).or_insert(0) += 1;
            }
        }
        counts.into_iter().collect()
    }
}

/// The report of one audit: `report.json`, and what `--json FILE` writes.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct AuditReport {
    /// The glassbox version.
    pub glassbox_version: String,
    /// The run id (the evidence bundle's folder name).
    pub run_id: String,
    /// Where the evidence bundle is.
    pub evidence_dir: String,
    /// The verdict on the server.
    pub verdict: Verdict,
    /// Why the verdict is inconclusive.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub inconclusive_reason: Option<String>,
    /// Every check's result.
    pub checks: Vec<CheckResult>,
    /// The tools the server listed.
    pub tools: Vec<ToolSummary>,
    /// The audit's calls, counted by outcome over every tool ([`AuditReport::count_calls`]);
    /// empty in reports made before it existed.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub call_outcomes: std::collections::BTreeMap<CallResult, usize>,
}

impl AuditReport {
    /// The calls of `tools`, counted by outcome: what [`AuditReport::call_outcomes`] holds.
    pub fn count_calls(tools: &[ToolSummary]) -> std::collections::BTreeMap<CallResult, usize> {
        let mut counts = std::collections::BTreeMap::new();
        for (outcome, n) in tools.iter().flat_map(ToolSummary::outcomes) {
            *counts.entry(outcome).or_insert(0) += n;
        }
        counts
    }
}
