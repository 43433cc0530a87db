//! `cargo xtask qemu-test`: build the variants, boot each one per scenario under
//! QEMU, collect throughput and the mechanism, and judge them against
//! `qemu/expected.toml`. `cargo xtask shell` boots the same guest interactively.

use std::{
    fs,
    path::{Path, PathBuf},
    time::Duration,
};

use anyhow::{bail, Context, Result};
use xshell::{cmd, Shell};

use crate::{
    analysis::verdict::{self, Expected},
    deps,
    guest::initramfs,
    guest::qemu::{self, Accel, Console, VmConfig},
    guest::scenario::{self, Scenario},
    kernel::build::{self as kernel, Built},
    kernel::module,
    kernel::patch::Selection,
    kernel::source::SourceArgs,
    report,
    results::fio::Job,
    results::record::{self, RunRecord},
    util,
};

/// How the guest is sized and run.
#[derive(Debug, Clone, clap::Args)]
pub struct GuestArgs {
    /// Accelerator. Default: kvm where /dev/kvm opens and the CPU has vmx/svm,
    /// else tcg (qemu -accel tcg,thread=multi).
    #[arg(long, value_enum)]
    pub accel: Option<Accel>,
    /// Guest CPUs (qemu -smp). Default: 2.
    #[arg(long, default_value_t = 2, value_name = "N")]
    pub cpus: u32,
    /// Guest memory in MiB (qemu -m). Default: 2048.
    #[arg(long, default_value_t = 2048, value_name = "MIB")]
    pub memory: u32,
    /// Use the kernels already in target/wbstall/kernels instead of building.
    #[arg(long)]
    pub no_build: bool,
    /// Parallel make jobs for the build (make -j). Default: the number of CPUs.
    #[arg(long, value_name = "N")]
    pub jobs: Option<usize>,
    /// Run PATH from the initramfs as init instead of wbstall's /init (kernel
    /// rdinit=), to debug the harness: a path that does not exist makes the
    /// guest kernel panic, /bin/cat makes it wait for ever.
    #[arg(
        long,
        value_name = "PATH",
        default_value = "/init",
        hide_default_value = true
    )]
    pub rdinit: String,
}

impl GuestArgs {
    fn accel(&self) -> Accel {
        self.accel.unwrap_or_else(qemu::detect_accel)
    }

    /// The selected kernels: built (incrementally), or with --no-build as they are.
    fn kernels(
        &self,
        sh: &Shell,
        tc: &deps::Toolchain,
        selection: &Selection,
        source: &SourceArgs,
    ) -> Result<Vec<Built>> {
        if self.no_build {
            load_selected(selection)
        } else {
            kernel::build(sh, tc, selection, source, self.jobs)
        }
    }

    /// One variant's kernel and initramfs, for the single-boot tasks.
    fn one_variant(&self, sh: &Shell, source: &SourceArgs, name: &str) -> Result<(Built, PathBuf)> {
        let tc = deps::ensure(sh)?;
        let selection = Selection {
            variants: vec![name.to_string()],
            ..Selection::default()
        };
        let built = self.kernels(sh, &tc, &selection, source)?.remove(0);
        let base = initramfs::base(sh)?;
        let initrd = initramfs::for_variant(&base, &file_name(&built.dir), &built.module())?;
        Ok((built, initrd))
    }

    /// A VM for `kernel` sized by these flags.
    fn vm(
        &self,
        kernel: &Built,
        initrd: PathBuf,
        params: Vec<(String, String)>,
        console: Console,
    ) -> VmConfig {
        VmConfig {
            kernel: kernel.bzimage(),
            initrd,
            accel: self.accel(),
            cpus: self.cpus,
            memory_mib: self.memory,
            init: self.rdinit.clone(),
            params,
            console,
            results: None,
            disk: None,
        }
    }
}

/// Boot every variant under QEMU, run the scenarios, and judge the results.
#[derive(Debug, clap::Args)]
pub struct QemuTest {
    #[command(flatten)]
    pub selection: Selection,
    #[command(flatten)]
    pub source: SourceArgs,
    #[command(flatten)]
    pub guest: GuestArgs,
    /// Scenario to run (repeatable). Default: all of them.
    #[arg(long = "scenario", value_name = "NAME")]
    pub scenarios: Vec<String>,
    /// Boots per variant and scenario, interleaved (ABBA) across variants.
    /// Default: 3, or 1 with --quick.
    #[arg(long, value_name = "N")]
    pub runs: Option<u32>,
    /// A short job for CI: fio --runtime=5 --ramp_time=2 (unless given), no verify pass.
    #[arg(long)]
    pub quick: bool,
    /// Seconds fio measures (fio --runtime). Default: 20, or 5 with --quick.
    #[arg(long, value_name = "SECS")]
    pub runtime: Option<u32>,
    /// Seconds fio runs before measuring (fio --ramp_time). Default: 5, or 2 with --quick.
    #[arg(long, value_name = "SECS")]
    pub ramp: Option<u32>,
    /// Size of each job's file (fio --size). Default: per scenario (256M on FUSE,
    /// 16M on ext4): the file set must fit in guest memory, and on ext4 stay well
    /// below both the memcg's memory.max and the global background threshold.
    #[arg(long, value_name = "SIZE")]
    pub size: Option<String>,
    /// Writer jobs (fio --numjobs). Default: 4, as in the seed.
    #[arg(long, default_value_t = 4, value_name = "N")]
    pub numjobs: u32,
    /// Interval of the in-guest sampler in ms (0: off). Default: 100.
    #[arg(long, default_value_t = 100, value_name = "MS")]
    pub sample_ms: u32,
    /// Seconds before a guest is declared hung and killed. Default: 120 + ramp + runtime.
    #[arg(long, value_name = "SECS")]
    pub timeout: Option<u64>,
    /// The variant booted a second time as its own A/A control, to measure the
    /// noise floor (only with --runs >= 2). Default: upstream when selected.
    #[arg(long, value_name = "NAME")]
    pub aa: Option<String>,
    /// Do not run the A/A control.
    #[arg(long)]
    pub no_aa: bool,
    /// The hypotheses to judge against. Default: qemu/expected.toml.
    #[arg(long, value_name = "FILE")]
    pub expected: Option<PathBuf>,
}

impl QemuTest {
    fn job(&self, scen: Scenario) -> Job {
        Job {
            size: self.size.clone().unwrap_or_else(|| scen.size.to_string()),
            numjobs: self.numjobs,
            runtime: self.runtime.unwrap_or(if self.quick { 5 } else { 20 }),
            ramp_time: self.ramp.unwrap_or(if self.quick { 2 } else { 5 }),
            bs: "128k".into(),
        }
    }

    pub fn run(self, sh: &Shell) -> Result<()> {
        let tc = deps::ensure(sh)?;
        // Check every input before the long work starts.
        let scenarios = scenario::select(&self.scenarios)?;
        let expected_file = self
            .expected
            .clone()
            .unwrap_or_else(|| util::project_root().join(verdict::EXPECTED_FILE));
        let expected_text = fs::read_to_string(&expected_file)
            .with_context(|| format!("reading {}", expected_file.display()))?;
        let expected = load_expectations(&expected_text, &expected_file)?;
        let runs = self.runs.unwrap_or(if self.quick { 1 } else { 3 });
        if runs == 0 {
            bail!("--runs must be at least 1");
        }
        let mut built = self.guest.kernels(sh, &tc, &self.selection, &self.source)?;
        if let Some(aa) = self.aa_variant(&built, runs)? {
            built.push(aa);
        }
        let accel = self.guest.accel();
        let base = initramfs::base(sh).context("building the initramfs")?;
        let dir = util::target_dir().join("results").join(util::timestamp());
        fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let mut session = Session {
            command: std::env::args().skip(1).collect::<Vec<_>>().join(" "),
            started: util::timestamp(),
            accel,
            cpus: self.guest.cpus,
            memory_mib: self.guest.memory,
            runs,
            quick: self.quick,
            toolchain: tc.clone(),
            host_cpus: std::thread::available_parallelism().map_or(0, |n| n.get()),
            variants: built.iter().map(|b| b.meta.clone()).collect(),
            scenarios: scenarios
                .iter()
                .map(|s| ScenarioInfo {
                    name: s.name.into(),
                    what: s.what.into(),
                    job: self.job(*s),
                })
                .collect(),
            expected_file: expected_file.display().to_string(),
            expected: Some(expected_text),
            failures: Vec::new(),
        };
        util::write_atomic(
            &dir.join("session.json"),
            serde_json::to_string_pretty(&session)?,
        )?;
        eprintln!(
            "qemu-test: {} variant(s) x {} scenario(s) x {} run(s), accel {accel:?}, {} CPUs, {} MiB",
            built.len(),
            scenarios.len(),
            runs,
            self.guest.cpus,
            self.guest.memory,
        );
        eprintln!("qemu-test: results in {}", dir.display());
        // One initramfs per kernel, assembled once, not per boot.
        let mut initrds = std::collections::BTreeMap::new();
        for b in &built {
            let kernel_dir = file_name(&b.dir);
            if let std::collections::btree_map::Entry::Vacant(e) = initrds.entry(kernel_dir) {
                let initrd = initramfs::for_variant(&base, e.key(), &b.module())?;
                e.insert(initrd);
            }
        }
        let mut records: Vec<RunRecord> = Vec::new();
        for (run, variant, scen) in schedule(&built, &scenarios, runs) {
            let initrd = &initrds[&file_name(&variant.dir)];
            match self.one(sh, &dir, variant, scen, run, accel, initrd) {
                Ok(rec) => {
                    let problems = record::problems(&rec, &expected.witness);
                    eprintln!(
                        "  {} {} #{}: {} MiB/s, stall share {:.1}% (stall_sleeps {}, throttle_sleeps {}/{}, bg_starts {}/{} module/tracefs) in {:.0} s",
                        rec.variant,
                        rec.scenario,
                        run + 1,
                        report::num(rec.fio.bw_mib_s),
                        rec.stall_fraction * 100.0,
                        rec.mechanism.stall_sleeps,
                        rec.mechanism.throttle_sleeps,
                        rec.witness.throttle_sleeps,
                        rec.mechanism.bg_starts,
                        rec.witness.bg_starts,
                        rec.wall_secs
                    );
                    for p in problems {
                        eprintln!("  not usable as evidence: {p}");
                    }
                    records.push(rec);
                    // Written run by run: a crash later loses nothing.
                    util::write_atomic(
                        &dir.join("results.json"),
                        serde_json::to_string_pretty(&records)?,
                    )?;
                }
                Err(e) => {
                    let msg = format!("{}/{} #{}: {e:#}", scen.name, variant.meta.variant, run + 1);
                    eprintln!("  FAILED {msg}");
                    session.failures.push(msg);
                }
            }
            util::write_atomic(
                &dir.join("session.json"),
                serde_json::to_string_pretty(&session)?,
            )?;
        }
        let verdict = report::render(&dir, &session, &records, &expected)?;
        println!(
            "{}",
            report::table(&verdict::usable(&records, &expected), &verdict)
        );
        print!("{}", report::verdict_lines(&verdict));
        for f in &session.failures {
            println!("FAIL run {f}");
        }
        println!("report: {}", dir.join("report.md").display());
        if !session.failures.is_empty() || !verdict.passed() {
            bail!("qemu-test failed: see the FAIL lines above");
        }
        Ok(())
    }

    /// The A/A control: the chosen variant again, under its own name.
    fn aa_variant(&self, built: &[Built], runs: u32) -> Result<Option<Built>> {
        if self.no_aa || runs < 2 {
            return Ok(None);
        }
        let name = match &self.aa {
            Some(n) => n.clone(),
            None if built.iter().any(|b| b.meta.variant == "upstream") => "upstream".into(),
            None => return Ok(None),
        };
        let b = built
            .iter()
            .find(|b| b.meta.variant == name)
            .with_context(|| format!("--aa {name}: that variant is not selected"))?;
        let mut aa = b.clone();
        aa.meta.variant = report::aa_name(&name);
        Ok(Some(aa))
    }

    #[allow(clippy::too_many_arguments)]
    fn one(
        &self,
        sh: &Shell,
        dir: &Path,
        variant: &Built,
        scen: Scenario,
        run: u32,
        accel: Accel,
        initrd: &Path,
    ) -> Result<RunRecord> {
        let job = self.job(scen);
        let name = format!("{}-{}-{}", variant.meta.variant, scen.name, run + 1);
        let console = dir.join(format!("{name}.console.log"));
        let results = dir.join(format!("{name}.results.bin"));
        let verify = scen.verify && !self.quick && run == 0;
        let disk = if scen.disk {
            let path = dir.join(format!("{name}.ext4.img"));
            fs::remove_file(&path).ok();
            mkfs_ext4(sh, &path)?;
            Some(path)
        } else {
            None
        };
        let params = guest_params(scen, &job, self.sample_ms, verify);
        let mut cfg = self.guest.vm(
            variant,
            initrd.to_path_buf(),
            params,
            Console::File(console.clone()),
        );
        cfg.accel = accel;
        cfg.results = Some(results.clone());
        cfg.disk = disk.clone();
        let timeout = Duration::from_secs(
            self.timeout
                .unwrap_or(120 + u64::from(job.ramp_time) + u64::from(job.runtime)),
        );
        let out = qemu::run(sh, &cfg, timeout, &dir.join(format!("{name}.qemu.log")));
        if let Some(d) = &disk {
            fs::remove_file(d).ok(); // a sparse GiB per run is not worth keeping
        }
        let out = out?;
        let stream = out
            .outcome
            .map_err(|e| anyhow::anyhow!(e.explain(&console)))?;
        let samples = match stream.files.get("samples") {
            Some(bytes) => {
                let file = format!("{name}.samples.txt");
                fs::write(dir.join(&file), bytes).with_context(|| format!("writing {file}"))?;
                Some(file)
            }
            None => None,
        };
        let ctx = record::RunContext {
            variant: &variant.meta,
            scenario: scen.name,
            run,
            accel,
            cpus: self.guest.cpus,
            memory_mib: self.guest.memory,
            job: &job,
            wall_secs: out.wall_secs,
            console_log: file_name(&console),
            samples,
        };
        record::build(ctx, &stream)
    }
}

/// A fresh ext4 image, made on the host with e2fsprogs. Inode tables and the
/// journal are initialised now, so no lazy-init thread writes in the guest
/// while fio measures.
fn mkfs_ext4(sh: &Shell, path: &Path) -> Result<()> {
    cmd!(
        sh,
        "mkfs.ext4 -q -F -E lazy_itable_init=0,lazy_journal_init=0 -L wbstall {path} 1G"
    )
    .quiet()
    .ignore_stdout()
    .run()
    .with_context(|| format!("creating the ext4 disk {}", path.display()))
}

/// What produced a results directory (`session.json`).
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct Session {
    pub command: String,
    pub started: String,
    pub accel: Accel,
    pub cpus: u32,
    pub memory_mib: u32,
    pub runs: u32,
    pub quick: bool,
    pub toolchain: deps::Toolchain,
    pub host_cpus: usize,
    pub variants: Vec<kernel::VariantMeta>,
    pub scenarios: Vec<ScenarioInfo>,
    /// The expectations file the session was judged against, and its text.
    pub expected_file: String,
    pub expected: Option<String>,
    /// Boots that produced no record, and why.
    pub failures: Vec<String>,
}

impl Session {
    /// What the session set out to measure.
    pub fn plan(&self) -> verdict::Plan {
        verdict::Plan {
            variants: self.variants.iter().map(|v| v.variant.clone()).collect(),
            scenarios: self.scenarios.iter().map(|s| s.name.clone()).collect(),
            runs: self.runs,
        }
    }

    /// The expectations to judge the session by: `file` when given, else the
    /// text the session recorded.
    pub fn expectations(&self, file: Option<&Path>) -> Result<Expected> {
        match (file, &self.expected) {
            (Some(f), _) => {
                let text =
                    fs::read_to_string(f).with_context(|| format!("reading {}", f.display()))?;
                load_expectations(&text, f)
            }
            (None, Some(text)) => load_expectations(
                text,
                Path::new(&format!(
                    "{} (as recorded in session.json)",
                    self.expected_file
                )),
            ),
            (None, None) => bail!(
                "session.json records no expectations: pass --expected {}",
                verdict::EXPECTED_FILE
            ),
        }
    }
}

/// Parses an expectations file and checks every name in it against the
/// scenarios and `patches/variants.toml`.
fn load_expectations(text: &str, origin: &Path) -> Result<Expected> {
    let e = Expected::parse(text, origin)?;
    let variants = crate::kernel::patch::Variants::load(
        &util::project_root().join(crate::kernel::patch::VARIANTS_FILE),
    )?;
    let scenarios: Vec<&str> = scenario::ALL.iter().map(|s| s.name).collect();
    e.validate(&scenarios, &variants.names(), origin)?;
    Ok(e)
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct ScenarioInfo {
    pub name: String,
    pub what: String,
    pub job: Job,
}

fn file_name(p: &Path) -> String {
    p.file_name()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned()
}

/// The `wbstall.*` parameters of a run, read by the guest's init.
pub fn guest_params(
    scen: Scenario,
    job: &Job,
    sample_ms: u32,
    verify: bool,
) -> Vec<(String, String)> {
    let p = |k: &str, v: String| (k.to_string(), v);
    let mut params = vec![
        p("scenario", scen.name.to_string()),
        p("size", job.size.clone()),
        p("numjobs", job.numjobs.to_string()),
        p("runtime", job.runtime.to_string()),
        p("ramp", job.ramp_time.to_string()),
        p("bs", job.bs.clone()),
        p("sample_ms", sample_ms.to_string()),
        p("verify", u8::from(verify).to_string()),
    ];
    params.extend(scen.params.iter().map(|(k, v)| p(k, v.to_string())));
    params
}

/// The order of boots: run by run, every scenario, variants forward on even
/// runs and backward on odd ones (ABBA), so that drift hits all variants alike.
pub fn schedule<'a>(
    variants: &'a [Built],
    scenarios: &[Scenario],
    runs: u32,
) -> Vec<(u32, &'a Built, Scenario)> {
    let mut out = Vec::new();
    for run in 0..runs {
        for scen in scenarios {
            let order: Vec<&Built> = if run % 2 == 0 {
                variants.iter().collect()
            } else {
                variants.iter().rev().collect()
            };
            for v in order {
                out.push((run, v, *scen));
            }
        }
    }
    out
}

fn load_selected(selection: &Selection) -> Result<Vec<Built>> {
    let root = util::project_root();
    let variants =
        crate::kernel::patch::Variants::load(&root.join(crate::kernel::patch::VARIANTS_FILE))?;
    let mut names: Vec<String> = selection.variants.clone();
    if selection.all || (names.is_empty() && selection.patches.is_empty()) {
        names = variants.names().iter().map(|s| s.to_string()).collect();
    }
    if !selection.patches.is_empty() {
        bail!("--patch needs a build: drop --no-build");
    }
    let sources = module::source_sha256(&root.join(module::MODULE_DIR))?;
    names
        .iter()
        .map(|n| {
            let b = kernel::load_built(n)?;
            if b.meta.module_source_sha256 != sources {
                bail!(
                    "--no-build: the `{n}` kernel's wbstall.ko was built from other module \
                     sources than rust-module/ holds now (sha256 {} recorded, {sources} now): \
                     drop --no-build, or run `cargo xtask build-kernel --variant {n}`",
                    if b.meta.module_source_sha256.is_empty() {
                        "none"
                    } else {
                        &b.meta.module_source_sha256
                    }
                );
            }
            Ok(b)
        })
        .collect()
}

/// Boot one variant with an interactive shell on the terminal (for debugging).
#[derive(Debug, clap::Args)]
pub struct ShellCmd {
    /// The variant to boot.
    #[arg(long, value_name = "NAME")]
    pub variant: String,
    #[command(flatten)]
    pub source: SourceArgs,
    #[command(flatten)]
    pub guest: GuestArgs,
    /// Attach the ext4 disk image of the disk scenarios (created if missing).
    #[arg(long)]
    pub disk: Option<PathBuf>,
}

impl ShellCmd {
    pub fn run(self, sh: &Shell) -> Result<()> {
        let (b, initrd) = self.guest.one_variant(sh, &self.source, &self.variant)?;
        let params = vec![("scenario".into(), "shell".into())];
        let mut cfg = self.guest.vm(&b, initrd, params, Console::Stdio);
        if let Some(disk) = self.disk {
            if !disk.exists() {
                mkfs_ext4(sh, &disk)?;
            }
            cfg.disk = Some(disk);
        }
        eprintln!(
            "shell: booting {} ({:?}); Ctrl-A X quits QEMU",
            b.meta.variant, cfg.accel
        );
        qemu::interactive(sh, &cfg)
    }
}

/// Remove and load the wbstall module N times while writers dirty a FUSE
/// mount, and fail on any kernel warning.
#[derive(Debug, clap::Args)]
pub struct ModuleStress {
    /// The variant to boot. Default: regressed.
    #[arg(long, value_name = "NAME", default_value = "regressed")]
    pub variant: String,
    /// rmmod/insmod cycles.
    #[arg(long, default_value_t = 100, value_name = "N")]
    pub cycles: u32,
    #[command(flatten)]
    pub source: SourceArgs,
    #[command(flatten)]
    pub guest: GuestArgs,
}

impl ModuleStress {
    pub fn run(self, sh: &Shell) -> Result<()> {
        let (b, initrd) = self.guest.one_variant(sh, &self.source, &self.variant)?;
        let dir = util::target_dir()
            .join("module-stress")
            .join(util::timestamp());
        fs::create_dir_all(&dir).with_context(|| format!("creating {}", dir.display()))?;
        let console = dir.join("console.log");
        let params = vec![
            ("scenario".into(), "module-cycles".into()),
            ("cycles".into(), self.cycles.to_string()),
        ];
        let mut cfg = self
            .guest
            .vm(&b, initrd, params, Console::File(console.clone()));
        cfg.results = Some(dir.join("results.bin"));
        eprintln!(
            "module-stress: {} cycles on {} ({:?}); logs in {}",
            self.cycles,
            b.meta.variant,
            cfg.accel,
            dir.display()
        );
        let timeout = Duration::from_secs(120 + u64::from(self.cycles));
        let out = qemu::run(sh, &cfg, timeout, &dir.join("qemu.log"))?;
        let stream = out
            .outcome
            .map_err(|e| anyhow::anyhow!(e.explain(&console)))?;
        let cycles = stream.text("cycles").unwrap_or_default();
        // The console has every kernel message; dmesg's ring buffer may have wrapped
        // after a hundred loads (each prints its KUnit results).
        let warnings = record::warnings(&fs::read_to_string(&console).unwrap_or_default());
        let ktap = record::ktap(&stream);
        println!(
            "module-stress: {} in {:.0} s; KUnit at first load: {}",
            cycles.trim(),
            out.wall_secs,
            ktap.summary()
        );
        if !cycles.contains(&format!("cycles={}", self.cycles)) {
            bail!(
                "the guest did not complete {} cycles ({}); console: {}",
                self.cycles,
                cycles.trim(),
                console.display()
            );
        }
        if !warnings.is_empty() {
            bail!(
                "the kernel logged {} warning line(s) during the cycles:\n{}\nconsole: {}",
                warnings.len(),
                warnings.join("\n"),
                console.display()
            );
        }
        if !ktap.passed() {
            bail!("the module's KUnit tests did not pass: {}", ktap.summary());
        }
        println!("module-stress: no kernel warning on the console");
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn runs_are_interleaved_abba() {
        let b = |n: &str| Built {
            dir: PathBuf::from(n),
            meta: kernel::VariantMeta {
                variant: n.into(),
                ..Default::default()
            },
        };
        let built = [b("a"), b("b")];
        let order: Vec<(u32, &str)> = schedule(&built, &scenario::ALL[..1], 3)
            .into_iter()
            .map(|(run, v, _)| (run, v.meta.variant.as_str()))
            .collect();
        assert_eq!(
            order,
            [(0, "a"), (0, "b"), (1, "b"), (1, "a"), (2, "a"), (2, "b")]
        );
    }

    #[test]
    fn guest_params_carry_the_job() {
        let job = Job {
            size: "1G".into(),
            numjobs: 4,
            runtime: 20,
            ramp_time: 5,
            bs: "128k".into(),
        };
        let p = guest_params(scenario::ALL[0], &job, 100, true);
        let get = |k: &str| p.iter().find(|(a, _)| a == k).map(|(_, v)| v.as_str());
        assert_eq!(get("scenario"), Some("fuse-strictlimit"));
        assert_eq!(get("size"), Some("1G"));
        assert_eq!(get("runtime"), Some("20"));
        assert_eq!(get("verify"), Some("1"));
        // Every value must survive the kernel command line: no spaces.
        assert!(p.iter().all(|(k, v)| !k.contains(' ') && !v.contains(' ')));
    }

    #[test]
    fn the_fio_job_file_keeps_the_seed_options() {
        let text =
            std::fs::read_to_string(util::project_root().join("qemu/jobs/writeback.fio")).unwrap();
        for opt in [
            "ioengine=psync",
            "rw=write",
            "time_based",
            "group_reporting=1",
            "direct=0",
            "[writeback_test]",
        ] {
            assert!(text.lines().any(|l| l.trim() == opt), "missing {opt}");
        }
        for var in [
            "${WB_BS}",
            "${WB_SIZE}",
            "${WB_NUMJOBS}",
            "${WB_RAMP}",
            "${WB_RUNTIME}",
        ] {
            assert!(text.contains(var), "missing {var}");
        }
    }
}
