//! Turning a command line into something the sandbox can execute.

use crate::Error;
use glassbox_sandbox::SYSTEM_DIRS;
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

/// Resolves `command` (run from `cwd`) for the sandbox.
pub fn resolve(command: &[OsString], cwd: &Path) -> Result<Resolved, Error> {
    let Some(first) = command.first() else {
        return Err(Error::Usage("no command given after --".into()));
    };
    let found = find(first, cwd)
        .ok_or_else(|| Error::CommandNotFound(first.to_string_lossy().into_owned()))?;
    let program = through_pyenv_shim(&found, first).unwrap_or(found);
    let real = std::fs::canonicalize(&program).unwrap_or_else(|_| program.clone());
    let mut extra_ro = Vec::new();
    let mut path_prefix = Vec::new();
    for p in [&program, &real] {
        if !in_system_dir(p) && !p.starts_with(cwd) {
            if let Some(prefix) = install_prefix(p) {
                extra_ro.push(prefix);
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
                    extra_ro.push(prefix);
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
            let dir = if p.is_dir() {
                p.to_path_buf()
            } else {
                p.parent().unwrap_or(p).to_path_buf()
            };
            extra_ro.push(dir);
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
}
