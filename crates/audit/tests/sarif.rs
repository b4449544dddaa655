//! The SARIF log of a real audit validates against the official SARIF 2.1.0 schema
//! (`schemas/vendor/sarif-2.1.0-rtm.5.json`, draft-04) and meets what GitHub code scanning
//! requires of an upload: every result names a rule of the run, has a location with a file and
//! a `startLine` of at least 1, and a fingerprint; every rule has a `security-severity` and the
//! `security` tag. The locations are checked against the bundle on disk: the line a result
//! points at in `events.jsonl` (or `network.jsonl`) holds the event (or flow) it names. Withheld
//! accusations show nothing of themselves. As controls, broken logs are refused by the schema
//! and by the code scanning checks.

use glassbox_audit::{audit, AuditOptions, Quiet};
use glassbox_checks::Proofs;
use glassbox_model::Outcome;
use glassbox_report::{Publication, EVIDENCE_BASE, FINGERPRINT_KEY};
use serde_json::Value;
use std::collections::HashSet;
use std::path::Path;

fn root() -> &'static Path {
    Path::new(concat!(env!("CARGO_MANIFEST_DIR"), "/../.."))
}

fn validator() -> jsonschema::Validator {
    let schema: Value = serde_json::from_slice(
        &std::fs::read(root().join("schemas/vendor/sarif-2.1.0-rtm.5.json"))
            .expect("the vendored SARIF schema"),
    )
    .expect("the schema is JSON");
    assert_eq!(schema["$schema"], "http://json-schema.org/draft-04/schema#");
    jsonschema::validator_for(&schema).expect("the SARIF schema is a valid JSON Schema")
}

fn schema_errors(v: &jsonschema::Validator, instance: &Value) -> Vec<String> {
    v.iter_errors(instance)
        .map(|e| format!("{} at {}", e, e.instance_path))
        .collect()
}

/// What GitHub code scanning requires of an uploaded log, beyond the schema.
fn code_scanning_problems(log: &Value) -> Vec<String> {
    let mut out = Vec::new();
    let Some(runs) = log["runs"].as_array() else {
        return vec!["no runs".into()];
    };
    for (ri, run) in runs.iter().enumerate() {
        let rules = run["tool"]["driver"]["rules"]
            .as_array()
            .cloned()
            .unwrap_or_default();
        for (i, rule) in rules.iter().enumerate() {
            let sev = rule["properties"]["security-severity"]
                .as_str()
                .and_then(|s| s.parse::<f64>().ok());
            if !sev.is_some_and(|s| (0.0..=10.0).contains(&s)) {
                out.push(format!("run {ri} rule {i}: no numeric security-severity"));
            }
            let tags = rule["properties"]["tags"].as_array();
            if !tags.is_some_and(|t| t.iter().any(|t| t == "security")) {
                out.push(format!("run {ri} rule {i}: no security tag"));
            }
            if rule["shortDescription"]["text"].as_str().is_none() {
                out.push(format!("run {ri} rule {i}: no shortDescription"));
            }
        }
        let mut fingerprints = HashSet::new();
        for (i, r) in run["results"]
            .as_array()
            .cloned()
            .unwrap_or_default()
            .iter()
            .enumerate()
        {
            let what = format!("run {ri} result {i}");
            let index = r["ruleIndex"].as_u64().map(|x| x as usize);
            match (r["ruleId"].as_str(), index.and_then(|x| rules.get(x))) {
                (Some(id), Some(rule)) if rule["id"] == id => {}
                _ => out.push(format!("{what}: ruleId/ruleIndex is not a rule of the run")),
            }
            let located = r["locations"]
                .as_array()
                .and_then(|l| l.first())
                .is_some_and(|l| {
                    let p = &l["physicalLocation"];
                    p["artifactLocation"]["uri"]
                        .as_str()
                        .is_some_and(|u| !u.is_empty())
                        && p["region"]["startLine"].as_u64().is_some_and(|n| n >= 1)
                });
            if !located {
                out.push(format!("{what}: no location with a uri and a startLine"));
            }
            match r["partialFingerprints"][FINGERPRINT_KEY].as_str() {
                Some(fp) => {
                    if !fingerprints.insert((r["ruleId"].clone(), fp.to_string())) {
                        out.push(format!("{what}: fingerprint not unique"));
                    }
                }
                None => out.push(format!("{what}: no fingerprint")),
            }
            if r["message"]["text"].as_str().is_none() {
                out.push(format!("{what}: no message text"));
            }
        }
    }
    out
}

/// The JSON on line `n` (from 1) of a bundle file.
fn line(text: &str, n: u64) -> Value {
    let l = text
        .lines()
        .nth(n as usize - 1)
        .unwrap_or_else(|| panic!("no line {n}"));
    serde_json::from_str(l).expect("a JSON line")
}

/// Every location of a published result is the line holding the event or flow it names: the
/// primary one the first named, the related ones the others.
fn check_lines(log: &Value, events: &str, network: &str) -> usize {
    let mut checked = 0;
    for r in log["runs"][0]["results"].as_array().unwrap() {
        if r["properties"]["publication"] == "withheld" && r["properties"]["eventIds"].is_null() {
            continue;
        }
        let ids: Vec<(&str, u64)> = r["properties"]["eventIds"]
            .as_array()
            .unwrap()
            .iter()
            .map(|i| ("events.jsonl", i.as_u64().unwrap()))
            .chain(
                r["properties"]["flowIds"]
                    .as_array()
                    .unwrap()
                    .iter()
                    .map(|i| ("network.jsonl", i.as_u64().unwrap())),
            )
            .collect();
        let locations: Vec<&Value> = r["locations"]
            .as_array()
            .unwrap()
            .iter()
            .chain(r["relatedLocations"].as_array().into_iter().flatten())
            .collect();
        if ids.is_empty() {
            assert_eq!(
                locations[0]["physicalLocation"]["artifactLocation"]["uri"],
                "report.json"
            );
            continue;
        }
        for (loc, (file, id)) in locations.iter().zip(&ids) {
            let p = &loc["physicalLocation"];
            assert_eq!(p["artifactLocation"]["uri"], *file);
            assert_eq!(p["artifactLocation"]["uriBaseId"], EVIDENCE_BASE);
            let n = p["region"]["startLine"].as_u64().expect("a known line");
            let text = if *file == "events.jsonl" {
                events
            } else {
                network
            };
            assert_eq!(line(text, n)["id"], *id, "{file}:{n} holds {id}");
            checked += 1;
        }
    }
    checked
}

#[test]
fn a_real_audit_as_sarif_passes_the_schema_and_code_scanning() {
    let v = validator();
    let fixtures = root().join("fixtures");
    let dir = fixtures
        .join("honeytoken-base64-http-body")
        .canonicalize()
        .unwrap();
    let mut o = AuditOptions::new(vec!["python3".into(), "server.py".into()], dir);
    o.extra_ro = vec![fixtures.join("lib").canonicalize().unwrap()];
    let evidence = std::env::temp_dir().join(format!("glassbox-sarif-{}", std::process::id()));
    o.evidence_dir = Some(evidence.clone());
    o.proofs = Some(Proofs::all_proven());
    let a = audit(&o, &Quiet).expect("audit");
    let events = std::fs::read_to_string(evidence.join("events.jsonl")).unwrap();
    let network = std::fs::read_to_string(evidence.join("network.jsonl")).unwrap();

    // As `audit --sarif` writes it: accusations withheld.
    let text = glassbox_report::sarif(&a.evidence, &a.report, &Publication::unreviewed);
    let log: Value = serde_json::from_str(&text).unwrap();
    assert_eq!(schema_errors(&v, &log), Vec::<String>::new());
    assert_eq!(code_scanning_problems(&log), Vec::<String>::new());
    let run = &log["runs"][0];
    let rules = run["tool"]["driver"]["rules"].as_array().unwrap();
    assert_eq!(rules.len(), a.report.checks.len());
    for (rule, c) in rules.iter().zip(&a.report.checks) {
        assert_eq!(rule["id"], c.id.as_str());
        assert_eq!(rule["properties"]["version"], c.version);
        assert_eq!(
            rule["properties"]["outcome"],
            serde_json::to_value(c.outcome).unwrap()
        );
    }
    let results = run["results"].as_array().unwrap();
    let findings: usize = a.report.checks.iter().map(|c| c.findings.len()).sum();
    assert_eq!(results.len(), findings);

    // The audit withholds accusations (a planted secret read and sent): nothing of them shows.
    let accusations: Vec<&glassbox_model::Finding> = a
        .report
        .checks
        .iter()
        .flat_map(|c| &c.findings)
        .filter(|f| f.accusation)
        .collect();
    assert!(!accusations.is_empty());
    for f in &accusations {
        assert!(
            !text.contains(&f.summary),
            "withheld summary shown: {}",
            f.summary
        );
    }
    let withheld: Vec<&Value> = results
        .iter()
        .filter(|r| r["properties"]["publication"] == "withheld")
        .collect();
    assert_eq!(withheld.len(), accusations.len());
    for r in &withheld {
        assert!(r["properties"]["eventIds"].is_null());
        assert!(r["relatedLocations"].is_null());
        assert!(r["message"]["text"]
            .as_str()
            .unwrap()
            .starts_with("withheld until a person has reviewed it"));
    }
    // What is published (unexplained egress, the attempts of the denied run) points at the
    // lines of its events and flows in the bundle.
    let published: Vec<&Value> = results
        .iter()
        .filter(|r| r["properties"]["publication"] == "published")
        .collect();
    assert!(published
        .iter()
        .any(|r| r["ruleId"] == "unexplained-egress"));
    assert!(check_lines(&log, &events, &network) > 0);
    let base = &run["originalUriBaseIds"][EVIDENCE_BASE]["uri"];
    assert!(
        base.as_str().unwrap().starts_with("file:///"),
        "the bundle's URI: {base}"
    );

    // Checks that make no claim are not dropped.
    let notified: HashSet<&str> = run["invocations"][0]["toolExecutionNotifications"]
        .as_array()
        .unwrap()
        .iter()
        .filter_map(|n| n["associatedRule"]["id"].as_str())
        .collect();
    for c in &a.report.checks {
        let no_claim = matches!(
            c.outcome,
            Outcome::Unverified | Outcome::NotObserved | Outcome::Inconclusive | Outcome::Retracted
        );
        assert_eq!(notified.contains(c.id.as_str()), no_claim, "{}", c.id);
    }

    // Shown in full (accepted on review): the accusations' events and flows are located too.
    let full: Value =
        serde_json::from_str(&glassbox_report::sarif(&a.evidence, &a.report, &|_| {
            Publication::Published
        }))
        .unwrap();
    assert_eq!(schema_errors(&v, &full), Vec::<String>::new());
    assert_eq!(code_scanning_problems(&full), Vec::<String>::new());
    let located = check_lines(&full, &events, &network);
    assert!(located > check_lines(&log, &events, &network));
    assert!(full["runs"][0]["results"]
        .as_array()
        .unwrap()
        .iter()
        .any(|r| r["ruleId"] == "canary-exfiltration"
            && r["relatedLocations"]
                .as_array()
                .into_iter()
                .flatten()
                .any(|l| l["physicalLocation"]["artifactLocation"]["uri"] == "network.jsonl")));

    // From the bundle on disk (what `glassbox report --format sarif` reads), the same log.
    let loaded = glassbox_model::bundle::load(&evidence).expect("the bundle");
    let stored: glassbox_model::AuditReport =
        serde_json::from_slice(&std::fs::read(evidence.join("report.json")).unwrap()).unwrap();
    assert_eq!(
        glassbox_report::sarif(&loaded, &stored, &Publication::unreviewed),
        text
    );

    // Fingerprints do not depend on event ids: the same findings under other ids, same log
    // identity.
    let mut shifted = a.report.clone();
    for c in &mut shifted.checks {
        for f in &mut c.findings {
            for id in &mut f.evidence {
                *id += 1;
            }
        }
    }
    let fps = |log: &Value| -> Vec<String> {
        log["runs"][0]["results"]
            .as_array()
            .unwrap()
            .iter()
            .map(|r| r["partialFingerprints"][FINGERPRINT_KEY].to_string())
            .collect()
    };
    let again: Value = serde_json::from_str(&glassbox_report::sarif(
        &a.evidence,
        &shifted,
        &Publication::unreviewed,
    ))
    .unwrap();
    assert_eq!(fps(&again), fps(&log));
    let _ = std::fs::remove_dir_all(&evidence);

    // Controls: what is not a SARIF log is refused by the schema...
    let mut broken = log.clone();
    broken["version"] = "2.0.0".into();
    assert!(!schema_errors(&v, &broken).is_empty(), "a wrong version");
    let mut broken = log.clone();
    broken["runs"][0]["results"][0]["level"] = "critical".into();
    assert!(!schema_errors(&v, &broken).is_empty(), "an unknown level");
    let mut broken = log.clone();
    broken["runs"][0]["results"][0]["locations"][0]["physicalLocation"]["region"]["startLine"] =
        0.into();
    assert!(!schema_errors(&v, &broken).is_empty(), "line 0");
    let mut broken = log.clone();
    broken["runs"][0]["results"][0]["message"] = Value::Object(Default::default());
    broken["runs"][0]["tool"]["driver"]
        .as_object_mut()
        .unwrap()
        .remove("name");
    assert!(schema_errors(&v, &broken).len() >= 2, "no driver name");
    // ...and what code scanning cannot take by the code scanning checks.
    let mut broken = log.clone();
    broken["runs"][0]["results"][0]["locations"] = Value::Array(vec![]);
    broken["runs"][0]["results"][0]["ruleId"] = "no-such-rule".into();
    broken["runs"][0]["tool"]["driver"]["rules"][0]["properties"]
        .as_object_mut()
        .unwrap()
        .remove("security-severity");
    assert_eq!(schema_errors(&v, &broken), Vec::<String>::new());
    let problems = code_scanning_problems(&broken);
    assert_eq!(problems.len(), 3, "{problems:?}");
}
