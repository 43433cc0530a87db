//! What the hunt asks of the task that parses qemu-test's flags (clap, a
//! stage above): the request of a round's flags, the Slurm jobs of the
//! user's.

use std::path::Path;

use anyhow::Result;

use crate::session::{qemu_test::QemuTestRequest, slurm::Jobs};

/// qemu-test's flags made values by the task's parser (clap's): the hunt
/// adds its own flags to the user's and boots what they ask.
pub trait QemuTestFlags {
    /// The request of qemu-test's flags `argv` (`qemu-test` first).
    fn parse(&self, argv: &[&str]) -> Result<QemuTestRequest, clap::Error>;
    /// The Slurm jobs (in `dir`, in `partition`) that boot with the user's
    /// flags `qemu_args`, checked as `cargo xtask slurm` checks its own.
    fn slurm_jobs(
        &self,
        dir: &Path,
        qemu_args: &[String],
        partition: Option<String>,
    ) -> Result<Jobs>;
}
