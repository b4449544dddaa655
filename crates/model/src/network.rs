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
    /// The trigger run: as capture, with the server's world changed (its clock moved
    /// forward, an environment that looks like a CI runner or a developer's machine), so
    /// that what waits for a date, for uptime or for such a machine shows
    /// ([`crate::TriggerRun`] says what was changed).
    Trigger,
}

impl NetworkMode {
    /// `capture`, `denied`, `install` or `trigger`.
    pub fn name(self) -> &'static str {
        match self {
            NetworkMode::Capture => "capture",
            NetworkMode::Denied => "denied",
            NetworkMode::Install => "install",
            NetworkMode::Trigger => "trigger",
        }
    }

    /// Whether the edge answers in this mode (DNS, TCP): every mode but denied.
    pub fn answers(self) -> bool {
        self != NetworkMode::Denied
    }
}

/// What kind of traffic a flow is.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Hash, Serialize, Deserialize)]
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
    #[default]
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
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
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
    /// Ids of the syscall events matched with this flow (connect, sendto, sendmsg, sendmmsg):
    /// derived, not recorded. `glassbox_checks::links` sets it before the checks run (from
    /// the bundle's events, whatever a flow carried); the bundle's `network.jsonl` leaves it
    /// empty (older bundles carry the pairing glassbox made then, which is redone).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub events: Vec<u64>,
    /// Anything odd about it (malformed packets, a parse that failed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
    /// TLS at the edge: the stream began with a ClientHello (capture runs).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls: Option<TlsRecord>,
    /// The first decrypted bytes the sandbox sent inside TLS, up to [`FLOW_SAMPLE_LIMIT`]
    /// (what `sample` is for a stream in clear).
    #[serde(default, skip_serializing_if = "Bytes::is_empty")]
    pub cleartext: Bytes,
    /// Decrypted bytes beyond what `cleartext` kept.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub cleartext_cut: u64,
    /// The HTTP exchanges read on the stream (in clear, or inside TLS), in order, at most
    /// [`EXCHANGE_LIMIT`].
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub exchanges: Vec<HttpExchange>,
    /// Exchanges beyond [`EXCHANGE_LIMIT`], counted.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub exchanges_cut: u64,
    /// Why what this flow carried could not be read, when it could not (a client that refused
    /// glassbox's certificate, TLS that does not start the stream, QUIC): no check may say
    /// it saw nothing there.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub unread: Option<String>,
}

/// Exchanges kept per flow; the others are counted (`Flow::exchanges_cut`).
pub const EXCHANGE_LIMIT: usize = 64;

/// The most of a request body kept per exchange, decoded (de-chunked, decompressed); the rest
/// is counted.
pub const BODY_LIMIT: usize = 64 * 1024;

/// TLS at the edge, for one flow.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct TlsRecord {
    /// The application protocols the client offered (ALPN), as sent.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub alpn_offered: Vec<Bytes>,
    /// The protocol agreed, once the handshake finished (`http/1.1`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub alpn: Option<String>,
    /// The TLS version agreed (`TLSv1_3`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub version: Option<String>,
    /// The name on the certificate glassbox presented (the SNI, or the address asked for).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub certificate_for: Option<String>,
    /// What came of it.
    pub outcome: TlsOutcome,
}

/// What became of a TLS stream at the edge.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum TlsOutcome {
    /// The client accepted glassbox's certificate: what it sent was read in clear.
    Read,
    /// The client did not go on with glassbox's certificate (an alert, or it closed during
    /// the handshake): encrypted, not read.
    Refused {
        /// What it said or did.
        why: String,
    },
    /// Not terminated (`--responder refuse`, a relayed registry connection): encrypted, not
    /// read by glassbox.
    NotTerminated {
        /// Why.
        why: String,
    },
}

/// One HTTP/1.x request read at the edge and what glassbox answered it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct HttpExchange {
    /// When its request's head had arrived (ns since the start of the audit, the flows'
    /// clock): the phase that sent it, which on a kept-alive connection need not be the one
    /// that opened it. 0 in bundles from before it was recorded.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub t_ns: u64,
    /// The method.
    pub method: String,
    /// The request target (path or absolute URL).
    pub target: Bytes,
    /// The headers, in order, as sent (at most 100; their values as bytes).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub headers: Vec<(String, Bytes)>,
    /// The body, de-chunked and decompressed (`Content-Encoding` gzip, deflate, br), at most
    /// [`BODY_LIMIT`] bytes.
    #[serde(default, skip_serializing_if = "Bytes::is_empty")]
    pub body: Bytes,
    /// The body's length as decoded (what `body` kept and what it did not).
    #[serde(default, skip_serializing_if = "is_zero")]
    pub body_len: u64,
    /// Why the body could not be decoded, when it could not (its raw bytes are then `body`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub body_error: Option<String>,
    /// The status glassbox answered with (its own synthetic response; 0: not answered).
    pub status: u16,
    /// A DNS-over-HTTPS request (RFC 8484's `application/dns-message`, POSTed or in a `?dns=`
    /// GET, or the JSON API's `?name=`): its question, with the addresses the edge's DNS
    /// answered it with (the same synthetic ones as over port 53; none when not answered).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dns: Option<DnsQuery>,
    /// A request in the form of DNS over HTTPS whose DNS message the edge could not read: why
    /// (answered `400`, as a resolver would).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub dns_error: Option<String>,
}

impl HttpExchange {
    /// A header's value, by name (ASCII case-insensitive), the first one.
    pub fn header(&self, name: &str) -> Option<&Bytes> {
        self.headers
            .iter()
            .find(|(n, _)| n.eq_ignore_ascii_case(name))
            .map(|(_, v)| v)
    }
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
    /// Written by older glassbox builds only, and never read: the calls no flow took
    /// are derived by `glassbox_checks::links` from the events and flows of the bundle,
    /// every time checks run (raw evidence stays raw).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
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
    /// What the trigger run changed of the server's world (the `trigger` mode's run only).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub trigger: Option<TriggerRun>,
}

/// What a trigger run changed of the server's world, against the capture run.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TriggerRun {
    /// How many days the server's clocks were moved forward (wall, monotonic and boot
    /// clocks); `None`: not moved.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub clock_offset_days: Option<u32>,
    /// The machine the environment made the server's look like: `ci` (a CI runner) or
    /// `developer` (an interactive developer's machine); `None`: the capture run's.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub environment: Option<String>,
    /// The variables set for it, by name (their values are in the docs, `docs/triggers.md`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub variables: Vec<String>,
    /// What the moved clock could not reach: the programs of the run whose wall clock stayed
    /// the host's (statically linked, or started without the shim).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub limits: Vec<String>,
}

impl TriggerRun {
    /// Whether two runs changed the same things (their variables and limits aside).
    pub fn same_triggers(&self, other: &TriggerRun) -> bool {
        self.clock_offset_days == other.clock_offset_days && self.environment == other.environment
    }

    /// The triggers, as a finding says what brought a behaviour out: "the clock moved +400
    /// days and a CI runner's environment".
    pub fn describe(&self) -> String {
        let mut parts = Vec::new();
        if let Some(d) = self.clock_offset_days {
            parts.push(format!("the clock moved +{d} days"));
        }
        match self.environment.as_deref() {
            Some("ci") => parts.push("a CI runner's environment".to_string()),
            Some("developer") => parts.push("a developer machine's environment".to_string()),
            Some(other) => parts.push(format!("a {other} environment")),
            None => {}
        }
        if parts.is_empty() {
            "nothing changed".to_string()
        } else {
            parts.join(" and ")
        }
    }
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
    /// The certificate authority made for this audit, which the sandbox trusts and the edge
    /// signs its certificates with (its key never leaves glassbox's process).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tls_authority: Option<TlsAuthority>,
    /// What the edge answers: `ok` (synthetic responses, TLS terminated) or `refuse`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub responder: String,
    /// The names the audited entry gives itself, as given, each with where it came from (its
    /// environment and arguments, its `server.json`, its package's metadata). Which
    /// destinations they explain is the checks' rule (`glassbox_checks::explain`), derived
    /// again by each evaluation: a change of it is a change of a locked check.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub names: Vec<EntryName>,
    /// What bundles before `names` stored: the explained destinations as the audit derived
    /// them. Read only when `names` is empty; never written.
    #[serde(default, skip_serializing)]
    pub explained: Vec<ExplainedHost>,
}

/// A host the audited entry names, as it named it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EntryName {
    /// Where it comes from: `environment` and `arguments` (the user's configuration of the
    /// entry), `server-json` (the registry's entry for the server), `npm` or `pypi` (the
    /// package's metadata as its registry publishes it).
    pub by: String,
    /// The field that holds it: a variable's name, `websiteUrl`, `homepage`, `Project-URL
    /// Documentation`; empty for an argument.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub field: String,
    /// The host (lower-case, no trailing dot) or IP address.
    pub host: String,
    /// The value was the host itself (`DB_HOST=db.example`), not a URL naming it.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub bare: bool,
}

/// A destination the audited entry names, and what names it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ExplainedHost {
    /// A host name (lower-case, no trailing dot) or an IP address.
    pub host: String,
    /// Whether names under it are explained too (`api.vendor.example` by `vendor.example`).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub subdomains: bool,
    /// Where it comes from: `environment` and `arguments` (the user's configuration of the
    /// entry), `declared-secret`, `server-json`, `package` (its metadata), `planted`.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub by: String,
    /// What names it: "the package's homepage domain, vendor.example (npm `homepage`)".
    pub why: String,
}

impl ExplainedHost {
    /// Whether the user's own configuration of the entry names it (its environment or its
    /// arguments), not the package's author.
    pub fn configured(&self) -> bool {
        matches!(self.by.as_str(), "environment" | "arguments")
    }
}

/// The audit's own certificate authority, as the manifest records it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct TlsAuthority {
    /// Its certificate, PEM.
    pub certificate_pem: String,
    /// The SHA-256 of its certificate's DER, hex.
    pub sha256: String,
    /// Its subject.
    pub subject: String,
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
