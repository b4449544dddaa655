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
#![deny(missing_docs)]

mod backend;
mod canary;
pub mod coverage;
mod dual;
mod isolation;
mod lazykey;
mod left;
pub mod microvm;
pub mod recheck;
mod recording;
mod run;
mod secrets;
pub mod selftest;
mod start;
pub mod triggers;
mod usage;

pub use isolation::Isolation;
pub use recording::{EventSink, RecorderChoice};

use glassbox_model::bundle;

use glassbox_model::{
    AuditReport, CheckVersion, Evidence, Manifest, NetworkMode, NetworkRun, NetworkSettings, Phase,
    PhaseTiming, RecorderSettings, ServerExit, SessionSummary, Target, ToolSummary,
    TranscriptEntry, GLASSBOX_VERSION,
};
use glassbox_plan::{config, explain, install, target};
use std::ffi::OsString;
use std::io::Read;
use std::path::{Path, PathBuf};
use std::sync::{Arc, Mutex};
use std::time::Duration;

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
    /// A package could not be resolved or installed.
    #[error("{0}")]
    Install(String),
    /// The microVM (`--isolation microvm`) could not run the server.
    #[error("{0}")]
    Vm(String),
    /// The microVM's guest hung or died before the server ran in it (no boot, no start of
    /// the sandbox in time): the run observed nothing, and the audit is inconclusive.
    #[error("{0}")]
    GuestLost(String),
    /// What to audit could not be decided (a target, a configuration, a package).
    #[error(transparent)]
    Plan(#[from] glassbox_plan::Error),
    /// Anything else.
    #[error("internal error: {0}")]
    Internal(String),
}

/// How to run an audit.
#[derive(Clone, Debug)]
pub struct AuditOptions {
    /// The server command.
    pub command: Vec<OsString>,
    /// The directory the server runs in (visible read-only).
    pub cwd: PathBuf,
    /// More host paths visible read-only.
    pub extra_ro: Vec<PathBuf>,
    /// The evidence bundle's directory; `None`: `./glassbox-evidence/<run-id>/`.
    pub evidence_dir: Option<PathBuf>,
    /// Session bounds.
    pub session: glassbox_mcp::SessionConfig,
    /// How long the server may take to exit after its stdin is closed.
    pub exit_grace: Duration,
    /// How long processes the server left behind (daemons) are still recorded after it
    /// exited, before the sandbox is killed.
    pub linger: Duration,
    /// How the open and stat families are recorded.
    pub recorder: RecorderChoice,
    /// Which checks are proven; `None`: this build's selftest record.
    pub proofs: Option<glassbox_checks::Proofs>,
    /// Which network runs to make.
    pub network: NetworkChoice,
    /// Destinations the user allows (`HOST` or `HOST:PORT`).
    pub allow_hosts: Vec<String>,
    /// A package to install and audit (with what a launcher line asked: packages beside it,
    /// the program); `command` then holds the server's arguments.
    pub package: Option<install::Package>,
    /// How long the install phase may take.
    pub install_timeout: Duration,
    /// Environment variables for the installer alone (`--install-env`), never the server's.
    pub install_env: Vec<(String, String)>,
    /// The server's environment (a configuration's `env`); secret values are replaced by
    /// canaries.
    pub server_env: Vec<(String, config::EnvValue)>,
    /// What the entry's `server.json` names (its site, repository, remotes, the URLs in its
    /// variables' descriptions), recorded in `manifest.network.names` ([`explain`]).
    pub entry_names: Vec<glassbox_model::EntryName>,
    /// The server speaks MCP over HTTP on this port of its sandbox, not over stdio.
    pub http: Option<HttpServer>,
    /// Memory, processes, CPU and disk of each sandbox (the install's and every run's).
    pub limits: glassbox_sandbox::Limits,
    /// Where the server runs.
    pub isolation: Isolation,
    /// What the network edge answers.
    pub responder: ResponderChoice,
    /// The address URL parameters are given, in a call of their own, as the cloud metadata
    /// service's ([`metadata_probe_default`]): a tool that fetches it can be made to reach
    /// internal services (server-side request forgery). The packets end at glassbox's edge,
    /// which answers; nothing leaves.
    pub metadata_probe: std::net::IpAddr,
    /// Dual execution ([`dual`]; default on): a call in which a planted file was read and
    /// bytes the edge read left for a host not its service is made again with fresh and with
    /// the same secrets. Off, such a call's fate is not known (`--no-dual-execution`).
    pub dual: bool,
    /// The eBPF recorder's ring buffer in bytes (`None`: 16 MiB). Smaller loses records, and
    /// every record larger than it: the selftest's control of lost records sets it (a
    /// control's `ring:`), no audit should. The manifest's recorder mechanism says so.
    pub recorder_ring: Option<usize>,
    /// A package given with no arguments and no environment runs as its own README or
    /// `server.json` configures it ([`glassbox_plan::readme`]; default on; off for the
    /// entries of a client configuration, which are the user's own).
    pub readme_config: bool,
    /// The trigger run after the capture and denied runs: the session again with the
    /// server's world changed ([`triggers`]); [`Triggers::none`] (the default here; the
    /// command line's default is both triggers): no such run.
    pub triggers: triggers::Triggers,
}

/// The cloud metadata service's address (AWS, GCP, Azure, OpenStack alike).
pub const METADATA_ADDRESS: std::net::IpAddr =
    std::net::IpAddr::V4(std::net::Ipv4Addr::new(169, 254, 169, 254));

/// The environment variable that sets [`AuditOptions::metadata_probe`]'s default: the test
/// suite sets it (`.cargo/config.toml`) to a documentation address, because a fixture may
/// target only those, and the selftest always uses [`METADATA_STAND_IN`].
pub const METADATA_PROBE_VAR: &str = "GLASSBOX_METADATA_PROBE";

/// The documentation address (RFC 5737) that stands in for the metadata address wherever a
/// fixture is run.
pub const METADATA_STAND_IN: std::net::IpAddr =
    std::net::IpAddr::V4(std::net::Ipv4Addr::new(192, 0, 2, 254));

/// [`METADATA_PROBE_VAR`]'s address when it is set (an IP address), else
/// [`METADATA_ADDRESS`].
///
/// # Errors
/// The variable is set to something other than an IP address.
pub fn metadata_probe_default() -> Result<std::net::IpAddr, Error> {
    match std::env::var_os(METADATA_PROBE_VAR) {
        None => Ok(METADATA_ADDRESS),
        Some(v) => v
            .to_str()
            .and_then(|s| s.trim().parse().ok())
            .ok_or_else(|| {
                Error::Usage(format!("{METADATA_PROBE_VAR} is {v:?}, not an IP address"))
            }),
    }
}

/// What the network edge answers (`--responder`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum ResponderChoice {
    /// TLS terminated with the audit's own certificate authority (which the sandbox trusts),
    /// every HTTP request read in full and answered `200` (`{}` for an API call): the
    /// network is simulated, so a server goes on past its first request.
    #[default]
    Ok,
    /// The edge before it answered: TLS closed after the ClientHello, HTTP answered `503`;
    /// what TLS carried is then unread (and no check says `pass` over it).
    Refuse,
}

impl ResponderChoice {
    /// `ok` or `refuse`, as the manifest records it.
    pub fn name(self) -> &'static str {
        match self {
            ResponderChoice::Ok => "ok",
            ResponderChoice::Refuse => "refuse",
        }
    }
}

/// Which runs an audit makes: each mode is a full run of the server.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum NetworkChoice {
    /// Capture only.
    Capture,
    /// Denied only.
    Denied,
    /// Capture, then denied.
    #[default]
    Both,
}

impl NetworkChoice {
    /// The modes, in run order.
    pub fn modes(self) -> &'static [NetworkMode] {
        match self {
            NetworkChoice::Capture => &[NetworkMode::Capture],
            NetworkChoice::Denied => &[NetworkMode::Denied],
            NetworkChoice::Both => &[NetworkMode::Capture, NetworkMode::Denied],
        }
    }
}

impl AuditOptions {
    /// Whether the audit makes a trigger run: triggers asked for, and a capture run to
    /// compare it with.
    pub fn trigger_run(&self) -> bool {
        !self.triggers.is_none() && self.network.modes().contains(&NetworkMode::Capture)
    }

    /// These options for one configured server: how it is launched (a package and the
    /// server's arguments, a command, a remote URL), its environment (secrets replaced by
    /// canaries at the audit) and what its entry names.
    pub fn for_entry(
        &self,
        launch: &config::Launch,
        env: &[(String, config::EnvValue)],
        names: &[glassbox_model::EntryName],
    ) -> Planned {
        let mut o = self.clone();
        o.server_env = env.to_vec();
        o.entry_names = names.to_vec();
        match launch {
            config::Launch::Package { package, args } => {
                o.package = Some(package.clone());
                o.command = config::os_args(args);
            }
            config::Launch::Command(argv) => {
                o.package = None;
                o.command = config::os_args(argv);
            }
            config::Launch::Remote { url, transport } => {
                return Planned::Remote {
                    url: url.clone(),
                    sse: transport == "sse",
                    opts: o,
                }
            }
            config::Launch::Unsupported(why) => return Planned::NotAudited(why.clone()),
        }
        Planned::Local(o)
    }

    /// Options with the defaults for `command` run from `cwd`.
    pub fn new(command: Vec<OsString>, cwd: PathBuf) -> AuditOptions {
        AuditOptions {
            command,
            cwd,
            extra_ro: Vec::new(),
            evidence_dir: None,
            session: glassbox_mcp::SessionConfig::default(),
            exit_grace: Duration::from_secs(3),
            linger: Duration::from_secs(2),
            recorder: RecorderChoice::Auto,
            proofs: None,
            network: NetworkChoice::Both,
            allow_hosts: Vec::new(),
            package: None,
            install_timeout: Duration::from_secs(600),
            install_env: Vec::new(),
            server_env: Vec::new(),
            entry_names: Vec::new(),
            http: None,
            limits: glassbox_sandbox::Limits::default(),
            isolation: Isolation::Namespace,
            responder: ResponderChoice::Ok,
            metadata_probe: metadata_probe_default().unwrap_or(METADATA_STAND_IN),
            dual: true,
            recorder_ring: None,
            readme_config: true,
            triggers: triggers::Triggers::none(),
        }
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

/// A run id: UTC time and 6 random hex digits, sortable and unique.
fn run_id() -> String {
    let now = humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string();
    let compact: String = now.chars().filter(|c| c.is_ascii_alphanumeric()).collect();
    let rnd = glassbox_sandbox::honeytokens::random_bytes(3).unwrap_or_default();
    let hex: String = rnd.iter().map(|b| format!("{b:02x}")).collect();
    format!("{compact}-{hex}")
}

fn kernel() -> String {
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

struct Hooks<'a> {
    clock: Arc<glassbox_trace::Clock>,
    transcript: Mutex<bundle::Transcript>,
    timings: Mutex<Vec<PhaseTiming>>,
    progress: &'a dyn Progress,
    /// The sandbox's usage, read as each phase starts ([`usage::Log`]).
    usage: Option<usage::Log>,
}

impl Hooks<'_> {
    /// Starts the timeline at `phase` without telling the progress display.
    fn set_phase_quietly(&self, phase: Phase) {
        if let Some(u) = &self.usage {
            u.phase(&phase);
        }
        let now = self.clock.now_ns();
        if let Ok(mut t) = self.timings.lock() {
            t.push(PhaseTiming {
                phase: phase.clone(),
                start_ns: now,
                end_ns: now,
            });
        }
        self.clock.set_phase(phase);
    }
}

impl glassbox_mcp::SessionHooks for Hooks<'_> {
    fn set_phase(&self, phase: Phase) {
        if let Some(u) = &self.usage {
            u.phase(&phase);
        }
        let now = self.clock.now_ns();
        if let Ok(mut t) = self.timings.lock() {
            if let Some(last) = t.last_mut() {
                last.end_ns = now;
            }
            t.push(PhaseTiming {
                phase: phase.clone(),
                start_ns: now,
                end_ns: now,
            });
        }
        self.progress.phase(&phase);
        self.clock.set_phase(phase);
    }

    fn transcript(&self, entry: TranscriptEntry) {
        if let Ok(mut t) = self.transcript.lock() {
            t.push(entry);
        }
    }

    fn now_ns(&self) -> u64 {
        self.clock.now_ns()
    }
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

/// An audit under way, phase by phase ([`audit`]): what each phase adds to, written to the
/// bundle as it is known.
struct Pipeline<'a> {
    /// The options, with the input marker and (after [`Pipeline::plant`]) the plans' probes.
    opts: AuditOptions,
    progress: &'a dyn Progress,
    run_id: String,
    dir: PathBuf,
    bundle: bundle::Writer,
    manifest: Manifest,
    /// The audit's own certificate authority, when the edge answers.
    answer: Option<glassbox_net::Authority>,
    /// Its certificate, which the sandbox trusts.
    trust: Option<recording::CaCertificate>,
    events: recording::SharedSink,
    clock: Arc<glassbox_trace::Clock>,
    secrets: secrets::Secrets,
    /// The bait variables ([`secrets::BAIT_ENV`]) and their planted values.
    bait: Vec<(String, String)>,
    /// The trigger run's variables ([`triggers::Machine`]), its planted tokens included.
    trigger_env: Vec<(String, String)>,
    all_events: Vec<glassbox_model::Event>,
    flows: Vec<glassbox_model::Flow>,
    limits_reached: Vec<String>,
    /// What each run's phases did to the sandbox's bounds, and what outlived each run.
    usage: Vec<glassbox_model::PhaseUsage>,
    outlived: Vec<String>,
    /// What each run left in the sandbox's writable places ([`left`]), and where its list
    /// stopped short.
    left: Vec<glassbox_model::LeftFile>,
    left_cut: Vec<String>,
    transcript: Vec<TranscriptEntry>,
    /// Where the server runs: the working folder, or its package's install folder.
    server_cwd: PathBuf,
    installed_in: Option<PathBuf>,
}

impl<'a> Pipeline<'a> {
    /// Resolves what to run (a command must resolve before anything is written, and so must a
    /// package's versions: one that does not exist is one line, with no bundle left behind;
    /// its program resolves after its install), creates the bundle and writes the first
    /// manifest, makes the audit's CA and the secrets.
    #[allow(clippy::type_complexity)]
    fn prepare(
        opts: &AuditOptions,
        progress: &'a dyn Progress,
    ) -> Result<
        (
            Pipeline<'a>,
            Option<target::Resolved>,
            Option<install::Exact>,
        ),
        Error,
    > {
        // One marker for the generated arguments of every run: where it shows up, the server
        // took the user's input there.
        let mut opts = opts.clone();
        if opts.session.input_marker.is_none() {
            opts.session.input_marker = Some(secrets::input_marker()?);
        }
        let (target, exact) = match &opts.package {
            None => {
                target::check_working_folder(&opts.cwd)?;
                (Some(target::resolve(&opts.command, &opts.cwd)?), None)
            }
            Some(p) => (None, Some(p.exact_versions(&opts.cwd)?)),
        };
        let run_id = run_id();
        let dir = opts
            .evidence_dir
            .clone()
            .unwrap_or_else(|| opts.cwd.join("glassbox-evidence").join(&run_id));
        let bundle = bundle::Writer::create(&dir)?;
        let mut channels = vec!["syscalls".to_string(), "mcp-transcript".to_string()];
        channels.push("packet-edge".into());
        if opts.network.modes().contains(&NetworkMode::Denied) {
            channels.push("network-denied-run".into());
        }
        if opts.trigger_run() {
            channels.push(triggers::CHANNEL.into());
        }
        let mut manifest = new_manifest(
            &run_id,
            &opts,
            target
                .as_ref()
                .map(|t| t.program.to_string_lossy().into_owned())
                .unwrap_or_default(),
            channels,
        );
        // The audit's own certificate authority: the sandbox trusts it, the edge signs with
        // it; its key never leaves this process (the manifest records the certificate).
        let answer = match opts.responder {
            ResponderChoice::Ok => {
                let a = glassbox_net::Authority::fresh()
                    .map_err(|e| Error::Internal(format!("cannot make the audit's CA: {e}")))?;
                manifest.network.tls_authority = Some(a.manifest());
                Some(a)
            }
            ResponderChoice::Refuse => None,
        };
        manifest.network.responder = opts.responder.name().into();
        let trust = answer.as_ref().map(recording::CaCertificate::of);
        bundle.write_manifest(&manifest)?;
        let events = recording::SharedSink::new(bundle.events()?);
        // A guest's secrets are made here, whole: the host's checks must know their values.
        let secrets = match opts.isolation {
            Isolation::Namespace => secrets::Secrets::fresh()?,
            Isolation::MicroVm => secrets::Secrets::fresh_eager()?,
        };
        let server_cwd = opts.cwd.clone();
        let audit = Pipeline {
            opts,
            progress,
            run_id,
            dir,
            bundle,
            manifest,
            answer,
            trust,
            events,
            clock: Arc::new(glassbox_trace::Clock::new()),
            secrets,
            bait: Vec::new(),
            trigger_env: Vec::new(),
            all_events: Vec::new(),
            flows: Vec::new(),
            limits_reached: Vec::new(),
            usage: Vec::new(),
            outlived: Vec::new(),
            left: Vec::new(),
            left_cut: Vec::new(),
            transcript: Vec::new(),
            server_cwd,
            installed_in: None,
        };
        Ok((audit, target, exact))
    }

    /// Plants what the secrets do not hold yet: the CA in the kubeconfig, bait in the
    /// environment ([`secrets::BAIT_ENV`]: planted secrets like the files, for the install and
    /// every run, unless the configuration sets a variable of that name itself), and the
    /// plans' probes (files outside the workspace that are planted secrets, the canary Docker
    /// socket), which the path and socket parameters name in calls of their own.
    fn plant(&mut self) -> Result<(), Error> {
        if let Some(ca) = &self.trust {
            self.secrets.trust_in_kubeconfig(&ca.pem);
        }
        for &(name, len) in secrets::BAIT_ENV {
            if self.opts.server_env.iter().any(|(n, _)| n == name) {
                continue;
            }
            let (value, token) = secrets::bait_env(name, "", len)?;
            self.secrets.tokens.push(token);
            self.bait.push((name.to_string(), value));
        }
        if let Some(machine) = self.opts.triggers.machine {
            self.trigger_env = machine
                .variables()
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            if machine == triggers::Machine::Ci {
                for &(name, prefix, len) in triggers::CI_TOKENS {
                    let (value, token) = secrets::bait_env(name, prefix, len)?;
                    self.secrets.tokens.push(token);
                    self.trigger_env.push((name.to_string(), value));
                }
            }
        }
        self.opts.session.probes = probes(
            &self.secrets.tokens,
            self.opts.metadata_probe,
            &self.opts.command,
            &self.secrets.home,
        );
        Ok(())
    }

    /// Installs the package and resolves its program: the target, or why the server could
    /// not be started (a failed install, or one that has not the program asked for, is still
    /// an audit: what the install did went through the recorder and goes through the checks).
    fn install(
        &mut self,
        package: &install::Package,
        exact: install::Exact,
    ) -> Result<Result<target::Resolved, String>, Error> {
        let installed = install_phase(
            package,
            exact,
            &self.opts,
            &self.run_id,
            InstallContext {
                bundle: &self.bundle,
                events: &self.events,
                clock: &self.clock,
                secrets: &mut self.secrets,
                manifest: &mut self.manifest,
                answer: self.answer.clone(),
                bait: &self.bait,
            },
            self.progress,
        )?;
        self.all_events.extend(installed.events);
        self.limits_reached.extend(installed.limits_reached);
        self.flows.extend(installed.flows);
        if let Some(sandbox) = installed.sandbox {
            self.manifest.sandbox = sandbox;
        }
        let mut package_ref = installed.package;
        if installed.failure.is_none() {
            package_ref.readme_config = self.readme_config(package, &installed.dir);
        }
        let entry = match installed.failure {
            Some(why) => Err(format!("the install failed: {why}")),
            None => install::entry_command(package, &installed.dir, &self.opts.command)
                .map_err(|e| format!("the server could not be started: {e}")),
        };
        let (command, program) = match entry {
            Ok(found) => found,
            Err(why) => {
                self.manifest.target.package = Some(package_ref);
                return Ok(Err(why));
            }
        };
        package_ref.program = Some(program);
        // The server runs in its install folder: a package has no business with the
        // directory glassbox was started in (`--ro` makes more visible).
        let mut t = target::resolve(&command, &installed.dir)?;
        t.extra_ro.push(installed.dir.clone());
        self.installed_in = Some(installed.dir.clone());
        self.server_cwd = installed.dir.clone();
        // The server's own environment: the installer's settings are not the server's.
        let m = &mut self.manifest;
        m.target.command = command
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        m.target.program = t.program.to_string_lossy().into_owned();
        m.target.cwd = self.server_cwd.to_string_lossy().into_owned();
        m.target.package = Some(package_ref);
        self.bundle.write_manifest(&self.manifest)?;
        Ok(Ok(t))
    }

    /// The server never ran: what was recorded (the install) goes through every check, the
    /// session is not complete, the channels of the runs that did not happen are not claimed.
    fn finish_without_server(mut self, why: String) -> Result<Audit, Error> {
        let m = &mut self.manifest;
        m.sandbox.limits_reached = std::mem::take(&mut self.limits_reached);
        m.session.completed = false;
        m.session.failure = Some(why);
        m.recorder.channels.retain(|c| {
            c != "mcp-transcript" && c != "network-denied-run" && c != triggers::CHANNEL
        });
        self.finish()
    }

    /// The server's environment and paths: `--ro`, the bait variables, the browser's, the configuration's
    /// plain values as given and its secrets as fresh canaries that are planted secrets like
    /// the files (`env:NAME`); then what the entry explains.
    fn server_environment(
        &mut self,
        mut target: target::Resolved,
    ) -> Result<target::Resolved, Error> {
        target.extra_ro.extend(self.opts.extra_ro.iter().cloned());
        // The bait variables, and where the host has a Chromium, the variables that point
        // browser drivers at its launcher: a value the target sets stays.
        let browser = glassbox_sandbox::browser::environment();
        for (name, value) in self.bait.iter().chain(&browser) {
            if !target.env.iter().any(|(k, _)| k == name) {
                target.env.push((name.clone(), value.clone()));
            }
        }
        for (name, value) in self.opts.server_env.clone() {
            let value = match value {
                config::EnvValue::Plain(v) => v,
                config::EnvValue::Secret { hosts } => self.declared_canary(&name, hosts)?,
            };
            set_env(&mut target.env, name, value);
        }
        self.manifest.network.names = entry_names(&self.opts, self.installed_in.as_deref());
        Ok(target)
    }

    /// A fresh canary for the declared secret variable `name`, planted (`env:NAME`, followed
    /// like the files), which may go to `hosts`.
    fn declared_canary(&mut self, name: &str, hosts: Vec<String>) -> Result<String, Error> {
        let canary = secrets::env_canary()?;
        self.secrets.tokens.push(glassbox_model::Honeytoken {
            path: format!("env:{name}"),
            kind: "declared-secret".into(),
            secrets: vec![canary.clone()],
            hosts,
            random: vec![canary["gbx_".len()..].to_string()],
            ..Default::default()
        });
        Ok(canary)
    }

    /// A trigger run ([`triggers`]): the session again with the server's world changed as
    /// `triggers` says; the first one also records what the moved clock could not reach.
    fn trigger_run(
        &mut self,
        target: &target::Resolved,
        triggers: triggers::Triggers,
    ) -> Result<(), Error> {
        let first = !self
            .manifest
            .network
            .runs
            .iter()
            .any(|r| r.mode == NetworkMode::Trigger);
        if !first {
            self.progress.repeat(&format!(
                "the trigger run again, with {}: which change brought out what it did",
                triggers.record(Vec::new()).describe()
            ));
        }
        let mut changed = target.clone();
        for (name, value) in self.trigger_variables(&triggers) {
            set_env(&mut changed.env, name.clone(), value.clone());
        }
        let from = self.all_events.len();
        self.network_run(&changed, false, NetworkMode::Trigger, Some(&triggers))?;
        // In a microVM the guest's own wall clock was set forward: every program's moved.
        let unmoved = match (self.opts.isolation, triggers.clock_days, first) {
            (Isolation::Namespace, Some(_), true) => {
                triggers::unmoved(&self.all_events[from..], &self.secrets.home)
            }
            _ => Vec::new(),
        };
        if let Some(t) = self
            .manifest
            .network
            .runs
            .last_mut()
            .and_then(|r| r.trigger.as_mut())
        {
            t.limits = unmoved;
        }
        Ok(())
    }

    /// The variables a trigger run sets: its machine's ([`Pipeline::trigger_env`]), none when
    /// it changes the clock alone.
    fn trigger_variables(&self, t: &triggers::Triggers) -> &[(String, String)] {
        match t.machine {
            Some(_) => &self.trigger_env,
            None => &[],
        }
    }

    /// One run of the server (`main`: the first, the capture run), merged into the manifest,
    /// the events and the flows, and written.
    fn network_run(
        &mut self,
        target: &target::Resolved,
        main: bool,
        mode: NetworkMode,
        triggers: Option<&triggers::Triggers>,
    ) -> Result<(), Error> {
        self.progress.network_run(mode);
        // A second run of a mode (a trigger run made again) has files of its own.
        let before = self
            .manifest
            .network
            .runs
            .iter()
            .filter(|r| r.mode == mode)
            .count();
        let suffix = match (main, before) {
            (true, _) => String::new(),
            (false, 0) => format!("-{}", mode.name()),
            (false, n) => format!("-{}-{}", mode.name(), n + 1),
        };
        let first_event_id = self.all_events.len() as u64 + 1;
        // The client's one root: the folder the plans give paths in, else the server's own.
        let root = match &self.opts.session.probes.workspace {
            Some(w) => w.clone(),
            None => self.server_cwd.to_string_lossy().into_owned(),
        };
        self.opts.session.roots = vec![root];
        let (manifest, bundle) = (&mut self.manifest, &self.bundle);
        let mut run = one_run(
            target,
            &self.server_cwd,
            &self.opts,
            RunFiles {
                bundle,
                suffix: &suffix,
                events: Box::new(self.events.clone()),
            },
            recording::RunPlan {
                secrets: Some({
                    // A key made in an earlier run is planted as is.
                    self.secrets.settle_rsa();
                    self.secrets.clone()
                }),
                clock: self.clock.clone(),
                first_event_id,
                network: Some(mode),
                relay: None,
                wire: None,
                limits: self.opts.limits.clone(),
                answer: self.answer.clone(),
                trust: self.trust.clone(),
                ring: self.opts.recorder_ring,
                marker: self.opts.session.input_marker.clone(),
                clock_shift: triggers.and_then(|t| t.shift()),
            },
            self.progress,
            &mut |settings, mechanism| {
                // What is known once the server runs goes to disk at once: a glassbox killed
                // mid-session leaves a manifest that says how the sandbox was set up.
                if main {
                    manifest.sandbox = settings.clone();
                    manifest.recorder.mechanism = mechanism.to_string();
                    bundle.write_manifest(manifest)?;
                }
                Ok(())
            },
        )?;
        // What the server presented, hashed, for comparisons across audits.
        let presented = glassbox_checks::tool_definition_drift::hashes(&run.transcript);
        run.session.tool_hashes = presented.tools;
        run.session.instructions_hash = presented.instructions;
        // The canaries given to elicitations are followed like planted secrets (the manifest
        // takes its honeytokens from the secrets when the bundle is finished).
        for given in &run.session.elicited {
            let tokens = &mut self.secrets.tokens;
            if tokens
                .iter()
                .flat_map(|h| &h.secrets)
                .any(|s| *s == given.value)
            {
                continue;
            }
            tokens.push(glassbox_model::Honeytoken {
                path: format!("elicited:{}:{}", given.phase, given.field),
                kind: "elicited-secret".into(),
                secrets: vec![given.value.clone()],
                random: vec![given.value.clone()],
                ..Default::default()
            });
        }
        if let Some(e) = run.recording.write_error {
            return Err(Error::Evidence {
                path: self.dir.join(bundle::EVENTS),
                source: e,
            });
        }
        let run_flows = run.recording.edge.flows;
        let end_event = first_event_id + run.recording.events.len() as u64;
        let trigger = triggers.map(|t| {
            t.record(
                self.trigger_variables(t)
                    .iter()
                    .map(|(k, _)| k.clone())
                    .collect(),
            )
        });
        let manifest = &mut self.manifest;
        let mut isolation = run.isolation;
        if let Some(e) = &run.recording.edge.error {
            // The edge did not see the whole run: its channel cannot back a claim.
            manifest.recorder.channels.retain(|c| c != "packet-edge");
            isolation.push(format!("FAILED: {e}"));
        }
        manifest.network.runs.push(NetworkRun {
            mode,
            start_ns: run.start_ns,
            end_ns: run.end_ns,
            first_event: first_event_id,
            end_event,
            edge: run.settings.network.clone(),
            isolation_verified: !isolation.is_empty()
                && isolation.iter().all(|c| c.starts_with("ok")),
            isolation,
            counters: run.recording.edge.counters,
            syscalls_without_flow: Vec::new(),
            session: (!main).then(|| run.session.clone()),
            server_exit: (!main).then(|| run.server_exit.clone()),
            allow: Vec::new(),
            trigger,
        });
        manifest.timings.extend(run.timings);
        if let Some(vm) = run.vm {
            match &mut manifest.vm {
                Some(m) => m.merge(vm),
                None => manifest.vm = Some(vm),
            }
        }
        let st = &run.recording.stats;
        manifest
            .recorder
            .add_lost(st.lost, st.lost_files, &st.lost_why);
        if let Some(f) = &run.recording.stats.failure {
            let what = format!("{} run: {f}", mode.name());
            manifest.recorder.failure = Some(match manifest.recorder.failure.take() {
                Some(earlier) => format!("{earlier}; {what}"),
                None => what,
            });
        }
        for s in &run.recording.stats.syscalls {
            if !manifest.recorder.syscalls.contains(s) {
                manifest.recorder.syscalls.push(s.clone());
            }
        }
        // A server started again (`start.rs`) makes the main run more than once: what it
        // observes and not is said once.
        let rec = &mut manifest.recorder;
        match &run.ground_truth {
            None if main => say_once(&mut rec.channels, "honeytoken-ground-truth".into()),
            None => {}
            Some(why) => say_once(
                &mut rec.unobserved,
                format!("honeytoken-ground-truth ({} run): {why}", mode.name()),
            ),
        }
        if main {
            manifest.sandbox = run.settings;
            manifest.recorder.mechanism = run.mechanism;
            manifest.network.canary_sockets = run.canary_sockets;
            manifest.server_exit = Some(run.server_exit);
            manifest.session = run.session;
            self.transcript = run.transcript;
        }
        // What the sandbox said of this run, each line prefixed with the run.
        let of_run = |lines: &[String]| -> Vec<String> {
            lines
                .iter()
                .map(|r| format!("{} run: {r}", mode.name()))
                .collect()
        };
        self.limits_reached.extend(of_run(&run.limits_reached));
        manifest.sandbox.limits_reached = self.limits_reached.clone();
        match run.usage {
            Some(u) => {
                if main {
                    say_once(&mut manifest.recorder.channels, usage::CHANNEL.into());
                }
                self.usage.extend(u.into_iter().map(|mut p| {
                    p.mode = mode;
                    p
                }));
            }
            None if main => say_once(
                &mut manifest.recorder.unobserved,
                format!(
                    "{}: this backend does not read the sandbox's usage while it runs",
                    usage::CHANNEL
                ),
            ),
            None => {}
        }
        self.outlived.extend(of_run(&run.outlived));
        // A run whose server started the browser glassbox supplies says what that browser
        // keeps from the record.
        let launched = run.recording.events.iter().any(|e| {
            matches!(&e.kind, glassbox_model::EventKind::Exec { path, .. }
                if path.as_slice() == glassbox_sandbox::browser::LAUNCHER.as_bytes())
        });
        if launched {
            say_once(
                &mut manifest.recorder.unobserved,
                glassbox_sandbox::browser::blind_spot(),
            );
        }
        match run.left {
            Some((files, cut)) => {
                if main {
                    say_once(&mut manifest.recorder.channels, left::CHANNEL.into());
                }
                self.left.extend(files.into_iter().map(|mut f| {
                    f.mode = mode;
                    f
                }));
                self.left_cut.extend(of_run(&cut));
            }
            None if main => say_once(
                &mut manifest.recorder.unobserved,
                format!(
                    "{}: this backend could not read what the run left",
                    left::CHANNEL
                ),
            ),
            None => {}
        }
        manifest.sandbox.usage = self.usage.clone();
        manifest.sandbox.outlived = self.outlived.clone();
        manifest.sandbox.left = self.left.clone();
        manifest.sandbox.left_cut = self.left_cut.clone();
        self.all_events.extend(run.recording.events);
        self.flows.extend(run_flows);
        self.bundle.write_manifest(&self.manifest)?;
        Ok(())
    }

    /// Dual execution ([`dual`]): the capture run's calls in which a planted file was read and
    /// bytes the edge read left for a host not its service are made again, in two runs of
    /// their own (network simulated, events not kept): with fresh values in every planted
    /// file, then with the same values; what each call sent in each run goes to
    /// `manifest.dual`. Nothing is run when no call qualifies. Under either backend: a
    /// microVM's runs are fresh guests, planted from the secrets given as every run is.
    fn dual_runs(&mut self, target: &target::Resolved) -> Result<(), Error> {
        // The main capture run (a start that failed for lack of a setting has its session).
        let Some(capture) = (self.manifest.network.runs.iter())
            .find(|r| r.mode == NetworkMode::Capture && r.session.is_none())
            .cloned()
        else {
            return Ok(());
        };
        let candidates = dual::candidates(
            &capture,
            &self.all_events,
            &self.flows,
            &self.manifest.timings,
            &self.secrets.tokens,
        );
        if candidates.is_empty() {
            return Ok(());
        }
        // The capture run's flows only (the denied run's are of another mode).
        let original: Vec<dual::Sent> = candidates
            .iter()
            .map(|c| dual::sent(&self.flows, &c.destinations, NetworkMode::Capture))
            .collect();
        let mut reruns: Vec<Rerun> = Vec::new();
        let why_not = match self.opts.dual {
            false => "not made again: dual execution was turned off",
            true => "",
        };
        if why_not.is_empty() {
            let ca = self.trust.as_ref().map(|c| c.pem.clone());
            let fresh = self.secrets.refreshed(ca.as_deref())?;
            let same = self.secrets.clone();
            for (secrets, suffix) in [(fresh, "-dual-fresh"), (same, "-dual-same")] {
                reruns.push(self.rerun(target, secrets, suffix));
            }
        }
        for (i, c) in candidates.into_iter().enumerate() {
            let measured = |r: &Rerun| {
                r.as_ref()
                    .ok()
                    .map(|f| dual::sent(f, &c.destinations, NetworkMode::Capture))
            };
            let fresh = reruns.first().and_then(measured);
            let same = reruns.get(1).and_then(measured);
            let note = match reruns.as_slice() {
                [] => Some(why_not.to_string()),
                runs => runs.iter().find_map(|r| r.as_ref().err().cloned()),
            };
            let rec = dual::record(c, &original[i], same.as_ref(), fresh.as_ref(), note);
            self.manifest.dual.push(rec);
        }
        self.bundle.write_manifest(&self.manifest)?;
        Ok(())
    }

    /// One run of dual execution with `secrets` planted: its flows (its events, transcript
    /// aside, are not kept), or why it could not be made.
    fn rerun(
        &mut self,
        target: &target::Resolved,
        secrets: secrets::Secrets,
        suffix: &str,
    ) -> Rerun {
        let run = one_run(
            target,
            &self.server_cwd,
            &self.opts,
            RunFiles {
                bundle: &self.bundle,
                suffix,
                events: Box::new(recording::Discard),
            },
            recording::RunPlan {
                secrets: Some(secrets),
                clock: self.clock.clone(),
                first_event_id: 1,
                network: Some(NetworkMode::Capture),
                relay: None,
                wire: None,
                limits: self.opts.limits.clone(),
                answer: self.answer.clone(),
                trust: self.trust.clone(),
                ring: self.opts.recorder_ring,
                marker: self.opts.session.input_marker.clone(),
                clock_shift: None,
            },
            self.progress,
            &mut |_, _| Ok(()),
        )
        .map_err(|e| format!("the run{suffix} failed: {e}"))?;
        if let Some(f) = &run.session.failure {
            return Err(format!("the run{suffix} did not complete: {f}"));
        }
        Ok(run.recording.edge.flows)
    }

    /// The bundle completed and the checks run over it ([`finish`]).
    fn finish(mut self) -> Result<Audit, Error> {
        finish(
            Recorded {
                manifest: self.manifest,
                events: self.all_events,
                flows: self.flows,
                transcript: self.transcript,
                secrets: &mut self.secrets,
                sink: &self.events,
            },
            &self.opts,
            &self.bundle,
            self.dir,
        )
    }
}

/// A run of dual execution: its flows, or why it could not be made.
type Rerun = Result<Vec<glassbox_model::Flow>, String>;

/// What an audit recorded, ready for the checks.
struct Recorded<'a> {
    manifest: Manifest,
    events: Vec<glassbox_model::Event>,
    flows: Vec<glassbox_model::Flow>,
    transcript: Vec<TranscriptEntry>,
    secrets: &'a mut secrets::Secrets,
    sink: &'a recording::SharedSink,
}

/// The bundle completed (planted secrets, events flushed, flows numbered and written, the
/// end time), then [`conclude`].
fn finish(
    r: Recorded<'_>,
    opts: &AuditOptions,
    bundle: &bundle::Writer,
    dir: PathBuf,
) -> Result<Audit, Error> {
    let Recorded {
        mut manifest,
        events,
        mut flows,
        transcript,
        secrets,
        sink,
    } = r;
    // The key made on first open (if it was opened) is a planted secret like the others.
    secrets.settle_rsa();
    manifest.sandbox.honeytokens = secrets.tokens.clone();
    manifest.sandbox.workspace = glassbox_sandbox::workspace::dir(&secrets.home);
    if let Err(e) = sink.clone().flush() {
        return Err(Error::Evidence {
            path: dir.join(bundle::EVENTS),
            source: e,
        });
    }
    for (i, f) in flows.iter_mut().enumerate() {
        f.id = i as u64 + 1;
    }
    bundle.write_flows(&flows)?;
    manifest.finished_at =
        Some(humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string());
    let evidence = Evidence {
        manifest,
        events,
        transcript,
        flows,
    };
    conclude(evidence, opts, bundle, dir)
}

/// The end of every audit: the checks over the evidence, the verdict, the final manifest and
/// the report written.
fn conclude(
    evidence: Evidence,
    opts: &AuditOptions,
    bundle: &bundle::Writer,
    dir: PathBuf,
) -> Result<Audit, Error> {
    let proofs = opts
        .proofs
        .clone()
        .unwrap_or_else(|| selftest::proofs_for(&evidence.manifest));
    // The checks read what was written, as `recheck` does: one route from evidence to report.
    bundle.write_manifest(&evidence.manifest)?;
    let (report, _) = recheck::evaluate_bundle(&dir, &proofs)?;
    bundle.write_report(&report)?;
    Ok(Audit {
        evidence,
        report,
        evidence_dir: dir,
    })
}

/// What the install phase shares with the server's runs.
struct InstallContext<'a> {
    bundle: &'a bundle::Writer,
    events: &'a recording::SharedSink,
    clock: &'a Arc<glassbox_trace::Clock>,
    secrets: &'a mut secrets::Secrets,
    manifest: &'a mut Manifest,
    /// The audit's CA, when the edge answers (the install's captured flows are answered too;
    /// its relayed registry traffic stays byte for byte).
    answer: Option<glassbox_net::Authority>,
    /// The bait variables, which the installer's environment has too.
    bait: &'a [(String, String)],
}

/// What the install phase leaves for the server's runs.
struct Installed {
    dir: PathBuf,
    package: glassbox_model::PackageRef,
    events: Vec<glassbox_model::Event>,
    flows: Vec<glassbox_model::Flow>,
    /// The limits the install's sandbox reached.
    limits_reached: Vec<String>,
    /// Why the install failed (its evidence is kept all the same).
    failure: Option<String>,
    /// The install's sandbox (the manifest's until a run of the server replaces it).
    sandbox: Option<glassbox_model::SandboxSettings>,
}

/// Holds an exclusive lock on a package's install folder (two audits of one version at once
/// install it once).
struct InstallLock {
    _file: std::fs::File,
}

impl InstallLock {
    /// The lock beside `dir`, its whole name and `.lock` (`with_extension` would replace a
    /// version's last part: `foo@1.0.2` and `foo@1.0.3` shared `foo@1.0.lock`).
    fn path(dir: &Path) -> PathBuf {
        let mut name = dir.file_name().unwrap_or_default().to_os_string();
        name.push(".lock");
        dir.with_file_name(name)
    }

    fn take(dir: &Path) -> Result<InstallLock, Error> {
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
fn install_phase(
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
        opts,
        &target,
        &dir,
        Box::new(cx.events.clone()),
        recording::RunPlan {
            secrets: Some({
                cx.secrets.settle_rsa();
                cx.secrets.clone()
            }),
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
        Some(opts.install_timeout),
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
fn install_destinations(flows: &[glassbox_model::Flow], relayed: &[String]) -> Vec<String> {
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
    fn bundle_path(&self, name: &str) -> PathBuf {
        self.bundle.dir().join(name)
    }
}

/// The manifest of a new audit: what is known before anything runs.
fn new_manifest(
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

/// Audits a remote MCP server (a client configuration's `url`, a `server.json` remote) over
/// streamable HTTP, or the legacy HTTP+SSE transport when `legacy_sse`: it runs elsewhere, so
/// only what it says is evidence (the transcript: its descriptions, its instructions, its
/// tool list over time); the channels of what it does (system calls, the network edge, the
/// planted secrets) are reported not observed, never clean.
///
/// Plain `http://` only: this version has no TLS client, and an `https://` URL is an
/// [`Error::Usage`] saying so. The connection is made from the host (the server is not run
/// here, there is nothing to sandbox).
pub fn audit_remote(
    url: &str,
    legacy_sse: bool,
    opts: &AuditOptions,
    progress: &dyn Progress,
) -> Result<Audit, Error> {
    if url.starts_with("https://") {
        return Err(Error::Usage(format!(
            "{} is served over TLS, which this version cannot speak: a remote server is \
             audited over plain http:// only",
            glassbox_model::printable(url)
        )));
    }
    let authority = url
        .strip_prefix("http://")
        .and_then(|r| r.split(['/', '?', '#']).next())
        .filter(|a| !a.is_empty())
        .ok_or_else(|| {
            Error::Usage(format!(
                "not an http:// URL: {}",
                glassbox_model::printable(url)
            ))
        })?;
    let with_port = if authority
        .rsplit_once(':')
        .is_some_and(|(_, p)| p.parse::<u16>().is_ok())
    {
        authority.to_string()
    } else {
        format!("{authority}:80")
    };
    use std::net::ToSocketAddrs;
    let addrs: Vec<std::net::SocketAddr> = with_port
        .to_socket_addrs()
        .map_err(|e| {
            Error::Usage(format!(
                "cannot resolve {}: {e}",
                glassbox_model::printable(authority)
            ))
        })?
        .collect();
    let timeout = opts.session.request_timeout;
    let connector: glassbox_mcp::Connector = Arc::new(move || {
        let mut last = std::io::Error::new(std::io::ErrorKind::NotFound, "no address");
        for a in &addrs {
            match std::net::TcpStream::connect_timeout(a, timeout) {
                Ok(s) => return Ok(Box::new(s) as Box<dyn glassbox_mcp::Connection>),
                Err(e) => last = e,
            }
        }
        Err(last)
    });
    let mut target = glassbox_mcp::HttpTarget::from_url(url, connector)
        .map_err(|e| Error::Usage(e.to_string()))?;
    if legacy_sse {
        target.kind = glassbox_mcp::HttpKind::LegacySse;
    }
    let mut opts = opts.clone();
    opts.command = vec![url.into()];
    let run_id = run_id();
    let dir = opts
        .evidence_dir
        .clone()
        .unwrap_or_else(|| opts.cwd.join("glassbox-evidence").join(&run_id));
    let bundle = bundle::Writer::create(&dir)?;
    let mut manifest = new_manifest(&run_id, &opts, String::new(), vec!["mcp-transcript".into()]);
    manifest.sandbox.backend = "none: a remote server, not run here".into();
    manifest.recorder.unobserved = vec![
        "syscalls: a remote server runs elsewhere".into(),
        "packet-edge: a remote server's traffic does not pass glassbox".into(),
        "honeytoken-ground-truth: no secrets are planted where a remote server runs".into(),
    ];
    bundle.write_manifest(&manifest)?;
    // No events: the file is there, empty, like any bundle's.
    drop(bundle.events()?);
    let clock = Arc::new(glassbox_trace::Clock::new());
    let hooks = Hooks {
        clock: clock.clone(),
        transcript: Mutex::new(bundle.transcript("")?),
        timings: Mutex::new(Vec::new()),
        progress,
        usage: None,
    };
    hooks.set_phase_quietly(Phase::Startup);
    let session = glassbox_mcp::run(glassbox_mcp::Transport::Http(target), &opts.session, &hooks);
    let Hooks {
        transcript,
        timings,
        ..
    } = hooks;
    let end_ns = clock.now_ns();
    manifest.timings = timings.into_inner().unwrap_or_default();
    if let Some(last) = manifest.timings.last_mut() {
        last.end_ns = end_ns;
    }
    manifest.session = session;
    manifest.finished_at =
        Some(humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string());
    bundle.write_flows(&[])?;
    let evidence = Evidence {
        manifest,
        events: Vec::new(),
        transcript: transcript
            .into_inner()
            .map(|t| t.finish())
            .unwrap_or_default(),
        flows: Vec::new(),
    };
    conclude(evidence, &opts, &bundle, dir)
}

/// What one run of the server produced.
struct RunResult {
    session: SessionSummary,
    transcript: Vec<TranscriptEntry>,
    server_exit: ServerExit,
    recording: recording::Recording,
    timings: Vec<PhaseTiming>,
    settings: glassbox_model::SandboxSettings,
    mechanism: String,
    isolation: Vec<String>,
    canary_sockets: Vec<String>,
    ground_truth: Option<String>,
    start_ns: u64,
    end_ns: u64,
    /// The limits the sandbox reached.
    limits_reached: Vec<String>,
    /// Its phases that reached a bound or left processes running ([`usage`]), and whether
    /// its backend could tell.
    usage: Option<Vec<glassbox_model::PhaseUsage>>,
    /// Processes still running when it ended (after the server exited, and a while more).
    outlived: Vec<String>,
    /// What it left in the sandbox's writable places ([`left`]; `None`: not read).
    left: Option<left::Left>,
    /// The microVM the run was in, if any.
    vm: Option<glassbox_model::VmRecord>,
}

impl RunResult {
    /// A run whose microVM guest hung or died before the server ran: nothing was observed,
    /// which the recorder's failure says (the audit is then inconclusive with the reason).
    fn lost(why: String, start_ns: u64, end_ns: u64) -> RunResult {
        RunResult {
            session: SessionSummary {
                failure: Some(format!("the server never ran: {why}")),
                ..SessionSummary::default()
            },
            transcript: Vec::new(),
            server_exit: ServerExit::Running,
            recording: recording::Recording {
                events: Vec::new(),
                stats: glassbox_trace::RecorderStats {
                    failure: Some(why.clone()),
                    ..Default::default()
                },
                write_error: None,
                edge: recording::EdgeRecord {
                    error: Some(format!("no edge: {why}")),
                    ..Default::default()
                },
            },
            timings: Vec::new(),
            settings: glassbox_model::SandboxSettings {
                backend: "microvm: the guest never ran the server".into(),
                ..Default::default()
            },
            mechanism: String::new(),
            isolation: Vec::new(),
            canary_sockets: Vec::new(),
            ground_truth: Some(why.clone()),
            start_ns,
            end_ns,
            limits_reached: Vec::new(),
            usage: None,
            outlived: Vec::new(),
            left: None,
            vm: Some(glassbox_model::VmRecord {
                backend: "microvm".into(),
                lost: vec![why],
                ..Default::default()
            }),
        }
    }
}

/// Where one run writes: events to the audit's shared sink, the transcript to
/// `transcript{suffix}.jsonl`, stderr to `stderr{suffix}.log`.
struct RunFiles<'a> {
    bundle: &'a bundle::Writer,
    suffix: &'a str,
    events: Box<dyn EventSink>,
}

/// Runs the server once in its sandbox and speaks MCP to it.
fn one_run(
    target: &target::Resolved,
    cwd: &Path,
    opts: &AuditOptions,
    files: RunFiles<'_>,
    plan: recording::RunPlan,
    progress: &dyn Progress,
    started: &mut dyn FnMut(&glassbox_model::SandboxSettings, &str) -> Result<(), Error>,
) -> Result<RunResult, Error> {
    let clock = plan.clock.clone();
    // Every run starts in its own start-up: the clock is the audit's, and still holds the
    // phase the run before ended in (its shutdown), which the server's first calls would get.
    clock.set_phase(Phase::Startup);
    let start_ns = clock.now_ns();
    let RunFiles {
        bundle,
        suffix,
        events,
    } = files;
    let mut running = match opts.isolation.start(opts, target, cwd, events, plan, None) {
        Ok(s) => s,
        Err(Error::GuestLost(why)) => {
            return Ok(RunResult::lost(why, start_ns, clock.now_ns()));
        }
        Err(e) => return Err(e),
    };
    started(running.settings(), running.mechanism())?;
    let (isolation, canary_sockets) = running.edge_checks();

    // The server's stderr, copied as it comes (bounded).
    let (stdin, stdout, stderr) = running.take_stdio();
    let stderr_file = bundle.stderr(suffix)?;
    let stderr_copy = std::thread::spawn(move || bundle::copy_bounded(stderr, stderr_file));

    let stdin = stdin.ok_or_else(|| Error::Internal("no stdin".into()))?;
    let stdout = stdout.ok_or_else(|| Error::Internal("no stdout".into()))?;
    let hooks = Hooks {
        clock: clock.clone(),
        transcript: Mutex::new(bundle.transcript(suffix)?),
        timings: Mutex::new(vec![PhaseTiming {
            phase: Phase::Startup,
            start_ns,
            end_ns: start_ns,
        }]),
        progress,
        usage: running.meter().map(|m| usage::Log::new(m, &Phase::Startup)),
    };
    // The session ends in phase `shutdown` with the server's stdin closed.
    let mut session = match &opts.http {
        None => glassbox_mcp::run_session(stdin, stdout, &opts.session, &hooks),
        Some(http) => {
            // The server's stdout is only its log; MCP goes over HTTP on its own loopback.
            let log = bundle.stdout(suffix)?;
            let out = std::thread::spawn(move || bundle::copy_bounded(Some(stdout), log));
            let s = http_session(http, running.as_ref(), opts, &hooks)?;
            drop(stdin);
            drop(out);
            s
        }
    };
    let Hooks {
        transcript,
        timings,
        usage,
        ..
    } = hooks;
    // A well-behaved server exits now; one that closed its stdout during the session has
    // exited, or is about to: how it ended is why the session failed.
    let exited = running.wait_timeout(opts.exit_grace);
    // Daemons the server left are recorded a little longer (a double-forked child that acts
    // once its parent is gone), then die with the sandbox.
    let mut outlived = Vec::new();
    if exited.is_some() {
        let until = std::time::Instant::now() + opts.linger;
        while running.others_alive() && std::time::Instant::now() < until {
            std::thread::sleep(Duration::from_millis(50));
        }
        // What is still there now outlived the server: it is killed with the sandbox.
        outlived = running.outlived();
    }
    let usage = usage.map(usage::Log::finish);
    // What the run left in its writable places: read before the sandbox goes (a microVM's
    // guest says it in its record, known once the run finished).
    let mut left = running.left();
    let exited_early = if session.server_closed_stdout {
        exited.clone()
    } else {
        None
    };
    let (server_exit, recording) = running.finish();
    // A microVM's guest says what outlived the server in its record, known now.
    if outlived.is_empty() {
        outlived = running.outlived();
    }
    if left.is_none() {
        left = running.left();
    }
    let stderr_tail = stderr_copy.join().unwrap_or_default();
    let end_ns = clock.now_ns();
    let mut timings = timings.into_inner().unwrap_or_default();
    if let Some(last) = timings.last_mut() {
        last.end_ns = end_ns;
    }
    let transcript = transcript
        .into_inner()
        .map(|t| t.finish())
        .unwrap_or_default();

    // A server that ended before the session did is why the session failed: say so.
    if !session.completed {
        let how = match exited_early {
            Some(ServerExit::Exited { code }) => Some(format!("server exited with status {code}")),
            Some(ServerExit::Signaled { signal, .. }) => {
                Some(format!("server killed by signal {signal}"))
            }
            _ => None,
        };
        if let (Some(how), Some(f)) = (how, &session.failure) {
            let mut reason = format!("{f} ({how})");
            if let Some(line) = start::error_line(&stderr_tail) {
                reason.push_str(&format!("; it said: {line}"));
            }
            session.failure = Some(reason);
        }
    }
    // A limit the sandbox reached is part of why the session failed when it can have caused
    // it (the others are resource-abuse's to list).
    let limits_reached = running.limits_reached().to_vec();
    let failed_by = start::limits_that_failed(&limits_reached, exited_early.as_ref(), &stderr_tail);
    if let (false, Some(f)) = (
        session.completed || failed_by.is_empty(),
        &mut session.failure,
    ) {
        f.push_str(&format!(
            "; the sandbox reached its limits: {}",
            failed_by.join("; ")
        ));
    }
    Ok(RunResult {
        limits_reached,
        usage,
        outlived,
        left,
        session,
        transcript,
        server_exit,
        recording,
        timings,
        settings: running.settings().clone(),
        mechanism: running.mechanism().to_string(),
        isolation,
        canary_sockets,
        ground_truth: running.ground_truth(),
        start_ns,
        end_ns,
        vm: running.vm_record(),
    })
}

/// A server that listens on a port of the sandbox's loopback instead of speaking stdio.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct HttpServer {
    /// Its port (on 127.0.0.1 inside the sandbox).
    pub port: u16,
    /// The MCP endpoint's path (`/mcp`), or the SSE endpoint's for the legacy transport.
    pub path: String,
    /// The legacy HTTP+SSE transport of 2024-11-05 instead of streamable HTTP.
    pub legacy_sse: bool,
}

impl HttpServer {
    /// `http://127.0.0.1:PORT/PATH` (or `localhost`): where the server listens, as seen inside
    /// its sandbox.
    pub fn parse(url: &str, legacy_sse: bool) -> Result<HttpServer, Error> {
        let bad = || {
            Error::Usage(format!(
                "--http takes the URL the server listens on inside the sandbox, \
                 http://127.0.0.1:PORT/PATH, not {url:?}"
            ))
        };
        let rest = url.strip_prefix("http://").ok_or_else(bad)?;
        let cut = rest.find('/').unwrap_or(rest.len());
        let (authority, path) = rest.split_at(cut);
        let (host, port) = authority.rsplit_once(':').ok_or_else(bad)?;
        if !matches!(host, "127.0.0.1" | "localhost") {
            return Err(bad());
        }
        let port: u16 = port.parse().map_err(|_| bad())?;
        Ok(HttpServer {
            port,
            path: if path.is_empty() {
                "/".into()
            } else {
                path.into()
            },
            legacy_sse,
        })
    }
}

/// The MCP session with a server over HTTP inside its sandbox: waits until it listens (up to
/// the request timeout), then speaks MCP through connections made in its network namespace
/// (on the host, or in the guest through its TCP relay).
fn http_session(
    http: &HttpServer,
    server: &dyn backend::Backend,
    opts: &AuditOptions,
    hooks: &Hooks<'_>,
) -> Result<SessionSummary, Error> {
    let dialer = server.loopback_dialer()?;
    let addr = std::net::SocketAddr::from(([127, 0, 0, 1], http.port));
    let (port, timeout) = (http.port, opts.session.request_timeout);
    let d = dialer.clone();
    let connector: glassbox_mcp::Connector = Arc::new(move || d(port, timeout));
    let deadline = std::time::Instant::now() + timeout;
    loop {
        match dialer(port, Duration::from_secs(1)) {
            Ok(_) => break,
            Err(e) if e.kind() == std::io::ErrorKind::PermissionDenied => {
                return Err(Error::Usage(e.to_string()))
            }
            Err(_) if std::time::Instant::now() < deadline && server.may_still_listen() => {
                std::thread::sleep(Duration::from_millis(100));
            }
            Err(e) => {
                return Ok(SessionSummary {
                    failure: Some(format!(
                        "the server did not listen on {addr} within {}s ({e})",
                        timeout.as_secs()
                    )),
                    ..SessionSummary::default()
                })
            }
        }
    }
    let mut target = glassbox_mcp::HttpTarget::new(connector, addr.to_string(), http.path.clone());
    if http.legacy_sse {
        target.kind = glassbox_mcp::HttpKind::LegacySse;
    }
    target.validate().map_err(|e| Error::Usage(e.to_string()))?;
    Ok(glassbox_mcp::run(
        glassbox_mcp::Transport::Http(target),
        &opts.session,
        hooks,
    ))
}

/// Adds `s` to `list` unless it is there.
fn say_once(list: &mut Vec<String>, s: String) {
    if !list.contains(&s) {
        list.push(s);
    }
}

/// Sets the environment variable `name` of a command to `value`, in place of any it had.
fn set_env(env: &mut Vec<(String, String)>, name: String, value: String) {
    env.retain(|(k, _)| *k != name);
    env.push((name, value));
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

/// The role probes of the plans of calls ([`glassbox_mcp::args::Probes`]): a planted cloud
/// credential and another project's `.env` for paths, the canary Docker socket for sockets,
/// the metadata address for URLs; the workspace path values go in, and its files.
fn probes(
    tokens: &[glassbox_model::Honeytoken],
    metadata: std::net::IpAddr,
    command: &[OsString],
    home: &str,
) -> glassbox_mcp::args::Probes {
    // The folder the server was given: the first argument that is an absolute path of a
    // directory (visible in the sandbox at the same path), with what it holds; else the
    // sample workspace planted in home.
    let given = command
        .iter()
        .skip(1)
        .map(Path::new)
        .find(|p| p.is_absolute() && p.is_dir());
    let (workspace, files) = match given {
        Some(dir) => (dir.to_string_lossy().into_owned(), listing(dir)),
        None => (
            glassbox_sandbox::workspace::dir(home),
            glassbox_sandbox::workspace::samples()
                .into_iter()
                .map(String::from)
                .collect(),
        ),
    };
    let mut outside = Vec::new();
    for (kind, what) in [
        ("aws-credentials", "a planted credential"),
        ("dotenv-other-project", "another project's .env"),
    ] {
        if let Some(t) = tokens.iter().find(|t| t.kind == kind) {
            outside.push((what.to_string(), t.path.clone()));
        }
    }
    glassbox_mcp::args::Probes {
        outside,
        socket: Some(canary::DOCKER_VAR.to_string()),
        metadata: Some(metadata.to_string()),
        workspace: Some(workspace),
        files,
        tool: String::new(),
    }
}

/// The files of a folder the user gave the server (paths relative to it), for path values
/// to name: bounded (three levels, 2,000 entries looked at, 200 kept), hidden entries and
/// links left out, in name order.
fn listing(dir: &Path) -> Vec<String> {
    const LOOKED: usize = 2_000;
    const KEPT: usize = 200;
    let mut out = Vec::new();
    let mut looked = 0;
    let mut todo = vec![(dir.to_path_buf(), 0)];
    'walk: while let Some((d, depth)) = todo.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        let mut entries: Vec<_> = entries.flatten().take(LOOKED).collect();
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            looked += 1;
            if looked > LOOKED || out.len() >= KEPT {
                break 'walk;
            }
            if e.file_name().to_string_lossy().starts_with('.') {
                continue;
            }
            let Ok(kind) = e.file_type() else { continue };
            let path = e.path();
            if kind.is_dir() && depth < 2 {
                todo.push((path, depth + 1));
            } else if kind.is_file() {
                if let Ok(rel) = path.strip_prefix(dir) {
                    out.push(rel.to_string_lossy().into_owned());
                }
            }
        }
    }
    out.sort();
    out
}

/// What [`trace`] saw besides the events it wrote.
#[derive(Debug)]
pub struct Traced {
    /// How the command ended.
    pub exit: ServerExit,
    /// Events recorded.
    pub events: u64,
    /// What the recorder saw and lost (a trace that lost calls says so, as an audit does).
    pub stats: glassbox_trace::RecorderStats,
    /// The flows at the network edge (capture mode) and the canary sockets.
    pub flows: Vec<glassbox_model::Flow>,
}

/// Runs `command` in the sandbox under the recorder, without MCP, with the network captured at
/// the edge: the command's standard streams are glassbox's own.
pub fn trace(
    command: &[OsString],
    cwd: &Path,
    extra_ro: &[PathBuf],
    env: &[(String, String)],
    sink: Box<dyn EventSink>,
    recorder: RecorderChoice,
    responder: ResponderChoice,
) -> Result<Traced, Error> {
    target::check_working_folder(cwd)?;
    let answer = match responder {
        ResponderChoice::Ok => Some(
            glassbox_net::Authority::fresh()
                .map_err(|e| Error::Internal(format!("cannot make the trace's CA: {e}")))?,
        ),
        ResponderChoice::Refuse => None,
    };
    let trust = answer.as_ref().map(recording::CaCertificate::of);
    let mut target = target::resolve(command, cwd)?;
    target.extra_ro.extend(extra_ro.iter().cloned());
    target.env.extend(env.iter().cloned());
    let mut running = run::start(
        &target,
        cwd,
        sink,
        false,
        recorder,
        recording::RunPlan {
            secrets: None,
            clock: Arc::new(glassbox_trace::Clock::new()),
            first_event_id: 1,
            network: Some(NetworkMode::Capture),
            relay: None,
            wire: None,
            limits: glassbox_sandbox::Limits::default(),
            answer,
            trust,
            ring: None,
            marker: None,
            clock_shift: None,
        },
    )?;
    let pump = |from: Option<std::fs::File>, mut to: Box<dyn std::io::Write + Send>| {
        std::thread::spawn(move || {
            if let Some(mut f) = from {
                let _ = std::io::copy(&mut f, &mut to);
            }
        })
    };
    let out = pump(running.sandbox.stdout.take(), Box::new(std::io::stdout()));
    let err = pump(running.sandbox.stderr.take(), Box::new(std::io::stderr()));
    let stdin = running.sandbox.stdin.take();
    // stdin is forwarded on a detached thread: a blocked read of our stdin must not keep the
    // trace alive after the command ended.
    std::thread::spawn(move || {
        if let Some(mut w) = stdin {
            let mut buf = [0u8; 8192];
            let mut input = std::io::stdin();
            while let Ok(n) = input.read(&mut buf) {
                if n == 0 || std::io::Write::write_all(&mut w, &buf[..n]).is_err() {
                    break;
                }
            }
        }
    });
    let exit = loop {
        if let Some(e) = running.sandbox.wait_timeout(Duration::from_millis(200)) {
            break e;
        }
    };
    let (_, recording) = running.finish();
    let _ = out.join();
    let _ = err.join();
    if let Some(e) = recording.write_error {
        return Err(Error::Evidence {
            path: "trace output".into(),
            source: e,
        });
    }
    Ok(Traced {
        exit,
        events: recording.stats.events,
        stats: recording.stats,
        flows: recording.edge.flows,
    })
}

/// The names the audited entry gives itself (see [`explain`]), in the order the report
/// prefers its reasons: its environment's plain values, its arguments, its `server.json`,
/// its installed package's metadata. Which destinations they explain, the checks decide.
fn entry_names(opts: &AuditOptions, installed_in: Option<&Path>) -> Vec<glassbox_model::EntryName> {
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
