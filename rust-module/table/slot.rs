// SPDX-License-Identifier: GPL-2.0

//! One slot of the table: the writeback domain it counts for ([`SlotKey`]), its bdi's name as
//! printed ([`Name`]), and what it holds ([`Slot`]): the counters, the passes seen, the last
//! background request and the last thresholds.

use super::{
    counter::{
        Counter,
        NR_COUNTERS, //
    },
    jiffies::time_after_eq,
    sleep_class::WbFacts,
    snapshot::SnapshotCell, //
};
use kernel::{
    sync::atomic::{
        Acquire,
        Atomic,
        Relaxed,
        Release, //
    },
    time::Jiffies, //
};

/// Bytes kept of a bdi's `dev_name` (the C array is `char dev_name[64]`, NUL included).
pub(crate) const NAME_LEN: usize = 64;

const NAME_WORDS: usize = NAME_LEN / 8;

/// Longest name stored: the C array holds at most 63 characters before its NUL.
const NAME_MAX: usize = NAME_LEN - 1;

/// Name shown for a bdi without a device, as `bdi_dev_name()` does.
pub(crate) const UNKNOWN_NAME: &[u8] = b"(unknown)";

/// Identity of a slot: a bdi (`bdi->id`, assigned from 1 up and never reused) and the memcg of
/// the writeback (0 for the bdi's root wb, else `wb->memcg_css->id`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SlotKey {
    /// `bdi->id`.
    pub(crate) bdi_id: u64,
    /// The memcg css id, 0 for the root wb.
    pub(crate) memcg_id: u32,
}

impl SlotKey {
    /// The key as one word, so claiming a slot is a single compare-exchange and two CPUs can
    /// never claim two slots for one key. 0 means "free": bdi ids start at 1. A bdi id that does
    /// not fit in 32 bits (four billion bdi registrations) has no packed form; its events count
    /// as `unslotted`.
    pub(crate) fn pack(self) -> Option<u64> {
        if self.bdi_id == 0 || self.bdi_id > u64::from(u32::MAX) {
            return None;
        }
        Some(self.bdi_id << 32 | u64::from(self.memcg_id))
    }

    /// Inverse of [`Self::pack`].
    pub(crate) fn unpack(packed: u64) -> Self {
        Self {
            bdi_id: packed >> 32,
            memcg_id: packed as u32,
        }
    }
}

/// A bdi name, as stored in a slot: printable ASCII only, at most [`NAME_MAX`] bytes.
#[derive(Clone, Copy)]
pub(crate) struct Name {
    bytes: [u8; NAME_LEN],
    len: usize,
}

impl Name {
    /// Makes a name from the bytes of a C `dev_name` array: stops at the first NUL or after
    /// [`NAME_MAX`] bytes, and replaces each byte that would break the `key=value` format (space,
    /// `=`, anything outside printable ASCII) with `_`. An empty name becomes `(unknown)`.
    pub(crate) fn sanitize(raw: &[u8]) -> Self {
        let mut bytes = [0u8; NAME_LEN];
        let mut len = 0;
        for &b in raw.iter().take(NAME_MAX) {
            if b == 0 {
                break;
            }
            bytes[len] = if b.is_ascii_graphic() && b != b'=' {
                b
            } else {
                b'_'
            };
            len += 1;
        }
        if len == 0 {
            bytes[..UNKNOWN_NAME.len()].copy_from_slice(UNKNOWN_NAME);
            len = UNKNOWN_NAME.len();
        }
        Self { bytes, len }
    }

    /// The name as text.
    pub(crate) fn as_str(&self) -> &str {
        // `sanitize` and `Slot::name` only ever produce printable ASCII.
        core::str::from_utf8(&self.bytes[..self.len]).unwrap_or("?")
    }
}

/// One slot: a key, the bdi's name, counters, the last background start, the last thresholds.
pub(crate) struct Slot {
    /// Packed [`SlotKey`]; 0 while free. Set once, by the claiming compare-exchange.
    pub(super) key: Atomic<u64>,
    /// Set (release) once `name` is filled in.
    named: Atomic<bool>,
    name: [Atomic<u64>; NAME_WORDS],
    strictlimit: Atomic<bool>,
    /// `writeback_start` events since the slot was claimed (never reset): a sleep saw a pass
    /// begin when this moved between its start and its end.
    pub(super) passes: Atomic<u64>,
    /// The wb's submitted count (`WB_WRITEBACK + WB_WRITTEN`) at the last `writeback_start`;
    /// [`NO_PASS_BASE`] until one is seen.
    pub(super) pass_base: Atomic<i64>,
    /// jiffies of the last `writeback_wake_background`, valid once `bg_seen` is set (release).
    pub(super) bg_last: Atomic<Jiffies>,
    pub(super) bg_seen: Atomic<bool>,
    pub(super) counters: [Atomic<u64>; NR_COUNTERS],
    pub(super) snap: SnapshotCell,
}

impl Slot {
    pub(super) const fn new() -> Self {
        Self {
            key: Atomic::new(0),
            named: Atomic::new(false),
            name: [const { Atomic::new(0) }; NAME_WORDS],
            strictlimit: Atomic::new(false),
            passes: Atomic::new(0),
            pass_base: Atomic::new(NO_PASS_BASE),
            bg_last: Atomic::new(0),
            bg_seen: Atomic::new(false),
            counters: [const { Atomic::new(0) }; NR_COUNTERS],
            snap: SnapshotCell::new(),
        }
    }

    pub(super) fn set_name(&self, name: &Name) {
        for (i, word) in self.name.iter().enumerate() {
            let mut b = [0u8; 8];
            b.copy_from_slice(&name.bytes[i * 8..i * 8 + 8]);
            word.store(u64::from_le_bytes(b), Relaxed);
        }
        self.named.store(true, Release);
    }

    /// The key, if the slot is claimed and its name is published.
    pub(crate) fn key(&self) -> Option<SlotKey> {
        if !self.named.load(Acquire) {
            return None;
        }
        Some(SlotKey::unpack(self.key.load(Relaxed)))
    }

    /// The stored name (only meaningful once [`Self::key`] is `Some`).
    pub(crate) fn name(&self) -> Name {
        let mut bytes = [0u8; NAME_LEN];
        for (i, word) in self.name.iter().enumerate() {
            bytes[i * 8..i * 8 + 8].copy_from_slice(&word.load(Relaxed).to_le_bytes());
        }
        // The claimer stored a sanitized name: printable ASCII, NUL padded.
        let len = bytes.iter().position(|&b| b == 0).unwrap_or(NAME_MAX);
        Name { bytes, len }
    }

    /// Adds `n` to `counter`.
    pub(crate) fn add(&self, counter: Counter, n: u64) {
        self.counters[counter as usize].add(n, Relaxed);
    }

    /// Raises `counter` to `value` if it is lower.
    ///
    /// Lock-free, not bounded by a count: a compare-exchange fails only because another CPU
    /// stored meanwhile, and every store to a maximum is a raise that succeeded (or `reset`'s
    /// zero), so each retry follows another CPU's progress and the loop ends as soon as the cell
    /// holds `value` or more. Giving up instead would lose a judged value (`max_call_ms`).
    pub(crate) fn raise(&self, counter: Counter, value: u64) {
        let cell = &self.counters[counter as usize];
        let mut cur = cell.load(Relaxed);
        while cur < value {
            match cell.cmpxchg(cur, value, Relaxed) {
                Ok(_) => return,
                Err(seen) => cur = seen,
            }
        }
    }

    /// The current value of `counter`.
    #[cfg_attr(
        not(CONFIG_KUNIT = "y"),
        allow(dead_code, reason = "used by the KUnit tests")
    )]
    pub(crate) fn get(&self, counter: Counter) -> u64 {
        self.counters[counter as usize].load(Relaxed)
    }

    /// All counters, in [`Counter`] order.
    pub(crate) fn counters(&self) -> [u64; NR_COUNTERS] {
        core::array::from_fn(|i| self.counters[i].load(Relaxed))
    }

    /// The strictlimit capability as last seen by an event.
    pub(crate) fn strictlimit(&self) -> bool {
        self.strictlimit.load(Relaxed)
    }

    /// Records the strictlimit capability seen by an event.
    pub(crate) fn set_strictlimit(&self, on: bool) {
        self.strictlimit.store(on, Relaxed);
    }

    /// `writeback_start` events seen for this slot since it was claimed.
    pub(crate) fn passes(&self) -> u64 {
        self.passes.load(Acquire)
    }

    /// What a sleep that begins with `facts` counts a pass's pages from: the submitted count
    /// at the start of the pass in progress (`running`), if its `writeback_start` was seen, else
    /// the sleep's own.
    pub(crate) fn pass_base(&self, facts: &WbFacts) -> i64 {
        if facts.running {
            self.pass_base.load(Relaxed).min(facts.submitted)
        } else {
            facts.submitted
        }
    }

    /// Whether a background writeback start was requested for this slot at or after `since`
    /// and at or before `until` (jiffies, compared wrap-safe as `time_after_eq()` does). Only
    /// the last request is kept: if it lies before `since`, none came since.
    pub(crate) fn requested_between(&self, since: Jiffies, until: Jiffies) -> bool {
        if !self.bg_seen.load(Acquire) {
            return false;
        }
        let last = self.bg_last.load(Relaxed);
        time_after_eq(last, since) && time_after_eq(until, last)
    }

    /// The snapshot cell.
    pub(crate) fn snapshot(&self) -> &SnapshotCell {
        &self.snap
    }
}

/// [`Slot::pass_base`] before the slot has seen a pass begin: no lower than any count.
pub(crate) const NO_PASS_BASE: i64 = i64::MAX;
