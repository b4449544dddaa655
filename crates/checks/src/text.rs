//! Building the one-line summaries of findings: escaping, argv, phase lists, grouping.

use glassbox_model::Phase;
use std::collections::HashMap;
use std::hash::Hash;

pub(crate) use glassbox_model::printable as escape;

/// A phase as text, escaped (a tool name comes from the server).
pub(crate) fn phase(p: &Phase) -> String {
    escape(&p.to_string())
}

/// Distinct phases, in order, as `a, b and N more`.
pub(crate) fn phases(ps: &[Phase]) -> String {
    const SHOWN: usize = 3;
    let mut out: Vec<String> = ps.iter().take(SHOWN).map(phase).collect();
    if ps.len() > SHOWN {
        out.push(format!("{} more phases", ps.len() - SHOWN));
    }
    out.join(", ")
}

pub(crate) use glassbox_model::argv_line as argv;

/// Events grouped by a key, in order of first appearance.
#[derive(Debug)]
pub(crate) struct Groups<K, V> {
    index: HashMap<K, usize>,
    /// The groups, in order of first appearance.
    pub(crate) items: Vec<Group<K, V>>,
    /// Events that belonged to no kept group (past [`MAX_GROUPS`]).
    pub(crate) overflow: u64,
}

/// Event ids kept per group: a finding points at its first events; how many there were in all
/// is `count`. Memory then grows with what the checks find, not with the trace.
pub(crate) const MAX_IDS: usize = 100;

/// Groups kept per check (distinct paths, distinct processes): past that, events are counted
/// in [`Groups::overflow`] and reported as one line, so a hostile trace of millions of distinct
/// items cannot exhaust memory, and a check that had something to flag still flags.
pub(crate) const MAX_GROUPS: usize = 10_000;

/// One group: the key, the events' ids and distinct phases, and data accumulated by the check.
#[derive(Debug)]
pub(crate) struct Group<K, V> {
    pub(crate) key: K,
    /// The first [`MAX_IDS`] event ids.
    pub(crate) ids: Vec<u64>,
    /// How many events in all.
    pub(crate) count: u64,
    pub(crate) phases: Vec<Phase>,
    pub(crate) data: V,
}

impl<K: Hash + Eq + Clone, V: Default> Groups<K, V> {
    pub(crate) fn new() -> Self {
        Groups {
            index: HashMap::new(),
            items: Vec::new(),
            overflow: 0,
        }
    }

    /// Adds an event to the group of `key` and returns the group's data; `None` (the event
    /// counted in `overflow`) when the key is new and [`MAX_GROUPS`] groups exist already.
    pub(crate) fn add(&mut self, key: K, id: u64, phase: &Phase) -> Option<&mut V> {
        let n = match self.index.get(&key) {
            Some(&n) => n,
            None if self.items.len() >= MAX_GROUPS => {
                self.overflow += 1;
                return None;
            }
            None => {
                self.items.push(Group {
                    key: key.clone(),
                    ids: Vec::new(),
                    count: 0,
                    phases: Vec::new(),
                    data: V::default(),
                });
                self.index.insert(key, self.items.len() - 1);
                self.items.len() - 1
            }
        };
        let g = &mut self.items[n];
        g.count += 1;
        if g.ids.len() < MAX_IDS {
            g.ids.push(id);
        }
        if !g.phases.contains(phase) {
            g.phases.push(phase.clone());
        }
        Some(&mut g.data)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use glassbox_model::Bytes;

    #[test]
    fn argv_is_escaped_quoted_and_cut() {
        let a = vec![
            Bytes::from("sh"),
            Bytes::from("-c"),
            Bytes::from("echo hi\n\x1b[2J"),
        ];
        assert_eq!(argv(&a, 200), "sh -c 'echo hi\\n\\u{1b}[2J'");
        let long = vec![Bytes::from("x".repeat(500))];
        let s = argv(&long, 200);
        assert_eq!(s.chars().count(), 200);
        assert!(s.ends_with('…'));
    }

    #[test]
    fn phase_lists_are_capped_and_escaped() {
        let ps = vec![
            Phase::Startup,
            Phase::Call("a\x1b".into()),
            Phase::List,
            Phase::Shutdown,
            Phase::Initialize,
        ];
        assert_eq!(phases(&ps), "startup, call:a\\u{1b}, list, 2 more phases");
    }
}
