//! Private folders (what `mktemp -d` makes: mode 0700) as the working directory and as
//! read-only paths, through the real sandbox: the server enters, lists and reads them as their
//! owner could, and still cannot write there. When glassbox runs as root they are bound through
//! idmapped mounts (`glassbox_sandbox::idmap`); as another user the folder is already the
//! sandbox user's own.

use glassbox_model::ServerExit;
use glassbox_sandbox::{Config, Sandbox};
use std::io::Read;
use std::os::unix::fs::{chown, PermissionsExt};
use std::path::{Path, PathBuf};
use std::time::Duration;

fn config(script: &str, cwd: &Path) -> Config {
    Config {
        program: "/bin/sh".into(),
        argv: vec!["sh".into(), "-c".into(), script.into()],
        cwd: cwd.to_path_buf(),
        extra_ro: vec![],
        extra_rw: vec![],
        user: "sam".into(),
        hostname: "devbox".into(),
        path_prefix: vec![],
        env: vec![],
        files: vec![],
        rules: vec![],
        network: None,
        refusals: glassbox_sandbox::seccomp::Refusals::Kernel,
        limits: glassbox_sandbox::Limits::default(),
        trust: None,
        clock: None,
    }
}

fn run(cfg: &Config) -> (String, String, ServerExit, Vec<String>) {
    let mut sb = Sandbox::spawn(cfg).expect("spawn");
    drop(sb.stdin.take());
    let mut out = String::new();
    sb.stdout.take().unwrap().read_to_string(&mut out).unwrap();
    let mut err = String::new();
    sb.stderr.take().unwrap().read_to_string(&mut err).unwrap();
    let exit = sb.wait_timeout(Duration::from_secs(20)).expect("exit");
    let mounts = sb
        .settings()
        .mounts
        .iter()
        .map(|m| format!("{} <- {}", m.target, m.source))
        .collect();
    sb.finish();
    (out, err, exit, mounts)
}

fn is_root() -> bool {
    // SAFETY: geteuid cannot fail.
    unsafe { libc::geteuid() == 0 }
}

/// A fresh folder as `mktemp -d` makes it (mode 0700, owned by the caller), removed on drop.
struct Private(PathBuf);

impl Private {
    fn new(name: &str) -> Private {
        let d = std::env::temp_dir().join(format!(
            "glassbox-private-{name}-{}-{:x}",
            std::process::id(),
            std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .unwrap()
                .subsec_nanos()
        ));
        std::fs::create_dir(&d).unwrap();
        set_mode(&d, 0o700);
        Private(d)
    }

    fn file(&self, name: &str, contents: &str, mode: u32) -> PathBuf {
        let f = self.0.join(name);
        std::fs::write(&f, contents).unwrap();
        set_mode(&f, mode);
        f
    }
}

impl Drop for Private {
    fn drop(&mut self) {
        let _ = std::fs::remove_dir_all(&self.0);
    }
}

fn set_mode(p: &Path, mode: u32) {
    std::fs::set_permissions(p, std::fs::Permissions::from_mode(mode)).unwrap();
}

#[test]
fn a_private_working_folder_is_entered_listed_and_read_but_not_written() {
    let dir = Private::new("cwd");
    dir.file("secret.txt", "only the owner reads this\n", 0o600);
    // A file of another owner stays what it is without the idmap: nobody's, its "other"
    // bits apply (none here).
    let foreign = dir.file("foreign.txt", "not yours\n", 0o600);
    if is_root() {
        chown(&foreign, Some(4321), Some(4321)).unwrap();
    }
    let cfg = config(
        "pwd; ls; cat secret.txt; stat -c 'dir %u %a' .; \
         touch new 2>/dev/null || echo cannot-create; \
         echo x >> secret.txt 2>/dev/null || echo cannot-append; \
         mkdir sub 2>/dev/null || echo cannot-mkdir; \
         cat foreign.txt >/dev/null 2>&1 || echo cannot-read-foreign; \
         stat -c 'foreign %u' foreign.txt",
        &dir.0,
    );
    let (out, err, exit, mounts) = run(&cfg);
    assert_eq!(exit, ServerExit::Exited { code: 0 }, "stderr: {err}\n{out}");
    let lines: Vec<&str> = out.lines().collect();
    assert_eq!(lines[0], dir.0.display().to_string(), "{out}");
    assert_eq!(lines[1..3], ["foreign.txt", "secret.txt"], "{out}");
    assert_eq!(lines[3], "only the owner reads this", "{out}");
    // The folder is the sandbox user's own, with its mode as on the host.
    assert_eq!(lines[4], "dir 1000 700", "{out}");
    assert_eq!(
        lines[5..8],
        ["cannot-create", "cannot-append", "cannot-mkdir"],
        "{out}"
    );
    assert!(!dir.0.join("new").exists() && !dir.0.join("sub").exists());
    assert_eq!(
        std::fs::read_to_string(dir.0.join("secret.txt")).unwrap(),
        "only the owner reads this\n"
    );
    if is_root() {
        assert_eq!(
            lines[8..],
            ["cannot-read-foreign", "foreign 65534"],
            "{out}"
        );
        let record = format!(
            "{0} <- bind:{0} (idmapped: owner uid 0 gid 0 → sandbox user)",
            dir.0.display()
        );
        assert!(mounts.contains(&record), "{mounts:#?}");
    }
}

#[test]
fn private_read_only_folders_and_files_are_usable_at_their_paths() {
    let extra = Private::new("ro");
    let data = extra.file("data.json", "{\"private\": true}\n", 0o600);
    // A lone private file elsewhere (a script named on the command line), bound as a file.
    let other = Private::new("ro-file");
    let script = other.file("server.py", "print('hi')\n", 0o600);
    let cwd = std::env::current_dir().unwrap();
    let mut cfg = config(
        &format!(
            "ls {0}; cat {1}; cat {2}; touch {0}/new 2>/dev/null || echo cannot-create; \
             echo x >> {2} 2>/dev/null || echo cannot-append; pwd",
            extra.0.display(),
            data.display(),
            script.display()
        ),
        &cwd,
    );
    cfg.extra_ro = vec![extra.0.clone(), script.clone()];
    let (out, err, exit, mounts) = run(&cfg);
    assert_eq!(exit, ServerExit::Exited { code: 0 }, "stderr: {err}\n{out}");
    assert_eq!(
        out,
        format!(
            "data.json\n{{\"private\": true}}\nprint('hi')\ncannot-create\ncannot-append\n{}\n",
            cwd.display()
        )
    );
    assert!(!extra.0.join("new").exists());
    if is_root() {
        for p in [&extra.0, &script] {
            assert!(
                mounts.iter().any(|m| m.starts_with(&format!(
                    "{0} <- bind:{0} (idmapped: owner uid 0",
                    p.display()
                ))),
                "{p:?} not idmapped: {mounts:#?}"
            );
        }
        // The working folder (readable by all) is bound as before.
        let plain = format!("{0} <- bind:{0}", cwd.display());
        assert!(mounts.contains(&plain), "{mounts:#?}");
    }
}

/// The refusal: a private folder on a filesystem without idmapped mounts (ramfs), mounted in a
/// mount namespace of this test's thread only. The set-up fails before anything runs, naming
/// the folder and what to do.
#[test]
fn a_private_folder_the_kernel_cannot_idmap_is_refused_with_what_to_do() {
    if !is_root() {
        eprintln!(
            "skipped: as a non-root user no folder is idmapped (a user's private folder is the sandbox user's own); this checks root's refusal"
        );
        return;
    }
    let base = Private::new("ramfs");
    set_mode(&base.0, 0o755);
    let at = base.0.clone();
    let outcome = std::thread::spawn(move || {
        // SAFETY: unshare(CLONE_NEWNS) in this thread only (it unshares the thread's fs
        // context); the thread ends with the test's sandbox attempt and its namespace with it.
        if unsafe { libc::unshare(libc::CLONE_NEWNS) } != 0 {
            return Err(format!("unshare: {}", std::io::Error::last_os_error()));
        }
        // SAFETY: mount with NUL-terminated strings; the namespace is this thread's own, and
        // made a slave first so nothing propagates to the host.
        unsafe {
            if libc::mount(
                std::ptr::null(),
                c"/".as_ptr(),
                std::ptr::null(),
                libc::MS_REC | libc::MS_SLAVE,
                std::ptr::null(),
            ) != 0
            {
                return Err(format!(
                    "make / a slave: {}",
                    std::io::Error::last_os_error()
                ));
            }
            let target = std::ffi::CString::new(at.to_str().unwrap()).unwrap();
            if libc::mount(
                c"ramfs".as_ptr(),
                target.as_ptr(),
                c"ramfs".as_ptr(),
                0,
                std::ptr::null(),
            ) != 0
            {
                return Err(format!("mount ramfs: {}", std::io::Error::last_os_error()));
            }
        }
        let dir = at.join("work");
        std::fs::create_dir(&dir).unwrap();
        set_mode(&dir, 0o700);
        let cfg = config("echo ran", &dir);
        Ok(Sandbox::spawn(&cfg).map(drop).map_err(|e| e.to_string()))
    })
    .join()
    .unwrap()
    .expect("the test's own mount namespace");
    let err = outcome.expect_err("a private folder on ramfs cannot be idmapped");
    let dir = base.0.join("work");
    assert!(
        err.starts_with(&format!(
            "the working folder {} is private (mode 0700, owner root) and this kernel cannot idmap mounts on its filesystem (",
            dir.display()
        )),
        "{err}"
    );
    assert!(
        err.ends_with("run glassbox from a folder others may read, or chmod o+rx it"),
        "{err}"
    );
    assert!(!err.contains("Permission denied"), "{err}");
}

/// A private folder under a system directory (bound whole, read-only) goes on top of it.
#[test]
fn a_private_folder_under_a_system_directory_is_usable_too() {
    if !is_root() {
        eprintln!("skipped: only root may make a folder in /opt");
        return;
    }
    let opt = Path::new("/opt");
    if !std::fs::symlink_metadata(opt).is_ok_and(|m| m.is_dir()) {
        eprintln!("skipped: this machine has no /opt directory");
        return;
    }
    let dir = Private(opt.join(format!("glassbox-private-{}", std::process::id())));
    let _ = std::fs::remove_dir_all(&dir.0);
    std::fs::create_dir(&dir.0).unwrap();
    set_mode(&dir.0, 0o700);
    dir.file("notes.txt", "under /opt\n", 0o600);
    let (out, err, exit, mounts) = run(&config(
        "cat notes.txt; touch x 2>/dev/null || echo cannot-create",
        &dir.0,
    ));
    assert_eq!(exit, ServerExit::Exited { code: 0 }, "stderr: {err}\n{out}");
    assert_eq!(out, "under /opt\ncannot-create\n");
    assert!(
        mounts
            .iter()
            .any(|m| m.starts_with(&format!("{0} <- bind:{0} (idmapped", dir.0.display()))),
        "{mounts:#?}"
    );
}

/// Every bind is a read-only mount, whoever owns what is bound: the system directories, a
/// working folder others may read (a plain bind), a private one (idmapped as root). A user's
/// own folder is writable by the sandbox user through its permission bits, so only the mount
/// keeps the server from writing there.
#[test]
fn every_read_only_bind_is_a_read_only_mount() {
    let open = Private::new("open");
    set_mode(&open.0, 0o755);
    let private = Private::new("shut");
    let mut cfg = config(
        &format!(
            "for p in /usr /etc {0} {1}; do \
               awk -v p=$p '$5 == p {{ split($6, o, \",\"); print p, o[1] }}' /proc/self/mountinfo; \
             done; touch {0}/x 2>/dev/null || echo cannot-create",
            open.0.display(),
            private.0.display()
        ),
        &open.0,
    );
    cfg.extra_ro = vec![private.0.clone()];
    let (out, err, exit, _) = run(&cfg);
    assert_eq!(exit, ServerExit::Exited { code: 0 }, "stderr: {err}\n{out}");
    assert_eq!(
        out,
        format!(
            "/usr ro\n/etc ro\n{0} ro\n{1} ro\ncannot-create\n",
            open.0.display(),
            private.0.display()
        )
    );
    assert!(!open.0.join("x").exists());
}

/// A folder and a folder inside it, the inner one named first (a program's `.bin` next to
/// its package's folder, both given read-only, under a private `mktemp -d` folder): both are
/// read-only mounts at their paths, the inner one's files are there, and the sandbox starts
/// (it failed remounting the inner bind the outer one had hidden).
#[test]
fn a_folder_named_before_the_folder_it_is_in_is_bound_under_it() {
    let top = Private::new("nested");
    let outer = top.0.join("package");
    let inner = outer.join("node_modules/.bin");
    std::fs::create_dir_all(&inner).unwrap();
    std::fs::write(inner.join("server"), "inner file\n").unwrap();
    std::fs::write(outer.join("package.json"), "outer file\n").unwrap();
    let cwd = Private::new("nested-cwd");
    set_mode(&cwd.0, 0o755);
    let mut cfg = config(
        &format!(
            "cat {1}/server {0}/package.json; \
             for p in {0} {1}; do \
               awk -v p=$p '$5 == p {{ split($6, o, \",\"); print p, o[1] }}' /proc/self/mountinfo; \
             done; touch {1}/x 2>/dev/null || echo cannot-create",
            outer.display(),
            inner.display()
        ),
        &cwd.0,
    );
    cfg.extra_ro = vec![inner.clone(), outer.clone()];
    let (out, err, exit, _) = run(&cfg);
    assert_eq!(exit, ServerExit::Exited { code: 0 }, "stderr: {err}\n{out}");
    assert_eq!(
        out,
        format!(
            "inner file\nouter file\n{0} ro\n{1} ro\ncannot-create\n",
            outer.display(),
            inner.display()
        )
    );
}
