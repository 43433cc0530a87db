//! `cargo xtask flush-cost`: what the memcg statistics' flushes cost when many
//! memcgs write at once (issue 45, item 2): boots
//! `qemu/scenarios/memcg-flush-cost` on each variant and memcg count, and
//! prints the writers' throughput and latency beside the flushes, the rstat
//! lock's holds and spins, the CPUs' time and reclaim.

use std::{fs, path::Path, time::Duration};

use anyhow::{bail, Context, Result};
use xshell::Shell;

use super::args::guest::GuestArgs;
use crate::{
    exit,
    guest::{
        disk::{Disk, DiskKind},
        protocol::param,
        scenario::{self, Scenario},
    },
    kernel::{source::SourceArgs, variants::Variants},
    progress::{self, Event},
    report::flush_cost,
    results::flush_cost::FlushRow,
    session::flush_cost::FlushBoot,
    util,
};

/// The scenario it boots.
const SCENARIO: &str = "memcg-flush-cost";

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
        let params = self.params(&scenario::any(SCENARIO)?);
        let variants = match &self.variants[..] {
            [] => vec![Variants::repo()?.roles.reference],
            v => v.to_vec(),
        };
        let mut kernels = Vec::new();
        for v in &variants {
            kernels.push(self.guest.one_variant(sh, &self.source, v)?);
        }
        let machine = self.guest.machine()?;
        let dir = util::unique_dir(&util::target_dir().join("flush-cost"))?;
        progress::emit(Event::Note(&format!(
            "flush-cost: {} variant(s) x memcgs {:?} x {} run(s), {} s of writing each, {} vCPUs, clock {}; logs in {}",
            variants.len(),
            self.memcgs,
            self.runs,
            self.runtime,
            machine.cpus,
            machine.clock,
            dir.display()
        )));
        // Set-up and mkfs take seconds of guest time; many writers under TCG
        // run several times slower than that.
        let timeout = Duration::from_secs(600 + 20 * u64::from(self.runtime));
        let mut rows = Vec::new();
        for &memcgs in &self.memcgs {
            for run in 1..=self.runs {
                // ABBA: every other round in reverse, so that no variant
                // always boots first.
                let mut order: Vec<usize> = (0..variants.len()).collect();
                if run % 2 == 0 {
                    order.reverse();
                }
                for i in order {
                    let (b, initrd) = &kernels[i];
                    let stem = format!("{}-{memcgs}-{run}", variants[i]);
                    let boot = FlushBoot {
                        machine: &machine,
                        params: &params,
                        dir: &dir,
                        stem: &stem,
                        timeout,
                    };
                    let cost = boot.run(sh, b, initrd, memcgs)?;
                    let r = FlushRow {
                        variant: variants[i].clone(),
                        memcgs,
                        run,
                        cost,
                    };
                    println!("flush-cost: {}", flush_cost::row(&r, machine.cpus)?);
                    rows.push(r);
                }
            }
        }
        write_table(&rows, machine.cpus, &dir)?;
        let failed = rows.iter().filter(|r| r.cost.is_err()).count();
        if failed > 0 {
            bail!(exit::under_test(format!(
                "{failed} of {} boots did not finish (their rows say why; the console logs are in {})",
                rows.len(),
                dir.display()
            )));
        }
        Ok(())
    }
}

impl FlushCostCmd {
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

    /// The boots' parameters but the memcg count: the scenario's, with
    /// --memcg-max and --size over its own.
    fn params(&self, scenario: &Scenario) -> Vec<(String, String)> {
        let mut params: Vec<(String, String)> = vec![
            (param::SCENARIO.into(), SCENARIO.into()),
            (param::RUNTIME.into(), self.runtime.to_string()),
            // The window the triggers count is the writers' whole run.
            (param::RAMP.into(), "0".into()),
            (param::BS.into(), "128k".into()),
            (
                param::SIZE.into(),
                self.size.as_deref().unwrap_or(scenario.size).into(),
            ),
            (param::DISK.into(), Disk::Null { mbps: 0 }.param().into()),
        ];
        for &(k, v) in scenario.params {
            let v = match (k, &self.memcg_max) {
                (param::MEMCG_MAX, Some(max)) => max.as_str(),
                _ => v,
            };
            params.push((k.into(), v.into()));
        }
        params
    }
}

/// The table, printed and kept as `table.md` in `dir`.
fn write_table(rows: &[FlushRow], cpus: u32, dir: &Path) -> Result<()> {
    let table = flush_cost::table(rows, cpus)?;
    let path = dir.join("table.md");
    fs::write(&path, &table).with_context(|| format!("writing {}", path.display()))?;
    print!("{table}");
    println!("flush-cost: table in {}", path.display());
    Ok(())
}
