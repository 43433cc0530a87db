# SPDX-License-Identifier: GPL-2.0
# Scenario memcg-stale-stats (issue 34): memcg-ext4's cgroup and job (no
# fio-side flushes) on a null_blk disk whose requests complete a fixed time
# after they were queued (wbstall.disk_latency_ms, a guest timer), so that
# pages stay under writeback that long and every refresh of the memcg's
# statistics (every 2 s) catches many of them; scenario.toml says how it is
# sized. The trace also records every flush of the memcg statistics
# (wbstall.trace_extra: memcg:memcg_flush_stats). Sourced by /init; defines
# scenario_run.
# shellcheck source=../memcg-ext4/run.sh
. "$WB_ROOT/scenarios/memcg-ext4/run.sh"

scenario_run() {
	null_blk_timed "$(need disk_latency_ms)" "$(need disk_queue_depth)"
	memcg_run
}
