use super::*;
use crate::results::{
    detection::writer_record, machine::MachineFacts, problems::problems, witness::Tolerance,
};
use crate::{
    guest::{
        job::Job,
        plan::Detector,
        qemu::{Accel, Clock},
    },
    kernel::build::VariantMeta,
    results::mechanism::Mechanism,
};

/// A results stream recorded from a quick boot (the sampler's file left out).
fn stream(name: &str) -> Stream {
    let path = crate::util::project_root()
        .join("xtask/fixtures/streams")
        .join(name);
    crate::guest::stream::parse(&std::fs::read(path).unwrap())
}

fn build_from(stream: &Stream, variant: &str, scenario: &str, size: &str) -> Result<RunRecord> {
    build_with(stream, variant, scenario, size, Detector::Module)
}

fn build_with(
    stream: &Stream,
    variant: &str,
    scenario: &str,
    size: &str,
    detector: Detector,
) -> Result<RunRecord> {
    let meta = VariantMeta {
        variant: variant.into(),
        ..VariantMeta::default()
    };
    let job = Job {
        size: size.into(),
        numjobs: 4,
        runtime: 5,
        ramp_time: 2,
        bs: "128k".into(),
        write: Default::default(),
    };
    let ctx = RunContext {
        variant: &meta,
        scenario,
        scenario_strictlimit: crate::guest::scenario::by_name(scenario)
            .map(|s| s.strictlimit)
            .unwrap_or(false),
        run: 0,
        machine: MachineFacts {
            accel: Accel::default(),
            clock: Clock::Real,
            // The recorded streams were made on the host's disk.
            disk: crate::guest::scenario::by_name(scenario)
                .is_ok_and(|s| s.disk)
                .then_some(crate::guest::disk::Disk::Host),
            cpu_model: "max".into(),
            cpus: 2,
            memory_mib: 2048,
        },
        job: &job,
        started: "20261202T060724Z".into(),
        wall_secs: 1.0,
        console_log: "console.log".into(),
        console_warnings: Vec::new(),
        samples: None,
        sleeps: None,
        detector,
        // The recorded streams predate the phase wait.
        phase: None,
    };
    build(ctx, stream)
}

const FUSE: &str = "regressed-fuse-strictlimit.bin";
const MEMCG: &str = "v2-memcg-ext4.bin";
const EXT4: &str = "regressed-ext4-global.bin";

fn tolerance() -> Tolerance {
    Tolerance { abs: 2, rel: 0.005 }
}

#[test]
fn recorded_streams_build_usable_records() {
    let r = build_from(&stream(FUSE), "regressed", "fuse-strictlimit", "256M").unwrap();
    assert_eq!(r.detection.writer.writer_domain, "global");
    assert_eq!(
        (
            r.detection.mechanism.stall_sleeps,
            r.detection.mechanism.bg_starts
        ),
        (1950, 0)
    );
    assert_eq!(
        r.detection.witness.throttle_sleeps,
        r.detection.mechanism.throttle_sleeps
    );
    assert!(r.stall_fraction() > 0.5, "{}", r.stall_fraction());
    assert_eq!(r.counters.vm_knobs["vm.dirty_writeback_centisecs"], 500);
    assert!(r.counters.bdi_written_kb > 0);
    assert_eq!(problems(&r, &tolerance()), Vec::<String>::new());

    let r = build_from(&stream(MEMCG), "v2", "memcg-ext4", "16M").unwrap();
    assert_eq!(
        (r.detection.writer.memcg_id, r.detection.writer.cgroup_ino),
        (Some(2), 14)
    );
    assert_eq!(r.detection.witness.bg_starts, 5);
    assert_eq!(r.detection.mechanism.bg_starts, 5);
    // memcg-ext4 streams its file set through memory.max: reclaim met it
    // 466 times and wrote nothing itself.
    assert_eq!(r.counters.memcg_events["max"], 466);
    assert_eq!(r.counters.vmstat_delta["nr_vmscan_write"], 0);
    assert_eq!(problems(&r, &tolerance()), Vec::<String>::new());

    // ext4-global regressed: the global check starts the flusher, whose
    // passes write the writers' pages while they sleep.
    let r = build_from(&stream(EXT4), "regressed", "ext4-global", "16M").unwrap();
    let m = &r.detection.mechanism;
    assert_eq!(
        (m.flushing_sleeps, m.draining_sleeps, m.stall_sleeps),
        (158, 0, 0)
    );
    assert_eq!(problems(&r, &tolerance()), Vec::<String>::new());
}

#[test]
fn a_recorded_draining_disk_is_no_stall_by_either_detector() {
    // memcg-ext4 v2 (quick): the writers slept while passes of the flusher
    // wrote their wb's pages (v2's start kicks them), and a few sleeps while
    // the disk completed what earlier passes submitted: no sleep was a
    // stall. The old definition (no pass running, none asked for) read the
    // disk's draining sleeps as stalls.
    let r = build_from(&stream(MEMCG), "v2", "memcg-ext4", "16M").unwrap();
    let (m, t) = (&r.detection.mechanism, r.detection.tracefs.clone().unwrap());
    assert_eq!(
        (m.flushing_sleeps, m.draining_sleeps, m.stall_sleeps),
        (163, 8, 0)
    );
    // The trace sees the same: a pass's first write by its first bio (ext4
    // writes an inode's chunk over half a second), the same eight drains.
    assert_eq!(
        (t.flushing_sleeps, t.draining_sleeps, t.stall_sleeps),
        (163, 8, 0)
    );
    assert_eq!(m.stall_ms, 0);
    assert!(r.stall_fraction() < 0.001, "{}", r.stall_fraction());
    assert_eq!(problems(&r, &tolerance()), Vec::<String>::new());
    // Its draining sleeps, made stalls in the module's counts (what the
    // old definition said), fail the agreement with the trace: the
    // trace still sees them drain.
    let mut miscounted = r.clone();
    let fifth = (0.2 * crate::results::record::writer_ms(&r.job, r.detection.fio_wall_s)) as u64;
    let m = miscounted.detection.mechanism.measured.as_mut().unwrap();
    m.stall_asleep_us += fifth * 1000;
    m.draining_asleep_us = 0;
    let t = miscounted.detection.tracefs.as_mut().unwrap();
    t.measured.as_mut().unwrap().draining_asleep_us = fifth * 1000;
    let e = crate::test_support::expected();
    let records = [miscounted];
    let v =
        crate::analysis::verdict::verdict_of(&records, &e, &crate::test_support::plan(&records, 1));
    assert!(
        v.cells[0]
            .failures
            .iter()
            .any(|f| f.to_string().contains("the detectors disagree")),
        "{:?}",
        v.cells[0].failures
    );
}

#[test]
fn the_tracefs_detector_classes_a_recorded_boot_as_the_module_did() {
    let s = stream(FUSE);
    let by_module = build_from(&s, "regressed", "fuse-strictlimit", "256M").unwrap();
    let t = by_module.detection.tracefs.clone().unwrap();
    let m = &by_module.detection.mechanism;
    // The same sleeps and starts; of the 1965 sleeps the module classes
    // 1950 stall (no pass that wrote, 8 pages or fewer of the wb
    // completed), all unrequested, and the trace the same ones within a
    // few.
    assert_eq!(
        (t.throttle_sleeps, t.bg_starts),
        (m.throttle_sleeps, m.bg_starts)
    );
    assert_eq!(
        (m.flushing_sleeps, m.draining_sleeps, m.stall_sleeps),
        (15, 0, 1950)
    );
    // (The trace's 4 draining sleeps: completions it sees machine-wide.)
    assert!(t.stall_sleeps.abs_diff(m.stall_sleeps) <= 8, "{t:?}");
    let mc = m.causes.unwrap();
    assert_eq!((mc.unrequested_sleeps, mc.declined_sleeps), (1950, 0));
    // Every stall of the regressed FUSE boot is unrequested: no start
    // was asked for (bg_starts 0).
    let c = t.causes.unwrap();
    assert_eq!(
        (c.unrequested_sleeps, c.declined_sleeps),
        (t.stall_sleeps, 0)
    );
    // A recorded real stall stays a stall, by both: two thirds of the
    // writers' time asleep, every call of a writer up to 5.1 s; the module
    // and the trace measure the same times (one clock): 12 calls, held
    // 39.81 s in all, the longest 5071 ms by both.
    let tr = by_module.tracefs_stall_fraction().unwrap();
    assert!(by_module.stall_fraction() > 0.6 && tr > 0.6, "{tr}");
    assert_eq!((m.max_call_ms, t.max_call_ms), (5068, 5068));
    let (mm, tm) = (m.measured.unwrap(), t.measured.unwrap());
    assert_eq!((mm.calls, tm.calls), (12, 12));
    assert_eq!(mm.max_held_us / 1000, 5071);
    assert!(
        mm.max_held_us.abs_diff(tm.max_held_us) < 2_000,
        "{mm:?} {tm:?}"
    );
    assert!(mm.held_us.abs_diff(tm.held_us) < 10_000, "{mm:?} {tm:?}");
    // Asleep, the stalls took more than the pauses asked for (30.2 s).
    assert_eq!(m.stall_ms, 30_236);
    assert!(by_module.stall_fraction() > by_module.stall_fraction_requested() + 0.1);
    // Without the module's files, judged by the trace alone.
    let bare = without_module(&s);
    let r = build_with(
        &bare,
        "regressed",
        "fuse-strictlimit",
        "256M",
        Detector::Tracefs,
    )
    .unwrap();
    assert_eq!(r.detection.detector, Detector::Tracefs);
    assert_eq!(Some(r.stall_fraction()), by_module.tracefs_stall_fraction());
    assert_eq!(r.detection.mechanism.strictlimit, 1);
    assert_eq!(problems(&r, &tolerance()), Vec::<String>::new());
    // The module asked for but absent: an error naming the file.
    let err = build_from(&bare, "regressed", "fuse-strictlimit", "256M").unwrap_err();
    assert!(err.to_string().contains("wbstall-stats"), "{err}");
    // A trace that lost events is no evidence.
    let mut lost = s.clone();
    edit(&mut lost, "trace-stats", "overrun: 0", "overrun: 12");
    let err = format!(
        "{:#}",
        build_from(&lost, "regressed", "fuse-strictlimit", "256M").unwrap_err()
    );
    assert!(
        err.contains("overran (24 event(s) lost, trace-stats)"),
        "{err}"
    );
}

/// `f` changes the recorded stream; the record must then fail to build
/// with an error containing `want`.
fn fails(name: &str, scenario: &str, f: impl FnOnce(&mut Stream), want: &str) {
    let mut s = stream(name);
    f(&mut s);
    let size = if scenario.starts_with("fuse") {
        "256M"
    } else {
        "16M"
    };
    let e = format!("{:#}", build_from(&s, "v", scenario, size).unwrap_err());
    assert!(e.contains(want), "wanted `{want}` in: {e}");
}

fn edit(s: &mut Stream, file: &str, from: &str, to: &str) {
    let text = s.text(file).unwrap();
    assert!(text.contains(from), "{file} lacks {from}");
    s.files
        .insert(file.into(), text.replace(from, to).into_bytes());
}

#[test]
fn a_mount_without_the_writeback_cache_is_left_out_saying_why() {
    let ready =
        r#"{"server":"my-passthrough","writeback_cache":false,"probe_kb":1024,"dirtied_kb":0}"#;
    fails(
        FUSE,
        "fuse-strictlimit",
        |s| {
            s.files.insert("fuse-main-ready".into(), ready.into());
        },
        "no writeback cache (server \"my-passthrough\"; a 1 MiB probe write dirtied 0 kB)",
    );
    // With the cache, the same stream builds.
    let mut s = stream(FUSE);
    let ok = ready.replace("false", "true").replace(":0}", ":1024}");
    s.files.insert("fuse-main-ready".into(), ok.into_bytes());
    assert!(build_from(&s, "v", "fuse-strictlimit", "256M").is_ok());
}

#[test]
fn a_missing_value_fails_the_boot_instead_of_reading_as_zero() {
    fails(
        FUSE,
        "fuse-strictlimit",
        |s| edit(s, "wbstall-stats", " stall_ms=30236", ""),
        "lacks `stall_ms`",
    );
    fails(
        FUSE,
        "fuse-strictlimit",
        |s| {
            s.files.remove("fio-wall");
        },
        "the guest sent no `fio-wall`",
    );
    fails(
        FUSE,
        "fuse-strictlimit",
        |s| edit(s, "fio-wall", " ", ""),
        "fio-wall",
    );
    fails(
        FUSE,
        "fuse-strictlimit",
        |s| edit(s, "wbstall-summary", "format=6", "format=2"),
        "writes format=2",
    );
    fails(
        FUSE,
        "fuse-strictlimit",
        |s| edit(s, "wbstall-summary", " drain_floor_pages=8", ""),
        "lacks `drain_floor_pages`",
    );
    fails(
        FUSE,
        "fuse-strictlimit",
        |s| edit(s, "wbstall-stats", " unrequested_sleeps=1950", ""),
        "lacks `unrequested_sleeps`",
    );
    fails(
        FUSE,
        "fuse-strictlimit",
        |s| {
            s.files.remove("witness-balance_dirty_pages");
        },
        "no `witness-balance_dirty_pages`",
    );
    fails(
        FUSE,
        "fuse-strictlimit",
        |s| {
            s.files.remove("vm-knobs");
        },
        "no `vm-knobs`",
    );
    fails(
        FUSE,
        "fuse-strictlimit",
        |s| {
            s.files.remove("writer-domain");
        },
        "no `writer-domain`",
    );
    fails(
        MEMCG,
        "memcg-ext4",
        |s| {
            s.files.remove("memcg-events");
        },
        "no `memcg-events`",
    );
    fails(
        MEMCG,
        "memcg-ext4",
        |s| edit(s, "memcg-events", "max 466\n", ""),
        "no `max` line",
    );
    fails(
        MEMCG,
        "memcg-ext4",
        |s| edit(s, "bdi-stats-before", "BdiWritten", "BdiWrote"),
        "lack BdiWritten",
    );
}

/// The stream of a boot without the module (`--detector tracefs`).
fn without_module(s: &Stream) -> Stream {
    let mut bare = s.clone();
    for f in ["wbstall-stats", "wbstall-thresholds", "wbstall-summary"] {
        bare.files.remove(f);
    }
    bare.files.retain(|k, _| !k.starts_with("ktap-"));
    bare
}

/// Takes the last `n` throttle sleeps out of the trace (none of the
/// witness's counts).
fn drop_trace_sleeps(s: &mut Stream, n: usize) {
    let text = s.text("trace-events").unwrap();
    let mut lines: Vec<&str> = text.lines().collect();
    for _ in 0..n {
        let last = lines
            .iter()
            .rposition(|l| l.contains(": balance_dirty_pages: "))
            .unwrap();
        lines.remove(last);
    }
    s.files.insert(
        "trace-events".into(),
        (lines.join("\n") + "\n").into_bytes(),
    );
}

#[test]
fn an_empty_trace_in_module_mode_is_an_error() {
    // The module and the witness agree on 1000+ sleeps; the trace is
    // empty, so the tracefs detector would read 0% stalled.
    let mut s = stream(MEMCG);
    for f in ["trace-events", "trace-sched"] {
        s.files.insert(f.into(), b"# tracer: nop\n#\n".to_vec());
    }
    let r = build_from(&s, "v2", "memcg-ext4", "16M").unwrap();
    let p = problems(&r, &tolerance());
    assert!(
        p[0].starts_with(
            "the tracefs detector found no throttle sleep of the writer's wb (BDI 253:0, \
             cgroup inode 14) in a trace of 0 event(s), the witness counted"
        ) && p[0].ends_with("an empty trace in module mode is an error"),
        "{p:?}"
    );
    // Mis-keyed (another cgroup's wb): the same, and both counts disagree.
    let mut s = stream(MEMCG);
    edit(&mut s, "trace-events", "cgroup_ino=14", "cgroup_ino=15");
    let r = build_from(&s, "v2", "memcg-ext4", "16M").unwrap();
    let p = problems(&r, &tolerance());
    assert_eq!(p.len(), 3, "{p:?}");
    assert!(p[0].contains("an empty trace in module mode is an error"));
    assert!(p[1].contains("the tracefs detector disagree on throttle_sleeps"));
    assert!(p[2].starts_with(
        "the witness and the tracefs detector disagree on bg_starts: the hist triggers \
         counted 5, the trace 0"
    ));
}

#[test]
fn a_trace_that_lost_sleeps_is_a_problem_naming_the_tracefs_detector() {
    // Module mode: the module agrees with the witness, the trace has 20
    // sleeps fewer (the tolerance is 2 events or 0.5%, 10 of 2081 here).
    let mut s = stream(FUSE);
    drop_trace_sleeps(&mut s, 20);
    let r = build_from(&s, "regressed", "fuse-strictlimit", "256M").unwrap();
    let n = r.detection.witness.throttle_sleeps;
    assert_eq!(r.detection.mechanism.throttle_sleeps, n);
    assert_eq!(
        problems(&r, &tolerance()),
        [format!(
            "the witness and the tracefs detector disagree on throttle_sleeps: the hist \
             triggers counted {n}, the trace {} (tolerance: 2 events or 0.5%)",
            n - 20
        )]
    );
    // Tracefs mode: the mechanism is the trace's, and it is the trace's
    // own count that is held to the hist, named as such.
    let bare = without_module(&s);
    let r = build_with(
        &bare,
        "regressed",
        "fuse-strictlimit",
        "256M",
        Detector::Tracefs,
    )
    .unwrap();
    let p = problems(&r, &tolerance());
    assert_eq!(p.len(), 1, "{p:?}");
    assert!(
        p[0].contains("the tracefs detector disagree on throttle_sleeps")
            && !p[0].contains("the module"),
        "{p:?}"
    );
    // Within the tolerance: usable.
    let mut s = stream(FUSE);
    drop_trace_sleeps(&mut s, 2);
    let r = build_from(&s, "regressed", "fuse-strictlimit", "256M").unwrap();
    assert_eq!(problems(&r, &tolerance()), Vec::<String>::new());
}

#[test]
fn reclaim_that_wrote_pages_makes_a_memcg_run_no_evidence_and_memory_max_alone_does_not() {
    let bare = without_module(&stream(MEMCG));
    let r = build_with(&bare, "v2", "memcg-ext4", "16M", Detector::Tracefs).unwrap();
    assert_eq!(
        (r.detection.writer.memcg_id, r.counters.memcg_events["max"]),
        (None, 466)
    );
    assert_eq!(problems(&r, &tolerance()), Vec::<String>::new());
    // Reclaim's own pageout: writeback nobody asked for.
    let mut wrote = r.clone();
    wrote
        .counters
        .vmstat_delta
        .insert("nr_vmscan_write".into(), 7);
    assert!(
        problems(&wrote, &tolerance())[0].starts_with("reclaim wrote 7 page(s) itself"),
        "{:?}",
        problems(&wrote, &tolerance())
    );
    wrote.counters.vmstat_delta.remove("nr_vmscan_write");
    assert!(problems(&wrote, &tolerance())[0].contains("nr_vmscan_write is not in the record"));
    // A record from before reclaim's writeback was counted (no causes)
    // keeps the older rule: memory.max reached is no evidence.
    let mut old = r.clone();
    old.detection.tracefs.as_mut().unwrap().causes = None;
    assert!(problems(&old, &tolerance())[0]
        .starts_with("the writers' cgroup hit memory.max 466 time(s), and this record predates"));
    // Without memory.events the run cannot say.
    let mut none = bare.clone();
    none.files.remove("memcg-events");
    let e = build_with(&none, "v2", "memcg-ext4", "16M", Detector::Tracefs).unwrap_err();
    assert!(format!("{e:#}").contains("no `memcg-events`"), "{e:#}");
    let mut r = build_with(&bare, "v2", "memcg-ext4", "16M", Detector::Tracefs).unwrap();
    r.counters.memcg_events.clear();
    assert!(problems(&r, &tolerance())[0].contains("no memory.events `max` count"));
}

#[test]
fn drops_on_the_wake_hist_do_not_widen_the_sleep_comparison() {
    let mut s = stream(MEMCG);
    edit(
        &mut s,
        "witness-writeback_wake_background",
        "Dropped: 0",
        "Dropped: 7",
    );
    let r = build_from(&s, "v2", "memcg-ext4", "16M").unwrap();
    // 7 starts more than the wake hist counted: its drops allow them.
    let mut starts = r.clone();
    starts.detection.mechanism.bg_starts += 7;
    assert_eq!(problems(&starts, &tolerance()), Vec::<String>::new());
    // 7 sleeps more than the sleep hist counted: nothing allows them.
    let mut sleeps = r.clone();
    sleeps.detection.mechanism.throttle_sleeps += 7;
    sleeps.detection.mechanism.flushing_sleeps += 7;
    let n = r.detection.witness.throttle_sleeps;
    assert_eq!(
        problems(&sleeps, &tolerance()),
        [format!(
            "the witness and the module disagree on throttle_sleeps: tracefs counted {n}, \
             the module {} (tolerance: 2 events or 0.5%)",
            n + 7
        )]
    );
}

#[test]
fn a_witness_that_disagrees_leaves_the_run_out() {
    let mut s = stream(MEMCG);
    edit(&mut s, "wbstall-stats", "bg_starts=5", "bg_starts=1200");
    let r = build_from(&s, "v2", "memcg-ext4", "16M").unwrap();
    assert_eq!(
            problems(&r, &tolerance()),
            ["the witness and the module disagree on bg_starts: tracefs counted 5, the module 1200 (tolerance: 2 events or 0.5%)"]
        );
    // The same stream judged as strictlimit FUSE: the BDI says otherwise.
    let r = build_from(&stream(MEMCG), "v2", "fuse-strictlimit", "16M").unwrap();
    assert_eq!(
        problems(&r, &tolerance()).len(),
        2,
        "{:?}",
        problems(&r, &tolerance())
    );
}

#[test]
fn counters_without_a_field_are_kept_by_name() {
    let stats =
        debugfs::parse_stats(include_str!("../../../rust-module/fixtures/stats.txt")).unwrap();
    let m = Mechanism::from_record(writer_record(&stats, "254:0", false).unwrap()).unwrap();
    // foreign_sleeps, lost_ends, work_sync and work_other have no field: they are in
    // `more`, and every counter answers to its key.
    assert_eq!(
        m.more.keys().collect::<Vec<_>>(),
        ["foreign_sleeps", "lost_ends", "work_other", "work_sync"]
    );
    assert_eq!(m.get("work_sync"), m.more.get("work_sync").copied());
    assert_eq!(m.get("stall_sleeps"), Some(m.stall_sleeps));
    assert_eq!(m.get("no_such_counter"), None);
}

#[test]
fn the_writer_is_the_root_or_the_busiest_memcg_domain() {
    let stats =
        debugfs::parse_stats(include_str!("../../../rust-module/fixtures/stats.txt")).unwrap();
    let root = writer_record(&stats, "254:0", false).unwrap();
    assert_eq!(debugfs::value(root, "memcg_id"), Some(0));
    let memcg = writer_record(&stats, "254:0", true).unwrap();
    assert_eq!(debugfs::value(memcg, "memcg_id"), Some(42));
    assert!(writer_record(&stats, "0:45", true).is_none());
}
