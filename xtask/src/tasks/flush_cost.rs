//! `cargo xtask flush-cost`: what the memcg statistics' flushes cost when many
//! memcgs write at once (issue 45, item 2): boots
//! `qemu/scenarios/memcg-flush-cost` on each variant and memcg count, and
//! prints the writers' throughput and latency beside the flushes, the rstat
//! lock's holds and spins, the CPUs' time and reclaim. Its flags make a
//! [`FlushCostRequest`]; the session stage boots it
//! ([`crate::session::flush_cost`]).

use anyhow::{bail, Result};
use xshell::Shell;

use super::args::guest::GuestArgs;
use crate::{
    exit, guest::disk::DiskKind, kernel::source::SourceArgs, session::flush_cost::FlushCostRequest,
};

/// What the memcg statistics' flushes cost with many memcgs writing at once.
#[derive(Debug, clap::Args)]
pub struct FlushCostCmd {
    /// A variant to boot (repeatable). Default: the reference of
    /// patches/variants.toml.
    #[arg(long = "variant", value_name = "NAME")]
    pub variants: Vec<String>,
    /// How many memcgs write at once, one writer each (repeatable).
    #[arg(long = "memcgs", value_name = "N", default_values_t = [8], value_parser = clap::value_parser!(u32).range(1..=256))]
    pub memcgs: Vec<u32>,
    /// How long the writers write, seconds.
    #[arg(long, default_value_t = 30, value_name = "SECS", value_parser = clap::value_parser!(u32).range(5..=3600))]
    pub runtime: u32,
    /// Each memcg's memory.max (its dirty limits follow from it). Default:
    /// the scenario's.
    #[arg(long, value_name = "SIZE")]
    pub memcg_max: Option<String>,
    /// Each writer's file, streamed (MiB: `NM`). Default: the scenario's.
    #[arg(long, value_name = "SIZE")]
    pub size: Option<String>,
    /// Boots of each variant and memcg count, interleaved across variants.
    #[arg(long, default_value_t = 1, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=20))]
    pub runs: u32,
    #[command(flatten)]
    pub source: SourceArgs,
    #[command(flatten)]
    pub guest: GuestArgs,
}

impl FlushCostCmd {
    pub fn run(self, sh: &Shell) -> Result<()> {
        self.check()?;
        self.request().run(sh, &mut |s| print!("{s}"))
    }

    /// These flags' values, for the session stage.
    fn request(self) -> FlushCostRequest {
        FlushCostRequest {
            machine: self.guest.machine_spec(),
            no_build: self.guest.no_build,
            jobs: self.guest.jobs,
            flavour: self.guest.flavour,
            variants: self.variants,
            memcgs: self.memcgs,
            runtime: self.runtime,
            memcg_max: self.memcg_max,
            size: self.size,
            runs: self.runs,
            source: self.source,
        }
    }

    /// The flags the guest cannot take.
    fn check(&self) -> Result<()> {
        if self.guest.disk == DiskKind::Host {
            bail!(exit::usage(
                "flush-cost makes its own timed null_blk disk in the guest: drop --disk host"
            ));
        }
        if let Some(size) = &self.size {
            let mib = size
                .strip_suffix('M')
                .filter(|n| n.parse::<u32>().is_ok_and(|n| n > 0));
            if mib.is_none() {
                bail!(exit::usage(format!(
                    "--size {size}: the writers' files are sized in MiB (e.g. 48M), which the guest also sizes its disk by"
                )));
            }
        }
        Ok(())
    }
}
