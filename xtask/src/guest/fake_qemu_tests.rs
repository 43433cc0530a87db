//! [`qemu::run`] against a fake `qemu-system-x86_64` put first on the PATH of
//! the [`Shell`]: a QEMU that hangs, one that writes half a stream and exits 0,
//! one whose guest panics, one that fails to start, and several side by side
//! (`--jobs-vm`). No real guest boots here.

use std::{
    fs,
    path::{Path, PathBuf},
    time::Duration,
};

use xshell::Shell;

use crate::{
    guest::{
        boot,
        job::Job,
        plan::{Boot, Plan},
        qemu::{self, Accel, Clock, Console, Machine, VmConfig, VmError},
        scenario,
        stream::End,
    },
    kernel::build::Built,
    util::testdir,
};

/// The fake's prologue: find the console and results files in QEMU's argv
/// (`file,id=con,path=...` and `file,id=results,path=...`), note the pid.
const PROLOGUE: &str = r#"#!/bin/sh
for a; do
    case $a in
    file,id=con,path=*) con=${a#file,id=con,path=} ;;
    file,id=results,path=*) res=${a#file,id=results,path=} ;;
    esac
done
echo $$ > "$(dirname "$0")/pid"
"#;

/// A shell whose PATH starts with a directory holding a fake QEMU with `body`.
pub fn fake(t: &testdir::Dir, body: &str) -> Shell {
    let bin = t.path().join("bin");
    fs::create_dir_all(&bin).unwrap();
    let exe = bin.join("qemu-system-x86_64");
    fs::write(&exe, format!("{PROLOGUE}{body}")).unwrap();
    use std::os::unix::fs::PermissionsExt;
    fs::set_permissions(&exe, fs::Permissions::from_mode(0o755)).unwrap();
    let sh = Shell::new().unwrap();
    let path = std::env::var("PATH").unwrap_or_default();
    sh.set_var("PATH", format!("{}:{path}", bin.display()));
    sh
}

fn config(t: &testdir::Dir) -> (VmConfig, PathBuf) {
    let console = t.path().join("console.log");
    let cfg = VmConfig {
        kernel: t.path().join("bzImage"),
        initrd: t.path().join("initrd.cpio"),
        machine: Machine {
            accel: Accel::Tcg,
            clock: Clock::Real,
            cpu_model: "max".into(),
            cpus: 2,
            memory_mib: 512,
            rdinit: "/init".into(),
            ..Machine::default()
        },
        params: vec![("scenario".into(), "fuse-strictlimit".into())],
        console: Console::File(console.clone()),
        results: Some(t.path().join("results.bin")),
        disk: None,
        null_blk: None,
    };
    (cfg, console)
}

fn run(t: &testdir::Dir, body: &str, timeout: Duration) -> anyhow::Result<qemu::Run> {
    let sh = fake(t, body);
    let (cfg, _) = config(t);
    qemu::run(&sh, &cfg, timeout, &t.path().join("qemu.log"))
}

fn alive(pid_file: &Path) -> bool {
    let pid = fs::read_to_string(pid_file).unwrap();
    fs::read_to_string(format!("/proc/{}/stat", pid.trim())).is_ok_and(|s| !s.contains(") Z "))
}

#[test]
fn a_hanging_qemu_is_a_hang_and_is_reaped() {
    let t = testdir::Dir::new("fake-hang");
    let body = "echo '[    0.5] Run /init as init process' > \"$con\"\nexec sleep 600\n";
    let out = run(&t, body, Duration::from_secs(2)).unwrap();
    match out.outcome {
        Err(VmError::Hang {
            secs, last_line, ..
        }) => {
            assert_eq!(secs, 2);
            assert!(last_line.contains("Run /init"), "{last_line}");
        }
        other => panic!("expected a hang, got {:?}", other.map(|_| ())),
    }
    assert!(!alive(&t.path().join("bin/pid")), "the fake QEMU survived");
}

#[test]
fn half_a_stream_and_exit_0_is_no_result() {
    let t = testdir::Dir::new("fake-half");
    let body = "printf 'WBSTALL-FILE fio 100\\n{\"jobs\":' > \"$res\"\nexit 0\n";
    let out = run(&t, body, Duration::from_secs(30)).unwrap();
    match out.outcome {
        Err(e @ VmError::MissingResult { .. }) => {
            let text = e.explain(Path::new("console.log"));
            assert!(text.contains("without a result"), "{text}");
            assert!(text.contains("exit status: 0"), "{text}");
            // Where the stream ends: the file cut, the byte, the last whole file.
            assert!(
                text.contains(
                    "file `fio` cut short (8 of 100 bytes; the stream ends at byte 29, \
                     before any whole file)"
                ),
                "{text}"
            );
        }
        other => panic!("expected no result, got {:?}", other.map(|_| ())),
    }
}

#[test]
fn a_panic_on_the_console_is_a_panic() {
    let t = testdir::Dir::new("fake-panic");
    let body =
        "printf '[    1.2] Kernel panic - not syncing: Attempted to kill init!\\n' > \"$con\"\n\
                printf 'WBSTALL-END ok\\n' > \"$res\"\nexit 0\n";
    let out = run(&t, body, Duration::from_secs(30)).unwrap();
    match out.outcome {
        Err(VmError::Panic { line }) => assert!(line.contains("Attempted to kill init"), "{line}"),
        other => panic!("expected a panic, got {:?}", other.map(|_| ())),
    }
}

#[test]
fn a_bug_on_the_console_ends_the_boot_at_once() {
    // The guest BUGs and then runs on (as a guest whose other CPUs still
    // work does): the boot ends about SPLAT_GRACE later, not at the timeout.
    let t = testdir::Dir::new("fake-bug");
    let splat = crate::util::project_root().join("xtask/fixtures/console/bug.log");
    let body = format!("cat '{}' > \"$con\"\nexec sleep 600\n", splat.display());
    let out = run(&t, &body, Duration::from_secs(60)).unwrap();
    assert!(
        out.wall_secs < 10.0 && out.wall_secs >= qemu::SPLAT_GRACE.as_secs_f64(),
        "{} s",
        out.wall_secs
    );
    match out.outcome {
        Err(VmError::Oops { splat, qemu_status }) => {
            assert_eq!(
                splat.function.as_deref(),
                Some("balance_dirty_pages+0x6f2/0x7a0")
            );
            assert!(
                qemu_status.contains("after the kernel's Oops"),
                "{qemu_status}"
            );
        }
        other => panic!("expected an oops, got {:?}", other.map(|_| ())),
    }
    assert!(!alive(&t.path().join("bin/pid")), "the fake QEMU survived");
}

#[test]
fn a_warning_on_the_console_lets_the_boot_finish() {
    let t = testdir::Dir::new("fake-warn");
    let splat = crate::util::project_root().join("xtask/fixtures/console/warning.log");
    let body = format!(
        "cat '{}' > \"$con\"\nsleep 3\nprintf 'WBSTALL-END ok\\n' > \"$res\"\nexit 0\n",
        splat.display()
    );
    let out = run(&t, &body, Duration::from_secs(60)).unwrap();
    assert!(out.outcome.is_ok(), "{:?}", out.outcome.map(|_| ()));
    assert!(out.wall_secs >= 3.0, "{} s", out.wall_secs);
}

#[test]
fn a_qemu_that_fails_to_start_shows_its_stderr() {
    let t = testdir::Dir::new("fake-fail");
    let body = "echo \"qemu-system-x86_64: -kernel $0: could not open kernel file\" >&2\nexit 1\n";
    let e = run(&t, body, Duration::from_secs(30))
        .err()
        .expect("a failed start is an error")
        .to_string();
    assert!(e.contains("could not open kernel file"), "{e}");
    assert!(e.contains("exit status: 1"), "{e}");
}

#[test]
fn a_complete_stream_is_a_result() {
    // The control: the same fake, a whole stream, is not an error.
    let t = testdir::Dir::new("fake-ok");
    let body = "printf 'WBSTALL-FILE a 2\\nhi\\nWBSTALL-END ok\\n' > \"$res\"\nexit 0\n";
    let out = run(&t, body, Duration::from_secs(30)).unwrap();
    let stream = out.outcome.expect("a result");
    assert_eq!(stream.text("a").as_deref(), Some("hi"));
}

#[test]
fn no_qemu_at_all_names_the_program() {
    let t = testdir::Dir::new("fake-none");
    let sh = Shell::new().unwrap();
    sh.set_var("PATH", t.path());
    let (cfg, _) = config(&t);
    let e = qemu::run(
        &sh,
        &cfg,
        Duration::from_secs(5),
        &t.path().join("qemu.log"),
    )
    .err()
    .expect("no QEMU is an error")
    .to_string();
    assert!(e.contains("qemu-system-x86_64"), "{e}");
}

/// A plan of `runs` boots of one fake variant on `fuse-strictlimit` (no
/// disk), with the given timeout, its kernel image in `t`.
pub fn fake_plan(t: &testdir::Dir, runs: u32, timeout: Duration) -> Plan {
    let dir = t.path().join("kernel");
    fs::create_dir_all(&dir).unwrap();
    fs::write(dir.join("bzImage"), b"a kernel").unwrap();
    let mut kernel = Built {
        dir,
        meta: Default::default(),
    };
    kernel.meta.variant = "v".into();
    kernel.meta.bzimage_sha256 = crate::util::sha256_file(&kernel.bzimage()).unwrap();
    let boots = (0..runs)
        .map(|run| Boot {
            kernel: kernel.clone(),
            initrd: t.path().join("initrd.cpio"),
            scenario: scenario::by_name("fuse-strictlimit").unwrap(),
            run,
            job: Job::default(),
            verify: false,
            sample_ms: 0,
            timeout,
            phase: None,
            machine: Machine {
                accel: Accel::Tcg,
                clock: Clock::Real,
                cpu_model: "qemu64".into(),
                kernel_args: Vec::new(),
                cpus: 1,
                memory_mib: 256,
                rdinit: "/init".into(),
                disk: Default::default(),
            },
            detector: Default::default(),
        })
        .collect();
    Plan { boots }
}

/// A fake guest that notes its start and end (name and time in ns) in
/// `bin/times`; boot #1 hangs (its pid in `bin/hung.pid`), the others end
/// with a whole stream after half a second.
const SIDE_BY_SIDE: &str = r#"name=$(basename "$con" .console.log)
times="$(dirname "$0")/times"
echo "start $name $(date +%s%N)" >> "$times"
echo '[    0.5] Run /init as init process' > "$con"
case $name in
*-1) echo $$ > "$(dirname "$0")/hung.pid"; exec sleep 600 ;;
esac
sleep 0.5
printf 'WBSTALL-END ok\n' > "$res"
echo "end $name $(date +%s%N)" >> "$times"
exit 0
"#;

/// When `event` (`start` or `end`) of boot `name` happened, from `bin/times`.
fn at(t: &testdir::Dir, event: &str, name: &str) -> u128 {
    let times = fs::read_to_string(t.path().join("bin/times")).unwrap();
    let line = times
        .lines()
        .find(|l| l.starts_with(&format!("{event} {name} ")))
        .unwrap_or_else(|| panic!("no `{event} {name}` in\n{times}"));
    line.rsplit(' ').next().unwrap().parse().unwrap()
}

#[test]
fn two_guests_boot_side_by_side_and_a_hang_in_one_is_reaped_while_the_others_finish() {
    let t = testdir::Dir::new("fake-jobs-vm");
    let sh = fake(&t, SIDE_BY_SIDE);
    let plan = fake_plan(&t, 3, Duration::from_secs(5));
    let (mut order, mut ends) = (Vec::new(), vec![None, None, None]);
    boot::boot_plan(
        &sh,
        t.path(),
        &plan,
        2,
        |_| {},
        |i, booted| {
            order.push(i);
            ends[i] = Some(booted.unwrap().map(|b| b.stream.end));
            Ok(())
        },
    )
    .unwrap();
    // Boots 2 and 3 ran and ended while boot 1 hung: with one guest at a time
    // neither could have started before boot 1's timeout.
    assert_eq!(order, [1, 2, 0]);
    // Two at a time: boot 3 waited for a free slot, and ran beside boot 1.
    assert!(at(&t, "start", "v-fuse-strictlimit-3") >= at(&t, "end", "v-fuse-strictlimit-2"));
    // Results by plan position, whatever the order they ended in.
    let hang = ends[0].clone().unwrap().unwrap_err();
    assert_eq!(hang.kind, crate::guest::outcome::VmErrorKind::Hang);
    let hang = hang.to_string();
    assert!(
        hang.contains("the guest hung: no result after 5 s"),
        "{hang}"
    );
    assert!(hang.contains("v-fuse-strictlimit-1.console.log"), "{hang}");
    for end in &ends[1..] {
        assert_eq!(end.clone().unwrap(), Ok(Some(End::Ok)));
    }
    assert!(
        !alive(&t.path().join("bin/hung.pid")),
        "the hung fake QEMU survived"
    );
}

#[test]
fn an_error_while_guests_run_kills_them_all() {
    // Boot 2 would hang for a minute; the error after boot 1 stops it at once
    // (it starts in boot 1's slot before boot 1's record is built, which is
    // where the error comes from, and is killed with the others).
    let t = testdir::Dir::new("fake-jobs-vm-stop");
    let sh = fake(&t, &SIDE_BY_SIDE.replace("*-1)", "*-2)"));
    let plan = fake_plan(&t, 3, Duration::from_secs(60));
    let begun = std::time::Instant::now();
    let mut started = Vec::new();
    let e = boot::boot_plan(
        &sh,
        t.path(),
        &plan,
        2,
        |i| started.push(i),
        |_, _| anyhow::bail!("the disk is full"),
    )
    .unwrap_err();
    assert_eq!(e.to_string(), "the disk is full");
    assert_eq!(started, [0, 1, 2], "no boot starts after the error");
    assert!(
        begun.elapsed() < Duration::from_secs(20),
        "{:?}",
        begun.elapsed()
    );
    assert!(
        !alive(&t.path().join("bin/hung.pid")),
        "a fake QEMU survived the error"
    );
}
