# SPDX-License-Identifier: GPL-2.0
# Scenario fuse-passthrough: the seed's fio job through a FUSE server wbstall
# did not write: libfuse's own example, passthrough_ll, with the writeback
# cache (-o writeback) over a tmpfs directory, as FUSE developers publish
# writeback-cache numbers; or the user's server (qemu-test --fuse-server),
# whose command line the host put in $WB_ROOT/fuse-server. Either gets the
# mount point as its last argument. The BDI is FUSE's (strict_limit=1,
# max_ratio=1), checked in every run; the writeback cache is checked by what
# the kernel does (start_fuse_server).
# Sourced by /init; defines scenario_run.

# The tmpfs directory passthrough_ll serves (and the user's server may).
PT_SRC=/run/pt-src

scenario_run() {
	local bdi
	mkdir -p $PT_SRC
	mount -t tmpfs pt-src $PT_SRC || fail "cannot mount a tmpfs on $PT_SRC"
	if [ -s "$WB_ROOT/fuse-server" ]; then
		# shellcheck disable=SC2046 # the user's words, split as a shell would
		set -- $(cat "$WB_ROOT/fuse-server")
	else
		set -- passthrough_ll -f -o writeback -o source=$PT_SRC
	fi
	start_fuse_server main /mnt/fuse "$@"
	bdi=$(mount_bdi /mnt/fuse) || fail "cannot find the BDI of /mnt/fuse in /proc/self/mountinfo"
	if [ "${WB_verify:-1}" = 1 ]; then
		# The bytes go through the server, on the mount measured next.
		fio_verify /mnt/fuse "the FUSE mount of \`$*\`"
		rm -f /mnt/fuse/verify.*
	fi
	measure_fuse "$bdi"
	signal_fuse_server main
}
