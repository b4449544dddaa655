//! The container image of deploy/ (scripts/image), built and run as the Kubernetes Job runs
//! it: two shards of a small list of control servers, each in its own container with exactly
//! the privileges the Job's manifest gives its pod (`scripts/image --podman-args` maps them),
//! writing to one PostgreSQL store (a real server, started here).
//!
//! The image is built from this test binary's glassbox (the debug build: CI's time is short),
//! and its build runs `glassbox selftest` inside it, failing unless every check is proven.
//!
//! Where the machine cannot run containers (not root, no podman or mmdebstrap, or a container
//! of the image's root filesystem does not start), the test says why and is skipped; with
//! `GLASSBOX_IMAGE_REQUIRED=1` (scripts/test sets it) that is a failure instead.

mod common;
use common::{repo, text};
use glassbox_model::Outcome;
use glassbox_store::{Store, StoreLocation};
use std::path::{Path, PathBuf};
use std::process::{Command, Output, Stdio};
use std::time::Instant;

/// Cheap Python control servers (no install, no network of their own): a clean one and
/// flagged ones, split by `--shard K/2` into two non-empty shards.
const CASES: &[&str] = &[
    "baseline-answers-only",
    "appends-to-bashrc",
    "aws-secret-digest-only",
    "runs-uname-helper",
];

/// Skips the test (returns true) or, where the machine is known to run containers, fails.
fn skip(why: &str) -> bool {
    if std::env::var_os("GLASSBOX_IMAGE_REQUIRED").is_some_and(|v| v == "1") {
        panic!("GLASSBOX_IMAGE_REQUIRED=1, but the image cannot be tested here: {why}");
    }
    eprintln!("SKIPPED the_image_runs_two_shards_with_the_pods_privileges: {why}");
    true
}

fn on_path(program: &str) -> bool {
    Command::new("sh")
        .args(["-c", &format!("command -v {program}")])
        .stdout(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// The podman arguments of the pod (`global` before the subcommand, `run` after it).
struct PodmanArgs {
    global: Vec<String>,
    run: Vec<String>,
}

fn podman_args() -> PodmanArgs {
    let out = Command::new(repo().join("scripts/image"))
        .arg("--podman-args")
        .output()
        .unwrap();
    assert!(out.status.success(), "{}", text(&out));
    let v: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let list = |k: &str| -> Vec<String> {
        v[k].as_array()
            .unwrap()
            .iter()
            .map(|a| a.as_str().unwrap().to_string())
            .collect()
    };
    PodmanArgs {
        global: list("global"),
        run: list("run"),
    }
}

/// Removes the test's containers and image, whatever happened.
struct Cleanup {
    global: Vec<String>,
    names: Vec<String>,
    image: String,
    dir: PathBuf,
}

impl Drop for Cleanup {
    fn drop(&mut self) {
        for n in &self.names {
            let _ = podman(&self.global, &["rm", "-f", "-i", n]);
        }
        let _ = podman(&self.global, &["rmi", "-f", &self.image]);
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

fn podman(global: &[String], args: &[&str]) -> Output {
    Command::new("podman")
        .args(global)
        .args(args)
        .stdin(Stdio::null())
        .output()
        .unwrap()
}

#[test]
fn the_image_runs_two_shards_with_the_pods_privileges() {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 && skip("not root (the image is built and run as root)") {
        return;
    }
    for tool in ["podman", "mmdebstrap"] {
        if !on_path(tool)
            && skip(&format!(
                "{tool} is missing (scripts/setup --image installs it)"
            ))
        {
            return;
        }
    }
    let args = podman_args();
    let id = std::process::id();
    let dir = Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("glassbox-image-{id}"));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(dir.join("targets")).unwrap();
    std::fs::create_dir_all(dir.join("evidence")).unwrap();
    let image = format!("localhost/glassbox-image-test:{id}");
    let names: Vec<String> = (0..2)
        .map(|k| format!("glassbox-image-test-{id}-{k}"))
        .collect();
    let _cleanup = Cleanup {
        global: args.global.clone(),
        names: names.clone(),
        image: image.clone(),
        dir: dir.clone(),
    };
    // A copy: other builds in the same tree may replace the binary meanwhile.
    let binary = dir.join("glassbox");
    std::fs::copy(env!("CARGO_BIN_EXE_glassbox"), &binary).unwrap();

    // The image, with this binary's selftest record made inside it.
    let started = Instant::now();
    let record = dir.join("image.json");
    let build = Command::new(repo().join("scripts/image"))
        .arg("--binary")
        .arg(&binary)
        .args(["--tag", &image, "--out"])
        .arg(&record)
        .output()
        .unwrap();
    eprintln!(
        "scripts/image took {:.0?}:\n{}",
        started.elapsed(),
        String::from_utf8_lossy(&build.stderr)
    );
    if !build.status.success() {
        // Whether this machine runs containers at all: one of the cached root filesystem (if
        // the build got that far), with the pod's arguments.
        let rootfs = podman(
            &args.global,
            &[
                "images",
                "-q",
                "--filter",
                "reference=localhost/glassbox-rootfs",
            ],
        );
        let rootfs = String::from_utf8_lossy(&rootfs.stdout);
        if let Some(rootfs) = rootfs.lines().next() {
            let mut probe = vec!["run", "--rm"];
            probe.extend(args.run.iter().map(String::as_str));
            probe.extend([rootfs, "true"]);
            let p = podman(&args.global, &probe);
            if !p.status.success() {
                skip(&format!(
                    "this machine cannot run the image's containers: podman run: {}",
                    String::from_utf8_lossy(&p.stderr).trim()
                ));
                return;
            }
        }
        panic!("scripts/image failed: {}", text(&build));
    }
    let built: serde_json::Value =
        serde_json::from_slice(&std::fs::read(&record).unwrap()).unwrap();
    let checks = built["checks"].as_array().unwrap();
    assert!(!checks.is_empty(), "{built:#}");
    for c in checks {
        assert_eq!(c["proven"], true, "{c}");
    }
    let version = Command::new(&binary).arg("--version").output().unwrap();
    assert_eq!(
        String::from_utf8_lossy(&version.stdout).trim(),
        format!("glassbox {}", built["glassbox_version"].as_str().unwrap())
    );
    assert!(built["digest"].as_str().unwrap().starts_with("sha256:"));

    // The store, and the list as the Job's ConfigMap holds it.
    let pg = glassbox_store::testing::shared(Path::new(env!("CARGO_TARGET_TMPDIR")));
    let url = pg.database("image");
    let lines: Vec<String> = CASES
        .iter()
        .map(|c| format!("-- python3 /fixtures/{c}/server.py"))
        .collect();
    std::fs::write(dir.join("targets/targets.txt"), lines.join("\n") + "\n").unwrap();

    // Both shards at once, each a container as the Job's pod: its privileges and nothing more,
    // the list read-only at /targets, the evidence at /evidence, the store's URL in
    // $GLASSBOX_STORE. `--network host`: the test's PostgreSQL listens on this machine's
    // loopback, as a pod reaches its store over the cluster's network (the audited servers
    // never see it: each runs in its own network namespace, whose packets end at glassbox's
    // edge). The controls are mounted read-only at /fixtures, their shared `lib` made visible
    // to the sandbox with `--ro`.
    let started = Instant::now();
    let shards: Vec<_> = (0..2)
        .map(|k| {
            let mut c = Command::new("podman");
            c.args(&args.global)
                .args(["run", "--rm", "--name", &names[k], "--network", "host"])
                .args(&args.run)
                .arg("-v")
                .arg(format!("{}:/targets:ro", dir.join("targets").display()))
                .arg("-v")
                .arg(format!("{}:/evidence", dir.join("evidence").display()))
                .arg("-v")
                .arg(format!(
                    "{}:/fixtures:ro",
                    repo().join("fixtures").display()
                ))
                .args(["-e", &format!("GLASSBOX_STORE={url}")])
                .args(["-e", &format!("JOB_COMPLETION_INDEX={k}")])
                .args(["-e", "GLASSBOX_STATE_DIR=/var/lib/glassbox"])
                .arg(&image)
                .args([
                    "batch",
                    "/targets/targets.txt",
                    "--shard",
                    &format!("{k}/2"),
                ])
                .args(["--jobs", "2", "--evidence", &format!("/evidence/shard-{k}")])
                .args(["--ro", "/fixtures/lib"])
                .stdin(Stdio::null())
                .stdout(Stdio::piped())
                .stderr(Stdio::piped());
            c.spawn().unwrap()
        })
        .collect();
    let outs: Vec<Output> = shards
        .into_iter()
        .map(|c| c.wait_with_output().unwrap())
        .collect();
    eprintln!("both shards took {:.0?}", started.elapsed());
    for (k, o) in outs.iter().enumerate() {
        eprintln!("shard {k}/2:\n{}", String::from_utf8_lossy(&o.stdout));
        // Clean or flagged: never inconclusive (every check proven) nor an error.
        assert!(matches!(o.status.code(), Some(0 | 1)), "{}", text(o));
        assert!(!text(o).contains(pg.password()), "the password is printed");
    }

    // Every target audited once, by one of the shards, into the store; every check proven;
    // every network run behind a verified isolated edge.
    let store = Store::open_location(&StoreLocation::parse(&url)).unwrap();
    let audits = store.audits().unwrap();
    assert_eq!(audits.len(), CASES.len(), "{audits:#?}");
    let mut per_shard = [0; 2];
    for a in &audits {
        assert!(
            CASES
                .iter()
                .any(|c| a.target == format!("python3 /fixtures/{c}/server.py")),
            "{}",
            a.target
        );
        assert!(!a.checks.is_empty(), "{a:#?}");
        for c in &a.checks {
            assert!(
                !matches!(c.outcome, Outcome::Unverified | Outcome::Inconclusive),
                "{}: {} {:?} {:?}",
                a.target,
                c.check_id,
                c.outcome,
                c.reason
            );
        }
        let k = (0..2)
            .find(|k| a.evidence_dir.starts_with(format!("/evidence/shard-{k}")))
            .unwrap_or_else(|| panic!("{}", a.evidence_dir.display()));
        per_shard[k] += 1;
        let host = dir.join(a.evidence_dir.strip_prefix("/").unwrap());
        let manifest: serde_json::Value =
            serde_json::from_slice(&std::fs::read(host.join("manifest.json")).unwrap()).unwrap();
        let runs = manifest["network"]["runs"].as_array().unwrap();
        assert!(!runs.is_empty(), "{}", a.target);
        for r in runs {
            assert_eq!(r["isolation_verified"], true, "{}: {r:#}", a.target);
        }
    }
    assert!(
        per_shard.iter().all(|n| *n > 0),
        "both shards: {per_shard:?}"
    );
    assert!(
        audits
            .iter()
            .find(|a| a.target.contains("appends-to-bashrc"))
            .unwrap()
            .findings
            .iter()
            .any(|f| f.check_id == "persistence"),
        "the flagged control is flagged"
    );

    // Nothing left running: no container of the test or of the build, no process of theirs.
    let ps = podman(&args.global, &["ps", "-a", "--format", "{{.Names}}"]);
    let ps = String::from_utf8_lossy(&ps.stdout);
    assert!(
        !ps.lines()
            .any(|n| names.iter().any(|m| m == n) || n.starts_with("glassbox-image-build-")),
        "{ps}"
    );
    let stray: Vec<String> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).replace('\0', " "))
        .filter(|c| c.contains("/targets/targets.txt") || c.contains(&image))
        .collect();
    assert!(stray.is_empty(), "{stray:#?}");
}
