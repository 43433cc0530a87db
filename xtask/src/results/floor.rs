//! A scenario's floor: how far one run of a kernel moves when nothing but
//! its start moves, measured once per job, clock and machine, and kept
//! beside the scenario (`qemu/scenarios/<name>/floor.toml`, written by
//! `cargo xtask calibrate`).
//!
//! On the virtual clock a boot is a function of its kernel, its settings
//! and the point of the kernel's timers its measurement starts at: two
//! boots at one start agree to 0.1 MiB/s, and a patch that changes nothing
//! but its own instructions moves every later event as a new start would.
//! So the floor is the spread of one kernel's runs started across the
//! scenario's phase cycle (a pool of many runs, each kept with its phase),
//! per judged metric, on the log scale. A session records the floors it is
//! judged by (`Session::floors`), or why a scenario has none; costs are
//! judged against them (`analysis::cost`), by the metrics it names.

use std::{collections::BTreeMap, path::PathBuf};

use anyhow::{Context, Result};
use serde::{Deserialize, Serialize};

use crate::guest::{disk::Disk, job::Job, qemu::Clock};

/// The floor file in a scenario's folder.
pub const FILE: &str = crate::guest::scenario::FLOOR_FILE;

/// What a floor holds for: the job, the clock and the guest machine of its
/// runs. A session judges costs by a floor only where all of these are its own.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Conditions {
    pub job: Job,
    pub clock: Clock,
    pub cpus: u32,
    pub memory_mib: u32,
    pub cpu_model: String,
    /// The disk under the scenario's file system, where it has one.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub disk: Option<Disk>,
}

/// One run of a pool: where it started and its judged metrics' values.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct PoolRun {
    /// Its start, ms into the scenario's phase cycle.
    pub phase_ms: u32,
    #[serde(flatten)]
    pub values: BTreeMap<String, f64>,
}

/// Runs of one kernel in one scenario under one set of conditions, started
/// across the phase cycle.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Pool {
    pub scenario: String,
    pub conditions: Conditions,
    /// Which kernel ran: `<variant> (<its source>)`.
    pub kernel: String,
    /// The results directory and the day it was measured.
    pub results: String,
    pub measured: String,
    pub runs: Vec<PoolRun>,
}

impl Conditions {
    /// The conditions of a run of `job` on `machine`, over `disk` where its
    /// scenario has one.
    pub fn of(job: Job, machine: &crate::guest::qemu::Machine, disk: Option<Disk>) -> Conditions {
        Conditions {
            job,
            clock: machine.clock,
            cpus: machine.cpus,
            memory_mib: machine.memory_mib,
            cpu_model: machine.cpu_model.clone(),
            disk,
        }
    }
}

impl Pool {
    /// The values of `key` over the pool's runs that have one.
    pub fn values(&self, key: &str) -> Vec<f64> {
        self.runs
            .iter()
            .filter_map(|r| r.values.get(key).copied())
            .collect()
    }

    /// One run's spread of `key`: the sample standard deviation of its
    /// logs; None with fewer than 3 runs or a value that is not positive.
    pub fn sd(&self, key: &str) -> Option<f64> {
        log_sd(&self.values(key))
    }

    /// The floor this pool gives: the spread of each metric of `keys`; an
    /// error names a metric it lacks.
    pub fn floor(&self, scenario: &str, keys: &[&str]) -> Result<Floor, String> {
        let mut sd = BTreeMap::new();
        for &key in keys {
            let s = self.sd(key).ok_or_else(|| {
                format!(
                    "{scenario}'s floor ({}) has no spread of {key} (3 runs with a positive \
                     value needed): measure it again with `cargo xtask calibrate`",
                    self.results
                )
            })?;
            sd.insert(key.to_string(), s);
        }
        Ok(Floor {
            runs: self.runs.len(),
            source: format!(
                "{} runs of {} across the phase cycle, {} ({})",
                self.runs.len(),
                self.kernel,
                self.results,
                self.measured
            ),
            sd,
        })
    }
}

/// The sample standard deviation of the logs of `v` (None for fewer than 3
/// values or one that is not positive).
pub fn log_sd(v: &[f64]) -> Option<f64> {
    if v.len() < 3 || v.iter().any(|&x| x <= 0.0) {
        return None;
    }
    let logs: Vec<f64> = v.iter().map(|x| x.ln()).collect();
    let mean = logs.iter().sum::<f64>() / logs.len() as f64;
    let ss: f64 = logs.iter().map(|l| (l - mean).powi(2)).sum();
    Some((ss / (logs.len() - 1) as f64).sqrt())
}

/// A scenario's floor file: its pools, one per set of conditions.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FloorFile {
    #[serde(default)]
    pub pool: Vec<Pool>,
}

/// The first line of every floor file.
pub const HEADER: &str =
    "# Generated by `cargo xtask calibrate`: one pool of runs per job, clock and machine \
(docs/measurements.md, \"The cost verdict\"). Do not edit; calibrate again to measure anew.\n";

impl FloorFile {
    pub fn parse(text: &str, what: &str) -> Result<FloorFile> {
        toml::from_str(text).with_context(|| {
            format!("{what} is not a floor file: write it again with `cargo xtask calibrate`")
        })
    }

    pub fn render(&self) -> Result<String> {
        Ok(format!(
            "{HEADER}\n{}",
            toml::to_string(self).context("writing a floor file")?
        ))
    }

    /// The pool of `scenario` measured under `c`, if any.
    pub fn under(&self, scenario: &str, c: &Conditions) -> Option<&Pool> {
        (self.pool.iter()).find(|p| p.scenario == scenario && &p.conditions == c)
    }

    /// Puts `pool` in, in place of one of its scenario under the same
    /// conditions.
    pub fn replace(&mut self, pool: Pool) {
        (self.pool).retain(|p| p.scenario != pool.scenario || p.conditions != pool.conditions);
        self.pool.push(pool);
    }
}

/// The floor file of scenario `name`.
pub fn path_of(name: &str) -> PathBuf {
    crate::util::project_root()
        .join(crate::guest::scenario::DIR)
        .join(name)
        .join(FILE)
}

/// The floor file of scenario `name`; empty where it has none yet.
pub fn load(name: &str) -> Result<FloorFile> {
    let path = path_of(name);
    match std::fs::read_to_string(&path) {
        Ok(text) => FloorFile::parse(&text, &path.display().to_string()),
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => Ok(FloorFile::default()),
        Err(e) => Err(e).with_context(|| format!("reading {}", path.display())),
    }
}

/// What a session judges a scenario's costs by: every judged metric's
/// spread of one run (log scale), and where it was measured.
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
pub struct Floor {
    pub runs: usize,
    pub source: String,
    pub sd: BTreeMap<String, f64>,
}

/// A scenario's floor in a session, or why it has none (its costs are then
/// not judged, and the reports say why).
#[derive(Debug, Clone, PartialEq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum FloorOf {
    Measured(Floor),
    None(String),
}

/// The floor scenario `name` is judged by under `c`, of the metrics `keys`:
/// its pool under those conditions, or why none holds (the real clock, a
/// job or machine never measured).
pub fn of(name: &str, c: &Conditions, keys: &[&str]) -> Result<FloorOf> {
    if c.clock == Clock::Real {
        return Ok(FloorOf::None(
            "the real clock has no floor (its runs move with the host's load, points \
             apart): costs are judged on the virtual clock only"
                .into(),
        ));
    }
    let file = load(name)?;
    Ok(match file.under(name, c) {
        Some(pool) => match pool.floor(name, keys) {
            Ok(f) => FloorOf::Measured(f),
            Err(why) => FloorOf::None(why),
        },
        None => FloorOf::None(format!(
            "no floor measured for this job and machine ({} s + {} s, {} writers, {} CPUs, \
             {} MiB, clock {}): `cargo xtask calibrate` with the same flags measures one",
            c.job.ramp_time, c.job.runtime, c.job.numjobs, c.cpus, c.memory_mib, c.clock
        )),
    })
}

/// The floor of each scenario of a session (its name, job and whether it
/// runs on the machine's disk) on `machine`, of the metrics `keys`, or why
/// it has none.
pub fn of_each<'a>(
    scenarios: impl IntoIterator<Item = (&'a str, &'a Job, bool)>,
    machine: &crate::guest::qemu::Machine,
    keys: &[&str],
) -> Result<BTreeMap<String, FloorOf>> {
    scenarios
        .into_iter()
        .map(|(name, job, disk)| {
            let c = Conditions::of(job.clone(), machine, disk.then_some(machine.disk));
            Ok((name.to_string(), of(name, &c, keys)?))
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    const KEYS: &[&str] = &["fio.write_bw_MiB/s", "fio.clat_p99_ms"];

    pub fn conditions() -> Conditions {
        Conditions {
            job: Job::new("256M", 4, (2, 5)),
            clock: Clock::Virtual { shift: 3 },
            cpus: 2,
            memory_mib: 2048,
            cpu_model: "qemu64".into(),
            disk: None,
        }
    }

    fn pool(bw: &[f64]) -> Pool {
        Pool {
            scenario: "fuse-nostrict".into(),
            conditions: conditions(),
            kernel: "upstream (test)".into(),
            results: "20261206T000000Z".into(),
            measured: "2026-12-06".into(),
            runs: bw
                .iter()
                .enumerate()
                .map(|(i, &b)| PoolRun {
                    phase_ms: i as u32 * 100,
                    values: KEYS
                        .iter()
                        .enumerate()
                        .map(|(k, key)| (key.to_string(), b * (1.0 + k as f64)))
                        .collect(),
                })
                .collect(),
        }
    }

    #[test]
    fn a_pool_gives_every_judged_metric_its_spread() {
        let f = pool(&[50.0, 51.0, 49.0, 50.5])
            .floor("fuse-nostrict", KEYS)
            .unwrap();
        assert_eq!(f.runs, 4);
        assert_eq!(f.sd.len(), KEYS.len());
        let sd = f.sd["fio.write_bw_MiB/s"];
        assert!(sd > 0.01 && sd < 0.02, "{sd}");
        assert!(
            f.source.contains("4 runs of upstream (test)"),
            "{}",
            f.source
        );
    }

    #[test]
    fn a_pool_too_small_or_without_a_metric_gives_no_floor() {
        let e = pool(&[50.0, 51.0])
            .floor("fuse-nostrict", KEYS)
            .unwrap_err();
        assert!(e.contains("3 runs") && e.contains("calibrate"), "{e}");
        let mut p = pool(&[50.0, 51.0, 49.0]);
        for r in &mut p.runs {
            r.values.remove("fio.clat_p99_ms");
        }
        assert!(p.floor("x", KEYS).unwrap_err().contains("fio.clat_p99_ms"));
    }

    #[test]
    fn a_floor_file_round_trips_and_finds_its_pool_by_conditions() {
        let mut f = FloorFile::default();
        f.replace(pool(&[50.0, 51.0, 49.0]));
        let text = f.render().unwrap();
        assert!(text.starts_with("# Generated by `cargo xtask calibrate`"));
        let back = FloorFile::parse(&text, "t").unwrap();
        assert_eq!(back, f);
        assert!(back.under("fuse-nostrict", &conditions()).is_some());
        assert!(back.under("ext4-global", &conditions()).is_none());
        let mut other = conditions();
        other.job = Job::new("256M", 4, (5, 20));
        assert!(back.under("fuse-nostrict", &other).is_none());
        // A new pool under the same conditions replaces the old one.
        f.replace(pool(&[40.0, 41.0, 39.0]));
        assert_eq!(f.pool.len(), 1);
        let first = |p: &Pool| p.values("fio.write_bw_MiB/s")[0];
        assert_eq!(first(&f.pool[0]), first(&pool(&[40.0])));
    }

    #[test]
    fn the_real_clock_and_an_unmeasured_job_have_no_floor_and_say_how_to_get_one() {
        let mut c = conditions();
        c.clock = Clock::Real;
        let FloorOf::None(why) = of("fuse-nostrict", &c, KEYS).unwrap() else {
            panic!("the real clock has a floor");
        };
        assert!(why.contains("real clock"), "{why}");
        let mut c = conditions();
        c.job = Job::new("256M", 4, (2, 77));
        let FloorOf::None(why) = of("fuse-nostrict", &c, KEYS).unwrap() else {
            panic!("a 77 s job has a floor");
        };
        assert!(why.contains("cargo xtask calibrate"), "{why}");
    }

    #[test]
    fn a_broken_floor_file_is_refused_with_the_fix() {
        let e = FloorFile::parse("pool = 3", "qemu/scenarios/x/floor.toml").unwrap_err();
        assert!(format!("{e:#}").contains("calibrate"), "{e:#}");
    }
}
