//! The host's distribution (`/etc/os-release`), for the one thing that differs
//! between them here: the command that installs what is missing. wbstall's
//! needs are named as Debian packages; on Fedora (and its relatives) they are
//! given as the packages dnf knows.

use std::path::Path;

use xshell::{cmd, Shell};

/// A host family with its own package names and installer.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Distro {
    /// Debian, Ubuntu and their derivatives: apt.
    Debian,
    /// Fedora, RHEL, CentOS, Rocky, Alma: dnf.
    Fedora,
    /// Anything else: the Debian names, to be translated by the user.
    Other,
}

/// The keyring Debian's archive is signed with, from the `debian-archive-keyring`
/// package (Debian installs it with apt; Ubuntu packages it too).
pub const DEBIAN_KEYRING: &str = "/usr/share/keyrings/debian-archive-keyring.gpg";

/// One field of an os-release file's text (`KEY=value`, quotes dropped,
/// lower-cased); empty when absent.
fn os_release_field(text: &str, key: &str) -> String {
    text.lines()
        .find_map(|l| l.strip_prefix(key)?.strip_prefix('='))
        .map(|v| v.trim().trim_matches('"').to_ascii_lowercase())
        .unwrap_or_default()
}

/// This host's os-release text (`/etc/os-release`, else `/usr/lib/os-release`).
fn host_os_release() -> Option<String> {
    ["/etc/os-release", "/usr/lib/os-release"]
        .iter()
        .find_map(|p| std::fs::read_to_string(Path::new(p)).ok())
}

/// The release's code name (`VERSION_CODENAME`: `bookworm`, Ubuntu's `noble`):
/// the suite the host's own packages come from.
pub fn codename_of(os_release: &str) -> Option<String> {
    Some(os_release_field(os_release, "VERSION_CODENAME")).filter(|c| !c.is_empty())
}

/// This host's release code name ([`codename_of`]).
pub fn host_codename() -> Option<String> {
    codename_of(&host_os_release()?)
}

/// How to run apt-get as root, non-interactively: the program and its first
/// arguments (`env DEBIAN_FRONTEND=noninteractive` as root; `sudo -n env ...`
/// for a user with password-less sudo, as on a CI runner, so that rust-src
/// and bindgen-cli still go to the user's own toolchain). None otherwise.
pub fn apt_as_root(sh: &Shell) -> Option<(&'static str, Vec<&'static str>)> {
    let env = vec!["env", "DEBIAN_FRONTEND=noninteractive"];
    if crate::util::is_root() {
        return Some((env[0], env[1..].to_vec()));
    }
    // Fails as well where there is no sudo.
    let sudo = cmd!(sh, "sudo -n true")
        .quiet()
        .ignore_stderr()
        .run()
        .is_ok();
    sudo.then(|| ("sudo", [vec!["-n"], env].concat()))
}

impl Distro {
    /// The family of an os-release file's text, by `ID` then `ID_LIKE`.
    pub fn from_os_release(text: &str) -> Distro {
        let field = |key: &str| os_release_field(text, key);
        let words = format!("{} {}", field("ID"), field("ID_LIKE"));
        let has = |names: &[&str]| words.split_whitespace().any(|w| names.contains(&w));
        if has(&["debian", "ubuntu"]) {
            Distro::Debian
        } else if has(&["fedora", "rhel", "centos"]) {
            Distro::Fedora
        } else {
            Distro::Other
        }
    }

    /// This host's (`/etc/os-release`, else `/usr/lib/os-release`).
    pub fn host() -> Distro {
        host_os_release().map_or(Distro::Other, |t| Distro::from_os_release(&t))
    }

    /// The command that installs `debian_packages` (Debian's names) here.
    pub fn install_command(self, debian_packages: &[String]) -> String {
        match self {
            Distro::Debian => format!(
                "apt-get update && apt-get install -y {}",
                debian_packages.join(" ")
            ),
            Distro::Fedora => {
                let mut names: Vec<String> = Vec::new();
                for p in debian_packages {
                    for n in fedora_names(p) {
                        if !names.contains(&n) {
                            names.push(n);
                        }
                    }
                }
                format!("dnf install -y {}", names.join(" "))
            }
            Distro::Other => format!(
                "install your distribution's packages of (Debian names) {}",
                debian_packages.join(" ")
            ),
        }
    }
}

/// Fedora's packages for one Debian package of wbstall's needs: none where
/// Fedora needs none (`dpkg`, `apt`: Debian's kernel sources only), the same
/// name where it is the same (or not known here).
fn fedora_names(debian: &str) -> Vec<String> {
    if debian.starts_with("libclang-") {
        return vec!["clang-devel".into()];
    }
    // Versioned LLVM packages (`clang-19`) are Fedora's unversioned ones.
    let base = debian
        .rsplit_once('-')
        .filter(|(_, v)| v.chars().all(|c| c.is_ascii_digit()))
        .map_or(debian, |(b, _)| b);
    let names: &[&str] = match base {
        "xz-utils" => &["xz"],
        "libc-bin" => &["glibc-common"],
        "libc6-dev" => &["glibc-devel", "glibc-static"],
        "libelf-dev" => &["elfutils-libelf-devel"],
        "libssl-dev" => &["openssl-devel"],
        "libfuse3-dev" => &["fuse3-devel"],
        "pkg-config" => &["pkgconf-pkg-config"],
        "busybox-static" => &["busybox"],
        "shellcheck" => &["ShellCheck"],
        "python3-yaml" => &["python3-pyyaml"],
        // Fedora's python3 carries venv and ensurepip.
        "python3-venv" => &[],
        "dpkg" | "dpkg-dev" | "apt" => &[],
        same => return vec![same.to_string()],
    };
    names.iter().map(|n| n.to_string()).collect()
}

/// Whether libclang is where bindgen looks (`run`: a command's output): Debian's `/usr/lib/llvm-*/lib`,
/// `llvm-config --libdir`, or the dynamic linker's search path (`ldconfig -p`,
/// e.g. Fedora's `/usr/lib64`).
pub fn libclang_found(run: impl Fn(&str, &str) -> Option<String>) -> bool {
    let has_libclang = |dir: &Path| {
        std::fs::read_dir(dir)
            .into_iter()
            .flatten()
            .flatten()
            .any(|f| f.file_name().to_string_lossy().starts_with("libclang"))
    };
    let debian = std::fs::read_dir("/usr/lib")
        .into_iter()
        .flatten()
        .flatten()
        .filter(|e| e.file_name().to_string_lossy().starts_with("llvm-"))
        .any(|e| has_libclang(&e.path().join("lib")));
    debian
        || run("llvm-config", "--libdir").is_some_and(|d| has_libclang(Path::new(d.trim())))
        || run("ldconfig", "-p").is_some_and(|t| ldconfig_has_libclang(&t))
}

/// Whether `ldconfig -p`'s output lists a libclang shared object.
/// (`libclang.so.19`, Debian's `libclang-19.so.1`; not `libclang-cpp`).
fn ldconfig_has_libclang(text: &str) -> bool {
    text.lines().any(|l| {
        let name = l.split_whitespace().next().unwrap_or("");
        name.starts_with("libclang.so")
            || name
                .strip_prefix("libclang-")
                .is_some_and(|r| r.starts_with(|c: char| c.is_ascii_digit()))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEBIAN: &str = "PRETTY_NAME=\"Debian GNU/Linux 12 (bookworm)\"\nNAME=\"Debian GNU/Linux\"\nVERSION_ID=\"12\"\nID=debian\n";
    const UBUNTU: &str = "NAME=\"Ubuntu\"\nID=ubuntu\nID_LIKE=debian\nVERSION_ID=\"24.04\"\n\
        VERSION_CODENAME=noble\n";
    const FEDORA: &str =
        "NAME=\"Fedora Linux\"\nVERSION=\"41 (Server Edition)\"\nID=fedora\nVERSION_ID=41\n";
    const ROCKY: &str = "NAME=\"Rocky Linux\"\nID=\"rocky\"\nID_LIKE=\"rhel centos fedora\"\n";
    const ARCH: &str = "NAME=\"Arch Linux\"\nID=arch\n";

    #[test]
    fn the_family_comes_from_id_then_id_like() {
        assert_eq!(Distro::from_os_release(DEBIAN), Distro::Debian);
        assert_eq!(Distro::from_os_release(UBUNTU), Distro::Debian);
        assert_eq!(Distro::from_os_release(FEDORA), Distro::Fedora);
        assert_eq!(Distro::from_os_release(ROCKY), Distro::Fedora);
        assert_eq!(Distro::from_os_release(ARCH), Distro::Other);
        assert_eq!(Distro::from_os_release(""), Distro::Other);
    }

    #[test]
    fn the_code_name_is_the_suite_of_the_hosts_packages() {
        assert_eq!(codename_of(UBUNTU).as_deref(), Some("noble"));
        assert_eq!(
            codename_of("ID=debian\nVERSION_CODENAME=\"trixie\"\n").as_deref(),
            Some("trixie")
        );
        // Debian's sid writes none.
        assert_eq!(codename_of(DEBIAN), None);
        assert_eq!(codename_of("VERSION_CODENAME=\n"), None);
    }

    #[test]
    fn fedora_gets_dnf_with_its_own_package_names() {
        let need: Vec<String> = [
            "libelf-dev",
            "clang-19 lld-19 llvm-19",
            "libclang-19-dev",
            "libc6-dev",
            "dpkg-dev",
            "fio",
        ]
        .iter()
        .flat_map(|p| p.split_whitespace().map(str::to_string))
        .collect();
        assert_eq!(
            Distro::Fedora.install_command(&need),
            "dnf install -y elfutils-libelf-devel clang lld llvm clang-devel glibc-devel \
             glibc-static fio"
        );
        assert_eq!(
            Distro::Debian.install_command(&need[..1]),
            "apt-get update && apt-get install -y libelf-dev"
        );
        assert!(Distro::Other
            .install_command(&need[..1])
            .contains("(Debian names) libelf-dev"));
    }
    #[test]
    fn libclang_is_found_on_the_linkers_search_path() {
        let fedora = "1234 libs found in cache `/etc/ld.so.cache'\n\
            \tlibclang.so.19.1 (libc6,x86-64) => /usr/lib64/libclang.so.19.1\n\
            \tlibc.so.6 (libc6,x86-64) => /lib64/libc.so.6\n";
        assert!(ldconfig_has_libclang(fedora));
        assert!(ldconfig_has_libclang(
            "\tlibclang-19.so.1 (libc6,x86-64) => /x\n"
        ));
        assert!(!ldconfig_has_libclang(
            "\tlibclang-cpp.so.19 (libc6,x86-64) => /x\n"
        ));
        assert!(!ldconfig_has_libclang(
            "\tlibc.so.6 (libc6,x86-64) => /lib64/libc.so.6\n"
        ));
    }
}
