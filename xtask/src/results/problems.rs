//! Why a completed run is not usable evidence: each check of a built
//! `RunRecord` ([`problems`]), the witness's disagreements with the two
//! detectors among them. Such a run is listed and left out of every median.

use serde_json::Value;

use crate::{
    guest::plan::Detector,
    results::{
        record::{RunRecord, KUNIT_SUITE},
        witness::{self, Drops, Tolerance},
    },
};

/// Clocksources whose resolution is a tick: fio's latencies and the module's
/// millisecond counters would be meaningless on them.
const COARSE_CLOCKSOURCES: &[&str] = &["jiffies", "refined-jiffies"];

/// The module's KUnit suite must have run and passed (no module, no suite:
/// the tracefs detector).
fn kunit_problem(r: &RunRecord) -> Option<String> {
    if r.detection.detector == Detector::Tracefs {
        None
    } else if !r.counters.ktap_suites.iter().any(|s| s == KUNIT_SUITE) {
        Some(format!(
            "the module's KUnit suite `{KUNIT_SUITE}` did not report (suites: {})",
            if r.counters.ktap_suites.is_empty() {
                "none".to_string()
            } else {
                r.counters.ktap_suites.join(", ")
            }
        ))
    } else if !r.counters.ktap.passed() {
        Some(format!(
            "the module's KUnit tests did not pass: {}",
            r.counters.ktap.summary()
        ))
    } else {
        None
    }
}

/// The witness's disagreements with the detectors: the module's counters (in
/// module mode; under the tracefs detector the mechanism is the trace's,
/// compared below) and the tracefs detector's own counts, in every mode.
pub fn disagreements(r: &RunRecord, tolerance: &Tolerance) -> Vec<String> {
    let drops = Drops::of(&r.detection.witness, r.detection.witness_drops);
    let mut d = Vec::new();
    if r.detection.detector == Detector::Module {
        d.extend(
            tolerance.disagreements(
                &witness::MODULE,
                &r.detection
                    .witness
                    .module_pairs(&drops, &r.detection.mechanism),
            ),
        );
    }
    if let Some(t) = &r.detection.tracefs {
        d.extend(
            tolerance.disagreements(&witness::TRACE, &r.detection.witness.trace_pairs(&drops, t)),
        );
    }
    d
}

/// The tracefs detector must have seen the writer's sleeps when the witness
/// did: an empty or mis-keyed trace reads as 0% stalled, which would agree
/// with every ok cell. (Records from before the detector ran in every boot
/// have no trace to check.)
fn trace_problem(r: &RunRecord) -> Option<String> {
    match &r.detection.tracefs {
        Some(t) if t.throttle_sleeps == 0 && r.detection.witness.throttle_sleeps > 0 => {
            Some(format!(
                "the tracefs detector found no throttle sleep of the writer's wb (BDI {}, cgroup \
             inode {}) in a trace of {} event(s), the witness counted {}: an empty trace in \
             {} mode is an error",
                r.detection.writer.bdi,
                r.detection.writer.cgroup_ino,
                t.events,
                r.detection.witness.throttle_sleeps,
                r.detection.detector.name()
            ))
        }
        _ => None,
    }
}

/// Every sleep must have been classed, but for those still in progress when
/// the counts were read (at most one per writer): a sleep whose end a
/// detector did not see is neither a stall nor not one, and enough of them
/// would hide a stall share.
fn unclassed_problems(r: &RunRecord) -> Vec<String> {
    let writers = u64::from(r.job.numjobs);
    let mut p = Vec::new();
    if r.detection.detector == Detector::Module {
        let m = &r.detection.mechanism;
        let unclassed = m.throttle_sleeps.saturating_sub(m.classed_sleeps());
        if unclassed > writers {
            p.push(format!(
                "the module classed {} of {} throttle sleeps ({} with no end seen, lost_ends={}): \
                 more than the {writers} writer(s) could have in progress; the classes do not \
                 cover the run",
                m.classed_sleeps(),
                m.throttle_sleeps,
                unclassed,
                m.get("lost_ends")
                    .map_or("absent".into(), |n| n.to_string())
            ));
        }
    }
    if let Some(t) = &r.detection.tracefs {
        if t.unended_sleeps > writers {
            p.push(format!(
                "the tracefs detector could not class {} of {} throttle sleeps (their end lies \
                 after the trace's last global_dirty_state): more than the {writers} writer(s) \
                 could have in progress",
                t.unended_sleeps, t.throttle_sleeps
            ));
        }
    }
    p
}

/// Pages reclaim wrote itself (`nr_vmscan_write`, `pageout()`) are cleaned
/// outside every class: a run with any is not evidence. Reclaim that drops
/// clean pages (memcg-ext4 streams new data through its memory.max) writes
/// none, so hitting memory.max is counted (`memory.events` max), not refused.
/// When reclaim wakes the flusher instead (`WB_REASON_VMSCAN`, 5-14 passes a
/// run of memcg-ext4 on 2026-12-03), that pass is a pass like any other: a
/// sleep it wrote pages during is `flushing`, so it can only lower a stall
/// share, never hide one; the trace counts those passes and their pages
/// (`work_vmscan`, `vmscan_pages`) and the report shows them.
/// Records from before the trace counted reclaim's passes (no causes) are
/// held to the older, stricter rule: a memcg run must not have hit memory.max.
fn reclaim_writeback(r: &RunRecord) -> Vec<String> {
    let mut p = Vec::new();
    let max = r.counters.memcg_events.get("max").copied();
    if r.detection.writer.writer_domain == "memcg" && max.is_none() {
        p.push(
            "the writers' cgroup has no memory.events `max` count: the run cannot show how \
             often it reached memory.max"
                .into(),
        );
    }
    let counted = r.detection.tracefs.as_ref().filter(|t| t.causes.is_some());
    match counted {
        Some(_) => match r.counters.vmstat_delta.get("nr_vmscan_write") {
            Some(&n) if n > 0 => p.push(format!(
                "reclaim wrote {n} page(s) itself (nr_vmscan_write): writeback nobody's \
                     throttle asked for hides a missing start"
            )),
            Some(_) => {}
            None => p.push(
                "/proc/vmstat's nr_vmscan_write is not in the record: the run cannot show \
                     that reclaim wrote nothing"
                    .into(),
            ),
        },
        None => {
            if let Some(n) = max.filter(|&n| n > 0) {
                p.push(format!(
                    "the writers' cgroup hit memory.max {n} time(s), and this record predates \
                     the count of reclaim's own writeback: use a smaller --size or a larger \
                     memcg_max"
                ));
            }
        }
    }
    p
}

/// What makes a completed run invalid as evidence, beyond fio's own errors.
/// Such a run is listed and left out of every median.
pub fn problems(r: &RunRecord, tolerance: &Tolerance) -> Vec<String> {
    let mut p: Vec<String> = kunit_problem(r).into_iter().collect();
    // Records from before the clocksource was recorded have none to check.
    if let Some(cs) = r.boot.guest_env.get("clocksource") {
        if COARSE_CLOCKSOURCES.contains(&cs.as_str()) {
            p.push(format!(
                "the guest ran on the {cs} clocksource (tick resolution): latencies and \
                 stall times are meaningless (check the CPU model and CONFIG_HPET_TIMER)"
            ));
        }
    }
    // The scenario's strictlimit as recorded with the run, not as the
    // scenario reads today.
    let strict = r.detection.writer.scenario_strictlimit;
    let want = u8::from(strict).to_string();
    let have = r
        .counters
        .bdi_knobs
        .get("strict_limit")
        .map_or("absent", String::as_str);
    if have != want {
        p.push(format!(
            "the BDI's strict_limit is {have}, the scenario needs {want}"
        ));
    }
    // Without the module, the knob above is the only witness.
    if r.detection.detector == Detector::Module
        && r.detection.mechanism.strictlimit != u64::from(strict)
    {
        p.push(format!(
            "the module saw strictlimit={} on the writer's BDI, the scenario needs {}",
            r.detection.mechanism.strictlimit,
            u8::from(strict)
        ));
    }
    p.extend(trace_problem(r));
    p.extend(unclassed_problems(r));
    p.extend(disagreements(r, tolerance));
    if r.fuse.verify_ok == Some(false) {
        p.push("fio verify on the data-keeping FUSE mount failed".into());
    }
    if let Some(ready) = &r.fuse.fuse_ready {
        if ready["writeback_cache"] != Value::Bool(true) {
            p.push("the FUSE writeback cache was not negotiated".into());
        }
    }
    if let Some(stats) = &r.fuse.fuse_stats {
        if stats["writes_cached"].as_u64() == Some(0) {
            p.push("the FUSE server saw no page-cache (FUSE_WRITE_CACHE) writes".into());
        }
    }
    p.extend(reclaim_writeback(r));
    if let Some((line, function)) = crate::results::warnings::first_named(&r.boot.dmesg_warnings) {
        p.push(format!(
            "warning: dmesg has {} warning line(s), first{}: {line}",
            r.boot.dmesg_warnings.len(),
            function.map_or_else(String::new, |f| format!(" in {f}"))
        ));
    }
    p
}
