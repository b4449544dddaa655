//! What a command line names to audit: `glassbox audit [TARGET] [-- COMMAND]` and its
//! `--secret-host NAME=HOST`. Decided here, as text, so the binary only parses arguments.

use crate::config::EnvValue;
use crate::install::{Package, PackageSpec};
use crate::launcher::{self, Parsed};
use crate::Error;
use std::ffi::OsString;
use std::path::Path;

/// What `glassbox audit` audits, from its `TARGET` and what follows `--`: a package (its
/// server's arguments follow), or a command that runs (resolved against `cwd` now: a command
/// that cannot run is a usage error before anything else). A launcher line (`-- npx -y PKG`,
/// `-- uvx --from SPEC CMD`) is the package it runs, as in a client configuration.
pub fn audited(
    target: Option<&str>,
    cmd: Vec<OsString>,
    cwd: &Path,
) -> Result<(Option<Package>, Vec<OsString>), Error> {
    if let Some(t) = target {
        let spec = PackageSpec::parse(t)?.ok_or_else(|| {
            Error::Usage(format!(
                "{t:?} is not a package (npm:NAME[@VERSION], pypi:NAME[==VERSION] or \
                 npm:./PATH.tgz); a command goes after --"
            ))
        })?;
        return Ok((Some(spec.into()), cmd));
    }
    if cmd.is_empty() {
        return Err(Error::Usage(
            "nothing to audit: give a package (npm:NAME, pypi:NAME) or -- COMMAND".into(),
        ));
    }
    let words: Vec<String> = cmd
        .iter()
        .map(|a| a.to_string_lossy().into_owned())
        .collect();
    match launcher::parse(&words) {
        Parsed::Package(package, args) => Ok((Some(*package), crate::config::os_args(&args))),
        Parsed::Refused(why) => Err(Error::Usage(format!("not audited: {why}"))),
        Parsed::Command => {
            crate::target::resolve(&cmd, cwd)?;
            Ok((None, cmd))
        }
    }
}

/// The hosts `--secret-host NAME=HOST` documents for declared secrets (repeatable).
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct SecretHosts(Vec<(String, String)>);

impl SecretHosts {
    /// Each `NAME=HOST`; anything else is a usage error naming it.
    pub fn parse(given: &[String]) -> Result<SecretHosts, Error> {
        given
            .iter()
            .map(|s| match s.split_once('=') {
                Some((n, h)) if !n.is_empty() && !h.is_empty() => {
                    Ok((n.to_string(), h.to_ascii_lowercase()))
                }
                _ => Err(Error::Usage(format!(
                    "--secret-host takes NAME=HOST, not {s:?}"
                ))),
            })
            .collect::<Result<_, _>>()
            .map(SecretHosts)
    }

    /// Adds to each declared secret of `env` the hosts given for its name (once each).
    pub fn apply(&self, env: &mut [(String, EnvValue)]) {
        for (name, value) in env {
            if let EnvValue::Secret { hosts } = value {
                for (n, h) in &self.0 {
                    if n == name && !hosts.iter().any(|x| x == h) {
                        hosts.push(h.clone());
                    }
                }
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_target_a_launcher_line_or_a_command() {
        let cwd = std::env::temp_dir();
        let os = |w: &[&str]| w.iter().map(OsString::from).collect::<Vec<_>>();
        let (p, args) = audited(Some("npm:left-pad@1.3.0"), os(&["--x"]), &cwd).unwrap();
        assert!(p.is_some());
        assert_eq!(args, os(&["--x"]));
        let err = audited(Some("left-pad"), vec![], &cwd)
            .unwrap_err()
            .to_string();
        assert!(err.contains("is not a package"), "{err}");
        let err = audited(None, vec![], &cwd).unwrap_err().to_string();
        assert!(err.starts_with("nothing to audit"), "{err}");
        let (p, args) = audited(None, os(&["npx", "-y", "left-pad@1.3.0", "--y"]), &cwd).unwrap();
        assert!(p.is_some());
        assert_eq!(args, os(&["--y"]));
        let (p, args) = audited(None, os(&["sh", "-c", "true"]), &cwd).unwrap();
        assert!(p.is_none());
        assert_eq!(args, os(&["sh", "-c", "true"]));
        let err = audited(None, os(&["no-such-program-here"]), &cwd).unwrap_err();
        assert!(matches!(err, Error::CommandNotFound(_)), "{err}");
    }

    #[test]
    fn secret_hosts_are_name_equals_host_and_added_once() {
        let err = SecretHosts::parse(&["TOKEN".into()])
            .unwrap_err()
            .to_string();
        assert_eq!(err, "--secret-host takes NAME=HOST, not \"TOKEN\"");
        assert!(SecretHosts::parse(&["=h".into()]).is_err());
        let given =
            SecretHosts::parse(&["TOKEN=API.Vendor.example".into(), "OTHER=x.example".into()])
                .unwrap();
        let mut env = vec![
            (
                "TOKEN".to_string(),
                EnvValue::Secret {
                    hosts: vec!["api.vendor.example".into()],
                },
            ),
            ("PLAIN".to_string(), EnvValue::Plain("v".into())),
        ];
        given.apply(&mut env);
        assert_eq!(
            env[0].1,
            EnvValue::Secret {
                hosts: vec!["api.vendor.example".into()]
            }
        );
        assert_eq!(env[1].1, EnvValue::Plain("v".into()));
    }
}
