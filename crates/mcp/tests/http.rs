//! Sessions over HTTP against a real HTTP server (`tests/servers/http_server.py`, Python's
//! standard library) on 127.0.0.1 with an ephemeral port: streamable HTTP with JSON and event
//! stream responses, every protocol version, the legacy HTTP+SSE transport, and servers that
//! misbehave.

mod common;

use common::{
    assert_consistent, messages, meta_lines, quick, run_http, sent_methods, HttpServer, Run,
};
use glassbox_mcp::{
    run, tcp_connector, CallResult, Direction, HttpKind, HttpTarget, Phase, SessionConfig,
    Transport, SUPPORTED_PROTOCOL_VERSIONS,
};
use serde_json::json;
use std::net::TcpListener;
use std::time::Duration;

fn session(args: &[&str], cfg: &SessionConfig) -> Run {
    let server = HttpServer::python(args);
    run_http(server.target("/mcp"), cfg)
}

fn results(r: &Run) -> Vec<(String, CallResult)> {
    r.summary
        .tools
        .iter()
        .map(|t| (t.name.clone(), t.result))
        .collect()
}

#[test]
fn legacy_streamable_session_with_event_streams_and_server_requests() {
    let r = session(&["--versions", "2025-11-25", "--mode", "sse"], &quick());
    let s = &r.summary;
    assert_eq!(s.failure, None);
    assert_eq!(s.protocol_version.as_deref(), Some("2025-11-25"));
    assert_eq!(s.server_info.as_ref().unwrap()["name"], "http-test-server");
    // `ask` got its four server requests answered inside its stream; the server checked the
    // answers (a ping result, -32601 for the rest).
    assert_eq!(
        results(&r),
        [
            ("echo".to_string(), CallResult::Ok),
            ("ask".to_string(), CallResult::Ok)
        ]
    );
    assert_eq!(s.non_json_lines, 0);
    assert!(!s.server_closed_stdout);
    assert_consistent(&r.hooks);

    let entries = r.hooks.entries();
    assert_eq!(
        sent_methods(&entries),
        [
            "server/discover",
            "initialize",
            "notifications/initialized",
            "tools/list",
            "tools/call",
            "tools/call",
            // `ask`'s elicitation was declined: the call made again, accepting.
            "tools/call",
            "tools/list"
        ]
    );
    let sent = meta_lines(&entries, Direction::ClientToServer);
    let received = meta_lines(&entries, Direction::ServerToClient);
    // The probe was refused the way a legacy server does (400 with a text body, kept).
    assert!(received[0].starts_with("HTTP/1.1 400"), "{received:?}");
    assert_eq!(received[1], "Bad Request: No valid session ID provided");
    // The session id of the initialize response went on every later request, the negotiated
    // version too; never before.
    let session_id = received[2]
        .lines()
        .find_map(|l| l.strip_prefix("Mcp-Session-Id: "))
        .expect("a session id")
        .to_string();
    let posts: Vec<&String> = sent
        .iter()
        .filter(|h| h.starts_with("POST /mcp "))
        .collect();
    assert!(posts[0].contains("\r\nMcp-Method: server/discover"));
    assert!(posts[0].contains("\r\nMCP-Protocol-Version: 2026-07-28"));
    assert!(!posts[1].contains("Mcp-Session-Id") && !posts[1].contains("MCP-Protocol-Version"));
    for head in &posts[2..] {
        assert!(
            head.contains(&format!("\r\nMcp-Session-Id: {session_id}")),
            "{head}"
        );
        assert!(
            head.contains("\r\nMCP-Protocol-Version: 2025-11-25"),
            "{head}"
        );
        assert!(head.contains("\r\nAccept: application/json, text/event-stream"));
    }
    // The optional GET stream was opened and what it said recorded.
    assert!(sent.iter().any(|h| h.starts_with("GET /mcp HTTP/1.1")
        && h.contains("Accept: text/event-stream")
        && h.contains(&session_id)));
    let msgs = messages(&entries);
    assert!(msgs
        .iter()
        .any(|(_, _, m)| m["params"]["data"] == "hello from the GET stream"));
    // Inside the stream of `ask`: notifications, four server requests, four replies POSTed.
    let in_ask: Vec<_> = msgs
        .iter()
        .filter(|(_, phase, _)| *phase == Phase::Call("ask".into()))
        .collect();
    assert!(in_ask
        .iter()
        .any(|(_, _, m)| m["method"] == "notifications/tools/list_changed"));
    let replies: Vec<_> = in_ask
        .iter()
        .filter(|(dir, _, m)| *dir == Direction::ClientToServer && m.get("method").is_none())
        .map(|(_, _, m)| m.clone())
        .collect();
    assert_eq!(replies.len(), 4, "{replies:#?}");
    assert!(replies.contains(&json!({"jsonrpc": "2.0", "id": "s-ping", "result": {}})));
    let reply = |id: &str| replies.iter().find(|m| m["id"] == id).unwrap()["result"].clone();
    assert_eq!(reply("s-sampling")["role"], "assistant");
    assert_eq!(reply("s-roots"), json!({"roots": []}));
    assert_eq!(reply("s-elicit"), json!({"action": "decline"}));
    // The priming events (an id, empty data) are not messages.
    assert!(!entries.iter().any(|e| e.raw.as_slice().is_empty()));
    // The session ended with a DELETE of the server's session.
    let delete = entries
        .iter()
        .find(|e| e.raw.as_slice().starts_with(b"DELETE /mcp HTTP/1.1"))
        .expect("a DELETE");
    assert_eq!(delete.phase, Phase::Shutdown);
    assert!(delete.raw.as_str().unwrap().contains(&session_id));
}

#[test]
fn stateless_session_with_json_responses() {
    let r = session(
        &["--versions", "2025-06-18,2026-07-28", "--mode", "json"],
        &quick(),
    );
    let s = &r.summary;
    assert_eq!(s.failure, None);
    assert_eq!(s.protocol_version.as_deref(), Some("2026-07-28"));
    // From the DiscoverResult's _meta.
    assert_eq!(s.server_info.as_ref().unwrap()["name"], "http-test-server");
    // The server checked Mcp-Method, Mcp-Name and the Mcp-Param-* headers of `echo` against
    // the body (a mismatch would have been a -32020 error); `confirm` asked for input and got
    // the answers on the retry (its elicitation declined, then on the call made again accepted).
    assert_eq!(
        results(&r),
        [
            ("echo".to_string(), CallResult::Ok),
            ("confirm".to_string(), CallResult::Ok)
        ]
    );
    let entries = r.hooks.entries();
    assert_eq!(
        sent_methods(&entries),
        [
            "server/discover",
            "tools/list",
            "tools/call",
            "tools/call",
            "tools/call",
            "tools/call",
            "tools/call",
            "tools/list"
        ]
    );
    let msgs = messages(&entries);
    let retry = msgs
        .iter()
        .filter(|(dir, _, m)| *dir == Direction::ClientToServer && m["params"]["name"] == "confirm")
        .nth(1)
        .expect("a retry")
        .2
        .clone();
    assert_eq!(
        retry["params"]["inputResponses"],
        json!({
            "ok": {"action": "decline"},
            "dirs": {"roots": []},
            "llm": {
                "role": "assistant",
                "content": {"type": "text", "text": glassbox_mcp::surface::SAMPLING_TEXT},
                "model": "glassbox",
                "stopReason": "endTurn",
            },
        })
    );
    assert_eq!(retry["params"]["requestState"], "state-1");
    let sent = meta_lines(&entries, Direction::ClientToServer);
    assert!(sent.iter().all(|h| !h.contains("Mcp-Session-Id")));
    assert!(
        sent.iter().all(|h| h.starts_with("POST ")),
        "no GET, no DELETE"
    );
    let echo = sent
        .iter()
        .find(|h| h.contains("Mcp-Name: echo"))
        .expect("the echo call");
    assert!(echo.contains("\r\nMcp-Method: tools/call\r\n"));
    assert!(echo.contains("\r\nMcp-Param-Text: glassbox"), "{echo}");
    assert!(
        echo.contains("\r\nMcp-Param-Loud: true") || echo.contains("\r\nMcp-Param-Loud: false")
    );
    assert!(sent
        .iter()
        .all(|h| h.contains("\r\nMCP-Protocol-Version: 2026-07-28")));
}

#[test]
fn each_version_is_negotiated_over_http() {
    for (i, version) in SUPPORTED_PROTOCOL_VERSIONS.iter().enumerate() {
        let mode = ["json", "sse", "chunked"][i % 3];
        let r = session(&["--versions", version, "--mode", mode], &quick());
        let s = &r.summary;
        assert_eq!(s.failure, None, "{version} {mode}");
        assert_eq!(s.protocol_version.as_deref(), Some(*version), "{mode}");
        assert!(
            results(&r).iter().all(|(_, c)| *c == CallResult::Ok),
            "{version} {mode}: {:?}",
            results(&r)
        );
        assert_eq!(s.non_json_lines, 0);
    }
}

#[test]
fn legacy_sse_transport() {
    let server = HttpServer::python(&["--legacy-sse", "--versions", "2024-11-05"]);
    let mut target = server.target("/sse");
    target.kind = HttpKind::LegacySse;
    let r = run_http(target, &quick());
    let s = &r.summary;
    assert_eq!(s.failure, None);
    assert_eq!(s.protocol_version.as_deref(), Some("2024-11-05"));
    assert!(results(&r).iter().all(|(_, c)| *c == CallResult::Ok));
    assert_eq!(s.non_json_lines, 0);
    assert_consistent(&r.hooks);
    let entries = r.hooks.entries();
    // No probe on the legacy transport.
    assert_eq!(sent_methods(&entries)[0], "initialize");
    let sent = meta_lines(&entries, Direction::ClientToServer);
    let received = meta_lines(&entries, Direction::ServerToClient);
    assert!(sent[0].starts_with("GET /sse HTTP/1.1"));
    let endpoint = received
        .iter()
        .find_map(|l| l.strip_prefix("event: endpoint\n"))
        .expect("the endpoint event");
    assert!(endpoint.starts_with("/messages/?session_id="));
    assert!(sent[1].starts_with(&format!("POST {endpoint} HTTP/1.1")));
    // The POSTs' answers carry no message: kept as meta lines.
    assert!(received.iter().any(|l| l == "Accepted"));
    // Server messages came on the stream: the log notification sent during each call.
    let msgs = messages(&entries);
    assert!(msgs
        .iter()
        .any(|(_, phase, m)| *phase == Phase::Call("echo".into())
            && m["method"] == "notifications/message"));
}

#[test]
fn a_stream_closed_before_the_answer_is_resumed() {
    // 2025-11-25 polling: the server closes the call's stream after a priming event with an
    // id and `retry: 100`; the answer comes on the GET that resumes it.
    let r = session(
        &[
            "--versions",
            "2025-11-25",
            "--mode",
            "json",
            "--bad",
            "poll",
        ],
        &quick(),
    );
    assert_eq!(r.summary.failure, None);
    assert!(results(&r).iter().all(|(_, c)| *c == CallResult::Ok));
    let sent = meta_lines(&r.hooks.entries(), Direction::ClientToServer);
    assert!(sent
        .iter()
        .any(|h| h.starts_with("GET /mcp ") && h.contains("\r\nLast-Event-ID: poll-")));
}

#[test]
fn chunked_bodies_are_decoded() {
    let r = session(&["--versions", "2025-06-18", "--mode", "chunked"], &quick());
    assert_eq!(r.summary.failure, None);
    assert!(results(&r).iter().all(|(_, c)| *c == CallResult::Ok));
    let received = meta_lines(&r.hooks.entries(), Direction::ServerToClient);
    assert!(received
        .iter()
        .any(|h| h.contains("Transfer-Encoding: chunked")));
}

fn failure_of(bad: &str, cfg: &SessionConfig) -> (String, Run) {
    let r = session(&["--mode", "json", "--bad", bad], cfg);
    assert!(!r.summary.completed, "{bad}");
    (r.summary.failure.clone().unwrap(), r)
}

#[test]
fn malformed_http_is_a_clear_failure() {
    let (failure, r) = failure_of("garbage", &quick());
    assert_eq!(
        failure,
        "bad HTTP response to initialize: malformed HTTP response: invalid HTTP version"
    );
    // What the server sent instead is kept.
    let received = meta_lines(&r.hooks.entries(), Direction::ServerToClient);
    assert!(received.iter().any(|l| l.starts_with("HELLO THERE")));
}

#[test]
fn a_body_bigger_than_the_bound_is_cut_and_fails_the_request() {
    let cfg = SessionConfig {
        max_line_bytes: 100_000,
        ..quick()
    };
    let (failure, r) = failure_of("huge", &cfg);
    assert_eq!(
        failure,
        "bad HTTP response to tools/list: response body larger than 100000 bytes"
    );
    let cut = r
        .hooks
        .entries()
        .into_iter()
        .find(|e| e.truncated)
        .expect("the cut body");
    assert_eq!(cut.raw.as_slice().len(), 100_000);
    assert!(!cut.json);
}

#[test]
fn wrong_content_type_is_a_clear_failure() {
    let (failure, _) = failure_of("content-type", &quick());
    assert_eq!(
        failure,
        "bad HTTP response to tools/list: HTTP 200 OK with content-type \"text/plain\" \
         (expected application/json or text/event-stream)"
    );
}

#[test]
fn malformed_chunked_body_is_a_clear_failure() {
    let (failure, _) = failure_of("bad-chunked", &quick());
    assert_eq!(
        failure,
        "bad HTTP response to tools/list: malformed chunked body: invalid chunk size"
    );
}

#[test]
fn a_body_without_the_answer_is_a_clear_failure() {
    let (failure, _) = failure_of("no-answer", &quick());
    assert_eq!(
        failure,
        "bad HTTP response to tools/list: HTTP 200 OK with no answer to request 2 in its body"
    );
}

#[test]
fn an_event_stream_that_never_ends_times_out_and_the_session_goes_on() {
    let cfg = SessionConfig {
        request_timeout: Duration::from_secs(2),
        ..quick()
    };
    let r = session(&["--mode", "json", "--bad", "endless"], &cfg);
    assert_eq!(r.summary.failure, None);
    assert_eq!(
        results(&r),
        [
            ("echo".to_string(), CallResult::Timeout),
            ("confirm".to_string(), CallResult::Timeout)
        ]
    );
    // The final listing was answered after the timed-out streams.
    assert_eq!(
        sent_methods(&r.hooks.entries()).last().unwrap(),
        "tools/list"
    );
    // The progress the endless streams sent was recorded, in the calls' phases.
    assert!(messages(&r.hooks.entries()).iter().any(|(_, phase, m)| {
        *phase == Phase::Call("echo".into()) && m["method"] == "notifications/progress"
    }));
}

#[test]
fn an_http_error_fails_the_call_not_the_session() {
    let r = session(&["--mode", "json", "--bad", "status-500"], &quick());
    assert_eq!(r.summary.failure, None);
    assert!(results(&r).iter().all(|(_, c)| *c == CallResult::RpcError));
    let received = meta_lines(&r.hooks.entries(), Direction::ServerToClient);
    assert!(received
        .iter()
        .any(|l| l == "<html><body>Internal Server Error</body></html>"));
    assert_eq!(r.summary.non_json_lines, 0);
}

#[test]
fn a_server_that_is_not_there_is_a_clear_failure() {
    let port = {
        let listener = TcpListener::bind("127.0.0.1:0").unwrap();
        listener.local_addr().unwrap()
    };
    let target = HttpTarget::new(
        tcp_connector(port, Duration::from_secs(2)),
        port.to_string(),
        "/mcp",
    );
    let r = run_http(target, &quick());
    let failure = r.summary.failure.unwrap();
    assert!(
        failure.starts_with("could not connect to the server during server/discover: "),
        "{failure}"
    );
    // Refused at once, not given up on after the connect timeout.
    assert!(failure.contains("refused"), "{failure}");
}

#[test]
fn an_invalid_target_is_refused_before_anything_is_sent() {
    let server = HttpServer::python(&[]);
    let mut target = server.target("/mcp");
    target
        .headers
        .push(("X-Evil".into(), "a\r\nInjected: yes".into()));
    let hooks = common::Recorder::new();
    let s = run(Transport::Http(target), &quick(), &hooks);
    assert_eq!(
        s.failure.as_deref(),
        Some("invalid HTTP target: invalid header \"X-Evil\": value has control characters")
    );
    assert!(hooks.entries().is_empty());
}
