//! Which runs are evidence, decided once per judgement: the evidence rule
//! (`results::problems`) applied to every record, the usable ones kept and the
//! others listed with why. The verdict, the tables and the plots all read this
//! one value.

use crate::{
    analysis::expected::Expected,
    results::{
        problems::problems,
        record::{run_label, RunRecord},
    },
};

/// The records that are evidence, and the others with why not.
#[derive(Debug, Clone, Default)]
pub struct Evidence {
    /// The usable records, in their order.
    pub usable: Vec<RunRecord>,
    /// `<scenario>/<variant> #<run>: <problems>` of each record left out.
    pub excluded: Vec<String>,
}

impl Evidence {
    /// Applies the evidence rule to `records` (the witness tolerance is
    /// `expected`'s).
    pub fn of(records: &[RunRecord], expected: &Expected) -> Evidence {
        let mut e = Evidence::default();
        for r in records {
            let p = problems(r, &expected.witness);
            if p.is_empty() {
                e.usable.push(r.clone());
            } else {
                e.excluded.push(format!(
                    "{}: {}",
                    run_label(&r.scenario, &r.variant, r.run + 1),
                    p.join("; ")
                ));
            }
        }
        e
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::verdict::tests::{expected, rec};

    #[test]
    fn sleeps_left_unclassed_beyond_one_per_writer_make_a_run_no_evidence() {
        let with = |module_unclassed: u64, trace_unended: u64| {
            let mut r = rec("v1", "fuse-strictlimit", 100.0, 0.0);
            r.job.numjobs = 4;
            r.mechanism.throttle_sleeps += module_unclassed;
            r.witness.throttle_sleeps = r.mechanism.throttle_sleeps;
            r.tracefs = Some(crate::results::tracefs::Detected {
                throttle_sleeps: r.mechanism.throttle_sleeps,
                unended_sleeps: trace_unended,
                bg_starts: r.mechanism.bg_starts,
                ..Default::default()
            });
            Evidence::of(&[r], &expected()).excluded
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
        bad.run = 1;
        bad.dmesg_warnings = vec![
            "[ 2.0] ------------[ cut here ]------------".into(),
            "[ 2.0] WARNING: mm/x.c:1 at balance_dirty_pages+0x1/0x2, CPU#0: fio/9".into(),
        ];
        let e = Evidence::of(
            &[rec("v1", "fuse-strictlimit", 100.0, 0.0), bad],
            &expected(),
        );
        assert_eq!(e.usable.len(), 1);
        assert_eq!(e.excluded.len(), 1);
        assert!(
            e.excluded[0].starts_with(
                "fuse-strictlimit/v1 #2: warning: dmesg has 2 warning line(s), first in \
                 balance_dirty_pages+0x1/0x2: [ 2.0] WARNING: mm/x.c:1"
            ),
            "{:?}",
            e.excluded
        );
    }
}
