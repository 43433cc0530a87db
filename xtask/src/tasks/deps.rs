//! `cargo xtask deps`: check (and install) the host tools.

use anyhow::Result;
use xshell::Shell;

use crate::{
    deps::{boot::ensure_boot_with, ensure_with},
    util,
};

/// Check (and optionally install) the host tools the pipeline needs.
#[derive(Debug, clap::Args)]
pub struct Deps {
    /// Install what is missing: Debian packages with apt-get (as root, or
    /// through password-less `sudo -n`), bindgen-cli with `cargo install
    /// --locked`, rust-src with rustup. The default when CI=true and running as
    /// root.
    #[arg(long)]
    pub install: bool,
    /// Only what a boot of kernels built elsewhere needs (`qemu-test
    /// --no-build`: QEMU, fio, a static busybox, mke2fs), none of the kernels'
    /// compilers (LLVM, bindgen-cli, rust-src): a fleet's shard that boots
    /// the kernels a build job made.
    #[arg(long)]
    pub boot: bool,
}

impl Deps {
    pub fn run(self, sh: &Shell) -> Result<()> {
        let install = self.install || (util::in_ci() && util::is_root());
        if self.boot {
            let tc = ensure_boot_with(sh, false, install)?;
            println!("a boot's tools: qemu {}, {}", tc.qemu, tc.fio);
        } else {
            println!("{}", ensure_with(sh, install)?);
        }
        Ok(())
    }
}
