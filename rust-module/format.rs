// SPDX-License-Identifier: GPL-2.0

//! The text of the debugfs files: pure functions from plain rows to [`fmt::Write`].
//!
//! The layout is a contract with the host tool (`cargo xtask`), which parses the same
//! `fixtures/*.txt` the KUnit tests compare against. Keys only ever get appended at the end of a
//! line; `summary`'s `format=` changes if anything else does.

use crate::table::{
    counter::{
        Counter,
        NR_COUNTERS, //
    },
    jiffies::jiffies_to_ms,
    sleep_class::DRAIN_FLOOR_PAGES,
    slot::Slot,
    snapshot::{
        Busy,
        Snapshot, //
    },
    Table,
    NR_SLOTS, //
};
use kernel::{
    fmt::{
        self,
        Write, //
    },
    time::Jiffies, //
};

/// Version of the layout, printed as `format=` in `summary`.
///
/// 2: the sleeps are classed flushing, draining or stall at their end (`idle_sleeps` is gone,
/// `stall_sleeps` means the new class), `max_call_ms` and `lost_ends` are new, and `bdi_id`
/// follows `strictlimit`.
///
/// 3: `flushing` needs a pass that wrote pages of the wb, `draining` more than
/// `drain_floor_pages` completions; a stall is `unrequested` or `declined` (both still in
/// `stall_*`); the ends of the sleeps' entries are counted (`unblocked_sleeps`,
/// `dropped_at_event`, `dropped_at_block`); `summary` has `drain_floor_pages` and `pending`.
///
/// 4: a pass is live from its `writeback_start` until its worker leaves `wb_do_writeback()`
/// (`writeback_pages_written`), as the tracefs detector reads it: `WB_writeback_running` alone
/// (a wake-up of the flusher that began no pass) no longer makes a sleep flushing, and a sleep
/// that began during a live pass counts that pass's pages from its own start, never an older
/// pass's. A sleep counts the facts and passes of the wb its task's foreign pages are on
/// (`foreign_sleeps`). A request made during a sleep counts however late the end's clock was
/// read. `summary` has `entries`.
///
/// 5: every classed sleep's measured times, by class: asleep (from the throttle event to its
/// `sched_wakeup`) and off a CPU (to the return of its schedule), µs; the calls with a classed
/// sleep, the time they held their tasks and the longest (`calls`, `held_us`, `max_held_us`).
///
/// 6: a request counts for a stall's cause from the call's start as the event's time less
/// its `paused` (ns), the tracefs detector's `t0 - paused`, no longer from `start_time`'s
/// jiffy (which also counted requests made in that jiffy before the call).
pub(crate) const FORMAT_VERSION: u32 = 6;

/// The `stats` keys of the counters, in [`Counter`] order.
pub(crate) const COUNTER_KEYS: [&str; NR_COUNTERS] = [
    "bg_starts",
    "throttle_events",
    "throttle_sleeps",
    "pause_ms",
    "max_pause_ms",
    "max_call_ms",
    "flushing_sleeps",
    "flushing_ms",
    "draining_sleeps",
    "draining_ms",
    "stall_sleeps",
    "stall_ms",
    "lost_ends",
    "work_background",
    "work_periodic",
    "work_sync",
    "work_other",
    "unrequested_sleeps",
    "unrequested_ms",
    "declined_sleeps",
    "declined_ms",
    "unblocked_sleeps",
    "dropped_at_event",
    "dropped_at_block",
    "foreign_sleeps",
    "flushing_asleep_us",
    "flushing_off_cpu_us",
    "draining_asleep_us",
    "draining_off_cpu_us",
    "stall_asleep_us",
    "stall_off_cpu_us",
    "unrequested_asleep_us",
    "unrequested_off_cpu_us",
    "declined_asleep_us",
    "declined_off_cpu_us",
    "max_asleep_us",
    "unwoken_sleeps",
    "calls",
    "held_us",
    "max_held_us",
];

// The key table and the enum must not drift apart.
const _: () = {
    assert!(Counter::WorkOther as usize == 16);
    assert!(Counter::ForeignSleeps as usize == 24);
    assert!(Counter::MaxHeldUs as usize == NR_COUNTERS - 1);
};

/// One `stats` line.
#[derive(Clone, Copy, Debug)]
pub(crate) struct StatsRow<'a> {
    /// The bdi's `dev_name`.
    pub(crate) bdi: &'a str,
    /// `bdi->id`.
    pub(crate) bdi_id: u64,
    /// The memcg css id, 0 for the root wb.
    pub(crate) memcg_id: u32,
    /// `BDI_CAP_STRICTLIMIT` as last seen.
    pub(crate) strictlimit: bool,
    /// The counters, in [`Counter`] order.
    pub(crate) counters: [u64; NR_COUNTERS],
}

/// One `thresholds` line.
#[derive(Clone, Copy, Debug)]
pub(crate) struct ThreshRow<'a> {
    /// The bdi's `dev_name`.
    pub(crate) bdi: &'a str,
    /// `bdi->id`.
    pub(crate) bdi_id: u64,
    /// The memcg css id, 0 for the root wb.
    pub(crate) memcg_id: u32,
    /// ms since the snapshot was taken.
    pub(crate) age_ms: u64,
    /// The snapshot.
    pub(crate) snap: Snapshot,
}

/// The `summary` line.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) struct SummaryRow {
    /// Size of the slot table.
    pub(crate) slots: usize,
    /// Slots claimed.
    pub(crate) used: usize,
    /// Events that found no slot.
    pub(crate) unslotted: u64,
    /// `CONFIG_HZ`.
    pub(crate) hz: u32,
    /// Sleeps in progress: entries filled or asleep, each holding a pinned wb.
    pub(crate) pending: u64,
    /// Entries in use: the sleeps in progress and the tasks that keep a foreign wb (pinned).
    pub(crate) entries: u64,
}

/// Writes one `stats` line, newline included.
pub(crate) fn stats_line(w: &mut impl Write, row: &StatsRow<'_>) -> fmt::Result {
    write!(
        w,
        "bdi={} memcg_id={} strictlimit={} bdi_id={}",
        row.bdi,
        row.memcg_id,
        u8::from(row.strictlimit),
        row.bdi_id
    )?;
    for (key, value) in COUNTER_KEYS.iter().zip(row.counters) {
        write!(w, " {key}={value}")?;
    }
    writeln!(w)
}

/// Writes one `thresholds` line, newline included.
pub(crate) fn thresholds_line(w: &mut impl Write, row: &ThreshRow<'_>) -> fmt::Result {
    let s = &row.snap;
    writeln!(
        w,
        "bdi={} memcg_id={} domain={} age_ms={} thresh={} bg_thresh={} dirty={} limit={} \
         wb_dirty={} wb_thresh={} wb_bg_thresh={} pos_ratio={} dirty_ratelimit={} \
         task_ratelimit={} pause_ms={} bdi_id={}",
        row.bdi,
        row.memcg_id,
        s.domain.as_str(),
        row.age_ms,
        s.thresh,
        s.bg_thresh,
        s.dirty,
        s.limit,
        s.wb_dirty,
        s.wb_thresh,
        s.wb_bg_thresh,
        s.pos_ratio,
        s.dirty_ratelimit,
        s.task_ratelimit,
        s.pause_ms,
        row.bdi_id,
    )
}

/// Writes the `summary` line, newline included.
pub(crate) fn summary_line(w: &mut impl Write, s: &SummaryRow) -> fmt::Result {
    writeln!(
        w,
        "slots={} used={} unslotted={} hz={} format={} drain_floor_pages={} pending={} \
         entries={}",
        s.slots, s.used, s.unslotted, s.hz, FORMAT_VERSION, DRAIN_FLOOR_PAGES, s.pending, s.entries
    )
}

/// Writes `stats`: one line per claimed slot, in slot order.
pub(crate) fn write_stats(w: &mut impl Write, table: &Table) -> fmt::Result {
    for slot in table.slots() {
        let Some(key) = slot.key() else {
            continue;
        };
        let name = slot.name();
        stats_line(
            w,
            &StatsRow {
                bdi: name.as_str(),
                bdi_id: key.bdi_id,
                memcg_id: key.memcg_id,
                strictlimit: slot.strictlimit(),
                counters: slot.counters(),
            },
        )?;
    }
    Ok(())
}

/// Reads the snapshot of `slot`, asking `on_busy` whether to try again each time a probe is
/// rewriting it throughout `tries` attempts. `Err` when `on_busy` gave up.
fn read_snapshot(
    slot: &Slot,
    tries: usize,
    on_busy: &mut impl FnMut() -> bool,
) -> Result<Option<Snapshot>, Busy> {
    loop {
        match slot.snapshot().read(tries) {
            Err(Busy) if on_busy() => continue,
            other => return other,
        }
    }
}

/// Writes `thresholds`: one line per claimed slot with a snapshot, in slot order; `now` (jiffies)
/// gives `age_ms`. A slot whose snapshot stays mid-write after `on_busy` gave up is left out,
/// never printed torn.
pub(crate) fn write_thresholds(
    w: &mut impl Write,
    table: &Table,
    now: Jiffies,
    tries: usize,
    mut on_busy: impl FnMut() -> bool,
) -> fmt::Result {
    for slot in table.slots() {
        let Some(key) = slot.key() else {
            continue;
        };
        let Ok(Some(snap)) = read_snapshot(slot, tries, &mut on_busy) else {
            continue;
        };
        let name = slot.name();
        thresholds_line(
            w,
            &ThreshRow {
                bdi: name.as_str(),
                bdi_id: key.bdi_id,
                memcg_id: key.memcg_id,
                age_ms: jiffies_to_ms(now.wrapping_sub(snap.taken) as u64, table.hz()),
                snap,
            },
        )?;
    }
    Ok(())
}

/// The `summary` line of `table`.
pub(crate) fn summary_row(table: &Table) -> SummaryRow {
    SummaryRow {
        slots: NR_SLOTS,
        used: table.used(),
        unslotted: table.unslotted(),
        hz: table.hz(),
        pending: table.in_flight(),
        entries: table.entries(),
    }
}

/// Writes `summary`.
pub(crate) fn write_summary(w: &mut impl Write, table: &Table) -> fmt::Result {
    summary_line(w, &summary_row(table))
}

/// Parses what was written to `reset`: `1`, optionally surrounded by whitespace (`echo 1`
/// appends a newline). Anything else is `EINVAL`.
pub(crate) fn parse_reset(input: &[u8]) -> kernel::error::Result {
    match core::str::from_utf8(input).map(str::trim) {
        Ok("1") => Ok(()),
        _ => Err(kernel::error::code::EINVAL),
    }
}
