//! The cache's faults (`~/.cache/wbstall`, or `$WBSTALL_CACHE`): a file is
//! checked against the sha256 stamped beside it (`<file>.sha256`) when it was
//! known whole, so that a truncated or damaged one is fetched or built again;
//! and the disk space a step needs is checked before it starts, and named
//! when the disk fills up under it.

use std::path::{Path, PathBuf};

use anyhow::{Context, Result};

use crate::util;

/// What extracting the Debian source takes: the 7.3 tree is 1.8 GB
/// extracted (measured), beside the unpacked package (170 MB) in the same
/// staging directory.
pub const EXTRACT_BYTES: u64 = 2 << 30;

/// What building one variant takes in its build directory: 250 to 480 MB
/// (measured, by configuration), and its kernel (bzImage, module, sources).
pub const BUILD_BYTES: u64 = 1 << 30;

/// What rebuilding a variant in a build directory that has its objects takes
/// (the objects a switch of variant recompiles, a new vmlinux and bzImage).
pub const INCREMENTAL_BYTES: u64 = 256 << 20;

/// Below this much free space, a step that failed is taken to have failed
/// because the disk filled up (a command's own ENOSPC goes to its log).
const NEARLY_FULL: u64 = 64 << 20;

/// The stamp of `file`: `<file>.sha256`.
pub fn stamp_of(file: &Path) -> PathBuf {
    let mut name = file.as_os_str().to_owned();
    name.push(".sha256");
    PathBuf::from(name)
}

/// Stamps `file` as whole: its sha256, beside it.
pub fn stamp(file: &Path) -> Result<()> {
    let sha = util::sha256_file(file).with_context(|| format!("hashing {}", file.display()))?;
    util::write_atomic(&stamp_of(file), format!("{sha}\n"))
}

/// What the stamp of a file says of it.
#[derive(Debug, PartialEq)]
pub enum Stamped {
    /// No stamp (a file from before stamps were kept).
    Unknown,
    Whole,
    /// Not what was stamped: truncated, damaged or replaced.
    Damaged {
        now: String,
        stamped: String,
    },
}

/// `file` against its stamp.
pub fn check(file: &Path) -> Result<Stamped> {
    let Ok(text) = std::fs::read_to_string(stamp_of(file)) else {
        return Ok(Stamped::Unknown);
    };
    let stamped = text.trim().to_string();
    let now = util::sha256_file(file).with_context(|| format!("hashing {}", file.display()))?;
    Ok(if now == stamped {
        Stamped::Whole
    } else {
        Stamped::Damaged { now, stamped }
    })
}

/// Removes `file` and its stamp (to fetch or build it again).
pub fn forget(file: &Path) -> Result<()> {
    for f in [file.to_path_buf(), stamp_of(file)] {
        match std::fs::remove_file(&f) {
            Err(e) if e.kind() != std::io::ErrorKind::NotFound => {
                return Err(e).with_context(|| format!("removing {}", f.display()))
            }
            _ => {}
        }
    }
    Ok(())
}

/// Bytes free to this user on the file system of `dir` (statvfs).
pub fn free_bytes(dir: &Path) -> Result<u64> {
    use std::os::unix::ffi::OsStrExt;
    let c = std::ffi::CString::new(dir.as_os_str().as_bytes())
        .with_context(|| format!("{} holds a NUL byte", dir.display()))?;
    // SAFETY: a zeroed statvfs is valid, and statvfs(3) writes only into it.
    let mut st: libc::statvfs = unsafe { std::mem::zeroed() };
    // SAFETY: `c` is a NUL-terminated path that outlives the call.
    if unsafe { libc::statvfs(c.as_ptr(), &mut st) } != 0 {
        return Err(std::io::Error::last_os_error())
            .with_context(|| format!("reading the free space of {}", dir.display()));
    }
    Ok(st.f_bavail as u64 * st.f_frsize as u64)
}

/// `need` bytes as people read them.
fn size(bytes: u64) -> String {
    format!("{:.1} GiB", bytes as f64 / f64::from(1u32 << 30))
}

/// The error of `doing` in `dir` without the space it needs.
fn no_space(dir: &Path, free: u64, need: u64, doing: &str) -> anyhow::Error {
    anyhow::anyhow!(
        "{doing} needs about {} free in {} and it has {}: free some space there (or put the \
         cache elsewhere with WBSTALL_CACHE=DIR), then run again; what was done so far is \
         kept consistent and the next run goes on from it",
        size(need),
        dir.display(),
        size(free)
    )
}

/// Refuses `doing` when `dir` has less than `need` bytes free (`free`).
pub fn check_space(dir: &Path, free: u64, need: u64, doing: &str) -> Result<()> {
    if free < need {
        return Err(no_space(dir, free, need, doing));
    }
    Ok(())
}

/// [`check_space`] with `dir`'s free space now.
pub fn ensure_space(dir: &Path, need: u64, doing: &str) -> Result<()> {
    check_space(dir, free_bytes(dir)?, need, doing)
}

/// The error `e` of `doing` in `dir`, said as the disk filling up when it is
/// ENOSPC or when `dir` is left nearly full (`free`); else `e` itself.
pub fn out_of_space(
    e: anyhow::Error,
    dir: &Path,
    free: u64,
    need: u64,
    doing: &str,
) -> anyhow::Error {
    let enospc = e.chain().any(|c| {
        c.downcast_ref::<std::io::Error>()
            .is_some_and(|io| io.raw_os_error() == Some(libc::ENOSPC))
            || c.to_string().contains("No space left on device")
    });
    if enospc || free < NEARLY_FULL {
        return no_space(dir, free, need, doing).context(format!("{e:#}"));
    }
    e
}

/// [`out_of_space`] with `dir`'s free space now.
pub fn map_out_of_space<T>(r: Result<T>, dir: &Path, need: u64, doing: &str) -> Result<T> {
    r.map_err(|e| {
        let free = free_bytes(dir).unwrap_or(u64::MAX);
        out_of_space(e, dir, free, need, doing)
    })
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::util::testdir;

    #[test]
    fn a_truncated_or_damaged_file_is_told_from_a_whole_one_by_its_stamp() {
        let t = testdir::Dir::new("stamp");
        let f = t.path().join("linux-source-7.3_7.3.4-1_all.deb");
        std::fs::write(&f, b"!<arch>\na whole package").unwrap();
        assert_eq!(check(&f).unwrap(), Stamped::Unknown);
        stamp(&f).unwrap();
        assert_eq!(check(&f).unwrap(), Stamped::Whole);
        // Truncated (a download cut short), then the same length but damaged.
        std::fs::write(&f, b"!<arch>\na whole").unwrap();
        assert!(matches!(check(&f).unwrap(), Stamped::Damaged { .. }));
        std::fs::write(&f, b"!<arch>\na whole packagf").unwrap();
        assert!(matches!(check(&f).unwrap(), Stamped::Damaged { .. }));
        forget(&f).unwrap();
        assert!(!f.exists() && !stamp_of(&f).exists());
        forget(&f).unwrap();
    }

    #[test]
    fn too_little_space_is_refused_naming_the_directory_and_the_space_needed() {
        let dir = Path::new("/cache/src");
        let e = check_space(dir, 1 << 30, EXTRACT_BYTES, "extracting linux-source-7.3")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("extracting linux-source-7.3 needs about 2.0 GiB free in /cache/src and it has 1.0 GiB"),
            "{e}"
        );
        assert!(e.contains("WBSTALL_CACHE=DIR"), "{e}");
        check_space(dir, EXTRACT_BYTES, EXTRACT_BYTES, "extracting").unwrap();
        assert!(free_bytes(&std::env::temp_dir()).unwrap() > 0);
    }

    #[test]
    fn enospc_is_said_as_the_disk_filling_up_and_other_errors_are_left_alone() {
        let dir = Path::new("/cache/build/x");
        let full = || {
            anyhow::Error::new(std::io::Error::from_raw_os_error(libc::ENOSPC))
                .context("writing vmlinux.o")
        };
        let e = format!(
            "{:#}",
            out_of_space(full(), dir, 10 << 30, BUILD_BYTES, "building v1")
        );
        assert!(
            e.contains("building v1 needs about 1.0 GiB free in /cache/build/x"),
            "{e}"
        );
        assert!(e.contains("writing vmlinux.o"), "{e}");
        // make's ENOSPC is in its log: a failure on a nearly full disk is it too.
        let make = || anyhow::anyhow!("make failed: see build.log");
        let e = format!(
            "{:#}",
            out_of_space(make(), dir, 1 << 20, BUILD_BYTES, "building v1")
        );
        assert!(e.contains("needs about 1.0 GiB free"), "{e}");
        let e = format!(
            "{:#}",
            out_of_space(make(), dir, 10 << 30, BUILD_BYTES, "building v1")
        );
        assert_eq!(e, "make failed: see build.log");
    }
}
