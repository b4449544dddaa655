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

/// The bundle's schemas (`schemas/{manifest,events,network}.schema.json`), with the
/// references between them resolved in memory.
fn bundle_validators() -> [(&'static str, jsonschema::Validator); 3] {
    let load = |name: &str| -> Value {
        serde_json::from_slice(&std::fs::read(root().join("schemas").join(name)).unwrap())
            .unwrap_or_else(|e| panic!("{name} is JSON: {e}"))
    };
    let names = [
        "manifest.schema.json",
        "events.schema.json",
        "network.schema.json",
    ];
    names.map(|name| {
        let mut options = jsonschema::options();
        for other in names {
            let uri = format!("https://glassbox.example/schemas/{other}");
            options = options.with_resource(
                uri,
                jsonschema::Resource::from_contents(load(other)).expect("a schema resource"),
            );
        }
        let v = options
            .build(&load(name))
            .unwrap_or_else(|e| panic!("{name} is a valid JSON Schema: {e}"));
        (name, v)
    })
}

/// Every line of a JSON-lines file, as JSON.
fn lines(path: &Path) -> Vec<Value> {
    std::fs::read_to_string(path)
        .unwrap_or_default()
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// Each record as JSON.
fn to_json<T: serde::Serialize>(records: &[T]) -> Vec<Value> {
    records
        .iter()
        .map(|r| serde_json::to_value(r).unwrap())
        .collect()
}

/// Read as the model's type and written again, `value` is the same JSON.
fn round_trips<T: serde::de::DeserializeOwned + serde::Serialize>(value: &Value) -> bool {
    let typed: T = serde_json::from_value(value.clone()).unwrap();
    &serde_json::to_value(&typed).unwrap() == value
}

#[test]
fn real_bundles_match_the_evidence_schemas_and_round_trip() {
    let [(_, manifest_v), (_, events_v), (_, network_v)] = bundle_validators();
    // A real audit whose flows carry HTTP exchanges, both network runs, a planted secret read.
    let fixtures = root().join("fixtures");
    let dir = fixtures
        .join("honeytoken-base64-http-body")
        .canonicalize()
        .unwrap();
    let mut o = AuditOptions::new(vec!["python3".into(), "server.py".into()], dir);
    o.extra_ro = vec![fixtures.join("lib").canonicalize().unwrap()];
    let evidence =
        std::env::temp_dir().join(format!("glassbox-bundle-schema-{}", std::process::id()));
    o.evidence_dir = Some(evidence.clone());
    o.proofs = Some(Proofs::all_proven());
    // And the trigger run, with its flows and what it changed.
    o.triggers = glassbox_audit::triggers::Triggers::default();
    audit(&o, &Quiet).expect("audit");
    let mut bundles = vec![evidence.clone()];
    // And the stored regression bundles, written by older builds.
    for entry in std::fs::read_dir(root().join("regressions"))
        .unwrap()
        .flatten()
    {
        if entry.path().join("manifest.json").exists() {
            bundles.push(entry.path());
        }
    }
    let mut seen = (0usize, 0usize);
    for b in &bundles {
        // What this build writes reads back to the same JSON; an older bundle reads (its
        // defaults are written out when read and written again).
        let now = b == &evidence;
        let manifest: Value =
            serde_json::from_slice(&std::fs::read(b.join("manifest.json")).unwrap()).unwrap();
        assert_eq!(
            errors(&manifest_v, &manifest),
            Vec::<String>::new(),
            "{}",
            b.display()
        );
        assert!(
            !now || round_trips::<glassbox_model::Manifest>(&manifest),
            "{}",
            b.display()
        );
        for e in lines(&b.join("events.jsonl")) {
            assert_eq!(errors(&events_v, &e), Vec::<String>::new(), "{e}");
            assert!(!now || round_trips::<glassbox_model::Event>(&e), "{e}");
            seen.0 += 1;
        }
        for f in lines(&b.join("network.jsonl")) {
            assert_eq!(errors(&network_v, &f), Vec::<String>::new(), "{f}");
            assert!(!now || round_trips::<glassbox_model::Flow>(&f), "{f}");
            seen.1 += 1;
        }
    }
    let flows = lines(&evidence.join("network.jsonl"));
    assert!(flows.iter().any(|f| f["mode"] == "trigger"), "{flows:?}");
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(evidence.join("manifest.json")).unwrap()).unwrap();
    let trigger = manifest["network"]["runs"]
        .as_array()
        .unwrap()
        .iter()
        .find(|r| r["mode"] == "trigger")
        .expect("a trigger run");
    assert_eq!(trigger["trigger"]["clock_offset_days"], 400, "{trigger}");
    assert_eq!(trigger["trigger"]["environment"], "ci", "{trigger}");
    // The codec's own reader (its scanner for events) gives back every record it wrote, as
    // the schema-checked JSON says.
    let read = glassbox_model::bundle::load(&evidence).expect("the bundle reads back");
    assert!(to_json(&read.events) == lines(&evidence.join("events.jsonl")));
    assert!(to_json(&read.flows) == flows);
    assert!(
        flows.iter().any(|f| f["exchanges"].is_array()),
        "no flow with HTTP exchanges: {flows:?}"
    );
    // Raw evidence stays raw: which calls made a flow is derived when checks run.
    assert!(flows.iter().all(|f| f.get("events").is_none()), "{flows:?}");
    assert!(seen.0 > 100 && seen.1 > 0, "{seen:?}");

    // The controls: each schema refuses what its file must not hold.
    let events = lines(&evidence.join("events.jsonl"));
    let mut no_kind = events[0].clone();
    no_kind.as_object_mut().unwrap().remove("kind");
    assert!(
        !errors(&events_v, &no_kind).is_empty(),
        "an event without a kind"
    );
    let connect = events
        .iter()
        .find(|e| e["kind"] == "connect")
        .expect("a connect event")
        .clone();
    let mut foreign = connect.clone();
    foreign["argv"] = serde_json::json!(["sh"]);
    assert!(
        !errors(&events_v, &foreign).is_empty(),
        "a connect with an argv"
    );
    let mut bad_addr = connect;
    bad_addr["addr"] = serde_json::json!({"family": "inet", "ip": "192.0.2.1"});
    assert!(
        !errors(&events_v, &bad_addr).is_empty(),
        "an address without a port"
    );
    let mut no_dst = flows[0].clone();
    no_dst.as_object_mut().unwrap().remove("dst");
    assert!(
        !errors(&network_v, &no_dst).is_empty(),
        "a flow without a destination"
    );
    let manifest: Value =
        serde_json::from_slice(&std::fs::read(evidence.join("manifest.json")).unwrap()).unwrap();
    let mut channel = manifest.clone();
    channel["recorder"]["channels"] = serde_json::json!(["syscalls", "telepathy"]);
    assert!(
        !errors(&manifest_v, &channel).is_empty(),
        "an unknown channel"
    );
    let mut extra = manifest;
    extra["verdict"] = "clean".into();
    assert!(
        !errors(&manifest_v, &extra).is_empty(),
        "a verdict in the manifest"
    );
    let _ = std::fs::remove_dir_all(evidence);
}
