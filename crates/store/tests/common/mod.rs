//! The store's behaviour, written once and run against each backend: `tests/store.rs`
//! (SQLite files) and `tests/postgres.rs` (a real PostgreSQL server), through
//! [`store_tests!`].
#![allow(dead_code)]

use glassbox_model::{
    AuditReport, CheckResult, CheckVersion, Finding, Manifest, Outcome, Severity, Target, Verdict,
};
use glassbox_store::{
    bundle_hash, Decision, Error, FindingStatus, Store, StoreLocation, MIGRATIONS,
};
use std::io::{BufRead, BufReader, Write};
use std::os::unix::process::ExitStatusExt;
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::sync::atomic::{AtomicUsize, Ordering};
use std::sync::{mpsc, Barrier};
use std::time::Duration;
use std::{env, fs, io, thread};

/// What a test needs of a backend beyond the store's API.
pub trait Backend {
    /// A fresh, empty store, for the test `name`.
    fn fresh(&self, name: &str) -> StoreLocation;
    /// The schema version, read behind the store's back.
    fn version(&self, store: &StoreLocation) -> i64;
    /// Sets the schema version behind the store's back.
    fn set_version(&self, store: &StoreLocation, version: i64);
    /// Panics if the database is damaged.
    fn check_integrity(&self, _store: &StoreLocation) {}
}

/// A scratch directory under the cargo target dir, removed when the test ends.
pub struct Tmp(pub PathBuf);

impl Tmp {
    pub fn new(name: &str) -> Tmp {
        static N: AtomicUsize = AtomicUsize::new(0);
        let n = N.fetch_add(1, Ordering::Relaxed);
        let dir = Path::new(env!("CARGO_TARGET_TMPDIR"))
            .join(format!("glassbox-store-{name}-{}-{n}", std::process::id()));
        let _ = fs::remove_dir_all(&dir);
        fs::create_dir_all(&dir).unwrap();
        Tmp(dir)
    }
}

impl Drop for Tmp {
    fn drop(&mut self) {
        let _ = fs::remove_dir_all(&self.0);
    }
}

/// A small evidence bundle.
pub fn bundle(dir: &Path) -> PathBuf {
    let b = dir.join("bundle");
    fs::create_dir_all(b.join("net")).unwrap();
    fs::write(b.join("manifest.json"), "{}").unwrap();
    fs::write(b.join("events.jsonl"), "{\"id\":1}\n{\"id\":2}\n").unwrap();
    fs::write(b.join("net/flows.jsonl"), "{\"id\":7}\n").unwrap();
    b
}

/// A run of `command` with a passing check, an accusation and a published finding.
pub fn run(run_id: &str, command: &str) -> (AuditReport, Manifest) {
    let finding = |check: &str, summary: &str, accusation: bool, flows: Vec<u64>| Finding {
        check: check.into(),
        version: 2,
        summary: summary.into(),
        evidence: vec![1, 2],
        phase: None,
        accusation,
        flows,
    };
    let check = |id: &str, outcome, findings| CheckResult {
        id: id.into(),
        version: 2,
        claim: format!("{id} holds"),
        severity: Severity::High,
        outcome,
        reason: (outcome == Outcome::NotObserved).then(|| "no channel".into()),
        findings,
        notes: Vec::new(),
    };
    let checks = vec![
        check("fs-writes", Outcome::NotObserved, vec![]),
        check(
            "credential-theft",
            Outcome::Flag,
            vec![finding(
                "credential-theft",
                "read ~/.ssh/id_rsa",
                true,
                vec![],
            )],
        ),
        check(
            "net-egress",
            Outcome::Flag,
            vec![finding(
                "net-egress",
                "connected to 1.2.3.4",
                false,
                vec![7],
            )],
        ),
    ];
    let manifest = Manifest {
        glassbox_version: "0.1.0".into(),
        run_id: run_id.into(),
        started_at: "2025-01-02T03:04:05Z".into(),
        finished_at: Some("2025-01-02T03:04:09Z".into()),
        target: Target {
            command: command.split(' ').map(String::from).collect(),
            ..Target::default()
        },
        checks: checks
            .iter()
            .map(|c| CheckVersion {
                id: c.id.clone(),
                version: c.version,
            })
            .collect(),
        ..Manifest::default()
    };
    let report = AuditReport {
        glassbox_version: "0.1.0".into(),
        run_id: run_id.into(),
        evidence_dir: "bundle".into(),
        verdict: Verdict::Withheld,
        inconclusive_reason: None,
        checks,
        tools: Vec::new(),
        call_outcomes: Default::default(),
        surface: Default::default(),
    };
    (report, manifest)
}

/// The tests every backend runs, as `#[test]` functions calling this module's bodies with
/// the backend `$backend` makes.
macro_rules! store_tests {
    ($backend:expr) => {
        #[test]
        fn opens_migrates_once_and_reopens() {
            common::opens_migrates_once_and_reopens(&$backend);
        }
        #[test]
        fn records_and_reads_back() {
            common::records_and_reads_back(&$backend);
        }
        #[test]
        fn history_of_one_version_over_time() {
            common::history_of_one_version_over_time(&$backend);
        }
        #[test]
        fn reviews_publish_or_reject_withheld_findings_once() {
            common::reviews_publish_or_reject_withheld_findings_once(&$backend);
        }
        #[test]
        fn a_newer_store_is_refused() {
            common::a_newer_store_is_refused(&$backend);
        }
        #[test]
        fn concurrent_writers_lose_nothing() {
            common::concurrent_writers_lose_nothing(&$backend);
        }
        #[test]
        fn kill_9_keeps_every_committed_audit() {
            common::kill_9_keeps_every_committed_audit(|| $backend);
        }
    };
}

pub fn opens_migrates_once_and_reopens(b: &dyn Backend) {
    let tmp = Tmp::new("reopen");
    let loc = b.fresh("reopen");
    let mut store = Store::open_location(&loc).unwrap();
    assert_eq!(store.location(), &loc);
    assert_eq!(store.schema_version().unwrap(), MIGRATIONS.len() as i64);
    let (report, manifest) = run("r1", "npx server");
    store
        .record(&report, &manifest, None, &bundle(&tmp.0))
        .unwrap();
    drop(store);
    assert_eq!(b.version(&loc), MIGRATIONS.len() as i64);
    // Re-opening migrates nothing and keeps the data.
    let store = Store::open_location(&loc).unwrap();
    assert_eq!(store.audits().unwrap().len(), 1);
    assert_eq!(b.version(&loc), MIGRATIONS.len() as i64);
}

pub fn records_and_reads_back(b: &dyn Backend) {
    let tmp = Tmp::new("record");
    let mut store = Store::open_location(&b.fresh("record")).unwrap();
    let dir = bundle(&tmp.0);
    let (report, manifest) = run("r1", "uvx mcp-server-fetch");
    let id = store
        .record(&report, &manifest, Some("1.2.3"), &dir)
        .unwrap();

    let a = store.audit(id).unwrap().expect("recorded");
    assert_eq!(
        (a.run_id.as_str(), a.target.as_str()),
        ("r1", "uvx mcp-server-fetch")
    );
    assert_eq!(a.target_version.as_deref(), Some("1.2.3"));
    assert_eq!(a.verdict, Verdict::Withheld);
    assert_eq!(a.started_at, "2025-01-02T03:04:05Z");
    assert_eq!(a.finished_at.as_deref(), Some("2025-01-02T03:04:09Z"));
    assert_eq!(a.glassbox_version, "0.1.0");
    assert_eq!(a.inconclusive_reason, None);
    assert_eq!(a.evidence_dir, dir);
    assert_eq!(a.evidence_sha256, bundle_hash(&dir).unwrap());
    let outcomes: Vec<_> = a
        .checks
        .iter()
        .map(|c| {
            (
                c.check_id.as_str(),
                c.version,
                c.outcome,
                c.reason.as_deref(),
            )
        })
        .collect();
    // In report order (not the order of the check ids).
    assert_eq!(
        outcomes,
        [
            ("fs-writes", 2, Outcome::NotObserved, Some("no channel")),
            ("credential-theft", 2, Outcome::Flag, None),
            ("net-egress", 2, Outcome::Flag, None),
        ]
    );
    let [theft, egress] = &a.findings[..] else {
        panic!("two findings: {:?}", a.findings)
    };
    assert_eq!(
        (theft.accusation, theft.status),
        (true, FindingStatus::Withheld)
    );
    assert_eq!(
        (egress.accusation, egress.status),
        (false, FindingStatus::Published)
    );
    assert_eq!((egress.audit_id, egress.check_version), (id, 2));
    assert_eq!(egress.summary, "connected to 1.2.3.4");
    assert_eq!(egress.evidence, [1, 2]);
    assert_eq!(egress.flows, [7]);
    assert_eq!(store.finding(egress.id).unwrap().as_ref(), Some(egress));
    assert_eq!(store.report(id).unwrap().as_ref(), Some(&report));
    assert!(store.audit(id + 100).unwrap().is_none());
    assert!(store.report(id + 100).unwrap().is_none());
    assert!(store.finding(egress.id + 100).unwrap().is_none());

    // Newest first.
    let (report2, manifest2) = run("r2", "uvx mcp-server-fetch");
    let id2 = store.record(&report2, &manifest2, None, &dir).unwrap();
    let ids: Vec<i64> = store.audits().unwrap().iter().map(|a| a.id).collect();
    assert_eq!(ids, [id2, id]);

    // The same run twice is refused, naming it, and changes nothing.
    let err = store.record(&report, &manifest, None, &dir).unwrap_err();
    assert!(matches!(err, Error::Duplicate { audit, .. } if audit == id));
    assert!(err.to_string().contains("run r1"), "{err}");
    assert_eq!(store.audits().unwrap().len(), 2);
    assert_eq!(store.withheld().unwrap().len(), 2);

    // A report and a manifest of different runs are refused.
    let (_, other) = run("r3", "x");
    assert!(matches!(
        store.record(&report2, &other, None, &dir),
        Err(Error::RunMismatch { .. })
    ));
}

pub fn history_of_one_version_over_time(b: &dyn Backend) {
    let tmp = Tmp::new("history");
    let mut store = Store::open_location(&b.fresh("history")).unwrap();
    let dir = bundle(&tmp.0);
    let mut record = |run_id: &str, command: &str, version: Option<&str>| {
        let (r, m) = run(run_id, command);
        store.record(&r, &m, version, &dir).unwrap()
    };
    let first = record("r1", "npx @x/server", Some("1.0.0"));
    record("r2", "npx @x/server", Some("2.0.0"));
    record("r3", "npx @y/server", Some("1.0.0"));
    let second = record("r4", "npx @x/server", Some("1.0.0"));
    let unversioned = record("r5", "npx @x/server", None);

    let ids = |rows: Vec<glassbox_store::AuditRow>| rows.iter().map(|a| a.id).collect::<Vec<_>>();
    assert_eq!(
        ids(store.history("npx @x/server", Some("1.0.0")).unwrap()),
        [second, first]
    );
    assert_eq!(
        ids(store.history("npx @x/server", None).unwrap()),
        [unversioned]
    );
    assert!(store.history("npx @z/server", None).unwrap().is_empty());
}

pub fn reviews_publish_or_reject_withheld_findings_once(b: &dyn Backend) {
    let tmp = Tmp::new("review");
    let mut store = Store::open_location(&b.fresh("review")).unwrap();
    let dir = bundle(&tmp.0);
    for run_id in ["r1", "r2"] {
        let (r, m) = run(run_id, "npx server");
        store.record(&r, &m, Some("1.0.0"), &dir).unwrap();
    }
    let withheld = store.withheld().unwrap();
    assert_eq!(withheld.len(), 2);
    assert!(withheld.iter().all(|f| f.accusation));
    let (accepted, rejected) = (withheld[0].id, withheld[1].id);

    store
        .review(accepted, Decision::Accept, "ana", "reproduced by hand")
        .unwrap();
    store
        .review(rejected, Decision::Reject, "bo", "the server's own cache")
        .unwrap();
    assert!(store.withheld().unwrap().is_empty());
    let status = |id| {
        let audits = store.audits().unwrap();
        let mut findings = audits.iter().flat_map(|a| &a.findings);
        findings.find(|f| f.id == id).unwrap().status
    };
    assert_eq!(status(accepted), FindingStatus::Published);
    assert_eq!(status(rejected), FindingStatus::Rejected);

    let reviews = store.reviews_of(rejected).unwrap();
    let [review] = &reviews[..] else {
        panic!("one review: {reviews:?}")
    };
    assert_eq!(
        (
            review.finding_id,
            review.decision,
            review.reviewer.as_str(),
            review.text.as_str()
        ),
        (rejected, Decision::Reject, "bo", "the server's own cache")
    );
    // RFC 3339, UTC: 2025-01-02T03:04:05.678Z
    assert!(
        review.at.len() == 24 && review.at.as_bytes()[10] == b'T' && review.at.ends_with('Z'),
        "{}",
        review.at
    );

    // A second review is refused, saying who decided.
    let err = store
        .review(accepted, Decision::Reject, "cy", "changed my mind")
        .unwrap_err();
    assert!(matches!(err, Error::AlreadyReviewed { .. }), "{err}");
    assert!(err.to_string().contains("accept by ana"), "{err}");
    // So is a review of a finding that was never withheld, or does not exist.
    let published = store.audits().unwrap()[0]
        .findings
        .iter()
        .find(|f| !f.accusation)
        .unwrap()
        .id;
    assert!(matches!(
        store.review(published, Decision::Accept, "ana", ""),
        Err(Error::NotWithheld {
            status: FindingStatus::Published,
            ..
        })
    ));
    assert!(matches!(
        store.review(9999, Decision::Accept, "ana", ""),
        Err(Error::NoSuchFinding(9999))
    ));
    assert!(store.reviews_of(published).unwrap().is_empty());
    // A refused review wrote nothing.
    assert_eq!(store.reviews_of(accepted).unwrap().len(), 1);
}

pub fn a_newer_store_is_refused(b: &dyn Backend) {
    let loc = b.fresh("newer");
    Store::open_location(&loc).unwrap();
    let newer = MIGRATIONS.len() as i64 + 1;
    b.set_version(&loc, newer);
    let err = Store::open_location(&loc).unwrap_err();
    assert!(matches!(err, Error::TooNew { found, .. } if found == newer));
    let msg = err.to_string();
    assert!(
        msg.starts_with(&loc.display().to_string())
            && msg.contains(&format!("schema version {newer} is newer"))
            && msg.contains("upgrade"),
        "{msg}"
    );
    assert_eq!(b.version(&loc), newer, "never downgraded");
}

/// Several processes' worth of writers (threads, each with its own connection) open a new
/// store at once (all migrating it) and record at once: every audit is there, whole, with its
/// own id.
pub fn concurrent_writers_lose_nothing(b: &dyn Backend) {
    const WRITERS: usize = 4;
    const EACH: usize = 10;
    let tmp = Tmp::new("concurrent");
    let dir = bundle(&tmp.0);
    let loc = b.fresh("concurrent");
    let start = Barrier::new(WRITERS);
    let ids: Vec<i64> = thread::scope(|s| {
        let handles: Vec<_> = (0..WRITERS)
            .map(|w| {
                let (loc, dir, start) = (&loc, &dir, &start);
                s.spawn(move || {
                    start.wait();
                    let mut store = Store::open_location(loc).unwrap();
                    (0..EACH)
                        .map(|n| {
                            let (r, m) = run(&format!("w{w}-{n}"), "npx server");
                            store.record(&r, &m, Some("1.0.0"), dir).unwrap()
                        })
                        .collect::<Vec<_>>()
                })
            })
            .collect();
        handles
            .into_iter()
            .flat_map(|h| h.join().unwrap())
            .collect()
    });
    let mut unique = ids.clone();
    unique.sort_unstable();
    unique.dedup();
    assert_eq!(unique.len(), WRITERS * EACH, "{ids:?}");
    let store = Store::open_location(&loc).unwrap();
    let audits = store.audits().unwrap();
    assert_eq!(audits.len(), WRITERS * EACH);
    assert!(audits
        .iter()
        .all(|a| a.checks.len() == 3 && a.findings.len() == 2));
    assert_eq!(b.version(&loc), MIGRATIONS.len() as i64);
}

/// Set in the child of [`kill_9_keeps_every_committed_audit`]: the store it writes to, and
/// the bundle it records.
const WRITER: &str = "GLASSBOX_STORE_TEST_WRITER";
const WRITER_BUNDLE: &str = "GLASSBOX_STORE_TEST_WRITER_BUNDLE";
const COMMITTED: &str = "committed ";

/// Records audits as fast as it can, printing each run id once its transaction committed.
fn writer(store: StoreLocation, dir: &Path) -> ! {
    let mut store = Store::open_location(&store).unwrap();
    let mut out = io::stdout().lock();
    for n in 0u64.. {
        let (r, m) = run(&format!("run-{n}"), "npx server");
        store.record(&r, &m, Some("1.0.0"), dir).unwrap();
        writeln!(out, "{COMMITTED}{}", r.run_id).unwrap();
        out.flush().unwrap();
    }
    unreachable!("the parent kills the writer")
}

/// A writer killed with SIGKILL (mid-transaction, most likely) loses only what it had not
/// committed. `backend` is not made in the writer (the child this test runs as).
pub fn kill_9_keeps_every_committed_audit<B: Backend>(backend: impl FnOnce() -> B) {
    if let (Some(store), Some(dir)) = (env::var_os(WRITER), env::var_os(WRITER_BUNDLE)) {
        writer(StoreLocation::parse(store), Path::new(&dir));
    }
    let b = backend();
    let tmp = Tmp::new("kill9");
    let loc = b.fresh("kill9");
    let dir = bundle(&tmp.0);
    let text = match &loc {
        StoreLocation::Sqlite(p) => p.clone().into_os_string(),
        StoreLocation::Postgres(url) => url.into(),
    };
    // This test again, in a child, as the writer.
    let mut child = Command::new(env::current_exe().unwrap())
        .args([
            "--exact",
            "kill_9_keeps_every_committed_audit",
            "--nocapture",
            "--quiet",
            "--test-threads=1",
        ])
        .env(WRITER, text)
        .env(WRITER_BUNDLE, &dir)
        .stdout(Stdio::piped())
        .spawn()
        .unwrap();
    let stdout = child.stdout.take().unwrap();
    let (tx, rx) = mpsc::channel();
    let reader = thread::spawn(move || {
        for line in BufReader::new(stdout).lines() {
            let line = line.unwrap();
            if let Some((_, run_id)) = line.split_once(COMMITTED) {
                let _ = tx.send(run_id.to_string());
            }
        }
    });
    let mut committed = Vec::new();
    while committed.len() < 50 {
        match rx.recv_timeout(Duration::from_secs(120)) {
            Ok(run_id) => committed.push(run_id),
            Err(e) => {
                let _ = child.kill();
                panic!("the writer stopped after {} audits: {e}", committed.len());
            }
        }
    }
    // `Child::kill` is SIGKILL: mid-transaction, most likely.
    child.kill().unwrap();
    assert_eq!(child.wait().unwrap().signal(), Some(9), "SIGKILL");
    reader.join().unwrap();
    committed.extend(rx.try_iter());

    let store = Store::open_location(&loc).unwrap();
    b.check_integrity(&loc);
    let audits = store.audits().unwrap();
    for run_id in &committed {
        assert!(
            audits.iter().any(|a| &a.run_id == run_id),
            "{run_id} was committed but is missing"
        );
    }
    // At most the one commit the writer had no time to report; every audit whole.
    assert!(audits.len() <= committed.len() + 1);
    assert!(audits
        .iter()
        .all(|a| a.checks.len() == 3 && a.findings.len() == 2));
}
