//! `qemu-test`'s cost judging inputs: the costs the user accepts
//! (`--accept-cost`) and the floor each scenario is judged by.

use std::collections::BTreeMap;

use anyhow::{bail, Context, Result};

use super::request::QemuTestRequest;
use crate::{
    analysis::cost,
    guest::{qemu::Machine, scenario::Scenario},
    kernel::variants::UnderTest,
    results::floor,
};

impl QemuTestRequest {
    /// `--accept-cost [SCENARIO=]PCT`, checked: only for a patch under test,
    /// a planned scenario, a positive percentage.
    pub(super) fn accepted_costs(
        &self,
        under_test: &[UnderTest],
        scenarios: &[Scenario],
    ) -> Result<BTreeMap<String, f64>> {
        if under_test.is_empty() && !self.accept_cost.is_empty() {
            bail!(
                "--accept-cost is a cost the patch under test may have: give it with --patch \
                 FILE or --rev REV"
            );
        }
        let mut out = BTreeMap::new();
        for a in &self.accept_cost {
            let (scenario, pct) = match a.split_once('=') {
                Some((s, p)) => (s.to_string(), p),
                None => ("*".to_string(), a.as_str()),
            };
            if scenario != "*" && !scenarios.iter().any(|s| s.name == scenario) {
                bail!(
                    "--accept-cost {a}: `{scenario}` is not a planned scenario (planned: {})",
                    scenarios
                        .iter()
                        .map(|s| s.name)
                        .collect::<Vec<_>>()
                        .join(", ")
                );
            }
            let pct: f64 = (pct.trim_end_matches('%').parse().ok())
                .filter(|p: &f64| *p > 0.0 && p.is_finite())
                .with_context(|| {
                    format!("--accept-cost {a}: PCT is a percentage above 0, e.g. 5 or 5%")
                })?;
            out.insert(scenario, pct);
        }
        Ok(out)
    }

    /// The floor each scenario's costs are judged by under this session's
    /// job and machine, or why it has none.
    pub(super) fn floors(
        &self,
        scenarios: &[Scenario],
        machine: &Machine,
    ) -> Result<BTreeMap<String, floor::FloorOf>> {
        let jobs: Vec<_> = scenarios
            .iter()
            .map(|s| (s.name, self.job.of(*s), s.disk))
            .collect();
        floor::of_each(
            jobs.iter().map(|(n, j, d)| (*n, j, *d)),
            machine,
            &cost::keys(),
        )
    }

    /// The boots the costs may add at worst (`--dry-run`): for each patch
    /// under test and each scenario where its costs are judged (it is
    /// expected ok, the scenario has a floor), its runs and the reference's
    /// up to the cap, as (kernel, scenario).
    pub(super) fn cost_boots(&self, i: &super::inputs::Inputs) -> Result<Vec<(String, String)>> {
        let floors = self.floors(&i.scenarios, &i.machine)?;
        let reference = &i.roles.reference;
        let mut out = Vec::new();
        for s in &i.scenarios {
            let judged = |u: &&UnderTest| {
                let ok = (i.expected.1.expectation(s.name, &u.variant))
                    .is_some_and(|e| e.class == crate::analysis::expected::Class::Ok);
                ok && matches!(floors.get(s.name), Some(floor::FloorOf::Measured(_)))
            };
            let patches: Vec<&UnderTest> = i.under_test.iter().filter(judged).collect();
            if patches.is_empty() || self.shard.is_some() {
                continue;
            }
            let more = (cost::RUN_CAP as u32).saturating_sub(i.runs.0.of(s.name));
            for v in std::iter::once(reference).chain(patches.iter().map(|u| &u.variant)) {
                out.extend((0..more).map(|_| (v.clone(), s.name.to_string())));
            }
        }
        Ok(out)
    }
}
