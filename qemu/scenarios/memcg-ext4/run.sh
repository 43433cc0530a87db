# SPDX-License-Identifier: GPL-2.0
# Scenario memcg-ext4: the fio job on ext4 (the guest's null_blk disk), with
# the writers in a cgroup v2 whose dirty limits bind while the global ones do
# not (seed 001, case b), and nothing but the kernel's own writeback logic
# cleaning pages: scenario.toml says how the file set and memory.max are
# chosen (fio's invalidate=0: no fadvise flushes of its own).
#
# The global domain must never throttle or start writeback: the memcg's
# dirty set (about 20% of memory.max) stays far below the global background
# threshold of a 2 GiB guest (184 MB). Reclaim at memory.max drops the clean
# pages the flusher left; were it to meet dirty pages and wake the flusher
# (WB_REASON_VMSCAN), that writeback would hide a missing start, and the run
# is left out (results/problems.rs).
# Sourced by /init; defines scenario_run.

scenario_run() {
	memcg_run
}

# memcg_run: the memcg scenarios' body (memcg-stale-stats runs it too).
memcg_run() {
	local cg=/sys/fs/cgroup/wbstall
	ext4_mount
	echo +memory >/sys/fs/cgroup/cgroup.subtree_control || fail "cannot enable the memory controller"
	mkdir -p "$cg"
	need memcg_max >"$cg/memory.max" || fail "cannot set memory.max"
	echo memcg >/tmp/wb_domain
	emit writer-domain /tmp/wb_domain
	ext4_fio "$cg"
	emit memcg-events "$cg/memory.events"
	emit memcg-stat "$cg/memory.stat"
	emit_cmd memcg-limits memcg_limits "$cg"
	collect "$EXT4_BDI"
}

memcg_limits() {
	local f
	for f in memory.max memory.high memory.current memory.peak; do
		[ -f "$1/$f" ] && echo "$f=$(cat "$1/$f")"
	done
}
