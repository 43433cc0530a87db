//! The scenarios `qemu-test` can run. Each is a script in `qemu/scenarios/`
//! (sourced by the guest's init); here is what the host needs to know of it.

use anyhow::{bail, Result};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scenario {
    pub name: &'static str,
    pub what: &'static str,
    /// Whether the guest needs the ext4 disk image (virtio-blk).
    pub disk: bool,
    /// Whether the first run also proves that the bytes go through (fio verify
    /// on a data-keeping FUSE mount).
    pub verify: bool,
    /// The writer's BDI has `strict_limit` set (checked in every run, by the
    /// BDI's sysfs knob and by the module).
    pub strictlimit: bool,
    /// Per-job file size (fio --size) unless --size says otherwise.
    pub size: &'static str,
    /// More `wbstall.*` parameters for the guest script.
    pub params: &'static [(&'static str, &'static str)],
}

/// The controls' global dirty limits (vm.dirty_bytes, vm.dirty_background_bytes),
/// below each control's file set (1G on FUSE, 64M on ext4), so that the global
/// domain throttles the writers, and its own check (nr_dirty > bg_thresh), which
/// every variant has, must start writeback. A control whose writers were never
/// throttled proves nothing (its cells are then `idle`).
///
/// Measured here under TCG (quick runs): at 32M/16M no FUSE writer and few ext4
/// writers were ever throttled. On ext4, tighter limits throttle more, but then
/// regressed and v1 take some stall sleeps in the global domain too: their check
/// (`nr_dirty > bg_thresh && !writeback_in_progress(wb)`) is skipped while a
/// flusher pass is finishing, and the writer then sleeps with none running. v2
/// and upstream, which start writeback right before sleeping, take none. At 4M/2M
/// that cost regressed and v1 0.4-0.8% of writer time, at 8M/4M up to 0.9% (the
/// ok threshold is 1%), at 16M/8M 0-0.6% while every run was still throttled;
/// 16M/4M (a wider gap between the start and the throttle point) left most runs
/// unthrottled. On FUSE the race did not show even at 4M/2M.
const FUSE_GLOBAL_THROTTLE: &[(&str, &str)] = &[
    ("dirty_bytes", "4194304"),
    ("dirty_background_bytes", "2097152"),
];
const EXT4_GLOBAL_THROTTLE: &[(&str, &str)] = &[
    ("dirty_bytes", "16777216"),
    ("dirty_background_bytes", "8388608"),
];

pub const ALL: &[Scenario] = &[
    Scenario {
        name: "fuse-strictlimit",
        what: "seed fio job on a writeback-cache FUSE mount (strict_limit=1, max_ratio=1)",
        disk: false,
        verify: true,
        strictlimit: true,
        // 4 x 256M = 1G, overwritten in place: the file set fits in a 2 GiB
        // guest, so page reclaim (which wakes the flusher itself and, under
        // TCG, makes atomic allocations in the writeback path fail) stays out
        // of the measurement.
        size: "256M",
        params: &[],
    },
    Scenario {
        name: "fuse-nostrict",
        what: "the same FUSE mount with strict_limit=0 and global dirty limits of 4M/2M: \
               the control (the global domain throttles)",
        disk: false,
        verify: false,
        strictlimit: false,
        size: "256M",
        params: FUSE_GLOBAL_THROTTLE,
    },
    Scenario {
        name: "memcg-ext4",
        what: "ext4 on virtio-blk, writers in a cgroup with memory.max=128M (file set 64M)",
        disk: true,
        verify: false,
        strictlimit: false,
        // 4 x 16M = 64M, overwritten in place. The memcg's dirty threshold is
        // about 20% of memory.max (25 MB), so its limits bind; the file set is
        // half of memory.max, so reclaim at the limit (which would wake the
        // flusher) never starts; and it is a third of the global background
        // threshold of a 2 GiB guest (184 MB), so the global check, which all
        // variants have, can never start writeback either.
        size: "16M",
        params: &[("memcg_max", "128M")],
    },
    Scenario {
        name: "ext4-global",
        what: "the same ext4 disk and job with no memcg limit and global dirty limits of \
               8M/4M: the control (the global domain throttles)",
        disk: true,
        verify: false,
        strictlimit: false,
        size: "16M",
        params: EXT4_GLOBAL_THROTTLE,
    },
];

pub fn by_name(name: &str) -> Result<Scenario> {
    match ALL.iter().find(|s| s.name == name) {
        Some(s) => Ok(*s),
        None => bail!(
            "unknown scenario `{name}`; known scenarios: {}",
            ALL.iter().map(|s| s.name).collect::<Vec<_>>().join(", ")
        ),
    }
}

/// The selected scenarios, all by default.
pub fn select(names: &[String]) -> Result<Vec<Scenario>> {
    if names.is_empty() {
        return Ok(ALL.to_vec());
    }
    names.iter().map(|n| by_name(n)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_scenario_has_a_guest_script() {
        for s in ALL {
            let path = crate::util::project_root()
                .join("qemu/scenarios")
                .join(format!("{}.sh", s.name));
            let text = std::fs::read_to_string(&path)
                .unwrap_or_else(|_| panic!("{} missing", path.display()));
            // It defines scenario_run, or builds on a scenario that does.
            let base = text
                .lines()
                .find_map(|l| l.strip_prefix(". /wbstall/scenarios/"))
                .map(|f| std::fs::read_to_string(path.with_file_name(f)).unwrap_or_default());
            assert!(
                text.contains("scenario_run()")
                    || base.is_some_and(|b| b.contains("scenario_run()")),
                "{} defines no scenario_run",
                path.display()
            );
        }
    }

    #[test]
    fn unknown_scenarios_list_the_known_ones() {
        let e = by_name("nfs").unwrap_err().to_string();
        assert!(
            e.contains("unknown scenario `nfs`") && e.contains("fuse-strictlimit"),
            "{e}"
        );
        assert_eq!(select(&[]).unwrap().len(), ALL.len());
    }
}
