//! Turning a command line into something the sandbox can execute.

use crate::Error;
use glassbox_model::SYSTEM_DIRS;
use std::ffi::{OsStr, OsString};
use std::os::unix::ffi::OsStrExt;
use std::os::unix::fs::PermissionsExt;
use std::path::{Path, PathBuf};
use std::process::Command;

/// A command resolved on the host.
#[derive(Clone, Debug)]
pub struct Resolved {
    /// The program to execute (absolute).
    pub program: PathBuf,
    /// argv, `argv[0]` as given.
    pub argv: Vec<OsString>,
    /// Host paths to bind read-only so the program and its files are visible.
    pub extra_ro: Vec<PathBuf>,
    /// Host directories bound read-write (a package's install folder, during install only).
    pub extra_rw: Vec<PathBuf>,
    /// Directories to put in front of `PATH` (the program's own `bin`).
    pub path_prefix: Vec<String>,
    /// More environment variables (an installer's settings, a config's `env`).
    pub env: Vec<(String, String)>,
}

fn is_executable(p: &Path) -> bool {
    std::fs::metadata(p)
        .map(|m| m.is_file() && m.permissions().mode() & 0o111 != 0)
        .unwrap_or(false)
}

fn in_system_dir(p: &Path) -> bool {
    SYSTEM_DIRS
        .iter()
        .any(|d| p.starts_with(Path::new("/").join(d)))
}

/// Finds `name` the way a shell would: as a path when it has a `/`, else on `PATH`.
fn find(name: &OsStr, cwd: &Path) -> Option<PathBuf> {
    if name.as_bytes().contains(&b'/') {
        let p = cwd.join(name);
        return is_executable(&p).then_some(p);
    }
    let path = std::env::var_os("PATH").unwrap_or_else(|| "/usr/bin:/bin".into());
    std::env::split_paths(&path)
        .map(|d| d.join(name))
        .find(|p| is_executable(p))
}

/// A pyenv shim is a shell script that runs pyenv, which is not in the sandbox: ask pyenv
/// for the interpreter it stands for.
fn through_pyenv_shim(p: &Path, name: &OsStr) -> Option<PathBuf> {
    if !p.components().any(|c| c.as_os_str() == "shims") {
        return None;
    }
    let head = std::fs::read(p).ok()?;
    if !head.starts_with(b"#!") || !head.windows(5).any(|w| w == b"pyenv") {
        return None;
    }
    let out = Command::new("pyenv").arg("which").arg(name).output().ok()?;
    let real = PathBuf::from(OsStr::from_bytes(out.stdout.trim_ascii()));
    (out.status.success() && is_executable(&real)).then_some(real)
}

/// The directory to bind so that a program outside the system directories works: its install
/// prefix (the parent of its `bin`), else its own directory.
fn install_prefix(real: &Path) -> Option<PathBuf> {
    let dir = real.parent()?;
    if dir.file_name() == Some(OsStr::new("bin")) {
        dir.parent().map(Path::to_path_buf)
    } else {
        Some(dir.to_path_buf())
    }
}

/// The absolute interpreter a script names on its `#!` line, if it is a script.
fn shebang_interpreter(p: &Path) -> Option<PathBuf> {
    use std::io::Read;
    let mut head = [0u8; 256];
    let n = std::fs::File::open(p).ok()?.read(&mut head).ok()?;
    let line = head[..n].strip_prefix(b"#!")?;
    let line = &line[..line.iter().position(|&b| b == b'\n').unwrap_or(line.len())];
    let first = line
        .split(|b| b.is_ascii_whitespace())
        .find(|w| !w.is_empty())?;
    let path = PathBuf::from(OsStr::from_bytes(first));
    path.is_absolute().then_some(path)
}

/// The home folders of this machine's people: the caller's (`$HOME`), root's, and those of
/// the accounts of `/etc/passwd` with a uid of 1000 or more (not `nobody`), canonical.
/// They hold real credentials (`~/.ssh`, `~/.aws`, `~/.npmrc`): glassbox never binds one, nor a
/// folder above one, into the sandbox on its own accord ([`check_working_folder`], and the
/// folders [`resolve`] would bind for a program's prefix or an argument).
fn homes() -> Vec<PathBuf> {
    let mut out: Vec<PathBuf> = Vec::new();
    let mut add = |p: &Path| {
        if p.is_absolute() && p != Path::new("/") {
            let p = std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
            if !out.contains(&p) {
                out.push(p);
            }
        }
    };
    if let Some(h) = std::env::var_os("HOME") {
        add(Path::new(&h));
    }
    add(Path::new("/root"));
    for line in std::fs::read_to_string("/etc/passwd")
        .unwrap_or_default()
        .lines()
    {
        let fields: Vec<&str> = line.split(':').collect();
        if let [_, _, uid, _, _, home, ..] = fields.as_slice() {
            if uid.parse::<u32>().is_ok_and(|u| (1000..65534).contains(&u)) {
                add(Path::new(home));
            }
        }
    }
    out
}

/// The home folder `dir` is, or is above (`/home` above `/home/ann`); `/` is never bound.
fn holds_home(dir: &Path, homes: &[PathBuf]) -> Option<PathBuf> {
    if dir == Path::new("/") {
        return None;
    }
    let dir = std::fs::canonicalize(dir).unwrap_or_else(|_| dir.to_path_buf());
    homes.iter().find(|h| h.starts_with(&dir)).cloned()
}

/// The folder glassbox is started in is bound into the sandbox (read-only, at its path): it
/// may not be a home folder or above one, whose real credentials the server would then see.
pub fn check_working_folder(cwd: &Path) -> Result<(), Error> {
    match holds_home(cwd, &homes()) {
        Some(home) => Err(Error::Usage(format!(
            "glassbox was started in {}, which {} the home folder {} and its real credentials \
             (~/.ssh, ~/.aws...): the server would see them. Start it from the server's own \
             folder, or from an empty one (cd \"$(mktemp -d)\"), and name what the server needs \
             with --ro",
            cwd.display(),
            if home == cwd { "is" } else { "holds" },
            home.display()
        ))),
        None => Ok(()),
    }
}

/// Resolves `command` (run from `cwd`) for the sandbox.
///
/// What it makes visible besides the program is never a home folder nor above one
/// ([`homes`]): a program in `~/bin` brings `~/bin`, not its "prefix" `~`; a script named as
/// `~/server.py` brings that file alone, not `~`.
pub fn resolve(command: &[OsString], cwd: &Path) -> Result<Resolved, Error> {
    let Some(first) = command.first() else {
        return Err(Error::Usage("no command given after --".into()));
    };
    let found = find(first, cwd)
        .ok_or_else(|| Error::CommandNotFound(first.to_string_lossy().into_owned()))?;
    let program = through_pyenv_shim(&found, first).unwrap_or(found);
    let real = std::fs::canonicalize(&program).unwrap_or_else(|_| program.clone());
    let homes = homes();
    // The folder that makes `p` work, or, where that would be a home (or above one), a
    // narrower one: its own folder, else the file alone.
    let visible = |p: &Path, wide: PathBuf| -> PathBuf {
        let narrow = p
            .parent()
            .map(Path::to_path_buf)
            .unwrap_or_else(|| p.to_path_buf());
        [wide, narrow, p.to_path_buf()]
            .into_iter()
            .find(|d| holds_home(d, &homes).is_none())
            .unwrap_or_else(|| p.to_path_buf())
    };
    let mut extra_ro = Vec::new();
    let mut path_prefix = Vec::new();
    for p in [&program, &real] {
        if !in_system_dir(p) && !p.starts_with(cwd) {
            if let Some(prefix) = install_prefix(p) {
                extra_ro.push(visible(p, prefix));
            }
        }
    }
    // A script's interpreter (`#!/path/venv/bin/python`, a symlink into a Python install
    // elsewhere): its install prefix too.
    if let Some(interp) = shebang_interpreter(&real) {
        let interp_real = std::fs::canonicalize(&interp).unwrap_or_else(|_| interp.clone());
        for p in [&interp, &interp_real] {
            if !in_system_dir(p) && !p.starts_with(cwd) {
                if let Some(prefix) = install_prefix(p) {
                    extra_ro.push(visible(p, prefix));
                }
            }
        }
    }
    if let Some(dir) = program.parent() {
        if !in_system_dir(dir) {
            path_prefix.push(dir.to_string_lossy().into_owned());
        }
    }
    // Absolute paths named as arguments (`node /abs/path/index.js`): their directory.
    for arg in &command[1..] {
        let p = Path::new(arg);
        if p.is_absolute() && p.exists() && !in_system_dir(p) && !p.starts_with(cwd) {
            if p.is_dir() {
                // A folder named outright is the user's choice, as with --ro.
                extra_ro.push(p.to_path_buf());
            } else {
                extra_ro.push(visible(p, p.parent().unwrap_or(p).to_path_buf()));
            }
        }
    }
    extra_ro.sort();
    extra_ro.dedup();
    // A bind inside another bind is redundant.
    let all = extra_ro.clone();
    extra_ro.retain(|p| !all.iter().any(|q| q != p && p.starts_with(q)));
    Ok(Resolved {
        program,
        argv: command.to_vec(),
        extra_ro,
        extra_rw: Vec::new(),
        path_prefix,
        env: Vec::new(),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_missing_command_is_named() {
        let e = resolve(&["no-such-program-xyz".into()], Path::new("/")).unwrap_err();
        assert_eq!(e.to_string(), "command not found: no-such-program-xyz");
    }

    #[test]
    fn programs_outside_system_dirs_bring_their_prefix() {
        let r = resolve(&["sh".into()], Path::new("/")).unwrap();
        assert!(r.extra_ro.is_empty(), "{:?}", r.extra_ro);
        let tmp = std::env::temp_dir().join(format!("gb-target-{}", std::process::id()));
        std::fs::create_dir_all(tmp.join("bin")).unwrap();
        let prog = tmp.join("bin/tool");
        std::fs::write(&prog, "#!/bin/sh\n").unwrap();
        std::fs::set_permissions(&prog, std::fs::Permissions::from_mode(0o755)).unwrap();
        let r = resolve(
            &[prog.clone().into(), "/etc/hostname".into()],
            Path::new("/nonexistent"),
        )
        .unwrap();
        assert_eq!(r.extra_ro, vec![tmp.clone()]);
        std::fs::remove_dir_all(&tmp).unwrap();
    }

    #[test]
    fn a_home_folder_is_never_made_visible_on_its_own_accord() {
        let homes = vec![PathBuf::from("/home/ann"), PathBuf::from("/root")];
        assert_eq!(
            holds_home(Path::new("/home/ann"), &homes),
            Some("/home/ann".into())
        );
        assert_eq!(
            holds_home(Path::new("/home"), &homes),
            Some("/home/ann".into())
        );
        assert_eq!(holds_home(Path::new("/home/ann/project"), &homes), None);
        assert_eq!(holds_home(Path::new("/"), &homes), None);
        // This process's own home (root's here, or the user's).
        let home = std::fs::canonicalize(std::env::var_os("HOME").unwrap()).unwrap();
        let e = check_working_folder(&home).unwrap_err().to_string();
        assert!(
            e.contains("real credentials") && e.contains("mktemp"),
            "{e}"
        );
        if let Some(parent) = home.parent().filter(|p| *p != Path::new("/")) {
            assert!(check_working_folder(parent).is_err());
        }
        assert!(check_working_folder(&home.join("some-project")).is_ok());
        // A script in the home folder brings itself, not the folder.
        let script = home.join(format!("gb-target-home-{}.sh", std::process::id()));
        std::fs::write(&script, "#!/bin/sh\n").unwrap();
        let r = resolve(
            &["sh".into(), script.clone().into()],
            Path::new("/nonexistent"),
        );
        std::fs::remove_file(&script).unwrap();
        assert_eq!(r.unwrap().extra_ro, vec![script]);
    }
}
