//! `persistence`: writes to files that make code run later, and the commands that schedule it.
//!
//! An open-family call with write intent (see [`flags::has_write_intent`]) on a path of
//! [`HOME_RULES`] (under the sandbox home) or [`SYSTEM_RULES`], or on a git hook (`.git/hooks/X`
//! anywhere, except git's own `*.sample` files), is a finding; so is an exec of `crontab`
//! (other than `crontab -l`), `systemctl enable`/`link`, `at` (other than `at -l`) or
//! `loginctl enable-linger`. Reading these files is not persistence: every shell reads
//! `~/.bashrc`.
//!
//! Not seen (the recorder does not record them): `rename`, `link`, `symlink` and `mkdir`, so a
//! file written elsewhere and renamed into place is missed.
//!
//! Version 4 judges as version 3 did, but says `not-observed`, never `pass`, where the run lost
//! calls the recorder should have seen (`manifest.recorder.lost`: the rule is
//! `outcome.rs`'s, which its lock now covers).
//!
//! Version 5 judges as version 4 did; it reads the open family, so records of it the eBPF
//! channel lost blind it as before (`outcome.rs` now tells those from other losses).
//! A live control: `floods-stats-around-unit-write` (Python, Node).

use crate::paths::{self, basename, NormPath, Rules, View};
use crate::text::{self, Groups};
use crate::{flags, Channel, CheckInfo, Evaluation, Evaluator};
use glassbox_model::{Bytes, Event, EventKind, Phase, Severity};

pub(crate) const INFO: CheckInfo = CheckInfo {
    id: "persistence",
    version: 5,
    claim: "no persistence",
    severity: Severity::High,
    channels: &[Channel::Syscalls],
    also_reads: &[],
    file_calls: true,
    accuses: "",
    sources: &[
        "persistence.rs",
        "paths.rs",
        "flags.rs",
        "text.rs",
        "outcome.rs",
    ],
};

/// Home-relative persistence paths (patterns of [`paths::matches()`]) and what they are.
pub(crate) const HOME_RULES: &[(&str, &str)] = &[
    (".bashrc", "shell startup file"),
    (".bash_profile", "shell startup file"),
    (".bash_login", "shell startup file"),
    (".bash_logout", "shell startup file"),
    (".profile", "shell startup file"),
    (".zshrc", "shell startup file"),
    (".zprofile", "shell startup file"),
    (".zshenv", "shell startup file"),
    (".zlogin", "shell startup file"),
    (".zlogout", "shell startup file"),
    (".kshrc", "shell startup file"),
    (".mkshrc", "shell startup file"),
    (".cshrc", "shell startup file"),
    (".tcshrc", "shell startup file"),
    (".login", "shell startup file"),
    (".config/fish/config.fish", "shell startup file"),
    (".config/fish/conf.d/*", "shell startup file"),
    (".config/autostart/*", "desktop autostart entry"),
    (".config/systemd/user/**", "systemd user unit"),
    (".local/share/systemd/user/**", "systemd user unit"),
    (".ssh/authorized_keys", "ssh authorized keys"),
    (".ssh/authorized_keys2", "ssh authorized keys"),
    (".ssh/rc", "ssh login script"),
    (".ssh/config", "ssh client config"),
    (".xinitrc", "X session startup file"),
    (".xprofile", "X session startup file"),
    (".xsessionrc", "X session startup file"),
    (".config/environment.d/*", "session environment"),
    (".pam_environment", "session environment"),
];

/// Absolute persistence paths (patterns of [`paths::matches()`]) and what they are.
pub(crate) const SYSTEM_RULES: &[(&str, &str)] = &[
    ("/etc/profile", "shell startup file"),
    ("/etc/profile.d/*", "shell startup file"),
    ("/etc/bash.bashrc", "shell startup file"),
    ("/etc/bashrc", "shell startup file"),
    ("/etc/zsh/*", "shell startup file"),
    ("/etc/environment", "session environment"),
    ("/etc/cron*/**", "cron"),
    ("/etc/anacrontab", "cron"),
    ("/var/spool/cron/**", "cron"),
    ("/var/spool/at/**", "at job"),
    ("/etc/xdg/autostart/*", "desktop autostart entry"),
    ("/etc/systemd/**", "systemd unit"),
    ("/etc/init.d/*", "init script"),
    ("/etc/rc.local", "init script"),
    ("/etc/ld.so.preload", "dynamic loader preload"),
];

/// [`HOME_RULES`] and [`SYSTEM_RULES`], split once.
struct Classifier {
    home: Rules<'static, &'static str>,
    system: Rules<'static, &'static str>,
}

impl Classifier {
    fn new() -> Self {
        Classifier {
            home: Rules::new(HOME_RULES.iter().copied()),
            system: Rules::new(SYSTEM_RULES.iter().copied()),
        }
    }

    /// Why a written path (its normalized components) is persistence.
    fn classify<C: AsRef<[u8]>>(&self, path: &[C], home: &NormPath) -> Option<&'static str> {
        if let Some(rel) = paths::home_relative_components(path, home.components()) {
            if let Some(what) = self.home.first(rel) {
                return Some(what);
            }
        }
        if let Some(what) = self.system.first(path) {
            return Some(what);
        }
        if is_git_hook(path) {
            return Some("git hook");
        }
        None
    }
}

/// `…/.git/hooks/NAME`, where git would run `NAME` (not its `*.sample` templates).
fn is_git_hook<C: AsRef<[u8]>>(comps: &[C]) -> bool {
    let n = comps.len();
    n >= 3
        && comps[n - 3].as_ref() == b".git"
        && comps[n - 2].as_ref() == b"hooks"
        && !comps[n - 1].as_ref().ends_with(b".sample")
}

/// What an exec schedules, when it does.
fn exec_kind(path: &Bytes, argv: &[Bytes]) -> Option<&'static str> {
    let has = |flag: &[u8]| argv.iter().skip(1).any(|a| a.as_slice() == flag);
    let by_name = |name: &[u8]| -> Option<&'static str> {
        match name {
            b"crontab" if !has(b"-l") => Some("crontab"),
            b"at" if !has(b"-l") => Some("at job"),
            b"systemctl" if has(b"enable") || has(b"link") => Some("systemd unit enabled"),
            b"loginctl" if has(b"enable-linger") => Some("lingering user services"),
            _ => None,
        }
    };
    by_name(basename(path.as_slice())).or_else(|| by_name(basename(argv.first()?.as_slice())))
}

#[derive(Debug, Default)]
struct Write {
    what: &'static str,
    opens: usize,
    failed_opens: usize,
}

#[derive(Debug, Default)]
struct Exec {
    what: &'static str,
}

/// The check's state over one run.
pub(crate) struct State {
    home: NormPath,
    cwd_raw: Vec<u8>,
    rules: Classifier,
    writes: Groups<NormPath, Write>,
    execs: Groups<(i32, Vec<Bytes>), Exec>,
    /// Findings in the order of their first event, writes and execs interleaved.
    order: Vec<(u64, bool, usize)>,
}

pub(crate) fn start(c: &crate::Context<'_>) -> Box<dyn Evaluator> {
    let sandbox = &c.manifest.sandbox;
    Box::new(State {
        home: NormPath::new(sandbox.home.as_bytes()),
        cwd_raw: sandbox.cwd.as_bytes().to_vec(),
        rules: Classifier::new(),
        writes: Groups::new(),
        execs: Groups::new(),
        order: Vec::new(),
    })
}

impl Evaluator for State {
    fn event(&mut self, e: &Event) {
        match &e.kind {
            EventKind::Open {
                syscall,
                path,
                flags,
                result,
                ..
            } => {
                if !flags::has_write_intent(syscall, *flags) {
                    return;
                }
                // Judged on a view of the path; copied only when it counts.
                let (what, norm) = match View::resolve(path.as_slice(), &self.cwd_raw) {
                    Some(view) => match self.rules.classify(view.components(), &self.home) {
                        Some(what) => (what, view.to_norm()),
                        None => return,
                    },
                    None => {
                        let norm = NormPath::resolve(path.as_slice(), &self.cwd_raw);
                        match self.rules.classify(norm.components(), &self.home) {
                            Some(what) => (what, norm),
                            None => return,
                        }
                    }
                };
                let before = self.writes.items.len();
                let Some(w) = self.writes.add(norm, e.id, &e.phase) else {
                    return;
                };
                w.what = what;
                w.opens += 1;
                if result.is_some_and(|r| r < 0) {
                    w.failed_opens += 1;
                }
                if self.writes.items.len() > before {
                    self.order.push((e.id, true, before));
                }
            }
            EventKind::Exec { path, argv, .. } => {
                let Some(what) = exec_kind(path, argv) else {
                    return;
                };
                let before = self.execs.items.len();
                if let Some(x) = self.execs.add((e.pid, argv.clone()), e.id, &e.phase) {
                    x.what = what;
                }
                if self.execs.items.len() > before {
                    self.order.push((e.id, false, before));
                }
            }
            _ => {}
        }
    }

    fn finish(self: Box<Self>) -> Evaluation {
        let State {
            home,
            writes,
            execs,
            order,
            ..
        } = *self;
        let mut findings = Vec::new();
        for (_, is_write, n) in order {
            let (summary, ids, phases): (String, &Vec<u64>, &Vec<Phase>) = if is_write {
                let g = &writes.items[n];
                let failed = if g.data.failed_opens == g.data.opens {
                    ", every open failed"
                } else {
                    ""
                };
                (
                    format!(
                        "write {} ({}{failed}) during {}",
                        paths::display(&g.key, &home),
                        g.data.what,
                        text::phases(&g.phases)
                    ),
                    &g.ids,
                    &g.phases,
                )
            } else {
                let g = &execs.items[n];
                let (pid, argv) = &g.key;
                (
                    format!(
                        "ran {} ({}) (pid {pid}) during {}",
                        text::argv(argv, 200),
                        g.data.what,
                        text::phases(&g.phases)
                    ),
                    &g.ids,
                    &g.phases,
                )
            };
            findings.push(INFO.finding(summary, ids.clone(), phases.first().cloned()));
        }
        Evaluation {
            findings,
            notes: Vec::new(),
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
    use crate::flags::{O_APPEND, O_CREAT, O_DIRECTORY, O_RDWR, O_TRUNC, O_WRONLY};
    use crate::testutil::Ev;

    const W: u64 = O_WRONLY | O_CREAT | O_TRUNC;

    fn written(path: &str) -> bool {
        let ev = Ev::new().open(path, W, Phase::Startup).build();
        !evaluate(&ev).findings.is_empty()
    }

    #[test]
    fn writes_to_persistence_paths_are_findings() {
        for p in [
            "/home/user/.bashrc",
            "/home/user/.bash_profile",
            "/home/user/.bash_login",
            "/home/user/.bash_logout",
            "/home/user/.profile",
            "/home/user/.zshrc",
            "/home/user/.zprofile",
            "/home/user/.zshenv",
            "/home/user/.zlogin",
            "/home/user/.kshrc",
            "/home/user/.cshrc",
            "/home/user/.tcshrc",
            "/home/user/.config/fish/config.fish",
            "/home/user/.config/fish/conf.d/x.fish",
            "/etc/profile",
            "/etc/profile.d/evil.sh",
            "/etc/bash.bashrc",
            "/var/spool/cron/crontabs/user",
            "/etc/crontab",
            "/etc/cron.d/job",
            "/etc/cron.hourly/job",
            "/home/user/.config/autostart/x.desktop",
            "/etc/xdg/autostart/x.desktop",
            "/home/user/.config/systemd/user/x.service",
            "/home/user/.config/systemd/user/default.target.wants/x.service",
            "/home/user/.local/share/systemd/user/x.service",
            "/etc/systemd/system/x.service",
            "/home/user/project/.git/hooks/pre-commit",
            "/tmp/clone/.git/hooks/post-checkout",
            "/home/user/.ssh/authorized_keys",
            "/home/user/.ssh/authorized_keys2",
            "/home/user/.ssh/rc",
            "/home/user/.ssh/config",
            "/home/user/.xinitrc",
            "/home/user/.xprofile",
            "/home/user/.xsessionrc",
            "/home/user/.config/environment.d/10-x.conf",
            "/home/user/.pam_environment",
            "/home/user/./x/../.bashrc",
        ] {
            assert!(written(p), "{p} should be flagged");
        }
    }

    #[test]
    fn look_alikes_are_not_persistence() {
        for p in [
            "/home/user/.bashrc.bak",
            "/home/user/project/.bashrc",
            "/home/user/notes/bashrc.md",
            "/home/user/.config/fish/functions/x.fish",
            "/home/user/.config/systemd-notes/x",
            "/home/user/.ssh/known_hosts",
            "/home/user/.ssh/authorized_keys.md",
            "/home/user/project/.git/config",
            "/home/user/project/.git/hooks/pre-commit.sample",
            "/home/user/project/.git/hooks",
            "/home/user/project/git/hooks/pre-commit",
            "/home/user/project/.git/hooks/x/y",
            "/etc/xcron",
            "/etc/profile.d",
            "/tmp/etc/profile",
            "/home/other/.bashrc",
            "/etc/systemdx/y",
        ] {
            assert!(!written(p), "{p} should not be flagged");
        }
    }

    #[test]
    fn only_write_intent_counts() {
        for flags in [O_WRONLY, O_RDWR, O_CREAT, O_TRUNC, O_APPEND] {
            let ev = Ev::new()
                .open("/home/user/.bashrc", flags, Phase::Startup)
                .build();
            assert_eq!(evaluate(&ev).findings.len(), 1, "flags {flags:o}");
        }
        let ev = Ev::new()
            .open("/home/user/.bashrc", 0, Phase::Startup)
            .open("/home/user/.bashrc", 0o2000000, Phase::Startup) // O_CLOEXEC
            .open("/etc/systemd", O_DIRECTORY, Phase::Startup)
            .stat("/home/user/.bashrc", Phase::Startup)
            .build();
        assert!(evaluate(&ev).findings.is_empty());
        // `creat(2)` writes whatever the flags field says.
        let ev = Ev::new()
            .event(
                2,
                Phase::Startup,
                EventKind::Open {
                    syscall: "creat".into(),
                    path: "/home/user/.zshrc".into(),
                    flags: 0,
                    flags_text: "O_RDONLY".into(), // wrong on purpose: not read
                    result: Some(3),
                },
            )
            .build();
        assert_eq!(evaluate(&ev).findings.len(), 1);
    }

    #[test]
    fn summaries_group_by_path() {
        let ev = Ev::new()
            .open(
                "/home/user/.bashrc",
                O_WRONLY | O_APPEND,
                Phase::Call("setup".into()),
            )
            .open("/home/user/.bashrc", O_RDWR, Phase::Shutdown)
            .open_result("/etc/cron.d/x", W, Some(-13), Phase::Startup)
            .build();
        let f = evaluate(&ev).findings;
        assert_eq!(f.len(), 2);
        assert_eq!(
            f[0].summary,
            "write ~/.bashrc (shell startup file) during call:setup, shutdown"
        );
        assert_eq!(f[0].evidence, vec![1, 2]);
        assert_eq!(f[0].phase, Some(Phase::Call("setup".into())));
        assert_eq!(
            f[1].summary,
            "write /etc/cron.d/x (cron, every open failed) during startup"
        );
    }

    #[test]
    fn scheduling_commands() {
        let ev = Ev::new()
            .exec(
                3,
                "/usr/bin/crontab",
                &["crontab", "/tmp/x"],
                Phase::Startup,
            )
            .exec(4, "/usr/bin/crontab", &["crontab", "-l"], Phase::Startup)
            .exec(
                5,
                "/usr/bin/systemctl",
                &["systemctl", "--user", "enable", "x"],
                Phase::Startup,
            )
            .exec(
                6,
                "/usr/bin/systemctl",
                &["systemctl", "--user", "status"],
                Phase::Startup,
            )
            .exec(
                7,
                "/usr/bin/at",
                &["at", "now", "+", "1", "minute"],
                Phase::Startup,
            )
            .exec(8, "/usr/bin/at", &["at", "-l"], Phase::Startup)
            .exec(
                9,
                "/usr/bin/loginctl",
                &["loginctl", "enable-linger"],
                Phase::Startup,
            )
            .exec(10, "/usr/bin/cat", &["cat", "crontab"], Phase::Startup)
            .exec(11, "/usr/bin/attr", &["attr"], Phase::Startup)
            .build();
        let s: Vec<String> = evaluate(&ev)
            .findings
            .into_iter()
            .map(|f| f.summary)
            .collect();
        assert_eq!(
            s,
            vec![
                "ran crontab /tmp/x (crontab) (pid 3) during startup",
                "ran systemctl --user enable x (systemd unit enabled) (pid 5) during startup",
                "ran at now + 1 minute (at job) (pid 7) during startup",
                "ran loginctl enable-linger (lingering user services) (pid 9) during startup",
            ]
        );
    }

    #[test]
    fn findings_are_in_event_order() {
        let ev = Ev::new()
            .exec(3, "/usr/bin/crontab", &["crontab", "-"], Phase::Startup)
            .open("/home/user/.profile", W, Phase::Startup)
            .build();
        let f = evaluate(&ev).findings;
        assert_eq!(f[0].evidence, vec![1]);
        assert_eq!(f[1].evidence, vec![2]);
    }
}
