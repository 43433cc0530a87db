//! A cell's runs summed up, one aggregate per metric, the one of its kind
//! (`metrics::Kind::aggregate`: the harmonic mean for rates, the mean
//! otherwise), with the runs' spread and range: computed once per cell by
//! the verdict, read by every table, mail and plot.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};

use super::{metrics, stats};
use crate::results::record::RunRecord;

/// One metric over the runs of a cell.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Aggregate {
    /// Which aggregate `value` is (`harmonic mean`, `mean`).
    pub of: String,
    pub value: f64,
    /// The runs' sample standard deviation, in % of `value` (0 where the
    /// value is 0).
    pub stddev_pct: f64,
    /// Runs with a value.
    pub runs: usize,
    /// The lowest and the highest run (for the plots; not kept in
    /// `verdict.json`).
    #[serde(skip)]
    pub range: Option<(f64, f64)>,
}

/// Every metric's [`Aggregate`] over a cell's runs, by key; a metric none of
/// the runs has is absent.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
#[serde(transparent)]
pub struct Aggregates(BTreeMap<String, Aggregate>);

impl Aggregates {
    /// The aggregates of `runs`, metric by metric of the registry.
    pub fn of(runs: &[&RunRecord]) -> Aggregates {
        let mut out = BTreeMap::new();
        for m in metrics::ALL {
            let v = m.values(runs);
            let Some(value) = m.kind.aggregate(&v) else {
                continue;
            };
            let stddev_pct = if value != 0.0 {
                stats::stddev(&v) / value.abs() * 100.0
            } else {
                0.0
            };
            let range = v.iter().copied().fold(None, |r: Option<(f64, f64)>, x| {
                Some(r.map_or((x, x), |(lo, hi)| (lo.min(x), hi.max(x))))
            });
            out.insert(
                m.key.to_string(),
                Aggregate {
                    of: m.kind.aggregate_name().to_string(),
                    value,
                    stddev_pct,
                    runs: v.len(),
                    range,
                },
            );
        }
        Aggregates(out)
    }

    /// The aggregate of the metric `key`, if any run has the metric.
    pub fn get(&self, key: &str) -> Option<&Aggregate> {
        self.0.get(key)
    }

    /// Its value.
    pub fn value(&self, key: &str) -> Option<f64> {
        self.get(key).map(|a| a.value)
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::rec;

    #[test]
    fn each_metric_aggregates_by_its_kind_and_says_which() {
        let r = [
            rec("v1", "fuse-strictlimit", 100.0, 0.0),
            rec("v1", "fuse-strictlimit", 300.0, 0.02),
        ];
        let a = Aggregates::of(&r.iter().collect::<Vec<_>>());
        let bw = a.get("fio.write_bw_MiB/s").unwrap();
        assert_eq!(
            (bw.of.as_str(), bw.value, bw.runs),
            ("harmonic mean", 150.0, 2)
        );
        let share = a.get("wbstall.stall_share_%").unwrap();
        assert_eq!((share.of.as_str(), share.value), ("mean", 1.0));
        assert_eq!(bw.range, Some((100.0, 300.0)));
        // What no run has is absent, never a 0.
        assert_eq!(a.get("vmstat.nr_dirtied"), None);
    }
}
