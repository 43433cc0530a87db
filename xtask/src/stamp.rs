//! Times as wbstall records them (`20261129T201530Z`, UTC, to the second)
//! and as the formats it writes want them: RFC 3339 (KCIDB). The calendar
//! is jiff's; a mail's `Date:` is lettre's.

use anyhow::Result;

/// The form the records keep (`20261129T201530Z`).
const COMPACT: &str = "%Y%m%dT%H%M%SZ";

/// A UTC time to the second, as the records keep it and as the formats we
/// write want it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Stamp(jiff::Timestamp);

impl Stamp {
    /// Now, to the second.
    pub fn now() -> Stamp {
        let now = jiff::Timestamp::now();
        Stamp(jiff::Timestamp::from_second(now.as_second()).unwrap_or(now))
    }

    /// Reads `20261129T201530Z`, the form [`Stamp::compact`] writes.
    pub fn parse(text: &str) -> Result<Stamp> {
        let bad = || {
            anyhow::anyhow!(
                "`{text}` is not a time as wbstall records them (YYYYMMDDTHHMMSSZ, UTC)"
            )
        };
        if text.len() != 16 {
            return Err(bad());
        }
        let civil = jiff::civil::DateTime::strptime(COMPACT, text).map_err(|_| bad())?;
        let t = jiff::tz::Offset::UTC
            .to_timestamp(civil)
            .map_err(|_| bad())?;
        Ok(Stamp(t))
    }

    /// `secs` earlier (rounded to the second).
    pub fn minus(self, secs: f64) -> Result<Stamp> {
        let d = jiff::SignedDuration::from_secs(secs.max(0.0).round() as i64);
        Ok(Stamp(self.0.checked_sub(d)?))
    }

    /// `secs` later.
    pub fn plus(self, secs: u64) -> Result<Stamp> {
        let d = jiff::SignedDuration::from_secs(i64::try_from(secs)?);
        Ok(Stamp(self.0.checked_add(d)?))
    }

    /// Seconds since 1970-01-01 UTC (negative before).
    pub fn unix_seconds(self) -> i64 {
        self.0.as_second()
    }

    /// `20261129T201530Z`.
    pub fn compact(self) -> String {
        self.0.strftime(COMPACT).to_string()
    }

    /// The day: `2026-11-29`.
    pub fn day(self) -> String {
        self.0.strftime("%Y-%m-%d").to_string()
    }

    /// RFC 3339: `2026-11-29T20:15:30Z`.
    pub fn rfc3339(self) -> String {
        self.0.to_string()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A recorded time reads back and is written as RFC 3339; what is not
    /// one is an error.
    #[test]
    fn recorded_times_in_the_formats_we_write() {
        let t = Stamp::parse("20261202T060724Z").unwrap();
        assert_eq!(t.compact(), "20261202T060724Z");
        assert_eq!(t.rfc3339(), "2026-12-02T06:07:24Z");
        assert_eq!(t.day(), "2026-12-02");
        assert_eq!(t.minus(3600.7).unwrap().rfc3339(), "2026-12-02T05:07:23Z");
        assert_eq!(t.plus(86_400).unwrap().compact(), "20261203T060724Z");
        // 2026-11-29 is day 20_786 since the epoch; 2000-02-29 day 11_016.
        assert_eq!(
            Stamp::parse("20261129T000000Z").unwrap().unix_seconds(),
            20_786 * 86_400
        );
        assert_eq!(
            Stamp::parse("20000229T000000Z").unwrap().unix_seconds(),
            11_016 * 86_400
        );
        assert_eq!(
            Stamp::parse("19700101T000000Z").unwrap().rfc3339(),
            "1970-01-01T00:00:00Z"
        );
        for bad in [
            "",
            "2026-12-02T06:07:24Z",
            "20261302T060724Z",
            "20260230T060724Z",
            "20261202T060724",
            "+0261202T060724Z",
        ] {
            let e = Stamp::parse(bad).unwrap_err().to_string();
            assert!(e.contains("is not a time as wbstall records them"), "{e}");
        }
        assert_eq!(Stamp::now().compact().len(), 16);
    }
}
