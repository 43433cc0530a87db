//! `cargo xtask module-stress`: remove and load the wbstall module N times
//! while writers dirty a FUSE mount, then churn memcg writeback domains under
//! it (cgroups made, written through by throttled writers, removed while they
//! sleep and are killed); any kernel warning fails it. On the debug kernel
//! (`--debug-kernel`: KASAN, lockdep, debug objects) that includes a use of a
//! freed wb.

use std::{fs, time::Duration};

use anyhow::{bail, Context, Result};
use xshell::Shell;

use super::args::guest::GuestArgs;
use crate::{
    analysis::module_stress,
    exit,
    guest::{
        disk::{Disk, DiskKind},
        protocol,
        qemu::{self, Console},
    },
    kernel::{source::SourceArgs, variants::Variants},
    progress::{self, Event},
    report::module_stress::render,
    util,
};

/// The null_blk disk's bandwidth cap under the churn unless --disk-mbps says
/// otherwise, MiB/s: slow enough that the memcg's writers sleep in
/// balance_dirty_pages() most of the time.
const CHURN_DISK_MBPS: u32 = 16;

/// Remove and load the wbstall module N times while writers dirty a FUSE
/// mount, then make, write through and remove memcg writeback domains under
/// it M times; fail on any kernel warning. Use --debug-kernel (KASAN, lockdep,
/// debug objects) for it to catch a use after free.
#[derive(Debug, clap::Args)]
// `--no-rust` is hidden: its kernels lack the module this task exercises
// (refused, said why).
#[command(mut_arg("no_rust", |a| a.hide(true)))]
pub struct ModuleStress {
    /// The variant to boot. Default: the baseline of patches/variants.toml.
    #[arg(long, value_name = "NAME")]
    pub variant: Option<String>,
    /// rmmod/insmod cycles.
    #[arg(long, default_value_t = 100, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=100000))]
    pub cycles: u32,
    /// Memcg churn cycles: a cgroup (memory.max=16M) made, two buffered
    /// writers throttled in it on ext4 over the null_blk disk, the cgroup
    /// removed while one sleeps in balance_dirty_pages() (the writers killed
    /// with SIGKILL, or moved out first on every other cycle), the module
    /// reloaded under them every 4th cycle.
    #[arg(long, default_value_t = 20, value_name = "M", value_parser = clap::value_parser!(u32).range(1..=10000))]
    pub churn: u32,
    #[command(flatten)]
    pub source: SourceArgs,
    #[command(flatten)]
    pub guest: GuestArgs,
}

impl ModuleStress {
    /// A kernel without the module, or a disk it cannot churn on.
    fn refuse_what_it_cannot_run(&self) -> Result<()> {
        if self.guest.flavour.no_rust {
            bail!(exit::usage("module-stress exercises the wbstall module, which --no-rust kernels lack: drop --no-rust"));
        }
        if self.guest.disk == DiskKind::Host {
            bail!(exit::usage(
                "module-stress formats its own ext4 on the guest's null_blk disk for the memcg \
                 churn: drop --disk host"
            ));
        }
        Ok(())
    }

    pub fn run(self, sh: &Shell) -> Result<()> {
        let variant = match &self.variant {
            Some(v) => v.clone(),
            None => Variants::repo()?.roles.baseline,
        };
        self.refuse_what_it_cannot_run()?;
        let (b, initrd) = self.guest.one_variant(sh, &self.source, &variant)?;
        let dir = util::unique_dir(&util::target_dir().join("module-stress"))?;
        let console = dir.join("console.log");
        let disk = Disk::Null {
            mbps: self.guest.disk_mbps.unwrap_or(CHURN_DISK_MBPS),
        };
        let params = vec![
            ("scenario".into(), "module-cycles".into()),
            (protocol::param::CYCLES.into(), self.cycles.to_string()),
            (protocol::param::CHURN.into(), self.churn.to_string()),
            (protocol::param::DISK.into(), disk.param().into()),
        ];
        let mut cfg = self
            .guest
            .machine()?
            .vm(&b, initrd, params, Console::File(console.clone()));
        cfg.results = Some(dir.join("results.bin"));
        cfg.null_blk = Some(disk);
        let debug = self.guest.flavour.debug_kernel;
        progress::emit(Event::Note(&format!(
            "module-stress: {} cycles and {} memcg churn cycles on {} ({:?}, {disk}{}); logs in {}",
            self.cycles,
            self.churn,
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
        let timeout =
            Duration::from_secs(300 + 15 * u64::from(self.cycles) + 60 * u64::from(self.churn));
        let out = qemu::run(sh, &cfg, timeout, &dir.join("qemu.log"))?;
        // The kernel (and the module under test) crashed or hung.
        let stream =
            (out.outcome).map_err(|e| anyhow::anyhow!(exit::under_test(e.explain(&console))))?;
        // The console has every kernel message; dmesg's ring buffer may have wrapped
        // after a hundred loads (each prints its KUnit results).
        let console_text = fs::read_to_string(&console)
            .with_context(|| format!("reading the console log {}", console.display()))?;
        // A check of the module failed.
        let failed = |e: anyhow::Error| {
            anyhow::anyhow!(exit::fails(format!(
                "{e:#}\nconsole: {}",
                console.display()
            )))
        };
        let stressed = module_stress::stressed(&stream, self.cycles, self.churn, &console_text)
            .map_err(failed)?;
        let kind = match debug {
            true => " (debug kernel: KASAN, lockdep, debug objects)",
            false => "",
        };
        println!(
            "module-stress: done in {:.0} s on {}{kind}",
            out.wall_secs,
            b.label()
        );
        for line in render(&stressed).lines() {
            println!("module-stress: {line}");
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    #[test]
    fn no_rust_is_refused_naming_the_fix() {
        // Hidden from --help, and refused before anything is built.
        let m = crate::tasks::args::try_parse_from::<super::ModuleStress>([
            "module-stress",
            "--no-rust",
        ])
        .unwrap();
        let e = m
            .run(&xshell::Shell::new().unwrap())
            .unwrap_err()
            .to_string();
        assert!(e.contains("lack: drop --no-rust"), "{e}");
        let m = crate::tasks::args::try_parse_from::<super::ModuleStress>([
            "module-stress",
            "--disk",
            "host",
        ])
        .unwrap();
        let e = m
            .run(&xshell::Shell::new().unwrap())
            .unwrap_err()
            .to_string();
        assert!(e.contains("drop --disk host"), "{e}");
    }
}
