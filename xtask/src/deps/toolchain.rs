//! What the checks find: tool versions, and the toolchain a kernel is built
//! and booted with, recorded in every artifact.

use std::fmt;

use serde::{Deserialize, Serialize};

/// A `major.minor.patch` version.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, PartialOrd, Ord, Serialize, Deserialize)]
pub struct Version(pub u32, pub u32, pub u32);

impl fmt::Display for Version {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}.{}.{}", self.0, self.1, self.2)
    }
}

impl Version {
    /// The first `N.N[.N]` in a tool's `--version` output.
    pub fn find_in(text: &str) -> Option<Version> {
        text.split(|c: char| !(c.is_ascii_digit() || c == '.'))
            .filter(|w| w.contains('.'))
            .find_map(|w| {
                let mut parts = w.split('.').filter(|p| !p.is_empty());
                let major = parts.next()?.parse().ok()?;
                let minor = parts.next()?.parse().ok()?;
                let patch = parts.next().and_then(|p| p.parse().ok()).unwrap_or(0);
                Some(Version(major, minor, patch))
            })
    }
}

/// The toolchain the kernel is built with; its versions go into every artifact.
#[derive(Debug, Clone, Default, Serialize, Deserialize)]
pub struct Toolchain {
    /// The value of make's `LLVM=` (`-19` for `clang-19`, `1` for plain `clang`).
    pub llvm_make_arg: String,
    pub llvm: Version,
    pub rustc: Version,
    pub bindgen: Version,
    pub qemu: Version,
    pub fio: String,
    /// GCC, for kernels built without Rust (`--no-rust`); LLVM, rustc and
    /// bindgen are then not needed (and zero).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub gcc: Option<Version>,
}

impl Toolchain {
    /// This host's QEMU and fio (`self`, as `boot::ensure_boot` found them) with the compilers
    /// `kernel` was built with: what a session of kernels built before
    /// (`--no-build`) records.
    pub fn booting(&self, kernel: &Toolchain) -> Toolchain {
        Toolchain {
            qemu: self.qemu,
            fio: self.fio.clone(),
            ..kernel.clone()
        }
    }

    /// make's compiler arguments: `LLVM=-19`, or none for GCC (make's default).
    pub fn make_args(&self) -> Vec<String> {
        if self.gcc.is_some() {
            Vec::new()
        } else {
            vec![format!("LLVM={}", self.llvm_make_arg)]
        }
    }
}

impl fmt::Display for Toolchain {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        if let Some(gcc) = &self.gcc {
            return write!(
                f,
                "toolchain: GCC {gcc} (no Rust), qemu {}, {}",
                self.qemu, self.fio
            );
        }
        write!(
            f,
            "toolchain: LLVM {} (make LLVM={}), rustc {}, bindgen {}, qemu {}, {}",
            self.llvm, self.llvm_make_arg, self.rustc, self.bindgen, self.qemu, self.fio
        )
    }
}
