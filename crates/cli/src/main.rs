//! `glassbox`: audit MCP servers by running them.
//!
//! Exit codes of `audit`: 0 clean, 1 flagged or withheld, 2 usage or internal error,
//! 3 inconclusive.

use anyhow::{Context, Result};
use clap::{Parser, Subcommand};
use glassbox_audit::{selftest, AuditOptions, EventSink, JsonLines, Progress, RecorderChoice};
use glassbox_model::{Event, EventKind, Phase, ServerExit};
use std::ffi::OsString;
use std::io::{IsTerminal, Write};
use std::path::PathBuf;
use std::time::{Duration, Instant};

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
    Audit {
        /// Also write the JSON report to FILE ("-" for standard output).
        #[arg(long, value_name = "FILE")]
        json: Option<PathBuf>,
        /// Where to write the evidence bundle (default ./glassbox-evidence/<run-id>/).
        #[arg(long, value_name = "DIR")]
        evidence: Option<PathBuf>,
        /// Make another host path visible to the server, read-only (repeatable).
        #[arg(long = "ro", value_name = "PATH")]
        read_only: Vec<PathBuf>,
        /// Seconds to wait for each answer.
        #[arg(long, value_name = "SECS", default_value_t = 20)]
        request_timeout: u64,
        /// Bound on the whole MCP session, in seconds.
        #[arg(long, value_name = "SECS", default_value_t = 300)]
        session_timeout: u64,
        /// No progress lines on stderr.
        #[arg(long, short)]
        quiet: bool,
        /// How to record the open and stat families.
        #[arg(long, value_enum, default_value_t = Recorder::Auto)]
        recorder: Recorder,
        /// Do not run the selftest when this build has none recorded (unproven checks are
        /// then reported `unverified`).
        #[arg(long)]
        no_selftest: bool,
        /// Which runs to make: with DNS and TCP captured at glassbox's edge, with every packet
        /// dropped, or both (one after the other). No packet ever leaves the machine.
        #[arg(long, value_enum, default_value_t = Network::Both)]
        network: Network,
        /// A destination the server may reach without it counting as unexplained egress:
        /// HOST or HOST:PORT (repeatable).
        #[arg(long = "allow-host", value_name = "HOST[:PORT]")]
        allow_host: Vec<String>,
        /// The store the audit is recorded in (default: $GLASSBOX_STORE, else
        /// $GLASSBOX_STATE_DIR/store.sqlite, else ~/.local/state/glassbox/store.sqlite).
        #[arg(long, value_name = "FILE")]
        store: Option<PathBuf>,
        /// The server command and its arguments.
        #[arg(last = true, required = true, value_name = "COMMAND")]
        cmd: Vec<OsString>,
    },
    /// Run every control fixture through the real sandbox; print TP/TN/FP/FN per check; record
    /// which checks are proven in this build. Exits 1 on any miss.
    Selftest {
        /// The controls (default: the source tree's fixtures/).
        #[arg(long, value_name = "DIR")]
        fixtures: Option<PathBuf>,
        /// How to record the open and stat families.
        #[arg(long, value_enum, default_value_t = Recorder::Auto)]
        recorder: Recorder,
        /// Audits at a time.
        #[arg(long, short, default_value_t = 4)]
        jobs: usize,
        /// Also write the record as JSON to FILE ("-" for standard output).
        #[arg(long, value_name = "FILE")]
        json: Option<PathBuf>,
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
        /// The store (default as for `audit`).
        #[arg(long, value_name = "FILE", global = true)]
        store: Option<PathBuf>,
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
        /// The store (default as for `audit`).
        #[arg(long, value_name = "FILE")]
        store: Option<PathBuf>,
        /// Show withheld findings too (for the reviewer; not for publishing).
        #[arg(long)]
        include_withheld: bool,
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
        /// How to record the open and stat families.
        #[arg(long, value_enum, default_value_t = Recorder::Auto)]
        recorder: Recorder,
        /// The command and its arguments.
        #[arg(last = true, required = true, value_name = "COMMAND")]
        cmd: Vec<OsString>,
    },
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
        /// Where the regression case goes (default: the source tree's regressions/).
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
        };
        eprintln!(
            "glassbox: [{:6.2}s] run: {what}",
            self.start.elapsed().as_secs_f64()
        );
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

fn main() {
    let cli = match Cli::try_parse() {
        Ok(c) => c,
        Err(e) => {
            let _ = e.print();
            std::process::exit(if e.use_stderr() { 2 } else { 0 });
        }
    };
    match run(cli) {
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
        Command::Audit {
            json,
            evidence,
            read_only,
            request_timeout,
            session_timeout,
            quiet,
            recorder,
            no_selftest,
            network,
            allow_host,
            store,
            cmd,
        } => {
            // A command that cannot run is a usage error before anything else.
            glassbox_audit::target::resolve(&cmd, &cwd)?;
            let mut opts = AuditOptions::new(cmd, cwd);
            opts.recorder = recorder.into();
            opts.network = network.into();
            opts.allow_hosts = allow_host;
            let proofs = selftest::load_proofs();
            let fixtures = selftest::default_fixtures();
            if proofs.missing.is_some()
                && proofs.by_check.is_empty()
                && !no_selftest
                && fixtures.join("manifest.json").exists()
            {
                eprintln!(
                    "glassbox: no selftest recorded for this build {}: running the controls once \
                     (--no-selftest to skip)",
                    selftest::build_id()
                );
                let record = run_selftest(&fixtures, recorder, 4, quiet)?;
                opts.proofs = Some(record.proofs());
            } else {
                opts.proofs = Some(proofs);
            }
            opts.evidence_dir = evidence;
            opts.extra_ro = absolute(read_only)?;
            opts.session.request_timeout = Duration::from_secs(request_timeout.max(1));
            opts.session.session_timeout = Duration::from_secs(session_timeout.max(1));
            let progress = StderrProgress {
                start: Instant::now(),
            };
            let audit = if quiet {
                glassbox_audit::audit(&opts, &glassbox_audit::Quiet)
            } else {
                glassbox_audit::audit(&opts, &progress)
            }?;
            let color = std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none();
            let text = glassbox_report::terminal(&audit.evidence, &audit.report, color);
            let json_text = glassbox_report::json(&audit.report);
            match json.as_deref() {
                Some(p) if p.as_os_str() == "-" => println!("{json_text}"),
                Some(p) => {
                    std::fs::write(p, format!("{json_text}\n"))
                        .with_context(|| format!("cannot write {}", p.display()))?;
                    print!("{text}");
                }
                None => print!("{text}"),
            }
            // Every audit goes to the store; the bundle is on disk whatever happens here.
            let path = match store {
                Some(p) => p,
                None => glassbox_store::Store::default_path()?,
            };
            let id = glassbox_store::Store::open(&path)
                .and_then(|mut s| {
                    s.record(
                        &audit.report,
                        &audit.evidence.manifest,
                        None,
                        &audit.evidence_dir,
                    )
                })
                .with_context(|| {
                    format!(
                        "cannot record the audit in the store {} (its evidence is in {})",
                        path.display(),
                        audit.evidence_dir.display()
                    )
                })?;
            if !quiet {
                eprintln!("glassbox: recorded as audit {id} in {}", path.display());
            }
            Ok(audit.report.verdict.exit_code())
        }
        Command::Review { store, action } => {
            let path = match store {
                Some(p) => p,
                None => glassbox_store::Store::default_path()?,
            };
            let mut s = glassbox_store::Store::open(&path)
                .with_context(|| format!("cannot open the store {}", path.display()))?;
            review(&mut s, action)
        }
        Command::Selftest {
            fixtures,
            recorder,
            jobs,
            json,
        } => {
            let fixtures = fixtures.unwrap_or_else(selftest::default_fixtures);
            let record = run_selftest(&fixtures, recorder, jobs, false)?;
            if let Some(p) = json {
                write_json(&p, &record)?;
            }
            Ok(if record.ok() { 0 } else { 1 })
        }
        Command::Recheck { json, dirs } => {
            let proofs = selftest::load_proofs();
            let mut worst = 0;
            let mut reports = Vec::new();
            for dir in &dirs {
                match glassbox_audit::recheck::recheck(dir, &proofs) {
                    Ok(r) => {
                        println!("{} ({} events)", dir.display(), r.events);
                        print!("{}", glassbox_report::checks(&r.report, false));
                        if let Some(stored) = &r.stored {
                            println!(
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
        Command::Report {
            id,
            format,
            store,
            include_withheld,
        } => {
            let path = match store {
                Some(p) => p,
                None => glassbox_store::Store::default_path()?,
            };
            let s = glassbox_store::Store::open(&path)
                .with_context(|| format!("cannot open the store {}", path.display()))?;
            let row = s
                .audit(id)?
                .with_context(|| format!("no audit {id} in the store {}", path.display()))?;
            let stored = s.report(id)?.context("the audit has no stored report")?;
            let ev = glassbox_audit::recheck::load(&row.evidence_dir).with_context(|| {
                format!(
                    "cannot read the evidence bundle of audit {id} at {}",
                    row.evidence_dir.display()
                )
            })?;
            let report = if include_withheld {
                stored
            } else {
                let status = |check: &str, summary: &str| {
                    row.findings
                        .iter()
                        .find(|f| f.check_id == check && f.summary == summary)
                        .map_or(Some(true), |f| match f.status {
                            glassbox_store::FindingStatus::Published => Some(true),
                            glassbox_store::FindingStatus::Rejected => Some(false),
                            glassbox_store::FindingStatus::Withheld => None,
                        })
                };
                let session = &ev.manifest.session;
                glassbox_audit::recheck::published(
                    &stored,
                    session.completed,
                    session.failure.as_deref(),
                    &status,
                )
            };
            let color = std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none();
            let text = match format {
                ReportFormat::Terminal => glassbox_report::terminal(&ev, &report, color),
                ReportFormat::Json => glassbox_report::json(&report) + "\n",
                ReportFormat::Md => glassbox_report::markdown(&ev, &report),
                ReportFormat::Html => glassbox_report::html(&ev, &report),
            };
            print!("{text}");
            Ok(0)
        }
        Command::Allowlist { format, dir } => {
            let path = dir.join("network.jsonl");
            if !path.exists() {
                anyhow::bail!(
                    "{} has no network.jsonl: not an evidence bundle of an audit with the network edge",
                    dir.display()
                );
            }
            let mut ev = glassbox_model::Evidence::default();
            glassbox_audit::recheck::read_lines(&path, |f| ev.flows.push(f))?;
            let dest = glassbox_report::allowlist::destinations(&ev);
            let value = match format {
                AllowlistFormat::Toolhive => glassbox_report::allowlist::toolhive(&dest),
                AllowlistFormat::Docker => glassbox_report::allowlist::docker(&dest),
            };
            println!("{}", serde_json::to_string_pretty(&value)?);
            Ok(0)
        }
        Command::Coverage {
            fixtures,
            regressions,
            json,
        } => {
            let rows = glassbox_audit::coverage::ledger(
                &fixtures.unwrap_or_else(selftest::default_fixtures),
                &regressions.unwrap_or_else(glassbox_audit::coverage::default_regressions),
            )?;
            if json {
                println!("{}", serde_json::to_string_pretty(&rows)?);
            } else {
                println!(
                    "{:<28} {:>9} {:>9} {:>10} {:>5}  status",
                    "check", "positive", "negative", "regression", "gaps"
                );
                for r in &rows {
                    println!(
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
        Command::Trace {
            out,
            read_only,
            recorder,
            cmd,
        } => {
            let sink: Box<dyn EventSink> = match &out {
                Some(p) => Box::new(JsonLines(std::io::BufWriter::new(
                    std::fs::File::create(p)
                        .with_context(|| format!("cannot create {}", p.display()))?,
                ))),
                None => Box::new(Readable(std::io::stderr())),
            };
            let traced =
                glassbox_audit::trace(&cmd, &cwd, &absolute(read_only)?, sink, recorder.into())?;
            if let Some(p) = &out {
                eprintln!(
                    "glassbox: {} events written to {}",
                    traced.events,
                    p.display()
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
    }
}

/// `glassbox review …` over an open store.
fn review(s: &mut glassbox_store::Store, action: ReviewAction) -> Result<i32> {
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
                println!("nothing awaits review");
            }
            for f in rows {
                let run = s.audit(f.audit_id)?.map(|a| a.run_id).unwrap_or_default();
                println!(
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
            println!("finding   {}", f.id);
            println!("status    {:?}", f.status);
            println!("check     {} v{}", f.check_id, f.check_version);
            println!("summary   {}", printable(&f.summary));
            println!("events    {:?}", f.evidence);
            if !f.flows.is_empty() {
                println!("flows     {:?}", f.flows);
            }
            println!("audit     {} ({})", a.id, printable(&a.run_id));
            println!("target    {}", printable(&a.target));
            println!("evidence  {}", printable(&a.evidence_dir.to_string_lossy()));
            for r in s.reviews_of(id)? {
                println!(
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
            println!("finding {id} accepted: published");
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
            println!("finding {id} rejected: the audit is published without it");
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
                println!(
                    "no regression case: {} has a published finding in this run",
                    f.check_id
                );
            } else if let Some(w) = same
                .iter()
                .find(|g| g.status == glassbox_store::FindingStatus::Withheld)
            {
                println!(
                    "the regression case is made once {}'s other findings in this run are \
                     reviewed too (next: {})",
                    f.check_id, w.id
                );
            } else {
                let dir = regressions.unwrap_or_else(glassbox_audit::coverage::default_regressions);
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
                println!("regression case {}", case.display());
            }
        }
    }
    Ok(0)
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
        println!("{text}");
    } else {
        std::fs::write(path, text + "\n")
            .with_context(|| format!("cannot write {}", path.display()))?;
    }
    Ok(())
}

/// Runs the controls, printing a line per case and the table per check; saves the record.
fn run_selftest(
    fixtures: &std::path::Path,
    recorder: Recorder,
    jobs: usize,
    quiet: bool,
) -> Result<selftest::Record> {
    let opts = selftest::Options {
        fixtures: fixtures.to_path_buf(),
        jobs,
        recorder: recorder.into(),
        request_timeout: Duration::from_secs(5),
    };
    let progress = |c: &selftest::CaseResult| {
        if !quiet {
            let mark = if c.misses.is_empty() { "ok  " } else { "MISS" };
            let mut line = format!("glassbox selftest: {mark} {}", c.name);
            if !c.misses.is_empty() {
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
            "glassbox selftest: {} (build {})",
            if record.ok() {
                "every control as expected"
            } else {
                "MISSES: see above"
            },
            record.build
        );
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
