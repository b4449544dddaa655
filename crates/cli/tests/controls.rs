//! `glassbox selftest`: every control fixture through the real sandbox, recorder and MCP client,
//! with both recorders; every check proven; and nothing left behind (no process, mount or
//! namespace), the hostile controls included.

mod common;

use std::collections::BTreeSet;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Namespaces in use on the machine (pid, mount, net and user namespaces of every process).
fn namespaces() -> BTreeSet<String> {
    let mut out = BTreeSet::new();
    for entry in std::fs::read_dir("/proc").unwrap().flatten() {
        for ns in ["pid", "mnt", "net", "user"] {
            if let Ok(l) = std::fs::read_link(entry.path().join("ns").join(ns)) {
                out.insert(l.to_string_lossy().into_owned());
            }
        }
    }
    out
}

fn mounts() -> String {
    std::fs::read_to_string("/proc/self/mountinfo").unwrap()
}

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures")
}

fn selftest(recorder: &str, state: &Path) -> serde_json::Value {
    let json = state.join(format!("record-{recorder}.json"));
    let out = Command::new(env!("CARGO_BIN_EXE_glassbox"))
        .env("GLASSBOX_STATE_DIR", state)
        .args(["selftest", "--recorder", recorder, "--json"])
        .arg(&json)
        .output()
        .unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    // The misses first: the whole output follows, hundreds of lines of controls that passed.
    let misses: Vec<&str> = stderr.lines().filter(|l| l.contains(" MISS")).collect();
    assert_eq!(
        out.status.code(),
        Some(0),
        "selftest ({recorder}) missed:\n{}\n\nits whole output:\n{stderr}",
        misses.join("\n")
    );
    assert!(stderr.contains("TP") && stderr.contains("FN"), "{stderr}");
    serde_json::from_slice(&std::fs::read(&json).unwrap()).unwrap()
}

#[test]
fn selftest_proves_every_check_with_both_recorders_and_leaves_nothing_behind() {
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(fixtures().join("manifest.json")).unwrap()).unwrap();
    let cases = manifest["cases"].as_array().unwrap();
    assert!(cases.len() >= 10);
    let state = std::env::temp_dir().join(format!("glassbox-selftest-{}", std::process::id()));
    std::fs::create_dir_all(&state).unwrap();
    let ns_before = namespaces();
    let mounts_before = mounts();

    // SAFETY: geteuid cannot fail.
    let recorders: &[&str] = if unsafe { libc::geteuid() } == 0 {
        &["notify", "ebpf"]
    } else {
        &["notify"]
    };
    for recorder in recorders {
        let record = selftest(recorder, &state);
        assert_eq!(record["cases"].as_array().unwrap().len(), cases.len());
        // A control of the eBPF channel's ring (`ring`) runs only with that channel, and is
        // skipped, saying why, with the other recorder.
        let runs_here = |c: &&serde_json::Value| c["ring"].is_null() || *recorder == "ebpf";
        for r in record["cases"].as_array().unwrap() {
            let case = cases.iter().find(|c| c["name"] == r["name"]).unwrap();
            assert_eq!(r["skipped"].is_null(), runs_here(&case), "{recorder}: {r}");
        }
        let cases: Vec<&serde_json::Value> = cases.iter().filter(runs_here).collect();
        for t in record["checks"].as_array().unwrap() {
            let id = t["id"].as_str().unwrap();
            let positives = cases.iter().filter(|c| c["expect"][id] == "flag").count() as u64;
            let negatives = cases.iter().filter(|c| c["expect"][id] == "pass").count() as u64;
            assert!(positives > 0 && negatives > 0, "{id} lacks controls");
            // What the check cannot read, said so (`not-observed`), counts as a true negative.
            let negatives = negatives
                + cases
                    .iter()
                    .filter(|c| c["expect"][id] == "not-observed")
                    .count() as u64;
            assert_eq!(t["tp"], positives, "{recorder}: {t}");
            assert_eq!(t["tn"], negatives, "{recorder}: {t}");
            assert_eq!(
                (t["fp"].as_u64(), t["fn_"].as_u64()),
                (Some(0), Some(0)),
                "{t}"
            );
            assert_eq!(t["proven"], true, "{t}");
        }
    }
    // Each recorder's record of this build is saved where audits look for it: an audit is
    // proven by the record of the recorder it ran with.
    let mut saved: Vec<String> = std::fs::read_dir(state.join("selftest"))
        .unwrap()
        .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
        .collect();
    saved.sort();
    let mut want: Vec<String> = recorders.iter().map(|r| format!("-{r}.json")).collect();
    want.sort();
    assert_eq!(saved.len(), want.len(), "{saved:?}");
    for (name, end) in saved.iter().zip(&want) {
        assert!(name.ends_with(end.as_str()), "{saved:?}");
    }

    // The last sandboxes' processes are reaped within moments: waited for, boundedly.
    let leaked = || -> Vec<_> { namespaces().difference(&ns_before).cloned().collect() };
    let servers = || {
        Command::new("pgrep")
            .args(["-f", "server\\.(py|js)"])
            .output()
            .unwrap()
            .stdout
    };
    let settle = std::time::Duration::from_secs(10);
    assert!(
        common::eventually(settle, || leaked().is_empty()),
        "namespaces left behind: {:?}",
        leaked()
    );
    assert_eq!(mounts(), mounts_before, "mounts changed on the host");
    assert!(
        common::eventually(settle, || servers().is_empty()),
        "processes left behind: {}",
        String::from_utf8_lossy(&servers())
    );
    std::fs::remove_dir_all(&state).ok();
}
