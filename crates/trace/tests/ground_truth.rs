//! The honeytoken channel (fanotify) on the real kernel and the real sandbox.
//!
//! Needs root (CAP_SYS_ADMIN in the initial user namespace), as glassbox's audits do; no
//! network.

use glassbox_sandbox::{Config, PlantedFile, Sandbox};
use glassbox_trace::{Access, AccessKind, HoneytokenWatch, PidNamespace};
use std::io::{BufRead, BufReader, Read};
use std::os::fd::AsRawFd;
use std::path::{Path, PathBuf};
use std::time::{Duration, Instant};

const HONEY: &str = "/home/sam/.aws/credentials";
const AWS_DIR: &str = "/home/sam/.aws";

fn config(script: &str, env: Vec<(String, String)>) -> Config {
    Config {
        program: "/bin/sh".into(),
        argv: vec!["sh".into(), "-c".into(), script.into()],
        cwd: std::env::current_dir().unwrap(),
        extra_ro: vec![],
        extra_rw: vec![],
        user: "sam".into(),
        hostname: "devbox".into(),
        path_prefix: vec![],
        env,
        files: vec![PlantedFile {
            path: HONEY.into(),
            contents: b"[default]\naws_access_key_id = AKIAXXXXXXXXXXXXXXXX\n".to_vec(),
            mode: 0o600,
        }],
        rules: vec![],
        network: None,
        refusals: glassbox_sandbox::seccomp::Refusals::Kernel,
        limits: glassbox_sandbox::Limits::default(),
        trust: None,
        clock: None,
    }
}

/// A sandbox whose honeytoken (and `~/.aws`) was marked before the server executed.
fn start(script: &str, env: Vec<(String, String)>) -> (Sandbox, HoneytokenWatch, PidNamespace) {
    let mut watch = HoneytokenWatch::new().expect("fanotify (run the tests as root)");
    let mut ns = None;
    let sb = Sandbox::spawn_with(&config(script, env), &mut |pid| {
        let root = PathBuf::from(format!("/proc/{pid}/root"));
        watch
            .watch_planted(&root, HONEY, "/home/sam")
            .map_err(|e| e.to_string())?;
        ns = Some(PidNamespace::of(pid).map_err(|e| e.to_string())?);
        Ok(())
    })
    .expect("spawn");
    (sb, watch, ns.unwrap())
}

/// Drains until nothing more arrives for 200 ms.
fn collect(watch: &mut HoneytokenWatch) -> Vec<Access> {
    let mut out = Vec::new();
    loop {
        let mut pfd = libc::pollfd {
            fd: watch.fd().as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        // SAFETY: one valid pollfd.
        if unsafe { libc::poll(&mut pfd, 1, 200) } <= 0 {
            return out;
        }
        watch.drain(0, &mut |a| out.push(a));
    }
}

fn has(acc: &[Access], path: &str, what: AccessKind) -> bool {
    acc.iter().any(|a| a.sandbox_path == path && a.what == what)
}

#[test]
fn reading_the_honeytoken_is_reported_with_the_readers_pid() {
    let (mut sb, mut watch, _) = start(
        "ls -a ~/.aws >/dev/null; exec cat ~/.aws/credentials",
        vec![],
    );
    drop(sb.stdin.take());
    let mut out = String::new();
    sb.stdout.take().unwrap().read_to_string(&mut out).unwrap();
    sb.wait_timeout(Duration::from_secs(10)).expect("exit");
    let acc = collect(&mut watch);
    let server = sb.server_pid();
    sb.finish();
    assert!(out.contains("aws_access_key_id"), "{out}");
    for what in [AccessKind::Open, AccessKind::Read, AccessKind::CloseNoWrite] {
        assert!(
            acc.iter()
                .any(|a| a.sandbox_path == HONEY && a.what == what && a.host_pid == server),
            "no {what:?} of {HONEY} by the server ({server}): {acc:?}"
        );
    }
    assert!(acc
        .iter()
        .filter(|a| a.sandbox_path == HONEY)
        .all(|a| a.host_pid == server && !a.dir));
    // `ls` (a child of the shell, not the server's pid) opened and listed ~/.aws.
    assert!(has(&acc, AWS_DIR, AccessKind::Open), "{acc:?}");
    assert!(has(&acc, AWS_DIR, AccessKind::Read), "{acc:?}");
    assert!(acc
        .iter()
        .filter(|a| a.sandbox_path == AWS_DIR)
        .all(|a| a.dir && a.host_pid != server && a.host_pid > 0));
    assert!(!acc.iter().any(|a| a.what == AccessKind::Overflow));
}

/// A thread flips the path between an unwatched file and the honeytoken while the main thread
/// opens whatever the path says at that moment: the kernel reports the honeytoken opens with
/// the reader's pid, whatever strings were passed.
///
/// The race is made to happen, not hoped for: on a loaded machine the flipper thread may not be
/// scheduled at all during 2000 opens (seen: "0 2000" in a whole test run). So the reader waits
/// until the flipper has started, then opens at least 2000 times, and on until each file was
/// opened at least 20 times (within 120 s).
const RACE: &str = r#"
import os, sys, threading, time
sys.setswitchinterval(1e-5)
H = b"/home/sam/.aws/credentials"
E = b"/etc/hostname"
L = max(len(H), len(E))
path = bytearray(E.ljust(L, b"\0"))
stop = False
flipping = threading.Event()
def flip():
    flipping.set()
    while not stop:
        path[:] = H.ljust(L, b"\0")
        path[:] = E.ljust(L, b"\0")
t = threading.Thread(target=flip)
t.start()
flipping.wait(120)
honey_ino = os.stat(H).st_ino
honey = other = 0
deadline = time.monotonic() + 120
while honey + other < 2000 or (min(honey, other) < 20 and time.monotonic() < deadline):
    fd = os.open(bytes(path).rstrip(b"\0"), os.O_RDONLY)
    os.read(fd, 16)
    if os.fstat(fd).st_ino == honey_ino:
        honey += 1
    else:
        other += 1
    os.close(fd)
stop = True
t.join()
print(os.getpid(), honey, other, flush=True)
sys.stdin.read()
"#;

#[test]
fn racing_path_flips_do_not_hide_honeytoken_opens() {
    let (mut sb, mut watch, ns) = start(
        "exec python3 -c \"$RACE\"",
        vec![("RACE".into(), RACE.into())],
    );
    let mut line = String::new();
    BufReader::new(sb.stdout.take().unwrap())
        .read_line(&mut line)
        .unwrap();
    let mut err = String::new();
    let nums: Vec<i64> = line
        .split_whitespace()
        .filter_map(|w| w.parse().ok())
        .collect();
    if nums.len() != 3 {
        sb.stderr.take().unwrap().read_to_string(&mut err).unwrap();
        panic!("python printed {line:?}; stderr: {err}");
    }
    let (ns_pid, honey, other) = (nums[0] as i32, nums[1], nums[2]);
    assert!(
        honey >= 20 && other >= 20,
        "the flips did not interleave within 120 s: {honey} opens of the honeytoken, {other} of \
         /etc/hostname"
    );
    // The reader still runs (it waits for its stdin): its pid maps into the sandbox.
    let acc = collect(&mut watch);
    let server = sb.server_pid();
    let opens: Vec<&Access> = acc
        .iter()
        .filter(|a| a.sandbox_path == HONEY && a.what == AccessKind::Open)
        .collect();
    eprintln!(
        "{honey} opens of the honeytoken, {other} of /etc/hostname; {} Open events after merging",
        opens.len()
    );
    assert!(!opens.is_empty(), "{acc:?}");
    assert!(opens.len() as i64 <= honey, "{} > {honey}", opens.len());
    assert!(has(&acc, HONEY, AccessKind::Read), "{acc:?}");
    assert!(acc
        .iter()
        .filter(|a| a.what != AccessKind::Overflow)
        .all(|a| a.host_pid == server && a.sandbox_path == HONEY));
    assert_eq!(ns.pid_of(server), Some(ns_pid));
    // glassbox's own process is not in the sandbox.
    assert_eq!(ns.pid_of(std::process::id() as i32), None);
    drop(sb.stdin.take());
    sb.wait_timeout(Duration::from_secs(10)).expect("exit");
    sb.finish();
}

#[test]
fn files_not_marked_produce_nothing() {
    let (mut sb, mut watch, _) = start(
        "echo x > ~/other; cat ~/other /etc/hostname >/dev/null; ls -a ~ / >/dev/null; \
         stat ~/.aws/credentials >/dev/null; test -r ~/.aws/credentials && echo ok",
        vec![],
    );
    drop(sb.stdin.take());
    let mut out = String::new();
    sb.stdout.take().unwrap().read_to_string(&mut out).unwrap();
    sb.wait_timeout(Duration::from_secs(10)).expect("exit");
    let acc = collect(&mut watch);
    sb.finish();
    assert_eq!(out.trim(), "ok");
    // stat and access(2) of the honeytoken are not opens either.
    assert!(acc.is_empty(), "{acc:?}");
}

/// A tmpfs, as the sandbox's home is.
fn scratch(name: &str) -> PathBuf {
    let base = if Path::new("/dev/shm").is_dir() {
        PathBuf::from("/dev/shm")
    } else {
        std::env::temp_dir()
    };
    let d = base.join(format!("glassbox-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&d);
    std::fs::create_dir_all(&d).unwrap();
    d
}

/// glassbox's own reads of the planted files (the walk of what a run left) are not reported
/// once the watch ignores its pid; another process's still are.
#[test]
fn an_ignored_process_is_not_reported() {
    let d = scratch("ignored");
    let f = d.join("f");
    std::fs::write(&f, b"x").unwrap();
    let mut watch = HoneytokenWatch::new().expect("fanotify");
    watch.watch(&f, "/f").unwrap();
    watch.ignore(std::process::id() as i32);
    drop(std::fs::read(&f).unwrap());
    let status = std::process::Command::new("cat")
        .arg(&f)
        .stdout(std::process::Stdio::null())
        .status()
        .unwrap();
    assert!(status.success());
    let acc = collect(&mut watch);
    let _ = std::fs::remove_dir_all(&d);
    let me = std::process::id() as i32;
    assert!(acc.iter().all(|a| a.host_pid != me), "{acc:?}");
    assert!(
        acc.iter()
            .any(|a| a.what == AccessKind::Open && a.host_pid > 0),
        "the other process's open: {acc:?}"
    );
}

#[test]
fn a_full_queue_is_reported_as_overflow() {
    // Opens through distinct hard links are distinct events (no merging): one more than the
    // queue holds overflows it.
    let max: usize = std::fs::read_to_string("/proc/sys/fs/fanotify/max_queued_events")
        .ok()
        .and_then(|s| s.trim().parse().ok())
        .unwrap_or(16384);
    if max > 100_000 {
        eprintln!("skipped: a queue of {max} events");
        return;
    }
    let d = scratch("overflow");
    let f = d.join("f");
    std::fs::write(&f, b"x").unwrap();
    let mut watch = HoneytokenWatch::new().expect("fanotify");
    watch.watch(&f, "/f").unwrap();
    let links: Vec<PathBuf> = (0..max + 64).map(|i| d.join(format!("l{i}"))).collect();
    for l in &links {
        std::fs::hard_link(&f, l).unwrap();
    }
    for l in &links {
        drop(std::fs::File::open(l).unwrap());
    }
    let acc = collect(&mut watch);
    let _ = std::fs::remove_dir_all(&d);
    assert!(
        acc.iter().any(|a| a.what == AccessKind::Overflow),
        "no overflow in {} accesses",
        acc.len()
    );
    let me = std::process::id() as i32;
    assert!(
        acc.iter()
            .filter(|a| a.what == AccessKind::Open)
            .all(|a| a.host_pid == me && a.sandbox_path == "/f"),
        "{:?}",
        &acc[..5]
    );
    assert!(acc.iter().filter(|a| a.what == AccessKind::Open).count() >= max - 1);
}

#[test]
fn symlinks_are_refused() {
    let d = scratch("symlink");
    std::os::unix::fs::symlink("/etc/hostname", d.join("s")).unwrap();
    let mut watch = HoneytokenWatch::new().expect("fanotify");
    let r = watch.watch(&d.join("s"), "/s");
    let _ = std::fs::remove_dir_all(&d);
    assert!(r.is_err());
}

fn open_close_ns(path: &Path, n: u32) -> f64 {
    let c = std::ffi::CString::new(path.to_str().unwrap()).unwrap();
    let t = Instant::now();
    for _ in 0..n {
        // SAFETY: c is a NUL-terminated path; the descriptor is closed at once.
        unsafe {
            let fd = libc::open(c.as_ptr(), libc::O_RDONLY | libc::O_CLOEXEC);
            assert!(fd >= 0);
            libc::close(fd);
        }
    }
    t.elapsed().as_nanos() as f64 / n as f64
}

/// One round: the cost of `open`+`close` of `plain` without any watch, then with a watch
/// whose reader drains as the recorder would (each open of `marked` queues an event of its
/// own), of `plain` and of `marked`; and the reader's time per event.
fn round(plain: &Path, marked: &Path, n: u32) -> [f64; 4] {
    let none = open_close_ns(plain, n);
    let mut watch = HoneytokenWatch::new().expect("fanotify");
    watch.watch(marked, "/marked").unwrap();
    let stop = std::sync::Arc::new(std::sync::atomic::AtomicBool::new(false));
    let stop2 = stop.clone();
    let reader = std::thread::spawn(move || {
        let (mut events, mut busy) = (0usize, Duration::ZERO);
        loop {
            let done = stop2.load(std::sync::atomic::Ordering::Relaxed);
            let mut pfd = libc::pollfd {
                fd: watch.fd().as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: one valid pollfd.
            unsafe { libc::poll(&mut pfd, 1, 20) };
            let t = Instant::now();
            events += watch.drain(0, &mut |_| {});
            busy += t.elapsed();
            if done {
                return (events, busy);
            }
        }
    });
    let unmarked = open_close_ns(plain, n);
    let read = open_close_ns(marked, n);
    stop.store(true, std::sync::atomic::Ordering::Relaxed);
    let (events, busy) = reader.join().unwrap();
    assert!(events > 0);
    [
        none,
        unmarked,
        read,
        busy.as_nanos() as f64 / events.max(1) as f64,
    ]
}

/// Prints the cost of an `open`+`close` of an unmarked and a marked file (the module docs
/// quote it): the best of 5 interleaved rounds, as other work on the machine only adds time.
/// Timing varies too much on shared machines to assert on; it checks that events arrive.
#[test]
fn cost_per_open_of_a_marked_file_and_an_unmarked_one() {
    const N: u32 = 50_000;
    let d = scratch("cost");
    let (plain, marked) = (d.join("plain"), d.join("marked"));
    std::fs::write(&plain, b"x").unwrap();
    std::fs::write(&marked, b"x").unwrap();
    open_close_ns(&plain, N); // warm-up
    let mut best = [f64::MAX; 4];
    for _ in 0..5 {
        for (b, v) in best.iter_mut().zip(round(&plain, &marked, N)) {
            *b = b.min(v);
        }
    }
    // Nobody reads: every open merges into the one pending event.
    let mut watch = HoneytokenWatch::new().expect("fanotify");
    watch.watch(&marked, "/marked").unwrap();
    let merged = (0..5)
        .map(|_| open_close_ns(&marked, N))
        .fold(f64::MAX, f64::min);
    let acc = collect(&mut watch);
    let _ = std::fs::remove_dir_all(&d);
    assert!(has(&acc, "/marked", AccessKind::Open), "{acc:?}");
    eprintln!(
        "open+close, ns/op (best of 5): no watch {:.0}; unmarked file, watch read {:.0}; \
         marked file, each event read {:.0}; marked file, events merged {merged:.0}; \
         reader {:.0} ns per event",
        best[0], best[1], best[2], best[3]
    );
}

/// Runs in a child of the test below, as root of a new user namespace (no `CAP_SYS_ADMIN`
/// in the initial one).
#[test]
fn unavailable_helper() {
    if std::env::var_os("GLASSBOX_FANOTIFY_HELPER").is_none() {
        return;
    }
    let e = HoneytokenWatch::new().expect_err("fanotify without CAP_SYS_ADMIN");
    println!("HELPER-ERROR: {e}");
}

#[test]
fn without_cap_sys_admin_in_the_initial_namespace_the_channel_is_unavailable() {
    let exe = std::env::current_exe().unwrap();
    let out = match std::process::Command::new("unshare")
        .arg("-Ur")
        .arg(&exe)
        .args(["--exact", "unavailable_helper", "--nocapture"])
        .env("GLASSBOX_FANOTIFY_HELPER", "1")
        .output()
    {
        Ok(o) if o.status.success() => o,
        other => {
            eprintln!("skipped: cannot run in a new user namespace: {other:?}");
            return;
        }
    };
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text
        .lines()
        .find(|l| l.starts_with("HELPER-ERROR: "))
        .unwrap_or_else(|| panic!("{text}"));
    assert!(line.contains("not available"), "{line}");
    assert!(
        line.contains("CAP_SYS_ADMIN in the initial user namespace"),
        "{line}"
    );
}
