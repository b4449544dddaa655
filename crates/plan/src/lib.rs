//! What glassbox audits, decided before anything runs: MCP client configurations and
//! `server.json` files ([`config`]), launcher lines such as `npx -y PKG` ([`launcher`]), a package's own documented configuration
//! ([`readme`]),
//! packages and their installers ([`install`]), `glassbox batch` lists ([`batch`]), the
//! command a target resolves to on the host ([`target`]) and the destinations its own
//! configuration explains ([`explain`]).
//!
//! Pure planning: this crate links neither the sandbox nor the microVM, so every form a user
//! writes can be parsed, tested and fuzzed as text. `glassbox-audit` runs what it plans.
#![deny(missing_docs)]
#![forbid(unsafe_code)]

use std::path::PathBuf;

pub mod batch;
pub mod command;
pub mod config;
pub mod explain;
pub mod install;
pub mod lack;
pub mod launcher;
pub mod readme;
pub mod target;
pub mod words;

/// What went wrong deciding what to audit.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// Bad usage: a target, configuration or list that cannot be audited as written.
    #[error("{0}")]
    Usage(String),
    /// The command is not on PATH.
    #[error("command not found: {0}")]
    CommandNotFound(String),
    /// A package could not be resolved or installed.
    #[error("{0}")]
    Install(String),
    /// A file of glassbox's own could not be written.
    #[error("cannot write {path}: {source}")]
    Write {
        /// Where.
        path: PathBuf,
        /// Why.
        source: std::io::Error,
    },
    /// Anything else.
    #[error("internal error: {0}")]
    Internal(String),
}

/// glassbox's state directory: `$GLASSBOX_STATE_DIR`, else `$XDG_STATE_HOME/glassbox`, else
/// `~/.local/state/glassbox`.
pub fn state_dir() -> PathBuf {
    if let Some(d) = std::env::var_os("GLASSBOX_STATE_DIR") {
        return PathBuf::from(d);
    }
    if let Some(d) = std::env::var_os("XDG_STATE_HOME") {
        return PathBuf::from(d).join("glassbox");
    }
    let home = std::env::var_os("HOME").unwrap_or_else(|| "/tmp".into());
    PathBuf::from(home).join(".local/state/glassbox")
}
