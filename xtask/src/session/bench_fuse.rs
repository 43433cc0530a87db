//! `bench-fuse`'s boots: the fixed variant's FUSE throughput as `qemu-test`
//! measures it (module, witness, sampler), against the same kernel, FUSE
//! server and fio job in a bare guest (`fuse-bare`), booted alternately so
//! that drift hits both alike.

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use xshell::Shell;

use super::single_boot::{only, SingleBoot};
use crate::{
    analysis::bench_fuse::harness_cost,
    exit,
    guest::{
        boot, fuse_server, initramfs,
        job::{self, Job},
        machine_spec::DEFAULT_INIT,
        plan::{Boot, Detector},
        protocol,
        qemu::Machine,
        run_id::RunId,
        scenario::{self, Scenario},
    },
    kernel::{build::Built, variants::Variants},
    progress::{self, Event},
    report::bench_fuse::table,
    results::fio,
    util,
};

/// What `bench-fuse` is asked to measure: its flags' values.
#[derive(Debug, Clone)]
pub struct BenchFuseRequest {
    /// The variant to boot; none, the reference.
    pub variant: Option<String>,
    /// Boots of each guest.
    pub runs: u32,
    /// fio's runtime and ramp time, seconds.
    pub runtime: u32,
    pub ramp: u32,
    /// The harness guest's sampler interval in ms (0: off).
    pub sample_ms: u32,
    pub guest: SingleBoot,
}

/// Boots both guests `runs` times each and returns the table of their
/// throughput.
pub fn run(sh: &Shell, r: &BenchFuseRequest) -> Result<String> {
    let machine = r.guest.machine.machine()?;
    if machine.rdinit != DEFAULT_INIT {
        bail!(exit::usage(
            "bench-fuse measures wbstall's own guest (its /init) against a bare one: \
             drop --rdinit (debug the harness with qemu-test or shell)"
        ));
    }
    let variant = match &r.variant {
        Some(v) => v.clone(),
        None => Variants::repo()?.roles.reference,
    };
    let tc = crate::deps::check_for(sh, r.guest.flavour.no_rust)?;
    let kernel = r.guest.kernels(sh, &tc, &only(&variant))?.remove(0);
    let base =
        initramfs::base(sh, &fuse_server::External::None).context("building the initramfs")?;
    let initrd = initramfs::for_variant(&base, &kernel.label(), kernel.module_file().as_deref())?;
    let dir = util::unique_dir(&util::target_dir().join("bench-fuse"))?;
    let guests = [
        (
            scenario::by_name("fuse-strictlimit")?,
            r.sample_ms,
            "harness",
        ),
        (scenario::any("fuse-bare")?, 0, "bare"),
    ];
    let bench = Bench {
        r,
        kernel,
        initrd,
        machine,
        dir,
    };
    let bw = bench.alternate(sh, guests)?;
    Ok(table(&harness_cost(
        &variant,
        &bench.machine.cpu_model,
        &bw,
    )))
}

/// The kernel, initramfs, machine and directory both guests boot with.
struct Bench<'a> {
    r: &'a BenchFuseRequest,
    kernel: Built,
    initrd: PathBuf,
    machine: Machine,
    dir: PathBuf,
}

impl Bench<'_> {
    /// Each guest's fio bandwidths (MiB/s), the guests booted in turn.
    fn alternate(&self, sh: &Shell, guests: [(Scenario, u32, &str); 2]) -> Result<[Vec<f64>; 2]> {
        let r = self.r;
        let mut bw: [Vec<f64>; 2] = [Vec::new(), Vec::new()];
        let total = 2 * r.runs as usize;
        for run in 0..r.runs {
            // ABBA: harness first on even runs, bare first on odd ones.
            let order: [usize; 2] = if run % 2 == 0 { [0, 1] } else { [1, 0] };
            for g in order {
                let (scen, sample_ms, name) = guests[g];
                let job = Job::new(scen.size, job::NUMJOBS, (r.ramp, r.runtime));
                let b = Boot {
                    sample_ms,
                    detector: Detector::choose(r.guest.detector, &self.kernel)?,
                    ..Boot::new(
                        self.kernel.clone(),
                        self.initrd.clone(),
                        scen,
                        run,
                        job,
                        self.machine.clone(),
                    )
                };
                progress::emit(Event::BootStart {
                    index: bw[0].len() + bw[1].len() + 1,
                    total,
                    run: &RunId::new(scen.name, name, run).to_string(),
                });
                bw[g].push(self.fio_bandwidth(sh, &b, name)?);
            }
        }
        Ok(bw)
    }

    /// Boots `b` and reads the bandwidth of its fio.
    fn fio_bandwidth(&self, sh: &Shell, b: &Boot, name: &str) -> Result<f64> {
        let booted = boot::boot(sh, &self.dir, b)?;
        let text = booted
            .stream
            .text(protocol::stream::FIO)
            .with_context(|| format!("the {name} guest sent no fio result"))?;
        let r = fio::parse(&text).with_context(|| format!("the {name} guest's fio"))?;
        if r.error != 0 {
            bail!("fio failed in the {name} guest (error {})", r.error);
        }
        Ok(r.bw_mib_s)
    }
}
