# SPDX-License-Identifier: GPL-2.0
# Scenario ext4-global: memcg-ext4's disk and job with no memcg limit. The
# control: only the global domain throttles, and its own check
# (nr_dirty > bg_thresh) starts writeback on every variant. The global limits
# are set below the file set (wbstall.dirty_bytes, ...) so that the writers
# really are throttled.

scenario_run() {
	ext4_mount
	set_dirty_limits
	echo global >/tmp/wb_domain
	emit writer-domain /tmp/wb_domain
	ext4_fio "$ROOT_CGROUP"
	collect "$EXT4_BDI"
}
