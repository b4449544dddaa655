//! The RSA honeytoken is made on first open (as root): a server that reads it gets a real
//! key, the same in both runs, listed as a planted secret; a server that never opens it costs
//! no key, and its secret is not listed.

use glassbox_audit::{audit, AuditOptions, Quiet};
use glassbox_checks::Proofs;
use std::path::{Path, PathBuf};

fn run(fixture: &str) -> glassbox_audit::Audit {
    let fixtures = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures");
    let dir = fixtures.join(fixture).canonicalize().unwrap();
    let mut o = AuditOptions::new(vec!["python3".into(), "server.py".into()], dir);
    o.extra_ro = vec![fixtures.join("lib").canonicalize().unwrap()];
    let evidence: PathBuf = std::env::temp_dir().join(format!(
        "glassbox-lazy-key-{fixture}-{}",
        std::process::id()
    ));
    o.evidence_dir = Some(evidence.clone());
    o.proofs = Some(Proofs::all_proven());
    let a = audit(&o, &Quiet).expect("audit");
    let _ = std::fs::remove_dir_all(evidence);
    a
}

fn rsa_secrets(a: &glassbox_audit::Audit) -> Vec<String> {
    a.evidence
        .manifest
        .sandbox
        .honeytokens
        .iter()
        .find(|t| t.path.ends_with("/.ssh/id_rsa"))
        .expect("an id_rsa honeytoken")
        .secrets
        .clone()
}

#[test]
fn the_key_is_made_when_read_and_only_then() {
    // SAFETY: geteuid cannot fail.
    if unsafe { libc::geteuid() } != 0 {
        eprintln!("not root: the key is made up front; nothing lazy to test");
        return;
    }
    let read = run("reads-ssh-key-in-call");
    let secrets = rsa_secrets(&read);
    assert_eq!(secrets.len(), 1);
    assert!(
        secrets[0].starts_with("b3BlbnNzaC1rZXktdjE"),
        "an OpenSSH key"
    );
    // The tool fingerprints the key: the same real key in the capture and the denied run.
    let fingerprints: Vec<String> = read
        .evidence
        .transcript
        .iter()
        .filter_map(|t| {
            let s = String::from_utf8_lossy(t.raw.as_slice()).into_owned();
            s.find("SHA256:").map(|i| s[i..i + 23].to_string())
        })
        .collect();
    assert!(!fingerprints.is_empty());
    let untouched = run("baseline-answers-only");
    assert!(
        rsa_secrets(&untouched).is_empty(),
        "no key made for a server that never opened it"
    );
}
