//! The moved clock of a trigger run, in the real sandbox: each claim of `clock.rs` and
//! `docs/triggers.md`, shown. The monotonic and boot clocks move for every program (the time
//! namespace); the wall clock moves for dynamically linked programs and their children (the
//! shim), not for a statically linked one nor for a child started without `LD_PRELOAD`; waits
//! on a deadline last what they were meant to.

use glassbox_model::ServerExit;
use glassbox_sandbox::clock::ClockShift;
use glassbox_sandbox::{Config, Sandbox};
use std::io::Read;
use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::{Duration, SystemTime, UNIX_EPOCH};

const DAYS: u32 = 400;
const SHIFT: i64 = DAYS as i64 * 86_400;

/// Prints its wall clock (`clock_gettime`, `time`), monotonic clock and uptime, in seconds; then
/// waits on a condition variable until a wall-clock deadline 0.2 s ahead and prints how long
/// that took, in milliseconds.
const PROGRAM: &str = r#"
#include <pthread.h>
#include <stdio.h>
#include <time.h>
int main(void) {
  struct timespec w, m, a, b;
  clock_gettime(CLOCK_REALTIME, &w);
  clock_gettime(CLOCK_MONOTONIC, &m);
  double up = 0;
  FILE *f = fopen("/proc/uptime", "r");
  if (f) { if (fscanf(f, "%lf", &up) != 1) up = 0; fclose(f); }
  printf("%ld %ld %ld %ld\n", (long)w.tv_sec, (long)time(NULL), (long)m.tv_sec, (long)up);
  pthread_mutex_t mu = PTHREAD_MUTEX_INITIALIZER;
  pthread_cond_t c = PTHREAD_COND_INITIALIZER;
  clock_gettime(CLOCK_REALTIME, &w);
  w.tv_nsec += 200000000;
  if (w.tv_nsec >= 1000000000) { w.tv_sec++; w.tv_nsec -= 1000000000; }
  clock_gettime(CLOCK_MONOTONIC, &a);
  pthread_mutex_lock(&mu);
  pthread_cond_timedwait(&c, &mu, &w);
  clock_gettime(CLOCK_MONOTONIC, &b);
  printf("%ld\n", (long)((b.tv_sec - a.tv_sec) * 1000 + (b.tv_nsec - a.tv_nsec) / 1000000));
  return 0;
}
"#;

/// A folder of this test's own, visible in the sandbox (its working folder), with the program
/// built dynamically and statically linked.
fn programs(test: &str) -> PathBuf {
    let dir =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("clock-{test}-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("clocks.c"), PROGRAM).unwrap();
    for (out, extra) in [("dynamic", None), ("static", Some("-static"))] {
        let mut cc = Command::new("cc");
        cc.args(["-O2", "-o"])
            .arg(dir.join(out))
            .arg(dir.join("clocks.c"))
            .arg("-lpthread");
        if let Some(e) = extra {
            cc.arg(e);
        }
        let st = cc.status().expect("a C compiler (cc)");
        assert!(st.success(), "cc {out} failed");
    }
    dir
}

fn run(dir: &Path, script: &str, clock: Option<ClockShift>) -> String {
    let cfg = Config {
        program: "/bin/sh".into(),
        argv: vec!["sh".into(), "-c".into(), script.into()],
        cwd: dir.to_path_buf(),
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
        limits: glassbox_sandbox::Limits::default(),
        trust: None,
        clock,
    };
    let mut sb = Sandbox::spawn(&cfg).expect("spawn");
    drop(sb.stdin.take());
    let mut out = String::new();
    sb.stdout.take().unwrap().read_to_string(&mut out).unwrap();
    let mut err = String::new();
    sb.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    let exit = sb.wait_timeout(Duration::from_secs(60)).expect("exit");
    sb.finish();
    assert_eq!(
        exit,
        ServerExit::Exited { code: 0 },
        "stdout: {out}\nstderr: {err}"
    );
    out
}

fn now() -> i64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap()
        .as_secs() as i64
}

/// The host's uptime, in seconds.
fn uptime() -> i64 {
    let s = std::fs::read_to_string("/proc/uptime").unwrap();
    s.split('.').next().unwrap().parse().unwrap()
}

/// The numbers of a line of the program's output.
fn numbers(line: &str) -> Vec<i64> {
    line.split_whitespace()
        .map(|n| n.parse().unwrap())
        .collect()
}

/// Whether `seen` is `expected`, give or take a minute.
fn near(seen: i64, expected: i64) -> bool {
    (seen - expected).abs() < 60
}

#[test]
fn every_clock_moves_for_a_dynamic_program_and_the_monotonic_ones_for_a_static_one() {
    let dir = programs("moved");
    let out = run(
        &dir,
        "./dynamic; ./static; env -i ./dynamic | head -1",
        Some(ClockShift::days(DAYS)),
    );
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 5, "{out}");
    let (t, up) = (now(), uptime());
    // A dynamically linked program: wall clock (both calls), monotonic clock and uptime moved.
    let d = numbers(lines[0]);
    assert!(
        near(d[0], t + SHIFT) && near(d[1], t + SHIFT),
        "wall clock: {out}"
    );
    assert!(
        near(d[2], up + SHIFT) && near(d[3], up + SHIFT),
        "monotonic clocks: {out}"
    );
    // Its wait on a deadline from the moved wall clock lasted 0.2 s, not 400 days more.
    let waited = numbers(lines[1])[0];
    assert!((150..5_000).contains(&waited), "waited {waited} ms: {out}");
    // A statically linked one: the monotonic clocks move (the kernel's), the wall clock not.
    let s = numbers(lines[2]);
    assert!(near(s[0], t) && near(s[1], t), "static wall clock: {out}");
    assert!(
        near(s[2], up + SHIFT) && near(s[3], up + SHIFT),
        "static monotonic: {out}"
    );
    // A child started with an empty environment loses the shim, not the time namespace.
    let e = numbers(lines[4]);
    assert!(near(e[0], t), "env -i wall clock: {out}");
    assert!(near(e[2], up + SHIFT), "env -i monotonic: {out}");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn without_a_shift_the_clocks_are_the_hosts() {
    let dir = programs("host");
    let out = run(&dir, "./dynamic | head -1; echo ${LD_PRELOAD:-none}", None);
    let lines: Vec<&str> = out.lines().collect();
    let d = numbers(lines[0]);
    let (t, up) = (now(), uptime());
    assert!(near(d[0], t) && near(d[2], up), "{out}");
    assert_eq!(lines[1], "none");
    std::fs::remove_dir_all(&dir).ok();
}

#[test]
fn python_and_node_see_the_moved_date_and_their_timers_and_timeouts_hold() {
    let dir = programs("runtimes");
    let out = run(
        &dir,
        "python3 -c 'import time, threading, queue, datetime, asyncio
t = time.time(); m = time.monotonic(); s = time.monotonic()
time.sleep(0.1); threading.Event().wait(0.1)
try:
    queue.Queue().get(timeout=0.1)
except queue.Empty:
    pass
asyncio.run(asyncio.sleep(0.1))
print(int(t), int(m), datetime.date.today().year, int((time.monotonic() - s) * 1000))'
node -e 'const t = Date.now(); const m = process.hrtime();
setTimeout(() => console.log(Math.floor(t / 1000), m[0], Date.now() - t), 100)'",
        Some(ClockShift::days(DAYS)),
    );
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.len(), 2, "{out}");
    let (t, up) = (now(), uptime());
    let p = numbers(lines[0]);
    assert!(
        near(p[0], t + SHIFT) && near(p[1], up + SHIFT),
        "python: {out}"
    );
    assert!((400..5_000).contains(&p[3]), "python's waits: {out}");
    let n = numbers(lines[1]);
    assert!(
        near(n[0], t + SHIFT) && near(n[1], up + SHIFT),
        "node: {out}"
    );
    assert!((90..5_000).contains(&n[2]), "node's timer: {out}");
    std::fs::remove_dir_all(&dir).ok();
}
