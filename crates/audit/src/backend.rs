//! Where the server runs: one [`Backend`] trait, two implementations. The namespace sandbox on
//! this host ([`run::Running`], in `run.rs`) and a fresh QEMU microVM per run that runs the
//! same sandbox under its own kernel ([`microvm::VmRun`], in `microvm.rs`). Each starts the
//! server with its planted secrets under the recorder (and the network edge); the pipeline
//! in `lib.rs` and `glassbox trace` (`trace.rs`) drive either through this trait alone, and
//! [`Isolation::start`] is the one place that picks the backend.
//!
//! [`Isolation::start`]: crate::Isolation

use crate::recording::Recording;
use crate::Error;
use glassbox_model::{SandboxSettings, ServerExit, VmRecord};
use std::io::Read;
use std::sync::Arc;
use std::time::Duration;

/// Connects to a port of the server's loopback with a timeout ([`Backend::loopback_dialer`]).
pub(crate) type LoopbackDialer =
    Arc<dyn Fn(u16, Duration) -> std::io::Result<Box<dyn glassbox_mcp::Connection>> + Send + Sync>;

/// The server's standard input, output and error, on either backend.
pub(crate) type Stdio = (
    Option<Box<dyn std::io::Write + Send>>,
    Option<Box<dyn Read + Send>>,
    Option<Box<dyn Read + Send>>,
);

/// A server started on an isolation backend, recorded until [`Backend::finish`].
pub(crate) trait Backend {
    /// The sandbox's settings, for the manifest.
    fn settings(&self) -> &SandboxSettings;
    /// How calls are recorded (`seccomp-notify`, ...).
    fn mechanism(&self) -> &str;
    /// Why the honeytoken ground truth is not observed in this run (`None`: it is).
    fn ground_truth(&self) -> Option<String>;
    /// The edge's isolation checks and the canary sockets.
    fn edge_checks(&self) -> (Vec<String>, Vec<String>);
    /// The server's standard streams (once).
    fn take_stdio(&mut self) -> Stdio;
    /// Waits up to `timeout` for the server to exit.
    fn wait_timeout(&mut self, timeout: Duration) -> Option<ServerExit>;
    /// Waits for the server to exit, however long it runs (a trace's command runs until it
    /// ends, or glassbox is stopped). `None`: the backend lost it (a microVM's guest that ended
    /// without reporting the end of the run).
    fn wait(&mut self) -> Option<ServerExit>;
    /// Whether processes the server left are still running (a microVM's guest lingers by
    /// itself, so it says no).
    fn others_alive(&self) -> bool;
    /// Whether the server may still come to listen on its port.
    fn may_still_listen(&self) -> bool;
    /// Connects to 127.0.0.1:PORT on the server's own loopback.
    fn loopback_dialer(&self) -> Result<LoopbackDialer, Error>;
    /// The sandbox limits the run reached.
    fn limits_reached(&self) -> &[String];
    /// A reader of the sandbox's usage while it runs, where the backend has one (the
    /// namespace sandbox; a microVM's cgroup is in its guest).
    fn meter(&self) -> Option<glassbox_sandbox::Meter> {
        None
    }
    /// Processes still running but the sandbox's own, once the server exited and what it
    /// left was recorded a while longer: they outlived the server. The namespace sandbox
    /// says so before [`Backend::finish`] kills them; a microVM's guest after it, in its
    /// record.
    fn outlived(&self) -> Vec<String>;
    /// What the run left in the sandbox's writable places ([`crate::left`]): the namespace
    /// sandbox reads them before [`Backend::finish`]; a microVM's guest says so in its
    /// record, after it. `None`: this backend could not read them.
    fn left(&self) -> Option<crate::left::Left>;
    /// Ends the run: how the server ended and what was recorded.
    fn finish(&mut self) -> (ServerExit, Recording);
    /// The microVM's record, on that backend.
    fn vm_record(&self) -> Option<VmRecord> {
        None
    }
}
