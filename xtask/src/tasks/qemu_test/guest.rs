//! What `qemu-test` boots with: the tools it checks (a build's, or a boot's
//! with `--no-build`), the FUSE server its plan's guest carries, and the base
//! initramfs, made here or staged by `cargo xtask slurm` (`--staged`).

use std::path::PathBuf;

use anyhow::{Context, Result};
use xshell::Shell;

use super::QemuTest;
use crate::{
    deps,
    guest::{
        fuse_server::{External, UserServer},
        initramfs,
        scenario::Scenario,
        stage,
    },
    kernel::build::Built,
};

impl QemuTest {
    /// The FUSE server the plan's guest carries: what its initramfs is made
    /// with, here or staged by `cargo xtask slurm`.
    pub fn external(&self) -> Result<External> {
        let user = self.user_server()?;
        let scenarios = self.scenarios(user.as_ref())?;
        Ok(Self::external_of(&scenarios, user))
    }

    /// The FUSE server a plan of `scenarios` needs, with the user's if given.
    pub(super) fn external_of(scenarios: &[Scenario], user: Option<UserServer>) -> External {
        let names: Vec<&str> = scenarios.iter().map(|s| s.name).collect();
        External::of(&names, user)
    }

    /// The tools this session needs: the kernels' build's, or with
    /// --no-build a boot's ([`deps::boot::ensure_boot`]).
    pub(super) fn tools(&self, sh: &Shell) -> Result<deps::Toolchain> {
        if self.guest.no_build {
            deps::boot::ensure_boot(sh, self.staged.is_some())
        } else {
            deps::ensure_for(sh, self.guest.flavour.no_rust)
        }
    }

    /// The base initramfs, and the session's toolchain: with --no-build this
    /// host's QEMU and the compilers the kernels were built with; staged, the
    /// stage's fio.
    pub(super) fn guest_base(
        &self,
        sh: &Shell,
        tc: deps::Toolchain,
        built: &[Built],
        external: &External,
    ) -> Result<(PathBuf, deps::Toolchain)> {
        let tc = match built.first() {
            Some(b) if self.guest.no_build => tc.booting(&b.meta.toolchain),
            _ => tc,
        };
        match &self.staged {
            Some(dir) => {
                let s = stage::open(dir, external)?;
                Ok((s.base, deps::Toolchain { fio: s.fio, ..tc }))
            }
            None => {
                let base = initramfs::base(sh, external).context("building the initramfs")?;
                Ok((base, tc))
            }
        }
    }
}
