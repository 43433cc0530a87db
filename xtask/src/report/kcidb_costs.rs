//! The KCIDB tests of what each patch under test costs: per scenario where
//! its costs were judged, one test per judged metric
//! (`wbstall.<scenario>.<runtime>s.cost.<metric>`) on the patch's build, its
//! number the change against the reference in %, its status the cost's
//! class as the verdict reads it: a `worse` that fails is `FAIL`, one the
//! user accepted and `same` or `better` are `PASS`, `undecided` is `DONE`
//! (finished without a verdict), `unresolvable` and a scenario whose costs
//! were not judged are `SKIP`, with why.

use std::collections::BTreeMap;

use anyhow::{Context, Result};
use serde_json::{json, Value};

use super::{
    format,
    kcidb_boots::{test_path, ROOT},
    kcidb_ids::{build_id, content_id, Objects, ORIGIN},
    kcidb_runs::KcidbStatus,
};
use crate::{
    analysis::{
        cost::{Cost, CostClass},
        judge::{Judgement, PatchCosts},
    },
    kernel::build::VariantMeta,
};

/// The node under a scenario's path that holds its costs.
const COST: &str = "cost";

/// Every patch under test's cost tests, in the judgement's order.
pub fn tests(
    j: &Judgement,
    kernels: &BTreeMap<String, &VariantMeta>,
    out: &mut Objects,
) -> Result<()> {
    for p in &j.costs {
        let kernel = kernels.get(&p.variant).with_context(|| {
            format!(
                "{} has costs, but session.json records no kernel of it",
                p.variant
            )
        })?;
        let job = (j.session.scenarios.iter())
            .find(|i| i.name == p.scenario)
            .map(|i| &i.job)
            .with_context(|| format!("session.json has no job of {}", p.scenario))?;
        let scenario = [
            ROOT,
            p.scenario.as_str(),
            &format!("{}s", job.runtime),
            COST,
        ];
        match &p.costs {
            Ok(costs) => {
                for c in costs {
                    let path = test_path(&[&scenario[..], &[&node(&c.metric)]].concat())?;
                    out.tests.push(judged(j, p, kernel, &path, c));
                }
            }
            Err(why) => {
                let path = test_path(&scenario)?;
                out.tests.push(unjudged(j, p, kernel, &path, why));
            }
        }
    }
    Ok(())
}

/// A metric's key as a test path node: `fio.write_bw_MiB/s` ->
/// `fio_write_bw_MiB_s`.
fn node(key: &str) -> String {
    key.chars()
        .map(|c| if c.is_ascii_alphanumeric() { c } else { '_' })
        .collect()
}

/// The status of a judged cost.
fn status(c: &Cost) -> KcidbStatus {
    match c.class {
        CostClass::Worse if c.fails() => KcidbStatus::Fail,
        CostClass::Worse | CostClass::Same | CostClass::Better => KcidbStatus::Pass,
        CostClass::Undecided => KcidbStatus::Done,
        CostClass::Unresolvable => KcidbStatus::Skip,
    }
}

/// What every cost test of `p` has.
fn base(j: &Judgement, p: &PatchCosts, kernel: &VariantMeta, path: &str) -> Value {
    let started = j.session.started.compact();
    let id = content_id("test", &[&started, &p.variant, &p.against, path]);
    json!({
        "id": id,
        "build_id": build_id(kernel),
        "origin": ORIGIN,
        "path": path,
        "misc": {"variant": p.variant, "scenario": p.scenario, "against": p.against},
    })
}

/// One judged metric's cost.
fn judged(j: &Judgement, p: &PatchCosts, kernel: &VariantMeta, path: &str, c: &Cost) -> Value {
    let mut t = base(j, p, kernel, path);
    t["status"] = json!(status(c));
    t["comment"] = json!(format!(
        "{} against {} in {}: {} {} ({})",
        p.variant,
        p.against,
        p.scenario,
        c.metric,
        format::pct_interval(c.change_pct, c.lo_pct, c.hi_pct),
        format::cost_words(c)
    ));
    t["number"] = json!({"value": c.change_pct, "unit": "%"});
    t["misc"]["cost"] = json!(c);
    t
}

/// A scenario whose costs were not judged, and why.
fn unjudged(j: &Judgement, p: &PatchCosts, kernel: &VariantMeta, path: &str, why: &str) -> Value {
    let mut t = base(j, p, kernel, path);
    t["status"] = json!(KcidbStatus::Skip);
    t["comment"] = json!(format!(
        "{} against {} in {}: costs not judged: {why}",
        p.variant, p.against, p.scenario
    ));
    t
}
