// SPDX-License-Identifier: GPL-2.0

//! The thresholds of a slot's last throttle decision ([`Snapshot`]), kept behind a sequence
//! counter ([`SnapshotCell`]) so that a reader of `thresholds` never sees a torn one.

use kernel::{
    processor::cpu_relax,
    sync::{
        atomic::{
            Acquire,
            Atomic,
            Full,
            Relaxed,
            Release, //
        },
        barrier::{
            smp_mb,
            Read, //
        },
    },
    time::Jiffies, //
};

/// Which writeback domain a throttle decision was taken in.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Domain {
    /// The global domain (`dtc->gdtc == NULL`).
    Global,
    /// A memcg domain (`dtc->gdtc != NULL`).
    Memcg,
}

impl Domain {
    /// The word printed after `domain=`.
    pub(crate) fn as_str(self) -> &'static str {
        match self {
            Domain::Global => "global",
            Domain::Memcg => "memcg",
        }
    }
}

/// The thresholds of one throttle decision, as read from its `dirty_throttle_control`.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Snapshot {
    /// Domain of the dtc `balance_dirty_pages()` throttled on.
    pub(crate) domain: Domain,
    /// jiffies when the snapshot was taken.
    pub(crate) taken: Jiffies,
    /// `dtc->thresh`, pages.
    pub(crate) thresh: u64,
    /// `dtc->bg_thresh`, pages.
    pub(crate) bg_thresh: u64,
    /// `dtc->dirty`, pages.
    pub(crate) dirty: u64,
    /// `dtc->limit`, pages.
    pub(crate) limit: u64,
    /// `dtc->wb_dirty`, pages.
    pub(crate) wb_dirty: u64,
    /// `dtc->wb_thresh`, pages.
    pub(crate) wb_thresh: u64,
    /// `dtc->wb_bg_thresh`, pages.
    pub(crate) wb_bg_thresh: u64,
    /// `dtc->pos_ratio` (fixed point, 1.0 == 1 << 10).
    pub(crate) pos_ratio: u64,
    /// `wb->dirty_ratelimit`, pages per second.
    pub(crate) dirty_ratelimit: u64,
    /// The task's ratelimit, pages per second.
    pub(crate) task_ratelimit: u64,
    /// The pause decided, ms; zero or negative when the task did not sleep.
    pub(crate) pause_ms: i64,
}

impl Snapshot {
    /// An all-zero global snapshot.
    #[cfg_attr(
        not(CONFIG_KUNIT = "y"),
        allow(dead_code, reason = "used by the KUnit tests")
    )]
    pub(crate) const fn zeroed() -> Self {
        Self {
            domain: Domain::Global,
            taken: 0,
            thresh: 0,
            bg_thresh: 0,
            dirty: 0,
            limit: 0,
            wb_dirty: 0,
            wb_thresh: 0,
            wb_bg_thresh: 0,
            pos_ratio: 0,
            dirty_ratelimit: 0,
            task_ratelimit: 0,
            pause_ms: 0,
        }
    }
}

/// Why a [`SnapshotCell`] read or clear gave up.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Busy;

const SNAP_WORDS: usize = 10;

/// A [`Snapshot`] behind a sequence counter, so a reader never sees half of two snapshots.
///
/// Writer (a probe): reads an even `seq`, takes the odd value with a fully ordered
/// compare-exchange, stores the fields, publishes the next even value with release ordering.
/// If `seq` is odd or the compare-exchange loses, another CPU is writing: the probe drops its
/// update rather than wait. Reader: loads `seq` (acquire), the fields, `smp_rmb()`, `seq` again,
/// and retries a bounded number of times while `seq` is odd or changed. Every field is an
/// atomic, so there is no data race even while a reader retries.
pub(crate) struct SnapshotCell {
    seq: Atomic<u32>,
    valid: Atomic<bool>,
    memcg: Atomic<bool>,
    taken: Atomic<Jiffies>,
    words: [Atomic<u64>; SNAP_WORDS],
    pause_ms: Atomic<i64>,
}

impl SnapshotCell {
    /// An empty cell.
    pub(crate) const fn new() -> Self {
        Self {
            seq: Atomic::new(0),
            valid: Atomic::new(false),
            memcg: Atomic::new(false),
            taken: Atomic::new(0),
            words: [const { Atomic::new(0) }; SNAP_WORDS],
            pause_ms: Atomic::new(0),
        }
    }

    /// Takes the write side, or returns `None` if another CPU holds it.
    pub(crate) fn begin_write(&self) -> Option<u32> {
        let seq = self.seq.load(Relaxed);
        if seq & 1 != 0 {
            return None;
        }
        // `Full`: the odd value is visible before any field store that follows.
        self.seq.cmpxchg(seq, seq.wrapping_add(1), Full).ok()
    }

    /// Publishes the fields stored since [`Self::begin_write`] returned `seq`.
    pub(crate) fn end_write(&self, seq: u32) {
        self.seq.store(seq.wrapping_add(2), Release);
    }

    /// Stores `snap`; returns `false` (and stores nothing) if another CPU is writing.
    pub(crate) fn try_write(&self, snap: &Snapshot) -> bool {
        let Some(seq) = self.begin_write() else {
            return false;
        };
        let words = [
            snap.thresh,
            snap.bg_thresh,
            snap.dirty,
            snap.limit,
            snap.wb_dirty,
            snap.wb_thresh,
            snap.wb_bg_thresh,
            snap.pos_ratio,
            snap.dirty_ratelimit,
            snap.task_ratelimit,
        ];
        for (cell, value) in self.words.iter().zip(words) {
            cell.store(value, Relaxed);
        }
        self.memcg.store(snap.domain == Domain::Memcg, Relaxed);
        self.taken.store(snap.taken, Relaxed);
        self.pause_ms.store(snap.pause_ms, Relaxed);
        self.valid.store(true, Relaxed);
        self.end_write(seq);
        true
    }

    /// Forgets the snapshot; returns `false` if another CPU is writing.
    pub(crate) fn try_clear(&self) -> bool {
        let Some(seq) = self.begin_write() else {
            return false;
        };
        self.valid.store(false, Relaxed);
        self.end_write(seq);
        true
    }

    /// Reads a consistent snapshot (`None`: none taken since load or reset), retrying up to
    /// `tries` times while a writer is active.
    pub(crate) fn read(&self, tries: usize) -> Result<Option<Snapshot>, Busy> {
        for _ in 0..tries {
            let seq = self.seq.load(Acquire);
            if seq & 1 != 0 {
                cpu_relax();
                continue;
            }
            let valid = self.valid.load(Relaxed);
            let w: [u64; SNAP_WORDS] = core::array::from_fn(|i| self.words[i].load(Relaxed));
            let memcg = self.memcg.load(Relaxed);
            let taken = self.taken.load(Relaxed);
            let pause_ms = self.pause_ms.load(Relaxed);
            // The field loads complete before `seq` is read again (`smp_rmb()`).
            smp_mb(Read);
            if self.seq.load(Relaxed) != seq {
                cpu_relax();
                continue;
            }
            if !valid {
                return Ok(None);
            }
            return Ok(Some(Snapshot {
                domain: if memcg { Domain::Memcg } else { Domain::Global },
                taken,
                thresh: w[0],
                bg_thresh: w[1],
                dirty: w[2],
                limit: w[3],
                wb_dirty: w[4],
                wb_thresh: w[5],
                wb_bg_thresh: w[6],
                pos_ratio: w[7],
                dirty_ratelimit: w[8],
                task_ratelimit: w[9],
                pause_ms,
            }));
        }
        Err(Busy)
    }
}
