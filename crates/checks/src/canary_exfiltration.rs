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
//! choice of escaped characters, hex digits in either case), and then unwrapped
//! ([`crate::layers`]): the compressed streams that start in it (zlib, gzip, raw deflate inside
//! decoded text) and its runs of base64, base64url and hex (a JSON string, a form field, a
//! multipart part, a query parameter, a header value), decoded, up to three layers deep,
//! bounded in bytes and views per field. A secret compressed, then base64-encoded, before it
//! left is found ("zlib-compressed, base64-encoded, in HTTP body"); version 7 searched only
//! what was sent as it was, and said `pass` over it (retracted for runs that carried bytes).
//! A piece of a secret found in a plainer form is not counted again in a form unwrapped from
//! it. The same search reads the server's answers to the client (the transcript).
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
//!   that differs (a PEM body sent without its line breaks), in every encoding below;
//! - pieces of the secret's random part, when its honeytoken records one (`random`: what the
//!   generator drew, never a fixed prefix, header or format field; see
//!   `glassbox_sandbox::honeytokens`): every run of [`PIECE`] bytes of it (at steps of one, so
//!   any piece of at least [`PIECE`] bytes holds one), as is and hex; and, for base64 and
//!   base64url, every run of [`PIECE_B64`] bytes: a piece of [`PIECE`] bytes anywhere in a
//!   base64 stream holds three full 3-byte groups of its own, whatever its alignment, and those
//!   encode to 12 characters of the piece alone. So a secret sent in pieces (hex in 16-byte DNS
//!   labels, 12 bytes per HTTPS request) is found piece by piece, each piece alone. Needles are
//!   never taken from a fixed part (`AKIA`, `gho_`, a JWT header, the fields every OpenSSH key
//!   shares): a piece that short of a fixed part would be found in any other key of the format;
//! - for a honeytoken without `random` (bundles recorded before it was kept), as before: for a
//!   secret longer than [`WINDOW`] bytes, every window of [`WINDOW`] bytes at steps of [`STEP`]
//!   (and the last one), so a partial leak is found (any leaked run of `WINDOW + STEP - 1`
//!   bytes holds a whole window, such as one 64-character line of a PEM key); a window may
//!   fall on a format's fixed part, and the reviewer weighs which bytes leaked;
//! - each of those in encodings: as is; hex; standard base64 and base64url at each of the
//!   three byte alignments the secret may have in the encoded stream, keeping only the stable
//!   middle (the characters made of the secret's bytes alone: full 3-byte groups).
//!
//! What a needle's chance match would take, at the least: 12 characters of a base64 needle
//! carrying 9 random characters of the secret (36 bits for the hex of a `gbx_` canary, 45 for
//! an AWS key id, 53 for base62), 12 raw characters (48 bits and more); against the traffic of
//! a run (megabytes), never expected. The automaton for a full set of planted secrets (2,400
//! random bytes, an RSA key's body ~1,600 of them) holds ~6,500 patterns, ~2 MiB, where whole
//! secrets and windows alone made ~730 (~1 MiB): `cargo run --release -p glassbox-checks
//! --example canary_speed` measures both side by side (on a shared 2-vCPU VM: built in ~35 ms
//! instead of ~12, searching random bytes and base64 text at 90-105 MiB/s instead of 105-135).
//!
//! Use or theft: where each planted secret went decides. A planted file's secret may go to
//! the service it is for (`services` of its honeytoken, recorded when it was planted: an AWS
//! key id to `amazonaws.com`, as a SigV4 `Authorization` carries it, but never its secret key;
//! a GitHub token to `github.com`; an npm token to the registry; a kubeconfig's token to the
//! cluster that kubeconfig names, under `.test` so that a server that uses it talks to the
//! edge), and a declared secret (`env:NAME`: an API key a client configuration or
//! `server.json` gives the server, replaced by a canary) to the hosts its server is documented
//! to use (`hosts`): a flow whose every name (DNS, SNI, Host, the name of its address) is such a
//! host or under it, carrying only secrets that service is for, is listed as a note (`used
//! with its own service: use, not theft`), not a finding. Anywhere else a secret is
//! exfiltration, an accusation. The secrets found nowhere are listed in a note too, so the
//! report says of every planted secret where it went (in what the edge read: a flow it could
//! not read makes the check `not-observed`).
//!
//! Version 5 judges as version 4 did; its search of the flows is shared with
//! `credential-probe` ([`went`]), which also searches the server's answers to the client.
//! Version 8 unwraps what it searches (above). Version 9: a secret on a name its provider
//! rents out (a bucket, `loot.s3.amazonaws.com`, or path-style on `s3.amazonaws.com`) is used
//! with its service only presented as a credential (an `Authorization` header and the like);
//! in what the request carries (its body, target, other headers) it goes to the tenant:
//! theft. A declared secret's vendor is the word of its name under a generic suffix, not
//! under any (`explain::named_like`). A planted secret presented as a credential (one its
//! service is for) to an endpoint the entry's configuration names (`AWS_ENDPOINT_URL`) is use
//! too.
//!
//! One finding per planted file and run (for a declared secret: one for the flows to its
//! documented hosts, a note, and one for the rest), with every flow its secret was found in:
//! the evidence and flow ids of all of them, the bytes of the secret found (`bytes 4..32 of
//! 40`, or `value 2 of 2: bytes 0..36 of 40` for a file of several secrets; `the planted
//! secret` when a whole one was), and each flow with its destination and its own bytes. One
//! finding rather than one per flow: a secret sent in pieces is one act, whose extent shows
//! only when its pieces are put together (the reviewer sees at once that bytes 0..36 of 40
//! left over three HTTPS requests, and weighs one accusation instead of three that each look
//! slight), and a server that sends its secrets in fifty pieces makes one finding per secret,
//! not fifty. A piece shorter than [`PIECE`] bytes is not found, even next to pieces that are
//! (the last 8 bytes of a 40-byte secret in 16-byte chunks): the bytes listed are those seen.
//! Version 3 found a secret cut into pieces shorter than its windows nowhere.
//!
//! Version 10: dual execution (`manifest.dual`, [`crate::dual`]): a call whose bytes changed
//! with the planted secret it read, enough of them to carry it, and not between two runs with
//! the same secrets, sent the value encoded (an accusation; a secret XOR-ed or encrypted with
//! a constant before it left); bytes that vary anyway make the call's flows as unread
//! (`not-observed`); fewer changed bytes than the secret's random part (a digest) is a note.
//! A SigV4 presigned URL's key id (`X-Amz-Credential` in the query) is presented
//! as a credential, as in a signed request's `Authorization` header. What the input named
//! includes the values glassbox gave a resource template's variables and a prompt's
//! arguments, under the read's or get's phase (`named.rs`), as it includes a call's arguments.
//!
//! Version 11: a TLS flow whose client sent its ClientHello and nothing after, every byte kept
//! and searched, before the edge answered anything, is read ([`hello_only`]): it could carry
//! nothing else (issue 34). One whose client got the edge's certificate stays unread. What the
//! input named includes a host given without a URL (`named.rs`). A secret found in an HTTP
//! exchange was sent during the phase of that exchange's time (`HttpExchange::t_ns`), not the
//! phase of the `connect` of a kept-alive connection an earlier phase opened.
//!
//! Version 12 judges as version 11 did, but a destination explained for `unexplained-egress`
//! now includes a `.test` name an earlier call's input gave, at any time after that call
//! (`named.rs`).
//!
//! Version 13 searches the trigger run's answers too (`transcript-trigger.jsonl`,
//! `glassbox audit --triggers`): a planted secret that came back to the client only with the
//! world changed (a CI runner's `GITHUB_TOKEN` in a tool's result) came back.

use crate::explain;
use crate::layers::{self, Form};
use crate::net::{self, Keyed, PhaseOf};
use crate::text;
use crate::{Channel, CheckInfo, Evaluation, Evaluator};
use aho_corasick::AhoCorasick;
use base64::engine::general_purpose::{STANDARD_NO_PAD, URL_SAFE_NO_PAD};
use base64::Engine as _;
use glassbox_model::{Event, ExplainedHost, Flow, Honeytoken, NetworkMode, Phase, Severity};
use std::collections::HashMap;

pub(crate) const INFO: CheckInfo = CheckInfo {
    id: "canary-exfiltration",
    version: 13,
    claim: "no planted secret leaves the sandbox",
    severity: Severity::High,
    channels: &[Channel::PacketEdge],
    also_reads: &[],
    file_calls: false,
    accuses: "every finding (a planted secret sent out of the sandbox)",
    sources: &[
        "canary_exfiltration.rs",
        "links.rs",
        "explain.rs",
        "named.rs",
        "net.rs",
        "text.rs",
        "outcome.rs",
        "layers.rs",
        "dual.rs",
    ],
};

/// Secrets shorter than this are not searched (too likely to occur by chance).
pub(crate) const MIN_SECRET: usize = 12;
/// Window of a long secret searched on its own, in bytes, for a honeytoken without `random`.
pub(crate) const WINDOW: usize = 40;
/// Step between windows.
pub(crate) const STEP: usize = 20;
/// Shortest base64 needle kept, in characters.
const MIN_ENCODED: usize = 12;
/// Shortest piece of a random part searched on its own, in bytes.
pub(crate) const PIECE: usize = 12;
/// Bytes of a random part behind each base64 needle: three full groups, 12 characters.
pub(crate) const PIECE_B64: usize = 9;
/// Flows named in a finding, at most (the rest counted).
const FLOWS_SHOWN: usize = 12;

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
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
struct Needle {
    /// Index of the honeytoken.
    token: usize,
    /// The piece: the whole secret, or part of it.
    piece: Piece,
    encoding: Encoding,
}

/// A piece of a secret: bytes `start..end` of secret `secret` of its honeytoken (of that
/// secret without whitespace when `compact`), `len` bytes long (the whole secret when the
/// piece spans it).
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
struct Piece {
    secret: usize,
    compact: bool,
    start: usize,
    end: usize,
    len: usize,
}

impl Piece {
    fn whole(self) -> bool {
        self.start == 0 && self.end == self.len
    }

    /// The same secret (and form of it).
    fn same(self, o: Piece) -> bool {
        (self.secret, self.compact) == (o.secret, o.compact)
    }
}

/// Every needle of every secret, one automaton.
struct Matcher {
    ac: AhoCorasick,
    /// Per pattern, what it stands for (a needle may stand for several).
    needles: Vec<Vec<Needle>>,
}

/// A secret as planted and without whitespace (when that differs): `(bytes, compact)`.
fn variants(secret: &[u8]) -> Vec<(Vec<u8>, bool)> {
    let mut out = vec![(secret.to_vec(), false)];
    let compact: Vec<u8> = secret
        .iter()
        .copied()
        .filter(|b| !b.is_ascii_whitespace())
        .collect();
    if compact.len() != secret.len() && compact.len() >= MIN_SECRET {
        out.push((compact, true));
    }
    out
}

/// Secret `index` whole, and, when `windows`, its windows (a honeytoken without `random`),
/// each with where it lies in the secret (or in the secret without whitespace).
fn pieces(index: usize, secret: &[u8], windows: bool) -> Vec<(Vec<u8>, Piece)> {
    let mut out = Vec::new();
    for (v, compact) in variants(secret) {
        let len = v.len();
        let piece = |start, end| Piece {
            secret: index,
            compact,
            start,
            end,
            len,
        };
        if windows && len > WINDOW {
            let mut starts: Vec<usize> = (0..=len - WINDOW).step_by(STEP).collect();
            starts.push(len - WINDOW);
            for start in starts {
                out.push((
                    v[start..start + WINDOW].to_vec(),
                    piece(start, start + WINDOW),
                ));
            }
        }
        out.push((v, piece(0, len)));
    }
    out
}

/// A piece in every encoding searched.
pub(crate) fn encodings(p: &[u8]) -> Vec<(Vec<u8>, Encoding)> {
    let mut out = vec![(p.to_vec(), Encoding::Raw), (hex(p), Encoding::Hex)];
    // The piece starting at each offset of a 3-byte group: skipping `k` bytes puts the rest
    // on a group boundary; only full groups encode to characters of the piece alone.
    for k in 0..3 {
        let Some(rest) = p.get(k..) else { continue };
        let full = &rest[..rest.len() / 3 * 3];
        if full.len() / 3 * 4 < MIN_ENCODED {
            continue;
        }
        out.extend(base64s(full));
    }
    out
}

fn hex(p: &[u8]) -> Vec<u8> {
    p.iter()
        .flat_map(|b| format!("{b:02x}").into_bytes())
        .collect()
}

/// `full` (whole 3-byte groups) in base64 and, when it differs, base64url.
fn base64s(full: &[u8]) -> Vec<(Vec<u8>, Encoding)> {
    let (std, url) = (STANDARD_NO_PAD.encode(full), URL_SAFE_NO_PAD.encode(full));
    let mut out = Vec::new();
    // Without `+` or `/` the two alphabets agree: one needle, named base64.
    if url != std {
        out.push((url.into_bytes(), Encoding::Base64Url));
    }
    out.push((std.into_bytes(), Encoding::Base64));
    out
}

/// The needles of the random parts of `h`: each part's runs of [`PIECE`] bytes as is and hex,
/// its runs of [`PIECE_B64`] bytes base64 and base64url, each with where it lies in its
/// secret. A part found in no secret (never, as the generator records them) is left out.
fn random_needles(h: &Honeytoken) -> Vec<(Vec<u8>, Piece, Encoding)> {
    let mut out = Vec::new();
    for r in h.random.iter().map(String::as_bytes) {
        if r.len() < PIECE {
            continue;
        }
        let found = h.secrets.iter().enumerate().find_map(|(i, s)| {
            variants(s.as_bytes()).into_iter().find_map(|(v, compact)| {
                let at = v.windows(r.len()).position(|w| w == r)?;
                Some((i, compact, at, v.len()))
            })
        });
        let Some((secret, compact, at, len)) = found else {
            continue;
        };
        let piece = |i: usize, n: usize| Piece {
            secret,
            compact,
            start: at + i,
            end: at + i + n,
            len,
        };
        for (i, w) in r.windows(PIECE).enumerate() {
            out.push((w.to_vec(), piece(i, PIECE), Encoding::Raw));
            out.push((hex(w), piece(i, PIECE), Encoding::Hex));
        }
        for (i, w) in r.windows(PIECE_B64).enumerate() {
            for (pattern, encoding) in base64s(w) {
                out.push((pattern, piece(i, PIECE_B64), encoding));
            }
        }
    }
    out
}

impl Matcher {
    fn new(tokens: &[Honeytoken]) -> Option<Matcher> {
        let mut patterns: Vec<Vec<u8>> = Vec::new();
        let mut needles: Vec<Vec<Needle>> = Vec::new();
        let mut index: HashMap<Vec<u8>, usize> = HashMap::new();
        let mut add = |pattern: Vec<u8>, n: Needle| {
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
        };
        for (token, h) in tokens.iter().enumerate() {
            // Windows only where no random part was recorded (they may fall on fixed parts).
            let windows = h.random.is_empty();
            for (i, secret) in h.secrets.iter().enumerate() {
                if secret.len() < MIN_SECRET {
                    continue;
                }
                for (bytes, piece) in pieces(i, secret.as_bytes(), windows) {
                    for (pattern, encoding) in encodings(&bytes) {
                        let n = Needle {
                            token,
                            piece,
                            encoding,
                        };
                        add(pattern, n);
                    }
                }
            }
            for (pattern, piece, encoding) in random_needles(h) {
                let n = Needle {
                    token,
                    piece,
                    encoding,
                };
                add(pattern, n);
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

    /// The needles found in any form of `hay` ([`layers::forms`]: as is, percent-decoded,
    /// unwrapped), each piece of a secret once, with the plainest form it was found in (a
    /// secret's hex found as is is not found again, raw, in the hex decoded).
    fn find_in_forms(&self, hay: &[u8]) -> Vec<(Needle, Form)> {
        let mut out: Vec<(Needle, Form)> = Vec::new();
        for form in layers::forms(hay) {
            for p in self.find(&form.bytes) {
                for n in &self.needles[p] {
                    let known = out
                        .iter()
                        .any(|(k, f)| (k.token, k.piece) == (n.token, n.piece) && f != &form);
                    if !known && !out.iter().any(|(k, _)| k == n) {
                        out.push((*n, form.clone()));
                    }
                }
            }
        }
        out
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

/// A host name's labels concatenated without dots, lower-cased.
fn labels_joined(name: &[u8]) -> Vec<u8> {
    name.iter()
        .filter(|&&b| b != b'.')
        .map(u8::to_ascii_lowercase)
        .collect()
}

/// The fields of a flow searched, with their names: what it carried in clear, and what the
/// edge decrypted of it and read of its HTTP exchanges (a body de-chunked and decompressed),
/// each with the time of the HTTP exchange it is part of (0: none, or not known).
pub(crate) fn fields_at(f: &Flow) -> Vec<(&'static str, Vec<u8>, u64)> {
    let mut out = vec![
        ("payload", f.sample.as_slice().to_vec(), 0),
        ("decrypted payload", f.cleartext.as_slice().to_vec(), 0),
    ];
    for x in &f.exchanges {
        // A SigV4 presigned URL presents its key id in the query, as a signed request does
        // in its Authorization header: that parameter is a credential's position.
        let (target, presented) = presigned(x.target.as_slice());
        out.push(("HTTP target", target, x.t_ns));
        out.extend(
            presented
                .into_iter()
                .map(|v| (CREDENTIAL_HEADER, v, x.t_ns)),
        );
        for (name, value) in &x.headers {
            let field = if credential_header(name.as_bytes()) {
                CREDENTIAL_HEADER
            } else {
                "HTTP header"
            };
            out.push((field, value.as_slice().to_vec(), x.t_ns));
        }
        out.push(("HTTP body", x.body.as_slice().to_vec(), x.t_ns));
    }
    if let Some(q) = &f.dns {
        out.push(("DNS query", q.name.as_slice().to_vec(), 0));
        out.push(("DNS query", labels_joined(q.name.as_slice()), 0));
    }
    if let Some(s) = &f.sni {
        out.push(("SNI", s.as_slice().to_vec(), 0));
        out.push(("SNI", labels_joined(s.as_slice()), 0));
    }
    if let Some(h) = &f.http {
        // The first request's line and Host, as the first exchange has them.
        let t = f.exchanges.first().map_or(0, |x| x.t_ns);
        out.push(("HTTP target", h.target.as_slice().to_vec(), t));
        if let Some(host) = &h.host {
            out.push(("Host", host.as_slice().to_vec(), t));
        }
    }
    out.retain(|(_, b, _)| !b.is_empty());
    out
}

/// `target` without the query parameters of a SigV4 presigned URL that present a credential
/// (`X-Amz-Credential`: the key id and its scope; `X-Amz-Security-Token`), and their values.
fn presigned(target: &[u8]) -> (Vec<u8>, Vec<Vec<u8>>) {
    const PARAMS: &[&[u8]] = &[b"x-amz-credential", b"x-amz-security-token"];
    let Some(q) = target.iter().position(|&b| b == b'?') else {
        return (target.to_vec(), Vec::new());
    };
    let mut kept = target[..=q].to_vec();
    let mut presented = Vec::new();
    for param in target[q + 1..].split(|&b| b == b'&') {
        let (name, value) = match param.iter().position(|&b| b == b'=') {
            Some(i) => (&param[..i], &param[i + 1..]),
            None => (param, &param[param.len()..]),
        };
        if PARAMS.iter().any(|p| p.eq_ignore_ascii_case(name)) {
            presented.push(value.to_vec());
            continue;
        }
        if kept.len() > q + 1 {
            kept.push(b'&');
        }
        kept.extend_from_slice(param);
    }
    (kept, presented)
}

/// The field of a header that presents a credential to the server ([`credential_header`]).
const CREDENTIAL_HEADER: &str = "HTTP authorization header";

/// Headers a client presents a credential in, for the server to check and not to keep:
/// `Authorization` (a SigV4 signature's key id, a Bearer token, Basic), `Proxy-Authorization`,
/// and the API-key and session-token headers of common APIs.
fn credential_header(name: &[u8]) -> bool {
    const NAMES: &[&str] = &[
        "authorization",
        "proxy-authorization",
        "x-amz-security-token",
        "x-api-key",
        "api-key",
        "x-auth-token",
        "private-token",
        "x-goog-api-key",
    ];
    NAMES
        .iter()
        .any(|n| n.as_bytes().eq_ignore_ascii_case(name))
}

/// Why the edge could not read what `f` carried, if it could not: its `unread`, or a
/// ClientHello's SNI recorded by an edge from before TLS was terminated (what followed was
/// never read); never for a flow that sent nothing but a ClientHello ([`hello_only`]).
pub(crate) fn unread_why(f: &Flow) -> Option<&str> {
    if hello_only(f) {
        return None;
    }
    let old_tls = (f.tls.is_none() && f.sni.is_some())
        .then_some("TLS recorded by an edge that did not terminate it: encrypted, not read");
    f.unread.as_deref().or(old_tls)
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
            let why = unread_why(f)?;
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

/// Whether all a TLS flow's client sent is its ClientHello, every byte of it kept in `sample`
/// (and searched there like any payload), and the edge sent nothing back (it closed the
/// stream after the hello, or the run ended first): a client that never saw a certificate
/// neither refused one nor had a key to send anything else with, so nothing it carried went
/// unread (issue 34's "nothing after a ClientHello"). A client that got the edge's answer and
/// then stopped, with an alert (a pinned client in Python) or without one (in Node), may have
/// refused the certificate: what it would have sent to its vendor is not known, and the flow
/// stays unread.
pub fn hello_only(f: &Flow) -> bool {
    const HANDSHAKE: u8 = 0x16;
    const CLIENT_HELLO: u8 = 1;
    let sample = f.sample.as_slice();
    if f.tls.is_none() || f.bytes_in > 0 || f.sample_truncated || sample.len() as u64 != f.bytes_out
    {
        return false;
    }
    // The handshake bytes of the stream's records, which must all be handshake records.
    let mut handshake = Vec::new();
    let mut rest = sample;
    while !rest.is_empty() {
        let Some(header) = rest.get(..5) else {
            return false;
        };
        let len = usize::from(u16::from_be_bytes([header[3], header[4]]));
        let Some(fragment) = rest.get(5..5 + len) else {
            return false;
        };
        if header[0] != HANDSHAKE || len == 0 {
            return false;
        }
        handshake.extend_from_slice(fragment);
        rest = &rest[5 + len..];
    }
    // Exactly one message, a ClientHello.
    match handshake.get(..4) {
        Some(h) if h[0] == CLIENT_HELLO => {
            let len = usize::from(h[1]) << 16 | usize::from(h[2]) << 8 | usize::from(h[3]);
            handshake.len() == 4 + len
        }
        _ => false,
    }
}

/// What was found of one planted file in one flow.
#[derive(Debug, Default)]
struct Leak {
    /// A whole secret was found.
    whole: bool,
    /// The bytes found, per secret: disjoint, in order (at most [`MAX_SPANS`]).
    spans: Vec<Piece>,
    /// `base64 in payload`...
    how: Vec<String>,
    /// A secret was found where the server keeps what it gets (a body, a target, a header
    /// other than a credential's; the stream of a flow with no HTTP exchange read), not only
    /// presented as a credential ([`credential_header`]).
    kept: bool,
    /// When the HTTP exchanges it was found in were sent (their `t_ns`), at most
    /// [`MAX_SPANS`]: the phases that sent it (version 11).
    sent_at: Vec<u64>,
    /// It was also found where no exchange's time says when (the stream, a DNS name, an
    /// exchange of an older bundle): the flow's own calls say when.
    untimed: bool,
}

/// Disjoint spans kept per leak.
const MAX_SPANS: usize = 1000;

/// Adds `p` to the disjoint, ordered spans `to`, merging what overlaps or touches it.
fn add_span(to: &mut Vec<Piece>, p: Piece) {
    let mut merged = p;
    let mut kept = Vec::with_capacity(to.len() + 1);
    for &q in to.iter() {
        if q.same(p) && q.start <= merged.end && merged.start <= q.end {
            merged.start = merged.start.min(q.start);
            merged.end = merged.end.max(q.end);
        } else {
            kept.push(q);
        }
    }
    if kept.len() >= MAX_SPANS {
        return;
    }
    kept.push(merged);
    kept.sort();
    *to = kept;
}

/// The bytes of `spans` (of a honeytoken with `secrets` secrets): `bytes 0..12, 24..40 of 40`
/// with `of` (a finding's total), `bytes 0..12` without; per secret, named by its place
/// (`value 2 of 2: ...`) when the honeytoken has more than one.
fn extent(spans: &[Piece], secrets: usize, of: bool) -> String {
    // A secret found both as planted and without its whitespace (a PEM body's line, which is
    // both): the form with more of it found, as planted when even.
    let covered = |secret: usize, compact: bool| -> usize {
        spans
            .iter()
            .filter(|p| (p.secret, p.compact) == (secret, compact))
            .map(|p| p.end - p.start)
            .sum()
    };
    let spans: Vec<Piece> = spans
        .iter()
        .filter(|p| {
            let (planted, compact) = (covered(p.secret, false), covered(p.secret, true));
            if p.compact {
                compact > planted
            } else {
                planted >= compact
            }
        })
        .copied()
        .collect();
    let mut parts = Vec::new();
    let mut i = 0;
    while i < spans.len() {
        let first = spans[i];
        let run: Vec<Piece> = spans[i..]
            .iter()
            .take_while(|p| p.same(first))
            .copied()
            .collect();
        i += run.len();
        let ranges: Vec<String> = run
            .iter()
            .map(|p| format!("{}..{}", p.start, p.end))
            .collect();
        let mut s = format!("bytes {}", ranges.join(", "));
        if of {
            s += &format!(" of {}", first.len);
            if first.compact {
                s += " (without whitespace)";
            }
        }
        if secrets > 1 {
            s = match of {
                true => format!("value {} of {secrets}: {s}", first.secret + 1),
                false => format!("{s} of value {}", first.secret + 1),
            };
        }
        parts.push(s);
    }
    parts.join("; ")
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
    /// What each of `manifest.dual` says, in its order.
    dual: Vec<crate::dual::DualFate>,
}

/// Whether `f` is a connection of the install relayed to the package registry, byte for byte.
pub(crate) fn relayed(f: &Flow) -> bool {
    f.mode == NetworkMode::Install
        && f.note
            .as_deref()
            .is_some_and(|n| n.starts_with("relayed to "))
}

pub(crate) fn start(c: &crate::Context<'_>) -> Box<dyn Evaluator> {
    // What the edge read but dual execution could not tell (bytes that vary anyway, a call
    // not made again) is as unread: whether a secret was in it is not known.
    let mut unread = unread(c.flows, |f| !relayed(f));
    let tokens = &c.manifest.sandbox.honeytokens;
    let dual: Vec<crate::dual::DualFate> = (c.manifest.dual.iter())
        .map(|r| crate::dual::fate(r, tokens))
        .collect();
    for (r, f) in c.manifest.dual.iter().zip(&dual) {
        if matches!(f, crate::dual::DualFate::Unknown(_)) {
            unread.push(crate::dual::said(r, f));
        }
    }
    let mut s = State {
        dual,
        leaks: Keyed::new(),
        phases: PhaseOf::default(),
        unread,
        relayed: c.flows.iter().filter(|f| relayed(f)).count(),
    };
    let Some(m) = Matcher::new(&c.manifest.sandbox.honeytokens) else {
        return Box::new(s);
    };
    s.leaks = leaks(&m, c.flows);
    for ((fi, _), _) in &s.leaks.items {
        s.phases.want(&c.flows[*fi].events);
    }
    Box::new(s)
}

/// Where one planted file's secrets went ([`went`]).
#[derive(Clone, Debug, Default)]
pub(crate) struct Went {
    /// Flows that carried one elsewhere than to its own service: each destination.
    pub(crate) elsewhere: Vec<String>,
    /// Its own services (or documented hosts) that flows carried one to.
    pub(crate) own: Vec<String>,
    /// Phases whose answer to the client (tool results, resources: the model's context)
    /// carried one.
    pub(crate) answers: Vec<glassbox_model::Phase>,
    /// What dual execution could not tell (a call that read it sent bytes that vary anyway,
    /// or could not be made again): where its value went is not known.
    pub(crate) unknown: Vec<String>,
    /// What dual execution found derived from it, too short to carry it (said, not accused).
    pub(crate) derived: Vec<String>,
}

/// Where each planted file's secrets went (by index of `manifest.sandbox.honeytokens`), in
/// what the edge read and in the server's answers to the client (both runs); `None` when
/// there were more finds than are kept (then nothing can be said of any).
pub(crate) fn went(c: &crate::Context<'_>) -> Option<Vec<Went>> {
    let tokens = &c.manifest.sandbox.honeytokens;
    let mut out = vec![Went::default(); tokens.len()];
    let Some(m) = Matcher::new(tokens) else {
        return Some(out);
    };
    let found = leaks(&m, c.flows);
    if found.overflow > 0 {
        return None;
    }
    let explained = explain::explained(c.manifest);
    for ((fi, ti), leak) in found.items {
        let (Some(f), Some(h)) = (c.flows.get(fi), tokens.get(ti)) else {
            continue;
        };
        let w = &mut out[ti];
        let add = |v: &mut Vec<String>, x: String| {
            if !v.contains(&x) {
                v.push(x);
            }
        };
        match fate(f, h, &leak, &explained) {
            Fate::Elsewhere => add(&mut w.elsewhere, destination(f)),
            Fate::Documented => add(&mut w.own, "its documented host".into()),
            Fate::Vendor => add(&mut w.own, "the vendor its name names".into()),
            Fate::Configured => add(&mut w.own, "a host its entry's configuration names".into()),
            Fate::Used(si) => {
                if let Some(svc) = h.services.get(si) {
                    add(&mut w.own, net::show(&svc.name));
                }
            }
        }
    }
    for r in &c.manifest.dual {
        let f = crate::dual::fate(r, tokens);
        for (ti, h) in tokens.iter().enumerate() {
            if !r.secrets.contains(&h.path) {
                continue;
            }
            let said = crate::dual::said(r, &f);
            let w = &mut out[ti];
            match f {
                crate::dual::DualFate::Encoded { .. } => w.elsewhere.push(said),
                crate::dual::DualFate::Unknown(_) => w.unknown.push(said),
                crate::dual::DualFate::Derived { .. } => w.derived.push(said),
                crate::dual::DualFate::Independent => {}
            }
        }
    }
    for t in c
        .transcript
        .iter()
        .chain(c.denied_transcript)
        .chain(c.trigger_transcript)
    {
        if t.dir != glassbox_model::Direction::ServerToClient {
            continue;
        }
        for (n, _) in m.find_in_forms(t.raw.as_slice()) {
            let w = &mut out[n.token];
            if !w.answers.contains(&t.phase) {
                w.answers.push(t.phase.clone());
            }
        }
    }
    Some(out)
}

/// Which of `flows` carry a planted secret of `tokens` in a form the search reads (any
/// destination): what dual execution need not make again, the value already found.
pub fn carries_planted_secret(flows: &[Flow], tokens: &[glassbox_model::Honeytoken]) -> Vec<bool> {
    let mut out = vec![false; flows.len()];
    if let Some(m) = Matcher::new(tokens) {
        for ((fi, _), _) in leaks(&m, flows).items {
            if let Some(o) = out.get_mut(fi) {
                *o = true;
            }
        }
    }
    out
}

/// What `m` finds in each flow's fields, per (flow, honeytoken) by index.
fn leaks(m: &Matcher, flows: &[Flow]) -> Keyed<(usize, usize), Leak> {
    let mut leaks: Keyed<(usize, usize), Leak> = Keyed::new();
    for (fi, f) in flows.iter().enumerate() {
        for (field, hay, t) in fields_at(f) {
            // The stream holds the exchanges' parts too: where they were read, they say
            // where a secret was (and when it was sent).
            let stream = matches!(field, "payload" | "decrypted payload");
            let kept = field != CREDENTIAL_HEADER && (!stream || f.exchanges.is_empty());
            let timed = !stream || f.exchanges.is_empty();
            for (n, form) in m.find_in_forms(&hay) {
                let Some(leak) = leaks.get((fi, n.token)) else {
                    continue;
                };
                leak.kept |= kept;
                match (timed, t) {
                    (false, _) => {}
                    (true, 0) => leak.untimed = true,
                    (true, t) => {
                        if !leak.sent_at.contains(&t) && leak.sent_at.len() < MAX_SPANS {
                            leak.sent_at.push(t);
                        }
                    }
                }
                if n.piece.whole() {
                    leak.whole = true;
                }
                add_span(&mut leak.spans, n.piece);
                let encoding = (n.encoding != Encoding::Raw).then(|| n.encoding.name());
                let how = form.how(encoding, field);
                if !leak.how.contains(&how) {
                    leak.how.push(how);
                }
            }
        }
    }
    leaks
}

/// For the bench (`examples/canary_speed.rs`): the needles of `tokens` found in `fields`, each
/// searched in every form the check reads (`unwrap`) or only as is and percent-decoded (what
/// version 7 read); `None` without a needle.
pub(crate) fn needles_found(
    tokens: &[Honeytoken],
    fields: &[&[u8]],
    unwrap: bool,
) -> Option<usize> {
    let m = Matcher::new(tokens)?;
    let mut n = 0;
    for hay in fields {
        n += if unwrap {
            m.find_in_forms(hay).len()
        } else {
            m.find(hay).len() + layers::percent_decoded(hay).map_or(0, |d| m.find(&d).len())
        };
    }
    Some(n)
}

/// Where a planted secret went, in one flow.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
enum Fate {
    /// Anywhere but its service: exfiltration (an accusation).
    Elsewhere,
    /// A declared secret to the hosts its server is documented to use (`Honeytoken::hosts`).
    Documented,
    /// A declared secret to the vendor its name names (`BRAVE_API_KEY` to
    /// `api.search.brave.com`, [`explain::named_like`]): every name the flow carries is under
    /// that vendor's registrable domain.
    Vendor,
    /// A declared secret to a host the entry's own environment or arguments name
    /// ([`ExplainedHost::configured`]): the user configured both.
    Configured,
    /// To its own service (`Honeytoken::services`, by index): every secret of it found in the
    /// flow is one that service is for, and every name the flow carries is that service's
    /// host or under it (an AWS key id to `sts.amazonaws.com`; not its secret key, anywhere).
    Used(usize),
}

/// The fate of `leak`, the secrets of `h` found in flow `f`.
fn fate(f: &Flow, h: &Honeytoken, leak: &Leak, explained: &[ExplainedHost]) -> Fate {
    let names = net::names(f);
    let under = |hosts: &[String]| {
        !names.is_empty()
            && names.iter().all(|(_, n)| {
                hosts.iter().any(|d| {
                    let d = net::norm_host(d.as_bytes());
                    net::is_under(n, &d)
                })
            })
    };
    let found: Vec<usize> = leak.spans.iter().map(|p| p.secret).collect();
    // On a name its provider rents out (a bucket, path-style or not), a secret presented as
    // a credential goes to the provider, which checks it; one in what the request carries
    // goes to the tenant, whoever that is.
    let rented = names
        .iter()
        .any(|(_, n)| explain::tenant(n) || explain::rents_paths(n));
    // A service every secret found is one it is for.
    let for_service = |s: &glassbox_model::SecretService| {
        s.secrets.is_empty() || found.iter().all(|i| s.secrets.contains(i))
    };
    let used = h
        .services
        .iter()
        .position(|s| for_service(s) && under(&s.hosts) && !(rented && leak.kept));
    let vendor = || {
        let words = h
            .path
            .strip_prefix("env:")
            .filter(|_| h.kind == "declared-secret")
            .map(explain::vendor_words)
            .unwrap_or_default();
        // A credential presented to the vendor's provider on a tenant's name (a key id in
        // the SigV4 signature of a request to the user's bucket) goes to the provider.
        let presented = |n: &str| !leak.kept && words.iter().any(|w| explain::provided_by(n, w));
        let carried_to_tenant = rented && leak.kept;
        !words.is_empty()
            && !names.is_empty()
            && !carried_to_tenant
            && names
                .iter()
                .all(|(_, n)| explain::named_like(n, &words).is_some() || presented(n))
    };
    // A declared secret to a host the user's own configuration of the entry names (the
    // token of `JIRA_API_TOKEN` to the site of `JIRA_URL`): the user gave both.
    let all_configured = || {
        !names.is_empty()
            && names.iter().all(|(_, n)| {
                explain::explaining(explained, n).is_some_and(ExplainedHost::configured)
            })
    };
    let configured = || h.kind == "declared-secret" && all_configured();
    // A planted secret presented as a credential, one its service is for, to an endpoint the
    // user's configuration names (`AWS_ENDPOINT_URL` of an S3-compatible store): the user
    // pointed the client there. Not what the request carries, not a secret no client sends
    // (an AWS secret key).
    let configured_endpoint =
        || !leak.kept && h.services.iter().any(for_service) && all_configured();
    match used {
        Some(si) => Fate::Used(si),
        None if !h.hosts.is_empty() && under(&h.hosts) => Fate::Documented,
        None if vendor() => Fate::Vendor,
        None if configured() || configured_endpoint() => Fate::Configured,
        None => Fate::Elsewhere,
    }
}

/// The phase whose window (`manifest.timings`) holds `t_ns`, the flows' and events' clock;
/// the latest such window when windows touch.
pub(crate) fn phase_at(timings: &[glassbox_model::PhaseTiming], t_ns: u64) -> Option<Phase> {
    timings
        .iter()
        .filter(|w| w.start_ns <= t_ns && t_ns <= w.end_ns)
        .max_by_key(|w| w.start_ns)
        .map(|w| w.phase.clone())
}

/// One planted file's secret in the flows of one run: a finding (or, to its documented
/// hosts or its own service, a note).
#[derive(Default)]
struct Group {
    /// Per flow (by index), in order: what was found there.
    flows: Vec<(usize, Leak)>,
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
        // Which planted files were found anywhere (the others went nowhere).
        let mut found_any = vec![false; tokens.len()];
        // Per honeytoken, run, and fate: the flows, in order.
        let mut groups: Keyed<(usize, NetworkMode, Fate), Group> = Keyed::new();
        let explained = explain::explained(ctx.manifest);
        for ((fi, ti), leak) in leaks.items {
            let (Some(f), Some(h)) = (ctx.flows.get(fi), tokens.get(ti)) else {
                continue;
            };
            found_any[ti] = true;
            let fate = fate(f, h, &leak, &explained);
            if let Some(g) = groups.get((ti, f.mode, fate)) {
                g.flows.push((fi, leak));
            }
        }
        let mut findings = Vec::new();
        let mut notes = Vec::new();
        for ((ti, mode, fate), g) in groups.items {
            let Some(h) = tokens.get(ti) else { continue };
            let n_secrets = h.secrets.len();
            let whole = g.flows.iter().any(|(_, l)| l.whole);
            let mut spans = Vec::new();
            let mut how: Vec<String> = Vec::new();
            let mut ids = Vec::new();
            let mut flow_ids = Vec::new();
            // When: a secret found in an HTTP exchange was sent by the phase of that
            // exchange's time (a kept-alive connection opened in an earlier phase carries
            // later phases' requests); elsewhere, by the phases of the flow's calls.
            let mut untimed_ids = Vec::new();
            let mut sent_at = Vec::new();
            for (fi, l) in &g.flows {
                for &p in &l.spans {
                    add_span(&mut spans, p);
                }
                for x in &l.how {
                    if !how.contains(x) {
                        how.push(x.clone());
                    }
                }
                let f = &ctx.flows[*fi];
                net::add_ids(&mut ids, &f.events);
                flow_ids.push(f.id);
                let timed: Vec<Phase> = (l.sent_at.iter())
                    .filter_map(|t| phase_at(&ctx.manifest.timings, *t))
                    .collect();
                if l.untimed || timed.len() < l.sent_at.len() || l.sent_at.is_empty() {
                    net::add_ids(&mut untimed_ids, &f.events);
                }
                for p in timed {
                    if !sent_at.contains(&p) {
                        sent_at.push(p);
                    }
                }
            }
            let mut ps = phases.of(&untimed_ids);
            for p in sent_at {
                if !ps.contains(&p) {
                    ps.push(p);
                }
            }
            let (how_much, extent) = match whole {
                true => ("the", String::new()),
                false => (
                    "part of the",
                    format!("; {}", extent(&spans, n_secrets, true)),
                ),
            };
            let mut summary = format!(
                "{how_much} planted secret of {} ({}{extent}) left in ",
                net::show(&h.path),
                net::show(&h.kind),
            );
            let during = match ps.is_empty() {
                true => String::new(),
                false => format!(" during {}", text::phases(&ps)),
            };
            let denied = mode == NetworkMode::Denied;
            match g.flows.as_slice() {
                // One flow: `TCP to 198.18.1.3:80 (...): hex in payload (denied run) during ...`.
                [(fi, _)] => {
                    summary += &destination(&ctx.flows[*fi]);
                    summary += &format!(": {}", how.join("; "));
                    if denied {
                        summary += " (denied run)";
                    }
                    summary += &during;
                }
                // Several: `3 flows (hex in DNS query) of the denied run during ...: DNS to
                // ... in flow 4 (bytes 4..16); ...`.
                _ => {
                    summary += &net::count(g.flows.len() as u64, "flow", "flows");
                    summary += &format!(" ({})", how.join("; "));
                    if denied {
                        summary += " of the denied run";
                    }
                    summary += &format!("{during}: {}", destinations(ctx, &g, n_secrets));
                }
            }
            let used = match fate {
                Fate::Elsewhere => None,
                Fate::Documented => Some("its documented host: expected".to_string()),
                Fate::Vendor => Some(
                    "the vendor its name names, the service it is for: use, not theft".to_string(),
                ),
                Fate::Configured => Some(
                    "a host the entry's own configuration names beside it: use, not theft"
                        .to_string(),
                ),
                Fate::Used(si) => h.services.get(si).map(|s| {
                    format!(
                        "used with its own service, {}: use, not theft",
                        net::show(&s.name)
                    )
                }),
            };
            if let Some(why) = used {
                let mut note = INFO.finding(format!("{summary} ({why})"), ids, ps.first().cloned());
                note.flows = flow_ids;
                notes.push(note);
                continue;
            }
            let mut finding = INFO.finding(summary, ids, ps.first().cloned());
            finding.flows = flow_ids;
            finding.accusation = true;
            findings.push(finding);
        }
        if leaks.overflow > 0 || groups.overflow > 0 {
            let mut f = INFO.finding(
                format!(
                    "{} more planted secrets found in further flows (not listed)",
                    leaks.overflow + groups.overflow
                ),
                Vec::new(),
                None,
            );
            f.accusation = true;
            findings.push(f);
        }
        // Dual execution: a call whose bytes changed with the secret it read, enough of them
        // to carry it, sent the value encoded (unless a finding above already names that
        // call); what else the runs say is a note.
        for (r, f) in ctx.manifest.dual.iter().zip(self.dual) {
            let what = r
                .secrets
                .iter()
                .map(|p| net::show(p))
                .collect::<Vec<_>>()
                .join(", ");
            let summary = match f {
                crate::dual::DualFate::Encoded { .. } => format!(
                    "the planted secret of {what} left in {}",
                    crate::dual::said(r, &f)
                ),
                _ => format!("the planted secret of {what}: {}", crate::dual::said(r, &f)),
            };
            match f {
                crate::dual::DualFate::Encoded { .. } => {
                    let shown = findings.iter().any(|x| x.phase.as_ref() == Some(&r.phase));
                    if !shown {
                        let mut finding = INFO.finding(summary, Vec::new(), Some(r.phase.clone()));
                        finding.accusation = true;
                        findings.push(finding);
                    }
                }
                // Unknown is said as what could not be read (`unread`).
                crate::dual::DualFate::Unknown(_) => {}
                _ => notes.push(INFO.finding(summary, Vec::new(), Some(r.phase.clone()))),
            }
        }
        // Where every planted secret went: the ones above, and those found nowhere.
        let nowhere: Vec<String> = tokens
            .iter()
            .zip(&found_any)
            .filter(|(h, found)| !**found && !h.secrets.is_empty())
            .map(|(h, _)| format!("{} ({})", net::show(&h.path), net::show(&h.kind)))
            .collect();
        if !nowhere.is_empty() {
            notes.push(INFO.finding(
                format!(
                    "{} found in nothing the edge read: {}",
                    net::count(nowhere.len() as u64, "planted secret", "planted secrets"),
                    nowhere.join(", ")
                ),
                Vec::new(),
                None,
            ));
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

/// A flow's destination: `TCP to 198.18.1.3:80 (DNS name collect.example, Host ...)`.
fn destination(f: &Flow) -> String {
    let names: Vec<String> = net::names(f)
        .into_iter()
        .map(|(what, n)| format!("{what} {}", net::show(&n)))
        .collect();
    let mut s = format!("{} to {}", net::protocol(f.protocol), net::addr(&f.dst));
    if !names.is_empty() {
        s += &format!(" ({})", names.join(", "));
    }
    s
}

/// Where a group's secret went, when in several flows: each destination with its flows and
/// the bytes each carried (`DNS to 198.18.0.2:53 (DNS query ...) in flow 4 (bytes 4..16)`),
/// flows to the same destination together, at most [`FLOWS_SHOWN`] flows named.
fn destinations(ctx: &crate::Context<'_>, g: &Group, n_secrets: usize) -> String {
    let mut by_dest: Vec<(String, Vec<String>)> = Vec::new();
    for (fi, l) in g.flows.iter().take(FLOWS_SHOWN) {
        let f = &ctx.flows[*fi];
        let what = match l.whole {
            true => "the whole secret".to_string(),
            false => extent(&l.spans, n_secrets, false),
        };
        let one = format!("{} ({what})", f.id);
        let d = destination(f);
        match by_dest.iter_mut().find(|(x, _)| *x == d) {
            Some((_, v)) => v.push(one),
            None => by_dest.push((d, vec![one])),
        }
    }
    let mut parts: Vec<String> = by_dest
        .into_iter()
        .map(|(d, fs)| {
            let word = if fs.len() == 1 { "flow" } else { "flows" };
            format!("{d} in {word} {}", fs.join(", "))
        })
        .collect();
    if g.flows.len() > FLOWS_SHOWN {
        parts.push(format!(
            "{} more",
            net::count((g.flows.len() - FLOWS_SHOWN) as u64, "flow", "flows")
        ));
    }
    parts.join("; ")
}

#[cfg(test)]
pub(crate) fn evaluate(ev: &glassbox_model::Evidence) -> Evaluation {
    crate::evaluate_one(start, ev)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::layers::percent_decoded;
    use crate::testutil::{Ev, F};
    use glassbox_model::Phase;

    /// A request sent on a kept-alive connection that an earlier call opened is the later
    /// call's (issue 34): by its exchange's time, not by the `connect`.
    #[test]
    fn a_secret_sent_on_a_connection_an_earlier_call_opened_is_the_sending_call_s() {
        const KEY: &str = "wJalrXUtnFEMIK7MDENGbPxRfiCYzEXAMPLEKEY1";
        let warm = Phase::Call("warm".into());
        let send = Phase::Call("send".into());
        let mut ev = Ev::new()
            .honeytoken_secrets("/home/user/.aws/credentials", "aws-credentials", &[KEY])
            .connect("198.18.1.3:443", warm.clone())
            .flow(
                F::tcp("198.18.1.3:443")
                    .name("collect.example")
                    .events(&[1]),
            )
            .build();
        ev.manifest.timings = vec![
            glassbox_model::PhaseTiming {
                phase: warm.clone(),
                start_ns: 0,
                end_ns: 10_000,
            },
            glassbox_model::PhaseTiming {
                phase: send.clone(),
                start_ns: 10_000,
                end_ns: 20_000,
            },
        ];
        let exchange = |t: u64, body: &str| -> glassbox_model::HttpExchange {
            serde_json::from_value(serde_json::json!({
                "t_ns": t, "method": "POST", "target": "/v1", "body": body, "status": 200,
            }))
            .unwrap()
        };
        ev.flows[0].exchanges = vec![exchange(5_000, "hello"), exchange(15_000, KEY)];
        let e = evaluate(&ev);
        assert_eq!(e.findings.len(), 1, "{e:#?}");
        assert_eq!(e.findings[0].phase, Some(send.clone()));
        assert!(
            e.findings[0].summary.ends_with("during call:send"),
            "{}",
            e.findings[0].summary
        );
        // A bundle from before exchanges were timed: the connect's call, as it was.
        for x in &mut ev.flows[0].exchanges {
            x.t_ns = 0;
        }
        let e = evaluate(&ev);
        assert_eq!(e.findings[0].phase, Some(warm));
    }

    #[test]
    fn a_tls_flow_that_sent_only_its_client_hello_is_not_unread() {
        use crate::testutil::client_hello;
        let why = "the TLS handshake did not complete";
        let flow = |bytes: Vec<u8>| F::tcp("198.18.1.3:443").tls_refused(why).sample(bytes).0;
        let unread_of = |f: &Flow| unread([f], |_| true);
        // Whole, in one record or split over three: all it sent was read (and searched).
        assert!(unread_of(&flow(client_hello(300, 16384))).is_empty());
        assert!(unread_of(&flow(client_hello(300, 100))).is_empty());
        // Anything after it: an alert (a refused certificate), an encrypted record, a second
        // handshake message, a cut record.
        for tail in [
            &[0x15, 3, 3, 0, 2, 2, 48][..],
            &[0x17, 3, 3, 0, 3, 1, 2, 3],
            &[0x16, 3, 3, 0, 4, 16, 0, 0, 0],
            &[0x16, 3, 3],
        ] {
            let mut b = client_hello(300, 16384);
            b.extend_from_slice(tail);
            assert_eq!(unread_of(&flow(b)).len(), 1, "{tail:?}");
        }
        // Not all of it kept, or counted beyond what was kept.
        let mut cut = flow(client_hello(300, 16384));
        cut.sample_truncated = true;
        assert_eq!(unread_of(&cut).len(), 1);
        let mut more = flow(client_hello(300, 16384));
        more.bytes_out += 10;
        assert_eq!(unread_of(&more).len(), 1);
        // The edge answered it: a client that then closed may have refused the certificate.
        let mut answered = flow(client_hello(300, 16384));
        answered.bytes_in = 1200;
        assert_eq!(unread_of(&answered).len(), 1);
        // A ClientHello's bytes on a flow not known as TLS (QUIC, a stream the edge did not
        // read as TLS) say nothing of what else it carried.
        let mut quic = flow(client_hello(300, 16384));
        quic.tls = None;
        assert_eq!(unread_of(&quic).len(), 1);
    }

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

    /// The findings of `ev` (what a secret found nowhere leaves: none; its note says so).
    fn no_finding(ev: &glassbox_model::Evidence) -> Vec<String> {
        let e = evaluate(ev);
        assert!(
            e.notes
                .iter()
                .all(|n| n.summary.contains("found in nothing the edge read")),
            "{:?}",
            e.notes
        );
        e.findings.into_iter().map(|f| f.summary).collect()
    }

    fn hex(b: &[u8]) -> String {
        b.iter().map(|b| format!("{b:02X}")).collect()
    }

    /// AWS credentials as glassbox plants them: the key id is for AWS, the secret key for no
    /// one; sent in one flow to `host`.
    fn aws_to(host: &str, body: &str) -> glassbox_model::Evidence {
        let key_id = format!("AKIA{}", &secret(3, 40).to_ascii_uppercase()[..16]);
        let key = secret(4, 40);
        let mut ev = Ev::new()
            .honeytoken_secrets(
                "/home/user/.aws/credentials",
                "aws-credentials",
                &[&key_id, &key],
            )
            .honeytoken_secrets(
                "/home/user/.ssh/id_ed25519",
                "ssh-ed25519-key",
                &[&secret(5, 80)],
            )
            .connect("198.18.1.3:443", Phase::Call("list_buckets".into()))
            .build();
        ev.manifest.sandbox.honeytokens[0].services = vec![glassbox_model::SecretService {
            name: "AWS".into(),
            hosts: vec!["amazonaws.com".into()],
            secrets: vec![0],
        }];
        let body = body.replace("KEYID", &key_id).replace("SECRET", &key);
        let f = F::tcp("198.18.1.3:443")
            .name(host)
            .sni(host)
            .sample(body.into_bytes())
            .events(&[1]);
        ev.flows.push(glassbox_model::Flow { id: 1, ..f.0 });
        ev
    }

    #[test]
    fn a_secret_sent_to_its_own_service_is_use_and_anywhere_else_theft() {
        // A SigV4 request: the key id in its Authorization, to AWS: use.
        let sigv4 = "GET / HTTP/1.1\r\nAuthorization: AWS4-HMAC-SHA256 Credential=KEYID/20261201/us-east-1/sts/aws4_request, Signature=00\r\n\r\n";
        let e = evaluate(&aws_to("sts.us-east-1.amazonaws.com", sigv4));
        assert!(e.findings.is_empty(), "{:?}", e.findings);
        let used: Vec<&str> = e.notes.iter().map(|n| n.summary.as_str()).collect();
        assert!(
            used.iter()
                .any(|n| n.contains("used with its own service, AWS: use, not theft")),
            "{used:?}"
        );
        // The secret that was never read is listed as gone nowhere.
        assert!(
            used.iter()
                .any(|n| n.contains("found in nothing the edge read") && n.contains("id_ed25519")),
            "{used:?}"
        );
        // The same key id elsewhere, or the secret key even to AWS: theft.
        for (host, body) in [
            ("collect.exfil.example", sigv4),
            ("amazonaws.com.exfil.example", sigv4),
            (
                "sts.us-east-1.amazonaws.com",
                "POST / HTTP/1.1\r\n\r\nsecret=SECRET",
            ),
        ] {
            let e = evaluate(&aws_to(host, body));
            assert_eq!(e.findings.len(), 1, "{host}: {:?}", e.notes);
            assert!(e.findings[0].accusation);
        }
    }

    /// An AWS request read inside TLS to `host`: `method target`, `headers`, `body`, with the
    /// planted key id for `KEYID` and its secret key for `SECRET`.
    fn aws_exchange(
        host: &str,
        target: &str,
        headers: &[(&str, &str)],
        body: &str,
    ) -> glassbox_model::Evidence {
        let mut ev = aws_to(host, "");
        let key_id = ev.manifest.sandbox.honeytokens[0].secrets[0].clone();
        let key = ev.manifest.sandbox.honeytokens[0].secrets[1].clone();
        let fill = |t: &str| t.replace("KEYID", &key_id).replace("SECRET", &key);
        let mut hs: Vec<(String, String)> = vec![("Host".into(), host.into())];
        hs.extend(headers.iter().map(|(n, v)| (n.to_string(), fill(v))));
        let exchange: glassbox_model::HttpExchange = serde_json::from_value(serde_json::json!({
            "method": "PUT",
            "target": fill(target),
            "headers": hs,
            "body": fill(body),
            "status": 200,
        }))
        .unwrap();
        ev.flows[0].exchanges = vec![exchange];
        ev.flows[0].sample = glassbox_model::Bytes::default();
        ev
    }

    /// A bucket is someone's: a planted AWS key id in what a request to a bucket carries (its
    /// body, its target) goes to whoever owns the bucket, path-style or not; presented in a
    /// SigV4 `Authorization`, to a bucket too, it goes to AWS, which checks it: use.
    #[test]
    fn a_key_dropped_in_a_bucket_is_theft_and_one_that_signs_is_use() {
        let sigv4 = "AWS4-HMAC-SHA256 Credential=KEYID/20261201/us-east-1/s3/aws4_request, SignedHeaders=host, Signature=00";
        for (host, target, headers, body) in [
            ("loot.s3.amazonaws.com", "/k", vec![], "id=KEYID"),
            ("loot.s3.us-east-1.amazonaws.com", "/k?c=KEYID", vec![], ""),
            ("s3.amazonaws.com", "/loot/k", vec![], "KEYID"),
            (
                "s3.amazonaws.com",
                "/loot/k",
                vec![("Authorization", sigv4)],
                "KEYID",
            ),
            (
                "x.execute-api.us-east-1.amazonaws.com",
                "/p",
                vec![("X-Note", "KEYID")],
                "",
            ),
        ] {
            let e = evaluate(&aws_exchange(host, target, &headers, body));
            assert_eq!(e.findings.len(), 1, "{host}{target}: {:?}", e.notes);
            assert!(e.findings[0].accusation, "{host}");
        }
        // A presigned URL presents the key id in its query: use, as a signed request is.
        let presigned = "/k?X-Amz-Algorithm=AWS4-HMAC-SHA256&X-Amz-Credential=KEYID%2F20261201%2Fus-east-1%2Fs3%2Faws4_request&X-Amz-Signature=00";
        let e = evaluate(&aws_exchange(
            "mine.s3.amazonaws.com",
            presigned,
            &[],
            "data",
        ));
        assert!(e.findings.is_empty(), "{:?}", e.findings);
        // The key id in another parameter of the same URL is what the request carries.
        let e = evaluate(&aws_exchange(
            "mine.s3.amazonaws.com",
            &format!("{presigned}&note=KEYID"),
            &[],
            "",
        ));
        assert_eq!(e.findings.len(), 1, "{:?}", e.notes);
        for host in [
            "mine.s3.amazonaws.com",
            "s3.amazonaws.com",
            "sts.amazonaws.com",
        ] {
            let e = evaluate(&aws_exchange(
                host,
                "/k",
                &[("Authorization", sigv4)],
                "data",
            ));
            assert!(e.findings.is_empty(), "{host}: {:?}", e.findings);
            assert!(
                e.notes
                    .iter()
                    .any(|n| n.summary.contains("used with its own service, AWS")),
                "{host}: {:?}",
                e.notes
            );
        }
    }

    /// An endpoint the user's configuration names (`AWS_ENDPOINT_URL`, an S3-compatible
    /// store): the key id presented in a signature is use; the secret key, or the key id in
    /// what the request carries, is theft.
    #[test]
    fn a_key_that_signs_for_the_configured_endpoint_is_use() {
        let sigv4 = "AWS4-HMAC-SHA256 Credential=KEYID/20261201/us-east-1/s3/aws4_request, SignedHeaders=host, Signature=00";
        let configured = |headers: &[(&str, &str)], body: &str| {
            let mut ev = aws_exchange("store.minio.test", "/k", headers, body);
            ev.manifest.network.names = vec![glassbox_model::EntryName {
                by: "environment".into(),
                field: "AWS_ENDPOINT_URL".into(),
                host: "store.minio.test".into(),
                bare: false,
            }];
            evaluate(&ev)
        };
        let e = configured(&[("Authorization", sigv4)], "data");
        assert!(e.findings.is_empty(), "{:?}", e.findings);
        assert!(
            e.notes.iter().any(|n| n
                .summary
                .contains("a host the entry's own configuration names")),
            "{:?}",
            e.notes
        );
        for (headers, body) in [
            (vec![("Authorization", "Basic KEYID:SECRET")], ""),
            (vec![], "id=KEYID"),
        ] {
            let e = configured(&headers, body);
            assert_eq!(e.findings.len(), 1, "{headers:?} {body}: {:?}", e.notes);
            assert!(e.findings[0].accusation);
        }
        // The same signature to a host nothing configures: theft.
        let e = evaluate(&aws_exchange(
            "store.minio.test",
            "/k",
            &[("Authorization", sigv4)],
            "",
        ));
        assert_eq!(e.findings.len(), 1, "{:?}", e.notes);
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
        // With no documented host, to the vendor its name names (WEATHER_API_KEY to the
        // registrable domain weather.com): a note too.
        let mut ev = declared(&[]);
        to(&mut ev, "api.weather.com");
        let e = evaluate(&ev);
        assert!(e.findings.is_empty(), "{:?}", e.findings);
        assert!(
            e.notes[0].summary.contains("the vendor its name names"),
            "{}",
            e.notes[0].summary
        );
        // Anywhere else: exfiltration.
        for (hosts, dest) in [
            (&["weather.example"][..], "weather.example.evil.example"),
            (&["weather.example"][..], "collect.example"),
            (&[][..], "weather.collect.example"),
            (&[][..], "api.forecast.example"),
            // The vendor's label under another suffix: whoever registered it there.
            (&[][..], "api.weather.example"),
            (&[][..], "weather.co.uk"),
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
        let e = evaluate(&ev);
        // One finding for the planted file, with both flows.
        assert_eq!(e.findings.len(), 1);
        assert_eq!(e.findings[0].flows, vec![1, 2]);
        assert_eq!(
            e.findings[0].summary,
            format!(
                "the planted secret of /home/user/.aws/credentials (aws-credentials) left in \
                 2 flows (as is in SNI; as is in payload): TCP to 198.18.1.4:443 (SNI \
                 {s}.exfil.example) in flow 1 (the whole secret); Unix to \
                 unix:/var/run/docker.sock in flow 2 (the whole secret)"
            )
        );
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
                 bytes 240..280 of 460)"
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
        assert_eq!(no_finding(&ev), Vec::<String>::new());
    }

    #[test]
    fn short_secrets_are_not_searched() {
        let ev = Ev::new()
            .honeytoken_secrets("/home/user/.pgpass", "pgpass", &["hunter2", "abc12345678"])
            .flow(F::tcp("192.0.2.1:5432").sample(&b"hunter2 abc12345678"[..]))
            .build();
        assert_eq!(no_finding(&ev), Vec::<String>::new());
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

    /// The AWS credentials as the generator records them: the key id and the secret key, and
    /// their random parts (the key id after `AKIA`, the whole secret key).
    fn aws(seed: u64) -> (Ev, String, String) {
        let id = format!(
            "AKIA{}",
            secret(seed, 16).to_uppercase().replace(['+', '/'], "Q")
        );
        let key = secret(seed + 1, 40);
        let ev = Ev::new()
            .honeytoken_secrets(
                "/home/user/.aws/credentials",
                "aws-credentials",
                &[&id, &key],
            )
            .connect("198.18.1.3:443", Phase::Call("sync".into()));
        (ev, id, key)
    }

    fn with_random(mut ev: glassbox_model::Evidence, random: &[&str]) -> glassbox_model::Evidence {
        ev.manifest.sandbox.honeytokens[0].random = random.iter().map(|r| r.to_string()).collect();
        ev
    }

    /// A TCP flow to sync.exfil.example:443 read inside TLS, one POST with `body`.
    fn https_post(body: &[u8]) -> F {
        let exchange: glassbox_model::HttpExchange = serde_json::from_value(serde_json::json!({
            "method": "POST",
            "target": "/v1/part",
            "headers": [["Host", "sync.exfil.example"]],
            "body": String::from_utf8_lossy(body),
            "status": 200,
        }))
        .unwrap();
        let mut f = F::tcp("198.18.1.3:443")
            .name("sync.exfil.example")
            .sni("sync.exfil.example")
            .events(&[1]);
        f.0.exchanges = vec![exchange];
        f
    }

    /// The credentials file, as a server reads it whole (both secrets, labels between them),
    /// compressed by `compress`.
    fn compressed_credentials(id: &str, key: &str, gzip: bool) -> Vec<u8> {
        use std::io::Write;
        let file = format!(
            "[default]\naws_access_key_id = {id}\naws_secret_access_key = {key}\nregion = us-east-1\n"
        );
        let level = flate2::Compression::default();
        if gzip {
            let mut e = flate2::write::GzEncoder::new(Vec::new(), level);
            e.write_all(file.as_bytes()).unwrap();
            e.finish().unwrap()
        } else {
            let mut e = flate2::write::ZlibEncoder::new(Vec::new(), level);
            e.write_all(file.as_bytes()).unwrap();
            e.finish().unwrap()
        }
    }

    #[test]
    fn a_secret_compressed_then_base64_in_a_json_field_is_found() {
        let (ev, id, key) = aws(40);
        let packed = compressed_credentials(&id, &key, false);
        // Compressed, the secret is nowhere in the bytes sent, in any encoding a needle has.
        let body = format!(
            r#"{{"host":"dev","blob":"{}"}}"#,
            base64::engine::general_purpose::STANDARD.encode(&packed)
        );
        let ev = ev.flow(https_post(body.as_bytes())).build();
        let e = evaluate(&ev);
        assert_eq!(e.findings.len(), 1, "{:?}", e);
        let f = &e.findings[0];
        assert!(f.accusation);
        assert!(
            f.summary
                .contains("the planted secret of /home/user/.aws/credentials")
                && f.summary
                    .contains("zlib-compressed, base64-encoded, in HTTP body"),
            "{}",
            f.summary
        );
        // The search's own check: without unwrapping, nothing would be found.
        let m = Matcher::new(&ev.manifest.sandbox.honeytokens).unwrap();
        assert!(m.find(body.as_bytes()).is_empty());
    }

    #[test]
    fn a_gzip_file_of_the_secret_in_a_binary_multipart_body_is_found() {
        let (ev, id, key) = aws(41);
        let mut body =
            b"--b\r\nContent-Disposition: form-data; name=\"f\"; filename=\"c.gz\"\r\n\r\n"
                .to_vec();
        body.extend(compressed_credentials(&id, &key, true));
        body.extend(b"\r\n--b--\r\n");
        let mut flow = https_post(b"");
        flow.0.exchanges[0].body = body.into();
        let e = evaluate(&ev.flow(flow).build());
        assert_eq!(e.findings.len(), 1, "{:?}", e);
        assert!(
            e.findings[0]
                .summary
                .contains("gzip-compressed in HTTP body"),
            "{}",
            e.findings[0].summary
        );
    }

    #[test]
    fn a_compressed_upload_without_a_secret_is_no_finding() {
        // A workspace file, compressed and base64-encoded, as a backup tool uploads it.
        use std::io::Write;
        let (ev, _, _) = aws(42);
        let mut e = flate2::write::ZlibEncoder::new(Vec::new(), flate2::Compression::default());
        e.write_all("# notes\n".repeat(200).as_bytes()).unwrap();
        let body = format!(
            r#"{{"file":"notes.md","data":"{}"}}"#,
            base64::engine::general_purpose::STANDARD.encode(e.finish().unwrap())
        );
        let ev = ev.flow(https_post(body.as_bytes())).build();
        assert_eq!(no_finding(&ev), Vec::<String>::new());
    }

    #[test]
    fn a_secret_in_hex_pieces_over_dns_queries_is_one_finding() {
        let (ev, id, key) = aws(30);
        // The secret key hex, 16 bytes a query: bytes 0..16, 16..32, 32..40.
        let mut ev = ev;
        for chunk in key.as_bytes().chunks(16) {
            ev = ev.flow(F::dns(&format!("{}.c.exfil.example", hex(chunk)), "A").events(&[1]));
        }
        let ev = ev.build();
        // Before random parts were recorded: a piece shorter than a whole window is not found.
        assert_eq!(no_finding(&ev), Vec::<String>::new());
        let ev = with_random(ev, &[&id[4..], &key]);
        let e = evaluate(&ev);
        assert_eq!(e.findings.len(), 1, "{:?}", e.findings);
        let f = &e.findings[0];
        assert!(f.accusation);
        // The last query carries 8 bytes: too few to be told from chance.
        assert_eq!(f.flows, vec![1, 2]);
        assert_eq!(f.evidence, vec![1]);
        let name = |i: usize| {
            format!(
                "{}.c.exfil.example",
                hex(&key.as_bytes()[i * 16..i * 16 + 16]).to_lowercase()
            )
        };
        assert_eq!(
            f.summary,
            format!(
                "part of the planted secret of /home/user/.aws/credentials (aws-credentials; \
                 value 2 of 2: bytes 0..32 of 40) left in 2 flows (hex in DNS query) during \
                 call:sync: DNS to 198.18.0.2:53 (DNS query {}) in flow 1 (bytes 0..16 of \
                 value 2); DNS to 198.18.0.2:53 (DNS query {}) in flow 2 (bytes 16..32 of \
                 value 2)",
                name(0),
                name(1)
            )
        );
    }

    #[test]
    fn twelve_byte_pieces_over_https_requests_are_put_together() {
        let (ev, id, key) = aws(40);
        let mut ev = ev;
        for piece in key.as_bytes().chunks(12) {
            let body = format!("{{\"part\":\"{}\"}}", std::str::from_utf8(piece).unwrap());
            ev = ev.flow(https_post(body.as_bytes()));
        }
        let ev = with_random(ev.build(), &[&id[4..], &key]);
        let e = evaluate(&ev);
        assert_eq!(e.findings.len(), 1, "{:?}", e.findings);
        let f = &e.findings[0];
        // Three pieces of 12 bytes; the fourth, of 4, is not found.
        assert_eq!(f.flows, vec![1, 2, 3]);
        assert_eq!(
            f.summary,
            "part of the planted secret of /home/user/.aws/credentials (aws-credentials; value \
             2 of 2: bytes 0..36 of 40) left in 3 flows (as is in HTTP body) during call:sync: \
             TCP to 198.18.1.3:443 (DNS name sync.exfil.example, SNI sync.exfil.example) in \
             flows 1 (bytes 0..12 of value 2), 2 (bytes 12..24 of value 2), 3 (bytes 24..36 \
             of value 2)"
        );
        // The same in the denied run is another finding, saying so.
        let mut denied = ev.clone();
        for f in &mut denied.flows {
            f.mode = NetworkMode::Denied;
        }
        denied.flows.extend(ev.flows.iter().cloned().map(|mut f| {
            f.id += 10;
            f
        }));
        let e = evaluate(&denied);
        assert_eq!(e.findings.len(), 2);
        assert!(
            e.findings[0]
                .summary
                .contains("left in 3 flows (as is in HTTP body) of the denied run during"),
            "{}",
            e.findings[0].summary
        );
        assert_eq!(e.findings[1].flows, vec![11, 12, 13]);
    }

    #[test]
    fn a_piece_of_the_random_part_is_found_in_every_encoding() {
        use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
        let (ev, id, key) = aws(50);
        let ev = with_random(ev.build(), &[&id[4..], &key]);
        // Pieces of 12 bytes at several places of the secret key, and of the key id's 16.
        let pieces: Vec<(usize, &str)> = vec![
            (0, &key[0..12]),
            (7, &key[7..19]),
            (28, &key[28..40]),
            (4, &id[4..16]),
        ];
        for (at, piece) in pieces {
            let (value, len) = if piece == &id[4..16] {
                (1, 20)
            } else {
                (2, 40)
            };
            let exact = format!("value {value} of 2: bytes {at}..{} of {len})", at + 12);
            let mut cases: Vec<(String, F, bool)> = vec![
                ("raw".into(), https_post(piece.as_bytes()), true),
                (
                    "hex".into(),
                    https_post(hex(piece.as_bytes()).as_bytes()),
                    true,
                ),
                (
                    "hex lower, DNS labels".into(),
                    F::dns(
                        &format!(
                            "{}.{}.x.exfil.example",
                            &hex(piece.as_bytes()).to_lowercase()[..10],
                            &hex(piece.as_bytes()).to_lowercase()[10..]
                        ),
                        "A",
                    ),
                    true,
                ),
                (
                    "percent-encoded".into(),
                    https_post(
                        piece
                            .bytes()
                            .map(|b| format!("%{b:02X}"))
                            .collect::<String>()
                            .as_bytes(),
                    ),
                    true,
                ),
            ];
            for prefix in 0..3 {
                let mut data = b"xyz"[..prefix].to_vec();
                data.extend_from_slice(piece.as_bytes());
                data.extend_from_slice(b"!!");
                cases.push((
                    format!("base64 +{prefix}"),
                    https_post(STANDARD.encode(&data).as_bytes()),
                    prefix == 0,
                ));
                cases.push((
                    format!("base64url +{prefix}"),
                    https_post(URL_SAFE_NO_PAD.encode(&data).as_bytes()),
                    prefix == 0,
                ));
            }
            for (what, flow, whole_piece) in cases {
                let mut ev = ev.clone();
                let mut flow = flow.0;
                flow.id = 1;
                flow.events = vec![1];
                ev.flows = vec![flow];
                let e = evaluate(&ev);
                assert_eq!(e.findings.len(), 1, "{what} {piece}");
                let summary = &e.findings[0].summary;
                assert!(
                    summary.starts_with("part of the planted secret"),
                    "{summary}"
                );
                if whole_piece {
                    assert!(summary.contains(&exact), "{what}: {exact}: {summary}");
                } else {
                    // Misaligned base64: the piece's full groups, 9 bytes or more of it.
                    let head = format!("value {value} of 2: bytes ");
                    let range = summary
                        .split_once(&head)
                        .and_then(|(_, r)| r.split_once(" of "))
                        .and_then(|(r, _)| r.split_once(".."))
                        .map(|(a, b)| (a.parse::<usize>().unwrap(), b.parse::<usize>().unwrap()));
                    let (a, b) = range.unwrap_or_else(|| panic!("{what}: {summary}"));
                    assert!(at <= a && b <= at + 12 && b - a >= 9, "{what}: {summary}");
                }
            }
        }
    }

    #[test]
    fn pieces_with_a_fixed_part_or_too_short_are_not_found() {
        let (ev, id, key) = aws(60);
        let ev = with_random(ev.build(), &[&id[4..], &key]);
        for sent in [
            // `AKIA` and 8 random characters: 12 bytes, but 4 of them the fixed prefix.
            id[..12].to_string(),
            hex(&id.as_bytes()[..12]),
            // 11 bytes of the random part.
            key[3..14].to_string(),
            hex(&key.as_bytes()[3..14]),
        ] {
            let mut ev = ev.clone();
            let mut flow = https_post(format!("{{\"v\":\"{sent}\"}}").as_bytes()).0;
            flow.id = 1;
            ev.flows = vec![flow];
            assert_eq!(no_finding(&ev), Vec::<String>::new(), "{sent}");
        }
    }

    /// `ev` with `tokens` planted, flows carrying everything of `files` and `tokens2`'s
    /// secrets: every file as is and base64, every secret as is, hex, base64 and base64url,
    /// in HTTP bodies, and the first 30 bytes of each secret hex in DNS labels.
    fn traffic_of(
        files: &[glassbox_sandbox::PlantedFile],
        secrets: &[glassbox_model::Honeytoken],
    ) -> Vec<glassbox_model::Flow> {
        use base64::engine::general_purpose::{STANDARD, URL_SAFE_NO_PAD};
        let mut bodies: Vec<Vec<u8>> = Vec::new();
        for f in files {
            bodies.push(f.contents.clone());
            bodies.push(STANDARD.encode(&f.contents).into_bytes());
        }
        for s in secrets.iter().flat_map(|t| &t.secrets) {
            bodies.push(s.as_bytes().to_vec());
            bodies.push(hex(s.as_bytes()).into_bytes());
            bodies.push(STANDARD.encode(s).into_bytes());
            bodies.push(URL_SAFE_NO_PAD.encode(s).into_bytes());
        }
        let mut flows: Vec<glassbox_model::Flow> = bodies
            .iter()
            .map(|b| https_post(b).0)
            .chain(secrets.iter().flat_map(|t| &t.secrets).map(|s| {
                let h = hex(&s.as_bytes()[..s.len().min(30)]).to_lowercase();
                F::dns(&format!("{}.{}.c.exfil.example", &h[..30], &h[30..]), "A").0
            }))
            .collect();
        for (i, f) in flows.iter_mut().enumerate() {
            f.id = i as u64 + 1;
        }
        flows
    }

    #[test]
    fn another_set_of_planted_secrets_shares_only_fixed_parts_and_is_not_found() {
        let (_, a) = glassbox_sandbox::honeytokens::generate("/home/sam", "sam", "devbox").unwrap();
        let (files_b, b) =
            glassbox_sandbox::honeytokens::generate("/home/sam", "sam", "devbox").unwrap();
        let mut ev = Ev::new().build();
        ev.flows = traffic_of(&files_b, &b);
        // The traffic carries set b: found, every planted file of it.
        ev.manifest.sandbox.honeytokens = b.clone();
        let e = evaluate(&ev);
        assert_eq!(e.findings.len(), b.len(), "{:?}", e.findings);
        // Set a, the same formats, the same user and host: nothing.
        ev.manifest.sandbox.honeytokens = a.clone();
        assert_eq!(no_finding(&ev), Vec::<String>::new());
        // Without the random parts, a's 40-byte windows fall on the OpenSSH header that b's
        // keys share: what the random parts are for.
        for t in &mut ev.manifest.sandbox.honeytokens {
            t.random.clear();
        }
        let e = evaluate(&ev);
        assert!(
            e.findings
                .iter()
                .any(|f| f.summary.contains("ssh-ed25519-key")),
            "{:?}",
            e.findings
        );
    }

    #[test]
    fn the_automaton_of_a_full_set_stays_small() {
        let (_, tokens) =
            glassbox_sandbox::honeytokens::generate("/home/sam", "sam", "devbox").unwrap();
        let m = Matcher::new(&tokens).unwrap();
        let mut old = tokens.clone();
        for t in &mut old {
            t.random.clear();
        }
        let o = Matcher::new(&old).unwrap();
        let random: usize = tokens.iter().flat_map(|t| &t.random).map(String::len).sum();
        println!(
            "random parts: {random} bytes; patterns: {} ({} KiB) with pieces, {} ({} KiB) whole \
             and 40-byte windows",
            m.ac.patterns_len(),
            m.ac.memory_usage() / 1024,
            o.ac.patterns_len(),
            o.ac.memory_usage() / 1024
        );
        // About 3.4 patterns a random byte (raw, hex, base64, and base64url for some).
        assert!(m.ac.patterns_len() < 4 * random + o.ac.patterns_len());
        assert!(m.ac.memory_usage() < 64 << 20);
    }

    #[test]
    fn a_declared_secret_to_the_host_its_entry_configures_is_use() {
        let key = "gbx_0123456789abcdefghijklmnop";
        let mut ev = Ev::new()
            .honeytoken_secrets("env:JIRA_API_TOKEN", "declared-secret", &[key])
            .build();
        ev.manifest.network.explained = vec![ExplainedHost {
            host: "example.atlassian.net".into(),
            subdomains: true,
            by: "environment".into(),
            why: "named in the entry's environment (JIRA_URL)".into(),
        }];
        let to = |ev: &mut glassbox_model::Evidence, host: &str| {
            let f = F::tcp("198.18.1.3:443")
                .name(host)
                .sni(host)
                .sample(
                    format!("GET /rest HTTP/1.1\r\nAuthorization: Bearer {key}\r\n").into_bytes(),
                )
                .events(&[1]);
            ev.flows = vec![glassbox_model::Flow { id: 1, ..f.0 }];
        };
        to(&mut ev, "example.atlassian.net");
        let e = evaluate(&ev);
        assert!(e.findings.is_empty(), "{:?}", e.findings);
        assert!(e.notes[0]
            .summary
            .contains("the entry's own configuration names"));
        // What the package's author names (its metadata) is not the user's configuration.
        ev.manifest.network.explained[0].by = "package".into();
        assert_eq!(evaluate(&ev).findings.len(), 1);
        ev.manifest.network.explained[0].by = "environment".into();
        to(&mut ev, "collector.example");
        assert_eq!(evaluate(&ev).findings.len(), 1);
    }
}
