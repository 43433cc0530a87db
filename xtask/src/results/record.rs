//! One run's record, the schema alone: what the guest sent back, parsed and
//! checked, plus what identifies the kernel and the job. `results.json` is a
//! list of these; `builder` makes them.

use std::collections::BTreeMap;

use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{
    guest::{job::Job, plan::Detector, run_id::RunId},
    kernel::build::{PatchMeta, VariantMeta},
    results::{
        debugfs::KvLine,
        fio::FioResult,
        ktap::Ktap,
        machine::MachineFacts,
        mechanism::Mechanism,
        phases::Phase,
        tracefs,
        witness::{Drops, Witness},
    },
};

/// What identifies the kernel a run booted.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct KernelIds {
    pub release: String,
    pub base_version: String,
    pub base_package_version: Option<String>,
    pub base_sha256: String,
    pub patches: Vec<PatchMeta>,
    pub config_sha256: String,
    pub bzimage_sha256: String,
    pub module_sha256: String,
}

impl From<&VariantMeta> for KernelIds {
    fn from(m: &VariantMeta) -> KernelIds {
        KernelIds {
            release: m.kernel_release.clone(),
            base_version: m.base.kernel_version.clone(),
            base_package_version: m.base.package_version.clone(),
            base_sha256: m.base.sha256.clone(),
            patches: m.patches.clone(),
            config_sha256: m.config_sha256.clone(),
            bzimage_sha256: m.bzimage_sha256.clone(),
            module_sha256: m.module_sha256.clone(),
        }
    }
}

/// Where a measurement started in the kernel's timer cycles: asked
/// (`cycle_ms`, `offset_ms`) and as the guest saw it (`start_ms`, its
/// uptime then).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct StartPhase {
    pub cycle_ms: u32,
    pub offset_ms: u32,
    pub start_ms: u64,
}

impl StartPhase {
    /// Where in the cycle it did start.
    pub fn actual_ms(&self) -> u32 {
        (self.start_ms % u64::from(self.cycle_ms.max(1))) as u32
    }
}

/// One boot of one variant in one scenario.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RunRecord {
    pub variant: String,
    pub scenario: String,
    /// 0-based repetition of this cell.
    pub run: u32,
    /// Where its measurement started in the kernel's timer cycles (scenarios
    /// with `[phase]`; absent in records from before).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub start_phase: Option<StartPhase>,
    /// The machine it ran on.
    #[serde(flatten)]
    pub machine: MachineFacts,
    pub kernel: KernelIds,
    pub job: Job,
    pub fio: FioResult,
    /// The BDI the writer dirtied (`0:45`), and its memcg id when the scenario
    /// puts the writer in a cgroup.
    pub bdi: String,
    pub memcg_id: Option<u64>,
    /// `global` or `memcg`: the writeback domain the writers were in.
    pub writer_domain: String,
    /// The inode of the writers' cgroup directory (the tracepoints' `cgroup_ino`).
    pub cgroup_ino: u64,
    /// The scenario's `strict_limit`, as it was when the run was made: the
    /// evidence rule checks the BDI against this, not against today's
    /// scenario of that name.
    pub scenario_strictlimit: bool,
    /// Who classed the sleeps (`mechanism`, `stall_fraction`).
    #[serde(default)]
    pub detector: Detector,
    /// The tracefs detector's classification of the same boot, whichever
    /// detector ran (absent in records from before it existed).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub tracefs: Option<tracefs::Detected>,
    pub mechanism: Mechanism,
    /// The kernel's own count of the same events (tracefs hist triggers).
    pub witness: Witness,
    /// What each of the witness's histograms dropped (absent in records from
    /// before they were kept apart: `witness.dropped` then stands for each).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub witness_drops: Option<Drops>,
    /// fio's wall time in the guest, seconds.
    pub fio_wall_s: f64,
    pub wbstall_stats: Vec<KvLine>,
    pub wbstall_thresholds: Vec<KvLine>,
    pub wbstall_summary: Option<KvLine>,
    pub bdi_stats: BTreeMap<String, i64>,
    /// The BDI's `BdiWritten` over the measurement (kB written back).
    pub bdi_written_kb: i64,
    pub bdi_knobs: BTreeMap<String, String>,
    /// `vm.dirty_*` as the measurement ran (`vm.dirty_bytes`, ... in bytes,
    /// `vm.dirty_writeback_centisecs`, ...).
    pub vm_knobs: BTreeMap<String, i64>,
    /// The writers' cgroup `memory.events` (memcg scenarios).
    pub memcg_events: BTreeMap<String, i64>,
    /// Selected /proc/vmstat counters after the run, and their change over it.
    pub vmstat: BTreeMap<String, i64>,
    pub vmstat_delta: BTreeMap<String, i64>,
    pub ktap: Ktap,
    /// The KUnit suites that reported (`ktap-<suite>` files).
    pub ktap_suites: Vec<String>,
    pub fuse_ready: Option<Value>,
    pub fuse_stats: Option<Value>,
    /// Result of the fio verify pass on the data-keeping FUSE mount, if it ran.
    pub verify_ok: Option<bool>,
    pub dmesg_warnings: Vec<String>,
    pub guest_env: BTreeMap<String, String>,
    /// Where the boot's time went, on the guest's clock (absent in records
    /// from before the guest sent it).
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub phases: Vec<Phase>,
    /// When the boot started on the host, UTC (`util::timestamp`'s form);
    /// absent in records from before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub started: Option<String>,
    /// The boot's wall time on the host, QEMU's start to its exit.
    pub wall_secs: f64,
    /// Files of this run, relative to the results directory.
    pub console_log: String,
    pub samples: Option<String>,
    /// Its throttle sleeps as the tracefs detector classed them
    /// (`results::sleeps`; absent in records from before it was kept).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub sleeps: Option<String>,
}

/// The module's KUnit suite: it must have run and passed in every boot.
pub const KUNIT_SUITE: &str = "wbstall";

impl RunRecord {
    /// Which run this is.
    pub fn id(&self) -> RunId {
        RunId::new(&self.scenario, &self.variant, self.run)
    }

    /// `ms` of writer time as a share of the run's writer time (the shares
    /// of the sleep classes); `None` for a record without a writer time.
    pub fn share_of_writer_time(&self, ms: u64) -> Option<f64> {
        let writer_ms = writer_ms(&self.job, self.fio_wall_s);
        (writer_ms > 0.0).then(|| ms as f64 / writer_ms)
    }

    // The shares below are derived from the sleeps' times and the writers'
    // time, never stored: results.json keeps their inputs (records written
    // before 2026-12-06 also carry the shares, equal to these to the bit in
    // docs/example-report, and are read without them). NaN for a record
    // without a writer time, which the builder never makes (fio's wall time
    // is required) and which no class accepts.

    /// Writer time lost to stall sleeps, by the run's detector
    /// (`mechanism.stall_ms`): the share the verdict judges.
    pub fn stall_fraction(&self) -> f64 {
        self.share_or_nan(self.mechanism.stall_ms)
    }

    /// Writer time in draining sleeps (no pass, pages completing), the same
    /// way: reported beside the stall share, not judged.
    pub fn draining_fraction(&self) -> f64 {
        self.share_or_nan(self.mechanism.draining_ms)
    }

    /// The tracefs detector's stall share, where it classed the boot.
    pub fn tracefs_stall_fraction(&self) -> Option<f64> {
        (self.tracefs.as_ref()).map(|t| self.share_or_nan(t.stall_ms))
    }

    /// The tracefs detector's draining share, beside its stall share.
    pub fn tracefs_draining_fraction(&self) -> Option<f64> {
        (self.tracefs.as_ref()).map(|t| self.share_or_nan(t.draining_ms))
    }

    fn share_or_nan(&self, ms: u64) -> f64 {
        self.share_of_writer_time(ms).unwrap_or(f64::NAN)
    }
}

/// The writers' real time, ms: numjobs × fio's wall time as the guest
/// measured it (a stalled write can outlast --runtime by seconds). The shares
/// of the sleep classes are of this.
pub(crate) fn writer_ms(job: &Job, fio_wall_s: f64) -> f64 {
    f64::from(job.numjobs) * fio_wall_s * 1000.0
}
