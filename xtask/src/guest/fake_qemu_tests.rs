//! [`qemu::run`] against a fake `qemu-system-x86_64` put first on the PATH of
//! the [`Shell`]: a QEMU that hangs, one that writes half a stream and exits 0,
//! one whose guest panics, one that fails to start. No real guest boots here.

use std::{
    fs,
    path::{Path, PathBuf},
    time::Duration,
};

use xshell::Shell;

use crate::{
    guest::qemu::{self, Accel, Clock, Console, VmConfig, VmError},
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
fn fake(t: &testdir::Dir, body: &str) -> Shell {
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
        accel: Accel::Tcg,
        clock: Clock::Real,
        cpu_model: "max".into(),
        debug_kernel: false,
        kernel_args: Vec::new(),
        cpus: 2,
        memory_mib: 512,
        init: "/init".into(),
        params: vec![("scenario".into(), "fuse-strictlimit".into())],
        console: Console::File(console.clone()),
        results: Some(t.path().join("results.bin")),
        disk: None,
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
        Err(VmError::Hang { secs, last_line }) => {
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
