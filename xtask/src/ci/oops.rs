//! A step of `cargo xtask ci`: a patch that BUG()s in balance_dirty_pages()
//! (`patches/faults/bug-when-throttled.patch`, on the reference) must make a
//! quick `qemu-test` fail on that boot alone, classed `oops` and named by the
//! function, while the reference beside it is still measured and passes.

use anyhow::{bail, Context, Result};
use xshell::Shell;

use crate::{
    exit,
    guest::{outcome::VmErrorKind, run_id::RunId},
    progress::{self, Event},
    results::session::BootFailure,
    tasks::{args, qemu_test::QemuTest},
    util,
};

/// The fault fixture the step boots (patches/faults/README.md).
pub const BUG_FIXTURE: &str = "patches/faults/bug-when-throttled.patch";

/// The variant `--patch` makes of [`BUG_FIXTURE`].
pub const BUG_VARIANT: &str = "patch-bug-when-throttled";

/// Boots the BUG fixture beside `reference` on fuse-strictlimit and checks
/// the outcome ([`check`]).
pub fn live_oops(sh: &Shell, reference: &str) -> Result<()> {
    let patch = util::project_root().join(BUG_FIXTURE);
    let patch = patch.display().to_string();
    let mut reference_passed = None;
    let out = args::parse::<QemuTest>(&[
        "--quick",
        "--variant",
        reference,
        "--patch",
        &patch,
        "--base",
        reference,
        "--scenario",
        "fuse-strictlimit",
    ])?
    .measure_seeing(sh, &mut |j| {
        reference_passed = Some(j.verdict.variant_passed(reference))
    })?;
    if out.passed() {
        bail!(exit::fails(format!(
            "qemu-test passed a kernel that BUG()s in balance_dirty_pages(): see {}",
            out.dir.display()
        )));
    }
    // The kernel under test crashed: the failing verdict's exit.
    super::negative::exits_1(&out)?;
    let reference_passed = reference_passed.context("qemu-test judged nothing")?;
    let line = check(&out.failures, reference_passed)?;
    progress::emit(Event::Note(&format!(
        "ci: the BUG fixture's boot failed, as it must: {}",
        line.lines().next().unwrap_or_default()
    )));
    Ok(())
}

/// The one boot without a record must be the fixture's, classed `oops` and
/// naming balance_dirty_pages(); the reference must have passed. Returns
/// that boot's line.
fn check(failures: &[BootFailure], reference_passed: bool) -> Result<String> {
    let [failure] = failures else {
        bail!(exit::fails(format!(
            "expected one boot without a record (the BUG fixture's), got {failures:?}"
        )));
    };
    let line = failure.to_string();
    let fixture = RunId::new("fuse-strictlimit", BUG_VARIANT, 0);
    if failure.run != fixture
        || failure.why.kind() != Some(VmErrorKind::Oops)
        || !failure
            .why
            .to_string()
            .contains("in balance_dirty_pages+0x")
    {
        bail!(exit::fails(format!(
            "the BUG fixture's boot is not classed `oops` in balance_dirty_pages(): {line}"
        )));
    }
    if !reference_passed {
        bail!(exit::fails(
            "the reference beside the BUG fixture was not measured, or failed its cell"
        ));
    }
    Ok(line)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_an_oops_of_the_fixture_beside_a_passing_reference_will_do() {
        let failure = |variant: &str, why: &str| BootFailure {
            run: RunId::new("fuse-strictlimit", variant, 0),
            why: why.into(),
        };
        let oops = failure(
            BUG_VARIANT,
            "oops: the guest kernel oopsed: kernel BUG at mm/page-writeback.c:1958! in \
             balance_dirty_pages+0x672/0x680 (QEMU exited)",
        );
        assert!(check(std::slice::from_ref(&oops), true).is_ok());
        // The reference failed or went unmeasured.
        assert!(check(std::slice::from_ref(&oops), false).is_err());
        // The cause misnamed, as before the Oops was looked for.
        let misnamed = failure(
            BUG_VARIANT,
            "reading fio's result: fio's JSON is malformed or truncated",
        );
        let e = check(&[misnamed], true).unwrap_err().to_string();
        assert!(e.contains("not classed `oops`"), "{e}");
        // Another run's oops is not the fixture's.
        let elsewhere = failure("upstream", &oops.why.to_string());
        assert!(check(&[elsewhere], true).is_err());
        // No failed boot at all, or the reference's boot failed too.
        assert!(check(&[], true).is_err());
        let other = failure("upstream", "hang: the guest hung");
        assert!(check(&[oops, other], true).is_err());
    }
}
