//! Audits go to the store; a withheld accusation waits for review; accepting publishes it;
//! rejecting records who and why and keeps the run as a regression case on which the check
//! must pass.

use std::path::{Path, PathBuf};
use std::process::Command;

fn tmp(name: &str) -> PathBuf {
    let p = std::env::temp_dir().join(format!("glassbox-review-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&p);
    p
}

fn glassbox(store: &Path) -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_glassbox"));
    c.env("GLASSBOX_STORE", store);
    c
}

fn audit(store: &Path, fixture: &str, evidence: &Path) {
    let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures")
        .join(fixture)
        .canonicalize()
        .unwrap();
    let out = glassbox(store)
        .current_dir(&dir)
        .args([
            "audit",
            "--no-selftest",
            "--network",
            "capture",
            "--quiet",
            "--evidence",
        ])
        .arg(evidence)
        .arg("--ro")
        .arg(dir.join("../lib").canonicalize().unwrap())
        .args(["--", "python3", "server.py"])
        .output()
        .unwrap();
    assert_eq!(
        out.status.code(),
        Some(1),
        "{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
}

fn run(store: &Path, args: &[&str]) -> String {
    let out = glassbox(store).args(args).output().unwrap();
    assert!(
        out.status.success(),
        "{args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// The result of check `id` in a JSON report.
fn check_of(report: &serde_json::Value, id: &str) -> serde_json::Value {
    report["checks"]
        .as_array()
        .unwrap()
        .iter()
        .find(|c| c["id"] == id)
        .unwrap_or_else(|| panic!("no {id} in the report"))
        .clone()
}

/// The id of the first withheld finding of `check`.
fn withheld(store: &Path, check: &str) -> String {
    run(store, &["review", "list"])
        .lines()
        .find(|l| l.contains(check))
        .and_then(|l| l.split_whitespace().next())
        .unwrap_or_else(|| panic!("no withheld {check} finding"))
        .to_string()
}

#[test]
fn withheld_findings_are_accepted_or_rejected_into_regression_cases() {
    let root = tmp("root");
    std::fs::create_dir_all(&root).unwrap();
    let store = root.join("store.sqlite");

    audit(&store, "returns-npmrc-in-tool-result", &root.join("ev1"));
    let id = withheld(&store, "credential-probe");
    let shown = run(&store, &["review", "show", &id]);
    assert!(shown.contains("status    Withheld"), "{shown}");
    assert!(shown.contains(".npmrc"), "{shown}");
    let accepted = run(
        &store,
        &[
            "review",
            "accept",
            &id,
            "--note",
            "reads the key",
            "--reviewer",
            "ana",
        ],
    );
    assert!(accepted.contains("published"), "{accepted}");
    let shown = run(&store, &["review", "show", &id]);
    assert!(shown.contains("status    Published"), "{shown}");
    assert!(shown.contains("Accept by ana"), "{shown}");
    // Accepted, the accusation is published as a finding like any other: the report says
    // flagged, and no renderer calls it withheld.
    let report: serde_json::Value =
        serde_json::from_str(&run(&store, &["report", "1", "--format", "json"])).unwrap();
    assert_eq!(report["verdict"], "flagged", "{report}");
    let cred = check_of(&report, "credential-probe");
    assert!(
        cred["findings"].as_array().unwrap().iter().all(
            |f| f["accusation"] != true && !f["summary"].as_str().unwrap().contains("withheld")
        ),
        "{cred}"
    );
    for format in ["md", "html", "terminal"] {
        let text = run(&store, &["report", "1", "--format", format]);
        assert!(
            !text.contains("withheld until reviewed"),
            "{format}: {text}"
        );
    }
    // A finding is reviewed once.
    let again = glassbox(&store)
        .args(["review", "reject", &id, "--reason", "x", "--regressions"])
        .arg(root.join("never-written"))
        .output()
        .unwrap();
    assert!(!again.status.success());
    assert!(!root.join("never-written").exists());

    audit(
        &store,
        "poisoned-description-reads-ssh-key",
        &root.join("ev2"),
    );
    // Without --regressions, the case goes beside the store (not into the source tree).
    let regressions = root.join("regressions");
    // Published, the report withholds the accusations awaiting review (nothing of them shown).
    let report: serde_json::Value =
        serde_json::from_str(&run(&store, &["report", "2", "--format", "json"])).unwrap();
    assert_eq!(report["verdict"], "withheld");
    let descriptions = check_of(&report, "description-exfil-pattern");
    let summaries: Vec<&str> = descriptions["findings"]
        .as_array()
        .unwrap()
        .iter()
        .map(|f| f["summary"].as_str().unwrap())
        .collect();
    assert_eq!(summaries.len(), 1, "{summaries:?}");
    assert!(
        summaries[0].contains("withheld until a person has reviewed"),
        "{summaries:?}"
    );
    let full = run(
        &store,
        &["report", "2", "--format", "json", "--include-withheld"],
    );
    assert!(full.contains("IMPORTANT"), "the reviewer sees everything");
    // Every finding of the check in that run is rejected; the last rejection makes the case.
    let mut last = String::new();
    loop {
        let list = run(&store, &["review", "list"]);
        let Some(id) = list
            .lines()
            .find(|l| l.contains("description-exfil-pattern"))
            .and_then(|l| l.split_whitespace().next())
        else {
            break;
        };
        last = run(
            &store,
            &[
                "review",
                "reject",
                id,
                "--reason",
                "the description is documentation",
                "--reviewer",
                "ben",
            ],
        );
        assert!(last.contains("rejected"), "{last}");
    }
    assert!(last.contains("regression case"), "{last}");
    let case = std::fs::read_dir(&regressions)
        .unwrap()
        .flatten()
        .next()
        .expect("a regression case")
        .path();
    for f in [
        "manifest.json",
        "events.jsonl",
        "transcript.jsonl",
        "report.json",
    ] {
        assert!(case.join(f).exists(), "{f} kept in {}", case.display());
    }
    let expected: serde_json::Value =
        serde_json::from_slice(&std::fs::read(case.join("expected.json")).unwrap()).unwrap();
    assert_eq!(expected["checks"]["description-exfil-pattern"], "pass");
    assert!(expected["why"]
        .as_str()
        .unwrap()
        .contains("the description is documentation"));
    // Rejected everywhere, the check's claim holds in the published report.
    let report: serde_json::Value =
        serde_json::from_str(&run(&store, &["report", "2", "--format", "json"])).unwrap();
    let descriptions = check_of(&report, "description-exfil-pattern");
    assert_eq!(descriptions["outcome"], "pass", "{descriptions}");
    for format in ["md", "html", "terminal"] {
        assert!(!run(&store, &["report", "2", "--format", format]).is_empty());
    }
    let _ = std::fs::remove_dir_all(root);
}
