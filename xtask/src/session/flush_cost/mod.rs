//! What the memcg statistics' flushes cost when many memcgs write at once
//! (`cargo xtask flush-cost`, issue 45, item 2), made of the task's request:
//! `qemu/scenarios/memcg-flush-cost` booted ([`boot`]) on each variant and
//! memcg count, each boot's row printed as it ends, the table printed and
//! kept as `table.md` in its directory.

mod boot;

use std::{fs, path::Path, time::Duration};

use anyhow::{bail, Context, Result};
use xshell::Shell;

pub use self::boot::FlushBoot;
use crate::{
    exit,
    guest::{
        disk::Disk,
        initramfs,
        machine_spec::MachineSpec,
        protocol::param,
        qemu::Machine,
        scenario::{self, Scenario},
    },
    kernel::{build::Built, flavour::Flavour, source::SourceArgs, variants::Variants},
    progress::{self, Event},
    report::flush_cost,
    results::flush_cost::FlushRow,
    util,
};

/// The scenario it boots.
const SCENARIO: &str = "memcg-flush-cost";

/// What flush-cost is asked to measure: its flags' values.
#[derive(Debug, Clone)]
pub struct FlushCostRequest {
    /// The variants to boot; none, the reference of patches/variants.toml.
    pub variants: Vec<String>,
    /// How many memcgs write at once, one writer each: each count booted.
    pub memcgs: Vec<u32>,
    /// How long the writers write, seconds.
    pub runtime: u32,
    /// Each memcg's memory.max; none, the scenario's.
    pub memcg_max: Option<String>,
    /// Each writer's file (`NM`); none, the scenario's.
    pub size: Option<String>,
    /// Boots of each variant and memcg count.
    pub runs: u32,
    pub source: SourceArgs,
    pub machine: MachineSpec,
    /// Use the kernels on disk instead of building.
    pub no_build: bool,
    /// Parallel make jobs for the build; none, the CPUs.
    pub jobs: Option<usize>,
    pub flavour: Flavour,
}

/// The boots' fixed part: the kernels, the machine, where their files go.
struct FlushBoots<'a> {
    variants: &'a [String],
    kernels: &'a [(Built, std::path::PathBuf)],
    machine: &'a Machine,
    params: &'a [(String, String)],
    dir: &'a Path,
    timeout: Duration,
}

impl FlushCostRequest {
    /// Boots every variant and memcg count `--runs` times, `print`s each
    /// boot's row and then the table (kept as `table.md`); an error of the
    /// patch under test's class when a boot did not finish.
    pub fn run(&self, sh: &Shell, print: &mut dyn FnMut(&str)) -> Result<()> {
        let params = self.params(&scenario::any(SCENARIO)?);
        let variants = match &self.variants[..] {
            [] => vec![Variants::repo()?.roles.reference],
            v => v.to_vec(),
        };
        let mut kernels = Vec::new();
        for v in &variants {
            let how = (self.no_build, self.jobs);
            kernels.push(initramfs::one_variant(
                sh,
                &self.source,
                how,
                &self.flavour,
                v,
            )?);
        }
        let machine = self.machine.machine()?;
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
        let boots = FlushBoots {
            variants: &variants,
            kernels: &kernels,
            machine: &machine,
            params: &params,
            dir: &dir,
            // Set-up and mkfs take seconds of guest time; many writers under
            // TCG run several times slower than that.
            timeout: Duration::from_secs(600 + 20 * u64::from(self.runtime)),
        };
        let rows = self.boot_all(sh, &boots, print)?;
        write_table(&rows, machine.cpus, &dir, print)?;
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

    /// Each memcg count's runs, every variant in each, its row `print`ed.
    fn boot_all(
        &self,
        sh: &Shell,
        boots: &FlushBoots,
        print: &mut dyn FnMut(&str),
    ) -> Result<Vec<FlushRow>> {
        let mut rows = Vec::new();
        for &memcgs in &self.memcgs {
            for run in 1..=self.runs {
                // ABBA: every other round in reverse, so that no variant
                // always boots first.
                let mut order: Vec<usize> = (0..boots.variants.len()).collect();
                if run % 2 == 0 {
                    order.reverse();
                }
                for i in order {
                    let (b, initrd) = &boots.kernels[i];
                    let stem = format!("{}-{memcgs}-{run}", boots.variants[i]);
                    let boot = FlushBoot {
                        machine: boots.machine,
                        params: boots.params,
                        dir: boots.dir,
                        stem: &stem,
                        timeout: boots.timeout,
                    };
                    let cost = boot.run(sh, b, initrd, memcgs)?;
                    let r = FlushRow {
                        variant: boots.variants[i].clone(),
                        memcgs,
                        run,
                        cost,
                    };
                    print(&format!(
                        "flush-cost: {}\n",
                        flush_cost::row(&r, boots.machine.cpus)?
                    ));
                    rows.push(r);
                }
            }
        }
        Ok(rows)
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

/// The table, `print`ed and kept as `table.md` in `dir`.
fn write_table(
    rows: &[FlushRow],
    cpus: u32,
    dir: &Path,
    print: &mut dyn FnMut(&str),
) -> Result<()> {
    let table = flush_cost::table(rows, cpus)?;
    let path = dir.join("table.md");
    fs::write(&path, &table).with_context(|| format!("writing {}", path.display()))?;
    print(&table);
    print(&format!("flush-cost: table in {}\n", path.display()));
    Ok(())
}
