//! One [`Boot`] of a plan: its disk, QEMU, and the results stream it sends
//! back. Turning the stream into a record is the next stage's job.

use std::{fs, path::Path};

use anyhow::{Context, Result};
use xshell::{cmd, Shell};

use crate::{
    guest::{
        plan::Boot,
        qemu::{self, Console},
        stream::Stream,
    },
    kernel::build::Built,
    util,
};

/// What a boot left: the stream and the files it wrote (relative to the
/// results directory).
pub struct Booted {
    pub stream: Stream,
    pub wall_secs: f64,
    pub console_log: String,
    /// The serial console's text (which, unlike dmesg, cannot wrap).
    pub console: String,
    pub samples: Option<String>,
}

/// Boots `b`, with its files in `dir`.
pub fn boot(sh: &Shell, dir: &Path, b: &Boot) -> Result<Booted> {
    let name = b.name();
    check_image(&b.kernel)?;
    let console = dir.join(format!("{name}.console.log"));
    let disk = if b.scenario.disk {
        let path = dir.join(format!("{name}.ext4.img"));
        fs::remove_file(&path).ok();
        mkfs_ext4(sh, &path)?;
        Some(path)
    } else {
        None
    };
    let mut cfg = b.machine.vm(
        &b.kernel,
        b.initrd.clone(),
        b.params(),
        Console::File(console.clone()),
    );
    cfg.results = Some(dir.join(format!("{name}.results.bin")));
    cfg.disk = disk.clone();
    let out = qemu::run(sh, &cfg, b.timeout, &dir.join(format!("{name}.qemu.log")));
    if let Some(d) = &disk {
        fs::remove_file(d).ok(); // a sparse GiB per run is not worth keeping
    }
    let out = out?;
    let stream = out
        .outcome
        .map_err(|e| anyhow::anyhow!(e.explain(&console)))?;
    let samples = match stream.files.get("samples") {
        Some(bytes) => {
            let file = format!("{name}.samples.txt");
            fs::write(dir.join(&file), bytes).with_context(|| format!("writing {file}"))?;
            Some(file)
        }
        None => None,
    };
    Ok(Booted {
        stream,
        wall_secs: out.wall_secs,
        console_log: format!("{name}.console.log"),
        console: fs::read_to_string(&console)
            .with_context(|| format!("reading {}", console.display()))?,
        samples,
    })
}

/// Fails when the kernel image is no longer the one `variant.json` described
/// when the run started (rebuilt or replaced meanwhile): its results would be
/// labelled with the wrong variant.
pub fn check_image(kernel: &Built) -> Result<()> {
    let path = kernel.bzimage();
    let now = util::sha256_file(&path)
        .with_context(|| format!("hashing the `{}` kernel image", kernel.meta.variant))?;
    if now != kernel.meta.bzimage_sha256 {
        anyhow::bail!(
            "the `{}` kernel image {} changed since this run started (sha256 {} when \
             loaded, {now} now): another build replaced it. Run one build or test per \
             checkout at a time, then start this run again",
            kernel.meta.variant,
            path.display(),
            kernel.meta.bzimage_sha256
        );
    }
    Ok(())
}

/// A fresh ext4 image, made on the host with e2fsprogs. Inode tables and the
/// journal are initialised now, so no lazy-init thread writes in the guest
/// while fio measures.
pub fn mkfs_ext4(sh: &Shell, path: &Path) -> Result<()> {
    cmd!(
        sh,
        "mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 -L wbstall {path} 1G"
    )
    .quiet()
    .ignore_stdout()
    .run()
    .with_context(|| format!("creating the ext4 disk {}", path.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_kernel_replaced_since_the_run_started_is_refused_by_name() {
        let t = crate::util::testdir::Dir::new("image");
        fs::write(t.path().join("bzImage"), b"the image that was built").unwrap();
        let mut kernel = Built {
            dir: t.path().to_path_buf(),
            meta: Default::default(),
        };
        kernel.meta.variant = "v1".into();
        kernel.meta.bzimage_sha256 = util::sha256_file(&kernel.bzimage()).unwrap();
        check_image(&kernel).unwrap();
        // Another build swaps the image in.
        fs::write(t.path().join("bzImage"), b"another variant's image").unwrap();
        let e = check_image(&kernel).unwrap_err().to_string();
        assert!(
            e.contains("the `v1` kernel image") && e.contains("changed since this run started"),
            "{e}"
        );
        fs::remove_file(t.path().join("bzImage")).unwrap();
        assert!(check_image(&kernel).is_err());
    }
}
