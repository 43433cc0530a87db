use super::*;

#[test]
fn versions_are_found_in_tool_output() {
    // Each tool prints its version differently; the first N.N[.N] wins.
    let cases = [
        ("Debian clang version 19.1.7 (3~deb12u1)", Version(19, 1, 7)),
        ("rustc 1.95.0 (59807616e 2026-04-14)", Version(1, 95, 0)),
        ("bindgen 0.72.1", Version(0, 72, 1)),
        (
            "QEMU emulator version 7.2.22 (Debian 1:7.2+dfsg-7)",
            Version(7, 2, 22),
        ),
        ("fio-3.33", Version(3, 33, 0)),
    ];
    for (text, want) in cases {
        assert_eq!(Version::find_in(text), Some(want), "{text}");
    }
    assert_eq!(Version::find_in("no version here"), None);
}

#[test]
fn minimums_compare_numerically() {
    assert!(Version(17, 0, 0) < MIN_LLVM);
    assert!(Version(19, 1, 7) > MIN_LLVM);
    assert!(Version(0, 9, 0) < MIN_BINDGEN);
    assert!(Version(1, 100, 0) > MIN_RUSTC);
}

#[test]
fn missing_report_names_tools_and_commands() {
    let missing = vec![
        Missing {
            what: "`fio`".into(),
            fix: Fix::Apt("fio".into()),
        },
        Missing {
            what: "bindgen".into(),
            fix: Fix::CargoInstall,
        },
    ];
    let text = missing_report(&missing, Distro::Debian);
    assert!(text.contains("`fio`"));
    assert!(text.contains("apt-get update && apt-get install -y fio"));
    assert!(text.contains(&format!("cargo install --locked bindgen-cli@{BINDGEN_PIN}")));
    // The one explicit way to install, beside the main command's set-up.
    assert!(text.contains("`cargo xtask deps --install` installs these as root"));
    // On Fedora the same needs read as dnf's packages.
    let missing = vec![Missing {
        what: "libelf headers (objtool)".into(),
        fix: Fix::Apt("libelf-dev".into()),
    }];
    let text = missing_report(&missing, Distro::Fedora);
    assert!(
        text.contains("dnf install -y elfutils-libelf-devel"),
        "{text}"
    );
    assert!(!text.contains("apt-get update"), "{text}");
}

#[test]
fn a_boot_of_kernels_built_before_records_their_compilers_and_this_host_s_qemu() {
    let kernel = Toolchain {
        llvm_make_arg: "-19".into(),
        llvm: Version(19, 1, 7),
        rustc: Version(1, 95, 0),
        bindgen: Version(0, 72, 1),
        qemu: Version(7, 2, 0),
        fio: "fio-3.33".into(),
        gcc: None,
    };
    let host = Toolchain {
        qemu: Version(8, 2, 2),
        fio: "fio-3.36".into(),
        ..Toolchain::default()
    };
    let t = host.booting(&kernel);
    assert_eq!((t.qemu, t.fio.as_str()), (Version(8, 2, 2), "fio-3.36"));
    assert_eq!(
        (t.llvm, t.rustc, t.bindgen),
        (kernel.llvm, kernel.rustc, kernel.bindgen)
    );
    assert_eq!(t.make_args(), ["LLVM=-19"]);
}
