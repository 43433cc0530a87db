//! The kernel and guest of a task that boots one variant (`shell`,
//! `flush-cost`, `module-stress`, `reproducer`, `bench-fuse`): the guest
//! flags' values, and the variant's kernel and initramfs made of them.

use std::path::PathBuf;

use anyhow::Result;
use xshell::Shell;

use crate::{
    deps,
    guest::{initramfs, machine_spec::MachineSpec, plan::Detector},
    kernel::{build::Built, flavour::Flavour, selected, source::SourceArgs, variants::Selection},
};

/// The guest flags' values and the kernels' source, none checked yet.
#[derive(Debug, Clone)]
pub struct SingleBoot {
    pub source: SourceArgs,
    pub machine: MachineSpec,
    /// Use the kernels on disk instead of building.
    pub no_build: bool,
    /// Parallel make jobs for the build; none, the CPUs.
    pub jobs: Option<usize>,
    pub flavour: Flavour,
    pub detector: Option<Detector>,
}

impl SingleBoot {
    /// The selected kernels: built (incrementally), or with --no-build as
    /// they are ([`selected::kernels`]).
    pub fn kernels(
        &self,
        sh: &Shell,
        tc: &deps::Toolchain,
        selection: &Selection,
    ) -> Result<Vec<Built>> {
        let how = (self.no_build, self.jobs);
        selected::kernels(sh, tc, selection, &self.source, how, &self.flavour)
    }

    /// One variant's kernel and initramfs ([`initramfs::one_variant`]).
    pub fn one_variant(&self, sh: &Shell, name: &str) -> Result<(Built, PathBuf)> {
        let how = (self.no_build, self.jobs);
        initramfs::one_variant(sh, &self.source, how, &self.flavour, name)
    }
}

/// The selection of one variant.
pub fn only(name: &str) -> Selection {
    Selection {
        variants: vec![name.to_string()],
        ..Selection::default()
    }
}
