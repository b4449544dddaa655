//! The audit under way ([`Pipeline`]): prepared, its secrets planted, its package installed,
//! the server's environment made, and finished into a bundle and a report. The runs
//! themselves are in `runs.rs`, the install in `install_phase.rs`.

use crate::install_phase::{install_phase, InstallContext};
use crate::manifest::{entry_names, new_manifest, run_id};
use crate::probes::probes;
use crate::session_run::set_env;
use crate::{
    recheck, recording, secrets, selftest, triggers, Audit, AuditOptions, Error, EventSink,
    Progress, ResponderChoice,
};
use glassbox_model::{bundle, Evidence, Manifest, NetworkMode, TranscriptEntry};
use glassbox_plan::{config, install, target};
use std::path::PathBuf;
use std::sync::Arc;

/// An audit under way, phase by phase ([`audit`]): what each phase adds to, written to the
/// bundle as it is known.
pub(crate) struct Pipeline<'a> {
    /// The options, with the input marker and (after [`Pipeline::plant`]) the plans' probes.
    pub(crate) opts: AuditOptions,
    pub(crate) progress: &'a dyn Progress,
    pub(crate) run_id: String,
    pub(crate) dir: PathBuf,
    pub(crate) bundle: bundle::Writer,
    pub(crate) manifest: Manifest,
    /// The audit's own certificate authority, when the edge answers.
    pub(crate) answer: Option<glassbox_net::Authority>,
    /// Its certificate, which the sandbox trusts.
    pub(crate) trust: Option<recording::CaCertificate>,
    pub(crate) events: recording::SharedSink,
    pub(crate) clock: Arc<glassbox_trace::Clock>,
    pub(crate) secrets: secrets::Secrets,
    /// The bait variables ([`secrets::BAIT_ENV`]) and their planted values.
    pub(crate) bait: Vec<(String, String)>,
    /// The trigger run's variables ([`triggers::Machine`]), its planted tokens included.
    pub(crate) trigger_env: Vec<(String, String)>,
    pub(crate) all_events: Vec<glassbox_model::Event>,
    pub(crate) flows: Vec<glassbox_model::Flow>,
    pub(crate) limits_reached: Vec<String>,
    /// What each run's phases did to the sandbox's bounds, and what outlived each run.
    pub(crate) usage: Vec<glassbox_model::PhaseUsage>,
    pub(crate) outlived: Vec<String>,
    /// What each run left in the sandbox's writable places ([`left`]), and where its list
    /// stopped short.
    pub(crate) left: Vec<glassbox_model::LeftFile>,
    pub(crate) left_cut: Vec<String>,
    pub(crate) transcript: Vec<TranscriptEntry>,
    /// Where the server runs: the working folder, or its package's install folder.
    pub(crate) server_cwd: PathBuf,
    pub(crate) installed_in: Option<PathBuf>,
}

impl<'a> Pipeline<'a> {
    /// Resolves what to run (a command must resolve before anything is written, and so must a
    /// package's versions: one that does not exist is one line, with no bundle left behind;
    /// its program resolves after its install), creates the bundle and writes the first
    /// manifest, makes the audit's CA and the secrets.
    #[allow(clippy::type_complexity)]
    pub(crate) fn prepare(
        opts: &AuditOptions,
        progress: &'a dyn Progress,
    ) -> Result<
        (
            Pipeline<'a>,
            Option<target::Resolved>,
            Option<install::Exact>,
        ),
        Error,
    > {
        // One marker for the generated arguments of every run: where it shows up, the server
        // took the user's input there.
        let mut opts = opts.clone();
        if opts.session.input_marker.is_none() {
            opts.session.input_marker = Some(secrets::input_marker()?);
        }
        let (target, exact) = match &opts.package {
            None => {
                target::check_working_folder(&opts.cwd)?;
                (Some(target::resolve(&opts.command, &opts.cwd)?), None)
            }
            Some(p) => (None, Some(p.exact_versions(&opts.cwd)?)),
        };
        let run_id = run_id();
        let dir = opts
            .evidence_dir
            .clone()
            .unwrap_or_else(|| opts.cwd.join("glassbox-evidence").join(&run_id));
        let bundle = bundle::Writer::create(&dir)?;
        let mut channels = vec!["syscalls".to_string(), "mcp-transcript".to_string()];
        channels.push("packet-edge".into());
        if opts.network.modes().contains(&NetworkMode::Denied) {
            channels.push("network-denied-run".into());
        }
        if opts.trigger_run() {
            channels.push(triggers::CHANNEL.into());
        }
        let mut manifest = new_manifest(
            &run_id,
            &opts,
            target
                .as_ref()
                .map(|t| t.program.to_string_lossy().into_owned())
                .unwrap_or_default(),
            channels,
        );
        // The audit's own certificate authority: the sandbox trusts it, the edge signs with
        // it; its key never leaves this process (the manifest records the certificate).
        let answer = match opts.responder {
            ResponderChoice::Ok => {
                let a = glassbox_net::Authority::fresh()
                    .map_err(|e| Error::Internal(format!("cannot make the audit's CA: {e}")))?;
                manifest.network.tls_authority = Some(a.manifest());
                Some(a)
            }
            ResponderChoice::Refuse => None,
        };
        manifest.network.responder = opts.responder.name().into();
        let trust = answer.as_ref().map(recording::CaCertificate::of);
        bundle.write_manifest(&manifest)?;
        let events = recording::SharedSink::new(bundle.events()?);
        // A guest's secrets are made here, whole: the host's checks must know their values.
        let secrets = opts.isolation.secrets()?;
        let server_cwd = opts.cwd.clone();
        let audit = Pipeline {
            opts,
            progress,
            run_id,
            dir,
            bundle,
            manifest,
            answer,
            trust,
            events,
            clock: Arc::new(glassbox_trace::Clock::new()),
            secrets,
            bait: Vec::new(),
            trigger_env: Vec::new(),
            all_events: Vec::new(),
            flows: Vec::new(),
            limits_reached: Vec::new(),
            usage: Vec::new(),
            outlived: Vec::new(),
            left: Vec::new(),
            left_cut: Vec::new(),
            transcript: Vec::new(),
            server_cwd,
            installed_in: None,
        };
        Ok((audit, target, exact))
    }

    /// Plants what the secrets do not hold yet: the CA in the kubeconfig, bait in the
    /// environment ([`secrets::BAIT_ENV`]: planted secrets like the files, for the install and
    /// every run, unless the configuration sets a variable of that name itself), and the
    /// plans' probes (files outside the workspace that are planted secrets, the canary Docker
    /// socket), which the path and socket parameters name in calls of their own.
    pub(crate) fn plant(&mut self) -> Result<(), Error> {
        if let Some(ca) = &self.trust {
            self.secrets.trust_in_kubeconfig(&ca.pem);
        }
        for &(name, len) in secrets::BAIT_ENV {
            if self.opts.server_env.iter().any(|(n, _)| n == name) {
                continue;
            }
            let (value, token) = secrets::bait_env(name, "", len)?;
            self.secrets.tokens.push(token);
            self.bait.push((name.to_string(), value));
        }
        if let Some(machine) = self.opts.triggers.machine {
            self.trigger_env = machine
                .variables()
                .iter()
                .map(|(k, v)| (k.to_string(), v.to_string()))
                .collect();
            if machine == triggers::Machine::Ci {
                for &(name, prefix, len) in triggers::CI_TOKENS {
                    let (value, token) = secrets::bait_env(name, prefix, len)?;
                    self.secrets.tokens.push(token);
                    self.trigger_env.push((name.to_string(), value));
                }
            }
        }
        self.opts.session.probes = probes(
            &self.secrets.tokens,
            self.opts.metadata_probe,
            &self.opts.command,
            &self.secrets.home,
        );
        Ok(())
    }

    /// Installs the package and resolves its program: the target, or why the server could
    /// not be started (a failed install, or one that has not the program asked for, is still
    /// an audit: what the install did went through the recorder and goes through the checks).
    pub(crate) fn install(
        &mut self,
        package: &install::Package,
        exact: install::Exact,
    ) -> Result<Result<target::Resolved, String>, Error> {
        let installed = install_phase(
            package,
            exact,
            &self.opts,
            &self.run_id,
            InstallContext {
                bundle: &self.bundle,
                events: &self.events,
                clock: &self.clock,
                secrets: &mut self.secrets,
                manifest: &mut self.manifest,
                answer: self.answer.clone(),
                bait: &self.bait,
            },
            self.progress,
        )?;
        self.all_events.extend(installed.events);
        self.limits_reached.extend(installed.limits_reached);
        self.flows.extend(installed.flows);
        if let Some(sandbox) = installed.sandbox {
            self.manifest.sandbox = sandbox;
        }
        let mut package_ref = installed.package;
        if installed.failure.is_none() {
            package_ref.readme_config = self.readme_config(package, &installed.dir);
        }
        let entry = match installed.failure {
            Some(why) => Err(format!("the install failed: {why}")),
            None => install::entry_command(package, &installed.dir, &self.opts.command)
                .map_err(|e| format!("the server could not be started: {e}")),
        };
        let (command, program) = match entry {
            Ok(found) => found,
            Err(why) => {
                self.manifest.target.package = Some(package_ref);
                return Ok(Err(why));
            }
        };
        package_ref.program = Some(program);
        // The server runs in its install folder: a package has no business with the
        // directory glassbox was started in (`--ro` makes more visible).
        let mut t = target::resolve(&command, &installed.dir)?;
        t.extra_ro.push(installed.dir.clone());
        self.installed_in = Some(installed.dir.clone());
        self.server_cwd = installed.dir.clone();
        // The server's own environment: the installer's settings are not the server's.
        let m = &mut self.manifest;
        m.target.command = command
            .iter()
            .map(|a| a.to_string_lossy().into_owned())
            .collect();
        m.target.program = t.program.to_string_lossy().into_owned();
        m.target.cwd = self.server_cwd.to_string_lossy().into_owned();
        m.target.package = Some(package_ref);
        self.bundle.write_manifest(&self.manifest)?;
        Ok(Ok(t))
    }

    /// The server never ran: what was recorded (the install) goes through every check, the
    /// session is not complete, the channels of the runs that did not happen are not claimed.
    pub(crate) fn finish_without_server(mut self, why: String) -> Result<Audit, Error> {
        let m = &mut self.manifest;
        m.sandbox.limits_reached = std::mem::take(&mut self.limits_reached);
        m.session.completed = false;
        m.session.failure = Some(why);
        m.recorder.channels.retain(|c| {
            c != "mcp-transcript" && c != "network-denied-run" && c != triggers::CHANNEL
        });
        self.finish()
    }

    /// The server's environment and paths: `--ro`, the bait variables, the browser's, the configuration's
    /// plain values as given and its secrets as fresh canaries that are planted secrets like
    /// the files (`env:NAME`); then what the entry explains.
    pub(crate) fn server_environment(
        &mut self,
        mut target: target::Resolved,
    ) -> Result<target::Resolved, Error> {
        target.extra_ro.extend(self.opts.extra_ro.iter().cloned());
        // The bait variables, and where the host has a Chromium, the variables that point
        // browser drivers at its launcher: a value the target sets stays.
        let browser = glassbox_sandbox::browser::environment();
        for (name, value) in self.bait.iter().chain(&browser) {
            if !target.env.iter().any(|(k, _)| k == name) {
                target.env.push((name.clone(), value.clone()));
            }
        }
        for (name, value) in self.opts.server_env.clone() {
            let value = match value {
                config::EnvValue::Plain(v) => v,
                config::EnvValue::Secret { hosts } => self.declared_canary(&name, hosts)?,
            };
            set_env(&mut target.env, name, value);
        }
        self.manifest.network.names = entry_names(&self.opts, self.installed_in.as_deref());
        Ok(target)
    }

    /// A fresh canary for the declared secret variable `name`, planted (`env:NAME`, followed
    /// like the files), which may go to `hosts`.
    pub(crate) fn declared_canary(
        &mut self,
        name: &str,
        hosts: Vec<String>,
    ) -> Result<String, Error> {
        let canary = secrets::env_canary()?;
        self.secrets.tokens.push(glassbox_model::Honeytoken {
            path: format!("env:{name}"),
            kind: "declared-secret".into(),
            secrets: vec![canary.clone()],
            hosts,
            random: vec![canary["gbx_".len()..].to_string()],
            ..Default::default()
        });
        Ok(canary)
    }

    /// The bundle completed and the checks run over it ([`finish`]).
    pub(crate) fn finish(mut self) -> Result<Audit, Error> {
        finish(
            Recorded {
                manifest: self.manifest,
                events: self.all_events,
                flows: self.flows,
                transcript: self.transcript,
                secrets: &mut self.secrets,
                sink: &self.events,
            },
            &self.opts,
            &self.bundle,
            self.dir,
        )
    }
}

/// A run of dual execution: its flows, or why it could not be made.
pub(crate) type Rerun = Result<Vec<glassbox_model::Flow>, String>;

/// What an audit recorded, ready for the checks.
pub(crate) struct Recorded<'a> {
    pub(crate) manifest: Manifest,
    pub(crate) events: Vec<glassbox_model::Event>,
    pub(crate) flows: Vec<glassbox_model::Flow>,
    pub(crate) transcript: Vec<TranscriptEntry>,
    pub(crate) secrets: &'a mut secrets::Secrets,
    pub(crate) sink: &'a recording::SharedSink,
}

/// The bundle completed (planted secrets, events flushed, flows numbered and written, the
/// end time), then [`conclude`].
pub(crate) fn finish(
    r: Recorded<'_>,
    opts: &AuditOptions,
    bundle: &bundle::Writer,
    dir: PathBuf,
) -> Result<Audit, Error> {
    let Recorded {
        mut manifest,
        events,
        mut flows,
        transcript,
        secrets,
        sink,
    } = r;
    // The key made on first open (if it was opened) is a planted secret like the others.
    secrets.settle_rsa();
    manifest.sandbox.honeytokens = secrets.tokens.clone();
    manifest.sandbox.workspace = glassbox_sandbox::workspace::dir(&secrets.home);
    if let Err(e) = sink.clone().flush() {
        return Err(Error::Evidence {
            path: dir.join(bundle::EVENTS),
            source: e,
        });
    }
    for (i, f) in flows.iter_mut().enumerate() {
        f.id = i as u64 + 1;
    }
    bundle.write_flows(&flows)?;
    manifest.finished_at =
        Some(humantime::format_rfc3339_millis(std::time::SystemTime::now()).to_string());
    let evidence = Evidence {
        manifest,
        events,
        transcript,
        flows,
    };
    conclude(evidence, opts, bundle, dir)
}

/// The end of every audit: the checks over the evidence, the verdict, the final manifest and
/// the report written.
pub(crate) fn conclude(
    evidence: Evidence,
    opts: &AuditOptions,
    bundle: &bundle::Writer,
    dir: PathBuf,
) -> Result<Audit, Error> {
    let proofs = opts
        .proofs
        .clone()
        .unwrap_or_else(|| selftest::proofs_for(&evidence.manifest));
    // The checks read what was written, as `recheck` does: one route from evidence to report.
    bundle.write_manifest(&evidence.manifest)?;
    let (report, _) = recheck::evaluate_bundle(&dir, &proofs)?;
    bundle.write_report(&report)?;
    Ok(Audit {
        evidence,
        report,
        evidence_dir: dir,
    })
}
