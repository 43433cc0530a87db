//! Wiring: mount and negotiate, report readiness, serve with N threads, shut down on a signal
//! or on unmount, and write the stats.

use std::ffi::CString;
use std::os::unix::ffi::OsStrExt;
use std::path::Path;
use std::path::PathBuf;
use std::sync::atomic::AtomicBool;
use std::sync::atomic::Ordering;
use std::sync::mpsc;
use std::sync::Arc;
use std::sync::Mutex;
use std::time::Duration;

use anyhow::bail;
use anyhow::Context;
use fuser::Config;
use fuser::MountOption;
use fuser::Session;
use fuser::SessionACL;
use fuser::SessionUnmounter;

use crate::cli::Cli;
use crate::fs::Backing;
use crate::report::write_json_atomic;
use crate::report::EndedBy;
use crate::report::Ready;
use crate::report::StatsReport;
use crate::server::InitParams;
use crate::server::Negotiated;
use crate::server::Server;
use crate::signals;
use crate::signals::ShutdownSignals;
use crate::stats::Stats;

/// Default `fs.fuse.max_pages_limit` (and the fixed limit of kernels without the sysctl).
const DEFAULT_MAX_PAGES_LIMIT: u32 = 256;

/// The kernel did not offer `FUSE_WRITEBACK_CACHE`; the run must fail (exit status 3).
#[derive(Debug)]
pub struct WritebackRefused(pub String);

impl std::fmt::Display for WritebackRefused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "{}; without the FUSE writeback cache buffered writes bypass the page cache and \
             the writeback stall cannot occur, so this run is invalid",
            self.0
        )
    }
}

impl std::error::Error for WritebackRefused {}

/// Writes the stats file; once the final report is written, earlier-phase writes are skipped.
#[derive(Debug)]
struct StatsWriter {
    path: Option<PathBuf>,
    stats: Arc<Stats>,
    mode: Backing,
    final_written: Mutex<bool>,
}

impl StatsWriter {
    fn write(&self, ended_by: EndedBy, is_final: bool) {
        let mut final_written = self.final_written.lock().unwrap_or_else(|e| e.into_inner());
        if *final_written {
            return;
        }
        let Some(path) = &self.path else { return };
        let report = StatsReport {
            counters: self.stats.snapshot(),
            mode: self.mode,
            ended_by,
            is_final,
        };
        match write_json_atomic(path, &report) {
            Ok(()) => *final_written = is_final,
            Err(e) => eprintln!("wbstall-fuse: cannot write stats file: {e:#}"),
        }
    }
}

/// The largest `max_write` the kernel will honour: `max_pages_limit` pages.
fn kernel_max_write() -> u32 {
    let pages = std::fs::read_to_string("/proc/sys/fs/fuse/max_pages_limit")
        .ok()
        .and_then(|s| s.trim().parse::<u32>().ok())
        .filter(|&p| p > 0)
        .unwrap_or(DEFAULT_MAX_PAGES_LIMIT);
    // SAFETY: sysconf has no memory-safety preconditions.
    let page = u32::try_from(unsafe { libc::sysconf(libc::_SC_PAGESIZE) })
        .ok()
        .filter(|&p| p > 0)
        .unwrap_or(4096);
    pages.saturating_mul(page)
}

/// Detaches the mount lazily (`umount2(MNT_DETACH)`).
fn lazy_detach(mountpoint: &Path) -> std::io::Result<()> {
    let path = CString::new(mountpoint.as_os_str().as_bytes())?;
    // SAFETY: `path` is a valid NUL-terminated string.
    if unsafe { libc::umount2(path.as_ptr(), libc::MNT_DETACH) } != 0 {
        return Err(std::io::Error::last_os_error());
    }
    Ok(())
}

fn ready_report(n: &Negotiated, threads: usize, mode: Backing) -> Ready {
    Ready {
        writeback_cache: n.writeback_cache,
        max_write: n.max_write,
        proto_major: n.kernel_version.0,
        proto_minor: n.proto_minor(),
        threads,
        mode,
        kernel_minor: n.kernel_version.1,
        max_pages: n.max_pages,
        max_readahead: n.max_readahead,
        max_background: n.max_background,
        kernel_flags: format!("{:#x}", n.kernel_flags),
        flags: format!("{:#x}", n.flags),
        pid: std::process::id(),
    }
}

/// Runs the server until it is unmounted or signalled.
pub fn run(cli: Cli, signals: ShutdownSignals) -> anyhow::Result<()> {
    let mountpoint = mountpoint(&cli)?;
    let threads = threads(&cli);
    let max_write = max_write(&cli);

    let stats = Arc::new(Stats::default());
    let negotiated = Arc::new(Mutex::new(None));
    let params = InitParams {
        max_write,
        max_background: cli.max_background,
        keep_cache: !cli.no_keep_cache,
    };
    let server = Server::new(
        cli.mode,
        params,
        Arc::clone(&stats),
        Arc::clone(&negotiated),
    );
    let config = session_config(&cli, threads);
    let (mut session, n) = mount(server, &mountpoint, &config, &negotiated, &cli, threads)?;

    if let Some(path) = &cli.ready_file {
        write_json_atomic(path, &ready_report(&n, threads, cli.mode))?;
    }
    eprintln!(
        "wbstall-fuse: mounted {} mode={} threads={threads} clone_fd={} writeback_cache=true \
         max_write={} max_pages={} max_background={} proto=7.{} (kernel 7.{})",
        mountpoint.display(),
        cli.mode.as_str(),
        config.clone_fd,
        n.max_write,
        n.max_pages,
        n.max_background,
        n.proto_minor(),
        n.kernel_version.1,
    );

    let writer = Arc::new(StatsWriter {
        path: cli.stats_file.clone(),
        stats,
        mode: cli.mode,
        final_written: Mutex::new(false),
    });
    let signalled = Arc::new(AtomicBool::new(false));
    let (done_tx, done_rx) = mpsc::channel::<()>();
    spawn_shutdown_handler(
        signals,
        session.unmount_callable(),
        Arc::clone(&writer),
        Arc::clone(&signalled),
        mountpoint.clone(),
        Duration::from_secs(cli.exit_timeout),
        done_rx,
    )?;

    let result = session.run();
    drop(done_tx);
    let ended_by = if result.is_err() {
        EndedBy::Error
    } else if signalled.load(Ordering::SeqCst) {
        EndedBy::Signal
    } else {
        EndedBy::Unmount
    };
    writer.write(ended_by, true);
    result.context("FUSE session failed")?;
    eprintln!("wbstall-fuse: session ended ({ended_by:?}), exiting");
    Ok(())
}

/// The mount point, canonical; it must be a directory.
fn mountpoint(cli: &Cli) -> anyhow::Result<PathBuf> {
    let mountpoint = cli
        .mountpoint
        .canonicalize()
        .with_context(|| format!("mount point {}", cli.mountpoint.display()))?;
    if !mountpoint.is_dir() {
        bail!("mount point {} is not a directory", mountpoint.display());
    }
    Ok(mountpoint)
}

/// Worker threads: `--threads`, else one per available CPU.
fn threads(cli: &Cli) -> usize {
    match cli.threads {
        Some(n) => usize::from(n),
        None => std::thread::available_parallelism().map_or(1, |n| n.get()),
    }
}

/// `--max-write`, capped (with a warning) at what the kernel will honour.
fn max_write(cli: &Cli) -> u32 {
    let kernel_max = kernel_max_write();
    if cli.max_write > kernel_max {
        eprintln!(
            "wbstall-fuse: --max-write {} exceeds the kernel limit, using {kernel_max}",
            cli.max_write
        );
        kernel_max
    } else {
        cli.max_write
    }
}

/// The session's mount options and threading, from the flags.
fn session_config(cli: &Cli, threads: usize) -> Config {
    let mut options = vec![
        MountOption::FSName(cli.fsname.clone()),
        // The kernel's own `subtype` option: /proc/mounts shows `fuse.wbstall`.
        MountOption::CUSTOM("subtype=wbstall".into()),
        MountOption::RW,
        MountOption::NoSuid,
        MountOption::NoDev,
    ];
    if !cli.no_default_permissions {
        options.push(MountOption::DefaultPermissions);
    }
    let mut config = Config::default();
    config.mount_options = options;
    config.acl = if cli.allow_other {
        SessionACL::All
    } else {
        SessionACL::Owner
    };
    config.n_threads = Some(threads);
    config.clone_fd = !cli.no_clone_fd;
    config
}

/// Mounts with mount(2) and answers INIT (calling `Server::init`); returns
/// the session and what INIT negotiated. A kernel that does not offer the
/// writeback cache is a [`WritebackRefused`] (after the ready file, if any,
/// says so).
fn mount(
    server: Server,
    mountpoint: &Path,
    config: &Config,
    negotiated: &Mutex<Option<Negotiated>>,
    cli: &Cli,
    threads: usize,
) -> anyhow::Result<(Session<Server>, Negotiated)> {
    let session = Session::new(server, mountpoint, config);
    let recorded = *negotiated.lock().unwrap_or_else(|e| e.into_inner());
    if let Some(n) = recorded.filter(|n| !n.writeback_cache) {
        if let Some(path) = &cli.ready_file {
            write_json_atomic(path, &ready_report(&n, threads, cli.mode))?;
        }
        // Dropping a session unmounts; the kernel already got an error reply to INIT.
        drop(session);
        return Err(WritebackRefused(format!(
            "the kernel (FUSE {}.{}, INIT flags {:#x}) does not offer FUSE_WRITEBACK_CACHE",
            n.kernel_version.0, n.kernel_version.1, n.kernel_flags
        ))
        .into());
    }
    let session = session.with_context(|| {
        format!(
            "mounting FUSE on {} (needs root, /dev/fuse and mount(2) permission; fuser falls \
             back to fusermount, which does not exist here, only when mount(2) says EPERM)",
            mountpoint.display()
        )
    })?;
    let Some(n) = recorded else {
        bail!("INIT completed without negotiation results");
    };
    Ok((session, n))
}

/// On the first shutdown signal: marks `signalled`, writes the stats,
/// unmounts (lazily if that fails), and exits if the session is still running
/// `timeout` after that (`done` is dropped when it ends).
fn spawn_shutdown_handler(
    signals: ShutdownSignals,
    mut unmounter: SessionUnmounter,
    writer: Arc<StatsWriter>,
    signalled: Arc<AtomicBool>,
    mountpoint: PathBuf,
    timeout: Duration,
    done: mpsc::Receiver<()>,
) -> std::io::Result<()> {
    signals.spawn_handler(move |sig| {
        signalled.store(true, Ordering::SeqCst);
        eprintln!(
            "wbstall-fuse: {} received, unmounting {}",
            signals::name(sig),
            mountpoint.display()
        );
        writer.write(EndedBy::Signal, false);
        if let Err(e) = unmounter.unmount() {
            eprintln!("wbstall-fuse: unmount failed ({e}); detaching lazily");
            if let Err(e) = lazy_detach(&mountpoint) {
                eprintln!("wbstall-fuse: lazy unmount failed too: {e}");
            }
        }
        if let Err(mpsc::RecvTimeoutError::Timeout) = done.recv_timeout(timeout) {
            eprintln!(
                "wbstall-fuse: session still running {}s after unmount, exiting anyway",
                timeout.as_secs()
            );
            writer.write(EndedBy::SignalTimeout, true);
            std::process::exit(0);
        }
    })?;
    Ok(())
}
