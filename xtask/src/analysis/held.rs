//! What `cargo xtask hunt` climbs: writers **held with nothing to wait for**. A run's
//! stall sleeps (the module's measured time asleep, by cause) count only in
//! the sampler's intervals where the writers' BDI had no page under
//! writeback, at the interval's ends and in the two samples before (a sleep
//! lasts at most 200 ms, two default intervals): the kernel's own count says
//! no batch was in flight whose completion the throttle could have been
//! waiting for. The rest of the stall time is `in_flight`: reported, never
//! climbed (a batch in flight with no completion yet reads as a stall to
//! both detectors: docs/findings/memcg-stale-stats). A run with a problem
//! (`results::problems`: a warning, a witness or detector disagreement, ...)
//! is no evidence. A point holds when most of its runs are evidence held at
//! or above the expectations' `stall_fraction`.

use anyhow::{bail, Context, Result};

use crate::{
    analysis::expected::Expected,
    results::{
        debugfs::{self, KvLine},
        problems,
        record::{writer_ms, RunRecord},
        samples::{self, Sample},
    },
};

/// The stall's causes, as the module names them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum HeldCause {
    /// No background writeback was asked for (64dd89ae01f2's mechanism).
    Unrequested,
    /// Asked for, and the flusher found nothing over its threshold (the
    /// memcg's stale statistics).
    Declined,
}

/// Whose limits held the writers: a strictlimit BDI's own (per-wb), else the
/// writers' writeback domain as the run recorded it. Not the module's
/// `Domain`, the domain of one throttle decision (`domain=` of `thresholds`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum HeldDomain {
    /// A BDI with strict_limit (FUSE's): its per-wb thresholds bind.
    Strictlimit,
    /// The writers' memcg.
    Memcg,
    Global,
}

/// What held the writers, named by what we know: a cause in a domain.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, clap::ValueEnum)]
pub enum HeldBy {
    /// 64dd89ae01f2 on a strictlimit BDI: no start asked for.
    Strictlimit,
    /// 64dd89ae01f2 under a memcg's limits: no start asked for.
    MemcgUnrequested,
    /// The memcg's stale statistics: a start asked for and declined.
    StaleStats,
    /// Neither: not a mechanism we know.
    New,
}

impl HeldBy {
    pub fn of(cause: HeldCause, domain: HeldDomain) -> HeldBy {
        match (cause, domain) {
            (HeldCause::Unrequested, HeldDomain::Strictlimit) => HeldBy::Strictlimit,
            (HeldCause::Unrequested, HeldDomain::Memcg) => HeldBy::MemcgUnrequested,
            (HeldCause::Declined, HeldDomain::Memcg) => HeldBy::StaleStats,
            _ => HeldBy::New,
        }
    }

    pub fn name(self) -> &'static str {
        match self {
            HeldBy::Strictlimit => "strictlimit",
            HeldBy::MemcgUnrequested => "memcg-unrequested",
            HeldBy::StaleStats => "stale-stats",
            HeldBy::New => "NEW",
        }
    }

    /// The commit or finding that explains it.
    pub fn known_as(self) -> &'static str {
        match self {
            HeldBy::Strictlimit => {
                "known: 64dd89ae01f2 on a strictlimit BDI (per-wb thresholds passed, global \
                 bg_thresh not: no background writeback asked for); fixed by v1, v2"
            }
            HeldBy::MemcgUnrequested => {
                "known: 64dd89ae01f2 under a memcg's limits (no background writeback asked \
                 for); fixed by v2 (cece9dc61daa)"
            }
            HeldBy::StaleStats => {
                "known: the memcg's stale statistics (a start asked for, declined on the \
                 snapshot): docs/findings/memcg-stale-stats"
            }
            HeldBy::New => "not a mechanism we know: trace it (its session's sleeps.txt)",
        }
    }
}

/// One run, judged for the hunt.
#[derive(Debug, Clone, PartialEq)]
pub struct RunHeld {
    /// Why the run is no evidence; empty when it is.
    pub problems: Vec<String>,
    /// Writer time held with nothing in flight, by cause, as shares of the
    /// writers' time.
    pub unrequested: f64,
    pub declined: f64,
    /// Stall time while pages were under writeback on the BDI (not climbed).
    pub in_flight: f64,
    /// The module's and the trace's whole stall shares.
    pub stall: f64,
    pub trace_stall: Option<f64>,
    pub mib_s: f64,
    pub max_call_ms: u64,
    pub domain: HeldDomain,
}

impl RunHeld {
    pub fn held(&self) -> f64 {
        self.unrequested + self.declined
    }

    pub fn evidence(&self) -> bool {
        self.problems.is_empty()
    }
}

/// The module's cumulative stall times of the writers' domain in a sample, µs.
fn stall_us(stats: &[KvLine], bdi: &str, memcg_id: Option<u64>) -> Result<(u64, u64, u64)> {
    let line = samples::writer(stats, bdi, memcg_id)
        .with_context(|| format!("no line of the writers' domain (bdi {bdi}) in a sample"))?;
    let c = |k: &str| debugfs::counter(line, k, "a sample's wbstall/stats");
    Ok((
        c("unrequested_asleep_us")?,
        c("declined_asleep_us")?,
        c("stall_asleep_us")?,
    ))
}

/// Splits the run's stall time into held with nothing in flight (by cause)
/// and in flight, from its samples: (unrequested, declined, in flight), µs.
pub fn split(blocks: &[Sample], bdi: &str, memcg_id: Option<u64>) -> Result<(u64, u64, u64)> {
    // The samples that carry the module's line (before the writers' first
    // event a slot may not exist yet: nothing to count).
    let mut pts = Vec::new();
    for b in blocks {
        if samples::writer(&b.stats, bdi, memcg_id).is_none() {
            continue;
        }
        let wb = *b
            .bdi
            .get("BdiWriteback")
            .with_context(|| format!("the sample at {} s has no BdiWriteback", b.t))?;
        pts.push((stall_us(&b.stats, bdi, memcg_id)?, wb));
    }
    if pts.len() < 2 {
        bail!("fewer than two samples of the writers' domain: run with the sampler (--sample-ms)");
    }
    let (mut unreq, mut decl, mut flight) = (0, 0, 0);
    for i in 1..pts.len() {
        let ((u0, d0, s0), _) = pts[i - 1];
        let ((u1, d1, s1), _) = pts[i];
        let quiet = pts[i.saturating_sub(3)..=i].iter().all(|(_, wb)| *wb == 0);
        let (du, dd, ds) = (
            u1.saturating_sub(u0),
            d1.saturating_sub(d0),
            s1.saturating_sub(s0),
        );
        if quiet {
            unreq += du;
            decl += dd;
        } else {
            flight += ds;
        }
    }
    Ok((unreq, decl, flight))
}

/// Judges one run of a point: `samples` is its samples file's text.
pub fn run_held(r: &RunRecord, samples: &str, expected: &Expected) -> Result<RunHeld> {
    let problems = problems::problems(r, &expected.witness);
    let w = &r.detection.writer;
    let blocks = samples::parse(samples)
        .context("reading the run's samples")?
        .blocks;
    let (u, d, f) = split(&blocks, &w.bdi, w.memcg_id).with_context(|| format!("{}", r.id))?;
    let writer_us = writer_ms(&r.job, r.detection.fio_wall_s) * 1000.0;
    if writer_us <= 0.0 {
        bail!("{}: no writer time (fio's wall time is 0)", r.id);
    }
    let share = |us: u64| us as f64 / writer_us;
    Ok(RunHeld {
        problems,
        unrequested: share(u),
        declined: share(d),
        in_flight: share(f),
        stall: r.stall_fraction(),
        trace_stall: r.tracefs_stall_fraction(),
        mib_s: r.fio.bw_mib_s,
        max_call_ms: r.detection.mechanism.max_call_ms,
        domain: match (r.detection.mechanism.strictlimit, w.writer_domain.as_str()) {
            (1, _) => HeldDomain::Strictlimit,
            (_, "memcg") => HeldDomain::Memcg,
            _ => HeldDomain::Global,
        },
    })
}

/// A point's runs, judged together.
#[derive(Debug, Clone, PartialEq)]
pub struct PointHeld {
    /// The mean held share over the planned runs (a run that is no
    /// evidence, or never came back, counts 0): what the search climbs. A
    /// mean, not a median: held time in one start phase of three is the
    /// slope towards a point that holds in most.
    pub score: f64,
    /// Most planned runs are evidence held at or above `stall_fraction`.
    pub holds: bool,
    /// The cause with more held time in its domain, when any was.
    pub mechanism: Option<HeldBy>,
}

/// Judges a point from its runs' judgements; `planned` runs were booted.
pub fn point_held(runs: &[RunHeld], planned: u32, stall_fraction: f64) -> PointHeld {
    let mut shares: Vec<f64> = runs
        .iter()
        .map(|r| if r.evidence() { r.held() } else { 0.0 })
        .collect();
    shares.resize(shares.len().max(planned.max(1) as usize), 0.0);
    let score = shares.iter().sum::<f64>() / shares.len() as f64;
    let held = runs
        .iter()
        .filter(|r| r.evidence() && r.held() >= stall_fraction)
        .count();
    let (u, d) = runs
        .iter()
        .filter(|r| r.evidence())
        .fold((0.0, 0.0), |(u, d), r| (u + r.unrequested, d + r.declined));
    let cause = match (u, d) {
        (0.0, 0.0) => None,
        (u, d) if u >= d => Some(HeldCause::Unrequested),
        _ => Some(HeldCause::Declined),
    };
    let domain = runs.iter().find(|r| r.evidence()).map(|r| r.domain);
    PointHeld {
        score,
        holds: 2 * held > planned as usize,
        mechanism: cause.zip(domain).map(|(c, d)| HeldBy::of(c, d)),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn block(t: f64, unreq: u64, decl: u64, stall: u64, wb: i64) -> Sample {
        let line = format!(
            "bdi=0:22 memcg_id=0 unrequested_asleep_us={unreq} declined_asleep_us={decl} \
             stall_asleep_us={stall}"
        );
        Sample {
            t,
            stats: debugfs::parse_kv_lines(&line, "test").unwrap(),
            bdi: [("BdiWriteback".to_string(), wb)].into(),
            ..Sample::default()
        }
    }

    /// The misreading the search must not climb: stall time while a batch is
    /// in flight (pages under writeback, no completion yet) is set apart.
    #[test]
    fn stall_time_with_pages_in_flight_is_not_held() {
        let quiet = [
            block(0.0, 0, 0, 0, 0),
            block(0.1, 100, 0, 100, 0),
            block(0.2, 200, 50, 250, 0),
        ];
        assert_eq!(split(&quiet, "0:22", None).unwrap(), (200, 50, 0));
        // The same stall, with 4 MB under writeback at one sample: in flight
        // for that interval and the next three.
        let busy = [
            block(0.0, 0, 0, 0, 0),
            block(0.1, 100, 0, 100, 4096),
            block(0.2, 200, 50, 250, 0),
        ];
        assert_eq!(split(&busy, "0:22", None).unwrap(), (0, 0, 250));
    }

    #[test]
    fn a_sample_without_the_bdis_writeback_is_an_error() {
        let mut b = block(0.1, 1, 0, 1, 0);
        b.bdi.clear();
        let e = split(&[block(0.0, 0, 0, 0, 0), b], "0:22", None).unwrap_err();
        assert!(format!("{e:#}").contains("BdiWriteback"), "{e:#}");
    }

    fn held(unrequested: f64, problems: &[&str]) -> RunHeld {
        RunHeld {
            problems: problems.iter().map(|p| p.to_string()).collect(),
            unrequested,
            declined: 0.0,
            in_flight: 0.0,
            stall: unrequested,
            trace_stall: Some(unrequested),
            mib_s: 1.0,
            max_call_ms: 0,
            domain: HeldDomain::Strictlimit,
        }
    }

    #[test]
    fn a_point_holds_only_in_most_of_its_planned_runs() {
        let two = [held(0.5, &[]), held(0.4, &[])];
        let p = point_held(&two, 3, 0.05);
        assert!(p.holds && p.mechanism == Some(HeldBy::Strictlimit));
        assert!((p.score - 0.3).abs() < 1e-12, "{}", p.score);
        // One of three, or two that are no evidence: it does not hold.
        assert!(!point_held(&two[..1], 3, 0.05).holds);
        let bad = [
            held(0.5, &["a warning"]),
            held(0.4, &["a warning"]),
            held(0.3, &[]),
        ];
        let p = point_held(&bad, 3, 0.05);
        assert!(!p.holds && (p.score - 0.1).abs() < 1e-12, "{}", p.score);
    }
}
