//! Servers as users already declare them: MCP client configurations and MCP Registry
//! `server.json` files.
//!
//! # Client configurations
//!
//! | client | where the servers are |
//! |---|---|
//! | Claude Desktop, Cursor, Claude Code `.mcp.json` | `mcpServers.<name>` |
//! | Claude Code `~/.claude.json` | `mcpServers.<name>` and `projects.<path>.mcpServers.<name>` |
//! | VS Code (`mcp.json`, or `settings.json` under `mcp`) | `servers.<name>`, with `inputs` |
//!
//! An entry has `command`/`args`/`env` (stdio) or `url` (`type` `http`, `streamable-http`
//! or `sse`). Strings are expanded: `${VAR}`, `${VAR:-default}`, `${env:VAR}` from the
//! environment glassbox runs in, `${input:ID}` from VS Code's `inputs`. A server started with
//! `npx [-y] PACKAGE` or `uvx PACKAGE` is audited as the package (installed and traced, see
//! [`crate::install`]) rather than left to download itself at run time.
//!
//! # Secrets
//!
//! A config's environment usually holds real credentials. None of them reaches the audited
//! server: a variable that is secret (a VS Code `password` input, a `server.json`
//! `isSecret`, or a name that says so: `TOKEN`, `KEY`, `SECRET`, `PASSWORD`, `AUTH`,
//! `CREDENTIAL`...) or required without a value gets a fresh canary value instead, listed
//! in the manifest's honeytokens as `env:NAME`, so that it is caught wherever it leaves.
//!
//! # server.json
//!
//! `packages[]` (`registryType` `npm` or `pypi`, `identifier`, `version`,
//! `runtimeArguments`, `packageArguments`, `environmentVariables`, `transport`) each become
//! an entry; `remotes[]` become remote entries (audited over streamable HTTP where the
//! transport allows it, otherwise reported as not auditable here).

use crate::install::{Package, PackageSpec, Registry};
use crate::Error;
use serde_json::{Map, Value};
use std::ffi::OsString;

/// How an entry is reached.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Launch {
    /// A package to install and run, with the server's arguments.
    Package {
        /// The package, what is installed beside it, the program.
        package: Package,
        /// The server's arguments.
        args: Vec<String>,
    },
    /// A command run as a stdio server.
    Command(Vec<String>),
    /// A remote server (`http`/`streamable-http` or `sse`).
    Remote {
        /// Its URL.
        url: String,
        /// `streamable-http` or `sse`.
        transport: String,
    },
    /// Something glassbox cannot run here, with why.
    Unsupported(String),
}

/// One environment variable for the server.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum EnvValue {
    /// A plain value.
    Plain(String),
    /// A secret: the server gets a canary instead, which may go to `hosts` (the hosts its
    /// server is documented to send it to), and nowhere else.
    Secret {
        /// Host names (a host covers its subdomains).
        hosts: Vec<String>,
    },
}

impl EnvValue {
    /// A secret with no documented host.
    pub fn secret() -> EnvValue {
        EnvValue::Secret { hosts: Vec::new() }
    }
}

/// The hosts of the `http://` and `https://` URLs in `text` (a variable's description:
/// "Create a key at https://console.weather.example/keys"), lower-cased.
pub fn hosts_in(text: &str) -> Vec<String> {
    glassbox_model::hosts::urls_in(text)
        .into_iter()
        .filter(|(scheme, h)| matches!(scheme.as_str(), "http" | "https") && h.contains('.'))
        .map(|(_, h)| h)
        .collect()
}

/// One server of a configuration.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ServerEntry {
    /// Its name in the file (`mcpServers.<name>`; `projects.<path>/<name>`).
    pub name: String,
    /// How it is started or reached.
    pub launch: Launch,
    /// Its environment.
    pub env: Vec<(String, EnvValue)>,
    /// What its `server.json` names (site, repository, remotes, variables' descriptions):
    /// egress there is explained.
    pub names: Vec<glassbox_model::EntryName>,
}

/// Where `${...}` values come from.
pub trait Vars {
    /// An environment variable.
    fn env(&self, name: &str) -> Option<String>;
}

/// The environment glassbox runs in.
#[derive(Debug)]
pub struct ProcessEnv;

impl Vars for ProcessEnv {
    fn env(&self, name: &str) -> Option<String> {
        std::env::var(name).ok()
    }
}

fn bad(what: impl Into<String>) -> Error {
    Error::Usage(what.into())
}

/// Whether a variable's name says it holds a secret.
pub fn secret_name(name: &str) -> bool {
    let upper = name.to_ascii_uppercase();
    let words: Vec<&str> = upper
        .split(|c: char| !c.is_ascii_alphanumeric())
        .filter(|w| !w.is_empty())
        .collect();
    const SECRET_WORDS: &[&str] = &[
        "TOKEN",
        "KEY",
        "SECRET",
        "PASSWORD",
        "PASSWD",
        "PASS",
        "PAT",
        "AUTH",
        "CREDENTIAL",
        "CREDENTIALS",
        "APIKEY",
        "COOKIE",
        "SESSION",
        "PRIVATE",
        "DSN",
    ];
    words.iter().any(|w| SECRET_WORDS.contains(w))
        || ["TOKEN", "SECRET", "PASSWORD", "APIKEY"]
            .iter()
            .any(|s| upper.contains(s))
}

/// Expands `${VAR}`, `${VAR:-default}`, `${env:VAR}` and `${input:ID}`. Returns the value
/// and whether an input it used is secret. An unknown variable expands to the empty string
/// (as a shell would), an unknown input is an error.
fn expand(s: &str, vars: &dyn Vars, inputs: &[(String, bool)]) -> Result<(String, bool), Error> {
    let mut out = String::new();
    let mut secret = false;
    let mut rest = s;
    while let Some(i) = rest.find("${") {
        out.push_str(&rest[..i]);
        let after = &rest[i + 2..];
        let Some(end) = after.find('}') else {
            out.push_str(&rest[i..]);
            rest = "";
            break;
        };
        let inner = &after[..end];
        if let Some(id) = inner.strip_prefix("input:") {
            match inputs.iter().find(|(n, _)| n == id) {
                Some((_, password)) => {
                    // The value a person would type: never known here. A secret one is
                    // replaced by a canary later; another gets a recognisable placeholder.
                    secret |= *password;
                    out.push_str(&format!("glassbox-input-{id}"));
                }
                None => return Err(bad(format!("${{input:{id}}} names no input"))),
            }
        } else if let Some(name) = inner.strip_prefix("env:") {
            out.push_str(&vars.env(name).unwrap_or_default());
        } else if let Some((name, default)) = inner.split_once(":-") {
            match vars.env(name).filter(|v| !v.is_empty()) {
                Some(v) => out.push_str(&v),
                None => out.push_str(default),
            }
        } else {
            out.push_str(&vars.env(inner).unwrap_or_default());
        }
        rest = &after[end + 1..];
    }
    out.push_str(rest);
    Ok((out, secret))
}

/// A command line, as a package when a launcher runs one (`npx -y PKG`, `uvx --from SPEC
/// CMD`: [`crate::launcher`]), refused when it is a launcher line glassbox cannot map.
pub fn launch_of(argv: Vec<String>) -> Launch {
    if argv.is_empty() {
        return Launch::Unsupported("empty command".into());
    }
    match crate::launcher::parse(&argv) {
        crate::launcher::Parsed::Command => Launch::Command(argv),
        crate::launcher::Parsed::Package(package, args) => Launch::Package {
            package: *package,
            args,
        },
        crate::launcher::Parsed::Refused(why) => Launch::Unsupported(why),
    }
}

/// The `inputs` of a VS Code configuration: `(id, password)`.
fn inputs(v: Option<&Value>) -> Vec<(String, bool)> {
    v.and_then(Value::as_array)
        .map(|a| {
            a.iter()
                .filter_map(|i| {
                    let id = i.get("id")?.as_str()?.to_string();
                    let password = i.get("password").and_then(Value::as_bool).unwrap_or(false);
                    Some((id, password))
                })
                .collect()
        })
        .unwrap_or_default()
}

fn strings(v: Option<&Value>, what: &str) -> Result<Vec<String>, Error> {
    match v {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::Array(a)) => a
            .iter()
            .map(|x| match x {
                Value::String(s) => Ok(s.clone()),
                Value::Number(n) => Ok(n.to_string()),
                Value::Bool(b) => Ok(b.to_string()),
                _ => Err(bad(format!("{what}: every argument must be a string"))),
            })
            .collect(),
        Some(_) => Err(bad(format!("{what} must be an array of strings"))),
    }
}

/// One `mcpServers`/`servers` entry.
fn entry(
    name: &str,
    v: &Value,
    vars: &dyn Vars,
    inputs: &[(String, bool)],
) -> Result<ServerEntry, Error> {
    let obj = v
        .as_object()
        .ok_or_else(|| bad(format!("server {name:?} is not an object")))?;
    let kind = obj.get("type").and_then(Value::as_str).unwrap_or("");
    let mut env = Vec::new();
    if let Some(e) = obj.get("env") {
        let e = e
            .as_object()
            .ok_or_else(|| bad(format!("server {name:?}: env must be an object")))?;
        for (k, val) in e {
            let raw = match val {
                Value::String(s) => s.clone(),
                Value::Null => String::new(),
                other => other.to_string(),
            };
            let (value, from_secret_input) = expand(&raw, vars, inputs)?;
            let value = if from_secret_input || secret_name(k) {
                EnvValue::secret()
            } else {
                EnvValue::Plain(value)
            };
            env.push((k.clone(), value));
        }
    }
    let launch = match (obj.get("url"), obj.get("command")) {
        (Some(url), _) if kind != "stdio" => {
            let url = url
                .as_str()
                .ok_or_else(|| bad(format!("server {name:?}: url must be a string")))?;
            let (url, _) = expand(url, vars, inputs)?;
            Launch::Remote {
                url,
                transport: if kind == "sse" {
                    "sse"
                } else {
                    "streamable-http"
                }
                .into(),
            }
        }
        (_, Some(cmd)) => {
            let cmd = cmd
                .as_str()
                .ok_or_else(|| bad(format!("server {name:?}: command must be a string")))?;
            let mut argv = vec![expand(cmd, vars, inputs)?.0];
            for a in strings(obj.get("args"), &format!("server {name:?}: args"))? {
                argv.push(expand(&a, vars, inputs)?.0);
            }
            launch_of(argv)
        }
        _ => {
            return Err(bad(format!(
                "server {name:?} has neither a command nor a url"
            )))
        }
    };
    Ok(ServerEntry {
        name: name.to_string(),
        launch,
        env,
        names: Vec::new(),
    })
}

fn entries(
    prefix: &str,
    servers: &Map<String, Value>,
    vars: &dyn Vars,
    inputs: &[(String, bool)],
    out: &mut Vec<ServerEntry>,
) -> Result<(), Error> {
    for (name, v) in servers {
        let mut e = entry(name, v, vars, inputs)?;
        e.name = format!("{prefix}{name}");
        out.push(e);
    }
    Ok(())
}

/// The servers of an MCP client configuration (any of the layouts above).
pub fn client_config(text: &str, vars: &dyn Vars) -> Result<Vec<ServerEntry>, Error> {
    let v: Value =
        serde_json::from_str(text).map_err(|e| bad(format!("not a JSON configuration: {e}")))?;
    let root = v
        .as_object()
        .ok_or_else(|| bad("the configuration is not a JSON object"))?;
    let mut out = Vec::new();
    // VS Code's settings.json keeps the same under `mcp`.
    let vscode = root.get("mcp").and_then(Value::as_object).unwrap_or(root);
    let ins = inputs(vscode.get("inputs"));
    let mut found = false;
    for (key, holder) in [("mcpServers", root), ("servers", vscode)] {
        if let Some(s) = holder.get(key) {
            let s = s
                .as_object()
                .ok_or_else(|| bad(format!("{key} must be an object")))?;
            entries("", s, vars, &ins, &mut out)?;
            found = true;
        }
    }
    if let Some(projects) = root.get("projects").and_then(Value::as_object) {
        for (path, p) in projects {
            if let Some(s) = p.get("mcpServers").and_then(Value::as_object) {
                entries(&format!("{path}/"), s, vars, &ins, &mut out)?;
                found = true;
            }
        }
    }
    if !found {
        return Err(bad(
            "no servers in this configuration (looked for mcpServers, servers, mcp.servers and \
             projects.*.mcpServers)",
        ));
    }
    // Empty server lists are refused like missing ones (as a server.json without packages and
    // remotes is): `glassbox audit --config` would otherwise audit nothing and exit 0, as if
    // the servers had passed (fuzz finding, config).
    if out.is_empty() {
        return Err(bad("the configuration's server lists are empty"));
    }
    Ok(out)
}

/// The value of one `runtimeArguments`/`packageArguments` item, as argv words.
fn argument(a: &Value, vars: &dyn Vars) -> Result<Vec<String>, Error> {
    let kind = a
        .get("type")
        .and_then(Value::as_str)
        .unwrap_or("positional");
    let value = a
        .get("value")
        .or_else(|| a.get("default"))
        .and_then(Value::as_str)
        .map(str::to_string)
        .or_else(|| {
            a.get("valueHint")
                .and_then(Value::as_str)
                .map(str::to_string)
        });
    let value = match value {
        Some(v) => Some(expand(&v, vars, &[])?.0),
        None => None,
    };
    match kind {
        "named" => {
            let name = a
                .get("name")
                .and_then(Value::as_str)
                .ok_or_else(|| bad("a named argument without a name"))?;
            Ok(match value {
                Some(v) => vec![name.to_string(), v],
                None => vec![name.to_string()],
            })
        }
        _ => Ok(value.into_iter().collect()),
    }
}

/// The servers of an MCP Registry `server.json`: its packages and remotes.
pub fn server_json(text: &str, vars: &dyn Vars) -> Result<Vec<ServerEntry>, Error> {
    let v: Value =
        serde_json::from_str(text).map_err(|e| bad(format!("not a JSON server.json: {e}")))?;
    let name = v.get("name").and_then(Value::as_str).unwrap_or("server");
    let names = crate::explain::server_json_names(&v);
    let mut out = Vec::new();
    for (i, p) in v
        .get("packages")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let registry = p
            .get("registryType")
            .or_else(|| p.get("registry_name"))
            .and_then(Value::as_str)
            .unwrap_or("");
        let id = p
            .get("identifier")
            .or_else(|| p.get("name"))
            .and_then(Value::as_str)
            .unwrap_or("");
        let version = p.get("version").and_then(Value::as_str);
        let mut env = Vec::new();
        for e in p
            .get("environmentVariables")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            let Some(n) = e.get("name").and_then(Value::as_str) else {
                continue;
            };
            let flag = |k: &str| e.get(k).and_then(Value::as_bool).unwrap_or(false);
            let given = e
                .get("value")
                .or_else(|| e.get("default"))
                .and_then(Value::as_str);
            let value =
                if flag("isSecret") || secret_name(n) || (flag("isRequired") && given.is_none()) {
                    EnvValue::Secret {
                        hosts: hosts_in(e.get("description").and_then(Value::as_str).unwrap_or("")),
                    }
                } else {
                    EnvValue::Plain(expand(given.unwrap_or(""), vars, &[])?.0)
                };
            env.push((n.to_string(), value));
        }
        let mut args = Vec::new();
        for a in p
            .get("packageArguments")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
        {
            args.extend(argument(a, vars)?);
        }
        let runtime: Vec<String> = p
            .get("runtimeArguments")
            .and_then(Value::as_array)
            .into_iter()
            .flatten()
            .map(|a| argument(a, vars))
            .collect::<Result<Vec<_>, _>>()?
            .concat();
        let transport = p
            .get("transport")
            .and_then(|t| t.get("type"))
            .and_then(Value::as_str)
            .unwrap_or("stdio");
        let spec = match registry {
            "npm" => PackageSpec::parse(&format!(
                "npm:{id}{}",
                version.map(|v| format!("@{v}")).unwrap_or_default()
            )),
            "pypi" => PackageSpec::parse(&format!(
                "pypi:{id}{}",
                version.map(|v| format!("=={v}")).unwrap_or_default()
            )),
            other => Err(bad(format!("registry {other:?} is not supported here"))),
        };
        let launch = match spec {
            _ if transport != "stdio" => Launch::Unsupported(format!(
                "package transport {transport:?}: a server that listens on a port is not \
                 audited by this version yet"
            )),
            // A package alone: its own program (server.json names a package, not a command).
            Ok(Some(spec)) if runtime.is_empty() => Launch::Package {
                package: spec.into(),
                args,
            },
            // Runtime arguments are the launcher's (`npx -y`, `uvx --with X`): read as the
            // line a client would run.
            Ok(Some(spec)) => {
                let hint = p.get("runtimeHint").and_then(Value::as_str);
                let launcher = hint.unwrap_or(match spec.registry {
                    Registry::Npm => "npx",
                    Registry::Pypi => "uvx",
                });
                let mut argv = vec![launcher.to_string()];
                argv.extend(runtime.iter().cloned());
                argv.push(
                    spec.display()
                        .split_once(':')
                        .map(|(_, r)| r.to_string())
                        .unwrap_or_default(),
                );
                argv.extend(args);
                match launch_of(argv) {
                    Launch::Package { mut package, args } => {
                        if package.program.as_deref() == Some(spec.name.as_str()) {
                            package.program = None;
                        }
                        Launch::Package { package, args }
                    }
                    Launch::Command(argv) => Launch::Unsupported(format!(
                        "runtime {:?} is not a launcher glassbox knows",
                        argv[0]
                    )),
                    other => other,
                }
            }
            Ok(None) => Launch::Unsupported(format!("{id:?} is not a package")),
            Err(e) => Launch::Unsupported(e.to_string()),
        };
        out.push(ServerEntry {
            name: format!("{name} (package {})", i + 1),
            launch,
            env,
            names: names.clone(),
        });
    }
    for (i, r) in v
        .get("remotes")
        .and_then(Value::as_array)
        .into_iter()
        .flatten()
        .enumerate()
    {
        let url = r.get("url").and_then(Value::as_str).unwrap_or("");
        let kind = r.get("type").and_then(Value::as_str).unwrap_or("");
        out.push(ServerEntry {
            name: format!("{name} (remote {})", i + 1),
            launch: Launch::Remote {
                url: url.to_string(),
                transport: kind.to_string(),
            },
            env: Vec::new(),
            names: names.clone(),
        });
    }
    if out.is_empty() {
        return Err(bad("server.json lists no packages and no remotes"));
    }
    Ok(out)
}

/// `--server NAME`: the entries to audit (all when `None`).
pub fn select(entries: Vec<ServerEntry>, name: Option<&str>) -> Result<Vec<ServerEntry>, Error> {
    let Some(name) = name else {
        return Ok(entries);
    };
    let names: Vec<String> = entries.iter().map(|e| e.name.clone()).collect();
    let chosen: Vec<ServerEntry> = entries
        .into_iter()
        .filter(|e| e.name == name || e.name.rsplit('/').next() == Some(name))
        .collect();
    if chosen.is_empty() {
        return Err(bad(format!(
            "no server named {name:?} (the configuration has: {})",
            names.join(", ")
        )));
    }
    Ok(chosen)
}

/// The argv of a command launch, as the audit takes it.
pub fn os_args(args: &[String]) -> Vec<OsString> {
    args.iter().map(OsString::from).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    struct Env(Vec<(&'static str, &'static str)>);
    impl Vars for Env {
        fn env(&self, name: &str) -> Option<String> {
            self.0
                .iter()
                .find(|(k, _)| *k == name)
                .map(|(_, v)| v.to_string())
        }
    }

    fn env() -> Env {
        Env(vec![("HOME", "/home/me"), ("EMPTY", "")])
    }

    #[test]
    fn claude_desktop_entries_with_npx_become_packages() {
        let cfg = r#"{"mcpServers": {
            "memory": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-memory@2026.8.31"]},
            "files": {"command": "npx", "args": ["-y", "@modelcontextprotocol/server-filesystem", "${HOME}/docs"]},
            "time": {"command": "uvx", "args": ["mcp-server-time", "--local-timezone=UTC"]},
            "local": {"command": "python3", "args": ["server.py"], "env": {"GITHUB_TOKEN": "ghp_real", "LOG_LEVEL": "${LEVEL:-info}"}},
            "remote": {"type": "http", "url": "https://mcp.example/mcp"}
        }}"#;
        let e = client_config(cfg, &env()).unwrap();
        assert_eq!(e.len(), 5);
        let by = |n: &str| e.iter().find(|x| x.name == n).unwrap();
        match &by("memory").launch {
            Launch::Package { package, args } => {
                let spec = &package.spec;
                assert_eq!(spec.name, "@modelcontextprotocol/server-memory");
                assert_eq!(spec.version.as_deref(), Some("2026.8.31"));
                assert!(args.is_empty());
            }
            other => panic!("{other:?}"),
        }
        match &by("files").launch {
            Launch::Package { args, package } => {
                let spec = &package.spec;
                assert_eq!(args, &["/home/me/docs"]);
                assert_eq!(spec.version, None);
            }
            other => panic!("{other:?}"),
        }
        match &by("time").launch {
            Launch::Package { package, args } => {
                assert_eq!(package.spec.registry, Registry::Pypi);
                assert_eq!(package.program.as_deref(), Some("mcp-server-time"));
                assert_eq!(args, &["--local-timezone=UTC"]);
            }
            other => panic!("{other:?}"),
        }
        let local = by("local");
        assert_eq!(
            local.launch,
            Launch::Command(vec!["python3".into(), "server.py".into()])
        );
        // The real token never reaches the server.
        assert!(local
            .env
            .contains(&("GITHUB_TOKEN".into(), EnvValue::secret())));
        assert!(local
            .env
            .contains(&("LOG_LEVEL".into(), EnvValue::Plain("info".into()))));
        assert_eq!(
            by("remote").launch,
            Launch::Remote {
                url: "https://mcp.example/mcp".into(),
                transport: "streamable-http".into()
            }
        );
    }

    #[test]
    fn claude_code_projects_and_vscode_inputs() {
        let cfg = r#"{"mcpServers": {"a": {"command": "node", "args": ["a.js"]}},
            "projects": {"/work/p": {"mcpServers": {"b": {"type": "stdio", "command": "node", "args": ["b.js"]}}}}}"#;
        let e = client_config(cfg, &env()).unwrap();
        let names: Vec<&str> = e.iter().map(|x| x.name.as_str()).collect();
        assert_eq!(names, ["a", "/work/p/b"]);
        assert_eq!(select(e.clone(), Some("b")).unwrap()[0].name, "/work/p/b");
        let err = select(e, Some("zz")).unwrap_err().to_string();
        assert!(err.contains("a, /work/p/b"), "{err}");

        let vscode = r#"{"inputs": [{"type": "promptString", "id": "key", "password": true},
                                    {"type": "promptString", "id": "region"}],
            "servers": {"s": {"type": "stdio", "command": "node", "args": ["s.js", "${input:region}"],
                              "env": {"OPAQUE": "${input:key}", "HOME_DIR": "${env:HOME}"}},
                        "sse": {"type": "sse", "url": "http://127.0.0.1:9/sse"}}}"#;
        let e = client_config(vscode, &env()).unwrap();
        let s = e.iter().find(|x| x.name == "s").unwrap();
        assert_eq!(
            s.launch,
            Launch::Command(vec![
                "node".into(),
                "s.js".into(),
                "glassbox-input-region".into()
            ])
        );
        assert!(s.env.contains(&("OPAQUE".into(), EnvValue::secret())));
        assert!(s
            .env
            .contains(&("HOME_DIR".into(), EnvValue::Plain("/home/me".into()))));
        assert!(matches!(&e[1].launch, Launch::Remote { transport, .. } if transport == "sse"));
        // VS Code's settings.json nests the same under `mcp`.
        let settings = format!(r#"{{"editor.fontSize": 12, "mcp": {vscode}}}"#);
        assert_eq!(client_config(&settings, &env()).unwrap().len(), 2);
    }

    #[test]
    fn broken_configurations_are_refused_clearly() {
        for (text, want) in [
            ("", "not a JSON configuration"),
            ("[]", "not a JSON object"),
            ("{}", "no servers"),
            (r#"{"mcpServers": {}}"#, "server lists are empty"),
            (r#"{"mcp": {"servers": {}}}"#, "server lists are empty"),
            (
                r#"{"projects": {"/p": {"mcpServers": {}}}}"#,
                "server lists are empty",
            ),
            (r#"{"mcpServers": []}"#, "mcpServers must be an object"),
            (r#"{"mcpServers": {"x": 1}}"#, "is not an object"),
            (
                r#"{"mcpServers": {"x": {}}}"#,
                "neither a command nor a url",
            ),
            (
                r#"{"mcpServers": {"x": {"command": "a", "args": "b"}}}"#,
                "must be an array",
            ),
            (
                r#"{"mcpServers": {"x": {"command": "a", "args": [{}]}}}"#,
                "must be a string",
            ),
            (
                r#"{"servers": {"x": {"command": "a", "args": ["${input:nope}"]}}}"#,
                "names no input",
            ),
        ] {
            let e = client_config(text, &env()).unwrap_err().to_string();
            assert!(e.contains(want), "{text}: {e}");
        }
    }

    #[test]
    fn expansion_forms() {
        let ins = [("k".to_string(), true)];
        let x = |s: &str| expand(s, &env(), &ins).unwrap();
        assert_eq!(x("${HOME}/a"), ("/home/me/a".into(), false));
        assert_eq!(x("${env:HOME}"), ("/home/me".into(), false));
        assert_eq!(x("${EMPTY:-d}"), ("d".into(), false));
        assert_eq!(x("${NOPE:-d}-${NOPE}"), ("d-".into(), false));
        assert!(x("${input:k}").1);
        assert_eq!(
            x("unterminated ${HOME"),
            ("unterminated ${HOME".into(), false)
        );
    }

    #[test]
    fn server_json_packages_and_remotes() {
        let text = r#"{
          "name": "io.example/weather",
          "packages": [
            {"registryType": "npm", "identifier": "@example/weather-mcp", "version": "1.2.3",
             "transport": {"type": "stdio"},
             "runtimeArguments": [{"type": "named", "name": "-y"}],
             "packageArguments": [{"type": "named", "name": "--units", "value": "metric"},
                                  {"type": "positional", "valueHint": "city", "default": "Oslo"}],
             "environmentVariables": [
                {"name": "WEATHER_API_KEY", "isSecret": true, "isRequired": true,
                 "description": "Your key, from https://Console.Weather.example/keys (sent to api.weather.example)"},
                {"name": "ENDPOINT_REGION", "isRequired": true},
                {"name": "LOG", "default": "warn"}]},
            {"registryType": "pypi", "identifier": "weather-mcp", "version": "1.2.3",
             "transport": {"type": "streamable-http", "url": "http://localhost:8080/mcp"}},
            {"registryType": "oci", "identifier": "ghcr.io/example/weather"}
          ],
          "remotes": [{"type": "streamable-http", "url": "https://weather.example/mcp"}]
        }"#;
        let e = server_json(text, &env()).unwrap();
        assert_eq!(e.len(), 4);
        match &e[0].launch {
            Launch::Package { package, args } => {
                let spec = &package.spec;
                assert_eq!(spec.name, "@example/weather-mcp");
                assert_eq!(spec.version.as_deref(), Some("1.2.3"));
                assert_eq!(args, &["--units", "metric", "Oslo"]);
            }
            other => panic!("{other:?}"),
        }
        assert_eq!(
            e[0].env,
            vec![
                (
                    "WEATHER_API_KEY".to_string(),
                    EnvValue::Secret {
                        hosts: vec!["console.weather.example".into()]
                    }
                ),
                ("ENDPOINT_REGION".to_string(), EnvValue::secret()),
                ("LOG".to_string(), EnvValue::Plain("warn".into())),
            ]
        );
        assert!(matches!(&e[1].launch, Launch::Unsupported(w) if w.contains("streamable-http")));
        assert!(matches!(&e[2].launch, Launch::Unsupported(w) if w.contains("oci")));
        assert_eq!(
            e[3].launch,
            Launch::Remote {
                url: "https://weather.example/mcp".into(),
                transport: "streamable-http".into()
            }
        );
        assert!(server_json("{}", &env()).is_err());
        assert!(server_json("{\"packages\": 3}", &env()).is_err());
    }

    #[test]
    fn documented_hosts_come_from_urls_only() {
        assert_eq!(
            hosts_in("Get one at https://dash.example/keys or http://x.example:8080/."),
            ["dash.example", "x.example"]
        );
        assert!(hosts_in("a plain api.example mention, ftp://f.example").is_empty());
    }

    #[test]
    fn secret_names() {
        for s in [
            "GITHUB_TOKEN",
            "OPENAI_API_KEY",
            "db_password",
            "SLACK_BOT_TOKEN",
            "AUTH",
            "apiKey",
        ] {
            assert!(secret_name(s), "{s}");
        }
        for s in ["LOG_LEVEL", "HOME", "REGION", "MONKEY_COUNT", "PATH"] {
            assert!(!secret_name(s), "{s}");
        }
    }
}
