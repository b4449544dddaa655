use crate::Bytes;
use serde::de::{self, IgnoredAny, MapAccess, Visitor};
use serde::{Deserialize, Deserializer, Serialize, Serializer};
use std::fmt;
use std::marker::PhantomData;

/// The part of an MCP session an event happened in.
///
/// Serialized as `startup`, `initialize`, `list`, `call:<tool>`, `read:<uri>`,
/// `prompt:<name>`, `shutdown`. A tool called more than once (the plan of calls,
/// [`ToolRecord::calls`]) has a phase per call: its first call is `call:<tool>`, its K-th
/// `call:<tool>#K` ([`Phase::call`]); reads of a resource and gets of a prompt are numbered the
/// same way ([`Phase::read`], [`Phase::prompt`]).
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub enum Phase {
    /// The package's installation (npm, pip, uv), before the server first runs.
    Install,
    /// From the start of the command until the client sends `initialize`.
    Startup,
    /// `initialize` and `notifications/initialized`.
    Initialize,
    /// `tools/list`, `resources/list`, `prompts/list` (first and last listing).
    List,
    /// A `tools/call`: the tool's name, then `#K` for its K-th call when K > 1 (see
    /// [`Phase::call`]).
    Call(String),
    /// A `resources/read`: the URI read (of a listed resource, or a template's expansion),
    /// then `#K` for the K-th read of the same resource or template (see [`Phase::read`]).
    Read(String),
    /// A `prompts/get`: the prompt's name, then `#K` for its K-th get ([`Phase::prompt`]).
    Prompt(String),
    /// After the last request: stdin closed, the server asked to exit.
    Shutdown,
}

impl fmt::Display for Phase {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            Phase::Install => f.write_str("install"),
            Phase::Startup => f.write_str("startup"),
            Phase::Initialize => f.write_str("initialize"),
            Phase::List => f.write_str("list"),
            Phase::Call(tool) => write!(f, "call:{tool}"),
            Phase::Read(uri) => write!(f, "read:{uri}"),
            Phase::Prompt(name) => write!(f, "prompt:{name}"),
            Phase::Shutdown => f.write_str("shutdown"),
        }
    }
}

impl Phase {
    /// The phase of the `k`-th call (from 1) of `tool`: `call:<tool>` for the first, as
    /// before tools were called more than once, and `call:<tool>#K` after it. A tool whose own
    /// name ends in `#` and digits has `#1` written on its first call too, so that
    /// [`Phase::call_of`] reads every phase back.
    pub fn call(tool: &str, k: u32) -> Phase {
        Phase::Call(numbered(tool, k))
    }

    /// The phase of the `k`-th read (from 1) of `uri`, numbered as [`Phase::call`] numbers.
    pub fn read(uri: &str, k: u32) -> Phase {
        Phase::Read(numbered(uri, k))
    }

    /// The phase of the `k`-th get (from 1) of prompt `name`, numbered as [`Phase::call`]
    /// numbers.
    pub fn prompt(name: &str, k: u32) -> Phase {
        Phase::Prompt(numbered(name, k))
    }

    /// What the session exercised in this phase: the kind (`call`, `read`, `prompt`), the
    /// tool, URI or prompt, and its number (from 1); `None` for the other phases.
    pub fn exercised(&self) -> Option<(&'static str, &str, u32)> {
        let (kind, name) = match self {
            Phase::Call(n) => ("call", n),
            Phase::Read(n) => ("read", n),
            Phase::Prompt(n) => ("prompt", n),
            _ => return None,
        };
        let (name, k) = unnumbered(name);
        Some((kind, name, k))
    }

    /// The tool and the call's number (from 1) of a call's phase; `None` for another phase.
    pub fn call_of(&self) -> Option<(&str, u32)> {
        match self {
            Phase::Call(name) => Some(unnumbered(name)),
            _ => None,
        }
    }
}

/// `name` as the `k`-th of its phases writes it: as is for the first, `name#K` after it. A name
/// that itself ends in `#` and digits has `#1` written on its first too, so that [`unnumbered`]
/// reads every one back.
fn numbered(name: &str, k: u32) -> String {
    let ambiguous = name
        .rsplit_once('#')
        .is_some_and(|(_, n)| !n.is_empty() && n.bytes().all(|b| b.is_ascii_digit()));
    if k <= 1 && !ambiguous {
        name.to_string()
    } else {
        format!("{name}#{}", k.max(1))
    }
}

/// The name and number of a numbered phase's text ([`numbered`]).
fn unnumbered(name: &str) -> (&str, u32) {
    if let Some((base, n)) = name.rsplit_once('#') {
        if !n.is_empty() && n.len() <= 9 && n.bytes().all(|b| b.is_ascii_digit()) {
            return (base, n.parse().unwrap_or(1));
        }
    }
    (name, 1)
}

impl std::str::FromStr for Phase {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, String> {
        Ok(match s {
            "install" => Phase::Install,
            "startup" => Phase::Startup,
            "initialize" => Phase::Initialize,
            "list" => Phase::List,
            "shutdown" => Phase::Shutdown,
            other => {
                if let Some(tool) = other.strip_prefix("call:") {
                    Phase::Call(tool.to_string())
                } else if let Some(uri) = other.strip_prefix("read:") {
                    Phase::Read(uri.to_string())
                } else if let Some(name) = other.strip_prefix("prompt:") {
                    Phase::Prompt(name.to_string())
                } else {
                    return Err(format!("unknown phase {other:?}"));
                }
            }
        })
    }
}

impl Serialize for Phase {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Phase {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        // A visitor rather than `String::deserialize`: only `call:<tool>` allocates.
        struct V;
        impl Visitor<'_> for V {
            type Value = Phase;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str(
                    "a phase (install, startup, initialize, list, call:<tool>, read:<uri>, \
                     prompt:<name>, shutdown)",
                )
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Phase, E> {
                s.parse().map_err(E::custom)
            }
            fn visit_bytes<E: de::Error>(self, b: &[u8]) -> Result<Phase, E> {
                match std::str::from_utf8(b) {
                    Ok(s) => self.visit_str(s),
                    Err(_) => Err(E::invalid_value(de::Unexpected::Bytes(b), &self)),
                }
            }
        }
        d.deserialize_str(V)
    }
}

/// One thing the traced program did, as the recorder saw it.
///
/// Serialized as one flat object: the common fields, then `kind` and the kind's fields
/// (written by hand: serde's `flatten` costs a second pass per event, and the recorder
/// writes hundreds of thousands of them). Deserialized by hand too, for the same reason; see
/// the `Deserialize` impl.
#[derive(Clone, Debug, PartialEq)]
pub struct Event {
    /// Sequence number within the run, from 1; findings point at events by this id.
    pub id: u64,
    /// Nanoseconds since the start of the run.
    pub t_ns: u64,
    /// Process id inside the sandbox's pid namespace.
    pub pid: i32,
    /// Parent process id inside the sandbox's pid namespace (0 when the parent is outside it).
    pub ppid: i32,
    /// The MCP phase current when the event was recorded.
    pub phase: Phase,
    /// What happened.
    pub kind: EventKind,
}

impl Serialize for Event {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut m = s.serialize_map(None)?;
        m.serialize_entry("id", &self.id)?;
        m.serialize_entry("t_ns", &self.t_ns)?;
        m.serialize_entry("pid", &self.pid)?;
        m.serialize_entry("ppid", &self.ppid)?;
        m.serialize_entry("phase", &self.phase)?;
        match &self.kind {
            EventKind::Exec {
                syscall,
                path,
                argv,
            } => {
                m.serialize_entry("kind", "exec")?;
                m.serialize_entry("syscall", syscall)?;
                m.serialize_entry("path", path)?;
                m.serialize_entry("argv", argv)?;
            }
            EventKind::Open {
                syscall,
                path,
                flags,
                flags_text,
                result,
            } => {
                m.serialize_entry("kind", "open")?;
                m.serialize_entry("syscall", syscall)?;
                m.serialize_entry("path", path)?;
                m.serialize_entry("flags", flags)?;
                m.serialize_entry("flags_text", flags_text)?;
                if let Some(r) = result {
                    m.serialize_entry("result", r)?;
                }
            }
            EventKind::Stat { syscall, path } => {
                m.serialize_entry("kind", "stat")?;
                m.serialize_entry("syscall", syscall)?;
                m.serialize_entry("path", path)?;
            }
            EventKind::Connect {
                syscall,
                fd,
                addr,
                sock_type,
            } => {
                m.serialize_entry("kind", "connect")?;
                m.serialize_entry("syscall", syscall)?;
                m.serialize_entry("fd", fd)?;
                m.serialize_entry("addr", addr)?;
                if let Some(t) = sock_type {
                    m.serialize_entry("sock_type", t)?;
                }
            }
            EventKind::Bind { fd, addr } => {
                m.serialize_entry("kind", "bind")?;
                m.serialize_entry("fd", fd)?;
                m.serialize_entry("addr", addr)?;
            }
            EventKind::Socket {
                domain,
                sock_type,
                protocol,
            } => {
                m.serialize_entry("kind", "socket")?;
                m.serialize_entry("domain", domain)?;
                m.serialize_entry("sock_type", sock_type)?;
                m.serialize_entry("protocol", protocol)?;
            }
            EventKind::Image { path, shown } => {
                m.serialize_entry("kind", "image")?;
                m.serialize_entry("path", path)?;
                m.serialize_entry("shown", shown)?;
            }
            EventKind::Honeytoken { path, access, dir } => {
                m.serialize_entry("kind", "honeytoken")?;
                m.serialize_entry("path", path)?;
                m.serialize_entry("access", access)?;
                m.serialize_entry("dir", dir)?;
            }
            EventKind::Refused {
                syscall,
                errno,
                reason,
            } => {
                m.serialize_entry("kind", "refused")?;
                m.serialize_entry("syscall", syscall)?;
                m.serialize_entry("errno", errno)?;
                m.serialize_entry("reason", reason)?;
            }
        }
        m.end()
    }
}

/// Reads the flat object [`Event`]'s `Serialize` writes, accepting exactly what
/// `#[derive(Deserialize)]` with `#[serde(flatten)] kind: EventKind` accepted: the fields in
/// any order, unknown keys ignored (and, as with the derive, fields of another kind ignored
/// whatever their value), `Bytes` as a string or `{"bytes": base64}`, `kind` by name (or by
/// variant index, which the derive also took).
///
/// Written by hand because the derive is slow: with `flatten`, serde buffers every key and
/// value it does not know of the outer struct (every field of the kind, each string copied)
/// into an intermediate `Content` tree, then deserializes the kind from that buffer, and the
/// internally tagged `EventKind` buffers once more while it looks for `kind`. Here each key is
/// matched as a borrowed `&str`, each value parsed once, straight into its field. Only when
/// `kind` comes after fields of the kind (never in what glassbox writes) are those fields
/// kept as a `serde_json::Value` until the kind is known.
///
/// Measured with `cargo test --release -p glassbox-model -- --ignored --nocapture
/// deserialize_speed`: 1,000,000 events (70% open, 20% stat, 5% exec, 5% connect, ~200 bytes
/// each) parsed from `&str` lines in memory on one core, best of 5, three runs on a shared
/// 2-vCPU AMD EPYC VM: the derive took 0.94-1.14 s (0.9-1.1M events/s, ~1.0 us an event), this
/// impl 0.54-0.62 s (1.6-1.9M events/s, ~0.57 us an event): 1.75-1.85x faster. What is left is
/// mostly serde_json scanning strings and `Bytes`'s own (untagged, so buffering)
/// `Deserialize`.
impl<'de> Deserialize<'de> for Event {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        d.deserialize_map(EventVisitor)
    }
}

/// The keys of an event object.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Field {
    Id,
    TNs,
    Pid,
    Ppid,
    Phase,
    Kind,
    Syscall,
    Path,
    Argv,
    Flags,
    FlagsText,
    Result,
    Fd,
    Addr,
    Domain,
    SockType,
    Protocol,
    Errno,
    Reason,
    Access,
    Dir,
    Shown,
    /// A key no kind has: ignored.
    Other,
}

impl Field {
    fn of(key: &[u8]) -> Field {
        match key {
            b"id" => Field::Id,
            b"t_ns" => Field::TNs,
            b"pid" => Field::Pid,
            b"ppid" => Field::Ppid,
            b"phase" => Field::Phase,
            b"kind" => Field::Kind,
            b"syscall" => Field::Syscall,
            b"path" => Field::Path,
            b"argv" => Field::Argv,
            b"flags" => Field::Flags,
            b"flags_text" => Field::FlagsText,
            b"result" => Field::Result,
            b"fd" => Field::Fd,
            b"addr" => Field::Addr,
            b"domain" => Field::Domain,
            b"sock_type" => Field::SockType,
            b"protocol" => Field::Protocol,
            b"errno" => Field::Errno,
            b"reason" => Field::Reason,
            b"access" => Field::Access,
            b"dir" => Field::Dir,
            b"shown" => Field::Shown,
            _ => Field::Other,
        }
    }

    fn name(self) -> &'static str {
        match self {
            Field::Id => "id",
            Field::TNs => "t_ns",
            Field::Pid => "pid",
            Field::Ppid => "ppid",
            Field::Phase => "phase",
            Field::Kind => "kind",
            Field::Syscall => "syscall",
            Field::Path => "path",
            Field::Argv => "argv",
            Field::Flags => "flags",
            Field::FlagsText => "flags_text",
            Field::Result => "result",
            Field::Fd => "fd",
            Field::Addr => "addr",
            Field::Domain => "domain",
            Field::SockType => "sock_type",
            Field::Protocol => "protocol",
            Field::Errno => "errno",
            Field::Reason => "reason",
            Field::Access => "access",
            Field::Dir => "dir",
            Field::Shown => "shown",
            Field::Other => "(other)",
        }
    }
}

impl<'de> Deserialize<'de> for Field {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Field;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an event field name")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Field, E> {
                Ok(Field::of(s.as_bytes()))
            }
            fn visit_bytes<E: de::Error>(self, b: &[u8]) -> Result<Field, E> {
                Ok(Field::of(b))
            }
        }
        d.deserialize_identifier(V)
    }
}

/// The value of `kind`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Kind {
    Exec,
    Open,
    Stat,
    Connect,
    Bind,
    Socket,
    Image,
    Honeytoken,
    Refused,
}

impl Kind {
    /// In `EventKind`'s order (the derive's variant indices).
    const ALL: [(Kind, &'static str); 9] = [
        (Kind::Exec, "exec"),
        (Kind::Open, "open"),
        (Kind::Stat, "stat"),
        (Kind::Connect, "connect"),
        (Kind::Bind, "bind"),
        (Kind::Socket, "socket"),
        (Kind::Image, "image"),
        (Kind::Honeytoken, "honeytoken"),
        (Kind::Refused, "refused"),
    ];

    /// Whether `f` is one of this kind's fields.
    fn has(self, f: Field) -> bool {
        use Field as F;
        match self {
            Kind::Exec => matches!(f, F::Syscall | F::Path | F::Argv),
            Kind::Open => matches!(
                f,
                F::Syscall | F::Path | F::Flags | F::FlagsText | F::Result
            ),
            Kind::Stat => matches!(f, F::Syscall | F::Path),
            Kind::Connect => matches!(f, F::Syscall | F::Fd | F::Addr | F::SockType),
            Kind::Bind => matches!(f, F::Fd | F::Addr),
            Kind::Socket => matches!(f, F::Domain | F::SockType | F::Protocol),
            Kind::Image => matches!(f, F::Path | F::Shown),
            Kind::Honeytoken => matches!(f, F::Path | F::Access | F::Dir),
            Kind::Refused => matches!(f, F::Syscall | F::Errno | F::Reason),
        }
    }
}

impl<'de> Deserialize<'de> for Kind {
    fn deserialize<D: Deserializer<'de>>(d: D) -> Result<Self, D::Error> {
        struct V;
        impl Visitor<'_> for V {
            type Value = Kind;
            fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                f.write_str("an event kind (exec, open, stat, connect, bind, socket, image, honeytoken or refused)")
            }
            fn visit_str<E: de::Error>(self, s: &str) -> Result<Kind, E> {
                match Kind::ALL.iter().find(|(_, name)| *name == s) {
                    Some((k, _)) => Ok(*k),
                    None => Err(E::custom(format_args!(
                        "unknown event kind {s:?}, expected one of exec, open, stat, \
                         connect, bind, socket, image, honeytoken, refused"
                    ))),
                }
            }
            // The derive took the variant index too.
            fn visit_u64<E: de::Error>(self, n: u64) -> Result<Kind, E> {
                usize::try_from(n)
                    .ok()
                    .and_then(|i| Kind::ALL.get(i))
                    .map(|(k, _)| *k)
                    .ok_or_else(|| {
                        E::invalid_value(de::Unexpected::Unsigned(n), &"variant index 0 <= i < 9")
                    })
            }
        }
        d.deserialize_any(V)
    }
}

/// Where a field's value comes from: the map being read, or a value buffered before `kind`
/// was known.
trait Source<'de> {
    type Error: de::Error;
    fn value<T: Deserialize<'de>>(self) -> Result<T, Self::Error>;
}

struct Next<'a, A>(&'a mut A);

impl<'de, A: MapAccess<'de>> Source<'de> for Next<'_, A> {
    type Error = A::Error;
    fn value<T: Deserialize<'de>>(self) -> Result<T, A::Error> {
        self.0.next_value()
    }
}

struct Buffered<E>(serde_json::Value, PhantomData<E>);

impl<'de, E: de::Error> Source<'de> for Buffered<E> {
    type Error = E;
    fn value<T: Deserialize<'de>>(self) -> Result<T, E> {
        T::deserialize(self.0).map_err(E::custom)
    }
}

/// Fills `slot` from `src`; a second value for the same field is an error, as with the derive.
fn put<'de, T: Deserialize<'de>, S: Source<'de>>(
    slot: &mut Option<T>,
    f: Field,
    src: S,
) -> Result<(), S::Error> {
    if slot.is_some() {
        return Err(de::Error::duplicate_field(f.name()));
    }
    *slot = Some(src.value()?);
    Ok(())
}

fn required<T, E: de::Error>(v: Option<T>, name: &'static str) -> Result<T, E> {
    v.ok_or_else(|| E::missing_field(name))
}

/// The fields of every kind, as read so far.
#[derive(Default)]
struct KindFields {
    syscall: Option<String>,
    path: Option<Bytes>,
    argv: Option<Vec<Bytes>>,
    flags: Option<u64>,
    flags_text: Option<String>,
    result: Option<Option<i64>>,
    fd: Option<i32>,
    addr: Option<SockAddr>,
    domain: Option<i32>,
    sock_type: Option<i32>,
    protocol: Option<i32>,
    errno: Option<i32>,
    reason: Option<String>,
    access: Option<String>,
    dir: Option<bool>,
    shown: Option<Bytes>,
}

impl KindFields {
    /// Reads the value of `f` (a field of some kind) from `src`.
    fn set<'de, S: Source<'de>>(&mut self, f: Field, src: S) -> Result<(), S::Error> {
        match f {
            Field::Syscall => put(&mut self.syscall, f, src),
            Field::Path => put(&mut self.path, f, src),
            Field::Argv => put(&mut self.argv, f, src),
            Field::Flags => put(&mut self.flags, f, src),
            Field::FlagsText => put(&mut self.flags_text, f, src),
            Field::Result => put(&mut self.result, f, src),
            Field::Fd => put(&mut self.fd, f, src),
            Field::Addr => put(&mut self.addr, f, src),
            Field::Domain => put(&mut self.domain, f, src),
            Field::SockType => put(&mut self.sock_type, f, src),
            Field::Protocol => put(&mut self.protocol, f, src),
            Field::Errno => put(&mut self.errno, f, src),
            Field::Reason => put(&mut self.reason, f, src),
            Field::Access => put(&mut self.access, f, src),
            Field::Dir => put(&mut self.dir, f, src),
            Field::Shown => put(&mut self.shown, f, src),
            // Not a kind's field: consumed and dropped (callers do not send these here).
            _ => src.value::<IgnoredAny>().map(drop),
        }
    }

    /// The event kind, with every required field of `kind` present.
    fn build<E: de::Error>(self, kind: Kind) -> Result<EventKind, E> {
        Ok(match kind {
            Kind::Exec => EventKind::Exec {
                syscall: required(self.syscall, "syscall")?,
                path: required(self.path, "path")?,
                argv: required(self.argv, "argv")?,
            },
            Kind::Open => EventKind::Open {
                syscall: required(self.syscall, "syscall")?,
                path: required(self.path, "path")?,
                flags: required(self.flags, "flags")?,
                flags_text: required(self.flags_text, "flags_text")?,
                result: self.result.flatten(),
            },
            Kind::Stat => EventKind::Stat {
                syscall: required(self.syscall, "syscall")?,
                path: required(self.path, "path")?,
            },
            Kind::Connect => EventKind::Connect {
                syscall: required(self.syscall, "syscall")?,
                fd: required(self.fd, "fd")?,
                addr: required(self.addr, "addr")?,
                sock_type: self.sock_type,
            },
            Kind::Bind => EventKind::Bind {
                fd: required(self.fd, "fd")?,
                addr: required(self.addr, "addr")?,
            },
            Kind::Socket => EventKind::Socket {
                domain: required(self.domain, "domain")?,
                sock_type: required(self.sock_type, "sock_type")?,
                protocol: required(self.protocol, "protocol")?,
            },
            Kind::Image => EventKind::Image {
                path: required(self.path, "path")?,
                shown: required(self.shown, "shown")?,
            },
            Kind::Honeytoken => EventKind::Honeytoken {
                path: required(self.path, "path")?,
                access: required(self.access, "access")?,
                dir: required(self.dir, "dir")?,
            },
            Kind::Refused => EventKind::Refused {
                syscall: required(self.syscall, "syscall")?,
                errno: required(self.errno, "errno")?,
                reason: required(self.reason, "reason")?,
            },
        })
    }
}

struct EventVisitor;

impl<'de> Visitor<'de> for EventVisitor {
    type Value = Event;

    fn expecting(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("struct Event")
    }

    fn visit_map<A: MapAccess<'de>>(self, mut map: A) -> Result<Event, A::Error> {
        let mut id: Option<u64> = None;
        let mut t_ns: Option<u64> = None;
        let mut pid: Option<i32> = None;
        let mut ppid: Option<i32> = None;
        let mut phase: Option<Phase> = None;
        let mut kind: Option<Kind> = None;
        let mut fields = KindFields::default();
        // Fields of some kind seen before `kind`: kept until it is known (does not allocate
        // unless used).
        let mut early: Vec<(Field, serde_json::Value)> = Vec::new();
        while let Some(f) = map.next_key::<Field>()? {
            match f {
                Field::Id => put(&mut id, f, Next(&mut map))?,
                Field::TNs => put(&mut t_ns, f, Next(&mut map))?,
                Field::Pid => put(&mut pid, f, Next(&mut map))?,
                Field::Ppid => put(&mut ppid, f, Next(&mut map))?,
                Field::Phase => put(&mut phase, f, Next(&mut map))?,
                Field::Kind => put(&mut kind, f, Next(&mut map))?,
                Field::Other => {
                    map.next_value::<IgnoredAny>()?;
                }
                _ => match kind {
                    Some(k) if k.has(f) => fields.set(f, Next(&mut map))?,
                    // Another kind's field: ignored whatever its value, as the derive did.
                    Some(_) => {
                        map.next_value::<IgnoredAny>()?;
                    }
                    None => early.push((f, map.next_value()?)),
                },
            }
        }
        let id = required(id, "id")?;
        let t_ns = required(t_ns, "t_ns")?;
        let pid = required(pid, "pid")?;
        let ppid = required(ppid, "ppid")?;
        let phase = required(phase, "phase")?;
        let kind = required(kind, "kind")?;
        for (f, v) in early {
            if kind.has(f) {
                fields.set(f, Buffered(v, PhantomData))?;
            }
        }
        Ok(Event {
            id,
            t_ns,
            pid,
            ppid,
            phase,
            kind: fields.build(kind)?,
        })
    }
}

/// The kinds of recorded events; `kind` in the wire format.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "snake_case")]
pub enum EventKind {
    /// `execve` / `execveat`: the program asked to run `path` with `argv`.
    Exec {
        /// The system call.
        syscall: String,
        /// The absolute path of the program.
        path: Bytes,
        /// The arguments, `argv[0]` first.
        argv: Vec<Bytes>,
    },
    /// An open-family call (`open`, `openat`, `openat2`, `creat`).
    Open {
        /// The system call.
        syscall: String,
        /// The absolute path, resolved against the caller's working directory or `dirfd`.
        path: Bytes,
        /// The open flags as passed (`O_*`, numeric).
        flags: u64,
        /// The flags in words (`O_WRONLY|O_CREAT`...).
        flags_text: String,
        /// The call's result (fd or `-errno`) where the recorder could observe it.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        result: Option<i64>,
    },
    /// A stat-family call (`stat`, `lstat`, `newfstatat`, `statx`, `access`, `faccessat`,
    /// `faccessat2`, `readlink`, `readlinkat`); recorded for paths under the home directory.
    Stat {
        /// The system call.
        syscall: String,
        /// The absolute path.
        path: Bytes,
    },
    /// `connect`, or a send that carries a destination (`sendto`, `sendmsg`, `sendmmsg`).
    Connect {
        /// The system call.
        syscall: String,
        /// The socket descriptor in the caller.
        fd: i32,
        /// The destination.
        addr: SockAddr,
        /// The socket's type (`SOCK_STREAM` 1, `SOCK_DGRAM` 2, ...), where the recorder could
        /// read it (`None` in evidence from before it did): a datagram socket connected sends
        /// nothing by connecting, a stream socket's connect sends its first packet.
        #[serde(default, skip_serializing_if = "Option::is_none")]
        sock_type: Option<i32>,
    },
    /// `bind`.
    Bind {
        /// The socket descriptor in the caller.
        fd: i32,
        /// The local address.
        addr: SockAddr,
    },
    /// `socket`.
    Socket {
        /// Address family (`AF_*`, numeric).
        domain: i32,
        /// Socket type (`SOCK_*`, numeric, flags included).
        sock_type: i32,
        /// Protocol number.
        protocol: i32,
    },
    /// The program image a process runs after an exec, as the kernel reports it
    /// (`/proc/PID/exe`, read once the exec is through), with what the recorded exec's path
    /// resolved to when the call was made (symlinks followed; for a script, its interpreter).
    Image {
        /// The image the kernel reports (a memfd shows as `/memfd:name (deleted)`).
        path: Bytes,
        /// What the exec the recorder saw should have run.
        shown: Bytes,
    },
    /// An access to a planted secret (or a directory holding one) as the kernel reported it
    /// (fanotify), whatever path the program passed: ground truth independent of syscall
    /// arguments. Accesses by one process merge in the kernel's queue: this says that it
    /// happened, not how often. `pid` is 0 when the process was gone before it was read.
    Honeytoken {
        /// The planted file or directory.
        path: Bytes,
        /// `open`, `read`, `close-nowrite`, `open-exec`, or `overflow` (events were lost).
        access: String,
        /// Whether `path` is a directory.
        dir: bool,
    },
    /// A call the sandbox's static filter refused (the call failed with `errno`; it never ran).
    Refused {
        /// The call (`ptrace`, `io_uring_setup`), or `<abi>:<number>` for a foreign ABI
        /// (`i386:5`).
        syscall: String,
        /// The errno it failed with.
        errno: i32,
        /// Why the filter refuses it.
        reason: String,
    },
}

impl EventKind {
    /// Whether this is a `connect` of a datagram socket (the recorder read its type): it sends
    /// nothing by itself, and is how a program asks which route or source address it would use
    /// (the C library's address sorting, a browser's check that IPv6 reaches the Internet).
    /// What such a socket sends later is a flow of its own.
    pub fn is_datagram_connect(&self) -> bool {
        /// `SOCK_DGRAM` on Linux.
        const SOCK_DGRAM: i32 = 2;
        matches!(self, EventKind::Connect { syscall, sock_type: Some(t), .. }
            if syscall == "connect" && *t == SOCK_DGRAM)
    }

    /// The path the event is about, for file and exec events.
    pub fn path(&self) -> Option<&Bytes> {
        match self {
            EventKind::Exec { path, .. }
            | EventKind::Open { path, .. }
            | EventKind::Stat { path, .. }
            | EventKind::Honeytoken { path, .. } => Some(path),
            _ => None,
        }
    }
}

/// A socket address as the program passed it.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "family", rename_all = "snake_case")]
pub enum SockAddr {
    /// `AF_INET`.
    Inet {
        /// Dotted-quad address.
        ip: String,
        /// Port.
        port: u16,
    },
    /// `AF_INET6`.
    Inet6 {
        /// Address in RFC 5952 text.
        ip: String,
        /// Port.
        port: u16,
    },
    /// `AF_UNIX`.
    Unix {
        /// The socket path (for abstract sockets, the name without the leading NUL).
        path: Bytes,
        /// Whether the address is in the abstract namespace.
        #[serde(rename = "abstract")]
        is_abstract: bool,
    },
    /// Any other family, or an address the recorder could not read.
    Other {
        /// The `sa_family` value (0 when unreadable).
        family_id: u16,
    },
}

impl Default for SockAddr {
    /// An address that could not be read.
    fn default() -> SockAddr {
        SockAddr::Other { family_id: 0 }
    }
}

impl fmt::Display for SockAddr {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            SockAddr::Inet { ip, port } => write!(f, "{ip}:{port}"),
            SockAddr::Inet6 { ip, port } => write!(f, "[{ip}]:{port}"),
            SockAddr::Unix { path, is_abstract } => {
                write!(f, "unix:{}{path}", if *is_abstract { "@" } else { "" })
            }
            SockAddr::Other { family_id } => write!(f, "family {family_id}"),
        }
    }
}

/// Which way a transcript line went.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum Direction {
    /// glassbox to the server (stdin).
    ClientToServer,
    /// The server to glassbox (stdout).
    ServerToClient,
}

/// One line of the MCP stdio stream, kept raw.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct TranscriptEntry {
    /// Sequence number within the transcript, from 1.
    pub seq: u64,
    /// Nanoseconds since the start of the run.
    pub t_ns: u64,
    /// Direction.
    pub dir: Direction,
    /// The phase the line belongs to.
    pub phase: Phase,
    /// Whether the line parsed as a JSON-RPC message; non-JSON lines are kept and skipped.
    pub json: bool,
    /// The line as sent or received, without its newline (cut at the line limit, see
    /// `truncated`).
    pub raw: Bytes,
    /// Set when the line was longer than the reader's limit and only its start is kept.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub truncated: bool,
}

/// A planted fake secret.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Honeytoken {
    /// Absolute path inside the sandbox.
    pub path: String,
    /// What it imitates (`ssh-ed25519-key`, `aws-credentials`...).
    pub kind: String,
    /// Secret values inside the file (for matching them in outbound data later).
    pub secrets: Vec<String>,
    /// For a declared secret (`env:NAME`): the hosts its server is documented to send it to
    /// (it may go there, and only there). Empty for planted files.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub hosts: Vec<String>,
    /// The random parts of `secrets`, as the generator drew them (recorded when the secret
    /// is made, never guessed from its shape later): each a substring of one of `secrets`
    /// holding no fixed prefix, header or format field (the 16 characters of an AWS key id
    /// after `AKIA`, a `gho_` token after its prefix, the key material of an OpenSSH key's
    /// base64 body). `canary-exfiltration` finds any piece of 12 bytes of these, where a
    /// shorter piece of a whole secret could be another key's fixed part. Empty in bundles
    /// recorded before it was kept: the check then searches whole secrets and long windows.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub random: Vec<String>,
    /// The services its secrets are for (an AWS key id: AWS; a kubeconfig's token: the cluster
    /// that kubeconfig names): sent there, a secret is used, not stolen.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub services: Vec<SecretService>,
}

/// Where a planted secret may go without being stolen: the service it is for.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct SecretService {
    /// What the service is (`AWS`, `GitHub`, `the cluster of this kubeconfig`).
    pub name: String,
    /// Its hosts, lower-case (a host covers its subdomains: `amazonaws.com`).
    pub hosts: Vec<String>,
    /// Which of the honeytoken's `secrets` it is for, by index (an AWS key id, not its
    /// secret key, which a client never sends); empty: all of them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub secrets: Vec<usize>,
}

/// A mount of the sandbox's private root.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct MountRecord {
    /// Where it appears inside the sandbox.
    pub target: String,
    /// What it is (`bind:/usr`, `tmpfs`, `proc`...).
    pub source: String,
    /// Whether it is read-only.
    pub read_only: bool,
}

/// How the sandbox was set up for this run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SandboxSettings {
    /// Isolation backend (`namespaces`).
    pub backend: String,
    /// Namespaces entered (`user`, `mount`, `pid`, `net`, `ipc`, `uts`, `cgroup`).
    pub namespaces: Vec<String>,
    /// The server's uid and gid inside the sandbox.
    pub uid: u32,
    /// The host uid the sandbox uid maps to.
    pub host_uid: u32,
    /// The home directory inside the sandbox.
    pub home: String,
    /// The working directory inside the sandbox.
    pub cwd: String,
    /// The hostname inside the sandbox.
    pub hostname: String,
    /// Network: `loopback-only` (no route out at all).
    pub network: String,
    /// Whether `no_new_privs` was set.
    pub no_new_privs: bool,
    /// Every mount of the private root.
    pub mounts: Vec<MountRecord>,
    /// The environment given to the server.
    pub env: Vec<String>,
    /// The planted fake secrets.
    pub honeytokens: Vec<Honeytoken>,
    /// The sample workspace planted for the tools to work on (a project folder under home
    /// with a git repository, documents and data; nothing secret): the folder the client
    /// gives as its root and path arguments name, unless the server's arguments name one.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub workspace: String,
    /// The resource limits applied, by resource (`memory`, `pids`, `cpu`, `disk`, `core`):
    /// the value and how it was enforced (`"1 GiB via cgroup v1 memory"`, `"512 via
    /// RLIMIT_NPROC (...)"`, `"1 CPU not enforced (...)"`).
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub limits: std::collections::BTreeMap<String, String>,
    /// Limits the sandbox reached while it ran, one sentence each, prefixed with the run
    /// (`"capture run: pids limit (512) reached: 1022 forks refused"`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub limits_reached: Vec<String>,
    /// The phases of each run that reached one of the sandbox's bounds or left processes
    /// running past their end, read from its cgroup at each phase's start and end (where the
    /// backend can: the namespace sandbox; `resource-usage` in the recorder's channels says
    /// so).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub usage: Vec<PhaseUsage>,
    /// Processes still running when a run ended: after the server exited and what it left
    /// was recorded a while longer (then killed), each prefixed with the run (`"capture run:
    /// sleep 3600"`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub outlived: Vec<String>,
    /// Files each server run left in the sandbox's writable places (home, `/tmp`, `/var`,
    /// `/run`, `/dev/shm`; not the working directory, a folder of the user's), read once the
    /// server exited and before the sandbox was removed; planted files are listed only when
    /// their content changed. Where
    /// the backend can read them: `left-files` in the recorder's channels says so.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub left: Vec<LeftFile>,
    /// Where the list of left files stops short of what was there (its bounds on files and
    /// bytes), one sentence each, prefixed with the run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub left_cut: Vec<String>,
}

/// A file a run left in the sandbox's writable places ([`SandboxSettings::left`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct LeftFile {
    /// The run that left it.
    pub mode: crate::NetworkMode,
    /// Its path inside the sandbox (control characters shown as `?`).
    pub path: String,
    /// Its size in bytes.
    pub size: u64,
    /// The SHA-256 of its content, hex, when it was read whole.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sha256: Option<String>,
    /// Whether a component of its path under the writable place starts with a dot.
    #[serde(default, skip_serializing_if = "is_false")]
    pub hidden: bool,
    /// Whether it is a planted file whose content changed (the others are listed only when
    /// they were not planted).
    #[serde(default, skip_serializing_if = "is_false")]
    pub changed: bool,
    /// Where it points, for a symbolic link.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub link: Option<String>,
    /// What it holds of what glassbox gave the run, by name: a planted secret by its planted
    /// path (`~/.ssh/id_ed25519`), `input` for the audit's input marker. Searched as is and
    /// in hex, in its first MiB.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub holds: Vec<String>,
}

fn is_false(b: &bool) -> bool {
    !*b
}

/// What one phase of a run did to the sandbox's bounds ([`SandboxSettings::usage`]).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct PhaseUsage {
    /// The phase.
    pub phase: Phase,
    /// The run's network mode.
    pub mode: crate::NetworkMode,
    /// Forks refused at the process limit.
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub forks_refused: u64,
    /// The most processes at once, when the process limit was first reached in this phase.
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub peak_processes: u64,
    /// Processes killed out of memory.
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub oom_kills: u64,
    /// Times memory reached the limit (and was reclaimed).
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub memory_max: u64,
    /// Milliseconds throttled at the CPU limit.
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub throttled_ms: u64,
    /// Writable mounts that became full.
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub full_mounts: u64,
    /// Processes more at its end than at its start.
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub processes_left: u64,
}

/// How the recorder worked in this run.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RecorderSettings {
    /// The mechanism (`seccomp-user-notify`).
    pub mechanism: String,
    /// The system calls it records.
    pub syscalls: Vec<String>,
    /// Channels this run could observe (`syscalls`, `mcp-transcript`...).
    pub channels: Vec<String>,
    /// What the recorder lost: calls whose arguments it could not read while their caller
    /// waited, records the kernel could not queue (or whose path it could not read), and
    /// overflows of the kernel's report of planted-secret accesses (each also an `overflow`
    /// honeytoken event). A check that needs what was lost says `not-observed`, never `pass`.
    pub lost: u64,
    /// `lost` by why, in words, each with its count, all runs together
    /// (`"records the kernel could not queue (its ring buffer was full): 3"`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lost_why: Vec<String>,
    /// Of `lost`, records of the open and stat families the eBPF channel lost (its ring was
    /// full, a path it could not read, a record it could not decode). A check that reads
    /// other calls only (execs, connects) is not blinded by these.
    #[serde(default, skip_serializing_if = "is_zero_u64")]
    pub lost_file_calls: u64,
    /// Channels this run could not observe, each with why (`honeytoken-ground-truth: …`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub unobserved: Vec<String>,
    /// Why the recorder stopped while processes still ran, if it did: the sandbox was then
    /// killed, and the audit claims nothing (verdict `inconclusive`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
}

impl RecorderSettings {
    /// Counts what a run's recorder lost: `n` in all, `files` of them of the open and stat
    /// families, by why.
    pub fn add_lost(&mut self, n: u64, files: u64, why: &[(String, u64)]) {
        self.lost += n;
        self.lost_file_calls += files;
        for (w, c) in why {
            let prefix = format!("{w}: ");
            match self.lost_why.iter_mut().find(|x| x.starts_with(&prefix)) {
                Some(x) => {
                    let before: u64 = x[prefix.len()..].parse().unwrap_or(0);
                    *x = format!("{prefix}{}", before + c);
                }
                None => self.lost_why.push(format!("{prefix}{c}")),
            }
        }
    }
}

/// Start and end of one phase.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct PhaseTiming {
    /// The phase.
    pub phase: Phase,
    /// Start, in ns since the start of the run.
    pub start_ns: u64,
    /// End, in ns since the start of the run.
    pub end_ns: u64,
}

/// A check and the version of its logic that evaluated this evidence.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct CheckVersion {
    /// Stable check id.
    pub id: String,
    /// Version of the check's logic.
    pub version: u32,
}

/// What was audited.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Target {
    /// The command as given.
    pub command: Vec<String>,
    /// The program that was executed, resolved on the host.
    pub program: String,
    /// The directory glassbox was started in (visible to the server, read-only).
    pub cwd: String,
    /// The package audited, when the target is one (`npm:NAME`, `pypi:NAME`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub package: Option<PackageRef>,
    /// Starts of the server that stopped before answering `initialize` saying what they
    /// lacked, each followed by one with it supplied (the last start is the audited one).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub starts: Vec<StartAttempt>,
}

/// A start of the server that stopped before answering `initialize` for lack of a setting its
/// error named, which the next start supplied.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StartAttempt {
    /// What it said (the line of its stderr that names the error).
    pub said: String,
    /// What it lacked: `the environment variable NAME`, `the option --x`, `the subcommand run`.
    pub lacked: String,
    /// What the next start was given (`NAME, a canary`, `--port 8080`).
    pub supplied: String,
    /// Its files in the bundle, under their own names (`transcript-start-1.jsonl`,
    /// `stderr-start-1.log`); its events and flows are in the bundle's, its run in
    /// `manifest.network.runs` with its session.
    pub files: Vec<String>,
}

/// What audits of a package are filed under, whatever its version: `REGISTRY:NAME`
/// (`npm:@scope/name`, `pypi:mcp-server-git`). The one place this key is made: the store files
/// an audit under it, a batch looks earlier audits up by it.
pub fn package_key(registry: &str, name: &str) -> String {
    format!("{registry}:{name}")
}

/// A package from a registry, as audited.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct PackageRef {
    /// `npm` or `pypi`.
    pub registry: String,
    /// The package's name (`@scope/name` for a scoped npm package).
    pub name: String,
    /// What was asked for (`latest`, a range, an exact version).
    pub requested: String,
    /// The exact version installed.
    pub version: String,
    /// The package's program that was run, by name (`word_mcp_server`): the one a launcher
    /// named (`uvx --from PKG CMD`, `npx -p PKG CMD`), else the package's own.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub program: Option<String>,
    /// PyPI extras installed with it (`PKG[cli]`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub extras: Vec<String>,
    /// Packages installed beside it, exact (`uvx --with X`, a second `npx -p`): `name==version`
    /// (PyPI) or `name@version` (npm).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub with: Vec<String>,
    /// The launcher command line it was configured with (`uvx --from PKG==1.0 CMD`), when it
    /// came from one.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub launcher: Vec<String>,
    /// The client configuration the package documents for itself that glassbox ran it with
    /// (a README snippet or its `server.json`), when the target came with none.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub readme_config: Option<ReadmeConfig>,
}

impl PackageRef {
    /// What its audits are filed under ([`package_key`]).
    pub fn key(&self) -> String {
        package_key(&self.registry, &self.name)
    }
}

/// A package's own documented configuration, as glassbox used it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct ReadmeConfig {
    /// Where it was read: `node_modules/NAME/README.md, block 2`, a `server.json`.
    pub source: String,
    /// Its server's name there.
    pub entry: String,
    /// The arguments it gave the server (placeholders filled).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub args: Vec<String>,
    /// The variables it set (names; a secret's value is a canary).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<String>,
    /// What glassbox filled in for a placeholder.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub filled: Vec<String>,
}

/// The install phase: how the package was installed (or found installed) for this audit.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct InstallRecord {
    /// The installer's command line, as run in the sandbox.
    pub command: Vec<String>,
    /// The folder it installed into (host path; bound read-only in the server's runs).
    pub dir: String,
    /// True when an earlier audit's install of this exact version was reused: no install
    /// ran in this audit, and its evidence is that earlier audit's.
    pub cached: bool,
    /// The run id of the audit whose install is used.
    pub installed_by: String,
    /// How the installer ended (absent when cached).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exit: Option<ServerExit>,
    /// The registry destinations relayed to the real network during the install.
    pub registry: Vec<String>,
    /// The installed packages with their exact versions (the whole dependency tree).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub packages: Vec<String>,
    /// Why the install failed, when it did: the installer's exit and the line of its
    /// output that says why (the audit is then inconclusive, its install evidence checked).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
    /// The installer's last lines of output (stderr, else stdout), when it failed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub output_tail: Vec<String>,
    /// Every destination the install tried, `HOST:PORT (relayed)` for the registry, `HOST:PORT
    /// (captured, not reached)` for the rest (what a failed download tried to fetch).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub destinations: Vec<String>,
    /// Environment variables given to the installer alone (`--install-env NAME=VALUE`; a
    /// value whose name says it is secret is recorded as `***`).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<String>,
}

/// How the server process ended.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "how", rename_all = "snake_case")]
pub enum ServerExit {
    /// Exited with a status code.
    Exited {
        /// The status.
        code: i32,
    },
    /// Killed by a signal.
    Signaled {
        /// The signal number.
        signal: i32,
        /// Whether glassbox sent it (end of the session or a bound reached).
        by_glassbox: bool,
    },
    /// Still running when glassbox stopped recording (it was then killed).
    Running,
}

/// Everything about a run except the event streams: `manifest.json`.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Manifest {
    /// Bundle format version.
    pub format: u32,
    /// The glassbox version.
    pub glassbox_version: String,
    /// Unique id of the run.
    pub run_id: String,
    /// Wall-clock start (RFC 3339).
    pub started_at: String,
    /// Wall-clock end (RFC 3339), once finished.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub finished_at: Option<String>,
    /// `uname -srvm` of the host.
    pub kernel: String,
    /// What was run.
    pub target: Target,
    /// The sandbox.
    pub sandbox: SandboxSettings,
    /// The recorder.
    pub recorder: RecorderSettings,
    /// Versions of the checks that evaluated the evidence.
    pub checks: Vec<CheckVersion>,
    /// Phase timings.
    pub timings: Vec<PhaseTiming>,
    /// How the server ended.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_exit: Option<ServerExit>,
    /// What the session achieved.
    #[serde(default)]
    pub session: SessionSummary,
    /// The network edge of each run.
    #[serde(default)]
    pub network: crate::NetworkSettings,
    /// The install phase, for a package target.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub install: Option<InstallRecord>,
    /// The microVM each run's sandbox ran in (`--isolation microvm`); absent for the
    /// namespace backend.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub vm: Option<VmRecord>,
    /// Dual execution: the calls in which a planted secret was read and bytes the edge read
    /// left for a host that is not its service, each made again with fresh secrets and with
    /// the same ones, and what left in each run, compared.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub dual: Vec<DualRecord>,
}

/// One call (or read, or get) run again to see whether what it sent changes with the planted
/// secrets it read (LDX, ASPLOS 2016: one input changed, the outputs that change with it).
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct DualRecord {
    /// Its phase.
    pub phase: Phase,
    /// The planted secrets (honeytoken paths) it read.
    pub secrets: Vec<String>,
    /// Where the flows that made it worth making again went (a name asked for, else an
    /// address): what each run sent is measured to these.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub destinations: Vec<String>,
    /// What each run sent to `destinations`, over the whole run (each exchange's method,
    /// target and body; else what the edge decrypted, else its payload): `original` (the
    /// capture run), `same` (the same secrets again), `fresh` (new values for every planted
    /// file).
    pub runs: Vec<DualRun>,
    /// Bytes of the original that differ from the fresh run's: its length less the prefix
    /// and suffix the two share (0 when they are the same).
    pub varying: u64,
    /// Why a run is missing, when one is.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

/// What a phase sent in one run of a [`DualRecord`].
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct DualRun {
    /// `original`, `same` or `fresh`.
    pub run: String,
    /// How many bytes.
    pub bytes: u64,
    /// SHA-256 of its flows' bytes, each flow's taken on its own and in sorted order (two
    /// runs that sent the same flows in another order compare equal), hex.
    pub sha256: String,
    /// The flows they came from (the capture run's flow ids for `original`; the rerun's own
    /// numbering otherwise).
    pub flows: u64,
}

impl Manifest {
    /// Whether the audit of a package ended before its server ran: the install failed, or
    /// the program asked for was not there. Its session is then not complete, and the only
    /// run (if any) is the install's.
    pub fn server_never_ran(&self) -> bool {
        self.install.is_some()
            && !self.session.completed
            && self
                .network
                .runs
                .iter()
                .all(|r| r.mode == crate::NetworkMode::Install)
    }
}

/// The microVM a run's sandbox ran in: one fresh guest per run, the namespace sandbox and the
/// recorder inside it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct VmRecord {
    /// The isolation backend (`microvm`).
    pub backend: String,
    /// The guest kernel's release (`6.1.0-57-amd64`).
    pub kernel_release: String,
    /// The guest kernel image's SHA-256 (hex), where known.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kernel_sha256: String,
    /// The accelerator (`kvm` or `tcg`).
    pub accelerator: String,
    /// Why that accelerator.
    pub accelerator_reason: String,
    /// Milliseconds from starting QEMU to the guest agent's ready, per run.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub boot_ms: Vec<u64>,
    /// An older bundle's boots that did not come up and were tried again, each with why and
    /// the end of that guest's console. glassbox no longer boots a guest twice (its bounds
    /// are counted in guest time; a guest that does not come up is lost, in [`Self::lost`]).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub boot_retries: Vec<String>,
    /// The guest's memory in MiB (0: not recorded, an older bundle).
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub memory_mib: u32,
    /// The guest's virtual CPUs (0: not recorded, an older bundle).
    #[serde(default, skip_serializing_if = "is_zero_u32")]
    pub cpus: u32,
    /// Runs whose guest was lost (it hung, died, or never started the server), each with
    /// why: those runs observed nothing whole, and the audit is inconclusive.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lost: Vec<String>,
}

impl VmRecord {
    /// Adds a later run's record: its boots, retries and losses; what this one lacks (a run
    /// whose guest never came up knows no kernel) is taken from it.
    pub fn merge(&mut self, later: VmRecord) {
        let VmRecord {
            backend,
            kernel_release,
            kernel_sha256,
            accelerator,
            accelerator_reason,
            boot_ms,
            boot_retries,
            memory_mib,
            cpus,
            lost,
        } = later;
        for (mine, theirs) in [
            (&mut self.backend, backend),
            (&mut self.kernel_release, kernel_release),
            (&mut self.kernel_sha256, kernel_sha256),
            (&mut self.accelerator, accelerator),
            (&mut self.accelerator_reason, accelerator_reason),
        ] {
            if mine.is_empty() {
                *mine = theirs;
            }
        }
        if self.memory_mib == 0 {
            self.memory_mib = memory_mib;
        }
        if self.cpus == 0 {
            self.cpus = cpus;
        }
        self.boot_ms.extend(boot_ms);
        self.boot_retries.extend(boot_retries);
        self.lost.extend(lost);
    }
}

fn is_zero_u32(n: &u32) -> bool {
    *n == 0
}

/// What the MCP session achieved.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct SessionSummary {
    /// The protocol version the server answered with.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub protocol_version: Option<String>,
    /// `serverInfo` from the `initialize` result.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub server_info: Option<serde_json::Value>,
    /// Whether the session ran to its end (every planned request answered or timed out).
    pub completed: bool,
    /// Why the session could not complete, when it did not.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub failure: Option<String>,
    /// The server closed its stdout before the session's end (it crashed or exited).
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub server_closed_stdout: bool,
    /// The marker put into the generated tool arguments' probe strings (the same in every
    /// run of an audit), to follow where the server takes its input.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub input_marker: Option<String>,
    /// The address the plans gave URL parameters as the cloud metadata service's (an IP
    /// literal: `169.254.169.254`, or the documentation address that stands in for it in tests
    /// and the selftest): what a tool fetching it reached, the checks read from here.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub metadata_probe: Option<String>,
    /// The tools the server listed and what happened when each was called.
    pub tools: Vec<ToolRecord>,
    /// The bound on calls the session had (`3 calls per tool, 3000 per session, 10s after the
    /// first ones`); `None` in bundles made before tools had plans (one call each).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub explore: Option<String>,
    /// Why some tools got fewer calls than their plan: the session's budget for calls ran out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub exploration_cut: Option<String>,
    /// Names of the resources listed.
    pub resources: Vec<String>,
    /// Names of the prompts listed.
    pub prompts: Vec<String>,
    /// The URI templates of the resource templates listed.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub templates: Vec<String>,
    /// The rest of the surface as the session exercised it: each listed resource, resource
    /// template and prompt, with its reads or gets. Empty in bundles made before glassbox read
    /// resources and got prompts.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub surface: Vec<SurfaceRecord>,
    /// What the surface's exercise left out, one sentence each (the budget ran out, more
    /// resources listed than are read, a declared capability whose listing failed).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub surface_cut: Vec<String>,
    /// The requests the server sent to glassbox, by method, and how many of each.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub server_requests: std::collections::BTreeMap<String, u64>,
    /// The secrets glassbox gave the server in answer to its elicitations (fresh canaries, one
    /// per field that asked for a secret): the audit follows them like planted secrets.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub elicited: Vec<ElicitedSecret>,
    /// Non-JSON lines the server wrote on stdout (recorded and skipped).
    pub non_json_lines: u64,
    /// Tool name → SHA-256 (hex) of the tool's canonical definition (name, description,
    /// inputSchema, annotations as canonical JSON), from the run's first complete `tools/list`
    /// (computed from the transcript by `glassbox_checks::tool_definition_drift::hashes`): for comparing audits
    /// of the same server. Empty in bundles made before it existed.
    #[serde(default, skip_serializing_if = "std::collections::BTreeMap::is_empty")]
    pub tool_hashes: std::collections::BTreeMap<String, String>,
    /// SHA-256 (hex) of the canonical JSON of the server's `instructions` in its first answer
    /// to `initialize` or `server/discover`, when it gave any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instructions_hash: Option<String>,
}

/// What kind of primitive a [`SurfaceRecord`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum SurfaceKind {
    /// A resource `resources/list` listed, read by its URI.
    Resource,
    /// A resource template `resources/templates/list` listed, read through URIs expanded
    /// from it with the plans' values.
    Template,
    /// A prompt `prompts/list` listed, got with arguments from the plans.
    Prompt,
}

impl SurfaceKind {
    /// How reports name the kind: `resource`, `resource template`, `prompt`.
    pub fn name(self) -> &'static str {
        match self {
            SurfaceKind::Resource => "resource",
            SurfaceKind::Template => "resource template",
            SurfaceKind::Prompt => "prompt",
        }
    }
}

/// A resource, resource template or prompt, and what its reads or gets did.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SurfaceRecord {
    /// What it is.
    pub kind: SurfaceKind,
    /// Its URI, URI template or name, as the server gave it.
    pub name: String,
    /// The `completion/complete` requests made for its arguments or variables.
    #[serde(default, skip_serializing_if = "is_zero")]
    pub completions: u32,
    /// Each read or get, in order.
    pub reads: Vec<SurfaceRead>,
}

fn is_zero_u64(n: &u64) -> bool {
    *n == 0
}

fn is_zero(n: &u32) -> bool {
    *n == 0
}

/// One `resources/read` or `prompts/get`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct SurfaceRead {
    /// Its phase (`read:URI`, `prompt:NAME#K`): what a finding of it names.
    pub phase: Phase,
    /// What the values choose, as a call's label does (`all properties`, `path: a planted
    /// credential`); empty for a listed resource.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub label: String,
    /// The template's variables or the prompt's arguments; `null` for a listed resource.
    #[serde(default, skip_serializing_if = "serde_json::Value::is_null")]
    pub arguments: serde_json::Value,
    /// What came back.
    pub result: CallResult,
    /// The error's text, shortened, when the result is not `ok`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// A canary glassbox gave in answer to an elicitation's field that asked for a secret.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ElicitedSecret {
    /// The phase the elicitation came in.
    pub phase: Phase,
    /// The field of the requested schema.
    pub field: String,
    /// The value given.
    pub value: String,
}

/// The outcome of one call of a tool.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum CallResult {
    /// A result without `isError`.
    Ok,
    /// A result with `isError: true` (and none of the reasons below).
    ToolError,
    /// The arguments were refused: a JSON-RPC `-32602` (invalid params), or a tool error whose
    /// text says the input failed validation.
    RejectedArguments,
    /// A tool error (or JSON-RPC error) whose text says a network request failed: the sandbox's
    /// only network is glassbox's edge, so the failure was at the edge (a refused flow, a
    /// rejected certificate, a synthetic answer the client could not use).
    #[serde(rename = "transport_failure_at_edge")]
    TransportFailure,
    /// A JSON-RPC error response (other than the above).
    RpcError,
    /// No answer within the per-request timeout.
    Timeout,
    /// Not called (the session ended first).
    NotCalled,
}

/// A tool the server listed.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ToolRecord {
    /// The tool's name, as the server gave it.
    pub name: String,
    /// Its description.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub description: Option<String>,
    /// Its `inputSchema`.
    #[serde(default)]
    pub input_schema: serde_json::Value,
    /// Whether glassbox called it.
    pub called: bool,
    /// Why the generated arguments are `{}` or may not fit the schema (no schema, not a
    /// schema, an unresolvable or cyclic `$ref`, a schema too deep or too large to follow
    /// whole); `None` when the schema was usable.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments_note: Option<String>,
    /// The arguments glassbox generated for the call.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub arguments: Option<serde_json::Value>,
    /// What the call returned; with several calls, what the first returned.
    pub result: CallResult,
    /// Every call made, in order, when the tool was called by a plan ([`CallRecord`]); empty in
    /// bundles made before tools had plans (then `arguments` and `result` are the one call).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub calls: Vec<CallRecord>,
    /// Whether it was listed again, unchanged, in the final `tools/list`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub relisted_unchanged: Option<bool>,
}

/// One call of a tool: which argument set of its plan it sent, and what came back.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct CallRecord {
    /// Its number among the tool's calls, from 1: its phase is [`Phase::call`]`(tool, k)`.
    pub k: u32,
    /// What the argument set chooses (`all properties`, `required only`, `dryRun=true`...).
    pub label: String,
    /// The arguments sent.
    pub arguments: serde_json::Value,
    /// What came back.
    pub result: CallResult,
    /// The call whose arguments were rejected and that this one tries again with another set.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub retry_of: Option<u32>,
    /// The error's text, shortened, when the result is not `ok`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub error: Option<String>,
}

/// All the evidence of one run, in memory: what checks evaluate.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Evidence {
    /// The manifest.
    pub manifest: Manifest,
    /// The recorded events, in order.
    pub events: Vec<Event>,
    /// The MCP transcript.
    pub transcript: Vec<TranscriptEntry>,
    /// The flows at the network edge and the canary sockets.
    pub flows: Vec<crate::Flow>,
}

impl Evidence {
    /// The home directory inside the sandbox, with a trailing `/`.
    pub fn home_prefix(&self) -> String {
        let home = self.manifest.sandbox.home.trim_end_matches('/');
        format!("{home}/")
    }
}

#[cfg(test)]
mod tests {

    #[test]
    fn what_the_runs_lost_adds_up_by_why() {
        let mut r = RecorderSettings::default();
        r.add_lost(3, 3, &[("ring full".into(), 2), ("no path".into(), 1)]);
        r.add_lost(2, 0, &[("unreadable".into(), 2)]);
        assert_eq!((r.lost, r.lost_file_calls), (5, 3));
        assert_eq!(r.lost_why, ["ring full: 2", "no path: 1", "unreadable: 2"]);
    }

    use super::*;
    use serde_json::Value;

    /// What `#[derive(Deserialize)]` on `Event` with `#[serde(flatten)] kind` accepted: the
    /// reference the hand-written `Deserialize` must agree with.
    #[derive(Debug, Deserialize)]
    struct DerivedEvent {
        id: u64,
        t_ns: u64,
        pid: i32,
        ppid: i32,
        phase: Phase,
        #[serde(flatten)]
        kind: EventKind,
    }

    impl From<DerivedEvent> for Event {
        fn from(d: DerivedEvent) -> Event {
            Event {
                id: d.id,
                t_ns: d.t_ns,
                pid: d.pid,
                ppid: d.ppid,
                phase: d.phase,
                kind: d.kind,
            }
        }
    }

    /// Parses `json` with the hand-written `Deserialize`, checking that the derive agrees
    /// (same event, or an error from both).
    fn parse(json: &str) -> Result<Event, String> {
        let manual = serde_json::from_str::<Event>(json).map_err(|e| e.to_string());
        let derived = serde_json::from_str::<DerivedEvent>(json)
            .map(Event::from)
            .map_err(|e| e.to_string());
        match (&manual, &derived) {
            (Ok(m), Ok(d)) => assert_eq!(m, d, "{json}"),
            (Err(_), Err(_)) => {}
            _ => panic!("the derive said {derived:?}, the hand-written impl {manual:?}: {json}"),
        }
        manual
    }

    /// One event of every kind (and the variants of their fields).
    fn every_kind() -> Vec<Event> {
        let kinds = vec![
            EventKind::Exec {
                syscall: "execve".into(),
                path: Bytes::from("/bin/sh"),
                argv: vec![Bytes::from("sh"), Bytes(vec![0xff])],
            },
            EventKind::Exec {
                syscall: "execveat".into(),
                path: Bytes(b"/tmp/\xfe\xffx".to_vec()),
                argv: vec![],
            },
            EventKind::Open {
                syscall: "openat".into(),
                path: Bytes::from("/home/u/.ssh/id_rsa"),
                flags: 0o2101,
                flags_text: "O_WRONLY|O_CREAT|O_APPEND".into(),
                result: Some(-2),
            },
            EventKind::Open {
                syscall: "open".into(),
                path: Bytes::from("/x"),
                flags: 0,
                flags_text: "O_RDONLY".into(),
                result: None,
            },
            EventKind::Open {
                syscall: "openat2".into(),
                path: Bytes(b"/home/u/\x80.env".to_vec()),
                flags: u64::MAX,
                flags_text: "".into(),
                result: Some(i64::MAX),
            },
            EventKind::Stat {
                syscall: "statx".into(),
                path: Bytes::from("/home/u/.gnupg"),
            },
            EventKind::Stat {
                syscall: "readlink".into(),
                path: Bytes(vec![b'/', 0xc3]),
            },
            EventKind::Connect {
                syscall: "sendto".into(),
                fd: 3,
                addr: SockAddr::Inet6 {
                    ip: "2001:db8::1".into(),
                    port: 53,
                },
                sock_type: None,
            },
            EventKind::Connect {
                syscall: "connect".into(),
                fd: -1,
                addr: SockAddr::Inet {
                    ip: "10.0.0.1".into(),
                    port: 443,
                },
                sock_type: Some(2),
            },
            EventKind::Connect {
                syscall: "sendmsg".into(),
                fd: 9,
                addr: SockAddr::Other { family_id: 16 },
                sock_type: None,
            },
            EventKind::Bind {
                fd: 4,
                addr: SockAddr::Unix {
                    path: Bytes::from("agent"),
                    is_abstract: true,
                },
            },
            EventKind::Bind {
                fd: 5,
                addr: SockAddr::Unix {
                    path: Bytes(vec![0xff, b's']),
                    is_abstract: false,
                },
            },
            EventKind::Socket {
                domain: 2,
                sock_type: 1,
                protocol: 0,
            },
        ];
        let phases = [
            Phase::Startup,
            Phase::Initialize,
            Phase::List,
            Phase::Call("a b".into()),
            Phase::Call("".into()),
            Phase::Shutdown,
        ];
        kinds
            .into_iter()
            .enumerate()
            .map(|(n, kind)| Event {
                id: n as u64 + 1,
                t_ns: u64::MAX - n as u64,
                pid: 2 + n as i32,
                ppid: if n % 2 == 0 { 1 } else { -3 },
                phase: phases[n % phases.len()].clone(),
                kind,
            })
            .collect()
    }

    /// The event's JSON object rebuilt with its keys in the order `order` leaves them.
    fn reorder(e: &Event, order: impl Fn(&mut Vec<(String, Value)>)) -> String {
        let Value::Object(m) = serde_json::to_value(e).unwrap() else {
            panic!("an event is an object")
        };
        let mut pairs: Vec<(String, Value)> = m.into_iter().collect();
        order(&mut pairs);
        let body: Vec<String> = pairs
            .iter()
            .map(|(k, v)| format!("{}:{v}", Value::from(k.as_str())))
            .collect();
        format!("{{{}}}", body.join(","))
    }

    /// The hand-written serializer says exactly what serde's derive with `flatten` would, and
    /// the hand-written deserializer reads it back as the derive would.
    #[test]
    fn events_serialize_as_the_derived_format() {
        #[derive(Serialize)]
        struct Derived<'a> {
            id: u64,
            t_ns: u64,
            pid: i32,
            ppid: i32,
            phase: &'a Phase,
            #[serde(flatten)]
            kind: &'a EventKind,
        }
        for e in every_kind() {
            let derived = serde_json::to_string(&Derived {
                id: e.id,
                t_ns: e.t_ns,
                pid: e.pid,
                ppid: e.ppid,
                phase: &e.phase,
                kind: &e.kind,
            })
            .unwrap();
            let manual = serde_json::to_string(&e).unwrap();
            assert_eq!(manual, derived);
            assert_eq!(parse(&manual).unwrap(), e);
            // From a reader too (no borrowed strings), and from a `Value`.
            assert_eq!(
                serde_json::from_reader::<_, Event>(manual.as_bytes()).unwrap(),
                e
            );
            let v = serde_json::to_value(&e).unwrap();
            assert_eq!(serde_json::from_value::<Event>(v).unwrap(), e);
        }
    }

    #[test]
    fn each_call_of_a_tool_has_its_own_phase_read_back_whole() {
        assert_eq!(Phase::call("fetch", 1).to_string(), "call:fetch");
        assert_eq!(Phase::call("fetch", 3).to_string(), "call:fetch#3");
        // A tool named like a numbered call keeps its `#1`, so that it is read back whole.
        assert_eq!(Phase::call("issue#12", 1).to_string(), "call:issue#12#1");
        for (tool, k) in [
            ("fetch", 1),
            ("fetch", 2),
            ("issue#12", 1),
            ("a#", 4),
            ("#", 1),
            ("", 2),
        ] {
            let phase: Phase = Phase::call(tool, k).to_string().parse().unwrap();
            assert_eq!(phase.call_of(), Some((tool, k)), "{tool} {k}");
        }
        assert_eq!(Phase::Startup.call_of(), None);
        // Bundles made before plans: the whole name is the tool's.
        assert_eq!(Phase::Call("a#b".into()).call_of(), Some(("a#b", 1)));
    }

    #[test]
    fn keys_may_come_in_any_order() {
        for e in every_kind() {
            type Order = dyn Fn(&mut Vec<(String, Value)>);
            let orders: [&Order; 5] = [
                // Alphabetical: most kind fields before `kind`.
                &|p| p.sort_by(|a, b| a.0.cmp(&b.0)),
                &|p| p.sort_by(|a, b| b.0.cmp(&a.0)),
                &|p| p.reverse(),
                // `kind` last, then `kind` first.
                &|p| {
                    let k = p.iter().position(|(k, _)| k == "kind").unwrap();
                    let kind = p.remove(k);
                    p.push(kind);
                },
                &|p| {
                    let k = p.iter().position(|(k, _)| k == "kind").unwrap();
                    let kind = p.remove(k);
                    p.insert(0, kind);
                },
            ];
            for order in orders {
                let json = reorder(&e, order);
                assert_eq!(parse(&json).unwrap(), e, "{json}");
            }
        }
    }

    #[test]
    fn unknown_keys_and_other_kinds_fields_are_ignored() {
        let extras = [
            r#""extra":{"nested":[1,{"kind":"frob"}],"s":"\u00e9"}"#,
            r#""zz":null"#,
            r#""Id":"not the id""#,
            // Fields of kinds other than the event's, with any value, even twice.
            r#""fd":"not a number""#,
            r#""fd":[1]"#,
            r#""domain":{}"#,
            r#""argv":7"#,
            r#""addr":{"family":"nowhere"}"#,
        ];
        for e in every_kind() {
            let Value::Object(m) = serde_json::to_value(&e).unwrap() else {
                unreachable!()
            };
            let own: Vec<&String> = m.keys().collect();
            let extras: Vec<&str> = extras
                .iter()
                .copied()
                .filter(|x| !own.iter().any(|k| x.starts_with(&format!("\"{k}\""))))
                .collect();
            let json = serde_json::to_string(&e).unwrap();
            let body = &json[1..json.len() - 1];
            // Extras first (before `kind`: buffered or skipped), last, and both.
            for json in [
                format!("{{{},{body}}}", extras.join(",")),
                format!("{{{body},{}}}", extras.join(",")),
                format!("{{{},{body},{}}}", extras.join(","), extras.join(",")),
            ] {
                assert_eq!(parse(&json).unwrap(), e, "{json}");
            }
        }
    }

    #[test]
    fn non_utf8_bytes_are_read_from_base64() {
        let json = r#"{"id":1,"t_ns":2,"pid":3,"ppid":1,"phase":"startup","kind":"exec","syscall":"execve","path":{"bytes":"L2Jpbi//"},"argv":["sh",{"bytes":"/w=="}]}"#;
        let e = parse(json).unwrap();
        assert_eq!(
            e.kind,
            EventKind::Exec {
                syscall: "execve".into(),
                path: Bytes(b"/bin/\xff".to_vec()),
                argv: vec![Bytes::from("sh"), Bytes(vec![0xff])],
            }
        );
        // Before `kind` (buffered) too.
        let json = r#"{"path":{"bytes":"/w=="},"syscall":"stat","kind":"stat","id":1,"t_ns":2,"pid":3,"ppid":1,"phase":"list"}"#;
        assert_eq!(parse(json).unwrap().kind.path(), Some(&Bytes(vec![0xff])));
        // Bad base64 is an error.
        let json = r#"{"id":1,"t_ns":2,"pid":3,"ppid":1,"phase":"list","kind":"stat","syscall":"stat","path":{"bytes":"!!"}}"#;
        assert!(parse(json).is_err());
    }

    #[test]
    fn a_missing_field_is_named() {
        for e in every_kind() {
            let Value::Object(m) = serde_json::to_value(&e).unwrap() else {
                unreachable!()
            };
            for key in m.keys() {
                let mut without = m.clone();
                without.remove(key);
                let json = Value::Object(without).to_string();
                if key == "result" {
                    let mut expected = e.clone();
                    if let EventKind::Open { result, .. } = &mut expected.kind {
                        *result = None;
                    }
                    assert_eq!(parse(&json).unwrap(), expected);
                    continue;
                }
                if let (EventKind::Connect { .. }, "sock_type") = (&e.kind, key.as_str()) {
                    let mut expected = e.clone();
                    if let EventKind::Connect { sock_type, .. } = &mut expected.kind {
                        *sock_type = None;
                    }
                    assert_eq!(parse(&json).unwrap(), expected);
                    continue;
                }
                let err = parse(&json).unwrap_err();
                // `addr.family` and friends are inside `addr`: only top-level keys here.
                assert!(
                    err.starts_with(&format!("missing field `{key}`")),
                    "{err} for {json}"
                );
            }
        }
    }

    /// A run whose guest never came up knows no kernel: the next run's record fills it in,
    /// and every run's boots, retries and losses are kept, in order.
    #[test]
    fn vm_records_of_several_runs_merge_without_losing_a_loss() {
        let mut first = VmRecord {
            backend: "microvm".into(),
            lost: vec!["the guest did not come up".into()],
            boot_retries: vec!["boot 1".into()],
            ..Default::default()
        };
        first.merge(VmRecord {
            backend: "microvm".into(),
            kernel_release: "6.1.0-57-amd64".into(),
            accelerator: "tcg".into(),
            boot_ms: vec![2500],
            memory_mib: 768,
            cpus: 2,
            lost: vec!["the guest hung".into()],
            ..Default::default()
        });
        assert_eq!(first.kernel_release, "6.1.0-57-amd64");
        assert_eq!(first.accelerator, "tcg");
        assert_eq!((first.memory_mib, first.cpus), (768, 2));
        assert_eq!(first.boot_ms, [2500]);
        assert_eq!(first.boot_retries, ["boot 1"]);
        assert_eq!(first.lost, ["the guest did not come up", "the guest hung"]);
        // What the first run knew stays.
        first.merge(VmRecord {
            kernel_release: "other".into(),
            ..Default::default()
        });
        assert_eq!(first.kernel_release, "6.1.0-57-amd64");
    }

    #[test]
    fn an_unknown_kind_is_a_clear_error() {
        let json =
            r#"{"id":1,"t_ns":2,"pid":3,"ppid":1,"phase":"startup","kind":"frob","path":"/x"}"#;
        let err = parse(json).unwrap_err();
        assert!(
            err.starts_with(
                r#"unknown event kind "frob", expected one of exec, open, stat, connect, bind, socket, image, honeytoken, refused"#
            ),
            "{err}"
        );
        let json = r#"{"id":1,"t_ns":2,"pid":3,"ppid":1,"phase":"startup","kind":null}"#;
        assert!(parse(json).unwrap_err().contains("expected an event kind"));
        // The derive took a variant index; so does the hand-written impl.
        let json = r#"{"id":1,"t_ns":2,"pid":3,"ppid":1,"phase":"startup","kind":2,"syscall":"stat","path":"/x"}"#;
        assert!(matches!(parse(json).unwrap().kind, EventKind::Stat { .. }));
        let json = r#"{"id":1,"t_ns":2,"pid":3,"ppid":1,"phase":"startup","kind":6}"#;
        assert!(parse(json).is_err());
    }

    #[test]
    fn malformed_events_are_errors_as_with_the_derive() {
        let ok = r#""id":1,"t_ns":2,"pid":3,"ppid":1,"phase":"startup""#;
        for json in [
            format!(r#"{{{ok},"id":1,"kind":"stat","syscall":"stat","path":"/x"}}"#),
            format!(r#"{{{ok},"kind":"stat","kind":"stat","syscall":"stat","path":"/x"}}"#),
            format!(r#"{{{ok},"kind":"stat","syscall":"stat","path":"/x","path":"/y"}}"#),
            format!(r#"{{"path":"/x","path":"/y",{ok},"kind":"stat","syscall":"stat"}}"#),
            format!(r#"{{{ok},"kind":"stat","syscall":1,"path":"/x"}}"#),
            format!(r#"{{"syscall":1,{ok},"kind":"stat","path":"/x"}}"#),
            format!(r#"{{{ok},"kind":"open","syscall":"o","path":"/x","flags":-1,"flags_text":""}}"#),
            format!(r#"{{{ok},"kind":"open","syscall":"o","path":"/x","flags":0,"flags_text":"","result":"1"}}"#),
            format!(r#"{{{ok},"kind":"socket","domain":1,"sock_type":1,"protocol":4294967296}}"#),
            r#"{"id":-1,"t_ns":2,"pid":3,"ppid":1,"phase":"startup","kind":"stat","syscall":"s","path":"/x"}"#.to_string(),
            r#"{"id":1.5,"t_ns":2,"pid":3,"ppid":1,"phase":"startup","kind":"stat","syscall":"s","path":"/x"}"#.to_string(),
            r#"{"id":1,"t_ns":2,"pid":3,"ppid":1,"phase":"call","kind":"stat","syscall":"s","path":"/x"}"#.to_string(),
            r#"{"id":1,"t_ns":2,"pid":3,"ppid":1,"phase":7,"kind":"stat","syscall":"s","path":"/x"}"#.to_string(),
            r#"[1,2,3,1,"startup","stat","s","/x"]"#.to_string(),
            "null".to_string(),
            "{}".to_string(),
        ] {
            assert!(parse(&json).is_err(), "{json}");
        }
        // `result: null` is no result.
        let json = format!(
            r#"{{{ok},"kind":"open","syscall":"o","path":"/x","flags":0,"flags_text":"","result":null}}"#
        );
        assert!(matches!(
            parse(&json).unwrap().kind,
            EventKind::Open { result: None, .. }
        ));
    }

    /// Derive vs hand-written `Deserialize` on 1M events of the recheck benchmark's mix
    /// (numbers in the doc comment of the impl). Run with
    /// `cargo test --release -p glassbox-model -- --ignored --nocapture deserialize_speed`.
    #[test]
    #[ignore = "a measurement, run by hand in release"]
    fn deserialize_speed_vs_derive() {
        use std::hint::black_box;
        use std::time::Instant;
        const N: usize = 1_000_000;
        let mut lines: Vec<String> = Vec::with_capacity(N);
        for i in 0..N {
            let kind = match i % 20 {
                0 => EventKind::Exec {
                    syscall: "execve".into(),
                    path: Bytes::from("/usr/bin/git"),
                    argv: vec![
                        Bytes::from("git"),
                        Bytes::from("status"),
                        Bytes::from(format!("--work-tree=/work/app/{i}")),
                    ],
                },
                1 => EventKind::Connect {
                    syscall: "connect".into(),
                    fd: 7,
                    addr: SockAddr::Inet {
                        ip: "127.0.0.1".into(),
                        port: 8000 + (i % 100) as u16,
                    },
                    sock_type: None,
                },
                2..=5 => EventKind::Stat {
                    syscall: "newfstatat".into(),
                    path: Bytes::from(format!("/home/sam/.config/app{}/settings.json", i % 97)),
                },
                _ => EventKind::Open {
                    syscall: "openat".into(),
                    path: Bytes::from(format!("/usr/lib/python3/site-packages/m{}/x.py", i % 991)),
                    flags: 0o2000000,
                    flags_text: "O_RDONLY|O_CLOEXEC".into(),
                    result: Some(3 + (i % 40) as i64),
                },
            };
            let e = Event {
                id: i as u64 + 1,
                t_ns: i as u64 * 1_700,
                pid: 100 + (i % 8) as i32,
                ppid: 1,
                phase: Phase::Call("read_file".into()),
                kind,
            };
            lines.push(serde_json::to_string(&e).unwrap());
        }
        let bytes: usize = lines.iter().map(String::len).sum();
        let mut best = [f64::MAX; 2];
        for _ in 0..5 {
            let t = Instant::now();
            for l in &lines {
                black_box(serde_json::from_str::<DerivedEvent>(l).unwrap());
            }
            best[0] = best[0].min(t.elapsed().as_secs_f64());
            let t = Instant::now();
            for l in &lines {
                black_box(serde_json::from_str::<Event>(l).unwrap());
            }
            best[1] = best[1].min(t.elapsed().as_secs_f64());
        }
        for (name, secs) in ["derive (flatten)", "hand-written"].iter().zip(best) {
            println!(
                "{name}: {:.0} ms for {N} events ({:.2}M events/s, {:.0} MB/s)",
                secs * 1e3,
                N as f64 / secs / 1e6,
                bytes as f64 / secs / 1e6
            );
        }
        println!("speedup: {:.2}x", best[0] / best[1]);
    }
}
