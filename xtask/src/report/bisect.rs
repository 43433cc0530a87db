//! A bisect's steps as a table, and what a step measured in words.

use crate::analysis::bisect_step::{EndPoint, StepRow};

/// What a row measured, for messages: `stall (62.3% of writer time in stall
/// sleeps, 1.1 MiB/s)`, or `skip: <why>`.
pub fn measured(row: &StepRow) -> String {
    let (word, why) = match row.verdict.split_once(": ") {
        Some((w, why)) => (w, Some(why)),
        None => (row.verdict.as_str(), None),
    };
    let mut s = word.to_string();
    if let (Some(share), Some(bw)) = (row.stall_share, row.mib_s) {
        s.push_str(&format!(
            " ({:.1}% of writer time in stall sleeps, {bw:.1} MiB/s)",
            share * 100.0
        ));
    }
    if let Some(why) = why {
        s.push_str(&format!(": {why}"));
    }
    s
}

/// The steps as a table; the end points say so before their subject.
pub fn table(rows: &[StepRow]) -> String {
    let mut s = format!(
        "{:<12} {:<8} {:>7} {:>9} {:>6}  {}\n",
        "commit", "verdict", "stall%", "MiB/s", "secs", "subject"
    );
    for r in rows {
        let opt =
            |v: Option<f64>, scale: f64| v.map_or("-".to_string(), |v| format!("{:.1}", v * scale));
        let end = match r.end {
            Some(EndPoint::Good) => "(--good) ",
            Some(EndPoint::Bad) => "(--bad) ",
            None => "",
        };
        s.push_str(&format!(
            "{:<12} {:<8} {:>7} {:>9} {:>6.0}  {end}{}\n",
            &r.commit[..r.commit.len().min(12)],
            r.verdict.split(':').next().unwrap_or(""),
            opt(r.stall_share, 100.0),
            opt(r.mib_s, 1.0),
            r.seconds,
            r.subject
        ));
    }
    s
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::analysis::bisect_step::tests::row;

    #[test]
    fn the_table_shows_every_step_and_the_end_points() {
        let mut good = row("ok", Some(0.0), Some(201.0), 0);
        good.end = Some(EndPoint::Good);
        good.commit = "1111222233334444".into();
        let rows = [
            good,
            row("stall", Some(0.569), Some(3.2), 1),
            StepRow {
                commit: "ecaf5c41".into(),
                subject: "kernel: unrelated".into(),
                verdict: "skip: the build failed".into(),
                stall_share: None,
                mib_s: None,
                seconds: 12.0,
                exit: 125,
                end: None,
            },
        ];
        let t = table(&rows);
        assert!(
            t.contains("111122223333 ok           0.0     201.0     61  (--good) mm: restore"),
            "{t}"
        );
        assert!(
            t.contains("9a90d87d9239 stall       56.9       3.2     61  mm: restore"),
            "{t}"
        );
        assert!(
            t.contains("ecaf5c41     skip           -         -     12  kernel: unrelated"),
            "{t}"
        );
    }
}
