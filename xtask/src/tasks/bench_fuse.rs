//! `cargo xtask bench-fuse`: what the harness costs. The fixed variant's FUSE
//! throughput as `qemu-test` measures it (module, witness, sampler), against
//! the same kernel, FUSE server and fio job in a bare guest (`fuse-bare`),
//! booted alternately so that drift hits both alike.

use anyhow::{bail, Context, Result};
use xshell::Shell;

use super::args::guest::{GuestArgs, DEFAULT_INIT};
use crate::{
    analysis::stats::median,
    exit,
    guest::{
        boot, fuse_server, initramfs,
        job::{self, Job},
        plan::{Boot, Detector},
        protocol,
        run_id::RunId,
        scenario,
    },
    kernel::{
        source::SourceArgs,
        variants::{Selection, Variants},
    },
    progress::{self, Event},
    report::format::num,
    results::fio,
    util,
};

/// Measure the harness's own cost on FUSE: qemu-test's guest against a bare one.
#[derive(Debug, clap::Args)]
// `--rdinit` is hidden: both guests must run wbstall's /init (refused otherwise).
#[command(mut_arg("rdinit", |a| a.hide(true)))]
pub struct BenchFuse {
    /// The variant to boot. Default: the reference of patches/variants.toml.
    #[arg(long, value_name = "NAME")]
    pub variant: Option<String>,
    /// Boots of each guest (alternating).
    #[arg(long, default_value_t = 3, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=50))]
    pub runs: u32,
    /// fio --runtime (seconds).
    #[arg(long, default_value_t = 10, value_name = "SECS", value_parser = clap::value_parser!(u32).range(1..=3600))]
    pub runtime: u32,
    /// fio --ramp_time (seconds).
    #[arg(long, default_value_t = 2, value_name = "SECS", value_parser = clap::value_parser!(u32).range(0..=3600))]
    pub ramp: u32,
    /// The harness guest's sampler interval in ms (0: off), as qemu-test's --sample-ms.
    #[arg(long, default_value_t = 100, value_name = "MS")]
    pub sample_ms: u32,
    #[command(flatten)]
    pub source: SourceArgs,
    #[command(flatten)]
    pub guest: GuestArgs,
}

impl BenchFuse {
    pub fn run(self, sh: &Shell) -> Result<()> {
        let machine = self.guest.machine()?;
        if machine.rdinit != DEFAULT_INIT {
            bail!(exit::usage(
                "bench-fuse measures wbstall's own guest (its /init) against a bare one: \
                 drop --rdinit (debug the harness with qemu-test or shell)"
            ));
        }
        let variant = match &self.variant {
            Some(v) => v.clone(),
            None => Variants::repo()?.roles.reference,
        };
        let tc = crate::deps::check_for(sh, self.guest.flavour.no_rust)?;
        let selection = Selection {
            variants: vec![variant.clone()],
            ..Selection::default()
        };
        let kernel = self
            .guest
            .kernels(sh, &tc, &selection, &self.source)?
            .remove(0);
        let base =
            initramfs::base(sh, &fuse_server::External::None).context("building the initramfs")?;
        let initrd =
            initramfs::for_variant(&base, &kernel.label(), kernel.module_file().as_deref())?;
        let dir = util::unique_dir(&util::target_dir().join("bench-fuse"))?;
        let guests = [
            (
                scenario::by_name("fuse-strictlimit")?,
                self.sample_ms,
                "harness",
            ),
            (scenario::any("fuse-bare")?, 0, "bare"),
        ];
        let mut bw: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
        let total = 2 * self.runs as usize;
        for run in 0..self.runs {
            // ABBA: harness first on even runs, bare first on odd ones.
            let order: [usize; 2] = if run % 2 == 0 { [0, 1] } else { [1, 0] };
            for g in order {
                let (scen, sample_ms, name) = guests[g];
                let job = Job::new(scen.size, job::NUMJOBS, (self.ramp, self.runtime));
                let b = Boot {
                    sample_ms,
                    detector: Detector::choose(self.guest.detector, &kernel)?,
                    ..Boot::new(
                        kernel.clone(),
                        initrd.clone(),
                        scen,
                        run,
                        job,
                        machine.clone(),
                    )
                };
                progress::emit(Event::BootStart {
                    index: bw[0].len() + bw[1].len() + 1,
                    total,
                    run: &RunId::new(scen.name, name, run).to_string(),
                });
                let booted = boot::boot(sh, &dir, &b)?;
                let text = booted
                    .stream
                    .text(protocol::stream::FIO)
                    .with_context(|| format!("the {name} guest sent no fio result"))?;
                let r = fio::parse(&text).with_context(|| format!("the {name} guest's fio"))?;
                if r.error != 0 {
                    bail!("fio failed in the {name} guest (error {})", r.error);
                }
                bw[g].push(r.bw_mib_s);
            }
        }
        print!("{}", table(&variant, &machine.cpu_model, &bw));
        Ok(())
    }
}

/// The result: medians, ranges, and the harness's cost.
pub fn table(variant: &str, cpu_model: &str, bw: &[Vec<f64>; 2]) -> String {
    let mut out = format!("bench-fuse: {variant}, CPU model {cpu_model}\n");
    out.push_str(&format!(
        "{:<10} {:>5} {:>14} {:>10} {:>10}\n",
        "guest", "runs", "MiB/s median", "min", "max"
    ));
    for (name, v) in ["harness", "bare"].iter().zip(bw) {
        let min = v.iter().copied().fold(f64::INFINITY, f64::min);
        let max = v.iter().copied().fold(0.0, f64::max);
        out.push_str(&format!(
            "{name:<10} {:>5} {:>14} {:>10} {:>10}\n",
            v.len(),
            num(median(v)),
            num(min),
            num(max)
        ));
    }
    let (h, b) = (median(&bw[0]), median(&bw[1]));
    if b > 0.0 {
        out.push_str(&format!(
            "the harness guest reaches {:.1}% of the bare guest's throughput\n",
            h / b * 100.0
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn another_init_is_refused_before_anything_is_built() {
        let b = crate::tasks::args::try_parse_from::<BenchFuse>([
            "bench-fuse",
            "--accel",
            "tcg",
            "--rdinit",
            "/bin/cat",
        ])
        .unwrap();
        let e = b.run(&Shell::new().unwrap()).unwrap_err().to_string();
        assert!(
            e.contains("bench-fuse measures wbstall's own guest") && e.contains("drop --rdinit")
        );
    }

    #[test]
    fn the_table_says_what_share_the_harness_reaches() {
        let t = table(
            "upstream",
            "max",
            &[vec![90.0, 100.0, 95.0], vec![100.0, 98.0, 102.0]],
        );
        assert!(t.contains("harness        3           95.0"), "{t}");
        assert!(t.contains("reaches 95.0% of the bare guest's"), "{t}");
    }
}
