//! The files a results directory keeps beside its records, read and parsed
//! once: each run's samples (`<run>.samples.txt`) and classed sleeps
//! (`<run>.sleeps.txt`), each kernel's `.config`. The session stage loads
//! them when it judges; the renderers take them from the judgement and open
//! nothing themselves.

use std::{collections::BTreeMap, path::Path};

use anyhow::{bail, Result};

use super::{
    dir::ResultsDir,
    record::RunRecord,
    samples::{self, Samples},
    session::Session,
    sleeps,
    tracefs::Sleep,
};

/// A run's file as read: parsed, or why it would not parse.
type Read<T> = Result<T, String>;

/// The files of one results directory, by the names the records give.
#[derive(Debug, Default)]
pub struct RunFiles {
    /// By file name: each run's samples.
    samples: BTreeMap<String, Read<Samples>>,
    /// By file name: each run's classed sleeps.
    sleeps: BTreeMap<String, Read<Vec<Sleep>>>,
    /// By variant: its kernel's `.config`, where the session kept it.
    configs: BTreeMap<String, String>,
}

impl RunFiles {
    /// Reads every file the records and the session name in `dir`. A file
    /// that is not there (a directory copied without it) is left out; one
    /// that is there and does not parse is kept as its error, for whoever
    /// needs it to fail on.
    pub fn load(dir: &Path, session: &Session, records: &[RunRecord]) -> RunFiles {
        let text = |name: &str| std::fs::read_to_string(dir.join(name)).ok();
        let mut f = RunFiles::default();
        for r in records {
            if let Some(name) = r.boot.samples.as_deref() {
                if let Some(t) = text(name) {
                    let parsed = samples::parse(&t).map_err(|e| format!("{name}: {e:#}"));
                    f.samples.insert(name.to_string(), parsed);
                }
            }
            if let Some(name) = r.boot.sleeps.as_deref() {
                if let Some(t) = text(name) {
                    let parsed = sleeps::parse(&t, name).map_err(|e| format!("{e:#}"));
                    f.sleeps.insert(name.to_string(), parsed);
                }
            }
        }
        for v in &session.variants {
            if let Some(t) = text(&ResultsDir::config_file(&v.variant)) {
                f.configs.insert(v.variant.clone(), t);
            }
        }
        f
    }

    /// The run's samples; none where it kept none or they are not at hand.
    pub fn samples(&self, r: &RunRecord) -> Result<Option<&Samples>> {
        let Some(name) = r.boot.samples.as_deref() else {
            return Ok(None);
        };
        match self.samples.get(name) {
            None => Ok(None),
            Some(Ok(s)) => Ok(Some(s)),
            Some(Err(e)) => bail!("{e}"),
        }
    }

    /// The run's classed sleeps, or why there are none to show.
    pub fn sleeps(&self, r: &RunRecord) -> Result<Result<&[Sleep], String>> {
        let Some(name) = r.boot.sleeps.as_deref() else {
            return Ok(Err(
                "its record is from before wbstall kept each sleep".into()
            ));
        };
        match self.sleeps.get(name) {
            None => Ok(Err(format!("{name} is not in this directory"))),
            Some(Ok(s)) => Ok(Ok(s)),
            Some(Err(e)) => bail!("{e}"),
        }
    }

    /// Each kernel's `.config` the session kept, by variant.
    pub fn configs(&self) -> &BTreeMap<String, String> {
        &self.configs
    }
}
