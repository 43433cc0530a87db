// SPDX-License-Identifier: GPL-2.0

//! wbstall: counts dirty-page throttling that happens while no writeback runs.
//!
//! Commit 64dd89ae01f2 ("mm/block/fs: remove laptop_mode") dropped the unconditional
//! `wb_start_background_writeback()` from `balance_dirty_pages()`. For strictlimit BDIs (FUSE)
//! and memcg domains a writer can then be throttled (sleep) while no writeback runs and none was
//! asked for. This module attaches probes to existing writeback tracepoints (the kernel is not
//! changed) and counts, per writeback domain, how often that happens.
//!
//! # Use
//!
//! ```text
//! mount -t debugfs none /sys/kernel/debug
//! insmod wbstall.ko            # ENOENT, logged, if a tracepoint is missing
//! dd if=/dev/zero of=/mnt/f bs=1M count=300
//! cat /sys/kernel/debug/wbstall/stats
//! echo 1 > /sys/kernel/debug/wbstall/reset
//! rmmod wbstall
//! ```
//!
//! Probes: `writeback_wake_background` (each `wb_start_background_writeback()`),
//! `balance_dirty_pages` (each throttle decision), `writeback_start` (each pass of the
//! flusher's `wb_writeback()`), `writeback_pages_written` (the flusher left
//! `wb_do_writeback()`: its pass is over), `track_foreign_dirty` (a writer dirtied a folio whose
//! writeback is counted on another cgroup's wb), and the scheduler's
//! `sched_entry_tp`/`sched_exit_tp` (a throttle sleep is its task's next voluntary call of
//! `__schedule()`, and ends when that call returns) and `sched_wakeup` (its wake-up, where its
//! time asleep ends). Each sleep is classed from what held at its start and at its wake-up
//! (or, never woken, at its schedule's return: see `table/sleep_class.rs` and
//! `docs/detectors.md`). While a sleep is in progress the module holds a reference on its wb
//! (`helpers.c`), so the read at its end is of a live wb; so does a task's entry on the wb of
//! its foreign pages.
//!
//! A slot is one writeback domain: a bdi (`bdi->id`) and the memcg of its `bdi_writeback` (0 for
//! the bdi's root wb, else `wb->memcg_css->id`). There are 32 slots, claimed on first event and
//! kept until the module is unloaded; events that find no free slot count as `unslotted`.
//!
//! # Files in `/sys/kernel/debug/wbstall/`
//!
//! Lines are space-separated `key=value` pairs, keys in the order below. New keys are only ever
//! appended at the end of a line; `format` in `summary` changes for anything else (3: a pass
//! must write pages to make a sleep flushing, completions must pass a floor to make it
//! draining, and a stall says whether background writeback had been asked for; 4: a pass is
//! live from its `writeback_start` until its worker leaves `wb_do_writeback()`, and the wb of a
//! writer's foreign pages counts in its sleeps; 5: every sleep's measured times, and its call's;
//! 6: a request counts from the call's start as the event's time less its `paused`).
//!
//! `stats`: one line per claimed slot, in claim order:
//!
//! - `bdi`: the bdi's `dev_name` (`254:0`, `0:45`); bytes other than printable ASCII, `=` and
//!   space show as `_`; `(unknown)` for a bdi without a device.
//! - `memcg_id`: 0 for the bdi's root wb, else the memcg's css id (u32).
//! - `strictlimit`: 1 if the bdi had `BDI_CAP_STRICTLIMIT` at its last event, else 0.
//! - `bdi_id`: `bdi->id`, which tells apart two bdis that had the same name (a FUSE remount).
//! - `bg_starts`: `writeback_wake_background` events (background writeback requested).
//! - `throttle_events`: `balance_dirty_pages` events (throttle decisions).
//! - `throttle_sleeps`: decisions with `pause > 0`: the writer slept.
//! - `pause_ms`, `max_pause_ms`: sum and maximum of the sleeps, ms.
//! - `max_call_ms`: the longest `paused + pause` of a sleep: the longest time a writer spent in
//!   one `balance_dirty_pages()` call, ms.
//! - `flushing_sleeps`, `flushing_ms`: sleeps during which a flusher pass of the wb was live
//!   (its `writeback_start` seen, its worker not yet out of `wb_do_writeback()`, at the start;
//!   or a `writeback_start` in between) and pages of the wb were put under writeback since that
//!   pass began (`WB_WRITEBACK + WB_WRITTEN` rose). A wake-up of the flusher that begins no pass
//!   (`WB_writeback_running` alone) is none.
//! - `draining_sleeps`, `draining_ms`: not flushing, and more than `drain_floor_pages` pages of
//!   the wb completed writeback (`WB_WRITTEN` rose by more than the floor).
//! - `stall_sleeps`, `stall_ms`: neither: the regression's signature, and the writer time it
//!   costs; split by cause in `unrequested_*` and `declined_*`.
//! - `lost_ends`: sleeps the module did not class: no entry free, or the entry was dropped
//!   (`dropped_at_event`, `dropped_at_block`).
//! - `work_background`, `work_periodic`, `work_sync`, `work_other`: `writeback_start` events by
//!   `work->reason` (`WB_REASON_BACKGROUND`, `_PERIODIC`, `_SYNC`, anything else). One event per
//!   pass of `wb_writeback()`, so a long work counts several times.
//! - `unrequested_sleeps`, `unrequested_ms`: stall sleeps with no `writeback_wake_background`
//!   for the wb between the start of the `balance_dirty_pages()` call (the event's time less
//!   its `paused`) and the sleep's end: nobody asked for writeback, the signature of
//!   64dd89ae01f2.
//! - `declined_sleeps`, `declined_ms`: stall sleeps with such a request: asked, nothing written.
//! - `unblocked_sleeps`: classed sleeps whose schedule did not block (the task was already woken
//!   when it entered it, or was not switched out).
//! - `dropped_at_event`: sleeps whose task came back to a throttle decision before calling its
//!   sleep's schedule (`BDP_ASYNC`); in `lost_ends`.
//! - `dropped_at_block`: sleeps whose task's first voluntary schedule was another wait (another
//!   state, no `in_iowait`, more than 200 ms after the event, or its exit); in `lost_ends`.
//! - `foreign_sleeps`: classed sleeps whose task had dirtied, within 30 s, folios of files owned
//!   by another cgroup's wb of the same bdi (`track_foreign_dirty`): the kernel counts their
//!   writeback there, so that wb's passes and completions counted in the sleep beside the
//!   writer's own.
//! - `flushing_asleep_us`, `flushing_off_cpu_us`, and the same for `draining`, `stall`,
//!   `unrequested` and `declined`: the classed sleeps' measured times, µs, on the clock of the
//!   trace's `mono` (`ktime_get_mono_fast_ns()`): asleep, from the throttle event to the
//!   task's `sched_wakeup`; off a CPU, until its sleep's schedule returns (asleep, then its wait
//!   on the run queue). The `*_ms` keys beside them are the pauses the kernel asked for.
//! - `max_asleep_us`: the longest time asleep of a classed sleep.
//! - `unwoken_sleeps`: classed sleeps never woken (a fatal signal already pending): their time
//!   asleep is their time off a CPU.
//! - `calls`, `held_us`, `max_held_us`: the `balance_dirty_pages()` calls with a classed sleep,
//!   the time they held their tasks (from the call's start, its first event less its `paused`,
//!   to the return of its last classed sleep's schedule; a call goes on after a sleep only if
//!   that decision had no ratelimit, `task_ratelimit == 0`), and the longest, µs.
//!
//! `thresholds`: one line per claimed slot that has a snapshot: the last throttle decision's
//! `dirty_throttle_control`, written whole or not at all (a sequence counter; readers never see
//! a torn snapshot):
//!
//! - `bdi`, `memcg_id`: as in `stats`.
//! - `domain`: `global`, or `memcg` when the dtc throttled on was a memcg domain's.
//! - `age_ms`: ms since the snapshot was taken.
//! - `thresh`, `bg_thresh`, `dirty`, `limit`, `wb_dirty`, `wb_thresh`, `wb_bg_thresh`: the dtc's
//!   fields, pages.
//! - `pos_ratio`: the dtc's `pos_ratio` (1.0 is 1024).
//! - `dirty_ratelimit`, `task_ratelimit`: pages per second.
//! - `pause_ms`: the pause decided, ms (signed; zero or negative when the writer did not sleep).
//! - `bdi_id`: as in `stats`.
//!
//! `summary`: one line, `slots=32 used=<claimed slots> unslotted=<events without a slot>
//! hz=<CONFIG_HZ> format=6 drain_floor_pages=<the draining floor, pages> pending=<sleeps in
//! progress, each holding a reference on its wb> entries=<entries in use: the sleeps in progress
//! and the tasks that keep a foreign wb, each holding a reference on it>`.
//!
//! `reset`: write-only; writing `1` zeroes every counter, every snapshot and `unslotted`. Slot
//! keys and names stay, so do `strictlimit` and the last background request; sleeps in progress
//! are not counted when they end.
//! Anything else is `EINVAL`; `EBUSY` if a probe kept a snapshot mid-write (counters are zeroed anyway).
//!
//! An open file holds a reference on the module: `rmmod` fails with `EWOULDBLOCK` ("Resource
//! temporarily unavailable") until it is closed (`files.rs` says why the files do not use
//! `kernel::debugfs`).
//!
//! KUnit: suite `wbstall` runs at load on a kernel with `CONFIG_KUNIT`; with `CONFIG_KUNIT_DEBUGFS`
//! its KTAP is in `/sys/kernel/debug/kunit/wbstall/results`, and writing to
//! `/sys/kernel/debug/kunit/wbstall/run` runs it again (each test makes its own table).

mod files;
mod format;
mod probes;
mod table;
mod tests;

use kernel::{
    fmt,
    prelude::*,
    time::{
        delay::fsleep,
        Delta, //
    },
    uaccess::UserSliceReader, //
};
use probes::TABLE;
use table::Table;

module! {
    type: WbStall,
    name: "wbstall",
    authors: ["wbstall developers"],
    description: "Counts dirty throttling while no writeback runs",
    license: "GPL",
}

/// Attempts at a snapshot a probe is writing, before a debugfs read sleeps and tries again.
const SPIN_TRIES: usize = 1000;

/// Sleeps a `thresholds` read or a `reset` takes while a probe holds a snapshot mid-write.
const BUSY_SLEEPS: u32 = 10;

/// `stats`.
struct Stats;

impl files::Show for Stats {
    fn show(table: &Table, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        format::write_stats(f, table)
    }
}

/// `thresholds`.
struct Thresholds;

impl files::Show for Thresholds {
    fn show(table: &Table, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let mut sleeps = 0;
        format::write_thresholds(f, table, probes::jiffies(), SPIN_TRIES, || {
            // A probe was preempted mid-write (7.3 runs probes preemptibly, under SRCU-fast):
            // give it a millisecond, a bounded number of times.
            sleeps += 1;
            fsleep(Delta::from_millis(1));
            sleeps < BUSY_SLEEPS
        })
    }
}

/// `summary`.
struct Summary;

impl files::Show for Summary {
    fn show(table: &Table, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        format::write_summary(f, table)
    }
}

/// `reset`.
struct Reset;

impl files::Store for Reset {
    fn store(table: &Table, reader: &mut UserSliceReader) -> Result {
        let mut buf = [0u8; 8];
        let n = reader.len();
        if n > buf.len() {
            return Err(EINVAL);
        }
        reader.read_slice(&mut buf[..n])?;
        format::parse_reset(&buf[..n])?;
        for _ in 0..BUSY_SLEEPS {
            if table.reset(SPIN_TRIES).is_ok() {
                return Ok(());
            }
            fsleep(Delta::from_millis(1));
        }
        Err(EBUSY)
    }
}

struct WbStall {
    // Held for their `Drop` only. Fields drop in order: the files go first (a reader that
    // still has one open pins the module, so none is open here), then the probes are
    // detached and waited for. The files never exist without every probe attached.
    _dir: files::DebugfsDir,
    _probes: probes::Probes,
}

impl kernel::Module for WbStall {
    fn init(_module: &'static ThisModule) -> Result<Self> {
        use files::{
            Show,
            Store, //
        };

        // Every probe first: a failure leaves no file behind, and a reader never sees a
        // table that some probe does not fill.
        let probes = probes::Probes::attach()?;
        let dir = files::DebugfsDir::new(c"wbstall");
        dir.file(c"stats", 0o400, &TABLE, &Stats::FOPS);
        dir.file(c"thresholds", 0o400, &TABLE, &Thresholds::FOPS);
        dir.file(c"summary", 0o400, &TABLE, &Summary::FOPS);
        dir.file(c"reset", 0o200, &TABLE, &Reset::FOPS);
        pr_info!("loaded: {} slots, HZ={}\n", table::NR_SLOTS, TABLE.hz());
        Ok(Self {
            _dir: dir,
            _probes: probes,
        })
    }
}
