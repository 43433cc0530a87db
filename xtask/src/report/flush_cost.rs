//! flush-cost's table: a row per boot, what it measured or why the guest
//! did not finish.

use std::fmt::Write as _;

use anyhow::Result;

use crate::results::flush_cost::FlushRow;

/// The table's header.
const HEADER: &str = "| variant | memcgs | vCPUs | run | MiB/s | p99 ms (worst writer) | max ms | flushes/s (checks/s) | rstat lock held ms/s | contended/s | spun ms/s | busy % (sys %) | pgscan/s | dropped |\n\
                      |---|---|---|---|---|---|---|---|---|---|---|---|---|---|\n";

/// The table of `rows`, its header first.
pub fn table(rows: &[FlushRow], cpus: u32) -> Result<String> {
    let mut table = String::from(HEADER);
    for r in rows {
        writeln!(table, "{}", row(r, cpus)?)?;
    }
    Ok(table)
}

/// A boot's row of the table.
pub fn row(r: &FlushRow, cpus: u32) -> Result<String> {
    let head = format!("| {} | {} | {cpus} | {} |", r.variant, r.memcgs, r.run);
    let c = match &r.cost {
        Ok(c) => c,
        // The guest's own words, on one line: what ended it.
        Err(why) => {
            let first = why.lines().next().unwrap_or_default();
            let first = first
                .split(" Console log:")
                .next()
                .unwrap_or_default()
                .replace('|', "/");
            return Ok(format!("{head} did not finish: {first} ||||||||||"));
        }
    };
    Ok(format!(
        "{head} {:.1} | {:.0} | {:.0} | {:.1} ({:.1}) | {:.3} | {:.1} | {:.3} | {:.1} ({:.1}) | {:.0} | {} |",
        c.mib_s(),
        c.p99_ms()?,
        c.max_ms(),
        c.per_s(c.flushes),
        c.per_s(c.checks),
        c.ms_per_s(c.hold_ns),
        c.per_s(c.contended),
        c.ms_per_s(c.spin_ns),
        100.0 * c.busy_share,
        100.0 * c.sys_share,
        c.pgscan as f64 / c.secs,
        c.dropped,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::{results::flush_cost::FlushCost, util};
    use std::fs;

    #[test]
    fn every_row_has_the_header_s_columns_a_failed_boot_s_too() {
        let f = |n: &str| {
            fs::read_to_string(
                util::project_root()
                    .join("xtask/fixtures/flush-cost")
                    .join(n),
            )
            .unwrap()
        };
        let cost = FlushCost::parse(
            &f("hists.txt"),
            &f("fio.json"),
            &f("cpu.txt"),
            &f("vmstat-before.txt"),
            &f("vmstat.txt"),
        );
        let cols = |line: &str| line.matches('|').count();
        let header = HEADER.lines().next().unwrap();
        let ok = FlushRow {
            variant: "memcg-flush".into(),
            memcgs: 8,
            run: 1,
            cost: Ok(cost.unwrap()),
        };
        let line = row(&ok, 4).unwrap();
        assert_eq!(cols(&line), cols(header), "{line}");
        assert!(
            line.starts_with("| memcg-flush | 8 | 4 | 1 | 26.1 | 518 |"),
            "{line}"
        );
        let oom = FlushRow {
            variant: "upstream".into(),
            memcgs: 8,
            run: 2,
            cost: Err("oom: the guest ran out of memory: the OOM killer killed process 261 (fio) | x\nConsole log: y".into()),
        };
        let line = row(&oom, 4).unwrap();
        assert_eq!(cols(&line), cols(header), "{line}");
        assert!(
            line.contains("did not finish: oom: the guest ran out of memory")
                && !line.contains("Console"),
            "{line}"
        );
    }
}
