//! What `qemu-test` boots with: the tools it checks (a build's, or a boot's
//! with `--no-build`), the FUSE server its plan's guest carries, and the base
//! initramfs, made here or staged by `cargo xtask slurm` (`--staged`).

use std::path::PathBuf;

use anyhow::{Context, Result};
use xshell::Shell;

use super::request::QemuTestRequest;
use crate::{
    deps,
    guest::{
        fuse_server::{External, UserServer},
        initramfs,
        scenario::Scenario,
        stage::Staged,
    },
    kernel::build::Built,
};

impl QemuTestRequest {
    /// The FUSE server the plan's guest carries: what its initramfs is made
    /// with here, or, staged by `cargo xtask slurm` (`--staged`), what it
    /// was staged with, checked to be the plan's.
    pub fn external(&self) -> Result<External> {
        let staged = self.staged_guest()?;
        let user = self.user_server(staged.as_ref())?;
        let scenarios = self.scenarios(user.as_ref())?;
        Self::external_for(&scenarios, user, staged.as_ref())
    }

    /// The FUSE server a plan of `scenarios` needs, with the user's if given;
    /// a `staged` guest made for another is refused.
    pub(super) fn external_for(
        scenarios: &[Scenario],
        user: Option<UserServer>,
        staged: Option<&Staged>,
    ) -> Result<External> {
        let names: Vec<&str> = scenarios.iter().map(|s| s.name).collect();
        let external = External::of(&names, user);
        if let Some(s) = staged {
            s.check(&external)?;
        }
        Ok(external)
    }

    /// The tools this session needs: the kernels' build's, or with
    /// --no-build a boot's ([`deps::boot::ensure_boot`]).
    pub(super) fn tools(&self, sh: &Shell) -> Result<deps::Toolchain> {
        if self.no_build {
            deps::boot::ensure_boot(sh, self.staged.is_some())
        } else {
            deps::ensure_for(sh, self.flavour.no_rust)
        }
    }

    /// The base initramfs, and the session's toolchain: with --no-build this
    /// host's QEMU and the compilers the kernels were built with; `staged`
    /// (checked for this plan: [`Self::external_for`]), the stage's fio.
    pub(super) fn guest_base(
        &self,
        sh: &Shell,
        tc: deps::Toolchain,
        built: &[Built],
        external: &External,
        staged: Option<&Staged>,
    ) -> Result<(PathBuf, deps::Toolchain)> {
        let tc = match built.first() {
            Some(b) if self.no_build => tc.booting(&b.meta.toolchain),
            _ => tc,
        };
        match staged {
            Some(s) => Ok((
                s.base.clone(),
                deps::Toolchain {
                    fio: s.fio.clone(),
                    ..tc
                },
            )),
            None => {
                let base = initramfs::base(sh, external).context("building the initramfs")?;
                Ok((base, tc))
            }
        }
    }
}
