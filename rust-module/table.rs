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
//! Its modules: [`counter`] (what a slot counts), [`snapshot`] (the last thresholds, behind a
//! sequence counter), [`slot`] (a slot's key, name and cells), [`sleep_class`] (how a sleep is
//! classed), [`entry`] (a task's entry and who may touch it), [`pending`] (the sleeps in
//! progress and the functions along their life), [`foreign`] (the wb a task's foreign pages are
//! on), [`timing`] (the measured times of a sleep and its call) and [`jiffies`] (the arithmetic
//! of include/linux/jiffies.h).

pub(crate) mod counter;
pub(crate) mod entry;
pub(crate) mod foreign;
pub(crate) mod jiffies;
pub(crate) mod pending;
pub(crate) mod sleep_class;
pub(crate) mod slot;
pub(crate) mod snapshot;
pub(crate) mod timing;

use counter::{
    work_counter,
    Counter, //
};
use entry::Pending;
use kernel::{
    prelude::*,
    processor::cpu_relax,
    sync::atomic::{
        Acquire,
        Atomic,
        Full,
        Relaxed, //
    },
};
use pending::NR_PENDING;
use pin_init::init_array_from_fn;
use slot::{
    Name,
    Slot,
    SlotKey, //
};
use snapshot::Busy;

/// Number of slots: one per (bdi, memcg) writeback domain seen.
pub(crate) const NR_SLOTS: usize = 32;

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

impl Table {
    /// An empty table on the heap, made by the same constructors as [`Table::new`] (what the
    /// kernel starts from, `probes::TABLE`), an element at a time: at about 40 KiB it is more
    /// than a kernel stack holds. Each KUnit test makes its own, so a test never sees another's
    /// counts, and a second run of the suite (`/sys/kernel/debug/kunit/wbstall/run`) starts
    /// clean. (Format 3 zero-filled it instead, which was not what `new` makes: a slot's pass
    /// base started at 0 there, at `i64::MAX` in the kernel.)
    #[cfg_attr(
        not(CONFIG_KUNIT = "y"),
        allow(dead_code, reason = "used by the KUnit tests")
    )]
    pub(crate) fn boxed(hz: u32) -> Result<KBox<Table>> {
        KBox::init(
            init!(Table {
                slots <- init_array_from_fn(|_| Slot::new()),
                unslotted: Atomic::new(0),
                hz,
                pending <- init_array_from_fn(|_| Pending::new()),
                in_flight: Atomic::new(0),
                claimed: Atomic::new(0),
                generation: Atomic::new(0),
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

    /// `writeback_wake_background` at `now_ns`: a background writeback start was requested.
    pub(crate) fn on_wake_background(
        &self,
        key: SlotKey,
        name: impl FnOnce() -> Name,
        strictlimit: bool,
        now_ns: u64,
    ) {
        let Some(slot) = self.slot(key, name) else {
            return;
        };
        slot.set_strictlimit(strictlimit);
        slot.add(Counter::BgStarts, 1);
        slot.request(now_ns);
    }

    /// `writeback_start`: a flusher pass began with `reason` (`enum wb_reason`), made by
    /// `worker` (current) with the wb's submitted count at `submitted`.
    pub(crate) fn on_writeback_start(
        &self,
        key: SlotKey,
        name: impl FnOnce() -> Name,
        strictlimit: bool,
        worker: u64,
        reason: u32,
        submitted: i64,
    ) {
        let Some(slot) = self.slot(key, name) else {
            return;
        };
        slot.set_strictlimit(strictlimit);
        slot.begin_pass(worker, submitted);
        slot.add(work_counter(reason), 1);
    }

    /// `writeback_pages_written`: `worker` (current) left `wb_do_writeback()`; the passes it
    /// made live are over. The event names no wb: every slot whose live pass is `worker`'s ends
    /// it (one at most, the wb `worker` was writing).
    pub(crate) fn on_pages_written(&self, worker: u64) {
        for slot in &self.slots {
            slot.end_pass(worker);
        }
    }

    /// Keeps `handle`, a root wb of the bdi of `key` (`memcg_id` 0) whose reference is its
    /// bdi's last, in that slot's grave until [`Self::dig_graves`] gives it back from process
    /// context. `false` if the bdi has no slot or its grave is taken: never, for every pin the
    /// table hands back is of a slot's wb, and a bdi's last reference goes once.
    pub(crate) fn bury(&self, key: SlotKey, handle: u64) -> bool {
        self.find(key).is_some_and(|slot| slot.bury(handle))
    }

    /// Gives every handle the graves hold to `put`, emptying them.
    pub(crate) fn dig_graves(&self, mut put: impl FnMut(u64)) {
        for slot in &self.slots {
            if let Some(h) = slot.dig() {
                put(h);
            }
        }
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
