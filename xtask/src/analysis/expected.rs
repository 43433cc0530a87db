//! The hypotheses a session is judged by (`qemu/expected.toml`): the classes,
//! the criteria's numbers, and which class each cell (scenario × variant) is
//! expected to be in. This is the schema and its validation; reading the file
//! is the caller's.

use std::{collections::BTreeMap, fmt, path::Path};

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};

use crate::results::{tracefs::Cause, witness::Tolerance};

/// The expectations file, relative to the repository root.
pub const EXPECTED_FILE: &str = "qemu/expected.toml";

/// What the A/A control of a variant is called: `<variant>-aa`.
pub const AA_SUFFIX: &str = "-aa";

#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Class {
    Stall,
    Ok,
    /// Between the two thresholds: neither a clear stall nor clearly free of one.
    Unclear,
    /// The writers were never throttled: nothing was exercised, so neither
    /// `ok` nor `stall` can be claimed.
    Idle,
    /// A cell whose runs are not all in one class (0%, 0%, 40%): it fails
    /// every expectation, and the report names each run's class.
    Mixed,
}

impl fmt::Display for Class {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(match self {
            Class::Stall => "stall",
            Class::Ok => "ok",
            Class::Unclear => "unclear",
            Class::Idle => "idle",
            Class::Mixed => "mixed",
        })
    }
}

impl std::str::FromStr for Class {
    type Err = String;

    /// A class a cell may be expected to be in.
    fn from_str(s: &str) -> Result<Class, String> {
        match s {
            "stall" => Ok(Class::Stall),
            "ok" => Ok(Class::Ok),
            "idle" => Ok(Class::Idle),
            _ => Err(format!(
                "`{s}` is not a class a cell can be expected to be in: stall, ok, idle"
            )),
        }
    }
}

/// What a cell is expected to be: a class, and for `stall` optionally the
/// cause its stall sleeps must have (`stall:unrequested`: the stall share of
/// that cause alone reaches `stall_fraction` in every run, by the detector
/// the run is judged by).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Expect {
    pub class: Class,
    pub cause: Option<Cause>,
}

impl From<Class> for Expect {
    fn from(class: Class) -> Expect {
        Expect { class, cause: None }
    }
}

impl fmt::Display for Expect {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.cause {
            Some(cause) => write!(f, "{}:{}", self.class, cause.name()),
            None => write!(f, "{}", self.class),
        }
    }
}

impl std::str::FromStr for Expect {
    type Err = String;

    /// `stall`, `ok`, `idle`, or `stall:CAUSE`.
    fn from_str(s: &str) -> Result<Expect, String> {
        let Some((class, cause)) = s.split_once(':') else {
            return Ok(s.parse::<Class>()?.into());
        };
        let class: Class = class.parse()?;
        if class != Class::Stall {
            return Err(format!(
                "`{s}`: only `stall` names a cause (stall:{}, stall:{})",
                Cause::Unrequested.name(),
                Cause::Declined.name()
            ));
        }
        let cause = [Cause::Unrequested, Cause::Declined]
            .into_iter()
            .find(|c| c.name() == cause)
            .ok_or_else(|| {
                format!(
                    "`{s}`: `{cause}` is not a cause of a stall: {}, {}",
                    Cause::Unrequested.name(),
                    Cause::Declined.name()
                )
            })?;
        Ok(Expect {
            class,
            cause: Some(cause),
        })
    }
}

impl Serialize for Expect {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> Deserialize<'de> for Expect {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<Expect, D::Error> {
        let s = String::deserialize(d)?;
        s.parse().map_err(serde::de::Error::custom)
    }
}

/// Thresholds of the classification (see the comments in the expectations file).
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Criteria {
    pub stall_fraction: f64,
    pub ok_fraction: f64,
}

/// The second, independent criterion of a scenario: the kernel's own latency
/// of a throttled write.
#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Latency {
    /// The longest balance_dirty_pages() call of a run (`paused + pause` of
    /// its sleeps) as a share of `vm.dirty_writeback_centisecs`: an `ok` run
    /// stays below it (and its witness saw background starts), a `stall` run
    /// reaches it (its writers waited for the periodic flusher).
    pub max_call_share_of_writeback_interval: f64,
}

#[derive(Debug, Clone, Deserialize, Serialize)]
#[serde(deny_unknown_fields)]
pub struct Expected {
    pub criteria: Criteria,
    /// How far the tracefs witness and the module may disagree.
    pub witness: Tolerance,
    /// scenario → variant → expected class (and cause).
    pub expect: BTreeMap<String, BTreeMap<String, Expect>>,
    /// scenario → the share of the slowest clean variant's bandwidth a stalling
    /// run must stay below (scenarios not listed: the ratio is only reported).
    #[serde(default)]
    pub stall_throughput_ratio: BTreeMap<String, f64>,
    /// scenario → the latency criterion (scenarios not listed: none).
    #[serde(default)]
    pub latency: BTreeMap<String, Latency>,
}

/// The widest witness tolerance a file may set. The slack covers only the
/// events between the module's read and the hist's; one in twenty (`rel`)
/// or ten events (`abs`) would let a detector that misses events agree.
const MAX_WITNESS_REL: f64 = 0.05;
const MAX_WITNESS_ABS: u64 = 10;

impl Expected {
    /// Parses an expectations file and checks every number in it.
    pub fn parse(text: &str, origin: &Path) -> Result<Expected> {
        let e: Expected = toml::from_str(text)
            .with_context(|| format!("{} is not a valid expectations file", origin.display()))?;
        e.check_numbers()
            .with_context(|| format!("{}: a criterion is out of range", origin.display()))?;
        for (scenario, cells) in &e.expect {
            for (variant, e) in cells {
                if matches!(e.class, Class::Unclear | Class::Mixed) {
                    bail!(
                        "{}: [expect.{scenario}] {variant}: expect `stall`, `ok` or `idle`",
                        origin.display()
                    );
                }
            }
        }
        Ok(e)
    }

    /// Every number must mean what its name says: a bound that accepts
    /// everything is no criterion.
    fn check_numbers(&self) -> Result<()> {
        let c = &self.criteria;
        if !(0.0 < c.ok_fraction && c.ok_fraction <= c.stall_fraction && c.stall_fraction < 1.0) {
            bail!(
                "need 0 < ok_fraction <= stall_fraction < 1 (got {} and {})",
                c.ok_fraction,
                c.stall_fraction
            );
        }
        let w = &self.witness;
        if !(0.0..=MAX_WITNESS_REL).contains(&w.rel) || w.abs > MAX_WITNESS_ABS {
            bail!(
                "[witness] abs = {}, rel = {}: need abs <= {MAX_WITNESS_ABS} and 0 <= rel <= \
                 {MAX_WITNESS_REL} (the slack covers the events between two reads; wider, a \
                 detector that misses events would agree)",
                w.abs,
                w.rel
            );
        }
        for (s, r) in &self.stall_throughput_ratio {
            if !(0.0 < *r && *r < 1.0) {
                bail!(
                    "[stall_throughput_ratio] {s} = {r}: need 0 < ratio < 1 (a stall must cost \
                     throughput against the slowest clean variant)"
                );
            }
        }
        for (s, l) in &self.latency {
            let share = l.max_call_share_of_writeback_interval;
            if !(0.0 < share && share < 1.0) {
                bail!(
                    "[latency.{s}] max_call_share_of_writeback_interval = {share}: need 0 < share \
                     < 1 (at a whole interval, a writer waiting for the periodic flusher passes)"
                );
            }
        }
        Ok(())
    }

    /// Every scenario and variant the file names must exist: a typo would
    /// silently disable a hypothesis.
    pub fn validate(&self, scenarios: &[&str], variants: &[&str], origin: &Path) -> Result<()> {
        let unknown = |kind: &str, name: &str, table: &str, known: &[&str]| {
            anyhow::anyhow!(
                "{}: [{table}] names the unknown {kind} `{name}`; known {kind}s: {}",
                origin.display(),
                known.join(", ")
            )
        };
        for (s, cells) in &self.expect {
            if !scenarios.contains(&s.as_str()) {
                return Err(unknown("scenario", s, &format!("expect.{s}"), scenarios));
            }
            for v in cells.keys() {
                if !variants.contains(&v.as_str()) {
                    return Err(unknown("variant", v, &format!("expect.{s}"), variants));
                }
            }
        }
        for s in self.stall_throughput_ratio.keys() {
            if !scenarios.contains(&s.as_str()) {
                return Err(unknown("scenario", s, "stall_throughput_ratio", scenarios));
            }
        }
        for s in self.latency.keys() {
            if !scenarios.contains(&s.as_str()) {
                return Err(unknown("scenario", s, "latency", scenarios));
            }
        }
        Ok(())
    }

    /// The hypothesis of a cell. An A/A control (`<variant>-aa`) is the same
    /// kernel as its variant and is held to the same hypothesis.
    pub fn expectation(&self, scenario: &str, variant: &str) -> Option<Expect> {
        let cells = self.expect.get(scenario)?;
        cells.get(variant).copied().or_else(|| {
            variant
                .strip_suffix(AA_SUFFIX)
                .and_then(|base| cells.get(base).copied())
        })
    }

    /// The expectations of the patch under test (`variant`) in `scenarios`:
    /// an `--expect` for the scenario, else an `--expect` for all, else the
    /// `reference` variant's (a fix must behave as the shipped fix does).
    /// Returns, per scenario, where the expectation came from.
    pub fn expect_patch(
        &mut self,
        variant: &str,
        reference: &str,
        scenarios: &[&str],
        given: &ExpectArgs,
    ) -> Vec<(String, Option<Expect>, String)> {
        let mut out = Vec::new();
        for &s in scenarios {
            let (class, why) = if let Some(c) = given.per_scenario.get(s) {
                (Some(*c), format!("--expect {s}={c}"))
            } else if let Some(c) = given.all {
                (Some(c), format!("--expect {c}"))
            } else {
                match self.expectation(s, reference) {
                    Some(c) => (Some(c), format!("as the reference `{reference}`")),
                    None => (None, format!("`{reference}` has none either")),
                }
            };
            if let Some(c) = class {
                self.expect
                    .entry(s.to_string())
                    .or_default()
                    .insert(variant.to_string(), c);
            }
            out.push((s.to_string(), class, why));
        }
        out
    }

    /// [`Expected::expect_patch`]'s answer in words: `fuse-strictlimit ok
    /// (as the reference `upstream`), ...`.
    pub fn said(said: &[(String, Option<Expect>, String)]) -> String {
        let held: Vec<String> = said
            .iter()
            .map(|(s, c, why)| match c {
                Some(c) => format!("{s} {c} ({why})"),
                None => format!("{s} unjudged ({why}: give --expect {s}=CLASS)"),
            })
            .collect();
        held.join(", ")
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

/// Parses an expectations file and checks every name in it against the
/// scenarios, `patches/variants.toml` and `extra_variants` (the session's
/// own: an ad-hoc patch, a revision).
pub fn load_expectations(text: &str, origin: &Path, extra_variants: &[&str]) -> Result<Expected> {
    let e = Expected::parse(text, origin)?;
    let repo = crate::kernel::variants::Variants::repo()?;
    let mut variants = repo.names();
    variants.extend_from_slice(extra_variants);
    let scenarios: Vec<&str> = crate::guest::scenario::all()?
        .iter()
        .map(|s| s.name)
        .collect();
    e.validate(&scenarios, &variants, origin)?;
    Ok(e)
}

/// `--expect CLASS` and `--expect SCENARIO=CLASS` of the patch under test.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct ExpectArgs {
    pub all: Option<Expect>,
    pub per_scenario: BTreeMap<String, Expect>,
}

impl ExpectArgs {
    /// Reads the `--expect` values; scenario names are checked against `scenarios`.
    pub fn parse(values: &[String], scenarios: &[&str]) -> Result<ExpectArgs> {
        let mut out = ExpectArgs::default();
        for v in values {
            match v.split_once('=') {
                Some((s, c)) => {
                    if !scenarios.contains(&s) {
                        bail!(
                            "--expect {v}: unknown scenario `{s}`; known scenarios: {}",
                            scenarios.join(", ")
                        );
                    }
                    let c: Expect = c
                        .parse()
                        .map_err(|e| anyhow::anyhow!("--expect {v}: {e}"))?;
                    if out.per_scenario.insert(s.to_string(), c).is_some() {
                        bail!("--expect {s}=...: given twice");
                    }
                }
                None => {
                    let c: Expect = v
                        .parse()
                        .map_err(|e| anyhow::anyhow!("--expect {v}: {e}"))?;
                    if out.all.replace(c).is_some() {
                        bail!("--expect {v}: a class for every scenario is given twice");
                    }
                }
            }
        }
        Ok(out)
    }
}

#[cfg(test)]
pub(crate) mod tests {
    use super::*;
    use crate::guest::scenario;

    pub const EXPECTED: &str = r#"
[criteria]
stall_fraction = 0.05
ok_fraction = 0.01
[witness]
abs = 2
rel = 0.005
[expect.fuse-strictlimit]
regressed = "stall"
v1 = "ok"
v2 = "ok"
upstream = "ok"
[expect.fuse-nostrict]
regressed = "ok"
[stall_throughput_ratio]
fuse-strictlimit = 0.5
[latency.memcg-ext4]
max_call_share_of_writeback_interval = 0.5
[expect.memcg-ext4]
regressed = "stall"
v2 = "ok"
"#;

    pub fn expected() -> Expected {
        Expected::parse(EXPECTED, Path::new("e.toml")).unwrap()
    }

    #[test]
    fn the_repository_expectations_parse_and_name_only_known_cells() {
        let path = crate::util::project_root().join(EXPECTED_FILE);
        let e = Expected::parse(&std::fs::read_to_string(&path).unwrap(), &path).unwrap();
        assert_eq!(
            e.expect["fuse-strictlimit"]["regressed"].to_string(),
            "stall:unrequested"
        );
        assert_eq!(e.expect["fuse-strictlimit"]["upstream"], Class::Ok.into());
        let variants = crate::kernel::variants::Variants::repo().unwrap();
        let names = variants.names();
        let scenarios: Vec<&str> = scenario::all().unwrap().iter().map(|s| s.name).collect();
        e.validate(&scenarios, &names, &path).unwrap();
        // Every scenario x variant has a hypothesis: none is measured unjudged.
        for s in &scenarios {
            for v in &names {
                assert!(e.expectation(s, v).is_some(), "no expectation for {s}/{v}");
            }
        }
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
        for (from, to) in [
            ("ok_fraction = 0.01", "ok_fraction = 0.2"),
            ("v1 = \"ok\"", "v1 = \"unclear\""),
            ("v1 = \"ok\"", "v1 = \"mixed\""),
            ("v1 = \"ok\"", "v1 = \"fast\""),
        ] {
            assert!(
                Expected::parse(&EXPECTED.replace(from, to), Path::new("e")).is_err(),
                "{to}"
            );
        }
        // The witness tolerance is not optional.
        let bad = EXPECTED.replace("[witness]\nabs = 2\nrel = 0.005\n", "");
        let e = format!("{:#}", Expected::parse(&bad, Path::new("e")).unwrap_err());
        assert!(e.contains("missing field `witness`"), "{e}");
    }

    #[test]
    fn a_criterion_that_accepts_everything_is_out_of_range() {
        for (from, to, want) in [
            (
                "rel = 0.005",
                "rel = 1.0",
                "[witness] abs = 2, rel = 1: need abs <= 10",
            ),
            ("abs = 2", "abs = 1000", "[witness] abs = 1000"),
            ("rel = 0.005", "rel = -0.1", "[witness]"),
            (
                "fuse-strictlimit = 0.5",
                "fuse-strictlimit = 1.0",
                "[stall_throughput_ratio] fuse-strictlimit = 1: need 0 < ratio < 1",
            ),
            (
                "max_call_share_of_writeback_interval = 0.5",
                "max_call_share_of_writeback_interval = 1.5",
                "[latency.memcg-ext4] max_call_share_of_writeback_interval = 1.5",
            ),
            (
                "max_call_share_of_writeback_interval = 0.5",
                "max_call_share_of_writeback_interval = 0",
                "need 0 < share",
            ),
        ] {
            let e = format!(
                "{:#}",
                Expected::parse(&EXPECTED.replace(from, to), Path::new("e.toml")).unwrap_err()
            );
            assert!(
                e.contains("e.toml: a criterion is out of range") && e.contains(want),
                "{to}: {e}"
            );
        }
    }

    #[test]
    fn a_typo_in_a_name_is_an_error_listing_the_known_ones() {
        let scenarios = ["fuse-strictlimit", "fuse-nostrict", "memcg-ext4"];
        let variants = ["regressed", "v1", "v2", "upstream"];
        expected()
            .validate(&scenarios, &variants, Path::new("e.toml"))
            .unwrap();
        let typo = EXPECTED.replace("[expect.fuse-strictlimit]", "[expect.fuse-strictlimt]");
        let e = Expected::parse(&typo, Path::new("e.toml"))
            .unwrap()
            .validate(&scenarios, &variants, Path::new("e.toml"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("[expect.fuse-strictlimt] names the unknown scenario `fuse-strictlimt`; known scenarios: fuse-strictlimit, fuse-nostrict, memcg-ext4"),
            "{e}"
        );
        let typo = EXPECTED.replace("v1 = \"ok\"", "v11 = \"ok\"");
        let e = Expected::parse(&typo, Path::new("e.toml"))
            .unwrap()
            .validate(&scenarios, &variants, Path::new("e.toml"))
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("unknown variant `v11`; known variants: regressed, v1, v2, upstream"),
            "{e}"
        );
    }

    #[test]
    fn an_expectation_names_a_stalls_cause_and_only_a_stalls() {
        let e: Expect = "stall:unrequested".parse().unwrap();
        assert_eq!(
            (e.class, e.cause, e.to_string()),
            (
                Class::Stall,
                Some(Cause::Unrequested),
                "stall:unrequested".into()
            )
        );
        assert_eq!("stall".parse::<Expect>().unwrap().cause, None);
        let err = "ok:unrequested".parse::<Expect>().unwrap_err();
        assert!(err.contains("only `stall` names a cause"), "{err}");
        let err = "stall:slow".parse::<Expect>().unwrap_err();
        assert!(err.contains("`slow` is not a cause"), "{err}");
        // The file and the session's copy of it say the same.
        let file = EXPECTED.replace(
            "[expect.memcg-ext4]\nregressed = \"stall\"",
            "[expect.memcg-ext4]\nregressed = \"stall:declined\"",
        );
        let e = Expected::parse(&file, Path::new("e.toml")).unwrap();
        let again = Expected::parse(&toml::to_string(&e).unwrap(), Path::new("s.toml")).unwrap();
        assert_eq!(
            again.expect["memcg-ext4"]["regressed"].to_string(),
            "stall:declined"
        );
        let bad = EXPECTED.replace("v2 = \"ok\"", "v2 = \"ok:declined\"");
        let err = format!(
            "{:#}",
            Expected::parse(&bad, Path::new("e.toml")).unwrap_err()
        );
        assert!(err.contains("only `stall` names a cause"), "{err}");
    }

    #[test]
    fn the_aa_control_is_held_to_its_variants_hypothesis() {
        let e = expected();
        assert_eq!(
            e.expectation("fuse-strictlimit", "regressed-aa"),
            Some(Class::Stall.into())
        );
        assert_eq!(e.expectation("fuse-strictlimit", "patch-x"), None);
    }

    #[test]
    fn the_patch_is_held_to_the_reference_unless_told_otherwise() {
        let scenarios = ["fuse-strictlimit", "fuse-nostrict", "memcg-ext4"];
        // By default: what the reference (here v1) is expected to do; a
        // scenario where the reference has none leaves the patch unjudged.
        let mut e = expected();
        let said = e.expect_patch("patch-x", "v1", &scenarios, &ExpectArgs::default());
        assert_eq!(
            e.expectation("fuse-strictlimit", "patch-x"),
            Some(Class::Ok.into())
        );
        assert_eq!(e.expectation("memcg-ext4", "patch-x"), None);
        assert_eq!(said[0].2, "as the reference `v1`");
        assert_eq!(said[2].2, "`v1` has none either");
        // --expect stall, and --expect memcg-ext4=ok over it.
        let given =
            ExpectArgs::parse(&["stall".into(), "memcg-ext4=ok".into()], &scenarios).unwrap();
        let mut e = expected();
        e.expect_patch("patch-x", "v1", &scenarios, &given);
        assert_eq!(
            e.expectation("fuse-strictlimit", "patch-x"),
            Some(Class::Stall.into())
        );
        assert_eq!(
            e.expectation("memcg-ext4", "patch-x"),
            Some(Class::Ok.into())
        );
    }

    #[test]
    fn a_typo_in_expect_lists_the_known_names() {
        let scenarios = ["fuse-strictlimit", "memcg-ext4"];
        let e = ExpectArgs::parse(&["fuse-strictlimt=ok".into()], &scenarios)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains(
                "unknown scenario `fuse-strictlimt`; known scenarios: fuse-strictlimit, memcg-ext4"
            ),
            "{e}"
        );
        let e = ExpectArgs::parse(&["okay".into()], &scenarios)
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("`okay` is not a class") && e.contains("stall, ok, idle"),
            "{e}"
        );
        let e = ExpectArgs::parse(&["memcg-ext4=mixed".into()], &scenarios)
            .unwrap_err()
            .to_string();
        assert!(e.contains("`mixed` is not a class"), "{e}");
    }
}
