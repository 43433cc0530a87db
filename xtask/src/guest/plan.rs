//! The plan of a session: every decision about every boot (kernel, scenario,
//! run index, fio job, verify pass, machine, timeout) made once, up front, in
//! the order the boots will run. Booting takes a [`Boot`], nothing else.

use std::{
    collections::{BTreeMap, BTreeSet},
    path::PathBuf,
    time::Duration,
};

use anyhow::{bail, Result};
use serde::{Deserialize, Serialize};

use crate::{
    exit,
    guest::{
        disk::Disk,
        job::Job,
        protocol::param,
        qemu::{Clock, Machine, DEFAULT_ICOUNT_SHIFT},
        scenario::Scenario,
    },
    kernel::build::Built,
};

/// What classes the writers' throttle sleeps: the wbstall module (its probes
/// see `writeback_in_progress()` itself), or the kernel's own writeback trace
/// events (`results::tracefs`), for kernels without the module. Records made
/// before the choice existed were the module's.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize, clap::ValueEnum)]
#[serde(rename_all = "lowercase")]
pub enum Detector {
    #[default]
    Module,
    Tracefs,
}

impl Detector {
    pub fn name(self) -> &'static str {
        match self {
            Detector::Module => "module",
            Detector::Tracefs => "tracefs",
        }
    }

    /// The detector for boots of `kernel`: the one asked for, else the module
    /// when the kernel has one, else tracefs. Asking for the module of a
    /// kernel built without one is an error.
    pub fn choose(asked: Option<Detector>, kernel: &Built) -> Result<Detector> {
        let has_module = !kernel.meta.module_sha256.is_empty();
        match asked {
            Some(Detector::Module) if !has_module => bail!(exit::usage(format!(
                "--detector module: the `{}` kernel has no wbstall module (built with \
                 --no-rust?): use --detector tracefs, or build it with Rust",
                kernel.meta.variant
            ))),
            Some(d) => Ok(d),
            None if has_module => Ok(Detector::Module),
            None => Ok(Detector::Tracefs),
        }
    }
}

/// The detector of each kernel of `built` (by label), `asked` or chosen
/// ([`Detector::choose`]); said when it was not asked for.
pub fn detectors(asked: Option<Detector>, built: &[Built]) -> Result<BTreeMap<String, Detector>> {
    let mut out = BTreeMap::new();
    for b in built {
        let d = Detector::choose(asked, b)?;
        if asked.is_none() && d == Detector::Tracefs {
            crate::progress::emit(crate::progress::Event::Note(&format!(
                "{}: no wbstall module in this kernel: the tracefs detector classes its sleeps",
                b.label()
            )));
        }
        out.insert(b.label(), d);
    }
    Ok(out)
}

/// Sets each boot's detector from `detectors` (by kernel label).
pub fn with_detectors(mut plan: Plan, detectors: &BTreeMap<String, Detector>) -> Plan {
    for b in &mut plan.boots {
        b.detector = detectors
            .get(&b.kernel.label())
            .copied()
            .unwrap_or_default();
    }
    plan
}

/// One boot, fully decided.
#[derive(Debug, Clone)]
pub struct Boot {
    /// The kernel (an A/A control is its variant's kernel under its own name).
    pub kernel: Built,
    pub initrd: PathBuf,
    pub scenario: Scenario,
    /// 0-based repetition of this cell.
    pub run: u32,
    pub job: Job,
    /// Also prove that the bytes go through (fio verify on a data-keeping mount).
    pub verify: bool,
    /// Interval of the in-guest sampler in ms (0: off).
    pub sample_ms: u32,
    /// After this the guest is declared hung and killed.
    pub timeout: Duration,
    pub machine: Machine,
    pub detector: Detector,
    /// Where in the kernel's timer cycles the measurement starts (scenarios
    /// with `[phase]`): the guest waits for it.
    pub phase: Option<CycleOffset>,
}

/// A measurement's start, as an offset into a cycle of the guest's clock
/// (`/proc/uptime`): the guest waits until uptime mod `cycle_ms` is
/// `offset_ms`, then starts.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct CycleOffset {
    pub cycle_ms: u32,
    pub offset_ms: u32,
}

/// Step of the offsets [`spread`] chooses from: the guest's uptime has 10 ms
/// resolution (`/proc/uptime`).
pub const PHASE_STEP_MS: u32 = 10;

/// Where run `run` of a cell planned with `runs` starts, as a share of the
/// cycle: the first `runs` at `k / runs`; each later one (a run added to
/// decide a cost, or an A/A control's, see [`aa_run`]) halfway into a gap
/// the earlier ones left, the gaps of each round taken in van der Corput
/// order (1/2, 1/4, 3/4, ...), so that any number of runs stays spread.
pub fn fraction(run: u32, runs: u32) -> f64 {
    let n = runs.max(1);
    if run < n {
        return f64::from(run) / f64::from(n);
    }
    let later = run - n;
    let (round, gap) = (later / n + 1, later % n);
    (f64::from(gap) + van_der_corput(round)) / f64::from(n)
}

/// The base-2 van der Corput sequence: 1 -> 1/2, 2 -> 1/4, 3 -> 3/4, ...
fn van_der_corput(mut i: u32) -> f64 {
    let (mut x, mut f) = (0.0, 0.5);
    while i > 0 {
        if i & 1 == 1 {
            x += f;
        }
        i >>= 1;
        f /= 2.0;
    }
    x
}

/// The run whose start an A/A control's run `run` takes, in a cell of
/// `runs`: the gaps between the control's own kernel's starts (`runs +
/// run`). Booted at the same starts, the same kernel gives the same run to
/// 0.1 MiB/s, which says nothing of the noise a patch meets; at the gaps it
/// measures what the floor predicts.
pub fn aa_run(run: u32, runs: u32) -> u32 {
    runs.max(1) + run
}

/// Run `run` of `runs`: the offset into the common cycle of `cycles` whose
/// phase in every one of them is closest to [`fraction`] of it (the
/// largest of the circular distances, as a share of each period, is
/// smallest; ties: the earliest). So a cell's runs are spread over each
/// timer's period, and the same run has the same phase on every variant.
pub fn spread(run: u32, runs: u32, cycles: &crate::guest::scenario::PhaseCycles) -> CycleOffset {
    let cycle_ms = cycles.cycle_ms();
    let want = fraction(run, runs);
    let miss = |x: u32| -> f64 {
        cycles
            .cycles_ms
            .iter()
            .map(|&c| {
                let d = (f64::from(x % c) / f64::from(c) - want).rem_euclid(1.0);
                d.min(1.0 - d)
            })
            .fold(0.0, f64::max)
    };
    let offset_ms = (0..cycle_ms / PHASE_STEP_MS)
        .map(|i| i * PHASE_STEP_MS)
        .fold((0, f64::INFINITY), |best, x| {
            let m = miss(x);
            if m < best.1 - 1e-12 {
                (x, m)
            } else {
                best
            }
        })
        .0;
    CycleOffset {
        cycle_ms,
        offset_ms,
    }
}

impl Boot {
    /// Run `run` of `job` in `scenario` on `kernel`: no verify pass, no
    /// sampler, the default detector, and [`Boot::timeout_of`] the job. Every
    /// task builds its boots here and sets what differs.
    pub fn new(
        kernel: Built,
        initrd: PathBuf,
        scenario: Scenario,
        run: u32,
        job: Job,
        machine: Machine,
    ) -> Boot {
        Boot {
            timeout: Boot::timeout_of(&job, machine.clock),
            kernel,
            initrd,
            scenario,
            run,
            job,
            verify: false,
            sample_ms: 0,
            machine,
            detector: Detector::default(),
            phase: None,
        }
    }

    /// How long a boot of `job` may take before the guest is declared hung:
    /// its ramp and runtime, and 120 s for booting, setting up and reporting;
    /// on the virtual clock below the default shift, as many times that as a
    /// guest second costs more instructions (shift 1: 4x, 0: 8x). A guest
    /// second at the default shift costs about a second of wall time here
    /// (a boot: 35 guest s, 34-43 s wall), at shift 1 four times as much.
    pub fn timeout_of(job: &Job, clock: Clock) -> Duration {
        let guest = 120 + u64::from(job.ramp_time) + u64::from(job.runtime);
        let slower = match clock {
            Clock::Virtual { shift } if shift < DEFAULT_ICOUNT_SHIFT => {
                1 << (DEFAULT_ICOUNT_SHIFT - shift)
            }
            _ => 1,
        };
        Duration::from_secs(guest * slower)
    }

    /// The disk under this boot's file system: the machine's, when the
    /// scenario has one.
    pub fn disk(&self) -> Option<Disk> {
        self.scenario.disk.then_some(self.machine.disk)
    }

    /// Which run this boot is.
    pub fn id(&self) -> crate::guest::run_id::RunId {
        crate::guest::run_id::RunId::new(self.scenario.name, &self.kernel.meta.variant, self.run)
    }

    /// The `wbstall.*` parameters of the boot, read by the guest's init.
    pub fn params(&self) -> Vec<(String, String)> {
        run_params(&RunParams {
            scenario: self.scenario,
            job: &self.job,
            sample_ms: self.sample_ms,
            verify: self.verify,
            detector: self.detector,
            disk: self.disk(),
            phase: self.phase,
        })
    }
}

/// What a run of a scenario is told, in the guest or on the host.
pub struct RunParams<'a> {
    pub scenario: Scenario,
    pub job: &'a Job,
    pub sample_ms: u32,
    pub verify: bool,
    pub detector: Detector,
    /// The disk under the scenario's file system, when it has one.
    pub disk: Option<Disk>,
    pub phase: Option<CycleOffset>,
}

/// The `wbstall.*` parameters of a run (`wbstall.key=value` on a guest's
/// kernel command line, `WB_key` in host-test's environment).
pub fn run_params(r: &RunParams<'_>) -> Vec<(String, String)> {
    let p = |k: &str, v: String| (k.to_string(), v);
    let job = r.job;
    let mut params = vec![
        p(param::SCENARIO, r.scenario.script.to_string()),
        p(param::SIZE, job.size.clone()),
        p(param::NUMJOBS, job.numjobs.to_string()),
        p(param::WRITE, job.write.name().to_string()),
        p(param::RUNTIME, job.runtime.to_string()),
        p(param::RAMP, job.ramp_time.to_string()),
        p(param::BS, job.bs.clone()),
        p(param::SAMPLE_MS, r.sample_ms.to_string()),
        p(param::VERIFY, u8::from(r.verify).to_string()),
        p(param::DETECTOR, r.detector.name().to_string()),
        p(
            param::INVALIDATE,
            u8::from(r.scenario.invalidate).to_string(),
        ),
    ];
    if let Some(ph) = r.phase {
        params.push(p(param::PHASE_CYCLE_MS, ph.cycle_ms.to_string()));
        params.push(p(param::PHASE_MS, ph.offset_ms.to_string()));
    }
    if let Some(disk) = r.disk {
        params.push(p(param::DISK, disk.param().to_string()));
    }
    params.extend(r.scenario.params.iter().map(|(k, v)| p(k, v.to_string())));
    params
}

/// Every boot of a session, in order.
#[derive(Debug, Clone, Default)]
pub struct Plan {
    pub boots: Vec<Boot>,
}

/// Runs per cell, scenario by scenario: each scenario's cells need as many
/// as its own floor asks for, no more because another scenario is noisier.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Runs(Vec<(String, u32)>);

impl Runs {
    /// `n` runs for every cell of `scenarios`.
    pub fn uniform(scenarios: &[Scenario], n: u32) -> Runs {
        Runs(scenarios.iter().map(|s| (s.name.to_string(), n)).collect())
    }

    /// Each scenario's own count.
    pub fn each(per: Vec<(String, u32)>) -> Runs {
        Runs(per)
    }

    /// The runs of `scenario`'s cells (0 for a scenario not planned).
    pub fn of(&self, scenario: &str) -> u32 {
        self.0
            .iter()
            .find(|(s, _)| *s == scenario)
            .map_or(0, |(_, n)| *n)
    }

    /// The most any scenario makes: the plan's number of rounds.
    pub fn most(&self) -> u32 {
        self.0.iter().map(|(_, n)| *n).max().unwrap_or(0)
    }

    /// The fewest any scenario makes.
    pub fn fewest(&self) -> u32 {
        self.0.iter().map(|(_, n)| *n).min().unwrap_or(0)
    }
}

impl std::fmt::Display for Runs {
    /// `3`, or per scenario when they differ: `fuse-strictlimit 2, memcg-ext4 3`.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        if self.most() == self.fewest() {
            return write!(f, "{}", self.most());
        }
        let each: Vec<String> = self.0.iter().map(|(s, n)| format!("{s} {n}")).collect();
        write!(f, "{}", each.join(", "))
    }
}

/// The order of boots: run by run, every scenario that still needs that run,
/// variants forward on even runs and backward on odd ones (ABBA), so that
/// drift hits all variants alike.
pub fn abba<'a, K>(
    kernels: &'a [K],
    scenarios: &[Scenario],
    runs: &Runs,
) -> Vec<(u32, &'a K, Scenario)> {
    let mut out = Vec::new();
    for run in 0..runs.most() {
        for scen in scenarios.iter().filter(|s| run < runs.of(s.name)) {
            let order: Vec<&K> = if run % 2 == 0 {
                kernels.iter().collect()
            } else {
                kernels.iter().rev().collect()
            };
            for k in order {
                out.push((run, k, *scen));
            }
        }
    }
    out
}

/// `--shard I/N`: the I-th (1-based) of N deterministic slices of a plan.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct Shard {
    pub index: u32,
    pub count: u32,
}

impl std::str::FromStr for Shard {
    type Err = String;
    fn from_str(s: &str) -> Result<Shard, String> {
        let bad = || format!("`{s}` is not a shard: write I/N with 1 <= I <= N <= 64, e.g. 2/4");
        let (i, n) = s.split_once('/').ok_or_else(bad)?;
        let (index, count) = (
            i.trim().parse::<u32>().map_err(|_| bad())?,
            n.trim().parse::<u32>().map_err(|_| bad())?,
        );
        if index == 0 || index > count || count > 64 {
            return Err(bad());
        }
        Ok(Shard { index, count })
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

impl Shard {
    /// Whether the boot of `run` in the scenario at `scenario_index` (of
    /// `scenarios`) belongs to this shard. The unit is one scenario over a pair
    /// of runs (forward, then backward): every shard keeps its boots ABBA.
    pub fn takes(&self, scenario_index: usize, scenarios: usize, run: u32) -> bool {
        let unit = (run / 2) as usize * scenarios + scenario_index;
        unit % self.count as usize == (self.index - 1) as usize
    }
}

/// Where a boot comes in an unsharded plan (run, scenario, then the variant
/// in ABBA direction): merged shards are put back in this order.
pub fn plan_position(
    run: u32,
    scenario_index: usize,
    variant_index: usize,
    variants: usize,
) -> (u32, usize, usize) {
    let v = if run.is_multiple_of(2) {
        variant_index
    } else {
        variants - 1 - variant_index
    };
    (run, scenario_index, v)
}

/// Which boots of a plan run when (`--jobs-vm N`): in plan order, at most
/// `slots` at a time, the next one as soon as any running one ends. With one
/// slot this is the plan itself, one boot after the other.
#[derive(Debug)]
pub struct Schedule {
    len: usize,
    slots: usize,
    next: usize,
    running: BTreeSet<usize>,
}

impl Schedule {
    pub fn new(len: usize, slots: usize) -> Schedule {
        Schedule {
            len,
            slots: slots.max(1),
            next: 0,
            running: BTreeSet::new(),
        }
    }

    /// The boots to start now, in plan order: one per free slot.
    pub fn start(&mut self) -> std::ops::Range<usize> {
        let free = self.slots - self.running.len();
        let first = self.next;
        self.next = (first + free).min(self.len);
        self.running.extend(first..self.next);
        first..self.next
    }

    /// Boot `index` ended (in whatever order boots end): its slot is free.
    pub fn ended(&mut self, index: usize) {
        let was_running = self.running.remove(&index);
        debug_assert!(was_running, "boot {index} ended but was not running");
    }

    /// Every boot has started and ended.
    pub fn finished(&self) -> bool {
        self.next == self.len && self.running.is_empty()
    }
}

/// Guests at a time when `--jobs-vm` is not given: under the virtual clock,
/// one per host CPU (a guest runs on one host thread, and host load does not
/// move its numbers); under the real clock, one (guests side by side would
/// slow each other's work but not their clocks).
pub fn default_jobs_vm(host_cpus: usize, clock: Clock) -> usize {
    match clock {
        Clock::Virtual { .. } => host_cpus.max(1),
        Clock::Real => 1,
    }
}

/// `--jobs-vm N` checked against this host (`host_cpus` available to xtask)
/// for guests of `cpus` vCPUs on `clock`. Returns the warning to show, if any.
pub fn check_jobs_vm(
    jobs: usize,
    host_cpus: usize,
    cpus: u32,
    clock: Clock,
) -> Result<Option<String>> {
    // Under the real clock every vCPU is a host thread (multi-threaded TCG,
    // or KVM); under the virtual clock a guest runs on one thread.
    let threads = match clock {
        Clock::Real => cpus as usize,
        Clock::Virtual { .. } => 1,
    };
    let limit = (host_cpus / threads).max(1);
    if jobs == 0 {
        bail!(exit::usage(format!(
            "--jobs-vm 0: at least one guest must boot at a time; drop --jobs-vm (the \
             default, 1, boots one guest at a time) or give a number from 1 to {limit}"
        )));
    }
    if jobs > limit {
        let how = match clock {
            Clock::Real => format!(
                "one thread per vCPU, {cpus} per guest), and this host has {host_cpus} \
                 available: give --jobs-vm {limit} or less, fewer guest CPUs (--cpus), or \
                 --clock virtual (one host thread per guest)"
            ),
            Clock::Virtual { .. } => format!(
                "one thread per guest under --clock virtual), and this host has {host_cpus} \
                 available: give --jobs-vm {limit} or less"
            ),
        };
        bail!(exit::usage(format!(
            "--jobs-vm {jobs}: {jobs} guests need {} host CPUs ({how}",
            jobs * threads
        )));
    }
    Ok((jobs > 1 && clock == Clock::Real).then(|| {
        format!(
            "--jobs-vm {jobs} with --clock real: {jobs} guests share this host's {host_cpus} \
             CPUs, memory bandwidth and disk, so this run's throughput numbers are not \
             comparable with runs booted one at a time (nor between its own cells); for \
             numbers that are, use --jobs-vm 1, or the virtual clock (the default under TCG)"
        )
    }))
}

/// The virtual clock counts the guest's instructions, but the host's disk
/// (`--disk host`) completes in host time, which it turns into guest time at
/// random: such a scenario's throughput and latencies say nothing there. The
/// null_blk disk runs on guest time. Refused, naming the scenarios and the
/// ways out.
pub fn check_clock(machine: &Machine, scenarios: &[Scenario]) -> Result<()> {
    let disks: Vec<&str> = scenarios
        .iter()
        .filter(|s| s.disk)
        .map(|s| s.name)
        .collect();
    if disks.is_empty() || machine.clock == Clock::Real || machine.disk != Disk::Host {
        return Ok(());
    }
    let others: Vec<String> = scenarios
        .iter()
        .filter(|s| !s.disk)
        .map(|s| format!("--scenario {}", s.name))
        .collect();
    let keep = if others.is_empty() {
        String::new()
    } else {
        format!(", or keep only the others with {}", others.join(" "))
    };
    bail!(exit::usage(format!(
        "the virtual clock (the default under TCG) with --disk host: {} write{} to a \
         virtio-blk disk, whose completions \
         take host time that the virtual clock turns into guest time at random (measured on \
         memcg-ext4: one kernel's six runs wrote 25 to 38 MiB/s, and two of them had 2 s \
         writes, the others none over 0.7 s); use --disk null (the default, a disk on guest \
         time), run {} with --clock real{keep}",
        disks.join(", "),
        if disks.len() == 1 { "s" } else { "" },
        if disks.len() == 1 { "it" } else { "them" }
    )))
}

#[cfg(test)]
#[path = "plan_tests.rs"]
mod tests;
