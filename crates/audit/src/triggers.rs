//! The trigger run: the capture run's session again, with the server's world changed, so that
//! behaviour that waits shows (`docs/triggers.md`). Malicious packages act after a date,
//! after days of uptime, or only on a machine that looks like a CI runner or a developer's,
//! and stay quiet in a fresh sandbox; this run moves the clocks forward
//! ([`glassbox_sandbox::clock`]) and gives the server such a machine's environment. The
//! `trigger-only` check lists what only this run did.

use glassbox_model::TriggerRun;
use glassbox_sandbox::clock::ClockShift;

/// The channel a trigger run adds (`manifest.recorder.channels`).
pub const CHANNEL: &str = "trigger-run";

/// How far the clock moves unless `--clock-offset` says: 400 days, past a year's anniversary
/// and the end of any quarter.
pub const DEFAULT_CLOCK_DAYS: u32 = 400;

/// The machine the trigger run's environment looks like.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Machine {
    /// A CI runner: GitHub Actions' variables (with a planted `GITHUB_TOKEN`), and the
    /// markers the other common runners set, which CI-detection libraries read.
    Ci,
    /// An interactive developer's machine: a terminal, a display, an editor, a desktop
    /// session.
    Developer,
}

impl Machine {
    /// `ci` or `developer`, as the manifest records it.
    pub fn name(self) -> &'static str {
        match self {
            Machine::Ci => "ci",
            Machine::Developer => "developer",
        }
    }

    /// The variables, with their values (the planted tokens aside: [`CI_TOKENS`]).
    pub fn variables(self) -> &'static [(&'static str, &'static str)] {
        match self {
            Machine::Ci => CI_VARIABLES,
            Machine::Developer => DEVELOPER_VARIABLES,
        }
    }
}

/// A GitHub-hosted runner's variables (what `actions/runner` sets for every step), the
/// generic markers (`CI`, `CONTINUOUS_INTEGRATION`, `BUILD_NUMBER`) and the one variable by
/// which each other common runner is told (GitLab, CircleCI, Travis, Buildkite, Jenkins, Azure
/// Pipelines): what `ci-info`, `is-ci` and Python's `ci-info` ports read.
const CI_VARIABLES: &[(&str, &str)] = &[
    ("CI", "true"),
    ("CONTINUOUS_INTEGRATION", "true"),
    ("BUILD_NUMBER", "1187"),
    ("GITHUB_ACTIONS", "true"),
    ("GITHUB_WORKFLOW", "CI"),
    ("GITHUB_RUN_ID", "9348012271"),
    ("GITHUB_RUN_NUMBER", "1187"),
    ("GITHUB_RUN_ATTEMPT", "1"),
    ("GITHUB_JOB", "build"),
    ("GITHUB_ACTION", "__run"),
    ("GITHUB_ACTOR", "octo-dev"),
    ("GITHUB_REPOSITORY", "acme-corp/quarterly-report"),
    ("GITHUB_REPOSITORY_OWNER", "acme-corp"),
    ("GITHUB_EVENT_NAME", "push"),
    ("GITHUB_REF", "refs/heads/main"),
    ("GITHUB_REF_NAME", "main"),
    ("GITHUB_SHA", "5f3c2b8e9a7d4c1f0e6b3a29d8c7e4f1a2b3c4d5"),
    ("GITHUB_SERVER_URL", "https://github.com"),
    ("GITHUB_API_URL", "https://api.github.com"),
    (
        "GITHUB_WORKSPACE",
        "/home/runner/work/quarterly-report/quarterly-report",
    ),
    ("RUNNER_OS", "Linux"),
    ("RUNNER_ARCH", "X64"),
    ("RUNNER_NAME", "GitHub Actions 14"),
    ("RUNNER_ENVIRONMENT", "github-hosted"),
    ("RUNNER_TEMP", "/tmp"),
    ("RUNNER_TOOL_CACHE", "/opt/hostedtoolcache"),
    ("ImageOS", "ubuntu22"),
    ("GITLAB_CI", "true"),
    ("CIRCLECI", "true"),
    ("TRAVIS", "true"),
    ("BUILDKITE", "true"),
    ("JENKINS_URL", "http://jenkins.internal.example:8080/"),
    ("TF_BUILD", "True"),
];

/// The tokens a CI job's environment holds, planted (fresh values, followed like every
/// planted secret): the repository token and the Actions runtime's.
pub const CI_TOKENS: &[(&str, &str, usize)] = &[
    ("GITHUB_TOKEN", "ghs_", 36),
    ("ACTIONS_RUNTIME_TOKEN", "", 64),
    ("ACTIONS_ID_TOKEN_REQUEST_TOKEN", "", 64),
];

/// An interactive desktop session's variables, as a terminal in it passes them on.
const DEVELOPER_VARIABLES: &[(&str, &str)] = &[
    ("TERM", "xterm-256color"),
    ("COLORTERM", "truecolor"),
    ("TERM_PROGRAM", "vscode"),
    ("DISPLAY", ":0"),
    ("WAYLAND_DISPLAY", "wayland-0"),
    ("XDG_SESSION_TYPE", "wayland"),
    ("XDG_CURRENT_DESKTOP", "GNOME"),
    ("DESKTOP_SESSION", "ubuntu"),
    ("EDITOR", "code --wait"),
    ("VISUAL", "code --wait"),
    ("SHLVL", "2"),
];

/// What the trigger run changes (`--triggers`, `--clock-offset`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Triggers {
    /// Days the clocks move forward; `None`: not moved.
    pub clock_days: Option<u32>,
    /// The machine the environment looks like; `None`: the capture run's.
    pub machine: Option<Machine>,
}

impl Default for Triggers {
    /// Both: the clock moved [`DEFAULT_CLOCK_DAYS`], a CI runner's environment.
    fn default() -> Self {
        Triggers {
            clock_days: Some(DEFAULT_CLOCK_DAYS),
            machine: Some(Machine::Ci),
        }
    }
}

impl Triggers {
    /// No trigger run.
    pub fn none() -> Triggers {
        Triggers {
            clock_days: None,
            machine: None,
        }
    }

    /// Whether there is no trigger run.
    pub fn is_none(&self) -> bool {
        self.clock_days.is_none() && self.machine.is_none()
    }

    /// Each trigger alone, when there are two (which of them brought a behaviour out); none
    /// when there is one.
    pub fn alone(&self) -> Vec<Triggers> {
        match (self.clock_days, self.machine) {
            (Some(days), Some(machine)) => vec![
                Triggers {
                    clock_days: Some(days),
                    machine: None,
                },
                Triggers {
                    clock_days: None,
                    machine: Some(machine),
                },
            ],
            _ => Vec::new(),
        }
    }

    /// The sandbox's clock shift.
    pub(crate) fn shift(&self) -> Option<ClockShift> {
        self.clock_days.map(ClockShift::days)
    }

    /// What the manifest records of the run (`variables`: the names set, planted tokens
    /// included).
    pub(crate) fn record(&self, variables: Vec<String>) -> TriggerRun {
        TriggerRun {
            clock_offset_days: self.shift().map(|s| (s.seconds() / 86_400) as u32),
            environment: self.machine.map(|m| m.name().to_string()),
            variables,
            limits: Vec::new(),
        }
    }
}

/// The sandbox's own writable places (and its home): what is there is not the host's.
const SANDBOX_ONLY: &[&str] = &["/tmp/", "/run/", "/var/", "/dev/shm/"];

/// What the moved clock could not reach in the trigger run: each program it executed (by the
/// path of its exec, read on the host, where system folders and the server's own are at the
/// same paths) that is a statically linked 64-bit ELF, whose wall clock the shim could not
/// move ([`glassbox_sandbox::clock`]). A program not found on the host (made in the sandbox's
/// home or `/tmp`) is said as such.
pub(crate) fn unmoved(events: &[glassbox_model::Event], home: &str) -> Vec<String> {
    use std::io::Read as _;
    let mut seen = std::collections::BTreeSet::new();
    let mut out = Vec::new();
    for e in events {
        let glassbox_model::EventKind::Exec { path, .. } = &e.kind else {
            continue;
        };
        let path = String::from_utf8_lossy(path.as_slice()).into_owned();
        if !seen.insert(path.clone()) {
            continue;
        }
        // The sandbox's own places are gone with it (and the host's file of that name is
        // another).
        let in_home = !home.is_empty() && path.starts_with(&format!("{home}/"));
        if in_home || SANDBOX_ONLY.iter().any(|p| path.starts_with(p)) {
            out.push(format!(
                "{}: a program of the sandbox's own places, not read: whether its wall clock \
                 moved is not known",
                glassbox_model::printable(&path)
            ));
            continue;
        }
        let mut head = Vec::new();
        let read =
            std::fs::File::open(&path).and_then(|f| f.take(64 * 1024).read_to_end(&mut head));
        if read.is_ok()
            && glassbox_vm::initramfs::is_elf64(&head)
            && glassbox_vm::initramfs::elf_interpreter(&head).is_none()
        {
            out.push(format!(
                "{}: statically linked, its wall clock was the host's",
                glassbox_model::printable(&path)
            ));
        }
        if out.len() >= 20 {
            break;
        }
    }
    out
}

/// What the report's coverage says of behaviour that waits ("Left out" lines of the surface
/// exercised): without a trigger run, that it was not looked for; with one whose clock moved
/// by the shim (the namespace backend), what the moved wall clock cannot reach, and each
/// program of the run it did not reach ([`unmoved`], `network.runs[].trigger.limits`).
pub(crate) fn left_out(m: &glassbox_model::Manifest) -> Vec<String> {
    let Some(t) = m
        .network
        .runs
        .iter()
        .find(|r| r.mode == glassbox_model::NetworkMode::Trigger)
    else {
        return vec![
            "behaviour that waits for a date, for uptime or for a CI runner: no trigger run was \
             made (--triggers)"
                .into(),
        ];
    };
    let Some(t) = &t.trigger else {
        return Vec::new();
    };
    let mut out = Vec::new();
    if t.clock_offset_days.is_some() && !crate::Isolation::of(m).moves_every_wall_clock() {
        out.push(format!(
            "the trigger run ({}) moved the wall clock of dynamically linked programs only: a \
             statically linked one, a raw clock call or a child started without LD_PRELOAD saw \
             the real date (its monotonic clocks moved)",
            t.describe()
        ));
    }
    out.extend(
        t.limits
            .iter()
            .map(|l| format!("the trigger run's clock: {l}")),
    );
    out
}

/// Parses `--triggers`: `none`, `all` (time and ci), or a comma-separated list of `time`,
/// `ci`, `developer` (`ci` and `developer` are two machines: one of them).
pub fn parse(text: &str, clock_days: u32) -> Result<Triggers, String> {
    let mut t = Triggers::none();
    for word in text.split(',').map(str::trim) {
        match word {
            "none" => {}
            "all" => {
                t.clock_days = Some(clock_days);
                t.machine = Some(t.machine.unwrap_or(Machine::Ci));
            }
            "time" => t.clock_days = Some(clock_days),
            "ci" | "developer" => {
                let m = if word == "ci" {
                    Machine::Ci
                } else {
                    Machine::Developer
                };
                if t.machine.is_some_and(|had| had != m) {
                    return Err("--triggers: ci and developer are two machines; choose one".into());
                }
                t.machine = Some(m);
            }
            other => {
                return Err(format!(
                    "--triggers: {other:?} is not one of none, all, time, ci, developer"
                ))
            }
        }
    }
    Ok(t)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn triggers_parse_from_their_words() {
        assert_eq!(parse("all", 400).unwrap(), Triggers::default());
        assert_eq!(parse("none", 400).unwrap(), Triggers::none());
        let t = parse("time", 30).unwrap();
        assert_eq!((t.clock_days, t.machine), (Some(30), None));
        let t = parse("developer,time", 400).unwrap();
        assert_eq!(
            (t.clock_days, t.machine),
            (Some(400), Some(Machine::Developer))
        );
        assert!(parse("ci,developer", 400).is_err());
        assert!(parse("tomorrow", 400).unwrap_err().contains("tomorrow"));
        let r = parse("all", 400).unwrap().record(vec!["CI".into()]);
        assert_eq!(
            r.describe(),
            "the clock moved +400 days and a CI runner's environment"
        );
    }

    fn exec(id: u64, path: &str) -> glassbox_model::Event {
        glassbox_model::Event {
            id,
            t_ns: 0,
            pid: 2,
            ppid: 1,
            phase: glassbox_model::Phase::Startup,
            kind: glassbox_model::EventKind::Exec {
                syscall: "execve".into(),
                path: path.into(),
                argv: Vec::new(),
            },
        }
    }

    #[test]
    fn a_statically_linked_program_is_what_the_moved_clock_could_not_reach() {
        // Debian's ldconfig is a static-pie build; the shell is dynamically linked.
        let events = [
            exec(1, "/bin/sh"),
            exec(2, "/sbin/ldconfig"),
            exec(3, "/sbin/ldconfig"),
            exec(4, "/home/sam/.cache/tool"),
            exec(5, "/tmp/helper"),
        ];
        let said = unmoved(&events, "/home/sam");
        assert_eq!(said.len(), 3, "{said:?}");
        assert!(
            said[0].starts_with("/sbin/ldconfig: statically linked"),
            "{said:?}"
        );
        assert!(said[1].starts_with("/home/sam/.cache/tool: a program of the sandbox's own"));
        assert!(said[2].starts_with("/tmp/helper: "));
    }

    #[test]
    fn the_coverage_says_what_was_not_looked_for_and_what_the_clock_did_not_reach() {
        let mut m = glassbox_model::Manifest::default();
        let said = left_out(&m);
        assert!(said[0].contains("no trigger run was made"), "{said:?}");
        m.network.runs.push(glassbox_model::NetworkRun {
            mode: glassbox_model::NetworkMode::Trigger,
            trigger: Some(glassbox_model::TriggerRun {
                clock_offset_days: Some(400),
                limits: vec!["/sbin/ldconfig: statically linked".into()],
                ..Default::default()
            }),
            ..Default::default()
        });
        let said = left_out(&m);
        assert_eq!(said.len(), 2, "{said:?}");
        assert!(said[0].contains("dynamically linked programs only"));
        assert!(said[1].contains("/sbin/ldconfig"));
        // In a microVM the guest's own wall clock moved: every program's.
        m.vm = Some(Default::default());
        assert_eq!(left_out(&m).len(), 1);
    }

    #[test]
    fn the_ci_machine_looks_like_github_actions_and_sets_no_token_in_the_clear() {
        let names: Vec<&str> = Machine::Ci.variables().iter().map(|(k, _)| *k).collect();
        for v in ["CI", "GITHUB_ACTIONS", "RUNNER_OS", "GITHUB_REPOSITORY"] {
            assert!(names.contains(&v), "{v}");
        }
        for (token, _, _) in CI_TOKENS {
            assert!(!names.contains(token), "{token} is planted, not fixed");
        }
    }
}
