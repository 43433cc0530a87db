//! The builders the tests of several stages share: an expectations file, the
//! plan and judgement of some records, and a record that is usable evidence.

use std::path::Path;

use crate::{
    analysis::{expected::Expected, judgement::Planned},
    guest::{run_id::RunId, scenario},
    results::{ktap, record::RunRecord, session::Session, tracefs},
};

pub const EXPECTED: &str = r#"
[criteria]
stall_fraction = 0.05
ok_fraction = 0.01
[witness]
abs = 2
rel = 0.005
[expect.fuse-strictlimit]
regressed = "stall"
v1 = "ok"
v2 = "ok"
upstream = "ok"
[expect.fuse-nostrict]
regressed = "ok"
[stall_throughput_ratio]
fuse-strictlimit = 0.5
[latency.memcg-ext4]
max_call_share_of_writeback_interval = 0.5
[expect.memcg-ext4]
regressed = "stall"
v2 = "ok"
"#;

pub fn expected() -> Expected {
    Expected::parse(EXPECTED, Path::new("e.toml")).unwrap()
}

/// The plan of some records: their variants and scenarios, `runs` each.
pub fn plan(records: &[RunRecord], runs: u32) -> Planned {
    let mut p = Planned {
        runs,
        ..Planned::default()
    };
    for r in records {
        if !p.variants.contains(&r.id.variant) {
            p.variants.push(r.id.variant.clone());
        }
        if !p.scenarios.contains(&r.id.scenario) {
            p.scenarios.push(r.id.scenario.clone());
        }
    }
    p
}

/// The judgement of `records` under `session` (its roles: the
/// repository's for a default session), `runs` planned per cell of their
/// variants and scenarios.
pub fn judged<'a>(
    session: &'a Session,
    records: &'a [RunRecord],
    expected: &'a Expected,
    runs: u32,
) -> crate::analysis::judge::Judgement<'a> {
    let roles = crate::analysis::judge::session_roles(session).unwrap();
    crate::analysis::judge::Judgement::of(session, records, expected, &plan(records, runs), roles)
}

/// A floor of `sd` a run (log scale) for every judged metric, in each of
/// `scenarios`: what a session measured with its floors judges costs by.
pub fn floors(
    sd: f64,
    scenarios: &[&str],
) -> std::collections::BTreeMap<String, crate::results::floor::FloorOf> {
    let floor = crate::results::floor::Floor {
        runs: 48,
        source: "a test's".into(),
        sd: (crate::analysis::cost::keys().into_iter())
            .map(|k| (k.to_string(), sd))
            .collect(),
    };
    (scenarios.iter())
        .map(|s| {
            let f = crate::results::floor::FloorOf::Measured(floor.clone());
            (s.to_string(), f)
        })
        .collect()
}

/// The writers' time of [`rec`]'s records, ms: 4 writers x 25 s of fio.
pub const WRITER_MS: f64 = 100_000.0;

/// `share` of [`WRITER_MS`], in ms: what a record's share is derived from.
pub fn ms_of(share: f64) -> u64 {
    (share * WRITER_MS).round() as u64
}

/// Sets the tracefs detector's stall and draining shares of `r` (its
/// sleeps' times); `None` leaves the record without that detector.
pub fn set_trace(r: &mut RunRecord, shares: Option<(f64, f64)>) {
    r.detection.tracefs = shares.map(|(stall, draining)| tracefs::Detected {
        throttle_sleeps: r.detection.witness.throttle_sleeps,
        bg_starts: r.detection.witness.bg_starts,
        stall_ms: ms_of(stall),
        draining_ms: ms_of(draining),
        ..tracefs::Detected::default()
    });
}

/// A record that is usable evidence, with just what the verdict reads:
/// throttled (throttle_sleeps > 0), its witness agreeing with the module
/// and with the tracefs detector, which saw the same stall share.
pub fn rec(variant: &str, scenario: &str, bw: f64, stall: f64) -> RunRecord {
    let strict = scenario::by_name(scenario).unwrap().strictlimit;
    let mut r = RunRecord {
        id: RunId::new(scenario, variant, 0),
        ..RunRecord::default()
    };
    r.detection.fio_wall_s = 25.0;
    r.counters.ktap = ktap::parse("KTAP version 1\n1..1\nok 1 wbstall_table\n");
    r.counters.ktap_suites = vec!["wbstall".into()];
    r.job.numjobs = 4;
    r.detection.mechanism.stall_ms = ms_of(stall);
    r.fio.bw_mib_s = bw;
    r.fio.clat_max_us = if stall > 0.05 { 4_000_000.0 } else { 300_000.0 };
    r.detection.mechanism.strictlimit = u64::from(strict);
    r.detection.writer.scenario_strictlimit = strict;
    r.counters
        .bdi_knobs
        .insert("strict_limit".into(), u8::from(strict).to_string());
    r.counters
        .vm_knobs
        .insert("vm.dirty_writeback_centisecs".into(), 500);
    r.detection.mechanism.throttle_events = 1200;
    r.detection.mechanism.throttle_sleeps = 1000;
    r.detection.mechanism.stall_sleeps = (stall * 1000.0) as u64;
    r.detection.mechanism.flushing_sleeps = 1000 - r.detection.mechanism.stall_sleeps;
    r.detection.mechanism.max_call_ms = if stall > 0.05 { 4_000 } else { 300 };
    r.detection.mechanism.bg_starts = if stall > 0.05 { 0 } else { 4000 };
    r.detection.witness = crate::results::witness::Witness {
        throttle_events: r.detection.mechanism.throttle_events,
        throttle_sleeps: r.detection.mechanism.throttle_sleeps,
        bg_starts: r.detection.mechanism.bg_starts,
        dropped: 0,
    };
    set_trace(&mut r, Some((stall, 0.0)));
    r
}
