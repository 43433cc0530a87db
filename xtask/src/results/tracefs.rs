//! The tracefs detector: the module's classification of throttle sleeps,
//! computed from the kernel's own writeback trace events, so that kernels
//! without the module (no Rust, another release) can be judged alike.
//!
//! The guest records, from when the measurement starts until it ends
//! (`trace_start`/`trace_collect` in `qemu/lib.sh`, `trace_clock=mono`):
//!
//! ```text
//! balance_dirty_pages  if pause > 0   a throttle sleep: bdi, cgroup_ino, paused (ms since
//!                                     the call began), pause (ms)
//! writeback_wake_background           a background writeback start was requested
//! writeback_start                     a flusher pass began (bdi, cgroup_ino, reason)
//! writeback_pages_written             the flusher left wb_do_writeback() (no bdi: by pid)
//! ```
//!
//! and each sleep is classed as the module does ([`Class`]): `busy` when the
//! writer's wb was being written back (a flusher worker had begun a pass on it
//! and not yet left `wb_do_writeback()`, which is when `WB_writeback_running`
//! is cleared), else `idle` when a background start was requested since the
//! call began (`paused` ms before the event, one tick of slack as the module
//! allows with jiffies), else `stall`.

use std::{collections::BTreeMap, fs, path::Path};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

/// One trace line.
#[derive(Debug, Clone, PartialEq)]
pub struct Event {
    /// `trace_clock=mono` time, microseconds.
    pub us: u64,
    pub pid: u32,
    pub kind: Kind,
}

#[derive(Debug, Clone, PartialEq)]
pub enum Kind {
    Sleep {
        wb: Wb,
        paused_ms: u64,
        pause_ms: u64,
    },
    Wake(Wb),
    Start {
        wb: Wb,
        reason: String,
    },
    PagesWritten,
}

/// A writeback domain: the bdi's name and the cgroup inode of its wb.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Wb {
    pub bdi: String,
    pub cgroup_ino: u64,
}

/// The events the detector needs, by the names the kernel gives them.
pub const EVENTS: [&str; 4] = [
    "balance_dirty_pages",
    "writeback_wake_background",
    "writeback_start",
    "writeback_pages_written",
];

/// Parses the tracefs `trace` file. Lines of other events and comments are
/// skipped; a line of one of [`EVENTS`] that does not parse is an error.
pub fn parse(text: &str, origin: &str) -> Result<Vec<Event>> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.starts_with('#') || line.trim().is_empty() {
            continue;
        }
        let Some((name, at)) = EVENTS
            .iter()
            .find_map(|e| line.find(&format!(": {e}: ")).map(|at| (*e, at)))
        else {
            continue;
        };
        let ev = event(&line[..at], name, &line[at + name.len() + 4..])
            .with_context(|| format!("{origin}:{}: `{line}`", i + 1))?;
        out.push(ev);
    }
    Ok(out)
}

/// `<comm>-<pid> [<cpu>] <flags> <seconds>` and the event's fields.
fn event(head: &str, name: &str, body: &str) -> Result<Event> {
    let (task, rest) = head.rsplit_once(" [").context("no `[cpu]`")?;
    let pid = task
        .trim()
        .rsplit_once('-')
        .context("no `comm-pid`")?
        .1
        .parse()
        .context("pid")?;
    let secs = rest.split_whitespace().last().context("no timestamp")?;
    let (s, frac) = secs.split_once('.').context("timestamp without `.`")?;
    if frac.len() != 6 {
        bail!("timestamp `{secs}` is not in microseconds (trace_clock mono?)");
    }
    let us = s.parse::<u64>().context("timestamp")? * 1_000_000 + frac.parse::<u64>()?;
    let fields = Fields::of(body);
    let kind = match name {
        "balance_dirty_pages" => Kind::Sleep {
            wb: fields.wb()?,
            paused_ms: fields.num("paused")?,
            pause_ms: fields.num("pause")?,
        },
        "writeback_wake_background" => Kind::Wake(fields.wb()?),
        "writeback_start" => Kind::Start {
            wb: fields.wb()?,
            reason: fields.get("reason")?.to_string(),
        },
        _ => Kind::PagesWritten,
    };
    Ok(Event { us, pid, kind })
}

/// `bdi 0:45: k=v k=v ...`
struct Fields<'a> {
    bdi: Option<&'a str>,
    kv: BTreeMap<&'a str, &'a str>,
}

impl<'a> Fields<'a> {
    fn of(body: &'a str) -> Fields<'a> {
        let (bdi, rest) = match body.strip_prefix("bdi ").and_then(|b| b.split_once(": ")) {
            Some((b, r)) => (Some(b), r),
            None => (None, body),
        };
        let kv = rest
            .split_whitespace()
            .filter_map(|w| w.split_once('='))
            .collect();
        Fields { bdi, kv }
    }
    fn get(&self, k: &str) -> Result<&'a str> {
        self.kv
            .get(k)
            .copied()
            .with_context(|| format!("no `{k}=`"))
    }
    fn num(&self, k: &str) -> Result<u64> {
        let v = self.get(k)?;
        // `pause` is signed in the kernel; a negative one is no sleep.
        match v.parse::<i64>() {
            Ok(n) => Ok(n.max(0) as u64),
            Err(_) => bail!("`{k}={v}` is not a number"),
        }
    }
    fn wb(&self) -> Result<Wb> {
        Ok(Wb {
            bdi: self.bdi.context("no `bdi NAME:`")?.to_string(),
            cgroup_ino: self.num("cgroup_ino")?,
        })
    }
}

/// How a throttle sleep is classed (the module's `SleepClass`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Class {
    Busy,
    Idle,
    Stall,
}

/// The tracefs detector's counts for one writeback domain.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Detected {
    pub throttle_sleeps: u64,
    pub pause_ms: u64,
    pub max_pause_ms: u64,
    /// Sleeps with no writeback running (`idle` and `stall`), as the module counts.
    pub idle_sleeps: u64,
    pub stall_sleeps: u64,
    pub stall_ms: u64,
    pub bg_starts: u64,
    pub work_background: u64,
    pub work_periodic: u64,
    /// Events of all domains in the trace, and the trace's span in ms.
    pub events: u64,
    pub span_ms: u64,
}

/// Classes every sleep of `wb` in `events` (in time order). `tick_us`: one
/// jiffy, the granularity of `paused`.
pub fn detect(events: &[Event], wb: &Wb, tick_us: u64) -> Detected {
    let mut d = Detected {
        events: events.len() as u64,
        span_ms: match (events.first(), events.last()) {
            (Some(a), Some(b)) => (b.us - a.us) / 1000,
            _ => 0,
        },
        ..Detected::default()
    };
    // Flusher workers (pid) in wb_do_writeback() for this wb.
    let mut running: Vec<u32> = Vec::new();
    let mut last_wake: Option<u64> = None;
    for e in events {
        match &e.kind {
            Kind::Start { wb: w, reason } if w == wb => {
                if !running.contains(&e.pid) {
                    running.push(e.pid);
                }
                match reason.as_str() {
                    "background" => d.work_background += 1,
                    "periodic" => d.work_periodic += 1,
                    _ => {}
                }
            }
            Kind::PagesWritten => running.retain(|p| *p != e.pid),
            Kind::Wake(w) if w == wb => {
                d.bg_starts += 1;
                last_wake = Some(e.us);
            }
            Kind::Sleep {
                wb: w,
                paused_ms,
                pause_ms,
            } if w == wb && *pause_ms > 0 => {
                let began = e.us.saturating_sub(paused_ms * 1000 + tick_us);
                let class = if !running.is_empty() {
                    Class::Busy
                } else if last_wake.is_some_and(|t| t >= began) {
                    Class::Idle
                } else {
                    Class::Stall
                };
                d.throttle_sleeps += 1;
                d.pause_ms += pause_ms;
                d.max_pause_ms = d.max_pause_ms.max(*pause_ms);
                if class != Class::Busy {
                    d.idle_sleeps += 1;
                }
                if class == Class::Stall {
                    d.stall_sleeps += 1;
                    d.stall_ms += pause_ms;
                }
            }
            _ => {}
        }
    }
    d
}

/// The detector's counts for the writer's `wb` from a boot's `trace-events`
/// and `trace-stats`; a trace that lost events is refused.
pub fn from_files(trace: &str, stats: &str, wb: &Wb, tick_us: u64) -> Result<Detected> {
    let lost = overruns(stats, "trace-stats")?;
    if lost > 0 {
        bail!(
            "the trace ring buffer overran ({lost} event(s) lost): the tracefs detector's \
             input is incomplete; raise buffer_size_kb in trace_start (qemu/lib.sh) or \
             shorten the run"
        );
    }
    Ok(detect(&parse(trace, "trace-events")?, wb, tick_us))
}

/// One jiffy of the kernel whose `.config` is at `config`, in microseconds.
pub fn tick_us(config: &Path) -> Result<u64> {
    let text = fs::read_to_string(config)
        .with_context(|| format!("reading {} (the kernel's CONFIG_HZ)", config.display()))?;
    let hz: u64 = text
        .lines()
        .find_map(|l| l.strip_prefix("CONFIG_HZ="))
        .with_context(|| format!("{} has no CONFIG_HZ=", config.display()))?
        .trim()
        .parse()
        .with_context(|| format!("{}: CONFIG_HZ is not a number", config.display()))?;
    if hz == 0 {
        bail!("{}: CONFIG_HZ=0", config.display());
    }
    Ok(1_000_000 / hz)
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
    use super::*;

    fn fixture() -> String {
        std::fs::read_to_string(crate::util::project_root().join("xtask/fixtures/trace/trace.txt"))
            .unwrap()
    }

    fn wb(bdi: &str, ino: u64) -> Wb {
        Wb {
            bdi: bdi.into(),
            cgroup_ino: ino,
        }
    }

    #[test]
    fn parses_the_events_it_needs_and_skips_the_rest() {
        let ev = parse(&fixture(), "trace.txt").unwrap();
        assert_eq!(ev.len(), 9, "{ev:#?}");
        assert_eq!(
            ev[0],
            Event {
                us: 12_000_000,
                pid: 210,
                kind: Kind::Sleep {
                    wb: wb("0:45", 1),
                    paused_ms: 0,
                    pause_ms: 200
                }
            }
        );
        assert!(matches!(&ev[3].kind, Kind::Start { reason, .. } if reason == "background"));
        assert_eq!(ev[3].pid, 31);
        assert_eq!(ev[8].pid, 300, "a comm with a dash: {:?}", ev[8]);
    }

    #[test]
    fn classes_sleeps_as_the_module_does() {
        let ev = parse(&fixture(), "trace.txt").unwrap();
        let d = detect(&ev, &wb("0:45", 1), 4000);
        // 12.0 s: nothing requested or running: stall. 12.3 s: a wake 50 ms
        // into the call: idle. 12.5 s: a pass is running: busy. 13.0 s: the
        // flusher left wb_do_writeback() and the last wake was before the call
        // began: stall.
        assert_eq!(d.throttle_sleeps, 4);
        assert_eq!(d.stall_sleeps, 2);
        assert_eq!(d.stall_ms, 200 + 100);
        assert_eq!(d.idle_sleeps, 3);
        assert_eq!(d.bg_starts, 1);
        assert_eq!(d.work_background, 1);
        assert_eq!(d.max_pause_ms, 200);
        // Another domain (a memcg wb of the same bdi) saw only its own sleep.
        let other = detect(&ev, &wb("0:45", 77), 4000);
        assert_eq!((other.throttle_sleeps, other.stall_sleeps), (1, 1));
    }

    #[test]
    fn bad_lines_of_known_events_and_lost_events_are_errors() {
        let bad = "fio-210 [000] ..... 12.000000: balance_dirty_pages: bdi 0:45: paused=x pause=1 cgroup_ino=1\n";
        let err = parse(bad, "t").unwrap_err();
        assert!(format!("{err:#}").contains("paused=x"), "{err:#}");
        let coarse =
            "fio-210 [000] ..... 12.000: writeback_wake_background: bdi 0:45: cgroup_ino=1\n";
        let err = format!("{:#}", parse(coarse, "t").unwrap_err());
        assert!(err.contains("microseconds"), "{err}");
        assert_eq!(
            overruns("entries: 5\noverrun: 0\n\noverrun: 0\n", "s").unwrap(),
            0
        );
        assert_eq!(overruns("overrun: 3\noverrun: 0\n", "s").unwrap(), 3);
        assert!(overruns("entries: 5\n", "s").is_err());
    }
}
