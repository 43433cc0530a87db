// SPDX-License-Identifier: GPL-2.0

//! The tracepoint probes and their registration.
//!
//! Each probe turns its kernel arguments into plain values (`mod ffi`) and hands them to
//! [`Table`]'s `on_*` functions, which hold all the logic. The kernel is not changed: the
//! tracepoints are the ones `include/trace/events/writeback.h` already defines, found by name
//! with `for_each_kernel_tracepoint()`.
//!
//! Context: in 7.3 a tracepoint calls its probes inside an SRCU-fast read section
//! (`__DECLARE_TRACE`), and `writeback_start` fires under `wb->list_lock`, so a probe must not
//! sleep, allocate or wait for another CPU; `Table` keeps to that.

use crate::table::{
    Domain,
    Snapshot,
    Table,
    ThrottleEvent, //
};
use kernel::{
    bindings,
    prelude::*, //
};

/// Raw kernel access, each piece wrapped in a small function.
mod ffi {
    use crate::table::{
        Name,
        SlotKey,
        SwitchOut,
        WbFacts,
        NAME_LEN, //
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

    /// `BDI_CAP_STRICTLIMIT` of include/linux/backing-dev.h (a `#define`, so not in the
    /// bindings).
    const BDI_CAP_STRICTLIMIT: u32 = 1 << 1;

    /// The current `jiffies` (`READ_ONCE(jiffies)`).
    pub(crate) fn jiffies() -> Jiffies {
        // SAFETY: `jiffies` is a kernel global, valid for the whole life of the kernel; the tick
        // updates it, which is why it is read atomically here.
        unsafe { Atomic::from_ptr(&raw mut bindings::jiffies) }.load(Relaxed)
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
                bindings::tracepoint_probe_register(
                    tp.0.as_ptr(),
                    probe.func,
                    core::ptr::null_mut(),
                )
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

    /// What a sleep's class needs of `wb`: `WB_writeback_running` and the `WB_WRITTEN` count.
    ///
    /// # Safety
    ///
    /// `wb` points to a live `struct bdi_writeback`.
    pub(super) unsafe fn wb_facts(wb: *mut bindings::bdi_writeback) -> WbFacts {
        // SAFETY: `state` is a field of the live `wb` (caller's guarantee), changed with atomic
        // bitops.
        let state = unsafe { Atomic::from_ptr(&raw mut (*wb).state) }.load(Relaxed);
        let running_bit = bindings::wb_state_WB_writeback_running;
        // SAFETY: `wb` is live (caller's guarantee); `stat` is initialised with the wb.
        let written =
            unsafe { percpu_sum(&raw mut (*wb).stat[bindings::wb_stat_item_WB_WRITTEN as usize]) };
        WbFacts {
            running: state & (1 << running_bit) != 0,
            written,
        }
    }

    /// `percpu_counter_sum()` without its lock: the folded `count` plus every possible CPU's
    /// delta. A fold in progress (`count` raised, the CPU's delta not yet lowered) can be seen
    /// half done, so the sum is exact except while the counter is being added to; a probe may
    /// not take the counter's lock.
    ///
    /// # Safety
    ///
    /// `fbc` points to a live, initialised `struct percpu_counter`.
    unsafe fn percpu_sum(fbc: *mut bindings::percpu_counter) -> i64 {
        // SAFETY: `count` is a field of the live counter (caller's guarantee); other CPUs change
        // it under the counter's lock, hence the atomic read.
        let mut sum = unsafe { Atomic::from_ptr(&raw mut (*fbc).count) }.load(Relaxed);
        // SAFETY: `counters` is set at init and not changed while the counter lives.
        let counters = unsafe { (*fbc).counters };
        // SAFETY: `nr_cpu_ids` is set at boot and read-only afterwards.
        let nr = unsafe { bindings::nr_cpu_ids } as usize;
        let offsets = &raw const bindings::__per_cpu_offset;
        // SAFETY: Only the array's length is read; the array is a kernel global.
        let nr_offsets = unsafe { (*offsets).len() };
        let possible = &raw const bindings::__cpu_possible_mask;
        for cpu in 0..nr.min(nr_offsets) {
            let bits = c_ulong::BITS as usize;
            // SAFETY: `__cpu_possible_mask` is fixed at boot, before any module loads; its
            // `bits` hold `NR_CPUS` bits and `cpu < nr_cpu_ids <= NR_CPUS`.
            let word = unsafe { (*possible).bits.get(cpu / bits).copied() }.unwrap_or(0);
            if word >> (cpu % bits) & 1 == 0 {
                continue;
            }
            // SAFETY: `__per_cpu_offset` is set at boot, before any module loads, and read-only
            // afterwards; `cpu < nr_offsets`.
            let offset = unsafe { (*offsets)[cpu] };
            // `per_cpu_ptr(counters, cpu)`: the per-CPU base plus the CPU's offset.
            let p = (counters as usize).wrapping_add(offset) as *mut i32;
            // SAFETY: `cpu` is possible, so `p` is its copy of the counter's `s32`, allocated
            // with the counter; its CPU changes it, hence the atomic read.
            sum += i64::from(unsafe { Atomic::from_ptr(p) }.load(Relaxed));
        }
        sum
    }

    /// `sched_switch`'s view of how `prev` left the CPU.
    ///
    /// # Safety
    ///
    /// `prev` points to the live task being switched out.
    pub(super) unsafe fn switch_out(
        preempt: bool,
        prev: *mut bindings::task_struct,
        prev_state: c_uint,
    ) -> SwitchOut {
        if preempt || prev_state == 0 {
            return SwitchOut::Runnable;
        }
        // SAFETY: `prev` is live (caller's guarantee); `in_iowait` is written by the task itself,
        // which is being switched out by this CPU.
        let iowait = unsafe { bindings::task_struct::in_iowait_raw(prev) } != 0;
        if prev_state == bindings::TASK_KILLABLE && iowait {
            SwitchOut::IoSleep {
                // SAFETY: As above: `__schedule()` counted this switch in `nvcsw` before the
                // tracepoint, on this CPU.
                nvcsw: unsafe { nvcsw(prev) },
            }
        } else {
            SwitchOut::Blocked
        }
    }

    /// The voluntary context switches of `task` (`task->nvcsw`).
    ///
    /// # Safety
    ///
    /// `task` points to a live task that is `current` or being switched by this CPU: only the
    /// scheduler changes `nvcsw`, on the task's CPU, under its runqueue lock.
    pub(super) unsafe fn nvcsw(task: *mut bindings::task_struct) -> u64 {
        // SAFETY: `nvcsw` is a field of the live task (caller's guarantee), read atomically as
        // the scheduler may change it on another CPU once the task runs there.
        unsafe { Atomic::from_ptr(&raw mut (*task).nvcsw) }.load(Relaxed) as u64
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

    /// The leading fields of `struct wb_writeback_work`, up to `reason`.
    ///
    /// The struct is private to fs/fs-writeback.c (so not in the bindings), and the
    /// `writeback_start` tracepoint passes nothing else that says why the flusher runs; the
    /// trace event itself reads `work->reason`. Linux 7.3 defines it as:
    ///
    /// ```c
    /// struct wb_writeback_work {
    ///         long nr_pages;
    ///         struct super_block *sb;
    ///         enum writeback_sync_modes sync_mode;
    ///         unsigned int tagged_writepages:1;
    ///         unsigned int for_kupdate:1;
    ///         unsigned int range_cyclic:1;
    ///         unsigned int for_background:1;
    ///         unsigned int for_sync:1;
    ///         unsigned int auto_free:1;
    ///         enum wb_reason reason;
    ///         ...
    /// };
    /// ```
    ///
    /// The six one-bit fields share one `unsigned int`. Only this prefix is mirrored and only
    /// `reason` is read; a value the module does not know counts as `work_other`, so a layout
    /// change shows up as a jump in `work_other`, not as a crash. The alternatives were worse:
    /// reading the ftrace ring buffer means a trace instance and parsing event records, and
    /// `writeback_exec`/`writeback_queue` pass the same private struct.
    #[repr(C)]
    struct WbWritebackWorkPrefix {
        nr_pages: c_long,
        sb: *mut c_void,
        sync_mode: bindings::writeback_sync_modes,
        flags: c_uint,
        reason: bindings::wb_reason,
    }

    // Both enums are `unsigned int` in C, as the mirror assumes.
    const _: () = assert!(size_of::<bindings::writeback_sync_modes>() == size_of::<c_uint>());
    const _: () = assert!(size_of::<bindings::wb_reason>() == size_of::<c_uint>());
    const _: () = assert!(core::mem::offset_of!(WbWritebackWorkPrefix, reason) == 24);

    /// `work->reason`.
    ///
    /// # Safety
    ///
    /// `work` points to a live `struct wb_writeback_work` (the one a `writeback_start` event
    /// passes).
    pub(super) unsafe fn work_reason(work: *const c_void) -> u32 {
        let work = work.cast::<WbWritebackWorkPrefix>();
        // SAFETY: `work` is live (caller's guarantee) and starts with the fields mirrored by
        // `WbWritebackWorkPrefix`; `reason` is not changed while the work runs.
        unsafe { (*work).reason }
    }
}

pub(crate) use ffi::jiffies;

// `table.rs` names the `enum wb_reason` values it counts without `bindings::`; they must match.
const _: () = {
    assert!(crate::table::WB_REASON_BACKGROUND == bindings::wb_reason_WB_REASON_BACKGROUND);
    assert!(crate::table::WB_REASON_SYNC == bindings::wb_reason_WB_REASON_SYNC);
    assert!(crate::table::WB_REASON_PERIODIC == bindings::wb_reason_WB_REASON_PERIODIC);
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

/// The table every probe updates.
pub(crate) static TABLE: Table = Table::new(bindings::CONFIG_HZ);

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
        // SAFETY: The tracepoint passes a live `wb` (caller's guarantee).
        facts: unsafe { ffi::wb_facts(wb) },
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
            pause_ms: crate::table::signed_jiffies_to_ms(pause as i64, TABLE.hz()),
        },
    };
    let task = kernel::task::Task::current_raw();
    // SAFETY: `task` is `current`, live while its probe runs.
    let nvcsw = unsafe { ffi::nvcsw(task) };
    TABLE.on_throttle(
        info.key,
        // SAFETY: The bdi is live for the whole probe call.
        || unsafe { info.name() },
        task as u64,
        nvcsw,
        wb as u64,
        &ev,
    );
}

/// `sched_switch(preempt, prev, next, prev_state)`: the end of a throttle sleep is its task's
/// switch back in. Every context switch comes here; with no sleep in progress the table returns
/// after one load.
///
/// # Safety
///
/// Called by the tracepoint only: `prev` and `next` are live.
unsafe extern "C" fn probe_sched_switch(
    _data: *mut c_void,
    preempt: bool,
    prev: *mut bindings::task_struct,
    next: *mut bindings::task_struct,
    prev_state: c_uint,
) {
    // SAFETY: The tracepoint passes the live task being switched out (caller's guarantee).
    let how = unsafe { ffi::switch_out(preempt, prev, prev_state) };
    TABLE.on_switch_out(prev as u64, how, ffi::jiffies());
    TABLE.on_switch_in(next as u64, |wb| {
        // SAFETY: The handle is the `wb` that `probe_balance_dirty_pages` saw for `next`, whose
        // entry is `ASLEEP`: `next` blocked in `io_schedule_timeout()` right after that event
        // (`TASK_KILLABLE`, `in_iowait`, not preempted), so it is still inside
        // `balance_dirty_pages()`, whose caller holds a reference on `wb` until it returns, and
        // it cannot return before this switch in. (The one way out of `balance_dirty_pages()`
        // after the event without that sleep is `BDP_ASYNC`, for `IOCB_NOWAIT` writes, which
        // return `-EAGAIN` to their caller without blocking; the entry is then dropped at the
        // task's next block unless that is a killable io sleep, its first voluntary switch
        // since the event and within `ARM_MS` of it. Then the wb the entry names would still
        // have to be released in between, which needs its memcg offlined or its bdi
        // unregistered within that window. docs/detectors.md names this.)
        unsafe { ffi::wb_facts(wb as *mut bindings::bdi_writeback) }
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
    TABLE.on_writeback_start(
        info.key,
        // SAFETY: The bdi is live for the whole probe call.
        || unsafe { info.name() },
        info.strictlimit,
        reason,
    );
}

/// The probes, with the tracepoints they attach to.
const PROBES: [ffi::Probe; 4] = [
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
    // SAFETY: `probe_sched_switch` takes `data` and `TP_PROTO(bool preempt, struct task_struct
    // *prev, struct task_struct *next, unsigned int prev_state)` of `TRACE_EVENT(sched_switch)`
    // (include/trace/events/sched.h).
    unsafe { ffi::Probe::new(c"sched_switch", probe_sched_switch as *mut c_void) },
];

/// The attached probes. Dropping it detaches them and waits until none runs.
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
        for reg in &mut self.regs {
            // Drop unregisters.
            drop(reg.take());
        }
        if attached {
            ffi::synchronize_unregister();
        }
    }
}
