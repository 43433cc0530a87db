// SPDX-License-Identifier: GPL-2.0-only
//! `wbstall-sample`: the guest's time series sampler, as a compiled loop.
//!
//! Every INTERVAL_US microseconds it prints one block of prefixed lines to stdout
//! (the format `xtask/src/results/samples.rs` parses):
//!
//! ```text
//! S t=<first field of /proc/uptime> unix_ms=<the real-time clock, ms>
//! T <line>            each line of /sys/kernel/debug/wbstall/thresholds (with --module)
//! C <line>            each line of /sys/kernel/debug/wbstall/stats (with --module)
//! B k=v k=v ...       /sys/kernel/debug/bdi/<BDI>/stats: first word (less a trailing ':')
//!                     = second word, per line
//! V k=v ...           every tenth block: nr_dirty, nr_writeback, nr_dirty_threshold,
//!                     nr_dirty_background_threshold from /proc/vmstat
//! ```
//!
//! A shell loop did the same with busybox's `read` (one system call per byte)
//! and forked `usleep` every interval: about 11% of a FUSE writer's throughput
//! under TCG. Here a block is a handful of whole-file reads and one write, each
//! file opened once and read again from offset 0 (`pread`: a seq_file
//! regenerates its text there) rather than looked up by path every block:
//! 0.3 points of FUSE throughput (bench-fuse, 2026-12-07).
//!
//! Usage: `wbstall-sample BDI INTERVAL_US [--module]`. Runs until killed; a
//! file that cannot be read ends it with a message on stderr and status 1.

use std::{
    fmt::Write as _, fs, io::Write as _, os::unix::fs::FileExt as _, process::ExitCode,
    time::Duration,
};

/// The /proc/vmstat counters a block carries every tenth time.
const VMSTAT: [&str; 4] = [
    "nr_dirty",
    "nr_writeback",
    "nr_dirty_threshold",
    "nr_dirty_background_threshold",
];

/// How often (in blocks) the vmstat line is added.
const VMSTAT_EVERY: u64 = 10;

/// A file the sampler reads every block, opened once.
struct Source {
    path: String,
    file: fs::File,
}

impl Source {
    fn open(path: &str) -> Result<Source, String> {
        let file =
            fs::File::open(path).map_err(|e| format!("wbstall-sample: opening {path}: {e}"))?;
        Ok(Source {
            path: path.to_string(),
            file,
        })
    }

    /// The file's whole text now, read from offset 0 into `buf`.
    fn read<'a>(&self, buf: &'a mut Vec<u8>) -> Result<&'a str, String> {
        let err = |e: &dyn std::fmt::Display| format!("wbstall-sample: reading {}: {e}", self.path);
        buf.clear();
        loop {
            let at = buf.len();
            buf.resize(at + 4096, 0);
            let n = self
                .file
                .read_at(&mut buf[at..], at as u64)
                .map_err(|e| err(&e))?;
            buf.truncate(at + n);
            if n == 0 {
                return std::str::from_utf8(buf).map_err(|e| err(&e));
            }
        }
    }
}

/// What a block reads.
struct Sources {
    uptime: Source,
    /// The module's `thresholds` and `stats` (with --module).
    module: Option<(Source, Source)>,
    bdi_stats: Source,
    vmstat: Source,
}

/// `B`'s words: per line, the first word (less a trailing ':') = the second.
fn key_values(tag: &str, text: &str, keep: impl Fn(&str) -> bool) -> String {
    let mut out = String::from(tag);
    for line in text.lines() {
        let mut w = line.split_whitespace();
        let k = w.next().unwrap_or("");
        let k = k.strip_suffix(':').unwrap_or(k);
        if keep(k) {
            let _ = write!(out, " {k}={}", w.next().unwrap_or(""));
        }
    }
    out.push('\n');
    out
}

/// Each line of `text`, trimmed, prefixed with `tag`.
fn prefixed(out: &mut String, tag: &str, text: &str) {
    for line in text.lines() {
        let _ = writeln!(out, "{tag} {}", line.trim());
    }
}

/// One block of the time series, into `out`.
fn block(src: &Sources, i: u64, out: &mut String, buf: &mut Vec<u8>) -> Result<(), String> {
    out.clear();
    let t = src
        .uptime
        .read(buf)?
        .split_whitespace()
        .next()
        .unwrap_or("");
    // The real-time clock beside the uptime: fio's per-job logs are stamped
    // in Unix milliseconds (`log_unix_epoch`).
    let unix_ms = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_err(|e| format!("wbstall-sample: the real-time clock is before 1970: {e}"))?
        .as_millis();
    let _ = writeln!(out, "S t={t} unix_ms={unix_ms}");
    if let Some((thresholds, stats)) = &src.module {
        prefixed(out, "T", thresholds.read(buf)?);
        prefixed(out, "C", stats.read(buf)?);
    }
    out.push_str(&key_values("B", src.bdi_stats.read(buf)?, |_| true));
    if i.is_multiple_of(VMSTAT_EVERY) {
        out.push_str(&key_values("V", src.vmstat.read(buf)?, |k| {
            VMSTAT.contains(&k)
        }));
    }
    Ok(())
}

fn run() -> Result<(), String> {
    let args: Vec<String> = std::env::args().skip(1).collect();
    let (bdi, us, module) = match args.as_slice() {
        [bdi, us] => (bdi, us, false),
        [bdi, us, m] if m == "--module" => (bdi, us, true),
        _ => return Err("usage: wbstall-sample BDI INTERVAL_US [--module]".into()),
    };
    let us: u64 = us
        .parse()
        .map_err(|_| format!("wbstall-sample: INTERVAL_US `{us}` is not a number"))?;
    let src = Sources {
        uptime: Source::open("/proc/uptime")?,
        module: match module {
            true => Some((
                Source::open("/sys/kernel/debug/wbstall/thresholds")?,
                Source::open("/sys/kernel/debug/wbstall/stats")?,
            )),
            false => None,
        },
        bdi_stats: Source::open(&format!("/sys/kernel/debug/bdi/{bdi}/stats"))?,
        vmstat: Source::open("/proc/vmstat")?,
    };
    let (mut out, mut buf) = (String::new(), Vec::new());
    let mut stdout = std::io::stdout().lock();
    for i in 0.. {
        block(&src, i, &mut out, &mut buf)?;
        // One write per block, so that a kill leaves whole lines behind.
        stdout
            .write_all(out.as_bytes())
            .and_then(|()| stdout.flush())
            .map_err(|e| format!("wbstall-sample: writing: {e}"))?;
        std::thread::sleep(Duration::from_micros(us));
    }
    Ok(())
}

fn main() -> ExitCode {
    match run() {
        Ok(()) => ExitCode::SUCCESS,
        Err(e) => {
            eprintln!("{e}");
            ExitCode::FAILURE
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn bdi_stats_become_one_line_as_the_shell_loop_wrote_it() {
        let text = "BdiWriteback:            0 kB\nBdiReclaimable:         12 kB\nb_dirty:                    3\nstate:                      1\n";
        assert_eq!(
            key_values("B", text, |_| true),
            "B BdiWriteback=0 BdiReclaimable=12 b_dirty=3 state=1\n"
        );
    }

    #[test]
    fn vmstat_keeps_only_its_four_counters_in_file_order() {
        let text = "nr_free_pages 100\nnr_dirty 7\nnr_writeback 2\nnr_dirty_threshold 4096\nnr_dirty_background_threshold 2048\nnr_dirtied 9\n";
        assert_eq!(
            key_values("V", text, |k| VMSTAT.contains(&k)),
            "V nr_dirty=7 nr_writeback=2 nr_dirty_threshold=4096 nr_dirty_background_threshold=2048\n"
        );
    }

    #[test]
    fn a_source_reads_its_whole_file_again_each_time() {
        let dir = std::env::temp_dir().join(format!("wbstall-sample-{}", std::process::id()));
        fs::create_dir_all(&dir).unwrap();
        let path = dir.join("f");
        // Longer than one read's 4096 bytes.
        let long = "x".repeat(5000) + "\n";
        fs::write(&path, &long).unwrap();
        let src = Source::open(path.to_str().unwrap()).unwrap();
        let mut buf = Vec::new();
        assert_eq!(src.read(&mut buf).unwrap(), long);
        // The same open file, read again: what is there now, from offset 0.
        fs::write(&path, "short\n").unwrap();
        assert_eq!(src.read(&mut buf).unwrap(), "short\n");
        fs::remove_dir_all(&dir).unwrap();
        // Negative: a file that is not there is named.
        let e = Source::open("/nonexistent/wbstall").err().unwrap();
        assert!(e.contains("opening /nonexistent/wbstall"), "{e}");
    }

    #[test]
    fn module_lines_are_trimmed_and_prefixed() {
        let mut out = String::new();
        prefixed(
            &mut out,
            "T",
            "  slot=0 wb_thresh=10  \nslot=1 wb_thresh=20\n",
        );
        assert_eq!(out, "T slot=0 wb_thresh=10\nT slot=1 wb_thresh=20\n");
    }
}
