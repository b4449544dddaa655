//! `glassbox audit`: one server (a command, a package, a launcher line) or every server of a
//! client configuration or `server.json`; what to audit is decided by `glassbox_plan`, the
//! audit by `glassbox_audit`; here the arguments, the progress, the documents written and the
//! exit status.

use crate::{is_stdout, read_text, write_doc, ProcessEnv, StderrProgress};
use anyhow::{Context, Result};
use glassbox_audit::{AuditOptions, Progress};
use std::ffi::OsString;
use std::io::IsTerminal;
use std::path::PathBuf;
use std::time::Instant;

/// `glassbox audit`: its arguments.
#[derive(clap::Args, Debug)]
#[command(group = clap::ArgGroup::new("what").required(true).multiple(true).args(["target", "cmd", "config", "server_json"]))]
pub(crate) struct AuditArgs {
    /// Also write the JSON report to FILE ("-" for standard output).
    #[arg(long, value_name = "FILE")]
    pub(crate) json: Option<PathBuf>,
    /// Also write the audit as SARIF 2.1.0 to FILE ("-" for standard output), for code
    /// scanning: accusations are written as withheld, with nothing of them.
    #[arg(long, value_name = "FILE")]
    pub(crate) sarif: Option<PathBuf>,
    /// Where to write the evidence bundle (default ./glassbox-evidence/<run-id>/).
    #[arg(long, value_name = "DIR")]
    pub(crate) evidence: Option<PathBuf>,
    /// No progress lines on stderr.
    #[arg(long, short)]
    pub(crate) quiet: bool,
    /// The store the audit is recorded in: a SQLite file, or a PostgreSQL URL
    /// (postgres://USER:PASSWORD@HOST/DB, no TLS) (default: $GLASSBOX_STORE, else
    /// $GLASSBOX_STATE_DIR/store.sqlite, else ~/.local/state/glassbox/store.sqlite).
    #[arg(long, value_name = "FILE|URL")]
    pub(crate) store: Option<glassbox_store::StoreLocation>,
    /// A package to install (in the sandbox, traced) and audit: npm:NAME[@VERSION],
    /// pypi:NAME[==VERSION], or a local npm tarball npm:./PATH.tgz (as `npm pack` makes it).
    /// Arguments after `--` are then the server's arguments.
    #[arg(value_name = "TARGET")]
    pub(crate) target: Option<String>,
    /// Audit the servers of an MCP client configuration (Claude Desktop, Cursor, Claude
    /// Code `.mcp.json` or `~/.claude.json`, VS Code `mcp.json`/`settings.json`).
    #[arg(long, value_name = "FILE", conflicts_with_all = ["target", "server_json"])]
    pub(crate) config: Option<PathBuf>,
    /// With --config: audit only the server of this name.
    #[arg(long, value_name = "NAME", requires = "config")]
    pub(crate) server: Option<String>,
    /// Audit the packages (and list the remotes) of an MCP Registry server.json.
    #[arg(long, value_name = "FILE", conflicts_with = "target")]
    pub(crate) server_json: Option<PathBuf>,
    /// With --config or --server-json: the secret variable NAME (replaced by a canary) is
    /// documented to go to HOST (and its subdomains): sent there, it is expected;
    /// anywhere else it is exfiltration (repeatable).
    #[arg(long = "secret-host", value_name = "NAME=HOST")]
    pub(crate) secret_host: Vec<String>,
    /// The server speaks streamable HTTP instead of stdio, listening inside its sandbox
    /// at this URL (http://127.0.0.1:PORT/PATH); glassbox waits for it to listen.
    #[arg(long, value_name = "URL", conflicts_with = "sse")]
    pub(crate) http: Option<String>,
    /// The same for the legacy HTTP+SSE transport: the URL of its SSE endpoint.
    #[arg(long, value_name = "URL")]
    pub(crate) sse: Option<String>,
    /// The server command and its arguments (or, after a TARGET, the server's arguments).
    #[arg(last = true, value_name = "COMMAND")]
    pub(crate) cmd: Vec<OsString>,
    #[command(flatten)]
    pub(crate) run: crate::args::RunArgs,
}

/// Runs `glassbox audit` from `cwd`; its exit status.
pub(crate) fn run(args: AuditArgs, cwd: PathBuf) -> Result<i32> {
    let AuditArgs {
        json,
        sarif,
        evidence,
        quiet,
        store,
        target,
        config,
        server,
        server_json,
        secret_host,
        http,
        sse,
        cmd,
        run,
    } = args;
    let http = match (&http, &sse) {
        (Some(u), _) => Some(glassbox_audit::HttpServer::parse(u, false)?),
        (None, Some(u)) => Some(glassbox_audit::HttpServer::parse(u, true)?),
        _ => None,
    };
    let declared = match (&config, &server_json) {
        (Some(f), _) => Some(glassbox_plan::config::select(
            glassbox_plan::config::client_config(&read_text(f)?, &ProcessEnv)?,
            server.as_deref(),
        )?),
        (None, Some(f)) => Some(glassbox_plan::config::server_json(
            &read_text(f)?,
            &ProcessEnv,
        )?),
        _ => None,
    };
    let secret_hosts = glassbox_plan::command::SecretHosts::parse(&secret_host)?;
    if declared.is_some() && !cmd.is_empty() {
        anyhow::bail!("--config and --server-json name their servers: no command goes after --");
    }
    let (package, cmd) = match &declared {
        Some(_) => (None, cmd),
        None => glassbox_plan::command::audited(target.as_deref(), cmd, &cwd)?,
    };
    let dash = |p: &Option<PathBuf>| p.as_deref().is_some_and(|p| p.as_os_str() == "-");
    if dash(&json) && dash(&sarif) {
        anyhow::bail!("--json - and --sarif - cannot both write to standard output");
    }
    let mut opts = AuditOptions::new(cmd, cwd);
    run.apply(&mut opts)?;
    opts.package = package;
    opts.http = http;
    run.ensure_selftest(4, quiet)?;
    opts.evidence_dir = evidence;
    let store = match store {
        Some(p) => p,
        None => glassbox_store::StoreLocation::from_env()?,
    };
    let Some(entries) = declared else {
        return audit_one(
            |p| glassbox_audit::audit(&opts, p),
            &json,
            &sarif,
            quiet,
            &store,
        );
    };
    // One document for every server: `--json` an array (schemas/audits.schema.json),
    // `--sarif` one log with a run per audited server.
    let to_stdout = is_stdout(&json) || is_stdout(&sarif);
    let jobs: Vec<(usize, glassbox_plan::batch::Job)> = entries
        .into_iter()
        .enumerate()
        .map(|(i, entry)| {
            // A declared secret's documented hosts, and those --secret-host gives it.
            let mut env = entry.env;
            secret_hosts.apply(&mut env);
            let job = glassbox_plan::batch::Job {
                label: entry.name,
                launch: entry.launch,
                env,
                names: entry.names,
                cwd: opts.cwd.clone(),
                // The user's own configuration: the package's README configuration is not
                // used.
                configured: true,
            };
            (i, job)
        })
        .collect();
    let batch = glassbox_registry::batch::Batch {
        base: &opts,
        store: &store,
        evidence: match &opts.evidence_dir {
            Some(dir) => glassbox_registry::batch::Evidence::Numbered(dir),
            None => glassbox_registry::batch::Evidence::Default,
        },
        // Each server as configured, audited whatever the store holds.
        pin: false,
        resume: false,
        keep_audits: true,
        checks: glassbox_checks::versions(),
        width: 1,
    };
    let watch = EntryWatch {
        jobs: &jobs,
        quiet,
        to_stdout,
        store: &store,
    };
    let done = glassbox_registry::batch::run(&batch, &jobs, 1, &watch);
    let code = done
        .iter()
        .map(|d| d.outcome.exit_code())
        .max()
        .unwrap_or(0);
    let outcomes: Vec<(String, EntryOutcome)> = done
        .into_iter()
        .map(|d| {
            use glassbox_registry::batch::Outcome;
            let name = jobs[d.index].1.label.clone();
            let outcome = match (d.outcome, d.audit) {
                (Outcome::Audited { id, .. }, Some(a)) => EntryOutcome::Audited(a, Some(id), None),
                (
                    Outcome::Unrecorded {
                        error, evidence, ..
                    },
                    Some(a),
                ) => EntryOutcome::Audited(a, None, Some(unrecorded(&store, &evidence, &error))),
                (Outcome::NotAudited(why), _) => EntryOutcome::NotAudited(why),
                (Outcome::Failed(why), _) => EntryOutcome::Failed(why),
                (o, _) => EntryOutcome::Failed(o.detail()),
            };
            (name, outcome)
        })
        .collect();
    if let Some(p) = &json {
        let items: Vec<serde_json::Value> = outcomes
            .iter()
            .map(|(name, o)| entry_json(name, o))
            .collect();
        let doc = serde_json::to_string_pretty(&items)? + "\n";
        write_doc(p, &doc)?;
    }
    if let Some(p) = &sarif {
        let runs: Vec<glassbox_report::SarifRun<'_>> = outcomes
            .iter()
            .filter_map(|(name, o)| match o {
                EntryOutcome::Audited(a, _, _) => Some(glassbox_report::SarifRun {
                    evidence: &a.evidence,
                    report: &a.report,
                    publication: &glassbox_report::Publication::unreviewed,
                    name,
                }),
                _ => None,
            })
            .collect();
        write_doc(p, &glassbox_report::sarif_many(&runs))?;
    }
    Ok(code)
}

/// What `audit --config` shows of each server as it runs: a line as it starts, its progress,
/// its terminal report, where it was recorded.
struct EntryWatch<'a> {
    jobs: &'a [(usize, glassbox_plan::batch::Job)],
    quiet: bool,
    /// A document goes to standard output: no terminal report there.
    to_stdout: bool,
    store: &'a glassbox_store::StoreLocation,
}

impl EntryWatch<'_> {
    fn label(&self, index: usize) -> String {
        glassbox_model::printable(&self.jobs[index].1.label)
    }
}

impl glassbox_registry::batch::Watch for EntryWatch<'_> {
    fn started(&self, index: usize, job: &glassbox_plan::batch::Job) {
        if self.quiet {
            return;
        }
        let label = self.label(index);
        match &job.launch {
            // A server.json's remote keeps its `type` as written: anything but `sse` is spoken
            // to as streamable HTTP.
            glassbox_plan::config::Launch::Remote { transport, .. } => eprintln!(
                "glassbox: auditing {label} (remote, {})",
                if transport == "sse" {
                    "sse"
                } else {
                    "streamable-http"
                }
            ),
            _ => eprintln!("glassbox: auditing {label}"),
        }
    }

    fn progress<'a>(&'a self, _: usize) -> Box<dyn Progress + 'a> {
        progress(self.quiet)
    }

    fn done(&self, d: &glassbox_registry::batch::Done) {
        use glassbox_registry::batch::Outcome;
        let label = self.label(d.index);
        if let (Some(a), false) = (&d.audit, self.to_stdout) {
            print_terminal(a);
        }
        match &d.outcome {
            Outcome::Audited { id, .. } => {
                recorded(*id, d.changed.as_ref(), self.quiet, self.store);
            }
            Outcome::Unrecorded {
                error, evidence, ..
            } => eprintln!(
                "glassbox: {label}: error: {}",
                unrecorded(self.store, evidence, error)
            ),
            Outcome::NotAudited(why) => eprintln!("glassbox: {label}: not audited: {why}"),
            Outcome::Failed(why) => eprintln!("glassbox: {label}: error: {why}"),
            Outcome::Skipped { .. } => {}
        }
    }
}

/// Why an audit is not in the store.
fn unrecorded(
    store: &glassbox_store::StoreLocation,
    evidence: &std::path::Path,
    error: &str,
) -> String {
    format!(
        "cannot record the audit in the store {} (its evidence is in {}): {error}",
        store.display(),
        evidence.display()
    )
}

/// Says where an audit was recorded, and how its tool definitions changed since the
/// previous audit of the same exact version.
fn recorded(
    id: i64,
    changed: Option<&(i64, Vec<String>)>,
    quiet: bool,
    store: &glassbox_store::StoreLocation,
) {
    if !quiet {
        eprintln!("glassbox: recorded as audit {id} in {}", store.display());
    }
    if let Some((prev, changes)) = changed {
        eprintln!(
            "glassbox: tool definitions changed since audit {prev} of the same version: {}",
            changes.join("; ")
        );
    }
}

/// An audit's progress: its phases on stderr from now, or nothing when `quiet`.
fn progress(quiet: bool) -> Box<dyn Progress> {
    if quiet {
        Box::new(glassbox_audit::Quiet)
    } else {
        Box::new(StderrProgress {
            start: Instant::now(),
        })
    }
}

/// Runs one audit (`run`, with a progress display unless `quiet`).
fn run_audit(
    run: impl Fn(&dyn Progress) -> Result<glassbox_audit::Audit, glassbox_audit::Error>,
    quiet: bool,
) -> Result<glassbox_audit::Audit, glassbox_audit::Error> {
    run(progress(quiet).as_ref())
}

/// Runs one audit, prints its report (and writes `--json`/`--sarif`), records it in the
/// store.
fn audit_one(
    run: impl Fn(&dyn Progress) -> Result<glassbox_audit::Audit, glassbox_audit::Error>,
    json: &Option<PathBuf>,
    sarif: &Option<PathBuf>,
    quiet: bool,
    store: &glassbox_store::StoreLocation,
) -> Result<i32> {
    let audit = run_audit(run, quiet)?;
    publish(&audit, json, sarif, quiet, store)
}

/// The terminal summary of an audit, on standard output.
fn print_terminal(audit: &glassbox_audit::Audit) {
    let color = std::io::stdout().is_terminal() && std::env::var_os("NO_COLOR").is_none();
    out!(
        "{}",
        glassbox_report::terminal(&audit.evidence, &audit.report, color)
    );
}

/// Prints an audit's report (and writes `--json`/`--sarif`), records it in the store; the
/// exit status of its verdict.
fn publish(
    audit: &glassbox_audit::Audit,
    json: &Option<PathBuf>,
    sarif: &Option<PathBuf>,
    quiet: bool,
    store: &glassbox_store::StoreLocation,
) -> Result<i32> {
    // The terminal summary, unless a document goes to standard output instead.
    if !is_stdout(json) && !is_stdout(sarif) {
        print_terminal(audit);
    }
    if let Some(p) = json {
        write_doc(p, &(glassbox_report::json(&audit.report) + "\n"))?;
    }
    if let Some(p) = sarif {
        let doc = glassbox_report::sarif(
            &audit.evidence,
            &audit.report,
            &glassbox_report::Publication::unreviewed,
        );
        write_doc(p, &doc)?;
    }
    record(audit, quiet, store)?;
    Ok(audit.report.verdict.exit_code())
}

/// Records an audit in the store (the bundle is on disk whatever happens here) and says how
/// its tool definitions changed since the previous audit of the same exact version; its id.
fn record(
    audit: &glassbox_audit::Audit,
    quiet: bool,
    store: &glassbox_store::StoreLocation,
) -> Result<i64> {
    let published = glassbox_store::Store::publish(
        store,
        &audit.report,
        &audit.evidence.manifest,
        &audit.evidence_dir,
    )
    .with_context(|| {
        format!(
            "cannot record the audit in the store {} (its evidence is in {})",
            store.display(),
            audit.evidence_dir.display()
        )
    })?;
    let id = published.id;
    recorded(id, published.changed.as_ref(), quiet, store);
    Ok(id)
}

/// What became of one server of a configuration, for the document `--json` writes
/// (`schemas/audits.schema.json`).
enum EntryOutcome {
    /// Audited; its id in the store, when it could be recorded.
    Audited(Box<glassbox_audit::Audit>, Option<i64>, Option<String>),
    /// Not audited by this version (a remote over TLS, a container, a launcher line glassbox
    /// will not map), with why.
    NotAudited(String),
    /// The audit could not be carried out (a package that does not exist), with why.
    Failed(String),
}

/// One item of the `--json` document of a configuration's audits.
fn entry_json(name: &str, outcome: &EntryOutcome) -> serde_json::Value {
    match outcome {
        EntryOutcome::Audited(a, id, store_error) => {
            let m = &a.evidence.manifest;
            let mut v = serde_json::json!({
                "server": name,
                "status": "audited",
                "target": glassbox_store::target_of(m),
                "evidence_dir": a.evidence_dir.to_string_lossy(),
                "report": serde_json::to_value(&a.report).unwrap_or_default(),
            });
            if let Some(p) = &m.target.package {
                v["version"] = serde_json::json!(p.version);
            }
            if let Some(id) = id {
                v["audit_id"] = serde_json::json!(id);
            }
            if let Some(e) = store_error {
                v["reason"] = serde_json::json!(e);
            }
            v
        }
        EntryOutcome::NotAudited(why) => {
            serde_json::json!({"server": name, "status": "not-audited", "reason": why})
        }
        EntryOutcome::Failed(why) => {
            serde_json::json!({"server": name, "status": "error", "reason": why})
        }
    }
}
