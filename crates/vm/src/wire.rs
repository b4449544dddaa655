//! What the host's glassbox and the guest's say to each other about one run: the request (the
//! first line of the stdin port, JSON) and the records of the events port (JSON lines beginning
//! with [`RECORD_PREFIX`], between the events, which are `glassbox_model::Event` lines). The
//! framing of the control and stdin ports is [`crate::proto`]; what each side does with these
//! is `glassbox_audit::microvm`'s (the host's run, and `glassbox audit-guest` in the guest).

use glassbox_model::{EdgeCounters, Flow, Honeytoken, NetworkMode, SandboxSettings, ServerExit};
use glassbox_trace::RecorderStats;
use serde::{Deserialize, Serialize};
use std::path::PathBuf;

/// Where the records start: lines of the events port that begin with this are [`Record`]s.
pub const RECORD_PREFIX: &str = "{\"glassbox\":";

/// The audit's CA certificate as it crosses to the guest (never its key: the edge that
/// terminates TLS is the host's).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct WireCertificate {
    /// PEM.
    pub pem: String,
    /// DER.
    pub der: Vec<u8>,
}

/// The sandbox limits as they cross to the guest (the guest's sandbox applies them with the
/// guest's cgroup v2).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct WireLimits {
    /// Bytes of memory.
    pub memory: Option<u64>,
    /// Processes.
    pub pids: Option<u64>,
    /// CPUs (fractions allowed).
    pub cpus: Option<f64>,
    /// Bytes the sandbox may write.
    pub disk: u64,
}

impl From<&glassbox_sandbox::Limits> for WireLimits {
    fn from(l: &glassbox_sandbox::Limits) -> Self {
        WireLimits {
            memory: l.memory,
            pids: l.pids,
            cpus: l.cpus,
            disk: l.disk,
        }
    }
}

impl From<WireLimits> for glassbox_sandbox::Limits {
    fn from(l: WireLimits) -> Self {
        glassbox_sandbox::Limits {
            memory: l.memory,
            pids: l.pids,
            cpus: l.cpus,
            disk: l.disk,
        }
    }
}

/// The planted secrets as they cross to the guest.
#[derive(Debug, Serialize, Deserialize)]
pub struct WireSecrets {
    /// The sandbox user's name.
    pub user: String,
    /// The sandbox's host name.
    pub hostname: String,
    /// The sandbox user's home.
    pub home: String,
    /// Path, contents, mode.
    pub files: Vec<(String, Vec<u8>, u32)>,
    /// The planted secrets, as the manifest lists them.
    pub tokens: Vec<Honeytoken>,
    /// The canary SSH agent's socket path.
    pub ssh_agent: String,
}

/// What the host asks of the guest's glassbox: the first line on the stdin port.
#[derive(Debug, Serialize, Deserialize)]
pub struct GuestRequest {
    /// The server, resolved on the host.
    pub target: WireTarget,
    /// The server's working folder (a host path, shared).
    pub cwd: PathBuf,
    /// When the run ends.
    pub end: RunEnd,
    /// What to plant.
    pub secrets: WireSecrets,
    /// The run's network mode (none: no network at all).
    pub network: Option<NetworkMode>,
    /// The recorder asked for (`auto`, `notify`, `ebpf`).
    pub recorder: String,
    /// The id of the run's first event (ids run on across the audit's runs).
    pub first_event_id: u64,
    /// How long the server has to exit once its stdin is closed.
    pub exit_grace_ms: u64,
    /// How long what the server left running is still recorded.
    pub linger_ms: u64,
    /// The audit's sandbox limits.
    pub limits: WireLimits,
    /// The server speaks MCP over HTTP on this port of its loopback: the guest serves the TCP
    /// relay to it, and to nothing else.
    #[serde(default)]
    pub http_port: Option<u16>,
    /// The audit's CA certificate the guest's sandbox trusts (never its key: the edge that
    /// terminates TLS is the host's).
    #[serde(default)]
    pub trust: Option<WireCertificate>,
    /// The eBPF recorder's ring buffer in bytes (`None`: its default).
    #[serde(default)]
    pub ring: Option<u64>,
    /// The audit's input marker, looked for in the files the run leaves.
    #[serde(default)]
    pub marker: Option<String>,
    /// The server's clocks moved forward by so many days (a trigger run); `None`: the guest's.
    #[serde(default)]
    pub clock_shift_days: Option<u32>,
}

/// When a run ends in the guest: what its glassbox waits for before it records what outlived
/// the command and reports the end of the run.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum RunEnd {
    /// When the host closes the server's stdin (an MCP session): the server then has the exit
    /// grace to exit.
    StdinClosed,
    /// When the command exits, or after `ms` milliseconds, whichever comes first (an install,
    /// whose stdin is closed from the start).
    ExitOrAfter {
        /// The bound, in milliseconds.
        ms: u64,
    },
    /// When the command exits, however long it runs (`glassbox trace`: its stdin is the
    /// user's, and closing it does not end the command).
    Exit,
}

/// A line of the events port that is not an event.
#[derive(Clone, Debug, Serialize, Deserialize)]
#[serde(tag = "glassbox", rename_all = "snake_case")]
pub enum Record {
    /// The server runs in the guest's sandbox.
    Started {
        /// The guest run clock when this record was written (its events' `t_ns` are on it).
        #[serde(default)]
        guest_now_ns: u64,
        /// The guest sandbox's settings.
        settings: SandboxSettings,
        /// How the recorder records.
        mechanism: String,
        /// Why honeytoken ground truth is not observed, if it is not.
        ground_truth: Option<String>,
        /// The network checks made before the server started.
        isolation: Vec<String>,
        /// The canary sockets' paths.
        canary_sockets: Vec<String>,
    },
    /// The run is over: everything the host needs besides the events.
    Finished {
        /// How the server ended.
        exit: ServerExit,
        /// The recorder's counters.
        stats: RecorderStats,
        /// The guest's own flows (its canary sockets'), on the guest's clock.
        flows: Vec<Flow>,
        /// The guest edge's counters.
        counters: EdgeCounters,
        /// What went wrong with the guest's part of the network, if anything.
        edge_error: Option<String>,
        /// The sandbox limits the server reached.
        limits_reached: Vec<String>,
        /// Processes still running once the server had exited and what it left was recorded
        /// a while longer (each its command line).
        #[serde(default)]
        outlived: Vec<String>,
        /// The files the run left in the sandbox's writable places, and where a bound stopped
        /// the list (`None`: not read).
        #[serde(default)]
        left: Option<(Vec<glassbox_model::LeftFile>, Vec<String>)>,
        /// Writing the events to the port failed.
        write_error: Option<String>,
    },
    /// The guest's sandbox could not run the server.
    Failed {
        /// Why.
        reason: String,
    },
}

/// The server as it crosses to the guest: resolved on the host (the guest sees the host's
/// system folders and every shared folder at their host paths, so the resolution holds there).
#[derive(Debug, Serialize, Deserialize)]
pub struct WireTarget {
    /// The program, resolved.
    pub program: PathBuf,
    /// Its arguments, `argv[0]` first.
    pub argv: Vec<String>,
    /// Folders it needs, read-only.
    pub extra_ro: Vec<PathBuf>,
    /// Folders it needs, writable.
    pub extra_rw: Vec<PathBuf>,
    /// Folders put before `PATH`.
    pub path_prefix: Vec<String>,
    /// Its environment.
    pub env: Vec<(String, String)>,
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn records_and_events_are_told_apart_on_the_events_port() {
        let finished = Record::Finished {
            exit: ServerExit::Exited { code: 0 },
            stats: RecorderStats {
                failure: Some("x".into()),
                ..RecorderStats::default()
            },
            flows: Vec::new(),
            counters: EdgeCounters::default(),
            edge_error: None,
            limits_reached: vec!["pids".into()],
            outlived: Vec::new(),
            left: None,
            write_error: None,
        };
        let line = serde_json::to_string(&finished).unwrap();
        assert!(line.starts_with(RECORD_PREFIX), "{line}");
        let back: Record = serde_json::from_str(&line).unwrap();
        assert!(
            matches!(back, Record::Finished { limits_reached, .. } if limits_reached == ["pids"])
        );
        let failed = serde_json::to_string(&Record::Failed { reason: "r".into() }).unwrap();
        assert!(failed.starts_with(RECORD_PREFIX), "{failed}");
        let event: glassbox_model::Event = serde_json::from_str(
            r#"{"id":1,"t_ns":6,"pid":2,"ppid":1,"phase":"startup","kind":"exec","syscall":"execve","path":"/usr/bin/python3","argv":["python3"]}"#,
        )
        .unwrap();
        let line = serde_json::to_string(&event).unwrap();
        assert!(!line.starts_with(RECORD_PREFIX), "{line}");
    }

    #[test]
    fn a_run_end_crosses_as_its_name() {
        for (end, text) in [
            (RunEnd::StdinClosed, r#""stdin_closed""#),
            (
                RunEnd::ExitOrAfter { ms: 5 },
                r#"{"exit_or_after":{"ms":5}}"#,
            ),
            (RunEnd::Exit, r#""exit""#),
        ] {
            assert_eq!(serde_json::to_string(&end).unwrap(), text);
            assert_eq!(serde_json::from_str::<RunEnd>(text).unwrap(), end);
        }
    }
}
