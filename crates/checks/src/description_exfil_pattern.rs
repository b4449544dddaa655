//! `description-exfil-pattern`: what the server tells the model, scanned for poisoning.
//!
//! Tool, resource and prompt descriptions, parameter descriptions and the server's
//! instructions, as the server sent them (the MCP transcript), go through the token matcher of
//! [`crate::exfil`]: instructions to read secrets or files, to send data elsewhere, to hide
//! actions from the user, `<IMPORTANT>`-style blocks, hidden Unicode. Every finding accuses the
//! server (a poisoned description is an attack on the model): it is withheld until a person
//! has reviewed it.
//!
//! Version 3 stops accusing ordinary API documentation found in real servers (see
//! `exfil.rs`'s negatives): a word right after an article is a noun ("the upload"), a secret
//! counted by ("per API key") or the first half of a compound ("password-protected") is handed
//! to no one, and "to hide them, set X" documents how, it orders nothing.
//!
//! Version 5 judges as version 4 did: the rule that turns its findings into its outcome is
//! `outcome.rs`'s, which its lock now covers.

use crate::exfil::{scan, sources_from_transcript};
use crate::{Channel, CheckInfo, Evaluation, Evaluator};
use glassbox_model::{Event, Phase, Severity};

pub(crate) const INFO: CheckInfo = CheckInfo {
    id: "description-exfil-pattern",
    version: 5,
    claim: "no exfiltration instructions in what the server tells the model",
    severity: Severity::High,
    channels: &[Channel::McpTranscript],
    also_reads: &[],
    accuses: "every finding (instructions aimed at the model)",
    sources: &["description_exfil_pattern.rs", "exfil.rs", "outcome.rs"],
};

/// Everything is decided from the transcript; events are not needed.
pub(crate) struct State(Evaluation);

pub(crate) fn start(c: &crate::Context<'_>) -> Box<dyn Evaluator> {
    let sources = sources_from_transcript(c.transcript);
    let findings = scan(&sources)
        .into_iter()
        .map(|m| {
            let what = sources
                .get(m.source_index)
                .map(|s| s.what.as_str())
                .unwrap_or("text");
            let mut f = INFO.finding(
                format!(
                    "{} ({}): {}",
                    glassbox_model::printable(what),
                    m.rule,
                    m.excerpt
                ),
                Vec::new(),
                Some(Phase::List),
            );
            f.accusation = true;
            f
        })
        .collect();
    Box::new(State(Evaluation {
        findings,
        notes: Vec::new(),
    }))
}

impl Evaluator for State {
    fn event(&mut self, _: &Event) {}

    fn finish(self: Box<Self>) -> Evaluation {
        self.0
    }
}
