//! The checkpatch step of `cargo xtask ci`: every patch the repository
//! offers a person to send (`docs/own-patch/*.patch`, `docs/findings/*/*.patch`)
//! passes the kernel's own `scripts/checkpatch.pl --strict`, taken from the
//! Debian tree the kernels are built from.
//!
//! A finding's patch is sent by a person who signs it: it carries no
//! `Signed-off-by:` (one there is refused), and it is checked as that person
//! sends it, signed off by its `From:` (what `git commit -s` adds). The file as
//! it is, unsigned, must be refused (`MISSING_SIGN_OFF`), so the step can say
//! no. A series' cover letter (`0000-cover-letter.patch`) has no diff for
//! checkpatch to read and is left out.
//!
//! The variants' own patches (`patches/`) are not checked: 0001 is our
//! revert, 0002 and 0003 are the seeds as posted, 0004 to 0006 never leave
//! the harness (their sendable forms are the findings' copies).

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
    let findings = util::project_root().join("docs/findings");
    let mut unsigned = 0;
    for p in &patches {
        if !p.starts_with(&findings) {
            checkpatch(sh, &script, p)?;
            continue;
        }
        let text =
            std::fs::read_to_string(p).with_context(|| format!("reading {}", p.display()))?;
        let signed = dir.join("signed.patch");
        std::fs::write(
            &signed,
            signed_as_author(&text).with_context(|| p.display().to_string())?,
        )
        .with_context(|| format!("writing {}", signed.display()))?;
        checkpatch(sh, &script, &signed).with_context(|| {
            format!(
                "{}, signed off by its From: as its sender would",
                p.display()
            )
        })?;
        // The step says no: the file as it is, unsigned.
        match checkpatch(sh, &script, p) {
            Ok(()) => bail!(exit::fails(format!(
                "checkpatch passed {} without a Signed-off-by: the step checks nothing",
                p.display()
            ))),
            Err(e) if format!("{e:#}").contains("MISSING_SIGN_OFF") => unsigned += 1,
            Err(e) => {
                return Err(e.context("checkpatch of the unsigned file failed for another reason"))
            }
        }
    }
    if unsigned == 0 {
        bail!("no patch under docs/findings: nothing shows the step refusing an unsigned patch");
    }
    progress::emit(Event::Note(&format!(
        "ci: {} sendable patch(es) pass checkpatch --strict (ignoring only {IGNORED}; the \
         findings' {unsigned} as signed by their sender); unsigned, they are refused",
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
        } else if depth == 1
            && p.extension().is_some_and(|x| x == "patch")
            && !util::file_name(&p).ends_with(COVER_LETTER)
        {
            out.push(p);
        }
    }
    Ok(())
}

/// How `git format-patch --cover-letter` names a series' cover letter.
const COVER_LETTER: &str = "-cover-letter.patch";

/// `text`, a finding's unsigned patch, signed off by its `From:` before the
/// `---` that ends its message (what its sender's `git commit -s` adds); an
/// error if it is signed already (the sender signs it), or has no `From:` or
/// no `---`.
fn signed_as_author(text: &str) -> Result<String> {
    if text.lines().any(|l| l.starts_with("Signed-off-by:")) {
        bail!(exit::fails(
            "a finding's patch carries a Signed-off-by: take it out (its sender signs it)"
        ));
    }
    let from = (text.lines())
        .find_map(|l| l.strip_prefix("From: "))
        .context("the patch has no From: header")?;
    let end = (text.lines())
        .position(|l| l == "---")
        .context("the patch has no `---` line ending its message")?;
    let mut lines: Vec<&str> = text.lines().collect();
    let sign = format!("Signed-off-by: {from}");
    lines.insert(end, &sign);
    Ok(lines.join("\n") + "\n")
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
            names.contains(&"0001-memcg-bound-the-staleness-of-the-writeback-stats.patch".into()),
            "{names:?}"
        );
        // A cover letter has no diff for checkpatch to read.
        assert!(
            !names.iter().any(|n| n.ends_with(COVER_LETTER)),
            "{names:?}"
        );
        assert!(util::project_root()
            .join("docs/findings/memcg-stale-stats/0000-cover-letter.patch")
            .is_file());
        assert!(p
            .iter()
            .all(|p| !p.starts_with(util::project_root().join("patches"))));
    }

    #[test]
    fn a_findings_patch_is_signed_as_its_author_and_refused_if_signed_already() {
        let unsigned = "From: A <a@b>\nSubject: x\n\nbody\n---\n a | 1 +\n";
        assert_eq!(
            signed_as_author(unsigned).unwrap(),
            "From: A <a@b>\nSubject: x\n\nbody\nSigned-off-by: A <a@b>\n---\n a | 1 +\n"
        );
        let signed = "From: A <a@b>\n\nbody\nSigned-off-by: A <a@b>\n---\n";
        let e = signed_as_author(signed).unwrap_err();
        assert!(e.to_string().contains("its sender signs it"), "{e}");
        let e = signed_as_author("Subject: x\n---\n").unwrap_err();
        assert!(e.to_string().contains("no From:"), "{e}");
        let e = signed_as_author("From: A <a@b>\n\nbody\n").unwrap_err();
        assert!(e.to_string().contains("no `---`"), "{e}");
    }
}
