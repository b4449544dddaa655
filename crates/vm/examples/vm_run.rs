//! Runs one command in a microVM and reports the boot facts and timings as one JSON line on
//! stderr (for bench/microvm_boot.py): `cargo run -p glassbox-vm --example vm_run -- CMD...`.
//! The guest's stdout is copied to this process's stdout as it comes.
//!
//! `--agent PATH` (first) boots another agent (default: the `glassbox-vm-agent` next to this
//! example, or `glassbox` with `vm-agent`); `--cmdline` prints QEMU's command line too.

use glassbox_vm::{GuestCommand, GuestExit, Vm, VmConfig};
use std::io::{Read, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};

fn main() {
    let t0 = Instant::now();
    let mut args: Vec<String> = std::env::args().skip(1).collect();
    let mut agent: Option<PathBuf> = None;
    let mut show_cmdline = false;
    while let Some(a) = args.first().cloned() {
        match a.as_str() {
            "--agent" => {
                agent = Some(PathBuf::from(args.get(1).expect("--agent PATH")));
                args.drain(..2);
            }
            "--cmdline" => {
                show_cmdline = true;
                args.remove(0);
            }
            "--" => {
                args.remove(0);
                break;
            }
            _ => break,
        }
    }
    assert!(
        !args.is_empty(),
        "usage: vm_run [--agent PATH] [--cmdline] -- CMD..."
    );
    let exe = std::env::current_exe().expect("current_exe");
    let agent = agent.unwrap_or_else(|| {
        // target/<profile>/examples/vm_run → target/<profile>/glassbox-vm-agent
        exe.parent()
            .and_then(|d| d.parent())
            .expect("target dir")
            .join("glassbox-vm-agent")
    });
    let agent_args: &[&str] = if agent.file_name().is_some_and(|n| n == "glassbox") {
        &["vm-agent"]
    } else {
        &[]
    };
    let mut config = VmConfig::new(&agent, agent_args);
    // Experiments: VM_RUN_MEMORY=MiB, VM_RUN_CPUS=N, VM_RUN_QEMU_ARGS="-a b ...".
    if let Some(m) = std::env::var("VM_RUN_MEMORY")
        .ok()
        .and_then(|m| m.parse().ok())
    {
        config.memory_mib = m;
    }
    if let Some(c) = std::env::var("VM_RUN_CPUS")
        .ok()
        .and_then(|c| c.parse().ok())
    {
        config.cpus = c;
    }
    if let Ok(a) = std::env::var("VM_RUN_QEMU_ARGS") {
        config.extra_qemu_args = a.split_whitespace().map(str::to_string).collect();
    }
    let mut cwd = GuestCommand::new(args.iter());
    cwd.cwd = PathBuf::from("/");
    let mut vm = match Vm::start(&config, &cwd) {
        Ok(vm) => vm,
        Err(e) => {
            eprintln!("vm_run: {e}");
            std::process::exit(2);
        }
    };
    drop(vm.stdin.take());
    let mut out = vm.stdout.take().expect("stdout port");
    let copier = std::thread::spawn(move || {
        let mut first = None;
        let mut buf = [0u8; 16384];
        let mut stdout = std::io::stdout();
        while let Ok(n) = out.read(&mut buf) {
            if n == 0 {
                break;
            }
            first.get_or_insert_with(|| t0.elapsed());
            let _ = stdout.write_all(&buf[..n]);
            let _ = stdout.flush();
        }
        first
    });
    let exit = vm.wait(Duration::from_secs(300));
    let exited = t0.elapsed();
    vm.shutdown(Duration::from_secs(10));
    let first = copier.join().unwrap_or(None);
    let ms = |d: Duration| d.as_secs_f64() * 1000.0;
    let code = match &exit {
        Ok(GuestExit::Code(c)) => *c,
        Ok(GuestExit::Signal(s)) => 128 + s,
        Err(e) => {
            eprintln!("vm_run: {e}");
            2
        }
    };
    let i = &vm.info;
    eprintln!(
        "{{\"accel\":\"{}\",\"accel_reason\":{:?},\"kernel\":{:?},\"prepared_ms\":{:.0},\"ready_ms\":{:.0},\"guest_uptime_at_ready_ms\":{:.0},\"guest\":{:?},\"started_ms\":{:.0},\"first_output_ms\":{},\"exited_ms\":{:.0},\"exit\":{code}}}",
        i.accel.accel.name(),
        i.accel.reason,
        i.kernel.release,
        ms(i.prepared),
        ms(i.ready),
        ms(i.guest_uptime_at_ready),
        i.guest_timings,
        ms(i.started),
        first.map_or("null".to_string(), |d| format!("{:.0}", ms(d))),
        ms(exited),
    );
    if show_cmdline {
        let line: Vec<String> = i
            .command_line
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        eprintln!("{}", line.join(" "));
    }
    std::process::exit(code);
}
