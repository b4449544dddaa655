//! The parsers of what users already have: MCP client configurations, MCP Registry
//! `server.json` files, and `npm:`/`pypi:` package specs.

use glassbox_mcp::{Connection, Connector, HttpTarget};
use glassbox_plan::config::{self, EnvValue, Launch, ServerEntry, Vars};
use glassbox_plan::install::PackageSpec;
use std::io;
use std::sync::Arc;

/// A fixed environment for `${VAR}` expansion.
#[derive(Debug)]
struct Env;

impl Vars for Env {
    fn env(&self, name: &str) -> Option<String> {
        match name {
            "HOME" => Some("/home/fuzz".into()),
            "EMPTY" => Some(String::new()),
            _ => None,
        }
    }
}

/// A connector that is never called (URLs are only parsed).
fn unused() -> Connector {
    Arc::new(|| -> io::Result<Box<dyn Connection>> { Err(io::ErrorKind::Unsupported.into()) })
}

/// What holds for a package spec: it prints as it parses, and its install folder is one
/// path component under the registry's folder.
fn check_spec(spec: &PackageSpec) {
    let shown = spec.display();
    let again = PackageSpec::parse(&shown);
    assert!(
        matches!(&again, Ok(Some(s)) if s == spec),
        "{spec:?} shows as {shown:?}, which parses as {again:?}"
    );
    let version = spec.version.clone().unwrap_or_else(|| "1.0.0".into());
    let dir = spec.dir(&version);
    let name = dir.file_name().map(|n| n.to_string_lossy().into_owned());
    assert!(
        matches!(name.as_deref(), Some(n) if n != "." && n != ".." && !n.contains('/')),
        "install folder {dir:?}"
    );
    let registry = dir.parent().and_then(|p| p.file_name());
    assert_eq!(
        registry
            .map(|r| r.to_string_lossy().into_owned())
            .as_deref(),
        Some(spec.registry.name()),
        "install folder {dir:?}"
    );
}

/// What holds for every entry: a variable whose name says it is secret never keeps its
/// value, a package is a valid spec, a remote URL is parsed without a panic.
fn check_entries(entries: &[ServerEntry]) {
    for e in entries {
        for (name, value) in &e.env {
            if config::secret_name(name) {
                assert!(
                    matches!(value, EnvValue::Secret { .. }),
                    "{name} keeps its value: {value:?}"
                );
            }
        }
        match &e.launch {
            Launch::Package { package, .. } => {
                check_spec(&package.spec);
                package.with.iter().for_each(check_spec);
                // A launcher's program is a name among the install's programs, never a path.
                if let Some(p) = &package.program {
                    assert!(
                        !p.is_empty() && !p.contains('/') && !p.starts_with('.'),
                        "{p:?}"
                    );
                }
            }
            Launch::Remote { url, .. } => {
                if let Ok(t) = HttpTarget::from_url(url, unused()) {
                    assert!(
                        t.validate().is_ok(),
                        "{url:?} parsed into an invalid target"
                    );
                }
            }
            Launch::Command(argv) => assert!(!argv.is_empty()),
            Launch::Unsupported(why) => assert!(!why.is_empty()),
        }
        let picked = config::select(entries.to_vec(), Some(&e.name)).expect("select by name");
        assert!(picked.iter().any(|p| p.name == e.name));
    }
}

/// `config`: `data[0] % 3` picks the parser (client config, `server.json`, package spec) for
/// the rest (UTF-8 only: the files are read as text).
pub fn parse(data: &[u8]) {
    let Some((&which, text)) = data.split_first() else {
        return;
    };
    let Ok(text) = std::str::from_utf8(text) else {
        return;
    };
    match which % 3 {
        0 => {
            if let Ok(entries) = config::client_config(text, &Env) {
                assert!(
                    !entries.is_empty(),
                    "a configuration without servers accepted"
                );
                check_entries(&entries);
            }
        }
        1 => {
            if let Ok(entries) = config::server_json(text, &Env) {
                assert!(
                    !entries.is_empty(),
                    "a server.json without servers accepted"
                );
                check_entries(&entries);
            }
        }
        _ => match PackageSpec::parse(text) {
            Ok(Some(spec)) => check_spec(&spec),
            Ok(None) => assert!(!text.starts_with("npm:") && !text.starts_with("pypi:")),
            Err(e) => assert!(!e.to_string().is_empty()),
        },
    }
}
