//! `cargo xtask shell`: boot one variant with an interactive shell.

use std::path::PathBuf;

use anyhow::Result;
use xshell::Shell;

use super::args::guest::GuestArgs;
use crate::{
    guest::{
        boot::mkfs_ext4,
        plan::Detector,
        qemu::{self, Console},
    },
    kernel::source::SourceArgs,
    progress::{self, Event},
};

/// Boot one variant with an interactive shell on the terminal (for debugging).
#[derive(Debug, clap::Args)]
pub struct ShellCmd {
    /// The variant to boot.
    #[arg(long, value_name = "NAME")]
    pub variant: String,
    #[command(flatten)]
    pub source: SourceArgs,
    #[command(flatten)]
    pub guest: GuestArgs,
    /// Attach this ext4 image on virtio-blk as /dev/vda (made if missing),
    /// as the disk scenarios do with --disk host. With --disk null (the
    /// default) the guest also has the null_blk disk, /dev/nullb0, blank.
    #[arg(long, value_name = "PATH")]
    pub disk_image: Option<PathBuf>,
}

impl ShellCmd {
    pub fn run(self, sh: &Shell) -> Result<()> {
        let (b, initrd) = self.guest.one_variant(sh, &self.source, &self.variant)?;
        // A kernel without the module (--no-rust) boots without loading it.
        let detector = Detector::choose(self.guest.detector, &b)?;
        let params = vec![
            ("scenario".into(), "shell".into()),
            ("detector".into(), detector.name().into()),
        ];
        let machine = self.guest.machine()?;
        let mut cfg = machine.vm(&b, initrd, params, Console::Stdio);
        cfg.null_blk = Some(machine.disk);
        if let Some(disk) = self.disk_image {
            if !disk.exists() {
                mkfs_ext4(sh, &disk)?;
            }
            cfg.disk = Some(disk);
        }
        progress::emit(Event::Note(&format!(
            "shell: booting {} ({:?}); Ctrl-A X quits QEMU",
            b.meta.variant, cfg.machine.accel
        )));
        qemu::interactive(sh, &cfg)
    }
}
