//! A change between two cells as the bootstrap measured it, and how it reads
//! against the scenario's A/A control: the value `analysis::judge` computes
//! once per pair and metric, and every renderer reads.

use serde::{Deserialize, Serialize};

/// Resamples of every bootstrap interval.
pub const RESAMPLES: usize = 5000;

/// %change of one cell's aggregate against another's, with its
/// percentile-bootstrap 95% confidence interval (`stats::change`).
#[derive(Debug, Clone, Copy, PartialEq, Serialize, Deserialize)]
pub struct Change {
    pub pct: f64,
    pub lo: f64,
    pub hi: f64,
}

impl Change {
    /// True when the interval excludes 0: the difference is resolved.
    pub fn resolved(&self) -> bool {
        self.lo > 0.0 || self.hi < 0.0
    }

    pub fn width(&self) -> f64 {
        self.hi - self.lo
    }
}

/// How a %change reads against the A/A control of its scenario (the same
/// kernel booted twice), in every report that states one.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Resolution {
    /// The interval excludes 0 and the change lies outside the A/A interval.
    Resolved,
    /// The interval excludes 0, but so does the A/A control's.
    NoisyControl,
    /// The interval excludes 0, but the change lies inside the A/A interval.
    InsideFloor,
    /// The interval includes 0.
    NotResolved,
}

impl Change {
    /// This change judged against `aa`, the scenario's A/A change (if measured).
    pub fn against(&self, aa: Option<&Change>) -> Resolution {
        if !self.resolved() {
            Resolution::NotResolved
        } else if aa.is_some_and(Change::resolved) {
            Resolution::NoisyControl
        } else if aa.is_some_and(|f| f.lo <= self.pct && self.pct <= f.hi) {
            Resolution::InsideFloor
        } else {
            Resolution::Resolved
        }
    }
}
