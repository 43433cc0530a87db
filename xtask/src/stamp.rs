//! Times as wbstall records them (`20261129T201530Z`, UTC, to the second)
//! and as the formats it writes want them: RFC 3339 (KCIDB). The calendar
//! is jiff's; a mail's `Date:` is lettre's. A recorded time is read once,
//! where its file is read (serde, [`field`]), and kept a [`Stamp`] until it
//! is printed.

use anyhow::Result;
use serde::{de::Error as _, Deserialize, Deserializer, Serialize, Serializer};

/// The form the records keep (`20261129T201530Z`).
const COMPACT: &str = "%Y%m%dT%H%M%SZ";

/// A UTC time to the second, as the records keep it and as the formats we
/// write want it. Written to JSON as [`Stamp::compact`] writes it.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub struct Stamp(jiff::Timestamp);

/// The Unix epoch: the start of a session a test makes whole with
/// `..Session::default()`. Only tests default a time.
#[cfg(test)]
impl Default for Stamp {
    fn default() -> Stamp {
        Stamp(jiff::Timestamp::UNIX_EPOCH)
    }
}

/// A test's time, written as the records keep it.
#[cfg(test)]
impl From<&str> for Stamp {
    fn from(text: &str) -> Stamp {
        Stamp::parse(text).expect("a test's time in the recorded form")
    }
}

impl Serialize for Stamp {
    fn serialize<S: Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        s.serialize_str(&self.compact())
    }
}

impl<'de> Deserialize<'de> for Stamp {
    fn deserialize<D: Deserializer<'de>>(d: D) -> std::result::Result<Stamp, D::Error> {
        Stamp::parse(&String::deserialize(d)?).map_err(D::Error::custom)
    }
}

/// A field of recorded times: one, maybe one, or a list.
pub trait FieldTimes: Sized {
    /// Its text as the file holds it.
    type Text: serde::de::DeserializeOwned;
    /// Each time of `text` read.
    fn read(text: Self::Text) -> Result<Self>;
}

impl FieldTimes for Stamp {
    type Text = String;
    fn read(text: String) -> Result<Stamp> {
        Stamp::parse(&text)
    }
}

/// None: `null`, or `""` (how `variant.json` keeps the running kernel's
/// `built_at`, which wbstall did not build).
impl FieldTimes for Option<Stamp> {
    type Text = Option<String>;
    fn read(text: Option<String>) -> Result<Option<Stamp>> {
        let text = text.filter(|t| !t.is_empty());
        text.as_deref().map(Stamp::parse).transpose()
    }
}

impl FieldTimes for Vec<Stamp> {
    type Text = Vec<String>;
    fn read(text: Vec<String>) -> Result<Vec<Stamp>> {
        text.iter().map(|t| Stamp::parse(t)).collect()
    }
}

/// Reads the times of the field `name` (serde's `deserialize_with` of a
/// time field, through a function of its own that names it: [`time_field`]):
/// a time not in the recorded form is an error naming the field and how to
/// write it. The loader's context names the file.
pub fn field<'de, D: Deserializer<'de>, T: FieldTimes>(
    d: D,
    name: &str,
) -> std::result::Result<T, D::Error> {
    T::read(T::Text::deserialize(d)?).map_err(|e| {
        D::Error::custom(format!(
            "`{name}`: {e}: write it as wbstall does, e.g. `20261129T201530Z`"
        ))
    })
}

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

/// Writes a time that may be missing as the file keeps it: `""` for none
/// (serde's `serialize_with`).
pub fn or_empty<S: Serializer>(t: &Option<Stamp>, s: S) -> std::result::Result<S::Ok, S::Error> {
    s.serialize_str(&t.map(Stamp::compact).unwrap_or_default())
}

/// `time_field!(started: Stamp)` defines `fn started`, serde's
/// `deserialize_with` of the time field `started` (a [`FieldTimes`]): its
/// error names the field.
macro_rules! time_field {
    ($name:ident: $times:ty) => {
        fn $name<'de, D: serde::Deserializer<'de>>(d: D) -> std::result::Result<$times, D::Error> {
            $crate::stamp::field(d, stringify!($name))
        }
    };
}
pub(crate) use time_field;

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

    #[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
    struct Record {
        #[serde(deserialize_with = "started")]
        started: Stamp,
        #[serde(default, deserialize_with = "ended")]
        ended: Option<Stamp>,
        #[serde(default, deserialize_with = "resumed")]
        resumed: Vec<Stamp>,
    }

    time_field!(started: Stamp);
    time_field!(ended: Option<Stamp>);
    time_field!(resumed: Vec<Stamp>);

    #[derive(Debug, PartialEq, serde::Serialize, serde::Deserialize)]
    struct Kernel {
        #[serde(deserialize_with = "built_at", serialize_with = "or_empty")]
        built_at: Option<Stamp>,
    }

    time_field!(built_at: Option<Stamp>);

    /// A time that may be missing and was always text (the running kernel's
    /// `built_at`) reads `""` as none and writes it back so.
    #[test]
    fn a_missing_time_kept_as_empty_text_round_trips() {
        for text in [r#"{"built_at":""}"#, r#"{"built_at":"20261206T062207Z"}"#] {
            let k: Kernel = serde_json::from_str(text).unwrap();
            assert_eq!(serde_json::to_string(&k).unwrap(), text);
        }
        let k: Kernel = serde_json::from_str(r#"{"built_at":""}"#).unwrap();
        assert_eq!(k.built_at, None);
    }

    /// A recorded time is written as it was read, byte for byte; a bad one
    /// is an error at load naming its field and how to write it.
    #[test]
    fn a_time_field_reads_and_writes_the_recorded_form_and_names_a_bad_one() {
        let text = r#"{"started":"20261202T060724Z","ended":null,"resumed":["20261203T000000Z"]}"#;
        let r: Record = serde_json::from_str(text).unwrap();
        assert_eq!(r.started, Stamp::parse("20261202T060724Z").unwrap());
        assert_eq!(serde_json::to_string(&r).unwrap(), text);
        let r: Record = serde_json::from_str(r#"{"started":"20261202T060724Z"}"#).unwrap();
        assert_eq!((r.ended, r.resumed.len()), (None, 0));
        for (bad, name) in [
            (r#"{"started":"2026-12-02T06:07:24Z"}"#, "`started`"),
            (r#"{"started":"20261202T060724Z","ended":"x"}"#, "`ended`"),
            (
                r#"{"started":"20261202T060724Z","resumed":["20261202T060724Z","2026"]}"#,
                "`resumed`",
            ),
        ] {
            let e = serde_json::from_str::<Record>(bad).unwrap_err().to_string();
            assert!(
                e.starts_with(&format!("{name}: `"))
                    && e.contains("is not a time as wbstall records them")
                    && e.contains("write it as wbstall does, e.g. `20261129T201530Z`"),
                "{e}"
            );
        }
        // Without a field of its own, the time still says what it is not.
        let e = serde_json::from_str::<Stamp>("\"x\"")
            .unwrap_err()
            .to_string();
        assert!(
            e.contains("`x` is not a time as wbstall records them"),
            "{e}"
        );
    }
}
