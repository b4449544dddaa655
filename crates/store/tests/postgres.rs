//! The store against a real PostgreSQL server (started by the tests: see
//! `glassbox_store::testing`; `scripts/setup --postgres` installs it): the tests every backend
//! runs (tests/common), and PostgreSQL's own.

#[macro_use]
mod common;

use common::{bundle, run, Backend, Tmp};
use glassbox_store::testing::{self, PgServer};
use glassbox_store::{Error, Store, StoreLocation, MIGRATIONS};
use std::path::Path;
use std::sync::Arc;

/// A database each on the server the tests running at the same time share.
struct Pg(Arc<PgServer>);

fn pg() -> Pg {
    Pg(testing::shared(Path::new(env!("CARGO_TARGET_TMPDIR"))))
}

fn client(store: &StoreLocation) -> postgres::Client {
    let StoreLocation::Postgres(url) = store else {
        panic!("a PostgreSQL store: {store}")
    };
    postgres::Client::connect(url, postgres::NoTls).unwrap()
}

impl Backend for Pg {
    fn fresh(&self, name: &str) -> StoreLocation {
        self.0.store(name)
    }

    fn version(&self, store: &StoreLocation) -> i64 {
        client(store)
            .query_one("SELECT version FROM glassbox_schema", &[])
            .unwrap()
            .get(0)
    }

    fn set_version(&self, store: &StoreLocation, version: i64) {
        let n = client(store)
            .execute("UPDATE glassbox_schema SET version = $1", &[&version])
            .unwrap();
        assert_eq!(n, 1, "one version row");
    }

    fn check_integrity(&self, store: &StoreLocation) {
        // Nothing half-written: no check result or finding without its audit (the foreign
        // keys say so too), no audit without its check results.
        let orphans: i64 = client(store)
            .query_one(
                "SELECT (SELECT count(*) FROM check_results c
                         WHERE NOT EXISTS (SELECT 1 FROM audits a WHERE a.id = c.audit_id))
                      + (SELECT count(*) FROM audits a
                         WHERE NOT EXISTS (SELECT 1 FROM check_results c WHERE c.audit_id = a.id))",
                &[],
            )
            .unwrap()
            .get(0);
        assert_eq!(orphans, 0);
    }
}

store_tests!(pg());

#[test]
fn the_schema_is_the_sqlite_one_with_ids_from_the_database() {
    let b = pg();
    let loc = b.fresh("schema");
    let tmp = Tmp::new("pg-schema");
    let mut store = Store::open_location(&loc).unwrap();
    let mut c = client(&loc);
    let columns: Vec<(String, String, String)> = c
        .query(
            "SELECT table_name::text, column_name::text, data_type::text
             FROM information_schema.columns
             WHERE table_schema = current_schema() AND table_name IN ('audits', 'findings')
             ORDER BY table_name, ordinal_position",
            &[],
        )
        .unwrap()
        .iter()
        .map(|r| (r.get(0), r.get(1), r.get(2)))
        .collect();
    let has = |t: &str, col: &str, ty: &str| {
        columns
            .iter()
            .any(|(a, b, c)| a == t && b == col && c == ty)
    };
    assert!(has("audits", "id", "bigint"), "{columns:?}");
    assert!(has("audits", "report_json", "text"), "{columns:?}");
    assert!(has("findings", "accusation", "bigint"), "{columns:?}");
    let identity: i64 = c
        .query_one(
            "SELECT count(*) FROM information_schema.columns
             WHERE table_schema = current_schema() AND is_identity = 'YES'
               AND table_name IN ('audits', 'findings', 'reviews', 'check_results')",
            &[],
        )
        .unwrap()
        .get(0);
    assert_eq!(
        identity, 4,
        "audits, findings, reviews ids and check_results' rowid"
    );
    // An id is never given by the store: the database generates it.
    let dir = bundle(&tmp.0);
    let (r, m) = run("r1", "npx server");
    let id = store.record(&r, &m, None, &dir).unwrap();
    let next: i64 = c
        .query_one(
            "INSERT INTO audits (run_id, target, started_at, glassbox_version, verdict,
                evidence_dir, evidence_sha256, report_json)
             VALUES ('by-hand', 'x', 'now', '0', 'clean', '/', '', '{}') RETURNING id",
            &[],
        )
        .unwrap()
        .get(0);
    assert!(next > id);
    assert_eq!(store.schema_version().unwrap(), MIGRATIONS.len() as i64);
}

#[test]
fn passwords_never_appear_in_errors() {
    let b = pg();
    let good = b.0.database("passwords");
    let wrong_password = "not-the-Password-42";
    let bad = good.replace(b.0.password(), wrong_password);
    let loc = StoreLocation::parse(&bad);
    let err = Store::open_location(&loc).unwrap_err();
    assert!(matches!(err, Error::Postgres(_)), "{err:?}");
    let msg = err.to_string();
    assert!(msg.contains("password authentication failed"), "{msg}");
    for shown in [msg, format!("{err:?}"), loc.to_string(), format!("{loc:?}")] {
        assert!(!shown.contains(wrong_password), "{shown}");
        assert!(!shown.contains(b.0.password()), "{shown}");
    }
    assert!(loc.to_string().contains("postgres:***@127.0.0.1"), "{loc}");
    // The right one opens it; the store's Debug hides it too.
    let store = Store::open_location(&StoreLocation::parse(&good)).unwrap();
    assert!(!format!("{store:?}").contains(b.0.password()));
}

#[test]
fn an_unreachable_server_or_a_missing_database_is_a_clear_error() {
    let b = pg();
    let closed = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let err = Store::open_location(&StoreLocation::parse(format!(
        "postgres://gb:secret@127.0.0.1:{closed}/glassbox?connect_timeout=5"
    )))
    .unwrap_err()
    .to_string();
    assert!(
        err.starts_with("store: PostgreSQL: error connecting to server") && !err.contains("secret"),
        "{err}"
    );
    let missing = b.0.url("no_such_database");
    let err = Store::open_location(&StoreLocation::parse(missing))
        .unwrap_err()
        .to_string();
    assert!(
        err.contains("database \"no_such_database\" does not exist"),
        "{err}"
    );
}

#[test]
fn a_unix_socket_url_reaches_the_same_database() {
    let b = pg();
    let tcp = b.fresh("socket");
    let tmp = Tmp::new("pg-socket");
    let mut store = Store::open_location(&tcp).unwrap();
    let (r, m) = run("r1", "npx server");
    store.record(&r, &m, None, &bundle(&tmp.0)).unwrap();
    let StoreLocation::Postgres(url) = &tcp else {
        unreachable!()
    };
    let db = url.rsplit('/').next().unwrap().split('?').next().unwrap();
    let socket = StoreLocation::parse(format!(
        "postgresql://postgres@/{db}?host={}&port={}",
        b.0.socket_dir().display(),
        b.0.port()
    ));
    let store = Store::open_location(&socket).unwrap();
    assert_eq!(store.audits().unwrap()[0].run_id, "r1");
}
