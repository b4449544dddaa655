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
//!    loaders read `./.env` there legitimately).
//!
//! Open (read, write, directory listing) and stat events count; exec events do not (the child's
//! own open is what is recorded). One finding per distinct path.

use crate::paths::{self, NormPath};
use crate::text::{self, Groups};
use crate::{flags, Channel, CheckInfo, Evaluation, Evaluator};
use glassbox_model::{Event, EventKind, Manifest, Severity};

pub(crate) const INFO: CheckInfo = CheckInfo {
    id: "credential-probe",
    version: 3,
    claim: "no credential probing",
    severity: Severity::High,
    channels: &[Channel::Syscalls],
    accuses: "reading a planted secret (credential theft)",
    sources: &["credential.rs", "paths.rs", "flags.rs", "text.rs"],
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
    ".ethereum/keystore/**",
    ".config/solana/id.json",
    ".mozilla/firefox/**",
    ".config/google-chrome/**",
    ".config/chromium/**",
];

/// Why a path is a credential path; the first reason that applies wins.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord)]
enum Reason {
    Planted,
    PlantedDir,
    WellKnown,
    DotEnv,
}

impl Reason {
    fn text(self) -> &'static str {
        match self {
            Reason::Planted => "planted secret",
            Reason::PlantedDir => "directory of planted secrets",
            Reason::WellKnown => "well-known credential path",
            Reason::DotEnv => ".env outside the working directory",
        }
    }
}

struct Context {
    home: NormPath,
    cwd: NormPath,
    cwd_raw: Vec<u8>,
    /// Home and the folder of each planted secret outside home, as bytes.
    roots: Vec<Vec<u8>>,
    planted: Vec<NormPath>,
    planted_dirs: Vec<NormPath>,
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
        Context {
            cwd: NormPath::new(sandbox.cwd.as_bytes()),
            cwd_raw: sandbox.cwd.as_bytes().to_vec(),
            roots: std::iter::once(sandbox.home.as_bytes().to_vec())
                .chain(
                    planted
                        .iter()
                        .filter_map(|p| p.parent())
                        .map(|d| d.to_bytes().0),
                )
                .collect(),
            home,
            planted,
            planted_dirs,
        }
    }

    fn classify(&self, path: &NormPath) -> Option<Reason> {
        if self.planted.contains(path) {
            return Some(Reason::Planted);
        }
        if self.planted_dirs.iter().any(|d| path.starts_with(d)) {
            return Some(Reason::PlantedDir);
        }
        let rel = paths::home_relative(path, &self.home)?;
        if WELL_KNOWN.iter().any(|p| paths::matches(rel, p)) {
            return Some(Reason::WellKnown);
        }
        let name = path.file_name()?;
        let dotenv = name == b".env" || name.starts_with(b".env.");
        let in_cwd = !self.cwd.components().is_empty() && path.starts_with(&self.cwd);
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

/// The check's state over one run.
pub(crate) struct State {
    ctx: Context,
    groups: Groups<NormPath, Access>,
}

pub(crate) fn start(c: &crate::Context<'_>) -> Box<dyn Evaluator> {
    Box::new(State {
        ctx: Context::new(c.manifest),
        groups: Groups::new(),
    })
}

impl Evaluator for State {
    fn event(&mut self, e: &Event) {
        let path = match &e.kind {
            EventKind::Open { path, .. } | EventKind::Stat { path, .. } => path,
            EventKind::Honeytoken { path, access, .. } if access != "overflow" => path,
            _ => return,
        };
        // Every rule is about paths under home or planted secrets: a plain path outside both
        // needs no normalizing.
        if self
            .ctx
            .roots
            .iter()
            .all(|r| paths::plainly_outside(path.as_slice(), r))
        {
            return;
        }
        let norm = NormPath::resolve(path.as_slice(), &self.ctx.cwd_raw);
        let Some(reason) = self.ctx.classify(&norm) else {
            return;
        };
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

    fn finish(self: Box<Self>) -> Evaluation {
        let State { ctx, groups } = *self;
        let overflow = groups.overflow;
        let mut findings: Vec<_> = groups
            .items
            .into_iter()
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
                let mut f = INFO.finding(summary, g.ids, g.phases.first().cloned());
                // Reading a planted secret is an accusation of credential theft; a stat or
                // a failed attempt is a probe, reported without accusing.
                f.accusation = acc.read
                    && acc.failed_opens < acc.opens
                    && matches!(acc.reason, Some(Reason::Planted));
                f
            })
            .collect();
        if overflow > 0 {
            findings.push(INFO.finding(
                format!("{overflow} more accesses to further credential paths (not listed)"),
                Vec::new(),
                None,
            ));
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
    use crate::flags::{O_CREAT, O_DIRECTORY, O_WRONLY};
    use crate::testutil::Ev;
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
            "read ~/.ssh/id_rsa (planted secret, seen by the kernel) during call:t"
        );
        assert!(eval.findings[0].accusation);
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
            "read + stat of ~/.ssh/id_rsa (planted secret) during call:get_weather, startup"
        );
    }

    #[test]
    fn read_write_stat_and_list_are_distinguished() {
        let ev = Ev::new()
            .open("/home/user/.netrc", 0, Phase::Startup)
            .open("/home/user/.npmrc", O_WRONLY | O_CREAT, Phase::Startup)
            .stat("/home/user/.gnupg", Phase::Startup)
            .open("/home/user/.ssh", O_DIRECTORY, Phase::List)
            .build();
        assert_eq!(
            summaries(&ev),
            vec![
                "read ~/.netrc (well-known credential path) during startup",
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
            "/home/user/.netrc",
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
            "/home/user/.netrc/x",
            "/home/user/project/.ssh/id_rsa.pub.md",
            "/home/user",
            "/home/user/.config",
            "/etc/ssh/ssh_config",
            "/root/.netrc",
            "/home/other/.ssh/id_rsa",
            "/home/userx/.ssh/id_rsa",
            "/usr/lib/node_modules/npm/.npmrc",
            "/home/user/.envrc",
            "/home/user/other/.environment",
            "/home/user/other/.env/x",
        ] {
            assert!(!flagged(p.as_bytes()), "{p} should not be flagged");
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
                "read ~/other-project/.env (planted secret) during startup",
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
            vec!["read /run/secrets/token (planted secret) during startup"]
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
            vec!["read ~/.ssh/id_ed25519 (well-known credential path) during startup"]
        );
        assert_eq!(evaluate(&ev).findings[0].evidence, vec![1]);
    }

    #[test]
    fn hostile_tool_names_in_phases_are_escaped() {
        let ev = Ev::new()
            .open(
                "/home/user/.netrc",
                0,
                Phase::Call("x\x1b]0;pwned\x07".into()),
            )
            .build();
        let s = &summaries(&ev)[0];
        assert!(!s.contains('\x1b') && !s.contains('\x07'), "{s}");
    }
}
