//! Hostile servers through `glassbox batch -j2`: one that never answers, one that crashes
//! after `initialize`, one that floods stdout with gigabytes of garbage, a fork bomb, a memory
//! bomb, a disk filler, one that kills pid 1 and its parent, one that tries to outlive the
//! audit. Each ends in bounded time with its reason; the machine stays usable while they run;
//! and afterwards no process, mount, network namespace, cgroup or temporary folder of theirs
//! is left.
//!
//! Everything the batch leaves is attributable: the fixtures run from a folder made for this
//! test (a process whose working directory or command line names it is theirs), every sandbox
//! process is in a cgroup named after the batch's pid (`glassbox/gb-<pid>-<n>`), and glassbox's
//! temporary folder (`TMPDIR`) is one made for this test.

use glassbox_sandbox::limits::Host;
use std::collections::{BTreeMap, BTreeSet};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// (fixture folder, command, verdict, what the inconclusive reason must say)
const CASES: &[(&str, &str, &str, &[&str])] = &[
    (
        "never-answers-initialize",
        "python3",
        "inconclusive",
        &["no answer to initialize"],
    ),
    (
        "crashes-after-initialize",
        "node",
        "inconclusive",
        &["after initialize", "exited with status 1"],
    ),
    (
        "floods-stdout-garbage-lines",
        "python3",
        "inconclusive",
        &["no answer to initialize"],
    ),
    (
        "fork-bomb-at-startup",
        "python3",
        "flagged",
        // In whichever phase the bomb reached it (startup or initialize: a matter of timing).
        &["reached the process limit (512) during "],
    ),
    ("memory-bomb-at-startup", "python3", "flagged", &[]),
    (
        "fills-tmp-then-never-answers",
        "python3",
        "flagged",
        &["filled 1 writable mount of the sandbox (the disk limit"],
    ),
    (
        "kills-pid1-and-its-parent",
        "python3",
        "inconclusive",
        &["during call:restart", "killed by signal 9"],
    ),
    ("daemon-outlives-the-audit", "python3", "flagged", &[]),
];

/// The summaries of check `id`'s findings in `report`, one a line.
fn findings_of(report: &serde_json::Value, id: &str) -> String {
    report["checks"]
        .as_array()
        .into_iter()
        .flatten()
        .filter(|c| c["id"] == id)
        .flat_map(|c| c["findings"].as_array().into_iter().flatten())
        .filter_map(|f| f["summary"].as_str())
        .map(|s| format!("\n{s}"))
        .collect()
}

fn fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures")
}

fn copy_dir(from: &Path, to: &Path) {
    std::fs::create_dir_all(to).unwrap();
    for e in std::fs::read_dir(from).unwrap().flatten() {
        let t = e.file_type().unwrap();
        if t.is_dir() {
            if e.file_name() != "__pycache__" {
                copy_dir(&e.path(), &to.join(e.file_name()));
            }
        } else if t.is_file() {
            std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
        }
    }
}

/// Processes whose working directory or command line names `dir`, or that sit in a cgroup
/// of the batch whose pid is `batch`: pid → what they are.
fn processes_of(dir: &Path, batch: u32) -> BTreeMap<i32, String> {
    let dir = dir.to_string_lossy().into_owned();
    let ours = format!("/glassbox/gb-{batch}-");
    let mut out = BTreeMap::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let cwd = std::fs::read_link(e.path().join("cwd"))
            .map(|p| p.to_string_lossy().into_owned())
            .unwrap_or_default();
        let cmdline = std::fs::read(e.path().join("cmdline"))
            .map(|b| String::from_utf8_lossy(&b).replace('\0', " "))
            .unwrap_or_default();
        let cgroup = std::fs::read_to_string(e.path().join("cgroup")).unwrap_or_default();
        if cwd.starts_with(&dir) || cmdline.contains(&dir) || cgroup.contains(&ours) {
            out.insert(pid, format!("{cmdline} (cwd {cwd})"));
        }
    }
    out
}

/// The processes that are in, or hold a descriptor of, one of the network namespaces `ns`
/// (`net:[...]`): pid → namespace.
fn holders_of(ns: &BTreeSet<String>) -> BTreeMap<i32, String> {
    let mut out = BTreeMap::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(pid) = e.file_name().to_string_lossy().parse::<i32>() else {
            continue;
        };
        let mut links: Vec<PathBuf> = vec![e.path().join("ns/net")];
        if let Ok(fds) = std::fs::read_dir(e.path().join("fd")) {
            links.extend(fds.flatten().map(|f| f.path()));
        }
        for l in links {
            if let Ok(t) = std::fs::read_link(&l) {
                let t = t.to_string_lossy().into_owned();
                if ns.contains(&t) {
                    out.insert(pid, t);
                }
            }
        }
    }
    out
}

/// The sandbox cgroups of the batch whose pid is `batch`, in every hierarchy.
fn cgroups_of(batch: u32) -> Vec<PathBuf> {
    let prefix = format!("gb-{batch}-");
    let mut out = Vec::new();
    for h in Host::detect().hierarchies {
        if let Ok(entries) = std::fs::read_dir(h.own.join("glassbox")) {
            for e in entries.flatten() {
                if e.file_name().to_string_lossy().starts_with(&prefix) {
                    out.push(e.path());
                }
            }
        }
    }
    out
}

/// The peak resident memory of a running process, in KiB.
fn peak_rss_kib(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    status
        .lines()
        .find_map(|l| l.strip_prefix("VmHWM:"))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
}

#[test]
fn hostile_servers_end_in_bounded_time_and_leave_nothing_behind() {
    // The limits come first: where pids or memory could not be limited, this test fails
    // before any bomb runs.
    let plan = Host::detect().plan();
    for resource in ["pids", "memory"] {
        assert_ne!(
            plan[resource], "not enforced",
            "{resource} cannot be limited here: refusing to run the bombs ({plan:?})"
        );
    }

    let work = std::env::temp_dir().join(format!("glassbox-hostile-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&work);
    let servers = work.join("servers");
    copy_dir(&fixtures().join("lib"), &servers.join("lib"));
    let mut list = String::from("# hostile controls\n");
    for (dir, interpreter, _, _) in CASES {
        copy_dir(&fixtures().join(dir), &servers.join(dir));
        let file = if *interpreter == "node" {
            "server.js"
        } else {
            "server.py"
        };
        list.push_str(&format!("-- {interpreter} {dir}/{file}\n"));
    }
    std::fs::write(servers.join("targets.txt"), &list).unwrap();
    let tmp = work.join("tmp");
    std::fs::create_dir_all(&tmp).unwrap();
    let state = work.join("state");
    let evidence = work.join("evidence");
    let system_tmp: BTreeSet<String> = std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();

    let mounts_before = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    let start = Instant::now();
    let mut child = Command::new(env!("CARGO_BIN_EXE_glassbox"))
        .current_dir(&work)
        .env("TMPDIR", &tmp)
        .env("GLASSBOX_STATE_DIR", &state)
        .args(["batch", "-j2", "--no-selftest", "--network", "capture"])
        .args([
            "--request-timeout",
            "5",
            "--session-timeout",
            "30",
            "--evidence",
        ])
        .arg(&evidence)
        .arg("--store")
        .arg(state.join("store.sqlite"))
        .arg(servers.join("targets.txt"))
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let batch = child.id();
    let out_pipe = child.stdout.take().unwrap();
    let err_pipe = child.stderr.take().unwrap();
    let read = |mut p: Box<dyn std::io::Read + Send>| {
        std::thread::spawn(move || {
            let mut s = String::new();
            let _ = p.read_to_string(&mut s);
            s
        })
    };
    let (out, err) = (read(Box::new(out_pipe)), read(Box::new(err_pipe)));

    // While the bombs run, glassbox's own memory stays small (the flood is bounded by
    // glassbox, not by the pipe). What ended each target is in its bundle's reason (below); the
    // bound here is a watchdog, far from the session timeouts that end the bombs.
    let mut glassbox_peak = 0;
    let status = loop {
        if let Some(s) = child.try_wait().unwrap() {
            break s;
        }
        if start.elapsed() > Duration::from_secs(900) {
            let _ = child.kill();
            panic!("the batch did not end within 900 s");
        }
        glassbox_peak = glassbox_peak.max(peak_rss_kib(batch).unwrap_or(0));
        std::thread::sleep(Duration::from_millis(250));
    };
    let (out, err) = (out.join().unwrap(), err.join().unwrap());
    assert_eq!(status.code(), Some(3), "stdout:\n{out}\nstderr:\n{err}");
    assert!(
        glassbox_peak < 512 * 1024,
        "glassbox peaked at {glassbox_peak} KiB"
    );

    // The summary: a row per target, in order, with its verdict and its audit.
    let rows: Vec<&str> = out.lines().skip(1).take(CASES.len()).collect();
    for (i, (dir, _, verdict, _)) in CASES.iter().enumerate() {
        let row = rows[i];
        assert!(
            row.contains(dir) && row.contains(verdict) && row.contains("audit "),
            "row {}: {row}\n{out}",
            i + 1
        );
    }
    assert!(
        out.contains("8 targets in ") && out.contains(", 2 at a time: 0 clean, 4 flagged"),
        "{out}"
    );

    // Each bundle: the verdict, the reason naming what happened, the limits recorded.
    let mut bundles: Vec<PathBuf> = std::fs::read_dir(&evidence)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    bundles.sort();
    assert_eq!(bundles.len(), CASES.len(), "{bundles:?}");
    let mut sandbox_netns = BTreeSet::new();
    for (bundle, (dir, _, verdict, says)) in bundles.iter().zip(CASES) {
        let json = |f: &str| -> serde_json::Value {
            serde_json::from_slice(&std::fs::read(bundle.join(f)).unwrap()).unwrap()
        };
        let (report, manifest) = (json("report.json"), json("manifest.json"));
        assert_eq!(report["verdict"], *verdict, "{dir}: {report}");
        // Why it is inconclusive, or what `resource-abuse` found (a bound reached is a
        // finding that names it, issue 33).
        let reason = report["inconclusive_reason"]
            .as_str()
            .unwrap_or("")
            .to_string()
            + &findings_of(&report, "resource-abuse");
        for s in *says {
            assert!(reason.contains(s), "{dir}: {reason:?} does not say {s:?}");
        }
        // The sandbox's network namespace, as the isolation check named it.
        for run in manifest["network"]["runs"].as_array().unwrap() {
            for check in run["isolation"].as_array().unwrap() {
                let c = check.as_str().unwrap();
                if let Some(i) = c.find("net:[") {
                    let id: String = c[i..].chars().take_while(|&ch| ch != ']').collect();
                    sandbox_netns.insert(format!("{id}]"));
                    break;
                }
            }
        }
        let limits = &manifest["sandbox"]["limits"];
        for resource in ["memory", "pids", "cpu"] {
            let how = &plan[resource];
            let recorded = limits[resource].as_str().unwrap_or("");
            if how.starts_with("cgroup") {
                assert!(
                    recorded.contains(&format!("via {how} {resource}")),
                    "{dir}: {limits}"
                );
            }
        }
        assert!(
            limits["disk"].as_str().unwrap_or("").starts_with("512 MiB"),
            "{dir}: {limits}"
        );
        if *dir == "memory-bomb-at-startup" && plan["memory"].starts_with("cgroup") {
            assert!(
                reason.contains("reached the memory limit (1 GiB) during ")
                    && reason.contains("1 process killed out of memory"),
                "{reason}"
            );
        }
        if *dir == "daemon-outlives-the-audit" {
            assert!(
                reason.contains("still running after the server exited in the capture run: "),
                "{reason}"
            );
            let spawn = report["checks"]
                .as_array()
                .unwrap()
                .iter()
                .find(|c| c["id"] == "process-spawn")
                .unwrap();
            assert_eq!(spawn["outcome"], "flag", "{spawn}");
            assert!(
                spawn.to_string().contains("while :; do sleep 1; done"),
                "{spawn}"
            );
        }
    }

    // Nothing left behind.
    let mut leaked = processes_of(&work, batch);
    for _ in 0..20 {
        if leaked.is_empty() {
            break;
        }
        std::thread::sleep(Duration::from_millis(250));
        leaked = processes_of(&work, batch);
    }
    assert!(leaked.is_empty(), "processes left behind: {leaked:?}");
    assert_eq!(
        std::fs::read_to_string("/proc/self/mountinfo").unwrap(),
        mounts_before,
        "mounts changed on the host"
    );
    // Every sandbox had its own network namespace; none is still in use by a process of the
    // batch, in it or holding it open (a bind mount of one would have changed the mounts).
    // The kernel reuses a freed namespace's number at once: a holder that is not the batch's
    // has a new namespace of its own.
    assert!(!sandbox_netns.is_empty());
    let held: BTreeMap<i32, String> = holders_of(&sandbox_netns)
        .into_iter()
        .filter(|(pid, _)| processes_of(&work, batch).contains_key(pid))
        .collect();
    assert!(held.is_empty(), "network namespaces left behind: {held:?}");
    assert!(
        cgroups_of(batch).is_empty(),
        "cgroups left behind: {:?}",
        cgroups_of(batch)
    );
    let left_in_tmp: Vec<_> = std::fs::read_dir(&tmp)
        .unwrap()
        .flatten()
        .map(|e| e.path())
        .collect();
    assert!(
        left_in_tmp.is_empty(),
        "temporary files left behind: {left_in_tmp:?}"
    );
    let new_in_system_tmp: Vec<String> = std::fs::read_dir(std::env::temp_dir())
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| !system_tmp.contains(n) && n.contains(&batch.to_string()))
        .collect();
    assert!(new_in_system_tmp.is_empty(), "{new_in_system_tmp:?}");
    std::fs::remove_dir_all(&work).unwrap();
}
