use super::*;

#[test]
fn kvm_needs_both_the_device_and_the_cpu_flag() {
    let with = "processor\t: 0\nflags\t\t: fpu vme vmx sse\n";
    let without = "processor\t: 0\nflags\t\t: fpu vme sse hypervisor\n";
    assert_eq!(choose_accel(with, true), Accel::Kvm);
    // kvm-pvm: /dev/kvm is there but the CPU has no vmx/svm.
    assert_eq!(choose_accel(without, true), Accel::Tcg);
    assert_eq!(choose_accel(with, false), Accel::Tcg);
    assert_eq!(choose_accel("flags : svm\n", true), Accel::Kvm);
}

fn strings(v: Vec<OsString>) -> Vec<String> {
    v.into_iter().map(|s| s.into_string().unwrap()).collect()
}

#[test]
fn tcg_and_kvm_argv() {
    assert_eq!(
        strings(accel_args(Accel::Tcg, Clock::Real, "max", 2, 2048)),
        [
            "-accel",
            "tcg,thread=multi",
            "-cpu",
            "max",
            "-smp",
            "2,sockets=2,cores=1,threads=1",
            "-m",
            "2048M"
        ]
    );
    assert_eq!(
        strings(accel_args(Accel::Kvm, Clock::Real, "max", 4, 512))[..4],
        ["-accel", "kvm", "-cpu", "host"]
    );
    assert_eq!(
        strings(accel_args(
            Accel::Tcg,
            Clock::Virtual { shift: 3 },
            "qemu64",
            2,
            2048
        ))[..8],
        [
            "-accel",
            "tcg,thread=single",
            "-icount",
            "shift=3,sleep=off,align=off",
            "-rtc",
            "clock=vm",
            "-cpu",
            "qemu64"
        ]
    );
}

#[test]
fn cmdline_has_console_panic_and_params() {
    let line = kernel_cmdline(
        "/init",
        2,
        &[
            ("scenario".into(), "fuse-strictlimit".into()),
            ("runtime".into(), "20".into()),
        ],
        None,
        &[],
    );
    assert!(line.contains(" pci=noacpi "), "{line}");
    assert!(
        kernel_cmdline("/init", 8, &[], None, &["tsc=reliable".into()])
            .ends_with("rdinit=/init pci=noacpi null_blk.nr_devices=0 tsc=reliable wbstall.cpus=8")
    );
    // The user's null_blk argument comes after ours, and wins.
    let null = Some(Disk::Null { mbps: 24 });
    assert!(
        kernel_cmdline("/init", 2, &[], null, &["null_blk.mbps=8".into()])
            .ends_with("null_blk.memory_backed=1 null_blk.mbps=24 null_blk.mbps=8 wbstall.cpus=2")
    );
    assert!(line.starts_with("console=ttyS0 panic=-1 "), "{line}");
    assert!(line.contains("rdinit=/init"));
    assert!(
        line.ends_with("wbstall.cpus=2 wbstall.scenario=fuse-strictlimit wbstall.runtime=20"),
        "{line}"
    );
}

#[test]
fn full_argv_has_every_part_once() {
    let cfg = VmConfig {
        kernel: "/k/bzImage".into(),
        initrd: "/k/initrd.cpio".into(),
        machine: Machine {
            accel: Accel::Tcg,
            clock: Clock::Real,
            cpu_model: "max".into(),
            cpus: 2,
            memory_mib: 2048,
            rdinit: "/init".into(),
            ..Machine::default()
        },
        params: vec![("scenario".into(), "x".into())],
        console: Console::File("/r/console.log".into()),
        results: Some("/r/results.bin".into()),
        disk: Some("/r/disk.img".into()),
        null_blk: None,
    };
    let a = strings(argv(&cfg));
    let joined = a.join(" ");
    assert!(joined.contains("-no-reboot"));
    assert!(joined.contains("-kernel /k/bzImage -initrd /k/initrd.cpio -append console=ttyS0"));
    assert!(joined.contains("-chardev file,id=con,path=/r/console.log -serial chardev:con"));
    assert!(joined.contains("-chardev file,id=results,path=/r/results.bin"));
    assert!(joined.contains("name=wbstall.results"));
    assert!(joined.contains("-drive file=/r/disk.img,if=virtio,format=raw"));
    assert_eq!(a.iter().filter(|x| *x == "-kernel").count(), 1);
}

#[test]
fn commas_in_paths_are_doubled_in_option_lists() {
    let dir = Path::new("/tmp/a,b");
    let disk = disk_args(&dir.join("x.img"));
    assert_eq!(
        disk[1],
        OsString::from("file=/tmp/a,,b/x.img,if=virtio,format=raw,cache=none,aio=threads")
    );
    let results = results_args(&dir.join("r.bin"));
    assert!(results.contains(&OsString::from("file,id=results,path=/tmp/a,,b/r.bin")));
    let con = console_args(&Console::File(dir.join("c.log")));
    assert_eq!(con[1], OsString::from("file,id=con,path=/tmp/a,,b/c.log"));
}
