//! host-test's session: scenarios run on this machine's running kernel, no
//! QEMU, into one results directory: the guest's own scripts on the host
//! ([`super::host`]), the sleeps classed by the tracefs detector in a tracing
//! instance of its own, each run made a record by the same builder as a
//! guest's, judged and rendered by [`super::boot_all::finish`]. What it
//! changes on the host ([`super::host_state`]) is put back on every exit.

use std::{collections::BTreeMap, fs, path::PathBuf, time::Duration};

use anyhow::{bail, Context, Result};
use xshell::Shell;

use super::{
    boot_all::{finish, recorded, Outcome},
    host::{self, HostRun, Stage},
    host_state::Restorer,
};
use crate::{
    analysis::expected::{self, Expected},
    deps, exit,
    guest::{
        fio,
        fuse_server::{self, UserServer},
        initramfs,
        job::Job,
        plan::{run_params, Detector, RunParams},
        protocol::param,
        qemu::{Accel, Clock, Machine},
        scenario::Scenario,
    },
    kernel::build::VariantMeta,
    progress::{self, Event},
    results::floor::FloorOf,
    results::{
        builder,
        context::RunContext,
        dir::ResultsDir,
        machine::MachineFacts,
        record::RunRecord,
        session::{ScenarioInfo, Session},
        warnings::warnings,
    },
    stamp::Stamp,
    util,
};

/// The variant name of the running kernel in records and reports.
pub const HOST: &str = "host";

/// The sparse file under a disk scenario's loop device.
const DISK_BYTES: u64 = 1 << 30;

/// What a host-test session runs, as its flags said.
pub struct HostPlan {
    pub scenarios: Vec<Scenario>,
    /// The fio job of each scenario, by name.
    pub jobs: Vec<(&'static str, Job)>,
    /// The scenarios as the session records them.
    pub infos: Vec<ScenarioInfo>,
    pub runs: u32,
    pub quick: bool,
    pub sample_ms: u32,
    /// Seconds before a run is declared hung; else 60 + ramp + runtime.
    pub timeout: Option<u64>,
    /// `--fuse-server` as given, and the server it names.
    pub fuse_server: Option<String>,
    pub user: Option<UserServer>,
    pub expected: Expected,
}

impl HostPlan {
    fn job(&self, scen: Scenario) -> Result<Job> {
        (self.jobs.iter().find(|(n, _)| *n == scen.name))
            .map(|(_, j)| j.clone())
            .with_context(|| format!("host-test planned no fio job for {}", scen.name))
    }
}

/// Runs `plan` on the running kernel into a new results directory, judged
/// and rendered; everything it changes is put back on every exit.
pub fn boot_on_host(sh: &Shell, plan: HostPlan) -> Result<Outcome> {
    preflight()?;
    let scenarios = &plan.scenarios;
    let programs = programs(sh, scenarios, plan.user.is_some())?;
    let dir = util::unique_dir(&util::target_dir().join("results"))?;
    let host = host_machine()?;
    let mut session = session(sh, &plan, &host)?;
    let meta = session.variants[0].clone();
    ResultsDir::new(&dir).write::<RunRecord>(&session, None)?;
    let stage = Stage::new(
        &dir.join("host-root"),
        &util::project_root().join("qemu"),
        &programs,
        plan.user.as_ref().map(|u| u.line.as_str()),
    )?;
    let restorer = Restorer::arm()?;
    progress::emit(Event::Note(&format!(
        "host-test: {} on the running kernel {}, {} run(s) each; tracing in {}; results in {}",
        scenarios
            .iter()
            .map(|s| s.name)
            .collect::<Vec<_>>()
            .join(", "),
        meta.kernel_release,
        plan.runs,
        restorer.tracing().0.display(),
        dir.display()
    )));
    let at = OnHost {
        stage: &stage,
        restorer: &restorer,
        dir: &dir,
        meta: &meta,
        host: &host,
    };
    let mut records = Vec::new();
    let total = plan.runs as usize * scenarios.len();
    for (i, (run, scen)) in (0..plan.runs)
        .flat_map(|r| scenarios.iter().map(move |s| (r, *s)))
        .enumerate()
    {
        let id = crate::guest::run_id::RunId::new(scen.name, HOST, run);
        progress::emit(Event::BootStart {
            index: i + 1,
            total,
            run: &id.to_string(),
        });
        match one(&plan, &at, scen, run) {
            Ok(rec) => {
                recorded(&rec);
                records.push(rec);
            }
            Err(e) => {
                // A signal stopped the run: the reaper puts the host back
                // and exits; this is not the run's failure.
                crate::reaper::yield_to_signal();
                let failure = crate::results::session::BootFailure {
                    run: id,
                    why: crate::results::session::BootError::NoRecord(format!("{e:#}")),
                };
                progress::emit(Event::BootFailed(&failure.to_string()));
                session.failures.push(failure);
            }
        }
        for line in restorer.between_runs()? {
            progress::emit(Event::Note(&format!("host-test: {line}")));
        }
        ResultsDir::new(&dir).write(&session, Some(&records.iter().collect::<Vec<_>>()))?;
    }
    for line in restorer.restore() {
        progress::emit(Event::Note(&format!("host-test: {line}")));
    }
    finish(dir, session, records, plan.expected, None)
}

/// One run of `scen`: the script on the host, its stream made a record.
fn one(plan: &HostPlan, at: &OnHost<'_>, scen: Scenario, run: u32) -> Result<RunRecord> {
    let OnHost {
        stage,
        restorer,
        dir,
        meta,
        host,
    } = *at;
    let job = plan.job(scen)?;
    let mut params = run_params(&RunParams {
        scenario: scen,
        job: &job,
        sample_ms: plan.sample_ms,
        verify: scen.verify && !plan.quick && run == 0,
        detector: Detector::Tracefs,
        disk: None,
        // The host's timers are not the guest's: no phase to wait for.
        phase: None,
    });
    let name = crate::guest::run_id::RunId::new(scen.name, HOST, run).stem();
    // A disk scenario's ext4 on a loop device over a sparse file, made
    // for the run and dropped after it.
    let disk = match scen.disk {
        true => {
            params.push((param::DISK.to_string(), "loop".to_string()));
            Some(loop_disk(restorer, &dir.join(format!("{name}.disk.img")))?)
        }
        false => None,
    };
    let timeout = plan
        .timeout
        .unwrap_or(60 + u64::from(job.ramp_time) + u64::from(job.runtime));
    let ran = host::run(
        stage,
        restorer.tracing(),
        &HostRun {
            params: &params,
            dir,
            name: name.clone(),
            timeout: Duration::from_secs(timeout),
            trace_kb: trace_kb(host),
            disk_dev: disk.as_ref().map(|(d, _)| d.as_path()),
        },
    );
    if let Some((dev, img)) = &disk {
        progress::emit(Event::Note(&format!(
            "host-test: {}",
            restorer.detach_loop(dev)
        )));
        fs::remove_file(img).ok();
    }
    let ran = ran?;
    let samples = samples_file(&ran, dir, &name)?;
    let log = fs::read_to_string(dir.join(&ran.log)).unwrap_or_default();
    builder::build(
        RunContext {
            variant: meta,
            scenario: scen.name,
            scenario_strictlimit: scen.strictlimit,
            run,
            machine: machine_facts(host),
            job: &job,
            started: ran.started,
            wall_secs: ran.wall_secs,
            console_log: ran.log.clone(),
            console_warnings: warnings(&log),
            samples,
            sleeps: Some(dir.join(format!("{name}.sleeps.txt"))),
            detector: Detector::Tracefs,
            phase: None,
        },
        &ran.stream,
    )
}

fn session(sh: &Shell, plan: &HostPlan, host: &HostMachine) -> Result<Session> {
    let fio_version = xshell::cmd!(sh, "fio --version")
        .quiet()
        .read()
        .unwrap_or_default();
    Ok(Session {
        command: std::env::args().skip(1).collect::<Vec<_>>().join(" "),
        harness: None,
        reporter: None,
        started: Stamp::now(),
        machine: Machine {
            accel: Accel::Native,
            clock: Clock::Real,
            cpu_model: host.cpu_model.clone(),
            cpus: host.cpus,
            memory_mib: host.memory_mib,
            ..Machine::default()
        },
        runs: plan.runs,
        quick: plan.quick,
        toolchain: deps::Toolchain {
            fio: fio_version.trim().to_string(),
            ..Default::default()
        },
        host_cpus: host.cpus as usize,
        variants: vec![running_kernel()?],
        scenarios: plan.infos.clone(),
        expected_file: expected::EXPECTED_FILE.to_string(),
        expected: Some(toml::to_string(&plan.expected).context("writing the expectations down")?),
        fuse_server: plan.fuse_server.clone(),
        // The host's own clock: no floor to judge a cost against.
        floors: (plan.scenarios.iter())
            .map(|s| {
                let why = "host-test runs on this machine's real clock, whose runs move \
                           with its load: there is no floor, costs are not judged";
                (s.name.to_string(), FloorOf::None(why.into()))
            })
            .collect(),
        failures: Vec::new(),
        roles: None,
        under_test: Vec::new(),
        shard: None,
        jobs_vm: 0,
        args: None,
        resumed: Vec::new(),
        accepted_costs: BTreeMap::new(),
        more_runs: Vec::new(),
    })
}

/// A disk scenario's disk: a sparse file `img` and the loop device over it
/// (the device, the file).
fn loop_disk(restorer: &Restorer, img: &std::path::Path) -> Result<(PathBuf, PathBuf)> {
    fs::File::create(img)
        .and_then(|f| f.set_len(DISK_BYTES))
        .with_context(|| format!("making the sparse disk {}", img.display()))?;
    Ok((restorer.attach_loop(img)?, img.to_path_buf()))
}

/// The sampler's stream of a run, written beside its log: its file name.
fn samples_file(ran: &host::Ran, dir: &std::path::Path, name: &str) -> Result<Option<String>> {
    match ran
        .stream
        .files
        .get(crate::guest::protocol::stream::SAMPLES)
    {
        Some(bytes) => {
            let file = format!("{name}.samples.txt");
            fs::write(dir.join(&file), bytes).with_context(|| format!("writing {file}"))?;
            Ok(Some(file))
        }
        None => Ok(None),
    }
}

/// Root, FUSE, unshare: refused clearly before anything changes.
fn preflight() -> Result<()> {
    if !util::is_root() {
        bail!(exit::usage(
            "host-test changes the kernel's dirty limits and mounts FUSE: run it as root"
        ));
    }
    if !std::path::Path::new("/dev/fuse").exists() {
        bail!("no /dev/fuse: the running kernel lacks FUSE (CONFIG_FUSE_FS; modprobe fuse)");
    }
    let filesystems =
        fs::read_to_string("/proc/filesystems").context("reading /proc/filesystems")?;
    if !filesystems
        .lines()
        .any(|l| l.trim_end().ends_with("tracefs"))
    {
        bail!("the running kernel has no tracefs (CONFIG_TRACING): host-test classes its sleeps from trace events");
    }
    for tool in ["unshare", "fio"] {
        if deps::which(tool).is_none() {
            bail!("`{tool}` is required on the host (Debian: apt-get install util-linux fio)");
        }
    }
    Ok(())
}

/// The programs the scripts call, by name: the guest's own (built static),
/// fio, and passthrough_ll when fuse-passthrough runs it.
fn programs(
    sh: &Shell,
    scenarios: &[Scenario],
    user: bool,
) -> Result<Vec<(&'static str, PathBuf)>> {
    let bins = initramfs::build_guest_bins(sh)?;
    let mut out: Vec<(&'static str, PathBuf)> =
        initramfs::GUEST_BINS.iter().copied().zip(bins).collect();
    // The guest's fio (the same binary on both sides of a comparison); else
    // the host's, said.
    let fio = match fio::guest_fio(sh) {
        Ok(f) => f,
        Err(e) => {
            progress::emit(Event::Note(&format!(
                "host-test: the guest's static fio is not to be had ({e:#}): the host's fio runs"
            )));
            deps::which("fio").context("no fio on PATH (Debian: apt-get install fio)")?
        }
    };
    out.push(("fio", fio));
    if !user && scenarios.iter().any(|s| s.name == fuse_server::SCENARIO) {
        out.push(("passthrough_ll", fuse_server::passthrough_ll(sh)?));
    }
    Ok(out)
}

/// The running kernel as a variant: its release, and its image's hash where
/// /boot has it.
fn running_kernel() -> Result<VariantMeta> {
    let release = fs::read_to_string("/proc/sys/kernel/osrelease")
        .context("reading /proc/sys/kernel/osrelease")?
        .trim()
        .to_string();
    let version = fs::read_to_string("/proc/version").context("reading /proc/version")?;
    let image = PathBuf::from(format!("/boot/vmlinuz-{release}"));
    let mut meta = VariantMeta {
        variant: HOST.into(),
        description: format!("the running kernel: {}", version.trim()),
        kernel_release: release.clone(),
        bzimage_sha256: if image.is_file() {
            util::sha256_file(&image)?
        } else {
            String::new()
        },
        ..Default::default()
    };
    meta.base.kind = "running".into();
    meta.base.kernel_version = release;
    Ok(meta)
}

/// What the records say of this host: the run is native, on the real clock.
fn machine_facts(host: &HostMachine) -> MachineFacts {
    MachineFacts {
        accel: Accel::Native,
        clock: Clock::Real,
        disk: None,
        cpu_model: host.cpu_model.clone(),
        cpus: host.cpus,
        memory_mib: host.memory_mib,
    }
}

/// The trace buffer per CPU: 128 MiB, which held every event of a native
/// fuse-nostrict run here (16 MiB, the guest's, lost up to 38504 of them at
/// 700 MiB/s), or a sixteenth of the memory where that is less.
fn trace_kb(m: &HostMachine) -> u64 {
    (u64::from(m.memory_mib) * 1024 / 16 / u64::from(m.cpus.max(1))).min(128 * 1024)
}

/// Where every run of a host-test happens: read once, handed to each run.
#[derive(Clone, Copy)]
struct OnHost<'a> {
    stage: &'a Stage,
    restorer: &'a Restorer,
    dir: &'a std::path::Path,
    meta: &'a VariantMeta,
    host: &'a HostMachine,
}

/// The machine the runs ran on.
struct HostMachine {
    cpu_model: String,
    cpus: u32,
    memory_mib: u32,
}

fn host_machine() -> Result<HostMachine> {
    let cpuinfo = fs::read_to_string("/proc/cpuinfo").context("reading /proc/cpuinfo")?;
    let meminfo = fs::read_to_string("/proc/meminfo").context("reading /proc/meminfo")?;
    let kb: u64 = meminfo
        .lines()
        .find_map(|l| l.strip_prefix("MemTotal:"))
        .and_then(|v| v.split_whitespace().next()?.parse().ok())
        .context("/proc/meminfo has no MemTotal")?;
    Ok(HostMachine {
        cpu_model: cpuinfo
            .lines()
            .find_map(|l| l.strip_prefix("model name"))
            .and_then(|v| v.split_once(':'))
            .map_or("unknown".into(), |(_, m)| m.trim().to_string()),
        cpus: cpuinfo
            .lines()
            .filter(|l| l.starts_with("processor"))
            .count() as u32,
        memory_mib: (kb / 1024) as u32,
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The trace buffer: 128 MiB per CPU, less where memory is short.
    #[test]
    fn the_trace_buffer_is_capped_by_memory() {
        let m = |memory_mib, cpus| HostMachine {
            cpu_model: String::new(),
            cpus,
            memory_mib,
        };
        assert_eq!(trace_kb(&m(24 * 1024, 2)), 128 * 1024);
        assert_eq!(trace_kb(&m(2048, 2)), 64 * 1024);
    }
}
