//! What the audited entry names itself, and so explains when the server reaches it
//! (`manifest.network.explained`, read by `unexplained-egress` and `denied-network-attempts`):
//!
//! | source | explains |
//! |---|---|
//! | a plain value of the entry's environment (`GITLAB_API_URL=https://gitlab.com/api/v4`) | each URL's host, or the value itself when it is a host (`DB_HOST=db.example`), and what is under it |
//! | the server's arguments | the same, per argument |
//! | a declared secret's documented hosts | those hosts, and what is under them |
//! | `server.json` (`websiteUrl`, `repository`, `remotes`, variable descriptions) | each URL's host, and what is under it |
//! | the package's own metadata (npm `homepage`, `repository`, `bugs`; PyPI `Home-page`, `Project-URL`) | each URL's registrable domain (`docs.vendor.example` → `vendor.example`, by the public suffix list), and what is under it |
//!
//! Each carries the words the report gives ("the package's homepage domain, vendor.example
//! (npm `homepage`)"). The user's `--allow-host` and the URL hosts of each call's own input
//! are read by the checks themselves. Explained is not trusted: a planted secret that goes
//! to an explained host is still judged by the service it is for (`canary-exfiltration`).

use crate::install::Registry;
use glassbox_checks::explain::{known_suffix, registrable, vendor_words};
use glassbox_model::{ExplainedHost, Honeytoken};
use std::path::Path;

/// Most destinations one entry explains: a hostile package's metadata cannot grow the
/// manifest without bound.
const MAX_EXPLAINED: usize = 256;

/// The scheme and host of every `scheme://[user@]host` URL in `text`, hosts lower-cased
/// (IPv6 without brackets).
pub fn urls_in(text: &str) -> Vec<(String, String)> {
    let mut out: Vec<(String, String)> = Vec::new();
    for (i, _) in text.match_indices("://") {
        let scheme: String = text[..i]
            .chars()
            .rev()
            .take_while(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'))
            .collect::<Vec<_>>()
            .into_iter()
            .rev()
            .collect();
        // `git+https`, `mongodb+srv`: the scheme is what comes after the last `+` that
        // starts a known one, or the whole.
        let scheme = scheme.to_ascii_lowercase();
        if scheme.is_empty() || !scheme.starts_with(|c: char| c.is_ascii_alphabetic()) {
            continue;
        }
        let rest = &text[i + 3..];
        let end = rest
            .find(|c: char| matches!(c, '/' | '?' | '#') || c.is_whitespace())
            .unwrap_or(rest.len());
        let authority = &rest[..end];
        let host_port = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
        if let Some(host) = host_of(host_port) {
            let item = (scheme, host);
            if !out.contains(&item) {
                out.push(item);
            }
        }
    }
    out
}

/// The host of `host[:port]` (or `[v6]:port`, a bare IP address) when it is one: a name of
/// at least two labels whose last is a word, or an IP address.
pub fn host_of(s: &str) -> Option<String> {
    let s = s.trim().trim_end_matches(['.', ',', ';', ')', '"', '\'']);
    if let Some(rest) = s.strip_prefix('[') {
        let (h, _) = rest.split_once(']')?;
        return h
            .parse::<std::net::Ipv6Addr>()
            .ok()
            .map(|ip| ip.to_string());
    }
    if let Ok(ip) = s.parse::<std::net::IpAddr>() {
        return Some(ip.to_string());
    }
    let host = match s.rsplit_once(':') {
        Some((h, p)) if p.parse::<u16>().is_ok() => h,
        Some(_) => return None,
        None => s,
    };
    if let Ok(ip) = host.parse::<std::net::Ipv4Addr>() {
        return Some(ip.to_string());
    }
    let host = host.trim_end_matches('.').to_ascii_lowercase();
    let labels: Vec<&str> = host.split('.').collect();
    let label_ok = |l: &&str| {
        !l.is_empty()
            && l.len() <= 63
            && l.chars().all(|c| c.is_ascii_alphanumeric() || c == '-')
            && !l.starts_with('-')
    };
    let last = labels.last()?;
    let word = last.len() >= 2 && last.chars().all(|c| c.is_ascii_alphabetic());
    (labels.len() >= 2 && host.len() <= 253 && labels.iter().all(label_ok) && word).then_some(host)
}

/// The hosts a value names: its URLs' hosts, or the value itself when it is a host whose
/// last label is a public suffix or a name reserved for documentation (`example`, `test`):
/// `db.example`, `example.atlassian.net`, but not `config.json`.
fn hosts_of_value(v: &str) -> Vec<String> {
    let urls = urls_in(v);
    if urls.is_empty() {
        return host_of(v)
            .filter(|h| {
                h.parse::<std::net::IpAddr>().is_ok() || {
                    let tld = h.rsplit('.').next().unwrap_or("");
                    matches!(tld, "example" | "test") || known_suffix(tld)
                }
            })
            .into_iter()
            .collect();
    }
    urls.into_iter().map(|(_, h)| h).collect()
}

/// What the entry explains, in the order the report prefers its reasons: its environment,
/// its arguments, its declared secrets' hosts, its `server.json`, its package's metadata.
#[derive(Debug, Default)]
pub struct Explained(Vec<ExplainedHost>);

impl Explained {
    /// Nothing explained yet.
    pub fn new() -> Explained {
        Explained(Vec::new())
    }

    fn add(&mut self, host: String, by: &str, why: String) {
        self.push(ExplainedHost {
            host,
            subdomains: true,
            by: by.to_string(),
            why,
            ..Default::default()
        });
    }

    fn push(&mut self, e: ExplainedHost) {
        let known = self
            .0
            .iter()
            .any(|x| x.host == e.host && x.label == e.label);
        if self.0.len() < MAX_EXPLAINED && !known {
            self.0.push(e);
        }
    }

    /// The words of the package's name (`@upstash/context7-mcp`: `upstash`, `context7`): a
    /// registrable domain whose first label is one is named like the package.
    pub fn package_name(&mut self, name: &str) {
        for w in vendor_words(name) {
            self.push(ExplainedHost {
                host: w,
                subdomains: true,
                label: true,
                by: "package-name".into(),
                why: format!(
                    "named like the package, {}",
                    glassbox_model::printable(&glassbox_model::truncate(name, 80))
                ),
            });
        }
    }

    /// The plain values of the entry's environment.
    pub fn environment<'a>(&mut self, env: impl IntoIterator<Item = (&'a str, &'a str)>) {
        for (name, value) in env {
            for h in hosts_of_value(value) {
                self.add(
                    h,
                    "environment",
                    format!(
                        "named in the entry's environment ({})",
                        glassbox_model::printable(&glassbox_model::truncate(name, 60))
                    ),
                );
            }
        }
    }

    /// The server's arguments.
    pub fn arguments<'a>(&mut self, args: impl IntoIterator<Item = &'a str>) {
        // URLs only: a bare argument like `server.py` is a file, whatever its suffix.
        for a in args {
            for (_, h) in urls_in(a) {
                self.add(
                    h,
                    "arguments",
                    "named in the server's arguments".to_string(),
                );
            }
        }
    }

    /// The documented hosts of the declared secrets (`env:NAME` honeytokens).
    pub fn secrets(&mut self, tokens: &[Honeytoken]) {
        for t in tokens {
            let Some(name) = t.path.strip_prefix("env:") else {
                continue;
            };
            for h in &t.hosts {
                if let Some(h) = host_of(h) {
                    self.add(
                        h,
                        "declared-secret",
                        format!(
                            "a documented host of the declared secret {}",
                            glassbox_model::printable(name)
                        ),
                    );
                }
            }
        }
    }

    /// What a `server.json` named for the entry (its `why` kept).
    pub fn named(&mut self, names: &[ExplainedHost]) {
        for n in names {
            self.push(n.clone());
        }
    }

    /// The installed package's own metadata, read from its install folder `dir`.
    pub fn package(&mut self, registry: Registry, name: &str, dir: &Path) {
        for (field, url) in package_urls(registry, name, dir) {
            for h in hosts_of_value(&url) {
                let domain = registrable(&h);
                let what = match field.as_str() {
                    "homepage" | "Home-page" => "homepage".to_string(),
                    "repository" => "repository".to_string(),
                    "bugs" => "issue tracker".to_string(),
                    other => format!("{} link", other.trim_start_matches("Project-URL ")),
                };
                let origin = match registry {
                    Registry::Npm => format!("npm `{field}`"),
                    Registry::Pypi => format!("PyPI `{field}`"),
                };
                let why = format!(
                    "the package's {} domain, {domain} ({origin})",
                    glassbox_model::printable(&glassbox_model::truncate(&what, 40))
                );
                self.add(domain, "package", why);
            }
        }
    }

    /// The explained hosts, for `manifest.network.explained`.
    pub fn into_vec(self) -> Vec<ExplainedHost> {
        self.0
    }
}

/// `server.json`'s own names for an entry: `websiteUrl`, `repository.url`, the remotes' URLs
/// and the URLs in its variables' descriptions.
pub fn server_json_names(v: &serde_json::Value) -> Vec<ExplainedHost> {
    let mut out = Explained::new();
    let s = |v: Option<&serde_json::Value>| v.and_then(|x| x.as_str()).map(str::to_string);
    let mut add = |text: Option<String>, what: &str| {
        for h in text.as_deref().map(hosts_of_value).unwrap_or_default() {
            out.add(
                h,
                "server-json",
                format!("named by its server.json ({what})"),
            );
        }
    };
    add(s(v.get("websiteUrl")), "`websiteUrl`");
    add(
        s(v.get("repository").and_then(|r| r.get("url"))),
        "`repository`",
    );
    for r in v
        .get("remotes")
        .and_then(|r| r.as_array())
        .into_iter()
        .flatten()
    {
        add(s(r.get("url")), "a remote's `url`");
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

    #[test]
    fn urls_and_hosts_are_read_from_values() {
        assert_eq!(
            urls_in("https://gitlab.com/api/v4"),
            [("https".into(), "gitlab.com".into())]
        );
        assert_eq!(
            urls_in("postgresql://user:pw@db.example:5432/app and mongodb+srv://m.example"),
            [
                ("postgresql".into(), "db.example".into()),
                ("mongodb+srv".into(), "m.example".into())
            ]
        );
        assert_eq!(urls_in("http://[2001:db8::1]:8080/x")[0].1, "2001:db8::1");
        assert_eq!(
            hosts_of_value("example.atlassian.net"),
            ["example.atlassian.net"]
        );
        assert_eq!(hosts_of_value("db.example:5432"), ["db.example"]);
        assert_eq!(hosts_of_value("203.0.113.5"), ["203.0.113.5"]);
        // Not hosts: words, versions, paths, secrets.
        for v in [
            "true",
            "3.11",
            "./data",
            "/tmp/x.db",
            "gbx_abc.def1",
            "info",
            "a.b_c",
            "config.json",
        ] {
            assert!(hosts_of_value(v).is_empty(), "{v}");
        }
    }

    #[test]
    fn package_hosts_explain_their_registrable_domain() {
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
        let mut e = Explained::new();
        e.package(Registry::Npm, "@vendor/mcp", &dir);
        e.package(Registry::Pypi, "vendor.tool", &dir);
        let got: Vec<(String, String)> =
            e.into_vec().into_iter().map(|x| (x.host, x.why)).collect();
        std::fs::remove_dir_all(&dir).unwrap();
        assert_eq!(
            got,
            [
                (
                    "vendor.example".into(),
                    "the package's homepage domain, vendor.example (npm `homepage`)".into()
                ),
                (
                    "forge.example".into(),
                    "the package's repository domain, forge.example (npm `repository`)".into()
                ),
                (
                    "github.com".into(),
                    "the package's issue tracker domain, github.com (npm `bugs`)".into()
                ),
                (
                    "tool.example".into(),
                    "the package's homepage domain, tool.example (PyPI `Home-page`)".into()
                ),
                (
                    "other.example".into(),
                    "the package's Documentation link domain, other.example (PyPI `Project-URL Documentation`)"
                        .into()
                ),
            ]
        );
    }

    #[test]
    fn the_entry_explains_its_environment_arguments_and_secrets() {
        let mut e = Explained::new();
        e.environment([
            ("GITLAB_API_URL", "https://gitlab.com/api/v4"),
            ("LOG_LEVEL", "debug"),
        ]);
        e.arguments(["--api-url=https://api.vendor.example/v1", "--verbose"]);
        e.secrets(&[Honeytoken {
            path: "env:WEATHER_KEY".into(),
            hosts: vec!["weather.example".into()],
            ..Default::default()
        }]);
        let got: Vec<(String, String)> =
            e.into_vec().into_iter().map(|x| (x.host, x.why)).collect();
        assert_eq!(
            got,
            [
                (
                    "gitlab.com".into(),
                    "named in the entry's environment (GITLAB_API_URL)".into()
                ),
                (
                    "api.vendor.example".into(),
                    "named in the server's arguments".into()
                ),
                (
                    "weather.example".into(),
                    "a documented host of the declared secret WEATHER_KEY".into()
                ),
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
