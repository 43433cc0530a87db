# SPDX-License-Identifier: GPL-2.0
# Scenario memcg-flush-cost (issue 45, item 2): wbstall.memcgs memcgs under
# /sys/fs/cgroup/flushcost, each with memory.max and one fio writer of its
# own, all writing at once on ext4 over a timed null_blk disk. What it sends
# (`cargo xtask flush-cost` reads it, xtask/src/tasks/flush_cost.rs):
#   flush-cost-hists  the hist triggers below, read after the writers end;
#   flush-cost-fio    each writer's fio JSON, back to back;
#   flush-cost-cpu    /proc/uptime and /proc/stat's `cpu` line before and after;
#   vmstat-before, vmstat  (reclaim: pgscan_*, pgsteal_*).
# The hist triggers (tracefs's top level: nothing else traces in this boot;
# triggers fire on events that are not enabled, and nothing is kept in the
# ring buffer), each read after the writers end:
#   memcg_flush_stats           keys=force,needs_flush            every check, and the flushes
#   cgroup_rstat_locked         keys=common_pid, fc_ts0 saved     every acquisition of the rstat lock
#   cgroup_rstat_unlock         now - $fc_ts0 -> synthetic fc_hold   the time it was held
#   cgroup_rstat_lock_contended keys=common_pid, fc_tc saved
#   cgroup_rstat_locked         if contended: now - $fc_tc -> synthetic fc_spin   the time spun
#   synthetic/fc_hold, fc_spin  vals=hitcount,ns                  their sums
# The rstat lock is a spinlock taken with interrupts off once per possible CPU
# of a flush (css_rstat_flush), so a task's locked and unlock pair up by pid.
# Sourced by /init; defines scenario_run.

FC_TRACING=/sys/kernel/tracing
FC_EVENTS=$FC_TRACING/events

flush_cost_hists_start() {
	local e=$FC_EVENTS
	if [ ! -d "$e/memcg/memcg_flush_stats" ] || [ ! -d "$e/cgroup/cgroup_rstat_locked" ]; then
		fail "the kernel has no memcg:memcg_flush_stats or cgroup:cgroup_rstat_locked event"
	fi
	# shellcheck disable=SC2016 # $fc_* are the triggers' variables, not the shell's
	if ! { echo 'fc_hold u64 ns' >>"$FC_TRACING/synthetic_events" &&
		echo 'fc_spin u64 ns' >>"$FC_TRACING/synthetic_events" &&
		echo 'hist:keys=common_pid:vals=hitcount,ns' >"$e/synthetic/fc_hold/trigger" &&
		echo 'hist:keys=common_pid:vals=hitcount,ns' >"$e/synthetic/fc_spin/trigger" &&
		echo 'hist:keys=force,needs_flush:vals=hitcount' >"$e/memcg/memcg_flush_stats/trigger" &&
		echo 'hist:keys=common_pid:fc_tc=common_timestamp' >"$e/cgroup/cgroup_rstat_lock_contended/trigger" &&
		echo 'hist:keys=common_pid:vals=hitcount:fc_ts0=common_timestamp' >"$e/cgroup/cgroup_rstat_locked/trigger" &&
		echo 'hist:keys=common_pid:fc_w=common_timestamp-$fc_tc:onmatch(cgroup.cgroup_rstat_lock_contended).trace(fc_spin,$fc_w) if contended == 1' >>"$e/cgroup/cgroup_rstat_locked/trigger" &&
		echo 'hist:keys=common_pid:fc_h=common_timestamp-$fc_ts0:onmatch(cgroup.cgroup_rstat_locked).trace(fc_hold,$fc_h)' >"$e/cgroup/cgroup_rstat_unlock/trigger"; }; then
		fail "cannot attach memcg-flush-cost's hist triggers: $(tail -n 4 "$FC_TRACING/error_log")"
	fi
}

flush_cost_hists() {
	local f
	for f in memcg/memcg_flush_stats cgroup/cgroup_rstat_locked synthetic/fc_hold synthetic/fc_spin; do
		echo "@event $f"
		cat "$FC_EVENTS/$f/hist"
	done
}

flush_cost_cpu() {
	local up
	read -r up _ </proc/uptime
	echo "uptime $up"
	grep '^cpu ' /proc/stat
}

scenario_run() {
	local n i cg size top=/sys/fs/cgroup/flushcost pids="" pid rc=0
	n=$(need memcgs)
	size=$(need size)
	case "$size" in
	*[!0-9]*M | M) fail "wbstall.size=$size: memcg-flush-cost sizes its disk in MiB (NM)" ;;
	*M) ;;
	*) fail "wbstall.size=$size: memcg-flush-cost sizes its disk in MiB (NM)" ;;
	esac
	# The disk holds every writer's file (memory-backed: only what is written
	# takes guest memory), with room for ext4's own.
	null_blk_timed "$(need disk_latency_ms)" "$(need disk_queue_depth)" \
		$((n * ${size%M} + 256))
	ext4_mount
	echo +memory >/sys/fs/cgroup/cgroup.subtree_control || fail "cannot enable the memory controller"
	if ! { mkdir -p "$top" && echo +memory >"$top/cgroup.subtree_control"; }; then
		fail "cannot make $top with the memory controller for its children"
	fi
	for i in $(seq 1 "$n"); do
		cg=$top/m$i
		mkdir -p "$cg" "/mnt/disk/m$i" || fail "cannot make $cg or /mnt/disk/m$i"
		need memcg_max >"$cg/memory.max" || fail "cannot set $cg/memory.max"
	done
	flush_cost_hists_start
	emit vmstat-before /proc/vmstat
	flush_cost_cpu >/tmp/fc-cpu
	phase fio
	for i in $(seq 1 "$n"); do
		# A shell of its own joins the memcg, then becomes fio.
		FC_DIR=/mnt/disk/m$i FC_BS=$(need bs) FC_SIZE=$size FC_RAMP=$(need ramp) \
			FC_RUNTIME=$(need runtime) sh -c 'echo $$ >"$1/cgroup.procs" && exec fio \
			--eta=never --output-format=json --output="/tmp/fc-fio.$2" "$3"' \
			_ "$top/m$i" "$i" "$WB_ROOT/scenarios/memcg-flush-cost/writer.fio" 2>>/tmp/fio.err &
		pids="$pids $!"
	done
	for pid in $pids; do
		wait "$pid" || rc=$?
	done
	flush_cost_cpu >>/tmp/fc-cpu
	emit vmstat /proc/vmstat
	phase collect
	flush_cost_hists >/tmp/fc-hists
	emit flush-cost-hists /tmp/fc-hists
	emit flush-cost-cpu /tmp/fc-cpu
	cat /tmp/fc-fio.* >/tmp/fc-fio
	emit flush-cost-fio /tmp/fc-fio
	[ "$rc" = 0 ] || { cat /tmp/fio.err >&2; fail "a writer's fio failed (status $rc): $(tail -n 3 /tmp/fio.err)"; }
}
