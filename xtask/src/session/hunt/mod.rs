//! `cargo xtask hunt`'s search of qemu/hunt.toml's settings for writers
//! held with nothing to wait for, made of the task's request: the search
//! (`search`), its rounds here (one qemu-test session a round) or on a Slurm
//! cluster (`slurm`), a node's part of that (`--eval`), over the space
//! (`guest::space`), by the objective (`analysis::held`); what it writes is
//! `hunt_points`'. The flags after `--` are qemu-test's, made values by the
//! task's parser (`flags`).

mod flags;
mod search;
mod slurm;

pub use flags::QemuTestFlags;
#[cfg(test)]
pub(crate) use search::check_flags;
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

/// What a hunt is asked: the task's flags as plain values, none checked yet.
#[derive(Debug, Clone)]
pub struct HuntRequest {
    /// The space to search (qemu/hunt.toml's format).
    pub space_file: PathBuf,
    pub seed: u64,
    /// Boots the search may spend.
    pub boots: u32,
    /// Stop at the first point that holds by this mechanism.
    pub until: Option<HeldBy>,
    /// Relax the best point that holds to its minimal form.
    pub minimise: bool,
    /// Variants the best point that holds is booted on afterwards.
    pub check: Vec<String>,
    /// Points a round.
    pub batch: usize,
    /// Each point a Slurm job (in this partition, or the cluster's default).
    pub slurm: Option<Option<String>>,
    /// A node's part of `slurm`: the point's settings file, and where its
    /// session goes.
    pub eval: Option<(PathBuf, PathBuf)>,
    /// The user's qemu-test flags, word by word (the words after `--`).
    pub qemu_args: Vec<String>,
}

impl HuntRequest {
    /// What the hunt found; none for a node's part of --slurm (`--eval`).
    pub fn hunt(self, sh: &Shell, flags: &dyn QemuTestFlags) -> Result<Option<HuntResult>> {
        let hunt = search::Asked {
            space: Space::load(&self.space_file, scenario::any(space::SCRIPT)?)?,
            seed: self.seed,
            boots: self.boots,
            stop_at: self.until,
            qemu_args: self.qemu_args,
            minimise: self.minimise,
            check: self.check,
            parent: util::target_dir().join("hunts"),
            batch: self.batch,
            slurm: self.slurm,
            space_file: self.space_file,
            flags,
        };
        if let Some((settings, into)) = &self.eval {
            hunt.eval_point(sh, settings, into)?;
            return Ok(None);
        }
        hunt.run(sh).map(Some)
    }
}
