//! `Milp`: placeholder, replaced below.
use crate::error::Result;
use crate::policy::Options;
use crate::policy::common::Ctx;
use crate::schedule::Schedule;
/// MILP result.
pub struct MilpResult {
    /// schedule
    pub schedule: Schedule,
}
/// MILP.
pub fn milp(c: &Ctx, _o: &Options) -> Result<MilpResult> {
    Ok(MilpResult {
        schedule: crate::policy::heft::heft(c)?,
    })
}
