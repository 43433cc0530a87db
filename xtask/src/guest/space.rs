//! `cargo xtask hunt`'s search space (`qemu/hunt.toml`): dimensions, each a list of
//! values of the hunt script's settings (`qemu/scenarios/hunt`, its
//! `[params]`) or of its fio job (`size`, `invalidate`); a point takes one
//! value of each, and becomes a scenario (`Space::scenario`) the guest runs
//! with the hunt's script.

use std::{collections::BTreeMap, path::Path};

use anyhow::{bail, Context, Result};
use serde::Deserialize;

use crate::guest::{
    job::{self, WriteKind},
    scenario::{PhaseCycles, Scenario},
};

/// The space's file, relative to the repository root.
pub const SPACE_FILE: &str = "qemu/hunt.toml";

/// The full search's space: [`SPACE_FILE`]'s and more dimensions
/// (`--space`; named here for its tests).
#[cfg(test)]
pub const FULL_SPACE_FILE: &str = "qemu/hunt-full.toml";

/// The scenario whose script runs every point.
pub const SCRIPT: &str = "hunt";

/// The job settings a dimension may set besides the script's parameters:
/// each writer's file, fio's invalidate, the writers, how they write.
const JOB_KEYS: [&str; 4] = ["size", "invalidate", "numjobs", "write"];

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SpaceToml {
    /// Another space's file (relative to this one's folder) whose runs,
    /// phase, dimensions and ignores this one starts from: its own replace
    /// or add to them.
    #[serde(default)]
    extends: Option<String>,
    runs: Option<u32>,
    phase: Option<SpacePhaseToml>,
    #[serde(default)]
    dims: BTreeMap<String, Vec<toml::Value>>,
    #[serde(default)]
    ignore: BTreeMap<String, Vec<String>>,
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct SpacePhaseToml {
    cycles_ms: Vec<u32>,
}

/// One value of a dimension: the settings it makes, by name.
pub type Value = BTreeMap<String, String>;

#[derive(Debug, Clone, PartialEq)]
pub struct Dim {
    pub name: String,
    pub values: Vec<Value>,
}

/// `SETTING=VALUE` makes `dims` meaningless: they keep the script's defaults.
#[derive(Debug, Clone, PartialEq)]
pub struct Ignore {
    pub setting: String,
    pub value: String,
    pub dims: Vec<String>,
}

/// The space, checked against the script's settings.
#[derive(Debug, Clone)]
pub struct Space {
    pub runs: u32,
    pub cycles_ms: &'static [u32],
    pub dims: Vec<Dim>,
    pub ignore: Vec<Ignore>,
    /// The script's scenario: its defaults, disk and job.
    pub script: Scenario,
}

/// A point: the index of a value in each dimension, in the space's order.
pub type SpacePoint = Vec<usize>;

/// What a point boots: the script's settings and the job's.
#[derive(Debug, Clone, PartialEq, Eq, PartialOrd, Ord, Hash)]
pub struct Settings(pub BTreeMap<String, String>);

impl Space {
    /// Reads and checks `file` against the hunt script `script`.
    pub fn load(file: &Path, script: Scenario) -> Result<Space> {
        let read = |file: &Path| -> Result<SpaceToml> {
            let text = std::fs::read_to_string(file)
                .with_context(|| format!("reading the hunt's space {}", file.display()))?;
            toml::from_str(&text).with_context(|| format!("{}: not a hunt space", file.display()))
        };
        let mut t = read(file)?;
        if let Some(base) = t.extends.take() {
            let base_file = file.parent().unwrap_or(Path::new(".")).join(&base);
            let mut b = read(&base_file).with_context(|| format!("{}: extends", file.display()))?;
            if b.extends.is_some() {
                bail!(
                    "{}: extends {}, which extends another: a space extends one that \
                     extends none",
                    file.display(),
                    base_file.display()
                );
            }
            b.runs = t.runs.or(b.runs);
            b.phase = t.phase.or(b.phase);
            b.dims.extend(t.dims);
            b.ignore.extend(t.ignore);
            t = b;
        }
        Self::of_toml(t, script).with_context(|| format!("{}", file.display()))
    }

    /// A space from its text (one that extends none).
    #[cfg(test)]
    pub fn parse(text: &str, script: Scenario) -> Result<Space> {
        let t: SpaceToml = toml::from_str(text).context("not a hunt space")?;
        if t.extends.is_some() {
            bail!("`extends` names a file relative to this one's: load the space from its file");
        }
        Self::of_toml(t, script)
    }

    fn of_toml(t: SpaceToml, script: Scenario) -> Result<Space> {
        let runs = t
            .runs
            .context("`runs` is missing: the boots a point gets")?;
        let phase = (t.phase).context("[phase] is missing: the cycles_ms runs start across")?;
        if runs == 0 {
            bail!("runs must be at least 1");
        }
        if phase.cycles_ms.is_empty() || phase.cycles_ms.contains(&0) {
            bail!("[phase] cycles_ms needs one or more periods in ms, none of them 0");
        }
        let known = |k: &str| JOB_KEYS.contains(&k) || script.params.iter().any(|(p, _)| *p == k);
        let mut dims = Vec::new();
        for (name, values) in t.dims {
            if values.is_empty() {
                bail!("[dims] {name} has no values");
            }
            let mut out = Vec::new();
            for v in values {
                let value: Value = match v {
                    toml::Value::String(s) => [(name.clone(), s)].into(),
                    toml::Value::Table(t) => t
                        .into_iter()
                        .map(|(k, v)| match v {
                            toml::Value::String(s) => Ok((k, s)),
                            other => bail!("[dims] {name}: {k} = {other}: a value is a string"),
                        })
                        .collect::<Result<_>>()?,
                    other => {
                        bail!("[dims] {name}: {other} is neither a string nor a table of strings")
                    }
                };
                if let Some(k) = value.keys().find(|k| !known(k)) {
                    bail!(
                        "[dims] {name}: `{k}` is no setting of the hunt's script \
                         (qemu/scenarios/{SCRIPT}/scenario.toml [params]: {}) nor of its job \
                         ({})",
                        script
                            .params
                            .iter()
                            .map(|(k, _)| *k)
                            .collect::<Vec<_>>()
                            .join(", "),
                        JOB_KEYS.join(", ")
                    );
                }
                for (k, v) in &value {
                    check_job_value(k, v).with_context(|| format!("[dims] {name}"))?;
                }
                if out.contains(&value) {
                    bail!("[dims] {name} lists a value twice");
                }
                out.push(value);
            }
            dims.push(Dim { name, values: out });
        }
        let ignore = ignores(t.ignore, &dims, known)?;
        Ok(Space {
            runs,
            cycles_ms: Box::leak(phase.cycles_ms.into_boxed_slice()),
            dims,
            ignore,
            script,
        })
    }

    /// The script's default of a setting.
    fn default_of(&self, key: &str) -> String {
        match key {
            "size" => self.script.size.to_string(),
            "invalidate" => u8::from(self.script.invalidate).to_string(),
            "numjobs" => self.script.numjobs.unwrap_or(job::NUMJOBS).to_string(),
            "write" => self.script.write.name().to_string(),
            k => (self.script.params.iter())
                .find(|(p, _)| *p == k)
                .map_or_else(String::new, |(_, v)| v.to_string()),
        }
    }

    /// What `point` boots: the script's defaults, each dimension's value
    /// over them, but the dimensions another value makes meaningless.
    pub fn settings(&self, point: &SpacePoint) -> Settings {
        let mut s: BTreeMap<String, String> = (self.script.params.iter())
            .map(|(k, v)| (k.to_string(), v.to_string()))
            .collect();
        for k in JOB_KEYS {
            s.insert(k.to_string(), self.default_of(k));
        }
        let mut raw = s.clone();
        for (d, &i) in self.dims.iter().zip(point) {
            raw.extend(d.values[i].clone());
        }
        let ignored: Vec<&str> = (self.ignore.iter())
            .filter(|ig| raw.get(&ig.setting) == Some(&ig.value))
            .flat_map(|ig| ig.dims.iter().map(String::as_str))
            .collect();
        for (d, &i) in self.dims.iter().zip(point) {
            if !ignored.contains(&d.name.as_str()) {
                s.extend(d.values[i].clone());
            }
        }
        Settings(s)
    }

    /// Settings as they print (`KEY=VALUE` words), checked: the settings
    /// of this space's points, no more, no fewer.
    pub fn parse_settings(&self, text: &str) -> Result<Settings> {
        let mut s = BTreeMap::new();
        for w in text.split_whitespace() {
            let (k, v) = (w.split_once('=')).with_context(|| format!("`{w}` is not KEY=VALUE"))?;
            s.insert(k.to_string(), v.to_string());
        }
        let want = self.settings(&vec![0; self.dims.len()]);
        if !s.keys().eq(want.0.keys()) {
            bail!(
                "the settings name {}; a point of this space names {}",
                s.keys().cloned().collect::<Vec<_>>().join(", "),
                want.0.keys().cloned().collect::<Vec<_>>().join(", ")
            );
        }
        Ok(Settings(s))
    }

    /// The number of points (before those that boot the same are merged).
    pub fn size(&self) -> u128 {
        self.dims.iter().map(|d| d.values.len() as u128).product()
    }

    /// The scenario of `point`, named `name`: the hunt's script with its
    /// settings, its start phases the space's.
    pub fn scenario(&self, name: &str, settings: &Settings) -> Result<Scenario> {
        let leak = |s: String| -> &'static str { Box::leak(s.into_boxed_str()) };
        let s = &settings.0;
        let get = |k: &str| s.get(k).with_context(|| format!("the point has no `{k}`"));
        let invalidate = match get("invalidate")?.as_str() {
            "0" => false,
            "1" => true,
            v => bail!("invalidate = \"{v}\": 0 or 1"),
        };
        let numjobs = numjobs_of(get("numjobs")?)?;
        let write = write_of(get("write")?)?;
        let params: Vec<(&'static str, &'static str)> = (self.script.params.iter())
            .map(|(k, _)| Ok((*k, leak(get(k)?.clone()))))
            .collect::<Result<_>>()?;
        let fuse = s.get("fs").map(String::as_str) == Some("fuse");
        Ok(Scenario {
            name: leak(name.to_string()),
            script: self.script.name,
            what: leak(settings.to_string()),
            strictlimit: fuse && s.get("fuse_strict").map(String::as_str) == Some("1"),
            size: leak(get("size")?.clone()),
            invalidate,
            numjobs: Some(numjobs),
            write,
            phase: Some(PhaseCycles {
                cycles_ms: self.cycles_ms,
            }),
            in_default_plan: false,
            params: Box::leak(params.into_boxed_slice()),
            floor_sd_pct: None,
            ..self.script
        })
    }

    /// `now` with the settings of dimension `d` back at the script's defaults.
    pub fn relaxed(&self, now: &Settings, d: &Dim) -> Settings {
        let mut s = now.clone();
        for v in &d.values {
            for k in v.keys() {
                s.0.insert(k.clone(), self.default_of(k));
            }
        }
        s
    }

    /// The points one step from `p`: one dimension at another value.
    pub fn neighbours(&self, p: &SpacePoint) -> Vec<SpacePoint> {
        let mut out = Vec::new();
        for (d, dim) in self.dims.iter().enumerate() {
            for v in 0..dim.values.len() {
                if v != p[d] {
                    let mut q = p.clone();
                    q[d] = v;
                    out.push(q);
                }
            }
        }
        out
    }
}

/// `[ignore]` checked: each key a known `SETTING=VALUE`, each name a
/// dimension of `dims`.
fn ignores(
    table: BTreeMap<String, Vec<String>>,
    dims: &[Dim],
    known: impl Fn(&str) -> bool,
) -> Result<Vec<Ignore>> {
    let mut ignore = Vec::new();
    for (when, names) in table {
        let Some((setting, value)) = when.split_once('=') else {
            bail!("[ignore] \"{when}\": a key is SETTING=VALUE");
        };
        if !known(setting) {
            bail!("[ignore] \"{when}\": `{setting}` is no setting of the hunt's script");
        }
        if let Some(n) = names.iter().find(|n| !dims.iter().any(|d| &d.name == *n)) {
            bail!("[ignore] \"{when}\": `{n}` is not a dimension of [dims]");
        }
        ignore.push(Ignore {
            setting: setting.into(),
            value: value.into(),
            dims: names,
        });
    }
    Ok(ignore)
}

/// A job setting's value checked: the writers ([`numjobs_of`]), the kind of
/// write ([`write_of`]); any other setting as it is.
fn check_job_value(key: &str, v: &str) -> Result<()> {
    match key {
        "numjobs" => numjobs_of(v).map(drop),
        "write" => write_of(v).map(drop),
        _ => Ok(()),
    }
}

/// `numjobs`: a number of writers, 1 or more.
fn numjobs_of(v: &str) -> Result<u32> {
    match v.parse::<u32>() {
        Ok(n) if n > 0 => Ok(n),
        _ => bail!("numjobs = \"{v}\": a number of writers, 1 or more"),
    }
}

/// `write`: a kind of write fio knows (`WriteKind`).
fn write_of(v: &str) -> Result<WriteKind> {
    WriteKind::parse(v).map_err(anyhow::Error::msg)
}

/// Every setting as `key=value`, space-separated.
impl std::fmt::Display for Settings {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        let words: Vec<String> = self.0.iter().map(|(k, v)| format!("{k}={v}")).collect();
        write!(f, "{}", words.join(" "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::guest::scenario;

    fn space() -> Space {
        let file = crate::util::project_root().join(SPACE_FILE);
        Space::load(&file, scenario::any(SCRIPT).unwrap()).unwrap()
    }

    #[test]
    fn the_repository_space_loads_and_merges_what_boots_the_same() {
        let s = space();
        assert!(s.size() > 10_000, "{}", s.size());
        let fs = s.dims.iter().position(|d| d.name == "fs").unwrap();
        let memcg = s.dims.iter().position(|d| d.name == "memcg_max").unwrap();
        let fuse = s.dims[fs]
            .values
            .iter()
            .position(|v| v["fs"] == "fuse")
            .unwrap();
        let mut a = vec![0; s.dims.len()];
        a[fs] = fuse;
        let mut b = a.clone();
        b[memcg] = 2;
        // memory.max means nothing on FUSE: the two points are one.
        assert_eq!(s.settings(&a), s.settings(&b));
        assert_eq!(s.settings(&a).0["memcg_max"], "max");
    }

    /// The re-discoveries must be discoveries: neither known scenario is a
    /// point of the space.
    #[test]
    fn the_space_holds_neither_known_scenario_verbatim() {
        for file in [SPACE_FILE, FULL_SPACE_FILE] {
            let file = crate::util::project_root().join(file);
            holds_neither_verbatim(&Space::load(&file, scenario::any(SCRIPT).unwrap()).unwrap());
        }
    }

    /// The full space is the re-discovery space's and more: every dimension
    /// of qemu/hunt.toml with its values, its runs and phase, and the writers
    /// and the kinds of write besides; a space that extends one that extends
    /// another is refused.
    #[test]
    fn the_full_space_extends_the_rediscovery_space() {
        let root = crate::util::project_root();
        let script = scenario::any(SCRIPT).unwrap();
        let base = Space::load(&root.join(SPACE_FILE), script).unwrap();
        let full = Space::load(&root.join(FULL_SPACE_FILE), script).unwrap();
        for d in &base.dims {
            assert!(full.dims.contains(d), "{}", d.name);
        }
        assert_eq!((full.runs, full.cycles_ms), (base.runs, base.cycles_ms));
        assert_eq!(full.ignore, base.ignore);
        let added: Vec<&str> = (full.dims.iter())
            .filter(|d| !base.dims.contains(d))
            .map(|d| d.name.as_str())
            .collect();
        assert_eq!(added, ["numjobs", "write"]);
        assert_eq!(full.size(), base.size() * 12);
        let t = crate::util::testdir::Dir::new("space-extends");
        std::fs::write(t.path().join("a.toml"), "extends = \"b.toml\"\n").unwrap();
        std::fs::write(t.path().join("b.toml"), "extends = \"c.toml\"\n").unwrap();
        let e = format!(
            "{:#}",
            Space::load(&t.path().join("a.toml"), script).unwrap_err()
        );
        assert!(e.contains("a space extends one that extends none"), "{e}");
        let bad = "runs = 3\n[phase]\ncycles_ms = [2000]\n[dims]\nwrite = [\"dsync\"]\n";
        let e = format!("{:#}", Space::parse(bad, script).unwrap_err());
        assert!(e.contains("one of write, mmap, fsync, osync"), "{e}");
    }

    fn holds_neither_verbatim(s: &Space) {
        let values = |name: &str| -> Vec<String> {
            (s.dims.iter())
                .flat_map(|d| d.values.iter())
                .filter_map(|v| v.get(name).cloned())
                .collect()
        };
        let strict = scenario::by_name("fuse-strictlimit").unwrap();
        assert!(!values("size").contains(&strict.size.to_string()));
        let stale = scenario::by_name("memcg-stale-stats").unwrap();
        let param = |k: &str| stale.params.iter().find(|(p, _)| *p == k).unwrap().1;
        for k in ["thinktime_us", "disk_latency_ms", "memcg_max"] {
            assert!(!values(k).contains(&param(k).to_string()), "{k}");
        }
    }

    #[test]
    fn a_space_naming_an_unknown_setting_is_refused_with_the_known_ones() {
        let script = scenario::any(SCRIPT).unwrap();
        let bad = "runs = 3\n[phase]\ncycles_ms = [2000]\n[dims]\nthink = [\"0\"]\n";
        let e = format!("{:#}", Space::parse(bad, script).unwrap_err());
        assert!(
            e.contains("`think` is no setting") && e.contains("thinktime_us"),
            "{e}"
        );
        let bad = "runs = 3\n[phase]\ncycles_ms = [2000]\n[dims]\nfs = [\"ext4\"]\n\
                   [ignore]\n\"fs=fuse\" = [\"memcg\"]\n";
        let e = format!("{:#}", Space::parse(bad, script).unwrap_err());
        assert!(e.contains("`memcg` is not a dimension"), "{e}");
    }

    /// A node reads a point's settings as they print; a file that names
    /// other settings is refused with the ones a point names.
    #[test]
    fn settings_read_back_as_they_print_and_no_others() {
        let s = space();
        let p = vec![1; s.dims.len()];
        let settings = s.settings(&p);
        assert_eq!(s.parse_settings(&settings.to_string()).unwrap(), settings);
        let fewer = settings.to_string().replace("invalidate=", "invalid=");
        let e = format!("{:#}", s.parse_settings(&fewer).unwrap_err());
        assert!(
            e.contains("a point of this space names") && e.contains("invalidate"),
            "{e}"
        );
        let e = format!("{:#}", s.parse_settings("fs").unwrap_err());
        assert!(e.contains("`fs` is not KEY=VALUE"), "{e}");
    }

    #[test]
    fn a_point_becomes_a_scenario_run_by_the_hunts_script() {
        let s = space();
        let p = vec![0; s.dims.len()];
        let scen = s.scenario("hunt-007", &s.settings(&p)).unwrap();
        assert_eq!((scen.name, scen.script), ("hunt-007", "hunt"));
        assert_eq!(scen.phase.unwrap().cycle_ms(), 10_000);
        assert_eq!(
            s.neighbours(&p).len(),
            s.dims.iter().map(|d| d.values.len() - 1).sum::<usize>()
        );
    }
}
