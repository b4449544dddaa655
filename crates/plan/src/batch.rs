//! The targets of `glassbox batch`: a list, an MCP client configuration, or a folder of MCP
//! Registry `server.json` files.
//!
//! # The list
//!
//! One target a line; blank lines and lines starting with `#` are skipped:
//!
//! ```text
//! # packages, installed and run in the sandbox (arguments for the server after --)
//! npm:@modelcontextprotocol/server-memory@2026.8.31
//! npm:@modelcontextprotocol/server-filesystem -- /srv/data
//! pypi:mcp-server-time==2026.10.19
//! # a command, run in the folder that holds this list (visible to it read-only)
//! -- python3 servers/weather/server.py --units metric
//! ```
//!
//! Words are split as a shell would split them, without expanding anything: whitespace
//! separates, `'...'` is literal, `"..."` keeps spaces (a backslash escapes `"` and `\`
//! inside), a backslash outside quotes escapes the next character. A line that is none of
//! these is an error that names the line; nothing runs then.
//!
//! # Other inputs
//!
//! A file that holds a JSON object is an MCP client configuration (`mcpServers`, `servers`:
//! see [`crate::config`]) or, when it has `packages` or `remotes`, one `server.json`. A folder
//! is read for `*.json` files and `*/server.json`, each a `server.json`. Their commands run in
//! the directory glassbox is started in, as `glassbox audit --config` runs them.

use crate::config::{self, EnvValue, Launch, Vars};
use crate::install::PackageSpec;
use crate::words::split_words;
use crate::Error;
use std::path::{Path, PathBuf};

/// One target of a batch.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Job {
    /// What the summary calls it: the line as written, or the configuration's name for it.
    pub label: String,
    /// How it is started or reached.
    pub launch: Launch,
    /// Its environment (from a configuration).
    pub env: Vec<(String, EnvValue)>,
    /// What its `server.json` names ([`crate::config::ServerEntry::names`]).
    pub names: Vec<glassbox_model::EntryName>,
    /// The directory it runs in (visible read-only).
    pub cwd: PathBuf,
    /// It is an entry of a client configuration (the user's own configuration: a package's
    /// README configuration is not used for it).
    pub configured: bool,
}

/// Reads the targets at `path` (see the module doc); `cwd` is where configurations' commands
/// run.
pub fn load(path: &Path, cwd: &Path, vars: &dyn Vars) -> Result<Vec<Job>, Error> {
    let unreadable =
        |e: std::io::Error| Error::Usage(format!("cannot read {}: {e}", path.display()));
    let jobs = if path.is_dir() {
        let mut files = Vec::new();
        for entry in std::fs::read_dir(path).map_err(unreadable)? {
            let p = entry.map_err(unreadable)?.path();
            if p.is_dir() && p.join("server.json").is_file() {
                files.push(p.join("server.json"));
            } else if p.is_file() && p.extension().is_some_and(|e| e == "json") {
                files.push(p);
            }
        }
        files.sort();
        if files.is_empty() {
            return Err(Error::Usage(format!(
                "{}: no *.json or */server.json files in this folder",
                path.display()
            )));
        }
        let mut jobs = Vec::new();
        for f in files {
            let text = std::fs::read_to_string(&f)
                .map_err(|e| Error::Usage(format!("cannot read {}: {e}", f.display())))?;
            let rel = f.strip_prefix(path).unwrap_or(&f).display().to_string();
            let entries = config::server_json(&text, vars)
                .map_err(|e| Error::Usage(format!("{}: {e}", f.display())))?;
            jobs.extend(entries.into_iter().map(|e| Job {
                label: format!("{rel}: {}", e.name),
                launch: e.launch,
                env: e.env,
                names: e.names,
                cwd: cwd.to_path_buf(),
                configured: true,
            }));
        }
        jobs
    } else {
        let text = std::fs::read_to_string(path).map_err(unreadable)?;
        if text.trim_start().starts_with('{') {
            let value: serde_json::Value = serde_json::from_str(&text)
                .map_err(|e| Error::Usage(format!("{}: not valid JSON: {e}", path.display())))?;
            let registry = ["packages", "remotes"]
                .iter()
                .any(|k| value.get(k).is_some());
            let entries = if registry {
                config::server_json(&text, vars)
            } else {
                config::client_config(&text, vars)
            }
            .map_err(|e| Error::Usage(format!("{}: {e}", path.display())))?;
            entries
                .into_iter()
                .map(|e| Job {
                    label: e.name,
                    launch: e.launch,
                    env: e.env,
                    names: e.names,
                    cwd: cwd.to_path_buf(),
                    configured: true,
                })
                .collect()
        } else {
            let dir = path
                .parent()
                .filter(|p| !p.as_os_str().is_empty())
                .unwrap_or(Path::new("."));
            let dir = std::fs::canonicalize(dir).map_err(unreadable)?;
            parse_list(&text, &dir).map_err(|e| Error::Usage(format!("{}: {e}", path.display())))?
        }
    };
    if jobs.is_empty() {
        return Err(Error::Usage(format!("{}: no targets", path.display())));
    }
    Ok(jobs)
}

/// The targets of a list (see the module doc); commands run in `dir`. Every bad line is named.
pub fn parse_list(text: &str, dir: &Path) -> Result<Vec<Job>, String> {
    let mut jobs = Vec::new();
    let mut errors = Vec::new();
    for (n, raw) in text.lines().enumerate() {
        let line = raw.trim();
        if line.is_empty() || line.starts_with('#') {
            continue;
        }
        match parse_line(line, dir) {
            Ok(launch) => jobs.push(Job {
                label: line.to_string(),
                launch,
                env: Vec::new(),
                names: Vec::new(),
                cwd: dir.to_path_buf(),
                configured: false,
            }),
            Err(e) => errors.push(format!("line {}: {e}", n + 1)),
        }
    }
    if errors.is_empty() {
        Ok(jobs)
    } else {
        Err(errors.join("; "))
    }
}

fn parse_line(line: &str, dir: &Path) -> Result<Launch, String> {
    let words = split_words(line)?;
    let (first, rest) = words.split_first().ok_or("empty line")?;
    if first == "--" {
        if rest.is_empty() {
            return Err("no command after --".into());
        }
        // A launcher line (`-- uvx --from PKG CMD`) is the package it runs, as in a
        // configuration; one glassbox cannot map stops the batch here.
        return match config::launch_of(rest.to_vec()) {
            Launch::Unsupported(why) => Err(why),
            launch => Ok(launch),
        };
    }
    let spec = PackageSpec::parse_in(first, dir)
        .map_err(|e| e.to_string())?
        .ok_or_else(|| {
            format!(
                "{first:?} is not a target: want npm:NAME[@VERSION], pypi:NAME[==VERSION], \
                 npm:./PATH.tgz or -- COMMAND"
            )
        })?;
    let args = match rest.split_first() {
        None => Vec::new(),
        Some((dashes, args)) if dashes == "--" => args.to_vec(),
        Some((w, _)) => {
            return Err(format!(
                "{w:?} after the package: the server's arguments go after --"
            ))
        }
    };
    Ok(Launch::Package {
        package: spec.into(),
        args,
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::install::Registry;

    struct NoVars;
    impl Vars for NoVars {
        fn env(&self, _: &str) -> Option<String> {
            None
        }
    }

    #[test]
    fn a_list_gives_packages_and_commands() {
        let text = "# servers\n\
                    \n\
                    npm:@scope/server@1.2.3\n\
                    npm:server-filesystem -- /srv/data 'my files'\n\
                    \t pypi:mcp-server-time==2026.10.19  \n\
                    -- python3 servers/w/server.py --units metric\n";
        let jobs = parse_list(text, Path::new("/lists")).unwrap();
        assert_eq!(jobs.len(), 4);
        assert_eq!(jobs[0].label, "npm:@scope/server@1.2.3");
        assert_eq!(
            jobs[0].launch,
            Launch::Package {
                package: PackageSpec {
                    registry: Registry::Npm,
                    name: "@scope/server".into(),
                    version: Some("1.2.3".into()),
                    tarball: None,
                    extras: vec![],
                }
                .into(),
                args: vec![],
            }
        );
        assert!(matches!(&jobs[1].launch,
            Launch::Package { package, args } if package.spec.version.is_none() && args == &["/srv/data", "my files"]));
        assert_eq!(jobs[2].label, "pypi:mcp-server-time==2026.10.19");
        assert_eq!(
            jobs[3].launch,
            Launch::Command(
                ["python3", "servers/w/server.py", "--units", "metric"]
                    .map(String::from)
                    .to_vec()
            )
        );
        assert!(jobs.iter().all(|j| j.cwd == Path::new("/lists")));
    }

    #[test]
    fn every_bad_line_is_named() {
        let e = parse_list(
            "npm:ok\nserver.py\n--\nnpm:x extra\npypi:bad name\n-- 'open\nnpm:@nope\n",
            Path::new("/"),
        )
        .unwrap_err();
        for n in 2..=7 {
            assert!(e.contains(&format!("line {n}:")), "line {n} not named: {e}");
        }
        assert!(!e.contains("line 1:"), "{e}");
        assert!(e.contains("want npm:NAME"), "{e}");
        assert!(e.contains("go after --"), "{e}");
    }

    #[test]
    fn launcher_lines_are_the_packages_they_run() {
        let jobs = parse_list(
            "-- uvx --from office-word-mcp-server==1.1.11 word_mcp_server\n-- npx -y server-x@1 /d\n",
            Path::new("/"),
        )
        .unwrap();
        match &jobs[0].launch {
            Launch::Package { package, args } => {
                assert_eq!(package.spec.name, "office-word-mcp-server");
                assert_eq!(package.program.as_deref(), Some("word_mcp_server"));
                assert!(args.is_empty());
            }
            other => panic!("{other:?}"),
        }
        assert!(
            matches!(&jobs[1].launch, Launch::Package { package, args } if package.spec.name == "server-x" && args == &["/d"])
        );
        let e = parse_list(
            "-- uvx --from git+https://e.example/r.git r\n",
            Path::new("/"),
        )
        .unwrap_err();
        assert!(e.contains("line 1:") && e.contains("git repository"), "{e}");
    }

    fn temp(name: &str) -> PathBuf {
        let d = std::env::temp_dir().join(format!("gb-batch-{name}-{}", std::process::id()));
        let _ = std::fs::remove_dir_all(&d);
        std::fs::create_dir_all(&d).unwrap();
        d
    }

    #[test]
    fn files_and_folders_are_read_by_kind() {
        let d = temp("kinds");
        let list = d.join("targets.txt");
        std::fs::write(&list, "-- node index.js\n").unwrap();
        let jobs = load(&list, Path::new("/elsewhere"), &NoVars).unwrap();
        // A list's commands run where the list is.
        assert_eq!(jobs[0].cwd, std::fs::canonicalize(&d).unwrap());

        let cfg = d.join("claude_desktop_config.json");
        std::fs::write(
            &cfg,
            r#"{"mcpServers": {"a": {"command": "node", "args": ["a.js"]},
                               "b": {"command": "npx", "args": ["-y", "@scope/b@2.0.0"]}}}"#,
        )
        .unwrap();
        let jobs = load(&cfg, Path::new("/work"), &NoVars).unwrap();
        assert_eq!(jobs.len(), 2);
        assert_eq!(jobs[0].label, "a");
        assert_eq!(jobs[0].cwd, Path::new("/work"));
        assert!(
            matches!(&jobs[1].launch, Launch::Package { package, .. } if package.spec.name == "@scope/b")
        );

        let reg = d.join("registry");
        std::fs::create_dir_all(reg.join("two")).unwrap();
        let server = |name: &str, pkg: &str| {
            format!(
                r#"{{"name": "{name}", "version": "1.0.0", "packages": [
                    {{"registryType": "npm", "identifier": "{pkg}", "version": "1.0.0",
                      "transport": {{"type": "stdio"}}}}]}}"#
            )
        };
        std::fs::write(reg.join("one.json"), server("io.example/one", "one-mcp")).unwrap();
        std::fs::write(
            reg.join("two/server.json"),
            server("io.example/two", "two-mcp"),
        )
        .unwrap();
        std::fs::write(reg.join("notes.txt"), "not a server").unwrap();
        let jobs = load(&reg, Path::new("/work"), &NoVars).unwrap();
        assert_eq!(jobs.len(), 2, "{jobs:?}");
        assert!(jobs[0].label.starts_with("one.json: "), "{}", jobs[0].label);
        assert!(
            jobs[1].label.starts_with("two/server.json: "),
            "{}",
            jobs[1].label
        );
        assert!(
            matches!(&jobs[1].launch, Launch::Package { package, .. } if package.spec.name == "two-mcp")
        );

        let empty = d.join("empty");
        std::fs::create_dir_all(&empty).unwrap();
        assert!(load(&empty, Path::new("/"), &NoVars).is_err());
        let comments = d.join("comments.txt");
        std::fs::write(&comments, "# nothing\n\n").unwrap();
        let e = load(&comments, Path::new("/"), &NoVars).unwrap_err();
        assert!(e.to_string().contains("no targets"), "{e}");
        let broken = d.join("broken.json");
        std::fs::write(&broken, "{\"mcpServers\": ").unwrap();
        assert!(load(&broken, Path::new("/"), &NoVars).is_err());
        std::fs::remove_dir_all(&d).unwrap();
    }
}
