// SPDX-License-Identifier: GPL-2.0
/*
 * The module's C side: what probes/ffi.rs cannot do through the Rust bindings.
 *
 * - A reference on a wb for each sleep in progress (wbstall_wb_pin/_unpin): wb_get(),
 *   wb_put(), bdi_get() are inline functions of include/linux/backing-dev.h; and the last
 *   reference of a bdi given back from process context, by a work item
 *   (wbstall_put_last, wbstall_graves_wake/_flush).
 * - work->reason of the private struct wb_writeback_work (wbstall_work_reason): its
 *   definition is copied out of the kernel tree's own fs/fs-writeback.c at build time
 *   (wb_writeback_work.h, made by Kbuild), so the field is found wherever that tree puts it,
 *   and a tree whose struct lost it fails to build.
 */

#include <linux/backing-dev.h>
#include <linux/refcount.h>
#include <linux/workqueue.h>
#include <linux/writeback.h>

#include "helpers.h"
#include "wb_writeback_work.h"

/*
 * A cgroup wb holds a reference on its bdi until it is released (cgwb_release_workfn()
 * calls bdi_put()); a bdi's root wb is part of the bdi and lives as long as it does.
 */
static bool wbstall_is_root(struct bdi_writeback *wb)
{
	return wb == &wb->bdi->wb;
}

/*
 * Takes a reference on @wb: bdi_get() on its bdi for a root wb, wb_get() for a cgroup wb.
 * The caller holds one already (the tracepoint's caller's), so this only raises a count:
 * safe in any context.
 */
void wbstall_wb_pin(struct bdi_writeback *wb)
{
	if (wbstall_is_root(wb))
		bdi_get(wb->bdi);
	else
		wb_get(wb);
}

/*
 * Drops what wbstall_wb_pin() took, in the probe that gives it back (inside __schedule()
 * with preemption off, or under a mapping's i_pages lock with interrupts off).
 *
 * - A cgroup wb: wb_put(). Its last reference calls cgwb_release(), which only
 *   queue_work()s the release (its pool lock is a raw spinlock): fine in any context,
 *   PREEMPT_RT included.
 * - A root wb: its bdi's count, dropped only if it is not the last (refcount_dec_not_one()).
 *   The last reference's bdi_put() runs release_bdi(): wb_exit() destroys the wb's
 *   percpu counters (percpu_counter_destroy_many() takes percpu_counters_lock, a
 *   spinlock_t), then kfree(): on PREEMPT_RT both may sleep, invalid with preemption off.
 *   That reference is not dropped here: false is returned, and the caller hands @wb to
 *   wbstall_put_last() from process context (the table's grave of the bdi's slot, then
 *   wbstall_graves_wake()'s work item).
 *
 * Returns whether the reference was dropped.
 */
bool wbstall_wb_unpin(struct bdi_writeback *wb)
{
	if (!wbstall_is_root(wb)) {
		wb_put(wb);
		return true;
	}
	return refcount_dec_not_one(&wb->bdi->refcnt.refcount);
}

/* The last reference of @wb's bdi, which wbstall_wb_unpin() kept: process context only. */
void wbstall_put_last(struct bdi_writeback *wb)
{
	might_sleep();
	bdi_put(wb->bdi);
}

/*
 * The work item that gives the graves' references back: the Rust side's
 * wbstall_graves_dig() walks the table's graves and calls wbstall_put_last() on each.
 */
static void wbstall_graves_workfn(struct work_struct *work)
{
	wbstall_graves_dig();
}

static DECLARE_WORK(wbstall_graves_work, wbstall_graves_workfn);

/*
 * Queues the work item: from any context (queue_work()'s pool lock is a raw spinlock;
 * this never waits). A queued work item is not queued twice; each run digs every grave.
 */
void wbstall_graves_wake(void)
{
	queue_work(system_wq, &wbstall_graves_work);
}

/* Waits until no grave is being dug nor left queued: module unload, process context. */
void wbstall_graves_flush(void)
{
	flush_work(&wbstall_graves_work);
}

unsigned int wbstall_work_reason(const struct wb_writeback_work *work)
{
	return work->reason;
}

#if IS_ENABLED(CONFIG_KUNIT)
/*
 * For the KUnit suite (tests.rs): a bdi of the test's own (allocated, never registered), its
 * root wb pinned as a probe pins it, and the test's own reference dropped, so that the pin
 * holds the bdi's last reference. NULL if the allocation failed.
 */
struct bdi_writeback *wbstall_test_last_pin(void)
{
	struct backing_dev_info *bdi = bdi_alloc(NUMA_NO_NODE);

	if (!bdi)
		return NULL;
	wbstall_wb_pin(&bdi->wb);
	bdi_put(bdi);
	return &bdi->wb;
}

/* wbstall_wb_unpin() with preemption off, as in __schedule(). */
bool wbstall_test_unpin_atomic(struct bdi_writeback *wb)
{
	bool dropped;

	preempt_disable();
	dropped = wbstall_wb_unpin(wb);
	preempt_enable();
	return dropped;
}

/* The references @wb's bdi has. */
unsigned int wbstall_test_refs(struct bdi_writeback *wb)
{
	return kref_read(&wb->bdi->refcnt);
}
#endif
