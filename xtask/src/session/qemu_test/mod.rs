//! A `qemu-test` session made from its request (the task's flags, resolved
//! into plain values): its inputs checked ([`inputs`]), the roles it is
//! reported by ([`roles`]), the costs it judges by ([`costs`]), its boots
//! planned ([`planning`]), the guest it boots ([`guest`]: built here or
//! staged), the `--dry-run` preview ([`dry_run`]) and a hunt's points
//! ([`points`]); then booted, recorded, judged and rendered by
//! [`super::guest_session`].

mod costs;
pub mod dry_run;
mod guest;
mod inputs;
mod planning;
mod points;
mod request;
mod roles;

use anyhow::{Context, Result};
use xshell::Shell;

pub use self::request::QemuTestRequest;
use self::{dry_run::Preview, inputs::Inputs};
use crate::{
    deps,
    guest::{
        plan::{self, Boot, Plan},
        run_id::RunId,
        scenario,
    },
    kernel::{build::Built, selected, variants::Selection},
    progress::{self, Event},
    results::session::{ScenarioInfo, Session},
    session::{
        boot_all::{initrds, Outcome, Seer},
        guest_session::{boot_in_guests, GuestPlan, PlanLine},
        resume,
    },
    stamp::Stamp,
    util,
};

impl QemuTestRequest {
    /// The selected kernels: built, or with `--no-build` as they are.
    fn kernels(
        &self,
        sh: &Shell,
        tc: &deps::Toolchain,
        selection: &Selection,
    ) -> Result<Vec<Built>> {
        let how = (self.no_build, self.jobs);
        selected::kernels(sh, tc, selection, &self.source, how, &self.flavour)
    }

    fn session(&self, tc: &deps::Toolchain, built: &[Built], i: &Inputs) -> Result<Session> {
        let (machine, runs, expected) = (&i.machine, &i.runs.0, &i.expected);
        Ok(Session {
            command: self.command.clone(),
            harness: None,
            reporter: None,
            started: Stamp::now(),
            machine: machine.clone(),
            runs: runs.most(),
            quick: self.job.quick,
            toolchain: tc.clone(),
            host_cpus: std::thread::available_parallelism().map_or(0, |n| n.get()),
            variants: built.iter().map(|b| b.meta.clone()).collect(),
            scenarios: ScenarioInfo::each(&i.scenarios, |s| self.job.of(s), |s| runs.of(s)),
            expected_file: expected.0.display().to_string(),
            // What the session is judged by, the patch's expectations included.
            expected: Some(toml::to_string(&expected.1).context("writing the expectations down")?),
            failures: Vec::new(),
            roles: Some(i.roles.clone()),
            shard: self.shard,
            jobs_vm: i.jobs_vm.0,
            under_test: i.under_test.clone(),
            fuse_server: i.user_server.as_ref().map(|u| u.line.clone()),
            args: self.args.clone(),
            resumed: Vec::new(),
            floors: self.floors(&i.scenarios, machine)?,
            accepted_costs: i.accepted_costs.clone(),
            more_runs: Vec::new(),
        })
    }

    /// `--dry-run`: the plan from the flags and the kernels on disk alone.
    pub fn preview(&self, sh: &Shell) -> Result<Preview> {
        let i = self.inputs(sh)?;
        let flavour = self.flavour.with_source(&self.source)?;
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
            no_build: self.no_build,
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

    /// Plans, boots and judges into a new results directory, or with
    /// `resumed` the interrupted one; the one judgement shown to `see` too
    /// (CI's checks take what they check from it).
    pub fn measure(
        &self,
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
        let mut built = self.kernels(sh, &tc, &i.selection)?;
        if let Some(aa) = self.aa_variant(&built, runs.most(), &i.roles)? {
            built.push(aa);
        }
        let (base, tc) = self.guest_base(sh, tc, &built, &i.external, i.staged.as_ref())?;
        let detectors = plan::detectors(self.detector, &built)?;
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
        boot_in_guests(
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
        )
    }
}
