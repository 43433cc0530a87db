//! The in-guest sampler's time series (`qemu/wbstall-sample`): one block
//! per interval, each line prefixed with what it is:
//!
//! ```text
//! S t=<uptime s>
//! T <wbstall thresholds line>      (one per slot)
//! C <wbstall stats line>           (one per slot)
//! B <bdi stats as key=value>
//! V <vmstat as key=value>
//! ```

use std::collections::BTreeMap;

use anyhow::{bail, Result};

use crate::results::debugfs::{self, KvLine};

#[derive(Debug, Clone, Default, PartialEq)]
pub struct Sample {
    /// Guest uptime, seconds.
    pub t: f64,
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

/// Parses a samples file. A last block cut short (the sampler is killed at any
/// point) is kept as far as it goes.
pub fn parse(text: &str) -> Result<Vec<Sample>> {
    let mut out: Vec<Sample> = Vec::new();
    let last = text.lines().count().saturating_sub(1);
    for (i, line) in text.lines().enumerate() {
        let (tag, rest) = line.split_once(' ').unwrap_or((line, ""));
        if tag == "S" {
            let t = rest
                .strip_prefix("t=")
                .and_then(|v| v.trim().parse::<f64>().ok());
            let Some(t) = t else {
                bail!("samples:{}: bad time `{line}`", i + 1);
            };
            out.push(Sample {
                t,
                ..Sample::default()
            });
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
    Ok(out)
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
        let s = parse(SAMPLES).unwrap();
        assert_eq!(s.len(), 3);
        assert_eq!(s[0].bdi["BdiReclaimable"], 4000);
        assert_eq!(s[0].vmstat["nr_dirty"], 1000);
        assert_eq!(s[1].thresholds.len(), 0);
        assert!(s[2].stats.is_empty());
    }

    #[test]
    fn the_writer_series_follows_the_counters() {
        let p = series(&parse(SAMPLES).unwrap(), "0:45", None);
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
        assert_eq!(s.len(), 1);
    }
}
