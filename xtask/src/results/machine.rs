//! The machine one boot ran on, as `results.json` keeps it: made once from
//! the boot ([`MachineFacts::of`]), handed on by value from the run's context
//! to its record, and flattened there, so its fields stay where records have
//! always had them.

use serde::{Deserialize, Serialize};

use crate::{
    guest::{
        disk::Disk,
        plan::Boot,
        qemu::{Accel, Clock},
    },
    results::compat,
};

/// The machine one boot ran on.
///
/// Not the session's machine (`Session`'s fields, `guest::qemu::Machine`):
/// its `disk` is the boot's, none for the FUSE scenarios, where the session's
/// is the one its disk scenarios used; and the session keeps the kernel
/// arguments, a record does not.
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct MachineFacts {
    pub accel: Accel,
    /// Guest time: the host's, or QEMU's instruction count.
    #[serde(default = "compat::clock")]
    pub clock: Clock,
    /// The disk under the scenario's file system: none for the FUSE scenarios.
    #[serde(default = "compat::disk", skip_serializing_if = "Option::is_none")]
    pub disk: Option<Disk>,
    /// QEMU's -cpu under TCG (`host` under KVM).
    #[serde(default = "compat::cpu_model")]
    pub cpu_model: String,
    pub cpus: u32,
    pub memory_mib: u32,
}

impl MachineFacts {
    /// The machine of a planned boot: its session's, with the disk of its
    /// scenario.
    pub fn of(b: &Boot) -> MachineFacts {
        let m = &b.machine;
        MachineFacts {
            accel: m.accel,
            clock: m.clock,
            disk: b.disk(),
            cpu_model: m.cpu_model.clone(),
            cpus: m.cpus,
            memory_mib: m.memory_mib,
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::results::{dir::ResultsDir, record::RunRecord, session::Session};

    /// The top-level keys of `v`, in the order they are written.
    fn keys(v: &impl Serialize) -> Vec<String> {
        let text = serde_json::to_string_pretty(v).unwrap();
        text.lines()
            .filter_map(|l| Some(l.strip_prefix("  \"")?.split_once('"')?.0.to_string()))
            .collect()
    }

    /// `want`, found in `keys` one after the other.
    fn in_a_row(keys: &[String], want: &[&str]) {
        let at = keys.iter().position(|k| k == want[0]).unwrap();
        assert_eq!(keys[at..at + want.len()], *want, "{keys:?}");
    }

    /// The machine nested in the record leaves results.json as it was: its
    /// fields where they always were, between the run and the kernel, and a
    /// record from before the clock, the disk and the CPU model were kept
    /// reads with their defaults.
    #[test]
    fn the_records_keep_their_format() {
        let dir = ResultsDir::new(crate::util::project_root().join("docs/example-report"));
        let (_, records) = dir.load().unwrap();
        let new = (records.iter())
            .find(|r| r.machine.disk.is_some() && r.start_phase.is_none())
            .unwrap();
        let text = serde_json::to_string_pretty(new).unwrap();
        let keys: Vec<&str> = text
            .lines()
            .filter_map(|l| Some(l.strip_prefix("  \"")?.split_once('"')?.0))
            .collect();
        let at = keys.iter().position(|k| *k == "accel").unwrap();
        assert_eq!(
            keys[at - 1..at + 7],
            [
                "run",
                "accel",
                "clock",
                "disk",
                "cpu_model",
                "cpus",
                "memory_mib",
                "kernel"
            ]
        );
        let mut old = serde_json::to_value(new).unwrap();
        for key in ["clock", "disk", "cpu_model"] {
            old.as_object_mut().unwrap().remove(key).unwrap();
        }
        let old: RunRecord = serde_json::from_value(old).unwrap();
        assert_eq!(
            old.machine,
            MachineFacts {
                clock: Clock::Real,
                disk: None,
                cpu_model: "max".into(),
                ..new.machine.clone()
            }
        );
    }

    /// The session's machine (`guest::qemu::Machine`), flattened, leaves
    /// session.json as it was: its fields between the start and the runs,
    /// the kernel arguments only when given, and a session from before the
    /// clock, the disk and the CPU model were kept reads with their defaults.
    #[test]
    fn the_sessions_keep_their_format() {
        let dir = ResultsDir::new(crate::util::project_root().join("docs/example-report"));
        let (mut session, _) = dir.load().unwrap();
        let machine = ["accel", "clock", "disk", "cpu_model", "cpus", "memory_mib"];
        in_a_row(
            &keys(&session),
            &[&["started"], &machine[..], &["runs"]].concat(),
        );
        session.machine.kernel_args = vec!["tsc=reliable".into()];
        in_a_row(
            &keys(&session),
            &["cpu_model", "kernel_args", "cpus", "memory_mib", "runs"],
        );
        let mut old = serde_json::to_value(&session).unwrap();
        for key in ["clock", "disk", "cpu_model", "kernel_args"] {
            old.as_object_mut().unwrap().remove(key).unwrap();
        }
        let old: Session = serde_json::from_value(old).unwrap();
        assert_eq!(
            old.machine,
            crate::guest::qemu::Machine {
                clock: Clock::Real,
                disk: Disk::Host,
                cpu_model: "max".into(),
                kernel_args: Vec::new(),
                ..session.machine.clone()
            }
        );
    }
}
