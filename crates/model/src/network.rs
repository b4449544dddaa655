//! The network edge's evidence: flows (`network.jsonl`) and how each run's edge was set up.

use crate::{Bytes, ServerExit, SessionSummary, SockAddr};
use serde::{Deserialize, Serialize};

/// How the edge treated the packets of a run.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum NetworkMode {
    /// DNS answered with synthetic addresses, TCP accepted and its first bytes recorded.
    #[default]
    Capture,
    /// Every packet dropped and counted; nothing answered.
    Denied,
    /// The install phase: as capture, except that connections to the package registry are
    /// relayed to it (the one destination a run may really reach).
    Install,
}

impl NetworkMode {
    /// `capture`, `denied` or `install`.
    pub fn name(self) -> &'static str {
        match self {
            NetworkMode::Capture => "capture",
            NetworkMode::Denied => "denied",
            NetworkMode::Install => "install",
        }
    }

    /// Whether the edge answers in this mode (DNS, TCP): every mode but denied.
    pub fn answers(self) -> bool {
        self != NetworkMode::Denied
    }
}

/// What kind of traffic a flow is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum FlowProtocol {
    /// A TCP connection (one per 4-tuple).
    Tcp,
    /// UDP datagrams between one source and one destination (DNS aside).
    Udp,
    /// One DNS query (UDP or TCP, any destination address, port 53).
    Dns,
    /// ICMP or ICMPv6 messages to one destination (counted).
    Icmp,
    /// A connection to one of glassbox's canary Unix sockets.
    Unix,
    /// Any other IP protocol, or a packet the edge could not parse.
    Other,
}

/// A DNS question the server asked.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DnsQuery {
    /// The name asked for, as sent (lower-cased is the caller's business).
    pub name: Bytes,
    /// The record type (`A`, `AAAA`, `TXT`...).
    pub qtype: String,
    /// The addresses the edge answered with (capture mode; empty in denied mode).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub answers: Vec<String>,
}

/// An HTTP request seen at the start of a TCP stream.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HttpRequest {
    /// The method.
    pub method: String,
    /// The request target (path or absolute URL).
    pub target: Bytes,
    /// The `Host` header.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub host: Option<Bytes>,
}

/// The most outbound payload kept per flow (its first bytes); the rest is counted.
pub const FLOW_SAMPLE_LIMIT: usize = 64 * 1024;

/// One flow at the network edge (or at a canary socket): one line of `network.jsonl`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Flow {
    /// Unique within the bundle, in the order flows began.
    pub id: u64,
    /// The run it belongs to.
    pub mode: NetworkMode,
    /// First packet, ns since the start of the audit (same clock as events).
    pub t_ns: u64,
    /// Last packet.
    pub end_ns: u64,
    /// What kind of traffic.
    pub protocol: FlowProtocol,
    /// The sender inside the sandbox (address and port), where there is one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub src: Option<SockAddr>,
    /// The destination as the packets carried it.
    pub dst: SockAddr,
    /// The name a synthetic destination address was handed out for by the edge's DNS.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dns_name: Option<Bytes>,
    /// The question, for a DNS flow.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dns: Option<DnsQuery>,
    /// TLS ClientHello server name.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sni: Option<Bytes>,
    /// The HTTP request line and Host.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub http: Option<HttpRequest>,
    /// Packets (datagrams, segments, messages) from the sandbox.
    pub packets_out: u64,
    /// Payload bytes from the sandbox.
    pub bytes_out: u64,
    /// Payload bytes glassbox sent back.
    pub bytes_in: u64,
    /// The first outbound payload bytes, up to [`FLOW_SAMPLE_LIMIT`] (for DNS, the query).
    pub sample: Bytes,
    /// Set when `bytes_out` exceeds what `sample` kept.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub sample_truncated: bool,
    /// Ids of the syscall events matched with this flow (connect, sendto, sendmsg, sendmmsg).
    #[serde(default)]
    pub events: Vec<u64>,
    /// Anything odd about it (malformed packets, a parse that failed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// Counters of one run's edge.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EdgeCounters {
    /// Packets read from the sandbox.
    pub packets: u64,
    /// Their bytes.
    pub bytes: u64,
    /// Packets that did not parse as IPv4 or IPv6 (counted, kept in no flow).
    pub malformed: u64,
    /// Kernel housekeeping of the interface (IPv6 neighbour discovery, MLD): no program
    /// sent them.
    pub housekeeping: u64,
    /// Packets written back to the sandbox.
    pub packets_in: u64,
    /// Packets of flows beyond the flow limit (counted, not kept per flow).
    pub over_limit: u64,
    /// TCP connections the stack refused for lack of room (SYN flood).
    pub refused: u64,
    /// Packets towards the sandbox that were dropped: the edge's queue was full, or the
    /// descriptor would not take them.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub dropped_in: u64,
}

/// For `skip_serializing_if`: a counter that is zero.
fn is_zero(n: &u64) -> bool {
    *n == 0
}

/// How one run's network was set up, and what its edge saw in total.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NetworkRun {
    /// Capture or denied.
    pub mode: NetworkMode,
    /// Start and end of the run, ns since the start of the audit.
    pub start_ns: u64,
    /// End of the run.
    pub end_ns: u64,
    /// Ids of this run's events: `first_event..end_event`.
    pub first_event: u64,
    /// One past the last event id of the run.
    pub end_event: u64,
    /// The interface, its addresses and routes, as set up.
    pub edge: String,
    /// The checks made before the server started: the network namespace is not glassbox's,
    /// its only interfaces are loopback and the edge, and every route leads into the edge.
    pub isolation: Vec<String>,
    /// Whether all of those checks held (a run is refused otherwise).
    pub isolation_verified: bool,
    /// What the edge counted.
    pub counters: EdgeCounters,
    /// Ids of the connect and send events with an IP destination off loopback that no flow
    /// at the edge matched.
    #[serde(default)]
    pub syscalls_without_flow: Vec<u64>,
    /// The session of this run, when it is not the main one (`manifest.session`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub session: Option<SessionSummary>,
    /// How the server of this run ended, when it is not the main one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_exit: Option<ServerExit>,
    /// Destinations this run relayed to the real network (`HOST:PORT`; the install
    /// phase's package registry): expected there, and only there.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub allow: Vec<String>,
}

/// The network of an audit: `manifest.network`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct NetworkSettings {
    /// The runs, in order (capture first when both ran).
    pub runs: Vec<NetworkRun>,
    /// Destinations the user allowed (`--allow-host HOST[:PORT]`).
    #[serde(default)]
    pub allow: Vec<String>,
    /// The resolver the sandbox's `resolv.conf` names.
    #[serde(default)]
    pub resolver: String,
    /// Where the edge's DNS answers come from.
    #[serde(default)]
    pub synthetic_range: String,
    /// The canary Unix sockets (paths inside the sandbox).
    #[serde(default)]
    pub canary_sockets: Vec<String>,
}

impl NetworkSettings {
    /// The mode of the run an event belongs to (capture when no run claims it).
    pub fn mode_of_event(&self, id: u64) -> NetworkMode {
        self.runs
            .iter()
            .find(|r| r.first_event <= id && id < r.end_event)
            .map(|r| r.mode)
            .unwrap_or_default()
    }
}
