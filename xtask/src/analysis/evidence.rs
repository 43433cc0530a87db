//! Which runs are evidence, decided once per judgement: the evidence rule
//! (`results::problems`) applied to every record, the usable ones kept and the
//! others listed with why. The verdict, the tables and the plots all read this
//! one value.

use super::judgement::LeftOut;
use crate::{
    analysis::expected::Expected,
    results::{
        problems::{disagreements, problems},
        record::RunRecord,
        witness::Tolerance,
    },
};

/// One record with what the evidence rule found in it.
#[derive(Debug, Clone)]
pub struct Checked<'a> {
    pub record: &'a RunRecord,
    /// Why it is not evidence; empty for a usable run.
    pub problems: Vec<String>,
    /// Its witness agrees with the detectors exactly, without the slack the
    /// expectations allow (a description of the slack used).
    pub exact_witness: bool,
}

/// Every record, checked.
#[derive(Debug, Clone, Default)]
pub struct Evidence<'a> {
    /// In the records' order.
    pub runs: Vec<Checked<'a>>,
}

impl<'a> Evidence<'a> {
    /// Applies the evidence rule to `records` (the witness tolerance is
    /// `expected`'s).
    pub fn of(records: &'a [RunRecord], expected: &Expected) -> Evidence<'a> {
        let exact = Tolerance { abs: 0, rel: 0.0 };
        Evidence {
            runs: records
                .iter()
                .map(|r| Checked {
                    record: r,
                    problems: problems(r, &expected.witness),
                    exact_witness: disagreements(r, &exact).is_empty(),
                })
                .collect(),
        }
    }

    /// The usable records, in their order.
    pub fn usable(&self) -> impl Iterator<Item = &'a RunRecord> + '_ {
        self.runs
            .iter()
            .filter(|c| c.problems.is_empty())
            .map(|c| c.record)
    }

    /// Each record left out, with why.
    pub fn left_out(&self) -> Vec<LeftOut> {
        self.runs
            .iter()
            .filter(|c| !c.problems.is_empty())
            .map(|c| LeftOut {
                run: c.record.id.clone(),
                problems: c.problems.clone(),
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::{expected, rec};

    #[test]
    fn sleeps_left_unclassed_beyond_one_per_writer_make_a_run_no_evidence() {
        let with = |module_unclassed: u64, trace_unended: u64| {
            let mut r = rec("v1", "fuse-strictlimit", 100.0, 0.0);
            r.job.numjobs = 4;
            r.detection.mechanism.throttle_sleeps += module_unclassed;
            r.detection.witness.throttle_sleeps = r.detection.mechanism.throttle_sleeps;
            r.detection.tracefs = Some(crate::results::tracefs::Detected {
                throttle_sleeps: r.detection.mechanism.throttle_sleeps,
                unended_sleeps: trace_unended,
                bg_starts: r.detection.mechanism.bg_starts,
                ..Default::default()
            });
            let records = [r];
            Evidence::of(&records, &expected())
                .left_out()
                .iter()
                .map(|x| x.to_string())
                .collect::<Vec<_>>()
        };
        // At most one sleep per writer in progress when the counts were read.
        assert_eq!(with(4, 4), Vec::<String>::new());
        let e = with(5, 0);
        assert!(
            e[0].contains("the module classed 1000 of 1005 throttle sleeps (5 with no end seen"),
            "{e:?}"
        );
        let e = with(0, 5);
        assert!(
            e[0].contains("the tracefs detector could not class 5 of 1000 throttle sleeps"),
            "{e:?}"
        );
    }

    #[test]
    fn a_run_with_a_problem_is_left_out_and_named() {
        let mut bad = rec("v1", "fuse-strictlimit", 100.0, 0.0);
        bad.id.run = 1;
        bad.boot.dmesg_warnings = vec![
            "[ 2.0] ------------[ cut here ]------------".into(),
            "[ 2.0] WARNING: mm/x.c:1 at balance_dirty_pages+0x1/0x2, CPU#0: fio/9".into(),
        ];
        let records = [rec("v1", "fuse-strictlimit", 100.0, 0.0), bad];
        let e = Evidence::of(&records, &expected());
        assert_eq!(e.usable().count(), 1);
        let left_out = e.left_out();
        assert_eq!(left_out.len(), 1);
        assert_eq!(left_out[0].run, records[1].id);
        assert!(
            left_out[0].to_string().starts_with(
                "fuse-strictlimit/v1 #2: warning: dmesg has 2 warning line(s), first in \
                 balance_dirty_pages+0x1/0x2: [ 2.0] WARNING: mm/x.c:1"
            ),
            "{left_out:?}"
        );
        // The witness agreed exactly in both.
        assert!(e.runs.iter().all(|c| c.exact_witness));
    }
}
