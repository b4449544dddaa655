//! The pipeline of one glassbox audit, usable as a library.
//!
//! # Steps
//!
//! 1. Resolve the command on the host ([`target::resolve`]): the program, the read-only paths
//!    it needs inside the sandbox.
//! 2. Create the evidence bundle and write what is known (`manifest.json`).
//! 3. Plant fresh secrets, start the server in the sandbox under the recorder; events go to
//!    `events.jsonl`, the server's stderr to `stderr.log`, as they happen.
//! 4. Run the MCP session (`glassbox-mcp`), every line to `transcript.jsonl` as it happens;
//!    the recorder stamps events with the session's phase.
//! 5. Close the session, give the server a moment to exit, kill whatever is left.
//! 6. Evaluate the checks, decide the verdict, write `report.json` and the final manifest.
//!
//! Every file of the bundle is written through `glassbox_model::bundle::Writer`, and read back
//! (step 6, [`recheck::evaluate_bundle`]) through that codec's reader.
//!
//! [`trace`] runs steps 1 and 3 for any command, without MCP.
//!
//! # Where each phase is
//!
//! [`audit`] (here) drives the phases in order; each is a module named for it:
//! `options.rs` (what a caller sets), `pipeline.rs` (the audit under way: prepared, planted,
//! finished), `manifest.rs` (what the bundle starts from), `install_phase.rs` (a package
//! installed, traced), `start.rs` (a server that exits at once started again with what it
//! lacked), `runs.rs` (the network, trigger and dual-execution runs), `session_run.rs` (one
//! run: the backend, the MCP session, its end), `probes.rs` (what the plans of calls are
//! given), `remote.rs` (a server reached by URL), `trace.rs` (`glassbox trace`). Where a run
//! happens is [`Isolation`] (`isolation.rs`: `run.rs` on this kernel, [`microvm`] in a
//! guest), what it records `recording.rs`, its planted secrets `secrets.rs`.
#![deny(missing_docs)]

mod backend;
mod canary;
pub mod coverage;
mod dual;
mod install_phase;
mod isolation;
mod lazykey;
mod left;
mod manifest;
pub mod microvm;
mod options;
mod pipeline;
mod probes;
pub mod recheck;
mod recording;
mod remote;
mod run;
mod runs;
mod secrets;
pub mod selftest;
mod session_run;
mod start;
mod trace;
pub mod triggers;
mod usage;

pub use isolation::Isolation;
pub use options::{
    metadata_probe_default, AuditOptions, NetworkChoice, ResponderChoice, METADATA_ADDRESS,
    METADATA_PROBE_VAR, METADATA_STAND_IN,
};
pub use recording::{EventSink, RecorderChoice};
pub use remote::audit_remote;
pub use session_run::HttpServer;
pub use trace::{trace, TraceOptions, Traced};

use glassbox_model::bundle;
use pipeline::Pipeline;

use glassbox_model::{
    AuditReport, Evidence, Manifest, NetworkMode, Phase, ToolSummary, GLASSBOX_VERSION,
};
use glassbox_plan::{config, install, target};
use std::path::{Path, PathBuf};

/// Why an audit could not be carried out (as opposed to a server found inconclusive).
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Bad usage.
    #[error("{0}")]
    Usage(String),
    /// The sandbox could not be built.
    #[error(transparent)]
    Sandbox(#[from] glassbox_sandbox::Error),
    /// Secrets could not be made.
    #[error("cannot make the planted secrets: {0}")]
    Honeytokens(std::io::Error),
    /// The evidence bundle could not be written.
    #[error("cannot write evidence to {path}: {source}")]
    Evidence {
        /// Where.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// The evidence bundle could not be read or written (its codec: `glassbox_model::bundle`).
    #[error(transparent)]
    Bundle(#[from] bundle::Error),
    /// The microVM (`--isolation microvm`) could not be started on this host (QEMU, the
    /// kernel, the machine): the VM's own error kept.
    #[error("the microVM did not start: {0}")]
    VmStart(#[source] glassbox_vm::Error),
    /// The microVM's guest could not run the server (what the guest said).
    #[error("{0}")]
    Vm(String),
    /// The microVM's guest hung or died before the server ran in it (no boot, no start of
    /// the sandbox in time): the run observed nothing, and the audit is inconclusive.
    #[error("{0}")]
    GuestLost(String),
    /// What to audit could not be decided (a target, a configuration, a package).
    #[error(transparent)]
    Plan(#[from] glassbox_plan::Error),
    /// A step on this host failed (a thread, a port, a file, a pipe to the guest): which step,
    /// and the system's error, kept.
    #[error("internal error: cannot {what}: {source}")]
    Io {
        /// The step (`start the recorder thread`).
        what: String,
        /// The system's error.
        #[source]
        source: std::io::Error,
    },
    /// Anything else.
    #[error("internal error: {0}")]
    Internal(String),
}

impl Error {
    /// The error of a failed step `what` on this host, for `map_err`.
    pub(crate) fn io(what: impl Into<String>) -> impl FnOnce(std::io::Error) -> Error {
        let what = what.into();
        move |source| Error::Io { what, source }
    }
}

/// How one configured server (an entry of a client configuration, a `server.json`, a line
/// of a batch list) is audited: [`AuditOptions::for_entry`].
#[derive(Clone, Debug)]
pub enum Planned {
    /// Run here, in the sandbox ([`audit`]).
    Local(AuditOptions),
    /// Spoken to where it runs ([`audit_remote`]).
    Remote {
        /// Its URL.
        url: String,
        /// The legacy HTTP+SSE transport instead of streamable HTTP.
        sse: bool,
        /// The options.
        opts: AuditOptions,
    },
    /// Not audited here, and why (a launcher glassbox cannot run).
    NotAudited(String),
}

impl Planned {
    /// Audits it ([`audit`] or [`audit_remote`]); one that is not audited here is a usage
    /// error that says why.
    pub fn audit(&self, progress: &dyn Progress) -> Result<Audit, Error> {
        match self {
            Planned::Local(o) => audit(o, progress),
            Planned::Remote { url, sse, opts } => audit_remote(url, *sse, opts, progress),
            Planned::NotAudited(why) => Err(Error::Usage(format!("not audited: {why}"))),
        }
    }
}

/// Progress of a long audit, for a person watching.
pub trait Progress: Sync {
    /// A phase began.
    fn phase(&self, phase: &Phase);
    /// A run of the server began, with the network in `mode`.
    fn network_run(&self, mode: NetworkMode) {
        let _ = mode;
    }
    /// A run is made again, and why.
    fn repeat(&self, why: &str) {
        let _ = why;
    }
}

/// No progress output.
#[derive(Debug)]
pub struct Quiet;

impl Progress for Quiet {
    fn phase(&self, _: &Phase) {}
}

/// The result of an audit.
#[derive(Debug)]
pub struct Audit {
    /// Everything recorded.
    pub evidence: Evidence,
    /// Checks, verdict, tools.
    pub report: AuditReport,
    /// Where the bundle is.
    pub evidence_dir: PathBuf,
}

/// Runs one audit of an MCP stdio server: a run in each network mode asked for (capture,
/// then denied), then the checks over everything recorded.
pub fn audit(opts: &AuditOptions, progress: &dyn Progress) -> Result<Audit, Error> {
    let (mut audit, target, exact) = Pipeline::prepare(opts, progress)?;
    audit.plant()?;
    let target = match (audit.opts.package.clone(), exact) {
        (Some(package), Some(exact)) => match audit.install(&package, exact)? {
            Ok(target) => target,
            Err(why) => return audit.finish_without_server(why),
        },
        _ => target.ok_or_else(|| Error::Internal("no target".into()))?,
    };
    let mut target = audit.server_environment(target)?;
    for (i, &mode) in audit.opts.network.modes().iter().enumerate() {
        audit.network_run(&target, i == 0, mode, None)?;
        if i == 0 {
            target = audit.start_again(target, mode)?;
        }
    }
    if audit.opts.trigger_run() {
        let triggers = audit.opts.triggers;
        audit.trigger_run(&target, triggers)?;
        // What the trigger run brought out is made again: each trigger alone (which of them
        // it was), then, for what neither did alone, all of them (together, or seen once).
        let pending = |a: &Pipeline| {
            glassbox_checks::trigger_only::unrepeated(&a.manifest, &a.all_events, &a.flows)
        };
        if pending(&audit) > 0 {
            for alone in triggers.alone() {
                audit.trigger_run(&target, alone)?;
            }
            if pending(&audit) > 0 {
                audit.trigger_run(&target, triggers)?;
            }
        }
    }
    audit.dual_runs(&target)?;
    audit.finish()
}

/// Evaluates the current checks over stored or fresh evidence.
pub fn evaluate(evidence: &Evidence, dir: &Path, proofs: &glassbox_checks::Proofs) -> AuditReport {
    let checks = glassbox_checks::evaluate_all(evidence, proofs);
    report(&evidence.manifest, checks, dir)
}

/// The report of a run from its check results: the verdict and the tools.
pub fn report(
    manifest: &Manifest,
    checks: Vec<glassbox_model::CheckResult>,
    dir: &Path,
) -> AuditReport {
    let session = &manifest.session;
    let (verdict, inconclusive_reason) = glassbox_checks::verdict(manifest, &checks);
    let tools: Vec<ToolSummary> = session
        .tools
        .iter()
        .map(|t| ToolSummary {
            name: t.name.clone(),
            called: t.called,
            result: t.result,
            calls: t.calls.clone(),
        })
        .collect();
    AuditReport {
        glassbox_version: GLASSBOX_VERSION.into(),
        run_id: manifest.run_id.clone(),
        evidence_dir: dir.to_string_lossy().into_owned(),
        verdict,
        inconclusive_reason,
        checks,
        call_outcomes: AuditReport::count_calls(&tools),
        tools,
        surface: {
            let mut surface = glassbox_model::SurfaceSummary::of(session);
            surface.cut.extend(triggers::left_out(manifest));
            surface
        },
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The suite's audits of fixtures give URL parameters a documentation address, never the
    /// real metadata address: a fixture may target only those (`.cargo/config.toml` sets
    /// [`METADATA_PROBE_VAR`] for every cargo command here). Run without it, this fails rather
    /// than let the suite fall back to `169.254.169.254`.
    #[test]
    fn the_test_suite_probes_a_documentation_address() {
        let ip = metadata_probe_default().expect("an IP address");
        assert_eq!(
            ip, METADATA_STAND_IN,
            "{METADATA_PROBE_VAR} must be set to {METADATA_STAND_IN} for the test suite"
        );
        assert_eq!(
            AuditOptions::new(Vec::new(), "/".into()).metadata_probe,
            METADATA_STAND_IN
        );
    }
}
