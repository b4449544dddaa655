//! `glassbox review`: the findings awaiting a person's review, one shown whole, and the
//! decisions on them (`glassbox_registry::review`).

use anyhow::{Context, Result};
use clap::Subcommand;
use std::path::PathBuf;

/// `review` subcommands.
#[derive(Subcommand, Debug)]
pub(crate) enum ReviewAction {
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

/// `glassbox review …` over an open store.
pub(crate) fn review(
    s: &mut glassbox_store::Store,
    location: &glassbox_store::StoreLocation,
    action: ReviewAction,
) -> Result<i32> {
    use glassbox_model::printable;
    let reviewer = |r: Option<String>| {
        r.or_else(|| std::env::var("USER").ok())
            .unwrap_or_else(|| "unknown".into())
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
            let f = glassbox_registry::review::finding(s, id)?;
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
            glassbox_registry::review::accept(s, id, &reviewer(who), &note)?;
            outln!("finding {id} accepted: published");
        }
        ReviewAction::Reject {
            id,
            reason,
            reviewer: who,
            regressions,
        } => {
            use glassbox_registry::review::{self, Case};
            review::reject(s, id, &reviewer(who), &reason)?;
            outln!("finding {id} rejected: the audit is published without it");
            // The run becomes a regression case on which the check must pass once every
            // finding the check made in it is rejected (one it rightly made keeps it flagging).
            let check = review::finding(s, id)?.check_id;
            match review::regression_case(s, location, id, &reason, regressions)? {
                Case::CheckPublishedThere => {
                    outln!("no regression case: {check} has a published finding in this run")
                }
                Case::Pending(next) => outln!(
                    "the regression case is made once {check}'s other findings in this run are \
                     reviewed too (next: {next})"
                ),
                Case::Made(case) => outln!("regression case {}", case.display()),
            }
        }
    }
    Ok(0)
}
