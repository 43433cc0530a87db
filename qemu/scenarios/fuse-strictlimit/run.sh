# SPDX-License-Identifier: GPL-2.0
# Scenario fuse-strictlimit: the seed's fio job on a FUSE mount with the
# writeback cache, the BDI as FUSE sets it up (strict_limit=1, max_ratio=1).
# Sourced by /init; defines scenario_run.

# Hook for variants of this scenario (fuse-nostrict overrides it).
fuse_tune() {
	:
}

scenario_run() {
	local bdi rc
	if [ "${WB_verify:-1}" = 1 ]; then
		# The bytes go through: write and read back with checksums on a mount
		# that keeps the data.
		start_fuse mem /mnt/verify verify
		fio --eta=never --name=verify --directory=/mnt/verify --ioengine=psync --rw=write --bs=128k \
			--size=8M --verify=crc32c --do_verify=1 --direct=0 \
			--output-format=json --output=/tmp/fio-verify.json ||
			fail "fio verify on the mem-backed FUSE mount failed"
		emit fio-verify /tmp/fio-verify.json
		stop_fuse verify
	fi

	start_fuse sink /mnt/fuse main
	bdi=$(mount_bdi /mnt/fuse) || fail "cannot find the BDI of /mnt/fuse in /proc/self/mountinfo"
	echo "$bdi" >/tmp/bdi
	emit bdi /tmp/bdi
	fuse_tune "$bdi"
	emit_cmd bdi-knobs-before bdi_knobs "$bdi"

	echo global >/tmp/wb_domain
	emit writer-domain /tmp/wb_domain
	measure_start "$bdi" /sys/fs/cgroup
	start_sampler "$bdi"
	run_fio /mnt/fuse /tmp/fio.json
	rc=$?
	stop_sampler
	[ $rc = 0 ] || fail "fio exited with status $rc"
	emit fio /tmp/fio.json
	collect "$bdi"
	signal_fuse main
}
