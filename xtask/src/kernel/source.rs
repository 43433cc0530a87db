//! The kernel source: Debian's `linux-source-7.3` (default), downloaded with a
//! private apt configuration and extracted once into the cache, or a developer's
//! own tree (`--kernel-src`), copied into the cache so that it is never modified.
//!
//! Cache layout, per source id:
//! - `src/<id>/tree/`       the tree the variants are applied to and built from,
//!   with its build directories (`tree/.wbstall-build-<key>/`, one per configuration);
//! - `src/<id>/orig/`       pristine copies of the files variants touch ([`crate::kernel::patch`]);
//! - `src/<id>/source.json` provenance ([`SourceMeta`]).

use std::{
    fs,
    path::{Path, PathBuf},
};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use xshell::{cmd, Shell};

use crate::{
    exit,
    kernel::{
        apt::{self, PrivateApt},
        cache, mirror, seed,
    },
    progress::{self, Event},
    util,
};

/// The Linux release the patches in `patches/` are written against.
pub const BASE_SERIES: &str = "7.3";

/// Suites that carry `linux-source-7.3` (sid moves on; backports keeps it).
const SUITES: &[&str] = &["sid", "trixie-backports"];

/// Suites searched for another series (`--debian-source`): apt picks the
/// newest `linux-source-X.Y` among them.
const ALL_SUITES: &[&str] = &[
    "bookworm",
    "bookworm-backports",
    "trixie",
    "trixie-backports",
    "sid",
];

/// Where the kernel source comes from.
#[derive(Debug, Clone, Default, clap::Args)]
#[command(next_help_heading = crate::cli::heading::KERNELS)]
pub struct SourceArgs {
    /// Build from your own kernel tree instead of Debian's linux-source-7.3. The
    /// tree is never modified: its tracked and untracked (not ignored) files are
    /// copied into the wbstall cache.
    #[arg(long, value_name = "DIR")]
    pub kernel_src: Option<PathBuf>,
    /// Ask apt again for the newest linux-source-7.3 even if one is cached.
    #[arg(long)]
    pub refresh_source: bool,
    /// Another Debian-packaged kernel series instead of 7.3: `linux-source-X.Y`
    /// from bookworm, trixie, sid or their backports (e.g. 6.1, 6.12, 7.2).
    /// Variants whose patches do not apply to it are skipped, said per variant.
    #[arg(long, value_name = "X.Y", conflicts_with = "kernel_src", value_parser = series)]
    pub debian_source: Option<String>,
    /// The Debian mirror apt fetches linux-source-X.Y from: the URL of `deb URL
    /// sid main`, checked with Debian's keyring (apt-get install
    /// debian-archive-keyring). Default: $WBSTALL_DEBIAN_MIRROR, else the Debian
    /// mirror of this host's /etc/apt sources. For hosts without one (Ubuntu,
    /// GitHub's runners).
    #[arg(long, value_name = "URL", conflicts_with = "kernel_src")]
    pub debian_mirror: Option<String>,
    /// Another checkout of the tree `kernel_src` is built as (bisect's
    /// worktree of it): `kernel_src` is then built in this tree's mirror and
    /// build directory, synced from `kernel_src`, so that a bisect starts
    /// from the build of `--kernel-src TREE`. Not a flag.
    #[arg(skip)]
    pub mirror_of: Option<PathBuf>,
}

/// `X.Y`, as Debian names its `linux-source-X.Y` packages.
fn series(s: &str) -> std::result::Result<String, String> {
    match s.split_once('.') {
        Some((a, b))
            if !a.is_empty()
                && !b.is_empty()
                && a.chars().chain(b.chars()).all(|c| c.is_ascii_digit()) =>
        {
            Ok(s.to_string())
        }
        _ => Err(format!(
            "`{s}` is not a kernel series: give MAJOR.MINOR as in linux-source-6.12, e.g. 6.12"
        )),
    }
}

/// Where a tree came from; recorded in every artifact's metadata.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct SourceMeta {
    /// `debian` or `local`.
    pub kind: String,
    /// The kernel version from the tree's Makefile, e.g. `7.3.4`.
    pub kernel_version: String,
    /// The Debian package and its exact version (Debian sources only).
    pub package: Option<String>,
    pub package_version: Option<String>,
    /// sha256 of the upstream tarball (Debian) or of the tree's content (local).
    pub sha256: String,
    /// The directory a local tree was copied from.
    pub origin: Option<String>,
    /// The cached tree whose builds a local tree's mirror started from
    /// ([`seed`]), if any.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub seeded_from: Option<String>,
    /// A git tree's state when it was last synced (what KCIDB names a
    /// checkout by); none for Debian's source and a plain directory.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub git: Option<mirror::GitState>,
}

/// A kernel tree in the cache, ready to be patched and built.
#[derive(Debug, Clone)]
pub struct Source {
    pub id: String,
    pub root: PathBuf,
    pub meta: SourceMeta,
}

impl Source {
    pub fn tree(&self) -> PathBuf {
        self.root.join("tree")
    }
}

impl SourceArgs {
    /// Names the source among others: empty for Debian's linux-source-7.3,
    /// the mirror's id for a developer's tree.
    pub fn tag(&self) -> Result<String> {
        match (&self.kernel_src, self.series()) {
            (Some(dir), _) => local_id(self.mirror_of.as_deref().unwrap_or(dir)),
            (None, BASE_SERIES) => Ok(String::new()),
            (None, other) => Ok(format!("debian-{other}")),
        }
    }

    /// The Debian series: `--debian-source`, else 7.3.
    pub fn series(&self) -> &str {
        self.debian_source.as_deref().unwrap_or(BASE_SERIES)
    }

    /// Finds or prepares the source tree in the cache. One process at a time
    /// looks and prepares (a cache-wide lock): a second one waits and then finds
    /// the tree the first published.
    pub fn prepare(&self, sh: &Shell, cache: &Path) -> Result<Source> {
        let src = cache.join("src");
        fs::create_dir_all(&src).with_context(|| format!("creating {}", src.display()))?;
        let lock_path = src.join(".prepare.lock");
        let lock = fs::File::create(&lock_path)
            .with_context(|| format!("creating {}", lock_path.display()))?;
        if lock.try_lock().is_err() {
            progress::emit(Event::Note(&format!(
                "waiting for another process preparing a source in {}",
                src.display()
            )));
            lock.lock()
                .with_context(|| format!("locking {}", lock_path.display()))?;
        }
        match &self.kernel_src {
            Some(dir) => local_tree(sh, cache, dir, self.mirror_of.as_deref()),
            None => debian_tree(sh, cache, self),
        }
    }
}

/// Reads `VERSION.PATCHLEVEL.SUBLEVEL` from a tree's top Makefile and checks that
/// it is a 7.x tree whose `balance_dirty_pages()` looks like the one the patches
/// are about.
pub fn validate_tree(tree: &Path) -> Result<String> {
    check_tree(tree, true)
}

/// [`validate_tree`] for any series (another Debian package): only
/// `balance_dirty_pages()` must be there.
fn validate_any_series(tree: &Path) -> Result<String> {
    check_tree(tree, false)
}

fn check_tree(tree: &Path, series_7: bool) -> Result<String> {
    let makefile = tree.join("Makefile");
    let text = fs::read_to_string(&makefile).with_context(|| {
        exit::usage(format!(
            "{} is not a kernel tree (no readable Makefile); --kernel-src wants the top of a Linux 7.x checkout",
            tree.display()
        ))
    })?;
    let field = |name: &str| {
        text.lines()
            .find_map(|l| l.strip_prefix(name)?.trim_start().strip_prefix('='))
            .map(|v| v.trim().to_string())
    };
    let (Some(v), Some(p), Some(s)) = (field("VERSION"), field("PATCHLEVEL"), field("SUBLEVEL"))
    else {
        bail!(exit::usage(format!(
            "{} has no VERSION/PATCHLEVEL/SUBLEVEL: not a kernel tree",
            makefile.display()
        )));
    };
    let version = format!("{v}.{p}.{s}");
    if series_7 && v != "7" {
        bail!(exit::usage(format!(
            "{} is Linux {version}; wbstall's patches need a 7.x tree (Linux {BASE_SERIES} by default)",
            tree.display()
        )));
    }
    let pw = tree.join("mm/page-writeback.c");
    let code = fs::read_to_string(&pw).with_context(|| format!("reading {}", pw.display()))?;
    let expected = [
        "static int balance_dirty_pages(",
        "wb_start_background_writeback(wb)",
    ];
    if let Some(missing) = expected.iter().find(|e| !code.contains(*e)) {
        bail!(exit::usage(format!(
            "{} has no `{missing}`: this is not the balance_dirty_pages() the variants patch",
            pw.display()
        )));
    }
    Ok(version)
}

/// An empty `src/.<id>.<pid>.partial/` of this process, where a tree is
/// prepared before [`publish`]. Called under the preparation lock, so the
/// partial trees of earlier, interrupted processes can go.
fn fresh_staging(cache: &Path, id: &str) -> Result<PathBuf> {
    let src = cache.join("src");
    fs::create_dir_all(&src).with_context(|| format!("creating {}", src.display()))?;
    for e in fs::read_dir(&src)
        .with_context(|| format!("reading {}", src.display()))?
        .flatten()
    {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with(&format!(".{id}.")) && name.ends_with(".partial") {
            fs::remove_dir_all(e.path())
                .with_context(|| format!("removing {}", e.path().display()))?;
        }
    }
    let staging = src.join(format!(".{id}.{}.partial", std::process::id()));
    fs::create_dir_all(&staging).with_context(|| format!("creating {}", staging.display()))?;
    Ok(staging)
}

/// Writes `source.json` and moves the prepared tree into place with renames
/// only, so that a tree in the cache is always complete: a leftover without
/// `source.json` (an interrupted preparation) is renamed aside first, and
/// deleted only once the new tree is in place.
fn publish(staging: &Path, root: PathBuf, id: String, meta: SourceMeta) -> Result<Source> {
    util::write_atomic(
        &staging.join("source.json"),
        serde_json::to_string_pretty(&meta)?,
    )?;
    let aside = root.with_file_name(format!(".{id}.{}.stale.partial", std::process::id()));
    let stale = root.exists();
    if stale {
        fs::rename(&root, &aside)
            .with_context(|| format!("moving the stale {} aside", root.display()))?;
    }
    fs::rename(staging, &root).with_context(|| format!("moving the tree to {}", root.display()))?;
    if stale {
        fs::remove_dir_all(&aside).with_context(|| format!("removing {}", aside.display()))?;
    }
    Ok(Source { id, root, meta })
}

fn read_meta(root: &Path) -> Option<SourceMeta> {
    let text = fs::read_to_string(root.join("source.json")).ok()?;
    serde_json::from_str(&text).ok()
}

/// The newest cached `linux-source-7.3_*.deb`, if any.
fn cached_deb(debs: &Path, package: &str) -> Option<PathBuf> {
    let mut found: Vec<PathBuf> = fs::read_dir(debs)
        .ok()?
        .flatten()
        .map(|e| e.path())
        .filter(|p| {
            p.file_name()
                .and_then(|n| n.to_str())
                .is_some_and(|n| n.starts_with(&format!("{package}_")) && n.ends_with(".deb"))
        })
        .collect();
    found.sort_by_key(|p| fs::metadata(p).and_then(|m| m.modified()).ok());
    found.pop()
}

fn debian_tree(sh: &Shell, cache: &Path, args: &SourceArgs) -> Result<Source> {
    let series = args.series();
    let package = format!("linux-source-{series}");
    let suites = if series == BASE_SERIES {
        SUITES
    } else {
        ALL_SUITES
    };
    if crate::deps::which("apt-get").is_none() {
        bail!(
            "the default kernel source is Debian's {package} package, fetched with apt, and this \
             host has no apt-get: build from your own tree with --kernel-src DIR (and --no-rust \
             where the tree's Rust does not build with this rustc)"
        );
    }
    let deb = debian_deb(sh, cache, args, &package, suites)?;
    let package_version = cmd!(sh, "dpkg-deb -f {deb} Version")
        .quiet()
        .read()
        .with_context(|| format!("reading the version of {}", deb.display()))?;
    let id = util::sanitize(&format!("debian-{package_version}"));
    let root = cache.join("src").join(&id);
    if let (Some(meta), true) = (read_meta(&root), root.join("tree").is_dir()) {
        match validate_any_series(&root.join("tree")) {
            Ok(_) => return Ok(Source { id, root, meta }),
            Err(e) => progress::emit(Event::Note(&format!(
                "the cached tree {} is damaged ({e:#}): extracting it again",
                root.display()
            ))),
        }
    }
    let deb = (deb, package, package_version);
    extract(sh, cache, &deb, id, root)
}

/// The cached `linux-source` package, checked against the sha256 stamped when
/// it was fetched (a damaged one is fetched again, said), or fetched now.
fn debian_deb(
    sh: &Shell,
    cache: &Path,
    args: &SourceArgs,
    package: &str,
    suites: &[&str],
) -> Result<PathBuf> {
    let dir = cache.join("apt");
    let debs = dir.join("debs");
    let mut deb = if args.refresh_source {
        None
    } else {
        cached_deb(&debs, package)
    };
    if let Some(d) = &deb {
        if let cache::Stamped::Damaged { now, stamped } = cache::check(d)? {
            progress::emit(Event::Note(&format!(
                "the cached {} is truncated or damaged (sha256 {now}, {stamped} when fetched): \
                 fetching it again",
                d.display()
            )));
            cache::forget(d)?;
            deb = None;
        }
    }
    if let Some(deb) = deb {
        return Ok(deb);
    }
    // The mirror is needed only now: a cached package builds without one.
    let archive = apt::debian_archive_here(args.debian_mirror.as_deref())?;
    let apt = PrivateApt::new(dir, archive);
    apt.download(sh, package, suites).with_context(|| {
        format!(
            "is {package} in Debian's {}? (`apt-cache policy {package}` on a machine with \
             those suites)",
            suites.join(", ")
        )
    })?;
    let deb = cached_deb(&debs, package).with_context(|| {
        format!(
            "apt-get download left no {package}_*.deb in {}",
            debs.display()
        )
    })?;
    // apt checked it against the archive's index: stamped as whole.
    cache::stamp(&deb)?;
    Ok(deb)
}

/// Extracts the package `deb` (path, name, version) into a staging directory
/// of the cache, then moves it into place (`publish`): an extraction cut
/// short (the disk full, a signal) leaves the cache as it was.
fn extract(
    sh: &Shell,
    cache: &Path,
    (deb, package, package_version): &(PathBuf, String, String),
    id: String,
    root: PathBuf,
) -> Result<Source> {
    progress::emit(Event::Note(&format!(
        "extracting {} into {}",
        deb.display(),
        root.display()
    )));
    let staging = fresh_staging(cache, &id)?;
    let sha256 = unpack(sh, deb, package, &staging)?;
    let kernel_version = validate_any_series(&staging.join("tree"))?;
    if cache::check(deb)? == cache::Stamped::Unknown {
        // A package from before stamps: it extracted whole, so it is.
        cache::stamp(deb)?;
    }
    let meta = SourceMeta {
        kind: "debian".into(),
        kernel_version,
        package: Some(package.clone()),
        package_version: Some(package_version.clone()),
        sha256,
        origin: None,
        seeded_from: None,
        git: None,
    };
    publish(&staging, root, id, meta)
}

/// Unpacks the kernel tarball of the package `deb` into `into/tree`;
/// returns the tarball's sha256.
fn unpack(sh: &Shell, deb: &Path, package: &str, into: &Path) -> Result<String> {
    let doing = format!("extracting {package}");
    cache::ensure_space(into, cache::EXTRACT_BYTES, &doing)?;
    let unpacked = cmd!(sh, "dpkg-deb -x {deb} {into}/deb")
        .run()
        .with_context(|| {
            format!(
                "unpacking {} (a damaged package? remove it to fetch it again)",
                deb.display()
            )
        });
    cache::map_out_of_space(unpacked, into, cache::EXTRACT_BYTES, &doing)?;
    let tarball = into.join(format!("deb/usr/src/{package}.tar.xz"));
    let sha256 = util::sha256_file(&tarball)?;
    let untarred = cmd!(sh, "tar -xJf {tarball} -C {into}")
        .run()
        .with_context(|| format!("extracting {}", tarball.display()));
    cache::map_out_of_space(untarred, into, cache::EXTRACT_BYTES, &doing)?;
    fs::remove_dir_all(into.join("deb")).ok();
    fs::rename(into.join(package), into.join("tree"))
        .with_context(|| format!("{} did not contain {package}/", tarball.display()))?;
    Ok(sha256)
}

/// Debian's linux-source-7.3 as packaged, unpacked anew into `into/tree`
/// (`into` an empty directory): the cached tree holds the last variant
/// built, this one no variant's patches. Returns the tarball's sha256, the
/// `sha256` of the cached source's provenance.
pub fn unpack_pristine(sh: &Shell, cache: &Path, into: &Path) -> Result<String> {
    let package = format!("linux-source-{BASE_SERIES}");
    let deb = debian_deb(sh, cache, &SourceArgs::default(), &package, SUITES)?;
    let sha256 = unpack(sh, &deb, &package, into)?;
    validate_tree(&into.join("tree"))?;
    Ok(sha256)
}

/// `local-<name>-<hash of the path>`: one mirror per tree path.
fn local_id(dir: &Path) -> Result<String> {
    let dir = fs::canonicalize(dir)
        .with_context(|| format!("--kernel-src {}: no such directory", dir.display()))?;
    let base = dir
        .file_name()
        .map_or("tree".to_string(), |n| util::sanitize(&n.to_string_lossy()));
    Ok(format!(
        "local-{base}-{}",
        &util::sha256_hex(dir.as_os_str().as_encoded_bytes())[..12]
    ))
}

/// The mirror of a developer's tree: one per tree path (`mirror_of`'s, when
/// given), copied once with tar and kept in step with `dir` by
/// [`Source::sync`] afterwards.
fn local_tree(sh: &Shell, cache: &Path, dir: &Path, mirror_of: Option<&Path>) -> Result<Source> {
    let id = local_id(mirror_of.unwrap_or(dir))?;
    let dir = fs::canonicalize(dir)
        .with_context(|| format!("--kernel-src {}: no such directory", dir.display()))?;
    let kernel_version = validate_tree(&dir)?;
    if dir.join(".config").is_file() {
        progress::emit(Event::Note(&format!(
            "{}/.config is not used: a build starts from tinyconfig (or --config FILE) with \
             wbstall's fragment merged on top; give --config {0}/.config to start from it",
            dir.display()
        )));
    }
    let root = cache.join("src").join(&id);
    if let (Some(meta), true) = (read_meta(&root), root.join("manifest").is_file()) {
        // Synced from `dir` (another checkout of the tree, with mirror_of).
        let meta = SourceMeta {
            origin: Some(dir.display().to_string()),
            ..meta
        };
        return Ok(Source { id, root, meta });
    }
    progress::emit(Event::Note(&format!(
        "copying {} into {} (once; later runs copy only what changed, and the tree is never modified)",
        dir.display(),
        root.display()
    )));
    let git = mirror::is_git(sh, &dir);
    // Stamped before the copy: a file written during it differs next time.
    let files = mirror::list(sh, &dir, git)?;
    let manifest = mirror::scan(&dir, &files)?;
    let staging = fresh_staging(cache, &id)?;
    let tree = staging.join("tree");
    fs::create_dir_all(&tree).with_context(|| format!("creating {}", tree.display()))?;
    let list = staging.join("files");
    let names: Vec<&str> = manifest.keys().map(String::as_str).collect();
    fs::write(&list, names.join("\0")).context("writing the file list")?;
    let producer = cmd!(sh, "tar -C {dir} --null -T {list} -cf -");
    let consumer = cmd!(sh, "tar -C {tree} -xf -");
    util::pipe(producer, consumer, "copying the tree")?;
    fs::remove_file(&list).ok();
    if !git {
        // A plain tree may carry an in-tree build, which O= builds refuse.
        mirror::mrproper(sh, &staging).context("make mrproper in the copy")?;
    }
    // The first build starts from the builds of a cached tree it mostly equals.
    let seeded_from = seed::seed(sh, cache, &id, &tree, &names, &kernel_version)?;
    util::write_atomic(&staging.join("manifest"), mirror::render(&manifest))?;
    let meta = SourceMeta {
        kind: "local".into(),
        kernel_version,
        package: None,
        package_version: None,
        sha256: mirror::identity(sh, &dir, git, &manifest)?,
        origin: Some(dir.display().to_string()),
        seeded_from,
        git: git.then(|| mirror::git_state(sh, &dir)).flatten(),
    };
    publish(&staging, root, id, meta)
}

impl Source {
    /// Brings a developer's tree's mirror up to date with the tree it was
    /// prepared for (a no-op for a Debian source): copies the files written
    /// since the last sync whose content differs, removes the deleted ones,
    /// and renews the provenance. Called with the source's build lock held:
    /// nothing builds from the mirror meanwhile.
    pub fn sync(&self, sh: &Shell) -> Result<Source> {
        let Some(origin) = self
            .meta
            .origin
            .as_deref()
            .filter(|_| self.meta.kind == "local")
        else {
            return Ok(self.clone());
        };
        let dir = Path::new(origin);
        let kernel_version = validate_tree(dir)?;
        let git = mirror::is_git(sh, dir);
        let manifest_path = self.root.join("manifest");
        let old = mirror::parse(
            &fs::read_to_string(&manifest_path)
                .with_context(|| format!("reading {}", manifest_path.display()))?,
            &manifest_path,
        )?;
        let files = mirror::list(sh, dir, git)?;
        let new = mirror::scan(dir, &files)?;
        let delta = mirror::delta(&old, &new);
        if !delta.is_empty() {
            let copied = crate::kernel::switch::Worktree::new(&self.root).take_pristine(
                dir,
                &delta.changed,
                &delta.removed,
            )?;
            if !git && self.tree().join(".config").exists() {
                mirror::mrproper(sh, &self.root)
                    .context("make mrproper in the mirror (the tree carries an in-tree build)")?;
            }
            util::write_atomic(&manifest_path, mirror::render(&new))?;
            let shown: Vec<&str> = copied.iter().take(3).map(String::as_str).collect();
            let same = delta.changed.len() - copied.len();
            progress::emit(Event::Note(&format!(
                "{origin}: {} file(s) changed ({}{}), {} removed since the last build{}",
                copied.len(),
                shown.join(", "),
                if copied.len() > shown.len() {
                    ", ..."
                } else {
                    ""
                },
                delta.removed.len(),
                match same {
                    0 => String::new(),
                    n => format!("; {n} more written with the same content, left as they were"),
                }
            )));
        }
        let meta = SourceMeta {
            kernel_version,
            sha256: mirror::identity(sh, dir, git, &new)?,
            git: git.then(|| mirror::git_state(sh, dir)).flatten(),
            ..self.meta.clone()
        };
        util::write_atomic(
            &self.root.join("source.json"),
            serde_json::to_string_pretty(&meta)?,
        )?;
        Ok(Source {
            meta,
            ..self.clone()
        })
    }
}

#[cfg(test)]
#[path = "source_tests.rs"]
mod tests;
