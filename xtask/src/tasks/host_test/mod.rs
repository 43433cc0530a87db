//! `cargo xtask host-test`: the FUSE scenarios on the host's running kernel,
//! no QEMU: "is *my* machine affected?". The guest's own scripts run on the
//! host (`qemu/host-init`), the tracefs detector classes the sleeps in a
//! tracing instance of its own, and the records, verdict and report are
//! `qemu-test`'s. Everything it changes is put back on every exit. Its flags
//! make a [`HostPlan`]; the session stage runs it ([`host_session`]).

use std::fs;

use anyhow::{bail, Context, Result};
use xshell::Shell;

use crate::{
    analysis::expected::{self, load_expectations, ExpectArgs, Expected},
    exit,
    guest::{
        fuse_server::{self, UserServer},
        scenario::{self, Scenario},
    },
    kernel::variants::Variants,
    progress::{self, Event},
    session::host_session::{self, HostPlan, HOST},
    tasks::args::job::JobArgs,
    util,
};

/// Run the FUSE scenarios on this machine's running kernel (root, tracefs,
/// FUSE; no QEMU), classed by the tracefs detector and judged like qemu-test.
#[derive(Debug, clap::Args)]
pub struct HostTest {
    /// Scenario to run (repeatable): fuse-strictlimit, fuse-nostrict,
    /// fuse-passthrough, or ext4-global (on a loop device). Default:
    /// fuse-strictlimit and fuse-nostrict.
    #[arg(long = "scenario", value_name = "NAME")]
    pub scenarios: Vec<String>,
    #[command(flatten)]
    pub job: JobArgs,
    /// Runs per scenario. Default: 3, or 1 with --quick.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=100))]
    pub runs: Option<u32>,
    /// What the running kernel must do: `CLASS` in every scenario, or
    /// `SCENARIO=CLASS` (repeatable; ok, stall or idle). Default: what the
    /// reference variant (the fixed kernel) is expected to do, so a kernel
    /// that stalls fails: it is affected.
    #[arg(long = "expect", value_name = "[SCENARIO=]CLASS")]
    pub expect: Vec<String>,
    /// Your own FUSE server in fuse-passthrough instead of libfuse's
    /// passthrough_ll: PROGRAM and its arguments; the mount point is added last.
    #[arg(long, value_name = "'PROGRAM ARGS'")]
    pub fuse_server: Option<String>,
    /// Seconds before a run is declared hung and killed. Default: 60 + ramp + runtime.
    #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u64).range(1..))]
    pub timeout: Option<u64>,
}

/// The scenarios the host can run: the FUSE ones, and the ext4 control on a
/// loop device (memcg-ext4 needs a cgroup2 memory controller of its own).
const HOST_SCENARIOS: [&str; 4] = [
    "fuse-strictlimit",
    "fuse-nostrict",
    fuse_server::SCENARIO,
    "ext4-global",
];
const DEFAULT_SCENARIOS: [&str; 2] = ["fuse-strictlimit", "fuse-nostrict"];

impl HostTest {
    pub fn run(self, sh: &Shell) -> Result<()> {
        let scenarios = self.scenarios()?;
        let plan = HostPlan {
            jobs: scenarios
                .iter()
                .map(|s| (s.name, self.job.of(*s)))
                .collect(),
            infos: self.job.infos(&scenarios, |_| self.runs()),
            runs: self.runs(),
            quick: self.job.quick,
            sample_ms: self.job.sample_ms,
            timeout: self.timeout,
            fuse_server: self.fuse_server.clone(),
            user: self.user_server()?,
            expected: self.expectations(&scenarios)?,
            scenarios,
        };
        let out = host_session::boot_on_host(sh, plan)?;
        print!("{}", out.summary);
        out.result("host-test")
    }

    fn runs(&self) -> u32 {
        self.runs.unwrap_or(if self.job.quick { 1 } else { 3 })
    }

    /// `--scenario`, which must name FUSE scenarios; else the default two.
    fn scenarios(&self) -> Result<Vec<Scenario>> {
        let mut names = fuse_server::plan_names(&self.scenarios, self.fuse_server.is_some())?;
        if names.is_empty() {
            names = DEFAULT_SCENARIOS.iter().map(|s| s.to_string()).collect();
        }
        if let Some(n) = names.iter().find(|n| !HOST_SCENARIOS.contains(&n.as_str())) {
            bail!(exit::usage(format!(
                "host-test runs {}; `{n}` needs what only a guest has here (its writers \
                 in a memcg of their own under a cgroup2 memory controller): run it with \
                 `cargo xtask qemu-test --scenario {n}`",
                HOST_SCENARIOS.join(", ")
            )));
        }
        scenario::select(&names)
    }

    fn user_server(&self) -> Result<Option<UserServer>> {
        let Some(line) = &self.fuse_server else {
            return Ok(None);
        };
        let path = std::env::var("PATH").unwrap_or_default();
        let u = UserServer::parse(line, &path)?;
        // On the host the server runs from where it is.
        let mut words = vec![u.program.display().to_string()];
        words.extend(u.args.iter().cloned());
        Ok(Some(UserServer {
            line: words.join(" "),
            ..u
        }))
    }

    /// qemu/expected.toml's criteria, and what the running kernel must do:
    /// `--expect`, else what the reference variant does (a kernel that has
    /// the fix does not stall; one that stalls is affected).
    fn expectations(&self, scenarios: &[Scenario]) -> Result<Expected> {
        let file = util::project_root().join(expected::EXPECTED_FILE);
        let text =
            fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?;
        let mut e = load_expectations(&text, &file, &[HOST])
            .with_context(|| exit::usage("reading the expectations"))?;
        let all: Vec<&str> = scenario::all()?.iter().map(|s| s.name).collect();
        let given = ExpectArgs::parse(&self.expect, &all)
            .with_context(|| exit::usage("reading --expect"))?;
        let reference = Variants::repo()?.roles.reference;
        let names: Vec<&str> = scenarios.iter().map(|s| s.name).collect();
        let said = e.expect_patch(HOST, &reference, &names, &given);
        progress::emit(Event::Note(&format!(
            "the running kernel is expected to be: {}",
            Expected::said(&said)
        )));
        Ok(e)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(argv: &[&str]) -> HostTest {
        crate::tasks::args::try_parse_from::<HostTest>(
            std::iter::once("host-test").chain(argv.iter().copied()),
        )
        .unwrap()
    }

    /// The FUSE scenarios and the ext4 control run on the host; the memcg
    /// one is refused saying where it runs; --fuse-server needs its scenario.
    #[test]
    fn the_host_runs_what_it_can_and_refuses_the_rest_by_name() {
        let names = |h: HostTest| -> Vec<&'static str> {
            h.scenarios().unwrap().iter().map(|s| s.name).collect()
        };
        assert_eq!(names(parse(&[])), DEFAULT_SCENARIOS);
        assert_eq!(
            names(parse(&["--scenario", "ext4-global"])),
            ["ext4-global"]
        );
        assert_eq!(
            names(parse(&["--fuse-server", "x"])),
            [fuse_server::SCENARIO]
        );
        let e = parse(&["--scenario", "memcg-ext4"])
            .scenarios()
            .unwrap_err();
        assert!(
            format!("{e:#}").contains("qemu-test --scenario memcg-ext4"),
            "{e:#}"
        );
        let e = parse(&["--scenario", "fuse-strictlimit", "--fuse-server", "x"])
            .scenarios()
            .unwrap_err();
        assert!(
            format!("{e:#}").contains("--scenario fuse-passthrough"),
            "{e:#}"
        );
    }
}
