//! `glassbox trace --isolation microvm`, with real boots (QEMU under TCG here: about 6 s
//! each). The sandbox and the recorder run inside the guest; the host gets their events.
//! These tests never boot two guests at once ([`ONE_VM`]).

mod common;

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

/// glassbox with a state folder of these tests' own (the guest kernel's cache is kept there
/// between runs): never the machine's, whose selftest record would make the outcomes depend on
/// what ran there before. No selftest is recorded in it, so a check's `pass` is reported
/// `unverified` (the same in both backends).
fn glassbox() -> Command {
    let mut c = Command::new(env!("CARGO_BIN_EXE_glassbox"));
    c.env(
        "GLASSBOX_STATE_DIR",
        std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join("microvm-state"),
    );
    c
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

/// Control fixture `name` and its entry in the controls' manifest.
fn fixture(name: &str) -> (PathBuf, Value) {
    let root = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures");
    let manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(root.join("manifest.json")).unwrap())
            .unwrap();
    let entry = manifest["cases"]
        .as_array()
        .unwrap()
        .iter()
        .find(|f| f["name"] == name)
        .unwrap_or_else(|| panic!("no control {name}"))
        .clone();
    (root.join(entry["dir"].as_str().unwrap()), entry)
}

/// The fixture that reads a planted secret through a child shell, and its expectations.
fn cats_credentials() -> (PathBuf, Value) {
    fixture("child-shell-cats-aws-credentials")
}

/// What an audit left: the JSON report, the bundle's manifest and its flows.
struct Audited {
    out: Output,
    report: Value,
    manifest: Value,
    flows: Vec<Value>,
}

/// `glassbox audit [--isolation microvm] -- python3 server.py` of the fixture: the JSON
/// report and the bundle's manifest.
fn audit(dir: &std::path::Path, name: &str, extra: &[&str]) -> (Output, Value, Value) {
    let a = audit_command(dir, name, extra, &[], &["python3", "server.py"]);
    (a.out, a.report, a.manifest)
}

/// `glassbox audit EXTRA -- COMMAND` of the fixture in `dir`.
fn audit_command(
    dir: &std::path::Path,
    name: &str,
    extra: &[&str],
    env: &[(&str, &str)],
    command: &[&str],
) -> Audited {
    let evidence = tmp(&format!("audit-{name}"));
    let _ = std::fs::remove_dir_all(&evidence);
    let json = tmp(&format!("audit-{name}.json"));
    let store = tmp(&format!("store-{name}.sqlite"));
    let o = glassbox()
        .current_dir(dir)
        .args(["audit", "--no-selftest", "-q", "--ro", "../lib"])
        .args(extra)
        // These audits compare a guest's runs with the namespace's, run for run, and each guest
        // boots under emulation: no trigger run unless asked (the microVM controls' subset runs
        // trigger-only's controls in guests).
        .args(match extra.contains(&"--triggers") {
            true => &[][..],
            false => &["--triggers", "none"][..],
        })
        .arg("--evidence")
        .arg(&evidence)
        .arg("--json")
        .arg(&json)
        .env("GLASSBOX_STORE", &store)
        .envs(env.iter().copied())
        .arg("--")
        .args(command)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let read = |p: &std::path::Path| -> Value {
        std::fs::read_to_string(p)
            .ok()
            .and_then(|t| serde_json::from_str(&t).ok())
            .unwrap_or(Value::Null)
    };
    let report = read(&json);
    let manifest = read(&evidence.join("manifest.json"));
    let flows = std::fs::read_to_string(evidence.join("network.jsonl"))
        .unwrap_or_default()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    let _ = std::fs::remove_file(&json);
    let _ = std::fs::remove_file(&store);
    let _ = std::fs::remove_dir_all(&evidence);
    Audited {
        out: o,
        report,
        manifest,
        flows,
    }
}

/// [`audit_command`] in microVMs, one guest at a time. No guest may be lost: these tests
/// compare what a guest records with the namespace's, and the bounds on a guest count only the
/// time it was not kept waiting for a CPU, so a loaded host makes it slow, not lost. Losing
/// guests is `a_hung_guest_is_killed_and_the_audit_is_inconclusive`'s subject.
fn vm_audit_command(
    dir: &std::path::Path,
    name: &str,
    extra: &[&str],
    env: &[(&str, &str)],
    command: &[&str],
) -> Audited {
    let _vm = one_vm();
    let a = audit_command(dir, name, extra, env, command);
    let lost = &a.manifest["vm"]["lost"];
    assert!(
        lost.as_array().is_none_or(|l| l.is_empty()),
        "{name}: a guest was lost: {lost}"
    );
    a
}

/// The network controls give, in microVMs whose card is wired to the host's edge, the
/// namespace audit's outcomes: the flows are the host edge's (DNS answered with synthetic
/// addresses in the capture run, every packet dropped in the denied run).
#[test]
fn network_controls_reach_the_host_edge_through_the_guests_card() {
    for name in ["dns-then-connect", "ipv6-tcp"] {
        let (dir, expected) = fixture(name);
        assert_eq!(expected["network"], true, "{name}");
        let command: Vec<&str> = expected["command"]
            .as_array()
            .unwrap()
            .iter()
            .map(|c| c.as_str().unwrap())
            .collect();
        let ns = audit_command(&dir, &format!("{name}-ns"), &[], &[], &command);
        let vm = vm_audit_command(
            &dir,
            &format!("{name}-vm"),
            &["--isolation", "microvm"],
            &[],
            &command,
        );
        let err = String::from_utf8_lossy(&vm.out.stderr);
        assert_eq!(vm.report["verdict"], expected["verdict"], "{name}: {err}");
        assert_eq!(outcomes(&vm.report), outcomes(&ns.report), "{name}: {err}");
        assert_expected(&vm.report, &expected, name);
        let runs = vm.manifest["network"]["runs"].as_array().unwrap();
        assert_eq!(runs.len(), 2, "{name}");
        for run in runs {
            assert_behind_host_edge(run);
            assert!(
                run["counters"]["packets"].as_u64().unwrap() > 0,
                "{name}: the host's edge saw no packet: {run}"
            );
            // The guest's kernel sends nothing of its own on the wire.
            assert_eq!(run["counters"]["malformed"], 0, "{name}: {run}");
        }
        let by_mode = |mode: &str| -> Vec<&Value> {
            vm.flows
                .iter()
                .filter(|f| f["mode"] == mode && f["protocol"] != "unix")
                .collect()
        };
        assert!(!by_mode("capture").is_empty(), "{name}: {:?}", vm.flows);
        assert!(!by_mode("denied").is_empty(), "{name}: {:?}", vm.flows);
        if name == "dns-then-connect" {
            // Answered by the host's resolver, then the connection to the synthetic address
            // mapped back to the name, with the HTTP request read at the edge.
            let named = by_mode("capture")
                .into_iter()
                .any(|f| f["dns_name"] == "api.exfil.example" && !f["http"].is_null());
            assert!(named, "{:?}", vm.flows);
        }
    }
}

/// Each check a control pins has the outcome its manifest expects; without a selftest record
/// (see [`glassbox`]) a pass is claimed as `unverified`.
fn assert_expected(report: &Value, expected: &Value, name: &str) {
    for (id, want) in expected["expect"].as_object().unwrap() {
        let got = outcomes(report).into_iter().find(|(i, _)| i == id);
        let want = match want.as_str() {
            Some("pass") => "unverified",
            other => other.unwrap_or_default(),
        };
        assert_eq!(got.map(|(_, o)| o).as_deref(), Some(want), "{name}: {id}");
    }
}

/// A run whose isolation was verified in the guest and whose packets went to the host's edge.
fn assert_behind_host_edge(run: &Value) {
    assert_eq!(run["isolation_verified"], true, "{run}");
    assert!(
        run["isolation"]
            .as_array()
            .unwrap()
            .iter()
            .any(|c| c.as_str().unwrap().contains("glassbox's edge on the host")),
        "{run}"
    );
}

/// Each check's reason for its outcome, where it gave one.
fn reasons(report: &Value) -> Vec<(String, String)> {
    report["checks"]
        .as_array()
        .map(|cs| {
            cs.iter()
                .filter_map(|c| {
                    Some((
                        c["id"].as_str()?.to_string(),
                        c["reason"].as_str()?.to_string(),
                    ))
                })
                .collect()
        })
        .unwrap_or_default()
}

fn outcomes(report: &Value) -> Vec<(String, String)> {
    report["checks"]
        .as_array()
        .map(|cs| {
            cs.iter()
                .map(|c| {
                    (
                        c["id"].as_str().unwrap_or_default().to_string(),
                        c["outcome"].as_str().unwrap_or_default().to_string(),
                    )
                })
                .collect()
        })
        .unwrap_or_default()
}

#[test]
fn an_audit_in_microvms_gives_the_namespace_audits_verdict_and_checks() {
    let (dir, expected) = cats_credentials();
    let (o, ns, _) = audit(&dir, "ns", &[]);
    let ns_err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(ns["verdict"], expected["verdict"], "{ns_err}");

    // Two fresh guests: the capture run and the denied run.
    let _vm = one_vm();
    let (o, vm, manifest) = audit(&dir, "vm", &["--isolation", "microvm"]);
    let err = String::from_utf8_lossy(&o.stderr);
    assert_eq!(vm["verdict"], expected["verdict"], "{err}");
    assert_eq!(outcomes(&vm), outcomes(&ns), "{err}");
    assert_expected(&vm, &expected, "child-shell-cats-aws-credentials");

    // The manifest says where it ran.
    let v = &manifest["vm"];
    assert_eq!(v["backend"], "microvm", "{manifest}");
    let release = v["kernel_release"].as_str().unwrap();
    assert!(
        std::path::Path::new(&format!("/boot/vmlinuz-{release}")).exists(),
        "{release}"
    );
    assert!(["kvm", "tcg"].contains(&v["accelerator"].as_str().unwrap()));
    assert!(!v["accelerator_reason"].as_str().unwrap().is_empty());
    assert_eq!(
        v["boot_ms"].as_array().unwrap().len(),
        2,
        "one guest per run"
    );
    assert!(manifest["sandbox"]["backend"]
        .as_str()
        .unwrap()
        .starts_with("microvm: namespaces"));
    // The host's secrets were the ones planted in the guest: the credentials the server read
    // are the manifest's, under the manifest's home.
    let home = manifest["sandbox"]["home"].as_str().unwrap();
    assert!(manifest["sandbox"]["honeytokens"]
        .as_array()
        .unwrap()
        .iter()
        .any(|t| t["path"] == format!("{home}/.aws/credentials")));
    assert!(manifest["recorder"]["channels"]
        .as_array()
        .unwrap()
        .iter()
        .any(|c| c == "honeytoken-ground-truth"));
    // Both runs' edges reached the host, isolation verified in the guest.
    let runs = manifest["network"]["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 2);
    assert!(
        runs.iter().all(|r| r["isolation_verified"] == true),
        "{manifest}"
    );
    assert!(manifest["recorder"]["failure"].is_null(), "{manifest}");
}

/// A server that speaks MCP over HTTP (the MCP crate's test server) in microVMs: the host's
/// client reaches its port on the guest sandbox's loopback through the guest's TCP relay, and
/// the audit's outcomes are the namespace audit's. Streamable HTTP in both runs (two guests),
/// the legacy HTTP+SSE transport (its GET stream open while it POSTs) in the capture run, and
/// a server that never listens on the port named, which fails the session with the reason in
/// both backends.
#[test]
fn http_and_sse_servers_in_microvms_give_the_namespace_audits_outcomes() {
    let w = PathBuf::from(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("microvm-http-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&w);
    let servers = w.join("servers");
    // `audit_command` makes `../lib` visible: an empty one.
    std::fs::create_dir_all(w.join("lib")).unwrap();
    std::fs::create_dir_all(&servers).unwrap();
    let from = PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../mcp/tests/servers");
    for f in ["http_server.py", "mcp_logic.py"] {
        std::fs::copy(from.join(f), servers.join(f)).unwrap();
    }
    let cases: [(&str, &[&str], &[&str]); 3] = [
        (
            "streamable",
            &["--http", "http://127.0.0.1:8941/mcp"],
            &["--port", "8941", "--mode", "sse"],
        ),
        (
            "legacy-sse",
            &["--sse", "http://127.0.0.1:8942/sse", "--network", "capture"],
            &["--port", "8942", "--legacy-sse"],
        ),
        (
            "never-listens",
            &[
                "--http",
                "http://127.0.0.1:8944/mcp",
                "--network",
                "capture",
                "--request-timeout",
                "5",
            ],
            &["--port", "8943"],
        ),
    ];
    for (name, extra, args) in cases {
        let command: Vec<&str> = ["python3", "http_server.py"]
            .iter()
            .chain(args)
            .copied()
            .collect();
        let ns = audit_command(&servers, &format!("http-{name}-ns"), extra, &[], &command);
        let ns_err = String::from_utf8_lossy(&ns.out.stderr);
        let in_vm: Vec<&str> = extra
            .iter()
            .chain(&["--isolation", "microvm"])
            .copied()
            .collect();
        let vm = vm_audit_command(&servers, &format!("http-{name}-vm"), &in_vm, &[], &command);
        let err = String::from_utf8_lossy(&vm.out.stderr);
        assert_eq!(vm.manifest["vm"]["backend"], "microvm", "{name}: {err}");
        assert_eq!(
            vm.report["verdict"], ns.report["verdict"],
            "{name}: {err}\n{ns_err}"
        );
        assert_eq!(
            outcomes(&vm.report),
            outcomes(&ns.report),
            "{name}: {err}\nmicroVM runs: {}\nrecorder: {}\nreasons: {:?}",
            vm.manifest["network"]["runs"],
            vm.manifest["recorder"],
            reasons(&vm.report)
        );
        let session = &vm.manifest["session"];
        assert_eq!(
            session["completed"], ns.manifest["session"]["completed"],
            "{name}: {session}"
        );
        if name == "never-listens" {
            for (backend, a) in [("namespace", &ns), ("microvm", &vm)] {
                assert_eq!(
                    a.report["verdict"], "inconclusive",
                    "{backend}: {}",
                    a.report
                );
                let reason = a.report["inconclusive_reason"].as_str().unwrap_or_default();
                assert!(
                    reason.contains("did not listen on 127.0.0.1:8944 within 5s"),
                    "{backend}: {reason}"
                );
            }
            continue;
        }
        assert_eq!(session["completed"], true, "{name}: {session}\n{err}");
        assert!(session["protocol_version"].is_string(), "{name}: {session}");
        let tools = vm.report["tools"].as_array().unwrap();
        assert!(!tools.is_empty(), "{name}: {}", vm.report);
        assert!(
            tools.iter().all(|t| t["called"] == true),
            "{name}: {tools:?}"
        );
        // Every run spoke to the server through a guest whose card is the host's edge.
        let runs = vm.manifest["network"]["runs"].as_array().unwrap();
        assert_eq!(
            runs.len(),
            if name == "streamable" { 2 } else { 1 },
            "{name}"
        );
        for run in runs {
            assert_behind_host_edge(run);
        }
        if let Some(denied) = runs.iter().find(|r| r["session"].is_object()) {
            assert_eq!(denied["session"]["completed"], true, "{name}: {denied}");
        }
    }
    let _ = std::fs::remove_dir_all(&w);
}

#[test]
fn a_hung_guest_is_killed_and_the_audit_is_inconclusive() {
    let (dir, _) = cats_credentials();
    let _vm = one_vm();
    let evidence = tmp("audit-hung");
    let _ = std::fs::remove_dir_all(&evidence);
    let json = tmp("audit-hung.json");
    let store = tmp("store-hung.sqlite");
    let o = glassbox()
        .current_dir(&dir)
        .args(["audit", "--no-selftest", "-q", "--ro", "../lib"])
        .args([
            "--isolation",
            "microvm",
            "--network",
            "capture",
            "--triggers",
            "none",
        ])
        .arg("--evidence")
        .arg(&evidence)
        .arg("--json")
        .arg(&json)
        .env("GLASSBOX_STORE", &store)
        .env("GLASSBOX_FAULT_GUEST_HANG", "1")
        .args(["--", "python3", "server.py"])
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap_or_default())
        .unwrap_or_default();
    let manifest: Value = serde_json::from_str(
        &std::fs::read_to_string(evidence.join("manifest.json")).unwrap_or_default(),
    )
    .unwrap_or_default();
    let _ = std::fs::remove_file(&json);
    let _ = std::fs::remove_file(&store);
    let _ = std::fs::remove_dir_all(&evidence);
    assert_eq!(report["verdict"], "inconclusive", "{err}");
    let failure = manifest["recorder"]["failure"].as_str().unwrap_or_default();
    assert!(failure.contains("the guest hung"), "{manifest}");
    assert!(failure.contains("the VM was killed"), "{failure}");
    // Its console's last lines say how far the guest got: here, past its last step.
    assert!(
        failure.contains("glassbox guest: sending the end of the run"),
        "{failure}"
    );
    // A step that stalls says where each of the guest glassbox's threads waits (here its main
    // thread, in the hang the fault asked for: a sleep).
    assert!(
        failure.contains("s in \"sending the end of the run\"; where each thread waits:")
            && failure.contains("wchan"),
        "{failure}"
    );
    // The manifest says which runs lost their guest (a selftest's control there is a miss).
    let lost = manifest["vm"]["lost"].as_array().unwrap();
    assert!(
        !lost.is_empty()
            && lost
                .iter()
                .all(|l| l.as_str().unwrap_or_default().contains("the guest hung")),
        "{manifest}"
    );
    // The edge's record died with the guest: the network evidence is not claimed.
    let runs = manifest["network"]["runs"].as_array().unwrap();
    assert!(
        runs.iter().all(|r| r["isolation_verified"] == false),
        "{manifest}"
    );

    // A guest that does not come up in time (its boot bounded to 20 ms here) is killed; the
    // audit completes, inconclusive with the reason, and nothing is claimed of its run.
    let a = audit_command(
        &dir,
        "no-boot",
        &["--isolation", "microvm", "--network", "capture"],
        &[("GLASSBOX_FAULT_VM_BOOT_TIMEOUT_MS", "20")],
        &["python3", "server.py"],
    );
    let err = String::from_utf8_lossy(&a.out.stderr);
    assert_eq!(a.report["verdict"], "inconclusive", "{err}");
    let reason = a.report["inconclusive_reason"].as_str().unwrap_or_default();
    assert!(reason.contains("did not come up"), "{}", a.report);
    assert!(reason.contains("the VM was killed"), "{reason}");
    // It is booted once: a guest that does not come up is not tried again.
    assert!(
        a.manifest["vm"].get("boot_retries").is_none(),
        "{}",
        a.manifest
    );
    // Each run that never started its server is one the manifest says lost its guest.
    let lost = a.manifest["vm"]["lost"].as_array().unwrap();
    assert!(
        lost.len() == a.manifest["network"]["runs"].as_array().unwrap().len()
            && lost
                .iter()
                .all(|l| l.as_str().unwrap_or_default().contains("did not come up")),
        "{}",
        a.manifest
    );
    assert!(
        a.report["checks"]
            .as_array()
            .unwrap()
            .iter()
            .all(|c| c["outcome"] != "pass"),
        "{}",
        a.report
    );
    assert!(a.flows.is_empty(), "{:?}", a.flows);
}

/// The verdict fixtures/manifest.json expects of the control `name`.
fn expected_verdict(name: &str) -> String {
    let manifest: Value = serde_json::from_str(
        &std::fs::read_to_string(common::fixtures().join("manifest.json")).unwrap(),
    )
    .unwrap();
    manifest["cases"]
        .as_array()
        .or_else(|| manifest.as_array())
        .unwrap()
        .iter()
        .find(|f| f["name"] == name)
        .unwrap()["verdict"]
        .as_str()
        .unwrap()
        .to_string()
}

/// `glassbox batch --isolation ISOLATION -j 1 --network capture --memory 256M` of `list` in
/// `w/servers`, into the store `w/<isolation>.sqlite`: the output and the store's audits.
fn batch(
    w: &std::path::Path,
    list: &std::path::Path,
    isolation: &str,
) -> (Output, Vec<glassbox_store::AuditRow>) {
    let store = w.join(format!("{isolation}.sqlite"));
    let o = glassbox()
        .current_dir(w.join("servers"))
        .args(["batch", "--isolation", isolation, "-j", "1"])
        .args([
            "--network",
            "capture",
            "--triggers",
            "none",
            "--no-selftest",
            "--quiet",
        ])
        .args(["--memory", "256M", "--store"])
        .arg(&store)
        .arg("--evidence")
        .arg(w.join(format!("evidence-{isolation}")))
        .arg(list)
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let rows = glassbox_store::Store::open(&store)
        .and_then(|s| s.audits())
        .unwrap_or_default();
    (o, rows)
}

/// `glassbox batch --isolation microvm` of two command controls, one guest per audit (capture
/// run only), with a memory limit: the store holds both audits, each with the namespace
/// batch's verdict: fixtures/manifest.json's (the baseline's `clean` needs the denied run: a
/// capture-only audit of it is inconclusive for that reason alone). Each bundle's manifest
/// records the limit as applied in the guest (its cgroup v2) and the guest's memory (the limit
/// plus the headroom). The verdicts use this build's recorded selftest (the state
/// directory's, as `audit --no-selftest` does).
#[test]
fn a_batch_in_microvms_gives_each_controls_verdict_and_applies_the_limits_in_the_guest() {
    let cases = ["baseline-answers-only", "child-shell-cats-aws-credentials"];
    let w = common::work("microvm-batch", &cases);
    // Commands run in the list's folder.
    let list = w.join("servers/targets.txt");
    let lines: Vec<String> = cases
        .iter()
        .map(|c| format!("-- python3 {c}/server.py\n"))
        .collect();
    std::fs::write(&list, lines.concat()).unwrap();
    // The namespace batch too runs while no guest does: two emulated CPUs busy with another
    // test's guest would starve it, and its verdicts are the reference.
    let _vm = one_vm();
    let (ns_out, ns) = batch(&w, &list, "namespace");
    assert_eq!(ns.len(), 2, "{}", common::text(&ns_out));
    let (o, rows) = batch(&w, &list, "microvm");
    // Why each audit ended as it did, for a failure's message.
    let reasons = |rows: &[glassbox_store::AuditRow]| {
        rows.iter()
            .map(|r| format!("{}: {:?} {:?}", r.target, r.verdict, r.inconclusive_reason))
            .collect::<Vec<_>>()
            .join("\n")
    };
    let out = format!(
        "{}\nnamespace audits:\n{}\nmicrovm audits:\n{}",
        common::text(&o),
        reasons(&ns),
        reasons(&rows)
    );
    assert_eq!(rows.len(), 2, "{out}");
    for case in cases {
        let find = |rows: &[glassbox_store::AuditRow]| {
            rows.iter()
                .find(|r| r.target.contains(case))
                .unwrap_or_else(|| panic!("no audit of {case} in the store: {out}"))
                .clone()
        };
        let (row, ns_row) = (find(&rows), find(&ns));
        let verdict = serde_json::to_value(row.verdict).unwrap();
        assert_eq!(row.verdict, ns_row.verdict, "{case}: {out}");
        let want = expected_verdict(case);
        if want == "clean" {
            assert_eq!(verdict, "inconclusive", "{case}: {out}");
            let why = row.inconclusive_reason.clone().unwrap_or_default();
            assert!(why.contains("network-denied-run"), "{case}: {why}");
        } else {
            assert_eq!(verdict, Value::String(want), "{case}: {out}");
        }
        let manifest: Value = serde_json::from_str(
            &std::fs::read_to_string(row.evidence_dir.join("manifest.json")).unwrap(),
        )
        .unwrap();
        assert_eq!(manifest["vm"]["backend"], "microvm", "{manifest}");
        assert_eq!(manifest["vm"]["memory_mib"], 256 + 256, "{manifest}");
        // The 1-CPU limit is the guest cgroup's quota; the guest has the host's CPUs (up to 4).
        let host = std::thread::available_parallelism()
            .map_or(1, |n| n.get())
            .min(4);
        assert_eq!(manifest["vm"]["cpus"], host, "{manifest}");
        let cpu = manifest["sandbox"]["limits"]["cpu"]
            .as_str()
            .unwrap_or_default();
        assert!(
            cpu.starts_with("1 CPU via cgroup v2"),
            "{case}: {}",
            manifest["sandbox"]["limits"]
        );
        let memory = manifest["sandbox"]["limits"]["memory"]
            .as_str()
            .unwrap_or_default();
        assert!(
            memory.starts_with("256 MiB via cgroup v2 memory"),
            "{case}: the guest's sandbox did not apply the limit: {}",
            manifest["sandbox"]["limits"]
        );
    }
}

/// A package target in microVMs: the install runs in a guest of its own (its `postinstall`
/// behind the guest's kernel, the install folder shared read-write, its connections through
/// the host's edge), then the server runs from that folder in fresh guests. The package is
/// the npm tarball of `crates/audit/tests/data/npm-postinstall`: its `postinstall` reads
/// `~/.npmrc` and a child `node` connects to `collector.example`.
#[test]
fn a_package_is_installed_and_audited_in_microvms() {
    let work = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("microvm-package");
    let _ = std::fs::remove_dir_all(&work);
    let pkg = work.join("package");
    std::fs::create_dir_all(&pkg).unwrap();
    let data =
        PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../audit/tests/data/npm-postinstall");
    for f in ["package.json", "postinstall.js", "server.js"] {
        std::fs::copy(data.join(f), pkg.join(f)).unwrap();
    }
    let ok = Command::new("tar")
        .args(["czf", "probe.tgz", "package"])
        .current_dir(&work)
        .status()
        .unwrap()
        .success();
    assert!(ok, "tar failed");
    let evidence = work.join("evidence");
    let json = work.join("report.json");
    let _vm = one_vm();
    let o = glassbox()
        // A state folder of its own: the install is never taken from a cache.
        .env("GLASSBOX_STATE_DIR", work.join("state"))
        .env("GLASSBOX_STORE", work.join("store.sqlite"))
        .current_dir(&work)
        .args(["audit", "--no-selftest", "-q", "--isolation", "microvm"])
        // The install and one guest per run are this test's subject, not the trigger run.
        .args(["--triggers", "none"])
        .arg("--evidence")
        .arg(&evidence)
        .arg("--json")
        .arg(&json)
        .arg("npm:./probe.tgz")
        .stdin(Stdio::null())
        .output()
        .unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    let report: Value = serde_json::from_str(&std::fs::read_to_string(&json).unwrap_or_default())
        .unwrap_or_else(|_| panic!("no report: {err}"));
    let manifest: Value =
        serde_json::from_str(&std::fs::read_to_string(evidence.join("manifest.json")).unwrap())
            .unwrap();
    let install = &manifest["install"];
    assert!(install["failure"].is_null(), "{install}\n{err}");
    assert_eq!(
        install["exit"],
        serde_json::json!({"how": "exited", "code": 0}),
        "{install}"
    );
    assert!(manifest["session"]["completed"] == true, "{manifest}");
    // Every run, the install's too, went through a guest whose card is the host's edge.
    let runs = manifest["network"]["runs"].as_array().unwrap();
    assert_eq!(runs.len(), 3, "install, capture, denied: {manifest}");
    assert_eq!(runs[0]["mode"], "install");
    for run in runs {
        assert_behind_host_edge(run);
    }
    assert!(manifest["sandbox"]["backend"]
        .as_str()
        .unwrap()
        .starts_with("microvm: "));
    // The postinstall script ran under the guest's recorder, in phase install.
    let events = std::fs::read_to_string(evidence.join("events.jsonl")).unwrap();
    assert!(
        events
            .lines()
            .any(|l| l.contains("postinstall.js") && l.contains("\"phase\":\"install\"")),
        "the postinstall script's process is not in the evidence"
    );
    let check = |id: &str| -> Value {
        report["checks"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["id"] == id)
            .unwrap_or_else(|| panic!("{id}"))
            .clone()
    };
    let cred = check("credential-probe");
    assert_eq!(cred["outcome"], "flag", "{cred}");
    assert!(
        cred["findings"].as_array().unwrap().iter().any(|f| {
            f["summary"].as_str().unwrap().contains(".npmrc") && f["phase"] == "install"
        }),
        "{cred}"
    );
    let egress = check("unexplained-egress");
    assert!(
        egress["findings"].as_array().unwrap().iter().any(|f| {
            let s = f["summary"].as_str().unwrap();
            s.contains("collector.example") && s.contains("install run")
        }),
        "{egress}"
    );
    let _ = std::fs::remove_dir_all(&work);
}

/// The control suite in microVMs (`glassbox selftest --isolation microvm -j1`): every
/// control's expectations hold with the server behind the guest's kernel, every check is
/// proven, and no guest is lost (none is run again: a lost guest is a miss).
///
/// `GLASSBOX_MICROVM_CONTROLS=subset` (scripts/test) runs the subset the fixtures' manifest
/// names (`microvm`, chosen by rule in fixtures/validate.py: every check's positive controls in
/// each language that has one and its negative control, each language with and without
/// network traffic, each verdict; about 5 minutes under TCG on two cores), whose record is not
/// saved as the build's. `GLASSBOX_MICROVM_CONTROLS=all` (scripts/test --full) runs every
/// control (about 25 minutes) and checks that its record is the microVM backend's own: an
/// audit in a microVM is proven by it, an audit in namespaces is not.
#[test]
fn the_control_suite_passes_in_microvms() {
    let all = match std::env::var("GLASSBOX_MICROVM_CONTROLS").as_deref() {
        Ok("all") => true,
        Ok("subset") => false,
        Ok(other) => panic!("GLASSBOX_MICROVM_CONTROLS={other}: want `subset` or `all`"),
        Err(_) => {
            eprintln!("the controls in microVMs take minutes: set GLASSBOX_MICROVM_CONTROLS=subset (the rule's subset, about 5 minutes) or all (about 25) to run them");
            return;
        }
    };
    let manifest: Value = serde_json::from_str(
        &std::fs::read_to_string(
            PathBuf::from(env!("CARGO_MANIFEST_DIR")).join("../../fixtures/manifest.json"),
        )
        .unwrap(),
    )
    .unwrap();
    let subset: Vec<&str> = manifest["microvm"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    assert!(subset.len() >= 10, "{subset:?}");
    let state = PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join("microvm-controls-state");
    let _ = std::fs::remove_dir_all(&state);
    let record_file = state.join("record.json");
    std::fs::create_dir_all(&state).unwrap();
    let _vm = one_vm();
    let mut selftest = glassbox();
    selftest
        .env("GLASSBOX_STATE_DIR", &state)
        // One guest at a time: two TCG guests on two cores starve each other.
        .args(["selftest", "--isolation", "microvm", "-j1", "--json"])
        .arg(&record_file);
    if !all {
        selftest.arg("--only").arg(subset.join(","));
    }
    let o = selftest.stdin(Stdio::null()).output().unwrap();
    let err = String::from_utf8_lossy(&o.stderr);
    // A miss's reason may span lines (a guest's console): the whole output, then.
    assert!(!err.contains("MISS"), "{err}");
    assert_eq!(o.status.code(), Some(0), "{err}");
    let record: Value =
        serde_json::from_str(&std::fs::read_to_string(&record_file).unwrap()).unwrap();
    assert_eq!(record["isolation"], "microvm");
    let lost: Vec<&Value> = record["cases"]
        .as_array()
        .unwrap()
        .iter()
        .filter(|c| c.get("lost").is_some())
        .collect();
    assert!(lost.is_empty(), "{lost:?}");
    let ran: Vec<&str> = record["cases"]
        .as_array()
        .unwrap()
        .iter()
        .map(|c| c["name"].as_str().unwrap())
        .collect();
    if all {
        assert_eq!(
            ran.len(),
            manifest["cases"].as_array().unwrap().len(),
            "every control ran"
        );
    } else {
        let mut want = subset.clone();
        want.sort_unstable();
        assert_eq!(ran, want, "the subset ran, and only it");
    }
    // Every check is proven by what ran, and its negative controls held there too.
    for t in record["checks"].as_array().unwrap() {
        assert_eq!(t["proven"], true, "{t}");
        assert_eq!(t["fn_"], 0, "{t}");
        assert_eq!(t["fp"], 0, "{t}");
        assert!(t["tn"].as_u64().unwrap() > 0, "{t}");
    }
    if !all {
        // A subset's record is not the build's: audits find no proof from it.
        let saved = std::fs::read_dir(state.join("selftest"))
            .map(|d| d.count())
            .unwrap_or(0);
        assert_eq!(saved, 0, "a subset's record was saved as the build's");
        assert!(err.contains("not saved as this build's record"), "{err}");
        let _ = std::fs::remove_dir_all(&state);
        return;
    }

    // The record proves audits in microVMs, and only those.
    let (dir, _) = fixture("baseline-answers-only");
    let outcomes_with = |isolation: &str| {
        let o = glassbox()
            .env("GLASSBOX_STATE_DIR", &state)
            .env("GLASSBOX_STORE", state.join("store.sqlite"))
            .current_dir(&dir)
            .args([
                "audit",
                "--no-selftest",
                "-q",
                "--ro",
                "../lib",
                "--triggers",
                "none",
                "--isolation",
                isolation,
            ])
            .arg("--json")
            .arg(state.join("report.json"))
            .arg("--evidence")
            .arg(state.join(format!("evidence-{isolation}")))
            .args(["--", "python3", "server.py"])
            .stdin(Stdio::null())
            .output()
            .unwrap();
        let report: Value =
            serde_json::from_str(&std::fs::read_to_string(state.join("report.json")).unwrap())
                .unwrap_or_else(|_| panic!("{}", String::from_utf8_lossy(&o.stderr)));
        // Neither audit made a trigger run (`--triggers none`): trigger-only was not asked.
        outcomes(&report)
            .into_iter()
            .filter(|(id, _)| id != "trigger-only")
            .collect::<Vec<_>>()
    };
    let vm = outcomes_with("microvm");
    assert!(vm.iter().all(|(_, o)| o == "pass"), "{vm:?}");
    let ns = outcomes_with("namespace");
    assert!(ns.iter().all(|(_, o)| o == "unverified"), "{ns:?}");
    let _ = std::fs::remove_dir_all(&state);
}
