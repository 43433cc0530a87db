//! The independent witness: the kernel's own count of the writeback tracepoint
//! events the wbstall module counts, from tracefs hist triggers that the guest
//! attaches right after it resets the module's counters and reads right after
//! it reads them (`measure_start` and `collect` in `qemu/lib.sh`):
//!
//! ```text
//! balance_dirty_pages        hist:keys=bdi,cgroup_ino:vals=hitcount            -> throttle_events
//! balance_dirty_pages        hist:keys=bdi,cgroup_ino:vals=hitcount if pause > 0 -> throttle_sleeps
//! writeback_wake_background  hist:keys=name,cgroup_ino:vals=hitcount           -> bg_starts
//! ```
//!
//! The module's probes and the hist triggers see the same tracepoint calls, so
//! their counts must agree; a boot where they do not is not evidence. The
//! tracefs detector's trace sees the same calls, so it is held to the witness
//! alike, in every boot, whichever detector classed the sleeps. A hist
//! trigger can drop an event (two CPUs inserting the same new key at once: seen
//! once in 16 boots here); its `Dropped:` count then widens what agreement allows
//! for the counter read from that histogram alone.

use std::collections::BTreeMap;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use crate::results::{mechanism::Mechanism, tracefs::Detected};

/// One histogram of a `hist` file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hist {
    /// The `# trigger info:` line, as the kernel normalised it.
    pub trigger: String,
    pub entries: Vec<Entry>,
    pub dropped: u64,
}

/// One entry of a histogram: its keys, its hitcount and its other values.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Entry {
    /// key name -> key value.
    pub keys: BTreeMap<String, String>,
    pub hitcount: u64,
    /// value name -> its sum (a variable's name without its `$`).
    pub vals: BTreeMap<String, u64>,
}

impl Hist {
    /// The sum of a value over every entry (`hitcount` included); an error
    /// if the histogram has entries without it.
    pub fn total(&self, val: &str) -> Result<u64> {
        let mut sum = 0;
        for e in &self.entries {
            sum += match val {
                "hitcount" => e.hitcount,
                _ => *e.vals.get(val).with_context(|| {
                    format!("histogram `{}` has no value `{val}`", self.trigger)
                })?,
            };
        }
        Ok(sum)
    }
}

/// Parses a tracefs `hist` file: one or more histograms, each opened by
/// `# event histogram` and closed by its `Totals:` block.
pub fn parse_hist(text: &str, origin: &str) -> Result<Vec<Hist>> {
    let mut out: Vec<Hist> = Vec::new();
    let mut current: Option<Hist> = None;
    let mut totals = false;
    for (i, line) in text.lines().enumerate() {
        let line = line.trim();
        let at = || format!("{origin}:{}", i + 1);
        if let Some(info) = line.strip_prefix("# trigger info:") {
            if let Some(h) = current.take() {
                bail!("{}: histogram `{}` has no Totals block", at(), h.trigger);
            }
            current = Some(Hist {
                trigger: info.trim().to_string(),
                entries: Vec::new(),
                dropped: u64::MAX,
            });
            totals = false;
        } else if line.starts_with('{') {
            let h = current
                .as_mut()
                .with_context(|| format!("{}: an entry before any trigger info", at()))?;
            h.entries
                .push(entry(line).with_context(|| format!("{}: `{line}`", at()))?);
        } else if line == "Totals:" {
            totals = true;
        } else if let Some(n) = line.strip_prefix("Dropped:") {
            let mut h = current
                .take()
                .filter(|_| totals)
                .with_context(|| format!("{}: `Dropped:` outside a Totals block", at()))?;
            h.dropped = n
                .trim()
                .parse()
                .with_context(|| format!("{}: `{line}`", at()))?;
            out.push(h);
        }
    }
    if let Some(h) = current {
        bail!(
            "{origin}: histogram `{}` is cut short (no Totals block)",
            h.trigger
        );
    }
    if out.is_empty() {
        bail!("{origin}: no histogram (were its hist triggers attached?)");
    }
    Ok(out)
}

/// `{ bdi: 0:21     , cgroup_ino:          1 } hitcount:       2603`, or
/// with values: `{ common_pid:        117 } hitcount:   12  fc_hold:   3456`.
fn entry(line: &str) -> Result<Entry> {
    let close = line.find('}').context("no closing brace")?;
    let mut keys = BTreeMap::new();
    for part in line[1..close].split(", ") {
        let (k, v) = part.split_once(": ").context("a key without `: `")?;
        keys.insert(k.trim().to_string(), v.trim().to_string());
    }
    let words: Vec<&str> = line[close + 1..].split_whitespace().collect();
    let mut hitcount = None;
    let mut vals = BTreeMap::new();
    for pair in words.chunks(2) {
        let [name, n] = pair else {
            bail!("a value without a number after `{}`", pair[0]);
        };
        let name = name.strip_suffix(':').context("a value name without `:`")?;
        let n: u64 = n
            .parse()
            .with_context(|| format!("`{name}` is not a number"))?;
        if name == "hitcount" {
            hitcount = Some(n);
        } else {
            vals.insert(name.to_string(), n);
        }
    }
    Ok(Entry {
        keys,
        hitcount: hitcount.context("no hitcount")?,
        vals,
    })
}

/// The witness's counts for one writeback domain (a BDI and a cgroup).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Witness {
    pub throttle_events: u64,
    pub throttle_sleeps: u64,
    pub bg_starts: u64,
    /// Events the three histograms dropped (whatever their key); which
    /// histogram dropped them is in [`Drops`].
    pub dropped: u64,
}

/// Events each histogram dropped (its `Dropped:` line, whatever the key): a
/// drop widens only the comparison that reads that histogram.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Drops {
    /// The unfiltered `balance_dirty_pages` histogram.
    pub throttle_events: u64,
    /// The `balance_dirty_pages` histogram `if pause > 0`.
    pub throttle_sleeps: u64,
    /// The `writeback_wake_background` histogram.
    pub bg_starts: u64,
}

impl Drops {
    /// The drops of a record: `per_hist` where the record kept them, else
    /// (records from before they were kept apart) the total against every
    /// histogram, all such a record can say.
    pub fn of(w: &Witness, per_hist: Option<Drops>) -> Drops {
        per_hist.unwrap_or(Drops {
            throttle_events: w.dropped,
            throttle_sleeps: w.dropped,
            bg_starts: w.dropped,
        })
    }
}

/// The one histogram of `hists` whose trigger is unfiltered (`filtered`
/// false) or carries `if pause > 0`.
fn pick<'a>(hists: &'a [Hist], filtered: bool, origin: &str) -> Result<&'a Hist> {
    let found: Vec<&Hist> = hists
        .iter()
        .filter(|h| h.trigger.contains(" if ") == filtered)
        .collect();
    let [h] = found[..] else {
        bail!(
            "{origin}: expected one {} histogram, found {}",
            if filtered { "filtered" } else { "unfiltered" },
            found.len()
        );
    };
    if filtered && !h.trigger.contains("pause > 0") {
        bail!("{origin}: unexpected filter in `{}`", h.trigger);
    }
    Ok(h)
}

/// Hits of the entry for (`bdi`, `cgroup_ino`); no entry means no event.
fn hits(h: &Hist, name_key: &str, bdi: &str, cgroup_ino: u64) -> Result<u64> {
    let ino = cgroup_ino.to_string();
    let mut total = 0;
    for Entry {
        keys, hitcount: n, ..
    } in &h.entries
    {
        let (Some(b), Some(c)) = (keys.get(name_key), keys.get("cgroup_ino")) else {
            bail!(
                "histogram `{}` is not keyed by {name_key},cgroup_ino",
                h.trigger
            );
        };
        if b == bdi && *c == ino {
            total += n;
        }
    }
    Ok(total)
}

/// One counter the witness and a detector both keep.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Pair {
    pub name: &'static str,
    pub witness: u64,
    /// Events the histogram this counter is read from dropped.
    pub dropped: u64,
    pub detector: u64,
}

/// Who the witness is compared with, as a disagreement names both sides.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Sides {
    /// `the module`, `the tracefs detector`.
    pub detector: &'static str,
    /// What counted the witness's number.
    pub witness: &'static str,
    /// What counted the detector's number.
    pub counted: &'static str,
}

/// The wbstall module against the witness.
pub const MODULE: Sides = Sides {
    detector: "the module",
    witness: "tracefs",
    counted: "the module",
};

/// The tracefs detector (the trace ring buffer) against the witness.
pub const TRACE: Sides = Sides {
    detector: "the tracefs detector",
    witness: "the hist triggers",
    counted: "the trace",
};

impl Witness {
    /// The witness of the writer's domain from the two `hist` files, and what
    /// each histogram dropped.
    pub fn from_hists(
        bdp: &str,
        wake: &str,
        bdi: &str,
        cgroup_ino: u64,
    ) -> Result<(Witness, Drops)> {
        let (o1, o2) = (
            "tracefs balance_dirty_pages/hist",
            "tracefs writeback_wake_background/hist",
        );
        let bdp = parse_hist(bdp, o1)?;
        let wake = parse_hist(wake, o2)?;
        let (events, sleeps, starts) = (
            pick(&bdp, false, o1)?,
            pick(&bdp, true, o1)?,
            pick(&wake, false, o2)?,
        );
        let drops = Drops {
            throttle_events: events.dropped,
            throttle_sleeps: sleeps.dropped,
            bg_starts: starts.dropped,
        };
        let w = Witness {
            throttle_events: hits(events, "bdi", bdi, cgroup_ino)?,
            throttle_sleeps: hits(sleeps, "bdi", bdi, cgroup_ino)?,
            bg_starts: hits(starts, "name", bdi, cgroup_ino)?,
            dropped: drops.throttle_events + drops.throttle_sleeps + drops.bg_starts,
        };
        Ok((w, drops))
    }

    /// The witness from counting instances (`witness-counts`, a kernel
    /// without hist triggers): per count, the ring buffer's entries plus what
    /// overwriting lost. A commit overrun lost events the buffer cannot
    /// count: such a witness is refused.
    pub fn from_counts(text: &str) -> Result<(Witness, Drops)> {
        let mut got = BTreeMap::new();
        for line in text.lines().filter(|l| !l.trim().is_empty()) {
            let mut words = line.split_whitespace();
            let name = words.next().unwrap_or_default();
            let fields: BTreeMap<&str, u64> = words
                .map(|w| {
                    let (k, v) = w
                        .split_once('=')
                        .with_context(|| format!("witness-counts: `{w}` is not key=value"))?;
                    let v = v
                        .parse()
                        .with_context(|| format!("witness-counts: `{w}` is not a count"))?;
                    Ok((k, v))
                })
                .collect::<Result<_>>()?;
            let field = |k: &str| {
                fields
                    .get(k)
                    .copied()
                    .with_context(|| format!("witness-counts: `{name}` has no {k}"))
            };
            if field("commit_overrun")? > 0 {
                bail!(
                    "witness-counts: the counting instance of `{name}` lost {} events to commit \
                     overruns, which it cannot count",
                    field("commit_overrun")?
                );
            }
            got.insert(name.to_string(), field("entries")? + field("overrun")?);
        }
        let count = |k: &str| {
            got.get(k)
                .copied()
                .with_context(|| format!("witness-counts has no `{k}` line"))
        };
        let w = Witness {
            throttle_events: count("throttle_events")?,
            throttle_sleeps: count("throttle_sleeps")?,
            bg_starts: count("bg_starts")?,
            dropped: 0,
        };
        Ok((w, Drops::default()))
    }

    /// The module's counters beside the witness's.
    pub fn module_pairs(&self, d: &Drops, m: &Mechanism) -> [Pair; 3] {
        [
            pair(
                "throttle_events",
                self.throttle_events,
                d.throttle_events,
                m.throttle_events,
            ),
            pair(
                "throttle_sleeps",
                self.throttle_sleeps,
                d.throttle_sleeps,
                m.throttle_sleeps,
            ),
            pair("bg_starts", self.bg_starts, d.bg_starts, m.bg_starts),
        ]
    }

    /// The tracefs detector's own counts beside the witness's. The trace
    /// keeps only sleeps (`pause > 0`, `trace_start` in `qemu/lib.sh`), so it
    /// has no count of every call to set against `throttle_events` (the
    /// mechanism built from the trace takes that one from the witness).
    pub fn trace_pairs(&self, d: &Drops, t: &Detected) -> [Pair; 2] {
        [
            pair(
                "throttle_sleeps",
                self.throttle_sleeps,
                d.throttle_sleeps,
                t.throttle_sleeps,
            ),
            pair("bg_starts", self.bg_starts, d.bg_starts, t.bg_starts),
        ]
    }
}

fn pair(name: &'static str, witness: u64, dropped: u64, detector: u64) -> Pair {
    Pair {
        name,
        witness,
        dropped,
        detector,
    }
}

/// How far the witness and a detector may differ (`[witness]` of
/// `qemu/expected.toml`): the larger of `abs` events and `rel` of the larger
/// count, plus, above the witness's count, the events its histogram dropped.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Tolerance {
    pub abs: u64,
    pub rel: f64,
}

impl Tolerance {
    /// Disagreements beyond the tolerance, each naming both sides and both
    /// numbers.
    pub fn disagreements(&self, sides: &Sides, pairs: &[Pair]) -> Vec<String> {
        pairs
            .iter()
            .filter(|p| {
                let (a, b) = (p.witness, p.detector);
                let slack = (self.abs as f64).max(self.rel * a.max(b) as f64);
                let (a, b) = (a as f64, b as f64);
                b < a - slack || b > a + p.dropped as f64 + slack
            })
            .map(|p| {
                format!(
                    "the witness and {} disagree on {}: {} counted {}{}, {} {} \
                     (tolerance: {} events or {:.1}%)",
                    sides.detector,
                    p.name,
                    sides.witness,
                    p.witness,
                    if p.dropped > 0 {
                        format!(" (+{} dropped)", p.dropped)
                    } else {
                        String::new()
                    },
                    sides.counted,
                    p.detector,
                    self.abs,
                    self.rel * 100.0
                )
            })
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Counting instances: entries plus overrun per count; a commit overrun,
    /// a missing line or a missing field is refused.
    #[test]
    fn counts_from_counting_instances_add_the_overrun_and_refuse_losses() {
        let ok = "throttle_events entries=900 overrun=100 commit_overrun=0\n\
                  throttle_sleeps entries=42 overrun=0 commit_overrun=0\n\
                  bg_starts entries=7 overrun=0 commit_overrun=0\n";
        let (w, d) = Witness::from_counts(ok).unwrap();
        assert_eq!(
            (w.throttle_events, w.throttle_sleeps, w.bg_starts),
            (1000, 42, 7)
        );
        assert_eq!(d, Drops::default());
        let lost = ok.replace(
            "bg_starts entries=7 overrun=0 commit_overrun=0",
            "bg_starts entries=7 overrun=0 commit_overrun=3",
        );
        assert!(format!("{:#}", Witness::from_counts(&lost).unwrap_err()).contains("lost 3 events"));
        let short = ok.replace("bg_starts entries=7 overrun=0 commit_overrun=0\n", "");
        assert!(format!("{:#}", Witness::from_counts(&short).unwrap_err())
            .contains("no `bg_starts` line"));
        let no_field = ok.replace("overrun=100 ", "");
        assert!(
            format!("{:#}", Witness::from_counts(&no_field).unwrap_err())
                .contains("has no overrun")
        );
    }
    use crate::results::mechanism::Mechanism;

    pub const BDP: &str = include_str!("../../fixtures/witness/balance_dirty_pages.hist");
    pub const WAKE: &str = include_str!("../../fixtures/witness/writeback_wake_background.hist");

    #[test]
    fn the_recorded_hist_files_parse() {
        // Recorded in a v2 memcg-ext4 boot: the writers' cgroup is inode 14.
        let h = parse_hist(BDP, "bdp").unwrap();
        assert_eq!(h.len(), 2);
        let (w, drops) = Witness::from_hists(BDP, WAKE, "254:0", 14).unwrap();
        assert_eq!(drops, Drops::default());
        assert_eq!(
            w,
            Witness {
                throttle_events: 1618,
                throttle_sleeps: 1618,
                bg_starts: 1360,
                dropped: 0,
            }
        );
        // Another domain of the same BDI (the root cgroup) saw no event.
        assert_eq!(
            Witness::from_hists(BDP, WAKE, "254:0", 1).unwrap().0,
            Witness::default()
        );
        assert_eq!(
            Witness::from_hists(BDP, WAKE, "0:21", 14).unwrap().0,
            Witness::default()
        );
    }

    #[test]
    fn broken_hist_files_are_errors() {
        // Cut short: the last histogram has no Totals block.
        let cut = &BDP[..BDP.rfind("Totals:").unwrap()];
        let e = parse_hist(cut, "x").unwrap_err().to_string();
        assert!(e.contains("cut short"), "{e}");
        // Empty: the triggers were never attached.
        let e = parse_hist("", "x").unwrap_err().to_string();
        assert!(e.contains("no histogram"), "{e}");
        // Dropped events are counted, not hidden, against their histogram.
        let dropped = WAKE.replace("Dropped: 0", "Dropped: 7");
        let (w, drops) = Witness::from_hists(BDP, &dropped, "254:0", 14).unwrap();
        assert_eq!(w.dropped, 7);
        assert_eq!(
            drops,
            Drops {
                bg_starts: 7,
                ..Drops::default()
            }
        );
        // The filtered histogram is missing.
        let one = &BDP[..BDP.find("# event histogram\n#\n# trigger info: hist:keys=bdi,cgroup_ino:vals=hitcount:sort=hitcount:size=2048 if").unwrap()];
        let e = Witness::from_hists(one, WAKE, "254:0", 14)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("expected one filtered histogram, found 0"),
            "{e}"
        );
    }

    #[test]
    fn a_disagreement_beyond_the_tolerance_names_both_numbers() {
        let t = Tolerance { abs: 2, rel: 0.005 };
        let w = Witness {
            throttle_events: 1146,
            throttle_sleeps: 1012,
            bg_starts: 9216,
            dropped: 0,
        };
        let mut d = Drops::default();
        let mut m = Mechanism {
            throttle_events: 1146,
            throttle_sleeps: 1011,
            bg_starts: 9200,
            ..Mechanism::default()
        };
        let module = |t: &Tolerance, d: &Drops, m: &Mechanism| {
            t.disagreements(&MODULE, &w.module_pairs(d, m))
        };
        assert!(module(&t, &d, &m).is_empty());
        m.bg_starts = 0; // a module that stopped counting starts
        let e = module(&t, &d, &m);
        assert_eq!(e.len(), 1);
        assert!(
            e[0].contains("bg_starts: tracefs counted 9216, the module 0"),
            "{e:?}"
        );
        // A dropped event may be the module's extra one, never a missing one.
        let t = Tolerance { abs: 2, rel: 0.0 };
        m.bg_starts = 9216 + 2 + 7;
        assert_eq!(module(&t, &d, &m).len(), 1);
        d.bg_starts = 7;
        assert!(module(&t, &d, &m).is_empty());
        m.bg_starts = 9216 + 2 + 7 + 1;
        assert!(module(&t, &d, &m)[0].contains("tracefs counted 9216 (+7 dropped)"));
        m.bg_starts = 9216 - 3;
        assert!(module(&t, &d, &m)[0].contains("the module 9213"));
    }

    #[test]
    fn a_histogram_s_drops_widen_only_the_counter_read_from_it() {
        // The wake histogram dropped 7 starts; the module counted 7 sleeps
        // more than the sleep histogram: a disagreement all the same.
        let t = Tolerance { abs: 2, rel: 0.0 };
        let wake = WAKE.replace("Dropped: 0", "Dropped: 7");
        let (w, d) = Witness::from_hists(BDP, &wake, "254:0", 14).unwrap();
        let m = Mechanism {
            throttle_events: 1618 + 7,
            throttle_sleeps: 1618 + 7,
            bg_starts: 1360 + 7,
            ..Mechanism::default()
        };
        assert_eq!(
            t.disagreements(&MODULE, &w.module_pairs(&d, &m)),
            [
                "the witness and the module disagree on throttle_events: tracefs counted 1618, \
                 the module 1625 (tolerance: 2 events or 0.0%)",
                "the witness and the module disagree on throttle_sleeps: tracefs counted 1618, \
                 the module 1625 (tolerance: 2 events or 0.0%)",
            ]
        );
        let trace = Detected {
            throttle_sleeps: 1618 + 7,
            bg_starts: 1360 + 7,
            ..Detected::default()
        };
        assert_eq!(
            t.disagreements(&TRACE, &w.trace_pairs(&d, &trace)),
            [
                "the witness and the tracefs detector disagree on throttle_sleeps: the hist \
              triggers counted 1618, the trace 1625 (tolerance: 2 events or 0.0%)"
            ]
        );
        // A record from before drops were kept apart: the total widens all.
        let old = Drops::of(&w, None);
        assert!(t
            .disagreements(&MODULE, &w.module_pairs(&old, &m))
            .is_empty());
        assert_eq!(Drops::of(&w, Some(d)), d);
    }
}
