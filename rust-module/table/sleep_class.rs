// SPDX-License-Identifier: GPL-2.0

//! How a throttle sleep is classed: what the module reads of the writer's wb at the sleep's
//! start and at its end ([`WbFacts`]), and [`classify`], which makes a [`SleepClass`] of the two.

/// Pages of the writer's wb that must complete writeback during a sleep (`WB_WRITTEN` rising by
/// more than this) for a sleep without a writing pass to be [`SleepClass::Draining`]: one stray
/// completion does not make a sleep draining. Printed in `summary` (`drain_floor_pages`); the
/// host's tracefs detector reads this line (xtask/src/results/tracefs.rs), so both detectors
/// class by the same floor.
pub(crate) const DRAIN_FLOOR_PAGES: u64 = 8;

/// [`DRAIN_FLOOR_PAGES`] as the counts' type.
const DRAIN_FLOOR: i64 = DRAIN_FLOOR_PAGES as i64;
const _: () = assert!(DRAIN_FLOOR >= 0 && DRAIN_FLOOR as u64 == DRAIN_FLOOR_PAGES);

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
    /// own: `probes/ffi.rs` sums under the counter's lock). A completion lowers `WB_WRITEBACK`,
    /// then raises `WB_WRITTEN` (`__folio_end_writeback()`, interrupts off); `WB_WRITEBACK` is read
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
/// ([`Slot::pass_base`](super::slot::Slot::pass_base); never above `start.submitted`);
/// `passes_*`: the slot's `writeback_start` count at the start and at the end; `requested`: a
/// background start was asked for the wb between the call's start and the sleep's end.
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
