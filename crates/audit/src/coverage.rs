//! `glassbox coverage`: how many labelled examples stand behind each check.
//!
//! Positive examples are controls that must flag and regression cases that expect a flag;
//! negative ones are controls that must pass and regression cases that expect a pass. A check
//! with fewer than [`FRAGILE_BELOW`] of either kind is *fragile*: little stands between it and
//! a silent regression.

use crate::selftest::Controls;
use crate::Error;
use glassbox_model::CoverageRow;
use serde::{Deserialize, Serialize};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

/// Fewer labelled examples of a kind than this makes a check fragile.
pub const FRAGILE_BELOW: usize = 3;

/// Where regression cases are in the source tree this binary was built from.
pub fn default_regressions() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../regressions")
}

/// What a regression case expects: check id → `flag` or `pass`, and why the case exists.
#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct Expected {
    /// Why this case exists (the mistake it pins).
    pub why: String,
    /// Check id → `flag` | `pass`.
    pub checks: BTreeMap<String, String>,
}

/// Every regression case under `dir`: its folder and expectations.
pub fn regressions(dir: &Path) -> Result<Vec<(PathBuf, Expected)>, Error> {
    let mut out = Vec::new();
    let Ok(entries) = std::fs::read_dir(dir) else {
        return Ok(out);
    };
    for e in entries.flatten() {
        let p = e.path();
        if !p.is_dir() {
            continue;
        }
        let f = p.join("expected.json");
        let text = std::fs::read(&f).map_err(|source| Error::Evidence {
            path: f.clone(),
            source,
        })?;
        let x: Expected = serde_json::from_slice(&text)
            .map_err(|e| Error::Usage(format!("{}: {e}", f.display())))?;
        out.push((p, x));
    }
    out.sort_by(|a, b| a.0.cmp(&b.0));
    Ok(out)
}

/// The coverage ledger.
pub fn ledger(fixtures: &Path, regressions_dir: &Path) -> Result<Vec<CoverageRow>, Error> {
    let controls = Controls::load(fixtures)?;
    let regs = regressions(regressions_dir)?;
    Ok(glassbox_checks::registry()
        .iter()
        .map(|c| {
            let id = c.info.id;
            let count = |want: &[&str]| {
                controls
                    .cases
                    .iter()
                    .filter(|k| k.expect.get(id).is_some_and(|w| want.contains(&w.as_str())))
                    .count()
            };
            let regs_of = |want: &str| {
                regs.iter()
                    .filter(|(_, x)| x.checks.get(id).map(String::as_str) == Some(want))
                    .count()
            };
            let (pos, neg) = (count(&["flag"]), count(&["pass", "not-observed"]));
            CoverageRow {
                id: id.into(),
                version: c.info.version,
                positive_controls: pos,
                negative_controls: neg,
                known_gaps: count(&["todo-flag", "todo-pass"]),
                regression_cases: regs_of("flag") + regs_of("pass"),
                fragile: pos + regs_of("flag") < FRAGILE_BELOW
                    || neg + regs_of("pass") < FRAGILE_BELOW,
            }
        })
        .collect())
}
