# SPDX-License-Identifier: GPL-2.0
# Shell helpers for the wbstall guest (sourced by /init and the scenarios; on
# the host, by qemu/host-init).
#
# Results protocol on the virtio-serial port "wbstall.results" (fd 3):
#   WBSTALL-FILE <name> <length>\n<length bytes>\n     one result file
#   WBSTALL-END ok\n | WBSTALL-END fail <reason>\n     last record of a run
# The host parses this stream (xtask/src/results.rs); a run without the END
# record is a missing result, not a pass.

# Where the scripts, the fio job and the FUSE server's command lie (/wbstall
# in the guest; host-test's staging directory on the host), and the root
# cgroup directory: the writers of the global-domain scenarios run there
# (qemu/host-init sets the host's). Upper case: never a boot parameter.
WB_ROOT=${WB_ROOT:-/wbstall}
ROOT_CGROUP=/sys/fs/cgroup

mount_basics() {
	mount -t proc proc /proc
	mount -t sysfs sysfs /sys
	mount -t devtmpfs devtmpfs /dev
	mount -t debugfs debugfs /sys/kernel/debug
	mount -t tracefs tracefs /sys/kernel/tracing
	mkdir -p /tmp /run /mnt
	mount -t tmpfs -o mode=1777 tmpfs /tmp
	mount -t tmpfs tmpfs /run
	mkdir -p /sys/fs/cgroup
	mount -t cgroup2 cgroup2 /sys/fs/cgroup
}

# wbstall.KEY=VALUE on the kernel command line becomes $WB_KEY (KEY: a-z, 0-9, _),
# exported, so that need reads it by name (awk's ENVIRON) and no value is ever
# evaluated as shell code.
read_params() {
	# shellcheck disable=SC2013 # the command line is words, not lines
	for arg in $(cat /proc/cmdline); do
		case "$arg" in
		wbstall.*=*)
			key=${arg%%=*}
			key=${key#wbstall.}
			case "$key" in
			*[!a-z0-9_]* | "") continue ;;
			esac
			export "WB_$key=${arg#*=}"
			;;
		esac
	done
	export WB_scenario="${WB_scenario:-shell}"
}

open_results_port() {
	RESULTS_PORT=
	for p in /sys/class/virtio-ports/*; do
		[ -f "$p/name" ] || continue
		if [ "$(cat "$p/name")" = wbstall.results ]; then
			RESULTS_PORT=/dev/${p##*/}
		fi
	done
	if [ -z "$RESULTS_PORT" ]; then
		[ "$WB_scenario" = shell ] && return 0
		echo "wbstall: no virtio-serial port named wbstall.results" >&2
		reboot -f
	fi
	exec 3>"$RESULTS_PORT"
}

# emit NAME FILE: send one file. It is copied first: debugfs and proc files can
# change between two reads, and the length must match the bytes sent. A file
# that cannot be read fails the run: an empty stand-in would read as zeros.
emit() {
	[ -n "$RESULTS_PORT" ] || return 0
	cp "$2" /tmp/.emit 2>/dev/null || fail "cannot read $2 (result file $1)"
	# stat, not wc -c: busybox wc reads the file a byte at a time (0.7 s of
	# guest time for a 3.5 MB trace).
	printf 'WBSTALL-FILE %s %s\n' "$1" "$(stat -c %s /tmp/.emit)" >&3
	cat /tmp/.emit >&3
	printf '\n' >&3
	rm -f /tmp/.emit
}

# emit_cmd NAME CMD...: send a command's output (stdout and stderr).
emit_cmd() {
	local name=$1
	shift
	"$@" >/tmp/.emit_cmd 2>&1
	emit "$name" /tmp/.emit_cmd
	rm -f /tmp/.emit_cmd
}

# phase NAME: where a boot's time goes. NAME begins now: the guest's clock
# (uptime, s) is noted, and all of them are sent as `phases` at the end (the
# kernel's boot is the uptime of the first, `init`).
phase() {
	local up
	read -r up _ </proc/uptime
	echo "$1 $up" >>/tmp/phases
}

# finish ok | finish fail REASON: the last record, then power off.
finish() {
	if [ -n "$RESULTS_PORT" ]; then
		# Once: a failure to send the phases ends here again.
		if [ -z "$FINISHING" ]; then
			FINISHING=1
			phase end
			emit phases /tmp/phases
		fi
		printf 'WBSTALL-END %s\n' "$*" >&3
	fi
	# On the host (host-test, qemu/host-init), the run's processes end here,
	# never the machine: every process of the run's group, this shell too.
	# xtask restores what the run changed.
	if [ -n "${WB_HOST-}" ]; then
		kill -KILL 0
		exit 1
	fi
	# No sync, no unmount: everything that counts has gone out on the port
	# (a write to it returns once the host has taken it), and the disks are
	# thrown away; writing back what the job left dirty would cost seconds.
	reboot -f
}

fail() {
	echo "wbstall: FAIL: $*" >&2
	[ -n "$FAILING" ] || { FAILING=1; emit_cmd dmesg dmesg; }
	finish fail "$*"
}

# need NAME: the value of wbstall.NAME=, or a failed run that names it.
need() {
	local v
	v=$(awk -v k="WB_$1" 'BEGIN { print ENVIRON[k] }')
	[ -n "$v" ] || fail "the kernel command line lacks wbstall.$1="
	echo "$v"
}

# cpus_check: fail unless every CPU QEMU gave the guest (wbstall.cpus, its
# -smp) is online; busybox's nproc counts the CPUs init may run on, all online.
cpus_check() {
	local want have
	want=$(need cpus)
	have=$(nproc)
	[ "$have" = "$want" ] || fail "$have of the $want CPUs QEMU gave the guest are online: the kernel's CONFIG_NR_CPUS (or a maxcpus=/nr_cpus= argument) is below $want; build it with CONFIG_NR_CPUS=$want or more (Kconfig.fragment sets 64) or boot with --cpus $have"
}

guest_env() {
	echo "uname=$(uname -r)"
	echo "cmdline=$(cat /proc/cmdline)"
	echo "cpus=$(grep -c ^processor /proc/cpuinfo)"
	echo "clocksource=$(cat /sys/devices/system/clocksource/clocksource0/current_clocksource)"
	# What else ran: nothing in a guest; on the host (host-test), whatever
	# the machine was doing besides the run.
	echo "loadavg=$(cat /proc/loadavg)"
	grep -E '^(MemTotal|MemFree|Dirty|Writeback):' /proc/meminfo
	for f in dirty_ratio dirty_background_ratio dirty_expire_centisecs dirty_writeback_centisecs; do
		echo "vm.$f=$(cat /proc/sys/vm/$f)"
	done
}

# Loads the module; its KUnit suites run during the load and their KTAP is sent.
load_module() {
	insmod /lib/modules/wbstall.ko || fail "insmod wbstall.ko failed"
	[ -d /sys/kernel/debug/wbstall ] || fail "wbstall loaded but /sys/kernel/debug/wbstall is missing"
	for d in /sys/kernel/debug/kunit/*/; do
		[ -f "$d/results" ] || continue
		s=${d%/}
		emit "ktap-${s##*/}" "$d/results"
	done
}

# fuse_wait TAG FILE WHAT: wait up to 20 s for the server of TAG to write
# /run/fuse-TAG.FILE; else send its log and fail saying it WHAT.
fuse_wait() {
	local i=0
	while [ ! -s "/run/fuse-$1.$2" ]; do
		i=$((i + 1))
		if [ $i -gt 200 ]; then
			emit "fuse-$1-log" "/run/fuse-$1.log"
			fail "wbstall-fuse ($1) $3 in 20 s"
		fi
		usleep 100000
	done
}

# start_fuse MODE MOUNTPOINT TAG: start wbstall-fuse and wait until it has
# answered the kernel's INIT with the writeback cache enabled.
start_fuse() {
	local mode=$1 mnt=$2 tag=$3
	mkdir -p "$mnt"
	rm -f "/run/fuse-$tag.ready" "/run/fuse-$tag.stats"
	wbstall-fuse --mountpoint "$mnt" --mode "$mode" --threads "${WB_fuse_threads:-2}" \
		--ready-file "/run/fuse-$tag.ready" --stats-file "/run/fuse-$tag.stats" \
		>"/run/fuse-$tag.log" 2>&1 &
	echo $! >"/run/fuse-$tag.pid"
	fuse_wait "$tag" ready "did not become ready ($mode on $mnt)"
	emit "fuse-$tag-ready" "/run/fuse-$tag.ready"
	grep -q '"writeback_cache":true' "/run/fuse-$tag.ready" ||
		fail "FUSE writeback cache is not active on $mnt: writes would bypass the page cache and the bug cannot show"
}

# signal_fuse TAG: the end of a measurement on the mount TAG. SIGTERM makes the
# server write its stats, then unmount; the stats are sent as soon as they are
# written, and the unmount (the flush of what fio left dirty, through the
# server: 6 s of guest time and more) is not waited for: the guest powers off.
signal_fuse() {
	local tag=$1 pid
	read -r pid <"/run/fuse-$tag.pid" || fail "no pid file of wbstall-fuse ($tag)"
	kill -TERM "$pid" || fail "wbstall-fuse ($tag) is gone before the end of the measurement"
	fuse_wait "$tag" stats "wrote no stats after SIGTERM"
	emit "fuse-$tag-log" "/run/fuse-$tag.log"
	emit "fuse-$tag-stats" "/run/fuse-$tag.stats"
}

# stop_fuse TAG: SIGTERM makes the server unmount, write its stats and exit.
stop_fuse() {
	local tag=$1 pid rc
	read -r pid <"/run/fuse-$tag.pid" || fail "no pid file of wbstall-fuse ($tag)"
	kill -TERM "$pid"
	wait "$pid"
	rc=$?
	emit "fuse-$tag-log" "/run/fuse-$tag.log"
	[ $rc = 0 ] || fail "wbstall-fuse ($tag) exited $rc"
	emit "fuse-$tag-stats" "/run/fuse-$tag.stats"
}

# bdi_dirtied_kb BDI: the kB the kernel has dirtied on BDI (BdiDirtied).
bdi_dirtied_kb() {
	local k v _
	while read -r k v _; do
		[ "$k" = BdiDirtied: ] && echo "$v" && return 0
	done <"/sys/kernel/debug/bdi/$1/stats"
	fail "no BdiDirtied in /sys/kernel/debug/bdi/$1/stats"
}

# start_fuse_server TAG MOUNTPOINT PROGRAM ARGS...: a FUSE server wbstall did
# not write (libfuse's passthrough_ll, or the user's --fuse-server), run with
# MOUNTPOINT as its last argument; waits up to 20 s for its mount. Whether the
# mount has the writeback cache is then taken from what the kernel does, not
# from the server: a 1 MiB write must leave the mount's BDI with dirtied pages
# (without the cache FUSE writes through and dirties none). Writes
# /run/fuse-TAG.ready as wbstall-fuse does; the host leaves a run whose mount
# lacks the cache out (it cannot show the bug).
start_fuse_server() {
	local tag=$1 mnt=$2 i=0 pid bdi before after wb=false
	shift 2
	mkdir -p "$mnt"
	"$@" "$mnt" >"/run/fuse-$tag.log" 2>&1 &
	pid=$!
	echo $pid >"/run/fuse-$tag.pid"
	until bdi=$(mount_bdi "$mnt"); do
		i=$((i + 1))
		if [ $i -gt 200 ] || ! kill -0 $pid 2>/dev/null; then
			emit "fuse-$tag-log" "/run/fuse-$tag.log"
			fail "the FUSE server \`$*\` did not mount $mnt in 20 s"
		fi
		usleep 100000
	done
	before=$(bdi_dirtied_kb "$bdi")
	dd if=/dev/zero of="$mnt/.wbstall-probe" bs=64k count=16 2>/dev/null ||
		fail "cannot write a probe file on $mnt (the FUSE server \`$*\`)"
	after=$(bdi_dirtied_kb "$bdi")
	rm -f "$mnt/.wbstall-probe"
	[ $((after - before)) -ge 1024 ] && wb=true
	printf '{"server":"%s","writeback_cache":%s,"probe_kb":1024,"dirtied_kb":%d}\n' \
		"${1##*/}" "$wb" $((after - before)) >"/run/fuse-$tag.ready"
	emit "fuse-$tag-ready" "/run/fuse-$tag.ready"
}

# signal_fuse_server TAG: the end of a measurement on such a server's mount:
# SIGTERM, its log sent; neither its unmount nor its exit is waited for.
signal_fuse_server() {
	local pid
	read -r pid <"/run/fuse-$1.pid" || fail "no pid file of the FUSE server ($1)"
	kill -TERM "$pid" || fail "the FUSE server ($1) is gone before the end of the measurement"
	emit "fuse-$1-log" "/run/fuse-$1.log"
}

# fio_verify DIR WHAT: the bytes go through the FUSE mount on DIR: 8M written
# and read back with checksums (WHAT names the mount in a failure). No state
# file: an interrupted verify job would leave one in the working directory.
fio_verify() {
	fio --eta=never --name=verify --directory="$1" --ioengine=psync --rw=write --bs=128k \
		--size=8M --verify=crc32c --do_verify=1 --verify_state_save=0 --direct=0 \
		--output-format=json --output=/tmp/fio-verify.json ||
		fail "fio verify on $2 failed"
	emit fio-verify /tmp/fio-verify.json
}

# measure_fuse BDI: the measurement on the FUSE mount /mnt/fuse of BDI, its
# writers in the root (global) domain: the BDI and its knobs, the witness and
# the trace, fio with the sampler, and everything collect sends.
measure_fuse() {
	local bdi=$1 rc
	echo "$bdi" >/tmp/bdi
	emit bdi /tmp/bdi
	emit_cmd bdi-knobs-before bdi_knobs "$bdi"
	echo global >/tmp/wb_domain
	emit writer-domain /tmp/wb_domain
	measure_start "$bdi" "$ROOT_CGROUP"
	start_sampler "$bdi"
	run_fio /mnt/fuse /tmp/fio.json
	rc=$?
	stop_sampler
	# A dead server fails fio's writes too: its death is the cause.
	fuse_check main
	fio_check $rc /tmp/fio.err
	emit fio /tmp/fio.json
	collect "$bdi"
}

# fuse_check TAG: the server of TAG must still run; if it died, the run fails
# naming how (its status from `wait`: a signal, or an exit status).
fuse_check() {
	local pid rc
	read -r pid <"/run/fuse-$1.pid" || fail "no pid file of wbstall-fuse ($1)"
	# A dead child the shell has not waited for is a zombie, which kill -0 finds.
	[ -d "/proc/$pid" ] && ! grep -q '^State:.*Z' "/proc/$pid/status" 2>/dev/null && return 0
	wait "$pid"
	rc=$?
	emit "fuse-$1-log" "/run/fuse-$1.log"
	[ $rc -gt 128 ] && fail "wbstall-fuse ($1) died of signal $((rc - 128)) during the measurement"
	fail "wbstall-fuse ($1) exited with status $rc during the measurement"
}

# fio_check RC ERRFILE: fio's failure named by its cause (ERRFILE: its
# stderr): a signal (the OOM killer's victim is named by the host, from the
# console), a full disk, or its status.
fio_check() {
	[ "$1" = 0 ] && return 0
	[ "$1" -gt 128 ] && fail "fio killed by signal $(($1 - 128))"
	grep -q 'No space left on device' "$2" &&
		fail "the ext4 disk is full (fio: No space left on device)"
	fail "fio exited with status $1"
}

# Test hook, never set by a scenario: wbstall.fault=KIND injects a fault 2 s
# into fio, so that a test sees the run fail naming it. kill-fuse: SIGKILL to
# the FUSE server `main`; kill-fio: SIGKILL to fio (pid $1); oom: a memory hog
# in a cgroup of its own that it outgrows (fault_oom); disk-full (the ext4
# scenarios): the disk filled before fio starts (fault_fill_disk).
fault_start() {
	FAULT_PID=
	case "${WB_fault-}" in
	"" | disk-full) return 0 ;;
	kill-fuse) (
		sleep 2
		kill -KILL "$(cat /run/fuse-main.pid)"
	) & ;;
	kill-fio) (
		sleep 2
		kill -KILL "$1"
	) & ;;
	oom) (
		sleep 2
		fault_oom
	) & ;;
	*) fail "wbstall.fault=$WB_fault: the test hook knows kill-fuse, kill-fio, oom and disk-full" ;;
	esac
	FAULT_PID=$!
}

# fault_oom: dd's 128 MiB buffer in a cgroup of 32 MiB (memory.max): the
# memcg's OOM killer kills it at once (a hog of the guest's whole memory takes
# longer than fio runs under TCG).
fault_oom() {
	local cg=$ROOT_CGROUP/wbstall-hog
	if ! { echo +memory >"$ROOT_CGROUP/cgroup.subtree_control" && mkdir -p "$cg" &&
		echo 32M >"$cg/memory.max"; }; then
		fail "wbstall.fault=oom: cannot make the cgroup $cg"
	fi
	# shellcheck disable=SC2016 # $$ of the inner shell: the hog's own pid
	sh -c 'echo $$ >"$1/cgroup.procs" && exec dd if=/dev/zero of=/dev/null bs=128M count=1' \
		hog "$cg"
}

fault_stop() {
	[ -n "$FAULT_PID" ] || return 0
	kill "$FAULT_PID" 2>/dev/null
	wait "$FAULT_PID" 2>/dev/null
}

# fault_fill_disk: with wbstall.fault=disk-full, the ext4 disk filled to its
# last MiB (fallocate, 64 MiB then 1 MiB at a time: blocks taken, no data
# written), so that fio's first writes find it full.
fault_fill_disk() {
	local i=0 chunk
	[ "${WB_fault-}" = disk-full ] || return 0
	for chunk in 67108864 1048576; do
		while fallocate -l $chunk "/mnt/disk/.wbstall-fill-$i" 2>/dev/null; do
			i=$((i + 1))
		done
	done
	[ $i -gt 0 ] || fail "wbstall.fault=disk-full: cannot fill /mnt/disk"
}

# fio_write_kind: the job file's ioengine, fsync and sync (FIO_ENGINE,
# FIO_FSYNC, FIO_SYNC) for wbstall.write, how the writers write
# (xtask/src/guest/job.rs, WriteKind, whose fio options a unit test holds
# these to): write(2)s, stores to a shared mapping, an fsync every 32
# blocks, or O_SYNC writes.
fio_write_kind() {
	FIO_ENGINE=psync FIO_FSYNC=0 FIO_SYNC=0
	case "$(need write)" in
	write) ;;
	mmap) FIO_ENGINE=mmap ;;
	fsync) FIO_FSYNC=32 ;;
	osync) FIO_SYNC=1 ;;
	*) fail "wbstall.write=$(need write): the job knows write, mmap, fsync and osync" ;;
	esac
}

# The fio job of the seed, scaled by wbstall.* parameters (qemu/jobs/writeback.fio).
# Also sends fio's wall time (fio-wall, seconds): a stalled write can outlast
# the runtime by seconds, and the stall share is taken of the writers' real time.
run_fio() {
	local dir=$1 out=$2 t0 t1 rc pid
	fio_write_kind
	phase fio
	read -r t0 _ </proc/uptime
	# In the background, so that a test's fault (fault_start) can name fio's
	# pid; its stderr kept, so that fio_check can name the cause of a failure.
	WB_DIR=$dir WB_IOENGINE=$FIO_ENGINE WB_FSYNC=$FIO_FSYNC WB_SYNC=$FIO_SYNC \
		WB_BS=$(need bs) WB_SIZE=$(need size) WB_NUMJOBS=$(need numjobs) \
		WB_RAMP=$(need ramp) WB_RUNTIME=$(need runtime) WB_INVALIDATE=$(need invalidate) \
		WB_THINKTIME=${WB_thinktime_us:-0} WB_LOG_MS=$(fio_log_ms) \
		fio --eta=never --output-format=json --output="$out" "$WB_ROOT/jobs/writeback.fio" \
		2>/tmp/fio.err &
	pid=$!
	fault_start $pid
	wait $pid
	rc=$?
	fault_stop
	cat /tmp/fio.err >&2
	read -r t1 _ </proc/uptime
	echo "$t0 $t1" >/tmp/fio-wall
	emit fio-wall /tmp/fio-wall
	return $rc
}

# fio's per-job progress log interval: the sampler's, else once a second
# (the log is then not sent).
fio_log_ms() {
	if [ "${WB_sample_ms:-0}" -gt 0 ]; then echo "$WB_sample_ms"; else echo 1000; fi
}

# The time series: every $WB_sample_ms ms, the module's snapshot and counters
# and the kernel's view of the BDI; every tenth sample also the global dirty
# counters (the format is in qemu/wbstall-sample/src/main.rs). A compiled loop:
# the shell loop it replaces (busybox `read`, a byte per system call, and a
# forked usleep per sample) cost a FUSE writer about 11% of its throughput.
start_sampler() {
	SAMPLER_PID=
	[ "${WB_sample_ms:-0}" -gt 0 ] || return 0
	set -- "$1" $(($(need sample_ms) * 1000))
	if module_detector; then
		set -- "$@" --module
	fi
	wbstall-sample "$@" >/tmp/samples 2>&1 &
	SAMPLER_PID=$!
}

stop_sampler() {
	[ -n "$SAMPLER_PID" ] || return 0
	kill "$SAMPLER_PID"
	wait "$SAMPLER_PID" 2>/dev/null
	# After the blocks, each fio job's progress log (`time, KiB/s, ...`), a
	# line per entry: `F job=<n> unix_ms=<time> kib_s=<bandwidth> ms=<its
	# interval>` (an interval without a write has no entry).
	for f in /tmp/fio-progress_bw.*.log; do
		[ -f "$f" ] || continue
		n=${f#/tmp/fio-progress_bw.}
		awk -F', *' -v n="${n%.log}" -v ms="$(fio_log_ms)" \
			'{ print "F job=" n " unix_ms=" $1 " kib_s=" $2 " ms=" ms }' "$f"
	done >>/tmp/samples
	emit samples /tmp/samples
}

# The global dirty limits of a control scenario: wbstall.dirty_bytes and
# wbstall.dirty_background_bytes, when given, replace the ratios (writing a
# *_bytes knob zeroes its *_ratio), so that the global domain throttles a file
# set that still fits in memory.
set_dirty_limits() {
	# 0 (the hunt's default): the kernel's ratios stay.
	case "${WB_dirty_bytes:-0}" in 0) return 0 ;; esac
	echo "$WB_dirty_bytes" >/proc/sys/vm/dirty_bytes || fail "cannot set vm.dirty_bytes=$WB_dirty_bytes"
	need dirty_background_bytes >/proc/sys/vm/dirty_background_bytes ||
		fail "cannot set vm.dirty_background_bytes to wbstall.dirty_background_bytes"
}

vm_knobs() {
	local f
	for f in dirty_ratio dirty_background_ratio dirty_bytes dirty_background_bytes \
		dirty_expire_centisecs dirty_writeback_centisecs; do
		echo "vm.$f=$(cat /proc/sys/vm/$f)"
	done
}

# The independent witness: the kernel's own count of the tracepoint events the
# module counts, from hist triggers in tracefs, per BDI and cgroup inode.
# Started right after the module's counters are reset, read right after them.
TRACE=${WB_TRACE:-/sys/kernel/tracing}
TRACE_EVENTS=$TRACE/events/writeback
WITNESS_BDP="hist:keys=bdi,cgroup_ino:vals=hitcount"
WITNESS_SLEEP="hist:keys=bdi,cgroup_ino:vals=hitcount if pause > 0"
WITNESS_WAKE="hist:keys=name,cgroup_ino:vals=hitcount"

# The tracefs detector's input (xtask/src/results/tracefs.rs): the writeback
# events it classes sleeps from, in the ring buffer, on the mono clock (one
# clock for all CPUs). Only sleeps of balance_dirty_pages are kept (the hist
# triggers above count every event); global_dirty_state comes once per throttle
# loop and flusher check, hence the larger buffer (16 MiB per CPU in the guest;
# host-test sizes it as $WB_TRACE_KB for native speed). WB_detector=tracefs: no module.
# On the host (host-test), $TRACE is a tracing instance of xtask's: the host's
# main buffer is left alone.
TRACE_DETECTOR_EVENTS="balance_dirty_pages writeback_wake_background writeback_start writeback_written writeback_pages_written writeback_single_inode_start writeback_single_inode global_dirty_state"

# The measured times of the writers' sleeps (tracefs.rs): each writer's
# wake-up (sched_wakeup if comm == "fio": every measured scenario's writers are
# fio's), in a tracing instance of their own. Their return to a CPU
# (sched_switch, in and out) is not traced: it cost 0.6 points of FUSE
# throughput (bench-fuse, 2026-12-07; the module measures it). With the
# wake-ups alone the field filter measured as cheap as restricting the
# instance to fio's pids (set_event_pid, whose probes run at every context
# switch of the guest): 96.6% of the bare guest against 96.4% (7 runs each).
# On the host (host-test) the instance is xtask's.
SCHED_TRACE=${WB_SCHED_TRACE:-$TRACE/instances/wbstall-sched}

module_detector() {
	[ "${WB_detector:-module}" = module ]
}

# trace_start BDI: the tracefs detector's events for the writers of BDI.
trace_start() {
	local e
	if ! { echo 0 >"$TRACE/tracing_on" && echo >"$TRACE/trace" &&
		echo mono >"$TRACE/trace_clock" && echo "${WB_TRACE_KB:-16384}" >"$TRACE/buffer_size_kb" &&
		echo "pause > 0" >"$TRACE_EVENTS/balance_dirty_pages/filter"; }; then
		fail "cannot set up the trace buffer for the tracefs detector"
	fi
	# The writeback workqueue's rescuer (kworker/R-writeback) runs wb_workfn()
	# without wb_do_writeback() when no worker can be made, and can spin there:
	# 808,138 writeback_pages_written of 0 pages in a minute of a memcg-refresh
	# boot (CI, 2026-12-07) overran the buffer. The detector ends a pass by its
	# worker's own pid, which the rescuer's events never are, so they say
	# nothing it reads.
	echo 'comm != "kworker/R-write"' >"$TRACE_EVENTS/writeback_pages_written/filter" ||
		fail "cannot filter the writeback workqueue's rescuer out of writeback_pages_written"
	for e in $TRACE_DETECTOR_EVENTS; do
		echo 1 >"$TRACE_EVENTS/$e/enable" || fail "cannot enable the trace event $e"
	done
	# A block device's bdi (major not 0; FUSE's is anonymous, 0:N): its write
	# bios, in their submitter's context. A flusher's pass submits its pages
	# bio by bio; writeback_single_inode comes only at the end of an inode's
	# chunk (ext4: thousands of pages, half a second on the timed disk), so
	# the bios say when a pass first wrote (tracefs.rs, `flushing`).
	case $1 in
	0:*) ;;
	*)
		if ! { echo 'rwbs ~ "*W*"' >"$TRACE/events/block/block_bio_queue/filter" &&
			echo 1 >"$TRACE/events/block/block_bio_queue/enable"; }; then
			fail "cannot enable the trace event block/block_bio_queue (the bdi $1's write bios)"
		fi
		;;
	esac
	sched_trace_start
	# A scenario's own events beside them (wbstall.trace_extra: SYSTEM/EVENT
	# names, comma-separated), in the same buffer; the host's parser skips them.
	# A name after `?` is optional: a kernel without it (an older series) is
	# said on the console and traced without it.
	for e in $(echo "${WB_trace_extra-}" | tr , ' '); do
		case $e in
		\?*)
			e=${e#?}
			if [ ! -d "$TRACE/events/$e" ]; then
				echo "wbstall: this kernel has no trace event $e (optional in wbstall.trace_extra): traced without it" >&2
				continue
			fi
			;;
		esac
		echo 1 >"$TRACE/events/$e/enable" || fail "cannot enable the trace event $e (wbstall.trace_extra)"
	done
	echo 1 >"$TRACE/tracing_on" || fail "cannot start tracing"
}

# The witness on a kernel without hist triggers (host-test on a host built
# without CONFIG_HIST_TRIGGERS): the same three counts from three tracing
# instances of xtask's ($WB_COUNTERS), each recording one event of the
# writer's wb only. The ring buffer counts what it recorded: entries, plus
# what overwriting lost (overrun); a commit overrun is a loss it cannot count.
counters_start() {
	local bdi=$1 ino=$2 dir i=0 e f
	for dir in $WB_COUNTERS; do
		i=$((i + 1))
		case $i in
		1) e=balance_dirty_pages f="bdi == \"$bdi\" && cgroup_ino == $ino" ;;
		2) e=balance_dirty_pages f="bdi == \"$bdi\" && cgroup_ino == $ino && pause > 0" ;;
		3) e=writeback_wake_background f="name == \"$bdi\" && cgroup_ino == $ino" ;;
		*) fail "WB_COUNTERS names more than three instances" ;;
		esac
		if ! { echo 0 >"$dir/tracing_on" && echo >"$dir/trace" &&
			echo "$f" >"$dir/events/writeback/$e/filter" &&
			echo 1 >"$dir/events/writeback/$e/enable" && echo 1 >"$dir/tracing_on"; }; then
			fail "cannot arm the counting instance $dir"
		fi
	done
	[ $i = 3 ] || fail "WB_COUNTERS names $i instances, not three"
}

# counters_collect: stop the counting instances and send their counts.
counters_collect() {
	local dir i=0 name
	for dir in $WB_COUNTERS; do
		echo 0 >"$dir/tracing_on" || fail "cannot stop the counting instance $dir"
	done
	for dir in $WB_COUNTERS; do
		i=$((i + 1))
		case $i in
		1) name=throttle_events ;;
		2) name=throttle_sleeps ;;
		*) name=bg_starts ;;
		esac
		cat "$dir"/per_cpu/cpu*/stats | awk -v name="$name" '
			/^entries:/ { e += $2 } /^overrun:/ { o += $2 } /^commit overrun:/ { c += $3 }
			END { printf "%s entries=%d overrun=%d commit_overrun=%d\n", name, e, o, c }'
	done >/tmp/witness-counts
	emit witness-counts /tmp/witness-counts
}

# sched_trace_start: the writers' wake-ups, in $SCHED_TRACE (made here in the
# guest), on the same clock as the trace.
sched_trace_start() {
	if ! { { [ -d "$SCHED_TRACE" ] || mkdir "$SCHED_TRACE"; } &&
		echo 0 >"$SCHED_TRACE/tracing_on" && echo >"$SCHED_TRACE/trace" &&
		echo mono >"$SCHED_TRACE/trace_clock" &&
		echo "${WB_SCHED_TRACE_KB:-4096}" >"$SCHED_TRACE/buffer_size_kb" &&
		echo 'comm == "fio"' >"$SCHED_TRACE/events/sched/sched_wakeup/filter"; }; then
		fail "cannot set up the tracing instance $SCHED_TRACE for the writers' scheduler events"
	fi
	echo 1 >"$SCHED_TRACE/events/sched/sched_wakeup/enable" ||
		fail "cannot enable the trace event sched/sched_wakeup in $SCHED_TRACE"
	echo 1 >"$SCHED_TRACE/tracing_on" || fail "cannot start tracing in $SCHED_TRACE"
}

# trace_stop: first thing at the end of a measurement, so that the trace's
# window lies inside the module's and the witness's (the counts can only agree
# or the trace have fewer).
trace_stop() {
	echo 0 >"$TRACE/tracing_on" || fail "cannot stop tracing"
	echo 0 >"$SCHED_TRACE/tracing_on" || fail "cannot stop tracing in $SCHED_TRACE"
}

# trace_collect: send the events and every CPU's ring-buffer stats (an
# overrun means lost events: the host refuses such a trace), of both.
trace_collect() {
	local c
	emit trace-events "$TRACE/trace"
	for c in "$TRACE"/per_cpu/cpu*; do
		cat "$c/stats"
	done >/tmp/trace-stats
	emit trace-stats /tmp/trace-stats
	emit trace-sched "$SCHED_TRACE/trace"
	for c in "$SCHED_TRACE"/per_cpu/cpu*; do
		cat "$c/stats"
	done >/tmp/trace-sched-stats
	emit trace-sched-stats /tmp/trace-sched-stats
}

# phase_wait: with wbstall.phase_cycle_ms, wait until the guest's uptime mod
# that cycle is wbstall.phase_ms, so that the measurement starts at the same
# point of the kernel's timers (the memcg's 2 s statistics refresh, the 5 s
# flusher) in the same run of every variant; send where it started.
phase_wait() {
	local cycle offset now wait
	[ -n "${WB_phase_cycle_ms-}" ] || return 0
	cycle=$(need phase_cycle_ms)
	offset=$(need phase_ms)
	now=$(uptime_ms)
	wait=$(((offset - now % cycle + cycle) % cycle))
	sleep "$((wait / 1000)).$(printf %03d $((wait % 1000)))"
	printf "cycle_ms=%s\noffset_ms=%s\nstart_ms=%s\n" "$cycle" "$offset" "$(uptime_ms)" >/tmp/phase
	emit start-phase /tmp/phase
}

# uptime_ms: the guest's uptime in ms (/proc/uptime, 10 ms resolution).
uptime_ms() {
	local up frac
	read -r up _ </proc/uptime
	frac=${up#*.}
	echo $((${up%.*} * 1000 + ${frac#0} * 10))
}

# measure_start BDI CGROUP_DIR: zero the module's counters, start the witness
# and the trace, and record the state the measurement starts from.
measure_start() {
	local bdi=$1 cg=$2
	phase_wait
	phase measure-start
	[ -d "$TRACE_EVENTS/balance_dirty_pages" ] ||
		fail "no $TRACE_EVENTS/balance_dirty_pages: tracefs or the writeback events are missing"
	stat -c %i "$cg" >/tmp/cgroup_ino || fail "cannot stat $cg"
	if module_detector; then
		echo 1 >/sys/kernel/debug/wbstall/reset || fail "cannot reset the wbstall counters"
	fi
	if [ -n "${WB_COUNTERS-}" ]; then
		counters_start "$bdi" "$(cat /tmp/cgroup_ino)"
	elif ! { echo "$WITNESS_BDP" >>"$TRACE_EVENTS/balance_dirty_pages/trigger" &&
		echo "$WITNESS_SLEEP" >>"$TRACE_EVENTS/balance_dirty_pages/trigger" &&
		echo "$WITNESS_WAKE" >>"$TRACE_EVENTS/writeback_wake_background/trigger"; }; then
		fail "cannot attach the witness's hist triggers (CONFIG_HIST_TRIGGERS?)"
	fi
	trace_start "$bdi"
	emit writer-cgroup-ino /tmp/cgroup_ino
	emit_cmd vm-knobs vm_knobs
	emit vmstat-before /proc/vmstat
	emit bdi-stats-before "/sys/kernel/debug/bdi/$bdi/stats"
}

# Everything the host needs to explain a run on BDI $1: the module's files
# first and the witness's right after, so that both count the same events.
collect() {
	local bdi=$1 f
	trace_stop
	phase collect
	if module_detector; then
		for f in stats thresholds summary; do
			emit "wbstall-$f" "/sys/kernel/debug/wbstall/$f"
		done
	fi
	if [ -n "${WB_COUNTERS-}" ]; then
		counters_collect
	else
		emit witness-balance_dirty_pages "$TRACE_EVENTS/balance_dirty_pages/hist"
		emit witness-writeback_wake_background "$TRACE_EVENTS/writeback_wake_background/hist"
	fi
	phase trace
	trace_collect
	emit bdi-stats "/sys/kernel/debug/bdi/$bdi/stats"
	emit vmstat /proc/vmstat
	emit_cmd bdi-knobs bdi_knobs "$bdi"
	phase stop
}

bdi_knobs() {
	local k
	for k in strict_limit max_ratio min_ratio max_bytes read_ahead_kb; do
		[ -f "/sys/class/bdi/$1/$k" ] && echo "$k=$(cat "/sys/class/bdi/$1/$k")"
	done
}

# mount_bdi DIR: the BDI (major:minor) of the filesystem mounted on DIR.
mount_bdi() {
	while read -r _ _ dev _ mnt _; do
		[ "$mnt" = "$1" ] && echo "$dev" && return 0
	done </proc/self/mountinfo
	return 1
}

# The UUID and directory hash seed of the guest-made file system.
EXT4_UUID=5d1b0e6a-77b1-4c1e-9a43-000000000001

# null_blk_timed MS DEPTH [MIB]: a second null_blk device (configfs),
# memory-backed like nullb0 (MIB of it, 1024 by default; only what is written
# takes guest memory), whose every request completes MS ms after it was queued
# (a guest hrtimer: guest time, so the same in every boot on the virtual
# clock), with DEPTH requests in flight at most (hw_queue_depth), for
# ext4_mount (EXT4_NULL_DEV). Pages stay under writeback that long.
null_blk_timed() {
	# The device takes the name of its configfs directory.
	local d=/sys/kernel/config/nullb/nullb_timed
	[ "$(need disk)" = null ] || fail "a timed null_blk disk needs --disk null"
	grep -q " /sys/kernel/config " /proc/mounts ||
		mount -t configfs none /sys/kernel/config || fail "cannot mount configfs"
	if ! { mkdir "$d" && echo "${3:-1024}" >"$d/size" && echo 1 >"$d/memory_backed" &&
		echo 2 >"$d/irqmode" && echo "$(($1 * 1000000))" >"$d/completion_nsec" &&
		echo "$2" >"$d/hw_queue_depth" &&
		echo 1 >"$d/power"; }; then
		fail "cannot make the timed null_blk device (configfs nullb)"
	fi
	EXT4_NULL_DEV=/dev/nullb_timed
}

# ext4_mount: the disk scenarios' ext4 on /mnt/disk, on the disk wbstall.disk
# names: `null`, the guest's null_blk device (/dev/nullb0, made by the null_blk.*
# kernel arguments: memory-backed, with a bandwidth cap if the host asked for
# one), formatted here; `host`, the image the host formatted, on virtio-blk
# (/dev/vda); `loop` (host-test), a loop device over a sparse file, formatted here.
ext4_mount() {
	local dev disk
	mkdir -p /mnt/disk
	disk=$(need disk)
	case "$disk" in
	null | loop)
		if [ "$disk" = loop ]; then
			# host-test: the loop device xtask attached over a sparse file.
			dev=${WB_DISK_DEV-}
			[ -b "$dev" ] || fail "no loop device in WB_DISK_DEV ('$dev')"
		else
			dev=${EXT4_NULL_DEV:-/dev/nullb0}
			[ -b "$dev" ] || fail "no $dev: the kernel lacks CONFIG_BLK_DEV_NULL_BLK=y or the null_blk.* arguments"
		fi
		# The device reads zeros where nothing was written: mke2fs need not
		# write the inode tables or the journal, and the kernel starts no
		# lazy-init thread that would write while fio measures. A fixed UUID
		# and directory hash seed: every boot gets the same file system
		# (the same hash order of directory entries), and mke2fs makes no
		# random UUID (3 s of guest time each under TCG, measured). Features
		# from the host's /etc/mke2fs.conf, as for the host's image.
		# e2fsprogs' mke2fs by its path: busybox has a smaller one.
		phase mkfs
		/usr/sbin/mke2fs -q -F -t ext4 -U "$EXT4_UUID" \
			-E assume_storage_prezeroed=1,nodiscard,hash_seed="$EXT4_UUID" -L wbstall "$dev" ||
			fail "mke2fs on $dev failed"
		;;
	host)
		dev=/dev/vda
		[ -b $dev ] || fail "no $dev: the ext4 disk image is not attached"
		;;
	*) fail "wbstall.disk=$disk: the host sends null, host or (host-test) loop" ;;
	esac
	phase mount
	mount -t ext4 "$dev" /mnt/disk || fail "cannot mount $dev as ext4"
	EXT4_BDI=$(mount_bdi /mnt/disk) || fail "cannot find the BDI of /mnt/disk"
	echo "$EXT4_BDI" >/tmp/bdi
	emit bdi /tmp/bdi
	emit_cmd bdi-knobs-before bdi_knobs "$EXT4_BDI"
}

# ext4_fio CGROUP: the fio job on /mnt/disk, its processes in CGROUP ("" for
# the root cgroup). The sampler stays in the root cgroup.
ext4_fio() {
	local cg=$1 rc
	fault_fill_disk
	measure_start "$EXT4_BDI" "$cg"
	start_sampler "$EXT4_BDI"
	# This shell joins the cgroup so that fio, its child, starts inside it.
	[ "$cg" = "$ROOT_CGROUP" ] || { echo $$ >"$cg/cgroup.procs" || fail "cannot join $cg"; }
	run_fio /mnt/disk /tmp/fio.json
	rc=$?
	echo $$ >"$ROOT_CGROUP/cgroup.procs"
	stop_sampler
	fio_check $rc /tmp/fio.err
	emit fio /tmp/fio.json
}
