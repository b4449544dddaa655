//! Many servers, a bounded pool of audits at a time: each package's version pinned (its exact
//! version found before it runs, the store's key for it), a version already audited with the
//! current checks skipped (so a batch run again resumes), each audit's bundle in a folder of
//! its own, each recorded in the store; and which shard of a list a target is in
//! (`glassbox batch --shard K/N`: by a hash of what it runs, whatever the order of the list).
//!
//! [`run`] is the loop; what a caller shows of it goes through [`Watch`].

use crate::Error;
use glassbox_audit::{AuditOptions, Progress};
use glassbox_model::{printable, CheckVersion, Verdict};
use glassbox_plan::batch::Job;
use glassbox_plan::config::Launch;
use glassbox_store::StoreLocation;
use sha2::{Digest, Sha256};
use std::path::{Path, PathBuf};
use std::sync::Mutex;
use std::time::{Duration, Instant};

/// What every audit of a batch shares.
#[derive(Debug)]
pub struct Batch<'a> {
    /// The options each target's audit starts from (its folder and entry set per target).
    pub base: &'a AuditOptions,
    /// The store each audit is recorded in (and looked up in, to resume).
    pub store: &'a StoreLocation,
    /// Where each target's bundle goes.
    pub evidence: Evidence<'a>,
    /// Find a package's exact version before its audit, and audit that version (what the
    /// store files it under).
    pub pin: bool,
    /// Skip a pinned version the store holds an audit of made with the current checks (so a
    /// batch run again resumes).
    pub resume: bool,
    /// Keep each audit in what [`run`] returns (its evidence in memory: for a few servers, a
    /// configuration's documents); otherwise it is dropped once the watch has seen it.
    pub keep_audits: bool,
    /// The current checks' versions (`glassbox_checks::versions()`).
    pub checks: Vec<CheckVersion>,
    /// Digits of a target's number in its folder's name (`07-npm-x`): those of the whole
    /// list's length.
    pub width: usize,
}

/// Where each target's evidence bundle goes.
#[derive(Clone, Copy, Debug)]
pub enum Evidence<'a> {
    /// A new folder per target in this one, named for it: `07-npm-x` (`-2`, `-3`... when that
    /// exists: a bundle is never written over another).
    Named(&'a Path),
    /// `1`, `2`... in this folder, by the target's place in the list.
    Numbered(&'a Path),
    /// Each audit's default (`./glassbox-evidence/<run-id>/`).
    Default,
}

/// What a caller is told of the targets as they run (from several threads).
pub trait Watch: Sync {
    /// Target `index` (its place in the whole list, 0-based) starts: it will be audited.
    fn started(&self, index: usize, job: &Job);
    /// The progress of its audit.
    fn progress<'a>(&'a self, index: usize) -> Box<dyn Progress + 'a>;
    /// It is done (its audit, when there was one, is in `done`).
    fn done(&self, done: &Done);
}

/// What became of one target.
#[derive(Debug)]
pub struct Done {
    /// Its place in the whole list (0-based), whichever shard runs it.
    pub index: usize,
    /// The package version audited (or found audited), when it is a package.
    pub version: Option<String>,
    /// How it ended.
    pub outcome: Outcome,
    /// How long its audit took; `None` when nothing ran.
    pub took: Option<Duration>,
    /// The previous audit of the same exact version, when the tool definitions changed since
    /// it: its id and what changed.
    pub changed: Option<(i64, Vec<String>)>,
    /// The audit, when one ran (kept by [`run`] only with [`Batch::keep_audits`]).
    pub audit: Option<Box<glassbox_audit::Audit>>,
}

/// Runs `jobs` (each with its place in the whole list), `workers` at a time; what became of
/// each, in the order of `jobs`.
pub fn run(
    batch: &Batch<'_>,
    jobs: &[(usize, Job)],
    workers: usize,
    watch: &dyn Watch,
) -> Vec<Done> {
    let next = Mutex::new(0usize);
    let done: Mutex<Vec<Option<Done>>> = Mutex::new((0..jobs.len()).map(|_| None).collect());
    std::thread::scope(|s| {
        for _ in 0..workers.max(1) {
            s.spawn(|| loop {
                let i = {
                    let mut n = next.lock().unwrap_or_else(|e| e.into_inner());
                    let i = *n;
                    *n += 1;
                    i
                };
                let Some((index, job)) = jobs.get(i) else {
                    break;
                };
                let mut d = one(batch, job, *index, watch);
                watch.done(&d);
                if !batch.keep_audits {
                    d.audit = None;
                }
                done.lock().unwrap_or_else(|e| e.into_inner())[i] = Some(d);
            });
        }
    });
    done.into_inner()
        .unwrap_or_else(|e| e.into_inner())
        .into_iter()
        .flatten()
        .collect()
}

/// Runs one target (`index` in the whole list) to what became of it, telling `watch`: planned
/// (a line glassbox cannot run is not audited), its version pinned and the store asked
/// whether it is audited already (as `batch` says), its bundle's folder made, audited,
/// recorded.
pub fn one(batch: &Batch<'_>, job: &Job, index: usize, watch: &dyn Watch) -> Done {
    let mut row = Done {
        index,
        version: None,
        outcome: Outcome::Failed(String::new()),
        took: None,
        changed: None,
        audit: None,
    };
    let mut base = batch.base.clone();
    base.cwd = job.cwd.clone();
    base.readme_config &= !job.configured;
    let mut planned = base.for_entry(&job.launch, &job.env, &job.names);
    if let glassbox_audit::Planned::NotAudited(why) = &planned {
        row.outcome = Outcome::NotAudited(why.clone());
        return row;
    }
    watch.started(index, job);
    match (&job.launch, &mut planned) {
        (Launch::Package { package, .. }, glassbox_audit::Planned::Local(o)) if batch.pin => {
            // The exact version first: what the store files the audit under (one asked for
            // exactly needs no registry to be looked up in the store; the audit then finds
            // whether it exists).
            let exact = match package
                .exact()
                .map_or_else(|| package.exact_versions(&job.cwd), Ok)
            {
                Ok(v) => v,
                Err(e) => {
                    row.outcome = Outcome::Failed(glassbox_model::error_line(&e));
                    return row;
                }
            };
            let version = exact.version.clone();
            row.version = Some(version.clone());
            if batch.resume {
                let target = package.spec.key();
                let found = glassbox_store::Store::open_location(batch.store)
                    .map_err(Error::from)
                    .and_then(|s| already_audited(&s, &target, &version, &batch.checks));
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
                        row.outcome = Outcome::Failed(format!(
                            "cannot read the store: {}",
                            glassbox_model::error_line(&e)
                        ));
                        return row;
                    }
                }
            }
            o.package = Some(package.pinned(&exact));
        }
        _ => {}
    }
    let dir = match batch.evidence {
        Evidence::Named(parent) => {
            let name = format!("{:0w$}-{}", index + 1, slug(&job.label), w = batch.width);
            match fresh_dir(parent, &name) {
                Ok(dir) => Some(dir),
                Err(e) => {
                    row.outcome = Outcome::Failed(format!("cannot make its evidence folder: {e}"));
                    return row;
                }
            }
        }
        Evidence::Numbered(parent) => Some(parent.join(format!("{}", index + 1))),
        Evidence::Default => None,
    };
    let remote = matches!(planned, glassbox_audit::Planned::Remote { .. });
    if let glassbox_audit::Planned::Local(o) | glassbox_audit::Planned::Remote { opts: o, .. } =
        &mut planned
    {
        if dir.is_some() {
            o.evidence_dir = dir;
        }
    }
    let progress = watch.progress(index);
    let start = Instant::now();
    let audit = planned.audit(progress.as_ref());
    row.took = Some(start.elapsed());
    row.outcome = match audit {
        // A remote server this version cannot speak to is not audited; one server that
        // cannot be audited does not stop the others.
        Err(e) if remote => Outcome::NotAudited(glassbox_model::error_line(&e)),
        Err(e) => Outcome::Failed(glassbox_model::error_line(&e)),
        Ok(a) => {
            if let Some(p) = &a.evidence.manifest.target.package {
                row.version = Some(p.version.clone());
            }
            let recorded = glassbox_store::Store::publish(
                batch.store,
                &a.report,
                &a.evidence.manifest,
                &a.evidence_dir,
            );
            let verdict = a.report.verdict;
            let outcome = match recorded {
                Ok(glassbox_store::Published { id, changed }) => {
                    row.changed = changed;
                    Outcome::Audited { id, verdict }
                }
                Err(e) => Outcome::Unrecorded {
                    verdict,
                    error: glassbox_model::error_line(&e),
                    evidence: a.evidence_dir.clone(),
                },
            };
            row.audit = Some(Box::new(a));
            outcome
        }
    };
    row
}

/// The newest audit of `target` at `version` made with exactly the checks `current`.
pub fn already_audited(
    store: &glassbox_store::Store,
    target: &str,
    version: &str,
    current: &[CheckVersion],
) -> Result<Option<glassbox_store::AuditRow>, Error> {
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

/// How one target ended.
#[derive(Clone, Debug)]
pub enum Outcome {
    /// Audited and recorded.
    Audited {
        /// Its id in the store.
        id: i64,
        /// Its verdict.
        verdict: Verdict,
    },
    /// Already in the store with the current checks: not audited again.
    Skipped {
        /// The id of the audit that stands for it.
        id: i64,
        /// Its verdict.
        verdict: Verdict,
    },
    /// Audited, but the store could not record it (the bundle is on disk).
    Unrecorded {
        /// Its verdict.
        verdict: Verdict,
        /// What the store said.
        error: String,
        /// Its bundle.
        evidence: PathBuf,
    },
    /// Nothing glassbox can run here (a container image, a remote server this version cannot
    /// speak to...).
    NotAudited(String),
    /// The audit could not be carried out.
    Failed(String),
}

impl Outcome {
    /// This target's share of the exit status.
    pub fn exit_code(&self) -> i32 {
        match self {
            Outcome::Audited { verdict, .. } | Outcome::Skipped { verdict, .. } => {
                verdict.exit_code()
            }
            Outcome::NotAudited(_) => Verdict::Inconclusive.exit_code(),
            // An error, unless the verdict says more (inconclusive).
            Outcome::Unrecorded { verdict, .. } => verdict.exit_code().max(2),
            Outcome::Failed(_) => 2,
        }
    }

    /// Its verdict's name, or `not audited`, `error`.
    pub fn verdict(&self) -> &'static str {
        match self {
            Outcome::Audited { verdict, .. } | Outcome::Skipped { verdict, .. } => verdict.name(),
            Outcome::NotAudited(_) => "not audited",
            Outcome::Unrecorded { .. } | Outcome::Failed(_) => "error",
        }
    }

    /// The audit's id, or why nothing was audited.
    pub fn detail(&self) -> String {
        match self {
            Outcome::Audited { id, .. } => format!("audit {id}"),
            Outcome::Skipped { id, .. } => format!("audit {id} (already audited)"),
            Outcome::Unrecorded {
                verdict,
                error,
                evidence,
            } => printable(&format!(
                "{} but not recorded in the store ({error}); evidence in {}",
                verdict.name(),
                evidence.display()
            )),
            Outcome::NotAudited(why) | Outcome::Failed(why) => printable(why),
        }
    }
}

/// One share of a batch: `index` of `count`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct Shard {
    index: u64,
    count: u64,
}

impl Shard {
    /// `K/N`, with 0 <= K < N.
    pub fn parse(text: &str) -> Result<Shard, String> {
        let bad = |why: &str| {
            format!(
                "{text:?}: {why}: --shard takes K/N, shard K of N with 0 <= K < N (K counts \
                 from 0, as $JOB_COMPLETION_INDEX)"
            )
        };
        let (k, n) = text
            .split_once('/')
            .ok_or_else(|| bad("no `/` between K and N"))?;
        let number = |s: &str, what: &str| {
            s.trim()
                .parse::<u64>()
                .map_err(|_| bad(&format!("{what} is not a whole number")))
        };
        let (index, count) = (number(k, "K")?, number(n, "N")?);
        if count == 0 {
            return Err(bad("N must be at least 1"));
        }
        if index >= count {
            return Err(bad(&format!(
                "K must be less than N (the shards of {count} are 0 to {})",
                count - 1
            )));
        }
        Ok(Shard { index, count })
    }

    /// Whether `job` is in this shard.
    pub fn holds(&self, job: &Job) -> bool {
        shard_of(job, self.count) == self.index
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// What identifies a target for sharding: what it runs, not how the line was spaced nor
/// where it is in the list. Fields are NUL-separated.
pub fn canonical(job: &Job) -> String {
    let join = |head: String, args: &[String]| {
        std::iter::once(head)
            .chain(args.iter().cloned())
            .collect::<Vec<_>>()
            .join("\0")
    };
    match &job.launch {
        Launch::Package { package, args } => {
            // A plain package keeps the text it always had; what a launcher added goes after.
            let mut head = format!("package\0{}", package.spec.display());
            for w in &package.with {
                head.push_str(&format!("\0with={}", w.display()));
            }
            if let Some(p) = package
                .program
                .as_ref()
                .filter(|p| **p != package.spec.name)
            {
                head.push_str(&format!("\0program={p}"));
            }
            join(head, args)
        }
        Launch::Command(argv) => join("command".into(), argv),
        Launch::Remote { url, transport } => format!("remote\0{transport}\0{url}"),
        Launch::Unsupported(_) => format!("unsupported\0{}", job.label),
    }
}

/// The shard (of `count`) `job` belongs to: the first 8 bytes of the SHA-256 of its
/// [`canonical`] text, big-endian, modulo `count`.
pub fn shard_of(job: &Job, count: u64) -> u64 {
    let hash = Sha256::digest(canonical(job).as_bytes());
    let mut first = [0u8; 8];
    first.copy_from_slice(&hash[..8]);
    u64::from_be_bytes(first) % count
}

/// A folder name for a target: its label's letters and digits, the rest as `-`.
pub fn slug(label: &str) -> String {
    let mut out = String::new();
    for c in label.chars() {
        if c.is_ascii_alphanumeric() || c == '.' || c == '_' {
            out.push(c);
        } else if !out.ends_with('-') {
            out.push('-');
        }
    }
    let out = out.trim_matches(|c| c == '-' || c == '.').to_string();
    // At most 60 characters (59 and no ellipsis when cut, as a label is shown).
    if out.chars().count() <= 60 {
        out
    } else {
        out.chars().take(59).collect()
    }
}

/// A new folder `<parent>/<name>`, or `<name>-2`, `-3`... when that exists (an earlier batch
/// with the same `--evidence`): a bundle is never written over another.
pub fn fresh_dir(parent: &Path, name: &str) -> std::io::Result<PathBuf> {
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

    fn job(line: &str) -> Job {
        let mut jobs = glassbox_plan::batch::parse_list(line, Path::new("/list")).unwrap();
        jobs.pop().unwrap()
    }

    #[test]
    fn shards_are_parsed_and_bad_ones_refused() {
        assert_eq!(Shard::parse("0/1"), Ok(Shard { index: 0, count: 1 }));
        assert_eq!(Shard::parse("3/4"), Ok(Shard { index: 3, count: 4 }));
        assert_eq!(Shard::parse("3/4").unwrap().to_string(), "3/4");
        for (bad, why) in [
            ("4/4", "K must be less than N (the shards of 4 are 0 to 3)"),
            ("1/0", "N must be at least 1"),
            ("0/0", "N must be at least 1"),
            ("-1/4", "K is not a whole number"),
            ("1", "no `/` between K and N"),
            ("a/b", "K is not a whole number"),
            ("1/x", "N is not a whole number"),
            ("", "no `/`"),
        ] {
            let err = Shard::parse(bad).unwrap_err();
            assert!(
                err.contains(why) && err.contains("--shard takes K/N"),
                "{bad}: {err}"
            );
        }
    }

    #[test]
    fn every_target_is_in_exactly_one_shard_whatever_the_list() {
        let lines: Vec<String> = (0..600)
            .map(|i| match i % 3 {
                0 => format!("npm:server-{i}@1.{i}.0"),
                1 => format!("pypi:tool-{i}==2.0 -- --port {i}"),
                _ => format!("-- python3 servers/s{i}.py"),
            })
            .collect();
        let jobs: Vec<Job> = lines.iter().map(|l| job(l)).collect();
        for count in [1u64, 2, 3, 7] {
            let shards: Vec<Shard> = (0..count).map(|index| Shard { index, count }).collect();
            let mut sizes = vec![0usize; count as usize];
            for j in &jobs {
                let holders: Vec<u64> = shards
                    .iter()
                    .filter(|s| s.holds(j))
                    .map(|s| s.index)
                    .collect();
                assert_eq!(holders.len(), 1, "{}: {holders:?}", j.label);
                sizes[holders[0] as usize] += 1;
            }
            // Roughly balanced: each shard within 30% of its fair share.
            let fair = jobs.len() as f64 / count as f64;
            assert!(
                sizes.iter().all(|&n| (n as f64 - fair).abs() <= 0.3 * fair),
                "{count} shards: {sizes:?}"
            );
        }
    }

    #[test]
    fn a_targets_shard_depends_on_it_alone() {
        // Stable across releases and machines: these values are part of how a batch is split.
        assert_eq!(shard_of(&job("npm:@scope/server@1.2.3"), 1), 0);
        let fixed: Vec<u64> = [
            "npm:@scope/server@1.2.3",
            "pypi:mcp-server-fetch",
            "-- python3 server.py",
        ]
        .iter()
        .map(|l| shard_of(&job(l), 1000))
        .collect();
        // = int.from_bytes(sha256(b"package\0npm:@scope/server@1.2.3").digest()[:8]) % 1000...
        assert_eq!(fixed, [365, 354, 275], "the split changed");
        // Not how the line is spaced, nor where the list is, nor what else is in it.
        let a = job("--   python3   server.py  --port 1");
        let b = job("-- python3 server.py --port 1");
        assert_eq!(canonical(&a), canonical(&b));
        let elsewhere = glassbox_plan::batch::parse_list(
            "npm:x@1.0.0\n-- python3 server.py --port 1\n",
            Path::new("/other"),
        )
        .unwrap();
        assert_eq!(shard_of(&elsewhere[1], 16), shard_of(&b, 16));
        // What it runs counts.
        assert_ne!(
            canonical(&a),
            canonical(&job("-- python3 server.py --port 2"))
        );
        assert_ne!(
            canonical(&job("npm:x@1.0.0")),
            canonical(&job("npm:x@1.0.1"))
        );
    }
}
