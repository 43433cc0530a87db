//! What module-stress's memcg churn did, as the guest tells it: its `churn`
//! line, and the module's counters for the churn's cgroups on each load
//! (`wbstall-stats-load-N`), parsed once.

use anyhow::{bail, Context, Result};

use crate::{
    guest::{protocol, stream::Stream},
    results::debugfs,
};

/// What the memcg churn did, from the guest's `churn` line.
#[derive(Debug, PartialEq, Eq)]
pub struct Churn {
    pub cycles: u64,
    pub cgroups: u64,
    pub killed_in_bdp: u64,
    pub moved: u64,
    pub reloads: u64,
    pub pending_max: u64,
    pub pending_end: u64,
}

impl Churn {
    pub fn parse(text: &str) -> Result<Churn> {
        let lines = debugfs::parse_kv_lines(text, protocol::stream::CHURN)?;
        let [line] = lines.as_slice() else {
            bail!("the guest's `churn` is {} lines, not one", lines.len());
        };
        let n = |k: &str| debugfs::counter(line, k, protocol::stream::CHURN);
        Ok(Churn {
            cycles: n("churn")?,
            cgroups: n("cgroups")?,
            killed_in_bdp: n("killed_in_bdp")?,
            moved: n("moved")?,
            reloads: n("reloads")?,
            pending_max: n("pending_max")?,
            pending_end: n("pending_end")?,
        })
    }
}

/// The module's counters for the churn's cgroups (every slot with a memcg
/// id), summed over the loads: how each sleep's entry ended.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct Entries {
    pub loads: usize,
    pub throttle_sleeps: u64,
    pub classed: u64,
    pub unblocked: u64,
    pub dropped_at_event: u64,
    pub dropped_at_block: u64,
    pub lost: u64,
}

impl Entries {
    pub fn of(stream: &Stream) -> Result<Entries> {
        let mut e = Entries::default();
        for (name, bytes) in &stream.files {
            if !name.starts_with(protocol::stream::STATS_OF_LOAD) {
                continue;
            }
            e.loads += 1;
            let lines = debugfs::parse_stats(&String::from_utf8_lossy(bytes))
                .with_context(|| format!("the guest's `{name}`"))?;
            for line in lines
                .iter()
                .filter(|l| debugfs::value(l, "memcg_id") != Some(0))
            {
                let n = |k: &str| debugfs::counter(line, k, name);
                let (sleeps, lost) = (n("throttle_sleeps")?, n("lost_ends")?);
                let classed = n("flushing_sleeps")? + n("draining_sleeps")? + n("stall_sleeps")?;
                if classed + lost > sleeps {
                    bail!(
                        "{name}: the module classed {classed} and lost {lost} of {sleeps} sleeps \
                         of memcg {}: more ends than sleeps",
                        n("memcg_id")?
                    );
                }
                e.throttle_sleeps += sleeps;
                e.classed += classed;
                e.lost += lost;
                e.unblocked += n("unblocked_sleeps")?;
                e.dropped_at_event += n("dropped_at_event")?;
                e.dropped_at_block += n("dropped_at_block")?;
            }
        }
        if e.loads == 0 {
            bail!(
                "the guest sent no `{}*`: the churn did not run",
                protocol::stream::STATS_OF_LOAD
            );
        }
        Ok(e)
    }
}
