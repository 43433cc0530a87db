//! The older formats of `results.json`: what a record from before a field
//! existed is read with, one default per field, each saying which records
//! lack it, and the order a record's id is written in. Nothing here is
//! written into a new record; every field has it. The defaults of the
//! record's own types are generic over them: this module is below every
//! file of the record and uses none.

use serde::{ser::SerializeStruct, Serializer};

use crate::guest::{
    disk::Disk,
    plan::Detector,
    qemu::{historical_cpu_model, Clock},
    run_id::RunId,
};

/// `start_phase`: none in records from before scenarios had a `[phase]`.
pub fn start_phase<StartPhase>() -> Option<StartPhase> {
    None
}

/// `detector`: records from before the detector was chosen were classed by
/// the wbstall module.
pub fn detector() -> Detector {
    Detector::Module
}

/// `tracefs`: none in records from before the tracefs detector existed.
pub fn tracefs<Detected>() -> Option<Detected> {
    None
}

/// `witness_drops`: none in records from before the witness's histograms'
/// drops were kept apart (`witness.dropped` then stands for each).
pub fn witness_drops<Drops>() -> Option<Drops> {
    None
}

/// `phases`: none in records from before the guest sent where the boot's
/// time went.
pub fn phases<Phase>() -> Vec<Phase> {
    Vec::new()
}

/// `sleeps`: no file in records from before each classed sleep was kept
/// (`<boot>.sleeps.txt`); report.html then plots the sampler's pauses.
pub fn sleeps() -> Option<String> {
    None
}

/// `started`: none in records from before the boot's start on the host was
/// kept.
pub fn started<Stamp>() -> Option<Stamp> {
    None
}

/// `clock`: records from before the choice of clock ran on the real one.
pub fn clock() -> Clock {
    Clock::Real
}

/// `disk`: none in records from before the disk was chosen, whose disk
/// scenarios ran on the host's disk.
pub fn disk() -> Option<Disk> {
    None
}

/// `cpu_model`: records from before it was kept ran QEMU's `-cpu max`.
pub fn cpu_model() -> String {
    historical_cpu_model()
}

/// `tracefs.causes`: none in records from before the tracefs detector
/// classed the causes of stall sleeps (theirs have no cause to report).
pub fn causes<Causes>() -> Option<Causes> {
    None
}

/// `tracefs.work_vmscan`, `tracefs.vmscan_pages`: 0 in records from before
/// the tracefs detector counted reclaim's passes.
pub fn vmscan() -> u64 {
    0
}

/// `tracefs.pass_pages`, `tracefs.bdi_pass_pages`: none in records from
/// before the tracefs detector counted the pages its passes wrote.
pub fn pass_pages() -> Option<u64> {
    None
}

/// A record's id as every record has written it: `variant`, `scenario`,
/// `run` (a [`RunId`] elsewhere writes its scenario first).
pub fn id_as_recorded<S: Serializer>(id: &RunId, s: S) -> Result<S::Ok, S::Error> {
    let mut st = s.serialize_struct("RunId", 3)?;
    st.serialize_field("variant", &id.variant)?;
    st.serialize_field("scenario", &id.scenario)?;
    st.serialize_field("run", &id.run)?;
    st.end()
}
