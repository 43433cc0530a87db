# SPDX-License-Identifier: GPL-2.0
# Not a measurement: the wbstall module removed and loaded again
# $WB_cycles times while buffered writers dirty a FUSE mount, so that every
# probe fires during registration and unregistration; then, $WB_churn times, a
# cgroup's writeback domain made, written through and removed under the module
# (memcg_churn). The host then checks that every cycle completed and that the
# console holds no warning (on the debug kernel: no KASAN, lockdep or
# debug-objects report).

# A reader holding `stats` open (on fd 4: fd 3 is the results port) pins the
# module, whose debugfs files have an owner: rmmod must refuse with EWOULDBLOCK
# while it is open, and succeed once it is closed.
held_reader() {
	exec 4</sys/kernel/debug/wbstall/stats
	cat <&4 >/dev/null || fail "cannot read /sys/kernel/debug/wbstall/stats"
	if rmmod wbstall 2>/tmp/rmmod.err; then
		fail "rmmod wbstall succeeded while a reader held stats open"
	fi
	grep -q "Resource temporarily unavailable" /tmp/rmmod.err ||
		fail "rmmod refused, but not with EWOULDBLOCK: $(cat /tmp/rmmod.err)"
	exec 4<&-
	rmmod wbstall || fail "rmmod wbstall failed after the reader closed stats"
	insmod /lib/modules/wbstall.ko || fail "insmod wbstall.ko failed after the held-reader check"
}

# reload WHY: rmmod (retried a little: EWOULDBLOCK while a stray reader holds
# a file; nothing here holds one) and insmod; counts retries in $busy.
reload() {
	local tries=0
	until rmmod wbstall 2>/dev/null; do
		tries=$((tries + 1))
		busy=$((busy + 1))
		[ "$tries" -lt 100 ] || fail "rmmod wbstall failed 100 times ($1)"
		usleep 10000
	done
	insmod /lib/modules/wbstall.ko || fail "insmod wbstall.ko failed ($1)"
}

# in_bdp PID: the task sleeps in balance_dirty_pages() (its wchan; the function
# may be inlined into balance_dirty_pages_ratelimited_flags()).
# Read with the shell's own `read`: a cat would cost a fork per look, which on
# the debug kernel is longer than a throttle sleep.
in_bdp() {
	local w=
	read -r w <"/proc/$1/wchan" 2>/dev/null
	case "$w" in
	balance_dirty_pages*) return 0 ;;
	esac
	return 1
}

# kill_asleep PID: SIGKILL to PID the moment it is seen asleep in
# balance_dirty_pages() (its sleeps are milliseconds: tried 100 times), else
# anyway; true if it was asleep.
kill_asleep() {
	local i=0
	while [ "$i" -lt 100 ]; do
		if in_bdp "$1"; then
			kill -KILL "$1" 2>/dev/null
			return 0
		fi
		i=$((i + 1))
	done
	kill -KILL "$1" 2>/dev/null
	return 1
}

# summary_value KEY: a number of the module's summary line.
summary_value() {
	local kv line
	read -r line </sys/kernel/debug/wbstall/summary || fail "cannot read wbstall/summary"
	for kv in $line; do
		case "$kv" in
		"$1"=*) echo "${kv#*=}" && return 0 ;;
		esac
	done
	fail "wbstall/summary has no $1"
}

# memcg_churn: $WB_churn times, a cgroup with a small memory.max, two buffered
# writers (dd) in it on ext4 over the null_blk disk (bandwidth-capped by the
# host), so that the memcg's dirty limits throttle them; once one sleeps in
# balance_dirty_pages(), the cgroup goes away under it: on even cycles both
# writers are killed (SIGKILL) mid-sleep and the cgroup removed; on odd ones
# they are moved to the root cgroup first, the cgroup removed (its memcg goes
# offline, its wb is killed and released once unreferenced: the writer's own
# call still holds it, and so may a sleep's entry of the module) and then
# killed. Every 4th cycle the module is unloaded and loaded again while the
# writers sleep, so that sleeps in progress give their references back at
# unload. Before each unload, and at the end, the module's stats are sent
# (wbstall-stats-load-K: each load has its own counters).
memcg_churn() {
	local n=0 cgs=0 in_bdp_kills=0 moved=0 reloads=0 pending_max=0 load=0
	local churn cg pids pid i waited p slept
	churn=$(need churn)
	ext4_mount
	echo +memory >/sys/fs/cgroup/cgroup.subtree_control || fail "cannot enable the memory controller"
	while [ "$n" -lt "$churn" ]; do
		cg=/sys/fs/cgroup/wbstall-churn-$n
		mkdir "$cg" || fail "cannot make $cg"
		echo 16M >"$cg/memory.max" || fail "cannot set $cg/memory.max"
		cgs=$((cgs + 1))
		pids=
		for i in 1 2; do
			# The child joins the cgroup, then becomes dd: its page cache and
			# its wb are the cgroup's. Files are overwritten in place, so their
			# inodes move between the cgroups' wbs from cycle to cycle.
			sh -c 'echo $$ >"$1/cgroup.procs" && exec dd if=/dev/zero of="$2" bs=64k count=2048 conv=notrunc 2>/dev/null' \
				_ "$cg" "/mnt/disk/churn-$i" &
			pids="$pids $!"
		done
		# Until one writer sleeps in balance_dirty_pages(), at most 4 s.
		slept=
		waited=0
		while [ -z "$slept" ] && [ "$waited" -lt 200 ]; do
			for pid in $pids; do
				in_bdp "$pid" && slept=$pid
			done
			[ -n "$slept" ] || { usleep 20000; waited=$((waited + 1)); }
		done
		p=$(summary_value pending)
		[ "$p" -gt "$pending_max" ] && pending_max=$p
		if [ $((n % 4)) -eq 3 ]; then
			emit "wbstall-stats-load-$load" /sys/kernel/debug/wbstall/stats
			load=$((load + 1))
			reload "churn cycle $n"
			reloads=$((reloads + 1))
		fi
		if [ $((n % 2)) -eq 1 ]; then
			for pid in $pids; do
				echo "$pid" >"$ROOT_CGROUP/cgroup.procs" 2>/dev/null
			done
			rmdir "$cg" || fail "cannot remove $cg after moving its writers out"
			moved=$((moved + 1))
		fi
		for pid in $pids; do
			kill_asleep "$pid" && in_bdp_kills=$((in_bdp_kills + 1))
		done
		for pid in $pids; do
			wait "$pid" 2>/dev/null
		done
		if [ -d "$cg" ]; then
			i=0
			until rmdir "$cg" 2>/dev/null; do
				i=$((i + 1))
				[ "$i" -lt 100 ] || fail "cannot remove $cg after killing its writers"
				usleep 10000
			done
		fi
		n=$((n + 1))
	done
	# Every writer is gone: no sleep can be in progress, so no reference held.
	p=$(summary_value pending)
	emit "wbstall-stats-load-$load" /sys/kernel/debug/wbstall/stats
	echo "churn=$n cgroups=$cgs killed_in_bdp=$in_bdp_kills moved=$moved reloads=$reloads" \
		"pending_max=$pending_max pending_end=$p" >/tmp/churn
	emit churn /tmp/churn
	# A second run of the KUnit suite on the same load starts clean.
	echo 1 >/sys/kernel/debug/kunit/wbstall/run || fail "cannot run the KUnit suite again"
	emit kunit-rerun /sys/kernel/debug/kunit/wbstall/results
}

scenario_run() {
	start_fuse sink /mnt/fuse main
	bdi=$(mount_bdi /mnt/fuse) || fail "cannot find the BDI of /mnt/fuse in /proc/self/mountinfo"
	echo "$bdi" >/tmp/bdi
	emit bdi /tmp/bdi
	fio --eta=never --name=cycles --directory=/mnt/fuse --ioengine=psync --rw=write --bs=128k \
		--size=256M --numjobs=2 --time_based --runtime=3600 --output=/dev/null &
	fio_pid=$!
	sleep 1
	held_reader
	n=0
	busy=0
	cycles=$(need cycles)
	while [ "$n" -lt "$cycles" ]; do
		reload "cycle $n"
		n=$((n + 1))
	done
	kill "$fio_pid"
	wait "$fio_pid" 2>/dev/null
	echo "cycles=$n rmmod_retries=$busy held_reader=refused-then-removed" >/tmp/cycles
	emit cycles /tmp/cycles
	emit wbstall-stats /sys/kernel/debug/wbstall/stats
	stop_fuse main
	memcg_churn
}
