//! calibrate's tables: each scenario's floor, the replays' false-positive
//! rate and power, and the power curves of injected drops.

use crate::{
    analysis::{
        calibration::{self, PowerCurve, Rates, Tally},
        cost::{self, JUDGED, RUN_CAP},
    },
    results::floor::Pool,
};

/// Each pool's spread per judged metric, and the smallest change it lets
/// the verdict promise to see.
pub fn floors(pools: &[Pool]) -> String {
    let mut o =
        String::from("scenario          runs  metric                  sd/run  smallest change\n");
    for p in pools {
        for j in JUDGED {
            let sd = p.sd(j.key).unwrap_or(f64::NAN);
            let rule = cost::Rule::of(j, sd, None);
            o.push_str(&format!(
                "{:<17} {:>4}  {:<22} {:>6.2}%  {:>6.1}%\n",
                p.scenario,
                p.runs.len(),
                j.key,
                sd * 100.0,
                rule.smallest_pct
            ));
        }
    }
    o
}

/// The replays' table: the floors, the A/A verdicts' false-positive rate
/// and where they failed, and the power on the known cost.
pub fn rates(reference: &[Pool], r: &Rates) -> String {
    let mut o = floors(reference);
    let aa = &r.aa;
    o.push_str(&format!(
        "\nA/A verdicts (two folds, each half's floor judging pairs drawn from the other half): \
         {} of {} failed on cost ({:.1}%), {} undecided at the cap of {RUN_CAP}; runs a side \
         per scenario {:.2} on average\n",
        aa.failed,
        aa.tries,
        aa.failed_share() * 100.0,
        aa.undecided,
        aa.mean_runs(r.scenarios)
    ));
    o.push_str(&worse_in(aa));
    if let Some(p) = &r.power {
        o.push_str(&format!(
            "known cost: {} of {} verdicts failed ({:.1}%), {} undecided; runs a side per \
             scenario {:.2} on average\n",
            p.failed,
            p.tries,
            p.failed_share() * 100.0,
            p.undecided,
            p.mean_runs(r.scenarios)
        ));
        o.push_str(&worse_in(p));
    }
    o
}

/// Where a tally's failed verdicts were worse, a line per scenario and metric.
fn worse_in(t: &Tally) -> String {
    (t.worse_in.iter())
        .map(|((s, m), n)| format!("  worse in {s} {m}: {n}\n"))
        .collect()
}

/// The power curves: per scenario, the share of verdicts that fail for each
/// drop of its MiB/s injected into the reference's own runs.
pub fn curves(curves: &[(String, PowerCurve)]) -> String {
    let mut o = String::from(
        "\ninjected drops of one scenario's MiB/s (the reference's own runs, scaled), verdicts \
         that fail of 1000:\n",
    );
    o.push_str(&format!("{:<18}", "scenario"));
    for d in calibration::INJECTED {
        o.push_str(&format!("{:>8}", format!("-{d}%")));
    }
    o.push('\n');
    for (scenario, curve) in curves {
        o.push_str(&format!("{scenario:<18}"));
        for (_, t) in curve {
            o.push_str(&format!("{:>8}", t.failed));
        }
        o.push('\n');
    }
    o
}
