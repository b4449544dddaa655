//! The install phase: a package installed in the sandbox, traced, with the registry its only
//! reachable destination ([`install_phase`]).

use crate::recording::Launch;
use crate::{recording, secrets, AuditOptions, Error, Progress};
use glassbox_model::{bundle, Manifest, NetworkMode, NetworkRun, Phase, PhaseTiming, ServerExit};
use glassbox_plan::{config, install, target};
use std::path::{Path, PathBuf};
use std::sync::Arc;

/// What the install phase shares with the server's runs.
pub(crate) struct InstallContext<'a> {
    pub(crate) bundle: &'a bundle::Writer,
    pub(crate) events: &'a recording::SharedSink,
    pub(crate) clock: &'a Arc<glassbox_trace::Clock>,
    pub(crate) secrets: &'a mut secrets::Secrets,
    pub(crate) manifest: &'a mut Manifest,
    /// The audit's CA, when the edge answers (the install's captured flows are answered too;
    /// its relayed registry traffic stays byte for byte).
    pub(crate) answer: Option<glassbox_net::Authority>,
    /// The bait variables, which the installer's environment has too.
    pub(crate) bait: &'a [(String, String)],
}

/// What the install phase leaves for the server's runs.
pub(crate) struct Installed {
    pub(crate) dir: PathBuf,
    pub(crate) package: glassbox_model::PackageRef,
    pub(crate) events: Vec<glassbox_model::Event>,
    pub(crate) flows: Vec<glassbox_model::Flow>,
    /// The limits the install's sandbox reached.
    pub(crate) limits_reached: Vec<String>,
    /// Why the install failed (its evidence is kept all the same).
    pub(crate) failure: Option<String>,
    /// The install's sandbox (the manifest's until a run of the server replaces it).
    pub(crate) sandbox: Option<glassbox_model::SandboxSettings>,
}

/// Holds an exclusive lock on a package's install folder (two audits of one version at once
/// install it once).
pub(crate) struct InstallLock {
    pub(crate) _file: std::fs::File,
}

impl InstallLock {
    /// The lock beside `dir`, its whole name and `.lock` (`with_extension` would replace a
    /// version's last part: `foo@1.0.2` and `foo@1.0.3` shared `foo@1.0.lock`).
    pub(crate) fn path(dir: &Path) -> PathBuf {
        let mut name = dir.file_name().unwrap_or_default().to_os_string();
        name.push(".lock");
        dir.with_file_name(name)
    }

    pub(crate) fn take(dir: &Path) -> Result<InstallLock, Error> {
        let path = InstallLock::path(dir);
        if let Some(parent) = path.parent() {
            std::fs::create_dir_all(parent).map_err(|source| Error::Evidence {
                path: parent.to_path_buf(),
                source,
            })?;
        }
        let f = std::fs::OpenOptions::new()
            .create(true)
            .truncate(false)
            .write(true)
            .open(&path)
            .map_err(|source| Error::Evidence {
                path: path.clone(),
                source,
            })?;
        use std::os::fd::AsRawFd;
        // SAFETY: flock on a descriptor we own; blocks until the lock is ours.
        if unsafe { libc::flock(f.as_raw_fd(), libc::LOCK_EX) } != 0 {
            return Err(Error::Evidence {
                path,
                source: std::io::Error::last_os_error(),
            });
        }
        Ok(InstallLock { _file: f })
    }
}

/// Phase `install`: the package's installer in the sandbox, the registry relayed, the rest
/// captured; or the install an earlier audit made of these exact versions (resolved by
/// [`install::Package::exact_versions`] before anything was written). An installer that
/// fails is not an error: its evidence is returned with the failure (the audit is then
/// inconclusive and its install checked).
pub(crate) fn install_phase(
    package: &install::Package,
    exact: install::Exact,
    opts: &AuditOptions,
    run_id: &str,
    cx: InstallContext<'_>,
    progress: &dyn Progress,
) -> Result<Installed, Error> {
    let spec = &package.spec;
    let dir = package.dir(&exact);
    let reference = package.reference(&exact);
    let _lock = InstallLock::take(&dir)?;
    let registry: Vec<(String, u16)> = install::registry_hosts(spec.registry);
    let registry_text: Vec<String> = registry.iter().map(|(h, p)| format!("{h}:{p}")).collect();
    // Where the host has a Chromium, browser drivers are pointed at it when the server runs
    // (`glassbox_sandbox::browser`): their installers need not download one (which the
    // registry-only network refuses, failing the install).
    let mut env = opts.install_env.clone();
    for (k, v) in glassbox_sandbox::browser::install_environment() {
        if !env.iter().any(|(n, _)| n == k) {
            env.push((k.to_string(), v.to_string()));
        }
    }
    let install_env: Vec<String> = env
        .iter()
        .map(|(k, v)| match config::secret_name(k) {
            true => format!("{k}=***"),
            false => format!("{k}={v}"),
        })
        .collect();
    if let Some(marker) = install::cached(&dir) {
        cx.manifest.install = Some(glassbox_model::InstallRecord {
            command: marker.command,
            dir: dir.to_string_lossy().into_owned(),
            cached: true,
            installed_by: marker.installed_by,
            exit: None,
            registry: registry_text,
            packages: marker.packages,
            ..Default::default()
        });
        cx.bundle.write_manifest(cx.manifest)?;
        return Ok(Installed {
            dir,
            package: reference,
            events: Vec::new(),
            flows: Vec::new(),
            limits_reached: Vec::new(),
            failure: None,
            sandbox: None,
        });
    }
    // An earlier install that did not finish leaves an unmarked folder: start again.
    let fresh = |source| Error::Evidence {
        path: dir.clone(),
        source,
    };
    if dir.exists() {
        std::fs::remove_dir_all(&dir).map_err(fresh)?;
    }
    std::fs::create_dir_all(&dir).map_err(fresh)?;
    // SAFETY: geteuid cannot fail.
    let owner = match unsafe { libc::geteuid() } {
        0 => glassbox_sandbox::HOST_UID_WHEN_ROOT,
        uid => uid,
    };
    std::os::unix::fs::chown(&dir, Some(owner), None).map_err(fresh)?;
    let installer = install::installer(package, &exact, &dir, &env)?;
    let command: Vec<String> = installer
        .command
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    let first = target::resolve(&installer.command[..1], &dir)?;
    let target = target::Resolved {
        program: first.program,
        argv: installer.command.clone(),
        extra_ro: [first.extra_ro, installer.extra_ro, opts.extra_ro.clone()].concat(),
        extra_rw: vec![dir.clone()],
        path_prefix: first.path_prefix,
        env: [cx.bait.to_vec(), installer.env].concat(),
    };
    progress.network_run(NetworkMode::Install);
    progress.phase(&Phase::Install);
    cx.clock.set_phase(Phase::Install);
    let start_ns = cx.clock.now_ns();
    let mut running = opts.isolation.start(
        &Launch::audit(opts, &target, &dir, Some(opts.install_timeout)),
        Box::new(cx.events.clone()),
        recording::RunPlan {
            secrets: {
                cx.secrets.settle_rsa();
                cx.secrets.clone()
            },
            clock: cx.clock.clone(),
            first_event_id: 1,
            network: Some(NetworkMode::Install),
            relay: Some(glassbox_net::Relay::to(registry.clone())),
            wire: None,
            limits: opts.limits.clone(),
            answer: cx.answer.clone(),
            trust: cx.answer.as_ref().map(recording::CaCertificate::of),
            ring: opts.recorder_ring,
            marker: None,
            clock_shift: None,
        },
    )?;
    let (isolation, _) = running.edge_checks();
    let (stdin, o, e) = running.take_stdio();
    drop(stdin);
    let out = cx.bundle.stdout("-install")?;
    let err = cx.bundle.stderr("-install")?;
    let out = std::thread::spawn(move || bundle::copy_bounded(o, out));
    let err = std::thread::spawn(move || bundle::copy_bounded(e, err));
    let exited = running.wait_timeout(opts.install_timeout);
    let (exit, recording) = running.finish();
    let install_reached: Vec<String> = running
        .limits_reached()
        .iter()
        .map(|r| format!("install run: {r}"))
        .collect();
    let out_tail = out.join().unwrap_or_default();
    let err_tail = err.join().unwrap_or_default();
    let end_ns = cx.clock.now_ns();
    cx.clock.set_phase(Phase::Startup);
    if let Some(e) = recording.write_error {
        return Err(Error::Evidence {
            path: cx.bundle_path(bundle::EVENTS),
            source: e,
        });
    }
    let flows = recording.edge.flows;
    let end_event = 1 + recording.events.len() as u64;
    cx.manifest.timings.push(PhaseTiming {
        phase: Phase::Install,
        start_ns,
        end_ns,
    });
    cx.manifest.recorder.add_lost(
        recording.stats.lost,
        recording.stats.lost_files,
        &recording.stats.lost_why,
    );
    if let Some(f) = &recording.stats.failure {
        cx.manifest.recorder.failure = Some(format!("install run: {f}"));
    }
    if let Some(why) = &running.ground_truth() {
        cx.manifest
            .recorder
            .unobserved
            .push(format!("honeytoken-ground-truth (install run): {why}"));
    }
    let mut isolation = isolation;
    if let Some(e) = &recording.edge.error {
        isolation.push(format!("FAILED: {e}"));
    }
    cx.manifest.network.runs.push(NetworkRun {
        mode: NetworkMode::Install,
        start_ns,
        end_ns,
        first_event: 1,
        end_event,
        edge: running.settings().network.clone(),
        isolation_verified: !isolation.is_empty() && isolation.iter().all(|c| c.starts_with("ok")),
        isolation,
        counters: recording.edge.counters,
        syscalls_without_flow: Vec::new(),
        session: None,
        server_exit: Some(exit.clone()),
        allow: registry_text.clone(),
        trigger: None,
    });
    let destinations = install_destinations(&flows, &registry_text);
    let tail = if err_tail.trim().is_empty() {
        &out_tail
    } else {
        &err_tail
    };
    let installer_name = match spec.registry {
        install::Registry::Npm => "npm install",
        install::Registry::Pypi => "the PyPI install",
    };
    let failure = match (&exited, &exit) {
        // Killed by glassbox at the bound (a microVM's guest ends the run there itself).
        (None, _)
        | (
            Some(ServerExit::Signaled {
                by_glassbox: true, ..
            }),
            _,
        ) => Some(format!(
            "{installer_name} did not finish within {}s (--install-timeout)",
            opts.install_timeout.as_secs()
        )),
        (Some(_), ServerExit::Exited { code: 0 }) => None,
        (Some(_), how) => Some(format!(
            "{installer_name} ended with {}: {}",
            match how {
                ServerExit::Exited { code } => format!("status {code}"),
                ServerExit::Signaled { signal, .. } => format!("signal {signal}"),
                other => format!("{other:?}"),
            },
            install::meaningful_line(tail)
        )),
    }
    .map(|why| {
        let mut why = why;
        let unreached: Vec<&String> = destinations
            .iter()
            .filter(|d| d.ends_with("(captured, not reached)"))
            .collect();
        if !unreached.is_empty() {
            why.push_str(&format!(
                "; it tried to fetch from {} (not relayed: only the registry is)",
                unreached
                    .iter()
                    .map(|d| d.trim_end_matches(" (captured, not reached)"))
                    .collect::<Vec<_>>()
                    .join(", ")
            ));
        }
        if !install_reached.is_empty() {
            why.push_str(&format!(
                "; the sandbox reached its limits: {}",
                install_reached.join("; ")
            ));
        }
        why
    });
    let output_tail = match failure {
        Some(_) => install::last_lines(tail, 10),
        None => Vec::new(),
    };
    let packages = install::installed_packages(spec.registry, &dir);
    cx.manifest.install = Some(glassbox_model::InstallRecord {
        command: command.clone(),
        dir: dir.to_string_lossy().into_owned(),
        cached: false,
        installed_by: run_id.to_string(),
        exit: Some(exit),
        registry: registry_text,
        packages: packages.clone(),
        failure: failure.clone(),
        output_tail: output_tail.clone(),
        destinations,
        env: install_env,
    });
    cx.bundle.write_manifest(cx.manifest)?;
    let failure = failure.map(|why| match output_tail.len() {
        0 => why,
        n => format!(
            "{why}; its last lines: {}",
            output_tail[n.saturating_sub(5)..].join(" | ")
        ),
    });
    if failure.is_none() {
        install::mark(
            &dir,
            &install::Marker {
                package: reference.clone(),
                command,
                installed_by: run_id.to_string(),
                packages,
            },
        )?;
    }
    Ok(Installed {
        dir,
        package: reference,
        events: recording.events,
        flows,
        limits_reached: install_reached,
        failure,
        sandbox: Some(running.settings().clone()),
    })
}

/// The destinations an install's flows tried, in order, each once: `HOST:PORT (relayed)` for
/// the registry, `HOST:PORT (captured, not reached)` for the rest (DNS queries left out).
pub(crate) fn install_destinations(
    flows: &[glassbox_model::Flow],
    relayed: &[String],
) -> Vec<String> {
    let mut out: Vec<String> = Vec::new();
    for f in flows {
        if f.dns.is_some() || f.mode != NetworkMode::Install {
            continue;
        }
        let (ip, port) = match &f.dst {
            glassbox_model::SockAddr::Inet { ip, port } => (ip.clone(), *port),
            glassbox_model::SockAddr::Inet6 { ip, port } => (format!("[{ip}]"), *port),
            _ => continue,
        };
        let host = f
            .sni
            .as_ref()
            .or(f.dns_name.as_ref())
            .map(|n| glassbox_model::printable(&n.to_string()))
            .unwrap_or(ip);
        let dest = format!("{host}:{port}");
        let how = match relayed.iter().any(|r| r.eq_ignore_ascii_case(&dest)) {
            true => "relayed",
            false => "captured, not reached",
        };
        let line = format!("{dest} ({how})");
        if !out.contains(&line) {
            out.push(line);
        }
    }
    out
}

impl InstallContext<'_> {
    pub(crate) fn bundle_path(&self, name: &str) -> PathBuf {
        self.bundle.dir().join(name)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_version_has_its_own_install_lock() {
        let a = InstallLock::path(Path::new("/c/npm/@scope+pkg@1.0.2"));
        let b = InstallLock::path(Path::new("/c/npm/@scope+pkg@1.0.3"));
        assert_eq!(a, Path::new("/c/npm/@scope+pkg@1.0.2.lock"));
        assert_ne!(a, b);
        assert_eq!(
            InstallLock::path(Path::new("/c/pypi/mcp-server-time==0.6.2")),
            Path::new("/c/pypi/mcp-server-time==0.6.2.lock")
        );
    }
}
