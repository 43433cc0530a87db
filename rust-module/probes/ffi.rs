// SPDX-License-Identifier: GPL-2.0

//! Raw kernel access for the probes, each piece wrapped in a small function: finding and
//! registering the tracepoints, and reading what the probes need of a wb, a task, a dtc and a
//! work (some of it through the C of `helpers.c`).

use crate::table::{
    pending::{
        SchedEntry,
        TaskState, //
    },
    sleep_class::{
        Stat,
        WbFacts, //
    },
    slot::{
        Name,
        SlotKey,
        NAME_LEN, //
    },
};
use core::ptr::NonNull;
use kernel::{
    bindings,
    prelude::*,
    str::CStrExt,
    sync::atomic::{
        Atomic,
        Relaxed, //
    },
    time::Jiffies, //
};

// `helpers.c`, linked into the same module: what the bindings cannot reach. The pointers
// are `struct bdi_writeback *` and `const struct wb_writeback_work *` in C (`helpers.h`);
// untyped here, which is the same ABI (bindgen's `bdi_writeback` holds a zero-sized array,
// which `improper_ctypes` refuses in an `extern` block).
extern "C" {
    fn wbstall_wb_pin(wb: *mut c_void);
    fn wbstall_wb_unpin(wb: *mut c_void) -> bool;
    fn wbstall_put_last(wb: *mut c_void);
    fn wbstall_graves_wake();
    fn wbstall_graves_flush();
    fn wbstall_work_reason(work: *const c_void) -> c_uint;
}

/// `BDI_CAP_STRICTLIMIT` of include/linux/backing-dev.h (a `#define`, so not in the
/// bindings).
const BDI_CAP_STRICTLIMIT: u32 = 1 << 1;

/// The current `jiffies` (`READ_ONCE(jiffies)`).
pub(crate) fn jiffies() -> Jiffies {
    // SAFETY: `jiffies` is a kernel global, valid for the whole life of the kernel; the tick
    // updates it, which is why it is read atomically here.
    unsafe { Atomic::from_ptr(&raw mut bindings::jiffies) }.load(Relaxed)
}

/// Now, ns of the monotonic clock: `ktime_get_mono_fast_ns()`, the clock of the trace's
/// `mono` (`trace_clock=mono`), so the tracefs detector's times and the module's are one clock.
/// NMI-safe, lock-free: callable from every probe, under the runqueue lock too.
pub(crate) fn now_ns() -> u64 {
    // SAFETY: A plain read of the timekeeper's fast path; no precondition (timekeeping.c).
    unsafe { bindings::ktime_get_mono_fast_ns() }
}

/// A tracepoint of the kernel image.
///
/// # Invariants
///
/// `self.0` points to a `struct tracepoint` of vmlinux's `__tracepoints` section, which
/// lives as long as the kernel.
#[derive(Clone, Copy)]
pub(super) struct Tracepoint(NonNull<bindings::tracepoint>);

// SAFETY: The pointee is a static kernel object, and the only functions given it
// (`tracepoint_probe_register()`/`_unregister()`) serialise on `tracepoints_mutex`.
unsafe impl Send for Tracepoint {}

// SAFETY: As for `Send`: nothing here touches the pointee without the kernel's lock.
unsafe impl Sync for Tracepoint {}

/// What [`visit`] looks for and fills in.
struct Search<'a> {
    names: &'a [&'a CStr],
    found: &'a mut [Option<Tracepoint>],
}

/// `for_each_kernel_tracepoint()` callback: records `tp` if its name is wanted.
///
/// # Safety
///
/// `tp` points to a kernel tracepoint; `data` points to a [`Search`] that nothing else
/// uses during the call.
unsafe extern "C" fn visit(tp: *mut bindings::tracepoint, data: *mut c_void) {
    // SAFETY: `data` is the `Search` that `find_kernel_tracepoints` passed, borrowed by
    // nobody else while the iteration runs (caller's guarantee).
    let search = unsafe { &mut *data.cast::<Search<'_>>() };
    let Some(tp) = NonNull::new(tp) else {
        return;
    };
    // SAFETY: `tp` points to a live tracepoint (caller's guarantee), whose `name` is a
    // NUL-terminated string in the kernel image.
    let name = unsafe { CStr::from_char_ptr((*tp.as_ptr()).name) };
    for (want, slot) in search.names.iter().zip(search.found.iter_mut()) {
        if *want == name {
            // INVARIANT: `for_each_kernel_tracepoint()` only visits vmlinux's tracepoints.
            *slot = Some(Tracepoint(tp));
        }
    }
}

/// Looks up the kernel's tracepoints called `names`; `found[i]` is set for `names[i]`.
pub(super) fn find_kernel_tracepoints(names: &[&CStr], found: &mut [Option<Tracepoint>]) {
    let mut search = Search { names, found };
    // SAFETY: `visit` matches the callback type and only uses `search`, which outlives the
    // call and is not touched by anything else meanwhile.
    unsafe {
        bindings::for_each_kernel_tracepoint(Some(visit), (&raw mut search).cast::<c_void>())
    };
}

/// A probe function for one tracepoint.
///
/// # Invariants
///
/// `func` is an `extern "C"` function whose parameters are `void *data` followed by exactly
/// the `TP_PROTO` of the tracepoint called `name`.
#[derive(Clone, Copy)]
pub(super) struct Probe {
    name: &'static CStr,
    func: *mut c_void,
}

// SAFETY: A `Probe` is a name and a function address; both are immutable and global.
unsafe impl Send for Probe {}

// SAFETY: As for `Send`.
unsafe impl Sync for Probe {}

impl Probe {
    /// Pairs a tracepoint name with its probe.
    ///
    /// # Safety
    ///
    /// `func` must be an `extern "C"` function taking `void *data` and then exactly the
    /// arguments of `TP_PROTO` of the tracepoint named `name`
    /// (include/trace/events/writeback.h).
    pub(super) const unsafe fn new(name: &'static CStr, func: *mut c_void) -> Self {
        // INVARIANT: Guaranteed by the caller.
        Self { name, func }
    }

    /// The tracepoint's name.
    pub(super) fn name(&self) -> &'static CStr {
        self.name
    }
}

/// A probe attached to a tracepoint. Dropping it detaches the probe, but a CPU may still be
/// running it: the owner must call [`synchronize_unregister`] after the last drop, before
/// the probe's code or data go away.
pub(super) struct Registration {
    tp: Tracepoint,
    probe: Probe,
}

impl Registration {
    /// Attaches `probe` to `tp`, which must be the tracepoint named `probe.name()`
    /// (checked: `EINVAL` otherwise).
    pub(super) fn new(tp: Tracepoint, probe: Probe) -> Result<Self> {
        // SAFETY: `tp` points to a live tracepoint (type invariant); its name is a
        // NUL-terminated string in the kernel image.
        let name = unsafe { CStr::from_char_ptr((*tp.0.as_ptr()).name) };
        if name != probe.name {
            return Err(EINVAL);
        }
        // SAFETY: `tp` is a live tracepoint (type invariant); `probe.func` has the
        // prototype this tracepoint calls (`Probe` invariant, names checked above); its
        // `data` is NULL and unused. The probe stays callable until it is unregistered and
        // `synchronize_unregister()` returned, which the owner of the `Registration`
        // guarantees.
        let ret = unsafe {
            bindings::tracepoint_probe_register(tp.0.as_ptr(), probe.func, core::ptr::null_mut())
        };
        kernel::error::to_result(ret)?;
        Ok(Self { tp, probe })
    }
}

impl Drop for Registration {
    fn drop(&mut self) {
        // SAFETY: `(tp, func, NULL)` is exactly what `new` registered.
        let ret = unsafe {
            bindings::tracepoint_probe_unregister(
                self.tp.0.as_ptr(),
                self.probe.func,
                core::ptr::null_mut(),
            )
        };
        if ret != 0 {
            pr_err!(
                "unregistering the {} probe failed: {}\n",
                self.probe.name.to_str().unwrap_or("?"),
                ret
            );
        }
    }
}

/// Waits until no CPU runs a probe that was unregistered before the call.
///
/// This is `tracepoint_synchronize_unregister()` of include/linux/tracepoint.h, a
/// `static inline` with no symbol: `synchronize_rcu_tasks_trace()` (itself an inline
/// `synchronize_srcu(&rcu_tasks_trace_srcu_struct)`), then
/// `synchronize_srcu(&tracepoint_srcu)`, the SRCU-fast domain tracepoints call their probes
/// in. What that inline waits for has changed between kernel versions (earlier kernels
/// called probes under `rcu_read_lock_sched()` and waited with `synchronize_rcu()`), so a
/// `synchronize_rcu()` follows as well: it costs a grace period at unload only. Sleeps:
/// process context only.
pub(super) fn synchronize_unregister() {
    // SAFETY: Both are static `srcu_struct`s the kernel defines and initialises
    // (kernel/rcu/tasks.h, kernel/tracepoint.c) and exports; `synchronize_srcu()` and
    // `synchronize_rcu()` only need process context, which module init and exit are.
    unsafe {
        bindings::synchronize_srcu(&raw mut bindings::rcu_tasks_trace_srcu_struct);
        bindings::synchronize_srcu(&raw mut bindings::tracepoint_srcu);
        bindings::synchronize_rcu();
    }
}

/// What the probes read from a `struct bdi_writeback`.
pub(super) struct WbInfo {
    /// The slot key.
    pub(super) key: SlotKey,
    /// `bdi->capabilities & BDI_CAP_STRICTLIMIT`.
    pub(super) strictlimit: bool,
    bdi: *const bindings::backing_dev_info,
}

impl WbInfo {
    /// Reads `wb`.
    ///
    /// # Safety
    ///
    /// `wb` points to a live `struct bdi_writeback` whose `bdi` is live for the whole
    /// call; the `wb` a writeback tracepoint passes its probes is.
    pub(super) unsafe fn read(wb: *mut bindings::bdi_writeback) -> Self {
        // SAFETY: `wb` is live (caller's guarantee); `bdi` is set at init and never changes.
        let bdi = unsafe { (*wb).bdi };
        // SAFETY: `bdi` is live (caller's guarantee); `id` is set at registration.
        let bdi_id = unsafe { (*bdi).id };
        // SAFETY: `wb` and `bdi` are live (caller's guarantee).
        let memcg_id = unsafe { memcg_id(wb, bdi) };
        // SAFETY: `capabilities` is a field of the live `bdi`; sysfs may change it at any
        // time (`strict_limit`), so it is read atomically.
        let caps = unsafe { Atomic::from_ptr(&raw mut (*bdi).capabilities) }.load(Relaxed);
        Self {
            key: SlotKey { bdi_id, memcg_id },
            strictlimit: caps & BDI_CAP_STRICTLIMIT != 0,
            bdi,
        }
    }

    /// `bdi_dev_name(bdi)`: the bdi's `dev_name`, `(unknown)` while it has no device.
    ///
    /// # Safety
    ///
    /// The `bdi` of the `wb` given to [`Self::read`] is still live.
    pub(super) unsafe fn name(&self) -> Name {
        let bdi = self.bdi.cast_mut();
        // SAFETY: `dev` is a field of the live `bdi` (caller's guarantee);
        // `bdi_unregister()` may clear it concurrently, hence the atomic read.
        let dev = unsafe { Atomic::from_ptr(&raw mut (*bdi).dev) }.load(Relaxed);
        if dev.is_null() {
            return Name::sanitize(&[]);
        }
        let mut raw = [0u8; NAME_LEN];
        // SAFETY: `dev_name` is a `char[NAME_LEN]` field of the live `bdi`, written once at
        // registration.
        let src = unsafe { &raw const (*bdi).dev_name }.cast::<u8>();
        for (i, b) in raw.iter_mut().enumerate() {
            // SAFETY: `i < NAME_LEN`, the size of the array `src` points to.
            *b = unsafe { src.add(i).read_volatile() };
            if *b == 0 {
                break;
            }
        }
        Name::sanitize(&raw)
    }
}

/// A reference on `wb` for a sleep's entry: `wb_get()` for a cgroup wb (which holds its bdi
/// until it is released), `bdi_get()` for a bdi's root wb (which lives as long as its bdi).
///
/// # Safety
///
/// `wb` points to a live `struct bdi_writeback`: the one a `balance_dirty_pages` event
/// passes, whose caller holds a reference for the whole probe call.
pub(super) unsafe fn pin(wb: *mut bindings::bdi_writeback) {
    // SAFETY: `wb` is live (caller's guarantee); taking a reference on a wb or bdi that
    // already has one only increments a counter.
    unsafe { wbstall_wb_pin(wb.cast()) }
}

/// Drops the reference [`pin`] took, unless it is the last reference of a root wb's bdi:
/// that one's `bdi_put()` would free the bdi (`release_bdi()`: `wb_exit()`'s
/// `percpu_counter_destroy_many()` takes a `spinlock_t`, then `kfree()`), which may sleep on
/// `PREEMPT_RT`, and the probes that give references back run with preemption off
/// (`__schedule()`) or under a mapping's `i_pages` lock. Returns whether it dropped it; if not,
/// the reference is the caller's to hand to [`put_last`] from process context. A cgroup wb's
/// last `wb_put()` only queues its release work (`cgwb_release()`), which any context may.
///
/// # Safety
///
/// `wb` was given to [`pin`], and this is the one call that gives that reference back.
pub(super) unsafe fn unpin(wb: *mut bindings::bdi_writeback) -> bool {
    // SAFETY: The reference taken by `pin` keeps `wb` (and its bdi) live until here
    // (caller's guarantee).
    unsafe { wbstall_wb_unpin(wb.cast()) }
}

/// Drops the last reference of `wb`'s bdi that [`unpin`] kept: frees the bdi. May sleep.
///
/// # Safety
///
/// `wb` is a root wb whose reference [`unpin`] kept (it returned `false`), given here once,
/// from process context with no lock held.
pub(super) unsafe fn put_last(wb: *mut bindings::bdi_writeback) {
    // SAFETY: The kept reference keeps `wb`'s bdi live until this call drops it (caller's
    // guarantee); `bdi_put()` may sleep, which the caller's context allows.
    unsafe { wbstall_put_last(wb.cast()) }
}

/// Queues the work item that gives the table's graves back (`wbstall_graves_dig()`): from any
/// context, never waiting (`queue_work()`'s pool lock is a raw spinlock).
pub(super) fn graves_wake() {
    // SAFETY: Queues the module's static work item; no precondition.
    unsafe { wbstall_graves_wake() }
}

/// Waits until the graves' work item is neither queued nor running. Sleeps: process context
/// only (module unload).
pub(super) fn graves_flush() {
    // SAFETY: Flushes the module's static work item; the caller is in process context.
    unsafe { wbstall_graves_flush() }
}

/// `wb_stat_sum(wb, item)`: the per-wb counter summed exactly. `__percpu_counter_sum()`
/// takes the counter's raw spinlock (interrupts saved) while it adds the CPUs' deltas, so no
/// fold of a CPU's delta into `count` is seen half done; adds that race with the sum only
/// make it a value the counter had at some time during the call.
///
/// # Safety
///
/// `wb` points to a live `struct bdi_writeback`.
unsafe fn stat_sum(wb: *mut bindings::bdi_writeback, item: Stat) -> i64 {
    let item = match item {
        Stat::Writeback => bindings::wb_stat_item_WB_WRITEBACK,
        Stat::Written => bindings::wb_stat_item_WB_WRITTEN,
    };
    // SAFETY: `wb` is live (caller's guarantee), so its `stat` counters are initialised
    // and not yet destroyed (`wb_exit()` runs only once the last reference is gone); a probe
    // never runs with that counter's lock held (the lock is only held inside the counter's
    // own functions, which fire no tracepoint).
    unsafe { bindings::__percpu_counter_sum(&raw mut (*wb).stat[item as usize]) }
}

/// What a sleep's class needs of `wb` at its start ([`WbFacts::at_start`] says in which
/// order the counters are read, and why).
///
/// # Safety
///
/// `wb` points to a live `struct bdi_writeback`.
pub(super) unsafe fn facts_at_start(wb: *mut bindings::bdi_writeback) -> WbFacts {
    // SAFETY: `wb` is live (caller's guarantee).
    WbFacts::at_start(|item| unsafe { stat_sum(wb, item) })
}

/// The same at its end ([`WbFacts::at_end`]).
///
/// # Safety
///
/// `wb` points to a live `struct bdi_writeback`.
pub(super) unsafe fn facts_at_end(wb: *mut bindings::bdi_writeback) -> WbFacts {
    // SAFETY: `wb` is live (caller's guarantee).
    WbFacts::at_end(|item| unsafe { stat_sum(wb, item) })
}

/// The current task's voluntary call into `__schedule()`: its state and `in_iowait`.
///
/// # Safety
///
/// Called from the `sched_entry_tp` probe, in the context of the task that calls
/// `__schedule()` (`task` is `current`), before it is dequeued.
pub(super) unsafe fn voluntary(task: *mut bindings::task_struct) -> SchedEntry {
    // SAFETY: `task` is `current` (caller's guarantee); `__state` is written by others
    // (`try_to_wake_up()`) with `WRITE_ONCE()`, hence the atomic read.
    let state = unsafe { Atomic::from_ptr(&raw mut (*task).__state) }.load(Relaxed);
    // SAFETY: `in_iowait` lies in the task_struct word of bits that are "unserialized,
    // strictly 'current'" (include/linux/sched.h). The one bit of it that another CPU
    // writes, `sched_remote_wakeup` (`ttwu_queue_wakelist()`), is written only while the
    // task is dequeued and before it runs again; `current`, here before `__schedule()` has
    // dequeued it, is the word's only writer, and this read is its own.
    let iowait = unsafe { bindings::task_struct::in_iowait_raw(task) } != 0;
    let state = match state {
        bindings::TASK_RUNNING => TaskState::Running,
        bindings::TASK_KILLABLE => TaskState::Killable,
        _ => TaskState::Other,
    };
    SchedEntry::Voluntary { state, iowait }
}

const _: () = assert!(NAME_LEN == 64);

/// The memcg id of `wb`: 0 for the bdi's root wb, else `wb->memcg_css->id`.
///
/// # Safety
///
/// `wb` and `bdi` are live, and `bdi == wb->bdi`.
#[cfg(CONFIG_CGROUP_WRITEBACK)]
unsafe fn memcg_id(
    wb: *const bindings::bdi_writeback,
    bdi: *const bindings::backing_dev_info,
) -> u32 {
    // SAFETY: `bdi` is live (caller's guarantee); only the field's address is taken.
    let root = unsafe { &raw const (*bdi).wb };
    if core::ptr::eq(wb, root) {
        return 0;
    }
    // SAFETY: `wb` is live (caller's guarantee); a cgroup wb holds its `memcg_css` from
    // creation to release.
    let css = unsafe { (*wb).memcg_css };
    if css.is_null() {
        return 0;
    }
    // SAFETY: `css` is live while `wb` holds it; `id` is set when the css is created.
    let id = unsafe { (*css).id };
    // A negative id (-1: not yet assigned) cannot be a wb's; show it as u32::MAX, not 0.
    u32::try_from(id).unwrap_or(u32::MAX)
}

/// Without cgroup writeback every wb is its bdi's root wb.
///
/// # Safety
///
/// None needed; `unsafe` only to match the `CONFIG_CGROUP_WRITEBACK` version.
#[cfg(not(CONFIG_CGROUP_WRITEBACK))]
unsafe fn memcg_id(
    _wb: *const bindings::bdi_writeback,
    _bdi: *const bindings::backing_dev_info,
) -> u32 {
    0
}

/// `dtc->gdtc != NULL`: `dtc` is a memcg domain's.
///
/// # Safety
///
/// `dtc` points to a live `struct dirty_throttle_control`.
#[cfg(CONFIG_CGROUP_WRITEBACK)]
pub(super) unsafe fn dtc_is_memcg(dtc: *const bindings::dirty_throttle_control) -> bool {
    // SAFETY: `dtc` is live (caller's guarantee).
    !unsafe { (*dtc).gdtc }.is_null()
}

/// Without cgroup writeback every dtc is the global one.
///
/// # Safety
///
/// None needed; `unsafe` only to match the `CONFIG_CGROUP_WRITEBACK` version.
#[cfg(not(CONFIG_CGROUP_WRITEBACK))]
pub(super) unsafe fn dtc_is_memcg(_dtc: *const bindings::dirty_throttle_control) -> bool {
    false
}

/// `work->reason`, read by `helpers.c`, which is compiled against the definition of the
/// private `struct wb_writeback_work` copied out of the kernel tree's own
/// fs/fs-writeback.c at build time (`Kbuild`): a layout change is picked up, and a struct
/// that lost its `reason` fails the build.
///
/// # Safety
///
/// `work` points to a live `struct wb_writeback_work` (the one a `writeback_start` event
/// passes).
pub(super) unsafe fn work_reason(work: *const c_void) -> u32 {
    // SAFETY: `work` is live (caller's guarantee); `reason` is not changed while the work
    // runs.
    unsafe { wbstall_work_reason(work) }
}
