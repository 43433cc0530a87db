//! The fio job's flags, shared by the tasks that run the scenarios
//! (`qemu-test`, `host-test`): one owner of their meaning and defaults.

use crate::{
    guest::{
        job::{self, Job},
        job_spec::JobSpec,
        scenario::Scenario,
    },
    results::session::ScenarioInfo,
};

/// The job's shape (fio's options) and the sampler beside it.
#[derive(Debug, Clone, clap::Args)]
#[command(next_help_heading = crate::cli::heading::JOB)]
pub struct JobArgs {
    /// A short job for CI: fio --runtime=5 --ramp_time=2 (unless given), no verify pass.
    #[arg(long)]
    pub quick: bool,
    /// Seconds fio measures (fio --runtime). Default: 20, or 5 with --quick.
    #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u32).range(1..=3600))]
    pub runtime: Option<u32>,
    /// Seconds fio runs before measuring (fio --ramp_time). Default: 5, or 2 with --quick.
    #[arg(long, value_name = "SECS", value_parser = clap::value_parser!(u32).range(0..=3600))]
    pub ramp: Option<u32>,
    /// Size of each job's file (fio --size). Default: per scenario (256M on FUSE,
    /// 16M on ext4): the file set must fit in guest memory, and on ext4 stay well
    /// below both the memcg's memory.max and the global background threshold.
    #[arg(long, value_name = "SIZE", value_parser = parse_size)]
    pub size: Option<String>,
    /// Writer jobs (fio --numjobs), as in the seed.
    #[arg(long, default_value_t = job::NUMJOBS, value_name = "N", value_parser = clap::value_parser!(u32).range(1..=64))]
    pub numjobs: u32,
    /// Interval of the in-guest sampler in ms (0: off).
    #[arg(long, default_value_t = 100, value_name = "MS")]
    pub sample_ms: u32,
    /// Start every run's measurement MS into its scenario's phase cycle (the
    /// `[phase]` timers of its scenario.toml: memcg-ext4's 2 s statistics
    /// refresh and 5 s flusher), to replay one run. Default: run k of N
    /// starts k/N of the way into each of those periods, the same on every
    /// variant. Scenarios without `[phase]` start when set up.
    #[arg(long, value_name = "MS")]
    pub phase: Option<u32>,
}

impl JobArgs {
    /// These flags' values, for the stages below the tasks.
    pub fn spec(&self) -> JobSpec {
        JobSpec {
            quick: self.quick,
            runtime: self.runtime,
            ramp: self.ramp,
            size: self.size.clone(),
            numjobs: self.numjobs,
            sample_ms: self.sample_ms,
            phase: self.phase,
        }
    }

    /// The job of `scen` under these flags.
    pub fn of(&self, scen: Scenario) -> Job {
        self.spec().of(scen)
    }

    /// The session's record of `scenarios`: each one's job, and its runs.
    pub fn infos(&self, scenarios: &[Scenario], runs: impl Fn(&str) -> u32) -> Vec<ScenarioInfo> {
        ScenarioInfo::each(scenarios, |s| self.of(s), runs)
    }
}

/// `--size`: a byte count with an optional K, M or G (fio's `--size`). It
/// travels on the kernel command line, so nothing else may pass: a space
/// would smuggle in another `wbstall.` parameter.
fn parse_size(s: &str) -> Result<String, String> {
    let digits = s.trim_end_matches(['K', 'M', 'G', 'k', 'm', 'g']);
    let unit_len = s.len() - digits.len();
    if digits.is_empty()
        || unit_len > 1
        || !digits.bytes().all(|b| b.is_ascii_digit())
        || digits.bytes().all(|b| b == b'0')
    {
        return Err(format!(
            "`{s}` is not a size: write a positive number with an optional K, M or G, e.g. 256M"
        ));
    }
    Ok(s.to_string())
}
