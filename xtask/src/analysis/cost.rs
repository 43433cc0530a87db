//! What a kernel costs against another, metric by metric: each cost classed
//! `better`, `same`, `worse` or `undecided` against the smallest change that
//! matters, decided against the scenario's measured floor (the spread of one
//! run across the plan's start phases, `analysis::floor`), never against the
//! two or three runs' own spread alone.
//!
//! The rule, on the log scale of the metric's aggregate (`ln(b / a)`), with
//! `s = sd * sqrt(1/n_a + 1/n_b)` (`sd`: the larger of the floor's and the
//! two cells' pooled spread) and the interval `c ± Z s` (`c`: the change in
//! the direction that costs):
//!
//! - `worse`: the interval lies above half the smallest change that
//!   matters (δ/2): a cost of at least δ/2 at 1 - α/16 confidence;
//! - `better`: it lies below -δ/2;
//! - `same`: it lies inside (-δ, +δ): whatever it costs is less than δ;
//! - `undecided`: none of these; more runs narrow it (`next_runs`).
//!
//! δ is the larger of what the metric's users would call a change
//! ([`JUDGED`]) and what the scenario's floor can resolve at the run cap
//! ([`resolvable`]): a scenario whose runs spread by 7% cannot promise to see
//! 2%, and says so. Where that is more than [`RESOLVABLE_LIMIT`] times the
//! metric's own size, the metric is not judged there (`unresolvable`): a
//! `same` within ±300% would say nothing. How often this calls a same-kernel pair `worse`, and how
//! often it catches a known cost, is measured (`analysis::calibration`,
//! docs/measurements.md).

use serde::{Deserialize, Serialize};

use std::collections::BTreeMap;

use super::metrics;
use crate::results::floor::Floor;

/// Which way a metric costs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Worse {
    /// Less is worse (a rate).
    Lower,
    /// More is worse (a latency).
    Higher,
}

/// A metric a cost is judged on, and the smallest change of it that matters.
#[derive(Debug)]
pub struct Judged {
    pub key: &'static str,
    pub worse: Worse,
    /// The smallest change that matters, in % of the reference.
    pub smallest_pct: f64,
    /// Why that size.
    pub why: &'static str,
}

/// The metrics every cost is judged on.
pub const JUDGED: &[Judged] = &[
    Judged {
        key: "fio.write_bw_MiB/s",
        worse: Worse::Lower,
        smallest_pct: 2.0,
        why: "throughput: a writeback change that loses 2% of buffered-write throughput \
              is reported by 0-day as a regression",
    },
    Judged {
        key: "fio.clat_p99_ms",
        worse: Worse::Higher,
        smallest_pct: 10.0,
        why: "the 99th percentile of a write()'s latency: one throttle pause more or less \
              in a hundred writes moves it by about a tenth",
    },
    Judged {
        key: "fio.clat_max_ms",
        worse: Worse::Higher,
        smallest_pct: 25.0,
        why: "the longest write(): one event, which a single pause of a few jiffies moves \
              by a quarter",
    },
    Judged {
        key: "wbstall.max_call_ms",
        worse: Worse::Higher,
        smallest_pct: 25.0,
        why: "the longest balance_dirty_pages() call: one event, as clat max",
    },
];

/// How many times a metric's own smallest change a floor may need to
/// resolve, at most, for the metric to be judged in its scenario.
pub const RESOLVABLE_LIMIT: f64 = 10.0;

/// The most runs a side of a judged pair gets: the sequential runs stop
/// here, undecided or not.
pub const RUN_CAP: usize = 6;

/// The runs a judged pair starts with on each side.
pub const FIRST_RUNS: usize = 2;

/// The costs a default `--patch` verdict judges (4 scenarios x the metrics
/// of [`JUDGED`]): the family the confidence level is corrected for.
pub const FAMILY: usize = 16;

/// The verdict's error rate across its whole family, one-sided.
pub const FAMILY_ALPHA: f64 = 0.05;

/// The interval's half-width in standard errors: the one-sided normal
/// quantile at 1 - [`FAMILY_ALPHA`] / [`FAMILY`] (Bonferroni).
pub fn z() -> f64 {
    use statrs::distribution::{ContinuousCDF, Normal};
    // The standard normal: its parameters are valid.
    let n = Normal::standard();
    n.inverse_cdf(1.0 - FAMILY_ALPHA / FAMILY as f64)
}

/// The one-sided 95% normal quantile: how far past the interval a change at
/// the resolvable size lies, so that it is caught in 95% of tries.
fn z_power() -> f64 {
    use statrs::distribution::{ContinuousCDF, Normal};
    Normal::standard().inverse_cdf(0.95)
}

/// The smallest change (in %) a floor of `sd` (one run, log scale) can tell
/// from none at `runs` a side: a change of that size is called `worse` in
/// 95% of tries and a change of 0 `same`, under the floor's spread.
pub fn resolvable(sd: f64, runs: usize) -> f64 {
    let s = sd * (2.0 / runs as f64).sqrt();
    pct_of(2.0 * (z() + z_power()) * s)
}

/// A cost's class.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CostClass {
    Worse,
    Undecided,
    Same,
    Better,
    /// The floor cannot resolve the metric's changes at the run cap (more
    /// than [`RESOLVABLE_LIMIT`] times its smallest change): not judged.
    Unresolvable,
}

impl std::fmt::Display for CostClass {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(match self {
            CostClass::Worse => "worse",
            CostClass::Undecided => "undecided",
            CostClass::Same => "same",
            CostClass::Better => "better",
            CostClass::Unresolvable => "unresolvable",
        })
    }
}

/// Where the spread a cost was judged with came from.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Spread {
    /// The scenario's measured floor.
    Floor,
    /// The two cells' own runs, wider than the floor.
    Runs,
}

/// One metric's cost from `base` to `other`, judged.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Cost {
    pub metric: String,
    /// The aggregates' change, % (the tables' number).
    pub change_pct: f64,
    /// Its interval, %.
    pub lo_pct: f64,
    pub hi_pct: f64,
    /// The smallest change that matters here, % (δ).
    pub smallest_pct: f64,
    /// Runs on each side.
    pub runs: (usize, usize),
    /// One run's spread used (log scale), and where it came from.
    pub sd: f64,
    pub spread: Spread,
    pub class: CostClass,
    /// A `worse` within what the user accepted (`--accept-cost`): it does
    /// not fail the verdict.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub accepted_pct: Option<f64>,
    /// Why the class is not the rule's own (the A/A control disagreed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub note: Option<String>,
}

impl Cost {
    /// A `worse` that fails: not inside an accepted cost.
    pub fn fails(&self) -> bool {
        self.class == CostClass::Worse && self.accepted_pct.is_none()
    }
}

/// The rule's inputs besides the runs: the floor's spread of one run (log
/// scale), the smallest change that matters and an accepted cost, in %.
#[derive(Debug, Clone, Copy)]
pub struct Rule {
    pub floor_sd: f64,
    pub smallest_pct: f64,
    pub accepted_pct: Option<f64>,
}

impl Rule {
    /// The rule for `judged` under a floor of `floor_sd`: δ the larger of
    /// the metric's own and what the floor resolves at [`RUN_CAP`].
    pub fn of(judged: &Judged, floor_sd: f64, accepted_pct: Option<f64>) -> Rule {
        Rule {
            floor_sd,
            smallest_pct: judged.smallest_pct.max(resolvable(floor_sd, RUN_CAP)),
            accepted_pct,
        }
    }
}

/// ln(1 + p/100).
fn log_of(pct: f64) -> f64 {
    (pct / 100.0).ln_1p()
}

/// (e^l - 1) x 100.
fn pct_of(l: f64) -> f64 {
    l.exp_m1() * 100.0
}

/// The pooled standard deviation of the logs of two samples (None with
/// fewer than one degree of freedom, or a value that is not positive).
pub fn pooled_log_sd(a: &[f64], b: &[f64]) -> Option<f64> {
    let df = (a.len() + b.len()).checked_sub(2).filter(|&d| d > 0)?;
    let ss = |v: &[f64]| -> Option<f64> {
        let logs: Option<Vec<f64>> = v.iter().map(|&x| (x > 0.0).then(|| x.ln())).collect();
        let logs = logs?;
        if logs.is_empty() {
            return Some(0.0);
        }
        let m = logs.iter().sum::<f64>() / logs.len() as f64;
        Some(logs.iter().map(|l| (l - m).powi(2)).sum())
    };
    Some(((ss(a)? + ss(b)?) / df as f64).sqrt())
}

/// Judges the change of one metric from the runs `base` to the runs
/// `other`, by `judged`'s direction and `rule`; None where a side has no
/// run or an aggregate that is not positive (no ratio).
pub fn cost_of(judged: &Judged, base: &[f64], other: &[f64], rule: Rule) -> Option<Cost> {
    let metric = metrics::get(judged.key);
    let (a, b) = (metric.kind.aggregate(base)?, metric.kind.aggregate(other)?);
    if a <= 0.0 || b <= 0.0 {
        return None;
    }
    let l = (b / a).ln();
    let observed = pooled_log_sd(base, other);
    let (sd, spread) = match observed {
        Some(o) if o > rule.floor_sd => (o, Spread::Runs),
        _ => (rule.floor_sd, Spread::Floor),
    };
    let s = sd * (1.0 / base.len() as f64 + 1.0 / other.len() as f64).sqrt();
    let half = z() * s;
    // The change in the direction that costs.
    let c = match judged.worse {
        Worse::Lower => -l,
        Worse::Higher => l,
    };
    let delta = log_of(rule.smallest_pct);
    let class = if rule.smallest_pct > RESOLVABLE_LIMIT * judged.smallest_pct {
        CostClass::Unresolvable
    } else if c - half > delta / 2.0 {
        CostClass::Worse
    } else if c + half < -delta / 2.0 {
        CostClass::Better
    } else if c.abs() + half < delta {
        CostClass::Same
    } else {
        CostClass::Undecided
    };
    let accepted_pct = rule
        .accepted_pct
        .filter(|&acc| class == CostClass::Worse && c + half < log_of(acc));
    Some(Cost {
        metric: judged.key.to_string(),
        change_pct: pct_of(l),
        lo_pct: pct_of(l - half),
        hi_pct: pct_of(l + half),
        smallest_pct: rule.smallest_pct,
        runs: (base.len(), other.len()),
        sd,
        spread,
        class,
        accepted_pct,
        note: None,
    })
}

/// Judges every metric of [`JUDGED`] from `base` to `other` in one
/// scenario, by its `floor`, with the cost `accepted` there (%); a metric
/// without a value on a side, or without a spread in the floor, is left out.
pub fn judge_pair(
    base: &BTreeMap<String, Vec<f64>>,
    other: &BTreeMap<String, Vec<f64>>,
    floor: &Floor,
    accepted: Option<f64>,
) -> Vec<Cost> {
    let none = Vec::new();
    JUDGED
        .iter()
        .filter_map(|j| {
            let sd = *floor.sd.get(j.key)?;
            let (a, b) = (
                base.get(j.key).unwrap_or(&none),
                other.get(j.key).unwrap_or(&none),
            );
            cost_of(j, a, b, Rule::of(j, sd, accepted))
        })
        .collect()
}

/// The judged pairs that get one more run a side, each named by its key:
/// any with fewer than [`FIRST_RUNS`] a side (a cost is judged on them);
/// then, unless a cost already fails (the verdict is decided), those with an
/// undecided cost and fewer than [`RUN_CAP`]. `judged`: per pair, its key,
/// its costs and its runs a side (the fewer of the two).
pub fn extend<K: Copy>(judged: &[(K, &[Cost], usize)]) -> Vec<K> {
    let decided =
        (judged.iter()).any(|(_, c, runs)| *runs >= FIRST_RUNS && c.iter().any(Cost::fails));
    judged
        .iter()
        .filter(|(_, costs, runs)| {
            *runs < FIRST_RUNS
                || (!decided
                    && *runs < RUN_CAP
                    && costs.iter().any(|c| c.class == CostClass::Undecided))
        })
        .map(|(k, _, _)| *k)
        .collect()
}

/// The keys of [`JUDGED`]: what a floor measures.
pub fn keys() -> Vec<&'static str> {
    JUDGED.iter().map(|j| j.key).collect()
}

/// The metric of the registry `JUDGED` names by `key`.
pub fn judged(key: &str) -> Option<&'static Judged> {
    JUDGED.iter().find(|j| j.key == key)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn bw() -> &'static Judged {
        judged("fio.write_bw_MiB/s").unwrap()
    }

    fn rule(sd: f64) -> Rule {
        Rule::of(bw(), sd, None)
    }

    #[test]
    fn every_judged_metric_is_in_the_registry() {
        for j in JUDGED {
            assert_eq!(metrics::get(j.key).key, j.key);
        }
    }

    #[test]
    fn the_confidence_is_corrected_for_the_family() {
        // 1 - 0.05/16 one-sided.
        assert!((z() - 2.734).abs() < 0.001, "{}", z());
    }

    #[test]
    fn a_cost_well_past_the_smallest_change_is_worse_and_names_its_size() {
        let c = cost_of(bw(), &[50.0, 50.2], &[47.9, 48.1], rule(0.003)).unwrap();
        assert_eq!(c.class, CostClass::Worse, "{c:?}");
        assert!((c.change_pct + 4.2).abs() < 0.1, "{c:?}");
        assert!(c.lo_pct < c.change_pct && c.change_pct < c.hi_pct && c.hi_pct < -1.0);
        assert!(c.fails());
    }

    #[test]
    fn no_change_is_same_and_a_gain_is_better() {
        let same = cost_of(bw(), &[50.0, 50.2], &[50.1, 50.0], rule(0.003)).unwrap();
        assert_eq!(same.class, CostClass::Same, "{same:?}");
        let better = cost_of(bw(), &[50.0, 50.2], &[53.0, 53.1], rule(0.003)).unwrap();
        assert_eq!(better.class, CostClass::Better, "{better:?}");
        assert!(!better.fails());
    }

    #[test]
    fn a_change_the_floor_cannot_place_is_undecided() {
        // 1.5% down with a floor of 1% a run at 2 runs: neither surely past
        // 1% nor surely inside 2%.
        let c = cost_of(bw(), &[50.0, 50.0], &[49.25, 49.25], rule(0.004)).unwrap();
        assert_eq!(c.class, CostClass::Undecided, "{c:?}");
    }

    #[test]
    fn runs_wider_than_the_floor_widen_the_interval() {
        let tight = cost_of(bw(), &[50.0, 50.2], &[48.0, 48.2], rule(0.003)).unwrap();
        assert_eq!(
            (tight.spread, tight.class),
            (Spread::Floor, CostClass::Worse)
        );
        // The same means, runs 10% apart: the runs' own spread is used.
        let wide = cost_of(bw(), &[47.6, 52.6], &[45.7, 50.5], rule(0.003)).unwrap();
        assert_eq!(wide.spread, Spread::Runs, "{wide:?}");
        assert_ne!(wide.class, CostClass::Worse, "{wide:?}");
    }

    #[test]
    fn a_latency_costs_upwards() {
        let p99 = judged("fio.clat_p99_ms").unwrap();
        let r = Rule::of(p99, 0.02, None);
        assert_eq!(
            cost_of(p99, &[10.0, 10.1], &[13.0, 13.1], r).unwrap().class,
            CostClass::Worse
        );
        assert_eq!(
            cost_of(p99, &[10.0, 10.1], &[7.0, 7.1], r).unwrap().class,
            CostClass::Better
        );
    }

    #[test]
    fn the_smallest_change_grows_with_a_floor_that_cannot_resolve_it() {
        assert_eq!(rule(0.001).smallest_pct, 2.0);
        // A floor of 5% a run resolves about 25% at the cap.
        let wide = rule(0.05).smallest_pct;
        assert!(wide > 20.0 && wide < 30.0, "{wide}");
        assert!((resolvable(0.05, RUN_CAP) - wide).abs() < 1e-9);
    }

    #[test]
    fn a_floor_that_cannot_resolve_ten_times_the_smallest_change_is_not_judged() {
        // A floor of 31% a run (memcg-ext4's quick job across phases): a
        // halving is no verdict of the throughput's.
        let c = cost_of(bw(), &[30.0, 31.0], &[15.0, 15.5], rule(0.31)).unwrap();
        assert_eq!(c.class, CostClass::Unresolvable, "{c:?}");
        assert!(!c.fails() && c.smallest_pct > 20.0);
        // At the limit's edge a floor still judges.
        assert_ne!(
            cost_of(bw(), &[30.0, 31.0], &[15.0, 15.5], rule(0.03))
                .unwrap()
                .class,
            CostClass::Unresolvable
        );
    }

    #[test]
    fn an_accepted_cost_does_not_fail_unless_it_may_exceed_what_was_accepted() {
        let within = Rule::of(bw(), 0.003, Some(6.0));
        let c = cost_of(bw(), &[50.0, 50.2], &[48.0, 48.2], within).unwrap();
        assert_eq!((c.class, c.accepted_pct), (CostClass::Worse, Some(6.0)));
        assert!(!c.fails());
        let beyond = Rule::of(bw(), 0.003, Some(3.0));
        let c = cost_of(bw(), &[50.0, 50.2], &[48.0, 48.2], beyond).unwrap();
        assert!(c.fails(), "a 4% cost is not within an accepted 3%: {c:?}");
    }

    #[test]
    fn nothing_to_divide_is_no_cost() {
        assert!(cost_of(bw(), &[], &[1.0], rule(0.01)).is_none());
        assert!(cost_of(bw(), &[0.0, 0.0], &[1.0], rule(0.01)).is_none());
    }

    #[test]
    fn the_pooled_spread_needs_a_degree_of_freedom_and_positive_values() {
        assert_eq!(pooled_log_sd(&[1.0], &[2.0]), None);
        assert_eq!(pooled_log_sd(&[1.0, 0.0], &[2.0]), None);
        let sd = pooled_log_sd(&[1.0, std::f64::consts::E], &[1.0, 1.0]).unwrap();
        // ss = 0.5 (logs 0 and 1 about 0.5), df 2: sqrt(0.25).
        assert!((sd - 0.5).abs() < 1e-12, "{sd}");
    }
}
