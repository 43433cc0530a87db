//! `qemu-test`'s inputs, every one checked before the long work starts: the
//! guest `--staged` names, the FUSE server, the scenarios, the variants and
//! the expectations they are judged by, the machine, the runs per cell, the
//! guests at a time, the roles and the accepted costs.

use std::{collections::BTreeMap, fs, path::PathBuf};

use anyhow::{bail, Context, Result};
use xshell::Shell;

use super::request::QemuTestRequest;
use crate::{
    analysis::{
        expected::{self, load_expectations, ExpectArgs, Expected},
        stats,
    },
    exit,
    guest::{
        fuse_server::{self, External, UserServer},
        plan::{self, Runs},
        qemu::{Clock, Machine},
        scenario::{self, Scenario},
        stage::{self, Staged},
    },
    kernel::{
        revs,
        variants::{Roles, Selection, UnderTest, Variant, Variants},
    },
    progress::{self, Event},
    util,
};

/// What a session is made of, every input checked: what `measure` builds
/// and boots, and what `--dry-run` shows.
pub(super) struct Inputs {
    /// The guest `--staged` names, checked whole and made for this plan.
    pub(super) staged: Option<Staged>,
    pub(super) user_server: Option<UserServer>,
    pub(super) scenarios: Vec<Scenario>,
    /// The FUSE server the plan's guest carries.
    pub(super) external: External,
    pub(super) selection: Selection,
    pub(super) selected: Vec<Variant>,
    pub(super) under_test: Vec<UnderTest>,
    /// The expectations file and what it (and `--expect`) says.
    pub(super) expected: (PathBuf, Expected),
    pub(super) machine: Machine,
    /// Runs per cell, and why, when derived.
    pub(super) runs: (Runs, Option<String>),
    /// Guests at a time, and the warning of a crowded host.
    pub(super) jobs_vm: (usize, Option<String>),
    pub(super) roles: Roles,
    /// `--accept-cost`, by scenario (`*`: all).
    pub(super) accepted_costs: BTreeMap<String, f64>,
}

impl QemuTestRequest {
    /// The guest `--staged DIR` names, checked whole (not yet against the plan).
    pub(super) fn staged_guest(&self) -> Result<Option<Staged>> {
        self.staged.as_deref().map(stage::open).transpose()
    }

    /// `--fuse-server`: with `--staged`, the server the `staged` guest carries
    /// (found where it was staged; never looked up here), else parsed and
    /// found on this host.
    pub fn user_server(&self, staged: Option<&Staged>) -> Result<Option<UserServer>> {
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
    pub fn scenarios(&self, user_server: Option<&UserServer>) -> Result<Vec<Scenario>> {
        scenario::select(&fuse_server::plan_names(
            &self.scenarios,
            user_server.is_some(),
        )?)
    }

    /// Runs per cell: --runs; 1 with --quick; on the virtual clock, what each
    /// planned scenario's measured floor needs for ±[`stats::TARGET_POINTS`]
    /// (said); else 3. With the reason, when derived.
    pub fn runs(&self, scenarios: &[Scenario], clock: Clock) -> Result<(Runs, Option<String>)> {
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
    pub(super) fn results_parent(&self) -> Result<PathBuf> {
        match &self.results_in {
            Some(d) => std::path::absolute(d)
                .with_context(|| format!("--results-in {}: making it absolute", d.display())),
            None => Ok(util::target_dir().join("results")),
        }
    }

    /// `--aa NAME` must name a selected variant: checked before anything is built.
    pub fn check_aa(&self) -> Result<()> {
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
    pub(super) fn expectations(
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
    pub(super) fn machine_line(machine: &Machine, jobs_vm: usize) -> String {
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

    /// Every input of the session, checked before the long work starts.
    pub(super) fn inputs(&self, sh: &Shell) -> Result<Inputs> {
        self.inputs_for(sh, None)
    }

    /// [`Self::inputs`], of `points` instead of the named scenarios when given.
    pub(super) fn inputs_for(&self, sh: &Shell, points: Option<Vec<Scenario>>) -> Result<Inputs> {
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
        let machine = self.machine.machine()?;
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
}
