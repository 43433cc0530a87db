//! The selected kernels of a booting session: built (incrementally), or
//! with `--no-build` those already on disk, their module checked against
//! the module's sources now.

use anyhow::{bail, Result};
use xshell::Shell;

use crate::{
    deps, exit,
    kernel::{
        build::{self as kernel, Built},
        flavour::Flavour,
        module,
        source::SourceArgs,
        variants::{self, Selection},
    },
    util,
};

/// The selected kernels: built (incrementally, `make -j jobs`), or with
/// `no_build` as they are.
pub fn kernels(
    sh: &Shell,
    tc: &deps::Toolchain,
    selection: &Selection,
    source: &SourceArgs,
    (no_build, jobs): (bool, Option<usize>),
    flavour: &Flavour,
) -> Result<Vec<Built>> {
    if no_build {
        load_selected(selection, &flavour.with_source(source)?)
    } else {
        kernel::build(sh, tc, selection, source, jobs, flavour)
    }
}

fn load_selected(selection: &Selection, flavour: &Flavour) -> Result<Vec<Built>> {
    let root = util::project_root();
    let variants = variants::Variants::load(&root.join(variants::VARIANTS_FILE))?;
    let mut names: Vec<String> = selection.variants.clone();
    if selection.all || (names.is_empty() && selection.patches.is_empty()) {
        names = variants
            .default_names()
            .iter()
            .map(|s| s.to_string())
            .collect();
    }
    if !selection.patches.is_empty() {
        // A patch's kernel built before (`build-kernel --patch FILE`): the
        // variants as a build would make them, the patch's among them.
        names = (selection.resolve(&variants)?.into_iter())
            .map(|v| v.name)
            .collect();
    }
    let sources = module::source_sha256(&root.join(module::MODULE_DIR))?;
    names
        .iter()
        .map(|n| {
            let b = kernel::load_built(n, flavour)?;
            if b.module_file().is_some() && b.meta.module_source_sha256 != sources {
                bail!(exit::usage(format!(
                    "--no-build: the `{n}` kernel's wbstall.ko was built from other module \
                     sources than rust-module/ holds now (sha256 {} recorded, {sources} now): \
                     drop --no-build, or run `cargo xtask build-kernel --variant {n}`",
                    if b.meta.module_source_sha256.is_empty() {
                        "none"
                    } else {
                        &b.meta.module_source_sha256
                    }
                )));
            }
            Ok(b)
        })
        .collect()
}
