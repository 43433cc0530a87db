//! The tools a boot of kernels built before needs (`qemu-test --no-build`).

use anyhow::Result;
use xshell::Shell;

use super::{
    check_busybox, check_fio, check_qemu, ensure_checked, version_output, Fix, Missing, Toolchain,
    GUEST_TOOLS,
};
use crate::util;

/// The tools a boot of kernels built before (`qemu-test --no-build`) needs,
/// installed as [`super::ensure`] installs them: QEMU, and unless the guest's
/// initramfs is staged (`--staged`), what it is made of here (fio, a static
/// busybox, mke2fs, ldd). None of the kernels' compilers: the session records
/// those the kernels were built with ([`Toolchain::booting`]); its fio is empty
/// when staged (the stage records the fio the guest carries).
pub fn ensure_boot(sh: &Shell, staged: bool) -> Result<Toolchain> {
    ensure_boot_with(sh, staged, util::is_root())
}

/// [`ensure_boot`], installing what is missing when `install` is set (`deps
/// --install --boot`: a fleet's node that only boots, without the kernels'
/// compilers, LLVM or bindgen).
pub fn ensure_boot_with(sh: &Shell, staged: bool, install: bool) -> Result<Toolchain> {
    ensure_checked(sh, install, || check_boot(sh, staged))
}

fn check_boot(sh: &Shell, staged: bool) -> (Option<Toolchain>, Vec<Missing>) {
    let mut missing = Vec::new();
    let mut need = |what: String, fix: Fix| missing.push(Missing { what, fix });
    let qemu = check_qemu(sh, &mut need);
    let fio = if staged {
        Some(String::new())
    } else {
        for (prog, arg, pkg) in GUEST_TOOLS {
            if version_output(sh, prog, arg).is_none() {
                need(format!("`{prog}`"), Fix::Apt(pkg.into()));
            }
        }
        check_busybox(&mut need);
        check_fio(sh, &mut need)
    };
    let tc = match (qemu, fio) {
        (Some(qemu), Some(fio)) if missing.is_empty() => Some(Toolchain {
            qemu,
            fio,
            ..Toolchain::default()
        }),
        _ => None,
    };
    (tc, missing)
}
