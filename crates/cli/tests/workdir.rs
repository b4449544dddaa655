//! An audit from a private working folder, what `cd "$(mktemp -d)" && glassbox audit -- python3
//! server.py` makes (mode 0700; CI scripts do exactly this), as root and as a user without
//! privileges: the audit completes and the server's tools are listed (issue 18, point 2).

mod common;
use common::{fixtures, text};
use std::os::unix::fs::{chown, PermissionsExt};
use std::path::{Path, PathBuf};
use std::process::{Command, Output};

/// A folder that `mktemp -d` could have made (mode 0700, owned by `owner`, else the caller)
/// holding a small MCP server (`server.py`, the baseline control, with its library beside it),
/// removed when the test ends.
struct Scratch(PathBuf);

impl Drop for Scratch {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn set_mode(p: &Path, mode: u32) {
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}

fn scratch(name: &str) -> Scratch {
    let d = std::env::temp_dir().join(format!(
        "tmp.glassbox-{name}-{}-{:x}",
        std::process::id(),
        std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .unwrap()
            .subsec_nanos()
    ));
    std::fs::create_dir(&d).unwrap();
    set_mode(&d, 0o700);
    Scratch(d)
}

/// Copies the server into `dir`, its files readable by their owner only (0600).
fn place_server(dir: &Path) {
    for (from, to) in [
        (
            fixtures().join("baseline-answers-only/server.py"),
            "server.py",
        ),
        (fixtures().join("lib/mcpserver.py"), "mcpserver.py"),
    ] {
        std::fs::copy(from, dir.join(to)).unwrap();
        set_mode(&dir.join(to), 0o600);
    }
}

/// What an audit must show: not an error (2), a report with the server's one tool.
fn assert_audited(out: &Output) {
    let code = out.status.code();
    assert!(
        matches!(code, Some(0 | 1 | 3)),
        "not an audit (0, 1 or 3): {}",
        text(out)
    );
    let report: serde_json::Value = serde_json::from_slice(&out.stdout)
        .unwrap_or_else(|e| panic!("no JSON report ({e}): {}", text(out)));
    let tools: Vec<&str> = report["tools"]
        .as_array()
        .unwrap_or_else(|| panic!("no tools in the report: {}", text(out)))
        .iter()
        .filter_map(|t| t["name"].as_str())
        .collect();
    assert_eq!(tools, ["echo"], "{}", text(out));
    let err = String::from_utf8_lossy(&out.stderr);
    assert!(!err.contains("Permission denied"), "{err}");
}

fn is_root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}

#[test]
fn an_audit_from_a_private_folder_works_as_root() {
    if !is_root() {
        eprintln!("skipped: this test runs glassbox as root, and the test runs as a user (an_audit_from_a_private_folder_works_as_a_user covers that)");
        return;
    }
    let work = scratch("root");
    let state = scratch("root-state");
    place_server(&work.0);
    let out = Command::new(env!("CARGO_BIN_EXE_glassbox"))
        .current_dir(&work.0)
        .env("GLASSBOX_STATE_DIR", &state.0)
        .env("GLASSBOX_STORE", state.0.join("store.sqlite"))
        .args([
            "audit",
            "--no-selftest",
            "--network",
            "capture",
            "--quiet",
            "--json",
            "-",
            "--",
            "python3",
            "server.py",
        ])
        .output()
        .unwrap();
    assert_audited(&out);
    // The evidence went where it goes by default, into the working folder (glassbox, root,
    // writes it; the server saw the folder read-only), and says how the folder was bound.
    let evidence = work.0.join("glassbox-evidence");
    let run = std::fs::read_dir(&evidence)
        .unwrap()
        .flatten()
        .next()
        .expect("an evidence folder")
        .path();
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(run.join("manifest.json")).unwrap()).unwrap();
    let bound = format!(
        "bind:{} (idmapped: owner uid 0 gid 0 → sandbox user)",
        work.0.display()
    );
    let mounts = &manifest["sandbox"]["mounts"];
    assert!(
        mounts
            .as_array()
            .unwrap()
            .iter()
            .any(|m| m["source"] == bound.as_str() && m["read_only"] == true),
        "{mounts:#}"
    );
}

/// The uid (and gid) the user test runs glassbox as when the test runs as root: `nobody`, an
/// account nearly every system has and that owns nothing of the test's. It must be an account
/// (`ssh-keygen`, which makes the planted SSH key, refuses a uid without one).
const USER: u32 = 65_534;

#[test]
fn an_audit_from_a_private_folder_works_as_a_user() {
    let base = scratch("user");
    let (work, state, home) = (
        base.0.join("work"),
        base.0.join("state"),
        base.0.join("home"),
    );
    for d in [&work, &state, &home] {
        std::fs::create_dir(d).unwrap();
        set_mode(d, 0o700);
    }
    place_server(&work);
    let bin = PathBuf::from(env!("CARGO_BIN_EXE_glassbox"));
    // Run as a user: the caller itself when it is not root, else USER through setpriv.
    let as_user = |program: &Path| -> Command {
        if is_root() {
            let mut c = Command::new("setpriv");
            c.arg(format!("--reuid={USER}"))
                .arg(format!("--regid={USER}"))
                .arg("--clear-groups")
                .arg(program);
            c
        } else {
            Command::new(program)
        }
    };
    let path = "/usr/local/bin:/usr/bin:/bin";
    let mut bin_to_run = bin.clone();
    if is_root() {
        for p in [&base.0, &work, &state, &home] {
            chown(p, Some(USER), Some(USER)).unwrap();
        }
        for f in ["server.py", "mcpserver.py"] {
            chown(work.join(f), Some(USER), Some(USER)).unwrap();
        }
        let passwd = std::fs::read_to_string("/etc/passwd").unwrap_or_default();
        if !passwd
            .lines()
            .any(|l| l.split(':').nth(2) == Some(&USER.to_string()))
        {
            eprintln!(
                "skipped: no account has uid {USER} here (ssh-keygen, run by glassbox, needs one)"
            );
            return;
        }
        // The machine must let that user make a user namespace (the sandbox's first step).
        let userns = as_user(Path::new("unshare"))
            .args(["--user", "true"])
            .env("PATH", path)
            .output();
        match userns {
            Ok(o) if o.status.success() => {}
            Ok(o) => {
                eprintln!(
                    "skipped: this machine does not let an unprivileged user (uid {USER}) make a user namespace (`unshare --user true` failed: {}); the sandbox needs one",
                    String::from_utf8_lossy(&o.stderr).trim()
                );
                return;
            }
            Err(e) => {
                eprintln!(
                    "skipped: cannot run setpriv and unshare (util-linux) to switch to uid {USER}: {e}"
                );
                return;
            }
        }
        // The binary must be reachable by that user; if a parent folder is private, a copy
        // in the user's own folder is run instead.
        let reachable = as_user(Path::new("test"))
            .arg("-x")
            .arg(&bin)
            .status()
            .is_ok_and(|s| s.success());
        if !reachable {
            bin_to_run = base.0.join("glassbox");
            std::fs::copy(&bin, &bin_to_run).unwrap();
            set_mode(&bin_to_run, 0o755);
        }
    }
    // A Python the user may run (not one under root's private home).
    let python = ["/usr/bin/python3", "/usr/local/bin/python3"]
        .into_iter()
        .find(|p| {
            as_user(Path::new(p))
                .args(["-c", "pass"])
                .env("PATH", path)
                .status()
                .is_ok_and(|s| s.success())
        });
    let Some(python) = python else {
        eprintln!("skipped: no python3 this user may run in /usr/bin or /usr/local/bin");
        return;
    };
    let out = as_user(&bin_to_run)
        .current_dir(&work)
        .env_clear()
        .env("PATH", path)
        .env("HOME", &home)
        .env("GLASSBOX_STATE_DIR", &state)
        .env("GLASSBOX_STORE", state.join("store.sqlite"))
        .env("TMPDIR", &home)
        .args([
            "audit",
            "--no-selftest",
            "--network",
            "capture",
            "--quiet",
            "--json",
            "-",
            "--",
            python,
            "server.py",
        ])
        .output()
        .unwrap();
    assert_audited(&out);
}

/// The same under `--isolation microvm`: QEMU, dropped to an unprivileged uid, serves the
/// private folder from an idmapped mount in its own mount namespace.
#[test]
fn an_audit_from_a_private_folder_works_in_a_microvm_as_root() {
    if !is_root() {
        eprintln!("skipped: this test runs glassbox as root, and the test runs as a user");
        return;
    }
    let qemu = std::env::var_os("GLASSBOX_QEMU").unwrap_or("qemu-system-x86_64".into());
    if Command::new(&qemu).arg("--version").output().is_err() {
        eprintln!("skipped: no QEMU ({qemu:?}); scripts/setup --microvm installs it");
        return;
    }
    let work = scratch("vm");
    place_server(&work.0);
    let state = Path::new(env!("CARGO_TARGET_TMPDIR")).join("microvm-state");
    let out = Command::new(env!("CARGO_BIN_EXE_glassbox"))
        .current_dir(&work.0)
        .env("GLASSBOX_STATE_DIR", &state)
        .env("GLASSBOX_STORE", work.0.join("store.sqlite"))
        .args([
            "audit",
            "--no-selftest",
            "--isolation",
            "microvm",
            "--network",
            "capture",
            "--triggers",
            "none",
            "--quiet",
            "--json",
            "-",
            "--",
            "python3",
            "server.py",
        ])
        .output()
        .unwrap();
    assert_audited(&out);
}
