//! The merge of `qemu-test --shard I/N`'s result directories (for example the
//! artifacts of a CI job matrix) into one, judged and rendered as if one
//! machine had run every boot (`cargo xtask merge`).
//! Shards of different kernels, sources, machines, clocks, jobs, expectations
//! or harness commits are refused, naming the difference.

use std::path::{Path, PathBuf};

use anyhow::{bail, Context, Result};

use super::boot_all::{judge_and_render, Rendered};
use crate::{
    analysis::verdict,
    exit,
    results::{dir::ResultsDir, record::RunRecord, session::Session},
    util,
};

/// Joins the shards' result directories into `out` (a new directory, with
/// the boots' own files), then judges and renders it as one session.
pub fn merge_into(out: &Path, dirs: &[PathBuf]) -> Result<Rendered> {
    let shards = dirs
        .iter()
        .map(|d| read_dir(d))
        .collect::<Result<Vec<_>>>()?;
    let (session, records) = merge(&shards)?;
    if out.exists() {
        bail!(exit::usage(format!(
            "--out {} exists: name a new directory (nothing was written)",
            out.display()
        )));
    }
    std::fs::create_dir_all(out).with_context(|| format!("creating {}", out.display()))?;
    ResultsDir::new(out).write(&session, Some(&records))?;
    // The boots' own files (console logs, samples) come along.
    for (dir, _, _) in &shards {
        for e in std::fs::read_dir(dir).with_context(|| format!("listing {}", dir.display()))? {
            let p = e?.path();
            let name = util::file_name(&p);
            if p.is_file() && !ResultsDir::is_session_file(&name) && name != util::LOCK_FILE {
                std::fs::copy(&p, out.join(&name))
                    .with_context(|| format!("copying {}", p.display()))?;
            }
        }
    }
    let expected = verdict::session_expectations(&session, None)?;
    judge_and_render(out, &session, &records, &expected, None)
}

type ShardData = (PathBuf, Session, Vec<RunRecord>);

fn read_dir(dir: &Path) -> Result<ShardData> {
    let (session, records) = ResultsDir::new(dir).load().with_context(|| {
        exit::usage(format!(
            "reading the --shard results directory {}",
            dir.display()
        ))
    })?;
    Ok((dir.to_path_buf(), session, records))
}

/// What must be the same in every shard, as text to compare and name.
pub fn identity(s: &Session) -> Vec<(&'static str, String)> {
    let kernels: Vec<String> = s
        .variants
        .iter()
        .map(|v| format!("{} {} {}", v.variant, v.bzimage_sha256, v.module_sha256))
        .collect();
    let base = s.variants.first().map(|v| {
        format!(
            "{} {} {}",
            v.base.kernel_version,
            v.base.package_version.as_deref().unwrap_or("-"),
            v.base.sha256
        )
    });
    let jobs: Vec<String> = s
        .scenarios
        .iter()
        .map(|i| format!("{}: {}", i.name, i.job.command_line()))
        .collect();
    vec![
        ("kernels", kernels.join(", ")),
        ("source", base.unwrap_or_default()),
        ("accelerator", format!("{:?}", s.machine.accel)),
        ("clock", s.machine.clock.to_string()),
        ("disk", s.machine.disk.to_string()),
        ("FUSE server", s.fuse_server.clone().unwrap_or_default()),
        ("CPU model", s.machine.cpu_model.clone()),
        ("kernel arguments", s.machine.kernel_args.join(" ")),
        (
            "guest size",
            format!("{} CPUs, {} MiB", s.machine.cpus, s.machine.memory_mib),
        ),
        ("runs", s.runs_per_cell().to_string()),
        ("jobs", jobs.join("; ")),
        ("expectations", s.expected.clone().unwrap_or_default()),
        ("roles", format!("{:?}", s.roles)),
        ("harness commit", s.harness.clone().unwrap_or_default()),
    ]
}

/// Every shard of `count` given once, all of one plan.
fn check_shards(shards: &[ShardData], count: u32) -> Result<()> {
    let (first_dir, first, _) = &shards[0];
    let mut seen = vec![None::<&Path>; count as usize];
    for (dir, s, _) in shards {
        let Some(shard) = s.shard else {
            bail!(exit::usage(format!(
                "{} is not a shard (no --shard I/N)",
                dir.display()
            )));
        };
        if shard.count != count {
            bail!(exit::usage(format!(
                "{} is shard {shard}, {} is of {count} shards: merge shards of one plan",
                dir.display(),
                first_dir.display()
            )));
        }
        let slot = &mut seen[(shard.index - 1) as usize];
        if let Some(other) = slot {
            bail!(exit::usage(format!(
                "shard {shard} is given twice: {} and {}",
                other.display(),
                dir.display()
            )));
        }
        *slot = Some(dir);
        for ((what, a), (_, b)) in identity(first).iter().zip(identity(s)) {
            if *a != b {
                bail!(exit::usage(format!(
                    "{} and {} differ in their {what}:\n  {a}\n  {b}\nmerge shards of one \
                     qemu-test plan (same kernels, machine, clock, jobs, expectations)",
                    first_dir.display(),
                    dir.display()
                )));
            }
        }
    }
    let missing: Vec<String> = (1..=count)
        .filter(|i| seen[(*i - 1) as usize].is_none())
        .map(|i| format!("{i}/{count}"))
        .collect();
    if !missing.is_empty() {
        bail!(exit::usage(format!(
            "shard(s) {} missing: merge all {count}",
            missing.join(", ")
        )));
    }
    Ok(())
}

/// The merged session and records, in the unsharded plan's order.
pub fn merge(shards: &[ShardData]) -> Result<(Session, Vec<RunRecord>)> {
    let Some((first_dir, first, _)) = shards.first() else {
        bail!(exit::usage("merge needs the shards' result directories"));
    };
    let count = match first.shard {
        Some(s) => s.count,
        None => bail!(exit::usage(format!(
            "{} is not a shard (no --shard I/N)",
            first_dir.display()
        ))),
    };
    check_shards(shards, count)?;
    let mut session = first.clone();
    session.shard = None;
    session.command = format!("merge of {count} shards of `{}`", first.command);
    session.started = (shards.iter())
        .map(|(_, s, _)| s.started)
        .min()
        .unwrap_or(first.started);
    session.failures = shards
        .iter()
        .flat_map(|(_, s, _)| s.failures.clone())
        .collect();
    let mut records: Vec<RunRecord> = shards.iter().flat_map(|(_, _, r)| r.clone()).collect();
    session.sort_in_plan_order(&mut records);
    Ok((session, records))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{analysis::judge, guest::plan::Shard, util::testdir};

    fn example() -> (Session, Vec<RunRecord>) {
        ResultsDir::new(util::project_root().join("docs/example-report"))
            .load()
            .unwrap()
    }

    /// The example's records split as `--shard i/count` would have run them.
    fn split(count: u32) -> Vec<ShardData> {
        let (session, records) = example();
        let names: Vec<String> = session.scenarios.iter().map(|i| i.name.clone()).collect();
        (1..=count)
            .map(|index| {
                let shard = Shard { index, count };
                let mut s = session.clone();
                s.shard = Some(shard);
                let r: Vec<RunRecord> = records
                    .iter()
                    .filter(|r| {
                        let i = names.iter().position(|n| *n == r.id.scenario).unwrap();
                        shard.takes(i, names.len(), r.id.run)
                    })
                    .cloned()
                    .collect();
                (PathBuf::from(format!("shard{index}")), s, r)
            })
            .collect()
    }

    #[test]
    fn merged_shards_judge_like_one_run() {
        let (session, records) = example();
        let expected = verdict::session_expectations(&session, None).unwrap();
        let whole = verdict::verdict_of(
            &records,
            &expected,
            &crate::analysis::judgement::Planned::of(&session),
        );
        // Reversed on purpose: the order of the directories does not matter.
        let mut shards = split(2);
        shards.reverse();
        assert!(shards.iter().all(|(_, _, r)| !r.is_empty()));
        let (merged_session, merged) = merge(&shards).unwrap();
        let judged = verdict::verdict_of(
            &merged,
            &expected,
            &crate::analysis::judgement::Planned::of(&merged_session),
        );
        assert_eq!(
            serde_json::to_string(&judged).unwrap(),
            serde_json::to_string(&whole).unwrap()
        );
        let table = |s, r| crate::report::terminal::table(&judge(s, r, &expected).unwrap());
        assert_eq!(table(&merged_session, &merged), table(&session, &records));
        // Rendered into a directory, too.
        let t = testdir::Dir::new("merge");
        judge_and_render(t.path(), &merged_session, &merged, &expected, None).unwrap();
        assert!(t.path().join(ResultsDir::REPORT).is_file());
    }

    #[test]
    fn mismatched_or_incomplete_shards_are_refused_by_name() {
        let shards = split(3);
        let e = merge(&shards[..2]).unwrap_err().to_string();
        assert!(e.contains("shard(s) 3/3 missing"), "{e}");
        let e = merge(&[shards[0].clone(), shards[0].clone()])
            .unwrap_err()
            .to_string();
        assert!(e.contains("shard 1/3 is given twice"), "{e}");
        let mut other = shards.clone();
        other[1].1.machine.clock = crate::guest::qemu::Clock::Virtual { shift: 5 };
        let e = merge(&other).unwrap_err().to_string();
        assert!(e.contains("differ in their clock"), "{e}");
        let mut other = shards.clone();
        other[0].1.machine.disk = crate::guest::disk::Disk::Host;
        let e = merge(&other).unwrap_err().to_string();
        assert!(e.contains("differ in their disk"), "{e}");
        let mut other = shards.clone();
        other[2].1.variants[0].bzimage_sha256 = "0".repeat(64);
        let e = merge(&other).unwrap_err().to_string();
        assert!(e.contains("differ in their kernels"), "{e}");
        let mut other = shards;
        other[0].1.shard = None;
        let e = merge(&other).unwrap_err().to_string();
        assert!(e.contains("is not a shard"), "{e}");
    }
}
