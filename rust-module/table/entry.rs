// SPDX-License-Identifier: GPL-2.0

//! A task's entry in the table of sleeps in progress ([`Pending`]): who owns it, in which state,
//! and the protocol by which a task takes its own entry, claims a free one or takes over one
//! left idle for long.
//!
//! # States
//!
//! - free: `task` is 0;
//! - [`FILLED`]: its task's throttle event filled it; it waits for the sleep's schedule;
//! - [`ASLEEP`]: its task is in that schedule;
//! - [`IDLE`]: no sleep in progress, but the entry keeps what must outlive one sleep: the wb
//!   its task's foreign pages are on (pinned), so that its next sleeps see it;
//! - [`BUSY`]: taken by one probe call, its task's own or (for an idle entry left alone for
//!   long) another task's that takes it over.
//!
//! # Ordering
//!
//! A filled or asleep entry is touched only by its task (its throttle event, then its own
//! `__schedule()` entry and exit; `probes.rs` passes `current`), in program order, so `Relaxed`
//! suffices: when that task migrates, the scheduler orders everything it did on the old CPU
//! before it runs on the new one (the old CPU's `smp_store_release()` of `on_cpu` in
//! `finish_task()`, paired with `smp_cond_load_acquire()` of `on_cpu` in `try_to_wake_up()`, and
//! the runqueue locks for a migration of a runnable task). An idle entry may also be taken over
//! by another task ([`Pending::take_stale`]), so its task takes it back with a compare-exchange of
//! `state` from [`IDLE`] to [`BUSY`] (acquire) and checks it is still its own; whoever took it
//! puts it back to [`IDLE`] (release) or fills it. A free entry is claimed with one fully ordered
//! compare-exchange of `task` from 0; freeing clears the fields and releases `task` to 0.
//! [`super::Table::release_all`] runs only once no probe can run.

use super::slot::PassStart;
use kernel::{
    sync::atomic::{
        Acquire,
        Atomic,
        Full,
        Relaxed,
        Release, //
    },
    time::Jiffies, //
};

/// An entry whose task has not yet entered its sleep's schedule.
pub(super) const FILLED: u32 = 1;
/// An entry whose task is inside its sleep's schedule.
pub(super) const ASLEEP: u32 = 2;
/// An entry with no sleep in progress that keeps its task's foreign wb.
pub(super) const IDLE: u32 = 3;
/// An entry taken by one probe call.
pub(super) const BUSY: u32 = 4;

/// One wb's facts and passes at a sleep's start, as an entry keeps them.
pub(super) struct SideCell {
    written: Atomic<i64>,
    submitted: Atomic<i64>,
    passes: Atomic<u64>,
    live: Atomic<bool>,
    base: Atomic<i64>,
}

impl SideCell {
    const fn new() -> Self {
        Self {
            written: Atomic::new(0),
            submitted: Atomic::new(0),
            passes: Atomic::new(0),
            live: Atomic::new(false),
            base: Atomic::new(0),
        }
    }

    pub(super) fn store(&self, written: i64, submitted: i64, pass: PassStart) {
        self.written.store(written, Relaxed);
        self.submitted.store(submitted, Relaxed);
        self.passes.store(pass.passes, Relaxed);
        self.live.store(pass.live, Relaxed);
        self.base.store(pass.base, Relaxed);
    }

    /// `(written, submitted, pass)` as stored.
    pub(super) fn load(&self) -> (i64, i64, PassStart) {
        (
            self.written.load(Relaxed),
            self.submitted.load(Relaxed),
            PassStart {
                passes: self.passes.load(Relaxed),
                live: self.live.load(Relaxed),
                base: self.base.load(Relaxed),
            },
        )
    }
}

/// A task's entry: its sleep in progress, if any, and its foreign wb.
pub(super) struct Pending {
    /// The task (its `task_struct` address), 0 while free.
    pub(super) task: Atomic<u64>,
    /// [`FILLED`], [`ASLEEP`], [`IDLE`] or [`BUSY`]; 0 while free.
    pub(super) state: Atomic<u32>,
    /// The table's generation when the sleep began: a sleep begun before a reset is not counted.
    pub(super) generation: Atomic<u64>,
    /// The writer's slot.
    pub(super) slot: Atomic<u64>,
    /// jiffies of the event.
    pub(super) taken: Atomic<Jiffies>,
    pub(super) pause_ms: Atomic<u64>,
    /// The slot's request count at the event, and whether the last request came after the
    /// call began ([`super::slot::RequestStart`]).
    pub(super) requests: Atomic<u64>,
    pub(super) requested: Atomic<bool>,
    /// The writer's wb at the sleep's start.
    pub(super) own: SideCell,
    /// The task was already woken when it entered its sleep's schedule.
    pub(super) woken: Atomic<bool>,
    /// The glue's handle on the writer's wb (pinned while the sleep holds it), given back at
    /// the sleep's end.
    pub(super) wb: Atomic<u64>,
    /// The glue's handle on the wb of the last foreign folio the task dirtied (pinned while the
    /// entry holds it; 0 for none), its slot, and when it was last seen (jiffies).
    pub(super) foreign: Atomic<u64>,
    pub(super) foreign_slot: Atomic<u64>,
    pub(super) foreign_at: Atomic<Jiffies>,
    /// The sleep in progress counts the foreign wb's facts (`foreign_side`, at its start).
    pub(super) foreign_used: Atomic<bool>,
    pub(super) foreign_side: SideCell,
}

impl Pending {
    pub(super) const fn new() -> Self {
        Self {
            task: Atomic::new(0),
            state: Atomic::new(0),
            generation: Atomic::new(0),
            slot: Atomic::new(0),
            taken: Atomic::new(0),
            pause_ms: Atomic::new(0),
            requests: Atomic::new(0),
            requested: Atomic::new(false),
            own: SideCell::new(),
            woken: Atomic::new(false),
            wb: Atomic::new(0),
            foreign: Atomic::new(0),
            foreign_slot: Atomic::new(0),
            foreign_at: Atomic::new(0),
            foreign_used: Atomic::new(false),
            foreign_side: SideCell::new(),
        }
    }

    /// The state, for the entry's own task (or a look that only compares it).
    pub(super) fn state(&self) -> u32 {
        self.state.load(Relaxed)
    }

    /// Takes back this idle entry for `task`, its owner: `true` if it was idle and still
    /// `task`'s (it is then [`BUSY`]); `false` if another task took it over meanwhile.
    pub(super) fn take_idle(&self, task: u64) -> bool {
        if self.state.cmpxchg(IDLE, BUSY, Acquire).is_err() {
            return false;
        }
        if self.task.load(Relaxed) == task {
            return true;
        }
        // Taken over and put back idle by its new task between our lookup and here.
        self.state.store(IDLE, Release);
        false
    }

    /// Takes over this entry if it is idle and has been for long (its foreign wb last seen
    /// more than `stale` jiffies before `now`): returns the foreign handle it held (to unpin);
    /// the entry is then [`BUSY`], its task still the old one.
    pub(super) fn take_stale(&self, now: Jiffies, stale: Jiffies) -> Option<u64> {
        if self.state.load(Relaxed) != IDLE
            || now.wrapping_sub(self.foreign_at.load(Relaxed)) <= stale
            || self.state.cmpxchg(IDLE, BUSY, Acquire).is_err()
        {
            return None;
        }
        // Ours now: its old task can no longer take it back (its compare-exchange fails), and
        // the foreign wb's reference is ours to give back.
        Some(self.foreign.xchg(0, Relaxed))
    }

    /// Puts an entry its caller holds ([`BUSY`], or at the end of a sleep) back: idle if it
    /// keeps a foreign wb, else free. Returns whether it was freed.
    pub(super) fn rest(&self) -> bool {
        if self.foreign.load(Relaxed) != 0 {
            self.state.store(IDLE, Release);
            return false;
        }
        self.free();
        true
    }

    /// Frees the entry (it holds no handle any more).
    pub(super) fn free(&self) {
        self.foreign_used.store(false, Relaxed);
        self.foreign_slot.store(0, Relaxed);
        self.state.store(0, Relaxed);
        self.task.store(0, Release);
    }

    /// Claims this entry for `task` if it is free.
    pub(super) fn claim(&self, task: u64) -> bool {
        self.task.load(Relaxed) == 0 && self.task.cmpxchg(0, task, Full).is_ok()
    }
}
