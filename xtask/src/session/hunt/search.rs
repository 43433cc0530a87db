//! The hunt's search of the throttle's settings for writers held with
//! nothing to wait for (`analysis::held`), over the space of
//! `qemu/hunt.toml` (`guest::space`), on one kernel. Each round boots a batch of
//! points as one `qemu-test` session (its own results directory under the
//! hunt's), every run at another start phase; every evaluated point is kept
//! in `points.tsv`, and each point that holds is written out as a scenario
//! folder ready for `qemu/scenarios/` (`found/`).
//!
//! The strategy: random points first (the stalls we know live in regions, a
//! file system and a domain, not at one value: a random point lands in a
//! region that a one-step climb from a point outside it would not reach),
//! then, once a point has held time but does not hold, a first-improvement
//! climb from the best such point, a dimension at a time, alternating with
//! random points (the objective is flat at 0 over most of the space: there
//! is no slope to climb there). A mechanism that has held at a point is
//! found: the search moves on, climbing only towards mechanisms still
//! sought. Seeded (`--seed`): the same seed draws the same
//! random points; where it climbs follows from what was measured.

use std::{
    cell::Cell,
    collections::BTreeSet,
    fs,
    path::{Path, PathBuf},
};

use anyhow::{bail, Context, Result};
use rand::{seq::SliceRandom, RngExt, SeedableRng};
use rand_chacha::ChaCha8Rng;
use xshell::Shell;

use super::{
    flags::QemuTestFlags,
    slurm::{Ended, OnSlurm},
};
use crate::session::hunt_points::{line, summary, write_found, write_points, Eval, POINTS_FILE};
use crate::{
    analysis::{
        expected::{self, load_expectations, Expected},
        held::{point_held, run_held, HeldBy},
    },
    exit,
    guest::space::{Settings, Space, SpacePoint},
    progress::{self, Event},
    results::{record::RunRecord, session::BootFailure},
    session::qemu_test::QemuTestRequest,
    util,
};

/// The share of climbing rounds once a point has held time; the rest random.
const CLIMB: f64 = 0.7;

/// qemu-test's flags the hunt sets itself.
const OWN_FLAGS: [&str; 10] = [
    "--scenario",
    "--no-aa",
    "--runs",
    "--results-in",
    "--resume",
    "--shard",
    "--dry-run",
    "--aa",
    "--expect",
    "--compare",
];

/// What a hunt is asked, its space read.
pub struct Asked<'a> {
    pub space: Space,
    pub seed: u64,
    /// Boots it may spend.
    pub boots: u32,
    /// Stop at the first point that holds by this mechanism.
    pub stop_at: Option<HeldBy>,
    /// The user's qemu-test flags: one kernel (a variant, from
    /// --kernel-src's tree or Debian's), the job and the guest.
    pub qemu_args: Vec<String>,
    /// Relax the best point that holds to its minimal form.
    pub minimise: bool,
    /// Variants the best point that holds is booted on afterwards (the
    /// fixes, the reference): does the stall go?
    pub check: Vec<String>,
    /// Where the hunt's directory is made.
    pub parent: PathBuf,
    /// Points a round: booted at once, one session here (two guests at a
    /// time on 2 CPUs), or a Slurm task each.
    pub batch: usize,
    /// Each point a Slurm job (in this partition, or the cluster's default).
    pub slurm: Option<Option<String>>,
    /// The file `space` was read from: the nodes read it too.
    pub space_file: PathBuf,
    /// qemu-test's flags made a request, by the task's parser.
    pub flags: &'a dyn QemuTestFlags,
}

/// Where a hunt's rounds boot.
enum On {
    /// Here, a session a round: the kernel built (or checked) in the first.
    Here {
        built: Cell<bool>,
    },
    Slurm(Box<OnSlurm>),
}

/// What a hunt came to: its summary, and with --until, the mechanism it
/// did not find.
pub struct HuntResult {
    pub summary: String,
    /// The hunt's directory.
    pub dir: PathBuf,
    missing: Option<String>,
}

impl HuntResult {
    /// Fails (exit 1) when --until's mechanism was not found.
    pub fn result(&self) -> Result<()> {
        match &self.missing {
            Some(m) => bail!(exit::fails(m.clone())),
            None => Ok(()),
        }
    }
}

/// The user's flags, checked: none the hunt sets itself, and they parse.
pub fn check_flags(args: &[String], flags: &dyn QemuTestFlags) -> Result<()> {
    if let Some(f) = args.iter().find(|a| {
        OWN_FLAGS
            .iter()
            .any(|o| a == o || a.starts_with(&format!("{o}=")))
    }) {
        bail!(exit::usage(format!(
            "{f} after `--`: the hunt sets it itself (its scenarios are its points, its runs \
                 the space's `runs`); give qemu-test's other flags there"
        )));
    }
    let argv: Vec<&str> = std::iter::once("qemu-test")
        .chain(args.iter().map(String::as_str))
        .collect();
    flags
        .parse(&argv)
        .map_err(|e| exit::usage(format!("the qemu-test flags after `--`: {e}")))?;
    Ok(())
}

impl Asked<'_> {
    pub fn run(self, sh: &Shell) -> Result<HuntResult> {
        check_flags(&self.qemu_args, self.flags)?;
        let expected = expectations()?;
        let per_point = self.space.runs;
        if self.boots < per_point * self.batch as u32 {
            bail!(exit::usage(format!(
                "--boots {}: a round boots {} points x {per_point} runs; give at least {}",
                self.boots,
                self.batch,
                per_point * self.batch as u32
            )));
        }
        let dir = util::unique_dir(&self.parent)?;
        let on = match &self.slurm {
            None => On::Here {
                built: Cell::new(false),
            },
            Some(partition) => On::Slurm(Box::new(OnSlurm::new(
                sh,
                &dir,
                &self.qemu_args,
                partition.clone(),
                &self.space_file,
                self.flags,
            )?)),
        };
        progress::emit(Event::Note(&format!(
            "hunt: {} points in the space ({} dimensions), seed {}, {} boots at most, {} runs a \
             point; results in {}",
            self.space.size(),
            self.space.dims.len(),
            self.seed,
            self.boots,
            per_point,
            dir.display()
        )));
        let (mut evals, spent) = self.search(sh, &dir, &on, &expected)?;
        let best = (evals.iter())
            .filter(|e| e.held.holds)
            .filter(|e| self.stop_at.is_none_or(|m| e.held.mechanism == Some(m)))
            .max_by(|a, b| a.held.score.total_cmp(&b.held.score))
            .cloned();
        if let Some(b) = &best {
            if self.minimise {
                evals.extend(self.minimise(sh, &dir, &on, &expected, b, evals.len())?);
            }
            if !self.check.is_empty() {
                let name = format!("{}-check", b.name);
                let named = vec![(name, b.point.clone(), b.settings.clone())];
                evals.extend(self.round(sh, &dir, &on, named, &expected, &self.check)?);
            }
            write_points(&dir, &evals)?;
        }
        let found = write_found(&dir, &evals, &self.space)?;
        Ok(HuntResult {
            summary: summary(&dir, &evals, spent, self.stop_at, found),
            dir: dir.clone(),
            missing: match self.stop_at {
                Some(c) if best.is_none() => Some(format!(
                    "hunt: no point held by the {} mechanism within {} boots (seed {}): see {}",
                    c.name(),
                    self.boots,
                    self.seed,
                    dir.join(POINTS_FILE).display()
                )),
                _ => None,
            },
        })
    }

    /// A node's part of `--slurm`: boots the point whose settings `file`
    /// holds (named by the file) into a session under `into`.
    pub fn eval_point(&self, sh: &Shell, file: &Path, into: &Path) -> Result<()> {
        let name = (file.file_stem().and_then(|n| n.to_str()))
            .with_context(|| format!("{}: no point name", file.display()))?;
        let text =
            fs::read_to_string(file).with_context(|| format!("reading {}", file.display()))?;
        let settings = (self.space.parse_settings(&text))
            .with_context(|| format!("{}: the point's settings", file.display()))?;
        let scenario = self.space.scenario(name, &settings)?;
        let (session, records, failures) = (self.qemu_test(into, true, &[])?)
            .boot_points(sh, vec![scenario])
            .with_context(|| format!("booting {name}"))?;
        progress::emit(Event::Note(&format!(
            "hunt: {name}: {} run(s) recorded, {} failed, in {}",
            records.len(),
            failures.len(),
            session.display()
        )));
        Ok(())
    }

    /// The search: rounds of points until the budget is spent (or a point
    /// holds by `stop_at`). Returns every evaluated point and the boots spent.
    fn search(
        &self,
        sh: &Shell,
        dir: &Path,
        on: &On,
        expected: &Expected,
    ) -> Result<(Vec<Eval>, u32)> {
        let per_point = self.space.runs;
        let mut rng = ChaCha8Rng::seed_from_u64(self.seed);
        let mut evals: Vec<Eval> = Vec::new();
        let mut seen: BTreeSet<Settings> = BTreeSet::new();
        let mut spent = 0u32;
        while spent + per_point * self.batch as u32 <= self.boots {
            let batch = self.next_batch(&mut rng, &evals, &mut seen);
            if batch.is_empty() {
                break;
            }
            let named: Vec<(String, SpacePoint, Settings)> = batch
                .into_iter()
                .enumerate()
                .map(|(i, p)| {
                    let s = self.space.settings(&p);
                    (format!("hunt-{:03}", evals.len() + i), p, s)
                })
                .collect();
            let round = self.round(sh, dir, on, named, expected, &[])?;
            spent += per_point * round.len() as u32;
            evals.extend(round);
            write_points(dir, &evals)?;
            if self.stop_at.is_some_and(|m| holds_by(&evals, m)) {
                break;
            }
        }
        Ok((evals, spent))
    }

    /// The minimal form of `best`: each dimension in turn set back to the
    /// script's default, kept there while the point still holds by the same
    /// mechanism. One point a round; returns every point it booted.
    fn minimise(
        &self,
        sh: &Shell,
        dir: &Path,
        on: &On,
        expected: &Expected,
        best: &Eval,
        first: usize,
    ) -> Result<Vec<Eval>> {
        let mut now = best.settings.clone();
        let mut out: Vec<Eval> = Vec::new();
        for d in &self.space.dims {
            let relaxed = self.space.relaxed(&now, d);
            if relaxed == now {
                continue;
            }
            let name = format!("hunt-{:03}-min", first + out.len());
            let named = vec![(name, best.point.clone(), relaxed.clone())];
            let e = (self
                .round(sh, dir, on, named, expected, &[])?
                .into_iter()
                .next())
            .context("the minimising round booted nothing")?;
            let kept = e.held.holds && e.held.mechanism == best.held.mechanism;
            progress::emit(Event::Note(&format!(
                "hunt: {} ({} back at the default): {}",
                e.name,
                d.name,
                if kept {
                    "still holds, relaxed"
                } else {
                    "needed"
                }
            )));
            if kept {
                now = relaxed;
            }
            out.push(e);
        }
        progress::emit(Event::Note(&format!(
            "hunt: minimal form of {}: [{now}]",
            best.name
        )));
        Ok(out)
    }

    /// Boots one round's points and judges each, emitting its line: as one
    /// session here, or as a Slurm task each, judged as each ends.
    fn round(
        &self,
        sh: &Shell,
        dir: &Path,
        on: &On,
        named: Vec<(String, SpacePoint, Settings)>,
        expected: &Expected,
        more: &[String],
    ) -> Result<Vec<Eval>> {
        let mut out = Vec::new();
        let mut keep = |evals: Vec<Eval>| {
            for e in evals {
                progress::emit(Event::Note(&line(&e)));
                out.push(e);
            }
        };
        match on {
            On::Here { built } => {
                let scenarios = (named.iter())
                    .map(|(n, _, s)| self.space.scenario(n, s))
                    .collect::<Result<Vec<_>>>()?;
                let q = self.qemu_test(&dir.join("sessions"), built.get(), more)?;
                let (session, records, failures) = q
                    .boot_points(sh, scenarios)
                    .context("booting the hunt's points")?;
                built.set(true);
                keep(self.evaluate(&named, &session, &records, &failures, expected, more)?);
            }
            On::Slurm(s) => {
                let refs: Vec<(&str, &Settings)> =
                    named.iter().map(|(n, _, s)| (n.as_str(), s)).collect();
                let more_flags: Vec<String> = (more.iter())
                    .flat_map(|v| ["--variant".to_string(), v.clone()])
                    .collect();
                s.round(sh, &refs, &more_flags, |i, ended| {
                    let point = std::slice::from_ref(&named[i]);
                    keep(match ended {
                        Ended::Booted {
                            session,
                            records,
                            failures,
                        } => self.evaluate(point, &session, &records, &failures, expected, more)?,
                        Ended::Lost(why) => (s.variants().iter().chain(more))
                            .map(|v| Eval::lost(&named[i], v, why.clone(), self.space.runs))
                            .collect(),
                    });
                    Ok(())
                })?;
            }
        }
        Ok(out)
    }

    /// Judges the points `named` from the records of their session, on
    /// each kernel a run of it booted on, recorded or failed (a point whose
    /// every boot failed is kept: held 0).
    fn evaluate(
        &self,
        named: &[(String, SpacePoint, Settings)],
        session: &Path,
        records: &[RunRecord],
        failures: &[BootFailure],
        expected: &Expected,
        more: &[String],
    ) -> Result<Vec<Eval>> {
        let variants: BTreeSet<&str> = (records.iter().map(|r| &r.id))
            .chain(failures.iter().map(|f| &f.run))
            .map(|id| id.variant.as_str())
            .collect();
        if more.is_empty() && variants.len() > 1 {
            bail!(exit::usage(format!(
                "the qemu-test flags after `--` boot {} kernels ({}): the hunt searches one; \
                 select one variant (`--variant NAME`; `--patch` always boots its base \
                 beside it: hunt a tree that has the patch with --kernel-src), and name the \
                 kernels to check the points on with --check",
                variants.len(),
                variants.iter().copied().collect::<Vec<_>>().join(", ")
            )));
        }
        let mut out = Vec::new();
        for ((name, p, settings), variant) in named
            .iter()
            .flat_map(|n| variants.iter().map(move |v| (n.clone(), *v)))
        {
            let (mut runs, mut sleeps) = (Vec::new(), Vec::new());
            for r in (records.iter()).filter(|r| r.id.in_cell(&name, variant)) {
                sleeps.push(r.boot.sleeps.clone());
                let file = (r.boot.samples.as_deref())
                    .with_context(|| format!("{}: no samples (the sampler was off)", r.id))?;
                let text = fs::read_to_string(session.join(file))
                    .with_context(|| format!("reading {}", session.join(file).display()))?;
                runs.push(run_held(r, &text, expected)?);
            }
            for f in failures.iter().filter(|f| f.run.in_cell(&name, variant)) {
                progress::emit(Event::Note(&format!("hunt: {f} (counted as not held)")));
            }
            let held = point_held(&runs, self.space.runs, expected.criteria.stall_fraction);
            out.push(Eval {
                name,
                point: p,
                variant: variant.to_string(),
                settings,
                runs,
                sleeps,
                held,
                session: session.to_path_buf(),
                lost: None,
            });
        }
        Ok(out)
    }

    /// The session of one round, in `into`: the user's flags, the hunt's own.
    fn qemu_test(&self, into: &Path, built: bool, more: &[String]) -> Result<QemuTestRequest> {
        let runs = self.space.runs.to_string();
        let mut argv: Vec<&str> = vec!["qemu-test"];
        argv.extend(self.qemu_args.iter().map(String::as_str));
        for v in more {
            argv.extend(["--variant", v]);
        }
        let points = into.to_str().context("the hunt's directory is not UTF-8")?;
        argv.extend(["--runs", &runs, "--no-aa", "--results-in", points]);
        // The kernel is built (or checked) once, before the first round.
        if built && !self.qemu_args.iter().any(|a| a == "--no-build") {
            argv.push("--no-build");
        }
        (self.flags.parse(&argv)).context("the hunt's qemu-test flags")
    }

    /// The next points: a climb (one dimension changed) from the best point
    /// with held time that does not hold yet, by a mechanism still sought,
    /// or random ones; never one that boots as an evaluated one does. A
    /// mechanism that has held at a point is found: climbing around it, or
    /// around its other points, finds it again, so the search moves on
    /// (--until's mechanism is the only one sought; `NEW` always is, each may
    /// be another).
    fn next_batch(
        &self,
        rng: &mut ChaCha8Rng,
        evals: &[Eval],
        seen: &mut BTreeSet<Settings>,
    ) -> Vec<SpacePoint> {
        let found: BTreeSet<HeldBy> = (evals.iter())
            .filter(|e| e.held.holds)
            .filter_map(|e| e.held.mechanism)
            .collect();
        let sought = |m: HeldBy| match self.stop_at {
            Some(until) => m == until,
            None => m == HeldBy::New || !found.contains(&m),
        };
        let best = (evals.iter())
            .filter(|e| e.held.score > 0.0 && !e.held.holds)
            .filter(|e| e.held.mechanism.is_some_and(sought))
            .max_by(|a, b| a.held.score.total_cmp(&b.held.score));
        let mut out = Vec::new();
        if let Some(b) = best.filter(|_| rng.random_bool(CLIMB)) {
            let mut near = self.space.neighbours(&b.point);
            near.shuffle(rng);
            for q in near {
                if out.len() == self.batch {
                    break;
                }
                if seen.insert(self.space.settings(&q)) {
                    out.push(q);
                }
            }
        }
        // Random points: a bounded number of draws (a space nearly all
        // evaluated ends the hunt rather than looping).
        for _ in 0..10_000 {
            if out.len() == self.batch {
                break;
            }
            let q: SpacePoint = (self.space.dims.iter())
                .map(|d| rng.random_range(0..d.values.len()))
                .collect();
            if seen.insert(self.space.settings(&q)) {
                out.push(q);
            }
        }
        out
    }
}

/// Whether a point held by `m`.
fn holds_by(evals: &[Eval], m: HeldBy) -> bool {
    evals
        .iter()
        .any(|e| e.held.holds && e.held.mechanism == Some(m))
}

/// The expectations file's criteria and witness tolerance (the hunt has no
/// expectations of its own).
fn expectations() -> Result<Expected> {
    let file = util::project_root().join(expected::EXPECTED_FILE);
    let text = fs::read_to_string(&file).with_context(|| format!("reading {}", file.display()))?;
    load_expectations(&text, &file, &[]).context("reading the expectations' criteria")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        analysis::held::PointHeld,
        guest::{scenario, space},
    };

    /// No qemu-test flags: the strategy and the judging boot nothing.
    struct NoFlags;

    impl QemuTestFlags for NoFlags {
        fn parse(&self, _: &[&str]) -> Result<QemuTestRequest, clap::Error> {
            unreachable!("the strategy's tests parse no flags")
        }

        fn slurm_jobs(
            &self,
            _: &Path,
            _: &[String],
            _: Option<String>,
        ) -> Result<crate::session::slurm::Jobs> {
            unreachable!("the strategy's tests submit no jobs")
        }
    }

    /// A landscape like `regressed`'s as measured (docs/hunt.md): every FUSE
    /// point with strict_limit=1 holds by strictlimit; every ext4 point in a
    /// memcg has held time by memcg-unrequested and holds in one evaluation
    /// of two (4f52abb's CI hunt, seed 1, found seven such points and spent
    /// its 48 boots climbing among them); the rest has none.
    fn regressed_like(s: &Settings, rng: &mut ChaCha8Rng) -> PointHeld {
        let v = |k: &str| s.0[k].as_str();
        let (score, holds, mechanism) = if v("fs") == "fuse" && v("fuse_strict") == "1" {
            (0.5, true, Some(HeldBy::Strictlimit))
        } else if v("fs") == "ext4" && v("memcg_max") != "max" {
            let holds = rng.random_bool(0.5);
            let score = if holds { 0.25 } else { 0.1 };
            (score, holds, Some(HeldBy::MemcgUnrequested))
        } else {
            (0.0, false, None)
        };
        PointHeld {
            score,
            holds,
            mechanism,
        }
    }

    /// A landscape like `upstream`'s as measured (docs/hunt.md): the stale
    /// statistics hold only in a narrow region, and there in one evaluation
    /// of two (the points seeds 7, 8 and 9 found, and seed 9's found again,
    /// were all ext4 under memory.max 192M or 384M on the 150 or 400 ms disk
    /// with 512 requests, the global limits 16M/8M: 1/90 of the space; each
    /// held at 4.8-11.5%, the line at 5%, and one did not hold again);
    /// elsewhere under a memcg on ext4 a point shows declined time in one
    /// evaluation of seven (seed 11's full search: 7 of its 50 points), never
    /// enough to hold; the rest has none.
    fn upstream_like(s: &Settings, rng: &mut ChaCha8Rng) -> PointHeld {
        let v = |k: &str| s.0[k].as_str();
        let memcg = v("fs") == "ext4" && v("memcg_max") != "max";
        let region = memcg
            && ["192M", "384M"].contains(&v("memcg_max"))
            && ["150", "400"].contains(&v("disk_latency_ms"))
            && v("disk_queue_depth") == "512"
            && v("dirty_bytes") == "16777216";
        let (score, holds) = match (region, memcg) {
            (true, _) if rng.random_bool(0.5) => (0.07, true),
            (true, _) => (0.03, false),
            (false, true) if rng.random_bool(1.0 / 7.0) => (0.01, false),
            _ => (0.0, false),
        };
        PointHeld {
            score,
            holds,
            mechanism: (score > 0.0).then_some(HeldBy::StaleStats),
        }
    }

    /// A landscape: what a point's evaluation shows.
    type Landscape = fn(&Settings, &mut ChaCha8Rng) -> PointHeld;

    /// Whether the strategy, `points` evaluations on `landscape`, finds
    /// `hunt.stop_at`.
    fn finds(hunt: &Asked, points: usize, landscape: Landscape) -> bool {
        let mut rng = ChaCha8Rng::seed_from_u64(hunt.seed);
        let mut land = ChaCha8Rng::seed_from_u64(hunt.seed ^ 0x5eed);
        let (mut evals, mut seen) = (Vec::new(), BTreeSet::new());
        while evals.len() + hunt.batch <= points {
            for p in hunt.next_batch(&mut rng, &evals, &mut seen) {
                let settings = hunt.space.settings(&p);
                evals.push(Eval {
                    name: format!("hunt-{:03}", evals.len()),
                    held: landscape(&settings, &mut land),
                    point: p,
                    variant: "regressed".into(),
                    settings,
                    runs: Vec::new(),
                    sleeps: Vec::new(),
                    session: PathBuf::new(),
                    lost: None,
                });
            }
            if hunt.stop_at.is_some_and(|m| holds_by(&evals, m)) {
                return true;
            }
        }
        false
    }

    /// A point whose every boot failed (a kernel that oopses there) is
    /// judged, not dropped: held 0, its failures counted as runs not held.
    /// A hunt of the committed space, on no kernel: `seed`, `boots`, `stop_at`.
    fn asked(seed: u64, boots: u32, stop_at: Option<HeldBy>) -> Asked<'static> {
        let file = util::project_root().join(space::SPACE_FILE);
        let space = Space::load(&file, scenario::any(space::SCRIPT).unwrap()).unwrap();
        Asked {
            space,
            seed,
            boots,
            stop_at,
            qemu_args: Vec::new(),
            minimise: false,
            check: Vec::new(),
            parent: PathBuf::new(),
            batch: 2,
            slurm: None,
            space_file: file,
            flags: &NoFlags,
        }
    }

    #[test]
    fn a_point_whose_every_boot_failed_is_kept() {
        let hunt = asked(1, 6, None);
        let p = vec![0; hunt.space.dims.len()];
        let named = vec![("hunt-000".to_string(), p.clone(), hunt.space.settings(&p))];
        let failures: Vec<BootFailure> = (0..3)
            .map(|run| BootFailure {
                run: crate::guest::run_id::RunId {
                    scenario: "hunt-000".into(),
                    variant: "regressed".into(),
                    run,
                },
                why: "oops: the guest kernel oopsed".into(),
            })
            .collect();
        let e = hunt
            .evaluate(
                &named,
                Path::new("/s"),
                &[],
                &failures,
                &expectations().unwrap(),
                &[],
            )
            .unwrap();
        assert_eq!(e.len(), 1);
        assert_eq!(
            (e[0].name.as_str(), e[0].variant.as_str()),
            ("hunt-000", "regressed")
        );
        assert!(!e[0].held.holds && e[0].held.score == 0.0 && e[0].runs.is_empty());
    }

    /// The strategy's miss rate, measured over 2,000 seeds: `--until
    /// strictlimit` with CI's budget (48 boots, 16 points) on a landscape
    /// where another mechanism's region has held time everywhere. Random
    /// points alone miss with 0.75^16 = 1.0% (a quarter are FUSE with
    /// strict_limit=1); climbing among the memcg points, as 4f52abb's search
    /// did, misses far more.
    #[test]
    fn a_mechanism_found_elsewhere_does_not_hold_the_search_back() {
        let rate = missed(HeldBy::Strictlimit, 48, 2000, regressed_like);
        assert!(rate <= 0.02, "missed on {rate} of 2,000 seeds");
    }

    /// The share of `seeds` seeds on which `--until until` with `boots`
    /// misses on `landscape`.
    fn missed(until: HeldBy, boots: u32, seeds: u64, landscape: Landscape) -> f64 {
        let mut hunt = asked(0, boots, Some(until));
        let points = (boots / hunt.space.runs) as usize;
        let missed = (0..seeds)
            .filter(|&seed| {
                hunt.seed = seed;
                !finds(&hunt, points, landscape)
            })
            .count();
        missed as f64 / seeds as f64
    }

    /// The budget the stale statistics need, measured on [`upstream_like`]
    /// over 1,000 seeds (docs/hunt.md): 150 boots (the budget the real hunts
    /// were given) miss on about 60% of seeds, 900 on about 6%. What limits it is
    /// the region's size and its one hold in two, not the strategy (learned
    /// draws were tried: no better at 150, worse at 900).
    #[test]
    fn the_stale_statistics_need_about_900_boots() {
        let miss = |boots| missed(HeldBy::StaleStats, boots, 1000, upstream_like);
        let (small, stated) = (miss(150), miss(900));
        assert!(stated <= 0.08, "900 boots miss on {stated} of seeds");
        eprintln!("stale statistics on the model: 150 boots miss {small}, 900 miss {stated}");
        assert!(
            small >= 0.5,
            "150 boots miss on {small} of seeds: docs/hunt.md says 60%"
        );
    }
}
