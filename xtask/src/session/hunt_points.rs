//! What a hunt writes: every point (`points.tsv`), each point that held as
//! a scenario folder with its held window (`found/`), and its summary.

use std::{
    fmt::Write as _,
    fs,
    path::{Path, PathBuf},
};

use anyhow::{Context, Result};

use crate::{
    analysis::held::{point_held, HeldBy, PointHeld, RunHeld},
    guest::{
        scenario::Scenario,
        space::{Settings, Space, SpacePoint},
    },
};

/// One evaluated point.
#[derive(Debug, Clone)]
pub struct Eval {
    pub name: String,
    /// Its values in the space (a minimising point: the one it relaxes).
    pub point: SpacePoint,
    /// The kernel it was booted on.
    pub variant: String,
    pub settings: Settings,
    pub runs: Vec<RunHeld>,
    /// Each run's sleeps file (`results::sleeps`), in the session.
    pub sleeps: Vec<Option<String>>,
    pub held: PointHeld,
    /// The session that booted it.
    pub session: PathBuf,
    /// Its Slurm task ended without a session: why, and its log.
    pub lost: Option<String>,
}

impl Eval {
    /// A point whose boots left nothing to judge: not held, and kept.
    pub fn lost(
        named: &(String, SpacePoint, Settings),
        variant: &str,
        why: String,
        runs: u32,
    ) -> Eval {
        let (name, point, settings) = named.clone();
        Eval {
            name,
            point,
            variant: variant.to_string(),
            settings,
            runs: Vec::new(),
            sleeps: Vec::new(),
            held: point_held(&[], runs, 1.0),
            session: PathBuf::new(),
            lost: Some(why),
        }
    }
}

/// Every evaluated point, a line each.
pub const POINTS_FILE: &str = "points.tsv";

fn pct(x: f64) -> String {
    format!("{:.1}", 100.0 * x)
}

fn runs_of(e: &Eval, f: impl Fn(&RunHeld) -> String) -> String {
    e.runs.iter().map(f).collect::<Vec<_>>().join(",")
}

/// The progress line of an evaluated point.
pub fn line(e: &Eval) -> String {
    format!(
        "hunt: {} on {} held {}% ({}) {} [{}]",
        e.name,
        e.variant,
        pct(e.held.score),
        runs_of(e, |r| if r.evidence() {
            pct(r.held())
        } else {
            "x".into()
        }),
        match (&e.lost, e.held.holds, e.held.mechanism) {
            (Some(why), _, _) => format!("LOST: {why}"),
            (None, true, Some(m)) => format!("HOLDS: {}", m.name()),
            _ => "-".into(),
        },
        e.settings
    )
}

pub fn write_points(dir: &Path, evals: &[Eval]) -> Result<()> {
    let mut out = String::from(
        "# point\tholds\tmechanism\tscore_pct\theld_pct\tunrequested_pct\tdeclined_pct\t\
         in_flight_pct\tmodule_stall_pct\ttrace_stall_pct\tmib_s\tmax_call_ms\tproblems\t\
         session\tsettings\n",
    );
    for e in evals {
        let _ = writeln!(
            out,
            "{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}\t{}",
            e.name,
            e.held.holds,
            e.held.mechanism.map_or("-", HeldBy::name),
            pct(e.held.score),
            runs_of(e, |r| pct(r.held())),
            runs_of(e, |r| pct(r.unrequested)),
            runs_of(e, |r| pct(r.declined)),
            runs_of(e, |r| pct(r.in_flight)),
            runs_of(e, |r| pct(r.stall)),
            runs_of(e, |r| r.trace_stall.map_or("-".into(), pct)),
            runs_of(e, |r| format!("{:.2}", r.mib_s)),
            runs_of(e, |r| r.max_call_ms.to_string()),
            match &e.lost {
                Some(why) => format!("lost: {why}"),
                None => runs_of(e, |r| r.problems.len().to_string()),
            },
            e.session
                .file_name()
                .map_or_else(String::new, |n| n.to_string_lossy().into_owned()),
            e.settings
        );
    }
    let file = dir.join(POINTS_FILE);
    fs::write(&file, out).with_context(|| format!("writing {}", file.display()))
}

/// Each point that held, as a scenario folder to copy into qemu/scenarios/
/// (its run.sh runs the hunt's script with its settings), best first.
pub fn write_found(dir: &Path, evals: &[Eval], space: &Space) -> Result<Vec<PathBuf>> {
    let mut held: Vec<&Eval> = evals.iter().filter(|e| e.held.holds).collect();
    held.sort_by(|a, b| b.held.score.total_cmp(&a.held.score));
    let mut out = Vec::new();
    for e in held {
        let d = dir.join("found").join(&e.name);
        fs::create_dir_all(&d).with_context(|| format!("creating {}", d.display()))?;
        let scen = space.scenario(&e.name, &e.settings)?;
        fs::write(d.join("scenario.toml"), scenario_toml(e, &scen))
            .with_context(|| format!("writing {}/scenario.toml", d.display()))?;
        fs::write(d.join("run.sh"), RUN_SH)
            .with_context(|| format!("writing {}/run.sh", d.display()))?;
        fs::write(d.join(WINDOW_FILE), held_window(e)?)
            .with_context(|| format!("writing {}/{WINDOW_FILE}", d.display()))?;
        out.push(d);
    }
    Ok(out)
}

/// A found point's held window: the trace's sleeps of it.
const WINDOW_FILE: &str = "held-window.txt";

/// The longest streak of stall sleeps in the run that held most, as the
/// tracefs detector classed them (`results::sleeps`), 16 lines at most, and
/// the file it comes from.
fn held_window(e: &Eval) -> Result<String> {
    let best = (0..e.runs.len())
        .filter(|&i| e.runs[i].evidence())
        .max_by(|&a, &b| e.runs[a].held().total_cmp(&e.runs[b].held()))
        .context("a found point has no run that is evidence")?;
    let file = (e.sleeps.get(best).cloned().flatten())
        .map(|f| e.session.join(f))
        .with_context(|| format!("{} run {}: no sleeps file", e.name, best + 1))?;
    let text = fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?;
    let lines: Vec<&str> = text.lines().collect();
    let (mut from, mut len, mut at) = (0, 0, 0);
    for (i, l) in lines.iter().enumerate() {
        if !l.contains(" stall:") {
            at = i + 1;
        } else if i + 1 - at > len {
            (from, len) = (at, i + 1 - at);
        }
    }
    let mut out = format!(
        "# {}: the longest streak of stall sleeps of run {} ({} sleeps; the first 16), from\n\
         # {}\n{}\n",
        e.name,
        best + 1,
        len,
        file.display(),
        lines.first().copied().unwrap_or_default()
    );
    for l in lines.iter().skip(from).take(len.min(16)) {
        let _ = writeln!(out, "{l}");
    }
    Ok(out)
}

const RUN_SH: &str = "# SPDX-License-Identifier: GPL-2.0\n\
# A point `cargo xtask hunt` found: the hunt's script with the settings of\n\
# scenario.toml's [params]. Sourced by /init; defines scenario_run.\n\
# shellcheck source=../hunt/run.sh\n\
. \"$WB_ROOT/scenarios/hunt/run.sh\"\n";

/// A found point's scenario.toml: what it measured, and the scenario it was
/// booted as (`Space::scenario`).
fn scenario_toml(e: &Eval, scen: &Scenario) -> String {
    let cycles: Vec<String> = (scen.phase.iter())
        .flat_map(|p| p.cycles_ms.iter().map(u32::to_string))
        .collect();
    let mut out = format!(
        "# Found by `cargo xtask hunt` ({}): held with nothing in flight {}% of the\n\
         # writers' time (mean of {} runs: {}%), {}; module stall {}%, trace {}%,\n\
         # {} MiB/s, longest call {} ms. {}\n\
         order = 200\ndefault = false\n\
         what = \"{}\"\ndisk = {}\nverify = false\nstrictlimit = {}\nsize = \"{}\"\n\
         invalidate = {}\n{}write = \"{}\"\n\n[phase]\ncycles_ms = [{}]\n\n[params]\n",
        e.session.display(),
        pct(e.held.score),
        e.runs.len(),
        runs_of(e, |r| pct(r.held())),
        e.held.mechanism.map_or("-", HeldBy::name),
        runs_of(e, |r| pct(r.stall)),
        runs_of(e, |r| r.trace_stall.map_or("-".into(), pct)),
        runs_of(e, |r| format!("{:.2}", r.mib_s)),
        runs_of(e, |r| r.max_call_ms.to_string()),
        e.held.mechanism.map_or("", HeldBy::known_as),
        scen.what,
        scen.disk,
        scen.strictlimit,
        scen.size,
        scen.invalidate,
        scen.numjobs
            .map_or(String::new(), |n| format!("numjobs = {n}\n")),
        scen.write.name(),
        cycles.join(", "),
    );
    for (k, v) in scen.params {
        let _ = writeln!(out, "{k} = \"{v}\"");
    }
    out
}

pub fn summary(
    dir: &Path,
    evals: &[Eval],
    spent: u32,
    stop_at: Option<HeldBy>,
    found: Vec<PathBuf>,
) -> String {
    let mut out = format!(
        "\nhunt: {} points, {spent} boots{}; {} held. Every point: {}\n",
        evals.len(),
        stop_at.map_or(String::new(), |c| format!(
            " (until one held by `{}`)",
            c.name()
        )),
        found.len(),
        dir.join(POINTS_FILE).display()
    );
    let mut best: Vec<&Eval> = evals.iter().collect();
    best.sort_by(|a, b| b.held.score.total_cmp(&a.held.score));
    for e in best.iter().take(5) {
        let _ = writeln!(out, "  {}", line(e).trim_start_matches("hunt: "));
        if let Some(c) = e.held.mechanism.filter(|_| e.held.holds) {
            let _ = writeln!(out, "    {}", c.known_as());
        }
    }
    for d in found {
        let _ = writeln!(out, "  found: {}", d.display());
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        analysis::held::HeldDomain,
        guest::{scenario, space},
        util,
    };

    fn run(held: f64) -> RunHeld {
        RunHeld {
            problems: Vec::new(),
            unrequested: held,
            declined: 0.0,
            in_flight: 0.0,
            stall: held,
            trace_stall: Some(held),
            mib_s: 8.0,
            max_call_ms: 4500,
            domain: HeldDomain::Strictlimit,
        }
    }

    /// A found point is a scenario folder the repository's loader reads,
    /// and its held window is the longest streak of stall sleeps.
    #[test]
    fn a_found_point_is_a_scenario_folder_with_its_held_window() {
        let t = util::testdir::Dir::new("hunt-found");
        let session = t.path().join("session");
        fs::create_dir_all(&session).unwrap();
        let sleeps =
            "# wbstall sleeps 2: start_s pid pause_ms paused_ms class asleep_us off_cpu_us\n\
                      1.000000 300 8 0 stall:unrequested 9000 -\n\
                      1.010000 300 8 0 flushing 9000 -\n\
                      1.020000 300 8 0 stall:unrequested 9000 -\n\
                      1.030000 301 8 0 stall:unrequested 9000 -\n";
        fs::write(session.join("s.sleeps.txt"), sleeps).unwrap();
        let space = space::Space::load(
            &util::project_root().join(space::SPACE_FILE),
            scenario::any(space::SCRIPT).unwrap(),
        )
        .unwrap();
        let point = vec![1; space.dims.len()];
        let e = Eval {
            name: "hunt-004".into(),
            point: point.clone(),
            variant: "regressed".into(),
            settings: space.settings(&point),
            runs: vec![run(0.1), run(0.4)],
            sleeps: vec![None, Some("s.sleeps.txt".into())],
            held: PointHeld {
                score: 0.25,
                holds: true,
                mechanism: Some(HeldBy::Strictlimit),
            },
            session,
            lost: None,
        };
        let found = write_found(t.path(), std::slice::from_ref(&e), &space).unwrap();
        assert_eq!(found, [t.path().join("found/hunt-004")]);
        let loaded = scenario::load_dir(&t.path().join("found")).unwrap();
        assert_eq!(loaded[0].0.name, "hunt-004");
        assert_eq!(loaded[0].0.params.len(), space.script.params.len());
        let window = fs::read_to_string(found[0].join(WINDOW_FILE)).unwrap();
        assert!(window.contains("run 2 (2 sleeps"), "{window}");
        assert!(
            window.contains("1.030000 301") && !window.contains("1.000000"),
            "{window}"
        );
        // A point none of whose runs is evidence has no window to show.
        let mut bad = e.clone();
        bad.runs
            .iter_mut()
            .for_each(|r| r.problems.push("a warning".into()));
        assert!(held_window(&bad).is_err());
    }
}
