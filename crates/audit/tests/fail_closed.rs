//! A recorder that dies fails the audit closed: the sandbox is killed and the verdict is
//! `inconclusive`, whatever was recorded before. The fault is injected (the recorder panics at
//! its 3rd event, while the server starts); this test binary holds this one test, so the
//! variable reaches no other. The server never answers `initialize`: only the recorder's
//! failure can end its session before the request timeout.

use glassbox_audit::{audit, AuditOptions, NetworkChoice, Quiet};
use glassbox_checks::Proofs;
use glassbox_model::Verdict;
use std::path::Path;

#[test]
fn a_dead_recorder_kills_the_server_and_claims_nothing() {
    std::env::set_var("GLASSBOX_FAULT_RECORDER_PANIC_AT_EVENT", "3");
    // The panic hook runs before the recorder's thread can kill anything; symbolizing a
    // backtrace there takes about a second, which would let this short session end first.
    std::env::set_var("RUST_BACKTRACE", "0");
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures");
    let dir = fixtures
        .join("reads-ssh-key-in-call")
        .canonicalize()
        .unwrap();
    let mut o = AuditOptions::new(vec!["python3".into(), "server.py".into()], dir);
    o.extra_ro = vec![fixtures.join("lib").canonicalize().unwrap()];
    let evidence =
        std::env::temp_dir().join(format!("glassbox-fail-closed-{}", std::process::id()));
    o.evidence_dir = Some(evidence.clone());
    o.proofs = Some(Proofs::all_proven());
    o.network = NetworkChoice::Capture;
    let a = audit(&o, &Quiet).expect("the audit itself runs");
    assert_eq!(a.report.verdict, Verdict::Inconclusive, "{:?}", a.report);
    let why = a.report.inconclusive_reason.clone().unwrap_or_default();
    assert!(why.contains("recorder panicked"), "{why}");
    assert!(a.evidence.manifest.recorder.failure.is_some());
    // Ended (killed, or failing once the recorder's listener was gone), not left to run.
    assert!(a.evidence.manifest.server_exit.is_some());
    assert!(!a.evidence.manifest.session.completed);
    // The kill ended the session, not the request timeout (the server never answers).
    let failure = a
        .evidence
        .manifest
        .session
        .failure
        .clone()
        .unwrap_or_default();
    assert!(
        !failure.is_empty() && !failure.starts_with("no answer to "),
        "{failure}"
    );
    let _ = std::fs::remove_dir_all(evidence);
}
