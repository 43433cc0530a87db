//! `cargo xtask hunt`: search qemu/hunt.toml's settings for writers held
//! with nothing to wait for: the search (`search`), over the space
//! (`guest::space`), by the objective (`analysis::held`).

mod found;
mod search;

use std::path::PathBuf;

use anyhow::Result;
use xshell::Shell;

use crate::{
    analysis::held::Mechanism,
    guest::{
        scenario,
        space::{self, Space},
    },
    util,
};

/// Search the throttle's settings for stalls, on one kernel.
#[derive(Debug, clap::Args)]
pub struct Hunt {
    /// The search's seed: the same seed on the same kernel gives the same points.
    #[arg(long, default_value_t = 1, value_name = "N")]
    pub seed: u64,
    /// Boots the search may spend (each point is booted the space's `runs`
    /// times); --minimise and --check boot beyond it.
    #[arg(long, default_value_t = 60, value_name = "N")]
    pub boots: u32,
    /// Stop at the first point that holds by this mechanism (and fail if
    /// none does within --boots): `strictlimit` (64dd89ae01f2 on FUSE),
    /// `memcg-unrequested` (64dd89ae01f2 under a memcg), `stale-stats` (the
    /// memcg's stale statistics), `new` (none we know).
    #[arg(long, value_enum, value_name = "MECHANISM")]
    pub until: Option<Mechanism>,
    /// Then relax the best point that held to its minimal form: each
    /// dimension back at the hunt script's default while it still holds (3
    /// boots a dimension).
    #[arg(long)]
    pub minimise: bool,
    /// Then boot the best point that held on VARIANT too (repeatable): does
    /// a fix remove it? e.g. `--check v2 --check upstream`.
    #[arg(long, value_name = "VARIANT")]
    pub check: Vec<String>,
    /// The space to search. Default: qemu/hunt.toml.
    #[arg(long, value_name = "FILE")]
    pub space: Option<PathBuf>,
    /// qemu-test's flags, after `--`: one kernel (`--variant NAME`, with
    /// `--kernel-src DIR` from your tree; `--patch` boots its base beside it,
    /// which the hunt refuses), the job (`--quick`, `--runtime`), the guest.
    #[arg(last = true, value_name = "QEMU-TEST FLAGS")]
    pub qemu_args: Vec<String>,
}

impl Hunt {
    pub fn run(self, sh: &Shell) -> Result<()> {
        let file =
            (self.space.clone()).unwrap_or_else(|| util::project_root().join(space::SPACE_FILE));
        let found = search::Hunt {
            space: Space::load(&file, scenario::any(space::SCRIPT)?)?,
            seed: self.seed,
            boots: self.boots,
            stop_at: self.until,
            qemu_args: self.qemu_args,
            minimise: self.minimise,
            check: self.check,
            parent: util::target_dir().join("hunts"),
        }
        .run(sh)?;
        print!("{}", found.summary);
        found.result()
    }
}
