//! Building a run's record from what its guest sent (`build`): every stream
//! read, parsed and checked, the detectors run, the facts of the boot added.
//! `record` is the schema alone.

use std::collections::BTreeMap;

use anyhow::{bail, ensure, Context, Result};
use serde_json::Value;

use crate::{
    guest::{
        plan::CycleOffset,
        protocol::{self, stream},
        run_id::RunId,
        stream::Stream,
    },
    results::{
        context::RunContext,
        debugfs,
        detection::{detect, Found, Writer},
        fio,
        ktap::{self, Ktap},
        phases,
        record::{self, BootFacts, FuseFacts, RunRecord, StartPhase, WriterWb},
        warnings::{merge_warnings, warnings},
        witness::{Drops, Witness},
    },
};

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
        .filter(|(k, _)| k.starts_with(stream::KTAP_PREFIX))
        .map(|(_, v)| String::from_utf8_lossy(v).into_owned())
        .collect();
    ktap::parse(&text)
}

/// The KUnit suites the guest sent results of.
pub fn ktap_suites(stream: &Stream) -> Vec<String> {
    stream
        .files
        .keys()
        .filter_map(|k| k.strip_prefix(stream::KTAP_PREFIX))
        .map(str::to_string)
        .collect()
}

/// `name=value` lines of numbers (`vm.dirty_bytes=0`).
fn numbers(text: &str, origin: &str) -> Result<BTreeMap<String, i64>> {
    let mut out = BTreeMap::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let (k, v) = line
            .split_once('=')
            .with_context(|| format!("{origin}: `{line}` is not name=value"))?;
        let n = v
            .trim()
            .parse()
            .with_context(|| format!("{origin}: `{line}` is not a number"))?;
        out.insert(k.trim().to_string(), n);
    }
    Ok(out)
}

/// `<start> <end>` uptimes in seconds → fio's wall time.
fn wall_seconds(text: &str) -> Result<f64> {
    let w: Vec<f64> = text
        .split_whitespace()
        .map(str::parse)
        .collect::<Result<_, _>>()
        .with_context(|| format!("fio-wall `{}` is not two uptimes", text.trim()))?;
    match w[..] {
        [a, b] if b > a => Ok(b - a),
        _ => bail!("fio-wall `{}` is not two increasing uptimes", text.trim()),
    }
}

/// Builds the record of a run whose guest ended with `WBSTALL-END ok`.
/// Anything that leaves the run out is an error naming what is missing.
pub fn build(ctx: RunContext<'_>, stream: &Stream) -> Result<RunRecord> {
    let need = |name: &str| need(stream, name, &ctx.console_log);
    let fio = fio_result(&need(stream::FIO)?, &ctx.console_log)?;
    let fuse = fuse_evidence(stream)?;
    no_writeback_cache(fuse.fuse_ready.as_ref())?;
    let bdi = need(stream::BDI)?.trim().to_string();
    let writer_domain = need(stream::WRITER_DOMAIN)?.trim().to_string();
    let (cgroup_ino, witness, witness_drops, bdi_knobs) = witnessed(&need, &bdi)?;
    let writer = Writer {
        bdi: &bdi,
        domain: &writer_domain,
        cgroup_ino,
        strictlimit: bdi_knobs.get("strict_limit").map(String::as_str) == Some("1"),
    };
    let Found {
        stats,
        thresholds,
        summary,
        mechanism,
        memcg_id,
        tracefs,
        sleeps,
    } = detect(&ctx, &need, &writer, &witness)?;
    let sleeps = write_sleeps(ctx.sleeps.as_deref(), &sleeps)?;
    let fio_wall_s = wall_seconds(&need(stream::FIO_WALL)?)?;
    let (vmstat, vmstat_delta) = vmstat(&need(stream::VMSTAT_BEFORE)?, &need(stream::VMSTAT)?)?;
    let (bdi_stats, bdi_written_kb) =
        written(&need(stream::BDI_STATS_BEFORE)?, &need(stream::BDI_STATS)?)?;
    let memcg_events = memcg_events(&need, &writer_domain)?;
    Ok(RunRecord {
        id: RunId::new(ctx.scenario, &ctx.variant.variant, ctx.run),
        start_phase: start_phase(&need, ctx.phase)?,
        machine: ctx.machine,
        kernel: ctx.variant.into(),
        job: ctx.job.clone(),
        fio,
        detection: record::Detection {
            writer: WriterWb {
                bdi,
                memcg_id,
                writer_domain,
                cgroup_ino,
                scenario_strictlimit: ctx.scenario_strictlimit,
            },
            detector: ctx.detector,
            tracefs: Some(tracefs),
            mechanism,
            witness,
            witness_drops: Some(witness_drops),
            fio_wall_s,
        },
        counters: record::Counters {
            wbstall_stats: stats,
            wbstall_thresholds: thresholds,
            wbstall_summary: summary,
            bdi_stats,
            bdi_written_kb,
            bdi_knobs,
            vm_knobs: numbers(&need(stream::VM_KNOBS)?, "vm-knobs")?,
            memcg_events,
            vmstat,
            vmstat_delta,
            ktap: ktap(stream),
            ktap_suites: ktap_suites(stream),
        },
        fuse,
        boot: BootFacts {
            dmesg_warnings: merge_warnings(ctx.console_warnings, warnings(&need(stream::DMESG)?)),
            guest_env: guest_env(&need(stream::GUEST_ENV)?, &ctx.console_log)?,
            phases: phases_of(stream)?,
            started: Some(ctx.started),
            wall_secs: ctx.wall_secs,
            console_log: ctx.console_log,
            samples: ctx.samples,
            sleeps,
        },
    })
}

/// Writes the classed sleeps to `path`, if given; its file name, for the
/// record.
fn write_sleeps(
    path: Option<&std::path::Path>,
    sleeps: &[crate::results::tracefs::Sleep],
) -> Result<Option<String>> {
    let Some(path) = path else {
        return Ok(None);
    };
    crate::util::write_atomic(path, crate::results::sleeps::text(sleeps))?;
    let name = path.file_name().and_then(|n| n.to_str());
    name.map(|n| Some(n.to_string()))
        .with_context(|| format!("{} has no file name", path.display()))
}

/// The guest's `start-phase` (`cycle_ms=C`, `offset_ms=O`, `start_ms=S`
/// lines) when the host asked for a phase, which must be that phase.
fn start_phase(
    need: &dyn Fn(&str) -> Result<String>,
    asked: Option<CycleOffset>,
) -> Result<Option<StartPhase>> {
    let Some(asked) = asked else {
        return Ok(None);
    };
    let text = need(stream::START_PHASE)?;
    let kv = numbers(&text, "start-phase")?;
    let get = |k: &str| {
        kv.get(k)
            .copied()
            .with_context(|| format!("start-phase `{}` has no `{k}=`", text.trim()))
    };
    let p = StartPhase {
        cycle_ms: u32::try_from(get("cycle_ms")?).context("start-phase cycle_ms")?,
        offset_ms: u32::try_from(get("offset_ms")?).context("start-phase offset_ms")?,
        start_ms: u64::try_from(get("start_ms")?).context("start-phase start_ms")?,
    };
    if (p.cycle_ms, p.offset_ms) != (asked.cycle_ms, asked.offset_ms) {
        bail!(
            "the guest started at phase {} of {} ms, but the host asked for {} of {} ms",
            p.offset_ms,
            p.cycle_ms,
            asked.offset_ms,
            asked.cycle_ms
        );
    }
    Ok(Some(p))
}

/// fio's result, which must report no error.
fn fio_result(text: &str, console_log: &str) -> Result<fio::FioResult> {
    let fio = fio::parse(text).context("reading fio's result")?;
    ensure!(
        fio.error == 0,
        "fio reported error {} (see {console_log})",
        fio.error
    );
    Ok(fio)
}

/// The writers' cgroup inode, the witness's counts for their domain (and its
/// histograms' drops), and the BDI's knobs.
fn witnessed(
    need: &dyn Fn(&str) -> Result<String>,
    bdi: &str,
) -> Result<(u64, Witness, Drops, BdiKnobs)> {
    let cgroup_ino: u64 = need(stream::WRITER_CGROUP_INO)?
        .trim()
        .parse()
        .context("writer-cgroup-ino is not an inode number")?;
    // Counting instances where the kernel has no hist triggers (host-test
    // sends which); else the hist triggers, which must be there.
    let (witness, drops) = match need(stream::WITNESS_COUNTS) {
        Ok(counts) => Witness::from_counts(&counts)?,
        Err(_) => Witness::from_hists(
            &need(stream::WITNESS_BDP)?,
            &need(stream::WITNESS_WAKE)?,
            bdi,
            cgroup_ino,
        )?,
    };
    Ok((
        cgroup_ino,
        witness,
        drops,
        key_values(&need(stream::BDI_KNOBS)?),
    ))
}

/// A BDI's sysfs knobs by name (`strict_limit`).
type BdiKnobs = BTreeMap<String, String>;

/// The FUSE server's INIT answer and stats, and the verify pass's outcome
/// (FUSE scenarios; None elsewhere).
fn fuse_evidence(stream: &Stream) -> Result<FuseFacts> {
    Ok(FuseFacts {
        fuse_ready: json_line(stream, &protocol::stream::fuse("main", "ready"))?,
        fuse_stats: json_line(stream, &protocol::stream::fuse("main", "stats"))?,
        verify_ok: stream
            .text(stream::FIO_VERIFY)
            .map(|t| fio::parse(&t).is_ok_and(|r| r.error == 0)),
    })
}

/// A FUSE mount without the writeback cache writes through to its server: no
/// dirty pages, no throttling, nothing the run could show. Said first, as the
/// reason the run is left out, before the counters that follow from it.
fn no_writeback_cache(ready: Option<&Value>) -> Result<()> {
    match ready {
        Some(r) if r["writeback_cache"] == Value::Bool(false) => bail!(
            "the FUSE mount had no writeback cache (server {}; a 1 MiB probe write dirtied {} \
             kB): its writes go straight to the server, so the run cannot show the bug and is \
             left out. Make the server negotiate FUSE_WRITEBACK_CACHE (passthrough_ll: -o \
             writeback)",
            r.get("server")
                .map_or("wbstall-fuse".to_string(), |s| s.to_string()),
            r.get("dirtied_kb")
                .map_or("?".to_string(), |d| d.to_string())
        ),
        _ => Ok(()),
    }
}

/// The BDI's stats after the run, and the kB it wrote back over it.
fn written(before: &str, after: &str) -> Result<(VmCounters, i64)> {
    let stats = debugfs::parse_bdi_stats(after)?;
    let kb = bdi_written(&stats)? - bdi_written(&debugfs::parse_bdi_stats(before)?)?;
    Ok((stats, kb))
}

/// `guest-env`, which must name the clocksource the guest's latencies ran on.
fn guest_env(text: &str, console_log: &str) -> Result<BTreeMap<String, String>> {
    let env = key_values(text);
    if !env.contains_key("clocksource") {
        bail!("the guest's guest-env has no clocksource line (see {console_log})");
    }
    Ok(env)
}

/// A file the guest must have sent.
/// Where the boot's time went. Timing, not evidence: streams recorded before
/// the guest sent it (the tests' fixtures) have none.
fn phases_of(stream: &Stream) -> Result<Vec<phases::Phase>> {
    Ok(stream
        .text(stream::PHASES)
        .map(|t| phases::parse(&t))
        .transpose()?
        .unwrap_or_default())
}

fn need(stream: &Stream, name: &str, console_log: &str) -> Result<String> {
    stream
        .text(name)
        .with_context(|| format!("the guest sent no `{name}` (see the console log {console_log})"))
}

/// The kept vmstat counters after the run, and their change over it.
type VmCounters = BTreeMap<String, i64>;
fn vmstat(before: &str, after: &str) -> Result<(VmCounters, VmCounters)> {
    let vm_after = debugfs::parse_vmstat(after)?;
    let vm_before = debugfs::parse_vmstat(before)?;
    let mut vmstat = BTreeMap::new();
    let mut delta = BTreeMap::new();
    for k in debugfs::VMSTAT_KEYS {
        let (Some(v), Some(b)) = (vm_after.get(*k), vm_before.get(*k)) else {
            bail!("/proc/vmstat lacks `{k}`");
        };
        vmstat.insert(k.to_string(), *v);
        delta.insert(k.to_string(), v - b);
    }
    Ok((vmstat, delta))
}

fn bdi_written(stats: &VmCounters) -> Result<i64> {
    stats
        .get("BdiWritten_kB")
        .copied()
        .context("the BDI's debugfs stats lack BdiWritten")
}

/// The writers' `memory.events` when they ran in a memcg (`writer_domain`,
/// whichever detector ran: the tracefs detector has no memcg id, and
/// memory.max binds all the same); it must have its `max` line.
fn memcg_events(need: &dyn Fn(&str) -> Result<String>, writer_domain: &str) -> Result<VmCounters> {
    // How often the writers' cgroup reached memory.max: counted, and
    // refused only in records without the count of reclaim's writeback.
    if writer_domain != "memcg" {
        return Ok(VmCounters::new());
    }
    let e = debugfs::parse_vmstat(&need(stream::MEMCG_EVENTS)?).context("parsing memory.events")?;

    if !e.contains_key("max") {
        bail!("the writers' memory.events has no `max` line");
    }
    Ok(e)
}

#[cfg(test)]
#[path = "builder_tests.rs"]
mod tests;
