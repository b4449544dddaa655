//! What each call's input named: the string arguments of every call glassbox made
//! (`manifest.session.tools[].calls`, each filed under its phase, [`Phase::call`]) and the
//! values of every read and get (`manifest.session.surface[].reads`: a resource template's
//! variables, a prompt's arguments, under [`Phase::read`] and [`Phase::prompt`]), read as
//! paths where they look like one (a `/` in them, or a leading `~`, and not a URL), and the
//! IP address of a URL whose host is one ([`Named::address`]: a connect to it during that
//! call is the tool fetching what its input named).
//!
//! A file the server opened during a call whose input named it is what the tool was asked to
//! do: reported as what the tool can be made to do (`input-exposure`), not as the server's own
//! doing (`credential-probe`). An argument names a path when the path, lexically normalized,
//! is the argument resolved against the working directory (`~/` against home), or ends with
//! the argument's components after its leading `../` and `./` (a traversal, resolved by the
//! server against a folder of its own), at least two of them; or is a folder on the way to
//! either (resolving a path, `realpath` for one, looks at each folder it goes through), or is
//! inside it (a tool told to work in a folder). [`Named::looked_around`] also takes what sits
//! next to a folder on the way (git looks for `.git` in each folder above the one it is
//! given): for stats and failed opens only, which look and read nothing.

use crate::paths::NormPath;
use glassbox_model::{Manifest, Phase};
use serde_json::Value;
use std::collections::HashMap;
use std::net::IpAddr;

/// Most string arguments read from one call.
const MAX_STRINGS: usize = 64;

/// How long after a call's phase ended an event still counts as that call's: a tool may
/// finish its work just after it answers, and a microVM's events are stamped on arrival at the
/// host, a little late (`crates/audit/src/microvm.rs`), so with calls a few milliseconds long
/// an event of one call can land in the next phase.
const LATE_NS: u64 = 250_000_000;

/// One string argument that looks like a path.
#[derive(Debug)]
struct NamedPath {
    /// The argument's property path, dotted (`options.path`).
    arg: String,
    /// The argument resolved against the working directory (or home).
    full: NormPath,
    /// Its components after a leading `../` and `./`, when it started with `..`.
    tail: Vec<Vec<u8>>,
}

/// What one call's input named.
#[derive(Debug, Default)]
struct CallNamed {
    paths: Vec<NamedPath>,
    /// The IP literal hosts of its URL arguments, each with the argument.
    addresses: Vec<(String, IpAddr)>,
    /// The host names of its URL arguments (lower-case), each with the argument.
    hosts: Vec<(String, String)>,
}

/// What each call's input named, by the call's phase.
#[derive(Debug, Default)]
pub(crate) struct Named {
    by_phase: HashMap<Phase, CallNamed>,
    /// The time windows of the calls that named paths (one per run), from the manifest.
    windows: Vec<(u64, u64, Phase)>,
}

impl Named {
    pub(crate) fn of(manifest: &Manifest) -> Named {
        let cwd = match manifest.sandbox.cwd.as_str() {
            "" => manifest.target.cwd.as_bytes(),
            cwd => cwd.as_bytes(),
        };
        let home = manifest.sandbox.home.trim_end_matches('/');
        let mut by_phase: HashMap<Phase, CallNamed> = HashMap::new();
        // Every call's arguments, and every read's or get's values (a resource template's
        // variables, a prompt's arguments), each under its phase.
        let calls = manifest.session.tools.iter().flat_map(|tool| {
            tool.calls
                .iter()
                .map(|call| (Phase::call(&tool.name, call.k), &call.arguments))
        });
        let reads = (manifest.session.surface.iter())
            .flat_map(|s| &s.reads)
            .map(|r| (r.phase.clone(), &r.arguments));
        for (phase, arguments) in calls.chain(reads) {
            let mut strings = Vec::new();
            strings_of(arguments, &mut String::new(), &mut strings);
            let mut named = CallNamed::default();
            for (arg, s) in strings {
                match url_host(&s).or_else(|| bare_host(&s)) {
                    Some(UrlHost::Ip(ip)) => named.addresses.push((arg, ip)),
                    Some(UrlHost::Name(h)) => named.hosts.push((arg, h)),
                    None => {
                        if let Some(p) = path_of(arg, &s, cwd, home) {
                            named.paths.push(p);
                        }
                    }
                }
            }
            if !(named.paths.is_empty() && named.addresses.is_empty() && named.hosts.is_empty()) {
                by_phase.insert(phase, named);
            }
        }
        let windows = manifest
            .timings
            .iter()
            .filter(|t| by_phase.contains_key(&t.phase))
            .map(|t| (t.start_ns, t.end_ns, t.phase.clone()))
            .collect();
        Named { by_phase, windows }
    }

    /// The calls an event in `phase` at `t_ns` may belong to: its own phase's, then a call
    /// that named something and ended at most [`LATE_NS`] before it.
    fn calls_at(&self, phase: &Phase, t_ns: u64) -> impl Iterator<Item = &CallNamed> + '_ {
        let own = self.by_phase.get(phase);
        let phase = phase.clone();
        let late = self
            .windows
            .iter()
            .filter(move |(start, end, p)| {
                *p != phase && *start <= t_ns && t_ns <= end.saturating_add(LATE_NS)
            })
            .filter_map(|(_, _, p)| self.by_phase.get(p));
        own.into_iter().chain(late)
    }

    fn paths_at(&self, phase: &Phase, t_ns: u64) -> impl Iterator<Item = &NamedPath> + '_ {
        self.calls_at(phase, t_ns).flat_map(|c| &c.paths)
    }

    /// The argument of the call an event in `phase` at `t_ns` belongs to that is a URL whose
    /// host is `ip`.
    pub(crate) fn address(&self, phase: &Phase, t_ns: u64, ip: IpAddr) -> Option<&str> {
        self.calls_at(phase, t_ns)
            .flat_map(|c| &c.addresses)
            .find(|(_, a)| *a == ip)
            .map(|(arg, _)| arg.as_str())
    }

    /// The call whose phase (or [`LATE_NS`] after it) holds `t_ns` and whose input has a URL
    /// with host `host` (a name, lower-case, or an IP address) or a host it is under, with
    /// that URL's argument: what a flow at `t_ns` to `host` was asked for. A flow carries no
    /// phase of its own (a microVM's none of its events either), so its time decides.
    ///
    /// A name under `.test` (RFC 6761: reserved, never a real destination; the names
    /// glassbox's generated arguments give are under `example.test`) that an earlier call's
    /// input named is that call's at any later time too: a page a browser tool opened goes on
    /// loading, and retrying, through the calls after it.
    pub(crate) fn url_host_at(&self, t_ns: u64, host: &str) -> Option<(&Phase, &str)> {
        let during = self.url_host_in(host, |start, end| {
            start <= t_ns && t_ns <= end.saturating_add(LATE_NS)
        });
        if during.is_some() || !crate::net::is_under(host, "test") {
            return during;
        }
        self.url_host_in(host, |start, _| start <= t_ns)
    }

    /// The first call whose window `in_window` takes and whose input has a URL with host
    /// `host`, with that URL's argument.
    fn url_host_in(
        &self,
        host: &str,
        in_window: impl Fn(u64, u64) -> bool,
    ) -> Option<(&Phase, &str)> {
        let ip = host.parse::<IpAddr>().ok();
        self.windows
            .iter()
            .filter(|(start, end, _)| in_window(*start, *end))
            .find_map(|(_, _, p)| {
                let c = self.by_phase.get(p)?;
                let by_name = c.hosts.iter().find(|(_, h)| crate::net::is_under(host, h));
                let by_ip = || {
                    let ip = ip?;
                    c.addresses
                        .iter()
                        .find(|(_, a)| *a == ip)
                        .map(|(arg, _)| arg)
                };
                by_name
                    .map(|(arg, _)| arg)
                    .or_else(by_ip)
                    .map(|arg| (p, arg.as_str()))
            })
    }

    /// The argument of the call in `phase` that named `path` (normalized, absolute), a
    /// folder on the way to what it named, or something inside it.
    pub(crate) fn named<C: AsRef<[u8]>>(
        &self,
        phase: &Phase,
        t_ns: u64,
        path: &[C],
    ) -> Option<&str> {
        self.find(phase, t_ns, path, false)
    }

    /// [`Named::named`], or an entry of a folder on the way to what the argument named.
    pub(crate) fn looked_around<C: AsRef<[u8]>>(
        &self,
        phase: &Phase,
        t_ns: u64,
        path: &[C],
    ) -> Option<&str> {
        self.find(phase, t_ns, path, true)
    }

    /// `beside`: an entry of a folder on the way counts too.
    fn find<C: AsRef<[u8]>>(
        &self,
        phase: &Phase,
        t_ns: u64,
        path: &[C],
        beside: bool,
    ) -> Option<&str> {
        self.paths_at(phase, t_ns)
            .find(|n| {
                let full = n.full.components();
                let on_the_way = |p: &[C]| !p.is_empty() && starts_with(full, p);
                let inside = starts_with(path, full) && !full.is_empty();
                let tail = &n.tail;
                // The traversal's target resolved against a folder unknown here: `path` ends
                // with a start of the tail (on the way), or holds the whole tail (inside).
                let tail_on_the_way = |p: &[C]| (2..=tail.len()).any(|j| ends_with(p, &tail[..j]));
                let tail_inside = tail.len() >= 2
                    && (tail.len()..path.len()).any(|i| ends_with(&path[..i], tail));
                on_the_way(path)
                    || inside
                    || tail_on_the_way(path)
                    || tail_inside
                    || (beside && path.len() > 1 && {
                        let folder = &path[..path.len() - 1];
                        on_the_way(folder) || tail_on_the_way(folder)
                    })
            })
            .map(|n| n.arg.as_str())
    }

    /// Whether an event in `phase` at `t_ns` may belong to a call whose input named a path.
    pub(crate) fn has(&self, phase: &Phase, t_ns: u64) -> bool {
        self.paths_at(phase, t_ns).next().is_some()
    }
}

/// An argument as a finding names it: `` argument `options.path` `` (printable, cut).
pub(crate) fn argument(arg: &str) -> String {
    format!(
        "argument `{}`",
        glassbox_model::printable(&glassbox_model::truncate(arg, 80))
    )
}

/// Whether `a` starts with the components of `b`.
fn starts_with<A: AsRef<[u8]>, B: AsRef<[u8]>>(a: &[A], b: &[B]) -> bool {
    crate::paths::strip_components(a, b).is_some()
}

/// Whether `a` ends with the components of `b`.
fn ends_with<A: AsRef<[u8]>, B: AsRef<[u8]>>(a: &[A], b: &[B]) -> bool {
    b.len() <= a.len() && crate::paths::same_components(&a[a.len() - b.len()..], b)
}

/// Every string in `v` with its property path, at most [`MAX_STRINGS`].
fn strings_of(v: &Value, at: &mut String, out: &mut Vec<(String, String)>) {
    if out.len() >= MAX_STRINGS {
        return;
    }
    match v {
        Value::String(s) => out.push((at.clone(), s.clone())),
        Value::Object(o) => {
            for (k, sub) in o {
                let len = at.len();
                if !at.is_empty() {
                    at.push('.');
                }
                at.push_str(k);
                strings_of(sub, at, out);
                at.truncate(len);
            }
        }
        Value::Array(items) => {
            for sub in items {
                strings_of(sub, at, out);
            }
        }
        _ => {}
    }
}

/// The host of a URL.
enum UrlHost {
    /// An IP literal (`http://192.0.2.1:8080/x`, `https://[2001:db8::1]/`): what a fetch of
    /// it connects to.
    Ip(IpAddr),
    /// A name, lower-case, without a trailing dot: what a fetch of it looks up.
    Name(String),
}

/// The host of the URL `s`.
fn url_host(s: &str) -> Option<UrlHost> {
    if s.len() > 4096 {
        return None;
    }
    let (scheme, rest) = s.trim().split_once("://")?;
    if scheme.is_empty()
        || !scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "+-.".contains(c))
    {
        return None;
    }
    let authority = rest.split(['/', '?', '#']).next()?;
    let host = authority.rsplit_once('@').map_or(authority, |(_, h)| h);
    if let Some(v6) = host.strip_prefix('[') {
        return v6.split_once(']')?.0.parse().ok().map(UrlHost::Ip);
    }
    let host = host.split(':').next()?;
    if let Ok(ip) = host.parse() {
        return Some(UrlHost::Ip(ip));
    }
    let name = host.trim_end_matches('.').to_ascii_lowercase();
    let valid = !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || c == '-' || c == '.');
    valid.then_some(UrlHost::Name(name))
}

/// A host given without a URL: the whole argument a host name (`m1x2.example.test`, at least
/// one dot, labels of letters, digits and `-`, the last not all digits) or an IP address, with
/// or without a port (`db.example.test:5432`, `[2001:db8::1]:80`), or the `host=` of a
/// keyword connection string (`host=db.example.test port=5432 dbname=app`). glassbox gives a
/// host parameter such a value; a tool that connects there does what its input asked.
fn bare_host(s: &str) -> Option<UrlHost> {
    let s = s.trim();
    if s.is_empty() || s.len() > 253 + 6 {
        return keyword_host(s);
    }
    if let Ok(ip) = s.parse::<IpAddr>() {
        return Some(UrlHost::Ip(ip));
    }
    if let Ok(sock) = s.parse::<std::net::SocketAddr>() {
        return Some(UrlHost::Ip(sock.ip()));
    }
    let host = match s.rsplit_once(':') {
        Some((h, port)) if !port.is_empty() && port.bytes().all(|b| b.is_ascii_digit()) => h,
        _ => s,
    };
    if let Ok(ip) = host.parse::<IpAddr>() {
        return Some(UrlHost::Ip(ip));
    }
    let name = host.trim_end_matches('.').to_ascii_lowercase();
    let labels: Vec<&str> = name.split('.').collect();
    let valid = labels.len() >= 2
        && labels.iter().all(|l| {
            !l.is_empty()
                && l.len() <= 63
                && l.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'-')
        })
        && labels
            .last()
            .is_some_and(|l| l.bytes().any(|b| b.is_ascii_alphabetic()));
    if valid {
        return Some(UrlHost::Name(name));
    }
    keyword_host(s)
}

/// The `host=` of a keyword connection string (libpq's, ODBC's `Server=`), as a bare host.
fn keyword_host(s: &str) -> Option<UrlHost> {
    if s.len() > 4096 {
        return None;
    }
    s.split([' ', ';'])
        .filter_map(|kv| kv.split_once('='))
        .find(|(k, _)| {
            let k = k.trim();
            k.eq_ignore_ascii_case("host") || k.eq_ignore_ascii_case("server")
        })
        .and_then(|(_, v)| {
            let v = v.trim().trim_matches(['\'', '"']);
            (!v.contains('=')).then(|| bare_host(v)).flatten()
        })
}

fn path_of(arg: String, s: &str, cwd: &[u8], home: &str) -> Option<NamedPath> {
    if s.is_empty() || s.len() > 4096 || s.contains("://") || s.contains('\0') {
        return None;
    }
    if !(s.contains('/') || s.starts_with('~')) {
        return None;
    }
    let full = match s.strip_prefix("~/") {
        Some(rest) if !home.is_empty() => NormPath::new(format!("{home}/{rest}").as_bytes()),
        _ => NormPath::resolve(s.as_bytes(), cwd),
    };
    let tail = if s.starts_with("..") {
        s.split('/')
            .filter(|p| !p.is_empty())
            .skip_while(|p| *p == ".." || *p == ".")
            .map(|p| p.as_bytes().to_vec())
            .collect()
    } else {
        Vec::new()
    };
    Some(NamedPath { arg, full, tail })
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    fn manifest(calls: Vec<Value>) -> Manifest {
        let mut m = Manifest::default();
        m.sandbox.cwd = "/work/srv".into();
        m.sandbox.home = "/home/ana".into();
        m.session.tools = crate::testutil::tool_calls("read_file", calls);
        m
    }

    #[test]
    fn a_host_given_without_a_url_is_named() {
        let host = |s: &str| match bare_host(s) {
            Some(UrlHost::Name(n)) => Some(n),
            Some(UrlHost::Ip(ip)) => Some(ip.to_string()),
            None => None,
        };
        assert_eq!(
            host("m1x2.example.test").as_deref(),
            Some("m1x2.example.test")
        );
        assert_eq!(
            host(" DB.example.test:5432 ").as_deref(),
            Some("db.example.test")
        );
        assert_eq!(host("192.0.2.7").as_deref(), Some("192.0.2.7"));
        assert_eq!(host("192.0.2.7:8080").as_deref(), Some("192.0.2.7"));
        assert_eq!(host("[2001:db8::1]:80").as_deref(), Some("2001:db8::1"));
        assert_eq!(
            host("host=db.example.test port=5432 dbname=app").as_deref(),
            Some("db.example.test")
        );
        assert_eq!(
            host("Server=sql.example.test;Database=app;").as_deref(),
            Some("sql.example.test")
        );
        // Not hosts: words, a version, a sentence, a path, a file with a numeric "extension".
        for s in [
            "hello",
            "1.2.3",
            "see example.test for more",
            "a/b.example",
            "v2.10",
            "",
        ] {
            assert_eq!(host(s), None, "{s:?}");
        }
    }

    #[test]
    fn a_url_names_its_ip_literal_host_in_its_own_call() {
        let m = manifest(vec![
            json!({"url": "http://192.0.2.254/latest/meta-data/"}),
            json!({"url": "https://user@[2001:db8::7]:8443/x?y", "q": "http://198.51.100.1"}),
            json!({"url": "https://example.test/192.0.2.254"}),
        ]);
        let n = Named::of(&m);
        let ip = |s: &str| s.parse::<IpAddr>().unwrap();
        let call = |k| Phase::call("read_file", k);
        assert_eq!(n.address(&call(1), 0, ip("192.0.2.254")), Some("url"));
        assert_eq!(n.address(&call(2), 0, ip("2001:db8::7")), Some("url"));
        assert_eq!(n.address(&call(2), 0, ip("198.51.100.1")), Some("q"));
        // Not in another call; not a host name's path.
        assert_eq!(n.address(&call(2), 0, ip("192.0.2.254")), None);
        assert_eq!(n.address(&call(3), 0, ip("192.0.2.254")), None);
        // A URL is not a path.
        assert!(!n.has(&call(1), 0));
        for bad in [
            "192.0.2.1",
            "://192.0.2.1",
            "http://[::1",
            "http://999.0.0.1/",
        ] {
            assert!(!matches!(url_host(bad), Some(UrlHost::Ip(_))), "{bad}");
        }
    }

    #[test]
    fn a_flow_in_a_calls_window_to_a_host_its_url_named_was_asked_for() {
        let mut m = manifest(vec![
            json!({"url": "https://Docs.Vendor.Example./page"}),
            json!({"url": "http://192.0.2.9/x"}),
        ]);
        m.timings = vec![
            glassbox_model::PhaseTiming {
                phase: Phase::call("read_file", 1),
                start_ns: 1_000_000_000,
                end_ns: 2_000_000_000,
            },
            glassbox_model::PhaseTiming {
                phase: Phase::call("read_file", 2),
                start_ns: 3_000_000_000,
                end_ns: 4_000_000_000,
            },
        ];
        let n = Named::of(&m);
        let first = Phase::call("read_file", 1);
        assert_eq!(
            n.url_host_at(1_500_000_000, "docs.vendor.example"),
            Some((&first, "url"))
        );
        assert_eq!(
            n.url_host_at(1_500_000_000, "cdn.docs.vendor.example"),
            Some((&first, "url"))
        );
        assert_eq!(
            n.url_host_at(3_500_000_000, "192.0.2.9").map(|(_, a)| a),
            Some("url")
        );
        // Another host, a look-alike suffix, another call's time, before any call.
        assert_eq!(n.url_host_at(1_500_000_000, "vendor.example"), None);
        assert_eq!(
            n.url_host_at(1_500_000_000, "evildocs.vendor.example"),
            None
        );
        assert_eq!(n.url_host_at(3_500_000_000, "docs.vendor.example"), None);
        assert_eq!(n.url_host_at(500_000_000, "docs.vendor.example"), None);
    }

    #[test]
    fn a_test_name_an_earlier_call_gave_is_that_calls_later_too() {
        let mut m = manifest(vec![
            json!({"url": "https://example.test/gbm0123456789"}),
            json!({"url": "https://docs.vendor.example/"}),
        ]);
        m.timings = vec![
            glassbox_model::PhaseTiming {
                phase: Phase::call("read_file", 1),
                start_ns: 1_000_000_000,
                end_ns: 2_000_000_000,
            },
            glassbox_model::PhaseTiming {
                phase: Phase::call("read_file", 2),
                start_ns: 3_000_000_000,
                end_ns: 4_000_000_000,
            },
        ];
        let n = Named::of(&m);
        let first = Phase::call("read_file", 1);
        // A page still loading in a later call.
        assert_eq!(
            n.url_host_at(9_000_000_000, "example.test"),
            Some((&first, "url"))
        );
        // Not before the call, and not a name that may be real.
        assert_eq!(n.url_host_at(500_000_000, "example.test"), None);
        assert_eq!(n.url_host_at(9_000_000_000, "docs.vendor.example"), None);
    }

    fn comps(p: &str) -> Vec<Vec<u8>> {
        NormPath::new(p.as_bytes()).components().to_vec()
    }

    #[test]
    fn an_event_just_after_the_call_that_named_its_path_is_that_calls() {
        let mut m = manifest(vec![
            json!({"path": "notes.txt"}),
            json!({"path": "/home/ana/.aws/credentials"}),
        ]);
        m.timings = vec![glassbox_model::PhaseTiming {
            phase: Phase::call("read_file", 2),
            start_ns: 1_000,
            end_ns: 2_000,
        }];
        let n = Named::of(&m);
        let aws = comps("/home/ana/.aws/credentials");
        // A microVM's event of that call, stamped on arrival in the final listing.
        assert_eq!(n.named(&Phase::List, 2_500, &aws), Some("path"));
        assert!(n.has(&Phase::List, 2_500));
        // Long after it, or before it began: not that call's.
        assert_eq!(n.named(&Phase::List, 2_000 + LATE_NS + 1, &aws), None);
        assert_eq!(n.named(&Phase::Startup, 500, &aws), None);
    }

    #[test]
    fn a_call_names_what_its_arguments_say_and_only_in_its_own_phase() {
        let m = manifest(vec![
            json!({"path": "notes.txt"}),
            json!({"options": {"path": "/home/ana/.aws/credentials"}}),
            json!({"path": "../../../../home/ana/projects/api/.env"}),
            json!({"path": "~/.npmrc", "url": "https://example.test/a/b"}),
        ]);
        let n = Named::of(&m);
        let aws = comps("/home/ana/.aws/credentials");
        assert_eq!(
            n.named(&Phase::call("read_file", 2), 0, &aws),
            Some("options.path")
        );
        assert_eq!(n.named(&Phase::call("read_file", 1), 0, &aws), None);
        assert_eq!(n.named(&Phase::Startup, 0, &aws), None);
        // A traversal, whatever folder the server resolved it against.
        let env = comps("/home/ana/projects/api/.env");
        assert_eq!(n.named(&Phase::call("read_file", 3), 0, &env), Some("path"));
        assert_eq!(
            n.named(&Phase::call("read_file", 4), 0, &comps("/home/ana/.npmrc")),
            Some("path")
        );
        // A relative name without a slash is no path; nor is a URL.
        assert_eq!(
            n.named(
                &Phase::call("read_file", 1),
                0,
                &comps("/work/srv/notes.txt")
            ),
            None
        );
        assert_eq!(
            n.named(&Phase::call("read_file", 4), 0, &comps("/a/b")),
            None
        );
        // The folders on the way, as resolving the path looks at them.
        assert_eq!(
            n.named(&Phase::call("read_file", 2), 0, &comps("/home/ana/.aws")),
            Some("options.path")
        );
        assert_eq!(
            n.named(
                &Phase::call("read_file", 3),
                0,
                &comps("/home/ana/projects/api")
            ),
            Some("path")
        );
        assert_eq!(
            n.named(&Phase::call("read_file", 2), 0, &comps("/home/ana/.ssh")),
            None
        );
    }
}
