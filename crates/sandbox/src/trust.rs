//! The audit's own certificate authority, trusted inside the sandbox wherever the usual
//! runtimes look for trust.
//!
//! glassbox terminates TLS at its network edge with a CA made fresh for each audit. A server
//! that rejects that CA's certificates is "encrypted, not read": so the sandbox is made to
//! trust it, without touching the host. With [`Config::trust`](crate::Config::trust) set, pid 1
//! adds to the private root, after every bind of the mount plan:
//!
//! - `/run/glassbox/tls/ca.pem` ([`CA_FILE`]): the CA alone, which `NODE_EXTRA_CA_CERTS` names
//!   (Node adds that file to its own built-in roots; a bundle there would work too, but the
//!   CA alone says exactly what was added);
//! - `/run/glassbox/tls/bundle.pem` ([`BUNDLE_FILE`]): the host's system bundle (the first of
//!   [`SYSTEM_BUNDLES`] the sandbox sees) followed by the CA, bound read-only over **each** of
//!   [`SYSTEM_BUNDLES`] the sandbox sees (Debian's `/etc/ssl/certs/ca-certificates.crt`,
//!   Fedora's `/etc/pki/...`, `/etc/ssl/cert.pem`; the list is Go's, a superset of OpenSSL's
//!   and curl's compiled-in defaults), at the file a symlink chain leads to. A program that
//!   reads the system bundle by its path, ignoring every variable, trusts the CA too;
//! - `/run/glassbox/tls/certs`, bound read-only over `/etc/ssl/certs` (where that resolves):
//!   the host's hashed directory (OpenSSL's `c_rehash` layout, which `SSL_CERT_DIR` and
//!   OpenSSL's default `capath` read) plus `<subject hash>.<n>` for the CA. `/etc` is a
//!   read-only bind, so the directory is built on the `/run` tmpfs: each host symlink
//!   recreated with its own target (which stays visible: the targets are under `/usr` or in
//!   the directory itself), each regular file and folder bound read-only from the host's, and
//!   the bundle file in it bound over like every other system bundle. The subject hash is
//!   OpenSSL's `X509_NAME_hash` ([`subject_hash`]), computed here (no `openssl` binary needed);
//! - the same bundle bound read-only over each of [`Trust::extra_bundles`]: Python's `certifi`
//!   (`certifi.where()`, which `requests` and `httpx` read and which ignores the system
//!   bundle) ships its own `cacert.pem`; [`certifi_bundles`] finds those files under the
//!   read-only roots the caller passes (an interpreter's prefix, a venv, an install folder).
//!
//! `/run/glassbox/tls` is then bound onto itself read-only, so the server cannot rewrite what
//! it trusts (a change there would change every bound copy: a bind shares the file).
//!
//! The environment ([`Config::environment`](crate::Config::environment)) gets `SSL_CERT_FILE`,
//! `REQUESTS_CA_BUNDLE`, `CURL_CA_BUNDLE` and `GIT_SSL_CAINFO` (the bundle), `SSL_CERT_DIR`
//! (`/etc/ssl/certs`, or `/run/glassbox/tls/certs` when the host has no such directory) and
//! `NODE_EXTRA_CA_CERTS` (the CA alone). A variable the caller sets in
//! [`Config::env`](crate::Config::env) wins, as every default of the environment does: the
//! caller decides (to audit a client configured for its own CA, or to drop a target's value
//! so that glassbox's wins).
//!
//! Everything that was done is in the sandbox settings' mounts, each overlay a read-only mount
//! whose source names it (`glassbox CA bundle: /run/glassbox/tls/bundle.pem`). An extra bundle
//! that the sandbox cannot see (not under a bound folder, missing, not a file) is not an error:
//! it is listed among the mounts as `glassbox CA bundle not bound: <reason>`, since the
//! manifest says what the server's trust was, and a bundle left alone is part of that.
//!
//! Where each path is in the sandbox is decided on the host, before the sandbox exists, from
//! the mount plan ([`View`]): the binds are at their host paths, so a host path under a bind is
//! the same file inside; symlinks are followed one step at a time, each step in the sandbox's
//! view (a chain through a folder the sandbox lacks is a dangling link inside, whatever the
//! host says). Deciding on the host keeps the forked child simple (write, link, bind) and lets
//! the settings say exactly what pid 1 does.
//!
//! Runtimes that keep their own roots and read none of this do not trust the CA: Java (its
//! `cacerts` keystore), rustls with `webpki-roots` (compiled in), Deno without
//! `DENO_TLS_CA_STORE=system`, and any client that pins. Their flows stay unread, which the
//! edge records as such.

use crate::MountPlan;
use base64::Engine as _;
use std::ffi::OsString;
use std::path::{Component, Path, PathBuf};

/// The folder, on the sandbox's `/run` tmpfs, that holds the CA, the bundle and the hashed
/// directory (read-only once made).
pub const TLS_DIR: &str = "/run/glassbox/tls";

/// The CA alone, PEM (`NODE_EXTRA_CA_CERTS`).
pub const CA_FILE: &str = "/run/glassbox/tls/ca.pem";

/// The host's system bundle followed by the CA, PEM (`SSL_CERT_FILE`, `REQUESTS_CA_BUNDLE`,
/// `CURL_CA_BUNDLE`, `GIT_SSL_CAINFO`; bound over every system bundle and extra bundle).
pub const BUNDLE_FILE: &str = "/run/glassbox/tls/bundle.pem";

/// The hashed directory as built (bound over [`CERT_DIR`] where the host has one).
pub const HASHED_DIR: &str = "/run/glassbox/tls/certs";

/// The hashed directory OpenSSL-based runtimes read (Debian's; `/usr/lib/ssl/certs` links
/// to it).
pub const CERT_DIR: &str = "/etc/ssl/certs";

/// The system bundles the combined bundle is bound over, where the sandbox sees them: Go's
/// list (`crypto/x509/root_linux.go`), which holds Debian's, Fedora's, openSUSE's and
/// Alpine's, and the paths OpenSSL and curl are built with on those systems. The first one
/// found is the host bundle the combined bundle starts with.
pub const SYSTEM_BUNDLES: &[&str] = &[
    "/etc/ssl/certs/ca-certificates.crt",
    "/etc/pki/tls/certs/ca-bundle.crt",
    "/etc/ssl/ca-bundle.pem",
    "/etc/pki/tls/cacert.pem",
    "/etc/pki/ca-trust/extracted/pem/tls-ca-bundle.pem",
    "/etc/ssl/cert.pem",
];

/// The source recorded for each bundle overlay.
const BUNDLE_SOURCE: &str = "glassbox CA bundle: /run/glassbox/tls/bundle.pem";

/// A certificate authority for the sandbox to trust: the audit's own.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Trust {
    /// The CA's certificate, PEM (it must hold the certificate [`Trust::ca_der`] is).
    pub ca_pem: String,
    /// The same certificate, DER: its subject hash names its entry in the hashed directory.
    pub ca_der: Vec<u8>,
    /// Host paths of further bundles to bind the combined bundle over, read-only (Python's
    /// `certifi/cacert.pem`: fill this with [`certifi_bundles`]). Each must be a file the
    /// sandbox sees (under a bound folder); one that is not is skipped, with the reason in the
    /// settings. One inside a read-write bind becomes a read-only mount point there (an
    /// installer cannot replace it): pass none for an install phase.
    pub extra_bundles: Vec<PathBuf>,
}

/// Why the CA cannot be trusted as given.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum Error {
    /// The DER is not an X.509 certificate this walk can read.
    #[error("the CA certificate's DER is malformed: {0}")]
    Malformed(&'static str),
    /// A subject value of a string type whose canonical form is not computed here.
    #[error("the CA's subject holds a {0} value; its OpenSSL subject hash is computed for UTF8String, PrintableString and IA5String values only")]
    UnsupportedString(&'static str),
    /// A subject value that is not valid text for its type.
    #[error("the CA's subject holds a {0} value that is not valid for its type")]
    InvalidText(&'static str),
    /// [`Trust::ca_pem`] does not hold the certificate [`Trust::ca_der`] is.
    #[error("the CA's PEM does not hold the certificate its DER is")]
    PemMismatch,
}

/// OpenSSL's subject hash of a DER certificate (`X509_NAME_hash`, what `openssl x509 -hash`
/// prints and what names `<hash>.0` in a hashed directory): the first 4 bytes, little-endian,
/// of the SHA-1 of the subject's canonical encoding.
///
/// The canonical encoding (OpenSSL's `x509_name_canon`) is each RDN's DER `SET`, one after
/// another without the name's `SEQUENCE` header, with every value re-encoded as a UTF8String
/// whose text is lower-cased (ASCII letters only), trimmed and with each run of whitespace
/// made one space. It is computed for values of type UTF8String, PrintableString and
/// IA5String (glassbox's CA has one CN of lowercase ASCII); another type (BMPString,
/// TeletexString, a non-string) is refused, not guessed.
pub fn subject_hash(der: &[u8]) -> Result<u32, Error> {
    let canon = canonical_subject(der)?;
    let digest = ring::digest::digest(&ring::digest::SHA1_FOR_LEGACY_USE_ONLY, &canon);
    let d = digest.as_ref();
    Ok(u32::from_le_bytes([d[0], d[1], d[2], d[3]]))
}

/// One DER element: its tag, its contents and the whole element (header included).
struct Tlv<'a> {
    tag: u8,
    contents: &'a [u8],
    whole: &'a [u8],
}

/// Reads one DER element from the front of `buf`; returns it and what follows.
fn tlv(buf: &[u8]) -> Result<(Tlv<'_>, &[u8]), Error> {
    let (&tag, rest) = buf.split_first().ok_or(Error::Malformed("truncated"))?;
    if tag & 0x1f == 0x1f {
        return Err(Error::Malformed("a high tag number"));
    }
    let (&first, rest) = rest.split_first().ok_or(Error::Malformed("truncated"))?;
    let (len, rest) = if first < 0x80 {
        (first as usize, rest)
    } else {
        let n = (first & 0x7f) as usize;
        if n == 0 || n > 4 || rest.len() < n {
            return Err(Error::Malformed("a length that is indefinite or too long"));
        }
        let len = rest[..n].iter().fold(0usize, |a, &b| (a << 8) | b as usize);
        (len, &rest[n..])
    };
    if rest.len() < len {
        return Err(Error::Malformed("an element longer than its container"));
    }
    let header = buf.len() - rest.len();
    let (contents, after) = rest.split_at(len);
    Ok((
        Tlv {
            tag,
            contents,
            whole: &buf[..header + len],
        },
        after,
    ))
}

/// Reads one element that must have tag `tag`.
fn expect<'a>(buf: &'a [u8], tag: u8, what: &'static str) -> Result<(Tlv<'a>, &'a [u8]), Error> {
    let (t, rest) = tlv(buf)?;
    if t.tag != tag {
        return Err(Error::Malformed(what));
    }
    Ok((t, rest))
}

/// A DER header for `len` bytes of contents with tag `tag`.
fn header(tag: u8, len: usize) -> Vec<u8> {
    let mut h = vec![tag];
    if len < 0x80 {
        h.push(len as u8);
    } else {
        let bytes: Vec<u8> = len
            .to_be_bytes()
            .into_iter()
            .skip_while(|&b| b == 0)
            .collect();
        h.push(0x80 | bytes.len() as u8);
        h.extend(bytes);
    }
    h
}

/// The subject's canonical encoding (see [`subject_hash`]).
fn canonical_subject(der: &[u8]) -> Result<Vec<u8>, Error> {
    let (cert, _) = expect(der, 0x30, "not a certificate SEQUENCE")?;
    let (tbs, _) = expect(cert.contents, 0x30, "no tbsCertificate SEQUENCE")?;
    let mut rest = tbs.contents;
    // version [0] EXPLICIT, optional.
    let (first, after) = tlv(rest)?;
    if first.tag == 0xa0 {
        rest = after;
    }
    let (_, rest) = expect(rest, 0x02, "no serial number")?;
    let (_, rest) = expect(rest, 0x30, "no signature algorithm")?;
    let (_, rest) = expect(rest, 0x30, "no issuer name")?;
    let (_, rest) = expect(rest, 0x30, "no validity")?;
    let (subject, _) = expect(rest, 0x30, "no subject name")?;
    let mut canon = Vec::new();
    let mut rdns = subject.contents;
    while !rdns.is_empty() {
        let (rdn, after) = expect(rdns, 0x31, "an RDN that is not a SET")?;
        rdns = after;
        let mut entries = Vec::new();
        let mut atvs = rdn.contents;
        while !atvs.is_empty() {
            let (atv, after) = expect(atvs, 0x30, "an attribute that is not a SEQUENCE")?;
            atvs = after;
            let (oid, value) = expect(atv.contents, 0x06, "an attribute without a type")?;
            let (value, _) = tlv(value)?;
            let text = canonical_value(value.tag, value.contents)?;
            let mut inner = oid.whole.to_vec();
            inner.extend(header(0x0c, text.len()));
            inner.extend(text);
            let mut entry = header(0x30, inner.len());
            entry.extend(inner);
            entries.push(entry);
        }
        // DER orders a SET OF by its elements' encodings, as OpenSSL's re-encoding does.
        entries.sort();
        let body: Vec<u8> = entries.concat();
        canon.extend(header(0x31, body.len()));
        canon.extend(body);
    }
    Ok(canon)
}

/// A value's canonical text: as UTF-8, trimmed, whitespace runs made one space, ASCII
/// lower-cased (OpenSSL's `asn1_string_canon`, whose whitespace is `isspace`'s).
fn canonical_value(tag: u8, bytes: &[u8]) -> Result<Vec<u8>, Error> {
    let kind = match tag {
        0x0c => "UTF8String",
        0x13 => "PrintableString",
        0x16 => "IA5String",
        0x14 => return Err(Error::UnsupportedString("TeletexString")),
        0x1a => return Err(Error::UnsupportedString("VisibleString")),
        0x1c => return Err(Error::UnsupportedString("UniversalString")),
        0x1e => return Err(Error::UnsupportedString("BMPString")),
        _ => return Err(Error::UnsupportedString("non-string")),
    };
    let valid = if tag == 0x0c {
        std::str::from_utf8(bytes).is_ok()
    } else {
        bytes.is_ascii()
    };
    if !valid {
        return Err(Error::InvalidText(kind));
    }
    let space = |b: &u8| matches!(b, b' ' | b'\t' | b'\n' | 0x0b | 0x0c | b'\r');
    let start = bytes.iter().position(|b| !space(b)).unwrap_or(bytes.len());
    let end = bytes
        .iter()
        .rposition(|b| !space(b))
        .map_or(start, |i| i + 1);
    let mut out = Vec::with_capacity(end - start);
    let mut in_space = false;
    for b in &bytes[start..end] {
        if space(b) {
            if !in_space {
                out.push(b' ');
            }
            in_space = true;
        } else {
            out.push(b.to_ascii_lowercase());
            in_space = false;
        }
    }
    Ok(out)
}

/// The first certificate of a PEM text, DER.
fn pem_certificate(pem: &str) -> Option<Vec<u8>> {
    let begin = "-----BEGIN CERTIFICATE-----";
    let start = pem.find(begin)? + begin.len();
    let end = start + pem[start..].find("-----END CERTIFICATE-----")?;
    let b64: String = pem[start..end]
        .chars()
        .filter(|c| !c.is_ascii_whitespace())
        .collect();
    base64::engine::general_purpose::STANDARD.decode(b64).ok()
}

/// The `certifi/cacert.pem` files under `roots` (an interpreter's prefix, a venv, an install
/// folder), for [`Trust::extra_bundles`].
///
/// Looked for by bounded patterns, never by walking a tree: below each root, and below its
/// `venv` and `.venv` (how glassbox and uv lay out an install folder),
/// `lib/python3*/{site,dist}-packages/certifi/cacert.pem` and the same under `lib64`, and pip's
/// vendored copy `.../pip/_vendor/certifi/cacert.pem`. Only files that exist are returned,
/// each once, in a stable order. A root that is itself a file is skipped.
pub fn certifi_bundles(roots: &[PathBuf]) -> Vec<PathBuf> {
    let mut found = Vec::new();
    for root in roots {
        for base in [root.clone(), root.join("venv"), root.join(".venv")] {
            for lib in ["lib", "lib64"] {
                let Ok(dir) = std::fs::read_dir(base.join(lib)) else {
                    continue;
                };
                let mut pythons: Vec<PathBuf> = dir
                    .filter_map(Result::ok)
                    .filter(|e| e.file_name().to_string_lossy().starts_with("python3"))
                    .map(|e| e.path())
                    .collect();
                pythons.sort();
                for py in pythons {
                    for packages in ["site-packages", "dist-packages"] {
                        for rel in ["certifi/cacert.pem", "pip/_vendor/certifi/cacert.pem"] {
                            let f = py.join(packages).join(rel);
                            if f.is_file() && !found.contains(&f) {
                                found.push(f);
                            }
                        }
                    }
                }
            }
        }
    }
    found
}

/// What the sandbox sees at host paths, from its mount plan: every bind is at its host path,
/// so a host path under one is the same file inside; a folder above a bind is a plain
/// directory pid 1 made to mount on; the recreated top-level symlinks (`/bin -> usr/bin`) are
/// the host's; anything else (the tmpfs mounts' contents, `/root` beside a bind under it) is
/// not there.
pub(crate) struct View<'a> {
    binds: Vec<&'a Path>,
    links: Vec<&'a Path>,
}

impl<'a> View<'a> {
    pub(crate) fn new(plan: &'a [MountPlan]) -> View<'a> {
        let mut view = View {
            binds: Vec::new(),
            links: Vec::new(),
        };
        for step in plan {
            match step {
                MountPlan::Bind { dst, .. } => view.binds.push(dst),
                MountPlan::Symlink { link, .. } => view.links.push(link),
            }
        }
        view
    }

    /// Where `path` leads inside the sandbox, every symlink followed (each step as the sandbox
    /// sees it), or why it leads nowhere.
    pub(crate) fn resolve(&self, path: &Path) -> Result<PathBuf, String> {
        if !path.is_absolute() {
            return Err(format!("{} is not an absolute path", path.display()));
        }
        let mut todo: Vec<OsString> = Vec::new();
        push_components(&mut todo, path);
        let mut at = PathBuf::from("/");
        let mut hops = 0;
        while let Some(part) = todo.pop() {
            if part == ".." {
                at.pop();
                continue;
            }
            let next = at.join(&part);
            let host_view = self.binds.iter().any(|b| next.starts_with(b))
                || self.links.iter().any(|l| *l == next);
            if host_view {
                let meta = std::fs::symlink_metadata(&next)
                    .map_err(|e| format!("{} cannot be seen: {e}", next.display()))?;
                if meta.file_type().is_symlink() {
                    hops += 1;
                    if hops > 40 {
                        return Err(format!("{}: too many symlinks", path.display()));
                    }
                    let target = std::fs::read_link(&next)
                        .map_err(|e| format!("{} cannot be read: {e}", next.display()))?;
                    if target.is_absolute() {
                        at = PathBuf::from("/");
                    }
                    push_components(&mut todo, &target);
                    continue;
                }
                at = next;
            } else if self.binds.iter().any(|b| b.starts_with(&next)) {
                at = next;
            } else {
                return Err(format!(
                    "{} is not in the sandbox (no bound folder holds it)",
                    next.display()
                ));
            }
        }
        Ok(at)
    }
}

/// Pushes `p`'s components onto a stack (last first), so that popping walks `p` in order.
fn push_components(todo: &mut Vec<OsString>, p: &Path) {
    for c in p.components().rev() {
        match c {
            Component::Normal(n) => todo.push(n.to_os_string()),
            Component::ParentDir => todo.push("..".into()),
            Component::RootDir | Component::CurDir | Component::Prefix(_) => {}
        }
    }
}

/// One entry of the hashed directory pid 1 builds.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) enum Entry {
    /// A host symlink, recreated with its target.
    Link { name: OsString, target: PathBuf },
    /// A host file or folder, bound read-only from the host's.
    Bind { name: OsString },
    /// A system bundle of the host's (`ca-certificates.crt`): the combined bundle, bound.
    Bundle { name: OsString },
}

/// The host's hashed directory as the sandbox sees it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct CertDir {
    /// Where it really is (`/etc/ssl/certs`, or where a symlink to it leads).
    pub at: PathBuf,
    /// Its entries.
    pub entries: Vec<Entry>,
}

/// What pid 1 does for [`Trust`], decided on the host ([`Overlay::plan`]).
#[derive(Clone, Debug, PartialEq, Eq)]
pub(crate) struct Overlay {
    /// [`CA_FILE`]'s contents.
    pub ca_pem: String,
    /// [`BUNDLE_FILE`]'s contents.
    pub bundle: Vec<u8>,
    /// The host bundle the combined bundle starts with, when the sandbox sees one.
    pub bundle_from: Option<PathBuf>,
    /// The CA's name in the hashed directory (`<hash>.<n>`).
    pub ca_entry: String,
    /// The host's hashed directory, overlaid; `None`: the sandbox sees none.
    pub cert_dir: Option<CertDir>,
    /// The files the bundle is bound over, resolved (system bundles first); one in the hashed
    /// directory is bound there, as its [`Entry::Bundle`].
    pub bundle_over: Vec<PathBuf>,
    /// Extra bundles left alone, each with why.
    pub skipped: Vec<(PathBuf, String)>,
}

/// Where `SSL_CERT_DIR` points: [`CERT_DIR`] when the sandbox has one, else [`HASHED_DIR`].
pub(crate) fn cert_dir_env(view: &View<'_>) -> &'static str {
    match view.resolve(Path::new(CERT_DIR)) {
        Ok(p) if p.is_dir() => CERT_DIR,
        _ => HASHED_DIR,
    }
}

impl Overlay {
    /// Decides the overlay for `trust` over the sandbox seen through `view`.
    pub(crate) fn plan(trust: &Trust, view: &View<'_>) -> Result<Overlay, Error> {
        Overlay::plan_at(trust, view, Path::new(CERT_DIR), SYSTEM_BUNDLES)
    }

    /// As [`Overlay::plan`], with another hashed directory and list of system bundles.
    fn plan_at(
        trust: &Trust,
        view: &View<'_>,
        cert_dir: &Path,
        system_bundles: &[&str],
    ) -> Result<Overlay, Error> {
        if pem_certificate(&trust.ca_pem).as_deref() != Some(trust.ca_der.as_slice()) {
            return Err(Error::PemMismatch);
        }
        let hash = subject_hash(&trust.ca_der)?;
        let mut bundle_over: Vec<PathBuf> = Vec::new();
        for b in system_bundles {
            if let Ok(p) = view.resolve(Path::new(b)) {
                if p.is_file() && !bundle_over.contains(&p) {
                    bundle_over.push(p);
                }
            }
        }
        let mut bundle = Vec::new();
        let mut bundle_from = None;
        for p in &bundle_over {
            if let Ok(bytes) = std::fs::read(p) {
                bundle = bytes;
                bundle_from = Some(p.clone());
                break;
            }
        }
        if !bundle.is_empty() && !bundle.ends_with(b"\n") {
            bundle.push(b'\n');
        }
        bundle.extend_from_slice(trust.ca_pem.as_bytes());
        if !bundle.ends_with(b"\n") {
            bundle.push(b'\n');
        }
        let mut ca_pem = trust.ca_pem.clone();
        if !ca_pem.ends_with('\n') {
            ca_pem.push('\n');
        }
        let cert_dir = match view.resolve(cert_dir) {
            Ok(at) if at.is_dir() => std::fs::read_dir(&at).ok().map(|rd| {
                let mut entries: Vec<Entry> = rd
                    .filter_map(Result::ok)
                    .filter_map(|e| {
                        let ft = e.file_type().ok()?;
                        let name = e.file_name();
                        if ft.is_symlink() {
                            let target = std::fs::read_link(e.path()).ok()?;
                            Some(Entry::Link { name, target })
                        } else if ft.is_file() || ft.is_dir() {
                            Some(Entry::Bind { name })
                        } else {
                            None
                        }
                    })
                    .collect();
                entries.sort_by(|a, b| entry_name(a).cmp(entry_name(b)));
                CertDir { at, entries }
            }),
            _ => None,
        };
        let taken = |name: &str| {
            cert_dir
                .as_ref()
                .is_some_and(|d| d.entries.iter().any(|e| entry_name(e) == name))
        };
        let ca_entry = (0..)
            .map(|n| format!("{hash:08x}.{n}"))
            .find(|n| !taken(n))
            .unwrap_or_default();
        let mut skipped = Vec::new();
        for p in &trust.extra_bundles {
            match view.resolve(p) {
                Ok(r) if r.is_file() => {
                    if !bundle_over.contains(&r) {
                        bundle_over.push(r);
                    }
                }
                Ok(r) => skipped.push((p.clone(), format!("{} is not a file", r.display()))),
                Err(why) => skipped.push((p.clone(), why)),
            }
        }
        // A bundle in the hashed directory is the combined bundle there too, not the host's.
        let mut cert_dir = cert_dir;
        if let Some(d) = &mut cert_dir {
            for e in &mut d.entries {
                if let Entry::Bind { name } = e {
                    if bundle_over.contains(&d.at.join(&*name)) {
                        *e = Entry::Bundle {
                            name: std::mem::take(name),
                        };
                    }
                }
            }
        }
        Ok(Overlay {
            ca_pem,
            bundle,
            bundle_from,
            ca_entry,
            cert_dir,
            bundle_over,
            skipped,
        })
    }

    /// The overlay as mount records, in the order pid 1 makes them.
    pub(crate) fn records(&self) -> Vec<glassbox_model::MountRecord> {
        let from = match &self.bundle_from {
            Some(p) => format!("the host's {} plus the CA", p.display()),
            None => "the CA alone: the sandbox sees no system bundle".into(),
        };
        let mut out = vec![glassbox_model::MountRecord {
            target: TLS_DIR.into(),
            source: format!(
                "glassbox CA (tmpfs): ca.pem, the CA alone; bundle.pem, {from}; certs, the hashed directory"
            ),
            read_only: true,
        }];
        if let Some(d) = &self.cert_dir {
            out.push(glassbox_model::MountRecord {
                target: d.at.to_string_lossy().into_owned(),
                source: format!(
                    "glassbox hashed CA directory: {HASHED_DIR}, the host's {} entries plus {}, the glassbox CA",
                    d.entries.len(),
                    self.ca_entry
                ),
                read_only: true,
            });
        }
        for p in &self.bundle_over {
            out.push(glassbox_model::MountRecord {
                target: p.to_string_lossy().into_owned(),
                source: BUNDLE_SOURCE.into(),
                read_only: true,
            });
        }
        for (p, why) in &self.skipped {
            out.push(glassbox_model::MountRecord {
                target: p.to_string_lossy().into_owned(),
                source: format!("glassbox CA bundle not bound: {why}"),
                read_only: true,
            });
        }
        out
    }
}

fn entry_name(e: &Entry) -> &std::ffi::OsStr {
    match e {
        Entry::Link { name, .. } | Entry::Bind { name } | Entry::Bundle { name } => name,
    }
}

/// The variables a trusted CA adds to the server's environment (before the caller's own).
pub(crate) fn environment(view: &View<'_>) -> Vec<(String, String)> {
    [
        ("SSL_CERT_FILE", BUNDLE_FILE),
        ("SSL_CERT_DIR", cert_dir_env(view)),
        ("NODE_EXTRA_CA_CERTS", CA_FILE),
        ("REQUESTS_CA_BUNDLE", BUNDLE_FILE),
        ("CURL_CA_BUNDLE", BUNDLE_FILE),
        ("GIT_SSL_CAINFO", BUNDLE_FILE),
    ]
    .map(|(k, v)| (k.to_string(), v.to_string()))
    .to_vec()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tmp(name: &str) -> PathBuf {
        let d =
            std::env::temp_dir().join(format!("glassbox-trust-unit-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    fn bind(p: &Path) -> MountPlan {
        MountPlan::Bind {
            src: p.to_path_buf(),
            dst: p.to_path_buf(),
            writable: false,
            idmap: None,
        }
    }

    #[test]
    fn canonical_text_is_trimmed_collapsed_and_lower_cased() {
        assert_eq!(
            canonical_value(0x0c, b" \tGlassbox  Audit\n\x0bCA  ").unwrap(),
            b"glassbox audit ca"
        );
        // Only ASCII letters change; other UTF-8 stays as it is.
        assert_eq!(
            canonical_value(0x0c, "ÄBC".as_bytes()).unwrap(),
            "Äbc".as_bytes()
        );
        assert_eq!(canonical_value(0x13, b"   ").unwrap(), b"");
        assert_eq!(
            canonical_value(0x1e, b"\0a"),
            Err(Error::UnsupportedString("BMPString"))
        );
        assert_eq!(
            canonical_value(0x16, b"caf\xe9"),
            Err(Error::InvalidText("IA5String"))
        );
        assert_eq!(
            canonical_value(0x0c, b"\xff"),
            Err(Error::InvalidText("UTF8String"))
        );
    }

    #[test]
    fn der_headers_use_the_shortest_length_form() {
        assert_eq!(header(0x31, 5), [0x31, 5]);
        assert_eq!(header(0x30, 0x80), [0x30, 0x81, 0x80]);
        assert_eq!(header(0x30, 0x1234), [0x30, 0x82, 0x12, 0x34]);
    }

    #[test]
    fn malformed_der_is_an_error_not_a_panic() {
        for bad in [
            &b""[..],
            &[0x30],
            &[0x30, 0x85, 1, 2, 3, 4, 5],
            &[0x30, 0x10, 0x30],
            &[0x04, 0x00],
        ] {
            assert!(
                matches!(subject_hash(bad), Err(Error::Malformed(_))),
                "{bad:?}"
            );
        }
    }

    #[test]
    fn paths_resolve_only_through_what_the_sandbox_sees() {
        let d = tmp("view");
        let shown = d.join("shown");
        let hidden = d.join("hidden");
        std::fs::create_dir_all(shown.join("sub")).unwrap();
        std::fs::create_dir_all(&hidden).unwrap();
        std::fs::write(shown.join("sub/real.pem"), "x").unwrap();
        std::fs::write(hidden.join("secret.pem"), "x").unwrap();
        std::os::unix::fs::symlink("sub/real.pem", shown.join("rel")).unwrap();
        std::os::unix::fs::symlink(shown.join("rel"), shown.join("abs")).unwrap();
        std::os::unix::fs::symlink(hidden.join("secret.pem"), shown.join("out")).unwrap();
        std::os::unix::fs::symlink("loop", shown.join("loop")).unwrap();
        let plan = [bind(&shown)];
        let view = View::new(&plan);
        let real = shown.join("sub/real.pem");
        assert_eq!(view.resolve(&shown.join("abs")).unwrap(), real);
        assert_eq!(view.resolve(&shown.join("sub/../rel")).unwrap(), real);
        let out = view.resolve(&shown.join("out")).unwrap_err();
        assert!(out.contains("not in the sandbox"), "{out}");
        assert!(view.resolve(&hidden.join("secret.pem")).is_err());
        assert!(view.resolve(&shown.join("missing")).is_err());
        let looped = view.resolve(&shown.join("loop")).unwrap_err();
        assert!(looped.contains("too many symlinks"), "{looped}");
        // A folder above a bind is a plain directory there.
        assert_eq!(view.resolve(&d).unwrap(), d);
        std::fs::remove_dir_all(&d).unwrap();
    }

    fn test_ca() -> Trust {
        let key = rcgen::KeyPair::generate().unwrap();
        let mut params = rcgen::CertificateParams::new(Vec::<String>::new()).unwrap();
        params.distinguished_name = rcgen::DistinguishedName::new();
        params
            .distinguished_name
            .push(rcgen::DnType::CommonName, "glassbox audit ca");
        params.is_ca = rcgen::IsCa::Ca(rcgen::BasicConstraints::Unconstrained);
        let cert = params.self_signed(&key).unwrap();
        Trust {
            ca_pem: cert.pem(),
            ca_der: cert.der().to_vec(),
            extra_bundles: vec![],
        }
    }

    #[test]
    fn the_overlay_mirrors_the_hashed_directory_and_takes_a_free_name() {
        let d = tmp("overlay");
        let certs = d.join("etc/ssl/certs");
        std::fs::create_dir_all(certs.join("java")).unwrap();
        std::fs::write(certs.join("ca-certificates.crt"), "HOST ROOTS").unwrap();
        std::fs::write(certs.join("local.pem"), "x").unwrap();
        std::os::unix::fs::symlink("local.pem", certs.join("1234abcd.0")).unwrap();
        std::os::unix::fs::symlink(certs.join("ca-certificates.crt"), d.join("cert.pem")).unwrap();
        let mut trust = test_ca();
        let hash = format!("{:08x}", subject_hash(&trust.ca_der).unwrap());
        // The CA's own name is taken by another certificate: the next one is used.
        std::os::unix::fs::symlink("local.pem", certs.join(format!("{hash}.0"))).unwrap();
        let certifi = d.join("prefix/certifi/cacert.pem");
        std::fs::create_dir_all(certifi.parent().unwrap()).unwrap();
        std::fs::write(&certifi, "certifi's").unwrap();
        trust.extra_bundles = vec![
            certifi.clone(),
            d.join("prefix/certifi"),
            d.join("prefix/missing.pem"),
            PathBuf::from("/proc/self/environ"),
        ];
        let plan = [bind(&d)];
        let view = View::new(&plan);
        let bundles = [
            d.join("etc/ssl/certs/ca-certificates.crt"),
            d.join("cert.pem"),
            d.join("etc/pki/absent.crt"),
        ];
        let bundles: Vec<String> = bundles.iter().map(|b| b.display().to_string()).collect();
        let bundles: Vec<&str> = bundles.iter().map(String::as_str).collect();
        let o = Overlay::plan_at(&trust, &view, &certs, &bundles).unwrap();
        assert_eq!(o.ca_entry, format!("{hash}.1"));
        let host_bundle = certs.join("ca-certificates.crt");
        assert_eq!(o.bundle_from.as_ref(), Some(&host_bundle));
        assert_eq!(o.bundle_over, [host_bundle, certifi]);
        assert!(o
            .bundle
            .starts_with(b"HOST ROOTS\n-----BEGIN CERTIFICATE-----"));
        assert!(o.bundle.ends_with(trust.ca_pem.as_bytes()));
        let dir = o.cert_dir.as_ref().unwrap();
        assert_eq!(dir.at, certs);
        let link = |name: String| Entry::Link {
            name: name.into(),
            target: "local.pem".into(),
        };
        let mut want = vec![
            link(format!("{hash}.0")),
            link("1234abcd.0".into()),
            Entry::Bundle {
                name: "ca-certificates.crt".into(),
            },
            Entry::Bind {
                name: "java".into(),
            },
            Entry::Bind {
                name: "local.pem".into(),
            },
        ];
        want.sort_by(|a, b| entry_name(a).cmp(entry_name(b)));
        assert_eq!(dir.entries, want);
        let why: Vec<&str> = o.skipped.iter().map(|(_, w)| w.as_str()).collect();
        assert!(why[0].ends_with("is not a file"), "{why:?}");
        assert!(why[1].contains("cannot be seen"), "{why:?}");
        assert!(why[2].contains("not in the sandbox"), "{why:?}");
        assert_eq!(o.skipped.len(), 3);
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn without_a_system_bundle_or_directory_the_ca_stands_alone() {
        let d = tmp("bare");
        let plan = [bind(&d)];
        let view = View::new(&plan);
        let trust = test_ca();
        let o = Overlay::plan(&trust, &view).unwrap();
        assert_eq!(o.cert_dir, None);
        assert_eq!(o.bundle_from, None);
        assert!(o.bundle_over.is_empty());
        assert_eq!(o.bundle, trust.ca_pem.as_bytes());
        assert!(o.ca_entry.ends_with(".0"));
        assert_eq!(cert_dir_env(&view), HASHED_DIR);
        let records = o.records();
        assert_eq!(records.len(), 1);
        assert!(records[0].source.contains("the CA alone"), "{records:?}");
        std::fs::remove_dir_all(&d).unwrap();
    }

    #[test]
    fn certifi_bundles_are_found_by_bounded_patterns() {
        let d = tmp("certifi");
        let files = [
            "prefix/lib/python3.11/site-packages/certifi/cacert.pem",
            "prefix/lib/python3.11/site-packages/pip/_vendor/certifi/cacert.pem",
            "prefix/lib64/python3.12/dist-packages/certifi/cacert.pem",
            "pkg/venv/lib/python3.13/site-packages/certifi/cacert.pem",
            "pkg/.venv/lib/python3.10/site-packages/certifi/cacert.pem",
            // Not looked for: deeper, or another interpreter.
            "prefix/lib/python3.11/site-packages/vendored/certifi/cacert.pem",
            "prefix/lib/python2.7/site-packages/certifi/cacert.pem",
            "pkg/deep/venv/lib/python3.11/site-packages/certifi/cacert.pem",
        ];
        for f in files {
            let p = d.join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(&p, "pem").unwrap();
        }
        let found = certifi_bundles(&[d.join("prefix"), d.join("pkg"), d.join("missing")]);
        let want: Vec<PathBuf> = files[..5].iter().map(|f| d.join(f)).collect();
        assert_eq!(found, want);
        std::fs::remove_dir_all(&d).unwrap();
    }
}
