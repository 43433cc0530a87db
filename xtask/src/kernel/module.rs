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

/// What the module's build reads from the kernel build dir `build`, hashed with
/// its own sources: the configuration, the release, the exported symbols and
/// the Rust crates it links against (`kernel`, its bindings: they change with any
/// header a patch touches). Equal keys build the same `.ko` (the four shipped
/// variants, which change `mm/page-writeback.c` alone, built one module:
/// `module_sha256` of every variant of a session). None when an input is
/// missing (a tree without Rust): then the module is always built.
pub fn inputs_sha256(build: &Path, source_sha256: &str) -> Result<Option<String>> {
    let mut inputs: Vec<PathBuf> = [
        ".config",
        "Module.symvers",
        "include/generated/utsrelease.h",
        "include/generated/rustc_cfg",
    ]
    .iter()
    .map(|f| build.join(f))
    .collect();
    let rust = build.join("rust");
    let Ok(dir) = std::fs::read_dir(&rust) else {
        return Ok(None);
    };
    let mut crates: Vec<PathBuf> = dir
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|x| x == "rmeta"))
        .collect();
    if crates.is_empty() {
        return Ok(None);
    }
    crates.sort();
    inputs.extend(crates);
    let mut all = format!("{source_sha256}\0").into_bytes();
    for f in &inputs {
        if !f.is_file() {
            return Ok(None);
        }
        let rel = f.strip_prefix(build).unwrap_or(f).display().to_string();
        all.extend_from_slice(format!("{rel}\0{}\0", util::sha256_file(f)?).as_bytes());
    }
    Ok(Some(util::sha256_hex(&all)))
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

/// [`build_external`], once per [`inputs_sha256`]: a build whose inputs equal
/// an earlier one's takes that `.ko` (kept below `target/wbstall/module/by-inputs/`)
/// instead of compiling it again. Says whether it did.
pub fn build_once(
    sh: &Shell,
    tc: &Toolchain,
    build: &Path,
    src: &Path,
    out: &Path,
    source_sha256: &str,
) -> Result<(PathBuf, bool)> {
    let Some(key) = inputs_sha256(build, source_sha256)? else {
        return Ok((build_external(sh, tc, build, src, out)?, false));
    };
    let kept = util::target_dir()
        .join("module/by-inputs")
        .join(&key)
        .join("wbstall.ko");
    if kept.is_file() {
        return Ok((kept, true));
    }
    let ko = build_external(sh, tc, build, src, out)?;
    let dir = kept.parent().expect("a file below a directory");
    std::fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    // Copied under a temporary name, then renamed: a `.ko` found there is whole.
    let partial = dir.join(format!(".wbstall.ko.{}", std::process::id()));
    std::fs::copy(&ko, &partial).with_context(|| format!("keeping {}", ko.display()))?;
    std::fs::rename(&partial, &kept).with_context(|| format!("keeping {}", kept.display()))?;
    Ok((ko, false))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn build_dir(at: &Path) {
        for (f, text) in [
            (".config", "CONFIG_RUST=y\n"),
            (
                "Module.symvers",
                "0x00000000\tbalance_dirty_pages_ratelimited\tvmlinux\tEXPORT_SYMBOL\t\n",
            ),
            (
                "include/generated/utsrelease.h",
                "#define UTS_RELEASE \"7.3.4\"\n",
            ),
            ("include/generated/rustc_cfg", "--cfg=CONFIG_RUST\n"),
            ("rust/libkernel.rmeta", "kernel 1"),
            ("rust/libbindings.rmeta", "bindings 1"),
        ] {
            let p = at.join(f);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        }
    }

    #[test]
    fn the_module_is_built_again_when_anything_it_reads_changes() {
        let dir = util::testdir::Dir::new("module-inputs");
        let tmp = dir.path();
        build_dir(tmp);
        let key = inputs_sha256(tmp, "src1")
            .unwrap()
            .expect("every input present");
        // The same inputs: the same key (another variant that changed a .c file).
        assert_eq!(inputs_sha256(tmp, "src1").unwrap(), Some(key.clone()));
        // The module's own sources.
        assert_ne!(inputs_sha256(tmp, "src2").unwrap(), Some(key.clone()));
        // A header a patch touched regenerates the bindings.
        std::fs::write(tmp.join("rust/libbindings.rmeta"), "bindings 2").unwrap();
        let bindings = inputs_sha256(tmp, "src1").unwrap();
        assert!(bindings.is_some() && bindings != Some(key.clone()));
        // An exported symbol more or less.
        std::fs::write(tmp.join("Module.symvers"), "").unwrap();
        assert_ne!(inputs_sha256(tmp, "src1").unwrap(), bindings);
        // An input missing: never taken, always built.
        std::fs::remove_file(tmp.join("include/generated/rustc_cfg")).unwrap();
        assert_eq!(inputs_sha256(tmp, "src1").unwrap(), None);
    }
}
