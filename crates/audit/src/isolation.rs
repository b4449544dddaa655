//! Where the server runs ([`Isolation`]) and what follows from it: the backend a run starts
//! on ([`Isolation::start`]), and every other fact that depends on the isolation (its name,
//! its selftest record, the jobs and timeouts it can bear, how its secrets are made), each a
//! method here rather than a `match` where it is used.

use crate::backend::Backend;
use crate::recording::{Launch, RecorderChoice, RunPlan};
use crate::secrets::Secrets;
use crate::{microvm, run, Error};
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
    /// Its name in records, messages and on the command line (`--isolation`): `namespace`,
    /// `microvm`.
    pub fn name(self) -> &'static str {
        match self {
            Isolation::Namespace => "namespace",
            Isolation::MicroVm => "microvm",
        }
    }

    /// The command-line option that asks for it (`None`: the default, asked by nothing).
    pub fn option(self) -> Option<&'static str> {
        match self {
            Isolation::Namespace => None,
            Isolation::MicroVm => Some("--isolation microvm"),
        }
    }

    /// The isolation a run was recorded under, from its manifest (a microVM run records its
    /// VM there).
    pub fn of(manifest: &glassbox_model::Manifest) -> Isolation {
        match manifest.vm {
            Some(_) => Isolation::MicroVm,
            None => Isolation::Namespace,
        }
    }

    /// Audits (a selftest's controls) run at a time when the user did not say: `jobs` in
    /// namespaces, one under microVM (emulated guests on the same cores starve each other, and
    /// controls with a time budget then miss).
    pub fn default_jobs(self, jobs: usize) -> usize {
        match self {
            Isolation::Namespace => jobs,
            Isolation::MicroVm => 1,
        }
    }

    /// The timeout of each request the selftest makes of a control: 5 s on this kernel; 15 s
    /// in a microVM, where an emulated guest (TCG) runs an interpreter several times slower (a
    /// Python server that imports `requests` may take more than 5 s to answer `initialize`
    /// there: the microVM suite lost https-post-docker-auth-requests so once).
    pub fn selftest_request_timeout(self) -> Duration {
        match self {
            Isolation::Namespace => Duration::from_secs(5),
            Isolation::MicroVm => Duration::from_secs(15),
        }
    }

    /// The file name of the selftest record of build `build` under this isolation with the
    /// recorder `recorder` (a [`recorder_key`]).
    ///
    /// [`recorder_key`]: crate::selftest::recorder_key
    pub fn selftest_record(self, build: &str, recorder: &str) -> String {
        match self {
            Isolation::Namespace => format!("{build}-{recorder}.json"),
            Isolation::MicroVm => format!("{build}-microvm-{recorder}.json"),
        }
    }

    /// The recorder `choice` gives a run under this isolation here, as a [`recorder_key`]
    /// (`None`: only the run knows, as in a microVM guest, which decides `auto` for itself).
    ///
    /// [`recorder_key`]: crate::selftest::recorder_key
    pub fn expected_recorder(self, choice: RecorderChoice) -> Option<&'static str> {
        match (choice, self) {
            (RecorderChoice::Notify, _) => Some("notify"),
            (RecorderChoice::Ebpf, _) => Some("ebpf"),
            (RecorderChoice::Auto, Isolation::MicroVm) => None,
            (RecorderChoice::Auto, Isolation::Namespace) => {
                Some(match glassbox_trace::file_channel_available() {
                    Ok(()) => "ebpf",
                    Err(_) => "notify",
                })
            }
        }
    }

    /// Whether a trigger run's moved date reaches every program: in a microVM the guest's own
    /// wall clock is set forward; on this kernel the sandbox's time namespace moves the
    /// monotonic clocks, and the wall clock moves for dynamically linked programs only.
    pub fn moves_every_wall_clock(self) -> bool {
        match self {
            Isolation::Namespace => false,
            Isolation::MicroVm => true,
        }
    }

    /// Fresh planted secrets for the runs of one audit (or one trace). On this kernel the RSA
    /// key is made when first opened (glassbox holds that open); a guest's secrets are made
    /// here, whole: the host's checks must know their values, and the first open happens in
    /// the guest.
    pub(crate) fn secrets(self) -> Result<Secrets, Error> {
        match self {
            Isolation::Namespace => Secrets::fresh(),
            Isolation::MicroVm => Secrets::fresh_eager(),
        }
    }

    /// Starts the run `launch` on this isolation's backend, recording into `events`: the
    /// one place that picks the backend, for an audit's runs and for `glassbox trace` alike.
    pub(crate) fn start(
        self,
        launch: &Launch<'_>,
        events: Box<dyn crate::EventSink>,
        plan: RunPlan,
    ) -> Result<Box<dyn Backend>, Error> {
        Ok(match self {
            Isolation::Namespace => Box::new(run::start(
                launch.target,
                launch.cwd,
                events,
                launch.keep,
                launch.recorder,
                plan,
            )?),
            Isolation::MicroVm => Box::new(microvm::start(launch, events, plan)?),
        })
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The facts a caller reads from the isolation, as they were before they were methods:
    /// the names records and messages use, the record files, the jobs and timeouts.
    #[test]
    fn each_isolation_says_its_own_facts() {
        let (ns, vm) = (Isolation::Namespace, Isolation::MicroVm);
        assert_eq!((ns.name(), vm.name()), ("namespace", "microvm"));
        assert_eq!(
            (ns.option(), vm.option()),
            (None, Some("--isolation microvm"))
        );
        assert_eq!(ns.selftest_record("b1", "notify"), "b1-notify.json");
        assert_eq!(vm.selftest_record("b1", "ebpf"), "b1-microvm-ebpf.json");
        assert_eq!((ns.default_jobs(4), vm.default_jobs(4)), (4, 1));
        assert_eq!(ns.selftest_request_timeout(), Duration::from_secs(5));
        assert_eq!(vm.selftest_request_timeout(), Duration::from_secs(15));
        assert!(!ns.moves_every_wall_clock() && vm.moves_every_wall_clock());
        let mut m = glassbox_model::Manifest::default();
        assert_eq!(Isolation::of(&m), ns);
        m.vm = Some(Default::default());
        assert_eq!(Isolation::of(&m), vm);
        // A guest's secrets are whole from the start; this kernel's RSA key may wait for its
        // first open.
        assert!(vm.secrets().unwrap().lazy_rsa.is_none());
    }
}
