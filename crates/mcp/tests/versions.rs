//! Protocol version negotiation over stdio, against `tests/servers/versions.py`: a server that
//! speaks only the versions it is given.

mod common;

use common::{assert_consistent, messages, quick, run_child, sent_methods, spawn, Run};
use glassbox_mcp::{CallResult, Direction, SessionConfig, SUPPORTED_PROTOCOL_VERSIONS};
use serde_json::json;
use std::time::Duration;

fn run_versions(versions: &str, extra: &[(&str, &str)], cfg: &SessionConfig) -> Run {
    let mut env = vec![("MCP_VERSIONS", versions)];
    env.extend_from_slice(extra);
    run_child(spawn("versions.py", &[], &env), cfg)
}

#[test]
fn each_version_alone_is_negotiated() {
    for version in SUPPORTED_PROTOCOL_VERSIONS {
        let r = run_versions(version, &[], &quick());
        let s = &r.summary;
        assert_eq!(s.failure, None, "{version}");
        assert_eq!(s.protocol_version.as_deref(), Some(*version));
        assert_eq!(
            s.server_info.as_ref().unwrap()["name"],
            "versions-test-server"
        );
        let results: Vec<CallResult> = s.tools.iter().map(|t| t.result).collect();
        assert_eq!(results, [CallResult::Ok, CallResult::Ok], "{version}");
        assert_consistent(&r.hooks);
        let sent = sent_methods(&r.hooks.entries());
        assert_eq!(
            sent[0], "server/discover",
            "the newest version is offered first"
        );
        if *version == "2026-07-28" {
            // Stateless: no handshake, and every request says its version.
            assert!(!sent
                .iter()
                .any(|m| m == "initialize" || m.starts_with("notifications/")));
            for (dir, _, msg) in messages(&r.hooks.entries()) {
                if dir == Direction::ClientToServer {
                    assert_eq!(
                        msg["params"]["_meta"]["io.modelcontextprotocol/protocolVersion"],
                        "2026-07-28",
                        "{msg}"
                    );
                }
            }
            // The tool that asked for input got the safe answers (the server checked them).
            assert_eq!(s.tools[1].name, "confirm");
        } else {
            assert_eq!(&sent[1..3], ["initialize", "notifications/initialized"]);
            // The latest legacy version was offered; the server answered with its own.
            let init = messages(&r.hooks.entries())
                .into_iter()
                .find(|(_, _, m)| m["method"] == "initialize")
                .unwrap()
                .2;
            assert_eq!(init["params"]["protocolVersion"], "2025-11-25");
            assert!(init["params"].get("_meta").is_none());
        }
    }
}

#[test]
fn a_dual_era_server_is_spoken_to_in_the_newest_version() {
    let r = run_versions("2024-11-05,2025-06-18,2026-07-28", &[], &quick());
    assert!(r.summary.completed, "{:?}", r.summary.failure);
    assert_eq!(r.summary.protocol_version.as_deref(), Some("2026-07-28"));
}

#[test]
fn offering_a_legacy_version_skips_discovery() {
    let cfg = SessionConfig {
        protocol_version: "2025-03-26".into(),
        ..quick()
    };
    let r = run_versions("2025-03-26,2026-07-28", &[], &cfg);
    assert!(r.summary.completed, "{:?}", r.summary.failure);
    assert_eq!(r.summary.protocol_version.as_deref(), Some("2025-03-26"));
    assert_eq!(sent_methods(&r.hooks.entries())[0], "initialize");
}

#[test]
fn unsupported_version_error_names_the_legacy_version_to_offer() {
    // A server of another (future) stateless version and 2025-06-18: -32022 lists both.
    let r = run_versions("2025-06-18,2099-01-01", &[], &quick());
    assert!(r.summary.completed, "{:?}", r.summary.failure);
    assert_eq!(r.summary.protocol_version.as_deref(), Some("2025-06-18"));
    let msgs = messages(&r.hooks.entries());
    assert_eq!(msgs[1].2["error"]["code"], -32022);
    assert_eq!(msgs[2].2["method"], "initialize");
    assert_eq!(msgs[2].2["params"]["protocolVersion"], "2025-06-18");
}

#[test]
fn no_common_version_fails_clearly() {
    let r = run_versions("2099-01-01", &[], &quick());
    assert!(!r.summary.completed);
    assert_eq!(
        r.summary.failure.as_deref(),
        Some("server supports only protocol versions \"2099-01-01\"")
    );
    assert!(!sent_methods(&r.hooks.entries()).contains(&"initialize".to_string()));
}

#[test]
fn a_late_discover_answer_still_wins() {
    // The probe waits the request timeout (2 s here), then initialize is sent as well; the
    // modern-only server answers the probe only then, and rejects initialize.
    let cfg = SessionConfig {
        request_timeout: Duration::from_secs(2),
        ..quick()
    };
    let r = run_versions("2026-07-28", &[("MCP_LATE_DISCOVER", "1")], &cfg);
    assert!(r.summary.completed, "{:?}", r.summary.failure);
    assert_eq!(r.summary.protocol_version.as_deref(), Some("2026-07-28"));
    let msgs = messages(&r.hooks.entries());
    let methods: Vec<_> = msgs.iter().map(|(_, _, m)| m["method"].clone()).collect();
    assert_eq!(
        methods[..2],
        [json!("server/discover"), json!("initialize")]
    );
    // The discover result came first; the initialize error after it was only recorded.
    assert_eq!(msgs[2].0, Direction::ServerToClient);
    assert_eq!(msgs[2].2["id"], 1);
    assert!(msgs[2].2["result"]["supportedVersions"].is_array());
    let init_answer = msgs
        .iter()
        .find(|(dir, _, m)| *dir == Direction::ServerToClient && m["id"] == 2)
        .expect("initialize was answered");
    assert!(init_answer.2.get("error").is_some());
    assert_eq!(r.summary.tools.len(), 2);
}

#[test]
fn a_legacy_server_that_ignores_the_probe_is_reached_after_it() {
    // Silent about server/discover, answers initialize, then exits (crash.py after-init): the
    // session sends initialize once the probe has waited the request timeout.
    let cfg = SessionConfig {
        request_timeout: Duration::from_millis(1500),
        ..quick()
    };
    let r = run_child(
        spawn("crash.py", &["after-init"], &[("MCP_SILENT_DISCOVER", "1")]),
        &cfg,
    );
    assert_eq!(
        r.summary.failure.as_deref(),
        Some("server closed stdout after initialize")
    );
    assert_eq!(r.summary.protocol_version.as_deref(), Some("2025-11-25"));
}
