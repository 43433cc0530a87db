//! What `bench-fuse`'s boots say: each guest's throughput (median and
//! range) and the share of the bare guest's the harness guest reaches.

use super::stats::median;

/// One guest's fio bandwidths, MiB/s.
#[derive(Debug, Clone, PartialEq)]
pub struct GuestThroughput {
    pub name: &'static str,
    pub runs: usize,
    pub median: f64,
    pub min: f64,
    pub max: f64,
}

/// The harness's cost on FUSE.
#[derive(Debug, Clone, PartialEq)]
pub struct HarnessCost {
    pub variant: String,
    pub cpu_model: String,
    /// The harness guest, then the bare one.
    pub guests: [GuestThroughput; 2],
    /// The harness guest's median as a percentage of the bare guest's;
    /// none when the bare guest's is 0.
    pub share: Option<f64>,
}

/// The cost `bw` (the harness guest's bandwidths, then the bare guest's)
/// shows.
pub fn harness_cost(variant: &str, cpu_model: &str, bw: &[Vec<f64>; 2]) -> HarnessCost {
    let guest = |name, v: &[f64]| GuestThroughput {
        name,
        runs: v.len(),
        median: median(v),
        min: v.iter().copied().fold(f64::INFINITY, f64::min),
        max: v.iter().copied().fold(0.0, f64::max),
    };
    let guests = [guest("harness", &bw[0]), guest("bare", &bw[1])];
    let (h, b) = (guests[0].median, guests[1].median);
    HarnessCost {
        variant: variant.to_string(),
        cpu_model: cpu_model.to_string(),
        share: (b > 0.0).then(|| h / b * 100.0),
        guests,
    }
}
