//! The verdict: each measured cell (variant × scenario) is classified from the
//! mechanism — how much of the writers' time went to stall sleeps, i.e. sleeps
//! in balance_dirty_pages() while no writeback ran or had been asked for — and
//! compared with the hypotheses in `qemu/expected.toml`.

use std::{collections::BTreeMap, fmt, path::Path};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use crate::record::RunRecord;

/// The expectations file, relative to the repository root.
pub const EXPECTED_FILE: &str = "qemu/expected.toml";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Class {
    Stall,
    Ok,
    /// Between the two thresholds: neither a clear stall nor clearly free of one.
    Unclear,
}

impl fmt::Display for Class {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Class::Stall => "stall",
            Class::Ok => "ok",
            Class::Unclear => "unclear",
        })
    }
}

/// Thresholds of the classification (see the comments in the expectations file).
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Criteria {
    pub stall_fraction: f64,
    pub ok_fraction: f64,
}

#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct Expected {
    pub criteria: Criteria,
    /// scenario → variant → expected class.
    pub expect: BTreeMap<String, BTreeMap<String, Class>>,
    /// scenario → the share of the slowest clean variant's bandwidth a stalling
    /// cell must stay below (scenarios not listed: the ratio is only reported).
    #[serde(default)]
    pub stall_throughput_ratio: BTreeMap<String, f64>,
}

impl Expected {
    pub fn parse(text: &str, origin: &Path) -> Result<Expected> {
        let e: Expected = toml::from_str(text)
            .with_context(|| format!("{} is not a valid expectations file", origin.display()))?;
        let c = &e.criteria;
        if !(0.0 < c.ok_fraction && c.ok_fraction <= c.stall_fraction && c.stall_fraction < 1.0) {
            bail!(
                "{}: need 0 < ok_fraction <= stall_fraction < 1 (got {} and {})",
                origin.display(),
                c.ok_fraction,
                c.stall_fraction
            );
        }
        for (scenario, cells) in &e.expect {
            for (variant, class) in cells {
                if *class == Class::Unclear {
                    bail!(
                        "{}: [expect.{scenario}] {variant}: expect `stall` or `ok`",
                        origin.display()
                    );
                }
            }
        }
        Ok(e)
    }

    pub fn load(path: &Path) -> Result<Expected> {
        let text =
            std::fs::read_to_string(path).with_context(|| format!("reading {}", path.display()))?;
        Expected::parse(&text, path)
    }

    pub fn classify(&self, stall_fraction: f64) -> Class {
        if stall_fraction >= self.criteria.stall_fraction {
            Class::Stall
        } else if stall_fraction < self.criteria.ok_fraction {
            Class::Ok
        } else {
            Class::Unclear
        }
    }
}

/// The median of some numbers (0 for none).
pub fn median(values: &[f64]) -> f64 {
    if values.is_empty() {
        return 0.0;
    }
    let mut v = values.to_vec();
    v.sort_by(f64::total_cmp);
    let n = v.len();
    if n % 2 == 1 {
        v[n / 2]
    } else {
        (v[n / 2 - 1] + v[n / 2]) / 2.0
    }
}

/// One cell's judgement.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct CellVerdict {
    pub variant: String,
    pub scenario: String,
    pub runs: usize,
    pub stall_fraction: f64,
    pub bw_mib_s: f64,
    pub observed: Class,
    pub expected: Option<Class>,
    /// Why the cell fails, if it does.
    pub failures: Vec<String>,
}

/// The verdict over all measured cells.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct Verdict {
    pub cells: Vec<CellVerdict>,
    /// Regressed/fixed-style ratios: per scenario, the median throughput of the
    /// stalling cells over that of the slowest non-stalling one.
    pub throughput_ratio: BTreeMap<String, f64>,
}

impl Verdict {
    pub fn passed(&self) -> bool {
        !self.cells.is_empty() && self.cells.iter().all(|c| c.failures.is_empty())
    }
}

/// Judges the records, cell by cell, in the order the cells first appear.
pub fn judge(records: &[RunRecord], expected: &Expected) -> Verdict {
    let mut order: Vec<(String, String)> = Vec::new();
    for r in records {
        let key = (r.variant.clone(), r.scenario.clone());
        if !order.contains(&key) {
            order.push(key);
        }
    }
    let mut cells: Vec<CellVerdict> = order
        .iter()
        .map(|(variant, scenario)| {
            let runs: Vec<&RunRecord> =
                records.iter().filter(|r| &r.variant == variant && &r.scenario == scenario).collect();
            let fractions: Vec<f64> = runs.iter().map(|r| r.stall_fraction).collect();
            let bws: Vec<f64> = runs.iter().map(|r| r.fio.bw_mib_s).collect();
            let stall_fraction = median(&fractions);
            let observed = expected.classify(stall_fraction);
            let exp = expected.expect.get(scenario).and_then(|m| m.get(variant)).copied();
            let mut failures = Vec::new();
            if let Some(e) = exp {
                if e != observed {
                    failures.push(format!(
                        "expected {e}, observed {observed}: writers lost {:.1}% of their time to stall sleeps \
                         (stall >= {:.0}%, ok < {:.0}%)",
                        stall_fraction * 100.0,
                        expected.criteria.stall_fraction * 100.0,
                        expected.criteria.ok_fraction * 100.0
                    ));
                }
            }
            CellVerdict {
                variant: variant.clone(),
                scenario: scenario.clone(),
                runs: runs.len(),
                stall_fraction,
                bw_mib_s: median(&bws),
                observed,
                expected: exp,
                failures,
            }
        })
        .collect();

    // A stall must also cost throughput: far below the slowest clean cell.
    let mut throughput_ratio = BTreeMap::new();
    let scenarios: Vec<String> = order.iter().map(|(_, s)| s.clone()).collect();
    for scenario in scenarios.iter().fold(Vec::<&String>::new(), |mut acc, s| {
        if !acc.contains(&s) {
            acc.push(s);
        }
        acc
    }) {
        let slowest_ok = cells
            .iter()
            .filter(|c| &c.scenario == scenario && c.observed == Class::Ok)
            .map(|c| c.bw_mib_s)
            .fold(f64::INFINITY, f64::min);
        if !slowest_ok.is_finite() || slowest_ok <= 0.0 {
            continue;
        }
        for c in cells
            .iter_mut()
            .filter(|c| &c.scenario == scenario && c.observed == Class::Stall)
        {
            let ratio = c.bw_mib_s / slowest_ok;
            throughput_ratio.insert(format!("{}:{}", scenario, c.variant), ratio);
            if let Some(limit) = expected.stall_throughput_ratio.get(scenario.as_str()) {
                if ratio >= *limit {
                    c.failures.push(format!(
                        "stall sleeps without the throughput cost: {:.1} MiB/s is {:.0}% of the slowest \
                         clean variant ({slowest_ok:.1} MiB/s; a stall must be below {:.0}%)",
                        c.bw_mib_s,
                        ratio * 100.0,
                        limit * 100.0
                    ));
                }
            }
        }
    }
    Verdict {
        cells,
        throughput_ratio,
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;

    pub const EXPECTED: &str = r#"
[criteria]
stall_fraction = 0.05
ok_fraction = 0.01
[expect.fuse-strictlimit]
regressed = "stall"
v1 = "ok"
[stall_throughput_ratio]
fuse-strictlimit = 0.5
"#;

    pub fn expected() -> Expected {
        Expected::parse(EXPECTED, Path::new("e.toml")).unwrap()
    }

    #[test]
    fn the_repository_expectations_parse() {
        let path = crate::util::project_root().join(EXPECTED_FILE);
        let e = Expected::load(&path).unwrap();
        assert_eq!(e.expect["fuse-strictlimit"]["regressed"], Class::Stall);
        assert_eq!(e.expect["fuse-strictlimit"]["upstream"], Class::Ok);
    }

    #[test]
    fn classification_has_a_gap_between_ok_and_stall() {
        let e = expected();
        assert_eq!(e.classify(0.5), Class::Stall);
        assert_eq!(e.classify(0.05), Class::Stall);
        assert_eq!(e.classify(0.03), Class::Unclear);
        assert_eq!(e.classify(0.0), Class::Ok);
    }

    #[test]
    fn bad_expectations_are_rejected() {
        let bad = EXPECTED.replace("ok_fraction = 0.01", "ok_fraction = 0.2");
        assert!(Expected::parse(&bad, Path::new("e")).is_err());
        let bad = EXPECTED.replace("v1 = \"ok\"", "v1 = \"unclear\"");
        assert!(Expected::parse(&bad, Path::new("e")).is_err());
        let bad = EXPECTED.replace("v1 = \"ok\"", "v1 = \"fast\"");
        assert!(Expected::parse(&bad, Path::new("e")).is_err());
    }

    /// A record with just what the verdict reads.
    pub fn rec(variant: &str, scenario: &str, bw: f64, stall: f64) -> RunRecord {
        let mut r = RunRecord {
            variant: variant.into(),
            scenario: scenario.into(),
            stall_fraction: stall,
            ..RunRecord::default()
        };
        r.fio.bw_mib_s = bw;
        r
    }

    #[test]
    fn the_expected_matrix_passes_and_the_ratio_is_reported() {
        let records = [
            rec("regressed", "fuse-strictlimit", 0.8, 0.7),
            rec("v1", "fuse-strictlimit", 200.0, 0.0),
            rec("regressed", "fuse-strictlimit", 1.0, 0.6),
            rec("v1", "fuse-strictlimit", 190.0, 0.001),
        ];
        let v = judge(&records, &expected());
        assert!(v.passed(), "{v:?}");
        assert_eq!(v.cells[0].runs, 2);
        assert_eq!(v.cells[0].observed, Class::Stall);
        let ratio = v.throughput_ratio["fuse-strictlimit:regressed"];
        assert!((ratio - 0.9 / 195.0).abs() < 1e-9, "{ratio}");
    }

    #[test]
    fn a_hypothesis_that_does_not_hold_fails_its_cell() {
        // The regressed cell shows no stall sleeps: the mechanism decides, whatever
        // its throughput.
        let records = [
            rec("regressed", "fuse-strictlimit", 1.0, 0.0),
            rec("v1", "fuse-strictlimit", 200.0, 0.0),
        ];
        let v = judge(&records, &expected());
        assert!(!v.passed());
        assert!(
            v.cells[0].failures[0].contains("expected stall, observed ok"),
            "{:?}",
            v.cells[0].failures
        );
        assert!(v.cells[1].failures.is_empty());
    }

    #[test]
    fn a_stall_without_its_cost_fails_where_the_cost_is_judged() {
        let records = [
            rec("regressed", "fuse-strictlimit", 150.0, 0.2),
            rec("v1", "fuse-strictlimit", 200.0, 0.0),
        ];
        let v = judge(&records, &expected());
        assert!(
            v.cells[0].failures[0].contains("without the throughput cost"),
            "{:?}",
            v.cells[0]
        );
        // Elsewhere the ratio is reported, not judged.
        let records = [
            rec("regressed", "memcg-ext4", 150.0, 0.2),
            rec("v1", "memcg-ext4", 200.0, 0.0),
        ];
        let v = judge(&records, &expected());
        assert!(v.passed(), "{v:?}");
        assert!(v.throughput_ratio.contains_key("memcg-ext4:regressed"));
    }

    #[test]
    fn nothing_measured_is_not_a_pass() {
        assert!(!judge(&[], &expected()).passed());
    }

    #[test]
    fn medians() {
        assert_eq!(median(&[3.0, 1.0, 2.0]), 2.0);
        assert_eq!(median(&[4.0, 1.0, 2.0, 3.0]), 2.5);
        assert_eq!(median(&[]), 0.0);
    }
}
