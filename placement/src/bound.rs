//! A lower bound on the makespan of any schedule, printed beside every makespan.

use crate::graph::{CostGraph, Dag, DeviceKind, SlowdownModel};
use crate::topology::{Topology, op_time};

/// `max(critical path, work bound)`:
/// * critical path with free copies, each operator at its fastest device;
/// * work spread over the devices by speed: `Σ_v min_d t(v,d) / Σ_d lanes_d`, since a lane
///   progresses at most one unit of work per µs;
/// * under [`SlowdownModel::Resource`], also `Σ_v min_d a(v,d) / #devices`, where
///   `a = resource · t` on a GPU and `t / lanes` on a CPU: a GPU can never progress more than
///   one unit of resource-weighted work per µs.
///
/// Valid as long as slowdowns are ≥ 1 and measured t(S) are no shorter than the slowest member
/// alone. Returns 0 for an empty graph and `+∞` if some operator runs on no device.
pub fn lower_bound(g: &CostGraph, dag: &Dag, t: &Topology) -> f64 {
    let n = g.ops.len();
    let d = t.devices.len();
    if n == 0 || d == 0 {
        return 0.0;
    }
    let fastest: Vec<f64> = (0..n)
        .map(|v| {
            (0..d)
                .filter_map(|dev| op_time(g, t, v, dev))
                .fold(f64::INFINITY, f64::min)
        })
        .collect();
    let mut finish = vec![0.0f64; n];
    for &v in &dag.topo {
        let start = dag.preds[v]
            .iter()
            .map(|&(u, _)| finish[u])
            .fold(0.0, f64::max);
        finish[v] = start + fastest[v];
    }
    let cp = finish.iter().copied().fold(0.0, f64::max);
    let lanes: f64 = t.devices.iter().map(|x| x.streams as f64).sum();
    let work = fastest.iter().sum::<f64>() / lanes;
    let mut area = 0.0;
    if g.concurrency.model == SlowdownModel::Resource && g.concurrency.table.is_empty() {
        area = (0..n)
            .map(|v| {
                (0..d)
                    .filter_map(|dev| {
                        let x = op_time(g, t, v, dev)?;
                        let dv = &t.devices[dev];
                        Some(match dv.kind {
                            DeviceKind::Gpu => x * g.ops[v].resource.min(1.0),
                            DeviceKind::Cpu => x / dv.streams as f64,
                        })
                    })
                    .fold(f64::INFINITY, f64::min)
            })
            .sum::<f64>()
            / d as f64;
    }
    cp.max(work).max(area)
}
