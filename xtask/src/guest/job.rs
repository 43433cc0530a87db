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
        }
    }

    /// fio's arguments, minus `--directory` and `--output`, which the guest adds.
    pub fn args(&self) -> Vec<String> {
        vec![
            "--name=writeback_test".into(),
            "--ioengine=psync".into(),
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
        ]
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
        };
        assert_eq!(
            job.command_line(),
            "fio --name=writeback_test --ioengine=psync --rw=write --bs=128k --size=2G \
             --numjobs=4 --ramp_time=10 --runtime=20 --time_based --group_reporting=1 \
             --direct=0 --output-format=json"
        );
    }
}
