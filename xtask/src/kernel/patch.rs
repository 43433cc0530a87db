//! Patches: reading patch files (plain diffs or mails) and the files they
//! touch. Which patches make each variant is `variants`; applying them to the
//! cached tree is `switch`.

use std::{
    collections::BTreeSet,
    fs,
    path::{Component, Path},
};

use anyhow::{bail, Context, Result};

use crate::util;

/// A patch ready to apply.
#[derive(Debug, Clone)]
pub struct Patch {
    /// How to name it in messages (its path).
    pub label: String,
    /// The diff part of the file (mail headers and trailers removed).
    pub diff: String,
    /// sha256 of the file as given.
    pub sha256: String,
    /// What it says it is: a mail's subject (without `[PATCH]`), else the file name.
    pub subject: String,
}

impl Patch {
    /// The patches of a file: every patch of a mail or mbox (a series, MIME,
    /// quoted-printable; decoded by git), or the one diff of a plain file.
    pub fn read_all(path: &Path) -> Result<Vec<Patch>> {
        let bytes = fs::read(path).with_context(|| format!("reading patch {}", path.display()))?;
        if !super::mailbox::is_mail(&String::from_utf8_lossy(&bytes)) {
            return Ok(vec![Patch::read(path)?]);
        }
        let mails = super::mailbox::patches(path)?;
        let n = mails.len();
        mails
            .into_iter()
            .enumerate()
            .map(|(i, m)| {
                let label = format!("{} [{}/{n}] {}", path.display(), i + 1, m.subject);
                let diff = extract_diff(&m.patch).with_context(|| format!("reading {label}"))?;
                Ok(Patch {
                    label,
                    diff,
                    sha256: util::sha256_hex(&m.raw),
                    subject: m.subject,
                })
            })
            .collect()
    }

    pub fn read(path: &Path) -> Result<Patch> {
        let bytes = fs::read(path).with_context(|| format!("reading patch {}", path.display()))?;
        let text = String::from_utf8_lossy(&bytes);
        let diff =
            extract_diff(&text).with_context(|| format!("reading patch {}", path.display()))?;
        Ok(Patch {
            label: path.display().to_string(),
            diff,
            sha256: util::sha256_hex(&bytes),
            subject: path
                .file_name()
                .map_or_else(String::new, |n| n.to_string_lossy().into_owned()),
        })
    }
}

/// Takes the diff out of a patch file: a plain diff, a `git format-patch` mail,
/// or a mail like an -mm commit notice (headers, prose and trailers around it).
/// Hunks are read by their line counts, so text after the last hunk is dropped;
/// blank lines inside a hunk (mailers strip the context's leading space) are
/// restored as empty context lines.
pub fn extract_diff(text: &str) -> Result<String> {
    let lines: Vec<&str> = text.lines().collect();
    let mut out: Vec<String> = Vec::new();
    let mut i = 0;
    let mut files = 0;
    let is_file_start = |i: usize| {
        lines[i].starts_with("diff --git ")
            || (lines[i].starts_with("--- ")
                && lines.get(i + 1).is_some_and(|n| n.starts_with("+++ ")))
    };
    while i < lines.len() {
        if !is_file_start(i) {
            i += 1;
            continue;
        }
        files += 1;
        file_header(&lines, &mut i, &mut out)?;
        while i < lines.len() && lines[i].starts_with("@@ ") {
            hunk(&lines, &mut i, &mut out)?;
        }
    }
    if files == 0 {
        bail!("found no diff: expected `diff --git` or `---`/`+++` file headers followed by `@@` hunks");
    }
    let mut diff = out.join("\n");
    diff.push('\n');
    Ok(diff)
}

/// A file's header: its first line and everything up to the first hunk or
/// the next file.
fn file_header(lines: &[&str], i: &mut usize, out: &mut Vec<String>) -> Result<()> {
    const HEADER: &[&str] = &[
        "index ",
        "new file mode",
        "deleted file mode",
        "old mode",
        "new mode",
        "similarity index",
        "dissimilarity index",
        "rename from",
        "rename to",
        "copy from",
        "copy to",
        "--- ",
        "+++ ",
    ];
    out.push(lines[*i].to_string());
    *i += 1;
    while *i < lines.len() && !lines[*i].starts_with("@@ ") && !lines[*i].starts_with("diff --git ")
    {
        let l = lines[*i];
        if l.starts_with("Binary files ") || l.starts_with("GIT binary patch") {
            bail!("line {}: binary patches are not supported", *i + 1);
        }
        if !HEADER.iter().any(|h| l.starts_with(h)) {
            break;
        }
        out.push(l.to_string());
        *i += 1;
    }
    Ok(())
}

/// One hunk, its lines checked against the header's counts; blank context
/// lines that mailers strip are restored.
fn hunk(lines: &[&str], i: &mut usize, out: &mut Vec<String>) -> Result<()> {
    let (mut old, mut new) = hunk_counts(lines[*i])
        .with_context(|| format!("line {}: malformed hunk header `{}`", *i + 1, lines[*i]))?;
    out.push(lines[*i].to_string());
    *i += 1;
    while old > 0 || new > 0 {
        let Some(l) = lines.get(*i) else {
            bail!(
                "the diff ends inside a hunk (line {}): the patch is truncated",
                *i + 1
            );
        };
        match l.chars().next() {
            None | Some(' ') => {
                if old == 0 || new == 0 {
                    bail!("line {}: context line beyond the hunk's counts", *i + 1);
                }
                old -= 1;
                new -= 1;
                out.push(if l.is_empty() { " ".to_string() } else { l.to_string() });
            }
            Some('-') if old > 0 => {
                old -= 1;
                out.push(l.to_string());
            }
            Some('+') if new > 0 => {
                new -= 1;
                out.push(l.to_string());
            }
            Some('\\') => out.push(l.to_string()),
            _ => bail!(
                "line {}: `{l}` does not fit the hunk (expected {old} more old and {new} more new lines)",
                *i + 1
            ),
        }
        *i += 1;
    }
    if lines.get(*i).is_some_and(|l| l.starts_with('\\')) {
        out.push(lines[*i].to_string());
        *i += 1;
    }
    Ok(())
}

/// `@@ -a[,b] +c[,d] @@` → (b, d); a missing count means 1.
fn hunk_counts(header: &str) -> Option<(usize, usize)> {
    let (old, new) = hunk_ranges(header)?;
    Some((old.1, new.1))
}

/// `@@ -a[,b] +c[,d] @@` → ((a, b), (c, d)).
fn hunk_ranges(header: &str) -> Option<((usize, usize), (usize, usize))> {
    let inner = header.strip_prefix("@@ ")?;
    let inner = &inner[..inner.find(" @@")?];
    let mut parts = inner.split(' ');
    let range = |s: &str, sign: char| -> Option<(usize, usize)> {
        let s = s.strip_prefix(sign)?;
        match s.split_once(',') {
            Some((a, b)) => Some((a.parse().ok()?, b.parse().ok()?)),
            None => Some((s.parse().ok()?, 1)),
        }
    };
    let old = range(parts.next()?, '-')?;
    let new = range(parts.next()?, '+')?;
    Some((old, new))
}

/// Strips the first path component (`-p1`) and checks that the path stays inside
/// the tree.
fn strip_p1(name: &str) -> Result<Option<String>> {
    let name = name.split('\t').next().unwrap_or(name).trim_end();
    if name == "/dev/null" {
        return Ok(None);
    }
    let Some((_, rest)) = name.split_once('/') else {
        bail!("patch path `{name}` has no leading directory to strip (diffs are applied with -p1)");
    };
    in_tree(rest, name).map(Some)
}

/// `rel` as a tree-relative path, or an error naming `shown` when it is
/// absolute or climbs out of the tree.
fn in_tree(rel: &str, shown: &str) -> Result<String> {
    let path = Path::new(rel);
    if rel.is_empty()
        || path.is_absolute()
        || path
            .components()
            .any(|c| !matches!(c, Component::Normal(_)))
    {
        bail!("patch path `{shown}` leaves the tree");
    }
    Ok(rel.to_string())
}

/// The tree-relative files a diff touches (created, modified, deleted or renamed).
pub fn touched_paths(diff: &str) -> Result<BTreeSet<String>> {
    let mut out = BTreeSet::new();
    let mut minus: Option<String> = None;
    for line in diff.lines() {
        if let Some(rest) = line.strip_prefix("diff --git ") {
            for name in rest.split(' ') {
                if let Some(p) = strip_p1(name)? {
                    out.insert(p);
                }
            }
        } else if let Some(name) = line.strip_prefix("--- ") {
            minus = Some(name.to_string());
        } else if let Some(name) = line.strip_prefix("+++ ") {
            match strip_p1(name)? {
                Some(p) => {
                    out.insert(p);
                }
                // A deletion: the file is named on the `---` line.
                None => {
                    if let Some(p) = minus.as_deref().map(strip_p1).transpose()?.flatten() {
                        out.insert(p);
                    }
                }
            }
            // For a modification the `+++` name is the path: the `---` name may
            // carry a suffix (akpm's `a/file~patch-name`).
        } else if let Some(name) = line
            .strip_prefix("rename from ")
            .or_else(|| line.strip_prefix("rename to "))
        {
            // Git writes these without the a/ b/ prefix.
            out.insert(in_tree(name.trim_end(), line)?);
        }
    }
    Ok(out)
}

/// Finds the hunk of `diff` for `file` that starts at old line `line` and
/// describes it: `hunk #2 (@@ -1858,6 +1858,27 @@ ...)`.
fn describe_hunk(diff: &str, file: &str, line: usize) -> Option<String> {
    let mut current: Option<String> = None;
    let mut n = 0;
    for l in diff.lines() {
        if let Some(name) = l.strip_prefix("+++ ") {
            current = strip_p1(name).ok().flatten();
            n = 0;
        } else if l.starts_with("@@ ") {
            n += 1;
            let ((start, _), _) = hunk_ranges(l)?;
            if current.as_deref() == Some(file) && start == line {
                return Some(format!("hunk #{n} of {file} (`{l}`)"));
            }
        }
    }
    None
}

/// Names the failing hunk from `git apply`'s `error: patch failed: FILE:LINE`.
pub fn failing_hunk(diff: &str, stderr: &str) -> Option<String> {
    stderr.lines().find_map(|l| {
        let rest = l.trim().strip_prefix("error: patch failed: ")?;
        let (file, line) = rest.rsplit_once(':')?;
        describe_hunk(diff, file, line.parse().ok()?)
            .or_else(|| Some(format!("the hunk of {file} at line {line}")))
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::kernel::{
        switch::Worktree,
        variants::{Selection, Variant, Variants, VARIANTS_FILE},
    };
    use std::path::PathBuf;
    use xshell::Shell;

    #[test]
    fn a_series_mbox_is_one_patch_per_mail_and_repo_patches_read_alike() {
        let root = util::project_root();
        let series = Patch::read_all(&root.join("xtask/fixtures/mail/series.mbox")).unwrap();
        assert_eq!(series.len(), 2);
        assert!(series[0]
            .label
            .ends_with("series.mbox [1/2] mm: change b to c"));
        assert!(series[1].diff.contains("+w = 2;"), "{}", series[1].diff);
        // git format-patch files: git's decoding and the hand parser agree.
        let dirs = [root.join("patches"), root.join("patches/faults")];
        for e in dirs.iter().flat_map(|d| fs::read_dir(d).unwrap()) {
            let p = e.unwrap().path();
            if p.extension().is_some_and(|x| x == "patch") {
                let by_git = Patch::read_all(&p).unwrap();
                assert_eq!(by_git.len(), 1);
                assert_eq!(
                    by_git[0].diff,
                    Patch::read(&p).unwrap().diff,
                    "{}",
                    p.display()
                );
            }
        }
    }
    use crate::util::testdir;

    const SEED_V1: &str = include_str!("../../fixtures/mail/000_83f260798f5a9577.txt");
    const SEED_V2: &str = include_str!("../../fixtures/mail/001_5424f0ee04e0b99b.txt");

    fn repo_patch(name: &str) -> String {
        let path = util::project_root().join("patches").join(name);
        fs::read_to_string(&path).unwrap()
    }

    /// The `+`/`-` lines of a diff, without file headers.
    fn changed_lines(diff: &str) -> Vec<String> {
        diff.lines()
            .filter(|l| {
                (l.starts_with('+') && !l.starts_with("+++ "))
                    || (l.starts_with('-') && !l.starts_with("--- "))
            })
            .map(str::to_string)
            .collect()
    }

    #[test]
    fn diff_is_taken_out_of_an_mm_commit_mail() {
        // The -mm notice has prose before and `_` plus a patch list after the diff.
        let d = extract_diff(SEED_V1).unwrap();
        assert!(
            d.starts_with("--- a/mm/page-writeback.c~mm-start-background"),
            "{d}"
        );
        assert!(d.ends_with(" \t\t/*\n"), "{d}");
        assert!(!d.contains("Patches currently"));
        assert_eq!(
            touched_paths(&d).unwrap(),
            BTreeSet::from(["mm/page-writeback.c".to_string()])
        );
    }

    #[test]
    fn diff_is_taken_out_of_a_format_patch_mail() {
        // The signature `-- \n2.52.0` after the last hunk is not part of the diff.
        let d = extract_diff(SEED_V2).unwrap();
        assert!(d.starts_with("diff --git a/mm/page-writeback.c b/mm/page-writeback.c\nindex "));
        assert!(!d.contains("2.52.0"));
        assert_eq!(changed_lines(&d).len(), 21);
    }

    #[test]
    fn blank_context_lines_from_mailers_are_restored() {
        let mail = "Subject: x\n\n--- a/f\n+++ b/f\n@@ -1,3 +1,3 @@\n a\n\n-b\n+c\n";
        assert_eq!(
            extract_diff(mail).unwrap(),
            "--- a/f\n+++ b/f\n@@ -1,3 +1,3 @@\n a\n \n-b\n+c\n"
        );
    }

    #[test]
    fn broken_diffs_are_errors() {
        let e = extract_diff("just prose\n--- not a diff\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("found no diff"), "{e}");
        let e = extract_diff("--- a/f\n+++ b/f\n@@ -1,3 +1,3 @@\n a\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("truncated"), "{e}");
        let e = extract_diff("--- a/f\n+++ b/f\n@@ -1,1 +1,1 @@\n?x\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("does not fit the hunk"), "{e}");
    }

    #[test]
    fn repository_patches_change_exactly_the_seeds_lines() {
        // v1 and v2 must carry the seeds' changes verbatim; only context may move.
        let v1 = extract_diff(&repo_patch(
            "0002-v1-start-writeback-on-per-wb-threshold-for-strictlimit.patch",
        ))
        .unwrap();
        assert_eq!(
            changed_lines(&v1),
            changed_lines(&extract_diff(SEED_V1).unwrap())
        );
        let v2 = extract_diff(&repo_patch(
            "0003-v2-reinstate-unconditional-writeback-start.patch",
        ))
        .unwrap();
        assert_eq!(
            changed_lines(&v2),
            changed_lines(&extract_diff(SEED_V2).unwrap())
        );
    }

    #[test]
    fn touched_paths_cover_creates_deletes_and_renames() {
        let d = "diff --git a/old.c b/new.c\nsimilarity index 90%\nrename from old.c\nrename to new.c\n\
                 --- /dev/null\n+++ b/added.c\n@@ -0,0 +1 @@\n+x\n\
                 --- a/gone.c\n+++ /dev/null\n@@ -1 +0,0 @@\n-x\n";
        let t = touched_paths(d).unwrap();
        let want: BTreeSet<String> = ["old.c", "new.c", "added.c", "gone.c"]
            .iter()
            .map(|s| s.to_string())
            .collect();
        assert_eq!(t, want);
        let e = touched_paths("--- a/../etc/passwd\n+++ b/../etc/passwd\n").unwrap_err();
        assert!(e.to_string().contains("leaves the tree"));
    }

    #[test]
    fn the_repository_variants_file_is_valid() {
        let v = Variants::load(&util::project_root().join(VARIANTS_FILE)).unwrap();
        assert_eq!(
            v.names(),
            [
                "regressed",
                "v1",
                "v2",
                "upstream",
                "memcg-flush",
                "memcg-refresh"
            ]
        );
        // The experiments of issue 34 are built only when named.
        assert_eq!(v.default_names(), ["regressed", "v1", "v2", "upstream"]);
        for name in v.names() {
            v.variant(name).unwrap();
        }
    }

    #[test]
    fn an_adhoc_patch_goes_on_the_reference_unless_told_otherwise() {
        let v = Variants::load(&util::project_root().join(VARIANTS_FILE)).unwrap();
        let seed = util::project_root().join("xtask/fixtures/mail/001_5424f0ee04e0b99b.txt");
        // Alone: measured beside its base, the baseline and the reference.
        let sel = Selection {
            patches: vec![seed.clone()],
            ..Selection::default()
        };
        let out = sel.resolve(&v).unwrap();
        let names: Vec<&str> = out.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(
            names,
            ["regressed", "upstream", "patch-001_5424f0ee04e0b99b"]
        );
        let adhoc = &out[2];
        // upstream has no patches: the file's one patch is all.
        assert_eq!(adhoc.patches.len(), 1);
        let u = adhoc.under_test.as_ref().unwrap();
        assert_eq!(
            (u.base.as_str(), u.other_base.as_str(), u.file.as_str()),
            ("upstream", "regressed", "001_5424f0ee04e0b99b.txt")
        );
        // Not a mail git can split: the file's name says what it is.
        assert_eq!(u.subjects, ["001_5424f0ee04e0b99b.txt"]);
        // --base regressed: on the baseline, after its own patch.
        let sel = Selection {
            variants: vec!["v1".into()],
            patches: vec![seed],
            base: Some("regressed".into()),
            ..Selection::default()
        };
        let out = sel.resolve(&v).unwrap();
        let names: Vec<&str> = out.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(names, ["v1", "patch-001_5424f0ee04e0b99b"]);
        let adhoc = &out[1];
        assert_eq!(adhoc.patches.len(), 2);
        assert!(adhoc.patches[0]
            .label
            .ends_with("0001-regressed-restore-64dd89ae01f2-balance_dirty_pages.patch"));
        assert!(adhoc.patches[1]
            .diff
            .starts_with("diff --git a/mm/page-writeback.c"));
        assert_eq!(adhoc.under_test.as_ref().unwrap().other_base, "upstream");
        let e = Selection {
            variants: vec!["v9".into()],
            ..Selection::default()
        }
        .resolve(&v)
        .unwrap_err();
        assert!(e.to_string().contains("known variants"), "{e}");
        let e =
            Selection {
                patches: vec![
                    util::project_root().join("xtask/fixtures/mail/001_5424f0ee04e0b99b.txt")
                ],
                base: Some("mainline".into()),
                ..Selection::default()
            }
            .resolve(&v)
            .unwrap_err();
        assert!(
            format!("{e:#}").contains("--base mainline: unknown variant `mainline`"),
            "{e:#}"
        );
    }

    #[test]
    fn rename_lines_are_path_checked_like_the_others() {
        let ok = "diff --git a/mm/x.c b/mm/y.c\nsimilarity index 100%\nrename from mm/x.c\nrename to mm/y.c\n";
        let t = touched_paths(ok).unwrap();
        assert!(t.contains("mm/x.c") && t.contains("mm/y.c"), "{t:?}");
        for bad in [
            "rename from ../../etc/passwd",
            "rename to /etc/passwd",
            "rename to mm/../../x",
        ] {
            let diff = format!("diff --git a/mm/x.c b/mm/y.c\n{bad}\n");
            let e = touched_paths(&diff).unwrap_err().to_string();
            assert!(e.contains("leaves the tree"), "{bad}: {e}");
        }
    }

    #[test]
    fn two_patches_with_one_stem_are_refused_not_merged() {
        // Seeds 000 and 001 saved as a/fix.patch and b/fix.patch would both
        // build as `patch-fix`, the second overwriting the first.
        let v = Variants::load(&util::project_root().join(VARIANTS_FILE)).unwrap();
        let dir = util::testdir::Dir::new("same-stem");
        let mail = util::project_root().join("xtask/fixtures/mail");
        let (a, b) = (dir.path().join("a"), dir.path().join("b"));
        std::fs::create_dir_all(&a).unwrap();
        std::fs::create_dir_all(&b).unwrap();
        std::fs::copy(mail.join("000_83f260798f5a9577.txt"), a.join("fix.patch")).unwrap();
        std::fs::copy(mail.join("001_5424f0ee04e0b99b.txt"), b.join("fix.patch")).unwrap();
        let sel = |files: Vec<PathBuf>| Selection {
            patches: files,
            ..Selection::default()
        };
        let e = sel(vec![a.join("fix.patch"), b.join("fix.patch")])
            .resolve(&v)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("would both build as `patch-fix`: rename one of the files"),
            "{e}"
        );
        let e = sel(vec![a.join("fix.patch"), a.join("fix.patch")])
            .resolve(&v)
            .unwrap_err()
            .to_string();
        assert!(e.contains("is given twice"), "{e}");
        assert_eq!(
            sel(vec![a.join("fix.patch")])
                .resolve(&v)
                .unwrap()
                .last()
                .unwrap()
                .name,
            "patch-fix"
        );
    }

    fn patch(label: &str, diff: &str) -> Patch {
        Patch {
            label: label.into(),
            diff: extract_diff(diff).unwrap(),
            sha256: util::sha256_hex(diff.as_bytes()),
            subject: label.into(),
        }
    }

    fn variant(name: &str, patches: Vec<Patch>) -> Variant {
        Variant {
            name: name.into(),
            description: String::new(),
            patches,
            under_test: None,
        }
    }

    #[test]
    fn switching_rewrites_only_touched_files_and_restores_pristine() {
        let dir = testdir::Dir::new("switch");
        let tree = dir.path().join("tree");
        fs::create_dir_all(tree.join("mm")).unwrap();
        fs::write(tree.join("mm/a.c"), "one\ntwo\nthree\n").unwrap();
        fs::write(tree.join("mm/b.c"), "untouched\n").unwrap();
        let b_mtime = fs::metadata(tree.join("mm/b.c"))
            .unwrap()
            .modified()
            .unwrap();
        let sh = Shell::new().unwrap();
        let wt = Worktree::new(dir.path());

        let p = patch(
            "p1",
            "--- a/mm/a.c\n+++ b/mm/a.c\n@@ -1,3 +1,3 @@\n one\n-two\n+TWO\n three\n",
        );
        let add = patch("p2", "--- /dev/null\n+++ b/mm/new.c\n@@ -0,0 +1 @@\n+new\n");
        let s = wt.switch(&sh, &variant("x", vec![p.clone(), add])).unwrap();
        assert_eq!(s.changed, ["mm/a.c", "mm/new.c"]);
        assert_eq!(
            fs::read_to_string(tree.join("mm/a.c")).unwrap(),
            "one\nTWO\nthree\n"
        );
        assert_eq!(wt.current().unwrap().as_deref(), Some("x"));

        // Same variant again: nothing is rewritten, so nothing rebuilds.
        let s = wt
            .switch(
                &sh,
                &variant(
                    "x2",
                    vec![
                        p.clone(),
                        patch("p2", "--- /dev/null\n+++ b/mm/new.c\n@@ -0,0 +1 @@\n+new\n"),
                    ],
                ),
            )
            .unwrap();
        assert!(s.changed.is_empty(), "{:?}", s.changed);

        // Back to pristine: a.c restored, new.c removed, b.c never written.
        let s = wt.switch(&sh, &variant("pristine", vec![])).unwrap();
        assert_eq!(s.changed, ["mm/a.c", "mm/new.c"]);
        assert_eq!(
            fs::read_to_string(tree.join("mm/a.c")).unwrap(),
            "one\ntwo\nthree\n"
        );
        assert!(!tree.join("mm/new.c").exists());
        assert_eq!(
            fs::metadata(tree.join("mm/b.c"))
                .unwrap()
                .modified()
                .unwrap(),
            b_mtime
        );
    }

    #[test]
    fn a_patch_that_does_not_apply_names_the_hunk_and_changes_nothing() {
        let dir = testdir::Dir::new("badpatch");
        let tree = dir.path().join("tree");
        fs::create_dir_all(tree.join("mm")).unwrap();
        let text: String = (1..=30).map(|n| format!("line {n}\n")).collect();
        fs::write(tree.join("mm/a.c"), &text).unwrap();
        let sh = Shell::new().unwrap();
        let wt = Worktree::new(dir.path());
        let good = patch(
            "good.patch",
            "--- a/mm/a.c\n+++ b/mm/a.c\n@@ -2,3 +2,3 @@\n line 2\n-line 3\n+LINE 3\n line 4\n",
        );
        wt.switch(&sh, &variant("good", vec![good])).unwrap();
        let patched = fs::read_to_string(tree.join("mm/a.c")).unwrap();

        // The second hunk's context does not exist in the file.
        let bad = patch(
            "bad.patch",
            "--- a/mm/a.c\n+++ b/mm/a.c\n@@ -2,3 +2,3 @@\n line 2\n-line 3\n+LINE 3\n line 4\n\
             @@ -20,3 +20,3 @@\n line 20\n-no such line\n+x\n line 22\n",
        );
        let e = wt
            .switch(&sh, &variant("bad", vec![bad]))
            .unwrap_err()
            .to_string();
        assert!(e.contains("patch bad.patch does not apply"), "{e}");
        assert!(e.contains("hunk #2 of mm/a.c (`@@ -20,3 +20,3 @@`)"), "{e}");
        assert!(e.contains("still holds variant `good`"), "{e}");
        assert_eq!(fs::read_to_string(tree.join("mm/a.c")).unwrap(), patched);
        assert_eq!(wt.current().unwrap().as_deref(), Some("good"));
    }
}
