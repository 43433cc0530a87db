//! What a `qemu-test` session is asked to be: the task's flags as plain
//! values, none checked yet.

use std::path::PathBuf;

use crate::{
    guest::{
        job_spec::JobSpec,
        machine_spec::MachineSpec,
        plan::{Detector, Shard},
    },
    kernel::{flavour::Flavour, source::SourceArgs, variants::Selection},
};

/// What a `qemu-test` session is asked to be: its flags' values, none yet
/// checked (the defaults the flags name are resolved here).
#[derive(Debug, Clone)]
pub struct QemuTestRequest {
    pub selection: Selection,
    pub source: SourceArgs,
    /// `--scenario`: none, the default plan's.
    pub scenarios: Vec<String>,
    /// `--fuse-server` as given.
    pub fuse_server: Option<String>,
    /// `--runs`: none, derived.
    pub runs: Option<u32>,
    pub job: JobSpec,
    /// Seconds before a guest is declared hung; none, the boot's own.
    pub timeout: Option<u64>,
    pub aa: Option<String>,
    pub no_aa: bool,
    /// The expectations file; none, qemu/expected.toml.
    pub expected: Option<PathBuf>,
    pub expect: Vec<String>,
    pub accept_cost: Vec<String>,
    /// `--compare A B` pairs, flat.
    pub compare: Vec<String>,
    pub shard: Option<Shard>,
    pub jobs_vm: Option<usize>,
    pub results_in: Option<PathBuf>,
    /// With `--resume`: boot again the boots that failed.
    pub retry_failed: bool,
    /// The guest `cargo xtask slurm` staged (`--staged DIR`).
    pub staged: Option<PathBuf>,
    pub machine: MachineSpec,
    /// Use the kernels on disk instead of building.
    pub no_build: bool,
    /// Parallel make jobs for the build; none, the CPUs.
    pub jobs: Option<usize>,
    pub flavour: Flavour,
    pub detector: Option<Detector>,
    /// The command line the session records.
    pub command: String,
    /// The task's own flags, word by word, for `--resume`; none when
    /// another task made the request.
    pub args: Option<Vec<String>>,
}
