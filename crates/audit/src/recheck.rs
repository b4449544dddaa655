//! `glassbox recheck`: stored evidence re-evaluated with the current checks, nothing run.
//!
//! The event stream is read line by line and fed to every check as it is parsed
//! ([`glassbox_checks::Run`]): memory follows what the checks find, not the size of the trace.

use crate::Error;
use glassbox_checks::Proofs;
use glassbox_model::{
    AuditReport, Bytes, Event, EventKind, Flow, Manifest, Phase, SockAddr, TranscriptEntry,
};
use std::io::Read;
use std::path::{Path, PathBuf};

/// A re-evaluated bundle.
#[derive(Debug)]
pub struct Recheck {
    /// The bundle.
    pub dir: PathBuf,
    /// Its evidence judged by the current checks.
    pub report: AuditReport,
    /// Its stored report, with the claims of retracted check versions withdrawn.
    pub stored: Option<AuditReport>,
    /// How many stored check results were withdrawn.
    pub withdrawn: usize,
    /// Events read.
    pub events: u64,
}

fn read(path: &Path) -> Result<Vec<u8>, Error> {
    std::fs::read(path).map_err(|source| Error::Evidence {
        path: path.to_path_buf(),
        source,
    })
}

fn bad(path: &Path, line: usize, e: impl std::fmt::Display) -> Error {
    Error::Usage(format!("{}:{line}: {e}", path.display()))
}

/// Reads a JSON-lines file, handing each parsed line to `f`. A line that is not valid is an
/// error naming the file and line (a truncated last line, from a killed glassbox, is
/// skipped: it is what such a bundle ends with).
pub fn read_lines<T: serde::de::DeserializeOwned>(
    path: &Path,
    mut f: impl FnMut(T),
) -> Result<u64, Error> {
    each_line(
        path,
        |line, line_no, complete| match serde_json::from_slice::<T>(line) {
            Ok(v) => {
                f(v);
                Ok(Step::Counted)
            }
            Err(_) if !complete => Ok(Step::Stop),
            Err(e) => Err(bad(path, line_no, e)),
        },
    )
}

/// Reads `events.jsonl` as [`read_lines`] does, handing each event to `f` by reference:
/// the events are parsed by an [`EventReader`], which reuses one event per kind instead of
/// allocating every path, argv and string anew (what `glassbox recheck` reads, and its
/// benchmark measures).
pub fn read_events(path: &Path, mut f: impl FnMut(&Event)) -> Result<u64, Error> {
    let mut chunks = Chunks::open(path)?;
    let mut reader = EventReader::default();
    let mut n = 0u64;
    let mut line_no = 0usize;
    loop {
        // Most lines: one the scanner reads whole, its newline right behind it (the line
        // then has no trailing whitespace to trim), read where it lies.
        if let Some((k, len)) = reader.scan(chunks.pending()) {
            if chunks.pending().get(len) == Some(&b'\n') {
                line_no += 1;
                n += 1;
                reader.fast += 1;
                f(&reader.slots[k]);
                chunks.consume(len + 1);
                continue;
            }
        }
        let Some((line, complete)) = chunks.next_line()? else {
            break;
        };
        line_no += 1;
        let text = chunks.buf[line].trim_ascii_end();
        if text.is_empty() {
            continue;
        }
        match reader.parse(text) {
            Ok(e) => {
                f(e);
                n += 1;
            }
            Err(_) if !complete => break,
            Err(e) => return Err(bad(path, line_no, e)),
        }
    }
    Ok(n)
}

/// What a line's handler says.
enum Step {
    /// The line was a record.
    Counted,
    /// The stream ends here (a truncated last line).
    Stop,
}

/// Bytes read from a file at a time (a line longer than this grows the buffer).
const CHUNK: usize = 1 << 20;

/// A file read a large chunk at a time into one buffer, lines cut out of it where they lie
/// (never copied).
struct Chunks<'p> {
    path: &'p Path,
    file: std::fs::File,
    buf: Vec<u8>,
    /// `buf[start..end]` is read and not yet handed out.
    start: usize,
    end: usize,
    eof: bool,
}

impl<'p> Chunks<'p> {
    fn open(path: &'p Path) -> Result<Self, Error> {
        Ok(Chunks {
            path,
            file: std::fs::File::open(path).map_err(|e| Chunks::error(path, e))?,
            buf: vec![0u8; CHUNK],
            start: 0,
            end: 0,
            eof: false,
        })
    }

    fn error(path: &Path, source: std::io::Error) -> Error {
        Error::Evidence {
            path: path.to_path_buf(),
            source,
        }
    }

    /// What is read and not handed out yet.
    fn pending(&self) -> &[u8] {
        &self.buf[self.start..self.end]
    }

    /// Hands out the next `n` pending bytes.
    fn consume(&mut self, n: usize) {
        self.start = (self.start + n).min(self.end);
    }

    /// Where the next line is in `buf` (without its newline), and whether a newline ended it
    /// (the last line of a file may have none); `None` at the end of the file.
    fn next_line(&mut self) -> Result<Option<(std::ops::Range<usize>, bool)>, Error> {
        loop {
            if let Some(at) = find_byte(self.pending(), b'\n') {
                let line = self.start..self.start + at;
                self.start += at + 1;
                return Ok(Some((line, true)));
            }
            if self.eof {
                if self.start == self.end {
                    return Ok(None);
                }
                let line = self.start..self.end;
                self.start = self.end;
                return Ok(Some((line, false)));
            }
            // The rest of a line to the front, then more of the file behind it.
            self.buf.copy_within(self.start..self.end, 0);
            self.end -= self.start;
            self.start = 0;
            if self.end == self.buf.len() {
                self.buf.resize(self.buf.len() * 2, 0);
            }
            match self.file.read(&mut self.buf[self.end..]) {
                Ok(0) => self.eof = true,
                Ok(got) => self.end += got,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => {}
                Err(e) => return Err(Chunks::error(self.path, e)),
            }
        }
    }
}

/// Hands every line of `path` that is not blank to `f`, without its newline and trailing
/// ASCII whitespace, with its line number (from 1) and whether a newline ended it; returns
/// how many `f` counted.
fn each_line(
    path: &Path,
    mut f: impl FnMut(&[u8], usize, bool) -> Result<Step, Error>,
) -> Result<u64, Error> {
    let mut chunks = Chunks::open(path)?;
    let mut n = 0u64;
    let mut line_no = 0usize;
    while let Some((line, complete)) = chunks.next_line()? {
        line_no += 1;
        let text = chunks.buf[line].trim_ascii_end();
        if text.is_empty() {
            continue;
        }
        match f(text, line_no, complete)? {
            Step::Counted => n += 1,
            Step::Stop => break,
        }
    }
    Ok(n)
}

const LO: u64 = 0x0101_0101_0101_0101;
const HI: u64 = 0x8080_8080_8080_8080;

/// The bytes of `x` equal to `b`, as their high bits (exact up to the first one: a borrow
/// only carries upward, into bytes after it).
#[inline]
fn eq_bytes(x: u64, b: u8) -> u64 {
    let y = x ^ (LO * b as u64);
    y.wrapping_sub(LO) & !y & HI
}

/// Where `b` first occurs in `s`, eight bytes at a time.
fn find_byte(s: &[u8], b: u8) -> Option<usize> {
    let mut chunks = s.chunks_exact(8);
    for (n, chunk) in chunks.by_ref().enumerate() {
        let Ok(word) = <[u8; 8]>::try_from(chunk) else {
            break;
        };
        let m = eq_bytes(u64::from_le_bytes(word), b);
        if m != 0 {
            return Some(n * 8 + (m.trailing_zeros() / 8) as usize);
        }
    }
    let done = s.len() - chunks.remainder().len();
    chunks
        .remainder()
        .iter()
        .position(|&c| c == b)
        .map(|at| done + at)
}

/// How many bytes of `s` lie before the first `"`, backslash or control character (the end of a
/// JSON string without escapes, or a byte this reader leaves to `serde_json`), and whether
/// they are all ASCII. Eight bytes at a time; the last few are looked at as one word padded
/// with zeros (a zero is a control character: it stops the scan where `s` ends).
#[inline]
fn plain_prefix(s: &[u8]) -> (usize, bool) {
    let mut high = 0u64;
    let mut at = 0;
    while at < s.len() {
        let x = match s.get(at..at + 8) {
            Some(w) => {
                let mut word = [0u8; 8];
                word.copy_from_slice(w);
                u64::from_le_bytes(word)
            }
            None => {
                let mut word = [0u8; 8];
                word[..s.len() - at].copy_from_slice(&s[at..]);
                u64::from_le_bytes(word)
            }
        };
        let m = eq_bytes(x, b'"') | eq_bytes(x, b'\\') | (x.wrapping_sub(LO * 0x20) & !x & HI);
        if m != 0 {
            let k = m.trailing_zeros() / 8;
            // The bytes before the one found (at most 7 of them: the shift stays below 64).
            high |= x & ((1u64 << (k * 8)) - 1);
            return ((at + k as usize).min(s.len()), high & HI == 0);
        }
        high |= x;
        at += 8;
    }
    (s.len(), high & HI == 0)
}

/// An event of the `k`-th kind (in `EventKind`'s order) with every field empty: a slot to
/// parse into.
fn empty_event(k: usize) -> Event {
    let kind = match k {
        0 => EventKind::Exec {
            syscall: String::new(),
            path: Bytes::default(),
            argv: Vec::new(),
        },
        1 => EventKind::Open {
            syscall: String::new(),
            path: Bytes::default(),
            flags: 0,
            flags_text: String::new(),
            result: None,
        },
        2 => EventKind::Stat {
            syscall: String::new(),
            path: Bytes::default(),
        },
        3 => EventKind::Connect {
            syscall: String::new(),
            fd: 0,
            addr: SockAddr::Other { family_id: 0 },
        },
        4 => EventKind::Bind {
            fd: 0,
            addr: SockAddr::Other { family_id: 0 },
        },
        5 => EventKind::Socket {
            domain: 0,
            sock_type: 0,
            protocol: 0,
        },
        6 => EventKind::Image {
            path: Bytes::default(),
            shown: Bytes::default(),
        },
        7 => EventKind::Honeytoken {
            path: Bytes::default(),
            access: String::new(),
            dir: false,
        },
        _ => EventKind::Refused {
            syscall: String::new(),
            errno: 0,
            reason: String::new(),
        },
    };
    Event {
        id: 0,
        t_ns: 0,
        pid: 0,
        ppid: 0,
        phase: Phase::Startup,
        kind,
    }
}

/// Parses the lines of `events.jsonl` into [`Event`]s, fast.
///
/// The line glassbox writes (see `Event`'s `Serialize`: one flat object, `id`, `t_ns`, `pid`,
/// `ppid`, `phase`, `kind`, then the kind's fields in their order; no whitespace; paths, argv
/// and strings as JSON strings) is read by a scanner that follows that layout, straight into
/// one reused event per kind: a path or argument is copied into the buffer the previous event
/// of its kind had, a phase `call:<tool>` is kept when it did not change, so that a stream of
/// events allocates nothing. Any other line (whitespace, an escape in a string, `{"bytes":
/// …}`, keys in another order, an unknown, duplicate or missing key, a number that is not a
/// plain integer…) goes to `serde_json` and the [`Event`]'s own `Deserialize`, which decides:
/// what the scanner accepts it reads exactly as that impl does (the tests compare both on
/// every kind, and on every cut, deletion and insertion of each line), and every error is
/// that impl's.
///
/// Measured with `cargo bench -p glassbox-audit --bench recheck` (its `parse` pass; figures in
/// README.md, Benchmark): 0.24 µs an event, 4.1M events/s, against 1.4 µs with `serde_json`.
#[derive(Debug)]
pub struct EventReader {
    /// One event per kind, parsed into again and again.
    slots: [Event; 9],
    /// The last event `serde_json` parsed.
    other: Event,
    /// Lines the scanner read (the rest went to `serde_json`).
    fast: u64,
}

impl Default for EventReader {
    fn default() -> Self {
        EventReader {
            slots: std::array::from_fn(empty_event),
            other: empty_event(0),
            fast: 0,
        }
    }
}

impl EventReader {
    /// The event on `line` (one line of `events.jsonl`, without its newline).
    pub fn parse(&mut self, line: &[u8]) -> Result<&Event, serde_json::Error> {
        match self.scan(line) {
            Some((k, len)) if len == line.len() => {
                self.fast += 1;
                Ok(&self.slots[k])
            }
            _ => {
                self.other = serde_json::from_slice(line)?;
                Ok(&self.other)
            }
        }
    }

    /// How many lines the scanner read (the rest went to `serde_json`).
    pub fn scanned(&self) -> u64 {
        self.fast
    }

    /// Reads the event `line` starts with into the slot of its kind and returns that kind and
    /// the event's length, or `None` when it is not laid out as glassbox writes it (the slot
    /// may then hold parts of it: it is overwritten before it is handed out again).
    fn scan(&mut self, line: &[u8]) -> Option<(usize, usize)> {
        let mut c = Cursor { b: line, i: 0 };
        c.lit(b"{\"id\":")?;
        let id = c.u64()?;
        c.lit(b",\"t_ns\":")?;
        let t_ns = c.u64()?;
        c.lit(b",\"pid\":")?;
        let pid = c.i32()?;
        c.lit(b",\"ppid\":")?;
        let ppid = c.i32()?;
        c.lit(b",\"phase\":")?;
        let phase = c.str()?;
        c.lit(b",\"kind\":")?;
        let k = match c.string()? {
            b"exec" => 0,
            b"open" => 1,
            b"stat" => 2,
            b"connect" => 3,
            b"bind" => 4,
            b"socket" => 5,
            b"image" => 6,
            b"honeytoken" => 7,
            b"refused" => 8,
            _ => return None,
        };
        let e = &mut self.slots[k];
        c.fields(&mut e.kind)?;
        c.lit(b"}")?;
        let same_call =
            matches!(&e.phase, Phase::Call(t) if phase.strip_prefix("call:") == Some(t.as_str()));
        if !same_call {
            e.phase = phase.parse().ok()?;
        }
        e.id = id;
        e.t_ns = t_ns;
        e.pid = pid;
        e.ppid = ppid;
        Some((k, c.i))
    }
}

/// A position in a line.
struct Cursor<'a> {
    b: &'a [u8],
    i: usize,
}

impl<'a> Cursor<'a> {
    #[inline]
    fn rest(&self) -> &'a [u8] {
        self.b.get(self.i..).unwrap_or_default()
    }

    /// The bytes `l`, next. Of a length known when compiling (every key and punctuation of
    /// the layout is a literal): the comparison is then a few word compares in place, not a
    /// call to `memcmp` (measured: a tenth of the scan's instructions).
    #[inline(always)]
    fn lit<const N: usize>(&mut self, l: &[u8; N]) -> Option<()> {
        let end = self.i.checked_add(N)?;
        let next: &[u8; N] = self.b.get(self.i..end)?.try_into().ok()?;
        if next != l {
            return None;
        }
        self.i = end;
        Some(())
    }

    /// A JSON string without escapes or control characters, as its raw bytes, and whether
    /// they are ASCII.
    #[inline]
    fn raw_string(&mut self) -> Option<(&'a [u8], bool)> {
        self.lit(b"\"")?;
        let rest = self.rest();
        let (len, ascii) = plain_prefix(rest);
        if rest.get(len) != Some(&b'"') {
            return None;
        }
        self.i += len + 1;
        Some((&rest[..len], ascii))
    }

    #[inline]
    fn string(&mut self) -> Option<&'a [u8]> {
        Some(self.raw_string()?.0)
    }

    /// [`Cursor::string`], valid UTF-8 (as `serde_json` requires of every string).
    #[inline]
    fn str(&mut self) -> Option<&'a str> {
        let (bytes, ascii) = self.raw_string()?;
        if ascii {
            // SAFETY: every byte is below 0x80 (`plain_prefix` looked at each one): ASCII is
            // valid UTF-8.
            Some(unsafe { std::str::from_utf8_unchecked(bytes) })
        } else {
            std::str::from_utf8(bytes).ok()
        }
    }

    #[inline]
    fn string_into(&mut self, out: &mut String) -> Option<()> {
        let s = self.str()?;
        out.clear();
        out.push_str(s);
        Some(())
    }

    #[inline]
    fn bytes_into(&mut self, out: &mut Bytes) -> Option<()> {
        let s = self.str()?;
        out.0.clear();
        out.0.extend_from_slice(s.as_bytes());
        Some(())
    }

    /// A non-negative integer as JSON writes it (no leading zero, no fraction or exponent).
    #[inline]
    fn u64(&mut self) -> Option<u64> {
        let rest = self.rest();
        let digits = rest.iter().take_while(|d| d.is_ascii_digit()).count();
        if digits == 0 || (digits > 1 && rest[0] == b'0') {
            return None;
        }
        if matches!(rest.get(digits), Some(b'.' | b'e' | b'E')) {
            return None;
        }
        let mut v: u64 = 0;
        for &d in &rest[..digits] {
            v = v.checked_mul(10)?.checked_add(u64::from(d - b'0'))?;
        }
        self.i += digits;
        Some(v)
    }

    #[inline]
    fn i64(&mut self) -> Option<i64> {
        if self.lit(b"-").is_some() {
            let v = self.u64()?;
            // `-0` is a float to serde_json (it keeps the sign): not an integer.
            if v == 0 || v > i64::MAX as u64 + 1 {
                return None;
            }
            // 2^63 becomes i64::MIN, as it should.
            Some((v as i64).wrapping_neg())
        } else {
            i64::try_from(self.u64()?).ok()
        }
    }

    #[inline]
    fn i32(&mut self) -> Option<i32> {
        i32::try_from(self.i64()?).ok()
    }

    #[inline]
    fn bool(&mut self) -> Option<bool> {
        if self.lit(b"true").is_some() {
            Some(true)
        } else if self.lit(b"false").is_some() {
            Some(false)
        } else {
            None
        }
    }

    /// The fields of `kind`, in the order `Event`'s `Serialize` writes them.
    fn fields(&mut self, kind: &mut EventKind) -> Option<()> {
        match kind {
            EventKind::Exec {
                syscall,
                path,
                argv,
            } => {
                self.lit(b",\"syscall\":")?;
                self.string_into(syscall)?;
                self.lit(b",\"path\":")?;
                self.bytes_into(path)?;
                self.lit(b",\"argv\":")?;
                self.argv_into(argv)
            }
            EventKind::Open {
                syscall,
                path,
                flags,
                flags_text,
                result,
            } => {
                self.lit(b",\"syscall\":")?;
                self.string_into(syscall)?;
                self.lit(b",\"path\":")?;
                self.bytes_into(path)?;
                self.lit(b",\"flags\":")?;
                *flags = self.u64()?;
                self.lit(b",\"flags_text\":")?;
                self.string_into(flags_text)?;
                *result = match self.lit(b",\"result\":") {
                    Some(()) => Some(self.i64()?),
                    None => None,
                };
                Some(())
            }
            EventKind::Stat { syscall, path } => {
                self.lit(b",\"syscall\":")?;
                self.string_into(syscall)?;
                self.lit(b",\"path\":")?;
                self.bytes_into(path)
            }
            EventKind::Connect { syscall, fd, addr } => {
                self.lit(b",\"syscall\":")?;
                self.string_into(syscall)?;
                self.lit(b",\"fd\":")?;
                *fd = self.i32()?;
                self.lit(b",\"addr\":")?;
                self.addr_into(addr)
            }
            EventKind::Bind { fd, addr } => {
                self.lit(b",\"fd\":")?;
                *fd = self.i32()?;
                self.lit(b",\"addr\":")?;
                self.addr_into(addr)
            }
            EventKind::Socket {
                domain,
                sock_type,
                protocol,
            } => {
                self.lit(b",\"domain\":")?;
                *domain = self.i32()?;
                self.lit(b",\"sock_type\":")?;
                *sock_type = self.i32()?;
                self.lit(b",\"protocol\":")?;
                *protocol = self.i32()?;
                Some(())
            }
            EventKind::Image { path, shown } => {
                self.lit(b",\"path\":")?;
                self.bytes_into(path)?;
                self.lit(b",\"shown\":")?;
                self.bytes_into(shown)
            }
            EventKind::Honeytoken { path, access, dir } => {
                self.lit(b",\"path\":")?;
                self.bytes_into(path)?;
                self.lit(b",\"access\":")?;
                self.string_into(access)?;
                self.lit(b",\"dir\":")?;
                *dir = self.bool()?;
                Some(())
            }
            EventKind::Refused {
                syscall,
                errno,
                reason,
            } => {
                self.lit(b",\"syscall\":")?;
                self.string_into(syscall)?;
                self.lit(b",\"errno\":")?;
                *errno = self.i32()?;
                self.lit(b",\"reason\":")?;
                self.string_into(reason)
            }
        }
    }

    /// An array of strings, each into the buffer of the argument at its place.
    fn argv_into(&mut self, argv: &mut Vec<Bytes>) -> Option<()> {
        self.lit(b"[")?;
        let mut n = 0;
        if self.lit(b"]").is_none() {
            loop {
                let s = self.str()?;
                match argv.get_mut(n) {
                    Some(a) => {
                        a.0.clear();
                        a.0.extend_from_slice(s.as_bytes());
                    }
                    None => argv.push(Bytes::from(s)),
                }
                n += 1;
                if self.lit(b"]").is_some() {
                    break;
                }
                self.lit(b",")?;
            }
        }
        argv.truncate(n);
        Some(())
    }

    /// A socket address as its derived `Serialize` writes it: `family`, then the fields of
    /// that family in order.
    fn addr_into(&mut self, addr: &mut SockAddr) -> Option<()> {
        self.lit(b"{\"family\":")?;
        let family = self.string()?;
        *addr = match family {
            b"inet" | b"inet6" => {
                self.lit(b",\"ip\":")?;
                let text = self.str()?;
                self.lit(b",\"port\":")?;
                let port = u16::try_from(self.u64()?).ok()?;
                let mut ip = match addr {
                    SockAddr::Inet { ip, .. } | SockAddr::Inet6 { ip, .. } => std::mem::take(ip),
                    _ => String::new(),
                };
                ip.clear();
                ip.push_str(text);
                if family == b"inet" {
                    SockAddr::Inet { ip, port }
                } else {
                    SockAddr::Inet6 { ip, port }
                }
            }
            b"unix" => {
                self.lit(b",\"path\":")?;
                let path = Bytes::from(self.str()?);
                self.lit(b",\"abstract\":")?;
                SockAddr::Unix {
                    path,
                    is_abstract: self.bool()?,
                }
            }
            b"other" => {
                self.lit(b",\"family_id\":")?;
                SockAddr::Other {
                    family_id: u16::try_from(self.u64()?).ok()?,
                }
            }
            _ => return None,
        };
        self.lit(b"}")
    }
}

/// Evaluates the bundle in `dir` with the current checks under `proofs`: its report, and how
/// many events were read. The one route from evidence on disk to a report: `recheck`, and a
/// live audit once its bundle is written ([`glassbox_checks::evaluate_stream`]: a pre-pass
/// over the calls with a destination, then the checks over the whole stream).
pub fn evaluate_bundle(dir: &Path, proofs: &Proofs) -> Result<(AuditReport, Manifest), Error> {
    evaluate_bundle_counted(dir, proofs).map(|b| (b.report, b.manifest))
}

/// What [`evaluate_bundle_counted`] read and derived.
struct Evaluated {
    report: AuditReport,
    manifest: Manifest,
    /// The bundle's flows (paired with their calls).
    flows: Vec<Flow>,
    /// Events read.
    events: u64,
}

fn evaluate_bundle_counted(dir: &Path, proofs: &Proofs) -> Result<Evaluated, Error> {
    let manifest_path = dir.join("manifest.json");
    let manifest: Manifest =
        serde_json::from_slice(&read(&manifest_path)?).map_err(|e| bad(&manifest_path, 1, e))?;
    let mut transcript: Vec<TranscriptEntry> = Vec::new();
    let tpath = dir.join("transcript.jsonl");
    if tpath.exists() {
        read_lines(&tpath, |t| transcript.push(t))?;
    }
    // The denied run's, when there was one (what `tool-definition-drift` compares across runs).
    let mut denied_transcript: Vec<TranscriptEntry> = Vec::new();
    let dpath = dir.join("transcript-denied.jsonl");
    if dpath.exists() {
        read_lines(&dpath, |t| denied_transcript.push(t))?;
    }
    let mut flows: Vec<Flow> = Vec::new();
    let npath = dir.join("network.jsonl");
    if npath.exists() {
        read_lines(&npath, |f| flows.push(f))?;
    }
    let epath = dir.join("events.jsonl");
    let mut pass = 0;
    let mut events = 0;
    let evaluated = glassbox_checks::evaluate_stream(
        glassbox_checks::Bundle {
            manifest: &manifest,
            transcript: &transcript,
            denied_transcript: &denied_transcript,
        },
        flows,
        |f: &mut dyn FnMut(&Event)| {
            pass += 1;
            if pass == 1 {
                read_calls(&epath, f)
            } else {
                events = read_events(&epath, f)?;
                Ok(())
            }
        },
        proofs,
    )?;
    let report = crate::report(&manifest, evaluated.checks, dir);
    Ok(Evaluated {
        report,
        manifest,
        flows: evaluated.flows,
        events,
    })
}

/// The pre-pass over `events.jsonl` ([`glassbox_checks::links::Calls`] keeps only the calls
/// with a destination): a line is parsed only when it is a `connect` event (sendto and the
/// others are that kind too), found by a byte search, so the pass costs about a read of the
/// file. A line that does not parse is left to the full pass, which reports it.
fn read_calls(path: &Path, f: &mut dyn FnMut(&Event)) -> Result<(), Error> {
    let kind = memchr::memmem::Finder::new(b"\"kind\":\"connect\"");
    let mut chunks = Chunks::open(path)?;
    let mut reader = EventReader::default();
    while let Some((line, _)) = chunks.next_line()? {
        let text = &chunks.buf[line];
        if kind.find(text).is_some() {
            if let Ok(e) = reader.parse(text.trim_ascii_end()) {
                f(e);
            }
        }
    }
    Ok(())
}

/// Re-evaluates the bundle in `dir` with the current checks under `proofs`.
pub fn recheck(dir: &Path, proofs: &Proofs) -> Result<Recheck, Error> {
    let Evaluated {
        report,
        manifest,
        flows,
        events,
    } = evaluate_bundle_counted(dir, proofs)?;
    let rpath = dir.join("report.json");
    let (stored, withdrawn) = if rpath.exists() {
        let mut r: AuditReport =
            serde_json::from_slice(&read(&rpath)?).map_err(|e| bad(&rpath, 1, e))?;
        let n = glassbox_checks::apply_retractions(&mut r.checks, &flows);
        if n > 0 {
            let (v, why) = glassbox_checks::verdict(&manifest, &r.checks);
            r.verdict = v;
            r.inconclusive_reason = why;
        }
        (Some(r), n)
    } else {
        (None, 0)
    };
    Ok(Recheck {
        dir: dir.to_path_buf(),
        report,
        stored,
        withdrawn,
        events,
    })
}

/// The whole bundle in `dir`, in memory (for a report): manifest, events, transcript, flows.
pub fn load(dir: &Path) -> Result<glassbox_model::Evidence, Error> {
    let manifest_path = dir.join("manifest.json");
    let manifest: Manifest =
        serde_json::from_slice(&read(&manifest_path)?).map_err(|e| bad(&manifest_path, 1, e))?;
    let mut ev = glassbox_model::Evidence {
        manifest,
        ..Default::default()
    };
    read_events(&dir.join("events.jsonl"), |e| ev.events.push(e.clone()))?;
    let t = dir.join("transcript.jsonl");
    if t.exists() {
        read_lines(&t, |e| ev.transcript.push(e))?;
    }
    let n = dir.join("network.jsonl");
    if n.exists() {
        read_lines(&n, |f| ev.flows.push(f))?;
    }
    Ok(ev)
}

/// What may be published of `report`: findings awaiting review are replaced by one line
/// saying so (nothing of them is shown), rejected ones are dropped, and each check's outcome
/// and the verdict follow from what is left. `status(check, summary)` says whether a finding
/// is `Some(true)` published, `Some(false)` rejected, or `None` withheld.
pub fn published(
    report: &AuditReport,
    manifest: &glassbox_model::Manifest,
    status: &dyn Fn(&str, &str) -> Option<bool>,
) -> AuditReport {
    let mut out = report.clone();
    for c in &mut out.checks {
        let mut withheld = 0usize;
        c.findings
            .retain_mut(|f| match status(&f.check, &f.summary) {
                Some(true) => {
                    // Published: an accusation a person accepted is no longer awaiting review
                    // (the verdict then says flagged, and no renderer calls it withheld).
                    f.accusation = false;
                    true
                }
                Some(false) => false,
                None => {
                    withheld += 1;
                    false
                }
            });
        if withheld > 0 {
            c.findings.push(glassbox_model::Finding {
                check: c.id.clone(),
                version: c.version,
                summary: format!("{withheld} finding(s) withheld until a person has reviewed them"),
                evidence: Vec::new(),
                phase: None,
                accusation: true,
                flows: Vec::new(),
            });
        }
        if c.outcome == glassbox_model::Outcome::Flag && c.findings.is_empty() {
            // Every finding was rejected on review: the check's claim holds for this run.
            c.outcome = glassbox_model::Outcome::Pass;
            c.reason = Some("every finding was rejected on review".into());
        }
    }
    let (verdict, why) = glassbox_checks::verdict(manifest, &out.checks);
    out.verdict = verdict;
    out.inconclusive_reason = why;
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Events of every kind, with the strings a hostile program may pass: quotes, backslashes,
    /// control characters, non-ASCII, bytes that are not UTF-8, empty ones; and the extreme
    /// numbers.
    fn samples() -> Vec<Event> {
        let odd = [
            Bytes::from("/home/u/.ssh/id_rsa"),
            Bytes::from("relative/./x/../y"),
            Bytes::from("/tmp/é ü 中 \u{2028} \u{7f}"),
            Bytes::from("/tmp/quote\"x"),
            Bytes::from("/tmp/back\\slash"),
            Bytes::from("/tmp/new\nline\ttab\u{1b}[31m"),
            Bytes(b"/tmp/\xff\xfe".to_vec()),
            Bytes::from(""),
            Bytes::from("/"),
        ];
        let mut kinds = Vec::new();
        for (n, p) in odd.iter().enumerate() {
            kinds.push(EventKind::Open {
                syscall: "openat".into(),
                path: p.clone(),
                flags: [0, 0o2101, u64::MAX][n % 3],
                flags_text: "O_WRONLY|O_CREAT".into(),
                result: [Some(3), None, Some(-2), Some(i64::MIN), Some(i64::MAX)][n % 5],
            });
            kinds.push(EventKind::Stat {
                syscall: "newfstatat".into(),
                path: p.clone(),
            });
            kinds.push(EventKind::Exec {
                syscall: "execve".into(),
                path: p.clone(),
                argv: odd[..n % 5].to_vec(),
            });
            kinds.push(EventKind::Image {
                path: p.clone(),
                shown: odd[(n + 1) % odd.len()].clone(),
            });
            kinds.push(EventKind::Honeytoken {
                path: p.clone(),
                access: "close-nowrite".into(),
                dir: n % 2 == 0,
            });
        }
        for addr in [
            SockAddr::Inet {
                ip: "192.0.2.1".into(),
                port: 443,
            },
            SockAddr::Inet6 {
                ip: "2001:db8::1".into(),
                port: u16::MAX,
            },
            SockAddr::Unix {
                path: Bytes::from("/run/user/1000/bus"),
                is_abstract: false,
            },
            SockAddr::Unix {
                path: Bytes(vec![0xff, b'x']),
                is_abstract: true,
            },
            SockAddr::Other { family_id: 16 },
        ] {
            kinds.push(EventKind::Connect {
                syscall: "sendto".into(),
                fd: -1,
                addr: addr.clone(),
            });
            kinds.push(EventKind::Bind { fd: i32::MAX, addr });
        }
        kinds.push(EventKind::Socket {
            domain: 2,
            sock_type: i32::MIN,
            protocol: 0,
        });
        kinds.push(EventKind::Refused {
            syscall: "i386:5".into(),
            errno: 38,
            reason: "a foreign \"ABI\"".into(),
        });
        kinds.push(EventKind::Refused {
            syscall: "io_uring_setup".into(),
            errno: 1,
            reason: String::new(),
        });
        let phases = [
            Phase::Call("read_file".into()),
            Phase::Call("read_file".into()),
            Phase::Startup,
            Phase::Call("".into()),
            Phase::Initialize,
            Phase::Call("a \"b\"".into()),
            Phase::List,
            Phase::Call("call:x".into()),
            Phase::Shutdown,
        ];
        kinds
            .into_iter()
            .enumerate()
            .map(|(n, kind)| Event {
                id: [1, u64::MAX, 0][n % 3] - (n % 3 == 1 && n % 2 == 1) as u64,
                t_ns: [0, 1_750, u64::MAX][n % 3],
                pid: [1, i32::MAX, i32::MIN, 0][n % 4],
                ppid: [0, -3, 7][n % 3],
                phase: phases[n % phases.len()].clone(),
                kind,
            })
            .collect()
    }

    fn lines() -> Vec<Vec<u8>> {
        samples()
            .iter()
            .map(|e| serde_json::to_vec(e).unwrap())
            .collect()
    }

    /// `reader` reads `line` exactly as `serde_json` and the `Deserialize` impl do.
    fn agrees(reader: &mut EventReader, line: &[u8]) {
        let want: Option<Event> = serde_json::from_slice(line).ok();
        let got = reader.parse(line).ok().cloned();
        assert_eq!(got, want, "{}", String::from_utf8_lossy(line));
    }

    #[test]
    fn plain_lines_are_scanned_and_read_as_serde_reads_them() {
        let mut r = EventReader::default();
        let mut plain = 0;
        for line in lines() {
            // Escapes and `{"bytes": …}` are left to serde_json; everything else is scanned.
            if !line.contains(&b'\\') && !line.windows(8).any(|w| w == b"{\"bytes\"") {
                plain += 1;
            }
            agrees(&mut r, &line);
        }
        assert!(plain > 20, "{plain}");
        assert_eq!(r.scanned(), plain);
        // What the recorder writes most, read twice in a row (the second into the same slot).
        let line = br#"{"id":7,"t_ns":12,"pid":3,"ppid":1,"phase":"call:fetch","kind":"open","syscall":"openat","path":"/usr/lib/x.so","flags":524288,"flags_text":"O_RDONLY|O_CLOEXEC","result":3}"#;
        for _ in 0..2 {
            let before = r.scanned();
            agrees(&mut r, line);
            assert_eq!(r.scanned(), before + 1);
        }
    }

    #[test]
    fn every_cut_deletion_and_insertion_reads_as_serde_does() {
        let mut r = EventReader::default();
        for line in lines() {
            for at in 0..=line.len() {
                agrees(&mut r, &line[..at]);
                if at < line.len() {
                    let mut v = line.clone();
                    v.remove(at);
                    agrees(&mut r, &v);
                    let mut v = line.clone();
                    v[at] = 0xff;
                    agrees(&mut r, &v);
                }
                for b in [
                    b' ', b'"', b',', b'0', b'-', b'.', b'e', b'}', b'\\', 0x01, 0xc3,
                ] {
                    let mut v = line.clone();
                    v.insert(at, b);
                    agrees(&mut r, &v);
                }
            }
        }
    }

    #[test]
    fn keys_in_another_order_duplicates_and_odd_values_read_as_serde_does() {
        let mut r = EventReader::default();
        let base = r#""id":1,"t_ns":2,"pid":3,"ppid":1,"phase":"list""#;
        for line in [
            format!(r#"{{{base},"kind":"stat","syscall":"stat","path":"/x"}}"#),
            format!(r#"{{"kind":"stat","syscall":"stat","path":"/x",{base}}}"#),
            format!(r#"{{"path":"/x","syscall":"stat","kind":"stat",{base}}}"#),
            format!(r#"{{{base},"kind":"stat","syscall":"stat","path":"/x","extra":1}}"#),
            format!(r#"{{{base},"kind":"stat","syscall":"stat","path":"/x","fd":"no"}}"#),
            format!(r#"{{{base},"kind":"stat","syscall":"stat","path":"/x","path":"/y"}}"#),
            format!(r#"{{{base},"kind":"stat","kind":"stat","syscall":"stat","path":"/x"}}"#),
            format!(r#"{{{base},"id":1,"kind":"stat","syscall":"stat","path":"/x"}}"#),
            format!(r#"{{{base},"kind":"stat","syscall":"stat","path":{{"bytes":"/w=="}}}}"#),
            format!(r#"{{{base},"kind":"stat","syscall":"stat"}}"#),
            format!(r#"{{{base},"kind":2,"syscall":"stat","path":"/x"}}"#),
            format!(r#"{{{base},"kind":"frob","path":"/x"}}"#),
            format!(r#"{{{base},"kind":"open","syscall":"o","path":"/x","flags":0,"flags_text":"","result":null}}"#),
            format!(r#"{{{base},"kind":"open","syscall":"o","path":"/x","flags":1.0,"flags_text":""}}"#),
            format!(r#"{{{base},"kind":"open","syscall":"o","path":"/x","flags":1e3,"flags_text":""}}"#),
            format!(r#"{{{base},"kind":"open","syscall":"o","path":"/x","flags":-0,"flags_text":""}}"#),
            format!(r#"{{{base},"kind":"open","syscall":"o","path":"/x","flags":18446744073709551616,"flags_text":""}}"#),
            format!(r#"{{{base},"kind":"open","syscall":"o","path":"/x","flags":01,"flags_text":""}}"#),
            format!(r#"{{{base},"kind":"open","syscall":"o","path":"/x","flags":0,"flags_text":"","result":-9223372036854775808}}"#),
            format!(r#"{{{base},"kind":"open","syscall":"o","path":"/x","flags":0,"flags_text":"","result":-9223372036854775809}}"#),
            format!(r#"{{{base},"kind":"socket","domain":1,"sock_type":1,"protocol":4294967296}}"#),
            format!(r#"{{{base},"kind":"connect","syscall":"c","fd":3,"addr":{{"ip":"192.0.2.1","family":"inet","port":1}}}}"#),
            format!(r#"{{{base},"kind":"connect","syscall":"c","fd":3,"addr":{{"family":"inet","ip":"192.0.2.1","port":65536}}}}"#),
            format!(r#"{{{base},"kind":"connect","syscall":"c","fd":3,"addr":{{"family":"inet","ip":"192.0.2.1","port":1,"x":0}}}}"#),
            format!(r#"{{{base},"kind":"connect","syscall":"c","fd":3,"addr":{{"family":"inet","port":1,"ip":"192.0.2.1"}}}}"#),
            format!(r#"{{{base},"kind":"connect","syscall":"c","fd":3,"addr":{{"family":"inet","ip":"192.0.2.1"}}}}"#),
            format!(r#"{{{base},"kind":"connect","syscall":"c","fd":3,"addr":{{"family":"unix","abstract":true,"path":"p"}}}}"#),
            format!(r#"{{{base},"kind":"connect","syscall":"c","fd":3,"addr":{{"family":"other","family_id":7}}}}"#),
            format!(r#"{{{base},"kind":"connect","syscall":"c","fd":3,"addr":{{"family":"carrier pigeon"}}}}"#),
            format!(r#"{{{base},"kind":"exec","syscall":"execve","path":"/bin/sh","argv":[]}}"#),
            format!(r#"{{{base},"kind":"exec","syscall":"execve","path":"/bin/sh","argv":["sh",1]}}"#),
            format!(r#"{{{base},"kind":"exec","syscall":"execve","path":"/bin/sh","argv":["sh",]}}"#),
            format!(r#"{{{base},"kind":"honeytoken","path":"/x","access":"open","dir":tru}}"#),
            format!(r#"{{{base},"kind":"stat","syscall":"stat","path":"/x"}}x"#),
            r#"{"id":1,"t_ns":2,"pid":3,"ppid":1,"phase":"call","kind":"stat","syscall":"s","path":"/x"}"#.to_string(),
            r#"{"id":1,"t_ns":2,"pid":2147483648,"ppid":1,"phase":"list","kind":"stat","syscall":"s","path":"/x"}"#.to_string(),
            "{}".to_string(),
            "null".to_string(),
            "[]".to_string(),
        ] {
            agrees(&mut r, line.as_bytes());
        }
    }

    /// The slot of a kind is read into again and again: nothing of an earlier event may show
    /// through a later one (a result that is gone, a shorter argv, another address family, a
    /// phase that changed).
    #[test]
    fn a_reused_slot_keeps_nothing_of_the_previous_event() {
        let mut r = EventReader::default();
        let all = samples();
        for order in [
            all.clone(),
            all.iter().rev().cloned().collect::<Vec<_>>(),
            all.iter()
                .step_by(3)
                .chain(all.iter().skip(1))
                .cloned()
                .collect(),
        ] {
            for e in order {
                let line = serde_json::to_vec(&e).unwrap();
                assert_eq!(r.parse(&line).unwrap(), &e);
            }
        }
    }

    #[test]
    fn word_scans_find_the_first_byte() {
        let mut rng = 0x9e37_79b9_7f4a_7c15u64;
        let alphabet = [
            b'a', b'"', b'\\', b'\n', 0x00, 0x1f, 0x20, 0x7f, 0x80, 0xff, b'/',
        ];
        for _ in 0..20_000 {
            rng ^= rng << 13;
            rng ^= rng >> 7;
            rng ^= rng << 17;
            let len = (rng % 40) as usize;
            let mut s = vec![b'x'; len];
            for (i, b) in s.iter_mut().enumerate() {
                let r = rng.rotate_left(i as u32 * 5);
                if r.is_multiple_of(7) {
                    *b = alphabet[(r >> 8) as usize % alphabet.len()];
                }
            }
            let naive_plain = s
                .iter()
                .position(|&c| c == b'"' || c == b'\\' || c < 0x20)
                .unwrap_or(s.len());
            assert_eq!(
                plain_prefix(&s),
                (naive_plain, s[..naive_plain].is_ascii()),
                "{s:?}"
            );
            assert_eq!(
                find_byte(&s, b'\n'),
                s.iter().position(|&c| c == b'\n'),
                "{s:?}"
            );
        }
    }

    /// A directory under the system temp dir, removed on drop.
    struct Tmp(PathBuf);

    impl Tmp {
        fn new(what: &str) -> Tmp {
            static N: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
            let n = N.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
            let d = std::env::temp_dir().join(format!(
                "glassbox-recheck-{what}-{}-{n}",
                std::process::id()
            ));
            std::fs::create_dir_all(&d).unwrap();
            Tmp(d)
        }
    }

    impl Drop for Tmp {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    #[test]
    fn events_are_read_line_by_line_across_chunks_and_a_truncated_last_line_is_skipped() {
        for ending in [&b"\n"[..], b"\r\n", b" \n"] {
            read_back(ending);
        }
    }

    fn read_back(ending: &[u8]) {
        let dir = Tmp::new("read");
        let path = dir.0.join("events.jsonl");
        let all = samples();
        let mut text = Vec::new();
        // Enough lines to cross several chunks, one longer than a chunk, and blank lines.
        let mut want = Vec::new();
        while text.len() < 3 * CHUNK {
            for e in &all {
                serde_json::to_writer(&mut text, e).unwrap();
                text.extend_from_slice(ending);
                want.push(e.clone());
            }
            text.extend_from_slice(b"\n  \n");
        }
        let long = Event {
            kind: EventKind::Stat {
                syscall: "stat".into(),
                path: Bytes(vec![b'a'; CHUNK + 17]),
            },
            ..all[0].clone()
        };
        serde_json::to_writer(&mut text, &long).unwrap();
        text.push(b'\n');
        want.push(long);
        // A glassbox killed mid-write.
        text.extend_from_slice(br#"{"id":9,"t_ns":1,"pid"#);
        std::fs::write(&path, &text).unwrap();
        let mut got = Vec::new();
        let n = read_events(&path, |e| got.push(e.clone())).unwrap();
        assert_eq!(n as usize, want.len());
        assert!(got == want, "the events read back differ");
        // The owned reader agrees.
        let mut owned: Vec<Event> = Vec::new();
        assert_eq!(read_lines(&path, |e| owned.push(e)).unwrap(), n);
        assert!(owned == want);
        // The pre-pass hands out exactly the calls with a destination, in order.
        let mut calls = Vec::new();
        read_calls(&path, &mut |e| calls.push(e.clone())).unwrap();
        let connects: Vec<Event> = want
            .iter()
            .filter(|e| matches!(e.kind, EventKind::Connect { .. }))
            .cloned()
            .collect();
        assert!(!connects.is_empty());
        assert!(calls == connects, "the pre-pass read other calls");
    }

    #[test]
    fn a_bad_line_is_an_error_naming_the_file_and_line() {
        let dir = Tmp::new("bad");
        let path = dir.0.join("events.jsonl");
        let good = serde_json::to_string(&samples()[0]).unwrap();
        std::fs::write(&path, format!("{good}\n\n{{\"id\":1}}\n{good}\n")).unwrap();
        let err = read_events(&path, |_| {}).unwrap_err().to_string();
        assert!(
            err.starts_with(&format!("{}:3: missing field", path.display())),
            "{err}"
        );
        // The last line, complete but bad, is an error too (only a cut one is skipped).
        std::fs::write(&path, format!("{good}\n{{\"id\":1}}\n")).unwrap();
        assert!(read_events(&path, |_| {}).is_err());
        std::fs::write(&path, format!("{good}\n{{\"id\":1}}")).unwrap();
        assert_eq!(read_events(&path, |_| {}).unwrap(), 1);
        // A missing file names itself.
        let err = read_events(&dir.0.join("nope.jsonl"), |_| {}).unwrap_err();
        assert!(err.to_string().contains("nope.jsonl"), "{err}");
    }
}
