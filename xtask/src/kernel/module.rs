//! Out-of-tree code compiled against a kernel build directory: the `wbstall`
//! Rust module in `rust-module/`. One call per build dir and output dir.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use xshell::{cmd, Shell};

use crate::{deps::Toolchain, util};

/// The module's source directory, relative to the repository root.
pub const MODULE_DIR: &str = "rust-module";

/// sha256 over every file below `dir` (path and content, in path order).
pub fn source_sha256(dir: &Path) -> Result<String> {
    fn walk(dir: &Path, root: &Path, out: &mut Vec<(String, Vec<u8>)>) -> Result<()> {
        for e in std::fs::read_dir(dir).with_context(|| format!("listing {}", dir.display()))? {
            let path = e?.path();
            if path.is_dir() {
                walk(&path, root, out)?;
            } else {
                let rel = path
                    .strip_prefix(root)
                    .unwrap_or(&path)
                    .display()
                    .to_string();
                let bytes =
                    std::fs::read(&path).with_context(|| format!("reading {}", path.display()))?;
                out.push((rel, bytes));
            }
        }
        Ok(())
    }
    let mut files = Vec::new();
    walk(dir, dir, &mut files)?;
    files.sort();
    let mut all = Vec::new();
    for (rel, bytes) in files {
        all.extend_from_slice(format!("{rel}\0{}\0", bytes.len()).as_bytes());
        all.extend_from_slice(&bytes);
    }
    Ok(util::sha256_hex(&all))
}

/// Builds the external module in `src` against the kernel build dir `build`,
/// with objects in `out` (kbuild's `MO=`, so the source tree stays clean), and
/// returns the `.ko`. Clippy runs as part of the build (`CLIPPY=1`), and any
/// warning of the compiler or clippy fails it: the module must build clean.
pub fn build_external(
    sh: &Shell,
    tc: &Toolchain,
    build: &Path,
    src: &Path,
    out: &Path,
) -> Result<PathBuf> {
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    let log = out.join("build.log");
    std::fs::write(&log, "").with_context(|| format!("creating {}", log.display()))?;
    let llvm = format!("LLVM={}", tc.llvm_make_arg);
    util::run_logged(
        cmd!(
            sh,
            "make -C {build} M={src} MO={out} {llvm} CLIPPY=1 modules"
        ),
        &log,
        "building the wbstall module",
        |_| {},
    )?;
    let text = std::fs::read_to_string(&log).unwrap_or_default();
    let warnings: Vec<&str> = text.lines().filter(|l| l.contains("warning:")).collect();
    if !warnings.is_empty() {
        bail!(
            "the wbstall module built with {} warning(s); it must build clean:\n{}\nFull log: {}",
            warnings.len(),
            warnings.join("\n"),
            log.display()
        );
    }
    let ko = out.join("wbstall.ko");
    if !ko.is_file() {
        bail!(
            "the module build finished without {}; see {}",
            ko.display(),
            log.display()
        );
    }
    Ok(ko)
}
