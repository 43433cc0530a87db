//! The records of a session grouped once, by (scenario, variant): the verdict,
//! the tables and the plots all read cells from one [`Matrix`] instead of
//! filtering the records again each.

use std::collections::BTreeMap;

use crate::results::record::RunRecord;

/// Records by cell, with the variants and scenarios in first-seen order (the
/// plan's order, so reports follow the plan).
pub struct Matrix<'a> {
    pub variants: Vec<String>,
    pub scenarios: Vec<String>,
    cells: BTreeMap<(String, String), Vec<&'a RunRecord>>,
}

impl<'a> Matrix<'a> {
    pub fn new(records: impl IntoIterator<Item = &'a RunRecord>) -> Matrix<'a> {
        let mut m = Matrix {
            variants: Vec::new(),
            scenarios: Vec::new(),
            cells: BTreeMap::new(),
        };
        for r in records {
            if !m.variants.contains(&r.id.variant) {
                m.variants.push(r.id.variant.clone());
            }
            if !m.scenarios.contains(&r.id.scenario) {
                m.scenarios.push(r.id.scenario.clone());
            }
            m.cells
                .entry((r.id.scenario.clone(), r.id.variant.clone()))
                .or_default()
                .push(r);
        }
        m
    }

    /// The runs of one cell, in record order (empty if none).
    pub fn cell(&self, scenario: &str, variant: &str) -> &[&'a RunRecord] {
        self.cells
            .get(&(scenario.to_string(), variant.to_string()))
            .map_or(&[], Vec::as_slice)
    }

    /// The variants with runs in `scenario`.
    pub fn variants_in(&self, scenario: &str) -> Vec<&String> {
        self.variants
            .iter()
            .filter(|v| !self.cell(scenario, v).is_empty())
            .collect()
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::test_support::rec;

    #[test]
    fn records_are_grouped_once_in_first_seen_order() {
        let r = [
            rec("v2", "memcg-ext4", 1.0, 0.0),
            rec("v1", "fuse-strictlimit", 2.0, 0.0),
            rec("v2", "memcg-ext4", 3.0, 0.0),
        ];
        let m = Matrix::new(&r);
        assert_eq!(m.variants, ["v2", "v1"]);
        assert_eq!(m.scenarios, ["memcg-ext4", "fuse-strictlimit"]);
        assert_eq!(m.cell("memcg-ext4", "v2").len(), 2);
        assert!(m.cell("fuse-strictlimit", "v2").is_empty());
        assert_eq!(m.variants_in("fuse-strictlimit"), ["v1"]);
    }
}
