//! How to run an audit ([`AuditOptions`]): what a caller sets, and what the binary's
//! defaults are.

use crate::{triggers, Error, HttpServer, Isolation, Planned, RecorderChoice};
use glassbox_model::NetworkMode;
use glassbox_plan::{config, install};
use std::ffi::OsString;
use std::path::PathBuf;
use std::time::Duration;

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
