//! The recorder on the real sandbox.

use glassbox_model::{Event, EventKind, SockAddr};
use glassbox_sandbox::{Config, PlantedFile, Sandbox};
use glassbox_trace::{file_channel_available, rules, Clock, FileChannel, Recorder};
use std::io::Read;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

fn record(program: &str, argv: &[&str], ebpf: bool) -> (Vec<Event>, String) {
    let (events, out, _) = record_stats(program, argv, ebpf);
    (events, out)
}

fn record_stats(
    program: &str,
    argv: &[&str],
    ebpf: bool,
) -> (Vec<Event>, String, glassbox_trace::RecorderStats) {
    let cfg = Config {
        program: program.into(),
        argv: argv.iter().map(Into::into).collect(),
        cwd: std::env::current_dir().unwrap(),
        extra_ro: vec![],
        extra_rw: vec![],
        user: "sam".into(),
        hostname: "devbox".into(),
        path_prefix: vec![],
        env: vec![],
        files: vec![PlantedFile {
            path: "/home/sam/.aws/credentials".into(),
            contents: b"[default]\n".to_vec(),
            mode: 0o600,
        }],
        rules: rules(ebpf),
        network: None,
        refusals: glassbox_sandbox::seccomp::Refusals::Kernel,
        limits: glassbox_sandbox::Limits::default(),
        trust: None,
        clock: None,
    };
    let mut files = None;
    let mut sb = Sandbox::spawn_with(&cfg, &mut |pid| {
        if ebpf {
            files = Some(FileChannel::attach(pid).map_err(|e| e.to_string())?);
        }
        Ok(())
    })
    .expect("spawn");
    let clock = Arc::new(Clock::new());
    let mut rec = Recorder::new(sb.listener.take().unwrap(), "/home/sam", clock);
    if let Some(f) = files {
        rec = rec.with_file_channel(f);
    }
    let stop = AtomicBool::new(false);
    struct Keep(Vec<Event>);
    impl glassbox_trace::Sink for Keep {
        fn event(&mut self, e: Event) {
            self.0.push(e);
        }
        fn idle(&mut self) {}
    }
    let t = std::thread::spawn(move || {
        let mut events = Keep(Vec::new());
        let stats = rec.run(1, &stop, &mut events);
        (events.0, stats)
    });
    drop(sb.stdin.take());
    let mut out = String::new();
    sb.stdout.take().unwrap().read_to_string(&mut out).unwrap();
    sb.wait_timeout(Duration::from_secs(20)).expect("exit");
    sb.finish();
    let (events, stats) = t.join().unwrap();
    (events, out, stats)
}

fn paths(events: &[Event], kind: &str) -> Vec<String> {
    events
        .iter()
        .filter(|e| {
            matches!(
                (&e.kind, kind),
                (EventKind::Open { .. }, "open") | (EventKind::Stat { .. }, "stat")
            )
        })
        .map(|e| e.kind.path().unwrap().to_lossy())
        .collect()
}

fn execs_opens_stats_and_connects_are_recorded(ebpf: bool) {
    let (events, out) = record(
        "/bin/sh",
        &[
            "sh",
            "-c",
            "cd ~ && cat .aws/credentials; test -e ~/.ssh/id_rsa; \
             python3 -c 'import socket; s=socket.socket(); s.settimeout(0.2)\ntry: s.connect((\"127.0.0.1\", 9))\nexcept OSError: pass' 2>/dev/null; \
             cat ~/.missing 2>/dev/null; echo done",
        ],
        ebpf,
    );
    assert!(out.contains("[default]"), "{out}");
    let execs: Vec<_> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Exec { path, argv, .. } => {
                Some((e.pid, e.ppid, path.to_lossy(), argv.len()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(execs[0], (2, 1, "/bin/sh".to_string(), 3), "{execs:?}");
    let cat = execs
        .iter()
        .find(|e| e.2.ends_with("/cat"))
        .expect("cat exec");
    assert_eq!(cat.1, 2, "cat's parent is the shell");
    // The relative open is resolved against the working directory inside the sandbox.
    assert!(paths(&events, "open").contains(&"/home/sam/.aws/credentials".to_string()));
    assert!(
        paths(&events, "stat").contains(&"/home/sam/.ssh/id_rsa".to_string()),
        "{:?}",
        paths(&events, "stat")
    );
    let connects: Vec<_> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Connect { addr, .. } => Some(addr.clone()),
            _ => None,
        })
        .collect();
    if std::process::Command::new("python3")
        .arg("-V")
        .output()
        .is_ok()
    {
        assert!(
            connects.contains(&SockAddr::Inet {
                ip: "127.0.0.1".into(),
                port: 9
            }),
            "{connects:?}"
        );
    }
    // Ids are dense and ordered.
    for (i, e) in events.iter().enumerate() {
        assert_eq!(e.id, i as u64 + 1);
    }
    // The eBPF channel also reports each open's result.
    let result_of = |p: &str| {
        events.iter().find_map(|e| match &e.kind {
            EventKind::Open { path, result, .. } if path.to_lossy() == p => Some(*result),
            _ => None,
        })
    };
    let creds = result_of("/home/sam/.aws/credentials").expect("open recorded");
    let missing = result_of("/home/sam/.missing").expect("failed open recorded");
    if ebpf {
        assert!(creds.unwrap() >= 0, "{creds:?}");
        assert_eq!(missing, Some(-(libc::ENOENT as i64)));
    } else {
        assert_eq!(
            (creds, missing),
            (None, None),
            "user notification cannot see results"
        );
    }
}

#[test]
fn with_user_notification() {
    execs_opens_stats_and_connects_are_recorded(false);
}

#[test]
fn with_the_ebpf_file_channel() {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: the eBPF channel needs root");
        return;
    }
    file_channel_available().expect("root can load the programs");
    execs_opens_stats_and_connects_are_recorded(true);
}

/// A path whose page leaves the caller's page tables while the call runs (another thread drops
/// it, as reclaim or page migration does under memory pressure) is still recorded: the eBPF
/// program cannot read it at the return, and the recorder reads it again, also for processes
/// that end right after (each waits in `exit_group` until its records are read). Every open is
/// recorded and nothing is lost.
#[test]
fn a_path_whose_page_was_dropped_during_the_call_is_still_recorded() {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("skipped: the eBPF channel needs root");
        return;
    }
    file_channel_available().expect("root can load the programs");
    // Short-lived processes, each opening a path whose page another of its threads keeps
    // dropping, then ending at once (os._exit: no cleanup to wait for).
    const PROCESSES: usize = 10;
    const OPENS: usize = 3000;
    let child = format!(
        r#"
import ctypes, os, threading
libc = ctypes.CDLL(None, use_errno=True)
libc.mmap.restype = ctypes.c_void_p
libc.mmap.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int, ctypes.c_int, ctypes.c_int, ctypes.c_long]
libc.madvise.argtypes = [ctypes.c_void_p, ctypes.c_size_t, ctypes.c_int]
libc.open.argtypes = [ctypes.c_void_p, ctypes.c_int]
fd = os.open(os.path.expanduser("~/page"), os.O_RDONLY)
# A private mapping of a file, never written: a dropped page comes back with the same bytes.
at = libc.mmap(None, 4096, 1, 2, fd, 0)
started = threading.Event()
def drop():
    while True:
        libc.madvise(at, 4096, 4)
        started.set()
threading.Thread(target=drop, daemon=True).start()
started.wait()
ok = 0
for _ in range({OPENS}):
    f = libc.open(at, 0)
    if f >= 0:
        ok += 1
        libc.close(f)
print(ok, flush=True)
os._exit(0)
"#
    );
    let script = format!(
        r#"
import os, subprocess, sys
with open(os.path.expanduser("~/page"), "wb") as f:
    f.write(os.path.expanduser("~/.aws/credentials").encode() + b"\0" * 4096)
total = 0
for _ in range({PROCESSES}):
    total += int(subprocess.run([sys.executable, "-c", {child:?}], capture_output=True, text=True).stdout or 0)
print("opened", total)
"#
    );
    let (events, out, stats) =
        record_stats("/usr/bin/env", &["env", "python3", "-c", &script], true);
    assert!(
        out.contains(&format!("opened {}", PROCESSES * OPENS)),
        "{out}"
    );
    let n = paths(&events, "open")
        .iter()
        .filter(|p| p.as_str() == "/home/sam/.aws/credentials")
        .count();
    assert_eq!(
        (n, stats.lost, &stats.lost_why),
        (PROCESSES * OPENS, 0, &vec![])
    );
}
