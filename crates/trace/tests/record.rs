//! The recorder on the real sandbox.

use glassbox_model::{Event, EventKind, SockAddr};
use glassbox_sandbox::{Config, PlantedFile, Sandbox};
use glassbox_trace::{rules, Clock, Recorder};
use std::io::Read;
use std::sync::atomic::AtomicBool;
use std::sync::Arc;
use std::time::Duration;

fn record(program: &str, argv: &[&str]) -> (Vec<Event>, String) {
    let cfg = Config {
        program: program.into(),
        argv: argv.iter().map(Into::into).collect(),
        cwd: std::env::current_dir().unwrap(),
        extra_ro: vec![],
        user: "sam".into(),
        hostname: "devbox".into(),
        path_prefix: vec![],
        env: vec![],
        files: vec![PlantedFile {
            path: "/home/sam/.aws/credentials".into(),
            contents: b"[default]\n".to_vec(),
            mode: 0o600,
        }],
        rules: rules(false),
    };
    let mut sb = Sandbox::spawn(&cfg).expect("spawn");
    let clock = Arc::new(Clock::new());
    let rec = Recorder::new(sb.listener.take().unwrap(), "/home/sam", clock);
    let stop = AtomicBool::new(false);
    struct Keep(Vec<Event>);
    impl glassbox_trace::Sink for Keep {
        fn event(&mut self, e: Event) {
            self.0.push(e);
        }
        fn idle(&mut self) {}
    }
    let t = std::thread::spawn(move || {
        let mut events = Keep(Vec::new());
        rec.run(1, &stop, &mut events);
        events.0
    });
    drop(sb.stdin.take());
    let mut out = String::new();
    sb.stdout.take().unwrap().read_to_string(&mut out).unwrap();
    sb.wait_timeout(Duration::from_secs(20)).expect("exit");
    sb.finish();
    (t.join().unwrap(), out)
}

fn paths(events: &[Event], kind: &str) -> Vec<String> {
    events
        .iter()
        .filter(|e| {
            matches!(
                (&e.kind, kind),
                (EventKind::Open { .. }, "open") | (EventKind::Stat { .. }, "stat")
            )
        })
        .map(|e| e.kind.path().unwrap().to_lossy())
        .collect()
}

#[test]
fn execs_opens_stats_and_connects_are_recorded() {
    let (events, out) = record(
        "/bin/sh",
        &[
            "sh",
            "-c",
            "cd ~ && cat .aws/credentials; test -e ~/.ssh/id_rsa; \
             python3 -c 'import socket; s=socket.socket(); s.settimeout(0.2)\ntry: s.connect((\"127.0.0.1\", 9))\nexcept OSError: pass' 2>/dev/null; \
             echo done",
        ],
    );
    assert!(out.contains("[default]"), "{out}");
    let execs: Vec<_> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Exec { path, argv, .. } => {
                Some((e.pid, e.ppid, path.to_lossy(), argv.len()))
            }
            _ => None,
        })
        .collect();
    assert_eq!(execs[0], (2, 1, "/bin/sh".to_string(), 3), "{execs:?}");
    let cat = execs
        .iter()
        .find(|e| e.2.ends_with("/cat"))
        .expect("cat exec");
    assert_eq!(cat.1, 2, "cat's parent is the shell");
    // The relative open is resolved against the working directory inside the sandbox.
    assert!(paths(&events, "open").contains(&"/home/sam/.aws/credentials".to_string()));
    assert!(
        paths(&events, "stat").contains(&"/home/sam/.ssh/id_rsa".to_string()),
        "{:?}",
        paths(&events, "stat")
    );
    let connects: Vec<_> = events
        .iter()
        .filter_map(|e| match &e.kind {
            EventKind::Connect { addr, .. } => Some(addr.clone()),
            _ => None,
        })
        .collect();
    if std::process::Command::new("python3")
        .arg("-V")
        .output()
        .is_ok()
    {
        assert!(
            connects.contains(&SockAddr::Inet {
                ip: "127.0.0.1".into(),
                port: 9
            }),
            "{connects:?}"
        );
    }
    // Ids are dense and ordered.
    for (i, e) in events.iter().enumerate() {
        assert_eq!(e.id, i as u64 + 1);
    }
}
