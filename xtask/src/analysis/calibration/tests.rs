use super::*;
use crate::analysis::cost::{JUDGED, RUN_CAP};
use crate::results::floor::{Conditions, PoolRun};

/// A pool of `n` runs whose every metric is `level` x e^(sd x a standard
/// normal draw), seeded: runs of one kernel, by construction.
fn pool(n: usize, level: f64, sd: f64, seed: u64) -> Pool {
    use rand::RngExt;
    let mut rng = ChaCha8Rng::seed_from_u64(seed);
    let mut normal = || {
        // Box-Muller.
        let (u, v): (f64, f64) = (rng.random(), rng.random());
        (-2.0 * (1.0 - u).ln()).sqrt() * (std::f64::consts::TAU * v).cos()
    };
    Pool {
        scenario: "s".into(),
        conditions: Conditions {
            job: crate::guest::job::Job::new("256M", 4, (2, 5)),
            clock: crate::guest::qemu::Clock::Virtual { shift: 3 },
            cpus: 2,
            memory_mib: 2048,
            cpu_model: "qemu64".into(),
            disk: None,
        },
        kernel: "synthetic".into(),
        results: "none".into(),
        measured: "never".into(),
        runs: (0..n)
            .map(|i| PoolRun {
                phase_ms: i as u32,
                values: JUDGED
                    .iter()
                    .map(|j| (j.key.to_string(), level * (sd * normal()).exp()))
                    .collect(),
            })
            .collect(),
    }
}

#[test]
fn same_kernel_pairs_rarely_fail_and_a_known_cost_is_caught() {
    let sd = 0.004;
    let (a, b) = halves(&pool(48, 50.0, sd, 1));
    let floor = a.floor("s", &crate::analysis::cost::keys()).unwrap();
    let runs = runs_of(&b);
    let scen: Vec<ReplayScenario> = ["s1", "s2", "s3", "s4"]
        .iter()
        .map(|&name| ReplayScenario {
            name,
            reference: &runs,
            patch: &runs,
            floor: &floor,
        })
        .collect();
    let aa = replay(&scen, 400, 7);
    assert!(aa.failed_share() <= 0.05, "{aa:?}");
    // A throughput 4% lower in one scenario: every metric of the synthetic
    // pool moves with it, each in its own direction.
    let costly = runs_of(&pool(24, 48.0, sd, 2));
    let mut scen2 = scen;
    scen2[0].patch = &costly;
    let power = replay(&scen2, 400, 8);
    assert!(power.failed_share() >= 0.95, "{power:?}");
    assert!(
        power
            .worse_in
            .contains_key(&("s1".into(), "fio.write_bw_MiB/s".into())),
        "{power:?}"
    );
}

#[test]
fn the_replay_is_reproducible_and_extends_only_the_undecided() {
    let (a, b) = halves(&pool(48, 50.0, 0.004, 3));
    let floor = a.floor("s", &crate::analysis::cost::keys()).unwrap();
    let runs = runs_of(&b);
    let one = [ReplayScenario {
        name: "s",
        reference: &runs,
        patch: &runs,
        floor: &floor,
    }];
    assert_eq!(replay(&one, 50, 9), replay(&one, 50, 9));
    let t = replay(&one, 50, 9);
    let mean = t.mean_runs(1);
    assert!(
        (FIRST_RUNS as f64..=RUN_CAP as f64).contains(&mean),
        "{t:?}"
    );
}

#[test]
fn a_failing_cost_ends_the_runs_and_undecided_ones_get_more_up_to_the_cap() {
    let floor = pool(12, 50.0, 0.004, 4)
        .floor("s", &crate::analysis::cost::keys())
        .unwrap();
    let v = |x: &[f64]| {
        JUDGED
            .iter()
            .map(|j| (j.key.to_string(), x.to_vec()))
            .collect::<BTreeMap<_, _>>()
    };
    let worse = judge_pair(&v(&[50.0, 50.1]), &v(&[45.0, 45.1]), &floor, None);
    let undecided = judge_pair(&v(&[50.0, 50.0]), &v(&[49.3, 49.3]), &floor, None);
    assert!(worse.iter().any(Cost::fails));
    assert!(
        undecided.iter().any(|c| c.class == CostClass::Undecided),
        "{undecided:?}"
    );
    assert_eq!(extend(&[("a", &undecided[..], 2)]), vec!["a"]);
    assert_eq!(
        extend(&[("a", &undecided[..], RUN_CAP)]),
        Vec::<&str>::new()
    );
    assert_eq!(
        extend(&[("a", &undecided[..], 2), ("b", &worse[..], 2)]),
        Vec::<&str>::new()
    );
    // A pair with one run a side gets its second whatever it shows.
    assert_eq!(
        extend(&[("a", &undecided[..], 2), ("b", &worse[..], 1)]),
        vec!["a", "b"]
    );
    assert_eq!(extend(&[("b", &worse[..], 1)]), vec!["b"]);
}

/// The committed pools keep the verdict's error rates (docs/measurements.md,
/// "The cost verdict"): at most 5% of same-kernel verdicts fail on cost,
/// and the kernel with a known cost (5.7% of fuse-nostrict's quick
/// throughput) fails in at least 95% of tries, at the default runs.
#[test]
fn the_committed_pools_keep_the_error_rates() {
    let r = committed_rates().unwrap();
    assert!(r.aa.tries >= 100, "{:?}", r.aa);
    assert!(r.aa.failed_share() <= 0.05, "false positives: {:?}", r.aa);
    let power = r.power.unwrap();
    assert!(power.failed_share() >= 0.95, "power: {power:?}");
    assert!(
        (power.worse_in.keys()).any(|(s, m)| s == "fuse-nostrict" && m == "fio.write_bw_MiB/s"),
        "{power:?}"
    );
}

/// The share of verdicts that failed at the injected drop `d` of `curve`.
fn failed_at(curve: &[(f64, Tally)], d: f64) -> f64 {
    let (_, t) = (curve.iter()).find(|(x, _)| *x == d).unwrap();
    t.failed_share()
}

/// The power curve on the committed pools: a drop of FUSE's MiB/s at the
/// smallest change that matters (2%) fails nearly every verdict, a quarter
/// of it almost none; a scenario whose floor cannot resolve its throughput
/// never fails on it.
#[test]
fn an_injected_drop_of_the_smallest_change_is_caught() {
    let reference = committed(crate::guest::job::QUICK).unwrap();
    let refs: Vec<&Pool> = reference.iter().collect();
    let curve = injected(&refs, "fuse-nostrict").unwrap();
    let at = |d: f64| failed_at(&curve, d);
    assert!(at(2.0) >= 0.95, "{curve:?}");
    assert!(at(0.5) <= 0.05, "{curve:?}");
    let memcg = injected(&refs, "memcg-ext4").unwrap();
    assert!(memcg.iter().all(|(_, t)| t.failed == 0), "{memcg:?}");
    assert!(injected(&refs, "nowhere").is_err());
}

/// The full job's committed pools (the main job's floors) keep the same
/// false-positive rate, and resolve a 2% drop of FUSE's throughput.
#[test]
fn the_full_jobs_pools_keep_the_false_positive_rate() {
    let reference = committed(crate::guest::job::FULL).unwrap();
    let refs: Vec<&Pool> = reference.iter().collect();
    let r = rates(&refs, &[]).unwrap();
    assert!(
        r.aa.tries >= 100 && r.aa.failed_share() <= 0.05,
        "{:?}",
        r.aa
    );
    let curve = injected(&refs, "fuse-strictlimit").unwrap();
    let at = |d: f64| failed_at(&curve, d);
    assert!(at(2.0) >= 0.95 && at(0.5) <= 0.05, "{curve:?}");
}
