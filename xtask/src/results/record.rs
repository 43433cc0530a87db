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
        measured::{self, Measured},
        mechanism::Mechanism,
        phases::Phase,
        tracefs::{self, Cause},
        witness::{Drops, Witness},
    },
    stamp::{self, Stamp},
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
    /// When the boot started on the host.
    #[serde(
        default = "compat::started",
        deserialize_with = "started",
        skip_serializing_if = "Option::is_none"
    )]
    pub started: Option<Stamp>,
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

stamp::time_field!(started: Option<Stamp>);

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

/// What a record's shares of writer time are of: the sleeps' measured time
/// asleep (since the module's format 5 and the trace's scheduler events), or,
/// in a record from before them, the pauses the kernel asked for.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Basis {
    Asleep,
    Requested,
}

impl Basis {
    /// How reports name it beside a share.
    pub fn label(self) -> &'static str {
        match self {
            Basis::Asleep => "time asleep, measured",
            Basis::Requested => "pauses asked for (a record from before measured times)",
        }
    }

    /// What a share of writer time in stall sleeps is, in a sentence: "3.1%
    /// of their time {this}".
    pub fn stall_words(self) -> &'static str {
        match self {
            Basis::Asleep => "asleep in stall sleeps",
            Basis::Requested => "in stall sleeps, by the pauses asked for",
        }
    }

    /// Its name in `verdict.json`.
    pub fn key(self) -> &'static str {
        match self {
            Basis::Asleep => "asleep",
            Basis::Requested => "requested",
        }
    }

    /// The basis of several records: theirs if they share one, else the
    /// pauses asked for (what every record has).
    pub fn of_all(records: impl IntoIterator<Item = Basis>) -> Basis {
        let all: Vec<Basis> = records.into_iter().collect();
        if !all.is_empty() && all.iter().all(|b| *b == Basis::Asleep) {
            Basis::Asleep
        } else {
            Basis::Requested
        }
    }
}

impl RunRecord {
    /// `ms` of writer time as a share of the run's writer time (the shares
    /// of the sleep classes); `None` for a record without a writer time.
    pub fn share_of_writer_time(&self, ms: u64) -> Option<f64> {
        let writer_ms = writer_ms(&self.job, self.detection.fio_wall_s);
        (writer_ms > 0.0).then(|| ms as f64 / writer_ms)
    }

    /// `us` of writer time as a share of it, as [`Self::share_of_writer_time`].
    pub fn share_of_writer_us(&self, us: u64) -> Option<f64> {
        let writer_ms = writer_ms(&self.job, self.detection.fio_wall_s);
        (writer_ms > 0.0).then(|| us as f64 / 1000.0 / writer_ms)
    }

    // The shares below are derived from the sleeps' times and the writers'
    // time, never stored: results.json keeps their inputs (records written
    // before 2026-12-06 also carry the shares, equal to these to the bit in
    // docs/example-report, and are read without them). NaN for a record
    // without a writer time, which the builder never makes (fio's wall time
    // is required) and which no class accepts.

    /// The measured times of the run's detector (the module's; the trace's
    /// in a boot without it).
    pub fn measured(&self) -> Option<&Measured> {
        self.detection.mechanism.measured.as_ref()
    }

    /// What the judged shares ([`Self::stall_fraction`], ...) are of.
    pub fn basis(&self) -> Basis {
        match self.measured() {
            Some(_) => Basis::Asleep,
            None => Basis::Requested,
        }
    }

    /// Writer time asleep in stall sleeps, by the run's detector: the share
    /// the verdict judges (by the pauses asked for in a record from before
    /// measured times: [`Self::basis`]).
    pub fn stall_fraction(&self) -> f64 {
        match self.measured() {
            Some(m) => self.us_or_nan(m.stall_asleep_us),
            None => self.stall_fraction_requested(),
        }
    }

    /// The stall sleeps' pauses asked for, as a share of writer time: what
    /// the verdict judged before measured times, reported beside.
    pub fn stall_fraction_requested(&self) -> f64 {
        self.share_or_nan(self.detection.mechanism.stall_ms)
    }

    /// Writer time in draining sleeps (no pass, pages completing), the same
    /// way: reported beside the stall share, not judged.
    pub fn draining_fraction(&self) -> f64 {
        match self.measured() {
            Some(m) => self.us_or_nan(m.draining_asleep_us),
            None => self.draining_fraction_requested(),
        }
    }

    pub fn draining_fraction_requested(&self) -> f64 {
        self.share_or_nan(self.detection.mechanism.draining_ms)
    }

    /// The tracefs detector's measured times, where it classed the boot.
    pub fn tracefs_measured(&self) -> Option<&Measured> {
        self.detection.tracefs.as_ref()?.measured.as_ref()
    }

    /// The tracefs detector's stall share, where it classed the boot, on the
    /// basis of the run's own ([`Self::basis`]): the two are compared.
    pub fn tracefs_stall_fraction(&self) -> Option<f64> {
        let t = self.detection.tracefs.as_ref()?;
        Some(match (self.basis(), &t.measured) {
            (Basis::Asleep, Some(m)) => self.us_or_nan(m.stall_asleep_us),
            (Basis::Asleep, None) => f64::NAN,
            (Basis::Requested, _) => self.share_or_nan(t.stall_ms),
        })
    }

    /// The tracefs detector's draining share, beside its stall share.
    pub fn tracefs_draining_fraction(&self) -> Option<f64> {
        let t = self.detection.tracefs.as_ref()?;
        Some(match (self.basis(), &t.measured) {
            (Basis::Asleep, Some(m)) => self.us_or_nan(m.draining_asleep_us),
            (Basis::Asleep, None) => f64::NAN,
            (Basis::Requested, _) => self.share_or_nan(t.draining_ms),
        })
    }

    /// The share of writer time in stall sleeps of `cause`, by `detector`, on
    /// the run's basis; `None` where that detector did not name causes.
    pub fn cause_fraction(&self, detector: Detector, cause: Cause) -> Option<f64> {
        let (causes, measured) = match detector {
            Detector::Module => (
                self.detection.mechanism.causes,
                self.detection.mechanism.measured,
            ),
            Detector::Tracefs => {
                let t = self.detection.tracefs.as_ref()?;
                (t.causes, t.measured)
            }
        };
        match (self.basis(), measured) {
            (Basis::Asleep, Some(m)) => {
                self.share_of_writer_us(measured::cause_asleep_us(&m, cause))
            }
            (Basis::Asleep, None) => None,
            (Basis::Requested, _) => self.share_of_writer_time(causes?.of(cause).1),
        }
    }

    /// The fewest sleeps the two detectors class differently in this boot:
    /// half the sum, over the four classes (flushing, draining, and the
    /// stall's two causes), of the difference between their counts (a sleep
    /// one classes and the other leaves unclassed counts a half). `None`
    /// unless the module classed the boot and both named the causes.
    pub fn detectors_disagree(&self) -> Option<u64> {
        let (m, t) = (&self.detection.mechanism, self.detection.tracefs.as_ref()?);
        if self.detection.detector != Detector::Module {
            return None;
        }
        let (mc, tc) = (m.causes?, t.causes?);
        let pairs = [
            (m.flushing_sleeps, t.flushing_sleeps),
            (m.draining_sleeps, t.draining_sleeps),
            (mc.unrequested_sleeps, tc.unrequested_sleeps),
            (mc.declined_sleeps, tc.declined_sleeps),
        ];
        Some(
            pairs
                .iter()
                .map(|&(a, b)| a.abs_diff(b))
                .sum::<u64>()
                .div_ceil(2),
        )
    }

    fn share_or_nan(&self, ms: u64) -> f64 {
        self.share_of_writer_time(ms).unwrap_or(f64::NAN)
    }

    fn us_or_nan(&self, us: u64) -> f64 {
        self.share_of_writer_us(us).unwrap_or(f64::NAN)
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

    /// The detectors' disagreement is the fewest sleeps classed differently:
    /// a sleep the module calls flushing and the trace draining counts once,
    /// a boot the tracefs detector classed has none to give.
    #[test]
    fn the_detectors_disagree_by_the_sleeps_they_class_differently() {
        let docs = crate::util::project_root().join("docs/example-report");
        let (_, records) = ResultsDir::new(&docs).load().unwrap();
        let mut r = records[0].clone();
        let causes = |unrequested_sleeps, declined_sleeps| {
            Some(tracefs::Causes {
                unrequested_sleeps,
                declined_sleeps,
                ..Default::default()
            })
        };
        let t = r.detection.tracefs.as_mut().unwrap();
        (t.flushing_sleeps, t.draining_sleeps, t.causes) = (10, 5, causes(20, 2));
        let m = &mut r.detection.mechanism;
        (m.flushing_sleeps, m.draining_sleeps, m.causes) = (10, 5, causes(20, 2));
        assert_eq!(r.detectors_disagree(), Some(0));
        // Three sleeps the trace saw draining read flushing to the module, and
        // one declined stall reads unrequested.
        let m = &mut r.detection.mechanism;
        (m.flushing_sleeps, m.draining_sleeps, m.causes) = (13, 2, causes(21, 1));
        assert_eq!(r.detectors_disagree(), Some(4));
        // A draining sleep of the trace's that the module left unclassed counts
        // a half, rounded up.
        r.detection.mechanism.draining_sleeps -= 1;
        assert_eq!(r.detectors_disagree(), Some(5));
        r.detection.detector = Detector::Tracefs;
        assert_eq!(r.detectors_disagree(), None);
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
