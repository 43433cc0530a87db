//! The KCIDB status of each planned run of a session (`kcidb`'s tests): its
//! own outcome when it has a usable record, else why it has none.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::{bail, Result};

use crate::{
    analysis::{
        expected::Class,
        judgement::{CellVerdict, RunVerdict},
    },
    guest::{outcome::VmErrorKind, run_id::RunId},
    results::{record::RunRecord, session::BootError},
};

/// A KCIDB test status: the run's own outcome.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum KcidbStatus {
    /// No stall: the writers were throttled and writeback ran.
    Pass,
    /// The writers stalled in balance_dirty_pages().
    Fail,
    /// Measured, neither: between the ok and the stall lines.
    Done,
    /// The writers were never throttled: nothing was exercised.
    Skip,
    /// Booted, but no usable record: the boot failed, or its record was left
    /// out of the verdict.
    Error,
    /// Planned, but neither a record nor a failed boot (another shard's run,
    /// an interrupted session).
    Miss,
}

/// A run's own outcome, from the class it was observed in (whatever it was
/// expected to be: that is the issues' business).
pub fn outcome(class: Class) -> KcidbStatus {
    match class {
        Class::Stall => KcidbStatus::Fail,
        Class::Ok => KcidbStatus::Pass,
        Class::Unclear | Class::Mixed => KcidbStatus::Done,
        Class::Idle => KcidbStatus::Skip,
    }
}

/// Whether a boot failed because the kernel under test crashed (an oops,
/// a panic, a hang: [`VmErrorKind::crashed`]); the others ran it to user
/// space, or are no guest's (a stream that makes no record).
pub fn crashed(why: &BootError) -> bool {
    why.kind().is_some_and(VmErrorKind::crashed)
}

/// The status of a run's `boot` test: PASS when the kernel ran the job (a
/// record, usable or not; a failure in user space), FAIL when it crashed,
/// ERROR when the boot failed otherwise (QEMU, the harness), MISS when the
/// run never booted.
pub fn boot_status(r: &RunStatus) -> KcidbStatus {
    match (r.record, r.status) {
        (Some(_), _) => KcidbStatus::Pass,
        (None, KcidbStatus::Miss) => KcidbStatus::Miss,
        (None, _) if r.failed.iter().any(|w| crashed(w)) => KcidbStatus::Fail,
        (None, _) if (r.failed.iter()).any(|w| w.kind().is_some_and(VmErrorKind::ran_the_job)) => {
            KcidbStatus::Pass
        }
        (None, _) => KcidbStatus::Error,
    }
}

/// The kind of a crash (the first, when the boot failed more than once) and
/// the console's lines of each, as the failures quote them: the part of the
/// KCIDB test that says what the kernel did (`log_excerpt`).
pub fn crash(r: &RunStatus) -> Option<(VmErrorKind, String)> {
    let crashes: Vec<&&BootError> = r.failed.iter().filter(|w| crashed(w)).collect();
    let kind = crashes.first()?.kind()?;
    let lines: Vec<String> = crashes.iter().map(|w| w.to_string()).collect();
    Some((kind, lines.join("\n").chars().take(16_000).collect()))
}

/// A planned run's status, its judgement and record if it has them, and why.
#[derive(Debug)]
pub struct RunStatus<'a> {
    pub run: RunId,
    pub status: KcidbStatus,
    pub verdict: Option<&'a RunVerdict<'a>>,
    pub record: Option<&'a RunRecord>,
    /// Whether it held its cell's expectation (in the expected class, no
    /// criterion failed on it); None without a usable record or expectation.
    pub held: Option<bool>,
    pub why: Vec<String>,
    /// Why its boot left no record, if it did not (`why` says it too).
    pub failed: Vec<&'a BootError>,
}

/// Why single runs have no usable record, by the run.
pub type ByRun = BTreeMap<RunId, Vec<String>>;

/// `why` of each run, gathered by the run.
pub fn by_run<'a, T>(lines: impl IntoIterator<Item = (&'a RunId, T)>) -> BTreeMap<RunId, Vec<T>> {
    let mut out = BTreeMap::new();
    for (run, why) in lines {
        out.entry(run.clone()).or_insert_with(Vec::new).push(why);
    }
    out
}

/// What the statuses of a session's runs are made from.
pub struct Seen<'a> {
    /// Runs left out of the verdict, and why.
    pub left_out: ByRun,
    /// Boots without a record, and why.
    pub failed: BTreeMap<RunId, Vec<&'a BootError>>,
    /// Every record, usable or not.
    pub records: BTreeMap<RunId, &'a RunRecord>,
}

/// Every run of one cell, planned or seen, with its status: a usable run its
/// [`outcome`], a run left out of the verdict (`left_out`) or without a
/// record (`failed`) ERROR, any other planned run MISS.
pub fn run_statuses<'a>(
    cell: Option<&'a CellVerdict>,
    (scenario, variant): (&str, &str),
    planned: u32,
    seen: &Seen<'a>,
) -> Result<Vec<RunStatus<'a>>> {
    let mut runs: BTreeSet<u32> = (0..planned).collect();
    runs.extend(
        cell.iter()
            .flat_map(|c| c.run_verdicts.iter().map(|r| r.id().run)),
    );
    let listed = seen.left_out.keys().chain(seen.failed.keys());
    runs.extend(
        listed
            .filter(|id| id.in_cell(scenario, variant))
            .map(|id| id.run),
    );
    let mut out = Vec::new();
    for run in runs {
        let key = RunId::new(scenario, variant, run);
        let usable =
            cell.and_then(|c| Some((c, c.run_verdicts.iter().find(|r| r.id().run == run)?)));
        let record = seen.records.get(&key).copied();
        let left_out = seen.left_out.get(&key).cloned();
        let failed = seen.failed.get(&key).cloned();
        let said = |f: &[&BootError]| f.iter().map(|w| w.to_string()).collect();
        let (status, verdict, held, why) = match (usable, left_out, failed.as_deref()) {
            (Some((c, r)), None, None) => usable_status(c, r),
            (None, Some(why), None) => (KcidbStatus::Error, None, None, why),
            // The kernel under test crashed: its failure, not the test's.
            (None, None, Some(f)) if f.iter().any(|w| crashed(w)) => {
                (KcidbStatus::Fail, None, None, said(f))
            }
            (None, None, Some(f)) => (KcidbStatus::Error, None, None, said(f)),
            (None, None, None) => (
                KcidbStatus::Miss,
                None,
                None,
                vec![format!(
                    "planned ({planned} runs a cell), but neither recorded nor failed"
                )],
            ),
            _ => bail!(
                "{key} is listed more than once (a usable run, a run left out, a boot \
                 without a record): the results directory contradicts itself"
            ),
        };
        out.push(RunStatus {
            run: key,
            status,
            verdict,
            record,
            held,
            why,
            failed: failed.unwrap_or_default(),
        });
    }
    Ok(out)
}

/// A usable run's status, judgement, whether it held, and why it did not.
fn usable_status<'a>(
    c: &'a CellVerdict<'a>,
    r: &'a RunVerdict<'a>,
) -> (
    KcidbStatus,
    Option<&'a RunVerdict<'a>>,
    Option<bool>,
    Vec<String>,
) {
    let mut why: Vec<String> = (c.failures_of_run(r.id().run).into_iter())
        .map(|f| f.why.clone())
        .collect();
    let held = c.run_passed(r);
    if let (Some(e), Some(false)) = (c.expected, held) {
        if r.class != e.class {
            why.insert(0, format!("expected {e}, observed {}", r.class));
        }
    }
    (outcome(r.class), Some(r), held, why)
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::{
        judgement::Verdict,
        verdict::{
            tests::{expected, plan, rec},
            verdict_of,
        },
    };
    use crate::results::session::BootFailure;

    /// The statuses of every run of `variant`'s fuse-strictlimit cell.
    fn statuses<'a>(
        v: &'a Verdict,
        records: &'a [RunRecord],
        failures: &[BootFailure],
        variant: &str,
    ) -> Vec<(KcidbStatus, Option<bool>)> {
        let seen = Seen {
            left_out: by_run(v.left_out.iter().map(|x| (&x.run, x.problems.join("; ")))),
            failed: by_run(failures.iter().map(|f| (&f.run, &f.why))),
            records: records.iter().map(|r| (r.id.clone(), r)).collect(),
        };
        let cell = v.cells.iter().find(|c| c.variant() == variant);
        let runs = run_statuses(cell, ("fuse-strictlimit", variant), 4, &seen).unwrap();
        runs.iter().map(|r| (r.status, r.held)).collect()
    }

    fn at(mut r: RunRecord, run: u32) -> RunRecord {
        r.id.run = run;
        r
    }

    /// A run's status is its own outcome (a stall FAILs, ok PASSes, whatever
    /// was expected); whether it held its expectation is said beside it. A run
    /// left out or a boot without a record is ERROR, a planned run of neither
    /// MISS.
    #[test]
    fn each_run_is_its_own_outcome_and_says_whether_it_held() {
        let mut disagrees = rec("v1", "fuse-strictlimit", 195.0, 0.0);
        crate::test_support::set_trace(&mut disagrees, Some((0.03, 0.0)));
        let mut warned = rec("v1", "fuse-strictlimit", 190.0, 0.0);
        warned.boot.dmesg_warnings = vec!["WARNING: CPU: 0 PID: 1 at mm/x.c:1".into()];
        let records = [
            at(rec("regressed", "fuse-strictlimit", 1.0, 0.7), 0),
            at(rec("regressed", "fuse-strictlimit", 190.0, 0.0), 1),
            at(rec("v1", "fuse-strictlimit", 200.0, 0.0), 0),
            at(disagrees, 1),
            at(warned, 2),
            at(rec("v9", "fuse-strictlimit", 200.0, 0.0), 0),
        ];
        let mut p = plan(&records, 4);
        p.variants
            .extend(["v2".to_string(), "upstream".to_string()]);
        let v = verdict_of(&records, &expected(), &p);
        let failure = |variant: &str, run: u32, why: &str| BootFailure {
            run: RunId::new("fuse-strictlimit", variant, run),
            why: why.into(),
        };
        let failures = [failure("v1", 3, "QEMU exited with 1")];
        use KcidbStatus::*;
        // #1 stalls as expected: FAIL, held; #2 is ok where a stall is expected.
        assert_eq!(
            statuses(&v, &records, &failures, "regressed"),
            [
                (Fail, Some(true)),
                (Pass, Some(false)),
                (Miss, None),
                (Miss, None)
            ]
        );
        // #2 is ok, but the detectors disagree on it; #3 has a kernel warning.
        assert_eq!(
            statuses(&v, &records, &failures, "v1"),
            [
                (Pass, Some(true)),
                (Pass, Some(false)),
                (Error, None),
                (Error, None)
            ]
        );
        assert_eq!(
            statuses(&v, &records, &failures, "v9"),
            [(Pass, None), (Miss, None), (Miss, None), (Miss, None)]
        );
        assert_eq!(
            statuses(&v, &records, &failures, "v2"),
            vec![(Miss, None); 4]
        );
        assert_eq!(outcome(Class::Idle), Skip);
        assert_eq!(outcome(Class::Unclear), Done);
    }
}
