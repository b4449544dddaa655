//! Package targets: `npm:NAME[@VERSION]` and `pypi:NAME[==VERSION]`, and a local npm
//! tarball, `npm:./PATH.tgz` (what `npm pack` makes: a package before it is published, or one
//! fetched by hand); and what a launcher line asks for ([`Package`]: `uvx --from SPEC CMD`,
//! `npx -p PKG CMD`, see [`crate::launcher`]): the package, what is installed beside it, and
//! which of its programs runs.
//!
//! A package is installed by its own installer (npm; uv, or pip in a venv where uv is not
//! installed) **inside the sandbox**, in phase `install`, under the same recorder and the same
//! planted secrets as the server's runs: lifecycle scripts and `setup.py` are traced like the
//! server itself. During the install the network edge relays connections to the package
//! registry to the real network (`glassbox_net::relay`) and captures every other
//! destination, which the checks then judge like any egress.
//!
//! Installs are kept by exact version under `$GLASSBOX_STATE_DIR/packages/` (default
//! `~/.local/state/glassbox/packages/`): `npm/<name>@<version>/` holds `node_modules`,
//! `pypi/<name>==<version>/` a venv (a folder name ends in `+` and a hash when extras,
//! packages beside it, a Python version or installer options make it another install). A
//! folder is used only once its marker (`glassbox-install.json`) is written, after a
//! successful install; a second audit of the same version reuses it and says so in the
//! manifest (`install.cached`, and the run id of the audit that installed it).
//!
//! # Versions
//!
//! The version asked for is resolved on the host first (glassbox's own queries, outside the
//! sandbox), so that a range or `latest` finds the cache too, and so that a package or a
//! version that does not exist is one line saying so before anything runs: npm with
//! `npm view --json` (the highest of the versions a range matches, by semver: npm lists them
//! in publication order), PyPI with `uv pip compile --no-deps` (PEP 440 ranges, pre-release
//! rules and the interpreter's Python version as the installer will apply them; without uv,
//! `pip index versions`, which knows no ranges). An exact version whose install is cached is
//! not asked for again.

use crate::Error;
use glassbox_model::PackageRef;
use serde::{Deserialize, Serialize};
use std::ffi::OsString;
use std::io::{Read, Write};
use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

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
    /// The version asked for (`None`: the latest): npm a version, tag or range; PyPI an exact
    /// version (`1.2.0`) or PEP 440 specifiers (`>=1.2,<2`).
    pub version: Option<String>,
    /// A local npm tarball installed instead of the registry's package (absolute). Its name
    /// and version are its `package.json`'s; its version is filed as
    /// `VERSION+tarball.SHA` (semver build metadata, the first 12 hex digits of the
    /// tarball's SHA-256) so that it is never taken for, nor cached as, the registry's
    /// release of that version.
    pub tarball: Option<PathBuf>,
    /// PyPI extras (`NAME[cli,http]`), sorted.
    pub extras: Vec<String>,
}

/// What a launcher asks to install and run: a package, packages beside it, the program.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Package {
    /// The package audited (the store files the audit under it).
    pub spec: PackageSpec,
    /// Packages installed beside it (`uvx --with X`, a second `npx -p`), same registry.
    pub with: Vec<PackageSpec>,
    /// The program to run, by name: the one the launcher named (`uvx --from PKG CMD`,
    /// `npx -p PKG CMD`, uvx's own `uvx PKG`), looked up in the install's `bin` folder only;
    /// `None`: the package's own (npm: its only `bin`, or the one named like it; PyPI: the
    /// console script named like it, or its only one).
    pub program: Option<String>,
    /// The Python the launcher asked for (`uvx --python 3.12`): `python3.12` must be on the
    /// host's `PATH` (glassbox downloads no interpreter).
    pub python: Option<String>,
    /// npm install options the launcher line carried that change the install
    /// (`--legacy-peer-deps`, `--ignore-scripts`).
    pub installer_args: Vec<String>,
    /// The launcher line as configured (empty for a `npm:`/`pypi:` target).
    pub launcher: Vec<String>,
}

impl From<PackageSpec> for Package {
    fn from(spec: PackageSpec) -> Package {
        Package {
            spec,
            with: Vec::new(),
            program: None,
            python: None,
            installer_args: Vec::new(),
            launcher: Vec::new(),
        }
    }
}

/// The exact versions an install is made of: the package's and, in order, those of the
/// packages beside it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Exact {
    /// The package's exact version.
    pub version: String,
    /// `Package::with`'s, in the same order.
    pub with: Vec<String>,
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

/// Whether `v` is one exact version (a digit first, then version characters only).
fn exact_version(v: &str) -> bool {
    v.len() <= 100
        && v.starts_with(|c: char| c.is_ascii_digit())
        && v.chars()
            .all(|c| c.is_ascii_alphanumeric() || ".-+_!".contains(c))
}

/// Why `s` is a source glassbox does not install (a git repository, a URL, a local path),
/// or `None` when it may be a registry package.
fn foreign_source(s: &str) -> Option<&'static str> {
    let lower = s.to_ascii_lowercase();
    if lower.starts_with("git+") || lower.starts_with("git:") || lower.ends_with(".git") {
        return Some("a git repository");
    }
    if lower.contains("://") {
        return Some("a URL");
    }
    for p in ["github:", "gitlab:", "bitbucket:", "gist:"] {
        if lower.starts_with(p) {
            return Some("a git repository");
        }
    }
    if lower.starts_with("file:") || lower.starts_with("link:") || lower.starts_with("workspace:") {
        return Some("a local path");
    }
    if s.starts_with(['.', '/', '~']) || s.contains('\\') {
        return Some("a local path");
    }
    if lower.ends_with(".tgz") || lower.ends_with(".tar.gz") || lower.ends_with(".whl") {
        return Some("a local archive");
    }
    None
}

/// An npm package as launchers take it: `NAME`, `@SCOPE/NAME`, then `@VERSION` (a version,
/// tag or range; `@latest` is no version). Git, URL, path and alias sources are refused
/// with why.
pub(crate) fn npm_spec(s: &str) -> Result<(String, Option<String>), String> {
    if let Some(why) = foreign_source(s) {
        return Err(format!(
            "{s:?} is {why}: glassbox audits packages from the npm registry"
        ));
    }
    if s.starts_with("npm:") {
        return Err(format!("{s:?} is an npm alias: name the package itself"));
    }
    let (name, version) = match s.get(1..).and_then(|r| r.rfind('@')) {
        Some(i) => (&s[..i + 1], Some(&s[i + 2..])),
        None => (s, None),
    };
    if !name.starts_with('@') && name.contains('/') {
        return Err(format!(
            "{s:?} is a GitHub repository (OWNER/REPO): glassbox audits packages from the npm registry"
        ));
    }
    if !valid_name(Registry::Npm, name) {
        return Err(format!("not a valid npm package name: {name:?}"));
    }
    match version {
        Some(v) if v.contains([':', '/']) => Err(format!(
            "{s:?} names a source, not a version: glassbox audits packages from the npm registry"
        )),
        Some(v) if !valid_version(v) => Err(format!("not a valid version for {name}: {v:?}")),
        Some("latest") | Some("") | None => Ok((name.to_string(), None)),
        Some(v) => Ok((name.to_string(), Some(v.to_string()))),
    }
}

/// A PyPI requirement as launchers take it: `NAME`, `NAME[EXTRA,...]`, then nothing, PEP 440
/// specifiers (`==1.2`, `>=1,<2`, `~=1.4`), or, where `at_form` (uvx's command), `@VERSION`
/// (`@latest` is no version). Returns the name, the extras (sorted) and the version: an exact
/// one bare (`1.2`), specifiers as written without spaces. URLs, git, paths and markers are
/// refused with why.
pub(crate) fn pypi_requirement(
    s: &str,
    at_form: bool,
) -> Result<(String, Vec<String>, Option<String>), String> {
    let s = s.trim();
    if s.contains(" @ ") || s.contains(';') {
        return Err(format!(
            "{s:?} is a direct reference or has environment markers: glassbox audits packages from PyPI"
        ));
    }
    if let Some(why) = foreign_source(s) {
        return Err(format!(
            "{s:?} is {why}: glassbox audits packages from PyPI"
        ));
    }
    let end = s
        .find(|c: char| !(c.is_ascii_alphanumeric() || "-._".contains(c)))
        .unwrap_or(s.len());
    let (name, mut rest) = s.split_at(end);
    if !valid_name(Registry::Pypi, name) {
        return Err(format!("not a valid PyPI package name: {s:?}"));
    }
    let mut extras = Vec::new();
    if let Some(r) = rest.strip_prefix('[') {
        let Some((inner, after)) = r.split_once(']') else {
            return Err(format!("{s:?}: unclosed extras"));
        };
        for e in inner.split(',').map(str::trim).filter(|e| !e.is_empty()) {
            if !valid_name(Registry::Pypi, e) {
                return Err(format!("{s:?}: not a valid extra: {e:?}"));
            }
            extras.push(e.to_ascii_lowercase());
        }
        extras.sort();
        extras.dedup();
        rest = after;
    }
    let rest = rest.trim();
    let version = if rest.is_empty() {
        None
    } else if let Some(v) = rest.strip_prefix('@').filter(|_| at_form) {
        match v {
            "latest" => None,
            v if exact_version(v) => Some(v.to_string()),
            v => {
                return Err(format!(
                    "{s:?}: `@` takes an exact version ({v:?} is not one; a range goes in --from)"
                ))
            }
        }
    } else {
        let mut clauses = Vec::new();
        for clause in rest.split(',').map(str::trim) {
            let op = ["===", "==", "!=", ">=", "<=", "~=", ">", "<"]
                .into_iter()
                .find(|op| clause.starts_with(op));
            let Some(op) = op else {
                return Err(format!("{s:?}: not a version specifier: {clause:?}"));
            };
            let v = clause[op.len()..].trim();
            let ok = !v.is_empty()
                && v.chars()
                    .all(|c| c.is_ascii_alphanumeric() || ".-+_!*".contains(c));
            if !ok {
                return Err(format!("{s:?}: not a version: {v:?}"));
            }
            clauses.push((op, v));
        }
        match clauses.as_slice() {
            [("==", v)] if exact_version(v) => Some(v.to_string()),
            _ => Some(
                clauses
                    .iter()
                    .map(|(op, v)| format!("{op}{v}"))
                    .collect::<Vec<_>>()
                    .join(","),
            ),
        }
    };
    Ok((name.to_string(), extras, version))
}

impl PackageSpec {
    /// What its audits are filed under, whatever the version ([`glassbox_model::package_key`]).
    pub fn key(&self) -> String {
        glassbox_model::package_key(self.registry.name(), &self.name)
    }

    /// Parses `npm:NAME[@VERSION]`, `pypi:NAME[==VERSION]` (or `pypi:NAME[EXTRAS]`, or PEP 440
    /// specifiers) or `npm:PATH.tgz` (a path starting with `/` or `.`; the tarball is read now,
    /// relative paths from the working directory); `Ok(None)` for anything else (a command).
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
        let spec = match registry {
            Registry::Npm => npm_spec(rest).map(|(name, version)| PackageSpec {
                registry,
                name,
                version,
                tarball: None,
                extras: Vec::new(),
            }),
            Registry::Pypi => {
                pypi_requirement(rest, false).map(|(name, extras, version)| PackageSpec {
                    registry,
                    name,
                    version,
                    tarball: None,
                    extras,
                })
            }
        };
        spec.map(Some).map_err(Error::Usage)
    }

    /// What was asked for, as text.
    pub fn requested(&self) -> String {
        self.version.clone().unwrap_or_else(|| "latest".into())
    }

    /// The spec as given (`npm:NAME@V`, `pypi:NAME==V`, `pypi:NAME[X]>=1`, `npm:PATH`).
    pub fn display(&self) -> String {
        if let Some(t) = &self.tarball {
            return format!("npm:{}", t.display());
        }
        format!(
            "{}:{}",
            self.registry.name(),
            self.requirement(self.version.as_deref())
        )
    }

    /// The spec as its installer takes it, at `version` (`NAME@V`; `NAME[X]==V`, or the
    /// specifiers as written).
    fn requirement(&self, version: Option<&str>) -> String {
        match self.registry {
            Registry::Npm => match version {
                Some(v) => format!("{}@{v}", self.name),
                None => self.name.clone(),
            },
            Registry::Pypi => {
                let extras = match self.extras.is_empty() {
                    true => String::new(),
                    false => format!("[{}]", self.extras.join(",")),
                };
                match version {
                    Some(v) if exact_version(v) => format!("{}{extras}=={v}", self.name),
                    Some(v) => format!("{}{extras}{v}", self.name),
                    None => format!("{}{extras}", self.name),
                }
            }
        }
    }

    /// PyPI's normalized name (PEP 503): lowercase, runs of `-_.` as one `-`.
    fn normalized(&self) -> String {
        normalize(&self.name)
    }

    /// Whether the version asked for is already exact.
    fn exact(&self) -> Option<&str> {
        self.version.as_deref().filter(|v| exact_version(v))
    }

    /// The exact version to install: what the registry has for what was asked (asked on the
    /// host; see the module doc), with `python` the interpreter a PyPI install will use. A
    /// package or version that does not exist is an [`Error::Install`] of one line saying so.
    pub fn resolve_version(&self, python: Option<&Path>) -> Result<String, Error> {
        if self.tarball.is_some() {
            if let Some(v) = self.exact() {
                return Ok(v.to_string());
            }
        }
        let fail = |why: String| Error::Install(format!("{}: {why}", self.display()));
        match self.registry {
            Registry::Npm => npm_resolve(&self.name, &self.requested()).map_err(fail),
            Registry::Pypi => pypi_resolve(self, python).map_err(fail),
        }
    }

    /// The install folder of `version`.
    pub fn dir(&self, version: &str) -> PathBuf {
        let base = crate::state_dir().join("packages");
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
            extras: self.extras.clone(),
            ..Default::default()
        }
    }
}

/// PEP 503's normalized form of a PyPI name (or a console script's): lowercase, runs of
/// `-_.` as one `-`.
pub(crate) fn normalize(name: &str) -> String {
    let mut out = String::new();
    for c in name.chars() {
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

impl Package {
    /// The launcher's line and the registry's name for what this installs, for messages.
    pub fn display(&self) -> String {
        let mut s = self.spec.display();
        for w in &self.with {
            s.push_str(&format!(" with {}", w.display()));
        }
        s
    }

    /// The exact versions, when every version asked for already is one (the cache may then
    /// be used without asking the registry).
    pub fn exact(&self) -> Option<Exact> {
        Some(Exact {
            version: self.spec.exact()?.to_string(),
            with: self
                .with
                .iter()
                .map(|w| w.exact().map(str::to_string))
                .collect::<Option<Vec<_>>>()?,
        })
    }

    /// Every version resolved on the host ([`PackageSpec::resolve_version`]).
    pub fn resolve(&self, python: Option<&Path>) -> Result<Exact, Error> {
        Ok(Exact {
            version: self.spec.resolve_version(python)?,
            with: self
                .with
                .iter()
                .map(|w| w.resolve_version(python))
                .collect::<Result<Vec<_>, _>>()?,
        })
    }

    /// The exact versions to install, as `glassbox_audit::audit` takes them: known at once when
    /// every version asked for is exact and installed already (no registry is asked then),
    /// else resolved on the host ([`Package::resolve`], for a PyPI package with the
    /// interpreter its install will use, found from `cwd`).
    pub fn exact_versions(&self, cwd: &Path) -> Result<Exact, Error> {
        if let Some(e) = self.exact() {
            if cached(&self.dir(&e)).is_some() {
                return Ok(e);
            }
        }
        let python = match self.spec.registry {
            Registry::Pypi => Some(self.interpreter(cwd)?.program),
            Registry::Npm => None,
        };
        self.resolve(python.as_deref())
    }

    /// This package with the versions of `exact` asked for (what a batch audits once it has
    /// resolved them for its store).
    pub fn pinned(&self, exact: &Exact) -> Package {
        let mut p = self.clone();
        p.spec.version = Some(exact.version.clone());
        for (w, v) in p.with.iter_mut().zip(&exact.with) {
            w.version = Some(v.clone());
        }
        p
    }

    /// The install folder: the package's ([`PackageSpec::dir`]), with `+` and 12 hex digits
    /// of a hash when extras, packages beside it, a Python or installer options make it
    /// another install than the package's alone.
    pub fn dir(&self, exact: &Exact) -> PathBuf {
        let base = self.spec.dir(&exact.version);
        let mut variant = Vec::new();
        if !self.spec.extras.is_empty() {
            variant.push(format!("extras={}", self.spec.extras.join(",")));
        }
        for (w, v) in self.with.iter().zip(&exact.with) {
            variant.push(format!("with={}", w.requirement(Some(v))));
        }
        if let Some(p) = &self.python {
            variant.push(format!("python={p}"));
        }
        for a in &self.installer_args {
            variant.push(format!("arg={a}"));
        }
        if variant.is_empty() {
            return base;
        }
        use sha2::{Digest, Sha256};
        let hash = Sha256::digest(variant.join("\n").as_bytes());
        let hex: String = hash[..6].iter().map(|b| format!("{b:02x}")).collect();
        let mut name = base.file_name().unwrap_or_default().to_os_string();
        name.push(format!("+{hex}"));
        base.with_file_name(name)
    }

    /// The package as the manifest records it (the program found at run time is added then).
    pub fn reference(&self, exact: &Exact) -> PackageRef {
        let mut r = self.spec.reference(&exact.version);
        r.with = self
            .with
            .iter()
            .zip(&exact.with)
            .map(|(w, v)| w.requirement(Some(v)))
            .collect();
        r.program = self.program.clone();
        r.launcher = self.launcher.clone();
        r
    }

    /// The interpreter a PyPI install uses: `python3`, or the one `--python` asked for.
    pub fn interpreter(&self, cwd: &Path) -> Result<crate::target::Resolved, Error> {
        let name = match self.python.as_deref() {
            None => "python3".to_string(),
            Some(p) if p.starts_with("python") => p.to_string(),
            Some(p) if p.starts_with(|c: char| c.is_ascii_digit()) => format!("python{p}"),
            Some(p) => p.to_string(),
        };
        crate::target::resolve(&[name.clone().into()], cwd).map_err(|_| {
            Error::Install(format!(
                "{} asks for Python {} ({name}), which this machine does not have: glassbox \
                 downloads no interpreter (install it, or drop --python from the entry)",
                self.display(),
                self.python.as_deref().unwrap_or("3")
            ))
        })
    }
}

/// How long one of glassbox's own registry queries may take.
const QUERY_TIMEOUT: Duration = Duration::from_secs(120);

/// Runs a query on the host with `input` on its stdin, bounded in time (killed past
/// `QUERY_TIMEOUT`): its status, stdout and stderr.
fn query(cmd: &mut Command, input: &str) -> Result<(bool, String, String), String> {
    let mut child = cmd
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .map_err(|e| e.to_string())?;
    if let Some(mut stdin) = child.stdin.take() {
        let _ = stdin.write_all(input.as_bytes());
    }
    let reader = |r: Option<Box<dyn Read + Send>>| {
        std::thread::spawn(move || {
            let mut out = Vec::new();
            if let Some(r) = r {
                let _ = r.take(8 << 20).read_to_end(&mut out);
            }
            String::from_utf8_lossy(&out).into_owned()
        })
    };
    let out = reader(
        child
            .stdout
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
    );
    let err = reader(
        child
            .stderr
            .take()
            .map(|s| Box::new(s) as Box<dyn Read + Send>),
    );
    let started = Instant::now();
    let status = loop {
        match child.try_wait() {
            Ok(Some(s)) => break Some(s),
            Ok(None) if started.elapsed() < QUERY_TIMEOUT => {
                std::thread::sleep(Duration::from_millis(20))
            }
            _ => {
                let _ = child.kill();
                let _ = child.wait();
                break None;
            }
        }
    };
    let (out, err) = (
        out.join().unwrap_or_default(),
        err.join().unwrap_or_default(),
    );
    match status {
        Some(s) => Ok((s.success(), out, err)),
        None => Err(format!(
            "the registry did not answer within {}s",
            QUERY_TIMEOUT.as_secs()
        )),
    }
}

/// `npm view --json NAME@REQUESTED version`: the highest version it matches.
fn npm_resolve(name: &str, requested: &str) -> Result<String, String> {
    let spec = format!("{name}@{requested}");
    let (ok, out, err) = query(
        Command::new("npm")
            .args(["view", "--json", &spec, "version"])
            .env("NPM_CONFIG_UPDATE_NOTIFIER", "false"),
        "",
    )
    .map_err(|e| format!("npm: {e}"))?;
    let v: Option<serde_json::Value> = serde_json::from_str(out.trim()).ok();
    if let Some(e) = v.as_ref().and_then(|v| v.get("error")) {
        let field = |k: &str| e.get(k).and_then(|x| x.as_str()).unwrap_or("").trim();
        let (code, summary) = (field("code"), field("summary"));
        return Err(match (code, summary) {
            ("E404", s) if s.starts_with("No match found for version") => {
                format!("no version of {name} matches {requested}")
            }
            ("E404", _) => format!("{name} does not exist in the npm registry (E404)"),
            (c, s) => format!("npm view: {}", first_nonempty(&[s, c]).unwrap_or("failed")),
        });
    }
    if !ok {
        return Err(format!("npm view: {}", meaningful_line(&err)));
    }
    let versions: Vec<String> = match v {
        Some(serde_json::Value::String(s)) => vec![s],
        Some(serde_json::Value::Array(a)) => a
            .into_iter()
            .filter_map(|x| x.as_str().map(str::to_string))
            .collect(),
        // npm prints nothing for a version or range nothing matches.
        None if out.trim().is_empty() => Vec::new(),
        _ => {
            return Err(format!(
                "npm view printed no version: {}",
                printable_short(&out)
            ))
        }
    };
    highest(&versions)
        .filter(|v| valid_version(v))
        .ok_or_else(|| format!("no version of {name} matches {requested}"))
}

fn first_nonempty<'a>(xs: &[&'a str]) -> Option<&'a str> {
    xs.iter().copied().find(|s| !s.is_empty())
}

/// The highest of `versions` by semver (npm lists a range's matches in publication order);
/// one that is not semver only when it is the only one.
fn highest(versions: &[String]) -> Option<String> {
    let mut best: Option<(semver::Version, &String)> = None;
    for v in versions {
        if let Ok(parsed) = semver::Version::parse(v) {
            let better = match &best {
                None => true,
                Some((b, _)) => parsed > *b,
            };
            if better {
                best = Some((parsed, v));
            }
        }
    }
    match best {
        Some((_, v)) => Some(v.clone()),
        None if versions.len() == 1 => Some(versions[0].clone()),
        None => None,
    }
}

/// The exact version of a PyPI requirement: `uv pip compile --no-deps`, else (no uv)
/// `pip index versions` for the latest version (an exact one is taken as it is).
fn pypi_resolve(spec: &PackageSpec, python: Option<&Path>) -> Result<String, String> {
    let requirement = spec.requirement(spec.version.as_deref());
    let python = python
        .map(Path::to_path_buf)
        .unwrap_or_else(|| "python3".into());
    let uv = crate::target::resolve(&["uv".into()], Path::new("/")).ok();
    let Some(uv) = uv else {
        if let Some(v) = spec.exact() {
            return Ok(v.to_string());
        }
        if spec.version.is_some() {
            return Err(
                "a version range needs uv to be resolved (scripts/setup installs it)".into(),
            );
        }
        let (ok, out, err) = query(
            Command::new(&python).args(["-m", "pip", "index", "versions", &spec.name]),
            "",
        )
        .map_err(|e| format!("pip: {e}"))?;
        if !ok {
            return Err(meaningful_line(&err));
        }
        // First line: `NAME (VERSION)`.
        return out
            .lines()
            .next()
            .and_then(|l| l.rsplit_once('(').map(|(_, v)| v.trim_end_matches(')')))
            .map(str::to_string)
            .filter(|v| exact_version(v))
            .ok_or_else(|| format!("pip printed {:?}", printable_short(&out)));
    };
    let mut cmd = Command::new(&uv.program);
    cmd.args([
        "pip",
        "compile",
        "-",
        "--no-deps",
        "--no-header",
        "--no-annotate",
        "--quiet",
        "--python",
    ])
    .arg(&python)
    .env("UV_NO_CONFIG", "1")
    .env("UV_NATIVE_TLS", "1")
    .env("NO_COLOR", "1");
    let (ok, out, err) =
        query(&mut cmd, &format!("{requirement}\n")).map_err(|e| format!("uv: {e}"))?;
    if !ok {
        return Err(uv_reason(&err));
    }
    let want = spec.normalized();
    out.lines()
        .filter_map(|l| l.trim().split_once("=="))
        .find(|(n, _)| normalize(n.split('[').next().unwrap_or(n)) == want)
        .map(|(_, v)| v.trim().to_string())
        .filter(|v| exact_version(v))
        .ok_or_else(|| format!("uv printed no version: {}", printable_short(&out)))
}

/// uv's reason for a failed resolution, in a line: `cause: Because there is no version of
/// X==9 and you require X==9, we can conclude that your requirements are unsatisfiable.`
/// becomes `there is no version of X==9`.
fn uv_reason(stderr: &str) -> String {
    let text: Vec<&str> = stderr
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let cause = text
        .iter()
        .find_map(|l| l.strip_prefix("cause:").or_else(|| l.strip_prefix("╰─▶")))
        .map(str::trim);
    match cause {
        Some(c) => {
            let c = c.strip_prefix("Because ").unwrap_or(c);
            let c = c
                .split(", we can conclude")
                .next()
                .unwrap_or(c)
                .split(" and you require")
                .next()
                .unwrap_or(c);
            printable_short(c)
        }
        None => meaningful_line(stderr),
    }
}

fn printable_short(s: &str) -> String {
    glassbox_model::truncate(&glassbox_model::printable(s.trim()), 300)
}

/// The line of an installer's (or a registry query's) output that says what went wrong: npm's
/// first `npm error` line that is not its boilerplate (the log's location, the code, the
/// path), uv's reason under its `×` headline, pip's `ERROR:` line; else the last line.
pub fn meaningful_line(text: &str) -> String {
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let npm: Vec<&str> = lines
        .iter()
        .filter_map(|l| {
            l.strip_prefix("npm error")
                .or_else(|| l.strip_prefix("npm ERR!"))
                .map(str::trim)
                .filter(|l| !npm_boilerplate(l) && !noise(l))
        })
        .collect();
    // A script's own output comes first (`**INFO** Skipping Firefox download`): its error
    // line, where it has one, says why.
    let says_error = |l: &&&str| l.to_ascii_lowercase().contains("error");
    if let Some(l) = npm.iter().find(says_error).or(npm.first()) {
        return printable_short(l);
    }
    if let Some(l) = lines
        .iter()
        .rev()
        .find_map(|l| l.strip_prefix("╰─▶").or_else(|| l.strip_prefix("cause:")))
    {
        return uv_reason(&format!("cause: {l}"));
    }
    if let Some(l) = lines
        .iter()
        .find(|l| l.starts_with("ERROR:") || l.starts_with("error:") || l.starts_with('×'))
    {
        return printable_short(l);
    }
    lines.last().map(|l| printable_short(l)).unwrap_or_default()
}

/// A line of a stack trace or of a dumped object's brackets: no reason in it.
fn noise(l: &str) -> bool {
    let t = l.trim();
    t.starts_with("at ") || t.chars().all(|c| "{}[](),;".contains(c))
}

/// npm's lines around an error that say nothing of it.
fn npm_boilerplate(l: &str) -> bool {
    const NOISE: &[&str] = &[
        "A complete log of this run",
        "Log files were not written",
        "You can rerun the command",
        "code ",
        "path ",
        "errno ",
        "syscall ",
        "signal ",
        "command failed",
        "command sh -c",
        "command /",
        "404 Note that you can also install",
        "404 tarball, folder, http url",
        "Note that you can also install",
        "tarball, folder, http url",
    ];
    l.is_empty() || l == "404" || NOISE.iter().any(|n| l.starts_with(n))
}

/// The last `n` lines of `text` that say something (npm's boilerplate left out), each
/// printable and short.
pub fn last_lines(text: &str, n: usize) -> Vec<String> {
    let says_something = |l: &&str| {
        let t = l.trim();
        let npm = t
            .strip_prefix("npm error")
            .or_else(|| t.strip_prefix("npm ERR!"));
        let said = npm.unwrap_or(t).trim();
        !t.is_empty() && !noise(said) && !npm.is_some_and(|rest| npm_boilerplate(rest.trim()))
    };
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim_end)
        .filter(says_something)
        .collect();
    lines[lines.len().saturating_sub(n)..]
        .iter()
        .map(|l| printable_short(l))
        .collect()
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
        extras: Vec::new(),
    })
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
    std::fs::write(&path, text).map_err(|source| Error::Write { path, source })
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

/// How `package` at `exact` is installed into `dir`, with `install_env` (`--install-env`:
/// the installer's alone, never the server's) last.
///
/// The installers are told not to read the user's configuration (`~/.npmrc`,
/// `pip.conf`, `.netrc`): those are planted secrets, and reading them is left to whatever
/// else runs during the install (a lifecycle script), where it is evidence.
pub fn installer(
    package: &Package,
    exact: &Exact,
    dir: &Path,
    install_env: &[(String, String)],
) -> Result<Installer, Error> {
    let spec = &package.spec;
    let d = dir.to_string_lossy().into_owned();
    let mut env: Vec<(String, String)> = PASSED_THROUGH
        .iter()
        .filter_map(|k| std::env::var(k).ok().map(|v| (k.to_string(), v)))
        .collect();
    let mut extra_ro = Vec::new();
    let with = package
        .with
        .iter()
        .zip(&exact.with)
        .map(|(w, v)| w.requirement(Some(v)));
    let command: Vec<String> = match spec.registry {
        Registry::Npm => {
            env.push(("NPM_CONFIG_USERCONFIG".into(), "/dev/null".into()));
            env.push(("NPM_CONFIG_CACHE".into(), "/tmp/npm-cache".into()));
            env.push(("NPM_CONFIG_UPDATE_NOTIFIER".into(), "false".into()));
            let npm = crate::target::resolve(&["npm".into()], dir)?;
            extra_ro.extend(npm.extra_ro);
            let mut c = vec![
                npm.program.to_string_lossy().into_owned(),
                "install".into(),
                "--no-audit".into(),
                "--no-fund".into(),
                "--prefix".into(),
                d.clone(),
            ];
            c.extend(package.installer_args.iter().cloned());
            c.push(match &spec.tarball {
                Some(t) => {
                    extra_ro.push(t.clone());
                    t.to_string_lossy().into_owned()
                }
                None => spec.requirement(Some(&exact.version)),
            });
            c.extend(with);
            c
        }
        Registry::Pypi => {
            env.push(("PIP_CONFIG_FILE".into(), "/dev/null".into()));
            env.push(("PIP_NO_INPUT".into(), "1".into()));
            env.push(("NETRC".into(), "/dev/null".into()));
            env.push(("UV_NO_CONFIG".into(), "1".into()));
            env.push(("UV_CACHE_DIR".into(), "/tmp/uv-cache".into()));
            // The machine's certificate store (the registry may sit behind its own CA).
            env.push(("UV_NATIVE_TLS".into(), "1".into()));
            let py = package.interpreter(dir)?;
            extra_ro.extend(py.extra_ro);
            let python = py.program.to_string_lossy().into_owned();
            let mut reqs = vec![spec.requirement(Some(&exact.version))];
            reqs.extend(with);
            match crate::target::resolve(&["uv".into()], dir) {
                Ok(uv) => {
                    extra_ro.extend(uv.extra_ro);
                    let uv = uv.program.to_string_lossy().into_owned();
                    // Two steps, one command line: positional parameters, never pasted
                    // into the script.
                    let mut c: Vec<String> = vec![
                        "/bin/sh".into(),
                        "-c".into(),
                        r#"uv="$1" py="$2" d="$3"; shift 3; "$uv" venv --python "$py" "$d/venv" && "$uv" pip install --python "$d/venv/bin/python" "$@""#.into(),
                        "sh".into(),
                        uv,
                        python,
                        d.clone(),
                    ];
                    c.extend(reqs);
                    c
                }
                Err(_) => {
                    let mut c: Vec<String> = vec![
                        "/bin/sh".into(),
                        "-c".into(),
                        r#"py="$1" d="$2"; shift 2; "$py" -m venv "$d/venv" && "$d/venv/bin/python" -m pip install --no-input "$@""#
                            .into(),
                        "sh".into(),
                        python,
                        d.clone(),
                    ];
                    c.extend(reqs);
                    c
                }
            }
        }
    };
    for (k, v) in install_env {
        env.retain(|(n, _)| n != k);
        env.push((k.clone(), v.clone()));
    }
    Ok(Installer {
        command: command.into_iter().map(OsString::from).collect(),
        env,
        extra_ro,
    })
}

/// The server's command line in an installed folder: the package's program with `args`, and
/// the program's name.
///
/// A program the launcher named is looked up by that exact name among the install's programs
/// (`node_modules/.bin`, `venv/bin`), as the launcher would find it; otherwise npm: the
/// package's `bin` (its only one, or the one named like the package); PyPI: the console script
/// named like the package (PEP 503: `-`, `_` and `.` alike), or the only one it installed.
pub fn entry_command(
    package: &Package,
    dir: &Path,
    args: &[OsString],
) -> Result<(Vec<OsString>, String), Error> {
    let spec = &package.spec;
    let bin = match spec.registry {
        Registry::Npm => dir.join("node_modules/.bin"),
        Registry::Pypi => dir.join("venv/bin"),
    };
    let name = match &package.program {
        Some(p) => {
            let found = !p.contains('/')
                && !p.starts_with('.')
                && std::fs::metadata(bin.join(p)).is_ok_and(|m| m.is_file());
            if !found {
                let mut have = programs(spec.registry, &bin);
                have.sort();
                return Err(Error::Install(format!(
                    "{} installed no program named {p:?} ({})",
                    package.display(),
                    match have.is_empty() {
                        true => "it installed none".to_string(),
                        false => format!("it has: {}", have.join(", ")),
                    }
                )));
            }
            p.clone()
        }
        None => match spec.registry {
            Registry::Npm => match npm_bin(spec, dir)? {
                NpmEntry::Bin(name) => name,
                NpmEntry::Main(main) => {
                    let mut cmd = vec![OsString::from("node"), main.into_os_string()];
                    cmd.extend(args.iter().cloned());
                    return Ok((cmd, "node".into()));
                }
            },
            Registry::Pypi => pypi_script(spec, &bin)?,
        },
    };
    let mut cmd = vec![bin.join(&name).into_os_string()];
    cmd.extend(args.iter().cloned());
    Ok((cmd, name))
}

/// The programs in an install's `bin` folder (a venv's interpreter and activation scripts
/// left out).
fn programs(registry: Registry, bin: &Path) -> Vec<String> {
    let mut out: Vec<String> = std::fs::read_dir(bin)
        .into_iter()
        .flatten()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| {
            registry == Registry::Npm
                || !(n.starts_with("python")
                    || n.starts_with("pip")
                    || n.starts_with("activate")
                    || n.starts_with("Activate")
                    || n.starts_with("deactivate"))
        })
        .collect();
    out.sort();
    out
}

/// What starts an npm package that was not told which program to run.
enum NpmEntry {
    /// A program of its `bin`, by the name npm links it under in `node_modules/.bin`.
    Bin(String),
    /// No `bin`: its `main` file (or `index.js`), run with Node as `node FILE`, which is what
    /// a README's `node node_modules/PKG/index.js` says.
    Main(PathBuf),
}

/// The name npm links a `bin` key under: its last path component (`npm-normalize-package-bin`
/// takes the basename of a key, `\` and `:` read as `/`), so `{"@scope/tool": "cli.js"}` is
/// `.bin/tool`; `None` for a key that leaves nothing.
fn npm_link_name(key: &str) -> Option<String> {
    let key = key.replace(['\\', ':'], "/");
    let base = key.rsplit('/').next().unwrap_or("");
    (!base.is_empty() && base != "." && base != "..").then(|| base.to_string())
}

/// The program of an installed npm package (see [`NpmEntry`]). With several programs, the
/// first of: the one named like the package (unscoped), the only one whose name says `mcp`,
/// the one whose name says `server`, then the first by name (package.json's order is not
/// kept); the manifest records which ran.
fn npm_bin(spec: &PackageSpec, dir: &Path) -> Result<NpmEntry, Error> {
    let root = dir.join("node_modules").join(&spec.name);
    let manifest = root.join("package.json");
    let text = std::fs::read(&manifest)
        .map_err(|e| Error::Install(format!("{}: {e}", manifest.display())))?;
    let pkg: serde_json::Value = serde_json::from_slice(&text)
        .map_err(|e| Error::Install(format!("{}: {e}", manifest.display())))?;
    let unscoped = spec.name.rsplit('/').next().unwrap_or(&spec.name);
    let mut names: Vec<String> = match pkg.get("bin") {
        Some(serde_json::Value::String(_)) => npm_link_name(unscoped).into_iter().collect(),
        Some(serde_json::Value::Object(m)) => m.keys().filter_map(|k| npm_link_name(k)).collect(),
        _ => Vec::new(),
    };
    names.sort();
    names.dedup();
    if names.is_empty() {
        return npm_main(spec, &root, &pkg).map(NpmEntry::Main);
    }
    let says = |word: &str| {
        let with: Vec<&String> = names.iter().filter(|n| n.contains(word)).collect();
        match with.as_slice() {
            [one] => Some((*one).clone()),
            _ => None,
        }
    };
    let name = names
        .iter()
        .find(|n| n.as_str() == unscoped)
        .cloned()
        .or_else(|| says("mcp"))
        .or_else(|| says("server"))
        .unwrap_or_else(|| names[0].clone());
    Ok(NpmEntry::Bin(name))
}

/// The file a package with no `bin` starts from: its `main` (as Node resolves it: the file,
/// with `.js`, or a folder's `index.js`), or `index.js`; only inside the package.
fn npm_main(spec: &PackageSpec, root: &Path, pkg: &serde_json::Value) -> Result<PathBuf, Error> {
    let main = pkg
        .get("main")
        .and_then(|m| m.as_str())
        .unwrap_or("index.js");
    let rel = Path::new(main);
    let inside = rel.components().all(|c| {
        matches!(
            c,
            std::path::Component::Normal(_) | std::path::Component::CurDir
        )
    });
    let candidates = [
        root.join(rel),
        root.join(format!("{main}.js")),
        root.join(rel).join("index.js"),
    ];
    let found = inside
        .then(|| candidates.into_iter().find(|p| p.is_file()))
        .flatten();
    found.ok_or_else(|| {
        Error::Install(format!(
            "{} declares no executable (package.json has no \"bin\") and has no main file \
             to run ({main:?})",
            spec.name
        ))
    })
}

fn pypi_script(spec: &PackageSpec, bin: &Path) -> Result<String, Error> {
    if !bin.is_dir() {
        return Err(Error::Install(format!("{}: no such folder", bin.display())));
    }
    let want = spec.normalized();
    let scripts = programs(Registry::Pypi, bin);
    if let Some(s) = scripts.iter().find(|s| normalize(s) == want) {
        return Ok(s.clone());
    }
    match scripts.as_slice() {
        [one] => Ok(one.clone()),
        [] => Err(Error::Install(format!(
            "{} installed no console script",
            spec.name
        ))),
        many => Err(Error::Install(format!(
            "{} installed several console scripts ({}); none is named like the package: name \
             one (uvx --from {} NAME)",
            spec.name,
            many.join(", "),
            spec.name
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
        let exact = Exact {
            version: v.clone(),
            with: vec![],
        };
        let i = installer(&s.clone().into(), &exact, &dir.join("install"), &[]).unwrap();
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
    fn the_line_that_says_why_an_install_failed() {
        let puppeteer = "npm error code 1
npm error path /x/node_modules/puppeteer
npm error command failed
npm error command sh -c node install.mjs
npm error **INFO** Skipping Firefox download as instructed.
npm error Error: ERROR: Failed to set up chrome v131.0.6778.204! Set \"PUPPETEER_SKIP_DOWNLOAD\" env variable to skip download.
npm error     at downloadBrowser (file:///x/install.js:26:15)
npm error   [cause]: Error: Client network socket disconnected before secure TLS connection was established
npm error       at TLSSocket.onConnectEnd (node:_tls_wrap:1752:19) {
npm error     code: 'ECONNRESET',
npm error   }
npm error }
npm error A complete log of this run can be found in: /tmp/npm-cache/_logs/x-debug-0.log
";
        assert!(
            meaningful_line(puppeteer).starts_with("Error: ERROR: Failed to set up chrome"),
            "{}",
            meaningful_line(puppeteer)
        );
        // The last lines that say something: no stack frames, brackets, npm's boilerplate.
        assert_eq!(
            last_lines(puppeteer, 3),
            [
                "npm error Error: ERROR: Failed to set up chrome v131.0.6778.204! Set \"PUPPETEER_SKIP_DOWNLOAD\" env variable to skip download.",
                "npm error   [cause]: Error: Client network socket disconnected before secure TLS connection was established",
                "npm error     code: 'ECONNRESET',",
            ]
        );
        let e404 = "npm error code E404
npm error 404 Not Found - GET https://registry.npmjs.org/nope - Not found
npm error 404
npm error 404  'nope@*' is not in this registry.
npm error A complete log of this run can be found in: /x.log";
        assert_eq!(
            meaningful_line(e404),
            "404 Not Found - GET https://registry.npmjs.org/nope - Not found"
        );
        let uv = "  × No solution found when resolving dependencies:
  ╰─▶ Because there is no version of gone==9 and you require gone==9, we can conclude that your requirements are unsatisfiable.";
        assert_eq!(meaningful_line(uv), "there is no version of gone==9");
        let pip = "Collecting x\nERROR: Could not find a version that satisfies the requirement x==9\nERROR: No matching distribution found for x==9\n";
        assert_eq!(
            meaningful_line(pip),
            "ERROR: Could not find a version that satisfies the requirement x==9"
        );
        assert_eq!(meaningful_line("one\ntwo\n"), "two");
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
        let s: Package = spec("npm:@scope/tool@1.0.0").into();
        let (cmd, name) = entry_command(&s, &dir, &["/data".into()]).unwrap();
        assert_eq!(cmd[0], dir.join("node_modules/.bin/tool").into_os_string());
        assert_eq!(cmd[1], "/data");
        assert_eq!(name, "tool");
        // Several, none named like the package: the only one that says mcp, then server,
        // then the first by name; a scoped key is linked under its last component.
        for (bin, want) in [
            (r#"{"tool-cli":"a.js","tool-mcp":"b.js"}"#, "tool-mcp"),
            (r#"{"cli":"a.js","tool-server":"b.js"}"#, "tool-server"),
            (r#"{"b-cli":"a.js","a-cli":"b.js"}"#, "a-cli"),
            (r#"{"@scope/tool":"a.js"}"#, "tool"),
            (r#"{"@scope/other":"a.js"}"#, "other"),
        ] {
            std::fs::write(
                pkg.join("package.json"),
                format!(r#"{{"name":"@scope/tool","bin":{bin}}}"#),
            )
            .unwrap();
            let (_, name) = entry_command(&s, &dir, &[]).unwrap();
            assert_eq!(name, want, "{bin}");
        }
        // A string `bin` of a scoped package is linked under the unscoped name.
        std::fs::write(
            pkg.join("package.json"),
            r#"{"name":"@scope/tool","bin":"./dist/cli.js"}"#,
        )
        .unwrap();
        assert_eq!(entry_command(&s, &dir, &[]).unwrap().1, "tool");
        // No `bin`: its main, with Node; none to be found (or one outside it) is an error.
        std::fs::write(pkg.join("package.json"), r#"{"name":"@scope/tool"}"#).unwrap();
        let e = entry_command(&s, &dir, &[]).unwrap_err().to_string();
        assert!(
            e.contains("no executable") && e.contains("no main file"),
            "{e}"
        );
        std::fs::create_dir_all(pkg.join("dist")).unwrap();
        std::fs::write(pkg.join("dist/server.js"), "").unwrap();
        std::fs::write(
            pkg.join("package.json"),
            r#"{"name":"@scope/tool","main":"dist/server"}"#,
        )
        .unwrap();
        let (cmd, name) = entry_command(&s, &dir, &["--stdio".into()]).unwrap();
        assert_eq!(name, "node");
        assert_eq!(
            cmd,
            vec![
                OsString::from("node"),
                pkg.join("dist/server.js").into_os_string(),
                "--stdio".into()
            ]
        );
        std::fs::write(
            pkg.join("package.json"),
            r#"{"name":"@scope/tool","main":"../../../etc/passwd"}"#,
        )
        .unwrap();
        assert!(entry_command(&s, &dir, &[]).is_err());
        std::fs::write(pkg.join("package.json"), r#"{"name":"@scope/tool"}"#).unwrap();
        // A program the launcher named is found by its exact name in `.bin`, or refused
        // with what there is.
        std::fs::create_dir_all(dir.join("node_modules/.bin")).unwrap();
        std::fs::write(dir.join("node_modules/.bin/tool-admin"), "").unwrap();
        let named = Package {
            program: Some("tool-admin".into()),
            ..s.clone()
        };
        let (cmd, _) = entry_command(&named, &dir, &[]).unwrap();
        assert_eq!(
            cmd[0],
            dir.join("node_modules/.bin/tool-admin").into_os_string()
        );
        let missing = Package {
            program: Some("tool-x".into()),
            ..s
        };
        let e = entry_command(&missing, &dir, &[]).unwrap_err().to_string();
        assert!(
            e.contains("no program named \"tool-x\"") && e.contains("tool-admin"),
            "{e}"
        );

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
        let p: Package = spec("pypi:mcp_server_time==1.0").into();
        let (cmd, _) = entry_command(&p, &dir, &[]).unwrap();
        assert_eq!(
            cmd[0],
            dir.join("venv/bin/mcp-server-time").into_os_string()
        );
        // PEP 503: `.`, `_` and `-` alike (awslabs.aws-documentation-mcp-server).
        std::fs::write(dir.join("venv/bin/awslabs.docs-mcp"), "").unwrap();
        let p: Package = spec("pypi:awslabs-docs-mcp==1.0").into();
        let (cmd, name) = entry_command(&p, &dir, &[]).unwrap();
        assert_eq!(name, "awslabs.docs-mcp");
        assert_eq!(
            cmd[0],
            dir.join("venv/bin/awslabs.docs-mcp").into_os_string()
        );
        let _ = std::fs::remove_dir_all(&dir);
    }
}
