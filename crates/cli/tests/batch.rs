//! `glassbox batch`: targets from a list or a client configuration, a pool of real audits,
//! the store deciding what is audited again, and a list that is wrong refused before anything
//! runs. (The hostile servers through a batch: tests/hostile.rs.)

mod common;
use common::{record_as_package, text, work};
use std::path::Path;
use std::process::{Command, Output};

/// `glassbox batch FILE ARGS` in `w/servers`, with its state (and store) in `w/state`.
fn batch(w: &Path, file: &Path, args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_glassbox"))
        .current_dir(w.join("servers"))
        .env("GLASSBOX_STATE_DIR", w.join("state"))
        .env("TMPDIR", std::env::temp_dir())
        .args(["batch", "--no-selftest", "--network", "capture", "--quiet"])
        .args([
            "--request-timeout",
            "5",
            "--install-timeout",
            "60",
            "--store",
        ])
        .arg(w.join("state/store.sqlite"))
        .arg("--evidence")
        .arg(w.join("evidence"))
        .args(args)
        .arg(file)
        .output()
        .unwrap()
}

/// The summary's row of target number `n` (1-based).
fn row(o: &Output, n: usize) -> String {
    String::from_utf8_lossy(&o.stdout)
        .lines()
        .nth(n)
        .unwrap_or_default()
        .to_string()
}

#[test]
fn a_wrong_list_is_refused_before_anything_runs() {
    let w = work("wrong", &[]);
    let list = w.join("targets.txt");
    std::fs::write(&list, "npm:fine@1.0.0\nserver.py\n# fine\n-- 'unclosed\n").unwrap();
    let out = batch(&w, &list, &[]);
    assert_eq!(out.status.code(), Some(2), "{}", text(&out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("line 2:") && err.contains("line 4:"), "{err}");
    assert!(
        !err.contains("line 1:") && !err.contains("line 3:"),
        "{err}"
    );
    assert!(!w.join("evidence").exists());
    assert!(!w.join("state/store.sqlite").exists());
}

#[test]
fn a_client_configuration_is_a_batch() {
    let w = work("config", &["baseline-answers-only"]);
    let cfg = w.join("mcp.json");
    std::fs::write(
        &cfg,
        r#"{"mcpServers": {
            "echo": {"command": "python3", "args": ["baseline-answers-only/server.py"]},
            "boxed": {"command": "docker", "args": ["run", "-i", "example/server"]}
        }}"#,
    )
    .unwrap();
    let out = batch(&w, &cfg, &["-j", "2"]);
    // The baseline is inconclusive here only because no selftest proved the checks.
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    let stdout = String::from_utf8_lossy(&out.stdout).into_owned();
    let find = |name: &str| {
        stdout
            .lines()
            .find(|l| l.split_whitespace().nth(1) == Some(name))
            .unwrap_or_default()
            .to_string()
    };
    let (echo, boxed) = (find("echo"), find("boxed"));
    assert!(
        echo.contains("echo") && echo.contains("audit 1"),
        "{}",
        text(&out)
    );
    assert!(
        boxed.contains("boxed") && boxed.contains("not audited") && boxed.contains("container"),
        "{}",
        text(&out)
    );
    // The bundle of the audited server, named after its place in the batch.
    let n = echo.split_whitespace().next().unwrap();
    assert!(w.join(format!("evidence/{n}-echo/report.json")).is_file());
    let store = glassbox_store::Store::open(&w.join("state/store.sqlite")).unwrap();
    assert_eq!(store.audits().unwrap().len(), 1);
}

#[test]
fn a_version_audited_with_the_current_checks_is_not_audited_again() {
    let w = work("resume", &["baseline-answers-only"]);
    let first = w.join("first.txt");
    std::fs::write(&first, "-- python3 baseline-answers-only/server.py\n").unwrap();
    let out = batch(&w, &first, &[]);
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    assert!(row(&out, 1).contains("audit 1"), "{}", text(&out));
    // A command is audited again every time: it has no version to pin.
    let again = batch(&w, &first, &[]);
    assert!(row(&again, 1).contains("audit 2"), "{}", text(&again));
    // Each in a bundle of its own: the second did not write over the first.
    let bundles: Vec<String> = std::fs::read_dir(w.join("evidence"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(bundles.len(), 2, "{bundles:?}");
    assert!(bundles.contains(&"1-python3-baseline-answers-only-server.py-2".to_string()));

    let mut store = glassbox_store::Store::open(&w.join("state/store.sqlite")).unwrap();
    let name = "glassbox-no-such-package-for-resume";
    let current = record_as_package(&mut store, 1, name, "1.0.0", false);
    record_as_package(&mut store, 1, name, "2.0.0", true);
    drop(store);

    let list = w.join("packages.txt");
    std::fs::write(&list, format!("npm:{name}@1.0.0\nnpm:{name}@2.0.0\n")).unwrap();
    let out = batch(&w, &list, &["-j", "2"]);
    let (same, stale) = (row(&out, 1), row(&out, 2));
    assert!(
        same.contains("1.0.0") && same.contains(&format!("audit {current} (already audited)")),
        "{}",
        text(&out)
    );
    // Audited by an older version of a check: audited again (the package does not exist,
    // so the install fails: an error row, not the stored audit).
    assert!(
        stale.contains("2.0.0") && !stale.contains("already audited") && stale.contains("error"),
        "{}",
        text(&out)
    );
    // Nothing ran for the skipped one: no bundle.
    let skipped_bundle = w.join("evidence").join(format!("1-npm-{name}-1.0.0"));
    assert!(!skipped_bundle.exists(), "{}", skipped_bundle.display());
    assert!(w
        .join("evidence")
        .join(format!("2-npm-{name}-2.0.0"))
        .exists());
    // The worst of: the stored verdict (inconclusive, 3) and the error (2).
    assert_eq!(out.status.code(), Some(3), "{}", text(&out));
    let summary = String::from_utf8_lossy(&out.stdout);
    assert!(
        summary.contains("1 already audited") && summary.contains("1 error;"),
        "{summary}"
    );

    // --force audits it again whatever the store holds.
    let one = w.join("one.txt");
    std::fs::write(&one, format!("npm:{name}@1.0.0\n")).unwrap();
    let forced = batch(&w, &one, &["--force"]);
    assert!(
        !row(&forced, 1).contains("already audited") && row(&forced, 1).contains("error"),
        "{}",
        text(&forced)
    );
}
