//! `cargo bench -p glassbox-audit --bench recheck`: how fast `glassbox recheck` streams a large
//! trace through every check, on one core, and whether its memory stays flat.
//!
//! Writes a synthetic bundle (`events.jsonl` of 2,000,000 events, `manifest.json`) into a
//! temporary directory, then reads it back with the reader `glassbox recheck` uses
//! ([`glassbox_model::bundle::read_events`]: the file a megabyte at a time, each line scanned
//! by an [`glassbox_model::bundle::EventReader`] into one reused event per kind, `serde_json`
//! for any line laid out otherwise), each event handed to [`glassbox_checks::Run`] on the one
//! thread. Measured, each pass in a fresh process of this program (so that a pass's peak RSS is
//! its own, not heap an earlier pass freed and the process kept):
//!
//! - parsing only (no checks), then parsing + every check: events per second (wall time of
//!   the read + parse + evaluate loop, and for every check its `finish`, which `recheck` runs
//!   too) and how much the peak RSS (`VmHWM`) grew from before the loop to after it, with the
//!   growth at each quarter of the trace (memory that grows with the trace grows at every
//!   quarter);
//! - each check alone, to say which one costs the time and which one holds memory.
//!
//! The timed passes (parse only, parse + checks) run three times each and the fastest counts:
//! a shared machine slows some runs down (the thread's CPU time is printed next to the wall
//! time). `GLASSBOX_BENCH_EVENTS` sets another number of events, `GLASSBOX_BENCH_RUNS` another
//! number of runs; `GLASSBOX_BENCH_KEEP` keeps the bundle.

use glassbox_checks::{Context, Evaluator, Proofs, Run};
use glassbox_model::{
    Bytes, Event, EventKind, Honeytoken, Manifest, Phase, RecorderSettings, SandboxSettings,
    SessionSummary, SockAddr, Target, TranscriptEntry,
};
use std::fs::File;
use std::hint::black_box;
use std::io::{BufWriter, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

const DEFAULT_EVENTS: u64 = 2_000_000;
const HOME: &str = "/home/sam";
const CWD: &str = "/work/app";

const O_RDONLY: u64 = 0;
const O_WRONLY: u64 = 0o1;
const O_RDWR: u64 = 0o2;
const O_CREAT: u64 = 0o100;
const O_TRUNC: u64 = 0o1000;
const O_APPEND: u64 = 0o2000;
const O_DIRECTORY: u64 = 0o200000;
const O_CLOEXEC: u64 = 0o2000000;

fn main() {
    // A child measuring one pass in a fresh process (see `child`).
    if let (Ok(what), Ok(path), Ok(n)) = (
        std::env::var(ONLY),
        std::env::var(FILE),
        std::env::var(EVENTS),
    ) {
        let n: u64 = n.parse().expect("a number of events");
        one_pass(&what, Path::new(&path), n);
        return;
    }
    let n: u64 = std::env::var(EVENTS)
        .ok()
        .and_then(|v| v.replace('_', "").parse().ok())
        .unwrap_or(DEFAULT_EVENTS);
    let dir = TempDir::new();
    let t = Instant::now();
    let events_path = dir.0.join("events.jsonl");
    write_bundle(&dir.0, &manifest(), &events_path, n);
    let size = std::fs::metadata(&events_path)
        .map(|m| m.len())
        .unwrap_or(0);
    println!(
        "wrote {} events ({:.0} MiB, {:.0} bytes/event) in {:.1}s to {}",
        group(n),
        mib(size),
        size as f64 / n as f64,
        t.elapsed().as_secs_f64(),
        events_path.display()
    );
    // Each pass in a fresh process: its peak RSS is its own (freed heap a process keeps would
    // hide a later pass's growth), and no pass warms another's allocator. The timed passes run
    // `runs` times and the fastest counts (the least disturbed by whatever else the machine
    // runs; the CPU time of the thread is printed next to the wall time to show it).
    let runs: usize = std::env::var(RUNS)
        .ok()
        .and_then(|v| v.parse().ok())
        .unwrap_or(3)
        .max(1);
    let best = |what: &str| {
        (0..runs)
            .map(|_| child(what, &events_path, n))
            .max_by(|a, b| a.rate.total_cmp(&b.rate))
            .expect("at least one run")
    };
    let parse = best("parse");
    let checked = best("checks");
    let route = best("route");
    let mut by_check = Vec::new();
    for check in glassbox_checks::registry() {
        by_check.push((check.info.id, child(check.info.id, &events_path, n)));
    }
    println!(
        "per event: parse {:.0} ns, checks {:.0} ns ({})",
        1e9 / parse.rate,
        1e9 / checked.rate - 1e9 / parse.rate,
        by_check
            .iter()
            .map(|(id, r)| format!("{id} {:.0} ns", 1e9 / r.rate - 1e9 / parse.rate))
            .collect::<Vec<_>>()
            .join(", ")
    );
    // Growth after the first quarter of the trace: fixed buffers are all in place by then.
    let growers: Vec<String> = by_check
        .iter()
        .filter(|(_, r)| r.trace_mib >= 1.0)
        .map(|(id, r)| format!("{id} +{:.1} MiB", r.trace_mib))
        .collect();
    if !growers.is_empty() {
        println!(
            "memory grows with the trace in: {} (see each pass's growth by quarter above)",
            growers.join(", ")
        );
    }
    println!(
        "recheck: {:.2}M events/s on one core, parse + every check ({}: target >= 1M/s; \
         parsing alone {:.2}M/s; best of {runs} by wall time; {:.2}M/s by the thread's CPU \
         time); peak RSS grew {:.1} MiB over {} events (streaming: must not grow with the \
         trace)",
        checked.rate / 1e6,
        if checked.rate >= 1e6 {
            "target met"
        } else {
            "target NOT met"
        },
        parse.rate / 1e6,
        checked.cpu_rate / 1e6,
        checked.grew_mib,
        group(n)
    );
    // Side by side, in this run: the route recheck took before flows were paired in checks
    // (one pass: parse + checks) and the route it takes now (a pre-pass over the calls with a
    // destination, then that pass).
    println!(
        "route: {:.2}M events/s, pre-pass and checks ({:.2}x the time of the single pass recheck made before the pairing moved to checks; \
         peak RSS grew {:.1} MiB)",
        route.rate / 1e6,
        checked.rate / route.rate,
        route.grew_mib
    );
}

const ONLY: &str = "GLASSBOX_BENCH_ONLY";
const FILE: &str = "GLASSBOX_BENCH_FILE";
const EVENTS: &str = "GLASSBOX_BENCH_EVENTS";
const RUNS: &str = "GLASSBOX_BENCH_RUNS";
/// Set: the bundle is left in place (for profiling one pass: run this program with
/// `GLASSBOX_BENCH_ONLY=parse GLASSBOX_BENCH_FILE=<dir>/events.jsonl GLASSBOX_BENCH_EVENTS=<n>`).
const KEEP: &str = "GLASSBOX_BENCH_KEEP";

/// What a child reported on its last line.
struct Reported {
    rate: f64,
    /// Events per second of the thread's CPU time.
    cpu_rate: f64,
    /// Peak RSS growth over the pass.
    grew_mib: f64,
    /// Peak RSS growth from the first quarter of the trace to its end.
    trace_mib: f64,
}

/// Runs `one_pass(what)` in a fresh process of this program, prints what it printed and
/// returns its measures.
fn child(what: &str, path: &Path, n: u64) -> Reported {
    let exe = std::env::current_exe().expect("this program's path");
    let out = std::process::Command::new(exe)
        .env(ONLY, what)
        .env(FILE, path)
        .env(EVENTS, n.to_string())
        .stderr(std::process::Stdio::inherit())
        .output()
        .expect("run a pass");
    assert!(out.status.success(), "the {what} pass failed");
    let text = String::from_utf8_lossy(&out.stdout);
    let mut reported = None;
    for line in text.lines() {
        match line.strip_prefix("@ ") {
            Some(m) => {
                let mut it = m.split(' ').map(|v| v.parse::<f64>().unwrap_or(f64::NAN));
                reported = Some(Reported {
                    rate: it.next().unwrap_or(f64::NAN),
                    cpu_rate: it.next().unwrap_or(f64::NAN),
                    grew_mib: it.next().unwrap_or(f64::NAN),
                    trace_mib: it.next().unwrap_or(f64::NAN),
                });
            }
            None => println!("{line}"),
        }
    }
    reported.expect("the pass's measures")
}

/// One pass, in a child: `parse` (no checks), `checks` (every check), `route` (what `recheck`
/// runs: [`glassbox_audit::recheck::evaluate_bundle`]), or one check's id (that check alone). Prints its lines, then
/// `@ <events/s> <events/s of CPU time> <MiB grown> <MiB grown after the first quarter>`.
fn one_pass(what: &str, path: &Path, n: u64) {
    let manifest = manifest();
    let transcript: Vec<TranscriptEntry> = Vec::new();
    let ctx = Context {
        manifest: &manifest,
        transcript: &transcript,
        denied_transcript: &[],
        trigger_transcript: &[],
        flows: &[],
    };
    let p = match what {
        "parse" => {
            let p = pass(path, n, |e| {
                black_box(e);
            });
            p.print("parse only");
            p
        }
        "checks" => {
            let mut run = Run::new(ctx);
            let mut p = pass(path, n, |e| run.event(e));
            let t = Instant::now();
            let cpu = thread_cpu_secs();
            let results = run.finish(&Proofs::all_proven());
            let finish = t.elapsed();
            // `recheck` finishes every check too (the findings' summaries are written then):
            // part of the time it takes.
            p.secs += finish.as_secs_f64();
            p.cpu_secs += thread_cpu_secs() - cpu;
            p.print("parse + checks (with finish)");
            let findings: usize = results.iter().map(|r| r.findings.len()).sum();
            let notes: usize = results.iter().map(|r| r.notes.len()).sum();
            println!(
                "  results: {} ({findings} findings, {notes} notes; finish took {:.0} ms)",
                results
                    .iter()
                    .map(|r| format!("{} {:?}", r.id, r.outcome))
                    .collect::<Vec<_>>()
                    .join(", "),
                finish.as_secs_f64() * 1e3
            );
            p
        }
        "route" => {
            // What `glassbox recheck` and a live audit run: the pre-pass over the calls with a
            // destination (links), then every check over the stream, from the bundle's folder.
            let dir = path.parent().expect("the bundle's folder");
            let hwm_before = peak_rss();
            let t = Instant::now();
            let cpu = thread_cpu_secs();
            let (report, _) = glassbox_audit::recheck::evaluate_bundle(dir, &Proofs::all_proven())
                .expect("the bundle evaluates");
            let p = Pass {
                events: n,
                secs: t.elapsed().as_secs_f64(),
                cpu_secs: thread_cpu_secs() - cpu,
                hwm_before,
                hwm_at: vec![(n, peak_rss())],
            };
            p.print("recheck's route (pre-pass, then parse + checks, with finish)");
            println!("  verdict: {:?}", report.verdict);
            p
        }
        id => {
            let check = glassbox_checks::find(id).expect("a check id");
            let mut ev: Box<dyn Evaluator> = (check.start)(&ctx);
            let p = pass(path, n, |e| ev.event(e));
            let eval = ev.finish();
            p.print(&format!("parse + {id} alone"));
            println!(
                "  {id}: {} findings, {} notes",
                eval.findings.len(),
                eval.notes.len()
            );
            p
        }
    };
    println!(
        "@ {} {} {} {}",
        p.rate(),
        p.events as f64 / p.cpu_secs,
        mib(p.grew()),
        mib(p.grew_after_first_quarter())
    );
}

/// What one pass over the trace measured.
struct Pass {
    events: u64,
    secs: f64,
    /// CPU time of this thread over the loop.
    cpu_secs: f64,
    /// Peak RSS (bytes) before the pass, after resetting it.
    hwm_before: u64,
    /// Peak RSS at each quarter of the trace; the last is the end of the pass.
    hwm_at: Vec<(u64, u64)>,
}

impl Pass {
    fn rate(&self) -> f64 {
        self.events as f64 / self.secs
    }

    fn grew(&self) -> u64 {
        let end = self.hwm_at.last().map_or(self.hwm_before, |&(_, h)| h);
        end.saturating_sub(self.hwm_before)
    }

    fn grew_after_first_quarter(&self) -> u64 {
        let first = self.hwm_at.first().map_or(self.hwm_before, |&(_, h)| h);
        let end = self.hwm_at.last().map_or(self.hwm_before, |&(_, h)| h);
        end.saturating_sub(first)
    }

    fn print(&self, what: &str) {
        let quarters: Vec<String> = self
            .hwm_at
            .iter()
            .map(|&(at, h)| {
                format!(
                    "+{:.1} MiB at {}",
                    mib(h.saturating_sub(self.hwm_before)),
                    group(at)
                )
            })
            .collect();
        println!(
            "{what}: {} events in {:.2}s ({:.2}s CPU) = {:.2}M events/s; \
             peak RSS {:.1} -> {:.1} MiB (grew {:.1} MiB: {})",
            group(self.events),
            self.secs,
            self.cpu_secs,
            self.rate() / 1e6,
            mib(self.hwm_before),
            mib(self.hwm_before + self.grew()),
            mib(self.grew()),
            quarters.join(", ")
        );
    }
}

/// Reads `path` as `recheck` does, handing each event to `f`, on this thread.
fn pass(path: &Path, expected: u64, mut f: impl FnMut(&Event)) -> Pass {
    let hwm_before = peak_rss();
    let quarter = (expected / 4).max(1);
    let mut next_mark = quarter;
    let mut hwm_at = Vec::new();
    let t = Instant::now();
    let cpu = thread_cpu_secs();
    // The real reader of `glassbox recheck`.
    let mut events = 0u64;
    glassbox_model::bundle::read_events(path, |e: &Event| {
        f(e);
        events += 1;
        if events == next_mark && events < expected {
            hwm_at.push((events, peak_rss()));
            next_mark += quarter;
        }
    })
    .expect("events.jsonl reads back");
    let secs = t.elapsed().as_secs_f64();
    let cpu_secs = thread_cpu_secs() - cpu;
    hwm_at.push((events, peak_rss()));
    assert_eq!(events, expected, "events read back");
    Pass {
        events,
        secs,
        cpu_secs,
        hwm_before,
        hwm_at,
    }
}

/// CPU time this thread has used, in seconds.
fn thread_cpu_secs() -> f64 {
    let mut ts = libc::timespec {
        tv_sec: 0,
        tv_nsec: 0,
    };
    // SAFETY: `ts` is a valid, writable timespec for the duration of the call.
    let rc = unsafe { libc::clock_gettime(libc::CLOCK_THREAD_CPUTIME_ID, &mut ts) };
    if rc != 0 {
        return f64::NAN;
    }
    ts.tv_sec as f64 + ts.tv_nsec as f64 / 1e9
}

/// `VmHWM` of this process, in bytes.
fn peak_rss() -> u64 {
    status_kib("VmHWM:") * 1024
}

fn status_kib(field: &str) -> u64 {
    let status = std::fs::read_to_string("/proc/self/status").unwrap_or_default();
    status
        .lines()
        .find_map(|l| l.strip_prefix(field))
        .and_then(|v| v.trim().trim_end_matches("kB").trim().parse().ok())
        .unwrap_or(0)
}

fn mib(bytes: u64) -> f64 {
    bytes as f64 / (1024.0 * 1024.0)
}

/// `2000000` as `2,000,000`.
fn group(n: u64) -> String {
    let s = n.to_string();
    let groups: Vec<&str> = s
        .as_bytes()
        .rchunks(3)
        .rev()
        .map(|g| std::str::from_utf8(g).unwrap_or("?"))
        .collect();
    groups.join(",")
}

/// A directory under the system temp dir, removed on drop.
struct TempDir(PathBuf);

impl TempDir {
    fn new() -> TempDir {
        let nanos = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map_or(0, |d| d.subsec_nanos());
        let dir = std::env::temp_dir().join(format!(
            "glassbox-bench-recheck-{}-{nanos}",
            std::process::id()
        ));
        std::fs::create_dir_all(&dir).expect("create temp dir");
        TempDir(dir)
    }
}

impl Drop for TempDir {
    fn drop(&mut self) {
        if std::env::var_os(KEEP).is_some() {
            println!("kept {}", self.0.display());
        } else {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }
}

/// The manifest of the synthetic run: home `/home/sam`, working directory `/work/app`, three
/// honeytokens, a completed session, channels `syscalls` and `mcp-transcript`.
fn manifest() -> Manifest {
    let token = |path: &str, kind: &str, secret: &str| Honeytoken {
        path: path.into(),
        kind: kind.into(),
        secrets: vec![secret.into()],
        ..Default::default()
    };
    Manifest {
        format: 1,
        glassbox_version: glassbox_model::GLASSBOX_VERSION.into(),
        run_id: "bench-recheck".into(),
        started_at: "2025-01-01T00:00:00Z".into(),
        finished_at: Some("2025-01-01T00:01:00Z".into()),
        kernel: "Linux 6.8.0 x86_64".into(),
        target: Target {
            command: vec!["node".into(), "server.js".into()],
            program: "/usr/bin/node".into(),
            cwd: CWD.into(),
            ..Target::default()
        },
        sandbox: SandboxSettings {
            backend: "namespaces".into(),
            home: HOME.into(),
            cwd: CWD.into(),
            honeytokens: vec![
                token(
                    "/home/sam/.ssh/id_ed25519",
                    "ssh-ed25519-key",
                    "AAAAC3NzaC1lZDI1NTE5AAAAIBench",
                ),
                token(
                    "/home/sam/.aws/credentials",
                    "aws-credentials",
                    "AKIABENCHBENCHBENCH0",
                ),
                token(
                    "/home/sam/.config/gh/hosts.yml",
                    "github-token",
                    "ghp_benchbenchbenchbenchbenchbench0000",
                ),
            ],
            ..SandboxSettings::default()
        },
        recorder: RecorderSettings {
            mechanism: "seccomp-user-notify".into(),
            channels: vec!["syscalls".into(), "mcp-transcript".into()],
            ..RecorderSettings::default()
        },
        session: SessionSummary {
            completed: true,
            ..SessionSummary::default()
        },
        ..Manifest::default()
    }
}

/// A small deterministic generator (xorshift64*), so every run writes the same trace.
struct Rng(u64);

impl Rng {
    fn next(&mut self) -> u64 {
        self.0 ^= self.0 >> 12;
        self.0 ^= self.0 << 25;
        self.0 ^= self.0 >> 27;
        self.0.wrapping_mul(0x2545_f491_4f6c_dd1d)
    }

    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }

    fn pick<'a>(&mut self, xs: &[&'a str]) -> &'a str {
        xs[self.below(xs.len() as u64) as usize]
    }
}

const PACKAGES: &[&str] = &[
    "requests",
    "urllib3",
    "certifi",
    "idna",
    "charset_normalizer",
    "pydantic",
    "pydantic_core",
    "anyio",
    "httpx",
    "httpcore",
    "starlette",
    "mcp",
    "typing_extensions",
    "jsonschema",
    "attrs",
    "yaml",
];
const MODULES: &[&str] = &[
    "__init__",
    "api",
    "models",
    "utils",
    "compat",
    "exceptions",
    "_types",
    "config",
    "client",
    "server",
    "session",
    "auth",
];
const LIBS: &[&str] = &[
    "libc.so.6",
    "libm.so.6",
    "libssl.so.3",
    "libcrypto.so.3",
    "libz.so.1",
    "libffi.so.8",
    "libstdc++.so.6",
    "libgcc_s.so.1",
];
const SRC: &[&str] = &[
    "src",
    "src/tools",
    "src/lib",
    "tests",
    "docs",
    "data",
    "assets",
    "scripts",
];
const EXT: &[&str] = &["ts", "js", "json", "md", "py", "rs", "txt", "toml"];
const TOOLS: &[&str] = &["read_file", "search", "list_dir", "git_status", "fetch_url"];

/// Writes `manifest.json` and `n` events to `events_path`.
fn write_bundle(dir: &Path, manifest: &Manifest, events_path: &Path, n: u64) {
    let m = File::create(dir.join("manifest.json")).expect("create manifest.json");
    serde_json::to_writer_pretty(BufWriter::new(m), manifest).expect("write manifest.json");
    let mut w = BufWriter::with_capacity(
        1 << 20,
        File::create(events_path).expect("create events.jsonl"),
    );
    let mut rng = Rng(0x9e37_79b9_7f4a_7c15);
    let mut next_pid = 2;
    for i in 0..n {
        let e = event(&mut rng, i, n, &mut next_pid);
        serde_json::to_writer(&mut w, &e).expect("write an event");
        w.write_all(b"\n").expect("write an event");
    }
    w.flush().expect("flush events.jsonl");
}

/// The `i`-th event of `n`: 70% opens, 20% stats under home, 5% execs, 5% connects.
fn event(rng: &mut Rng, i: u64, n: u64, next_pid: &mut i32) -> Event {
    let phase = match i * 100 / n.max(1) {
        0 => Phase::Startup,
        1 => Phase::Initialize,
        2 => Phase::List,
        99 => Phase::Shutdown,
        p => Phase::Call(TOOLS[(p as usize / 7) % TOOLS.len()].to_string()),
    };
    // The server and a few workers do the file and network work; every exec is a new child.
    let mut pid = 1 + rng.below(4) as i32;
    let mut ppid = if pid == 1 { 0 } else { 1 };
    let roll = rng.below(100);
    let kind = if roll < 70 {
        open(rng)
    } else if roll < 90 {
        stat(rng)
    } else if roll < 95 {
        *next_pid += 1;
        ppid = pid;
        pid = *next_pid;
        exec(rng)
    } else {
        connect(rng)
    };
    Event {
        id: i + 1,
        t_ns: i * 1_750 + rng.below(1_000),
        pid,
        ppid,
        phase,
        kind,
    }
}

fn open(rng: &mut Rng) -> EventKind {
    let r = rng.below(10_000);
    let (path, flags): (String, u64) = match r {
        // Rare: the things the checks look for (a planted secret read, a credential
        // directory listed, a shell startup file appended to, a .env outside the cwd).
        0 => ("/home/sam/.ssh/id_ed25519".into(), O_RDONLY),
        1 => ("/home/sam/.aws".into(), O_RDONLY | O_DIRECTORY),
        2 => ("/home/sam/.bashrc".into(), O_WRONLY | O_APPEND),
        3 => ("/home/sam/other/.env".into(), O_RDONLY),
        // System libraries and packages, read-only.
        4..=3999 => {
            let path = if rng.below(4) == 0 {
                format!("/usr/lib/x86_64-linux-gnu/{}", rng.pick(LIBS))
            } else {
                format!(
                    "/usr/lib/python3.12/site-packages/{}/{}.py",
                    rng.pick(PACKAGES),
                    rng.pick(MODULES)
                )
            };
            let dir = if rng.below(10) == 0 { O_DIRECTORY } else { 0 };
            (path, O_RDONLY | O_CLOEXEC | dir)
        }
        // The user's caches and configuration, read and written.
        4000..=5999 => {
            let path = match rng.below(3) {
                0 => format!("/home/sam/.cache/app/{:x}.json", rng.below(5_000)),
                1 => format!("/home/sam/.config/app/settings-{}.json", rng.below(20)),
                _ => format!("/home/sam/.local/share/app/db/{}.sqlite", rng.below(8)),
            };
            let flags = match rng.below(4) {
                0 => O_WRONLY | O_CREAT | O_TRUNC,
                1 => O_RDWR | O_CREAT,
                _ => O_RDONLY,
            };
            (path, flags | O_CLOEXEC)
        }
        // The working directory, absolute or relative.
        _ => {
            let rel = format!("{}/f{}.{}", rng.pick(SRC), rng.below(2_000), rng.pick(EXT));
            let path = match rng.below(3) {
                0 => rel,
                1 => format!("./{rel}"),
                _ => format!("{CWD}/{rel}"),
            };
            let flags = match rng.below(5) {
                0 => O_WRONLY | O_CREAT | O_TRUNC,
                _ => O_RDONLY,
            };
            (path, flags | O_CLOEXEC)
        }
    };
    let result = match rng.below(10) {
        0 => Some(-2),
        1 => None,
        _ => Some(3 + rng.below(60) as i64),
    };
    let flags_text = flags_text(flags);
    EventKind::Open {
        syscall: if rng.below(20) == 0 { "open" } else { "openat" }.into(),
        path: Bytes::from(path),
        flags,
        flags_text,
        result,
    }
}

fn flags_text(flags: u64) -> String {
    let mut parts = vec![match flags & 0o3 {
        0 => "O_RDONLY",
        1 => "O_WRONLY",
        _ => "O_RDWR",
    }];
    for (bit, name) in [
        (O_CREAT, "O_CREAT"),
        (O_TRUNC, "O_TRUNC"),
        (O_APPEND, "O_APPEND"),
        (O_DIRECTORY, "O_DIRECTORY"),
        (O_CLOEXEC, "O_CLOEXEC"),
    ] {
        if flags & bit != 0 {
            parts.push(name);
        }
    }
    parts.join("|")
}

fn stat(rng: &mut Rng) -> EventKind {
    let path = match rng.below(10_000) {
        // Rare: credential paths.
        0 => "/home/sam/.aws/credentials".to_string(),
        1 => "/home/sam/.netrc".to_string(),
        2 => "/home/sam/.docker/config.json".to_string(),
        r if r < 5_000 => format!(
            "/home/sam/.config/{}/{}",
            rng.pick(&["app", "git", "node", "pip", "fontconfig"]),
            rng.pick(&["config", "settings.json", "fonts.conf", "ignore"])
        ),
        r if r < 8_000 => format!(
            "/home/sam/.local/lib/python3.12/site-packages/{}",
            rng.pick(PACKAGES)
        ),
        _ => format!("/home/sam/.cache/app/{:x}.json", rng.below(5_000)),
    };
    let syscall = rng.pick(&["newfstatat", "statx", "access", "readlink"]);
    EventKind::Stat {
        syscall: syscall.into(),
        path: Bytes::from(path),
    }
}

fn exec(rng: &mut Rng) -> EventKind {
    let argv: Vec<String> = match rng.below(1_000) {
        // Rare: a shell.
        0 => vec!["sh".into(), "-c".into(), "ls -la /work/app".into()],
        r if r < 600 => vec![
            "git".into(),
            "-C".into(),
            CWD.into(),
            rng.pick(&["status", "diff", "log", "rev-parse"]).into(),
            "--porcelain".into(),
        ],
        r if r < 900 => vec![
            "/usr/bin/python3".into(),
            "-m".into(),
            rng.pick(PACKAGES).into(),
            format!("--input={CWD}/data/f{}.json", rng.below(2_000)),
        ],
        _ => vec![
            "rg".into(),
            "--json".into(),
            format!("needle{}", rng.below(100)),
            CWD.into(),
        ],
    };
    let path = match argv[0].as_str() {
        "sh" => "/bin/sh".to_string(),
        a if a.starts_with('/') => a.to_string(),
        a => format!("/usr/bin/{a}"),
    };
    EventKind::Exec {
        syscall: "execve".into(),
        path: Bytes::from(path),
        argv: argv.into_iter().map(Bytes::from).collect(),
    }
}

fn connect(rng: &mut Rng) -> EventKind {
    let addr = match rng.below(10) {
        0..=5 => SockAddr::Inet {
            ip: "127.0.0.1".into(),
            port: 8000 + rng.below(4) as u16,
        },
        6 | 7 => SockAddr::Unix {
            path: Bytes::from("/run/user/1000/bus"),
            is_abstract: false,
        },
        8 => SockAddr::Inet6 {
            ip: "::1".into(),
            port: 5432,
        },
        _ => SockAddr::Inet {
            ip: format!("10.0.{}.{}", rng.below(4), 1 + rng.below(250)),
            port: 443,
        },
    };
    EventKind::Connect {
        syscall: rng.pick(&["connect", "sendto"]).into(),
        fd: 3 + rng.below(40) as i32,
        addr,
        sock_type: None,
    }
}
