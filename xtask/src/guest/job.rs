//! The fio job every scenario runs: the seed's command line, scaled for TCG.

use serde::{Deserialize, Serialize};

/// fio's block size in every job (the seed's).
pub const BS: &str = "128k";
/// Writers per job unless `--numjobs` says otherwise (the seed's).
pub const NUMJOBS: u32 = 4;
/// Ramp and runtime in seconds of a full job.
pub const FULL: (u32, u32) = (5, 20);
/// Ramp and runtime in seconds of a quick one (`--quick`, a bisect step).
pub const QUICK: (u32, u32) = (2, 5);

/// How the writers write (a scenario's `write`): the seed's `write(2)`s,
/// or a kind another writer of the page cache uses.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum WriteKind {
    /// `write(2)` (fio's psync engine): the seed's.
    #[default]
    Write,
    /// Stores to a shared file mapping (fio's mmap engine): pages dirtied
    /// by faults, throttled from the fault path.
    Mmap,
    /// `write(2)` with an `fsync(2)` every [`FSYNC_BLOCKS`] blocks.
    Fsync,
    /// `write(2)` to a file opened `O_SYNC`: each write waits for its own
    /// writeback.
    Osync,
}

/// The blocks between two `fsync(2)`s of [`WriteKind::Fsync`] (4 MiB of
/// 128k blocks).
pub const FSYNC_BLOCKS: u32 = 32;

impl WriteKind {
    /// Every kind, by the name a scenario and a boot parameter give it.
    pub const ALL: [WriteKind; 4] = [
        WriteKind::Write,
        WriteKind::Mmap,
        WriteKind::Fsync,
        WriteKind::Osync,
    ];

    fn is_write(&self) -> bool {
        *self == WriteKind::Write
    }

    pub fn name(self) -> &'static str {
        match self {
            WriteKind::Write => "write",
            WriteKind::Mmap => "mmap",
            WriteKind::Fsync => "fsync",
            WriteKind::Osync => "osync",
        }
    }

    /// The kind named `name`, or an error naming the kinds.
    pub fn parse(name: &str) -> Result<WriteKind, String> {
        (WriteKind::ALL.into_iter())
            .find(|k| k.name() == name)
            .ok_or_else(|| {
                let all: Vec<&str> = WriteKind::ALL.iter().map(|k| k.name()).collect();
                format!("write = \"{name}\": one of {}", all.join(", "))
            })
    }

    /// fio's options for this kind.
    fn fio_args(self) -> Vec<String> {
        match self {
            WriteKind::Write => vec!["--ioengine=psync".into()],
            WriteKind::Mmap => vec!["--ioengine=mmap".into()],
            WriteKind::Fsync => vec!["--ioengine=psync".into(), format!("--fsync={FSYNC_BLOCKS}")],
            WriteKind::Osync => vec!["--ioengine=psync".into(), "--sync=1".into()],
        }
    }
}

/// The seed's fio job, with size and runtime scaled for the machine:
/// `fio --name=writeback_test --ioengine=psync --rw=write --bs=128k --size=2G
///  --numjobs=4 --ramp_time=10 --runtime=20 --time_based --group_reporting=1 --direct=0`.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Job {
    /// Per-job file size (fio --size), e.g. `512M`.
    pub size: String,
    pub numjobs: u32,
    /// Seconds measured (fio --runtime, time based).
    pub runtime: u32,
    /// Seconds run before measuring (fio --ramp_time).
    pub ramp_time: u32,
    /// Block size (fio --bs).
    pub bs: String,
    /// How the writers write; the seed's `write(2)`s are not written out,
    /// so a record reads the same with or without kinds.
    #[serde(default, skip_serializing_if = "WriteKind::is_write")]
    pub write: WriteKind,
}

impl Job {
    /// A job over files of `size`, `numjobs` writers, `(ramp, runtime)` seconds.
    pub fn new(size: &str, numjobs: u32, (ramp_time, runtime): (u32, u32)) -> Job {
        Job {
            size: size.to_string(),
            numjobs,
            runtime,
            ramp_time,
            bs: BS.to_string(),
            write: WriteKind::Write,
        }
    }

    /// The job with its writers writing as `kind` says.
    pub fn with_write(mut self, kind: WriteKind) -> Job {
        self.write = kind;
        self
    }

    /// fio's arguments, minus `--directory` and `--output`, which the guest adds.
    pub fn args(&self) -> Vec<String> {
        let mut args: Vec<String> = vec!["--name=writeback_test".into()];
        args.extend(self.write.fio_args());
        args.extend([
            "--rw=write".into(),
            format!("--bs={}", self.bs),
            format!("--size={}", self.size),
            format!("--numjobs={}", self.numjobs),
            format!("--ramp_time={}", self.ramp_time),
            format!("--runtime={}", self.runtime),
            "--time_based".into(),
            "--group_reporting=1".into(),
            "--direct=0".into(),
            "--output-format=json".into(),
        ]);
        args
    }

    /// The command line as a user would type it, for reports.
    pub fn command_line(&self) -> String {
        format!("fio {}", self.args().join(" "))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn job_keeps_the_seed_options() {
        let job = Job {
            size: "2G".into(),
            numjobs: 4,
            runtime: 20,
            ramp_time: 10,
            bs: "128k".into(),
            write: WriteKind::Write,
        };
        assert_eq!(
            job.command_line(),
            "fio --name=writeback_test --ioengine=psync --rw=write --bs=128k --size=2G \
             --numjobs=4 --ramp_time=10 --runtime=20 --time_based --group_reporting=1 \
             --direct=0 --output-format=json"
        );
    }

    /// Each kind of write is the fio options the guest's job file sets for
    /// it (qemu/lib.sh's `fio_write_kind`), and a kind no one knows is
    /// refused naming the known ones.
    #[test]
    fn each_kind_of_write_is_its_fio_options() {
        let line = |k| Job::new("16M", 1, (2, 5)).with_write(k).command_line();
        assert!(line(WriteKind::Mmap).contains(" --ioengine=mmap --rw=write "));
        assert!(line(WriteKind::Fsync).contains(" --ioengine=psync --fsync=32 --rw=write "));
        assert!(line(WriteKind::Osync).contains(" --ioengine=psync --sync=1 --rw=write "));
        for k in WriteKind::ALL {
            assert_eq!(WriteKind::parse(k.name()), Ok(k));
        }
        let e = WriteKind::parse("dsync").unwrap_err();
        assert!(e.contains("one of write, mmap, fsync, osync"), "{e}");
        // A record from before kinds reads as the seed's writes.
        let old: Job = serde_json::from_str(
            r#"{"size":"16M","numjobs":4,"runtime":5,"ramp_time":2,"bs":"128k"}"#,
        )
        .unwrap();
        assert_eq!(old.write, WriteKind::Write);
    }
}
