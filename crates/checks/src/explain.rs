//! What explains a destination the server reached, and in what words the report says so:
//! the user's `--allow-host` (and, in the install run, the registry it relayed), what the
//! audited entry names itself (`manifest.network.explained`: its environment and arguments,
//! its package's metadata, its `server.json`, its declared secrets' documented hosts), a
//! domain named like a declared secret (`api.search.brave.com` for `BRAVE_API_KEY`: the user
//! named the variable after its vendor, [`named_like`]), and, during a call, a URL of that
//! call's own input ([`Named::url_host_at`]).
//!
//! `unexplained-egress` and `denied-network-attempts` flag only what nothing explains and
//! note the rest with its reason. Every name a flow carries must be explained (its DNS
//! question, the name its synthetic address was handed out for, its TLS SNI, its HTTP
//! `Host`): a connection to an explained name whose SNI or `Host` names another is not
//! explained. Explained is not trusted: `canary-exfiltration` judges a planted secret by the
//! service it is for, wherever it went.

use crate::named::{self, Named};
use crate::net::{self, Allow};
use glassbox_model::{ExplainedHost, Manifest, NetworkMode};

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
/// domains are documented and owned by them.
const VENDOR_DOMAINS: &[(&str, &[&str])] = &[
    ("google", &["googleapis.com"]),
    ("gemini", &["googleapis.com"]),
    ("github", &["githubusercontent.com"]),
    ("azure", &["azure.com", "windows.net", "microsoft.com"]),
    ("aws", &["amazonaws.com"]),
    ("huggingface", &["huggingface.co", "hf.co"]),
];

/// The registrable domain of `host` when its first label is one of `words` (a destination
/// named like the secret: `api.search.brave.com`, `brave.com`, for `brave`), or when it is a
/// documented API domain of that vendor ([`VENDOR_DOMAINS`]): the vendor the user named the
/// variable after. A label elsewhere in the name (`brave.collector.example`) is not: whoever
/// owns `collector.example` chose it.
pub(crate) fn named_like(host: &str, words: &[String]) -> Option<String> {
    if host.parse::<std::net::IpAddr>().is_ok() {
        return None;
    }
    let domain = registrable(host);
    let first = domain.split('.').next()?;
    let listed = |w: &String| {
        VENDOR_DOMAINS
            .iter()
            .any(|(v, ds)| v == w && ds.iter().any(|d| net::is_under(&domain, d)))
    };
    words
        .iter()
        .any(|w| w == first || listed(w))
        .then_some(domain)
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
            hosts: m
                .network
                .explained
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
        if let Some((e, domain)) = explaining(&self.hosts, name) {
            return Some(match domain {
                Some(d) => format!("{} ({d})", e.why),
                None => e.why.clone(),
            });
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
                "a URL of its own input named it ({} of {})",
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

/// The entry of `hosts` that explains `name` (a host name, normalized, or an IP address),
/// with the registrable domain a word entry ([`ExplainedHost::label`]) matched.
pub(crate) fn explaining<'a>(
    hosts: &'a [ExplainedHost],
    name: &str,
) -> Option<(&'a ExplainedHost, Option<String>)> {
    let ip = name
        .parse::<std::net::IpAddr>()
        .ok()
        .map(|ip| ip.to_canonical());
    hosts.iter().find_map(|e| {
        if e.label {
            let words = [e.host.clone()];
            return named_like(name, &words).map(|d| (e, Some(d)));
        }
        let same = e.host == name
            || ip.is_some_and(|ip| {
                e.host
                    .parse::<std::net::IpAddr>()
                    .ok()
                    .map(|ip| ip.to_canonical())
                    == Some(ip)
            });
        let under = e.subdomains && ip.is_none() && net::is_under(name, &e.host);
        (same || under).then_some((e, None))
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
                    ..Default::default()
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

    #[test]
    fn the_entry_explains_its_hosts_and_what_is_under_them() {
        let mut m = Manifest::default();
        m.network.explained = vec![
            ExplainedHost {
                host: "vendor.example".into(),
                subdomains: true,
                why: "the package's homepage domain, vendor.example (npm `homepage`)".into(),
                ..Default::default()
            },
            ExplainedHost {
                host: "203.0.113.5".into(),
                subdomains: true,
                why: "named in the entry's environment (DB_HOST)".into(),
                ..Default::default()
            },
            ExplainedHost {
                host: "context7".into(),
                subdomains: true,
                label: true,
                why: "named like the package, @upstash/context7-mcp".into(),
                ..Default::default()
            },
        ];
        let e = Explains::new(&m);
        assert_eq!(
            e.why(["api.vendor.example"], 0).as_deref(),
            Some("the package's homepage domain, vendor.example (npm `homepage`)")
        );
        assert!(e.why(["vendor.example", "203.0.113.5"], 0).is_some());
        assert_eq!(
            e.why(["api.context7.com"], 0).as_deref(),
            Some("named like the package, @upstash/context7-mcp (context7.com)")
        );
        assert_eq!(e.why(["context7.collector.example"], 0), None);
        // Every name must be: fronting behind an explained name is not explained.
        assert_eq!(e.why(["api.vendor.example", "collector.example"], 0), None);
        for n in [
            "evilvendor.example",
            "vendor.example.evil.test",
            "203.0.113.6",
        ] {
            assert_eq!(e.why([n], 0), None, "{n}");
        }
        assert_eq!(e.why([], 0), None);
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
        for host in [
            "brave.collector.example",
            "bravecollector.example",
            "192.0.2.1",
        ] {
            assert_eq!(named_like(host, &w), None, "{host}");
        }
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
