// SPDX-License-Identifier: GPL-2.0

//! The fixed slot table the probes update and the debugfs files read.
//!
//! Everything here is plain Rust over [`Atomic`]s: no `bindings::`, no raw pointers, so the
//! KUnit tests drive it directly. The probe glue in `probes.rs` only turns kernel structs into
//! the plain values these functions take.
//!
//! Rules the code keeps, because the probes run as in atomic context (`writeback_start` fires
//! under `wb->list_lock`; 7.3 calls every probe inside an SRCU-fast read section, where it may
//! also be preempted):
//!
//! - no allocation, no sleeping, no lock;
//! - every loop is bounded (the slot scan by [`NR_SLOTS`], a compare-exchange retry by
//!   [`MAX_CAS_TRIES`]); a probe never waits for another CPU.

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

/// Pages of the wb that must complete writeback during a sleep with no pass that wrote before
/// the sleep is `draining`: one stray completion does not make the device the bottleneck. The
/// host's tracefs detector reads this line (xtask/src/results/tracefs.rs), so both detectors
/// class by the same floor.
#[allow(
    dead_code,
    reason = "the host reads it; the module's classes use it next"
)]
pub(crate) const DRAIN_FLOOR_PAGES: u64 = 8;

/// Tries a probe makes at a contended compare-exchange (`max_pause_ms`) before giving up.
pub(crate) const MAX_CAS_TRIES: usize = 16;

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
    /// Sleeps during which a flusher pass ran on the writer's wb ([`SleepClass::Flushing`]).
    FlushingSleeps,
    /// Sum of the flushing sleeps, in ms.
    FlushingMs,
    /// Sleeps with no pass, while the wb's pages completed writeback ([`SleepClass::Draining`]).
    DrainingSleeps,
    /// Sum of the draining sleeps, in ms.
    DrainingMs,
    /// Sleeps with no pass and no page completed ([`SleepClass::Stall`]).
    StallSleeps,
    /// Sum of the stall sleeps, in ms: the writer time the regression costs.
    StallMs,
    /// Sleeps whose end the module could not see, so not classed: no room in the table of
    /// sleeps in progress, or the writer left without sleeping (`BDP_ASYNC`).
    LostEnds,
    /// `writeback_start` events with reason `WB_REASON_BACKGROUND`.
    WorkBackground,
    /// `writeback_start` events with reason `WB_REASON_PERIODIC`.
    WorkPeriodic,
    /// `writeback_start` events with reason `WB_REASON_SYNC`.
    WorkSync,
    /// `writeback_start` events with any other reason.
    WorkOther,
}

/// Number of [`Counter`]s.
pub(crate) const NR_COUNTERS: usize = 17;

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

    /// Raises `counter` to `value` if it is lower. Gives up after [`MAX_CAS_TRIES`] lost races
    /// (each loss means another CPU stored a new value meanwhile).
    pub(crate) fn raise(&self, counter: Counter, value: u64) {
        let cell = &self.counters[counter as usize];
        let mut cur = cell.load(Relaxed);
        for _ in 0..MAX_CAS_TRIES {
            if cur >= value {
                return;
            }
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

    /// The snapshot cell.
    pub(crate) fn snapshot(&self) -> &SnapshotCell {
        &self.snap
    }
}

/// How a throttle sleep is counted, from what held at its start and at its end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SleepClass {
    /// A flusher pass ran on the writer's wb during the sleep: `WB_writeback_running` at its
    /// start or at its end, or a `writeback_start` on the wb in between.
    Flushing,
    /// No pass ran, but pages of the writer's wb completed writeback during the sleep (its
    /// `WB_WRITTEN` count rose): the device was draining what an earlier pass submitted.
    Draining,
    /// Neither: nothing would have ended the sleep but its timeout, and nothing was cleaned
    /// meanwhile. The regression's signature.
    Stall,
}

/// What the module reads of the writer's wb at a sleep's start and at its end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct WbFacts {
    /// `WB_writeback_running` set in `wb->state`.
    pub(crate) running: bool,
    /// The wb's `WB_WRITTEN` count (pages whose writeback completed), summed over the CPUs.
    pub(crate) written: i64,
}

/// Classes one sleep. `passes_*`: the slot's `writeback_start` count at the start and at the
/// end. `WB_WRITTEN` only ever grows when pages complete, so a rise is proof that some did; the
/// lockless per-CPU sum can be off only while a completion is being folded in, that is, only
/// when one happened.
pub(crate) fn classify(
    start: WbFacts,
    end: WbFacts,
    passes_start: u64,
    passes_end: u64,
) -> SleepClass {
    if start.running || end.running || passes_end != passes_start {
        SleepClass::Flushing
    } else if end.written > start.written {
        SleepClass::Draining
    } else {
        SleepClass::Stall
    }
}

/// One `balance_dirty_pages` event, as plain values.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ThrottleEvent {
    /// The pause decided, jiffies (`pause` of the tracepoint).
    pub(crate) pause: c_long,
    /// jiffies since the call began (`jiffies - start_time`, the tracepoint's `paused`).
    pub(crate) paused: Jiffies,
    /// The writer's wb at the event.
    pub(crate) facts: WbFacts,
    /// The bdi has `BDI_CAP_STRICTLIMIT`.
    pub(crate) strictlimit: bool,
    /// The thresholds (its `taken` is the event's time).
    pub(crate) snapshot: Snapshot,
}

/// Sleeps that can be in progress at once; a writer is in at most one. A sleep that finds no
/// free entry counts as [`Counter::LostEnds`].
pub(crate) const NR_PENDING: usize = 64;

/// The most time between a sleep's event and its task's switch out into the sleep, ms. The
/// throttle's `io_schedule_timeout()` follows the tracepoint directly; under a hypervisor (TCG
/// here) a vCPU can be descheduled for a few ticks in between.
pub(crate) const ARM_MS: u64 = 200;

/// Where a sleep in progress is.
const FILLED: u32 = 1;
/// The writer was switched out into the throttle's sleep.
const ASLEEP: u32 = 2;

/// A sleep in progress: what held at its start, until the writer is switched back in.
///
/// An entry belongs to one task from the event that fills it until its end frees it, and each
/// step runs where that task is (its own probe, or the scheduler switching it out or in), so
/// the steps of one entry never overlap; only claiming a free entry races, and that is one
/// compare-exchange on `task`.
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
    /// The task's voluntary context switches (`nvcsw`) at the event.
    nvcsw: Atomic<u64>,
    pause_ms: Atomic<u64>,
    running: Atomic<bool>,
    written: Atomic<i64>,
    passes: Atomic<u64>,
    /// The probe glue's handle on the wb (its address), given back at the end.
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
            nvcsw: Atomic::new(0),
            pause_ms: Atomic::new(0),
            running: Atomic::new(false),
            written: Atomic::new(0),
            passes: Atomic::new(0),
            wb: Atomic::new(0),
        }
    }

    fn free(&self, in_flight: &Atomic<u64>) {
        self.state.store(0, Relaxed);
        self.task.store(0, Release);
        in_flight.fetch_sub(1, Relaxed);
    }
}

/// How a task was switched out (`sched_switch`'s view of `prev`).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum SwitchOut {
    /// Preempted, or switched out still runnable (its sleep's timer fired before it blocked):
    /// the sleep has not begun or is already over.
    Runnable,
    /// Blocked in `TASK_KILLABLE` with `in_iowait` set (`io_schedule_timeout()`, the throttle's
    /// sleep); `nvcsw`: the task's voluntary switches, this one counted.
    IoSleep {
        /// `prev->nvcsw` at the switch.
        nvcsw: u64,
    },
    /// Blocked in any other way.
    Blocked,
}

/// The slot table.
pub(crate) struct Table {
    slots: [Slot; NR_SLOTS],
    unslotted: Atomic<u64>,
    hz: u32,
    pending: [Pending; NR_PENDING],
    /// Entries of `pending` in use: `sched_switch` looks no further while it is 0.
    in_flight: Atomic<u64>,
    /// One past the highest entry ever claimed: entries are claimed lowest first, so a lookup
    /// (on every context switch while a sleep is in progress) scans only this prefix, a few
    /// entries for a few writers, not all [`NR_PENDING`].
    claimed: Atomic<u64>,
    /// Bumped by [`Table::reset`].
    generation: Atomic<u64>,
}

impl Table {
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

    /// `writeback_wake_background`: a background writeback start was requested.
    pub(crate) fn on_wake_background(
        &self,
        key: SlotKey,
        name: impl FnOnce() -> Name,
        strictlimit: bool,
    ) {
        let Some(slot) = self.slot(key, name) else {
            return;
        };
        slot.set_strictlimit(strictlimit);
        slot.add(Counter::BgStarts, 1);
    }

    /// `balance_dirty_pages`: one throttle decision of `task`. A sleep is counted here and
    /// classed at its end ([`Self::on_switch_in`]); `wb` is the glue's handle on the writer's
    /// wb, handed back then. Returns whether a sleep began and has an entry.
    pub(crate) fn on_throttle(
        &self,
        key: SlotKey,
        name: impl FnOnce() -> Name,
        task: u64,
        nvcsw: u64,
        wb: u64,
        ev: &ThrottleEvent,
    ) -> bool {
        let Some(slot) = self.slot(key, name) else {
            return false;
        };
        slot.set_strictlimit(ev.strictlimit);
        slot.add(Counter::ThrottleEvents, 1);
        // Dropped when another CPU is writing this slot's snapshot; theirs is as recent.
        slot.snap.try_write(&ev.snapshot);
        if ev.pause <= 0 {
            return false;
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
            return false;
        };
        // A sleep of this task still in the table was never switched out into: its timer fired
        // before the task blocked, so it ended without a switch. If it was on this slot, it is
        // closed with what holds now; otherwise (the task left `balance_dirty_pages()` without
        // sleeping, and now throttles on another wb) it is lost. Its entry is reused.
        let entry = match self.entry_of(task) {
            Some(old) => {
                if old.slot.load(Relaxed) == index as u64 && old.state.load(Relaxed) == FILLED {
                    self.finish(old, ev.facts);
                } else {
                    self.count_lost(old);
                }
                old
            }
            None => match self.claim(task) {
                Some(e) => e,
                None => {
                    slot.add(Counter::LostEnds, 1);
                    return false;
                }
            },
        };
        entry
            .generation
            .store(self.generation.load(Relaxed), Relaxed);
        entry.slot.store(index as u64, Relaxed);
        entry.taken.store(ev.snapshot.taken, Relaxed);
        entry.nvcsw.store(nvcsw, Relaxed);
        entry.pause_ms.store(pause_ms, Relaxed);
        entry.running.store(ev.facts.running, Relaxed);
        entry.written.store(ev.facts.written, Relaxed);
        entry.passes.store(slot.passes(), Relaxed);
        entry.wb.store(wb, Relaxed);
        entry.state.store(FILLED, Relaxed);
        true
    }

    /// `sched_switch` with `task` as `prev`, at `now`. A sleep's entry is armed when its task
    /// blocks in an io sleep that is its first voluntary switch since the event, at most
    /// [`ARM_MS`] after it: the throttle's `io_schedule_timeout()` follows the tracepoint
    /// directly. Switched out runnable, it waits (still in its code, or its timer fired before
    /// it blocked: its next throttle decision closes it). Blocked any other way, or later, the
    /// task left `balance_dirty_pages()` without that sleep, and the sleep is lost.
    pub(crate) fn on_switch_out(&self, task: u64, how: SwitchOut, now: Jiffies) {
        if self.in_flight.load(Relaxed) == 0 {
            return;
        }
        let Some(entry) = self.entry_of(task) else {
            return;
        };
        if entry.state.load(Relaxed) != FILLED {
            return;
        }
        let within =
            jiffies_to_ms(now.wrapping_sub(entry.taken.load(Relaxed)) as u64, self.hz) <= ARM_MS;
        match how {
            SwitchOut::Runnable => {}
            SwitchOut::IoSleep { nvcsw }
                if within && nvcsw == entry.nvcsw.load(Relaxed).wrapping_add(1) =>
            {
                entry.state.store(ASLEEP, Relaxed)
            }
            SwitchOut::IoSleep { .. } | SwitchOut::Blocked => self.lost(entry),
        }
    }

    /// `sched_switch` with `task` as `next`: if it is back from a throttle sleep, reads the wb
    /// again (`end`, given the handle from [`Self::on_throttle`]), classes the sleep and counts
    /// it. Returns the class (`None`: no sleep of `task` ended here, or it began before a
    /// reset).
    pub(crate) fn on_switch_in(
        &self,
        task: u64,
        end: impl FnOnce(u64) -> WbFacts,
    ) -> Option<SleepClass> {
        if self.in_flight.load(Relaxed) == 0 {
            return None;
        }
        let entry = self.entry_of(task)?;
        if entry.state.load(Relaxed) != ASLEEP {
            return None;
        }
        let class = self.finish(entry, end(entry.wb.load(Relaxed)));
        entry.free(&self.in_flight);
        class
    }

    /// Classes `entry`'s sleep with `end`, what holds at its end, and counts it if it began
    /// since the last reset (`None` otherwise). The entry stays claimed.
    fn finish(&self, entry: &Pending, end: WbFacts) -> Option<SleepClass> {
        let slot = self.slots.get(entry.slot.load(Relaxed) as usize)?;
        if entry.generation.load(Relaxed) != self.generation.load(Relaxed) {
            return None;
        }
        let start = WbFacts {
            running: entry.running.load(Relaxed),
            written: entry.written.load(Relaxed),
        };
        let class = classify(start, end, entry.passes.load(Relaxed), slot.passes());
        let (sleeps, ms) = match class {
            SleepClass::Flushing => (Counter::FlushingSleeps, Counter::FlushingMs),
            SleepClass::Draining => (Counter::DrainingSleeps, Counter::DrainingMs),
            SleepClass::Stall => (Counter::StallSleeps, Counter::StallMs),
        };
        slot.add(sleeps, 1);
        slot.add(ms, entry.pause_ms.load(Relaxed));
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

    /// Counts `entry`'s sleep as lost (if it began since the last reset) and frees it.
    fn lost(&self, entry: &Pending) {
        self.count_lost(entry);
        entry.free(&self.in_flight);
    }

    /// Counts `entry`'s sleep as lost, if it began since the last reset.
    fn count_lost(&self, entry: &Pending) {
        if entry.generation.load(Relaxed) == self.generation.load(Relaxed) {
            if let Some(slot) = self.slots.get(entry.slot.load(Relaxed) as usize) {
                slot.add(Counter::LostEnds, 1);
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
    #[cfg_attr(
        not(CONFIG_KUNIT = "y"),
        allow(dead_code, reason = "used by the KUnit tests")
    )]
    pub(crate) fn in_flight(&self) -> u64 {
        self.in_flight.load(Relaxed)
    }

    /// `writeback_start`: a flusher pass began with `reason` (`enum wb_reason`).
    pub(crate) fn on_writeback_start(
        &self,
        key: SlotKey,
        name: impl FnOnce() -> Name,
        strictlimit: bool,
        reason: u32,
    ) {
        let Some(slot) = self.slot(key, name) else {
            return;
        };
        slot.set_strictlimit(strictlimit);
        slot.passes.add(1, Relaxed);
        slot.add(work_counter(reason), 1);
    }

    /// Zeroes every counter, every snapshot and `unslotted`. Slot keys and names stay (so do
    /// `strictlimit` and the last background start time, which are state, not counts).
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
