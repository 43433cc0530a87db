//! `cargo xtask deps`: checks (and with `--install`, installs) every host tool the
//! pipeline needs. Every other task runs [`ensure`] first; a boot of kernels
//! built before needs fewer (`boot`). What they find: `toolchain`.

pub mod boot;
mod toolchain;

pub use toolchain::{Toolchain, Version};

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};
use xshell::{cmd, Shell};

use crate::{
    distro::Distro,
    progress::{self, Event},
    util,
};

/// Minimum versions from `scripts/min-tool-version.sh` of Linux 7.3 (x86). The
/// build re-reads them from the tree actually being built ([`check_tree_minimums`]).
const MIN_LLVM: Version = Version(17, 0, 1);
const MIN_RUSTC: Version = Version(1, 85, 0);
const MIN_BINDGEN: Version = Version(0, 71, 1);

/// The bindgen-cli release `--install` puts in place.
const BINDGEN_PIN: &str = "0.72.1";

/// The LLVM release `--install` asks apt for (Debian 12 main carries 19).
const APT_LLVM: &str = "19";

/// How to get a missing tool.
#[derive(Debug, Clone, PartialEq, Eq)]
enum Fix {
    Apt(String),
    CargoInstall,
    RustSrc,
}

impl Fix {
    fn command(&self) -> String {
        match self {
            Fix::Apt(pkgs) => format!("apt-get install -y {pkgs}"),
            Fix::CargoInstall => format!("cargo install --locked bindgen-cli@{BINDGEN_PIN}"),
            Fix::RustSrc => "rustup component add rust-src".to_string(),
        }
    }
}

/// One failed check.
#[derive(Debug)]
struct Missing {
    what: String,
    fix: Fix,
}

/// Runs every check; installs what is missing when `install` is set.
pub fn ensure_with(sh: &Shell, install: bool) -> Result<Toolchain> {
    ensure_checked(sh, install, || check(sh))
}

/// The checks of `check`, what is missing installed when `install` is set
/// (as root on Debian), then checked again.
fn ensure_checked(
    sh: &Shell,
    install: bool,
    check: impl Fn() -> (Option<Toolchain>, Vec<Missing>),
) -> Result<Toolchain> {
    let (tc, missing) = check();
    if missing.is_empty() {
        return tc.context("tool check passed but found no toolchain (bug)");
    }
    let distro = Distro::host();
    if !install || distro != Distro::Debian {
        // Installing is apt's work; elsewhere the report gives the command.
        bail!("{}", missing_report(&missing, distro));
    }
    progress::emit(Event::Note(&missing_report(&missing, distro)));
    progress::emit(Event::Setup("setting this machine up (running as root)"));
    install_missing(sh, &missing)?;
    let (tc, missing) = check();
    if !missing.is_empty() {
        bail!(
            "still missing after --install:\n{}",
            missing_report(&missing, distro)
        );
    }
    tc.context("tool check passed but found no toolchain (bug)")
}

/// The check every task runs first. As root it sets a fresh machine up itself
/// (what `deps --install` does, step by step); otherwise it stops with the list
/// of what is missing and the exact commands that install it.
pub fn ensure(sh: &Shell) -> Result<Toolchain> {
    ensure_with(sh, util::is_root())
}

/// Installs the Debian packages of the `needs` (what, found, package) not
/// found, as root on Debian as [`ensure`] installs the rest (`setup` says for
/// what); elsewhere stops with what is missing and how to install it.
pub fn ensure_packages(sh: &Shell, needs: &[(&str, bool, &str)], setup: &str) -> Result<()> {
    let missing: Vec<Missing> = needs
        .iter()
        .filter(|(_, found, _)| !found)
        .map(|(what, _, pkg)| Missing {
            what: what.to_string(),
            fix: Fix::Apt(pkg.to_string()),
        })
        .collect();
    if missing.is_empty() {
        return Ok(());
    }
    let distro = Distro::host();
    if !util::is_root() || distro != Distro::Debian {
        bail!("{}", missing_report(&missing, distro));
    }
    progress::emit(Event::Setup(setup));
    install_missing(sh, &missing)
}

/// The tools for this configuration: [`ensure_no_rust`] for `--no-rust`.
pub fn ensure_for(sh: &Shell, no_rust: bool) -> Result<Toolchain> {
    ensure_for_with(sh, no_rust, util::is_root())
}

/// The tools of [`ensure_for`], never installed: the tasks other than the
/// main command (`qemu-test`, whose set-up docs/reference.md documents), `ci` and
/// `deps --install` stop with what is missing and the commands that install it.
pub fn check_for(sh: &Shell, no_rust: bool) -> Result<Toolchain> {
    ensure_for_with(sh, no_rust, false)
}

fn ensure_for_with(sh: &Shell, no_rust: bool, install: bool) -> Result<Toolchain> {
    if no_rust {
        ensure_no_rust(sh)
    } else {
        ensure_with(sh, install)
    }
}

/// The tools for kernels without Rust (`--no-rust`): GCC instead of LLVM,
/// rustc and bindgen; the rest as [`ensure`] checks.
pub fn ensure_no_rust(sh: &Shell) -> Result<Toolchain> {
    let mut missing = Vec::new();
    let mut need = |what: String, fix: Fix| missing.push(Missing { what, fix });
    let gcc = version_output(sh, "gcc", "--version").and_then(|o| Version::find_in(&o));
    if gcc.is_none() {
        need(
            "gcc (--no-rust builds with GCC)".into(),
            Fix::Apt("gcc".into()),
        );
    }
    let (qemu, fio) = check_tools(sh, &mut need);
    match (gcc, qemu, fio) {
        (Some(gcc), Some(qemu), Some(fio)) if missing.is_empty() => Ok(Toolchain {
            gcc: Some(gcc),
            qemu,
            fio,
            ..Toolchain::default()
        }),
        _ => bail!("{}", missing_report(&missing, Distro::host())),
    }
}

fn missing_report(missing: &[Missing], distro: Distro) -> String {
    let mut out = String::from("missing host prerequisites:\n");
    for m in missing {
        out.push_str(&format!("  - {}\n      fix: {}\n", m.what, m.fix.command()));
    }
    let pkgs: Vec<String> = missing
        .iter()
        .filter_map(|m| match &m.fix {
            Fix::Apt(p) => Some(p.split_whitespace().map(str::to_string)),
            _ => None,
        })
        .flatten()
        .collect();
    out.push_str(
        "\n`cargo xtask deps --install` installs these as root (so does `cargo xtask qemu-test` \
         run as root, the documented set-up of a new machine), or run:\n",
    );
    if !pkgs.is_empty() {
        out.push_str(&format!("  {}\n", distro.install_command(&pkgs)));
    }
    for m in missing.iter().filter(|m| !matches!(m.fix, Fix::Apt(_))) {
        out.push_str(&format!("  {}\n", m.fix.command()));
    }
    out
}

fn install_missing(sh: &Shell, missing: &[Missing]) -> Result<()> {
    let rust_src = missing.iter().any(|m| m.fix == Fix::RustSrc);
    let bindgen = missing.iter().any(|m| m.fix == Fix::CargoInstall);
    let mut apt: Vec<String> = Vec::new();
    for m in missing {
        if let Fix::Apt(pkgs) = &m.fix {
            for p in pkgs.split_whitespace() {
                if !apt.iter().any(|a| a == p) {
                    apt.push(p.to_string());
                }
            }
        }
    }
    // bindgen-cli compiles (73-81 s of both cores, measured) while apt downloads and
    // unpacks (mostly waiting on the network and the disk): it needs no
    // package of apt's (libclang is loaded when bindgen runs, not linked), so
    // the two overlap (docs/measurements.md, "Setting a new machine up").
    let bindgen = bindgen
        .then(|| {
            let spec = format!("bindgen-cli@{BINDGEN_PIN}");
            let log = util::fresh_log("cargo-install-bindgen")?;
            progress::emit(Event::Setup(&format!(
                "cargo install --locked {spec}, beside the rest (about 2 minutes; log: {})",
                log.display()
            )));
            let install: std::process::Command = cmd!(sh, "cargo install --locked {spec}").into();
            Ok::<_, anyhow::Error>(std::thread::spawn(move || {
                util::run_logged(install, &log, "cargo install bindgen-cli", |_| {})
            }))
        })
        .transpose()?;
    let rest = install_apt_and_rust_src(sh, &apt, rust_src);
    let built = match bindgen {
        Some(b) => b
            .join()
            .map_err(|_| anyhow::anyhow!("cargo install bindgen-cli: its thread panicked"))?,
        None => Ok(()),
    };
    rest.and(built.context("installing bindgen-cli with cargo install"))
}

/// apt's packages, then rust-src: the set-up steps that wait on the network.
fn install_apt_and_rust_src(sh: &Shell, apt: &[String], rust_src: bool) -> Result<()> {
    if !apt.is_empty() {
        let (root, pre) = crate::distro::apt_as_root(sh).with_context(|| {
            format!(
                "installing Debian packages needs root: run as root, or `sudo apt-get install -y {}`",
                apt.join(" ")
            )
        })?;
        let pre = pre.as_slice();
        progress::emit(Event::Setup("apt-get update"));
        cmd!(sh, "{root} {pre...} apt-get update -q")
            .run()
            .context("apt-get update")?;
        progress::emit(Event::Setup(&format!(
            "apt-get install {} package(s): {}",
            apt.len(),
            apt.join(" ")
        )));
        cmd!(
            sh,
            "{root} {pre...} apt-get install -y -q --no-install-recommends {apt...}"
        )
        .run()
        .context("installing Debian packages with apt-get")?;
    }
    if rust_src {
        progress::emit(Event::Setup("rustup component add rust-src"));
        cmd!(sh, "rustup component add rust-src")
            .run()
            .context("adding rust-src with rustup")?;
    }
    Ok(())
}

/// Runs `prog args` and returns its stdout+stderr, or None when it cannot run.
fn version_output(sh: &Shell, prog: &str, arg: &str) -> Option<String> {
    let out = cmd!(sh, "{prog} {arg}")
        .quiet()
        .ignore_status()
        .output()
        .ok()?;
    if !out.status.success() {
        return None;
    }
    let mut text = String::from_utf8_lossy(&out.stdout).into_owned();
    text.push_str(&String::from_utf8_lossy(&out.stderr));
    Some(text)
}

pub fn which(name: &str) -> Option<PathBuf> {
    let path = std::env::var_os("PATH")?;
    std::env::split_paths(&path)
        .map(|dir| dir.join(name))
        .find(|p| p.is_file())
}

/// Finds the newest LLVM with clang, ld.lld, llvm-ar and llvm-nm of the same
/// suffix: `clang-21` … `clang-17`, then plain `clang`.
fn find_llvm(sh: &Shell) -> Option<(String, Version)> {
    let suffixes: Vec<String> = (17..=30).rev().map(|v| format!("-{v}")).collect();
    for suffix in suffixes.iter().map(String::as_str).chain([""]) {
        let tools = ["clang", "ld.lld", "llvm-ar", "llvm-nm", "llvm-objcopy"];
        if !tools
            .iter()
            .all(|t| which(&format!("{t}{suffix}")).is_some())
        {
            continue;
        }
        let out = version_output(sh, &format!("clang{suffix}"), "--version")?;
        let v = Version::find_in(&out)?;
        let make_arg = if suffix.is_empty() {
            "1".to_string()
        } else {
            suffix.to_string()
        };
        return Some((make_arg, v));
    }
    None
}

/// Where the static busybox lives, if anywhere.
pub fn static_busybox() -> Option<PathBuf> {
    let candidates = [which("busybox"), Some(PathBuf::from("/bin/busybox"))];
    candidates
        .into_iter()
        .flatten()
        .find(|p| std::fs::read(p).ok().and_then(|b| util::elf_is_static(&b)) == Some(true))
}

fn header_exists(rel: &str) -> bool {
    [
        "/usr/include",
        "/usr/include/x86_64-linux-gnu",
        "/usr/local/include",
    ]
    .iter()
    .any(|d| Path::new(d).join(rel).is_file())
}

fn check(sh: &Shell) -> (Option<Toolchain>, Vec<Missing>) {
    let mut missing = Vec::new();
    let mut need = |what: String, fix: Fix| missing.push(Missing { what, fix });
    let llvm = check_llvm(sh, &mut need);
    let (rustc, bindgen) = check_rust(sh, &mut need);
    let (qemu, fio) = check_tools(sh, &mut need);
    let tc = match (llvm, rustc, bindgen, qemu, fio) {
        (Some((llvm_make_arg, llvm)), Some(rustc), Some(bindgen), Some(qemu), Some(fio))
            if missing.is_empty() =>
        {
            Some(Toolchain {
                llvm_make_arg,
                llvm,
                rustc,
                bindgen,
                qemu,
                fio,
                gcc: None,
            })
        }
        _ => None,
    };
    (tc, missing)
}

type Need<'a> = dyn FnMut(String, Fix) + 'a;

/// LLVM (with its make argument) and libclang.
fn check_llvm(sh: &Shell, need: &mut Need<'_>) -> Option<(String, Version)> {
    let apt_llvm = || Fix::Apt(format!("clang-{APT_LLVM} lld-{APT_LLVM} llvm-{APT_LLVM}"));
    let llvm = find_llvm(sh);
    match &llvm {
        None => need(
            format!("LLVM >= {MIN_LLVM} (clang, ld.lld, llvm-ar, llvm-nm, llvm-objcopy)"),
            apt_llvm(),
        ),
        Some((_, v)) if *v < MIN_LLVM => {
            need(format!("LLVM >= {MIN_LLVM} (found {v})"), apt_llvm())
        }
        Some(_) => {}
    }
    let libclang = crate::distro::libclang_found(|p, a| version_output(sh, p, a));
    if !libclang {
        need(
            "libclang (bindgen uses it to generate the kernel's Rust bindings)".into(),
            Fix::Apt(format!("libclang-{APT_LLVM}-dev")),
        );
    }
    llvm
}

/// rustc with rust-src, and bindgen.
fn check_rust(sh: &Shell, need: &mut Need<'_>) -> (Option<Version>, Option<Version>) {
    let rustc = version_output(sh, "rustc", "--version").and_then(|o| Version::find_in(&o));
    match rustc {
        None => need(
            "rustc (install Rust with rustup: https://rustup.rs)".into(),
            Fix::RustSrc,
        ),
        Some(v) if v < MIN_RUSTC => need(
            format!("rustc >= {MIN_RUSTC} (found {v}): rustup update"),
            Fix::RustSrc,
        ),
        Some(_) => {}
    }
    let sysroot = cmd!(sh, "rustc --print sysroot")
        .quiet()
        .read()
        .unwrap_or_default();
    let rust_src = Path::new(sysroot.trim()).join("lib/rustlib/src/rust/library/core/src/lib.rs");
    if !rust_src.is_file() {
        need("rust-src for the active rustc".into(), Fix::RustSrc);
    }
    let bindgen = version_output(sh, "bindgen", "--version").and_then(|o| Version::find_in(&o));
    match bindgen {
        None => need(format!("bindgen >= {MIN_BINDGEN}"), Fix::CargoInstall),
        Some(v) if v < MIN_BINDGEN => need(
            format!("bindgen >= {MIN_BINDGEN} (found {v})"),
            Fix::CargoInstall,
        ),
        Some(_) => {}
    }
    (rustc, bindgen)
}

/// libfuse's examples (sources) as Debian's `libfuse3-dev` installs them: the
/// fuse-passthrough scenario's server is built from them.
pub const LIBFUSE_EXAMPLES: &str = "/usr/share/doc/libfuse3-dev/examples";

/// What building libfuse's passthrough_ll needs, on Debian, which ships its
/// source; elsewhere fuse-passthrough says what it lacks when a plan names it.
fn check_libfuse(sh: &Shell, need: &mut Need<'_>) {
    if version_output(sh, "pkg-config", "--version").is_none() {
        need(
            "`pkg-config` (building libfuse's passthrough_ll)".into(),
            Fix::Apt("pkg-config".into()),
        );
    }
    if !Path::new(LIBFUSE_EXAMPLES)
        .join("passthrough_ll.c")
        .is_file()
    {
        need(
            "libfuse's examples and headers (the fuse-passthrough scenario's server)".into(),
            Fix::Apt("libfuse3-dev".into()),
        );
    }
}

/// The host's programs the guest's initramfs copies in (initramfs.rs), beside
/// busybox and fio: (program, its version flag, the Debian package).
const GUEST_TOOLS: [(&str, &str, &str); 2] = [
    ("mkfs.ext4", "-V", "e2fsprogs"),
    ("ldd", "--version", "libc-bin"),
];

/// QEMU's version.
fn check_qemu(sh: &Shell, need: &mut Need<'_>) -> Option<Version> {
    let qemu =
        version_output(sh, "qemu-system-x86_64", "--version").and_then(|o| Version::find_in(&o));
    if qemu.is_none() {
        need(
            "`qemu-system-x86_64`".into(),
            Fix::Apt("qemu-system-x86".into()),
        );
    }
    qemu
}

/// The host's fio, whose version the guest's is built at (guest::fio).
fn check_fio(sh: &Shell, need: &mut Need<'_>) -> Option<String> {
    let fio = fio_version(sh);
    if fio.is_none() {
        need("`fio`".into(), Fix::Apt("fio".into()));
    }
    fio
}

/// `fio --version` of this host (`fio-3.33`), if it has fio.
pub fn fio_version(sh: &Shell) -> Option<String> {
    version_output(sh, "fio", "--version").map(|o| o.trim().to_string())
}

fn check_busybox(need: &mut Need<'_>) {
    if static_busybox().is_none() {
        need(
            "a statically linked busybox (the guest's shell and tools)".into(),
            Fix::Apt("busybox-static".into()),
        );
    }
}

/// The other host tools and headers; QEMU's and fio's versions.
fn check_tools(sh: &Shell, need: &mut Need<'_>) -> (Option<Version>, Option<String>) {
    let simple: [(&str, &str, &str); 13] = [
        ("make", "--version", "make"),
        ("flex", "--version", "flex"),
        ("bison", "--version", "bison"),
        ("bc", "--version", "bc"),
        ("cpio", "--version", "cpio"),
        ("xz", "--version", "xz-utils"),
        // The guest kernel's image is LZ4-compressed (Kconfig.fragment).
        ("lz4", "--version", "lz4"),
        ("git", "--version", "git"),
        ("dpkg-deb", "--version", "dpkg"),
        ("apt-get", "--version", "apt"),
        ("tar", "--version", "tar"),
        // The guest's fio is built from Debian's source (guest::fio).
        ("dpkg-source", "--version", "dpkg-dev"),
        ("cc", "--version", "gcc"),
    ];
    // apt and dpkg fetch Debian's kernel source (the default) and fio's; a
    // host that is not Debian builds from --kernel-src and uses its own fio.
    let debian = Distro::host() == Distro::Debian;
    for (prog, arg, pkg) in simple.into_iter().chain(GUEST_TOOLS) {
        if !debian && ["dpkg", "apt", "dpkg-dev"].contains(&pkg) {
            continue;
        }
        if version_output(sh, prog, arg).is_none() {
            need(format!("`{prog}`"), Fix::Apt(pkg.into()));
        }
    }
    // apt checks Debian's kernel source with Debian's keyring, which an Ubuntu
    // host has once it installs Debian's package of it.
    if debian && !Path::new(crate::distro::DEBIAN_KEYRING).is_file() {
        need(
            "Debian's archive keyring (apt checks linux-source-7.3 with it)".into(),
            Fix::Apt("debian-archive-keyring".into()),
        );
    }
    let qemu = check_qemu(sh, need);
    let fio = check_fio(sh, need);
    if debian {
        check_libfuse(sh, need);
    }
    check_busybox(need);
    if !header_exists("libelf.h") {
        need(
            "libelf headers (objtool)".into(),
            Fix::Apt("libelf-dev".into()),
        );
    }
    if !header_exists("openssl/opensslv.h") {
        need(
            "openssl headers (sign-file, certs)".into(),
            Fix::Apt("libssl-dev".into()),
        );
    }
    if !header_exists("stdio.h") {
        need(
            "libc headers (host programs)".into(),
            Fix::Apt("libc6-dev".into()),
        );
    }
    (qemu, fio)
}

/// Re-checks the minimum versions against the tree being built, which may be
/// newer than the 7.3 numbers compiled in here.
pub fn check_tree_minimums(sh: &Shell, tree: &Path, tc: &Toolchain) -> Result<()> {
    let script = tree.join("scripts/min-tool-version.sh");
    if !script.is_file() {
        return Ok(());
    }
    let _env = sh.push_env("SRCARCH", "x86");
    let tools = match tc.gcc {
        Some(gcc) => vec![("gcc", gcc)],
        None => vec![
            ("llvm", tc.llvm),
            ("rustc", tc.rustc),
            ("bindgen", tc.bindgen),
        ],
    };
    for (tool, have) in tools {
        let out = cmd!(sh, "sh {script} {tool}")
            .quiet()
            .read()
            .with_context(|| {
                format!(
                    "reading the minimum {tool} version from {}",
                    script.display()
                )
            })?;
        if let Some(min) = Version::find_in(&out) {
            if have < min {
                bail!(
                    "{} needs {tool} >= {min}, found {have}; see `cargo xtask deps`",
                    tree.display()
                );
            }
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests;
