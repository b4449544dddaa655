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
            "the clock moved +400 days, a CI runner's environment"
        );
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
