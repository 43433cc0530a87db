//! Parsers for what the guest reads out of the kernel: the wbstall module's
//! `stats`, `thresholds` and `summary` (space-separated `key=value` lines, the
//! format documented in `rust-module/wbstall_main.rs`), the kernel's
//! `/sys/kernel/debug/bdi/<bdi>/stats` and `/proc/vmstat`.

use std::collections::BTreeMap;

use anyhow::{bail, Context, Result};
use serde_json::{Map, Value};

/// One `key=value ...` line, values as JSON numbers where they are integers.
pub type KvLine = Map<String, Value>;

/// Parses `key=value` lines. Blank lines are skipped; anything else that is not
/// `key=value` is an error naming the line.
pub fn parse_kv_lines(text: &str, origin: &str) -> Result<Vec<KvLine>> {
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let mut rec = Map::new();
        for word in line.split_whitespace() {
            let Some((k, v)) = word.split_once('=') else {
                bail!(
                    "{origin}:{}: `{word}` is not key=value (line `{line}`)",
                    i + 1
                );
            };
            if k.is_empty() || rec.contains_key(k) {
                bail!("{origin}:{}: empty or repeated key in `{line}`", i + 1);
            }
            let value = match v.parse::<i64>() {
                Ok(n) => Value::from(n),
                Err(_) => match v.parse::<u64>() {
                    Ok(n) => Value::from(n),
                    Err(_) => Value::from(v),
                },
            };
            rec.insert(k.to_string(), value);
        }
        out.push(rec);
    }
    Ok(out)
}

/// The module's layout version this parser reads (`format=` of `summary`;
/// `FORMAT_VERSION` in `rust-module/format.rs`).
pub const FORMAT_VERSION: u64 = 6;

/// The module's formatter, `rust-module/format.rs`: the one place that says
/// which keys its files carry and in which order. The host reads its key lists
/// from it (embedded at build time), so a counter the module adds is parsed
/// (and required) without a change here.
const FORMAT_RS: &str = include_str!("../../../rust-module/format.rs");

/// The quoted items of the array literal that follows `marker` in `src`.
fn array_after(src: &str, marker: &str) -> Option<Vec<String>> {
    let body = &src[src.find(marker)?..];
    let body = &body[body.find("= [")? + 3..body.find("];")?];
    Some(
        body.split('"')
            .skip(1)
            .step_by(2)
            .map(str::to_string)
            .collect(),
    )
}

/// The `key=` names of the format string that follows `marker` in `src`.
fn format_keys(src: &str, marker: &str) -> Option<Vec<String>> {
    let body = &src[src.find(marker)?..];
    let body = &body[body.find('"')? + 1..];
    let body = &body[..body.find("\",")?];
    Some(
        body.split(|c: char| c.is_whitespace() || c == '\\')
            .filter_map(|w| w.strip_suffix("={}"))
            .map(str::to_string)
            .collect(),
    )
}

/// Key lists of the module's files, read from [`FORMAT_RS`].
pub struct Keys {
    /// The counters, in the module's order (`COUNTER_KEYS`).
    pub counters: Vec<String>,
    /// A `stats` line: its leading keys (`stats_line`), then the counters.
    pub stats: Vec<String>,
    pub thresholds: Vec<String>,
    pub summary: Vec<String>,
}

/// The module's key lists (parsed once).
pub fn keys() -> &'static Keys {
    static KEYS: std::sync::OnceLock<Keys> = std::sync::OnceLock::new();
    KEYS.get_or_init(|| {
        parse_format(FORMAT_RS)
            .expect("rust-module/format.rs has COUNTER_KEYS and the line formatters (a unit test checks it)")
    })
}

/// Parses the key lists out of the module's formatter source.
fn parse_format(src: &str) -> Option<Keys> {
    let counters = array_after(src, "pub(crate) const COUNTER_KEYS")?;
    let mut stats = format_keys(src, "fn stats_line")?;
    stats.extend(counters.iter().cloned());
    Some(Keys {
        stats,
        thresholds: format_keys(src, "fn thresholds_line")?,
        summary: format_keys(src, "fn summary_line")?,
        counters,
    })
}

/// Keys whose value is text; every other key of the module's files is a number.
const TEXT_KEYS: &[&str] = &["bdi", "domain"];

/// Every line has every key, numbers where numbers belong. Keys the module
/// appends later are allowed (the layout only ever grows at the end).
fn check_keys(records: &[KvLine], keys: &[String], origin: &str) -> Result<()> {
    for (i, r) in records.iter().enumerate() {
        for k in keys {
            match r.get(k) {
                None => bail!(
                    "{origin}: line {} lacks `{k}` (the module and xtask disagree on the format: \
                     rebuild the kernels with `cargo xtask build-kernel --all`)",
                    i + 1
                ),
                Some(v)
                    if !TEXT_KEYS.contains(&k.as_str())
                        && v.as_i64().is_none()
                        && v.as_u64().is_none() =>
                {
                    bail!("{origin}: line {}: `{k}={v}` is not a number", i + 1)
                }
                Some(_) => {}
            }
        }
    }
    Ok(())
}

/// Parses the module's `stats`.
pub fn parse_stats(text: &str) -> Result<Vec<KvLine>> {
    let r = parse_kv_lines(text, "wbstall/stats")?;
    check_keys(&r, &keys().stats, "wbstall/stats")?;
    Ok(r)
}

/// Parses the module's `thresholds`.
pub fn parse_thresholds(text: &str) -> Result<Vec<KvLine>> {
    let r = parse_kv_lines(text, "wbstall/thresholds")?;
    check_keys(&r, &keys().thresholds, "wbstall/thresholds")?;
    Ok(r)
}

/// Parses the module's `summary` (one line) and checks its `format=`.
pub fn parse_summary(text: &str) -> Result<KvLine> {
    let origin = "wbstall/summary";
    let mut lines = parse_kv_lines(text, origin)?;
    if lines.len() != 1 {
        bail!("{origin}: expected one line, got {}", lines.len());
    }
    check_keys(&lines, &keys().summary, origin)?;
    let r = lines.remove(0);
    let format = counter(&r, "format", origin)?;
    if format != FORMAT_VERSION {
        bail!(
            "{origin}: the module writes format={format}, this xtask reads format={FORMAT_VERSION}: \
             build the kernels and xtask from the same checkout (`cargo xtask build-kernel --all`)"
        );
    }
    Ok(r)
}

/// The record of a BDI (and memcg id, where given) in parsed `stats` or
/// `thresholds`. A name can stand for several BDIs: the module keeps the slot
/// of an unmounted FUSE mount, and the next mount may get the same device
/// number. `bdi_id` grows with every registration, so the highest is the BDI
/// that has the name now.
pub fn find<'a>(records: &'a [KvLine], bdi: &str, memcg_id: Option<u64>) -> Option<&'a KvLine> {
    records
        .iter()
        .filter(|r| {
            r.get("bdi").and_then(Value::as_str) == Some(bdi)
                && memcg_id.is_none_or(|id| r.get("memcg_id").and_then(Value::as_u64) == Some(id))
        })
        .max_by_key(|r| value(r, "bdi_id"))
}

/// A counter of a record; a missing or non-numeric value is an error naming
/// the key and where the record came from, never a 0.
pub fn counter(record: &KvLine, key: &str, origin: &str) -> Result<u64> {
    match record.get(key) {
        Some(v) => v
            .as_u64()
            .with_context(|| format!("{origin}: `{key}={v}` is not a count")),
        None => bail!(
            "{origin}: no `{key}` in `{}`",
            record
                .iter()
                .map(|(k, v)| format!("{k}={}", v.as_str().map_or(v.to_string(), str::to_string)))
                .collect::<Vec<_>>()
                .join(" ")
        ),
    }
}

/// A number of a record where absence is expected and shown as such (the
/// sampler's last block can be torn): `None`, never a made-up 0.
pub fn value(record: &KvLine, key: &str) -> Option<u64> {
    record.get(key).and_then(Value::as_u64)
}

/// Parses `/sys/kernel/debug/bdi/<bdi>/stats` (`BdiWriteback:   0 kB` lines)
/// into numbers; units (kB, kBps) are dropped and recorded in the key.
pub fn parse_bdi_stats(text: &str) -> Result<BTreeMap<String, i64>> {
    let mut out = BTreeMap::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let (k, v) = line
            .split_once(':')
            .with_context(|| format!("bdi stats line `{line}` is not `Key: value`"))?;
        let mut words = v.split_whitespace();
        let Some(n) = words.next().and_then(|n| n.parse::<i64>().ok()) else {
            continue; // non-numeric fields (none in 7.3) are not kept
        };
        let key = match words.next() {
            Some(unit) => format!("{}_{unit}", k.trim()),
            None => k.trim().to_string(),
        };
        out.insert(key, n);
    }
    if out.is_empty() {
        bail!("bdi stats are empty");
    }
    Ok(out)
}

/// Parses `/proc/vmstat` (`name value` lines).
pub fn parse_vmstat(text: &str) -> Result<BTreeMap<String, i64>> {
    let mut out = BTreeMap::new();
    for line in text.lines().filter(|l| !l.trim().is_empty()) {
        let mut w = line.split_whitespace();
        let (Some(k), Some(v), None) = (w.next(), w.next(), w.next()) else {
            bail!("vmstat line `{line}` is not `name value`");
        };
        out.insert(
            k.to_string(),
            v.parse()
                .with_context(|| format!("vmstat `{k}` is not a number"))?,
        );
    }
    Ok(out)
}

/// vmstat counters worth keeping in a run record.
pub const VMSTAT_KEYS: &[&str] = &[
    "nr_dirty",
    "nr_writeback",
    "nr_dirtied",
    "nr_written",
    "nr_dirty_threshold",
    "nr_dirty_background_threshold",
    "nr_file_pages",
    "nr_free_pages",
    // Pages reclaim wrote itself (pageout()): writeback nobody's throttle or
    // flusher asked for.
    "nr_vmscan_write",
];

#[cfg(test)]
mod tests {
    use super::*;

    // The module's own KUnit tests render these fixtures byte for byte.
    const STATS: &str = include_str!("../../../rust-module/fixtures/stats.txt");
    const THRESHOLDS: &str = include_str!("../../../rust-module/fixtures/thresholds.txt");

    fn c(r: &KvLine, k: &str) -> u64 {
        counter(r, k, "test").unwrap()
    }

    #[test]
    fn module_stats_fixture_parses() {
        let s = parse_stats(STATS).unwrap();
        assert_eq!(s.len(), 3);
        let fuse = find(&s, "0:45", None).unwrap();
        assert_eq!(c(fuse, "strictlimit"), 1);
        assert_eq!(c(fuse, "stall_sleeps"), 8990);
        assert_eq!(c(fuse, "stall_ms"), 1_795_800);
        let memcg = find(&s, "254:0", Some(42)).unwrap();
        assert_eq!(c(memcg, "stall_sleeps"), 377);
        assert_eq!(c(find(&s, "254:0", Some(0)).unwrap(), "bg_starts"), 12);
        assert!(find(&s, "9:9", None).is_none());
    }

    #[test]
    fn the_key_lists_come_from_the_module_formatter() {
        let k = keys();
        // The layout of format=6: four leading keys, then every counter once.
        assert_eq!(k.stats[..4], ["bdi", "memcg_id", "strictlimit", "bdi_id"]);
        assert_eq!(k.stats.len(), k.counters.len() + 4);
        assert!(k.stats.contains(&"bdi_id".to_string()));
        for c in &k.counters {
            assert_eq!(k.stats.iter().filter(|s| *s == c).count(), 1, "{c}");
        }
        // Format 2's verdict inputs and a few of format 3's.
        for needed in [
            "stall_ms",
            "bg_starts",
            "unrequested_sleeps",
            "dropped_at_block",
        ] {
            assert!(k.counters.iter().any(|c| c == needed), "{needed}");
        }
        assert_eq!(k.thresholds[..3], ["bdi", "memcg_id", "domain"]);
        assert_eq!(
            k.summary,
            [
                "slots",
                "used",
                "unslotted",
                "hz",
                "format",
                "drain_floor_pages",
                "pending",
                "entries"
            ]
        );
        assert!(
            FORMAT_RS.contains(&format!("const FORMAT_VERSION: u32 = {FORMAT_VERSION};")),
            "FORMAT_VERSION drifted from rust-module/format.rs"
        );
        // The module's own KUnit fixtures carry exactly these keys.
        for line in STATS.lines() {
            let got: Vec<&str> = line
                .split(' ')
                .map(|w| w.split('=').next().unwrap())
                .collect();
            assert_eq!(got, k.stats);
        }
        // A counter the module appends is a key the host requires, with no
        // change on the host.
        let last = format!("    \"{}\",\n", k.counters.last().unwrap());
        let grown = FORMAT_RS.replace(&last, &format!("{last}    \"new_counter\",\n"));
        let g = parse_format(&grown).unwrap();
        assert_eq!(g.stats.last().map(String::as_str), Some("new_counter"));
        assert!(parse_format("no formatter here").is_none());
    }

    #[test]
    fn a_missing_or_bad_counter_is_an_error_not_a_zero() {
        // The module stopped printing stall_ms, the verdict's input.
        let line = STATS
            .lines()
            .nth(2)
            .unwrap()
            .replace(" stall_ms=1795800", "");
        let e = parse_stats(&line).unwrap_err().to_string();
        assert!(e.contains("lacks `stall_ms`"), "{e}");
        let line = STATS
            .lines()
            .nth(2)
            .unwrap()
            .replace("bg_starts=1 ", "bg_starts=x ");
        let e = parse_stats(&line).unwrap_err().to_string();
        assert!(e.contains("`bg_starts=\"x\"` is not a number"), "{e}");
        let r = parse_kv_lines("bdi=0:45 bg_starts=3\n", "x").unwrap();
        let e = counter(&r[0], "stall_ms", "wbstall/stats")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("wbstall/stats: no `stall_ms` in `bdi=0:45 bg_starts=3`"),
            "{e}"
        );
    }

    #[test]
    fn the_summary_format_is_checked() {
        let ok = "slots=64 used=3 unslotted=0 hz=250 format=6 drain_floor_pages=8 pending=0 \
                  entries=0\n";
        assert_eq!(c(&parse_summary(ok).unwrap(), "hz"), 250);
        assert_eq!(c(&parse_summary(ok).unwrap(), "drain_floor_pages"), 8);
        let e = parse_summary(&ok.replace("format=6", "format=2"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("writes format=2, this xtask reads format=6"),
            "{e}"
        );
        let e = parse_summary(&ok.replace(" drain_floor_pages=8", ""))
            .unwrap_err()
            .to_string();
        assert!(e.contains("lacks `drain_floor_pages`"), "{e}");
        let e = parse_summary(&ok.replace(" format=6", ""))
            .unwrap_err()
            .to_string();
        assert!(e.contains("lacks `format`"), "{e}");
        assert!(parse_summary("").is_err());
    }

    #[test]
    fn module_thresholds_fixture_parses() {
        let t = parse_thresholds(THRESHOLDS).unwrap();
        let memcg = find(&t, "254:0", Some(42)).unwrap();
        assert_eq!(memcg["domain"], "memcg");
        assert_eq!(memcg["wb_bg_thresh"], 6400);
        let fuse = find(&t, "0:45", None).unwrap();
        assert_eq!(fuse["pause_ms"], 200);
        assert_eq!(find(&t, "254:0", Some(0)).unwrap()["pause_ms"], -4);
    }

    #[test]
    fn a_reused_name_means_the_newest_bdi() {
        // The verify mount's slot (bdi_id 7) stays after unmount; the next FUSE
        // mount got the same device number and bdi_id 9.
        let s = parse_stats(&format!(
            "{}\n{}\n",
            STATS
                .lines()
                .nth(2)
                .unwrap()
                .replace("bdi_id=5", "bdi_id=7"),
            STATS
                .lines()
                .nth(2)
                .unwrap()
                .replace("bdi_id=5", "bdi_id=9")
                .replace("stall_sleeps=8990", "stall_sleeps=1")
        ))
        .unwrap();
        assert_eq!(c(find(&s, "0:45", Some(0)).unwrap(), "bdi_id"), 9);
        assert_eq!(c(find(&s, "0:45", Some(0)).unwrap(), "stall_sleeps"), 1);
    }

    #[test]
    fn format_drift_is_an_error() {
        let e = parse_stats("bdi=0:45 memcg_id=0\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("lacks `strictlimit`"), "{e}");
        let e = parse_kv_lines("bdi=0:45 oops\n", "x")
            .unwrap_err()
            .to_string();
        assert!(e.contains("x:1") && e.contains("`oops`"), "{e}");
    }

    #[test]
    fn bdi_stats_and_vmstat_parse() {
        let bdi = "BdiWriteback:            128 kB\nBdiReclaimable:         3968 kB\n\
                   BdiDirtyThresh:         4020 kB\nBdiWriteBandwidth:     102400 kBps\n\
                   b_dirty:                   1\nstate:                     1\n";
        let m = parse_bdi_stats(bdi).unwrap();
        assert_eq!(m["BdiReclaimable_kB"], 3968);
        assert_eq!(m["BdiWriteBandwidth_kBps"], 102_400);
        assert_eq!(m["b_dirty"], 1);
        let v = parse_vmstat("nr_dirty 12\nnr_writeback 0\n").unwrap();
        assert_eq!(v["nr_dirty"], 12);
        assert!(parse_vmstat("nr_dirty\n").is_err());
    }
}
