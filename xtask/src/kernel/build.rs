//! `cargo xtask build-kernel`: every selected variant built from one shared build
//! directory per (source, config), in the cached tree ([`seed::build_dir_in`]), with
//! the `wbstall` module, into
//! `target/wbstall/kernels/<variant>/` (`bzImage`, `config`, `wbstall.ko`,
//! `build.log`, `variant.json`); debug kernels (`--debug-kernel`) into
//! `target/wbstall/kernels-debug/<variant>/`, from a build directory of their own.

use std::{
    fs,
    path::{Path, PathBuf},
    time::Instant,
};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use xshell::{cmd, Shell};

use crate::{
    deps::{self, Toolchain},
    exit,
    kernel::build_failure::{self, Tested},
    kernel::cache,
    kernel::flavour::Flavour,
    kernel::kconfig,
    kernel::module,
    kernel::seed,
    kernel::source::{SourceArgs, SourceMeta},
    kernel::tracepoints,
    kernel::{
        patch,
        switch::{DoesNotApply, Worktree},
        variants::{self, Selection, Variant, Variants},
    },
    progress::{self, Event, Progress},
    stamp::{self, Stamp},
    util,
};

/// A patch as recorded in `variant.json`.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct PatchMeta {
    pub file: String,
    pub sha256: String,
}

/// `variant.json`: what exactly a kernel image is.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct VariantMeta {
    pub variant: String,
    pub description: String,
    pub base: SourceMeta,
    pub patches: Vec<PatchMeta>,
    /// `uname -r` of the image.
    pub kernel_release: String,
    pub config_sha256: String,
    pub fragment_sha256: String,
    pub toolchain: Toolchain,
    /// Wall time of this variant's make (kernel and module).
    pub build_seconds: f64,
    /// Objects compiled by this build (0 when nothing changed).
    pub objects_rebuilt: usize,
    /// Source files the switch to this variant rewrote.
    pub files_changed: Vec<String>,
    pub module_sha256: String,
    /// sha256 over the module's sources (`rust-module/`), to tell a stale
    /// `wbstall.ko` from a current one without building.
    pub module_source_sha256: String,
    pub bzimage_sha256: String,
    /// When it was built; none (`""`) for the running kernel, not built here.
    #[serde(deserialize_with = "built_at", serialize_with = "stamp::or_empty")]
    pub built_at: Option<Stamp>,
    /// Built with `Kconfig.debug` too (lockdep, KASAN, ...): never for measuring.
    #[serde(default, skip_serializing_if = "std::ops::Not::not")]
    pub debug_kernel: bool,
    /// The configuration's tag (`Flavour::tag`), empty for the default one.
    #[serde(default, skip_serializing_if = "String::is_empty")]
    pub kernel_tag: String,
}

stamp::time_field!(built_at: Option<Stamp>);

/// A built variant.
#[derive(Debug, Clone)]
pub struct Built {
    pub dir: PathBuf,
    pub meta: VariantMeta,
}

impl Built {
    pub fn bzimage(&self) -> PathBuf {
        self.dir.join("bzImage")
    }
    pub fn module(&self) -> PathBuf {
        self.dir.join("wbstall.ko")
    }
    /// The module, if this kernel has one (not with `--no-rust`).
    pub fn module_file(&self) -> Option<PathBuf> {
        (!self.meta.module_sha256.is_empty()).then(|| self.module())
    }
    /// The variant's name, marked with its configuration's tag: names its
    /// initramfs and module directory.
    pub fn label(&self) -> String {
        label(&self.meta.variant, &self.meta.kernel_tag)
    }
}

/// `<variant>` or `<variant>-<tag>`.
pub fn label(variant: &str, tag: &str) -> String {
    if tag.is_empty() {
        variant.to_string()
    } else {
        format!("{variant}-{tag}")
    }
}

/// Builds the selected variants, in order, and returns them.
pub fn build(
    sh: &Shell,
    tc: &Toolchain,
    selection: &Selection,
    source: &SourceArgs,
    jobs: Option<usize>,
    flavour: &Flavour,
) -> Result<Vec<Built>> {
    let flavour = &flavour.with_source(source)?;
    let root = util::project_root();
    // Resolve names and read every patch before downloading anything.
    let variants = Variants::load(&root.join(variants::VARIANTS_FILE))?;
    let selected = selection.resolve(&variants)?;
    let cache = util::cache_dir()?;
    fs::create_dir_all(&cache)
        .with_context(|| format!("creating the cache {}", cache.display()))?;
    let src = source.prepare(sh, &cache)?;

    // One build at a time per cached tree (and so per kernels directory).
    let _lock = util::lock_dir_waiting(&src.root, "build-kernel", |busy| {
        progress::emit(Event::Note(&format!(
            "waiting for another build of {}: {busy}",
            src.id
        )));
    })?;
    // A developer's tree: copy in what changed since the last build.
    let src = src.sync(sh)?;
    deps::check_tree_minimums(sh, &src.tree(), tc)?;

    let (fragments, base_config) = read_flavour(flavour)?;
    // The files any variant patches: each kernel keeps its own copy of them, so
    // that what was built can be read (and diffed) next to the image.
    let mut patched = std::collections::BTreeSet::new();
    for v in variants
        .names()
        .into_iter()
        .map(|n| variants.variant(n))
        .chain(selected.iter().cloned().map(Ok))
    {
        for p in &v?.patches {
            patched.extend(patch::touched_paths(&p.diff)?);
        }
    }
    // Two builds of other trees into one kernels directory: one at a time too.
    let kernels = flavour.kernels_dir()?;
    let _kernels_lock = util::lock_dir_waiting(&kernels, "build-kernel", |busy| {
        progress::emit(Event::Note(&format!("waiting to write kernels: {busy}")));
    })?;
    let builder = Builder {
        sh,
        tc,
        src: &src,
        worktree: Worktree::new(&src.root),
        fragments,
        base_config,
        tag: flavour.tag()?,
        kernels,
        debug: flavour.debug_kernel,
        no_rust: flavour.no_rust,
        jobs: jobs.unwrap_or_else(|| std::thread::available_parallelism().map_or(2, |n| n.get())),
        patched,
    };
    build_each(&builder, &selected, flavour, &variants)
}

/// Builds each variant; on a tree the patches were not written for, a
/// variant that does not apply is left out, said, and the others go on.
fn build_each(
    builder: &Builder<'_>,
    selected: &[Variant],
    flavour: &Flavour,
    variants: &Variants,
) -> Result<Vec<Built>> {
    let src = builder.src;
    let mut built = Vec::new();
    for v in selected {
        match builder.one(v) {
            Ok(b) => built.push(b),
            Err(e) if e.is::<DoesNotApply>() => {
                let listed = variants.names().contains(&v.name.as_str());
                let other_source = !flavour.source_tag.is_empty();
                let why = build_failure::does_not_apply(e, v, listed, other_source)?;
                progress::emit(Event::Note(&format!(
                    "variant `{}` skipped: its patches do not apply to {} ({why})",
                    v.name, src.meta.kernel_version,
                )));
            }
            Err(e) => return Err(e),
        }
    }
    if built.is_empty() {
        bail!(exit::usage(format!(
            "no selected variant could be built from Linux {}: select one whose patches \
             apply (e.g. `--variant {}`, which has none)",
            src.meta.kernel_version,
            variants
                .names()
                .into_iter()
                .find(|n| variants.variant(n).is_ok_and(|v| v.patches.is_empty()))
                .unwrap_or("upstream")
        )));
    }
    Ok(built)
}

/// The fragments (name, path, text), checked, and the base config (path,
/// text) of `flavour`.
type Fragments = Vec<(String, PathBuf, String)>;
fn read_flavour(flavour: &Flavour) -> Result<(Fragments, Option<(PathBuf, String)>)> {
    let mut fragments = Vec::new();
    for (name, path) in flavour.fragments() {
        let text =
            fs::read_to_string(&path).with_context(|| format!("reading {}", path.display()))?;
        fragments.push((name, path, text));
    }
    kconfig::check_additions(&fragments)?;
    let base_config = match &flavour.base_config {
        Some(p) => Some((
            p.clone(),
            fs::read_to_string(p)
                .with_context(|| format!("reading the base config {} (--config)", p.display()))?,
        )),
        None => None,
    };
    Ok((fragments, base_config))
}

/// Patches that change Kconfig files change the configuration, and so get a
/// build directory of their own.
fn kconfig_touch(variant: &Variant) -> Result<Vec<(String, String)>> {
    let mut out = Vec::new();
    for p in &variant.patches {
        for path in patch::touched_paths(&p.diff)? {
            let name = Path::new(&path)
                .file_name()
                .map(|n| n.to_string_lossy().into_owned());
            if name.is_some_and(|n| n.starts_with("Kconfig")) {
                out.push((path, p.sha256.clone()));
            }
        }
    }
    Ok(out)
}

/// What every variant of one `build` shares.
struct Builder<'a> {
    sh: &'a Shell,
    tc: &'a Toolchain,
    src: &'a crate::kernel::source::Source,
    worktree: Worktree,
    /// (name, path, text) of each fragment, in merge order.
    fragments: Vec<(String, PathBuf, String)>,
    /// `--config`: the base .config (path, text) instead of tinyconfig.
    base_config: Option<(PathBuf, String)>,
    /// The configuration's tag, and where its kernels land.
    tag: String,
    kernels: PathBuf,
    debug: bool,
    no_rust: bool,
    jobs: usize,
    /// Tree-relative files some variant patches.
    patched: std::collections::BTreeSet<String>,
}

impl Builder<'_> {
    fn one(&self, variant: &Variant) -> Result<Built> {
        let (sh, tc, src) = (self.sh, self.tc, self.src);
        let tree = src.tree();
        let (key, build_dir) = self.build_dir(variant)?;
        let log = util::fresh_log(&format!("build-{}", self.label(variant)))?;

        let mut progress = Progress::new(&format!("build-kernel {}", variant.name));
        let started = Instant::now();
        progress.stage("applying patches");
        let switch = self.worktree.switch(sh, variant)?;
        progress.stage("configuring");
        let paths: Vec<PathBuf> = self.fragments.iter().map(|(_, p, _)| p.clone()).collect();
        let base = self.base_config.as_ref().map(|(p, _)| p.as_path());
        kconfig::configure(sh, &tree, &build_dir, base, &paths, tc, &key, &log)?;

        progress.stage("compiling");
        let objects = self.compile_checked(variant, &build_dir, &log, &mut progress)?;

        let (ko, module_source_sha256) = self.module(variant, &build_dir, &mut progress)?;
        let seconds = started.elapsed().as_secs_f64();

        // Assemble the artifacts next to the old ones, then swap: a failure above
        // leaves the previous kernel of this variant in place.
        let kernels = &self.kernels;
        let dir = kernels.join(&variant.name);
        let partial = kernels.join(format!(".{}.{}.partial", variant.name, std::process::id()));
        if partial.exists() {
            fs::remove_dir_all(&partial)
                .with_context(|| format!("removing {}", partial.display()))?;
        }
        fs::create_dir_all(&partial).with_context(|| format!("creating {}", partial.display()))?;
        let bzimage = build_dir.join("arch/x86/boot/bzImage");
        self.assemble(&partial, &build_dir, ko.as_deref(), &log)?;
        let release = fs::read_to_string(build_dir.join("include/config/kernel.release"))
            .context("reading include/config/kernel.release")?;
        let meta = VariantMeta {
            variant: variant.name.clone(),
            description: variant.description.clone(),
            base: src.meta.clone(),
            patches: variant
                .patches
                .iter()
                .map(|p| PatchMeta {
                    file: p.label.clone(),
                    sha256: p.sha256.clone(),
                })
                .collect(),
            kernel_release: release.trim().to_string(),
            config_sha256: util::sha256_file(&build_dir.join(".config"))?,
            fragment_sha256: self.fragment_sha256(),
            toolchain: tc.clone(),
            build_seconds: (seconds * 10.0).round() / 10.0,
            objects_rebuilt: objects,
            files_changed: switch.changed.clone(),
            module_sha256: match &ko {
                Some(ko) => util::sha256_file(ko)?,
                None => String::new(),
            },
            module_source_sha256,
            bzimage_sha256: util::sha256_file(&bzimage)?,
            built_at: Some(Stamp::now()),
            debug_kernel: self.debug,
            kernel_tag: self.tag.clone(),
        };
        publish(&partial, &dir, &meta)?;
        progress.finish(&format!(
            "{} built ({} file(s) switched, {objects} objects compiled)",
            variant.name,
            switch.changed.len()
        ));
        Ok(Built { dir, meta })
    }

    /// The wbstall module for `variant` and the sha256 of its sources (none
    /// without Rust).
    fn module(
        &self,
        variant: &Variant,
        build_dir: &Path,
        progress: &mut Progress,
    ) -> Result<(Option<PathBuf>, String)> {
        if self.no_rust {
            return Ok((None, String::new()));
        }
        progress.stage("building the wbstall module");
        let module_out = util::target_dir().join("module").join(self.label(variant));
        let module_src = util::project_root().join(module::MODULE_DIR);
        // Hashed before the build: an edit during the build marks the module stale.
        let module_source_sha256 = module::source_sha256(&module_src)?;
        tracepoints::check(&self.src.tree(), &module_src)?;
        let (ko, taken) = module::build_once(
            self.sh,
            self.tc,
            build_dir,
            &module_src,
            &module_out,
            &module_source_sha256,
        )?;
        if taken {
            progress.stage("the wbstall module: built before from the same inputs, taken");
        }
        Ok((Some(ko), module_source_sha256))
    }

    /// The configuration key of `variant`, and its build directory (created).
    /// [`Self::compile`], the space it needs checked first and the disk filling
    /// up named; a bzImage in the build directory that is not what its stamp
    /// says (damaged since) is removed first, so that make links it again.
    fn compile_checked(
        &self,
        variant: &Variant,
        build_dir: &Path,
        log: &Path,
        progress: &mut Progress,
    ) -> Result<usize> {
        let bzimage = build_dir.join("arch/x86/boot/bzImage");
        if bzimage.exists() {
            if let cache::Stamped::Damaged { now, stamped } = cache::check(&bzimage)? {
                progress::emit(Event::Note(&format!(
                    "{} is damaged (sha256 {now}, {stamped} when built): building it again",
                    bzimage.display()
                )));
                cache::forget(&bzimage)?;
            }
        }
        let doing = format!("building {}", variant.name);
        // A build directory with a vmlinux builds incrementally.
        let need = match build_dir.join("vmlinux").exists() {
            true => cache::INCREMENTAL_BYTES,
            false => cache::BUILD_BYTES,
        };
        cache::ensure_space(build_dir, need, &doing)?;
        let local = self.src.meta.kind == "local";
        let tested = build_failure::tested(variant, local, build_dir)?;
        let built = self.compile(variant, build_dir, log, progress, &tested);
        let objects = cache::map_out_of_space(built, build_dir, need, &doing)?;
        cache::stamp(&bzimage)?;
        build_failure::mark_built(build_dir, &build_failure::shas(&variant.patches))?;
        Ok(objects)
    }

    fn build_dir(&self, variant: &Variant) -> Result<(String, PathBuf)> {
        let named: Vec<(String, String)> = self
            .fragments
            .iter()
            .map(|(n, _, t)| (n.clone(), t.clone()))
            .collect();
        let base = self.base_config.as_ref().map(|(_, t)| t.as_str());
        let key = kconfig::config_key(base, &named, self.tc, &kconfig_touch(variant)?)?;
        let build_dir = seed::build_dir_in(&self.src.tree(), &key);
        fs::create_dir_all(&build_dir)
            .with_context(|| format!("creating {}", build_dir.display()))?;
        Ok((key, build_dir))
    }

    /// The variant's name, marked with the configuration's tag.
    fn label(&self, variant: &Variant) -> String {
        label(&variant.name, &self.tag)
    }

    /// sha256 over the base config (if any) and the fragments' texts, in order.
    fn fragment_sha256(&self) -> String {
        let mut all: String = self.base_config.iter().map(|(_, t)| t.as_str()).collect();
        all.extend(self.fragments.iter().map(|(_, _, t)| t.as_str()));
        util::sha256_hex(all.as_bytes())
    }

    /// `make` of the kernel, with progress; returns the objects compiled.
    fn compile(
        &self,
        variant: &Variant,
        build_dir: &Path,
        log: &Path,
        progress: &mut Progress,
        tested: &Tested,
    ) -> Result<usize> {
        let (sh, tc, tree, jobs) = (self.sh, self.tc, self.src.tree(), self.jobs);
        let start = fs::metadata(log).map_or(0, |m| m.len());
        let cc = tc.make_args();
        let jobs_arg = format!("-j{jobs}");
        let mut objects = 0usize;
        let mut linked = false;
        util::run_logged(
            cmd!(sh, "make -C {tree} O={build_dir} {cc...} {jobs_arg}"),
            log,
            &format!("building the {} kernel", variant.name),
            |line| {
                if let Some((tool, target)) = progress::kbuild_step(line) {
                    if progress::is_compile(tool) {
                        objects += 1;
                    }
                    match (tool, target) {
                        ("LD", "vmlinux") => {
                            linked = true;
                            progress.stage("linking vmlinux");
                        }
                        (_, t) if linked && t.starts_with("arch/x86/boot") => {
                            progress.stage("making bzImage")
                        }
                        _ => {}
                    }
                    progress.detail(&format!("[{objects} objects] {tool} {target}"));
                }
            },
        )
        .map_err(|e| build_failure::classify(e, &util::read_from(log, start), &tree, tested))?;
        Ok(objects)
    }

    /// Copies what a kernel is made of into `partial`: the image, its config,
    /// the module, the build log and the patched sources as built.
    fn assemble(
        &self,
        partial: &Path,
        build_dir: &Path,
        ko: Option<&Path>,
        log: &Path,
    ) -> Result<()> {
        let (sh, tree) = (self.sh, self.src.tree());
        let bzimage = build_dir.join("arch/x86/boot/bzImage");
        sh.copy_file(&bzimage, partial.join("bzImage"))
            .context("copying bzImage")?;
        sh.copy_file(build_dir.join(".config"), partial.join("config"))
            .context("copying .config")?;
        if let Some(ko) = ko {
            sh.copy_file(ko, partial.join("wbstall.ko"))
                .context("copying wbstall.ko")?;
        }
        sh.copy_file(log, partial.join("build.log"))
            .context("copying the build log")?;
        for rel in &self.patched {
            let from = tree.join(rel);
            if from.is_file() {
                let to = partial.join("src").join(rel);
                fs::create_dir_all(to.parent().unwrap_or(partial))
                    .with_context(|| format!("creating {}", to.display()))?;
                sh.copy_file(&from, &to)
                    .with_context(|| format!("copying {rel}"))?;
            }
        }
        Ok(())
    }
}

/// Writes `variant.json` into the assembled `partial` kernel and swaps it in
/// for `dir`.
fn publish(partial: &Path, dir: &Path, meta: &VariantMeta) -> Result<()> {
    util::write_atomic(
        &partial.join("variant.json"),
        serde_json::to_string_pretty(meta)?,
    )?;
    if dir.exists() {
        fs::remove_dir_all(dir).with_context(|| format!("replacing {}", dir.display()))?;
    }
    fs::rename(partial, dir).with_context(|| format!("moving the kernel into {}", dir.display()))
}

/// Reads a built variant back (for qemu-test and reports), its kernel image
/// checked against the sha256 its `variant.json` recorded.
pub fn load_built(name: &str, flavour: &Flavour) -> Result<Built> {
    let dir = flavour.kernels_dir()?.join(name);
    let path = dir.join("variant.json");
    let flag = flavour.flags();
    let text = fs::read_to_string(&path).with_context(|| {
        format!("no kernel built for `{name}` ({} missing): run `cargo xtask build-kernel --variant {name}{flag}`", path.display())
    })?;
    let meta =
        serde_json::from_str(&text).with_context(|| format!("parsing {}", path.display()))?;
    let built = Built { dir, meta };
    check_image(
        &built,
        &format!("cargo xtask build-kernel --variant {name}{flag}"),
    )?;
    Ok(built)
}

/// The kernel image is the one its `variant.json` recorded, by sha256;
/// refused with `rebuild` (the command that builds it again) otherwise.
pub fn check_image(built: &Built, rebuild: &str) -> Result<()> {
    let path = built.bzimage();
    let now = util::sha256_file(&path)
        .with_context(|| format!("hashing {}: rebuild it with `{rebuild}`", path.display()))?;
    if now != built.meta.bzimage_sha256 {
        bail!(
            "{} is truncated or damaged (sha256 {now}, {} when built): rebuild it with `{rebuild}`",
            path.display(),
            built.meta.bzimage_sha256
        );
    }
    Ok(())
}

/// The table `build-kernel` prints.
pub fn summary(built: &[Built]) -> String {
    let w = built
        .iter()
        .map(|b| b.meta.variant.len())
        .max()
        .unwrap_or(0)
        .max(12);
    let mut out = format!(
        "{:<w$} {:>8} {:>9} {:>9}  {}\n",
        "variant", "seconds", "objects", "switched", "kernel"
    );
    for b in built {
        let m = &b.meta;
        out.push_str(&format!(
            "{:<w$} {:>8.1} {:>9} {:>9}  {}\n",
            m.variant,
            m.build_seconds,
            m.objects_rebuilt,
            m.files_changed.len(),
            b.bzimage().display()
        ));
    }
    out
}

#[cfg(test)]
#[path = "build_tests.rs"]
mod tests;
