//! `glassbox trace --isolation microvm`, with real boots (QEMU under TCG here: about 6 s
//! each). The sandbox and the recorder run inside the guest; the host gets their events.
//! These tests never boot two guests at once ([`ONE_VM`]).

use serde_json::Value;
use std::io::{BufRead, BufReader};
use std::path::PathBuf;
use std::process::{Command, Output, Stdio};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// One guest at a time: the machine has two cores and TCG is slow.
static ONE_VM: Mutex<()> = Mutex::new(());

fn one_vm() -> std::sync::MutexGuard<'static, ()> {
    ONE_VM.lock().unwrap_or_else(|e| e.into_inner())
}

fn glassbox() -> Command {
    Command::new(env!("CARGO_BIN_EXE_glassbox"))
}

fn tmp(name: &str) -> PathBuf {
    let p = std::env::temp_dir().join(format!("glassbox-microvm-{name}-{}", std::process::id()));
    let _ = std::fs::remove_file(&p);
    p
}

/// Reads the planted AWS credentials, spawns /bin/true, and prints what it sees of its
/// machine: pid 1's command line and the kernel release. Exits with 5.
const PROBE: &str = "\
import os, subprocess, sys
open(os.path.expanduser('~/.aws/credentials')).read()
subprocess.run(['/bin/true'])
print('cmdline', open('/proc/1/cmdline', 'rb').read().split(b'\\0')[0].decode())
print('release', os.uname().release)
sys.exit(5)
";

fn trace(isolation: &str, out: &PathBuf) -> (Output, Vec<Value>) {
    let o = glassbox()
        .args(["trace", "--isolation", isolation, "--out"])
        .arg(out)
        .args(["--", "python3", "-c", PROBE])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let events = std::fs::read_to_string(out)
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let _ = std::fs::remove_file(out);
    (o, events)
}

fn line<'a>(stdout: &'a str, key: &str) -> &'a str {
    stdout
        .lines()
        .find_map(|l| l.strip_prefix(key).map(str::trim))
        .unwrap_or_else(|| panic!("no {key} line in {stdout:?}"))
}

/// The kinds of events both modes must hold: the exec of /bin/true, the open of the planted
/// secret, and the kernel's own report of that access (the honeytoken).
fn assert_same_kinds(mode: &str, events: &[Value]) {
    let has = |f: &dyn Fn(&Value) -> bool| events.iter().any(f);
    assert!(
        has(&|e| e["kind"] == "exec" && e["path"] == "/bin/true"),
        "{mode}: no exec of /bin/true in {events:?}"
    );
    let secret = |e: &Value| {
        e["path"]
            .as_str()
            .is_some_and(|p| p.ends_with("/.aws/credentials"))
    };
    assert!(
        has(&|e| e["kind"] == "open" && secret(e)),
        "{mode}: no open of the planted secret"
    );
    assert!(
        has(&|e| e["kind"] == "honeytoken" && secret(e)),
        "{mode}: no honeytoken event for the planted secret"
    );
}

#[test]
fn the_guest_records_what_the_namespace_trace_records_behind_its_own_kernel() {
    let _vm = one_vm();
    let (ns, ns_events) = trace("namespace", &tmp("ns.jsonl"));
    let t0 = Instant::now();
    let (vm, vm_events) = trace("microvm", &tmp("vm.jsonl"));
    let took = t0.elapsed();
    let (vm_out, vm_err) = (
        String::from_utf8_lossy(&vm.stdout),
        String::from_utf8_lossy(&vm.stderr),
    );
    let ns_out = String::from_utf8_lossy(&ns.stdout);
    // The command's exit status is glassbox's, in both modes.
    assert_eq!(
        ns.status.code(),
        Some(5),
        "{}",
        String::from_utf8_lossy(&ns.stderr)
    );
    assert_eq!(vm.status.code(), Some(5), "{vm_err}");
    assert_same_kinds("namespace", &ns_events);
    assert_same_kinds("microvm", &vm_events);

    // The backend is recorded, with the accelerator's reason and the guest kernel.
    let backend = vm_err
        .lines()
        .find_map(|l| l.strip_prefix("glassbox: isolation microvm (accel "))
        .unwrap_or_else(|| panic!("no backend line in {vm_err}"));
    let guest_kernel = backend
        .rsplit_once(", kernel ")
        .map(|(_, k)| k.trim_end_matches(')'))
        .unwrap();

    // The boundary: the command ran on the guest's kernel, under the glassbox that is the
    // guest's init (a path that exists only in the guest), not the host's.
    let host_kernel = std::fs::read_to_string("/proc/sys/kernel/osrelease").unwrap();
    assert_eq!(line(&ns_out, "release"), host_kernel.trim());
    assert_eq!(line(&vm_out, "release"), guest_kernel, "{vm_err}");
    assert_eq!(line(&vm_out, "cmdline"), "/run/glassbox/glassbox");
    assert_ne!(line(&ns_out, "cmdline"), "/run/glassbox/glassbox");
    assert!(!std::path::Path::new("/run/glassbox/glassbox").exists());
    eprintln!("microvm trace took {took:?}");
}

/// The qemu processes whose parent is `pid`.
fn qemu_children(pid: u32) -> Vec<u32> {
    let mut v = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(p) = e.file_name().to_string_lossy().parse::<u32>() else {
            continue;
        };
        let stat = std::fs::read_to_string(format!("/proc/{p}/stat")).unwrap_or_default();
        let Some((comm, rest)) = stat.rsplit_once(") ") else {
            continue;
        };
        let ppid = rest.split_whitespace().nth(1).and_then(|s| s.parse().ok());
        if comm.contains("qemu") && ppid == Some(pid) {
            v.push(p);
        }
    }
    v
}

fn alive(pid: u32) -> bool {
    std::fs::read_to_string(format!("/proc/{pid}/stat"))
        .map(|s| {
            s.rsplit_once(") ")
                .is_some_and(|(_, r)| !r.starts_with('Z'))
        })
        .unwrap_or(false)
}

#[test]
fn sigterm_of_glassbox_kills_the_vm_and_a_bad_share_is_refused_before_any_boot() {
    let _vm = one_vm();
    // Refused at once, with the reason: no VM is started for it.
    let o = glassbox()
        .args([
            "trace",
            "--isolation",
            "microvm",
            "--ro",
            "/",
            "--",
            "/bin/true",
        ])
        .output()
        .unwrap();
    assert_eq!(o.status.code(), Some(2));
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("not supported yet"), "{err}");

    let mut child = glassbox()
        .args(["trace", "--isolation", "microvm", "--out", "/dev/null"])
        .args(["--", "sleep", "1000"])
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::piped())
        .spawn()
        .unwrap();
    let pid = child.id();
    let mut stderr = BufReader::new(child.stderr.take().unwrap());
    let mut text = String::new();
    let mut l = String::new();
    // The backend line comes once the command runs in the guest.
    while stderr.read_line(&mut l).unwrap() > 0 {
        text.push_str(&l);
        if l.contains("isolation microvm") {
            break;
        }
        l.clear();
    }
    assert!(text.contains("isolation microvm"), "{text}");
    let qemu = qemu_children(pid);
    assert_eq!(qemu.len(), 1, "{text}");
    // SAFETY: kill with a pid we started and a signal number.
    assert_eq!(unsafe { libc::kill(pid as i32, libc::SIGTERM) }, 0);
    let status = child.wait().unwrap();
    assert_eq!(status.code(), None, "glassbox should have died of SIGTERM");
    let deadline = Instant::now() + Duration::from_secs(10);
    while alive(qemu[0]) && Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(50));
    }
    assert!(!alive(qemu[0]), "QEMU {} outlived glassbox", qemu[0]);
}
