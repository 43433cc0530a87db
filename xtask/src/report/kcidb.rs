//! The results as KCIDB I/O data, the schema of KernelCI's results database
//! (v5.3, as the `kcidb-io` package validates it; `report --format kcidb`).
//!
//! - a checkout per kernel source: the base source and the variant's patches
//!   (names, sha256s, the KCIDB `patchset_hash` over them);
//! - a build per kernel: compiler, configuration, its start and duration.
//!   The A/A control boots its variant's kernel again: it has no checkout or
//!   build of its own, its runs are more tests of that build;
//! - a test per planned run, on the path of its scenario alone
//!   (`wbstall.<scenario>`), so that one test compares across builds: its
//!   status is its own outcome ([`outcome`]: a stall FAILs, ok PASSes), its
//!   number the MiB/s, its start and duration the boot's on the host, and in
//!   `misc` the variant, the run's verdict (the stall share as
//!   `misc.verdict.stall_fraction`, its distances to the class boundaries as
//!   `misc.verdict.margins`), its expectation and whether it held;
//! - the known failure, an issue per scenario where cells are expected to
//!   stall (naming the culprit when the session has one), with an incident on
//!   each of their stalling runs; and an issue per cell that fails its
//!   expectation, with an incident on each run that fails it.
//!
//! Every id is `wbstall:<session start>/<name>`: the session's start names the
//! results directory. Every time is one the results directory recorded.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::{bail, ensure, Context, Result};
use serde_json::{json, Value};

use super::kcidb_runs::{by_run, run_statuses, RunStatus, Seen, Status};
use crate::{
    analysis::{
        expected::Class,
        judge::Judgement,
        judgement::{CellVerdict, Planned},
    },
    deps::{Toolchain, Version},
    guest::run_id::RunId,
    kernel::build::{PatchMeta, VariantMeta},
    results::{dir::ResultsDir, session::Session},
    stamp::Stamp,
};

/// The CI system the data comes from: every id starts with it.
pub const ORIGIN: &str = "wbstall";
/// The schema version written: the newest the newest `kcidb-io` validates.
pub const VERSION: (u32, u32) = (5, 3);
/// The root node of every test path.
const ROOT: &str = "wbstall";
/// The unit of every test's number.
const UNIT: &str = "MiB/s";

/// The KCIDB document of a results directory, judged against the
/// expectations its session recorded.
pub fn of_dir(dir: &std::path::Path) -> Result<Value> {
    let (session, records) = ResultsDir::new(dir).load()?;
    let expected = crate::analysis::verdict::session_expectations(&session, None)?;
    let j = crate::analysis::judge(&session, &records, &expected)?;
    document(&j).with_context(|| format!("making the KCIDB document of {}", dir.display()))
}

/// The document as written to `kcidb.json`.
pub fn text(doc: &Value) -> Result<String> {
    Ok(serde_json::to_string_pretty(doc).context("writing the KCIDB document")? + "\n")
}

/// The KCIDB document of a judged session.
pub fn document(j: &Judgement) -> Result<Value> {
    let session = j.session;
    ensure!(
        !session.started.is_empty(),
        "session.json records no start time (`started`): the KCIDB ids are made of it"
    );
    let ids = Ids(&session.started);
    let mut checkouts = Vec::new();
    let mut builds = Vec::new();
    let kernels = kernels(session);
    for v in &session.variants {
        if kernels.get(&v.variant) != Some(&v.variant.as_str()) {
            continue; // the A/A control: its variant's build again
        }
        let start = build_start(v).with_context(|| format!("the build of {}", v.variant))?;
        checkouts.push(
            checkout(&ids, v, start).with_context(|| format!("the checkout of {}", v.variant))?,
        );
        builds.push(build(&ids, v, start).with_context(|| format!("the build of {}", v.variant))?);
    }
    let t = tests(j, &ids, &kernels)?;
    Ok(json!({
        "version": {"major": VERSION.0, "minor": VERSION.1},
        "checkouts": checkouts,
        "builds": builds,
        "tests": t.tests,
        "issues": t.issues,
        "incidents": t.incidents,
    }))
}

/// Each variant's kernel: its own, or, for an A/A control (`<variant>-aa`
/// with that variant's bzImage), its variant's.
fn kernels(session: &Session) -> BTreeMap<String, &str> {
    let vs = &session.variants;
    (vs.iter())
        .map(|v| {
            let again = vs.iter().find(|o| {
                super::format::aa_name(&o.variant) == v.variant
                    && o.bzimage_sha256 == v.bzimage_sha256
            });
            (v.variant.clone(), again.unwrap_or(v).variant.as_str())
        })
        .collect()
}

/// The ids of one session's objects: `wbstall:<session start>/<name>`.
struct Ids<'a>(&'a str);

impl Ids<'_> {
    fn of(&self, name: &str) -> String {
        format!("{ORIGIN}:{}/{name}", self.0)
    }

    fn checkout(&self, variant: &str) -> String {
        self.of(&format!("checkout/{variant}"))
    }

    fn build(&self, variant: &str) -> String {
        self.of(&format!("build/{variant}"))
    }

    fn test(&self, run: &RunId) -> String {
        self.of(&format!(
            "test/{}/{}/run{}",
            run.scenario,
            run.variant,
            run.number()
        ))
    }
}

/// When the variant's build started: `built_at`, less its `build_seconds`.
fn build_start(v: &VariantMeta) -> Result<Stamp> {
    ensure!(
        v.build_seconds.is_finite() && v.build_seconds >= 0.0,
        "variant.json's build_seconds is {}",
        v.build_seconds
    );
    let end = Stamp::parse(&v.built_at).context("variant.json's `built_at`")?;
    Ok(end.minus(v.build_seconds))
}

/// The variant's source: the base and its patches, in order. Its tree is
/// switched to them when its build starts: that is the checkout's start.
fn checkout(ids: &Ids, v: &VariantMeta, start: Stamp) -> Result<Value> {
    let b = &v.base;
    ensure!(
        !b.kernel_version.is_empty(),
        "variant.json records no kernel version"
    );
    sha256(&b.sha256, "the base source")?;
    let base = match (&b.package, &b.package_version, &b.origin) {
        (Some(p), Some(pv), _) => format!("Debian's {p} {pv}"),
        (_, _, Some(o)) => format!("the tree {o}"),
        _ => bail!("variant.json records neither the base's package nor its tree"),
    };
    let mut names = Vec::new();
    for p in &v.patches {
        sha256(&p.sha256, &p.file)?;
        names.push(crate::util::file_name(std::path::Path::new(&p.file)));
    }
    let patches: Vec<Value> = (names.iter().zip(&v.patches))
        .map(|(name, p)| json!({"name": name, "sha256": p.sha256}))
        .collect();
    let with = if names.is_empty() {
        "no patch".to_string()
    } else {
        names.join(", ")
    };
    Ok(json!({
        "id": ids.checkout(&v.variant),
        "origin": ORIGIN,
        "patchset_hash": patchset_hash(&v.patches),
        "start_time": start.rfc3339(),
        "valid": true,
        "comment": format!("{}: Linux {} ({base}) with {with}", v.variant, b.kernel_version),
        "misc": {
            "variant": v.variant,
            "description": v.description,
            "base": serde_json::to_value(b)?,
            "patches": patches,
        },
    }))
}

/// KCIDB's patchset hash: sha256 over each patch's sha256 and a newline, in
/// order (`sha256sum *.patch | cut -c-64 | sha256sum`); empty without patches.
pub fn patchset_hash(patches: &[PatchMeta]) -> String {
    if patches.is_empty() {
        return String::new();
    }
    let lines: String = patches.iter().map(|p| format!("{}\n", p.sha256)).collect();
    crate::util::sha256_hex(lines.as_bytes())
}

/// An error unless `hex` is a sha256 in lowercase hex.
fn sha256(hex: &str, of: &str) -> Result<()> {
    let ok = hex.len() == 64 && hex.chars().all(|c| matches!(c, '0'..='9' | 'a'..='f'));
    ensure!(
        ok,
        "the sha256 of {of} is `{hex}`, not 64 lowercase hex digits"
    );
    Ok(())
}

/// The variant's kernel as built.
fn build(ids: &Ids, v: &VariantMeta, start: Stamp) -> Result<Value> {
    sha256(&v.config_sha256, "the kernel configuration")?;
    let mut misc = serde_json::to_value(v)?;
    let m = misc.as_object_mut().context("variant.json is an object")?;
    // The checkout has these.
    for k in ["variant", "description", "base", "patches"] {
        m.remove(k);
    }
    let built_at = Stamp::parse(&v.built_at).context("variant.json's `built_at`")?;
    m.insert("built_at".into(), json!(built_at.rfc3339()));
    Ok(json!({
        "id": ids.build(&v.variant),
        "checkout_id": ids.checkout(&v.variant),
        "origin": ORIGIN,
        "status": Status::Pass,
        "start_time": start.rfc3339(),
        "duration": v.build_seconds,
        "compiler": compiler(&v.toolchain)?,
        "config_name": match v.kernel_tag.as_str() {
            "" => ORIGIN.to_string(),
            tag => format!("{ORIGIN}-{tag}"),
        },
        "misc": misc,
    }))
}

/// The compiler of a toolchain: GCC for `--no-rust` kernels, else clang.
fn compiler(t: &Toolchain) -> Result<String> {
    match &t.gcc {
        Some(g) => Ok(format!("gcc {g}")),
        None if t.llvm == Version::default() => {
            bail!("the toolchain records no compiler (no LLVM version, no GCC)")
        }
        None => Ok(format!("clang {}", t.llvm)),
    }
}

/// The tests, issues and incidents of a session.
#[derive(Default)]
struct Tests {
    tests: Vec<Value>,
    issues: Vec<Value>,
    incidents: Vec<Value>,
}

/// A test path of `nodes`; each node must be one the schema takes.
fn test_path(nodes: &[&str]) -> Result<String> {
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

/// Every planned run's test, in plan order; the known failures and the
/// failed cells as issues.
fn tests(j: &Judgement, ids: &Ids, kernels: &BTreeMap<String, &str>) -> Result<Tests> {
    let (session, verdict) = (j.session, &j.verdict);
    let plan = Planned::of(session);
    let seen = Seen {
        excluded: by_run((verdict.excluded.iter()).map(|x| (&x.run, x.problems.join("; ")))),
        failed: by_run(session.failures.iter().map(|f| (&f.run, f.why.clone()))),
        records: (j.evidence.runs.iter())
            .map(|c| (c.record.id.clone(), c.record))
            .collect(),
    };
    for id in seen.excluded.keys().chain(seen.failed.keys()) {
        ensure!(
            plan.scenarios.contains(&id.scenario) && plan.variants.contains(&id.variant),
            "{id} is not in the session's plan"
        );
    }
    let env = environment(session)?;
    let mut out = Tests::default();
    for s in &plan.scenarios {
        let path = test_path(&[ROOT, s])?;
        let mut known: Vec<RunId> = Vec::new();
        for v in &plan.variants {
            let kernel = kernels.get(v).with_context(|| {
                format!("{v} is planned, but session.json records no kernel of it")
            })?;
            let cell = verdict.cell(s, v);
            let runs = run_statuses(cell, (s, v), plan.runs_of(s), &seen)?;
            for r in &runs {
                out.tests
                    .push(test(ids, &path, &ids.build(kernel), &env, cell, r)?);
            }
            let Some(c) = cell else { continue };
            if c.expected.map(|e| e.class) == Some(Class::Stall) {
                known.extend(
                    (runs.iter())
                        .filter(|r| r.status == Status::Fail)
                        .map(|r| r.run.clone()),
                );
            }
            if c.judged && !c.failures.is_empty() {
                let failed: Vec<&RunId> = (runs.iter())
                    .filter(|r| r.held == Some(false) || r.status == Status::Error)
                    .map(|r| &r.run)
                    .collect();
                failed_cell(&mut out, ids, c, &failed)?;
            }
        }
        if !known.is_empty() {
            known_stall(&mut out, ids, j, s, &known.iter().collect::<Vec<_>>());
        }
    }
    Ok(out)
}

/// Where every test ran: the guest, as the session booted it.
fn environment(s: &Session) -> Result<Value> {
    let accel = serde_json::to_value(s.machine.accel)?;
    Ok(json!({
        "comment": format!(
            "QEMU ({}), {} vCPUs ({}), {} MiB, {} clock, disk {}",
            accel.as_str().context("the accelerator's name")?,
            s.machine.cpus,
            s.machine.cpu_model,
            s.machine.memory_mib,
            s.machine.clock,
            s.machine.disk
        ),
        "misc": {
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

/// One run's test: its outcome, its MiB/s, when it ran, its verdict and
/// expectation.
fn test(
    ids: &Ids,
    path: &str,
    build_id: &str,
    env: &Value,
    cell: Option<&CellVerdict>,
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
    let mut t = json!({
        "id": ids.test(&r.run),
        "build_id": build_id,
        "origin": ORIGIN,
        "path": path,
        "status": r.status,
        "environment": env,
        "comment": comment,
        "misc": {
            "variant": r.run.variant,
            "run": r.run.number(),
            "expected": expected,
            "as_expected": r.held,
            "verdict": r.verdict.map(serde_json::to_value).transpose()?,
            "why": r.why,
        },
    });
    if let Some(rec) = r.record {
        let started = (rec.boot.started.as_deref()).with_context(|| {
            format!(
                "results.json's record of {} has no start time (`started`): it was recorded \
                 before wbstall kept one; run the session again for its KCIDB document",
                r.run
            )
        })?;
        let started = Stamp::parse(started).with_context(|| format!("the start of {}", r.run))?;
        t["start_time"] = json!(started.rfc3339());
        t["duration"] = json!(rec.boot.wall_secs);
        let bw = r.verdict.map_or(rec.fio.bw_mib_s, |v| v.bw_mib_s());
        t["number"] = json!({"value": bw, "unit": UNIT});
    }
    Ok(t)
}

/// An issue and its incidents, one on the test of each run.
fn issue(out: &mut Tests, ids: &Ids, name: &str, issue: Value, runs: &[&RunId]) {
    let id = ids.of(&format!("issue/{name}"));
    let mut issue = issue;
    issue["id"] = json!(id);
    issue["version"] = json!(0);
    issue["origin"] = json!(ORIGIN);
    out.issues.push(issue);
    for run in runs {
        out.incidents.push(json!({
            "id": ids.of(&format!("incident/{name}/{}/run{}", run.variant, run.number())),
            "origin": ORIGIN,
            "issue_id": id,
            "issue_version": 0,
            "test_id": ids.test(run),
            "present": true,
        }));
    }
}

/// The known failure of scenario `s`: the writers of the cells expected to
/// stall there stall, each of `runs` an incident; the culprit named when the
/// session has one.
fn known_stall(out: &mut Tests, ids: &Ids, j: &Judgement, s: &str, runs: &[&RunId]) {
    let variants: BTreeSet<&str> = runs.iter().map(|r| r.variant.as_str()).collect();
    let variants: Vec<&str> = variants.into_iter().collect();
    let (subject, culprit) = match &j.roles.culprit {
        Some(c) => (
            format!("Writers stall in balance_dirty_pages() on {s}: {c}"),
            format!(
                "The culprit: commit {c}, whose balance_dirty_pages() the baseline ({}) \
                 restores. ",
                j.roles.baseline
            ),
        ),
        None => (
            format!("Writers stall in balance_dirty_pages() on {s}"),
            String::new(),
        ),
    };
    let comment = format!(
        "{culprit}Expected of {} here: their writers sleep in balance_dirty_pages() while no \
         writeback runs on their wb. Each stalling run is an incident.",
        variants.join(", ")
    );
    let body = json!({
        "report_subject": subject,
        "culprit": {"code": j.roles.culprit.is_some(), "tool": false, "harness": false},
        "comment": comment,
        "misc": {"scenario": s, "variants": variants, "culprit": j.roles.culprit},
    });
    issue(out, ids, &format!("{s}/stall"), body, runs);
}

/// A cell that fails its expectation (the verdict's failures), each of
/// `runs` an incident.
fn failed_cell(out: &mut Tests, ids: &Ids, c: &CellVerdict, runs: &[&RunId]) -> Result<()> {
    let expected = c.expected.context("a failed cell was judged")?;
    let why: Vec<String> = c.failures.iter().map(|f| f.to_string()).collect();
    let subject = if c.observed == expected.class {
        format!(
            "{} on {}: observed {}, as expected, but {}",
            c.variant(),
            c.scenario(),
            c.observed,
            why.join("; ")
        )
    } else {
        format!(
            "{} on {}: observed {}, expected {expected}",
            c.variant(),
            c.scenario(),
            c.observed
        )
    };
    let body = json!({
        "report_subject": subject,
        "comment": why.join("; "),
        "misc": {"expected": expected, "observed": c.observed, "failures": c.failures},
    });
    issue(
        out,
        ids,
        &format!("{}/{}", c.scenario(), c.variant()),
        body,
        runs,
    );
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::verdict::tests::expected;

    /// What the KCIDB document cannot say is an error, not a default: a bad
    /// path node, no compiler, a bad hash, no session start, a record
    /// without its start time.
    #[test]
    fn what_the_document_cannot_say_is_an_error() {
        let e = test_path(&[ROOT, "fuse.1"]).unwrap_err().to_string();
        assert!(e.contains("`fuse.1` cannot be a node"), "{e}");
        assert_eq!(test_path(&[ROOT, "fuse-x"]).unwrap(), "wbstall.fuse-x");
        assert!(compiler(&Toolchain::default()).is_err());
        assert!(sha256("ABC", "x").is_err());
        let (session, e) = (Session::default(), expected());
        let j = crate::analysis::verdict::tests::judged(&session, &[], &e, 1);
        let e = document(&j).unwrap_err();
        assert!(e.to_string().contains("no start time"), "{e}");
        let docs = crate::util::project_root().join("docs/example-report");
        let (session, mut records) = ResultsDir::new(&docs).load().unwrap();
        records[3].boot.started = None;
        let expected = crate::analysis::verdict::session_expectations(&session, None).unwrap();
        let j = crate::analysis::judge(&session, &records, &expected).unwrap();
        let e = format!("{:#}", document(&j).unwrap_err());
        assert!(
            e.contains("record of fuse-strictlimit/upstream #1 has no start time"),
            "{e}"
        );
    }

    /// The patchset hash is KCIDB's: `sha256sum *.patch | cut -c-64 | sha256sum`
    /// over the repository's 0001 and 0002 (computed so by hand).
    #[test]
    fn the_patchset_hash_is_the_one_sha256sum_gives() {
        let root = crate::util::project_root().join("patches");
        let patches: Vec<PatchMeta> = ["0001-", "0002-"]
            .iter()
            .map(|prefix| {
                let e = std::fs::read_dir(&root)
                    .unwrap()
                    .map(|e| e.unwrap().path())
                    .find(|p| crate::util::file_name(p).starts_with(prefix))
                    .unwrap();
                PatchMeta {
                    file: e.display().to_string(),
                    sha256: crate::util::sha256_file(&e).unwrap(),
                }
            })
            .collect();
        assert_eq!(
            patchset_hash(&patches),
            "b33a14a268f74c3f6ee6d8e65888bfcf11ea0492818ff263010ddd5b919a8595"
        );
        assert_eq!(patchset_hash(&[]), "");
    }

    /// The golden test: the KCIDB document of `docs/example-report/` is the
    /// committed `kcidb.json` (`WBSTALL_BLESS=1` writes what renders now).
    #[test]
    fn the_example_report_kcidb_document_renders_the_same() {
        let docs = crate::util::project_root().join("docs/example-report");
        let text = text(&of_dir(&docs).unwrap()).unwrap();
        let golden = docs.join(ResultsDir::KCIDB);
        if std::env::var_os("WBSTALL_BLESS").is_some() {
            std::fs::write(&golden, &text).unwrap();
        }
        let want = std::fs::read_to_string(&golden).unwrap();
        assert!(text == want, "{} renders differently", golden.display());
        let doc: Value = serde_json::from_str(&text).unwrap();
        let all = |k: &str| doc[k].as_array().unwrap().clone();
        // One path per scenario, whatever the variant; the stalling runs FAIL.
        let mut paths: Vec<&str> = Vec::new();
        let tests = all("tests");
        for t in &tests {
            let p = t["path"].as_str().unwrap();
            if !paths.contains(&p) {
                paths.push(p);
            }
        }
        assert_eq!(
            paths,
            [
                "wbstall.fuse-strictlimit",
                "wbstall.fuse-nostrict",
                "wbstall.memcg-ext4",
                "wbstall.ext4-global"
            ]
        );
        let failed: Vec<String> = (tests.iter())
            .filter(|t| t["status"] == "FAIL")
            .map(|t| {
                format!(
                    "{} {} #{}",
                    t["path"], t["misc"]["variant"], t["misc"]["run"]
                )
            })
            .collect();
        assert_eq!(failed.len(), 2 + 3 + 3, "{failed:?}");
        // Every test has its start and duration; the A/A control is more
        // tests of upstream's build, which is not its checkout.
        assert!(tests.iter().all(
            |t| t["start_time"].is_string() && t["duration"].as_f64().is_some_and(|d| d > 0.0)
        ));
        let aa: Vec<&Value> = (tests.iter())
            .filter(|t| t["misc"]["variant"] == "upstream-aa")
            .collect();
        assert!(
            !aa.is_empty()
                && aa
                    .iter()
                    .all(|t| t["build_id"].as_str().unwrap().ends_with("/build/upstream"))
        );
        let builds = all("builds");
        assert_eq!(builds.len(), 4);
        assert!(builds.iter().all(|b| b["id"] != b["checkout_id"]
            && b["misc"]["built_at"].as_str().unwrap().ends_with('Z')
            && b["start_time"].is_string()));
        // The known failures name the culprit; the failed cell says why, not
        // "fails its expectation stall" where a stall was seen.
        let subjects: Vec<&str> = (all("issues").iter())
            .map(|i| i["report_subject"].as_str().unwrap().to_owned())
            .collect::<Vec<_>>()
            .leak()
            .iter()
            .map(|s| s.as_str())
            .collect();
        assert!(
            subjects.contains(&"Writers stall in balance_dirty_pages() on fuse-strictlimit: 64dd89ae01f2 (\"mm/block/fs: remove laptop_mode\")"),
            "{subjects:?}"
        );
        // Every cell held: the stalls are known failures of the culprit on
        // both scenarios they show on (regressed and v1 on memcg-ext4), and no
        // issue is a failed expectation.
        assert!(
            subjects.contains(&"Writers stall in balance_dirty_pages() on memcg-ext4: 64dd89ae01f2 (\"mm/block/fs: remove laptop_mode\")"),
            "{subjects:?}"
        );
        assert_eq!(subjects.len(), 2, "{subjects:?}");
        assert_eq!(all("incidents").len(), 2 + 6, "{}", text);
    }
}
