// SPDX-License-Identifier: GPL-2.0
/*
 * The module's C side: what probes/ffi.rs cannot do through the Rust bindings.
 *
 * - A reference on a wb for each sleep in progress (wbstall_wb_pin/_unpin): wb_get(),
 *   wb_put(), bdi_get() are inline functions of include/linux/backing-dev.h.
 * - work->reason of the private struct wb_writeback_work (wbstall_work_reason): its
 *   definition is copied out of the kernel tree's own fs/fs-writeback.c at build time
 *   (wb_writeback_work.h, made by Kbuild), so the field is found wherever that tree puts it,
 *   and a tree whose struct lost it fails to build.
 */

#include <linux/backing-dev.h>
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

/* Called with a reference on @wb held by the caller of balance_dirty_pages(). */
void wbstall_wb_pin(struct bdi_writeback *wb)
{
	if (wbstall_is_root(wb))
		bdi_get(wb->bdi);
	else
		wb_get(wb);
}

/*
 * Drops what wbstall_wb_pin() took. A last reference queues the cgroup wb's release work
 * (cgwb_release()) or frees the bdi (release_bdi()); both are safe in any context that does
 * not hold a runqueue lock, which none of the module's probes does.
 */
void wbstall_wb_unpin(struct bdi_writeback *wb)
{
	if (wbstall_is_root(wb))
		bdi_put(wb->bdi);
	else
		wb_put(wb);
}

unsigned int wbstall_work_reason(const struct wb_writeback_work *work)
{
	return work->reason;
}
