//! The guest/host contract, one owner for each name: the streams the guest
//! sends over the results port (`emit NAME FILE` and `emit_cmd NAME CMD` in
//! `qemu/lib.sh`, `qemu/init` and the scenarios' `run.sh`) and the `wbstall.*`
//! boot parameters its init turns into `$WB_<key>`. The host names a stream or
//! a parameter only through this file, and a test reads the guest's scripts
//! and fails on a name one side uses that the other does not know.

/// The streams, by what they carry.
pub mod stream {
    /// fio's JSON output (`--output-format=json`).
    pub const FIO: &str = "fio";
    /// fio's wall time in the guest, `<seconds> <nanoseconds>` lines.
    pub const FIO_WALL: &str = "fio-wall";
    /// The verify pass on the data-keeping FUSE mount.
    pub const FIO_VERIFY: &str = "fio-verify";
    /// The writers' BDI, `major:minor`.
    pub const BDI: &str = "bdi";
    /// `global` or `memcg`: the writers' writeback domain.
    pub const WRITER_DOMAIN: &str = "writer-domain";
    /// The writers' cgroup inode (the tracepoints' `cgroup_ino`).
    pub const WRITER_CGROUP_INO: &str = "writer-cgroup-ino";
    /// The module's debugfs files.
    pub const WBSTALL_STATS: &str = "wbstall-stats";
    pub const WBSTALL_THRESHOLDS: &str = "wbstall-thresholds";
    pub const WBSTALL_SUMMARY: &str = "wbstall-summary";
    /// The witness's hist files.
    pub const WITNESS_BDP: &str = "witness-balance_dirty_pages";
    pub const WITNESS_WAKE: &str = "witness-writeback_wake_background";
    /// The witness's counts from counting instances, where the kernel has no
    /// hist triggers (host-test).
    pub const WITNESS_COUNTS: &str = "witness-counts";
    /// The tracefs detector's trace and its ring buffer's per-CPU stats.
    pub const TRACE_EVENTS: &str = "trace-events";
    pub const TRACE_STATS: &str = "trace-stats";
    /// The writers' wake-ups (`sched_wakeup`; before 2026-12-07 also their
    /// `sched_switch`), from a
    /// tracing instance of their own (filtered to fio), and its
    /// ring buffers' stats.
    pub const TRACE_SCHED: &str = "trace-sched";
    pub const TRACE_SCHED_STATS: &str = "trace-sched-stats";
    /// `/proc/vmstat` before and after the measurement.
    pub const VMSTAT_BEFORE: &str = "vmstat-before";
    pub const VMSTAT: &str = "vmstat";
    /// The BDI's debugfs stats before and after.
    pub const BDI_STATS_BEFORE: &str = "bdi-stats-before";
    pub const BDI_STATS: &str = "bdi-stats";
    /// The BDI's sysfs knobs before the scenario set them, and as measured.
    #[cfg_attr(
        not(test),
        allow(
            dead_code,
            reason = "kept in results.bin, not parsed: named for the contract test"
        )
    )]
    pub const BDI_KNOBS_BEFORE: &str = "bdi-knobs-before";
    pub const BDI_KNOBS: &str = "bdi-knobs";
    /// `vm.dirty_*` as the measurement ran.
    pub const VM_KNOBS: &str = "vm-knobs";
    /// The writers' cgroup `memory.events`, `memory.stat` and limits.
    pub const MEMCG_EVENTS: &str = "memcg-events";
    #[cfg_attr(
        not(test),
        allow(
            dead_code,
            reason = "kept in results.bin, not parsed: named for the contract test"
        )
    )]
    pub const MEMCG_STAT: &str = "memcg-stat";
    #[cfg_attr(
        not(test),
        allow(
            dead_code,
            reason = "kept in results.bin, not parsed: named for the contract test"
        )
    )]
    pub const MEMCG_LIMITS: &str = "memcg-limits";
    /// Where the measurement started in the kernel's timer cycles:
    /// `cycle_ms=C`, `offset_ms=O`, `start_ms=S` lines (S: uptime at the start, 10 ms
    /// resolution). Only scenarios with `[phase]` send it.
    pub const START_PHASE: &str = "start-phase";
    /// The kernel log at the end.
    pub const DMESG: &str = "dmesg";
    /// What the guest ran on (clocksource, ...).
    pub const GUEST_ENV: &str = "guest-env";
    /// The sampler's time series.
    pub const SAMPLES: &str = "samples";
    /// `<phase> <uptime s>` per line: where a boot's time went.
    pub const PHASES: &str = "phases";
    /// `module-cycles`: the rmmod/insmod cycles done.
    pub const CYCLES: &str = "cycles";
    /// `module-cycles`: the memcg churn done (`key=value` words).
    pub const CHURN: &str = "churn";
    /// `module-cycles`: the wbstall suite's KTAP after a second run on the
    /// same load (`/sys/kernel/debug/kunit/wbstall/run`).
    pub const KUNIT_RERUN: &str = "kunit-rerun";
    /// `memcg-stale-stats-sh`: what docs/findings/memcg-stale-stats/reproduce.sh
    /// printed.
    pub const REPRODUCER: &str = "reproducer";
    /// memcg-flush-cost (`cargo xtask flush-cost`): its hist triggers' files,
    /// each after an `@event <system>/<event>` line.
    pub const FLUSH_COST_HISTS: &str = "flush-cost-hists";
    /// memcg-flush-cost: every writer's fio JSON, back to back.
    pub const FLUSH_COST_FIO: &str = "flush-cost-fio";
    /// memcg-flush-cost: `uptime <secs>` and /proc/stat's `cpu` line, before
    /// and after the writers.
    pub const FLUSH_COST_CPU: &str = "flush-cost-cpu";
    /// `module-cycles`: the module's `stats` of each load of the churn, by
    /// its number (`wbstall-stats-load-0`, ...).
    pub const STATS_OF_LOAD: &str = "wbstall-stats-load-";

    /// A KUnit suite's KTAP output: `ktap-<suite>`.
    pub const KTAP_PREFIX: &str = "ktap-";
    /// A FUSE server's files: `fuse-<tag>-ready`, `-stats`, `-log`.
    pub const FUSE_PREFIX: &str = "fuse-";

    /// The `fuse-<tag>-<what>` stream of the FUSE server mounted as `tag`.
    pub fn fuse(tag: &str, what: &str) -> String {
        format!("{FUSE_PREFIX}{tag}-{what}")
    }

    /// Every stream with a fixed name.
    #[cfg(test)]
    pub const ALL: &[&str] = &[
        FIO,
        FIO_WALL,
        FIO_VERIFY,
        BDI,
        WRITER_DOMAIN,
        WRITER_CGROUP_INO,
        WBSTALL_STATS,
        WBSTALL_THRESHOLDS,
        WBSTALL_SUMMARY,
        WITNESS_BDP,
        WITNESS_WAKE,
        WITNESS_COUNTS,
        TRACE_EVENTS,
        TRACE_STATS,
        TRACE_SCHED,
        TRACE_SCHED_STATS,
        VMSTAT_BEFORE,
        VMSTAT,
        BDI_STATS_BEFORE,
        BDI_STATS,
        BDI_KNOBS_BEFORE,
        BDI_KNOBS,
        VM_KNOBS,
        MEMCG_EVENTS,
        MEMCG_STAT,
        MEMCG_LIMITS,
        START_PHASE,
        DMESG,
        GUEST_ENV,
        SAMPLES,
        PHASES,
        CYCLES,
        CHURN,
        KUNIT_RERUN,
        REPRODUCER,
        FLUSH_COST_HISTS,
        FLUSH_COST_FIO,
        FLUSH_COST_CPU,
    ];

    /// Streams whose name the guest completes (`ktap-$suite`, `fuse-$tag-...`,
    /// `wbstall-$f`): the literal part before the first `$`.
    #[cfg(test)]
    pub const FAMILIES: &[&str] = &[KTAP_PREFIX, FUSE_PREFIX, "wbstall-"];
}

/// The `wbstall.<key>` boot parameters (`$WB_<key>` in the guest).
pub mod param {
    pub const SCENARIO: &str = "scenario";
    /// The CPUs QEMU gives the guest (-smp); init fails unless all are online.
    pub const CPUS: &str = "cpus";
    /// memcg-flush-cost: how many memcgs write at once.
    pub const MEMCGS: &str = "memcgs";
    pub const SIZE: &str = "size";
    pub const NUMJOBS: &str = "numjobs";
    /// How fio's writers write (`guest::job::WriteKind`'s names).
    pub const WRITE: &str = "write";
    pub const RUNTIME: &str = "runtime";
    pub const RAMP: &str = "ramp";
    pub const BS: &str = "bs";
    pub const SAMPLE_MS: &str = "sample_ms";
    pub const VERIFY: &str = "verify";
    pub const DETECTOR: &str = "detector";
    /// fio's `invalidate` (the scenario's `invalidate`, 0 or 1).
    pub const INVALIDATE: &str = "invalidate";
    /// The measurement starts when uptime mod `phase_cycle_ms` is `phase_ms`.
    pub const PHASE_CYCLE_MS: &str = "phase_cycle_ms";
    pub const PHASE_MS: &str = "phase_ms";
    /// The disk scenarios' device: `null` or `host` (`guest::disk::Disk`).
    pub const DISK: &str = "disk";
    /// `module-stress`: how many rmmod/insmod cycles.
    pub const CYCLES: &str = "cycles";
    /// `module-stress`: how many memcg churn cycles.
    pub const CHURN: &str = "churn";
    /// `bench-fuse`: boot without the harness.
    #[cfg_attr(
        not(test),
        allow(
            dead_code,
            reason = "set by a scenario's data (scenario.toml) or a task's own boot: named for the contract test"
        )
    )]
    pub const BARE: &str = "bare";
    /// The scenarios' own (`Scenario::params`).
    #[cfg_attr(
        not(test),
        allow(
            dead_code,
            reason = "set by a scenario's data (scenario.toml) or a task's own boot: named for the contract test"
        )
    )]
    pub const DIRTY_BYTES: &str = "dirty_bytes";
    #[cfg_attr(
        not(test),
        allow(
            dead_code,
            reason = "set by a scenario's data (scenario.toml) or a task's own boot: named for the contract test"
        )
    )]
    /// The hunt's script (qemu/scenarios/hunt): its file system, ext4 or fuse.
    pub const FS: &str = "fs";
    #[cfg_attr(
        not(test),
        allow(
            dead_code,
            reason = "set by a scenario's data (scenario.toml) or a task's own boot: named for the contract test"
        )
    )]
    /// The hunt's script: the FUSE BDI's strict_limit.
    pub const FUSE_STRICT: &str = "fuse_strict";
    #[cfg_attr(
        not(test),
        allow(
            dead_code,
            reason = "set by a scenario's data (scenario.toml) or a task's own boot: named for the contract test"
        )
    )]
    /// The hunt's script: the FUSE BDI's max_ratio.
    pub const FUSE_MAX_RATIO: &str = "fuse_max_ratio";
    #[cfg_attr(
        not(test),
        allow(
            dead_code,
            reason = "set by a scenario's data (scenario.toml) or a task's own boot: named for the contract test"
        )
    )]
    pub const DIRTY_BACKGROUND_BYTES: &str = "dirty_background_bytes";
    #[cfg_attr(
        not(test),
        allow(
            dead_code,
            reason = "set by a scenario's data (scenario.toml) or a task's own boot: named for the contract test"
        )
    )]
    pub const MEMCG_MAX: &str = "memcg_max";
    #[cfg_attr(
        not(test),
        allow(
            dead_code,
            reason = "set by a scenario's data (scenario.toml) or a task's own boot: named for the contract test"
        )
    )]
    /// memcg-stale-stats: the completion time of its timed null_blk disk.
    pub const DISK_LATENCY_MS: &str = "disk_latency_ms";
    #[cfg_attr(
        not(test),
        allow(
            dead_code,
            reason = "set by a scenario's data (scenario.toml) or a task's own boot: named for the contract test"
        )
    )]
    /// memcg-stale-stats: its timed null_blk disk's queue depth (configfs
    /// `hw_queue_depth`), so that a flusher pass holds more pages in flight.
    pub const DISK_QUEUE_DEPTH: &str = "disk_queue_depth";
    #[cfg_attr(
        not(test),
        allow(
            dead_code,
            reason = "set by a scenario's data (scenario.toml) or a task's own boot: named for the contract test"
        )
    )]
    /// fio's `thinktime` (microseconds after every block; 0 when unset): a
    /// writer that dirties at a fixed pace and never catches up after a stall.
    pub const THINKTIME_US: &str = "thinktime_us";
    #[cfg_attr(
        not(test),
        allow(
            dead_code,
            reason = "set by a scenario's data (scenario.toml) or a task's own boot: named for the contract test"
        )
    )]
    /// Trace events a scenario adds to the tracefs detector's (SYSTEM/EVENT, comma-separated).
    pub const TRACE_EXTRA: &str = "trace_extra";
    #[cfg_attr(
        not(test),
        allow(
            dead_code,
            reason = "set by a scenario's data (scenario.toml) or a task's own boot: named for the contract test"
        )
    )]
    pub const FUSE_THREADS: &str = "fuse_threads";
    /// Test hook, never set by wbstall: `fault_start` in `qemu/lib.sh` injects
    /// a fault into the measurement (`kill-fuse`, `kill-fio`, `oom`,
    /// `disk-full`), given as `--kernel-arg wbstall.fault=KIND`, so that a test
    /// sees the run fail naming it.
    pub const FAULT: &str = "fault";

    /// Every parameter the host may set.
    #[cfg(test)]
    pub const ALL: &[&str] = &[
        SCENARIO,
        CPUS,
        MEMCGS,
        SIZE,
        NUMJOBS,
        WRITE,
        RUNTIME,
        RAMP,
        BS,
        SAMPLE_MS,
        VERIFY,
        DETECTOR,
        INVALIDATE,
        PHASE_CYCLE_MS,
        PHASE_MS,
        DISK,
        CYCLES,
        CHURN,
        BARE,
        DIRTY_BYTES,
        FS,
        FUSE_STRICT,
        FUSE_MAX_RATIO,
        DIRTY_BACKGROUND_BYTES,
        MEMCG_MAX,
        DISK_LATENCY_MS,
        DISK_QUEUE_DEPTH,
        THINKTIME_US,
        TRACE_EXTRA,
        FUSE_THREADS,
        FAULT,
    ];
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::collections::BTreeSet;

    /// The guest's scripts: init, lib.sh and every scenario's run.sh.
    fn scripts() -> Vec<(String, String)> {
        let root = crate::util::project_root().join("qemu");
        let mut paths = vec![
            root.join("init"),
            root.join("host-init"),
            root.join("lib.sh"),
        ];
        for e in std::fs::read_dir(root.join("scenarios")).unwrap() {
            let run = e.unwrap().path().join("run.sh");
            if run.is_file() {
                paths.push(run);
            }
        }
        paths
            .into_iter()
            .map(|p| {
                (
                    p.display().to_string(),
                    std::fs::read_to_string(&p).unwrap(),
                )
            })
            .collect()
    }

    /// The names after `emit`/`emit_cmd` in `text`, quotes dropped; a name
    /// the shell completes is cut at its first `$`.
    fn emitted(text: &str) -> Vec<String> {
        let mut out = Vec::new();
        for line in text.lines().map(str::trim) {
            if line.starts_with('#') {
                continue;
            }
            let words: Vec<&str> = line.split_whitespace().collect();
            for w in words.windows(2) {
                if w[0] == "emit" || w[0] == "emit_cmd" {
                    let name = w[1].trim_matches('"');
                    let name = name.split('$').next().unwrap_or("");
                    out.push(name.to_string());
                }
            }
        }
        out
    }

    /// The `$WB_<key>` and `need <key>` names in `text` (comments skipped).
    fn params(text: &str) -> BTreeSet<String> {
        let key_at = |s: &str| -> String {
            s.chars()
                .take_while(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || *c == '_')
                .collect()
        };
        let mut out = BTreeSet::new();
        for line in text.lines().filter(|l| !l.trim_start().starts_with('#')) {
            for (i, _) in line.match_indices("WB_") {
                let key = key_at(&line[i + 3..]);
                if !key.is_empty() {
                    out.insert(key);
                }
            }
        }
        for line in text.lines().filter(|l| !l.trim_start().starts_with('#')) {
            for rest in line.split("need ").skip(1) {
                let key = key_at(rest);
                if !key.is_empty() {
                    out.insert(key);
                }
            }
        }
        out
    }

    #[test]
    fn every_stream_the_guest_sends_is_named_here_and_the_reverse() {
        let scripts = scripts();
        let mut sent: BTreeSet<String> = BTreeSet::new();
        for (path, text) in &scripts {
            for name in emitted(text) {
                // `emit "$name" FILE` inside emit_cmd itself.
                if name.is_empty() {
                    continue;
                }
                let known = stream::ALL.contains(&name.as_str())
                    || stream::FAMILIES.iter().any(|f| name.starts_with(f));
                assert!(
                    known,
                    "{path} sends the stream `{name}`, which xtask/src/guest/protocol.rs \
                     does not name"
                );
                sent.insert(name);
            }
        }
        for name in stream::ALL {
            let family = stream::FAMILIES
                .iter()
                .any(|f| name.starts_with(f) && sent.contains(*f));
            assert!(
                sent.contains(*name) || family,
                "xtask/src/guest/protocol.rs names the stream `{name}`, which no guest \
                 script sends"
            );
        }
    }

    #[test]
    fn every_boot_parameter_the_guest_reads_is_named_here_and_the_reverse() {
        let mut read: BTreeSet<String> = BTreeSet::new();
        for (_, text) in scripts() {
            read.extend(params(&text));
        }
        for key in &read {
            assert!(
                param::ALL.contains(&key.as_str()),
                "the guest reads the boot parameter `wbstall.{key}` ($WB_{key}), which \
                 xtask/src/guest/protocol.rs does not name"
            );
        }
        for key in param::ALL {
            assert!(
                read.contains(*key),
                "xtask/src/guest/protocol.rs names the boot parameter `{key}`, which no \
                 guest script reads"
            );
        }
    }

    #[test]
    fn a_stream_or_parameter_unknown_to_either_side_is_found() {
        assert_eq!(
            emitted("\temit fio-wall /tmp/w\n\temit_cmd \"wbstall-$f\" cat\n# emit no\n"),
            ["fio-wall", "wbstall-"]
        );
        assert!(!stream::ALL.contains(&"fio-walltime"));
        let p = params("x=${WB_sample_ms:-0}; need memcg_max; $WB_new_knob");
        assert_eq!(
            p.into_iter().collect::<Vec<_>>(),
            ["memcg_max", "new_knob", "sample_ms"]
        );
        assert!(!param::ALL.contains(&"new_knob"));
    }
}
