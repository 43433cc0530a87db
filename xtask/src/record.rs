//! One run's record: what the guest sent back, parsed and checked, plus what
//! identifies the kernel and the job. `results.json` is a list of these.

use std::collections::BTreeMap;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use serde_json::Value;

use crate::{
    debugfs::{self, Record},
    fio::{self, FioResult, Job},
    kernel::{PatchMeta, VariantMeta},
    ktap::{self, Ktap},
    qemu::Accel,
    results::Stream,
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

/// The module's counters for the writer's BDI (and memcg), the mechanism.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct Mechanism {
    pub strictlimit: u64,
    pub bg_starts: u64,
    pub throttle_events: u64,
    pub throttle_sleeps: u64,
    pub idle_sleeps: u64,
    pub stall_sleeps: u64,
    pub pause_ms: u64,
    /// Milliseconds writers slept in stall sleeps.
    pub stall_ms: u64,
    pub max_pause_ms: u64,
    pub work_background: u64,
    pub work_periodic: u64,
}

impl Mechanism {
    pub fn from_record(r: Option<&Record>) -> Mechanism {
        let c = |k| debugfs::counter(r, k);
        Mechanism {
            strictlimit: c("strictlimit"),
            bg_starts: c("bg_starts"),
            throttle_events: c("throttle_events"),
            throttle_sleeps: c("throttle_sleeps"),
            idle_sleeps: c("idle_sleeps"),
            stall_sleeps: c("stall_sleeps"),
            pause_ms: c("pause_ms"),
            stall_ms: c("stall_ms"),
            max_pause_ms: c("max_pause_ms"),
            work_background: c("work_background"),
            work_periodic: c("work_periodic"),
        }
    }
}

/// One boot of one variant in one scenario.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct RunRecord {
    pub variant: String,
    pub scenario: String,
    /// 0-based repetition of this cell.
    pub run: u32,
    pub accel: Accel,
    pub cpus: u32,
    pub memory_mib: u32,
    pub kernel: KernelIds,
    pub job: Job,
    pub fio: FioResult,
    /// The BDI the writer dirtied (`0:45`), and its memcg id when the scenario
    /// puts the writer in a cgroup.
    pub bdi: String,
    pub memcg_id: Option<u64>,
    pub mechanism: Mechanism,
    /// Writer time lost to stall sleeps: stall_ms / (numjobs × fio wall ms).
    pub stall_fraction: f64,
    /// fio's wall time in the guest, seconds.
    pub fio_wall_s: f64,
    pub wbstall_stats: Vec<Record>,
    pub wbstall_thresholds: Vec<Record>,
    pub wbstall_summary: Option<Record>,
    pub bdi_stats: BTreeMap<String, i64>,
    pub bdi_knobs: BTreeMap<String, String>,
    /// The writers' cgroup `memory.events` (memcg scenarios).
    pub memcg_events: BTreeMap<String, i64>,
    /// Selected /proc/vmstat counters after the run, and their change over it.
    pub vmstat: BTreeMap<String, i64>,
    pub vmstat_delta: BTreeMap<String, i64>,
    pub ktap: Ktap,
    pub fuse_ready: Option<Value>,
    pub fuse_stats: Option<Value>,
    /// Result of the fio verify pass on the data-keeping FUSE mount, if it ran.
    pub verify_ok: Option<bool>,
    pub dmesg_warnings: Vec<String>,
    pub guest_env: BTreeMap<String, String>,
    pub wall_secs: f64,
    /// Files of this run, relative to the results directory.
    pub console_log: String,
    pub samples: Option<String>,
}

/// Lines of dmesg that mean something went wrong in the kernel.
pub fn warnings(dmesg: &str) -> Vec<String> {
    const MARKS: &[&str] = &[
        "WARNING:",
        "BUG:",
        "Oops",
        "sleeping function called from invalid context",
        "general protection fault",
        "rcu: INFO",
        "Call Trace",
        "kernel BUG",
        "UBSAN",
        "hung_task",
    ];
    dmesg
        .lines()
        .filter(|l| MARKS.iter().any(|m| l.contains(m)))
        .map(|l| l.trim().to_string())
        .collect()
}

fn key_values(text: &str) -> BTreeMap<String, String> {
    text.lines()
        .filter_map(|l| l.split_once('=').or_else(|| l.split_once(':')))
        .map(|(k, v)| (k.trim().to_string(), v.trim().to_string()))
        .collect()
}

fn json_line(stream: &Stream, name: &str) -> Result<Option<Value>> {
    match stream.text(name) {
        Some(t) => Ok(Some(
            serde_json::from_str(t.trim()).with_context(|| format!("parsing {name}"))?,
        )),
        None => Ok(None),
    }
}

/// The KUnit results the guest sent (every suite's KTAP).
pub fn ktap(stream: &Stream) -> Ktap {
    let text: String = stream
        .files
        .iter()
        .filter(|(k, _)| k.starts_with("ktap-"))
        .map(|(_, v)| String::from_utf8_lossy(v).into_owned())
        .collect();
    ktap::parse(&text)
}

/// Where a run came from, besides the stream.
pub struct RunContext<'a> {
    pub variant: &'a VariantMeta,
    pub scenario: &'a str,
    pub run: u32,
    pub accel: Accel,
    pub cpus: u32,
    pub memory_mib: u32,
    pub job: &'a Job,
    pub wall_secs: f64,
    pub console_log: String,
    pub samples: Option<String>,
}

/// Builds the record of a run whose guest ended with `WBSTALL-END ok`.
/// Anything that makes the run unusable is an error naming what is missing.
pub fn build(ctx: RunContext<'_>, stream: &Stream) -> Result<RunRecord> {
    let need = |name: &str| {
        stream.text(name).with_context(|| {
            format!(
                "the guest sent no `{name}` (see the console log {})",
                ctx.console_log
            )
        })
    };
    let fio = fio::parse(&need("fio")?).context("reading fio's result")?;
    if fio.error != 0 {
        bail!("fio reported error {} (see {})", fio.error, ctx.console_log);
    }
    let bdi = need("bdi")?.trim().to_string();
    let stats = debugfs::parse_stats(&need("wbstall-stats")?)?;
    let thresholds = debugfs::parse_thresholds(&need("wbstall-thresholds")?)?;
    let summary = debugfs::parse_kv_lines(&need("wbstall-summary")?, "wbstall/summary")?
        .into_iter()
        .next();
    let in_memcg = stream
        .text("writer-domain")
        .is_some_and(|t| t.trim() == "memcg");
    let writer = writer_record(&stats, &bdi, in_memcg);
    let Some(writer_rec) = writer else {
        bail!(
            "the wbstall module saw no writeback event for the writer's {} of BDI {bdi}: \
             the writes did not go through the page cache (see {})",
            if in_memcg {
                "memcg writeback domain"
            } else {
                "root writeback domain"
            },
            ctx.console_log
        );
    };
    let memcg_id = in_memcg.then(|| debugfs::counter(Some(writer_rec), "memcg_id"));
    let mechanism = Mechanism::from_record(writer);
    // The writers' real time: fio's wall time as the guest measured it (a stalled
    // write can outlast --runtime by seconds), else the nominal ramp + runtime.
    let fio_wall_s = stream
        .text("fio-wall")
        .and_then(|t| {
            let mut w = t.split_whitespace().map(|x| x.parse::<f64>());
            match (w.next(), w.next()) {
                (Some(Ok(a)), Some(Ok(b))) if b > a => Some(b - a),
                _ => None,
            }
        })
        .unwrap_or(f64::from(ctx.job.runtime + ctx.job.ramp_time));
    let writer_ms = f64::from(ctx.job.numjobs) * fio_wall_s * 1000.0;
    let stall_fraction = if writer_ms > 0.0 {
        mechanism.stall_ms as f64 / writer_ms
    } else {
        0.0
    };
    let vm_after = debugfs::parse_vmstat(&need("vmstat")?)?;
    let vm_before = stream
        .text("vmstat-before")
        .map(|t| debugfs::parse_vmstat(&t))
        .transpose()?;
    let mut vmstat = BTreeMap::new();
    let mut vmstat_delta = BTreeMap::new();
    for k in debugfs::VMSTAT_KEYS {
        if let Some(v) = vm_after.get(*k) {
            vmstat.insert(k.to_string(), *v);
            if let Some(b) = vm_before.as_ref().and_then(|b| b.get(*k)) {
                vmstat_delta.insert(k.to_string(), v - b);
            }
        }
    }
    let verify_ok = stream
        .text("fio-verify")
        .map(|t| fio::parse(&t).is_ok_and(|r| r.error == 0));
    Ok(RunRecord {
        variant: ctx.variant.variant.clone(),
        scenario: ctx.scenario.to_string(),
        run: ctx.run,
        accel: ctx.accel,
        cpus: ctx.cpus,
        memory_mib: ctx.memory_mib,
        kernel: ctx.variant.into(),
        job: ctx.job.clone(),
        fio,
        bdi,
        memcg_id,
        mechanism,
        stall_fraction,
        fio_wall_s,
        wbstall_stats: stats,
        wbstall_thresholds: thresholds,
        wbstall_summary: summary,
        bdi_stats: debugfs::parse_bdi_stats(&need("bdi-stats")?)?,
        bdi_knobs: key_values(&stream.text("bdi-knobs").unwrap_or_default()),
        memcg_events: stream
            .text("memcg-events")
            .map(|t| debugfs::parse_vmstat(&t))
            .transpose()
            .context("parsing memory.events")?
            .unwrap_or_default(),
        vmstat,
        vmstat_delta,
        ktap: ktap(stream),
        fuse_ready: json_line(stream, "fuse-main-ready")?,
        fuse_stats: json_line(stream, "fuse-main-stats")?,
        verify_ok,
        dmesg_warnings: warnings(&stream.text("dmesg").unwrap_or_default()),
        guest_env: key_values(&stream.text("guest-env").unwrap_or_default()),
        wall_secs: ctx.wall_secs,
        console_log: ctx.console_log,
        samples: ctx.samples,
    })
}

/// The writer's line of `stats`: the BDI's root writeback domain, or, for a
/// writer in a memcg, the busiest of the BDI's cgroup writeback domains.
pub fn writer_record<'a>(stats: &'a [Record], bdi: &str, in_memcg: bool) -> Option<&'a Record> {
    if !in_memcg {
        return debugfs::find(stats, bdi, Some(0));
    }
    stats
        .iter()
        .filter(|r| {
            r.get("bdi").and_then(Value::as_str) == Some(bdi)
                && debugfs::counter(Some(r), "memcg_id") != 0
        })
        .max_by_key(|r| {
            debugfs::counter(Some(r), "throttle_events") + debugfs::counter(Some(r), "bg_starts")
        })
}

/// What makes a completed run invalid as evidence, beyond fio's own errors.
pub fn problems(r: &RunRecord) -> Vec<String> {
    let mut p = Vec::new();
    if !r.ktap.passed() {
        p.push(format!(
            "the module's KUnit tests did not pass: {}",
            r.ktap.summary()
        ));
    }
    if r.verify_ok == Some(false) {
        p.push("fio verify on the data-keeping FUSE mount failed".into());
    }
    if let Some(ready) = &r.fuse_ready {
        if ready["writeback_cache"] != Value::Bool(true) {
            p.push("the FUSE writeback cache was not negotiated".into());
        }
    }
    if let Some(stats) = &r.fuse_stats {
        if stats["writes_cached"].as_u64() == Some(0) {
            p.push("the FUSE server saw no page-cache (FUSE_WRITE_CACHE) writes".into());
        }
    }
    // Reclaim at memory.max wakes the flusher by itself and hides a missing
    // start: the memcg scenario is only evidence while the cgroup stays clear.
    if let Some(&n) = r.memcg_events.get("max").filter(|&&n| n > 0) {
        p.push(format!(
            "the writers' cgroup hit memory.max {n} time(s): reclaim started writeback; \
             use a smaller --size or a larger memcg_max"
        ));
    }
    if !r.dmesg_warnings.is_empty() {
        p.push(format!(
            "dmesg has {} warning line(s), first: {}",
            r.dmesg_warnings.len(),
            r.dmesg_warnings[0]
        ));
    }
    p
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_writer_is_the_root_or_the_busiest_memcg_domain() {
        let stats =
            debugfs::parse_stats(include_str!("../../rust-module/fixtures/stats.txt")).unwrap();
        let root = writer_record(&stats, "254:0", false).unwrap();
        assert_eq!(debugfs::counter(Some(root), "memcg_id"), 0);
        let memcg = writer_record(&stats, "254:0", true).unwrap();
        assert_eq!(debugfs::counter(Some(memcg), "memcg_id"), 42);
        assert!(writer_record(&stats, "0:45", true).is_none());
    }

    #[test]
    fn dmesg_warnings_are_picked_out() {
        let dmesg = "[ 1.0] wbstall: loaded\n[ 2.0] WARNING: CPU: 1 PID: 9 at mm/x.c:1\n\
                     [ 2.1] BUG: sleeping function called from invalid context at x\n[ 3.0] ok\n";
        let w = warnings(dmesg);
        assert_eq!(w.len(), 2);
        assert!(w[0].starts_with("[ 2.0] WARNING"));
    }
}
