//! The traces a boot sent (`trace-events`, and the writers' scheduler events
//! from a tracing instance of their own, `trace-sched`), checked for loss and
//! merged in time order for the tracefs detector ([`super::tracefs`]).

use anyhow::{bail, Context, Result};

use crate::results::{
    trace_events::{parse, Wb},
    tracefs::{detect_each, Detected, Sleep},
};

/// What the guest traced: the writeback events and the writers' scheduler
/// events (a tracing instance of their own), each with its ring buffers'
/// stats.
pub struct Traces<'a> {
    pub events: &'a str,
    pub stats: &'a str,
    pub sched: &'a str,
    pub sched_stats: &'a str,
}

/// The detector's counts for the writer's `wb` from a boot's traces, the
/// two merged in time order; a trace that lost events is refused.
pub fn from_files(t: &Traces<'_>, wb: &Wb) -> Result<(Detected, Vec<Sleep>)> {
    for (stats, origin) in [
        (t.stats, "trace-stats"),
        (t.sched_stats, "trace-sched-stats"),
    ] {
        let lost = overruns(stats, origin)?;
        if lost > 0 {
            bail!(
                "the trace ring buffer overran ({lost} event(s) lost, {origin}): the tracefs \
                 detector's input is incomplete; raise buffer_size_kb in trace_start or \
                 sched_trace_start (qemu/lib.sh) or shorten the run"
            );
        }
    }
    let mut events = parse(t.events, "trace-events")?;
    events.extend(parse(t.sched, "trace-sched")?);
    // Stable: at one µs, the writeback events first.
    events.sort_by_key(|e| e.us);
    Ok(detect_each(&events, wb))
}

/// Events the ring buffer lost: the `overrun:` lines of every CPU's `stats`
/// (the guest sends them concatenated). Any loss makes the trace no evidence.
pub fn overruns(stats: &str, origin: &str) -> Result<u64> {
    let found: Vec<u64> = stats
        .lines()
        .filter_map(|l| l.trim().strip_prefix("overrun:"))
        .map(|v| v.trim().parse::<u64>())
        .collect::<Result<_, _>>()
        .with_context(|| format!("{origin}: an `overrun:` that is not a number"))?;
    if found.is_empty() {
        bail!("{origin}: no `overrun:` line (per_cpu/cpu*/stats missing?)");
    }
    Ok(found.iter().sum())
}

#[cfg(test)]
mod tests {
    use super::overruns;

    #[test]
    fn the_overruns_of_every_cpu_are_summed_and_a_missing_line_is_an_error() {
        assert_eq!(
            overruns("entries: 5\noverrun: 0\n\noverrun: 0\n", "s").unwrap(),
            0
        );
        assert_eq!(overruns("overrun: 3\noverrun: 0\n", "s").unwrap(), 3);
        assert!(overruns("entries: 5\n", "s").is_err());
    }
}
