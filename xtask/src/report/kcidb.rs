//! The results as KCIDB I/O data, the schema of KernelCI's results database
//! (v5.3, as the `kcidb-io` package validates it; `report --format kcidb`).
//!
//! - a checkout per variant: the base source and the variant's patches (names,
//!   sha256s, the KCIDB `patchset_hash` over them);
//! - a build per variant: compiler, configuration, `build_seconds`;
//! - a test per cell, `wbstall.<scenario>.<variant>`, and one per planned run,
//!   `wbstall.<scenario>.<variant>.run<N>`, with the MiB/s as its `number`
//!   and the verdict's run (the stall share as `misc.verdict.stall_fraction`,
//!   its distances to the class boundaries as `misc.verdict.margins`) in
//!   `misc`; statuses from the verdict ([`run_statuses`]);
//! - an issue per failed cell (its hypothesis does not hold), with an incident
//!   on the cell's test and on each failed run's.
//!
//! Every id is `wbstall:<session start>/<name>`: the session's start names the
//! results directory.

use std::collections::{BTreeMap, BTreeSet};

use anyhow::{bail, ensure, Context, Result};
use serde_json::{json, Value};

use crate::{
    analysis::{
        judge::Judgement,
        judgement::{CellVerdict, Planned, RunVerdict},
    },
    deps::{Toolchain, Version},
    guest::run_id::RunId,
    kernel::build::{PatchMeta, VariantMeta},
    results::{dir::ResultsDir, session::Session},
};

/// The CI system the data comes from: every id starts with it.
pub const ORIGIN: &str = "wbstall";
/// The schema version written: the newest the newest `kcidb-io` validates.
pub const VERSION: (u32, u32) = (5, 3);
/// The root node of every test path.
const ROOT: &str = "wbstall";
/// The unit of every test's number.
const UNIT: &str = "MiB/s";

/// A KCIDB test status, from the verdict.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
#[serde(rename_all = "UPPERCASE")]
pub enum Status {
    /// Judged: held its expectation.
    Pass,
    /// Judged: did not hold its expectation.
    Fail,
    /// Measured, with no expectation to judge it by.
    Done,
    /// Booted, but no usable record: the boot failed, or its record was left
    /// out of the verdict.
    Error,
    /// Planned, but neither a record nor a failed boot (another shard's run,
    /// an interrupted session).
    Miss,
}

/// A planned run's status, its judgement if it has one, and why.
#[derive(Debug)]
pub struct RunStatus<'a> {
    pub run: RunId,
    pub status: Status,
    pub verdict: Option<&'a RunVerdict>,
    pub why: Vec<String>,
}

/// Why single runs have no usable record, by the run.
pub type ByRun = BTreeMap<RunId, Vec<String>>;

/// `why` of each run, gathered by the run.
pub fn by_run<'a>(lines: impl IntoIterator<Item = (&'a RunId, String)>) -> ByRun {
    let mut out = ByRun::new();
    for (run, why) in lines {
        out.entry(run.clone()).or_default().push(why);
    }
    out
}

/// Every run of one cell, planned or seen, with its status: a usable run is
/// PASS or FAIL by [`CellVerdict::run_passed`] (DONE without expectation), a
/// run left out of the verdict (`excluded`) or without a record (`failed`)
/// ERROR, any other planned run MISS.
pub fn run_statuses<'a>(
    cell: Option<&'a CellVerdict>,
    (scenario, variant): (&str, &str),
    planned: u32,
    excluded: &ByRun,
    failed: &ByRun,
) -> Result<Vec<RunStatus<'a>>> {
    let listed = |m: &ByRun| -> Vec<u32> {
        m.keys()
            .filter(|id| id.in_cell(scenario, variant))
            .map(|id| id.run)
            .collect()
    };
    let mut runs: BTreeSet<u32> = (0..planned).collect();
    runs.extend(
        cell.iter()
            .flat_map(|c| c.run_verdicts.iter().map(|r| r.run)),
    );
    runs.extend(listed(excluded).into_iter().chain(listed(failed)));
    let mut out = Vec::new();
    for run in runs {
        let key = RunId::new(scenario, variant, run);
        let usable = cell.and_then(|c| Some((c, c.run_verdicts.iter().find(|r| r.run == run)?)));
        let lines = |m: &ByRun| m.get(&key).cloned();
        let (status, verdict, why) = match (usable, lines(excluded), lines(failed)) {
            (Some((c, r)), None, None) => usable_status(c, r),
            (None, Some(why), None) | (None, None, Some(why)) => (Status::Error, None, why),
            (None, None, None) => (
                Status::Miss,
                None,
                vec![format!(
                    "planned ({planned} runs a cell), but neither recorded nor failed"
                )],
            ),
            _ => bail!(
                "{key} is listed more than once (a usable run, a run left out, a boot without a \
                 record): the results directory contradicts itself"
            ),
        };
        out.push(RunStatus {
            run: key,
            status,
            verdict,
            why,
        });
    }
    Ok(out)
}

/// A usable run's status, judgement and why.
fn usable_status<'a>(
    c: &'a CellVerdict,
    r: &'a RunVerdict,
) -> (Status, Option<&'a RunVerdict>, Vec<String>) {
    let mut why: Vec<String> = (c.failures_of_run(r.run).into_iter())
        .map(|f| f.why.clone())
        .collect();
    let status = match (c.expected, c.run_passed(r)) {
        (Some(_), Some(true)) => Status::Pass,
        (Some(e), Some(false)) => {
            if r.class != e.class {
                why.insert(0, format!("expected {e}, observed {}", r.class));
            }
            Status::Fail
        }
        _ => Status::Done,
    };
    (status, Some(r), why)
}

/// A cell's status: the verdict's (PASS, FAIL, DONE when unjudged); a cell
/// with no usable run is ERROR when one of its runs is, else MISS.
pub fn cell_status(cell: Option<&CellVerdict>, runs: &[RunStatus]) -> Status {
    match cell {
        Some(c) if !c.judged => Status::Done,
        Some(c) if c.failures.is_empty() => Status::Pass,
        Some(_) => Status::Fail,
        None if runs.iter().any(|r| r.status == Status::Error) => Status::Error,
        None => Status::Miss,
    }
}

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
    for v in &session.variants {
        checkouts
            .push(checkout(&ids, v).with_context(|| format!("the checkout of {}", v.variant))?);
        builds.push(build(&ids, v).with_context(|| format!("the build of {}", v.variant))?);
    }
    let t = tests(j, &ids)?;
    Ok(json!({
        "version": {"major": VERSION.0, "minor": VERSION.1},
        "checkouts": checkouts,
        "builds": builds,
        "tests": t.tests,
        "issues": t.issues,
        "incidents": t.incidents,
    }))
}

/// The ids of one session's objects: `wbstall:<session start>/<name>`.
struct Ids<'a>(&'a str);

impl Ids<'_> {
    fn of(&self, name: &str) -> String {
        format!("{ORIGIN}:{}/{name}", self.0)
    }
}

/// The variant's source: the base and its patches, in order.
fn checkout(ids: &Ids, v: &VariantMeta) -> Result<Value> {
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
        "id": ids.of(&v.variant),
        "origin": ORIGIN,
        "patchset_hash": patchset_hash(&v.patches),
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
fn build(ids: &Ids, v: &VariantMeta) -> Result<Value> {
    ensure!(
        v.build_seconds.is_finite() && v.build_seconds >= 0.0,
        "variant.json's build_seconds is {}",
        v.build_seconds
    );
    sha256(&v.config_sha256, "the kernel configuration")?;
    let mut misc = serde_json::to_value(v)?;
    // The checkout has these.
    for k in ["variant", "description", "base", "patches"] {
        misc.as_object_mut()
            .context("variant.json is an object")?
            .remove(k);
    }
    Ok(json!({
        "id": ids.of(&v.variant),
        "checkout_id": ids.of(&v.variant),
        "origin": ORIGIN,
        "status": Status::Pass,
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
             rename the variant or scenario"
        );
    }
    Ok(nodes.join("."))
}

/// Every planned cell's test and its runs', in plan order, and the issues of
/// the failed cells.
fn tests(j: &Judgement, ids: &Ids) -> Result<Tests> {
    let (session, verdict) = (j.session, &j.verdict);
    let plan = Planned::of(session);
    let excluded = by_run((verdict.excluded.iter()).map(|x| (&x.run, x.problems.join("; "))));
    let failed = by_run(session.failures.iter().map(|f| (&f.run, f.why.clone())));
    for id in excluded.keys().chain(failed.keys()) {
        ensure!(
            plan.scenarios.contains(&id.scenario) && plan.variants.contains(&id.variant),
            "{id} is not in the session's plan"
        );
    }
    let env = environment(session)?;
    let mut out = Tests::default();
    for s in &plan.scenarios {
        for v in &plan.variants {
            let cell = verdict.cell(s, v);
            let runs = run_statuses(cell, (s, v), plan.runs_of(s), &excluded, &failed)?;
            let path = test_path(&[ROOT, s, v])?;
            let test = Test {
                ids,
                build_id: ids.of(v),
                env: &env,
            };
            let status = cell_status(cell, &runs);
            out.tests.push(test.cell(&path, status, cell, &runs)?);
            let mut failed_tests = vec![path.clone()];
            for r in &runs {
                let run_path = format!("{path}.run{}", r.run.number());
                out.tests.push(test.run(&run_path, r)?);
                if r.status == Status::Fail {
                    failed_tests.push(run_path);
                }
            }
            if let (Status::Fail, Some(c)) = (status, cell) {
                issue(&mut out, ids, &path, c, &failed_tests)?;
            }
        }
    }
    Ok(out)
}

/// Where every test ran: the guest, as the session booted it.
fn environment(s: &Session) -> Result<Value> {
    let accel = serde_json::to_value(s.accel)?;
    Ok(json!({
        "comment": format!(
            "QEMU ({}), {} vCPUs ({}), {} MiB, {} clock, disk {}",
            accel.as_str().context("the accelerator's name")?,
            s.cpus,
            s.cpu_model,
            s.memory_mib,
            s.clock,
            s.disk
        ),
        "misc": {
            "accel": accel,
            "clock": serde_json::to_value(s.clock)?,
            "disk": serde_json::to_value(s.disk)?,
            "cpu_model": s.cpu_model,
            "cpus": s.cpus,
            "memory_mib": s.memory_mib,
            "kernel_args": s.kernel_args,
            "host_cpus": s.host_cpus,
            "jobs_vm": s.jobs_vm,
            "harness": s.harness,
            "command": s.command,
        },
    }))
}

/// What the tests of one cell share.
struct Test<'a> {
    ids: &'a Ids<'a>,
    build_id: String,
    env: &'a Value,
}

impl Test<'_> {
    fn base(&self, path: &str, status: Status, comment: String, misc: Value) -> Value {
        json!({
            "id": self.ids.of(path),
            "build_id": self.build_id,
            "origin": ORIGIN,
            "path": path,
            "status": status,
            "environment": self.env,
            "comment": comment,
            "misc": misc,
        })
    }

    /// The cell's test: its rate (the harmonic mean of its runs'), its
    /// verdict without the runs (they have their own tests).
    fn cell(
        &self,
        path: &str,
        status: Status,
        cell: Option<&CellVerdict>,
        runs: &[RunStatus],
    ) -> Result<Value> {
        let Some(c) = cell else {
            let why: Vec<&String> = runs.iter().flat_map(|r| &r.why).collect();
            let comment = format!("no usable run of {}", runs.len());
            return Ok(self.base(path, status, comment, json!({ "why": why })));
        };
        let mut v = serde_json::to_value(c)?;
        v.as_object_mut()
            .context("a cell's verdict is an object")?
            .remove("run_verdicts");
        let comment = match c.expected {
            Some(e) if c.failures.is_empty() => format!("observed {}, expected {e}", c.observed),
            Some(e) => format!("observed {}, expected {e}: {}", c.observed, failures(c)),
            None => format!("observed {}, no expectation", c.observed),
        };
        let mut t = self.base(path, status, comment, json!({ "verdict": v }));
        t["number"] = json!({"value": c.bw_mib_s(), "unit": UNIT});
        Ok(t)
    }

    /// One run's test: its MiB/s, and its verdict (class, stall share, ...).
    fn run(&self, path: &str, r: &RunStatus) -> Result<Value> {
        let Some(v) = r.verdict else {
            let comment = r.why.join("; ");
            return Ok(self.base(path, r.status, comment, json!({ "why": r.why })));
        };
        let comment = format!(
            "{}: {:.1}% of writer time in stall sleeps{}",
            v.class,
            v.stall_fraction * 100.0,
            v.margins.as_ref().map_or(String::new(), |m| format!(
                "; {}",
                super::format::margins(m)
            ))
        );
        let misc = json!({"verdict": serde_json::to_value(v)?, "why": r.why});
        let mut t = self.base(path, r.status, comment, misc);
        t["number"] = json!({"value": v.bw_mib_s, "unit": UNIT});
        Ok(t)
    }
}

/// A cell's failures, in one line.
fn failures(c: &CellVerdict) -> String {
    let all: Vec<String> = c.failures.iter().map(|f| f.to_string()).collect();
    all.join("; ")
}

/// A failed cell's issue (its hypothesis does not hold), and its incidents:
/// on the tests of `paths`, the cell's and each failed run's.
fn issue(out: &mut Tests, ids: &Ids, path: &str, c: &CellVerdict, paths: &[String]) -> Result<()> {
    let expected = c.expected.context("a failed cell was judged")?;
    let id = ids.of(&format!("issue/{path}"));
    out.issues.push(json!({
        "id": id,
        "version": 0,
        "origin": ORIGIN,
        "report_subject": format!(
            "{} on {} fails its expectation `{expected}`",
            c.variant, c.scenario
        ),
        "comment": failures(c),
        "misc": {"expected": expected, "observed": c.observed},
    }));
    for p in paths {
        out.incidents.push(json!({
            "id": ids.of(&format!("incident/{p}")),
            "origin": ORIGIN,
            "issue_id": id,
            "issue_version": 0,
            "test_id": ids.of(p),
            "present": true,
        }));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{
        analysis::{
            judgement::Verdict,
            verdict::{
                judge,
                tests::{expected, plan, rec},
            },
        },
        results::{record::RunRecord, session::BootFailure},
    };

    /// The statuses of every run of `variant`'s fuse-strictlimit cell, and the cell's.
    fn statuses(v: &Verdict, failures: &[BootFailure], variant: &str) -> (Vec<Status>, Status) {
        let excluded = by_run(v.excluded.iter().map(|x| (&x.run, x.problems.join("; "))));
        let failed = by_run(failures.iter().map(|f| (&f.run, f.why.clone())));
        let cell = v.cells.iter().find(|c| c.variant == variant);
        let scenario = "fuse-strictlimit";
        let runs = run_statuses(cell, (scenario, variant), 4, &excluded, &failed).unwrap();
        let cell = cell_status(cell, &runs);
        (runs.iter().map(|r| r.status).collect(), cell)
    }

    fn at(mut r: RunRecord, run: u32) -> RunRecord {
        r.run = run;
        r
    }

    /// Each status from the verdict: a run in its expected class PASS, one in
    /// another class or failing a criterion FAIL, a run left out or a boot
    /// without a record ERROR, a planned run of neither MISS; a cell without an
    /// expectation DONE.
    #[test]
    fn each_run_is_pass_fail_error_or_miss_as_the_verdict_has_it() {
        let mut disagrees = rec("v1", "fuse-strictlimit", 195.0, 0.0);
        disagrees.tracefs_stall_fraction = Some(0.03);
        let mut warned = rec("v1", "fuse-strictlimit", 190.0, 0.0);
        warned.dmesg_warnings = vec!["WARNING: CPU: 0 PID: 1 at mm/x.c:1".into()];
        let records = [
            at(rec("regressed", "fuse-strictlimit", 1.0, 0.7), 0),
            at(rec("regressed", "fuse-strictlimit", 190.0, 0.0), 1),
            at(rec("v1", "fuse-strictlimit", 200.0, 0.0), 0),
            at(disagrees, 1),
            at(warned, 2),
            at(rec("v9", "fuse-strictlimit", 200.0, 0.0), 0),
        ];
        let mut p = plan(&records, 4);
        p.variants
            .extend(["v2".to_string(), "upstream".to_string()]);
        let v = judge(&records, &expected(), &p);
        let failure = |variant: &str, run: u32, why: &str| BootFailure {
            run: RunId::new("fuse-strictlimit", variant, run),
            why: why.into(),
        };
        let failures = [failure("v1", 3, "QEMU exited with 1")];
        use Status::*;
        // #2 is ok where the hypothesis says stall; #3 and #4 never ran.
        assert_eq!(
            statuses(&v, &failures, "regressed"),
            (vec![Pass, Fail, Miss, Miss], Fail)
        );
        // #2 is ok, but the detectors disagree on it; #3 has a kernel warning.
        assert_eq!(
            statuses(&v, &failures, "v1"),
            (vec![Pass, Fail, Error, Error], Fail)
        );
        assert_eq!(
            statuses(&v, &failures, "v9"),
            (vec![Done, Miss, Miss, Miss], Done)
        );
        assert_eq!(statuses(&v, &failures, "v2"), (vec![Miss; 4], Miss));
        let boot_failed = [failure("upstream", 1, "no kernel")];
        assert_eq!(
            statuses(&v, &boot_failed, "upstream"),
            (vec![Miss, Error, Miss, Miss], Error)
        );
    }

    /// A passing cell's runs all pass.
    #[test]
    fn a_cell_that_holds_its_expectation_passes_with_every_run() {
        let records: Vec<RunRecord> = (0..4)
            .map(|k| at(rec("regressed", "fuse-strictlimit", 1.0, 0.7), k))
            .chain((0..4).map(|k| at(rec("v1", "fuse-strictlimit", 200.0, 0.0), k)))
            .collect();
        let v = judge(&records, &expected(), &plan(&records, 4));
        assert!(v.passed(), "{v:?}");
        for variant in ["regressed", "v1"] {
            assert_eq!(
                statuses(&v, &[], variant),
                (vec![Status::Pass; 4], Status::Pass)
            );
        }
    }

    /// What the KCIDB document cannot say is an error, not a default.
    #[test]
    fn what_the_document_cannot_say_is_an_error() {
        let e = test_path(&[ROOT, "fuse", "v1.1"]).unwrap_err().to_string();
        assert!(e.contains("`v1.1` cannot be a node"), "{e}");
        assert_eq!(
            test_path(&[ROOT, "fuse-x", "v_1"]).unwrap(),
            "wbstall.fuse-x.v_1"
        );
        assert!(compiler(&Toolchain::default()).is_err());
        assert!(sha256("ABC", "x").is_err());
        let (session, e) = (Session::default(), expected());
        let j = crate::analysis::verdict::tests::judged(&session, &[], &e, 1);
        let e = document(&j).unwrap_err();
        assert!(e.to_string().contains("no start time"), "{e}");
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
        // The document says what the verdict says: one failed cell, its run #2.
        let doc: Value = serde_json::from_str(&text).unwrap();
        let failed: Vec<&str> = doc["tests"]
            .as_array()
            .unwrap()
            .iter()
            .filter(|t| t["status"] == "FAIL")
            .map(|t| t["path"].as_str().unwrap())
            .collect();
        assert_eq!(
            failed,
            ["wbstall.memcg-ext4.v1", "wbstall.memcg-ext4.v1.run2"]
        );
        assert_eq!(doc["incidents"].as_array().unwrap().len(), 2);
    }
}
