//! `credential-probe`: opens and stats of credential files.
//!
//! An access counts when its path (lexically normalized) is:
//!
//! 1. a planted honeytoken (`manifest.sandbox.honeytokens[].path`);
//! 2. inside (or) the credential directory a honeytoken was planted in, when that directory is
//!    one of [`PLANTED_DIRS`] (a `.env` planted in a project folder does not make the whole
//!    folder a credential directory);
//! 3. a well-known credential path under the sandbox home ([`WELL_KNOWN`]), planted or not: an
//!    attempt counts even where nothing is there;
//! 4. a `.env` or `.env.*` file under home outside the server's working directory (dotenv
//!    loaders read `./.env` there legitimately);
//! 5. for an open (read, or attempt; not a stat), a secret of the system or of another
//!    account (version 12): [`SYSTEM`] (the shadow files, SSH host keys, authentication logs),
//!    a well-known credential path in another user's home or in root's, another process's
//!    `environ` or `mem`. Nothing of the host's is in the sandbox, so such an open finds
//!    nothing: the attempt is the finding, never an accusation. What a runtime reads by
//!    itself (`/etc/passwd` through NSS, `/proc/cpuinfo`, `/etc/hosts`, `/proc/self/*`) is not.
//!
//! Open (read, write, directory listing) and stat events count; exec events do not (the child's
//! own open is what is recorded). One finding per distinct path.
//!
//! Version 7: a read of a planted secret is an accusation only where a reviewer would uphold
//! one: its value left for anywhere but its own service, came back to the client in an answer
//! (a tool result or a resource), or may have gone where the edge could not read (a flow it
//! could not read, the install's registry traffic aside). A value that never left, or went only to its own service (a kube
//! client's token to its cluster), is a finding that says so, without accusing.
//!
//! An access during a call whose input named the path ([`crate::named`]: the plan's call that
//! gives a path parameter a planted credential; a folder on its way or inside it; for a stat or
//! a failed open, an entry beside a folder on its way) is the tool doing what it was asked: a
//! note here, and `input-exposure` reports it as what the tool can be made to read. The same
//! path accessed in any other phase still counts (version 5). The kernel's own report of a
//! planted file's open (a `honeytoken` event) comes later than the open, in a later phase: it
//! is the same access when the recorder saw that path opened by a call whose input named it.
//! Version 6 judges as version 5 did: its source `named.rs` also reads what URLs name now,
//! for `input-exposure`. Version 8: a client's own cache inside a credential directory
//! ([`OWN_CACHES`]: kubectl's `~/.kube/cache`) is one note per folder, and a declared secret
//! that went to the vendor its name names went to its own service (`canary-exfiltration`).
//! Version 10: where a secret went is searched in what the edge read unwrapped (compressed
//! streams, text encoded twice: `canary-exfiltration` version 8), so a secret compressed
//! before it left is no longer said to have "never left"; and it says `not-observed`, never
//! `pass`, where the run lost calls the recorder should have seen, or the kernel's report of
//! planted-secret accesses overflowed (`outcome.rs`).
//!
//! Version 11: where a secret went as `canary-exfiltration` version 9 says (a key in a bucket is
//! theft).
//!
//! Version 12: what the input named includes the values glassbox gave a resource template's
//! variables and a prompt's arguments, under the read's or get's phase (`named.rs`), as it
//! includes a call's arguments. A planted file's value that dual execution shows left encoded
//! (`canary-exfiltration`'s v10) left; one a call read and then sent bytes that vary anyway,
//! or that could not be made again, went where is not known (an accusation, as for an unread
//! flow); "never left" is said only when nothing after the read could carry it. Rule 5 is
//! new (the system's and other accounts' secrets), and shell and REPL histories are
//! well-known credential paths.
//!
//! Version 13 (issue 34: npm's own read of `~/.npmrc` was called an accusation for a flow
//! that carried nothing but a ClientHello): a flow whose client sent its ClientHello and got
//! nothing back is read (`canary-exfiltration`'s v11), and an unread flow to the secret's own
//! service (the npm registry for the npm token, the cluster of a kubeconfig) makes no fate
//! unknown, its worst being the secret's use there; the finding names it.
//! What the input named includes a host given without a URL (`named.rs`).
//!
//! Version 14 judges as version 13 did; its source `named.rs` now explains a `.test` name an
//! earlier call's input gave at any time after that call (for `unexplained-egress`).

use crate::paths::{self, NormPath, Rules, View};
use crate::text::{self, Groups};
use crate::{flags, Channel, CheckInfo, Evaluation, Evaluator};
use glassbox_model::{Event, EventKind, Manifest, Severity};

pub(crate) const INFO: CheckInfo = CheckInfo {
    id: "credential-probe",
    version: 14,
    claim: "no credential probing",
    severity: Severity::High,
    channels: &[Channel::Syscalls],
    also_reads: &[Channel::HoneytokenGroundTruth],
    file_calls: true,
    accuses: "reading a planted secret whose value then left, came back to the client, or may \
              have gone where the edge could not read (credential theft)",
    sources: &[
        "credential_probe.rs",
        "links.rs",
        "canary_exfiltration.rs",
        "explain.rs",
        "net.rs",
        "named.rs",
        "paths.rs",
        "flags.rs",
        "text.rs",
        "outcome.rs",
        "layers.rs",
        "dual.rs",
    ],
};

/// Home-relative directories whose every entry counts once a honeytoken is planted in them.
pub(crate) const PLANTED_DIRS: &[&str] = &[".ssh", ".aws", ".kube", ".docker", ".config/gh"];

/// Well-known credential paths under home (patterns of [`paths::matches()`]).
pub(crate) const WELL_KNOWN: &[&str] = &[
    ".ssh/**",
    ".aws/**",
    ".gnupg/**",
    ".netrc",
    ".pgpass",
    ".git-credentials",
    ".npmrc",
    ".pypirc",
    ".docker/config.json",
    ".kube/config",
    ".config/gh/**",
    ".config/gcloud/**",
    ".azure/**",
    ".config/hub",
    ".cargo/credentials",
    ".cargo/credentials.toml",
    ".gem/credentials",
    ".vault-token",
    ".terraform.d/credentials.tfrc.json",
    ".password-store/**",
    ".bitcoin/wallet.dat",
    ".electrum/**",
    ".ethereum/keystore/**",
    ".config/solana/id.json",
    ".mozilla/firefox/**",
    ".config/google-chrome/**",
    ".config/chromium/**",
    // Shell and REPL histories: commands typed, with the tokens typed into them.
    ".bash_history",
    ".zsh_history",
    ".history",
    ".local/share/fish/fish_history",
    ".python_history",
    ".node_repl_history",
    ".psql_history",
    ".mysql_history",
    ".sqlite_history",
    ".rediscli_history",
];

/// The system's secrets outside any home (patterns of [`paths::matches()`], absolute), with
/// what each holds: an open of one (a read, or an attempt: nothing is planted there, and the
/// sandbox holds none of the host's) is a finding, never a stat (`find` and `ls -l` stat every
/// entry they pass). An SSH host key's public half (`.pub`) is not one.
pub(crate) const SYSTEM: &[(&str, &str)] = &[
    ("/etc/shadow", "the system's password hashes"),
    ("/etc/shadow-", "a copy of the system's password hashes"),
    ("/etc/gshadow", "the groups' password hashes"),
    ("/etc/gshadow-", "a copy of the groups' password hashes"),
    ("/etc/security/opasswd", "the users' old password hashes"),
    ("/etc/ssh/ssh_host_*", "an SSH host's private key"),
    ("/var/log/auth.log*", "the authentication log"),
    ("/var/log/secure*", "the authentication log"),
    ("/var/log/btmp*", "the log of failed logins"),
];

/// Well-known credential paths that libraries look up by themselves, with who does: an
/// access to one that is not planted is a note naming it (version 7), not a finding. None of
/// them is planted (`crates/sandbox/src/honeytokens.rs`): the seed's rule is to plant only
/// where nothing legitimate reads automatically.
pub(crate) const DEFAULT_LOOKUPS: &[(&str, &str)] = &[(
    ".netrc",
    "HTTP libraries look it up by default on every request (Python requests, curl's \
     --netrc-optional, libcurl bindings)",
)];

/// Folders inside a credential directory that hold a client's own cache, not credentials,
/// with whose: what a server writes and reads back there (kubectl's discovery and HTTP cache
/// under `~/.kube/cache`) is one note per folder (version 8), not a finding per file.
/// Nothing is planted there.
pub(crate) const OWN_CACHES: &[(&str, &str)] = &[
    (
        ".kube/cache",
        "kubectl's own cache (the cluster's API discovery and HTTP responses)",
    ),
    (
        ".kube/http-cache",
        "kubectl's own HTTP cache (older versions)",
    ),
];

/// What was done under one [`OWN_CACHES`] folder: paths, what to them, events, phases.
type CacheUse = (u64, Vec<String>, Vec<u64>, Vec<glassbox_model::Phase>);

/// Where the values of the planted secrets read went (version 7), which decides whether a
/// read is an accusation: what a reviewer would uphold. The value leaving for anywhere but its
/// own service, coming back to the client in an answer (a tool result or a resource: the
/// model's context is a channel), or a fate unknown because a flow could not be read (any
/// but the install's relayed to the package registry, and, since version 13, any to the
/// secret's own service, where its worst is use), is; a value that never left, or went only to
/// its own service, is not (the finding says which).
struct Fate {
    /// [`crate::canary_exfiltration::went`], computed when a planted file was read: `None` when more was
    /// found than is kept (or nothing planted was read, and [`Fate::of`] is never asked).
    went: Option<Vec<crate::canary_exfiltration::Went>>,
    /// The planted files, normalized, by index of `manifest.sandbox.honeytokens`.
    tokens: Vec<NormPath>,
    /// The names of each flow the edge could not read (of the install too, but its
    /// registry's), with its first name shown.
    unread: Vec<(Vec<String>, String)>,
    /// The hosts of each planted file's services (`honeytokens[].services`), by index.
    services: Vec<Vec<(String, Vec<String>)>>,
    /// The packet edge was there to see what left (`manifest.recorder.channels`).
    edge: bool,
}

impl Fate {
    /// What is needed to judge reads of planted files, if `asked`.
    fn new(c: &crate::Context<'_>, asked: bool) -> Fate {
        Fate {
            went: if asked {
                crate::canary_exfiltration::went(c)
            } else {
                None
            },
            tokens: c
                .manifest
                .sandbox
                .honeytokens
                .iter()
                .map(|h| NormPath::new(h.path.as_bytes()))
                .collect(),
            // As `canary-exfiltration` counts them: every flow but the install's relayed to
            // the package registry (an install's own download the edge did not read counts).
            unread: c
                .flows
                .iter()
                .filter(|f| {
                    !crate::canary_exfiltration::relayed(f)
                        && crate::canary_exfiltration::unread_why(f).is_some()
                })
                .map(|f| {
                    let names: Vec<String> =
                        crate::net::names(f).into_iter().map(|(_, n)| n).collect();
                    let shown = names
                        .first()
                        .map_or_else(|| crate::net::addr(&f.dst), |n| crate::net::show(n));
                    (names, shown)
                })
                .collect(),
            services: c
                .manifest
                .sandbox
                .honeytokens
                .iter()
                .map(|h| {
                    h.services
                        .iter()
                        .map(|s| (s.name.clone(), s.hosts.clone()))
                        .collect()
                })
                .collect(),
            edge: crate::Channel::PacketEdge.observed_in(c.manifest),
        }
    }

    /// What became of the planted file `path`'s value, to follow its finding's summary, and
    /// whether the read is an accusation.
    fn of(&self, path: &NormPath) -> (String, bool) {
        let ti = self.tokens.iter().position(|t| t == path);
        let went = self.went.as_ref().zip(ti).and_then(|(all, ti)| all.get(ti));
        let Some(w) = went else {
            return (
                "; where its value went is not known (more was found than is kept)".into(),
                true,
            );
        };
        let mut why = Vec::new();
        if !w.elsewhere.is_empty() {
            why.push(format!(
                "its value left for {} (canary-exfiltration)",
                w.elsewhere
                    .iter()
                    .take(3)
                    .cloned()
                    .collect::<Vec<_>>()
                    .join("; ")
            ));
        }
        if !w.answers.is_empty() {
            why.push(format!(
                "its value came back to the client in the answer to {} (the model's context is \
                 a channel)",
                text::phases(&w.answers)
            ));
        }
        if why.is_empty() && !w.unknown.is_empty() {
            why.push(format!(
                "where its value went is not known: {}",
                w.unknown.join("; ")
            ));
        }
        if why.is_empty() && !self.edge {
            why.push("where its value went is not known: the network edge was not there".into());
        }
        // An unread flow to one of the secret's own services could at worst have used it
        // there (version 13): the npm registry, the cluster of a kubeconfig.
        let own_service = |names: &[String]| {
            let hosts = ti.and_then(|ti| self.services.get(ti));
            hosts.and_then(|svcs| {
                svcs.iter().find_map(|(name, hosts)| {
                    let under = !names.is_empty()
                        && names.iter().all(|n| {
                            hosts.iter().any(|h| {
                                crate::net::is_under(n, &crate::net::norm_host(h.as_bytes()))
                            })
                        });
                    under.then_some(name.as_str())
                })
            })
        };
        let (own_unread, unread): (Vec<_>, Vec<_>) = self
            .unread
            .iter()
            .partition(|(names, _)| own_service(names).is_some());
        if why.is_empty() && !unread.is_empty() {
            why.push(format!(
                "where its value went is not known: {} could not be read",
                crate::net::count(unread.len() as u64, "flow", "flows")
            ));
        }
        if !why.is_empty() {
            return (format!("; {}", why.join("; ")), true);
        }
        let derived = match w.derived.is_empty() {
            true => String::new(),
            false => format!(" ({})", w.derived.join("; ")),
        };
        let mut said = match w.own.is_empty() {
            true if !own_unread.is_empty() => format!(
                "; its value left in nothing the edge read, nor in any answer to the \
                 client{derived}"
            ),
            true => format!(
                "; its value never left: nothing the edge read carried it, nor any answer to \
                 the client{derived}"
            ),
            false => format!(
                "; its value went only to its own service ({}): use, not theft",
                w.own.join(", ")
            ),
        };
        if let Some((names, shown)) = own_unread.first() {
            said += &format!(
                "; {} to its own service ({}{}) could not be read: at worst, its use there",
                crate::net::count(own_unread.len() as u64, "flow", "flows"),
                own_service(names).map(crate::net::show).unwrap_or_default(),
                match shown.is_empty() {
                    true => String::new(),
                    false => format!(", {shown}"),
                }
            );
        }
        (said, false)
    }
}

/// Why a path is a credential path; the first reason that applies wins.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Reason {
    Planted,
    PlantedDir,
    WellKnown,
    DotEnv,
    /// A secret of the system or of another account ([`SYSTEM`], another home's credential
    /// paths, another process's environment or memory), with what it holds.
    System(&'static str),
}

impl Reason {
    fn text(self) -> &'static str {
        match self {
            Reason::Planted => "planted secret",
            Reason::PlantedDir => "directory of planted secrets",
            Reason::WellKnown => "well-known credential path",
            Reason::DotEnv => ".env outside the working directory",
            Reason::System(what) => what,
        }
    }
}

struct Context {
    home: NormPath,
    cwd: NormPath,
    cwd_raw: Vec<u8>,
    /// Home and the folder of each planted secret outside home, as bytes (the outermost of
    /// them: see [`paths::outermost`]).
    roots: Vec<Vec<u8>>,
    /// Whether the working directory and every root are apart (neither inside the other):
    /// a relative path without `..` then stays in the working directory, away from every
    /// rule.
    cwd_apart: bool,
    planted: Vec<NormPath>,
    planted_dirs: Vec<NormPath>,
    /// [`WELL_KNOWN`], split once.
    well_known: Rules<'static, ()>,
    /// [`SYSTEM`], split once.
    system: Rules<'static, &'static str>,
    /// Home, the planted secrets and their credential directories, normalized, as bytes (for
    /// [`Context::may_apply`]); no home when it is `/` or empty (no home rule applies then).
    home_bytes: Option<Vec<u8>>,
    planted_bytes: Vec<Vec<u8>>,
    planted_dir_bytes: Vec<Vec<u8>>,
}

impl Context {
    fn new(manifest: &Manifest) -> Self {
        let sandbox = &manifest.sandbox;
        let home = NormPath::new(sandbox.home.as_bytes());
        let planted: Vec<NormPath> = sandbox
            .honeytokens
            .iter()
            .map(|h| NormPath::new(h.path.as_bytes()))
            .collect();
        let mut planted_dirs: Vec<NormPath> = Vec::new();
        for p in &planted {
            let Some(parent) = p.parent() else { continue };
            let in_credential_dir = paths::home_relative(&parent, &home)
                .is_some_and(|rel| PLANTED_DIRS.iter().any(|d| paths::matches(rel, d)));
            if in_credential_dir && !planted_dirs.contains(&parent) {
                planted_dirs.push(parent);
            }
        }
        let roots: Vec<Vec<u8>> = std::iter::once(sandbox.home.as_bytes().to_vec())
            .chain(
                planted
                    .iter()
                    .filter_map(|p| p.parent())
                    .map(|d| d.to_bytes().0),
            )
            .collect();
        let cwd = NormPath::new(sandbox.cwd.as_bytes());
        let cwd_apart = roots.iter().all(|r| {
            let r = NormPath::new(r);
            !cwd.starts_with(&r) && !r.starts_with(&cwd)
        });
        Context {
            cwd,
            cwd_raw: sandbox.cwd.as_bytes().to_vec(),
            roots: paths::outermost(&roots),
            cwd_apart,
            well_known: Rules::new(WELL_KNOWN.iter().map(|p| (*p, ()))),
            system: Rules::new(SYSTEM.iter().copied()),
            home_bytes: (!home.components().is_empty()).then(|| home.to_bytes().0),
            planted_bytes: planted.iter().map(|p| p.to_bytes().0).collect(),
            planted_dir_bytes: planted_dirs.iter().map(|d| d.to_bytes().0).collect(),
            home,
            planted,
            planted_dirs,
        }
    }

    /// Whether a rule may apply to `path`, an absolute path normalizing would leave as it is
    /// ([`paths::is_plain`]): a look at its bytes that spares most paths under home the
    /// normalizing and the patterns. `false` means [`Context::classify`] finds nothing.
    fn may_apply(&self, path: &[u8]) -> bool {
        let p = match path.strip_suffix(b"/") {
            Some(p) if !p.is_empty() => p,
            _ => path,
        };
        let under = |d: &[u8]| {
            d == b"/" || (p.starts_with(d) && matches!(p.get(d.len()), None | Some(b'/')))
        };
        if self.planted_bytes.iter().any(|x| x == p)
            || self.planted_dir_bytes.iter().any(|d| under(d))
        {
            return true;
        }
        let name = paths::basename(p);
        if name == b".env" || name.starts_with(b".env.") {
            return true;
        }
        let Some(home) = &self.home_bytes else {
            return false;
        };
        if !under(home) {
            return false;
        }
        let first = p[home.len()..]
            .split(|&b| b == b'/')
            .find(|c| !c.is_empty());
        self.well_known.may_start(first)
    }

    /// Whether [`Context::system`] may find something in `path`, an absolute path normalizing
    /// would leave as it is: a look at its first bytes that lets most paths outside home go
    /// unnormalized.
    fn may_be_system(&self, path: &[u8]) -> bool {
        let under_home = self
            .home_bytes
            .as_ref()
            .is_some_and(|h| path.starts_with(h) && matches!(path.get(h.len()), None | Some(b'/')));
        [
            &b"/etc/shadow"[..],
            b"/etc/gshadow",
            b"/etc/security/",
            b"/etc/ssh/",
            b"/var/log/",
            b"/root/",
        ]
        .iter()
        .any(|p| path.starts_with(p))
            || (path.starts_with(b"/home/") && !under_home)
            || (path.starts_with(b"/proc/")
                && (path.ends_with(b"/environ") || path.ends_with(b"/mem")))
    }

    /// Why opening the normalized path of components `path` by process `pid` (in the
    /// sandbox's pid namespace) reaches for a secret of the system or of another account, if
    /// it does: [`SYSTEM`]; a credential path ([`WELL_KNOWN`]) in another user's home or in
    /// root's (when the sandbox's home is another); another process's `environ` or `mem`
    /// under `/proc` (its own, or `self`, is not).
    fn system<C: AsRef<[u8]>>(&self, path: &[C], pid: i32) -> Option<Reason> {
        let comps: Vec<&[u8]> = path.iter().map(AsRef::as_ref).collect();
        if let Some(what) = self.system.first(&comps) {
            let name = comps.last().copied().unwrap_or_default();
            return (!name.ends_with(b".pub")).then_some(Reason::System(what));
        }
        let home = self.home.components();
        let other_home = match comps.as_slice() {
            [b"home", user, rest @ ..] if !rest.is_empty() => {
                let own =
                    home.len() == 2 && home[0].as_slice() == b"home" && home[1].as_slice() == *user;
                (!own).then_some((rest, "another user's credentials"))
            }
            [b"root", rest @ ..] if !rest.is_empty() => {
                let own = home.len() == 1 && home[0].as_slice() == b"root";
                (!own).then_some((rest, "root's credentials"))
            }
            _ => None,
        };
        if let Some((rest, what)) = other_home {
            return self.well_known.first(rest).map(|_| Reason::System(what));
        }
        match comps.as_slice() {
            [b"proc", n, file]
                if !n.is_empty()
                    && n.iter().all(u8::is_ascii_digit)
                    && *n != pid.to_string().as_bytes() =>
            {
                match *file {
                    b"environ" => Some(Reason::System("another process's environment")),
                    b"mem" => Some(Reason::System("another process's memory")),
                    _ => None,
                }
            }
            _ => None,
        }
    }

    /// Why the normalized path of components `path` counts: a rule of home ([`Self::classify`]),
    /// else, for an open by process `opener`, a secret of the system or of another account
    /// ([`Self::system`], the rarer question, asked only then).
    fn reason<C: AsRef<[u8]>>(&self, path: &[C], opener: Option<i32>) -> Option<Reason> {
        self.classify(path)
            .or_else(|| opener.and_then(|pid| self.system(path, pid)))
    }

    /// Why the normalized path of components `path` is a credential path, if it is.
    fn classify<C: AsRef<[u8]>>(&self, path: &[C]) -> Option<Reason> {
        if self
            .planted
            .iter()
            .any(|p| paths::same_components(path, p.components()))
        {
            return Some(Reason::Planted);
        }
        if self
            .planted_dirs
            .iter()
            .any(|d| paths::strip_components(path, d.components()).is_some())
        {
            return Some(Reason::PlantedDir);
        }
        let rel = paths::home_relative_components(path, self.home.components())?;
        if self.well_known.first(rel).is_some() {
            return Some(Reason::WellKnown);
        }
        let name = path.last()?.as_ref();
        let dotenv = name == b".env" || name.starts_with(b".env.");
        let cwd = self.cwd.components();
        let in_cwd = !cwd.is_empty() && paths::strip_components(path, cwd).is_some();
        if dotenv && !rel.is_empty() && !in_cwd {
            return Some(Reason::DotEnv);
        }
        None
    }
}

/// What was done to one path, accumulated over its events.
#[derive(Debug, Default)]
struct Access {
    reason: Option<Reason>,
    read: bool,
    write: bool,
    list: bool,
    stat: bool,
    opens: usize,
    failed_opens: usize,
    /// Reported by the kernel (the honeytoken ground truth), whatever path was passed.
    kernel: bool,
}

impl Access {
    /// A planted secret read (an open that succeeded, or the kernel's report of a read).
    fn read_planted(&self) -> bool {
        self.read && self.failed_opens < self.opens && matches!(self.reason, Some(Reason::Planted))
    }

    fn verbs(&self) -> String {
        let mut v = Vec::new();
        if self.read {
            v.push("read");
        }
        if self.write {
            v.push("write");
        }
        if self.list {
            v.push("list");
        }
        if self.stat {
            v.push("stat of");
        }
        v.join(" + ")
    }
}

/// Most kernel reports held until the end.
const MAX_KERNEL: usize = 10_000;

/// The check's state over one run.
pub(crate) struct State {
    ctx: Context,
    groups: Groups<NormPath, Access>,
    named: crate::named::Named,
    /// Accesses during a call whose input named the path, with the argument that did.
    by_input: Groups<NormPath, String>,
    /// The kernel's reports of planted files, judged at the end (see the module doc), at most
    /// [`MAX_KERNEL`]; past it they are judged as they come.
    kernel: Vec<(NormPath, Reason, Event)>,
}

pub(crate) fn start(c: &crate::Context<'_>) -> Box<dyn Evaluator> {
    Box::new(State {
        ctx: Context::new(c.manifest),
        groups: Groups::new(),
        named: crate::named::Named::of(c.manifest),
        by_input: Groups::new(),
        kernel: Vec::new(),
    })
}

impl State {
    fn see(&mut self, e: &Event) {
        let path = match &e.kind {
            EventKind::Open { path, .. } | EventKind::Stat { path, .. } => path,
            EventKind::Honeytoken { path, access, .. } if access != "overflow" => path,
            _ => return,
        };
        // Every rule is about paths under home or planted secrets: a plain path outside both
        // needs no normalizing, nor does a relative one that stays in a working directory
        // apart from both.
        let raw = path.as_slice();
        // Secrets of the system or of another account: what opens reach for (a stat is not a
        // read), judged by [`Context::system`].
        let (pid, opened) = (e.pid, matches!(e.kind, EventKind::Open { .. }));
        if raw.first() == Some(&b'/') {
            let maybe_system = opened && self.ctx.may_be_system(raw);
            if !maybe_system
                && (paths::plainly_outside_all(raw, &self.ctx.roots)
                    || (paths::is_plain(raw) && !self.ctx.may_apply(raw)))
            {
                return;
            }
        } else if self.ctx.cwd_apart && !raw.split(|&b| b == b'/').any(|s| s == b"..") {
            return;
        }
        // Judged on a view of the path; copied only when it counts.
        let (reason, norm) = match View::resolve(path.as_slice(), &self.ctx.cwd_raw) {
            Some(view) => {
                let comps = view.components();
                match self.ctx.reason(comps, opened.then_some(pid)) {
                    Some(reason) => (reason, view.to_norm()),
                    None => return,
                }
            }
            None => {
                let norm = NormPath::resolve(path.as_slice(), &self.ctx.cwd_raw);
                let comps = norm.components();
                match self.ctx.reason(comps, opened.then_some(pid)) {
                    Some(reason) => (reason, norm),
                    None => return,
                }
            }
        };
        // A stat or a failed open reads nothing: looking beside a folder on the way to what
        // the input named counts as that call's too (git's search for `.git`).
        let looks_only = match &e.kind {
            EventKind::Stat { .. } => true,
            EventKind::Open { result, .. } => result.is_some_and(|r| r < 0),
            _ => false,
        };
        let named = if looks_only {
            self.named
                .looked_around(&e.phase, e.t_ns, norm.components())
        } else {
            self.named.named(&e.phase, e.t_ns, norm.components())
        };
        if let Some(arg) = named {
            let arg = arg.to_string();
            if let Some(seen) = self.by_input.add(norm, e.id, &e.phase) {
                *seen = arg;
            }
            return;
        }
        if matches!(e.kind, EventKind::Honeytoken { .. }) && self.kernel.len() < MAX_KERNEL {
            self.kernel.push((norm, reason, e.clone()));
            return;
        }
        self.count(norm, reason, e);
    }

    fn count(&mut self, norm: NormPath, reason: Reason, e: &Event) {
        let Some(acc) = self.groups.add(norm, e.id, &e.phase) else {
            return;
        };
        acc.reason = Some(reason);
        match &e.kind {
            EventKind::Open {
                syscall,
                flags,
                result,
                ..
            } => {
                if flags::has_write_intent(syscall, *flags) {
                    acc.write = true;
                } else if flags::is_directory(*flags) {
                    acc.list = true;
                } else {
                    acc.read = true;
                }
                acc.opens += 1;
                if result.is_some_and(|r| r < 0) {
                    acc.failed_opens += 1;
                }
            }
            // The kernel saw the planted file (or its folder) opened or read: a read whatever
            // path the recorder was shown.
            EventKind::Honeytoken { access, dir, .. } => {
                acc.kernel = true;
                if *dir {
                    acc.list = true;
                } else if access != "close-nowrite" {
                    acc.read = true;
                    acc.opens += 1;
                }
            }
            _ => acc.stat = true,
        }
    }

    /// The kernel's reports held back: the same access as one by a call whose input named
    /// the path, or the server's own.
    fn judge_kernel(&mut self) {
        for (norm, reason, e) in std::mem::take(&mut self.kernel) {
            if self.by_input.items.iter().any(|g| g.key == norm) {
                let _ = self.by_input.add(norm, e.id, &e.phase);
            } else {
                self.count(norm, reason, &e);
            }
        }
    }
}

impl Evaluator for State {
    fn event(&mut self, e: &Event) {
        self.see(e);
    }

    fn finish_with(mut self: Box<Self>, c: &crate::Context<'_>) -> Evaluation {
        self.judge_kernel();
        let State {
            ctx,
            groups,
            by_input,
            ..
        } = *self;
        let notes = by_input
            .items
            .into_iter()
            .map(|g| {
                let summary = format!(
                    "{} was accessed during {}, whose {} named it: the tool did what its input \
                     asked (listed by input-exposure as what it can be made to reach)",
                    paths::display(&g.key, &ctx.home),
                    text::phases(&g.phases),
                    crate::named::argument(&g.data),
                );
                INFO.finding(summary, g.ids, g.phases.first().cloned())
            })
            .collect();
        let mut notes: Vec<_> = notes;
        let asked = groups.items.iter().any(|g| g.data.read_planted());
        let fate = Fate::new(c, asked);
        let overflow = groups.overflow;
        let mut caches: Vec<CacheUse> = vec![CacheUse::default(); OWN_CACHES.len()];
        let mut findings: Vec<_> = groups
            .items
            .into_iter()
            .filter_map(|g| {
                let cache = (g.data.reason == Some(Reason::PlantedDir))
                    .then(|| paths::home_relative(&g.key, &ctx.home))
                    .flatten()
                    .and_then(|rel| {
                        OWN_CACHES.iter().position(|(p, _)| {
                            paths::matches(rel, p) || paths::matches(rel, &format!("{p}/**"))
                        })
                    });
                if let Some(i) = cache {
                    let c = &mut caches[i];
                    c.0 += 1;
                    for v in g.data.verbs().split(" + ") {
                        if !c.1.iter().any(|x| x == v) {
                            c.1.push(v.to_string());
                        }
                    }
                    crate::net::add_ids(&mut c.2, &g.ids);
                    for p in g.phases {
                        if !c.3.contains(&p) {
                            c.3.push(p);
                        }
                    }
                    return None;
                }
                let default = (g.data.reason == Some(Reason::WellKnown))
                    .then(|| paths::home_relative(&g.key, &ctx.home))
                    .flatten()
                    .and_then(|rel| DEFAULT_LOOKUPS.iter().find(|(p, _)| paths::matches(rel, p)));
                if let Some((_, who)) = default {
                    notes.push(INFO.finding(
                        format!(
                            "{} {} during {}: {who}; it is not planted",
                            g.data.verbs(),
                            paths::display(&g.key, &ctx.home),
                            text::phases(&g.phases),
                        ),
                        g.ids,
                        g.phases.first().cloned(),
                    ));
                    return None;
                }
                Some(g)
            })
            .map(|g| {
                let acc = &g.data;
                let reason = acc.reason.map_or("", Reason::text);
                let failed = if acc.opens > 0 && acc.failed_opens == acc.opens {
                    ", every open failed"
                } else if acc.kernel {
                    ", seen by the kernel"
                } else {
                    ""
                };
                let summary = format!(
                    "{} {} ({reason}{failed}) during {}",
                    acc.verbs(),
                    paths::display(&g.key, &ctx.home),
                    text::phases(&g.phases),
                );
                // Reading a planted secret may be credential theft ([`Fate`]); a stat or a
                // failed attempt is a probe, reported without accusing.
                let (fate, accusation) = match acc.read_planted() {
                    true => fate.of(&g.key),
                    false => (String::new(), false),
                };
                let mut f = INFO.finding(summary + &fate, g.ids, g.phases.first().cloned());
                f.accusation = accusation;
                f
            })
            .collect();
        for ((folder, whose), (n, verbs, mut ids, phases)) in OWN_CACHES.iter().zip(caches) {
            if n == 0 {
                continue;
            }
            ids.sort_unstable();
            notes.push(INFO.finding(
                format!(
                    "{} under ~/{folder} ({}) during {}: {whose}; nothing there is planted",
                    crate::net::count(n, "path", "paths"),
                    verbs.join(", "),
                    text::phases(&phases),
                ),
                ids,
                phases.first().cloned(),
            ));
        }
        if overflow > 0 {
            findings.push(INFO.finding(
                format!("{overflow} more accesses to further credential paths (not listed)"),
                Vec::new(),
                None,
            ));
        }
        Evaluation { findings, notes }
    }
}

#[cfg(test)]
pub(crate) fn evaluate(ev: &glassbox_model::Evidence) -> Evaluation {
    crate::evaluate_one(start, ev)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flags::{O_CREAT, O_DIRECTORY, O_WRONLY};
    use crate::testutil::{Ev, F};
    use glassbox_model::{Bytes, Phase};

    fn summaries(ev: &glassbox_model::Evidence) -> Vec<String> {
        crate::testutil::summaries(evaluate(ev))
    }

    fn flagged(path: &[u8]) -> bool {
        let ev = Ev::new().open(path, 0, Phase::Startup).build();
        !evaluate(&ev).findings.is_empty()
    }

    fn call(t: &str) -> Phase {
        Phase::Call(t.into())
    }

    /// Issue 33: an open of a secret of the system or of another account is a finding
    /// (a failed one too: nothing of the host's is in the sandbox), never an accusation; a
    /// stat of one, a public host key, the process's own `environ` and a runtime's own reads
    /// (`/etc/passwd` through NSS, `/proc/cpuinfo`, `/etc/hosts`) are not.
    #[test]
    fn opens_of_the_system_s_and_other_accounts_secrets_are_findings() {
        let fails = Some(-13);
        let ev = Ev::new()
            .open_result("/etc/shadow", 0, fails, call("t"))
            .open("/etc/ssh/ssh_host_ed25519_key", 0, call("t"))
            .open_result("/var/log/auth.log.1", 0, Some(-2), call("t"))
            .open_result("/home/ops-backup/.ssh/id_rsa", 0, Some(-2), call("t"))
            .open_result("/root/.aws/credentials", 0, Some(-2), call("t"))
            .open_result("/etc/../etc/gshadow", 0, fails, call("t"))
            .open("/proc/1/environ", 0, call("t"))
            .open("/home/user/.bash_history", 0, call("t"))
            // Not findings:
            .stat("/etc/shadow-", call("t"))
            .open("/etc/ssh/ssh_host_ed25519_key.pub", 0, call("t"))
            .open("/proc/2/environ", 0, call("t"))
            .open("/proc/self/environ", 0, call("t"))
            .open("/proc/1/cmdline", 0, call("t"))
            .open("/etc/passwd", 0, call("t"))
            .open("/etc/hosts", 0, call("t"))
            .open("/proc/cpuinfo", 0, call("t"))
            .open_result("/root/.cache/x", 0, Some(-2), call("t"))
            .open_result("/home/ops-backup/notes.txt", 0, Some(-2), call("t"))
            .build();
        let eval = evaluate(&ev);
        let got = crate::testutil::summaries(eval.clone());
        let want = [
            "/etc/shadow (the system's password hashes, every open failed)",
            "/etc/ssh/ssh_host_ed25519_key (an SSH host's private key)",
            "/var/log/auth.log.1 (the authentication log, every open failed)",
            "/home/ops-backup/.ssh/id_rsa (another user's credentials, every open failed)",
            "/root/.aws/credentials (root's credentials, every open failed)",
            "/etc/gshadow (the groups' password hashes, every open failed)",
            "/proc/1/environ (another process's environment)",
            "~/.bash_history (well-known credential path)",
        ];
        for w in want {
            assert!(got.iter().any(|g| g.contains(w)), "{w}: {got:#?}");
        }
        assert_eq!(got.len(), want.len(), "{got:#?}");
        assert!(eval.findings.iter().all(|f| !f.accusation));
        // Root's home is the sandbox's own: its credentials are the well-known ones.
        let own = Ev::new()
            .home("/root")
            .open_result("/root/.aws/credentials", 0, Some(-2), call("t"))
            .build();
        let got = summaries(&own);
        assert!(
            got.len() == 1 && got[0].contains("~/.aws/credentials (well-known"),
            "{got:?}"
        );
    }

    #[test]
    fn a_planted_secret_the_input_named_is_a_note_and_anywhere_else_an_accusation() {
        let ev = Ev::new()
            .honeytoken("/home/user/.aws/credentials")
            .call(
                "read_file",
                2,
                serde_json::json!({"path": "/home/user/.aws/credentials"}),
            )
            .open(
                "/home/user/.aws/credentials",
                0,
                Phase::call("read_file", 2),
            )
            .build();
        let e = evaluate(&ev);
        assert!(e.findings.is_empty(), "{e:?}");
        assert_eq!(e.notes.len(), 1);
        assert!(
            e.notes[0].summary.starts_with(
                "~/.aws/credentials was accessed during call:read_file#2, whose argument `path` named it"
            ),
            "{}",
            e.notes[0].summary
        );
        // Read again in a call that did not name it (or at startup): the server's own doing.
        let ev = Ev::new()
            .honeytoken("/home/user/.aws/credentials")
            .call(
                "read_file",
                2,
                serde_json::json!({"path": "/home/user/.aws/credentials"}),
            )
            .open(
                "/home/user/.aws/credentials",
                0,
                Phase::call("read_file", 2),
            )
            .open(
                "/home/user/.aws/credentials",
                0,
                Phase::call("read_file", 1),
            )
            .flow(F::tcp("198.18.1.3:443").sni("t.example").unread("pinned"))
            .build();
        let e = evaluate(&ev);
        assert_eq!(e.findings.len(), 1, "{e:?}");
        assert!(e.findings[0].accusation);
        assert!(
            e.findings[0].summary.contains("during call:read_file"),
            "{e:?}"
        );
        // The kernel's report of the named read comes later, in a later phase: the same
        // access. Realpath's stat of the folder on the way: named too.
        let kernel = glassbox_model::EventKind::Honeytoken {
            path: Bytes::from("/home/user/.aws/credentials"),
            access: "read".into(),
            dir: false,
        };
        let ev = Ev::new()
            .honeytoken("/home/user/.aws/credentials")
            .call(
                "read_file",
                2,
                serde_json::json!({"path": "/home/user/.aws/credentials"}),
            )
            .stat("/home/user/.aws", Phase::call("read_file", 2))
            .open(
                "/home/user/.aws/credentials",
                0,
                Phase::call("read_file", 2),
            )
            .event(9, Phase::Shutdown, kernel.clone())
            .build();
        let e = evaluate(&ev);
        assert!(e.findings.is_empty(), "{e:?}");
        // Without the named open, the kernel's report is the server's own read.
        let ev = Ev::new()
            .honeytoken("/home/user/.aws/credentials")
            .call(
                "read_file",
                2,
                serde_json::json!({"path": "/home/user/notes.txt"}),
            )
            .event(9, Phase::Shutdown, kernel)
            .flow(F::tcp("198.18.1.3:443").sni("t.example").unread("pinned"))
            .build();
        assert!(evaluate(&ev).findings[0].accusation);
    }

    #[test]
    fn a_kernel_reported_read_accuses_even_without_a_recorded_open() {
        let ev = Ev::new()
            .honeytoken("/home/user/.ssh/id_rsa")
            .event(
                7,
                Phase::Call("t".into()),
                glassbox_model::EventKind::Honeytoken {
                    path: Bytes::from("/home/user/.ssh/id_rsa"),
                    access: "read".into(),
                    dir: false,
                },
            )
            .build();
        let eval = evaluate(&ev);
        assert_eq!(eval.findings.len(), 1);
        assert_eq!(
            eval.findings[0].summary,
            "read ~/.ssh/id_rsa (planted secret, seen by the kernel) during call:t; its value \
             never left: nothing the edge read carried it, nor any answer to the client"
        );
        // Read, and nothing shows it stayed: the read is not proven theft.
        assert!(!eval.findings[0].accusation);
    }

    #[test]
    fn a_planted_read_accuses_when_its_value_left_came_back_or_may_have_gone_unread() {
        const KEY: &str = "wJalrXUtnFEMIK7MDENGbPxRfiCYzEXAMPLEKEY1";
        let base = || {
            Ev::new()
                .honeytoken_secrets("/home/user/.aws/credentials", "aws-credentials", &[KEY])
                .open("/home/user/.aws/credentials", 0, call("sync"))
        };
        let judged = |ev: Ev| {
            let e = evaluate(&ev.build());
            assert_eq!(e.findings.len(), 1, "{e:#?}");
            (e.findings[0].summary.clone(), e.findings[0].accusation)
        };
        // Sent elsewhere.
        let (s, accused) = judged(
            base().flow(
                F::tcp("198.18.1.3:80")
                    .name("collect.example")
                    .sample(format!("POST / HTTP/1.1\r\n\r\n{KEY}").into_bytes()),
            ),
        );
        assert!(
            accused && s.contains("its value left for TCP to 198.18.1.3:80"),
            "{s}"
        );
        // Given back to the client in a tool's answer.
        let (s, accused) = judged(base().answer(
            call("sync"),
            &format!(r#"{{"jsonrpc":"2.0","id":3,"result":{{"content":[{{"type":"text","text":"{KEY}"}}]}}}}"#),
        ));
        assert!(
            accused && s.contains("came back to the client in the answer to call:sync"),
            "{s}"
        );
        // A flow the edge could not read: unknown.
        let (s, accused) =
            judged(base().flow(F::tcp("198.18.1.4:443").sni("t.example").unread("pinned")));
        assert!(
            accused && s.contains("where its value went is not known: 1 flow could not be read"),
            "{s}"
        );
        // A TLS client that sent its ClientHello and nothing after (issue 34: npm's own read
        // of ~/.npmrc, its registry's connection cut there): nothing unread, no accusation.
        let hello = crate::testutil::client_hello(200, 16384);
        let (s, accused) = judged(
            base().flow(
                F::tcp("198.18.1.6:443")
                    .sni("registry.example")
                    .tls_refused("the TLS handshake did not complete")
                    .sample(hello.clone()),
            ),
        );
        assert!(!accused && s.contains("its value never left"), "{s}");
        // One the edge answered, then closed by its client (Node's pinned client): it may
        // have refused the certificate, what it would have sent is not known.
        let mut answered = F::tcp("198.18.1.6:443")
            .sni("registry.example")
            .tls_refused("the client closed the connection during the handshake")
            .sample(crate::testutil::client_hello(200, 16384));
        answered.0.bytes_in = 1176;
        let (s, accused) = judged(base().flow(answered));
        assert!(accused && s.contains("1 flow could not be read"), "{s}");
        // An unread flow to the secret's own service: at worst its use there, no accusation.
        let (s, accused) = judged(
            base().service("AWS", &["amazonaws.com"]).flow(
                F::tcp("198.18.1.7:443")
                    .sni("sts.us-east-1.amazonaws.com")
                    .unread("pinned"),
            ),
        );
        assert!(
            !accused
                && s.ends_with(
                    "; 1 flow to its own service (AWS, sts.us-east-1.amazonaws.com) could not be \
                     read: at worst, its use there"
                ),
            "{s}"
        );
        // ... but one elsewhere beside it still makes the fate unknown.
        let (s, accused) = judged(
            base()
                .service("AWS", &["amazonaws.com"])
                .flow(
                    F::tcp("198.18.1.7:443")
                        .sni("sts.amazonaws.com")
                        .unread("pinned"),
                )
                .flow(
                    F::tcp("198.18.1.8:443")
                        .sni("collect.example")
                        .unread("pinned"),
                ),
        );
        assert!(accused && s.contains("1 flow could not be read"), "{s}");
        // One that answered the edge's certificate (an alert: a pinned client) sent more.
        let mut alert = hello;
        alert.extend([0x15, 3, 3, 0, 2, 2, 48]);
        let (s, accused) = judged(
            base().flow(
                F::tcp("198.18.1.6:443")
                    .sni("registry.example")
                    .tls_refused("the client refused glassbox's certificate")
                    .sample(alert),
            ),
        );
        assert!(accused && s.contains("1 flow could not be read"), "{s}");
        // Nothing carried it, everything was read: a finding that says so, no accusation.
        let (s, accused) =
            judged(base().flow(F::tcp("198.18.1.5:80").sample(&b"GET / HTTP/1.1\r\n\r\n"[..])));
        assert!(!accused && s.ends_with("its value never left: nothing the edge read carried it, nor any answer to the client"), "{s}");
    }

    #[test]
    fn planted_secret_read_is_one_finding_per_path() {
        let ev = Ev::new()
            .honeytoken("/home/user/.ssh/id_rsa")
            .open("/home/user/.ssh/id_rsa", 0, call("get_weather"))
            .open("/home/user/.ssh/id_rsa", 0, call("get_weather"))
            .stat("/home/user/.ssh/id_rsa", Phase::Startup)
            .build();
        let f = evaluate(&ev).findings;
        assert_eq!(f.len(), 1);
        assert_eq!(f[0].evidence, vec![1, 2, 3]);
        assert_eq!(f[0].phase, Some(call("get_weather")));
        assert_eq!(
            f[0].summary,
            "read + stat of ~/.ssh/id_rsa (planted secret) during call:get_weather, startup; its value never left: nothing the edge read carried it, nor any answer to the client"
        );
    }

    #[test]
    fn a_lookup_libraries_make_by_default_is_a_note() {
        let ev = Ev::new()
            .stat("/home/user/.netrc", call("fetch"))
            .open_result("/home/user/.netrc", 0, Some(-2), call("fetch"))
            .build();
        let e = evaluate(&ev);
        assert!(e.findings.is_empty(), "{e:#?}");
        assert_eq!(
            e.notes[0].summary,
            "read + stat of ~/.netrc during call:fetch: HTTP libraries look it up by default on \
             every request (Python requests, curl's --netrc-optional, libcurl bindings); it is \
             not planted"
        );
    }

    #[test]
    fn read_write_stat_and_list_are_distinguished() {
        let ev = Ev::new()
            .open("/home/user/.pgpass", 0, Phase::Startup)
            .open("/home/user/.npmrc", O_WRONLY | O_CREAT, Phase::Startup)
            .stat("/home/user/.gnupg", Phase::Startup)
            .open("/home/user/.ssh", O_DIRECTORY, Phase::List)
            .build();
        assert_eq!(
            summaries(&ev),
            vec![
                "read ~/.pgpass (well-known credential path) during startup",
                "write ~/.npmrc (well-known credential path) during startup",
                "stat of ~/.gnupg (well-known credential path) during startup",
                "list ~/.ssh (well-known credential path) during list",
            ]
        );
    }

    #[test]
    fn failed_attempts_count_and_say_so() {
        let ev = Ev::new()
            .open_result("/home/user/.vault-token", 0, Some(-2), Phase::Startup)
            .build();
        assert_eq!(
            summaries(&ev),
            vec!["read ~/.vault-token (well-known credential path, every open failed) during startup"]
        );
    }

    #[test]
    fn well_known_paths_match_even_when_nothing_is_planted() {
        for p in [
            "/home/user/.ssh",
            "/home/user/.ssh/known_hosts",
            "/home/user/.aws/credentials",
            "/home/user/.aws/config",
            "/home/user/.gnupg/private-keys-v1.d/x.key",
            "/home/user/.pgpass",
            "/home/user/.pgpass",
            "/home/user/.git-credentials",
            "/home/user/.npmrc",
            "/home/user/.pypirc",
            "/home/user/.docker/config.json",
            "/home/user/.kube/config",
            "/home/user/.config/gh/hosts.yml",
            "/home/user/.config/gcloud/application_default_credentials.json",
            "/home/user/.azure/accessTokens.json",
            "/home/user/.config/hub",
            "/home/user/.cargo/credentials",
            "/home/user/.cargo/credentials.toml",
            "/home/user/.gem/credentials",
            "/home/user/.vault-token",
            "/home/user/.terraform.d/credentials.tfrc.json",
            "/home/user/.password-store/email.gpg",
            "/home/user/.bitcoin/wallet.dat",
            "/home/user/.ethereum/keystore/UTC--x",
            "/home/user/.config/solana/id.json",
            "/home/user/.mozilla/firefox/abc.default/logins.json",
            "/home/user/.config/google-chrome/Default/Login Data",
            "/home/user/.config/chromium/Default/Cookies",
        ] {
            assert!(flagged(p.as_bytes()), "{p} should be flagged");
        }
    }

    #[test]
    fn look_alikes_do_not_match() {
        for p in [
            "/home/user/.sshfoo",
            "/home/user/.ssh-backup/id_rsa",
            "/home/user/notes/aws-credentials.md",
            "/home/user/.config/gh-tools/x",
            "/home/user/.config/ghost",
            "/home/user/.docker/cli-plugins/buildx",
            "/home/user/.kube/cache/discovery",
            "/home/user/.cargo/registry/index",
            "/home/user/.cargo/config.toml",
            "/home/user/.npmrc.bak/x",
            "/home/user/.pgpass/x",
            "/home/user/project/.ssh/id_rsa.pub.md",
            "/home/user",
            "/home/user/.config",
            "/etc/ssh/ssh_config",
            "/usr/lib/node_modules/npm/.npmrc",
            "/home/user/.envrc",
            "/home/user/other/.environment",
            "/home/user/other/.env/x",
        ] {
            assert!(!flagged(p.as_bytes()), "{p} should not be flagged");
        }
        // Another account's credentials are (issue 33), as such, not as the user's own.
        for p in [
            "/root/.pgpass",
            "/home/other/.ssh/id_rsa",
            "/home/userx/.ssh/id_rsa",
        ] {
            let got = summaries(&Ev::new().open(p, 0, Phase::Startup).build());
            assert!(
                got.len() == 1 && got[0].contains("'s credentials)"),
                "{p}: {got:?}"
            );
        }
    }

    #[test]
    fn paths_are_normalized_before_matching() {
        assert!(flagged(b"/home/user/project/../.ssh//./id_rsa"));
        assert!(flagged(b"/home/user/.ssh/"));
        assert!(flagged(b"/tmp/../home/user/.aws/credentials"));
        // Relative (the recorder should not produce these): resolved against the cwd.
        assert!(flagged(b"../.aws/credentials"));
        // `..` out of the credential directory leaves it.
        assert!(!flagged(b"/home/user/.ssh/../notes.txt"));
        let ev = Ev::new()
            .open("/home/user/x/../.ssh/id_rsa", 0, Phase::Startup)
            .open("/home/user/.ssh/id_rsa", 0, Phase::Startup)
            .build();
        let f = evaluate(&ev).findings;
        assert_eq!(f.len(), 1, "same path after normalization is one finding");
        assert_eq!(f[0].evidence, vec![1, 2]);
    }

    /// The look at bytes that spares paths the normalizing never turns a path a rule applies
    /// to away.
    #[test]
    fn the_byte_prefilter_passes_every_path_a_rule_applies_to() {
        let mut paths: Vec<String> = Vec::new();
        for home in ["/home/user", "/home/user/"] {
            let home = home.trim_end_matches('/');
            for rule in WELL_KNOWN.iter().chain(PLANTED_DIRS) {
                let concrete = rule.replace("**", "x").replace('*', "y");
                paths.push(format!("{home}/{concrete}"));
                paths.push(format!("{home}/{concrete}/"));
                paths.push(format!("{home}/{concrete}/deeper/file"));
            }
            for p in [
                "",
                "/",
                "/.env",
                "/.env.local",
                "/.envrc",
                "/a/.env",
                "/project/.env",
                "/.cache/x",
                "/.config",
                "/.config/app/x",
                "/.configx/gh",
                "/.ssh",
                "/.sshx/id",
                "/.aws/credentials",
                "/x/.ssh/id_rsa",
            ] {
                paths.push(format!("{home}{p}"));
            }
        }
        for p in [
            "/",
            "/srv/keys/id_rsa",
            "/srv/keys/other",
            "/srv/keys",
            "/srv/keysx",
            "/srv",
            "/etc/.env",
            "/usr/lib/x.so",
            "/home",
            "/home/userx/.ssh/id_rsa",
        ] {
            paths.push(p.to_string());
        }
        let manifests = [
            (
                "/home/user",
                vec!["/home/user/.ssh/id_rsa", "/srv/keys/id_rsa"],
            ),
            ("/home/user/", vec!["/home/user/.aws/credentials"]),
            ("/", vec!["/home/user/.ssh/id_rsa"]),
            ("", vec![]),
            (
                "/home/user",
                vec!["/.ssh/id_rsa", "/home/user/project/.env"],
            ),
        ];
        let mut checked = 0;
        for (home, planted) in &manifests {
            let mut ev = Ev::new().home(home);
            for p in planted {
                ev = ev.honeytoken(p);
            }
            let ctx = Context::new(&ev.build().manifest);
            for p in &paths {
                let raw = p.as_bytes();
                if !raw.starts_with(b"/") || !paths::is_plain(raw) {
                    continue;
                }
                let norm = NormPath::new(raw);
                if ctx.classify(norm.components()).is_some() {
                    assert!(ctx.may_apply(raw), "{p} under home {home:?}");
                    checked += 1;
                }
            }
        }
        assert!(checked > 100, "{checked}");
    }

    /// Relative paths (resolved against the working directory) in every relation of the
    /// working directory to home: apart, inside, above.
    #[test]
    fn relative_paths_are_judged_where_they_resolve() {
        let flagged_in = |cwd: &str, path: &[u8]| {
            let mut ev = Ev::new()
                .honeytoken("/srv/keys/id_rsa")
                .open(path, 0, Phase::Startup)
                .build();
            ev.manifest.sandbox.cwd = cwd.into();
            !evaluate(&ev).findings.is_empty()
        };
        // Apart from home: what stays in it is never a credential path, `..` may leave it.
        assert!(!flagged_in("/work/app", b".ssh/id_rsa"));
        assert!(!flagged_in("/work/app", b"./src/.env"));
        assert!(flagged_in("/work/app", b"../../home/user/.ssh/id_rsa"));
        assert!(flagged_in("/work/app", b"./x/../../../srv/keys/id_rsa"));
        assert!(flagged_in("/work/app", b"../../home/user/other/.env"));
        // Inside home: a `.env` of its own is not counted, home's credentials are.
        assert!(!flagged_in("/home/user/project", b".env"));
        assert!(flagged_in("/home/user/project", b"../.pgpass"));
        // Above home (or a planted folder): no `..` needed to reach them.
        assert!(flagged_in("/home", b"user/.aws/credentials"));
        assert!(flagged_in("/", b"home/user/.ssh/id_rsa"));
        assert!(flagged_in("/srv", b"keys/id_rsa"));
        // The working directory inside a planted folder.
        assert!(flagged_in("/srv/keys", b"id_rsa"));
    }

    #[test]
    fn non_utf8_paths_compare_as_bytes_and_display_escaped() {
        assert!(flagged(b"/home/user/.ssh/\xff\xfe"));
        assert!(!flagged(b"/home/user/.ss\xffh/id_rsa"));
        let ev = Ev::new()
            .open(
                Bytes(b"/home/user/.aws/\x1b[2J\xff".to_vec()),
                0,
                Phase::Startup,
            )
            .build();
        let s = &summaries(&ev)[0];
        assert!(!s.contains('\x1b'), "{s}");
        assert!(s.contains("~/.aws/\\u{1b}[2J\u{fffd}"), "{s}");
    }

    #[test]
    fn honeytoken_directory_counts_but_only_for_credential_directories() {
        let ev = Ev::new()
            .honeytoken("/home/user/.docker/config.json")
            .honeytoken("/home/user/other-project/.env")
            .open("/home/user/.docker/contexts/meta", 0, Phase::Startup)
            .open("/home/user/other-project/README.md", 0, Phase::Startup)
            .open("/home/user/other-project/.env", 0, Phase::Startup)
            .build();
        assert_eq!(
            summaries(&ev),
            vec![
                "read ~/.docker/contexts/meta (directory of planted secrets) during startup",
                "read ~/other-project/.env (planted secret) during startup; its value never left: nothing the edge read carried it, nor any answer to the client",
            ]
        );
    }

    #[test]
    fn planted_secret_outside_home_still_counts() {
        let ev = Ev::new()
            .honeytoken("/run/secrets/token")
            .open("/run/secrets/token", 0, Phase::Startup)
            .open("/run/secrets/other", 0, Phase::Startup)
            .build();
        assert_eq!(
            summaries(&ev),
            vec!["read /run/secrets/token (planted secret) during startup; its value never left: nothing the edge read carried it, nor any answer to the client"]
        );
    }

    #[test]
    fn dotenv_outside_the_working_directory_only() {
        let ev = Ev::new()
            .open("/home/user/project/.env", 0, Phase::Startup)
            .open("/home/user/project/sub/.env.local", 0, Phase::Startup)
            .stat("/home/user/other/.env", Phase::Startup)
            .open("/home/user/other/.env.production", 0, Phase::Startup)
            .open("/home/user/.env", 0, Phase::Startup)
            .open("/tmp/.env", 0, Phase::Startup)
            .build();
        assert_eq!(
            summaries(&ev),
            vec![
                "stat of ~/other/.env (.env outside the working directory) during startup",
                "read ~/other/.env.production (.env outside the working directory) during startup",
                "read ~/.env (.env outside the working directory) during startup",
            ]
        );
    }

    #[test]
    fn execs_and_connects_do_not_count() {
        let ev = Ev::new()
            .exec(
                3,
                "/usr/bin/cat",
                &["cat", "/home/user/.ssh/id_rsa"],
                Phase::Startup,
            )
            .exec(4, "/home/user/.ssh/evil", &["evil"], Phase::Startup)
            .build();
        assert!(evaluate(&ev).findings.is_empty());
    }

    #[test]
    fn other_home_directories() {
        let ev = Ev::new()
            .home("/root/")
            .open("/root/.ssh/id_ed25519", 0, Phase::Startup)
            .open("/home/user/.ssh/id_ed25519", 0, Phase::Startup)
            .build();
        assert_eq!(
            summaries(&ev),
            vec![
                "read ~/.ssh/id_ed25519 (well-known credential path) during startup",
                "read /home/user/.ssh/id_ed25519 (another user's credentials) during startup"
            ]
        );
        assert_eq!(evaluate(&ev).findings[0].evidence, vec![1]);
    }

    #[test]
    fn hostile_tool_names_in_phases_are_escaped() {
        let ev = Ev::new()
            .open(
                "/home/user/.pgpass",
                0,
                Phase::Call("x\x1b]0;pwned\x07".into()),
            )
            .build();
        let s = &summaries(&ev)[0];
        assert!(!s.contains('\x1b') && !s.contains('\x07'), "{s}");
    }

    #[test]
    fn kubectls_own_cache_in_the_kube_folder_is_one_note() {
        let ev = Ev::new()
            .home("/home/u")
            .honeytoken("/home/u/.kube/config")
            .open("/home/u/.kube/config", 0, Phase::Call("kubectl_get".into()))
            .open(
                "/home/u/.kube/cache/http/.diskv-temp/123",
                O_CREAT | O_WRONLY,
                Phase::Call("kubectl_get".into()),
            )
            .open(
                "/home/u/.kube/cache/discovery/c.test_6443/servergroups.json",
                0,
                Phase::Call("kubectl_get".into()),
            )
            .stat("/home/u/.kube/cache", Phase::Call("kubectl_get".into()))
            .open("/home/u/.kube/other", 0, Phase::Call("kubectl_get".into()))
            .build();
        let e = evaluate(&ev);
        let flagged: Vec<&str> = e.findings.iter().map(|f| f.summary.as_str()).collect();
        assert_eq!(flagged.len(), 2, "{flagged:?}");
        assert!(flagged.iter().any(|s| s.contains("~/.kube/config")));
        assert!(flagged.iter().any(|s| s.contains("~/.kube/other")));
        let cache: Vec<&str> = e
            .notes
            .iter()
            .map(|f| f.summary.as_str())
            .filter(|s| s.contains("~/.kube/cache"))
            .collect();
        assert_eq!(
            cache,
            ["3 paths under ~/.kube/cache (write, read, stat of) during call:kubectl_get: kubectl's own cache (the cluster's API discovery and HTTP responses); nothing there is planted"]
        );
    }
}
