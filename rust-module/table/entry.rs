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
//!   its task's foreign pages are on (pinned), so that its next sleeps see it, and the
//!   `balance_dirty_pages()` call its last sleep was in, so that the call's next sleep adds
//!   to the time held in it;
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
//!
//! # The wake-up
//!
//! One field is written by another task: `wake`, by the `sched_wakeup` probe of whoever wakes
//! the entry's task (under that task's runqueue lock), which classes the sleep at its wake-up.
//! It holds this fill's token (odd) until a waker claims it ([`WAKING`], a compare-exchange
//! from the token: one waker per fill), reads the wb's facts at the wake-up into `at_wake`
//! through the entry's handles, and stores the wake-up's time (even, released). Every path
//! that ends a fill and gives its handles back first closes the wake-up
//! ([`Pending::close_wake`]): it waits while a claim is in progress (a few loads and two
//! per-CPU sums on the waker's CPU, interrupts off there), so a waker never reads a wb after
//! its handle was given back, and no waker can claim a fill once it is closed.

use super::{
    sleep_class::WbFacts,
    slot::PassStart, //
};
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

/// `wake` while a waker reads the wb's facts at the wake-up (even, below every time's word).
const WAKING: u64 = 2;
/// `wake` of a fill that ended without a wake-up (even, below every time's word).
const CLOSED: u64 = 4;

/// The word `wake` holds for a wake-up at `ns`: even, and above [`WAKING`] and [`CLOSED`].
fn time_word(ns: u64) -> u64 {
    ns.max(3) << 1
}

/// How a fill's wake-up ended, as [`Pending::close_wake`] finds it.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) enum WakeEnd {
    /// Woken at this ns; the entry's `at_wake` holds the facts read then.
    Woken(u64),
    /// Never woken (a fatal signal already pending kept it runnable, or the sleep was dropped
    /// before it).
    Unwoken,
}

/// One wb's facts and its slot's pass count at a sleep's wake-up, as an entry keeps them.
pub(super) struct EndCell {
    written: Atomic<i64>,
    submitted: Atomic<i64>,
    passes: Atomic<u64>,
}

impl EndCell {
    const fn new() -> Self {
        Self {
            written: Atomic::new(0),
            submitted: Atomic::new(0),
            passes: Atomic::new(0),
        }
    }

    fn store(&self, facts: WbFacts, passes: u64) {
        self.written.store(facts.written, Relaxed);
        self.submitted.store(facts.submitted, Relaxed);
        self.passes.store(passes, Relaxed);
    }

    /// `(facts, passes)` as stored.
    fn load(&self) -> (WbFacts, u64) {
        (
            WbFacts {
                written: self.written.load(Relaxed),
                submitted: self.submitted.load(Relaxed),
            },
            self.passes.load(Relaxed),
        )
    }
}

/// What held at a sleep's end (its wake-up, or its schedule's return if never woken): the
/// writer's wb and its slot's pass count, the same of the foreign wb if the sleep counts it,
/// and whether a background start had been asked for since the call began.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(super) struct EndFacts {
    pub(super) own: WbFacts,
    pub(super) own_passes: u64,
    pub(super) foreign: Option<(WbFacts, u64)>,
    pub(super) requested: bool,
}

/// What a sleep's waker read at the wake-up ([`EndFacts`]), as an entry keeps it.
pub(super) struct AtWake {
    own: EndCell,
    foreign: EndCell,
    foreign_some: Atomic<bool>,
    requested: Atomic<bool>,
}

impl AtWake {
    const fn new() -> Self {
        Self {
            own: EndCell::new(),
            foreign: EndCell::new(),
            foreign_some: Atomic::new(false),
            requested: Atomic::new(false),
        }
    }

    pub(super) fn store(&self, at_end: &EndFacts) {
        self.own.store(at_end.own, at_end.own_passes);
        if let Some((facts, passes)) = at_end.foreign {
            self.foreign.store(facts, passes);
        }
        self.foreign_some.store(at_end.foreign.is_some(), Relaxed);
        self.requested.store(at_end.requested, Relaxed);
    }

    pub(super) fn load(&self) -> EndFacts {
        let (own, own_passes) = self.own.load();
        EndFacts {
            own,
            own_passes,
            foreign: self.foreign_some.load(Relaxed).then(|| self.foreign.load()),
            requested: self.requested.load(Relaxed),
        }
    }
}

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
    /// ns (`ktime_get_mono_fast_ns()`: the trace's `mono` clock) of the event.
    pub(super) event_ns: Atomic<u64>,
    /// The sleep's wake-up: this fill's token (odd, [`Pending::arm_wake`]) until the
    /// `sched_wakeup` probe claims it ([`WAKING`]) and then stores the wake-up's ns, shifted
    /// left by one (even, [`time_word`]), or the fill ends unwoken ([`CLOSED`]).
    pub(super) wake: Atomic<u64>,
    /// What the waker read at the wake-up (valid once `wake` holds a time).
    pub(super) at_wake: AtWake,
    /// Fills of this entry: what makes each fill's token its own.
    fills: Atomic<u64>,
    /// The `balance_dirty_pages()` call of the task's last sleeps: its `start_time`, whether
    /// it may still be in progress, the ns the time held in it is counted from (its start,
    /// then the end of each classed sleep), the time held in it so far, whether it has yet to
    /// be counted, and the jiffies of its last sleep's end.
    pub(super) call_start: Atomic<Jiffies>,
    pub(super) in_call: Atomic<bool>,
    pub(super) mark_ns: Atomic<u64>,
    pub(super) held_ns: Atomic<u64>,
    pub(super) new_call: Atomic<bool>,
    pub(super) last_end: Atomic<Jiffies>,
    /// The loop may go on after this sleep: its decision had `task_ratelimit == 0` (with a
    /// ratelimit, `balance_dirty_pages()` breaks right after the sleep).
    pub(super) goes_on: Atomic<bool>,
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
            event_ns: Atomic::new(0),
            wake: Atomic::new(0),
            at_wake: AtWake::new(),
            fills: Atomic::new(0),
            call_start: Atomic::new(0),
            in_call: Atomic::new(false),
            mark_ns: Atomic::new(0),
            held_ns: Atomic::new(0),
            new_call: Atomic::new(false),
            last_end: Atomic::new(0),
            goes_on: Atomic::new(false),
        }
    }

    /// Arms the wake-up of the sleep being filled: a token no other fill of this entry has.
    pub(super) fn arm_wake(&self) {
        let fill = self.fills.load(Relaxed).wrapping_add(1);
        self.fills.store(fill, Relaxed);
        // Release: a waker that reads this token also reads the entry's task as the one that
        // armed it (`Table::on_wakeup`).
        self.wake.store(fill << 1 | 1, Release);
    }

    /// `sched_wakeup` of the entry's task, from any CPU: claims the wake-up of the sleep armed
    /// at `token` if it is still the one waiting (a compare-exchange from that token, so a
    /// later fill of the entry, its own token stored, is never claimed by this wake-up, and a
    /// closed one is never claimed at all). The claimer reads the facts into `at_wake`, then
    /// [`Self::woke_at`].
    pub(super) fn claim_wake(&self, token: u64) -> bool {
        token & 1 == 1 && self.wake.cmpxchg(token, WAKING, Acquire).is_ok()
    }

    /// The claimed wake-up happened at `now_ns`; `at_wake` is written (release).
    pub(super) fn woke_at(&self, now_ns: u64) {
        self.wake.store(time_word(now_ns), Release);
    }

    /// Ends the fill's wake-up, before its handles are given back: a claim in progress is
    /// waited for (its waker reads the wbs through them), an armed token is closed so that no
    /// waker can claim it any more. Returns how the wake-up ended.
    pub(super) fn close_wake(&self) -> WakeEnd {
        loop {
            let w = self.wake.load(Acquire);
            match w {
                WAKING => core::hint::spin_loop(),
                // Never armed (an entry filled before any wake-up could be), or closed.
                0 | CLOSED => return WakeEnd::Unwoken,
                w if w & 1 == 1 => {
                    if self.wake.cmpxchg(w, CLOSED, Acquire).is_ok() {
                        return WakeEnd::Unwoken;
                    }
                }
                w => return WakeEnd::Woken(w >> 1),
            }
        }
    }

    /// The slot's request count at the sleep's event, as [`super::slot::Slot::requested_since`]
    /// takes it.
    pub(super) fn request_start(&self) -> super::slot::RequestStart {
        super::slot::RequestStart {
            requests: self.requests.load(Relaxed),
            since_call: self.requested.load(Relaxed),
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

    /// Takes over this entry if it is idle and has been for long: its foreign wb, if any,
    /// last seen more than `foreign_stale` jiffies before `now`, and its last sleep's end more
    /// than `call_stale` before. Returns the foreign handle it held (to unpin, 0 for none);
    /// the entry is then [`BUSY`], its task still the old one.
    pub(super) fn take_stale(
        &self,
        now: Jiffies,
        foreign_stale: Jiffies,
        call_stale: Jiffies,
    ) -> Option<u64> {
        let old = |at: &Atomic<Jiffies>, stale| now.wrapping_sub(at.load(Relaxed)) > stale;
        if self.state.load(Relaxed) != IDLE
            || (self.foreign.load(Relaxed) != 0 && !old(&self.foreign_at, foreign_stale))
            || !old(&self.last_end, call_stale)
            || self.state.cmpxchg(IDLE, BUSY, Acquire).is_err()
        {
            return None;
        }
        // Ours now: its old task can no longer take it back (its compare-exchange fails), and
        // the foreign wb's reference is ours to give back.
        Some(self.foreign.xchg(0, Relaxed))
    }

    /// Puts an entry its caller holds ([`BUSY`], or at the end of a sleep) back: idle if it
    /// keeps a foreign wb or its call may go on, else free. Returns whether it was freed.
    pub(super) fn rest(&self) -> bool {
        if self.foreign.load(Relaxed) != 0 || self.in_call.load(Relaxed) {
            self.state.store(IDLE, Release);
            return false;
        }
        self.free();
        true
    }

    /// Frees the entry (it holds no handle any more).
    pub(super) fn free(&self) {
        self.foreign_used.store(false, Relaxed);
        self.in_call.store(false, Relaxed);
        self.foreign_slot.store(0, Relaxed);
        self.state.store(0, Relaxed);
        self.task.store(0, Release);
    }

    /// Claims this entry for `task` if it is free.
    pub(super) fn claim(&self, task: u64) -> bool {
        self.task.load(Relaxed) == 0 && self.task.cmpxchg(0, task, Full).is_ok()
    }
}
