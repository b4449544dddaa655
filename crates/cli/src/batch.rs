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
//!
//! `--shard K/N` audits only the targets of shard K of N (0-based: Kubernetes'
//! `$JOB_COMPLETION_INDEX` as it is): each target belongs to exactly one shard, decided by a hash
//! of the target alone (not its place in the list, nor the other targets), so N processes on N
//! machines given the same list and store share the work without talking to each other.

use anyhow::{Context, Result};
use glassbox_audit::{AuditOptions, Progress};
use glassbox_model::{printable, Phase, Verdict};
use glassbox_plan::batch::Job;
use glassbox_plan::config::Vars;
use glassbox_registry::batch::{Done, Outcome, Shard, Watch};
use glassbox_store::StoreLocation;
use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};
use std::collections::BTreeMap;
use std::path::PathBuf;
use std::sync::Mutex;
use std::time::{Duration, Instant};

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
    /// The store (default as for `audit`): a SQLite file, or a PostgreSQL URL
    /// (postgres://USER:PASSWORD@HOST/DB) that batches on other machines write too.
    #[arg(long, value_name = "FILE|URL")]
    store: Option<StoreLocation>,
    /// Audit only shard K of N (0 <= K < N; K 0-based, as Kubernetes' $JOB_COMPLETION_INDEX):
    /// the targets whose hash falls in it. Every target is in exactly one shard, whatever the
    /// order of the list.
    #[arg(long, value_name = "K/N", value_parser = Shard::parse)]
    shard: Option<Shard>,
    /// Where the evidence bundles go, one folder per target (default
    /// ./glassbox-evidence/batch-<unix time>-<pid>/).
    #[arg(long, value_name = "DIR")]
    evidence: Option<PathBuf>,
    /// No progress on stderr (the summary is still printed).
    #[arg(long, short)]
    quiet: bool,
    #[command(flatten)]
    run: crate::args::RunArgs,
}

/// One line of the summary.
struct Row {
    /// Its place in the list (1-based), whichever shard runs it.
    number: usize,
    /// The target's label as the lines and the summary show it (60 characters, the part that tells
    /// it from the others kept: [`distinct`]).
    shown: String,
    version: Option<String>,
    outcome: Outcome,
    /// `None` when nothing ran.
    took: Option<Duration>,
}

/// What the workers show: the bar, and a line per target done.
struct Shared {
    bar: ProgressBar,
    /// Running targets: index → what the bar shows of it.
    running: Mutex<BTreeMap<usize, String>>,
    quiet: bool,
    width: usize,
    /// By a target's index: its label as the bar shows it (40 characters) and as lines show
    /// it (60), each keeping what tells it from the others ([`distinct`]).
    shown: BTreeMap<usize, (String, String)>,
}

impl Shared {
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

    /// The labels of target `index` (every target of the batch has them): as the bar shows
    /// it, as lines show it.
    fn labels(&self, index: usize) -> (String, String) {
        self.shown.get(&index).cloned().unwrap_or_default()
    }

    fn finished(&self, index: usize, outcome: &Outcome) {
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
            outcome.verdict(),
            self.labels(index).1,
            match outcome {
                Outcome::Audited { .. } | Outcome::Skipped { .. } => outcome.detail(),
                _ => short(&outcome.detail(), 200),
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

/// The bar and the lines of a batch as it runs.
impl Watch for Shared {
    fn started(&self, index: usize, _: &Job) {
        self.set(index, self.labels(index).0);
    }

    fn progress<'a>(&'a self, index: usize) -> Box<dyn Progress + 'a> {
        Box::new(JobProgress {
            shared: self,
            index,
        })
    }

    fn done(&self, d: &Done) {
        self.finished(d.index, &d.outcome);
    }
}

/// The phases of one audit, shown in the bar.
struct JobProgress<'a> {
    shared: &'a Shared,
    index: usize,
}

impl Progress for JobProgress<'_> {
    fn phase(&self, phase: &Phase) {
        let label = self.shared.labels(self.index).0;
        self.shared.set(
            self.index,
            format!("{label}: {}", printable(&phase.to_string())),
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

/// Each of `labels` made to fit `width` characters, keeping the part that tells it from the
/// others: what every label starts with (up to a `/` or a space: `-- /path/python
/// /path/run.py /path/`) is left out of a label too long to show whole (`…a/server.py`); what
/// is still too long keeps its first and last characters, the middle elided.
fn distinct(labels: &[&str], width: usize) -> Vec<String> {
    let chars: Vec<Vec<char>> = labels.iter().map(|l| l.chars().collect()).collect();
    // What the labels too long to show whole have in common (the others are shown whole).
    let long: Vec<&Vec<char>> = chars.iter().filter(|c| c.len() > width).collect();
    let mut common = match long.as_slice() {
        [] | [_] => 0,
        [first, more @ ..] => more.iter().fold(first.len(), |n, c| {
            n.min(
                c.iter()
                    .zip(first.iter())
                    .take_while(|(a, b)| a == b)
                    .count(),
            )
        }),
    };
    // Whole words and path components: back off to just after a separator.
    while common > 0 && !matches!(long[0][common - 1], '/' | ' ') {
        common -= 1;
    }
    chars
        .iter()
        .map(|c| {
            if c.len() <= width {
                return c.iter().collect();
            }
            let (lead, rest) = match common {
                0 => ("", &c[..]),
                n if c.len() <= n => ("", &c[..]),
                n => ("…", &c[n..]),
            };
            let budget = width.saturating_sub(lead.chars().count());
            if rest.len() <= budget {
                return format!("{lead}{}", rest.iter().collect::<String>());
            }
            let head = budget.saturating_sub(1) / 2 + budget.saturating_sub(1) % 2;
            let tail = budget.saturating_sub(1) / 2;
            format!(
                "{lead}{}…{}",
                rest[..head].iter().collect::<String>(),
                rest[rest.len() - tail..].iter().collect::<String>()
            )
        })
        .collect()
}

/// Runs the batch; returns the exit status.
pub(crate) fn run(args: BatchArgs, cwd: PathBuf, vars: &dyn Vars) -> Result<i32> {
    let all = glassbox_plan::batch::load(&args.file, &cwd, vars)?;
    let total = all.len();
    // This shard's targets, each with its place in the whole list.
    let jobs: Vec<(usize, Job)> = all
        .into_iter()
        .enumerate()
        .filter(|(_, job)| args.shard.is_none_or(|s| s.holds(job)))
        .collect();
    let workers = args
        .jobs
        .unwrap_or_else(|| std::thread::available_parallelism().map_or(1, |n| n.get()))
        .clamp(1, jobs.len().max(1));
    let store = match args.store {
        Some(p) => p,
        None => glassbox_store::StoreLocation::from_env()?,
    };
    // A store that cannot be opened fails the batch before anything runs.
    glassbox_store::Store::open_location(&store)
        .with_context(|| format!("cannot open the store {}", store.display()))?;
    let scope = args.shard.map(|s| (s, total));
    if jobs.is_empty() {
        // A shard can hold nothing of a short list: it is done.
        out!("{}", summary(&[], Duration::ZERO, workers, scope));
        return Ok(0);
    }
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
    args.run.apply(&mut base)?;
    args.run.ensure_selftest(workers.max(2), args.quiet)?;

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
    let width = total.to_string().len();
    let shared = Shared {
        bar,
        running: Mutex::new(BTreeMap::new()),
        quiet: args.quiet,
        width,
        shown: {
            let labels: Vec<String> = jobs.iter().map(|(_, j)| printable(&j.label)).collect();
            let labels: Vec<&str> = labels.iter().map(String::as_str).collect();
            let bar = distinct(&labels, 40);
            let lines = distinct(&labels, 60);
            jobs.iter()
                .zip(bar.into_iter().zip(lines))
                .map(|((n, _), shown)| (*n, shown))
                .collect()
        },
    };
    if !args.quiet {
        eprintln!(
            "glassbox: {}, {workers} at a time; evidence in {}",
            targets(jobs.len(), scope),
            evidence.display()
        );
    }
    let batch = glassbox_registry::batch::Batch {
        base: &base,
        store: &store,
        evidence: glassbox_registry::batch::Evidence::Named(&evidence),
        pin: true,
        resume: !args.force,
        keep_audits: false,
        checks: glassbox_checks::versions(),
        width,
    };
    let start = Instant::now();
    let done = glassbox_registry::batch::run(&batch, &jobs, workers, &shared);
    let elapsed = start.elapsed();
    shared.bar.finish_and_clear();
    let rows: Vec<Row> = done
        .into_iter()
        .map(|d| Row {
            number: d.index + 1,
            shown: shared.labels(d.index).1,
            version: d.version,
            outcome: d.outcome,
            took: d.took,
        })
        .collect();
    out!("{}", summary(&rows, elapsed, workers, scope));
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

/// `3 targets`, or with `--shard`: `shard 0/2: 3 of 6 targets`.
fn targets(n: usize, scope: Option<(Shard, usize)>) -> String {
    match scope {
        None => plural(n, "target"),
        Some((shard, total)) => format!("shard {shard}: {n} of {}", plural(total, "target")),
    }
}

/// The summary table and the totals (of the shard, with `scope`: which and of how many
/// targets).
fn summary(
    rows: &[Row],
    elapsed: Duration,
    workers: usize,
    scope: Option<(Shard, usize)>,
) -> String {
    let cells: Vec<[String; 6]> = rows
        .iter()
        .map(|r| {
            [
                r.number.to_string(),
                r.shown.clone(),
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
        targets(rows.len(), scope),
        elapsed.as_secs_f64(),
        of(Verdict::Clean),
        of(Verdict::Flagged),
        of(Verdict::Withheld),
        of(Verdict::Inconclusive),
        count(&|o| matches!(o, Outcome::Skipped { .. })),
        count(&|o| matches!(o, Outcome::NotAudited(_))),
        plural(
            count(&|o| matches!(o, Outcome::Failed(_) | Outcome::Unrecorded { .. })),
            "error"
        ),
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
    fn labels_show_what_tells_them_apart() {
        let long = |t: &str| {
            format!("-- /root/.pyenv/versions/3.11.7/bin/python3 /work/main/fixtures/lib/run.py /work/main/fixtures/{t}/server.py")
        };
        let labels = [
            long("reads-ssh-key"),
            long("benign-echo"),
            "npm:a@1.0.0".to_string(),
        ];
        let refs: Vec<&str> = labels.iter().map(String::as_str).collect();
        for width in [40, 60] {
            let shown = distinct(&refs, width);
            assert!(
                shown.iter().all(|s| s.chars().count() <= width),
                "{shown:?}"
            );
            assert_ne!(shown[0], shown[1], "{shown:?}");
            assert!(shown[0].contains("reads-ssh-key"), "{shown:?}");
            assert!(shown[1].contains("benign-echo"), "{shown:?}");
            assert_eq!(shown[2], "npm:a@1.0.0");
        }
        // Labels alike to their last characters keep both ends.
        let a = format!("npm:{}a", "x".repeat(80));
        let b = format!("npm:{}b", "x".repeat(80));
        let shown = distinct(&[&a, &b], 40);
        assert!(
            shown[0].ends_with('a') && shown[1].ends_with('b'),
            "{shown:?}"
        );
        assert_eq!(
            distinct(&["é".repeat(50).as_str()], 10)[0].chars().count(),
            10
        );
    }

    #[test]
    fn the_summary_has_a_row_per_target_and_totals() {
        let rows = vec![
            Row {
                number: 1,
                shown: "npm:a@1.0.0".into(),
                version: Some("1.0.0".into()),
                outcome: Outcome::Audited {
                    id: 7,
                    verdict: Verdict::Clean,
                },
                took: Some(Duration::from_millis(12_300)),
            },
            Row {
                number: 2,
                shown: "-- python3 bomb/server.py".into(),
                version: None,
                outcome: Outcome::Audited {
                    id: 8,
                    verdict: Verdict::Inconclusive,
                },
                took: Some(Duration::from_secs(16)),
            },
            Row {
                number: 3,
                shown: "npm:b".into(),
                version: Some("2.0.0".into()),
                outcome: Outcome::Skipped {
                    id: 3,
                    verdict: Verdict::Flagged,
                },
                took: None,
            },
            Row {
                number: 4,
                shown: "pypi:gone".into(),
                version: None,
                outcome: Outcome::Failed("cannot resolve pypi:gone\nto a version".into()),
                took: None,
            },
        ];
        let text = summary(&rows, Duration::from_secs(30), 2, None);
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

    #[test]
    fn a_shards_summary_says_which_and_of_how_many() {
        let rows = vec![Row {
            number: 5,
            shown: "npm:a@1.0.0".into(),
            version: Some("1.0.0".into()),
            outcome: Outcome::Skipped {
                id: 7,
                verdict: Verdict::Clean,
            },
            took: None,
        }];
        let scope = Some((Shard::parse("1/3").unwrap(), 9));
        let text = summary(&rows, Duration::from_secs(1), 1, scope);
        let lines: Vec<&str> = text.lines().collect();
        assert!(lines[1].starts_with("5  npm:a@1.0.0"), "{text}");
        assert!(
            lines[2].starts_with("shard 1/3: 1 of 9 targets in 1.0s"),
            "{text}"
        );
        let empty = summary(&[], Duration::ZERO, 1, scope);
        assert!(
            empty
                .lines()
                .nth(1)
                .unwrap()
                .starts_with("shard 1/3: 0 of 9 targets in 0.0s"),
            "{empty}"
        );
    }
}
