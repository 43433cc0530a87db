//! The live negatives of `cargo xtask ci`: runs the verdict must reject. The
//! baseline judged against an expectations file that claims `ok` on
//! fuse-strictlimit, and a plausible but wrong patch held to the reference's
//! expectation: each must fail, and on the cell it is about.

use anyhow::{bail, Context, Result};
use xshell::Shell;

use crate::{
    analysis::{expected::Class, judge::Judgement},
    exit,
    progress::{self, Event},
    session::boot_all::Outcome,
    tasks::{args, qemu_test::QemuTest},
    util,
};

/// A live run that must fail: the baseline booted on fuse-strictlimit and
/// judged against an expectations file that claims `ok` there. The verdict must
/// fail, and for the right reason (that cell's class, not a broken boot).
pub fn live_negative(sh: &Shell, baseline: &str) -> Result<()> {
    let path = util::project_root().join(crate::analysis::expected::EXPECTED_FILE);
    let text =
        std::fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
    let dir = util::target_dir().join("ci");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    let file = dir.join("expected-wrong.toml");
    std::fs::write(&file, flip_fuse(&text, baseline)?)
        .with_context(|| format!("writing {}", file.display()))?;
    let file = file.display().to_string();
    let mut cell = None;
    let out = args::parse::<QemuTest>(&[
        "--quick",
        "--no-build",
        "--variant",
        baseline,
        "--scenario",
        "fuse-strictlimit",
        "--expected",
        &file,
    ])?
    .measure_seeing(sh, &mut |j| cell = Some(CellSeen::of(j, baseline)))?;
    if out.passed() {
        bail!(exit::fails(format!(
            "qemu-test passed a stalling {baseline} cell against an `ok` expectation"
        )));
    }
    if !out.failures.is_empty() {
        bail!(exit::fails(format!(
            "qemu-test failed, but on a boot, not on the verdict: {:?}",
            out.failures
        )));
    }
    exits_1(&out)?;
    let cell = cell.context("qemu-test judged nothing")?;
    match cell {
        Some(c) if c.observed == Class::Stall && c.expected == Some(Class::Ok) => {
            progress::emit(Event::Note(&format!(
                "ci: the verdict of {} failed, as it must: {}",
                out.dir.display(),
                c.failures.join("; ")
            )));
            Ok(())
        }
        _ => bail!(exit::fails(format!(
            "qemu-test failed, but not on the {baseline} cell's class: {cell:?}"
        ))),
    }
}

/// The exit status qemu-test gives `out` is the failing verdict's, 1
/// ([`exit::Class::Fails`]): what a CI acts on.
pub fn exits_1(out: &Outcome) -> Result<()> {
    match out.result("qemu-test") {
        Err(e) if exit::Class::of(&e).code() == exit::FAILS => Ok(()),
        Err(e) => bail!(exit::fails(format!(
            "qemu-test would exit {}, not 1: {e:#}",
            exit::Class::of(&e).code()
        ))),
        Ok(()) => bail!(exit::fails("qemu-test would exit 0")),
    }
}

/// A plausible but incomplete fix (it starts writeback for a memcg domain
/// over its background threshold, not for a strictlimit BDI).
pub const WRONG_PATCH: &str = "docs/own-patch/memcg-bg-thresh.patch";

/// A live run that must fail on the patch under test: the wrong fix on the
/// baseline, on fuse-strictlimit, with no --expect (held to the reference's
/// `ok`). The verdict and the exit must fail on the patch's cell, its mail
/// must say why, and the other cells must pass.
pub fn live_wrong_patch(sh: &Shell, baseline: &str) -> Result<()> {
    let patch = util::project_root().join(WRONG_PATCH);
    let patch = patch.display().to_string();
    let name = "patch-memcg-bg-thresh";
    let mut seen = None;
    let out = args::parse::<QemuTest>(&[
        "--quick",
        "--patch",
        &patch,
        "--base",
        baseline,
        "--scenario",
        "fuse-strictlimit",
    ])?
    .measure_seeing(sh, &mut |j| {
        let others_pass = (j.verdict.cells.iter())
            .filter(|c| c.variant() != name)
            .all(|c| c.failures.is_empty());
        seen = Some((CellSeen::of(j, name), others_pass));
    })?;
    if out.passed() || !out.failures.is_empty() {
        bail!(exit::fails(format!(
            "qemu-test passed the wrong patch, or failed on a boot ({:?}): see {}",
            out.failures,
            out.dir.display()
        )));
    }
    exits_1(&out)?;
    let (cell, others_pass) = seen.context("qemu-test judged nothing")?;
    let mail = std::fs::read_to_string(out.dir.join(crate::results::dir::ResultsDir::MAIL))
        .context("reading the mail of the run")?;
    match cell {
        Some(c)
            if c.observed == Class::Stall
                && c.expected == Some(Class::Ok)
                && others_pass
                && mail.contains("the patch FAILS its expectations")
                && mail.contains("No Tested-by") =>
        {
            progress::emit(Event::Note(&format!(
                "ci: the patch under test failed, as it must: {}",
                c.failures.join("; ")
            )));
            Ok(())
        }
        _ => bail!(exit::fails(format!(
            "qemu-test failed, but not on the patch's cell alone, or its mail does not say \
             so: {cell:?}; see {}",
            out.dir.display()
        ))),
    }
}

/// A patch with a known cost and no stall: a 375 us busy wait on every
/// free-running `balance_dirty_pages()` call (5.7% of fuse-nostrict's quick
/// throughput, 16 runs; docs/measurements.md, "The cost verdict").
pub const COSTLY_PATCH: &str = "docs/calibration/free-run-delay.patch";

/// A live run that must fail on the cost alone: the costly patch on the
/// reference, on fuse-nostrict, held to the reference's expectation. Its
/// cells pass (no stall); the verdict and the exit fail, the mail names the
/// throughput cost in its headline and offers no Tested-by.
pub fn live_costly_patch(sh: &Shell) -> Result<()> {
    let patch = util::project_root().join(COSTLY_PATCH);
    let patch = patch.display().to_string();
    let mut cells_passed = None;
    let out =
        args::parse::<QemuTest>(&["--quick", "--patch", &patch, "--scenario", "fuse-nostrict"])?
            .measure_seeing(sh, &mut |j| cells_passed = Some(j.verdict.passed()))?;
    let cells_passed = cells_passed.context("qemu-test judged nothing")?;
    if out.passed() || !out.failures.is_empty() || !cells_passed {
        bail!(
            "qemu-test passed the costly patch, or failed on a boot or a cell ({:?}): see {}",
            out.failures,
            out.dir.display()
        );
    }
    let mail = std::fs::read_to_string(out.dir.join(crate::results::dir::ResultsDir::MAIL))
        .context("reading the mail of the run")?;
    let headline = mail
        .lines()
        .find(|l| l.starts_with("[wbstall] patch-free-run-delay:"))
        .unwrap_or("");
    if !headline.contains("the patch COSTS fio.write_bw_MiB/s") || !mail.contains("No Tested-by") {
        bail!(
            "the costly patch failed, but its mail does not name the throughput cost or offers a \
             Tested-by: `{headline}`; see {}",
            out.dir.display()
        );
    }
    progress::emit(Event::Note(&format!(
        "ci: the costly patch failed on its cost, as it must: {headline}"
    )));
    Ok(())
}

/// What a check reads of one variant's cell in the judgement: its class,
/// the class it was held to, and why it failed.
#[derive(Debug)]
struct CellSeen {
    observed: Class,
    expected: Option<Class>,
    failures: Vec<String>,
}

impl CellSeen {
    /// The first cell of `variant` (these runs have one scenario), if measured.
    fn of(j: &Judgement, variant: &str) -> Option<CellSeen> {
        let c = j.verdict.cells.iter().find(|c| c.variant() == variant)?;
        Some(CellSeen {
            observed: c.observed,
            expected: c.expected.map(|e| e.class),
            failures: c.failures.iter().map(ToString::to_string).collect(),
        })
    }
}

/// The expectations with `<baseline> = "stall"` of `[expect.fuse-strictlimit]`
/// turned into `ok`.
fn flip_fuse(text: &str, baseline: &str) -> Result<String> {
    let mut out = String::new();
    let mut in_table = false;
    let mut flipped = false;
    for line in text.lines() {
        if line.starts_with('[') {
            in_table = line.trim() == "[expect.fuse-strictlimit]";
        }
        let value = (line.trim())
            .strip_prefix(&format!("{baseline} = \""))
            .and_then(|v| v.strip_suffix('"'));
        // `stall` or `stall:CAUSE`: the flipped hypothesis is `ok`, cause and all.
        if in_table && value.is_some_and(|v| v.split(':').next() == Some("stall")) {
            out.push_str(&format!("{baseline} = \"ok\"\n"));
            flipped = true;
        } else {
            out.push_str(line);
            out.push('\n');
        }
    }
    if !flipped {
        bail!(exit::fails(format!(
            "qemu/expected.toml has no `{baseline} = \"stall\"` (or `\"stall:CAUSE\"`) in \
             [expect.fuse-strictlimit]"
        )));
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_live_negative_flips_exactly_the_regressed_fuse_hypothesis() {
        let path = util::project_root().join(crate::analysis::expected::EXPECTED_FILE);
        let text = std::fs::read_to_string(&path).unwrap();
        let wrong = flip_fuse(&text, "regressed").unwrap();
        let e = crate::analysis::expected::Expected::parse(&wrong, &path).unwrap();
        assert_eq!(
            e.expect["fuse-strictlimit"]["regressed"],
            crate::analysis::expected::Class::Ok.into()
        );
        assert_eq!(
            e.expect["memcg-ext4"]["regressed"].class,
            crate::analysis::expected::Class::Stall
        );
        assert!(flip_fuse("[expect.memcg-ext4]\nregressed = \"stall\"\n", "regressed").is_err());
    }
}
