// SPDX-License-Identifier: GPL-2.0

//! The per-slot counters, in the order of the `stats` line, and the `enum wb_reason` values
//! whose `writeback_start` events have a counter of their own.

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
    /// ([`SleepClass::Flushing`](super::sleep_class::SleepClass::Flushing)).
    FlushingSleeps,
    /// Sum of the flushing sleeps, in ms.
    FlushingMs,
    /// Sleeps without a writing pass, during which more than
    /// [`DRAIN_FLOOR_PAGES`](super::sleep_class::DRAIN_FLOOR_PAGES) pages of the wb completed
    /// writeback ([`SleepClass::Draining`](super::sleep_class::SleepClass::Draining)).
    DrainingSleeps,
    /// Sum of the draining sleeps, in ms.
    DrainingMs,
    /// Sleeps with neither:
    /// [`SleepClass::Unrequested`](super::sleep_class::SleepClass::Unrequested) and
    /// [`SleepClass::Declined`](super::sleep_class::SleepClass::Declined) together.
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
    /// `balance_dirty_pages()` call began
    /// ([`SleepClass::Unrequested`](super::sleep_class::SleepClass::Unrequested)).
    UnrequestedSleeps,
    /// Sum of the unrequested stall sleeps, in ms.
    UnrequestedMs,
    /// Stall sleeps with a background writeback requested since the call began, and still no
    /// pass that wrote pages ([`SleepClass::Declined`](super::sleep_class::SleepClass::Declined)).
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
    /// throttle's (another wait, one later than [`ARM_MS`](super::pending::ARM_MS), or the
    /// task's exit). Counted in [`Counter::LostEnds`] too.
    DroppedAtBlock,
    /// Classed sleeps that also counted the wb of their task's foreign pages (files owned by
    /// another cgroup's wb, where the kernel counts their writeback).
    ForeignSleeps,
    /// Flushing sleeps' time asleep, µs: from the throttle event to the wake-up
    /// (`sched_wakeup`), measured.
    FlushingAsleepUs,
    /// Flushing sleeps' time off a CPU, µs: from the event until the sleep's schedule returns
    /// (asleep, then waiting on the run queue), measured.
    FlushingOffCpuUs,
    /// The same for draining sleeps.
    DrainingAsleepUs,
    /// The same for draining sleeps.
    DrainingOffCpuUs,
    /// The same for stall sleeps (unrequested and declined together): the time the verdict
    /// judges (`StallAsleepUs`).
    StallAsleepUs,
    /// The same for stall sleeps.
    StallOffCpuUs,
    /// The same for unrequested stall sleeps.
    UnrequestedAsleepUs,
    /// The same for unrequested stall sleeps.
    UnrequestedOffCpuUs,
    /// The same for declined stall sleeps.
    DeclinedAsleepUs,
    /// The same for declined stall sleeps.
    DeclinedOffCpuUs,
    /// Longest time asleep of a classed sleep, µs.
    MaxAsleepUs,
    /// Classed sleeps without a wake-up (never put to sleep: a fatal signal was pending): their
    /// time asleep is their time off a CPU.
    UnwokenSleeps,
    /// `balance_dirty_pages()` calls with a classed sleep.
    Calls,
    /// Time those calls held their tasks, µs: each from its start (the event's time less its
    /// `paused`) to the return of its last classed sleep's schedule.
    HeldUs,
    /// Longest time one call held its task, µs (measured: the latency a writer saw).
    MaxHeldUs,
}

/// Number of [`Counter`]s.
pub(crate) const NR_COUNTERS: usize = 40;

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
