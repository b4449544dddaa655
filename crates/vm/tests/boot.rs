//! Real boots of the microVM (under TCG where KVM cannot run the guest): a command's output
//! and status, the boundary between guest and host, and a hung guest.
//!
//! These tests need `qemu-system-x86_64` and Debian's kernel; without them they fail, saying
//! to run `scripts/setup --microvm`. Each boot is bounded. They run one at a time whatever the
//! test threads ([`serial`]): each guest takes a CPU, and some assert that no QEMU is left.

use glassbox_vm::{run, Error, GuestCommand, GuestExit, Output, Vm, VmConfig};
use std::path::Path;
use std::time::{Duration, Instant};

/// Held for the whole of each test: one guest at a time.
fn serial() -> std::sync::MutexGuard<'static, ()> {
    static LOCK: std::sync::Mutex<()> = std::sync::Mutex::new(());
    LOCK.lock().unwrap_or_else(|e| e.into_inner())
}

fn config() -> VmConfig {
    let mut c = VmConfig::new(env!("CARGO_BIN_EXE_glassbox-vm-agent"), &[]);
    c.boot_timeout = Duration::from_secs(90);
    c
}

/// Fails (never skips) with the fix when the host lacks QEMU or the kernel.
fn require_setup(c: &VmConfig) {
    if let Err(e) = glassbox_vm::prepare(c) {
        panic!(
            "the microVM tests need QEMU and Debian's kernel: {e}\n(run scripts/setup --microvm)"
        );
    }
}

fn boot(argv: &[&str], timeout: Duration) -> Output {
    let c = config();
    require_setup(&c);
    match run(&c, &GuestCommand::new(argv.iter().copied()), b"", timeout) {
        Ok(o) => o,
        Err(e) => panic!("{argv:?} in the microVM: {e}"),
    }
}

fn report(o: &Output) {
    eprintln!(
        "accel {} ({}); prepared {:?}, ready {:?} (guest uptime {:?}), started {:?}, first output {:?}, exited {:?}",
        o.info.accel.accel.name(),
        o.info.accel.reason,
        o.info.prepared,
        o.info.ready,
        o.info.guest_uptime_at_ready,
        o.info.started,
        o.first_output,
        o.exited
    );
}

fn qemu_processes() -> Vec<String> {
    let mut found = Vec::new();
    for e in std::fs::read_dir("/proc").unwrap().flatten() {
        let Ok(cmd) = std::fs::read(e.path().join("cmdline")) else {
            continue;
        };
        let cmd = String::from_utf8_lossy(&cmd).replace('\0', " ");
        // Only the VMs of this test binary: their initramfs is made from this agent.
        if cmd.contains("qemu-system") && cmd.contains("-M microvm") && cmd.contains("glassbox.ctl")
        {
            found.push(format!("{}: {cmd}", e.file_name().to_string_lossy()));
        }
    }
    found
}

#[test]
fn echo_runs_in_the_guest() {
    let _serial = serial();
    let o = boot(
        &["/bin/sh", "-c", "echo hello; echo oops >&2; exit 3"],
        Duration::from_secs(60),
    );
    report(&o);
    assert_eq!(String::from_utf8_lossy(&o.stdout), "hello\n");
    assert_eq!(String::from_utf8_lossy(&o.stderr), "oops\n");
    assert_eq!(o.exit, GuestExit::Code(3));
    assert!(
        o.powered_off,
        "the guest should power off by itself after the report"
    );
    assert!(
        qemu_processes().is_empty(),
        "QEMU left behind: {:?}",
        qemu_processes()
    );
}

#[test]
fn stdin_and_events_cross_the_boundary() {
    let _serial = serial();
    let c = config();
    require_setup(&c);
    let cmd = GuestCommand::new([
        "/usr/bin/python3",
        "-c",
        "import sys; d = sys.stdin.read(); print(d.upper(), end='');\n\
         open('/dev/virtio-ports/glassbox.events', 'w').write('{\"event\": 1}\\n')",
    ]);
    let o = run(
        &c,
        &cmd,
        b"mcp over virtio-serial\n",
        Duration::from_secs(60),
    )
    .unwrap_or_else(|e| panic!("python3 in the microVM: {e}"));
    report(&o);
    assert_eq!(
        o.exit,
        GuestExit::Code(0),
        "stderr: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(
        String::from_utf8_lossy(&o.stdout),
        "MCP OVER VIRTIO-SERIAL\n"
    );
    assert_eq!(String::from_utf8_lossy(&o.events), "{\"event\": 1}\n");
}

#[test]
fn guest_sees_only_itself() {
    let _serial = serial();
    // The control fixture: what a server trying to see past its sandbox would look at.
    let script = r#"
import os
print("init=" + open("/proc/1/cmdline", "rb").read().replace(b"\0", b" ").decode())
print("net=" + " ".join(sorted(os.listdir("/sys/class/net"))))
try:
    os.open("/dev/kvm", os.O_RDWR)
    print("kvm=open")
except OSError as e:
    print("kvm=refused " + e.strerror)
try:
    open("/etc/shadow").read()
    print("shadow=read")
except OSError as e:
    print("shadow=refused " + e.strerror)
for p in os.listdir("/proc"):
    if p.isdigit():
        try:
            c = open("/proc/%s/cmdline" % p, "rb").read().replace(b"\0", b" ").decode()
        except OSError:
            continue
        if c:
            print("proc=%s %s" % (p, c))
for line in open("/proc/mounts"):
    f = line.split()
    if f[1] == "/":
        print("root=" + f[2])
"#;
    let o = boot(&["/usr/bin/python3", "-c", script], Duration::from_secs(60));
    report(&o);
    let out = String::from_utf8_lossy(&o.stdout).into_owned();
    eprintln!(
        "guest:\n{out}stderr: {}",
        String::from_utf8_lossy(&o.stderr)
    );
    let field = |k: &str| {
        out.lines()
            .find_map(|l| l.strip_prefix(&format!("{k}=")))
            .unwrap_or_else(|| panic!("no {k}= in {out}"))
            .trim()
            .to_string()
    };
    // pid 1 is the agent, not the host's init.
    let host_init =
        String::from_utf8_lossy(&std::fs::read("/proc/1/cmdline").unwrap()).replace('\0', " ");
    assert_eq!(field("init"), "/init");
    assert_ne!(field("init"), host_init.trim());
    // No host interface: only the guest's own loopback (the guest has no network card yet).
    let host_ifaces: Vec<String> = std::fs::read_dir("/sys/class/net")
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .collect();
    assert_eq!(field("net"), "lo", "host interfaces: {host_ifaces:?}");
    // The host's /dev/kvm is not there (and the guest has no virtualisation of its own).
    assert!(
        Path::new("/dev/kvm").exists(),
        "the control needs a host with /dev/kvm"
    );
    assert!(field("kvm").starts_with("refused"), "{out}");
    // The guest's root is not the host's: QEMU reads the shares as an unprivileged user (or
    // as the unprivileged caller), so the host's shadow file stays closed.
    if Path::new("/etc/shadow").exists() {
        assert!(field("shadow").starts_with("refused"), "{out}");
    }
    // The user processes are the guest's: the agent, the shell, its children; none of the
    // host's (this test, its cargo), whatever their pids.
    let procs: Vec<&str> = out
        .lines()
        .filter_map(|l| l.strip_prefix("proc="))
        .collect();
    assert!(procs.len() < 8, "{procs:?}");
    assert!(procs.iter().any(|p| p.starts_with("1 /init")), "{procs:?}");
    let me = std::env::current_exe().unwrap();
    let me = me.file_name().unwrap().to_string_lossy();
    assert!(
        !procs
            .iter()
            .any(|p| p.contains(&*me) || p.contains("cargo")),
        "{procs:?}"
    );
    assert_eq!(field("root"), "tmpfs");
}

#[test]
fn a_hung_guest_is_killed_with_the_reason() {
    let _serial = serial();
    let c = config();
    require_setup(&c);
    let mut vm = Vm::start(&c, &GuestCommand::new(["/bin/sleep", "infinity"]))
        .unwrap_or_else(|e| panic!("boot: {e}"));
    let pid = vm.qemu_pid().expect("QEMU runs");
    let err = vm
        .wait(Duration::from_secs(3))
        .expect_err("sleep infinity cannot exit");
    let msg = err.to_string();
    eprintln!("{msg}");
    assert!(matches!(err, Error::Hung { .. }), "{err:?}");
    assert!(msg.contains("hung") && msg.contains("killed"), "{msg}");
    assert!(
        !Path::new(&format!("/proc/{pid}")).exists(),
        "QEMU (pid {pid}) is still there"
    );
    drop(vm);
    assert!(
        qemu_processes().is_empty(),
        "QEMU left behind: {:?}",
        qemu_processes()
    );
}

#[test]
fn a_missing_program_is_reported_by_the_agent() {
    let _serial = serial();
    let c = config();
    require_setup(&c);
    let err = run(
        &c,
        &GuestCommand::new(["/nonexistent/program"]),
        b"",
        Duration::from_secs(30),
    )
    .expect_err("nothing to run");
    assert!(matches!(err, Error::Agent(_)), "{err:?}");
    assert!(err.to_string().contains("/nonexistent/program"), "{err}");
    assert!(
        qemu_processes().is_empty(),
        "QEMU left behind: {:?}",
        qemu_processes()
    );
}

/// The owner side of [`the_vm_dies_with_its_owner`]: boots a VM that never ends, writes
/// QEMU's pid to the file the parent named, and waits to be killed.
fn act_as_owner(pid_file: &Path) {
    let c = config();
    let vm = Vm::start(&c, &GuestCommand::new(["/bin/sleep", "infinity"]))
        .unwrap_or_else(|e| panic!("boot: {e}"));
    std::fs::write(pid_file, vm.qemu_pid().unwrap().to_string()).unwrap();
    std::thread::sleep(Duration::from_secs(120));
    drop(vm);
}

#[test]
fn the_vm_dies_with_its_owner() {
    let _serial = serial();
    if let Some(f) = std::env::var_os("GLASSBOX_VM_TEST_OWNER") {
        return act_as_owner(Path::new(&f));
    }
    require_setup(&config());
    let pid_file = std::env::temp_dir().join(format!("glassbox-vm-owner-{}", std::process::id()));
    let _ = std::fs::remove_file(&pid_file);
    // The owner is this test binary again, running only this test in owner mode.
    let mut owner = std::process::Command::new(std::env::current_exe().unwrap())
        .args(["--exact", "the_vm_dies_with_its_owner", "--test-threads=1"])
        .env("GLASSBOX_VM_TEST_OWNER", &pid_file)
        .stdout(std::process::Stdio::null())
        .spawn()
        .unwrap();
    let t = Instant::now();
    let pid = loop {
        if let Ok(p) = std::fs::read_to_string(&pid_file) {
            if !p.is_empty() {
                break p;
            }
        }
        if t.elapsed() > Duration::from_secs(90) || owner.try_wait().unwrap().is_some() {
            let _ = owner.kill();
            panic!("the owner did not boot its VM");
        }
        std::thread::sleep(Duration::from_millis(50));
    };
    let _ = std::fs::remove_file(&pid_file);
    assert!(Path::new(&format!("/proc/{pid}")).exists());
    // SIGKILL: no destructor runs in the owner; only PR_SET_PDEATHSIG can take QEMU down.
    owner.kill().unwrap();
    owner.wait().unwrap();
    let t = Instant::now();
    // A watchdog, far from the moment QEMU takes to die.
    while Path::new(&format!("/proc/{pid}")).exists() && t.elapsed() < Duration::from_secs(60) {
        std::thread::sleep(Duration::from_millis(20));
    }
    assert!(
        !Path::new(&format!("/proc/{pid}")).exists(),
        "QEMU (pid {pid}) outlived the process that started it"
    );
}

#[test]
fn missing_qemu_or_kernel_says_to_run_setup() {
    let _serial = serial();
    let mut c = config();
    c.qemu = "/nonexistent/qemu-system-x86_64".into();
    let e = glassbox_vm::prepare(&c)
        .expect_err("no QEMU there")
        .to_string();
    assert!(e.contains("scripts/setup --microvm"), "{e}");
    let state = std::env::temp_dir().join(format!("glassbox-vm-test-{}", std::process::id()));
    let e = glassbox_vm::kernel::prepare(Path::new("/nonexistent/vmlinuz-0.0.0-amd64"), &state)
        .expect_err("no kernel there")
        .to_string();
    let _ = std::fs::remove_dir_all(&state);
    assert!(
        e.contains("linux-image-amd64") && e.contains("scripts/setup --microvm"),
        "{e}"
    );
}

#[test]
fn a_guest_that_does_not_come_up_is_killed_with_the_reason() {
    let _serial = serial();
    let mut c = config();
    require_setup(&c);
    // No kernel boots in a second under TCG (nor reaches the agent under KVM this fast, on
    // a loaded host): the bound is what is tested.
    c.boot_timeout = Duration::from_millis(300);
    let err = Vm::start(&c, &GuestCommand::new(["/bin/true"])).expect_err("too short to boot");
    let msg = err.to_string();
    assert!(matches!(err, Error::BootTimeout { .. }), "{err:?}");
    assert!(
        msg.contains("did not come up") && msg.contains("killed"),
        "{msg}"
    );
    assert!(
        qemu_processes().is_empty(),
        "QEMU left behind: {:?}",
        qemu_processes()
    );
}

#[test]
fn the_network_card_is_a_bare_wire_to_glassbox() {
    let _serial = serial();
    let mut c = config();
    require_setup(&c);
    c.network = true;
    // In the guest: one raw frame to the host (an experimental ethertype), then the host's
    // answer, then eth0's flags and whether IPv6 is off on it.
    let guest = r#"
import socket
mac = open('/sys/class/net/eth0/address').read().strip()
s = socket.socket(socket.AF_PACKET, socket.SOCK_RAW, socket.htons(0x88b5))
s.bind(('eth0', 0x88b5))
s.send(bytes.fromhex('525400676201') + bytes.fromhex(mac.replace(':', '')) + b'\x88\xb5' + b'guest->host')
print(s.recv(2048)[14:].decode())
print(mac, open('/sys/class/net/eth0/flags').read().strip(), open('/proc/sys/net/ipv6/conf/eth0/disable_ipv6').read().strip())
import os
print(' '.join(sorted(os.listdir('/sys/class/net'))))
"#;
    let mut vm = Vm::start(&c, &GuestCommand::new(["/usr/bin/python3", "-c", guest]))
        .unwrap_or_else(|e| panic!("boot: {e}"));
    let net = vm.net.take().expect("a network card");
    net.set_read_timeout(Some(Duration::from_secs(60))).unwrap();
    // The first frame on the wire is the guest program's: the guest's kernel sends nothing of
    // its own (no IPv6 duplicate address detection, no MLD, no ARP).
    let mut frame = [0u8; 2048];
    let n = net
        .recv(&mut frame)
        .expect("a frame from the guest within 60 s");
    assert!(n >= 14, "{n} bytes");
    let src: Vec<String> = frame[6..12].iter().map(|b| format!("{b:02x}")).collect();
    assert_eq!(src.join(":"), glassbox_vm::GUEST_MAC);
    assert_eq!(&frame[12..n], b"\x88\xb5guest->host");
    // And a frame from the host reaches the guest.
    let mut answer = frame[6..12].to_vec();
    answer.extend_from_slice(&[0x52, 0x54, 0x00, 0x67, 0x62, 0x01, 0x88, 0xb5]);
    answer.extend_from_slice(b"host->guest");
    net.send(&answer).unwrap();
    let mut out = String::new();
    std::io::Read::read_to_string(&mut vm.stdout.take().unwrap(), &mut out).ok();
    let exit = vm
        .wait(Duration::from_secs(60))
        .unwrap_or_else(|e| panic!("{e}"));
    assert_eq!(exit, GuestExit::Code(0));
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines.first(), Some(&"host->guest"), "{out}");
    let f: Vec<&str> = lines.get(1).map_or(vec![], |l| l.split(' ').collect());
    assert_eq!(f.first(), Some(&glassbox_vm::GUEST_MAC), "{out}");
    let flags = u32::from_str_radix(f.get(1).unwrap_or(&"0").trim_start_matches("0x"), 16).unwrap();
    assert_eq!(flags & 0x81, 0x81, "eth0 up with NOARP: {out}");
    assert_eq!(f.get(2), Some(&"1"), "IPv6 off on eth0: {out}");
    assert_eq!(lines.get(2), Some(&"eth0 lo"), "{out}");
    // Nothing else crossed the wire.
    net.set_nonblocking(true).unwrap();
    assert!(
        net.recv(&mut frame).is_err(),
        "a further frame from the guest"
    );
}

#[test]
fn large_output_arrives_whole_before_the_exit_report() {
    let _serial = serial();
    // 4 MiB through the stdout port, then an immediate exit: nothing may be lost between the
    // command's last write and the agent's report.
    let o = boot(
        &[
            "/usr/bin/python3",
            "-c",
            "import os, sys; sys.stdout.buffer.write(os.urandom(2097152).hex().encode()); print(); print('end')",
        ],
        Duration::from_secs(120),
    );
    report(&o);
    assert_eq!(
        o.exit,
        GuestExit::Code(0),
        "{}",
        String::from_utf8_lossy(&o.stderr)
    );
    assert_eq!(o.stdout.len(), 4194304 + 5, "stdout length");
    assert!(o.stdout.ends_with(b"\nend\n"));
}

#[test]
fn a_share_under_a_private_parent_is_served_and_its_binds_stay_in_qemus_namespace() {
    let _serial = serial();
    // A project under a folder only root may pass (like /root): QEMU, which runs without
    // root, still serves it, and reads only what any user may in it.
    let base =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("private-{}", std::process::id()));
    let share = base.join("project");
    std::fs::create_dir_all(&share).unwrap();
    std::fs::write(share.join("readme.txt"), "served through a bind\n").unwrap();
    std::fs::write(share.join("secret.txt"), "root's own\n").unwrap();
    use std::os::unix::fs::PermissionsExt;
    let mode = |p: &Path, m: u32| std::fs::set_permissions(p, std::fs::Permissions::from_mode(m));
    mode(&share.join("secret.txt"), 0o600).unwrap();
    mode(&share, 0o755).unwrap();
    mode(&base, 0o700).unwrap();
    let mut c = config();
    require_setup(&c);
    c.shares = vec![share.clone()];
    let script = format!(
        "cat {0}/readme.txt; cat {0}/secret.txt 2>/dev/null || echo refused",
        share.display()
    );
    let o = run(
        &c,
        &GuestCommand::new(["/bin/sh", "-c", script.as_str()]),
        b"",
        Duration::from_secs(120),
    )
    .unwrap_or_else(|e| panic!("boot: {e}"));
    let out = String::from_utf8_lossy(&o.stdout);
    // SAFETY: geteuid cannot fail and takes no pointer.
    let root = unsafe { libc::geteuid() } == 0;
    if root {
        assert_eq!(out, "served through a bind\nrefused\n", "{o:?}");
    } else {
        // Without root QEMU is the caller and reads what the caller may.
        assert!(out.starts_with("served through a bind\n"), "{o:?}");
    }
    // The binds lived in QEMU's mount namespace only.
    let mounts = std::fs::read_to_string("/proc/self/mountinfo").unwrap();
    assert!(!mounts.contains("vm-shares"), "{mounts}");
    mode(&base, 0o755).unwrap();
    std::fs::remove_dir_all(&base).unwrap();
}
