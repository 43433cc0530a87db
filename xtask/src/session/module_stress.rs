//! `module-stress`'s boot: remove and load the wbstall module N times while
//! writers dirty a FUSE mount, then churn memcg writeback domains under it;
//! the console and the guest's streams judged ([`module_stress::stressed`]).

use std::{fs, path::Path, time::Duration};

use anyhow::{bail, Context, Result};
use xshell::Shell;

use super::single_boot::SingleBoot;
use crate::{
    analysis::module_stress::{self, Stressed},
    exit,
    guest::{
        disk::{Disk, DiskKind},
        protocol,
        qemu::{self, Console},
        stream::Stream,
    },
    kernel::variants::Variants,
    progress::{self, Event},
    report::module_stress::render,
    util,
};

/// The null_blk disk's bandwidth cap under the churn unless --disk-mbps says
/// otherwise, MiB/s: slow enough that the memcg's writers sleep in
/// balance_dirty_pages() most of the time.
const CHURN_DISK_MBPS: u32 = 16;

/// What `module-stress` is asked to run: its flags' values.
#[derive(Debug, Clone)]
pub struct ModuleStressRequest {
    /// The variant to boot; none, the baseline.
    pub variant: Option<String>,
    /// rmmod/insmod cycles.
    pub cycles: u32,
    /// Memcg churn cycles.
    pub churn: u32,
    pub guest: SingleBoot,
}

impl ModuleStressRequest {
    /// A kernel without the module, or a disk it cannot churn on.
    fn refuse_what_it_cannot_run(&self) -> Result<()> {
        if self.guest.flavour.no_rust {
            bail!(exit::usage("module-stress exercises the wbstall module, which --no-rust kernels lack: drop --no-rust"));
        }
        if self.guest.machine.disk == DiskKind::Host {
            bail!(exit::usage(
                "module-stress formats its own ext4 on the guest's null_blk disk for the memcg \
                 churn: drop --disk host"
            ));
        }
        Ok(())
    }
}

/// Boots the variant once and returns the lines module-stress prints for a
/// boot that passed.
pub fn run(sh: &Shell, r: &ModuleStressRequest) -> Result<String> {
    let variant = match &r.variant {
        Some(v) => v.clone(),
        None => Variants::repo()?.roles.baseline,
    };
    r.refuse_what_it_cannot_run()?;
    let (b, initrd) = r.guest.one_variant(sh, &variant)?;
    let dir = util::unique_dir(&util::target_dir().join("module-stress"))?;
    let console = dir.join("console.log");
    let disk = Disk::Null {
        mbps: r.guest.machine.disk_mbps.unwrap_or(CHURN_DISK_MBPS),
    };
    let params = vec![
        ("scenario".into(), "module-cycles".into()),
        (protocol::param::CYCLES.into(), r.cycles.to_string()),
        (protocol::param::CHURN.into(), r.churn.to_string()),
        (protocol::param::DISK.into(), disk.param().into()),
    ];
    let mut cfg =
        (r.guest.machine.machine()?).vm(&b, initrd, params, Console::File(console.clone()));
    cfg.results = Some(dir.join("results.bin"));
    cfg.null_blk = Some(disk);
    let debug = r.guest.flavour.debug_kernel;
    progress::emit(Event::Note(&format!(
        "module-stress: {} cycles and {} memcg churn cycles on {} ({:?}, {disk}{}); logs in {}",
        r.cycles,
        r.churn,
        b.label(),
        cfg.machine.accel,
        if debug {
            ""
        } else {
            "; not the debug kernel: no KASAN or lockdep, add --debug-kernel"
        },
        dir.display()
    )));
    // The debug kernel under TCG: a load with its KUnit suite takes about
    // 10 s of guest time, a churn cycle 20-40 s (docs/measurements.md).
    let timeout = Duration::from_secs(300 + 15 * u64::from(r.cycles) + 60 * u64::from(r.churn));
    let out = qemu::run(sh, &cfg, timeout, &dir.join("qemu.log"))?;
    // The kernel (and the module under test) crashed or hung.
    let stream =
        (out.outcome).map_err(|e| anyhow::anyhow!(exit::under_test(e.explain(&console))))?;
    let stressed = judge(r, &stream, &console)?;
    let kind = match debug {
        true => " (debug kernel: KASAN, lockdep, debug objects)",
        false => "",
    };
    let mut lines = format!(
        "module-stress: done in {:.0} s on {}{kind}\n",
        out.wall_secs,
        b.label()
    );
    for line in render(&stressed).lines() {
        lines.push_str(&format!("module-stress: {line}\n"));
    }
    Ok(lines)
}

/// The boot's streams and console judged; a check of the module that failed
/// an error of the kind that fails.
fn judge(r: &ModuleStressRequest, stream: &Stream, console: &Path) -> Result<Stressed> {
    // The console has every kernel message; dmesg's ring buffer may have wrapped
    // after a hundred loads (each prints its KUnit results).
    let console_text = fs::read_to_string(console)
        .with_context(|| format!("reading the console log {}", console.display()))?;
    // A check of the module failed.
    let failed = |e: anyhow::Error| {
        anyhow::anyhow!(exit::fails(format!(
            "{e:#}\nconsole: {}",
            console.display()
        )))
    };
    module_stress::stressed(stream, r.cycles, r.churn, &console_text).map_err(failed)
}
