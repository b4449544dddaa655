//! Starting what a user would start (issue 34): a bare package as its own documentation
//! configures it ([`Pipeline::readme_config`]), a server started again with what its error
//! said it lacked ([`Pipeline::start_again`]), and the reason of one that still stopped: the
//! line of its stderr that says why ([`error_line`]) and the sandbox limits that can have
//! caused it ([`limits_that_failed`]).

use crate::pipeline::Pipeline;
use crate::session_run::{error_line, set_env};
use crate::{config, install, target, Error};
use glassbox_model::NetworkMode;
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
                set_env(&mut target.env, name.clone(), value);
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
