//! The sandbox's own cost, without the recorder: python3 opening and closing a file 200,000
//! times (`bench/openloop.py`), run untraced and in the sandbox with the static seccomp filter
//! (refusals in the kernel, no call routed to a listener), interleaved, median of 5 each.
//! CPU time of each run's whole process tree, from getrusage(RUSAGE_CHILDREN).
//!
//! `cargo bench -p glassbox-sandbox --bench filter`

use glassbox_sandbox::{seccomp::Refusals, Config, Sandbox};
use std::path::{Path, PathBuf};
use std::time::Duration;

fn children_cpu() -> f64 {
    // SAFETY: rusage is plain old data; getrusage fills it.
    let mut r: libc::rusage = unsafe { std::mem::zeroed() };
    // SAFETY: r is a valid out-pointer.
    unsafe { libc::getrusage(libc::RUSAGE_CHILDREN, &mut r) };
    let t = |v: libc::timeval| v.tv_sec as f64 + v.tv_usec as f64 / 1e6;
    t(r.ru_utime) + t(r.ru_stime)
}

fn python() -> PathBuf {
    let out = std::process::Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .expect("python3");
    PathBuf::from(String::from_utf8_lossy(&out.stdout).trim())
}

fn untraced(python: &Path, script: &Path) -> f64 {
    let before = children_cpu();
    std::process::Command::new(python)
        .arg(script)
        .status()
        .expect("run");
    children_cpu() - before
}

fn sandboxed(python: &Path, script: &Path, root: &Path) -> f64 {
    let prefix = python
        .parent()
        .and_then(Path::parent)
        .map(Path::to_path_buf)
        .unwrap_or_default();
    let cfg = Config {
        program: python.to_path_buf(),
        argv: vec!["python3".into(), script.into()],
        cwd: root.to_path_buf(),
        extra_ro: vec![prefix],
        extra_rw: vec![],
        user: "sam".into(),
        hostname: "devbox".into(),
        path_prefix: vec![],
        env: vec![],
        files: vec![],
        rules: vec![],
        network: None,
        refusals: Refusals::Kernel,
        limits: glassbox_sandbox::Limits::default(),
        trust: None,
        clock: None,
    };
    let before = children_cpu();
    let mut sb = Sandbox::spawn(&cfg).expect("sandbox");
    drop(sb.stdin.take());
    sb.wait_timeout(Duration::from_secs(120)).expect("exit");
    sb.finish();
    children_cpu() - before
}

fn median(mut v: Vec<f64>) -> f64 {
    v.sort_by(|a, b| a.total_cmp(b));
    v[v.len() / 2]
}

fn main() {
    let root = Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../..")
        .canonicalize()
        .expect("repository root");
    let script = root.join("bench/openloop.py");
    let python = python();
    let (mut a, mut b) = (Vec::new(), Vec::new());
    for _ in 0..5 {
        a.push(untraced(&python, &script));
        b.push(sandboxed(&python, &script, &root));
    }
    let (a, b) = (median(a), median(b));
    println!("python3 open/close x200000, median of 5 (CPU of the process tree)");
    println!("  untraced                                  {a:7.3}s  1.00x");
    println!(
        "  sandbox + static filter, no recorder      {b:7.3}s  {:.2}x",
        b / a
    );
}
