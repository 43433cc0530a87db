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
        compat,
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

/// One boot of one variant in one scenario, its values grouped by meaning.
///
/// Each group but the kernel, the job and fio (objects of their own in
/// `results.json`) is flattened: its keys stay where records have always had
/// them, and a results directory of any age reads and writes as it did.
/// What older formats lack is read with the defaults of [`compat`].
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RunRecord {
    /// Which run this is (`variant`, `scenario`, `run`, in that order).
    #[serde(flatten, serialize_with = "compat::id_as_recorded")]
    pub id: RunId,
    /// Where its measurement started in the kernel's timer cycles (scenarios
    /// with `[phase]`).
    #[serde(
        default = "compat::start_phase",
        skip_serializing_if = "Option::is_none"
    )]
    pub start_phase: Option<StartPhase>,
    /// The machine it ran on.
    #[serde(flatten)]
    pub machine: MachineFacts,
    pub kernel: KernelIds,
    pub job: Job,
    pub fio: FioResult,
    /// Whose sleeps were classed, by whom, and what they came to.
    #[serde(flatten)]
    pub detection: Detection,
    /// The kernel's counters and knobs around the measurement.
    #[serde(flatten)]
    pub counters: Counters,
    /// The FUSE server's evidence (FUSE scenarios).
    #[serde(flatten)]
    pub fuse: FuseFacts,
    /// The boot itself: its warnings, environment, times and files.
    #[serde(flatten)]
    pub boot: BootFacts,
}

/// What the FUSE server said of its mount (FUSE scenarios; none elsewhere).
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct FuseFacts {
    pub fuse_ready: Option<Value>,
    pub fuse_stats: Option<Value>,
    /// Result of the fio verify pass on the data-keeping FUSE mount, if it ran.
    pub verify_ok: Option<bool>,
}

/// The boot itself: what its kernel warned of, the guest's environment,
/// where its time went, and the files it left.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct BootFacts {
    pub dmesg_warnings: Vec<String>,
    pub guest_env: BTreeMap<String, String>,
    /// Where the boot's time went, on the guest's clock.
    #[serde(default = "compat::phases", skip_serializing_if = "Vec::is_empty")]
    pub phases: Vec<Phase>,
    /// When the boot started on the host, UTC (`util::timestamp`'s form).
    #[serde(default = "compat::started", skip_serializing_if = "Option::is_none")]
    pub started: Option<String>,
    /// The boot's wall time on the host, QEMU's start to its exit.
    pub wall_secs: f64,
    /// Files of this run, relative to the results directory.
    pub console_log: String,
    pub samples: Option<String>,
    /// Its throttle sleeps as the tracefs detector classed them
    /// (`results::sleeps`).
    #[serde(default = "compat::sleeps", skip_serializing_if = "Option::is_none")]
    pub sleeps: Option<String>,
}

/// The writers' writeback domain: the wb whose sleeps are classed.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct WriterWb {
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
}

/// Who classed the writers' sleeps and what they came to: the run's
/// detector's classes (`mechanism`), the tracefs detector's of the same
/// boot, the kernel's own count of the events (`witness`), and the writers'
/// time the classes' shares are of.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Detection {
    /// Whose sleeps: the writers' wb.
    #[serde(flatten)]
    pub writer: WriterWb,
    /// Who classed the sleeps (`mechanism`, `stall_fraction`).
    #[serde(default = "compat::detector")]
    pub detector: Detector,
    /// The tracefs detector's classification of the same boot, whichever
    /// detector ran.
    #[serde(default = "compat::tracefs", skip_serializing_if = "Option::is_none")]
    pub tracefs: Option<tracefs::Detected>,
    pub mechanism: Mechanism,
    /// The kernel's own count of the same events (tracefs hist triggers).
    pub witness: Witness,
    /// What each of the witness's histograms dropped.
    #[serde(
        default = "compat::witness_drops",
        skip_serializing_if = "Option::is_none"
    )]
    pub witness_drops: Option<Drops>,
    /// fio's wall time in the guest, seconds: × numjobs, the writers' time
    /// the classes' shares are of.
    pub fio_wall_s: f64,
}

/// The kernel's counters and knobs around the measurement, and its KUnit
/// results.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Counters {
    /// The wbstall module's `stats`, `thresholds` and `summary` (none
    /// without the module).
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
}

/// The module's KUnit suite: it must have run and passed in every boot.
pub const KUNIT_SUITE: &str = "wbstall";

impl RunRecord {
    /// `ms` of writer time as a share of the run's writer time (the shares
    /// of the sleep classes); `None` for a record without a writer time.
    pub fn share_of_writer_time(&self, ms: u64) -> Option<f64> {
        let writer_ms = writer_ms(&self.job, self.detection.fio_wall_s);
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
        self.share_or_nan(self.detection.mechanism.stall_ms)
    }

    /// Writer time in draining sleeps (no pass, pages completing), the same
    /// way: reported beside the stall share, not judged.
    pub fn draining_fraction(&self) -> f64 {
        self.share_or_nan(self.detection.mechanism.draining_ms)
    }

    /// The tracefs detector's stall share, where it classed the boot.
    pub fn tracefs_stall_fraction(&self) -> Option<f64> {
        (self.detection.tracefs.as_ref()).map(|t| self.share_or_nan(t.stall_ms))
    }

    /// The tracefs detector's draining share, beside its stall share.
    pub fn tracefs_draining_fraction(&self) -> Option<f64> {
        (self.detection.tracefs.as_ref()).map(|t| self.share_or_nan(t.draining_ms))
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

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::dir::ResultsDir;

    /// The top-level keys of each record of a `results.json` text, in order.
    fn keys(text: &str) -> Vec<&str> {
        (text.lines())
            .filter_map(|l| Some(l.strip_prefix("    \"")?.split_once('"')?.0))
            .collect()
    }

    /// The groups are flattened: a record writes every key where records
    /// have always had it (the example's, less the shares that are derived
    /// now), and what it writes reads back and writes the same.
    #[test]
    fn the_groups_leave_results_json_as_it_was() {
        let docs = crate::util::project_root().join("docs/example-report");
        let text = std::fs::read_to_string(docs.join(ResultsDir::RESULTS)).unwrap();
        let (_, records) = ResultsDir::new(&docs).load().unwrap();
        let written = serde_json::to_string_pretty(&records).unwrap();
        let shares = [
            "stall_fraction",
            "draining_fraction",
            "tracefs_stall_fraction",
            "tracefs_draining_fraction",
        ];
        let mut was = keys(&text);
        was.retain(|k| !shares.contains(k));
        assert_eq!(keys(&written), was);
        let again: Vec<RunRecord> = serde_json::from_str(&written).unwrap();
        assert_eq!(serde_json::to_string_pretty(&again).unwrap(), written);
        assert_eq!(
            (records[0].id.to_string(), &records[0].detection.writer.bdi),
            ("fuse-strictlimit/regressed #1".into(), &"0:22".to_string())
        );
    }

    /// A record from before the detector, the tracefs detector, the
    /// witness's drops, the phases and the boot's start were kept reads with
    /// the defaults of `compat`.
    #[test]
    fn a_record_of_an_older_format_reads_with_the_compat_defaults() {
        let docs = crate::util::project_root().join("docs/example-report");
        let (_, records) = ResultsDir::new(&docs).load().unwrap();
        let mut old = serde_json::to_value(&records[0]).unwrap();
        for key in ["detector", "tracefs", "witness_drops", "phases", "started"] {
            old.as_object_mut().unwrap().remove(key).unwrap();
        }
        let old: RunRecord = serde_json::from_value(old).unwrap();
        assert_eq!(old.detection.detector, Detector::Module);
        assert!(old.detection.tracefs.is_none() && old.detection.witness_drops.is_none());
        assert!(old.boot.phases.is_empty() && old.boot.started.is_none());
        assert_eq!(old.id, records[0].id);
        assert_eq!(old.detection.writer, records[0].detection.writer);
    }
}
