//! `qemu-test --resume DIR`: an interrupted session (Ctrl-C, a killed job, a
//! host that went down) goes on where it stopped. The plan is the one its
//! `session.json` recorded the flags of, the kernels are checked by hash
//! against the session's, and only the boots without a record are booted, into
//! the same directory; then the whole session is judged. A boot that failed
//! counts as done (its failure stays in the session) unless `--retry-failed`.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use crate::{
    exit,
    guest::plan::Plan,
    kernel::build::Built,
    progress::{self, Event},
    results::{
        dir::ResultsDir,
        record::RunRecord,
        session::{BootFailure, Session},
    },
    session::merge,
    util,
};

/// A results directory being resumed: what it holds, and the hold on it.
#[derive(Debug)]
pub struct Resumed {
    pub dir: PathBuf,
    pub session: Session,
    pub records: Vec<RunRecord>,
    /// Held so that no other process writes the directory meanwhile.
    pub lock: util::DirLock,
}

/// Takes `dir` (refused while another process holds it) and reads it back.
pub fn open(dir: &Path) -> Result<Resumed> {
    let dir = std::path::absolute(dir)
        .with_context(|| format!("--resume {}: making it absolute", dir.display()))?;
    if !dir.join(ResultsDir::SESSION).is_file() {
        bail!(exit::usage(format!(
            "--resume {}: no {} there: name a directory qemu-test made \
             (target/wbstall/results/<timestamp>)",
            dir.display(),
            ResultsDir::SESSION
        )));
    }
    let lock = util::lock_dir(&dir, "qemu-test --resume")?;
    let results = ResultsDir::new(&dir);
    let (session, records) = match results.read(ResultsDir::RESULTS) {
        // Interrupted before its first record: the session alone.
        Err(_) => (load_session(&results)?, Vec::new()),
        Ok(_) => results.load()?,
    };
    Ok(Resumed {
        dir,
        session,
        records,
        lock,
    })
}

fn load_session(results: &ResultsDir) -> Result<Session> {
    serde_json::from_str(&results.read(ResultsDir::SESSION)?)
        .context("parsing the session to resume")
}

/// The qemu-test flags the session was started with.
pub fn flags(r: &Resumed) -> Result<Vec<String>> {
    r.session.args.clone().with_context(|| {
        exit::usage(format!(
            "--resume {}: the session does not record its qemu-test flags (it was made by an \
             older wbstall, or by another task: `{}`); it cannot be resumed: run it again",
            r.dir.display(),
            r.session.command
        ))
    })
}

/// The session as planned now must be the one recorded: the same kernels,
/// source, machine, jobs, runs and expectations; refused by name otherwise.
pub fn check_same(r: &Resumed, now: &Session) -> Result<()> {
    let then = &r.session;
    for ((what, a), (_, b)) in merge::identity(then).iter().zip(merge::identity(now)) {
        if *a == b {
            continue;
        }
        if *what == "harness commit" {
            progress::emit(Event::Note(&format!(
                "the session was recorded by wbstall {a}, it is resumed by {b}"
            )));
            continue;
        }
        bail!(exit::usage(format!(
            "--resume {}: the session's {what} differ(s) from what its flags give now:\n  \
             session: {a}\n  now:     {b}\n{}",
            r.dir.display(),
            fix(what)
        )));
    }
    Ok(())
}

/// How to go on when the `what` of a session differs.
fn fix(what: &str) -> &'static str {
    match what {
        "kernels" | "source" => {
            "the kernels were rebuilt since: build the session's kernels again (the same \
             source and patches) or start a new session"
        }
        "expectations" | "roles" => {
            "qemu/expected.toml or patches/variants.toml changed since: restore them, or \
             start a new session"
        }
        _ => {
            "this host plans it differently (its accelerator, or a scenario's job changed): \
             resume it where it was started, or start a new session"
        }
    }
}

/// Every kernel image (and module) on disk is the one the session booted,
/// by hash; refused by name otherwise.
pub fn check_kernels(r: &Resumed, built: &[Built]) -> Result<()> {
    for b in built {
        let Some(then) = r
            .session
            .variants
            .iter()
            .find(|v| v.variant == b.meta.variant)
        else {
            bail!(exit::usage(format!(
                "--resume {}: kernel `{}` is not one of the session's",
                r.dir.display(),
                b.meta.variant
            )));
        };
        let mut files = vec![(b.bzimage(), &then.bzimage_sha256)];
        files.extend(b.module_file().map(|m| (m, &then.module_sha256)));
        for (file, want) in files {
            let got = util::sha256_file(&file)
                .with_context(|| format!("hashing {} to resume", file.display()))?;
            if got != *want {
                bail!(exit::usage(format!(
                    "--resume {}: kernel `{}`: {} is not the file the session booted \
                     (sha256 {got}, the session's {want}): it was rebuilt since; build the \
                     session's kernel again, or start a new session",
                    r.dir.display(),
                    then.variant,
                    file.display()
                )));
            }
        }
    }
    Ok(())
}

/// The boots of `plan` still to boot: those without a record, and those
/// that failed with `retry_failed` (their failures are dropped from
/// `failures`, to be written again if they fail again). Says what it resumes.
pub fn remaining(
    plan: Plan,
    records: &[RunRecord],
    failures: &mut Vec<BootFailure>,
    retry_failed: bool,
) -> Plan {
    let total = plan.boots.len();
    let boots: Vec<_> = (plan.boots.into_iter())
        .filter(|b| {
            let id = b.id();
            let recorded = records.iter().any(|r| r.id == id);
            let failed = failures.iter().any(|f| f.run == id);
            !recorded && (retry_failed || !failed)
        })
        .collect();
    let failed_before = failures.len();
    if retry_failed {
        failures.clear();
    }
    progress::emit(Event::Note(&format!(
        "resuming: {} of {total} boot(s) recorded, {failed_before} failed ({}); {} to boot",
        records.len(),
        if retry_failed {
            "booted again: --retry-failed"
        } else {
            "kept; --retry-failed boots them again"
        },
        boots.len()
    )));
    Plan { boots }
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;
    use crate::{
        analysis::{expected, judgement::Planned, verdict},
        guest::fake_qemu_tests::{fake, fake_plan},
        results::session::ScenarioInfo,
        session::boot_all::boot_all,
        util::testdir,
    };

    /// A fake QEMU whose guest sends a recorded stream; with `failing_once`
    /// (a boot's name), that boot's kernel panics the first time it boots.
    fn guest(failing_once: &str) -> String {
        guest_failing(
            failing_once,
            "echo 'Kernel panic - not syncing: it broke' > \"$con\"; exit 0",
        )
    }

    /// [`guest`], the first boot of `failing_once` ending with `how`.
    fn guest_failing(failing_once: &str, how: &str) -> String {
        let fixture =
            util::project_root().join("xtask/fixtures/streams/regressed-fuse-strictlimit.bin");
        format!(
            "name=$(basename \"$con\" .console.log)\n\
             if [ \"$name\" = '{failing_once}' ] && ! [ -e \"$con.failed\" ]; then\n\
             touch \"$con.failed\"; {how}; fi\n\
             echo '[    0.5] Run /init as init process' > \"$con\"\n\
             cat '{}' > \"$res\"\nexit 0\n",
            fixture.display()
        )
    }

    /// [`fake_plan`]'s `n` boots, with the job the recorded stream ran.
    fn plan(t: &testdir::Dir, n: u32) -> Plan {
        let mut plan = fake_plan(t, n, Duration::from_secs(30));
        for b in &mut plan.boots {
            b.job = crate::guest::job::Job {
                size: "256M".into(),
                numjobs: 4,
                runtime: 5,
                ramp_time: 2,
                bs: "128k".into(),
                write: Default::default(),
            };
        }
        plan
    }

    /// The session of [`fake_plan`]'s boots, as qemu-test writes it first.
    fn session(plan: &Plan) -> Session {
        Session {
            variants: vec![plan.boots[0].kernel.meta.clone()],
            scenarios: vec![ScenarioInfo {
                name: "fuse-strictlimit".into(),
                what: String::new(),
                job: plan.boots[0].job.clone(),
                runs: Some(plan.boots.len() as u32),
            }],
            runs: plan.boots.len() as u32,
            args: Some(vec!["--quick".into()]),
            ..Session::default()
        }
    }

    /// Boots `plan` into `dir` as a fresh session would.
    fn fresh(t: &testdir::Dir, dir: &Path, plan: &Plan) {
        let mut s = session(plan);
        std::fs::create_dir_all(dir).unwrap();
        ResultsDir::new(dir).write::<RunRecord>(&s, None).unwrap();
        boot_all(&fake(t, &guest("")), dir, plan, 1, &mut s, Vec::new()).unwrap();
    }

    /// Resumes `dir` against `plan`, as `qemu-test --resume` does; the verdict
    /// of the whole directory afterwards, and its failures.
    fn resume(
        sh: &xshell::Shell,
        dir: &Path,
        plan: &Plan,
        retry: bool,
        e: &expected::Expected,
    ) -> (String, Vec<BootFailure>) {
        let r = open(dir).unwrap();
        let mut s = r.session.clone();
        let left = remaining(plan.clone(), &r.records, &mut s.failures, retry);
        boot_all(sh, dir, &left, 1, &mut s, r.records.clone()).unwrap();
        drop(r);
        let (s, records) = ResultsDir::new(dir).load().unwrap();
        let v = verdict::verdict_of(&records, e, &Planned::of(&s));
        let cells: Vec<_> = records
            .iter()
            .map(|r| (r.id.variant.clone(), r.id.scenario.clone(), r.id.run))
            .collect();
        (
            format!("{cells:?}\n{}", serde_json::to_string(&v).unwrap()),
            s.failures,
        )
    }

    fn expectations() -> expected::Expected {
        let file = util::project_root().join(expected::EXPECTED_FILE);
        expected::load_expectations(&std::fs::read_to_string(&file).unwrap(), &file, &[]).unwrap()
    }

    #[test]
    fn a_session_stopped_at_boot_k_of_n_and_resumed_judges_like_one_run() {
        let t = testdir::Dir::new("resume");
        let e = expectations();
        let plan = plan(&t, 4);
        let (whole, stopped) = (t.path().join("whole"), t.path().join("stopped"));
        fresh(&t, &whole, &plan);
        // What a Ctrl-C after the second boot leaves: two records, written
        // after each boot.
        let mut first = plan.clone();
        first.boots.truncate(2);
        fresh(&t, &stopped, &first);
        let (_, before) = ResultsDir::new(&stopped).load().unwrap();
        assert_eq!(before.len(), 2);
        // The resumed boots are the last two only: the fake notes each boot.
        let sh = fake(
            &t,
            &format!(
                "echo \"$con\" >> '{}'\n{}",
                t.path().join("booted").display(),
                guest("")
            ),
        );
        let (resumed, failures) = resume(&sh, &stopped, &plan, false, &e);
        let booted = std::fs::read_to_string(t.path().join("booted")).unwrap();
        assert_eq!(booted.lines().count(), 2, "{booted}");
        assert!(
            booted.contains("v-fuse-strictlimit-3") && booted.contains("v-fuse-strictlimit-4"),
            "{booted}"
        );
        let (again, _) = resume(&sh, &whole, &plan, false, &e);
        assert_eq!(resumed, again);
        assert!(failures.is_empty(), "{failures:?}");
        assert!(
            resumed.contains("(\"v\", \"fuse-strictlimit\", 3)"),
            "{resumed}"
        );
    }

    #[test]
    fn a_failed_boot_is_done_unless_retry_failed() {
        let t = testdir::Dir::new("resume-failed");
        let e = expectations();
        let plan = plan(&t, 3);
        let dir = t.path().join("d");
        std::fs::create_dir_all(&dir).unwrap();
        let mut s = session(&plan);
        let sh = fake(&t, &guest("v-fuse-strictlimit-2"));
        boot_all(&sh, &dir, &plan, 1, &mut s, Vec::new()).unwrap();
        let (without, failures) = resume(&sh, &dir, &plan, false, &e);
        assert_eq!(failures.len(), 1, "the failure is kept: {failures:?}");
        assert_eq!(
            failures[0].run,
            crate::guest::run_id::RunId::new("fuse-strictlimit", "v", 1),
            "{failures:?}"
        );
        assert!(!without.contains(", 1)"), "{without}");
        let (with, failures) = resume(&sh, &dir, &plan, true, &e);
        assert!(failures.is_empty(), "{failures:?}");
        assert!(with.contains(", 1)"), "{with}");
    }

    #[test]
    fn a_harness_failure_stops_the_session_and_resume_boots_it_again() {
        // QEMU itself fails on boot 2 (not the kernel): no run's failure is
        // recorded, the plan stops with the harness's error (200), and the
        // boot is booted again by --resume without --retry-failed.
        let t = testdir::Dir::new("resume-harness");
        let e = expectations();
        let plan = plan(&t, 3);
        let dir = t.path().join("d");
        std::fs::create_dir_all(&dir).unwrap();
        let mut s = session(&plan);
        let broken = "echo 'qemu-system-x86_64: it broke' >&2; exit 1";
        let sh = fake(&t, &guest_failing("v-fuse-strictlimit-2", broken));
        let err = boot_all(&sh, &dir, &plan, 1, &mut s, Vec::new()).unwrap_err();
        assert_eq!(crate::exit::Class::of(&err), crate::exit::Class::Harness);
        assert!(
            format!("{err:#}").starts_with(
                "booting fuse-strictlimit/v #2 (the harness's failure, not the kernel's): \
                 QEMU failed (exited exit status: 1): qemu-system-x86_64: it broke"
            ),
            "{err:#}"
        );
        let (session, records) = ResultsDir::new(&dir).load().unwrap();
        assert!(session.failures.is_empty(), "{:?}", session.failures);
        assert_eq!(records.len(), 1);
        let (resumed, failures) = resume(&sh, &dir, &plan, false, &e);
        assert!(failures.is_empty(), "{failures:?}");
        assert!(
            resumed.contains("(\"v\", \"fuse-strictlimit\", 1)"),
            "{resumed}"
        );
    }

    #[test]
    fn a_stall_held_to_ok_fails_the_run_with_exit_1_and_held_to_stall_passes() {
        // The recorded regressed stream, booted by a fake QEMU: its cell
        // stalls. Judged as qemu-test judges it, against `ok` it is the
        // failing verdict (exit 1); against `stall` the same runs pass.
        use crate::analysis::expected::Class as Expect;
        let t = testdir::Dir::new("verdict-exit");
        let plan = plan(&t, 1);
        let judged = |class: Expect, name: &str| {
            let dir = t.path().join(name);
            std::fs::create_dir_all(&dir).unwrap();
            let mut s = session(&plan);
            s.started = crate::stamp::Stamp::now();
            let records = boot_all(&fake(&t, &guest("")), &dir, &plan, 1, &mut s, Vec::new());
            let mut e = expectations();
            let cells = e.expect.entry("fuse-strictlimit".into()).or_default();
            cells.insert("v".into(), class.into());
            super::super::boot_all::finish(dir, s, records.unwrap(), e, None).unwrap()
        };
        let failed = judged(Expect::Ok, "ok");
        let e = failed.result("qemu-test").unwrap_err();
        assert_eq!(crate::exit::Class::of(&e).code(), 1, "{e:#}");
        assert_eq!(e.to_string(), "qemu-test failed: see the FAIL lines above");
        let passed = judged(Expect::Stall, "stall");
        passed.result("qemu-test").unwrap();
        // ci's check of the exit of its live negatives, both ways.
        crate::ci::negative::exits_1(&failed).unwrap();
        let e = crate::ci::negative::exits_1(&passed).unwrap_err();
        assert_eq!(e.to_string(), "qemu-test would exit 0");
    }

    #[test]
    fn a_changed_kernel_an_old_session_and_a_held_directory_are_refused_by_name() {
        let t = testdir::Dir::new("resume-refused");
        let plan = plan(&t, 1);
        let dir = t.path().join("d");
        fresh(&t, &dir, &plan);
        let r = open(&dir).unwrap();
        // Held: a second resume of the same directory is refused, by pid.
        let held = open(&dir).unwrap_err().to_string();
        assert!(
            held.contains(&format!("in use by pid {}", std::process::id())),
            "{held}"
        );
        // The same kernel passes; a rebuilt one is named, with the fix.
        let kernels = [plan.boots[0].kernel.clone()];
        check_kernels(&r, &kernels).unwrap();
        std::fs::write(kernels[0].bzimage(), b"another kernel").unwrap();
        let err = check_kernels(&r, &kernels).unwrap_err().to_string();
        assert!(
            err.contains("kernel `v`") && err.contains("rebuilt since"),
            "{err}"
        );
        // The plan as it would be now: the same passes, another clock is named.
        check_same(&r, &r.session).unwrap();
        let mut now = r.session.clone();
        now.machine.clock = crate::guest::qemu::Clock::Virtual { shift: 5 };
        let err = check_same(&r, &now).unwrap_err().to_string();
        assert!(err.contains("the session's clock differ(s)"), "{err}");
        flags(&r).unwrap();
        let mut old = r;
        old.session.args = None;
        let err = flags(&old).unwrap_err().to_string();
        assert!(err.contains("does not record its qemu-test flags"), "{err}");
    }
}
