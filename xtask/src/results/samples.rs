//! The in-guest sampler's time series (`qemu/wbstall-sample`): one block
//! per interval, each line prefixed with what it is:
//!
//! ```text
//! S t=<uptime s> unix_ms=<real-time clock, ms>
//! T <wbstall thresholds line>      (one per slot)
//! C <wbstall stats line>           (one per slot)
//! B <bdi stats as key=value>
//! V <vmstat as key=value>
//! ```
//!
//! and after the last block, each fio job's progress log (`qemu/lib.sh`
//! `stop_sampler`): `F job=<n> unix_ms=<time> kib_s=<bandwidth over the
//! interval that ends then> ms=<the interval>`; an interval in which the
//! job wrote nothing has no line. Files from before lack `unix_ms` and `F`.

use std::collections::BTreeMap;

use anyhow::{bail, Result};

use crate::results::debugfs::{self, KvLine};

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sample {
    /// Guest uptime, seconds.
    pub t: f64,
    /// The guest's real-time clock at the same moment, ms.
    pub unix_ms: Option<u64>,
    pub thresholds: Vec<KvLine>,
    pub stats: Vec<KvLine>,
    pub bdi: BTreeMap<String, i64>,
    pub vmstat: BTreeMap<String, i64>,
}

fn numbers(words: &str) -> BTreeMap<String, i64> {
    words
        .split_whitespace()
        .filter_map(|w| {
            let (k, v) = w.split_once('=')?;
            Some((k.to_string(), v.parse().ok()?))
        })
        .collect()
}

/// One entry of a fio job's progress log.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct LogEntry {
    pub job: u32,
    /// When the interval ended, the guest's real-time clock, ms.
    pub unix_ms: u64,
    /// The job's bandwidth over the interval, KiB/s.
    pub kib_s: u64,
    /// The interval, ms (fio's `log_avg_msec`).
    pub ms: u64,
}

/// A samples file: the sampler's blocks, and fio's per-job log after them.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct Samples {
    pub blocks: Vec<Sample>,
    pub fio_log: Vec<LogEntry>,
}

/// `S`'s words: `t=` and, from samplers that send it, `unix_ms=`.
fn block_start(rest: &str) -> Option<Sample> {
    let mut w = rest.split_whitespace();
    let t = w.next()?.strip_prefix("t=")?.parse::<f64>().ok()?;
    let unix_ms = match w.next() {
        Some(u) => Some(u.strip_prefix("unix_ms=")?.parse().ok()?),
        None => None,
    };
    Some(Sample {
        t,
        unix_ms,
        ..Sample::default()
    })
}

/// An `F` line's words.
fn log_entry(rest: &str) -> Option<LogEntry> {
    let kv = numbers(rest);
    let get = |k: &str| kv.get(k).and_then(|v| u64::try_from(*v).ok());
    Some(LogEntry {
        job: u32::try_from(get("job")?).ok()?,
        unix_ms: get("unix_ms")?,
        kib_s: get("kib_s")?,
        ms: get("ms")?,
    })
}

/// Parses a samples file. A last block cut short (the sampler is killed at any
/// point) is kept as far as it goes; fio's log lines follow the blocks.
pub fn parse(text: &str) -> Result<Samples> {
    let mut out: Vec<Sample> = Vec::new();
    let mut fio_log = Vec::new();
    // The sampler's last line: before fio's log, else the file's last.
    let lines: Vec<&str> = text.lines().collect();
    let first_log = lines.iter().position(|l| l.starts_with("F "));
    let last = first_log.unwrap_or(lines.len()).saturating_sub(1);
    for (i, line) in lines.iter().copied().enumerate() {
        let (tag, rest) = line.split_once(' ').unwrap_or((line, ""));
        if first_log.is_some_and(|f| i >= f) {
            let Some(e) = (tag == "F").then(|| log_entry(rest)).flatten() else {
                bail!("samples:{}: not a line of fio's log: `{line}`", i + 1);
            };
            fio_log.push(e);
            continue;
        }
        if tag == "S" {
            let Some(s) = block_start(rest) else {
                bail!("samples:{}: bad time `{line}`", i + 1);
            };
            out.push(s);
            continue;
        }
        let known = ["T", "C", "B", "V"].contains(&tag);
        let started = !out.is_empty();
        let s = match out.last_mut() {
            Some(s) if known => s,
            // The sampler killed mid-line: the last line may be torn.
            _ if i == last && started => continue,
            // Anything else is the sampler saying why it stopped.
            _ => bail!("samples:{}: not a sample line: `{line}`", i + 1),
        };
        match tag {
            "T" => s
                .thresholds
                .extend(debugfs::parse_kv_lines(rest, "samples")?),
            "C" => s.stats.extend(debugfs::parse_kv_lines(rest, "samples")?),
            "B" => s.bdi = numbers(rest),
            _ => s.vmstat = numbers(rest),
        }
    }
    Ok(Samples {
        blocks: out,
        fio_log,
    })
}

/// One fio job's progress: its number and (time, MiB) points.
pub type JobProgress = (u32, Vec<(f64, f64)>);

/// Each fio job's progress: (job, [(seconds since the first block, MiB its
/// writes took)]), from 0 at the start of its first logged interval: each
/// entry adds its bandwidth over its interval (fio's helper computes every
/// job's rate each interval and logs none for an interval without a write,
/// so a stalled job's line stays flat). `None` when the file has no log or
/// no real-time clock to place it by.
pub fn writers(s: &Samples) -> Option<Vec<JobProgress>> {
    let first = s.blocks.first()?;
    // The real-time clock at uptime 0, ms.
    let at = s
        .blocks
        .iter()
        .find_map(|b| Some(b.unix_ms? as f64 - b.t * 1000.0))?;
    let t = |unix_ms: f64| (unix_ms - at) / 1000.0 - first.t;
    let mut jobs: BTreeMap<u32, Vec<LogEntry>> = BTreeMap::new();
    for e in &s.fio_log {
        jobs.entry(e.job).or_default().push(*e);
    }
    let out: Vec<JobProgress> = jobs
        .into_iter()
        .map(|(job, mut log)| {
            log.sort_by_key(|e| e.unix_ms);
            let mut mib = 0.0;
            let mut pts = vec![(t(log[0].unix_ms.saturating_sub(log[0].ms) as f64), 0.0)];
            for e in &log {
                mib += e.kib_s as f64 * e.ms as f64 / 1000.0 / 1024.0;
                pts.push((t(e.unix_ms as f64), mib));
            }
            (job, pts)
        })
        .collect();
    (!out.is_empty()).then_some(out)
}

/// The record of the writer (BDI, and memcg id when it has one) in a list.
pub fn writer<'a>(records: &'a [KvLine], bdi: &str, memcg_id: Option<u64>) -> Option<&'a KvLine> {
    debugfs::find(records, bdi, Some(memcg_id.unwrap_or(0)))
}

/// One point of the plotted series.
#[derive(Debug, Clone, PartialEq, Default)]
pub struct Point {
    /// Seconds since the first sample.
    pub t: f64,
    /// Dirty (reclaimable) pages of the BDI, live.
    pub dirty: f64,
    /// The writer's per-wb thresholds from the last throttle snapshot, in pages.
    pub wb_thresh: Option<f64>,
    pub wb_bg_thresh: Option<f64>,
    /// Cumulative counters of the writer's domain.
    pub stall_sleeps: f64,
    pub bg_starts: f64,
    /// Pages of the BDI under writeback, live.
    pub writeback: f64,
    /// The last throttle snapshot of the writer's domain: its dirty pages and
    /// thresholds, the wb's dirty pages, and the pause it computed (ms).
    pub domain_dirty: Option<f64>,
    pub thresh: Option<f64>,
    pub bg_thresh: Option<f64>,
    pub wb_dirty: Option<f64>,
    pub pause_ms: Option<f64>,
    /// Cumulative: throttle sleeps and the ms paused in them.
    pub throttle_sleeps: f64,
    pub paused_ms: f64,
    /// Cumulative MiB the BDI's writers dirtied, and it wrote back.
    pub dirtied_mib: f64,
    pub written_mib: f64,
}

pub fn series(samples: &[Sample], bdi: &str, memcg_id: Option<u64>) -> Vec<Point> {
    let t0 = samples.first().map_or(0.0, |s| s.t);
    samples
        .iter()
        .map(|s| {
            let th = writer(&s.thresholds, bdi, memcg_id);
            let st = writer(&s.stats, bdi, memcg_id);
            let page_kb = 4.0;
            let snap = |k: &str| th.and_then(|r| debugfs::value(r, k)).map(|v| v as f64);
            let count = |k: &str| st.and_then(|r| debugfs::value(r, k)).unwrap_or(0) as f64;
            Point {
                t: s.t - t0,
                dirty: s.bdi.get("BdiReclaimable").copied().unwrap_or(0) as f64 / page_kb,
                wb_thresh: th
                    .and_then(|r| debugfs::value(r, "wb_thresh"))
                    .map(|v| v as f64),
                wb_bg_thresh: th
                    .and_then(|r| debugfs::value(r, "wb_bg_thresh"))
                    .map(|v| v as f64),
                // Plotted, not judged: before the writer's first event its
                // domain has no line yet, and no event has been counted.
                stall_sleeps: st
                    .and_then(|r| debugfs::value(r, "stall_sleeps"))
                    .unwrap_or(0) as f64,
                bg_starts: st.and_then(|r| debugfs::value(r, "bg_starts")).unwrap_or(0) as f64,
                writeback: s.bdi.get("BdiWriteback").copied().unwrap_or(0) as f64 / page_kb,
                domain_dirty: snap("dirty"),
                thresh: snap("thresh"),
                bg_thresh: snap("bg_thresh"),
                wb_dirty: snap("wb_dirty"),
                pause_ms: snap("pause_ms"),
                throttle_sleeps: count("throttle_sleeps"),
                paused_ms: count("pause_ms"),
                dirtied_mib: s.bdi.get("BdiDirtied").copied().unwrap_or(0) as f64 / 1024.0,
                written_mib: s.bdi.get("BdiWritten").copied().unwrap_or(0) as f64 / 1024.0,
            }
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAMPLES: &str = "\
S t=10.00
T bdi=0:45 memcg_id=0 domain=global age_ms=3 thresh=92240 bg_thresh=46064 dirty=1000 limit=92240 wb_dirty=1000 wb_thresh=948 wb_bg_thresh=473 pos_ratio=0 dirty_ratelimit=25 task_ratelimit=0 pause_ms=48
C bdi=0:45 memcg_id=0 strictlimit=1 bg_starts=0 throttle_events=10 throttle_sleeps=9 stall_sleeps=9 pause_ms=400 max_pause_ms=48 work_background=0 work_periodic=0 work_sync=0 work_other=0
B BdiWriteback=0 BdiReclaimable=4000 BdiDirtyThresh=3688
V nr_dirty=1000 nr_writeback=0
S t=10.10
B BdiWriteback=0 BdiReclaimable=4096
C bdi=0:45 memcg_id=0 strictlimit=1 bg_starts=1 throttle_events=12 throttle_sleeps=11 stall_sleeps=11 pause_ms=500 max_pause_ms=48 work_background=0 work_periodic=1 work_sync=0 work_other=0
S t=10.2";

    #[test]
    fn blocks_parse_and_a_torn_end_is_kept() {
        let s = parse(SAMPLES).unwrap().blocks;
        assert_eq!(s.len(), 3);
        assert_eq!(s[0].bdi["BdiReclaimable"], 4000);
        assert_eq!(s[0].vmstat["nr_dirty"], 1000);
        assert_eq!(s[1].thresholds.len(), 0);
        assert!(s[2].stats.is_empty());
    }

    #[test]
    fn the_writer_series_follows_the_counters() {
        let p = series(&parse(SAMPLES).unwrap().blocks, "0:45", None);
        assert_eq!(p[0].t, 0.0);
        assert_eq!(p[0].dirty, 1000.0);
        assert_eq!(p[0].wb_thresh, Some(948.0));
        assert_eq!(p[1].wb_thresh, None);
        assert_eq!(p[1].stall_sleeps, 11.0);
        assert!((p[1].t - 0.1).abs() < 1e-9);
    }

    #[test]
    fn a_bad_time_is_an_error() {
        assert!(parse("S t=soon\n").is_err());
    }

    #[test]
    fn the_sampler_saying_why_it_stopped_is_an_error_not_an_empty_series() {
        // At the start (nothing sampled) and in the middle of the series.
        let msg = "wbstall-sample: reading /sys/kernel/debug/bdi/0:45/stats: No such file";
        let e = parse(&format!("{msg}\n")).unwrap_err().to_string();
        assert!(
            e.contains("samples:1: not a sample line") && e.contains(msg),
            "{e}"
        );
        let text = format!("S t=1.0\nB BdiWriteback=0\n{msg}\nS t=1.1\nB BdiWriteback=0\n");
        let e = parse(&text).unwrap_err().to_string();
        assert!(e.contains("samples:3"), "{e}");
        // A torn last line is the kill, not an error.
        let s = parse("S t=1.0\nB BdiWriteback=4\nBdiRecl").unwrap();
        assert_eq!(s.blocks.len(), 1);
        // Also when fio's log follows it.
        let s = parse("S t=1.0\nB BdiWriteback=4\nBdiRecl\nF job=1 unix_ms=5 kib_s=1 ms=1\n");
        let s = s.unwrap();
        assert_eq!((s.blocks.len(), s.fio_log.len()), (1, 1));
    }

    /// fio's log, placed by the real-time clock the blocks carry: each
    /// job's MiB from 0 at the start of its first interval.
    #[test]
    fn each_job_s_progress_is_its_log_summed_on_the_samples_clock() {
        let text = "\
S t=10.00 unix_ms=1000000
B BdiWriteback=0
S t=10.10 unix_ms=1000100
B BdiWriteback=0
F job=1 unix_ms=1000600 kib_s=10240 ms=100
F job=1 unix_ms=1000700 kib_s=0 ms=100
F job=1 unix_ms=1001800 kib_s=20480 ms=100
F job=2 unix_ms=1000700 kib_s=1024 ms=100
";
        let s = parse(text).unwrap();
        assert_eq!(s.blocks[1].unix_ms, Some(1_000_100));
        let w = writers(&s).unwrap();
        let close = |a: &[(f64, f64)], b: &[(f64, f64)]| {
            a.len() == b.len()
                && a.iter()
                    .zip(b)
                    .all(|(x, y)| (x.0 - y.0).abs() < 1e-9 && (x.1 - y.1).abs() < 1e-9)
        };
        assert_eq!(w.len(), 2);
        // 10 MiB/s for 0.1 s, nothing, then (after 1.1 s without a write,
        // no entry) 20 MiB/s for 0.1 s: 1, 1 and 3 MiB.
        let job1 = [(0.5, 0.0), (0.6, 1.0), (0.7, 1.0), (1.8, 3.0)];
        assert!(close(&w[0].1, &job1), "{w:?}");
        assert!(close(&w[1].1, &[(0.6, 0.0), (0.7, 0.1)]), "{w:?}");
        // Without the real-time clock there is nothing to place the log by.
        let old = parse("S t=10.00\nB BdiWriteback=0\nF job=1 unix_ms=5 kib_s=1 ms=1\n").unwrap();
        assert_eq!(writers(&old), None);
    }

    #[test]
    fn a_bad_log_line_is_an_error_with_its_line() {
        let e = parse("S t=1.0 unix_ms=5\nF job=1 unix_ms=6 kib_s=1 ms=1\nB BdiWriteback=0\n");
        let e = e.unwrap_err().to_string();
        assert!(e.contains("samples:3: not a line of fio's log"), "{e}");
        let e = parse("S t=1.0 unix_ms=5\nF job=1 unix_ms=six kib_s=1 ms=1\n").unwrap_err();
        assert!(e.to_string().contains("samples:2"), "{e}");
        // Without its interval a line cannot say what the job wrote.
        let e = parse("S t=1.0 unix_ms=5\nF job=1 unix_ms=6 kib_s=1\n").unwrap_err();
        assert!(e.to_string().contains("samples:2"), "{e}");
        assert!(parse("S t=1.0 unix_ms=soon\n").is_err());
    }
}
