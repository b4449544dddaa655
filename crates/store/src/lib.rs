//! The store of glassbox: audits, their evidence bundles, verdicts and reviews, in SQLite (one
//! machine) or PostgreSQL (many machines writing one store: `postgres://` locations).
//!
//! It records what an audit produced (an [`AuditReport`] and its bundle's [`Manifest`]) and
//! answers questions about it; it knows nothing of how checks work. Accusing findings are
//! stored `withheld` until a person reviews them ([`Store::review`]).
//!
//! Both databases hold the same schema ([`MIGRATIONS`], written for SQLite; PostgreSQL gets
//! it with 64-bit integers and database-generated ids) and run the same statements: the
//! store's logic is written once, over the small common ground of its `sql` module.
#![deny(missing_docs)]

mod location;
mod sql;
#[cfg(feature = "testing")]
pub mod testing;

pub use location::{redact, StoreLocation};

use glassbox_model::{AuditReport, Manifest, Outcome, Verdict};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use sql::{params, Db, Row, Sql};
use std::cell::RefCell;
use std::ffi::OsStr;
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::{fmt, fs, io};

/// The schema, one migration a version: `MIGRATIONS[n]` takes a database from schema version
/// `n` to `n + 1` (SQLite: `PRAGMA user_version`; PostgreSQL: the table `glassbox_schema`).
/// Written in SQLite's dialect; PostgreSQL runs it as `sql::postgres_ddl` rewrites it. Append
/// only; never edit a released migration.
pub const MIGRATIONS: &[&str] = &[
    // v1
    "CREATE TABLE audits (
        id INTEGER PRIMARY KEY,
        run_id TEXT NOT NULL UNIQUE,
        target TEXT NOT NULL,              -- the command, joined with spaces, or a package spec
        target_version TEXT,               -- the exact package version, when known
        started_at TEXT NOT NULL,          -- RFC 3339
        finished_at TEXT,                  -- RFC 3339
        glassbox_version TEXT NOT NULL,
        verdict TEXT NOT NULL,             -- as in report.json: clean, flagged, withheld, ...
        inconclusive_reason TEXT,
        evidence_dir TEXT NOT NULL,
        evidence_sha256 TEXT NOT NULL,     -- bundle_hash() of evidence_dir when recorded
        report_json TEXT NOT NULL          -- the whole AuditReport
    ) STRICT;
    CREATE INDEX audits_target ON audits(target, target_version);
    CREATE TABLE check_results (
        audit_id INTEGER NOT NULL REFERENCES audits(id) ON DELETE CASCADE,
        check_id TEXT NOT NULL,
        version INTEGER NOT NULL,
        outcome TEXT NOT NULL,             -- as in report.json: pass, flag, not-observed, ...
        reason TEXT,
        PRIMARY KEY (audit_id, check_id)
    ) STRICT;
    CREATE TABLE findings (
        id INTEGER PRIMARY KEY,
        audit_id INTEGER NOT NULL REFERENCES audits(id) ON DELETE CASCADE,
        check_id TEXT NOT NULL,
        check_version INTEGER NOT NULL,
        summary TEXT NOT NULL,
        accusation INTEGER NOT NULL CHECK (accusation IN (0, 1)),
        evidence_json TEXT NOT NULL,       -- event ids
        flows_json TEXT NOT NULL,          -- flow ids
        status TEXT NOT NULL CHECK (status IN ('published', 'withheld', 'rejected'))
    ) STRICT;
    CREATE INDEX findings_audit ON findings(audit_id);
    CREATE INDEX findings_status ON findings(status);
    CREATE TABLE reviews (
        id INTEGER PRIMARY KEY,
        finding_id INTEGER NOT NULL REFERENCES findings(id) ON DELETE CASCADE,
        decision TEXT NOT NULL CHECK (decision IN ('accept', 'reject')),
        reviewer TEXT NOT NULL,
        note_or_reason TEXT NOT NULL,
        at TEXT NOT NULL                   -- RFC 3339, UTC
    ) STRICT;
    CREATE INDEX reviews_finding ON reviews(finding_id);",
];

/// What went wrong.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// SQLite failed.
    #[error("store: {0}")]
    Sqlite(#[from] rusqlite::Error),
    /// PostgreSQL failed (connecting, or a statement). Never carries a password.
    #[error("store: PostgreSQL: {}", chain(.0))]
    Postgres(postgres::Error),
    /// The PostgreSQL URL asks for TLS, which this build does not speak.
    #[error(
        "store: sslmode={0} needs TLS, which glassbox does not speak to PostgreSQL: use \
         sslmode=disable (or prefer), over a private network or a TLS tunnel"
    )]
    Tls(String),
    /// A file could not be read or created.
    #[error("{}: {source}", path.display())]
    Io {
        /// The file.
        path: PathBuf,
        /// Why.
        source: io::Error,
    },
    /// JSON could not be written or read back.
    #[error("store: JSON: {0}")]
    Json(#[from] serde_json::Error),
    /// A column holds something the store never writes there.
    #[error("store: column {column}: {why}")]
    Column {
        /// Its index in the query.
        column: usize,
        /// What is wrong with it.
        why: String,
    },
    /// The database was made by a newer glassbox.
    #[error(
        "{store}: schema version {found} is newer than this glassbox knows ({known}): \
         upgrade glassbox (the store is never downgraded)"
    )]
    TooNew {
        /// The database (printed without its password).
        store: StoreLocation,
        /// Its schema version (SQLite: `user_version`; PostgreSQL: `glassbox_schema`).
        found: i64,
        /// The newest version this binary knows.
        known: usize,
    },
    /// The run is already recorded.
    #[error("run {run_id} is already recorded (audit {audit})")]
    Duplicate {
        /// The run.
        run_id: String,
        /// Its audit id.
        audit: i64,
    },
    /// The report and the manifest are of different runs.
    #[error("the report is of run {report} but the manifest of run {manifest}")]
    RunMismatch {
        /// The report's run id.
        report: String,
        /// The manifest's run id.
        manifest: String,
    },
    /// A path is not UTF-8 (the store keeps paths as text).
    #[error("{}: not valid UTF-8", .0.display())]
    NonUtf8Path(PathBuf),
    /// An evidence bundle holds something other than files and directories.
    #[error("{}: not a regular file or directory", .0.display())]
    NotAFile(PathBuf),
    /// No such finding.
    #[error("finding {0} does not exist")]
    NoSuchFinding(i64),
    /// The finding was reviewed already.
    #[error("finding {finding} was already reviewed: {decision} by {reviewer} at {at}")]
    AlreadyReviewed {
        /// The finding.
        finding: i64,
        /// The earlier decision.
        decision: Decision,
        /// Who made it.
        reviewer: String,
        /// When.
        at: String,
    },
    /// The finding is not awaiting review.
    #[error("finding {finding} is {status}: only withheld findings are reviewed")]
    NotWithheld {
        /// The finding.
        finding: i64,
        /// Its status.
        status: FindingStatus,
    },
    /// Neither `GLASSBOX_STORE`, `GLASSBOX_STATE_DIR` nor `HOME` is set.
    #[error("no store path: set GLASSBOX_STORE, GLASSBOX_STATE_DIR or HOME")]
    NoStorePath,
    /// A SQLite path was asked for, but the store is a PostgreSQL database.
    #[error("the store {0} is a PostgreSQL database, not a file")]
    NotAFileStore(StoreLocation),
}

/// An error's message followed by those of its sources that it does not already include.
fn chain(e: &(dyn std::error::Error + 'static)) -> String {
    let mut text = e.to_string();
    let mut source = e.source();
    while let Some(s) = source {
        let more = s.to_string();
        if !text.contains(&more) {
            text.push_str(": ");
            text.push_str(&more);
        }
        source = s.source();
    }
    text
}

impl From<postgres::Error> for Error {
    fn from(e: postgres::Error) -> Error {
        Error::Postgres(e)
    }
}

/// Whether a finding is shown.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FindingStatus {
    /// Shown: not an accusation, or an accusation a reviewer accepted.
    Published,
    /// An accusation awaiting review.
    Withheld,
    /// An accusation a reviewer rejected.
    Rejected,
}

/// A reviewer's decision on a withheld finding.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Decision {
    /// The accusation stands: publish it.
    Accept,
    /// The accusation is wrong: never publish it.
    Reject,
}

impl fmt::Display for FindingStatus {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&text(self))
    }
}

impl fmt::Display for Decision {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&text(self))
    }
}

/// One recorded audit.
#[derive(Clone, Debug, PartialEq)]
pub struct AuditRow {
    /// Audit id in the store.
    pub id: i64,
    /// The run id (the evidence bundle's folder name).
    pub run_id: String,
    /// The command, joined with spaces, or a package spec.
    pub target: String,
    /// The exact package version, when known.
    pub target_version: Option<String>,
    /// Wall-clock start (RFC 3339).
    pub started_at: String,
    /// Wall-clock end (RFC 3339).
    pub finished_at: Option<String>,
    /// The glassbox version that ran it.
    pub glassbox_version: String,
    /// The verdict of the run, as recorded (reviews do not change it).
    pub verdict: Verdict,
    /// Why the verdict is inconclusive.
    pub inconclusive_reason: Option<String>,
    /// Where the evidence bundle is.
    pub evidence_dir: PathBuf,
    /// [`bundle_hash`] of the bundle when it was recorded.
    pub evidence_sha256: String,
    /// Every check's result.
    pub checks: Vec<CheckRow>,
    /// Every finding, in report order.
    pub findings: Vec<FindingRow>,
}

/// The result of one check in one audit.
#[derive(Clone, Debug, PartialEq)]
pub struct CheckRow {
    /// Stable check id.
    pub check_id: String,
    /// Version of its logic.
    pub version: u32,
    /// The outcome.
    pub outcome: Outcome,
    /// Why, for `not-observed`, `unverified`, `inconclusive` and `retracted`.
    pub reason: Option<String>,
}

/// One finding of one audit.
#[derive(Clone, Debug, PartialEq)]
pub struct FindingRow {
    /// Finding id in the store.
    pub id: i64,
    /// The audit it belongs to.
    pub audit_id: i64,
    /// The check that produced it.
    pub check_id: String,
    /// That check's version.
    pub check_version: u32,
    /// One line saying what was found.
    pub summary: String,
    /// Whether it accuses the server.
    pub accusation: bool,
    /// Ids of the events behind it.
    pub evidence: Vec<u64>,
    /// Ids of the flows behind it.
    pub flows: Vec<u64>,
    /// Whether it is shown.
    pub status: FindingStatus,
}

/// A reviewer's decision on a finding.
#[derive(Clone, Debug, PartialEq)]
pub struct ReviewRow {
    /// Review id in the store.
    pub id: i64,
    /// The finding.
    pub finding_id: i64,
    /// Accept or reject.
    pub decision: Decision,
    /// Who decided.
    pub reviewer: String,
    /// The note (accept) or reason (reject).
    pub text: String,
    /// When (RFC 3339, UTC).
    pub at: String,
}

/// How the tool definitions (and the server's instructions) changed between two stored
/// audits' bundles, from the canonical hashes in their manifests ([`tool_changes`]). Nothing
/// when either bundle is gone or predates the hashes.
pub fn bundle_tool_changes(before: &Path, after: &Path) -> Vec<String> {
    match (bundle_session(before), bundle_session(after)) {
        (Some(a), Some(b)) => tool_changes(&a, &b),
        _ => Vec::new(),
    }
}

/// The session of the bundle at `dir`, when its manifest holds tool hashes.
fn bundle_session(dir: &Path) -> Option<glassbox_model::SessionSummary> {
    let m = glassbox_model::bundle::manifest(dir).ok()?;
    (!m.session.tool_hashes.is_empty()).then_some(m.session)
}

/// What changed between two sessions' tool definitions and instructions (by their hashes):
/// `tool NAME added`, `tool NAME changed`, `tool NAME removed`, `instructions changed`.
pub fn tool_changes(
    before: &glassbox_model::SessionSummary,
    after: &glassbox_model::SessionSummary,
) -> Vec<String> {
    let mut out = Vec::new();
    for (name, h) in &after.tool_hashes {
        let name = glassbox_model::printable(name);
        match before.tool_hashes.get(name.as_str()) {
            None => out.push(format!("tool {name} added")),
            Some(old) if old != h => out.push(format!("tool {name} changed")),
            _ => {}
        }
    }
    for name in before.tool_hashes.keys() {
        if !after.tool_hashes.contains_key(name) {
            out.push(format!("tool {} removed", glassbox_model::printable(name)));
        }
    }
    if before.instructions_hash != after.instructions_hash {
        out.push("instructions changed".into());
    }
    out
}

/// What an audit is filed under: `npm:NAME` / `pypi:NAME` for a package (its exact version
/// goes in `target_version`), else the command line.
pub fn target_of(manifest: &Manifest) -> String {
    match &manifest.target.package {
        Some(p) => p.key(),
        None => manifest.target.command.join(" "),
    }
}

/// An open store. Several processes may open the same one: SQLite serialises writers to a
/// file; PostgreSQL takes many machines' writers at once (each [`Store::record`] is one
/// transaction, ids come from the database).
pub struct Store {
    db: RefCell<Db>,
    location: StoreLocation,
}

impl fmt::Debug for Store {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("Store")
            .field("location", &self.location)
            .finish_non_exhaustive()
    }
}

/// What [`Store::publish`] did.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Published {
    /// The audit's id in the store.
    pub id: i64,
    /// The previous audit of the same exact version and how the tool definitions changed
    /// since it, when they did.
    pub changed: Option<(i64, Vec<String>)>,
}

impl Store {
    /// Opens (creating it and its parent directories if needed) the SQLite store at `path`
    /// and brings its schema up to date. A store made by a newer glassbox is refused.
    pub fn open(path: &Path) -> Result<Store, Error> {
        Store::open_location(&StoreLocation::Sqlite(path.into()))
    }

    /// Opens the store at `location` (a SQLite file, created if needed, or a PostgreSQL
    /// database, which must exist) and brings its schema up to date. A store made by a newer
    /// glassbox is refused. PostgreSQL is spoken without TLS: a URL with an `sslmode` other
    /// than `disable` or `prefer` is refused ([`Error::Tls`]).
    pub fn open_location(location: &StoreLocation) -> Result<Store, Error> {
        let store = Store {
            db: RefCell::new(Db::open(location)?),
            location: location.clone(),
        };
        store.migrate()?;
        Ok(store)
    }

    /// Records a finished audit in the store at `location`: the one way an audit reaches the
    /// store (`glassbox audit`, each audit of a batch). Its id, and how its tool definitions
    /// changed since the previous audit of the same exact version (when one was recorded and
    /// they changed).
    pub fn publish(
        location: &StoreLocation,
        report: &AuditReport,
        manifest: &Manifest,
        evidence_dir: &Path,
    ) -> Result<Published, Error> {
        let mut s = Store::open_location(location)?;
        let id = s.record(report, manifest, None, evidence_dir)?;
        let changed = s
            .changes_since_previous(id, manifest)
            .filter(|(_, c)| !c.is_empty());
        Ok(Published { id, changed })
    }

    /// Where the store is.
    pub fn location(&self) -> &StoreLocation {
        &self.location
    }

    /// Where the store is by default ([`StoreLocation::from_env`]).
    pub fn default_location() -> Result<StoreLocation, Error> {
        StoreLocation::from_env()
    }

    /// Where the SQLite store is by default: `$GLASSBOX_STORE` if set, else
    /// `$GLASSBOX_STATE_DIR/store.sqlite` if set, else `~/.local/state/glassbox/store.sqlite`.
    /// Empty variables count as unset. A PostgreSQL URL in `$GLASSBOX_STORE` is an error
    /// ([`Error::NotAFileStore`]): use [`Store::default_location`].
    pub fn default_path() -> Result<PathBuf, Error> {
        match StoreLocation::from_env()? {
            StoreLocation::Sqlite(path) => Ok(path),
            other => Err(Error::NotAFileStore(other)),
        }
    }

    /// The schema version of the store (`MIGRATIONS.len()` once opened).
    pub fn schema_version(&self) -> Result<i64, Error> {
        self.tx(false, |sql| sql.current_version())
    }

    /// Applies the migrations the database lacks, each in its own transaction. The version is
    /// read again inside the (locked) transaction, so concurrent openers migrate once; a store
    /// that is up to date (the common case: every batch worker opens it) takes no lock.
    fn migrate(&self) -> Result<(), Error> {
        let mut db = self.db.borrow_mut();
        if db.transaction(false, |sql| sql.current_version())? == MIGRATIONS.len() as i64 {
            return Ok(());
        }
        loop {
            let done = db.transaction(true, |sql| {
                let found = sql.schema_version()?;
                let version = match usize::try_from(found) {
                    Ok(v) if v == MIGRATIONS.len() => return Ok(true),
                    Ok(v) if v < MIGRATIONS.len() => v,
                    _ => {
                        return Err(Error::TooNew {
                            store: self.location.clone(),
                            found,
                            known: MIGRATIONS.len(),
                        })
                    }
                };
                sql.migrate(MIGRATIONS[version])?;
                sql.set_schema_version(version as i64 + 1)?;
                Ok(false)
            })?;
            if done {
                return Ok(());
            }
        }
    }

    /// Runs `f` in one transaction ([`Db::transaction`]).
    fn tx<T>(
        &self,
        write: bool,
        f: impl FnOnce(&mut Sql<'_, '_>) -> Result<T, Error>,
    ) -> Result<T, Error> {
        self.db.borrow_mut().transaction(write, f)
    }

    /// Records one audit, with its check results and findings, in one transaction, and
    /// returns its id. Accusing findings are stored `withheld`, the others `published`.
    /// The bundle at `evidence_dir` is hashed ([`bundle_hash`]) first.
    pub fn record(
        &mut self,
        report: &AuditReport,
        manifest: &Manifest,
        target_version: Option<&str>,
        evidence_dir: &Path,
    ) -> Result<i64, Error> {
        if report.run_id != manifest.run_id {
            return Err(Error::RunMismatch {
                report: report.run_id.clone(),
                manifest: manifest.run_id.clone(),
            });
        }
        let dir = evidence_dir
            .to_str()
            .ok_or_else(|| Error::NonUtf8Path(evidence_dir.into()))?;
        let hash = bundle_hash(evidence_dir)?;
        let report_json = serde_json::to_string(report)?;
        let target = target_of(manifest);
        let version =
            target_version.or(manifest.target.package.as_ref().map(|p| p.version.as_str()));
        let verdict = text(&report.verdict);
        self.tx(true, |sql| {
            // A run recorded already (by this process or another, even one committing right
            // now) inserts nothing: the database decides, not an earlier look.
            let inserted = sql.row(
                "INSERT INTO audits (run_id, target, target_version, started_at, finished_at,
                    glassbox_version, verdict, inconclusive_reason, evidence_dir,
                    evidence_sha256, report_json)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)
                 ON CONFLICT (run_id) DO NOTHING
                 RETURNING id",
                params![
                    &report.run_id,
                    &target,
                    version,
                    &manifest.started_at,
                    &manifest.finished_at,
                    &manifest.glassbox_version,
                    &verdict,
                    &report.inconclusive_reason,
                    dir,
                    &hash,
                    &report_json,
                ],
            )?;
            let Some(inserted) = inserted else {
                let audit = sql
                    .row(
                        "SELECT id FROM audits WHERE run_id = ?1",
                        params![&report.run_id],
                    )?
                    .map(|r| r.int(0))
                    .transpose()?
                    .unwrap_or(0);
                return Err(Error::Duplicate {
                    run_id: report.run_id.clone(),
                    audit,
                });
            };
            let audit = inserted.int(0)?;
            for c in &report.checks {
                sql.execute(
                    "INSERT INTO check_results (audit_id, check_id, version, outcome, reason)
                     VALUES (?1, ?2, ?3, ?4, ?5)",
                    params![audit, &c.id, c.version, &text(&c.outcome), &c.reason],
                )?;
                for f in &c.findings {
                    let status = if f.accusation {
                        FindingStatus::Withheld
                    } else {
                        FindingStatus::Published
                    };
                    sql.execute(
                        "INSERT INTO findings (audit_id, check_id, check_version, summary,
                            accusation, evidence_json, flows_json, status)
                         VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
                        params![
                            audit,
                            &f.check,
                            f.version,
                            &f.summary,
                            f.accusation,
                            &serde_json::to_string(&f.evidence)?,
                            &serde_json::to_string(&f.flows)?,
                            &text(&status),
                        ],
                    )?;
                }
            }
            Ok(audit)
        })
    }

    /// Every audit, most recently recorded first.
    pub fn audits(&self) -> Result<Vec<AuditRow>, Error> {
        self.tx(false, |sql| {
            audits_where(sql, "ORDER BY id DESC", params![])
        })
    }

    /// One audit.
    pub fn audit(&self, id: i64) -> Result<Option<AuditRow>, Error> {
        self.tx(false, |sql| {
            Ok(audits_where(sql, "WHERE id = ?1", params![id])?.pop())
        })
    }

    /// The audit's full report, as recorded.
    pub fn report(&self, id: i64) -> Result<Option<AuditReport>, Error> {
        let json = self.tx(false, |sql| {
            sql.row("SELECT report_json FROM audits WHERE id = ?1", params![id])?
                .map(|r| r.text(0))
                .transpose()
        })?;
        Ok(json.map(|j| serde_json::from_str(&j)).transpose()?)
    }

    /// The audits of `target` at exactly `version` (`None`: those whose version is
    /// unknown), most recently recorded first.
    pub fn history(&self, target: &str, version: Option<&str>) -> Result<Vec<AuditRow>, Error> {
        self.tx(false, |sql| {
            audits_where(
                sql,
                "WHERE target = ?1 AND target_version IS NOT DISTINCT FROM ?2 ORDER BY id DESC",
                params![target, version],
            )
        })
    }

    /// How the tool definitions and instructions of the audit `id` (its `manifest`) changed
    /// since the previous audit of the same target at the same exact version: that audit's
    /// id and the changes, when there is one whose bundle holds the hashes to compare.
    pub fn changes_since_previous(
        &self,
        id: i64,
        manifest: &Manifest,
    ) -> Option<(i64, Vec<String>)> {
        let target = target_of(manifest);
        let version = manifest.target.package.as_ref().map(|p| p.version.as_str());
        let prev = self
            .history(&target, version)
            .ok()?
            .into_iter()
            .find(|a| a.id < id)?;
        let before = bundle_session(&prev.evidence_dir)?;
        if manifest.session.tool_hashes.is_empty() {
            return None;
        }
        Some((prev.id, tool_changes(&before, &manifest.session)))
    }

    /// One finding.
    pub fn finding(&self, id: i64) -> Result<Option<FindingRow>, Error> {
        self.tx(false, |sql| {
            Ok(findings_where(sql, "WHERE id = ?1", params![id])?.pop())
        })
    }

    /// The findings awaiting review, oldest first.
    pub fn withheld(&self) -> Result<Vec<FindingRow>, Error> {
        self.tx(false, |sql| {
            findings_where(sql, "WHERE status = 'withheld' ORDER BY id", params![])
        })
    }

    /// Reviews a withheld finding: `accept` publishes it, `reject` marks it rejected.
    /// A finding is reviewed once (two reviewers at once: the second waits, then is refused).
    pub fn review(
        &mut self,
        finding_id: i64,
        decision: Decision,
        reviewer: &str,
        note_or_reason: &str,
    ) -> Result<(), Error> {
        self.tx(true, |sql| {
            let lock = sql.for_update();
            let status: FindingStatus = sql
                .row(
                    &format!("SELECT status FROM findings WHERE id = ?1{lock}"),
                    params![finding_id],
                )?
                .ok_or(Error::NoSuchFinding(finding_id))?
                .name(0)?;
            if let Some(earlier) = reviews(sql, finding_id)?.into_iter().next() {
                return Err(Error::AlreadyReviewed {
                    finding: finding_id,
                    decision: earlier.decision,
                    reviewer: earlier.reviewer,
                    at: earlier.at,
                });
            }
            if status != FindingStatus::Withheld {
                return Err(Error::NotWithheld {
                    finding: finding_id,
                    status,
                });
            }
            let new_status = match decision {
                Decision::Accept => FindingStatus::Published,
                Decision::Reject => FindingStatus::Rejected,
            };
            let now = sql.now();
            sql.execute(
                &format!(
                    "INSERT INTO reviews (finding_id, decision, reviewer, note_or_reason, at)
                     VALUES (?1, ?2, ?3, ?4, {now})"
                ),
                params![finding_id, &text(&decision), reviewer, note_or_reason],
            )?;
            sql.execute(
                "UPDATE findings SET status = ?2 WHERE id = ?1",
                params![finding_id, &text(&new_status)],
            )?;
            Ok(())
        })
    }

    /// The reviews of a finding, oldest first.
    pub fn reviews_of(&self, finding_id: i64) -> Result<Vec<ReviewRow>, Error> {
        self.tx(false, |sql| reviews(sql, finding_id))
    }
}

/// The audits `clause` selects, each with its check results and findings.
fn audits_where(
    sql: &mut Sql<'_, '_>,
    clause: &str,
    params: &[sql::Param<'_>],
) -> Result<Vec<AuditRow>, Error> {
    let rows = sql.rows(
        &format!(
            "SELECT id, run_id, target, target_version, started_at, finished_at,
                glassbox_version, verdict, inconclusive_reason, evidence_dir, evidence_sha256
             FROM audits {clause}"
        ),
        params,
    )?;
    let mut audits = Vec::with_capacity(rows.len());
    for r in rows {
        let id = r.int(0)?;
        let checks = sql
            .rows(
                "SELECT check_id, version, outcome, reason FROM check_results
                 WHERE audit_id = ?1 ORDER BY rowid",
                params![id],
            )?
            .iter()
            .map(|c| {
                Ok(CheckRow {
                    check_id: c.text(0)?,
                    version: c.u32(1)?,
                    outcome: c.name(2)?,
                    reason: c.opt_text(3)?,
                })
            })
            .collect::<Result<_, Error>>()?;
        audits.push(AuditRow {
            id,
            run_id: r.text(1)?,
            target: r.text(2)?,
            target_version: r.opt_text(3)?,
            started_at: r.text(4)?,
            finished_at: r.opt_text(5)?,
            glassbox_version: r.text(6)?,
            verdict: r.name(7)?,
            inconclusive_reason: r.opt_text(8)?,
            evidence_dir: PathBuf::from(r.text(9)?),
            evidence_sha256: r.text(10)?,
            checks,
            findings: findings_where(sql, "WHERE audit_id = ?1 ORDER BY id", params![id])?,
        });
    }
    Ok(audits)
}

fn findings_where(
    sql: &mut Sql<'_, '_>,
    clause: &str,
    params: &[sql::Param<'_>],
) -> Result<Vec<FindingRow>, Error> {
    sql.rows(
        &format!(
            "SELECT id, audit_id, check_id, check_version, summary, accusation, evidence_json,
                flows_json, status
             FROM findings {clause}"
        ),
        params,
    )?
    .iter()
    .map(finding_row)
    .collect()
}

fn finding_row(r: &Row) -> Result<FindingRow, Error> {
    Ok(FindingRow {
        id: r.int(0)?,
        audit_id: r.int(1)?,
        check_id: r.text(2)?,
        check_version: r.u32(3)?,
        summary: r.text(4)?,
        accusation: r.bool(5)?,
        evidence: r.json(6)?,
        flows: r.json(7)?,
        status: r.name(8)?,
    })
}

fn reviews(sql: &mut Sql<'_, '_>, finding_id: i64) -> Result<Vec<ReviewRow>, Error> {
    sql.rows(
        "SELECT id, finding_id, decision, reviewer, note_or_reason, at FROM reviews
         WHERE finding_id = ?1 ORDER BY id",
        params![finding_id],
    )?
    .iter()
    .map(|r| {
        Ok(ReviewRow {
            id: r.int(0)?,
            finding_id: r.int(1)?,
            decision: r.name(2)?,
            reviewer: r.text(3)?,
            text: r.text(4)?,
            at: r.text(5)?,
        })
    })
    .collect()
}

/// A unit enum's name as its JSON wire format spells it (`not-observed`, `withheld`, ...),
/// so the store says what `report.json` says.
fn text<T: Serialize>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(s)) => s,
        other => panic!("a unit enum serializes as a string, not {other:?}"),
    }
}

/// The content hash of an evidence bundle, as lowercase hex: SHA-256 over every regular file
/// under `dir`, in byte order of its relative path (`/`-separated), of the path, a NUL byte,
/// and the SHA-256 of the file's contents. Empty directories do not count; anything but
/// files and directories (a symlink, a socket) is an error. Files are streamed.
pub fn bundle_hash(dir: &Path) -> Result<String, Error> {
    let mut files = Vec::new();
    walk(dir, b"", &mut files)?;
    files.sort();
    let mut bundle = Sha256::new();
    for name in files {
        let path = dir.join(OsStr::from_bytes(&name));
        let io_err = |source| Error::Io {
            path: path.clone(),
            source,
        };
        let mut file = fs::File::open(&path).map_err(io_err)?;
        let mut contents = Sha256::new();
        io::copy(&mut file, &mut contents).map_err(io_err)?;
        bundle.update(&name);
        bundle.update([0]);
        bundle.update(contents.finalize());
    }
    Ok(format!("{:x}", bundle.finalize()))
}

/// Collects the relative paths of the files under `root/rel`.
fn walk(root: &Path, rel: &[u8], files: &mut Vec<Vec<u8>>) -> Result<(), Error> {
    let dir = root.join(OsStr::from_bytes(rel));
    let io_err = |source| Error::Io {
        path: dir.clone(),
        source,
    };
    for entry in fs::read_dir(&dir).map_err(io_err)? {
        let entry = entry.map_err(io_err)?;
        let mut name = rel.to_vec();
        if !name.is_empty() {
            name.push(b'/');
        }
        name.extend_from_slice(entry.file_name().as_bytes());
        let kind = entry.file_type().map_err(io_err)?;
        if kind.is_dir() {
            walk(root, &name, files)?;
        } else if kind.is_file() {
            files.push(name);
        } else {
            return Err(Error::NotAFile(entry.path()));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn tool_changes_name_what_was_added_changed_removed_and_the_instructions() {
        let session =
            |tools: &[(&str, &str)], instructions: Option<&str>| glassbox_model::SessionSummary {
                tool_hashes: tools
                    .iter()
                    .map(|(n, h)| (n.to_string(), h.to_string()))
                    .collect(),
                instructions_hash: instructions.map(str::to_string),
                ..Default::default()
            };
        let before = session(&[("a", "1"), ("b", "2"), ("gone", "3")], Some("i"));
        let after = session(&[("a", "1"), ("b", "9"), ("new", "4")], Some("j"));
        let mut got = tool_changes(&before, &after);
        got.sort();
        assert_eq!(
            got,
            [
                "instructions changed",
                "tool b changed",
                "tool gone removed",
                "tool new added"
            ]
        );
        assert!(tool_changes(&before, &before).is_empty());
    }
}
