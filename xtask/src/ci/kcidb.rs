//! The KCIDB step of `cargo xtask ci`: the KCIDB document of
//! `docs/example-report/` validated by KernelCI's own schema (the `kcidb-io`
//! package, what `kcidb-validate` runs), and a broken copy of it that the
//! validator must reject. Then two sessions' documents merged as a KCIDB
//! database merges them (`kcidb-io`'s `merge` and `dedup`: objects of one
//! type and id become one): the example and the same run on the same kernels
//! a day later must give one checkout and one build per kernel, every test of
//! both, and each known stall one issue with the incidents of both.
//! `kcidb-io` is installed with pip into a virtual environment in the cache
//! (`$WBSTALL_CACHE`, else `~/.cache/wbstall`).

use std::path::PathBuf;

use anyhow::{bail, Context, Result};
use serde_json::Value;
use xshell::{cmd, Shell};

use crate::{
    exit,
    progress::{self, Event},
    report::kcidb,
    util,
};

/// The validator's package, pinned: its newest release (schema v5.3).
const KCIDB_IO: &str = "kcidb-io==141";

/// What `kcidb-validate` does with its default schema (the newest): the
/// document on stdin validated by `kcidb_io.schema.LATEST`; then a count of
/// what it holds, or what is wrong and where.
const VALIDATE_PY: &str = "import json, sys
import jsonschema
from kcidb_io import schema
try:
    data = schema.LATEST.validate(json.load(sys.stdin))
except jsonschema.ValidationError as e:
    sys.exit(f'invalid KCIDB {schema.LATEST}: {e.json_path}: {e.message}')
counts = ', '.join(f'{len(data.get(k, []))} {k}' for k in
                   ('checkouts', 'builds', 'tests', 'issues', 'incidents'))
print(f'valid KCIDB {schema.LATEST}: {counts}')
";

/// What a database holds once it took every document given in argv (files):
/// each validated, merged and deduplicated as the database does; the count
/// of each kind, and of incidents per issue.
const MERGE_PY: &str = "import json, sys
from kcidb_io import schema
docs = [schema.LATEST.upgrade(schema.LATEST.validate(json.load(open(p)))) for p in sys.argv[1:]]
db = schema.LATEST.dedup(schema.LATEST.merge(docs[0], docs[1:]))
counts = {k: len(db.get(k, [])) for k in
          ('checkouts', 'builds', 'tests', 'issues', 'incidents')}
per_issue = {}
for i in db.get('incidents', []):
    per_issue[i['issue_id']] = per_issue.get(i['issue_id'], 0) + 1
print(json.dumps({'counts': counts, 'incidents_per_issue': per_issue}))
";

/// The KCIDB document of a results directory, judged against the
/// expectations its session recorded, pointing to its files' `file://` URLs.
fn document_of(dir: &std::path::Path) -> Result<Value> {
    let rd = crate::results::dir::ResultsDir::new(dir);
    let (session, records) = rd.load()?;
    let expected = crate::analysis::verdict::session_expectations(&session, None)?;
    let j = crate::analysis::judge(&session, &records, &expected)?;
    kcidb::document(&j, &kcidb::Artifacts::new(dir, rd.file_names()?, None)?)
        .with_context(|| format!("making the KCIDB document of {}", dir.display()))
}

/// The status the broken document gives its first test: not one of KCIDB's.
const BROKEN_STATUS: &str = "STALL";

/// The example report's KCIDB document is valid, and one with a test status
/// KCIDB does not have is rejected for it.
pub fn validate_example(sh: &Shell) -> Result<()> {
    let python = validator(sh)?;
    let dir = util::project_root().join("docs/example-report");
    let doc = document_of(&dir)?;
    let said = validate(sh, &python, &doc)
        .context("the KCIDB document of docs/example-report is not valid KCIDB")?;
    progress::emit(Event::Note(&format!("ci: {}", said.trim())));
    let broken = broken(doc)?;
    match validate(sh, &python, &broken) {
        Ok(said) => bail!(exit::fails(format!(
            "the KCIDB validator accepted a test status `{BROKEN_STATUS}` ({}): it checks \
             nothing",
            said.trim()
        ))),
        Err(e) if format!("{e:#}").contains(&format!("'{BROKEN_STATUS}' is not one of")) => {
            progress::emit(Event::Note(&format!(
                "ci: the KCIDB validator rejected a test status `{BROKEN_STATUS}`, as it \
                 must: {}",
                format!("{e:#}").lines().last().unwrap_or_default()
            )));
            Ok(())
        }
        Err(e) => bail!(exit::fails(format!(
            "the KCIDB validator rejected the document with a test status `{BROKEN_STATUS}`, \
             but for another reason: {e:#}"
        ))),
    }
}

/// The example report and the same session run again a day later on the
/// same kernels (its start and every boot's moved), merged by `kcidb-io` as
/// a database merges submissions: one checkout and one build per kernel,
/// both sessions' tests, and each issue with both sessions' incidents.
pub fn merge_two_sessions(sh: &Shell) -> Result<()> {
    let python = validator(sh)?;
    let docs = util::project_root().join("docs/example-report");
    let (session, records) = crate::results::dir::ResultsDir::new(&docs).load()?;
    let expected = crate::analysis::verdict::session_expectations(&session, None)?;
    let first = document_of(&docs)?;
    let (mut later, mut moved) = (session.clone(), records.clone());
    later.started = session.started.plus(86_400)?;
    for r in &mut moved {
        r.boot.wall_secs += 1.0;
        let t = r.boot.started.context("a record without its start")?;
        r.boot.started = Some(t.plus(86_400)?);
    }
    let j = crate::analysis::judge(&later, &moved, &expected)?;
    let names = crate::results::dir::ResultsDir::new(&docs).file_names()?;
    let second = kcidb::document(&j, &kcidb::Artifacts::new(&docs, names, None)?)?;
    let tmp = util::unique_dir(&util::target_dir().join("ci").join("kcidb"))?;
    let (a, b) = (tmp.join("first.json"), tmp.join("second.json"));
    util::write_atomic(&a, kcidb::text(&first)?)?;
    util::write_atomic(&b, kcidb::text(&second)?)?;
    let out = cmd!(sh, "{python} -c {MERGE_PY} {a} {b}")
        .read()
        .context("merging two sessions' KCIDB documents with kcidb-io")?;
    let merged: Value = serde_json::from_str(&out).context("reading the merge's counts")?;
    let count = |k: &str| merged["counts"][k].as_u64().unwrap_or(0);
    let kernels = first["builds"].as_array().map_or(0, Vec::len) as u64;
    let tests = first["tests"].as_array().map_or(0, Vec::len) as u64;
    let per_issue = merged["incidents_per_issue"]
        .as_object()
        .cloned()
        .unwrap_or_default();
    let issues = first["issues"].as_array().map_or(0, Vec::len) as u64;
    let doubled = (first["issues"].as_array().into_iter().flatten()).all(|i| {
        let id = i["id"].as_str().unwrap_or_default();
        let once = (first["incidents"].as_array().into_iter().flatten())
            .filter(|x| x["issue_id"] == id)
            .count() as u64;
        per_issue.get(id).and_then(Value::as_u64) == Some(2 * once)
    });
    if count("checkouts") != kernels
        || count("builds") != kernels
        || count("tests") != 2 * tests
        || count("issues") != issues
        || !doubled
    {
        bail!(
            "two sessions of the same {kernels} kernels did not merge into one checkout and \
             build per kernel, every test of both and each issue with both sessions' \
             incidents: {out}"
        );
    }
    progress::emit(Event::Note(&format!(
        "ci: two sessions' KCIDB documents merged by kcidb-io: {} checkouts, {} builds, {} \
         tests, {} issues, {} incidents ({})",
        count("checkouts"),
        count("builds"),
        count("tests"),
        count("issues"),
        count("incidents"),
        (per_issue.iter())
            .map(|(id, n)| format!("{id}: {n}"))
            .collect::<Vec<_>>()
            .join(", ")
    )));
    Ok(())
}

/// `doc` with its first test's status one KCIDB does not have.
fn broken(mut doc: Value) -> Result<Value> {
    let status = doc
        .pointer_mut("/tests/0/status")
        .context("the example report's KCIDB document has no test with a status")?;
    *status = Value::from(BROKEN_STATUS);
    Ok(doc)
}

/// Runs the validator on `doc`: what it printed, or an error with what it said.
fn validate(sh: &Shell, python: &std::path::Path, doc: &Value) -> Result<String> {
    let out = cmd!(sh, "{python} -c {VALIDATE_PY}")
        .stdin(kcidb::text(doc)?)
        .ignore_status()
        .output()
        .context("running the KCIDB validator")?;
    let stderr = String::from_utf8_lossy(&out.stderr);
    if !out.status.success() {
        let tail: Vec<&str> = stderr.lines().rev().take(12).collect();
        bail!(exit::fails(format!(
            "the KCIDB validator says no ({}):\n{}",
            out.status,
            tail.into_iter().rev().collect::<Vec<_>>().join("\n")
        )));
    }
    Ok(String::from_utf8_lossy(&out.stdout).into_owned())
}

/// The python of a virtual environment with `kcidb-io`, made in the cache
/// the first time.
fn validator(sh: &Shell) -> Result<PathBuf> {
    let venv = util::cache_dir()?.join(KCIDB_IO.replace("==", "-"));
    let python = venv.join("bin/python");
    let has = |python: &std::path::Path| {
        cmd!(sh, "{python} -c 'import kcidb_io'")
            .quiet()
            .ignore_stderr()
            .run()
            .is_ok()
    };
    if python.exists() && has(&python) {
        return Ok(python);
    }
    progress::emit(Event::Setup("the KCIDB validator (kcidb-io, with pip)"));
    cmd!(sh, "python3 -m venv {venv}").run().with_context(|| {
        format!(
            "making a virtual environment in {} (needs python3's venv: apt-get install \
             python3-venv)",
            venv.display()
        )
    })?;
    let pip = venv.join("bin/pip");
    cmd!(
        sh,
        "{pip} install --quiet --disable-pip-version-check {KCIDB_IO}"
    )
    .run()
    .with_context(|| {
        format!(
            "installing {KCIDB_IO} into {} with pip (needs the Python package index; \
                 remove that directory to start afresh)",
            venv.display()
        )
    })?;
    if !has(&python) {
        bail!(
            "{} cannot import kcidb_io after pip installed {KCIDB_IO}: remove {} and run again",
            python.display(),
            venv.display()
        );
    }
    Ok(python)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// kcidb-io's own merge of two sessions (when `cargo xtask ci` installed
    /// it into the cache; skipped with a reason otherwise), and a document
    /// it must reject.
    #[test]
    fn kcidb_io_validates_and_merges_two_sessions() {
        let Ok(python) = util::cache_dir().map(|c| c.join(KCIDB_IO.replace("==", "-"))) else {
            return;
        };
        if !python.join("bin/python").is_file() {
            eprintln!(
                "skipped: needs {KCIDB_IO} installed by `cargo xtask ci` in {}",
                python.display()
            );
            return;
        }
        let sh = Shell::new().unwrap();
        validate_example(&sh).unwrap();
        merge_two_sessions(&sh).unwrap();
        let doc = document_of(&util::project_root().join("docs/example-report")).unwrap();
        let e = validate(&sh, &python.join("bin/python"), &broken(doc).unwrap()).unwrap_err();
        assert!(format!("{e:#}").contains("'STALL' is not one of"), "{e:#}");
    }
}
