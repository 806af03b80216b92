//! `Greedy`: the wavefront policy ("simple greedy" in LIOS, Rammer's rTask waves).

use crate::error::Result;
use crate::policy::common::Ctx;
use crate::schedule::Schedule;

/// Every ready operator launches: operators are grouped in waves by their depth (longest
/// number of edges from a source), waves launch in order, and the operators of one wave go
/// round-robin over the streams of the single best device. Choice left open by the papers:
/// one device only (a wave spread over several devices would add copies the policy ignores).
pub fn greedy(c: &Ctx) -> Result<Schedule> {
    let d = c.best_single_device(true)?;
    let n = c.n();
    let mut depth = vec![0usize; n];
    for &v in &c.dag.topo {
        depth[v] = c.dag.preds[v]
            .iter()
            .map(|&(u, _)| depth[u] + 1)
            .max()
            .unwrap_or(0);
    }
    let mut seq: Vec<usize> = (0..n).collect();
    seq.sort_by_key(|&v| (depth[v], v));
    let lanes = c.t.devices[d].streams;
    let mut stream = vec![0; n];
    let mut k = 0;
    let mut cur = usize::MAX;
    for &v in &seq {
        if depth[v] != cur {
            cur = depth[v];
            k = 0;
        }
        stream[v] = k % lanes;
        k += 1;
    }
    Ok(Schedule::from_sequence(
        "greedy",
        &vec![d; n],
        &stream,
        &seq,
    ))
}
