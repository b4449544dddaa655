//! Where the server runs ([`Isolation`]) and what follows from it: the backend a run starts
//! on ([`Isolation::start`]).

use crate::backend::Backend;
use crate::recording::RunPlan;
use crate::{microvm, run, AuditOptions, Error};
use glassbox_plan::target;
use std::path::Path;
use std::time::Duration;

/// Where the server runs.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum Isolation {
    /// The namespace sandbox on this host.
    #[default]
    Namespace,
    /// The namespace sandbox inside a fresh QEMU microVM per run ([`microvm`]).
    MicroVm,
}

impl Isolation {
    /// Starts `target` in `cwd` on the audit's backend, recording into `events`. `run_for`: see
    /// [`microvm::VmPlan::run_for`] (an install: its stdin is closed from the start).
    pub(crate) fn start(
        self,
        opts: &AuditOptions,
        target: &target::Resolved,
        cwd: &Path,
        events: Box<dyn crate::EventSink>,
        plan: RunPlan,
        run_for: Option<Duration>,
    ) -> Result<Box<dyn Backend>, Error> {
        Ok(match self {
            Isolation::Namespace => {
                Box::new(run::start(target, cwd, events, true, opts.recorder, plan)?)
            }
            Isolation::MicroVm => Box::new(microvm::start(
                &microvm::VmPlan {
                    target,
                    cwd,
                    exit_grace: opts.exit_grace,
                    linger: opts.linger,
                    run_for,
                    // An install (a bounded run) is not the server: nothing to reach.
                    http_port: opts
                        .http
                        .as_ref()
                        .filter(|_| run_for.is_none())
                        .map(|h| h.port),
                },
                events,
                true,
                opts.recorder,
                plan,
            )?),
        })
    }
}
