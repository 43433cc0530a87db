//! `cargo xtask hunt`: search qemu/hunt.toml's settings for writers held
//! with nothing to wait for. Its flags make a plain [`HuntRequest`] and the
//! session stage hunts ([`crate::session::hunt`]); the flags after `--` are
//! qemu-test's, parsed here ([`ByClap`]).

pub use crate::session::hunt::HuntResult;
pub use crate::session::hunt_points::POINTS_FILE;

use std::path::{Path, PathBuf};

use anyhow::Result;
use xshell::Shell;

use crate::{
    analysis::held::HeldBy,
    guest::space,
    session::{
        hunt::{HuntRequest, QemuTestFlags},
        qemu_test::QemuTestRequest,
        slurm::Jobs,
    },
    tasks::{args, qemu_test::QemuTest, slurm::Slurm},
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
        self.request().hunt(sh, &ByClap)
    }

    /// These flags' values, for the session stage.
    pub fn request(self) -> HuntRequest {
        HuntRequest {
            space_file: (self.space)
                .unwrap_or_else(|| util::project_root().join(space::SPACE_FILE)),
            seed: self.seed,
            boots: self.boots,
            until: self.until,
            minimise: self.minimise,
            check: self.check,
            batch: self.batch as usize,
            slurm: self.slurm.map(|p| Some(p).filter(|p| !p.is_empty())),
            eval: self.eval.zip(self.eval_into),
            qemu_args: self.qemu_args,
        }
    }
}

/// qemu-test's flags parsed by clap, as `cargo xtask qemu-test` and `cargo
/// xtask slurm` parse theirs.
struct ByClap;

impl QemuTestFlags for ByClap {
    fn parse(&self, argv: &[&str]) -> Result<QemuTestRequest, clap::Error> {
        args::try_parse_from::<QemuTest>(argv.iter().copied()).map(|q| q.request())
    }

    fn slurm_jobs(
        &self,
        dir: &Path,
        qemu_args: &[String],
        partition: Option<String>,
    ) -> Result<Jobs> {
        Slurm {
            shards: 1,
            cpus_per_task: 1,
            partition,
            time: None,
            dir: Some(dir.to_path_buf()),
            write_only: false,
            qemu_test: qemu_args.to_vec(),
        }
        .jobs()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::session::hunt::check_flags;

    #[test]
    fn flags_the_hunt_sets_itself_are_refused_after_the_separator() {
        let e = check_flags(
            &["--variant".into(), "regressed".into(), "--runs".into()],
            &ByClap,
        )
        .unwrap_err();
        assert!(format!("{e:#}").contains("--runs after `--`"), "{e:#}");
        let e = check_flags(&["--no-aa".into()], &ByClap).unwrap_err();
        assert!(format!("{e:#}").contains("--no-aa after `--`"), "{e:#}");
        check_flags(
            &["--variant".into(), "regressed".into(), "--quick".into()],
            &ByClap,
        )
        .unwrap();
    }
}
