//! What the batch tests (tests/batch.rs, tests/shard.rs) share: work folders with copies of
//! control fixtures, output as text, and audits recorded again as package audits.
#![allow(dead_code)] // each test binary uses its own part

use glassbox_model::{AuditReport, Manifest, PackageRef};
use std::path::{Path, PathBuf};
use std::process::Output;

/// A JSON file of an evidence bundle (`report.json`, `manifest.json`), parsed.
pub fn read_json(path: &Path) -> serde_json::Value {
    let bytes = std::fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    serde_json::from_slice(&bytes).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The result of check `id` in a report's JSON.
pub fn check_of<'a>(report: &'a serde_json::Value, id: &str) -> &'a serde_json::Value {
    report["checks"]
        .as_array()
        .and_then(|c| c.iter().find(|c| c["id"] == id))
        .unwrap_or_else(|| panic!("no check {id} in the report"))
}

/// The source tree.
pub fn repo() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../..")
}

pub fn fixtures() -> PathBuf {
    repo().join("fixtures")
}

/// A work folder, removed when the test ends (passed or not).
pub struct Work(PathBuf);

impl std::ops::Deref for Work {
    type Target = Path;
    fn deref(&self) -> &Path {
        &self.0
    }
}

impl Drop for Work {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

/// A work folder `glassbox-<name>-<pid>` under cargo's target dir, with copies of the fixture
/// `lib` and of `cases` in `servers/`.
pub fn work(name: &str, cases: &[&str]) -> Work {
    let w = Path::new(env!("CARGO_TARGET_TMPDIR"))
        .join(format!("glassbox-{name}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&w);
    for dir in ["lib"].iter().chain(cases) {
        let to = w.join("servers").join(dir);
        std::fs::create_dir_all(&to).unwrap();
        for e in std::fs::read_dir(fixtures().join(dir)).unwrap().flatten() {
            if e.file_type().unwrap().is_file() {
                std::fs::copy(e.path(), to.join(e.file_name())).unwrap();
            }
        }
    }
    Work(w)
}

/// Whether `done` becomes true within `bound`, looked at every 20 ms: for what happens a moment
/// after something else (a process reaped, a line flushed), so that a loaded machine's delay is
/// not taken for a failure, and a failure is still one.
pub fn eventually(bound: std::time::Duration, mut done: impl FnMut() -> bool) -> bool {
    let deadline = std::time::Instant::now() + bound;
    loop {
        if done() {
            return true;
        }
        if std::time::Instant::now() >= deadline {
            return false;
        }
        std::thread::sleep(std::time::Duration::from_millis(20));
    }
}

pub fn text(o: &Output) -> String {
    format!(
        "status {:?}\nstdout:\n{}\nstderr:\n{}",
        o.status.code(),
        String::from_utf8_lossy(&o.stdout),
        String::from_utf8_lossy(&o.stderr)
    )
}

/// Records the audit `id`'s bundle again as an audit of `npm:<name>` at `version`, as if a
/// package had been audited; with `stale_check`, one check's version is not the current one.
/// Returns the new audit's id.
pub fn record_as_package(
    store: &mut glassbox_store::Store,
    id: i64,
    name: &str,
    version: &str,
    stale_check: bool,
) -> i64 {
    let row = store.audit(id).unwrap().unwrap();
    let read = |f: &str| std::fs::read(row.evidence_dir.join(f)).unwrap();
    let mut manifest: Manifest = serde_json::from_slice(&read("manifest.json")).unwrap();
    let mut report: AuditReport = serde_json::from_slice(&read("report.json")).unwrap();
    let run_id = format!("as-{name}-{version}");
    manifest.run_id = run_id.clone();
    report.run_id = run_id;
    manifest.target.package = Some(PackageRef {
        registry: "npm".into(),
        name: name.into(),
        requested: version.into(),
        version: version.into(),
        ..Default::default()
    });
    if stale_check {
        report.checks[0].version += 100;
    }
    store
        .record(&report, &manifest, None, &row.evidence_dir)
        .unwrap()
}
