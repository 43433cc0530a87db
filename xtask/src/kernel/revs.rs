//! `--kernel-src DIR --rev REV`: revisions of the developer's own tree as
//! variants, so that "my branch against its merge base" is one command.
//!
//! wbstall builds from its mirror of the tree's working copy (`source`).
//! A revision is the diff that turns that working copy into REV (`git diff
//! -R REV`: tracked files; untracked ones stay as they are), applied like any
//! variant's patches: switching between revisions rewrites only the files in
//! which they differ, so each builds incrementally in the tree's one build
//! directory, and the tree itself is never checked out or modified.

use std::path::Path;

use anyhow::{bail, Context, Result};
use xshell::{cmd, Shell};

use super::{
    patch::{extract_diff, Patch},
    source::SourceArgs,
    variants::{Selection, UnderTest, Variant, Variants},
};
use crate::{exit, util};

/// The variant name of `--rev REV`: `rev-<rev>`, lowercased, with every
/// character a variant name cannot hold as `-`.
pub fn name(rev: &str) -> String {
    let tail: String = rev
        .to_lowercase()
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '_' {
                c
            } else {
                '-'
            }
        })
        .collect();
    format!("rev-{}", tail.trim_matches('-'))
}

/// `selection` with the variants of its `--rev`s added (they need
/// `--kernel-src`: revisions of which tree?).
pub fn select(sh: &Shell, selection: &Selection, source: &SourceArgs) -> Result<Selection> {
    if selection.revs.is_empty() {
        return Ok(selection.clone());
    }
    let Some(dir) = &source.kernel_src else {
        bail!(exit::usage(
            "--rev needs --kernel-src DIR: the git tree whose revisions to build"
        ));
    };
    let mut out = selection.clone();
    out.extra
        .extend(variants(sh, dir, &selection.revs, &Variants::repo()?)?);
    Ok(out)
}

/// The variants of `revs` of the git tree `dir`.
pub fn variants(sh: &Shell, dir: &Path, revs: &[String], known: &Variants) -> Result<Vec<Variant>> {
    let mut out: Vec<Variant> = Vec::new();
    for rev in revs {
        let v = variant(sh, dir, rev)?;
        if known.names().contains(&v.name.as_str()) || out.iter().any(|o| o.name == v.name) {
            bail!(exit::usage(format!(
                "--rev {rev}: its variant name `{}` is taken (by a variant of {} or another \
                 --rev); give the revision another way (a hash, a tag)",
                v.name,
                known.path.display()
            )));
        }
        out.push(v);
    }
    Ok(out)
}

fn variant(sh: &Shell, dir: &Path, rev: &str) -> Result<Variant> {
    let spec = format!("{rev}^{{commit}}");
    let hash = cmd!(sh, "git -C {dir} rev-parse --verify --quiet {spec}")
        .quiet()
        .ignore_stderr()
        .read()
        .with_context(|| {
            exit::usage(format!(
                "--rev {rev}: not a commit of {}: give a branch, tag or hash it has (`git -C {} \
                 log --oneline`)",
                dir.display(),
                dir.display()
            ))
        })?;
    let subject = cmd!(sh, "git -C {dir} log -1 --format=%s {hash}")
        .quiet()
        .read()
        .with_context(|| format!("reading the subject of {hash}"))?;
    let diff = cmd!(
        sh,
        "git -C {dir} diff --no-color --no-ext-diff --no-renames -R {hash}"
    )
    .quiet()
    .read()
    .with_context(|| {
        format!(
            "diffing the working tree of {} against {rev}",
            dir.display()
        )
    })?;
    let short = &hash[..hash.len().min(12)];
    let patches = if diff.trim().is_empty() {
        // The working tree is that revision already.
        Vec::new()
    } else {
        let label = format!("{} at {rev} ({short})", dir.display());
        vec![Patch {
            diff: extract_diff(&diff).with_context(|| format!("--rev {rev}: reading {label}"))?,
            sha256: util::sha256_hex(diff.as_bytes()),
            subject: subject.clone(),
            label,
            posted: Default::default(),
            cover: None,
        }]
    };
    let name = name(rev);
    Ok(Variant {
        description: format!("{} at {rev} ({short} {subject})", dir.display()),
        under_test: Some(UnderTest {
            variant: name.clone(),
            base: format!("the working tree of {}", dir.display()),
            file: format!("{rev} ({short})"),
            subjects: vec![subject],
            other_base: String::new(),
            posted: Default::default(),
            commit: Some(hash.clone()),
            ..Default::default()
        }),
        name,
        patches,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_revision_names_a_valid_variant() {
        assert_eq!(name("HEAD~3"), "rev-head-3");
        assert_eq!(name("origin/master"), "rev-origin-master");
        assert_eq!(name("v7.3-rc1"), "rev-v7-3-rc1");
    }

    /// A tree with two commits; the working tree at the second, edited.
    #[test]
    fn a_revision_is_the_diff_from_the_working_tree_to_it() {
        let sh = Shell::new().unwrap();
        let t = util::testdir::Dir::new("revs");
        let d = t.path();
        let git = |args: &[&str]| {
            cmd!(sh, "git -C {d} {args...}")
                .env("GIT_AUTHOR_NAME", "t")
                .env("GIT_AUTHOR_EMAIL", "t@t")
                .env("GIT_COMMITTER_NAME", "t")
                .env("GIT_COMMITTER_EMAIL", "t@t")
                .quiet()
                .ignore_stdout()
                .run()
                .unwrap()
        };
        git(&["init", "-q"]);
        std::fs::create_dir_all(d.join("mm")).unwrap();
        std::fs::write(d.join("mm/a.c"), "one\n").unwrap();
        git(&["add", "."]);
        git(&["commit", "-qm", "first"]);
        std::fs::write(d.join("mm/a.c"), "two\n").unwrap();
        git(&["commit", "-qam", "mm: second"]);
        let known = Variants::repo().unwrap();
        let v = variants(&sh, d, &["HEAD~1".into(), "HEAD".into()], &known).unwrap();
        assert_eq!(v[0].name, "rev-head-1");
        assert!(
            v[0].patches[0].diff.contains("-two\n+one"),
            "{}",
            v[0].patches[0].diff
        );
        assert_eq!(v[0].under_test.as_ref().unwrap().subjects, ["first"]);
        // HEAD is the working tree: nothing to apply.
        assert!(v[1].patches.is_empty());
        // An edit in the working tree is undone by the revision's diff.
        std::fs::write(d.join("mm/a.c"), "three\n").unwrap();
        let v = variants(&sh, d, &["HEAD".into()], &known).unwrap();
        assert!(v[0].patches[0].diff.contains("-three\n+two"));
        let e = variants(&sh, d, &["nope".into()], &known)
            .unwrap_err()
            .to_string();
        assert!(e.contains("--rev nope: not a commit of"), "{e}");
        let e = variants(&sh, d, &["HEAD".into(), "HEAD".into()], &known)
            .unwrap_err()
            .to_string();
        assert!(e.contains("its variant name `rev-head` is taken"), "{e}");
    }
}
