//! The guest a fleet boots, made once where the kernels were built:
//! `cargo xtask slurm` stages the base initramfs (busybox, fio built static
//! from Debian's source, mke2fs, `wbstall-fuse` and `wbstall-sample` built
//! with cargo, the plan's FUSE server, the scripts of `qemu/`) in the jobs'
//! directory, and each shard's `qemu-test --staged DIR` boots it. A node then
//! needs no cargo, no Debian source and no network, and every shard boots
//! the same guest. The user's FUSE server (`--fuse-server`) is the one it was
//! staged with, as `stage.json` records it: a node need not have it, and is
//! never asked for it. A staged guest is never rebuilt: missing, changed, or
//! made for another plan, the shard stops and says how to stage it again.

use std::{
    fs,
    path::{Path, PathBuf},
};

use anyhow::{anyhow, bail, Context, Result};
use serde::{Deserialize, Serialize};
use xshell::Shell;

use crate::{
    deps,
    guest::{
        fuse_server::{External, UserServer},
        initramfs,
    },
    stamp::{self, Stamp},
    util,
};

/// What a staged guest is: written last, so that a directory without it was
/// never staged whole.
const MANIFEST: &str = "stage.json";

/// `stage.json`.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
struct StageManifest {
    /// The base archive, a file of the directory (its name is initramfs's).
    base: String,
    base_sha256: String,
    /// `fio --version` of the host that staged it: the guest's fio is that version.
    fio: String,
    /// The FUSE server the plan needs, the user's with its program as found
    /// on the host that staged it.
    fuse_server: External,
    /// When it was staged.
    #[serde(deserialize_with = "staged")]
    staged: Stamp,
}

stamp::time_field!(staged: Stamp);

/// A staged guest, checked: its base archive, the fio and the FUSE server
/// it carries.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Staged {
    /// The directory it was staged in (`--staged DIR`).
    pub dir: PathBuf,
    pub base: PathBuf,
    pub fio: String,
    pub external: External,
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
    record(dir, &base, &fio, external)
}

/// Records `base` (a file of `dir`), the guest for a plan needing
/// `external` with `fio`, as the guest staged in `dir`.
pub fn record(dir: &Path, base: &Path, fio: &str, external: &External) -> Result<Staged> {
    let manifest = StageManifest {
        base: util::file_name(base),
        base_sha256: util::sha256_file(base)?,
        fio: fio.to_string(),
        fuse_server: external.clone(),
        staged: Stamp::now(),
    };
    let text = serde_json::to_string_pretty(&manifest).context("writing stage.json")?;
    util::write_atomic(&dir.join(MANIFEST), text + "\n")?;
    Ok(Staged {
        dir: dir.to_path_buf(),
        base: base.to_path_buf(),
        fio: fio.to_string(),
        external: external.clone(),
    })
}

/// The guest staged in `dir`, checked whole; refused, with how to stage it
/// again, otherwise. Whether it is made for the plan is [`Staged::check`]'s.
pub fn open(dir: &Path) -> Result<Staged> {
    let path = dir.join(MANIFEST);
    let text = fs::read_to_string(&path).with_context(|| {
        format!(
            "--staged {}: no staged guest ({} missing): {RESTAGE}",
            dir.display(),
            path.display()
        )
    })?;
    let m: StageManifest = serde_json::from_str(&text).with_context(|| {
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
            m.staged.compact(),
            m.base_sha256
        );
    }
    Ok(Staged {
        dir: dir.to_path_buf(),
        base,
        fio: m.fio,
        external: m.fuse_server,
    })
}

impl Staged {
    /// The user's server of a plan with `--fuse-server LINE`: the one the
    /// guest carries (its program as found where it was staged; this host
    /// need not have it), refused if it carries another or none.
    pub fn user_server(&self, line: &str) -> Result<UserServer> {
        match &self.external {
            External::User(u) if u.line == line.trim() => Ok(u.clone()),
            _ => Err(self.made_for_another(&UserServer::describe_line(line))),
        }
    }

    /// Refuses the guest unless it was made for a plan needing `external`.
    pub fn check(&self, external: &External) -> Result<()> {
        if self.external != *external {
            return Err(self.made_for_another(&external.describe()));
        }
        Ok(())
    }

    /// The guest carries another FUSE server than the plan's (`wanted`, in words).
    fn made_for_another(&self, wanted: &str) -> anyhow::Error {
        anyhow!(
            "--staged {}: the guest was staged with FUSE server {}, this plan's is {wanted} \
             (other qemu-test flags than those it was staged for): {RESTAGE}",
            self.dir.display(),
            self.external.describe()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A staged guest as `make` leaves it, without building: `base` for the archive.
    fn staged(dir: &Path, base: &[u8], fuse_server: &External) {
        fs::create_dir_all(dir).unwrap();
        fs::write(dir.join("base.cpio"), base).unwrap();
        let m = StageManifest {
            base: "base.cpio".into(),
            base_sha256: util::sha256_hex(base),
            fio: "fio-3.33".into(),
            fuse_server: fuse_server.clone(),
            staged: "20261204T100000Z".into(),
        };
        fs::write(dir.join(MANIFEST), serde_json::to_string(&m).unwrap()).unwrap();
    }

    #[test]
    fn a_staged_guest_is_booted_as_it_was_staged_and_refused_otherwise() {
        let t = util::testdir::Dir::new("stage");
        let dir = t.path().join("guest");
        // Never staged: says so and how to stage it.
        let e = format!("{:#}", open(&dir).unwrap_err());
        assert!(
            e.contains("no staged guest") && e.contains("cargo xtask slurm"),
            "{e}"
        );
        staged(&dir, b"070701 the archive", &External::None);
        let s = open(&dir).unwrap();
        s.check(&External::None).unwrap();
        assert_eq!(
            (s.base.clone(), s.fio.as_str()),
            (dir.join("base.cpio"), "fio-3.33")
        );
        // Made for a plan without fuse-passthrough: refused for one with it.
        let e = s.check(&External::PassthroughLl).unwrap_err().to_string();
        assert!(
            e.contains("staged with FUSE server none, this plan's is libfuse's passthrough_ll"),
            "{e}"
        );
        // Changed since (a half-copied or rewritten archive): refused, never rebuilt.
        fs::write(dir.join("base.cpio"), b"070701 another").unwrap();
        let e = open(&dir).unwrap_err().to_string();
        assert!(
            e.contains("changed since it was staged 20261204T100000Z"),
            "{e}"
        );
        assert!(e.contains("a node does not build it"), "{e}");
        fs::remove_file(dir.join("base.cpio")).unwrap();
        let e = format!("{:#}", open(&dir).unwrap_err());
        assert!(e.contains("reading its initramfs"), "{e}");
        assert_eq!(
            fs::read_dir(&dir).unwrap().count(),
            1,
            "nothing was rebuilt"
        );
    }

    #[test]
    fn the_user_server_is_the_staged_one_whatever_this_host_has() {
        let t = util::testdir::Dir::new("stage-user");
        let dir = t.path().join("guest");
        let u = UserServer {
            line: "myfs -o writeback".into(),
            program: "/submit-host/bin/myfs".into(),
            args: vec!["-o".into(), "writeback".into()],
        };
        staged(&dir, b"070701 the archive", &External::User(u.clone()));
        let s = open(&dir).unwrap();
        // The staging host's program, never looked up here.
        assert_eq!(s.user_server(" myfs -o writeback ").unwrap(), u);
        s.check(&External::User(u)).unwrap();
        // Another line, or none: refused with how to stage it again.
        let e = s.user_server("myfs").unwrap_err().to_string();
        assert!(
            e.contains("staged with FUSE server `myfs -o writeback`, this plan's is `myfs`"),
            "{e}"
        );
        assert!(e.contains("submit them again"), "{e}");
        let e = s.check(&External::PassthroughLl).unwrap_err().to_string();
        assert!(e.contains("this plan's is libfuse's passthrough_ll"), "{e}");
        // Staged without a user server: a --fuse-server plan is refused.
        staged(&dir, b"070701 the archive", &External::None);
        let e = open(&dir).unwrap().user_server("myfs").unwrap_err();
        assert!(
            e.to_string()
                .contains("staged with FUSE server none, this plan's is `myfs`"),
            "{e}"
        );
    }

    #[test]
    fn a_record_of_an_older_xtask_is_refused_with_the_fix() {
        // Before it recorded the server itself, stage.json named it in words.
        let t = util::testdir::Dir::new("stage-old");
        let dir = t.path().join("guest");
        staged(&dir, b"070701 the archive", &External::None);
        let path = dir.join(MANIFEST);
        let text = fs::read_to_string(&path).unwrap();
        let old = text.replace(r#""fuse_server":"none""#, r#""fuse_server":"`myfs -f`""#);
        assert_ne!(old, text);
        fs::write(&path, old).unwrap();
        let e = format!("{:#}", open(&dir).unwrap_err());
        assert!(
            e.contains("parsing") && e.contains("submit them again"),
            "{e}"
        );
    }
}
