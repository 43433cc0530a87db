//! The scenarios `qemu-test` can run. Each is a script in `qemu/scenarios/`
//! (sourced by the guest's init); here is what the host needs to know of it.

use anyhow::{bail, Result};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Scenario {
    pub name: &'static str,
    pub what: &'static str,
    /// Whether the guest needs the ext4 disk image.
    pub disk: bool,
}

pub const ALL: &[Scenario] = &[Scenario {
    name: "fuse-strictlimit",
    what: "seed fio job on a writeback-cache FUSE mount (strict_limit=1, max_ratio=1)",
    disk: false,
}];

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
            assert!(
                text.contains("scenario_run()"),
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
