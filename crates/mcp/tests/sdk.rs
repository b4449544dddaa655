//! Interoperability with the official Python SDK (`mcp` on PyPI): its servers, driven by
//! glassbox's client. Release 2.3.0 (dual-era: 2026-07-28 and the legacy versions) over stdio,
//! streamable HTTP (stateful with event streams, stateless with JSON) and the legacy HTTP+SSE
//! transport; release 1.30.0 (legacy only, what most published servers still use) over stdio and
//! streamable HTTP, where the `server/discover` probe must fall back to `initialize`.
//!
//! The SDKs are installed by the tests themselves, with pip from PyPI, into virtual
//! environments under Cargo's target temporary directory (once; later runs reuse them).

mod common;

use common::{
    messages, meta_lines, run_child, run_http, sent_methods, server_path, HttpServer, Run,
};
use glassbox_mcp::{CallResult, Direction, HttpKind, Phase, SessionConfig};
use serde_json::{json, Value};
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::sync::Mutex;
use std::time::Duration;

/// The dual-era SDK release.
const SDK2: &str = "mcp==2.3.0";
/// The last legacy-only release.
const SDK1: &str = "mcp==1.30.0";

/// The python of a virtual environment with `sdk`, installing it first if needed.
fn sdk_python(sdk: &str) -> PathBuf {
    static INSTALL: Mutex<()> = Mutex::new(());
    let _one_at_a_time = INSTALL.lock().unwrap_or_else(|e| e.into_inner());
    let dir =
        PathBuf::from(env!("CARGO_TARGET_TMPDIR")).join(format!("venv-{}", sdk.replace("==", "-")));
    let python = dir.join("bin/python");
    let stamp = dir.join("installed");
    if stamp.exists() {
        return python;
    }
    let _ = std::fs::remove_dir_all(&dir);
    let status = Command::new("python3")
        .args(["-m", "venv"])
        .arg(&dir)
        .status()
        .expect("python3 runs");
    assert!(status.success(), "python3 -m venv failed");
    let out = Command::new(&python)
        .args([
            "-m",
            "pip",
            "install",
            "--quiet",
            "--disable-pip-version-check",
            sdk,
        ])
        .stdin(Stdio::null())
        .output()
        .expect("pip runs");
    assert!(
        out.status.success(),
        "pip install {sdk} failed:\n{}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    std::fs::write(&stamp, sdk).unwrap();
    python
}

/// Generous: the SDK takes a while to import on a loaded machine.
fn cfg() -> SessionConfig {
    SessionConfig {
        request_timeout: Duration::from_secs(30),
        shutdown_grace: Duration::from_millis(500),
        ..SessionConfig::default()
    }
}

fn stdio(sdk: &str, cfg: &SessionConfig) -> Run {
    let child = Command::new(sdk_python(sdk))
        .arg(server_path("sdk_server.py"))
        .arg("stdio")
        .current_dir(env!("CARGO_TARGET_TMPDIR"))
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::null())
        .spawn()
        .unwrap();
    run_child(child, cfg)
}

fn http_server(sdk: &str, args: &[&str]) -> HttpServer {
    let python = sdk_python(sdk);
    HttpServer::start_quiet(
        python.to_str().unwrap(),
        &server_path("sdk_server.py"),
        args,
    )
}

/// The session completed, every tool was called and answered, `echo` echoed what it got, and
/// the negotiated version is `version`.
fn assert_full_session(r: &Run, version: &str) {
    let s = &r.summary;
    let context = || format!("{s:#?}");
    assert_eq!(s.failure, None, "{}", context());
    assert_eq!(s.protocol_version.as_deref(), Some(version));
    assert_eq!(s.server_info.as_ref().unwrap()["name"], "sdk-test-server");
    let results: Vec<(&str, CallResult)> = s
        .tools
        .iter()
        .map(|t| (t.name.as_str(), t.result))
        .collect();
    assert_eq!(
        results,
        [
            ("echo", CallResult::Ok),
            ("add", CallResult::Ok),
            ("work", CallResult::Ok),
            ("ask", CallResult::Ok)
        ],
        "{}",
        context()
    );
    let echoed = answer_text(r, "echo");
    assert_eq!(
        json!(echoed),
        s.tools[0].arguments.as_ref().unwrap()["text"]
    );
    // `ask`'s elicitation: declined on the first call, accepted on the call made again (in
    // the 2026-07-28 era the SDK's tool cannot elicit by a request of its own).
    let asked = answer_text(r, "ask");
    if asked == "elicitation: decline" {
        assert_eq!(s.tools[3].calls.len(), 2, "{}", context());
        assert_eq!(
            answer_text_of(r, Phase::call("ask", 2)),
            "elicitation: accept"
        );
    } else {
        assert!(asked.starts_with("elicitation refused"), "{asked}");
    }
    // The resource, the template and the prompt: each read or got, and answered.
    let surface: Vec<(&str, usize, CallResult)> = s
        .surface
        .iter()
        .map(|x| (x.name.as_str(), x.reads.len(), x.reads[0].result))
        .collect();
    assert_eq!(surface.len(), 3, "{}", context());
    assert_eq!(surface[0], ("config://settings", 1, CallResult::Ok));
    assert_eq!(surface[1].0, "notes://{name}");
    assert_eq!(surface[1].2, CallResult::Ok, "{}", context());
    assert_eq!(surface[2].0, "review");
    assert_eq!(surface[2].2, CallResult::Ok, "{}", context());
    assert!(s.surface[2].completions >= 1, "{}", context());
    assert_eq!(s.non_json_lines, 0);
}

/// The text of the answer to the call of `tool`.
fn answer_text(r: &Run, tool: &str) -> String {
    answer_text_of(r, Phase::Call(tool.into()))
}

/// The text of the answer in `phase`.
fn answer_text_of(r: &Run, want: Phase) -> String {
    messages(&r.hooks.entries())
        .into_iter()
        .rev()
        .find(|(dir, phase, m)| {
            *dir == Direction::ServerToClient && *phase == want && m.get("result").is_some()
        })
        .and_then(|(_, _, m)| {
            m["result"]["content"][0]["text"]
                .as_str()
                .map(str::to_string)
        })
        .unwrap_or_default()
}

#[test]
fn sdk2_stdio_speaks_2026_07_28() {
    let r = stdio(SDK2, &cfg());
    assert_full_session(&r, "2026-07-28");
    let sent = sent_methods(&r.hooks.entries());
    assert_eq!(sent[0], "server/discover");
    assert!(!sent.contains(&"initialize".to_string()));
}

#[test]
fn sdk2_streamable_http_stateful() {
    let server = http_server(SDK2, &["http"]);
    let r = run_http(server.target("/mcp"), &cfg());
    assert_full_session(&r, "2026-07-28");
    // Stateless even on a stateful server: no session id, no GET stream, no DELETE.
    let sent = meta_lines(&r.hooks.entries(), Direction::ClientToServer);
    assert!(
        sent.iter().all(|h| h.starts_with("POST /mcp ")),
        "{sent:#?}"
    );
    assert!(sent.iter().all(|h| !h.contains("Mcp-Session-Id")));
}

#[test]
fn sdk2_streamable_http_stateless_json() {
    let server = http_server(SDK2, &["http", "--json", "--stateless"]);
    let r = run_http(server.target("/mcp"), &cfg());
    assert_full_session(&r, "2026-07-28");
}

#[test]
fn sdk2_streamable_http_in_the_legacy_era() {
    // Offering 2025-11-25: initialize, a session id, event streams, a server request inside
    // the stream of `ask`, the GET stream, DELETE.
    let server = http_server(SDK2, &["http"]);
    let cfg = SessionConfig {
        protocol_version: "2025-11-25".into(),
        ..cfg()
    };
    let r = run_http(server.target("/mcp"), &cfg);
    assert_full_session(&r, "2025-11-25");
    let entries = r.hooks.entries();
    let sent = meta_lines(&entries, Direction::ClientToServer);
    assert!(
        sent.iter().skip(1).all(|h| h.contains("Mcp-Session-Id: ")),
        "{sent:#?}"
    );
    assert!(sent.iter().any(|h| h.starts_with("DELETE /mcp ")));
    let msgs = messages(&entries);
    // The elicitation came inside the stream of `ask` and was declined.
    assert!(msgs.iter().any(|(dir, phase, m)| {
        *dir == Direction::ClientToServer
            && *phase == Phase::Call("ask".into())
            && m["result"]["action"] == "decline"
    }));
    // The log of `work` (legacy servers log freely).
    assert!(msgs
        .iter()
        .any(|(_, phase, m)| *phase == Phase::Call("work".into())
            && m["method"] == "notifications/message"));
}

#[test]
fn sdk2_legacy_sse_transport() {
    let server = http_server(SDK2, &["sse"]);
    let mut target = server.target("/sse");
    target.kind = HttpKind::LegacySse;
    let r = run_http(target, &cfg());
    assert_full_session(&r, "2025-11-25");
    // The SDK asked for elicitation on the stream; glassbox declined, then accepted.
    let msgs = messages(&r.hooks.entries());
    assert!(msgs
        .iter()
        .any(|(_, _, m)| m["method"] == "elicitation/create"));
    let answers: Vec<&Value> = msgs
        .iter()
        .filter(|(dir, _, m)| *dir == Direction::ClientToServer && m.get("method").is_none())
        .map(|(_, _, m)| &m["result"]["action"])
        .filter(|a| a.is_string())
        .collect();
    assert_eq!(answers, [&json!("decline"), &json!("accept")]);
}

#[test]
fn sdk1_stdio_falls_back_to_initialize() {
    let r = stdio(SDK1, &cfg());
    assert_full_session(&r, "2025-11-25");
    let msgs = messages(&r.hooks.entries());
    // 1.x refuses the probe with a JSON-RPC error; glassbox goes on with initialize.
    assert_eq!(msgs[0].2["method"], "server/discover");
    assert!(msgs[1].2["error"]["code"].is_i64());
    assert_eq!(msgs[2].2["method"], "initialize");
}

#[test]
fn sdk1_streamable_http_falls_back_to_initialize() {
    let server = http_server(SDK1, &["http"]);
    let r = run_http(server.target("/mcp"), &cfg());
    assert_full_session(&r, "2025-11-25");
    let entries = r.hooks.entries();
    // The probe's HTTP error, then initialize.
    let received = meta_lines(&entries, Direction::ServerToClient);
    assert!(received[0].starts_with("HTTP/1.1 4"), "{received:#?}");
    let sent: Vec<Value> = messages(&entries)
        .into_iter()
        .filter(|(dir, _, _)| *dir == Direction::ClientToServer)
        .map(|(_, _, m)| m)
        .collect();
    assert_eq!(sent[1]["method"], "initialize");
}
