//! What explains a destination the server reached, and in what words the report says so:
//! the user's `--allow-host` (and, in the install run, the registry it relayed), what the
//! audited entry names itself ([`explained`], derived here from `manifest.network.names` as
//! the audit recorded them), a domain named like a declared secret (`api.search.brave.com`
//! for `BRAVE_API_KEY`: the user named the variable after its vendor, [`named_like`]), and,
//! during a call, a URL of that call's own input ([`Named::url_host_at`]).
//!
//! | what the entry names (`by`) | explains |
//! |---|---|
//! | a plain value of its environment (`GITLAB_API_URL=https://gitlab.com/api/v4`) | each URL's host, or the value itself when it is a host whose last label is a public suffix or a documentation name (`DB_HOST=db.example`), and what is under it |
//! | its arguments | each URL's host, and what is under it |
//! | a declared secret's documented hosts (its honeytoken's `hosts`) | those hosts, and what is under them |
//! | its `server.json` (`websiteUrl`, `repository`, `remotes`, variable descriptions) | each URL's host, and what is under it |
//! | its package's metadata as the registry publishes it (npm `homepage`, `repository`, `bugs`; PyPI `Home-page`, `Project-URL`) | each URL's registrable domain (`docs.vendor.example` → `vendor.example`), and what is under it |
//!
//! What the user configured or the registry published, never the package's own name: its
//! author chose it. A shared hosting domain (`amazonaws.com`, `googleapis.com`,
//! `windows.net`) explains only the provider's own endpoints there, never a tenant's name
//! under it (a bucket is someone's, [`tenant`]).
//!
//! `unexplained-egress` and `denied-network-attempts` flag only what nothing explains and
//! note the rest with its reason. Every name a flow carries must be explained (its DNS
//! question, the name its synthetic address was handed out for, its TLS SNI, its HTTP
//! `Host`): a connection to an explained name whose SNI or `Host` names another is not
//! explained. Explained is not trusted: `canary-exfiltration` judges a planted secret by the
//! service it is for, wherever it went.

use crate::named::{self, Named};
use crate::net::{self, Allow};
use glassbox_model::{EntryName, ExplainedHost, Manifest, NetworkMode};

/// Words of a variable's name that say what it is, not whose: `BRAVE_API_KEY` names Brave.
const GENERIC_WORDS: &[&str] = &[
    "api",
    "key",
    "keys",
    "token",
    "tokens",
    "secret",
    "secrets",
    "access",
    "personal",
    "auth",
    "oauth",
    "bot",
    "user",
    "app",
    "client",
    "password",
    "pass",
    "pat",
    "private",
    "public",
    "bearer",
    "session",
    "refresh",
    "credential",
    "credentials",
    "cred",
    "creds",
    "the",
    "mcp",
    "server",
    "service",
    "account",
    "default",
    "prod",
    "production",
    "dev",
    "test",
    "env",
    "url",
    "host",
    "base",
    "endpoint",
    "admin",
    "read",
    "write",
    "org",
    "team",
    "workspace",
    "project",
    "sk",
    "id",
    "signing",
    "webhook",
];

/// The registrable domain of `host` (its public suffix and one label more, by the public
/// suffix list: `api.search.brave.com` → `brave.com`, `a.b.co.uk` → `b.co.uk`), or the host
/// itself when it is an IP address or has none.
pub fn registrable(host: &str) -> String {
    if host.parse::<std::net::IpAddr>().is_ok() {
        return host.to_string();
    }
    psl::domain_str(host).unwrap_or(host).to_string()
}

/// Whether `tld` is a public suffix the list knows (`com`, `py`), not one it only assumes
/// (`json`, `txt`): a value like `config.json` is a file, not a host.
pub fn known_suffix(tld: &str) -> bool {
    psl::suffix(tld.as_bytes()).is_some_and(|s| s.is_known())
}

/// The words of a declared secret's name that may name its vendor (lower-case, at least 3
/// letters, [`GENERIC_WORDS`] aside): `BRAVE_API_KEY` → `brave`, `GITHUB_PERSONAL_ACCESS_TOKEN`
/// → `github`.
pub fn vendor_words(name: &str) -> Vec<String> {
    name.split(|c: char| !c.is_ascii_alphanumeric())
        .map(str::to_ascii_lowercase)
        .filter(|w| w.len() >= 3 && !GENERIC_WORDS.contains(&w.as_str()))
        .filter(|w| !w.chars().all(|c| c.is_ascii_digit()))
        .collect()
}

/// Vendors whose API is not at a domain named like them: a variable named after the vendor
/// (`GOOGLE_MAPS_API_KEY`) goes to these registrable domains too. Kept to vendors whose API
/// domains are documented and owned by them; on a shared hosting domain, only the provider's
/// own endpoints ([`tenant`]).
const VENDOR_DOMAINS: &[(&str, &[&str])] = &[
    ("google", &["googleapis.com"]),
    ("gemini", &["googleapis.com"]),
    ("github", &["githubusercontent.com"]),
    ("azure", &["azure.com", "windows.net", "microsoft.com"]),
    ("aws", &["amazonaws.com"]),
    ("huggingface", &["huggingface.co", "hf.co"]),
];

/// The top-level suffixes a vendor's own registrable domain is recognised under by its name
/// alone (`brave.com`, `exa.ai`, `sentry.io`, `firecrawl.dev`): the generic ones vendors' APIs
/// live under. The same label under another suffix (`brave.example`, a country's) is whoever
/// registered it there.
const VENDOR_SUFFIXES: &[&str] = &["com", "net", "org", "io", "ai", "dev", "co", "app"];

/// Providers whose own API endpoints sit among the names they rent out, and the shape of
/// those endpoints: one label before the domain (`maps.googleapis.com`,
/// `raw.githubusercontent.com`), or for AWS a service and a region too
/// (`sts.us-east-1.amazonaws.com`, `s3.amazonaws.com`).
const PROVIDER_ENDPOINTS: &[(&str, bool)] = &[
    ("amazonaws.com", true),
    ("googleapis.com", false),
    ("githubusercontent.com", false),
];

/// Whether `host` is a tenant's name on a shared hosting domain (`loot.s3.amazonaws.com`,
/// `x.blob.core.windows.net`, `someone.herokuapp.com`, `app.vercel.app`), not the provider's
/// own: a name the provider rents to anyone says nothing about whose it is. Shared hosting
/// domains are those the public suffix list's private section lists (a bucket's, a site's,
/// a function's, a machine's names are under them); the provider's own endpoints among them
/// are known by their shape ([`PROVIDER_ENDPOINTS`]).
pub(crate) fn tenant(host: &str) -> bool {
    let host = host.trim_end_matches('.');
    if host.parse::<std::net::IpAddr>().is_ok() {
        return false;
    }
    for (domain, regional) in PROVIDER_ENDPOINTS {
        let Some(left) = host.strip_suffix(domain).and_then(|l| l.strip_suffix('.')) else {
            continue;
        };
        let labels: Vec<&str> = left.split('.').collect();
        return match labels.as_slice() {
            [one] => one.starts_with("ec2-"),
            [_, region] => !(*regional && is_region(region)),
            _ => true,
        };
    }
    psl::suffix(host.as_bytes()).and_then(|s| s.typ()) == Some(psl::Type::Private)
}

/// Whether `host` is a provider's endpoint that serves its tenants by path
/// (`s3.amazonaws.com/<bucket>`, `s3.us-east-1.amazonaws.com`, `s3-us-west-2.amazonaws.com`,
/// `storage.googleapis.com/<bucket>`): what a request there carries goes to a tenant too.
pub(crate) fn rents_paths(host: &str) -> bool {
    let host = host.trim_end_matches('.');
    if host == "storage.googleapis.com" {
        return true;
    }
    let Some(left) = host.strip_suffix(".amazonaws.com") else {
        return false;
    };
    let first = left.split('.').next().unwrap_or("");
    first == "s3" || first.starts_with("s3-")
}

/// An AWS region's name: `us-east-1`, `eu-central-2`, `us-gov-west-1`.
fn is_region(label: &str) -> bool {
    let parts: Vec<&str> = label.split('-').collect();
    let (area, name, number) = match parts.as_slice() {
        [area, name, number] | [area, "gov", name, number] => (*area, *name, *number),
        _ => return false,
    };
    let letters = |s: &str| !s.is_empty() && s.bytes().all(|c| c.is_ascii_lowercase());
    area.len() == 2
        && letters(area)
        && letters(name)
        && !number.is_empty()
        && number.bytes().all(|c| c.is_ascii_digit())
}

/// The registrable domain of `host` when it is the vendor's own that one of `words` names:
/// the word under a generic suffix ([`VENDOR_SUFFIXES`]: `api.search.brave.com`,
/// `brave.com`, for `brave`), or a documented API domain of that vendor ([`VENDOR_DOMAINS`];
/// its provider's own endpoints only on a shared hosting domain, [`tenant`]). A label
/// elsewhere in the name (`brave.collector.example`) is not: whoever owns `collector.example`
/// chose it; nor the word under another suffix (`brave.example`).
pub(crate) fn named_like(host: &str, words: &[String]) -> Option<String> {
    if host.parse::<std::net::IpAddr>().is_ok() || tenant(host) {
        return None;
    }
    let domain = registrable(host);
    let (first, suffix) = domain.split_once('.')?;
    let own = |w: &String| w == first && VENDOR_SUFFIXES.contains(&suffix);
    words
        .iter()
        .any(|w| own(w) || provided_by(&domain, w))
        .then_some(domain)
}

/// Whether `host` is under a documented API domain of the vendor `word` names
/// ([`VENDOR_DOMAINS`]), a tenant's name there included: where a credential presented to
/// the provider goes ([`tenant`] says whose the rest is).
pub(crate) fn provided_by(host: &str, word: &str) -> bool {
    VENDOR_DOMAINS
        .iter()
        .any(|(v, ds)| *v == word && ds.iter().any(|d| net::is_under(host, d)))
}

/// What the audited entry explains, in the order the report prefers its reasons: its
/// environment, its arguments, its declared secrets' documented hosts, its `server.json`,
/// its package's metadata (see the module's table). A bundle from before
/// `manifest.network.names` gives what its audit derived then, less what came from the
/// package's name alone.
pub fn explained(m: &Manifest) -> Vec<ExplainedHost> {
    let names = &m.network.names;
    if names.is_empty() {
        return m
            .network
            .explained
            .iter()
            .filter(|e| e.by != "package-name")
            .cloned()
            .collect();
    }
    let mut out: Vec<ExplainedHost> = Vec::new();
    let mut push = |host: String, by: &str, why: String| {
        if !out.iter().any(|x| x.host == host) {
            out.push(ExplainedHost {
                host,
                subdomains: true,
                by: by.to_string(),
                why,
            });
        }
    };
    // A bare value names a host only when it looks like one ([`bare_host`]).
    let names: Vec<&EntryName> = names
        .iter()
        .filter(|n| !n.bare || bare_host(&n.host))
        .collect();
    let configured = |n: &&&EntryName| matches!(n.by.as_str(), "environment" | "arguments");
    for n in names.iter().filter(configured) {
        let why = match n.by.as_str() {
            "environment" => format!(
                "named in the entry's environment ({})",
                glassbox_model::printable(&glassbox_model::truncate(&n.field, 60))
            ),
            _ => "named in the server's arguments".to_string(),
        };
        push(n.host.clone(), &n.by, why);
    }
    for t in &m.sandbox.honeytokens {
        let Some(name) = t.path.strip_prefix("env:") else {
            continue;
        };
        for h in &t.hosts {
            if let Some(h) = glassbox_model::hosts::host_of(h) {
                push(
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
    for n in names.iter().filter(|n| !configured(n)) {
        let field = glassbox_model::printable(&glassbox_model::truncate(&n.field, 40));
        match n.by.as_str() {
            "server-json" => push(
                n.host.clone(),
                "server-json",
                format!("named by its server.json ({field})"),
            ),
            "npm" | "pypi" => {
                // A tenant's name on a shared hosting domain explains that name only, not
                // the provider's whole domain.
                let domain = if tenant(&n.host) {
                    n.host.clone()
                } else {
                    registrable(&n.host)
                };
                let what = match n.field.as_str() {
                    "homepage" | "Home-page" => "homepage".to_string(),
                    "repository" => "repository".to_string(),
                    "bugs" => "issue tracker".to_string(),
                    other => format!("{} link", other.trim_start_matches("Project-URL ")),
                };
                let origin = if n.by == "npm" { "npm" } else { "PyPI" };
                let why = format!(
                    "the package's {} domain, {domain} ({origin} `{field}`)",
                    glassbox_model::printable(&glassbox_model::truncate(&what, 40))
                );
                push(domain, "package", why);
            }
            _ => {}
        }
    }
    out
}

/// Whether a value that is a host by itself names one: an IP address, or a name whose last
/// label is a public suffix or a name reserved for documentation (`db.example`,
/// `example.atlassian.net`, but not `config.json`).
fn bare_host(h: &str) -> bool {
    h.parse::<std::net::IpAddr>().is_ok() || {
        let tld = h.rsplit('.').next().unwrap_or("");
        matches!(tld, "example" | "test") || known_suffix(tld)
    }
}

/// The declared secrets (`env:NAME`, kind `declared-secret`) of a bundle, with their vendor
/// words.
fn declared(m: &Manifest) -> Vec<(String, Vec<String>)> {
    m.sandbox
        .honeytokens
        .iter()
        .filter(|h| h.kind == "declared-secret")
        .filter_map(|h| h.path.strip_prefix("env:"))
        .map(|n| (n.to_string(), vendor_words(n)))
        .filter(|(_, w)| !w.is_empty())
        .collect()
}

/// What explains destinations in one bundle.
pub(crate) struct Explains {
    allow: Allow,
    /// The allow list of the install run: the user's, and the registry it relayed.
    allow_install: Allow,
    hosts: Vec<ExplainedHost>,
    /// The declared secrets' names and their vendor words.
    declared: Vec<(String, Vec<String>)>,
    named: Named,
}

impl Explains {
    pub(crate) fn new(m: &Manifest) -> Explains {
        Explains {
            allow: Allow::new(&m.network.allow),
            allow_install: Allow::new(
                &m.network
                    .runs
                    .iter()
                    .filter(|r| r.mode == NetworkMode::Install)
                    .flat_map(|r| r.allow.iter())
                    .chain(&m.network.allow)
                    .cloned()
                    .collect::<Vec<_>>(),
            ),
            hosts: explained(m)
                .iter()
                .map(|e| ExplainedHost {
                    host: net::norm_host(e.host.as_bytes()),
                    ..e.clone()
                })
                .chain(planted_services(m))
                .filter(|e| !e.host.is_empty())
                .collect(),
            declared: declared(m),
            named: Named::of(m),
        }
    }

    /// The allow list of a run of `mode`.
    pub(crate) fn allow(&self, mode: NetworkMode) -> &Allow {
        match mode {
            NetworkMode::Install => &self.allow_install,
            _ => &self.allow,
        }
    }

    /// Why `name` (a host name, normalized, or an IP address) is explained at `t_ns`.
    fn one(&self, name: &str, t_ns: u64) -> Option<String> {
        if let Some(e) = explaining(&self.hosts, name) {
            return Some(e.why.clone());
        }
        for (secret, words) in &self.declared {
            if let Some(domain) = named_like(name, words) {
                return Some(format!(
                    "named like the declared secret {} ({domain})",
                    glassbox_model::printable(secret)
                ));
            }
        }
        self.named.url_host_at(t_ns, name).map(|(phase, arg)| {
            format!(
                "its own input named it ({} of {})",
                named::argument(arg),
                glassbox_model::printable(&phase.to_string())
            )
        })
    }

    /// Why every one of `names` is explained at `t_ns` (each name's reason once, in order),
    /// or `None` when one is not or there are none.
    pub(crate) fn why<'a>(
        &self,
        names: impl IntoIterator<Item = &'a str>,
        t_ns: u64,
    ) -> Option<String> {
        let mut reasons: Vec<String> = Vec::new();
        for n in names {
            let r = self.one(n, t_ns)?;
            if !reasons.contains(&r) {
                reasons.push(r);
            }
        }
        (!reasons.is_empty()).then(|| reasons.join("; "))
    }
}

/// The entry of `hosts` that explains `name` (a host name, normalized, or an IP address).
pub(crate) fn explaining<'a>(hosts: &'a [ExplainedHost], name: &str) -> Option<&'a ExplainedHost> {
    let ip = name
        .parse::<std::net::IpAddr>()
        .ok()
        .map(|ip| ip.to_canonical());
    hosts.iter().find(|e| {
        let same = e.host == name
            || ip.is_some_and(|ip| {
                e.host
                    .parse::<std::net::IpAddr>()
                    .ok()
                    .map(|ip| ip.to_canonical())
                    == Some(ip)
            });
        let under = e.subdomains && ip.is_none() && net::is_under(name, &e.host);
        same || under
    })
}

/// The hosts of the planted secrets' own services that the audit made up (names under
/// `.test`, a kubeconfig's cluster): only what read the planted file can know them, so
/// reaching one is the client using it, and `canary-exfiltration` judges what it carried.
fn planted_services(m: &Manifest) -> Vec<ExplainedHost> {
    let mut out = Vec::new();
    for h in &m.sandbox.honeytokens {
        for s in &h.services {
            for host in s.hosts.iter().filter(|x| x.ends_with(".test")) {
                out.push(ExplainedHost {
                    host: net::norm_host(host.as_bytes()),
                    subdomains: true,
                    by: "planted".into(),
                    why: format!(
                        "{}, which the planted {} names",
                        glassbox_model::printable(&s.name),
                        glassbox_model::printable(&h.path)
                    ),
                });
            }
        }
    }
    out
}

/// What a note of an explained destination says after its attempts: `explained: <why>`.
pub(crate) fn note(summary: String, why: &str) -> String {
    format!("{summary}; explained: {why}")
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(by: &str, field: &str, host: &str, bare: bool) -> EntryName {
        EntryName {
            by: by.into(),
            field: field.into(),
            host: host.into(),
            bare,
        }
    }

    #[test]
    fn the_entry_explains_its_hosts_and_what_is_under_them() {
        let mut m = Manifest::default();
        m.network.names = vec![
            name("environment", "GITLAB_API_URL", "gitlab.com", false),
            name("environment", "DB_HOST", "203.0.113.5", true),
            // A value that is a host only by its shape: a file, not a destination.
            name("environment", "CONFIG", "config.json", true),
            name("arguments", "", "api.other.example", false),
            name("server-json", "websiteUrl", "site.example", false),
            name("npm", "homepage", "docs.vendor.example", false),
            name(
                "pypi",
                "Project-URL Documentation",
                "pages.tool.example",
                false,
            ),
            name("npm", "bugs", "someone.github.io", false),
        ];
        m.sandbox.honeytokens = vec![glassbox_model::Honeytoken {
            path: "env:WEATHER_KEY".into(),
            kind: "declared-secret".into(),
            hosts: vec!["weather.example".into()],
            ..Default::default()
        }];
        let got: Vec<(String, String, String)> = explained(&m)
            .into_iter()
            .map(|e| (e.host, e.by, e.why))
            .collect();
        let want = [
            ("gitlab.com", "environment", "named in the entry's environment (GITLAB_API_URL)"),
            ("203.0.113.5", "environment", "named in the entry's environment (DB_HOST)"),
            ("api.other.example", "arguments", "named in the server's arguments"),
            ("weather.example", "declared-secret", "a documented host of the declared secret WEATHER_KEY"),
            ("site.example", "server-json", "named by its server.json (websiteUrl)"),
            ("vendor.example", "package", "the package's homepage domain, vendor.example (npm `homepage`)"),
            ("tool.example", "package", "the package's Documentation link domain, tool.example (PyPI `Project-URL Documentation`)"),
            // A site on a shared hosting domain: its own name, not github.io.
            ("someone.github.io", "package", "the package's issue tracker domain, someone.github.io (npm `bugs`)"),
        ];
        assert_eq!(
            got,
            want.map(|(h, b, w)| (h.to_string(), b.to_string(), w.to_string()))
        );
        let e = Explains::new(&m);
        assert_eq!(
            e.why(["api.vendor.example"], 0).as_deref(),
            Some("the package's homepage domain, vendor.example (npm `homepage`)")
        );
        assert!(e.why(["gitlab.com", "203.0.113.5"], 0).is_some());
        // Every name must be: fronting behind an explained name is not explained.
        assert_eq!(e.why(["api.vendor.example", "collector.example"], 0), None);
        for n in [
            "evilvendor.example",
            "vendor.example.evil.test",
            "203.0.113.6",
            "other.github.io",
            "config.json",
        ] {
            assert_eq!(e.why([n], 0), None, "{n}");
        }
        assert_eq!(e.why([], 0), None);
    }

    /// A bundle from before `names`: what its audit derived, but for the words of the
    /// package's name, which explain nothing now.
    #[test]
    fn an_old_bundle_keeps_its_explanations_but_the_package_name() {
        let mut m = Manifest::default();
        m.network.explained = vec![
            ExplainedHost {
                host: "vendor.example".into(),
                subdomains: true,
                by: "package".into(),
                why: "the package's homepage domain, vendor.example (npm `homepage`)".into(),
            },
            ExplainedHost {
                host: "context7".into(),
                subdomains: true,
                by: "package-name".into(),
                why: "named like the package, @upstash/context7-mcp".into(),
            },
        ];
        let e = Explains::new(&m);
        assert!(e.why(["api.vendor.example"], 0).is_some());
        assert_eq!(e.why(["context7.com"], 0), None);
        assert_eq!(e.why(["api.context7.com"], 0), None);
    }

    #[test]
    fn a_tenants_name_on_a_shared_hosting_domain_is_not_the_providers() {
        for h in [
            "loot.s3.amazonaws.com",
            "loot.s3.us-east-1.amazonaws.com",
            "loot.s3-us-west-2.amazonaws.com",
            "ec2-198-51-100-7.compute-1.amazonaws.com",
            "ec2-198-51-100-7.amazonaws.com",
            "x.execute-api.us-east-1.amazonaws.com",
            "loot.storage.googleapis.com",
            "x.blob.core.windows.net",
            "someone.herokuapp.com",
            "app.vercel.app",
            "d111.cloudfront.net",
            "someone.github.io",
        ] {
            assert!(tenant(h), "{h}");
        }
        for h in [
            "sts.amazonaws.com",
            "s3.amazonaws.com",
            "sts.us-east-1.amazonaws.com",
            "s3.eu-central-1.amazonaws.com",
            "sts.us-gov-west-1.amazonaws.com",
            "maps.googleapis.com",
            "storage.googleapis.com",
            "raw.githubusercontent.com",
            "login.windows.net",
            "api.github.com",
            "api.search.brave.com",
            "203.0.113.5",
        ] {
            assert!(!tenant(h), "{h}");
        }
    }

    #[test]
    fn registrable_domains_follow_the_public_suffix_list() {
        assert_eq!(registrable("docs.vendor.example"), "vendor.example");
        assert_eq!(registrable("api.example-vendor.com"), "example-vendor.com");
        assert_eq!(registrable("a.b.co.uk"), "b.co.uk");
        assert_eq!(registrable("foo.github.io"), "foo.github.io");
        assert_eq!(registrable("203.0.113.5"), "203.0.113.5");
    }

    #[test]
    fn a_declared_secret_names_its_vendor_by_its_registrable_domain() {
        assert_eq!(vendor_words("BRAVE_API_KEY"), ["brave"]);
        assert_eq!(vendor_words("GITHUB_PERSONAL_ACCESS_TOKEN"), ["github"]);
        assert_eq!(vendor_words("GOOGLE_MAPS_API_KEY"), ["google", "maps"]);
        assert!(vendor_words("API_KEY").is_empty());
        let w = vendor_words("BRAVE_API_KEY");
        assert_eq!(
            named_like("api.search.brave.com", &w).as_deref(),
            Some("brave.com")
        );
        assert_eq!(named_like("brave.com", &w).as_deref(), Some("brave.com"));
        // Its generic suffixes only: the same label under another suffix is whoever
        // registered it there.
        for host in [
            "brave.collector.example",
            "bravecollector.example",
            "192.0.2.1",
            "brave.example",
            "api.brave.test",
            "brave.co.uk",
            "brave.xyz",
        ] {
            assert_eq!(named_like(host, &w), None, "{host}");
        }
        for (var, host) in [
            ("EXA_API_KEY", "api.exa.ai"),
            ("SENTRY_ACCESS_TOKEN", "sentry.io"),
            ("FIRECRAWL_API_KEY", "api.firecrawl.dev"),
        ] {
            assert!(
                named_like(host, &vendor_words(var)).is_some(),
                "{var} {host}"
            );
        }
        // A vendor's shared hosting domain: its endpoints, not a tenant's bucket.
        let aws = vendor_words("AWS_ACCESS_KEY_ID");
        assert!(named_like("sts.us-east-1.amazonaws.com", &aws).is_some());
        assert_eq!(named_like("loot.s3.amazonaws.com", &aws), None);
        assert_eq!(
            named_like("x.blob.core.windows.net", &vendor_words("AZURE_KEY")),
            None
        );
        // A vendor whose API domain is not named like it.
        // (`googleapis.com` is itself a public suffix, of Google's own.)
        let g = vendor_words("GOOGLE_API_KEY");
        assert_eq!(
            named_like("maps.googleapis.com", &g).as_deref(),
            Some("maps.googleapis.com")
        );
        assert_eq!(named_like("maps.googleapis.com", &w), None);
        let mut m = Manifest::default();
        m.sandbox.honeytokens = vec![glassbox_model::Honeytoken {
            path: "env:BRAVE_API_KEY".into(),
            kind: "declared-secret".into(),
            ..Default::default()
        }];
        let e = Explains::new(&m);
        assert_eq!(
            e.why(["api.search.brave.com"], 0).as_deref(),
            Some("named like the declared secret BRAVE_API_KEY (brave.com)")
        );
        assert_eq!(e.why(["brave.collector.example"], 0), None);
        // Bait the audit plants is not the user's: it names no vendor.
        m.sandbox.honeytokens[0].kind = "bait-env".into();
        assert_eq!(Explains::new(&m).why(["api.search.brave.com"], 0), None);
    }
}
