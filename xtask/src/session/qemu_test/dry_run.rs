//! `qemu-test --dry-run`: the plan a run would follow, from the flags and the
//! kernels already on disk alone: nothing is built or booted. The boots are
//! the run's own (`QemuTestRequest::cells`); the time is estimated from them with
//! the times per boot and per build that docs/measurements.md records.

use std::path::PathBuf;

use crate::{
    guest::{job::Job, plan::Shard, qemu::Clock},
    kernel::{build::load_built, flavour::Flavour},
    report, util,
};

/// Wall seconds a boot takes on the real clock beyond its fio job (kernel boot,
/// fio's start, the verify pass, the trace's formatting and sending): about 35 s
/// a boot of the 25 s job one at a time (docs/measurements.md, "Times").
pub const BOOT_OVERHEAD_SECS: u32 = 14;

/// A boot on the virtual clock (the default): guest time counts instructions and
/// idle time is skipped, so a boot takes less wall time than guest time and its
/// wall time is a fixed part and a share of its fio job, not the job plus an
/// overhead. Fitted on 2026-12-07 (2 cores, two guests at a time, the main job's
/// 50 boots and quick boots, docs/measurements.md "Current figures"): a 25 s job
/// 17.3-20.8 s a scenario (18.6 mean), a quick 7 s job 13-14 s; a brand-new
/// machine's 50 boots took 8.6 min (20.6 s each). Again after the LZ4 image
/// (23bec96): 16.7-23.1 s a scenario, 18.6 mean, 50 boots in 477 s (this
/// fit says 487 s).
pub const VIRTUAL_BOOT_SECS: u32 = 12;
/// The share of its fio job a virtual-clock boot adds, per mille.
pub const VIRTUAL_JOB_PER_MILLE: u32 = 300;

/// A cold kernel build: 556 s on a brand-new 2-core machine (2026-12-06, a
/// fresh clone; docs/measurements.md, "Current figures").
pub const COLD_BUILD_SECS: u32 = 560;

/// Another variant once one is built: 14-21 s (2026-12-07, 23bec96; 17.4,
/// 15.8 and 15.8 s in a fresh clone's main job), the first of them compiling
/// the module, the others taking it. A kernel already on disk costs the same:
/// the variants share one tree, so each is made again after the tree is
/// switched to it.
pub const WARM_BUILD_SECS: u32 = 17;

/// A brand-new machine's set-up (apt, rust-src, bindgen-cli): 4.5 min
/// (2026-12-06, docs/measurements.md "Current figures").
pub const SETUP_SECS: u32 = 270;

/// A kernel of the plan.
#[derive(Debug, Clone, PartialEq)]
pub struct Kernel {
    pub name: String,
    /// Whether its kernel is on disk (else the run builds it).
    pub built: bool,
    /// The A/A control: the variant whose kernel it boots again.
    pub again: Option<String>,
}

/// What `qemu-test` would do, in the order it would do it.
#[derive(Debug, Clone)]
pub struct Preview {
    /// The machine, as the run's plan line says it.
    pub machine: String,
    /// Where this source's and configuration's kernels are.
    pub kernels_dir: PathBuf,
    pub no_build: bool,
    pub kernels: Vec<Kernel>,
    /// Each scenario: its name, runs per cell and fio job.
    pub scenarios: Vec<(String, u32, Job)>,
    /// Runs per cell, as the run says them.
    pub runs: String,
    /// Every boot, (kernel, scenario), in plan order.
    pub boots: Vec<(String, String)>,
    /// The boots deciding the costs may add at worst, (kernel, scenario).
    pub more: Vec<(String, String)>,
    pub jobs_vm: usize,
    pub shard: Option<Shard>,
    /// The guests' clock: what a boot's wall time is reckoned from.
    pub clock: Clock,
    /// The tools are not all there: the run sets the machine up first.
    pub setup: bool,
}

/// The kernels of the plan: each variant, on disk or not (for `flavour`),
/// then the A/A control, `aa`'s kernel booted again.
pub fn kernels(variants: &[String], aa: Option<String>, flavour: &Flavour) -> Vec<Kernel> {
    let mut out: Vec<Kernel> = (variants.iter())
        .map(|n| Kernel {
            name: n.clone(),
            built: load_built(n, flavour).is_ok(),
            again: None,
        })
        .collect();
    if let Some(of) = aa {
        out.push(Kernel {
            name: report::format::aa_name(&of),
            built: out.iter().any(|k| k.name == of && k.built),
            again: Some(of),
        });
    }
    out
}

impl Preview {
    /// The kernels the run builds: those not on disk (none with `--no-build`;
    /// the A/A control boots its variant's).
    pub fn to_build(&self) -> Vec<&str> {
        (self.kernels.iter())
            .filter(|k| !self.no_build && !k.built && k.again.is_none())
            .map(|k| k.name.as_str())
            .collect()
    }

    /// The kernels on disk the run makes again after the tree's switch to
    /// each (none with `--no-build`; the A/A control boots its variant's).
    pub fn on_disk(&self) -> Vec<&str> {
        (self.kernels.iter())
            .filter(|k| !self.no_build && k.built && k.again.is_none())
            .map(|k| k.name.as_str())
            .collect()
    }

    /// Seconds of building: a cold build first when no kernel is on disk,
    /// every other kernel made warm.
    pub fn build_secs(&self) -> u32 {
        let (n, m) = (self.to_build().len() as u32, self.on_disk().len() as u32);
        match (n, m) {
            (0, 0) => 0,
            (n, 0) => COLD_BUILD_SECS + (n - 1) * WARM_BUILD_SECS,
            (n, m) => (n + m) * WARM_BUILD_SECS,
        }
    }

    /// Seconds of booting `boots`, each reckoned from its fio job by the
    /// clock ([`boot_wall_secs`]), run `jobs_vm` at a time.
    pub fn boot_secs(&self, boots: &[(String, String)]) -> u32 {
        let each = |scen: &str| {
            (self.scenarios.iter())
                .find(|(name, ..)| name == scen)
                .map_or(0, |(_, _, job)| {
                    boot_wall_secs(self.clock, job.ramp_time + job.runtime)
                })
        };
        let all: u32 = boots.iter().map(|(_, s)| each(s)).sum();
        all.div_ceil(self.jobs_vm.max(1) as u32)
    }

    /// Each kernel's line: built, to build, or missing under `--no-build`.
    fn kernel_line(&self, k: &Kernel, width: usize) -> String {
        let state = match (&k.again, k.built, self.no_build) {
            (Some(of), ..) => format!("{of}'s kernel again, the A/A control"),
            (None, true, _) => "built (rebuilt only where its inputs changed)".to_string(),
            (None, false, false) => "to build".to_string(),
            (None, false, true) => "missing: --no-build stops here (drop it to build)".into(),
        };
        format!("  {:<width$}  {state}\n", k.name)
    }

    /// The plan as the user reads it.
    pub fn render(&self) -> String {
        let root = util::project_root();
        let dir = self
            .kernels_dir
            .strip_prefix(&root)
            .unwrap_or(&self.kernels_dir);
        let mut out = format!(
            "qemu-test --dry-run: the plan; nothing is built or booted\nmachine: {}\n\
             kernels ({}):\n",
            self.machine,
            dir.display()
        );
        let width = self.kernels.iter().map(|k| k.name.len()).max().unwrap_or(0);
        for k in &self.kernels {
            out.push_str(&self.kernel_line(k, width));
        }
        out.push_str("scenarios (runs per cell; fio ramp + runtime):\n");
        let width = self.scenarios.iter().map(|s| s.0.len()).max().unwrap_or(0);
        for (name, runs, job) in &self.scenarios {
            out.push_str(&format!(
                "  {name:<width$}  {runs} run(s)  {} + {} s\n",
                job.ramp_time, job.runtime
            ));
        }
        out.push_str(&format!(
            "boots: {} ({} kernel(s) x {} scenario(s), runs per cell: {}{})\n",
            self.boots.len(),
            self.kernels.len(),
            self.scenarios.len(),
            self.runs,
            self.shard
                .map_or(String::new(), |s| format!("; shard {s} of the plan"))
        ));
        out.push_str(&self.estimate());
        out
    }

    /// The time line: building, then booting, and how each was reckoned.
    fn estimate(&self) -> String {
        let (build, boot) = (self.build_secs(), self.boot_secs(&self.boots));
        let setup = if self.setup { SETUP_SECS } else { 0 };
        let mut before = match setup {
            0 => String::new(),
            s => format!(
                "setting the machine up {} (its tools are missing), ",
                about(s)
            ),
        };
        before.push_str(&match (self.to_build().len(), self.on_disk().len()) {
            (0, 0) => String::new(),
            (0, m) => format!(
                "making the {m} kernel(s) on disk again {}, then ",
                about(build)
            ),
            (n, 0) => format!("building {n} kernel(s) {}, then ", about(build)),
            (n, m) => format!(
                "building {n} kernel(s) and making {m} on disk again {}, then ",
                about(build)
            ),
        });
        let build = build + setup;
        let each = match self.clock {
            Clock::Real => format!("its fio job plus about {BOOT_OVERHEAD_SECS} s"),
            Clock::Virtual { .. } => format!(
                "about {VIRTUAL_BOOT_SECS} s and {}% of its fio job on the virtual clock",
                VIRTUAL_JOB_PER_MILLE / 10
            ),
        };
        let mut out = format!(
            "estimate: about {}: {before}{} boot(s), {} at a time, {} (each {each}, \
             docs/measurements.md)\n",
            about(build + boot).trim_start_matches("about "),
            self.boots.len(),
            self.jobs_vm,
            about(boot)
        );
        if !self.more.is_empty() {
            let more = self.boot_secs(&self.more);
            out.push_str(&format!(
                "worst case: about {}: the costs of the patch under test may add up to {} \
                 boot(s) ({}), one more run of the patch and of the reference per round in a \
                 scenario still undecided, up to {} a side\n",
                about(build + boot + more).trim_start_matches("about "),
                self.more.len(),
                about(more),
                crate::analysis::cost::RUN_CAP
            ));
        }
        out
    }
}

/// Wall seconds of one boot whose fio job (ramp and runtime) is `job_secs`.
pub fn boot_wall_secs(clock: Clock, job_secs: u32) -> u32 {
    match clock {
        Clock::Real => job_secs + BOOT_OVERHEAD_SECS,
        Clock::Virtual { .. } => {
            VIRTUAL_BOOT_SECS + (job_secs * VIRTUAL_JOB_PER_MILLE).div_ceil(1000)
        }
    }
}

/// `about 40 s`, `about 17 min`.
fn about(secs: u32) -> String {
    match secs {
        s if s < 90 => format!("about {s} s"),
        s => format!("about {} min", (s + 30) / 60),
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn kernel(name: &str, built: bool, again: Option<&str>) -> Kernel {
        Kernel {
            name: name.into(),
            built,
            again: again.map(Into::into),
        }
    }

    fn preview(kernels: Vec<Kernel>, no_build: bool) -> Preview {
        let full = Job::new("256M", 4, (5, 20));
        let boots = (0..2)
            .flat_map(|_| kernels.iter().map(|k| (k.name.clone(), "fuse".to_string())))
            .chain(kernels.iter().map(|k| (k.name.clone(), "ext4".to_string())))
            .collect();
        Preview {
            machine: "accel Tcg, clock virtual, 2 CPUs, 2048 MiB, 2 guests at a time".into(),
            kernels_dir: util::target_dir().join("kernels"),
            no_build,
            kernels,
            scenarios: vec![
                ("fuse".into(), 2, full.clone()),
                ("ext4".into(), 1, Job::new("16M", 4, (2, 5))),
            ],
            runs: "fuse 2, ext4 1".into(),
            boots,
            jobs_vm: 2,
            shard: None,
            more: Vec::new(),
            clock: Clock::Real,
            setup: false,
        }
    }

    #[test]
    fn a_machine_without_its_tools_is_set_up_first() {
        let mut p = preview(vec![kernel("a", false, None)], false);
        assert!(!p.render().contains("setting the machine up"));
        p.setup = true;
        let text = p.render();
        assert!(
            text.contains(
                "estimate: about 15 min: setting the machine up about 5 min (its tools are \
                 missing), building 1 kernel(s) about 9 min, then"
            ),
            "{text}"
        );
    }

    #[test]
    fn a_virtual_clock_boot_is_reckoned_from_a_share_of_its_job() {
        let mut p = preview(vec![kernel("upstream", true, None)], false);
        p.clock = Clock::Virtual { shift: 3 };
        // 2 fuse boots of 12 + 7.5 (rounded up) s, one ext4 boot of 12 + 2.1 s.
        assert_eq!(p.boot_secs(&p.boots), (2 * 20 + 15) / 2 + 1);
        // The main job's plan (2026-12-07): 50 boots of 25 s jobs, two at a
        // time, took 464 s of booting; this says 500 (8 min).
        assert_eq!(boot_wall_secs(p.clock, 25) * 50 / 2, 500);
        assert!(
            p.render().contains(
                "(each about 12 s and 30% of its fio job on the virtual clock, \
                 docs/measurements.md)"
            ),
            "{}",
            p.render()
        );
    }

    #[test]
    fn the_preview_counts_the_plan_s_boots_and_reckons_their_time() {
        let p = preview(
            vec![
                kernel("upstream", true, None),
                kernel("v1", false, None),
                kernel("upstream-aa", true, Some("upstream")),
            ],
            false,
        );
        // 6 fuse boots of 25 + 14 s, 3 ext4 boots of 7 + 14 s, two at a time;
        // v1 is built warm (upstream is on disk), the A/A control reuses upstream.
        assert_eq!(p.boot_secs(&p.boots), (6 * 39 + 3 * 21) / 2 + 1);
        // v1 built warm (upstream is on disk), upstream made again after the
        // switch back to it.
        assert_eq!(
            (p.to_build(), p.build_secs()),
            (vec!["v1"], 2 * WARM_BUILD_SECS)
        );
        let text = p.render();
        for line in [
            "kernels (target/wbstall/kernels):",
            "  upstream     built (rebuilt only where its inputs changed)",
            "  v1           to build",
            "  upstream-aa  upstream's kernel again, the A/A control",
            "  fuse  2 run(s)  5 + 20 s",
            "boots: 9 (3 kernel(s) x 2 scenario(s), runs per cell: fuse 2, ext4 1)",
            "estimate: about 3 min: building 1 kernel(s) and making 1 on disk again about 34 s, \
             then 9 boot(s), 2 at a time, about 2 min (each its fio job plus about 14 s, \
             docs/measurements.md)",
        ] {
            assert!(text.lines().any(|l| l == line), "no `{line}` in\n{text}");
        }
    }

    #[test]
    fn the_worst_case_adds_the_runs_a_cost_may_take() {
        let mut p = preview(vec![kernel("upstream", true, None)], false);
        assert!(!p.render().contains("worst case"));
        // Four more fuse runs of two kernels: 8 x 39 s, two at a time.
        p.more = (0..4)
            .flat_map(|_| ["upstream", "patch-x"].map(|k| (k.to_string(), "fuse".to_string())))
            .collect();
        let text = p.render();
        assert!(
            text.contains(
                "worst case: about 4 min: the costs of the patch under test may add up to 8 \
                 boot(s) (about 3 min)"
            ),
            "{text}"
        );
    }

    #[test]
    fn nothing_on_disk_is_a_cold_build_and_no_build_says_what_is_missing() {
        let p = preview(
            vec![kernel("a", false, None), kernel("b", false, None)],
            false,
        );
        assert_eq!(p.build_secs(), COLD_BUILD_SECS + WARM_BUILD_SECS);
        let p = preview(
            vec![kernel("a", true, None), kernel("b", false, None)],
            true,
        );
        assert_eq!((p.to_build().len(), p.build_secs()), (0, 0));
        let text = p.render();
        assert!(
            text.contains("  b  missing: --no-build stops here (drop it to build)"),
            "{text}"
        );
        assert!(text.contains("estimate: about 2 min: 6 boot(s)"), "{text}");
    }
}
