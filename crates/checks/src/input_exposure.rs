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
//!   neither under the working directory, nor under `/tmp` or `/var/tmp` (scratch space any
//!   tool may use), nor in a folder the server's own arguments name (`server-filesystem
//!   /home/ana/notes`; not `/`, home, or a folder holding a planted secret): the user's input
//!   naming a file in their home, say.
//!
//! - what the input made a tool do (version 4), each "because the input named it": a file
//!   outside the workspace opened (read or written) during a call whose arguments named it
//!   ([`crate::named`]: the plan gives path parameters a planted credential, another
//!   project's `.env` and a `../` traversal), the tool's reach by path; a program run with the
//!   marker where it becomes code or picks the program (a shell's `-c` script, an
//!   interpreter's `-c`/`-e` code, the program's own name: command injection, or a tool that
//!   runs what it is given; the marker as an ordinary argument, which no shell splits, is a
//!   note since version 6: `kubectl get NAME` is how a client runs a program with input); a
//!   template expression of the input
//!   (`{{7*7}}`-style, after the marker) that came back evaluated (`49` after the marker in
//!   the server's answer to that call); and (version 5) a connection to the IP address of a
//!   URL the call's input gave, when that address is internal: the cloud metadata address the
//!   plan gives URL parameters (`manifest.session.metadata_probe`, or `169.254.169.254`), a
//!   private, link-local, loopback or shared address (server-side request forgery: the tool
//!   can be made to reach what only the machine it runs on can); a Unix socket whose path the
//!   call's input named, connected to during it (the plan gives a socket parameter the canary
//!   Docker socket; `unix-socket` keeps it as a note). A file tool that reads what
//!   it is told is doing its job: the finding says which call and argument named it, so a
//!   reviewer sees that.
//!
//! Not flagged: the marker in the server's answers (that is the transcript, which stays
//! here) other than an evaluated template, in files read, or in scratch files. The marker sent
//! to a destination something explains (version 6; [`crate::explain`]: the API the audited
//! entry names, a search tool's query to it; the host a URL of the call's own input named, a
//! fetcher's page) is a note that says by what: that is the tool doing its job. Sent anywhere
//! else it is flagged, naming the tool, so a reviewer sees whether that was the tool's job.
//! Not an accusation.
//!
//! Version 8 judges as version 7 did, but says `not-observed`, never `pass`, where the run lost
//! calls the recorder should have seen (`manifest.recorder.lost`: the rule is
//! `outcome.rs`'s, which its lock now covers).
//!
//! Version 9: what explains a destination as `unexplained-egress` version 7 says, and the
//! marker is searched in every form the secret search reads (`layers.rs`): inside zlib, gzip
//! and raw deflate streams and text encoded twice, so input compressed, then base64-encoded,
//! before it left is found.
//!
//! Version 10: what the input named includes the values glassbox gave a resource template's
//! variables and a prompt's arguments, under the read's or get's phase (`named.rs`), as it
//! includes a call's arguments.
//!
//! Version 11 (issue 33): execution proven by its side effect. The plan gives free strings,
//! by role, execution canaries ([`glassbox_model::exec_probe`]: Python and JavaScript code,
//! Jinja2 and the Python and JavaScript template engines' tags, shell metacharacters, a YAML
//! Python tag, a pickle, a module name, SQLite's `ATTACH`; a string of no known role gets the
//! shell polyglot). Each opens, only once an interpreter runs it, a path that holds the audit's
//! marker and the payload's id, which its text holds only in pieces. That path opened, looked
//! up, or given to a program, by any process of the server in any phase, is a finding that
//! names the interpreter the input reached and the call and argument that carried it (filed
//! under that call). A probe that only came back as text is not execution: the evaluated
//! template rule above stays apart from it. What the input named includes a host given
//! without a URL (`named.rs`), and a TLS flow that sent only its ClientHello before the edge
//! answered is read (issue 34); input found in an HTTP exchange was sent during the phase of
//! that exchange's time, not that of a kept-alive connection's `connect`.

use crate::canary_exfiltration::{encodings, fields_at, phase_at, unread, Encoding};
use crate::flags::has_write_intent;
use crate::layers::forms;
use crate::net::{self, Keyed, PhaseOf};
use crate::paths::NormPath;
use crate::text;
use crate::{Channel, CheckInfo, Evaluation, Evaluator};
use aho_corasick::AhoCorasick;
use glassbox_model::exec_probe;
use glassbox_model::{Direction, Event, EventKind, NetworkMode, Phase, Severity, SockAddr};
use std::net::IpAddr;

pub(crate) const INFO: CheckInfo = CheckInfo {
    id: "input-exposure",
    version: 12,
    claim: "keeps tool input inside the sandbox and its workspace",
    severity: Severity::Medium,
    channels: &[
        Channel::Syscalls,
        Channel::McpTranscript,
        Channel::PacketEdge,
    ],
    also_reads: &[],
    file_calls: true,
    accuses: "",
    sources: &[
        "input_exposure.rs",
        "links.rs",
        "explain.rs",
        "named.rs",
        "process_spawn.rs",
        "canary_exfiltration.rs",
        "flags.rs",
        "net.rs",
        "paths.rs",
        "text.rs",
        "outcome.rs",
        "layers.rs",
        "../../model/src/exec_probe.rs",
    ],
};

/// Folders where writing a file named by the input is ordinary: scratch space.
const SCRATCH: &[&str] = &["/tmp", "/var/tmp", "/dev/shm"];

/// What a finding is about.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum What {
    /// A destination the marker reached.
    Network,
    /// A destination the marker reached that something explains (the audited entry names it,
    /// or a URL of the call's own input did: [`crate::explain`]): a note.
    Explained,
    /// A file named by the marker written outside the workspace.
    Written,
    /// A file outside the workspace that a call's input named, opened during that call.
    Reached,
    /// A program whose command line carried the marker where it becomes code or chooses
    /// the program: a shell's script, an interpreter's `-c`/`-e` code, the program itself.
    Ran,
    /// A program given the marker as an ordinary argument (no shell reads it: `kubectl get
    /// NAME`): a note, the way to run a program with input (version 6).
    Passed,
    /// A template expression of the input evaluated in an answer.
    Evaluated,
    /// An internal address that a URL of the input named, connected to during its call.
    Fetched,
    /// A Unix socket the input named, connected to during its call.
    Socket,
    /// An execution canary of the input ran: its canary path was opened, looked at, or
    /// given to a program (version 11; keyed by the canary's id).
    Executed,
}

/// One flagged destination or file.
#[derive(Debug, Default)]
struct Seen {
    shown: String,
    how: Vec<String>,
    /// The phase it is filed under when no event gives one (an evaluated template is seen in
    /// the transcript).
    phase: Option<Phase>,
    modes: Vec<NetworkMode>,
    flows: Vec<u64>,
    ids: Vec<u64>,
    /// The phases that sent it in an HTTP exchange, by the exchange's time.
    sent: Vec<Phase>,
    /// Of `ids`, the calls of flows where it was found only in timed exchanges: a kept-alive
    /// connection's `connect`, whose phase is not the sending one's.
    not_when: Vec<u64>,
    /// What explains the destination ([`What::Explained`]).
    why: Option<String>,
}

/// The check's state over one run.
pub(crate) struct State {
    /// The server runs' flows the edge could not read (the input could have left there).
    unread: Vec<String>,
    marker: Option<(AhoCorasick, Vec<Encoding>)>,
    cwd: Vec<u8>,
    /// Folders the server's own arguments name (absolute, holding no planted secret): the
    /// user gave the server them to work in.
    given: Vec<Vec<u8>>,
    /// Destinations (by name) and files the marker reached.
    seen: Keyed<(What, String), Seen>,
    phases: PhaseOf,
    named: crate::named::Named,
    home: NormPath,
    /// The metadata address the plan gave URL parameters, if any.
    metadata: Option<IpAddr>,
    /// The audit's input marker, whose execution canaries are looked for.
    input_marker: String,
}

/// An automaton over the marker in every encoding searched, with each pattern's encoding name.
fn matcher(marker: &str) -> Option<(AhoCorasick, Vec<Encoding>)> {
    let (patterns, names): (Vec<Vec<u8>>, Vec<Encoding>) =
        encodings(marker.as_bytes()).into_iter().unzip();
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
        given: given_folders(c.manifest),
        seen: Keyed::new(),
        phases: PhaseOf::default(),
        marker,
        named: crate::named::Named::of(c.manifest),
        home: NormPath::new(c.manifest.sandbox.home.as_bytes()),
        metadata: c
            .manifest
            .session
            .metadata_probe
            .as_deref()
            .and_then(|a| a.parse().ok()),
        input_marker: c.manifest.session.input_marker.clone().unwrap_or_default(),
    };
    let explains = crate::explain::Explains::new(c.manifest);
    if let Some((ac, names)) = &s.marker {
        for f in c.flows.iter().filter(|f| f.mode != NetworkMode::Install) {
            let mut how = Vec::new();
            // When it was sent: an exchange's time says (a kept-alive connection carries later
            // phases' requests); elsewhere the flow's calls do.
            let mut sent = Vec::new();
            let mut untimed = false;
            for (field, bytes, t) in fields_at(f) {
                let stream = matches!(field, "payload" | "decrypted payload");
                if stream && !f.exchanges.is_empty() {
                    // The exchanges' parts, read where they say where and when.
                    continue;
                }
                // Every form the secret search reads: as is, percent-decoded, and unwrapped
                // (compressed streams, text encoded twice: `layers.rs`).
                for form in forms(&bytes) {
                    for m in ac.find_overlapping_iter(&form.bytes) {
                        let e = names[m.pattern().as_usize()];
                        let h = form.how((e != Encoding::Raw).then(|| e.name()), field);
                        if !how.contains(&h) {
                            how.push(h);
                        }
                        match phase_at(&c.manifest.timings, t).filter(|_| t > 0) {
                            Some(p) if !sent.contains(&p) => sent.push(p),
                            Some(_) => {}
                            None => untimed = true,
                        }
                    }
                }
            }
            if how.is_empty() {
                continue;
            }
            let names = net::names(f);
            let dest = names
                .first()
                .map(|(_, n)| net::show(n))
                .unwrap_or_else(|| net::addr(&f.dst));
            let ip = net::ip_port(&f.dst).map(|(ip, _)| ip.to_canonical().to_string());
            let why = if names.is_empty() {
                ip.as_deref().and_then(|ip| explains.why([ip], f.t_ns))
            } else {
                explains.why(names.iter().map(|(_, n)| n.as_str()), f.t_ns)
            };
            s.phases.want(&f.events);
            let what = match why {
                Some(_) => What::Explained,
                None => What::Network,
            };
            let Some(seen) = s.seen.get((what, dest.clone())) else {
                continue;
            };
            seen.shown = dest;
            if seen.why.is_none() {
                seen.why = why;
            }
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
            if !untimed {
                net::add_ids(&mut seen.not_when, &f.events);
            }
            for p in sent {
                if !seen.sent.contains(&p) {
                    seen.sent.push(p);
                }
            }
        }
    }
    Box::new(s)
}

/// Interpreters that run code given on their command line (`-c`, `-e`), by the basename of
/// the executed path or of `argv[0]` (with a version suffix: `python3.11`, `node20`).
fn is_interpreter(path: &[u8], argv0: &[u8]) -> bool {
    const INTERPRETERS: &[&str] = &[
        "python",
        "python2",
        "python3",
        "node",
        "nodejs",
        "deno",
        "bun",
        "perl",
        "ruby",
        "php",
        "lua",
        "osascript",
        "pwsh",
        "powershell",
    ];
    [path, argv0].iter().any(|p| {
        let name = String::from_utf8_lossy(crate::paths::basename(p)).to_ascii_lowercase();
        let stem = name.trim_end_matches(|c: char| c.is_ascii_digit() || c == '.');
        INTERPRETERS.contains(&stem) || INTERPRETERS.contains(&name.as_str())
    })
}

/// The folders the server's arguments name (`server-filesystem /home/ana/notes`): absolute
/// arguments after the program, normalized, that are not `/`, home, or a folder holding a
/// planted secret (a server given the whole home is still reported reaching into it); and the
/// sample workspace planted for the tools ([`glassbox_model::SandboxSettings::workspace`]).
fn given_folders(m: &glassbox_model::Manifest) -> Vec<Vec<u8>> {
    let home = NormPath::new(m.sandbox.home.as_bytes());
    let planted: Vec<NormPath> = m
        .sandbox
        .honeytokens
        .iter()
        .filter(|h| h.path.starts_with('/'))
        .map(|h| NormPath::new(h.path.as_bytes()))
        .collect();
    m.target
        .command
        .iter()
        .skip(1)
        .filter(|a| a.starts_with('/'))
        .map(|a| NormPath::new(a.as_bytes()))
        .chain(
            (!m.sandbox.workspace.is_empty())
                .then(|| NormPath::new(m.sandbox.workspace.as_bytes())),
        )
        .filter(|p| {
            !p.components().is_empty()
                && !home.starts_with(p)
                && !planted.iter().any(|h| h.starts_with(p))
        })
        .map(|p| p.to_bytes().0)
        .collect()
}

impl State {
    fn in_workspace(&self, path: &[u8]) -> bool {
        let under = |dir: &[u8]| {
            !dir.is_empty()
                && path.starts_with(dir)
                && matches!(path.get(dir.len()), None | Some(b'/'))
        };
        under(&self.cwd)
            || SCRATCH.iter().any(|d| under(d.as_bytes()))
            || self.given.iter().any(|d| under(d))
    }

    /// What an internal address is, or `None` for an address any fetch may reach.
    fn internal(&self, ip: IpAddr) -> Option<&'static str> {
        const CLOUD: &[&str] = &["169.254.169.254", "fd00:ec2::254"];
        if CLOUD.iter().any(|c| c.parse() == Ok(ip)) {
            return Some("the cloud metadata address");
        }
        if Some(ip) == self.metadata {
            // A documentation address given in its place (the selftest, the test suite).
            return Some("the stand-in for the cloud metadata address");
        }
        let internal = match ip {
            IpAddr::V4(v4) => {
                let [a, b, ..] = v4.octets();
                v4.is_private()
                    || v4.is_loopback()
                    || v4.is_link_local()
                    // 100.64.0.0/10, shared address space (carrier NAT, cloud VPCs).
                    || (a == 100 && (64..128).contains(&b))
            }
            IpAddr::V6(v6) => {
                let first = v6.segments()[0];
                v6.is_loopback()
                    // fc00::/7 unique local, fe80::/10 link-local.
                    || (first & 0xfe00) == 0xfc00
                    || (first & 0xffc0) == 0xfe80
                    || v6.to_ipv4_mapped().is_some_and(|v4| v4.is_private() || v4.is_loopback())
            }
        };
        internal.then_some("a private address")
    }

    fn note(&mut self, what: What, shown: String, how: Option<String>, e: &Event) {
        self.phases.want(&[e.id]);
        self.phases.see(e);
        if let Some(seen) = self.seen.get((what, shown.clone())) {
            seen.shown = shown;
            if let Some(h) = how {
                if !seen.how.contains(&h) {
                    seen.how.push(h);
                }
            }
            net::add_ids(&mut seen.ids, &[e.id]);
        }
    }
}

impl State {
    /// An execution canary's effect in `e`, if it is one: a path that only a payload that
    /// ran holds whole ([`exec_probe::parse`]), opened, looked at, or given to a program.
    fn canary(&mut self, e: &Event) {
        let Some((ac, _)) = &self.marker else {
            return;
        };
        // Borrowed as they are: this runs for every open, the trace's hot path.
        let (paths, how): (&[glassbox_model::Bytes], &str) = match &e.kind {
            EventKind::Open { path, .. } => (std::slice::from_ref(path), "opened"),
            EventKind::Stat { path, .. } => (std::slice::from_ref(path), "looked up"),
            EventKind::Exec { argv, .. } => (argv.as_slice(), "ran"),
            _ => return,
        };
        for p in paths.iter().map(|p| p.as_slice()) {
            if !ac.is_match(p) {
                continue;
            }
            let Some((_, id)) = exec_probe::parse(&self.input_marker, p) else {
                continue;
            };
            let shown = match &e.kind {
                EventKind::Exec { argv, .. } => {
                    format!("{how} {}", glassbox_model::argv_line(argv, 160))
                }
                _ => format!(
                    "{how} {}",
                    glassbox_model::printable(&String::from_utf8_lossy(p))
                ),
            };
            self.note(What::Executed, id, Some(shown), e);
            return;
        }
    }
}

impl Evaluator for State {
    fn event(&mut self, e: &Event) {
        self.phases.see(e);
        self.canary(e);
        match &e.kind {
            EventKind::Connect {
                addr:
                    SockAddr::Unix {
                        path,
                        is_abstract: false,
                    },
                ..
            } => {
                let norm = NormPath::resolve(path.as_slice(), &self.cwd);
                // A socket in the workspace or scratch space is the tool's own business.
                if self.in_workspace(&norm.to_bytes().0) {
                    return;
                }
                let Some(arg) = self.named.named(&e.phase, e.t_ns, norm.components()) else {
                    return;
                };
                let how = crate::named::argument(arg);
                let shown = crate::paths::display(&norm, &self.home);
                self.note(What::Socket, shown, Some(how), e);
            }
            EventKind::Connect { addr, .. } => {
                let (SockAddr::Inet { ip, .. } | SockAddr::Inet6 { ip, .. }) = addr else {
                    return;
                };
                let Ok(ip) = ip.parse::<IpAddr>() else {
                    return;
                };
                let Some(arg) = self.named.address(&e.phase, e.t_ns, ip) else {
                    return;
                };
                let Some(what) = self.internal(ip) else {
                    return;
                };
                let shown = format!("{what} {}", net::addr(addr));
                let how = crate::named::argument(arg);
                self.note(What::Fetched, shown, Some(how), e);
            }
            EventKind::Exec { path, argv, .. } => {
                let Some((ac, _)) = &self.marker else {
                    return;
                };
                let Some(at) = argv.iter().position(|a| ac.is_match(a.as_slice())) else {
                    return;
                };
                // `sh -c SCRIPT`: the input is in a script a shell runs (its words become
                // commands); `python -c CODE`, `node -e CODE`: code an interpreter runs; the
                // program's own name: the input chose what runs. Anywhere else it is an
                // argument of the program, which no shell splits (a note).
                let code_flag =
                    |a: &[u8]| matches!(a, b"-c" | b"-e" | b"--eval" | b"-p" | b"--print" | b"-E");
                let shell = at >= 2
                    && argv[at - 1].as_slice() == b"-c"
                    && crate::process_spawn::classify(path, argv)
                        == Some(crate::process_spawn::Kind::Shell);
                let interpreter = at >= 2
                    && code_flag(argv[at - 1].as_slice())
                    && is_interpreter(path.as_slice(), argv[0].as_slice());
                let (what, how) = if shell {
                    (What::Ran, "in a shell's script")
                } else if interpreter {
                    (What::Ran, "in the code an interpreter runs")
                } else if at == 0 || ac.is_match(path.as_slice()) {
                    (What::Ran, "as the program it runs")
                } else {
                    (What::Passed, "as its arguments")
                };
                let line = glassbox_model::argv_line(argv, 160);
                self.note(what, line, Some(how.to_string()), e);
            }
            EventKind::Open {
                syscall,
                path,
                flags,
                ..
            } => {
                let write = has_write_intent(syscall, *flags);
                let marked = self
                    .marker
                    .as_ref()
                    .is_some_and(|(ac, _)| ac.is_match(path.as_slice()));
                // Most opens are neither: no path is resolved for them.
                if !(self.named.has(&e.phase, e.t_ns) || (write && marked)) {
                    return;
                }
                let norm = NormPath::resolve(path.as_slice(), &self.cwd);
                let full = norm.to_bytes().0;
                if self.in_workspace(&full) {
                    return;
                }
                if let Some(arg) = self.named.named(&e.phase, e.t_ns, norm.components()) {
                    let how = format!(
                        "{} ({})",
                        if write { "written" } else { "read" },
                        crate::named::argument(arg)
                    );
                    let shown = crate::paths::display(&norm, &self.home);
                    self.note(What::Reached, shown, Some(how), e);
                    return;
                }
                if write && marked {
                    let shown = glassbox_model::printable(&String::from_utf8_lossy(&full));
                    self.note(What::Written, shown, None, e);
                }
            }
            _ => {}
        }
    }

    fn finish_with(mut self: Box<Self>, ctx: &crate::Context<'_>) -> Evaluation {
        // Which call sent each canary that ran: the finding is filed under it, whenever the
        // effect came (a tool may store its input and run it later).
        for ((what, id), seen) in &mut self.seen.items {
            if *what != What::Executed {
                continue;
            }
            let Some(kind) = exec_probe::Kind::of_id(id) else {
                continue;
            };
            let texts: Vec<String> = exec_probe::payloads(kind, &self.input_marker, id)
                .into_iter()
                .map(|(_, t)| t)
                .collect();
            let senders = sent(ctx.manifest, &texts);
            if let Some((phase, arg)) = senders.first() {
                seen.why = Some(format!(
                    "that {} of {} carried",
                    crate::named::argument(arg),
                    text::phase(phase)
                ));
                seen.phase = Some(phase.clone());
            }
        }
        if let Some((ac, _)) = &self.marker {
            let evaluated = evaluated_templates(ac, ctx);
            for phase in evaluated {
                let shown = text::phase(&phase);
                if let Some(seen) = self.seen.get((What::Evaluated, shown.clone())) {
                    seen.shown = shown;
                    seen.phase = Some(phase);
                }
            }
        }
        self.finish()
    }

    fn finish(self: Box<Self>) -> Evaluation {
        let State { seen, phases, .. } = *self;
        let mut findings = Vec::new();
        let mut notes = Vec::new();
        let overflow = seen.overflow;
        for ((what, _), s) in seen.items {
            let when: Vec<u64> = (s.ids.iter())
                .filter(|i| !s.not_when.contains(i))
                .copied()
                .collect();
            let mut ps = phases.of(&when);
            for p in &s.sent {
                if !ps.contains(p) {
                    ps.push(p.clone());
                }
            }
            let mut summary = match what {
                What::Explained => format!(
                    "a tool argument went towards {} ({}; {}) ({})",
                    s.shown,
                    s.how.join(", "),
                    net::count(s.flows.len() as u64, "flow", "flows"),
                    net::runs(&s.modes)
                ),
                What::Written => format!(
                    "a file named by a tool argument was written outside the workspace: {} ({})",
                    s.shown,
                    net::count(s.ids.len() as u64, "open", "opens")
                ),
                What::Network => format!(
                    "a tool argument left the sandbox towards {} ({}; {}) ({})",
                    s.shown,
                    s.how.join(", "),
                    net::count(s.flows.len() as u64, "flow", "flows"),
                    net::runs(&s.modes)
                ),
                What::Reached => format!(
                    "the tool opened a file outside the workspace because its input named it: \
                     {} ({}; {})",
                    s.shown,
                    s.how.join(", "),
                    net::count(s.ids.len() as u64, "open", "opens")
                ),
                What::Ran => format!(
                    "the tool ran a program with its input {}: {}",
                    s.how.join(", "),
                    s.shown
                ),
                What::Passed => format!(
                    "the tool passed its input to a program {} (no shell reads them): {}",
                    s.how.join(", "),
                    s.shown
                ),
                What::Evaluated => format!(
                    "a template expression in the input came back evaluated in the answer to \
                     {} (the tool renders its input as a template)",
                    s.shown
                ),
                What::Socket => format!(
                    "the tool connected to the Unix socket {} because its input named it ({}; \
                     {}): whatever listens there (the Docker daemon is root on the host) is \
                     within its caller's reach",
                    s.shown,
                    s.how.join(", "),
                    net::count(s.ids.len() as u64, "connect", "connects")
                ),
                What::Executed => {
                    let kind = exec_probe::Kind::of_id(&s.shown);
                    let proves = kind.map_or("an interpreter", exec_probe::Kind::proves);
                    let sender = s.why.as_deref().unwrap_or("(its call not found)");
                    let mut how = s.how.iter().take(3).cloned().collect::<Vec<_>>().join("; ");
                    if s.how.len() > 3 {
                        how += &format!("; {} more", s.how.len() - 3);
                    }
                    if kind == Some(exec_probe::Kind::Require) {
                        format!(
                            "the input reached {proves}: the module name {} {sender} was looked \
                             for where Node loads modules ({how})",
                            s.shown
                        )
                    } else {
                        format!(
                            "the input reached {proves}: the execution canary {} {sender} ran \
                             ({how}; a path its text holds only in pieces, joined when run)",
                            s.shown
                        )
                    }
                }
                What::Fetched => format!(
                    "the tool connected to {} because a URL of its input named it ({}; {}): it \
                     can be made to reach internal services (server-side request forgery)",
                    s.shown,
                    s.how.join(", "),
                    net::count(s.ids.len() as u64, "connect", "connects")
                ),
            };
            if !ps.is_empty() {
                summary += &format!(" during {}", text::phases(&ps));
            }
            if let Some(why) = s.why.as_ref().filter(|_| what != What::Executed) {
                summary = crate::explain::note(summary, why);
            }
            let phase = s.phase.or_else(|| ps.first().cloned());
            let mut f = INFO.finding(summary, s.ids, phase);
            f.flows = s.flows;
            match what {
                What::Explained | What::Passed => notes.push(f),
                _ => findings.push(f),
            }
        }
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

/// The calls, reads and gets whose input held one of `texts` as a string argument, each with
/// its phase and that argument's property path: which call sent an execution canary, whenever
/// its effect came. (Beside `named.rs`'s reading of the same inputs, which keeps at most 64
/// strings a call and reads them as paths; this looks for equal strings, at any depth.)
fn sent(manifest: &glassbox_model::Manifest, texts: &[String]) -> Vec<(Phase, String)> {
    fn walk(v: &serde_json::Value, at: &str, texts: &[String], out: &mut Vec<String>) {
        match v {
            serde_json::Value::String(s) if texts.contains(s) => out.push(at.to_string()),
            serde_json::Value::Object(o) => {
                for (k, sub) in o {
                    let at = if at.is_empty() {
                        k.clone()
                    } else {
                        format!("{at}.{k}")
                    };
                    walk(sub, &at, texts, out);
                }
            }
            serde_json::Value::Array(items) => items.iter().for_each(|i| walk(i, at, texts, out)),
            _ => {}
        }
    }
    let calls = manifest.session.tools.iter().flat_map(|tool| {
        tool.calls
            .iter()
            .map(|call| (Phase::call(&tool.name, call.k), &call.arguments))
    });
    let reads = (manifest.session.surface.iter())
        .flat_map(|s| &s.reads)
        .map(|r| (r.phase.clone(), &r.arguments));
    let mut out = Vec::new();
    for (phase, arguments) in calls.chain(reads) {
        let mut args = Vec::new();
        walk(arguments, "", texts, &mut args);
        out.extend(args.into_iter().map(|a| (phase.clone(), a)));
    }
    out
}

/// The probe after the marker whose evaluation is looked for (what the plan sends a template
/// parameter: `{{7*7}}`, `${7*7}`, `<%= 7*7 %>`, `#{7*7}`), and what evaluating any of them
/// gives.
const TEMPLATE: &str = "{{7*7}}";
const EVALUATED: &[u8] = b"49";
/// How far after the marker an evaluated expression is looked for.
const TEMPLATE_WINDOW: usize = 48;

/// The calls whose arguments held a template probe and whose answer has `49` within
/// [`TEMPLATE_WINDOW`] bytes after the marker (the probe itself has no `49` there), with the
/// answer's phase.
fn evaluated_templates(ac: &AhoCorasick, ctx: &crate::Context<'_>) -> Vec<Phase> {
    let mut probed = std::collections::HashSet::new();
    for tool in &ctx.manifest.session.tools {
        for call in &tool.calls {
            if call.arguments.to_string().contains(TEMPLATE) {
                probed.insert(Phase::call(&tool.name, call.k));
            }
        }
    }
    let mut out: Vec<Phase> = Vec::new();
    if probed.is_empty() {
        return out;
    }
    for t in ctx.transcript {
        if t.dir != Direction::ServerToClient || !probed.contains(&t.phase) {
            continue;
        }
        if out.contains(&t.phase) {
            continue;
        }
        let raw = t.raw.as_slice();
        // The window after each marker ends where the next marker begins: the marker's own
        // characters may hold `49`, and a probe that carries it more than once (the shell
        // polyglot) puts the next one inside the window.
        let marks: Vec<(usize, usize)> = ac.find_iter(raw).map(|m| (m.start(), m.end())).collect();
        let hit = marks.iter().enumerate().any(|(i, &(_, end))| {
            let next = marks
                .get(i + 1)
                .map_or(raw.len(), |&(start, _)| start.max(end));
            let after = &raw[end..next.min(end + TEMPLATE_WINDOW)];
            after.windows(EVALUATED.len()).any(|w| w == EVALUATED)
        });
        if hit {
            out.push(t.phase.clone());
        }
    }
    out
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

    /// On a kept-alive connection an earlier call opened, the input of the call that sent
    /// the request is what left, during that call (issue 34).
    #[test]
    fn input_sent_on_a_connection_an_earlier_call_opened_is_the_sending_call_s() {
        let (warm, search) = (Phase::Call("warm".into()), Phase::Call("search".into()));
        let mut ev = Ev::new()
            .marker(M)
            .connect("198.18.1.3:80", warm.clone())
            .flow(F::tcp("198.18.1.3:80").name("search.example").events(&[1]))
            .build();
        ev.manifest.timings = vec![
            glassbox_model::PhaseTiming {
                phase: warm.clone(),
                start_ns: 0,
                end_ns: 10_000,
            },
            glassbox_model::PhaseTiming {
                phase: search.clone(),
                start_ns: 10_000,
                end_ns: 20_000,
            },
        ];
        let exchange = |t: u64, target: String| -> glassbox_model::HttpExchange {
            serde_json::from_value(serde_json::json!({
                "t_ns": t, "method": "GET", "target": target, "status": 200,
            }))
            .unwrap()
        };
        ev.flows[0].exchanges = vec![
            exchange(5_000, "/ping".into()),
            exchange(15_000, format!("/q?term=glassbox-{M}")),
        ];
        let e = evaluate(&ev);
        assert_eq!(
            summaries(e.clone()),
            ["a tool argument left the sandbox towards search.example (as is in HTTP target; 1 flow) (capture run) during call:search"]
        );
        assert_eq!(phase_of(&e), [Some(search)]);
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

    /// Issue 31: input compressed, then base64-encoded, before it leaves is found (its bytes
    /// are in no encoding of the marker until unwrapped).
    #[test]
    fn compressed_then_encoded_it_is_still_found() {
        use base64::Engine as _;
        use std::io::Write;
        let mut z = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        z.write_all(format!("{{\"query\":\"glassbox-{M}\"}}").as_bytes())
            .unwrap();
        let packed = base64::engine::general_purpose::STANDARD.encode(z.finish().unwrap());
        let body = format!("{{\"d\":\"{packed}\"}}");
        assert!(!body.contains(M));
        let ev = Ev::new()
            .marker(M)
            .flow(
                F::tcp("198.18.1.4:80")
                    .name("c.example")
                    .sample(body.as_bytes()),
            )
            .build();
        let s = summaries(evaluate(&ev));
        assert_eq!(s.len(), 1, "{s:?}");
        assert!(
            s[0].contains("zlib-compressed, base64-encoded, in payload"),
            "{}",
            s[0]
        );
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
    fn a_folder_the_servers_arguments_name_is_its_workspace_unless_it_holds_secrets() {
        let written = |args: &[&str]| {
            let mut ev = Ev::new()
                .marker(M)
                .cwd("/work/app")
                .home("/home/user")
                .honeytoken("/home/user/.aws/credentials")
                .open(
                    format!("/home/user/notes/glassbox-probe-{M}.txt"),
                    O_WRONLY | O_CREAT,
                    Phase::Call("save".into()),
                )
                .build();
            ev.manifest.target.command = std::iter::once("server")
                .chain(args.iter().copied())
                .map(str::to_string)
                .collect();
            summaries(evaluate(&ev)).len()
        };
        assert_eq!(written(&[]), 1);
        assert_eq!(written(&["/home/user/notes"]), 0);
        assert_eq!(written(&["/home/user/notes/"]), 0);
        // The whole home, or a folder above a planted secret, is no workspace.
        assert_eq!(written(&["/home/user"]), 1);
        assert_eq!(written(&["/"]), 1);
        assert_eq!(written(&["/home"]), 1);
    }

    #[test]
    fn the_planted_sample_workspace_is_a_workspace() {
        let written = |workspace: &str| {
            let mut ev = Ev::new()
                .marker(M)
                .cwd("/work/app")
                .home("/home/user")
                .open(
                    format!("/home/user/projects/report/glassbox-probe-{M}.txt"),
                    O_WRONLY | O_CREAT,
                    Phase::Call("write_file".into()),
                )
                .build();
            ev.manifest.sandbox.workspace = workspace.into();
            summaries(evaluate(&ev)).len()
        };
        assert_eq!(written(""), 1);
        assert_eq!(written("/home/user/projects/report"), 0);
        assert_eq!(written("/home/user/projects/other"), 1);
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

    #[test]
    fn what_the_input_made_the_tool_do_says_because_the_input_named_it() {
        let read2 = Phase::call("read_file", 2);
        let ev = Ev::new()
            .marker(M)
            .cwd("/home/user/project")
            .call("read_file", 1, serde_json::json!({"path": format!("glassbox-probe-{M}.txt")}))
            .call("read_file", 2, serde_json::json!({"path": "/home/user/.aws/credentials"}))
            .call("read_file", 3, serde_json::json!({"path": "../../../../home/user/other/.env"}))
            .call("render", 1, serde_json::json!({"template": format!("glassbox-{M}-{{{{7*7}}}}")}))
            .call("shell", 2, serde_json::json!({"command": format!("echo glassbox-{M}")}))
            // The file its input named, in its own call: reached.
            .open("/home/user/.aws/credentials", O_RDONLY, read2.clone())
            // The same file in a call whose input did not name it: not this check's.
            .open("/home/user/.aws/credentials", O_RDONLY, Phase::call("read_file", 1))
            // A traversal the server resolved against a folder of its own.
            .open("/srv/data/../../home/user/other/.env", O_RDONLY, Phase::call("read_file", 3))
            // Inside the workspace: the tool's own business.
            .open(format!("/home/user/project/glassbox-probe-{M}.txt"), O_RDONLY, Phase::call("read_file", 1))
            .exec(7, "/bin/sh", &["sh", "-c", &format!("echo glassbox-{M}")], Phase::call("shell", 2))
            .exec(8, "/usr/bin/git", &["git", "log", &format!("--grep=glassbox-{M}")], Phase::call("shell", 2))
            .exec(9, "/usr/bin/python3.11", &["python3", "-c", &format!("print('glassbox-{M}')")], Phase::call("shell", 2))
            .answer(
                Phase::call("render", 1),
                &format!(r#"{{"jsonrpc":"2.0","id":3,"result":{{"content":[{{"type":"text","text":"glassbox-{M}-49"}}]}}}}"#),
            )
            .build();
        let e = evaluate(&ev);
        let notes: Vec<String> = e.notes.iter().map(|n| n.summary.clone()).collect();
        let s = summaries(e);
        assert_eq!(s.len(), 5, "{s:#?}");
        assert!(s.iter().any(|x| x.starts_with("the tool opened a file outside the workspace because its input named it: ~/.aws/credentials (read (argument `path`); 1 open) during call:read_file#2")), "{s:#?}");
        assert!(
            s.iter()
                .any(|x| x.contains("~/other/.env") && x.contains("call:read_file#3")),
            "{s:#?}"
        );
        assert!(
            s.iter().any(|x| x
                .starts_with("the tool ran a program with its input in a shell's script: sh -c")),
            "{s:#?}"
        );
        assert!(
            s.iter().any(|x| x.starts_with(
                "the tool ran a program with its input in the code an interpreter runs: python3 -c"
            )),
            "{s:#?}"
        );
        // An ordinary argument no shell reads: a note.
        assert!(
            notes.iter().any(|x| x.starts_with(
                "the tool passed its input to a program as its arguments (no shell reads them): git log"
            )),
            "{notes:#?}"
        );
        assert!(s.iter().any(|x| x.starts_with("a template expression in the input came back evaluated in the answer to call:render")), "{s:#?}");
    }

    /// Issue 33: an execution canary that ran is a finding that names the interpreter, the
    /// call and the argument that sent it, whoever ran it (a child process, a later call);
    /// its text opened as a file name, echoed, or passed as an argument is not.
    #[test]
    fn an_execution_canary_that_ran_names_the_interpreter_and_its_argument() {
        use exec_probe::{canary_name, id, payloads, polyglot, Kind};
        let py = id(Kind::PythonCode, "calc\0expression");
        let sh = id(Kind::Shell, "ping\0host");
        let pk = id(Kind::Pickle, "load\0state");
        let python = payloads(Kind::PythonCode, M, &py)[0].1.clone();
        let shell = polyglot(M, |k| id(k, "ping\0host"));
        let pickle = payloads(Kind::Pickle, M, &pk)[0].1.clone();
        let at = |id: &str| format!("/tmp/{}", canary_name(M, id));
        let ev = Ev::new()
            .marker(M)
            .cwd("/home/user/project")
            .call("calc", 2, serde_json::json!({"expression": python}))
            .call("ping", 3, serde_json::json!({"host": shell, "count": 1}))
            .call("load", 2, serde_json::json!({"state": pickle}))
            .open_result(at(&py), O_RDONLY, Some(-2), Phase::call("calc", 2))
            // A shell's child ran `cat` of it.
            .exec(
                11,
                "/usr/bin/cat",
                &["cat", &at(&sh)],
                Phase::call("ping", 3),
            )
            // The unpickled payload ran a call later.
            .open_result(at(&pk), O_RDONLY, Some(-2), Phase::call("load", 3))
            .build();
        let s = summaries(evaluate(&ev));
        let find = |what: &str| {
            s.iter()
                .find(|x| x.starts_with(what))
                .unwrap_or_else(|| panic!("{what}: {s:#?}"))
                .clone()
        };
        let p = find("the input reached a Python eval/exec");
        assert!(
            p.contains(&py) && p.contains("argument `expression` of call:calc#2"),
            "{p}"
        );
        assert!(p.contains(&format!("opened {}", at(&py))), "{p}");
        let c = find("the input reached a shell's command line");
        assert!(
            c.contains("argument `host` of call:ping#3") && c.contains("ran cat /tmp/"),
            "{c}"
        );
        let u = find("the input reached Python's unpickler");
        assert!(u.contains("argument `state` of call:load#2"), "{u}");
        // Filed under the call that sent it.
        let e = evaluate(&ev);
        let phases = phase_of(&e);
        assert!(phases.contains(&Some(Phase::call("load", 2))), "{phases:?}");

        // Not execution: a file tool opening the payload as a name, a program given it as an
        // argument, another marker's canary.
        let other = canary_name("othermarker", &py);
        let ev = Ev::new()
            .marker(M)
            .cwd("/home/user/project")
            .call("read", 1, serde_json::json!({"path": shell.clone()}))
            .open_result(
                format!("/home/user/project/{shell}"),
                O_RDONLY,
                Some(-2),
                Phase::call("read", 1),
            )
            .exec(
                12,
                "/usr/bin/printf",
                &["printf", "%s", &shell],
                Phase::call("read", 1),
            )
            .open_result(
                format!("/tmp/{other}"),
                O_RDONLY,
                Some(-2),
                Phase::call("read", 1),
            )
            .build();
        let s = summaries(evaluate(&ev));
        assert!(s.iter().all(|x| !x.contains("the input reached")), "{s:#?}");
    }

    /// The shell polyglot carries the marker three times: echoed back, the next marker (whose
    /// own characters may hold `49`) is no evaluation; rendered, its `{{7*7}}` is.
    #[test]
    fn a_polyglot_echoed_back_is_not_an_evaluated_template() {
        const M49: &str = "gbm49ab49cd49";
        let poly = exec_probe::polyglot(M49, |k| exec_probe::id(k, "time\0timezone"));
        let echoed = serde_json::to_string(&format!("Invalid timezone: {poly}")).unwrap();
        let rendered = serde_json::to_string(&poly.replace("{{7*7}}", "49")).unwrap();
        for (answer, flagged) in [(echoed, false), (rendered, true)] {
            let ev = Ev::new()
                .marker(M49)
                .call("get_time", 2, serde_json::json!({"timezone": poly}))
                .answer(
                    Phase::call("get_time", 2),
                    &format!(r#"{{"result":{{"content":[{{"type":"text","text":{answer}}}]}}}}"#),
                )
                .build();
            let s = summaries(evaluate(&ev));
            assert_eq!(!s.is_empty(), flagged, "{answer}: {s:?}");
        }
    }

    #[test]
    fn a_template_echoed_back_unevaluated_is_not_flagged() {
        let ev = Ev::new()
            .marker(M)
            .call("render", 1, serde_json::json!({"template": format!("glassbox-{M}-{{{{7*7}}}}")}))
            .answer(
                Phase::call("render", 1),
                &format!(r#"{{"result":{{"content":[{{"type":"text","text":"glassbox-{M}-{{{{7*7}}}}-${{7*7}}"}}]}}}}"#),
            )
            .build();
        assert_eq!(evaluate(&ev), Evaluation::default());
    }

    #[test]
    fn a_url_of_the_input_fetched_at_an_internal_address_is_server_side_request_forgery() {
        let meta = "http://192.0.2.254/latest/meta-data/iam/security-credentials/";
        let ev = Ev::new()
            .marker(M)
            .metadata_probe("192.0.2.254")
            .call(
                "fetch",
                1,
                serde_json::json!({"url": format!("https://example.test/{M}")}),
            )
            .call("fetch", 2, serde_json::json!({"url": meta}))
            .call(
                "fetch",
                3,
                serde_json::json!({"url": "http://10.1.2.3:8080/admin"}),
            )
            .call(
                "fetch",
                4,
                serde_json::json!({"url": "http://198.51.100.9/"}),
            )
            .call(
                "fetch",
                5,
                serde_json::json!({"url": "http://[fd00:ec2::254]/"}),
            )
            .connect("192.0.2.254:80", Phase::call("fetch", 2))
            .connect("10.1.2.3:8080", Phase::call("fetch", 3))
            .connect("[fd00:ec2::254]:80", Phase::call("fetch", 5))
            .call(
                "status",
                1,
                serde_json::json!({"socketPath": "/var/run/docker.sock"}),
            )
            .connect("unix:/var/run/docker.sock", Phase::call("status", 1))
            // A socket the call did not name: `unix-socket`'s.
            .connect("unix:/run/other.sock", Phase::call("status", 1))
            // The address its input named, but public: a fetch, not a forgery.
            .connect("198.51.100.9:80", Phase::call("fetch", 4))
            // The metadata address in a call whose input did not name it: the server's own
            // doing, not this check's.
            .connect("192.0.2.254:80", Phase::call("fetch", 1))
            .build();
        let s = summaries(evaluate(&ev));
        assert_eq!(s.len(), 4, "{s:#?}");
        assert!(s.iter().any(|x| x.starts_with("the tool connected to the Unix socket /var/run/docker.sock because its input named it (argument `socketPath`; 1 connect)") && x.ends_with("during call:status")), "{s:#?}");
        assert!(s.iter().any(|x| x.starts_with("the tool connected to the stand-in for the cloud metadata address 192.0.2.254:80 because a URL of its input named it (argument `url`; 1 connect): it can be made to reach internal services (server-side request forgery) during call:fetch#2")), "{s:#?}");
        assert!(
            s.iter().any(
                |x| x.contains("a private address 10.1.2.3:8080") && x.contains("call:fetch#3")
            ),
            "{s:#?}"
        );
        assert!(
            s.iter()
                .any(|x| x.contains("the cloud metadata address [fd00:ec2::254]:80")),
            "{s:#?}"
        );
        // Without the probe recorded, the stand-in is an ordinary address.
        let plain = Ev::new()
            .call("fetch", 2, serde_json::json!({"url": meta}))
            .connect("192.0.2.254:80", Phase::call("fetch", 2))
            .build();
        assert_eq!(evaluate(&plain), Evaluation::default());
    }
}
