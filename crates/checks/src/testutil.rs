//! Hand-built evidence for unit tests.

use glassbox_model::{
    Bytes, DnsQuery, Event, EventKind, Evidence, Flow, FlowProtocol, Honeytoken, HttpRequest,
    Manifest, NetworkMode, NetworkRun, Phase, RecorderSettings, SandboxSettings, SessionSummary,
    SockAddr,
};

/// An evidence builder: home `/home/user`, working directory `/home/user/project`, channels
/// `syscalls`, `mcp-transcript`, `packet-edge` and `network-denied-run`, a completed session,
/// no events, no flows.
pub(crate) struct Ev(Evidence);

impl Ev {
    pub(crate) fn new() -> Self {
        Ev(Evidence {
            manifest: Manifest {
                run_id: "run-1".into(),
                sandbox: SandboxSettings {
                    home: "/home/user".into(),
                    cwd: "/home/user/project".into(),
                    ..SandboxSettings::default()
                },
                recorder: RecorderSettings {
                    channels: vec![
                        "syscalls".into(),
                        "mcp-transcript".into(),
                        "packet-edge".into(),
                        "network-denied-run".into(),
                        "left-files".into(),
                    ],
                    ..RecorderSettings::default()
                },
                session: SessionSummary {
                    completed: true,
                    ..SessionSummary::default()
                },
                ..Manifest::default()
            },
            events: Vec::new(),
            transcript: Vec::new(),
            flows: Vec::new(),
        })
    }

    pub(crate) fn channels(mut self, names: &[&str]) -> Self {
        self.0.manifest.recorder.channels = names.iter().map(|s| s.to_string()).collect();
        self
    }

    pub(crate) fn incomplete(mut self, failure: &str) -> Self {
        self.0.manifest.session.completed = false;
        self.0.manifest.session.failure = Some(failure.into());
        self
    }

    /// The marker of the generated tool arguments.
    pub(crate) fn marker(mut self, m: &str) -> Self {
        self.0.manifest.session.input_marker = Some(m.into());
        self
    }

    /// The address the plan gave URL parameters as the cloud metadata service's.
    pub(crate) fn metadata_probe(mut self, ip: &str) -> Self {
        self.0.manifest.session.metadata_probe = Some(ip.into());
        self
    }

    /// The server's working directory.
    pub(crate) fn cwd(mut self, cwd: &str) -> Self {
        self.0.manifest.target.cwd = cwd.into();
        self
    }

    /// The `k`-th call of `tool` sent `arguments` (its phase is `Phase::call(tool, k)`).
    pub(crate) fn call(mut self, tool: &str, k: u32, arguments: serde_json::Value) -> Self {
        let tools = &mut self.0.manifest.session.tools;
        if !tools.iter().any(|t| t.name == tool) {
            tools.push(glassbox_model::ToolRecord {
                name: tool.into(),
                description: None,
                input_schema: serde_json::json!({"type": "object"}),
                called: true,
                arguments_note: None,
                arguments: None,
                result: glassbox_model::CallResult::Ok,
                calls: Vec::new(),
                relisted_unchanged: None,
            });
        }
        let t = tools.iter_mut().find(|t| t.name == tool).unwrap();
        t.calls.push(glassbox_model::CallRecord {
            k,
            label: String::new(),
            arguments,
            result: glassbox_model::CallResult::Ok,
            retry_of: None,
            error: None,
        });
        self
    }

    /// A line the server sent during `phase`.
    pub(crate) fn answer(mut self, phase: Phase, raw: &str) -> Self {
        let seq = self.0.transcript.len() as u64 + 1;
        self.0.transcript.push(glassbox_model::TranscriptEntry {
            seq,
            t_ns: seq,
            dir: glassbox_model::Direction::ServerToClient,
            phase,
            json: true,
            raw: Bytes::from(raw),
            truncated: false,
        });
        self
    }

    pub(crate) fn home(mut self, home: &str) -> Self {
        self.0.manifest.sandbox.home = home.into();
        self
    }

    pub(crate) fn honeytoken(mut self, path: &str) -> Self {
        self.0.manifest.sandbox.honeytokens.push(Honeytoken {
            path: path.into(),
            kind: "test".into(),
            secrets: vec![],
            ..Default::default()
        });
        self
    }

    pub(crate) fn event(mut self, pid: i32, phase: Phase, kind: EventKind) -> Self {
        let id = self.0.events.len() as u64 + 1;
        self.0.events.push(Event {
            id,
            t_ns: id * 1000,
            pid,
            ppid: 1,
            phase,
            kind,
        });
        self
    }

    pub(crate) fn open(self, path: impl Into<Bytes>, flags: u64, phase: Phase) -> Self {
        self.open_result(path, flags, None, phase)
    }

    pub(crate) fn open_result(
        self,
        path: impl Into<Bytes>,
        flags: u64,
        result: Option<i64>,
        phase: Phase,
    ) -> Self {
        self.event(
            2,
            phase,
            EventKind::Open {
                syscall: "openat".into(),
                path: path.into(),
                flags,
                flags_text: String::new(),
                result,
            },
        )
    }

    pub(crate) fn stat(self, path: impl Into<Bytes>, phase: Phase) -> Self {
        self.event(
            2,
            phase,
            EventKind::Stat {
                syscall: "newfstatat".into(),
                path: path.into(),
            },
        )
    }

    /// An exec with its parent pid.
    pub(crate) fn exec_as(
        self,
        pid: i32,
        ppid: i32,
        path: &str,
        argv: &[&str],
        phase: Phase,
    ) -> Self {
        let mut ev = self.exec(pid, path, argv, phase);
        if let Some(e) = ev.0.events.last_mut() {
            e.ppid = ppid;
        }
        ev
    }

    pub(crate) fn exec(self, pid: i32, path: &str, argv: &[&str], phase: Phase) -> Self {
        self.event(
            pid,
            phase,
            EventKind::Exec {
                syscall: "execve".into(),
                path: path.into(),
                argv: argv.iter().map(|a| Bytes::from(*a)).collect(),
            },
        )
    }

    /// Adds the server's own start: `node server.js`, pid 2.
    pub(crate) fn server_start(self) -> Self {
        self.exec(
            2,
            "/usr/bin/node",
            &["node", "/home/user/project/server.js"],
            Phase::Startup,
        )
    }

    /// Adds a planted secret file with the secret values inside it.
    pub(crate) fn honeytoken_secrets(mut self, path: &str, kind: &str, secrets: &[&str]) -> Self {
        self.0.manifest.sandbox.honeytokens.push(Honeytoken {
            path: path.into(),
            kind: kind.into(),
            secrets: secrets.iter().map(|s| s.to_string()).collect(),
            ..Default::default()
        });
        self
    }

    /// The last planted file's secrets are for `name`, at `hosts` (`honeytokens[].services`).
    pub(crate) fn service(mut self, name: &str, hosts: &[&str]) -> Self {
        if let Some(h) = self.0.manifest.sandbox.honeytokens.last_mut() {
            h.services.push(glassbox_model::SecretService {
                name: name.into(),
                hosts: hosts.iter().map(|h| h.to_string()).collect(),
                secrets: Vec::new(),
            });
        }
        self
    }

    /// A connect-family event (`syscall`: connect, sendto, sendmsg, sendmmsg) by pid 2 to
    /// `to` (see [`addr`]).
    pub(crate) fn connect_with(self, syscall: &str, to: &str, phase: Phase) -> Self {
        self.event(
            2,
            phase,
            EventKind::Connect {
                syscall: syscall.into(),
                fd: 3,
                addr: addr(to),
                sock_type: None,
            },
        )
    }

    /// A `connect` by pid 2 to `to` of a socket of type `sock_type` (1 stream, 2 datagram).
    pub(crate) fn connect_typed(self, to: &str, sock_type: i32, phase: Phase) -> Self {
        self.event(
            2,
            phase,
            EventKind::Connect {
                syscall: "connect".into(),
                fd: 3,
                addr: addr(to),
                sock_type: Some(sock_type),
            },
        )
    }

    /// A `connect` by pid 2 to `to` (see [`addr`]).
    pub(crate) fn connect(self, to: &str, phase: Phase) -> Self {
        self.connect_with("connect", to, phase)
    }

    /// A `bind` by `pid` of `at` (see [`addr`]).
    pub(crate) fn bind(self, pid: i32, at: &str, phase: Phase) -> Self {
        self.event(
            pid,
            phase,
            EventKind::Bind {
                fd: 3,
                addr: addr(at),
            },
        )
    }

    /// Adds a flow, numbered after the flows before it.
    pub(crate) fn flow(mut self, f: F) -> Self {
        let mut f = f.0;
        f.id = self.0.flows.len() as u64 + 1;
        self.0.flows.push(f);
        self
    }

    /// A network run of `mode` over events `first..end`; the first one added makes the runs
    /// explicit.
    pub(crate) fn run(mut self, mode: NetworkMode, first: u64, end: u64) -> Self {
        self.0.manifest.network.runs.push(NetworkRun {
            mode,
            first_event: first,
            end_event: end,
            ..NetworkRun::default()
        });
        self
    }

    /// The install run over events `first..end`, which relayed `registry` (`HOST:PORT`).
    pub(crate) fn install_run(mut self, first: u64, end: u64, registry: &[&str]) -> Self {
        self.0.manifest.network.runs.push(NetworkRun {
            mode: NetworkMode::Install,
            first_event: first,
            end_event: end,
            allow: registry.iter().map(|s| s.to_string()).collect(),
            ..NetworkRun::default()
        });
        self
    }

    /// The user's allow list.
    pub(crate) fn allow(mut self, hosts: &[&str]) -> Self {
        self.0.manifest.network.allow = hosts.iter().map(|s| s.to_string()).collect();
        self
    }

    /// What the audited entry explains, as a bundle from before `manifest.network.names`
    /// stored it (`manifest.network.explained`): `(host, why)`, each covering its subdomains.
    pub(crate) fn explained(mut self, hosts: &[(&str, &str)]) -> Self {
        self.0.manifest.network.explained = hosts
            .iter()
            .map(|(h, why)| glassbox_model::ExplainedHost {
                host: h.to_string(),
                subdomains: true,
                why: why.to_string(),
                ..Default::default()
            })
            .collect();
        self
    }

    /// The canary Unix sockets.
    pub(crate) fn canary_sockets(mut self, paths: &[&str]) -> Self {
        self.0.manifest.network.canary_sockets = paths.iter().map(|s| s.to_string()).collect();
        self
    }

    pub(crate) fn build(self) -> Evidence {
        self.0
    }
}

/// A socket address from text: `192.0.2.1:443`, `[2001:db8::1]:443`, `unix:/path`,
/// `unix:@name` (abstract).
pub(crate) fn addr(s: &str) -> SockAddr {
    if let Some(path) = s.strip_prefix("unix:") {
        return match path.strip_prefix('@') {
            Some(name) => SockAddr::Unix {
                path: name.into(),
                is_abstract: true,
            },
            None => SockAddr::Unix {
                path: path.into(),
                is_abstract: false,
            },
        };
    }
    if let Some(rest) = s.strip_prefix('[') {
        let (ip, port) = rest.split_once("]:").expect("[ip6]:port");
        return SockAddr::Inet6 {
            ip: ip.into(),
            port: port.parse().unwrap(),
        };
    }
    match s.split_once(':') {
        Some((ip, port)) => SockAddr::Inet {
            ip: ip.into(),
            port: port.parse().unwrap(),
        },
        None => SockAddr::Inet {
            ip: s.into(),
            port: 0,
        },
    }
}

/// A flow builder: capture mode, one packet, nothing sent, no events.
pub(crate) struct F(pub(crate) Flow);

impl F {
    pub(crate) fn new(protocol: FlowProtocol, dst: &str) -> F {
        F(Flow {
            id: 0,
            mode: NetworkMode::Capture,
            t_ns: 0,
            end_ns: 0,
            protocol,
            src: None,
            dst: addr(dst),
            dns_name: None,
            dns: None,
            sni: None,
            http: None,
            packets_out: 1,
            bytes_out: 0,
            bytes_in: 0,
            sample: Bytes::default(),
            sample_truncated: false,
            events: Vec::new(),
            note: None,
            ..Default::default()
        })
    }

    pub(crate) fn tcp(dst: &str) -> F {
        F::new(FlowProtocol::Tcp, dst)
    }

    /// The edge could not read this flow, for `why`.
    pub(crate) fn unread(mut self, why: &str) -> F {
        self.0.unread = Some(why.into());
        self
    }

    /// A TLS stream the edge terminated whose handshake did not complete (`why`): unread.
    pub(crate) fn tls_refused(mut self, why: &str) -> F {
        self.0.tls = Some(glassbox_model::TlsRecord {
            alpn_offered: Vec::new(),
            alpn: None,
            version: None,
            certificate_for: None,
            outcome: glassbox_model::TlsOutcome::Refused { why: why.into() },
        });
        self.unread(why)
    }

    pub(crate) fn udp(dst: &str) -> F {
        F::new(FlowProtocol::Udp, dst)
    }

    pub(crate) fn icmp(dst: &str) -> F {
        F::new(FlowProtocol::Icmp, dst)
    }

    pub(crate) fn unix(path: &str) -> F {
        F::new(FlowProtocol::Unix, &format!("unix:{path}"))
    }

    /// A DNS question for `name` (type `qtype`) to the sandbox's resolver.
    pub(crate) fn dns(name: &str, qtype: &str) -> F {
        let mut f = F::new(FlowProtocol::Dns, "198.18.0.2:53");
        f.0.dns = Some(DnsQuery {
            name: name.into(),
            qtype: qtype.into(),
            answers: Vec::new(),
        });
        f
    }

    /// The edge's answers to a DNS question.
    pub(crate) fn answers(mut self, addrs: &[&str]) -> F {
        if let Some(q) = &mut self.0.dns {
            q.answers = addrs.iter().map(|s| s.to_string()).collect();
        }
        self
    }

    pub(crate) fn to(mut self, dst: &str) -> F {
        self.0.dst = addr(dst);
        self
    }

    pub(crate) fn src(mut self, src: &str) -> F {
        self.0.src = Some(addr(src));
        self
    }

    /// The name the synthetic destination was handed out for.
    pub(crate) fn name(mut self, name: &str) -> F {
        self.0.dns_name = Some(name.into());
        self
    }

    pub(crate) fn sni(mut self, sni: &str) -> F {
        self.0.sni = Some(sni.into());
        self
    }

    pub(crate) fn http(mut self, method: &str, target: &str, host: Option<&str>) -> F {
        self.0.http = Some(HttpRequest {
            method: method.into(),
            target: target.into(),
            host: host.map(Bytes::from),
        });
        self
    }

    /// What was sent (also its byte count).
    pub(crate) fn sample(mut self, b: impl Into<Bytes>) -> F {
        self.0.sample = b.into();
        self.0.bytes_out = self.0.sample.0.len() as u64;
        self
    }

    pub(crate) fn packets(mut self, n: u64) -> F {
        self.0.packets_out = n;
        self
    }

    /// The syscall events matched with the flow.
    pub(crate) fn events(mut self, ids: &[u64]) -> F {
        self.0.events = ids.to_vec();
        self
    }

    pub(crate) fn denied(mut self) -> F {
        self.0.mode = NetworkMode::Denied;
        self
    }

    /// A flow of the install run.
    pub(crate) fn install(mut self) -> F {
        self.0.mode = NetworkMode::Install;
        self
    }
}

/// A ClientHello's bytes as a client sends them (its body filler, `body` bytes long), in
/// records of at most `record` handshake bytes.
pub(crate) fn client_hello(body: usize, record: usize) -> Vec<u8> {
    let mut handshake = vec![1, 0, (body >> 8) as u8, body as u8];
    handshake.extend(std::iter::repeat_n(0x42, body));
    let mut out = Vec::new();
    for chunk in handshake.chunks(record) {
        out.extend([0x16, 3, 1, (chunk.len() >> 8) as u8, chunk.len() as u8]);
        out.extend_from_slice(chunk);
    }
    out
}

/// The summaries of an evaluation's findings, in order.
pub(crate) fn summaries(eval: crate::Evaluation) -> Vec<String> {
    eval.findings.into_iter().map(|f| f.summary).collect()
}

/// One tool, called once with each of `calls` (`manifest.session.tools`).
pub(crate) fn tool_calls(
    tool: &str,
    calls: Vec<serde_json::Value>,
) -> Vec<glassbox_model::ToolRecord> {
    use glassbox_model::{CallRecord, CallResult, ToolRecord};
    vec![ToolRecord {
        name: tool.into(),
        description: None,
        input_schema: serde_json::json!({}),
        called: true,
        arguments_note: None,
        arguments: None,
        result: CallResult::Ok,
        calls: calls
            .into_iter()
            .enumerate()
            .map(|(i, arguments)| CallRecord {
                k: i as u32 + 1,
                label: String::new(),
                arguments,
                result: CallResult::Ok,
                retry_of: None,
                error: None,
            })
            .collect(),
        relisted_unchanged: None,
    }]
}
