use super::*;
use crate::results::tracefs::Causes;
// report/'s tests import these from here (crate::test_support is their home).
pub use crate::test_support::{expected, judged, plan, rec};
use crate::test_support::{ms_of, set_trace, EXPECTED};

/// Lines as the reports print them.
pub fn texts<T: std::fmt::Display>(v: &[T]) -> Vec<String> {
    v.iter().map(|x| x.to_string()).collect()
}

/// `rec` for run index `run`.
fn run(mut r: RunRecord, run: u32) -> RunRecord {
    r.id.run = run;
    r
}

#[test]
fn the_expected_matrix_passes_and_the_ratio_is_reported() {
    let records = [
        rec("regressed", "fuse-strictlimit", 0.8, 0.7),
        rec("v1", "fuse-strictlimit", 200.0, 0.0),
        run(rec("regressed", "fuse-strictlimit", 1.0, 0.6), 1),
        run(rec("v1", "fuse-strictlimit", 190.0, 0.001), 1),
    ];
    let v = verdict_of(&records, &expected(), &plan(&records, 2));
    assert!(v.passed(), "{v:?}");
    assert_eq!(v.cells[0].runs(), 2);
    assert_eq!(v.cells[0].observed, Class::Stall);
    // Each cell's rate is the harmonic mean of its runs'.
    let h = |a: f64, b: f64| 2.0 / (1.0 / a + 1.0 / b);
    let ratio = v.throughput_ratio["fuse-strictlimit:regressed"];
    assert!(
        (ratio - h(0.8, 1.0) / h(200.0, 190.0)).abs() < 1e-9,
        "{ratio}"
    );
}

#[test]
fn the_two_detectors_must_class_a_cell_alike() {
    let with = |mut r: RunRecord, t: f64| {
        set_trace(&mut r, Some((t, 0.0)));
        r
    };
    let agree = [
        with(rec("regressed", "fuse-strictlimit", 1.0, 0.6), 0.595),
        with(rec("v1", "fuse-strictlimit", 200.0, 0.0), 0.002),
    ];
    let v = verdict_of(&agree, &expected(), &plan(&agree, 1));
    assert!(v.passed(), "{v:?}");
    let trace = v.cells[1]
        .aggregates
        .value("tracefs.stall_share_%")
        .unwrap();
    assert!((trace - 0.2).abs() < 1e-9, "{trace}");
    // The module says ok, the trace says the writers stalled 3% of the time.
    let disagree = [
        with(rec("regressed", "fuse-strictlimit", 1.0, 0.6), 0.595),
        with(rec("v1", "fuse-strictlimit", 200.0, 0.0), 0.03),
    ];
    let v = verdict_of(&disagree, &expected(), &plan(&disagree, 1));
    assert!(!v.passed());
    assert!(
        v.cells[1].failures[0]
            .to_string()
            .contains("the detectors disagree")
            && v.cells[1].failures[0]
                .to_string()
                .contains("3.00% (unclear)"),
        "{:?}",
        v.cells[1].failures
    );
    // A module-mode run without the trace's share: no median of the
    // others stands in for it, and the run has no second opinion.
    let mut lone = rec("regressed", "fuse-strictlimit", 1.0, 0.6);
    set_trace(&mut lone, None);
    let partial = [
        lone,
        run(with(rec("regressed", "fuse-strictlimit", 1.0, 0.6), 0.0), 1),
    ];
    let v = verdict_of(&partial, &expected(), &plan(&partial, 2));
    // The trace's aggregate is of the one run that has it, and says so.
    let trace = v.cells[0].aggregates.get("tracefs.stall_share_%").unwrap();
    assert_eq!((trace.runs, v.cells[0].runs()), (1, 2));
    assert!(
        v.cells[0].failures[0]
            .to_string()
            .contains("run #1: the tracefs detector classed no sleep"),
        "{:?}",
        v.cells[0].failures
    );
}

#[test]
fn a_hypothesis_that_does_not_hold_fails_its_cell() {
    // The regressed cell shows no stall sleeps: the mechanism decides, whatever
    // its throughput.
    let records = [
        rec("regressed", "fuse-strictlimit", 1.0, 0.0),
        rec("v1", "fuse-strictlimit", 200.0, 0.0),
    ];
    let v = verdict_of(&records, &expected(), &plan(&records, 1));
    assert!(!v.passed());
    assert!(
        v.cells[0].failures[0]
            .to_string()
            .contains("expected stall, observed ok"),
        "{:?}",
        v.cells[0].failures
    );
    assert!(v.cells[1].failures.is_empty());
}

#[test]
fn a_control_that_was_never_throttled_is_idle_and_fails_ok() {
    let mut r = rec("regressed", "fuse-nostrict", 290.0, 0.0);
    r.detection.mechanism.throttle_events = 0;
    r.detection.mechanism.throttle_sleeps = 0;
    r.detection.witness.throttle_events = 0;
    r.detection.witness.throttle_sleeps = 0;
    // The tracefs detector saw what the witness saw: nothing.
    set_trace(&mut r, Some((0.0, 0.0)));
    let records = [r];
    let v = verdict_of(&records, &expected(), &plan(&records, 1));
    assert!(!v.passed());
    assert_eq!(v.cells[0].observed, Class::Idle);
    assert!(
        v.cells[0].failures[0]
            .to_string()
            .contains("expected ok, observed idle: the writers were never throttled in run #1"),
        "{:?}",
        v.cells[0].failures
    );
    // Only an explicit `idle` expectation accepts it.
    let idle_ok = EXPECTED.replace(
        "[expect.fuse-nostrict]\nregressed = \"ok\"",
        "[expect.fuse-nostrict]\nregressed = \"idle\"",
    );
    let e = Expected::parse(&idle_ok, Path::new("e")).unwrap();
    assert!(verdict_of(&records, &e, &plan(&records, 1)).passed());
}

#[test]
fn an_expected_cell_without_a_record_fails() {
    let records = [rec("regressed", "fuse-strictlimit", 1.0, 0.6)];
    let mut p = plan(&records, 1);
    p.variants.push("v1".into());
    let v = verdict_of(&records, &expected(), &p);
    assert!(!v.passed());
    assert_eq!(
        texts(&v.missing),
        ["fuse-strictlimit/v1: no usable run of 1 planned"]
    );
    // Fewer usable runs than planned fail the cell too.
    let v = verdict_of(&records, &expected(), &plan(&records, 3));
    assert!(
        v.cells[0].failures[0]
            .to_string()
            .contains("only 1 of 3 planned runs"),
        "{:?}",
        v.cells[0]
    );
    // A scenario's own planned runs count, not the session's.
    let mut p = plan(&records, 1);
    p.each.insert("fuse-strictlimit".into(), 2);
    let v = verdict_of(&records, &expected(), &p);
    assert!(
        v.cells[0].failures[0]
            .to_string()
            .contains("only 1 of 2 planned runs"),
        "{:?}",
        v.cells[0]
    );
    // And nothing measured is not a pass.
    assert!(!verdict_of(&[], &expected(), &Planned::default()).passed());
}

#[test]
fn runs_with_problems_are_left_out_of_the_medians_and_listed() {
    let mut bad = run(rec("v1", "fuse-strictlimit", 1.0, 0.9), 1);
    bad.boot.dmesg_warnings = vec!["WARNING: CPU: 0 PID: 1 at mm/x.c:1".into()];
    let records = [
        rec("regressed", "fuse-strictlimit", 1.0, 0.6),
        rec("v1", "fuse-strictlimit", 200.0, 0.0),
        bad,
        run(rec("v1", "fuse-strictlimit", 210.0, 0.0), 2),
    ];
    let v = verdict_of(&records, &expected(), &plan(&records, 1));
    let v1 = v.cells.iter().find(|c| c.variant() == "v1").unwrap();
    assert_eq!((v1.runs(), v1.observed), (2, Class::Ok));
    // The harmonic mean of 200 and 210, as every rate is aggregated.
    assert!((v1.bw_mib_s() - 2.0 / (1.0 / 200.0 + 1.0 / 210.0)).abs() < 1e-9);
    assert!(
        v.left_out[0]
            .to_string()
            .starts_with("fuse-strictlimit/v1 #2: warning: dmesg has 1 warning"),
        "{:?}",
        v.left_out
    );
    assert!(!v.passed());
}

#[test]
fn a_missing_kunit_suite_or_a_wrong_strict_limit_leaves_a_run_out() {
    let t = expected().witness;
    let mut r = rec("regressed", "fuse-strictlimit", 1.0, 0.6);
    assert!(crate::results::problems::problems(&r, &t).is_empty());
    r.counters.ktap_suites = vec!["rust_kernel".into()];
    assert!(crate::results::problems::problems(&r, &t)[0]
        .contains("KUnit suite `wbstall` did not report (suites: rust_kernel)"));
    let mut r = rec("regressed", "fuse-strictlimit", 1.0, 0.6);
    r.counters
        .bdi_knobs
        .insert("strict_limit".into(), "0".into());
    assert_eq!(
        crate::results::problems::problems(&r, &t),
        ["the BDI's strict_limit is 0, the scenario needs 1"]
    );
    // A tick-resolution clocksource: latencies and stall times are noise.
    let mut r = rec("regressed", "fuse-strictlimit", 1.0, 0.6);
    r.boot
        .guest_env
        .insert("clocksource".into(), "jiffies".into());
    assert!(
        crate::results::problems::problems(&r, &t)[0].contains("ran on the jiffies clocksource")
    );
    r.boot.guest_env.insert("clocksource".into(), "tsc".into());
    assert!(crate::results::problems::problems(&r, &t).is_empty());
}

#[test]
fn a_witness_that_disagrees_with_the_module_fails_the_boot() {
    let mut r = rec("v1", "fuse-strictlimit", 200.0, 0.0);
    r.detection.witness.bg_starts = 0;
    let records = [rec("regressed", "fuse-strictlimit", 1.0, 0.6), r];
    let v = verdict_of(&records, &expected(), &plan(&records, 1));
    assert!(!v.passed());
    assert!(
        v.left_out[0]
            .to_string()
            .contains("disagree on bg_starts: tracefs counted 0, the module 4000"),
        "{:?}",
        v.left_out
    );
    assert_eq!(
        texts(&v.missing),
        ["fuse-strictlimit/v1: no usable run of 1 planned"]
    );
}

#[test]
fn an_in_between_share_is_unclear_whatever_the_latency_and_draining_is_not_judged() {
    // 3% of the writers' time in stall sleeps, every call short, starts
    // seen: no latency excuses it, the run is unclear and fails ok.
    let mut r = rec("v2", "memcg-ext4", 150.0, 0.03);
    r.detection.mechanism.max_call_ms = 90;
    r.fio.clat_max_us = 90_000.0;
    let records = [r];
    let v = verdict_of(&records, &expected(), &plan(&records, 1));
    assert_eq!(v.cells[0].observed, Class::Unclear, "{:?}", v.cells[0]);
    assert!(
        v.cells[0].failures[0]
            .to_string()
            .contains("expected ok, observed unclear"),
        "{:?}",
        v.cells[0]
    );
    // Writers that spent 30% of their time in draining sleeps (the disk
    // was the bottleneck) and none in stall sleeps: ok, the draining
    // share reported beside it.
    let mut r = rec("v2", "memcg-ext4", 150.0, 0.0);
    r.detection.mechanism.draining_ms = ms_of(0.3);
    set_trace(&mut r, Some((0.0, 0.3)));
    let records = [r];
    let v = verdict_of(&records, &expected(), &plan(&records, 1));
    assert!(v.passed(), "{v:?}");
    assert_eq!(
        v.cells[0].aggregates.value("wbstall.draining_share_%"),
        Some(30.0)
    );
    // A stall share stays a stall whatever else.
    let records = [rec("regressed", "memcg-ext4", 150.0, 0.4)];
    let v = verdict_of(&records, &expected(), &plan(&records, 1));
    assert_eq!(v.cells[0].observed, Class::Stall, "{:?}", v.cells[0]);
}

#[test]
fn a_run_whose_draining_the_detectors_count_apart_fails() {
    let with = |stall: f64, draining: f64, t_stall: f64, t_draining: f64| {
        let mut r = rec("regressed", "memcg-ext4", 50.0, stall);
        r.detection.mechanism.draining_ms = ms_of(draining);
        set_trace(&mut r, Some((t_stall, t_draining)));
        let records = [r];
        texts(&verdict_of(&records, &expected(), &plan(&records, 1)).cells[0].failures)
    };
    // Measured (memcg-ext4 regressed, quick): the trace calls 1.1 points
    // of the module's stall draining (another wb's completions): agreed.
    assert_eq!(with(0.5548, 0.0122, 0.5442, 0.0236), Vec::<String>::new());
    // Sleeps the module counts as draining and the trace as flushing:
    // 4 points of writer time one detector saw without a pass.
    assert_eq!(
        with(0.5, 0.04, 0.5, 0.0),
        [
            "run #1: the detectors disagree on the sleeps without a flusher pass: the module's \
             stall + draining share is 54.00%, the tracefs detector's 50.00%, more than 1 \
             point(s) apart (ok_fraction)"
        ]
    );
    // The module calls draining what the trace calls a stall: its
    // per-wb completions cannot exceed the machine's.
    assert_eq!(
        with(0.46, 0.04, 0.5, 0.0),
        [
            "run #1: the tracefs detector counts 50.00% of writer time in stall sleeps, the \
             module 46.00%: the trace sees completions machine-wide, so a sleep it calls a \
             stall the module cannot have seen drain (ok_fraction: 1 point(s))"
        ]
    );
}

#[test]
fn both_halves_of_the_latency_bound_hold_on_every_scenario() {
    // memcg-ext4 (no fio-side flushes since 2026-12-03): a stall whose
    // writers never waited long fails, as on FUSE; an ok run whose writer
    // waited past the bound fails.
    let repo = crate::analysis::expected::load_expectations(
        &std::fs::read_to_string(crate::util::project_root().join("qemu/expected.toml")).unwrap(),
        std::path::Path::new("qemu/expected.toml"),
        &[],
    )
    .unwrap();
    let bound = |s: &str| repo.latency[s].max_call_share_of_writeback_interval * 5000.0;
    // 40% of 100 s of writer time, all of it unrequested (the cause the
    // repository expects), at 0.6 of the clean run's throughput.
    let mut stall = rec("regressed", "memcg-ext4", 90.0, 0.4);
    stall.detection.mechanism.max_call_ms = (bound("memcg-ext4") - 100.0) as u64;
    (stall.job.numjobs, stall.detection.fio_wall_s) = (4, 25.0);
    stall.detection.mechanism.causes = Some(Causes {
        unrequested_sleeps: 1000,
        unrequested_ms: 40_000,
        ..Causes::default()
    });
    let mut ok = rec("v2", "memcg-ext4", 150.0, 0.0);
    ok.detection.mechanism.max_call_ms = (bound("memcg-ext4") + 100.0) as u64;
    let records = [stall, ok];
    let v = verdict_of(&records, &repo, &plan(&records, 1));
    assert!(
        v.cells[0].failures[0]
            .to_string()
            .contains("no writer spent more than"),
        "{:?}",
        v.cells[0]
    );
    assert!(
        v.cells[1].failures[0]
            .to_string()
            .contains("a writer spent"),
        "{:?}",
        v.cells[1]
    );
    // fuse-passthrough's new criterion says no, both ways: a stall whose
    // writers never waited long, an ok run whose writer waited 2 s.
    let mut stall = rec("regressed", "fuse-passthrough", 1.0, 0.8);
    stall.detection.mechanism.max_call_ms = 300;
    let mut ok = rec("upstream", "fuse-passthrough", 40.0, 0.0);
    ok.detection.mechanism.max_call_ms = 2_000;
    let records = [stall, ok];
    let v = verdict_of(&records, &repo, &plan(&records, 1));
    assert!(
        v.cells[0].failures[0]
            .to_string()
            .contains("no writer spent more than 300 ms"),
        "{:?}",
        v.cells[0]
    );
    assert!(
        v.cells[1].failures[0]
            .to_string()
            .contains("a writer spent 2000 ms"),
        "{:?}",
        v.cells[1]
    );
}

#[test]
fn the_latency_criterion_can_contradict_the_module() {
    // memcg: an ok cell whose writers still waited ~4 s, and a stall cell
    // whose writers never waited long.
    let mut ok = rec("v2", "memcg-ext4", 150.0, 0.0);
    ok.detection.mechanism.max_call_ms = 4_200;
    let mut stall = rec("regressed", "memcg-ext4", 150.0, 0.4);
    stall.detection.mechanism.max_call_ms = 300;
    let records = [stall, ok];
    let v = verdict_of(&records, &expected(), &plan(&records, 1));
    assert!(
        v.cells[0].failures[0].to_string().contains(
            "stall by the sleep classes, but no writer spent more than 300 ms in one \
             balance_dirty_pages() call, below 2500 ms"
        ),
        "{:?}",
        v.cells[0]
    );
    assert!(
        v.cells[1].failures[0].to_string().contains(
            "ok by the sleep classes, but a writer spent 4200 ms in one \
             balance_dirty_pages() call"
        ),
        "{:?}",
        v.cells[1]
    );
    // An ok cell whose witness saw no background start fails too.
    let mut ok = rec("v2", "memcg-ext4", 150.0, 0.0);
    ok.detection.mechanism.bg_starts = 0;
    ok.detection.witness.bg_starts = 0;
    set_trace(&mut ok, Some((0.0, 0.0)));
    let records = [rec("regressed", "memcg-ext4", 150.0, 0.4), ok];
    let v = verdict_of(&records, &expected(), &plan(&records, 1));
    assert!(v.cells[0].failures.is_empty(), "{:?}", v.cells[0]);
    assert!(
        v.cells[1].failures[0]
            .to_string()
            .contains("witness saw no background writeback start"),
        "{:?}",
        v.cells[1]
    );
    // A run without the writeback interval cannot be judged by it.
    let mut ok = rec("v2", "memcg-ext4", 150.0, 0.0);
    ok.counters.vm_knobs.clear();
    let records = [ok];
    let v = verdict_of(&records, &expected(), &plan(&records, 1));
    assert!(
        v.cells[0].failures[0]
            .to_string()
            .contains("lacks vm.dirty_writeback_centisecs"),
        "{:?}",
        v.cells[0]
    );
}

#[test]
fn a_stall_without_its_cost_fails_where_the_cost_is_judged() {
    let records = [
        rec("regressed", "fuse-strictlimit", 150.0, 0.2),
        rec("v1", "fuse-strictlimit", 200.0, 0.0),
    ];
    let v = verdict_of(&records, &expected(), &plan(&records, 1));
    assert!(
        v.cells[0].failures[0]
            .to_string()
            .contains("without the throughput cost"),
        "{:?}",
        v.cells[0]
    );
    // Elsewhere the ratio is reported, not judged.
    let records = [
        rec("regressed", "memcg-ext4", 150.0, 0.2),
        rec("v2", "memcg-ext4", 200.0, 0.0),
    ];
    let v = verdict_of(&records, &expected(), &plan(&records, 1));
    assert!(v.passed(), "{v:?}");
    assert!(v.throughput_ratio.contains_key("memcg-ext4:regressed"));
}

#[test]
fn one_run_of_three_stalling_fails_an_ok_cell_and_a_stall_cell() {
    // A fix that stalls in 1 boot of 3: its median share is 0%.
    let records = [
        rec("v1", "fuse-strictlimit", 200.0, 0.0),
        run(rec("v1", "fuse-strictlimit", 200.0, 0.0), 1),
        run(rec("v1", "fuse-strictlimit", 2.0, 0.4), 2),
    ];
    let v = verdict_of(&records, &expected(), &plan(&records, 3));
    assert!(!v.passed());
    let c = &v.cells[0];
    // Its mean share is 13.3%; the runs decide, each on its own.
    assert!((c.stall_fraction() - 0.4 / 3.0).abs() < 1e-9);
    assert_eq!(c.observed, Class::Mixed);
    assert!(
        c.failures[0].to_string().contains(
            "expected ok, observed mixed: its runs differ: #1 ok (0.0%), #2 ok (0.0%), #3 \
             stall (40.0%)"
        ),
        "{:?}",
        c.failures
    );
    // Mixed fails a stall expectation just as well.
    let records = [
        rec("regressed", "fuse-strictlimit", 1.0, 0.6),
        run(rec("regressed", "fuse-strictlimit", 200.0, 0.0), 1),
    ];
    let v = verdict_of(&records, &expected(), &plan(&records, 2));
    assert!(v.cells[0].failures[0]
        .to_string()
        .contains("expected stall, observed mixed"));
}

#[test]
fn one_run_over_the_latency_bound_fails_the_cell() {
    // memcg v2, three ok runs by the module; run 2's writers waited 2.6 s
    // (the median, 300 ms, is well below the 2.5 s bound).
    let mut slow = run(rec("v2", "memcg-ext4", 150.0, 0.0), 1);
    slow.detection.mechanism.max_call_ms = 2_600;
    let records = [
        rec("v2", "memcg-ext4", 150.0, 0.0),
        slow,
        run(rec("v2", "memcg-ext4", 150.0, 0.0), 2),
    ];
    let v = verdict_of(&records, &expected(), &plan(&records, 3));
    assert!(!v.passed());
    assert_eq!(v.cells[0].max_call_ms(), 2600.0);
    assert_eq!(
        texts(&v.cells[0].failures),
        [
            "run #2: ok by the sleep classes, but a writer spent 2600 ms in one \
             balance_dirty_pages() call, at or above 2500 ms (50% of the 5000 ms writeback \
             interval): writers waited for the periodic flusher"
        ]
    );
}

#[test]
fn an_adhoc_patch_that_stalls_fails_with_the_default_expectation() {
    use crate::analysis::expected::ExpectArgs;
    let mut e = expected();
    let scenarios = ["fuse-strictlimit"];
    // Held to the reference (here upstream, expected ok) by default.
    e.expect_patch(
        "patch-wrong",
        "upstream",
        &scenarios,
        &ExpectArgs::default(),
    );
    let records = [
        rec("regressed", "fuse-strictlimit", 0.8, 0.7),
        rec("upstream", "fuse-strictlimit", 120.0, 0.0),
        rec("patch-wrong", "fuse-strictlimit", 0.76, 0.69),
    ];
    let v = verdict_of(&records, &e, &plan(&records, 1));
    assert!(!v.passed());
    assert!(!v.variant_passed("patch-wrong"));
    assert!(v.variant_passed("upstream") && v.variant_passed("regressed"));
    let c = v
        .cells
        .iter()
        .find(|c| c.variant() == "patch-wrong")
        .unwrap();
    assert!(c.judged);
    assert!(
        c.failures[0]
            .to_string()
            .contains("expected ok, observed stall: writers lost 69.0%"),
        "{:?}",
        c.failures
    );
}

#[test]
fn no_pass_rests_on_an_unjudged_cell() {
    // A patch with no expectation at all (none given, none for the
    // reference): measured ok, but not judged, so no PASS.
    let records = [
        rec("regressed", "fuse-strictlimit", 0.8, 0.7),
        rec("patch-x", "fuse-strictlimit", 120.0, 0.0),
    ];
    let v = verdict_of(&records, &expected(), &plan(&records, 1));
    assert!(v.cells.iter().all(|c| c.failures.is_empty()));
    assert!(!v.passed() && !v.passed);
    assert_eq!(v.judged_count(), (1, 1));
    assert!(
        v.unjudged[0]
            .to_string()
            .starts_with("fuse-strictlimit/patch-x: no expectation")
            && v.unjudged[0].to_string().ends_with("measured #1 ok (0.0%)"),
        "{:?}",
        v.unjudged
    );
    assert!(!v.variant_passed("patch-x"));
    let json = serde_json::to_value(&v).unwrap();
    assert_eq!(json["schema"], SCHEMA);
    assert_eq!(json["passed"], false);
    assert_eq!(json["cells"][1]["judged"], false);
    assert_eq!(json["cells"][1]["run_verdicts"][0]["class"], "ok");
}

/// Judges one memcg-ext4 run (latency bound 2500 ms: half the 5000 ms
/// writeback interval), its longest single pause 100 ms; its verdict's
/// first run, and what the reports say of it.
fn margins_of(variant: &str, share: f64, max_call_ms: u64) -> (Judged, Vec<String>) {
    let mut r = rec(variant, "memcg-ext4", 150.0, share);
    r.detection.mechanism.max_call_ms = max_call_ms;
    r.detection.mechanism.max_pause_ms = 100;
    let e = expected();
    let records = [r];
    let v = verdict_of(&records, &e, &plan(&records, 1));
    let c = &v.cells[0];
    let near = crate::report::format::near_lines(c);
    let r = &c.run_verdicts[0];
    let judged = Judged {
        class: r.class,
        margins: r.margins.clone(),
    };
    (judged, near)
}

/// What [`margins_of`]'s verdict made of its run.
struct Judged {
    class: Class,
    margins: Option<super::super::judgement::Margins>,
}

/// A memcg-ext4 `regressed` run stalled 40% of 100 s of writer time,
/// with the stall split into the causes given (None: a record from
/// before the causes), judged against `stall:unrequested`.
fn cause_failures(causes: Option<(u64, u64)>) -> Vec<CellFailure> {
    let mut e = expected();
    e.expect
        .get_mut("memcg-ext4")
        .unwrap()
        .insert("regressed".into(), "stall:unrequested".parse().unwrap());
    let mut r = rec("regressed", "memcg-ext4", 20.0, 0.4);
    (r.job.numjobs, r.detection.fio_wall_s) = (4, 25.0);
    r.detection.mechanism.causes = causes.map(|(unrequested_ms, declined_ms)| Causes {
        unrequested_sleeps: unrequested_ms / 40,
        unrequested_ms,
        declined_sleeps: declined_ms / 40,
        declined_ms,
    });
    let records = [r];
    let v = verdict_of(&records, &e, &plan(&records, 1));
    assert_eq!(
        v.cells[0].expected.unwrap().to_string(),
        "stall:unrequested"
    );
    v.cells[0].failures.clone()
}

#[test]
fn a_stall_expected_with_its_cause_fails_a_run_stalled_by_the_other() {
    assert_eq!(cause_failures(Some((40_000, 0))), []);
    // Mostly declined: 40% stalled, but only 1% unrequested.
    let f = cause_failures(Some((1_000, 39_000)));
    assert_eq!(f.len(), 1, "{f:?}");
    assert_eq!(
        f[0].why,
        "1.00% of writer time in unrequested stall sleeps (module detector; 40.00% stalled \
         in all), below stall_fraction 5%: the stall is not `unrequested`"
    );
    // A record without causes cannot hold a cause.
    let f = cause_failures(None);
    assert_eq!(f.len(), 1, "{f:?}");
    assert!(f[0].why.contains("has no stall causes"), "{f:?}");
}

#[test]
fn a_run_far_from_both_boundaries_is_not_near() {
    // A stall of 40%, 35 points over the stall line; its call 1500 ms
    // past the bound.
    let (r, near) = margins_of("regressed", 0.4, 4_000);
    let m = r.margins.unwrap();
    assert_eq!(m.line, super::super::judgement::Line::Stall);
    assert!((m.share_points - 35.0).abs() < 1e-9, "{m:?}");
    assert_eq!((m.bound_ms, m.latency_ms), (Some(2500.0), Some(1500.0)));
    assert!(!m.near(), "{m:?}");
    assert!(near.is_empty(), "{near:?}");
}

#[test]
fn a_run_within_half_the_ok_band_of_its_line_is_near() {
    // ok at 0.6%: 0.4 points below the ok line, within half the ok band.
    let (r, near) = margins_of("v2", 0.006, 300);
    let m = r.margins.unwrap();
    assert_eq!(r.class, Class::Ok);
    assert!(m.near_share && !m.near_latency, "{m:?}");
    assert_eq!(
        near,
        ["run 1 is 0.400 points below the ok line (near: within 0.5)"]
    );
    // Negative: one short stall sleep (0.1%) in an ok run is not near.
    let (r, near) = margins_of("v2", 0.001, 300);
    assert!(!r.margins.unwrap().near(), "{near:?}");
    // A stall 0.7 points above its line is: within the 1 point the two
    // detectors may differ by.
    let (r, near) = margins_of("regressed", 0.057, 4_000);
    assert!(r.margins.unwrap().near_share);
    assert_eq!(
        near,
        ["run 1 is 0.700 points above the stall line (near: within 1.0)"]
    );
}

#[test]
fn a_run_within_one_pause_of_the_latency_bound_is_near() {
    // ok, its longest call 2450 ms: one 100 ms pause more would reach
    // the 2500 ms bound.
    let (r, near) = margins_of("v2", 0.0, 2_450);
    let m = r.margins.unwrap();
    assert!(m.near_latency && !m.near_share, "{m:?}");
    assert_eq!(m.latency_ms, Some(50.0));
    assert_eq!(
        near,
        [
            "run 1's longest call is +50 ms from the latency bound (2500 ms), within one pause \
             (100 ms)"
        ]
    );
    // Past the bound the margin is negative, and the criterion fails.
    let (r, _) = margins_of("v2", 0.0, 2_600);
    assert_eq!(r.margins.unwrap().latency_ms, Some(-100.0));
}

#[test]
fn an_unclear_run_fails_with_a_negative_margin() {
    // 3% is 2 points on the wrong side of both lines.
    let (r, near) = margins_of("v2", 0.03, 300);
    let m = r.margins.unwrap();
    assert_eq!(r.class, Class::Unclear);
    assert!((m.share_points + 2.0).abs() < 1e-9, "{m:?}");
    assert_eq!(m.latency_ms, None);
    assert!(m.near_share);
    assert_eq!(
        near,
        ["run 1 is 2.000 points on the wrong side of the ok line (near: within 0.5)"]
    );
    // Its cell fails its expectation, margins or not.
    let mut u = rec("v2", "memcg-ext4", 150.0, 0.03);
    u.detection.mechanism.max_pause_ms = 100;
    let records = [u];
    let v = verdict_of(&records, &expected(), &plan(&records, 1));
    assert!(!v.passed());
    // An idle run has no share to measure from.
    let mut idle = rec("v2", "memcg-ext4", 150.0, 0.0);
    idle.detection.mechanism.throttle_sleeps = 0;
    idle.detection.witness.throttle_sleeps = 0;
    set_trace(&mut idle, Some((0.0, 0.0)));
    let records = [idle];
    let v = verdict_of(&records, &expected(), &plan(&records, 1));
    assert_eq!(v.cells[0].run_verdicts[0].margins, None);
}
