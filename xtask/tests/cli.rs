//! `cargo xtask` as a process: the built binary, run as a developer runs it.

use std::process::{Command, Output};

fn xtask(args: &[&str]) -> Output {
    Command::new(env!("CARGO_BIN_EXE_xtask"))
        .args(args)
        .env("RUST_BACKTRACE", "1")
        .output()
        .expect("running the xtask binary")
}

#[test]
fn a_user_error_is_its_chain_and_exit_1_without_a_backtrace() {
    // A tree that is not there: refused after parsing, before anything runs
    // (no root, no kernel). RUST_BACKTRACE=1 is for bugs, not for this.
    let out = xtask(&[
        "bisect",
        "--kernel-src",
        "/no/such/tree",
        "--good",
        "a",
        "--bad",
        "b",
    ]);
    let err = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(1), "{err}");
    assert!(
        err.starts_with(
            "error: --kernel-src /no/such/tree: no such directory\n\nCaused by:\n    No such \
             file or directory"
        ),
        "{err}"
    );
    assert!(!err.to_lowercase().contains("backtrace"), "{err}");
}

#[test]
fn version_names_the_crate_and_the_harness_commit() {
    let out = xtask(&["--version"]);
    let text = String::from_utf8_lossy(&out.stdout);
    assert!(out.status.success(), "{out:?}");
    let want = concat!("cargo xtask ", env!("CARGO_PKG_VERSION"), " (wbstall ");
    assert!(text.starts_with(want), "{text}");
}
