//! The KCIDB step of `cargo xtask ci`: the KCIDB document of
//! `docs/example-report/` validated by KernelCI's own schema (the `kcidb-io`
//! package, what `kcidb-validate` runs), and a broken copy of it that the
//! validator must reject. `kcidb-io` is installed with pip into a virtual
//! environment in the cache (`$WBSTALL_CACHE`, else `~/.cache/wbstall`).

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

/// The status the broken document gives its first test: not one of KCIDB's.
const BROKEN_STATUS: &str = "STALL";

/// The example report's KCIDB document is valid, and one with a test status
/// KCIDB does not have is rejected for it.
pub fn validate_example(sh: &Shell) -> Result<()> {
    let python = validator(sh)?;
    let dir = util::project_root().join("docs/example-report");
    let doc = kcidb::of_dir(&dir)?;
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
