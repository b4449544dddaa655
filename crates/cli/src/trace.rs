//! `glassbox trace`: a command run in the sandbox under the recorder, without MCP
//! ([`glassbox_audit::trace`], on either isolation); its events on stderr (or to `--out`), then
//! what the recorder lost and the flows the edge saw.

use crate::{absolute, Isolation, Readable, Recorder, Responder};
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
    let mut opts = glassbox_audit::TraceOptions::new(cmd, cwd.to_path_buf());
    opts.extra_ro = absolute(read_only)?;
    opts.env = env;
    opts.recorder = recorder.into();
    opts.responder = responder.into();
    opts.isolation = isolation.into();
    let traced = glassbox_audit::trace(&opts, sink, &mut |vm| {
        if let Some(vm) = vm {
            eprintln!(
                "glassbox: isolation microvm (accel {}: {}, kernel {})",
                vm.accelerator, vm.accelerator_reason, vm.kernel_release
            );
        }
    })?;
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
