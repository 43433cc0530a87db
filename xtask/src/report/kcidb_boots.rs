//! The KCIDB tests of a session: per planned run its `boot` test and its
//! measurement's test (`wbstall.<scenario>.<runtime>s`), with the guest as
//! their environment; the issues each run shows ([`super::kcidb_issues`]).

use std::collections::BTreeMap;

use anyhow::{ensure, Context, Result};
use serde_json::{json, Value};

use super::{
    kcidb_ids::{build_id, checkout_id, test_id, Artifacts, Objects, ORIGIN},
    kcidb_runs::{self, by_run, run_statuses, KcidbStatus, RunStatus, Seen},
};
use crate::{
    analysis::{judge::Judgement, judgement::Planned},
    kernel::build::VariantMeta,
    results::session::Session,
};

/// The root node of every measurement's test path.
pub const ROOT: &str = "wbstall";
/// The path of every run's boot (the dashboard counts `boot` and `boot.*`
/// as boots).
const BOOT: &str = "boot";
/// The unit of every test's number.
const UNIT: &str = "MiB/s";
/// The platform's architecture.
const ARCH: &str = "x86_64";

/// A test path of `nodes`; each node must be one the schema takes.
pub fn test_path(nodes: &[&str]) -> Result<String> {
    for n in nodes {
        let ok = !n.is_empty()
            && n.chars()
                .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-');
        ensure!(
            ok,
            "`{n}` cannot be a node of a KCIDB test path (letters, digits, `_` and `-` only): \
             rename the scenario"
        );
    }
    Ok(nodes.join("."))
}

/// Every planned run's tests (its boot's and its measurement's), in plan
/// order; the issues and their incidents.
pub fn tests(
    j: &Judgement,
    kernels: &BTreeMap<String, &VariantMeta>,
    files: &Artifacts,
    out: &mut Objects,
) -> Result<()> {
    let (session, verdict) = (j.session, &j.verdict);
    let plan = Planned::of(session);
    let seen = Seen {
        left_out: by_run((verdict.left_out.iter()).map(|x| (&x.run, x.problems.join("; ")))),
        failed: by_run(session.failures.iter().map(|f| (&f.run, &f.why))),
        records: (j.evidence.runs.iter())
            .map(|c| (c.record.id.clone(), c.record))
            .collect(),
    };
    for id in seen.left_out.keys().chain(seen.failed.keys()) {
        ensure!(
            plan.scenarios.contains(&id.scenario) && plan.variants.contains(&id.variant),
            "{id} is not in the session's plan"
        );
    }
    let env = environment(session)?;
    let mut issues = super::kcidb_issues::Issues::new(j);
    for s in &plan.scenarios {
        let job = (session.scenarios.iter())
            .find(|i| &i.name == s)
            .map(|i| &i.job)
            .with_context(|| format!("session.json has no job of {s}"))?;
        let path = test_path(&[ROOT, s, &format!("{}s", job.runtime)])?;
        for v in &plan.variants {
            let kernel = kernels.get(v).with_context(|| {
                format!("{v} is planned, but session.json records no kernel of it")
            })?;
            let cell = verdict.cell(s, v);
            let runs = run_statuses(cell, (s, v), plan.runs_of(s, v), &seen)?;
            let t = CellTests {
                session,
                build: build_id(kernel),
                checkout: checkout_id(session, kernel),
                env: &env,
                files,
                job: serde_json::to_value(job)?,
            };
            for r in &runs {
                let id = test_id(session, &r.run, r.record, &r.why);
                out.tests.push(t.boot(&id, r)?);
                out.tests.push(t.measured(&id, &path, cell, r)?);
                issues.run(&id, &t.checkout, cell, r);
            }
        }
    }
    issues.finish(out)
}

/// Where every test ran: the guest, as the session booted it.
fn environment(s: &Session) -> Result<Value> {
    let accel = serde_json::to_value(s.machine.accel)?;
    let accel = accel
        .as_str()
        .context("the accelerator's name")?
        .to_string();
    let platform = match s.machine.accel {
        crate::guest::qemu::Accel::Native => format!("host-{ARCH}"),
        _ => format!("qemu-{ARCH}"),
    };
    Ok(json!({
        "comment": format!(
            "{platform} ({accel}), {} CPUs ({}), {} MiB, {} clock, disk {}",
            s.machine.cpus,
            s.machine.cpu_model,
            s.machine.memory_mib,
            s.machine.clock,
            s.machine.disk
        ),
        "compatible": [platform],
        "misc": {
            "platform": platform,
            "accel": accel,
            "clock": serde_json::to_value(s.machine.clock)?,
            "disk": serde_json::to_value(s.machine.disk)?,
            "cpu_model": s.machine.cpu_model,
            "cpus": s.machine.cpus,
            "memory_mib": s.machine.memory_mib,
            "kernel_args": s.machine.kernel_args,
            "host_cpus": s.host_cpus,
            "jobs_vm": s.jobs_vm,
            "harness": s.harness,
            "command": s.command,
        },
    }))
}

/// What the tests of one cell share.
struct CellTests<'a> {
    session: &'a Session,
    build: String,
    checkout: String,
    env: &'a Value,
    files: &'a Artifacts,
    job: Value,
}

impl CellTests<'_> {
    /// What every test of a run has: ids, environment, when, its console log.
    fn base(&self, id: &str, path: &str, status: KcidbStatus, r: &RunStatus) -> Result<Value> {
        let mut t = json!({
            "id": id,
            "build_id": self.build,
            "origin": ORIGIN,
            "path": path,
            "status": status,
            "environment": self.env,
            "misc": {
                "variant": r.run.variant,
                "scenario": r.run.scenario,
                "run": r.run.number(),
                "quick": self.session.quick,
                "job": self.job,
            },
        });
        if let Some(url) = self.files.url(&format!("{}.console.log", r.run.stem())) {
            t["log_url"] = json!(url);
        }
        if let Some(rec) = r.record {
            let started = rec.boot.started.with_context(|| {
                format!(
                    "results.json's record of {} has no start time (`started`): it was recorded \
                     before wbstall kept one; run the session again for its KCIDB document",
                    r.run
                )
            })?;
            t["start_time"] = json!(started.rfc3339());
            t["duration"] = json!(rec.boot.wall_secs);
        }
        if let Some((_, excerpt)) = kcidb_runs::crash(r) {
            t["log_excerpt"] = json!(excerpt);
        }
        Ok(t)
    }

    /// The run's boot: did the kernel come up and run the job.
    fn boot(&self, id: &str, r: &RunStatus) -> Result<Value> {
        let status = kcidb_runs::boot_status(r);
        let mut t = self.base(&format!("{id}/{BOOT}"), BOOT, status, r)?;
        t["comment"] = json!(match status {
            KcidbStatus::Pass => format!(
                "{} {}: booted and ran the job",
                r.run.variant,
                r.run.short()
            ),
            _ => format!("{} {}: {}", r.run.variant, r.run.short(), r.why.join("; ")),
        });
        Ok(t)
    }

    /// The run's measurement: its outcome, its MiB/s, its verdict and
    /// expectation.
    fn measured(
        &self,
        id: &str,
        path: &str,
        cell: Option<&crate::analysis::judgement::CellVerdict>,
        r: &RunStatus,
    ) -> Result<Value> {
        let expected = cell.and_then(|c| c.expected);
        let held = match (expected, r.held) {
            (Some(e), Some(true)) => format!("expected {e}: as expected"),
            (Some(e), Some(false)) => format!("expected {e}: NOT as expected"),
            _ => "no expectation".to_string(),
        };
        let comment = match r.verdict {
            Some(v) => format!(
                "{} {}: {}, {:.1}% of writer time {}{}; {held}",
                r.run.variant,
                r.run.short(),
                v.class,
                v.stall_fraction() * 100.0,
                v.basis().stall_words(),
                v.margins.as_ref().map_or(String::new(), |m| format!(
                    "; {}",
                    super::format::margins(m)
                ))
            ),
            None => format!("{} {}: {}", r.run.variant, r.run.short(), r.why.join("; ")),
        };
        let mut t = self.base(id, path, r.status, r)?;
        t["comment"] = json!(comment);
        let m = &mut t["misc"];
        m["expected"] = json!(expected);
        m["as_expected"] = json!(r.held);
        m["verdict"] = json!(r.verdict.map(serde_json::to_value).transpose()?);
        m["why"] = json!(r.why);
        if let Some(rec) = r.record {
            let bw = r.verdict.map_or(rec.fio.bw_mib_s, |v| v.bw_mib_s());
            t["number"] = json!({"value": bw, "unit": UNIT});
        }
        Ok(t)
    }
}
