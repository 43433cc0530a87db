//! Statistics for repeated runs: median, mean, standard deviation, and the
//! runs a plan needs for a target precision. Only the analysis calls these:
//! the renderers read what `analysis::judge` computed with them.

use crate::guest::{plan::Runs, qemu::Clock, scenario::Scenario};

/// The median of some numbers (0 for none).
pub fn median(values: &[f64]) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

pub fn mean(v: &[f64]) -> f64 {
    if v.is_empty() {
        0.0
    } else {
        v.iter().sum::<f64>() / v.len() as f64
    }
}

/// Sample standard deviation (n - 1); 0 for fewer than two values.
pub fn stddev(v: &[f64]) -> f64 {
    if v.len() < 2 {
        return 0.0;
    }
    let m = mean(v);
    (v.iter().map(|x| (x - m).powi(2)).sum::<f64>() / (v.len() - 1) as f64).sqrt()
}

/// The precision a default plan aims at: the 95% interval of the %change
/// between two cells (A/A included) within ± this many points.
pub const TARGET_POINTS: f64 = 0.5;

/// The runs per cell that bring the 95% interval of the %change between two
/// cells within ±`target` points, when one run's MiB/s varies with standard
/// deviation `sd_pct` (% of the mean): 1.96 × sd × √(2/n) ≤ target. At least
/// 2: one run has no interval.
pub fn runs_for(sd_pct: f64, target: f64) -> u32 {
    let n = 2.0 * (1.96 * sd_pct / target).powi(2);
    (n.ceil() as u32).max(2)
}

/// The most runs per cell a default plan makes: a scenario whose run-to-run
/// spread comes from the kernel's own dynamics (memcg-ext4: the writers'
/// throttled time differs by regimes from run to run) would need hundreds.
const MAX_DERIVED_RUNS: u32 = 3;

/// The runs per cell a full plan needs for ±[`TARGET_POINTS`] on
/// `clock`, scenario by scenario, and why. On the virtual clock: what each
/// scenario's own measured floor asks for ([`runs_for`]), at most
/// [`MAX_DERIVED_RUNS`]. On the real clock no number of runs gets there (its
/// floor is points wide), nor for a scenario whose floor was never measured:
/// 3, and the A/A control says how wide.
pub fn runs_for_floors(scenarios: &[Scenario], clock: Clock) -> (Runs, String) {
    let target = TARGET_POINTS;
    if clock == Clock::Real {
        let why = format!(
            "3 runs per cell: the real clock's A/A floor is points wide (docs/measurements.md), \
             so no number of runs reaches ±{target}; the virtual clock does"
        );
        return (Runs::uniform(scenarios, 3), why);
    }
    let mut per = Vec::new();
    let mut said = Vec::new();
    for s in scenarios {
        let (n, why) = match s.floor_sd_pct {
            None => (
                3,
                "no A/A floor measured ([floor] in scenario.toml)".to_string(),
            ),
            Some(sd) => match runs_for(sd, target) {
                n if n > MAX_DERIVED_RUNS => (
                    MAX_DERIVED_RUNS,
                    format!("a run varies by {sd}%, would need {n}; its A/A control says how wide"),
                ),
                n => (n, format!("a run varies by {sd}%")),
            },
        };
        per.push((s.name.to_string(), n));
        said.push(format!("{} {n} ({why})", s.name));
    }
    let why = format!(
        "runs per cell for ±{target} points from each scenario's measured floor: {}",
        said.join("; ")
    );
    (Runs::each(per), why)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_follow_from_the_floor() {
        assert_eq!(runs_for(0.0, 0.5), 2);
        assert_eq!(runs_for(0.1, 0.5), 2);
        // 2 × (1.96 × 0.3 / 0.5)² = 2.77
        assert_eq!(runs_for(0.3, 0.5), 3);
        // 2 × (1.96 × 1 / 0.5)² = 30.7: a noisy scenario needs many.
        assert_eq!(runs_for(1.0, 0.5), 31);
    }

    #[test]
    fn medians() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(median(&[]), 0.0);
    }

    #[test]
    fn mean_and_stddev() {
        assert_eq!(mean(&[1.0, 2.0, 3.0]), 2.0);
        assert!((stddev(&[2.0, 4.0, 4.0, 4.0, 5.0, 5.0, 7.0, 9.0]) - 2.138_089_935).abs() < 1e-6);
        assert_eq!(stddev(&[5.0]), 0.0);
    }

    #[test]
    fn the_runs_of_a_full_plan_follow_from_the_floors_it_measured() {
        use crate::guest::qemu::Clock;
        let virt = Clock::Virtual { shift: 3 };
        let mut all = crate::guest::scenario::all().unwrap();
        for s in &mut all {
            s.floor_sd_pct = Some(0.1);
        }
        let (runs, _) = runs_for_floors(&all, virt);
        assert_eq!((runs.fewest(), runs.most()), (2, 2));
        // Each scenario's own floor decides its runs, and is named.
        all[1].floor_sd_pct = Some(0.3);
        let (runs, why) = runs_for_floors(&all, virt);
        assert_eq!(
            (runs.of(all[0].name), runs.of(all[1].name)),
            (2, 3),
            "{why}"
        );
        assert!(why.contains(&format!("{} 3 (a run varies by 0.3%)", all[1].name)));
        // A floor that would need more than the cap gets the cap, said why.
        all[1].floor_sd_pct = Some(5.7);
        let (runs, why) = runs_for_floors(&all, virt);
        assert_eq!(runs.of(all[1].name), 3);
        assert!(why.contains("would need 999"), "{why}");
        // An unmeasured scenario gets 3, said why; the others keep theirs.
        all[2].floor_sd_pct = None;
        let (runs, why) = runs_for_floors(&all, virt);
        assert_eq!((runs.of(all[2].name), runs.of(all[0].name)), (3, 2));
        assert!(why.contains(&format!("{} 3 (no A/A floor measured", all[2].name)));
        // The real clock: 3 everywhere, said why.
        let (runs, why) = runs_for_floors(&all, Clock::Real);
        assert_eq!((runs.fewest(), runs.most()), (3, 3));
        assert!(why.contains("real clock"));
    }
}
