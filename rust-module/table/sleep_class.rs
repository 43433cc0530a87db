// SPDX-License-Identifier: GPL-2.0

//! How a throttle sleep is classed: what the module reads of a wb at the sleep's start and at
//! its end ([`WbFacts`]), with the wb's passes ([`Side`]), and [`classify`], which makes a
//! [`SleepClass`] of the writer's wb and of the wb its foreign pages are on, if any.

use super::slot::PassStart;

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
    /// A flusher pass of the writer's wb was live during the sleep and wrote pages: a pass
    /// whose `writeback_start` was seen and whose worker had not yet left `wb_do_writeback()`
    /// (`writeback_pages_written`) at the sleep's start, or one that began during the sleep,
    /// and the wb's submitted count rose by the sleep's end since that pass began (since the
    /// sleep's start, if that is lower). A pass that wrote and then waits on the device through
    /// the sleep is flushing, as the tracefs detector sees it (a pass that wrote, from its own
    /// `nr_pages`); one that wrote nothing is not, and neither is a wake-up of the flusher that
    /// began no pass (`WB_writeback_running` set by `wb_do_writeback()`, which found nothing to
    /// do): its `WB_writeback_running` no longer counts, since format 4. The same holds on the
    /// wb the writer's foreign pages are on, when it has some ([`classify`]).
    Flushing,
    /// No pass that wrote, but more than [`DRAIN_FLOOR_PAGES`] pages of the writer's wb (and of
    /// the wb its foreign pages are on, together) completed writeback during the sleep: the
    /// device was draining what had been submitted.
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

/// What the module reads of a wb at a sleep's start and at its end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct WbFacts {
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
    pub(crate) fn at_start(mut read: impl FnMut(Stat) -> i64) -> Self {
        let writeback = read(Stat::Writeback);
        let written = read(Stat::Written);
        Self::from_counts(written, writeback)
    }

    /// The facts at a sleep's end: `WB_WRITTEN` before `WB_WRITEBACK`, so a completion is
    /// counted at most once (in neither if it falls between the reads): both come out low,
    /// without exception. With [`Self::at_start`], a rise of `written` from start to end is
    /// never more than the true one, and one of `submitted` exceeds it at most by the pages
    /// of completions caught between their two updates at the start.
    pub(crate) fn at_end(mut read: impl FnMut(Stat) -> i64) -> Self {
        let written = read(Stat::Written);
        let writeback = read(Stat::Writeback);
        Self::from_counts(written, writeback)
    }

    /// The facts from the two counts, however they were read.
    fn from_counts(written: i64, writeback: i64) -> Self {
        Self {
            written,
            submitted: writeback.saturating_add(written),
        }
    }
}

/// One wb's part in a sleep: its facts at the sleep's start and end, and its passes.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct Side {
    /// The wb at the sleep's start.
    pub(crate) start: WbFacts,
    /// The wb at the sleep's end.
    pub(crate) end: WbFacts,
    /// The wb's slot's passes at the start ([`PassStart::base`] is never above
    /// `start.submitted`).
    pub(crate) pass: PassStart,
    /// The slot's `writeback_start` count at the end.
    pub(crate) passes_end: u64,
}

impl Side {
    /// A pass was live during the sleep (at its start, or one began before its end) and the
    /// wb's submitted count rose past that pass's base.
    fn flushing(&self) -> bool {
        let pass = self.pass.live || self.passes_end != self.pass.passes;
        pass && self.end.submitted > self.pass.base
    }

    /// Pages that completed writeback during the sleep (none if the count reads lower).
    fn completed(&self) -> i64 {
        self.end.written.saturating_sub(self.start.written).max(0)
    }
}

/// Classes one sleep from the writer's wb (`own`) and, when the writer dirtied pages of files
/// owned by another cgroup's wb (`foreign`: the kernel counts their writeback there,
/// `inode_to_wb()`, not on the writer's wb), that wb. `requested`: a background start was asked
/// for the writer's wb between the call's start and the sleep's end.
///
/// The counts are read so that a rise is understated, not invented ([`WbFacts::at_start`],
/// [`WbFacts::at_end`]): each is the kernel's exact per-CPU sum, and of the two counters the one
/// a completion moves last is read last at the start and first at the end. So more than the
/// floor drained really did; a pass that "wrote" did, unless the only pages are those of a
/// completion caught between its two counter updates at the start (a pass must also have been
/// live); a rise that was missed happened while the counters were being read.
pub(crate) fn classify(own: &Side, foreign: Option<&Side>, requested: bool) -> SleepClass {
    let sides = || core::iter::once(own).chain(foreign);
    if sides().any(Side::flushing) {
        SleepClass::Flushing
    } else if sides().map(Side::completed).fold(0i64, i64::saturating_add) > DRAIN_FLOOR {
        SleepClass::Draining
    } else if requested {
        SleepClass::Declined
    } else {
        SleepClass::Unrequested
    }
}
