//! `qemu-test`'s variant roles: the A/A control (`--aa`, `--no-aa`) and the
//! `--compare` pairs the session is reported by.

use std::collections::BTreeMap;

use anyhow::{bail, Context, Result};

use super::request::QemuTestRequest;
use crate::{
    kernel::{
        build::Built,
        variants::{Comparison, Roles, Variant, Variants},
    },
    report,
};

impl QemuTestRequest {
    /// The roles the session is reported by: the variants file's, with the
    /// `--compare` pairs added (checked against what will be measured).
    pub(super) fn roles(
        &self,
        variants: &Variants,
        selected: &[Variant],
        runs: u32,
    ) -> Result<Roles> {
        let mut roles = variants.roles.clone();
        let mut measured: Vec<String> = selected.iter().map(|v| v.name.clone()).collect();
        if let Some(aa) = self.aa_name(&measured, runs, &roles) {
            measured.push(aa);
        }
        roles.compare.extend(self.comparisons(&measured)?);
        Ok(roles)
    }

    /// `--compare A B` pairs, each naming variants this session measures.
    pub(super) fn comparisons(&self, measured: &[String]) -> Result<Vec<Comparison>> {
        self.compare
            .chunks(2)
            .map(|ab| {
                for name in ab {
                    if !measured.contains(name) {
                        bail!(
                            "--compare {} {}: `{name}` is not measured in this session \
                             (measured: {})",
                            ab[0],
                            ab[1],
                            measured.join(", ")
                        );
                    }
                }
                Ok(Comparison {
                    a: ab[0].clone(),
                    b: ab[1].clone(),
                    claims: BTreeMap::new(),
                })
            })
            .collect()
    }

    /// The variant booted again as the A/A control: `--aa`, else the
    /// reference when selected; none with `--no-aa` or a single run.
    pub(super) fn aa_of(&self, selected: &[String], runs: u32, roles: &Roles) -> Option<String> {
        if self.no_aa || runs < 2 {
            return None;
        }
        match &self.aa {
            Some(n) => Some(n.clone()),
            None if selected.contains(&roles.reference) => Some(roles.reference.clone()),
            None => None,
        }
    }

    /// The A/A control's own name (`<variant>-aa`), if there is one.
    pub(super) fn aa_name(&self, selected: &[String], runs: u32, roles: &Roles) -> Option<String> {
        self.aa_of(selected, runs, roles)
            .map(|n| report::format::aa_name(&n))
    }

    /// The A/A control: the chosen variant again, under its own name.
    pub(super) fn aa_variant(
        &self,
        built: &[Built],
        runs: u32,
        roles: &Roles,
    ) -> Result<Option<Built>> {
        let names: Vec<String> = built.iter().map(|b| b.meta.variant.clone()).collect();
        let Some(name) = self.aa_of(&names, runs, roles) else {
            return Ok(None);
        };
        let b = built
            .iter()
            .find(|b| b.meta.variant == name)
            .with_context(|| format!("--aa {name}: that variant is not selected"))?;
        let mut aa = b.clone();
        aa.meta.variant = report::format::aa_name(&name);
        Ok(Some(aa))
    }
}
