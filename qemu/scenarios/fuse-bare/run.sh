# SPDX-License-Identifier: GPL-2.0
# Scenario fuse-bare: fuse-strictlimit's mount and fio job, nothing else (see
# scenario.toml). Sourced by /init, which skips the module for it.

scenario_run() {
	local rc
	start_fuse sink /mnt/fuse main
	run_fio /mnt/fuse /tmp/fio.json
	rc=$?
	fuse_check main
	fio_check $rc /tmp/fio.err
	emit fio /tmp/fio.json
	signal_fuse main
}
