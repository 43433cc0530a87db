//! `cargo xtask deps`: check (and install) the host tools.

use anyhow::Result;
use xshell::Shell;

use crate::{deps::ensure_with, util};

/// Check (and optionally install) the host tools the pipeline needs.
#[derive(Debug, clap::Args)]
pub struct Deps {
    /// Install what is missing: Debian packages with apt-get (as root, or
    /// through password-less `sudo -n`), bindgen-cli with `cargo install
    /// --locked`, rust-src with rustup. The default when CI=true and running as
    /// root.
    #[arg(long)]
    pub install: bool,
}

impl Deps {
    pub fn run(self, sh: &Shell) -> Result<()> {
        let install = self.install || (util::in_ci() && util::is_root());
        let tc = ensure_with(sh, install)?;
        println!("{tc}");
        Ok(())
    }
}
