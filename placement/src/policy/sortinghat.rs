//! `SortingHat`: placeholder.
use crate::error::Result;
use crate::policy::Options;
use crate::policy::common::Ctx;
use crate::schedule::Schedule;
/// SortingHat.
pub fn sortinghat(c: &Ctx, _o: &Options) -> Result<Schedule> {
    crate::policy::heft::heft(c)
}
