# SPDX-License-Identifier: GPL-2.0
# Scenario hunt: the script of `cargo xtask hunt`'s points (qemu/hunt.toml),
# every setting a wbstall.* parameter (scenario.toml lists them with their
# defaults). The bodies are those of the scenarios it generalises:
# fuse-strictlimit's mount, memcg-ext4's cgroup, ext4-global's limits,
# memcg-stale-stats' timed disk. Sourced by /init; defines scenario_run.
# shellcheck source=../memcg-ext4/run.sh
. "$WB_ROOT/scenarios/memcg-ext4/run.sh"

# hunt_fuse: the writers on a writeback-cache FUSE mount in the root cgroup,
# the BDI's strict_limit and max_ratio as the point says.
hunt_fuse() {
	local bdi
	start_fuse sink /mnt/fuse main
	bdi=$(mount_bdi /mnt/fuse) || fail "cannot find the BDI of /mnt/fuse in /proc/self/mountinfo"
	need fuse_max_ratio >"/sys/class/bdi/$bdi/max_ratio" || fail "cannot set max_ratio of BDI $bdi"
	need fuse_strict >"/sys/class/bdi/$bdi/strict_limit" || fail "cannot set strict_limit of BDI $bdi"
	set_dirty_limits
	measure_fuse "$bdi"
	signal_fuse main
}

# hunt_ext4: the writers on ext4, in a memcg (memory.max) or in the root
# cgroup, on the plain or the timed null_blk disk.
hunt_ext4() {
	if [ "$(need disk_latency_ms)" != 0 ]; then
		null_blk_timed "$(need disk_latency_ms)" "$(need disk_queue_depth)"
	fi
	set_dirty_limits
	if [ "$(need memcg_max)" != max ]; then
		memcg_run
		return
	fi
	ext4_mount
	echo global >/tmp/wb_domain
	emit writer-domain /tmp/wb_domain
	ext4_fio "$ROOT_CGROUP"
	collect "$EXT4_BDI"
}

scenario_run() {
	case "$(need fs)" in
	fuse) hunt_fuse ;;
	ext4) hunt_ext4 ;;
	*) fail "wbstall.fs=$(need fs): the hunt knows ext4 and fuse" ;;
	esac
}
