//! What the store's logic needs of a database, for SQLite and PostgreSQL alike: statements
//! with `?N` parameters (rewritten to `$N` for PostgreSQL), rows of integers and texts, the
//! few dialect differences, and transactions.

use crate::{Error, StoreLocation};
use rusqlite::types::{ToSqlOutput, ValueRef};
use serde::de::DeserializeOwned;
use std::borrow::Cow;
use std::time::Duration;

/// How long a SQLite writer waits for another process's write lock before giving up.
const BUSY_TIMEOUT: Duration = Duration::from_secs(10);

/// How long connecting to PostgreSQL may take when the URL sets no `connect_timeout`.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(10);

/// The key of the advisory lock that serialises migrations of one PostgreSQL database
/// (any constant: "glassbox" in ASCII).
const MIGRATION_LOCK: i64 = 0x676c_6173_7362_6f78;

/// An open database.
pub(crate) enum Db {
    Sqlite(rusqlite::Connection),
    Postgres(Box<postgres::Client>),
}

impl Db {
    /// Opens `location` (creating a SQLite file and its parent directories if needed).
    pub(crate) fn open(location: &StoreLocation) -> Result<Db, Error> {
        match location {
            StoreLocation::Sqlite(path) => {
                if let Some(parent) = path.parent().filter(|p| !p.as_os_str().is_empty()) {
                    std::fs::create_dir_all(parent).map_err(|source| Error::Io {
                        path: parent.into(),
                        source,
                    })?;
                }
                let conn = rusqlite::Connection::open(path)?;
                conn.busy_timeout(BUSY_TIMEOUT)?;
                // WAL: readers never block the writer; FULL: a commit is on disk when it
                // returns. Several processes opening a new store at once all switch it to WAL,
                // which takes the file's exclusive lock from a shared one: SQLite answers
                // "database is locked" at once, without its busy handler (waiting could
                // deadlock two such upgrades), so the switch is tried again here, within the
                // same bound as any other lock.
                let deadline = std::time::Instant::now() + BUSY_TIMEOUT;
                loop {
                    match conn.pragma_update_and_check(None, "journal_mode", "WAL", |r| {
                        r.get::<_, String>(0)
                    }) {
                        Err(rusqlite::Error::SqliteFailure(e, _))
                            if e.code == rusqlite::ErrorCode::DatabaseBusy
                                && std::time::Instant::now() < deadline =>
                        {
                            std::thread::sleep(Duration::from_millis(5));
                        }
                        r => {
                            r?;
                            break;
                        }
                    }
                }
                conn.pragma_update(None, "synchronous", "FULL")?;
                conn.pragma_update(None, "foreign_keys", true)?;
                Ok(Db::Sqlite(conn))
            }
            StoreLocation::Postgres(url) => Ok(Db::Postgres(Box::new(connect(url)?))),
        }
    }

    /// Runs `f` in one transaction, committed when it returns `Ok` and rolled back otherwise.
    /// A `write` transaction takes SQLite's write lock at once (`BEGIN IMMEDIATE`), so that
    /// what it reads stays true until it commits; PostgreSQL statements lock what they need.
    pub(crate) fn transaction<T>(
        &mut self,
        write: bool,
        f: impl FnOnce(&mut Sql<'_, '_>) -> Result<T, Error>,
    ) -> Result<T, Error> {
        match self {
            Db::Sqlite(conn) => {
                let behavior = if write {
                    rusqlite::TransactionBehavior::Immediate
                } else {
                    rusqlite::TransactionBehavior::Deferred
                };
                let tx = conn.transaction_with_behavior(behavior)?;
                let out = f(&mut Sql::Sqlite(&tx))?;
                tx.commit()?;
                Ok(out)
            }
            Db::Postgres(client) => {
                let mut tx = client.transaction()?;
                let out = f(&mut Sql::Postgres(&mut tx))?;
                tx.commit()?;
                Ok(out)
            }
        }
    }
}

/// Connects to the PostgreSQL database of `url`, without TLS.
fn connect(url: &str) -> Result<postgres::Client, Error> {
    // This build has no TLS: refuse what would need it, saying so, rather than let the
    // connection fail later or (`sslmode=prefer`, the default) quietly go without it.
    let query = url.split_once('?').map_or("", |(_, q)| q);
    for param in query.split(['&', '#']) {
        if let Some((key, value)) = param.split_once('=') {
            if key == "sslmode" && !matches!(value, "disable" | "prefer") {
                return Err(Error::Tls(value.to_string()));
            }
        }
    }
    let mut config: postgres::Config = url.parse().map_err(Error::Postgres)?;
    if config.get_connect_timeout().is_none() {
        config.connect_timeout(CONNECT_TIMEOUT);
    }
    if config.get_application_name().is_none() {
        config.application_name("glassbox");
    }
    Ok(config.connect(postgres::NoTls)?)
}

/// One transaction's statements.
pub(crate) enum Sql<'t, 'c> {
    Sqlite(&'t rusqlite::Transaction<'c>),
    Postgres(&'t mut postgres::Transaction<'c>),
}

/// A statement parameter.
#[derive(Clone, Copy, Debug)]
pub(crate) enum Param<'a> {
    Int(i64),
    Text(Option<&'a str>),
}

impl From<i64> for Param<'_> {
    fn from(v: i64) -> Self {
        Param::Int(v)
    }
}

impl From<u32> for Param<'_> {
    fn from(v: u32) -> Self {
        Param::Int(v.into())
    }
}

impl From<bool> for Param<'_> {
    fn from(v: bool) -> Self {
        Param::Int(v.into())
    }
}

impl<'a> From<&'a str> for Param<'a> {
    fn from(v: &'a str) -> Self {
        Param::Text(Some(v))
    }
}

impl<'a> From<&'a String> for Param<'a> {
    fn from(v: &'a String) -> Self {
        Param::Text(Some(v))
    }
}

impl<'a> From<Option<&'a str>> for Param<'a> {
    fn from(v: Option<&'a str>) -> Self {
        Param::Text(v)
    }
}

impl<'a> From<&'a Option<String>> for Param<'a> {
    fn from(v: &'a Option<String>) -> Self {
        Param::Text(v.as_deref())
    }
}

impl rusqlite::ToSql for Param<'_> {
    fn to_sql(&self) -> rusqlite::Result<ToSqlOutput<'_>> {
        Ok(match *self {
            Param::Int(v) => ToSqlOutput::from(v),
            Param::Text(Some(s)) => ToSqlOutput::from(s),
            Param::Text(None) => ToSqlOutput::from(rusqlite::types::Null),
        })
    }
}

/// `[Param, ...]` from values of the types [`Param`] converts.
macro_rules! params {
    ($($p:expr),* $(,)?) => {
        &[$($crate::sql::Param::from($p)),*][..]
    };
}
pub(crate) use params;

/// One column's value.
#[derive(Clone, Debug, PartialEq)]
pub(crate) enum Cell {
    Null,
    Int(i64),
    Text(String),
}

/// One result row.
#[derive(Debug)]
pub(crate) struct Row(Vec<Cell>);

impl Row {
    fn cell(&self, i: usize) -> Result<&Cell, Error> {
        self.0.get(i).ok_or_else(|| column(i, "no such column"))
    }

    pub(crate) fn int(&self, i: usize) -> Result<i64, Error> {
        match self.cell(i)? {
            Cell::Int(v) => Ok(*v),
            other => Err(column(
                i,
                &format!("an integer was expected, not {other:?}"),
            )),
        }
    }

    pub(crate) fn u32(&self, i: usize) -> Result<u32, Error> {
        let v = self.int(i)?;
        u32::try_from(v).map_err(|_| column(i, &format!("{v} is out of range")))
    }

    pub(crate) fn bool(&self, i: usize) -> Result<bool, Error> {
        Ok(self.int(i)? != 0)
    }

    pub(crate) fn opt_text(&self, i: usize) -> Result<Option<String>, Error> {
        match self.cell(i)? {
            Cell::Null => Ok(None),
            Cell::Text(s) => Ok(Some(s.clone())),
            other => Err(column(i, &format!("a text was expected, not {other:?}"))),
        }
    }

    pub(crate) fn text(&self, i: usize) -> Result<String, Error> {
        self.opt_text(i)?
            .ok_or_else(|| column(i, "a text was expected, not NULL"))
    }

    /// A unit enum, from the text its JSON form spells (`not-observed`, `withheld`...).
    pub(crate) fn name<T: DeserializeOwned>(&self, i: usize) -> Result<T, Error> {
        let s = self.text(i)?;
        serde_json::from_value(serde_json::Value::String(s)).map_err(|e| column(i, &e.to_string()))
    }

    /// A JSON column.
    pub(crate) fn json<T: DeserializeOwned>(&self, i: usize) -> Result<T, Error> {
        serde_json::from_str(&self.text(i)?).map_err(|e| column(i, &e.to_string()))
    }
}

fn column(i: usize, why: &str) -> Error {
    Error::Column {
        column: i,
        why: why.to_string(),
    }
}

impl Sql<'_, '_> {
    /// The rows `sql` (with `?N` parameters) returns.
    pub(crate) fn rows(&mut self, sql: &str, params: &[Param<'_>]) -> Result<Vec<Row>, Error> {
        match self {
            Sql::Sqlite(tx) => {
                let mut stmt = tx.prepare_cached(sql)?;
                let width = stmt.column_count();
                let mut rows = stmt.query(rusqlite::params_from_iter(params))?;
                let mut out = Vec::new();
                while let Some(r) = rows.next()? {
                    let mut cells = Vec::with_capacity(width);
                    for i in 0..width {
                        cells.push(match r.get_ref(i)? {
                            ValueRef::Null => Cell::Null,
                            ValueRef::Integer(v) => Cell::Int(v),
                            ValueRef::Text(t) => Cell::Text(
                                std::str::from_utf8(t)
                                    .map_err(|e| column(i, &e.to_string()))?
                                    .to_string(),
                            ),
                            other => {
                                return Err(column(
                                    i,
                                    &format!("unexpected {:?} value", other.data_type()),
                                ))
                            }
                        });
                    }
                    out.push(Row(cells));
                }
                Ok(out)
            }
            Sql::Postgres(tx) => {
                let args = postgres_args(params);
                let rows = tx.query(&*postgres_sql(sql), &args)?;
                rows.iter().map(postgres_row).collect()
            }
        }
    }

    /// The first row, if any.
    pub(crate) fn row(&mut self, sql: &str, params: &[Param<'_>]) -> Result<Option<Row>, Error> {
        Ok(self.rows(sql, params)?.into_iter().next())
    }

    /// Runs `sql`; the number of rows it changed.
    pub(crate) fn execute(&mut self, sql: &str, params: &[Param<'_>]) -> Result<u64, Error> {
        match self {
            Sql::Sqlite(tx) => {
                let n = tx
                    .prepare_cached(sql)?
                    .execute(rusqlite::params_from_iter(params))?;
                Ok(n as u64)
            }
            Sql::Postgres(tx) => {
                let args = postgres_args(params);
                Ok(tx.execute(&*postgres_sql(sql), &args)?)
            }
        }
    }

    /// The current time, as SQL: RFC 3339, UTC, in milliseconds (`2025-01-02T03:04:05.678Z`).
    pub(crate) fn now(&self) -> &'static str {
        match self {
            Sql::Sqlite(_) => "strftime('%Y-%m-%dT%H:%M:%fZ', 'now')",
            Sql::Postgres(_) => {
                r#"to_char(clock_timestamp() AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.MS"Z"')"#
            }
        }
    }

    /// What ends a `SELECT` of rows the transaction goes on to change: PostgreSQL locks them
    /// (a concurrent writer waits); a SQLite write transaction holds the whole file already.
    pub(crate) fn for_update(&self) -> &'static str {
        match self {
            Sql::Sqlite(_) => "",
            Sql::Postgres(_) => " FOR UPDATE",
        }
    }

    /// The schema version, `0` for an empty database, without waiting for anything.
    pub(crate) fn current_version(&mut self) -> Result<i64, Error> {
        match self {
            Sql::Sqlite(tx) => Ok(tx.pragma_query_value(None, "user_version", |r| r.get(0))?),
            Sql::Postgres(tx) => {
                let row = tx.query_one("SELECT to_regclass('glassbox_schema') IS NOT NULL", &[])?;
                if !row.get::<_, bool>(0) {
                    return Ok(0);
                }
                let row = tx.query_one("SELECT max(version) FROM glassbox_schema", &[])?;
                Ok(row.get::<_, Option<i64>>(0).unwrap_or(0))
            }
        }
    }

    /// The schema version, `0` for an empty database. On PostgreSQL, first waits for (and
    /// takes, until the transaction ends) the database's migration lock.
    pub(crate) fn schema_version(&mut self) -> Result<i64, Error> {
        match self {
            Sql::Sqlite(tx) => Ok(tx.pragma_query_value(None, "user_version", |r| r.get(0))?),
            Sql::Postgres(tx) => {
                tx.execute("SELECT pg_advisory_xact_lock($1)", &[&MIGRATION_LOCK])?;
                tx.batch_execute(
                    "CREATE TABLE IF NOT EXISTS glassbox_schema (version BIGINT NOT NULL)",
                )?;
                let row = tx.query_opt("SELECT max(version) FROM glassbox_schema", &[])?;
                Ok(row.and_then(|r| r.get::<_, Option<i64>>(0)).unwrap_or(0))
            }
        }
    }

    /// Records the schema version.
    pub(crate) fn set_schema_version(&mut self, version: i64) -> Result<(), Error> {
        match self {
            Sql::Sqlite(tx) => Ok(tx.pragma_update(None, "user_version", version)?),
            Sql::Postgres(tx) => {
                tx.execute("DELETE FROM glassbox_schema", &[])?;
                tx.execute(
                    "INSERT INTO glassbox_schema (version) VALUES ($1)",
                    &[&version],
                )?;
                Ok(())
            }
        }
    }

    /// Runs a migration (several statements), as [`ddl`] has it for this database.
    pub(crate) fn migrate(&mut self, migration: &str) -> Result<(), Error> {
        match self {
            Sql::Sqlite(tx) => Ok(tx.execute_batch(migration)?),
            Sql::Postgres(tx) => Ok(tx.batch_execute(&postgres_ddl(migration))?),
        }
    }
}

/// A statement with `?N` parameters as PostgreSQL spells them: `$N`. (The store's
/// statements have no `?` anywhere else.)
fn postgres_sql(sql: &str) -> Cow<'_, str> {
    if sql.contains('?') {
        Cow::Owned(sql.replace('?', "$"))
    } else {
        Cow::Borrowed(sql)
    }
}

/// A migration written for SQLite, for PostgreSQL: 64-bit integers everywhere (SQLite's
/// `INTEGER` is 64-bit, PostgreSQL's 32), ids generated by the database (what SQLite's
/// `INTEGER PRIMARY KEY` is), no `STRICT` (PostgreSQL is strict), and `check_results` gets
/// the insertion order SQLite's implicit `rowid` gives it, as an explicit `rowid` column.
pub(crate) fn postgres_ddl(sql: &str) -> String {
    sql.replace(
        "INTEGER PRIMARY KEY",
        "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY",
    )
    .replace(
        "CREATE TABLE check_results (",
        "CREATE TABLE check_results (\n        rowid BIGINT GENERATED ALWAYS AS IDENTITY,",
    )
    .replace("INTEGER", "BIGINT")
    .replace(") STRICT", ")")
}

fn postgres_args<'a>(params: &'a [Param<'a>]) -> Vec<&'a (dyn postgres::types::ToSql + Sync)> {
    params
        .iter()
        .map(|p| match p {
            Param::Int(v) => v as &(dyn postgres::types::ToSql + Sync),
            Param::Text(s) => s as &(dyn postgres::types::ToSql + Sync),
        })
        .collect()
}

fn postgres_row(r: &postgres::Row) -> Result<Row, Error> {
    use postgres::types::Type;
    let mut cells = Vec::with_capacity(r.len());
    for (i, col) in r.columns().iter().enumerate() {
        let t = col.type_();
        let cell = if *t == Type::INT8 {
            r.try_get::<_, Option<i64>>(i)?.map(Cell::Int)
        } else if *t == Type::INT4 {
            r.try_get::<_, Option<i32>>(i)?.map(|v| Cell::Int(v.into()))
        } else if *t == Type::INT2 {
            r.try_get::<_, Option<i16>>(i)?.map(|v| Cell::Int(v.into()))
        } else if *t == Type::BOOL {
            r.try_get::<_, Option<bool>>(i)?
                .map(|v| Cell::Int(v.into()))
        } else if [Type::TEXT, Type::VARCHAR, Type::BPCHAR, Type::NAME].contains(t) {
            r.try_get::<_, Option<String>>(i)?.map(Cell::Text)
        } else {
            return Err(column(i, &format!("unexpected type {t}")));
        };
        cells.push(cell.unwrap_or(Cell::Null));
    }
    Ok(Row(cells))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_migration_has_a_postgres_form() {
        for m in crate::MIGRATIONS {
            let pg = postgres_ddl(m);
            assert!(!pg.contains("STRICT"), "{pg}");
            assert!(!pg.contains("INTEGER"), "{pg}");
            assert!(!pg.contains('?'), "{pg}");
        }
        let v1 = postgres_ddl(crate::MIGRATIONS[0]);
        assert!(v1.contains("id BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY,\n        run_id"));
        assert!(v1.contains("rowid BIGINT GENERATED ALWAYS AS IDENTITY,"));
        assert!(v1.contains("accusation BIGINT NOT NULL CHECK (accusation IN (0, 1))"));
    }

    #[test]
    fn parameters_are_renumbered_for_postgres() {
        assert_eq!(
            postgres_sql("SELECT id FROM audits WHERE target = ?1 AND x IS NOT DISTINCT FROM ?2"),
            "SELECT id FROM audits WHERE target = $1 AND x IS NOT DISTINCT FROM $2"
        );
        assert!(matches!(postgres_sql("SELECT 1"), Cow::Borrowed(_)));
    }

    #[test]
    fn tls_modes_this_build_cannot_honour_are_refused() {
        for mode in ["require", "verify-ca", "verify-full", "allow"] {
            let err = connect(&format!("postgres://gb:pw@127.0.0.1:1/db?sslmode={mode}"))
                .err()
                .unwrap();
            assert!(matches!(&err, Error::Tls(m) if m == mode), "{err}");
            let msg = err.to_string();
            assert!(
                msg.contains(&format!("sslmode={mode}")) && msg.contains("sslmode=disable"),
                "{msg}"
            );
        }
    }
}
