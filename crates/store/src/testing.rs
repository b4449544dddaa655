//! A throwaway PostgreSQL server for tests (feature `testing`), for this crate's tests and
//! the CLI's: the Debian `postgresql` package's binaries (scripts/setup --postgres installs
//! them), a fresh cluster in a temporary folder, listening on 127.0.0.1 (a free port) with
//! password authentication and on a unix socket in that folder; stopped and removed when the
//! last handle on it is dropped, a panicking test's included.
//!
//! PostgreSQL refuses to run as root: as root, the server runs as the user `postgres` (which
//! the package creates), and its folder belongs to that user.
//!
//! When the binaries are missing, [`PgServer::start`] panics saying to run `scripts/setup
//! --postgres`: a test that needs PostgreSQL fails rather than passing without it.

use crate::StoreLocation;
use std::fs;
use std::io::Read;
use std::net::TcpListener;
use std::os::unix::process::CommandExt;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::sync::atomic::{AtomicU32, Ordering};
use std::sync::{Arc, Mutex, Weak};
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

/// The superuser's name and the password of every test server.
const USER: &str = "postgres";

/// A running server; stopped and its folder removed on drop.
#[derive(Debug)]
pub struct PgServer {
    root: PathBuf,
    child: Option<Child>,
    port: u16,
    password: String,
    databases: AtomicU32,
}

/// The server [`shared`] hands out while someone holds it.
static SHARED: Mutex<Weak<PgServer>> = Mutex::new(Weak::new());

/// One server for every test of this process that runs while another holds it: started on
/// first use (under `parent`, e.g. `env!("CARGO_TARGET_TMPDIR")`), stopped once the last
/// handle is dropped.
pub fn shared(parent: &Path) -> Arc<PgServer> {
    let mut slot = SHARED.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(server) = slot.upgrade() {
        return server;
    }
    let server = Arc::new(PgServer::start(parent));
    *slot = Arc::downgrade(&server);
    server
}

/// The folder of the server binaries (`initdb`, `postgres`): `$GLASSBOX_PG_BINDIR`, else the
/// newest `/usr/lib/postgresql/<major>/bin`. Panics saying to run scripts/setup --postgres
/// when there is none.
pub fn bindir() -> PathBuf {
    if let Some(dir) = std::env::var_os("GLASSBOX_PG_BINDIR").filter(|d| !d.is_empty()) {
        let dir = PathBuf::from(dir);
        assert!(
            dir.join("initdb").is_file() && dir.join("postgres").is_file(),
            "GLASSBOX_PG_BINDIR={}: no initdb and postgres there: run scripts/setup --postgres (it \
             installs the postgresql package), or point it at their folder",
            dir.display()
        );
        return dir;
    }
    let mut found: Vec<(u32, PathBuf)> = fs::read_dir("/usr/lib/postgresql")
        .into_iter()
        .flatten()
        .flatten()
        .filter_map(|e| {
            let major = e.file_name().to_str()?.parse::<u32>().ok()?;
            let bin = e.path().join("bin");
            (bin.join("initdb").is_file() && bin.join("postgres").is_file()).then_some((major, bin))
        })
        .collect();
    found.sort();
    match found.pop() {
        Some((_, bin)) => bin,
        None => panic!(
            "the PostgreSQL server binaries (/usr/lib/postgresql/<version>/bin/initdb and \
             postgres) are missing: run scripts/setup --postgres (it installs the postgresql \
             package), or set GLASSBOX_PG_BINDIR"
        ),
    }
}

/// The user the server runs as: `None` (this process's) unless this process is root, then
/// `postgres`'s uid and gid.
fn server_user() -> Option<(u32, u32)> {
    // SAFETY: geteuid has no preconditions.
    if unsafe { libc::geteuid() } != 0 {
        return None;
    }
    let name = std::ffi::CString::new(USER).expect("no NUL");
    // SAFETY: a NUL-terminated name; the result (static storage) is read at once, before
    // any other call that could overwrite it.
    let pw = unsafe { libc::getpwnam(name.as_ptr()) };
    if pw.is_null() {
        panic!(
            "PostgreSQL refuses to run as root and there is no user {USER:?} to run it as: run \
             scripts/setup --postgres (the postgresql package creates that user)"
        );
    }
    // SAFETY: pw is non-null and points to a valid passwd record.
    Some(unsafe { ((*pw).pw_uid, (*pw).pw_gid) })
}

impl PgServer {
    /// Initialises and starts a server in a new folder under `parent`; returns once it
    /// accepts connections. Panics (with the server's log) when it cannot.
    pub fn start(parent: &Path) -> PgServer {
        let bin = bindir();
        let user = server_user();
        let stamp = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map_or(0, |d| d.as_nanos());
        let root = parent.join(format!("pg-{}-{stamp}", std::process::id()));
        fs::create_dir_all(root.join("socket"))
            .unwrap_or_else(|e| panic!("cannot create {}: {e}", root.display()));
        let password = format!("pw-{stamp:x}");
        fs::write(root.join("pwfile"), format!("{password}\n")).unwrap();
        // Whatever happens next, the folder goes when `server` is dropped.
        let mut server = PgServer {
            root,
            child: None,
            port: 0,
            password,
            databases: AtomicU32::new(0),
        };
        let root = server.root.clone();
        if let Some((uid, gid)) = user {
            for p in [&root, &root.join("socket"), &root.join("pwfile")] {
                std::os::unix::fs::chown(p, Some(uid), Some(gid))
                    .unwrap_or_else(|e| panic!("cannot give {} to {USER}: {e}", p.display()));
            }
        }
        let as_server = |program: &str| {
            let mut c = Command::new(bin.join(program));
            c.current_dir(&root).env("LC_ALL", "C").env_remove("PGDATA");
            if let Some((uid, gid)) = user {
                c.uid(uid).gid(gid);
            }
            c
        };
        let out = as_server("initdb")
            .args([
                "--no-sync",
                "--no-locale",
                "--encoding=UTF8",
                "--username",
                USER,
            ])
            .args([
                "--auth-local=trust",
                "--auth-host=scram-sha-256",
                "--pwfile",
            ])
            .arg(root.join("pwfile"))
            .arg("--pgdata")
            .arg(root.join("data"))
            .output()
            .unwrap_or_else(|e| panic!("cannot run {}/initdb: {e}", bin.display()));
        assert!(
            out.status.success(),
            "initdb failed ({}):\n{}{}",
            out.status,
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        // A free port can be taken by someone else before the server binds it: try a few.
        let mut last_log = String::new();
        for _ in 0..5 {
            let port = TcpListener::bind("127.0.0.1:0")
                .and_then(|l| l.local_addr())
                .map(|a| a.port())
                .expect("a free port");
            let log_path = root.join("server.log");
            let log = fs::File::create(&log_path).unwrap();
            let child = as_server("postgres")
                .arg("-D")
                .arg(root.join("data"))
                .args(["-h", "127.0.0.1", "-p", &port.to_string(), "-k"])
                .arg(root.join("socket"))
                // A throwaway cluster: nothing to keep across a crash of the machine.
                .args(["-c", "fsync=off", "-c", "full_page_writes=off"])
                .args(["-c", "max_connections=200", "-c", "shared_buffers=16MB"])
                .stdin(Stdio::null())
                .stdout(log.try_clone().unwrap())
                .stderr(log)
                .spawn()
                .unwrap_or_else(|e| panic!("cannot run {}/postgres: {e}", bin.display()));
            server.child = Some(child);
            server.port = port;
            match server.wait_ready() {
                Ok(()) => return server,
                Err(why) => {
                    server.stop();
                    let mut text = String::new();
                    let _ = fs::File::open(&log_path).and_then(|mut f| f.read_to_string(&mut text));
                    last_log = format!("{why}\n{text}");
                    if !text.contains("could not bind") && !text.contains("could not create") {
                        break;
                    }
                }
            }
        }
        panic!("the PostgreSQL server did not start: {last_log}");
    }

    /// Waits until the server accepts a connection, or it exited, or 60 s passed.
    fn wait_ready(&mut self) -> Result<(), String> {
        let deadline = Instant::now() + Duration::from_secs(60);
        let url = self.url("postgres");
        loop {
            if let Some(child) = &mut self.child {
                if let Ok(Some(status)) = child.try_wait() {
                    return Err(format!("it exited ({status})"));
                }
            }
            match postgres::Client::connect(&url, postgres::NoTls) {
                Ok(_) => return Ok(()),
                Err(e) if Instant::now() > deadline => {
                    return Err(format!("not ready after 60 s: {e}"))
                }
                Err(_) => std::thread::sleep(Duration::from_millis(100)),
            }
        }
    }

    /// The port it listens on (127.0.0.1).
    pub fn port(&self) -> u16 {
        self.port
    }

    /// The superuser's password.
    pub fn password(&self) -> &str {
        &self.password
    }

    /// The folder of its unix socket.
    pub fn socket_dir(&self) -> PathBuf {
        self.root.join("socket")
    }

    /// The URL of database `db` over TCP, as the superuser, with the password.
    pub fn url(&self, db: &str) -> String {
        format!(
            "postgres://{USER}:{}@127.0.0.1:{}/{db}?sslmode=disable",
            self.password, self.port
        )
    }

    /// A new, empty database (named after `name`, made unique); its URL over TCP.
    pub fn database(&self, name: &str) -> String {
        let n = self.databases.fetch_add(1, Ordering::Relaxed);
        let clean: String = name
            .chars()
            .map(|c| {
                if c.is_ascii_alphanumeric() {
                    c.to_ascii_lowercase()
                } else {
                    '_'
                }
            })
            .take(40)
            .collect();
        let db = format!("{clean}_{n}");
        let mut admin = postgres::Client::connect(&self.url("postgres"), postgres::NoTls)
            .unwrap_or_else(|e| panic!("cannot connect to the test server: {e}"));
        admin
            .batch_execute(&format!("CREATE DATABASE \"{db}\""))
            .unwrap_or_else(|e| panic!("cannot create database {db}: {e}"));
        self.url(&db)
    }

    /// [`PgServer::database`] as a store location.
    pub fn store(&self, name: &str) -> StoreLocation {
        StoreLocation::Postgres(self.database(name))
    }

    /// Stops the server (fast shutdown, then SIGKILL after 20 s).
    fn stop(&mut self) {
        let Some(mut child) = self.child.take() else {
            return;
        };
        if let Ok(pid) = i32::try_from(child.id()) {
            // SAFETY: a signal to our own child, which has not been reaped yet.
            unsafe { libc::kill(pid, libc::SIGINT) };
        }
        let deadline = Instant::now() + Duration::from_secs(20);
        while Instant::now() < deadline {
            if let Ok(Some(_)) = child.try_wait() {
                return;
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = child.kill();
        let _ = child.wait();
    }
}

impl Drop for PgServer {
    fn drop(&mut self) {
        self.stop();
        let _ = fs::remove_dir_all(&self.root);
    }
}
