//! The real sandbox, end to end (no recorder: an empty rule set routes nothing to the
//! listener).

use glassbox_model::ServerExit;
use glassbox_sandbox::{Config, Sandbox};
use std::io::Read;
use std::time::Duration;

fn config(script: &str) -> Config {
    Config {
        program: "/bin/sh".into(),
        argv: vec!["sh".into(), "-c".into(), script.into()],
        cwd: std::env::current_dir().unwrap(),
        extra_ro: vec![],
        extra_rw: vec![],
        user: "sam".into(),
        hostname: "devbox".into(),
        path_prefix: vec![],
        env: vec![],
        files: vec![glassbox_sandbox::PlantedFile {
            path: "/home/sam/.aws/credentials".into(),
            contents: b"[default]\n".to_vec(),
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

fn run(script: &str) -> (String, String, ServerExit) {
    let mut sb = Sandbox::spawn(&config(script)).expect("spawn");
    drop(sb.stdin.take());
    let mut out = String::new();
    sb.stdout.take().unwrap().read_to_string(&mut out).unwrap();
    let mut err = String::new();
    sb.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    let exit = sb.wait_timeout(Duration::from_secs(10)).expect("exit");
    sb.finish();
    (out, err, exit)
}

#[test]
fn the_server_sees_a_private_root() {
    let (out, err, exit) = run(
        "id -u; hostname; echo HOME=$HOME; cat ~/.aws/credentials; ls /; \
         grep -E '^(NoNewPrivs|Seccomp):' /proc/self/status; echo PID=$$; \
         touch /usr/x 2>/dev/null || echo usr-ro; touch ./x 2>/dev/null || echo cwd-ro; \
         touch ~/ok && echo home-rw; cat /etc/shadow >/dev/null 2>&1 || echo no-shadow; \
         cat /proc/net/dev | grep -c : ; ip -o link 2>/dev/null | wc -l",
    );
    assert_eq!(exit, ServerExit::Exited { code: 0 }, "stderr: {err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], "1000");
    assert_eq!(lines[1], "devbox");
    assert_eq!(lines[2], "HOME=/home/sam");
    assert!(out.contains("[default]"));
    assert!(out.contains("NoNewPrivs:\t1"), "{out}");
    assert!(out.contains("Seccomp:\t2"), "{out}");
    assert!(out.contains("usr-ro"), "{out}");
    assert!(out.contains("cwd-ro"), "{out}");
    assert!(out.contains("home-rw"), "{out}");
    assert!(out.contains("no-shadow"), "{out}");
    assert!(!out.contains("\nroot\n"), "host's /root visible: {out}");
    assert!(
        out.contains("PID=2"),
        "the server is the first child of pid 1: {out}"
    );
}

#[test]
fn daemons_die_with_the_server() {
    let marker = format!("glassbox-daemon-{}", std::process::id());
    let (_, _, exit) = run(&format!(
        "(setsid sh -c 'exec -a {marker} sleep 300' &) ; sleep 0.2; exit 7"
    ));
    assert_eq!(exit, ServerExit::Exited { code: 7 });
    // Killed with the namespace, and reaped within moments (looked at boundedly: a loaded
    // machine's delay is not a survival).
    let survivors = || {
        std::process::Command::new("pgrep")
            .arg("-f")
            .arg(&marker)
            .output()
            .unwrap()
            .stdout
    };
    let deadline = std::time::Instant::now() + Duration::from_secs(10);
    while !survivors().is_empty() && std::time::Instant::now() < deadline {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        survivors().is_empty(),
        "daemon survived: {:?}",
        String::from_utf8_lossy(&survivors())
    );
}

#[test]
fn a_missing_program_is_reported_on_stderr() {
    let mut cfg = config("");
    cfg.program = "/nonexistent/server".into();
    let mut sb = Sandbox::spawn(&cfg).expect("spawn");
    let mut err = String::new();
    sb.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    let exit = sb.wait_timeout(Duration::from_secs(10));
    assert_eq!(exit, Some(ServerExit::Exited { code: 127 }));
    assert!(err.contains("cannot execute /nonexistent/server"), "{err}");
}

#[test]
fn new_namespaces_are_refused() {
    let (out, err, exit) = run("unshare --user true 2>/dev/null && echo user-ns; \
         unshare --pid --fork --user true 2>/dev/null && echo pid-ns; \
         python3 -c 'import os; os.unshare(os.CLONE_NEWUSER)' 2>/dev/null && echo py-ns; \
         sh -c 'echo child' ; echo done");
    assert_eq!(exit, ServerExit::Exited { code: 0 }, "stderr: {err}");
    assert!(!out.contains("-ns"), "a namespace was created: {out}");
    // Threads and processes still start (clone3 refused, clone without namespace flags kept).
    assert!(out.contains("child\ndone"), "{out}");
}

#[test]
fn a_working_directory_under_tmp_stays_visible_and_read_only() {
    let dir = std::env::temp_dir().join(format!("glassbox-cwd-{}", std::process::id()));
    std::fs::create_dir_all(&dir).unwrap();
    std::fs::write(dir.join("data.txt"), "visible\n").unwrap();
    let mut cfg = config(
        "pwd; cat data.txt; touch x 2>/dev/null || echo read-only; touch /tmp/y && echo tmp-rw",
    );
    cfg.cwd = dir.clone();
    let mut sb = Sandbox::spawn(&cfg).expect("spawn");
    drop(sb.stdin.take());
    let mut out = String::new();
    sb.stdout.take().unwrap().read_to_string(&mut out).unwrap();
    assert_eq!(
        sb.wait_timeout(Duration::from_secs(10)),
        Some(ServerExit::Exited { code: 0 })
    );
    sb.finish();
    std::fs::remove_dir_all(&dir).unwrap();
    assert_eq!(
        out,
        format!("{}\nvisible\nread-only\ntmp-rw\n", dir.display())
    );
}

#[test]
fn calls_around_the_recorder_are_refused() {
    // Each line: a call, what it returned (errno name, or "ok").
    let script = r#"
import ctypes, errno, os, socket
libc = ctypes.CDLL(None, use_errno=True)
def call(name, nr, *args):
    r = libc.syscall(nr, *[ctypes.c_long(a) for a in args])
    print(name, "ok" if r >= 0 else errno.errorcode[ctypes.get_errno()])
call("io_uring_setup", 425, 1, 0)
call("ptrace_traceme", 101, 0, 0, 0, 0)
buf = ctypes.create_string_buffer(8)
iov = (ctypes.c_void_p * 2)(ctypes.addressof(buf), 8)
call("process_vm_readv", 310, os.getpid(), ctypes.addressof(iov), 1, ctypes.addressof(iov), 1, 0)
call("seccomp_listener", 317, 1, 8, 0)
call("keyctl", 250, 0, 0)
def sock(name, *a):
    try:
        socket.socket(*a).close(); print(name, "ok")
    except OSError as e:
        print(name, errno.errorcode[e.errno])
sock("packet", 17, socket.SOCK_RAW, 0)
sock("netlink_audit", 16, socket.SOCK_RAW, 9)
sock("netlink_route", 16, socket.SOCK_RAW, 0)
sock("inet", socket.AF_INET, socket.SOCK_STREAM)
sock("unix", socket.AF_UNIX, socket.SOCK_STREAM)
"#;
    let (out, err, exit) = run(&format!("python3 -c '{}'", script.replace('\'', "'\\''")));
    assert_eq!(exit, ServerExit::Exited { code: 0 }, "stderr: {err}");
    for want in [
        "io_uring_setup ENOSYS",
        "ptrace_traceme EPERM",
        "process_vm_readv EPERM",
        "seccomp_listener EPERM",
        "keyctl EPERM",
        "packet EAFNOSUPPORT",
        "netlink_audit EAFNOSUPPORT",
        "netlink_route ok",
        "inet ok",
        "unix ok",
    ] {
        assert!(
            out.lines().any(|l| l == want),
            "missing {want:?} in:\n{out}"
        );
    }
}

/// The edge: the namespace's only interfaces are loopback and the TUN device, every route
/// leads into it, `resolv.conf` names the edge's resolver, and a datagram the server sends
/// to a documentation address arrives on glassbox's descriptor.
#[test]
fn with_an_edge_every_packet_arrives_on_the_tun_descriptor() {
    use std::os::fd::AsRawFd;
    let mut cfg = config(
        "cat /proc/net/dev | tail -n +3 | cut -d: -f1 | tr -d ' ' | sort | tr '\\n' ' '; echo; \
         cat /proc/net/route | tail -n +2 | cut -f1,2 | tr '\\t\\n' ': '; echo; \
         cat /etc/resolv.conf; ls -l /var/run/ | head -1 >/dev/null; \
         python3 -c 'import socket; s=socket.socket(socket.AF_INET, socket.SOCK_DGRAM); s.sendto(b\"edge-marker\", (\"192.0.2.1\", 9))'",
    );
    cfg.network = Some(glassbox_sandbox::NetworkSetup {
        interface: "gb0".into(),
        v4: "198.18.0.1".parse().unwrap(),
        v4_prefix: 15,
        v6: "64:ff9b:1::1".parse().unwrap(),
        resolv_conf: "nameserver 198.18.0.2\n".into(),
        tcp_syn_retries: Some(1),
    });
    let mut isolation = (vec![], false);
    let mut sb = Sandbox::spawn_with(&cfg, &mut |pid| {
        isolation = glassbox_sandbox::verify_isolation(pid, "gb0");
        Ok(())
    })
    .expect("spawn");
    assert!(isolation.1, "{:?}", isolation.0);
    assert_eq!(isolation.0.len(), 4, "{:?}", isolation.0);
    let tun = sb.tun.take().expect("the edge's descriptor");
    drop(sb.stdin.take());
    let mut out = String::new();
    sb.stdout.take().unwrap().read_to_string(&mut out).unwrap();
    let mut err = String::new();
    sb.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    let exit = sb.wait_timeout(Duration::from_secs(10)).expect("exit");
    assert_eq!(exit, ServerExit::Exited { code: 0 }, "stderr: {err}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0].trim(), "gb0 lo", "{out}");
    // Every IPv4 route (main table) is on the edge: the default and the /15 of its address.
    assert!(lines[1].contains("gb0:00000000"), "{out}");
    assert!(
        lines[1]
            .split(' ')
            .filter(|r| !r.is_empty())
            .all(|r| r.starts_with("gb0:")),
        "{out}"
    );
    assert!(out.contains("nameserver 198.18.0.2"), "{out}");
    // The datagram is on the descriptor (IPv4, UDP, to 192.0.2.1).
    let mut found = false;
    let mut buf = [0u8; 65536];
    for _ in 0..50 {
        // SAFETY: reading into a buffer we own from a descriptor we own.
        let n = unsafe { libc::read(tun.as_raw_fd(), buf.as_mut_ptr().cast(), buf.len()) };
        if n > 0 {
            let p = &buf[..n as usize];
            if p[0] >> 4 == 4 && p[9] == 17 && p[16..20] == [192, 0, 2, 1] {
                assert!(p.windows(11).any(|w| w == b"edge-marker"));
                found = true;
                break;
            }
        } else {
            std::thread::sleep(Duration::from_millis(20));
        }
    }
    sb.finish();
    assert!(found, "the datagram did not reach the edge's descriptor");
}

/// Without an edge, the isolation check fails (loopback only: there is no edge to lead to),
/// and says why.
#[test]
fn the_isolation_check_fails_without_an_edge() {
    let mut isolation = (vec![], true);
    let mut sb = Sandbox::spawn_with(&config("true"), &mut |pid| {
        isolation = glassbox_sandbox::verify_isolation(pid, "gb0");
        Ok(())
    })
    .expect("spawn");
    sb.finish();
    assert!(!isolation.1, "{:?}", isolation.0);
    assert!(
        isolation
            .0
            .iter()
            .any(|c| c.starts_with("FAILED: interfaces")),
        "{:?}",
        isolation.0
    );
    assert!(
        isolation
            .0
            .iter()
            .any(|c| c.starts_with("ok: network namespace")),
        "{:?}",
        isolation.0
    );
}

/// A killer from another thread ends the whole sandbox at once.
#[test]
fn a_killer_ends_the_sandbox_from_another_thread() {
    let mut sb = Sandbox::spawn(&config("sleep 3600")).expect("spawn");
    let killer = sb.killer();
    std::thread::spawn(move || killer.kill()).join().unwrap();
    // A watchdog, not a measure: the kill, not the hour's sleep, ended it.
    let exit = sb.wait_timeout(Duration::from_secs(60));
    assert!(
        matches!(
            exit,
            Some(ServerExit::Signaled {
                signal: libc::SIGKILL,
                ..
            })
        ),
        "{exit:?}"
    );
    sb.finish();
}

#[test]
fn a_writable_bind_is_writable_and_nothing_else_is() {
    let dir = std::env::temp_dir().join(format!("gb-rw-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    std::fs::create_dir_all(&dir).unwrap();
    // The sandbox user is a host uid of its own: the folder is handed to it, as the install
    // phase does.
    // SAFETY: geteuid cannot fail.
    let uid = match unsafe { libc::geteuid() } {
        0 => glassbox_sandbox::HOST_UID_WHEN_ROOT,
        u => u,
    };
    std::os::unix::fs::chown(&dir, Some(uid), None).unwrap();
    let mut cfg = config(&format!(
        "echo made > {0}/out && echo rw-ok; touch ./x 2>/dev/null || echo cwd-ro; \
         grep ' {0} ' /proc/self/mountinfo | grep -c ' rw,'",
        dir.display()
    ));
    cfg.extra_rw = vec![dir.clone()];
    let mut sb = Sandbox::spawn(&cfg).expect("spawn");
    drop(sb.stdin.take());
    let mut out = String::new();
    sb.stdout.take().unwrap().read_to_string(&mut out).unwrap();
    let exit = sb.wait_timeout(Duration::from_secs(10)).expect("exit");
    sb.finish();
    assert_eq!(exit, ServerExit::Exited { code: 0 }, "{out}");
    assert!(out.contains("rw-ok") && out.contains("cwd-ro"), "{out}");
    assert_eq!(std::fs::read_to_string(dir.join("out")).unwrap(), "made\n");
    assert!(
        sb.settings()
            .mounts
            .iter()
            .any(|m| m.target == dir.to_string_lossy() && !m.read_only),
        "{:?}",
        sb.settings().mounts
    );
    let _ = std::fs::remove_dir_all(&dir);
}
