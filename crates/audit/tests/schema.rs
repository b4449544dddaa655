//! The JSON report validates against the published schema (`schemas/report.schema.json`):
//! real output of a real audit (a withheld verdict with findings, notes and flows), the stored
//! report of a regression bundle, and, as a control, a report the schema must refuse.

use glassbox_audit::{audit, AuditOptions, Quiet};
use glassbox_checks::Proofs;
use serde_json::Value;
use std::path::Path;

fn root() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

fn validator() -> jsonschema::Validator {
    let schema: Value = serde_json::from_slice(
        &std::fs::read(root().join("schemas/report.schema.json")).expect("the schema"),
    )
    .expect("the schema is JSON");
    jsonschema::validator_for(&schema).expect("the schema is a valid JSON Schema")
}

fn errors(v: &jsonschema::Validator, instance: &Value) -> Vec<String> {
    v.iter_errors(instance)
        .map(|e| format!("{} at {}", e, e.instance_path))
        .collect()
}

#[test]
fn real_reports_match_the_published_schema() {
    let v = validator();
    let fixtures = root().join("fixtures");
    let dir = fixtures
        .join("honeytoken-base64-http-body")
        .canonicalize()
        .unwrap();
    let mut o = AuditOptions::new(vec!["python3".into(), "server.py".into()], dir);
    o.extra_ro = vec![fixtures.join("lib").canonicalize().unwrap()];
    let evidence = std::env::temp_dir().join(format!("glassbox-schema-{}", std::process::id()));
    o.evidence_dir = Some(evidence.clone());
    o.proofs = Some(Proofs::all_proven());
    let a = audit(&o, &Quiet).expect("audit");
    let written: Value =
        serde_json::from_slice(&std::fs::read(evidence.join("report.json")).unwrap()).unwrap();
    assert_eq!(written["verdict"], "withheld");
    assert!(written["checks"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c["findings"][0]["flows"].is_array()));
    assert_eq!(errors(&v, &written), Vec::<String>::new());
    // What `--json` prints is the same document.
    let printed: Value = serde_json::from_str(&glassbox_report::json(&a.report)).unwrap();
    assert_eq!(errors(&v, &printed), Vec::<String>::new());
    let _ = std::fs::remove_dir_all(evidence);

    for entry in std::fs::read_dir(root().join("regressions"))
        .unwrap()
        .flatten()
    {
        let report = entry.path().join("report.json");
        if report.exists() {
            let stored: Value = serde_json::from_slice(&std::fs::read(&report).unwrap()).unwrap();
            assert_eq!(
                errors(&v, &stored),
                Vec::<String>::new(),
                "{}",
                report.display()
            );
        }
    }

    // The control: the schema refuses what is not a report.
    let mut broken = written.clone();
    broken["verdict"] = "fine".into();
    assert!(!errors(&v, &broken).is_empty());
    let mut broken = written;
    broken["checks"][0]["outcome"] = "flag".into();
    broken["checks"][0]["findings"] = Value::Array(vec![]);
    assert!(!errors(&v, &broken).is_empty(), "a flag without findings");
}
