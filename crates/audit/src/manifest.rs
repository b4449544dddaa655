//! The manifest an audit starts from: its run id, the kernel, the target and the settings,
//! and the names the server's entry points go by.

use crate::AuditOptions;
use glassbox_model::{
    CheckVersion, Manifest, NetworkSettings, RecorderSettings, SessionSummary, Target,
    GLASSBOX_VERSION,
};
use glassbox_plan::{config, explain};
use std::path::Path;

/// A run id: UTC time and 6 random hex digits, sortable and unique.
pub(crate) fn run_id() -> String {
    let now = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    let compact: String = now.chars().filter(|c| c.is_ascii_alphanumeric()).collect();
    let rnd = glassbox_sandbox::honeytokens::random_bytes(3).unwrap_or_default();
    let hex: String = rnd.iter().map(|b| format!("{b:02x}")).collect();
    format!("{compact}-{hex}")
}

pub(crate) fn kernel() -> String {
    // SAFETY: utsname is plain old data; uname fills it.
    let mut u: libc::utsname = unsafe { std::mem::zeroed() };
    // SAFETY: u is a valid out-pointer.
    if unsafe { libc::uname(&mut u) } != 0 {
        return "unknown".into();
    }
    let field = |f: &[libc::c_char]| {
        let bytes: Vec<u8> = f
            .iter()
            .take_while(|&&c| c != 0)
            .map(|&c| c as u8)
            .collect();
        String::from_utf8_lossy(&bytes).into_owned()
    };
    format!(
        "{} {} {} {}",
        field(&u.sysname),
        field(&u.release),
        field(&u.version),
        field(&u.machine)
    )
}

/// The manifest of a new audit: what is known before anything runs.
pub(crate) fn new_manifest(
    run_id: &str,
    opts: &AuditOptions,
    program: String,
    channels: Vec<String>,
) -> Manifest {
    Manifest {
        format: 1,
        glassbox_version: GLASSBOX_VERSION.into(),
        run_id: run_id.to_string(),
        started_at: humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string(),
        finished_at: None,
        kernel: kernel(),
        target: Target {
            command: opts
                .command
                .iter()
                .map(|a| a.to_string_lossy().into_owned())
                .collect(),
            program,
            cwd: opts.cwd.to_string_lossy().into_owned(),
            package: None,
            starts: Vec::new(),
        },
        sandbox: Default::default(),
        recorder: RecorderSettings {
            mechanism: String::new(),
            syscalls: Vec::new(),
            channels,
            lost: 0,
            lost_why: Vec::new(),
            lost_file_calls: 0,
            unobserved: Vec::new(),
            failure: None,
        },
        checks: glassbox_checks::registry()
            .iter()
            .map(|c| CheckVersion {
                id: c.info.id.to_string(),
                version: c.info.version,
            })
            .collect(),
        timings: Vec::new(),
        server_exit: None,
        session: SessionSummary::default(),
        network: NetworkSettings {
            runs: Vec::new(),
            allow: opts.allow_hosts.clone(),
            resolver: format!("{}:53", glassbox_net::RESOLVER_V4),
            synthetic_range: glassbox_net::SYNTHETIC_RANGE.into(),
            canary_sockets: Vec::new(),
            ..Default::default()
        },
        install: None,
        vm: None,
        dual: Vec::new(),
    }
}

/// The names the audited entry gives itself (see [`explain`]), in the order the report
/// prefers its reasons: its environment's plain values, its arguments, its `server.json`,
/// its installed package's metadata. Which destinations they explain, the checks decide.
pub(crate) fn entry_names(
    opts: &AuditOptions,
    installed_in: Option<&Path>,
) -> Vec<glassbox_model::EntryName> {
    let mut e = explain::Names::new();
    e.environment(opts.server_env.iter().filter_map(|(n, v)| match v {
        config::EnvValue::Plain(v) => Some((n.as_str(), v.as_str())),
        config::EnvValue::Secret { .. } => None,
    }));
    let args: Vec<String> = opts
        .command
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    e.arguments(args.iter().map(String::as_str));
    e.named(&opts.entry_names);
    if let (Some(p), Some(dir)) = (&opts.package, installed_in) {
        e.package(p.spec.registry, &p.spec.name, dir);
    }
    e.into_vec()
}
