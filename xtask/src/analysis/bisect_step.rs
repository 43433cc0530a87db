//! A bisect step's run judged ([`judge_step`]) as `qemu-test` judges a
//! cell, and the row of the table of steps it comes to ([`StepRow`]).

use serde::{Deserialize, Serialize};

use crate::{
    analysis::{
        expected::{Class, Expected},
        judgement::{Planned, Verdict},
        verdict,
    },
    results::record::RunRecord,
};

/// Which end point of the bisect a row measured.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum EndPoint {
    Good,
    Bad,
}

/// One row of the table of steps.
#[derive(Debug, Clone, Serialize, Deserialize, PartialEq)]
pub struct StepRow {
    pub commit: String,
    pub subject: String,
    /// `ok`, `stall`, or `skip: <why>`.
    pub verdict: String,
    pub stall_share: Option<f64>,
    pub mib_s: Option<f64>,
    pub seconds: f64,
    pub exit: i32,
    /// The end point this row measured (none: a step of git bisect run).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub end: Option<EndPoint>,
}

/// The variant name of every step's kernel: the commit as checked out (plus
/// `--patch`). Not one of patches/variants.toml: its expectation is
/// set per judgement ([`judge_step`]).
pub const VARIANT: &str = "bisect";

/// What a step came to: `git bisect run`'s exit code and the row's numbers.
#[derive(Debug, Clone, PartialEq)]
pub struct StepResult {
    /// 0 (ok), 1 (stall), 125 (skip) or 200 (abort).
    pub exit: i32,
    /// `ok`, `stall`, `skip: <why>` or `abort: <why>`.
    pub verdict: String,
    pub stall_share: Option<f64>,
    pub mib_s: Option<f64>,
    /// Why the run is no evidence (the verdict's `left_out`), said as the
    /// step runs; empty for a usable run.
    pub left_out: Vec<String>,
}

/// Judges a step's run(s) with [`verdict::verdict_of`], as `qemu-test` judges a
/// cell: a one-cell plan, the repository's expectations, and the cell's
/// expectation set to `ok`; if that verdict passes, the step is good (0).
/// Else it is judged again against `stall`; if that passes, bad (1). Else
/// skip (125), with the failures of both. A run that is no evidence
/// (`problems::problems`, the verdict's `left_out`) is a skip too.
pub fn judge_step(records: &[RunRecord], expected: &Expected, scenario: &str) -> StepResult {
    let plan = Planned {
        variants: vec![VARIANT.to_string()],
        scenarios: vec![scenario.to_string()],
        runs: 1,
        ..Planned::default()
    };
    let against = |class: Class| {
        let mut e = expected.clone();
        e.expect
            .entry(scenario.to_string())
            .or_default()
            .insert(VARIANT.to_string(), class.into());
        verdict::verdict_of(records, &e, &plan)
    };
    let as_ok = against(Class::Ok);
    let cell = as_ok.cells.first();
    let judged = |exit: i32, verdict: String| StepResult {
        exit,
        verdict,
        stall_share: cell.map(|c| c.stall_fraction()),
        mib_s: cell.map(|c| c.bw_mib_s()),
        left_out: (as_ok.left_out.iter())
            .flat_map(|x| x.problems.clone())
            .collect(),
    };
    if as_ok.passed() {
        return judged(0, "ok".into());
    }
    if !as_ok.left_out.is_empty() {
        return judged(
            125,
            format!(
                "skip: the run is no evidence: {}",
                (as_ok.left_out.iter().map(|x| x.to_string()))
                    .collect::<Vec<_>>()
                    .join("; ")
            ),
        );
    }
    let as_stall = against(Class::Stall);
    if as_stall.passed() {
        return judged(1, "stall".into());
    }
    let observed = cell.map_or("nothing".to_string(), |c| c.observed.to_string());
    judged(
        125,
        format!(
            "skip: observed {observed}, which passes neither as ok ({}) nor as stall ({})",
            failures(&as_ok),
            failures(&as_stall)
        ),
    )
}

/// Why a verdict did not pass, in one line.
fn failures(v: &Verdict) -> String {
    let missing = v.missing.iter().map(|m| m.to_string());
    let left_out = v.left_out.iter().map(|x| x.to_string());
    let cells = v
        .cells
        .iter()
        .flat_map(|c| &c.failures)
        .map(|f| f.to_string());
    let all: Vec<String> = missing.chain(left_out).chain(cells).collect();
    all.join("; ")
}

#[cfg(test)]
pub(crate) mod tests {
    use std::fs;

    use super::*;
    use crate::{analysis::expected, test_support::rec, util};

    /// A row of the table of steps, for the tests.
    pub fn row(verdict: &str, share: Option<f64>, bw: Option<f64>, exit: i32) -> StepRow {
        StepRow {
            commit: "9a90d87d923962f0aa".into(),
            subject: "mm: restore".into(),
            verdict: verdict.into(),
            stall_share: share,
            mib_s: bw,
            seconds: 61.0,
            exit,
            end: None,
        }
    }

    #[test]
    fn a_step_is_judged_as_a_qemu_test_cell_against_the_repository_expectations() {
        let file = util::project_root().join(expected::EXPECTED_FILE);
        let text = fs::read_to_string(&file).unwrap();
        let e = expected::load_expectations(&text, &file, &[]).unwrap();
        let step = |r: RunRecord| {
            let scenario = r.id.scenario.clone();
            judge_step(&[r], &e, &scenario)
        };
        let ok = step(rec(VARIANT, "fuse-strictlimit", 200.0, 0.0));
        assert_eq!((ok.exit, ok.verdict.as_str()), (0, "ok"));
        let mut bad = rec(VARIANT, "memcg-ext4", 1.0, 0.4);
        bad.detection.mechanism.max_call_ms = 5_000;
        let bad = step(bad);
        assert_eq!((bad.exit, bad.verdict.as_str()), (1, "stall"));
        assert_eq!((bad.stall_share, bad.mib_s), (Some(0.4), Some(1.0)));
        // The stronger rule: a stall share whose writers never waited long
        // (no balance_dirty_pages() call reached the scenario's latency
        // bound) is no `bad`, on FUSE and under a memcg alike.
        let mut quick = rec(VARIANT, "memcg-ext4", 1.0, 0.4);
        quick.detection.mechanism.max_call_ms = 300;
        assert_eq!(step(quick).exit, 125);
        let mut quick = rec(VARIANT, "fuse-strictlimit", 1.0, 0.4);
        quick.detection.mechanism.max_call_ms = 300;
        let j = step(quick);
        assert_eq!(j.exit, 125, "{j:?}");
        assert!(
            j.verdict.starts_with(
                "skip: observed stall, which passes neither as ok (expected ok, observed stall"
            ) && j.verdict.contains(
                "nor as stall (run #1: stall by the sleep classes, but no writer spent more \
                 than 300 ms"
            ),
            "{}",
            j.verdict
        );
        // Between the thresholds: neither.
        let j = step(rec(VARIANT, "fuse-strictlimit", 100.0, 0.03));
        assert_eq!(j.exit, 125);
        assert!(
            j.verdict.starts_with("skip: observed unclear"),
            "{}",
            j.verdict
        );
        // A run that is no evidence is a skip, saying why.
        let mut r = rec(VARIANT, "fuse-strictlimit", 1.0, 0.7);
        r.boot.dmesg_warnings = vec!["WARNING: CPU: 0 PID: 1 at mm/x.c:1".into()];
        let j = step(r);
        assert_eq!(j.exit, 125);
        assert!(
            j.verdict.starts_with(
                "skip: the run is no evidence: fuse-strictlimit/bisect #1: warning: dmesg has 1 warning"
            ),
            "{}",
            j.verdict
        );
        // Its problems, said as the step runs, are the verdict's: the rule
        // runs once.
        assert_eq!(j.left_out.len(), 1, "{:?}", j.left_out);
        assert!(
            j.left_out[0].starts_with("warning: dmesg has 1 warning"),
            "{:?}",
            j.left_out
        );
        // A usable run has none.
        assert!(step(rec(VARIANT, "fuse-strictlimit", 100.0, 0.0))
            .left_out
            .is_empty());
    }
}
