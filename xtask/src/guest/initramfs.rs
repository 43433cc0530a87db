//! The guest's initramfs: busybox (static), fio and mke2fs with the libraries
//! `ldd` lists, the `wbstall-fuse` server and the `wbstall-sample` sampler (built static), and the init and scenario scripts
//! kept as real files in `qemu/`. One base archive is shared by every variant and
//! rebuilt only when an input changes; each variant appends a small archive with
//! its `wbstall.ko` (the kernel unpacks concatenated newc archives in order).

use std::{
    collections::BTreeSet,
    fs,
    io::{self, BufWriter, Write},
    path::{Path, PathBuf},
};

use anyhow::{bail, Context, Result};
use xshell::{cmd, Shell};

use crate::{
    deps,
    guest::{
        fio,
        fuse_server::{self, External},
    },
    kernel::{build::Built, flavour::Flavour, selected, source::SourceArgs, variants::Selection},
    progress::{self, Event},
    util,
};

/// Where initramfs archives are kept.
fn dir() -> PathBuf {
    util::target_dir().join("initramfs")
}

/// A minimal writer of the kernel's initramfs format (cpio "newc", see
/// Documentation/driver-api/early-userspace/buffer-format.rst). Entries are
/// written with uid/gid 0 and mtime 0, so the archive depends only on content.
pub struct Newc<W: Write> {
    out: W,
    ino: u32,
    written: u64,
    dirs: BTreeSet<String>,
}

const S_IFDIR: u32 = 0o040000;
const S_IFREG: u32 = 0o100000;
const S_IFLNK: u32 = 0o120000;
const S_IFCHR: u32 = 0o020000;

impl<W: Write> Newc<W> {
    pub fn new(out: W) -> Newc<W> {
        Newc {
            out,
            ino: 0,
            written: 0,
            dirs: BTreeSet::new(),
        }
    }

    fn pad(&mut self) -> io::Result<()> {
        let n = (4 - (self.written % 4) as usize) % 4;
        self.out.write_all(&[0u8; 3][..n])?;
        self.written += n as u64;
        Ok(())
    }

    fn entry(&mut self, name: &str, mode: u32, rdev: (u32, u32), data: &[u8]) -> io::Result<()> {
        let name = name.trim_start_matches('/');
        self.ino += 1;
        let nlink = if mode & S_IFDIR != 0 { 2 } else { 1 };
        let header = format!(
            "070701{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}{:08x}",
            self.ino,
            mode,
            0,
            0,
            nlink,
            0,
            data.len(),
            0,
            0,
            rdev.0,
            rdev.1,
            name.len() + 1,
            0
        );
        self.out.write_all(header.as_bytes())?;
        self.out.write_all(name.as_bytes())?;
        self.out.write_all(&[0])?;
        self.written += (header.len() + name.len() + 1) as u64;
        self.pad()?;
        self.out.write_all(data)?;
        self.written += data.len() as u64;
        self.pad()
    }

    /// Creates the parents of `path` that do not exist yet.
    fn parents(&mut self, path: &str) -> io::Result<()> {
        let mut prefix = String::new();
        let parts: Vec<&str> = path.trim_start_matches('/').split('/').collect();
        for part in &parts[..parts.len().saturating_sub(1)] {
            if !prefix.is_empty() {
                prefix.push('/');
            }
            prefix.push_str(part);
            if self.dirs.insert(prefix.clone()) {
                self.entry(&prefix, S_IFDIR | 0o755, (0, 0), &[])?;
            }
        }
        Ok(())
    }

    pub fn dir(&mut self, path: &str) -> io::Result<()> {
        self.parents(path)?;
        let p = path.trim_start_matches('/').to_string();
        if self.dirs.insert(p.clone()) {
            self.entry(&p, S_IFDIR | 0o755, (0, 0), &[])?;
        }
        Ok(())
    }

    pub fn file(&mut self, path: &str, perm: u32, data: &[u8]) -> io::Result<()> {
        self.parents(path)?;
        self.entry(path, S_IFREG | perm, (0, 0), data)
    }

    pub fn symlink(&mut self, path: &str, target: &str) -> io::Result<()> {
        self.parents(path)?;
        self.entry(path, S_IFLNK | 0o777, (0, 0), target.as_bytes())
    }

    pub fn chardev(&mut self, path: &str, perm: u32, major: u32, minor: u32) -> io::Result<()> {
        self.parents(path)?;
        self.entry(path, S_IFCHR | perm, (major, minor), &[])
    }

    /// Writes the trailer and returns the writer.
    pub fn finish(mut self) -> io::Result<W> {
        self.entry("TRAILER!!!", 0, (0, 0), &[])?;
        self.out.flush()?;
        Ok(self.out)
    }
}

/// The libraries `ldd` lists for a binary (absolute paths, the loader included).
pub fn parse_ldd(text: &str) -> Result<Vec<PathBuf>> {
    let mut out = Vec::new();
    for line in text.lines().map(str::trim).filter(|l| !l.is_empty()) {
        if line.contains("not found") {
            bail!("a library is missing on this host: `{line}`");
        }
        let path = match line.split_once("=>") {
            Some((_, rhs)) => rhs.trim().split(' ').next().unwrap_or(""),
            None => line.split(' ').next().unwrap_or(""),
        };
        if path.starts_with('/') {
            out.push(PathBuf::from(path));
        } else if !line.starts_with("linux-vdso") && !line.starts_with("statically linked") {
            bail!("cannot read ldd line `{line}`");
        }
    }
    Ok(out)
}

/// One file of the base archive: where it goes, its mode, where it comes from.
struct Item {
    dest: String,
    perm: u32,
    src: PathBuf,
}

/// The guest's own programs, built static: the FUSE server and the sampler.
pub const GUEST_BINS: [&str; 2] = ["wbstall-fuse", "wbstall-sample"];

/// Builds the guest's programs (`qemu/wbstall-fuse`, `qemu/wbstall-sample`) as
/// static binaries; their paths, in the order of [`GUEST_BINS`].
pub fn build_guest_bins(sh: &Shell) -> Result<Vec<PathBuf>> {
    let cargo = sh.var("CARGO").unwrap_or_else(|_| "cargo".to_string());
    let target_dir = util::target_dir().join("guest");
    cmd!(sh, "{cargo} build --quiet --release --locked -p wbstall-fuse -p wbstall-sample --target x86_64-unknown-linux-gnu --target-dir {target_dir}")
        .env("CARGO_TARGET_X86_64_UNKNOWN_LINUX_GNU_RUSTFLAGS", "-C target-feature=+crt-static")
        .quiet()
        .run()
        .context("building the guest's programs (qemu/wbstall-fuse, qemu/wbstall-sample) as static binaries with cargo (a node without cargo boots the guest `cargo xtask slurm` staged: qemu-test --staged DIR)")?;
    GUEST_BINS
        .iter()
        .map(|name| {
            let bin = target_dir
                .join("x86_64-unknown-linux-gnu/release")
                .join(name);
            util::require_static(&bin)?;
            Ok(bin)
        })
        .collect()
}

/// The host's programs the guest runs, with the libraries `ldd` lists: (the
/// program, its path in the guest, the Debian package that has it).
/// (fio is built static for the guest: `guest::fio`.)
const HOST_PROGRAMS: [(&str, &str, &str); 1] = [
    // The null_blk disk is formatted in the guest.
    ("mke2fs", "usr/sbin/mke2fs", "e2fsprogs"),
];

/// `program` from the host's PATH as `dest`, and the libraries it loads.
fn host_program(sh: &Shell, program: &str, dest: &str, package: &str) -> Result<Vec<Item>> {
    let lookup = format!("command -v {program}");
    let path = cmd!(sh, "sh -c {lookup}")
        .quiet()
        .read()
        .with_context(|| format!("finding {program}: apt-get install {package}"))?;
    with_libraries(sh, Path::new(path.trim()), dest)
}

/// The program at `path` as `dest`, and the libraries `ldd` says it loads.
fn with_libraries(sh: &Shell, path: &Path, dest: &str) -> Result<Vec<Item>> {
    let mut items = vec![Item {
        dest: dest.into(),
        perm: 0o755,
        src: path.to_path_buf(),
    }];
    if util::elf_is_static(&fs::read(path).with_context(|| format!("reading {}", path.display()))?)
        == Some(true)
    {
        return Ok(items);
    }
    let ldd = cmd!(sh, "ldd {path}")
        .quiet()
        .read()
        .with_context(|| format!("listing the libraries of {} with ldd", path.display()))?;
    for lib in parse_ldd(&ldd)? {
        let dest = lib.to_string_lossy().trim_start_matches('/').to_string();
        // Copy the target's bytes under the name the loader looks for.
        let src = fs::canonicalize(&lib).with_context(|| format!("resolving {}", lib.display()))?;
        items.push(Item {
            dest,
            perm: 0o755,
            src,
        });
    }
    Ok(items)
}

/// The benchmark: built static (guest::fio), else the host's with its
/// libraries (the same version; the guest unpacks 70 MB more each boot).
fn guest_fio(sh: &Shell) -> Result<Vec<Item>> {
    match fio::guest_fio(sh) {
        Ok(src) => Ok(vec![Item {
            dest: "usr/bin/fio".into(),
            perm: 0o755,
            src,
        }]),
        Err(e) => {
            progress::emit(Event::Note(&format!(
                "no static fio for the guest ({e:#}); it gets the host's fio and its \
                 libraries, which cost about 1 s of guest time per boot"
            )));
            host_program(sh, "fio", "usr/bin/fio", "fio")
        }
    }
}

/// The FUSE server of the fuse-passthrough scenario, when the plan has it:
/// libfuse's passthrough_ll, or the user's (`--fuse-server`) with its command
/// line.
fn fuse_servers(sh: &Shell, external: &External) -> Result<Vec<Item>> {
    match external {
        External::None => Ok(Vec::new()),
        External::PassthroughLl => {
            let ll = fuse_server::passthrough_ll(sh)?;
            with_libraries(sh, &ll, fuse_server::PASSTHROUGH_LL)
        }
        External::User(u) => {
            let mut items = with_libraries(sh, &u.program, &u.guest_path())?;
            let file = util::target_dir().join("guest").join("fuse-server");
            util::write_atomic(&file, u.guest_command())?;
            items.push(Item {
                dest: fuse_server::COMMAND_FILE.into(),
                perm: 0o644,
                src: file,
            });
            Ok(items)
        }
    }
}

fn items(sh: &Shell, external: &External) -> Result<Vec<Item>> {
    let root = util::project_root();
    let busybox =
        deps::static_busybox().context("no static busybox: apt-get install busybox-static")?;
    let mut items = vec![
        Item {
            dest: "bin/busybox".into(),
            perm: 0o755,
            src: busybox,
        },
        Item {
            dest: "init".into(),
            perm: 0o755,
            src: root.join("qemu/init"),
        },
    ];
    for (name, src) in GUEST_BINS.iter().zip(build_guest_bins(sh)?) {
        items.push(Item {
            dest: format!("bin/{name}"),
            perm: 0o755,
            src,
        });
    }
    for (rel, src) in scripts(&root.join("qemu"))? {
        items.push(Item {
            dest: format!("wbstall/{rel}"),
            perm: 0o644,
            src,
        });
    }
    let mut shared = guest_fio(sh)?;
    for (program, dest, package) in HOST_PROGRAMS {
        shared.extend(host_program(sh, program, dest, package)?);
    }
    shared.extend(fuse_servers(sh, external)?);
    for it in shared {
        // The programs share libraries (libc, the loader): one copy each.
        if !items.iter().any(|i| i.dest == it.dest) {
            items.push(it);
        }
    }
    // mke2fs's defaults (features, inode size) as the host's own, so that the
    // guest formats its disk as the host formats its image.
    items.push(Item {
        dest: "etc/mke2fs.conf".into(),
        perm: 0o644,
        src: PathBuf::from("/etc/mke2fs.conf"),
    });
    Ok(items)
}

/// Builds (or reuses) the base archive and returns its path; with the FUSE
/// server of the plan's fuse-passthrough, if it has one.
pub fn base(sh: &Shell, external: &External) -> Result<PathBuf> {
    base_in(sh, external, &dir())
}

/// One variant's kernel, built (or with `how.0`, no build, as it is; `how.1`
/// make's jobs), and its initramfs, for the single-boot tasks.
pub fn one_variant(
    sh: &Shell,
    source: &SourceArgs,
    how: (bool, Option<usize>),
    flavour: &Flavour,
    name: &str,
) -> Result<(Built, PathBuf)> {
    let tc = deps::check_for(sh, flavour.no_rust)?;
    let selection = Selection {
        variants: vec![name.to_string()],
        ..Selection::default()
    };
    let built = selected::kernels(sh, &tc, &selection, source, how, flavour)?.remove(0);
    let b = base(sh, &External::None)?;
    let initrd = for_variant(&b, &built.label(), built.module_file().as_deref())?;
    Ok((built, initrd))
}

/// [`base`], kept in `dir` (a fleet's staged guest: guest::stage).
pub fn base_in(sh: &Shell, external: &External, dir: &Path) -> Result<PathBuf> {
    let items = items(sh, external)?;
    let mut key = String::from("wbstall-initramfs-v1\n");
    for it in &items {
        key.push_str(&format!(
            "{} {:o} {}\n",
            it.dest,
            it.perm,
            util::sha256_file(&it.src)?
        ));
    }
    let key = util::sha256_hex(key.as_bytes());
    let out = dir.join("base.cpio");
    let stamp = dir.join("base.key");
    if out.is_file() && fs::read_to_string(&stamp).is_ok_and(|s| s.trim() == key) {
        return Ok(out);
    }
    fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    // One name per process and host: two shards booting from one checkout
    // on a shared filesystem may both find the archive stale and write it at once.
    let tmp = dir.join(format!(".{}.tmp", util::unique_name("base.cpio")));
    let file = fs::File::create(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
    let mut cpio = Newc::new(BufWriter::new(file));
    for d in [
        "dev",
        "proc",
        "sys",
        "tmp",
        "run",
        "mnt",
        "etc",
        "sbin",
        "usr/sbin",
        "lib/modules",
    ] {
        cpio.dir(d)?;
    }
    // The kernel opens /dev/console for init before devtmpfs is mounted.
    cpio.chardev("dev/console", 0o600, 5, 1)?;
    cpio.chardev("dev/null", 0o666, 1, 3)?;
    for it in &items {
        let data = fs::read(&it.src).with_context(|| format!("reading {}", it.src.display()))?;
        cpio.file(&it.dest, it.perm, &data)?;
    }
    cpio.symlink("bin/sh", "busybox")?;
    cpio.finish().context("writing the initramfs")?;
    fs::rename(&tmp, &out).with_context(|| format!("writing {}", out.display()))?;
    util::write_atomic(&stamp, format!("{key}\n"))?;
    Ok(out)
}

/// What the scripts find under `/wbstall` (host-test's staging directory on
/// the host), from the repository's `qemu/` directory `qemu`: (path under
/// `/wbstall`, source), sorted: `lib.sh`, every file of `scenarios/` (but
/// their floor files, which the host alone reads) and `jobs/`.
pub fn scripts(qemu: &Path) -> Result<Vec<(String, PathBuf)>> {
    let mut out = vec![("lib.sh".to_string(), qemu.join("lib.sh"))];
    for sub in ["scenarios", "jobs"] {
        let d = qemu.join(sub);
        let mut files = Vec::new();
        tree_files(&d, &d, &mut files)?;
        files.sort();
        out.extend(
            (files.into_iter())
                .filter(|(_, p)| p.file_name() != Some(crate::guest::scenario::FLOOR_FILE.as_ref()))
                .map(|(rel, p)| (format!("{sub}/{rel}"), p)),
        );
    }
    Ok(out)
}

fn tree_files(base: &Path, dir: &Path, out: &mut Vec<(String, PathBuf)>) -> Result<()> {
    for e in fs::read_dir(dir).with_context(|| format!("listing {}", dir.display()))? {
        let p = e?.path();
        if p.is_dir() {
            tree_files(base, &p, out)?;
        } else if p.is_file() {
            let rel = p.strip_prefix(base).unwrap_or(&p).display().to_string();
            out.push((rel, p));
        }
    }
    Ok(())
}

/// The initramfs of one variant, next to the base archive: the base followed
/// by an archive holding `/lib/modules/wbstall.ko`, the variant's module (none
/// for a kernel built without Rust: the guest then runs the tracefs detector).
pub fn for_variant(base: &Path, variant: &str, module: Option<&Path>) -> Result<PathBuf> {
    let mut overlay = Newc::new(Vec::new());
    if let Some(module) = module {
        let ko = fs::read(module).with_context(|| format!("reading {}", module.display()))?;
        overlay.file("lib/modules/wbstall.ko", 0o644, &ko)?;
    }
    let overlay = overlay.finish()?;
    let mut bytes = fs::read(base).with_context(|| format!("reading {}", base.display()))?;
    bytes.extend_from_slice(&overlay);
    let dir = base
        .parent()
        .context("the base archive lies in a directory")?;
    let out = dir.join(format!("{variant}.cpio"));
    if fs::read(&out).is_ok_and(|old| old == bytes) {
        return Ok(out);
    }
    util::write_atomic(&out, bytes)?;
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// The guest gets every scenario's scripts, never a floor file: its
    /// bytes would move every boot's timing when a floor is measured again.
    #[test]
    fn the_scripts_are_packed_without_the_floor_files() {
        let all = scripts(&crate::util::project_root().join("qemu")).unwrap();
        let has = |name: &str| all.iter().any(|(rel, _)| rel == name);
        assert!(has("scenarios/fuse-nostrict/run.sh") && has("lib.sh"));
        assert!(crate::util::project_root()
            .join("qemu/scenarios/fuse-nostrict/floor.toml")
            .is_file());
        assert!(!has("scenarios/fuse-nostrict/floor.toml"));
    }

    #[test]
    fn newc_entries_are_aligned_and_parents_come_first() {
        let mut c = Newc::new(Vec::new());
        c.file("/a/b/f", 0o644, b"hello").unwrap();
        c.chardev("dev/console", 0o600, 5, 1).unwrap();
        let bytes = c.finish().unwrap();
        let text = String::from_utf8_lossy(&bytes);
        // Every header starts with the magic at a 4-byte boundary.
        let starts: Vec<usize> = text.match_indices("070701").map(|(i, _)| i).collect();
        assert_eq!(starts.len(), 6, "a, a/b, a/b/f, dev, dev/console, trailer");
        assert!(starts.iter().all(|s| s % 4 == 0));
        let a = text.find("a\0").unwrap();
        let ab = text.find("a/b\0").unwrap();
        let f = text.find("a/b/f\0").unwrap();
        assert!(a < ab && ab < f);
        assert!(text.contains("hello"));
        assert!(text.ends_with("TRAILER!!!\0\0\0\0") || text.contains("TRAILER!!!\0"));
        assert_eq!(bytes.len() % 4, 0);
        // The console node carries major 5, minor 1 in rdevmajor/rdevminor.
        let console = &text[starts[4]..starts[4] + 110];
        assert_eq!(&console[14..22], "00002180"); // S_IFCHR | 0600
        assert_eq!(&console[78..86], "00000005");
        assert_eq!(&console[86..94], "00000001");
    }

    #[test]
    fn ldd_output_lists_libraries_and_the_loader() {
        let text = include_str!("../../fixtures/ldd/fio.txt");
        let libs = parse_ldd(text).unwrap();
        assert_eq!(
            libs.first().unwrap(),
            Path::new("/lib/x86_64-linux-gnu/libnuma.so.1")
        );
        assert!(libs.contains(&PathBuf::from("/lib64/ld-linux-x86-64.so.2")));
        assert!(!libs.iter().any(|l| l.to_string_lossy().contains("vdso")));
        let e = parse_ldd("\tlibfoo.so.1 => not found\n")
            .unwrap_err()
            .to_string();
        assert!(e.contains("libfoo"), "{e}");
    }
}
