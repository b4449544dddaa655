//! The sandbox's resource limits, end to end: each limit is reached by a real process, and
//! the sandbox's cgroup is gone afterwards. Where this host has no cgroup for a limit, the
//! rlimit fallback is what is checked (see `limits::Host::plan`).

use glassbox_model::ServerExit;
use glassbox_sandbox::limits::{Host, MIB};
use glassbox_sandbox::{Config, Limits, Sandbox};
use std::io::{Read, Write};
use std::path::PathBuf;
use std::time::Duration;

fn config(program: &str, argv: &[&str], limits: Limits) -> Config {
    Config {
        program: program.into(),
        argv: argv.iter().map(Into::into).collect(),
        cwd: std::env::current_dir().unwrap(),
        extra_ro: vec![],
        extra_rw: vec![],
        user: "sam".into(),
        hostname: "devbox".into(),
        path_prefix: vec![],
        env: vec![],
        files: vec![],
        rules: vec![],
        network: None,
        refusals: glassbox_sandbox::seccomp::Refusals::Kernel,
        limits,
        trust: None,
        clock: None,
    }
}

fn python(code: &str, limits: Limits) -> Config {
    config("/usr/bin/python3", &["python3", "-c", code], limits)
}

/// Runs to the end (at most 30 s); stdout, the exit, the limits reached. Stderr is printed.
fn run(cfg: &Config) -> (String, ServerExit, Vec<String>) {
    let mut sb = Sandbox::spawn(cfg).expect("spawn");
    drop(sb.stdin.take());
    let mut stderr = sb.stderr.take().unwrap();
    let err = std::thread::spawn(move || {
        let mut e = String::new();
        let _ = stderr.read_to_string(&mut e);
        e
    });
    let mut out = String::new();
    sb.stdout.take().unwrap().read_to_string(&mut out).unwrap();
    let exit = sb.wait_timeout(Duration::from_secs(30)).expect("exit");
    eprintln!("stderr: {}", err.join().unwrap());
    sb.finish();
    (out, exit, sb.limits_reached().to_vec())
}

/// The sandbox cgroup's directories of a running process, in every hierarchy glassbox made
/// one in (`<glassbox's cgroup>/glassbox/gb-<pid>-<n>`).
fn cgroup_dirs(pid: i32) -> Vec<PathBuf> {
    let text = std::fs::read_to_string(format!("/proc/{pid}/cgroup")).unwrap();
    let mut names: Vec<&str> = text
        .lines()
        .filter_map(|l| l.rsplit('/').next())
        .filter(|n| n.starts_with("gb-"))
        .collect();
    names.sort();
    names.dedup();
    let mut out = Vec::new();
    for h in Host::detect().hierarchies {
        for n in &names {
            let d = h.own.join("glassbox").join(n);
            if d.exists() {
                out.push(d);
            }
        }
    }
    out
}

#[test]
fn the_limits_are_applied_recorded_and_removed() {
    let plan = Host::detect().plan();
    let cfg = config(
        "/bin/sh",
        &[
            "sh",
            "-c",
            "cat /proc/self/cgroup; grep -E 'Max (file size|core file size)' /proc/self/limits; \
             df -k /tmp /home/sam | tail -2; echo ready; read x",
        ],
        Limits::default(),
    );
    let mut sb = Sandbox::spawn(&cfg).expect("spawn");
    let limits = sb.settings().limits.clone();
    for (resource, how) in &plan {
        let recorded = &limits[resource];
        match how.as_str() {
            "cgroup v1" | "cgroup v2" => assert!(
                recorded.contains(&format!("via {how} {resource}")),
                "{resource}: {recorded}"
            ),
            "RLIMIT_DATA" | "RLIMIT_NPROC" => {
                assert!(recorded.contains(how.as_str()), "{recorded}")
            }
            _ => assert!(recorded.contains("not enforced"), "{recorded}"),
        }
    }
    assert_eq!(limits["memory"].split(" via").next(), Some("1 GiB"));
    assert!(limits["pids"].starts_with("512 "), "{limits:?}");
    assert!(limits["cpu"].starts_with("1 CPU "), "{limits:?}");
    assert!(
        limits["disk"].starts_with("512 MiB per tmpfs"),
        "{limits:?}"
    );
    assert_eq!(limits["core"], "0 via RLIMIT_CORE");

    let mut stdout = sb.stdout.take().unwrap();
    let mut out = Vec::new();
    let mut buf = [0u8; 4096];
    while !String::from_utf8_lossy(&out).contains("ready") {
        let n = stdout.read(&mut buf).unwrap();
        assert!(n > 0, "{}", String::from_utf8_lossy(&out));
        out.extend_from_slice(&buf[..n]);
    }
    let out = String::from_utf8_lossy(&out).into_owned();
    let dirs = cgroup_dirs(sb.server_pid());
    if plan.values().any(|h| h.starts_with("cgroup")) {
        assert!(!dirs.is_empty(), "the server is in no glassbox cgroup");
        // Inside, the cgroup namespace is rooted at the sandbox's cgroup.
        assert!(
            out.lines()
                .filter(|l| l.contains("memory") || l.contains("pids"))
                .all(|l| l.ends_with(":/")),
            "{out}"
        );
        for d in &dirs {
            let procs = std::fs::read_to_string(d.join("cgroup.procs")).unwrap();
            // The outer process, pid 1, the server, cat/grep/df done: at least three.
            assert!(procs.lines().count() >= 3, "{}: {procs}", d.display());
        }
    }
    let words: Vec<String> = out
        .lines()
        .map(|l| l.split_whitespace().collect::<Vec<_>>().join(" "))
        .collect();
    assert!(
        words.contains(&"Max file size 536870912 536870912 bytes".to_string()),
        "{out}"
    );
    assert!(
        words.contains(&"Max core file size 0 0 bytes".to_string()),
        "{out}"
    );
    assert_eq!(
        out.lines()
            .filter(|l| l.starts_with("tmpfs") && l.contains(" 524288 "))
            .count(),
        2,
        "{out}"
    );
    sb.stdin.take().unwrap().write_all(b"go\n").unwrap();
    assert_eq!(
        sb.wait_timeout(Duration::from_secs(10)),
        Some(ServerExit::Exited { code: 0 })
    );
    sb.finish();
    assert!(sb.limits_reached().is_empty(), "{:?}", sb.limits_reached());
    for d in &dirs {
        assert!(!d.exists(), "cgroup left behind: {}", d.display());
    }
}

#[test]
fn a_fork_bomb_stops_at_the_pids_limit() {
    let limits = Limits {
        pids: Some(32),
        ..Limits::default()
    };
    let code = r#"
import os, time
n = 0
for i in range(200):
    try:
        if os.fork() == 0:
            os.close(1)
            os.close(2)
            time.sleep(3600)  # fork-bomb-child
            os._exit(0)
        n += 1
    except OSError:
        pass
print(n, flush=True)
os._exit(0)
"#;
    let (out, exit, reached) = run(&python(code, limits));
    assert_eq!(exit, ServerExit::Exited { code: 0 }, "{out}");
    let forks: u32 = out.trim().parse().unwrap();
    // The outer process, pid 1 and the server count too.
    assert!(forks > 0 && forks < 32, "{forks} forks succeeded");
    // The children sleep an hour: the sandbox ended (its pid 1 was not left waiting for
    // them) and none of them is left running.
    let left: Vec<String> = std::fs::read_dir("/proc")
        .unwrap()
        .flatten()
        .filter_map(|e| std::fs::read(e.path().join("cmdline")).ok())
        .map(|c| String::from_utf8_lossy(&c).into_owned())
        .filter(|c| c.contains("# fork-bomb-child"))
        .collect();
    assert!(left.is_empty(), "{} children left running", left.len());
    if Host::detect().plan()["pids"].starts_with("cgroup") {
        assert!(
            reached
                .iter()
                .any(|r| r.starts_with("pids limit (32) reached: ")),
            "{reached:?}"
        );
    }
}

#[test]
fn a_memory_bomb_ends_at_the_memory_limit() {
    let limits = Limits {
        memory: Some(64 * MIB),
        ..Limits::default()
    };
    // 16 MiB written at a time, each printed once it is held.
    let code = r#"
held = []
for i in range(64):
    held.append(b'\x5a' * (16 << 20))
    print(i, flush=True)
"#;
    let (out, exit, reached) = run(&python(code, limits));
    let last: u32 = out.lines().last().and_then(|l| l.parse().ok()).unwrap_or(0);
    assert!(
        last < 4,
        "held {} MiB under a 64 MiB limit",
        (last + 1) * 16
    );
    if Host::detect().plan()["memory"].starts_with("cgroup") {
        assert_eq!(
            exit,
            ServerExit::Signaled {
                signal: libc::SIGKILL,
                by_glassbox: false
            }
        );
        assert!(
            reached
                .iter()
                .any(|r| r
                    .starts_with("memory limit (64 MiB) reached: 1 process killed out of memory")),
            "{reached:?}"
        );
    } else {
        // RLIMIT_DATA: the allocation fails; Python says MemoryError.
        assert_eq!(exit, ServerExit::Exited { code: 1 });
    }
}

#[test]
fn a_disk_filler_fills_its_tmpfs_and_no_more() {
    let limits = Limits {
        disk: 8 * MIB,
        ..Limits::default()
    };
    let cfg = config(
        "/bin/sh",
        &[
            "sh",
            "-c",
            "dd if=/dev/zero of=/tmp/fill bs=1M count=64 2>/dev/null; stat -c %s /tmp/fill; \
             dd if=/dev/zero of=$HOME/fill bs=1M count=64 2>/dev/null; stat -c %s $HOME/fill; \
             df /tmp $HOME >&2",
        ],
        limits,
    );
    let (out, exit, reached) = run(&cfg);
    assert_eq!(exit, ServerExit::Exited { code: 0 }, "{out}");
    let sizes: Vec<u64> = out.lines().map(|l| l.trim().parse().unwrap()).collect();
    assert_eq!(sizes.len(), 2, "{out}");
    for s in sizes {
        assert!(
            s > 4 * MIB && s <= 8 * MIB,
            "{s} bytes written into an 8 MiB tmpfs"
        );
    }
    assert!(
        reached.contains(&"/tmp is full (8 MiB tmpfs)".to_string()),
        "{reached:?}"
    );
    assert!(
        reached.contains(&"/home/sam is full (8 MiB tmpfs)".to_string()),
        "{reached:?}"
    );
}

#[test]
fn a_busy_loop_gets_its_cpu_share() {
    if !Host::detect().plan()["cpu"].starts_with("cgroup") {
        eprintln!("skipped: no cpu cgroup here (the CPU limit is recorded as not enforced)");
        return;
    }
    let limits = Limits {
        cpus: Some(0.1),
        ..Limits::default()
    };
    // One second of wall time spinning: with a tenth of a CPU, about 0.1 s of it on a CPU.
    let code = r#"
import time
t = time.monotonic()
while time.monotonic() - t < 1.0:
    pass
print(time.process_time(), flush=True)
"#;
    let (out, exit, reached) = run(&python(code, limits));
    assert_eq!(exit, ServerExit::Exited { code: 0 }, "{out}");
    let cpu: f64 = out.trim().parse().unwrap();
    assert!(cpu < 0.4, "{cpu} s of CPU in 1 s under a 0.1 CPU limit");
    assert!(
        reached
            .iter()
            .any(|r| r.starts_with("cpu limit (0.1 CPU) reached: throttled for")),
        "{reached:?}"
    );
}

#[test]
fn limits_no_server_can_run_under_are_refused() {
    let limits = Limits {
        pids: Some(1),
        ..Limits::default()
    };
    let e = Sandbox::spawn(&config("/bin/true", &["true"], limits)).unwrap_err();
    assert!(e.to_string().contains("too small"), "{e}");
}
