//! `cargo xtask qemu-test`: build the variants, plan every boot, boot each
//! one per scenario under QEMU, turn what came back into records, and judge
//! them against `qemu/expected.toml`. Its parts: the `roles` a session is
//! reported by, the `planning` of its boots, the `costs` it judges by, the
//! `dry_run` preview and the `guest` it boots (built here or staged); the
//! session stage boots, records, judges and renders ([`crate::session`]).

mod costs;
pub mod dry_run;
mod guest;
mod planning;
mod points;
mod roles;

use std::{
    collections::BTreeMap,
    fs,
    path::{Path, PathBuf},
};

use anyhow::{bail, Context, Result};
use xshell::Shell;

use self::dry_run::Preview;
use crate::{
    analysis::{
        expected::{self, load_expectations, ExpectArgs, Expected},
        stats,
    },
    cli::heading,
    deps, exit,
    guest::{
        fuse_server::{self, External, UserServer},
        plan::{self, Boot, Plan, Runs},
        qemu::{Clock, Machine},
        run_id::RunId,
        scenario::{self, Scenario},
        stage::{self, Staged},
    },
    kernel::{
        build::Built,
        revs,
        source::SourceArgs,
        variants::{Roles, Selection, UnderTest, Variant, Variants},
    },
    progress::{self, Event},
    results::session::Session,
    session::{
        boot_all::{initrds, Outcome, Seer},
        guest_session::{boot_in_guests, GuestPlan, PlanLine},
        resume,
    },
    stamp::Stamp,
    tasks::args::{self, guest::GuestArgs, job::JobArgs},
    util,
};

/// Boot every variant under QEMU, run the scenarios, and judge the results.
#[derive(Debug, clap::Args)]
pub struct QemuTest {
    #[command(flatten)]
    pub selection: Selection,
    #[command(flatten)]
    pub source: SourceArgs,
    /// Scenario to run (repeatable). Default: those of the default plan
    /// (all but fuse-passthrough, which runs when named or with --fuse-server).
    #[arg(long = "scenario", value_name = "NAME", help_heading = heading::JOB)]
    pub scenarios: Vec<String>,
    /// Your own FUSE server in the fuse-passthrough scenario instead of
    /// libfuse's passthrough_ll: PROGRAM (a path, or a name on PATH) and its
    /// arguments, split at white space; the mount point is added last, and
    /// /run/pt-src is an empty tmpfs directory it may serve. It and the
    /// libraries ldd lists go into the guest (with --staged, the guest carries
    /// the one it was staged with: this host need not have it). A mount
    /// without the writeback cache cannot show the bug: such runs are left
    /// out, said why.
    #[arg(long, value_name = "'PROGRAM ARGS'", help_heading = heading::JOB)]
    pub fuse_server: Option<String>,
    /// Boots per variant and scenario, interleaved (ABBA) across variants.
    /// Default: 3, or 1 with --quick.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=100), help_heading = heading::JOB)]
    pub runs: Option<u32>,
    #[command(flatten)]
    pub job: JobArgs,
    /// Seconds before a guest is declared hung and killed. Default: 120 + ramp + runtime.
    #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..), help_heading = heading::JOB)]
    pub timeout: Option<u64>,
    /// The variant booted a second time as its own A/A control, to measure the
    /// noise floor (only with --runs >= 2). Default: upstream when selected.
    #[arg(long, value_name = "NAME", help_heading = heading::JUDGING)]
    pub aa: Option<String>,
    /// Do not run the A/A control.
    #[arg(long, help_heading = heading::JUDGING)]
    pub no_aa: bool,
    /// The hypotheses to judge against. Default: qemu/expected.toml.
    #[arg(long, value_name = "FILE", help_heading = heading::JUDGING)]
    pub expected: Option<PathBuf>,
    /// What the patch under test (--patch, --rev) must do: `CLASS` in every scenario,
    /// or `SCENARIO=CLASS` (repeatable; CLASS is ok, stall or idle). Default:
    /// what the expectations file says of the reference variant (a fix must
    /// behave as the shipped fix does).
    #[arg(long = "expect", value_name = "[SCENARIO=]CLASS", help_heading = heading::JUDGING)]
    pub expect: Vec<String>,
    /// A cost the patch under test (--patch, --rev) may have: PCT% of any
    /// judged metric, in SCENARIO or in every scenario (repeatable). A cost
    /// whose interval lies within it is reported `worse (accepted)` and does
    /// not fail the verdict; one that may exceed it does. Default: none (a
    /// patch that is `worse` than the reference fails).
    #[arg(long = "accept-cost", value_name = "[SCENARIO=]PCT", help_heading = heading::JUDGING)]
    pub accept_cost: Vec<String>,
    /// A against B: the %change of every metric with its interval, beside the
    /// A/A noise floor (repeatable; any two measured variants, --patch ones
    /// included, e.g. `--compare patch-fix upstream`).
    #[arg(long, num_args = 2, value_names = ["A", "B"], action = clap::ArgAction::Append, help_heading = heading::JUDGING)]
    pub compare: Vec<String>,
    /// Run only the I-th of N deterministic slices of the plan (each keeps its
    /// boots in ABBA order), for a CI job matrix; `cargo xtask merge` joins the
    /// N result directories and judges them.
    #[arg(long, value_name = "I/N", help_heading = heading::SESSIONS)]
    pub shard: Option<plan::Shard>,
    /// Guests booted at once, started in plan order as earlier ones end;
    /// records stay in plan order. At most the host's CPUs / --cpus (one host
    /// thread per guest with the virtual clock). Throughput numbers stay
    /// comparable only on the virtual clock. Default: one per host CPU on the
    /// virtual clock, 1 on the real one.
    #[arg(long, value_name = "N", help_heading = heading::SESSIONS)]
    pub jobs_vm: Option<usize>,
    /// Print the plan and exit, building and booting nothing: the kernels to
    /// build or reuse, the scenarios and runs per cell, the number of boots,
    /// and the time they take by docs/measurements.md's times per boot.
    #[arg(long, alias = "plan", help_heading = heading::SESSIONS)]
    pub dry_run: bool,
    /// Make the results directory (a new <timestamp> directory) inside DIR.
    /// Default: target/wbstall/results. `cargo xtask slurm` gives each shard
    /// its own, so the merge job finds each shard's results.
    #[arg(long, value_name = "DIR", help_heading = heading::SESSIONS)]
    pub results_in: Option<PathBuf>,
    /// Go on with the interrupted session in DIR (a results directory): its
    /// own flags, its kernels (checked by hash, never rebuilt), only the boots
    /// it has no record of; then the whole session is judged. Give no other
    /// flag but --retry-failed.
    #[arg(long, value_name = "DIR", help_heading = heading::SESSIONS)]
    pub resume: Option<PathBuf>,
    /// With --resume: boot again the boots that failed (by default a failed
    /// boot is done, its failure kept in the session).
    #[arg(long, requires = "resume", help_heading = heading::SESSIONS)]
    pub retry_failed: bool,
    /// With --no-build: boot the guest `cargo xtask slurm` staged in DIR
    /// (its initramfs, built on the submitting host) instead of making it
    /// here, so that this host needs no cargo, no fio source and no network.
    /// Missing, changed or staged for another plan, it is refused, never rebuilt.
    #[arg(long, value_name = "DIR", requires = "no_build", help_heading = heading::SESSIONS)]
    pub staged: Option<PathBuf>,
    /// Last: the debugging flags, at the end of `--help`, are GuestArgs'.
    #[command(flatten)]
    pub guest: GuestArgs,
}

/// What a session is made of, every input checked: what `measure` builds
/// and boots, and what `--dry-run` shows.
struct Inputs {
    /// The guest `--staged` names, checked whole and made for this plan.
    staged: Option<Staged>,
    user_server: Option<UserServer>,
    scenarios: Vec<Scenario>,
    /// The FUSE server the plan's guest carries.
    external: External,
    selection: Selection,
    selected: Vec<Variant>,
    under_test: Vec<UnderTest>,
    /// The expectations file and what it (and `--expect`) says.
    expected: (PathBuf, Expected),
    machine: Machine,
    /// Runs per cell, and why, when derived.
    runs: (Runs, Option<String>),
    /// Guests at a time, and the warning of a crowded host.
    jobs_vm: (usize, Option<String>),
    roles: Roles,
    /// `--accept-cost`, by scenario (`*`: all).
    accepted_costs: BTreeMap<String, f64>,
}

impl QemuTest {
    /// The guest `--staged DIR` names, checked whole (not yet against the plan).
    fn staged_guest(&self) -> Result<Option<Staged>> {
        self.staged.as_deref().map(stage::open).transpose()
    }

    /// `--fuse-server`: with `--staged`, the server the `staged` guest carries
    /// (found where it was staged; never looked up here), else parsed and
    /// found on this host.
    fn user_server(&self, staged: Option<&Staged>) -> Result<Option<UserServer>> {
        let Some(line) = &self.fuse_server else {
            return Ok(None);
        };
        if let Some(s) = staged {
            return s.user_server(line).map(Some);
        }
        let path = std::env::var("PATH").unwrap_or_default();
        UserServer::parse(line, &path).map(Some)
    }

    /// The scenarios of the plan: `--scenario`, else the default plan's; with
    /// `--fuse-server`, the scenario that runs it (alone, unless named).
    fn scenarios(&self, user_server: Option<&UserServer>) -> Result<Vec<Scenario>> {
        scenario::select(&fuse_server::plan_names(
            &self.scenarios,
            user_server.is_some(),
        )?)
    }

    /// Runs per cell: --runs; 1 with --quick; on the virtual clock, what each
    /// planned scenario's measured floor needs for ±[`stats::TARGET_POINTS`]
    /// (said); else 3. With the reason, when derived.
    fn runs(&self, scenarios: &[Scenario], clock: Clock) -> Result<(Runs, Option<String>)> {
        if let Some(n) = self.runs {
            return match n {
                0 => bail!(exit::usage("--runs must be at least 1")),
                n => Ok((Runs::uniform(scenarios, n), None)),
            };
        }
        if self.job.quick {
            return Ok((Runs::uniform(scenarios, 1), None));
        }
        let (runs, why) = stats::runs_for_floors(scenarios, clock);
        Ok((runs, Some(why)))
    }

    /// Where the results directory is made: `--results-in`, else target/wbstall/results.
    fn results_parent(&self) -> Result<PathBuf> {
        match &self.results_in {
            Some(d) => std::path::absolute(d)
                .with_context(|| format!("--results-in {}: making it absolute", d.display())),
            None => Ok(util::target_dir().join("results")),
        }
    }

    /// `--aa NAME` must name a selected variant: checked before anything is built.
    fn check_aa(&self) -> Result<()> {
        let Some(name) = &self.aa else {
            return Ok(());
        };
        let variants = Variants::repo()?;
        let selected: Vec<String> = self
            .selection
            .resolve(&variants)?
            .into_iter()
            .map(|v| v.name)
            .collect();
        if !selected.contains(name) {
            bail!(exit::usage(format!(
                "--aa {name}: that variant is not selected (selected: {})",
                selected.join(", ")
            )));
        }
        Ok(())
    }

    /// The expectations file and the expectations, checked, with those of
    /// each patch under test added (`--expect`, else the reference's); says
    /// where each of the patch's came from.
    fn expectations(
        &self,
        under_test: &[UnderTest],
        scenarios: &[Scenario],
        reference: &str,
    ) -> Result<(PathBuf, Expected)> {
        let file = self
            .expected
            .clone()
            .unwrap_or_else(|| util::project_root().join(expected::EXPECTED_FILE));
        let text = fs::read_to_string(&file)
            .with_context(|| exit::usage(format!("reading {}", file.display())))?;
        let names: Vec<&str> = under_test.iter().map(|u| u.variant.as_str()).collect();
        let mut expected = load_expectations(&text, &file, &names)
            .with_context(|| exit::usage("reading the expectations"))?;
        let scenario_names: Vec<&str> = scenarios.iter().map(|s| s.name).collect();
        let all: Vec<&str> = scenario::all()?.iter().map(|s| s.name).collect();
        let given = ExpectArgs::parse(&self.expect, &all)
            .with_context(|| exit::usage("reading --expect"))?;
        if under_test.is_empty() && !self.expect.is_empty() {
            bail!(exit::usage(format!(
                "--expect is what a patch under test must do: give it with --patch FILE or \
                 --rev REV (the variants of patches/variants.toml are judged by {})",
                file.display()
            )));
        }
        for u in under_test {
            progress::emit(Event::Note(&format!(
                "{}: {} on `{}`{}",
                u.variant,
                u.file,
                u.base,
                // A --rev is on its tree's working copy, not on a variant.
                if self.selection.base.is_none() && !u.other_base.is_empty() {
                    format!(
                        " (the reference, where a patch against mainline applies; \
                         --base {} for a fix of the regression itself)",
                        u.other_base
                    )
                } else {
                    String::new()
                }
            )));
            let said = expected.expect_patch(&u.variant, reference, &scenario_names, &given);
            progress::emit(Event::Note(&format!(
                "{} is expected to be: {}",
                u.variant,
                Expected::said(&said)
            )));
        }
        Ok((file, expected))
    }

    /// How the plan line names the machine.
    fn machine_line(machine: &Machine, jobs_vm: usize) -> String {
        format!(
            "accel {:?}, clock {}, {} CPUs, {} MiB{}",
            machine.accel,
            machine.clock,
            machine.cpus,
            machine.memory_mib,
            match jobs_vm {
                1 => String::new(),
                n => format!(", {n} guests at a time"),
            }
        )
    }

    fn session(&self, tc: &deps::Toolchain, built: &[Built], i: &Inputs) -> Result<Session> {
        let (machine, runs, expected) = (&i.machine, &i.runs.0, &i.expected);
        Ok(Session {
            command: std::env::args().skip(1).collect::<Vec<_>>().join(" "),
            harness: None,
            reporter: None,
            started: Stamp::now(),
            machine: machine.clone(),
            runs: runs.most(),
            quick: self.job.quick,
            toolchain: tc.clone(),
            host_cpus: std::thread::available_parallelism().map_or(0, |n| n.get()),
            variants: built.iter().map(|b| b.meta.clone()).collect(),
            scenarios: self.job.infos(&i.scenarios, |s| runs.of(s)),
            expected_file: expected.0.display().to_string(),
            // What the session is judged by, the patch's expectations included.
            expected: Some(toml::to_string(&expected.1).context("writing the expectations down")?),
            failures: Vec::new(),
            roles: Some(i.roles.clone()),
            shard: self.shard,
            jobs_vm: i.jobs_vm.0,
            under_test: i.under_test.clone(),
            fuse_server: i.user_server.as_ref().map(|u| u.line.clone()),
            args: own_args(),
            resumed: Vec::new(),
            floors: self.floors(&i.scenarios, machine)?,
            accepted_costs: i.accepted_costs.clone(),
            more_runs: Vec::new(),
        })
    }

    pub fn run(self, sh: &Shell) -> Result<()> {
        if self.dry_run {
            print!("{}", self.preview(sh)?.render());
            return Ok(());
        }
        let out = match self.resume.clone() {
            Some(dir) => {
                let (q, r) = self.resumed(&dir)?;
                q.measure_into(sh, Some(r), None)?
            }
            None => self.measure(sh)?,
        };
        out.result("qemu-test")
    }

    /// Every input of the session, checked before the long work starts.
    fn inputs(&self, sh: &Shell) -> Result<Inputs> {
        self.inputs_for(sh, None)
    }

    /// [`Self::inputs`], of `points` instead of the named scenarios when given.
    fn inputs_for(&self, sh: &Shell, points: Option<Vec<Scenario>>) -> Result<Inputs> {
        let staged = self.staged_guest()?;
        let user_server = self.user_server(staged.as_ref())?;
        let scenarios = match points {
            Some(p) => p,
            None => self.scenarios(user_server.as_ref())?,
        };
        let external = Self::external_for(&scenarios, user_server.clone(), staged.as_ref())?;
        let variants = Variants::repo()?;
        let selection = revs::select(sh, &self.selection, &self.source)?;
        let selected = selection.resolve(&variants)?;
        let under_test: Vec<UnderTest> = selected
            .iter()
            .filter_map(|v| v.under_test.clone())
            .collect();
        let (expected_file, expected) =
            self.expectations(&under_test, &scenarios, &variants.roles.reference)?;
        self.check_aa()?;
        // Checked before anything is built.
        let machine = self.guest.machine()?;
        plan::check_clock(&machine, &scenarios)?;
        let (runs, runs_why) = self.runs(&scenarios, machine.clock)?;
        let host_cpus = std::thread::available_parallelism().map_or(1, |n| n.get());
        let jobs_vm =
            (self.jobs_vm).unwrap_or_else(|| plan::default_jobs_vm(host_cpus, machine.clock));
        let crowded = plan::check_jobs_vm(jobs_vm, host_cpus, machine.cpus, machine.clock)?;
        let roles = self.roles(&variants, &selected, runs.most())?;
        let accepted_costs = self.accepted_costs(&under_test, &scenarios)?;
        Ok(Inputs {
            staged,
            user_server,
            scenarios,
            external,
            selection,
            selected,
            under_test,
            expected: (expected_file, expected),
            machine,
            runs: (runs, runs_why),
            jobs_vm: (jobs_vm, crowded),
            roles,
            accepted_costs,
        })
    }

    /// `--dry-run`: the plan from the flags and the kernels on disk alone.
    fn preview(&self, sh: &Shell) -> Result<Preview> {
        let i = self.inputs(sh)?;
        let flavour = self.guest.flavour.with_source(&self.source)?;
        let runs = &i.runs.0;
        let names: Vec<String> = i.selected.iter().map(|v| v.name.clone()).collect();
        let aa = self.aa_of(&names, runs.most(), &i.roles);
        let kernels = dry_run::kernels(&names, aa, &flavour);
        let cells = self.cells(&kernels, &i.scenarios, runs);
        for note in i.runs.1.iter().chain(&i.jobs_vm.1) {
            progress::emit(Event::Note(note));
        }
        Ok(Preview {
            machine: Self::machine_line(&i.machine, i.jobs_vm.0),
            kernels_dir: flavour.kernels_dir()?,
            no_build: self.guest.no_build,
            scenarios: (i.scenarios.iter())
                .map(|s| (s.name.to_string(), runs.of(s.name), self.job.of(*s)))
                .collect(),
            boots: (cells.iter())
                .map(|(_, k, s)| (k.name.clone(), s.name.to_string()))
                .collect(),
            kernels,
            runs: runs.to_string(),
            jobs_vm: i.jobs_vm.0,
            shard: self.shard,
            more: self.cost_boots(&i)?,
            clock: i.machine.clock,
            setup: crate::deps::check_for(sh, flavour.no_rust).is_err(),
        })
    }

    /// `--resume DIR`: the session's own flags, its directory taken, its
    /// kernels never rebuilt; any other flag but --retry-failed is refused.
    fn resumed(mut self, dir: &Path) -> Result<(QemuTest, resume::Resumed)> {
        let retry_failed = std::mem::take(&mut self.retry_failed);
        self.resume = None;
        let bare = args::try_parse_from::<QemuTest>(["qemu-test"]).context("the default flags")?;
        if format!("{self:?}") != format!("{bare:?}") {
            bail!(exit::usage(format!(
                "--resume {}: the session's own flags are used: give no other flag but \
                 --retry-failed",
                dir.display()
            )));
        }
        let r = resume::open(dir)?;
        let flags = resume::flags(&r)?;
        let argv = std::iter::once("qemu-test").chain(flags.iter().map(String::as_str));
        let mut q = args::try_parse_from::<QemuTest>(argv)
            .with_context(|| format!("parsing the flags {} recorded", dir.display()))?;
        q.guest.no_build = true;
        q.retry_failed = retry_failed;
        Ok((q, r))
    }

    /// Plans, boots and judges; prints the table and the verdict.
    pub fn measure(self, sh: &Shell) -> Result<Outcome> {
        self.measure_into(sh, None, None)
    }

    /// [`Self::measure`], the one judgement shown to `see` as well (CI's
    /// checks take what they check from it).
    pub fn measure_seeing(self, sh: &Shell, see: Seer) -> Result<Outcome> {
        self.measure_into(sh, None, Some(see))
    }

    /// [`Self::measure`], into a new results directory or the `resumed` one.
    fn measure_into(
        self,
        sh: &Shell,
        resumed: Option<resume::Resumed>,
        see: Option<Seer>,
    ) -> Result<Outcome> {
        let parent = self.results_parent()?;
        if resumed.is_none() {
            // Before anything is built: a results directory that cannot be
            // made fails at once.
            util::check_writable(&parent)?;
        }
        let tc = self.tools(sh)?;
        let i = self.inputs(sh)?;
        let (scenarios, machine, expected) = (&i.scenarios, &i.machine, &i.expected.1);
        let (runs, jobs_vm) = (&i.runs.0, i.jobs_vm.0);
        let mut built = self.guest.kernels(sh, &tc, &i.selection, &self.source)?;
        if let Some(aa) = self.aa_variant(&built, runs.most(), &i.roles)? {
            built.push(aa);
        }
        let (base, tc) = self.guest_base(sh, tc, &built, &i.external, i.staged.as_ref())?;
        let detectors = self.guest.detectors(&built)?;
        let initrds = initrds(&base, &built)?;
        let plan = self.plan(&built, &initrds, scenarios, runs, machine)?;
        let boot_of = |id: &RunId| -> Result<Boot> {
            let kernel = (built.iter().find(|b| b.meta.variant == id.variant))
                .with_context(|| format!("{id}: no kernel of {} was built", id.variant))?;
            let scen = scenario::by_name(&id.scenario)?;
            let b = self.boot(kernel, &initrds, scen, id.run, runs.of(scen.name), machine)?;
            Ok(plan::with_detectors(Plan { boots: vec![b] }, &detectors)
                .boots
                .remove(0))
        };
        let out = boot_in_guests(
            sh,
            GuestPlan {
                session: self.session(&tc, &built, &i)?,
                built: &built,
                parent,
                resumed: resumed.map(|r| (r, self.retry_failed)),
                plan: plan::with_detectors(plan, &detectors),
                jobs_vm,
                shard: self.shard,
                expected,
                boot_of: &boot_of,
                plan_line: PlanLine {
                    scenarios: scenarios.len(),
                    runs: runs.to_string(),
                    machine: Self::machine_line(machine, jobs_vm),
                    notes: i.runs.1.iter().chain(&i.jobs_vm.1).cloned().collect(),
                },
                see,
            },
        )?;
        print!("{}", out.summary);
        Ok(out)
    }
}

/// The flags of this process's `qemu-test` (`cargo xtask qemu-test ARGS`),
/// word by word, for `--resume`; none when another task runs it.
fn own_args() -> Option<Vec<String>> {
    let mut args = std::env::args().skip(1);
    (args.next().as_deref() == Some("qemu-test")).then(|| args.collect())
}

#[cfg(test)]
mod tests;
