//! The scenarios. Each is a folder `qemu/scenarios/<name>/`: `scenario.toml`
//! (what it is, its defaults: disk, fio file size, dirty limits, ...) and
//! `run.sh` (the guest script, sourced by init). Its expectations are in
//! `qemu/expected.toml`. Adding a scenario touches no Rust: a folder and its
//! expectations.

use std::{collections::BTreeMap, fs, path::Path, sync::OnceLock};

use anyhow::{bail, Context, Result};
use serde::Deserialize;

use crate::{exit, guest::job::WriteKind};

/// The scenarios' folder, relative to the repository root.
pub const DIR: &str = "qemu/scenarios";

/// A scenario's floor file (`results::floor`): measured on the host, read
/// on the host; never packed into the guest (its bytes would move every
/// boot's timing each time a floor is measured again).
pub const FLOOR_FILE: &str = "floor.toml";

#[derive(Debug, Clone, Copy, PartialEq)]
pub struct Scenario {
    pub name: &'static str,
    /// The folder whose `run.sh` the guest runs (`wbstall.scenario`): the
    /// scenario's own, or for a point of `cargo xtask hunt` the hunt's.
    pub script: &'static str,
    pub what: &'static str,
    /// Whether the guest needs the ext4 disk image (virtio-blk).
    pub disk: bool,
    /// Whether the first run also proves that the bytes go through (fio verify
    /// on a data-keeping FUSE mount).
    pub verify: bool,
    /// The writer's BDI has `strict_limit` set (checked in every run, by the
    /// BDI's sysfs knob and by the module).
    pub strictlimit: bool,
    /// Per-job file size (fio --size) unless --size says otherwise.
    pub size: &'static str,
    /// fio's `invalidate`: whether fio drops each file's page cache when it
    /// opens it, i.e. at every loop of a time-based job. On ext4 7.3 that
    /// `posix_fadvise(DONTNEED)` writes the file back in fio's own process,
    /// which is writeback nobody's throttle or flusher asked for.
    pub invalidate: bool,
    /// fio's writers (`numjobs`), which --numjobs does not change (a hunt's
    /// point sets them); None: --numjobs's (4, the seed's).
    pub numjobs: Option<u32>,
    /// How the writers write (`write`): the seed's `write(2)`s by default.
    pub write: WriteKind,
    /// The kernel's timer cycles the measurement's start is spread over
    /// (`[phase]`): run k of a cell starts at an offset into their common
    /// cycle, the same for every variant. None: started when set up.
    pub phase: Option<PhaseCycles>,
    /// In a plan that names no scenario (`default = false`: only when named).
    pub in_default_plan: bool,
    /// More `wbstall.*` parameters for the guest script.
    pub params: &'static [(&'static str, &'static str)],
    /// The measured run-to-run standard deviation of a cell's MiB/s on the
    /// virtual clock, in % of its mean (`[floor] virtual_sd_pct`): how many
    /// runs a cell needs follows from it. None: not measured.
    pub floor_sd_pct: Option<f64>,
}

/// `[phase]` of `scenario.toml`: the periods, in ms, of the kernel's timers
/// that decide where in a run a wait ends (the memcg's statistics refresh,
/// `FLUSH_TIME` = 2 s; the flusher's `dirty_writeback_centisecs` = 5 s).
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct PhaseCycles {
    pub cycles_ms: &'static [u32],
}

impl PhaseCycles {
    /// Their common cycle: the least common multiple.
    pub fn cycle_ms(&self) -> u32 {
        fn gcd(a: u32, b: u32) -> u32 {
            if b == 0 {
                a
            } else {
                gcd(b, a % b)
            }
        }
        self.cycles_ms.iter().fold(1, |l, &c| l / gcd(l, c) * c)
    }
}

#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct PhaseToml {
    cycles_ms: Vec<u32>,
}

/// `[floor]` of `scenario.toml`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct FloorToml {
    virtual_sd_pct: f64,
}

/// `scenario.toml`.
#[derive(Debug, Deserialize)]
#[serde(deny_unknown_fields)]
struct ScenarioToml {
    /// Where the scenario comes in plans and reports (lowest first).
    order: u32,
    /// false: not a measurement (module-stress's cycles); qemu-test never runs it.
    #[serde(default = "yes")]
    measured: bool,
    /// false: measured only when named (`--scenario NAME`).
    #[serde(default = "yes")]
    default: bool,
    what: String,
    disk: bool,
    verify: bool,
    strictlimit: bool,
    size: String,
    invalidate: bool,
    #[serde(default)]
    numjobs: Option<u32>,
    #[serde(default)]
    write: WriteKind,
    #[serde(default)]
    phase: Option<PhaseToml>,
    #[serde(default)]
    params: BTreeMap<String, String>,
    #[serde(default)]
    floor: Option<FloorToml>,
}

fn yes() -> bool {
    true
}

/// A scenario name is a directory name and a kernel parameter value.
fn valid_name(name: &str) -> bool {
    !name.is_empty()
        && name
            .chars()
            .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
}

/// Every scenario under `dir`, in `order`, with whether it is measured.
/// The registry lives for the whole process, so its text is leaked once.
pub fn load_dir(dir: &Path) -> Result<Vec<(Scenario, bool)>> {
    let leak = |s: String| -> &'static str { Box::leak(s.into_boxed_str()) };
    let mut out = Vec::new();
    let mut entries: Vec<_> = fs::read_dir(dir)
        .with_context(|| format!("listing {}", dir.display()))?
        .flatten()
        .map(|e| e.path())
        .collect();
    entries.sort();
    for path in entries {
        let name = crate::util::file_name(&path);
        if !path.is_dir() {
            bail!(
                "{}: only scenario folders belong in {} (each with scenario.toml and run.sh)",
                path.display(),
                dir.display()
            );
        }
        if !valid_name(&name) {
            bail!(
                "{}: a scenario name uses only a-z, 0-9 and `-`",
                path.display()
            );
        }
        let toml_path = path.join("scenario.toml");
        let text = fs::read_to_string(&toml_path)
            .with_context(|| format!("reading {} (every scenario has one)", toml_path.display()))?;
        let t: ScenarioToml = toml::from_str(&text)
            .with_context(|| format!("{} is not a valid scenario.toml", toml_path.display()))?;
        if !path.join("run.sh").is_file() {
            bail!("{}: no run.sh (the guest script)", path.display());
        }
        let params: Vec<(&'static str, &'static str)> = t
            .params
            .into_iter()
            .map(|(k, v)| (leak(k), leak(v)))
            .collect();
        let phase = match t.phase {
            Some(p) if p.cycles_ms.is_empty() || p.cycles_ms.contains(&0) => bail!(
                "{}: [phase] cycles_ms needs one or more periods in ms, none of them 0",
                toml_path.display()
            ),
            Some(p) => Some(PhaseCycles {
                cycles_ms: Box::leak(p.cycles_ms.into_boxed_slice()),
            }),
            None => None,
        };
        let name = leak(name);
        let scenario = Scenario {
            name,
            script: name,
            what: leak(t.what),
            disk: t.disk,
            verify: t.verify,
            strictlimit: t.strictlimit,
            size: leak(t.size),
            invalidate: t.invalidate,
            numjobs: t.numjobs,
            write: t.write,
            phase,
            in_default_plan: t.default,
            params: Box::leak(params.into_boxed_slice()),
            floor_sd_pct: t.floor.map(|f| f.virtual_sd_pct),
        };
        out.push((t.order, scenario, t.measured));
    }
    out.sort_by_key(|(order, s, _)| (*order, s.name));
    Ok(out.into_iter().map(|(_, s, m)| (s, m)).collect())
}

/// Every scenario of the repository, measured or not.
fn registry() -> Result<&'static [(Scenario, bool)]> {
    static ALL: OnceLock<std::result::Result<Vec<(Scenario, bool)>, String>> = OnceLock::new();
    ALL.get_or_init(|| {
        load_dir(&crate::util::project_root().join(DIR)).map_err(|e| format!("{e:#}"))
    })
    .as_ref()
    .map(Vec::as_slice)
    .map_err(|e| anyhow::anyhow!("{e}"))
}

/// The scenarios qemu-test measures, in order.
pub fn all() -> Result<Vec<Scenario>> {
    Ok(registry()?
        .iter()
        .filter(|(_, m)| *m)
        .map(|(s, _)| *s)
        .collect())
}

/// A measured scenario by name.
pub fn by_name(name: &str) -> Result<Scenario> {
    let all = all()?;
    match all.iter().find(|s| s.name == name) {
        Some(s) => Ok(*s),
        None => bail!(exit::usage(format!(
            "unknown scenario `{name}`; known scenarios ({DIR}): {}",
            all.iter().map(|s| s.name).collect::<Vec<_>>().join(", ")
        ))),
    }
}

/// Any scenario by name, measured or not (module-stress's, bench-fuse's).
pub fn any(name: &str) -> Result<Scenario> {
    match registry()?.iter().find(|(s, _)| s.name == name) {
        Some((s, _)) => Ok(*s),
        None => bail!(exit::usage(format!("no scenario `{name}` in {DIR}"))),
    }
}

/// The selected scenarios; by default those in the default plan.
pub fn select(names: &[String]) -> Result<Vec<Scenario>> {
    if names.is_empty() {
        return Ok(all()?.into_iter().filter(|s| s.in_default_plan).collect());
    }
    names.iter().map(|n| by_name(n)).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_repository_scenarios_load_in_order() {
        let names: Vec<&str> = all().unwrap().iter().map(|s| s.name).collect();
        assert_eq!(
            names,
            [
                "fuse-strictlimit",
                "fuse-nostrict",
                "memcg-ext4",
                "ext4-global",
                "fuse-passthrough",
                "memcg-fadvise",
                "memcg-stale-stats"
            ]
        );
        // A plan that names none gets those of the default plan; the others
        // only when named.
        let plan: Vec<&str> = select(&[]).unwrap().iter().map(|s| s.name).collect();
        assert_eq!(plan, &names[..4]);
        let named = select(&["fuse-passthrough".into()]).unwrap();
        assert!(named[0].strictlimit && !named[0].in_default_plan);
        let memcg = by_name("memcg-ext4").unwrap();
        assert!(memcg.disk && !memcg.strictlimit);
        assert_eq!(memcg.params, [("memcg_max", "256M")]);
        // No fio-side flushes; runs spread over the 2 s and 5 s timers.
        assert!(!memcg.invalidate);
        let phase = memcg.phase.unwrap();
        assert_eq!(
            (phase.cycles_ms, phase.cycle_ms()),
            (&[2000, 5000][..], 10_000)
        );
        assert!(by_name("memcg-fadvise").unwrap().invalidate);
        // FUSE's runs spread over a second (the vmstat fold, round_jiffies).
        let fuse = by_name("fuse-strictlimit").unwrap().phase.unwrap();
        assert_eq!(fuse.cycles_ms, &[1000][..]);
        // module-stress's scenario is there, but never measured.
        assert!(registry()
            .unwrap()
            .iter()
            .any(|(s, m)| s.name == "module-cycles" && !m));
        assert!(by_name("module-cycles").is_err());
    }

    #[test]
    fn every_scenario_script_defines_or_sources_scenario_run() {
        for (s, _) in registry().unwrap() {
            let path = crate::util::project_root()
                .join(DIR)
                .join(s.name)
                .join("run.sh");
            let text = fs::read_to_string(&path).unwrap();
            let base = text
                .lines()
                .find_map(|l| l.strip_prefix(". \"$WB_ROOT/scenarios/"))
                .map(|f| f.trim_end_matches('"'))
                .map(|f| {
                    fs::read_to_string(crate::util::project_root().join(DIR).join(f))
                        .unwrap_or_default()
                });
            assert!(
                text.contains("scenario_run()")
                    || base.is_some_and(|b| b.contains("scenario_run()")),
                "{} defines no scenario_run",
                path.display()
            );
        }
    }

    #[test]
    fn a_bad_scenario_folder_is_an_error_that_names_it() {
        let t = crate::util::testdir::Dir::new("scenarios");
        let d = t.path().join("nfs-wb");
        fs::create_dir_all(&d).unwrap();
        let e = format!("{:#}", load_dir(t.path()).unwrap_err());
        assert!(
            e.contains("nfs-wb/scenario.toml") && e.contains("every scenario has one"),
            "{e}"
        );
        fs::write(
            d.join("scenario.toml"),
            "order = 1\nwhat = \"x\"\ndisk = false\nverify = false\nstrictlimit = false\nsize = \"1M\"\ninvalidate = true\n",
        )
        .unwrap();
        let e = format!("{:#}", load_dir(t.path()).unwrap_err());
        assert!(e.contains("no run.sh"), "{e}");
        fs::write(d.join("run.sh"), "scenario_run() { :; }\n").unwrap();
        // A phase needs its timers' periods.
        for bad in [
            "[phase]\ncycles_ms = []\n",
            "[phase]\ncycles_ms = [2000, 0]\n",
        ] {
            fs::write(
                d.join("scenario.toml"),
                format!("order = 1\nwhat = \"x\"\ndisk = false\nverify = false\nstrictlimit = false\nsize = \"1M\"\ninvalidate = true\n{bad}"),
            )
            .unwrap();
            let e = format!("{:#}", load_dir(t.path()).unwrap_err());
            assert!(e.contains("cycles_ms needs one or more periods"), "{e}");
        }
        fs::write(d.join("run.sh"), "scenario_run() { :; }\n").unwrap();
        fs::write(d.join("scenario.toml"), "order = 1\nwaht = \"x\"\n").unwrap();
        let e = format!("{:#}", load_dir(t.path()).unwrap_err());
        assert!(
            e.contains("not a valid scenario.toml") && e.contains("unknown field"),
            "{e}"
        );
        fs::write(t.path().join("stray.sh"), "").unwrap();
        fs::remove_dir_all(&d).unwrap();
        let e = format!("{:#}", load_dir(t.path()).unwrap_err());
        assert!(e.contains("only scenario folders"), "{e}");
    }

    #[test]
    fn unknown_scenarios_list_the_known_ones() {
        let e = by_name("nfs").unwrap_err().to_string();
        assert!(
            e.contains("unknown scenario `nfs`") && e.contains("fuse-strictlimit"),
            "{e}"
        );
        let default = all().unwrap().iter().filter(|s| s.in_default_plan).count();
        assert_eq!(select(&[]).unwrap().len(), default);
    }
}
