//! The server's runs, each a session: the network runs (capture, denied), the trigger runs,
//! and the dual-execution reruns.

use crate::pipeline::{Pipeline, Rerun};
use crate::session_run::{one_run, say_once, set_env, RunFiles};
use crate::{dual, left, recording, secrets, triggers, usage, Error};
use glassbox_model::{bundle, NetworkMode, NetworkRun};
use glassbox_plan::target;

impl<'a> Pipeline<'a> {
    /// A trigger run ([`triggers`]): the session again with the server's world changed as
    /// `triggers` says; the first one also records what the moved clock could not reach.
    pub(crate) fn trigger_run(
        &mut self,
        target: &target::Resolved,
        triggers: triggers::Triggers,
    ) -> Result<(), Error> {
        let first = !self
            .manifest
            .network
            .runs
            .iter()
            .any(|r| r.mode == NetworkMode::Trigger);
        if !first {
            self.progress.repeat(&format!(
                "the trigger run again, with {}: which change brought out what it did",
                triggers.record(Vec::new()).describe()
            ));
        }
        let mut changed = target.clone();
        for (name, value) in self.trigger_variables(&triggers) {
            set_env(&mut changed.env, name.clone(), value.clone());
        }
        let from = self.all_events.len();
        self.network_run(&changed, false, NetworkMode::Trigger, Some(&triggers))?;
        // In a microVM the guest's own wall clock was set forward: every program's moved.
        let unmoved = match (triggers.clock_days, first) {
            (Some(_), true) if !self.opts.isolation.moves_every_wall_clock() => {
                triggers::unmoved(&self.all_events[from..], &self.secrets.home)
            }
            _ => Vec::new(),
        };
        if let Some(t) = self
            .manifest
            .network
            .runs
            .last_mut()
            .and_then(|r| r.trigger.as_mut())
        {
            t.limits = unmoved;
        }
        Ok(())
    }

    /// The variables a trigger run sets: its machine's ([`Pipeline::trigger_env`]), none when
    /// it changes the clock alone.
    pub(crate) fn trigger_variables(&self, t: &triggers::Triggers) -> &[(String, String)] {
        match t.machine {
            Some(_) => &self.trigger_env,
            None => &[],
        }
    }

    /// One run of the server (`main`: the first, the capture run), merged into the manifest,
    /// the events and the flows, and written.
    pub(crate) fn network_run(
        &mut self,
        target: &target::Resolved,
        main: bool,
        mode: NetworkMode,
        triggers: Option<&triggers::Triggers>,
    ) -> Result<(), Error> {
        self.progress.network_run(mode);
        // A second run of a mode (a trigger run made again) has files of its own.
        let before = self
            .manifest
            .network
            .runs
            .iter()
            .filter(|r| r.mode == mode)
            .count();
        let suffix = match (main, before) {
            (true, _) => String::new(),
            (false, 0) => format!("-{}", mode.name()),
            (false, n) => format!("-{}-{}", mode.name(), n + 1),
        };
        let first_event_id = self.all_events.len() as u64 + 1;
        // The client's one root: the folder the plans give paths in, else the server's own.
        let root = match &self.opts.session.probes.workspace {
            Some(w) => w.clone(),
            None => self.server_cwd.to_string_lossy().into_owned(),
        };
        self.opts.session.roots = vec![root];
        let (manifest, bundle) = (&mut self.manifest, &self.bundle);
        let mut run = one_run(
            target,
            &self.server_cwd,
            &self.opts,
            RunFiles {
                bundle,
                suffix: &suffix,
                events: Box::new(self.events.clone()),
            },
            recording::RunPlan {
                secrets: {
                    // A key made in an earlier run is planted as is.
                    self.secrets.settle_rsa();
                    self.secrets.clone()
                },
                clock: self.clock.clone(),
                first_event_id,
                network: Some(mode),
                relay: None,
                wire: None,
                limits: self.opts.limits.clone(),
                answer: self.answer.clone(),
                trust: self.trust.clone(),
                ring: self.opts.recorder_ring,
                marker: self.opts.session.input_marker.clone(),
                clock_shift: triggers.and_then(|t| t.shift()),
            },
            self.progress,
            &mut |settings, mechanism| {
                // What is known once the server runs goes to disk at once: a glassbox killed
                // mid-session leaves a manifest that says how the sandbox was set up.
                if main {
                    manifest.sandbox = settings.clone();
                    manifest.recorder.mechanism = mechanism.to_string();
                    bundle.write_manifest(manifest)?;
                }
                Ok(())
            },
        )?;
        // What the server presented, hashed, for comparisons across audits.
        let presented = glassbox_checks::tool_definition_drift::hashes(&run.transcript);
        run.session.tool_hashes = presented.tools;
        run.session.instructions_hash = presented.instructions;
        // The canaries given to elicitations are followed like planted secrets (the manifest
        // takes its honeytokens from the secrets when the bundle is finished).
        for given in &run.session.elicited {
            let tokens = &mut self.secrets.tokens;
            if tokens
                .iter()
                .flat_map(|h| &h.secrets)
                .any(|s| *s == given.value)
            {
                continue;
            }
            tokens.push(glassbox_model::Honeytoken {
                path: format!("elicited:{}:{}", given.phase, given.field),
                kind: "elicited-secret".into(),
                secrets: vec![given.value.clone()],
                random: vec![given.value.clone()],
                ..Default::default()
            });
        }
        if let Some(e) = run.recording.write_error {
            return Err(Error::Evidence {
                path: self.dir.join(bundle::EVENTS),
                source: e,
            });
        }
        let run_flows = run.recording.edge.flows;
        let end_event = first_event_id + run.recording.events.len() as u64;
        let trigger = triggers.map(|t| {
            t.record(
                self.trigger_variables(t)
                    .iter()
                    .map(|(k, _)| k.clone())
                    .collect(),
            )
        });
        let manifest = &mut self.manifest;
        let mut isolation = run.isolation;
        if let Some(e) = &run.recording.edge.error {
            // The edge did not see the whole run: its channel cannot back a claim.
            manifest.recorder.channels.retain(|c| c != "packet-edge");
            isolation.push(format!("FAILED: {e}"));
        }
        manifest.network.runs.push(NetworkRun {
            mode,
            start_ns: run.start_ns,
            end_ns: run.end_ns,
            first_event: first_event_id,
            end_event,
            edge: run.settings.network.clone(),
            isolation_verified: !isolation.is_empty()
                && isolation.iter().all(|c| c.starts_with("ok")),
            isolation,
            counters: run.recording.edge.counters,
            syscalls_without_flow: Vec::new(),
            session: (!main).then(|| run.session.clone()),
            server_exit: (!main).then(|| run.server_exit.clone()),
            allow: Vec::new(),
            trigger,
        });
        manifest.timings.extend(run.timings);
        if let Some(vm) = run.vm {
            match &mut manifest.vm {
                Some(m) => m.merge(vm),
                None => manifest.vm = Some(vm),
            }
        }
        let st = &run.recording.stats;
        manifest
            .recorder
            .add_lost(st.lost, st.lost_files, &st.lost_why);
        if let Some(f) = &run.recording.stats.failure {
            let what = format!("{} run: {f}", mode.name());
            manifest.recorder.failure = Some(match manifest.recorder.failure.take() {
                Some(earlier) => format!("{earlier}; {what}"),
                None => what,
            });
        }
        for s in &run.recording.stats.syscalls {
            if !manifest.recorder.syscalls.contains(s) {
                manifest.recorder.syscalls.push(s.clone());
            }
        }
        // A server started again (`start.rs`) makes the main run more than once: what it
        // observes and not is said once.
        let rec = &mut manifest.recorder;
        match &run.ground_truth {
            None if main => say_once(&mut rec.channels, "honeytoken-ground-truth".into()),
            None => {}
            Some(why) => say_once(
                &mut rec.unobserved,
                format!("honeytoken-ground-truth ({} run): {why}", mode.name()),
            ),
        }
        if main {
            manifest.sandbox = run.settings;
            manifest.recorder.mechanism = run.mechanism;
            manifest.network.canary_sockets = run.canary_sockets;
            manifest.server_exit = Some(run.server_exit);
            manifest.session = run.session;
            self.transcript = run.transcript;
        }
        // What the sandbox said of this run, each line prefixed with the run.
        let of_run = |lines: &[String]| -> Vec<String> {
            lines
                .iter()
                .map(|r| format!("{} run: {r}", mode.name()))
                .collect()
        };
        self.limits_reached.extend(of_run(&run.limits_reached));
        manifest.sandbox.limits_reached = self.limits_reached.clone();
        match run.usage {
            Some(u) => {
                if main {
                    say_once(&mut manifest.recorder.channels, usage::CHANNEL.into());
                }
                self.usage.extend(u.into_iter().map(|mut p| {
                    p.mode = mode;
                    p
                }));
            }
            None if main => say_once(
                &mut manifest.recorder.unobserved,
                format!(
                    "{}: this backend does not read the sandbox's usage while it runs",
                    usage::CHANNEL
                ),
            ),
            None => {}
        }
        self.outlived.extend(of_run(&run.outlived));
        // A run whose server started the browser glassbox supplies says what that browser
        // keeps from the record.
        let launched = run.recording.events.iter().any(|e| {
            matches!(&e.kind, glassbox_model::EventKind::Exec { path, .. }
                if path.as_slice() == glassbox_sandbox::browser::LAUNCHER.as_bytes())
        });
        if launched {
            say_once(
                &mut manifest.recorder.unobserved,
                glassbox_sandbox::browser::blind_spot(),
            );
        }
        match run.left {
            Some((files, cut)) => {
                if main {
                    say_once(&mut manifest.recorder.channels, left::CHANNEL.into());
                }
                self.left.extend(files.into_iter().map(|mut f| {
                    f.mode = mode;
                    f
                }));
                self.left_cut.extend(of_run(&cut));
            }
            None if main => say_once(
                &mut manifest.recorder.unobserved,
                format!(
                    "{}: this backend could not read what the run left",
                    left::CHANNEL
                ),
            ),
            None => {}
        }
        manifest.sandbox.usage = self.usage.clone();
        manifest.sandbox.outlived = self.outlived.clone();
        manifest.sandbox.left = self.left.clone();
        manifest.sandbox.left_cut = self.left_cut.clone();
        self.all_events.extend(run.recording.events);
        self.flows.extend(run_flows);
        self.bundle.write_manifest(&self.manifest)?;
        Ok(())
    }

    /// Dual execution ([`dual`]): the capture run's calls in which a planted file was read and
    /// bytes the edge read left for a host not its service are made again, in two runs of
    /// their own (network simulated, events not kept): with fresh values in every planted
    /// file, then with the same values; what each call sent in each run goes to
    /// `manifest.dual`. Nothing is run when no call qualifies. Under either backend: a
    /// microVM's runs are fresh guests, planted from the secrets given as every run is.
    pub(crate) fn dual_runs(&mut self, target: &target::Resolved) -> Result<(), Error> {
        // The main capture run (a start that failed for lack of a setting has its session).
        let Some(capture) = (self.manifest.network.runs.iter())
            .find(|r| r.mode == NetworkMode::Capture && r.session.is_none())
            .cloned()
        else {
            return Ok(());
        };
        let candidates = dual::candidates(
            &capture,
            &self.all_events,
            &self.flows,
            &self.manifest.timings,
            &self.secrets.tokens,
        );
        if candidates.is_empty() {
            return Ok(());
        }
        // The capture run's flows only (the denied run's are of another mode).
        let original: Vec<dual::Sent> = candidates
            .iter()
            .map(|c| dual::sent(&self.flows, &c.destinations, NetworkMode::Capture))
            .collect();
        let mut reruns: Vec<Rerun> = Vec::new();
        let why_not = match self.opts.dual {
            false => "not made again: dual execution was turned off",
            true => "",
        };
        if why_not.is_empty() {
            let ca = self.trust.as_ref().map(|c| c.pem.clone());
            let fresh = self.secrets.refreshed(ca.as_deref())?;
            let same = self.secrets.clone();
            for (secrets, suffix) in [(fresh, "-dual-fresh"), (same, "-dual-same")] {
                reruns.push(self.rerun(target, secrets, suffix));
            }
        }
        for (i, c) in candidates.into_iter().enumerate() {
            let measured = |r: &Rerun| {
                r.as_ref()
                    .ok()
                    .map(|f| dual::sent(f, &c.destinations, NetworkMode::Capture))
            };
            let fresh = reruns.first().and_then(measured);
            let same = reruns.get(1).and_then(measured);
            let note = match reruns.as_slice() {
                [] => Some(why_not.to_string()),
                runs => runs.iter().find_map(|r| r.as_ref().err().cloned()),
            };
            let rec = dual::record(c, &original[i], same.as_ref(), fresh.as_ref(), note);
            self.manifest.dual.push(rec);
        }
        self.bundle.write_manifest(&self.manifest)?;
        Ok(())
    }

    /// One run of dual execution with `secrets` planted: its flows (its events, transcript
    /// aside, are not kept), or why it could not be made.
    pub(crate) fn rerun(
        &mut self,
        target: &target::Resolved,
        secrets: secrets::Secrets,
        suffix: &str,
    ) -> Rerun {
        let run = one_run(
            target,
            &self.server_cwd,
            &self.opts,
            RunFiles {
                bundle: &self.bundle,
                suffix,
                events: Box::new(recording::Discard),
            },
            recording::RunPlan {
                secrets,
                clock: self.clock.clone(),
                first_event_id: 1,
                network: Some(NetworkMode::Capture),
                relay: None,
                wire: None,
                limits: self.opts.limits.clone(),
                answer: self.answer.clone(),
                trust: self.trust.clone(),
                ring: self.opts.recorder_ring,
                marker: self.opts.session.input_marker.clone(),
                clock_shift: None,
            },
            self.progress,
            &mut |_, _| Ok(()),
        )
        .map_err(|e| format!("the run{suffix} failed: {e}"))?;
        if let Some(f) = &run.session.failure {
            return Err(format!("the run{suffix} did not complete: {f}"));
        }
        Ok(run.recording.edge.flows)
    }
}
