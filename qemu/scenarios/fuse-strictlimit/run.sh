# SPDX-License-Identifier: GPL-2.0
# Scenario fuse-strictlimit: the seed's fio job on a FUSE mount with the
# writeback cache, the BDI as FUSE sets it up (strict_limit=1, max_ratio=1).
# Sourced by /init; defines scenario_run.

# Hook for variants of this scenario (fuse-nostrict overrides it).
fuse_tune() {
	:
}

scenario_run() {
	local bdi
	if [ "${WB_verify:-1}" = 1 ]; then
		# The bytes go through: write and read back with checksums on a mount
		# that keeps the data.
		start_fuse mem /mnt/verify verify
		fio_verify /mnt/verify "the mem-backed FUSE mount"
		stop_fuse verify
	fi

	start_fuse sink /mnt/fuse main
	bdi=$(mount_bdi /mnt/fuse) || fail "cannot find the BDI of /mnt/fuse in /proc/self/mountinfo"
	fuse_tune "$bdi"
	measure_fuse "$bdi"
	signal_fuse main
}
