// SPDX-License-Identifier: GPL-2.0

//! The measured times of a sleep and of its `balance_dirty_pages()` call, beside the pause the
//! kernel asked for: from the throttle event to the wake-up (`sched_wakeup`: asleep), to the
//! return of the sleep's schedule (back on a CPU: asleep plus the run-queue delay), and the
//! time the call held its task, from its start to the end of its last sleep. All in ns of
//! `ktime_get_mono_fast_ns()`, the clock of the trace's `mono` (so the tracefs detector
//! measures the same from `sched_wakeup` and `sched_switch`); counted in µs.

use super::{
    counter::Counter,
    entry::{
        Pending,
        WakeEnd,
        ASLEEP,
        FILLED, //
    },
    jiffies::jiffies_to_ms,
    pending::ThrottleEvent,
    sleep_class::{
        SleepClass,
        WbFacts, //
    },
    Table, //
};
use kernel::{
    sync::atomic::Relaxed,
    time::Jiffies, //
};

impl Table {
    /// At a sleep's event: its time, its wake-up armed, and its call, the one of the task's
    /// last sleep if that call may go on and has the same `start_time`, else a new one that
    /// began `paused` before the event (its first iterations did not sleep: CPU time). After
    /// the sleep the call may go on only if this decision had no ratelimit (`goes_on`).
    pub(super) fn begin_timing(&self, entry: &Pending, ev: &ThrottleEvent) {
        entry.event_ns.store(ev.now_ns, Relaxed);
        entry.arm_wake();
        entry
            .goes_on
            .store(ev.snapshot.task_ratelimit == 0, Relaxed);
        let same = entry.in_call.load(Relaxed) && entry.call_start.load(Relaxed) == ev.call_start;
        if same {
            return;
        }
        entry.call_start.store(ev.call_start, Relaxed);
        entry.mark_ns.store(self.call_ns(ev), Relaxed);
        entry.held_ns.store(0, Relaxed);
        entry.new_call.store(true, Relaxed);
        entry.in_call.store(true, Relaxed);
    }

    /// Where the call of event `ev` began, ns: the event's time less its `paused` (jiffies, in
    /// ms as the trace prints it): the tracefs detector's `t0 - paused` too.
    pub(super) fn call_ns(&self, ev: &ThrottleEvent) -> u64 {
        let paused_ns = jiffies_to_ms(ev.paused as u64, self.hz).saturating_mul(1_000_000);
        ev.now_ns.saturating_sub(paused_ns)
    }

    /// `sched_wakeup` of `task` at `now_ns` (from the waker's CPU, under the runqueue lock of
    /// `task` and its `pi_lock`): the wake-up of its sleep in progress, if any. The sleep is
    /// classed by what holds here, at the end of its time asleep (the time its shares count),
    /// not when its task is back on a CPU: the waker reads the wbs through the entry's handles
    /// with `end` (the writer's, and the foreign one if the sleep counts it), while its claim
    /// keeps them pinned ([`Pending::close_wake`]). No lock of the table's, no reference taken
    /// or given back.
    pub(crate) fn on_wakeup(
        &self,
        task: u64,
        now_ns: impl FnOnce() -> u64,
        mut end: impl FnMut(u64) -> WbFacts,
    ) {
        if self.idle() {
            return;
        }
        let Some(entry) = self.entry_of(task) else {
            return;
        };
        // The token first, then the owner: a token read before another task's fill of the
        // entry fails the compare-exchange (that fill stored its own), and one read after it
        // is paired with that task, which fails the check.
        let token = entry.wake.load(kernel::sync::atomic::Acquire);
        if entry.task.load(kernel::sync::atomic::Acquire) != task
            || !matches!(entry.state(), FILLED | ASLEEP)
            || !entry.claim_wake(token)
        {
            return;
        }
        let at = now_ns();
        let at_end = self.read_end_facts(entry, &mut end);
        entry.at_wake.store(&at_end);
        entry.woke_at(at);
    }

    /// At a classed sleep's end (`now`, `now_ns`): its times by `class`, and the time its call
    /// has held the task since the last end counted (or the call's start).
    pub(super) fn count_times(
        &self,
        entry: &Pending,
        class: Option<SleepClass>,
        woken: WakeEnd,
        now: Jiffies,
        now_ns: u64,
    ) {
        let Some(class) = class else { return };
        let Some(slot) = self.slots.get(entry.slot.load(Relaxed) as usize) else {
            return;
        };
        let event = entry.event_ns.load(Relaxed);
        let off_cpu = now_ns.saturating_sub(event);
        let asleep = match woken {
            WakeEnd::Woken(woke) => woke.saturating_sub(event).min(off_cpu),
            WakeEnd::Unwoken => {
                // Never woken (a fatal signal already pending kept it runnable): asleep is
                // all of it, and counted as such.
                slot.add(Counter::UnwokenSleeps, 1);
                off_cpu
            }
        };
        let us = |ns: u64| ns / 1000;
        let (asleep_c, off_c) = match class {
            SleepClass::Flushing => (Counter::FlushingAsleepUs, Counter::FlushingOffCpuUs),
            SleepClass::Draining => (Counter::DrainingAsleepUs, Counter::DrainingOffCpuUs),
            SleepClass::Unrequested => (Counter::UnrequestedAsleepUs, Counter::UnrequestedOffCpuUs),
            SleepClass::Declined => (Counter::DeclinedAsleepUs, Counter::DeclinedOffCpuUs),
        };
        slot.add(asleep_c, us(asleep));
        slot.add(off_c, us(off_cpu));
        if class.is_stall() {
            slot.add(Counter::StallAsleepUs, us(asleep));
            slot.add(Counter::StallOffCpuUs, us(off_cpu));
        }
        slot.raise(Counter::MaxAsleepUs, us(asleep));
        // The call: held until this end, counted from the last mark, in whole µs of the total
        // (so that the rounding of the parts never adds up).
        let before = entry.held_ns.load(Relaxed);
        let held = before.saturating_add(now_ns.saturating_sub(entry.mark_ns.load(Relaxed)));
        entry.held_ns.store(held, Relaxed);
        entry.mark_ns.store(now_ns, Relaxed);
        entry.last_end.store(now, Relaxed);
        slot.add(Counter::HeldUs, us(held) - us(before));
        slot.raise(Counter::MaxHeldUs, us(held));
        if entry.new_call.load(Relaxed) {
            entry.new_call.store(false, Relaxed);
            slot.add(Counter::Calls, 1);
        }
    }

    /// At a sleep's end, classed or not: whether its call may go on to another sleep.
    pub(super) fn end_timing(&self, entry: &Pending) {
        entry.in_call.store(entry.goes_on.load(Relaxed), Relaxed);
    }
}
