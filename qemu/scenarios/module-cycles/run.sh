# SPDX-License-Identifier: GPL-2.0
# Not a measurement: the wbstall module removed and loaded again
# $WB_cycles times while buffered writers dirty a FUSE mount, so that every
# probe fires during registration and unregistration. The host then checks
# that every cycle completed and that dmesg holds no warning.

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
		# rmmod fails (EWOULDBLOCK) while a debugfs file is open; nothing here
		# holds one, but retry a little rather than fail on a stray reader.
		tries=0
		until rmmod wbstall 2>/dev/null; do
			tries=$((tries + 1))
			busy=$((busy + 1))
			[ "$tries" -lt 100 ] || fail "rmmod wbstall failed 100 times at cycle $n"
			usleep 10000
		done
		insmod /lib/modules/wbstall.ko || fail "insmod wbstall.ko failed at cycle $n"
		n=$((n + 1))
	done
	kill "$fio_pid"
	wait "$fio_pid" 2>/dev/null
	echo "cycles=$n rmmod_retries=$busy held_reader=refused-then-removed" >/tmp/cycles
	emit cycles /tmp/cycles
	emit wbstall-stats /sys/kernel/debug/wbstall/stats
	stop_fuse main
}
