# SPDX-License-Identifier: GPL-2.0
# Scenario memcg-ext4: the fio job on ext4 (a virtio-blk disk the host made),
# with the writers in a cgroup v2 (seed 001, case b).
#
# The memcg's dirty limits must bind while the global ones do not, and the
# cgroup must stay clear of memory.max: reclaim at memory.max wakes the flusher
# (WB_REASON_VMSCAN), which would hide a missing start. So the file set
# (numjobs x size, overwritten in place by the time-based job) is kept at half
# of memory.max (wbstall.memcg_max): the memcg's dirtyable memory is then about
# memory.max and its dirty threshold about 20% of it, below the file set. The
# file set is also well below the global background threshold, so global
# nr_dirty can never pass it: otherwise the global check, which every variant
# has, starts writeback and hides the stall (seen with a 256M file set in a
# 2 GiB guest, where that threshold is 184 MB).

scenario_run() {
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
