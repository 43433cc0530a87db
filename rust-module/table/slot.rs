// SPDX-License-Identifier: GPL-2.0

//! One slot of the table: the writeback domain it counts for ([`SlotKey`]), its bdi's name as
//! printed ([`Name`]), and what it holds ([`Slot`]): the counters, the passes seen (the last
//! one's base and whether it is live), the background requests and the last thresholds.

use super::{
    counter::{
        Counter,
        NR_COUNTERS, //
    },
    snapshot::SnapshotCell, //
};
use kernel::sync::atomic::{
    Acquire,
    Atomic,
    Full,
    Relaxed,
    Release, //
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
    passes: Atomic<u64>,
    /// The last pass seen, in one word so that it is read whole: [`PASS_LIVE`] while it is live
    /// (from its `writeback_start` until its worker leaves `wb_do_writeback()`), and the wb's
    /// submitted count (`WB_WRITEBACK + WB_WRITTEN`) at its `writeback_start`. 0 until one is
    /// seen: no pass live.
    pass: Atomic<u64>,
    /// The task (`task_struct` address) of the flusher worker whose pass is live.
    pass_worker: Atomic<u64>,
    /// `writeback_wake_background` events since the slot was claimed (never reset): a sleep saw
    /// a request when this moved between its start and its end.
    requests: Atomic<u64>,
    /// ns (`ktime_get_mono_fast_ns()`) of the last `writeback_wake_background`, valid once
    /// `bg_seen` is set (release).
    bg_last: Atomic<u64>,
    bg_seen: Atomic<bool>,
    pub(super) counters: [Atomic<u64>; NR_COUNTERS],
    pub(super) snap: SnapshotCell,
    /// A handle on the root wb of this slot's bdi whose reference is that bdi's last, given
    /// back by a probe that could not drop it there (0: none). A bdi dies once and its id is
    /// never reused, so a slot's grave is used at most once.
    grave: Atomic<u64>,
}

impl Slot {
    pub(super) const fn new() -> Self {
        Self {
            key: Atomic::new(0),
            named: Atomic::new(false),
            name: [const { Atomic::new(0) }; NAME_WORDS],
            strictlimit: Atomic::new(false),
            passes: Atomic::new(0),
            pass: Atomic::new(0),
            pass_worker: Atomic::new(0),
            requests: Atomic::new(0),
            bg_last: Atomic::new(0),
            bg_seen: Atomic::new(false),
            counters: [const { Atomic::new(0) }; NR_COUNTERS],
            snap: SnapshotCell::new(),
            grave: Atomic::new(0),
        }
    }

    /// Keeps `handle` in the grave, if it is empty: returns whether it did.
    pub(super) fn bury(&self, handle: u64) -> bool {
        handle != 0 && self.grave.cmpxchg(0, handle, Full).is_ok()
    }

    /// Takes what the grave holds.
    pub(super) fn dig(&self) -> Option<u64> {
        match self.grave.xchg(0, Full) {
            0 => None,
            h => Some(h),
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

    /// `writeback_start` by `worker` (current) with the wb's submitted count `submitted`: a pass
    /// begins, and is live until `worker` leaves `wb_do_writeback()` ([`Self::end_pass`]).
    ///
    /// The passes of one wb are made by one work item (`wb->dwork`, which the workqueue never
    /// runs twice at once), so this and [`Self::end_pass`] never race each other on one wb.
    /// The pass word is stored before the count is raised (release): a reader that sees the
    /// count of this pass ([`Self::pass_at_start_with`], acquire) sees this word or a later one.
    pub(crate) fn begin_pass(&self, worker: u64, submitted: i64) {
        self.pass_worker.store(worker, Relaxed);
        self.pass.store(PASS_LIVE | pass_count(submitted), Relaxed);
        self.passes.fetch_add(1, Release);
    }

    /// `writeback_pages_written` by `worker` (current): it left `wb_do_writeback()`, so the pass
    /// it made live on this slot, if any, is over. Another worker's pass stays live.
    pub(crate) fn end_pass(&self, worker: u64) {
        if self.pass_worker.load(Relaxed) != worker {
            return;
        }
        let word = self.pass.load(Relaxed);
        if word & PASS_LIVE != 0 {
            self.pass.store(word & !PASS_LIVE, Relaxed);
        }
    }

    /// What a sleep that begins with the wb's submitted count at `submitted` needs of the
    /// passes: [`PassStart`].
    pub(crate) fn pass_at_start(&self, submitted: i64) -> PassStart {
        self.pass_at_start_with(submitted, || {})
    }

    /// [`Self::pass_at_start`], calling `between` between its two loads (the KUnit tests make a
    /// pass begin there). The count is loaded first (acquire, paired with
    /// [`Self::begin_pass`]'s release), then the pass word: a pass whose count was read has its
    /// word read too, or a later one. A pass that begins between the loads is seen live with its
    /// own base and, its count not read, also as begun during the sleep: either way its pages
    /// are counted from its own start (or the sleep's, if lower), never from an older pass's.
    /// Read the other way round (as format 3 did), the old pass's base could be paired with the
    /// new pass's count: the older pass's pages then made the sleep flushing.
    pub(crate) fn pass_at_start_with(&self, submitted: i64, between: impl FnOnce()) -> PassStart {
        let passes = self.passes.load(Acquire);
        between();
        let word = self.pass.load(Relaxed);
        let live = word & PASS_LIVE != 0;
        let base = (word & !PASS_LIVE) as i64;
        PassStart {
            passes,
            live,
            base: if live { base.min(submitted) } else { submitted },
        }
    }

    /// `writeback_wake_background` at `now_ns`: a background writeback start was requested.
    pub(crate) fn request(&self, now_ns: u64) {
        self.bg_last.store(now_ns, Relaxed);
        self.bg_seen.store(true, Release);
        self.requests.fetch_add(1, Release);
    }

    /// What a sleep in a `balance_dirty_pages()` call begun at `call_ns` needs of the requests
    /// at its start: [`RequestStart`]. `call_ns` is the event's time less its `paused` (the
    /// call's `start_time` is a jiffy, whose start may lie up to a jiffy before the call): the
    /// tracefs detector's estimate, so that the two name a stall's cause alike.
    pub(crate) fn request_at_start(&self, call_ns: u64) -> RequestStart {
        // The count first (acquire): a request it counts has its time stored.
        let requests = self.requests.load(Acquire);
        let since_call = self.bg_seen.load(Acquire) && self.bg_last.load(Relaxed) >= call_ns;
        RequestStart {
            requests,
            since_call,
        }
    }

    /// Whether a background writeback start was requested for this slot between the start of
    /// the call of a sleep that began with `start` and now (that sleep's end): one came after
    /// the call began and before the sleep (the last request's time), or one came during the
    /// sleep (the count moved). No time is compared at the end: a request made after the end's
    /// own clock was read cannot hide one made during the sleep.
    pub(crate) fn requested_since(&self, start: &RequestStart) -> bool {
        start.since_call || self.requests.load(Acquire) != start.requests
    }

    /// The snapshot cell.
    pub(crate) fn snapshot(&self) -> &SnapshotCell {
        &self.snap
    }
}

/// The live bit of a slot's pass word; the other bits hold the pass's base.
const PASS_LIVE: u64 = 1 << 63;

/// A submitted count as the pass word holds it: at least 0 and below [`PASS_LIVE`] (a count of
/// pages ever submitted never comes near either bound).
fn pass_count(submitted: i64) -> u64 {
    submitted.max(0) as u64 & !PASS_LIVE
}

/// What a sleep needs of a slot's passes at its start ([`Slot::pass_at_start`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct PassStart {
    /// The slot's `writeback_start` count: a pass began during the sleep if it moved by its end.
    pub(crate) passes: u64,
    /// A pass whose `writeback_start` was seen was live (its worker still in
    /// `wb_do_writeback()`).
    pub(crate) live: bool,
    /// The submitted count a pass's pages are counted from: the live pass's base (if lower than
    /// the sleep's own count), else the sleep's own.
    pub(crate) base: i64,
}

/// What a sleep needs of a slot's background requests at its start
/// ([`Slot::request_at_start`]).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct RequestStart {
    /// The slot's `writeback_wake_background` count.
    pub(crate) requests: u64,
    /// The last request came at or after the call's start.
    pub(crate) since_call: bool,
}
