#!/bin/sh
# SPDX-License-Identifier: GPL-2.0
#
# Writers in a memcg held by balance_dirty_pages() on stale memcg statistics:
# a reproducer that needs only root, cgroup v2, null_blk (configfs), ext4,
# tracefs and fio (reproduce.fio, next to this script).
#
# It makes a memory-backed null_blk disk whose every request completes
# LATENCY_MS after it was queued (irqmode=2), DEPTH requests in flight, an
# ext4 on it, and a cgroup with memory.max=MEMCG_MAX; runs NUMJOBS paced fio
# writers inside it for RUNTIME seconds while tracing the throttle, and
# prints what the throttle saw against what was true:
#
#   held        balance_dirty_pages() sleeps of the writers with
#               task_ratelimit=0 and dirty > limit (the memcg domain, as the
#               throttle read it, over its limit);
#   stale-held  of those, the ones whose last global_dirty_state said that
#               fewer than LIMIT/10 pages were dirty or under writeback
#               machine-wide: the throttle counted pages that were clean.
#               Only this memcg should write meanwhile (an idle machine):
#               other writers make the machine-wide counts an upper bound.
#
# and, when the kernel has the memcg:memcg_flush_stats event, how old the
# memcg statistics were at the writers' throttle calls (time since the last
# flush that covered the memcg: the root's or the writers' memcg's, with
# force=1 or needs_flush=1).
#
# On Linux 7.3.4 (inside wbstall's QEMU guest: 2 vCPUs, 2 GiB, the defaults
# below) the stale-held sleeps were 15.6% of the writers' time, in windows
# that end at the periodic flush every 2 s, the statistics up to 2021 ms
# old, 9.4 MiB/s; with memcg-bounded none, at most 87 ms old, 16.1 MiB/s
# (docs/findings/memcg-stale-stats/README.md).
#
# Usage: sudo sh reproduce.sh [OUTDIR]     (default: a new directory in /tmp)
#        sh reproduce.sh --analyse TRACE [CGROUP_INO]   (a recorded trace only)
# Environment (defaults): LATENCY_MS=250 DEPTH=256 MEMCG_MAX=128M NUMJOBS=4
#   SIZE=64M BS=128k THINK_US=25000 RUNTIME=60 DISK_MB=1024 TRACE_KB=16384
#   MKFS=(mkfs.ext4 or mke2fs from PATH)
# It removes what it made (mount, disk, cgroup, tracing state) when it ends.

set -eu

LATENCY_MS=${LATENCY_MS:-250}
DEPTH=${DEPTH:-256}
MEMCG_MAX=${MEMCG_MAX:-128M}
NUMJOBS=${NUMJOBS:-4}
SIZE=${SIZE:-64M}
BS=${BS:-128k}
THINK_US=${THINK_US:-25000}
RUNTIME=${RUNTIME:-60}
DISK_MB=${DISK_MB:-1024}
TRACE_KB=${TRACE_KB:-16384}

HERE=$(cd "$(dirname "$0")" && pwd)
OUT=${1:-$(mktemp -d /tmp/memcg-stale-stats.XXXXXX)}
NAME=memcg_stale_stats
NULLB=/sys/kernel/config/nullb/$NAME
CG=/sys/fs/cgroup/$NAME
MNT=$OUT/mnt
T=/sys/kernel/tracing
EVENTS="writeback/balance_dirty_pages writeback/global_dirty_state
	writeback/writeback_wake_background writeback/writeback_pages_written"

die() {
	echo "reproduce.sh: $*" >&2
	exit 2
}

need_tool() {
	command -v "$1" >/dev/null || die "$1 is missing: install it ($2)"
}

cleanup() {
	set +e
	[ -w "$T/tracing_on" ] && echo 0 >"$T/tracing_on"
	for e in $EVENTS memcg/memcg_flush_stats; do
		[ -w "$T/events/$e/enable" ] && echo 0 >"$T/events/$e/enable"
	done
	grep -q " $MNT " /proc/mounts && umount "$MNT"
	[ -d "$CG" ] && rmdir "$CG"
	if [ -d "$NULLB" ]; then
		echo 0 >"$NULLB/power"
		rmdir "$NULLB"
	fi
}

preflight() {
	[ "$(id -u)" = 0 ] || die "run as root"
	awk '$2 == "/sys/fs/cgroup" && $3 == "cgroup2" { found = 1 } END { exit !found }' \
		/proc/mounts ||
		die "/sys/fs/cgroup is not cgroup v2 (boot with systemd.unified_cgroup_hierarchy=1)"
	grep -qw memory /sys/fs/cgroup/cgroup.controllers ||
		die "the memory controller is not available at the cgroup root"
	need_tool fio "Debian: apt-get install fio"
	# e2fsprogs' (busybox's mke2fs has no -t: give MKFS=/usr/sbin/mke2fs).
	MKFS=${MKFS:-$(command -v mkfs.ext4 || command -v mke2fs)} ||
		die "mkfs.ext4 is missing: install it (Debian: apt-get install e2fsprogs)"
	need_tool awk "any awk"
	[ -f "$HERE/reproduce.fio" ] || die "$HERE/reproduce.fio is missing"
	[ -d "$T/events" ] || mount -t tracefs nodev "$T" ||
		die "cannot mount tracefs on $T"
	grep -q " /sys/kernel/config " /proc/mounts ||
		mount -t configfs none /sys/kernel/config || die "cannot mount configfs"
	[ -d /sys/kernel/config/nullb ] || modprobe null_blk nr_devices=0 ||
		die "cannot load null_blk (CONFIG_BLK_DEV_NULL_BLK)"
	[ -d /sys/kernel/config/nullb ] || die "null_blk has no configfs interface"
	if [ -e "$NULLB" ] || [ -e "$CG" ]; then
		die "$NULLB or $CG exists: a previous run did not clean up; remove them"
	fi
}

# The slow disk: memory-backed, every request completing LATENCY_MS after it
# was queued (a timer), at most DEPTH in flight.
make_disk() {
	mkdir "$NULLB"
	echo "$DISK_MB" >"$NULLB/size"
	echo 1 >"$NULLB/memory_backed"
	echo 4096 >"$NULLB/blocksize"
	echo 2 >"$NULLB/irqmode"
	echo "$((LATENCY_MS * 1000000))" >"$NULLB/completion_nsec"
	echo "$DEPTH" >"$NULLB/hw_queue_depth"
	echo 1 >"$NULLB/power"
	[ -b "/dev/$NAME" ] || die "null_blk made no /dev/$NAME"
	# No lazy inode-table initialisation writing while fio measures.
	"$MKFS" -q -F -t ext4 -E lazy_itable_init=0,lazy_journal_init=0,nodiscard "/dev/$NAME"
	mkdir -p "$MNT"
	mount -t ext4 "/dev/$NAME" "$MNT"
}

start_trace() {
	echo 0 >"$T/tracing_on"
	echo "$TRACE_KB" >"$T/buffer_size_kb"
	echo >"$T/trace"
	for e in $EVENTS; do
		echo 1 >"$T/events/$e/enable"
	done
	if [ -e "$T/events/memcg/memcg_flush_stats/enable" ]; then
		echo 1 >"$T/events/memcg/memcg_flush_stats/enable"
	else
		echo "note: no memcg:memcg_flush_stats event: no statistics ages" >&2
	fi
	echo 1 >"$T/tracing_on"
}

run_writers() {
	echo +memory >/sys/fs/cgroup/cgroup.subtree_control
	mkdir "$CG"
	echo "$MEMCG_MAX" >"$CG/memory.max"
	sync
	echo 3 >/proc/sys/vm/drop_caches
	start_trace
	REPRO_DIR=$MNT REPRO_BS=$BS REPRO_SIZE=$SIZE REPRO_NUMJOBS=$NUMJOBS \
		REPRO_RUNTIME=$RUNTIME REPRO_THINK_US=$THINK_US \
		sh -c 'echo $$ >"$1/cgroup.procs" && exec fio --eta=never --output="$2" "$3"' \
		sh "$CG" "$OUT/fio.txt" "$HERE/reproduce.fio"
	echo 0 >"$T/tracing_on"
	cp "$T/trace" "$OUT/trace.txt"
	cp "$CG/memory.stat" "$OUT/memory.stat"
}

# analyse TRACE INO: what the throttle saw against what was true, from the
# trace (see the top), for the writers of the cgroup of inode INO.
analyse() {
	awk -v ino="$2" -v jobs="$NUMJOBS" -v runtime="$RUNTIME" '
	function field(name,   i) {
		for (i = 1; i <= NF; i++)
			if (index($i, name "=") == 1)
				return substr($i, length(name) + 2) + 0
		return -1
	}
	{ t = $0; sub(/: .*/, "", t); n = split(t, w, " "); t = w[n] + 0 }
	/ global_dirty_state: / { truth = field("dirty") + field("writeback"); seen = 1 }
	/ memcg_flush_stats: / {
		id = field("memcg_id")
		if (field("force") == 1 || field("needs_flush") == 1) {
			if (id == 1 || id == mine) last = t
			if (id != 1) { flushed[id] = t; ids[id] = 1 }
		}
	}
	/ balance_dirty_pages: / && field("cgroup_ino") == ino {
		calls++
		pause = field("pause")
		if (pause > 0) { sleeps++; asleep += pause }
		if (field("task_ratelimit") == 0 && field("dirty") > field("limit")) {
			held++; held_ms += pause
			if (seen && truth < field("limit") / 10) { stale++; stale_ms += pause }
			if (last != "") { age = t - last; if (age > maxage) maxage = age; ages += age; aged++ }
		}
	}
	END {
		total = jobs * runtime * 1000
		printf "throttle calls of the writers: %d, %d sleeps, %d ms (%.1f%% of %d writer-ms)\n", \
			calls, sleeps, asleep, 100 * asleep / total, total
		printf "held (task_ratelimit=0, dirty > limit): %d sleeps, %d ms (%.1f%%)\n", \
			held, held_ms, 100 * held_ms / total
		printf "stale-held (machine-wide dirty+writeback < limit/10): %d sleeps, %d ms (%.1f%%)\n", \
			stale, stale_ms, 100 * stale_ms / total
		if (aged)
			printf "age of the memcg statistics at held calls: mean %.0f ms, max %.0f ms\n", \
				1000 * ages / aged, 1000 * maxage
	}' mine="$(flush_id "$1")" "$1"
}

# The writers' memcg id as memcg_flush_stats prints it: the one non-root id
# that flushed (an idle machine has few others), or none.
flush_id() {
	awk '/ memcg_flush_stats: / {
		for (i = 1; i <= NF; i++)
			if (index($i, "memcg_id=") == 1 && substr($i, 10) != "1")
				n[substr($i, 10)]++
	} END { for (k in n) if (n[k] > best) { best = n[k]; id = k }; print id }' "$1"
}

# The cgroup whose writers the throttle traced most, besides the root (1):
# the writers' own, in a trace of this reproducer.
writers_ino() {
	awk '/ balance_dirty_pages: / {
		for (i = 1; i <= NF; i++)
			if (index($i, "cgroup_ino=") == 1 && substr($i, 12) != "1")
				n[substr($i, 12)]++
	} END { for (k in n) if (n[k] > best) { best = n[k]; id = k }; print id }' "$1"
}

if [ "${1-}" = --analyse ]; then
	# A recorded trace alone (nothing is run): --analyse TRACE [CGROUP_INO].
	if [ $# -lt 2 ] || [ $# -gt 3 ] || [ ! -f "$2" ]; then
		die "usage: reproduce.sh --analyse TRACE [CGROUP_INO]"
	fi
	ino=${3:-$(writers_ino "$2")}
	[ -n "$ino" ] || die "$2 has no balance_dirty_pages event of a cgroup other than the root"
	analyse "$2" "$ino"
	exit 0
fi
preflight
mkdir -p "$OUT"
trap cleanup EXIT
uname -r >"$OUT/uname.txt"
make_disk
run_writers
{
	analyse "$OUT/trace.txt" "$(stat -c %i "$CG")"
	grep -m1 "WRITE: bw=" "$OUT/fio.txt" || true
} | tee "$OUT/summary.txt"
echo "trace, fio output and summary in $OUT"
