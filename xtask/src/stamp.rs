//! Times as wbstall records them (`20261129T201530Z`, UTC, to the second)
//! and as the formats it writes want them: RFC 3339 (KCIDB). A mail's
//! `Date:` is lettre's.

use anyhow::Result;

/// A UTC time to the second, as the records keep it ([`timestamp`]'s
/// `20261129T201530Z`) and as the formats we write want it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Stamp(pub u64);

impl Stamp {
    /// Reads `20261129T201530Z`, the form [`timestamp`] writes.
    pub fn parse(text: &str) -> Result<Stamp> {
        let bad = || {
            anyhow::anyhow!(
                "`{text}` is not a time as wbstall records them (YYYYMMDDTHHMMSSZ, UTC)"
            )
        };
        let b = text.as_bytes();
        if b.len() != 16 || b[8] != b'T' || b[15] != b'Z' {
            return Err(bad());
        }
        let field = |r: std::ops::Range<usize>| -> Result<u64> {
            let f = &text[r];
            if !f.bytes().all(|c| c.is_ascii_digit()) {
                return Err(bad());
            }
            f.parse().map_err(|_| bad())
        };
        let (y, mo, d) = (field(0..4)?, field(4..6)?, field(6..8)?);
        let (h, mi, s) = (field(9..11)?, field(11..13)?, field(13..15)?);
        if !(1..=12).contains(&mo) || !(1..=31).contains(&d) || h > 23 || mi > 59 || s > 60 {
            return Err(bad());
        }
        let days = days_from_civil(y as i64, mo as u32, d as u32);
        if days < 0 || civil_from_days(days) != (y as i64, mo as u32, d as u32) {
            return Err(bad());
        }
        Ok(Stamp(days as u64 * 86_400 + h * 3600 + mi * 60 + s))
    }

    /// `secs` later.
    pub fn plus(self, secs: u64) -> Stamp {
        Stamp(self.0 + secs)
    }

    /// `secs` earlier (rounded to the second).
    pub fn minus(self, secs: f64) -> Stamp {
        Stamp(self.0.saturating_sub(secs.max(0.0).round() as u64))
    }

    fn parts(self) -> ((i64, u32, u32), (u64, u64, u64)) {
        let (days, rem) = (self.0 / 86_400, self.0 % 86_400);
        let date = civil_from_days(days as i64);
        (date, (rem / 3600, rem / 60 % 60, rem % 60))
    }

    /// `20261129T201530Z`.
    pub fn compact(self) -> String {
        let ((y, m, d), (h, mi, s)) = self.parts();
        format!("{y:04}{m:02}{d:02}T{h:02}{mi:02}{s:02}Z")
    }

    /// RFC 3339: `2026-11-29T20:15:30Z`.
    pub fn rfc3339(self) -> String {
        let ((y, m, d), (h, mi, s)) = self.parts();
        format!("{y:04}-{m:02}-{d:02}T{h:02}:{mi:02}:{s:02}Z")
    }
}

/// Days since 1970-01-01 to (year, month, day), after Howard Hinnant's algorithm.
fn civil_from_days(z: i64) -> (i64, u32, u32) {
    let z = z + 719_468;
    let era = z.div_euclid(146_097);
    let doe = z.rem_euclid(146_097);
    let yoe = (doe - doe / 1460 + doe / 36_524 - doe / 146_096) / 365;
    let doy = doe - (365 * yoe + yoe / 4 - yoe / 100);
    let mp = (5 * doy + 2) / 153;
    let d = (doy - (153 * mp + 2) / 5 + 1) as u32;
    let m = if mp < 10 { mp + 3 } else { mp - 9 } as u32;
    let y = yoe + era * 400 + i64::from(m <= 2);
    (y, m, d)
}

/// (year, month, day) to days since 1970-01-01, the inverse of
/// [`civil_from_days`] (Howard Hinnant's algorithm).
fn days_from_civil(y: i64, m: u32, d: u32) -> i64 {
    let y = if m <= 2 { y - 1 } else { y };
    let era = y.div_euclid(400);
    let yoe = y.rem_euclid(400);
    let mp = i64::from(if m > 2 { m - 3 } else { m + 9 });
    let doy = (153 * mp + 2) / 5 + i64::from(d) - 1;
    let doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
    era * 146_097 + doe - 719_468
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn civil_dates() {
        // 2026-11-29 is day 20_786 since the epoch.
        assert_eq!(civil_from_days(0), (1970, 1, 1));
        assert_eq!(civil_from_days(20_786), (2026, 11, 29));
        assert_eq!(civil_from_days(11_016), (2000, 2, 29));
        assert_eq!(days_from_civil(2026, 11, 29), 20_786);
        assert_eq!(days_from_civil(2000, 2, 29), 11_016);
    }

    /// A recorded time reads back and is written as RFC 3339 and RFC 2822;
    /// what is not one is an error.
    #[test]
    fn recorded_times_in_the_formats_we_write() {
        let t = Stamp::parse("20261202T060724Z").unwrap();
        assert_eq!(t.compact(), "20261202T060724Z");
        assert_eq!(t.rfc3339(), "2026-12-02T06:07:24Z");
        assert_eq!(t.minus(3600.7).rfc3339(), "2026-12-02T05:07:23Z");
        for bad in [
            "",
            "2026-12-02T06:07:24Z",
            "20261302T060724Z",
            "20260230T060724Z",
        ] {
            let e = Stamp::parse(bad).unwrap_err().to_string();
            assert!(e.contains("is not a time as wbstall records them"), "{e}");
        }
    }
}
