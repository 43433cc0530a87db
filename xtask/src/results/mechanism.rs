//! The wbstall module's counters for the writer's writeback domain, the
//! mechanism of a run: what the module's `stats` line says, or what the
//! tracefs detector counted in a boot without the module.

use std::collections::BTreeMap;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::results::{
    debugfs::{self, KvLine},
    measured::Measured,
    tracefs::Causes,
};

/// The module's counters for the writer's BDI (and memcg), the mechanism.
/// Read from a `stats` line by field name: a key the module did not print is
/// an error naming it (a unit test keeps the names within `STATS_KEYS`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Mechanism {
    pub strictlimit: u64,
    pub bg_starts: u64,
    pub throttle_events: u64,
    pub throttle_sleeps: u64,
    /// Sleeps during which a flusher pass ran on the writers' wb (and, for
    /// the module since format 3, wrote pages of it).
    pub flushing_sleeps: u64,
    pub flushing_ms: u64,
    /// Sleeps with no pass, during which pages of the writers' wb completed
    /// writeback (the module: more than `drain_floor_pages`) or any writeback
    /// completed (the trace).
    pub draining_sleeps: u64,
    pub draining_ms: u64,
    /// Sleeps with neither: the stall.
    pub stall_sleeps: u64,
    pub pause_ms: u64,
    /// Milliseconds writers slept in stall sleeps.
    pub stall_ms: u64,
    pub max_pause_ms: u64,
    /// The longest time a writer spent in one balance_dirty_pages() call
    /// that slept (the kernel's own latency of a throttled write), ms.
    pub max_call_ms: u64,
    pub work_background: u64,
    pub work_periodic: u64,
    /// The stall sleeps by cause (was background writeback asked for the
    /// writer's wb during the call?), both detectors' type; `None` in records
    /// from before the causes.
    #[serde(flatten, default, skip_serializing_if = "Option::is_none")]
    pub causes: Option<Causes>,
    /// How the module's sleeps in progress ended (the module only).
    #[serde(flatten, default, skip_serializing_if = "Option::is_none")]
    pub entries: Option<EntryEnds>,
    /// The sleeps' measured times by class, and their calls' (the module
    /// since format 5, the tracefs detector's in a boot without it); `None`
    /// in records from before them.
    #[serde(flatten, default, skip_serializing_if = "Option::is_none")]
    pub measured: Option<Measured>,
    /// The module's draining floor, pages (`summary`): a sleep without a
    /// writing pass is draining when more than this many pages of the wb
    /// completed. `None` without the module.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub drain_floor_pages: Option<u64>,
    /// The module's other counters (those without a field here, such as one
    /// it added later), by name: the metric registry reports them by key.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub more: BTreeMap<String, u64>,
}

/// How the module's entries of sleeps in progress ended, where not simply
/// classed at their wake-up: every path that invalidates one is counted.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct EntryEnds {
    /// Classed sleeps whose schedule did not block (already woken, or not
    /// switched out).
    pub unblocked_sleeps: u64,
    /// Dropped at a later throttle event of the task (it left
    /// balance_dirty_pages() without the sleep's schedule).
    pub dropped_at_event: u64,
    /// Dropped at the task's first voluntary schedule, which was another wait
    /// (or its exit).
    pub dropped_at_block: u64,
}

impl Mechanism {
    /// The counters of one line of the module's `stats`: every counter the
    /// module prints (format 3) is required, the typed ones by field, the
    /// others kept by name.
    pub fn from_record(r: &KvLine) -> Result<Mechanism> {
        let mut m: Mechanism = serde_json::from_value(Value::Object(r.clone()))
            .context("the writer's line of wbstall/stats lacks a counter")?;
        // A flattened group with a key missing reads as `None`: name the key.
        for (group, present) in [
            ("stall causes", m.causes.is_some()),
            ("entry ends", m.entries.is_some()),
            ("measured times", m.measured.is_some()),
            (
                "times off a CPU",
                m.measured.as_ref().is_some_and(|t| t.off_cpu.is_some()),
            ),
        ] {
            if !present {
                let missing = debugfs::keys()
                    .counters
                    .iter()
                    .find(|k| !r.contains_key(k.as_str()))
                    .map_or("?", String::as_str);
                bail!(
                    "the writer's line of wbstall/stats lacks the {group} (no `{missing}`): \
                     the module predates format {}; rebuild the kernels with \
                     `cargo xtask build-kernel --all`",
                    debugfs::FORMAT_VERSION
                );
            }
        }
        let typed = serde_json::to_value(&m)?;
        for k in &debugfs::keys().counters {
            if typed.get(k).is_none() {
                m.more
                    .insert(k.clone(), debugfs::counter(r, k, "wbstall/stats")?);
            }
        }
        Ok(m)
    }

    /// [`Self::from_record`] for the writer's line, with the module's
    /// `summary` for what it says once for every line (`drain_floor_pages`).
    pub fn from_module(writer: &KvLine, summary: &KvLine) -> Result<Mechanism> {
        let mut m = Self::from_record(writer)?;
        m.drain_floor_pages = Some(debugfs::counter(
            summary,
            "drain_floor_pages",
            "wbstall/summary",
        )?);
        Ok(m)
    }

    /// Sleeps classed flushing, draining or stall.
    pub fn classed_sleeps(&self) -> u64 {
        self.flushing_sleeps + self.draining_sleeps + self.stall_sleeps
    }

    /// A counter by its key, typed or not.
    pub fn get(&self, key: &str) -> Option<u64> {
        match serde_json::to_value(self).ok()?.get(key) {
            Some(v) => v.as_u64(),
            None => self.more.get(key).copied(),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const STATS: &str = include_str!("../../../rust-module/fixtures/stats.txt");

    fn fuse_line() -> KvLine {
        let s = debugfs::parse_stats(STATS).unwrap();
        debugfs::find(&s, "0:45", None).unwrap().clone()
    }

    #[test]
    fn the_causes_and_entry_ends_are_typed_fields() {
        let m = Mechanism::from_record(&fuse_line()).unwrap();
        assert_eq!(
            m.causes,
            Some(Causes {
                unrequested_sleeps: 8989,
                unrequested_ms: 1_795_600,
                declined_sleeps: 1,
                declined_ms: 200,
            })
        );
        assert_eq!(
            m.entries,
            Some(EntryEnds {
                unblocked_sleeps: 2,
                dropped_at_event: 0,
                dropped_at_block: 1,
            })
        );
        // Typed, so not kept again by name; found by key all the same.
        assert!(!m.more.contains_key("unrequested_sleeps"));
        assert_eq!(m.get("declined_ms"), Some(200));
        assert_eq!(m.get("dropped_at_block"), Some(1));
        assert_eq!(m.get("lost_ends"), Some(1));
        assert_eq!(m.drain_floor_pages, None);
        // A run record keeps them as flat keys, and reads them back.
        let json = serde_json::to_value(&m).unwrap();
        assert_eq!(json["unrequested_sleeps"], 8989);
        assert_eq!(serde_json::from_value::<Mechanism>(json).unwrap(), m);
    }

    #[test]
    fn a_line_without_a_cause_counter_is_an_error_naming_it() {
        // Each flattened group, a key of it missing (the module always
        // measures its sleeps off a CPU; the trace does not).
        for (key, group) in [
            ("declined_ms", "stall causes"),
            ("dropped_at_event", "entry ends"),
            ("draining_off_cpu_us", "times off a CPU"),
        ] {
            let mut line = fuse_line();
            line.remove(key);
            let e = format!("{:#}", Mechanism::from_record(&line).unwrap_err());
            assert!(
                e.contains(&format!("lacks the {group} (no `{key}`)")),
                "{e}"
            );
        }
    }

    #[test]
    fn the_drain_floor_comes_from_the_summary() {
        let summary = debugfs::parse_summary(
            "slots=32 used=3 unslotted=0 hz=250 format=6 drain_floor_pages=8 pending=0 entries=0\n",
        )
        .unwrap();
        let m = Mechanism::from_module(&fuse_line(), &summary).unwrap();
        assert_eq!(m.drain_floor_pages, Some(8));
        let mut no_floor = summary.clone();
        no_floor.remove("drain_floor_pages");
        let e = Mechanism::from_module(&fuse_line(), &no_floor)
            .unwrap_err()
            .to_string();
        assert!(e.contains("no `drain_floor_pages`"), "{e}");
    }

    #[test]
    fn a_record_without_the_module_has_no_causes() {
        // Run records from before format 3, the module's or the trace's.
        let m: Mechanism = serde_json::from_str(
            r#"{"strictlimit":1,"bg_starts":0,"throttle_events":3,"throttle_sleeps":2,
                "flushing_sleeps":0,"flushing_ms":0,"draining_sleeps":0,"draining_ms":0,
                "stall_sleeps":2,"pause_ms":400,"stall_ms":400,"max_pause_ms":200,
                "max_call_ms":400,"work_background":0,"work_periodic":0}"#,
        )
        .unwrap();
        assert_eq!(
            (&m.causes, &m.entries, m.drain_floor_pages),
            (&None, &None, None)
        );
        assert_eq!(m.get("unrequested_sleeps"), None);
    }
}
