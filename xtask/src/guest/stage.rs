//! The guest a fleet boots, made once where the kernels were built:
//! `cargo xtask slurm` stages the base initramfs (busybox, fio built static
//! from Debian's source, mke2fs, `wbstall-fuse` and `wbstall-sample` built
//! with cargo, the plan's FUSE server, the scripts of `qemu/`) in the jobs'
//! directory, and each shard's `qemu-test --staged DIR` boots it. A node then
//! needs no cargo, no Debian source and no network, and every shard boots
//! the same guest. A staged guest is never rebuilt: missing, changed, or made
//! for another plan, the shard stops and says how to stage it again.

use std::{
    fs,
    path::{Path, PathBuf},
};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use xshell::Shell;

use crate::{
    deps,
    guest::{fuse_server::External, initramfs},
    util,
};

/// What a staged guest is: written last, so that a directory without it was
/// never staged whole.
const MANIFEST: &str = "stage.json";

/// `stage.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct Manifest {
    /// The base archive, a file of the directory (its name is initramfs's).
    base: String,
    base_sha256: String,
    /// `fio --version` of the host that staged it: the guest's fio is that version.
    fio: String,
    /// The FUSE server the plan needs ([`External::describe`]).
    fuse_server: String,
    /// When it was staged.
    staged: String,
}

/// A staged guest, checked: its base archive and the fio it carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Staged {
    pub base: PathBuf,
    pub fio: String,
}

/// How every refusal of a staged guest ends.
const RESTAGE: &str = "`cargo xtask slurm` stages it on the host that built the kernels \
                       (cargo, Debian's fio source) before it submits the jobs: submit them \
                       again with it; a node does not build it";

/// Builds the guest for a plan needing `external` in `dir` (here, with
/// cargo and fio's source) and records it.
pub fn make(sh: &Shell, dir: &Path, external: &External) -> Result<Staged> {
    let base = initramfs::base_in(sh, external, dir).context("staging the guest's initramfs")?;
    let fio = deps::fio_version(sh)
        .context("the guest's fio is this host's version: apt-get install fio")?;
    let manifest = Manifest {
        base: util::file_name(&base),
        base_sha256: util::sha256_file(&base)?,
        fio: fio.clone(),
        fuse_server: external.describe(),
        staged: util::timestamp(),
    };
    let text = serde_json::to_string_pretty(&manifest).context("writing stage.json")?;
    util::write_atomic(&dir.join(MANIFEST), text + "\n")?;
    Ok(Staged { base, fio })
}

/// The guest staged in `dir`, checked whole and made for a plan needing
/// `external`; refused, with how to stage it again, otherwise.
pub fn open(dir: &Path, external: &External) -> Result<Staged> {
    let path = dir.join(MANIFEST);
    let text = fs::read_to_string(&path).with_context(|| {
        format!(
            "--staged {}: no staged guest ({} missing): {RESTAGE}",
            dir.display(),
            path.display()
        )
    })?;
    let m: Manifest = serde_json::from_str(&text).with_context(|| {
        format!(
            "--staged {}: parsing {}: {RESTAGE}",
            dir.display(),
            path.display()
        )
    })?;
    let base = dir.join(&m.base);
    let now = util::sha256_file(&base).with_context(|| {
        format!(
            "--staged {}: reading its initramfs: {RESTAGE}",
            dir.display()
        )
    })?;
    if now != m.base_sha256 {
        bail!(
            "--staged {}: {} changed since it was staged {} (sha256 {now}, {} then): {RESTAGE}",
            dir.display(),
            base.display(),
            m.staged,
            m.base_sha256
        );
    }
    let wanted = external.describe();
    if m.fuse_server != wanted {
        bail!(
            "--staged {}: the guest was staged with FUSE server {}, this plan's is {wanted} \
             (other qemu-test flags than those it was staged for): {RESTAGE}",
            dir.display(),
            m.fuse_server
        );
    }
    Ok(Staged { base, fio: m.fio })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A staged guest as `make` leaves it, without building: `base` for the archive.
    fn staged(dir: &Path, base: &[u8], fuse_server: &str) {
        fs::create_dir_all(dir).unwrap();
        fs::write(dir.join("base.cpio"), base).unwrap();
        let m = Manifest {
            base: "base.cpio".into(),
            base_sha256: util::sha256_hex(base),
            fio: "fio-3.33".into(),
            fuse_server: fuse_server.into(),
            staged: "20261204T100000Z".into(),
        };
        fs::write(dir.join(MANIFEST), serde_json::to_string(&m).unwrap()).unwrap();
    }

    #[test]
    fn a_staged_guest_is_booted_as_it_was_staged_and_refused_otherwise() {
        let t = util::testdir::Dir::new("stage");
        let dir = t.path().join("guest");
        // Never staged: says so and how to stage it.
        let e = format!("{:#}", open(&dir, &External::None).unwrap_err());
        assert!(
            e.contains("no staged guest") && e.contains("cargo xtask slurm"),
            "{e}"
        );
        staged(&dir, b"070701 the archive", "none");
        let s = open(&dir, &External::None).unwrap();
        assert_eq!(
            (s.base, s.fio.as_str()),
            (dir.join("base.cpio"), "fio-3.33")
        );
        // Made for a plan without fuse-passthrough: refused for one with it.
        let e = open(&dir, &External::PassthroughLl)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("staged with FUSE server none, this plan's is libfuse's passthrough_ll"),
            "{e}"
        );
        // Changed since (a half-copied or rewritten archive): refused, never rebuilt.
        fs::write(dir.join("base.cpio"), b"070701 another").unwrap();
        let e = open(&dir, &External::None).unwrap_err().to_string();
        assert!(
            e.contains("changed since it was staged 20261204T100000Z"),
            "{e}"
        );
        assert!(e.contains("a node does not build it"), "{e}");
        fs::remove_file(dir.join("base.cpio")).unwrap();
        let e = format!("{:#}", open(&dir, &External::None).unwrap_err());
        assert!(e.contains("reading its initramfs"), "{e}");
        assert_eq!(
            fs::read_dir(&dir).unwrap().count(),
            1,
            "nothing was rebuilt"
        );
    }
}
