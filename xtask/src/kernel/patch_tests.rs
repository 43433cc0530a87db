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
    let d =
        "diff --git a/old.c b/new.c\nsimilarity index 90%\nrename from old.c\nrename to new.c\n\
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
            "memcg-refresh",
            "memcg-bounded"
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
    let e = Selection {
        patches: vec![util::project_root().join("xtask/fixtures/mail/001_5424f0ee04e0b99b.txt")],
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
        posted: Default::default(),
        cover: None,
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
