//! How often the cost verdict is wrong, measured: whole `--patch` verdicts
//! replayed on pools of real runs (`analysis::floor::Pool`).
//!
//! A try is one verdict as the harness makes it: in every scenario, a pair
//! of [`FIRST_RUNS`] runs a side drawn without replacement from the pools,
//! judged metric by metric (`cost::judge_pair`), then one more run a side for
//! the scenarios still undecided ([`extend`]) until each decides or reaches
//! [`RUN_CAP`]. The try fails when any cost is `worse`.
//!
//! - The false-positive rate: both sides drawn from one kernel's runs (an
//!   A/A "patch"), judged by a floor measured on *other* runs of it (the
//!   pool is split in two halves of alternate phases; each half's floor
//!   judges pairs drawn from the other: no run judges itself).
//! - The power: the patch side drawn from a kernel with a known cost.

use std::collections::BTreeMap;

use rand::{seq::SliceRandom, SeedableRng};
use rand_chacha::ChaCha8Rng;

use super::{
    cost::{extend, judge_pair, Cost, CostClass, FIRST_RUNS, JUDGED},
    judgement::BW,
    metrics,
};
use crate::results::{
    floor::{Conditions, Floor, Pool, PoolRun},
    record::RunRecord,
};

/// A side's runs of one scenario: per run, the judged metrics' values.
pub type SideRuns = Vec<BTreeMap<String, f64>>;

/// What the tries came to.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Tally {
    pub tries: usize,
    /// Tries with a `worse` cost.
    pub failed: usize,
    /// Tries that ended with an undecided cost at the cap.
    pub undecided: usize,
    /// Runs a side, summed over scenarios and tries.
    pub runs: usize,
    /// Per scenario and metric, the tries it was `worse` in.
    pub worse_in: BTreeMap<(String, String), usize>,
}

impl Tally {
    /// Adds `other`'s tries to these.
    pub fn add(&mut self, other: &Tally) {
        self.tries += other.tries;
        self.failed += other.failed;
        self.undecided += other.undecided;
        self.runs += other.runs;
        for (k, n) in &other.worse_in {
            *self.worse_in.entry(k.clone()).or_default() += n;
        }
    }

    pub fn failed_share(&self) -> f64 {
        self.failed as f64 / self.tries.max(1) as f64
    }

    /// Mean runs a side per scenario of a try.
    pub fn mean_runs(&self, scenarios: usize) -> f64 {
        self.runs as f64 / (self.tries * scenarios).max(1) as f64
    }
}

/// The runs of a pool, as [`SideRuns`].
pub fn runs_of(pool: &Pool) -> SideRuns {
    pool.runs.iter().map(|r| r.values.clone()).collect()
}

/// One scenario of the replay: the runs each side draws from (the same
/// runs for an A/A replay: then the two sides draw disjoint runs), and the
/// floor it is judged by.
pub struct ReplayScenario<'a> {
    pub name: &'a str,
    pub reference: &'a SideRuns,
    pub patch: &'a SideRuns,
    pub floor: &'a Floor,
}

/// `tries` whole verdicts, drawn with the generator seeded by `seed`.
pub fn replay(scenarios: &[ReplayScenario], tries: usize, seed: u64) -> Tally {
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut t = Tally {
        tries,
        ..Tally::default()
    };
    for _ in 0..tries {
        // Each scenario's draw order: the reference's runs, then the patch's.
        let orders: Vec<(Vec<usize>, Vec<usize>)> =
            scenarios.iter().map(|s| draw(s, &mut rng)).collect();
        let mut n = vec![FIRST_RUNS; scenarios.len()];
        loop {
            let costs: Vec<Vec<Cost>> = (scenarios.iter().zip(&orders).zip(&n))
                .map(|((s, (ri, pi)), &k)| {
                    judge_pair(
                        &values(s.reference, &ri[..k.min(ri.len())]),
                        &values(s.patch, &pi[..k.min(pi.len())]),
                        s.floor,
                        None,
                    )
                })
                .collect();
            let judged: Vec<(&str, &[Cost], usize)> = (scenarios.iter().zip(&costs).zip(&n))
                .map(|((s, c), &k)| (s.name, c.as_slice(), k))
                .collect();
            let more = extend(&judged);
            if more.is_empty() {
                t.runs += n.iter().sum::<usize>();
                if costs.iter().flatten().any(Cost::fails) {
                    t.failed += 1;
                } else if costs
                    .iter()
                    .flatten()
                    .any(|c| c.class == CostClass::Undecided)
                {
                    t.undecided += 1;
                }
                for (s, c) in scenarios.iter().zip(&costs) {
                    for c in c.iter().filter(|c| c.fails()) {
                        *t.worse_in
                            .entry((s.name.to_string(), c.metric.clone()))
                            .or_default() += 1;
                    }
                }
                break;
            }
            for (i, s) in scenarios.iter().enumerate() {
                if more.contains(&s.name) {
                    n[i] += 1;
                }
            }
        }
    }
    t
}

/// A draw of up to [`RUN_CAP`] runs a side: disjoint when both sides share
/// their runs.
fn draw(s: &ReplayScenario, rng: &mut ChaCha8Rng) -> (Vec<usize>, Vec<usize>) {
    let shuffled = |len: usize, rng: &mut ChaCha8Rng| {
        let mut v: Vec<usize> = (0..len).collect();
        v.shuffle(rng);
        v
    };
    if std::ptr::eq(s.reference, s.patch) {
        let all = shuffled(s.reference.len(), rng);
        let half = all.len() / 2;
        (all[..half].to_vec(), all[half..].to_vec())
    } else {
        (
            shuffled(s.reference.len(), rng),
            shuffled(s.patch.len(), rng),
        )
    }
}

/// The values of the runs `at`, metric by metric.
fn values(runs: &SideRuns, at: &[usize]) -> BTreeMap<String, Vec<f64>> {
    let mut out: BTreeMap<String, Vec<f64>> = BTreeMap::new();
    for &i in at {
        for (k, v) in &runs[i] {
            out.entry(k.clone()).or_default().push(*v);
        }
    }
    out
}

/// The pool of one cell's runs of `scenario` under `conditions`, in
/// phase order, each run's judged metrics (a run without one is left out,
/// said in the error).
pub fn pool_of(
    scenario: &str,
    conditions: Conditions,
    (kernel, results, measured): (String, String, String),
    runs: &[&RunRecord],
) -> Result<Pool, String> {
    let mut out = Vec::new();
    for r in runs {
        let mut values = BTreeMap::new();
        for j in JUDGED {
            let v = (metrics::get(j.key).extract)(r)
                .ok_or_else(|| format!("{} has no {}", r.id, j.key))?;
            values.insert(j.key.to_string(), v);
        }
        out.push(PoolRun {
            phase_ms: r.start_phase.map_or(0, |p| p.actual_ms()),
            values,
        });
    }
    out.sort_by_key(|r| r.phase_ms);
    Ok(Pool {
        scenario: scenario.to_string(),
        conditions,
        kernel,
        results,
        measured,
        runs: out,
    })
}

/// What the replays of a set of pools measured: the false-positive rate of
/// same-kernel verdicts and the power on a known cost.
#[derive(Debug, Clone)]
pub struct Rates {
    /// A/A verdicts, both folds.
    pub aa: Tally,
    /// Verdicts of the costly kernel against the reference (None without
    /// its pools).
    pub power: Option<Tally>,
    pub scenarios: usize,
}

/// The pools of the kernel with a known cost (`ci::negative::COSTLY_PATCH`
/// under the quick job), the power is measured on.
pub const COSTLY_POOLS: &str = "docs/calibration/cost-quick.toml";

/// The committed rates: the default plan's quick floors (A/A) and the
/// costly kernel's pools (power).
pub fn committed_rates() -> anyhow::Result<Rates> {
    use anyhow::Context;
    let path = crate::util::project_root().join(COSTLY_POOLS);
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let costly = crate::results::floor::FloorFile::parse(&text, &path.display().to_string())?;
    let reference = committed(crate::guest::job::QUICK)?;
    rates(
        &reference.iter().collect::<Vec<_>>(),
        &costly.pool.iter().collect::<Vec<_>>(),
    )
    .map_err(anyhow::Error::msg)
}

/// Tries per fold and per power replay.
pub const TRIES: usize = 1000;

/// The rates of the cost verdict on `reference`'s pools (one per scenario,
/// the same conditions): A/A verdicts in two folds (each half's floor
/// judges pairs drawn from the other half), and with `costly` (the pools of
/// a kernel with a known cost, by scenario) the share of its verdicts that
/// fail, judged by the floor of the whole reference pool. A scenario
/// `costly` has no pool of is drawn from the reference's on both sides (the
/// kernel costs nothing there): what fails, fails on the scenarios it has.
pub fn rates(reference: &[&Pool], costly: &[&Pool]) -> Result<Rates, String> {
    let keys = super::cost::keys();
    let halves: Vec<(Pool, Pool)> = reference.iter().map(|p| halves(p)).collect();
    let mut aa = Tally::default();
    for fold in 0..2 {
        let floors: Vec<Floor> = (halves.iter())
            .map(|(a, b)| if fold == 0 { a } else { b }.floor(&a.scenario, &keys))
            .collect::<Result<_, _>>()?;
        let runs: Vec<SideRuns> = (halves.iter())
            .map(|(a, b)| runs_of(if fold == 0 { b } else { a }))
            .collect();
        let scen: Vec<ReplayScenario> = (reference.iter().zip(&floors).zip(&runs))
            .map(|((p, f), r)| ReplayScenario {
                name: &p.scenario,
                reference: r,
                patch: r,
                floor: f,
            })
            .collect();
        aa.add(&replay(&scen, TRIES, 0x5EED_0000 + fold));
    }
    let power = match costly.is_empty() {
        true => None,
        false => Some(power(reference, costly)?),
    };
    Ok(Rates {
        aa,
        power,
        scenarios: reference.len(),
    })
}

/// The verdicts of a kernel whose runs are `costly`'s pools against the
/// reference's, judged by the floor of the whole reference pool. A scenario
/// `costly` has no pool of is drawn from the reference's on both sides.
pub fn power(reference: &[&Pool], costly: &[&Pool]) -> Result<Tally, String> {
    let keys = super::cost::keys();
    let floors: Vec<Floor> = (reference.iter())
        .map(|p| p.floor(&p.scenario, &keys))
        .collect::<Result<_, _>>()?;
    let refs: Vec<SideRuns> = reference.iter().map(|p| runs_of(p)).collect();
    let patched: Vec<Option<SideRuns>> = (reference.iter())
        .map(|p| (costly.iter().find(|c| c.scenario == p.scenario)).map(|c| runs_of(c)))
        .collect();
    let scen: Vec<ReplayScenario> = (reference.iter().enumerate())
        .map(|(i, p)| ReplayScenario {
            name: &p.scenario,
            reference: &refs[i],
            patch: patched[i].as_ref().unwrap_or(&refs[i]),
            floor: &floors[i],
        })
        .collect();
    Ok(replay(&scen, TRIES, 0x5EED_00C0))
}

/// The drops of a scenario's MiB/s the power curve injects, %.
pub const INJECTED: [f64; 8] = [0.5, 1.0, 1.5, 2.0, 3.0, 5.0, 10.0, 20.0];

/// A power curve: for each drop injected, what the verdicts made of it.
pub type PowerCurve = Vec<(f64, Tally)>;

/// The power curve ([`injected`]) of every reference scenario, by name.
pub fn power_curves(reference: &[Pool]) -> anyhow::Result<Vec<(String, PowerCurve)>> {
    let refs: Vec<&Pool> = reference.iter().collect();
    (reference.iter())
        .map(|p| {
            let curve = injected(&refs, &p.scenario).map_err(anyhow::Error::msg)?;
            Ok((p.scenario.clone(), curve))
        })
        .collect()
}

/// The power curve of `scenario`'s throughput: for each drop of
/// [`INJECTED`], the verdicts of a kernel whose runs there are the
/// reference's own, their MiB/s scaled down by the drop (a cost known
/// exactly, on the real runs' spread), every other scenario costing nothing.
/// The scenario's pool is split as the A/A folds split it: one half is the
/// reference (and its floor), the other, scaled, the patch, so no run meets
/// itself across the pair.
pub fn injected(reference: &[&Pool], scenario: &str) -> Result<Vec<(f64, Tally)>, String> {
    let pool = (reference.iter())
        .find(|p| p.scenario == scenario)
        .ok_or_else(|| format!("no reference pool of {scenario}"))?;
    let (kept, other) = halves(pool);
    let refs: Vec<&Pool> = (reference.iter())
        .map(|p| if p.scenario == scenario { &kept } else { *p })
        .collect();
    (INJECTED.iter())
        .map(|&drop| {
            let mut slower = other.clone();
            for r in &mut slower.runs {
                let bw = (r.values.get_mut(BW))
                    .ok_or_else(|| format!("a run of {scenario} has no {BW}"))?;
                *bw *= 1.0 - drop / 100.0;
            }
            Ok((drop, power(&refs, &[&slower])?))
        })
        .collect()
}

/// The committed pools of `job` (ramp, runtime: `guest::job::QUICK` or
/// `FULL`) of the default plan's scenarios (each scenario's floor file):
/// what `qemu-test` under that job is judged by. One per scenario; none or
/// two is an error naming the file.
pub fn committed(job: (u32, u32)) -> anyhow::Result<Vec<Pool>> {
    let (name, flag) = match job == crate::guest::job::QUICK {
        true => ("quick", " --quick"),
        false => ("full", ""),
    };
    let mut out = Vec::new();
    for s in crate::guest::scenario::select(&[])? {
        let file = crate::results::floor::load(s.name)?;
        let mut pools = (file.pool.iter())
            .filter(|p| (p.conditions.job.ramp_time, p.conditions.job.runtime) == job);
        match (pools.next(), pools.next()) {
            (Some(p), None) => out.push(p.clone()),
            (None, _) => anyhow::bail!(
                "{}: no pool of the {name} job: `cargo xtask calibrate{flag}` measures one",
                crate::results::floor::path_of(s.name).display()
            ),
            (Some(_), Some(_)) => anyhow::bail!(
                "{}: two pools of the {name} job (two machines): keep the default machine's",
                crate::results::floor::path_of(s.name).display()
            ),
        }
    }
    Ok(out)
}

/// A pool split by alternate runs (its runs are in phase order, so each
/// half spans the cycle).
pub fn halves(pool: &Pool) -> (Pool, Pool) {
    let mut a = pool.clone();
    let mut b = pool.clone();
    a.runs = pool.runs.iter().step_by(2).cloned().collect();
    b.runs = pool.runs.iter().skip(1).step_by(2).cloned().collect();
    (a, b)
}

#[cfg(test)]
mod tests;
