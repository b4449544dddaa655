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
mod history;
mod man;
mod progress;
mod review;
mod trace;

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use glassbox_audit::{selftest, RecorderChoice};
use glassbox_model::bundle;
use progress::{Readable, StderrProgress};
use std::ffi::OsString;
use std::io::IsTerminal;
use std::path::{Path, PathBuf};

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
        action: review::ReviewAction,
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
        /// What the network edge answers (as for `audit`).
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
            let mut chain = e.chain();
            let top = chain.next().expect("an error is the first of its chain");
            eprintln!(
                "glassbox: error: {}",
                glassbox_model::error_chain(top, chain)
            );
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
            review::review(&mut s, &path, action)
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
            history::history(&s, &target, version.as_deref(), json)
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
    let isolation: glassbox_audit::Isolation = isolation.into();
    let jobs = jobs.unwrap_or_else(|| isolation.default_jobs(4));
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
    let (_, s) = open_store(store)?;
    let glassbox_registry::publish::Stored {
        row,
        report: stored,
        evidence: ev,
    } = glassbox_registry::publish::load(&s, id)?;
    let shown = |stored| {
        if include_withheld {
            stored
        } else {
            glassbox_registry::publish::published(&row, stored, &ev)
        }
    };
    let color = std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    let text = match format {
        ReportFormat::Terminal => glassbox_report::terminal(&ev, &shown(stored), color),
        ReportFormat::Json => glassbox_report::json(&shown(stored)) + "\n",
        ReportFormat::Md => glassbox_report::markdown(&ev, &shown(stored)),
        ReportFormat::Html => glassbox_report::html(&ev, &shown(stored)),
        ReportFormat::Sarif => {
            glassbox_registry::publish::sarif(&row, stored, &ev, include_withheld)
        }
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

/// `glassbox site`: every audit of the store, published as `report` publishes it, written
/// page by page into `out`. An audit whose evidence cannot be read is left out and named;
/// the exit status is then 1.
fn site(
    out: &Path,
    store: Option<glassbox_store::StoreLocation>,
    fixtures: Option<PathBuf>,
    regressions: Option<PathBuf>,
) -> Result<i32> {
    let (_, s) = open_store(store)?;
    let written = glassbox_registry::site::write(
        &s,
        out,
        &fixtures.unwrap_or_else(selftest::default_fixtures),
        &regressions.unwrap_or_else(glassbox_audit::coverage::default_regressions),
    )?;
    for (id, why) in &written.left_out {
        eprintln!("glassbox: audit {id} left out of the site: {why}");
    }
    eprintln!("glassbox: site written to {}", out.display());
    Ok(if written.left_out.is_empty() { 0 } else { 1 })
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
    if let Some(fixtures) = selftest::wanted_before_audit(isolation, recorder.into(), no_selftest) {
        eprintln!(
            "glassbox: no selftest recorded for this build {} under --isolation {}: running the controls once (--no-selftest to skip)",
            selftest::build_id(),
            isolation.name()
        );
        let jobs = isolation.default_jobs(jobs);
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
            let n = record.only.len();
            eprintln!(
                "glassbox selftest: {n} control{} ran (--only): not saved as this build's record, which proves a check by all its controls",
                if n == 1 { "" } else { "s" }
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
