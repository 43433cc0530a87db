//! `qemu-test`'s boots of points that are not the repository's scenarios
//! (`cargo xtask hunt`'s): planned, booted and recorded as `measure` does,
//! judged by the caller.

use std::path::PathBuf;

use anyhow::Result;
use xshell::Shell;

use super::request::QemuTestRequest;
use crate::{
    guest::{plan, scenario::Scenario},
    results::{record::RunRecord, session::BootFailure},
    session::{
        boot_all::{boot_all, initrds},
        guest_session,
    },
    util,
};

impl QemuTestRequest {
    /// Boots `points` (scenarios made by `cargo xtask hunt`, not the
    /// repository's) on the selected kernels into a new results directory,
    /// every run recorded as `measure` records them; judged by the caller,
    /// not against the expectations (a point has none). Returns the
    /// directory and the records in plan order.
    pub fn boot_points(
        &self,
        sh: &Shell,
        points: Vec<Scenario>,
    ) -> Result<(PathBuf, Vec<RunRecord>, Vec<BootFailure>)> {
        let parent = self.results_parent()?;
        util::check_writable(&parent)?;
        let tc = self.tools(sh)?;
        let i = self.inputs_for(sh, Some(points))?;
        let (runs, jobs_vm) = (&i.runs.0, i.jobs_vm.0);
        let built = self.kernels(sh, &tc, &i.selection)?;
        let (base, tc) = self.guest_base(sh, tc, &built, &i.external, None)?;
        let session = self.session(&tc, &built, &i)?;
        let opened = guest_session::open(sh, session, &built, &parent, None)?;
        let (dir, mut session) = (opened.dir, opened.session);
        let detectors = plan::detectors(self.detector, &built)?;
        let initrds = initrds(&base, &built)?;
        let plan = self.plan(&built, &initrds, &i.scenarios, runs, &i.machine)?;
        let plan = plan::with_detectors(plan, &detectors);
        let records = boot_all(sh, &dir, &plan, jobs_vm, &mut session, Vec::new())?;
        Ok((dir, records, session.failures))
    }
}
