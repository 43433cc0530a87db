//! What produced a results directory (`session.json`): the command, the
//! machine, the kernels, the scenarios and the expectations it was judged by.

use std::{fs, path::Path};

use anyhow::{bail, Context, Result};

use crate::{
    analysis::verdict::{self, Expected},
    deps,
    guest::job::Job,
    guest::{qemu::Accel, scenario},
    kernel::{build as kernel, patch},
    util,
};

/// What produced a results directory (`session.json`).
#[derive(Debug, Clone, Default, serde::Serialize, serde::Deserialize)]
pub struct Session {
    pub command: String,
    pub started: String,
    pub accel: Accel,
    pub cpus: u32,
    pub memory_mib: u32,
    pub runs: u32,
    pub quick: bool,
    pub toolchain: deps::Toolchain,
    pub host_cpus: usize,
    pub variants: Vec<kernel::VariantMeta>,
    pub scenarios: Vec<ScenarioInfo>,
    /// The expectations file the session was judged against, and its text.
    pub expected_file: String,
    pub expected: Option<String>,
    /// Boots that produced no record, and why.
    pub failures: Vec<String>,
}

impl Session {
    /// What the session set out to measure.
    pub fn plan(&self) -> verdict::Plan {
        verdict::Plan {
            variants: self.variants.iter().map(|v| v.variant.clone()).collect(),
            scenarios: self.scenarios.iter().map(|s| s.name.clone()).collect(),
            runs: self.runs,
        }
    }

    /// The expectations to judge the session by: `file` when given, else the
    /// text the session recorded.
    pub fn expectations(&self, file: Option<&Path>) -> Result<Expected> {
        match (file, &self.expected) {
            (Some(f), _) => {
                let text =
                    fs::read_to_string(f).with_context(|| format!("reading {}", f.display()))?;
                load_expectations(&text, f)
            }
            (None, Some(text)) => load_expectations(
                text,
                Path::new(&format!(
                    "{} (as recorded in session.json)",
                    self.expected_file
                )),
            ),
            (None, None) => bail!(
                "session.json records no expectations: pass --expected {}",
                verdict::EXPECTED_FILE
            ),
        }
    }
}

/// Parses an expectations file and checks every name in it against the
/// scenarios and `patches/variants.toml`.
pub fn load_expectations(text: &str, origin: &Path) -> Result<Expected> {
    let e = Expected::parse(text, origin)?;
    let variants = patch::Variants::load(&util::project_root().join(patch::VARIANTS_FILE))?;
    let scenarios: Vec<&str> = scenario::ALL.iter().map(|s| s.name).collect();
    e.validate(&scenarios, &variants.names(), origin)?;
    Ok(e)
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct ScenarioInfo {
    pub name: String,
    pub what: String,
    pub job: Job,
}
