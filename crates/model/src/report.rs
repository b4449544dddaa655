use crate::{CallResult, Phase, SessionSummary, SurfaceKind, SurfaceRecord};
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;

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
    /// Its name, as JSON and the batch summary write it (`clean`, `flagged`, `withheld`,
    /// `inconclusive`).
    pub fn name(self) -> &'static str {
        match self {
            Verdict::Clean => "clean",
            Verdict::Flagged => "flagged",
            Verdict::Withheld => "withheld",
            Verdict::Inconclusive => "inconclusive",
        }
    }

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
    /// What of the server's whole surface the session exercised: tools, resources, resource
    /// templates and prompts, the server's own requests, and what was left out
    /// ([`SurfaceSummary::of`]); empty in reports made before it existed.
    #[serde(default, skip_serializing_if = "SurfaceSummary::is_empty")]
    pub surface: SurfaceSummary,
}

/// What of the server's surface an audit exercised, counted, with each resource, resource
/// template and prompt and its reads or gets: what the reports' "Surface exercised" section
/// shows. Made from the session's summary by [`SurfaceSummary::of`].
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SurfaceSummary {
    /// Tools the server listed.
    #[serde(default)]
    pub tools_listed: usize,
    /// Tools called at least once.
    #[serde(default)]
    pub tools_called: usize,
    /// Calls made, over every tool (those the session ended before are not counted).
    #[serde(default)]
    pub calls: usize,
    /// Resources `resources/list` listed.
    #[serde(default)]
    pub resources_listed: usize,
    /// Resources read at least once.
    #[serde(default)]
    pub resources_read: usize,
    /// Resource templates `resources/templates/list` listed.
    #[serde(default)]
    pub templates_listed: usize,
    /// Resource templates read at least once through a URI expanded from them.
    #[serde(default)]
    pub templates_expanded: usize,
    /// Reads made through the templates' expansions.
    #[serde(default)]
    pub template_reads: usize,
    /// Prompts `prompts/list` listed.
    #[serde(default)]
    pub prompts_listed: usize,
    /// Prompts got at least once.
    #[serde(default)]
    pub prompts_got: usize,
    /// `completion/complete` requests made for prompts' arguments and templates' variables.
    #[serde(default)]
    pub completions: u64,
    /// The requests the server sent to glassbox (sampling, elicitation, roots, ping...), by
    /// method, and how many of each; every one was answered. The methods are the server's.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub server_requests: BTreeMap<String, u64>,
    /// Canaries glassbox gave in answer to elicitation fields that asked for a secret (their
    /// values are in the manifest, not here).
    #[serde(default)]
    pub secrets_elicited: usize,
    /// The reads of resources and templates and the gets of prompts, counted by outcome.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub read_outcomes: BTreeMap<CallResult, usize>,
    /// Each resource, resource template and prompt exercised, with its reads or gets, as the
    /// session recorded it (names and arguments are the server's).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub items: Vec<SurfaceRecord>,
    /// What the exercise left out and why, one sentence each: the tools' exploration cut,
    /// then the surface's (budget, caps, listings that failed, capabilities not exercised).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub cut: Vec<String>,
}

impl SurfaceSummary {
    /// The surface `session` exercised, counted: the tools from its tool records, the rest
    /// from its listings and [`SessionSummary::surface`]. A read or call whose result is
    /// [`CallResult::NotCalled`] was never made and counts as none.
    pub fn of(session: &SessionSummary) -> SurfaceSummary {
        let made = |r: &CallResult| *r != CallResult::NotCalled;
        let calls = session
            .tools
            .iter()
            .map(|t| {
                if t.calls.is_empty() {
                    usize::from(t.called && made(&t.result))
                } else {
                    t.calls.iter().filter(|c| made(&c.result)).count()
                }
            })
            .sum();
        let exercised = |kind: SurfaceKind| {
            session
                .surface
                .iter()
                .filter(|s| s.kind == kind && s.reads_made() > 0)
                .count()
        };
        let mut read_outcomes = BTreeMap::new();
        for r in session.surface.iter().flat_map(|s| &s.reads) {
            *read_outcomes.entry(r.result).or_insert(0) += 1;
        }
        SurfaceSummary {
            tools_listed: session.tools.len(),
            tools_called: session.tools.iter().filter(|t| t.called).count(),
            calls,
            resources_listed: session.resources.len(),
            resources_read: exercised(SurfaceKind::Resource),
            templates_listed: session.templates.len(),
            templates_expanded: exercised(SurfaceKind::Template),
            template_reads: session
                .surface
                .iter()
                .filter(|s| s.kind == SurfaceKind::Template)
                .map(SurfaceRecord::reads_made)
                .sum(),
            prompts_listed: session.prompts.len(),
            prompts_got: exercised(SurfaceKind::Prompt),
            completions: session
                .surface
                .iter()
                .map(|s| u64::from(s.completions))
                .sum(),
            server_requests: session.server_requests.clone(),
            secrets_elicited: session.elicited.len(),
            read_outcomes,
            items: session.surface.clone(),
            cut: session
                .exploration_cut
                .iter()
                .chain(&session.surface_cut)
                .cloned()
                .collect(),
        }
    }

    /// Whether it holds nothing: a report made before it existed (or a server that listed
    /// nothing and asked nothing).
    pub fn is_empty(&self) -> bool {
        *self == SurfaceSummary::default()
    }
}

impl SurfaceRecord {
    /// The reads or gets made (those the session ended before not counted).
    pub fn reads_made(&self) -> usize {
        self.reads
            .iter()
            .filter(|r| r.result != CallResult::NotCalled)
            .count()
    }

    /// Each outcome of its reads or gets and how often, in [`CallResult`]'s order.
    pub fn outcomes(&self) -> Vec<(CallResult, usize)> {
        let mut counts = BTreeMap::new();
        for r in &self.reads {
            *counts.entry(r.result).or_insert(0) += 1;
        }
        counts.into_iter().collect()
    }
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{CallRecord, ElicitedSecret, SurfaceRead, ToolRecord};
    use serde_json::{json, Value};

    fn tool(name: &str, called: bool, results: &[CallResult]) -> ToolRecord {
        ToolRecord {
            name: name.into(),
            description: None,
            input_schema: json!({"type": "object"}),
            called,
            arguments_note: None,
            arguments: None,
            result: results.first().copied().unwrap_or(CallResult::NotCalled),
            calls: results
                .iter()
                .enumerate()
                .map(|(i, r)| CallRecord {
                    k: i as u32 + 1,
                    label: format!("set {i}"),
                    arguments: json!({}),
                    result: *r,
                    retry_of: None,
                    error: None,
                })
                .collect(),
            relisted_unchanged: None,
        }
    }

    fn read(phase: Phase, result: CallResult) -> SurfaceRead {
        SurfaceRead {
            phase,
            label: String::new(),
            arguments: Value::Null,
            result,
            error: None,
        }
    }

    fn record(kind: SurfaceKind, name: &str, reads: Vec<SurfaceRead>) -> SurfaceRecord {
        SurfaceRecord {
            kind,
            name: name.into(),
            completions: 0,
            reads,
        }
    }

    /// A session that exercised tools, resources, a template and prompts, and was asked
    /// things by the server.
    fn session() -> SessionSummary {
        use CallResult::*;
        let mut template = record(
            SurfaceKind::Template,
            "file:///{path}",
            vec![
                read(Phase::read("file:///a", 1), Ok),
                read(Phase::read("file:///b", 1), RpcError),
                read(Phase::read("file:///c", 1), NotCalled),
            ],
        );
        template.completions = 2;
        let mut prompt = record(
            SurfaceKind::Prompt,
            "summarize",
            vec![read(Phase::prompt("summarize", 1), Ok)],
        );
        prompt.completions = 1;
        SessionSummary {
            completed: true,
            tools: vec![
                tool("fetch", true, &[Ok, Ok, Timeout]),
                // A bundle made before plans: one call, in `result`.
                ToolRecord {
                    result: ToolError,
                    ..tool("old", true, &[])
                },
                tool("never", false, &[]),
                // Its second call never made: the session ended first.
                tool("cut", true, &[Ok, NotCalled]),
            ],
            exploration_cut: Some("the calls' budget ran out".into()),
            resources: vec!["a".into(), "b".into(), "c".into()],
            templates: vec!["file:///{path}".into()],
            prompts: vec!["summarize".into(), "unused".into()],
            surface: vec![
                record(
                    SurfaceKind::Resource,
                    "mem://a",
                    vec![read(Phase::read("mem://a", 1), Ok)],
                ),
                record(
                    SurfaceKind::Resource,
                    "mem://b",
                    vec![read(Phase::read("mem://b", 1), NotCalled)],
                ),
                template,
                prompt,
                record(SurfaceKind::Prompt, "unused", vec![]),
            ],
            surface_cut: vec!["more than 2 resources listed".into()],
            server_requests: [
                ("elicitation/create".to_string(), 2),
                ("sampling/createMessage".to_string(), 1),
            ]
            .into(),
            elicited: vec![ElicitedSecret {
                phase: Phase::call("fetch", 2),
                field: "token".into(),
                value: "ghp_canary".into(),
            }],
            ..SessionSummary::default()
        }
    }

    #[test]
    fn the_surface_is_counted_from_the_session() {
        let s = SurfaceSummary::of(&session());
        assert_eq!((s.tools_listed, s.tools_called, s.calls), (4, 3, 5));
        assert_eq!((s.resources_listed, s.resources_read), (3, 1));
        assert_eq!(
            (s.templates_listed, s.templates_expanded, s.template_reads),
            (1, 1, 2)
        );
        assert_eq!((s.prompts_listed, s.prompts_got), (2, 1));
        assert_eq!(s.completions, 3);
        assert_eq!(s.server_requests["elicitation/create"], 2);
        assert_eq!(s.secrets_elicited, 1);
        assert_eq!(
            s.read_outcomes,
            [
                (CallResult::Ok, 3),
                (CallResult::RpcError, 1),
                (CallResult::NotCalled, 2)
            ]
            .into()
        );
        assert_eq!(s.items.len(), 5);
        assert_eq!(s.items[2].reads_made(), 2);
        assert_eq!(
            s.items[2].outcomes(),
            [
                (CallResult::Ok, 1),
                (CallResult::RpcError, 1),
                (CallResult::NotCalled, 1)
            ]
        );
        assert_eq!(
            s.cut,
            ["the calls' budget ran out", "more than 2 resources listed"]
        );
        assert!(!s.is_empty());
        // The canary's value stays in the manifest.
        let json = serde_json::to_string(&s).unwrap();
        assert!(!json.contains("ghp_canary"), "{json}");
        assert_eq!(serde_json::from_str::<SurfaceSummary>(&json).unwrap(), s);
        assert!(SurfaceSummary::of(&SessionSummary::default()).is_empty());
    }

    #[test]
    fn reports_without_a_surface_still_parse_and_write_none() {
        let report = AuditReport {
            glassbox_version: "0.1.0".into(),
            run_id: "r".into(),
            evidence_dir: "/tmp/r".into(),
            verdict: Verdict::Clean,
            inconclusive_reason: None,
            checks: vec![],
            tools: vec![],
            call_outcomes: Default::default(),
            surface: SurfaceSummary::default(),
        };
        let json = serde_json::to_value(&report).unwrap();
        assert!(json.get("surface").is_none(), "{json}");
        assert_eq!(serde_json::from_value::<AuditReport>(json).unwrap(), report);
        let with = AuditReport {
            surface: SurfaceSummary::of(&session()),
            ..report
        };
        let json = serde_json::to_value(&with).unwrap();
        assert_eq!(json["surface"]["read_outcomes"]["rpc_error"], 1);
        assert_eq!(json["surface"]["items"][2]["kind"], "template");
        assert_eq!(serde_json::from_value::<AuditReport>(json).unwrap(), with);
    }
}

/// One check's line of the coverage ledger: the labelled examples behind it (made by
/// `glassbox_audit::coverage::ledger`, shown by `glassbox coverage` and the site).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq, Eq)]
pub struct CoverageRow {
    /// Check id.
    pub id: String,
    /// Version.
    pub version: u32,
    /// Controls that must flag.
    pub positive_controls: usize,
    /// Controls that must pass.
    pub negative_controls: usize,
    /// Known gaps (todo controls).
    pub known_gaps: usize,
    /// Regression cases naming the check.
    pub regression_cases: usize,
    /// Fewer than three labelled examples of a kind.
    pub fragile: bool,
}
