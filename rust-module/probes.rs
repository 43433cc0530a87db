// SPDX-License-Identifier: GPL-2.0

//! The tracepoint probes and their registration.
//!
//! Each probe turns its kernel arguments into plain values (`mod ffi`, in `probes/ffi.rs`) and
//! hands them to [`Table`]'s `on_*` functions, which hold all the logic. The kernel is not
//! changed: the tracepoints are the ones `include/trace/events/writeback.h` and `sched.h`
//! already define, found by name with `for_each_kernel_tracepoint()`.
//!
//! Context: in 7.3 a tracepoint calls its probes inside an SRCU-fast read section
//! (`__DECLARE_TRACE`); `writeback_start` fires under `wb->list_lock`, `sched_entry_tp` and
//! `sched_exit_tp` inside `__schedule()` with preemption disabled (not under the runqueue
//! lock), `sched_wakeup` under the woken task's runqueue lock and `pi_lock` (its probe stores
//! a time and reads the woken sleep's wbs, as `sched_exit_tp` does for a sleep never woken: no
//! reference), `track_foreign_dirty` under the mapping's `i_pages` lock with interrupts off. A
//! probe must not sleep or allocate; the only wait for another CPU is the end of a sleep
//! waiting for a waker that is reading its wbs (a few loads and two per-CPU sums, interrupts
//! off on the waker's CPU; `table/entry.rs`).
//!
//! A sleep's wb is read twice: at its throttle event (the tracepoint's own `wb`, which the
//! caller of `balance_dirty_pages()` holds), and at its wake-up (or, never woken, when its
//! schedule returns), through the handle the table kept. Between the two the entry holds a
//! reference of its own on the wb (`wbstall_wb_pin()`, `helpers.c`), dropped when the table
//! gives the handle back (after closing the wake-up: `Pending::close_wake`): so the second
//! read is of a live wb even if the task had left `balance_dirty_pages()` meanwhile (the table
//! drops such sleeps, but only at the task's next wait). The wb a task's foreign pages are on
//! (`track_foreign_dirty`) is pinned the same way, by the task's entry, until the entry gives it
//! up (another foreign wb, taken over, or the unload).

use crate::table::{
    foreign::Foreign,
    pending::{
        SchedEntry,
        ThrottleEvent, //
    },
    snapshot::{
        Domain,
        Snapshot, //
    },
    Table, //
};
use kernel::{
    bindings,
    prelude::*, //
};

mod ffi;

pub(crate) use ffi::jiffies;

// `table/counter.rs` names the `enum wb_reason` values it counts without `bindings::`; they must
// match.
const _: () = {
    use crate::table::counter::{
        WB_REASON_BACKGROUND,
        WB_REASON_PERIODIC,
        WB_REASON_SYNC, //
    };
    assert!(WB_REASON_BACKGROUND == bindings::wb_reason_WB_REASON_BACKGROUND);
    assert!(WB_REASON_SYNC == bindings::wb_reason_WB_REASON_SYNC);
    assert!(WB_REASON_PERIODIC == bindings::wb_reason_WB_REASON_PERIODIC);
};

/// Whether the kernel image has a tracepoint called `name` (the lookup `Probes::attach` does).
#[cfg_attr(
    not(CONFIG_KUNIT = "y"),
    allow(dead_code, reason = "used by the KUnit tests")
)]
pub(crate) fn has_tracepoint(name: &CStr) -> bool {
    let mut found = [None];
    ffi::find_kernel_tracepoints(&[name], &mut found);
    found[0].is_some()
}

/// What the KUnit suite needs of the glue: a real bdi whose last reference a pin holds, that
/// pin given back as a probe gives it (preemption off), and its last reference given back
/// from process context.
#[cfg(CONFIG_KUNIT = "y")]
pub(crate) mod kunit {
    use kernel::{
        bindings,
        prelude::*, //
    };

    extern "C" {
        fn wbstall_test_last_pin() -> *mut c_void;
        fn wbstall_test_unpin_atomic(wb: *mut c_void) -> bool;
        fn wbstall_test_refs(wb: *mut c_void) -> c_uint;
    }

    /// A root wb of a bdi of the test's own whose last reference is a pin (0: no memory).
    pub(crate) fn last_pin() -> u64 {
        // SAFETY: Allocates and pins; no precondition.
        unsafe { wbstall_test_last_pin() as u64 }
    }

    /// Gives the pin back with preemption off: whether it was dropped there.
    ///
    /// # Safety
    ///
    /// `wb` is from [`last_pin`], its pin not yet given back.
    pub(crate) unsafe fn unpin_atomic(wb: u64) -> bool {
        // SAFETY: The pin keeps the bdi live (caller's guarantee).
        unsafe { wbstall_test_unpin_atomic(wb as *mut c_void) }
    }

    /// The references the bdi of `wb` has.
    ///
    /// # Safety
    ///
    /// `wb`'s bdi is live.
    pub(crate) unsafe fn refs(wb: u64) -> u32 {
        // SAFETY: Live (caller's guarantee).
        unsafe { wbstall_test_refs(wb as *mut c_void) }
    }

    /// The last reference, given back from process context.
    ///
    /// # Safety
    ///
    /// `wb` is from [`last_pin`], its pin kept by [`unpin_atomic`] returning `false`.
    pub(crate) unsafe fn put_last(wb: u64) {
        // SAFETY: As `super::ffi::put_last` requires (caller's guarantee); a KUnit test runs
        // in process context.
        unsafe { super::ffi::put_last(wb as *mut bindings::bdi_writeback) }
    }
}

/// The table every probe updates.
pub(crate) static TABLE: Table = Table::new(bindings::CONFIG_HZ);

/// Gives a handle the table handed back to [`ffi::unpin`]. The last reference of a bdi
/// (`ffi::unpin` says which) is kept in the grave of that bdi's slot and given back by a work
/// item ([`wbstall_graves_dig`]): the probes that call this run with preemption off or under a
/// spinlock, where freeing a bdi may sleep on `PREEMPT_RT`.
fn release(handle: Option<u64>) {
    let Some(h) = handle else {
        return;
    };
    let wb = h as *mut bindings::bdi_writeback;
    // SAFETY: Every handle in the table is a wb that `probe_balance_dirty_pages` pinned
    // before it returned (`Throttled::stored`) or that `probe_foreign_dirty` pinned before
    // recording it, and the table hands each one back once, when the sleep or the entry
    // that held it gives it up.
    if unsafe { ffi::unpin(wb) } {
        return;
    }
    // SAFETY: The reference `unpin` kept is the bdi's last: the wb and its bdi are live.
    let key = unsafe { ffi::WbInfo::read(wb) }.key;
    if TABLE.bury(key, h) {
        ffi::graves_wake();
    } else {
        // Never: every pin is of a slot's wb, and a bdi's last reference goes once. Kept
        // rather than freed where it may not be.
        pr_err!(
            "a bdi's last reference has no grave: kept (bdi id {})\n",
            key.bdi_id
        );
    }
}

/// The graves' work item (`helpers.c`), in process context: gives back every last reference
/// the table's graves hold.
#[no_mangle]
pub(crate) extern "C" fn wbstall_graves_dig() {
    TABLE.dig_graves(|h| {
        // SAFETY: A grave holds a root wb whose last reference `ffi::unpin` kept, once; the
        // work item runs in process context.
        unsafe { ffi::put_last(h as *mut bindings::bdi_writeback) }
    });
}

/// `writeback_wake_background(struct bdi_writeback *wb)`: `wb_start_background_writeback()`
/// asks the flusher for background writeback.
///
/// # Safety
///
/// Called by the tracepoint only: `wb` is live.
unsafe extern "C" fn probe_wake_background(_data: *mut c_void, wb: *mut bindings::bdi_writeback) {
    // SAFETY: The tracepoint passes a live `wb` (caller's guarantee).
    let info = unsafe { ffi::WbInfo::read(wb) };
    TABLE.on_wake_background(
        info.key,
        // SAFETY: The bdi is live for the whole probe call.
        || unsafe { info.name() },
        info.strictlimit,
        ffi::now_ns(),
    );
}

/// `balance_dirty_pages(wb, dtc, dirty_ratelimit, task_ratelimit, dirtied, period, pause,
/// start_time)`: one throttle decision of `balance_dirty_pages()`.
///
/// # Safety
///
/// Called by the tracepoint only: `wb` and `dtc` are live.
unsafe extern "C" fn probe_balance_dirty_pages(
    _data: *mut c_void,
    wb: *mut bindings::bdi_writeback,
    dtc: *mut bindings::dirty_throttle_control,
    dirty_ratelimit: c_ulong,
    task_ratelimit: c_ulong,
    _dirtied: c_ulong,
    _period: c_ulong,
    pause: c_long,
    start_time: c_ulong,
) {
    let now = ffi::jiffies();
    // SAFETY: The tracepoint passes a live `wb` (caller's guarantee).
    let info = unsafe { ffi::WbInfo::read(wb) };
    // SAFETY: The tracepoint passes a live `dtc`: it is on the stack of the caller
    // (caller's guarantee), and nothing else writes it during the call.
    let d = unsafe { &*dtc };
    // SAFETY: `dtc` is live, as above.
    let memcg = unsafe { ffi::dtc_is_memcg(dtc) };
    let ev = ThrottleEvent {
        pause,
        paused: now.wrapping_sub(start_time),
        call_start: start_time,
        strictlimit: info.strictlimit,
        snapshot: Snapshot {
            domain: if memcg { Domain::Memcg } else { Domain::Global },
            taken: now,
            thresh: d.thresh as u64,
            bg_thresh: d.bg_thresh as u64,
            dirty: d.dirty as u64,
            limit: d.limit as u64,
            wb_dirty: d.wb_dirty as u64,
            wb_thresh: d.wb_thresh as u64,
            wb_bg_thresh: d.wb_bg_thresh as u64,
            pos_ratio: d.pos_ratio as u64,
            dirty_ratelimit: dirty_ratelimit as u64,
            task_ratelimit: task_ratelimit as u64,
            pause_ms: crate::table::jiffies::signed_jiffies_to_ms(pause as i64, TABLE.hz()),
        },
        now_ns: ffi::now_ns(),
    };
    let task = kernel::task::Task::current_raw();
    let done = TABLE.on_throttle(
        info.key,
        // SAFETY: The bdi is live for the whole probe call.
        || unsafe { info.name() },
        task as u64,
        wb as u64,
        &ev,
        |handle| {
            // SAFETY: The table reads two wbs here: the event's own (`wb`, which our caller
            // holds for the whole call) and the foreign wb of the task's entry, pinned by that
            // entry since `probe_foreign_dirty` (only this task's own probe calls give it back,
            // and none runs during this one).
            unsafe { ffi::facts_at_start(handle as *mut bindings::bdi_writeback) }
        },
    );
    if done.stored {
        // SAFETY: The tracepoint passes a live `wb`, held by our caller for the whole call.
        // Only this task's own later probe calls can hand the stored handle back, and none of
        // them runs before this one returns (a preemption here is `SchedEntry::Preempted`,
        // which keeps the entry).
        unsafe { ffi::pin(wb) };
    }
    release(done.release);
}

/// `track_foreign_dirty(struct folio *folio, struct bdi_writeback *wb)`: the current task
/// dirtied `folio`, whose writeback is counted on `wb` (its inode's), not on the wb of the
/// folio's memcg. Fires in `folio_account_dirtied()` with the mapping's `i_pages` lock held and
/// interrupts off.
///
/// # Safety
///
/// Called by the tracepoint only: `wb` is live (its inode holds it).
unsafe extern "C" fn probe_foreign_dirty(
    _data: *mut c_void,
    _folio: *mut c_void,
    wb: *mut bindings::bdi_writeback,
) {
    // SAFETY: The tracepoint passes a live `wb` (caller's guarantee).
    let info = unsafe { ffi::WbInfo::read(wb) };
    let task = kernel::task::Task::current_raw() as u64;
    let now = ffi::jiffies();
    let step = TABLE.on_foreign_dirty(
        info.key,
        // SAFETY: The bdi is live for the whole probe call.
        || unsafe { info.name() },
        task,
        wb as u64,
        now,
    );
    if let Foreign::Pin { slot } = step {
        // SAFETY: `wb` is live for the whole call (caller's guarantee); the reference is
        // recorded in the task's entry or handed back at once.
        unsafe { ffi::pin(wb) };
        release(TABLE.record_foreign(task, slot, wb as u64, now));
    }
}

/// `sched_entry_tp(preempt)`: the current task calls `__schedule()`; `preempt` is
/// `SM_PREEMPT`. Every call of `__schedule()` comes here; with no sleep in progress the table
/// returns after one load.
///
/// # Safety
///
/// Called by the tracepoint only, in the context of the task calling `__schedule()`.
unsafe extern "C" fn probe_sched_entry(_data: *mut c_void, preempt: bool) {
    if TABLE.idle() {
        return;
    }
    let task = kernel::task::Task::current_raw();
    let how = if preempt {
        SchedEntry::Preempted
    } else {
        // SAFETY: `task` is `current`, entering `__schedule()` (caller's guarantee).
        unsafe { ffi::voluntary(task) }
    };
    release(TABLE.on_sched_entry(task as u64, how, ffi::jiffies()));
}

/// `sched_exit_tp(is_switch)`: the `__schedule()` call of the current task returns;
/// `is_switch`: it was switched out and is now back. The end of a throttle sleep.
///
/// # Safety
///
/// Called by the tracepoint only, in the context of the task whose `__schedule()` returns.
unsafe extern "C" fn probe_sched_exit(_data: *mut c_void, is_switch: bool) {
    if TABLE.idle() {
        return;
    }
    let task = kernel::task::Task::current_raw();
    let woke = TABLE.on_sched_exit(
        task as u64,
        is_switch,
        ffi::jiffies(),
        // Read only at a throttle sleep's end: not at every return of `__schedule()` while
        // one is in progress.
        ffi::now_ns,
        |wb| {
            // SAFETY: The handle is a wb pinned since the task's throttle event, or the foreign wb
            // its entry has pinned since before that event (`release`'s comment): live, whatever
            // the task did since.
            unsafe { ffi::facts_at_end(wb as *mut bindings::bdi_writeback) }
        },
    );
    release(woke.release);
}

/// `sched_wakeup(struct task_struct *p)`: `p` is woken (`ttwu_do_wakeup()`, with `p`'s runqueue
/// lock and `p->pi_lock` held, interrupts off). The wake-up of a sleep in progress: its time is
/// stored and the sleep's wbs read (`facts_at_end`: each counter summed under its own raw
/// spinlock, which nests inside the runqueue lock on PREEMPT_RT too, and nothing under it takes
/// a runqueue lock); no reference taken or given back.
///
/// # Safety
///
/// Called by the tracepoint only. `p` is not dereferenced: its address is the table's key.
unsafe extern "C" fn probe_sched_wakeup(_data: *mut c_void, p: *mut bindings::task_struct) {
    if TABLE.idle() {
        return;
    }
    // The clock and the wbs are read only for a task with a sleep in progress: not for every
    // wake-up of the system while one is.
    TABLE.on_wakeup(p as u64, ffi::now_ns, |wb| {
        // SAFETY: The handle is one the woken sleep's entry holds pinned (its writer's wb, or
        // its foreign wb), and the table's claim on the wake-up keeps it so until this call
        // returns: every path that gives a sleep's handles back first waits for a claim in
        // progress (`Pending::close_wake`).
        unsafe { ffi::facts_at_end(wb as *mut bindings::bdi_writeback) }
    });
}

/// `writeback_start(struct bdi_writeback *wb, struct wb_writeback_work *work)`: a pass of
/// `wb_writeback()` begins (once per loop iteration, so a long work shows several).
///
/// # Safety
///
/// Called by the tracepoint only: `wb` and `work` are live.
unsafe extern "C" fn probe_writeback_start(
    _data: *mut c_void,
    wb: *mut bindings::bdi_writeback,
    work: *mut c_void,
) {
    // SAFETY: The tracepoint passes a live `wb` (caller's guarantee).
    let info = unsafe { ffi::WbInfo::read(wb) };
    // SAFETY: The tracepoint passes a live `work` (caller's guarantee).
    let reason = unsafe { ffi::work_reason(work) };
    // SAFETY: The tracepoint passes a live `wb` (caller's guarantee). Read as at a sleep's
    // start (the count a pass's pages are measured from comes out high, never invented).
    let submitted = unsafe { ffi::facts_at_start(wb) }.submitted;
    TABLE.on_writeback_start(
        info.key,
        // SAFETY: The bdi is live for the whole probe call.
        || unsafe { info.name() },
        info.strictlimit,
        kernel::task::Task::current_raw() as u64,
        reason,
        submitted,
    );
}

/// `writeback_pages_written(long pages_written)`: the flusher worker (current) left
/// `wb_do_writeback()`; the pass it made live is over.
///
/// # Safety
///
/// Called by the tracepoint only.
unsafe extern "C" fn probe_pages_written(_data: *mut c_void, _pages: c_long) {
    TABLE.on_pages_written(kernel::task::Task::current_raw() as u64);
}

/// The probes, with the tracepoints they attach to, in attach order: the scheduler's first,
/// so that no sleep's entry exists before the probes that end it.
const PROBES: [ffi::Probe; 8] = [
    // SAFETY: `probe_sched_entry` takes `data` and `TP_PROTO(bool preempt)` of
    // `DECLARE_TRACE(sched_entry)` (include/trace/events/sched.h), which names the tracepoint
    // `sched_entry_tp`.
    unsafe { ffi::Probe::new(c"sched_entry_tp", probe_sched_entry as *mut c_void) },
    // SAFETY: `probe_sched_exit` takes `data` and `TP_PROTO(bool is_switch)` of
    // `DECLARE_TRACE(sched_exit)`, the tracepoint `sched_exit_tp`.
    unsafe { ffi::Probe::new(c"sched_exit_tp", probe_sched_exit as *mut c_void) },
    // SAFETY: `probe_sched_wakeup` takes `data` and `TP_PROTO(struct task_struct *p)` of
    // `DEFINE_EVENT(sched_wakeup_template, sched_wakeup, ...)`.
    unsafe { ffi::Probe::new(c"sched_wakeup", probe_sched_wakeup as *mut c_void) },
    // SAFETY: `probe_wake_background` takes `data` and `TP_PROTO(struct bdi_writeback *wb)` of
    // `DEFINE_WRITEBACK_EVENT(writeback_wake_background)`.
    unsafe {
        ffi::Probe::new(
            c"writeback_wake_background",
            probe_wake_background as *mut c_void,
        )
    },
    // SAFETY: `probe_balance_dirty_pages` takes `data` and the eight `TP_PROTO` arguments of
    // `TRACE_EVENT(balance_dirty_pages)`, with their C types.
    unsafe {
        ffi::Probe::new(
            c"balance_dirty_pages",
            probe_balance_dirty_pages as *mut c_void,
        )
    },
    // SAFETY: `probe_writeback_start` takes `data` and `TP_PROTO(struct bdi_writeback *wb,
    // struct wb_writeback_work *work)` of `DEFINE_WRITEBACK_WORK_EVENT(writeback_start)`; the
    // work pointer is taken as `void *`, which has the same ABI.
    unsafe { ffi::Probe::new(c"writeback_start", probe_writeback_start as *mut c_void) },
    // SAFETY: `probe_pages_written` takes `data` and `TP_PROTO(long pages_written)` of
    // `TRACE_EVENT(writeback_pages_written)`.
    unsafe {
        ffi::Probe::new(
            c"writeback_pages_written",
            probe_pages_written as *mut c_void,
        )
    },
    // SAFETY: `probe_foreign_dirty` takes `data` and `TP_PROTO(struct folio *folio, struct
    // bdi_writeback *wb)` of `TRACE_EVENT(track_foreign_dirty)`; the folio pointer is taken as
    // `void *`, which has the same ABI.
    unsafe { ffi::Probe::new(c"track_foreign_dirty", probe_foreign_dirty as *mut c_void) },
];

/// The attached probes. Dropping it detaches them, waits until none runs, and gives back the
/// references the sleeps in progress held.
pub(crate) struct Probes {
    regs: [Option<ffi::Registration>; PROBES.len()],
}

impl Probes {
    /// Finds every tracepoint and attaches its probe. Missing tracepoints are `ENOENT`, each
    /// named in the log, before anything is attached; if an attach fails, the probes already
    /// attached are detached (and waited for) before the error is returned.
    pub(crate) fn attach() -> Result<Self> {
        let names = PROBES.map(|p| p.name());
        let mut found = [None; PROBES.len()];
        ffi::find_kernel_tracepoints(&names, &mut found);

        let mut missing = false;
        for (name, tp) in names.iter().zip(&found) {
            if tp.is_none() {
                pr_err!("tracepoint {} not found\n", name.to_str().unwrap_or("?"));
                missing = true;
            }
        }
        if missing {
            return Err(ENOENT);
        }

        let mut this = Self {
            regs: [const { None }; PROBES.len()],
        };
        for ((probe, tp), reg) in PROBES.iter().zip(found).zip(this.regs.iter_mut()) {
            let tp = tp.ok_or(ENOENT)?;
            match ffi::Registration::new(tp, *probe) {
                Ok(r) => *reg = Some(r),
                Err(e) => {
                    pr_err!(
                        "attaching to tracepoint {} failed: {}\n",
                        probe.name().to_str().unwrap_or("?"),
                        e.to_errno()
                    );
                    // `this` drops: detaches what was attached and waits for it.
                    return Err(e);
                }
            }
        }
        Ok(this)
    }
}

impl Drop for Probes {
    fn drop(&mut self) {
        let attached = self.regs.iter().any(Option::is_some);
        // Reverse attach order: the writeback probes, which make entries, go first.
        for reg in self.regs.iter_mut().rev() {
            // Drop unregisters.
            drop(reg.take());
        }
        if attached {
            ffi::synchronize_unregister();
            // No probe runs any more: the entries left (tasks still asleep, or that never came
            // back to a schedule) give their references back; then the graves' work item has
            // given back every last reference of a bdi, and is neither queued nor running.
            TABLE.release_all(|wb| release(Some(wb)));
            ffi::graves_flush();
            wbstall_graves_dig();
        }
    }
}
