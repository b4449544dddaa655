//! Reports byte for byte: the evidence of real runs (fixture controls and a corpus server,
//! under `tests/golden/bundles/`) judged by the current checks and rendered in every format a
//! user reads (JSON, Markdown, HTML, terminal text, SARIF; as a reviewer sees it and as it is
//! published with its accusations awaiting review) and as a static site, compared with what
//! was rendered before (`tests/golden/rendered/`). A change of structure must leave every
//! byte as it was; a change meant to alter a report regenerates them
//! (`UPDATE_GOLDEN=1 cargo test -p glassbox-cli --test golden`), and the diff of the
//! rendered files is then the change a reviewer reads.

use glassbox_audit::recheck::{published, recheck};
use glassbox_checks::Proofs;
use glassbox_model::bundle;
use glassbox_report::site::{Audit, Site};
use glassbox_report::Publication;
use std::path::{Path, PathBuf};

fn golden() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/golden")
}

/// The bundles, by name, in order, as paths relative to the crate (where cargo runs its
/// tests): a report names its bundle's folder, and what is rendered must not depend on where
/// the repository was cloned.
fn bundles() -> Vec<PathBuf> {
    let relative = Path::new("tests/golden/bundles");
    assert!(
        golden().join("bundles") == std::env::current_dir().unwrap().join(relative),
        "the golden test runs in its crate's folder (as cargo runs it)"
    );
    let mut dirs: Vec<PathBuf> = std::fs::read_dir(relative)
        .expect("tests/golden/bundles readable")
        .map(|e| relative.join(e.expect("a directory entry").file_name()))
        .filter(|p| p.is_dir())
        .collect();
    dirs.sort();
    dirs
}

/// Every file rendered from the bundles: (path under `rendered/`, its text).
fn render_all() -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut site = Site::new();
    for (i, dir) in bundles().iter().enumerate() {
        let name = dir.file_name().unwrap().to_string_lossy().to_string();
        let r = recheck(dir, &Proofs::all_proven())
            .unwrap_or_else(|e| panic!("{name}: the bundle re-evaluates: {e}"));
        let ev = bundle::load(dir).unwrap_or_else(|e| panic!("{name}: the bundle loads: {e}"));
        let whole = &r.report;
        // As published before review: every accusation awaits it (withheld), the rest shown.
        let unreviewed = published(whole, &ev.manifest, &|_, _| None);
        let file = |f: &str| format!("{name}/{f}");
        out.push((file("report.json"), glassbox_report::json(whole) + "\n"));
        out.push((
            file("report.txt"),
            glassbox_report::terminal(&ev, whole, false),
        ));
        out.push((file("report.md"), glassbox_report::markdown(&ev, whole)));
        out.push((file("report.html"), glassbox_report::html(&ev, whole)));
        out.push((
            file("published.md"),
            glassbox_report::markdown(&ev, &unreviewed),
        ));
        out.push((
            file("report.sarif"),
            glassbox_report::sarif(&ev, whole, &|f| {
                if f.accusation {
                    Publication::Withheld
                } else {
                    Publication::Published
                }
            }),
        ));
        let target = glassbox_store::target_of(&ev.manifest);
        let version = ev
            .manifest
            .target
            .package
            .as_ref()
            .map(|p| p.version.clone());
        let page = site.add(&Audit {
            id: i as i64 + 1,
            target: &target,
            version: version.as_deref(),
            started_at: &ev.manifest.started_at,
            evidence: &ev,
            report: &unreviewed,
        });
        out.push((format!("site/{}", page.name), page.html));
    }
    for page in site.finish(&[]) {
        out.push((format!("site/{}", page.name), page.html));
    }
    out
}

/// The first line where `a` and `b` differ, both sides.
fn first_difference(a: &str, b: &str) -> String {
    for (n, (x, y)) in a.lines().zip(b.lines()).enumerate() {
        if x != y {
            return format!("line {}: was {x:?}\n      now {y:?}", n + 1);
        }
    }
    format!(
        "lengths differ: was {} lines, now {}",
        a.lines().count(),
        b.lines().count()
    )
}

#[test]
fn stored_evidence_renders_byte_for_byte_as_before() {
    let rendered = golden().join("rendered");
    let files = render_all();
    assert!(
        files.len() > 20,
        "too few rendered files: is tests/golden/bundles empty?"
    );
    if std::env::var_os("UPDATE_GOLDEN").is_some() {
        let _ = std::fs::remove_dir_all(&rendered);
        for (path, text) in &files {
            let p = rendered.join(path);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, text).unwrap();
        }
        return;
    }
    let mut misses = Vec::new();
    for (path, now) in &files {
        match std::fs::read_to_string(rendered.join(path)) {
            Ok(was) if &was == now => {}
            Ok(was) => misses.push(format!("{path}: {}", first_difference(&was, now))),
            Err(e) => misses.push(format!("{path}: nothing rendered before ({e})")),
        }
    }
    assert!(
        misses.is_empty(),
        "{} of {} rendered files changed (if meant: UPDATE_GOLDEN=1 cargo test -p glassbox-cli \
         --test golden, and read the diff):\n{}",
        misses.len(),
        files.len(),
        misses.join("\n")
    );
}

/// Rendering twice gives the same bytes: nothing in a report depends on the clock, the
/// machine or the order of a hash map (else the comparison above would prove nothing).
#[test]
fn rendering_is_deterministic() {
    let a = render_all();
    let b = render_all();
    for ((pa, ta), (pb, tb)) in a.iter().zip(&b) {
        assert_eq!(pa, pb);
        assert!(ta == tb, "{pa}: {}", first_difference(ta, tb));
    }
}
