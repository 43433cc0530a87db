//! Small helpers shared by the stages: where things live, hashing, atomic writes,
//! and running a long command with its output in a log file.

use std::{
    fs,
    io::{BufRead, BufReader, Read, Write},
    path::{Path, PathBuf},
    process::{Command, Stdio},
    sync::{Arc, Mutex},
    thread,
};

use anyhow::{bail, Context, Result};
use sha2::{Digest, Sha256};

/// The repository root (the parent of `xtask/`).
pub fn project_root() -> PathBuf {
    Path::new(env!("CARGO_MANIFEST_DIR"))
        .parent()
        .expect("xtask lives one level below the repository root")
        .to_path_buf()
}

/// The commit the harness runs from, `-dirty` with uncommitted changes, or
/// `unknown` outside a git checkout.
pub fn harness_commit(sh: &xshell::Shell) -> String {
    let root = project_root();
    let head = xshell::cmd!(sh, "git -C {root} rev-parse HEAD")
        .quiet()
        .ignore_stderr()
        .read();
    let dirty = xshell::cmd!(sh, "git -C {root} status --porcelain")
        .quiet()
        .ignore_stderr()
        .read();
    match (head, dirty) {
        (Ok(h), Ok(d)) if d.trim().is_empty() => h.trim().to_string(),
        (Ok(h), Ok(_)) => format!("{}-dirty", h.trim()),
        _ => "unknown".into(),
    }
}

/// `Name <address>` from `git config user.name` and `user.email` of the
/// checkout; None unless git has both.
pub fn git_user(sh: &xshell::Shell) -> Option<String> {
    let root = project_root();
    let get = |key: &str| {
        let v = xshell::cmd!(sh, "git -C {root} config {key}")
            .quiet()
            .ignore_stderr()
            .read()
            .ok()?;
        Some(v.trim().to_string()).filter(|v| !v.is_empty())
    };
    Some(format!("{} <{}>", get("user.name")?, get("user.email")?))
}

/// Where build outputs that belong to this checkout go: `target/wbstall/`.
pub fn target_dir() -> PathBuf {
    project_root().join("target").join("wbstall")
}

/// The cache shared by all checkouts: `$WBSTALL_CACHE`, else `~/.cache/wbstall`.
pub fn cache_dir() -> Result<PathBuf> {
    if let Some(dir) = std::env::var_os("WBSTALL_CACHE") {
        if !dir.is_empty() {
            return Ok(PathBuf::from(dir));
        }
    }
    let home = std::env::var_os("HOME")
        .context("neither WBSTALL_CACHE nor HOME is set: set WBSTALL_CACHE=/some/dir")?;
    Ok(PathBuf::from(home).join(".cache").join("wbstall"))
}

/// True when running under CI (`CI=true`), where prompts and spinners make no sense.
pub fn in_ci() -> bool {
    std::env::var("CI").is_ok_and(|v| v == "true" || v == "1")
}

/// This program's path, to run it again as a child task. When it was relinked
/// while running (`cargo xtask ci`'s `cargo test --workspace` builds the bin
/// for the CLI tests, with the workspace's features: a new file at the same
/// path), /proc/self/exe names the old file `PATH (deleted)`; the path then
/// holds the new build of the same sources.
pub fn xtask_exe() -> Result<PathBuf> {
    let exe = std::env::current_exe().context("finding the xtask binary")?;
    Ok(live_path(exe))
}

/// `PATH (deleted)` → `PATH`; any other path as it is.
fn live_path(exe: PathBuf) -> PathBuf {
    match exe.to_str().and_then(|s| s.strip_suffix(" (deleted)")) {
        Some(p) => PathBuf::from(p),
        None => exe,
    }
}

/// True when running as root (uid 0).
pub fn is_root() -> bool {
    fs::metadata("/proc/self")
        .map(|m| std::os::unix::fs::MetadataExt::uid(&m) == 0)
        .unwrap_or(false)
}

pub fn sha256_hex(bytes: &[u8]) -> String {
    hex(&Sha256::digest(bytes))
}

pub fn sha256_file(path: &Path) -> Result<String> {
    let mut file =
        fs::File::open(path).with_context(|| format!("opening {} to hash it", path.display()))?;
    let mut hasher = Sha256::new();
    let mut buf = vec![0u8; 1 << 20];
    loop {
        let n = file
            .read(&mut buf)
            .with_context(|| format!("reading {}", path.display()))?;
        if n == 0 {
            break;
        }
        hasher.update(&buf[..n]);
    }
    Ok(hex(&hasher.finalize()))
}

pub fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// `tag.HOST.PID.N`: a name no other writer of a directory uses, whether it
/// is another thread, another process, or a process on another machine of a
/// shared file system (a Slurm node: pids repeat across nodes).
pub fn unique_name(tag: &str) -> String {
    use std::sync::atomic::{AtomicUsize, Ordering};
    static N: AtomicUsize = AtomicUsize::new(0);
    let host = fs::read_to_string("/proc/sys/kernel/hostname").unwrap_or_default();
    format!(
        "{tag}.{}.{}.{}",
        sanitize(host.trim()),
        std::process::id(),
        N.fetch_add(1, Ordering::Relaxed)
    )
}

/// Writes `contents` to `path` through a temporary file and a rename, so that a
/// crash never leaves a half-written file behind.
pub fn write_atomic(path: &Path, contents: impl AsRef<[u8]>) -> Result<()> {
    let dir = path
        .parent()
        .with_context(|| format!("{} has no parent directory", path.display()))?;
    fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let tmp = dir.join(format!(
        ".{}.tmp",
        unique_name(&path.file_name().unwrap_or_default().to_string_lossy())
    ));
    fs::write(&tmp, contents).with_context(|| format!("writing {}", tmp.display()))?;
    fs::rename(&tmp, path).with_context(|| format!("renaming into {}", path.display()))?;
    Ok(())
}

/// An exclusive hold on a directory (`flock` on its `.lock` file), released
/// when dropped or when the process ends, however it ends.
#[derive(Debug)]
pub struct DirLock {
    /// Held only for the lock it carries.
    _file: fs::File,
}

/// The lock file of a directory that [`lock_dir`] takes.
pub const LOCK_FILE: &str = ".lock";

/// A directory another process holds ([`lock_dir`]): which, by whom, doing what.
#[derive(Debug)]
pub struct DirInUse {
    pub dir: PathBuf,
    pub pid: String,
    pub doing: String,
}

impl std::fmt::Display for DirInUse {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{} is in use by pid {} ({})",
            self.dir.display(),
            self.pid,
            self.doing
        )
    }
}

/// Takes `dir` for this process (`doing`: what it does there, e.g.
/// `qemu-test`), or refuses by name when another process holds it: which pid,
/// doing what, and how to go on.
pub fn lock_dir(dir: &Path, doing: &str) -> Result<DirLock> {
    match try_lock_dir(dir, doing)? {
        Ok(lock) => Ok(lock),
        Err(busy) => bail!(
            "{busy}: two wbstall processes must not write one directory; wait for it to \
             end, or stop it (kill {}), then run again",
            busy.pid
        ),
    }
}

/// [`lock_dir`], waiting for the holder to end (`waiting` is told who it is).
pub fn lock_dir_waiting(
    dir: &Path,
    doing: &str,
    waiting: impl FnOnce(&DirInUse),
) -> Result<DirLock> {
    match try_lock_dir(dir, doing)? {
        Ok(lock) => Ok(lock),
        Err(busy) => {
            waiting(&busy);
            let file = flock(dir, 0)?.map_err(|_| anyhow::anyhow!("{busy}"))?;
            held_by_me(file, dir, doing)
        }
    }
}

/// `dir` taken, or who holds it.
pub fn try_lock_dir(dir: &Path, doing: &str) -> Result<Result<DirLock, DirInUse>> {
    match flock(dir, libc::LOCK_NB)? {
        Ok(file) => held_by_me(file, dir, doing).map(Ok),
        Err(holder) => {
            let holder = holder.trim();
            let (pid, what) = holder.split_once(' ').unwrap_or((holder, ""));
            Ok(Err(DirInUse {
                dir: dir.to_path_buf(),
                pid: if pid.is_empty() { "?" } else { pid }.to_string(),
                doing: if what.is_empty() {
                    "another wbstall task"
                } else {
                    what
                }
                .to_string(),
            }))
        }
    }
}

/// The lock file of `dir`, locked (`LOCK_EX | flags`), or what it says of
/// its holder when `LOCK_NB` found it held.
fn flock(dir: &Path, flags: libc::c_int) -> Result<Result<fs::File, String>> {
    use std::os::fd::AsRawFd;
    fs::create_dir_all(dir).with_context(|| format!("creating {}", dir.display()))?;
    let path = dir.join(LOCK_FILE);
    let file = fs::OpenOptions::new()
        .read(true)
        .write(true)
        .create(true)
        .truncate(false)
        .open(&path)
        .with_context(|| format!("opening the lock file {}", path.display()))?;
    // SAFETY: flock on a descriptor this function owns; no memory is passed.
    if unsafe { libc::flock(file.as_raw_fd(), libc::LOCK_EX | flags) } == 0 {
        return Ok(Ok(file));
    }
    let err = std::io::Error::last_os_error();
    if err.kind() != std::io::ErrorKind::WouldBlock {
        return Err(err).with_context(|| format!("locking {}", path.display()));
    }
    Ok(Err(fs::read_to_string(&path).unwrap_or_default()))
}

/// Writes this process into the lock file it holds.
fn held_by_me(mut file: fs::File, dir: &Path, doing: &str) -> Result<DirLock> {
    file.set_len(0)
        .and_then(|()| file.write_all(format!("{} {doing}\n", std::process::id()).as_bytes()))
        .with_context(|| format!("writing the lock file of {}", dir.display()))?;
    Ok(DirLock { _file: file })
}

/// A UTC timestamp usable in a directory name: `20261129T201530Z`.
pub fn timestamp() -> String {
    crate::stamp::Stamp::now().compact()
}

/// Creates a new directory under `parent` named by the current time, with
/// `-2`, `-3`, ... appended when another run took that name in the same second.
/// `create_dir` is atomic, so two processes never share one.
pub fn unique_dir(parent: &Path) -> Result<PathBuf> {
    fs::create_dir_all(parent).with_context(|| format!("creating {}", parent.display()))?;
    let stamp = timestamp();
    for n in 1..1000 {
        let name = if n == 1 {
            stamp.clone()
        } else {
            format!("{stamp}-{n}")
        };
        let dir = parent.join(name);
        match fs::create_dir(&dir) {
            Ok(()) => return Ok(dir),
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => continue,
            Err(e) => return Err(e).with_context(|| format!("creating {}", dir.display())),
        }
    }
    bail!("no free directory name for {stamp} in {}", parent.display())
}

/// `dir` can hold new directories: made if missing, and a directory made in
/// it and removed again.
pub fn check_writable(dir: &Path) -> Result<()> {
    let cannot = || format!("cannot write results into {}", dir.display());
    fs::create_dir_all(dir).with_context(cannot)?;
    let probe = dir.join(format!(".wbstall-probe-{}", std::process::id()));
    fs::create_dir(&probe).with_context(cannot)?;
    fs::remove_dir(&probe).with_context(cannot)
}

/// `word` as one word of a POSIX shell script: as it is when it holds only
/// characters no shell treats specially, else in single quotes (a quote inside
/// as `'\''`).
pub fn sh_quote(word: &str) -> String {
    let plain = |c: char| c.is_ascii_alphanumeric() || "/._-+=:,@%".contains(c);
    if !word.is_empty() && word.chars().all(plain) {
        word.to_string()
    } else {
        format!("'{}'", word.replace('\'', r"'\''"))
    }
}

/// The last `n` lines of a file, for error messages.
pub fn tail(path: &Path, n: usize) -> String {
    let text = fs::read_to_string(path).unwrap_or_default();
    let lines: Vec<&str> = text.lines().collect();
    lines[lines.len().saturating_sub(n)..].join("\n")
}

/// The text of `path` from byte `start` on (what a command appended to a
/// log); empty if it cannot be read.
pub fn read_from(path: &Path, start: u64) -> String {
    let bytes = fs::read(path).unwrap_or_default();
    let from = usize::try_from(start)
        .unwrap_or(usize::MAX)
        .min(bytes.len());
    String::from_utf8_lossy(&bytes[from..]).into_owned()
}

/// An empty `target/wbstall/logs/NAME.log`, for a step whose output goes to
/// its log ([`run_logged`]).
pub fn fresh_log(name: &str) -> Result<PathBuf> {
    let logs = target_dir().join("logs");
    fs::create_dir_all(&logs).with_context(|| format!("creating {}", logs.display()))?;
    let log = logs.join(format!("{name}.log"));
    fs::write(&log, "").with_context(|| format!("creating {}", log.display()))?;
    Ok(log)
}

/// Runs `cmd` with stdout and stderr appended to `log`, calling `on_line` for
/// every stdout line (progress reporting). On failure the error carries the log's
/// tail and its path.
pub fn run_logged(
    cmd: impl Into<Command>,
    log: &Path,
    what: &str,
    mut on_line: impl FnMut(&str),
) -> Result<()> {
    let mut cmd: Command = cmd.into();
    let file = fs::OpenOptions::new()
        .create(true)
        .append(true)
        .open(log)
        .with_context(|| format!("opening log {}", log.display()))?;
    let file = Arc::new(Mutex::new(file));
    writeln!(file.lock().unwrap(), "$ {cmd:?}").ok();
    let mut child = crate::reaper::leash(&mut cmd)
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .with_context(|| format!("starting {what}: {cmd:?}"))?;
    let stderr = child.stderr.take().expect("stderr is piped");
    let err_log = Arc::clone(&file);
    let err_thread = thread::spawn(move || {
        for line in BufReader::new(stderr).lines().map_while(Result::ok) {
            writeln!(err_log.lock().unwrap(), "{line}").ok();
        }
    });
    let stdout = child.stdout.take().expect("stdout is piped");
    for line in BufReader::new(stdout).lines().map_while(Result::ok) {
        writeln!(file.lock().unwrap(), "{line}").ok();
        on_line(&line);
    }
    err_thread.join().ok();
    let status = child
        .wait()
        .with_context(|| format!("waiting for {what}"))?;
    if !status.success() {
        bail!(
            "{what} failed ({status}). Last lines of {}:\n{}\n\nFull log: {}",
            log.display(),
            tail(log, 40),
            log.display()
        );
    }
    Ok(())
}

/// Pipes `producer`'s stdout into `consumer`'s stdin (`producer | consumer`)
/// without a shell, failing if either side fails.
pub fn pipe(producer: impl Into<Command>, consumer: impl Into<Command>, what: &str) -> Result<()> {
    let mut producer: Command = producer.into();
    let mut consumer: Command = consumer.into();
    let mut p = producer
        .stdout(Stdio::piped())
        .spawn()
        .with_context(|| format!("starting {producer:?} ({what})"))?;
    let out = p.stdout.take().expect("stdout is piped");
    let c_status = consumer
        .stdin(out)
        .status()
        .with_context(|| format!("running {consumer:?} ({what})"));
    let p_status = p
        .wait()
        .with_context(|| format!("waiting for {producer:?}"))?;
    let c_status = c_status?;
    if !p_status.success() || !c_status.success() {
        bail!("{what} failed: {producer:?} exited {p_status}, {consumer:?} exited {c_status}");
    }
    Ok(())
}

/// A name safe for a directory: anything outside `[A-Za-z0-9._-]` becomes `-`.
pub fn sanitize(name: &str) -> String {
    name.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || matches!(c, '.' | '_' | '-') {
                c
            } else {
                '-'
            }
        })
        .collect()
}

/// The last component of a path, as text.
pub fn file_name(p: &Path) -> String {
    p.file_name()
        .unwrap_or_default()
        .to_string_lossy()
        .into_owned()
}

/// A program the guest runs without libraries: an error unless `bin` is a
/// statically linked ELF file.
pub fn require_static(bin: &Path) -> Result<()> {
    let bytes = std::fs::read(bin).with_context(|| format!("reading {}", bin.display()))?;
    if elf_is_static(&bytes) != Some(true) {
        anyhow::bail!(
            "{} is not statically linked; the guest has no libraries for it",
            bin.display()
        );
    }
    Ok(())
}

/// True when an ELF file has no program interpreter (statically linked).
pub fn elf_is_static(bytes: &[u8]) -> Option<bool> {
    const PT_INTERP: u32 = 3;
    if bytes.len() < 64 || &bytes[..4] != b"\x7fELF" || bytes[4] != 2 || bytes[5] != 1 {
        return None; // not a 64-bit little-endian ELF
    }
    let u16_at = |o: usize| Some(u16::from_le_bytes(bytes.get(o..o + 2)?.try_into().ok()?));
    let u64_at = |o: usize| Some(u64::from_le_bytes(bytes.get(o..o + 8)?.try_into().ok()?));
    let phoff = usize::try_from(u64_at(0x20)?).ok()?;
    let phentsize = usize::from(u16_at(0x36)?);
    let phnum = usize::from(u16_at(0x38)?);
    for i in 0..phnum {
        let off = phoff + i * phentsize;
        let p_type = u32::from_le_bytes(bytes.get(off..off + 4)?.try_into().ok()?);
        if p_type == PT_INTERP {
            return Some(false);
        }
    }
    Some(true)
}

#[cfg(test)]
#[path = "util_tests.rs"]
mod tests;

/// A throwaway directory removed on drop (tests only).
#[cfg(test)]
pub mod testdir {
    use std::path::{Path, PathBuf};

    pub struct Dir(PathBuf);

    impl Dir {
        pub fn new(tag: &str) -> Dir {
            use std::sync::atomic::{AtomicUsize, Ordering};
            static N: AtomicUsize = AtomicUsize::new(0);
            let p = std::env::temp_dir().join(format!(
                "wbstall-test-{tag}-{}-{}",
                std::process::id(),
                N.fetch_add(1, Ordering::Relaxed)
            ));
            let _ = std::fs::remove_dir_all(&p);
            std::fs::create_dir_all(&p).unwrap();
            Dir(p)
        }

        pub fn path(&self) -> &Path {
            &self.0
        }
    }

    impl Drop for Dir {
        fn drop(&mut self) {
            let _ = std::fs::remove_dir_all(&self.0);
        }
    }

    /// `git -C dir ARGS` (as a test user), which must succeed; its stdout.
    pub fn git(dir: &Path, args: &[&str]) -> String {
        let out = std::process::Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(["-c", "user.name=t", "-c", "user.email=t@t"])
            .args(args)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "git {args:?}: {}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).into_owned()
    }
}
