//! What one boot of memcg-flush-cost measured
//! (`qemu/scenarios/memcg-flush-cost/run.sh`): the memcg statistics' flushes
//! and the rstat lock's holds, counted by hist triggers over the writers'
//! window, the CPUs' time, reclaim, and every writer's fio result. Read once
//! here; `cargo xtask flush-cost` tabulates it.

use anyhow::{bail, Context, Result};

use crate::results::{
    debugfs::parse_vmstat,
    fio::{self, FioResult},
    witness::{parse_hist, Hist},
};

/// One boot of memcg-flush-cost.
#[derive(Debug, Clone, PartialEq)]
pub struct FlushCost {
    /// The writers' window (all of them started to all ended), guest seconds.
    pub secs: f64,
    /// `memcg_flush_stats` events: every call that considered a flush.
    pub checks: u64,
    /// Those that flushed (`force=1` or `needs_flush=1`).
    pub flushes: u64,
    /// Acquisitions of the rstat lock (one per possible CPU of a flush).
    pub locks: u64,
    /// Of those, the contended ones, and the time they spun (ns).
    pub contended: u64,
    pub spin_ns: u64,
    /// Time the lock was held, all acquisitions (ns).
    pub hold_ns: u64,
    /// Events the histograms dropped (their `Dropped:` lines).
    pub dropped: u64,
    /// Of all the CPUs' time in the window: busy (not idle or iowait), and in
    /// the kernel (system, irq, softirq).
    pub busy_share: f64,
    pub sys_share: f64,
    /// Pages reclaim scanned in the window (pgscan_kswapd + pgscan_direct).
    pub pgscan: i64,
    pub writers: Vec<FioResult>,
}

/// One boot's row: what it measured, or why the guest did not finish (a
/// writer's memcg out of memory, a crash), which is a result too.
pub struct FlushRow {
    pub variant: String,
    pub memcgs: u32,
    pub run: u32,
    pub cost: Result<FlushCost, String>,
}

impl FlushCost {
    /// From the scenario's streams; an error names what is missing.
    pub fn parse(
        hists: &str,
        fio_json: &str,
        cpu: &str,
        vmstat_before: &str,
        vmstat: &str,
    ) -> Result<FlushCost> {
        let h = Hists::parse(hists)?;
        let flush = h.one("memcg/memcg_flush_stats", |_| true)?;
        let mut flushes = 0;
        for e in &flush.entries {
            let flag = |k: &str| -> Result<bool> {
                match e.keys.get(k).map(String::as_str) {
                    Some("0") => Ok(false),
                    Some("1") => Ok(true),
                    other => bail!("memcg_flush_stats entry with {k} {other:?}"),
                }
            };
            if flag("force")? || flag("needs_flush")? {
                flushes += e.hitcount;
            }
        }
        let locked = h.one("cgroup/cgroup_rstat_locked", |t| !t.contains("contended"))?;
        let spun = h.one("synthetic/fc_spin", |_| true)?;
        let held = h.one("synthetic/fc_hold", |_| true)?;
        let (before, after) = cpu_times(cpu)?;
        let total = (after.total - before.total) as f64;
        if total <= 0.0 || after.uptime <= before.uptime {
            bail!("flush-cost-cpu: no time passed between its two readings");
        }
        let vb = parse_vmstat(vmstat_before).context("vmstat-before")?;
        let va = parse_vmstat(vmstat).context("vmstat")?;
        let mut pgscan = 0;
        for k in ["pgscan_kswapd", "pgscan_direct"] {
            let (Some(b), Some(a)) = (vb.get(k), va.get(k)) else {
                bail!("vmstat has no {k}");
            };
            pgscan += a - b;
        }
        let writers = fio::parse_all(fio_json).context("flush-cost-fio")?;
        Ok(FlushCost {
            secs: after.uptime - before.uptime,
            checks: flush.total("hitcount")?,
            flushes,
            locks: locked.total("hitcount")?,
            contended: spun.total("hitcount")?,
            spin_ns: spun.total("ns")?,
            hold_ns: held.total("ns")?,
            dropped: h.0.iter().map(|(_, h)| h.dropped).sum(),
            busy_share: (after.busy - before.busy) as f64 / total,
            sys_share: (after.sys - before.sys) as f64 / total,
            pgscan,
            writers,
        })
    }

    /// The writers' throughput, summed (MiB/s).
    pub fn mib_s(&self) -> f64 {
        self.writers.iter().map(|w| w.bw_mib_s).sum()
    }

    /// The worst writer's 99th percentile completion latency (ms).
    pub fn p99_ms(&self) -> Result<f64> {
        let mut worst: f64 = 0.0;
        for w in &self.writers {
            worst = worst.max(
                w.clat_at(99.0)
                    .context("a writer's fio result has no p99")?
                    / 1e3,
            );
        }
        Ok(worst)
    }

    /// The longest completion of any writer (ms).
    pub fn max_ms(&self) -> f64 {
        (self.writers.iter())
            .map(|w| w.clat_max_us / 1e3)
            .fold(0.0, f64::max)
    }

    /// A count a second of the window.
    pub fn per_s(&self, n: u64) -> f64 {
        n as f64 / self.secs
    }

    /// Nanoseconds as milliseconds a second of the window.
    pub fn ms_per_s(&self, ns: u64) -> f64 {
        ns as f64 / 1e6 / self.secs
    }
}

/// The stream's histograms, each file under its `@event <system>/<event>`
/// line.
struct Hists(Vec<(String, Hist)>);

impl Hists {
    fn parse(text: &str) -> Result<Hists> {
        let mut files: Vec<(&str, String)> = Vec::new();
        for line in text.lines() {
            if let Some(event) = line.strip_prefix("@event ") {
                files.push((event.trim(), String::new()));
            } else if let Some((_, body)) = files.last_mut() {
                body.push_str(line);
                body.push('\n');
            } else if !line.trim().is_empty() {
                bail!("flush-cost-hists: `{line}` before the first `@event` line");
            }
        }
        let mut out = Vec::new();
        for (event, body) in files {
            for h in parse_hist(&body, event)? {
                out.push((event.to_string(), h));
            }
        }
        if out.is_empty() {
            bail!("flush-cost-hists holds no histogram");
        }
        Ok(Hists(out))
    }

    /// The one histogram of `event` whose trigger `which` accepts.
    fn one(&self, event: &str, which: impl Fn(&str) -> bool) -> Result<&Hist> {
        let mut found = (self.0.iter()).filter(|(e, h)| e == event && which(&h.trigger));
        match (found.next(), found.next()) {
            (Some((_, h)), None) => Ok(h),
            (None, _) => {
                bail!("flush-cost-hists has no histogram of {event} (was its trigger attached?)")
            }
            (Some(_), Some(_)) => {
                bail!("flush-cost-hists has two histograms of {event} where one was expected")
            }
        }
    }
}

/// `uptime` and /proc/stat's `cpu` line, at one reading.
#[derive(Debug, Clone, Copy)]
struct CpuTimes {
    uptime: f64,
    total: u64,
    busy: u64,
    sys: u64,
}

/// The two readings of the `flush-cost-cpu` stream.
fn cpu_times(text: &str) -> Result<(CpuTimes, CpuTimes)> {
    let lines: Vec<&str> = text.lines().filter(|l| !l.trim().is_empty()).collect();
    let [u0, c0, u1, c1] = lines[..] else {
        bail!(
            "flush-cost-cpu has {} lines, not `uptime`/`cpu` twice",
            lines.len()
        );
    };
    Ok((reading(u0, c0)?, reading(u1, c1)?))
}

fn reading(uptime: &str, cpu: &str) -> Result<CpuTimes> {
    let up = (uptime.strip_prefix("uptime "))
        .and_then(|u| u.trim().parse().ok())
        .with_context(|| format!("flush-cost-cpu: `{uptime}` is not `uptime SECS`"))?;
    let f: Vec<u64> = (cpu.strip_prefix("cpu "))
        .with_context(|| format!("flush-cost-cpu: `{cpu}` is not /proc/stat's cpu line"))?
        .split_whitespace()
        .map(str::parse)
        .collect::<Result<_, _>>()
        .with_context(|| format!("flush-cost-cpu: `{cpu}` has a field that is not a number"))?;
    // user nice system idle iowait irq softirq steal (guest, guest_nice are
    // inside user and nice).
    let [user, nice, system, idle, iowait, irq, softirq, steal, ..] = f[..] else {
        bail!("flush-cost-cpu: `{cpu}` has fewer than 8 fields");
    };
    let total = user + nice + system + idle + iowait + irq + softirq + steal;
    Ok(CpuTimes {
        uptime: up,
        total,
        busy: total - idle - iowait,
        sys: system + irq + softirq,
    })
}

#[cfg(test)]
#[path = "flush_cost_tests.rs"]
mod tests;
