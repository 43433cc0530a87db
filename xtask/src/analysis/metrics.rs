//! Every number a run is reported by, in one registry: its key (the 0-day
//! style name), its label, its unit, its kind, and how to read it from a run.
//! The terminal table, the Markdown tables and the plots take their values
//! from here; a new metric is one line (a new module counter: one line with
//! its key, as the module's `format.rs` names it).
//!
//! Runs aggregate by kind: a rate (MiB/s, IOPS) by the harmonic mean, as
//! mmtests does (the mean of rates over equal work is the harmonic one), the
//! others by the arithmetic mean.

use crate::{
    analysis::stats,
    guest::plan::Detector,
    results::{measured::Measured, record::RunRecord, tracefs::Cause},
};

/// What a metric measures, which decides how runs aggregate.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Kind {
    /// Work per time: aggregated by the harmonic mean.
    Rate,
    /// Events, pages or bytes in a run.
    Count,
    /// A part of a whole, in percent.
    Share,
    /// A duration (a latency, a pause).
    Time,
}

impl Kind {
    /// The name of [`Kind::aggregate`], as the reports label it.
    pub fn aggregate_name(self) -> &'static str {
        match self {
            Kind::Rate => "harmonic mean",
            _ => "mean",
        }
    }

    /// The runs' aggregate, the one of this kind: harmonic mean for rates,
    /// arithmetic otherwise. None for no values (and for a negative rate).
    pub fn aggregate(self, values: &[f64]) -> Option<f64> {
        if values.is_empty() {
            return None;
        }
        match self {
            Kind::Rate => harmonic_mean(values),
            _ => Some(stats::mean(values)),
        }
    }
}

/// n / Σ(1/x); None if any x is negative, and 0 (its limit) with a run
/// that did no work.
pub fn harmonic_mean(values: &[f64]) -> Option<f64> {
    if values.is_empty() || values.iter().any(|&x| x < 0.0) {
        return None;
    }
    if values.contains(&0.0) {
        return Some(0.0);
    }
    Some(values.len() as f64 / values.iter().map(|x| 1.0 / x).sum::<f64>())
}

/// One reported number of a run.
pub struct Metric {
    /// The 0-day style name: `<source>.<name>_<unit>`.
    pub key: &'static str,
    /// The terminal table's row label.
    pub label: &'static str,
    pub unit: &'static str,
    pub kind: Kind,
    /// The run's value; None where the run has none (never a made-up zero).
    pub extract: fn(&RunRecord) -> Option<f64>,
}

impl Metric {
    /// The values of `runs` that have one.
    pub fn values(&self, runs: &[&RunRecord]) -> Vec<f64> {
        runs.iter().filter_map(|r| (self.extract)(r)).collect()
    }
}

/// The share of writer time in stall sleeps of `cause`, by `detector`, on
/// the run's basis (time asleep): None where that detector did not name
/// causes (older records, a boot without the module).
fn cause_share(r: &RunRecord, detector: Detector, cause: Cause) -> Option<f64> {
    r.cause_fraction(detector, cause).map(|f| f * 100.0)
}

/// A measured time of `detector`'s, µs, as a share of writer time, in
/// percent; None in records from before measured times, or where the
/// detector does not measure it (`us` says None).
fn measured_share(
    r: &RunRecord,
    detector: Detector,
    us: fn(&Measured) -> Option<u64>,
) -> Option<f64> {
    let m = match detector {
        Detector::Module => r.detection.mechanism.measured.as_ref(),
        Detector::Tracefs => r.tracefs_measured(),
    }?;
    r.share_of_writer_us(us(m)?).map(|f| f * 100.0)
}

/// A measured time of the module's, µs, in ms.
fn measured_ms(r: &RunRecord, us: fn(&Measured) -> u64) -> Option<f64> {
    r.detection
        .mechanism
        .measured
        .as_ref()
        .map(|m| us(m) as f64 / 1000.0)
}

/// The share of the bdi's written pages (`BdiWritten`, all its wbs) that no
/// flusher pass wrote: what the writers flushed themselves (fio's
/// `fadvise(DONTNEED)` at every loop with `invalidate=1`). None in records
/// without the passes' pages.
fn writers_own_writeback(r: &RunRecord) -> Option<f64> {
    let pass_kb = r.detection.tracefs.as_ref()?.bdi_pass_pages? as f64 * 4.0;
    let written_kb = r.counters.bdi_written_kb as f64;
    (written_kb > 0.0).then(|| (100.0 * (1.0 - pass_kb / written_kb)).max(0.0))
}

/// A counter of the module's `stats` line, by its key.
fn counter(r: &RunRecord, key: &str) -> Option<f64> {
    r.detection.mechanism.get(key).map(|v| v as f64)
}

const fn m(
    key: &'static str,
    label: &'static str,
    unit: &'static str,
    kind: Kind,
    extract: fn(&RunRecord) -> Option<f64>,
) -> Metric {
    Metric {
        key,
        label,
        unit,
        kind,
        extract,
    }
}

/// Every metric, in report order: throughput, latency, the module's mechanism,
/// vmstat, the tracefs witness, the BDI.
pub const ALL: &[Metric] = &[
    m(
        "fio.write_bw_MiB/s",
        "write MiB/s",
        "MiB/s",
        Kind::Rate,
        |r| Some(r.fio.bw_mib_s),
    ),
    m("fio.write_iops", "IOPS", "1/s", Kind::Rate, |r| {
        Some(r.fio.iops)
    }),
    m("fio.clat_p50_ms", "clat p50 ms", "ms", Kind::Time, |r| {
        r.fio.clat_at(50.0).map(|v| v / 1000.0)
    }),
    m("fio.clat_p99_ms", "clat p99 ms", "ms", Kind::Time, |r| {
        r.fio.clat_at(99.0).map(|v| v / 1000.0)
    }),
    m("fio.clat_max_ms", "clat max ms", "ms", Kind::Time, |r| {
        Some(r.fio.clat_max_us / 1000.0)
    }),
    m(
        "wbstall.stall_share_%",
        "stall share of writer time (asleep)",
        "%",
        Kind::Share,
        |r| Some(r.stall_fraction() * 100.0),
    ),
    m(
        "wbstall.stall_share_requested_%",
        "stall share, by the pauses asked for",
        "%",
        Kind::Share,
        |r| Some(r.stall_fraction_requested() * 100.0),
    ),
    m(
        "tracefs.stall_share_%",
        "stall share, tracefs detector (asleep)",
        "%",
        Kind::Share,
        |r| r.tracefs_stall_fraction().map(|f| f * 100.0),
    ),
    m(
        "tracefs.stall_share_requested_%",
        "stall share, tracefs detector, by the pauses asked for",
        "%",
        Kind::Share,
        |r| {
            (r.detection.tracefs.as_ref())
                .and_then(|t| r.share_of_writer_time(t.stall_ms))
                .map(|f| f * 100.0)
        },
    ),
    m(
        "wbstall.unrequested_share_%",
        "stall: unrequested (nobody asked), asleep",
        "%",
        Kind::Share,
        |r| cause_share(r, Detector::Module, Cause::Unrequested),
    ),
    m(
        "wbstall.declined_share_%",
        "stall: declined (asked, nothing written), asleep",
        "%",
        Kind::Share,
        |r| cause_share(r, Detector::Module, Cause::Declined),
    ),
    m(
        "tracefs.unrequested_share_%",
        "stall: unrequested, tracefs detector",
        "%",
        Kind::Share,
        |r| cause_share(r, Detector::Tracefs, Cause::Unrequested),
    ),
    m(
        "tracefs.declined_share_%",
        "stall: declined, tracefs detector",
        "%",
        Kind::Share,
        |r| cause_share(r, Detector::Tracefs, Cause::Declined),
    ),
    m(
        "wbstall.stall_sleeps",
        "stall_sleeps",
        "",
        Kind::Count,
        |r| counter(r, "stall_sleeps"),
    ),
    m("wbstall.stall_ms", "stall_ms", "ms", Kind::Time, |r| {
        counter(r, "stall_ms")
    }),
    m(
        "wbstall.draining_share_%",
        "draining share of writer time (asleep)",
        "%",
        Kind::Share,
        |r| Some(r.draining_fraction() * 100.0),
    ),
    m(
        "wbstall.draining_share_requested_%",
        "draining share, by the pauses asked for",
        "%",
        Kind::Share,
        |r| Some(r.draining_fraction_requested() * 100.0),
    ),
    m(
        "tracefs.draining_share_%",
        "draining share, tracefs detector",
        "%",
        Kind::Share,
        |r| r.tracefs_draining_fraction().map(|f| f * 100.0),
    ),
    m(
        "wbstall.flushing_share_%",
        "flushing share of writer time (asleep)",
        "%",
        Kind::Share,
        |r| match r.measured() {
            Some(m) => r
                .share_of_writer_us(m.flushing_asleep_us)
                .map(|f| f * 100.0),
            None => r
                .share_of_writer_time(r.detection.mechanism.flushing_ms)
                .map(|f| f * 100.0),
        },
    ),
    m(
        "wbstall.flushing_share_requested_%",
        "flushing share, by the pauses asked for",
        "%",
        Kind::Share,
        |r| {
            r.share_of_writer_time(r.detection.mechanism.flushing_ms)
                .map(|f| f * 100.0)
        },
    ),
    m(
        "tracefs.flushing_share_%",
        "flushing share, tracefs detector (asleep)",
        "%",
        Kind::Share,
        |r| match (r.measured(), r.tracefs_measured()) {
            (Some(_), Some(t)) => r
                .share_of_writer_us(t.flushing_asleep_us)
                .map(|f| f * 100.0),
            (Some(_), None) => None,
            (None, _) => (r.detection.tracefs.as_ref())
                .and_then(|t| r.share_of_writer_time(t.flushing_ms))
                .map(|f| f * 100.0),
        },
    ),
    m(
        "wbstall.held_share_%",
        "held in balance_dirty_pages() calls (measured)",
        "%",
        Kind::Share,
        |r| measured_share(r, Detector::Module, |m| Some(m.held_us)),
    ),
    m(
        "tracefs.held_share_%",
        "held in calls, tracefs detector (measured)",
        "%",
        Kind::Share,
        |r| measured_share(r, Detector::Tracefs, |m| Some(m.held_us)),
    ),
    m(
        "wbstall.runq_share_%",
        "run-queue wait after the sleeps (off a CPU, not asleep)",
        "%",
        Kind::Share,
        |r| {
            measured_share(r, Detector::Module, |m| {
                Some(m.off_cpu_us()?.saturating_sub(m.asleep_us()))
            })
        },
    ),
    m(
        "wbstall.max_held_ms",
        "longest call held (measured)",
        "ms",
        Kind::Time,
        |r| measured_ms(r, |m| m.max_held_us),
    ),
    m(
        "tracefs.max_held_ms",
        "longest call held, tracefs detector (measured)",
        "ms",
        Kind::Time,
        |r| r.tracefs_measured().map(|m| m.max_held_us as f64 / 1000.0),
    ),
    m(
        "wbstall.max_asleep_ms",
        "longest sleep asleep (measured)",
        "ms",
        Kind::Time,
        |r| measured_ms(r, |m| m.max_asleep_us),
    ),
    m("wbstall.calls", "calls that slept", "", Kind::Count, |r| {
        r.measured().map(|m| m.calls as f64)
    }),
    m(
        "wbstall.unwoken_sleeps",
        "sleeps never woken (a fatal signal)",
        "",
        Kind::Count,
        |r| r.measured().map(|m| m.unwoken_sleeps as f64),
    ),
    m(
        "wbstall.flushing_sleeps",
        "flushing_sleeps",
        "",
        Kind::Count,
        |r| counter(r, "flushing_sleeps"),
    ),
    m(
        "wbstall.draining_sleeps",
        "draining_sleeps",
        "",
        Kind::Count,
        |r| counter(r, "draining_sleeps"),
    ),
    m(
        "wbstall.max_call_ms",
        "longest balance_dirty_pages() call",
        "ms",
        Kind::Time,
        |r| counter(r, "max_call_ms"),
    ),
    m(
        "tracefs.max_call_ms",
        "longest call, tracefs detector",
        "ms",
        Kind::Time,
        |r| r.detection.tracefs.as_ref().map(|t| t.max_call_ms as f64),
    ),
    m(
        "wbstall.throttle_sleeps",
        "throttle_sleeps",
        "",
        Kind::Count,
        |r| counter(r, "throttle_sleeps"),
    ),
    m(
        "wbstall.throttle_events",
        "throttle_events",
        "",
        Kind::Count,
        |r| counter(r, "throttle_events"),
    ),
    m("wbstall.pause_ms", "pause_ms", "ms", Kind::Time, |r| {
        counter(r, "pause_ms")
    }),
    m(
        "wbstall.max_pause_ms",
        "max_pause_ms",
        "ms",
        Kind::Time,
        |r| counter(r, "max_pause_ms"),
    ),
    m("wbstall.bg_starts", "bg_starts", "", Kind::Count, |r| {
        counter(r, "bg_starts")
    }),
    m(
        "wbstall.work_background",
        "work_background",
        "",
        Kind::Count,
        |r| counter(r, "work_background"),
    ),
    m(
        "wbstall.work_periodic",
        "work_periodic",
        "",
        Kind::Count,
        |r| counter(r, "work_periodic"),
    ),
    m(
        "tracefs.work_vmscan",
        "passes reclaim began (vmscan)",
        "",
        Kind::Count,
        |r| r.detection.tracefs.as_ref().map(|t| t.work_vmscan as f64),
    ),
    m(
        "tracefs.vmscan_pages",
        "pages reclaim's passes wrote",
        "pages",
        Kind::Count,
        |r| r.detection.tracefs.as_ref().map(|t| t.vmscan_pages as f64),
    ),
    m(
        "bdi.writers_own_writeback_%",
        "written back outside the flusher (the writers' own flushes)",
        "%",
        Kind::Share,
        writers_own_writeback,
    ),
    m(
        "phase.start_ms",
        "measurement start, ms into the phase cycle",
        "ms",
        Kind::Time,
        |r| r.start_phase.map(|p| f64::from(p.actual_ms())),
    ),
    m(
        "vmstat.nr_dirtied",
        "nr_dirtied",
        "pages",
        Kind::Count,
        |r| r.counters.vmstat_delta.get("nr_dirtied").map(|&v| v as f64),
    ),
    m(
        "vmstat.nr_written",
        "nr_written",
        "pages",
        Kind::Count,
        |r| r.counters.vmstat_delta.get("nr_written").map(|&v| v as f64),
    ),
    m(
        "tracefs.writeback_wake_background",
        "witness bg_starts",
        "",
        Kind::Count,
        |r| Some(r.detection.witness.bg_starts as f64),
    ),
    m(
        "tracefs.balance_dirty_pages",
        "witness throttle_events",
        "",
        Kind::Count,
        |r| Some(r.detection.witness.throttle_events as f64),
    ),
    m(
        "tracefs.balance_dirty_pages_pause>0",
        "witness throttle_sleeps",
        "",
        Kind::Count,
        |r| Some(r.detection.witness.throttle_sleeps as f64),
    ),
    m(
        "memcg.max_events",
        "memcg memory.max events",
        "",
        Kind::Count,
        |r| r.counters.memcg_events.get("max").map(|&v| v as f64),
    ),
    m(
        "tracefs.sched_events",
        "the writers' scheduler events traced (the measured times' cost)",
        "",
        Kind::Count,
        |r| {
            (r.detection.tracefs.as_ref())
                .and_then(|t| t.sched_events)
                .map(|n| n as f64)
        },
    ),
    m(
        "tracefs.events",
        "events traced in all",
        "",
        Kind::Count,
        |r| r.detection.tracefs.as_ref().map(|t| t.events as f64),
    ),
    m(
        "bdi.BdiWritten_kB",
        "written back kB (BdiWritten)",
        "kB",
        Kind::Count,
        |r| Some(r.counters.bdi_written_kb as f64),
    ),
    m(
        "detectors.disagree_sleeps",
        "sleeps the detectors class differently (at least)",
        "",
        Kind::Count,
        |r| r.detectors_disagree().map(|n| n as f64),
    ),
];

/// The rows that answer the question, first in every report: throughput,
/// the stall share the verdict judges each run by, and the background
/// writeback starts whose absence is the bug's mechanism.
pub const HEADLINE: [&str; 3] = [
    "fio.write_bw_MiB/s",
    "wbstall.stall_share_%",
    "wbstall.bg_starts",
];

/// Every metric in report order: [`HEADLINE`] first, then the rest of
/// [`ALL`] in its order.
pub fn report_order() -> impl Iterator<Item = &'static Metric> {
    HEADLINE
        .iter()
        .map(|k| get(k))
        .chain(ALL.iter().filter(|m| !HEADLINE.contains(&m.key)))
}

/// The metric called `key`. Only this registry's keys exist: an unknown one
/// is a bug in the caller, caught by the tests that render every table.
pub fn get(key: &str) -> &'static Metric {
    match ALL.iter().find(|m| m.key == key) {
        Some(m) => m,
        None => panic!("no metric `{key}` in analysis::metrics::ALL"),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn keys_are_unique_and_every_kind_aggregates() {
        let mut keys: Vec<&str> = ALL.iter().map(|m| m.key).collect();
        keys.sort();
        keys.dedup();
        assert_eq!(keys.len(), ALL.len());
        assert_eq!(get("fio.write_bw_MiB/s").kind, Kind::Rate);
    }

    #[test]
    fn rates_aggregate_by_the_harmonic_mean() {
        // 100 MiB/s and 300 MiB/s over the same bytes: 2 / (1/100 + 1/300) = 150.
        assert_eq!(Kind::Rate.aggregate(&[100.0, 300.0]), Some(150.0));
        assert_eq!(Kind::Count.aggregate(&[100.0, 300.0]), Some(200.0));
        // A run that wrote nothing: the harmonic mean's limit, 0.
        assert_eq!(Kind::Rate.aggregate(&[100.0, 0.0]), Some(0.0));
        assert_eq!(Kind::Rate.aggregate(&[100.0, -1.0]), None);
        assert_eq!(Kind::Rate.aggregate_name(), "harmonic mean");
        assert_eq!(Kind::Share.aggregate(&[]), None);
    }

    #[test]
    #[should_panic(expected = "no metric `fio.nope`")]
    fn an_unknown_key_is_a_bug() {
        get("fio.nope");
    }
}
