//! Switching the cached tree from one variant to another so that only the
//! files the patches touch change.
//!
//! Switching works like quilt: before a file is first modified its pristine copy
//! is saved under `src/<id>/orig/`. A switch applies the new variant's patches to
//! pristine copies in a staging directory first (nothing in the tree changes if a
//! patch does not apply), then rewrites only the files whose content differs. Make
//! sees new mtimes on exactly those files, so only their objects rebuild.

use std::{
    collections::{BTreeMap, BTreeSet},
    fs,
    os::unix::fs::PermissionsExt,
    path::{Path, PathBuf},
};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};
use xshell::{cmd, Shell};

use crate::{
    kernel::{
        mirror,
        patch::{failing_hunk, touched_paths, Patch},
        variants::Variant,
    },
    util,
};

/// A variant's patch that does not apply to the tree (the tree is unchanged).
#[derive(Debug)]
pub struct DoesNotApply(pub String);

impl std::fmt::Display for DoesNotApply {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.0)
    }
}

impl std::error::Error for DoesNotApply {}

/// Which variant the cached tree holds, and which files differ from pristine.
#[derive(Debug, Default, Serialize, Deserialize)]
struct TreeState {
    variant: Option<String>,
    /// sha256 of each applied patch, in order.
    patches: Vec<String>,
    /// Files that may differ from pristine.
    touched: BTreeSet<String>,
    /// Whether each saved original existed in the pristine tree.
    originals: BTreeMap<String, bool>,
    /// Set while files are being rewritten; a crash leaves it set and the next
    /// switch restores every file in `touched`.
    switching: bool,
}

/// What a switch did.
#[derive(Debug)]
pub struct Switch {
    /// Files whose content changed (rewritten, created or deleted).
    pub changed: Vec<String>,
}

/// A cached source tree that variants are applied to (`src/<id>/`).
pub struct Worktree {
    root: PathBuf,
}

impl Worktree {
    pub fn new(root: &Path) -> Worktree {
        Worktree {
            root: root.to_path_buf(),
        }
    }

    fn tree(&self) -> PathBuf {
        self.root.join("tree")
    }

    fn state_path(&self) -> PathBuf {
        self.root.join("variant-state.json")
    }

    fn load_state(&self) -> Result<TreeState> {
        match fs::read_to_string(self.state_path()) {
            Ok(text) => serde_json::from_str(&text).with_context(|| {
                format!(
                    "{} is corrupt; remove {} to start from a fresh tree",
                    self.state_path().display(),
                    self.root.display()
                )
            }),
            Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(TreeState::default()),
            Err(e) => Err(e).with_context(|| format!("reading {}", self.state_path().display())),
        }
    }

    fn save_state(&self, st: &TreeState) -> Result<()> {
        util::write_atomic(&self.state_path(), serde_json::to_string_pretty(st)?)
    }

    /// The pristine content of `rel`, or None if the pristine tree lacks it.
    fn pristine(&self, st: &TreeState, rel: &str) -> Result<Option<Vec<u8>>> {
        let path = match st.originals.get(rel) {
            Some(false) => return Ok(None),
            Some(true) => self.root.join("orig").join(rel),
            None => self.tree().join(rel),
        };
        read_optional(&path)
    }

    /// The variant the tree holds now, if any.
    #[cfg(test)]
    pub fn current(&self) -> Result<Option<String>> {
        let st = self.load_state()?;
        Ok(if st.switching { None } else { st.variant })
    }

    /// Takes new pristine content from `from` (a developer's tree): each of
    /// `changed` is copied, unless its content and mode are the pristine
    /// copy's already, each of `removed` deleted. A file some variant has
    /// patched gets its new original in `orig/`, and the tree's copy is left to
    /// the next [`Worktree::switch`], which re-applies the patches to it.
    /// Returns the files copied: a fresh checkout of the same commit (every
    /// mtime new) copies none, so `make` rebuilds nothing.
    pub fn take_pristine(
        &self,
        from: &Path,
        changed: &[String],
        removed: &[String],
    ) -> Result<Vec<String>> {
        let mut st = self.load_state()?;
        let mut copied = Vec::new();
        for rel in changed {
            let src = from.join(rel);
            if self.is_pristine(&st, &src, rel)? {
                continue;
            }
            copied.push(rel.clone());
            match st.originals.get_mut(rel) {
                Some(existed) => {
                    mirror::copy_entry(&src, &self.root.join("orig").join(rel))?;
                    *existed = true;
                    if !st.touched.contains(rel) {
                        mirror::copy_entry(&src, &self.tree().join(rel))?;
                    }
                }
                None => mirror::copy_entry(&src, &self.tree().join(rel))?,
            }
        }
        for rel in removed {
            let remove = |p: &Path| match fs::remove_file(p) {
                Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                    Err(e).with_context(|| format!("removing {}", p.display()))
                }
                _ => Ok(()),
            };
            match st.originals.get_mut(rel) {
                Some(existed) => {
                    remove(&self.root.join("orig").join(rel))?;
                    *existed = false;
                    if !st.touched.contains(rel) {
                        remove(&self.tree().join(rel))?;
                    }
                }
                None => remove(&self.tree().join(rel))?,
            }
        }
        // The tree no longer holds exactly the recorded variant.
        st.patches.clear();
        self.save_state(&st)?;
        Ok(copied)
    }

    /// Whether `src` (a file or a symlink) is what the pristine tree holds
    /// at `rel`: the same bytes and permission bits, or the same link.
    fn is_pristine(&self, st: &TreeState, src: &Path, rel: &str) -> Result<bool> {
        let pristine = match st.originals.get(rel) {
            Some(false) => return Ok(false),
            Some(true) => self.root.join("orig").join(rel),
            None => self.tree().join(rel),
        };
        let (Ok(a), Ok(b)) = (fs::symlink_metadata(src), fs::symlink_metadata(&pristine)) else {
            return Ok(false);
        };
        if a.file_type().is_symlink() || b.file_type().is_symlink() {
            return Ok(a.file_type().is_symlink()
                && b.file_type().is_symlink()
                && fs::read_link(src).ok() == fs::read_link(&pristine).ok());
        }
        if !(a.is_file() && b.is_file())
            || a.len() != b.len()
            || a.permissions().mode() & 0o7777 != b.permissions().mode() & 0o7777
        {
            return Ok(false);
        }
        let read = |p: &Path| fs::read(p).with_context(|| format!("reading {}", p.display()));
        Ok(read(src)? == read(&pristine)?)
    }

    /// Makes the tree hold `variant`: pristine plus its patches, in order.
    pub fn switch(&self, sh: &Shell, variant: &Variant) -> Result<Switch> {
        let mut st = self.load_state()?;
        let mut new_touched = BTreeSet::new();
        for p in &variant.patches {
            new_touched
                .extend(touched_paths(&p.diff).with_context(|| format!("reading {}", p.label))?);
        }
        let stage = self.stage(sh, &st, variant, &new_touched)?;
        self.save_originals(&mut st, &new_touched)?;
        st.touched.extend(new_touched.iter().cloned());
        st.switching = true;
        self.save_state(&st)?;
        let changed = self.rewrite(&st, &new_touched, &stage)?;
        st.variant = Some(variant.name.clone());
        st.patches = variant.patches.iter().map(|p| p.sha256.clone()).collect();
        st.touched = new_touched;
        st.switching = false;
        self.save_state(&st)?;
        fs::remove_dir_all(&stage).ok();
        Ok(Switch { changed })
    }

    /// Step 1 of a switch: applies `variant`'s patches to pristine copies of
    /// the files they touch, in a staging directory (returned). The tree is
    /// not touched until every patch has applied.
    fn stage(
        &self,
        sh: &Shell,
        st: &TreeState,
        variant: &Variant,
        new_touched: &BTreeSet<String>,
    ) -> Result<PathBuf> {
        let stage = self.root.join("stage");
        if stage.exists() {
            fs::remove_dir_all(&stage).with_context(|| format!("clearing {}", stage.display()))?;
        }
        fs::create_dir_all(&stage).with_context(|| format!("creating {}", stage.display()))?;
        for rel in new_touched {
            if let Some(bytes) = self.pristine(st, rel)? {
                write_file(&stage.join(rel), &bytes)?;
            }
        }
        let _d = sh.push_dir(&stage);
        // Keep git from finding a repository above the staging directory.
        let ceiling = self.root.display().to_string();
        for p in &variant.patches {
            let out = cmd!(sh, "git apply --whitespace=nowarn -")
                .env("GIT_CEILING_DIRECTORIES", &ceiling)
                .env_remove("GIT_DIR")
                .env_remove("GIT_WORK_TREE")
                .stdin(&p.diff)
                .quiet()
                .ignore_status()
                .output()
                .context("running git apply")?;
            if !out.status.success() {
                let stderr = String::from_utf8_lossy(&out.stderr);
                return Err(does_not_apply(p, variant, st, &stderr).into());
            }
        }
        Ok(stage)
    }

    /// Step 2 of a switch: saves the originals of files about to be touched
    /// for the first time.
    fn save_originals(&self, st: &mut TreeState, new_touched: &BTreeSet<String>) -> Result<()> {
        for rel in new_touched {
            if !st.originals.contains_key(rel) {
                let src = self.tree().join(rel);
                let existed = match read_optional(&src)? {
                    Some(bytes) => {
                        write_file(&self.root.join("orig").join(rel), &bytes)?;
                        true
                    }
                    None => false,
                };
                st.originals.insert(rel.clone(), existed);
            }
        }
        Ok(())
    }

    /// Step 3 of a switch: rewrites only the files of `st.touched` that
    /// differ from what they should hold (the staged copy for the files of
    /// `new_touched`, pristine for the rest); returns them.
    fn rewrite(
        &self,
        st: &TreeState,
        new_touched: &BTreeSet<String>,
        stage: &Path,
    ) -> Result<Vec<String>> {
        let mut changed = Vec::new();
        for rel in st.touched.clone() {
            let want = if new_touched.contains(&rel) {
                read_optional(&stage.join(&rel))?
            } else {
                self.pristine(st, &rel)?
            };
            let path = self.tree().join(&rel);
            if read_optional(&path)? != want {
                match &want {
                    Some(bytes) => write_file(&path, bytes)?,
                    None => fs::remove_file(&path)
                        .with_context(|| format!("removing {}", path.display()))?,
                }
                changed.push(rel);
            }
        }
        Ok(changed)
    }
}

/// Why patch `p` of `variant` failed, from `git apply`'s `stderr`, and what
/// the tree (in state `st`) still holds.
fn does_not_apply(p: &Patch, variant: &Variant, st: &TreeState, stderr: &str) -> DoesNotApply {
    let hunk = failing_hunk(&p.diff, stderr).unwrap_or_else(|| "a hunk (see below)".to_string());
    DoesNotApply(format!(
        "patch {} does not apply for variant `{}`: {hunk} failed.\n\
         git apply said:\n{}\n\
         Nothing was changed: the cached tree still holds {}, and the other \
         variants are unaffected. Rebase the patch onto the state it follows \
         (for --patch: the regressed variant).",
        p.label,
        variant.name,
        stderr.trim_end(),
        st.variant
            .as_deref()
            .map_or("its previous state".to_string(), |v| format!(
                "variant `{v}`"
            )),
    ))
}

fn read_optional(path: &Path) -> Result<Option<Vec<u8>>> {
    match fs::read(path) {
        Ok(b) => Ok(Some(b)),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(None),
        Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
    }
}

fn write_file(path: &Path, bytes: &[u8]) -> Result<()> {
    if let Some(dir) = path.parent() {
        fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    }
    fs::write(path, bytes).with_context(|| format!("writing {}", path.display()))
}
