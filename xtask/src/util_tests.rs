#[test]
fn a_unique_name_names_the_host_and_process_and_never_repeats() {
    let host = std::fs::read_to_string("/proc/sys/kernel/hostname").unwrap();
    let (a, b) = (super::unique_name("build"), super::unique_name("build"));
    let mine = format!(
        "build.{}.{}.",
        super::sanitize(host.trim()),
        std::process::id()
    );
    assert!(a.starts_with(&mine) && b.starts_with(&mine), "{a} {b}");
    assert_ne!(a, b);
}

#[test]
fn a_locked_directory_is_refused_by_pid_and_freed_on_drop() {
    let t = super::testdir::Dir::new("lock");
    let held = super::lock_dir(t.path(), "qemu-test --resume").unwrap();
    // A second taker (another thread, its own open file) is refused, by name.
    let dir = t.path().to_path_buf();
    let e = std::thread::spawn(move || super::lock_dir(&dir, "qemu-test").unwrap_err())
        .join()
        .unwrap()
        .to_string();
    let pid = std::process::id();
    assert!(
        e.contains(&format!("is in use by pid {pid} (qemu-test --resume)"))
            && e.contains(&format!("kill {pid}")),
        "{e}"
    );
    // Another process (util-linux flock(1), the same flock(2)) is refused too.
    let other = || {
        std::process::Command::new("flock")
            .args([
                "-n",
                &t.path().join(super::LOCK_FILE).to_string_lossy(),
                "true",
            ])
            .status()
            .unwrap()
            .success()
    };
    assert!(!other(), "a second process took a held lock");
    drop(held);
    assert!(other(), "the lock outlived its holder");
    assert!(super::lock_dir(t.path(), "qemu-test").is_ok());
}
use super::*;

#[test]
fn a_relinked_binary_is_run_from_its_path() {
    assert_eq!(
        live_path(PathBuf::from("/r/target/debug/xtask (deleted)")),
        PathBuf::from("/r/target/debug/xtask")
    );
    assert_eq!(
        live_path(PathBuf::from("/r/xtask")),
        PathBuf::from("/r/xtask")
    );
}

#[test]
fn a_shell_word_comes_back_as_it_went_in() {
    assert_eq!(
        sh_quote("--scenario=fuse-strictlimit"),
        "--scenario=fuse-strictlimit"
    );
    assert_eq!(sh_quote(""), "''");
    assert_eq!(sh_quote("a b"), "'a b'");
    assert_eq!(sh_quote("it's $HOME"), r"'it'\''s $HOME'");
    // What sh makes of the quoted words is the words.
    let words = ["plain", "two words", "it's", "$HOME `x` \\n", "*"];
    let script = format!("printf '%s\\n' {}", words.map(sh_quote).join(" "));
    let out = std::process::Command::new("sh")
        .args(["-c", &script])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8(out.stdout).unwrap(),
        words.map(|w| format!("{w}\n")).concat()
    );
}

#[test]
fn a_dynamic_or_missing_program_is_not_for_the_guest() {
    let e = require_static(Path::new("/bin/sh"))
        .unwrap_err()
        .to_string();
    assert!(e.contains("is not statically linked"), "{e}");
    assert!(require_static(Path::new("/no/such/program")).is_err());
}

#[test]
fn elf_interpreter_decides_static() {
    // A minimal ELF64 header with one program header of the given type.
    fn elf(p_type: u32) -> Vec<u8> {
        let mut b = vec![0u8; 64 + 56];
        b[..4].copy_from_slice(b"\x7fELF");
        b[4] = 2; // 64-bit
        b[5] = 1; // little endian
        b[0x20..0x28].copy_from_slice(&64u64.to_le_bytes()); // e_phoff
        b[0x36..0x38].copy_from_slice(&56u16.to_le_bytes()); // e_phentsize
        b[0x38..0x3a].copy_from_slice(&1u16.to_le_bytes()); // e_phnum
        b[64..68].copy_from_slice(&p_type.to_le_bytes());
        b
    }
    assert_eq!(elf_is_static(&elf(1)), Some(true)); // PT_LOAD only
    assert_eq!(elf_is_static(&elf(3)), Some(false)); // PT_INTERP
    assert_eq!(elf_is_static(b"#!/bin/sh\n"), None);
}

#[test]
fn concurrent_atomic_writes_of_one_file_never_mix() {
    let t = testdir::Dir::new("atomic");
    let path = t.path().join("results.json");
    let (a, b) = ("a".repeat(1 << 20), "b".repeat(1 << 20));
    std::thread::scope(|s| {
        for _ in 0..4 {
            s.spawn(|| write_atomic(&path, &a).unwrap());
            s.spawn(|| write_atomic(&path, &b).unwrap());
        }
    });
    let got = fs::read_to_string(&path).unwrap();
    assert!(got == a || got == b, "a mixed or cut file");
    let left = fs::read_dir(t.path()).unwrap().count();
    assert_eq!(left, 1, "temporary files left behind");
}

#[test]
fn directories_made_in_the_same_second_differ() {
    let t = testdir::Dir::new("unique");
    let dirs: Vec<PathBuf> = (0..3).map(|_| unique_dir(t.path()).unwrap()).collect();
    assert!(dirs.iter().all(|d| d.is_dir()));
    assert_ne!(dirs[0], dirs[1]);
    assert_ne!(dirs[1], dirs[2]);
}

#[test]
fn sanitize_keeps_safe_characters() {
    assert_eq!(sanitize("7.3.4-1~bpo13+1"), "7.3.4-1-bpo13-1");
    assert_eq!(sanitize("v1_x.y"), "v1_x.y");
}

#[test]
fn what_a_command_appended_to_a_log_is_read_from_its_offset() {
    let t = testdir::Dir::new("read-from");
    let log = t.path().join("build.log");
    fs::write(&log, "configure: ok\n").unwrap();
    let start = fs::metadata(&log).unwrap().len();
    fs::write(&log, "configure: ok\nmake: error\n").unwrap();
    assert_eq!(read_from(&log, start), "make: error\n");
    assert_eq!(read_from(&log, 0), "configure: ok\nmake: error\n");
    assert_eq!(read_from(&log, 1 << 40), "");
    assert_eq!(read_from(&t.path().join("none"), 0), "");
}

#[test]
fn a_results_parent_under_a_file_is_not_writable_and_a_directory_is() {
    let t = testdir::Dir::new("writable");
    check_writable(&t.path().join("new/results")).unwrap();
    assert!(t.path().join("new/results").is_dir());
    fs::write(t.path().join("file"), "").unwrap();
    let e = check_writable(&t.path().join("file/results")).unwrap_err();
    assert!(
        e.to_string().starts_with("cannot write results into "),
        "{e}"
    );
}
