//! Every regression case under `regressions/` re-evaluated with the current checks, as
//! `glassbox recheck` does: each named check must give its expected outcome. A case is the
//! evidence of a real run that some check once got wrong, with what it should have said.

use glassbox_audit::coverage::{default_regressions, regressions};
use glassbox_audit::recheck::recheck;
use glassbox_checks::Proofs;
use glassbox_model::Outcome;

#[test]
fn every_regression_case_gives_its_expected_outcomes() {
    let cases = regressions(&default_regressions()).expect("regressions/ readable");
    assert!(!cases.is_empty(), "no regression case found");
    let mut misses = Vec::new();
    for (dir, expected) in &cases {
        assert!(
            !expected.why.is_empty(),
            "{}: say why the case exists",
            dir.display()
        );
        let r = recheck(dir, &Proofs::all_proven()).expect("bundle re-evaluates");
        assert!(r.events > 0, "{}: no events", dir.display());
        for (id, want) in &expected.checks {
            let got = r
                .report
                .checks
                .iter()
                .find(|c| &c.id == id)
                .map(|c| c.outcome);
            let ok = match want.as_str() {
                "flag" => got == Some(Outcome::Flag),
                "pass" => got == Some(Outcome::Pass),
                other => panic!("{}: unknown expectation {other}", dir.display()),
            };
            if !ok {
                misses.push(format!(
                    "{} {id}: expected {want}, got {got:?}",
                    dir.display()
                ));
            }
        }
    }
    assert!(misses.is_empty(), "{}", misses.join("\n"));
}
