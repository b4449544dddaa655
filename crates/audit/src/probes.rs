//! The role probes of the plans of calls: what path, socket and URL parameters are given
//! besides the workspace's own values.

use crate::canary;
use std::ffi::OsString;
use std::path::Path;

/// The role probes of the plans of calls ([`glassbox_mcp::args::Probes`]): a planted cloud
/// credential and another project's `.env` for paths, the canary Docker socket for sockets,
/// the metadata address for URLs; the workspace path values go in, and its files.
pub(crate) fn probes(
    tokens: &[glassbox_model::Honeytoken],
    metadata: std::net::IpAddr,
    command: &[OsString],
    home: &str,
) -> glassbox_mcp::args::Probes {
    // The folder the server was given: the first argument that is an absolute path of a
    // directory (visible in the sandbox at the same path), with what it holds; else the
    // sample workspace planted in home.
    let given = command
        .iter()
        .skip(1)
        .map(Path::new)
        .find(|p| p.is_absolute() && p.is_dir());
    let (workspace, files) = match given {
        Some(dir) => (dir.to_string_lossy().into_owned(), listing(dir)),
        None => (
            glassbox_sandbox::workspace::dir(home),
            glassbox_sandbox::workspace::samples()
                .into_iter()
                .map(String::from)
                .collect(),
        ),
    };
    let mut outside = Vec::new();
    for (kind, what) in [
        ("aws-credentials", "a planted credential"),
        ("dotenv-other-project", "another project's .env"),
    ] {
        if let Some(t) = tokens.iter().find(|t| t.kind == kind) {
            outside.push((what.to_string(), t.path.clone()));
        }
    }
    glassbox_mcp::args::Probes {
        outside,
        socket: Some(canary::DOCKER_VAR.to_string()),
        metadata: Some(metadata.to_string()),
        workspace: Some(workspace),
        files,
        tool: String::new(),
    }
}

/// The files of a folder the user gave the server (paths relative to it), for path values
/// to name: bounded (three levels, 2,000 entries looked at, 200 kept), hidden entries and
/// links left out, in name order.
pub(crate) fn listing(dir: &Path) -> Vec<String> {
    const LOOKED: usize = 2_000;
    const KEPT: usize = 200;
    let mut out = Vec::new();
    let mut looked = 0;
    let mut todo = vec![(dir.to_path_buf(), 0)];
    'walk: while let Some((d, depth)) = todo.pop() {
        let Ok(entries) = std::fs::read_dir(&d) else {
            continue;
        };
        let mut entries: Vec<_> = entries.flatten().take(LOOKED).collect();
        entries.sort_by_key(|e| e.file_name());
        for e in entries {
            looked += 1;
            if looked > LOOKED || out.len() >= KEPT {
                break 'walk;
            }
            if e.file_name().to_string_lossy().starts_with('.') {
                continue;
            }
            let Ok(kind) = e.file_type() else { continue };
            let path = e.path();
            if kind.is_dir() && depth < 2 {
                todo.push((path, depth + 1));
            } else if kind.is_file() {
                if let Ok(rel) = path.strip_prefix(dir) {
                    out.push(rel.to_string_lossy().into_owned());
                }
            }
        }
    }
    out.sort();
    out
}
