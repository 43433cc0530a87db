//! The JSON files read by the harness: the ready file and the stats file.

use std::fs;
use std::io::Write;
use std::path::Path;
use std::path::PathBuf;

use anyhow::Context;
use serde::Serialize;

use crate::fs::Backing;
use crate::stats::Snapshot;

/// Written to `--ready-file` once the kernel's INIT has been answered.
///
/// The first six fields are the contract with the harness; the rest is diagnostics.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct Ready {
    /// Whether `FUSE_WRITEBACK_CACHE` was negotiated. The harness must fail the run if not.
    pub writeback_cache: bool,
    /// `max_write` answered in INIT (bytes).
    pub max_write: u32,
    /// Negotiated protocol major version.
    pub proto_major: u32,
    /// Negotiated protocol minor version (the smaller of the kernel's and fuser's).
    pub proto_minor: u32,
    /// Number of worker threads serving requests.
    pub threads: usize,
    /// Backing mode.
    pub mode: Backing,
    /// Protocol minor version offered by the kernel.
    pub kernel_minor: u32,
    /// `max_pages` answered in INIT.
    pub max_pages: u16,
    /// `max_readahead` answered in INIT (bytes).
    pub max_readahead: u32,
    /// `max_background` answered in INIT.
    pub max_background: u16,
    /// INIT flags offered by the kernel (hex).
    pub kernel_flags: String,
    /// INIT flags answered (hex; offered & requested).
    pub flags: String,
    /// Process id of the server (to signal it).
    pub pid: u32,
}

/// How the session ended, recorded in the stats file.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum EndedBy {
    /// SIGTERM/SIGINT arrived; the server unmounted itself.
    Signal,
    /// SIGTERM/SIGINT arrived but the session did not end within the exit timeout
    /// (e.g. a lazily detached mount still in use), so the server exited anyway.
    SignalTimeout,
    /// The filesystem was unmounted from outside.
    Unmount,
    /// The session loop failed (the error is printed on stderr; the exit status is 1).
    Error,
}

/// Written to `--stats-file`.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct StatsReport {
    /// The counters.
    #[serde(flatten)]
    pub counters: Snapshot,
    /// Backing mode.
    pub mode: Backing,
    /// How the session ended.
    pub ended_by: EndedBy,
    /// `false` for the snapshot taken when the signal arrived (before unmounting, which may
    /// still flush dirty pages); `true` for the last one, written just before exit.
    #[serde(rename = "final")]
    pub is_final: bool,
}

/// Writes `value` as one line of JSON to `path`, atomically (temporary file + rename), so a
/// reader never sees a partial file.
pub fn write_json_atomic<T: Serialize>(path: &Path, value: &T) -> anyhow::Result<()> {
    let mut line = serde_json::to_string(value).context("serialising JSON")?;
    line.push('\n');
    let mut tmp_name = path.file_name().unwrap_or_default().to_os_string();
    tmp_name.push(format!(".tmp.{}", std::process::id()));
    let tmp: PathBuf = path.with_file_name(tmp_name);
    let result = (|| -> anyhow::Result<()> {
        let mut file =
            fs::File::create(&tmp).with_context(|| format!("creating {}", tmp.display()))?;
        file.write_all(line.as_bytes())
            .with_context(|| format!("writing {}", tmp.display()))?;
        file.sync_all().ok();
        fs::rename(&tmp, path)
            .with_context(|| format!("renaming {} to {}", tmp.display(), path.display()))
    })();
    if result.is_err() {
        fs::remove_file(&tmp).ok();
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::stats::Stats;

    fn temp_path(name: &str) -> PathBuf {
        std::env::temp_dir().join(format!("wbstall-fuse-unit-{}-{name}", std::process::id()))
    }

    #[test]
    fn ready_json_keys() {
        let ready = Ready {
            writeback_cache: true,
            max_write: 1 << 20,
            proto_major: 7,
            proto_minor: 40,
            threads: 2,
            mode: Backing::Sink,
            kernel_minor: 45,
            max_pages: 256,
            max_readahead: 131072,
            max_background: 16,
            kernel_flags: "0x1".into(),
            flags: "0x1".into(),
            pid: 1,
        };
        let json = serde_json::to_string(&ready).unwrap();
        assert!(json.starts_with(
            r#"{"writeback_cache":true,"max_write":1048576,"proto_major":7,"proto_minor":40,"threads":2,"mode":"sink","#
        ));
    }

    #[test]
    fn stats_json_and_atomic_write() {
        let report = StatsReport {
            counters: Stats::default().snapshot(),
            mode: Backing::Mem,
            ended_by: EndedBy::SignalTimeout,
            is_final: true,
        };
        let path = temp_path("stats.json");
        write_json_atomic(&path, &report).unwrap();
        let text = fs::read_to_string(&path).unwrap();
        fs::remove_file(&path).unwrap();
        assert!(text.ends_with('\n'));
        let v: serde_json::Value = serde_json::from_str(&text).unwrap();
        assert_eq!(v["writes"], 0);
        assert_eq!(v["mode"], "mem");
        assert_eq!(v["ended_by"], "signal_timeout");
        assert_eq!(v["final"], true);
        assert!(v["write_size_hist"].is_array());
    }

    #[test]
    fn atomic_write_error_is_reported() {
        let path = Path::new("/nonexistent-dir-wbstall/x.json");
        assert!(write_json_atomic(path, &1).is_err());
    }
}
