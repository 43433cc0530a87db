//! Each throttle sleep of a run's writers, as the tracefs detector classed
//! it, kept beside the run's samples (`<boot>.sleeps.txt`) for the report's
//! per-sleep and per-call plots; and the `balance_dirty_pages()` calls the
//! sleeps make up.
//!
//! ```text
//! # wbstall sleeps 2: start_s pid pause_ms paused_ms class asleep_us off_cpu_us
//! 14.932274 235 12 4492 stall:unrequested 11873 -
//! ```
//!
//! `start_s` is the trace's clock (seconds since boot, the samples' clock);
//! `class` is `flushing`, `draining` or `stall:<cause>`; `asleep_us` and
//! `off_cpu_us` the sleep's measured times (`results::measured`), `-` where
//! not measured (the trace sees no switch back to a CPU since 2026-12-07).
//! Format 1 (before the measured times) had no last two columns and still
//! reads.

use std::fmt::Write as _;

use anyhow::{bail, Context, Result};

use crate::results::{
    measured::Times,
    tracefs::{Cause, Sleep, SleepClass},
};

/// The file's first line: its format and columns.
const HEADER: &str =
    "# wbstall sleeps 2: start_s pid pause_ms paused_ms class asleep_us off_cpu_us";

/// Format 1's first line: no measured times.
const HEADER_1: &str = "# wbstall sleeps 1: start_s pid pause_ms paused_ms class";

/// A sleep's class in the file (and in the report's legends).
pub fn class_name(c: SleepClass) -> &'static str {
    match c {
        SleepClass::Flushing => "flushing",
        SleepClass::Draining => "draining",
        SleepClass::Stall(Cause::Unrequested) => "stall:unrequested",
        SleepClass::Stall(Cause::Declined) => "stall:declined",
    }
}

fn class_of(word: &str) -> Option<SleepClass> {
    [
        SleepClass::Flushing,
        SleepClass::Draining,
        SleepClass::Stall(Cause::Unrequested),
        SleepClass::Stall(Cause::Declined),
    ]
    .into_iter()
    .find(|c| class_name(*c) == word)
}

/// The file's text.
pub fn text(sleeps: &[Sleep]) -> String {
    let mut out = format!("{HEADER}\n");
    for s in sleeps {
        let _ = write!(
            out,
            "{}.{:06} {} {} {} {}",
            s.start_us / 1_000_000,
            s.start_us % 1_000_000,
            s.pid,
            s.pause_ms,
            s.paused_ms,
            class_name(s.class)
        );
        // A sleep without times (from a format 1 file) is written as one.
        match s.times {
            Some(t) => match t.off_cpu_us {
                Some(off) => writeln!(out, " {} {off}", t.asleep_us),
                None => writeln!(out, " {} -", t.asleep_us),
            },
            None => writeln!(out),
        }
        .ok();
    }
    out
}

/// Reads a file [`text`] wrote; `origin` names it in errors.
pub fn parse(text: &str, origin: &str) -> Result<Vec<Sleep>> {
    let mut lines = text.lines();
    let timed = match lines.next() {
        Some(HEADER) => true,
        Some(HEADER_1) => false,
        _ => bail!("{origin}: not a wbstall sleeps file (its first line is not `{HEADER}`)"),
    };
    lines
        .enumerate()
        .map(|(i, line)| {
            sleep(line, timed).with_context(|| format!("{origin}:{}: `{line}`", i + 2))
        })
        .collect()
}

fn sleep(line: &str, timed: bool) -> Result<Sleep> {
    let w: Vec<&str> = line.split_whitespace().collect();
    let (words, times) = match (timed, &w[..]) {
        (true, [head @ .., asleep, off_cpu]) if head.len() == 5 => (
            head,
            Some(Times {
                asleep_us: asleep.parse().context("asleep_us")?,
                off_cpu_us: match *off_cpu {
                    "-" => None,
                    us => Some(us.parse().context("off_cpu_us")?),
                },
            }),
        ),
        (false, words) if words.len() == 5 => (words, None),
        _ => bail!("not {} words", if timed { 7 } else { 5 }),
    };
    let [start, pid, pause, paused, class] = words[..] else {
        bail!("not five words");
    };
    let (s, frac) = start.split_once('.').context("start_s without `.`")?;
    if frac.len() != 6 {
        bail!("start_s `{start}` is not in microseconds");
    }
    Ok(Sleep {
        start_us: s.parse::<u64>().context("start_s")? * 1_000_000
            + frac.parse::<u64>().context("start_s")?,
        pid: pid.parse().context("pid")?,
        pause_ms: pause.parse().context("pause_ms")?,
        paused_ms: paused.parse().context("paused_ms")?,
        class: class_of(class).with_context(|| format!("unknown class `{class}`"))?,
        times,
    })
}

/// One `balance_dirty_pages()` call that slept: its writer, its sleeps, when
/// it ended and the time it paused in all (the last sleep's `paused + pause`).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Call {
    pub pid: u32,
    pub sleeps: u32,
    pub end_us: u64,
    pub paused_ms: u64,
    /// Whether a sleep of it was classed a stall.
    pub stalled: bool,
}

/// The calls the sleeps (in time order) make up. Within a call `paused` is
/// the time since the call began, so a writer's next sleep belongs to the
/// same call when its `paused` has grown by at least the last `pause` (the
/// jiffies a sleep takes count in it), and begins a new call when it has not
/// (a new call's first sleep has `paused` 0, or a jiffy of computing).
pub fn calls(sleeps: &[Sleep]) -> Vec<Call> {
    let mut done: Vec<Call> = Vec::new();
    let mut open: Vec<(Call, u64)> = Vec::new(); // (call, its last paused + pause)
    for s in sleeps {
        let same = open
            .iter()
            .position(|(c, reach)| c.pid == s.pid && s.paused_ms >= *reach);
        let at = open.iter().position(|(c, _)| c.pid == s.pid);
        if let (Some(i), None) = (at, same) {
            done.push(open.swap_remove(i).0);
        }
        let reach = s.paused_ms + s.pause_ms;
        let end_us = s.start_us + s.pause_ms * 1000;
        let stalled = matches!(s.class, SleepClass::Stall(_));
        match same {
            Some(i) => {
                let (c, r) = &mut open[i];
                c.sleeps += 1;
                c.end_us = end_us;
                c.paused_ms = reach;
                c.stalled |= stalled;
                *r = reach;
            }
            None => open.push((
                Call {
                    pid: s.pid,
                    sleeps: 1,
                    end_us,
                    paused_ms: reach,
                    stalled,
                },
                reach,
            )),
        }
    }
    done.extend(open.into_iter().map(|(c, _)| c));
    done.sort_by_key(|c| (c.end_us, c.pid));
    done
}

#[cfg(test)]
mod tests {
    use super::*;

    fn s(start_us: u64, pid: u32, pause_ms: u64, paused_ms: u64, class: SleepClass) -> Sleep {
        Sleep {
            start_us,
            pid,
            pause_ms,
            paused_ms,
            class,
            times: Some(Times {
                asleep_us: pause_ms * 900,
                // The trace's (since 2026-12-07) have none; a record of
                // 2026-12-06 had them.
                off_cpu_us: (pid == 236).then_some(pause_ms * 1000 + 7),
            }),
        }
    }

    #[test]
    fn the_file_reads_back_what_was_written() {
        let sleeps = [
            s(
                14_932_274,
                235,
                12,
                4492,
                SleepClass::Stall(Cause::Unrequested),
            ),
            s(15_000_001, 236, 200, 0, SleepClass::Flushing),
            s(16_000_000, 235, 4, 8, SleepClass::Draining),
            s(17_000_000, 235, 4, 0, SleepClass::Stall(Cause::Declined)),
        ];
        let t = text(&sleeps);
        assert!(
            t.contains("\n14.932274 235 12 4492 stall:unrequested 10800 -\n")
                && t.contains("\n15.000001 236 200 0 flushing 180000 200007\n"),
            "{t}"
        );
        assert_eq!(parse(&t, "x").unwrap(), sleeps);
        // A format 1 file (no measured times) reads, its sleeps untimed.
        let old = format!("{HEADER_1}\n14.932274 235 12 4492 stall:unrequested\n");
        let read = parse(&old, "x").unwrap();
        assert_eq!(read[0].times, None);
        assert_eq!((read[0].pid, read[0].pause_ms), (235, 12));
        // Format 2 lines without their times are refused.
        let e = parse(&format!("{HEADER}\n14.932274 235 12 4492 flushing\n"), "x");
        assert!(format!("{:#}", e.unwrap_err()).contains("not 7 words"));
    }

    #[test]
    fn a_bad_file_is_refused_with_its_line() {
        let e = parse("14.9 235 12 4492 flushing\n", "a.sleeps.txt").unwrap_err();
        assert!(e.to_string().contains("not a wbstall sleeps file"), "{e}");
        let e = parse(
            &format!("{HEADER}\n1.000000 2 3 4 napping 5 6\n"),
            "a.sleeps.txt",
        );
        let e = format!("{:#}", e.unwrap_err());
        assert!(
            e.contains("a.sleeps.txt:2") && e.contains("unknown class `napping`"),
            "{e}"
        );
        let e = parse(&format!("{HEADER}\n1.5 2 3 4 flushing 5 6\n"), "f").unwrap_err();
        assert!(format!("{e:#}").contains("not in microseconds"), "{e:#}");
    }

    /// A writer's sleeps whose `paused` grows by each `pause` are one call;
    /// one whose `paused` falls back begins another, also when it is not 0;
    /// two writers' calls interleave without mixing.
    #[test]
    fn calls_follow_each_writer_s_paused_time() {
        let (f, st) = (SleepClass::Flushing, SleepClass::Stall(Cause::Unrequested));
        let sleeps = [
            s(1_000_000, 7, 200, 0, st),
            s(1_100_000, 8, 20, 0, f),
            s(1_200_000, 7, 200, 200, st),
            s(1_400_000, 7, 200, 404, f),
            s(1_700_000, 7, 12, 4, f),
            s(1_800_000, 8, 20, 0, f),
        ];
        let c = calls(&sleeps);
        let call = |pid, sleeps, end_us, paused_ms, stalled| Call {
            pid,
            sleeps,
            end_us,
            paused_ms,
            stalled,
        };
        assert_eq!(
            c,
            [
                call(8, 1, 1_120_000, 20, false),
                call(7, 3, 1_600_000, 604, true),
                call(7, 1, 1_712_000, 16, false),
                call(8, 1, 1_820_000, 20, false),
            ]
        );
    }
}
