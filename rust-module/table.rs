// SPDX-License-Identifier: GPL-2.0

//! The fixed slot table the probes update and the debugfs files read.
//!
//! Everything here is plain Rust over [`Atomic`]s: no `bindings::`, no raw pointers, so the
//! KUnit tests drive it directly. The probe glue in `probes.rs` only turns kernel structs into
//! the plain values these functions take, and a wb into an opaque handle (`u64`) that the table
//! stores and gives back.
//!
//! Rules the code keeps, because the probes run as in atomic context (`writeback_start` fires
//! under `wb->list_lock`, `sched_entry_tp`/`sched_exit_tp` inside `__schedule()` with
//! preemption off; 7.3 calls every probe inside an SRCU-fast read section, where the writeback
//! probes may also be preempted):
//!
//! - no allocation, no sleeping, no lock of the table's own;
//! - every loop is bounded (the slot scan by [`NR_SLOTS`], the entry scan by [`NR_PENDING`]) or
//!   lock-free (a compare-exchange retried only because another CPU's store succeeded); a probe
//!   never waits for another CPU.
//!
//! # A sleep's entry, and the handle it holds
//!
//! A throttle decision with `pause > 0` (`on_throttle`) fills an entry for its task with what
//! holds at the sleep's start and the handle of the writer's wb, which the glue pins (a
//! reference on the wb) before the table can hand it back. The entry's only other steps are
//! the task's own next calls into the scheduler:
//!
//! - its first voluntary `__schedule()` (`on_sched_entry`): in `balance_dirty_pages()` that is
//!   the throttle's `io_schedule_timeout()`, entered `TASK_KILLABLE` with `in_iowait`, or already
//!   woken (`TASK_RUNNING`: its timer fired first). The entry is then asleep. Any other wait (a
//!   task that left through `BDP_ASYNC` and blocks elsewhere, or exits) drops it;
//! - the return from that same `__schedule()` (`on_sched_exit`), switched out or not: the wb is
//!   read again, the sleep classed, the entry freed and its handle given back to be unpinned.
//!
//! Any throttle event of the task that finds an entry still waiting for its schedule drops it
//! first (whatever its pause). So an entry never outlives the sleep it was made for, and while
//! it lives its wb is pinned: every read of the wb through a handle is of a live wb.

use kernel::{
    prelude::*,
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

/// Number of slots: one per (bdi, memcg) writeback domain seen.
pub(crate) const NR_SLOTS: usize = 32;

/// Bytes kept of a bdi's `dev_name` (the C array is `char dev_name[64]`, NUL included).
pub(crate) const NAME_LEN: usize = 64;

const NAME_WORDS: usize = NAME_LEN / 8;

/// Longest name stored: the C array holds at most 63 characters before its NUL.
const NAME_MAX: usize = NAME_LEN - 1;

/// Name shown for a bdi without a device, as `bdi_dev_name()` does.
pub(crate) const UNKNOWN_NAME: &[u8] = b"(unknown)";

/// Pages of the writer's wb that must complete writeback during a sleep (`WB_WRITTEN` rising by
/// more than this) for a sleep without a writing pass to be [`SleepClass::Draining`]: one stray
/// completion does not make a sleep draining. Printed in `summary` (`drain_floor_pages`); the
/// host's tracefs detector reads this line (xtask/src/results/tracefs.rs), so both detectors
/// class by the same floor.
pub(crate) const DRAIN_FLOOR_PAGES: u64 = 8;

/// [`DRAIN_FLOOR_PAGES`] as the counts' type.
const DRAIN_FLOOR: i64 = DRAIN_FLOOR_PAGES as i64;
const _: () = assert!(DRAIN_FLOOR >= 0 && DRAIN_FLOOR as u64 == DRAIN_FLOOR_PAGES);

/// Per-slot counters, in the order of the `stats` line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
#[repr(usize)]
pub(crate) enum Counter {
    /// `writeback_wake_background` events: background writeback starts requested.
    BgStarts,
    /// `balance_dirty_pages` events: every throttle decision.
    ThrottleEvents,
    /// Throttle decisions with `pause > 0`: the writer slept.
    ThrottleSleeps,
    /// Sum of the sleeps, in ms.
    PauseMs,
    /// Longest sleep, in ms.
    MaxPauseMs,
    /// Longest time a writer spent in one `balance_dirty_pages()` call that slept, in ms: the
    /// event's `paused` (since the call began) plus its `pause`. The kernel's own latency of a
    /// throttled write, ramp included.
    MaxCallMs,
    /// Sleeps during which a flusher pass ran on the writer's wb and wrote pages of it
    /// ([`SleepClass::Flushing`]).
    FlushingSleeps,
    /// Sum of the flushing sleeps, in ms.
    FlushingMs,
    /// Sleeps without a writing pass, during which more than [`DRAIN_FLOOR_PAGES`] pages of the
    /// wb completed writeback ([`SleepClass::Draining`]).
    DrainingSleeps,
    /// Sum of the draining sleeps, in ms.
    DrainingMs,
    /// Sleeps with neither: [`SleepClass::Unrequested`] and [`SleepClass::Declined`] together.
    StallSleeps,
    /// Sum of the stall sleeps, in ms: the writer time the regression costs.
    StallMs,
    /// Sleeps whose end the module could not see, so not classed: no room in the table of
    /// sleeps in progress, or the entry was dropped ([`Counter::DroppedAtEvent`],
    /// [`Counter::DroppedAtBlock`]).
    LostEnds,
    /// `writeback_start` events with reason `WB_REASON_BACKGROUND`.
    WorkBackground,
    /// `writeback_start` events with reason `WB_REASON_PERIODIC`.
    WorkPeriodic,
    /// `writeback_start` events with reason `WB_REASON_SYNC`.
    WorkSync,
    /// `writeback_start` events with any other reason.
    WorkOther,
    /// Stall sleeps during which no background writeback was requested for the wb since the
    /// `balance_dirty_pages()` call began ([`SleepClass::Unrequested`]).
    UnrequestedSleeps,
    /// Sum of the unrequested stall sleeps, in ms.
    UnrequestedMs,
    /// Stall sleeps with a background writeback requested since the call began, and still no
    /// pass that wrote pages ([`SleepClass::Declined`]).
    DeclinedSleeps,
    /// Sum of the declined stall sleeps, in ms.
    DeclinedMs,
    /// Classed sleeps whose schedule did not block: the task was already woken when it entered
    /// it (its timer had fired), or it was not switched out. Classed at that schedule's return,
    /// like any other sleep.
    UnblockedSleeps,
    /// Entries dropped at a later throttle event of their task (any pause): the task left
    /// `balance_dirty_pages()` without its sleep's schedule (`BDP_ASYNC`). Counted in
    /// [`Counter::LostEnds`] too.
    DroppedAtEvent,
    /// Entries dropped at their task's first voluntary schedule because it was not the
    /// throttle's (another wait, one later than [`ARM_MS`], or the task's exit). Counted in
    /// [`Counter::LostEnds`] too.
    DroppedAtBlock,
}

/// Number of [`Counter`]s.
pub(crate) const NR_COUNTERS: usize = 24;

/// The reasons of `enum wb_reason` (include/linux/backing-dev-defs.h) that have their own
/// counter. The values are the C enum's; `probes.rs` checks them against the bindings at build
/// time.
pub(crate) const WB_REASON_BACKGROUND: u32 = 0;
/// `WB_REASON_SYNC`.
pub(crate) const WB_REASON_SYNC: u32 = 2;
/// `WB_REASON_PERIODIC`.
pub(crate) const WB_REASON_PERIODIC: u32 = 3;

/// The counter a `writeback_start` event with `reason` goes to. A reason the module does not
/// know (including anything at or past `WB_REASON_MAX`) is [`Counter::WorkOther`].
pub(crate) fn work_counter(reason: u32) -> Counter {
    match reason {
        WB_REASON_BACKGROUND => Counter::WorkBackground,
        WB_REASON_PERIODIC => Counter::WorkPeriodic,
        WB_REASON_SYNC => Counter::WorkSync,
        _ => Counter::WorkOther,
    }
}

/// `jiffies_to_msecs()` of include/linux/jiffies.h for a tick rate of `hz`.
///
/// The C function is a `static inline` when `hz` divides 1000 (the 7.3 guest runs at 250), so
/// no symbol exists to call; this is the same arithmetic, without the C's 32-bit truncation.
pub(crate) fn jiffies_to_ms(j: u64, hz: u32) -> u64 {
    let hz = u64::from(hz.max(1));
    if hz <= 1000 && 1000 % hz == 0 {
        (1000 / hz).saturating_mul(j)
    } else if hz > 1000 && hz % 1000 == 0 {
        j.div_ceil(hz / 1000)
    } else {
        j.saturating_mul(1000) / hz
    }
}

/// [`jiffies_to_ms`] for a signed count (a throttle `pause` is negative when the task's think
/// time already covered the period).
pub(crate) fn signed_jiffies_to_ms(j: i64, hz: u32) -> i64 {
    let ms = i64::try_from(jiffies_to_ms(j.unsigned_abs(), hz)).unwrap_or(i64::MAX);
    if j < 0 {
        -ms
    } else {
        ms
    }
}

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
    key: Atomic<u64>,
    /// Set (release) once `name` is filled in.
    named: Atomic<bool>,
    name: [Atomic<u64>; NAME_WORDS],
    strictlimit: Atomic<bool>,
    /// `writeback_start` events since the slot was claimed (never reset): a sleep saw a pass
    /// begin when this moved between its start and its end.
    passes: Atomic<u64>,
    /// The wb's submitted count (`WB_WRITEBACK + WB_WRITTEN`) at the last `writeback_start`;
    /// [`NO_PASS_BASE`] until one is seen.
    pass_base: Atomic<i64>,
    /// jiffies of the last `writeback_wake_background`, valid once `bg_seen` is set (release).
    bg_last: Atomic<Jiffies>,
    bg_seen: Atomic<bool>,
    counters: [Atomic<u64>; NR_COUNTERS],
    snap: SnapshotCell,
}

impl Slot {
    const fn new() -> Self {
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

    fn set_name(&self, name: &Name) {
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

/// `time_after_eq(a, b)` of include/linux/jiffies.h: `a` is at or after `b`, for two jiffies
/// values less than half the counter's range apart.
pub(crate) fn time_after_eq(a: Jiffies, b: Jiffies) -> bool {
    (a.wrapping_sub(b) as isize) >= 0
}

/// [`Slot::pass_base`] before the slot has seen a pass begin: no lower than any count.
pub(crate) const NO_PASS_BASE: i64 = i64::MAX;

/// How a throttle sleep is counted, from what held at its start and at its end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SleepClass {
    /// A flusher pass ran on the writer's wb during the sleep (`WB_writeback_running` at its
    /// start or at its end, or a `writeback_start` on the wb in between) and it wrote pages: the
    /// wb's submitted count rose by the sleep's end since the pass running at the sleep's start
    /// began (since the sleep's start if none was). A pass that wrote and then waits on the
    /// device through the sleep is flushing, as the tracefs detector sees it (a pass that wrote,
    /// from its own `nr_pages`); one that wrote nothing is not.
    Flushing,
    /// No pass that wrote, but more than [`DRAIN_FLOOR_PAGES`] pages of the writer's wb
    /// completed writeback during the sleep: the device was draining what had been submitted.
    Draining,
    /// A stall (neither of the above) during which nobody asked for background writeback of
    /// the wb since the `balance_dirty_pages()` call began: the signature of 64dd89ae01f2.
    Unrequested,
    /// A stall although background writeback of the wb was asked for since the call began:
    /// asked, and nothing written.
    Declined,
}

impl SleepClass {
    /// Unrequested and declined sleeps are both stalls.
    pub(crate) fn is_stall(self) -> bool {
        matches!(self, SleepClass::Unrequested | SleepClass::Declined)
    }
}

/// What the module reads of the writer's wb at a sleep's start and at its end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct WbFacts {
    /// `WB_writeback_running` set in `wb->state`.
    pub(crate) running: bool,
    /// The wb's `WB_WRITTEN` count: pages whose writeback completed.
    pub(crate) written: i64,
    /// `WB_WRITEBACK + WB_WRITTEN`: pages ever put under writeback (it only grows).
    pub(crate) submitted: i64,
}

/// The two per-wb counters a sleep's facts are made of (`enum wb_stat_item`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Stat {
    /// `WB_WRITEBACK`: pages under writeback now.
    Writeback,
    /// `WB_WRITTEN`: pages whose writeback completed, ever.
    Written,
}

impl WbFacts {
    /// The facts at a sleep's start, reading the counters with `read` (each read exact on its
    /// own: `probes.rs` sums under the counter's lock). A completion lowers `WB_WRITEBACK`, then
    /// raises `WB_WRITTEN` (`__folio_end_writeback()`, interrupts off); `WB_WRITEBACK` is read
    /// first, so a completion that falls between the two reads is counted twice and `written`
    /// is as late as it can be: both come out high. The one exception: a completion that
    /// lowered `WB_WRITEBACK` before the first read and raises `WB_WRITTEN` only after the
    /// second (its second update waiting for the lock the second read holds) is counted in
    /// neither, so `submitted` can be low by the pages of the completions caught that way.
    pub(crate) fn at_start(running: bool, mut read: impl FnMut(Stat) -> i64) -> Self {
        let writeback = read(Stat::Writeback);
        let written = read(Stat::Written);
        Self::from_counts(running, written, writeback)
    }

    /// The facts at a sleep's end: `WB_WRITTEN` before `WB_WRITEBACK`, so a completion is
    /// counted at most once (in neither if it falls between the reads): both come out low,
    /// without exception. With [`Self::at_start`], a rise of `written` from start to end is
    /// never more than the true one, and one of `submitted` exceeds it at most by the pages
    /// of completions caught between their two updates at the start.
    pub(crate) fn at_end(running: bool, mut read: impl FnMut(Stat) -> i64) -> Self {
        let written = read(Stat::Written);
        let writeback = read(Stat::Writeback);
        Self::from_counts(running, written, writeback)
    }

    /// The facts from the two counts, however they were read.
    fn from_counts(running: bool, written: i64, writeback: i64) -> Self {
        Self {
            running,
            written,
            submitted: writeback.saturating_add(written),
        }
    }
}

/// Classes one sleep. `pass_base`: the submitted count a pass's pages are counted from
/// ([`Slot::pass_base`]; never above `start.submitted`); `passes_*`: the slot's
/// `writeback_start` count at the start and at the end; `requested`: a background start was
/// asked for the wb between the call's start and the sleep's end.
///
/// The counts are read so that a rise is understated, not invented ([`WbFacts::at_start`],
/// [`WbFacts::at_end`]): each is the kernel's exact per-CPU sum, and of the two counters the one
/// a completion moves last is read last at the start and first at the end. So more than the
/// floor drained really did; a pass that "wrote" did, unless the only pages are those of a
/// completion caught between its two counter updates at the start (a pass must also have run);
/// a rise that was missed happened while the counters were being read.
pub(crate) fn classify(
    start: WbFacts,
    end: WbFacts,
    pass_base: i64,
    passes_start: u64,
    passes_end: u64,
    requested: bool,
) -> SleepClass {
    let pass = start.running || end.running || passes_end != passes_start;
    if pass && end.submitted > pass_base.min(start.submitted) {
        SleepClass::Flushing
    } else if end.written.saturating_sub(start.written) > DRAIN_FLOOR {
        SleepClass::Draining
    } else if requested {
        SleepClass::Declined
    } else {
        SleepClass::Unrequested
    }
}

/// One `balance_dirty_pages` event, as plain values.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ThrottleEvent {
    /// The pause decided, jiffies (`pause` of the tracepoint).
    pub(crate) pause: c_long,
    /// jiffies since the call began (`jiffies - start_time`, the tracepoint's `paused`).
    pub(crate) paused: Jiffies,
    /// jiffies when the `balance_dirty_pages()` call began (the tracepoint's `start_time`).
    pub(crate) call_start: Jiffies,
    /// The writer's wb at the event.
    pub(crate) facts: WbFacts,
    /// The bdi has `BDI_CAP_STRICTLIMIT`.
    pub(crate) strictlimit: bool,
    /// The thresholds (its `taken` is the event's time).
    pub(crate) snapshot: Snapshot,
}

/// What the glue does after [`Table::on_throttle`].
#[must_use = "a stored handle must be pinned, a released one unpinned"]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Throttled {
    /// The sleep has an entry holding the event's handle: the glue pins it before its probe
    /// returns (only this task's own later calls into the table can give it back).
    pub(crate) stored: bool,
    /// The handle of an older entry of the task that this event dropped: the glue unpins it.
    pub(crate) release: Option<u64>,
}

/// What the glue does after [`Table::on_sched_exit`].
#[must_use = "a released handle must be unpinned"]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Woke {
    /// The class counted (`None`: no sleep of the task ended here, or it began before a reset).
    pub(crate) class: Option<SleepClass>,
    /// The handle of the entry that ended here: the glue unpins it.
    pub(crate) release: Option<u64>,
}

/// Sleeps that can be in progress at once; a writer is in at most one. A sleep that finds no
/// free entry counts as [`Counter::LostEnds`].
pub(crate) const NR_PENDING: usize = 64;

/// The most time between a sleep's event and its task's first voluntary schedule, ms. The
/// throttle's `io_schedule_timeout()` follows the tracepoint directly; under a hypervisor (TCG
/// here) a vCPU can be descheduled for a few ticks in between. Later, the schedule is not the
/// throttle's (a task that left through `BDP_ASYNC`), and the entry is dropped.
pub(crate) const ARM_MS: u64 = 200;

/// An entry whose task has not yet entered its sleep's schedule.
const FILLED: u32 = 1;
/// An entry whose task is inside its sleep's schedule.
const ASLEEP: u32 = 2;

/// A sleep in progress: what held at its start, until its schedule returns.
///
/// # Ordering
///
/// Only claiming touches an entry that is not the caller's: one fully ordered
/// compare-exchange of `task` from 0. Every later step runs in the context of the task that
/// owns the entry (its throttle event, then its own `__schedule()` entry and exit; `probes.rs`
/// passes `current`), so all other accesses to an entry's fields are by one task, in program
/// order, and `Relaxed` suffices: when that task migrates, the scheduler orders everything it
/// did on the old CPU before it runs on the new one (the old CPU's `smp_store_release()` of
/// `on_cpu` in `finish_task()`, paired with `smp_cond_load_acquire()` of `on_cpu` in
/// `try_to_wake_up()`, and the runqueue locks for a migration of a runnable task). Freeing
/// clears the fields, then releases `task` to 0 (release), after which the owner never touches
/// the entry again; a claimer's compare-exchange (full) orders its stores after that.
/// [`Table::release_all`] is the one exception, and runs only once no probe can run.
struct Pending {
    /// The task (its `task_struct` address), 0 while free.
    task: Atomic<u64>,
    /// [`FILLED`] or [`ASLEEP`].
    state: Atomic<u32>,
    /// The table's generation when the sleep began: a sleep begun before a reset is not counted.
    generation: Atomic<u64>,
    slot: Atomic<u64>,
    /// jiffies of the event.
    taken: Atomic<Jiffies>,
    /// jiffies when the `balance_dirty_pages()` call began.
    call_start: Atomic<Jiffies>,
    pause_ms: Atomic<u64>,
    running: Atomic<bool>,
    written: Atomic<i64>,
    submitted: Atomic<i64>,
    /// [`Slot::pass_base`] at the sleep's start.
    pass_base: Atomic<i64>,
    passes: Atomic<u64>,
    /// The task was already woken when it entered its sleep's schedule.
    woken: Atomic<bool>,
    /// The glue's handle on the wb (pinned while the entry holds it), given back at the end.
    wb: Atomic<u64>,
}

impl Pending {
    const fn new() -> Self {
        Self {
            task: Atomic::new(0),
            state: Atomic::new(0),
            generation: Atomic::new(0),
            slot: Atomic::new(0),
            taken: Atomic::new(0),
            call_start: Atomic::new(0),
            pause_ms: Atomic::new(0),
            running: Atomic::new(false),
            written: Atomic::new(0),
            submitted: Atomic::new(0),
            pass_base: Atomic::new(0),
            passes: Atomic::new(0),
            woken: Atomic::new(false),
            wb: Atomic::new(0),
        }
    }

    /// Frees the entry and returns the handle it held.
    fn free(&self, in_flight: &Atomic<u64>) -> u64 {
        let wb = self.wb.load(Relaxed);
        self.state.store(0, Relaxed);
        self.wb.store(0, Relaxed);
        self.task.store(0, Release);
        in_flight.fetch_sub(1, Relaxed);
        wb
    }
}

/// The task's state when it entered `__schedule()` (`current->__state`), as far as the table
/// needs it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum TaskState {
    /// `TASK_RUNNING`: already woken (a sleep whose timer fired before it blocked).
    Running,
    /// `TASK_KILLABLE`: the throttle's sleep (`__set_current_state(TASK_KILLABLE)`).
    Killable,
    /// Any other state (another kind of wait, `TASK_DEAD`).
    Other,
}

/// A call of `__schedule()` by the current task (`sched_entry_tp`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SchedEntry {
    /// A preemption (`SM_PREEMPT`): the task is still where it was, for example between its
    /// throttle event and its sleep.
    Preempted,
    /// A voluntary call.
    Voluntary {
        /// `current->__state`.
        state: TaskState,
        /// `current->in_iowait`: set by `io_schedule_prepare()`.
        iowait: bool,
    },
}

/// The slot table.
pub(crate) struct Table {
    slots: [Slot; NR_SLOTS],
    unslotted: Atomic<u64>,
    hz: u32,
    pending: [Pending; NR_PENDING],
    /// Entries of `pending` in use: the scheduler probes look no further while it is 0.
    in_flight: Atomic<u64>,
    /// One past the highest entry ever claimed: entries are claimed lowest first, so a lookup
    /// (on every schedule while a sleep is in progress) scans only this prefix, a few entries
    /// for a few writers, not all [`NR_PENDING`].
    claimed: Atomic<u64>,
    /// Bumped by [`Table::reset`].
    generation: Atomic<u64>,
}

// SAFETY: A `Table` is made of integers, bools and `Atomic`s of them, in arrays and structs: for
// each of them all-zero bytes are a valid value, and an all-zero table is an empty one (what
// `Table::new` makes, but for `hz`).
unsafe impl Zeroable for Table {}

impl Table {
    /// An empty table on the heap, zeroed in place: at about 20 KiB it is more than a kernel
    /// stack holds. Each KUnit test makes its own, so a test never sees another's counts, and a
    /// second run of the suite (`/sys/kernel/debug/kunit/wbstall/run`) starts clean.
    #[cfg_attr(
        not(CONFIG_KUNIT = "y"),
        allow(dead_code, reason = "used by the KUnit tests")
    )]
    pub(crate) fn boxed(hz: u32) -> Result<KBox<Table>> {
        KBox::init(
            init!(Table {
                hz,
                ..Zeroable::init_zeroed()
            }),
            GFP_KERNEL,
        )
    }

    /// An empty table for a kernel ticking at `hz`.
    pub(crate) const fn new(hz: u32) -> Self {
        Self {
            slots: [const { Slot::new() }; NR_SLOTS],
            unslotted: Atomic::new(0),
            hz,
            pending: [const { Pending::new() }; NR_PENDING],
            in_flight: Atomic::new(0),
            claimed: Atomic::new(0),
            generation: Atomic::new(0),
        }
    }

    /// The tick rate the table converts jiffies with.
    pub(crate) fn hz(&self) -> u32 {
        self.hz
    }

    /// The slot for `key`, claiming the first free one if `key` has none; `name` is called
    /// once, by the claimer only. `None` (and `unslotted` counted) when the table is full or
    /// the key cannot be packed.
    ///
    /// Slots are claimed in index order and never freed, so every CPU looking for a key scans
    /// the same prefix of claimed slots and meets the same first free slot: a lost
    /// compare-exchange there either returns the winner's slot (same key) or moves on.
    pub(crate) fn slot(&self, key: SlotKey, name: impl FnOnce() -> Name) -> Option<&Slot> {
        let Some(packed) = key.pack() else {
            self.unslotted.add(1, Relaxed);
            return None;
        };
        for slot in &self.slots {
            let cur = slot.key.load(Acquire);
            if cur == packed {
                return Some(slot);
            }
            if cur != 0 {
                continue;
            }
            match slot.key.cmpxchg(0, packed, Full) {
                Ok(_) => {
                    slot.set_name(&name());
                    return Some(slot);
                }
                Err(winner) if winner == packed => return Some(slot),
                Err(_) => continue,
            }
        }
        self.unslotted.add(1, Relaxed);
        None
    }

    /// The slot already claimed for `key`, without claiming one.
    #[cfg_attr(
        not(CONFIG_KUNIT = "y"),
        allow(dead_code, reason = "used by the KUnit tests")
    )]
    pub(crate) fn find(&self, key: SlotKey) -> Option<&Slot> {
        let packed = key.pack()?;
        self.slots
            .iter()
            .find(|slot| slot.key.load(Acquire) == packed)
    }

    /// All slots, claimed or not, in index order.
    pub(crate) fn slots(&self) -> &[Slot; NR_SLOTS] {
        &self.slots
    }

    /// Slots whose key and name are published.
    pub(crate) fn used(&self) -> usize {
        self.slots.iter().filter(|s| s.key().is_some()).count()
    }

    /// Events that found no slot.
    pub(crate) fn unslotted(&self) -> u64 {
        self.unslotted.load(Relaxed)
    }

    /// `writeback_wake_background` at `now`: a background writeback start was requested.
    pub(crate) fn on_wake_background(
        &self,
        key: SlotKey,
        name: impl FnOnce() -> Name,
        strictlimit: bool,
        now: Jiffies,
    ) {
        let Some(slot) = self.slot(key, name) else {
            return;
        };
        slot.set_strictlimit(strictlimit);
        slot.add(Counter::BgStarts, 1);
        slot.bg_last.store(now, Relaxed);
        slot.bg_seen.store(true, Release);
    }

    /// `balance_dirty_pages`: one throttle decision of `task`. A sleep (`pause > 0`) is
    /// counted here and classed when its schedule returns ([`Self::on_sched_exit`]); `wb` is
    /// the glue's handle on the writer's wb, given back then.
    ///
    /// An entry of `task` still waiting for its schedule is dropped first, whatever this
    /// event's pause, slot or the table's room: its task came back without sleeping.
    pub(crate) fn on_throttle(
        &self,
        key: SlotKey,
        name: impl FnOnce() -> Name,
        task: u64,
        wb: u64,
        ev: &ThrottleEvent,
    ) -> Throttled {
        let release = self
            .entry_of(task)
            .map(|old| self.drop_entry(old, Counter::DroppedAtEvent));
        let not_stored = Throttled {
            stored: false,
            release,
        };
        let Some(slot) = self.slot(key, name) else {
            return not_stored;
        };
        slot.set_strictlimit(ev.strictlimit);
        slot.add(Counter::ThrottleEvents, 1);
        // Dropped when another CPU is writing this slot's snapshot; theirs is as recent.
        slot.snap.try_write(&ev.snapshot);
        if ev.pause <= 0 {
            return not_stored;
        }
        let pause_ms = jiffies_to_ms(ev.pause.unsigned_abs() as u64, self.hz);
        slot.add(Counter::ThrottleSleeps, 1);
        slot.add(Counter::PauseMs, pause_ms);
        slot.raise(Counter::MaxPauseMs, pause_ms);
        slot.raise(
            Counter::MaxCallMs,
            jiffies_to_ms(ev.paused as u64, self.hz).saturating_add(pause_ms),
        );
        let Some(index) = self.slots.iter().position(|s| core::ptr::eq(s, slot)) else {
            return not_stored;
        };
        let Some(entry) = self.claim(task) else {
            slot.add(Counter::LostEnds, 1);
            return not_stored;
        };
        entry
            .generation
            .store(self.generation.load(Relaxed), Relaxed);
        entry.slot.store(index as u64, Relaxed);
        entry.taken.store(ev.snapshot.taken, Relaxed);
        entry.call_start.store(ev.call_start, Relaxed);
        entry.pause_ms.store(pause_ms, Relaxed);
        entry.running.store(ev.facts.running, Relaxed);
        entry.written.store(ev.facts.written, Relaxed);
        entry.submitted.store(ev.facts.submitted, Relaxed);
        entry.pass_base.store(slot.pass_base(&ev.facts), Relaxed);
        entry.passes.store(slot.passes(), Relaxed);
        entry.woken.store(false, Relaxed);
        entry.wb.store(wb, Relaxed);
        entry.state.store(FILLED, Relaxed);
        Throttled {
            stored: true,
            release,
        }
    }

    /// `sched_entry_tp`: `task` (current) calls `__schedule()` at `now`. Its first voluntary
    /// call after its throttle event, within [`ARM_MS`], entered `TASK_KILLABLE` with
    /// `in_iowait` or already woken, is the throttle's sleep: the entry waits for its return.
    /// Any other voluntary call drops the entry (returned: the glue unpins it); a preemption
    /// changes nothing.
    #[must_use = "a released handle must be unpinned"]
    pub(crate) fn on_sched_entry(&self, task: u64, how: SchedEntry, now: Jiffies) -> Option<u64> {
        if self.in_flight.load(Relaxed) == 0 {
            return None;
        }
        let entry = self.entry_of(task)?;
        if entry.state.load(Relaxed) != FILLED {
            return None;
        }
        let within =
            jiffies_to_ms(now.wrapping_sub(entry.taken.load(Relaxed)) as u64, self.hz) <= ARM_MS;
        match how {
            SchedEntry::Preempted => None,
            SchedEntry::Voluntary {
                state: state @ (TaskState::Killable | TaskState::Running),
                iowait: true,
            } if within => {
                entry.woken.store(state == TaskState::Running, Relaxed);
                entry.state.store(ASLEEP, Relaxed);
                None
            }
            SchedEntry::Voluntary { .. } => Some(self.drop_entry(entry, Counter::DroppedAtBlock)),
        }
    }

    /// `sched_exit_tp`: the `__schedule()` call of `task` (current) returns at `now`;
    /// `switched`: it was switched out and back in. If that call was its sleep's, reads the wb
    /// again (`end`, given the handle from [`Self::on_throttle`]), classes the sleep, counts it
    /// and frees the entry.
    pub(crate) fn on_sched_exit(
        &self,
        task: u64,
        switched: bool,
        now: Jiffies,
        end: impl FnOnce(u64) -> WbFacts,
    ) -> Woke {
        let none = Woke {
            class: None,
            release: None,
        };
        if self.in_flight.load(Relaxed) == 0 {
            return none;
        }
        let Some(entry) = self.entry_of(task) else {
            return none;
        };
        if entry.state.load(Relaxed) != ASLEEP {
            return none;
        }
        let facts = end(entry.wb.load(Relaxed));
        let unblocked = entry.woken.load(Relaxed) || !switched;
        let class = self.finish(entry, facts, now, unblocked);
        Woke {
            class,
            release: Some(entry.free(&self.in_flight)),
        }
    }

    /// Classes `entry`'s sleep with `end`, what holds at its end (`now`), and counts it if it
    /// began since the last reset (`None` otherwise). The entry stays claimed.
    fn finish(
        &self,
        entry: &Pending,
        end: WbFacts,
        now: Jiffies,
        unblocked: bool,
    ) -> Option<SleepClass> {
        let slot = self.slots.get(entry.slot.load(Relaxed) as usize)?;
        if entry.generation.load(Relaxed) != self.generation.load(Relaxed) {
            return None;
        }
        let start = WbFacts {
            running: entry.running.load(Relaxed),
            written: entry.written.load(Relaxed),
            submitted: entry.submitted.load(Relaxed),
        };
        let requested = slot.requested_between(entry.call_start.load(Relaxed), now);
        let class = classify(
            start,
            end,
            entry.pass_base.load(Relaxed),
            entry.passes.load(Relaxed),
            slot.passes(),
            requested,
        );
        let ms = entry.pause_ms.load(Relaxed);
        let (sleeps, ms_counter) = match class {
            SleepClass::Flushing => (Counter::FlushingSleeps, Counter::FlushingMs),
            SleepClass::Draining => (Counter::DrainingSleeps, Counter::DrainingMs),
            SleepClass::Unrequested => (Counter::UnrequestedSleeps, Counter::UnrequestedMs),
            SleepClass::Declined => (Counter::DeclinedSleeps, Counter::DeclinedMs),
        };
        slot.add(sleeps, 1);
        slot.add(ms_counter, ms);
        if class.is_stall() {
            slot.add(Counter::StallSleeps, 1);
            slot.add(Counter::StallMs, ms);
        }
        if unblocked {
            slot.add(Counter::UnblockedSleeps, 1);
        }
        Some(class)
    }

    /// The entry of `task`'s sleep in progress.
    fn entry_of(&self, task: u64) -> Option<&Pending> {
        let claimed = self.claimed.load(Acquire) as usize;
        self.pending
            .iter()
            .take(claimed)
            .find(|e| e.task.load(Acquire) == task)
    }

    /// Claims a free entry for `task`.
    fn claim(&self, task: u64) -> Option<&Pending> {
        for (i, e) in self.pending.iter().enumerate() {
            if e.task.load(Relaxed) == 0 && e.task.cmpxchg(0, task, Full).is_ok() {
                self.in_flight.add(1, Relaxed);
                self.raise_claimed(i as u64 + 1);
                return Some(e);
            }
        }
        None
    }

    /// Raises `claimed` to at least `to`. Each lost compare-exchange means another CPU raised
    /// it, and it never exceeds [`NR_PENDING`], so `NR_PENDING + 1` tries always suffice.
    fn raise_claimed(&self, to: u64) {
        let mut cur = self.claimed.load(Relaxed);
        for _ in 0..=NR_PENDING {
            if cur >= to {
                return;
            }
            match self.claimed.cmpxchg(cur, to, Release) {
                Ok(_) => return,
                Err(seen) => cur = seen,
            }
        }
    }

    /// Drops `entry` unclassed: counts it as lost and by `why` (if it began since the last
    /// reset), frees it, and returns its handle.
    fn drop_entry(&self, entry: &Pending, why: Counter) -> u64 {
        if entry.generation.load(Relaxed) == self.generation.load(Relaxed) {
            if let Some(slot) = self.slots.get(entry.slot.load(Relaxed) as usize) {
                slot.add(Counter::LostEnds, 1);
                slot.add(why, 1);
            }
        }
        entry.free(&self.in_flight)
    }

    /// Frees every entry still in use and gives each handle to `release`. Only for when no
    /// probe can run any more (module unload, after the probes were detached and waited for):
    /// the entries' tasks are still asleep or never came back, and their sleeps are not
    /// counted.
    pub(crate) fn release_all(&self, mut release: impl FnMut(u64)) {
        for entry in &self.pending {
            if entry.task.load(Acquire) != 0 {
                release(entry.free(&self.in_flight));
            }
        }
    }

    /// One past the highest entry ever claimed: how far a lookup scans.
    #[cfg_attr(
        not(CONFIG_KUNIT = "y"),
        allow(dead_code, reason = "used by the KUnit tests")
    )]
    pub(crate) fn claimed(&self) -> u64 {
        self.claimed.load(Relaxed)
    }

    /// Sleeps in progress (entries in use).
    pub(crate) fn in_flight(&self) -> u64 {
        self.in_flight.load(Relaxed)
    }

    /// No sleep in progress: the scheduler probes have nothing to look up.
    pub(crate) fn idle(&self) -> bool {
        self.in_flight.load(Relaxed) == 0
    }

    /// `writeback_start`: a flusher pass began with `reason` (`enum wb_reason`).
    pub(crate) fn on_writeback_start(
        &self,
        key: SlotKey,
        name: impl FnOnce() -> Name,
        strictlimit: bool,
        reason: u32,
        submitted: i64,
    ) {
        let Some(slot) = self.slot(key, name) else {
            return;
        };
        slot.set_strictlimit(strictlimit);
        // Before the count, so that a sleep that sees this pass begin has its base.
        slot.pass_base.store(submitted, Relaxed);
        slot.passes.fetch_add(1, Release);
        slot.add(work_counter(reason), 1);
    }

    /// Zeroes every counter, every snapshot and `unslotted`. Slot keys and names stay (so do
    /// `strictlimit` and the last background start time, which are state, not counts), and so
    /// do the sleeps in progress, which are not counted when they end.
    ///
    /// Clearing a snapshot waits for a probe that is writing it, up to `tries` attempts per
    /// slot; [`Busy`] if one never finished (the counters are zeroed anyway).
    pub(crate) fn reset(&self, tries: usize) -> Result<(), Busy> {
        let mut busy = false;
        for slot in &self.slots {
            for counter in &slot.counters {
                counter.store(0, Relaxed);
            }
            let mut cleared = false;
            for _ in 0..tries {
                if slot.snap.try_clear() {
                    cleared = true;
                    break;
                }
                cpu_relax();
            }
            busy |= !cleared;
        }
        self.unslotted.store(0, Relaxed);
        // Sleeps in progress began before the reset: their ends are not counted.
        self.generation.add(1, Relaxed);
        if busy {
            Err(Busy)
        } else {
            Ok(())
        }
    }
}
