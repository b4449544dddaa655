//! What a registry's pipeline does around single audits, as library calls a program can make
//! (a registry's own pipeline, a CI action), the same ones the `glassbox` binary makes:
//!
//! - [`publish`]: what may be published of a stored audit (retracted claims withdrawn, findings
//!   awaiting review withheld, rejected ones dropped) and its SARIF view;
//! - [`review`]: a person's decision on a withheld finding, and the regression case a
//!   rejection makes of the run;
//! - [`site`]: every published audit of a store as a static site;
//! - [`batch`]: many servers, a bounded pool at a time, each version pinned before it runs, a
//!   version already audited with the current checks skipped (resume), sharded by target.
//!
//! The binary keeps parsing, progress, the choice of rendering and the exit codes.
//!
//! An error's message says what failed; its cause is its [`source`](std::error::Error::source):
//! show a user the whole line, each cause once ([`glassbox_model::error_line`]).
#![deny(missing_docs)]

pub mod batch;
pub mod publish;
pub mod review;
pub mod site;

use std::path::PathBuf;

/// What went wrong.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// The store could not be opened, read or written.
    #[error(transparent)]
    Store(#[from] glassbox_store::Error),
    /// No audit of that id in the store.
    #[error("no audit {id} in the store {store}")]
    NoAudit {
        /// The id asked for.
        id: i64,
        /// The store, as shown to a user.
        store: String,
    },
    /// The audit has no stored report.
    #[error("the audit has no stored report")]
    NoReport(i64),
    /// No finding of that id in the store.
    #[error("no finding {0} in the store (see `glassbox review list`)")]
    NoFinding(i64),
    /// A finding whose audit is gone from the store.
    #[error("the audit of finding {0} is gone")]
    FindingWithoutAudit(i64),
    /// An audit's evidence bundle could not be read.
    #[error("cannot read the evidence bundle of audit {id} at {}", dir.display())]
    Evidence {
        /// The audit.
        id: i64,
        /// Its bundle.
        dir: PathBuf,
        /// Why.
        #[source]
        source: glassbox_model::bundle::Error,
    },
    /// A file or folder could not be made, read or written.
    #[error("cannot {what} {}", path.display())]
    Io {
        /// What was being done (`write`, `create`, `copy`...).
        what: &'static str,
        /// On what.
        path: PathBuf,
        /// Why.
        #[source]
        source: std::io::Error,
    },
    /// A folder to be made exists already (a regression case made before).
    #[error("{} exists already", .0.display())]
    Exists(PathBuf),
    /// The coverage ledger could not be made (the site's coverage page).
    #[error(transparent)]
    Audit(#[from] glassbox_audit::Error),
}

impl Error {
    /// The error of `what` on `path`, for `map_err`.
    pub(crate) fn io(
        what: &'static str,
        path: &std::path::Path,
    ) -> impl FnOnce(std::io::Error) -> Error {
        let path = path.to_path_buf();
        move |source| Error::Io { what, path, source }
    }
}
