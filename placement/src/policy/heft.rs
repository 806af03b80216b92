//! `Heft`: Heterogeneous Earliest Finish Time (Topcuoglu, Hariri, Wu, IEEE TPDS 2002).

use crate::error::Result;
use crate::policy::common::Ctx;
use crate::schedule::Schedule;

/// Classic HEFT. Priority = upward rank with mean computation and mean copy costs; operators
/// are taken in decreasing rank (among ready ones, which keeps the order topological even with
/// zero costs); each goes to the device with the earliest finish time under the insertion-based
/// policy (an idle gap between already placed operators may be used).
///
/// Choices: a processor is a device, so every device runs one stream (HEFT's processors do not
/// share anything; streams of one GPU do). The launch order is by estimated start time, which is
/// topological and lets the simulator reproduce the insertions.
pub fn heft(c: &Ctx) -> Result<Schedule> {
    let n = c.n();
    let rank = c.upward_rank();
    let order = c.priority_order(&rank);
    let mut busy: Vec<Vec<(f64, f64)>> = vec![Vec::new(); c.d()];
    let mut device = vec![0; n];
    let mut start = vec![0.0; n];
    let mut fin = vec![0.0; n];
    #[allow(clippy::needless_range_loop)]
    for &v in &order {
        let mut best = (f64::INFINITY, 0usize, 0.0f64);
        for d in 0..c.d() {
            let w = c.time[v][d];
            if !w.is_finite() {
                continue;
            }
            let ready = c.dag.preds[v]
                .iter()
                .map(|&(u, e)| {
                    fin[u]
                        + if device[u] == d {
                            0.0
                        } else {
                            c.comm(e, device[u], d)
                        }
                })
                .fold(0.0, f64::max);
            let s = earliest_gap(&busy[d], ready, w);
            if s + w < best.0 {
                best = (s + w, d, s);
            }
        }
        let (f, d, s) = best;
        device[v] = d;
        start[v] = s;
        fin[v] = f;
        let pos = busy[d].partition_point(|x| x.0 <= s);
        busy[d].insert(pos, (s, f));
    }
    let pos: Vec<usize> = {
        let mut p = vec![0; n];
        for (i, &v) in order.iter().enumerate() {
            p[v] = i;
        }
        p
    };
    let mut seq = order.clone();
    seq.sort_by(|&a, &b| start[a].total_cmp(&start[b]).then(pos[a].cmp(&pos[b])));
    Ok(Schedule::from_sequence("heft", &device, &vec![0; n], &seq))
}

/// Earliest start ≥ `ready` of a `w`-long slot in sorted busy intervals.
pub(crate) fn earliest_gap(busy: &[(f64, f64)], ready: f64, w: f64) -> f64 {
    let mut t = ready;
    for &(s, f) in busy {
        if t + w <= s {
            return t;
        }
        t = t.max(f);
    }
    t
}
