//! `input-exposure`: where the server takes what it is given.
//!
//! Every probe string in the generated tool arguments carries the audit's marker
//! (`manifest.session.input_marker`, the same in every run: `glassbox-<marker>`,
//! `glassbox-probe-<marker>.txt`, `https://example.test/<marker>`, `<marker>.example.test`,
//! `<marker>@example.test`). The marker is user input standing in for the real thing (a
//! query, a note, a file name), so where it goes, the user's data would go. Flagged:
//!
//! - the marker in anything that went towards the network edge, in a server run (the install
//!   run has no arguments): a flow's outbound bytes, its DNS question (also with its labels
//!   joined), TLS SNI, HTTP request target and `Host`, what the edge decrypted and read of its
//!   HTTP exchanges (targets, header values, decoded bodies), each as is and percent-decoded,
//!   the marker raw, hex, base64 or base64url (the canary check's fields and encodings), case
//!   ignored; the Unix canary sockets count too. A server run's flow the edge could not read
//!   makes the check `not-observed` (naming it) unless it flags: never `pass` over what it
//!   could not see (version 1 did, over TLS flows, and is retracted for runs with such flows);
//! - the marker in the path of a file opened for writing (or created) outside the workspace:
//!   neither under the working directory nor under `/tmp` or `/var/tmp` (scratch space any
//!   tool may use): the user's input naming a file in their home, say.
//!
//! Not flagged: the marker in the server's answers (that is the transcript, which stays
//! here), in files read, or in scratch files. A tool whose purpose is to send what it is
//! given (a fetcher, a search) is flagged during its own call: the finding names the tool, so
//! a reviewer sees whether that was the tool's job. Not an accusation.

use crate::canary::{encodings, fields, percent_decoded, unread};
use crate::flags::has_write_intent;
use crate::net::{self, Keyed, PhaseOf};
use crate::paths::NormPath;
use crate::text;
use crate::{Channel, CheckInfo, Evaluation, Evaluator};
use aho_corasick::AhoCorasick;
use glassbox_model::{Event, EventKind, NetworkMode, Severity};

pub(crate) const INFO: CheckInfo = CheckInfo {
    id: "input-exposure",
    version: 3,
    claim: "keeps tool input inside the sandbox and its workspace",
    severity: Severity::Medium,
    channels: &[
        Channel::Syscalls,
        Channel::McpTranscript,
        Channel::PacketEdge,
    ],
    accuses: "",
    sources: &[
        "input.rs",
        "canary.rs",
        "flags.rs",
        "net.rs",
        "paths.rs",
        "text.rs",
    ],
};

/// Folders where writing a file named by the input is ordinary: scratch space.
const SCRATCH: &[&str] = &["/tmp", "/var/tmp", "/dev/shm"];

/// One flagged destination or file.
#[derive(Debug, Default)]
struct Seen {
    shown: String,
    how: Vec<String>,
    modes: Vec<NetworkMode>,
    flows: Vec<u64>,
    ids: Vec<u64>,
}

/// The check's state over one run.
pub(crate) struct State {
    /// The server runs' flows the edge could not read (the input could have left there).
    unread: Vec<String>,
    marker: Option<(AhoCorasick, Vec<&'static str>)>,
    cwd: Vec<u8>,
    /// Destinations (by name) and files the marker reached.
    seen: Keyed<(bool, String), Seen>,
    phases: PhaseOf,
}

/// An automaton over the marker in every encoding searched, with each pattern's encoding name.
fn matcher(marker: &str) -> Option<(AhoCorasick, Vec<&'static str>)> {
    let (patterns, names): (Vec<Vec<u8>>, Vec<&'static str>) = encodings(marker.as_bytes())
        .into_iter()
        .map(|(p, e)| (p, e.name()))
        .unzip();
    let ac = AhoCorasick::builder()
        .ascii_case_insensitive(true)
        .build(&patterns)
        .ok()?;
    Some((ac, names))
}

pub(crate) fn start(c: &crate::Context<'_>) -> Box<dyn Evaluator> {
    let marker = c
        .manifest
        .session
        .input_marker
        .as_deref()
        .filter(|m| m.len() >= 4)
        .and_then(matcher);
    let mut s = State {
        unread: unread(c.flows, |f| f.mode != NetworkMode::Install),
        cwd: c.manifest.target.cwd.as_bytes().to_vec(),
        seen: Keyed::new(),
        phases: PhaseOf::default(),
        marker,
    };
    if let Some((ac, names)) = &s.marker {
        for f in c.flows.iter().filter(|f| f.mode != NetworkMode::Install) {
            let mut how = Vec::new();
            for (field, bytes) in fields(f) {
                let decoded = percent_decoded(&bytes);
                for hay in std::iter::once(&bytes).chain(decoded.as_ref()) {
                    for m in ac.find_overlapping_iter(hay) {
                        let h = format!("{} in {field}", names[m.pattern().as_usize()]);
                        if !how.contains(&h) {
                            how.push(h);
                        }
                    }
                }
            }
            if how.is_empty() {
                continue;
            }
            let dest = net::names(f)
                .first()
                .map(|(_, n)| net::show(n))
                .unwrap_or_else(|| net::addr(&f.dst));
            s.phases.want(&f.events);
            let Some(seen) = s.seen.get((false, dest.clone())) else {
                continue;
            };
            seen.shown = dest;
            for h in how {
                if !seen.how.contains(&h) {
                    seen.how.push(h);
                }
            }
            if !seen.modes.contains(&f.mode) {
                seen.modes.push(f.mode);
            }
            net::add_ids(&mut seen.flows, &[f.id]);
            net::add_ids(&mut seen.ids, &f.events);
        }
    }
    Box::new(s)
}

impl State {
    fn in_workspace(&self, path: &[u8]) -> bool {
        let under = |dir: &[u8]| {
            !dir.is_empty()
                && path.starts_with(dir)
                && matches!(path.get(dir.len()), None | Some(b'/'))
        };
        under(&self.cwd) || SCRATCH.iter().any(|d| under(d.as_bytes()))
    }
}

impl Evaluator for State {
    fn event(&mut self, e: &Event) {
        self.phases.see(e);
        let Some((ac, _)) = &self.marker else {
            return;
        };
        let EventKind::Open {
            syscall,
            path,
            flags,
            ..
        } = &e.kind
        else {
            return;
        };
        if !has_write_intent(syscall, *flags) || !ac.is_match(path.as_slice()) {
            return;
        }
        let norm = NormPath::resolve(path.as_slice(), &self.cwd);
        let mut full = Vec::new();
        for c in norm.components() {
            full.push(b'/');
            full.extend_from_slice(c);
        }
        if self.in_workspace(&full) {
            return;
        }
        let shown = glassbox_model::printable(&String::from_utf8_lossy(&full));
        self.phases.want(&[e.id]);
        self.phases.see(e);
        if let Some(seen) = self.seen.get((true, shown.clone())) {
            seen.shown = shown;
            net::add_ids(&mut seen.ids, &[e.id]);
        }
    }

    fn finish(self: Box<Self>) -> Evaluation {
        let State { seen, phases, .. } = *self;
        let mut findings = Vec::new();
        let overflow = seen.overflow;
        for ((file, _), s) in seen.items {
            let ps = phases.of(&s.ids);
            let mut summary = if file {
                format!(
                    "a file named by a tool argument was written outside the workspace: {} ({})",
                    s.shown,
                    net::count(s.ids.len() as u64, "open", "opens")
                )
            } else {
                format!(
                    "a tool argument left the sandbox towards {} ({}; {}) ({})",
                    s.shown,
                    s.how.join(", "),
                    net::count(s.flows.len() as u64, "flow", "flows"),
                    net::runs(&s.modes)
                )
            };
            if !ps.is_empty() {
                summary += &format!(" during {}", text::phases(&ps));
            }
            let mut f = INFO.finding(summary, s.ids, ps.first().cloned());
            f.flows = s.flows;
            findings.push(f);
        }
        let mut notes = Vec::new();
        if overflow > 0 {
            notes.push(INFO.finding(
                format!("{overflow} more destinations or files not listed"),
                Vec::new(),
                None,
            ));
        }
        Evaluation { findings, notes }
    }

    fn unread(&self) -> Vec<String> {
        self.unread.clone()
    }
}

/// The phase a finding is filed under, for tests.
#[cfg(test)]
fn phase_of(e: &Evaluation) -> Vec<Option<glassbox_model::Phase>> {
    e.findings.iter().map(|f| f.phase.clone()).collect()
}

#[cfg(test)]
pub(crate) fn evaluate(ev: &glassbox_model::Evidence) -> Evaluation {
    crate::evaluate_one(start, ev)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flags::{O_CREAT, O_WRONLY};
    const O_RDONLY: u64 = 0;
    use crate::testutil::{summaries, Ev, F};
    use glassbox_model::Phase;

    const M: &str = "gbm0a1b2c3d4e";

    #[test]
    fn the_marker_leaving_in_a_request_is_flagged_with_the_tool() {
        let ev = Ev::new()
            .marker(M)
            .connect("198.18.1.3:80", Phase::Call("search".into()))
            .flow(
                F::tcp("198.18.1.3:80")
                    .name("search.example")
                    .http(
                        "GET",
                        &format!("/q?term=glassbox-{M}"),
                        Some("search.example"),
                    )
                    .sample(format!("GET /q?term=glassbox-{M} HTTP/1.1\r\n").as_bytes())
                    .events(&[1]),
            )
            .build();
        let e = evaluate(&ev);
        assert_eq!(
            summaries(e.clone()),
            ["a tool argument left the sandbox towards search.example (as is in payload, as is in HTTP target; 1 flow) (capture run) during call:search"]
        );
        assert_eq!(phase_of(&e), [Some(Phase::Call("search".into()))]);
    }

    #[test]
    fn encoded_or_cut_into_dns_labels_it_is_still_found() {
        use base64::Engine as _;
        let b64 = base64::engine::general_purpose::STANDARD.encode(format!("user=glassbox-{M}"));
        let ev = Ev::new()
            .marker(M)
            .flow(
                F::tcp("198.18.1.4:443")
                    .name("c.example")
                    .sample(b64.as_bytes()),
            )
            .flow(F::dns(&format!("{}.{}.x.example", &M[..6], &M[6..]), "A"))
            .build();
        let s = summaries(evaluate(&ev));
        assert_eq!(s.len(), 2, "{s:?}");
        assert!(s[0].contains("base64 in payload"), "{}", s[0]);
        assert!(s[1].contains("DNS query"), "{}", s[1]);
    }

    #[test]
    fn a_file_named_by_the_input_outside_the_workspace_is_flagged_and_scratch_is_not() {
        let ev = Ev::new()
            .marker(M)
            .cwd("/work/app")
            .open(
                format!("/home/user/.notes/glassbox-probe-{M}.txt"),
                O_WRONLY | O_CREAT,
                Phase::Call("save".into()),
            )
            .open(
                format!("/tmp/glassbox-probe-{M}.txt"),
                O_WRONLY | O_CREAT,
                Phase::Call("save".into()),
            )
            .open(
                format!("/home/user/glassbox-probe-{M}.txt"),
                O_RDONLY,
                Phase::Call("read".into()),
            )
            .open(
                format!("glassbox-probe-{M}.txt"),
                O_WRONLY | O_CREAT,
                Phase::Call("save".into()),
            )
            .build();
        assert_eq!(
            summaries(evaluate(&ev)),
            [format!("a file named by a tool argument was written outside the workspace: /home/user/.notes/glassbox-probe-{M}.txt (1 open) during call:save")]
        );
    }

    #[test]
    fn answers_unmarked_traffic_and_unmarked_audits_pass() {
        // The marker only in the transcript (the server's answer): nothing left.
        let ev = Ev::new()
            .marker(M)
            .flow(
                F::tcp("198.18.1.3:443")
                    .name("api.example")
                    .sample(&b"GET / HTTP/1.1"[..]),
            )
            .build();
        assert_eq!(evaluate(&ev), Evaluation::default());
        // Another audit's marker is not this one's.
        let ev = Ev::new()
            .marker("gbmffffffffff")
            .flow(F::tcp("198.18.1.3:80").sample(format!("x={M}").as_bytes()))
            .build();
        assert_eq!(evaluate(&ev), Evaluation::default());
        // Evidence from before markers existed: nothing to follow.
        let ev = Ev::new()
            .flow(F::tcp("198.18.1.3:80").sample(format!("x={M}").as_bytes()))
            .build();
        assert_eq!(evaluate(&ev), Evaluation::default());
    }
}
