//! What dual execution says of a planted secret's value (`manifest.dual`, made by the audit:
//! a call in which a planted file was read and bytes the edge read left for a host not its
//! service, made again with fresh values and with the same values; LDX, ASPLOS 2016).
//!
//! - the bytes sent the same with the same values and different with fresh ones: they depend
//!   on the secret. When at least as many of them changed as the file's longest secret has
//!   random bytes, they can carry it: the value left, encoded ([`DualFate::Encoded`]). Fewer
//!   cannot carry it (a digest of the key, a length): something derived from it left
//!   ([`DualFate::Derived`]), said, not an accusation;
//! - the same in all three runs: they do not depend on the secret ([`DualFate::Independent`]);
//! - different between the two runs with the same values (a nonce, a timestamp), or a run
//!   missing: whether the value left is not known ([`DualFate::Unknown`]), which accuses as an
//!   unread flow does.

use glassbox_model::{DualRecord, Honeytoken};

/// What one record says.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum DualFate {
    /// The bytes changed with the secret, enough of them to carry it.
    Encoded { varying: u64, bytes: u64 },
    /// The bytes changed with the secret, too few to carry it.
    Derived { varying: u64, random: u64 },
    /// The bytes did not change with the secret.
    Independent,
    /// Not known, and why.
    Unknown(String),
}

/// The fate the record `r` gives the secrets it read (`tokens`: the manifest's honeytokens).
pub(crate) fn fate(r: &DualRecord, tokens: &[Honeytoken]) -> DualFate {
    let run = |name: &str| r.runs.iter().find(|x| x.run == name);
    let (Some(original), Some(same), Some(fresh)) = (run("original"), run("same"), run("fresh"))
    else {
        return DualFate::Unknown(match &r.note {
            Some(n) => format!("the call could not be made again ({n})"),
            None => "the call could not be made again".into(),
        });
    };
    if original.sha256 != same.sha256 {
        return DualFate::Unknown(format!(
            "what it sent differs between two runs with the same secrets ({} and {} bytes): \
             it varies anyway",
            original.bytes, same.bytes
        ));
    }
    if original.sha256 == fresh.sha256 {
        return DualFate::Independent;
    }
    // The longest random part of the secrets read: what the changed bytes must at least hold
    // to carry the file's secret (a file holds several: an AWS key id's 16 random characters
    // beside its secret key's 40; a 16-character digest of the secret key changes as much as
    // the key id would, and carries neither). So a key id alone XOR-ed out of a file that
    // also holds a longer secret is said derived, not encoded: a known limit.
    let random = tokens
        .iter()
        .filter(|t| r.secrets.contains(&t.path))
        .flat_map(|t| {
            if t.random.is_empty() {
                &t.secrets
            } else {
                &t.random
            }
        })
        .map(|s| s.len() as u64)
        .max()
        .unwrap_or(12)
        .max(12);
    if r.varying >= random {
        DualFate::Encoded {
            varying: r.varying,
            bytes: original.bytes,
        }
    } else {
        DualFate::Derived {
            varying: r.varying,
            random,
        }
    }
}

/// What a fate says, for a summary: the phase, where its flows went, and how the runs
/// compared.
pub(crate) fn said(r: &DualRecord, f: &DualFate) -> String {
    let during = match r.destinations.as_slice() {
        [] => crate::text::phase(&r.phase),
        d => format!("{} to {}", crate::text::phase(&r.phase), d.join(", ")),
    };
    match f {
        DualFate::Encoded { varying, bytes } => format!(
            "what {during} sent ({bytes} bytes), encoded: {varying} of its bytes changed with \
             fresh secrets and none between two runs with the same ones (dual execution)"
        ),
        DualFate::Derived { varying, random } => format!(
            "what {during} sent changed with the planted secret, but only {varying} bytes of \
             it, fewer than the secret's {random} random ones: something derived from it (a \
             digest, a length) left, not the value (dual execution)"
        ),
        DualFate::Independent => {
            format!("what {during} sent did not change with the planted secret (dual execution)")
        }
        DualFate::Unknown(why) => format!("dual execution of {during}: {why}"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use glassbox_model::{DualRun, Phase};

    fn rec(o: &str, s: Option<&str>, f: Option<&str>, varying: u64) -> DualRecord {
        let run = |name: &str, h: &str| DualRun {
            run: name.into(),
            bytes: 100,
            sha256: h.into(),
            flows: 1,
        };
        let mut runs = vec![run("original", o)];
        runs.extend(s.map(|h| run("same", h)));
        runs.extend(f.map(|h| run("fresh", h)));
        DualRecord {
            phase: Phase::call("t", 1),
            secrets: vec!["/h/.ssh/id".into()],
            destinations: vec!["c.example".into()],
            runs,
            varying,
            note: None,
        }
    }

    #[test]
    fn the_runs_compared() {
        let tokens = [Honeytoken {
            path: "/h/.ssh/id".into(),
            kind: "ssh".into(),
            secrets: vec!["x".repeat(400)],
            random: vec!["r".repeat(68)],
            ..Default::default()
        }];
        assert_eq!(
            fate(&rec("a", Some("a"), Some("b"), 90), &tokens),
            DualFate::Encoded {
                varying: 90,
                bytes: 100
            }
        );
        assert_eq!(
            fate(&rec("a", Some("a"), Some("b"), 16), &tokens),
            DualFate::Derived {
                varying: 16,
                random: 68
            }
        );
        assert_eq!(
            fate(&rec("a", Some("a"), Some("a"), 0), &tokens),
            DualFate::Independent
        );
        assert!(matches!(
            fate(&rec("a", Some("c"), Some("b"), 90), &tokens),
            DualFate::Unknown(w) if w.contains("varies anyway")
        ));
        assert!(matches!(
            fate(&rec("a", None, None, 0), &tokens),
            DualFate::Unknown(w) if w.contains("could not be made again")
        ));
    }
}
