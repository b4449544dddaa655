//! The command line: clear errors, exit statuses, and what survives a killed glassbox.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

fn glassbox() -> Command {
    Command::new(env!("CARGO_BIN_EXE_glassbox"))
}

fn fixture(name: &str) -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../../fixtures")
        .join(name)
        .canonicalize()
        .unwrap()
}

fn tmp(name: &str) -> PathBuf {
    let p = std::env::temp_dir().join(format!("glassbox-cli-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&p);
    p
}

#[test]
fn a_missing_command_is_a_usage_error_that_names_it() {
    let out = glassbox()
        .args(["audit", "--no-selftest", "--", "no-such-server-xyz"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(
        err.contains("command not found: no-such-server-xyz"),
        "{err}"
    );
}

#[test]
fn no_command_is_a_usage_error() {
    let out = glassbox().arg("audit").output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("Usage"));
}

#[test]
fn a_server_that_exits_at_once_is_inconclusive_with_its_status() {
    let dir = tmp("exits");
    let out = glassbox()
        .current_dir(fixture("exits-immediately-status-3"))
        .args([
            "audit",
            "--quiet",
            "--no-selftest",
            "--json",
            "-",
            "--evidence",
        ])
        .arg(&dir)
        .args(["--", "python3", "server.py"])
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(3));
    let report: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(report["verdict"], "inconclusive");
    let reason = report["inconclusive_reason"].as_str().unwrap();
    assert!(reason.contains("server exited with status 3"), "{reason}");
    std::fs::remove_dir_all(dir).ok();
}

#[test]
fn without_user_namespaces_the_error_says_what_to_enable() {
    // A user namespace in which no further user namespace may be made.
    let Ok(out) = Command::new("unshare")
        .args(["--user", "--map-root-user", "sh", "-c"])
        .arg(format!(
            "echo 0 > /proc/sys/user/max_user_namespaces && exec {} audit --no-selftest -- true",
            env!("CARGO_BIN_EXE_glassbox")
        ))
        .output()
    else {
        panic!("unshare (util-linux) is needed for this test");
    };
    assert_eq!(out.status.code(), Some(2), "{out:?}");
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(err.contains("cannot create a user namespace"), "{err}");
}

#[test]
fn a_killed_glassbox_leaves_its_evidence_and_no_process() {
    let dir = tmp("killed");
    let marker = format!("glassbox-killed-{}", std::process::id());
    // The server never answers; glassbox waits for it and is killed meanwhile.
    let mut child = glassbox()
        .current_dir(fixture("never-answers-initialize"))
        .args([
            "audit",
            "--quiet",
            "--no-selftest",
            "--request-timeout",
            "60",
            "--evidence",
        ])
        .arg(&dir)
        .args(["--", "python3", "server.py", &marker])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    let deadline = Instant::now() + Duration::from_secs(20);
    let transcript = dir.join("transcript.jsonl");
    while std::fs::metadata(&transcript).map(|m| m.len()).unwrap_or(0) == 0 {
        assert!(Instant::now() < deadline, "no transcript line written");
        std::thread::sleep(Duration::from_millis(50));
    }
    std::thread::sleep(Duration::from_millis(300));
    child.kill().unwrap();
    child.wait().unwrap();
    // What was recorded until then is on disk.
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("manifest.json")).unwrap()).unwrap();
    assert!(!manifest["sandbox"]["honeytokens"]
        .as_array()
        .unwrap()
        .is_empty());
    let events = std::fs::read_to_string(dir.join("events.jsonl")).unwrap();
    assert!(
        events.lines().any(|l| l.contains("\"kind\":\"exec\"")),
        "{events}"
    );
    let lines = std::fs::read_to_string(&transcript).unwrap();
    assert!(lines.contains("initialize"));
    // And the server died with it.
    std::thread::sleep(Duration::from_millis(500));
    let ps = Command::new("pgrep")
        .args(["-f", &marker])
        .output()
        .unwrap();
    assert!(
        ps.stdout.is_empty(),
        "server survived: {}",
        String::from_utf8_lossy(&ps.stdout)
    );
    std::fs::remove_dir_all(dir).ok();
}
