//! `Sequential`: the baseline every paper compares with.

use crate::error::Result;
use crate::policy::common::Ctx;
use crate::schedule::Schedule;

/// Topological order (Kahn, smallest id first), one device, one stream. The device is the one
/// that runs the whole graph fastest alone (a GPU when one can run every operator).
pub fn sequential(c: &Ctx) -> Result<Schedule> {
    let d = c.best_single_device(true)?;
    let n = c.n();
    Ok(Schedule::from_sequence(
        "sequential",
        &vec![d; n],
        &vec![0; n],
        &c.dag.topo,
    ))
}
