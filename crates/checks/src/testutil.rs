//! Hand-built evidence for unit tests.

use glassbox_model::{
    Bytes, Event, EventKind, Evidence, Honeytoken, Manifest, Phase, RecorderSettings,
    SandboxSettings, SessionSummary,
};

/// An evidence builder: home `/home/user`, working directory `/home/user/project`, channels
/// `syscalls` and `mcp-transcript`, a completed session, no events.
pub(crate) struct Ev(Evidence);

impl Ev {
    pub(crate) fn new() -> Self {
        Ev(Evidence {
            manifest: Manifest {
                run_id: "run-1".into(),
                sandbox: SandboxSettings {
                    home: "/home/user".into(),
                    cwd: "/home/user/project".into(),
                    ..SandboxSettings::default()
                },
                recorder: RecorderSettings {
                    channels: vec!["syscalls".into(), "mcp-transcript".into()],
                    ..RecorderSettings::default()
                },
                session: SessionSummary {
                    completed: true,
                    ..SessionSummary::default()
                },
                ..Manifest::default()
            },
            events: Vec::new(),
            transcript: Vec::new(),
            flows: Vec::new(),
        })
    }

    pub(crate) fn channels(mut self, names: &[&str]) -> Self {
        self.0.manifest.recorder.channels = names.iter().map(|s| s.to_string()).collect();
        self
    }

    pub(crate) fn incomplete(mut self, failure: &str) -> Self {
        self.0.manifest.session.completed = false;
        self.0.manifest.session.failure = Some(failure.into());
        self
    }

    pub(crate) fn home(mut self, home: &str) -> Self {
        self.0.manifest.sandbox.home = home.into();
        self
    }

    pub(crate) fn honeytoken(mut self, path: &str) -> Self {
        self.0.manifest.sandbox.honeytokens.push(Honeytoken {
            path: path.into(),
            kind: "test".into(),
            secrets: vec![],
        });
        self
    }

    pub(crate) fn event(mut self, pid: i32, phase: Phase, kind: EventKind) -> Self {
        let id = self.0.events.len() as u64 + 1;
        self.0.events.push(Event {
            id,
            t_ns: id * 1000,
            pid,
            ppid: 1,
            phase,
            kind,
        });
        self
    }

    pub(crate) fn open(self, path: impl Into<Bytes>, flags: u64, phase: Phase) -> Self {
        self.open_result(path, flags, None, phase)
    }

    pub(crate) fn open_result(
        self,
        path: impl Into<Bytes>,
        flags: u64,
        result: Option<i64>,
        phase: Phase,
    ) -> Self {
        self.event(
            2,
            phase,
            EventKind::Open {
                syscall: "openat".into(),
                path: path.into(),
                flags,
                flags_text: String::new(),
                result,
            },
        )
    }

    pub(crate) fn stat(self, path: impl Into<Bytes>, phase: Phase) -> Self {
        self.event(
            2,
            phase,
            EventKind::Stat {
                syscall: "newfstatat".into(),
                path: path.into(),
            },
        )
    }

    pub(crate) fn exec(self, pid: i32, path: &str, argv: &[&str], phase: Phase) -> Self {
        self.event(
            pid,
            phase,
            EventKind::Exec {
                syscall: "execve".into(),
                path: path.into(),
                argv: argv.iter().map(|a| Bytes::from(*a)).collect(),
            },
        )
    }

    /// Adds the server's own start: `node server.js`, pid 2.
    pub(crate) fn server_start(self) -> Self {
        self.exec(
            2,
            "/usr/bin/node",
            &["node", "/home/user/project/server.js"],
            Phase::Startup,
        )
    }

    pub(crate) fn build(self) -> Evidence {
        self.0
    }
}
