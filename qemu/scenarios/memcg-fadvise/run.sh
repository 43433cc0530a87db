# SPDX-License-Identifier: GPL-2.0
# Scenario memcg-fadvise: memcg-ext4's cgroup and disk, with the job that
# memcg-ext4 had until 2026-12-03: a 64M file set overwritten in place, and
# fio's default invalidate=1, whose posix_fadvise(DONTNEED) at every loop
# writes each file back from fio's own process. Those flushes, not the
# kernel's writeback logic, write most of the pages (85%, docs/measurements.md),
# and they leave the memcg's statistics counting writeback that has completed:
# the fixed kernels' 2 s "declined" waits. Kept for that (issue 34), not in
# the default plan. Sourced by /init; defines scenario_run.
# shellcheck source=../memcg-ext4/run.sh
. "$WB_ROOT/scenarios/memcg-ext4/run.sh"
