//! End-to-end sessions against real (small, stdlib-only Python) MCP servers in
//! `tests/servers/`, run directly without a sandbox.

mod common;

use common::{assert_consistent, parse, quick, run_child, sent_methods, spawn, Run};
use glassbox_mcp::{CallResult, Direction, Phase, SessionConfig, SurfaceKind, TranscriptEntry};
use serde_json::{json, Value};
use std::io::Read;
use std::time::Duration;

fn run(server: &str, args: &[&str], cfg: &SessionConfig) -> Run {
    run_child(spawn(server, args, &[]), cfg)
}

#[test]
fn normal_server_full_session() {
    let r = run("normal.py", &[], &quick());
    let s = &r.summary;
    assert_eq!(s.failure, None);
    assert!(s.completed);
    // The legacy server refused the 2026-07-28 probe; initialize offered the latest legacy
    // version and the server took it.
    assert_eq!(s.protocol_version.as_deref(), Some("2025-11-25"));
    assert_eq!(
        s.server_info.as_ref().unwrap()["name"],
        "normal-test-server"
    );
    let names: Vec<&str> = s.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(names, ["echo", "read_file", "add"]);
    let results: Vec<CallResult> = s.tools.iter().map(|t| t.result).collect();
    assert_eq!(
        results,
        [CallResult::Ok, CallResult::ToolError, CallResult::Ok]
    );
    assert!(s.tools.iter().all(|t| t.called));
    assert_eq!(s.tools[0].arguments, Some(json!({"text": "glassbox"})));
    assert_eq!(
        s.tools[1].arguments,
        Some(json!({"path": "glassbox-probe.txt"}))
    );
    assert_eq!(s.tools[2].arguments, Some(json!({"a": 10, "b": -5})));
    assert_eq!(s.tools[2].description.as_deref(), Some("Add two integers"));
    assert!(s.tools.iter().all(|t| t.relisted_unchanged == Some(true)));
    assert_eq!(s.resources, ["readme", "mem://notes"]);
    assert_eq!(s.prompts, ["summarize"]);
    assert_eq!(s.non_json_lines, 0);

    assert_eq!(
        r.hooks.phases(),
        [
            Phase::Initialize,
            Phase::List,
            Phase::Call("echo".into()),
            Phase::Call("read_file".into()),
            Phase::Call("add".into()),
            Phase::Read("file:///readme.md".into()),
            Phase::Read("mem://notes".into()),
            Phase::Prompt("summarize".into()),
            Phase::List,
            Phase::Shutdown,
        ]
    );
    assert_consistent(&r.hooks);
    let entries = r.hooks.entries();
    assert_eq!(
        sent_methods(&entries),
        [
            "server/discover",
            "initialize",
            "notifications/initialized",
            "tools/list",
            "tools/list",
            "resources/list",
            "resources/templates/list",
            "prompts/list",
            "tools/call",
            "tools/call",
            "tools/call",
            "resources/read",
            "resources/read",
            "prompts/get",
            "tools/list",
            "tools/list",
        ]
    );
    // A server without templates (-32601) is not a cut.
    assert!(s.surface_cut.is_empty(), "{:?}", s.surface_cut);
    let discover = parse(&entries[0]);
    assert_eq!(entries[0].phase, Phase::Initialize);
    assert_eq!(
        discover["params"]["_meta"],
        json!({
            "io.modelcontextprotocol/protocolVersion": "2026-07-28",
            "io.modelcontextprotocol/clientCapabilities": {
                "roots": {"listChanged": false},
                "sampling": {},
                "elicitation": {"form": {}, "url": {}},
            },
            "io.modelcontextprotocol/clientInfo": {"name": "glassbox", "version": "0.1.0"},
        })
    );
    assert_eq!(parse(&entries[1])["error"]["code"], -32601);
    let init = parse(&entries[2]);
    assert_eq!(entries[2].dir, Direction::ClientToServer);
    assert_eq!(entries[2].phase, Phase::Initialize);
    assert_eq!(init["params"]["protocolVersion"], "2025-11-25");
    assert_eq!(
        init["params"]["capabilities"],
        glassbox_mcp::surface::client_capabilities("2025-11-25")
    );
    assert_eq!(init["params"]["clientInfo"]["name"], "glassbox");
    assert!(init["params"].get("_meta").is_none());
    // The server's answer is kept byte for byte (Python's separators, not serde_json's).
    assert_eq!(entries[3].dir, Direction::ServerToClient);
    assert_eq!(entries[3].phase, Phase::Initialize);
    let raw = entries[3].raw.as_str().unwrap();
    assert!(
        raw.starts_with(r#"{"jsonrpc": "2.0", "id": 2, "result": {"#),
        "{raw}"
    );
    assert!(entries.iter().all(|e| e.json && !e.truncated));
    // The second page asked with the cursor.
    assert_eq!(parse(&entries[7])["params"]["cursor"], "page-2");
    // Every request got its answer, in the request's phase.
    let answers = entries
        .iter()
        .filter(|e| e.dir == Direction::ServerToClient)
        .count();
    assert_eq!(
        answers, 15,
        "the templates listing, two reads and a get besides"
    );
    let call = entries
        .iter()
        .find(|e| e.dir == Direction::ServerToClient && e.phase == Phase::Call("add".into()))
        .unwrap();
    assert_eq!(parse(call)["result"]["content"][0]["text"], "5");
    // t_ns grows.
    assert!(entries.windows(2).all(|w| w[0].t_ns <= w[1].t_ns));
    // stdin was closed: the server saw the end and exited by itself.
    assert!(r.exit.expect("server exited").success());
}

#[test]
fn changed_tool_definition_is_detected() {
    let r = run("normal.py", &["--drift"], &quick());
    assert!(r.summary.completed, "{:?}", r.summary.failure);
    let relisted: Vec<Option<bool>> = r
        .summary
        .tools
        .iter()
        .map(|t| t.relisted_unchanged)
        .collect();
    assert_eq!(relisted, [Some(true), Some(true), Some(false)]);
}

#[test]
fn number_of_tools_is_bounded() {
    let cfg = SessionConfig {
        max_tools: 2,
        ..quick()
    };
    let r = run("normal.py", &[], &cfg);
    let s = &r.summary;
    assert_eq!(
        s.failure.as_deref(),
        Some("tools/list listed more than 2 tools: only the first 2 are called")
    );
    let names: Vec<&str> = s.tools.iter().map(|t| t.name.as_str()).collect();
    assert_eq!(
        names,
        ["echo", "read_file", "add"],
        "add reappears in the final listing"
    );
    assert!(!s.tools[2].called);
}

#[test]
fn older_protocol_version_is_accepted() {
    let cfg = SessionConfig {
        protocol_version: "2024-11-05".into(),
        ..quick()
    };
    let r = run("normal.py", &[], &cfg);
    assert!(r.summary.completed, "{:?}", r.summary.failure);
    assert_eq!(r.summary.protocol_version.as_deref(), Some("2024-11-05"));
}

#[test]
fn non_json_lines_are_recorded_and_skipped() {
    let r = run("noisy.py", &[], &quick());
    let s = &r.summary;
    assert!(s.completed, "{:?}", s.failure);
    assert_eq!(s.tools[0].result, CallResult::Ok);
    // 3 at start, one per request (initialize, tools/list, tools/call, tools/list), and "bye"
    // after stdin closed.
    assert_eq!(s.non_json_lines, 8);
    assert_consistent(&r.hooks);
    let entries = r.hooks.entries();
    let junk: Vec<&TranscriptEntry> = entries.iter().filter(|e| !e.json).collect();
    assert_eq!(junk.len(), 8);
    assert!(junk.iter().all(|e| e.dir == Direction::ServerToClient));
    assert_eq!(
        junk[0].raw.as_str(),
        Some("Starting noisy server v1 on stdio...")
    );
    assert_eq!(junk[1].raw.as_slice(), b"\xff\xfe binary junk \x00\x01");
    assert_eq!(junk[2].raw.as_slice(), b"");
    assert_eq!(junk[3].raw.as_str(), Some("DEBUG handling initialize"));
    assert_eq!(junk[5].phase, Phase::Call("noisy_tool".into()));
    assert_eq!(junk[7].raw.as_str(), Some("bye"));
    assert_eq!(junk[7].phase, Phase::Shutdown);
}

#[test]
fn unsolicited_lines_stop_being_stored_after_the_cap() {
    let cfg = SessionConfig {
        max_noise_lines: 10,
        ..quick()
    };
    let r = run("noisy.py", &["50"], &cfg);
    let s = &r.summary;
    assert!(s.completed, "{:?}", s.failure);
    assert_eq!(s.non_json_lines, 58);
    let entries = r.hooks.entries();
    let junk: Vec<&TranscriptEntry> = entries.iter().filter(|e| !e.json).collect();
    // 10 stored, then the note.
    assert_eq!(junk.len(), 11);
    let note = junk[10].raw.as_str().unwrap();
    assert!(
        note.starts_with("glassbox: transcript storage capped after 10 unsolicited lines"),
        "{note}"
    );
    // Answers to glassbox's requests are still stored.
    assert_eq!(
        entries
            .iter()
            .filter(|e| e.dir == Direction::ServerToClient && e.json)
            .count(),
        5
    );
}

#[test]
fn server_that_never_answers_times_out_initialize() {
    let cfg = SessionConfig {
        request_timeout: Duration::from_secs(1),
        ..quick()
    };
    let r = run("silent.py", &[], &cfg);
    assert!(!r.summary.completed);
    assert_eq!(
        r.summary.failure.as_deref(),
        Some("no answer to initialize within 1s")
    );
    assert_eq!(r.hooks.phases(), [Phase::Initialize, Phase::Shutdown]);
    // stdin was closed at shutdown: the silent server's read loop ended.
    assert!(r.exit.expect("server exited").success());
}

#[test]
fn server_crashing_after_initialize() {
    let r = run("crash.py", &["after-init"], &quick());
    assert!(!r.summary.completed);
    assert_eq!(
        r.summary.failure.as_deref(),
        Some("server closed stdout after initialize")
    );
    assert_eq!(r.summary.protocol_version.as_deref(), Some("2025-11-25"));
    assert_eq!(r.exit.and_then(|e| e.code()), Some(3));
    assert_consistent(&r.hooks);
}

#[test]
fn server_crashing_during_a_call() {
    let r = run("crash.py", &["during-call"], &quick());
    let s = &r.summary;
    assert!(!s.completed);
    assert_eq!(
        s.failure.as_deref(),
        Some("server closed stdout during call:boom")
    );
    let outcome: Vec<(bool, CallResult)> = s.tools.iter().map(|t| (t.called, t.result)).collect();
    assert_eq!(
        outcome,
        [
            (true, CallResult::Ok),
            (true, CallResult::NotCalled),
            (false, CallResult::NotCalled)
        ]
    );
    assert!(s.tools.iter().all(|t| t.relisted_unchanged.is_none()));
    assert_eq!(
        r.hooks.phases().last(),
        Some(&Phase::Shutdown),
        "shutdown still happens"
    );
}

#[test]
fn server_exiting_at_once() {
    let r = run("crash.py", &["immediately"], &quick());
    assert_eq!(
        r.summary.failure.as_deref(),
        Some("server closed stdout during server/discover")
    );
}

#[test]
fn writing_to_a_server_that_closed_stdin_is_a_failure_not_a_panic() {
    let mut child = spawn("crash.py", &["close-stdin"], &[]);
    // Wait until the server has closed its stdin, so the first write fails for sure.
    let mut stdout = child.stdout.take().unwrap();
    let mut byte = [0u8; 1];
    let mut ready = Vec::new();
    while !ready.ends_with(b"\n") {
        stdout.read_exact(&mut byte).unwrap();
        ready.push(byte[0]);
    }
    assert_eq!(ready, b"stdin closed\n");
    child.stdout = Some(stdout);
    let r = run_child(child, &quick());
    let failure = r.summary.failure.unwrap();
    assert!(
        failure.starts_with("could not write to the server during server/discover: "),
        "{failure}"
    );
    assert!(failure.contains("Broken pipe"), "{failure}");
}

#[test]
fn flood_of_garbage_keeps_memory_bounded() {
    let cfg = SessionConfig {
        request_timeout: Duration::from_secs(60),
        shutdown_grace: Duration::from_millis(500),
        ..SessionConfig::default()
    };
    let r = run("flood.py", &[], &cfg);
    let s = &r.summary;
    assert!(s.completed, "{:?}", s.failure);
    assert_eq!(s.tools[0].result, CallResult::Ok);
    assert_eq!(s.non_json_lines, 4 + 500_000);
    let entries = r.hooks.entries();
    let stored: usize = entries.iter().map(|e| e.raw.as_slice().len()).sum();
    assert!(stored <= (64 << 20) + 4096, "{stored} bytes stored");
    let long: Vec<&TranscriptEntry> = entries.iter().filter(|e| e.truncated).collect();
    assert_eq!(long.len(), 4);
    assert!(long
        .iter()
        .all(|e| e.raw.as_slice().len() == 16 << 20 && !e.json));
    let notes: Vec<&TranscriptEntry> = entries
        .iter()
        .filter(|e| {
            e.raw
                .as_str()
                .is_some_and(|t| t.starts_with("glassbox: transcript storage capped"))
        })
        .collect();
    assert_eq!(notes.len(), 1);
    // The short garbage lines were counted, not stored.
    assert!(entries.len() < 100, "{} entries", entries.len());
}

#[test]
fn server_requests_get_a_cautious_clients_answers() {
    let cfg = SessionConfig {
        roots: vec!["/work/my project".into()],
        ..quick()
    };
    let r = run("server_requests.py", &[], &cfg);
    let s = &r.summary;
    assert!(s.completed, "{:?}", s.failure);
    assert_eq!(
        s.tools[0].result,
        CallResult::Ok,
        "the server checked the answers"
    );
    assert_consistent(&r.hooks);
    let entries = r.hooks.entries();
    let in_call: Vec<Value> = entries
        .iter()
        .filter(|e| e.phase == Phase::Call("ask".into()))
        .map(parse)
        .collect();
    let replies = entries
        .iter()
        .filter(|e| e.phase == Phase::Call("ask".into()) && e.dir == Direction::ClientToServer)
        .filter(|e| parse(e).get("method").is_none())
        .count();
    assert_eq!(replies, 4, "{in_call:#?}");
    let reply = |id: Value| {
        in_call
            .iter()
            .find(|m| m["id"] == id && m.get("method").is_none())
            .cloned()
            .unwrap_or_else(|| panic!("no reply to {id}: {in_call:#?}"))
    };
    assert_eq!(reply(json!("p-1"))["result"], json!({}));
    let sampled = reply(json!(7));
    assert_eq!(sampled["result"]["role"], "assistant");
    assert_eq!(
        sampled["result"]["content"]["text"],
        glassbox_mcp::surface::SAMPLING_TEXT
    );
    assert_eq!(
        reply(json!("r-1"))["result"]["roots"],
        json!([{"uri": "file:///work/my%20project", "name": "workspace"}])
    );
    // The first elicitation declined; the call made again, accepting.
    assert_eq!(reply(json!(8))["result"]["action"], "decline");
    assert_eq!(s.tools[0].calls.len(), 2, "{:#?}", s.tools[0].calls);
    assert_eq!(
        s.tools[0].calls[1].label,
        "all properties, elicitation accepted"
    );
    let accepted: Vec<Value> = entries
        .iter()
        .filter(|e| e.phase == Phase::call("ask", 2) && e.dir == Direction::ClientToServer)
        .map(parse)
        .filter(|m| m["id"] == 8)
        .collect();
    assert_eq!(accepted[0]["result"]["action"], "accept", "{accepted:#?}");
    for (method, n) in [
        ("ping", 2),
        ("sampling/createMessage", 2),
        ("roots/list", 2),
        ("elicitation/create", 2),
    ] {
        assert_eq!(s.server_requests.get(method), Some(&n), "{method}");
    }
    // Notifications were recorded in the call's phase.
    assert!(in_call
        .iter()
        .any(|m| m["method"] == "notifications/tools/list_changed"));
}

#[test]
fn the_whole_surface_is_exercised_within_the_plans() {
    let cfg = SessionConfig {
        explore: glassbox_mcp::Explore::quick(),
        input_marker: Some("gbxm4rk".into()),
        ..quick()
    };
    let r = run("surface.py", &[], &cfg);
    let s = &r.summary;
    assert!(s.completed, "{:?}", s.failure);
    assert_consistent(&r.hooks);
    assert_eq!(s.resources, ["a", "b"], "both pages");
    assert_eq!(s.templates, ["file:///{path}", "notes://{name}{?q}"]);
    assert_eq!(s.prompts, ["review"]);
    assert!(s.surface_cut.is_empty(), "{:?}", s.surface_cut);
    let kinds: Vec<(SurfaceKind, &str)> = s
        .surface
        .iter()
        .map(|x| (x.kind, x.name.as_str()))
        .collect();
    assert_eq!(
        kinds,
        [
            (SurfaceKind::Resource, "res://a"),
            (SurfaceKind::Resource, "res://b"),
            (SurfaceKind::Template, "file:///{path}"),
            (SurfaceKind::Template, "notes://{name}{?q}"),
            (SurfaceKind::Prompt, "review"),
        ]
    );
    // A listed resource: one read, its phase its URI.
    assert_eq!(s.surface[0].reads.len(), 1);
    assert_eq!(s.surface[0].reads[0].phase, Phase::Read("res://a".into()));
    assert_eq!(s.surface[0].reads[0].result, CallResult::Ok);
    // A template: read through several expansions; a path-like variable got the traversal
    // probe, the values percent-encoded (RFC 6570 `{path}`).
    let file = &s.surface[2];
    assert!(file.reads.len() > 1, "{:#?}", file.reads);
    let uris: Vec<String> = file.reads.iter().map(|r| r.phase.to_string()).collect();
    assert!(
        uris.iter().all(|u| u.starts_with("read:file:///")),
        "{uris:?}"
    );
    assert!(uris.iter().any(|u| u.contains("..%2F")), "{uris:?}");
    // The prompt: got with string arguments, completions asked for each argument first.
    let prompt = &s.surface[4];
    assert_eq!(prompt.reads[0].phase, Phase::Prompt("review".into()));
    assert_eq!(prompt.completions, 2);
    let got: Vec<Value> = r
        .hooks
        .entries()
        .iter()
        .filter(|e| e.dir == Direction::ClientToServer && e.phase == Phase::Prompt("review".into()))
        .map(parse)
        .filter(|m| m["method"] == "prompts/get")
        .collect();
    assert!(
        got[0]["params"]["arguments"]["code"].is_string(),
        "{got:#?}"
    );
    // The sampling request came in the prompt's phase, and was answered.
    assert_eq!(
        s.server_requests.get("sampling/createMessage"),
        Some(&(prompt.reads.len() as u64))
    );
    // The tool's elicitation: declined, then accepted with a canary for the token.
    let ask = &s.tools[0];
    assert_eq!(ask.calls.len(), 2, "{:#?}", ask.calls);
    assert_eq!(s.elicited.len(), 1, "{:#?}", s.elicited);
    assert_eq!(s.elicited[0].field, "token");
    assert_eq!(s.elicited[0].phase, Phase::call("ask_user", 2));
    let answer = r
        .hooks
        .entries()
        .iter()
        .filter(|e| e.dir == Direction::ServerToClient && e.phase == Phase::call("ask_user", 2))
        .map(parse)
        .find(|m| m.get("result").is_some())
        .unwrap();
    let given: Value =
        serde_json::from_str(answer["result"]["content"][0]["text"].as_str().unwrap()).unwrap();
    assert_eq!(given["action"], "accept");
    assert_eq!(given["content"]["format"], "markdown");
    assert_eq!(given["content"]["token"], json!(s.elicited[0].value));
}

#[test]
fn a_flood_of_server_requests_gets_bounded_answers_and_the_session_goes_on() {
    let r = run("asks_forever.py", &["300"], &quick());
    let s = &r.summary;
    assert!(s.completed, "{:?}", s.failure);
    assert_eq!(s.tools[0].result, CallResult::Ok);
    let answer = r
        .hooks
        .entries()
        .iter()
        .filter(|e| e.dir == Direction::ServerToClient)
        .map(parse)
        .find(|m| m["result"]["content"].is_array())
        .unwrap();
    let got: Value =
        serde_json::from_str(answer["result"]["content"][0]["text"].as_str().unwrap()).unwrap();
    let bound = glassbox_mcp::surface::MAX_REQUESTS_PER_PHASE as u64;
    assert_eq!(got, json!({"result": bound, "error": 300 - bound}));
    let asked: u64 = s.server_requests.values().sum();
    assert_eq!(asked, 300 + 300, "both calls: {:?}", s.server_requests);
}

#[test]
fn tools_only_says_what_it_left_out() {
    let cfg = SessionConfig {
        surface: false,
        ..quick()
    };
    let r = run("surface.py", &[], &cfg);
    let s = &r.summary;
    assert!(s.completed, "{:?}", s.failure);
    assert!(s.surface.is_empty());
    assert_eq!(s.resources, ["a", "b"], "still listed");
    let sent = sent_methods(&r.hooks.entries());
    assert!(!sent
        .iter()
        .any(|m| m == "resources/read" || m == "prompts/get"));
    assert_eq!(s.surface_cut.len(), 1, "{:?}", s.surface_cut);
}

fn failure_of(mode: &str) -> String {
    let r = run("invalid.py", &[mode], &quick());
    assert!(!r.summary.completed, "{mode}");
    r.summary.failure.unwrap()
}

#[test]
fn invalid_initialize_answers() {
    assert_eq!(
        failure_of("init-not-object"),
        "invalid JSON-RPC: initialize result is not an object"
    );
    assert_eq!(
        failure_of("bad-version"),
        "server answered unsupported protocol version \"1999-01-01\""
    );
    assert_eq!(
        failure_of("init-error"),
        "initialize failed: JSON-RPC error -32600: nope"
    );
    assert_eq!(
        failure_of("wrong-id"),
        "no answer to initialize within 5s (ignored a response with id \"2\" while waiting for id 2)"
    );
    assert_eq!(
        failure_of("list-not-object"),
        "invalid JSON-RPC: tools/list result is not an object"
    );
}

#[test]
fn malformed_messages_are_skipped_and_bad_calls_recorded() {
    let cfg = SessionConfig {
        request_timeout: Duration::from_secs(2),
        ..quick()
    };
    let r = run("invalid.py", &["junk-then-ok"], &cfg);
    let s = &r.summary;
    assert!(s.completed, "{:?}", s.failure);
    assert_eq!(s.non_json_lines, 0, "junk lines are valid JSON");
    let results: Vec<(&str, CallResult)> = s
        .tools
        .iter()
        .map(|t| (t.name.as_str(), t.result))
        .collect();
    assert_eq!(
        results,
        [
            ("not_object", CallResult::RpcError),
            ("rpc_error", CallResult::RpcError),
            ("hang", CallResult::Timeout),
            ("both", CallResult::RpcError),
            ("ok", CallResult::Ok),
        ]
    );
    // The duplicate `ok` kept its first definition.
    assert_eq!(s.tools[4].description, None);
    let entries = r.hooks.entries();
    let sent = sent_methods(&entries);
    assert!(sent.contains(&"notifications/cancelled".to_string()));
    // Every junk line is in the transcript, in the initialize phase.
    let junk = entries
        .iter()
        .filter(|e| e.phase == Phase::Initialize && e.dir == Direction::ServerToClient)
        .count();
    assert_eq!(junk, 1 + 12 + 1);
    // The `id: null` ping was not answered: nothing but server/discover, initialize and
    // initialized was sent.
    assert_eq!(
        entries
            .iter()
            .filter(|e| e.phase == Phase::Initialize && e.dir == Direction::ClientToServer)
            .count(),
        3
    );
}

#[test]
fn repeating_cursor_ends_the_listing() {
    let r = run("invalid.py", &["loop-cursor"], &quick());
    let s = &r.summary;
    assert!(!s.completed);
    assert_eq!(
        s.failure.as_deref(),
        Some("tools/list repeated cursor \"again\"")
    );
    assert_eq!(s.tools.len(), 1);
    assert_eq!(s.tools[0].result, CallResult::Ok);
}

#[test]
fn endless_pages_are_bounded() {
    let cfg = SessionConfig {
        max_pages: 5,
        ..quick()
    };
    let r = run("invalid.py", &["endless-pages"], &cfg);
    let s = &r.summary;
    assert_eq!(
        s.failure.as_deref(),
        Some("tools/list did not end after 5 pages")
    );
    // The final listing went on with new names: they are appended as tools never seen before.
    assert_eq!(s.tools.len(), 10);
    assert!(s.tools[..5]
        .iter()
        .all(|t| t.called && t.result == CallResult::Ok && t.relisted_unchanged == Some(false)));
    assert!(s.tools[5..]
        .iter()
        .all(|t| !t.called && t.relisted_unchanged == Some(false)));
}

#[test]
fn session_timeout_bounds_the_whole_session() {
    // The tools never answer: t1 times out after 3 s, and the session's 5 s end during t2
    // (the server's start-up has the 2 s between, far more than Python takes to start).
    let cfg = SessionConfig {
        request_timeout: Duration::from_secs(3),
        session_timeout: Duration::from_secs(5),
        shutdown_grace: Duration::from_millis(200),
        ..SessionConfig::default()
    };
    let r = run("invalid.py", &["slow-tools"], &cfg);
    let s = &r.summary;
    assert_eq!(
        s.failure.as_deref(),
        Some("session timeout (5s) reached during call:t2")
    );
    let outcome: Vec<(bool, CallResult)> = s.tools.iter().map(|t| (t.called, t.result)).collect();
    assert_eq!(
        outcome,
        [
            (true, CallResult::Timeout),
            (true, CallResult::NotCalled),
            (false, CallResult::NotCalled)
        ]
    );
}
