//! `glassbox trace --isolation microvm`: the same trace, one level further in. The host boots a
//! microVM (crates/vm) whose agent is this very executable, and the guest runs
//! `glassbox trace --out /dev/virtio-ports/glassbox.events ... -- COMMAND`: the namespace
//! sandbox and the recorder run inside the guest, under the guest's kernel. The host parses the
//! events that arrive on the events port and writes them through the same sink as the
//! namespace mode; the command's stdout and stderr (and the guest glassbox's own messages) are
//! copied to glassbox's.

use anyhow::{Context, Result};
use glassbox_audit::EventSink;
use glassbox_model::Event;
use glassbox_vm::{agent, Accel, GuestCommand, GuestExit, Vm, VmConfig};
use std::ffi::OsString;
use std::io::{BufRead, BufReader, Read, Write};
use std::path::{Path, PathBuf};
use std::time::Duration;

/// The bound on the boot, up to the agent's "ready" (TCG boots take about 5 s; a loaded host
/// and a debug build much more).
const BOOT_TIMEOUT: Duration = Duration::from_secs(120);

/// The command itself is unbounded, as in the namespace mode (Ctrl-C ends glassbox, and QEMU
/// dies with it: `PR_SET_PDEATHSIG`).
const UNBOUNDED: Duration = Duration::from_secs(100 * 365 * 24 * 3600);

/// What `glassbox trace` was asked, for the guest's `glassbox trace`.
pub struct TraceRequest<'a> {
    /// The command and its arguments.
    pub cmd: &'a [OsString],
    /// The working directory (shared read-only, and the guest command's).
    pub cwd: &'a Path,
    /// `--ro` paths, absolute.
    pub read_only: &'a [PathBuf],
    /// `--env` pairs.
    pub env: &'a [(String, String)],
    /// `--recorder`, as its command-line name.
    pub recorder: &'a str,
}

/// The guest's command line: `glassbox trace` with the same options, its events to the port.
pub fn guest_argv(req: &TraceRequest) -> Vec<OsString> {
    let mut argv: Vec<OsString> = vec![
        agent::SELF_IN_GUEST.into(),
        "trace".into(),
        "--out".into(),
        format!("/dev/virtio-ports/{}", agent::ports::EVENTS).into(),
        "--recorder".into(),
        req.recorder.into(),
    ];
    for p in req.read_only {
        argv.push("--ro".into());
        argv.push(p.into());
    }
    for (k, v) in req.env {
        argv.push("--env".into());
        argv.push(format!("{k}={v}").into());
    }
    argv.push("--".into());
    argv.extend(req.cmd.iter().cloned());
    argv
}

/// The host directories the guest needs: the working directory and the `--ro` paths (a file's
/// directory: 9p shares directories). The host's root is never shared whole (its `/proc`
/// would be readable through the share): `/` as the working directory is the guest's own.
fn shares(req: &TraceRequest) -> Result<Vec<PathBuf>> {
    Ok(glassbox_audit::microvm::shares(req.cwd, req.read_only)?)
}

/// Runs the trace in a microVM: the command's exit status (128 + N for signal N) and the
/// number of events written to `sink`.
pub fn trace(req: &TraceRequest, mut sink: Box<dyn EventSink>) -> Result<(i32, u64)> {
    let exe = std::env::current_exe().context("cannot find glassbox's own executable")?;
    let mut config = VmConfig::new(&exe, &["vm-agent"]);
    config.sandbox = true;
    config.boot_timeout = BOOT_TIMEOUT;
    config.shares = shares(req)?;
    let mut cmd = GuestCommand::new(guest_argv(req));
    cmd.cwd = req.cwd.to_path_buf();
    // The guest glassbox makes its planted secrets under TMPDIR: not in a shared, read-only
    // /tmp when the working directory is the host's /tmp.
    cmd.env.push(("TMPDIR".into(), agent::TMP_IN_GUEST.into()));
    let mut vm = Vm::start(&config, &cmd).context("the microVM did not start the trace")?;
    let accel = match vm.info.accel.accel {
        Accel::Kvm => "kvm",
        Accel::Tcg => "tcg",
    };
    eprintln!(
        "glassbox: isolation microvm (accel {accel}: {}, kernel {})",
        vm.info.accel.reason, vm.info.kernel.release
    );

    let pump = |from: Option<std::os::unix::net::UnixStream>, mut to: Box<dyn Write + Send>| {
        std::thread::spawn(move || {
            if let Some(mut f) = from {
                let _ = std::io::copy(&mut f, &mut to);
                let _ = to.flush();
            }
        })
    };
    let out = pump(vm.stdout.take(), Box::new(std::io::stdout()));
    let err = pump(vm.stderr.take(), Box::new(std::io::stderr()));
    // stdin on a detached thread, as in the namespace mode: a blocked read of our stdin must
    // not keep the trace alive after the command ended.
    if let Some(mut w) = vm.stdin.take() {
        std::thread::spawn(move || {
            let mut buf = [0u8; 8192];
            let mut input = std::io::stdin();
            while let Ok(n) = input.read(&mut buf) {
                if n == 0 || w.write_all(&buf[..n]).is_err() {
                    break;
                }
            }
        });
    }
    let events_port = vm.events.take().context("the VM has no events port")?;
    let events = std::thread::spawn(move || -> Result<u64> {
        let mut n = 0u64;
        let mut reader = BufReader::new(events_port);
        let mut line = String::new();
        loop {
            line.clear();
            if reader
                .read_line(&mut line)
                .context("reading the guest's events")?
                == 0
            {
                break;
            }
            if line.trim().is_empty() {
                continue;
            }
            let e: Event = serde_json::from_str(&line)
                .with_context(|| format!("malformed event from the guest: {:?}", line.trim()))?;
            sink.event(&e).context("cannot write the events")?;
            n += 1;
            if reader.buffer().is_empty() {
                sink.flush().context("cannot write the events")?;
            }
        }
        sink.flush().context("cannot write the events")?;
        Ok(n)
    });

    let exit = vm.wait(UNBOUNDED);
    // The agent powers the guest off after its report; QEMU's end closes every port.
    vm.shutdown(Duration::from_secs(10));
    let _ = out.join();
    let _ = err.join();
    let count = events
        .join()
        .map_err(|_| anyhow::anyhow!("the events reader panicked"))?;
    let exit = exit.context("the microVM trace failed")?;
    let count = count?;
    Ok((
        match exit {
            GuestExit::Code(c) => c,
            GuestExit::Signal(s) => 128 + s,
        },
        count,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_guest_runs_the_same_trace_with_its_events_to_the_port() {
        let cmd = [OsString::from("python3"), OsString::from("-c")];
        let ro = [PathBuf::from("/srv/data/file.txt"), PathBuf::from("/usr")];
        let env = [("A".to_string(), "b=c".to_string())];
        let req = TraceRequest {
            cmd: &cmd,
            cwd: Path::new("/work"),
            read_only: &ro,
            env: &env,
            recorder: "notify",
        };
        let argv: Vec<String> = guest_argv(&req)
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        assert_eq!(
            argv,
            [
                "/run/glassbox/glassbox",
                "trace",
                "--out",
                "/dev/virtio-ports/glassbox.events",
                "--recorder",
                "notify",
                "--ro",
                "/srv/data/file.txt",
                "--ro",
                "/usr",
                "--env",
                "A=b=c",
                "--",
                "python3",
                "-c"
            ]
        );
        // A file's directory is shared (9p shares directories); the working directory always.
        let s = shares(&req).unwrap();
        assert_eq!(
            s,
            [
                PathBuf::from("/work"),
                PathBuf::from("/srv/data"),
                PathBuf::from("/usr")
            ]
        );
        // Never the host's root: not as a working directory, refused as --ro.
        let at_root = TraceRequest {
            cwd: Path::new("/"),
            read_only: &[],
            ..req
        };
        assert!(shares(&at_root).unwrap().is_empty());
        let root = [PathBuf::from("/")];
        let whole = TraceRequest {
            read_only: &root,
            ..at_root
        };
        let e = shares(&whole).unwrap_err().to_string();
        assert!(e.contains("not supported"), "{e}");
        let run = TraceRequest {
            cwd: Path::new("/run"),
            read_only: &[],
            ..whole
        };
        assert!(shares(&run).is_err());
        let tmp = TraceRequest {
            cwd: Path::new("/tmp"),
            ..run
        };
        assert!(shares(&tmp).is_err());
        let below = TraceRequest {
            cwd: Path::new("/tmp/project"),
            ..tmp
        };
        assert_eq!(shares(&below).unwrap(), [PathBuf::from("/tmp/project")]);
    }
}
