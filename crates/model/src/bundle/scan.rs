//! The fast reader of `events.jsonl`'s lines: a scanner that follows the layout `Event`'s
//! `Serialize` writes, `serde_json` for every other line.

use super::words::plain_prefix;
use crate::{Bytes, Event, EventKind, Phase, SockAddr};

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
            sock_type: None,
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
/// bench/README.md): 0.24 µs an event, 4.1M events/s, against 1.4 µs with `serde_json`.
#[derive(Debug)]
pub struct EventReader {
    /// One event per kind, parsed into again and again.
    pub(super) slots: [Event; 9],
    /// The last event `serde_json` parsed.
    other: Event,
    /// Lines the scanner read (the rest went to `serde_json`).
    pub(super) fast: u64,
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
    pub(super) fn scan(&mut self, line: &[u8]) -> Option<(usize, usize)> {
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

    /// [`Cursor::string`], valid UTF-8 (as `serde_json` requires of every string). The
    /// crate's one `unsafe`: a string the scan saw to be ASCII is not checked again (the
    /// checked `from_utf8` on every string made the parse pass 25% slower: 6.4M against 8.4M
    /// events/s in the recheck bench, side by side).
    #[inline]
    #[allow(unsafe_code)]
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
            EventKind::Connect {
                syscall,
                fd,
                addr,
                sock_type,
            } => {
                self.lit(b",\"syscall\":")?;
                self.string_into(syscall)?;
                self.lit(b",\"fd\":")?;
                *fd = self.i32()?;
                self.lit(b",\"addr\":")?;
                self.addr_into(addr)?;
                *sock_type = match self.lit(b",\"sock_type\":") {
                    Some(()) => Some(self.i32()?),
                    None => None,
                };
                Some(())
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
