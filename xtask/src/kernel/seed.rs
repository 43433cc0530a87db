//! A new mirror of a developer's tree (`--kernel-src`) starts from the builds
//! of a cached tree of the same kernel version (Debian's 7.3, another tree's
//! mirror) instead of building cold: `.ci/synthetic-history`, or a branch of
//! 7.3, differs from Debian's tree in a few dozen of its 96,000 files.
//!
//! `make` decides by mtimes, so the copy must show it exactly what differs.
//! Under the seed's build lock (no build changes it meanwhile), every file of
//! the new tree whose bytes and mode are the seed's gets the seed's mtime,
//! every other one now (later than every object of the seed); then the seed's
//! build directories are copied with their mtimes (`cp -a`). A file the seed
//! has and the tree has not is a missing prerequisite, which rebuilds what
//! named it. The build directories name their sources relative to the tree
//! ([`build_dir_in`]), so their recorded commands are the new tree's
//! too; a command that names the seed's path (objtool's, built by `tools/`)
//! differs from the new one and is run again. Not seeded, so built cold: no
//! cached tree of that version with a build, a Kconfig file or `configs/`
//! fragment that differs (the configuration would be the seed's, not the
//! tree's own), or a symbolic link that differs (`make` reads the mtime of
//! its target).

use std::{
    ffi::CString,
    fs,
    os::unix::{ffi::OsStrExt, fs::MetadataExt},
    path::{Path, PathBuf},
    time::Instant,
};

use anyhow::{Context, Result};
use xshell::{cmd, Shell};

use crate::{
    kernel::cache,
    progress::{self, Event},
    util,
};

/// Why a tree was not seeded from a candidate.
#[derive(Debug, PartialEq)]
enum Refused {
    /// A file that shapes the configuration differs.
    Config(String),
    /// A symbolic link differs, or is one on one side only.
    Link(String),
}

/// Seeds `tree` (the staged copy of a tree of Linux `version` whose files
/// are `files`, tree-relative) with the builds of a cached tree of `cache`
/// other than the source `id`; returns the seed's id. None, said, when
/// none fits.
pub fn seed(
    sh: &Shell,
    cache: &Path,
    id: &str,
    tree: &Path,
    files: &[&str],
    version: &str,
) -> Result<Option<String>> {
    let Some((from, root)) = candidate(cache, id, version)? else {
        return Ok(None);
    };
    let _lock = util::lock_dir_waiting(&root, "build-kernel (a mirror seeded from it)", |busy| {
        progress::emit(Event::Note(&format!(
            "waiting to seed a mirror from the builds of {from}: {busy}"
        )));
    })?;
    // Listed again under the lock: what is copied is what the compared tree built.
    let seed_tree = root.join("tree");
    let builds = build_dirs(&seed_tree)?;
    if builds.is_empty() {
        return Ok(None);
    }
    let started = Instant::now();
    let (same, differing) = match compare(tree, &seed_tree, files)? {
        Ok(c) => c,
        Err(refused) => {
            progress::emit(Event::Note(&format!(
                "not seeded from the builds of {from} (a cold build): {}",
                match refused {
                    Refused::Config(f) => format!("{f} differs, and shapes the configuration"),
                    Refused::Link(f) => format!("the symbolic link {f} differs"),
                }
            )));
            return Ok(None);
        }
    };
    for (path, sec, nsec) in &same {
        set_mtime(path, Some((*sec, *nsec)))?;
    }
    for rel in &differing {
        set_mtime(&tree.join(rel), None)?;
    }
    let doing = format!("seeding a mirror from the builds of {from}");
    let need = cache::BUILD_BYTES * builds.len() as u64;
    cache::ensure_space(tree, need, &doing)?;
    let mut names = Vec::new();
    for b in &builds {
        let name = util::file_name(b);
        let to = tree.join(&name);
        let copied = cmd!(sh, "cp -a {b} {to}")
            .quiet()
            .run()
            .with_context(|| format!("copying {} to {}", b.display(), to.display()));
        cache::map_out_of_space(copied, tree, need, &doing)?;
        names.push(name);
    }
    let shown: Vec<&str> = differing.iter().take(3).map(String::as_str).collect();
    progress::emit(Event::Note(&format!(
        "seeded from the builds of {from} ({}, {:.0} s): {} file(s) differ ({}{}) and build \
         again, the other {} are built already",
        names.join(", "),
        started.elapsed().as_secs_f64(),
        differing.len(),
        shown.join(", "),
        if differing.len() > shown.len() {
            ", ..."
        } else {
            ""
        },
        same.len()
    )));
    Ok(Some(from))
}

/// The build directories' names in a tree: `BUILD_DIR_PREFIX<key>`.
pub const BUILD_DIR_PREFIX: &str = ".wbstall-build-";

/// The build directory of the configuration `key` in the cached `tree`: a
/// directory of the tree itself, so that kbuild names the sources relative
/// to it (`srctree := ..`, "building in a subdirectory of the source"). Its
/// commands and dependency lists then hold no path of the cache, and it
/// stays valid as a copy beside a copy of its tree.
pub fn build_dir_in(tree: &Path, key: &str) -> PathBuf {
    tree.join(format!("{BUILD_DIR_PREFIX}{}", &key[..12]))
}

/// The cached tree to seed from: one of Linux `version` with a build,
/// Debian's first, then by id. Returns its id and root.
fn candidate(cache: &Path, id: &str, version: &str) -> Result<Option<(String, PathBuf)>> {
    let src = cache.join("src");
    let Ok(entries) = fs::read_dir(&src) else {
        return Ok(None);
    };
    let mut found = Vec::new();
    for e in entries.flatten() {
        let name = e.file_name().to_string_lossy().into_owned();
        if name.starts_with('.') || name == id || !e.path().is_dir() {
            continue;
        }
        // Its provenance (`source::SourceMeta`): the version and the kind.
        let Some(meta) = fs::read_to_string(e.path().join("source.json"))
            .ok()
            .and_then(|t| serde_json::from_str::<serde_json::Value>(&t).ok())
        else {
            continue;
        };
        if meta["kernel_version"] == version && !build_dirs(&e.path().join("tree"))?.is_empty() {
            found.push((meta["kind"] != "debian", name, e.path()));
        }
    }
    found.sort();
    Ok(found.into_iter().next().map(|(_, name, root)| (name, root)))
}

/// The build directories of `tree` that were configured (they hold the
/// configuration key's stamp).
pub fn build_dirs(tree: &Path) -> Result<Vec<PathBuf>> {
    let Ok(entries) = fs::read_dir(tree) else {
        return Ok(Vec::new());
    };
    let mut out: Vec<PathBuf> = entries
        .flatten()
        .filter(|e| {
            e.file_name()
                .to_string_lossy()
                .starts_with(BUILD_DIR_PREFIX)
        })
        .map(|e| e.path())
        .filter(|p| p.join(".wbstall-config-key").is_file())
        .collect();
    out.sort();
    Ok(out)
}

/// A file of the tree that the seed holds alike, and the seed's mtime.
type Same = (PathBuf, i64, i64);

/// The files alike and those that differ, or why not to seed.
type Compared = std::result::Result<(Vec<Same>, Vec<String>), Refused>;

/// The files of `tree` (`files`) that `seed` holds with the same bytes and
/// mode, with the seed's mtimes, and the others; or why not to seed.
fn compare(tree: &Path, seed: &Path, files: &[&str]) -> Result<Compared> {
    let mut same = Vec::new();
    let mut differing = Vec::new();
    for &rel in files {
        let ours = tree.join(rel);
        let theirs = seed.join(rel);
        let Ok(a) = fs::symlink_metadata(&ours) else {
            continue;
        };
        let b = fs::symlink_metadata(&theirs).ok();
        let link = |m: &fs::Metadata| m.file_type().is_symlink();
        if link(&a) || b.as_ref().is_some_and(link) {
            if b.as_ref().is_some_and(link)
                && link(&a)
                && fs::read_link(&ours).ok() == fs::read_link(&theirs).ok()
            {
                continue;
            }
            return Ok(Err(Refused::Link(rel.to_string())));
        }
        let alike = match &b {
            Some(b)
                if b.is_file() && b.len() == a.len() && b.mode() & 0o7777 == a.mode() & 0o7777 =>
            {
                let read =
                    |p: &Path| fs::read(p).with_context(|| format!("reading {}", p.display()));
                read(&ours)? == read(&theirs)?
            }
            _ => false,
        };
        match (alike, b) {
            (true, Some(b)) => same.push((ours, b.mtime(), b.mtime_nsec())),
            _ => {
                if shapes_config(rel) {
                    return Ok(Err(Refused::Config(rel.to_string())));
                }
                differing.push(rel.to_string());
            }
        }
    }
    Ok(Ok((same, differing)))
}

/// Whether `rel` is read by `make tinyconfig`/`olddefconfig`: a Kconfig file
/// or a configuration fragment (`kernel/configs/tiny.config`).
fn shapes_config(rel: &str) -> bool {
    let name = Path::new(rel)
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_default();
    name.starts_with("Kconfig") || rel.split('/').any(|c| c == "configs")
}

/// Sets the mtime of `path` (a file, not followed if a link) to `to`
/// (seconds, nanoseconds), or to now; its atime is left alone.
fn set_mtime(path: &Path, to: Option<(i64, i64)>) -> Result<()> {
    let c = CString::new(path.as_os_str().as_bytes())
        .with_context(|| format!("{} holds a NUL byte", path.display()))?;
    let omit = libc::timespec {
        tv_sec: 0,
        tv_nsec: libc::UTIME_OMIT,
    };
    let mtime = match to {
        Some((sec, nsec)) => libc::timespec {
            tv_sec: sec,
            tv_nsec: nsec,
        },
        None => libc::timespec {
            tv_sec: 0,
            tv_nsec: libc::UTIME_NOW,
        },
    };
    let times = [omit, mtime];
    // SAFETY: `c` is a NUL-terminated path and `times` two timespecs, both
    // outliving the call, which only reads them.
    if unsafe { libc::utimensat(libc::AT_FDCWD, c.as_ptr(), times.as_ptr(), 0) } != 0 {
        return Err(std::io::Error::last_os_error())
            .with_context(|| format!("setting the mtime of {}", path.display()));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::testdir;

    fn write(dir: &Path, rel: &str, text: &str) {
        let p = dir.join(rel);
        fs::create_dir_all(p.parent().unwrap()).unwrap();
        fs::write(p, text).unwrap();
    }

    fn mtime(p: &Path) -> (i64, i64) {
        let m = fs::metadata(p).unwrap();
        (m.mtime(), m.mtime_nsec())
    }

    /// A cache with Debian's 7.3.4 built in one configuration, last built
    /// an hour ago (its files older still), and the staged copy of a tree.
    fn setup(version: &str) -> (testdir::Dir, PathBuf) {
        let t = testdir::Dir::new("seed");
        let root = t.path().join("src/debian-7.3.4-1");
        let meta = serde_json::json!({"kind": "debian", "kernel_version": version});
        fs::create_dir_all(&root).unwrap();
        fs::write(root.join("source.json"), meta.to_string()).unwrap();
        let seed = root.join("tree");
        for (rel, text) in [("mm/a.c", "a\n"), ("mm/b.c", "b\n"), ("mm/Kconfig", "k\n")] {
            write(&seed, rel, text);
            set_mtime(&seed.join(rel), Some((1_000_000_000, 5))).unwrap();
        }
        let build = seed.join(format!("{BUILD_DIR_PREFIX}0123456789ab"));
        write(&build, ".wbstall-config-key", "0123456789abcdef\n");
        write(&build, "mm/a.o", "object a\n");
        set_mtime(&build.join("mm/a.o"), Some((1_000_003_600, 0))).unwrap();
        let staged = t.path().join("src/.local-tree.1.partial/tree");
        for (rel, text) in [
            ("mm/a.c", "a\n"),
            ("mm/b.c", "b, edited\n"),
            ("mm/Kconfig", "k\n"),
        ] {
            write(&staged, rel, text);
        }
        (t, staged)
    }

    #[test]
    fn a_new_mirror_takes_the_seeds_builds_and_only_what_differs_is_newer_than_its_objects() {
        let sh = Shell::new().unwrap();
        let (t, staged) = setup("7.3.4");
        let files = ["mm/Kconfig", "mm/a.c", "mm/b.c"];
        let from = seed(&sh, t.path(), "local-tree", &staged, &files, "7.3.4").unwrap();
        assert_eq!(from.as_deref(), Some("debian-7.3.4-1"));
        let build = staged.join(format!("{BUILD_DIR_PREFIX}0123456789ab"));
        assert_eq!(build_dirs(&staged).unwrap(), std::slice::from_ref(&build));
        // The object came along with its mtime; the same a.c is as old as the
        // seed's, so make keeps a.o; the edited b.c is newer than any object.
        let object = mtime(&build.join("mm/a.o"));
        assert_eq!(object, (1_000_003_600, 0));
        assert_eq!(mtime(&staged.join("mm/a.c")), (1_000_000_000, 5));
        assert!(mtime(&staged.join("mm/b.c")) > object);
    }

    #[test]
    fn no_seed_of_another_version_nor_when_a_kconfig_file_or_a_link_differs() {
        let sh = Shell::new().unwrap();
        let files = ["mm/Kconfig", "mm/a.c", "mm/b.c"];
        let (t, staged) = setup("7.3.5");
        assert!(seed(&sh, t.path(), "local-tree", &staged, &files, "7.3.4")
            .unwrap()
            .is_none());
        let (t, staged) = setup("7.3.4");
        write(&staged, "mm/Kconfig", "k, edited\n");
        assert!(seed(&sh, t.path(), "local-tree", &staged, &files, "7.3.4")
            .unwrap()
            .is_none());
        // Nothing was copied, and no mtime moved back.
        assert!(build_dirs(&staged).unwrap().is_empty());
        assert!(mtime(&staged.join("mm/a.c")).0 > 1_000_000_000);
        let (t, staged) = setup("7.3.4");
        fs::remove_file(staged.join("mm/a.c")).unwrap();
        std::os::unix::fs::symlink("b.c", staged.join("mm/a.c")).unwrap();
        assert!(seed(&sh, t.path(), "local-tree", &staged, &files, "7.3.4")
            .unwrap()
            .is_none());
    }
}
