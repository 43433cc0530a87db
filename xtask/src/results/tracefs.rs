//! The tracefs detector: the module's classification of throttle sleeps,
//! computed from the kernel's own writeback trace events, so that kernels
//! without the module (no Rust, another release) can be judged alike.
//!
//! The guest records, from when the measurement starts until it ends
//! (`trace_start`/`trace_collect` in `qemu/lib.sh`, `trace_clock=mono`):
//!
//! ```text
//! balance_dirty_pages  if pause > 0   a throttle sleep: bdi, cgroup_ino, paused (ms since
//!                                     the call began), pause (ms)
//! writeback_wake_background           a background writeback start was requested
//! writeback_start                     a flusher pass began (bdi, cgroup_ino, reason,
//!                                     nr_pages: what its work may still write)
//! writeback_written                   that pass ended (nr_pages again: the difference is
//!                                     what the pass wrote)
//! writeback_pages_written             the flusher left wb_do_writeback() (no bdi: by pid)
//! writeback_single_inode              a chunk of an inode's pages was written (bdi,
//!                                     cgroup_ino, wrote: the pages), at its end
//! block_bio_queue  if rwbs ~ "*W*"    a write bio submitted (its submitter's pid), on a
//!                                     block device's bdi only
//! global_dirty_state                  every throttle loop's (and flusher check's) view of
//!                                     the global counters: writeback, written
//! sched_wakeup   if comm == "fio"     a writer was woken (its pid)
//! ```
//!
//! A throttle sleep is a timed sleep (`io_schedule_timeout(pause)` in
//! `TASK_KILLABLE`: only its timeout or a fatal signal ends it). It lasts,
//! measured, from its event `t0` to its writer's wake-up (asleep); a sleep
//! with no wake-up (a fatal signal already pending) ends at its writer's next
//! event, asleep all along (`unwoken`). The trace does not see the writer back
//! on a CPU (`measured::OffCpu` says why): where the module classes a sleep at
//! its schedule's return, the trace classes it at the wake-up, so a pass that
//! writes while the woken writer waits on the run queue is `flushing` to the
//! module only. From 2026-12-06 to 12-07 the trace also recorded the writers'
//! `sched_switch` and ended a sleep there; before 2026-12-06 a sleep lasted
//! `t0 + pause`, the pause asked for. Each is classed, over that time, as the
//! module does ([`SleepClass`]):
//!
//! - `flushing`: a flusher pass of the writer's wb was live during the sleep
//!   (live at its start: begun, its worker not yet out of `wb_do_writeback()`,
//!   which its `writeback_pages_written` or its next `writeback_start` ends;
//!   or begun during it) and pages of the wb were written by the sleep's end
//!   since that pass began (a `writeback_single_inode` with `wrote` > 0: a
//!   chunk of an inode's pages submitted, or a write bio queued by the
//!   worker of a pass of the wb), since the sleep's start if no pass was live
//!   then: the module's rule (the wb's submitted count rose by the sleep's
//!   end), as far as the trace sees it, a bio or a chunk at a time (ext4
//!   writes an inode's chunk of thousands of pages over half a second on the
//!   timed disk: its `writeback_single_inode` alone came too late). Until
//!   2026-12-06 the trace credited a pass overlapping the sleep with all it
//!   wrote by its `writeback_written`, also after the sleep had ended. A pass
//!   that found nothing to write (v2's unconditional start wakes the flusher
//!   whether or not the wb is over its background threshold) does not make a
//!   sleep flushing;
//! - `draining`: no such pass, but more than [`drain_floor_pages`] pages
//!   completed writeback during it: the global `written` count of the last
//!   `global_dirty_state` at or before `t0` (the writer's own, from the same
//!   loop iteration) against that of the first one at or after its end;
//! - `stall`: neither, named by its cause ([`Cause`]): `unrequested` when no
//!   `writeback_wake_background` for the wb came between the call's start
//!   (`t0 - paused`) and the sleep's end (nobody asked: 64dd89ae01f2's
//!   signature), `declined` when one did (asked, and nothing was written).
//!
//! The module reads the writer's wb's own `WB_WRITTEN`; the trace has only the
//! global count, so where another device's writeback completes during a stall
//! sleep, the trace says `draining` and the module `stall`, and the agreement
//! check leaves the run out rather than trust either. A sleep that ends after
//! the trace's last `global_dirty_state`, or that a pass still in progress at
//! the trace's end overlapped, is `unended`, not classed.

use std::{collections::BTreeSet, sync::OnceLock};

use serde::{Deserialize, Serialize};

pub use super::classes::{Cause, SleepClass};
pub use super::trace_events::{EventKind, TraceEvent, Wb};
use crate::results::{
    compat,
    measured::{count_times, held_by_call, Measured, Part, Times},
};

/// Pages that must complete writeback during a sleep with no pass before it
/// is `draining`: one stray completion (a journal block, the last page of
/// an earlier pass) does not make a device the bottleneck. The module owns
/// the number (`DRAIN_FLOOR_PAGES` in rust-module/table/sleep_class.rs, also
/// printed in its `summary`); this is the same constant, read from the
/// module's source so that the two detectors can never class by different
/// floors.
pub fn drain_floor_pages() -> u64 {
    static FLOOR: OnceLock<u64> = OnceLock::new();
    *FLOOR.get_or_init(|| {
        parse_drain_floor(include_str!("../../../rust-module/table/sleep_class.rs")).expect(
            "rust-module/table/sleep_class.rs defines \
                 `pub(crate) const DRAIN_FLOOR_PAGES: u64 = N;`",
        )
    })
}

fn parse_drain_floor(src: &str) -> Option<u64> {
    let rest = src
        .split("pub(crate) const DRAIN_FLOOR_PAGES: u64 = ")
        .nth(1)?;
    rest.split(';').next()?.trim().replace('_', "").parse().ok()
}

/// One throttle sleep of the writers' wb, as the detector classed it.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sleep {
    /// When it began (the tracepoint fires before the task sleeps), µs.
    pub start_us: u64,
    /// The writer.
    pub pid: u32,
    /// The pause asked for, and how long its `balance_dirty_pages()` call had
    /// run before it (the tracepoint's `pause` and `paused`), ms.
    pub pause_ms: u64,
    pub paused_ms: u64,
    pub class: SleepClass,
    /// Its measured times (`None` in a sleeps file from before them).
    pub times: Option<Times>,
}

/// Stall sleeps by [`Cause`]: each stall sleep is in exactly one.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Causes {
    pub unrequested_sleeps: u64,
    pub unrequested_ms: u64,
    pub declined_sleeps: u64,
    pub declined_ms: u64,
}

impl Causes {
    /// Sleeps and ms of `cause`.
    pub fn of(&self, cause: Cause) -> (u64, u64) {
        match cause {
            Cause::Unrequested => (self.unrequested_sleeps, self.unrequested_ms),
            Cause::Declined => (self.declined_sleeps, self.declined_ms),
        }
    }

    fn count(&mut self, cause: Cause, pause_ms: u64) {
        let (n, ms) = match cause {
            Cause::Unrequested => (&mut self.unrequested_sleeps, &mut self.unrequested_ms),
            Cause::Declined => (&mut self.declined_sleeps, &mut self.declined_ms),
        };
        *n += 1;
        *ms += pause_ms;
    }
}

/// The tracefs detector's counts for one writeback domain.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Detected {
    pub throttle_sleeps: u64,
    pub pause_ms: u64,
    pub max_pause_ms: u64,
    /// The longest `paused + pause` of a sleep: the longest time a writer
    /// spent in one `balance_dirty_pages()` call, ms.
    pub max_call_ms: u64,
    pub flushing_sleeps: u64,
    pub flushing_ms: u64,
    pub draining_sleeps: u64,
    pub draining_ms: u64,
    pub stall_sleeps: u64,
    pub stall_ms: u64,
    /// The stall sleeps by cause.
    #[serde(default = "compat::causes", skip_serializing_if = "Option::is_none")]
    pub causes: Option<Causes>,
    /// Sleeps that end after the trace's last `global_dirty_state`: not classed.
    pub unended_sleeps: u64,
    pub bg_starts: u64,
    pub work_background: u64,
    pub work_periodic: u64,
    /// Passes on the wb begun by reclaim (`reason=vmscan`): writeback that
    /// neither the throttle nor the flusher's own checks asked for.
    #[serde(default = "compat::vmscan")]
    pub work_vmscan: u64,
    /// Pages those passes wrote.
    #[serde(default = "compat::vmscan")]
    pub vmscan_pages: u64,
    /// Pages the flusher's passes wrote: on the writer's wb, and on every wb
    /// of its bdi (beside the bdi's `BdiWritten`, what the writers' own
    /// flushes wrote is the difference).
    #[serde(
        default = "compat::pass_pages",
        skip_serializing_if = "Option::is_none"
    )]
    pub pass_pages: Option<u64>,
    #[serde(
        default = "compat::pass_pages",
        skip_serializing_if = "Option::is_none"
    )]
    pub bdi_pass_pages: Option<u64>,
    /// Events of all domains in the trace, and the trace's span in ms.
    pub events: u64,
    pub span_ms: u64,
    /// The sleeps' measured times asleep, by class, and their calls' (from
    /// the writers' `sched_wakeup`); `None` in records from before them.
    #[serde(flatten, default, skip_serializing_if = "Option::is_none")]
    pub measured: Option<Measured>,
    /// Scheduler events of the writers in the trace (the measured times'
    /// cost in the buffer: the trace's size is `events`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sched_events: Option<u64>,
}

/// Whether the bdi is a block device's, whose write bios the trace has
/// (`block_bio_queue`, `qemu/lib.sh`): its major is not 0. An anonymous
/// bdi (`0:N`: FUSE, NFS) has none.
fn has_bios(bdi: &str) -> bool {
    !bdi.starts_with("0:")
}

/// A sleep of the writer's wb, waiting for its end to be classed.
struct Open {
    pid: u32,
    start_us: u64,
    /// Its writer's wake-up, and its end (the wake-up, or the writer's next
    /// event if it was never woken), once seen.
    woke_us: Option<u64>,
    end_us: Option<u64>,
    /// When its `balance_dirty_pages()` call began (`t0 - paused`).
    call_us: u64,
    pause_ms: u64,
    paused_ms: u64,
    /// A pass of the wb was live at its start (begun, its worker not out of
    /// `wb_do_writeback()`), or one began during it.
    pass_live: bool,
    /// Since when its pages count: the start of the pass live at its start,
    /// else its own start, µs.
    base_us: u64,
    /// The first write of the wb's pages since `base_us`, µs.
    chunk_us: Option<u64>,
    /// The global `written` count before it, and the first at or after its end.
    written_before: Option<u64>,
    written_after: Option<u64>,
    /// Its decision had no ratelimit: the call may go on after it.
    goes_on: bool,
}

/// A pass of a flusher worker on the writer's wb, in progress.
struct Pass {
    pid: u32,
    start_us: u64,
    nr_pages: i64,
    vmscan: bool,
}

/// Classes every sleep of `wb` in `events` (in time order).
#[cfg(test)]
pub fn detect(events: &[TraceEvent], wb: &Wb) -> Detected {
    detect_each(events, wb).0
}

/// [`detect`], and each sleep it classed, in time order (those the trace
/// ended before they could be classed are only counted: `unended_sleeps`).
pub fn detect_each(events: &[TraceEvent], wb: &Wb) -> (Detected, Vec<Sleep>) {
    let mut st = DetectorState {
        wb,
        floor: drain_floor_pages(),
        d: Detected {
            events: events.len() as u64,
            span_ms: match (events.first(), events.last()) {
                (Some(a), Some(b)) => (b.us - a.us) / 1000,
                _ => 0,
            },
            causes: Some(Causes::default()),
            pass_pages: Some(0),
            bdi_pass_pages: Some(0),
            measured: Some(Measured::default()),
            sched_events: Some(
                (events.iter())
                    .filter(|e| matches!(e.kind, EventKind::Woken { .. }))
                    .count() as u64,
            ),
            ..Detected::default()
        },
        passes: Vec::new(),
        ended: Vec::new(),
        chunks: BTreeSet::new(),
        chunk_starts: Vec::new(),
        writers: BTreeSet::new(),
        wakes: Vec::new(),
        written: None,
        open: Vec::new(),
        classed: Vec::new(),
        parts: Vec::new(),
    };
    for e in events {
        st.event(e);
        st.class_ready();
    }
    // A chunk the trace ended in wrote nothing it saw.
    st.chunk_starts.clear();
    st.class_ready();
    st.d.unended_sleeps = st.open.len() as u64;
    st.classed.sort_by_key(|s| (s.start_us, s.pid));
    st.parts.sort_by_key(|p| (p.end_us, p.pid));
    if let Some(m) = st.d.measured.as_mut() {
        for held_us in held_by_call(&st.parts) {
            m.count_call(held_us);
        }
    }
    (st.d, st.classed)
}

/// The detector between two events.
struct DetectorState<'a> {
    wb: &'a Wb,
    floor: u64,
    d: Detected,
    /// Passes in progress on any wb of the writer's bdi.
    passes: Vec<(Wb, Pass)>,
    /// Passes of the writer's wb that ended (`writeback_written`) while their
    /// worker is still in `wb_do_writeback()`: (pid, start µs).
    ended: Vec<(u32, u64)>,
    /// When the writer's wb's pages were written (see [`DetectorState::wrote`]).
    chunks: BTreeSet<u64>,
    /// Chunks of the writer's wb in progress (`writeback_single_inode_start`):
    /// (worker's pid, start µs).
    chunk_starts: Vec<(u32, u64)>,
    /// The writers: the tasks throttled on the wb so far.
    writers: BTreeSet<u32>,
    /// Background starts asked for the wb.
    wakes: Vec<u64>,
    /// The last global `written` count.
    written: Option<u64>,
    open: Vec<Open>,
    classed: Vec<Sleep>,
    /// The classed sleeps' calls, in the making.
    parts: Vec<Part>,
}

impl DetectorState<'_> {
    fn event(&mut self, e: &TraceEvent) {
        let wb = self.wb;
        if !matches!(e.kind, EventKind::Woken { .. }) {
            self.own_event(e);
        }
        match &e.kind {
            EventKind::Global { written: now } => {
                for o in (self.open.iter_mut()).filter(|o| o.end_us.is_some_and(|end| end <= e.us))
                {
                    o.written_after.get_or_insert(*now);
                }
                self.written = Some(*now);
            }
            EventKind::Woken { pid } => {
                for o in (self.open.iter_mut()).filter(|o| o.pid == *pid && o.end_us.is_none()) {
                    o.woke_us = Some(e.us);
                    o.end_us = Some(e.us);
                }
            }
            EventKind::Start {
                wb: w,
                reason,
                nr_pages,
            } if w.bdi == wb.bdi => self.pass_start(e, w, reason, *nr_pages),
            EventKind::Written { wb: w, nr_pages } if w.bdi == wb.bdi => {
                self.pass_end(e, w, *nr_pages)
            }
            EventKind::ChunkStart { wb: w } if w == wb => {
                self.chunk_starts.retain(|(pid, _)| *pid != e.pid);
                self.chunk_starts.push((e.pid, e.us));
            }
            EventKind::Chunk { wb: w, wrote } if w == wb => {
                let start = (self.chunk_starts.iter().position(|(pid, _)| *pid == e.pid))
                    .map(|i| self.chunk_starts.swap_remove(i).1);
                if *wrote > 0 {
                    // No bios to show when a chunk's first page went out (an
                    // anonymous bdi: FUSE): from the chunk's start, which
                    // submits page by page from there. A block device's bios
                    // say it (a chunk of ext4 waits for the journal first).
                    let us = match start {
                        Some(s) if !has_bios(&wb.bdi) => s,
                        _ => e.us,
                    };
                    self.wrote(us);
                }
            }
            // A bio of a worker in a pass of the wb (that pass's pages), or of a
            // writer of the wb (its own writeback: fio's `invalidate` on ext4).
            EventKind::BioWrite if self.in_pass(e.pid) || self.writers.contains(&e.pid) => {
                self.wrote(e.us)
            }
            // The worker left wb_do_writeback(): its last pass is over.
            EventKind::PagesWritten => self.ended.retain(|(pid, _)| *pid != e.pid),
            EventKind::Wake(w) if w == wb => {
                self.d.bg_starts += 1;
                self.wakes.push(e.us);
            }
            EventKind::Sleep {
                wb: w,
                paused_ms,
                pause_ms,
                goes_on,
            } if w == wb && *pause_ms > 0 => self.sleep(e, *paused_ms, *pause_ms, *goes_on),
            _ => {}
        }
    }

    /// Pages of the wb were submitted at `us` (at or before the event that
    /// says so): every open sleep whose pages count from before then, and not
    /// ended by then, has seen them.
    fn wrote(&mut self, us: u64) {
        self.chunks.insert(us);
        for o in (self.open.iter_mut()).filter(|o| {
            o.base_us <= us
                && o.end_us.is_none_or(|end| us <= end)
                && o.chunk_us.is_none_or(|c| us < c)
        }) {
            o.chunk_us = Some(us);
        }
    }

    /// Whether the worker `pid` is in a pass of the writer's wb (begun, or
    /// ended with the worker still in `wb_do_writeback()`).
    fn in_pass(&self, pid: u32) -> bool {
        (self.passes.iter()).any(|(w, p)| w == self.wb && p.pid == pid)
            || self.ended.iter().any(|(p, _)| *p == pid)
    }

    /// An event of a writer's own (not the scheduler's): it is on a CPU. A
    /// sleep of it still without an end was never woken (it ends here,
    /// `unwoken`).
    fn own_event(&mut self, e: &TraceEvent) {
        for o in (self.open.iter_mut())
            .filter(|o| o.pid == e.pid && o.end_us.is_none() && e.us > o.start_us)
        {
            o.end_us = Some(e.us);
        }
    }

    fn pass_start(&mut self, e: &TraceEvent, w: &Wb, reason: &str, nr_pages: i64) {
        self.passes.retain(|(_, p)| p.pid != e.pid);
        self.ended.retain(|(pid, _)| *pid != e.pid);
        self.passes.push((
            w.clone(),
            Pass {
                pid: e.pid,
                start_us: e.us,
                nr_pages,
                vmscan: reason == "vmscan",
            },
        ));
        if w == self.wb {
            // A pass begun during a sleep: its pages count from the sleep's start.
            for o in (self.open.iter_mut()).filter(|o| o.end_us.is_none_or(|end| e.us <= end)) {
                o.pass_live = true;
            }
            match reason {
                "background" => self.d.work_background += 1,
                "periodic" => self.d.work_periodic += 1,
                "vmscan" => self.d.work_vmscan += 1,
                _ => {}
            }
        }
    }

    /// A pass ended: what it wrote goes to every open sleep it overlapped.
    fn pass_end(&mut self, e: &TraceEvent, w: &Wb, nr_pages: i64) {
        let Some(i) = self
            .passes
            .iter()
            .position(|(pw, p)| p.pid == e.pid && pw == w)
        else {
            return;
        };
        let (_, pass) = self.passes.swap_remove(i);
        let wrote = u64::try_from(pass.nr_pages.saturating_sub(nr_pages)).unwrap_or(0);
        let d = &mut self.d;
        d.bdi_pass_pages = d.bdi_pass_pages.map(|n| n + wrote);
        if w != self.wb {
            return;
        }
        d.pass_pages = d.pass_pages.map(|n| n + wrote);
        if pass.vmscan {
            d.vmscan_pages += wrote;
        }
        // Until its worker starts another or leaves, the pass runs on.
        self.ended.push((pass.pid, pass.start_us));
    }

    fn sleep(&mut self, e: &TraceEvent, paused_ms: u64, pause_ms: u64, goes_on: bool) {
        let us = e.us;
        self.writers.insert(e.pid);
        let d = &mut self.d;
        d.throttle_sleeps += 1;
        d.pause_ms += pause_ms;
        d.max_pause_ms = d.max_pause_ms.max(pause_ms);
        d.max_call_ms = d.max_call_ms.max(paused_ms + pause_ms);
        // The pass live now: the last begun of those in progress or ended with
        // their worker still in wb_do_writeback(), as the module's slot keeps it.
        let live = (self.passes.iter())
            .filter(|(pw, _)| pw == self.wb)
            .map(|(_, p)| p.start_us)
            .chain(self.ended.iter().map(|(_, start)| *start))
            .max();
        let base_us = live.unwrap_or(us);
        self.open.push(Open {
            pid: e.pid,
            start_us: us,
            woke_us: None,
            end_us: None,
            call_us: us.saturating_sub(paused_ms * 1000),
            pause_ms,
            paused_ms,
            pass_live: live.is_some(),
            base_us,
            chunk_us: self.chunks.range(base_us..).next().copied(),
            written_before: self.written,
            written_after: None,
            goes_on,
        });
    }

    /// Classes each sleep whose end has a global count (events come in time
    /// order: every chunk written by its end has been seen).
    fn class_ready(&mut self) {
        let floor = self.floor;
        let (wakes, d) = (&self.wakes, &mut self.d);
        let (classed, parts) = (&mut self.classed, &mut self.parts);
        // Only where a chunk's write is dated by its start (no bios).
        let chunk_starts = match has_bios(&self.wb.bdi) {
            true => &[][..],
            false => &self.chunk_starts[..],
        };
        self.open.retain(|o| {
            let (Some(after), Some(end)) = (o.written_after, o.end_us) else {
                return true;
            };
            // A chunk begun by its end may still say it wrote then.
            if chunk_starts.iter().any(|(_, s)| *s <= end) {
                return true;
            }
            let completed = o.written_before.map_or(0, |b| after.saturating_sub(b));
            let wrote = o.pass_live && o.chunk_us.is_some_and(|c| c <= end);
            let class = if wrote {
                SleepClass::Flushing
            } else if completed > floor {
                SleepClass::Draining
            } else if wakes.iter().any(|&t| o.call_us <= t && t <= end) {
                SleepClass::Stall(Cause::Declined)
            } else {
                SleepClass::Stall(Cause::Unrequested)
            };
            d.count(class, o.pause_ms);
            let times = Times {
                asleep_us: end - o.start_us,
                off_cpu_us: None,
            };
            if let Some(m) = d.measured.as_mut() {
                count_times(m, class, times, o.woke_us.is_some());
            }
            parts.push(Part {
                pid: o.pid,
                call_us: o.call_us,
                end_us: end,
                goes_on: o.goes_on,
            });
            classed.push(Sleep {
                start_us: o.start_us,
                pid: o.pid,
                pause_ms: o.pause_ms,
                paused_ms: o.paused_ms,
                class,
                times: Some(times),
            });
            false
        });
    }
}

impl Detected {
    fn count(&mut self, class: SleepClass, pause_ms: u64) {
        let (n, ms) = match class {
            SleepClass::Flushing => (&mut self.flushing_sleeps, &mut self.flushing_ms),
            SleepClass::Draining => (&mut self.draining_sleeps, &mut self.draining_ms),
            SleepClass::Stall(cause) => {
                self.causes
                    .get_or_insert_with(Causes::default)
                    .count(cause, pause_ms);
                (&mut self.stall_sleeps, &mut self.stall_ms)
            }
        };
        *n += 1;
        *ms += pause_ms;
    }
}
#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::{measured::OffCpu, trace_events::parse};

    fn fixture() -> String {
        std::fs::read_to_string(crate::util::project_root().join("xtask/fixtures/trace/trace.txt"))
            .unwrap()
    }

    fn wb(bdi: &str, ino: u64) -> Wb {
        Wb {
            bdi: bdi.into(),
            cgroup_ino: ino,
        }
    }

    #[test]
    fn parses_the_events_it_needs_and_skips_the_rest() {
        let ev = parse(&fixture(), "trace.txt").unwrap();
        assert_eq!(ev.len(), 23, "{ev:#?}");
        assert_eq!(ev[0].kind, EventKind::Global { written: 1000 });
        assert_eq!(
            ev[1],
            TraceEvent {
                us: 12_000_000,
                pid: 210,
                kind: EventKind::Sleep {
                    wb: wb("0:45", 1),
                    paused_ms: 0,
                    pause_ms: 200,
                    goes_on: true,
                }
            }
        );
        // The scheduler's: the woken task, not the line's own (the waker).
        assert_eq!(
            (ev[2].pid, &ev[2].kind),
            (0, &EventKind::Woken { pid: 210 })
        );
        assert!(
            matches!(&ev[8].kind, EventKind::Start { reason, nr_pages: 1024, .. } if reason == "background")
        );
        assert_eq!(ev[8].pid, 31);
        assert_eq!(
            ev[9].kind,
            EventKind::Chunk {
                wb: wb("0:45", 1),
                wrote: 1024
            }
        );
        assert_eq!(
            ev[12].kind,
            EventKind::Written {
                wb: wb("0:45", 1),
                nr_pages: 0
            }
        );
        assert_eq!(ev[21].pid, 300, "a comm with a dash: {:?}", ev[21]);
        // A trace of 2026-12-06 has the writers' context switches too: skipped.
        let old = "          <idle>-0       [000] d..2.    12.200000: sched_switch: prev_comm=swapper/0 \
                   prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=fio next_pid=210 next_prio=120\n";
        assert_eq!(parse(old, "old").unwrap(), []);
    }

    /// Each classed sleep comes back with its writer, pause, paused and
    /// class, in time order; the unended one is left out.
    #[test]
    fn each_classed_sleep_is_kept_with_its_class() {
        let ev = parse(&fixture(), "trace.txt").unwrap();
        let (d, sleeps) = detect_each(&ev, &wb("0:45", 1));
        assert_eq!(sleeps.len() as u64, d.throttle_sleeps - d.unended_sleeps);
        let classes: Vec<SleepClass> = sleeps.iter().map(|s| s.class).collect();
        assert_eq!(
            classes,
            [
                SleepClass::Stall(Cause::Unrequested),
                SleepClass::Stall(Cause::Declined),
                SleepClass::Flushing,
                SleepClass::Draining
            ]
        );
        assert_eq!(
            (
                sleeps[0].start_us,
                sleeps[0].pid,
                sleeps[0].pause_ms,
                sleeps[0].paused_ms
            ),
            (12_000_000, 210, 200, 0)
        );
        // Woken 200 ms after its event; its time off a CPU unseen.
        let t = Times {
            asleep_us: 200_000,
            off_cpu_us: None,
        };
        assert_eq!(sleeps[0].times, Some(t));
    }

    #[test]
    fn classes_each_sleep_by_what_happened_until_its_end() {
        let ev = parse(&fixture(), "trace.txt").unwrap();
        let d = detect(&ev, &wb("0:45", 1));
        // 12.0 s, 200 ms: no pass, written unchanged by 12.26 s, and the one
        // start (12.25 s) came after its end: an unrequested stall. 12.3 s,
        // 40 ms, in a call begun at 12.2 s: a start was asked for at 12.25 s,
        // but no pass wrote and nothing completed by 12.4 s: declined.
        // 12.5 s: a pass of 12.45-12.59 s wrote 1024 pages: flushing. 13.0 s,
        // 100 ms: no pass, written 1500 -> 1900 by 13.15 s: draining. 13.3 s:
        // no global count after its end: unended.
        assert_eq!(d.throttle_sleeps, 5);
        assert_eq!((d.stall_sleeps, d.stall_ms), (2, 200 + 40));
        assert_eq!(
            d.causes,
            Some(Causes {
                unrequested_sleeps: 1,
                unrequested_ms: 200,
                declined_sleeps: 1,
                declined_ms: 40
            })
        );
        assert_eq!((d.flushing_sleeps, d.flushing_ms), (1, 20));
        assert_eq!((d.draining_sleeps, d.draining_ms), (1, 100));
        assert_eq!(d.unended_sleeps, 1);
        assert_eq!(d.pause_ms, 200 + 40 + 20 + 100 + 200);
        assert_eq!(d.max_pause_ms, 200);
        // The last call had slept 3 s before its 200 ms sleep.
        assert_eq!(d.max_call_ms, 3200);
        assert_eq!(d.bg_starts, 1);
        assert_eq!(d.work_background, 1);
        assert_eq!((d.pass_pages, d.bdi_pass_pages), (Some(1024), Some(1024)));
        // Another domain (a memcg wb of the same bdi) saw only its own sleep:
        // written rose from 1800 to 1900 while it slept.
        let other = detect(&ev, &wb("0:45", 77));
        assert_eq!(
            (
                other.throttle_sleeps,
                other.draining_sleeps,
                other.stall_sleeps
            ),
            (1, 1, 0)
        );
        assert_eq!(
            (other.pass_pages, other.bdi_pass_pages),
            (Some(0), Some(1024))
        );
    }

    /// An event at `us`: the writer's own (pid 1) for a sleep, another
    /// task's (the flusher's, pid 31) for the rest.
    fn at(us: u64, kind: EventKind) -> TraceEvent {
        let pid = match kind {
            EventKind::Sleep { .. } => 1,
            _ => 31,
        };
        TraceEvent { us, pid, kind }
    }

    fn sleep(paused_ms: u64, pause_ms: u64) -> EventKind {
        EventKind::Sleep {
            wb: wb("0:45", 1),
            paused_ms,
            pause_ms,
            goes_on: false,
        }
    }

    /// `events` with each sleep woken when its pause is over (after any
    /// other event at that time): the times the tests below class by.
    fn timed(events: &[TraceEvent]) -> Vec<TraceEvent> {
        let mut out = events.to_vec();
        for e in events {
            if let EventKind::Sleep { pause_ms, .. } = e.kind {
                let end = e.us + pause_ms * 1000;
                let i = out.iter().position(|x| x.us > end).unwrap_or(out.len());
                out.insert(
                    i,
                    TraceEvent {
                        us: end,
                        pid: 0,
                        kind: EventKind::Woken { pid: e.pid },
                    },
                );
            }
        }
        out
    }

    fn start(nr_pages: i64) -> EventKind {
        EventKind::Start {
            wb: wb("0:45", 1),
            reason: "background".into(),
            nr_pages,
        }
    }

    fn written(nr_pages: i64) -> EventKind {
        EventKind::Written {
            wb: wb("0:45", 1),
            nr_pages,
        }
    }

    fn g(written: u64) -> EventKind {
        EventKind::Global { written }
    }

    /// A chunk of the wb's pages written (`writeback_single_inode`).
    fn chunk(wrote: u64) -> EventKind {
        EventKind::Chunk {
            wb: wb("0:45", 1),
            wrote,
        }
    }

    fn class_of(events: &[TraceEvent]) -> (u64, u64, Causes) {
        let d = detect(&timed(events), &wb("0:45", 1));
        assert_eq!(d.unended_sleeps, 0, "{d:?}");
        (d.flushing_sleeps, d.draining_sleeps, d.causes.unwrap())
    }

    #[test]
    fn a_pass_that_writes_during_a_sleep_makes_it_flushing_and_a_later_one_does_not() {
        let during = [
            at(0, g(5)),
            at(10, sleep(0, 100)),
            at(50_000, start(1000)),
            at(80_000, chunk(800)),
            at(90_000, written(200)),
            at(200_000, g(5)),
        ];
        assert_eq!(class_of(&during).0, 1);
        let after = [
            at(0, g(5)),
            at(10, sleep(0, 100)),
            at(150_000, start(1000)),
            at(170_000, chunk(1000)),
            at(180_000, written(0)),
            at(200_000, g(900)),
        ];
        // The pass began after the sleep's end (100.01 ms): it did not end
        // the sleep. Completions are counted up to the first global count
        // after the end, so the pages it wrote show as draining here; the
        // module reads its count at the sleep's end exactly.
        assert_eq!(class_of(&after).0, 0);
        assert_eq!(class_of(&after).1, 1);
    }

    #[test]
    fn a_pass_runs_on_until_its_worker_starts_another_or_leaves() {
        // A pass wrote 800 pages and ended (writeback_written) at 5 ms, its
        // worker still in wb_do_writeback() (the kernel's
        // writeback_in_progress(), the module's WB_writeback_running) when
        // the sleep began at 10 ms; the device completed 900 pages meanwhile.
        let pass = |then: Vec<TraceEvent>| {
            let mut ev = vec![
                at(0, g(5)),
                at(1_000, start(1000)),
                at(4_000, chunk(800)),
                at(5_000, written(200)),
            ];
            ev.extend(then);
            ev.extend([at(10_000, sleep(0, 100)), at(200_000, g(905))]);
            let (flushing, draining, _) = class_of(&ev);
            (flushing, draining)
        };
        assert_eq!(pass(vec![]), (1, 0));
        // The worker left wb_do_writeback() before the sleep: draining.
        assert_eq!(pass(vec![at(6_000, EventKind::PagesWritten)]), (0, 1));
        // It began another pass, which wrote nothing by the sleep's end and
        // ended before it: that pass is the one in progress, and it wrote
        // nothing.
        let other = vec![at(6_000, start(5000)), at(8_000, written(5000))];
        assert_eq!(pass(other), (0, 1));
        // A pass that wrote nothing runs on, and makes nothing flushing.
        let empty = [
            at(0, g(5)),
            at(1_000, start(1000)),
            at(5_000, written(1000)),
            at(10_000, sleep(0, 100)),
            at(200_000, g(905)),
        ];
        assert_eq!(class_of(&empty).0, 0);
    }

    #[test]
    fn an_empty_pass_does_not_make_a_sleep_flushing() {
        // v2's unconditional start: asked, the flusher ran a pass on the wb
        // across the whole sleep, and it wrote nothing.
        // The call began at 10 ms (t0 - paused), the start was asked at 12.
        let empty = [
            at(0, g(5)),
            at(12_000, EventKind::Wake(wb("0:45", 1))),
            at(12_500, start(i64::MAX)),
            at(20_000, sleep(10, 100)),
            at(150_000, written(i64::MAX)),
            at(200_000, g(5)),
        ];
        let (flushing, draining, causes) = class_of(&empty);
        assert_eq!((flushing, draining), (0, 0));
        assert_eq!((causes.declined_sleeps, causes.unrequested_sleeps), (1, 0));
    }

    #[test]
    fn a_pass_s_pages_count_up_to_the_sleep_s_end() {
        // A pass begins during the sleep (10 ms) and writes its first chunk after
        // the sleep's end: nothing was written for the writer while it slept. The
        // module reads the wb's count at the sleep's end alike. Until 2026-12-06
        // the trace credited the pass with all it wrote by its end: flushing.
        let late = [
            at(0, g(5)),
            at(20, sleep(0, 10)),
            at(5_000, start(1000)),
            at(20_000, g(5)),
            at(300_000, chunk(10)),
            at(300_001, written(990)),
        ];
        assert_eq!(class_of(&late).0, 0);
        // The same chunk before the sleep's end: flushing.
        let early = [
            at(0, g(5)),
            at(20, sleep(0, 10)),
            at(5_000, start(1000)),
            at(8_000, chunk(10)),
            at(20_000, g(5)),
        ];
        assert_eq!(class_of(&early).0, 1);
        // Negative: another wb's chunk, or one written before the live pass
        // began, is none of this sleep's.
        let other = [
            at(0, g(5)),
            at(1, chunk(10)),
            at(20, sleep(0, 10)),
            at(5_000, start(1000)),
            at(
                8_000,
                EventKind::Chunk {
                    wb: wb("0:45", 2),
                    wrote: 10,
                },
            ),
            at(20_000, g(5)),
        ];
        assert_eq!(class_of(&other).0, 0);
    }

    #[test]
    fn a_pass_s_first_bio_before_the_sleep_s_end_is_a_write() {
        // ext4 writes an inode's chunk over half a second on the timed disk:
        // its `writeback_single_inode` comes after the sleep, its first bio
        // (queued by the pass's worker, pid 31) during it: flushing, as the
        // module's submitted count says.
        let bio = [
            at(0, g(5)),
            at(20, sleep(0, 10)),
            at(5_000, start(i64::MAX)),
            at(8_000, EventKind::BioWrite),
            at(20_000, g(5)),
            at(500_000, chunk(4000)),
        ];
        assert_eq!(class_of(&bio).0, 1);
        // Negative: a bio of another task (the journal's thread, pid 40),
        // or of the worker before its pass began, is none of the pass's.
        let journal = [
            at(0, g(5)),
            at(20, sleep(0, 10)),
            at(5_000, start(i64::MAX)),
            TraceEvent {
                us: 8_000,
                pid: 40,
                kind: EventKind::BioWrite,
            },
            at(20_000, g(5)),
            at(500_000, chunk(4000)),
        ];
        assert_eq!(class_of(&journal).0, 0);
        // A writer's own bio (pid 1, fio's `invalidate` writing its file
        // back on ext4) while a pass is live: the wb's pages, as the module's
        // submitted count sees them.
        let own = [
            at(0, g(5)),
            at(20, sleep(0, 10)),
            at(5_000, start(i64::MAX)),
            TraceEvent {
                us: 8_000,
                pid: 1,
                kind: EventKind::BioWrite,
            },
            at(20_000, g(5)),
            at(500_000, chunk(4000)),
        ];
        assert_eq!(class_of(&own).0, 1);
        let before = [
            at(0, g(5)),
            at(10, EventKind::BioWrite),
            at(20, sleep(0, 10)),
            at(5_000, start(i64::MAX)),
            at(20_000, g(5)),
            at(500_000, chunk(4000)),
        ];
        assert_eq!(class_of(&before).0, 0);
    }

    #[test]
    fn without_bios_a_chunk_that_wrote_counts_from_its_start() {
        // FUSE (an anonymous bdi, no bios): a chunk begun during the sleep
        // submits page by page from its start; its end comes after the
        // sleep: flushing, once the chunk says it wrote.
        let on = |bdi: &str, events: &[TraceEvent]| {
            let w = wb(bdi, 1);
            let moved: Vec<TraceEvent> = (events.iter().cloned())
                .map(|mut e| {
                    match &mut e.kind {
                        EventKind::Sleep { wb, .. }
                        | EventKind::Start { wb, .. }
                        | EventKind::ChunkStart { wb }
                        | EventKind::Chunk { wb, .. } => *wb = w.clone(),
                        _ => {}
                    }
                    e
                })
                .collect();
            let d = detect(&timed(&moved), &w);
            assert_eq!(d.unended_sleeps, 0, "{d:?}");
            (d.flushing_sleeps, d.draining_sleeps)
        };
        let begun = [
            at(0, g(5)),
            at(20, sleep(0, 10)),
            at(5_000, start(i64::MAX)),
            at(6_000, EventKind::ChunkStart { wb: wb("0:45", 1) }),
            at(20_000, g(5)),
            at(300_000, chunk(1024)),
        ];
        assert_eq!(on("0:45", &begun), (1, 0));
        // Negative: on a block device the chunk's start is no write (ext4
        // waits for the journal there); its bios would say when it wrote.
        assert_eq!(on("253:0", &begun), (0, 0));
        // Negative: a chunk that wrote nothing.
        let mut empty = begun.clone();
        empty[5] = at(300_000, chunk(0));
        assert_eq!(on("0:45", &empty), (0, 0));
    }

    /// A writer's event (pid 1) that is not a sleep: it is on a CPU.
    fn own(us: u64, kind: EventKind) -> TraceEvent {
        TraceEvent { us, pid: 1, kind }
    }

    fn woken(us: u64) -> TraceEvent {
        TraceEvent {
            us,
            pid: 0,
            kind: EventKind::Woken { pid: 1 },
        }
    }

    #[test]
    fn a_sleep_ends_at_its_wake_up() {
        // Asked 4 ms at 10 ms; woken at 13 ms. A pass begins at 16 ms and
        // writes, while the woken writer may still wait for a CPU: the trace
        // does not see when it ran again, and classes the sleep at its
        // wake-up. Nothing was written by then: a stall (the module, which
        // classes at its schedule's return, 19 ms say, reads it flushing: a
        // known difference, docs/detectors.md).
        let ev = [
            at(0, g(5)),
            at(10_000, sleep(0, 4)),
            woken(13_000),
            at(16_000, start(1000)),
            at(16_500, chunk(100)),
            at(17_000, written(900)),
            at(20_000, g(5)),
        ];
        let (d, sleeps) = detect_each(&ev, &wb("0:45", 1));
        assert_eq!((d.stall_sleeps, d.unended_sleeps), (1, 0));
        let t = Times {
            asleep_us: 3000,
            off_cpu_us: None,
        };
        assert_eq!(sleeps[0].times, Some(t));
        let m = d.measured.unwrap();
        assert_eq!(
            (m.stall_asleep_us, m.off_cpu, m.off_cpu_us()),
            (3000, None, None)
        );
        assert_eq!((m.calls, m.held_us, m.unwoken_sleeps), (1, 3000, 0));
        assert_eq!(d.stall_ms, 4, "the pause asked for stays beside");
        // Negative: the pass begun before the wake-up wrote in the sleep.
        let mut early = ev.to_vec();
        early[3] = at(11_000, start(1000));
        early[4] = at(12_000, chunk(100));
        assert_eq!(detect(&early, &wb("0:45", 1)).flushing_sleeps, 1);
    }

    #[test]
    fn a_sleep_never_woken_ends_at_its_next_event_and_one_without_either_never() {
        // No wake-up (a fatal signal was pending): it ends at its next event,
        // asleep all along, counted as unwoken.
        let ev = [
            at(0, g(5)),
            at(10_000, sleep(0, 4)),
            own(15_000, g(5)),
            at(20_000, g(5)),
        ];
        let (d, sleeps) = detect_each(&ev, &wb("0:45", 1));
        assert_eq!(sleeps[0].times.map(|t| t.asleep_us), Some(5000));
        assert_eq!(d.measured.unwrap().unwoken_sleeps, 1);
        // Woken at 12 ms: its next event does not move its end.
        let mut woke = ev.to_vec();
        woke.insert(2, woken(12_000));
        let (d, sleeps) = detect_each(&woke, &wb("0:45", 1));
        assert_eq!(sleeps[0].times.map(|t| t.asleep_us), Some(2000));
        assert_eq!(d.measured.unwrap().unwoken_sleeps, 0);
        // Negative: without the writer's wake-up or event of its own (a
        // writer the trace's filter does not name) a sleep never ends:
        // unended, not classed by the pause asked for.
        let ev = [at(0, g(5)), at(10_000, sleep(0, 4)), at(20_000, g(5))];
        let d = detect(&ev, &wb("0:45", 1));
        assert_eq!((d.unended_sleeps, d.stall_sleeps), (1, 0));
    }

    #[test]
    fn a_call_that_loops_is_held_from_its_start_to_its_last_sleep_s_end() {
        // task_ratelimit=0: the loop goes on. Sleeps at 10 and 20 ms (paused
        // 0 and 8 ms), each woken 4 ms later: one call held from 10 to 24 ms.
        // A paced sleep after it (paused 0, a ratelimit) is a call of its
        // own, held 4 ms.
        let looping = |paused_ms| EventKind::Sleep {
            wb: wb("0:45", 1),
            paused_ms,
            pause_ms: 4,
            goes_on: true,
        };
        let ev = [
            at(0, g(5)),
            at(10_000, looping(0)),
            woken(14_000),
            at(20_000, looping(8)),
            woken(24_000),
            at(40_000, sleep(0, 4)),
            woken(44_000),
            at(50_000, g(5)),
        ];
        let m = detect(&ev, &wb("0:45", 1)).measured.unwrap();
        assert_eq!(
            (m.calls, m.held_us, m.max_held_us),
            (2, 14_000 + 4_000, 14_000)
        );
        // Negative: had the first decision had a ratelimit, its call was over
        // after its sleep: three calls.
        let mut paced = ev.to_vec();
        paced[1] = at(10_000, sleep(0, 4));
        let m = detect(&paced, &wb("0:45", 1)).measured.unwrap();
        assert_eq!(m.calls, 3);
    }

    #[test]
    fn a_sleep_counts_in_its_class_and_a_stall_in_its_cause_too() {
        // A record with times off a CPU (the module's kind).
        let mut m = Measured {
            off_cpu: Some(OffCpu::default()),
            ..Measured::default()
        };
        let t = |asleep_us, off_cpu_us| Times {
            asleep_us,
            off_cpu_us: Some(off_cpu_us),
        };
        count_times(&mut m, SleepClass::Flushing, t(3000, 5000), true);
        count_times(
            &mut m,
            SleepClass::Stall(Cause::Declined),
            t(4000, 4100),
            false,
        );
        count_times(
            &mut m,
            SleepClass::Stall(Cause::Unrequested),
            t(100, 200),
            true,
        );
        let o = m.off_cpu.unwrap();
        assert_eq!((m.flushing_asleep_us, o.flushing_off_cpu_us), (3000, 5000));
        assert_eq!((m.stall_asleep_us, o.stall_off_cpu_us), (4100, 4300));
        assert_eq!(
            crate::results::measured::cause_asleep_us(&m, Cause::Declined),
            4000
        );
        assert_eq!(
            (o.declined_off_cpu_us, o.unrequested_off_cpu_us),
            (4100, 200)
        );
        assert_eq!((m.asleep_us(), m.off_cpu_us()), (7100, Some(9300)));
        assert_eq!((m.max_asleep_us, m.unwoken_sleeps), (4000, 1));
        m.count_call(9000);
        m.count_call(300);
        assert_eq!((m.calls, m.held_us, m.max_held_us), (2, 9300, 9000));
        // A record without them (the trace's) gets none from a sleep that has.
        let mut trace = Measured::default();
        count_times(&mut trace, SleepClass::Flushing, t(3000, 5000), true);
        assert_eq!((trace.flushing_asleep_us, trace.off_cpu_us()), (3000, None));
    }

    #[test]
    fn one_stray_completion_does_not_make_a_sleep_draining() {
        let floor = drain_floor_pages();
        let with = |completed: u64| {
            class_of(&[
                at(0, g(100)),
                at(10, sleep(0, 100)),
                at(200_000, g(100 + completed)),
            ])
        };
        let (_, draining, causes) = with(1);
        assert_eq!((draining, causes.unrequested_sleeps), (0, 1));
        assert_eq!(with(floor).1, 0, "the floor itself is not above the floor");
        assert_eq!(with(floor + 1).1, 1);
    }

    #[test]
    fn an_unrequested_stall_reads_as_one_and_a_start_before_the_call_does_not_count() {
        // A start at 1 ms, before the call that began at 5 ms (t0 - paused).
        let before = [
            at(0, g(5)),
            at(1_000, EventKind::Wake(wb("0:45", 1))),
            at(105_000, sleep(100, 50)),
            at(200_000, g(5)),
        ];
        let c = class_of(&before).2;
        assert_eq!(
            (c.unrequested_sleeps, c.unrequested_ms, c.declined_sleeps),
            (1, 50, 0)
        );
        // The same start within the call: declined.
        let within = [
            at(0, g(5)),
            at(6_000, EventKind::Wake(wb("0:45", 1))),
            at(105_000, sleep(100, 50)),
            at(200_000, g(5)),
        ];
        let c = class_of(&within).2;
        assert_eq!(
            (c.unrequested_sleeps, c.declined_sleeps, c.declined_ms),
            (0, 1, 50)
        );
        // Another wb's start is nobody's request for this one.
        let other = [
            at(0, g(5)),
            at(6_000, EventKind::Wake(wb("0:45", 2))),
            at(105_000, sleep(100, 50)),
            at(200_000, g(5)),
        ];
        assert_eq!(class_of(&other).2.unrequested_sleeps, 1);
    }

    #[test]
    fn the_drain_floor_is_the_modules() {
        assert_eq!(
            parse_drain_floor("x\npub(crate) const DRAIN_FLOOR_PAGES: u64 = 1_024;\n"),
            Some(1024)
        );
        assert_eq!(parse_drain_floor("const DRAIN_FLOOR: u64 = 3;"), None);
        assert!(
            drain_floor_pages() > 1,
            "a single page is a stray completion"
        );
    }

    #[test]
    fn bad_lines_of_known_events_and_lost_events_are_errors() {
        let bad = "fio-210 [000] ..... 12.000000: balance_dirty_pages: bdi 0:45: paused=x pause=1 cgroup_ino=1\n";
        let err = parse(bad, "t").unwrap_err();
        assert!(format!("{err:#}").contains("paused=x"), "{err:#}");
        let coarse =
            "fio-210 [000] ..... 12.000: writeback_wake_background: bdi 0:45: cgroup_ino=1\n";
        let err = format!("{:#}", parse(coarse, "t").unwrap_err());
        assert!(err.contains("microseconds"), "{err}");
    }
}
