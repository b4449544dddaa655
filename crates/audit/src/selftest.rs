//! `glassbox selftest`: every control fixture through the real sandbox; the per-build record
//! of which checks are proven.
//!
//! A check is *proven* in a build when every one of its positive controls fired (and the
//! selftest ran them in this build). An audit reads the record of its build: a check that is
//! not proven there is reported `unverified`, never `pass`.
//!
//! The build id is a hash of the glassbox version, the checks' lock file (content hashes of
//! every check's logic: it changes whenever a check does) and the controls' manifest, so a
//! record is valid exactly for the checks and controls it was made with, whichever profile
//! built the binary.

use crate::{audit, AuditOptions, Error, Isolation, Quiet, RecorderChoice};
use glassbox_checks::Proofs;
use glassbox_model::{CheckVersion, Outcome, Verdict};
use serde::{Deserialize, Serialize};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::Duration;

/// The controls' manifest this build was made with.
const MANIFEST: &str = include_str!("../../../fixtures/manifest.json");

/// Where the controls are in the source tree this binary was built from.
pub fn default_fixtures() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR")).join("../../fixtures")
}

/// This build's id.
pub fn build_id() -> String {
    let mut h = Sha256::new();
    h.update(glassbox_model::GLASSBOX_VERSION.as_bytes());
    h.update([0]);
    h.update(glassbox_checks::LOCK.as_bytes());
    h.update([0]);
    h.update(MANIFEST.as_bytes());
    let d = h.finalize();
    d.iter().take(12).map(|b| format!("{b:02x}")).collect()
}

/// The record of this build's selftest under `isolation` with the recorder `recorder` (a
/// [`recorder_key`]): the controls prove the checks on the backend they ran on (its kernel,
/// its wire to the edge) and with the recorder that saw them (the eBPF channel and seccomp
/// notification see the open and stat families differently).
fn record_path(isolation: Isolation, recorder: &str) -> PathBuf {
    glassbox_plan::state_dir()
        .join("selftest")
        .join(isolation.selftest_record(&build_id(), recorder))
}

/// The recorder a run's `manifest.recorder.mechanism` names, as records are kept by: `ebpf`
/// when the eBPF channel recorded the open and stat families, `notify` otherwise.
pub fn recorder_key(mechanism: &str) -> &'static str {
    if mechanism.contains("ebpf") {
        "ebpf"
    } else {
        "notify"
    }
}

fn namespace() -> String {
    Isolation::Namespace.name().into()
}

/// The controls' manifest.
#[derive(Clone, Debug, Deserialize)]
pub struct Controls {
    /// Check ids that have controls.
    pub checks: Vec<String>,
    /// Every case.
    pub cases: Vec<Case>,
}

/// One control.
#[derive(Clone, Debug, Deserialize, Serialize)]
pub struct Case {
    /// Name (= folder).
    pub name: String,
    /// Folder under the fixtures directory.
    pub dir: String,
    /// The command, run in the folder.
    pub command: Vec<String>,
    /// Check id → `flag`, `pass`, `todo-flag`, `todo-pass`.
    pub expect: BTreeMap<String, String>,
    /// The expected verdict.
    pub verdict: String,
    /// Whether the case attempts network traffic: it then runs only behind a verified edge.
    #[serde(default)]
    pub network: bool,
    /// The server's environment, as a client configuration's `env` gives it (plain values:
    /// what they name explains egress there).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub env: BTreeMap<String, String>,
    /// The eBPF recorder's ring buffer for this control, in bytes (its header's `ring:`): a
    /// control of what a run that lost records says. It runs only where the eBPF channel
    /// records (elsewhere it is skipped, and says why).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub ring: Option<u64>,
    /// The trigger run for this control (its header's `triggers:`, `--triggers`' words);
    /// `None`: no trigger run.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub triggers: Option<String>,
}

impl Controls {
    /// Reads and checks the manifest: every check of the registry has controls (at least one
    /// positive and one negative), every id is known. Fails closed.
    pub fn load(fixtures: &Path) -> Result<Controls, Error> {
        let path = fixtures.join("manifest.json");
        let text = std::fs::read(&path).map_err(|source| Error::Evidence {
            path: path.clone(),
            source,
        })?;
        let c: Controls = serde_json::from_slice(&text)
            .map_err(|e| Error::Usage(format!("{}: {e}", path.display())))?;
        let mut problems = Vec::new();
        for check in glassbox_checks::registry() {
            let id = check.info.id;
            let count = |want: &str| {
                c.cases
                    .iter()
                    .filter(|k| k.expect.get(id).map(String::as_str) == Some(want))
                    .count()
            };
            if count("flag") == 0 {
                problems.push(format!("{id} has no positive control"));
            }
            if count("pass") == 0 {
                problems.push(format!("{id} has no negative control"));
            }
            if !c.checks.iter().any(|k| k == id) {
                problems.push(format!("{id} is missing from the manifest's checks"));
            }
        }
        for case in &c.cases {
            for (id, want) in &case.expect {
                if glassbox_checks::find(id).is_none() {
                    problems.push(format!("{}: unknown check {id}", case.name));
                }
                if !["flag", "pass", "not-observed", "todo-flag", "todo-pass"]
                    .contains(&want.as_str())
                {
                    problems.push(format!(
                        "{}: unknown expectation {want} for {id}",
                        case.name
                    ));
                }
            }
        }
        if problems.is_empty() {
            Ok(c)
        } else {
            Err(Error::Usage(format!(
                "the controls do not hold: {}",
                problems.join("; ")
            )))
        }
    }
}

/// What one control gave.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct CaseResult {
    /// The case.
    pub name: String,
    /// Check id → outcome (for the checks the case pins).
    pub outcomes: BTreeMap<String, Outcome>,
    /// The verdict.
    pub verdict: Option<Verdict>,
    /// What did not match (empty: everything did).
    pub misses: Vec<String>,
    /// Known gaps seen (todo expectations), reported without failing.
    pub todo: Vec<String>,
    /// Why its microVM guest was lost (it hung, died, or never came up), when it was: the
    /// control observed nothing whole and is a miss with the reason. It is not run again: the
    /// bounds on a guest are counted in the time it was not kept waiting for a CPU
    /// ([`glassbox_vm::clock`]), so a loaded host does not lose a guest, and a guest lost all
    /// the same is a defect to find, not chance to retry.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub lost: Vec<String>,
    /// The recorder its audit was recorded by (a [`recorder_key`]).
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub recorder: String,
    /// Why it was not run, when it was not (a control of the eBPF channel under another
    /// recorder): it then counts for no check.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub skipped: Option<String>,
}

impl CaseResult {
    /// A control not run, and why.
    fn skipped(case: &Case, recorder: &str, why: String) -> CaseResult {
        CaseResult {
            name: case.name.clone(),
            outcomes: BTreeMap::new(),
            verdict: None,
            misses: Vec::new(),
            todo: Vec::new(),
            lost: Vec::new(),
            recorder: recorder.into(),
            skipped: Some(why),
        }
    }
}

/// Why `case` is not run with `recorder` (a [`recorder_key`]), if it is not: a control of the
/// eBPF channel's ring (`ring:`) means nothing where that channel does not record.
fn not_for(case: &Case, recorder: &str) -> Option<String> {
    case.ring.filter(|_| recorder != "ebpf").map(|bytes| {
        format!("a control of the eBPF channel's ring buffer ({bytes} bytes): not recorded by it here ({recorder})")
    })
}

/// Per check: the confusion counts.
#[derive(Clone, Debug, Default, Serialize, Deserialize, PartialEq, Eq)]
pub struct Tally {
    /// Check id.
    pub id: String,
    /// Version.
    pub version: u32,
    /// Positive controls that flagged.
    pub tp: u32,
    /// Negative controls that passed.
    pub tn: u32,
    /// Negative controls that flagged.
    pub fp: u32,
    /// Positive controls that did not flag.
    pub fn_: u32,
    /// Known gaps (todo-flag that did not flag, todo-pass that flagged).
    pub todo: u32,
    /// Controls the check could not read (`unread`: they expect `not-observed`) that came
    /// back `pass`: a false assurance, which leaves the check unproven. (Also counted in
    /// `fp`.)
    #[serde(default)]
    pub blind: u32,
    /// Every positive control fired, and no unread control came back `pass`.
    pub proven: bool,
}

/// A selftest: what ran and what it proved. Saved per build.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct Record {
    /// The build id.
    pub build: String,
    /// glassbox version.
    pub glassbox_version: String,
    /// When (RFC 3339).
    pub created_at: String,
    /// The recorder its controls were recorded by (a [`recorder_key`]: `notify`, `ebpf`):
    /// it proves audits recorded the same way.
    pub recorder: String,
    /// Where the controls ran: `namespace` or `microvm` (`--isolation`).
    #[serde(default = "namespace")]
    pub isolation: String,
    /// Per check.
    pub checks: Vec<Tally>,
    /// Per case.
    pub cases: Vec<CaseResult>,
    /// The controls run when the selftest was told to run only some (`--only`), by name;
    /// empty when every control ran. Such a record proves nothing for an audit (a check is
    /// proven by all its controls): it is never saved as the build's record, and
    /// [`load_proofs_for`] refuses one handed to it.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub only: Vec<String>,
}

impl Record {
    /// Whether every expectation held.
    pub fn ok(&self) -> bool {
        self.cases.iter().all(|c| c.misses.is_empty())
    }

    /// The proofs this record gives.
    pub fn proofs(&self) -> Proofs {
        Proofs {
            by_check: self
                .checks
                .iter()
                .map(|t| {
                    let cv = CheckVersion {
                        id: t.id.clone(),
                        version: t.version,
                    };
                    let r = if t.proven {
                        Ok(())
                    } else if t.blind > 0 {
                        Err(format!(
                            "{} of its controls that it cannot read came back `pass` in this build's selftest",
                            t.blind
                        ))
                    } else {
                        Err(format!(
                            "{} of its positive controls did not fire in this build's selftest",
                            t.fn_
                        ))
                    };
                    (cv, r)
                })
                .collect(),
            missing: Some("not in this build's selftest".into()),
        }
    }
}

/// The proofs of this build for the run whose manifest is `manifest`: the selftest record
/// made on its backend with its recorder.
pub fn proofs_for(manifest: &glassbox_model::Manifest) -> Proofs {
    load_proofs_for(
        Isolation::of(manifest),
        recorder_key(&manifest.recorder.mechanism),
    )
}

/// The proofs of this build for audits under `isolation` recorded by `recorder` (a
/// [`recorder_key`]), from the selftest record made the same way.
pub fn load_proofs_for(isolation: Isolation, recorder: &str) -> Proofs {
    proofs_from(&record_path(isolation, recorder), isolation, recorder)
}

/// Whether this build has a selftest record for audits under `isolation` with `choice`
/// (for a choice only the run decides, any of its recorders).
pub fn has_proofs(isolation: Isolation, choice: RecorderChoice) -> bool {
    let keys = match isolation.expected_recorder(choice) {
        Some(k) => vec![k],
        None => vec!["notify", "ebpf"],
    };
    keys.into_iter()
        .any(|k| !load_proofs_for(isolation, k).by_check.is_empty())
}

/// The selftest-before-audit rule: an audit's checks are proven only by this build's selftest
/// of the audit's isolation and recorder, so when there is no such record, and the caller did
/// not opt out (`skip`), the controls of the source tree are to run first (their record is
/// saved, and each audit reads the one of the recorder it ran with). `Some(fixtures)`: run
/// them ([`run`]); `None`: there is a record, the caller opted out, or this build has no
/// controls beside it (an installed binary: its checks are then reported unverified).
pub fn wanted_before_audit(
    isolation: Isolation,
    choice: RecorderChoice,
    skip: bool,
) -> Option<PathBuf> {
    let fixtures = default_fixtures();
    (!skip && !has_proofs(isolation, choice) && fixtures.join("manifest.json").exists())
        .then_some(fixtures)
}

/// The proofs the record at `path` gives audits under `isolation` recorded by `recorder`:
/// none unless it is this build's, made the same way, over every control.
fn proofs_from(path: &Path, isolation: Isolation, recorder: &str) -> Proofs {
    match std::fs::read(path).map(|b| serde_json::from_slice::<Record>(&b)) {
        Ok(Ok(r))
            if r.build == build_id()
                && r.isolation == isolation.name()
                && r.recorder == recorder
                && r.only.is_empty() =>
        {
            r.proofs()
        }
        _ => {
            let (under, asked) = match isolation.option() {
                Some(o) => (format!(" under {o}"), format!(" {o}")),
                None => (String::new(), String::new()),
            };
            Proofs::none(format!(
                "no selftest recorded for this build {}{under} with the {recorder} recorder (run `glassbox selftest{asked} --recorder {recorder}`)",
                build_id()
            ))
        }
    }
}

/// How to run the selftest.
#[derive(Clone, Debug)]
pub struct Options {
    /// The controls' folder.
    pub fixtures: PathBuf,
    /// Audits at a time.
    pub jobs: usize,
    /// Recorder.
    pub recorder: RecorderChoice,
    /// Per-request timeout.
    pub request_timeout: Duration,
    /// Where the controls run.
    pub isolation: Isolation,
    /// Run only the controls of these names (empty: every control). The record of such a
    /// run is never saved as the build's (see [`Record::only`]).
    pub only: Vec<String>,
}

/// Runs every control (or those `opts.only` names), returns the record, and saves it as the
/// build's when `save` and every control ran.
pub fn run(
    opts: &Options,
    progress: &(dyn Fn(&CaseResult) + Sync),
    save: bool,
) -> Result<Record, Error> {
    let mut controls = Controls::load(&opts.fixtures)?;
    if !opts.only.is_empty() {
        controls.cases = only(controls.cases, &opts.only)?;
    }
    let save = save && opts.only.is_empty();
    build_c_controls(&opts.fixtures)?;
    let lib = opts.fixtures.join("lib");
    let scratch = std::env::temp_dir().join(format!("glassbox-selftest-{}", std::process::id()));
    let queue = Mutex::new(controls.cases.clone());
    let results = Mutex::new(Vec::new());
    let failure: Mutex<Option<Error>> = Mutex::new(None);
    std::thread::scope(|s| {
        for _ in 0..opts.jobs.max(1) {
            s.spawn(|| {
                while let Some(case) = queue.lock().map(|mut q| q.pop()).ok().flatten() {
                    match run_case(&case, opts, &lib, &scratch) {
                        Ok(r) => {
                            progress(&r);
                            if let Ok(mut v) = results.lock() {
                                v.push(r);
                            }
                        }
                        Err(e) => {
                            if let Ok(mut f) = failure.lock() {
                                f.get_or_insert(e);
                            }
                            // The record cannot be made: stop, rather than run the rest.
                            if let Ok(mut q) = queue.lock() {
                                q.clear();
                            }
                        }
                    }
                }
            });
        }
    });
    let _ = std::fs::remove_dir_all(&scratch);
    if let Some(e) = failure.into_inner().ok().flatten() {
        return Err(e);
    }
    let mut cases = results.into_inner().unwrap_or_default();
    cases.sort_by(|a, b| a.name.cmp(&b.name));
    let checks = glassbox_checks::registry()
        .iter()
        .map(|c| tally(c.info.id, c.info.version, &controls, &cases))
        .collect();
    let record = Record {
        build: build_id(),
        glassbox_version: glassbox_model::GLASSBOX_VERSION.into(),
        created_at: humantime::format_rfc3339_seconds(std::time::SystemTime::now()).to_string(),
        recorder: cases
            .iter()
            .find(|c| !c.recorder.is_empty())
            .map(|c| c.recorder.clone())
            .unwrap_or_else(|| format!("{:?}", opts.recorder).to_lowercase()),
        isolation: opts.isolation.name().into(),
        checks,
        cases,
        only: if opts.only.is_empty() {
            Vec::new()
        } else {
            controls.cases.iter().map(|c| c.name.clone()).collect()
        },
    };
    if save {
        let path = record_path(opts.isolation, &record.recorder);
        let write = || -> std::io::Result<()> {
            std::fs::create_dir_all(path.parent().unwrap_or(Path::new(".")))?;
            let tmp = path.with_extension("tmp");
            std::fs::write(&tmp, serde_json::to_vec_pretty(&record)?)?;
            std::fs::rename(&tmp, &path)
        };
        write().map_err(|source| Error::Evidence {
            path: path.clone(),
            source,
        })?;
    }
    Ok(record)
}

/// The cases `names` names, in the manifest's order; a name no case has is a usage error.
fn only(cases: Vec<Case>, names: &[String]) -> Result<Vec<Case>, Error> {
    let unknown: Vec<&str> = names
        .iter()
        .filter(|n| !cases.iter().any(|c| &c.name == *n))
        .map(String::as_str)
        .collect();
    if !unknown.is_empty() {
        return Err(Error::Usage(format!(
            "--only: no control named {} (the controls are the folders of fixtures/manifest.json)",
            unknown.join(", ")
        )));
    }
    Ok(cases
        .into_iter()
        .filter(|c| names.contains(&c.name))
        .collect())
}

/// Builds the C controls: every folder of `fixtures` holding a `control.c` gets the helper its
/// server runs, `control`, compiled with the system C compiler (`cc -O2 -Wall -o control
/// control.c`, plus `-lpthread` when the source includes `<pthread.h>`) when it is missing or
/// older than its source. The sandbox binds the folder read-only, so the helper must exist
/// before the case runs. It is written under a temporary name, made world-executable (the
/// sandbox user may be another host uid) and renamed into place, so a concurrent selftest never
/// runs a half-written one. A compile failure is a usage error naming the file, with the
/// compiler's output.
fn build_c_controls(fixtures: &Path) -> Result<(), Error> {
    static NEXT: std::sync::atomic::AtomicU64 = std::sync::atomic::AtomicU64::new(0);
    let unreadable = |p: &Path, e: std::io::Error| Error::Usage(format!("{}: {e}", p.display()));
    let mut sources: Vec<PathBuf> = std::fs::read_dir(fixtures)
        .map_err(|e| unreadable(fixtures, e))?
        .filter_map(|entry| entry.ok())
        .map(|entry| entry.path().join("control.c"))
        .filter(|src| src.is_file())
        .collect();
    sources.sort();
    let modified = |p: &Path| std::fs::metadata(p).and_then(|m| m.modified()).ok();
    for src in sources {
        let dir = src.parent().unwrap_or(fixtures);
        let out = dir.join("control");
        if let (Some(s), Some(o)) = (modified(&src), modified(&out)) {
            if o >= s {
                continue;
            }
        }
        let text = std::fs::read_to_string(&src).map_err(|e| unreadable(&src, e))?;
        let tmp = dir.join(format!(
            ".control.tmp-{}-{}",
            std::process::id(),
            NEXT.fetch_add(1, std::sync::atomic::Ordering::Relaxed)
        ));
        let mut cc = std::process::Command::new("cc");
        cc.args(["-O2", "-Wall", "-o"]).arg(&tmp).arg(&src);
        if text.contains("<pthread.h>") {
            cc.arg("-lpthread");
        }
        let built = cc.stdin(std::process::Stdio::null()).output();
        let failed = match built {
            Ok(o) if o.status.success() => None,
            Ok(o) => Some(format!(
                "cc -O2 -Wall failed ({}):\n{}",
                o.status,
                String::from_utf8_lossy(&o.stderr).trim_end()
            )),
            Err(e) => Some(format!("cannot run cc: {e}")),
        };
        if let Some(why) = failed {
            let _ = std::fs::remove_file(&tmp);
            return Err(Error::Usage(format!(
                "cannot build the C control {}: {why}",
                src.display()
            )));
        }
        let mode = <std::fs::Permissions as std::os::unix::fs::PermissionsExt>::from_mode(0o755);
        if let Err(e) =
            std::fs::set_permissions(&tmp, mode).and_then(|()| std::fs::rename(&tmp, &out))
        {
            let _ = std::fs::remove_file(&tmp);
            return Err(unreadable(&out, e));
        }
    }
    Ok(())
}

fn tally(id: &str, version: u32, controls: &Controls, cases: &[CaseResult]) -> Tally {
    let mut t = Tally {
        id: id.to_string(),
        version,
        ..Tally::default()
    };
    for case in &controls.cases {
        let Some(want) = case.expect.get(id) else {
            continue;
        };
        let result = cases.iter().find(|c| c.name == case.name);
        if result.is_some_and(|r| r.skipped.is_some()) {
            continue;
        }
        let got = result.and_then(|c| c.outcomes.get(id));
        let flagged = got == Some(&Outcome::Flag);
        match (want.as_str(), flagged) {
            ("flag", true) => t.tp += 1,
            ("flag", false) => t.fn_ += 1,
            ("pass", false) if got == Some(&Outcome::Pass) => t.tn += 1,
            ("pass", _) => t.fp += 1,
            // What the check could not read: saying so is right; a pass there is a false
            // assurance and a flag a false accusation.
            ("not-observed", _) if got == Some(&Outcome::NotObserved) => t.tn += 1,
            ("not-observed", _) => {
                t.fp += 1;
                if got == Some(&Outcome::Pass) {
                    t.blind += 1;
                }
            }
            ("todo-flag", false) | ("todo-pass", true) => t.todo += 1,
            _ => {}
        }
    }
    // A check that says `pass` over what it could not read would say it in an audit too: it
    // proves nothing, whatever its positive controls did.
    t.proven = t.fn_ == 0 && t.blind == 0 && t.tp > 0;
    t
}

impl CaseResult {
    /// A control whose microVM guest was lost: a miss that says why, and counts for no
    /// check (see [`CaseResult::lost`]).
    fn lost(case: &Case, why: String) -> CaseResult {
        CaseResult {
            name: case.name.clone(),
            outcomes: BTreeMap::new(),
            verdict: None,
            misses: vec![format!("its guest was lost: {why}")],
            todo: Vec::new(),
            lost: vec![why],
            recorder: String::new(),
            skipped: None,
        }
    }
}

/// Runs a control. A control whose guest was lost is a miss with the reason, not an error:
/// the other controls' results are kept.
fn run_case(case: &Case, opts: &Options, lib: &Path, scratch: &Path) -> Result<CaseResult, Error> {
    if let Some(why) = opts
        .isolation
        .expected_recorder(opts.recorder)
        .and_then(|r| not_for(case, r).map(|why| (r, why)))
    {
        return Ok(CaseResult::skipped(case, why.0, why.1));
    }
    let dir = opts.fixtures.join(&case.dir);
    let dir =
        std::fs::canonicalize(&dir).map_err(|source| Error::Evidence { path: dir, source })?;
    let mut o = AuditOptions::new(case.command.iter().map(Into::into).collect(), dir);
    o.extra_ro = vec![std::fs::canonicalize(lib).unwrap_or_else(|_| lib.to_path_buf())];
    let evidence = scratch.join(&case.name);
    let _ = std::fs::remove_dir_all(&evidence);
    o.evidence_dir = Some(evidence);
    o.recorder = opts.recorder;
    o.isolation = opts.isolation;
    o.recorder_ring = case.ring.map(|b| b as usize);
    if let Some(words) = &case.triggers {
        o.triggers = crate::triggers::parse(words, crate::triggers::DEFAULT_CLOCK_DAYS)
            .map_err(|e| Error::Internal(format!("{}: {e}", case.name)))?;
    }
    // As a client configuration gets it (`--config`): a variable named like a secret is the
    // user's declared secret, given a canary, its value in the header aside.
    o.server_env = case
        .env
        .iter()
        .map(|(k, v)| {
            let value = if glassbox_plan::config::secret_name(k) {
                glassbox_plan::config::EnvValue::secret()
            } else {
                glassbox_plan::config::EnvValue::Plain(v.clone())
            };
            (k.clone(), value)
        })
        .collect();
    // A fixture targets only documentation addresses: one stands in for the metadata address
    // (the checks read the address from the manifest, so what is proven is the same).
    o.metadata_probe = crate::METADATA_STAND_IN;
    o.session.request_timeout = opts.request_timeout;
    o.session.session_timeout = Duration::from_secs(60);
    // The selftest is what proves the checks: it judges their raw outcomes.
    o.proofs = Some(Proofs::all_proven());
    let a = match audit(&o, &Quiet) {
        Ok(a) => a,
        Err(Error::GuestLost(why)) => return Ok(CaseResult::lost(case, why)),
        Err(e) => return Err(e),
    };
    if let Some(vm) = a
        .evidence
        .manifest
        .vm
        .as_ref()
        .filter(|v| !v.lost.is_empty())
    {
        return Ok(CaseResult::lost(case, vm.lost.join("; ")));
    }
    // A case that attempts network traffic must have run behind a verified edge in every run
    // (the audit refuses to start a server otherwise; this says so if that ever changed).
    if case.network {
        let runs = &a.evidence.manifest.network.runs;
        if runs.is_empty() || !runs.iter().all(|r| r.isolation_verified) {
            return Err(Error::Internal(format!(
                "{}: a network control ran without a verified isolated edge",
                case.name
            )));
        }
    }
    let recorder = recorder_key(&a.evidence.manifest.recorder.mechanism);
    // A guest that chose its recorder itself (`auto` in a microVM) chose another.
    if let Some(why) = not_for(case, recorder) {
        return Ok(CaseResult::skipped(case, recorder, why));
    }
    let mut r = CaseResult {
        name: case.name.clone(),
        outcomes: BTreeMap::new(),
        verdict: Some(a.report.verdict),
        misses: Vec::new(),
        todo: Vec::new(),
        lost: Vec::new(),
        recorder: recorder.into(),
        skipped: None,
    };
    for (id, want) in &case.expect {
        let got = a
            .report
            .checks
            .iter()
            .find(|c| &c.id == id)
            .map(|c| c.outcome);
        if let Some(g) = got {
            r.outcomes.insert(id.clone(), g);
        }
        let ok = match want.as_str() {
            "flag" => got == Some(Outcome::Flag),
            "pass" => got == Some(Outcome::Pass),
            "not-observed" => got == Some(Outcome::NotObserved),
            _ => {
                let gap = match want.as_str() {
                    "todo-flag" => got != Some(Outcome::Flag),
                    _ => got == Some(Outcome::Flag),
                };
                if gap {
                    r.todo
                        .push(format!("{id}: known gap ({want}), got {got:?}"));
                }
                true
            }
        };
        if !ok {
            // Why it said what it said, where it says (a `not-observed` names what it lost; a
            // flag, what it found: a miss on a loaded machine is then diagnosable from its
            // line alone, its evidence being gone with the scratch folder).
            let check = a.report.checks.iter().find(|c| &c.id == id);
            let found: Vec<String> = check
                .map(|c| c.findings.iter().take(3))
                .into_iter()
                .flatten()
                .map(|f| glassbox_model::truncate(&glassbox_model::printable(&f.summary), 300))
                .collect();
            let why = match (check.and_then(|c| c.reason.as_deref()), found.is_empty()) {
                (Some(w), _) => format!(" ({w})"),
                (None, false) => format!(" (found: {})", found.join("; ")),
                (None, true) => String::new(),
            };
            r.misses
                .push(format!("{id}: expected {want}, got {got:?}{why}"));
        }
    }
    let want_verdict = case.verdict.as_str();
    let got_verdict = serde_json::to_value(a.report.verdict)
        .ok()
        .and_then(|v| v.as_str().map(String::from))
        .unwrap_or_default();
    if got_verdict != want_verdict {
        // What made the verdict: the reason, else each flagging check with its first finding.
        let flagged: Vec<String> = a
            .report
            .checks
            .iter()
            .filter(|c| c.outcome == Outcome::Flag)
            .map(|c| {
                let first = c.findings.first().map_or(String::new(), |f| {
                    glassbox_model::truncate(&glassbox_model::printable(&f.summary), 300)
                });
                format!("{}: {first}", c.id)
            })
            .collect();
        let why = match (a.report.inconclusive_reason.as_deref(), flagged.is_empty()) {
            (Some(x), _) => format!(" ({x})"),
            (None, false) => format!(" (flagged by {})", flagged.join("; ")),
            (None, true) => String::new(),
        };
        r.misses.push(format!(
            "verdict {got_verdict}, expected {want_verdict}{why}"
        ));
    }
    Ok(r)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A control of `check` that expects `want` of it: a Python server, no network, verdict
    /// `clean` (the tests set what they are about).
    fn control(name: &str, check: &str, want: &str) -> Case {
        Case {
            name: name.into(),
            dir: name.into(),
            command: vec!["python3".into(), "server.py".into()],
            expect: [(check.to_string(), want.to_string())].into(),
            verdict: "clean".into(),
            network: false,
            env: BTreeMap::new(),
            ring: None,
            triggers: None,
        }
    }

    fn record(isolation: Isolation, only: &[&str]) -> Record {
        Record {
            build: build_id(),
            glassbox_version: glassbox_model::GLASSBOX_VERSION.into(),
            created_at: "2026-12-04T00:00:00Z".into(),
            recorder: "notify".into(),
            isolation: isolation.name().into(),
            checks: glassbox_checks::registry()
                .iter()
                .map(|c| Tally {
                    id: c.info.id.into(),
                    version: c.info.version,
                    tp: 1,
                    tn: 1,
                    proven: true,
                    ..Tally::default()
                })
                .collect(),
            cases: Vec::new(),
            only: only.iter().map(|s| s.to_string()).collect(),
        }
    }

    fn proven(p: &Proofs) -> bool {
        !p.by_check.is_empty() && p.by_check.iter().all(|(_, r)| r.is_ok())
    }

    /// A record proves audits of its own isolation and recorder only, and only when every
    /// control ran: one made with `--only` proves nothing, whatever its tallies say.
    #[test]
    fn a_record_proves_its_own_isolation_and_recorder_and_only_when_whole() {
        let dir = std::env::temp_dir().join(format!("gb-selftest-proofs-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let at = |name: &str, r: &Record| {
            let p = dir.join(name);
            std::fs::write(&p, serde_json::to_vec(r).unwrap()).unwrap();
            p
        };
        let (ns, vm) = (Isolation::Namespace, Isolation::MicroVm);
        let vm_rec = at("vm.json", &record(vm, &[]));
        assert!(proven(&proofs_from(&vm_rec, vm, "notify")));
        let p = proofs_from(&vm_rec, ns, "notify");
        assert!(p.by_check.is_empty() && p.missing.is_some(), "{p:?}");
        let ns_rec = at("ns.json", &record(ns, &[]));
        assert!(proven(&proofs_from(&ns_rec, ns, "notify")));
        assert!(!proven(&proofs_from(&ns_rec, vm, "notify")));
        // Made with seccomp notification: it proves nothing for audits the eBPF channel
        // recorded.
        let p = proofs_from(&ns_rec, ns, "ebpf");
        assert!(p.by_check.is_empty(), "{p:?}");
        assert!(p.missing.unwrap().contains("--recorder ebpf"));
        let partial = at("partial.json", &record(ns, &["docker-sock"]));
        let p = proofs_from(&partial, ns, "notify");
        assert!(p.by_check.is_empty() && p.missing.is_some(), "{p:?}");
        let mut other = record(ns, &[]);
        other.build = "another build".into();
        assert!(!proven(&proofs_from(
            &at("other.json", &other),
            ns,
            "notify"
        )));
        let _ = std::fs::remove_dir_all(&dir);
    }

    #[test]
    fn the_recorder_key_is_what_recorded_the_file_calls() {
        assert_eq!(recorder_key("seccomp-user-notify"), "notify");
        assert_eq!(
            recorder_key("seccomp-user-notify + ebpf (open and stat families)"),
            "ebpf"
        );
        assert_eq!(
            Isolation::MicroVm.expected_recorder(RecorderChoice::Auto),
            None
        );
        assert_eq!(
            Isolation::MicroVm.expected_recorder(RecorderChoice::Ebpf),
            Some("ebpf")
        );
    }

    /// A control the check cannot read that comes back `pass` is a false assurance: the
    /// check is not proven, even with every positive control firing.
    #[test]
    fn a_pass_over_what_a_check_cannot_read_leaves_it_unproven() {
        let case = |name: &str, want: &str| Case {
            network: true,
            ..control(name, "doh", want)
        };
        let got = |name: &str, o: Outcome| CaseResult {
            name: name.into(),
            outcomes: [("doh".to_string(), o)].into(),
            verdict: None,
            misses: Vec::new(),
            todo: Vec::new(),
            lost: Vec::new(),
            recorder: "notify".into(),
            skipped: None,
        };
        let controls = Controls {
            checks: vec!["doh".into()],
            cases: vec![case("fires", "flag"), case("pinned", "not-observed")],
        };
        let said = |o: Outcome| {
            tally(
                "doh",
                1,
                &controls,
                &[got("fires", Outcome::Flag), got("pinned", o)],
            )
        };
        let t = said(Outcome::NotObserved);
        assert!(t.proven && t.tn == 1 && t.blind == 0, "{t:?}");
        let t = said(Outcome::Pass);
        assert!(!t.proven && t.blind == 1 && t.fp == 1 && t.tp == 1, "{t:?}");
        // A flag there is a false accusation: counted, but no false assurance.
        let t = said(Outcome::Flag);
        assert!(t.proven && t.blind == 0 && t.fp == 1, "{t:?}");
    }

    /// A control of the eBPF channel's ring runs only where that channel records; skipped,
    /// it counts for no check (neither a miss nor a proof).
    #[test]
    fn a_control_of_the_ebpf_ring_is_skipped_under_another_recorder_and_counts_for_nothing() {
        let mut case = Case {
            verdict: "inconclusive".into(),
            ring: Some(4096),
            ..control("flood", "persistence", "not-observed")
        };
        assert!(not_for(&case, "ebpf").is_none());
        let why = not_for(&case, "notify").unwrap();
        assert!(
            why.contains("4096 bytes") && why.contains("notify"),
            "{why}"
        );
        let controls = Controls {
            checks: vec!["persistence".into()],
            cases: vec![case.clone()],
        };
        let skipped = CaseResult::skipped(&case, "notify", why);
        let t = tally("persistence", 1, &controls, &[skipped]);
        assert_eq!((t.tp, t.tn, t.fp, t.fn_, t.blind), (0, 0, 0, 0, 0), "{t:?}");
        // Not skipped and silent, it is a false assurance as any.
        let mut ran = CaseResult::skipped(&case, "ebpf", String::new());
        ran.skipped = None;
        ran.outcomes.insert("persistence".into(), Outcome::Pass);
        let t = tally("persistence", 1, &controls, &[ran]);
        assert_eq!((t.fp, t.blind), (1, 1), "{t:?}");
        case.ring = None;
        assert!(not_for(&case, "notify").is_none());
    }

    /// A control whose guest was lost is a miss that says why, and proves nothing: its
    /// check's positive control did not fire, so the check is unproven.
    #[test]
    fn a_control_whose_guest_was_lost_is_a_miss_and_its_check_unproven() {
        let case = Case {
            command: vec!["node".into(), "server.js".into()],
            verdict: "flagged".into(),
            ..control("reads-key", "credential-probe", "flag")
        };
        let lost = CaseResult::lost(&case, "the guest hung: nothing sent for 30 s".into());
        assert_eq!(
            lost.misses,
            ["its guest was lost: the guest hung: nothing sent for 30 s"]
        );
        assert_eq!(lost.lost, ["the guest hung: nothing sent for 30 s"]);
        let controls = Controls {
            checks: vec!["credential-probe".into()],
            cases: vec![case],
        };
        let t = tally("credential-probe", 1, &controls, &[lost]);
        assert!(!t.proven && t.fn_ == 1 && t.tp == 0, "{t:?}");
    }

    #[test]
    fn only_keeps_the_named_controls_in_order_and_refuses_an_unknown_name() {
        let controls = Controls::load(&default_fixtures()).unwrap();
        let names: Vec<String> = controls.cases.iter().map(|c| c.name.clone()).collect();
        let picked = vec![names[3].clone(), names[1].clone()];
        let kept = only(controls.cases.clone(), &picked).unwrap();
        assert_eq!(
            kept.iter().map(|c| &c.name).collect::<Vec<_>>(),
            vec![&names[1], &names[3]]
        );
        let Err(Error::Usage(why)) = only(
            controls.cases,
            &[names[0].clone(), "no-such-control".into()],
        ) else {
            panic!("an unknown name was accepted");
        };
        assert!(
            why.contains("no-such-control") && !why.contains(&names[0]),
            "{why}"
        );
    }
}
