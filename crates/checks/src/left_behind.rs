//! `left-behind`: where the server wrote, and what it left.
//!
//! Two sources, judged together:
//!
//! - **Writes outside its own places** (the system-call record): an open with write intent
//!   (or an attempt, refused by the read-only system folders) of a path outside the places a
//!   server may write: home (but another project's folder in it: one that holds a planted
//!   `.env`), `/tmp`, `/var/tmp`, `/dev/shm`, `/dev`, `/proc`, the working directory, the
//!   folders the server's arguments name and the writable folders bound into the sandbox (the
//!   package's install). A write under `/etc`, a web root (`/var/www`,
//!   `/srv`), `/usr`, `/opt`, `/root` or another account's home is a finding naming the path,
//!   whether the write got through, and the phase. Not counted: a Python runtime's bytecode
//!   cache (`__pycache__`), and what `persistence` judges (its system rules: cron, systemd,
//!   shell startup files).
//! - **Stashes** (`manifest.sandbox.left`, where the backend read the runs' writable places
//!   once the server exited: channel `left-files`): a file left holding a planted secret's
//!   value (as is or hex), or the user database's first line (`/etc/passwd`, root's), is a
//!   finding: it was copied where the server can take it later; a hidden file (a component starting with a dot) in the scratch places (`/tmp`,
//!   `/var`, `/run`, `/dev/shm`) that holds a call's input (the audit's marker) is a finding:
//!   input kept where nobody looks (a password, a key). Under home it is not: a server keeps
//!   its own logs, caches and settings in a dot folder there (`~/.mongodb/...`, `~/.cache`),
//!   input in them included; nor are scratch files that are not hidden. A run that left more
//!   entries than the walk visits ([`MAX_VISITED_SENTENCE`]) is a finding: a server that
//!   writes millions of files gets one, not a stalled audit. What each run left is a note
//!   listing its first files.
//!
//! Version 2 judges what the trigger run left (`glassbox audit --triggers`) as what the capture
//! and denied runs left.
//!
//! The package's install is the installer's: not judged. A backend that could not read what
//! the runs left makes the stash half `not-observed`: without a finding, the check says so,
//! never `pass`.

use crate::paths::{self, NormPath, Rules};
use crate::text;
use crate::{flags, Channel, CheckInfo, Evaluation, Evaluator};
use glassbox_model::{Event, EventKind, LeftFile, NetworkMode, Phase, Severity};

pub(crate) const INFO: CheckInfo = CheckInfo {
    id: "left-behind",
    version: 2,
    claim: "writes only in its own places and leaves no stash of secrets or input",
    severity: Severity::Medium,
    channels: &[Channel::Syscalls],
    also_reads: &[],
    file_calls: true,
    accuses: "",
    sources: &[
        "left_behind.rs",
        "paths.rs",
        "flags.rs",
        "text.rs",
        "net.rs",
        "persistence.rs",
        "outcome.rs",
    ],
};

/// The channel of the runs' left files (`manifest.recorder.channels`).
const LEFT_FILES: &str = "left-files";

/// What the walk's bound on entries says when a run reached it (`crates/audit/src/left.rs`).
const MAX_VISITED_SENTENCE: &str = "entries: the rest not walked";

/// Places any server may write, besides home, its working directory and given folders.
const OWN: &[&str] = &["/tmp", "/var/tmp", "/dev", "/proc", "/run/user"];

#[derive(Debug, Default)]
struct Write {
    opens: u64,
    failed: u64,
    another_project: bool,
}

pub(crate) struct State {
    home: NormPath,
    cwd: Vec<u8>,
    own: Vec<NormPath>,
    /// Another project's folders in home (where a planted `.env` is).
    projects: Vec<NormPath>,
    system: Rules<'static, &'static str>,
    writes: text::Groups<NormPath, Write>,
    /// Whether the runs' left files were read (channel `left-files`).
    left_read: bool,
}

pub(crate) fn start(c: &crate::Context<'_>) -> Box<dyn Evaluator> {
    let m = c.manifest;
    let home = NormPath::new(m.sandbox.home.as_bytes());
    let cwd = match m.sandbox.cwd.as_str() {
        "" => m.target.cwd.as_bytes().to_vec(),
        cwd => cwd.as_bytes().to_vec(),
    };
    let mut own: Vec<NormPath> = OWN.iter().map(|p| NormPath::new(p.as_bytes())).collect();
    own.push(NormPath::new(&cwd));
    // The folders the server's arguments name: the user gave it them to work in.
    own.extend(
        m.target
            .command
            .iter()
            .skip(1)
            .filter(|a| a.starts_with('/') && *a != "/")
            .map(|a| NormPath::new(a.as_bytes())),
    );
    // The writable folders bound into the sandbox: the package's own install, a folder the
    // client configuration gives it.
    own.extend(
        m.sandbox
            .mounts
            .iter()
            .filter(|mt| !mt.read_only && mt.source.starts_with("bind:"))
            .map(|mt| NormPath::new(mt.target.as_bytes())),
    );
    let projects = m
        .sandbox
        .honeytokens
        .iter()
        .filter(|h| h.kind.starts_with("dotenv"))
        .filter_map(|h| NormPath::new(h.path.as_bytes()).parent())
        .filter(|p| p.starts_with(&home) && p.components().len() > home.components().len())
        .collect();
    Box::new(State {
        home,
        cwd,
        own,
        projects,
        system: Rules::new(crate::persistence::SYSTEM_RULES.iter().copied()),
        writes: text::Groups::new(),
        left_read: m.recorder.channels.iter().any(|c| c == LEFT_FILES),
    })
}

impl Evaluator for State {
    fn event(&mut self, e: &Event) {
        let EventKind::Open {
            syscall,
            path,
            flags,
            result,
            ..
        } = &e.kind
        else {
            return;
        };
        if e.phase == Phase::Install || !flags::has_write_intent(syscall, *flags) {
            return;
        }
        let norm = NormPath::resolve(path.as_slice(), &self.cwd);
        let comps = norm.components();
        if comps.iter().any(|c| c.as_slice() == b"__pycache__") {
            return;
        }
        let another_project = self.projects.iter().any(|p| norm.starts_with(p));
        if !another_project
            && (norm.starts_with(&self.home) || self.own.iter().any(|o| norm.starts_with(o)))
        {
            return;
        }
        if self.system.first(comps).is_some() {
            return;
        }
        if let Some(w) = self.writes.add(norm, e.id, &e.phase) {
            w.opens += 1;
            if result.is_some_and(|r| r < 0) {
                w.failed += 1;
            }
            w.another_project |= another_project;
        }
    }

    fn finish_with(self: Box<Self>, ctx: &crate::Context<'_>) -> Evaluation {
        let mut eval = Evaluation::default();
        for g in &self.writes.items {
            let got = if g.data.failed == g.data.opens {
                "attempted, refused"
            } else {
                "written"
            };
            let place = if g.data.another_project {
                "inside another project's folder"
            } else {
                "outside the server's own places"
            };
            eval.findings.push(INFO.finding(
                format!(
                    "{got} {place}: {} ({}) during {}",
                    paths::display(&g.key, &self.home),
                    crate::net::count(g.count, "open", "opens"),
                    text::phases(&g.phases)
                ),
                g.ids.clone(),
                g.phases.first().cloned(),
            ));
        }
        if self.writes.overflow > 0 {
            eval.notes.push(INFO.finding(
                format!("{} more writes not listed", self.writes.overflow),
                Vec::new(),
                None,
            ));
        }
        judge_left(ctx.manifest, &self.home, &mut eval);
        eval
    }

    fn unread(&self) -> Vec<String> {
        if self.left_read {
            Vec::new()
        } else {
            vec!["the files the runs left (this backend could not read them)".to_string()]
        }
    }
}

/// Whether `f` is under home, where a server keeps its own files.
fn in_home(f: &LeftFile, home: &NormPath) -> bool {
    NormPath::new(f.path.as_bytes()).starts_with(home)
}

/// The stash findings and the notes of what each server run left.
fn judge_left(m: &glassbox_model::Manifest, home: &NormPath, eval: &mut Evaluation) {
    if !m.recorder.channels.iter().any(|c| c == LEFT_FILES) {
        return;
    }
    for mode in [
        NetworkMode::Capture,
        NetworkMode::Denied,
        NetworkMode::Trigger,
    ] {
        let files: Vec<&LeftFile> = m.sandbox.left.iter().filter(|f| f.mode == mode).collect();
        let run = format!("{} run", mode.name());
        for f in &files {
            let shown = text::escape(&f.path);
            // A planted file that changed holds its own secret: not a copy.
            let own = paths::display(&NormPath::new(f.path.as_bytes()), home);
            for name in f.holds.iter().filter(|h| *h != "input" && **h != own) {
                // A system file by its absolute path (the user database), else a planted
                // secret by its path from home.
                let what = match name.starts_with('/') {
                    true => format!("the system's {}", text::escape(name)),
                    false => format!("the planted {}", text::escape(name)),
                };
                eval.findings.push(INFO.finding(
                    format!(
                        "a copy of {what} was left in {shown} ({} bytes) ({run}): put where the \
                         server can take it later",
                        f.size
                    ),
                    Vec::new(),
                    None,
                ));
            }
            if f.hidden && f.holds.iter().any(|h| h == "input") && !in_home(f, home) {
                eval.findings.push(INFO.finding(
                    format!(
                        "a call's input was left in the hidden file {shown} ({} bytes) ({run}): \
                         kept where nobody looks",
                        f.size
                    ),
                    Vec::new(),
                    None,
                ));
            }
        }
        let prefix = format!("{run}: ");
        for cut in m
            .sandbox
            .left_cut
            .iter()
            .filter_map(|c| c.strip_prefix(&prefix))
        {
            if cut.ends_with(MAX_VISITED_SENTENCE) {
                eval.findings.push(INFO.finding(
                    format!("the {run} left {}", text::escape(cut)),
                    Vec::new(),
                    None,
                ));
            }
        }
        if !files.is_empty() {
            let bytes: u64 = files.iter().map(|f| f.size).sum();
            let first: Vec<String> = files
                .iter()
                .take(8)
                .map(|f| {
                    let changed = if f.changed {
                        " (a planted file, changed)"
                    } else {
                        ""
                    };
                    format!("{}{changed}", text::escape(&f.path))
                })
                .collect();
            let more = files.len().saturating_sub(first.len());
            eval.notes.push(INFO.finding(
                format!(
                    "the {run} left {} ({bytes} bytes): {}{}",
                    crate::net::count(files.len() as u64, "file", "files"),
                    first.join(", "),
                    if more > 0 {
                        format!(" and {more} more")
                    } else {
                        String::new()
                    }
                ),
                Vec::new(),
                None,
            ));
        }
    }
}

#[cfg(test)]
pub(crate) fn evaluate(ev: &glassbox_model::Evidence) -> Evaluation {
    crate::evaluate_one(start, ev)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::flags::{O_CREAT, O_WRONLY};
    use crate::testutil::{summaries, Ev};

    const W: u64 = O_WRONLY | O_CREAT;

    fn left(mode: NetworkMode, path: &str, hidden: bool, holds: &[&str]) -> LeftFile {
        LeftFile {
            mode,
            path: path.into(),
            size: 40,
            sha256: None,
            hidden,
            changed: false,
            link: None,
            holds: holds.iter().map(|h| h.to_string()).collect(),
        }
    }

    #[test]
    fn writes_outside_its_own_places_are_findings_and_its_own_are_not() {
        let call = Phase::call("save", 1);
        let mut ev = Ev::new()
            .channels(&["syscalls", LEFT_FILES])
            .cwd("/home/user/project")
            .open_result("/var/www/html/shell.php", W, Some(3), call.clone())
            .open_result("/etc/hosts", W, Some(-30), call.clone())
            .open_result(
                "/home/user/projects/api/config.js",
                W,
                Some(4),
                call.clone(),
            )
            // Its own places, a runtime's cache, persistence's paths, the install's.
            .open_result("/home/user/.cache/x/y", W, Some(5), call.clone())
            .open_result("/tmp/scratch", W, Some(6), call.clone())
            .open_result("/home/user/project/out.txt", W, Some(7), call.clone())
            .open_result("/opt/pkg/data/db.json", W, Some(7), call.clone())
            .open_result("/dev/null", W, Some(8), call.clone())
            .open_result(
                "/usr/lib/python3/x/__pycache__/m.cpython-311.pyc",
                W,
                Some(-13),
                call.clone(),
            )
            .open_result("/etc/cron.d/job", W, Some(-30), call.clone())
            .open_result("/usr/lib/node_modules/x/y", W, Some(-30), Phase::Install)
            // Read only.
            .open_result("/etc/passwd", 0, Some(9), call.clone())
            .build();
        ev.manifest.sandbox.home = "/home/user".into();
        ev.manifest
            .sandbox
            .mounts
            .push(glassbox_model::MountRecord {
                target: "/opt/pkg".into(),
                source: "bind:/var/cache/glassbox/pkg".into(),
                read_only: false,
            });
        ev.manifest
            .sandbox
            .honeytokens
            .push(glassbox_model::Honeytoken {
                path: "/home/user/projects/api/.env".into(),
                kind: "dotenv-other-project".into(),
                secrets: Vec::new(),
                hosts: Vec::new(),
                random: Vec::new(),
                services: Vec::new(),
            });
        let s = summaries(evaluate(&ev));
        assert_eq!(
            s,
            [
                "written outside the server's own places: /var/www/html/shell.php (1 open) during call:save",
                "attempted, refused outside the server's own places: /etc/hosts (1 open) during call:save",
                "written inside another project's folder: ~/projects/api/config.js (1 open) during call:save",
            ],
            "{s:#?}"
        );
    }

    #[test]
    fn stashes_are_findings_and_caches_and_scratch_files_are_notes() {
        let mut ev = Ev::new().channels(&["syscalls", LEFT_FILES]).build();
        ev.manifest.sandbox.home = "/home/user".into();
        ev.manifest.sandbox.left = vec![
            left(
                NetworkMode::Capture,
                "/tmp/.k",
                true,
                &["~/.ssh/id_ed25519"],
            ),
            left(
                NetworkMode::Denied,
                "/tmp/users.txt",
                false,
                &["/etc/passwd"],
            ),
            left(NetworkMode::Capture, "/tmp/.X11-cache/.s", true, &["input"]),
            // The server's own cache with the query in it; a scratch file; nothing held.
            left(
                NetworkMode::Capture,
                "/home/user/.mongodb/mcp/.app-logs/1_log",
                true,
                &["input"],
            ),
            left(
                NetworkMode::Capture,
                "/home/user/.cache/srv/q.json",
                true,
                &["input"],
            ),
            left(
                NetworkMode::Denied,
                "/tmp/echo-input.txt",
                false,
                &["input"],
            ),
            left(NetworkMode::Denied, "/tmp/.lock", true, &[]),
            // A planted file rewritten holds its own secret: not a copy.
            LeftFile {
                changed: true,
                ..left(
                    NetworkMode::Denied,
                    "/home/user/.aws/credentials",
                    true,
                    &["~/.aws/credentials"],
                )
            },
            // The install's: not judged.
            left(NetworkMode::Install, "/tmp/.npm-input", true, &["input"]),
        ];
        ev.manifest.sandbox.left_cut =
            vec!["denied run: more than 50000 entries: the rest not walked".into()];
        let e = evaluate(&ev);
        let notes: Vec<String> = e.notes.iter().map(|n| n.summary.clone()).collect();
        let s = summaries(e);
        assert_eq!(s.len(), 4, "{s:#?}");
        assert!(
            s.iter().any(|x| x.starts_with(
                "a copy of the system's /etc/passwd was left in /tmp/users.txt (40 bytes) (denied run)"
            )),
            "{s:#?}"
        );
        assert!(
            s[0].starts_with("a copy of the planted ~/.ssh/id_ed25519 was left in /tmp/.k"),
            "{}",
            s[0]
        );
        assert!(
            s[1].starts_with("a call's input was left in the hidden file /tmp/.X11-cache/.s"),
            "{}",
            s[1]
        );
        assert!(
            s[3].starts_with("the denied run left more than 50000 entries"),
            "{}",
            s[3]
        );
        assert!(
            notes[0].starts_with("the capture run left 4 files (160 bytes): /tmp/.k"),
            "{notes:?}"
        );
        assert!(
            notes[1].starts_with("the denied run left 4 files")
                && notes[1].ends_with("/home/user/.aws/credentials (a planted file, changed)"),
            "{notes:?}"
        );
    }

    #[test]
    fn without_the_left_files_it_is_not_observed_unless_it_flags() {
        let outcome = |ev: &glassbox_model::Evidence| {
            let r = crate::evaluate_all(ev, &crate::Proofs::all_proven());
            r.iter().find(|r| r.id == INFO.id).unwrap().outcome
        };
        let blind = Ev::new().channels(&["syscalls"]).build();
        assert_eq!(outcome(&blind), glassbox_model::Outcome::NotObserved);
        let seen = Ev::new().channels(&["syscalls", LEFT_FILES]).build();
        assert_eq!(outcome(&seen), glassbox_model::Outcome::Pass);
        let flagged = Ev::new()
            .channels(&["syscalls"])
            .open_result("/etc/hosts", W, Some(3), Phase::call("x", 1))
            .build();
        assert_eq!(outcome(&flagged), glassbox_model::Outcome::Flag);
    }
}
