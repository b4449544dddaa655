//! The argument groups `audit` and `batch` share: how each server is run and bounded, declared
//! once and applied to [`AuditOptions`] once.

use crate::{ExploreLevel, Isolation, Network, Recorder, Responder, Surface};
use anyhow::Result;
use glassbox_audit::AuditOptions;
use glassbox_sandbox::limits::{self, Limits};
use std::path::PathBuf;
use std::time::Duration;

/// Resource limits of each sandbox.
#[derive(clap::Args, Clone, Debug)]
pub(crate) struct LimitArgs {
    /// Memory of each sandbox: every process and the tmpfs pages it wrote (512M, 1G...).
    #[arg(long, value_name = "SIZE", default_value = "1G")]
    memory: String,
    /// Processes and threads in each sandbox, its pid 1 included.
    #[arg(long, value_name = "N", default_value_t = 512)]
    pids: u64,
    /// CPUs' worth of time for each sandbox (0.5, 1, 2...).
    #[arg(long, value_name = "N", default_value_t = 1.0)]
    cpus: f64,
    /// Size of each writable tmpfs of a sandbox (/tmp, /run, /var, /dev/shm, home), and of
    /// the largest file it may write.
    #[arg(long, value_name = "SIZE", default_value = "512M")]
    disk: String,
}

impl LimitArgs {
    /// The limits, checked.
    pub(crate) fn limits(&self) -> Result<Limits> {
        let size = |flag: &str, v: &str| {
            limits::parse_size(v).map_err(|e| anyhow::anyhow!("--{flag}: {e}"))
        };
        let l = Limits {
            memory: Some(size("memory", &self.memory)?),
            pids: Some(self.pids),
            cpus: Some(self.cpus),
            disk: size("disk", &self.disk)?,
        };
        l.validate().map_err(|e| anyhow::anyhow!("{e}"))?;
        Ok(l)
    }
}

/// How each server is run: what it sees, its bounds, its network runs, how it is recorded and
/// explored, where it runs.
#[derive(clap::Args, Clone, Debug)]
pub(crate) struct RunArgs {
    /// Make another host path visible to the server (to every server of a batch), read-only
    /// (repeatable).
    #[arg(long = "ro", value_name = "PATH")]
    read_only: Vec<PathBuf>,
    /// Seconds to wait for each answer.
    #[arg(long, value_name = "SECS", default_value_t = 20)]
    request_timeout: u64,
    /// Bound on each MCP session, in seconds.
    #[arg(long, value_name = "SECS", default_value_t = 300)]
    session_timeout: u64,
    /// Seconds the install of a package may take.
    #[arg(long, value_name = "SECS", default_value_t = 600)]
    install_timeout: u64,
    /// An environment variable for a package's installer alone, never its server:
    /// NAME=VALUE (repeatable; `PUPPETEER_SKIP_DOWNLOAD=1`). Recorded in the manifest.
    #[arg(long = "install-env", value_name = "NAME=VALUE")]
    install_env: Vec<String>,
    /// Which runs to make: with DNS and TCP captured at glassbox's edge, with every packet
    /// dropped, or both (one after the other). No packet ever leaves the machine.
    #[arg(long, value_enum, default_value_t = Network::Both)]
    network: Network,
    /// A destination the server may reach without it counting as unexplained egress:
    /// HOST or HOST:PORT (repeatable).
    #[arg(long = "allow-host", value_name = "HOST[:PORT]")]
    allow_host: Vec<String>,
    /// What the network edge answers: `ok` terminates TLS with the audit's own CA (which
    /// the sandbox trusts) and answers every HTTP request 200, so the server goes on and
    /// what it sends is read; `refuse` closes TLS after its ClientHello and answers 503
    /// (what TLS carried is then unread, never reported clean).
    #[arg(long, value_enum, default_value_t = Responder::Ok)]
    responder: Responder,
    /// How many calls each tool gets, from its plan (all properties, required only, each
    /// boolean the other way, each enum value, each oneOf/anyOf option...): `single` one,
    /// `quick` up to 4 (at most 10 s more), `thorough` up to 16 (at most 120 s more). A
    /// call whose arguments were rejected is tried once more with the next set.
    #[arg(long, value_enum, default_value_t = ExploreLevel::Quick)]
    explore: ExploreLevel,
    /// What of the MCP surface is exercised: `all` reads every resource, expands every
    /// resource template and gets every prompt besides calling the tools (each within the
    /// `--explore` bound); `tools` calls the tools only (and the report says what was left).
    #[arg(long, value_enum, default_value_t = Surface::All)]
    surface: Surface,
    /// How to record the open and stat families.
    #[arg(long, value_enum, default_value_t = Recorder::Auto)]
    pub(crate) recorder: Recorder,
    /// Where the server runs: on this kernel (namespaces), or in a fresh QEMU microVM per
    /// run with the sandbox and recorder in the guest (an --http or --sse server is
    /// reached through a TCP relay to the guest). A remote server (a configuration's URL)
    /// runs elsewhere and is spoken to from this host under either.
    #[arg(long, value_enum, default_value_t = Isolation::Namespace)]
    isolation: Isolation,
    /// Do not run the selftest when this build has none recorded (unproven checks are
    /// then reported `unverified`).
    #[arg(long)]
    no_selftest: bool,
    /// Do not make again the calls that read a planted secret and then sent bytes the edge
    /// read but could not recognise it in (dual execution: with fresh secrets, then the same
    /// ones, to see whether what they sent changes with the secret). Their secrets' fate is
    /// then reported not known.
    #[arg(long)]
    no_dual_execution: bool,
    /// Do not run a package given with no arguments and no environment as its own README (or
    /// server.json) configures it (its documented arguments, its variables with secrets as
    /// canaries); it is then started with nothing.
    #[arg(long)]
    no_readme_config: bool,
    /// The trigger run, after the others: the session again with the server's world changed,
    /// so that what waits for a date, for days of uptime or for a CI runner shows (the
    /// `trigger-only` check lists what only it did). `time` moves the server's clocks
    /// forward (`--clock-offset`), `ci` gives it a CI runner's environment (GitHub Actions'
    /// variables, a planted GITHUB_TOKEN), `developer` an interactive developer machine's;
    /// `all` is time and ci; `none` makes no such run. Default: `all`, except with
    /// `--explore single` (`none`).
    #[arg(long, value_name = "none|all|time,ci,developer")]
    triggers: Option<String>,
    /// Days the trigger run moves the server's clocks forward (1 to 3650).
    #[arg(long, value_name = "DAYS", default_value_t = glassbox_audit::triggers::DEFAULT_CLOCK_DAYS,
          value_parser = clap::value_parser!(u32).range(1..=3650))]
    clock_offset: u32,
    #[command(flatten)]
    pub(crate) limits: LimitArgs,
}

impl RunArgs {
    /// Sets what these arguments say in `opts` (all but the proofs: [`RunArgs::proofs`]).
    pub(crate) fn apply(&self, opts: &mut AuditOptions) -> Result<()> {
        opts.metadata_probe = glassbox_audit::metadata_probe_default()?;
        opts.recorder = self.recorder.into();
        opts.network = self.network.into();
        opts.allow_hosts = self.allow_host.clone();
        opts.responder = self.responder.into();
        opts.install_timeout = Duration::from_secs(self.install_timeout.max(1));
        opts.install_env = crate::install_env(&self.install_env)?;
        opts.limits = self.limits.limits()?;
        opts.isolation = self.isolation.into();
        opts.extra_ro = crate::absolute(self.read_only.clone())?;
        opts.session.request_timeout = Duration::from_secs(self.request_timeout.max(1));
        opts.session.session_timeout = Duration::from_secs(self.session_timeout.max(1));
        opts.session.explore = self.explore.into();
        opts.session.surface = self.surface == Surface::All;
        opts.dual = !self.no_dual_execution;
        opts.readme_config = !self.no_readme_config;
        let default = match self.explore {
            ExploreLevel::Single => "none",
            _ => "all",
        };
        opts.triggers = glassbox_audit::triggers::parse(
            self.triggers.as_deref().unwrap_or(default),
            self.clock_offset,
        )
        .map_err(anyhow::Error::msg)?;
        Ok(())
    }

    /// Makes sure this build has a selftest record for the chosen isolation and recorder,
    /// running the selftest first (`jobs` at a time) when there is none and `--no-selftest`
    /// was not given. Each audit then reads the record of the recorder it ran with.
    pub(crate) fn ensure_selftest(&self, jobs: usize, quiet: bool) -> Result<()> {
        crate::selftest_unless_recorded(
            self.isolation.into(),
            self.recorder,
            jobs,
            quiet,
            self.no_selftest,
        )
    }
}
