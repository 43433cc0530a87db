// SPDX-License-Identifier: GPL-2.0

//! The sleeps in progress: an entry ([`Pending`]) for each, from its throttle event to the
//! return of its schedule, what the glue hands in and gets back along the way, and the
//! table's functions that take an entry through that life.
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

use super::{
    counter::Counter,
    jiffies::jiffies_to_ms,
    sleep_class::{
        classify,
        SleepClass,
        WbFacts, //
    },
    slot::{
        Name,
        SlotKey, //
    },
    snapshot::Snapshot,
    Table, //
};
use kernel::{
    prelude::*,
    sync::atomic::{
        Acquire,
        Atomic,
        Full,
        Relaxed,
        Release, //
    },
    time::Jiffies, //
};

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
pub(super) struct Pending {
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
    /// [`Slot::pass_base`](super::slot::Slot::pass_base) at the sleep's start.
    pass_base: Atomic<i64>,
    passes: Atomic<u64>,
    /// The task was already woken when it entered its sleep's schedule.
    woken: Atomic<bool>,
    /// The glue's handle on the wb (pinned while the entry holds it), given back at the end.
    wb: Atomic<u64>,
}

impl Pending {
    pub(super) const fn new() -> Self {
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

impl Table {
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
}
