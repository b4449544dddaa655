//! A remote server (a configuration's URL) audited from this host: the session, and what the
//! host saw of it ([`audit_remote`]).

use crate::manifest::{new_manifest, run_id};
use crate::pipeline::conclude;
use crate::session_run::Hooks;
use crate::{Audit, AuditOptions, Error, Progress};
use glassbox_model::{bundle, Evidence, Phase};
use std::sync::{Arc, Mutex};

/// Audits a remote MCP server (a client configuration's `url`, a `server.json` remote) over
/// streamable HTTP, or the legacy HTTP+SSE transport when `legacy_sse`: it runs elsewhere, so
/// only what it says is evidence (the transcript: its descriptions, its instructions, its
/// tool list over time); the channels of what it does (system calls, the network edge, the
/// planted secrets) are reported not observed, never clean.
///
/// Plain `http://` only: this version has no TLS client, and an `https://` URL is an
/// [`Error::Usage`] saying so. The connection is made from the host (the server is not run
/// here, there is nothing to sandbox).
pub fn audit_remote(
    url: &str,
    legacy_sse: bool,
    opts: &AuditOptions,
    progress: &dyn Progress,
) -> Result<Audit, Error> {
    if url.starts_with("https://") {
        return Err(Error::Usage(format!(
            "{} is served over TLS, which this version cannot speak: a remote server is \
             audited over plain http:// only",
            glassbox_model::printable(url)
        )));
    }
    let authority = url
        .strip_prefix("http://")
        .and_then(|r| r.split(['/', '?', '#']).next())
        .filter(|a| !a.is_empty())
        .ok_or_else(|| {
            Error::Usage(format!(
                "not an http:// URL: {}",
                glassbox_model::printable(url)
            ))
        })?;
    let with_port = if authority
        .rsplit_once(':')
        .is_some_and(|(_, p)| p.parse::<u16>().is_ok())
    {
        authority.to_string()
    } else {
        format!("{authority}:80")
    };
    use std::net::ToSocketAddrs;
    let addrs: Vec<std::net::SocketAddr> = with_port
        .to_socket_addrs()
        .map_err(|e| {
            Error::Usage(format!(
                "cannot resolve {}: {e}",
                glassbox_model::printable(authority)
            ))
        })?
        .collect();
    let timeout = opts.session.request_timeout;
    let connector: glassbox_mcp::Connector = Arc::new(move || {
        let mut last = std::io::Error::new(std::io::ErrorKind::NotFound, "no address");
        for a in &addrs {
            match std::net::TcpStream::connect_timeout(a, timeout) {
                Ok(s) => return Ok(Box::new(s) as Box<dyn glassbox_mcp::Connection>),
                Err(e) => last = e,
            }
        }
        Err(last)
    });
    let mut target = glassbox_mcp::HttpTarget::from_url(url, connector)
        .map_err(|e| Error::Usage(e.to_string()))?;
    if legacy_sse {
        target.kind = glassbox_mcp::HttpKind::LegacySse;
    }
    let mut opts = opts.clone();
    opts.command = vec![url.into()];
    let run_id = run_id();
    let dir = opts
        .evidence_dir
        .clone()
        .unwrap_or_else(|| opts.cwd.join("glassbox-evidence").join(&run_id));
    let bundle = bundle::Writer::create(&dir)?;
    let mut manifest = new_manifest(&run_id, &opts, String::new(), vec!["mcp-transcript".into()]);
    manifest.sandbox.backend = "none: a remote server, not run here".into();
    manifest.recorder.unobserved = vec![
        "syscalls: a remote server runs elsewhere".into(),
        "packet-edge: a remote server's traffic does not pass glassbox".into(),
        "honeytoken-ground-truth: no secrets are planted where a remote server runs".into(),
    ];
    bundle.write_manifest(&manifest)?;
    // No events: the file is there, empty, like any bundle's.
    drop(bundle.events()?);
    let clock = Arc::new(glassbox_trace::Clock::new());
    let hooks = Hooks {
        clock: clock.clone(),
        transcript: Mutex::new(bundle.transcript("")?),
        timings: Mutex::new(Vec::new()),
        progress,
        usage: None,
    };
    hooks.set_phase_quietly(Phase::Startup);
    let session = glassbox_mcp::run(glassbox_mcp::Transport::Http(target), &opts.session, &hooks);
    let Hooks {
        transcript,
        timings,
        ..
    } = hooks;
    let end_ns = clock.now_ns();
    manifest.timings = timings.into_inner().unwrap_or_default();
    if let Some(last) = manifest.timings.last_mut() {
        last.end_ns = end_ns;
    }
    manifest.session = session;
    manifest.finished_at =
        Some(humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string());
    bundle.write_flows(&[])?;
    let evidence = Evidence {
        manifest,
        events: Vec::new(),
        transcript: transcript
            .into_inner()
            .map(|t| t.finish())
            .unwrap_or_default(),
        flows: Vec::new(),
    };
    conclude(evidence, &opts, &bundle, dir)
}
