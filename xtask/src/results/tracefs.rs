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
//! global_dirty_state                  every throttle loop's (and flusher check's) view of
//!                                     the global counters: writeback, written
//! ```
//!
//! A throttle sleep is a timed sleep (`io_schedule_timeout(pause)` in
//! `TASK_KILLABLE`: only its timeout or a fatal signal ends it), so it lasts
//! from its event `t0` to `t0 + pause`. Each is classed as the module does
//! ([`SleepClass`]):
//!
//! - `flushing`: a flusher pass ran on the writer's wb during it (a worker had
//!   begun a pass on the wb and not yet left `wb_do_writeback()`, which is when
//!   `WB_writeback_running` is cleared, at `t0`; or a pass began before its end);
//! - `draining`: no pass, but writeback completed during it: the global
//!   `written` count of the last `global_dirty_state` at or before `t0` (the
//!   writer's own, from the same loop iteration) is below that of the first one
//!   at or after its end;
//! - `stall`: neither.
//!
//! The module reads the writer's wb's own `WB_WRITTEN`; the trace has only the
//! global count, so where another device's writeback completes during a stall
//! sleep, the trace says `draining` and the module `stall`, and the agreement
//! check leaves the run out rather than trust either. A sleep that ends after
//! the trace's last `global_dirty_state` is `unended`, not classed.

use std::collections::BTreeMap;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

/// One trace line.
#[derive(Debug, Clone, PartialEq)]
pub struct TraceEvent {
    /// `trace_clock=mono` time, microseconds.
    pub us: u64,
    pub pid: u32,
    pub kind: EventKind,
}

#[derive(Debug, Clone, PartialEq)]
pub enum EventKind {
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
    /// `global_dirty_state`: the global `written` count (pages whose
    /// writeback completed, NR_WRITTEN).
    Global {
        written: u64,
    },
}

/// A writeback domain: the bdi's name and the cgroup inode of its wb.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord)]
pub struct Wb {
    pub bdi: String,
    pub cgroup_ino: u64,
}

/// The events the detector needs, by the names the kernel gives them.
pub const EVENTS: [&str; 5] = [
    "balance_dirty_pages",
    "writeback_wake_background",
    "writeback_start",
    "writeback_pages_written",
    "global_dirty_state",
];

/// Parses the tracefs `trace` file. Lines of other events and comments are
/// skipped; a line of one of [`EVENTS`] that does not parse is an error.
pub fn parse(text: &str, origin: &str) -> Result<Vec<TraceEvent>> {
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
fn event(head: &str, name: &str, body: &str) -> Result<TraceEvent> {
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
        "balance_dirty_pages" => EventKind::Sleep {
            wb: fields.wb()?,
            paused_ms: fields.num("paused")?,
            pause_ms: fields.num("pause")?,
        },
        "writeback_wake_background" => EventKind::Wake(fields.wb()?),
        "writeback_start" => EventKind::Start {
            wb: fields.wb()?,
            reason: fields.get("reason")?.to_string(),
        },
        "global_dirty_state" => EventKind::Global {
            written: fields.num("written")?,
        },
        _ => EventKind::PagesWritten,
    };
    Ok(TraceEvent { us, pid, kind })
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
pub enum SleepClass {
    Flushing,
    Draining,
    Stall,
}

/// The tracefs detector's counts for one writeback domain.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Detected {
    pub throttle_sleeps: u64,
    pub pause_ms: u64,
    pub max_pause_ms: u64,
    /// The longest `paused + pause` of a sleep: the longest time a writer
    /// spent in one `balance_dirty_pages()` call, ms.
    pub max_call_ms: u64,
    pub flushing_sleeps: u64,
    pub flushing_ms: u64,
    pub draining_sleeps: u64,
    pub draining_ms: u64,
    pub stall_sleeps: u64,
    pub stall_ms: u64,
    /// Sleeps that end after the trace's last `global_dirty_state`: not classed.
    pub unended_sleeps: u64,
    pub bg_starts: u64,
    pub work_background: u64,
    pub work_periodic: u64,
    /// Events of all domains in the trace, and the trace's span in ms.
    pub events: u64,
    pub span_ms: u64,
}

/// A sleep of the writer's wb, waiting for its end to be classed.
struct Open {
    end_us: u64,
    pause_ms: u64,
    /// A pass ran on the wb at its start or has begun since.
    flushing: bool,
    /// The global `written` count before it.
    written: Option<u64>,
}

/// Classes every sleep of `wb` in `events` (in time order).
pub fn detect(events: &[TraceEvent], wb: &Wb) -> Detected {
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
    let mut written: Option<u64> = None;
    let mut open: Vec<Open> = Vec::new();
    for e in events {
        match &e.kind {
            // Sleeps that ended by now are classed by the first global
            // count at or after their end.
            EventKind::Global { written: now } => {
                let now = *now;
                open.retain(|o| {
                    if o.end_us > e.us {
                        return true;
                    }
                    let class = if o.flushing {
                        SleepClass::Flushing
                    } else if o.written.is_some_and(|w| now > w) {
                        SleepClass::Draining
                    } else {
                        SleepClass::Stall
                    };
                    d.count(class, o.pause_ms);
                    false
                });
                written = Some(now);
            }
            EventKind::Start { wb: w, reason } if w == wb => {
                if !running.contains(&e.pid) {
                    running.push(e.pid);
                }
                for o in open.iter_mut().filter(|o| e.us <= o.end_us) {
                    o.flushing = true;
                }
                match reason.as_str() {
                    "background" => d.work_background += 1,
                    "periodic" => d.work_periodic += 1,
                    _ => {}
                }
            }
            EventKind::PagesWritten => running.retain(|p| *p != e.pid),
            EventKind::Wake(w) if w == wb => d.bg_starts += 1,
            EventKind::Sleep {
                wb: w,
                paused_ms,
                pause_ms,
            } if w == wb && *pause_ms > 0 => {
                d.throttle_sleeps += 1;
                d.pause_ms += pause_ms;
                d.max_pause_ms = d.max_pause_ms.max(*pause_ms);
                d.max_call_ms = d.max_call_ms.max(paused_ms + pause_ms);
                open.push(Open {
                    end_us: e.us + pause_ms * 1000,
                    pause_ms: *pause_ms,
                    flushing: !running.is_empty(),
                    written,
                });
            }
            _ => {}
        }
    }
    d.unended_sleeps = open.len() as u64;
    d
}

impl Detected {
    fn count(&mut self, class: SleepClass, pause_ms: u64) {
        let (n, ms) = match class {
            SleepClass::Flushing => (&mut self.flushing_sleeps, &mut self.flushing_ms),
            SleepClass::Draining => (&mut self.draining_sleeps, &mut self.draining_ms),
            SleepClass::Stall => (&mut self.stall_sleeps, &mut self.stall_ms),
        };
        *n += 1;
        *ms += pause_ms;
    }
}

/// The detector's counts for the writer's `wb` from a boot's `trace-events`
/// and `trace-stats`; a trace that lost events is refused.
pub fn from_files(trace: &str, stats: &str, wb: &Wb) -> Result<Detected> {
    let lost = overruns(stats, "trace-stats")?;
    if lost > 0 {
        bail!(
            "the trace ring buffer overran ({lost} event(s) lost): the tracefs detector's \
             input is incomplete; raise buffer_size_kb in trace_start (qemu/lib.sh) or \
             shorten the run"
        );
    }
    Ok(detect(&parse(trace, "trace-events")?, wb))
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
        assert_eq!(ev.len(), 16, "{ev:#?}");
        assert_eq!(ev[0].kind, EventKind::Global { written: 1000 });
        assert_eq!(
            ev[1],
            TraceEvent {
                us: 12_000_000,
                pid: 210,
                kind: EventKind::Sleep {
                    wb: wb("0:45", 1),
                    paused_ms: 0,
                    pause_ms: 200
                }
            }
        );
        assert!(matches!(&ev[6].kind, EventKind::Start { reason, .. } if reason == "background"));
        assert_eq!(ev[6].pid, 31);
        assert_eq!(ev[14].pid, 300, "a comm with a dash: {:?}", ev[14]);
    }

    #[test]
    fn classes_each_sleep_by_what_happened_until_its_end() {
        let ev = parse(&fixture(), "trace.txt").unwrap();
        let d = detect(&ev, &wb("0:45", 1));
        // 12.0 s, 200 ms: no pass, written unchanged by 12.26 s: stall.
        // 12.3 s, 40 ms: a start was asked for at 12.25 s, but no pass began
        // and nothing completed by 12.4 s: stall. 12.5 s: a pass is running:
        // flushing. 13.0 s, 100 ms: no pass, written 1500 -> 1900 by 13.15 s:
        // draining. 13.3 s: no global count after its end: unended.
        assert_eq!(d.throttle_sleeps, 5);
        assert_eq!((d.stall_sleeps, d.stall_ms), (2, 200 + 40));
        assert_eq!((d.flushing_sleeps, d.flushing_ms), (1, 20));
        assert_eq!((d.draining_sleeps, d.draining_ms), (1, 100));
        assert_eq!(d.unended_sleeps, 1);
        assert_eq!(d.pause_ms, 200 + 40 + 20 + 100 + 200);
        assert_eq!(d.max_pause_ms, 200);
        // The last call had slept 3 s before its 200 ms sleep.
        assert_eq!(d.max_call_ms, 3200);
        assert_eq!(d.bg_starts, 1);
        assert_eq!(d.work_background, 1);
        // Another domain (a memcg wb of the same bdi) saw only its own sleep:
        // written rose from 1800 to 1900 while it slept.
        let other = detect(&ev, &wb("0:45", 77));
        assert_eq!(
            (
                other.throttle_sleeps,
                other.draining_sleeps,
                other.stall_sleeps
            ),
            (1, 1, 0)
        );
    }

    #[test]
    fn a_pass_that_begins_during_a_sleep_makes_it_flushing_and_a_later_one_does_not() {
        let at = |us: u64, kind: EventKind| TraceEvent { us, pid: 1, kind };
        let sleep = EventKind::Sleep {
            wb: wb("0:45", 1),
            paused_ms: 0,
            pause_ms: 100,
        };
        let start = EventKind::Start {
            wb: wb("0:45", 1),
            reason: "background".into(),
        };
        let g = |written| EventKind::Global { written };
        let during = [
            at(0, g(5)),
            at(10, sleep.clone()),
            at(50_000, start.clone()),
            at(200_000, g(5)),
        ];
        assert_eq!(detect(&during, &wb("0:45", 1)).flushing_sleeps, 1);
        let after = [
            at(0, g(5)),
            at(10, sleep),
            at(150_000, start),
            at(200_000, g(9)),
        ];
        let d = detect(&after, &wb("0:45", 1));
        // The pass began after the sleep's end (100.01 ms): it did not end
        // the sleep. Completions are counted up to the first global count
        // after the end, so the pages it wrote show as draining here; the
        // module reads its count at the sleep's end exactly.
        assert_eq!((d.flushing_sleeps, d.draining_sleeps), (0, 1));
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
