//! What the audited entry names itself, recorded as it was given
//! (`manifest.network.names`): which destinations those names explain is decided by the
//! checks (`glassbox_checks::explain`), so that rule is locked with them and `recheck`
//! derives it again from an old bundle.
//!
//! | source (`by`) | names |
//! |---|---|
//! | `environment`: a plain value of the entry's environment (`GITLAB_API_URL=https://gitlab.com/api/v4`) | each URL's host, or the value itself when it is a host (`DB_HOST=db.example`, `bare`) |
//! | `arguments`: the server's arguments | each URL's host |
//! | `server-json`: its `server.json` (`websiteUrl`, `repository`, `remotes`, variable descriptions) | each URL's host |
//! | `npm`, `pypi`: the installed package's own metadata (npm `homepage`, `repository`, `bugs`; PyPI `Home-page`, `Project-URL`) | each URL's host |
//!
//! The declared secrets' documented hosts are in the manifest already (their honeytokens),
//! the user's `--allow-host` and each call's own input too. The package's name is not a
//! name of its destinations: its author chose it.

use crate::install::Registry;
use glassbox_model::hosts::{host_of, urls_in};
use glassbox_model::EntryName;
use std::path::Path;

/// Most names one entry records: a hostile package's metadata cannot grow the manifest
/// without bound.
const MAX_NAMES: usize = 256;

/// The hosts a value names, each with whether it is the value itself: its URLs' hosts, or
/// the value when it is a host.
fn hosts_of_value(v: &str) -> Vec<(String, bool)> {
    let urls = urls_in(v);
    if urls.is_empty() {
        return host_of(v).map(|h| (h, true)).into_iter().collect();
    }
    urls.into_iter().map(|(_, h)| (h, false)).collect()
}

/// The names the entry gives, in the order the report prefers its reasons: its environment,
/// its arguments, its `server.json`, its package's metadata.
#[derive(Debug, Default)]
pub struct Names(Vec<EntryName>);

impl Names {
    /// Nothing named yet.
    pub fn new() -> Names {
        Names(Vec::new())
    }

    fn add(&mut self, by: &str, field: &str, host: String, bare: bool) {
        let field = glassbox_model::truncate(field, 80);
        let known = self
            .0
            .iter()
            .any(|x| x.host == host && x.by == by && x.field == field);
        if self.0.len() < MAX_NAMES && !known {
            self.0.push(EntryName {
                by: by.to_string(),
                field,
                host,
                bare,
            });
        }
    }

    /// The plain values of the entry's environment.
    pub fn environment<'a>(&mut self, env: impl IntoIterator<Item = (&'a str, &'a str)>) {
        for (name, value) in env {
            for (h, bare) in hosts_of_value(value) {
                self.add("environment", name, h, bare);
            }
        }
    }

    /// The server's arguments.
    pub fn arguments<'a>(&mut self, args: impl IntoIterator<Item = &'a str>) {
        // URLs only: a bare argument like `server.py` is a file, whatever its suffix.
        for a in args {
            for (_, h) in urls_in(a) {
                self.add("arguments", "", h, false);
            }
        }
    }

    /// What a `server.json` named for the entry.
    pub fn named(&mut self, names: &[EntryName]) {
        for n in names {
            self.add(&n.by, &n.field, n.host.clone(), n.bare);
        }
    }

    /// The installed package's own metadata, read from its install folder `dir`.
    pub fn package(&mut self, registry: Registry, name: &str, dir: &Path) {
        let by = match registry {
            Registry::Npm => "npm",
            Registry::Pypi => "pypi",
        };
        for (field, url) in package_urls(registry, name, dir) {
            for (h, bare) in hosts_of_value(&url) {
                self.add(by, &field, h, bare);
            }
        }
    }

    /// The names, for `manifest.network.names`.
    pub fn into_vec(self) -> Vec<EntryName> {
        self.0
    }
}

/// `server.json`'s own names for an entry: `websiteUrl`, `repository.url`, the remotes' URLs
/// and the URLs in its variables' descriptions.
pub fn server_json_names(v: &serde_json::Value) -> Vec<EntryName> {
    let mut out = Names::new();
    let s = |v: Option<&serde_json::Value>| v.and_then(|x| x.as_str()).map(str::to_string);
    let mut add = |text: Option<String>, what: &str| {
        for (h, bare) in text.as_deref().map(hosts_of_value).unwrap_or_default() {
            out.add("server-json", what, h, bare);
        }
    };
    add(s(v.get("websiteUrl")), "websiteUrl");
    add(
        s(v.get("repository").and_then(|r| r.get("url"))),
        "repository",
    );
    for r in v
        .get("remotes")
        .and_then(|r| r.as_array())
        .into_iter()
        .flatten()
    {
        add(s(r.get("url")), "a remote's url");
    }
    for p in v
        .get("packages")
        .and_then(|r| r.as_array())
        .into_iter()
        .flatten()
    {
        for e in p
            .get("environmentVariables")
            .and_then(|r| r.as_array())
            .into_iter()
            .flatten()
        {
            add(s(e.get("description")), "a variable's description");
        }
    }
    out.into_vec()
}

/// The URLs of an installed package's metadata, each with the field it came from.
fn package_urls(registry: Registry, name: &str, dir: &Path) -> Vec<(String, String)> {
    let mut out = Vec::new();
    match registry {
        Registry::Npm => {
            let path = dir.join("node_modules").join(name).join("package.json");
            let Some(v) = std::fs::read(path)
                .ok()
                .and_then(|b| serde_json::from_slice::<serde_json::Value>(&b).ok())
            else {
                return out;
            };
            for field in ["homepage", "repository", "bugs"] {
                let url = match v.get(field) {
                    Some(serde_json::Value::String(s)) => Some(s.clone()),
                    Some(o) => o.get("url").and_then(|u| u.as_str()).map(str::to_string),
                    None => None,
                };
                if let Some(url) = url {
                    out.push((field.to_string(), npm_url(&url)));
                }
            }
        }
        Registry::Pypi => {
            let want = pypi_normal(name);
            let lib = dir.join("venv/lib");
            for py in std::fs::read_dir(lib).into_iter().flatten().flatten() {
                let site = py.path().join("site-packages");
                for e in std::fs::read_dir(site).into_iter().flatten().flatten() {
                    let n = e.file_name().to_string_lossy().into_owned();
                    let Some(stem) = n.strip_suffix(".dist-info") else {
                        continue;
                    };
                    let dist = stem.rsplit_once('-').map_or(stem, |(d, _)| d);
                    if pypi_normal(dist) != want {
                        continue;
                    }
                    let Ok(text) = std::fs::read_to_string(e.path().join("METADATA")) else {
                        continue;
                    };
                    out.extend(metadata_urls(&text));
                }
            }
        }
    }
    out
}

/// A PyPI name as dist-info folders compare: lower-case, runs of `-_.` as `_`.
fn pypi_normal(name: &str) -> String {
    let mut out = String::new();
    for c in name.chars() {
        if matches!(c, '-' | '_' | '.') {
            if !out.ends_with('_') {
                out.push('_');
            }
        } else {
            out.push(c.to_ascii_lowercase());
        }
    }
    out
}

/// The URLs of a core metadata file's headers (`Home-page`, `Project-URL: Label, URL`,
/// `Download-URL`), up to its first blank line (the description).
fn metadata_urls(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    for line in text.lines() {
        if line.is_empty() {
            break;
        }
        let Some((k, v)) = line.split_once(':') else {
            continue;
        };
        let v = v.trim();
        match k {
            "Home-page" | "Download-URL" => out.push((k.to_string(), v.to_string())),
            "Project-URL" => {
                let (label, url) = v.split_once(',').unwrap_or(("", v));
                out.push((
                    format!("Project-URL {}", label.trim()),
                    url.trim().to_string(),
                ));
            }
            _ => {}
        }
    }
    out
}

/// npm's shorthands as URLs: `github:user/repo` and `user/repo` (GitHub), `gitlab:`,
/// `bitbucket:`, and `git@host:path`.
fn npm_url(s: &str) -> String {
    let s = s.trim();
    if s.contains("://") {
        return s.to_string();
    }
    if let Some(rest) = s.strip_prefix("git@") {
        let host = rest.split(':').next().unwrap_or("");
        return format!("ssh://{host}/");
    }
    for (prefix, host) in [
        ("github:", "github.com"),
        ("gitlab:", "gitlab.com"),
        ("bitbucket:", "bitbucket.org"),
        ("gist:", "gist.github.com"),
    ] {
        if s.starts_with(prefix) {
            return format!("https://{host}/");
        }
    }
    // `user/repo`: GitHub.
    if s.split('/').count() == 2 && !s.contains(':') {
        return "https://github.com/".to_string();
    }
    s.to_string()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn hosts(names: &[EntryName]) -> Vec<(&str, &str, &str, bool)> {
        names
            .iter()
            .map(|n| (n.by.as_str(), n.field.as_str(), n.host.as_str(), n.bare))
            .collect()
    }

    #[test]
    fn values_name_their_urls_hosts_or_are_hosts() {
        assert_eq!(
            hosts_of_value("https://gitlab.com/api/v4"),
            [("gitlab.com".into(), false)]
        );
        assert_eq!(
            hosts_of_value("example.atlassian.net"),
            [("example.atlassian.net".into(), true)]
        );
        assert_eq!(
            hosts_of_value("db.example:5432"),
            [("db.example".into(), true)]
        );
        for v in ["true", "3.11", "./data", "/tmp/x.db", "info", "a.b_c"] {
            assert!(hosts_of_value(v).is_empty(), "{v}");
        }
    }

    #[test]
    fn the_package_metadata_names_are_kept_with_their_fields() {
        let dir = std::env::temp_dir().join(format!("gb-explain-{}", std::process::id()));
        let pkg = dir.join("node_modules/@vendor/mcp");
        std::fs::create_dir_all(&pkg).unwrap();
        std::fs::write(
            pkg.join("package.json"),
            r#"{"name":"@vendor/mcp","homepage":"https://docs.vendor.example/mcp",
                "repository":{"type":"git","url":"git+https://git.forge.example/v/mcp.git"},
                "bugs":"github:vendor/mcp"}"#,
        )
        .unwrap();
        let site = dir.join("venv/lib/python3.11/site-packages/Vendor_Tool-1.0.dist-info");
        std::fs::create_dir_all(&site).unwrap();
        std::fs::write(
            site.join("METADATA"),
            "Metadata-Version: 2.1\nName: vendor-tool\nHome-page: https://www.tool.example\n\
             Project-URL: Documentation, https://docs.other.example/x\n\nBody: https://no.example\n",
        )
        .unwrap();
        let mut e = Names::new();
        e.package(Registry::Npm, "@vendor/mcp", &dir);
        e.package(Registry::Pypi, "vendor.tool", &dir);
        let got = e.into_vec();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(
            hosts(&got),
            [
                ("npm", "homepage", "docs.vendor.example", false),
                ("npm", "repository", "git.forge.example", false),
                ("npm", "bugs", "github.com", false),
                ("pypi", "Home-page", "www.tool.example", false),
                (
                    "pypi",
                    "Project-URL Documentation",
                    "docs.other.example",
                    false
                ),
            ]
        );
    }

    #[test]
    fn the_entry_names_its_environment_and_arguments() {
        let mut e = Names::new();
        e.environment([
            ("GITLAB_API_URL", "https://gitlab.com/api/v4"),
            ("DB_HOST", "db.example"),
            ("LOG_LEVEL", "debug"),
        ]);
        e.arguments([
            "--api-url=https://api.vendor.example/v1",
            "--verbose",
            "x.py",
        ]);
        assert_eq!(
            hosts(&e.into_vec()),
            [
                ("environment", "GITLAB_API_URL", "gitlab.com", false),
                ("environment", "DB_HOST", "db.example", true),
                ("arguments", "", "api.vendor.example", false),
            ]
        );
    }

    #[test]
    fn server_json_names_its_sites_remotes_and_variables() {
        let v: serde_json::Value = serde_json::from_str(
            r#"{"websiteUrl":"https://vendor.example","repository":{"url":"https://github.com/v/x"},
                "remotes":[{"type":"streamable-http","url":"https://mcp.vendor.example/mcp"}],
                "packages":[{"environmentVariables":[{"name":"K","description":"From https://console.vendor.example/keys"}]}]}"#,
        )
        .unwrap();
        let hosts: Vec<String> = server_json_names(&v).into_iter().map(|e| e.host).collect();
        assert_eq!(
            hosts,
            [
                "vendor.example",
                "github.com",
                "mcp.vendor.example",
                "console.vendor.example"
            ]
        );
    }
}
