//! fio's `--output-format=json` result, parsed (the job itself is
//! `guest::job::Job`).

use anyhow::{bail, Context, Result};
use serde::{Deserialize, Serialize};
use serde_json::Value;

/// What a run measured, from fio's JSON (group reporting: one job entry).
#[derive(Debug, Clone, Default, PartialEq, Serialize, Deserialize)]
pub struct FioResult {
    pub fio_version: String,
    /// Write bandwidth in MiB/s (fio reports KiB/s).
    pub bw_mib_s: f64,
    pub iops: f64,
    pub io_mib: f64,
    /// fio's measured runtime in ms (after ramp).
    pub runtime_ms: u64,
    /// Completion latency percentiles in microseconds, as (percentile, usec).
    pub clat_us: Vec<(f64, f64)>,
    pub clat_max_us: f64,
    pub clat_mean_us: f64,
    /// fio's job error code (0 = none).
    pub error: i64,
}

impl FioResult {
    /// The latency at a percentile (e.g. 99.0), if fio reported it.
    pub fn clat_at(&self, pct: f64) -> Option<f64> {
        self.clat_us
            .iter()
            .find(|(p, _)| (p - pct).abs() < 1e-6)
            .map(|&(_, v)| v)
    }
}

/// Parses fio's JSON output. fio may print warnings before the JSON object;
/// they are skipped.
pub fn parse(text: &str) -> Result<FioResult> {
    let start = text
        .find("{\n")
        .or_else(|| text.find('{'))
        .context("fio output holds no JSON object (did fio fail before writing it?)")?;
    let v: Value =
        serde_json::from_str(&text[start..]).context("fio's JSON is malformed or truncated")?;
    from_value(&v)
}

/// Several fio JSON outputs back to back (one per fio process), each parsed
/// as [`parse`] does; an error if there is none.
pub fn parse_all(text: &str) -> Result<Vec<FioResult>> {
    let start = text
        .find('{')
        .context("fio output holds no JSON object (did fio fail before writing it?)")?;
    let mut out = Vec::new();
    for (i, v) in serde_json::Deserializer::from_str(&text[start..])
        .into_iter::<Value>()
        .enumerate()
    {
        let v = v.with_context(|| format!("fio JSON {} is malformed or truncated", i + 1))?;
        out.push(from_value(&v).with_context(|| format!("fio JSON {}", i + 1))?);
    }
    Ok(out)
}

fn from_value(v: &Value) -> Result<FioResult> {
    let version = v["fio version"].as_str().unwrap_or("unknown").to_string();
    let jobs = v["jobs"]
        .as_array()
        .context("fio JSON has no `jobs` array")?;
    if jobs.len() != 1 {
        bail!(
            "expected one job entry (group_reporting), found {}",
            jobs.len()
        );
    }
    let job = &jobs[0];
    let w = &job["write"];
    let num = |v: &Value, what: &str| v.as_f64().with_context(|| format!("fio JSON lacks {what}"));
    let kib_s = num(&w["bw"], "write.bw")?;
    let clat = &w["clat_ns"];
    let mut clat_us: Vec<(f64, f64)> = clat["percentile"]
        .as_object()
        .map(|m| {
            m.iter()
                .filter_map(|(k, v)| Some((k.parse::<f64>().ok()?, v.as_f64()? / 1000.0)))
                .collect()
        })
        .unwrap_or_default();
    clat_us.sort_by(|a, b| a.0.total_cmp(&b.0));
    Ok(FioResult {
        fio_version: version,
        bw_mib_s: kib_s / 1024.0,
        iops: num(&w["iops"], "write.iops")?,
        io_mib: num(&w["io_kbytes"], "write.io_kbytes")? / 1024.0,
        runtime_ms: num(&w["runtime"], "write.runtime")? as u64,
        clat_us,
        clat_max_us: num(&clat["max"], "write.clat_ns.max")? / 1000.0,
        clat_mean_us: num(&clat["mean"], "write.clat_ns.mean")? / 1000.0,
        error: job["error"].as_i64().unwrap_or(0),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    const HOST: &str = include_str!("../../fixtures/fio/host-tmpfs.json");

    #[test]
    fn parses_a_group_reported_write_job() {
        let r = parse(HOST).unwrap();
        assert_eq!(r.fio_version, "fio-3.33");
        assert!((r.bw_mib_s - 5_495_398.0 / 1024.0).abs() < 1e-6);
        assert!((r.iops - 42_932.801_065).abs() < 1e-6);
        assert_eq!(r.runtime_ms, 3006);
        assert_eq!(r.clat_at(50.0), Some(17.792));
        assert_eq!(r.clat_at(99.9), Some(17_956.864));
        assert_eq!(r.clat_max_us, 26_249.613);
        assert_eq!(r.error, 0);
    }

    #[test]
    fn warnings_before_the_json_are_skipped() {
        let noisy = format!("fio: file hash not empty on exit\n{HOST}");
        assert_eq!(parse(&noisy).unwrap(), parse(HOST).unwrap());
    }

    #[test]
    fn truncated_or_missing_json_is_an_error() {
        let e = format!("{:#}", parse(&HOST[..HOST.len() / 2]).unwrap_err());
        assert!(e.contains("malformed or truncated"), "{e}");
        let e = parse("fio: pid=0, err=22/file:filesetup.c")
            .unwrap_err()
            .to_string();
        assert!(e.contains("no JSON"), "{e}");
    }
}
