//! `glassbox`: audit MCP servers by running them.
//!
//! Exit codes of `audit`: 0 clean, 1 flagged or withheld, 2 usage or internal error,
//! 3 inconclusive.

#![forbid(unsafe_code)]

#[macro_use]
mod out;

mod args;
mod audit;
mod batch;
mod man;
mod trace;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use glassbox_audit::{selftest, EventSink, Progress, RecorderChoice};
use glassbox_model::bundle;
use glassbox_model::{Event, EventKind, Phase};
use std::ffi::OsString;
use std::io::{IsTerminal, Write};
use std::path::{Path, PathBuf};
use std::time::Instant;

#[derive(Parser, Debug)]
#[command(
    name = "glassbox",
    version,
    about = "Audit MCP servers by running them: in a sandbox, under a syscall recorder, with planted fake secrets.",
    after_help = "Exit codes of audit: 0 clean, 1 flagged or withheld, 2 usage or internal error, 3 inconclusive."
)]
struct Cli {
    #[command(subcommand)]
    command: Command,
}

#[derive(Subcommand, Debug)]
enum Command {
    /// Run an MCP stdio server in the sandbox, speak MCP to it, call every tool, and report
    /// what it did.
    Audit(audit::AuditArgs),
    /// Audit many servers, a bounded pool of sandboxes at a time: a list of targets, an MCP
    /// client configuration or a folder of server.json files. Resumable: a package version
    /// already audited with the current checks is skipped (--force audits it again).
    Batch(batch::BatchArgs),
    /// Run every control fixture through the real sandbox; print TP/TN/FP/FN per check; record
    /// which checks are proven in this build. Exits 1 on any miss.
    Selftest {
        /// The controls (default: the source tree's fixtures/).
        #[arg(long, value_name = "DIR")]
        fixtures: Option<PathBuf>,
        /// How to record the open and stat families.
        #[arg(long, value_enum, default_value_t = Recorder::Auto)]
        recorder: Recorder,
        /// Audits at a time (default: 4; under --isolation microvm 1, as emulated guests on
        /// the same cores starve each other's timed controls).
        #[arg(long, short)]
        jobs: Option<usize>,
        /// Also write the record as JSON to FILE ("-" for standard output).
        #[arg(long, value_name = "FILE")]
        json: Option<PathBuf>,
        /// Where the controls run; an audit is proven by the selftest of its own isolation.
        /// Under microvm every control boots its own guests (about 20 s each under TCG).
        #[arg(long, value_enum, default_value_t = Isolation::Namespace)]
        isolation: Isolation,
        /// Run only the controls of these names (the folders under fixtures/; repeatable,
        /// or comma-separated). What they show is printed and written by --json, but is not
        /// saved as the build's record: a check is proven by all its controls.
        #[arg(long, value_name = "NAME", value_delimiter = ',')]
        only: Vec<String>,
    },
    /// Re-evaluate stored evidence bundles with the current checks, without running anything.
    Recheck {
        /// Write the reports as JSON to FILE ("-" for standard output).
        #[arg(long, value_name = "FILE")]
        json: Option<PathBuf>,
        /// Evidence bundles (folders with manifest.json and events.jsonl).
        #[arg(required = true, value_name = "EVIDENCE")]
        dirs: Vec<PathBuf>,
    },
    /// The TCP destinations an audited server reached (capture run), as an allowlist to start
    /// from: a ToolHive permission profile or Docker MCP Gateway `allowHosts`, on stdout.
    Allowlist {
        /// Output format.
        #[arg(long, value_enum, default_value_t = AllowlistFormat::Toolhive)]
        format: AllowlistFormat,
        /// The evidence bundle (a folder with network.jsonl).
        #[arg(value_name = "EVIDENCE")]
        dir: PathBuf,
    },
    /// Accusations withheld until a person reviews them: list, show, accept (publish) or
    /// reject (publish the audit without it; its evidence becomes a regression case).
    Review {
        /// The store: a file or a PostgreSQL URL (default as for `audit`).
        #[arg(long, value_name = "FILE|URL", global = true)]
        store: Option<glassbox_store::StoreLocation>,
        #[command(subcommand)]
        action: ReviewAction,
    },
    /// The report of a stored audit, as published: findings awaiting review are withheld,
    /// rejected ones dropped.
    Report {
        /// The audit's id in the store (printed by `audit`; see `review list`).
        id: i64,
        /// Output format.
        #[arg(long, value_enum, default_value_t = ReportFormat::Terminal)]
        format: ReportFormat,
        /// The store: a file or a PostgreSQL URL (default as for `audit`).
        #[arg(long, value_name = "FILE|URL")]
        store: Option<glassbox_store::StoreLocation>,
        /// Show withheld findings too (for the reviewer; not for publishing).
        #[arg(long)]
        include_withheld: bool,
    },
    /// Every audit in the store, as published, as a static site: an index of the servers with
    /// statistics across them, one page per audit, the coverage ledger and the blind spots.
    Site {
        /// The folder to write the site into (created if missing; its pages are replaced).
        #[arg(long, value_name = "DIR")]
        out: PathBuf,
        /// The store: a file or a PostgreSQL URL (default as for `audit`).
        #[arg(long, value_name = "FILE|URL")]
        store: Option<glassbox_store::StoreLocation>,
        /// The controls, for the coverage ledger (default: the source tree's fixtures/).
        #[arg(long, value_name = "DIR")]
        fixtures: Option<PathBuf>,
        /// The regression cases, for the ledger (default: the source tree's regressions/).
        #[arg(long, value_name = "DIR")]
        regressions: Option<PathBuf>,
    },
    /// The audits of one package version (or command) over time, and what changed between
    /// consecutive ones: verdicts, check outcomes, check versions.
    History {
        /// The target as filed: `npm:NAME`, `pypi:NAME`, or the command line.
        target: String,
        /// The exact version (default: every version recorded, newest audit first).
        #[arg(long, value_name = "VERSION")]
        version: Option<String>,
        /// The store: a file or a PostgreSQL URL (default as for `audit`).
        #[arg(long, value_name = "FILE|URL")]
        store: Option<glassbox_store::StoreLocation>,
        /// JSON lines instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Per check: positive and negative controls, regression cases; fragile checks marked.
    Coverage {
        /// The controls (default: the source tree's fixtures/).
        #[arg(long, value_name = "DIR")]
        fixtures: Option<PathBuf>,
        /// The regression cases (default: the source tree's regressions/).
        #[arg(long, value_name = "DIR")]
        regressions: Option<PathBuf>,
        /// JSON instead of a table.
        #[arg(long)]
        json: bool,
    },
    /// Run any command in the same sandbox under the same recorder, without MCP.
    Trace {
        /// Write events as JSON lines to FILE (default: readable lines on stderr).
        #[arg(long, value_name = "FILE")]
        out: Option<PathBuf>,
        /// Make another host path visible, read-only (repeatable).
        #[arg(long = "ro", value_name = "PATH")]
        read_only: Vec<PathBuf>,
        /// Set an environment variable for the command: NAME=VALUE (repeatable).
        #[arg(long = "env", short = 'e', value_name = "NAME=VALUE")]
        env: Vec<String>,
        /// What the network edge answers (as for `audit`; namespace isolation only).
        #[arg(long, value_enum, default_value_t = Responder::Ok)]
        responder: Responder,
        /// How to record the open and stat families.
        #[arg(long, value_enum, default_value_t = Recorder::Auto)]
        recorder: Recorder,
        /// Where the sandbox runs: on this kernel (namespaces), or inside a QEMU microVM with
        /// the recorder in the guest.
        #[arg(long, value_enum, default_value_t = Isolation::Namespace)]
        isolation: Isolation,
        /// The command and its arguments.
        #[arg(last = true, required = true, value_name = "COMMAND")]
        cmd: Vec<OsString>,
    },
    /// The microVM's guest agent: pid 1 of glassbox's microVM (crates/vm); refuses to run
    /// anywhere else.
    #[command(name = "vm-agent", hide = true)]
    VmAgent,
    /// The guest's side of `audit --isolation microvm`: runs the server the host asks for in
    /// the guest's sandbox (crates/audit/src/microvm.rs).
    #[command(name = "audit-guest", hide = true)]
    AuditGuest,
    /// Print glassbox's man page (roff: `glassbox man | man -l -`), made from the same
    /// argument definitions as --help.
    Man,
}

/// `review` subcommands.
#[derive(Subcommand, Debug)]
enum ReviewAction {
    /// The findings awaiting review.
    List,
    /// One finding: what was found, in which audit, with which evidence.
    Show {
        /// The finding's id (from `review list`).
        id: i64,
    },
    /// The accusation stands: publish it.
    Accept {
        /// The finding's id.
        id: i64,
        /// Why it stands.
        #[arg(long)]
        note: String,
        /// Who reviewed it (default: $USER).
        #[arg(long)]
        reviewer: Option<String>,
    },
    /// The accusation is wrong: publish the audit without it, and keep its evidence as a
    /// regression case on which the check must pass.
    Reject {
        /// The finding's id.
        id: i64,
        /// Why it is wrong.
        #[arg(long)]
        reason: String,
        /// Who reviewed it (default: $USER).
        #[arg(long)]
        reviewer: Option<String>,
        /// Where the regression case goes (default: `regressions/` beside the store: the
        /// SQLite file's folder, or the state folder for PostgreSQL).
        #[arg(long, value_name = "DIR")]
        regressions: Option<PathBuf>,
    },
}

/// `report --format`.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum ReportFormat {
    /// Text for a terminal.
    Terminal,
    /// The JSON report (schemas/report.schema.json).
    Json,
    /// Markdown.
    Md,
    /// One self-contained HTML page.
    Html,
    /// SARIF 2.1.0 for code scanning: withheld findings written as withheld, with nothing of
    /// them (in full with --include-withheld, marked withheld); rejected ones dropped.
    Sarif,
}

/// `allowlist --format`.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum AllowlistFormat {
    /// A ToolHive permission profile (`network.outbound.allow_host`, `allow_port`).
    Toolhive,
    /// Docker MCP Gateway `allowHosts` (`host:port`).
    Docker,
}

/// `--network`.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum Network {
    /// DNS answered with synthetic addresses, TCP accepted and its first bytes recorded.
    Capture,
    /// Every packet dropped and counted; nothing answered.
    Denied,
    /// A capture run, then a denied run.
    Both,
}

impl From<Network> for glassbox_audit::NetworkChoice {
    fn from(n: Network) -> Self {
        match n {
            Network::Capture => glassbox_audit::NetworkChoice::Capture,
            Network::Denied => glassbox_audit::NetworkChoice::Denied,
            Network::Both => glassbox_audit::NetworkChoice::Both,
        }
    }
}

/// `--responder`.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
pub(crate) enum Responder {
    /// TLS terminated with the audit's CA, every request read and answered 200.
    Ok,
    /// TLS closed after the ClientHello, HTTP answered 503.
    Refuse,
}

impl From<Responder> for glassbox_audit::ResponderChoice {
    fn from(r: Responder) -> Self {
        match r {
            Responder::Ok => glassbox_audit::ResponderChoice::Ok,
            Responder::Refuse => glassbox_audit::ResponderChoice::Refuse,
        }
    }
}

/// `--surface`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum Surface {
    /// Tools, resources, resource templates and prompts.
    All,
    /// Tools only.
    Tools,
}

/// `--explore`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub(crate) enum ExploreLevel {
    /// One call per tool, with every property.
    Single,
    /// Up to 4 calls per tool.
    Quick,
    /// Up to 16 calls per tool.
    Thorough,
}

impl From<ExploreLevel> for glassbox_mcp::Explore {
    fn from(e: ExploreLevel) -> Self {
        match e {
            ExploreLevel::Single => glassbox_mcp::Explore::single(),
            ExploreLevel::Quick => glassbox_mcp::Explore::quick(),
            ExploreLevel::Thorough => glassbox_mcp::Explore::thorough(),
        }
    }
}

/// `--recorder`.
#[derive(Clone, Copy, Debug, clap::ValueEnum)]
enum Recorder {
    /// eBPF where allowed (root), seccomp user notification otherwise.
    Auto,
    /// seccomp user notification for every recorded call.
    Notify,
    /// eBPF for the open and stat families (fails where not allowed).
    Ebpf,
}

/// `trace --isolation`, `audit --isolation`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
enum Isolation {
    /// The namespace sandbox on the host's kernel.
    Namespace,
    /// The namespace sandbox and its recorder inside a QEMU microVM (its own kernel).
    Microvm,
}

impl From<Isolation> for glassbox_audit::Isolation {
    fn from(i: Isolation) -> Self {
        match i {
            Isolation::Namespace => glassbox_audit::Isolation::Namespace,
            Isolation::Microvm => glassbox_audit::Isolation::MicroVm,
        }
    }
}

impl From<Recorder> for RecorderChoice {
    fn from(r: Recorder) -> Self {
        match r {
            Recorder::Auto => RecorderChoice::Auto,
            Recorder::Notify => RecorderChoice::Notify,
            Recorder::Ebpf => RecorderChoice::Ebpf,
        }
    }
}

struct StderrProgress {
    start: Instant,
}

impl StderrProgress {
    /// A run's line: what the run is, or why it is made again.
    fn run_line(&self, what: &str) {
        eprintln!(
            "glassbox: [{:6.2}s] run: {what}",
            self.start.elapsed().as_secs_f64()
        );
    }
}

impl Progress for StderrProgress {
    fn phase(&self, phase: &Phase) {
        let line = format!(
            "glassbox: [{:6.2}s] {}\n",
            self.start.elapsed().as_secs_f64(),
            glassbox_model::Bytes::from(phase.to_string())
        );
        let _ = std::io::stderr().write_all(line.as_bytes());
    }

    fn network_run(&self, mode: glassbox_model::NetworkMode) {
        let what = match mode {
            glassbox_model::NetworkMode::Capture => "network captured at glassbox's edge",
            glassbox_model::NetworkMode::Denied => "network denied: every packet dropped",
            glassbox_model::NetworkMode::Install => {
                "installing the package: only its registry is reached, the rest captured"
            }
            glassbox_model::NetworkMode::Trigger => {
                "trigger run: the session again with the server's world changed"
            }
        };
        self.run_line(what);
    }

    fn repeat(&self, why: &str) {
        self.run_line(why);
    }
}

/// Events as lines a person can read.
struct Readable<W: Write + Send>(W);

impl<W: Write + Send> EventSink for Readable<W> {
    fn event(&mut self, e: &Event) -> std::io::Result<()> {
        let what = match &e.kind {
            EventKind::Exec { path, argv, .. } => {
                let args: Vec<String> = argv.iter().map(|a| a.to_string()).collect();
                format!("exec {path} [{}]", args.join(" "))
            }
            EventKind::Open {
                syscall,
                path,
                flags_text,
                ..
            } => format!("{syscall} {path} {flags_text}"),
            EventKind::Stat { syscall, path } => format!("{syscall} {path}"),
            EventKind::Connect { syscall, addr, .. } => format!("{syscall} {addr}"),
            EventKind::Bind { addr, .. } => format!("bind {addr}"),
            EventKind::Socket {
                domain,
                sock_type,
                protocol,
            } => format!("socket domain={domain} type={sock_type} protocol={protocol}"),
            EventKind::Image { path, shown } => format!("image {path} (exec named {shown})"),
            EventKind::Honeytoken { path, access, .. } => {
                format!("HONEYTOKEN {access} {path} (kernel-reported)")
            }
            EventKind::Refused { syscall, errno, .. } => {
                format!("REFUSED {syscall} (errno {errno})")
            }
        };
        writeln!(
            self.0,
            "[{:9.4}s] pid {:<5} ppid {:<5} {}",
            e.t_ns as f64 / 1e9,
            e.pid,
            e.ppid,
            what
        )
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

/// The store `--store` names, else the one of the environment, opened.
fn open_store(
    store: Option<glassbox_store::StoreLocation>,
) -> Result<(glassbox_store::StoreLocation, glassbox_store::Store)> {
    let path = match store {
        Some(p) => p,
        None => glassbox_store::StoreLocation::from_env()?,
    };
    let s = glassbox_store::Store::open_location(&path)
        .with_context(|| format!("cannot open the store {}", path.display()))?;
    Ok((path, s))
}

/// Whether `--json`/`--sarif` name standard output.
fn is_stdout(p: &Option<PathBuf>) -> bool {
    p.as_deref().is_some_and(|p| p.as_os_str() == "-")
}

/// Writes a document to FILE, or to standard output for `-`.
fn write_doc(path: &Path, doc: &str) -> Result<()> {
    if path.as_os_str() == "-" {
        out!("{doc}");
        return Ok(());
    }
    std::fs::write(path, doc).with_context(|| format!("cannot write {}", path.display()))
}

/// `history`: the audits of a target, oldest first, each with what changed since the one
/// before it of the same version.
fn history(
    s: &glassbox_store::Store,
    target: &str,
    version: Option<&str>,
    json: bool,
) -> Result<i32> {
    let mut rows: Vec<glassbox_store::AuditRow> = match version {
        Some(v) => s.history(target, Some(v))?,
        None => s
            .audits()?
            .into_iter()
            .filter(|a| a.target == target)
            .collect(),
    };
    if rows.is_empty() {
        anyhow::bail!(
            "no audit of {} in the store{}",
            glassbox_model::printable(target),
            version
                .map(|v| format!(" at version {v}"))
                .unwrap_or_default()
        );
    }
    rows.sort_by_key(|a| a.id);
    let mut previous: std::collections::HashMap<Option<String>, &glassbox_store::AuditRow> =
        std::collections::HashMap::new();
    let mut out = String::new();
    for a in &rows {
        let mut changes = Vec::new();
        if let Some(p) = previous.get(&a.target_version) {
            if p.verdict != a.verdict {
                changes.push(format!(
                    "verdict {} -> {}",
                    wire(&p.verdict),
                    wire(&a.verdict)
                ));
            }
            for c in &a.checks {
                match p.checks.iter().find(|x| x.check_id == c.check_id) {
                    None => changes.push(format!("{} new (v{})", c.check_id, c.version)),
                    Some(x) if x.outcome != c.outcome => changes.push(format!(
                        "{} {} -> {}{}",
                        c.check_id,
                        wire(&x.outcome),
                        wire(&c.outcome),
                        if x.version != c.version {
                            format!(" (v{} -> v{})", x.version, c.version)
                        } else {
                            String::new()
                        }
                    )),
                    _ => {}
                }
            }
        }
        if let Some(p) = previous.get(&a.target_version) {
            changes.extend(glassbox_store::bundle_tool_changes(
                &p.evidence_dir,
                &a.evidence_dir,
            ));
        }
        previous.insert(a.target_version.clone(), a);
        if json {
            let line = serde_json::json!({
                "id": a.id,
                "run_id": a.run_id,
                "version": a.target_version,
                "started_at": a.started_at,
                "glassbox_version": a.glassbox_version,
                "verdict": a.verdict,
                "changes": changes,
            });
            out.push_str(&format!("{line}\n"));
        } else {
            out.push_str(&format!(
                "{:>5}  {}  {:<14} {:<12} {}\n",
                a.id,
                glassbox_model::printable(&a.started_at),
                glassbox_model::printable(a.target_version.as_deref().unwrap_or("-")),
                wire(&a.verdict),
                if changes.is_empty() {
                    String::new()
                } else {
                    glassbox_model::printable(&changes.join("; "))
                }
            ));
        }
    }
    if !json {
        outln!("{}", glassbox_model::printable(target));
        outln!(
            "{:>5}  {:<24}  {:<14} {:<12} changes since the previous audit of that version",
            "id",
            "recorded",
            "version",
            "verdict"
        );
    }
    out!("{out}");
    Ok(0)
}

/// A value's name on the wire (`clean`, `not-observed`...).
fn wire<T: serde::Serialize>(v: &T) -> String {
    serde_json::to_value(v)
        .ok()
        .and_then(|v| v.as_str().map(str::to_string))
        .unwrap_or_default()
}

/// `--install-env NAME=VALUE` values, checked.
pub(crate) fn install_env(given: &[String]) -> Result<Vec<(String, String)>> {
    given
        .iter()
        .map(|kv| {
            let (k, v) = kv.split_once('=').unwrap_or((kv, ""));
            let ok = !k.is_empty()
                && kv.contains('=')
                && k.chars().all(|c| c.is_ascii_alphanumeric() || c == '_')
                && !k.starts_with(|c: char| c.is_ascii_digit());
            if !ok {
                anyhow::bail!("--install-env takes NAME=VALUE (a shell variable name), not {kv:?}");
            }
            Ok((k.to_string(), v.to_string()))
        })
        .collect()
}

/// A file named on the command line, as text.
fn read_text(path: &Path) -> Result<String> {
    std::fs::read_to_string(path).with_context(|| format!("cannot read {}", path.display()))
}

/// The environment `${VAR}` in a configuration expands from.
struct ProcessEnv;

impl glassbox_plan::config::Vars for ProcessEnv {
    fn env(&self, name: &str) -> Option<String> {
        std::env::var(name).ok()
    }
}

fn main() {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            std::process::exit(if e.use_stderr() { 2 } else { 0 });
        }
    };
    match run(cli) {
        Ok(_) if out::failed() => std::process::exit(2),
        Ok(code) => std::process::exit(code),
        Err(e) => {
            eprintln!("glassbox: error: {e:#}");
            std::process::exit(2);
        }
    }
}

fn run(cli: Cli) -> Result<i32> {
    let cwd = std::env::current_dir().context("cannot read the current directory")?;
    match cli.command {
        Command::Audit(args) => audit::run(args, cwd),
        Command::Batch(args) => batch::run(args, cwd, &ProcessEnv),
        Command::Review { store, action } => {
            let (path, mut s) = open_store(store)?;
            review(&mut s, &path, action)
        }
        Command::Selftest {
            fixtures,
            recorder,
            jobs,
            json,
            isolation,
            only,
        } => selftest_cmd(fixtures, recorder, jobs, json, isolation, only),
        Command::Recheck { json, dirs } => recheck_cmd(json, dirs),
        Command::Report {
            id,
            format,
            store,
            include_withheld,
        } => report_cmd(id, format, store, include_withheld),
        Command::Site {
            out,
            store,
            fixtures,
            regressions,
        } => site(&out, store, fixtures, regressions),
        Command::History {
            target,
            version,
            store,
            json,
        } => {
            let (_, s) = open_store(store)?;
            history(&s, &target, version.as_deref(), json)
        }
        Command::Allowlist { format, dir } => allowlist_cmd(format, dir),
        Command::Coverage {
            fixtures,
            regressions,
            json,
        } => coverage_cmd(fixtures, regressions, json),
        Command::VmAgent => Ok(glassbox_vm::agent::main()),
        Command::Man => {
            std::io::Write::write_all(&mut std::io::stdout(), &man::page()?)?;
            Ok(0)
        }
        Command::AuditGuest => Ok(glassbox_audit::microvm::guest_main()?),
        Command::Trace {
            out,
            read_only,
            env,
            responder,
            recorder,
            isolation,
            cmd,
        } => trace::trace_cmd(
            out, read_only, env, responder, recorder, isolation, cmd, &cwd,
        ),
    }
}

/// `glassbox selftest`: every control through the real sandbox; 1 on any miss.
fn selftest_cmd(
    fixtures: Option<PathBuf>,
    recorder: Recorder,
    jobs: Option<usize>,
    json: Option<PathBuf>,
    isolation: Isolation,
    only: Vec<String>,
) -> Result<i32> {
    let fixtures = fixtures.unwrap_or_else(selftest::default_fixtures);
    let isolation = isolation.into();
    let jobs = jobs.unwrap_or_else(|| selftest_jobs(isolation, 4));
    let record = run_selftest(&fixtures, recorder, isolation, jobs, only, false)?;
    if let Some(p) = json {
        write_json(&p, &record)?;
    }
    Ok(if record.ok() { 0 } else { 1 })
}

/// `glassbox recheck`: stored bundles judged by the current checks; the worst verdict's status.
fn recheck_cmd(json: Option<PathBuf>, dirs: Vec<PathBuf>) -> Result<i32> {
    let mut worst = 0;
    let mut reports = Vec::new();
    for dir in &dirs {
        // A bundle is judged with the proofs of the backend and recorder it was recorded by.
        let proofs = match bundle::manifest(dir) {
            Ok(m) => selftest::proofs_for(&m),
            Err(e) => glassbox_checks::Proofs::none(format!("{e}")),
        };
        match glassbox_audit::recheck::recheck(dir, &proofs) {
            Ok(r) => {
                outln!("{} ({} events)", dir.display(), r.events);
                out!("{}", glassbox_report::checks(&r.report, false));
                if let Some(stored) = &r.stored {
                    outln!(
                        "  stored report (glassbox {}): {:?}{}",
                        stored.glassbox_version,
                        stored.verdict,
                        if r.withdrawn > 0 {
                            format!(
                                ", after withdrawing {} claim(s) of retracted check versions",
                                r.withdrawn
                            )
                        } else {
                            String::new()
                        }
                    );
                }
                worst = worst.max(r.report.verdict.exit_code());
                reports.push(r.report);
            }
            Err(e) => {
                eprintln!("glassbox: {}: {e}", dir.display());
                worst = worst.max(2);
            }
        }
    }
    if let Some(p) = json {
        write_json(&p, &reports)?;
    }
    Ok(worst)
}

/// `glassbox report`: a stored audit's report, as published (or whole, `--include-withheld`).
fn report_cmd(
    id: i64,
    format: ReportFormat,
    store: Option<glassbox_store::StoreLocation>,
    include_withheld: bool,
) -> Result<i32> {
    let (path, s) = open_store(store)?;
    let row = s
        .audit(id)?
        .with_context(|| format!("no audit {id} in the store {}", path.display()))?;
    let stored = s.report(id)?.context("the audit has no stored report")?;
    let ev = bundle::load(&row.evidence_dir).with_context(|| {
        format!(
            "cannot read the evidence bundle of audit {id} at {}",
            row.evidence_dir.display()
        )
    })?;
    let shown = |stored| {
        if include_withheld {
            stored
        } else {
            published(&row, stored, &ev)
        }
    };
    let color = std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    let text = match format {
        ReportFormat::Terminal => glassbox_report::terminal(&ev, &shown(stored), color),
        ReportFormat::Json => glassbox_report::json(&shown(stored)) + "\n",
        ReportFormat::Md => glassbox_report::markdown(&ev, &shown(stored)),
        ReportFormat::Html => glassbox_report::html(&ev, &shown(stored)),
        ReportFormat::Sarif => report_sarif(&row, stored, &ev, include_withheld),
    };
    out!("{text}");
    Ok(0)
}

/// `glassbox allowlist`: the TCP destinations a bundle's capture run reached, as an allowlist.
fn allowlist_cmd(format: AllowlistFormat, dir: PathBuf) -> Result<i32> {
    if !dir.join(bundle::NETWORK).exists() {
        anyhow::bail!(
            "{} has no network.jsonl: not an evidence bundle of an audit with the network edge",
            dir.display()
        );
    }
    let ev = glassbox_model::Evidence {
        flows: bundle::flows(&dir)?,
        ..Default::default()
    };
    let dest = glassbox_report::allowlist::destinations(&ev);
    let value = match format {
        AllowlistFormat::Toolhive => glassbox_report::allowlist::toolhive(&dest),
        AllowlistFormat::Docker => glassbox_report::allowlist::docker(&dest),
    };
    outln!("{}", serde_json::to_string_pretty(&value)?);
    Ok(0)
}

/// `glassbox coverage`: per check, its controls and regression cases.
fn coverage_cmd(
    fixtures: Option<PathBuf>,
    regressions: Option<PathBuf>,
    json: bool,
) -> Result<i32> {
    let rows = glassbox_audit::coverage::ledger(
        &fixtures.unwrap_or_else(selftest::default_fixtures),
        &regressions.unwrap_or_else(glassbox_audit::coverage::default_regressions),
    )?;
    if json {
        outln!("{}", serde_json::to_string_pretty(&rows)?);
    } else {
        outln!(
            "{:<28} {:>9} {:>9} {:>10} {:>5}  status",
            "check",
            "positive",
            "negative",
            "regression",
            "gaps"
        );
        for r in &rows {
            outln!(
                "{:<28} {:>9} {:>9} {:>10} {:>5}  {}",
                format!("{} v{}", r.id, r.version),
                r.positive_controls,
                r.negative_controls,
                r.regression_cases,
                r.known_gaps,
                if r.fragile {
                    "FRAGILE (fewer than 3 labelled examples of a kind)"
                } else {
                    "ok"
                }
            );
        }
    }
    Ok(0)
}

/// `glassbox review …` over an open store.
fn review(
    s: &mut glassbox_store::Store,
    location: &glassbox_store::StoreLocation,
    action: ReviewAction,
) -> Result<i32> {
    use glassbox_model::printable;
    let reviewer = |r: Option<String>| {
        r.or_else(|| std::env::var("USER").ok())
            .unwrap_or_else(|| "unknown".into())
    };
    let finding = |s: &glassbox_store::Store, id: i64| -> Result<glassbox_store::FindingRow> {
        s.finding(id)?
            .with_context(|| format!("no finding {id} in the store (see `glassbox review list`)"))
    };
    match action {
        ReviewAction::List => {
            let rows = s.withheld()?;
            if rows.is_empty() {
                outln!("nothing awaits review");
            }
            for f in rows {
                let run = s.audit(f.audit_id)?.map(|a| a.run_id).unwrap_or_default();
                outln!(
                    "{:>5}  {}  {} v{}  {}",
                    f.id,
                    printable(&run),
                    f.check_id,
                    f.check_version,
                    printable(&f.summary)
                );
            }
        }
        ReviewAction::Show { id } => {
            let f = finding(s, id)?;
            let a = s
                .audit(f.audit_id)?
                .context("the finding's audit is gone")?;
            outln!("finding   {}", f.id);
            outln!("status    {:?}", f.status);
            outln!("check     {} v{}", f.check_id, f.check_version);
            outln!("summary   {}", printable(&f.summary));
            outln!("events    {:?}", f.evidence);
            if !f.flows.is_empty() {
                outln!("flows     {:?}", f.flows);
            }
            outln!("audit     {} ({})", a.id, printable(&a.run_id));
            outln!("target    {}", printable(&a.target));
            outln!("evidence  {}", printable(&a.evidence_dir.to_string_lossy()));
            for r in s.reviews_of(id)? {
                outln!(
                    "review    {:?} by {} at {}: {}",
                    r.decision,
                    printable(&r.reviewer),
                    r.at,
                    printable(&r.text)
                );
            }
        }
        ReviewAction::Accept {
            id,
            note,
            reviewer: who,
        } => {
            s.review(id, glassbox_store::Decision::Accept, &reviewer(who), &note)?;
            outln!("finding {id} accepted: published");
        }
        ReviewAction::Reject {
            id,
            reason,
            reviewer: who,
            regressions,
        } => {
            let f = finding(s, id)?;
            s.review(
                id,
                glassbox_store::Decision::Reject,
                &reviewer(who),
                &reason,
            )?;
            outln!("finding {id} rejected: the audit is published without it");
            // The run becomes a regression case on which the check must pass once every
            // finding the check made in it is rejected (one it rightly made keeps it flagging).
            let a = s
                .audit(f.audit_id)?
                .context("the finding's audit is gone")?;
            let same: Vec<_> = a
                .findings
                .iter()
                .filter(|g| g.check_id == f.check_id)
                .collect();
            if same
                .iter()
                .any(|g| g.status == glassbox_store::FindingStatus::Published)
            {
                outln!(
                    "no regression case: {} has a published finding in this run",
                    f.check_id
                );
            } else if let Some(w) = same
                .iter()
                .find(|g| g.status == glassbox_store::FindingStatus::Withheld)
            {
                outln!(
                    "the regression case is made once {}'s other findings in this run are \
                     reviewed too (next: {})",
                    f.check_id,
                    w.id
                );
            } else {
                // Where the user works, never the build's source tree (an installed binary
                // has none).
                let dir = match regressions {
                    Some(d) => d,
                    None => location.regressions_dir()?,
                };
                let case = dir.join(format!("rejected-{}-{}", f.check_id, a.run_id));
                copy_bundle(&a.evidence_dir, &case)?;
                let expected = serde_json::json!({
                    "why": format!(
                        "Rejected on review: {reason} ({} v{} had said: {})",
                        f.check_id, f.check_version, f.summary
                    ),
                    "checks": { f.check_id.clone(): "pass" },
                });
                std::fs::write(
                    case.join("expected.json"),
                    serde_json::to_string_pretty(&expected)? + "\n",
                )?;
                outln!("regression case {}", case.display());
            }
        }
    }
    Ok(0)
}

/// What may be published of a stored audit: the claims of retracted check versions withdrawn
/// (marked retracted), findings awaiting review withheld, rejected ones dropped.
fn published(
    row: &glassbox_store::AuditRow,
    mut stored: glassbox_model::AuditReport,
    ev: &glassbox_model::Evidence,
) -> glassbox_model::AuditReport {
    glassbox_checks::apply_retractions(&mut stored.checks, &ev.manifest, &ev.flows);
    let status = |check: &str, summary: &str| {
        row.findings
            .iter()
            .find(|f| f.check_id == check && f.summary == summary)
            // A finding the store does not know (the stored report and its rows disagree) is
            // withheld: nothing is published that no one could review.
            .and_then(|f| match f.status {
                glassbox_store::FindingStatus::Published => Some(true),
                glassbox_store::FindingStatus::Rejected => Some(false),
                glassbox_store::FindingStatus::Withheld => None,
            })
    };
    glassbox_audit::recheck::published(&stored, &ev.manifest, &status)
}

/// `report --format sarif`: like [`published`], except that each finding awaiting review stays
/// a result of its own, which the renderer writes as withheld with nothing of it (in full,
/// marked withheld, with `include_withheld`); rejected findings are dropped. A finding the
/// store does not know is shown only if it is no accusation.
fn report_sarif(
    row: &glassbox_store::AuditRow,
    mut stored: glassbox_model::AuditReport,
    ev: &glassbox_model::Evidence,
    include_withheld: bool,
) -> String {
    use glassbox_report::Publication;
    use glassbox_store::FindingStatus;
    glassbox_checks::apply_retractions(&mut stored.checks, &ev.manifest, &ev.flows);
    let status = |check: &str, summary: &str| {
        row.findings
            .iter()
            .find(|f| f.check_id == check && f.summary == summary)
            .map(|f| f.status)
    };
    let report = glassbox_audit::recheck::published(&stored, &ev.manifest, &|check, summary| {
        Some(status(check, summary) != Some(FindingStatus::Rejected))
    });
    let publication = |f: &glassbox_model::Finding| match status(&f.check, &f.summary) {
        Some(FindingStatus::Published) => Publication::Published,
        None if !f.accusation => Publication::Published,
        _ if include_withheld => Publication::WithheldShown,
        _ => Publication::Withheld,
    };
    glassbox_report::sarif(ev, &report, &publication)
}

/// `glassbox site`: every audit of the store, published as `report` publishes it, written
/// page by page into `out`. An audit whose evidence cannot be read is left out and named;
/// the exit status is then 1.
fn site(
    out: &std::path::Path,
    store: Option<glassbox_store::StoreLocation>,
    fixtures: Option<PathBuf>,
    regressions: Option<PathBuf>,
) -> Result<i32> {
    let (_, s) = open_store(store)?;
    let coverage = glassbox_audit::coverage::ledger(
        &fixtures.unwrap_or_else(selftest::default_fixtures),
        &regressions.unwrap_or_else(glassbox_audit::coverage::default_regressions),
    )?;
    std::fs::create_dir_all(out).with_context(|| format!("cannot create {}", out.display()))?;
    let write = |page: &glassbox_report::site::Page| {
        let file = out.join(&page.name);
        std::fs::write(&file, &page.html)
            .with_context(|| format!("cannot write {}", file.display()))
    };
    let mut site = glassbox_report::site::Site::new();
    let mut left_out = 0;
    for row in s.audits()? {
        let loaded = s
            .report(row.id)?
            .context("the audit has no stored report")
            .and_then(|stored| {
                let ev = bundle::load(&row.evidence_dir).with_context(|| {
                    format!(
                        "cannot read its evidence bundle at {}",
                        row.evidence_dir.display()
                    )
                })?;
                Ok((published(&row, stored, &ev), ev))
            });
        let (report, ev) = match loaded {
            Ok(r) => r,
            Err(e) => {
                eprintln!("glassbox: audit {} left out of the site: {e:#}", row.id);
                left_out += 1;
                continue;
            }
        };
        write(&site.add(&glassbox_report::site::Audit {
            id: row.id,
            target: &row.target,
            version: row.target_version.as_deref(),
            started_at: &row.started_at,
            evidence: &ev,
            report: &report,
        }))?;
    }
    for page in site.finish(&coverage) {
        write(&page)?;
    }
    eprintln!("glassbox: site written to {}", out.display());
    Ok(if left_out > 0 { 1 } else { 0 })
}

/// Copies an evidence bundle (a flat folder of files) to `to`.
fn copy_bundle(from: &std::path::Path, to: &std::path::Path) -> Result<()> {
    if to.exists() {
        anyhow::bail!("{} exists already", to.display());
    }
    std::fs::create_dir_all(to).with_context(|| format!("cannot create {}", to.display()))?;
    for entry in
        std::fs::read_dir(from).with_context(|| format!("cannot read {}", from.display()))?
    {
        let entry = entry?;
        if entry.file_type()?.is_file() {
            std::fs::copy(entry.path(), to.join(entry.file_name()))
                .with_context(|| format!("cannot copy {}", entry.path().display()))?;
        }
    }
    Ok(())
}

fn write_json<T: serde::Serialize>(path: &std::path::Path, value: &T) -> Result<()> {
    let text = serde_json::to_string_pretty(value)?;
    if path.as_os_str() == "-" {
        outln!("{text}");
    } else {
        std::fs::write(path, text + "\n")
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}

/// Controls run at a time by a selftest under `isolation` that was not told: `jobs` in
/// namespaces, one under microVM (emulated guests on the same cores starve each other, and
/// controls with a time budget then miss).
fn selftest_jobs(isolation: glassbox_audit::Isolation, jobs: usize) -> usize {
    isolation.default_jobs(jobs)
}

/// Runs the selftest now (the controls in the source tree, `jobs` at a time) when this build
/// has no record for audits under `isolation` with `recorder` and `no_selftest` is not set;
/// its record is saved, and each audit reads the one of the recorder it ran with.
fn selftest_unless_recorded(
    isolation: glassbox_audit::Isolation,
    recorder: Recorder,
    jobs: usize,
    quiet: bool,
    no_selftest: bool,
) -> Result<()> {
    let fixtures = selftest::default_fixtures();
    if !selftest::has_proofs(isolation, recorder.into())
        && !no_selftest
        && fixtures.join("manifest.json").exists()
    {
        eprintln!(
            "glassbox: no selftest recorded for this build {} under --isolation {}: running the controls once (--no-selftest to skip)",
            selftest::build_id(),
            isolation.name()
        );
        let jobs = selftest_jobs(isolation, jobs);
        run_selftest(&fixtures, recorder, isolation, jobs, Vec::new(), quiet)?;
    }
    Ok(())
}

/// Runs the controls, printing a line per case and the table per check; saves the record.
fn run_selftest(
    fixtures: &std::path::Path,
    recorder: Recorder,
    isolation: glassbox_audit::Isolation,
    jobs: usize,
    only: Vec<String>,
    quiet: bool,
) -> Result<selftest::Record> {
    let opts = selftest::Options {
        fixtures: fixtures.to_path_buf(),
        jobs,
        recorder: recorder.into(),
        // An emulated guest (TCG) runs an interpreter several times slower: a Python server
        // that imports `requests` may take more than 5 s to answer `initialize` there (the
        // microVM suite lost https-post-docker-auth-requests so once).
        request_timeout: isolation.selftest_request_timeout(),
        isolation,
        only,
    };
    let progress = |c: &selftest::CaseResult| {
        if !quiet {
            let mark = match (c.misses.is_empty(), &c.skipped) {
                (false, _) => "MISS",
                (true, Some(_)) => "skip",
                (true, None) => "ok  ",
            };
            let mut line = format!("glassbox selftest: {mark} {}", c.name);
            if let Some(why) = &c.skipped {
                line.push_str(&format!(": {why}"));
            } else if !c.misses.is_empty() {
                line.push_str(&format!(": {}", c.misses.join("; ")));
            } else if !c.lost.is_empty() {
                line.push_str(&format!(
                    " (run again: its guest was lost: {})",
                    c.lost.join("; ")
                ));
            }
            eprintln!("{line}");
        }
    };
    let record = selftest::run(&opts, &progress, true)?;
    if !quiet {
        eprintln!(
            "{:<28} {:>4} {:>4} {:>4} {:>4} {:>5}  proven",
            "check", "TP", "TN", "FP", "FN", "todo"
        );
        for t in &record.checks {
            eprintln!(
                "{:<28} {:>4} {:>4} {:>4} {:>4} {:>5}  {}",
                format!("{} v{}", t.id, t.version),
                t.tp,
                t.tn,
                t.fp,
                t.fn_,
                t.todo,
                if t.proven { "yes" } else { "NO" }
            );
        }
        eprintln!(
            "glassbox selftest: {} (build {}, isolation {})",
            if record.ok() {
                "every control as expected"
            } else {
                "MISSES: see above"
            },
            record.build,
            record.isolation
        );
        if !record.only.is_empty() {
            eprintln!(
                "glassbox selftest: {} controls ran (--only): not saved as this build's record, which proves a check by all its controls",
                record.only.len()
            );
        }
    }
    Ok(record)
}

fn absolute(paths: Vec<PathBuf>) -> Result<Vec<PathBuf>> {
    paths
        .into_iter()
        .map(|p| {
            std::fs::canonicalize(&p).with_context(|| format!("--ro {}: no such path", p.display()))
        })
        .collect()
}
