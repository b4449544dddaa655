//! `glassbox batch FILE`: many audits, a bounded pool of sandboxes at a time.
//!
//! Each target is one independent audit in its own sandbox, with its own evidence folder
//! (`<evidence>/<NNN>-<target>/`) and its own record in the store. A package version that the
//! store already holds an audit of, made with the current version of every check, is not
//! audited again unless `--force` (so a batch that was stopped resumes where it was). One
//! target that fails, or attacks its sandbox, never stops the others. Progress goes to stderr
//! (a bar on a terminal, a line per finished target otherwise), the summary table to stdout;
//! the exit status is the worst of the targets' (as `glassbox audit`'s: 0 clean, 1 flagged or
//! withheld, 2 error, 3 inconclusive).

use crate::{Network, Recorder};
use anyhow::{Context, Result};
use glassbox_audit::batch::Job;
use glassbox_audit::config::{Launch, Vars};
use glassbox_audit::{selftest, AuditOptions, Progress};
use glassbox_model::{printable, CheckVersion, Phase, Verdict};
use glassbox_sandbox::limits::{self, Limits};
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// Resource limits of each sandbox.
#[derive(clap::Args, Clone, Debug)]
pub(crate) struct LimitArgs {
    /// Memory of each sandbox: every process and the tmpfs pages it wrote (512M, 1G...).
    #[arg(long, value_name = "SIZE", default_value = "1G")]
    memory: String,
    /// Processes and threads in each sandbox, its pid 1 included.
    #[arg(long, value_name = "N", default_value_t = 512)]
    pids: u64,
    /// CPUs' worth of time for each sandbox (0.5, 1, 2...).
    #[arg(long, value_name = "N", default_value_t = 1.0)]
    cpus: f64,
    /// Size of each writable tmpfs of a sandbox (/tmp, /run, /var, /dev/shm, home), and of
    /// the largest file it may write.
    #[arg(long, value_name = "SIZE", default_value = "512M")]
    disk: String,
}

impl LimitArgs {
    /// The limits, checked.
    pub(crate) fn limits(&self) -> Result<Limits> {
        let size = |flag: &str, v: &str| {
            limits::parse_size(v).map_err(|e| anyhow::anyhow!("--{flag}: {e}"))
        };
        let l = Limits {
            memory: Some(size("memory", &self.memory)?),
            pids: Some(self.pids),
            cpus: Some(self.cpus),
            disk: size("disk", &self.disk)?,
        };
        l.validate().map_err(|e| anyhow::anyhow!("{e}"))?;
        Ok(l)
    }
}

/// `glassbox batch`.
#[derive(clap::Args, Debug)]
pub(crate) struct BatchArgs {
    /// The targets: a list, one a line (`npm:NAME[@VERSION] [-- ARGS]`, `npm:./PATH.tgz`,
    /// `pypi:NAME[==VERSION] [-- ARGS]`, or `-- COMMAND [ARGS]`, run in the list's folder;
    /// `#` comments), an MCP client configuration, or a folder of server.json files.
    #[arg(value_name = "FILE")]
    file: PathBuf,
    /// Audits at a time (default: the number of CPUs).
    #[arg(long, short, value_name = "N")]
    jobs: Option<usize>,
    /// Audit a package version again even when the store holds an audit of it made with the
    /// current checks.
    #[arg(long)]
    force: bool,
    /// The store (default as for `audit`).
    #[arg(long, value_name = "FILE")]
    store: Option<PathBuf>,
    /// Where the evidence bundles go, one folder per target (default
    /// ./glassbox-evidence/batch-<unix time>-<pid>/).
    #[arg(long, value_name = "DIR")]
    evidence: Option<PathBuf>,
    /// Make another host path visible to every server, read-only (repeatable).
    #[arg(long = "ro", value_name = "PATH")]
    read_only: Vec<PathBuf>,
    /// Seconds to wait for each answer.
    #[arg(long, value_name = "SECS", default_value_t = 20)]
    request_timeout: u64,
    /// Bound on each MCP session, in seconds.
    #[arg(long, value_name = "SECS", default_value_t = 300)]
    session_timeout: u64,
    /// Seconds the install of a package may take.
    #[arg(long, value_name = "SECS", default_value_t = 600)]
    install_timeout: u64,
    /// Which runs to make (as for `audit`).
    #[arg(long, value_enum, default_value_t = Network::Both)]
    network: Network,
    /// A destination that does not count as unexplained egress: HOST or HOST:PORT
    /// (repeatable).
    #[arg(long = "allow-host", value_name = "HOST[:PORT]")]
    allow_host: Vec<String>,
    /// How to record the open and stat families.
    #[arg(long, value_enum, default_value_t = Recorder::Auto)]
    recorder: Recorder,
    /// Do not run the selftest when this build has none recorded.
    #[arg(long)]
    no_selftest: bool,
    /// No progress on stderr (the summary is still printed).
    #[arg(long, short)]
    quiet: bool,
    #[command(flatten)]
    limits: LimitArgs,
}

/// How one target ended.
enum Outcome {
    /// Audited and recorded.
    Audited { id: i64, verdict: Verdict },
    /// Already in the store with the current checks: not audited again.
    Skipped { id: i64, verdict: Verdict },
    /// Nothing glassbox can run here (a container image...).
    NotAudited(String),
    /// The audit could not be carried out.
    Failed(String),
}

impl Outcome {
    /// This target's share of the exit status.
    fn exit_code(&self) -> i32 {
        match self {
            Outcome::Audited { verdict, .. } | Outcome::Skipped { verdict, .. } => {
                verdict.exit_code()
            }
            Outcome::NotAudited(_) => Verdict::Inconclusive.exit_code(),
            Outcome::Failed(_) => 2,
        }
    }

    fn verdict(&self) -> &'static str {
        match self {
            Outcome::Audited { verdict, .. } | Outcome::Skipped { verdict, .. } => {
                verdict_name(*verdict)
            }
            Outcome::NotAudited(_) => "not audited",
            Outcome::Failed(_) => "error",
        }
    }

    fn detail(&self) -> String {
        match self {
            Outcome::Audited { id, .. } => format!("audit {id}"),
            Outcome::Skipped { id, .. } => format!("audit {id} (already audited)"),
            Outcome::NotAudited(why) | Outcome::Failed(why) => printable(why),
        }
    }
}

fn verdict_name(v: Verdict) -> &'static str {
    match v {
        Verdict::Clean => "clean",
        Verdict::Flagged => "flagged",
        Verdict::Withheld => "withheld",
        Verdict::Inconclusive => "inconclusive",
    }
}

/// One line of the summary.
struct Row {
    label: String,
    version: Option<String>,
    outcome: Outcome,
    /// `None` when nothing ran.
    took: Option<Duration>,
}

/// What every worker shares.
struct Shared<'a> {
    base: &'a AuditOptions,
    store: &'a Path,
    evidence: &'a Path,
    force: bool,
    checks: Vec<CheckVersion>,
    bar: ProgressBar,
    /// Running targets: index → what the bar shows of it.
    running: Mutex<BTreeMap<usize, String>>,
    quiet: bool,
    width: usize,
}

impl Shared<'_> {
    fn show(&self) {
        let running = self.running.lock().unwrap_or_else(|e| e.into_inner());
        let text: Vec<&str> = running.values().map(String::as_str).collect();
        self.bar.set_message(text.join(" | "));
    }

    fn set(&self, index: usize, text: String) {
        self.running
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .insert(index, text);
        self.show();
    }

    fn done(&self, index: usize, row: &Row) {
        self.running
            .lock()
            .unwrap_or_else(|e| e.into_inner())
            .remove(&index);
        self.bar.inc(1);
        self.show();
        if self.quiet {
            return;
        }
        let line = format!(
            "glassbox: [{:>w$}/{}] #{} {:<12} {} ({})",
            self.bar.position(),
            self.bar.length().unwrap_or(0),
            index + 1,
            row.outcome.verdict(),
            short(&printable(&row.label), 60),
            match &row.outcome {
                Outcome::Audited { .. } | Outcome::Skipped { .. } => row.outcome.detail(),
                _ => short(&row.outcome.detail(), 200),
            },
            w = self.width
        );
        if self.bar.is_hidden() {
            eprintln!("{line}");
        } else {
            self.bar.println(line);
        }
    }
}

/// The phases of one audit, shown in the bar.
struct JobProgress<'a> {
    shared: &'a Shared<'a>,
    index: usize,
    label: String,
}

impl Progress for JobProgress<'_> {
    fn phase(&self, phase: &Phase) {
        self.shared.set(
            self.index,
            format!("{}: {}", self.label, printable(&phase.to_string())),
        );
    }
}

/// `s` cut to `max` characters, with an ellipsis.
fn short(s: &str, max: usize) -> String {
    if s.chars().count() <= max {
        return s.to_string();
    }
    let mut out: String = s.chars().take(max.saturating_sub(1)).collect();
    out.push('…');
    out
}

/// A folder name for a target: its label's letters and digits, the rest as `-`.
fn slug(label: &str) -> String {
    let mut out = String::new();
    for c in label.chars() {
        if c.is_ascii_alphanumeric() || c == '.' || c == '_' {
            out.push(c);
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    let out = out.trim_matches(|c| c == '-' || c == '.').to_string();
    short(&out, 60).replace('…', "")
}

/// A new folder `<parent>/<name>`, or `<name>-2`, `-3`... when that exists (an earlier batch
/// with the same `--evidence`): a bundle is never written over another.
fn fresh_dir(parent: &Path, name: &str) -> std::io::Result<PathBuf> {
    let mut n = 1;
    loop {
        let dir = match n {
            1 => parent.join(name),
            _ => parent.join(format!("{name}-{n}")),
        };
        match std::fs::create_dir(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => n += 1,
            Err(e) => return Err(e),
        }
    }
}

/// The newest audit of `target` at `version` made with exactly the checks `current`.
fn already_audited(
    store: &glassbox_store::Store,
    target: &str,
    version: &str,
    current: &[CheckVersion],
) -> Result<Option<glassbox_store::AuditRow>> {
    let mut want: Vec<(&str, u32)> = current.iter().map(|c| (c.id.as_str(), c.version)).collect();
    want.sort_unstable();
    Ok(store
        .history(target, Some(version))?
        .into_iter()
        .find(|row| {
            let mut got: Vec<(&str, u32)> = row
                .checks
                .iter()
                .map(|c| (c.check_id.as_str(), c.version))
                .collect();
            got.sort_unstable();
            got == want
        }))
}

/// Runs one target to its row.
fn one(job: &Job, index: usize, sh: &Shared<'_>) -> Row {
    let label = printable(&job.label);
    let mut row = Row {
        label: job.label.clone(),
        version: None,
        outcome: Outcome::Failed(String::new()),
        took: None,
    };
    sh.set(index, short(&label, 40));
    let mut o = sh.base.clone();
    o.cwd = job.cwd.clone();
    o.server_env = job.env.clone();
    match &job.launch {
        Launch::Package { spec, args } => {
            // The exact version first: what the store files the audit under.
            let version = match spec.resolve_version() {
                Ok(v) => v,
                Err(e) => {
                    row.outcome = Outcome::Failed(e.to_string());
                    return row;
                }
            };
            row.version = Some(version.clone());
            if !sh.force {
                let target = format!("{}:{}", spec.registry.name(), spec.name);
                let found = glassbox_store::Store::open(sh.store)
                    .map_err(anyhow::Error::from)
                    .and_then(|s| already_audited(&s, &target, &version, &sh.checks));
                match found {
                    Ok(Some(prior)) => {
                        row.outcome = Outcome::Skipped {
                            id: prior.id,
                            verdict: prior.verdict,
                        };
                        return row;
                    }
                    Ok(None) => {}
                    Err(e) => {
                        row.outcome = Outcome::Failed(format!("cannot read the store: {e:#}"));
                        return row;
                    }
                }
            }
            let mut spec = spec.clone();
            spec.version = Some(version);
            o.package = Some(spec);
            o.command = glassbox_audit::config::os_args(args);
        }
        Launch::Command(argv) => {
            o.package = None;
            o.command = glassbox_audit::config::os_args(argv);
        }
        Launch::Remote { .. } => {}
        Launch::Unsupported(why) => {
            row.outcome = Outcome::NotAudited(why.clone());
            return row;
        }
    }
    let name = format!("{:0w$}-{}", index + 1, slug(&job.label), w = sh.width);
    match fresh_dir(sh.evidence, &name) {
        Ok(dir) => o.evidence_dir = Some(dir),
        Err(e) => {
            row.outcome = Outcome::Failed(format!("cannot make its evidence folder: {e}"));
            return row;
        }
    }
    let progress = JobProgress {
        shared: sh,
        index,
        label: short(&label, 40),
    };
    let start = Instant::now();
    let audit = match &job.launch {
        Launch::Remote { url, transport } => {
            glassbox_audit::audit_remote(url, transport == "sse", &o, &progress)
        }
        _ => glassbox_audit::audit(&o, &progress),
    };
    row.took = Some(start.elapsed());
    row.outcome = match audit {
        Err(e) => Outcome::Failed(e.to_string()),
        Ok(a) => {
            if let Some(p) = &a.evidence.manifest.target.package {
                row.version = Some(p.version.clone());
            }
            let recorded = glassbox_store::Store::open(sh.store)
                .and_then(|mut s| s.record(&a.report, &a.evidence.manifest, None, &a.evidence_dir));
            match recorded {
                Ok(id) => Outcome::Audited {
                    id,
                    verdict: a.report.verdict,
                },
                Err(e) => Outcome::Failed(format!(
                    "{} but not recorded in the store ({e}); evidence in {}",
                    verdict_name(a.report.verdict),
                    a.evidence_dir.display()
                )),
            }
        }
    };
    row
}

/// Runs the batch; returns the exit status.
pub(crate) fn run(args: BatchArgs, cwd: PathBuf, vars: &dyn Vars) -> Result<i32> {
    let limits = args.limits.limits()?;
    let jobs = glassbox_audit::batch::load(&args.file, &cwd, vars)?;
    let workers = args
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .clamp(1, jobs.len());
    let store = match args.store {
        Some(p) => p,
        None => glassbox_store::Store::default_path()?,
    };
    // A store that cannot be opened fails the batch before anything runs.
    glassbox_store::Store::open(&store)
        .with_context(|| format!("cannot open the store {}", store.display()))?;
    let evidence = match args.evidence {
        Some(d) => d,
        None => {
            let secs = std::time::SystemTime::now()
                .duration_since(std::time::UNIX_EPOCH)
                .map_or(0, |d| d.as_secs());
            cwd.join("glassbox-evidence")
                .join(format!("batch-{secs}-{}", std::process::id()))
        }
    };
    std::fs::create_dir_all(&evidence)
        .with_context(|| format!("cannot create {}", evidence.display()))?;

    let mut base = AuditOptions::new(Vec::new(), cwd);
    base.recorder = args.recorder.into();
    base.network = args.network.into();
    base.allow_hosts = args.allow_host;
    base.install_timeout = Duration::from_secs(args.install_timeout.max(1));
    base.session.request_timeout = Duration::from_secs(args.request_timeout.max(1));
    base.session.session_timeout = Duration::from_secs(args.session_timeout.max(1));
    base.extra_ro = crate::absolute(args.read_only)?;
    base.limits = limits;
    let proofs = selftest::load_proofs();
    let fixtures = selftest::default_fixtures();
    base.proofs = Some(
        if proofs.missing.is_some()
            && proofs.by_check.is_empty()
            && !args.no_selftest
            && fixtures.join("manifest.json").exists()
        {
            eprintln!(
                "glassbox: no selftest recorded for this build {}: running the controls once \
                 (--no-selftest to skip)",
                selftest::build_id()
            );
            crate::run_selftest(&fixtures, args.recorder, workers.max(2), args.quiet)?.proofs()
        } else {
            proofs
        },
    );

    let bar = if args.quiet {
        ProgressBar::hidden()
    } else {
        ProgressBar::with_draw_target(Some(jobs.len() as u64), ProgressDrawTarget::stderr())
    };
    bar.set_style(
        ProgressStyle::with_template("{elapsed_precise} [{bar:24}] {pos}/{len} {wide_msg}")
            .context("progress template")?
            .progress_chars("=> "),
    );
    bar.enable_steady_tick(Duration::from_millis(500));
    let shared = Shared {
        base: &base,
        store: &store,
        evidence: &evidence,
        force: args.force,
        checks: glassbox_checks::versions(),
        bar,
        running: Mutex::new(BTreeMap::new()),
        quiet: args.quiet,
        width: jobs.len().to_string().len(),
    };
    if !args.quiet {
        eprintln!(
            "glassbox: {} targets, {workers} at a time; evidence in {}",
            jobs.len(),
            evidence.display()
        );
    }
    let start = Instant::now();
    let next = Mutex::new(0usize);
    let rows: Mutex<Vec<Option<Row>>> = Mutex::new((0..jobs.len()).map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..workers {
            s.spawn(|| loop {
                let index = {
                    let mut n = next.lock().unwrap_or_else(|e| e.into_inner());
                    let i = *n;
                    *n += 1;
                    i
                };
                let Some(job) = jobs.get(index) else { break };
                let row = one(job, index, &shared);
                shared.done(index, &row);
                rows.lock().unwrap_or_else(|e| e.into_inner())[index] = Some(row);
            });
        }
    });
    let elapsed = start.elapsed();
    shared.bar.finish_and_clear();
    let rows: Vec<Row> = rows
        .into_inner()
        .unwrap_or_else(|e| e.into_inner())
        .into_iter()
        .flatten()
        .collect();
    print!("{}", summary(&rows, elapsed, workers));
    Ok(rows
        .iter()
        .map(|r| r.outcome.exit_code())
        .max()
        .unwrap_or(0))
}

/// `1 target`, `2 targets`.
fn plural(n: usize, what: &str) -> String {
    format!("{n} {what}{}", if n == 1 { "" } else { "s" })
}

/// The summary table and the totals.
fn summary(rows: &[Row], elapsed: Duration, workers: usize) -> String {
    let cells: Vec<[String; 6]> = rows
        .iter()
        .enumerate()
        .map(|(i, r)| {
            [
                (i + 1).to_string(),
                short(&printable(&r.label), 60),
                r.version
                    .as_deref()
                    .map(printable)
                    .unwrap_or_else(|| "-".into()),
                r.outcome.verdict().to_string(),
                r.took
                    .map(|t| format!("{:.1}s", t.as_secs_f64()))
                    .unwrap_or_else(|| "-".into()),
                short(&r.outcome.detail(), 300),
            ]
        })
        .collect();
    let head = [
        "#",
        "target",
        "version",
        "verdict",
        "time",
        "audit or error",
    ];
    let mut width = head.map(|h| h.chars().count());
    for c in &cells {
        for (w, cell) in width.iter_mut().zip(c) {
            *w = (*w).max(cell.chars().count());
        }
    }
    let line = |c: &[String; 6]| {
        format!(
            "{:>w0$}  {:<w1$}  {:<w2$}  {:<w3$}  {:>w4$}  {}\n",
            c[0],
            c[1],
            c[2],
            c[3],
            c[4],
            c[5],
            w0 = width[0],
            w1 = width[1],
            w2 = width[2],
            w3 = width[3],
            w4 = width[4]
        )
    };
    let mut out = line(&head.map(String::from));
    for c in &cells {
        out.push_str(&line(c));
    }
    let count = |f: &dyn Fn(&Outcome) -> bool| rows.iter().filter(|r| f(&r.outcome)).count();
    let of =
        |v: Verdict| count(&|o| matches!(o, Outcome::Audited { verdict, .. } if *verdict == v));
    let audited = count(&|o| matches!(o, Outcome::Audited { .. }));
    let minutes = elapsed.as_secs_f64() / 60.0;
    out.push_str(&format!(
        "{} in {:.1}s, {workers} at a time: {} clean, {} flagged, {} withheld, {} \
         inconclusive, {} already audited, {} not audited, {}; {:.2} audits per minute\n",
        plural(rows.len(), "target"),
        elapsed.as_secs_f64(),
        of(Verdict::Clean),
        of(Verdict::Flagged),
        of(Verdict::Withheld),
        of(Verdict::Inconclusive),
        count(&|o| matches!(o, Outcome::Skipped { .. })),
        count(&|o| matches!(o, Outcome::NotAudited(_))),
        plural(count(&|o| matches!(o, Outcome::Failed(_))), "error"),
        if minutes > 0.0 {
            audited as f64 / minutes
        } else {
            0.0
        }
    ));
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn folder_names_are_safe() {
        assert_eq!(slug("npm:@scope/server@1.2.3"), "npm-scope-server-1.2.3");
        assert_eq!(slug("-- python3 ../x/server.py"), "python3-..-x-server.py");
        assert_eq!(slug("../../etc"), "etc");
        assert_eq!(slug("日本"), "");
        assert!(slug(&"a".repeat(200)).len() <= 60);
    }

    #[test]
    fn the_summary_has_a_row_per_target_and_totals() {
        let rows = vec![
            Row {
                label: "npm:a@1.0.0".into(),
                version: Some("1.0.0".into()),
                outcome: Outcome::Audited {
                    id: 7,
                    verdict: Verdict::Clean,
                },
                took: Some(Duration::from_millis(12_300)),
            },
            Row {
                label: "-- python3 bomb/server.py".into(),
                version: None,
                outcome: Outcome::Audited {
                    id: 8,
                    verdict: Verdict::Inconclusive,
                },
                took: Some(Duration::from_secs(16)),
            },
            Row {
                label: "npm:b".into(),
                version: Some("2.0.0".into()),
                outcome: Outcome::Skipped {
                    id: 3,
                    verdict: Verdict::Flagged,
                },
                took: None,
            },
            Row {
                label: "pypi:gone".into(),
                version: None,
                outcome: Outcome::Failed("cannot resolve pypi:gone\nto a version".into()),
                took: None,
            },
        ];
        let text = summary(&rows, Duration::from_secs(30), 2);
        let lines: Vec<&str> = text.lines().collect();
        assert_eq!(lines.len(), 6, "{text}");
        assert!(lines[0].starts_with("#  target"), "{text}");
        assert!(
            lines[1].contains("npm:a@1.0.0")
                && lines[1].contains("clean")
                && lines[1].contains("12.3s")
                && lines[1].ends_with("audit 7"),
            "{text}"
        );
        assert!(
            lines[3].contains("flagged") && lines[3].ends_with("audit 3 (already audited)"),
            "{text}"
        );
        // A newline from an error never breaks the table.
        assert!(
            lines[4].contains("error") && lines[4].contains("cannot resolve pypi:gone"),
            "{text}"
        );
        assert!(
            lines[5].starts_with("4 targets in 30.0s, 2 at a time: 1 clean, 0 flagged, 0 withheld, 1 inconclusive, 1 already audited, 0 not audited, 1 error; 4.00 audits per minute"),
            "{text}"
        );
        let worst = rows.iter().map(|r| r.outcome.exit_code()).max();
        assert_eq!(worst, Some(3));
    }
}
