//! `cargo xtask module-stress`: remove and load the wbstall module N times
//! while writers dirty a FUSE mount, then churn memcg writeback domains under
//! it (cgroups made, written through by throttled writers, removed while they
//! sleep and are killed); any kernel warning fails it. On the debug kernel
//! (`--debug-kernel`: KASAN, lockdep, debug objects) that includes a use of a
//! freed wb.

use anyhow::Result;
use xshell::Shell;

use super::args::guest::GuestArgs;
use crate::{
    kernel::source::SourceArgs,
    session::module_stress::{self, ModuleStressRequest},
};

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
    pub fn run(self, sh: &Shell) -> Result<()> {
        let request = ModuleStressRequest {
            variant: self.variant,
            cycles: self.cycles,
            churn: self.churn,
            guest: self.guest.single_boot(&self.source),
        };
        print!("{}", module_stress::run(sh, &request)?);
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
