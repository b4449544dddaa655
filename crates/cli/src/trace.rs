//! `glassbox trace`: a command run in the sandbox under the recorder, without MCP; its events
//! on stderr (or to `--out`), then what the recorder lost and the flows the edge saw.

use crate::{absolute, microvm, Isolation, Readable, Recorder, Responder};
use anyhow::{Context, Result};
use glassbox_audit::EventSink;
use glassbox_model::bundle;
use glassbox_model::ServerExit;
use std::ffi::OsString;
use std::path::{Path, PathBuf};

/// `glassbox trace`: a command under the recorder and the edge; its exit status.
#[allow(clippy::too_many_arguments)]
pub(crate) fn trace_cmd(
    out: Option<PathBuf>,
    read_only: Vec<PathBuf>,
    env: Vec<String>,
    responder: Responder,
    recorder: Recorder,
    isolation: Isolation,
    cmd: Vec<OsString>,
    cwd: &Path,
) -> Result<i32> {
    let env = env
        .iter()
        .map(|kv| match kv.split_once('=') {
            Some((k, v)) if !k.is_empty() => Ok((k.to_string(), v.to_string())),
            _ => Err(anyhow::anyhow!("--env takes NAME=VALUE, not {kv:?}")),
        })
        .collect::<Result<Vec<_>>>()?;
    let sink: Box<dyn EventSink> = match &out {
        Some(p) => Box::new(bundle::Lines(std::io::BufWriter::new(
            std::fs::File::create(p).with_context(|| format!("cannot create {}", p.display()))?,
        ))),
        None => Box::new(Readable(std::io::stderr())),
    };
    if isolation == Isolation::Microvm {
        let read_only = absolute(read_only)?;
        let recorder = clap::ValueEnum::to_possible_value(&recorder)
            .map(|v| v.get_name().to_string())
            .unwrap_or_else(|| "auto".into());
        let req = microvm::TraceRequest {
            cmd: &cmd,
            cwd,
            read_only: &read_only,
            env: &env,
            recorder: &recorder,
        };
        let (code, events) = microvm::trace(&req, sink)?;
        if let Some(p) = &out {
            eprintln!("glassbox: {events} events written to {}", p.display());
        }
        return Ok(code);
    }
    let traced = glassbox_audit::trace(
        &cmd,
        cwd,
        &absolute(read_only)?,
        &env,
        sink,
        recorder.into(),
        responder.into(),
    )?;
    if let Some(p) = &out {
        eprintln!(
            "glassbox: {} events written to {}",
            traced.events,
            p.display()
        );
    }
    let stats = &traced.stats;
    if stats.lost > 0 {
        let why: Vec<String> = stats
            .lost_why
            .iter()
            .map(|(w, n)| format!("{w}: {n}"))
            .collect();
        let line = format!(
            "glassbox: the recorder lost {} call(s), the events above are incomplete ({})",
            stats.lost,
            why.join("; ")
        );
        eprintln!("{}", glassbox_model::printable(&line));
    }
    if let Some(f) = &stats.failure {
        eprintln!(
            "glassbox: the recorder stopped early: {}",
            glassbox_model::printable(f)
        );
    }
    eprintln!(
        "glassbox: {} flows at the network edge (captured, nothing left the machine)",
        traced.flows.len()
    );
    for f in traced.flows.iter().take(50) {
        let what = match (&f.dns, &f.sni, &f.dns_name) {
            (Some(q), _, _) => format!("{} {}", q.qtype, q.name),
            (_, Some(sni), _) => format!("SNI {sni}"),
            (_, _, Some(n)) => format!("= {n}"),
            _ => String::new(),
        };
        let line = format!(
            "  {:?} {} {what} ({} packets, {} bytes out)",
            f.protocol, f.dst, f.packets_out, f.bytes_out
        );
        eprintln!("{}", glassbox_model::printable(&line));
    }
    let exit = traced.exit;
    Ok(match exit {
        ServerExit::Exited { code } => code,
        ServerExit::Signaled { signal, .. } => 128 + signal,
        ServerExit::Running => 2,
    })
}
