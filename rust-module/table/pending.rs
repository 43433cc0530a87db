// SPDX-License-Identifier: GPL-2.0

//! The sleeps in progress: an entry ([`Pending`]) for each, from its throttle event to the
//! return of its schedule, what the glue hands in and gets back along the way, and the
//! table's functions that take an entry through that life.
//!
//! # A sleep's entry, and the handle it holds
//!
//! A throttle decision with `pause > 0` (`on_throttle`) fills its task's entry
//! ([`Pending`], `entry.rs`) with what holds at the sleep's start and the handle of the writer's
//! wb, which the glue pins (a reference on the wb) before the table can hand it back. The
//! sleep's only other steps are the task's own next calls into the scheduler:
//!
//! - its first voluntary `__schedule()` (`on_sched_entry`): in `balance_dirty_pages()` that is
//!   the throttle's `io_schedule_timeout()`, entered `TASK_KILLABLE` with `in_iowait`, or already
//!   woken (`TASK_RUNNING`: its timer fired first). The entry is then asleep. Any other wait (a
//!   task that left through `BDP_ASYNC` and blocks elsewhere, or exits) drops it;
//! - the return from that same `__schedule()` (`on_sched_exit`), switched out or not: the wb is
//!   read again, the sleep classed, the entry freed and its handle given back to be unpinned.
//!
//! Any throttle event of the task that finds its sleep still waiting for its schedule drops it
//! first (whatever its pause). So a sleep never outlives the call it was made in, and while it
//! lasts its wb is pinned: every read of the wb through a handle is of a live wb.
//!
//! # The foreign wb
//!
//! The kernel counts a folio's writeback on the wb of its inode (`inode_to_wb()` in
//! `__folio_end_writeback()`), and a writer is throttled on the wb of its own memcg: when a
//! writer dirties a file owned by another cgroup's wb, its pages are written and completed
//! there, and the writer's own wb shows nothing. `track_foreign_dirty` names that wb, in the
//! writer's own context, for each such folio: the entry keeps the last one (pinned, with its
//! slot) and counts its facts and passes in the task's sleeps beside its own wb's
//! ([`super::sleep_class::classify`]), while it was seen within [`FOREIGN_MS`] of the sleep and
//! is of the same bdi. An entry that keeps one stays [`IDLE`] between sleeps; one idle for
//! longer than [`FOREIGN_MS`] can be taken over by another task that finds no free entry.

use super::{
    counter::Counter,
    entry::{
        EndFacts,
        Pending,
        WakeEnd,
        ASLEEP,
        BUSY,
        FILLED,
        IDLE, //
    },
    jiffies::jiffies_to_ms,
    sleep_class::{
        classify,
        Side,
        SleepClass,
        WbFacts, //
    },
    slot::{
        Name,
        Slot,
        SlotKey, //
    },
    snapshot::Snapshot,
    Table, //
};
use kernel::{
    prelude::*,
    sync::atomic::{
        Acquire,
        Relaxed,
        Release, //
    },
    time::Jiffies, //
};

/// One `balance_dirty_pages` event, as plain values. The writer's wb is read only for a sleep
/// (`pause > 0`), through the `read` [`Table::on_throttle`] is given: an exact per-CPU sum
/// costs a lock and a walk of every CPU, and most decisions do not sleep.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ThrottleEvent {
    /// The pause decided, jiffies (`pause` of the tracepoint).
    pub(crate) pause: c_long,
    /// jiffies since the call began (`jiffies - start_time`, the tracepoint's `paused`).
    pub(crate) paused: Jiffies,
    /// jiffies when the `balance_dirty_pages()` call began (the tracepoint's `start_time`).
    pub(crate) call_start: Jiffies,
    /// The bdi has `BDI_CAP_STRICTLIMIT`.
    pub(crate) strictlimit: bool,
    /// The thresholds (its `taken` is the event's time).
    pub(crate) snapshot: Snapshot,
    /// The event's time, ns (`ktime_get_mono_fast_ns()`).
    pub(crate) now_ns: u64,
}

/// What the glue does after [`Table::on_throttle`].
#[must_use = "a stored handle must be pinned, a released one unpinned"]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Throttled {
    /// The sleep has an entry holding the event's handle: the glue pins it before its probe
    /// returns (only this task's own later calls into the table can give it back).
    pub(crate) stored: bool,
    /// A handle this event gave up (an older sleep of the task that it dropped, or the foreign
    /// wb of an entry it took over): the glue unpins it.
    pub(crate) release: Option<u64>,
}

/// What the glue does after [`Table::on_sched_exit`].
#[must_use = "a released handle must be unpinned"]
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Woke {
    /// The class counted (`None`: no sleep of the task ended here, or it began before a reset).
    pub(crate) class: Option<SleepClass>,
    /// The handle of the sleep that ended here: the glue unpins it.
    pub(crate) release: Option<u64>,
}

/// Entries: sleeps that can be in progress at once, and tasks that keep a foreign wb between
/// sleeps; a writer has at most one. A sleep that finds no entry counts as
/// [`Counter::LostEnds`].
pub(crate) const NR_PENDING: usize = 64;

/// The most time between a sleep's event and its task's first voluntary schedule, ms. The
/// throttle's `io_schedule_timeout()` follows the tracepoint directly; under a hypervisor (TCG
/// here) a vCPU can be descheduled for a few ticks in between. Later, the schedule is not the
/// throttle's (a task that left through `BDP_ASYNC`), and the sleep is dropped.
pub(crate) const ARM_MS: u64 = 200;

/// How long a foreign wb counts in its task's sleeps after its last foreign folio, ms: the
/// kernel's own expiry of a memcg's foreign records (`mem_cgroup_flush_foreign()`), the default
/// `dirty_expire_centisecs`, by when the flusher has written such pages anyway. An idle entry
/// whose foreign wb is older may be taken over.
pub(crate) const FOREIGN_MS: u64 = 30_000;

/// How long after its last sleep's end an entry keeps its call for the next sleep, ms: a
/// `balance_dirty_pages()` loop that goes on sleeps again within one iteration's CPU time. An
/// idle entry whose call is older (and that keeps no fresh foreign wb) may be taken over.
pub(crate) const CALL_IDLE_MS: u64 = 1_000;

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
    /// the glue's handle on the writer's wb, given back then. `read` reads a wb's facts at a
    /// sleep's start: the writer's (`wb`, live for the whole call) and the task's foreign wb
    /// (pinned by its entry).
    ///
    /// A sleep of `task` still waiting for its schedule is dropped first, whatever this event's
    /// pause, slot or the table's room: its task came back without sleeping.
    pub(crate) fn on_throttle(
        &self,
        key: SlotKey,
        name: impl FnOnce() -> Name,
        task: u64,
        wb: u64,
        ev: &ThrottleEvent,
        mut read: impl FnMut(u64) -> WbFacts,
    ) -> Throttled {
        let (mine, dropped) = self.take_own(task);
        let Some(slot) = self.slot(key, name) else {
            return self.not_stored(mine, dropped);
        };
        slot.set_strictlimit(ev.strictlimit);
        slot.add(Counter::ThrottleEvents, 1);
        // Dropped when another CPU is writing this slot's snapshot; theirs is as recent.
        slot.snap.try_write(&ev.snapshot);
        if ev.pause <= 0 {
            // `pause < min_pause`: the loop breaks right after this event; its call is over.
            if let Some(e) = mine {
                e.in_call.store(false, Relaxed);
            }
            return self.not_stored(mine, dropped);
        }
        let pause_ms = jiffies_to_ms(ev.pause.unsigned_abs() as u64, self.hz);
        slot.add(Counter::ThrottleSleeps, 1);
        slot.add(Counter::PauseMs, pause_ms);
        slot.raise(Counter::MaxPauseMs, pause_ms);
        slot.raise(
            Counter::MaxCallMs,
            jiffies_to_ms(ev.paused as u64, self.hz).saturating_add(pause_ms),
        );
        let Some(index) = self.index_of(slot) else {
            return self.not_stored(mine, dropped);
        };
        let (entry, release) = match mine {
            Some(e) => (e, dropped),
            None => match self.claim(task, ev.snapshot.taken) {
                (Some(e), release) => (e, release),
                (None, _) => {
                    slot.add(Counter::LostEnds, 1);
                    return self.not_stored(None, dropped);
                }
            },
        };
        entry
            .generation
            .store(self.generation.load(Relaxed), Relaxed);
        entry.slot.store(index as u64, Relaxed);
        entry.taken.store(ev.snapshot.taken, Relaxed);
        entry.pause_ms.store(pause_ms, Relaxed);
        let req = slot.request_at_start(self.call_ns(ev));
        entry.requests.store(req.requests, Relaxed);
        entry.requested.store(req.since_call, Relaxed);
        let own = read(wb);
        let pass = slot.pass_at_start(own.submitted);
        entry.own.store(own.written, own.submitted, pass);
        let foreign = self.foreign_for(entry, key, ev.snapshot.taken);
        entry.foreign_used.store(foreign.is_some(), Relaxed);
        if let Some((handle, fslot)) = foreign {
            let facts = read(handle);
            let pass = fslot.pass_at_start(facts.submitted);
            entry
                .foreign_side
                .store(facts.written, facts.submitted, pass);
        }
        entry.woken.store(false, Relaxed);
        entry.wb.store(wb, Relaxed);
        self.begin_timing(entry, ev);
        entry.state.store(FILLED, Relaxed);
        self.in_flight.add(1, Relaxed);
        Throttled {
            stored: true,
            release,
        }
    }

    /// The entry `task` holds ([`BUSY`]) goes back to rest; `dropped` is what its dropped
    /// sleep held.
    fn not_stored(&self, mine: Option<&Pending>, dropped: Option<u64>) -> Throttled {
        if let Some(entry) = mine {
            entry.rest();
        }
        Throttled {
            stored: false,
            release: dropped,
        }
    }

    /// The slot and handle of `entry`'s foreign wb, if it counts in a sleep of the writer's
    /// `key` at `now`: seen within [`FOREIGN_MS`], on the same bdi, not the writer's own wb.
    fn foreign_for(&self, entry: &Pending, key: SlotKey, now: Jiffies) -> Option<(u64, &Slot)> {
        let handle = entry.foreign.load(Relaxed);
        if handle == 0 {
            return None;
        }
        let age = now.wrapping_sub(entry.foreign_at.load(Relaxed)) as u64;
        let fslot = self.slots.get(entry.foreign_slot.load(Relaxed) as usize)?;
        let fkey = fslot.key()?;
        (jiffies_to_ms(age, self.hz) <= FOREIGN_MS && fkey.bdi_id == key.bdi_id && fkey != key)
            .then_some((handle, fslot))
    }

    /// `sched_entry_tp`: `task` (current) calls `__schedule()` at `now`. Its first voluntary
    /// call after its throttle event, within [`ARM_MS`], entered `TASK_KILLABLE` with
    /// `in_iowait` or already woken, is the throttle's sleep: the entry waits for its return.
    /// Any other voluntary call drops the sleep (its handle returned: the glue unpins it); a
    /// preemption changes nothing.
    #[must_use = "a released handle must be unpinned"]
    pub(crate) fn on_sched_entry(&self, task: u64, how: SchedEntry, now: Jiffies) -> Option<u64> {
        if self.in_flight.load(Relaxed) == 0 {
            return None;
        }
        let entry = self.entry_of(task)?;
        if entry.state() != FILLED {
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
            SchedEntry::Voluntary { .. } => {
                let wb = self.drop_sleep(entry, Counter::DroppedAtBlock);
                // Another wait than the throttle's: the task left `balance_dirty_pages()`.
                entry.in_call.store(false, Relaxed);
                entry.rest();
                Some(wb)
            }
        }
    }

    /// `sched_exit_tp`: the `__schedule()` call of `task` (current) returns at `now` (jiffies)
    /// and `now_ns`; `switched`: it was switched out and back in. If that call was its
    /// sleep's, reads the wbs again (`end`, given the handles from [`Self::on_throttle`]: the
    /// writer's, and the foreign one if the sleep counts it), classes the sleep, counts it and
    /// its times, and ends it.
    pub(crate) fn on_sched_exit(
        &self,
        task: u64,
        switched: bool,
        now: Jiffies,
        now_ns: impl FnOnce() -> u64,
        mut end: impl FnMut(u64) -> WbFacts,
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
        if entry.state() != ASLEEP {
            return none;
        }
        // Classed by what held at the wake-up, as its waker read it; a sleep never woken by
        // what holds now. Closing the wake-up first: no waker reads the wbs after this.
        let woken = entry.close_wake();
        let at_end = match woken {
            WakeEnd::Woken(_) => entry.at_wake.load(),
            WakeEnd::Unwoken => self.read_end_facts(entry, &mut end),
        };
        let unblocked = entry.woken.load(Relaxed) || !switched;
        let class = self.finish(entry, at_end, unblocked);
        self.count_times(entry, class, woken, now, now_ns());
        self.end_timing(entry);
        let wb = entry.wb.xchg(0, Relaxed);
        self.in_flight.fetch_sub(1, Relaxed);
        entry.rest();
        Woke {
            class,
            release: Some(wb),
        }
    }

    /// What holds now at the end of `entry`'s sleep: the wbs read with `end` through the
    /// entry's handles (the writer's, and the foreign one if the sleep counts it), their
    /// slots' pass counts, and whether a background start was asked for since the call began.
    /// At the wake-up (by its waker), or at the schedule's return of a sleep never woken.
    pub(super) fn read_end_facts(
        &self,
        entry: &Pending,
        end: &mut impl FnMut(u64) -> WbFacts,
    ) -> EndFacts {
        let own_slot = self.slots.get(entry.slot.load(Relaxed) as usize);
        let own = end(entry.wb.load(Relaxed));
        let foreign = if entry.foreign_used.load(Relaxed) {
            self.slots
                .get(entry.foreign_slot.load(Relaxed) as usize)
                .map(|fslot| (end(entry.foreign.load(Relaxed)), fslot.passes()))
        } else {
            None
        };
        EndFacts {
            own,
            own_passes: own_slot.map_or(0, Slot::passes),
            foreign,
            requested: own_slot.is_some_and(|slot| slot.requested_since(&entry.request_start())),
        }
    }

    /// Classes `entry`'s sleep with `at_end`, what held at its end, and counts it if it began
    /// since the last reset (`None` otherwise).
    fn finish(&self, entry: &Pending, at_end: EndFacts, unblocked: bool) -> Option<SleepClass> {
        let slot = self.slots.get(entry.slot.load(Relaxed) as usize)?;
        if entry.generation.load(Relaxed) != self.generation.load(Relaxed) {
            return None;
        }
        let own = side(entry.own.load(), at_end.own, at_end.own_passes);
        let foreign = at_end
            .foreign
            .map(|(end, passes)| side(entry.foreign_side.load(), end, passes));
        let class = classify(&own, foreign.as_ref(), at_end.requested);
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
        if foreign.is_some() {
            slot.add(Counter::ForeignSleeps, 1);
        }
        Some(class)
    }

    /// The index of `slot` in the table.
    pub(super) fn index_of(&self, slot: &Slot) -> Option<usize> {
        self.slots.iter().position(|s| core::ptr::eq(s, slot))
    }

    /// The entry of `task`, in whatever state.
    pub(super) fn entry_of(&self, task: u64) -> Option<&Pending> {
        let claimed = self.claimed.load(Acquire) as usize;
        self.pending
            .iter()
            .take(claimed)
            .find(|e| e.task.load(Acquire) == task)
    }

    /// `task`'s own entry, taken ([`BUSY`]): an idle one taken back, or one whose sleep still
    /// waits for its schedule, that sleep dropped (its handle returned). `(None, None)` if the
    /// task has none.
    pub(super) fn take_own(&self, task: u64) -> (Option<&Pending>, Option<u64>) {
        let Some(entry) = self.entry_of(task) else {
            return (None, None);
        };
        match entry.state() {
            FILLED | ASLEEP => {
                let wb = self.drop_sleep(entry, Counter::DroppedAtEvent);
                entry.state.store(BUSY, Relaxed);
                (Some(entry), Some(wb))
            }
            IDLE if entry.take_idle(task) => (Some(entry), None),
            _ => (None, None),
        }
    }

    /// An entry claimed for `task` at `now` ([`BUSY`]): the first, in index order, that is
    /// free or idle for long (its foreign wb, if any, older than [`FOREIGN_MS`], its last
    /// sleep's end older than [`CALL_IDLE_MS`]), so that lookups keep scanning a short prefix.
    /// The foreign handle of an entry taken over is returned, to unpin.
    pub(super) fn claim(&self, task: u64, now: Jiffies) -> (Option<&Pending>, Option<u64>) {
        let to_jiffies = |ms: u64| (ms * u64::from(self.hz) / 1000) as Jiffies;
        let (foreign_stale, call_stale) = (to_jiffies(FOREIGN_MS), to_jiffies(CALL_IDLE_MS));
        for (i, e) in self.pending.iter().enumerate() {
            let taken = if e.claim(task) {
                Some(0)
            } else {
                e.take_stale(now, foreign_stale, call_stale)
            };
            if let Some(foreign) = taken {
                e.task.store(task, Release);
                e.in_call.store(false, Relaxed);
                e.state.store(BUSY, Relaxed);
                self.raise_claimed(i as u64 + 1);
                return (Some(e), (foreign != 0).then_some(foreign));
            }
        }
        (None, None)
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

    /// Ends `entry`'s sleep unclassed: counts it as lost and by `why` (if it began since the
    /// last reset) and returns its handle. The entry stays its task's, for the caller to rest
    /// or fill.
    fn drop_sleep(&self, entry: &Pending, why: Counter) -> u64 {
        if entry.generation.load(Relaxed) == self.generation.load(Relaxed) {
            if let Some(slot) = self.slots.get(entry.slot.load(Relaxed) as usize) {
                slot.add(Counter::LostEnds, 1);
                slot.add(why, 1);
            }
        }
        // No waker reads the wb once its wake-up is closed.
        let _ = entry.close_wake();
        self.in_flight.fetch_sub(1, Relaxed);
        entry.wb.xchg(0, Relaxed)
    }

    /// Frees every entry still in use and gives each handle it holds to `release`. Only for
    /// when no probe can run any more (module unload, after the probes were detached and
    /// waited for): the entries' tasks are still asleep or never came back, and their sleeps
    /// are not counted.
    pub(crate) fn release_all(&self, mut release: impl FnMut(u64)) {
        for entry in &self.pending {
            if entry.task.load(Acquire) == 0 {
                continue;
            }
            for handle in [&entry.wb, &entry.foreign] {
                let h = handle.xchg(0, Relaxed);
                if h != 0 {
                    release(h);
                }
            }
            if matches!(entry.state(), FILLED | ASLEEP) {
                self.in_flight.fetch_sub(1, Relaxed);
            }
            entry.free();
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

    /// Sleeps in progress (entries filled or asleep).
    pub(crate) fn in_flight(&self) -> u64 {
        self.in_flight.load(Relaxed)
    }

    /// Entries in use: sleeps in progress and tasks that keep a foreign wb.
    pub(crate) fn entries(&self) -> u64 {
        self.pending
            .iter()
            .filter(|e| e.task.load(Relaxed) != 0)
            .count() as u64
    }

    /// No sleep in progress: the scheduler probes have nothing to look up.
    pub(crate) fn idle(&self) -> bool {
        self.in_flight.load(Relaxed) == 0
    }
}

/// One wb's part in a sleep, from what its entry kept at the start, its facts at the end and
/// its slot's pass count then.
fn side(start: (i64, i64, super::slot::PassStart), end: WbFacts, passes_end: u64) -> Side {
    let (written, submitted, pass) = start;
    Side {
        start: WbFacts { written, submitted },
        end,
        pass,
        passes_end,
    }
}
