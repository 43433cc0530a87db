//! Command-line interface.

use std::path::PathBuf;

use clap::Parser;
use clap::ValueEnum;

use crate::fs::Backing;

/// FUSE server for the wbstall guest: negotiates FUSE_WRITEBACK_CACHE so buffered writes go
/// through the page cache (strictlimit FUSE BDI), then serves a sink or in-memory filesystem.
///
/// Mounts with mount(2) on /dev/fuse (root; no libfuse, no fusermount). Runs until
/// SIGTERM/SIGINT (then unmounts itself) or until the filesystem is unmounted; both write the
/// stats file and exit 0. Exits non-zero if the kernel refuses the writeback cache.
#[derive(Debug, Parser)]
#[command(name = "wbstall-fuse", version)]
pub struct Cli {
    /// Directory to mount the filesystem on (must exist).
    #[arg(long, value_name = "DIR")]
    pub mountpoint: PathBuf,

    /// Backing mode: `sink` discards written data (reads return zeros up to the file size);
    /// `mem` keeps it in sparse memory so it can be read back and verified. Default: sink.
    #[arg(long, value_enum, default_value_t = Backing::Sink, hide_default_value = true)]
    pub mode: Backing,

    /// Number of worker threads, each reading requests from its own cloned /dev/fuse fd.
    /// Default: the number of CPUs.
    #[arg(long, value_name = "N", value_parser = clap::value_parser!(u16).range(1..=1024))]
    pub threads: Option<u16>,

    /// After INIT has been answered, write a one-line JSON object here (writeback_cache,
    /// max_write, proto_major, proto_minor, threads, mode, ...). Default: none.
    #[arg(long, value_name = "PATH")]
    pub ready_file: Option<PathBuf>,

    /// On SIGTERM/SIGINT and when the session ends, write the request counters here as one
    /// line of JSON. Default: none.
    #[arg(long, value_name = "PATH")]
    pub stats_file: Option<PathBuf>,

    /// Largest WRITE request to accept, in bytes; clamped to what the kernel allows
    /// (fs.fuse.max_pages_limit pages, 256 by default, i.e. 1 MiB). Default: 1048576.
    #[arg(long, value_name = "BYTES", default_value_t = 1 << 20, hide_default_value = true,
          value_parser = clap::value_parser!(u32).range(4096..=16 * 1024 * 1024))]
    pub max_write: u32,

    /// `max_background` answered in INIT: how many background requests (writeback WRITEs,
    /// readahead) the kernel keeps in flight; congestion starts at 3/4 of it. Default: 16
    /// (fuser's default; the kernel's own default is 12).
    #[arg(long, value_name = "N", default_value_t = 16, hide_default_value = true,
          value_parser = clap::value_parser!(u16).range(1..))]
    pub max_background: u16,

    /// Mount with `allow_other` and serve requests from every user (default: only the
    /// mounting user, plus the requests the kernel issues on its own behalf).
    #[arg(long)]
    pub allow_other: bool,

    /// Do not mount with `default_permissions` (default: the kernel checks permissions
    /// against the mode bits; without it, this server's ACCESS check is used).
    #[arg(long)]
    pub no_default_permissions: bool,

    /// Do not answer OPEN with FOPEN_KEEP_CACHE (default: keep the page cache across opens;
    /// without it every open invalidates, and so first writes back, the file's pages).
    #[arg(long)]
    pub no_keep_cache: bool,

    /// Let all worker threads share the one /dev/fuse fd instead of cloning one per thread
    /// with FUSE_DEV_IOC_CLONE (default: clone).
    #[arg(long)]
    pub no_clone_fd: bool,

    /// Source name shown in /proc/mounts. Default: wbstall.
    #[arg(
        long,
        value_name = "NAME",
        default_value = "wbstall",
        hide_default_value = true
    )]
    pub fsname: String,

    /// Seconds to wait, after a signal, for the session to end (e.g. while a lazily detached
    /// mount is still in use) before writing the stats and exiting anyway. Default: 30.
    #[arg(
        long,
        value_name = "SECS",
        default_value_t = 30,
        hide_default_value = true
    )]
    pub exit_timeout: u64,

    /// Log level on stderr (fuser's own messages included). Default: warn.
    #[arg(long, value_enum, default_value_t = LogLevel::Warn, hide_default_value = true)]
    pub log_level: LogLevel,
}

/// Log verbosity.
#[derive(Clone, Copy, Debug, PartialEq, Eq, ValueEnum)]
pub enum LogLevel {
    /// Nothing.
    Off,
    /// Errors only.
    Error,
    /// Errors and warnings.
    Warn,
    /// Also informational messages.
    Info,
    /// Also every request (very verbose).
    Debug,
    /// Everything.
    Trace,
}

impl From<LogLevel> for log::LevelFilter {
    fn from(level: LogLevel) -> Self {
        match level {
            LogLevel::Off => log::LevelFilter::Off,
            LogLevel::Error => log::LevelFilter::Error,
            LogLevel::Warn => log::LevelFilter::Warn,
            LogLevel::Info => log::LevelFilter::Info,
            LogLevel::Debug => log::LevelFilter::Debug,
            LogLevel::Trace => log::LevelFilter::Trace,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use clap::CommandFactory;

    #[test]
    fn cli_is_consistent() {
        Cli::command().debug_assert();
    }

    #[test]
    fn defaults() {
        let cli = Cli::try_parse_from(["wbstall-fuse", "--mountpoint", "/mnt"]).unwrap();
        assert_eq!(cli.mode, Backing::Sink);
        assert_eq!(cli.threads, None);
        assert_eq!(cli.max_write, 1 << 20);
        assert_eq!(cli.max_background, 16);
        assert!(!cli.allow_other && !cli.no_default_permissions && !cli.no_keep_cache);
        assert_eq!(cli.log_level, LogLevel::Warn);
    }

    #[test]
    fn rejects_bad_values() {
        let parse = |args: &[&str]| {
            let mut v = vec!["wbstall-fuse", "--mountpoint", "/mnt"];
            v.extend_from_slice(args);
            Cli::try_parse_from(v)
        };
        assert!(parse(&["--threads", "0"]).is_err());
        assert!(parse(&["--mode", "disk"]).is_err());
        assert!(parse(&["--max-write", "100"]).is_err());
        assert!(Cli::try_parse_from(["wbstall-fuse"]).is_err());
        let cli = parse(&["--mode", "mem", "--threads", "3"]).unwrap();
        assert_eq!((cli.mode, cli.threads), (Backing::Mem, Some(3)));
    }
}
