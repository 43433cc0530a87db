//! The wbstall module's counters for the writer's writeback domain, the
//! mechanism of a run: what the module's `stats` line says, or what the
//! tracefs detector counted in a boot without the module.

use std::collections::BTreeMap;

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::results::debugfs::{self, KvLine};

/// The module's counters for the writer's BDI (and memcg), the mechanism.
/// Read from a `stats` line by field name: a key the module did not print is
/// an error naming it (a unit test keeps the names within `STATS_KEYS`).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Mechanism {
    pub strictlimit: u64,
    pub bg_starts: u64,
    pub throttle_events: u64,
    pub throttle_sleeps: u64,
    /// Sleeps during which a flusher pass ran on the writers' wb.
    pub flushing_sleeps: u64,
    pub flushing_ms: u64,
    /// Sleeps with no pass, during which pages of the writers' wb completed
    /// writeback (the module) or any writeback completed (the trace).
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
    /// The module's other counters (those without a field here, such as one
    /// it added later), by name: the metric registry reports them by key.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub more: BTreeMap<String, u64>,
}

impl Mechanism {
    pub fn from_record(r: &KvLine) -> Result<Mechanism> {
        let mut m: Mechanism = serde_json::from_value(Value::Object(r.clone()))
            .context("the writer's line of wbstall/stats lacks a counter")?;
        let typed = serde_json::to_value(&m)?;
        for k in &debugfs::keys().counters {
            if typed.get(k).is_none() {
                m.more
                    .insert(k.clone(), debugfs::counter(r, k, "wbstall/stats")?);
            }
        }
        Ok(m)
    }

    /// A counter by its key, typed or not.
    /// Sleeps classed flushing, draining or stall.
    pub fn classed_sleeps(&self) -> u64 {
        self.flushing_sleeps + self.draining_sleeps + self.stall_sleeps
    }

    pub fn get(&self, key: &str) -> Option<u64> {
        match serde_json::to_value(self).ok()?.get(key) {
            Some(v) => v.as_u64(),
            None => self.more.get(key).copied(),
        }
    }
}
