//! The block device under the disk scenarios' ext4 (`--disk`): null_blk in
//! the guest, whose service time is guest time, or virtio-blk over a file on
//! the host, whose completions take host time. This file owns the choice, its
//! kernel arguments and its name on the guest's command line.

use serde::{Deserialize, Serialize};

/// The bandwidth cap of the null_blk disk in MiB/s unless `--disk-mbps` says
/// otherwise: none (0, null_blk's own "no limit"). The disk then costs what
/// the guest's CPU takes to copy the pages, on the guest's clock. Measured
/// (docs/measurements.md, "The guest-time disk"): a cap refills its budget on
/// a 20 ms timer, so pages complete in bursts 20 ms apart, and a throttle
/// sleep that falls between two bursts sees nothing written: at 12 and
/// 32 MiB/s the fixed kernels took such sleeps (upstream memcg-ext4: 3.6% and
/// 3.9% of writer time, 6 ms each on average), which no start request could
/// have prevented. Without a cap, the classes reproduce.
pub const DEFAULT_MBPS: u32 = 0;

/// The disk's size in GiB (null_blk's `gb`): the size of the host image.
pub const GIB: u32 = 1;

/// `--disk`.
#[derive(Debug, Clone, Copy, PartialEq, Eq, clap::ValueEnum)]
pub enum DiskKind {
    Null,
    Host,
}

/// The disk of a disk scenario.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(tag = "kind", rename_all = "lowercase")]
pub enum Disk {
    /// null_blk in the guest: its pages in guest memory, its bandwidth capped
    /// at `mbps` MiB/s by a guest timer (refilled every 20 ms; 0: no cap),
    /// formatted ext4 by the guest. Under the virtual clock its service time
    /// is guest time.
    Null { mbps: u32 },
    /// virtio-blk over a raw ext4 image the host made (`cache=none`):
    /// completions take host time, whatever the guest's clock says.
    Host,
}

impl Default for Disk {
    fn default() -> Disk {
        Disk::Null { mbps: DEFAULT_MBPS }
    }
}

impl std::fmt::Display for Disk {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Disk::Null { mbps: 0 } => write!(f, "null_blk (no bandwidth cap)"),
            Disk::Null { mbps } => write!(f, "null_blk ({mbps} MiB/s)"),
            Disk::Host => write!(f, "host file (virtio-blk)"),
        }
    }
}

impl Disk {
    /// The disk `--disk` and `--disk-mbps` ask for.
    pub fn from_flags(kind: DiskKind, mbps: u32) -> Disk {
        match kind {
            DiskKind::Null => Disk::Null { mbps },
            DiskKind::Host => Disk::Host,
        }
    }

    /// Its value of the guest's `wbstall.disk=`, which tells the scenario
    /// which device to put ext4 on.
    pub fn param(&self) -> &'static str {
        match self {
            Disk::Null { .. } => "null",
            Disk::Host => "host",
        }
    }
}

/// The kernel arguments of the null_blk driver (built in): one memory-backed
/// device when a boot has a null_blk disk, none otherwise.
pub fn null_blk_args(disk: Option<Disk>) -> Vec<String> {
    let Some(Disk::Null { mbps }) = disk else {
        // The built-in driver would otherwise make a nullb0 that nothing uses.
        return vec!["null_blk.nr_devices=0".into()];
    };
    vec![
        // One device, /dev/nullb0.
        "null_blk.nr_devices=1".into(),
        // Its size in GiB: the host image's, so the two disks hold the same
        // file system.
        format!("null_blk.gb={GIB}"),
        // Keep the data: ext4 reads back its metadata, and what it reads must
        // be what it wrote. Pages are allocated as they are first written, so
        // memory holds what the file set and ext4 use, not the size.
        "null_blk.memory_backed=1".into(),
        // The bandwidth cap (MiB/s; 0: none), enforced by a guest hrtimer
        // that refills the budget every 20 ms.
        format!("null_blk.mbps={mbps}"),
    ]
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn null_blk_gets_its_device_only_with_a_null_disk() {
        let args = null_blk_args(Some(Disk::Null { mbps: 24 }));
        assert_eq!(
            args,
            [
                "null_blk.nr_devices=1",
                "null_blk.gb=1",
                "null_blk.memory_backed=1",
                "null_blk.mbps=24"
            ]
        );
        for none in [None, Some(Disk::Host)] {
            assert_eq!(null_blk_args(none), ["null_blk.nr_devices=0"]);
        }
    }

    #[test]
    fn a_disk_is_recorded_with_its_kind_and_bandwidth() {
        let j = serde_json::to_string(&Disk::Null { mbps: 24 }).unwrap();
        assert_eq!(j, r#"{"kind":"null","mbps":24}"#);
        assert_eq!(
            serde_json::from_str::<Disk>(r#"{"kind":"host"}"#).unwrap(),
            Disk::Host
        );
        assert!(serde_json::from_str::<Disk>(r#"{"kind":"null"}"#).is_err());
    }
}
