//! `cargo xtask flush-cost`: what the memcg statistics' flushes cost when many
//! memcgs write at once (issue 45, item 2): boots
//! `qemu/scenarios/memcg-flush-cost` on each variant and memcg count, and
//! prints the writers' throughput and latency beside the flushes, the rstat
//! lock's holds and spins, the CPUs' time and reclaim.

use std::{fmt::Write as _, fs, path::Path, time::Duration};

use anyhow::{bail, Context, Result};
use xshell::Shell;

use super::args::guest::GuestArgs;
use crate::{
    exit,
    guest::{
        disk::{Disk, DiskKind},
        protocol::{param, stream},
        qemu::{self, Console},
        scenario::{self, Scenario},
    },
    kernel::{build::Built, source::SourceArgs, variants::Variants},
    progress::{self, Event},
    results::flush_cost::FlushCost,
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

/// One boot's row: what it measured, or why the guest did not finish (a
/// writer's memcg out of memory, a crash), which is a result too.
struct FlushRow {
    variant: String,
    memcgs: u32,
    run: u32,
    cost: Result<FlushCost, String>,
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
                    println!("flush-cost: {}", row(&r, machine.cpus)?);
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

/// One boot of the scenario.
struct FlushBoot<'a> {
    machine: &'a qemu::Machine,
    /// Every parameter but the memcg count.
    params: &'a [(String, String)],
    dir: &'a Path,
    /// `<variant>-<memcgs>-<run>`: the stem of its files.
    stem: &'a str,
    /// When QEMU is killed as hung.
    timeout: Duration,
}

impl FlushBoot<'_> {
    fn run(
        &self,
        sh: &Shell,
        b: &Built,
        initrd: &Path,
        memcgs: u32,
    ) -> Result<Result<FlushCost, String>> {
        let (dir, stem) = (self.dir, self.stem);
        let console = dir.join(format!("{stem}.console.log"));
        let mut params = self.params.to_vec();
        params.push((param::MEMCGS.into(), memcgs.to_string()));
        let mut cfg = (self.machine).vm(
            b,
            initrd.to_path_buf(),
            params,
            Console::File(console.clone()),
        );
        cfg.results = Some(dir.join(format!("{stem}.results.bin")));
        progress::emit(Event::Note(&format!(
            "flush-cost: booting {} with {memcgs} memcgs ({stem})",
            b.label()
        )));
        let out = qemu::run(
            sh,
            &cfg,
            self.timeout,
            &dir.join(format!("{stem}.qemu.log")),
        )?;
        let st = match out.outcome {
            Ok(st) => st,
            Err(e) => return Ok(Err(e.explain(&console))),
        };
        let text = |name: &str| {
            st.text(name).with_context(|| {
                format!("the guest sent no {name} (console: {})", console.display())
            })
        };
        FlushCost::parse(
            &text(stream::FLUSH_COST_HISTS)?,
            &text(stream::FLUSH_COST_FIO)?,
            &text(stream::FLUSH_COST_CPU)?,
            &text(stream::VMSTAT_BEFORE)?,
            &text(stream::VMSTAT)?,
        )
        .map(Ok)
        .with_context(|| format!("reading {stem}'s streams"))
    }
}

/// The table's header.
const HEADER: &str = "| variant | memcgs | vCPUs | run | MiB/s | p99 ms (worst writer) | max ms | flushes/s (checks/s) | rstat lock held ms/s | contended/s | spun ms/s | busy % (sys %) | pgscan/s | dropped |\n\
                      |---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";

/// The table, printed and kept as `table.md` in `dir`.
fn write_table(rows: &[FlushRow], cpus: u32, dir: &Path) -> Result<()> {
    let mut table = String::from(HEADER);
    for r in rows {
        writeln!(table, "{}", row(r, cpus)?)?;
    }
    let path = dir.join("table.md");
    fs::write(&path, &table).with_context(|| format!("writing {}", path.display()))?;
    print!("{table}");
    println!("flush-cost: table in {}", path.display());
    Ok(())
}

/// A boot's row of the table.
fn row(r: &FlushRow, cpus: u32) -> Result<String> {
    let head = format!("| {} | {} | {cpus} | {} |", r.variant, r.memcgs, r.run);
    let c = match &r.cost {
        Ok(c) => c,
        // The guest's own words, on one line: what ended it.
        Err(why) => {
            let first = why.lines().next().unwrap_or_default();
            let first = first
                .split(" Console log:")
                .next()
                .unwrap_or_default()
                .replace('|', "/");
            return Ok(format!("{head} did not finish: {first} ||||||||||"));
        }
    };
    Ok(format!(
        "{head} {:.1} | {:.0} | {:.0} | {:.1} ({:.1}) | {:.3} | {:.1} | {:.3} | {:.1} ({:.1}) | {:.0} | {} |",
        c.mib_s(),
        c.p99_ms()?,
        c.max_ms(),
        c.per_s(c.flushes),
        c.per_s(c.checks),
        c.ms_per_s(c.hold_ns),
        c.per_s(c.contended),
        c.ms_per_s(c.spin_ns),
        100.0 * c.busy_share,
        100.0 * c.sys_share,
        c.pgscan as f64 / c.secs,
        c.dropped,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_row_has_the_header_s_columns_a_failed_boot_s_too() {
        let f = |n: &str| {
            fs::read_to_string(
                util::project_root()
                    .join("xtask/fixtures/flush-cost")
                    .join(n),
            )
            .unwrap()
        };
        let cost = FlushCost::parse(
            &f("hists.txt"),
            &f("fio.json"),
            &f("cpu.txt"),
            &f("vmstat-before.txt"),
            &f("vmstat.txt"),
        );
        let cols = |line: &str| line.matches('|').count();
        let header = HEADER.lines().next().unwrap();
        let ok = FlushRow {
            variant: "memcg-flush".into(),
            memcgs: 8,
            run: 1,
            cost: Ok(cost.unwrap()),
        };
        let line = row(&ok, 4).unwrap();
        assert_eq!(cols(&line), cols(header), "{line}");
        assert!(
            line.starts_with("| memcg-flush | 8 | 4 | 1 | 26.1 | 518 |"),
            "{line}"
        );
        let oom = FlushRow {
            variant: "upstream".into(),
            memcgs: 8,
            run: 2,
            cost: Err("oom: the guest ran out of memory: the OOM killer killed process 261 (fio) | x\nConsole log: y".into()),
        };
        let line = row(&oom, 4).unwrap();
        assert_eq!(cols(&line), cols(header), "{line}");
        assert!(
            line.contains("did not finish: oom: the guest ran out of memory")
                && !line.contains("Console"),
            "{line}"
        );
    }
}
