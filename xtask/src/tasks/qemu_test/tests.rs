use crate::util;

#[test]
fn the_fio_job_file_keeps_the_seed_options() {
    let text =
        std::fs::read_to_string(util::project_root().join("qemu/jobs/writeback.fio")).unwrap();
    // The engine is the kind of write's (psync for the seed's write(2)s:
    // guest::lib_sh_tests::each_kind_of_write_reaches_fio_as_the_job_says).
    for opt in [
        "ioengine=${WB_IOENGINE}",
        "fsync=${WB_FSYNC}",
        "sync=${WB_SYNC}",
        "rw=write",
        "time_based",
        "group_reporting=1",
        "direct=0",
        "[writeback_test]",
    ] {
        assert!(text.lines().any(|l| l.trim() == opt), "missing {opt}");
    }
    for var in [
        "${WB_BS}",
        "${WB_SIZE}",
        "${WB_NUMJOBS}",
        "${WB_RAMP}",
        "${WB_RUNTIME}",
        "${WB_INVALIDATE}",
    ] {
        assert!(text.contains(var), "missing {var}");
    }
}

#[test]
fn absurd_flags_are_refused_by_the_parser() {
    use super::QemuTest;
    let parse = |args: &[&str]| {
        let argv = std::iter::once("qemu-test").chain(args.iter().copied());
        crate::tasks::args::try_parse_from::<QemuTest>(argv).map(|_| ())
    };
    assert!(parse(&["--quick"]).is_ok());
    for bad in [
        &["--cpus", "0"][..],
        &["--memory", "0"],
        &["--runs", "0"],
        &["--numjobs", "0"],
        &["--runtime", "0"],
        &["--timeout", "0"],
        &["--size", "16M wbstall.scenario=shell"],
        &["--size", "0"],
        &["--size", "M"],
        &["--size", "16MB"],
    ] {
        let e = parse(bad).unwrap_err().to_string();
        assert!(e.contains("invalid value"), "{bad:?}: {e}");
    }
    let e = parse(&["--size", "1 G"]).unwrap_err().to_string();
    assert!(e.contains("is not a size: write a positive number"), "{e}");
    assert!(parse(&["--size", "256M"]).is_ok() && parse(&["--size", "4096"]).is_ok());
    let e = crate::tasks::args::try_parse_from::<crate::tasks::module_stress::ModuleStress>([
        "module-stress",
        "--cycles",
        "0",
    ])
    .map(|_| ())
    .unwrap_err()
    .to_string();
    assert!(e.contains("invalid value"), "{e}");
}

#[test]
fn a_virtual_clock_under_kvm_and_a_bad_cpu_model_are_refused() {
    let parse = |extra: &[&str]| {
        let argv: Vec<&str> = ["qemu-test"].iter().chain(extra).copied().collect();
        crate::tasks::args::try_parse_from::<super::QemuTest>(argv).unwrap()
    };
    let e = parse(&["--accel", "kvm", "--clock", "virtual"])
        .guest
        .machine()
        .unwrap_err()
        .to_string();
    assert!(e.contains("--clock virtual needs TCG"), "{e}");
    let e = parse(&["--accel", "tcg", "--cpu-model", "max -smp 8"])
        .guest
        .machine()
        .unwrap_err()
        .to_string();
    assert!(e.contains("is not a QEMU CPU model name"), "{e}");
    let m = parse(&[
        "--accel",
        "tcg",
        "--clock",
        "virtual",
        "--icount-shift",
        "4",
    ])
    .guest
    .machine()
    .unwrap();
    assert_eq!(m.clock, crate::guest::qemu::Clock::Virtual { shift: 4 });
}

#[test]
fn records_and_failures_keep_plan_order_whatever_order_boots_end_in() {
    let mut ends: Vec<Option<Result<&str, String>>> = vec![None; 4];
    // Boots 3 and 1 end first (1 fails), then 0; 2 still runs.
    ends[3] = Some(Ok("d"));
    ends[1] = Some(Err("b failed".into()));
    assert_eq!(
        crate::session::boot_all::in_plan_order(&ends),
        (vec![&"d"], vec!["b failed".to_string()])
    );
    ends[0] = Some(Ok("a"));
    assert_eq!(
        crate::session::boot_all::in_plan_order(&ends).0,
        [&"a", &"d"]
    );
}

#[test]
fn a_user_fuse_server_runs_in_fuse_passthrough_and_nowhere_else() {
    let parse = |extra: &[&str]| {
        let argv: Vec<&str> = ["qemu-test"].iter().chain(extra).copied().collect();
        crate::tasks::args::try_parse_from::<super::QemuTest>(argv).unwrap()
    };
    let names = |q: &super::QemuTest| -> Vec<&str> {
        let q = q.request();
        let u = q.user_server(None).unwrap();
        q.scenarios(u.as_ref())
            .unwrap()
            .iter()
            .map(|s| s.name)
            .collect()
    };
    // Alone it plans fuse-passthrough only; without it, the default plan.
    assert_eq!(
        names(&parse(&["--fuse-server", "sh"])),
        ["fuse-passthrough"]
    );
    assert!(!names(&parse(&[])).contains(&"fuse-passthrough"));
    let q = parse(&[
        "--fuse-server",
        "sh",
        "--scenario",
        "fuse-strictlimit",
        "--scenario",
        "fuse-passthrough",
    ]);
    assert_eq!(names(&q), ["fuse-strictlimit", "fuse-passthrough"]);
    // Named scenarios without fuse-passthrough: refused, with the fix.
    let q = parse(&["--fuse-server", "sh", "--scenario", "fuse-strictlimit"]);
    let q = q.request();
    let e = q
        .scenarios(q.user_server(None).unwrap().as_ref())
        .unwrap_err();
    assert!(
        e.to_string().contains("add --scenario fuse-passthrough"),
        "{e}"
    );
    // A server that is not there: refused before anything runs.
    let q = parse(&["--fuse-server", "/no/such/server -o writeback"]);
    let e = format!("{:#}", q.request().user_server(None).unwrap_err());
    assert!(e.contains("no file /no/such/server"), "{e}");
}

#[test]
fn jobs_vm_zero_is_refused_with_the_fix() {
    let parse = |extra: &[&str]| {
        let argv: Vec<&str> = ["qemu-test"].iter().chain(extra).copied().collect();
        crate::tasks::args::try_parse_from::<super::QemuTest>(argv).unwrap()
    };
    assert_eq!(parse(&[]).jobs_vm, None);
    let q = parse(&["--jobs-vm", "0"]);
    let m = q.guest.machine().unwrap();
    let e = crate::guest::plan::check_jobs_vm(q.jobs_vm.unwrap(), 4, m.cpus, m.clock)
        .unwrap_err()
        .to_string();
    assert!(e.contains("--jobs-vm 0: at least one guest") && e.contains("drop --jobs-vm"));
}

#[test]
fn the_dry_run_counts_the_boots_the_run_would_make() {
    let parse = |extra: &[&str]| {
        let argv: Vec<&str> = ["qemu-test"].iter().chain(extra).copied().collect();
        crate::tasks::args::try_parse_from::<super::QemuTest>(argv).unwrap()
    };
    assert!(parse(&["--dry-run"]).dry_run && parse(&["--plan"]).dry_run);
    // Kernels x scenarios x runs; the shards of a plan add up to it.
    let q = parse(&["--runs", "3"]);
    let scenarios = crate::guest::scenario::select(&[]).unwrap();
    let (runs, _) = q
        .request()
        .runs(&scenarios, crate::guest::qemu::Clock::Real)
        .unwrap();
    let kernels = ["a", "b", "c"];
    let all = 3 * scenarios.len() * 3;
    assert_eq!(q.request().cells(&kernels, &scenarios, &runs).len(), all);
    let sharded: usize = (1..=4)
        .map(|i| {
            let q = parse(&["--runs", "3", "--shard", &format!("{i}/4")]);
            q.request().cells(&kernels, &scenarios, &runs).len()
        })
        .sum();
    assert_eq!(sharded, all);
    // The preview itself: two variants and the A/A control (upstream
    // again), one scenario, two runs; nothing built or booted.
    let q = parse(&[
        "--dry-run",
        "--accel",
        "tcg",
        "--jobs-vm",
        "1",
        "--variant",
        "v1",
        "--variant",
        "upstream",
        "--scenario",
        "fuse-strictlimit",
        "--runs",
        "2",
    ]);
    let p = q.request().preview(&xshell::Shell::new().unwrap()).unwrap();
    let names: Vec<&str> = p.kernels.iter().map(|k| k.name.as_str()).collect();
    assert_eq!(names, ["v1", "upstream", "upstream-aa"]);
    assert_eq!(p.boots.len(), 6);
    let text = p.render();
    assert!(
        text.contains("boots: 6 (3 kernel(s) x 1 scenario(s), runs per cell: 2)"),
        "{text}"
    );
}

#[test]
fn resume_takes_no_other_flag_and_retry_failed_only_with_it() {
    let parse = |args: &[&str]| {
        let argv = std::iter::once("qemu-test").chain(args.iter().copied());
        crate::tasks::args::try_parse_from::<super::QemuTest>(argv)
    };
    let e = parse(&["--retry-failed"]).unwrap_err().to_string();
    assert!(e.contains("--resume <DIR>"), "{e}");
    let dir = std::path::Path::new("/nonexistent/results");
    let q = parse(&["--resume", "/nonexistent/results", "--runs", "3"]).unwrap();
    let e = q.resumed(dir).unwrap_err().to_string();
    assert!(e.contains("give no other flag but --retry-failed"), "{e}");
    // Alone (or with --retry-failed) it goes on to the directory itself.
    let q = parse(&["--resume", "/nonexistent/results", "--retry-failed"]).unwrap();
    let e = q.resumed(dir).unwrap_err().to_string();
    assert!(e.contains("no session.json there"), "{e}");
}

#[test]
fn a_bad_aa_is_refused_before_any_build() {
    let q = crate::tasks::args::try_parse_from::<super::QemuTest>([
        "qemu-test",
        "--variant",
        "v1",
        "--aa",
        "upstream",
    ])
    .unwrap();
    let e = q.request().check_aa().unwrap_err().to_string();
    assert!(
        e.contains("--aa upstream: that variant is not selected (selected: v1)"),
        "{e}"
    );
}

#[test]
fn a_staged_guest_is_for_kernels_built_before_and_carries_the_plan_s_fuse_server() {
    use super::QemuTest;
    use crate::guest::fuse_server::External;
    let parse = |args: &[&str]| {
        let argv = std::iter::once("qemu-test").chain(args.iter().copied());
        crate::tasks::args::try_parse_from::<QemuTest>(argv)
    };
    // --staged boots without building: refused with a build.
    let e = parse(&["--staged", "/jobs/guest"]).unwrap_err().to_string();
    assert!(e.contains("--no-build"), "{e}");
    let q = parse(&["--no-build", "--staged", "/jobs/guest"]).unwrap();
    assert_eq!(
        q.staged.as_deref(),
        Some(std::path::Path::new("/jobs/guest"))
    );
    // Its FUSE server is the stage's: no stage, none.
    let e = format!("{:#}", q.external().unwrap_err());
    assert!(e.contains("no staged guest"), "{e}");
    // What slurm stages for a plan is what the shard's plan needs.
    let q = parse(&["--no-build"]).unwrap();
    assert_eq!(q.external().unwrap(), External::None);
    let q = parse(&["--no-build", "--scenario", "fuse-passthrough"]).unwrap();
    assert_eq!(q.external().unwrap(), External::PassthroughLl);
    let q = parse(&["--fuse-server", "sh -c true"]).unwrap();
    assert!(matches!(q.external().unwrap(), External::User(u) if u.line == "sh -c true"));
}

/// A guest staged for `--fuse-server LINE` where the server was
/// `/submit-host/bin/...`, a path no host of the tests has.
fn staged_with_user_server(t: &util::testdir::Dir, line: &str) -> std::path::PathBuf {
    use crate::guest::{
        fuse_server::{External, UserServer},
        stage,
    };
    let dir = t.path().join("guest");
    std::fs::create_dir_all(&dir).unwrap();
    let base = dir.join("base.cpio");
    std::fs::write(&base, b"070701 the archive").unwrap();
    let mut words = line.split_whitespace();
    let name = words.next().unwrap();
    let u = UserServer {
        line: line.into(),
        program: std::path::Path::new("/submit-host/bin").join(name),
        args: words.map(String::from).collect(),
    };
    stage::record(&dir, &base, "fio-3.33", &External::User(u)).unwrap();
    dir
}

#[test]
fn a_staged_shard_takes_the_user_server_from_the_stage_not_from_this_host() {
    use super::QemuTest;
    use crate::guest::fuse_server::External;
    let t = util::testdir::Dir::new("staged-user-server");
    let line = "wbstall-no-such-server -f -o writeback";
    let dir = staged_with_user_server(&t, line);
    let dir = dir.to_str().unwrap();
    let q = crate::tasks::args::try_parse_from::<QemuTest>([
        "qemu-test",
        "--no-build",
        "--staged",
        dir,
        "--fuse-server",
        line,
    ])
    .unwrap();
    // Not on this host's PATH: the staged guest carries it, as it was found
    // where it was staged, and the session names the user's line.
    let External::User(u) = q.external().unwrap() else {
        panic!("no user server");
    };
    assert_eq!(u.line, line);
    assert_eq!(
        u.program,
        std::path::Path::new("/submit-host/bin/wbstall-no-such-server")
    );
    assert_eq!(u.args, ["-f", "-o", "writeback"]);
}

#[test]
fn a_stage_made_for_another_fuse_server_is_refused_with_the_fix() {
    use super::QemuTest;
    let t = util::testdir::Dir::new("staged-other-server");
    let dir = staged_with_user_server(&t, "wbstall-no-such-server -f -o writeback");
    let dir = dir.to_str().unwrap();
    let external = |extra: &[&str]| {
        let argv = ["qemu-test", "--no-build", "--staged", dir]
            .into_iter()
            .chain(extra.iter().copied());
        let q = crate::tasks::args::try_parse_from::<QemuTest>(argv).unwrap();
        format!("{:#}", q.external().unwrap_err())
    };
    // Another server (one this host has): refused, not looked up here.
    let e = external(&["--fuse-server", "sh -c true"]);
    assert!(
        e.contains(
            "staged with FUSE server `wbstall-no-such-server -f -o writeback`, this plan's is \
             `sh -c true`"
        ),
        "{e}"
    );
    assert!(e.contains("submit them again"), "{e}");
    // No --fuse-server: libfuse's passthrough_ll is not what it carries.
    let e = external(&["--scenario", "fuse-passthrough"]);
    assert!(e.contains("this plan's is libfuse's passthrough_ll"), "{e}");
}
