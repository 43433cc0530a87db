//! `qemu/lib.sh`'s failure messages, run in dash (the POSIX shell with
//! `local`, as busybox ash has it) with `fail` replaced by an echo: what a run
//! that met a fault in the guest says (issue 25). The faults themselves are
//! injected by the test hook `wbstall.fault=` in live boots.

use std::process::Command;

/// The message `fail` got when `script` ran after lib.sh was sourced.
fn failed_with(script: &str) -> String {
    let root = crate::util::project_root();
    let lib = root.join("qemu/lib.sh");
    let text = format!(
        ". '{}'\nfail() {{ echo \"$*\"; exit 1; }}\n{script}\necho passed\n",
        lib.display()
    );
    let out = Command::new("dash")
        .arg("-c")
        .arg(text)
        .current_dir(&root)
        .output()
        .expect("dash is required for these tests: apt-get install dash");
    String::from_utf8_lossy(&out.stdout).trim().to_string()
}

#[test]
fn fio_killed_by_a_signal_is_named_by_the_signal() {
    assert_eq!(
        failed_with("fio_check 137 /dev/null"),
        "fio killed by signal 9"
    );
}

#[test]
fn fio_out_of_space_names_the_full_disk() {
    assert_eq!(
        failed_with("fio_check 1 xtask/fixtures/fio/enospc.err"),
        "the ext4 disk is full (fio: No space left on device)"
    );
    assert_eq!(
        failed_with("fio_check 1 /dev/null"),
        "fio exited with status 1"
    );
    assert_eq!(failed_with("fio_check 0 /dev/null"), "passed");
}

#[test]
fn an_unknown_fault_is_refused_naming_the_known_ones() {
    assert_eq!(
        failed_with("WB_fault=kill-all; fault_start 1"),
        "wbstall.fault=kill-all: the test hook knows kill-fuse, kill-fio, oom and disk-full"
    );
}

#[test]
fn the_verify_job_saves_no_state_file() {
    // fio writes `local-verify-0-verify.state` into its working directory
    // when the job is interrupted, unless told not to.
    let script = "fio() { case \" $* \" in *' --verify_state_save=0 '*) ;; \
                  *) fail \"fio saves its verify state: $*\" ;; esac; }; emit() { :; }; \
                  fio_verify /mnt/verify the-mount";
    assert_eq!(failed_with(script), "passed");
    let without = script.replace("--verify_state_save=0", "--verify_state_save=1");
    assert!(failed_with(&without).starts_with("fio saves its verify state"));
}

/// lib.sh gives fio, for each kind of write, the options `WriteKind` says
/// the job has (the report's command line), and refuses a kind it does not
/// know.
#[test]
fn each_kind_of_write_reaches_fio_as_the_job_says() {
    use crate::guest::job::{Job, WriteKind};
    for k in WriteKind::ALL {
        let got = failed_with(&format!(
            "export WB_write={}; fio_write_kind; fail \"$FIO_ENGINE $FIO_FSYNC $FIO_SYNC\"",
            k.name()
        ));
        let line = Job::new("16M", 4, (2, 5)).with_write(k).command_line();
        let opt = |o: &str, none: &str| {
            (line.split(' '))
                .find_map(|w| w.strip_prefix(o))
                .unwrap_or(none)
                .to_string()
        };
        let want = format!(
            "{} {} {}",
            opt("--ioengine=", "psync"),
            opt("--fsync=", "0"),
            opt("--sync=", "0")
        );
        assert_eq!(got, want, "{}", k.name());
    }
    assert_eq!(
        failed_with("export WB_write=dsync; fio_write_kind"),
        "wbstall.write=dsync: the job knows write, mmap, fsync and osync"
    );
}
