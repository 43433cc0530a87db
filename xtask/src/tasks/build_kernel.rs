//! `cargo xtask build-kernel`: build the selected variants.

use anyhow::Result;
use xshell::Shell;

use crate::{
    deps,
    kernel::{
        build::{build, summary},
        flavour::Flavour,
        source::SourceArgs,
        variants::Selection,
    },
};

/// Build the kernel variants (and the wbstall module for each).
#[derive(Debug, clap::Args)]
pub struct BuildKernel {
    #[command(flatten)]
    pub selection: Selection,
    #[command(flatten)]
    pub source: SourceArgs,
    /// Parallel make jobs (make -j). Default: the number of CPUs.
    #[arg(long, value_name = "N")]
    pub jobs: Option<usize>,
    /// The kernels' configuration (--debug-kernel, --config, --kconfig-add).
    #[command(flatten)]
    pub flavour: Flavour,
}

impl BuildKernel {
    pub fn run(self, sh: &Shell) -> Result<()> {
        let tc = deps::check_for(sh, self.flavour.no_rust)?;
        let selection = crate::kernel::revs::select(sh, &self.selection, &self.source)?;
        let built = build(sh, &tc, &selection, &self.source, self.jobs, &self.flavour)?;
        println!("{}", summary(&built));
        Ok(())
    }
}
