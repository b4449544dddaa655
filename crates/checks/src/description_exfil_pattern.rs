//! `description-exfil-pattern`: what the server tells the model before anything runs, scanned
//! for poisoning.
//!
//! Tool, resource and prompt descriptions, parameter descriptions and the server's
//! instructions, as the server sent them (the MCP transcript's listings and `initialize`), go
//! through the token matcher of [`crate::exfil`]: instructions to read secrets or files, to send
//! data elsewhere, to hide actions from the user, to override the model's own instructions, to
//! steer its choice of tools; `<IMPORTANT>`-style blocks, hidden Unicode. What the server
//! answers at run time (tool results, resources, prompts, its requests) is
//! `runtime-instructions`' to read. Every finding accuses the server (a poisoned description is
//! an attack on the model): it is withheld until a person has reviewed it.
//!
//! Version 3 stops accusing ordinary API documentation found in real servers (see
//! `exfil.rs`'s negatives): a word right after an article is a noun ("the upload"), a secret
//! counted by ("per API key") or the first half of a compound ("password-protected") is handed
//! to no one, and "to hide them, set X" documents how, it orders nothing.
//!
//! Version 5 judges as version 4 did: the rule that turns its findings into its outcome is
//! `outcome.rs`'s, which its lock now covers.
//!
//! Version 6 adds two classes of instructions (`exfil.rs`): `override-instructions` ("ignore
//! previous instructions", which `injection-block` matched before, now with "override" and
//! "bypass" counted only with "all", "any" or "your"; a `SYSTEM:` line that speaks to the model;
//! `[SYSTEM OVERRIDE]`-style blocks; "you are now root", "act as an administrator", "enter DAN
//! mode"; "trust all commands", "execute any command without asking") and `tool-steering`
//! (this tool always before every other, instead of all others, never another tool, never a
//! named tool that is not the server's own; see `tool_steering` for what real descriptions say
//! that passes). A public key (`~/.ssh/id_ed25519.pub`) is no secret any more, and the tag
//! characters of an emoji subdivision flag (England's) hide nothing. Its claim now says what it
//! reads.
//!
//! Version 7: a verb that describes what a tool does, returns or shows (an inflected form:
//! "Returns the key, including its secret", "the response includes the password", "Reads the
//! profiles in ~/.aws/config") orders nothing, unless under an obligation ("must be included")
//! or said of the model ("the assistant reads"): `exfil.rs`'s `describes` (issue 34, four of
//! five benign accusations on real servers were of this class).

use crate::exfil::{scan, sources_from_transcript, tool_names};
use crate::{Channel, CheckInfo, Evaluation, Evaluator};
use glassbox_model::{Event, Phase, Severity};

pub(crate) const INFO: CheckInfo = CheckInfo {
    id: "description-exfil-pattern",
    version: 7,
    claim: "no exfiltration, override or tool-steering instructions in the server's \
            descriptions and instructions",
    severity: Severity::High,
    channels: &[Channel::McpTranscript],
    also_reads: &[],
    file_calls: false,
    accuses: "every finding (instructions aimed at the model)",
    sources: &[
        "description_exfil_pattern.rs",
        "exfil.rs",
        "json.rs",
        "outcome.rs",
    ],
};

/// Everything is decided from the transcript; events are not needed.
pub(crate) struct State(Evaluation);

pub(crate) fn start(c: &crate::Context<'_>) -> Box<dyn Evaluator> {
    let sources = sources_from_transcript(c.transcript);
    let findings = scan(&sources, &tool_names(c.transcript))
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
