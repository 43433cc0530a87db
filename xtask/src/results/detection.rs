//! Who classed a boot's throttle sleeps: the wbstall module (its `stats`
//! line for the writer's writeback domain) or the tracefs detector
//! ([`crate::results::tracefs`], which runs in every boot, beside the module).

use std::collections::BTreeMap;

use anyhow::{bail, Result};
use serde_json::Value;

use crate::{
    guest::{plan::Detector, protocol::stream},
    results::{
        context::RunContext,
        debugfs::{self, KvLine},
        mechanism::Mechanism,
        trace_files, tracefs,
        witness::Witness,
    },
};

/// The writer's writeback domain, as the guest reported it.
pub struct Writer<'a> {
    pub bdi: &'a str,
    pub domain: &'a str,
    pub cgroup_ino: u64,
    pub strictlimit: bool,
}

/// What the detectors made of a boot.
pub struct Found {
    pub stats: Vec<KvLine>,
    pub thresholds: Vec<KvLine>,
    pub summary: Option<KvLine>,
    pub mechanism: Mechanism,
    pub memcg_id: Option<u64>,
    pub tracefs: tracefs::Detected,
    /// Each sleep the tracefs detector classed, in time order.
    pub sleeps: Vec<tracefs::Sleep>,
}

/// Runs the tracefs detector (in every boot: beside the module, the two class
/// the same sleeps) and takes the mechanism from the chosen detector.
pub fn detect(
    ctx: &RunContext<'_>,
    need: &dyn Fn(&str) -> Result<String>,
    w: &Writer<'_>,
    witness: &Witness,
) -> Result<Found> {
    let (tracefs, sleeps) = trace_files::from_files(
        &trace_files::Traces {
            events: &need(stream::TRACE_EVENTS)?,
            stats: &need(stream::TRACE_STATS)?,
            sched: &need(stream::TRACE_SCHED)?,
            sched_stats: &need(stream::TRACE_SCHED_STATS)?,
        },
        &tracefs::Wb {
            bdi: w.bdi.to_string(),
            cgroup_ino: w.cgroup_ino,
        },
    )?;
    match ctx.detector {
        Detector::Module => {
            let stats = debugfs::parse_stats(&need(stream::WBSTALL_STATS)?)?;
            let (writer, memcg_id) = writer_of(&stats, w.bdi, w.domain, &ctx.console_log)?;
            let summary = debugfs::parse_summary(&need(stream::WBSTALL_SUMMARY)?)?;
            let mechanism = Mechanism::from_module(writer, &summary)?;
            Ok(Found {
                stats,
                thresholds: debugfs::parse_thresholds(&need(stream::WBSTALL_THRESHOLDS)?)?,
                summary: Some(summary),
                mechanism,
                memcg_id,
                tracefs,
                sleeps,
            })
        }
        Detector::Tracefs => {
            if witness.throttle_events == 0 {
                bail!(
                    "no balance_dirty_pages event for the writer's wb (BDI {}, cgroup inode \
                     {}): the writes did not go through the page cache (see {})",
                    w.bdi,
                    w.cgroup_ino,
                    ctx.console_log
                );
            }
            Ok(Found {
                stats: Vec::new(),
                thresholds: Vec::new(),
                summary: None,
                mechanism: trace_mechanism(&tracefs, witness, w.strictlimit),
                memcg_id: None,
                tracefs,
                sleeps,
            })
        }
    }
}

/// The counters as the module's would be, for a boot without the module:
/// `throttle_events` (every call, sleeping or not) from the witness.
fn trace_mechanism(t: &tracefs::Detected, witness: &Witness, strictlimit: bool) -> Mechanism {
    Mechanism {
        strictlimit: u64::from(strictlimit),
        bg_starts: t.bg_starts,
        throttle_events: witness.throttle_events,
        throttle_sleeps: t.throttle_sleeps,
        flushing_sleeps: t.flushing_sleeps,
        flushing_ms: t.flushing_ms,
        draining_sleeps: t.draining_sleeps,
        draining_ms: t.draining_ms,
        stall_sleeps: t.stall_sleeps,
        pause_ms: t.pause_ms,
        stall_ms: t.stall_ms,
        max_pause_ms: t.max_pause_ms,
        max_call_ms: t.max_call_ms,
        work_background: t.work_background,
        work_periodic: t.work_periodic,
        causes: t.causes,
        measured: t.measured,
        entries: None,
        drain_floor_pages: None,
        more: BTreeMap::new(),
    }
}

/// The writers' line of `stats` for their domain, and its memcg id.
fn writer_of<'a>(
    stats: &'a [KvLine],
    bdi: &str,
    domain: &str,
    console_log: &str,
) -> Result<(&'a KvLine, Option<u64>)> {
    let in_memcg = match domain {
        "memcg" => true,
        "global" => false,
        other => bail!("writer-domain is `{other}`, not `global` or `memcg`"),
    };
    let Some(writer) = writer_record(stats, bdi, in_memcg) else {
        bail!(
            "the wbstall module saw no writeback event for the writer's {} of BDI {bdi}: \
             the writes did not go through the page cache (see {console_log})",
            if in_memcg {
                "memcg writeback domain"
            } else {
                "root writeback domain"
            },
        );
    };
    let memcg_id = if in_memcg {
        Some(debugfs::counter(writer, "memcg_id", "wbstall/stats")?)
    } else {
        None
    };
    Ok((writer, memcg_id))
}

/// The writer's line of `stats`: the BDI's root writeback domain, or, for a
/// writer in a memcg, the busiest of the BDI's cgroup writeback domains.
pub fn writer_record<'a>(stats: &'a [KvLine], bdi: &str, in_memcg: bool) -> Option<&'a KvLine> {
    if !in_memcg {
        return debugfs::find(stats, bdi, Some(0));
    }
    stats
        .iter()
        .filter(|r| {
            r.get("bdi").and_then(Value::as_str) == Some(bdi)
                && debugfs::value(r, "memcg_id").is_some_and(|id| id != 0)
        })
        .max_by_key(|r| {
            debugfs::value(r, "throttle_events").unwrap_or(0)
                + debugfs::value(r, "bg_starts").unwrap_or(0)
        })
}
