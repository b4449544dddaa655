//! The real benign corpus: pinned servers from npm and PyPI, installed in the sandbox from
//! their registries and audited as a user gets them. Each must complete with every tool
//! called, and none may be accused. What is flagged must be explained: the two servers whose
//! tools fetch a URL they are given (`server-everything`'s `gzip-file-as-resource`,
//! `mcp-server-fetch`'s `fetch`) look it up (the generated URL names a host under `.test`),
//! which is egress during that tool's call, with the argument's marker in the lookup, and
//! nothing else.
//!
//! It needs the package registries (npm, PyPI) and takes about three minutes: it runs when
//! `GLASSBOX_CORPUS=1` (scripts/test sets it). The result is in the README.

use glassbox_audit::install::PackageSpec;
use glassbox_audit::{audit, AuditOptions, Quiet};
use glassbox_checks::Proofs;
use glassbox_model::{Outcome, Phase};

/// (target, server arguments, tools whose calls may reach the network).
const CORPUS: &[(&str, &[&str], &[&str])] = &[
    (
        "npm:@modelcontextprotocol/server-memory@2026.8.31",
        &[],
        &[],
    ),
    (
        "npm:@modelcontextprotocol/server-filesystem@2026.8.31",
        &["<DIR>"],
        &[],
    ),
    (
        "npm:@modelcontextprotocol/server-everything@2026.8.31",
        &[],
        &["gzip-file-as-resource"],
    ),
    (
        "npm:@modelcontextprotocol/server-sequential-thinking@2026.8.31",
        &[],
        &[],
    ),
    ("pypi:mcp-server-time==2026.10.19", &[], &[]),
    ("pypi:mcp-server-fetch==2026.10.24", &[], &["fetch"]),
    ("pypi:mcp-server-git==2026.10.19", &[], &[]),
];

/// The checks a fetching tool's call trips, and only those.
const NETWORK_CHECKS: &[&str] = &[
    "unexplained-egress",
    "denied-network-attempts",
    "input-exposure",
];

#[test]
fn the_benign_corpus_completes_unaccused() {
    if std::env::var_os("GLASSBOX_CORPUS").is_none() {
        eprintln!("the real corpus needs the registries: set GLASSBOX_CORPUS=1 to run it");
        return;
    }
    let tmp = std::env::temp_dir().join(format!("gb-corpus-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&tmp);
    let data = tmp.join("data");
    std::fs::create_dir_all(&data).unwrap();
    std::fs::write(data.join("notes.txt"), "hello\n").unwrap();
    // A fresh state folder: every package is installed (and traced) by this test.
    std::env::set_var("GLASSBOX_STATE_DIR", tmp.join("state"));
    let mut failures = Vec::new();
    for (i, (target, args, fetching)) in CORPUS.iter().enumerate() {
        let mut o = AuditOptions::new(
            args.iter()
                .map(|a| a.replace("<DIR>", &data.to_string_lossy()).into())
                .collect(),
            tmp.clone(),
        );
        o.package = PackageSpec::parse(target).unwrap().map(Into::into);
        o.extra_ro = vec![data.clone()];
        o.evidence_dir = Some(tmp.join(format!("evidence-{i}")));
        o.proofs = Some(Proofs::all_proven());
        let started = std::time::Instant::now();
        let a = match audit(&o, &Quiet) {
            Ok(a) => a,
            Err(e) => {
                failures.push(format!("{target}: {e}"));
                continue;
            }
        };
        let m = &a.evidence.manifest;
        eprintln!(
            "{target}: {:?}, {} tools, {} events, {:.1}s",
            a.report.verdict,
            a.report.tools.len(),
            a.evidence.events.len(),
            started.elapsed().as_secs_f64()
        );
        if !m.session.completed {
            failures.push(format!(
                "{target}: session did not complete: {:?}",
                m.session.failure
            ));
        }
        if m.install.as_ref().is_none_or(|i| i.failure.is_some()) {
            failures.push(format!("{target}: install: {:?}", m.install));
        }
        if a.report.tools.is_empty() || a.report.tools.iter().any(|t| !t.called) {
            failures.push(format!(
                "{target}: not every tool called: {:?}",
                a.report.tools
            ));
        }
        for c in &a.report.checks {
            for f in &c.findings {
                if f.accusation {
                    failures.push(format!("{target}: accused by {}: {}", c.id, f.summary));
                }
                let explained = NETWORK_CHECKS.contains(&c.id.as_str())
                    && f.phase
                        .as_ref()
                        .and_then(Phase::call_of)
                        .is_some_and(|(t, _)| fetching.contains(&t));
                if !explained {
                    failures.push(format!("{target}: {} flagged: {}", c.id, f.summary));
                }
            }
            if !matches!(c.outcome, Outcome::Pass | Outcome::Flag) {
                failures.push(format!(
                    "{target}: {} is {:?}: {:?}",
                    c.id, c.outcome, c.reason
                ));
            }
        }
    }
    let _ = std::fs::remove_dir_all(&tmp);
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}
