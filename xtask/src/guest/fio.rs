//! The guest's fio: the host's own fio version, built static from its source
//! (from the archive the host's packages come from: Debian's, or Ubuntu's) with none of its optional engines (rbd, rados, gfapi, rdma, nbd,
//! pmem, ...). Debian's binary links 70 libraries (71 MB: ceph, ICU, gnutls),
//! which the kernel copies out of the initramfs at every boot (2.9 s of guest
//! time) and the loader relocates at every fio start; the jobs use the psync
//! engine only. Built once per version, kept in the cache.

use std::{
    fs,
    path::{Path, PathBuf},
};

use anyhow::{bail, Context, Result};
use xshell::{cmd, Shell};

use crate::{
    kernel::apt::{self, PrivateApt},
    progress::{self, Event},
    util,
};

/// fio's configure switches: a static binary, for any x86-64 CPU (the guest's
/// is `qemu64`), without the engines that need other libraries. Part of the
/// cache key: changing them builds again.
const CONFIGURE: &[&str] = &[
    "--build-static",
    "--disable-native",
    "--disable-numa",
    "--disable-rdma",
    "--disable-rados",
    "--disable-rbd",
    "--disable-http",
    "--disable-gfapi",
    "--disable-libnfs",
    "--disable-pmem",
    "--disable-xnvme",
    "--disable-libzbc",
    "--disable-tcmalloc",
    "--disable-dfs",
    "--disable-lex",
];

/// The Debian version of the host's fio package (e.g. `3.33-3`): the source
/// the guest's fio is built from.
fn host_version(sh: &Shell) -> Result<String> {
    let format = "${Version}";
    let v = cmd!(sh, "dpkg-query -W -f={format} fio")
        .quiet()
        .read()
        .context("asking dpkg for the host's fio version: apt-get install fio")?;
    let v = v.trim().to_string();
    if v.is_empty() {
        bail!("dpkg knows no installed fio: apt-get install fio");
    }
    Ok(v)
}

/// Where the build of `version` with [`CONFIGURE`] is kept.
fn cached(cache: &Path, version: &str) -> PathBuf {
    let key = util::sha256_hex(format!("{version}\n{}", CONFIGURE.join(" ")).as_bytes());
    cache
        .join("fio")
        .join(format!("{}-{}", util::sanitize(version), &key[..12]))
        .join("fio")
}

/// The static fio for the guest: from the cache, else downloaded and built
/// (about a minute of CPU).
pub fn guest_fio(sh: &Shell) -> Result<PathBuf> {
    let version = host_version(sh)?;
    let cache = util::cache_dir()?;
    let bin = cached(&cache, &version);
    if bin.is_file() {
        return Ok(bin);
    }
    progress::emit(Event::Note(&format!(
        "building fio {version} static for the guest (once; kept in {})",
        bin.parent().unwrap_or(&cache).display()
    )));
    // Names of this process alone: the cache may be shared by the nodes of
    // a cluster, each building at once.
    let work = cache
        .join("fio")
        .join(format!(".{}", util::unique_name("build")));
    let built = build(sh, &cache, &version, &work);
    let out = built.and_then(|b| {
        let dir = bin.parent().context("the cache path has a parent")?;
        fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
        let tmp = dir.join(format!(".{}.tmp", util::unique_name("fio")));
        fs::copy(&b, &tmp).with_context(|| format!("copying {}", b.display()))?;
        fs::rename(&tmp, &bin).with_context(|| format!("writing {}", bin.display()))?;
        Ok(bin)
    });
    // The sources and objects are not kept, whatever happened.
    let _ = fs::remove_dir_all(&work);
    out
}

/// Downloads the source of fio `version` into `work`, unpacks it with
/// Debian's patches, and builds a stripped static `fio`; its path.
fn build(sh: &Shell, cache: &Path, version: &str, work: &Path) -> Result<PathBuf> {
    fs::create_dir_all(work).with_context(|| format!("creating {}", work.display()))?;
    let apt = PrivateApt::new(cache.join("apt-src"), apt::host_archive_here()?);
    let suites: Vec<&str> = apt.archive.suites.iter().map(String::as_str).collect();
    apt.source(sh, &format!("fio={version}"), &suites, work)
        .context("the guest's fio is built from the source of the host's fio version")?;
    let dsc = fs::read_dir(work)
        .with_context(|| format!("listing {}", work.display()))?
        .flatten()
        .map(|e| e.path())
        .find(|p| p.extension().is_some_and(|x| x == "dsc"))
        .with_context(|| format!("apt-get source left no .dsc in {}", work.display()))?;
    let src = work.join("src");
    cmd!(sh, "dpkg-source --no-check -x {dsc} {src}")
        .quiet()
        .ignore_stdout()
        .run()
        .context("unpacking fio's source with dpkg-source (apt-get install dpkg-dev)")?;
    let _d = sh.push_dir(&src);
    let configure = CONFIGURE;
    cmd!(sh, "./configure {configure...}")
        .quiet()
        .ignore_stdout()
        .run()
        .context("configuring fio (needs gcc and make: apt-get install build-essential)")?;
    let jobs = std::thread::available_parallelism().map_or(1, |n| n.get());
    let jobs = format!("-j{jobs}");
    cmd!(sh, "make {jobs} fio")
        .quiet()
        .ignore_stdout()
        .run()
        .context("building fio")?;
    let bin = src.join("fio");
    cmd!(sh, "strip {bin}")
        .quiet()
        .run()
        .context("stripping fio")?;
    util::require_static(&bin)?;
    Ok(bin)
}
