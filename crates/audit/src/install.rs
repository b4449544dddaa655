//! Package targets: `npm:NAME[@VERSION]` and `pypi:NAME[==VERSION]`, and a local npm
//! tarball, `npm:./PATH.tgz` (what `npm pack` makes: a package before it is published, or one
//! fetched by hand).
//!
//! A package is installed by its own installer (npm; uv, or pip in a venv where uv is not
//! installed) **inside the sandbox**, in phase `install`, under the same recorder and the same
//! planted secrets as the server's runs: lifecycle scripts and `setup.py` are traced like the
//! server itself. During the install the network edge relays connections to the package
//! registry to the real network ([`glassbox_net::relay`]) and captures every other
//! destination, which the checks then judge like any egress.
//!
//! Installs are kept by exact version under `$GLASSBOX_STATE_DIR/packages/` (default
//! `~/.local/state/glassbox/packages/`): `npm/<name>@<version>/` holds `node_modules`,
//! `pypi/<name>==<version>/` a venv. A folder is used only once its marker
//! (`glassbox-install.json`) is written, after a successful install; a second audit of the
//! same version reuses it and says so in the manifest (`install.cached`, and the run id of the
//! audit that installed it). The version asked for is resolved on the host first
//! (`npm view`, `pip index versions`; glassbox's own queries, outside the sandbox), so that a
//! range or `latest` finds the cache too.

use crate::Error;
use glassbox_model::PackageRef;
use serde::{Deserialize, Serialize};
use std::ffi::OsString;
use std::path::{Path, PathBuf};
use std::process::Command;

/// Which registry.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Registry {
    /// The npm registry.
    Npm,
    /// PyPI.
    Pypi,
}

impl Registry {
    /// `npm` or `pypi`.
    pub fn name(self) -> &'static str {
        match self {
            Registry::Npm => "npm",
            Registry::Pypi => "pypi",
        }
    }
}

/// A package named on the command line.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct PackageSpec {
    /// Its registry.
    pub registry: Registry,
    /// Its name.
    pub name: String,
    /// The version asked for (`None`: the latest).
    pub version: Option<String>,
    /// A local npm tarball installed instead of the registry's package (absolute). Its name
    /// and version are its `package.json`'s; its version is filed as
    /// `VERSION+tarball.SHA` (semver build metadata, the first 12 hex digits of the
    /// tarball's SHA-256) so that it is never taken for, nor cached as, the registry's
    /// release of that version.
    pub tarball: Option<PathBuf>,
}

/// The marker written once an install succeeded.
const MARKER: &str = "glassbox-install.json";

/// What the marker holds.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Marker {
    /// The package.
    pub package: PackageRef,
    /// The installer's command line.
    pub command: Vec<String>,
    /// The run id of the audit that installed it.
    pub installed_by: String,
    /// The whole installed tree, `name@version` (npm) or `name==version` (PyPI).
    pub packages: Vec<String>,
}

fn valid_name(registry: Registry, name: &str) -> bool {
    let ok_char = |c: char| c.is_ascii_alphanumeric() || "-._~".contains(c);
    match registry {
        Registry::Npm => {
            let parts: Vec<&str> = match name.strip_prefix('@') {
                Some(scoped) => match scoped.split_once('/') {
                    Some((scope, n)) => vec![scope, n],
                    None => return false,
                },
                None => vec![name],
            };
            name.len() <= 214
                && parts
                    .iter()
                    .all(|p| !p.is_empty() && p.chars().all(ok_char) && !p.starts_with(['.', '_']))
        }
        Registry::Pypi => {
            !name.is_empty()
                && name.len() <= 200
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-._".contains(c))
                && name.starts_with(|c: char| c.is_ascii_alphanumeric())
        }
    }
}

fn valid_version(v: &str) -> bool {
    !v.is_empty()
        && v.len() <= 100
        && v.chars()
            .all(|c| c.is_ascii_alphanumeric() || ".-+_^~<>=*! ,|".contains(c))
        && !v.starts_with('-')
}

impl PackageSpec {
    /// Parses `npm:NAME[@VERSION]`, `pypi:NAME[==VERSION]` or `npm:PATH.tgz` (a path starting
    /// with `/` or `.`; the tarball is read now, relative paths from the working directory);
    /// `Ok(None)` for anything else (a command).
    pub fn parse(target: &str) -> Result<Option<PackageSpec>, Error> {
        PackageSpec::parse_in(target, Path::new("."))
    }

    /// As [`PackageSpec::parse`], a relative tarball path taken from `base` (a target list's
    /// folder).
    pub fn parse_in(target: &str, base: &Path) -> Result<Option<PackageSpec>, Error> {
        let (registry, rest) = if let Some(r) = target.strip_prefix("npm:") {
            (Registry::Npm, r)
        } else if let Some(r) = target.strip_prefix("pypi:") {
            (Registry::Pypi, r)
        } else {
            return Ok(None);
        };
        if registry == Registry::Npm && rest.starts_with(['/', '.']) {
            return tarball_spec(&base.join(rest)).map(Some);
        }
        let (name, version) = match registry {
            Registry::Npm => match rest.get(1..).and_then(|r| r.rfind('@')) {
                Some(i) => (&rest[..i + 1], Some(&rest[i + 2..])),
                None => (rest, None),
            },
            Registry::Pypi => match rest.split_once("==") {
                Some((n, v)) => (n, Some(v)),
                None => (rest, None),
            },
        };
        if !valid_name(registry, name) {
            return Err(Error::Usage(format!(
                "not a valid {} package name: {name:?}",
                registry.name()
            )));
        }
        if let Some(v) = version {
            if !valid_version(v) {
                return Err(Error::Usage(format!(
                    "not a valid version for {name}: {v:?}"
                )));
            }
        }
        Ok(Some(PackageSpec {
            registry,
            name: name.to_string(),
            version: version.map(str::to_string),
            tarball: None,
        }))
    }

    /// What was asked for, as text.
    pub fn requested(&self) -> String {
        self.version.clone().unwrap_or_else(|| "latest".into())
    }

    /// The spec as given (`npm:NAME@V`, `pypi:NAME==V`, `npm:PATH`).
    pub fn display(&self) -> String {
        if let Some(t) = &self.tarball {
            return format!("npm:{}", t.display());
        }
        match (self.registry, &self.version) {
            (Registry::Npm, Some(v)) => format!("npm:{}@{v}", self.name),
            (Registry::Pypi, Some(v)) => format!("pypi:{}=={v}", self.name),
            (r, None) => format!("{}:{}", r.name(), self.name),
        }
    }

    /// PyPI's normalized name (PEP 503): lowercase, runs of `-_.` as one `-`.
    fn normalized(&self) -> String {
        let mut out = String::new();
        for c in self.name.chars() {
            if "-_.".contains(c) {
                if !out.ends_with('-') {
                    out.push('-');
                }
            } else {
                out.push(c.to_ascii_lowercase());
            }
        }
        out
    }

    /// Whether the version asked for is already exact.
    fn exact(&self) -> Option<&str> {
        let v = self.version.as_deref()?;
        let is_exact = v.chars().next().is_some_and(|c| c.is_ascii_digit())
            && v.chars()
                .all(|c| c.is_ascii_alphanumeric() || ".-+_".contains(c));
        is_exact.then_some(v)
    }

    /// The exact version to install: the one asked for when exact, else what the registry
    /// resolves it to (asked on the host).
    pub fn resolve_version(&self) -> Result<String, Error> {
        if let Some(v) = self.exact() {
            return Ok(v.to_string());
        }
        let fail = |why: String| {
            Error::Install(format!(
                "cannot resolve {} to an exact version: {why}",
                self.display()
            ))
        };
        match self.registry {
            Registry::Npm => {
                let spec = format!("{}@{}", self.name, self.requested());
                let out = Command::new("npm")
                    .args(["view", "--json", &spec, "version"])
                    .output()
                    .map_err(|e| fail(format!("npm: {e}")))?;
                if !out.status.success() {
                    return Err(fail(last_line(&out.stderr)));
                }
                // One version as a string, several (a range) as an array: the last is the
                // highest.
                let v: serde_json::Value = serde_json::from_slice(&out.stdout)
                    .map_err(|e| fail(format!("npm view printed no JSON: {e}")))?;
                let v = match v {
                    serde_json::Value::String(s) => Some(s),
                    serde_json::Value::Array(a) => a
                        .into_iter()
                        .filter_map(|x| x.as_str().map(str::to_string))
                        .next_back(),
                    _ => None,
                };
                v.filter(|v| valid_version(v))
                    .ok_or_else(|| fail("no version matches".into()))
            }
            Registry::Pypi => {
                if self.version.is_some() {
                    return Err(fail(
                        "PyPI targets take an exact version (NAME==VERSION) or none".into(),
                    ));
                }
                let out = Command::new("python3")
                    .args(["-m", "pip", "index", "versions", &self.name])
                    .output()
                    .map_err(|e| fail(format!("pip: {e}")))?;
                if !out.status.success() {
                    return Err(fail(last_line(&out.stderr)));
                }
                // First line: `NAME (VERSION)`.
                let text = String::from_utf8_lossy(&out.stdout);
                text.lines()
                    .next()
                    .and_then(|l| l.rsplit_once('(').map(|(_, v)| v.trim_end_matches(')')))
                    .map(str::to_string)
                    .filter(|v| valid_version(v))
                    .ok_or_else(|| fail(format!("pip printed {:?}", last_line(&out.stdout))))
            }
        }
    }

    /// The install folder of `version`.
    pub fn dir(&self, version: &str) -> PathBuf {
        let base = crate::selftest::state_dir().join("packages");
        match self.registry {
            Registry::Npm => base
                .join("npm")
                .join(format!("{}@{version}", self.name.replace('/', "+"))),
            Registry::Pypi => base
                .join("pypi")
                .join(format!("{}=={version}", self.normalized())),
        }
    }

    /// The package, as the manifest records it.
    pub fn reference(&self, version: &str) -> PackageRef {
        PackageRef {
            registry: self.registry.name().into(),
            name: self.name.clone(),
            requested: self.requested(),
            version: version.to_string(),
        }
    }
}

/// The largest `package.json` read from a tarball.
const MAX_PACKAGE_JSON: u64 = 1 << 20;

/// The spec of a local npm tarball: its name and version from its `package.json`, read on the
/// host with `tar` (listed, then that one member written to a pipe: nothing is extracted to
/// disk; the install itself happens in the sandbox).
fn tarball_spec(path: &Path) -> Result<PackageSpec, Error> {
    use sha2::{Digest, Sha256};
    use std::io::Read;
    let bad = |why: String| Error::Usage(format!("npm tarball {}: {why}", path.display()));
    let path = std::fs::canonicalize(path).map_err(|e| bad(e.to_string()))?;
    let name = path.file_name().map(|n| n.to_string_lossy().into_owned());
    if !name.is_some_and(|n| n.ends_with(".tgz") || n.ends_with(".tar.gz")) || !path.is_file() {
        return Err(bad("not a .tgz or .tar.gz file".into()));
    }
    let mut hasher = Sha256::new();
    let mut file = std::fs::File::open(&path).map_err(|e| bad(e.to_string()))?;
    std::io::copy(&mut file, &mut hasher).map_err(|e| bad(e.to_string()))?;
    let sha: String = hasher.finalize()[..6]
        .iter()
        .map(|b| format!("{b:02x}"))
        .collect();
    // `tar ARGS PATH -- MEMBERS`, its output bounded (a listing of a huge tarball, a huge
    // member: the child is killed, never waited on with a full pipe).
    let tar = |args: &[&str], members: &[&str], limit: u64| -> Result<Vec<u8>, Error> {
        let mut child = Command::new("tar")
            .args(args)
            .arg(&path)
            .arg("--")
            .args(members)
            .stdin(std::process::Stdio::null())
            .stdout(std::process::Stdio::piped())
            .stderr(std::process::Stdio::null())
            .spawn()
            .map_err(|e| bad(format!("tar: {e}")))?;
        let mut out = Vec::new();
        let read = child
            .stdout
            .take()
            .expect("piped")
            .take(limit + 1)
            .read_to_end(&mut out);
        if read.is_err() || out.len() as u64 > limit {
            let _ = child.kill();
            let _ = child.wait();
            return Err(bad(format!("tar printed more than {limit} bytes")));
        }
        match child.wait() {
            Ok(status) if status.success() => Ok(out),
            _ => Err(bad("not a readable gzip tarball".into())),
        }
    };
    // npm takes the package from the tarball's one top folder (`package/` by `npm pack`).
    let listing = tar(&["-tzf"], &[], 16 << 20)?;
    let member = String::from_utf8_lossy(&listing)
        .lines()
        .find(|l| {
            l.strip_suffix("/package.json")
                .is_some_and(|top| !top.is_empty() && !top.contains('/'))
        })
        .map(str::to_string)
        .ok_or_else(|| bad("holds no package.json in its top folder".into()))?;
    // `-O` with the member named: only that file, to the pipe.
    let text = tar(&["-xzOf"], &[&member], MAX_PACKAGE_JSON)?;
    let pkg: serde_json::Value =
        serde_json::from_slice(&text).map_err(|e| bad(format!("{member}: {e}")))?;
    let field = |k: &str| pkg.get(k).and_then(|v| v.as_str()).map(str::to_string);
    let (Some(name), Some(version)) = (field("name"), field("version")) else {
        return Err(bad(format!("{member} names no package name and version")));
    };
    if !valid_name(Registry::Npm, &name) {
        return Err(bad(format!("not a valid npm package name: {name:?}")));
    }
    let exact = |v: &str| {
        valid_version(v)
            && v.starts_with(|c: char| c.is_ascii_digit())
            && v.chars()
                .all(|c| c.is_ascii_alphanumeric() || ".-+".contains(c))
    };
    if !exact(&version) {
        return Err(bad(format!("not an exact version: {version:?}")));
    }
    Ok(PackageSpec {
        registry: Registry::Npm,
        name,
        // Build metadata: `+` once, then dot-separated identifiers.
        version: Some(match version.split_once('+') {
            Some(_) => format!("{version}.tarball.{sha}"),
            None => format!("{version}+tarball.{sha}"),
        }),
        tarball: Some(path),
    })
}

/// The last non-empty line of a command's output, printable and short.
fn last_line(bytes: &[u8]) -> String {
    let text = String::from_utf8_lossy(bytes);
    let line = text.trim().lines().last().unwrap_or("").trim();
    glassbox_model::truncate(&glassbox_model::printable(line), 300)
}

/// The marker of a finished install in `dir`, if there is one.
pub fn cached(dir: &Path) -> Option<Marker> {
    let bytes = std::fs::read(dir.join(MARKER)).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// Writes the marker: the folder is complete.
pub fn mark(dir: &Path, marker: &Marker) -> Result<(), Error> {
    let path = dir.join(MARKER);
    let text = serde_json::to_vec_pretty(marker).map_err(|e| Error::Internal(e.to_string()))?;
    std::fs::write(&path, text).map_err(|source| Error::Evidence { path, source })
}

/// The registry hosts an installer needs, from the host's own configuration (npm's
/// `registry`, pip's and uv's index URLs), on port 443 (and 80 for a plain `http://` one).
pub fn registry_hosts(registry: Registry) -> Vec<(String, u16)> {
    let mut urls = Vec::new();
    match registry {
        Registry::Npm => {
            if let Ok(out) = Command::new("npm")
                .args(["config", "get", "registry"])
                .output()
            {
                urls.push(String::from_utf8_lossy(&out.stdout).trim().to_string());
            }
            urls.push("https://registry.npmjs.org/".into());
        }
        Registry::Pypi => {
            for var in ["PIP_INDEX_URL", "UV_INDEX_URL", "UV_DEFAULT_INDEX"] {
                if let Ok(v) = std::env::var(var) {
                    urls.push(v);
                }
            }
            urls.push("https://pypi.org/simple/".into());
            urls.push("https://files.pythonhosted.org/".into());
        }
    }
    let mut hosts: Vec<(String, u16)> = urls.iter().filter_map(|u| host_port(u)).collect();
    hosts.sort();
    hosts.dedup();
    hosts
}

/// `(host, port)` of an `http(s)://` URL.
fn host_port(url: &str) -> Option<(String, u16)> {
    let (scheme, rest) = url.split_once("://")?;
    let default = match scheme {
        "https" => 443,
        "http" => 80,
        _ => return None,
    };
    let authority = rest.split(['/', '?', '#']).next()?;
    let authority = authority.rsplit('@').next()?;
    let (host, port) = match authority.strip_prefix('[') {
        Some(v6) => {
            let (h, tail) = v6.split_once(']')?;
            match tail.strip_prefix(':') {
                Some(p) => (h, p.parse().ok()?),
                None => (h, default),
            }
        }
        None => match authority.rsplit_once(':') {
            Some((h, p)) => (h, p.parse().ok()?),
            None => (authority, default),
        },
    };
    (!host.is_empty()).then(|| (host.to_ascii_lowercase(), port))
}

/// The installer's run: its command, environment, and what it needs to see.
#[derive(Debug)]
pub struct Installer {
    /// The command line (run in the sandbox, in the install folder).
    pub command: Vec<OsString>,
    /// Its environment, besides the sandbox's own.
    pub env: Vec<(String, String)>,
    /// Host paths it needs read-only (an interpreter's prefix).
    pub extra_ro: Vec<PathBuf>,
}

/// Installer settings taken over from the host (certificates, indexes, local wheels): the
/// machine's own way to reach its registry. Never credentials: a planted fake home stays the
/// only home.
const PASSED_THROUGH: &[&str] = &[
    "PIP_INDEX_URL",
    "PIP_EXTRA_INDEX_URL",
    "PIP_FIND_LINKS",
    "PIP_CERT",
    "PIP_DEFAULT_TIMEOUT",
    "UV_INDEX_URL",
    "UV_DEFAULT_INDEX",
    "UV_EXTRA_INDEX_URL",
    "UV_FIND_LINKS",
    "SSL_CERT_FILE",
    "NODE_EXTRA_CA_CERTS",
];

/// How `spec` at `version` is installed into `dir`.
///
/// The installers are told not to read the user's configuration (`~/.npmrc`,
/// `pip.conf`, `.netrc`): those are planted secrets, and reading them is left to whatever
/// else runs during the install (a lifecycle script), where it is evidence.
pub fn installer(spec: &PackageSpec, version: &str, dir: &Path) -> Result<Installer, Error> {
    let d = dir.to_string_lossy().into_owned();
    let mut env: Vec<(String, String)> = PASSED_THROUGH
        .iter()
        .filter_map(|k| std::env::var(k).ok().map(|v| (k.to_string(), v)))
        .collect();
    let mut extra_ro = Vec::new();
    let command: Vec<String> = match spec.registry {
        Registry::Npm => {
            env.push(("NPM_CONFIG_USERCONFIG".into(), "/dev/null".into()));
            env.push(("NPM_CONFIG_CACHE".into(), "/tmp/npm-cache".into()));
            env.push(("NPM_CONFIG_UPDATE_NOTIFIER".into(), "false".into()));
            let npm = crate::target::resolve(&["npm".into()], dir)?;
            extra_ro.extend(npm.extra_ro);
            vec![
                npm.program.to_string_lossy().into_owned(),
                "install".into(),
                "--no-audit".into(),
                "--no-fund".into(),
                "--prefix".into(),
                d.clone(),
                match &spec.tarball {
                    Some(t) => {
                        extra_ro.push(t.clone());
                        t.to_string_lossy().into_owned()
                    }
                    None => format!("{}@{version}", spec.name),
                },
            ]
        }
        Registry::Pypi => {
            env.push(("PIP_CONFIG_FILE".into(), "/dev/null".into()));
            env.push(("PIP_NO_INPUT".into(), "1".into()));
            env.push(("NETRC".into(), "/dev/null".into()));
            env.push(("UV_NO_CONFIG".into(), "1".into()));
            env.push(("UV_CACHE_DIR".into(), "/tmp/uv-cache".into()));
            // The machine's certificate store (the registry may sit behind its own CA).
            env.push(("UV_NATIVE_TLS".into(), "1".into()));
            let py = crate::target::resolve(&["python3".into()], dir)?;
            extra_ro.extend(py.extra_ro);
            let python = py.program.to_string_lossy().into_owned();
            let req = format!("{}=={version}", spec.name);
            match crate::target::resolve(&["uv".into()], dir) {
                Ok(uv) => {
                    extra_ro.extend(uv.extra_ro);
                    let uv = uv.program.to_string_lossy().into_owned();
                    // Two steps, one command line: positional parameters, never pasted
                    // into the script.
                    vec![
                        "/bin/sh".into(),
                        "-c".into(),
                        r#""$1" venv --python "$2" "$3/venv" && "$1" pip install --python "$3/venv/bin/python" "$4""#.into(),
                        "sh".into(),
                        uv,
                        python,
                        d.clone(),
                        req,
                    ]
                }
                Err(_) => vec![
                    "/bin/sh".into(),
                    "-c".into(),
                    r#""$1" -m venv "$2/venv" && "$2/venv/bin/python" -m pip install --no-input "$3""#
                        .into(),
                    "sh".into(),
                    python,
                    d.clone(),
                    req,
                ],
            }
        }
    };
    Ok(Installer {
        command: command.into_iter().map(OsString::from).collect(),
        env,
        extra_ro,
    })
}

/// The server's command line in an installed folder: the package's executable with `args`.
///
/// npm: the package's `bin` (its only one, or the one named like the package); PyPI: the
/// console script named like the package (or the only one the package installed).
pub fn entry_command(
    spec: &PackageSpec,
    dir: &Path,
    args: &[OsString],
) -> Result<Vec<OsString>, Error> {
    let program = match spec.registry {
        Registry::Npm => npm_bin(spec, dir)?,
        Registry::Pypi => pypi_script(spec, dir)?,
    };
    let mut cmd = vec![program.into_os_string()];
    cmd.extend(args.iter().cloned());
    Ok(cmd)
}

fn npm_bin(spec: &PackageSpec, dir: &Path) -> Result<PathBuf, Error> {
    let manifest = dir
        .join("node_modules")
        .join(&spec.name)
        .join("package.json");
    let text = std::fs::read(&manifest)
        .map_err(|e| Error::Install(format!("{}: {e}", manifest.display())))?;
    let pkg: serde_json::Value = serde_json::from_slice(&text)
        .map_err(|e| Error::Install(format!("{}: {e}", manifest.display())))?;
    let unscoped = spec.name.rsplit('/').next().unwrap_or(&spec.name);
    let names: Vec<String> = match pkg.get("bin") {
        Some(serde_json::Value::String(_)) => vec![unscoped.to_string()],
        Some(serde_json::Value::Object(m)) => m.keys().cloned().collect(),
        _ => Vec::new(),
    };
    let name = match names.as_slice() {
        [] => {
            return Err(Error::Install(format!(
                "{} declares no executable (package.json has no \"bin\")",
                spec.name
            )))
        }
        [one] => one.clone(),
        many => many
            .iter()
            .find(|n| n.as_str() == unscoped)
            .cloned()
            .ok_or_else(|| {
                Error::Install(format!(
                    "{} declares several executables ({}); none is named like the package",
                    spec.name,
                    many.join(", ")
                ))
            })?,
    };
    if name.contains('/') || name.starts_with('.') {
        return Err(Error::Install(format!("odd executable name {name:?}")));
    }
    Ok(dir.join("node_modules/.bin").join(name))
}

fn pypi_script(spec: &PackageSpec, dir: &Path) -> Result<PathBuf, Error> {
    let bin = dir.join("venv/bin");
    let want = spec.normalized();
    let entries =
        std::fs::read_dir(&bin).map_err(|e| Error::Install(format!("{}: {e}", bin.display())))?;
    let mut scripts: Vec<String> = entries
        .filter_map(|e| e.ok())
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| {
            !(n.starts_with("python")
                || n.starts_with("pip")
                || n.starts_with("activate")
                || n.starts_with("Activate")
                || n.starts_with("deactivate"))
        })
        .collect();
    scripts.sort();
    let norm = |n: &str| n.to_ascii_lowercase().replace('_', "-");
    if let Some(s) = scripts.iter().find(|s| norm(s) == want) {
        return Ok(bin.join(s));
    }
    match scripts.as_slice() {
        [one] => Ok(bin.join(one)),
        [] => Err(Error::Install(format!(
            "{} installed no console script",
            spec.name
        ))),
        many => Err(Error::Install(format!(
            "{} installed several console scripts ({}); none is named like the package",
            spec.name,
            many.join(", ")
        ))),
    }
}

/// The installed tree with exact versions.
pub fn installed_packages(registry: Registry, dir: &Path) -> Vec<String> {
    let mut out = Vec::new();
    match registry {
        Registry::Npm => {
            // npm's own record of the tree it installed.
            let lock = dir.join("node_modules/.package-lock.json");
            if let Some(pkgs) = std::fs::read(lock)
                .ok()
                .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
                .and_then(|v| v.get("packages").cloned())
                .and_then(|p| p.as_object().cloned())
            {
                for (path, meta) in pkgs {
                    let name = path.rsplit("node_modules/").next().unwrap_or(&path);
                    if let Some(v) = meta.get("version").and_then(|v| v.as_str()) {
                        out.push(format!("{name}@{v}"));
                    }
                }
            }
        }
        Registry::Pypi => {
            let lib = dir.join("venv/lib");
            for py in std::fs::read_dir(lib).into_iter().flatten().flatten() {
                let site = py.path().join("site-packages");
                for e in std::fs::read_dir(site).into_iter().flatten().flatten() {
                    let n = e.file_name().to_string_lossy().into_owned();
                    if let Some(stem) = n.strip_suffix(".dist-info") {
                        if let Some((name, v)) = stem.rsplit_once('-') {
                            out.push(format!("{name}=={v}"));
                        }
                    }
                }
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spec(s: &str) -> PackageSpec {
        PackageSpec::parse(s).unwrap().unwrap()
    }

    #[test]
    fn specs_parse() {
        let s = spec("npm:@modelcontextprotocol/server-memory@2026.8.31");
        assert_eq!(s.registry, Registry::Npm);
        assert_eq!(s.name, "@modelcontextprotocol/server-memory");
        assert_eq!(s.version.as_deref(), Some("2026.8.31"));
        assert_eq!(s.exact(), Some("2026.8.31"));
        let s = spec("npm:@scope/name");
        assert_eq!(
            (s.name.as_str(), s.version.as_deref()),
            ("@scope/name", None)
        );
        let s = spec("npm:left-pad@^1.2");
        assert_eq!(
            (s.name.as_str(), s.version.as_deref()),
            ("left-pad", Some("^1.2"))
        );
        assert_eq!(s.exact(), None);
        let s = spec("pypi:mcp-server-time==2026.10.19");
        assert_eq!(s.registry, Registry::Pypi);
        assert_eq!(s.name, "mcp-server-time");
        assert_eq!(s.display(), "pypi:mcp-server-time==2026.10.19");
        assert_eq!(spec("pypi:Mcp_Server.Time").normalized(), "mcp-server-time");
        assert!(PackageSpec::parse("python3").unwrap().is_none());
        assert!(PackageSpec::parse("./npm:x").unwrap().is_none());
    }

    #[test]
    fn hostile_specs_are_refused() {
        for bad in [
            "npm:",
            "npm:@scope",
            "npm:@/x",
            "npm:../etc",
            "npm:x;rm -rf",
            "npm:x@$(id)",
            "npm:.hidden",
            "pypi:",
            "pypi:-e",
            "pypi:x==--index-url=http://evil.example",
            "pypi:a b",
            "npm:x@-1",
        ] {
            let e = PackageSpec::parse(bad).expect_err(bad);
            assert!(matches!(e, Error::Usage(_)), "{bad}: {e}");
        }
    }

    /// A tarball in `dir` named `file`, holding `files` (path, contents).
    fn tarball(dir: &Path, file: &str, files: &[(&str, &str)]) -> PathBuf {
        let src = dir.join("src");
        let _ = std::fs::remove_dir_all(&src);
        for (p, text) in files {
            let p = src.join(p);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
        std::fs::create_dir_all(&src).unwrap();
        let out = dir.join(file);
        let ok = Command::new("tar")
            .arg("czf")
            .arg(&out)
            .arg("-C")
            .arg(&src)
            // The top folders by name (as `npm pack` writes them), not `./`.
            .args(
                std::fs::read_dir(&src)
                    .unwrap()
                    .map(|e| e.unwrap().file_name()),
            )
            .status()
            .unwrap()
            .success();
        assert!(ok);
        out
    }

    #[test]
    fn local_tarballs_are_named_by_their_package_json_and_hash() {
        let dir = std::env::temp_dir().join(format!("gb-tarball-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let pkg = r#"{"name": "@scope/probe", "version": "2.0.1"}"#;
        let t = tarball(&dir, "a.tgz", &[("package/package.json", pkg)]);
        let s = PackageSpec::parse_in("npm:./a.tgz", &dir).unwrap().unwrap();
        assert_eq!(s.name, "@scope/probe");
        let v = s.version.clone().unwrap();
        let sha = v.strip_prefix("2.0.1+tarball.").unwrap_or_default();
        assert!(
            sha.len() == 12 && sha.chars().all(|c| c.is_ascii_hexdigit()),
            "{v}"
        );
        assert_eq!(s.exact(), Some(v.as_str()));
        assert_eq!(s.tarball.as_deref(), Some(t.as_path()));
        assert_eq!(s.display(), format!("npm:{}", t.display()));
        // The same version in another tarball is another install.
        let other = tarball(
            &dir,
            "b.tgz",
            &[("package/package.json", pkg), ("package/x.js", "1")],
        );
        let o = PackageSpec::parse(&format!("npm:{}", other.display()))
            .unwrap()
            .unwrap();
        assert_ne!(o.version, s.version);
        assert_ne!(o.dir(o.exact().unwrap()), s.dir(s.exact().unwrap()));
        // Its installer installs the file, visible in the sandbox.
        let i = installer(&s, &v, &dir.join("install")).unwrap();
        assert_eq!(i.command.last().unwrap(), t.as_os_str());
        assert!(i.extra_ro.contains(&t));

        let bad = |file: &str, files: &[(&str, &str)]| {
            tarball(&dir, file, files);
            let e = PackageSpec::parse_in(&format!("npm:./{file}"), &dir).unwrap_err();
            assert!(matches!(e, Error::Usage(_)), "{file}: {e}");
            e.to_string()
        };
        let big = format!(
            r#"{{"name": "x", "version": "1.0.0", "pad": "{}"}}"#,
            "a".repeat(2 << 20)
        );
        for (file, files, why) in [
            (
                "none.tgz",
                vec![("package/index.js", "1")],
                "no package.json",
            ),
            (
                "deep.tgz",
                vec![("a/b/package.json", pkg)],
                "no package.json",
            ),
            (
                "name.tgz",
                vec![(
                    "package/package.json",
                    r#"{"name": "../x", "version": "1.0.0"}"#,
                )],
                "not a valid npm package name",
            ),
            (
                "range.tgz",
                vec![(
                    "package/package.json",
                    r#"{"name": "x", "version": "^1.0"}"#,
                )],
                "not an exact version",
            ),
            (
                "nover.tgz",
                vec![("package/package.json", r#"{"name": "x"}"#)],
                "no package name and version",
            ),
            (
                "json.tgz",
                vec![("package/package.json", "{")],
                "package/package.json",
            ),
            (
                "big.tgz",
                vec![("package/package.json", big.as_str())],
                "more than",
            ),
        ] {
            let e = bad(file, &files);
            assert!(e.contains(why), "{file}: {e}");
        }
        std::fs::write(dir.join("plain.tgz"), "not gzip").unwrap();
        let e = PackageSpec::parse_in("npm:./plain.tgz", &dir)
            .unwrap_err()
            .to_string();
        assert!(e.contains("not a readable gzip tarball"), "{e}");
        let e = PackageSpec::parse_in("npm:./missing.tgz", &dir)
            .unwrap_err()
            .to_string();
        assert!(e.contains("missing.tgz"), "{e}");
        std::fs::write(dir.join("x.zip"), "").unwrap();
        let e = PackageSpec::parse_in("npm:./x.zip", &dir)
            .unwrap_err()
            .to_string();
        assert!(e.contains("not a .tgz"), "{e}");
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn install_folders_are_per_exact_version() {
        let a = spec("npm:@scope/name@1.0.0").dir("1.0.0");
        let b = spec("npm:@scope/name@1.0.1").dir("1.0.1");
        assert_ne!(a, b);
        assert!(
            a.ends_with("packages/npm/@scope+name@1.0.0"),
            "{}",
            a.display()
        );
        let p = spec("pypi:Mcp_Server==1.0").dir("1.0");
        assert!(
            p.ends_with("packages/pypi/mcp-server==1.0"),
            "{}",
            p.display()
        );
    }

    #[test]
    fn registry_urls_give_hosts() {
        assert_eq!(
            host_port("https://registry.npmjs.org/"),
            Some(("registry.npmjs.org".into(), 443))
        );
        assert_eq!(
            host_port("http://user:pw@Mirror.example:8080/simple"),
            Some(("mirror.example".into(), 8080))
        );
        assert_eq!(host_port("file:///opt/wheels"), None);
        assert_eq!(
            host_port("https://[2001:db8::1]/x"),
            Some(("2001:db8::1".into(), 443))
        );
    }

    #[test]
    fn the_entry_of_an_installed_tree_is_found() {
        let dir = std::env::temp_dir().join(format!("gb-entry-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        let pkg = dir.join("node_modules/@scope/tool");
        std::fs::create_dir_all(&pkg).unwrap();
        std::fs::write(
            pkg.join("package.json"),
            r#"{"name":"@scope/tool","bin":{"tool":"x.js","tool-admin":"y.js"}}"#,
        )
        .unwrap();
        let s = spec("npm:@scope/tool@1.0.0");
        let cmd = entry_command(&s, &dir, &["/data".into()]).unwrap();
        assert_eq!(cmd[0], dir.join("node_modules/.bin/tool").into_os_string());
        assert_eq!(cmd[1], "/data");
        std::fs::write(pkg.join("package.json"), r#"{"name":"@scope/tool"}"#).unwrap();
        let e = entry_command(&s, &dir, &[]).unwrap_err().to_string();
        assert!(e.contains("no executable"), "{e}");

        std::fs::create_dir_all(dir.join("venv/bin")).unwrap();
        for f in [
            "python",
            "python3",
            "pip",
            "activate",
            "mcp-server-time",
            "other",
        ] {
            std::fs::write(dir.join("venv/bin").join(f), "").unwrap();
        }
        let p = spec("pypi:mcp_server_time==1.0");
        let cmd = entry_command(&p, &dir, &[]).unwrap();
        assert_eq!(
            cmd[0],
            dir.join("venv/bin/mcp-server-time").into_os_string()
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
