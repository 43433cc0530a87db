//! `cargo xtask hunt`: search qemu/hunt.toml's settings for writers held
//! with nothing to wait for: the search (`search`), over the space
//! (`guest::space`), by the objective (`analysis::held`).

mod search;
mod slurm;

pub use crate::session::hunt_points::POINTS_FILE;
pub use search::HuntResult;

use std::path::PathBuf;

use anyhow::Result;
use xshell::Shell;

use crate::{
    analysis::held::HeldBy,
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
    pub until: Option<HeldBy>,
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
    /// Points a round: booted at once here (two guests at a time on 2
    /// CPUs), or a Slurm task each with --slurm.
    #[arg(long, default_value_t = 2, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=256))]
    pub batch: u32,
    /// Each point a task of a Slurm job array (in PARTITION, or the
    /// cluster's default): the kernel built in this checkout, on a
    /// filesystem every node mounts at the same path, as `cargo xtask slurm`.
    #[arg(long, value_name = "PARTITION", num_args = 0..=1, default_missing_value = "")]
    pub slurm: Option<String>,
    /// A node's part of --slurm: boot the point whose settings FILE holds.
    #[arg(long, value_name = "FILE", hide = true, requires = "eval_into")]
    pub eval: Option<PathBuf>,
    /// A node's part of --slurm: where that point's session goes.
    #[arg(long, value_name = "DIR", hide = true, requires = "eval")]
    pub eval_into: Option<PathBuf>,
    /// qemu-test's flags, after `--`: one kernel (`--variant NAME`, with
    /// `--kernel-src DIR` from your tree; `--patch` boots its base beside it,
    /// which the hunt refuses), the job (`--quick`, `--runtime`), the guest.
    #[arg(last = true, value_name = "QEMU-TEST FLAGS")]
    pub qemu_args: Vec<String>,
}

impl Hunt {
    pub fn run(self, sh: &Shell) -> Result<()> {
        if let Some(found) = self.hunt(sh)? {
            print!("{}", found.summary);
            found.result()?;
        }
        Ok(())
    }

    /// What the hunt found; none for a node's part of --slurm (`--eval`).
    pub fn hunt(self, sh: &Shell) -> Result<Option<HuntResult>> {
        let file =
            (self.space.clone()).unwrap_or_else(|| util::project_root().join(space::SPACE_FILE));
        let hunt = search::Asked {
            space: Space::load(&file, scenario::any(space::SCRIPT)?)?,
            seed: self.seed,
            boots: self.boots,
            stop_at: self.until,
            qemu_args: self.qemu_args,
            minimise: self.minimise,
            check: self.check,
            parent: util::target_dir().join("hunts"),
            batch: self.batch as usize,
            slurm: self.slurm.map(|p| Some(p).filter(|p| !p.is_empty())),
            space_file: file,
        };
        if let (Some(settings), Some(into)) = (&self.eval, &self.eval_into) {
            hunt.eval_point(sh, settings, into)?;
            return Ok(None);
        }
        hunt.run(sh).map(Some)
    }
}
