//! The memcg stale-statistics reproducer's summary (reproduce.sh's last
//! lines): the sleeps it counts.

use anyhow::{bail, Context, Result};

/// The `stale-held` sleeps a summary of reproduce.sh counts; an error if it
/// has no such line.
pub fn stale_held(summary: &str) -> Result<u64> {
    let line = (summary.lines())
        .find(|l| l.starts_with("stale-held"))
        .context("reproduce.sh's summary has no `stale-held` line")?;
    let Some(count) = (line.split(": ").nth(1))
        .and_then(|r| r.split(' ').next())
        .and_then(|w| w.parse::<u64>().ok())
    else {
        bail!("cannot read the sleeps of `{line}`");
    };
    Ok(count)
}

#[cfg(test)]
mod tests {
    #[test]
    fn the_stale_held_count_is_read_and_a_summary_without_it_refused() {
        let s = "held (task_ratelimit=0, dirty > limit): 9444 sleeps, 73108 ms (30.5%)\n\
                 stale-held (machine-wide dirty+writeback < limit/10): 9182 sleeps, 37552 ms (15.6%)\n";
        assert_eq!(super::stale_held(s).unwrap(), 9182);
        let e = super::stale_held("held (x): 9 sleeps\n").unwrap_err();
        assert!(e.to_string().contains("no `stale-held` line"), "{e}");
        let e = super::stale_held("stale-held (x): many sleeps\n").unwrap_err();
        assert!(e.to_string().contains("cannot read"), "{e}");
    }
}
