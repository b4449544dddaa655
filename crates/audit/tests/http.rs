//! A server that speaks MCP over HTTP on a port of its own sandbox: glassbox waits for it to
//! listen, speaks streamable HTTP (or the legacy HTTP+SSE transport) through connections made
//! inside the sandbox's network namespace, and the audit is otherwise the same (both network
//! runs, the recorder, the checks). The server is the MCP crate's test server.

use glassbox_audit::{audit, AuditOptions, HttpServer, Quiet};
use glassbox_checks::Proofs;
use std::path::{Path, PathBuf};

fn server() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .join("../mcp/tests/servers/http_server.py")
        .canonicalize()
        .unwrap()
}

fn run(args: &[&str], http: HttpServer, name: &str) -> glassbox_audit::Audit {
    run_with(args, http, name, |_| {})
}

fn run_with(
    args: &[&str],
    http: HttpServer,
    name: &str,
    tune: impl FnOnce(&mut AuditOptions),
) -> glassbox_audit::Audit {
    // In the build's own scratch folder: each run starts it anew, and nothing is left in the
    // machine's /tmp (the evidence is read after the audit returns).
    let tmp = std::path::Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("gb-http-{name}"));
    let _ = std::fs::remove_dir_all(&tmp);
    std::fs::create_dir_all(&tmp).unwrap();
    let mut command = vec!["python3".into(), server().into_os_string()];
    command.extend(args.iter().map(Into::into));
    let mut o = AuditOptions::new(command, tmp.clone());
    o.http = Some(http);
    o.evidence_dir = Some(tmp.join("evidence"));
    o.proofs = Some(Proofs::all_proven());
    tune(&mut o);
    audit(&o, &Quiet).expect("audit")
}

#[test]
fn a_streamable_http_server_in_the_sandbox_is_audited_in_both_runs() {
    let a = run(
        &["--port", "8931", "--mode", "sse"],
        HttpServer::parse("http://127.0.0.1:8931/mcp", false).unwrap(),
        "streamable",
    );
    let m = &a.evidence.manifest;
    assert!(m.session.completed, "{:?}", m.session);
    assert!(!a.report.tools.is_empty());
    assert!(
        a.report.tools.iter().all(|t| t.called),
        "{:?}",
        a.report.tools
    );
    assert!(m.session.protocol_version.is_some());
    // The denied run spoke to it too (its loopback is not the edge's business).
    let denied = m
        .network
        .runs
        .iter()
        .find(|r| r.session.is_some())
        .expect("denied run");
    assert!(denied.session.as_ref().unwrap().completed, "{denied:?}");
    // The HTTP bodies are in the transcript, the server's stdout in its log.
    assert!(a
        .evidence
        .transcript
        .iter()
        .any(|t| t.raw.to_lossy().contains("tools/list")));
    let dir = Path::new(&a.report.evidence_dir);
    assert!(std::fs::read_to_string(dir.join("stdout.log"))
        .unwrap()
        .contains("PORT 8931"));
}

#[test]
fn the_legacy_sse_transport_works_too() {
    let a = run(
        &["--port", "8932", "--legacy-sse"],
        HttpServer::parse("http://localhost:8932/sse", true).unwrap(),
        "legacy",
    );
    assert!(
        a.evidence.manifest.session.completed,
        "{:?}",
        a.evidence.manifest.session
    );
    assert!(!a.report.tools.is_empty());
}

#[test]
fn a_server_that_never_listens_is_inconclusive_with_the_reason() {
    let a = run_with(
        &["--port", "8933"],
        HttpServer::parse("http://127.0.0.1:8934/mcp", false).unwrap(),
        "never",
        |o| o.session.request_timeout = std::time::Duration::from_secs(3),
    );
    let reason = a.report.inconclusive_reason.unwrap_or_default();
    assert!(
        reason.contains("did not listen on 127.0.0.1:8934 within 3s"),
        "{reason}"
    );
}

#[test]
fn only_the_sandbox_loopback_is_accepted() {
    for bad in [
        "https://127.0.0.1:1/mcp",
        "http://203.0.113.5:80/",
        "http://127.0.0.1/",
        "8080",
    ] {
        assert!(HttpServer::parse(bad, false).is_err(), "{bad}");
    }
    assert_eq!(
        HttpServer::parse("http://localhost:3001", false).unwrap(),
        HttpServer {
            port: 3001,
            path: "/".into(),
            legacy_sse: false
        }
    );
}
