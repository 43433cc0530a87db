//! Which run a value is about: [`RunId`] (scenario, variant, run), the run
//! 0-based as the plan counts boots, printed 1-based as every report numbers
//! runs. [`RunId::number`] is the one place that adds the 1.

use std::fmt;

use serde::{Deserialize, Serialize};

/// One run of one cell: the `run`-th (0-based) boot of `variant` in `scenario`.
#[derive(Debug, Clone, Default, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
pub struct RunId {
    pub scenario: String,
    pub variant: String,
    /// 0-based repetition of the cell.
    pub run: u32,
}

impl RunId {
    pub fn new(scenario: &str, variant: &str, run: u32) -> RunId {
        RunId {
            scenario: scenario.to_string(),
            variant: variant.to_string(),
            run,
        }
    }

    /// The run's number as the reports print it, 1-based: the one
    /// conversion from the plan's 0-based count.
    pub fn number(&self) -> u32 {
        self.run + 1
    }

    /// `#2`: the run within its cell, as a cell's lines name it.
    pub fn short(&self) -> String {
        format!("#{}", self.number())
    }

    /// `<variant>-<scenario>-<number>`: the stem of the run's files.
    pub fn stem(&self) -> String {
        format!("{}-{}-{}", self.variant, self.scenario, self.number())
    }

    /// Whether this run is one of the cell (`scenario`, `variant`).
    pub fn in_cell(&self, scenario: &str, variant: &str) -> bool {
        self.scenario == scenario && self.variant == variant
    }
}

/// `<scenario>/<variant> #<number>`.
impl fmt::Display for RunId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "{}/{} {}", self.scenario, self.variant, self.short())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_run_is_counted_from_0_and_printed_from_1() {
        let id = RunId::new("memcg-ext4", "v1", 1);
        assert_eq!(id.to_string(), "memcg-ext4/v1 #2");
        assert_eq!(
            (id.number(), id.short(), id.stem()),
            (2, "#2".into(), "v1-memcg-ext4-2".into())
        );
        assert!(id.in_cell("memcg-ext4", "v1") && !id.in_cell("memcg-ext4", "v2"));
    }
}
