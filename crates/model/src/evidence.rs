use crate::Bytes;
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;

/// The part of an MCP session an event happened in.
///
/// Serialized as `startup`, `initialize`, `list`, `call:<tool>`, `shutdown`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Phase {
    /// From the start of the command until the client sends `initialize`.
    Startup,
    /// `initialize` and `notifications/initialized`.
    Initialize,
    /// `tools/list`, `resources/list`, `prompts/list` (first and last listing).
    List,
    /// A `tools/call` of the named tool.
    Call(String),
    /// After the last request: stdin closed, the server asked to exit.
    Shutdown,
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Phase::Startup => f.write_str("startup"),
            Phase::Initialize => f.write_str("initialize"),
            Phase::List => f.write_str("list"),
            Phase::Call(tool) => write!(f, "call:{tool}"),
            Phase::Shutdown => f.write_str("shutdown"),
        }
    }
}

impl std::str::FromStr for Phase {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s {
            "startup" => Phase::Startup,
            "initialize" => Phase::Initialize,
            "list" => Phase::List,
            "shutdown" => Phase::Shutdown,
            other => match other.strip_prefix("call:") {
                Some(tool) => Phase::Call(tool.to_string()),
                None => return Err(format!("unknown phase {other:?}")),
            },
        })
    }
}

impl Serialize for Phase {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Phase {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// One thing the traced program did, as the recorder saw it.
///
/// Serialized as one flat object: the common fields, then `kind` and the kind's fields
/// (written by hand: serde's `flatten` costs a second pass per event, and the recorder
/// writes hundreds of thousands of them).
#[derive(Clone, Debug, PartialEq, Deserialize)]
pub struct Event {
    /// Sequence number within the run, from 1; findings point at events by this id.
    pub id: u64,
    /// Nanoseconds since the start of the run.
    pub t_ns: u64,
    /// Process id inside the sandbox's pid namespace.
    pub pid: i32,
    /// Parent process id inside the sandbox's pid namespace (0 when the parent is outside it).
    pub ppid: i32,
    /// The MCP phase current when the event was recorded.
    pub phase: Phase,
    /// What happened.
    #[serde(flatten)]
    pub kind: EventKind,
}

impl Serialize for Event {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("id", &self.id)?;
        m.serialize_entry("t_ns", &self.t_ns)?;
        m.serialize_entry("pid", &self.pid)?;
        m.serialize_entry("ppid", &self.ppid)?;
        m.serialize_entry("phase", &self.phase)?;
        match &self.kind {
            EventKind::Exec {
                syscall,
                path,
                argv,
            } => {
                m.serialize_entry("kind", "exec")?;
                m.serialize_entry("syscall", syscall)?;
                m.serialize_entry("path", path)?;
                m.serialize_entry("argv", argv)?;
            }
            EventKind::Open {
                syscall,
                path,
                flags,
                flags_text,
                result,
            } => {
                m.serialize_entry("kind", "open")?;
                m.serialize_entry("syscall", syscall)?;
                m.serialize_entry("path", path)?;
                m.serialize_entry("flags", flags)?;
                m.serialize_entry("flags_text", flags_text)?;
                if let Some(r) = result {
                    m.serialize_entry("result", r)?;
                }
            }
            EventKind::Stat { syscall, path } => {
                m.serialize_entry("kind", "stat")?;
                m.serialize_entry("syscall", syscall)?;
                m.serialize_entry("path", path)?;
            }
            EventKind::Connect { syscall, fd, addr } => {
                m.serialize_entry("kind", "connect")?;
                m.serialize_entry("syscall", syscall)?;
                m.serialize_entry("fd", fd)?;
                m.serialize_entry("addr", addr)?;
            }
            EventKind::Bind { fd, addr } => {
                m.serialize_entry("kind", "bind")?;
                m.serialize_entry("fd", fd)?;
                m.serialize_entry("addr", addr)?;
            }
            EventKind::Socket {
                domain,
                sock_type,
                protocol,
            } => {
                m.serialize_entry("kind", "socket")?;
                m.serialize_entry("domain", domain)?;
                m.serialize_entry("sock_type", sock_type)?;
                m.serialize_entry("protocol", protocol)?;
            }
        }
        m.end()
    }
}

/// The kinds of recorded events; `kind` in the wire format.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum EventKind {
    /// `execve` / `execveat`: the program asked to run `path` with `argv`.
    Exec {
        /// The system call.
        syscall: String,
        /// The absolute path of the program.
        path: Bytes,
        /// The arguments, `argv[0]` first.
        argv: Vec<Bytes>,
    },
    /// An open-family call (`open`, `openat`, `openat2`, `creat`).
    Open {
        /// The system call.
        syscall: String,
        /// The absolute path, resolved against the caller's working directory or `dirfd`.
        path: Bytes,
        /// The open flags as passed (`O_*`, numeric).
        flags: u64,
        /// The flags in words (`O_WRONLY|O_CREAT`...).
        flags_text: String,
        /// The call's result (fd or `-errno`) where the recorder could observe it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        result: Option<i64>,
    },
    /// A stat-family call (`stat`, `lstat`, `newfstatat`, `statx`, `access`, `faccessat`,
    /// `faccessat2`, `readlink`, `readlinkat`); recorded for paths under the home directory.
    Stat {
        /// The system call.
        syscall: String,
        /// The absolute path.
        path: Bytes,
    },
    /// `connect`, or a send that carries a destination (`sendto`, `sendmsg`, `sendmmsg`).
    Connect {
        /// The system call.
        syscall: String,
        /// The socket descriptor in the caller.
        fd: i32,
        /// The destination.
        addr: SockAddr,
    },
    /// `bind`.
    Bind {
        /// The socket descriptor in the caller.
        fd: i32,
        /// The local address.
        addr: SockAddr,
    },
    /// `socket`.
    Socket {
        /// Address family (`AF_*`, numeric).
        domain: i32,
        /// Socket type (`SOCK_*`, numeric, flags included).
        sock_type: i32,
        /// Protocol number.
        protocol: i32,
    },
}

impl EventKind {
    /// The path the event is about, for file and exec events.
    pub fn path(&self) -> Option<&Bytes> {
        match self {
            EventKind::Exec { path, .. }
            | EventKind::Open { path, .. }
            | EventKind::Stat { path, .. } => Some(path),
            _ => None,
        }
    }
}

/// A socket address as the program passed it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "family", rename_all = "snake_case")]
pub enum SockAddr {
    /// `AF_INET`.
    Inet {
        /// Dotted-quad address.
        ip: String,
        /// Port.
        port: u16,
    },
    /// `AF_INET6`.
    Inet6 {
        /// Address in RFC 5952 text.
        ip: String,
        /// Port.
        port: u16,
    },
    /// `AF_UNIX`.
    Unix {
        /// The socket path (for abstract sockets, the name without the leading NUL).
        path: Bytes,
        /// Whether the address is in the abstract namespace.
        #[serde(rename = "abstract")]
        is_abstract: bool,
    },
    /// Any other family, or an address the recorder could not read.
    Other {
        /// The `sa_family` value (0 when unreadable).
        family_id: u16,
    },
}

impl fmt::Display for SockAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SockAddr::Inet { ip, port } => write!(f, "{ip}:{port}"),
            SockAddr::Inet6 { ip, port } => write!(f, "[{ip}]:{port}"),
            SockAddr::Unix { path, is_abstract } => {
                write!(f, "unix:{}{path}", if *is_abstract { "@" } else { "" })
            }
            SockAddr::Other { family_id } => write!(f, "family {family_id}"),
        }
    }
}

/// Which way a transcript line went.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// glassbox to the server (stdin).
    ClientToServer,
    /// The server to glassbox (stdout).
    ServerToClient,
}

/// One line of the MCP stdio stream, kept raw.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TranscriptEntry {
    /// Sequence number within the transcript, from 1.
    pub seq: u64,
    /// Nanoseconds since the start of the run.
    pub t_ns: u64,
    /// Direction.
    pub dir: Direction,
    /// The phase the line belongs to.
    pub phase: Phase,
    /// Whether the line parsed as a JSON-RPC message; non-JSON lines are kept and skipped.
    pub json: bool,
    /// The line as sent or received, without its newline (cut at the line limit, see
    /// `truncated`).
    pub raw: Bytes,
    /// Set when the line was longer than the reader's limit and only its start is kept.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
}

/// A planted fake secret.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Honeytoken {
    /// Absolute path inside the sandbox.
    pub path: String,
    /// What it imitates (`ssh-ed25519-key`, `aws-credentials`...).
    pub kind: String,
    /// Secret values inside the file (for matching them in outbound data later).
    pub secrets: Vec<String>,
}

/// A mount of the sandbox's private root.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MountRecord {
    /// Where it appears inside the sandbox.
    pub target: String,
    /// What it is (`bind:/usr`, `tmpfs`, `proc`...).
    pub source: String,
    /// Whether it is read-only.
    pub read_only: bool,
}

/// How the sandbox was set up for this run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SandboxSettings {
    /// Isolation backend (`namespaces`).
    pub backend: String,
    /// Namespaces entered (`user`, `mount`, `pid`, `net`, `ipc`, `uts`, `cgroup`).
    pub namespaces: Vec<String>,
    /// The server's uid and gid inside the sandbox.
    pub uid: u32,
    /// The host uid the sandbox uid maps to.
    pub host_uid: u32,
    /// The home directory inside the sandbox.
    pub home: String,
    /// The working directory inside the sandbox.
    pub cwd: String,
    /// The hostname inside the sandbox.
    pub hostname: String,
    /// Network: `loopback-only` (no route out at all).
    pub network: String,
    /// Whether `no_new_privs` was set.
    pub no_new_privs: bool,
    /// Every mount of the private root.
    pub mounts: Vec<MountRecord>,
    /// The environment given to the server.
    pub env: Vec<String>,
    /// The planted fake secrets.
    pub honeytokens: Vec<Honeytoken>,
}

/// How the recorder worked in this run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RecorderSettings {
    /// The mechanism (`seccomp-user-notify`).
    pub mechanism: String,
    /// The system calls it records.
    pub syscalls: Vec<String>,
    /// Channels this run could observe (`syscalls`, `mcp-transcript`...).
    pub channels: Vec<String>,
    /// Notifications that could not be decoded (the process vanished, memory unreadable).
    pub lost: u64,
}

/// Start and end of one phase.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PhaseTiming {
    /// The phase.
    pub phase: Phase,
    /// Start, in ns since the start of the run.
    pub start_ns: u64,
    /// End, in ns since the start of the run.
    pub end_ns: u64,
}

/// A check and the version of its logic that evaluated this evidence.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckVersion {
    /// Stable check id.
    pub id: String,
    /// Version of the check's logic.
    pub version: u32,
}

/// What was audited.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Target {
    /// The command as given.
    pub command: Vec<String>,
    /// The program that was executed, resolved on the host.
    pub program: String,
    /// The directory glassbox was started in (visible to the server, read-only).
    pub cwd: String,
}

/// How the server process ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "how", rename_all = "snake_case")]
pub enum ServerExit {
    /// Exited with a status code.
    Exited {
        /// The status.
        code: i32,
    },
    /// Killed by a signal.
    Signaled {
        /// The signal number.
        signal: i32,
        /// Whether glassbox sent it (end of the session or a bound reached).
        by_glassbox: bool,
    },
    /// Still running when glassbox stopped recording (it was then killed).
    Running,
}

/// Everything about a run except the event streams: `manifest.json`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// Bundle format version.
    pub format: u32,
    /// The glassbox version.
    pub glassbox_version: String,
    /// Unique id of the run.
    pub run_id: String,
    /// Wall-clock start (RFC 3339).
    pub started_at: String,
    /// Wall-clock end (RFC 3339), once finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
    /// `uname -srvm` of the host.
    pub kernel: String,
    /// What was run.
    pub target: Target,
    /// The sandbox.
    pub sandbox: SandboxSettings,
    /// The recorder.
    pub recorder: RecorderSettings,
    /// Versions of the checks that evaluated the evidence.
    pub checks: Vec<CheckVersion>,
    /// Phase timings.
    pub timings: Vec<PhaseTiming>,
    /// How the server ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_exit: Option<ServerExit>,
    /// What the session achieved.
    #[serde(default)]
    pub session: SessionSummary,
}

/// What the MCP session achieved.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SessionSummary {
    /// The protocol version the server answered with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol_version: Option<String>,
    /// `serverInfo` from the `initialize` result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_info: Option<serde_json::Value>,
    /// Whether the session ran to its end (every planned request answered or timed out).
    pub completed: bool,
    /// Why the session could not complete, when it did not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
    /// The server closed its stdout before the session's end (it crashed or exited).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub server_closed_stdout: bool,
    /// The tools the server listed and what happened when each was called.
    pub tools: Vec<ToolRecord>,
    /// Names of the resources listed.
    pub resources: Vec<String>,
    /// Names of the prompts listed.
    pub prompts: Vec<String>,
    /// Non-JSON lines the server wrote on stdout (recorded and skipped).
    pub non_json_lines: u64,
}

/// The result of calling one tool.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallResult {
    /// A result without `isError`.
    Ok,
    /// A result with `isError: true`.
    ToolError,
    /// A JSON-RPC error response.
    RpcError,
    /// No answer within the per-request timeout.
    Timeout,
    /// Not called (the session ended first).
    NotCalled,
}

/// A tool the server listed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolRecord {
    /// The tool's name, as the server gave it.
    pub name: String,
    /// Its description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Its `inputSchema`.
    #[serde(default)]
    pub input_schema: serde_json::Value,
    /// Whether glassbox called it.
    pub called: bool,
    /// The arguments glassbox generated for the call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<serde_json::Value>,
    /// What the call returned.
    pub result: CallResult,
    /// Whether it was listed again, unchanged, in the final `tools/list`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relisted_unchanged: Option<bool>,
}

/// All the evidence of one run, in memory: what checks evaluate.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Evidence {
    /// The manifest.
    pub manifest: Manifest,
    /// The recorded events, in order.
    pub events: Vec<Event>,
    /// The MCP transcript.
    pub transcript: Vec<TranscriptEntry>,
}

impl Evidence {
    /// The home directory inside the sandbox, with a trailing `/`.
    pub fn home_prefix(&self) -> String {
        let home = self.manifest.sandbox.home.trim_end_matches('/');
        format!("{home}/")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The hand-written serializer says exactly what serde's derive with `flatten` would.
    #[test]
    fn events_serialize_as_the_derived_format() {
        #[derive(Serialize)]
        struct Derived<'a> {
            id: u64,
            t_ns: u64,
            pid: i32,
            ppid: i32,
            phase: &'a Phase,
            #[serde(flatten)]
            kind: &'a EventKind,
        }
        let kinds = vec![
            EventKind::Exec {
                syscall: "execve".into(),
                path: Bytes::from("/bin/sh"),
                argv: vec![Bytes::from("sh"), Bytes(vec![0xff])],
            },
            EventKind::Open {
                syscall: "openat".into(),
                path: Bytes::from("/home/u/.ssh/id_rsa"),
                flags: 0o2101,
                flags_text: "O_WRONLY|O_CREAT|O_APPEND".into(),
                result: Some(-2),
            },
            EventKind::Open {
                syscall: "open".into(),
                path: Bytes::from("/x"),
                flags: 0,
                flags_text: "O_RDONLY".into(),
                result: None,
            },
            EventKind::Stat {
                syscall: "statx".into(),
                path: Bytes::from("/home/u/.gnupg"),
            },
            EventKind::Connect {
                syscall: "sendto".into(),
                fd: 3,
                addr: SockAddr::Inet6 {
                    ip: "2001:db8::1".into(),
                    port: 53,
                },
            },
            EventKind::Bind {
                fd: 4,
                addr: SockAddr::Unix {
                    path: Bytes::from("agent"),
                    is_abstract: true,
                },
            },
            EventKind::Socket {
                domain: 2,
                sock_type: 1,
                protocol: 0,
            },
        ];
        for kind in kinds {
            let e = Event {
                id: 7,
                t_ns: 99,
                pid: 2,
                ppid: 1,
                phase: Phase::Call("a b".into()),
                kind,
            };
            let derived = serde_json::to_string(&Derived {
                id: e.id,
                t_ns: e.t_ns,
                pid: e.pid,
                ppid: e.ppid,
                phase: &e.phase,
                kind: &e.kind,
            })
            .unwrap();
            let manual = serde_json::to_string(&e).unwrap();
            assert_eq!(manual, derived);
            assert_eq!(serde_json::from_str::<Event>(&manual).unwrap(), e);
        }
    }
}
