//! `checks.lock`: a content hash of every check's logic, so that a change of logic without a
//! version bump fails the tests, and `retractions.json`: check versions found defective.
//!
//! A hash covers the check's source files (its own module and the shared modules it uses, as
//! listed in [`crate::CheckInfo::sources`], `outcome.rs` among them: where `pass`,
//! `not-observed` and the rest are decided) whole, but for their test code: every item under
//! `#[cfg(test)]` (the test module, a test helper), found by reading the source as Rust
//! (comments, strings, raw strings and character literals skipped, braces matched), not by
//! cutting at the first `#[cfg(test)]`; whitespace does not count. To accept a change: bump
//! the check's version, then run `UPDATE_CHECKS_LOCK=1 cargo test -p glassbox-checks lock`.

use serde::Deserialize;

/// The lock file, as built into this binary (part of the build id of a selftest record).
pub const LOCK: &str = include_str!("../checks.lock");

/// A defective check version, named with the reason and the date it was retracted.
#[derive(Clone, Debug, Deserialize, PartialEq, Eq)]
pub struct Retraction {
    /// Check id.
    pub id: String,
    /// The defective version.
    pub version: u32,
    /// Why it was retracted.
    pub reason: String,
    /// When (YYYY-MM-DD).
    pub date: String,
    /// Only its results of this outcome are withdrawn (`pass`: its claim was wrong where its
    /// findings were not); absent: all of them.
    #[serde(default)]
    pub outcome: Option<glassbox_model::Outcome>,
    /// Only in runs whose evidence shows this; absent: in every run.
    #[serde(default)]
    pub only_with: Option<Condition>,
}

/// What a run's evidence must show for a retraction to apply.
#[derive(Clone, Copy, Debug, Deserialize, PartialEq, Eq)]
#[serde(rename_all = "kebab-case")]
pub enum Condition {
    /// A TCP stream that began with a TLS ClientHello (its `tls` record, its SNI, or, for
    /// bundles from before the edge recorded either, a TCP flow to port 443): what a version
    /// that read only a ClientHello's SNI could not read.
    TlsFlows,
    /// A flow whose content the edge could not read (`unread`, or TLS recorded by an edge
    /// that did not terminate it), the install's connections relayed to the registry aside.
    UnreadFlows,
    /// A flow that carried bytes the edge read (a payload, decrypted bytes, an HTTP
    /// exchange): what a version that did not unwrap compressed or twice-encoded data may
    /// have missed a secret in.
    PayloadFlows,
    /// The audit stored destinations explained by the words of the package's own name
    /// (`manifest.network.explained`, `by: package-name`): what no version may explain now.
    PackageNamed,
    /// The entry declared a secret whose name names a vendor: a version that explained that
    /// vendor's word under any suffix, or a tenant's name on its provider's shared domain,
    /// may have explained what nothing explains.
    VendorNamedSecrets,
}

impl Condition {
    /// Whether the run's `manifest` and `flows` show it.
    pub fn holds(
        self,
        manifest: &glassbox_model::Manifest,
        flows: &[glassbox_model::Flow],
    ) -> bool {
        match self {
            Condition::PackageNamed => manifest
                .network
                .explained
                .iter()
                .any(|e| e.by == "package-name"),
            Condition::VendorNamedSecrets => manifest.sandbox.honeytokens.iter().any(|h| {
                h.kind == "declared-secret"
                    && h.path
                        .strip_prefix("env:")
                        .is_some_and(|n| !crate::explain::vendor_words(n).is_empty())
            }),
            Condition::TlsFlows => flows.iter().any(|f| {
                f.tls.is_some()
                    || f.sni.is_some()
                    || (f.protocol == glassbox_model::FlowProtocol::Tcp
                        && matches!(
                            &f.dst,
                            glassbox_model::SockAddr::Inet { port: 443, .. }
                                | glassbox_model::SockAddr::Inet6 { port: 443, .. }
                        ))
            }),
            Condition::UnreadFlows => !crate::canary_exfiltration::unread(flows, |f| {
                !crate::canary_exfiltration::relayed(f)
            })
            .is_empty(),
            Condition::PayloadFlows => flows.iter().any(|f| {
                !f.sample.is_empty() || !f.cleartext.is_empty() || !f.exchanges.is_empty()
            }),
        }
    }
}

/// Every retraction, as built into this binary.
pub fn retractions() -> Vec<Retraction> {
    serde_json::from_str(include_str!("../retractions.json")).unwrap_or_default()
}

/// The retraction of check `id` at `version`, if it was retracted.
pub fn retraction(id: &str, version: u32) -> Option<Retraction> {
    retractions()
        .into_iter()
        .find(|r| r.id == id && r.version == version)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::registry;
    use sha2::{Digest, Sha256};

    fn source(name: &str) -> &'static str {
        match name {
            "credential_probe.rs" => include_str!("credential_probe.rs"),
            // The execution canaries' payloads and the rule that reads their ids back.
            "../../model/src/exec_probe.rs" => include_str!("../../model/src/exec_probe.rs"),
            "process_spawn.rs" => include_str!("process_spawn.rs"),
            "persistence.rs" => include_str!("persistence.rs"),
            "paths.rs" => include_str!("paths.rs"),
            "flags.rs" => include_str!("flags.rs"),
            "text.rs" => include_str!("text.rs"),
            "exfil.rs" => include_str!("exfil.rs"),
            "json.rs" => include_str!("json.rs"),
            "runtime_instructions.rs" => include_str!("runtime_instructions.rs"),
            "credential_phishing.rs" => include_str!("credential_phishing.rs"),
            "resource_abuse.rs" => include_str!("resource_abuse.rs"),
            "left_behind.rs" => include_str!("left_behind.rs"),
            "description_exfil_pattern.rs" => include_str!("description_exfil_pattern.rs"),
            "net.rs" => include_str!("net.rs"),
            "unexplained_egress.rs" => include_str!("unexplained_egress.rs"),
            "explain.rs" => include_str!("explain.rs"),
            "denied_network_attempts.rs" => include_str!("denied_network_attempts.rs"),
            "doh.rs" => include_str!("doh.rs"),
            "unix_socket.rs" => include_str!("unix_socket.rs"),
            "canary_exfiltration.rs" => include_str!("canary_exfiltration.rs"),
            "sandbox_evasion.rs" => include_str!("sandbox_evasion.rs"),
            "input_exposure.rs" => include_str!("input_exposure.rs"),
            "named.rs" => include_str!("named.rs"),
            "tool_definition_drift.rs" => include_str!("tool_definition_drift.rs"),
            "links.rs" => include_str!("links.rs"),
            "layers.rs" => include_str!("layers.rs"),
            "dual.rs" => include_str!("dual.rs"),
            "outcome.rs" => include_str!("outcome.rs"),
            "verdict.rs" => include_str!("verdict.rs"),
            "trigger_only.rs" => include_str!("trigger_only.rs"),
            other => panic!("{other} is not a known check source: add it to lock.rs"),
        }
    }

    fn hash(sources: &[&str]) -> String {
        let mut h = Sha256::new();
        for s in sources {
            // The logic, not its unit tests.
            let logic = without_tests(source(s));
            h.update(s.as_bytes());
            h.update([0]);
            // Whitespace does not count: reformatting is not a change of logic.
            let compact: Vec<u8> = logic.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
            h.update(&compact);
        }
        h.finalize().iter().map(|b| format!("{b:02x}")).collect()
    }

    /// Where the comment, string or character literal starting at `i` ends, if one does (a
    /// lifetime is none).
    fn literal_end(b: &[u8], i: usize) -> Option<usize> {
        let ident = |c: u8| c.is_ascii_alphanumeric() || c == b'_';
        match b.get(i..)? {
            [b'/', b'/', ..] => Some(
                b[i..]
                    .iter()
                    .position(|&c| c == b'\n')
                    .map_or(b.len(), |n| i + n),
            ),
            [b'/', b'*', ..] => {
                let (mut depth, mut j) = (0usize, i);
                while j < b.len() {
                    if b[j..].starts_with(b"/*") {
                        depth += 1;
                        j += 2;
                    } else if b[j..].starts_with(b"*/") {
                        depth -= 1;
                        j += 2;
                        if depth == 0 {
                            return Some(j);
                        }
                    } else {
                        j += 1;
                    }
                }
                Some(b.len())
            }
            [b'"', ..] => {
                let mut j = i + 1;
                while j < b.len() && b[j] != b'"' {
                    j += if b[j] == b'\\' { 2 } else { 1 };
                }
                Some((j + 1).min(b.len()))
            }
            // A raw string (`r"…"`, `r#"…"#`, `br…`, `cr…`): the `r` starts no identifier.
            [b'r', ..] if i == 0 || !ident(b[i - 1]) || matches!(&b[i - 1..i], b"b" | b"c") => {
                let hashes = b[i + 1..].iter().take_while(|&&c| c == b'#').count();
                if b.get(i + 1 + hashes) != Some(&b'"') {
                    return None;
                }
                let mut close = vec![b'"'];
                close.extend(std::iter::repeat_n(b'#', hashes));
                let from = i + 2 + hashes;
                Some(
                    b[from..]
                        .windows(close.len())
                        .position(|w| w == close.as_slice())
                        .map_or(b.len(), |n| from + n + close.len()),
                )
            }
            [b'\'', b'\\', ..] => {
                let mut j = i + 2;
                while j < b.len() && b[j] != b'\'' {
                    j += if b[j] == b'\\' { 2 } else { 1 };
                }
                Some((j + 1).min(b.len()))
            }
            [b'\'', ..] => {
                // One character then a quote: a literal; otherwise a lifetime or a label.
                let c = std::str::from_utf8(&b[i + 1..])
                    .ok()
                    .and_then(|s| s.chars().next())?;
                let end = i + 1 + c.len_utf8();
                (b.get(end) == Some(&b'\'')).then_some(end + 1)
            }
            _ => None,
        }
    }

    /// The end of the item that starts at or after `i` (past its attributes): its `;`, or the
    /// brace that closes its body.
    fn item_end(b: &[u8], mut i: usize) -> usize {
        let mut depth = 0i32;
        while i < b.len() {
            if let Some(end) = literal_end(b, i) {
                i = end;
                continue;
            }
            match b[i] {
                b'(' | b'[' => depth += 1,
                b')' | b']' => depth -= 1,
                b';' if depth == 0 => return i + 1,
                b'{' if depth == 0 => {
                    let mut braces = 0;
                    while i < b.len() {
                        if let Some(end) = literal_end(b, i) {
                            i = end;
                            continue;
                        }
                        match b[i] {
                            b'{' => braces += 1,
                            b'}' => {
                                braces -= 1;
                                if braces == 0 {
                                    return i + 1;
                                }
                            }
                            _ => {}
                        }
                        i += 1;
                    }
                    return b.len();
                }
                _ => {}
            }
            i += 1;
        }
        b.len()
    }

    /// `src` without its test code: every item under `#[cfg(test)]`.
    fn without_tests(src: &str) -> String {
        let b = src.as_bytes();
        let mut out = Vec::with_capacity(b.len());
        let mut i = 0;
        while i < b.len() {
            if let Some(end) = literal_end(b, i) {
                out.extend_from_slice(&b[i..end]);
                i = end;
                continue;
            }
            if b[i] == b'#' {
                let attr: Vec<u8> = b[i..]
                    .iter()
                    .take(64)
                    .copied()
                    .filter(|c| !c.is_ascii_whitespace())
                    .collect();
                if attr.starts_with(b"#[cfg(test)]") {
                    i = item_end(
                        b,
                        i + 1 + b[i + 1..].iter().position(|&c| c == b']').unwrap_or(0) + 1,
                    );
                    continue;
                }
            }
            out.push(b[i]);
            i += 1;
        }
        String::from_utf8(out).expect("cut at ASCII boundaries")
    }

    #[test]
    fn test_code_is_cut_wherever_it_is_and_only_it() {
        let src = r##"
use x;
/// Keeps `#[cfg(test)]` in a doc comment: not an attribute.
const A: &str = "}#[cfg(test)] { in a string";
const R: &str = r#"" } "#;
const C: char = '}';
const Q: char = '\'';
fn logic<'a>(x: &'a str) -> &'a str { if x == "{" { x } else { "}" } }
#[cfg(test)]
fn helper() -> u8 { let s = "}"; /* } */ 1 }
const AFTER_HELPER: u8 = 2;
#[cfg(test)]
mod tests {
    fn t() { let c = '{'; let r = r"}"; }
    // }
}
const AFTER_TESTS: u8 = 3;
#[cfg(test)]
mod file_tests;
const LAST: u8 = 4;
"##;
        let kept = without_tests(src);
        for want in [
            "const A",
            "const R",
            "const C",
            "const Q",
            "fn logic<'a>",
            "AFTER_HELPER",
            "AFTER_TESTS",
            "LAST",
        ] {
            assert!(kept.contains(want), "{want} cut from:\n{kept}");
        }
        for gone in ["fn helper", "mod tests", "fn t()", "file_tests"] {
            assert!(!kept.contains(gone), "{gone} kept in:\n{kept}");
        }
    }

    /// The lesson of issue 31: a test helper a quarter of the way into `exfil.rs` once ended
    /// what was hashed, leaving its rule lists in no hash.
    #[test]
    fn every_source_is_hashed_past_its_first_test_item() {
        let mut past = Vec::new();
        let sources = registry()
            .iter()
            .flat_map(|c| c.info.sources.iter().copied())
            .chain(["verdict.rs"]);
        for name in sources {
            let text = source(name);
            let Some(first) = text.find("#[cfg(test)]") else {
                continue;
            };
            let after = item_end(text.as_bytes(), first + "#[cfg(test)]".len());
            let next = text[after..]
                .find("#[cfg(test)]")
                .map_or(text.len(), |n| after + n);
            let compact = |t: &str| t.split_whitespace().collect::<String>();
            let region = compact(&text[after..next]);
            if region.is_empty() {
                continue;
            }
            assert!(
                compact(&without_tests(text)).contains(&region),
                "{name}: what follows its first test item is not hashed"
            );
            past.push(name);
        }
        assert!(past.contains(&"exfil.rs"), "{past:?}");
    }

    /// A check whose logic reads `open` or `stat` events says so (`file_calls`): a run that
    /// lost records of those families must blind it.
    #[test]
    fn a_check_that_reads_file_calls_says_so() {
        for c in registry() {
            let reads = c.info.sources.iter().any(|s| {
                let text = without_tests(source(s));
                text.contains("EventKind::Open") || text.contains("EventKind::Stat")
            });
            assert_eq!(reads, c.info.file_calls, "{}", c.info.id);
        }
    }

    #[derive(Deserialize, serde::Serialize, Debug, Clone, PartialEq)]
    struct Entry {
        id: String,
        version: u32,
        sha256: String,
    }

    #[test]
    fn lock_matches_the_checks_logic_or_their_version_was_bumped() {
        let locked: Vec<Entry> = serde_json::from_str(LOCK).expect("checks.lock is JSON");
        let mut now = Vec::new();
        let mut problems = Vec::new();
        // Every check, and the verdict's rule.
        let entries = registry()
            .iter()
            .map(|c| (c.info.id, c.info.version, c.info.sources))
            .chain([("verdict", crate::verdict::VERSION, &["verdict.rs"][..])]);
        for (id, version, sources) in entries {
            let e = Entry {
                id: id.into(),
                version,
                sha256: hash(sources),
            };
            match locked.iter().find(|l| l.id == e.id) {
                Some(l) if l.version == e.version && l.sha256 != e.sha256 => problems.push(format!(
                    "{} changed without a version bump (still v{}): bump its version, then \
                     UPDATE_CHECKS_LOCK=1 cargo test -p glassbox-checks lock",
                    e.id, e.version
                )),
                Some(l) if l.version > e.version => {
                    problems.push(format!("{} went back from v{} to v{}", e.id, l.version, e.version))
                }
                Some(l) if l == &e => {}
                _ if std::env::var_os("UPDATE_CHECKS_LOCK").is_some() => {}
                _ => problems.push(format!(
                    "{} v{} is not in checks.lock: UPDATE_CHECKS_LOCK=1 cargo test -p glassbox-checks lock",
                    e.id, e.version
                )),
            }
            now.push(e);
        }
        if std::env::var_os("UPDATE_CHECKS_LOCK").is_some() && problems.is_empty() {
            let text = serde_json::to_string_pretty(&now).unwrap() + "\n";
            std::fs::write(concat!(env!("CARGO_MANIFEST_DIR"), "/checks.lock"), text).unwrap();
            return;
        }
        assert!(problems.is_empty(), "{}", problems.join("\n"));
    }

    #[test]
    fn no_current_check_version_is_retracted() {
        for c in registry() {
            assert!(
                retraction(c.info.id, c.info.version).is_none(),
                "{} v{} is retracted: fix it and bump its version",
                c.info.id,
                c.info.version
            );
        }
        for r in retractions() {
            assert!(!r.reason.is_empty() && r.date.len() == 10, "{r:?}");
        }
    }
}
