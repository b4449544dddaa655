//! Starting what a user would start (issue 34): a bare package as its own documentation
//! configures it ([`Pipeline::readme_config`]), a server started again with what its error
//! said it lacked ([`Pipeline::start_again`]), and the reason of one that still stopped: the
//! line of its stderr that says why ([`error_line`]) and the sandbox limits that can have
//! caused it ([`limits_that_failed`]).

use crate::{config, install, target, Error, Pipeline};
use glassbox_model::{NetworkMode, ServerExit};
use std::path::Path;

impl Pipeline<'_> {
    /// A package given bare (no arguments, no environment, no program named) takes the
    /// configuration it documents for itself: its arguments and environment become the
    /// server's, placeholders filled with its own folder and a test URL; what was used is
    /// recorded.
    pub(crate) fn readme_config(
        &mut self,
        package: &install::Package,
        dir: &Path,
    ) -> Option<glassbox_model::ReadmeConfig> {
        let bare = self.opts.command.is_empty()
            && self.opts.server_env.is_empty()
            && package.program.is_none();
        if !(self.opts.readme_config && bare) {
            return None;
        }
        let fill = glassbox_plan::readme::Fill {
            path: glassbox_sandbox::workspace::dir(&self.secrets.home),
            files: self.manifest.sandbox.home.clone(),
            url: "https://api.example.test/".into(),
        };
        let (source, s) = glassbox_plan::readme::find(&package.spec, dir, &fill)?;
        self.opts.command = config::os_args(&s.args);
        self.opts.server_env = s.env.clone();
        Some(glassbox_model::ReadmeConfig {
            source,
            entry: s.entry,
            args: s.args,
            env: s
                .env
                .iter()
                .map(|(n, v)| match v {
                    config::EnvValue::Secret { .. } => format!("{n} (a canary)"),
                    config::EnvValue::Plain(_) => n.clone(),
                })
                .collect(),
            filled: s.filled,
        })
    }

    /// A server that stopped before answering `initialize` and said what it lacked (an
    /// environment variable, a required option, a usual subcommand: [`glassbox_plan::lack`])
    /// is started again with it supplied, at most [`MAX_STARTS`] more times, never twice for
    /// the same lack: a secret-named variable gets a canary (a planted secret like a
    /// configuration's), a URL-named one a test URL, a path-named one the server's folder,
    /// any other `glassbox`. The start that failed stays evidence: its events and flows with
    /// the others, its run in `manifest.network.runs` with its session, its transcript and
    /// stderr under their own names, and `manifest.target.starts` says what it said and was
    /// given.
    pub(crate) fn start_again(
        &mut self,
        mut target: target::Resolved,
        mode: NetworkMode,
    ) -> Result<target::Resolved, Error> {
        let mut tried: Vec<glassbox_plan::lack::Lack> = Vec::new();
        for k in 1..=MAX_STARTS {
            let s = &self.manifest.session;
            if s.completed || s.protocol_version.is_some() {
                break;
            }
            let stderr = tail(&self.dir.join("stderr.log"), glassbox_plan::lack::MAX_READ);
            let Some(lack) = glassbox_plan::lack::lack(&stderr) else {
                break;
            };
            if tried.contains(&lack) {
                break;
            }
            let supplied = self.supply(&mut target, &lack)?;
            // The start that failed, under its own names.
            let mut files = Vec::new();
            for (from, to) in [
                (
                    "transcript.jsonl".to_string(),
                    format!("transcript-start-{k}.jsonl"),
                ),
                ("stderr.log".to_string(), format!("stderr-start-{k}.log")),
                ("stdout.log".to_string(), format!("stdout-start-{k}.log")),
            ] {
                if std::fs::rename(self.dir.join(&from), self.dir.join(&to)).is_ok() {
                    files.push(to);
                }
            }
            let m = &mut self.manifest;
            if let Some(run) = m.network.runs.last_mut() {
                run.session = Some(m.session.clone());
                run.server_exit = m.server_exit.clone();
            }
            m.target.starts.push(glassbox_model::StartAttempt {
                said: error_line(&stderr).unwrap_or_default(),
                lacked: lack.to_string(),
                supplied,
                files,
            });
            tried.push(lack);
            self.bundle.write_manifest(&self.manifest)?;
            self.network_run(&target, true, mode, None)?;
        }
        Ok(target)
    }

    /// Gives `target` what it lacked (see [`Pipeline::start_again`]); says what it gave.
    fn supply(
        &mut self,
        target: &mut target::Resolved,
        lack: &glassbox_plan::lack::Lack,
    ) -> Result<String, Error> {
        use glassbox_plan::lack::Lack;
        let value_for = |name: &str, folder: &str| -> String {
            let upper = name.to_ascii_uppercase();
            let has = |w: &[&str]| w.iter().any(|x| upper.contains(x));
            if has(&["URL", "URI", "ENDPOINT", "HOST", "BASE"]) {
                "https://api.example.test/".into()
            } else if has(&[
                "PATH",
                "DIR",
                "FILE",
                "FOLDER",
                "ROOT",
                "WORKSPACE",
                "PROJECT",
            ]) {
                folder.to_string()
            } else if has(&["PORT"]) {
                "8080".into()
            } else {
                "glassbox".into()
            }
        };
        // A folder it lacks is the sample workspace, as a user gives their project.
        let folder = glassbox_sandbox::workspace::dir(&self.secrets.home);
        Ok(match lack {
            Lack::Env(name) => {
                let (value, said) = if config::secret_name(name) {
                    let canary = self.declared_canary(name, Vec::new())?;
                    (canary, format!("{name}, a canary"))
                } else {
                    let v = value_for(name, &folder);
                    let said = format!("{name}={v}");
                    (v, said)
                };
                crate::set_env(&mut target.env, name.clone(), value);
                said
            }
            Lack::Option(flag) => {
                let v = value_for(flag.trim_start_matches('-'), &folder);
                target.argv.push(flag.into());
                target.argv.push(v.clone().into());
                format!("{flag} {v}")
            }
            Lack::Subcommand(c) => {
                // The program's first argument: after the script an interpreter runs.
                let first = target.argv.first().map(|a| {
                    let name = Path::new(a).file_name().unwrap_or_default();
                    let name = name.to_string_lossy();
                    name.starts_with("python") || ["node", "deno", "bun"].contains(&&*name)
                });
                let at = match first {
                    Some(true) => 2,
                    _ => 1,
                };
                let at = at.min(target.argv.len());
                target.argv.insert(at, c.into());
                format!("the subcommand {c}")
            }
        })
    }
}

/// How many more times a server that stopped for lack of a setting is started
/// ([`Pipeline::start_again`]).
pub(crate) const MAX_STARTS: usize = 3;

/// The last `max` bytes of a file, as text (empty when it cannot be read).
fn tail(path: &Path, max: usize) -> String {
    use std::io::{Read, Seek, SeekFrom};
    let Ok(mut f) = std::fs::File::open(path) else {
        return String::new();
    };
    let len = f.metadata().map(|m| m.len()).unwrap_or(0);
    let _ = f.seek(SeekFrom::Start(len.saturating_sub(max as u64)));
    let mut buf = Vec::new();
    let _ = f.take(max as u64).read_to_end(&mut buf);
    String::from_utf8_lossy(&buf).into_owned()
}

/// Words of a line that says what went wrong (lower case).
const ERROR_WORDS: &[&str] = &[
    "error",
    "exception",
    "fatal",
    "panic",
    "missing",
    "required",
    "must be",
    "not set",
    "not found",
    "no such",
    "invalid",
    "usage:",
    "expected",
    "cannot",
    "can't",
    "could not",
    "failed",
    "unable",
    "denied",
    "refused",
    "unknown",
    "not specified",
    "please set",
];

/// The line of the server's stderr that says why it stopped, printable and short, for a
/// reason: the last line that says an error (a Python traceback's exception, Node's `Error:
/// ...` above its stack and its `Node.js v20` line, a CLI's "required option ... not
/// specified"), else the last line that is no stack frame; `None` when it wrote nothing.
pub(crate) fn error_line(s: &str) -> Option<String> {
    let frame = |l: &str| {
        let t = l.trim_start();
        t.starts_with("at ")
            || t.starts_with("File \"")
            || t.starts_with("Node.js v")
            || t.starts_with("^")
            || t.starts_with("~~~")
            || t.starts_with("...")
            || t.starts_with("Traceback (most recent call last)")
            || t.starts_with("triggerUncaughtException")
    };
    let lines: Vec<&str> = s
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty() && !frame(l))
        .collect();
    let says_error = |l: &&&str| {
        let lower = l.to_lowercase();
        ERROR_WORDS.iter().any(|w| lower.contains(w))
    };
    let line = lines.iter().rev().find(says_error).or(lines.last())?;
    Some(glassbox_model::truncate(
        &glassbox_model::printable(line),
        300,
    ))
}

/// The limits among `reached` that can have made the server stop: processes killed out of
/// memory when it was killed or said it ran out; forks refused when it said it could not
/// start a process or thread; a full mount when it said so; CPU throttling when it answered
/// nothing in time. Memory reclaimed and throttling alone stop nothing.
pub(crate) fn limits_that_failed(
    reached: &[String],
    exit: Option<&ServerExit>,
    stderr: &str,
) -> Vec<String> {
    let said = stderr.to_lowercase();
    let says = |words: &[&str]| words.iter().any(|w| said.contains(w));
    let killed = matches!(
        exit,
        Some(ServerExit::Signaled {
            by_glassbox: false,
            ..
        })
    );
    reached
        .iter()
        .filter(|l| {
            if l.contains("killed out of memory") {
                killed || says(&["out of memory", "cannot allocate", "enomem", "memoryerror"])
            } else if l.starts_with("pids limit") {
                says(&[
                    "resource temporarily unavailable",
                    "eagain",
                    "can't start new thread",
                    "cannot create thread",
                    "pthread_create",
                    "fork",
                    "spawn",
                ])
            } else if l.contains(" is full (") {
                says(&["no space left", "enospc", "disk full", "disk quota"])
            } else if l.starts_with("cpu limit") {
                exit.is_none()
            } else {
                false
            }
        })
        .cloned()
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_reason_quotes_the_line_that_says_the_error() {
        let node = "file:///app/dist/index.js:12\n    throw new Error('GITHUB_TOKEN is required');\n    ^\n\nError: GITHUB_TOKEN is required\n    at Object.<anonymous> (/app/dist/index.js:12:11)\n    at Module._compile (node:internal/modules/cjs/loader:1256:14)\n\nNode.js v20.11.0\n";
        assert_eq!(
            error_line(node).as_deref(),
            Some("Error: GITHUB_TOKEN is required")
        );
        let python = "Traceback (most recent call last):\n  File \"/v/bin/srv\", line 8, in <module>\n    sys.exit(main())\nKeyError: 'API_KEY'\n";
        assert_eq!(error_line(python).as_deref(), Some("KeyError: 'API_KEY'"));
        let cli =
            "Usage: srv [options]\nerror: required option '--dev-server-url <url>' not specified\n";
        assert_eq!(
            error_line(cli).as_deref(),
            Some("error: required option '--dev-server-url <url>' not specified")
        );
        assert_eq!(error_line("starting...\nbye\n").as_deref(), Some("bye"));
        assert_eq!(error_line("\n  \n"), None);
    }

    #[test]
    fn a_limit_is_named_only_where_it_can_have_stopped_the_server() {
        let reached = vec![
            "memory limit (1 GiB) reached: memory reclaimed, nothing killed".to_string(),
            "pids limit (512) reached: 3 forks refused".to_string(),
            "/tmp is full (64 MiB tmpfs)".to_string(),
        ];
        let exited = ServerExit::Exited { code: 1 };
        // A missing token: none of them.
        assert!(limits_that_failed(&reached, Some(&exited), "Error: TOKEN is required").is_empty());
        // A fork refused, said by the server: that one.
        assert_eq!(
            limits_that_failed(&reached, Some(&exited), "Error: spawn EAGAIN"),
            vec![reached[1].clone()]
        );
        assert_eq!(
            limits_that_failed(
                &reached,
                Some(&exited),
                "OSError: [Errno 28] No space left on device"
            ),
            vec![reached[2].clone()]
        );
        let oom = vec!["memory limit (1 GiB) reached: 1 process killed out of memory".to_string()];
        let killed = ServerExit::Signaled {
            signal: 9,
            by_glassbox: false,
        };
        assert_eq!(limits_that_failed(&oom, Some(&killed), ""), oom);
    }
}
