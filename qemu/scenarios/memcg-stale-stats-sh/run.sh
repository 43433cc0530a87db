# SPDX-License-Identifier: GPL-2.0
# Not a measurement: docs/findings/memcg-stale-stats/reproduce.sh, run as a
# reader runs it (no wbstall: its own null_blk disk, ext4, cgroup, fio writers
# and trace), for $WB_runtime seconds of writing; its output goes to the host
# (`cargo xtask reproducer`), which reads its summary. Busybox's mke2fs has no
# `-t`: the guest's e2fsprogs one is named.

scenario_run() {
	local here=$WB_ROOT/scenarios/memcg-stale-stats-sh rc
	[ -x /usr/sbin/mke2fs ] || fail "the guest has no /usr/sbin/mke2fs (e2fsprogs) for reproduce.sh"
	RUNTIME=$(need runtime) MKFS=/usr/sbin/mke2fs sh "$here/reproduce.sh" /tmp/reproducer \
		>/tmp/reproducer.txt 2>&1
	rc=$?
	# Sent either way: a failure's cause is in it.
	emit reproducer /tmp/reproducer.txt
	[ "$rc" = 0 ] || fail "reproduce.sh failed with status $rc (its output is the reproducer stream)"
}
