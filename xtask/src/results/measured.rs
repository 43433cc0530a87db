//! The measured times of a run's throttle sleeps, by class, and of the
//! `balance_dirty_pages()` calls they were in, beside the pauses the kernel
//! asked for: the same record from both detectors (the module's counters since
//! its format 5, the tracefs detector's `sched_wakeup` of the writers), on one
//! clock (the trace's `mono`, the module's `ktime_get_mono_fast_ns()`).
//!
//! A sleep is **asleep** from its throttle event to its wake-up (the time the
//! throttle took from the writer: what the shares judge), and **off a CPU**
//! until it runs again (asleep plus its wait on the run queue, which the
//! scheduler, not the throttle, decides): the module measures both; the trace
//! only the first ([`OffCpu`] says why). A call **holds** its writer from its
//! start to the end of its last sleep (its wake-up, for the trace).

use serde::{Deserialize, Serialize};

use crate::results::classes::{Cause, SleepClass};

/// Measured times, µs, in the keys of the module's `stats` line.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Measured {
    pub flushing_asleep_us: u64,
    pub draining_asleep_us: u64,
    /// Stall sleeps, both causes: the time the verdict judges.
    pub stall_asleep_us: u64,
    pub unrequested_asleep_us: u64,
    pub declined_asleep_us: u64,
    /// Until the writers were back on a CPU: the module's; `None` for the
    /// tracefs detector.
    #[serde(flatten, default, skip_serializing_if = "Option::is_none")]
    pub off_cpu: Option<OffCpu>,
    pub max_asleep_us: u64,
    /// Classed sleeps with no wake-up (a fatal signal already pending): their
    /// time asleep is their time off a CPU.
    pub unwoken_sleeps: u64,
    /// Calls with a classed sleep, the time they held their writers, the longest.
    pub calls: u64,
    pub held_us: u64,
    pub max_held_us: u64,
}

/// The sleeps' time off a CPU by class, µs: until the writer ran again.
///
/// The module reads it where the writer's schedule returns. The trace would
/// need every context switch of the writers (`sched_switch`, in and out: 2 of
/// the 3 scheduler events a sleep costs, and its preemptions besides), which
/// cost 0.6 points of the FUSE throughput `bench-fuse --clock virtual` measures
/// (95.3% of a bare guest with them, 95.9% without, 3 and 2 runs, 2026-12-07):
/// it records the wake-ups only, and its sleeps end there. Records of
/// 2026-12-06 have the trace's too.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct OffCpu {
    pub flushing_off_cpu_us: u64,
    pub draining_off_cpu_us: u64,
    pub stall_off_cpu_us: u64,
    pub unrequested_off_cpu_us: u64,
    pub declined_off_cpu_us: u64,
}

/// One sleep's times, µs; off a CPU where it was seen (the module).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Times {
    pub asleep_us: u64,
    pub off_cpu_us: Option<u64>,
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

    /// `None` where the detector does not see it (the trace).
    pub fn off_cpu_us(&self) -> Option<u64> {
        let o = self.off_cpu?;
        Some(o.flushing_off_cpu_us + o.draining_off_cpu_us + o.stall_off_cpu_us)
    }
}

/// Adds one classed sleep's times to `m`; `woken`: its wake-up was seen. A
/// sleep's time off a CPU counts only into a record that has it (`Some`).
pub fn count_times(m: &mut Measured, class: SleepClass, t: Times, woken: bool) {
    let a = match class {
        SleepClass::Flushing => &mut m.flushing_asleep_us,
        SleepClass::Draining => &mut m.draining_asleep_us,
        SleepClass::Stall(cause) => {
            m.stall_asleep_us += t.asleep_us;
            match cause {
                Cause::Unrequested => &mut m.unrequested_asleep_us,
                Cause::Declined => &mut m.declined_asleep_us,
            }
        }
    };
    *a += t.asleep_us;
    if let (Some(o), Some(us)) = (m.off_cpu.as_mut(), t.off_cpu_us) {
        let c = match class {
            SleepClass::Flushing => &mut o.flushing_off_cpu_us,
            SleepClass::Draining => &mut o.draining_off_cpu_us,
            SleepClass::Stall(cause) => {
                o.stall_off_cpu_us += us;
                match cause {
                    Cause::Unrequested => &mut o.unrequested_off_cpu_us,
                    Cause::Declined => &mut o.declined_off_cpu_us,
                }
            }
        };
        *c += us;
    }
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
