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
//! their counts must agree; a boot where they do not is not evidence. A hist
//! trigger can drop an event (two CPUs inserting the same new key at once: seen
//! once in 16 boots here); its `Dropped:` count then widens what agreement allows.

use std::collections::BTreeMap;

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

/// One histogram of a `hist` file.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Hist {
    /// The `# trigger info:` line, as the kernel normalised it.
    pub trigger: String,
    /// key name -> key value, and the entry's hitcount.
    pub entries: Vec<(BTreeMap<String, String>, u64)>,
    pub dropped: u64,
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
        bail!("{origin}: no histogram (were the witness's hist triggers attached?)");
    }
    Ok(out)
}

/// `{ bdi: 0:21     , cgroup_ino:          1 } hitcount:       2603`
fn entry(line: &str) -> Result<(BTreeMap<String, String>, u64)> {
    let close = line.find('}').context("no closing brace")?;
    let mut keys = BTreeMap::new();
    for part in line[1..close].split(", ") {
        let (k, v) = part.split_once(": ").context("a key without `: `")?;
        keys.insert(k.trim().to_string(), v.trim().to_string());
    }
    let vals: Vec<&str> = line[close + 1..].split_whitespace().collect();
    let hits = vals
        .windows(2)
        .find(|w| w[0] == "hitcount:")
        .context("no hitcount")?[1]
        .parse()
        .context("hitcount is not a number")?;
    Ok((keys, hits))
}

/// The witness's counts for one writeback domain (a BDI and a cgroup).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Witness {
    pub throttle_events: u64,
    pub throttle_sleeps: u64,
    pub bg_starts: u64,
    /// Events the three histograms dropped (whatever their key).
    pub dropped: u64,
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
    for (keys, n) in &h.entries {
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

impl Witness {
    /// The witness of the writer's domain from the two `hist` files.
    pub fn from_hists(bdp: &str, wake: &str, bdi: &str, cgroup_ino: u64) -> Result<Witness> {
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
        Ok(Witness {
            throttle_events: hits(events, "bdi", bdi, cgroup_ino)?,
            throttle_sleeps: hits(sleeps, "bdi", bdi, cgroup_ino)?,
            bg_starts: hits(starts, "name", bdi, cgroup_ino)?,
            dropped: events.dropped + sleeps.dropped + starts.dropped,
        })
    }

    /// (name, witness count, module count) for each counter both keep.
    pub fn pairs(&self, m: &crate::results::record::Mechanism) -> [(&'static str, u64, u64); 3] {
        [
            ("throttle_events", self.throttle_events, m.throttle_events),
            ("throttle_sleeps", self.throttle_sleeps, m.throttle_sleeps),
            ("bg_starts", self.bg_starts, m.bg_starts),
        ]
    }
}

/// How far the witness and the module may differ (`[witness]` of
/// `qemu/expected.toml`): the larger of `abs` events and `rel` of the larger
/// count, plus, above the witness's count, the events its histograms dropped.
#[derive(Debug, Clone, Copy, PartialEq, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Tolerance {
    pub abs: u64,
    pub rel: f64,
}

impl Tolerance {
    /// Disagreements beyond the tolerance, each naming both numbers.
    pub fn disagreements(&self, w: &Witness, m: &crate::results::record::Mechanism) -> Vec<String> {
        w.pairs(m)
            .iter()
            .filter(|(_, a, b)| {
                let slack = (self.abs as f64).max(self.rel * (*a.max(b)) as f64);
                let (a, b) = (*a as f64, *b as f64);
                b < a - slack || b > a + w.dropped as f64 + slack
            })
            .map(|(name, a, b)| {
                format!(
                    "the witness and the module disagree on {name}: tracefs counted {a}{}, \
                     the module {b} (tolerance: {} events or {:.1}%)",
                    if w.dropped > 0 {
                        format!(" (+{} dropped)", w.dropped)
                    } else {
                        String::new()
                    },
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
    use crate::results::record::Mechanism;

    pub const BDP: &str = include_str!("../../fixtures/witness/balance_dirty_pages.hist");
    pub const WAKE: &str = include_str!("../../fixtures/witness/writeback_wake_background.hist");

    #[test]
    fn the_recorded_hist_files_parse() {
        // Recorded in a v2 memcg-ext4 boot: the writers' cgroup is inode 14.
        let h = parse_hist(BDP, "bdp").unwrap();
        assert_eq!(h.len(), 2);
        let w = Witness::from_hists(BDP, WAKE, "254:0", 14).unwrap();
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
            Witness::from_hists(BDP, WAKE, "254:0", 1).unwrap(),
            Witness::default()
        );
        assert_eq!(
            Witness::from_hists(BDP, WAKE, "0:21", 14).unwrap(),
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
        // Dropped events are counted, not hidden.
        let dropped = WAKE.replace("Dropped: 0", "Dropped: 7");
        assert_eq!(
            Witness::from_hists(BDP, &dropped, "254:0", 14)
                .unwrap()
                .dropped,
            7
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
        let mut w = Witness {
            throttle_events: 1146,
            throttle_sleeps: 1012,
            bg_starts: 9216,
            dropped: 0,
        };
        let mut m = Mechanism {
            throttle_events: 1146,
            throttle_sleeps: 1011,
            bg_starts: 9200,
            ..Mechanism::default()
        };
        assert!(t.disagreements(&w, &m).is_empty());
        m.bg_starts = 0; // a module that stopped counting starts
        let d = t.disagreements(&w, &m);
        assert_eq!(d.len(), 1);
        assert!(
            d[0].contains("bg_starts: tracefs counted 9216, the module 0"),
            "{d:?}"
        );
        // A dropped event may be the module's extra one, never a missing one.
        let t = Tolerance { abs: 2, rel: 0.0 };
        m.bg_starts = 9216 + 2 + 7;
        assert_eq!(t.disagreements(&w, &m).len(), 1);
        w.dropped = 7;
        assert!(t.disagreements(&w, &m).is_empty());
        m.bg_starts = 9216 + 2 + 7 + 1;
        assert!(t.disagreements(&w, &m)[0].contains("tracefs counted 9216 (+7 dropped)"));
        m.bg_starts = 9216 - 3;
        assert!(t.disagreements(&w, &m)[0].contains("the module 9213"));
    }
}
