//! Every audit of a store, published as [`publish::published`](crate::publish::published)
//! publishes it, as a static site (`glassbox_report::site`), written page by page.

use crate::publish::{published, with_report};
use crate::Error;
use std::path::Path;

/// What [`write`] did.
#[derive(Debug, Default)]
pub struct Written {
    /// Pages written.
    pub pages: usize,
    /// Audits left out, each with why (their evidence could not be read).
    pub left_out: Vec<(i64, String)>,
}

/// Writes the site of every audit of `store` into `out` (made if missing; its pages replaced),
/// with the coverage ledger of the controls in `fixtures` and the cases in `regressions`. An
/// audit whose report or evidence cannot be read is left out and named in [`Written`].
pub fn write(
    store: &glassbox_store::Store,
    out: &Path,
    fixtures: &Path,
    regressions: &Path,
) -> Result<Written, Error> {
    let coverage = glassbox_audit::coverage::ledger(fixtures, regressions)?;
    std::fs::create_dir_all(out).map_err(Error::io("create", out))?;
    let mut written = Written::default();
    let mut write = |page: &glassbox_report::site::Page| {
        let file = out.join(&page.name);
        std::fs::write(&file, &page.html).map_err(Error::io("write", &file))?;
        written.pages += 1;
        Ok::<_, Error>(())
    };
    let mut site = glassbox_report::site::Site::new();
    let mut left_out = Vec::new();
    for row in store.audits()? {
        let id = row.id;
        let stored = match with_report(store, row) {
            Ok(s) => s,
            // The store failing is the site failing; an audit it cannot show is left out.
            Err(e @ Error::Store(_)) => return Err(e),
            Err(e) => {
                let why = match e {
                    Error::Evidence { dir, source, .. } => format!(
                        "cannot read its evidence bundle at {}: {source}",
                        dir.display()
                    ),
                    e => e.to_string(),
                };
                left_out.push((id, why));
                continue;
            }
        };
        let report = published(&stored.row, stored.report, &stored.evidence);
        let row = &stored.row;
        write(&site.add(&glassbox_report::site::Audit {
            id,
            target: &row.target,
            version: row.target_version.as_deref(),
            started_at: &row.started_at,
            evidence: &stored.evidence,
            report: &report,
        }))?;
    }
    for page in site.finish(&coverage) {
        write(&page)?;
    }
    written.left_out = left_out;
    Ok(written)
}
