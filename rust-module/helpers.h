/* SPDX-License-Identifier: GPL-2.0 */
/*
 * What the Rust side of wbstall (probes/ffi.rs) calls in helpers.c: kernel
 * interfaces that are inline functions or private structs, so not in the Rust bindings.
 */
#ifndef WBSTALL_HELPERS_H
#define WBSTALL_HELPERS_H

struct bdi_writeback;
struct wb_writeback_work;

void wbstall_wb_pin(struct bdi_writeback *wb);
void wbstall_wb_unpin(struct bdi_writeback *wb);
unsigned int wbstall_work_reason(const struct wb_writeback_work *work);

#endif /* WBSTALL_HELPERS_H */
