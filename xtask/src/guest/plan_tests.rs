use super::*;
use crate::guest::{qemu::Accel, scenario};

#[test]
fn the_virtual_clock_refuses_the_hosts_disk_by_name() {
    let mut m = boot_fixture().machine;
    m.clock = Clock::Virtual { shift: 3 };
    m.disk = Disk::Host;
    let all = scenario::all().unwrap();
    let e = check_clock(&m, &all).unwrap_err().to_string();
    assert!(
        e.contains(
            "with --disk host: memcg-ext4, ext4-global, memcg-fadvise, memcg-stale-stats write to a virtio-blk disk"
        ) && e.contains("use --disk null")
            && e.contains("run them with --clock real")
            && e.contains("--scenario fuse-strictlimit --scenario fuse-nostrict"),
        "{e}"
    );
    let memcg = vec![scenario::by_name("memcg-ext4").unwrap()];
    let e = check_clock(&m, &memcg).unwrap_err().to_string();
    assert!(
        e.contains("memcg-ext4 writes") && e.ends_with("--clock real"),
        "{e}"
    );
    let fuse = scenario::select(&["fuse-strictlimit".into(), "fuse-nostrict".into()]).unwrap();
    check_clock(&m, &fuse).unwrap();
    // The guest-time disk, and the real clock, take every scenario.
    m.disk = Disk::Null { mbps: 24 };
    check_clock(&m, &all).unwrap();
    m.disk = Disk::Host;
    m.clock = Clock::Real;
    check_clock(&m, &all).unwrap();
}

#[test]
fn shards_partition_the_plan_and_keep_abba_pairs() {
    let (scenarios, runs) = (4, 3);
    for count in 1..=8u32 {
        let mut owners = Vec::new();
        for s in 0..scenarios {
            for run in 0..runs {
                let takers: Vec<u32> = (1..=count)
                    .filter(|&i| Shard { index: i, count }.takes(s, scenarios, run))
                    .collect();
                assert_eq!(takers.len(), 1, "boot ({s},{run}) of {count} shards");
                owners.push(((s, run), takers[0]));
            }
        }
        // Runs 0 and 1 of a scenario (A B, then B A) stay in one shard.
        for s in 0..scenarios {
            let of = |run| owners.iter().find(|(k, _)| *k == (s, run)).unwrap().1;
            assert_eq!(of(0), of(1));
        }
    }
    assert_eq!(
        "2/4".parse::<Shard>().unwrap(),
        Shard { index: 2, count: 4 }
    );
    for bad in ["0/4", "5/4", "4", "a/b", "1/65"] {
        let e = bad.parse::<Shard>().unwrap_err();
        assert!(e.contains("is not a shard"), "{e}");
    }
}

#[test]
fn plan_positions_follow_abba() {
    assert!(plan_position(0, 0, 0, 2) < plan_position(0, 0, 1, 2));
    assert!(plan_position(1, 0, 1, 2) < plan_position(1, 0, 0, 2));
    assert!(plan_position(0, 1, 0, 2) < plan_position(1, 0, 0, 2));
}

#[test]
fn a_faster_guest_cpu_gets_a_longer_timeout() {
    let job = Job::new("16M", 4, (5, 20));
    let t = |clock| Boot::timeout_of(&job, clock).as_secs();
    assert_eq!(t(Clock::Real), 145);
    assert_eq!(t(Clock::Virtual { shift: 3 }), 145);
    assert_eq!(t(Clock::Virtual { shift: 4 }), 145);
    assert_eq!(t(Clock::Virtual { shift: 1 }), 4 * 145);
    assert_eq!(t(Clock::Virtual { shift: 0 }), 8 * 145);
}

#[test]
fn runs_are_interleaved_abba() {
    let one = &scenario::all().unwrap()[..1];
    let order: Vec<(u32, &str)> = abba(&["a", "b"], one, &Runs::uniform(one, 3))
        .into_iter()
        .map(|(run, v, _)| (run, *v))
        .collect();
    assert_eq!(
        order,
        [(0, "a"), (0, "b"), (1, "b"), (1, "a"), (2, "a"), (2, "b")]
    );
}

#[test]
fn each_scenario_gets_its_own_runs() {
    let two = &scenario::all().unwrap()[..2];
    let (x, y) = (two[0].name, two[1].name);
    let runs = Runs::each(vec![(x.into(), 3), (y.into(), 2)]);
    let order: Vec<(u32, &str, &str)> = abba(&["a", "b"], two, &runs)
        .into_iter()
        .map(|(run, v, s)| (run, *v, s.name))
        .collect();
    let count = |s: &str| order.iter().filter(|o| o.2 == s).count();
    assert_eq!((count(x), count(y)), (6, 4));
    // The third round is the noisier scenario's alone, still ABBA.
    assert_eq!(&order[8..], [(2, "a", x), (2, "b", x)]);
    assert_eq!(runs.to_string(), format!("{x} 3, {y} 2"));
    assert_eq!(Runs::uniform(two, 2).to_string(), "2");
    assert_eq!((runs.of("nope"), runs.most(), runs.fewest()), (0, 3, 2));
}

/// Drives a [`Schedule`]: the boots started at once, then those started
/// after each boot of `ends` ended.
fn starts(len: usize, slots: usize, ends: &[usize]) -> Vec<Vec<usize>> {
    let mut s = Schedule::new(len, slots);
    let mut out = vec![s.start().collect::<Vec<_>>()];
    for &i in ends {
        s.ended(i);
        out.push(s.start().collect());
    }
    assert!(s.finished(), "every boot started and ended");
    out
}

#[test]
fn boots_start_in_plan_order_as_slots_free_up() {
    // One slot: the plan, one boot after the other (today's behaviour).
    assert_eq!(
        starts(3, 1, &[0, 1, 2]),
        [vec![0], vec![1], vec![2], vec![]]
    );
    // Two slots, boots ending out of order: the next boot of the plan
    // takes whichever slot frees up.
    assert_eq!(
        starts(5, 2, &[1, 2, 0, 4, 3]),
        [vec![0, 1], vec![2], vec![3], vec![4], vec![], vec![]]
    );
    // More slots than boots; an empty plan is finished at once.
    assert_eq!(starts(2, 8, &[1, 0]), [vec![0, 1], vec![], vec![]]);
    assert_eq!(starts(0, 2, &[]), [Vec::<usize>::new()]);
}

#[test]
fn jobs_vm_is_checked_against_the_host() {
    let virt = Clock::Virtual { shift: 3 };
    let e = check_jobs_vm(0, 16, 2, Clock::Real)
        .unwrap_err()
        .to_string();
    assert!(
        e.contains("--jobs-vm 0: at least one guest must boot at a time")
            && e.contains("from 1 to 8"),
        "{e}"
    );
    // 3 guests of 2 vCPUs on 4 host CPUs: the numbers, and three ways out.
    let e = check_jobs_vm(3, 4, 2, Clock::Real).unwrap_err().to_string();
    assert!(
        e.contains("--jobs-vm 3: 3 guests need 6 host CPUs")
            && e.contains("this host has 4 available: give --jobs-vm 2 or less")
            && e.contains("--cpus")
            && e.contains("--clock virtual"),
        "{e}"
    );
    // The virtual clock runs a guest on one host thread.
    assert_eq!(check_jobs_vm(4, 4, 2, virt).unwrap(), None);
    let e = check_jobs_vm(5, 4, 2, virt).unwrap_err().to_string();
    assert!(e.contains("5 guests need 5 host CPUs"), "{e}");
    // The real clock with N > 1 is allowed, with a warning.
    let w = check_jobs_vm(2, 4, 2, Clock::Real).unwrap().unwrap();
    assert!(w.contains("throughput numbers are not comparable"), "{w}");
    // One guest at a time is always allowed, even on a small host.
    assert_eq!(check_jobs_vm(1, 1, 4, Clock::Real).unwrap(), None);
    // The defaults pass their own check.
    for (cpus, clock) in [(2, virt), (7, virt), (2, Clock::Real), (1, Clock::Real)] {
        let n = default_jobs_vm(cpus, clock);
        assert_eq!(check_jobs_vm(n, cpus, 2, clock).unwrap(), None);
    }
    assert_eq!(default_jobs_vm(2, virt), 2);
    assert_eq!(default_jobs_vm(16, Clock::Real), 1);
}

#[test]
fn later_runs_fill_the_gaps_the_first_ones_left() {
    use super::{aa_run, fraction};
    let f = |n: u32| -> Vec<f64> { (0..3 * n).map(|k| fraction(k, n)).collect() };
    assert_eq!(f(2), [0.0, 0.5, 0.25, 0.75, 0.125, 0.625]);
    assert_eq!(
        f(3)[3..].to_vec(),
        [1.0 / 6.0, 0.5, 5.0 / 6.0, 1.0 / 12.0, 5.0 / 12.0, 0.75]
    );
    // An A/A control's runs start in the gaps of its kernel's.
    assert_eq!(fraction(aa_run(0, 2), 2), 0.25);
    assert_eq!(fraction(aa_run(1, 2), 2), 0.75);
    // Any prefix stays spread: no two of the first 8 of a 2-run cell closer
    // than 1/8.
    let mut v = f(4)[..8].to_vec();
    v.sort_by(f64::total_cmp);
    assert!(v.windows(2).all(|w| w[1] - w[0] >= 0.125 - 1e-12), "{v:?}");
}

#[test]
fn runs_are_spread_over_each_timer_and_paired_across_variants() {
    use crate::guest::scenario::PhaseCycles;
    let memcg = PhaseCycles {
        cycles_ms: &[2000, 5000],
    };
    let offsets = |n: u32| -> Vec<u32> { (0..n).map(|k| spread(k, n, &memcg).offset_ms).collect() };
    // Run 0 starts at the cycle's start; 3 runs sit a third of the way
    // into both the 2 s and the 5 s timer apart (to the 10 ms step).
    assert_eq!(offsets(1), [0]);
    let three = offsets(3);
    assert_eq!(three[0], 0);
    for (k, x) in three.iter().enumerate() {
        for c in [2000u32, 5000] {
            let want = k as f64 / 3.0;
            let got = f64::from(x % c) / f64::from(c);
            let d = (got - want).rem_euclid(1.0);
            assert!(
                d.min(1.0 - d) < 0.1,
                "run {k} at {x} ms: {got} of {c} ms, want {want}"
            );
        }
    }
    // The cycle is the timers' least common multiple, every offset in it,
    // on the uptime's 10 ms grid; the same run gets the same offset
    // whatever else is in the plan (a variant's run k is at k's phase).
    for n in 1..=12 {
        for (k, x) in offsets(n).into_iter().enumerate() {
            assert!(x < 10_000 && x % PHASE_STEP_MS == 0, "{x}");
            assert_eq!(spread(k as u32, n, &memcg).offset_ms, x);
        }
    }
    // Distinct runs get distinct phases.
    let mut ten = offsets(10);
    ten.sort_unstable();
    ten.dedup();
    assert_eq!(ten.len(), 10);
    assert_eq!(spread(0, 2, &memcg).cycle_ms, 10_000);
}

fn boot_fixture() -> Boot {
    Boot {
        kernel: Built {
            dir: PathBuf::from("k"),
            meta: Default::default(),
        },
        initrd: PathBuf::from("i"),
        scenario: scenario::all().unwrap()[0],
        run: 0,
        job: Job {
            size: "1G".into(),
            numjobs: 4,
            runtime: 20,
            ramp_time: 5,
            bs: "128k".into(),
            write: Default::default(),
        },
        verify: true,
        sample_ms: 100,
        timeout: Duration::from_secs(1),
        phase: None,
        machine: Machine {
            accel: Accel::Tcg,
            clock: Clock::Real,
            cpu_model: "max".into(),
            kernel_args: Vec::new(),
            cpus: 2,
            memory_mib: 2048,
            rdinit: "/init".into(),
            disk: Default::default(),
        },
        detector: Detector::Tracefs,
    }
}

#[test]
fn boot_params_carry_the_job() {
    let boot = boot_fixture();
    let p = boot.params();
    let get = |k: &str| p.iter().find(|(a, _)| a == k).map(|(_, v)| v.as_str());
    assert_eq!(get("scenario"), Some("fuse-strictlimit"));
    assert_eq!(get("size"), Some("1G"));
    assert_eq!(get("runtime"), Some("20"));
    assert_eq!(get("verify"), Some("1"));
    assert_eq!(get("detector"), Some("tracefs"));
    // FUSE has no disk to name; a disk scenario names its device.
    assert_eq!(get("disk"), None);
    let mut on_disk = boot.clone();
    on_disk.scenario = scenario::by_name("memcg-ext4").unwrap();
    on_disk.machine.disk = Disk::Host;
    let p2 = on_disk.params();
    assert!(
        p2.contains(&("disk".to_string(), "host".to_string())),
        "{p2:?}"
    );
    // Every value must survive the kernel command line: no spaces.
    assert!(p.iter().all(|(k, v)| !k.contains(' ') && !v.contains(' ')));
}
