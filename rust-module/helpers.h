/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the Rust side of wbstall (probes/ffi.rs) calls in helpers.c: kernel
 * interfaces that are inline functions or private structs, so not in the Rust bindings,
 * and the work item that gives back a bdi's last reference; and what helpers.c calls on
 * the Rust side (wbstall_graves_dig).
 */
#ifndef WBSTALL_HELPERS_H
#define WBSTALL_HELPERS_H

#include <linux/types.h>

struct bdi_writeback;
struct wb_writeback_work;

void wbstall_wb_pin(struct bdi_writeback *wb);
bool wbstall_wb_unpin(struct bdi_writeback *wb);
void wbstall_put_last(struct bdi_writeback *wb);
void wbstall_graves_wake(void);
void wbstall_graves_flush(void);
unsigned int wbstall_work_reason(const struct wb_writeback_work *work);

/* KUnit only (CONFIG_KUNIT): a bdi whose last reference is a pin, unpinned atomically. */
struct bdi_writeback *wbstall_test_last_pin(void);
bool wbstall_test_unpin_atomic(struct bdi_writeback *wb);
unsigned int wbstall_test_refs(struct bdi_writeback *wb);

/* Rust (probes.rs): gives back every reference the table's graves hold. */
void wbstall_graves_dig(void);

#endif /* WBSTALL_HELPERS_H */
