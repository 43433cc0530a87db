//! The measured times of a run's throttle sleeps, by class, and of the
//! `balance_dirty_pages()` calls they were in, beside the pauses the kernel
//! asked for: the same record from both detectors (the module's counters since
//! its format 5, the tracefs detector's `sched_wakeup`/`sched_switch` of the
//! writers), on one clock (the trace's `mono`, the module's
//! `ktime_get_mono_fast_ns()`).
//!
//! A sleep is **asleep** from its throttle event to its wake-up (the time the
//! throttle took from the writer: what the shares judge), and **off a CPU**
//! until it runs again (asleep plus its wait on the run queue, which the
//! scheduler, not the throttle, decides). A call **holds** its writer from its
//! start to the end of its last sleep.

use serde::{Deserialize, Serialize};

use crate::results::classes::{Cause, SleepClass};

/// Measured times, µs, in the keys of the module's `stats` line.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Measured {
    pub flushing_asleep_us: u64,
    pub flushing_off_cpu_us: u64,
    pub draining_asleep_us: u64,
    pub draining_off_cpu_us: u64,
    /// Stall sleeps, both causes: the time the verdict judges.
    pub stall_asleep_us: u64,
    pub stall_off_cpu_us: u64,
    pub unrequested_asleep_us: u64,
    pub unrequested_off_cpu_us: u64,
    pub declined_asleep_us: u64,
    pub declined_off_cpu_us: u64,
    pub max_asleep_us: u64,
    /// Classed sleeps with no wake-up (a fatal signal already pending): their
    /// time asleep is their time off a CPU.
    pub unwoken_sleeps: u64,
    /// Calls with a classed sleep, the time they held their writers, the longest.
    pub calls: u64,
    pub held_us: u64,
    pub max_held_us: u64,
}

/// One sleep's times, µs.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Times {
    pub asleep_us: u64,
    pub off_cpu_us: u64,
}

impl Measured {
    /// Adds one call that held its writer `held_us`.
    pub fn count_call(&mut self, held_us: u64) {
        self.calls += 1;
        self.held_us += held_us;
        self.max_held_us = self.max_held_us.max(held_us);
    }

    /// Time asleep in all classed sleeps, and off a CPU, µs.
    pub fn asleep_us(&self) -> u64 {
        self.flushing_asleep_us + self.draining_asleep_us + self.stall_asleep_us
    }

    pub fn off_cpu_us(&self) -> u64 {
        self.flushing_off_cpu_us + self.draining_off_cpu_us + self.stall_off_cpu_us
    }
}

/// Adds one classed sleep's times to `m`; `woken`: its wake-up was seen.
pub fn count_times(m: &mut Measured, class: SleepClass, t: Times, woken: bool) {
    let (a, o) = match class {
        SleepClass::Flushing => (&mut m.flushing_asleep_us, &mut m.flushing_off_cpu_us),
        SleepClass::Draining => (&mut m.draining_asleep_us, &mut m.draining_off_cpu_us),
        SleepClass::Stall(cause) => {
            m.stall_asleep_us += t.asleep_us;
            m.stall_off_cpu_us += t.off_cpu_us;
            match cause {
                Cause::Unrequested => (&mut m.unrequested_asleep_us, &mut m.unrequested_off_cpu_us),
                Cause::Declined => (&mut m.declined_asleep_us, &mut m.declined_off_cpu_us),
            }
        }
    };
    *a += t.asleep_us;
    *o += t.off_cpu_us;
    m.max_asleep_us = m.max_asleep_us.max(t.asleep_us);
    if !woken {
        m.unwoken_sleeps += 1;
    }
}

/// Time asleep in `cause`'s stall sleeps, µs.
pub fn cause_asleep_us(m: &Measured, cause: Cause) -> u64 {
    match cause {
        Cause::Unrequested => m.unrequested_asleep_us,
        Cause::Declined => m.declined_asleep_us,
    }
}

/// A classed sleep, as its call's time needs it.
pub struct Part {
    pub pid: u32,
    /// Its call's start as this sleep's event tells it (`t0 - paused`), µs.
    pub call_us: u64,
    pub end_us: u64,
    pub goes_on: bool,
}

/// The time each `balance_dirty_pages()` call held its writer, µs: from its
/// start (its first sleep's event less its `paused`) to the end of its last
/// sleep. A writer's next sleep is of the same call when the last one's
/// decision had no ratelimit (`task_ratelimit=0`: the loop went on) and its
/// `paused` reaches back to before the last one's end; the trace has no
/// `start_time` (the module keys calls by it).
pub fn held_by_call(parts: &[Part]) -> Vec<u64> {
    let mut held = Vec::new();
    // Per writer: its call in progress (start, last end, goes on).
    let mut open: Vec<(u32, u64, u64, bool)> = Vec::new();
    for p in parts {
        match open.iter_mut().find(|c| c.0 == p.pid) {
            Some(c) if c.3 && p.call_us <= c.2 => {
                c.2 = p.end_us;
                c.3 = p.goes_on;
            }
            Some(c) => {
                held.push(c.2.saturating_sub(c.1));
                *c = (p.pid, p.call_us, p.end_us, p.goes_on);
            }
            None => open.push((p.pid, p.call_us, p.end_us, p.goes_on)),
        }
    }
    held.extend(open.iter().map(|c| c.2.saturating_sub(c.1)));
    held
}
