//! `glassbox trace`: a command run in the sandbox under the recorder, without MCP.

use crate::*;

/// What [`trace`] saw besides the events it wrote.
#[derive(Debug)]
pub struct Traced {
    /// How the command ended.
    pub exit: ServerExit,
    /// Events recorded.
    pub events: u64,
    /// What the recorder saw and lost (a trace that lost calls says so, as an audit does).
    pub stats: glassbox_trace::RecorderStats,
    /// The flows at the network edge (capture mode) and the canary sockets.
    pub flows: Vec<glassbox_model::Flow>,
}

/// Runs `command` in the sandbox under the recorder, without MCP, with the network captured at
/// the edge: the command's standard streams are glassbox's own.
pub fn trace(
    command: &[OsString],
    cwd: &Path,
    extra_ro: &[PathBuf],
    env: &[(String, String)],
    sink: Box<dyn EventSink>,
    recorder: RecorderChoice,
    responder: ResponderChoice,
) -> Result<Traced, Error> {
    target::check_working_folder(cwd)?;
    let answer = match responder {
        ResponderChoice::Ok => Some(
            glassbox_net::Authority::fresh()
                .map_err(|e| Error::Internal(format!("cannot make the trace's CA: {e}")))?,
        ),
        ResponderChoice::Refuse => None,
    };
    let trust = answer.as_ref().map(recording::CaCertificate::of);
    let mut target = target::resolve(command, cwd)?;
    target.extra_ro.extend(extra_ro.iter().cloned());
    target.env.extend(env.iter().cloned());
    let mut running = run::start(
        &target,
        cwd,
        sink,
        false,
        recorder,
        recording::RunPlan {
            secrets: None,
            clock: Arc::new(glassbox_trace::Clock::new()),
            first_event_id: 1,
            network: Some(NetworkMode::Capture),
            relay: None,
            wire: None,
            limits: glassbox_sandbox::Limits::default(),
            answer,
            trust,
            ring: None,
            marker: None,
            clock_shift: None,
        },
    )?;
    let pump = |from: Option<std::fs::File>, mut to: Box<dyn std::io::Write + Send>| {
        std::thread::spawn(move || {
            if let Some(mut f) = from {
                let _ = std::io::copy(&mut f, &mut to);
            }
        })
    };
    let out = pump(running.sandbox.stdout.take(), Box::new(std::io::stdout()));
    let err = pump(running.sandbox.stderr.take(), Box::new(std::io::stderr()));
    let stdin = running.sandbox.stdin.take();
    // stdin is forwarded on a detached thread: a blocked read of our stdin must not keep the
    // trace alive after the command ended.
    std::thread::spawn(move || {
        if let Some(mut w) = stdin {
            let mut buf = [0u8; 8192];
            let mut input = std::io::stdin();
            while let Ok(n) = input.read(&mut buf) {
                if n == 0 || std::io::Write::write_all(&mut w, &buf[..n]).is_err() {
                    break;
                }
            }
        }
    });
    let exit = loop {
        if let Some(e) = running.sandbox.wait_timeout(Duration::from_millis(200)) {
            break e;
        }
    };
    let (_, recording) = running.finish();
    let _ = out.join();
    let _ = err.join();
    if let Some(e) = recording.write_error {
        return Err(Error::Evidence {
            path: "trace output".into(),
            source: e,
        });
    }
    Ok(Traced {
        exit,
        events: recording.stats.events,
        stats: recording.stats,
        flows: recording.edge.flows,
    })
}
