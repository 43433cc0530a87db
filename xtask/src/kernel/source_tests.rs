use super::*;

#[test]
fn a_cached_package_is_reused_whole_and_fetched_again_when_damaged() {
    let cache = testdir::Dir::new("deb-cache");
    let debs = cache.path().join("apt/debs");
    fs::create_dir_all(&debs).unwrap();
    let deb = debs.join("linux-source-7.3_7.3.4-1_all.deb");
    fs::write(&deb, b"!<arch>\nthe whole package").unwrap();
    crate::kernel::cache::stamp(&deb).unwrap();
    let sh = Shell::new().unwrap();
    // No mirror answers here: a fetch would fail.
    let args = SourceArgs {
        debian_mirror: Some("http://127.0.0.1:9/debian".into()),
        ..SourceArgs::default()
    };
    let got = debian_deb(&sh, cache.path(), &args, "linux-source-7.3", SUITES).unwrap();
    assert_eq!(got, deb);
    // Truncated (a download cut short): not reused, removed, fetched again.
    fs::write(&deb, b"!<arch>\nthe whole").unwrap();
    let fetched = debian_deb(&sh, cache.path(), &args, "linux-source-7.3", SUITES);
    assert!(fetched.is_err(), "nothing to fetch from: {fetched:?}");
    assert!(!deb.exists(), "the damaged package was kept");
}

use crate::util::testdir;

fn fake_tree(version: &str, bdp: bool) -> testdir::Dir {
    let t = testdir::Dir::new("tree");
    let (v, rest) = version.split_once('.').unwrap();
    let (p, s) = rest.split_once('.').unwrap();
    fs::write(
        t.path().join("Makefile"),
        format!(
            "# SPDX\nVERSION = {v}\nPATCHLEVEL = {p}\nSUBLEVEL = {s}\nEXTRAVERSION =\n\
             mrproper:\n\t@true\n"
        ),
    )
    .unwrap();
    fs::create_dir_all(t.path().join("mm")).unwrap();
    let body = if bdp {
        "static int balance_dirty_pages(struct bdi_writeback *wb)\n{\n\twb_start_background_writeback(wb);\n}\n"
    } else {
        "int nothing;\n"
    };
    fs::write(t.path().join("mm/page-writeback.c"), body).unwrap();
    t
}

#[test]
fn a_developer_tree_is_copied_never_modified_and_identified_by_content() {
    let dir = fake_tree("7.4.0", true);
    let sh = Shell::new().unwrap();
    let d = dir.path();
    let git = |args: &[&str]| testdir::git(d, args);
    git(&["init", "-q"]);
    fs::write(d.join(".gitignore"), "*.o\n").unwrap();
    git(&["add", "."]);
    git(&["commit", "-qm", "base"]);
    // An uncommitted change, an untracked file, and a build output.
    fs::write(
        d.join("mm/page-writeback.c"),
        "static int balance_dirty_pages(x) { wb_start_background_writeback(wb); } /* mine */\n",
    )
    .unwrap();
    fs::write(d.join("NEW"), "untracked\n").unwrap();
    fs::write(d.join("mm/page-writeback.o"), "object").unwrap();
    let status = git(&["status", "--porcelain"]);

    let cache = testdir::Dir::new("cache");
    let src = local_tree(&sh, cache.path(), d, None).unwrap();
    let tree = src.tree();
    assert!(fs::read_to_string(tree.join("mm/page-writeback.c"))
        .unwrap()
        .contains("/* mine */"));
    assert!(tree.join("NEW").is_file());
    assert!(
        !tree.join("mm/page-writeback.o").exists(),
        "ignored build outputs stay behind"
    );
    assert!(!tree.join(".git").exists());
    assert_eq!(src.meta.kind, "local");
    assert_eq!(src.meta.kernel_version, "7.4.0");
    assert_eq!(
        git(&["status", "--porcelain"]),
        status,
        "the developer's tree was modified"
    );

    // One mirror per tree: an edit is synced into it, nothing else is copied.
    let again = local_tree(&sh, cache.path(), d, None).unwrap();
    assert_eq!(again.id, src.id);
    assert_eq!(again.sync(&sh).unwrap().meta.sha256, src.meta.sha256);
    let untouched = fs::metadata(tree.join("Makefile"))
        .unwrap()
        .modified()
        .unwrap();
    std::thread::sleep(std::time::Duration::from_millis(20));
    fs::write(d.join("NEW"), "changed\n").unwrap();
    fs::remove_file(d.join("mm/page-writeback.o")).unwrap();
    git(&["rm", "-q", "--cached", ".gitignore"]);
    fs::remove_file(d.join(".gitignore")).unwrap();
    let synced = local_tree(&sh, cache.path(), d, None)
        .unwrap()
        .sync(&sh)
        .unwrap();
    assert_eq!(synced.id, src.id);
    assert_ne!(
        synced.meta.sha256, src.meta.sha256,
        "the provenance follows the edit"
    );
    assert_eq!(fs::read_to_string(tree.join("NEW")).unwrap(), "changed\n");
    assert!(
        !tree.join(".gitignore").exists(),
        "a deleted file is deleted"
    );
    assert_eq!(
        fs::metadata(tree.join("Makefile"))
            .unwrap()
            .modified()
            .unwrap(),
        untouched,
        "an unchanged file is not rewritten (make would rebuild it)"
    );
    assert_eq!(read_meta(&src.root).unwrap().sha256, synced.meta.sha256);
}

/// bisect's case: a worktree of the tree, checked out afresh (every mtime
/// new), built in the tree's own mirror.
#[test]
fn another_checkout_syncs_into_the_trees_mirror_copying_only_what_differs() {
    let dir = fake_tree("7.4.1", true);
    let d = dir.path();
    let sh = Shell::new().unwrap();
    let git = |args: &[&str]| testdir::git(d, args);
    git(&["init", "-q"]);
    git(&["add", "."]);
    git(&["commit", "-qm", "base"]);
    let cache = testdir::Dir::new("mirror-of");
    let src = local_tree(&sh, cache.path(), d, None).unwrap();
    let mtime = |rel: &str| {
        fs::metadata(src.tree().join(rel))
            .unwrap()
            .modified()
            .unwrap()
    };
    let makefile = mtime("Makefile");
    std::thread::sleep(std::time::Duration::from_millis(20));
    let other = testdir::Dir::new("mirror-of-wt");
    let wt = other.path().join("wt");
    git(&["worktree", "add", "-q", "--detach", wt.to_str().unwrap()]);
    fs::write(
        wt.join("mm/page-writeback.c"),
        "static int balance_dirty_pages(x) { wb_start_background_writeback(wb); } /* wt */
",
    )
    .unwrap();
    let args = SourceArgs {
        kernel_src: Some(wt.clone()),
        mirror_of: Some(d.to_path_buf()),
        ..SourceArgs::default()
    };
    assert_eq!(args.tag().unwrap(), local_id(d).unwrap());
    let synced = args.prepare(&sh, cache.path()).unwrap().sync(&sh).unwrap();
    assert_eq!(synced.id, src.id, "the tree's own mirror");
    let pw = fs::read_to_string(src.tree().join("mm/page-writeback.c")).unwrap();
    assert!(pw.contains("/* wt */"), "{pw}");
    assert_eq!(
        mtime("Makefile"),
        makefile,
        "checked out again with the same content: not copied (make would rebuild it)"
    );
    assert_eq!(
        synced.meta.origin.as_deref(),
        Some(fs::canonicalize(&wt).unwrap().to_str().unwrap())
    );
    // Back to the tree itself: its own file again, the rest left alone.
    let back = local_tree(&sh, cache.path(), d, None)
        .unwrap()
        .sync(&sh)
        .unwrap();
    let pw = fs::read_to_string(back.tree().join("mm/page-writeback.c")).unwrap();
    assert!(!pw.contains("/* wt */"), "{pw}");
    assert_eq!(mtime("Makefile"), makefile);
}

#[test]
fn an_edit_to_a_patched_file_reaches_the_variant_through_its_patch() {
    let dir = fake_tree("7.4.3", true);
    let d = dir.path();
    let sh = Shell::new().unwrap();
    let cache = testdir::Dir::new("patched-edit");
    let src = local_tree(&sh, cache.path(), d, None).unwrap();
    let diff = "--- a/mm/page-writeback.c\n+++ b/mm/page-writeback.c\n@@ -1,4 +1,5 @@\n static int balance_dirty_pages(struct bdi_writeback *wb)\n {\n+\t/* patched */\n \twb_start_background_writeback(wb);\n }\n";
    let variant = crate::kernel::variants::Variant {
        name: "p".into(),
        description: String::new(),
        patches: vec![crate::kernel::patch::Patch {
            label: "p.patch".into(),
            diff: diff.into(),
            sha256: "0".into(),
            subject: "p.patch".into(),
            posted: Default::default(),
            cover: None,
        }],
        under_test: None,
    };
    let wt = crate::kernel::switch::Worktree::new(&src.root);
    wt.switch(&sh, &variant).unwrap();
    // The developer edits the end of the file the variant patches.
    let pw = d.join("mm/page-writeback.c");
    let edited = fs::read_to_string(&pw).unwrap() + "/* edited */\n";
    fs::write(&pw, &edited).unwrap();
    let src = src.sync(&sh).unwrap();
    let in_tree = fs::read_to_string(src.tree().join("mm/page-writeback.c")).unwrap();
    assert!(
        !in_tree.contains("edited"),
        "left to the next switch: {in_tree}"
    );
    wt.switch(&sh, &variant).unwrap();
    let in_tree = fs::read_to_string(src.tree().join("mm/page-writeback.c")).unwrap();
    assert!(
        in_tree.contains("/* patched */") && in_tree.contains("/* edited */"),
        "{in_tree}"
    );
    assert_eq!(
        fs::read_to_string(&pw).unwrap(),
        edited,
        "the developer's tree is untouched"
    );
}

#[test]
fn two_concurrent_preparations_of_one_tree_both_succeed() {
    let dir = fake_tree("7.4.1", true);
    let cache = testdir::Dir::new("race");
    // A leftover of an interrupted preparation of the same tree.
    let args = SourceArgs {
        kernel_src: Some(dir.path().to_path_buf()),
        ..SourceArgs::default()
    };
    let sources: Vec<Source> = std::thread::scope(|s| {
        let a = s.spawn(|| args.prepare(&Shell::new().unwrap(), cache.path()));
        let b = s.spawn(|| args.prepare(&Shell::new().unwrap(), cache.path()));
        [a.join().unwrap().unwrap(), b.join().unwrap().unwrap()].into()
    });
    assert_eq!(sources[0].id, sources[1].id);
    let tree = sources[0].tree();
    assert_eq!(validate_tree(&tree).unwrap(), "7.4.1");
    assert!(read_meta(&sources[0].root).is_some());
    // Nothing half-made is left behind.
    let left: Vec<String> = fs::read_dir(cache.path().join("src"))
        .unwrap()
        .flatten()
        .map(|e| e.file_name().to_string_lossy().into_owned())
        .filter(|n| n.ends_with(".partial"))
        .collect();
    assert!(left.is_empty(), "{left:?}");
}

#[test]
fn a_leftover_tree_is_replaced_not_reused() {
    let dir = fake_tree("7.4.2", true);
    let cache = testdir::Dir::new("stale");
    let sh = Shell::new().unwrap();
    let first = local_tree(&sh, cache.path(), dir.path(), None).unwrap();
    // Interrupted: the tree lost its source.json and holds junk.
    fs::remove_file(first.root.join("source.json")).unwrap();
    fs::write(first.tree().join("JUNK"), "x").unwrap();
    let again = local_tree(&sh, cache.path(), dir.path(), None).unwrap();
    assert_eq!(again.id, first.id);
    assert!(!again.tree().join("JUNK").exists());
    assert!(read_meta(&again.root).is_some());
}

#[test]
fn a_debian_series_is_major_dot_minor() {
    assert_eq!(series("6.12").unwrap(), "6.12");
    for bad in ["6", "6.12.3", "linux-source-6.12", "6.x", ".1", ""] {
        let e = series(bad).unwrap_err();
        assert!(
            e.contains("is not a kernel series") && e.contains("6.12"),
            "{bad}: {e}"
        );
    }
    // Another series passes with balance_dirty_pages(); a 7.x-only check
    // would have refused it.
    let old = fake_tree("6.1.158", true);
    assert_eq!(validate_any_series(old.path()).unwrap(), "6.1.158");
    assert!(validate_tree(old.path()).is_err());
    let odd = fake_tree("6.1.0", false);
    assert!(validate_any_series(odd.path()).is_err());
}

#[test]
fn debian_mirror_is_a_flag_of_the_debian_source_only() {
    let parse = |argv: &[&str]| {
        crate::tasks::args::try_parse_from::<SourceArgs>(
            std::iter::once("x").chain(argv.iter().copied()),
        )
    };
    let a = parse(&["--debian-mirror", "http://m.example/debian"]).unwrap();
    assert_eq!(a.debian_mirror.as_deref(), Some("http://m.example/debian"));
    // It is no part of the source's identity: the same kernels, any mirror.
    assert_eq!(a.tag().unwrap(), SourceArgs::default().tag().unwrap());
    let e = parse(&[
        "--debian-mirror",
        "http://m.example/debian",
        "--kernel-src",
        "/k",
    ])
    .unwrap_err()
    .to_string();
    assert!(e.contains("cannot be used with"), "{e}");
}

#[test]
fn accepts_a_7x_tree_with_balance_dirty_pages() {
    let t = fake_tree("7.3.4", true);
    assert_eq!(validate_tree(t.path()).unwrap(), "7.3.4");
}

#[test]
fn rejects_other_majors_and_missing_functions() {
    let old = fake_tree("6.19.0", true);
    let err = validate_tree(old.path()).unwrap_err().to_string();
    assert!(err.contains("Linux 6.19.0") && err.contains("7.x"), "{err}");
    let odd = fake_tree("7.3.0", false);
    let err = validate_tree(odd.path()).unwrap_err().to_string();
    assert!(err.contains("balance_dirty_pages"), "{err}");
    let none = testdir::Dir::new("empty");
    let err = validate_tree(none.path()).unwrap_err().to_string();
    assert!(err.contains("not a kernel tree"), "{err}");
}
