//! Which accelerator runs the guest: KVM when `/dev/kvm` can really run it, TCG otherwise.
//!
//! A `/dev/kvm` that opens is not enough: some hosts (nested or software virtualisers) create
//! VMs but cannot run a stock kernel (here: QEMU aborts setting MSR 0x10a with `-cpu host`, and
//! a kernel under `-cpu qemu64` never prints a line). So detection goes in three steps:
//! open `/dev/kvm`, `KVM_GET_API_VERSION` and `KVM_CREATE_VM`; then a real boot probe, the
//! guest kernel under `-accel kvm` until its first console line, bounded. The probe's result
//! is cached per host boot (`/proc/sys/kernel/random/boot_id`), kernel and QEMU.
//! `GLASSBOX_VM_ACCEL=kvm|tcg` forces a choice.

use crate::kernel::{hex, Kernel};
use sha2::{Digest, Sha256};
use std::fs;
use std::io::Read;
use std::os::fd::AsRawFd;
use std::os::unix::fs::MetadataExt;
use std::path::Path;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

/// The accelerator.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Accel {
    /// Hardware virtualisation through `/dev/kvm`.
    Kvm,
    /// QEMU's tiny code generator: emulation, no host support needed.
    Tcg,
}

impl Accel {
    /// The `-accel` value.
    pub fn name(self) -> &'static str {
        match self {
            Accel::Kvm => "kvm",
            Accel::Tcg => "tcg",
        }
    }
}

/// The accelerator chosen and why (for the manifest).
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct AccelChoice {
    /// The accelerator.
    pub accel: Accel,
    /// Why: what was tried and what happened.
    pub reason: String,
}

const KVM_GET_API_VERSION: libc::c_ulong = 0xAE00;
const KVM_CREATE_VM: libc::c_ulong = 0xAE01;

/// How long the boot probe waits for the first console line under KVM (a working KVM prints
/// it within a fraction of a second).
pub const PROBE_TIMEOUT: Duration = Duration::from_secs(5);

/// Chooses the accelerator for `kernel` under `qemu`.
pub fn detect(qemu: &Path, kernel: &Kernel, state_dir: &Path) -> AccelChoice {
    match std::env::var("GLASSBOX_VM_ACCEL").as_deref() {
        Ok("kvm") => {
            return AccelChoice {
                accel: Accel::Kvm,
                reason: "forced by GLASSBOX_VM_ACCEL=kvm".into(),
            }
        }
        Ok("tcg") => {
            return AccelChoice {
                accel: Accel::Tcg,
                reason: "forced by GLASSBOX_VM_ACCEL=tcg".into(),
            }
        }
        _ => {}
    }
    if let Err(why) = kvm_api() {
        return tcg(why);
    }
    let key = probe_key(qemu, kernel);
    let cache = state_dir.join("vm").join(format!("kvm-probe-{key}"));
    if let Ok(cached) = fs::read_to_string(&cache) {
        return match cached.strip_prefix("ok: ") {
            Some(why) => AccelChoice {
                accel: Accel::Kvm,
                reason: format!("{} (cached for this host boot)", why.trim()),
            },
            None => tcg(format!("{} (cached for this host boot)", cached.trim())),
        };
    }
    let result = probe_boot(qemu, kernel);
    let line = match &result {
        Ok(why) => format!("ok: {why}"),
        Err(why) => why.clone(),
    };
    let _ = fs::create_dir_all(state_dir.join("vm"));
    let _ = fs::write(&cache, line);
    match result {
        Ok(why) => AccelChoice {
            accel: Accel::Kvm,
            reason: why,
        },
        Err(why) => tcg(why),
    }
}

fn tcg(why: String) -> AccelChoice {
    AccelChoice {
        accel: Accel::Tcg,
        reason: format!("KVM unusable: {why}; emulating with TCG"),
    }
}

/// `/dev/kvm` opens, speaks API 12 and creates a VM.
pub fn kvm_api() -> Result<(), String> {
    let kvm = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .open("/dev/kvm")
        .map_err(|e| format!("cannot open /dev/kvm: {e}"))?;
    // SAFETY: KVM_GET_API_VERSION takes no argument and only returns an integer.
    let version = unsafe { libc::ioctl(kvm.as_raw_fd(), KVM_GET_API_VERSION, 0) };
    if version != 12 {
        return Err(format!("/dev/kvm API version {version}, not 12"));
    }
    // SAFETY: KVM_CREATE_VM takes the machine type (0, the default) by value and returns a new
    // descriptor, closed right below.
    let vm = unsafe { libc::ioctl(kvm.as_raw_fd(), KVM_CREATE_VM, 0) };
    if vm < 0 {
        return Err(format!(
            "KVM_CREATE_VM failed: {}",
            std::io::Error::last_os_error()
        ));
    }
    // SAFETY: vm is the descriptor KVM_CREATE_VM just returned, owned by nothing else.
    unsafe { libc::close(vm) };
    Ok(())
}

fn probe_key(qemu: &Path, kernel: &Kernel) -> String {
    let boot_id = fs::read_to_string("/proc/sys/kernel/random/boot_id").unwrap_or_default();
    let qemu_id = fs::metadata(qemu)
        .map(|m| format!("{}:{}", m.len(), m.mtime()))
        .unwrap_or_default();
    let mut h = Sha256::new();
    h.update(format!(
        "{}\0{}\0{qemu_id}\0{}",
        boot_id.trim(),
        qemu.display(),
        kernel.hash
    ));
    hex(&h.finalize()[..8])
}

/// Boots the kernel under KVM until its first console line ("Linux version ..."), then kills
/// it. `Ok(why)` if the line came.
fn probe_boot(qemu: &Path, kernel: &Kernel) -> Result<String, String> {
    let start = Instant::now();
    let mut child = Command::new(qemu)
        .args([
            "-M", "microvm", "-accel", "kvm", "-cpu", "host", "-m", "256", "-smp", "1",
        ])
        .args([
            "-nodefaults",
            "-no-user-config",
            "-display",
            "none",
            "-no-reboot",
        ])
        .args(["-serial", "stdio", "-kernel"])
        .arg(&kernel.vmlinux)
        .args(["-append", "console=ttyS0 panic=-1"])
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| format!("cannot run {}: {e}", qemu.display()))?;
    let mut out = child.stdout.take().expect("piped");
    let mut err = child.stderr.take().expect("piped");
    let (tx, rx) = std::sync::mpsc::channel();
    let reader = std::thread::spawn(move || {
        let mut seen = Vec::new();
        let mut buf = [0u8; 4096];
        while let Ok(n) = out.read(&mut buf) {
            if n == 0 {
                break;
            }
            seen.extend_from_slice(&buf[..n]);
            if seen.windows(13).any(|w| w == b"Linux version") {
                let _ = tx.send(true);
                return;
            }
        }
        let _ = tx.send(false);
    });
    let booted = rx.recv_timeout(PROBE_TIMEOUT).unwrap_or(false);
    let _ = child.kill();
    let status = child.wait();
    let _ = reader.join();
    let mut stderr = String::new();
    let _ = err.read_to_string(&mut stderr);
    if booted {
        return Ok(format!(
            "KVM boot probe printed the kernel's first line after {} ms",
            start.elapsed().as_millis()
        ));
    }
    let stderr = stderr
        .lines()
        .filter(|l| !l.trim().is_empty())
        .collect::<Vec<_>>()
        .join(" / ");
    if !stderr.is_empty() {
        Err(format!("KVM boot probe failed: {stderr}"))
    } else if start.elapsed() >= PROBE_TIMEOUT {
        Err(format!(
            "KVM boot probe: no kernel output within {} s",
            PROBE_TIMEOUT.as_secs()
        ))
    } else {
        Err(format!(
            "KVM boot probe: QEMU ended ({status:?}) before the kernel printed"
        ))
    }
}

/// The host's TSC frequency in kHz, measured against `CLOCK_MONOTONIC_RAW` over 50 ms. Under
/// TCG the guest's TSC is the host's, and a guest that calibrates it itself hangs, so the
/// kernel is told (`tsc_early_khz=`).
#[cfg(target_arch = "x86_64")]
pub fn host_tsc_khz() -> u64 {
    let t0 = Instant::now();
    // SAFETY: RDTSC is part of every x86-64 CPU and has no memory effects.
    let c0 = unsafe { std::arch::x86_64::_rdtsc() };
    std::thread::sleep(Duration::from_millis(50));
    // SAFETY: as above.
    let c1 = unsafe { std::arch::x86_64::_rdtsc() };
    let ns = t0.elapsed().as_nanos().max(1) as u64;
    c1.wrapping_sub(c0).saturating_mul(1_000_000) / ns
}
