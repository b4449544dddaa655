//! The store of glassbox: audits, their evidence bundles, verdicts and reviews, in SQLite.
//!
//! It records what an audit produced (an [`AuditReport`] and its bundle's [`Manifest`]) and
//! answers questions about it; it knows nothing of how checks work. Accusing findings are
//! stored `withheld` until a person reviews them ([`Store::review`]).
#![deny(missing_docs)]

use glassbox_model::{AuditReport, Manifest, Outcome, Verdict};
use rusqlite::types::Type;
use rusqlite::{params, Connection, OptionalExtension, Params, Row, TransactionBehavior};
use serde::de::DeserializeOwned;
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::path::{Path, PathBuf};
use std::time::Duration;
use std::{fmt, fs, io};

/// The schema, one migration a version: `MIGRATIONS[n]` takes a database from
/// `PRAGMA user_version` `n` to `n + 1`. Append only; never edit a released migration.
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

/// How long a writer waits for another process's write lock before giving up.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// What went wrong.
#[derive(Debug, thiserror::Error)]
pub enum Error {
    /// SQLite failed.
    #[error("store: {0}")]
    Sqlite(#[from] rusqlite::Error),
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
    /// The database was made by a newer glassbox.
    #[error(
        "{}: schema version {found} is newer than this glassbox knows ({known}): \
         upgrade glassbox (the store is never downgraded)",
        path.display()
    )]
    TooNew {
        /// The database.
        path: PathBuf,
        /// Its `user_version`.
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

/// What an audit is filed under: `npm:NAME` / `pypi:NAME` for a package (its exact version
/// goes in `target_version`), else the command line.
pub fn target_of(manifest: &Manifest) -> String {
    match &manifest.target.package {
        Some(p) => format!("{}:{}", p.registry, p.name),
        None => manifest.target.command.join(" "),
    }
}

/// An open store. Several processes may open the same file: SQLite serialises writers.
#[derive(Debug)]
pub struct Store {
    conn: Connection,
}

impl Store {
    /// Opens (creating it and its parent directories if needed) the store at `path` and
    /// brings its schema up to date. A store made by a newer glassbox is refused.
    pub fn open(path: &Path) -> Result<Store, Error> {
        if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
            fs::create_dir_all(parent).map_err(|source| Error::Io {
                path: parent.into(),
                source,
            })?;
        }
        let mut conn = Connection::open(path)?;
        conn.busy_timeout(BUSY_TIMEOUT)?;
        // WAL: readers never block the writer; FULL: a commit is on disk when it returns.
        conn.pragma_update_and_check(None, "journal_mode", "WAL", |r| r.get::<_, String>(0))?;
        conn.pragma_update(None, "synchronous", "FULL")?;
        conn.pragma_update(None, "foreign_keys", true)?;
        migrate(&mut conn, path)?;
        Ok(Store { conn })
    }

    /// Where the store is by default: `$GLASSBOX_STORE` if set, else
    /// `$GLASSBOX_STATE_DIR/store.sqlite` if set, else `~/.local/state/glassbox/store.sqlite`.
    /// Empty variables count as unset.
    pub fn default_path() -> Result<PathBuf, Error> {
        default_path_from(|name| std::env::var_os(name))
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
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let existing = tx
            .query_row(
                "SELECT id FROM audits WHERE run_id = ?1",
                [&report.run_id],
                |r| r.get(0),
            )
            .optional()?;
        if let Some(audit) = existing {
            return Err(Error::Duplicate {
                run_id: report.run_id.clone(),
                audit,
            });
        }
        tx.execute(
            "INSERT INTO audits (run_id, target, target_version, started_at, finished_at,
                glassbox_version, verdict, inconclusive_reason, evidence_dir, evidence_sha256,
                report_json)
             VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8, ?9, ?10, ?11)",
            params![
                report.run_id,
                target_of(manifest),
                target_version.or(manifest.target.package.as_ref().map(|p| p.version.as_str())),
                manifest.started_at,
                manifest.finished_at,
                manifest.glassbox_version,
                text(&report.verdict),
                report.inconclusive_reason,
                dir,
                hash,
                report_json,
            ],
        )?;
        let audit = tx.last_insert_rowid();
        {
            let mut check = tx.prepare_cached(
                "INSERT INTO check_results (audit_id, check_id, version, outcome, reason)
                 VALUES (?1, ?2, ?3, ?4, ?5)",
            )?;
            let mut finding = tx.prepare_cached(
                "INSERT INTO findings (audit_id, check_id, check_version, summary, accusation,
                    evidence_json, flows_json, status)
                 VALUES (?1, ?2, ?3, ?4, ?5, ?6, ?7, ?8)",
            )?;
            for c in &report.checks {
                check.execute(params![audit, c.id, c.version, text(&c.outcome), c.reason])?;
                for f in &c.findings {
                    let status = if f.accusation {
                        FindingStatus::Withheld
                    } else {
                        FindingStatus::Published
                    };
                    finding.execute(params![
                        audit,
                        f.check,
                        f.version,
                        f.summary,
                        f.accusation,
                        serde_json::to_string(&f.evidence)?,
                        serde_json::to_string(&f.flows)?,
                        text(&status),
                    ])?;
                }
            }
        }
        tx.commit()?;
        Ok(audit)
    }

    /// Every audit, most recently recorded first.
    pub fn audits(&self) -> Result<Vec<AuditRow>, Error> {
        self.audits_where("ORDER BY id DESC", [])
    }

    /// One audit.
    pub fn audit(&self, id: i64) -> Result<Option<AuditRow>, Error> {
        Ok(self.audits_where("WHERE id = ?1", [id])?.pop())
    }

    /// The audit's full report, as recorded.
    pub fn report(&self, id: i64) -> Result<Option<AuditReport>, Error> {
        let json: Option<String> = self
            .conn
            .query_row("SELECT report_json FROM audits WHERE id = ?1", [id], |r| {
                r.get(0)
            })
            .optional()?;
        Ok(json.map(|j| serde_json::from_str(&j)).transpose()?)
    }

    /// The audits of `target` at exactly `version` (`None`: those whose version is
    /// unknown), most recently recorded first.
    pub fn history(&self, target: &str, version: Option<&str>) -> Result<Vec<AuditRow>, Error> {
        self.audits_where(
            "WHERE target = ?1 AND target_version IS ?2 ORDER BY id DESC",
            params![target, version],
        )
    }

    /// One finding.
    pub fn finding(&self, id: i64) -> Result<Option<FindingRow>, Error> {
        Ok(findings_where(&self.conn, "WHERE id = ?1", [id])?.pop())
    }

    /// The findings awaiting review, oldest first.
    pub fn withheld(&self) -> Result<Vec<FindingRow>, Error> {
        findings_where(&self.conn, "WHERE status = 'withheld' ORDER BY id", [])
    }

    /// Reviews a withheld finding: `accept` publishes it, `reject` marks it rejected.
    /// A finding is reviewed once.
    pub fn review(
        &mut self,
        finding_id: i64,
        decision: Decision,
        reviewer: &str,
        note_or_reason: &str,
    ) -> Result<(), Error> {
        let tx = self
            .conn
            .transaction_with_behavior(TransactionBehavior::Immediate)?;
        let status = tx
            .query_row(
                "SELECT status FROM findings WHERE id = ?1",
                [finding_id],
                |r| column::<FindingStatus>(r, 0),
            )
            .optional()?
            .ok_or(Error::NoSuchFinding(finding_id))?;
        if let Some(earlier) = reviews(&tx, finding_id)?.into_iter().next() {
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
        tx.execute(
            "INSERT INTO reviews (finding_id, decision, reviewer, note_or_reason, at)
             VALUES (?1, ?2, ?3, ?4, strftime('%Y-%m-%dT%H:%M:%fZ', 'now'))",
            params![finding_id, text(&decision), reviewer, note_or_reason],
        )?;
        tx.execute(
            "UPDATE findings SET status = ?2 WHERE id = ?1",
            params![finding_id, text(&new_status)],
        )?;
        tx.commit()?;
        Ok(())
    }

    /// The reviews of a finding, oldest first.
    pub fn reviews_of(&self, finding_id: i64) -> Result<Vec<ReviewRow>, Error> {
        reviews(&self.conn, finding_id)
    }

    /// The audits `clause` selects, each with its check results and findings.
    fn audits_where(&self, clause: &str, params: impl Params) -> Result<Vec<AuditRow>, Error> {
        let sql = format!(
            "SELECT id, run_id, target, target_version, started_at, finished_at,
                glassbox_version, verdict, inconclusive_reason, evidence_dir, evidence_sha256
             FROM audits {clause}"
        );
        let mut audits = self
            .conn
            .prepare_cached(&sql)?
            .query_map(params, |r| {
                Ok(AuditRow {
                    id: r.get(0)?,
                    run_id: r.get(1)?,
                    target: r.get(2)?,
                    target_version: r.get(3)?,
                    started_at: r.get(4)?,
                    finished_at: r.get(5)?,
                    glassbox_version: r.get(6)?,
                    verdict: column(r, 7)?,
                    inconclusive_reason: r.get(8)?,
                    evidence_dir: PathBuf::from(r.get::<_, String>(9)?),
                    evidence_sha256: r.get(10)?,
                    checks: Vec::new(),
                    findings: Vec::new(),
                })
            })?
            .collect::<Result<Vec<_>, _>>()?;
        let mut checks = self.conn.prepare_cached(
            "SELECT check_id, version, outcome, reason FROM check_results
             WHERE audit_id = ?1 ORDER BY rowid",
        )?;
        for a in &mut audits {
            a.checks = checks
                .query_map([a.id], |r| {
                    Ok(CheckRow {
                        check_id: r.get(0)?,
                        version: r.get(1)?,
                        outcome: column(r, 2)?,
                        reason: r.get(3)?,
                    })
                })?
                .collect::<Result<_, _>>()?;
            a.findings = findings_where(&self.conn, "WHERE audit_id = ?1 ORDER BY id", [a.id])?;
        }
        Ok(audits)
    }
}

/// Applies the migrations the database lacks, each in its own transaction. The version is
/// read inside the (write-locked) transaction, so concurrent openers migrate once.
fn migrate(conn: &mut Connection, path: &Path) -> Result<(), Error> {
    loop {
        let tx = conn.transaction_with_behavior(TransactionBehavior::Immediate)?;
        let found: i64 = tx.pragma_query_value(None, "user_version", |r| r.get(0))?;
        let version = match usize::try_from(found) {
            Ok(v) if v == MIGRATIONS.len() => return Ok(()),
            Ok(v) if v < MIGRATIONS.len() => v,
            _ => {
                return Err(Error::TooNew {
                    path: path.into(),
                    found,
                    known: MIGRATIONS.len(),
                })
            }
        };
        tx.execute_batch(MIGRATIONS[version])?;
        tx.pragma_update(None, "user_version", version as i64 + 1)?;
        tx.commit()?;
    }
}

fn default_path_from(var: impl Fn(&str) -> Option<OsString>) -> Result<PathBuf, Error> {
    let var = |name| var(name).filter(|v| !v.is_empty()).map(PathBuf::from);
    if let Some(store) = var("GLASSBOX_STORE") {
        Ok(store)
    } else if let Some(dir) = var("GLASSBOX_STATE_DIR") {
        Ok(dir.join("store.sqlite"))
    } else if let Some(home) = var("HOME") {
        Ok(home.join(".local/state/glassbox/store.sqlite"))
    } else {
        Err(Error::NoStorePath)
    }
}

fn findings_where(
    conn: &Connection,
    clause: &str,
    params: impl Params,
) -> Result<Vec<FindingRow>, Error> {
    let sql = format!(
        "SELECT id, audit_id, check_id, check_version, summary, accusation, evidence_json,
            flows_json, status
         FROM findings {clause}"
    );
    let rows = conn
        .prepare_cached(&sql)?
        .query_map(params, |r| {
            Ok(FindingRow {
                id: r.get(0)?,
                audit_id: r.get(1)?,
                check_id: r.get(2)?,
                check_version: r.get(3)?,
                summary: r.get(4)?,
                accusation: r.get(5)?,
                evidence: json(r, 6)?,
                flows: json(r, 7)?,
                status: column(r, 8)?,
            })
        })?
        .collect::<Result<_, _>>()?;
    Ok(rows)
}

fn reviews(conn: &Connection, finding_id: i64) -> Result<Vec<ReviewRow>, Error> {
    let rows = conn
        .prepare_cached(
            "SELECT id, finding_id, decision, reviewer, note_or_reason, at FROM reviews
             WHERE finding_id = ?1 ORDER BY id",
        )?
        .query_map([finding_id], |r| {
            Ok(ReviewRow {
                id: r.get(0)?,
                finding_id: r.get(1)?,
                decision: column(r, 2)?,
                reviewer: r.get(3)?,
                text: r.get(4)?,
                at: r.get(5)?,
            })
        })?
        .collect::<Result<_, _>>()?;
    Ok(rows)
}

/// A unit enum's name as its JSON wire format spells it (`not-observed`, `withheld`, ...),
/// so the store says what `report.json` says.
fn text<T: Serialize>(value: &T) -> String {
    match serde_json::to_value(value) {
        Ok(serde_json::Value::String(s)) => s,
        other => panic!("a unit enum serializes as a string, not {other:?}"),
    }
}

/// A unit enum read back from its [`text`].
fn column<T: DeserializeOwned>(row: &Row<'_>, idx: usize) -> rusqlite::Result<T> {
    let s: String = row.get(idx)?;
    serde_json::from_value(serde_json::Value::String(s))
        .map_err(|e| rusqlite::Error::FromSqlConversionFailure(idx, Type::Text, Box::new(e)))
}

/// A JSON column.
fn json<T: DeserializeOwned>(row: &Row<'_>, idx: usize) -> rusqlite::Result<T> {
    let s: String = row.get(idx)?;
    serde_json::from_str(&s)
        .map_err(|e| rusqlite::Error::FromSqlConversionFailure(idx, Type::Text, Box::new(e)))
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
    fn default_path_order() {
        fn env<'a>(vars: &'a [(&str, &str)]) -> impl Fn(&str) -> Option<OsString> + 'a {
            move |name| vars.iter().find(|(k, _)| *k == name).map(|(_, v)| v.into())
        }
        let all = [
            ("GLASSBOX_STORE", "/s/db"),
            ("GLASSBOX_STATE_DIR", "/state"),
            ("HOME", "/home/u"),
        ];
        assert_eq!(default_path_from(env(&all)).unwrap(), Path::new("/s/db"));
        assert_eq!(
            default_path_from(env(&all[1..])).unwrap(),
            Path::new("/state/store.sqlite")
        );
        let empty = [("GLASSBOX_STORE", ""), ("HOME", "/home/u")];
        assert_eq!(
            default_path_from(env(&empty)).unwrap(),
            Path::new("/home/u/.local/state/glassbox/store.sqlite")
        );
        assert!(matches!(
            default_path_from(env(&[])),
            Err(Error::NoStorePath)
        ));
    }
}
