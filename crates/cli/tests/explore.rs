//! `--explore`: a branch behind a tool's boolean or `oneOf` option is reached by the plan of
//! calls and missed by one call per tool, in the real sandbox, through the binary (issue 20).

mod common;

use common::{fixtures, text};
use glassbox_model::{AuditReport, CallResult, Outcome};
use std::path::PathBuf;
use std::process::Command;

/// Audits the control `name` (capture run only) with `--explore explore`; its JSON report.
fn audit(name: &str, explore: &str) -> AuditReport {
    let dir = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!(
        "glassbox-explore-{name}-{explore}-{}",
        std::process::id()
    ));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    let case = fixtures().join(name);
    let program = if case.join("server.py").exists() {
        ["python3", "server.py"]
    } else {
        ["node", "server.js"]
    };
    let json = dir.join("report.json");
    let out = Command::new(env!("CARGO_BIN_EXE_glassbox"))
        .current_dir(&case)
        .env("GLASSBOX_STATE_DIR", &dir)
        .args(["audit", "--quiet", "--no-selftest", "--network", "capture"])
        .arg("--ro")
        .arg(fixtures().join("lib"))
        .args(["--explore", explore, "--evidence"])
        .arg(dir.join("evidence"))
        .arg("--json")
        .arg(&json)
        .arg("--")
        .args(program)
        .output()
        .unwrap();
    assert!(
        matches!(out.status.code(), Some(0 | 1 | 3)),
        "not an audit: {}",
        text(&out)
    );
    let report = serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap();
    let _ = std::fs::remove_dir_all(&dir);
    report
}

fn credential_probe(r: &AuditReport) -> &glassbox_model::CheckResult {
    r.checks
        .iter()
        .find(|c| c.id == "credential-probe")
        .unwrap()
}

/// Nothing found: `pass`, or `unverified` where this build has no selftest record (the
/// tests do not run the selftest first).
fn found_nothing(r: &AuditReport) {
    let c = credential_probe(r);
    assert!(
        c.findings.is_empty() && matches!(c.outcome, Outcome::Pass | Outcome::Unverified),
        "{c:?}"
    );
}

#[test]
fn a_branch_behind_a_boolean_is_reached_by_the_plan_and_missed_by_one_call() {
    let single = audit("boolean-gates-credential-copy", "single");
    found_nothing(&single);
    assert_eq!(single.tools[0].calls.len(), 1);

    let quick = audit("boolean-gates-credential-copy", "quick");
    let check = credential_probe(&quick);
    assert_eq!(check.outcome, Outcome::Flag, "{check:?}");
    // The finding names the call that reached the read, and that call's arguments are in
    // the report: the boolean flipped.
    let phase = check.findings[0].phase.as_ref().unwrap();
    let (tool, k) = phase.call_of().unwrap();
    let call = &quick.tools.iter().find(|t| t.name == tool).unwrap().calls[k as usize - 1];
    assert_eq!(
        call.arguments["includeSecrets"],
        serde_json::json!(true),
        "{call:?}"
    );
    assert_eq!(call.label, "includeSecrets=true");
    assert!(k > 1);
    let total: usize = quick.call_outcomes.values().sum();
    assert_eq!(total, quick.tools[0].calls.len());
    assert_eq!(quick.call_outcomes.get(&CallResult::Ok), Some(&total));
}

#[test]
fn a_one_of_option_is_reached_by_the_plan_and_missed_by_one_call() {
    let single = audit("one-of-branch-reads-ssh-key-node", "single");
    found_nothing(&single);
    let quick = audit("one-of-branch-reads-ssh-key-node", "quick");
    assert_eq!(credential_probe(&quick).outcome, Outcome::Flag);
    let calls = &quick.tools[0].calls;
    assert!(
        calls.iter().any(|c| c.arguments["source"]["kind"] == "ssh"),
        "{calls:?}"
    );
}

#[test]
fn a_path_argument_reaches_outside_the_workspace_because_the_input_named_it() {
    let check = |r: &AuditReport, id: &str| r.checks.iter().find(|c| c.id == id).cloned().unwrap();
    let single = audit("reads-any-path-it-is-given", "single");
    assert!(check(&single, "input-exposure").findings.is_empty());
    let quick = audit("reads-any-path-it-is-given", "quick");
    let input = check(&quick, "input-exposure");
    assert_eq!(input.outcome, Outcome::Flag, "{input:?}");
    assert!(
        input.findings.iter().any(|f| f.summary.starts_with(
            "the tool opened a file outside the workspace because its input named it: \
             ~/.aws/credentials"
        ) && !f.accusation),
        "{input:?}"
    );
    // The planted credential was read because the input named it: not credential theft.
    let cred = check(&quick, "credential-probe");
    assert!(cred.findings.is_empty(), "{cred:?}");
    assert!(
        cred.notes.iter().any(|n| n.summary.contains("named it")),
        "{cred:?}"
    );
}
