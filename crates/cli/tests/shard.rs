//! Past one machine: `glassbox batch --shard K/N` processes sharing a list and a PostgreSQL
//! store (a real server, started here: `glassbox_store::testing`), and the Kubernetes Indexed
//! Job that runs them (deploy/k8s).

mod common;
use common::{record_as_package, repo, text, work};
use glassbox_store::{Store, StoreLocation};
use std::collections::BTreeMap;
use std::path::Path;
use std::process::{Child, Command, Output, Stdio};

fn tmpdir() -> &'static Path {
    Path::new(env!("CARGO_TARGET_TMPDIR"))
}

/// The cheap control servers the batch audits (Python, quick to run; some flagged).
const CASES: &[&str] = &[
    "baseline-answers-only",
    "appends-to-bashrc",
    "echoes-input-scratch-file",
    "aws-secret-digest-only",
    "runs-uname-helper",
    "reads-bashrc-without-writing",
];

/// `glassbox batch LIST --shard SHARD` in `w/servers`, started (not waited for). The store
/// comes from `--store` for shard 0 and from `$GLASSBOX_STORE` for the others, as in the
/// Kubernetes Job.
fn start(w: &Path, list: &Path, store: &str, shard: &str) -> Child {
    let mut c = Command::new(env!("CARGO_BIN_EXE_glassbox"));
    c.current_dir(w.join("servers"))
        .env("GLASSBOX_STATE_DIR", w.join("state"))
        .env("TMPDIR", std::env::temp_dir())
        .args(["batch", "--no-selftest", "--network", "capture", "-j", "2"])
        .args(["--request-timeout", "5", "--install-timeout", "60"])
        .arg("--evidence")
        .arg(w.join("evidence"))
        .args(["--shard", shard])
        .arg(list)
        .stdout(Stdio::piped())
        .stderr(Stdio::piped());
    if shard.starts_with("0/") {
        c.args(["--store", store]).env_remove("GLASSBOX_STORE");
    } else {
        c.env("GLASSBOX_STORE", store);
    }
    c.spawn().unwrap()
}

/// The summary's rows: target number → the row.
fn rows(o: &Output) -> BTreeMap<usize, String> {
    let stdout = String::from_utf8_lossy(&o.stdout);
    let lines: Vec<&str> = stdout.lines().collect();
    assert!(lines.len() >= 2, "{}", text(o));
    lines[1..lines.len() - 1]
        .iter()
        .map(|l| {
            let n = l.split_whitespace().next().unwrap().parse().unwrap();
            (n, l.to_string())
        })
        .collect()
}

/// Both shards of `list`, at the same time; their outputs.
fn both(w: &Path, list: &Path, store: &str) -> [Output; 2] {
    let children = [start(w, list, store, "0/2"), start(w, list, store, "1/2")];
    children.map(|c| c.wait_with_output().unwrap())
}

/// Each of the `total` targets in exactly one of the outputs; the totals line of each says
/// which shard and how many of the targets it held. Returns the rows of both.
fn split(outs: &[Output; 2], total: usize) -> BTreeMap<usize, String> {
    let mut all = BTreeMap::new();
    for (k, o) in outs.iter().enumerate() {
        let mine = rows(o);
        assert!(!mine.is_empty(), "shard {k} holds nothing: {}", text(o));
        let summary = String::from_utf8_lossy(&o.stdout);
        let totals = summary.lines().last().unwrap();
        assert!(
            totals.starts_with(&format!(
                "shard {k}/2: {} of {total} targets in ",
                mine.len()
            )),
            "{}",
            text(o)
        );
        let progress = String::from_utf8_lossy(&o.stderr);
        assert!(
            progress.contains(&format!(
                "glassbox: shard {k}/2: {} of {total} targets, ",
                mine.len()
            )),
            "{}",
            text(o)
        );
        for (n, row) in mine {
            if let Some(other) = all.insert(n, row) {
                panic!("target {n} is in both shards: {other}");
            }
        }
    }
    assert_eq!(
        all.keys().copied().collect::<Vec<_>>(),
        (1..=total).collect::<Vec<_>>(),
        "every target in one shard"
    );
    all
}

/// The audit id a row names (`audit 7`, `audit 7 (already audited)`).
fn audit_id(row: &str) -> i64 {
    let (_, rest) = row
        .rsplit_once("audit ")
        .unwrap_or_else(|| panic!("no audit in {row:?}"));
    rest.split_whitespace().next().unwrap().parse().unwrap()
}

#[test]
fn two_shards_at_once_share_a_postgres_store() {
    let pg = glassbox_store::testing::shared(tmpdir());
    let url = pg.database("shards");
    let w = work("pg", CASES);
    let list = w.join("servers/targets.txt");
    let lines: Vec<String> = CASES
        .iter()
        .map(|c| format!("-- python3 {c}/server.py"))
        .collect();
    std::fs::write(&list, lines.join("\n") + "\n").unwrap();

    let outs = both(&w, &list, &url);
    let all = split(&outs, CASES.len());
    for o in &outs {
        // Inconclusive at worst (no selftest proved the checks here); never an error.
        assert!(matches!(o.status.code(), Some(1) | Some(3)), "{}", text(o));
        let printed = format!("{}{}", text(o), url);
        assert_eq!(printed.matches(pg.password()).count(), 1, "only in the URL");
    }
    // Every target audited once, under its own number, into one store.
    let store = Store::open_location(&StoreLocation::parse(&url)).unwrap();
    let audits = store.audits().unwrap();
    assert_eq!(audits.len(), CASES.len(), "{audits:#?}");
    for (n, row) in &all {
        let case = CASES[n - 1];
        assert!(row.contains(case) && !row.contains("error"), "{row}");
        let id = audit_id(row);
        let a = audits.iter().find(|a| a.id == id).expect("in the store");
        assert_eq!(a.target, format!("python3 {case}/server.py"));
        assert!(!a.checks.is_empty(), "{a:#?}");
        // Named after its place in the whole list: shards sharing a folder never collide.
        assert_eq!(
            a.evidence_dir,
            w.join("evidence")
                .join(format!("{n}-python3-{case}-server.py"))
        );
    }
    let bashrc = audits
        .iter()
        .find(|a| a.target.contains("appends-to-bashrc"))
        .unwrap();
    assert!(
        bashrc
            .findings
            .iter()
            .any(|f| f.check_id == "persistence" && f.summary.contains(".bashrc")),
        "{:#?}",
        bashrc.findings
    );

    // The other commands read the same store through the URL.
    let glassbox = |args: &[&str]| {
        Command::new(env!("CARGO_BIN_EXE_glassbox"))
            .args(args)
            .env_remove("GLASSBOX_STORE")
            .output()
            .unwrap()
    };
    let report = glassbox(&[
        "report",
        &bashrc.id.to_string(),
        "--format",
        "json",
        "--store",
        &url,
    ]);
    assert_eq!(report.status.code(), Some(0), "{}", text(&report));
    let json: serde_json::Value = serde_json::from_slice(&report.stdout).unwrap();
    assert_eq!(json["run_id"], bashrc.run_id.as_str());
    let history = glassbox(&["history", &bashrc.target, "--json", "--store", &url]);
    assert_eq!(history.status.code(), Some(0), "{}", text(&history));
    assert_eq!(String::from_utf8_lossy(&history.stdout).lines().count(), 1);
    // A wrong password: a clear error that shows neither password.
    let wrong = url.replace(pg.password(), "Wrong-Password-1");
    let refused = glassbox(&["review", "list", "--store", &wrong]);
    let err = String::from_utf8_lossy(&refused.stderr);
    assert_eq!(refused.status.code(), Some(2), "{}", text(&refused));
    assert!(
        err.contains("cannot open the store postgres://postgres:***@127.0.0.1:")
            && err.contains("password authentication failed"),
        "{err}"
    );
    assert!(!err.contains("Wrong-Password-1") && !err.contains(pg.password()));

    // Resume across machines: the same package versions, already audited with the current
    // checks, are skipped by whichever shard holds them. (A command is audited again on
    // every run by design: it has no version to pin; so the rerun is of packages.)
    let mut store = store;
    let names: Vec<String> = (1..=CASES.len())
        .map(|n| format!("glassbox-no-such-package-shard-{n}"))
        .collect();
    for (n, name) in names.iter().enumerate() {
        record_as_package(&mut store, audit_id(&all[&(n + 1)]), name, "1.0.0", false);
    }
    let before = std::fs::read_dir(w.join("evidence")).unwrap().count();
    let packages = w.join("servers/packages.txt");
    let lines: Vec<String> = names.iter().map(|n| format!("npm:{n}@1.0.0")).collect();
    std::fs::write(&packages, lines.join("\n") + "\n").unwrap();
    let again = both(&w, &packages, &url);
    let rerun = split(&again, names.len());
    for (n, row) in &rerun {
        assert!(
            row.contains(&names[n - 1]) && row.contains("(already audited)"),
            "{row}"
        );
    }
    for o in &again {
        let totals = String::from_utf8_lossy(&o.stdout);
        let held = rows(o).len();
        assert!(
            totals.contains(&format!("{held} already audited, 0 not audited, 0 errors")),
            "{}",
            text(o)
        );
    }
    assert_eq!(
        std::fs::read_dir(w.join("evidence")).unwrap().count(),
        before,
        "nothing ran"
    );
    assert_eq!(store.audits().unwrap().len(), 2 * CASES.len());
}

#[test]
fn a_bad_shard_is_refused_before_anything_runs() {
    let w = work("bad", &[]);
    std::fs::create_dir_all(w.join("servers")).unwrap();
    let list = w.join("servers/targets.txt");
    std::fs::write(&list, "-- python3 server.py\n").unwrap();
    for (shard, why) in [
        ("2/2", "K must be less than N"),
        ("0/0", "N must be at least 1"),
        ("one/2", "K is not a whole number"),
        ("3", "no `/` between K and N"),
    ] {
        let out = Command::new(env!("CARGO_BIN_EXE_glassbox"))
            .current_dir(w.join("servers"))
            .args(["batch", "--shard", shard])
            .arg(&list)
            .arg("--store")
            .arg(w.join("state/store.sqlite"))
            .output()
            .unwrap();
        assert_eq!(out.status.code(), Some(2), "{}", text(&out));
        let err = String::from_utf8_lossy(&out.stderr);
        assert!(
            err.contains(why) && err.contains("--shard"),
            "{shard}: {err}"
        );
    }
    assert!(!w.join("state").exists(), "no store made");
}

#[test]
fn the_kubernetes_job_runs_one_shard_per_completion_index() {
    let manifest = repo().join("deploy/k8s/batch-indexed-job.yaml");
    // Prints what the assertions below need, or fails naming what is wrong.
    let script = r#"
import json, sys, yaml
docs = [d for d in yaml.safe_load_all(open(sys.argv[1])) if d]
jobs = [d for d in docs if d.get("kind") == "Job"]
assert len(jobs) == 1, [d.get("kind") for d in docs]
job = jobs[0]
spec = job["spec"]
pod = spec["template"]["spec"]
[c] = [c for c in pod["containers"] if c["name"] == "glassbox"]
env = {e["name"]: e for e in c.get("env", [])}
print(json.dumps({
    "apiVersion": job["apiVersion"],
    "kinds": sorted(d["kind"] for d in docs),
    "completionMode": spec.get("completionMode"),
    "completions": spec.get("completions"),
    "parallelism": spec.get("parallelism"),
    "backoffLimitPerIndex": spec.get("backoffLimitPerIndex"),
    "restartPolicy": pod.get("restartPolicy"),
    "automount": pod.get("automountServiceAccountToken"),
    "argv": (c.get("command") or []) + (c.get("args") or []),
    "store": env.get("GLASSBOX_STORE", {}).get("valueFrom", {}).get("secretKeyRef"),
    "security": c.get("securityContext", {}),
    "pod_security": pod.get("securityContext", {}),
    "mounts": {m["mountPath"]: m["name"] for m in c.get("volumeMounts", [])},
    "volumes": {v["name"]: v for v in pod.get("volumes", [])},
}))
"#;
    let out = Command::new("python3")
        .args(["-c", script])
        .arg(&manifest)
        .output()
        .expect("python3 (scripts/setup installs it)");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        out.status.success(),
        "{}: {stderr}{}",
        manifest.display(),
        if stderr.contains("No module named 'yaml'") {
            "\nPyYAML is missing: run scripts/setup --image"
        } else {
            ""
        }
    );
    let job: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(job["apiVersion"], "batch/v1");
    assert_eq!(
        job["kinds"],
        serde_json::json!(["ConfigMap", "Job", "PersistentVolumeClaim", "Secret"])
    );
    assert_eq!(job["completionMode"], "Indexed");
    let n = job["completions"].as_u64().expect("completions");
    assert!(n >= 2, "{job}");
    assert!(
        job["parallelism"]
            .as_u64()
            .is_some_and(|p| p >= 1 && p <= n),
        "{job}"
    );
    assert_eq!(job["restartPolicy"], "Never");
    assert_eq!(job["automount"], false, "no service-account token");
    let argv: Vec<&str> = job["argv"]
        .as_array()
        .unwrap()
        .iter()
        .map(|a| a.as_str().unwrap())
        .collect();
    assert_eq!(
        argv[..3],
        ["glassbox", "batch", "/targets/targets.txt"],
        "{argv:?}"
    );
    let shard = argv
        .iter()
        .position(|a| *a == "--shard")
        .map(|i| argv[i + 1])
        .expect("--shard");
    assert_eq!(
        shard,
        format!("$(JOB_COMPLETION_INDEX)/{n}"),
        "N = completions"
    );
    // The store from a Secret, through the environment: its password is in no argv.
    assert!(!argv.contains(&"--store"), "{argv:?}");
    assert_eq!(job["store"]["name"], "glassbox-store");
    assert_eq!(job["store"]["key"], "url");
    assert_eq!(job["mounts"]["/targets"], "targets");
    assert_eq!(job["mounts"]["/evidence"], "evidence");
    assert_eq!(
        job["volumes"]["evidence"]["persistentVolumeClaim"]["claimName"],
        "glassbox-evidence"
    );
    assert_eq!(
        job["volumes"]["targets"]["configMap"]["name"],
        "glassbox-targets"
    );
    let tun = job["mounts"]["/dev/net/tun"]
        .as_str()
        .expect("/dev/net/tun");
    assert_eq!(job["volumes"][tun]["hostPath"]["path"], "/dev/net/tun");
    let caps = &job["security"]["capabilities"]["add"];
    // NET_ADMIN is not among them: the sandbox holds it over the network namespace it makes,
    // in its own user namespace (the image test ran without it).
    for cap in ["SYS_ADMIN", "SYS_PTRACE"] {
        assert!(
            caps.as_array().unwrap().iter().any(|c| c == cap),
            "{cap}: {job}"
        );
    }
    assert_eq!(job["security"]["seccompProfile"]["type"], "Unconfined");
    assert_eq!(job["security"]["appArmorProfile"]["type"], "Unconfined");
}
