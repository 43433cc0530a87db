//! A developer's own tree (`--kernel-src`), mirrored into the cache and kept in
//! step incrementally, so that an edit recompiles only what it changed.
//!
//! The mirror (`src/<id>/tree/`, one per tree path) is what variants are applied
//! to and built from (`make O=`); the developer's tree is only ever read. Its
//! files are those git lists (tracked, and untracked but not ignored) or, outside
//! git, every file but `.git`. `src/<id>/manifest` remembers each file's size,
//! mtime and mode as last copied; a sync compares a fresh `lstat` of every file
//! with it and copies only what differs (a copy gets a new mtime, so `make`
//! rebuilds exactly what depends on it), and removes what is gone.

use std::{
    collections::BTreeMap,
    fs,
    os::unix::fs::{MetadataExt, PermissionsExt},
    path::Path,
};

use anyhow::{bail, Context, Result};
use sha2::{Digest, Sha256};
use xshell::{cmd, Shell};

use crate::{kernel::seed, util};

/// What a file looked like when it was last copied.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct FileStamp {
    pub size: u64,
    pub mtime_ns: i128,
    /// `st_mode`: file type and permission bits (a chmod +x is a change).
    pub mode: u32,
}

/// Tree-relative path -> its stamp.
pub type Manifest = BTreeMap<String, FileStamp>;

/// What a sync must do.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Delta {
    /// New or different files, to copy.
    pub changed: Vec<String>,
    /// Files that are gone, to remove.
    pub removed: Vec<String>,
}

impl Delta {
    pub fn is_empty(&self) -> bool {
        self.changed.is_empty() && self.removed.is_empty()
    }
}

/// Whether `dir` is the top of (or inside) a git work tree.
pub fn is_git(sh: &Shell, dir: &Path) -> bool {
    cmd!(sh, "git -C {dir} rev-parse --is-inside-work-tree")
        .quiet()
        .ignore_stderr()
        .ignore_status()
        .read()
        .is_ok_and(|o| o.trim() == "true")
}

/// A git tree's state: its HEAD, branch and remote, and whether its
/// working tree differs from HEAD (what a build of it holds beyond HEAD).
#[derive(Debug, Clone, Default, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct GitState {
    /// `git rev-parse HEAD`: 40 hex digits.
    pub commit: String,
    /// `git symbolic-ref --short HEAD`; none when detached.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub branch: Option<String>,
    /// The URL of the branch's remote (`branch.<b>.remote`), else of `origin`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub url: Option<String>,
    /// Uncommitted changes to tracked files (`git status --porcelain
    /// --untracked-files=no` said something).
    pub dirty: bool,
}

/// The git state of `dir`, a git work tree; none when it has no commit yet.
pub fn git_state(sh: &Shell, dir: &Path) -> Option<GitState> {
    let git = |args: &[&str]| {
        cmd!(sh, "git -C {dir} {args...}")
            .quiet()
            .ignore_stderr()
            .read()
            .ok()
            .map(|o| o.trim().to_string())
            .filter(|o| !o.is_empty())
    };
    let commit = git(&["rev-parse", "--verify", "--quiet", "HEAD"])?;
    let branch = git(&["symbolic-ref", "--quiet", "--short", "HEAD"]);
    let remote = (branch.as_ref())
        .and_then(|b| git(&["config", &format!("branch.{b}.remote")]))
        .unwrap_or_else(|| "origin".into());
    let url = git(&["config", &format!("remote.{remote}.url")]);
    let status = cmd!(sh, "git -C {dir} status --porcelain --untracked-files=no")
        .quiet()
        .ignore_stderr()
        .read()
        .ok()?;
    Some(GitState {
        commit,
        branch,
        url,
        dirty: !status.trim().is_empty(),
    })
}

/// The tree's files: git's (tracked, and untracked but not ignored: build
/// outputs of an in-tree build stay behind) or every file outside `.git`.
pub fn list(sh: &Shell, dir: &Path, git: bool) -> Result<Vec<String>> {
    if git {
        let files = cmd!(
            sh,
            "git -C {dir} ls-files -z --cached --others --exclude-standard"
        )
        .quiet()
        .read()
        .context("listing the tree's files with git ls-files")?;
        let mut out: Vec<String> = files
            .split('\0')
            .filter(|f| !f.is_empty())
            .map(str::to_string)
            .collect();
        out.sort();
        out.dedup();
        Ok(out)
    } else {
        let mut out = Vec::new();
        walk(dir, dir, &mut out)?;
        out.sort();
        Ok(out)
    }
}

fn walk(base: &Path, dir: &Path, out: &mut Vec<String>) -> Result<()> {
    for entry in fs::read_dir(dir).with_context(|| format!("listing {}", dir.display()))? {
        let entry = entry.with_context(|| format!("listing {}", dir.display()))?;
        let path = entry.path();
        let ty = entry.file_type()?;
        if ty.is_dir() {
            if entry.file_name() != ".git" {
                walk(base, &path, out)?;
            }
        } else {
            out.push(
                path.strip_prefix(base)
                    .unwrap_or(&path)
                    .to_string_lossy()
                    .into_owned(),
            );
        }
    }
    Ok(())
}

/// `lstat`s every listed file; files that vanished since the listing (a
/// tracked file deleted in the work tree) are left out.
pub fn scan(dir: &Path, files: &[String]) -> Result<Manifest> {
    let mut out = Manifest::new();
    for rel in files {
        match fs::symlink_metadata(dir.join(rel)) {
            Ok(m) if m.is_file() || m.file_type().is_symlink() => {
                let mtime_ns = i128::from(m.mtime()) * 1_000_000_000 + i128::from(m.mtime_nsec());
                out.insert(
                    rel.clone(),
                    FileStamp {
                        size: m.len(),
                        mtime_ns,
                        mode: m.mode(),
                    },
                );
            }
            Ok(_) => {}
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => {}
            Err(e) => return Err(e).with_context(|| format!("lstat {}", dir.join(rel).display())),
        }
    }
    Ok(out)
}

/// What differs between the manifest of the last copy and a fresh scan.
pub fn delta(old: &Manifest, new: &Manifest) -> Delta {
    Delta {
        changed: new
            .iter()
            .filter(|(rel, st)| old.get(*rel) != Some(*st))
            .map(|(rel, _)| rel.clone())
            .collect(),
        removed: old
            .keys()
            .filter(|rel| !new.contains_key(*rel))
            .cloned()
            .collect(),
    }
}

/// The manifest as text: `<mtime_ns> <size> <mode-octal> <path>` per line.
pub fn render(m: &Manifest) -> String {
    let mut s = String::new();
    for (rel, st) in m {
        s.push_str(&format!(
            "{} {} {:o} {rel}\n",
            st.mtime_ns, st.size, st.mode
        ));
    }
    s
}

pub fn parse(text: &str, origin: &Path) -> Result<Manifest> {
    let mut out = Manifest::new();
    for (i, line) in text.lines().enumerate() {
        let bad = || {
            format!(
                "{}:{}: not `<mtime_ns> <size> <mode> <path>`; remove {} and the next run copies the tree afresh",
                origin.display(),
                i + 1,
                origin.display()
            )
        };
        let mut it = line.splitn(4, ' ');
        let (Some(t), Some(s), Some(m), Some(rel)) = (it.next(), it.next(), it.next(), it.next())
        else {
            bail!(bad());
        };
        let st = FileStamp {
            mtime_ns: t.parse().with_context(bad)?,
            size: s.parse().with_context(bad)?,
            mode: u32::from_str_radix(m, 8).with_context(bad)?,
        };
        out.insert(rel.to_string(), st);
    }
    Ok(out)
}

/// Copies `from` (a file or a symlink) to `to`, replacing what is there.
pub fn copy_entry(from: &Path, to: &Path) -> Result<()> {
    if let Some(dir) = to.parent() {
        fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    let meta = fs::symlink_metadata(from).with_context(|| format!("lstat {}", from.display()))?;
    match fs::symlink_metadata(to) {
        Ok(m) if m.is_dir() => {
            fs::remove_dir_all(to).with_context(|| format!("removing {}", to.display()))?
        }
        Ok(_) => fs::remove_file(to).with_context(|| format!("removing {}", to.display()))?,
        Err(_) => {}
    }
    if meta.file_type().is_symlink() {
        let target = fs::read_link(from).with_context(|| format!("readlink {}", from.display()))?;
        std::os::unix::fs::symlink(&target, to)
            .with_context(|| format!("creating the symlink {}", to.display()))?;
    } else {
        fs::copy(from, to)
            .with_context(|| format!("copying {} to {}", from.display(), to.display()))?;
        fs::set_permissions(to, fs::Permissions::from_mode(meta.mode() & 0o7777))
            .with_context(|| format!("chmod {}", to.display()))?;
    }
    Ok(())
}

/// `make mrproper` in `root/tree` (a developer's in-tree build copied in,
/// which `O=` builds refuse), its build directories moved aside meanwhile:
/// the clean of an in-tree build deletes objects in every directory below.
pub fn mrproper(sh: &Shell, root: &Path) -> Result<()> {
    let tree = root.join("tree");
    let builds = seed::build_dirs(&tree)?;
    let aside = |b: &std::path::PathBuf| root.join(util::file_name(b));
    for b in &builds {
        fs::rename(b, aside(b)).with_context(|| format!("moving {} aside", b.display()))?;
    }
    let cleaned = cmd!(sh, "make -s -C {tree} mrproper").run();
    for b in &builds {
        fs::rename(aside(b), b).with_context(|| format!("moving {} back", b.display()))?;
    }
    Ok(cleaned?)
}

/// Names the tree's state: for a git checkout, HEAD plus the uncommitted diff
/// and the untracked files' bytes; otherwise the manifest (paths, sizes,
/// mtimes), which changes whenever a file is written.
pub fn identity(sh: &Shell, dir: &Path, git: bool, manifest: &Manifest) -> Result<String> {
    let mut hasher = Sha256::new();
    if git {
        let head = cmd!(sh, "git -C {dir} rev-parse HEAD")
            .quiet()
            .read()
            .context(
            "git rev-parse HEAD (a repository without commits cannot be identified: commit once)",
        )?;
        let diff = cmd!(sh, "git -C {dir} diff HEAD --binary")
            .quiet()
            .read()
            .context("git diff HEAD")?;
        let untracked = cmd!(sh, "git -C {dir} ls-files -z --others --exclude-standard")
            .quiet()
            .read()
            .context("listing untracked files")?;
        hasher.update(head.as_bytes());
        hasher.update(diff.as_bytes());
        for f in untracked.split('\0').filter(|f| !f.is_empty()) {
            hasher.update(f.as_bytes());
            hasher.update(fs::read(dir.join(f)).unwrap_or_default());
        }
    } else {
        hasher.update(render(manifest).as_bytes());
    }
    Ok(util::hex(&hasher.finalize()))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn st(size: u64, t: i128) -> FileStamp {
        FileStamp {
            size,
            mtime_ns: t,
            mode: 0o100644,
        }
    }

    #[test]
    fn a_delta_is_what_was_written_added_or_removed() {
        let old: Manifest = [("a", st(1, 1)), ("b", st(2, 2)), ("c", st(3, 3))]
            .into_iter()
            .map(|(k, v)| (k.to_string(), v))
            .collect();
        let mut new = old.clone();
        new.insert("b".into(), st(2, 5)); // touched
        new.remove("c");
        new.insert("d".into(), st(4, 4));
        let mut chmod = st(1, 1);
        chmod.mode = 0o100755;
        new.insert("a".into(), chmod);
        let d = delta(&old, &new);
        assert_eq!(d.changed, vec!["a", "b", "d"]);
        assert_eq!(d.removed, vec!["c"]);
        assert!(delta(&new, &new).is_empty());
    }

    #[test]
    fn the_manifest_round_trips_and_a_damaged_one_says_how_to_recover() {
        let m: Manifest = [(
            "dir/with space.c".to_string(),
            st(10, 1_700_000_000_123_456_789),
        )]
        .into_iter()
        .collect();
        let p = Path::new("/cache/manifest");
        assert_eq!(parse(&render(&m), p).unwrap(), m);
        let err = parse("12 x 644 a\n", p).unwrap_err().to_string();
        assert!(
            err.contains("manifest:1") && err.contains("remove /cache/manifest"),
            "{err}"
        );
        assert!(parse("12 1\n", p).is_err());
    }

    #[test]
    fn copies_keep_modes_and_symlinks() {
        let d = util::testdir::Dir::new("mirror-copy");
        let a = d.path().join("a.sh");
        fs::write(&a, "#!/bin/sh\n").unwrap();
        fs::set_permissions(&a, fs::Permissions::from_mode(0o755)).unwrap();
        std::os::unix::fs::symlink("a.sh", d.path().join("l")).unwrap();
        copy_entry(&a, &d.path().join("out/a.sh")).unwrap();
        copy_entry(&d.path().join("l"), &d.path().join("out/l")).unwrap();
        let m = fs::metadata(d.path().join("out/a.sh")).unwrap();
        assert_eq!(m.mode() & 0o777, 0o755);
        assert_eq!(
            fs::read_link(d.path().join("out/l")).unwrap(),
            Path::new("a.sh")
        );
        // Replacing a symlink by a file works too.
        copy_entry(&a, &d.path().join("out/l")).unwrap();
        assert!(fs::symlink_metadata(d.path().join("out/l"))
            .unwrap()
            .is_file());
    }
}
