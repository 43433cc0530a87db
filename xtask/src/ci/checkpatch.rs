//! The checkpatch step of `cargo xtask ci`: every patch the repository
//! offers a person to send (`docs/own-patch/*.patch`, `docs/findings/*/*.patch`)
//! passes the kernel's own `scripts/checkpatch.pl --strict`, taken from the
//! Debian tree the kernels are built from; and a copy of one with its
//! `Signed-off-by:` taken out is rejected, so the step can say no.
//!
//! The variants' own patches (`patches/`) are not checked: 0001 is our
//! revert, 0002 and 0003 are the seeds as posted, 0004 and 0005 never leave
//! the harness (0005's sendable form is the finding's copy).

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use xshell::{cmd, Shell};

use crate::{
    exit,
    kernel::source,
    progress::{self, Event},
    util,
};

/// What checkpatch cannot know here, and only that: `--no-tree` has no git
/// history to look a commit id up in (Debian's source has none).
const IGNORED: &str = "UNKNOWN_COMMIT_ID";

/// The folders whose patches are meant to be sent, repository-relative, and
/// how deep below them the patches lie (own-patch: 1, findings: 2).
const SENDABLE: [(&str, usize); 2] = [("docs/own-patch", 1), ("docs/findings", 2)];

/// Every sendable patch passes checkpatch; one without its sign-off fails.
pub fn check_sendable_patches(sh: &Shell) -> Result<()> {
    let tree = source::SourceArgs::default()
        .prepare(sh, &util::cache_dir()?)?
        .tree();
    let script = tree.join("scripts/checkpatch.pl");
    if !script.is_file() {
        bail!(
            "{} is missing: the cached source tree is damaged (remove {} and run again)",
            script.display(),
            tree.display()
        );
    }
    let patches = sendable(&util::project_root())?;
    if patches.is_empty() {
        bail!("no patch under docs/own-patch or docs/findings to check");
    }
    let dir = util::target_dir().join("ci");
    std::fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
    // From a directory of its own, by absolute path: run from the repository
    // with a relative path, checkpatch of 7.3 read the `-- ` line after our
    // patches' last hunk as an added line (2026-12-06; cause not chased).
    let _d = sh.push_dir(&dir);
    for p in &patches {
        checkpatch(sh, &script, p)?;
    }
    // The step says no: the finding's patch without its Signed-off-by.
    let findings: Vec<&PathBuf> = (patches.iter())
        .filter(|p| p.starts_with(util::project_root().join("docs/findings")))
        .collect();
    let first = findings
        .first()
        .context("no patch under docs/findings to unsign")?;
    let unsigned = dir.join("unsigned.patch");
    let text =
        std::fs::read_to_string(first).with_context(|| format!("reading {}", first.display()))?;
    std::fs::write(&unsigned, without_sign_off(&text)?)
        .with_context(|| format!("writing {}", unsigned.display()))?;
    match checkpatch(sh, &script, &unsigned) {
        Ok(()) => bail!(exit::fails(format!(
            "checkpatch passed {} without its Signed-off-by: the step checks nothing",
            unsigned.display()
        ))),
        Err(e) if format!("{e:#}").contains("MISSING_SIGN_OFF") => {}
        Err(e) => {
            return Err(e.context("checkpatch of the unsigned copy failed for another reason"))
        }
    }
    progress::emit(Event::Note(&format!(
        "ci: {} sendable patch(es) pass checkpatch --strict (ignoring only {IGNORED}); an \
         unsigned copy is refused",
        patches.len()
    )));
    Ok(())
}

/// `checkpatch.pl --strict` of one patch: an error naming what it said.
fn checkpatch(sh: &Shell, script: &Path, patch: &Path) -> Result<()> {
    let out = cmd!(
        sh,
        "perl {script} --no-tree --strict --terse --show-types --ignore {IGNORED} {patch}"
    )
    .quiet()
    .ignore_status()
    .output()
    .context("running checkpatch.pl (perl)")?;
    let said = String::from_utf8_lossy(&out.stdout);
    if !out.status.success() {
        bail!(exit::fails(format!(
            "checkpatch --strict refuses {}:\n{}\nfix the patch (it is what a person sends)",
            patch.display(),
            said.trim()
        )));
    }
    Ok(())
}

/// The sendable patches under `root`, sorted.
fn sendable(root: &Path) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for (dir, depth) in SENDABLE {
        collect(&root.join(dir), depth, &mut out)?;
    }
    out.sort();
    Ok(out)
}

fn collect(dir: &Path, depth: usize, out: &mut Vec<PathBuf>) -> Result<()> {
    for e in std::fs::read_dir(dir).with_context(|| format!("listing {}", dir.display()))? {
        let p = e?.path();
        if depth > 1 && p.is_dir() {
            collect(&p, depth - 1, out)?;
        } else if depth == 1 && p.extension().is_some_and(|x| x == "patch") {
            out.push(p);
        }
    }
    Ok(())
}

/// `text` without its `Signed-off-by:` lines; an error if it had none.
fn without_sign_off(text: &str) -> Result<String> {
    let kept: Vec<&str> = (text.lines())
        .filter(|l| !l.starts_with("Signed-off-by:"))
        .collect();
    if kept.len() == text.lines().count() {
        bail!("the patch has no Signed-off-by: line to take out");
    }
    Ok(kept.join("\n") + "\n")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_sendable_patches_are_the_own_patches_and_the_findings() {
        let p = sendable(&util::project_root()).unwrap();
        let names: Vec<String> = p.iter().map(|p| util::file_name(p).to_string()).collect();
        assert!(
            names.contains(&"start-when-throttled.patch".to_string()),
            "{names:?}"
        );
        assert!(
            names.contains(&"0005-memcg-refresh-stats-before-throttle-loop-waits.patch".into()),
            "{names:?}"
        );
        assert!(p
            .iter()
            .all(|p| !p.starts_with(util::project_root().join("patches"))));
    }

    #[test]
    fn a_patch_without_a_sign_off_has_none_to_take_out() {
        let signed = "Subject: x\n\nbody\n\nSigned-off-by: A <a@b>\n---\n";
        assert_eq!(
            without_sign_off(signed).unwrap(),
            "Subject: x\n\nbody\n\n---\n"
        );
        let e = without_sign_off("Subject: x\n---\n").unwrap_err();
        assert!(e.to_string().contains("no Signed-off-by"), "{e}");
    }
}
