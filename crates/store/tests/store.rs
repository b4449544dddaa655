//! The store against real SQLite files in temporary directories: the tests every backend
//! runs (tests/common), and SQLite's own.

#[macro_use]
mod common;

use common::{bundle, run, Backend, Tmp};
use glassbox_store::{bundle_hash, Error, Store, StoreLocation, MIGRATIONS};
use rusqlite::Connection;
use std::fs;
use std::path::Path;

/// SQLite files in a scratch directory.
struct Sqlite(Tmp);

fn sqlite() -> Sqlite {
    Sqlite(Tmp::new("sqlite"))
}

fn path(store: &StoreLocation) -> &Path {
    store.sqlite_path().expect("a SQLite store")
}

impl Backend for Sqlite {
    fn fresh(&self, name: &str) -> StoreLocation {
        StoreLocation::Sqlite(self.0 .0.join(format!("{name}.sqlite")))
    }

    fn version(&self, store: &StoreLocation) -> i64 {
        user_version(path(store))
    }

    fn set_version(&self, store: &StoreLocation, version: i64) {
        Connection::open(path(store))
            .unwrap()
            .pragma_update(None, "user_version", version)
            .unwrap();
    }

    fn check_integrity(&self, store: &StoreLocation) {
        let check: String = Connection::open(path(store))
            .unwrap()
            .pragma_query_value(None, "integrity_check", |r| r.get(0))
            .unwrap();
        assert_eq!(check, "ok");
    }
}

store_tests!(sqlite());

fn user_version(db: &Path) -> i64 {
    Connection::open(db)
        .unwrap()
        .pragma_query_value(None, "user_version", |r| r.get(0))
        .unwrap()
}

#[test]
fn migrates_an_empty_file_in_wal_mode_and_makes_missing_folders() {
    let tmp = Tmp::new("migrate");
    let db = tmp.0.join("empty.sqlite");
    fs::File::create(&db).unwrap();
    let mut store = Store::open(&db).unwrap();
    let (report, manifest) = run("r1", "npx server");
    store
        .record(&report, &manifest, None, &bundle(&tmp.0))
        .unwrap();
    drop(store);
    assert_eq!(user_version(&db), MIGRATIONS.len() as i64);
    let conn = Connection::open(&db).unwrap();
    let mode: String = conn
        .pragma_query_value(None, "journal_mode", |r| r.get(0))
        .unwrap();
    assert_eq!(mode, "wal");

    // Missing parent directories are created.
    let nested = tmp.0.join("a/b/store.sqlite");
    Store::open(&nested).unwrap();
    assert_eq!(user_version(&nested), MIGRATIONS.len() as i64);
    // `open` and `open_location` of a path are the same store.
    let store = Store::open_location(&StoreLocation::from(db.as_path())).unwrap();
    assert_eq!(store.audits().unwrap().len(), 1);
}

#[test]
fn the_message_of_a_newer_store_names_the_file() {
    let b = sqlite();
    let loc = b.fresh("named");
    Store::open_location(&loc).unwrap();
    b.set_version(&loc, 99);
    let msg = Store::open_location(&loc).unwrap_err().to_string();
    assert_eq!(
        msg,
        format!(
            "{}: schema version 99 is newer than this glassbox knows ({}): upgrade glassbox \
             (the store is never downgraded)",
            path(&loc).display(),
            MIGRATIONS.len()
        )
    );
}

#[test]
fn bundle_hash_covers_names_and_contents() {
    let a = Tmp::new("hash-a");
    let b = Tmp::new("hash-b");
    let (da, db) = (bundle(&a.0), bundle(&b.0));
    let h = bundle_hash(&da).unwrap();
    assert_eq!(h.len(), 64);
    assert_eq!(h, bundle_hash(&db).unwrap(), "independent of location");
    fs::write(db.join("events.jsonl"), "{\"id\":1}\n").unwrap();
    assert_ne!(h, bundle_hash(&db).unwrap(), "contents count");
    fs::write(db.join("events.jsonl"), "{\"id\":1}\n{\"id\":2}\n").unwrap();
    assert_eq!(h, bundle_hash(&db).unwrap());
    fs::rename(db.join("net/flows.jsonl"), db.join("net/flows2.jsonl")).unwrap();
    assert_ne!(h, bundle_hash(&db).unwrap(), "names count");
    std::os::unix::fs::symlink("/etc/passwd", da.join("link")).unwrap();
    assert!(matches!(bundle_hash(&da), Err(Error::NotAFile(_))));
}
