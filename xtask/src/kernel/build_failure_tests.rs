//! The fixtures are real: `make` of a scratch copy of the cached 7.3 tree
//! (its sources hard-linked, its build directory copied), with a file
//! broken on purpose, the compiler made missing (LLVM=-99) or killed, the
//! build directory's `mm/` a full tmpfs.

use super::*;

fn fixture(name: &str) -> String {
    let path = crate::util::project_root()
        .join("xtask/fixtures/make")
        .join(name);
    fs::read_to_string(&path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The files of the tree the fixtures name.
fn in_tree(rel: &str) -> bool {
    [
        "mm/page-writeback.c",
        "rust/kernel/lib.rs",
        "fs/fuse/file.c",
    ]
    .contains(&rel)
}

fn patch(touched: &[&str], added: &str, base_built: bool) -> Tested {
    Tested::Patch {
        touched: touched.iter().map(|s| s.to_string()).collect(),
        added: added.to_string(),
        base_built,
    }
}

fn class(log: &str, tested: &Tested) -> (Class, String) {
    let d = diagnose(&fixture(log), &in_tree, tested);
    (d.class, d.why)
}

#[test]
fn a_compile_error_in_a_file_the_patch_patches_is_the_patch_s() {
    let (c, why) = class(
        "compile-error.log",
        &patch(&["mm/page-writeback.c"], "", false),
    );
    assert_eq!(c, Class::UnderTest, "{why}");
    assert_eq!(
        why,
        "the patch under test does not build: errors in mm/page-writeback.c, a file it \
         patches (first: ../mm/page-writeback.c:3115:9: error)"
    );
}

#[test]
fn a_compile_error_elsewhere_is_the_patch_s_only_if_its_base_built() {
    // The patch changes a header; the error is in a file it does not patch.
    let (c, why) = class("compile-error.log", &patch(&["include/x.h"], "", true));
    assert_eq!(c, Class::UnderTest, "{why}");
    assert!(
        why.contains("but the same source and configuration built without it"),
        "{why}"
    );
    let (c, why) = class("compile-error.log", &patch(&["include/x.h"], "", false));
    assert_eq!(c, Class::Harness, "{why}");
    assert!(why.contains("never built without it"), "{why}");
}

#[test]
fn a_compile_error_of_a_repository_variant_is_the_harness_s_and_of_a_tree_the_tree_s() {
    let (c, why) = class("compile-error.log", &Tested::Nothing);
    assert_eq!(c, Class::Harness, "{why}");
    assert!(
        why.starts_with("a repository variant does not build"),
        "{why}"
    );
    let (c, why) = class("compile-error.log", &Tested::Tree);
    assert_eq!(c, Class::UnderTest, "{why}");
    assert_eq!(
        why,
        "the tree under test does not build: errors in mm/page-writeback.c (first: \
         ../mm/page-writeback.c:3115:9: error)"
    );
}

#[test]
fn a_link_error_is_the_patch_s_when_it_names_what_the_patch_adds() {
    // ld.lld names the object's file wrongly (`usercopy_64.c`, no debug
    // info) and the function that refers to the symbol.
    let added = "+extern void wbstall_no_such_function(void);\n+\twbstall_no_such_function();\n";
    let (c, why) = class(
        "link-error.log",
        &patch(&["mm/page-writeback.c"], added, false),
    );
    assert_eq!(c, Class::UnderTest, "{why}");
    assert_eq!(
        why,
        "the patch under test does not link: `ld.lld-19: error: undefined symbol: \
         wbstall_no_such_function` names what the patch adds"
    );
    // A patch that adds nothing the error names, its base never built.
    let (c, why) = class(
        "link-error.log",
        &patch(&["mm/page-writeback.c"], "+x\n", false),
    );
    assert_eq!(c, Class::Harness, "{why}");
    assert_eq!(class("link-error.log", &Tested::Tree).0, Class::UnderTest);
    let links = link_errors(&fixture("link-error.log"));
    assert_eq!(
        links[0].symbols,
        [
            "wbstall_no_such_function",
            "balance_dirty_pages_ratelimited_flags"
        ]
    );
}

#[test]
fn gnu_ld_and_modpost_errors_name_their_symbols() {
    let log = "ld: mm/page-writeback.o: in function `balance_dirty_pages':\n\
               page-writeback.c:(.text+0x2a1): undefined reference to `wb_nope'\n\
               ERROR: modpost: \"fuse_nope\" [fs/fuse/fuse.ko] undefined!\n";
    let links = link_errors(log);
    assert_eq!(links[0].symbols, ["wb_nope", "balance_dirty_pages"]);
    assert_eq!(links[1].symbols, ["fuse_nope"]);
}

#[test]
fn a_rust_error_names_its_file() {
    let (c, why) = class("rust-error.log", &Tested::Tree);
    assert_eq!(c, Class::UnderTest, "{why}");
    assert!(
        why.contains("errors in rust/kernel/lib.rs (first: ../rust/kernel/lib.rs:316:5"),
        "{why}"
    );
    let (c, _) = class("rust-error.log", &patch(&["rust/kernel/lib.rs"], "", false));
    assert_eq!(c, Class::UnderTest);
}

#[test]
fn a_missing_compiler_a_killed_one_and_a_full_disk_are_the_harness_s() {
    // Whatever is under test, even where the log also names its file.
    for tested in [
        Tested::Tree,
        patch(&["mm/page-writeback.c"], "", true),
        Tested::Nothing,
    ] {
        for (log, what) in [
            ("missing-compiler.log", "a tool is missing"),
            ("killed.log", "a command was killed"),
            ("enospc.log", "the disk filled up"),
        ] {
            let (c, why) = class(log, &tested);
            assert_eq!(c, Class::Harness, "{log}: {why}");
            assert!(why.contains(what), "{log}: {why}");
        }
    }
    let (_, why) = class("missing-compiler.log", &Tested::Tree);
    assert_eq!(
        why,
        "the build failed because a tool is missing (`make[4]: *** \
         [../scripts/Makefile.host:114: scripts/basic/fixdep] Error 127`), not because of the \
         code under test"
    );
}

#[test]
fn a_failure_without_an_error_line_is_the_harness_s() {
    let log = "  CC      mm/page-writeback.o\nmake[1]: *** [Makefile:260: __sub-make] Error 2\n";
    let d = diagnose(log, &in_tree, &Tested::Tree);
    assert_eq!(d.class, Class::Harness, "{}", d.why);
    // An error in a file that is not the tree's (a generated header in the
    // build directory) names nothing under test.
    let log = "./include/generated/x.h:1:1: error: unknown type name 'x'\n";
    assert_eq!(diagnose(log, &in_tree, &Tested::Tree).class, Class::Harness);
}

#[test]
fn the_class_goes_into_the_error_and_the_base_s_build_is_remembered() {
    let t = crate::util::testdir::Dir::new("build-failure");
    let tree = t.path();
    fs::create_dir_all(tree.join("mm")).unwrap();
    fs::write(tree.join("mm/page-writeback.c"), "int x;\n").unwrap();
    let e = anyhow::anyhow!("building the patch-x kernel failed (exit status: 2)");
    let e = classify(e, &fixture("compile-error.log"), tree, &Tested::Tree);
    assert_eq!(Class::of(&e), Class::UnderTest);
    assert!(
        format!("{e:#}").ends_with("failed (exit status: 2)"),
        "{e:#}"
    );
    // Marks: exactly the patches that built, once each.
    let base = ["aa".to_string()];
    assert!(!built_with(tree, &base));
    mark_built(tree, &base).unwrap();
    mark_built(tree, &base).unwrap();
    assert!(built_with(tree, &base));
    assert!(!built_with(tree, &[]) && !built_with(tree, &["aa".into(), "bb".into()]));
    assert_eq!(
        fs::read_to_string(tree.join(BUILT)).unwrap(),
        "patches aa\n"
    );
}

/// A variant of `base` patches (on `mm/a.c`) and, under test, `extra`
/// ones (on `mm/b.c`, adding `added`).
fn variant(base: usize, extra: usize, other_base: &str) -> Variant {
    let p = |file: &str, n: usize, added: &str| Patch {
        label: format!("{file} {n}"),
        diff: format!("--- a/{file}\n+++ b/{file}\n@@ -1,1 +1,2 @@\n x\n+{added}\n"),
        sha256: format!("{file}-{n}"),
        subject: format!("{file} {n}"),
        posted: Default::default(),
        cover: None,
    };
    let mut patches: Vec<Patch> = (0..base).map(|n| p("mm/a.c", n, "base_line")).collect();
    patches.extend((0..extra).map(|n| p("mm/b.c", n, "wbstall_added()")));
    Variant {
        name: "patch-x".into(),
        description: String::new(),
        patches,
        under_test: (extra > 0).then(|| crate::kernel::variants::UnderTest {
            variant: "patch-x".into(),
            base: "upstream".into(),
            file: "x.patch".into(),
            subjects: vec!["x".into(); extra],
            other_base: other_base.into(),
            posted: Default::default(),
            series: Vec::new(),
            cover: None,
            commit: None,
        }),
    }
}

#[test]
fn what_is_under_test_is_the_patch_s_files_and_lines_and_whether_its_base_built() {
    let t = crate::util::testdir::Dir::new("tested");
    let v = variant(1, 1, "regressed");
    let Tested::Patch {
        touched,
        added,
        base_built,
    } = tested(&v, false, t.path()).unwrap()
    else {
        panic!("a patch under test");
    };
    assert_eq!(touched.into_iter().collect::<Vec<_>>(), ["mm/b.c"]);
    assert_eq!(added, "+wbstall_added()\n");
    assert!(!base_built);
    // Once its base (the first patch alone) built in this directory.
    mark_built(t.path(), &shas(&v.patches[..1])).unwrap();
    assert!(matches!(
        tested(&v, false, t.path()).unwrap(),
        Tested::Patch {
            base_built: true,
            ..
        }
    ));
    // A developer's tree is all under test; a variant of the file nothing.
    assert_eq!(tested(&v, true, t.path()).unwrap(), Tested::Tree);
    assert_eq!(
        tested(&variant(2, 0, ""), false, t.path()).unwrap(),
        Tested::Nothing
    );
}

#[test]
fn a_patch_that_does_not_apply_is_usage_skip_or_skipped_by_what_it_is() {
    let e = || {
        anyhow::anyhow!(super::super::switch::DoesNotApply(
            "hunk 2 of mm/b.c".into()
        ))
    };
    // The patch under test on its base: the user's to fix (2).
    let err = does_not_apply(e(), &variant(1, 1, "regressed"), false, false).unwrap_err();
    assert_eq!(Class::of(&err), Class::Usage);
    assert!(
        err.to_string()
            .starts_with("--patch x.patch: it does not apply on `upstream`"),
        "{err}"
    );
    // Bisect's revision with its --patch (no variant of the file): cannot
    // be judged.
    let mut step = variant(0, 0, "");
    step.patches = variant(0, 1, "").patches;
    step.name = "bisect".into();
    let err = does_not_apply(e(), &step, false, false).unwrap_err();
    assert_eq!(Class::of(&err), Class::UnderTest);
    // A variant of the file on another source: skipped, saying why; on its
    // own source: the harness's (wbstall's patches).
    let listed = variant(2, 0, "");
    assert_eq!(
        does_not_apply(e(), &listed, true, true).unwrap(),
        "hunk 2 of mm/b.c"
    );
    let err = does_not_apply(e(), &listed, true, false).unwrap_err();
    assert_eq!(Class::of(&err), Class::Harness);
}
