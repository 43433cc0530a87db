# SPDX-License-Identifier: GPL-2.0
# Scenario fuse-nostrict: fuse-strictlimit with the BDI's strict_limit cleared.
# The control that shows the stall is strictlimit-specific: throttling is then
# decided by the global domain, whose own check (nr_dirty > bg_thresh) starts
# writeback on every variant. The global limits are set low
# (wbstall.dirty_bytes, wbstall.dirty_background_bytes) so that the global
# domain really throttles the writers: "throttled, not stalled" is then a
# measured fact, not true by construction.

# shellcheck source=../fuse-strictlimit/run.sh
. "$WB_ROOT/scenarios/fuse-strictlimit/run.sh"

fuse_tune() {
	echo 0 >"/sys/class/bdi/$1/strict_limit" || fail "cannot clear strict_limit of BDI $1"
	[ "$(cat "/sys/class/bdi/$1/strict_limit")" = 0 ] || fail "strict_limit of BDI $1 is still set"
	set_dirty_limits
}
