//! `checks.lock`: a content hash of every check's logic, so that a change of logic without a
//! version bump fails the tests, and `retractions.json`: check versions found defective.
//!
//! A hash covers the check's source files (its own module and the shared modules it uses, as
//! listed in [`crate::CheckInfo::sources`]) up to their unit tests, whitespace aside. To accept a change: bump the
//! check's version, then run `UPDATE_CHECKS_LOCK=1 cargo test -p glassbox-checks lock`.

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
}

impl Condition {
    /// Whether `flows` show it.
    pub fn holds(self, flows: &[glassbox_model::Flow]) -> bool {
        match self {
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
            "process_spawn.rs" => include_str!("process_spawn.rs"),
            "persistence.rs" => include_str!("persistence.rs"),
            "paths.rs" => include_str!("paths.rs"),
            "flags.rs" => include_str!("flags.rs"),
            "text.rs" => include_str!("text.rs"),
            "exfil.rs" => include_str!("exfil.rs"),
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
            "verdict.rs" => include_str!("verdict.rs"),
            other => panic!("{other} is not a known check source: add it to lock.rs"),
        }
    }

    fn hash(sources: &[&str]) -> String {
        let mut h = Sha256::new();
        for s in sources {
            let text = source(s);
            // The logic, not its unit tests.
            let logic = text.split("#[cfg(test)]").next().unwrap_or(text);
            h.update(s.as_bytes());
            h.update([0]);
            // Whitespace does not count: reformatting is not a change of logic.
            let compact: Vec<u8> = logic.bytes().filter(|b| !b.is_ascii_whitespace()).collect();
            h.update(&compact);
        }
        h.finalize().iter().map(|b| format!("{b:02x}")).collect()
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
