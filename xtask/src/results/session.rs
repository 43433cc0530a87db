//! What produced a results directory (`session.json`): the command, the
//! machine, the kernels, the scenarios and the expectations it was judged by.

use std::collections::BTreeMap;

use crate::{
    deps,
    guest::{
        job::Job,
        outcome::{VmErrorKind, VmFailure},
        plan::{plan_position, Shard},
        qemu::Machine,
        run_id::RunId,
        scenario::Scenario,
    },
    kernel::build as kernel,
    kernel::variants,
    results::{floor::FloorOf, record::RunRecord},
    stamp::{self, Stamp},
};

/// What produced a results directory (`session.json`).
#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
#[cfg_attr(test, derive(Default))]
pub struct Session {
    pub command: String,
    /// The harness's commit (`git rev-parse HEAD`, `-dirty` with local
    /// changes); absent in sessions recorded before it was kept.
    #[serde(default)]
    pub harness: Option<String>,
    /// Who ran it, `Name <address>` from `git config user.name` and
    /// `user.email` of the wbstall checkout: the mails' `From:`. Absent when
    /// git has neither, and in sessions recorded before it was kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub reporter: Option<String>,
    #[serde(deserialize_with = "started")]
    pub started: Stamp,
    /// The guest machine of its boots.
    #[serde(flatten)]
    pub machine: Machine,
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
    pub failures: Vec<BootFailure>,
    /// The variant roles of `patches/variants.toml` at the time; absent in
    /// sessions recorded before they were kept.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub roles: Option<variants::Roles>,
    /// The developers' patches under test (`--patch`): the report is about them.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub under_test: Vec<variants::UnderTest>,
    /// The user's FUSE server in fuse-passthrough (`--fuse-server`), as given;
    /// none: libfuse's passthrough_ll.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub fuse_server: Option<String>,
    /// The slice of the plan this session ran (`--shard I/N`), if not all.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub shard: Option<Shard>,
    /// Guests booted at once (`--jobs-vm`); 0 in sessions recorded before it
    /// was kept (one at a time).
    #[serde(default)]
    pub jobs_vm: usize,
    /// The flags `qemu-test` was given, word by word, for `--resume`; absent
    /// in sessions recorded before they were kept, or run from another task
    /// (`ci`), which cannot be resumed.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub args: Option<Vec<String>>,
    /// When `qemu-test --resume` went on with the session, each time.
    #[serde(
        default,
        deserialize_with = "resumed",
        skip_serializing_if = "Vec::is_empty"
    )]
    pub resumed: Vec<Stamp>,
    /// The floor each scenario's costs are judged by, or why it has none;
    /// empty in sessions from before costs were judged.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub floors: BTreeMap<String, FloorOf>,
    /// The costs the user accepted (`--accept-cost`), %, by scenario (`*`:
    /// every scenario).
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub accepted_costs: BTreeMap<String, f64>,
    /// The runs added to decide a cost, in the order they were planned.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub more_runs: Vec<MoreRuns>,
}

stamp::time_field!(started: Stamp);
stamp::time_field!(resumed: Vec<Stamp>);

/// One more run of a cell of a judged pair, planned because a cost was
/// still undecided (or the pair had fewer runs than a cost is judged on).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
pub struct MoreRuns {
    /// The run added.
    pub run: RunId,
    /// What was undecided.
    pub why: String,
}

/// A boot that produced no record: which run, and why (an oops, a hang, no
/// result).
#[derive(Debug, Clone, PartialEq, serde::Serialize, serde::Deserialize)]
#[serde(try_from = "compat::Failure")]
pub struct BootFailure {
    pub run: RunId,
    pub why: BootError,
}

/// `<run>: <why>`.
impl std::fmt::Display for BootFailure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}: {}", self.run, self.why)
    }
}

/// Why a boot produced no record, typed until it is printed. `session.json`
/// keeps the line it prints, read back by its first word.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum BootError {
    /// The kernel under test crashed, hung or sent no result.
    Vm(VmFailure),
    /// The boot ended, but what it sent makes no record (or a host-test
    /// run failed): the error with its causes.
    NoRecord(String),
}

impl BootError {
    /// What happened to the guest, when the kernel under test ended the boot.
    pub fn kind(&self) -> Option<VmErrorKind> {
        match self {
            BootError::Vm(f) => Some(f.kind),
            BootError::NoRecord(_) => None,
        }
    }

    /// The error its line says: `<kind>: <said>` is the guest's.
    fn read(line: &str) -> BootError {
        let vm = line.split_once(": ").and_then(|(word, said)| {
            let kind = VmErrorKind::of_word(word)?;
            let said = said.to_string();
            Some(BootError::Vm(VmFailure { kind, said }))
        });
        vm.unwrap_or_else(|| BootError::NoRecord(line.to_string()))
    }
}

impl std::fmt::Display for BootError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            BootError::Vm(failure) => failure.fmt(f),
            BootError::NoRecord(why) => f.write_str(why),
        }
    }
}

impl serde::Serialize for BootError {
    fn serialize<S: serde::Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        s.collect_str(self)
    }
}

impl<'de> serde::Deserialize<'de> for BootError {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> Result<BootError, D::Error> {
        Ok(BootError::read(
            &<String as serde::Deserialize>::deserialize(d)?,
        ))
    }
}

/// A test's failure, as its line.
#[cfg(test)]
impl From<&str> for BootError {
    fn from(line: &str) -> BootError {
        BootError::read(line)
    }
}

/// Sessions from before failures were typed kept each as the line
/// `<scenario>/<variant> #<run>: <why>`: read once here, never written.
mod compat {
    use super::{BootError, BootFailure, RunId};

    #[derive(serde::Deserialize)]
    #[serde(untagged)]
    pub enum Failure {
        Typed { run: RunId, why: BootError },
        Line(String),
    }

    impl TryFrom<Failure> for BootFailure {
        type Error = String;

        fn try_from(f: Failure) -> Result<BootFailure, String> {
            match f {
                Failure::Typed { run, why } => Ok(BootFailure { run, why }),
                Failure::Line(line) => {
                    let named = || {
                        let (label, why) = line.split_once(": ")?;
                        let (cell, run) = label.rsplit_once(" #")?;
                        let (scenario, variant) = cell.split_once('/')?;
                        let run = run.parse::<u32>().ok()?.checked_sub(1)?;
                        Some(BootFailure {
                            run: RunId::new(scenario, variant, run),
                            why: BootError::read(why),
                        })
                    };
                    named().ok_or_else(|| {
                        format!(
                            "the boot failure `{line}` names no run (`<scenario>/<variant> \
                             #<run>: <why>`)"
                        )
                    })
                }
            }
        }
    }
}

#[derive(Debug, Clone, serde::Serialize, serde::Deserialize)]
pub struct ScenarioInfo {
    pub name: String,
    pub what: String,
    pub job: Job,
    /// Runs per cell of this scenario; absent in sessions from before each
    /// scenario had its own (then `Session::runs`).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub runs: Option<u32>,
}

impl ScenarioInfo {
    /// The session's record of `scenarios`: each one's `job`, and its `runs`.
    pub fn each(
        scenarios: &[Scenario],
        job: impl Fn(Scenario) -> Job,
        runs: impl Fn(&str) -> u32,
    ) -> Vec<ScenarioInfo> {
        scenarios
            .iter()
            .map(|s| ScenarioInfo {
                name: s.name.into(),
                what: s.what.into(),
                job: job(*s),
                runs: Some(runs(s.name)),
            })
            .collect()
    }
}

impl Session {
    /// The floors today's floor files give this session, scenario by
    /// scenario, of the metrics `keys` (`report --floors`); a scenario the
    /// repository no longer has has none, said why.
    pub fn floors_today(&self, keys: &[&str]) -> anyhow::Result<BTreeMap<String, FloorOf>> {
        let mut out = BTreeMap::new();
        for info in &self.scenarios {
            let Ok(scen) = crate::guest::scenario::by_name(&info.name) else {
                let why = format!("{} is no longer a scenario of the repository", info.name);
                out.insert(info.name.clone(), FloorOf::None(why));
                continue;
            };
            let each = [(scen.name, &info.job, scen.disk)];
            out.extend(crate::results::floor::of_each(each, &self.machine, keys)?);
        }
        Ok(out)
    }

    /// Runs per cell, scenario by scenario (each scenario's own count, or the
    /// session's for sessions from before they had one).
    pub fn runs_per_cell(&self) -> crate::guest::plan::Runs {
        crate::guest::plan::Runs::each(
            self.scenarios
                .iter()
                .map(|s| (s.name.clone(), s.runs.unwrap_or(self.runs)))
                .collect(),
        )
    }

    /// Puts `records` in the order of the unsharded plan (run, scenario, then
    /// the variant in ABBA direction), whatever order they were made in
    /// (shards, a resumed session).
    pub fn sort_in_plan_order(&self, records: &mut [RunRecord]) {
        let var_idx = |v: &str| self.variants.iter().position(|m| m.variant == v);
        let scen_idx = |s: &str| self.scenarios.iter().position(|i| i.name == s);
        let n = self.variants.len().max(1);
        records.sort_by_key(|r| {
            plan_position(
                r.id.run,
                scen_idx(&r.id.scenario).unwrap_or(usize::MAX),
                var_idx(&r.id.variant).unwrap_or(usize::MAX).min(n - 1),
                n,
            )
        });
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_boot_failure_is_kept_typed_and_read_from_the_old_line() {
        let f = BootFailure {
            run: RunId::new("fuse-strictlimit", "v1", 1),
            why: BootError::Vm(VmFailure {
                kind: VmErrorKind::Hang,
                said: "the guest hung".into(),
            }),
        };
        let json = serde_json::to_string(&f).unwrap();
        // On disk, the line it prints.
        assert_eq!(
            json,
            r#"{"run":{"scenario":"fuse-strictlimit","variant":"v1","run":1},"why":"hang: the guest hung"}"#
        );
        assert_eq!(serde_json::from_str::<BootFailure>(&json).unwrap(), f);
        // What no guest's failure says is the record's: no kind.
        let unread = BootError::from("reading fio's result: no `jobs`");
        assert_eq!(
            unread,
            BootError::NoRecord("reading fio's result: no `jobs`".into())
        );
        assert_eq!(unread.kind(), None);
        let json = serde_json::to_string(&unread).unwrap();
        assert_eq!(serde_json::from_str::<BootError>(&json).unwrap(), unread);
        assert_eq!(
            f.to_string(),
            "fuse-strictlimit/v1 #2: hang: the guest hung"
        );
        // A session from before: the same failure as its line.
        let old: BootFailure =
            serde_json::from_str("\"fuse-strictlimit/v1 #2: hang: the guest hung\"").unwrap();
        assert_eq!(old, f);
        let e = serde_json::from_str::<BootFailure>("\"the boot of v1 failed\"").unwrap_err();
        assert!(e.to_string().contains("names no run"), "{e}");
    }
}
