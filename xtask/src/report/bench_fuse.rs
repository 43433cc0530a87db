//! `bench-fuse`'s table: each guest's throughput, and the harness's cost.

use crate::{analysis::bench_fuse::HarnessCost, report::format::num};

/// The result: medians, ranges, and the harness's cost.
pub fn table(c: &HarnessCost) -> String {
    let mut out = format!("bench-fuse: {}, CPU model {}\n", c.variant, c.cpu_model);
    out.push_str(&format!(
        "{:<10} {:>5} {:>14} {:>10} {:>10}\n",
        "guest", "runs", "MiB/s median", "min", "max"
    ));
    for g in &c.guests {
        out.push_str(&format!(
            "{:<10} {:>5} {:>14} {:>10} {:>10}\n",
            g.name,
            g.runs,
            num(g.median),
            num(g.min),
            num(g.max)
        ));
    }
    if let Some(share) = c.share {
        out.push_str(&format!(
            "the harness guest reaches {share:.1}% of the bare guest's throughput\n"
        ));
    }
    out
}

#[cfg(test)]
mod tests {
    use crate::analysis::bench_fuse::harness_cost;

    #[test]
    fn the_table_says_what_share_the_harness_reaches() {
        let t = super::table(&harness_cost(
            "upstream",
            "max",
            &[vec![90.0, 100.0, 95.0], vec![100.0, 98.0, 102.0]],
        ));
        assert!(t.contains("harness        3           95.0"), "{t}");
        assert!(t.contains("reaches 95.0% of the bare guest's"), "{t}");
    }
}
